#!/bin/bash
# Set up a fresh Debian 12 machine, build Axon, and run either the demo or the tests.
#   contrib/setup.sh demo   install dependencies, build, run a two-process tag
#                           ping-pong and bandwidth benchmark (axon_perf --local)
#   contrib/setup.sh test   install dependencies, build, run the whole test suite;
#                           the last line is "N passed, M failed"
set -eu
mode=${1:-}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

case "$mode" in
    demo|test) ;;
    *) echo "usage: $0 demo|test" >&2; exit 2 ;;
esac

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

packages=(autoconf automake libtool pkg-config make gcc g++ procps valgrind
          googletest libgtest-dev
          libibverbs-dev librdmacm-dev libhwloc-dev libfabric-dev libpmix-dev)
# The tests also run unmodified Open MPI on Axon's libfabric provider and
# check that libfabric's own tools see it (tests/mpi/), and rdma-core's verbs
# programs on softib's libibverbs.so.1 and librdmacm.so.1 (tests/softib_verbs_test.sh),
# and its libFuzzer harnesses (tests/fuzz/) need clang and its fuzzer runtime;
# gdb prints the threads of a test that hangs (tests/harness/bounded.sh).
if [ "$mode" = test ]; then
    packages+=(openmpi-bin libopenmpi-dev libfabric-bin ibverbs-utils perftest rdmacm-utils ucx-utils
               clang libclang-rt-14-dev gdb)
fi
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
        missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "== installing: ${missing[*]}"
    as_root apt-get update -q
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        "${missing[@]}"
fi

# Out-of-tree builds: build/ (plain) and build-asan/ (sanitizers). A source
# tree that was configured in place is built in place instead.
echo "== building"
jobs=$(nproc 2>/dev/null || echo 2)
if [ ! -x configure ] || [ configure.ac -nt configure ]; then
    ./autogen.sh >/dev/null
fi
configure_in() {  # dir [configure args]
    local dir=$1; shift
    mkdir -p "$dir"
    # Configured before with other arguments (say by the demo, without fuzzers): again.
    if [ ! -f "$dir/Makefile" ] || [ configure -nt "$dir/Makefile" ] ||
       [ "$(cat "$dir/.setup-configure-args" 2>/dev/null)" != "$*" ]; then
        (cd "$dir" && "$top/configure" "$@")
        echo "$*" >"$dir/.setup-configure-args"
    fi
}
fuzzing=()
[ "$mode" = test ] && fuzzing=(--enable-fuzzing)
if [ -f config.status ]; then
    build=$top
    [ -f Makefile ] || ./configure
else
    build=$top/build
    # The only C++ is the test code: unoptimised it builds in half the time.
    configure_in "$build" "${fuzzing[@]}" CXXFLAGS="${CXXFLAGS:--O0}"
fi
make -C "$build" -j"$jobs" >/dev/null
cd "$build"

if [ "$mode" = demo ]; then
    echo "== axon_info: transports on this host"
    ./tools/axon_info -d
    echo "== tag latency, 8 bytes, auto-selected transport"
    ./tools/axon_perf --local -t tag_lat -s 8 -n 100000
    echo "== tag bandwidth, 1 MiB messages"
    ./tools/axon_perf --local -t tag_bw -s 1048576 -n 5000
    exit 0
fi

echo "== building tests (at ${SECONDS}s)"
make -j"$jobs" check TESTS= >/dev/null

