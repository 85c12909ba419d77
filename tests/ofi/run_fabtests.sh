#!/bin/bash
# libfabric's own provider tests (fabtests 1.17, "-t quick") against Axon's
# provider "axon", as a new user would run them: one "PASS fabtests/<test>"
# or "FAIL fabtests/<test>" line per test, which run_tests.sh counts. Tests
# that fabtests_notrun.txt expects not to run print "SKIP fabtests/<test>:
# <reason>"; any other test that does not run is a FAIL. Without the
# provider, or without a fabtests build and its tarball, it prints one
# "SKIP fabtests: <reason>" line; a tarball beside the tree that setup.sh
# did not manage to build is a FAIL.
#
#   tests/ofi/run_fabtests.sh BUILDDIR [SETS]
#
# SETS: runfabtests.sh's test sets, comma separated (default quick, which is
# unit,functional,short); run_tests.sh runs two halves at once, each run of
# this script taking ports of its own.
#
# FABTESTS_RUN_NOTRUN=1 also runs the tests fabtests_notrun.txt lists (by
# default runfabtests.sh excludes them: they print SKIP with their reason).
#
# fabtests is taken from $FABTESTS_DIR, else from
# ${XDG_CACHE_HOME:-$HOME/.cache}/axon-clients/fabtests, where
# `contrib/setup.sh test` builds it (its code stays out of this tree). Each
# test has FABTESTS_TEST_LIMIT seconds (60), the whole run
# FABTESTS_TIME_LIMIT (600).
set -u
builddir=$(cd "${1:-.}" && pwd) || exit 2
sets=${2:-quick}
srcdir=$(cd "$(dirname "$0")" && pwd)
fabtests=${FABTESTS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/axon-clients/fabtests}
provdir=$builddir/contrib/ofi_provider/.libs
test_limit=${FABTESTS_TEST_LIMIT:-60}
run_limit=${FABTESTS_TIME_LIMIT:-600}
shm_prefix=axonfab$$

if [ ! -x "$fabtests/bin/runfabtests.sh" ]; then
    # Where the tarball is (beside the tree), setup.sh should have built it.
    tarball=${AXON_CLIENTS_DIR:-$srcdir/../../../shared/clients}/fabtests-1.17.0.tar.gz
    verdict=SKIP
    [ -f "$tarball" ] && verdict=FAIL
    echo "$verdict fabtests: $fabtests/bin/runfabtests.sh is not built (contrib/setup.sh test" \
        "builds it from $tarball)"
    exit 0
fi
if [ ! -f "$provdir/libaxon-fi.so" ]; then
    echo "SKIP fabtests: the provider $provdir/libaxon-fi.so is not built" \
        "(configure did not find libfabric?)"
    exit 0
fi

