#!/bin/bash
# Unmodified rdma-core programs (ibverbs-utils, perftest, rdmacm-utils) on
# softib, through the libibverbs.so.1 of framework/device/softib/verbs_abi/
# and the librdmacm.so.1 of framework/device/softib/rdmacm_abi/ picked by
# LD_LIBRARY_PATH. Prints "PASS name" or "FAIL name" per check; run_tests.sh
# counts them.
#   tests/softib_verbs_test.sh BUILDDIR
# SOFTIB_VERBS_TEST_FILTER='*pingpong*' runs only the checks whose name matches.
set -u
builddir=${1:-$(pwd)}
srcdir=$(cd "$(dirname "$0")/.." && pwd)
libdir="$builddir/.libs/axon/softib-verbs"
info="$builddir/tools/axon_info"
tmp=$(mktemp -d /tmp/axon-softib-verbs-XXXXXX)
pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

if [ ! -e "$libdir/libibverbs.so.1" ]; then
    echo "softib_verbs_test: not built (configure found no libibverbs headers)"
    exit 0
fi

check_filter=${SOFTIB_VERBS_TEST_FILTER:-*}
check_tail=40
. "$srcdir/tests/harness/script_check.sh"

# A program of ibverbs-utils on softib; missing, it fails with the reason.
verbs() {  # program args...
    if ! command -v "$1" >/dev/null; then
        echo "$1 is not installed (contrib/setup.sh installs ibverbs-utils)"
        return 127
    fi
    LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        "$srcdir/tests/harness/bounded.sh" 60 "$@"
}

t_exports_match_rdma_core() {
    # Every entry point of the system's libibverbs (rdma-core 44 on Debian 12),
    # with the same version, hidden or default.
    local sys=/usr/lib/x86_64-linux-gnu/libibverbs.so.1
    [ -e "$sys" ] || sys=$(ldconfig -p | awk '/libibverbs.so.1 /{print $NF; exit}')
    versions() { objdump -T "$1" | awk '/IBVERBS/ && !/\*ABS\*/ {print $(NF-1), $NF}' | sort; }
    versions "$sys" >"$tmp/sys.syms" && versions "$libdir/libibverbs.so.1" >"$tmp/ours.syms" ||
        return 1
    grep -q IBVERBS_PRIVATE_34 "$tmp/sys.syms" || { echo "$sys is not rdma-core 44"; return 1; }
    echo "$(wc -l <"$tmp/sys.syms") versioned symbols in $sys"
    diff "$tmp/sys.syms" "$tmp/ours.syms"
}

t_programs_load_it() {
    # ldd resolves libibverbs.so.1 to ours; perftest's provider libraries load with it
    local p
    for p in ibv_devinfo ibv_rc_pingpong ib_send_lat; do
        command -v "$p" >/dev/null || { echo "$p is not installed"; return 1; }
        LD_LIBRARY_PATH="$libdir" ldd "$(command -v "$p")" >"$tmp/ldd" || return 1
        grep -q "libibverbs.so.1 => $libdir/libibverbs.so.1" "$tmp/ldd" || { cat "$tmp/ldd"; return 1; }
        ! grep -q 'not found' "$tmp/ldd" || { cat "$tmp/ldd"; return 1; }
    done
}

# The value of "name:" in ibv_devinfo -v output ($1), first occurrence.
devinfo_value() { awk -v k="$2:" '$1 == k {print $2; exit}' "$1"; }
# The value of "name:" in axon_info -d's softib0 section ($1).
info_value() { awk -v k="$2:" '/device: softib0/ {on = 1} on && $2 == k {print $3; exit}' "$1"; }

t_devinfo_shows_softib_attributes() {
    # ibv_devinfo -v against what the device layer reports for softib0 (axon_info -d)
    verbs ibv_devinfo -v >"$tmp/dv" || return 1
    "$info" -d >"$tmp/ai" || return 1
    cat "$tmp/dv"
    grep -q '^hca_id:[[:space:]]*softib0$' "$tmp/dv" &&
        grep -q 'fw_ver:[[:space:]]*axon-softib' "$tmp/dv" &&
        grep -q 'state:[[:space:]]*PORT_ACTIVE' "$tmp/dv" &&
        grep -q 'link_layer:[[:space:]]*Ethernet' "$tmp/dv" &&
        grep -q 'GID\[  0\]:[[:space:]]*::ffff:127.0.0.1, RoCE v2' "$tmp/dv" || return 1
    local f a b
    for f in max_qp max_qp_wr max_sge max_cqe max_srq max_srq_wr max_qp_rd_atom; do
        a=$(devinfo_value "$tmp/dv" "$f"); b=$(info_value "$tmp/ai" "$f")
        echo "$f: ibv_devinfo $a, axon_info $b"
        [ -n "$a" ] && [ "$a" = "$b" ] || return 1
    done
    # the GUID: 7369:627f:0000:0100 against 0x7369627f00000100
    a=$(devinfo_value "$tmp/dv" node_guid | tr -d :); b=$(info_value "$tmp/ai" node_guid)
    [ "0x$a" = "$b" ] && grep -q 'atomic_cap:[[:space:]]*ATOMIC_GLOB' "$tmp/dv"
}