# libfabric's provider tests (fabtests 1.17), which tests/ofi/run_fabtests.sh
# runs against the axon provider: built once from the tarball next to the
# tree, into a cache outside it, and reused.
build_fabtests() {
    local cache=${XDG_CACHE_HOME:-$HOME/.cache}/axon-clients
    local tarball=${AXON_CLIENTS_DIR:-$top/../shared/clients}/fabtests-1.17.0.tar.gz
    local prefix=$cache/fabtests
    if [ -x "$prefix/bin/runfabtests.sh" ] && [ -x "$prefix/bin/fi_getinfo_test" ]; then
        echo "== fabtests: built before, in $prefix"
        return 0
    fi
    case "$cache/" in
        "$top"/*) echo "== fabtests: the cache $cache is inside the tree; not building it"
                  return 0 ;;
    esac
    if [ ! -f "$tarball" ]; then
        echo "== fabtests: $tarball not found; its tests will be skipped"
        return 0
    fi
    echo "== building fabtests into $prefix (at ${SECONDS}s; log: $cache/fab-build.log)"
    mkdir -p "$cache"
    rm -rf "$cache/fabtests-1.17.0"
    # -O0: they test behaviour, not speed (the comparisons use Debian's
    # fi_pingpong), and build in less time.
    if ! (tar -xzf "$tarball" -C "$cache" && cd "$cache/fabtests-1.17.0" && ./autogen.sh &&
          ./configure --with-libfabric=/usr --prefix="$prefix" CFLAGS="-O0" &&
          make -j"$jobs" install) >"$cache/fab-build.log" 2>&1; then
        echo "== fabtests did not build (see $cache/fab-build.log); its tests will be skipped"
    fi
}
build_fabtests

# The suite runs three times: plainly (the gtests, then, once the background
# builds below are done, the script tests: layering, tools, install, MPI...;
# tests/layering/check_layers.sh fails on a wrong-way include or call), then
# built with AddressSanitizer + UBSan, then under valgrind. The sanitizer
# passes choose their tests by the labels in the tests' names (tests/README.md):
# ASan leaves out the Slow, Heap and Fault suites, the Variants/ lanes and
# everything over libfabric; valgrind runs only what runs in one process and
# fast. Both run ten suites a process (AXON_TEST_BATCH: a process costs ~4 s
# under valgrind and ~60 ms under ASan to start and leak-check, a third of
# the ASan pass; a failing batch runs again suite by suite; Timed tests still
# run alone). Each pass ends with "N passed, M failed"; the totals end the run.
total_pass=0
total_fail=0
failed_names=()   # "pass: FAIL line", repeated just above the totals
run_pass() {  # label command...
    local label=$1; shift
    echo "== tests: $label (at ${SECONDS}s)"
    local line log
    log=$(mktemp)
    "$@" 2>&1 | tee "$log" || true
    line=$(tail -n 1 "$log")
    # CI's record keeps only the tail of the output: the failures are named
    # again there, not 5000 lines up.
    local f
    while IFS= read -r f; do
        failed_names+=("$label: $f")
    done < <(grep -a '^FAIL ' "$log" | cut -c1-160)
    rm -f "$log"
    if [[ "$line" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
        total_pass=$((total_pass + BASH_REMATCH[1]))
        total_fail=$((total_fail + BASH_REMATCH[2]))
    else
        echo "$label: the pass did not finish (last line: $line)"
        failed_names+=("$label: the pass did not finish")
        total_fail=$((total_fail + 1))
    fi
}

# The fuzzers' and the sanitizer build run behind the plain pass, at the
# lowest priority: its tests wait on timers, peers and sleeping scripts much
# of the time, and the builds take that idle time (~2 of the 20 minutes
# when they ran after it). A test's CPU goes to the test: nice 19 weighs
# 1.5% of a normal process.
fuzz_skip=
asan_skip=
if [ "$build" = "$top" ] && ! grep -q '^FUZZ_CC = .' Makefile; then
    fuzz_skip="the source tree is configured in place without --enable-fuzzing"
fi
if [ "${AXON_SKIP_SANITIZERS:-0}" = 1 ]; then
    asan_skip="AXON_SKIP_SANITIZERS=1"
elif [ "$build" = "$top" ]; then
    asan_skip="the source tree is configured in place (make distclean)"
fi
prebuild_log=$(mktemp)
(
    renice -n 19 -p "$BASHPID" >/dev/null 2>&1 || true   # and so every command it starts
    status=0
    if [ -z "$fuzz_skip" ]; then
        make -C "$build" -j"$jobs" fuzz >/dev/null || { echo "make fuzz failed"; status=1; }
    fi
    if [ -z "$asan_skip" ]; then
        # -O1: what ASan recommends, and a third faster to build than -O2.
        { configure_in "$top/build-asan" --enable-asan CFLAGS="${CFLAGS:--g -O1}" \
              CXXFLAGS="${CXXFLAGS:--O0}" >/dev/null &&
          make -C "$top/build-asan" -j"$jobs" >/dev/null &&
          make -C "$top/build-asan" -j"$jobs" check TESTS= >/dev/null; } ||
            { echo "the ASan build failed"; status=$((status | 2)); }
    fi
    exit $status
) >"$prebuild_log" 2>&1 &
prebuild_pid=$!

# Tests run $jobs processes at a time (AXON_TEST_JOBS; short ones up to 12 of
# a suite to a process, tests/README.md): many
# wait on timers (peer failure detection, idle peers, retransmission), and
# the plain pass takes half the time with two.
export AXON_TEST_JOBS=${AXON_TEST_JOBS:-$jobs}
run_pass "plain build" env AXON_TEST_GTEST_ONLY=1 "$top/tests/run_tests.sh"

# The script tests whose verdicts hold on a busy host, while the builds end:
# they leave a core idle much of the time (client and server handshakes,
# runfabtests.sh's sleeps), which the nice-19 compilers take.
run_pass "script tests (untimed)" env AXON_TEST_SCRIPTS_ONLY=1 AXON_TEST_SCRIPTS_SET=untimed \
    "$top/tests/run_tests.sh"

echo "== waiting for the fuzzers' and the ASan build (at ${SECONDS}s)"
prebuild_status=0
wait "$prebuild_pid" || prebuild_status=$?
grep -v 'lto-wrapper' "$prebuild_log" | tail -n 20
rm -f "$prebuild_log"

# The others after the builds: they hold timing checks (axon_perf's 64 KiB
# within 1.2x of eager, the MPI ring within 2x of Open MPI's own), which a
# compiler beside them swings past their limits, even at nice 19.
run_pass "script tests (timed)" env AXON_TEST_SCRIPTS_ONLY=1 AXON_TEST_SCRIPTS_SET=timed \
    "$top/tests/run_tests.sh"

# Each libFuzzer harness (tests/fuzz/) for a few seconds from Axon's own
# seeds and the kept regressions: clang built only the sources the parsers
# need (make fuzz, above); the runs take AXON_FUZZ_TIME (3) s each.
if [ -n "$fuzz_skip" ]; then
    echo "== skipping the fuzzers: $fuzz_skip"
elif [ $((prebuild_status & 1)) = 0 ]; then
    run_pass "fuzzers" bash "$top/tests/fuzz/run_fuzzers.sh" "$build" "${AXON_FUZZ_TIME:-3}"
else
    echo "fuzzers: make fuzz failed"
    total_fail=$((total_fail + 1))
fi

if [ "${AXON_SKIP_SANITIZERS:-0}" != 1 ]; then
    if [ -n "$asan_skip" ]; then
        echo "== skipping the ASan pass: $asan_skip"
    elif [ $((prebuild_status & 2)) != 0 ]; then
        echo "ASan+UBSan build: the build failed"
        total_fail=$((total_fail + 1))
    else
        run_pass "ASan+UBSan build" env AXON_TEST_GTEST_ONLY=1 AXON_TEST_BATCH=1 \
            ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
            LSAN_OPTIONS="suppressions=$top/tests/sanitizers/lsan.supp" \
            UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
            bash -c "cd '$top/build-asan' && '$top/tests/run_tests.sh' @asan"
    fi

    if command -v valgrind >/dev/null; then
        run_pass "valgrind" env AXON_TEST_GTEST_ONLY=1 AXON_TEST_VALGRIND=1 AXON_TEST_BATCH=1 \
            "$top/tests/run_tests.sh" @valgrind
    fi
fi

echo "== done after ${SECONDS}s"
if [ ${#failed_names[@]} -gt 0 ]; then
    echo "== the failures, again:"
    printf '  %s\n' "${failed_names[@]}"
fi
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
