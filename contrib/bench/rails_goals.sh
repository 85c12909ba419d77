#!/bin/bash
# The goals of multi-rail rendezvous (issue 24, part 2), measured in one run
# on one host; each ratio is printed against its goal with PASS or MISS:
#
#   1 MiB tcp tag bandwidth, one connection each side:
#       Axon (AXON_NET_DEVICES=lo) / UCX (UCX_NET_DEVICES=lo)      >= 1.10
#   1 MiB tcp tag bandwidth, each library's default (two rails:
#       tcp over lo and over the host's other interface)
#       Axon / UCX                                                >= 1.05
#   1 MiB rc tag bandwidth over softib, two devices
#       (AXON_SOFTIB_DEVICES=2) / one device                      >= 1.60
#   1 MiB rc put bandwidth (striped puts), the same               >= 1.60
# and, with --base PERF (the axon_perf of a build without rails), that
# small messages lost nothing (their path is the same; this measures it):
#   8 B tcp and rc tag latency, 8 B rc put latency,
#       this build / PERF                                         <= 1.05
#
# Every measurement runs once per round, rounds interleaved (--repeat N:
# N rounds), and each cell is the median of its rounds: a busy spell of the
# shared machine spreads over all of them, and one lucky quiet slice does
# not decide a verdict (a best-of would). axon_perf runs as --local client and server,
# ucx_perftest as server and client on 127.0.0.1 (UCX picks its lanes by
# UCX_NET_DEVICES; with --keep, the run's ep_cfg line shows them).
# Bandwidths MB/s (UCX's MiB/s converted), latencies half round trips.
#
# Exit status: 0 every goal met, 1 a goal missed or a measurement failed,
# 2 bad options or a program missing that cannot be installed.
#
# Run from the source tree: axon_perf is taken from $AXON_PERF, else
# build/tools/axon_perf, else tools/axon_perf (an in-place build).
set -u

. "$(dirname "$0")/bench_lib.sh"

usage() {
    sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'
    cat <<EOF
Options:
  --quick       a tenth of the iterations (a rough verdict)
  --repeat N    rounds of every measurement, the median kept (default 1)
  --base PERF   also compare small-message latency against this axon_perf
  --keep        keep the raw outputs (their directory is printed)
EOF
}

base=
goal_option() {  # name value
    [ "$1" = --base ] || return 1
    base=${2:?--base needs an axon_perf}
}
bench_goal_options "$@"
[ -z "$base" ] || [ -x "$base" ] || die "--base '$base' is not an executable axon_perf"

bench_find_perf
bench_install ucx_perftest:ucx-utils
for tl in rc tcp; do
    why=$(bench_tl_missing "$tl")
    [ -z "$why" ] || die "$tl cannot run: $why"
done
second_if=$(ip -4 -o addr show up 2>/dev/null | awk '$2 != "lo" { print $2; exit }')
[ -n "$second_if" ] || die "no IPv4 interface besides lo: tcp has one rail here"

bench_start /tmp/axon-rails-goals-XXXXXX
bench_load_check
lat_n=$((quick ? 2000 : 20000))
bw_n=$((quick ? 200 : 2000))
runs=0

# Each measurement sets value (empty on failure) and err.
# axon_perf --local with the environment given: the RESULT line's field.
axon_measure() {  # out perf field env... -- axon_perf-args...
    local out=$1 prog=$2 field=$3 envs=()
    shift 3
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    bench_fg "$out" env "${envs[@]}" timeout -k 5 "$run_timeout" "$prog" --local "$@"
    value=$(bench_result "$out" "$field")
    [ -n "$value" ] || err=$(first_error "$out")
}

# ucx_perftest over tcp on the devices given: Final's bandwidth in MB/s.
ucx_measure() {  # out net-devices ucx_perftest-args...
    local out=$1 devices=$2 line ucx_env
    shift 2
    ucx_env=(env UCX_TLS=tcp UCX_NET_DEVICES="$devices" UCX_WARN_UNUSED_ENV_VARS=n)
    next_port
    client_server "$out" "$port" "${ucx_env[@]}" ucx_perftest -p "$port" -- \
        "${ucx_env[@]}" UCX_LOG_LEVEL=info ucx_perftest 127.0.0.1 -p "$port" "$@"
    # Final: iters p50 lat_avg lat_overall bw_avg bw_overall rate_avg rate_overall
    line=$(grep -m1 '^Final:' "$out")
    if [ -z "$line" ]; then
        err=$(both_errors "$out")
    else
        value=$(awk '{ printf "%.1f", $6 * 1.048576 }' <<<"$line")
    fi
}