t_devinfo_follows_configuration() {
    verbs env AXON_SOFTIB_DEVICES=2 AXON_SOFTIB_MTU=1024 ibv_devinfo >"$tmp/d2" || return 1
    cat "$tmp/d2"
    grep -q '^hca_id:[[:space:]]*softib0$' "$tmp/d2" && grep -q '^hca_id:[[:space:]]*softib1$' "$tmp/d2" &&
        [ "$(grep -c 'active_mtu:[[:space:]]*1024 (3)' "$tmp/d2")" -eq 2 ] || return 1
    # no device: the program's own "none found" path
    verbs env AXON_SOFTIB_DEVICES=0 ibv_devinfo >"$tmp/d0" 2>&1
    cat "$tmp/d0"
    grep -q 'No IB devices found' "$tmp/d0"
}

# A TCP port nothing listens on now (the programs exchange addresses over it).
# A port no socket uses, below the kernel's ephemeral range (a port in it may
# be taken by any outgoing connection between this pick and the server's bind).
free_port() {
    local port low
    low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
    [ "${low:-0}" -gt 12000 ] || low=32768
    while :; do
        port=$((10000 + RANDOM % (low - 10000)))
        ss -Htan "sport = :$port" 2>/dev/null | grep -q . || { echo "$port"; return; }
    done
}

