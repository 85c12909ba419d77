#!/bin/bash
# The goals of softib behind the libibverbs ABI (issue 23), measured in one
# run on one host, every program on the same softib device; each ratio is
# printed against its goal with PASS or MISS:
#
#   8 B put latency, Axon rc / perftest ib_write_lat     <= 1.10
#       (axon_perf -t put_lat: Axon adds little above the device)
#   8 B tag latency, Axon rc / UCX rc_verbs              <= 0.90
#       (axon_perf -t tag_lat, ucx_perftest -t tag_lat)
#   1 MiB tag bandwidth, Axon rc / UCX rc_verbs          >= 1.00
#       (axon_perf -t tag_bw, ucx_perftest -t tag_bw)
#   8 B tag latency, Axon rc on softib / Axon tcp        <= 1.00
#       (a software NIC must not be slower than sockets)
#
# perftest and UCX run on softib through Axon's libibverbs.so.1
# (LD_LIBRARY_PATH=<build>/.libs/axon/softib-verbs), UCX inside
# contrib/softib/devnodes.sh's private mount namespace (it needs
# /dev/infiniband/softib0 to exist; docs/design.md, "UCX on softib") with
# UCX_TLS=rc_verbs,ud_verbs:aux (ud carries UCP's wireup only; the run's
# ep_cfg line, kept with --keep, shows the tag lane on rc_verbs). Latencies
# are averages of half round trips for all three (perftest's t_avg, UCX's
# average, axon_perf's latency_us); bandwidths MB/s (UCX's MiB/s converted).
#
# Exit status: 0 every goal met, 1 a goal missed or a measurement failed,
# 2 bad options or a program missing that cannot be installed.
#
# Run from the source tree: axon_perf is taken from $AXON_PERF, else
# build/tools/axon_perf, else tools/axon_perf (an in-place build).
set -u

. "$(dirname "$0")/bench_lib.sh"

usage() {
    sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'
    cat <<EOF
Options:
  --quick       a tenth of the iterations (a rough verdict)
  --repeat N    N rounds of every measurement, the best of each kept (default 1)
  --keep        keep the raw outputs (their directory is printed)
EOF
}

bench_goal_options "$@"

bench_find_perf
builddir=$(cd "$(dirname "$perf")/.." && pwd)
verbs_dir=$builddir/.libs/axon/softib-verbs
devnodes=$(cd "$(dirname "$0")/../softib" && pwd)/devnodes.sh
[ -e "$verbs_dir/libibverbs.so.1" ] ||
    die "$verbs_dir/libibverbs.so.1 is not built (configure found no libibverbs headers)"
bench_install ib_write_lat:perftest ucx_perftest:ucx-utils
for tl in rc tcp; do
    why=$(bench_tl_missing "$tl")
    [ -z "$why" ] || die "$tl cannot run: $why"
done

bench_start /tmp/axon-softib-compare-XXXXXX
bench_load_check
lat_n=$((quick ? 2000 : 20000))
bw_n=$((quick ? 100 : 1000))
runs=0

# Each measurement sets value (empty on failure) and err.
# axon_perf --local over tl: the RESULT line's field.
axon_measure() {  # out tl field axon_perf-args...
    local out=$1 tl=$2 field=$3 line got
    shift 3
    AXON_TLS=$tl timeout -k 5 "$run_timeout" "$perf" --local "$@" >"$out" 2>&1 &
    fg_pid=$!
    wait "$fg_pid"
    fg_pid=
    line=$(grep -m1 '^RESULT' "$out")
    got=$(sed -n 's/.* tl=\([^ ]*\) .*/\1/p' <<<"$line")
    if [ -z "$line" ]; then
        err=$(first_error "$out")
    elif [ "$got" != "$tl" ]; then
        err="ran over $got, not $tl"
    else
        value=$(sed -n "s/.* $field=\\([-0-9.]*\\).*/\\1/p" <<<"$line")
    fi
}