# One round of one cell: its value goes to V[key/who] (the rounds' values).
declare -A V
measure() {  # key who lower-is-better measure-function args...
    bench_measure "$@"
    [ -z "$value" ] || V[$1/$2]+=" $value"
}

# Each cell's median, in R where bench_goal_row reads it.
medians() {
    local k
    for k in "${!V[@]}"; do
        R[$k]=$(tr ' ' '\n' <<<"${V[$k]}" | grep . | sort -g |
                awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
    done
}

bw=(bandwidth_MBps)
bw_args=(-t tag_bw -s 1m -n "$bw_n")
put_args=(-t put_bw -s 1m -n "$bw_n")
ucx_bw=(-t tag_bw -s 1048576 -n "$bw_n")
lat_args=(-t tag_lat -s 8 -n "$lat_n")
for ((round = 0; round < repeat; ++round)); do
    measure tcp_lo axon 0 axon_measure "$perf" "${bw[@]}" AXON_TLS=tcp AXON_NET_DEVICES=lo \
        -- "${bw_args[@]}"
    measure tcp_lo ucx 0 ucx_measure lo "${ucx_bw[@]}"
    measure tcp_all axon 0 axon_measure "$perf" "${bw[@]}" AXON_TLS=tcp -- "${bw_args[@]}"
    measure tcp_all ucx 0 ucx_measure all "${ucx_bw[@]}"
    measure rc_bw two 0 axon_measure "$perf" "${bw[@]}" AXON_TLS=rc AXON_SOFTIB_DEVICES=2 \
        -- "${bw_args[@]}"
    measure rc_bw one 0 axon_measure "$perf" "${bw[@]}" AXON_TLS=rc AXON_SOFTIB_DEVICES=1 \
        -- "${bw_args[@]}"
    measure rc_put two 0 axon_measure "$perf" "${bw[@]}" AXON_TLS=rc AXON_SOFTIB_DEVICES=2 \
        -- "${put_args[@]}"
    measure rc_put one 0 axon_measure "$perf" "${bw[@]}" AXON_TLS=rc AXON_SOFTIB_DEVICES=1 \
        -- "${put_args[@]}"
    if [ -n "$base" ]; then
        for tl in tcp rc; do
            measure "${tl}_lat" this 1 axon_measure "$perf" latency_us AXON_TLS=$tl \
                -- "${lat_args[@]}"
            measure "${tl}_lat" base 1 axon_measure "$base" latency_us AXON_TLS=$tl \
                -- "${lat_args[@]}"
        done
        measure put_lat this 1 axon_measure "$perf" latency_us AXON_TLS=rc \
            -- -t put_lat -s 8 -n "$lat_n"
        measure put_lat base 1 axon_measure "$base" latency_us AXON_TLS=rc \
            -- -t put_lat -s 8 -n "$lat_n"
    fi
done

# ------------------------------------------------------------------ verdicts

medians

missed=0
goals=4
echo
echo "multi-rail rendezvous goals (issue 24) $(bench_where | sed 's/(best of/(median of/')"
bench_load_line " (the end includes this run's busy-polling processes)"
echo
echo "| measurement | Axon | reference | Axon / reference | goal | verdict |"
echo "| --- | ---: | ---: | ---: | ---: | --- |"
bench_goal_row "1 MiB tcp bandwidth, MB/s, lo only: Axon vs UCX" tcp_lo axon ucx ">=" 1.10
bench_goal_row "1 MiB tcp bandwidth, MB/s, lo and $second_if: Axon vs UCX" tcp_all axon ucx ">=" 1.05
bench_goal_row "1 MiB rc bandwidth, MB/s: two softib devices vs one" rc_bw two one ">=" 1.60
bench_goal_row "1 MiB rc put bandwidth, MB/s: two softib devices vs one" rc_put two one ">=" 1.60
if [ -n "$base" ]; then
    bench_goal_row "8 B tcp latency, us: this build vs --base" tcp_lat this base "<=" 1.05
    bench_goal_row "8 B rc latency, us: this build vs --base" rc_lat this base "<=" 1.05
    bench_goal_row "8 B rc put latency, us: this build vs --base" put_lat this base "<=" 1.05
    goals=7
fi
[ "$keep" -eq 1 ] && echo && echo "Raw outputs: $work"
echo
bench_goals_exit "$missed" "$goals"
