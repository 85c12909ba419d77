#!/bin/bash
# Soak test: tools/axon_soak over each transport in turn. N ranks exchange
# tag messages of mixed sizes (eager, rendezvous, from layouts, synchronous),
# puts, gets, atomics and collectives for the time given, every byte and
# every completion checked, while a random rank (never rank 0) is SIGKILLed
# and restarted every kill interval; survivors must see it fail through
# Axon's error reporting and reconnect to its new incarnation. Each rank's
# RSS must stay flat after warm-up. Prints a line per transport (messages,
# bytes, RMA operations checked, kills, RSS of rank 0, PASS or FAIL) and
# exits non-zero on any failure. Every run is bounded in time; its
# processes and shm segments are cleaned up whatever happens.
#
# Run from the source tree: axon_soak is taken from beside $AXON_PERF's
# axon_perf, else build/tools/, else tools/ (an in-place build).
set -u

. "$(dirname "$0")/bench_lib.sh"

usage() {
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
    cat <<EOF
Options:
  --time S           traffic time per transport in seconds (default 60)
  --ranks N          processes (default 4)
  --tls LIST         transports, comma separated (default: each of
                     shm,tcp,rc,ud,dc,ofi that can run here)
  --kill-interval S  kill and restart a rank this often (default 5; 0: never)
  --keep             keep each run's full output (its directory is printed)
Options after -- go to axon_soak (axon_soak -h lists them).
EOF
}

time_s=60
ranks=4
tls_arg=
kill_s=5
keep=0
extra=()
while [ $# -gt 0 ]; do
    case $1 in
        --time)          time_s=${2:?--time needs seconds}; shift ;;
        --ranks)         ranks=${2:?--ranks needs a number}; shift ;;
        --tls)           tls_arg=${2:?--tls needs a list}; shift ;;
        --kill-interval) kill_s=${2:?--kill-interval needs seconds}; shift ;;
        --keep)          keep=1 ;;
        --) shift; extra=("$@"); break ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown option '$1' (see --help)" ;;
    esac
    shift
done
[[ $time_s =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "invalid --time '$time_s'"
[[ $ranks =~ ^[0-9]+$ ]] || die "invalid --ranks '$ranks'"
[[ $kill_s =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "invalid --kill-interval '$kill_s'"

bench_find_perf
soak=$(dirname "$perf")/axon_soak
[ -x "$soak" ] || die "$soak not found: build Axon with its tools"

# Failure detection fast enough for a kill every few seconds (as the
# peer-failure tests set it): rc and dc retry less, ud and ofi ping.
declare -A tl_config=(
    [rc]="AXON_RC_TIMEOUT=0.2s AXON_RC_KEEPALIVE_INTERVAL=0.5s"
    [dc]="AXON_DC_TIMEOUT=0.2s AXON_DC_KEEPALIVE_INTERVAL=0.5s"
    [ud]="AXON_UD_TIMEOUT=3s AXON_UD_KEEPALIVE_INTERVAL=0.25s"
    [ofi]="AXON_OFI_KEEPALIVE_INTERVAL=0.5s AXON_OFI_KEEPALIVE_TIMEOUT=3s"
)

out_dir=$(mktemp -d /tmp/axon-soak-XXXXXX)
shm_prefix=axsoak$$  # Axon's shm segments of this run: /dev/shm/$shm_prefix-*
run_pid=
cleanup() {
    # the launcher runs in its own session: its group holds every rank
    [ -z "$run_pid" ] || kill -KILL -- -"$run_pid" 2>/dev/null
    rm -f /dev/shm/"$shm_prefix"-* 2>/dev/null
    if [ "$keep" = 1 ]; then echo "outputs kept in $out_dir" >&2; else rm -rf "$out_dir"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -n "$tls_arg" ]; then
    IFS=, read -ra tls_list <<<"$tls_arg"
else
    tls_list=()
    for tl in shm tcp rc ud dc ofi; do
        why=$(bench_tl_missing "$tl")
        if [ -z "$why" ]; then tls_list+=("$tl"); else echo "== $tl: skipped: $why" >&2; fi
    done
fi

failed=0
for tl in "${tls_list[@]}"; do
    log=$out_dir/$tl.log
    # bounded: the traffic time, then failure detection, draining and checks
    limit=$(awk -v t="$time_s" 'BEGIN { printf "%d", t + 150 }')
    echo "== $tl: $ranks ranks, ${time_s} s, a kill every ${kill_s} s" >&2
    # shellcheck disable=SC2086  # tl_config holds VAR=value words
    env AXON_TLS="$tl" AXON_SHM_PREFIX="$shm_prefix" ${tl_config[$tl]:-} \
        setsid timeout -k 5 "$limit" "$soak" -n "$ranks" -t "$time_s" -k "$kill_s" \
        "${extra[@]}" >"$log" 2>&1 &
    run_pid=$!
    wait "$run_pid"
    rc=$?
    run_pid=
    rm -f /dev/shm/"$shm_prefix"-* 2>/dev/null
    line=$(grep -m1 '^axon_soak tls=' "$log")
    if [ $rc -ne 0 ] || [ -z "$line" ] || [[ $line != *": PASS" ]]; then
        failed=1
        echo "soak $tl: FAIL (exit $rc) ${line#axon_soak }"
        grep -m20 'FAIL\|ERROR\|signal' "$log" | sed 's/^/    | /'
        # where the ranks that held up a phase were (axon_soak's launcher)
        grep -E 'took longer than|^axon_soak stacks of rank' "$log" | head -150 | sed 's/^/    | /'
    else
        echo "soak $tl: PASS ${line#axon_soak }"
    fi
done
exit $failed
