#!/bin/bash
# The goals of non-contiguous transfers (issue 21), measured in one run,
# each ratio printed against its goal with PASS or MISS:
#
#   over shm, a 1 MiB tag transfer as 256 pieces of 4 KiB (axon_perf
#     -t tag_bw -D iov:256, both sides) / the same 1 MiB contiguous,
#     bandwidth                                                      >= 0.9
#   over rc on softib, 64 KiB from a contiguous buffer into 1024 blocks
#     of 64 B 128 B apart at the target (-t put_bw -s 64k -R
#     strided:64:128), time per 64 KiB, against one put through the
#     target's layout key (one UMR key, 32 in flight):
#       1024 separate 64 B puts at the blocks' places in a contiguous
#       key (--separate-puts, 1024 puts in flight)                   >= 5
#       pack + put + target unpack: the packed 64 KiB put into a bounce
#       slot of the target, a flush, a tag message, the target
#       scatters the slot and answers (--pack-unpack, 32 in flight)  >= 2
#   side by side with ucx_perftest's iov datatype (-D iov) at the same
#     sizes, Axon over shm against UCX over sm (UCX cannot drive softib):
#     the tag transfer above, bandwidth Axon / UCX                   >= 1.0
#     a put gathering 1024 entries of 64 B 128 B apart (UCX: ucp_put_bw
#     of a 1024-entry iov; Axon: -D strided:64:128), time UCX / Axon >= 1.0
#     (not measured when UCX's iov put is over twice as fast as its
#     contiguous put of the same 64 KiB: then it did not move every entry)
#
# Rows for information, no goal: the rc pack comparison one put at a time
# (-w 1, each complete before the next); the same with the source strided
# too (-D strided:64:128: the pack gathers, the key put has a local
# layout); the ratio a key as fast as a contiguous 64 KiB put would reach
# against pack + put + unpack (the most any layout key can get on this
# device); and over shm, a contiguous put against the put into the layout
# key (the target places the pieces).
#
# Exit status: 0 every goal met, 1 a goal missed or a measurement failed,
# 2 bad options. ucx-utils is installed with apt-get if missing; without it
# the UCX rows say so.
#
# Run from the source tree: axon_perf is taken from $AXON_PERF, else
# build/tools/axon_perf, else tools/axon_perf (an in-place build).
set -u

. "$(dirname "$0")/bench_lib.sh"

usage() {
    sed -n '2,36p' "$0" | sed 's/^# \{0,1\}//'
    cat <<EOF
Options:
  --quick      a tenth of the iterations (a rough verdict)
  --repeat N   run every measurement N times, in N rounds, and keep the best
               of each (default 1)
  --keep       keep the raw tool outputs (their directory is printed)
EOF
}

bench_goal_options "$@"

bench_find_perf
"$perf" -h | grep -q -- '--pack-unpack' || die "$perf has no -R (remote layouts): rebuild it"
rc_missing=$(bench_tl_missing rc)
bench_install ucx_perftest:ucx-utils
have_ucx=0
command -v ucx_perftest >/dev/null && have_ucx=1

bench_start /tmp/axon-layout-compare-XXXXXX
bench_load_check
scale=$((quick ? 10 : 1))
tag_n=$((2000 / scale))          # 1 MiB messages
put_n=$((20000 / scale))         # 64 KiB strided puts
sep_n=$((200 / scale))           # 64 KiB as 1024 separate puts

runs=0
# One axon_perf --local run over tl: the RESULT line's field into value, or err.
axon_measure() {  # tl field args...
    local tl=$1 field=$2 out line got
    shift 2
    out="$work/axon-$tl-$((++runs))"
    AXON_TLS=$tl timeout -k 5 "$run_timeout" "$perf" --local "$@" >"$out" 2>&1 &
    fg_pid=$!
    wait "$fg_pid"
    fg_pid=
    value=
    err=
    line=$(grep -m1 '^RESULT' "$out")
    got=$(sed -n 's/.* tl=\([^ ]*\) .*/\1/p' <<<"$line")
    if [ -z "$line" ]; then
        err=$(first_error "$out")
    elif [ "$got" != "$tl" ]; then
        err="ran over $got, not $tl"
    else
        value=$(sed -n "s/.* $field=\\([0-9.]*\\).*/\\1/p" <<<"$line")
    fi
}

