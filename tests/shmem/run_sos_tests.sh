#!/bin/bash
# Sandia OpenSHMEM 1.5.3's unit tests (tests-sos, C) under Open MPI's mpirun
# over a libfabric provider, with 2 and 4 PEs. Prints "PASS name", "FAIL
# name" or "SKIP name: <reason>" per run (name: shmem/<test>/<provider>-np<N>)
# and ends with "N passed, N failed, N skipped". Without mpicc/mpirun, the
# tarball or (for axon) a provider that has what SOS asks for, it prints one
# "SKIP shmem: <reason>" line instead of runs.
#
#   tests/shmem/run_sos_tests.sh BUILDDIR [sockets|axon]
#
# Providers:
#   sockets  libfabric's own sockets provider (the baseline, sos_baseline.txt)
#   axon     Axon's provider: FI_PROVIDER_PATH=BUILDDIR/contrib/ofi_provider/.libs,
#            LD_LIBRARY_PATH=BUILDDIR/.libs
#
# SOS is built once per tarball (keyed by its sha256) with its default
# configuration into ${XDG_CACHE_HOME:-$HOME/.cache}/axon-clients/sos-<sum>,
# outside the tree, and reused; the tarball is taken from
# $AXON_CLIENTS_DIR (default ../shared/clients beside the tree).
# SOS_TESTS="a b c" runs those tests instead of sos_selection.txt;
# SOS_TESTS=all runs every C unit test (how sos_baseline.txt was made).
# SOS_NP="2 4" PE counts; SOS_TEST_LIMIT seconds per run (60);
# SOS_MPIRUN_ARGS adds mpirun arguments.
set -u
builddir=$(cd "${1:-.}" && pwd) || exit 2
provider=${2:-sockets}
srcdir=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$srcdir/../.." && pwd)
. "$srcdir/sos_cache.sh"
sos_locate "$top"   # sos_tarball, sos_cache, sos_dir
tarball=$sos_tarball
cache=$sos_cache
provdir=$builddir/contrib/ofi_provider/.libs
test_limit=${SOS_TEST_LIMIT:-60}
nps=${SOS_NP:-2 4}
jobs=$(nproc 2>/dev/null || echo 2)
[ "$jobs" -gt 2 ] && jobs=2
shm_prefix=axonsos$$

passed=0
failed=0
skipped=0
finish() {
    echo "== done after ${SECONDS}s"
    echo "$passed passed, $failed failed, $skipped skipped"
    exit 0
}
skip_all() {  # reason
    echo "SKIP shmem: $1"
    skipped=$((skipped + 1))
    finish
}

case $provider in
    sockets|axon) ;;
    *) echo "usage: $0 BUILDDIR [sockets|axon]" >&2; exit 2 ;;
esac
for np in $nps; do
    [[ "$np" =~ ^[1-9][0-9]*$ ]] || { echo "SOS_NP: '$np' is not a number of PEs" >&2; exit 2; }
done
if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
    skip_all "mpicc or mpirun not found (Debian: openmpi-bin, libopenmpi-dev)"
