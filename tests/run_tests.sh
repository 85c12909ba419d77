#!/bin/bash
# Run every test of the suite, each in its own process with its own time
# limit, and end with the line "N passed, M failed".
#   tests/run_tests.sh [gtest filter | @PASS]
# @asan, @valgrind: the tests that pass runs, chosen by their names
# (tests/test_names.sh; the rule is in tests/README.md).
set -u
# Run from a build directory (make check does), or from the source tree
# for an in-tree build.
srcdir=$(cd "$(dirname "$0")/.." && pwd)
if [ -x "$(pwd)/tests/axon_gtest" ] || [ -f "$(pwd)/Makefile" ]; then
    builddir=$(pwd)
else
    builddir=$srcdir
fi
gtest="$builddir/tests/axon_gtest"
# Run the real binary, not libtool's wrapper script: the wrapper costs a
# quarter second per test.
if [ -x "$builddir/tests/.libs/axon_gtest" ]; then
    gtest="$builddir/tests/.libs/axon_gtest"
    export LD_LIBRARY_PATH="$builddir/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
filter=${1:-*}
per_test_timeout=${AXON_TEST_TIMEOUT:-180}
# Knobs of this script; read before the AXON_* environment is cleared.
gtest_only=${AXON_TEST_GTEST_ONLY:-0}
scripts_only=${AXON_TEST_SCRIPTS_ONLY:-0}   # the script tests alone (contrib/setup.sh)
# Which script tests: all, untimed (their verdicts hold on a busy host, so CI
# runs them beside its background builds) or timed (they compare timings:
# tools_test.sh's ratios, the MPI ring's; CI runs them after the builds).
scripts_set=${AXON_TEST_SCRIPTS_SET:-all}
use_valgrind=${AXON_TEST_VALGRIND:-0}
use_batch=${AXON_TEST_BATCH:-0}
group_max=${AXON_TEST_GROUP:-12}   # run_group, below
per_batch=${AXON_TEST_BATCH_SUITES:-10}   # run_batch, below
# ...and no more suites once a batch holds AXON_TEST_BATCH_TESTS tests: ten
# suites of the lanes made one batch of 526 tests, 147 s of the ASan pass's
# 218 s, the other job idle for most of it.
per_batch_tests=${AXON_TEST_BATCH_TESTS:-100}
# AXON_TEST_JOBS=N: run N tests at a time (each still in its own process).
jobs=${AXON_TEST_JOBS:-1}
# Tests labelled Timed or Fault run "alone": after the others, at most two at
# a time whatever AXON_TEST_JOBS says (AXON_TEST_ALONE_JOBS, 1 or 2): they
# detect a dead peer by a timeout shortened to fit the test (ud's 3 s against
# its default 30 s, ofi's pings), and a peer starved of CPU by other tests
# looks dead to them (seen with three tests at a time on two cores). They
# mostly wait on those timers: two at a time on two cores took half the
# time, each test as long as alone (96 tests, five runs, nice-19 load beside).
alone_jobs=${AXON_TEST_ALONE_JOBS:-2}
names="$srcdir/tests/test_names.sh"
# timeout(1) that also prints where a hung test's threads are (tests/harness/bounded.sh)
bounded="$srcdir/tests/harness/bounded.sh"
if ! [[ "$jobs" =~ ^[1-9][0-9]*$ ]]; then
    echo "AXON_TEST_JOBS=$jobs: not a positive number" >&2
    exit 2
fi
case "$scripts_set" in
    all|untimed|timed) ;;
    *) echo "AXON_TEST_SCRIPTS_SET=$scripts_set: not all, untimed or timed" >&2; exit 2 ;;
esac
if ! [[ "$group_max" =~ ^[1-9][0-9]*$ ]]; then
    echo "AXON_TEST_GROUP=$group_max: not a positive number" >&2
    exit 2