# The port a server listens on, once it does (ss), within 10 s.
wait_listening() {  # port pid [command prefix: ip netns exec NS]
    local i port=$1 pid=$2
    shift 2
    for i in $(seq 100); do
        "$@" ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && return 0
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# Server and client of one program, both must complete and print a result
# line (an extended regular expression; the server's only where it prints
# one: RESULT_ON_SERVER=n for the tests whose server only answers).
server_client() {  # result-regex program args...
    local result=$1 prog=$2; shift 2
    local port srv crc=0 src=0
    port=$(free_port)
    command -v "$prog" >/dev/null || { echo "$prog is not installed"; return 1; }
    verbs "$prog" -p "$port" "$@" >"$tmp/srv" 2>&1 &
    srv=$!; pids+=("$srv")
    wait_listening "$port" "$srv" || { echo "server did not listen"; cat "$tmp/srv"; return 1; }
    verbs "$prog" -p "$port" "$@" 127.0.0.1 >"$tmp/cli" 2>&1 || crc=$?
    wait "$srv" || src=$?
    # the tails: a failure shows where each side stopped (124: timed out)
    echo "== client (exit $crc)"; tail -15 "$tmp/cli"; echo "== server (exit $src)"; tail -15 "$tmp/srv"
    [ "$crc" -eq 0 ] && [ "$src" -eq 0 ] && grep -Eq "$result" "$tmp/cli" &&
        { [ "${RESULT_ON_SERVER:-y}" = n ] || grep -Eq "$result" "$tmp/srv"; }
}

# ibv_*_pingpong: "1000 iters in 0.06 seconds = 55.32 usec/iter" on both sides
t_pingpong() { server_client '[0-9]+ iters in' "$@"; }

netns_usable() {
    local probe="axonprobe-$$-$RANDOM"
    [ "$(id -u)" -eq 0 ] && command -v ip >/dev/null && ip netns add "$probe" 2>/dev/null &&
        ip netns del "$probe"
}

# Two network namespaces joined by a veth pair: 10.212.0.1 and 10.212.0.2.
netns_pair() {  # server-ns client-ns
    local ns_s=$1 ns_c=$2
    ip netns add "$ns_s" && ip netns add "$ns_c" || return 1
    ip link add veth0 netns "$ns_s" type veth peer name veth0 netns "$ns_c" || return 1
    ip -n "$ns_s" addr add 10.212.0.1/24 dev veth0 && ip -n "$ns_c" addr add 10.212.0.2/24 dev veth0 &&
        ip -n "$ns_s" link set veth0 up && ip -n "$ns_c" link set veth0 up &&
        ip -n "$ns_s" link set lo up && ip -n "$ns_c" link set lo up
}

# Server and client of a verbs program in two network namespaces joined by a
# veth pair, as two hosts: each softib's GID is its namespace's address, so
# the packets take softib's UDP wire (the shm one serves a GID's own
# processes). Both exit 0, the client names both GIDs (pingpong's or
# perftest's notation) and prints the result (the server too, unless
# RESULT_ON_SERVER=n).
netns_server_client() (  # result-regex program args...
    local result=$1 prog=$2; shift 2
    local ns_s="axonv-$$-$RANDOM-srv" ns_c="axonv-$$-$RANDOM-cli"
    local port=$((20000 + RANDOM % 20000)) srv rc=0   # a fresh namespace: all free
    trap 'kill $srv 2>/dev/null; ip netns del "$ns_s" 2>/dev/null; ip netns del "$ns_c" 2>/dev/null' EXIT
    trap 'exit 1' INT TERM HUP
    command -v "$prog" >/dev/null || { echo "$prog is not installed"; return 1; }
    netns_pair "$ns_s" "$ns_c" || return 1
    ip netns exec "$ns_s" env AXON_SOFTIB_ADDR=10.212.0.1 bash -c \
        "$(declare -p libdir srcdir; declare -f verbs); verbs \"\$@\"" _ "$prog" -p "$port" "$@" >"$tmp/srv" 2>&1 &
    srv=$!
    wait_listening "$port" "$srv" ip netns exec "$ns_s" ||
        { echo "server did not listen"; cat "$tmp/srv"; return 1; }
    ip netns exec "$ns_c" env AXON_SOFTIB_ADDR=10.212.0.2 bash -c \
        "$(declare -p libdir srcdir; declare -f verbs); verbs \"\$@\"" _ "$prog" -p "$port" "$@" 10.212.0.1 \
        >"$tmp/cli" 2>&1 || rc=$?
    wait "$srv" || rc=$?
    echo "== client"; cat "$tmp/cli"; echo "== server"; cat "$tmp/srv"
    [ "$rc" -eq 0 ] && grep -Eq '::ffff:10\.212\.0\.2|255:255:10:212:00:02' "$tmp/cli" &&
        grep -Eq '::ffff:10\.212\.0\.1|255:255:10:212:00:01' "$tmp/cli" &&
        grep -Eq "$result" "$tmp/cli" &&
        { [ "${RESULT_ON_SERVER:-y}" = n ] || grep -Eq "$result" "$tmp/srv"; }
)

t_pingpong_netns() { netns_server_client '[0-9]+ iters in' "$@"; }
t_perftest_netns() { netns_server_client '^ *[0-9]+ +200 +[0-9.]+' "$@" -d softib0 -x 0 -n 200; }

# perftest: the line of numbers under its header, for the iterations asked (-n 200)
t_perftest() { server_client '^ *[0-9]+ +200 +[0-9.]+' "$@" -d softib0 -x 0 -n 200; }

# Ours: the extended CQ and the ibv_wr_* interface, every operation
# (tests/softib_verbs/verbs_abi_check.c, built here against libibverbs-dev).
t_verbs_abi_check() {
    cc -std=gnu11 -Wall -Wextra -Werror -o "$tmp/verbs_abi_check" \
        "$srcdir/tests/softib_verbs/verbs_abi_check.c" -libverbs -pthread || return 1
    verbs "$tmp/verbs_abi_check"
}

# Ours: the device list, addrinfo, ports, a PD made before any id
# (tests/softib_verbs/rdmacm_abi_check.c, built here against librdmacm-dev).
t_rdmacm_abi_check() {
    cc -std=gnu11 -Wall -Wextra -Werror -o "$tmp/rdmacm_abi_check" \
        "$srcdir/tests/softib_verbs/rdmacm_abi_check.c" -lrdmacm -libverbs || return 1
    verbs "$tmp/rdmacm_abi_check"
}

# Ours: synchronous ids beyond rdma_server/rdma_client: two requests of one
# listener interleaved, the event each call leaves, refusals, errors
# (tests/softib_verbs/rdmacm_sync_check.c).
t_rdmacm_sync_check() {
    cc -std=gnu11 -Wall -Wextra -Werror -o "$tmp/rdmacm_sync_check" \
        "$srcdir/tests/softib_verbs/rdmacm_sync_check.c" -lrdmacm -libverbs -pthread || return 1
    verbs "$tmp/rdmacm_sync_check"
}

t_rdmacm_exports_match_rdma_core() {
    # Every entry point of the system's librdmacm (rdma-core 44), with its version
    local sys=/usr/lib/x86_64-linux-gnu/librdmacm.so.1
    [ -e "$libdir/librdmacm.so.1" ] || { echo "librdmacm.so.1 not built"; return 1; }
    [ -e "$sys" ] || sys=$(ldconfig -p | awk '/librdmacm.so.1 /{print $NF; exit}')
    versions() { objdump -T "$1" | awk '/RDMACM_1/ && !/\*ABS\*/ && !/\*UND\*/ {print $(NF-1), $NF}' | sort; }
    versions "$sys" >"$tmp/rsys.syms" && versions "$libdir/librdmacm.so.1" >"$tmp/rours.syms" ||
        return 1
    grep -q RDMACM_1.3 "$tmp/rsys.syms" || { echo "$sys is not rdma-core 44"; return 1; }
    echo "$(wc -l <"$tmp/rsys.syms") versioned symbols in $sys"
    diff "$tmp/rsys.syms" "$tmp/rours.syms"
}

# A program of rdmacm-utils, here ("" for ns) or in network namespace ns with
# that softib address.
rdmacm_run() {  # ns address program args...
    local ns=$1 addr=$2
    shift 2
    if [ -z "$ns" ]; then verbs "$@"; return; fi
    ip netns exec "$ns" env AXON_SOFTIB_ADDR="$addr" bash -c \
        "$(declare -p libdir srcdir; declare -f verbs); verbs \"\$@\"" _ "$@"
}

# Server and client of an rdmacm-utils program, over the CM's port: both must
# exit 0, the client print the result line (an extended regular expression)
# at least count times and the server "return status 0" or the result too.
rdmacm_pair() {  # port result count program server-args... -- client-args...
    local port=$1 result=$2 count=$3 prog=$4 srv rc=0 srv_rc=0
    local sargs=() cargs=()
    shift 4
    while [ "$1" != -- ]; do sargs+=("$1"); shift; done
    shift
    cargs=("$@")
    command -v "$prog" >/dev/null || { echo "$prog is not installed (rdmacm-utils)"; return 1; }
    rdmacm_run "${NS_S:-}" 10.212.0.1 "$prog" "${sargs[@]}" >"$tmp/srv" 2>&1 &
    srv=$!; pids+=("$srv")
    wait_listening "$port" "$srv" ${NS_S:+ip netns exec "$NS_S"} ||
        { echo "server did not listen"; cat "$tmp/srv"; return 1; }
    rdmacm_run "${NS_C:-}" 10.212.0.2 "$prog" "${cargs[@]}" >"$tmp/cli" 2>&1 || rc=$?
    wait "$srv" || srv_rc=$?
    echo "== client (exit $rc)"; tail -15 "$tmp/cli"; echo "== server (exit $srv_rc)"; tail -15 "$tmp/srv"
    [ "$rc" -eq 0 ] && [ "$srv_rc" -eq 0 ] &&
        [ "$(grep -Ec "$result" "$tmp/cli")" -ge "$count" ]
}

# rping: 100 pings, each an RDMA read and write and two sends, verified (-v)
t_rping() {  # address
    local port
    port=$(free_port)
    rdmacm_pair "$port" '^ping data: rdma-ping-' 100 rping -s -a "$1" -p "$port" -v -C 100 -- \
        -c -a "$1" -p "$port" -v -C 100
}

# rping -q: each side makes its QP itself and takes it to RTS with
# rdma_init_qp_attr's attributes (connect and accept carry its number)
t_rping_own_qp() {
    local port
    port=$(free_port)
    rdmacm_pair "$port" '^ping data: rdma-ping-' 50 rping -s -a 127.0.0.1 -p "$port" -q -v -C 50 \
        -- -c -a 127.0.0.1 -p "$port" -q -v -C 50
}

# rping's client and server under valgrind: the objects the two libraries
# share are freed once and in order (rping destroys its QP with ibv_destroy_qp
# before rdma_destroy_id). rping has a race of its own: its cm thread may go
# back to rdma_get_cm_event after the disconnect while main frees what it
# reads (seen once in 40 runs; valgrind's first error is then in rping's own
# code): that run is done again, up to three times. An error whose first
# frame is ours fails at once.
rping_raced() {  # valgrind output files...
    local f first
    for f in "$@"; do
        first=$(grep -m1 -A1 -E '==[0-9]+== (Invalid|Conditional|Use of|Syscall)' "$f" |
                sed -n 2p)
        [ -z "$first" ] || [[ "$first" == *"(in /usr/bin/rping)"* ]] || return 1
    done
    grep -qE '==[0-9]+== (Invalid|Conditional|Use of|Syscall)' "$@"
}
t_rping_valgrind() {
    local port try
    command -v valgrind >/dev/null || { echo "valgrind is not installed"; return 1; }
    for try in 1 2 3; do
        port=$(free_port)
        rdmacm_pair "$port" '^ping data: rdma-ping-' 10 \
            valgrind -q --error-exitcode=9 rping -s -a 127.0.0.1 -p "$port" -v -C 10 -- \
            -q --error-exitcode=9 rping -c -a 127.0.0.1 -p "$port" -v -C 10 && return 0
        rping_raced "$tmp/cli" "$tmp/srv" || return 1
        echo "== rping's own race (its first error is in rping): again"
    done
    return 1
}

# rdma_server/rdma_client and rdma_xserver/rdma_xclient (RC): librdmacm's
# synchronous examples (rdma_create_ep, rdma_get_request, rdma_post_*,
# rdma_get_*_comp); each prints "end 0" when its message went through
t_rdma_sync_example() {  # server client
    local port srv rc=0 srv_rc=0
    port=$(free_port)
    command -v "$1" >/dev/null || { echo "$1 is not installed (rdmacm-utils)"; return 1; }
    verbs "$1" -p "$port" >"$tmp/srv" 2>&1 &
    srv=$!; pids+=("$srv")
    wait_listening "$port" "$srv" || { echo "server did not listen"; cat "$tmp/srv"; return 1; }
    verbs "$2" -s 127.0.0.1 -p "$port" >"$tmp/cli" 2>&1 || rc=$?
    wait "$srv" || srv_rc=$?
    echo "== client (exit $rc)"; cat "$tmp/cli"; echo "== server (exit $srv_rc)"; cat "$tmp/srv"
    [ "$rc" -eq 0 ] && [ "$srv_rc" -eq 0 ] && grep -q "^$2: end 0" "$tmp/cli" &&
        grep -q "^$1: end 0" "$tmp/srv"
}

# ucmatose: connections with sends both ways, then disconnects
t_ucmatose() {  # connections [more args for both sides]
    local port n=$1
    shift
    port=$(free_port)
    rdmacm_pair "$port" '^return status 0' 1 ucmatose -p "$port" -c "$n" -C 20 "$@" -- \
        -s 127.0.0.1 -p "$port" -c "$n" -C 20 "$@"
}

# udaddy (UD, RDMA_PS_UDP): address and QPN through the CM, datagrams both
# ways; its port is fixed (7174), so it waits for nothing else to hold it
t_udaddy() {  # connections
    local i
    for i in $(seq 50); do
        ss -Hltn "sport = :7174" 2>/dev/null | grep -q . || break
        sleep 0.2
    done
    rdmacm_pair 7174 '^return status 0' 1 udaddy -c "$1" -C 20 -- -s 127.0.0.1 -c "$1" -C 20
}

# rping and udaddy between two network namespaces: the CM over TCP, the data over
# softib's UDP wire
t_rdmacm_netns() (
    local ns_s="axonr-$$-$RANDOM-srv" ns_c="axonr-$$-$RANDOM-cli"
    trap 'ip netns del "$ns_s" 2>/dev/null; ip netns del "$ns_c" 2>/dev/null' EXIT
    trap 'exit 1' INT TERM HUP
    netns_pair "$ns_s" "$ns_c" || return 1
    NS_S=$ns_s NS_C=$ns_c rdmacm_pair 7174 '^ping data: rdma-ping-' 100 \
        rping -s -a 10.212.0.1 -p 7174 -v -C 100 -- -c -a 10.212.0.1 -p 7174 -v -C 100 &&
    NS_S=$ns_s NS_C=$ns_c rdmacm_pair 7174 '^return status 0' 1 \
        udaddy -b 10.212.0.1 -C 20 -- -s 10.212.0.1 -C 20
)

# mckey (UD multicast, seed §8.3-8.4): receivers join a group, then a sender
# joins and sends -C datagrams to it; every receiver must take them all
# ("return status 0": mckey waits for each). A datagram sent before a
# receiver joined would not reach it, so the sender starts once every
# receiver said it joined (line-buffered). MCKEY_NS: the receivers in that
# namespace (address 10.212.0.1), the sender in MCKEY_NS_SEND (10.212.0.2).
t_mckey() {  # group receivers sender-args...
    local group=$1 n=$2 i rc=0 joined raddr=127.0.0.1 saddr=127.0.0.1
    local -a rpids=()
    shift 2
    [ -n "${MCKEY_NS:-}" ] && raddr=10.212.0.1
    [ -n "${MCKEY_NS_SEND:-}" ] && saddr=10.212.0.2
    command -v mckey >/dev/null || { echo "mckey is not installed (rdmacm-utils)"; return 1; }
    for ((i = 0; i < n; i++)); do
        rdmacm_run "${MCKEY_NS:-}" 10.212.0.1 stdbuf -oL mckey -m "$group" \
            -b "$raddr" -C 20 -S 512 >"$tmp/mr$i" 2>&1 &
        rpids+=($!); pids+=($!)
    done
    for _ in $(seq 100); do
        joined=$(cat "$tmp"/mr* 2>/dev/null | grep -c '^mckey: joined dgid: ::ffff:')
        [ "$joined" -ge "$n" ] && break
        sleep 0.1
    done
    [ "$joined" -ge "$n" ] || { echo "receivers did not join"; cat "$tmp"/mr*; return 1; }
    rdmacm_run "${MCKEY_NS_SEND:-}" 10.212.0.2 mckey -m "$group" \
        -b "$saddr" -s -C 20 -S 512 "$@" \
        >"$tmp/ms" 2>&1 || rc=1
    echo "== sender"; cat "$tmp/ms"
    for ((i = 0; i < n; i++)); do
        wait "${rpids[$i]}" || rc=1
        echo "== receiver $i"; cat "$tmp/mr$i"
        grep -q '^return status 0' "$tmp/mr$i" || rc=1
    done
    rm -f "$tmp"/mr*
    return $rc
}

t_mckey_netns() (
    local ns_s="axonm-$$-$RANDOM-rcv" ns_c="axonm-$$-$RANDOM-snd"
    trap 'ip netns del "$ns_s" 2>/dev/null; ip netns del "$ns_c" 2>/dev/null' EXIT
    trap 'exit 1' INT TERM HUP
    netns_pair "$ns_s" "$ns_c" || return 1
    MCKEY_NS=$ns_s MCKEY_NS_SEND=$ns_c t_mckey 239.1.$((RANDOM % 250)).13 2
)

# UCX (ucx-utils 1.13): it lists a verbs device only where the kernel's
# /dev/infiniband/<dev_name> exists, so it runs in the private mount
# namespace of contrib/softib/devnodes.sh (docs/design.md, "UCX on softib").
ucx() {  # program args...
    if ! command -v "$1" >/dev/null; then
        echo "$1 is not installed (contrib/setup.sh installs ucx-utils)"
        return 127
    fi
    LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" UCX_NET_DEVICES=softib0:1 \
        UCX_WARN_UNUSED_ENV_VARS=n timeout 60 "$srcdir/contrib/softib/devnodes.sh" "$@"
}

t_ucx_lists_softib() {
    # ucx_info -d: both verbs transports on softib0's port, with the node
    ucx ucx_info -d >"$tmp/ui" || return 1
    grep -E 'Memory domain|Transport|Device' "$tmp/ui"
    grep -q 'Memory domain: softib0' "$tmp/ui" &&
        grep -A1 'Transport: rc_verbs' "$tmp/ui" | grep -q 'Device: softib0:1' &&
        grep -A1 'Transport: ud_verbs' "$tmp/ui" | grep -q 'Device: softib0:1' || return 1
    # and without it UCX sees no softib device (why the namespace is needed)
    LD_LIBRARY_PATH="$libdir" timeout 60 ucx_info -d >"$tmp/ui0" 2>&1
    ! grep -q 'softib0' "$tmp/ui0"
}

# ucx_perftest server and client over softib with UCX_TLS=$1; the client's
# last line of numbers ("Final:") and, for UCP's tests, the transport UCP
# chose for the tag lane (UCX_LOG_LEVEL=info prints
# "ep_cfg[0]: tag(rc_verbs/softib0:1)"); UCT's tests name theirs (-x), "-".
t_ucx_perftest() {  # tls lane-transport|- perftest-args...
    local tls=$1 lane=$2 port srv crc=0 src=0
    shift 2
    port=$(free_port)
    UCX_TLS=$tls ucx ucx_perftest -p "$port" >"$tmp/usrv" 2>&1 &
    srv=$!; pids+=("$srv")
    wait_listening "$port" "$srv" || { echo "server did not listen"; cat "$tmp/usrv"; return 1; }
    UCX_TLS=$tls UCX_LOG_LEVEL=info ucx ucx_perftest 127.0.0.1 -p "$port" "$@" >"$tmp/ucli" 2>&1 ||
        crc=$?
    wait "$srv" || src=$?
    echo "== client (exit $crc)"; tail -15 "$tmp/ucli"; echo "== server (exit $src)"; tail -15 "$tmp/usrv"
    [ "$crc" -eq 0 ] && [ "$src" -eq 0 ] && grep -Eq '^Final: +[0-9]+ ' "$tmp/ucli" &&
        { [ "$lane" = - ] || grep -Eq "ep_cfg\[[0-9]+\]: .*($lane/softib0:1)" "$tmp/ucli"; }
}

t_unsupported_is_reported() {  # program args... -- expected message
    local args=() msg
    while [ "$1" != -- ]; do args+=("$1"); shift; done
    msg=$2
    # the program stops at the check, before it would wait for a peer
    if verbs "${args[@]}" >"$tmp/u" 2>&1; then cat "$tmp/u"; return 1; fi
    cat "$tmp/u"
    grep -q "$msg" "$tmp/u"
}

check softib_verbs_exports_match_rdma_core_44   t_exports_match_rdma_core
check softib_verbs_programs_load_it             t_programs_load_it
check softib_verbs_devinfo_shows_attributes     t_devinfo_shows_softib_attributes
check softib_verbs_devinfo_follows_config       t_devinfo_follows_configuration
check softib_verbs_rc_pingpong                  t_pingpong ibv_rc_pingpong -g 0 -n 200 -c
check softib_verbs_rc_pingpong_events           t_pingpong ibv_rc_pingpong -g 0 -n 200 -e -s 64
check softib_verbs_rc_pingpong_mtu_256          t_pingpong ibv_rc_pingpong -g 0 -n 100 -m 256 -s 10000 -c
check softib_verbs_rc_pingpong_wr_api           t_pingpong ibv_rc_pingpong -g 0 -n 200 -N -c
check softib_verbs_rc_pingpong_wr_api_inline    t_pingpong ibv_rc_pingpong -g 0 -n 200 -N -s 64 -c
check softib_verbs_uc_pingpong                  t_pingpong ibv_uc_pingpong -g 0 -n 200 -c
check softib_verbs_ud_pingpong                  t_pingpong ibv_ud_pingpong -g 0 -n 200 -c
check softib_verbs_ud_pingpong_events           t_pingpong ibv_ud_pingpong -g 0 -n 200 -e
check softib_verbs_srq_pingpong                 t_pingpong ibv_srq_pingpong -g 0 -n 200 -c
check softib_verbs_srq_pingpong_events          t_pingpong ibv_srq_pingpong -g 0 -n 100 -q 4 -e
check softib_verbs_ext_cq_wr_api_async_event   t_verbs_abi_check
# Needs root and iproute2; where namespaces cannot be made it is not run (no line).
if netns_usable; then
    check softib_verbs_rc_pingpong_across_netns t_pingpong_netns ibv_rc_pingpong -g 0 -n 200 -c
    check softib_verbs_ud_pingpong_across_netns t_pingpong_netns ibv_ud_pingpong -g 0 -n 200 -c
    check softib_verbs_uc_pingpong_across_netns t_pingpong_netns ibv_uc_pingpong -g 0 -n 200 -c
    check softib_verbs_srq_pingpong_across_netns t_pingpong_netns ibv_srq_pingpong -g 0 -n 200 -c
    check softib_verbs_perftest_write_bw_across_netns t_perftest_netns ib_write_bw
    RESULT_ON_SERVER=n check softib_verbs_perftest_read_lat_across_netns t_perftest_netns ib_read_lat
fi
check softib_verbs_odp_reported_unsupported     t_unsupported_is_reported \
    ibv_rc_pingpong -g 0 -o -- "isn't ODP capable"
check softib_verbs_timestamps_reported_unsupported t_unsupported_is_reported \
    ibv_rc_pingpong -g 0 -t -- "isn't completion timestamp capable"
check softib_verbs_device_memory_reported_unsupported t_unsupported_is_reported \
    ibv_rc_pingpong -g 0 -j -- "doesn't support dm allocation"
# UCX's verbs transports: rc_verbs takes ud_verbs for UCP's wireup messages
# only (":aux"): rc connects endpoint to endpoint, and UCP needs a transport
# reaching a whole interface to exchange the rc addresses.
check softib_verbs_ucx_info_lists_softib        t_ucx_lists_softib
check softib_verbs_ucx_rc_tag_lat               t_ucx_perftest rc_verbs,ud_verbs:aux rc_verbs \
    -t tag_lat -n 1000
check softib_verbs_ucx_rc_ucp_put_lat           t_ucx_perftest rc_verbs,ud_verbs:aux rc_verbs \
    -t ucp_put_lat -n 1000
check softib_verbs_ucx_rc_uct_put_lat           t_ucx_perftest rc_verbs - \
    -t put_lat -d softib0:1 -x rc_verbs -n 1000
check softib_verbs_ucx_rc_tag_bw_1m             t_ucx_perftest rc_verbs,ud_verbs:aux rc_verbs \
    -t tag_bw -s 1048576 -n 50
# UCX 1.13's rc_verbs takes device atomics only from a device reporting ATOMIC_HCA
AXON_SOFTIB_ATOMIC_CAP=hca check softib_verbs_ucx_rc_uct_fadd_atomic_cap_hca t_ucx_perftest \
    rc_verbs - -t fadd -d softib0:1 -x rc_verbs -n 1000
AXON_SOFTIB_ATOMIC_CAP=hca check softib_verbs_ucx_rc_uct_cswap_atomic_cap_hca t_ucx_perftest \
    rc_verbs - -t cswap -d softib0:1 -x rc_verbs -n 1000
check softib_verbs_ucx_ud_tag_lat               t_ucx_perftest ud_verbs ud_verbs -t tag_lat -n 1000
check softib_verbs_ucx_ud_ucp_put_lat           t_ucx_perftest ud_verbs ud_verbs -t ucp_put_lat -n 1000
check softib_verbs_ucx_ud_uct_am_lat            t_ucx_perftest ud_verbs - \
    -t am_lat -d softib0:1 -x ud_verbs -n 1000
check softib_verbs_ucx_ud_tag_bw_1m             t_ucx_perftest ud_verbs ud_verbs \
    -t tag_bw -s 1048576 -n 50
# perftest: latency and bandwidth, RC (and UD, UC where it offers them)
check softib_verbs_perftest_send_lat            t_perftest ib_send_lat
check softib_verbs_perftest_send_lat_ud         t_perftest ib_send_lat -c UD
check softib_verbs_perftest_write_lat           t_perftest ib_write_lat
RESULT_ON_SERVER=n check softib_verbs_perftest_read_lat   t_perftest ib_read_lat
RESULT_ON_SERVER=n check softib_verbs_perftest_atomic_lat t_perftest ib_atomic_lat
check softib_verbs_perftest_write_bw            t_perftest ib_write_bw
check softib_verbs_perftest_send_bw_ud          t_perftest ib_send_bw -c UD
check softib_verbs_perftest_read_bw             t_perftest ib_read_bw
# Not perftest -R (rdma_cm): its client connects as soon as the out-of-band
# handshake ends, softib resolves at once, so its REQ can beat the server's
# listen (~5 % of runs); a rejected client retries with the ids its cleanup
# destroyed and dies of SIGBUS (perftest's bug, not the CM's). ucmatose -t
# covers rdma_set_option's TOS below.
# rdmacm-utils on librdmacm.so.1
check softib_rdmacm_exports_match_rdma_core_44  t_rdmacm_exports_match_rdma_core
check softib_rdmacm_devices_addrinfo_ports      t_rdmacm_abi_check
check softib_rdmacm_rping                       t_rping 127.0.0.1
check softib_rdmacm_rping_valgrind              t_rping_valgrind
check softib_rdmacm_rping_own_qp_init_qp_attr   t_rping_own_qp
check softib_rdmacm_sync_ids                    t_rdmacm_sync_check
check softib_rdmacm_rdma_server_client          t_rdma_sync_example rdma_server rdma_client
check softib_rdmacm_rdma_xserver_xclient_rc     t_rdma_sync_example rdma_xserver rdma_xclient
check softib_rdmacm_ucmatose                    t_ucmatose 1
check softib_rdmacm_ucmatose_4_connections      t_ucmatose 4
check softib_rdmacm_udaddy                      t_udaddy 1
check softib_rdmacm_udaddy_4_connections        t_udaddy 4
# multicast: two receivers; the sender joined send-only (-o), or as a full
# member whose own datagrams do not come back to it (-l: BLOCK_SELF_MCAST_LB)
check softib_rdmacm_mckey_2_receivers           t_mckey "239.1.$((RANDOM % 250)).11" 2 -o
check softib_rdmacm_mckey_no_self_loopback      t_mckey "239.1.$((RANDOM % 250)).12" 1 -l
if netns_usable; then
    check softib_rdmacm_rping_udaddy_across_netns t_rdmacm_netns
    check softib_rdmacm_mckey_across_netns      t_mckey_netns
fi
# rdma_set_option: ucmatose -t sets the type of service on both sides
check softib_rdmacm_ucmatose_tos                t_ucmatose 2 -t 32
check softib_rdmacm_unsupported_is_reported     t_unsupported_is_reported \
    udaddy -s 127.0.0.1 -P ipoib -- "port space 0x2"