# One ucx_perftest server and client over UCX_TLS=sm: value is the Final
# line's overall latency (us) or bandwidth (MB/s), or err.
ucx_measure() {  # lat|bw args...
    local what=$1 out line lat bw
    shift
    value=
    err=
    [ $have_ucx -eq 1 ] || { err="ucx_perftest not installed"; return; }
    out="$work/ucx-sm-$((++runs))"
    next_port
    client_server "$out" "$port" env UCX_TLS=sm ucx_perftest -p "$port" -- \
        env UCX_TLS=sm ucx_perftest 127.0.0.1 -p "$port" "$@"
    # Final: iters p50 lat_avg lat_overall bw_avg bw_overall(MiB/s) rate_avg rate_overall
    line=$(grep -m1 '^Final:' "$out")
    if [ -z "$line" ]; then
        err=$(both_errors "$out")
        return
    fi
    read -r _ _ _ _ lat _ bw _ <<<"$line"
    if [ "$what" = lat ]; then
        value=$lat
    else
        value=$(awk -v b="$bw" 'BEGIN { printf "%.3f", b * 1.048576 }')  # MiB/s -> MB/s
    fi
}

# One run, the best so far kept in R[key], or the first error in E[key].
best_of() {  # key lower-is-better axon|ucx args...
    local key=$1 low=$2 lib=$3
    shift 3
    echo "== $key (round $((round + 1)) of $repeat)" >&2
    "${lib}_measure" "$@"
    if [ -n "$value" ]; then
        best "$key" "$value" "$low"
    elif [ -z "${E[$key]:-}" ]; then
        E[$key]=$err
    fi
}

# count copies of a size, comma separated: ucx_perftest's iov entries (-s).
iov_list() {  # size count
    local list=$1 i
    for ((i = 1; i < $2; ++i)); do list+=",$1"; done
    echo "$list"
}

# ------------------------------------------------------------------ runs

# Every measurement once. --repeat runs rounds of them, not each one N times
# in a row, so the cells compared share the same spells of load.
measure_round() {
    best_of tag_iov 0 axon shm bandwidth_MBps -t tag_bw -s 1m -D iov:256 -n "$tag_n"
    best_of tag_contig 0 axon shm bandwidth_MBps -t tag_bw -s 1m -n "$tag_n"
    best_of put_strided_shm 1 axon shm latency_us -t put_bw -s 64k -D strided:64:128 -n "$put_n"
    best_of rput_key_shm 1 axon shm latency_us -t put_bw -s 64k -R strided:64:128 -n "$put_n"
    best_of put_contig_shm 1 axon shm latency_us -t put_bw -s 64k -n "$put_n"
    # One -R layout, four ways to fill it over rc; time per 64 KiB each.
    rput=(-t put_bw -s 64k -R strided:64:128)
    if [ -z "$rc_missing" ]; then
        best_of rput_key_rc 1 axon rc latency_us "${rput[@]}" -n "$put_n"
        best_of rput_sep_rc 1 axon rc latency_us "${rput[@]}" --separate-puts -w 1024 -n "$sep_n"
        best_of rput_pack_rc 1 axon rc latency_us "${rput[@]}" --pack-unpack -n "$put_n"
        best_of rput_key_rc_w1 1 axon rc latency_us "${rput[@]}" -w 1 -n "$put_n"
        best_of rput_pack_rc_w1 1 axon rc latency_us "${rput[@]}" --pack-unpack -w 1 -n "$put_n"
        best_of rput_key_both_rc 1 axon rc latency_us "${rput[@]}" -D strided:64:128 -n "$sep_n"
        best_of rput_pack_both_rc 1 axon rc latency_us "${rput[@]}" -D strided:64:128 \
            --pack-unpack -n "$put_n"
        best_of put_contig_rc 1 axon rc latency_us -t put_bw -s 64k -n "$put_n"
    else
        for k in rput_key_rc rput_sep_rc rput_pack_rc rput_key_rc_w1 rput_pack_rc_w1 \
                 rput_key_both_rc rput_pack_both_rc put_contig_rc; do
            E[$k]="rc cannot run: $rc_missing"
        done
    fi
    # UCX: the same pieces at the same distances (-i: from one entry's start to the next's).
    best_of ucx_tag_iov 0 ucx bw -t tag_bw -D iov,iov -s "$(iov_list 4096 256)" -i 8192 \
        -n "$tag_n" -w "$(warmup_of "$tag_n")"
    best_of ucx_put_iov 1 ucx lat -t ucp_put_bw -D iov -s "$(iov_list 64 1024)" -i 128 \
        -n "$put_n" -w "$(warmup_of "$put_n")"
    best_of ucx_put_contig 1 ucx lat -t ucp_put_bw -s 65536 -n "$put_n" -w "$(warmup_of "$put_n")"
}
for ((round = 0; round < repeat; ++round)); do
    measure_round