# Tests expected not to run: a glob on the test's command, a tab, the reason.
notrun_globs=()
notrun_reasons=()
while IFS=$'\t' read -r glob reason; do
    [[ -z "$glob" || "$glob" == \#* ]] && continue
    notrun_globs+=("$glob")
    notrun_reasons+=("$reason")
done <"$srcdir/fabtests_notrun.txt"

notrun_reason() {  # test -> reason on stdout, or status 1
    local i
    for i in "${!notrun_globs[@]}"; do
        # shellcheck disable=SC2053 # the list holds globs
        if [[ "$1" == ${notrun_globs[$i]} ]]; then
            echo "${notrun_reasons[$i]}"
            return 0
        fi
    done
    return 1
}

tmp=$(mktemp -d /tmp/axon-fabtests-XXXXXX)
run_pid=
# The run goes in a session of its own: session_pids, kill_session,
# session_cleanup.
. "$srcdir/../mpi/session.sh"
trap session_cleanup EXIT
trap 'exit 1' INT TERM HUP

# runfabtests.sh ends a test that timed out by killing every process on the
# host whose name starts with fi_ (ps -eo comm,pid | grep ^fi_): the ps it
# finds first lists only the processes of its own session.
mkdir "$tmp/bin" "$tmp/run"
real_ps=$(command -v ps)
cat >"$tmp/bin/ps" <<EOF
#!/bin/bash
if [ "\$*" = "-eo comm,pid" ]; then
    exec $real_ps -s "\$($real_ps -o sid= -p \$\$ | tr -d ' ')" -o comm,pid
fi
exec $real_ps "\$@"
EOF
chmod +x "$tmp/bin/ps"

# fabtests' servers listen on fixed TCP ports: the provider's address server
# on 9228 (the server's -B, the client's -P), the out-of-band socket on 3000
# (-E=<port>) and fi_cm_data's socket on 2710 (-q). Another process on the
# host holding one would fail a test ("bind: Address already in use"), so
# each run takes three ports free now, below the ephemeral range (where
# the tests' own connections cannot take them). runfabtests.sh needs a
# python already.
read -r fabric_port oob_port cm_port < <(python3 - <<'EOF'
import random, socket
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
held = []
for _ in range(1000):
    if len(held) == 3:
        break
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", random.randrange(max(1024, low - 16384), low)))
        held.append(s)
    except OSError:
        s.close()
print(*(s.getsockname()[1] for s in held))
EOF
)
if [ -z "$cm_port" ]; then
    echo "FAIL fabtests/ports"
    echo "    | found no three free TCP ports on 127.0.0.1 below the ephemeral range"
    exit 0
fi
# The out-of-band port goes, by a wrapper in a directory of links to the
# other binaries, only to the tests whose main turns out-of-band exchange on
# (fabtests 1.17): -E=<port> turns the address exchange on as well, which
# would change any other test. Three of them only sync out of band
# (fi_rdm_rma_trigger, fi_unmap_mem, fi_dgram_pingpong): on axon they stop at
# fi_getinfo, before any address exchange.
declare -A port_opts=(
    [fi_av_xfer]="-E=$oob_port" [fi_multi_ep]="-E=$oob_port" [fi_multi_recv]="-E=$oob_port"
    [fi_unexpected_msg]="-E=$oob_port" [fi_rdm_rma_trigger]="-E=$oob_port"
    [fi_unmap_mem]="-E=$oob_port" [fi_dgram_pingpong]="-E=$oob_port" [fi_cm_data]="-q $cm_port")
mkdir "$tmp/fabbin"
for exe in "$fabtests/bin"/*; do
    name=${exe##*/}
    if [ -n "${port_opts[$name]:-}" ]; then
        printf '#!/bin/sh\nexec %q %s "$@"\n' "$exe" "${port_opts[$name]}" >"$tmp/fabbin/$name"
        chmod +x "$tmp/fabbin/$name"
    else
        ln -s "$exe" "$tmp/fabbin/$name"
    fi
done

# Tests that would fail rather than stop as not run, because what they lack
# is a call that returns -FI_ENOSYS after fi_getinfo accepted them (nothing
# in their hints says what they need): runfabtests.sh excludes them (its -e,
# a regex), and fabtests_notrun.txt gives the reason. fi_multi_mr -e rdm
# writes to remote address 0 with its requested keys (offset addressing)
# while its default hints ask FI_MR_VIRT_ADDR | FI_MR_PROV_KEY, which the
# provider honours: the writes land outside the regions.
excluded='fi_multi_mr -e rdm'
# The tests fabtests_notrun.txt expects not to run are excluded too (each
# costs runfabtests.sh 1-3 s of sleeps to find out again), unless
# FABTESTS_RUN_NOTRUN=1 asks to see whether they still do not: they are then
# run (one that passes says PASS: its line can go).
if [ "${FABTESTS_RUN_NOTRUN:-0}" != 1 ]; then
    for glob in "${notrun_globs[@]}"; do
        regex=$(sed -e 's/[].[^$\\+?(){}|]/\\&/g' -e 's/\*/.*/g' <<<"$glob")
        excluded+=",^$regex\$"
    done
fi

# In an empty directory: runfabtests.sh leaves its scratch files in the
# current one and reads exclusion lists (test_configs/) from under it.
(
    cd "$tmp/run" || exit 2
    export PATH="$tmp/bin:$PATH" FI_PROVIDER_PATH="$provdir" AXON_SHM_PREFIX="$shm_prefix"
    # fabtests size their buffers for the largest message (8 MiB) times the
    # window (64) and zero them: 1 GiB a process, 4 s of page faults on a
    # virtual machine, most of a 5 s test. Huge pages for malloc's own
    # mappings (glibc >= 2.35; ignored before) make that ~1 s.
    export GLIBC_TUNABLES="${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.malloc.hugetlb=1"
    export LD_LIBRARY_PATH="$builddir/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    exec setsid timeout -k 5 "$run_limit" "$fabtests/bin/runfabtests.sh" -v \
        -p "$tmp/fabbin" -T "$test_limit" -L "-B $fabric_port" -C "-P $fabric_port" \
        -t "$sets" -e "$excluded" -s 127.0.0.1 -c 127.0.0.1 axon
) >"$tmp/out" 2>&1 </dev/null &
run_pid=$!
wait "$run_pid"
rc=$?

# runfabtests.sh -v writes YAML: "- name: <test> -p "axon"", "  result: <result>",
# then the output of failed tests.
name=""
results=0
failed_output=0
while IFS= read -r line; do
    if [[ "$line" =~ ^-\ name:\ +(.*)\ -p\ \"axon\"$ ]]; then
        name=${BASH_REMATCH[1]}
        failed_output=0
        continue
    fi
    if [[ -n "$name" && "$line" =~ ^\ \ result:\ +([A-Za-z]+) ]]; then
        results=$((results + 1))
        case ${BASH_REMATCH[1]} in
            Pass) echo "PASS fabtests/$name" ;;
            Notrun|Excluded)
                if reason=$(notrun_reason "$name"); then
                    echo "SKIP fabtests/$name: $reason"
                else
                    echo "FAIL fabtests/$name"
                    echo "    | did not run, and tests/ofi/fabtests_notrun.txt does not expect that"
                fi ;;
            *)  echo "FAIL fabtests/$name"
                failed_output=1 ;;
        esac
        continue
    fi
    # A failed test's server and client output, marked so that no line counts.
    [ "$failed_output" = 1 ] && echo "    | $line"
done <"$tmp/out"

if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "FAIL fabtests/time-limit"
    echo "    | runfabtests.sh did not end within $run_limit s (FABTESTS_TIME_LIMIT)"
elif [ "$results" -eq 0 ]; then
    echo "FAIL fabtests/ran"
    sed 's/^/    | /' "$tmp/out" | tail -20
fi
# Verdicts are the PASS/FAIL lines; the exit status says only that the script ran.
exit 0