# perftest's ib_write_lat on softib0: t_avg of the line under its header
# (#bytes #iterations t_min t_max t_typical t_avg ...).
perftest_measure() {  # out size iters
    local out=$1
    next_port
    client_server "$out" "$port" \
        env LD_LIBRARY_PATH="$verbs_dir" ib_write_lat -d softib0 -x 0 -p "$port" -s "$2" -n "$3" -- \
        env LD_LIBRARY_PATH="$verbs_dir" ib_write_lat -d softib0 -x 0 -p "$port" -s "$2" -n "$3" \
        127.0.0.1
    value=$(awk -v s="$2" '$1 == s && $2 ~ /^[0-9]+$/ { print $6; exit }' "$out")
    [ -n "$value" ] || err=$(both_errors "$out")
}

# ucx_perftest over rc_verbs on softib0: Final's average latency or
# bandwidth (MiB/s, converted to MB/s); the tag lane must be rc_verbs.
ucx_measure() {  # out field(lat|bw) ucx_perftest-args...
    local out=$1 field=$2 line ucx_env
    shift 2
    ucx_env=(env LD_LIBRARY_PATH="$verbs_dir" UCX_TLS=rc_verbs,ud_verbs:aux
             UCX_NET_DEVICES=softib0:1 UCX_WARN_UNUSED_ENV_VARS=n)
    next_port
    client_server "$out" "$port" "${ucx_env[@]}" "$devnodes" ucx_perftest -p "$port" -- \
        "${ucx_env[@]}" UCX_LOG_LEVEL=info "$devnodes" ucx_perftest 127.0.0.1 -p "$port" "$@"
    # Final: iters p50 lat_avg lat_overall bw_avg bw_overall rate_avg rate_overall
    line=$(grep -m1 '^Final:' "$out")
    if [ -z "$line" ]; then
        err=$(both_errors "$out")
    elif ! grep -q 'ep_cfg\[0\]: tag(rc_verbs/softib0:1' "$out"; then
        err="UCX's tag lane is not rc_verbs: $(grep -m1 -o 'ep_cfg\[0\]: .*' "$out")"
    elif [ "$field" = lat ]; then
        value=$(awk '{ print $4 }' <<<"$line")
    else
        value=$(awk '{ printf "%.1f", $6 * 1.048576 }' <<<"$line")
    fi
}

# Best of --repeat rounds into R[key/who], or the first error into E[key/who].
# A round runs every program once, so a slow phase of the host (minutes
# long on a shared VM) falls on both sides of a ratio alike.
for ((round = 0; round < repeat; ++round)); do
    bench_measure put_lat perftest 1 perftest_measure 8 "$lat_n"
    bench_measure put_lat axon-rc 1 axon_measure rc latency_us -t put_lat -s 8 -n "$lat_n"
    bench_measure tag_lat ucx-rc 1 ucx_measure lat -t tag_lat -s 8 -n "$lat_n"
    bench_measure tag_lat axon-rc 1 axon_measure rc latency_us -t tag_lat -s 8 -n "$lat_n"
    bench_measure tag_lat axon-tcp 1 axon_measure tcp latency_us -t tag_lat -s 8 -n "$lat_n"
    bench_measure tag_bw ucx-rc 0 ucx_measure bw -t tag_bw -s 1048576 -n "$bw_n"
    bench_measure tag_bw axon-rc 0 axon_measure rc bandwidth_MBps -t tag_bw -s 1m -n "$bw_n"
done

# ------------------------------------------------------------------ verdicts

missed=0
echo
echo "softib goals (issue 23) $(bench_where)"
bench_load_line " (the end includes this run's busy-polling processes)"
echo
echo "| measurement | Axon | reference | Axon / reference | goal | verdict |"
echo "| --- | ---: | ---: | ---: | ---: | --- |"
bench_goal_row "8 B put latency, us: rc vs perftest ib_write_lat" put_lat axon-rc perftest "<=" 1.10
bench_goal_row "8 B tag latency, us: rc vs UCX rc_verbs" tag_lat axon-rc ucx-rc "<=" 0.90
bench_goal_row "1 MiB tag bandwidth, MB/s: rc vs UCX rc_verbs" tag_bw axon-rc ucx-rc ">=" 1.00
bench_goal_row "8 B tag latency, us: rc on softib vs Axon tcp" tag_lat axon-rc axon-tcp "<=" 1.00
[ "$keep" -eq 1 ] && echo && echo "Raw outputs: $work"
echo
bench_goals_exit "$missed" 4