done
# An iov put cannot beat a contiguous put of the same 64 KiB by far: if it
# does, UCX did not move every entry (UCX 1.13's ucp_put_bw puts one), and
# its time is no measurement of the layout.
if [ -n "${R[ucx_put_iov]:-}" ] && [ -n "${R[ucx_put_contig]:-}" ] &&
        awk -v i="${R[ucx_put_iov]}" -v c="${R[ucx_put_contig]}" 'BEGIN { exit !(i * 2 < c) }'; then
    E[ucx_put_iov]="UCX's iov put took ${R[ucx_put_iov]} us, its contiguous 64 KiB put"
    E[ucx_put_iov]+=" ${R[ucx_put_contig]} us: it does not move the whole iov"
    unset 'R[ucx_put_iov]'
fi

# ------------------------------------------------------------------ verdicts

missed=0 goals=0
# One row: the two values, their ratio a / b and the verdict against the
# goal; goal "-": a row for information, counted in no verdict.
goal() {  # what key-a key-b goal
    local what=$1 a=${R[$2]:-} b=${R[$3]:-} ratio verdict want=">= $4"
    [ "$4" = - ] && want=- || goals=$((goals + 1))
    if [ -z "$a" ] || [ -z "$b" ]; then
        [ "$4" = - ] || missed=$((missed + 1))
        echo "| $what | ${a:-fail} | ${b:-fail} | - | $want | FAIL: ${E[$2]:-${E[$3]:-no result}} |"
        return
    fi
    ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { printf (b > 0) ? "%.3f" : "inf", a / b }')
    if [ "$4" = - ]; then
        echo "| $what | $a | $b | $ratio | - | info |"
        return
    fi
    if [ "$ratio" != inf ] && awk -v r="$ratio" -v g="$4" 'BEGIN { exit !(r >= g) }'; then
        verdict=PASS
    else
        verdict=MISS
        missed=$((missed + 1))
    fi
    echo "| $what | $a | $b | $ratio | >= $4 | $verdict |"
}

echo
echo "Layout goals ($(uname -n), $(date -u '+%Y-%m-%d %H:%M UTC'), load ${load_start:-?} at" \
     "start$([ $quick -eq 1 ] && echo ', --quick')$([ "$repeat" -gt 1 ] && echo ", best of $repeat"))"
echo "UCX $(ucx_info -v 2>/dev/null | sed -n 's/^# Version //p') over sm; Axon over shm and rc (softib)."
echo
echo "| measurement | a | b | a / b | goal | verdict |"
echo "| --- | ---: | ---: | ---: | ---: | --- |"
goal "shm tag 1 MiB, MB/s: a = iov:256 (4 KiB pieces), b = contiguous" tag_iov tag_contig 0.9
goal "rc 64 KiB into -R strided:64:128, us: a = 1024 separate puts, b = one put, layout key" \
    rput_sep_rc rput_key_rc 5
goal "rc the same, us: a = pack + put + target unpack, b = one put, layout key" \
    rput_pack_rc rput_key_rc 2
goal "tag 1 MiB in 256 x 4 KiB, MB/s: a = Axon shm iov:256, b = UCX sm -D iov,iov" \
    tag_iov ucx_tag_iov 1.0
goal "put of 1024 x 64 B, us: a = UCX sm ucp_put_bw -D iov, b = Axon shm strided:64:128" \
    ucx_put_iov put_strided_shm 1.0
goal "rc one at a time (-w 1), us: a = pack + put + target unpack, b = one put, layout key" \
    rput_pack_rc_w1 rput_key_rc_w1 -
goal "rc source strided too (-D), us: a = gather + put + target unpack, b = one put, layout key" \
    rput_pack_both_rc rput_key_both_rc -
goal "rc ceiling, us: a = pack + put + target unpack, b = one contiguous 64 KiB put" \
    rput_pack_rc put_contig_rc -
goal "shm 64 KiB, us: a = contiguous put, b = one put into -R strided:64:128 (layout key)" \
    put_contig_shm rput_key_shm -
echo
echo "Times are per 64 KiB; unless -w 1 says otherwise, 32 of them in flight (1024 of the"
echo "separate puts). The ceiling row is the most a layout key as fast as a contiguous put"
echo "could reach against pack + put + unpack."
[ "$keep" -eq 1 ] && echo && echo "Raw outputs: $work"
echo
bench_goals_exit "$missed" "$goals"
