#!/bin/bash
# run_fuzzers.sh BUILDDIR [SECONDS]: each fuzzer `make fuzz` built, for SECONDS
# (default 5) from Axon's own seeds (tests/fuzz/fuzz_seeds) and the kept
# regressions, AXON_FUZZ_JOBS (default: the cores, at most 2) at a time. A
# "PASS fuzz-<name>" or "FAIL fuzz-<name>" line per harness (a failure shows
# the report and where the crashing input is), then "N passed, M failed".
set -u
builddir=$(cd "${1:?usage: run_fuzzers.sh BUILDDIR [SECONDS]}" && pwd)
seconds=${2:-5}
jobs=${AXON_FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
[ "$jobs" -gt 2 ] && [ -z "${AXON_FUZZ_JOBS:-}" ] && jobs=2
srcdir=$(cd "$(dirname "$0")/../.." && pwd)
work=$builddir/tests/fuzz/run
rm -rf "$work"
mkdir -p "$work/corpus" "$work/crashes"

# One fuzzer; its verdict line goes to $work/<name>.verdict.
fuzz_one() {  # name
    local name=$1 fuzzer=$builddir/tests/fuzz/bin/fuzz_$1 log=$work/$1.log
    local dirs=("$work/corpus/$name" "$work/seeds/$name") start=$SECONDS runs
    if [ ! -x "$fuzzer" ]; then
        echo "FAIL  fuzz-$name (no fuzzer: tests/fuzz/fuzz.mk does not build it)" >"$work/$name.verdict"
        return
    fi
    mkdir -p "$work/corpus/$name"
    [ -d "$srcdir/tests/fuzz/regressions/$name" ] && dirs+=("$srcdir/tests/fuzz/regressions/$name")
    if "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
           -artifact_prefix="$work/crashes/$name-" "${dirs[@]}" >"$log" 2>&1; then
        runs=$(sed -n 's/^#\([0-9]*\).*DONE.*/\1/p' "$log" | tail -n 1)
        echo "PASS  fuzz-$name (${runs:-?} runs in $((SECONDS - start)) s)" >"$work/$name.verdict"
    else
        { echo "FAIL  fuzz-$name (log: $log)"
          # the harness's own line (a broken property) comes just before libFuzzer's
          grep -B 2 -A 24 -m 1 'ERROR: \|runtime error: ' "$log" | sed 's/^/    | /'
          ls "$work/crashes/$name-"* 2>/dev/null | sed 's/^/    | input: /'
        } >"$work/$name.verdict"
    fi
}

passed=0
failed=0
if ! "$builddir/tests/fuzz/fuzz_seeds" "$work/seeds" >"$work/seeds.log" 2>&1; then
    sed 's/^/    | /' "$work/seeds.log"
    echo "FAIL  fuzz-seeds (Axon could not make every harness's seeds)"
    failed=$((failed + 1))
fi
names=()
for seeds in "$work"/seeds/*/; do
    [ -d "$seeds" ] && names+=("$(basename "$seeds")")
done
running=0
for name in "${names[@]}"; do
    fuzz_one "$name" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait -n
        running=$((running - 1))
    fi
done
wait
for name in "${names[@]}"; do
    cat "$work/$name.verdict"
    if grep -q '^PASS' "$work/$name.verdict"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
