#!/bin/bash
# run_fuzzers.sh BUILDDIR [SECONDS]: each fuzzer `make fuzz` built, for SECONDS
# (default 5) from Axon's own seeds (tests/fuzz/fuzz_seeds) and the kept
# regressions. A "PASS fuzz-<name>" or "FAIL fuzz-<name>" line per harness (a
# failure shows the report and where the crashing input is), then
# "N passed, M failed".
set -u
builddir=$(cd "${1:?usage: run_fuzzers.sh BUILDDIR [SECONDS]}" && pwd)
seconds=${2:-5}
srcdir=$(cd "$(dirname "$0")/../.." && pwd)
work=$builddir/tests/fuzz/run
rm -rf "$work"
mkdir -p "$work/corpus" "$work/crashes"

passed=0
failed=0
verdict() {  # PASS|FAIL name detail
    echo "$1  $2 $3"
    if [ "$1" = PASS ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
}

if ! "$builddir/tests/fuzz/fuzz_seeds" "$work/seeds" >"$work/seeds.log" 2>&1; then
    sed 's/^/    | /' "$work/seeds.log"
    verdict FAIL fuzz-seeds "(Axon could not make the seeds)"
fi
for seeds in "$work"/seeds/*/; do
    [ -d "$seeds" ] || continue
    name=$(basename "$seeds")
    fuzzer=$builddir/tests/fuzz/bin/fuzz_$name
    if [ ! -x "$fuzzer" ]; then
        verdict FAIL "fuzz-$name" "(no fuzzer: tests/fuzz/fuzz.mk does not build it)"
        continue
    fi
    dirs=("$work/corpus/$name" "$seeds")
    mkdir -p "$work/corpus/$name"
    [ -d "$srcdir/tests/fuzz/regressions/$name" ] && dirs+=("$srcdir/tests/fuzz/regressions/$name")
    log=$work/$name.log
    start=$SECONDS
    if "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
           -artifact_prefix="$work/crashes/$name-" "${dirs[@]}" >"$log" 2>&1; then
        runs=$(sed -n 's/^#\([0-9]*\).*DONE.*/\1/p' "$log" | tail -n 1)
        verdict PASS "fuzz-$name" "(${runs:-?} runs in $((SECONDS - start)) s)"
    else
        grep -A 30 -m 1 'ERROR: \|runtime error: \|==ERROR' "$log" | sed 's/^/    | /'
        ls "$work/crashes/$name-"* 2>/dev/null | sed 's/^/    | input: /'
        verdict FAIL "fuzz-$name" "(log: $log)"
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
