#!/bin/bash
# The goals of the DC transport (issue 20), measured in one run over softib,
# each ratio printed against its goal with PASS or MISS:
#
#   8 B tag latency, dc / rc                           <= 1.10  (axon_perf -t tag_lat)
#   1 MiB tag bandwidth, dc / rc                       >= 0.95  (-t tag_bw)
#   memory per endpoint, dc at 1024 peers / rc         <= 0.05  (-t ep_mem)
#   message rate with 64 peers and 8 DCIs, dc / ud,
#     many-to-one and one-to-many                      >= 1.0   (-t tag_fanin, tag_fanout)
#
# The message rates run axon_perf as a server (the peers: a worker each in
# one process) and a client (the hub) over a TCP control connection, so each
# side has its own environment: AXON_DC_NUM_DCI=8 on both by default (the
# hub's for its 64 targets; --peer-dcis sets the peers'). A dc iface makes
# its DCIs as it needs them and softib visits only QPs with work, so a
# peer's unused DCIs cost nothing.
#
# ep_mem's server hosts a worker per peer in one process: for dc's 1024 it
# runs with 2 DCIs, 128 receive buffers and 64 send buffers per iface
# (AXON_DC_NUM_DCI, _RX_QUEUE_LEN, _TX_BUFS), since softib has 4095 QPs per
# process (1025 ifaces of 9 QPs do not fit) and the default buffers would
# take 20 GB; these are the iface's, not the endpoint's, and do not change
# the client's bytes per endpoint. rc's memory per endpoint is a QP and its
# ring per peer, the same for any number of them; it is measured at
# --rc-ep-peers (128): 1024 rc workers take about 11 GB here.
#
# Exit status: 0 every goal met, 1 a goal missed or a measurement failed,
# 2 bad options or dc cannot run (libaxon_dc.so not built: the line says so).
#
# Run from the source tree: axon_perf is taken from $AXON_PERF, else
# build/tools/axon_perf, else tools/axon_perf (an in-place build).
set -u

. "$(dirname "$0")/bench_lib.sh"

usage() {
    sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'
    cat <<EOF
Options:
  --quick            a tenth of the iterations (a rough verdict)
  --ep-peers N       peers of dc's memory measurement (default 1024)
  --rc-ep-peers N    peers of rc's (default 128)
  --fan-peers N      peers of the message rates (default 64)
  --dcis N           AXON_DC_NUM_DCI of the hub in the message rates (default 8)
  --peer-dcis N      AXON_DC_NUM_DCI of the peers' process there (default 8)
  --repeat N         run each measurement N times and keep the best (default 1)
  --as-dc TL         measure TL where dc would be (tries the script without dc)
  --keep             keep the raw axon_perf outputs (their directory is printed)
EOF
}

quick=0 repeat=1 keep=0 ep_peers=1024 rc_ep_peers=128 fan_peers=64 dcis=8 peer_dcis=8 dc=dc
while [ $# -gt 0 ]; do
    case $1 in
        --quick)       quick=1 ;;
        --ep-peers)    ep_peers=${2:?--ep-peers needs a number}; shift ;;
        --rc-ep-peers) rc_ep_peers=${2:?--rc-ep-peers needs a number}; shift ;;
        --fan-peers)   fan_peers=${2:?--fan-peers needs a number}; shift ;;
        --dcis)        dcis=${2:?--dcis needs a number}; shift ;;
        --peer-dcis)   peer_dcis=${2:?--peer-dcis needs a number}; shift ;;
        --repeat)      repeat=${2:?--repeat needs a number}; shift ;;
        --as-dc)       dc=${2:?--as-dc needs a transport}; shift ;;
        --keep)        keep=1 ;;
        -h|--help)     usage; exit 0 ;;
        *) die "unknown option '$1' (see --help)" ;;
    esac
    shift
done
for v in ep_peers rc_ep_peers fan_peers dcis peer_dcis repeat; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "invalid --${v//_/-} '${!v}'"
done

bench_find_perf
"$perf" -h | grep -q tag_fanin || die "$perf has no tag_fanin test: rebuild it"
for tl in "$dc" rc ud; do
    why=$(bench_tl_missing "$tl")
    [ -z "$why" ] || [ "$tl" != dc ] ||
        die "dc cannot run: $why (--as-dc TL measures another transport in its place)"
    [ -z "$why" ] || die "$tl cannot run: $why"
done

bench_start /tmp/axon-dc-goals-XXXXXX
run_timeout=$((quick ? 120 : 330))  # axon_perf's own limit is 300 s per size
bench_load_check
lat_n=$((quick ? 10000 : 100000))
bw_n=$((quick ? 200 : 2000))
fan_n=$((quick ? 300 : 3000))

