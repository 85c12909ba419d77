#!/bin/bash
# Tests of run_tests.sh's groups (several short tests in one process): a
# stand-in for axon_gtest whose tests pass, fail, skip and crash shows that
# every test keeps its own verdict, that the test a group's process died in
# fails, and that the ones it never started run again alone. Prints
# "PASS name" or "FAIL name" per check.
#   tests/harness/run_tests_test.sh BUILDDIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
run_tests="$here/../run_tests.sh"
tmp=$(mktemp -d /tmp/axon-run-tests-XXXXXX)
trap "rm -rf \"$tmp\"" EXIT

check_tail=40
. "$here/script_check.sh"

# The stand-in: Fake.{Passes,Fails,Skips,Crashes,NeverStarted}, run in the
# order the filter names them, each call's filter appended to $FAKE_CALLS.
mkdir -p "$tmp/build/tests"
cat >"$tmp/build/tests/axon_gtest" <<'EOF'
#!/bin/bash
if [ "$1" = --gtest_list_tests ] && [ -n "${FAKE_SUITES:-}" ]; then
    # batches: suites of every size, each test passing
    printf 'One.\n  A\nTwo.\n  A\n  B\nBig.\n  A\n  B\n  C\n  D\nThree.\n  A\n'
    exit 0
fi
if [ "$1" = --gtest_list_tests ]; then
    printf 'Fake.\n  Passes\n  Fails\n  Skips\n  Crashes\n  NeverStarted\n'
    exit 0
fi
filter=${1#--gtest_filter=}
echo "$filter" >>"$FAKE_CALLS"
IFS=: read -r -a names <<<"$filter"
rc=0 ok=0
for t in "${names[@]}"; do
    echo "[ RUN      ] $t"
    case $t in
        Fake.Fails)   echo "fake.cc:1: Failure"; echo "the value was 41"
                      echo "[  FAILED  ] $t (3 ms)"; rc=1 ;;
        Fake.Skips)   echo "fake.cc:2: Skipped"; echo "no such device here"
                      echo "[  SKIPPED ] $t (0 ms)" ;;
        Fake.Crashes) echo "about to crash"; exit 134 ;;
        *)            echo "[       OK ] $t (7 ms)"; ok=$((ok + 1)) ;;
    esac
done
[ ${#names[@]} -eq 1 ] && [ $rc -eq 0 ] && [ $ok -eq 1 ] && echo "[  PASSED  ] 1 test."
[ ${#names[@]} -eq 1 ] && [ $rc -eq 0 ] && [ $ok -eq 0 ] && echo "[  SKIPPED ] 1 test, listed below:"
exit $rc
EOF
chmod +x "$tmp/build/tests/axon_gtest"

run_fake() {  # group-size : runs the stand-in's tests, output in $tmp/out
    : >"$tmp/calls"
    (cd "$tmp/build" && FAKE_CALLS=$tmp/calls AXON_TEST_GROUP=$1 AXON_TEST_JOBS=1 \
        bash "$run_tests" 'Fake.*' >"$tmp/out" 2>&1)
    cat "$tmp/out"
}

t_verdicts_in_a_group() {
    run_fake 12
    grep -q '^PASS  Fake.Passes  .* 7 ms$' "$tmp/out" || { echo "no PASS of Passes"; return 1; }
    grep -q '^FAIL  Fake.Fails .*in a group' "$tmp/out" || { echo "no FAIL of Fails"; return 1; }
    grep -q 'the value was 41' "$tmp/out" || { echo "the failure's output is missing"; return 1; }
    grep -q '^SKIP  Fake.Skips  .*no such device here' "$tmp/out" || { echo "no SKIP"; return 1; }
    grep -q "^FAIL  Fake.Crashes .*rc=134: the group's process ended in it" "$tmp/out" ||
        { echo "the crash is not the failure of Crashes"; return 1; }
    grep -q 'about to crash' "$tmp/out" || { echo "the crash's output is missing"; return 1; }
    # NeverStarted ran again alone and passed
    grep -q '^PASS  Fake.NeverStarted ' "$tmp/out" || { echo "NeverStarted not run again"; return 1; }
    grep -qx 'Fake.NeverStarted' "$tmp/calls" || { echo "NeverStarted not alone"; return 1; }
    [ "$(head -1 "$tmp/calls")" = "Fake.Passes:Fake.Fails:Fake.Skips:Fake.Crashes:Fake.NeverStarted" ] ||
        { echo "not one group first:"; cat "$tmp/calls"; return 1; }
    [ "$(tail -1 "$tmp/out")" = "2 passed, 2 failed" ] || { echo "totals wrong"; return 1; }
}

t_group_of_one_is_a_process_a_test() {
    run_fake 1
    [ "$(wc -l <"$tmp/calls")" -eq 5 ] || { echo "not five processes"; return 1; }
    # alone, Crashes is a crash of its own process (run_one's report)
    grep -q '^FAIL  Fake.Crashes .*(rc=134)' "$tmp/out" || { echo "no FAIL of Crashes"; return 1; }
    [ "$(tail -1 "$tmp/out")" = "2 passed, 2 failed" ] || { echo "totals wrong"; return 1; }
}

t_bad_group_size_refused() {
    local rc
    (cd "$tmp/build" && AXON_TEST_GROUP=0 bash "$run_tests" 'Fake.*' >"$tmp/out" 2>&1); rc=$?
    cat "$tmp/out"
    [ $rc -eq 2 ] && grep -q 'AXON_TEST_GROUP=0' "$tmp/out"
}

t_batches_close_at_a_test_count() {
    : >"$tmp/calls"
    (cd "$tmp/build" && FAKE_CALLS=$tmp/calls FAKE_SUITES=1 AXON_TEST_BATCH=1 AXON_TEST_JOBS=1 AXON_TEST_GTEST_ONLY=1 \
        AXON_TEST_BATCH_TESTS=3 bash "$run_tests" '*' >"$tmp/out" 2>&1)
    cat "$tmp/out" "$tmp/calls"
    # whole suites a batch; a suite starts a new one once three tests are in;
    # the batch of most tests runs first
    [ "$(cat "$tmp/calls")" = "Big.A:Big.B:Big.C:Big.D
One.A:Two.A:Two.B
Three.A" ] || { echo "batches not cut at 3 tests, or not the biggest first"; return 1; }
    [ "$(tail -1 "$tmp/out")" = "8 passed, 0 failed" ] || { echo "totals wrong"; return 1; }
}

t_bad_batch_size_refused() {
    local rc
    (cd "$tmp/build" && AXON_TEST_BATCH_TESTS=many bash "$run_tests" 'Fake.*' >"$tmp/out" 2>&1); rc=$?
    cat "$tmp/out"
    [ $rc -eq 2 ] && grep -q 'AXON_TEST_BATCH_TESTS=many' "$tmp/out"
}

check harness_run_tests_group_verdicts       t_verdicts_in_a_group
check harness_run_tests_group_of_one         t_group_of_one_is_a_process_a_test
check harness_run_tests_bad_group_size       t_bad_group_size_refused
check harness_run_tests_batch_test_count     t_batches_close_at_a_test_count
check harness_run_tests_bad_batch_size       t_bad_batch_size_refused