fi
if ! [[ "$per_batch" =~ ^[1-9][0-9]*$ ]] || ! [[ "$per_batch_tests" =~ ^[1-9][0-9]*$ ]]; then
    echo "AXON_TEST_BATCH_SUITES=$per_batch, AXON_TEST_BATCH_TESTS=$per_batch_tests:" \
         "both must be positive numbers" >&2
    exit 2
fi
[ "$alone_jobs" = 1 ] || alone_jobs=2
[ "$jobs" -ge "$alone_jobs" ] || alone_jobs=$jobs
# AXON_TEST_VALGRIND=1: run each test under valgrind, failing on any error or leak.
wrapper=""
if [ "$use_valgrind" = 1 ]; then
    wrapper="valgrind -q --error-exitcode=99 --leak-check=full
             --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect
             --suppressions=$srcdir/tests/sanitizers/valgrind.supp"
    per_test_timeout=$((per_test_timeout * 3))
fi
passed=0
failed=0
failed_names=()

# Tests must not see the developer's AXON_* settings.
for v in $(env | sed -n 's/^\(AXON_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done

record() {  # name status
    if [ "$2" -eq 0 ]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        failed_names+=("$1")
    fi
}

# A unit of work runs in the background: it prints its report on stdout and
# one verdict per test on fd 3 ("0 name" passed, "1 name" failed; skipped
# tests have none), so the totals are kept here, in the parent.

# One test in its own process: a PASS or SKIP line, or the test's output
# and a FAIL line.
# Times from $EPOCHREALTIME and checks by bash's own matching, not by a
# process: a fork costs ~10 ms on some virtual machines, and `date` and two
# greps a test were half a small test's time.
run_one() {  # name
    local t=$1 out rc ms start=${EPOCHREALTIME//[!0-9]/}
    out=$("$bounded" "$per_test_timeout" $wrapper "$gtest" --gtest_filter="$t" 2>&1)
    rc=$?
    if [ $rc -eq 0 ] && [[ $out == *$'\n[  SKIPPED ] 1 test'* ]]; then
        # GTEST_SKIP: the case does not apply to this parameter (counted neither way)
        printf 'SKIP  %-70s %s\n' "$t" "$(grep -m1 -A1 'Skipped$' <<<"$out" | tail -1)"
        return
    fi
    if [ $rc -eq 0 ] && [[ $out != *$'\n[  PASSED  ] 1 test'* ]]; then
        rc=1   # filtered to nothing, or the binary lied
    fi
    ms=$(( (${EPOCHREALTIME//[!0-9]/} - start) / 1000 ))
    if [ $rc -eq 0 ]; then
        printf 'PASS  %-70s %6d ms\n' "$t" "$ms"
        echo "0 $t" >&3
        return
    fi
    if [ $rc -eq 124 ]; then
        echo "TIMEOUT after ${per_test_timeout}s"
        echo "$out" | tail -300   # the threads' stacks
    else
        echo "$out" | tail -40
    fi
    printf 'FAIL  %-70s (rc=%d)\n' "$t" "$rc"
    echo "1 $t" >&3
}

# The plain pass runs short tests (tests/test_names.sh --select group) up to
# AXON_TEST_GROUP (default 12; 1 = a process each) of one suite to a process:
# a process a test cost ~100 ms of forks, shells and program start on a slow
# virtual machine, a third of the plain pass's CPU. Each test keeps its own
# verdict, time and output (googletest's lines). If the process dies (a
# crash, the time limit), the test it was in fails with the output's end and
# those it never started run again, a process each.
# Reads a group's output; prints the report and, for run_group, a line
# "\x01P name" (passed), "\x01F name" (failed) or "\x01S name" (skipped) a test.
group_awk='
function block(n,   i) { for (i = (nbuf > n ? nbuf - n + 1 : 1); i <= nbuf; i++) print buf[i] }
/^\[ RUN      \] / { cur = $4; nbuf = 0; next }
/^\[ +(OK|FAILED|SKIPPED) +\] / && match($0, /\(([0-9]+) ms\)$/) {
    name = $4; sub(/,$/, "", name)
    ms = substr($0, RSTART + 1, RLENGTH - 5) + 0
    if ($2 == "OK") {
        printf "PASS  %-70s %6d ms\n", name, ms; print "\001P " name
    } else if ($2 == "SKIPPED") {
        why = ""
        for (i = 1; i < nbuf; i++) if (buf[i] ~ /Skipped$/) why = buf[i + 1]
        printf "SKIP  %-70s %s\n", name, why; print "\001S " name
    } else {
        block(40); printf "FAIL  %-70s (in a group)\n", name; print "\001F " name
    }
    cur = ""; nbuf = 0; next
}
cur != "" && !/ axon (DEBUG|TRACE) / { buf[++nbuf] = $0 }
END {
    if (cur != "" && rc != 0) {
        block(rc == 124 ? 300 : 40)
        printf "FAIL  %-70s (rc=%d: the group'"'"'s process ended in it)\n", cur, rc
        print "\001F " cur
    }
}'
run_group() {  # tests... (of one suite)
    local t line out rc
    local -A seen=()
    out=$("$bounded" $((per_test_timeout + 10 * $#)) $wrapper "$gtest" \
          --gtest_filter="$(IFS=:; echo "$*")" 2>&1)
    rc=$?
    while IFS= read -r line; do
        if [[ $line == $'\x01'* ]]; then
            t=${line:3}
            seen[$t]=1
            case ${line:1:1} in
                P) echo "0 $t" >&3 ;;
                F) echo "1 $t" >&3 ;;
            esac
        else
            printf '%s\n' "$line"
        fi
    done < <(awk -v rc="$rc" "$group_awk" <<<"$out")
    for t in "$@"; do
        [ -n "${seen[$t]:-}" ] || run_one "$t"
    done
    if [ $rc -ne 0 ] && [ $rc -ne 1 ] && [ ${#seen[@]} -eq $# ]; then
        # every test had its verdict, then the process failed (at exit: a leak, a crash)
        echo "$out" | tail -40
        printf 'FAIL  %-70s (rc=%d after its last test)\n' "group-of-$1" "$rc"
        echo "1 group-of-$1" >&3
    fi
}

# AXON_TEST_BATCH=1: tests share processes, for passes whose per-process
# start is dear (valgrind: ~4 s each, leak check included): the tests of up
# to AXON_TEST_BATCH_SUITES suites (default 10; whole suites up to about
# AXON_TEST_BATCH_TESTS tests, default 100) in one process. An error
# valgrind reports at exit (a leak) or a crash cannot say which test it was:
# the group's suites then run again, a process each, and a suite's error
# fails every test of that suite.
batch_exec() {  # tests... : sets batch_out, batch_rc, batch_ms
    local flt start=${EPOCHREALTIME//[!0-9]/}
    flt=$(IFS=:; echo "$*")
    batch_out=$("$bounded" $((per_test_timeout * $#)) $wrapper "$gtest" --gtest_filter="$flt" 2>&1)
    batch_rc=$?
    batch_ms=$(( (${EPOCHREALTIME//[!0-9]/} - start) / 1000 ))
}
batch_report() {  # label tests... : a verdict per test from the last batch_exec
    local label=$1 t; shift
    for t in "$@"; do
        if [ $batch_rc -le 1 ] && [[ $batch_out == *"[  SKIPPED ] $t ("* ]]; then
            printf 'SKIP  %s\n' "$t"
        elif [ $batch_rc -le 1 ] && [[ $batch_out == *"[       OK ] $t ("* ]]; then
            printf 'PASS  %-70s %6d ms (%s)\n' "$t" "$batch_ms" "$label"
            echo "0 $t" >&3
        else
            printf 'FAIL  %-70s (rc=%d, %s)\n' "$t" "$batch_rc" "$label"
            echo "1 $t" >&3
        fi
    done
    # What each failed test printed (its RUN .. FAILED block, log lines of other
    # tests left out), then the end of the output (an error valgrind reports at exit).
    for t in "$@"; do
        [[ $batch_out == *"[  FAILED  ] $t ("* ]] || continue
        awk -v t="$t" 'index($0, "[ RUN      ] " t) == 1 { on = 1 }
                       on && !/ axon (DEBUG|TRACE) / { print }
                       on && index($0, "[  FAILED  ] " t " (") == 1 { exit }' <<<"$batch_out" |
            head -40
    done
    if [ $batch_rc -gt 1 ]; then
        echo "$batch_out" | grep -v '^\[ \| OK \]\|^\[ RUN\| axon DEBUG ' | tail -60
    fi
}
suite_of() { local t=${1%%.*}; echo "$t"; }
run_batch() {  # tests... (whole suites, in order)
    local t s suites=() cur=()
    batch_exec "$@"
    if [ $batch_rc -le 1 ]; then
        batch_report "batch of $(printf '%s\n' "$@" | sed 's/\..*//' | uniq | wc -l) suites" "$@"
        return
    fi
    # rerun suite by suite: the verdicts say which suite the error was in
    echo "== a batch ended with rc=$batch_rc: its suites again, one process each"
    s=""
    for t in "$@" ""; do
        if [ "$(suite_of "$t")" != "$s" ] && [ ${#cur[@]} -gt 0 ]; then
            batch_exec "${cur[@]}"
            batch_report "suite $s" "${cur[@]}"
            cur=()
        fi
        s=$(suite_of "$t")
        [ -n "$t" ] && cur+=("$t")
    done
}

# A pool of $jobs units at a time. Each writes its report to a file, printed
# whole when the unit ends, so reports never interleave.
pool_dir=$(mktemp -d)
trap 'rm -rf "$pool_dir"' EXIT
declare -A pool_files=()  # by pid: the unit's report and verdict files
pool_n=0
# (The shell's own read and printf, no cat or rm: forks are dear here. The
# files go with the directory at exit.)
pool_reap() {
    local pid status name text=
    wait -n -p pid
    IFS= read -r -d '' text <"${pool_files[$pid]}.out"
    printf '%s' "$text"
    while read -r status name; do
        record "$name" "$status"
    done <"${pool_files[$pid]}.verdict"
    unset "pool_files[$pid]"
}
pool_start() {  # command...
    while [ ${#pool_files[@]} -ge "$jobs" ]; do
        pool_reap
    done
    pool_n=$((pool_n + 1))
    local f=$pool_dir/$pool_n
    "$@" >"$f.out" 3>"$f.verdict" &
    pool_files[$!]=$f
}
pool_drain() {
    while [ ${#pool_files[@]} -gt 0 ]; do
        pool_reap
    done
}

# The gtest tests a filter selects, one "Suite.Name" per line.
list_tests() {  # filter
    "$gtest" --gtest_list_tests --gtest_filter="$1" | awk '
        /^[^ ]/ { suite = $1; next }
        /^  /   { print suite $1 }'
}

# The tests of up to $per_batch suites a process (AXON_TEST_BATCH), a batch
# closed at a suite's start once it holds $per_batch_tests tests
batch_start() {  # tests... (whole suites, in order)
    local t s i batch_suite="" batch_n=0 batch_tests=() batches=() sizes=()
    local -
    set -f   # a batch is its test names split at spaces: no globbing
    for t in "$@"; do
        s=${t%%.*}
        if [ "$s" != "$batch_suite" ]; then
            if [ $batch_n -ge "$per_batch" ] || [ ${#batch_tests[@]} -ge "$per_batch_tests" ]; then
                batches+=("${batch_tests[*]}")
                sizes+=(${#batch_tests[@]})
                batch_tests=()
                batch_n=0
            fi
            batch_suite=$s
            batch_n=$((batch_n + 1))
        fi
        batch_tests+=("$t")
    done
    if [ ${#batch_tests[@]} -gt 0 ]; then
        batches+=("${batch_tests[*]}")
        sizes+=(${#batch_tests[@]})
    fi
    # Most tests first (the order of equal ones kept): a big batch started
    # last runs on alone while the other jobs have nothing left to take.
    for i in $(for i in "${!batches[@]}"; do echo "${sizes[$i]} $i"; done |
               sort -s -k1,1nr | cut -d' ' -f2); do
        pool_start run_batch ${batches[$i]}
    done
}

if [ "$scripts_only" = 1 ]; then
    :
elif [ -x "$gtest" ]; then
    # The test processes' malloc on transparent huge pages (unless
    # GLIBC_TUNABLES says otherwise): their buffers are zeroed and filled
    # page by page, and on a virtual machine each first touch of a 4 KiB page
    # traps (a fifth of the plain pass's CPU). A seventh less CPU for the pass,
    # which CI's background builds take. The sanitizers' and valgrind's
    # allocators ignore it; the script tests do not get it.
    tunables_before=${GLIBC_TUNABLES-unset}
    [[ ${GLIBC_TUNABLES:-} == *glibc.malloc.hugetlb=* ]] ||
        export GLIBC_TUNABLES=${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.malloc.hugetlb=1
    case "$filter" in
        @*) tests=$(list_tests '*' | bash "$names" --select "${filter#@}") || exit 2 ;;
        *)  tests=$(list_tests "$filter") ;;
    esac
    # Timed and Fault tests run after the others, at most two at a time (above)
    declare -A alone=()
    for t in $(list_tests '*' | bash "$names" --select alone); do
        alone[$t]=1
    done
    if [ "$use_batch" = 1 ]; then
        together=()
        by_one=()
        for t in $tests; do
            if [ -n "${alone[$t]:-}" ]; then by_one+=("$t"); else together+=("$t"); fi
        done
        batch_start "${together[@]}"
        pool_drain
        jobs=$alone_jobs
        batch_start "${by_one[@]}"
    else
        declare -A groupable=()
        if [ "$group_max" -gt 1 ]; then
            for t in $(list_tests '*' | bash "$names" --select group); do
                groupable[$t]=1
            done
        fi
        group=()
        for t in $tests; do
            [ -z "${alone[$t]:-}" ] || continue
            if [ -z "${groupable[$t]:-}" ]; then
                pool_start run_one "$t"
                continue
            fi
            if [ ${#group[@]} -ge "$group_max" ] ||
               { [ ${#group[@]} -gt 0 ] && [ "${t%%.*}" != "${group[0]%%.*}" ]; }; then
                pool_start run_group "${group[@]}"
                group=()
            fi
            group+=("$t")
        done
        [ ${#group[@]} -eq 0 ] || pool_start run_group "${group[@]}"
        pool_drain
        jobs=$alone_jobs
        for t in $tests; do
            [ -z "${alone[$t]:-}" ] || pool_start run_one "$t"
        done
    fi
    pool_drain
    if [ "$tunables_before" = unset ]; then
        unset GLIBC_TUNABLES
    else
        export GLIBC_TUNABLES=$tunables_before
    fi
else
    echo "tests/axon_gtest is not built (is googletest installed?)"
    record "gtest-binary-present" 1
fi

# Script tests: each prints "PASS name" or "FAIL name" (other lines pass through).
script_verdicts() {  # < the script's output
    local verdict name rest
    while read -r verdict name rest; do
        case "$verdict" in
            PASS) printf 'PASS  %-70s %s\n' "$name" "$rest"; record "$name" 0 ;;
            FAIL) echo "FAIL  $name"; record "$name" 1 ;;
            *)    echo "$verdict $name${rest:+ $rest}" ;;
        esac
    done
}
run_script_tests() {  # time-limit script [arguments after the build directory]
    local start=$SECONDS
    script_verdicts < <(timeout -k 5 "$1" bash "$2" "$builddir" "${@:3}" 2>&1 ||
                        echo "FAIL $(basename "$2")-exit-status")
    echo "== $(basename "$2") took $((SECONDS - start))s"
}
# The same in the background, its output kept for script_tests_collect.
script_tests_start() {  # output-file time-limit script [arguments...]
    local out=$1; shift
    (timeout -k 5 "$1" bash "$2" "$builddir" "${@:3}" 2>&1 ||
     echo "FAIL $(basename "$2")-exit-status") >"$out" &
}
script_tests_collect() {  # pid output-file name
    local start=$SECONDS
    wait "$1"
    script_verdicts <"$2"
    rm -f "$2"
    echo "== $3 done (waited $((SECONDS - start))s more)"
}
if [ "$filter" = "*" ] && [ "$gtest_only" != 1 ] && [ "$scripts_set" != timed ]; then
    # The test names (tests/README.md), the layer rules (docs/design.md), the
    # harness, a short soak, rdma-core's programs on softib's libibverbs, then
    # libfabric's own provider tests (fabtests) against Axon's provider and,
    # at the same time, Sandia OpenSHMEM's unit tests (a selection, 2 and 4
    # PEs) over it. Their verdicts do not depend on the host being quiet.
    run_script_tests 60 "$names"
    run_script_tests 120 "$srcdir/tests/layering/check_layers_test.sh"
    run_script_tests 60 "$srcdir/tests/harness/bounded_test.sh"
    run_script_tests 60 "$srcdir/tests/harness/run_tests_test.sh"
    # a short soak: shm and rc, ranks killed and restarted (tests/soak_test.sh)
    run_script_tests 120 "$srcdir/tests/soak_test.sh"
    run_script_tests 300 "$srcdir/tests/softib_verbs_test.sh"
    # fabtests' two halves and SOS (its build, the first time) at once:
    # runfabtests.sh mostly waits in sleeps. Reports follow each other.
    sos_pid=
    fab_pid=
    if [ -f "$srcdir/tests/shmem/run_sos_tests.sh" ]; then
        sos_out=$(mktemp)
        # the provider has what SOS asks for now: a refusal is a failure, not a skip
        SOS_REQUIRE=1 script_tests_start "$sos_out" 600 \
            "$srcdir/tests/shmem/run_sos_tests.sh" axon
        sos_pid=$!
    fi
    if [ -f "$srcdir/tests/ofi/run_fabtests.sh" ]; then
        fab_out=$(mktemp)
        script_tests_start "$fab_out" 900 "$srcdir/tests/ofi/run_fabtests.sh" unit,functional
        fab_pid=$!
        run_script_tests 900 "$srcdir/tests/ofi/run_fabtests.sh" short
    fi
    [ -z "$fab_pid" ] || script_tests_collect "$fab_pid" "$fab_out" "run_fabtests.sh unit,functional"
    [ -z "$sos_pid" ] || script_tests_collect "$sos_pid" "$sos_out" run_sos_tests.sh
fi
if [ "$filter" = "*" ] && [ "$gtest_only" != 1 ] && [ "$scripts_set" != untimed ]; then
    # The tools (their checks include speed ratios), then unmodified Open MPI
    # programs over Axon's libfabric provider (the oversubscribed ring's 2x).
    run_script_tests 600 "$srcdir/tests/tools_test.sh"
    if [ -f "$srcdir/tests/mpi/run_mpi_tests.sh" ]; then
        # Open MPI's own ob1 (which checks the programs, not Axon) only on request;
        # axon-osc: the one-sided programs through osc rdma + btl ofi on the provider.
        MPI_TEST_CONFIGS=${MPI_TEST_CONFIGS:-axon axon-tcp axon-osc} \
            run_script_tests 900 "$srcdir/tests/mpi/run_mpi_tests.sh"
    fi
fi

if [ $failed -gt 0 ]; then
    echo "failed tests:"
    printf '  %s\n' "${failed_names[@]}"
fi
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