# One measurement of tl: the RESULT line's field (of the first line) into
# value, or err; a run over another transport than asked is an error. With
# a server environment (before "--") the two sides are a server and a
# client; else both are axon_perf --local.
measure() {  # key tl field client-env... [-s server-env...] -- axon_perf-args...
    local key=$1 tl=$2 field=$3 out line got
    local envs=() srv_envs=() server=0
    shift 3
    while [ "$1" != "--" ]; do
        if [ "$1" = -s ]; then
            server=1
        elif [ $server -eq 1 ]; then
            srv_envs+=("$1")
        else
            envs+=("$1")
        fi
        shift
    done
    shift
    out="$work/$key-$tl-$((++runs))"
    echo "== $key: $tl" >&2
    if [ $server -eq 1 ]; then
        next_port
        client_server "$out" "$port" env AXON_TLS="$tl" "${srv_envs[@]}" "$perf" -p "$port" -- \
            env AXON_TLS="$tl" "${envs[@]}" "$perf" 127.0.0.1 -p "$port" "$@"
    else
        env AXON_TLS="$tl" "${envs[@]}" timeout -k 5 "$run_timeout" "$perf" --local "$@" \
            >"$out" 2>&1 &
        fg_pid=$!
        wait "$fg_pid"
        fg_pid=
    fi
    value=
    err=
    line=$(grep -m1 '^RESULT' "$out")
    got=$(sed -n 's/.* tl=\([^ ]*\) .*/\1/p' <<<"$line")
    if [ -z "$line" ] && [ $server -eq 1 ]; then
        err=$(both_errors "$out")
    elif [ -z "$line" ]; then
        err=$(first_error "$out")
    elif [ "$got" != "$tl" ]; then
        err="ran over $got, not $tl"
    else
        value=$(sed -n "s/.* $field=\\([-0-9.]*\\).*/\\1/p" <<<"$line")
    fi
}

# Best of --repeat runs into R[key/tl], or the first error into E[key/tl].
measure_best() {  # key tl field lower-is-better env... -- args...
    local key=$1 tl=$2 field=$3 low=$4 i
    shift 4
    for ((i = 0; i < repeat; ++i)); do
        measure "$key" "$tl" "$field" "$@"
        if [ -n "$value" ]; then
            best "$key/$tl" "$value" "$low"
        elif [ -z "${E[$key/$tl]:-}" ]; then
            E[$key/$tl]=$err
        fi
    done
}

runs=0
dc_env=(-s)
dc_mem_env=()
if [ "$dc" = dc ]; then
    dc_env=("AXON_DC_NUM_DCI=$dcis" -s "AXON_DC_NUM_DCI=$peer_dcis")
    dc_mem_env=(AXON_DC_NUM_DCI=2 AXON_DC_RX_QUEUE_LEN=128 AXON_DC_TX_BUFS=64)
fi
# The runs: reference first, then dc.
measure_best lat rc latency_us 1 -- -t tag_lat -s 8 -n "$lat_n"
measure_best lat "$dc" latency_us 1 -- -t tag_lat -s 8 -n "$lat_n"
measure_best bw rc bandwidth_MBps 0 -- -t tag_bw -s 1m -n "$bw_n"
measure_best bw "$dc" bandwidth_MBps 0 -- -t tag_bw -s 1m -n "$bw_n"
measure_best mem rc bytes_per_ep 1 -- -t ep_mem -n "$rc_ep_peers"
measure_best mem "$dc" bytes_per_ep 1 "${dc_mem_env[@]}" -- -t ep_mem -n "$ep_peers"
for t in fanin fanout; do
    measure_best "$t" ud msgrate_Mps 0 -s -- -t "tag_$t" --peers "$fan_peers" -s 8 -n "$fan_n"
    measure_best "$t" "$dc" msgrate_Mps 0 "${dc_env[@]}" -- -t "tag_$t" --peers "$fan_peers" \
        -s 8 -n "$fan_n"
done

# ------------------------------------------------------------------ verdicts

missed=0
goal() {  # what key reference-tl op(<=|>=) goal
    bench_goal_row "$1" "$2" "$dc" "$3" "$4" "$5"
}

echo
echo "DC goals over softib ($(uname -n), $(date -u '+%Y-%m-%d %H:%M UTC')," \
     "load ${load_start:-?} at start)"
[ "$dc" = dc ] || echo "(--as-dc $dc: $dc measured where dc would be; not a verdict on dc)"
echo
echo "| measurement | $dc | reference | $dc / reference | goal | verdict |"
echo "| --- | ---: | ---: | ---: | ---: | --- |"
goal "8 B tag latency, us (vs rc)" lat rc "<=" 1.10
goal "1 MiB tag bandwidth, MB/s (vs rc)" bw rc ">=" 0.95
goal "memory per endpoint, bytes ($dc: $ep_peers peers, rc: $rc_ep_peers) (vs rc)" mem rc "<=" 0.05
dcis_note=
[ "$dc" = dc ] && dcis_note=", hub $dcis DCIs, peers $peer_dcis"
goal "message rate, $fan_peers peers to one, M/s$dcis_note (vs ud)" fanin ud ">=" 1.0
goal "message rate, one to $fan_peers peers, M/s$dcis_note (vs ud)" fanout ud ">=" 1.0
[ "$keep" -eq 1 ] && echo && echo "Raw outputs: $work"
echo
if [ $missed -eq 0 ]; then
    echo "all 5 goals met"
    exit 0
fi
echo "$missed of 5 goals missed or not measured"
exit 1