fi
[ -f "$tarball" ] || skip_all "$tarball not found (AXON_CLIENTS_DIR)"
case "$cache/" in
    "$top"/*) skip_all "the cache $cache is inside the tree; SOS is built outside it" ;;
esac

# ------------------------------------------------------------------ build

sosdir=$sos_dir
sossrc=$sosdir/SOS-1.5.3
unitdir=$sossrc/modules/tests-sos/test/unit
mkdir -p "$sosdir" || exit 2

# Every C program of the unit tests' check_PROGRAMS (the C++ ones are
# cxx_*, the Fortran ones *_f; Fortran is off), asked of their Makefile.
# shellcheck disable=SC2016 # make's $(EXEEXT), literally
unit_c_tests() {
    printf 'sos-list-tests:\n\t@echo $(check_PROGRAMS)\n' |
        make -s -C "$unitdir" -f Makefile -f - sos-list-tests | tr ' ' '\n' |
        sed -n 's/\$(EXEEXT)$//; /^cxx_/d; /_f$/d; /./p'
}

# Built once: the stamp is written last, under a lock (two runs at once
# share the build).
build_sos() {
    [ -f "$sosdir/built" ] && return 0
    echo "== building SOS into $sosdir (log: $sosdir/build.log)"
    rm -rf "$sossrc" "$sosdir/prefix"
    (tar -xzf "$tarball" -C "$sosdir" && cd "$sossrc" && ./autogen.sh &&
     ./configure --with-ofi=/usr --enable-pmi-mpi CC=mpicc --disable-fortran \
         --prefix="$sosdir/prefix" &&
     make -j"$jobs" && make install) >"$sosdir/build.log" 2>&1 || return 1
    touch "$sosdir/built"
}
# The unit test programs asked for, built in SOS's tree (make rebuilds only
# what is missing).
build_tests() {  # test...
    make -C "$unitdir" -j"$jobs" "$@" >>"$sosdir/tests-build.log" 2>&1
}

exec 9>"$sosdir/lock"
flock 9
if ! build_sos; then
    echo "FAIL shmem/build"
    tail -20 "$sosdir/build.log" | sed 's/^/    | /'
    failed=$((failed + 1))
    finish
fi
flock -u 9

# The tests to run: sos_selection.txt (a test's name first on its line,
# "#" comments), SOS_TESTS, or every C unit test.
tests=()
if [ "${SOS_TESTS:-}" = all ]; then
    mapfile -t tests < <(unit_c_tests)
elif [ -n "${SOS_TESTS:-}" ]; then
    read -r -a tests <<<"$SOS_TESTS"
else
    while read -r name _; do
        [[ -z "$name" || "$name" == \#* ]] || tests+=("$name")
    done <"$srcdir/sos_selection.txt"
fi
[ ${#tests[@]} -gt 0 ] || skip_all "no tests chosen (sos_selection.txt, SOS_TESTS)"
echo "== building ${#tests[@]} tests-sos programs (at ${SECONDS}s; log: $sosdir/tests-build.log)"
flock 9
build_tests "${tests[@]}"
flock -u 9

# ------------------------------------------------------------------ provider

# What SOS 1.5.3 asks fi_getinfo for with its default configuration
# (src/transport_ofi.c, query_for_fabric; docs/shmem.md): an RDM endpoint
# with FI_RMA, FI_ATOMIC and FI_RMA_EVENT (its wait_until sleeps on a counter
# of remote writes), scalable memory registration, FI_DELIVERY_COMPLETE and
# automatic data progress. fi_info checks the capabilities; SOS the rest.
sos_caps=(FI_RMA FI_ATOMIC FI_RMA_EVENT)
env_args=(-x "SHMEM_OFI_PROVIDER=$provider")
if [ "$provider" = axon ]; then
    [ -f "$provdir/libaxon-fi.so" ] ||
        skip_all "the provider $provdir/libaxon-fi.so is not built (configure did not find libfabric?)"
    command -v fi_info >/dev/null || skip_all "fi_info not installed (libfabric-bin)"
    axon_env=("FI_PROVIDER_PATH=$provdir" "AXON_SHM_PREFIX=$shm_prefix"
              "LD_LIBRARY_PATH=$builddir/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
    missing=()
    for cap in "${sos_caps[@]}"; do
        env "${axon_env[@]}" timeout 30 fi_info -p axon -t FI_EP_RDM -c "$cap" >/dev/null 2>&1 ||
            missing+=("$cap")
    done
    [ ${#missing[@]} -eq 0 ] ||
        skip_all "fi_info -p axon -t FI_EP_RDM lists no ${missing[*]}, which SOS asks for"
    all_caps=$(IFS='|'; echo "${sos_caps[*]}")
    env "${axon_env[@]}" timeout 30 fi_info -p axon -t FI_EP_RDM -c "$all_caps" >/dev/null 2>&1 ||
        skip_all "fi_info -p axon -t FI_EP_RDM lists ${sos_caps[*]}, but not $all_caps on one endpoint"
    for e in "${axon_env[@]}"; do
        env_args+=(-x "$e")
    done
fi

# ------------------------------------------------------------------ running

echo "== running ${#tests[@]} tests with $nps PEs over $provider (at ${SECONDS}s)"

# Every mpirun runs in a session of its own (session_pids, kill_session,
# session_cleanup); Open MPI's session directory and shared memory files go
# to the scratch directory, so that a killed run leaves nothing elsewhere.
. "$srcdir/../mpi/session.sh"
tmp=$(mktemp -d /tmp/axon-sos-XXXXXX)
run_pid=
trap session_cleanup EXIT
trap 'exit 1' INT TERM HUP
mkdir "$tmp/ompi" "$tmp/shm"

mpirun_args=(--oversubscribe --bind-to none --mca orte_tmpdir_base "$tmp/ompi"
             --mca btl_vader_backing_directory "$tmp/shm")
[ "$(id -u)" -eq 0 ] && mpirun_args+=(--allow-run-as-root)
# shellcheck disable=SC2206 # split on purpose: a list of arguments
mpirun_args+=(${SOS_MPIRUN_ARGS:-})

report() {  # name status output-file [milliseconds]
    if [ "$2" -eq 0 ]; then
        echo "PASS $1${4:+ $4 ms}"
        passed=$((passed + 1))
    else
        echo "FAIL $1"
        # a hang's report has every thread's stack (tests/harness/bounded.sh)
        sed 's/^/    | /' "$3" | tail -"$(grep -qs '^bounded.sh: ' "$3" && echo 300 || echo 20)"
        failed=$((failed + 1))
    fi
}

# SOS's words when fi_getinfo finds nothing for what it asks.
sos_refusal='OFI transport did not find any valid fabric services'
refused=

run_one() {  # test np
    local name=$1 np=$2 out="$tmp/$1-np$2" rc left start ms
    start=$(($(date +%s%N) / 1000000))
    setsid "$srcdir/../harness/bounded.sh" "$test_limit" mpirun "${mpirun_args[@]}" "${env_args[@]}" -np "$np" \
        "$unitdir/$name" >"$out" 2>&1 </dev/null &
    run_pid=$!
    wait "$run_pid"
    rc=$?
    ms=$(($(date +%s%N) / 1000000 - start))
    [ $rc -eq 124 ] && echo "mpirun did not end within $test_limit s (SOS_TEST_LIMIT)" >>"$out"
    sleep 0.1
    left=$(session_pids "$run_pid")
    if [ -n "$left" ]; then
        echo "processes left behind:" >>"$out"
        ps -o pid=,args= -p "$(tr '\n' ',' <<<"$left" | sed 's/,$//')" >>"$out" 2>&1
        kill_session "$run_pid"
        [ $rc -eq 0 ] && rc=1
    fi
    run_pid=
    if [ -n "$(ls -A "$tmp/shm")" ] || compgen -G "/dev/shm/$shm_prefix-*" >/dev/null; then
        echo "shared memory left behind:" "$tmp"/shm/* /dev/shm/"$shm_prefix"-* >>"$out"
        rm -rf "$tmp"/shm/* /dev/shm/"$shm_prefix"-*
        [ $rc -eq 0 ] && rc=1
    fi
    rm -rf "$tmp"/ompi/*
    if [ $rc -ne 0 ] && grep -q "$sos_refusal" "$out"; then
        refused=$(grep -m1 -o "$sos_refusal.*" "$out")
        return
    fi
    report "shmem/$name/$provider-np$np" "$rc" "$out" "$ms"
    return 0
}

# A provider SOS refuses at startup fails every test the same way: one SKIP
# with SOS's reason (SOS_REQUIRE=1 makes it a FAIL, for a provider that
# should be accepted).
for np in $nps; do
    for name in "${tests[@]}"; do
        if [ ! -x "$unitdir/$name" ]; then
            echo "FAIL shmem/$name/build"
            echo "    | $unitdir/$name was not built (see $sosdir/tests-build.log)"
            failed=$((failed + 1))
            continue
        fi
        run_one "$name" "$np"
        if [ -n "$refused" ]; then
            if [ "${SOS_REQUIRE:-0}" = 1 ]; then
                echo "FAIL shmem/$provider: SOS refuses the provider: $refused"
                failed=$((failed + 1))
                finish
            fi
            skip_all "SOS refuses the provider $provider at startup: $refused"
        fi
    done
done
finish
