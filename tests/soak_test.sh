#!/bin/bash
# A short soak (contrib/bench/soak.sh): 3 ranks for a few seconds over shm
# and over rc on softib, a rank killed and restarted every 2 s (so at least
# one kill each). Prints "PASS soak_<tl>" or "FAIL soak_<tl>" per
# transport, for run_tests.sh. RSS growth may reach 20 % or 8 MiB here: six
# seconds judge the kills and the checks, the long run (docs/performance.md)
# the memory.
#   tests/soak_test.sh BUILDDIR
set -u
builddir=${1:-$(pwd)}
srcdir=$(cd "$(dirname "$0")/.." && pwd)
export AXON_PERF=$builddir/tools/axon_perf

for tl in shm rc; do
    out=$(bash "$srcdir/contrib/bench/soak.sh" --tls "$tl" --ranks 3 --time 6 \
              --kill-interval 2 -- -g 20:8 2>&1)
    line=$(grep "^soak $tl: " <<<"$out")
    echo "    $line"
    kills=$(sed -n 's/.* kills=\([0-9]*\) .*/\1/p' <<<"$line")
    if [[ $line == "soak $tl: PASS"* ]] && [ "${kills:-0}" -ge 1 ]; then
        echo "PASS soak_$tl"
    else
        echo "FAIL soak_$tl"
        [ "${kills:-0}" -ge 1 ] || echo "    no rank was killed"
        sed 's/^/    | /' <<<"$out" | head -120
    fi
done
