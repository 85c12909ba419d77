#!/bin/bash
# Offloaded collectives (softib's cross-channel chains, components/xchannel)
# against the software algorithms on the same softib devices, one run after
# another, with axon_perf --overlap.
#
#   contrib/bench/coll_offload.sh [--np 2,4] [--sizes 8,64,1k]
#       [--tests barrier,allreduce,bcast] [--repeat N] [--quick] [--keep]
#
#   offload   AXON_TLS=rc AXON_COLL_OFFLOAD=y axon_perf --np N -t coll_<test>
#   software  the same with AXON_COLL_OFFLOAD=n (Axon's collectives over rc)
# Each run prints the largest of the ranks' average latency (post + wait) and
# overlap_pct: how much of the collective's time a computation of the same
# length between post and wait hides (100: all of it; OSU's definition).
# ratio = offload / software latency (below 1: offload is faster). Each cell is
# the best of --repeat runs (lowest latency, highest overlap).
#
# softib's progress threads are the "NIC": on a machine with fewer cores than
# ranks times two, they take their time from the computation they overlap.
set -u

. "$(dirname "$0")/bench_lib.sh"

usage() {
    sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
    cat <<EOF
Options:
  --np LIST     rank counts, comma separated (default 2,4)
  --sizes LIST  bytes per rank, comma separated, multiples of 8 (default 8,64,1k;
                the barrier runs once per rank count)
  --tests LIST  collectives, comma separated (default barrier,allreduce,bcast)
  --repeat N    run each measurement N times and keep the best (default 1)
  --quick       a tenth of the iterations
  --keep        keep the raw outputs (their directory is printed)
EOF
}

bench_parse_coll_options barrier,allreduce,bcast "barrier allreduce bcast" 8,64,1k -- "$@"
bench_find_perf
bench_start /tmp/axon-coll-offload-XXXXXX
shm_prefix=axxc$$
iters=$((quick ? 300 : 3000))

coll_run() {  # mode(y|n) test np size
    local out="$work/$1-$2-$3-$4" line
    AXON_TLS=rc AXON_COLL_OFFLOAD=$1 AXON_SHM_PREFIX=$shm_prefix timeout "$run_timeout" \
        "$perf" --np "$3" -t "coll_$2" -s "$4" -n "$iters" -W $((iters / 10)) --overlap \
        >"$out" 2>&1 &
    fg_pid=$!
    wait "$fg_pid"
    fg_pid=
    rm -f /dev/shm/"$shm_prefix"-*
    line=$(grep -m1 '^RESULT' "$out")
    if [ -z "$line" ]; then
        [ -z "${E[$1,$2,$3,$4]:-}" ] && E[$1,$2,$3,$4]=$(first_error "$out")
        return
    fi
    if [ "$1" = y ] && ! grep -q "algo=offload" <<<"$line"; then
        E[$1,$2,$3,$4]="not offloaded"
        return
    fi
    best "$1,$2-$3,lat_us,$4" "$(sed -n 's/.* latency_us=\([0-9.]*\).*/\1/p' <<<"$line")" 1
    best "$1,$2-$3,overlap,$4" "$(sed -n 's/.* overlap_pct=\([0-9.]*\).*/\1/p' <<<"$line")" 0
}

sizes_of() { if [ "$1" = barrier ]; then echo 8; else echo "${sizes[@]}"; fi; }

echo "== axon_perf: $perf" >&2
bench_load_check
for t in "${tests[@]}"; do
    for np in "${nps[@]}"; do
        for size in $(sizes_of "$t"); do
            for r in $(seq "$repeat"); do
                echo "== $t np=$np size=$size run $r/$repeat ($iters iterations)" >&2
                coll_run y "$t" "$np" "$size"
                coll_run n "$t" "$np" "$size"
            done
        done
    done
done

echo
echo "Offloaded vs software collectives over softib rc $(bench_where)"
bench_load_line " (the end includes this run's busy-polling ranks)"
echo "Largest of the ranks' average latency in us (lower is better), ratio = offload /" \
    "software; overlap in % (higher is better)."
echo
row test ranks size "offload us" "software us" ratio "offload overlap %" "software overlap %"
row --- ---: ---: ---: ---: ---: ---: ---:
for t in "${tests[@]}"; do
    for np in "${nps[@]}"; do
        for size in $(sizes_of "$t"); do
            cells=("$t" "$np")
            if [ "$t" = barrier ]; then cells+=(-); else cells+=("$(human "$size")"); fi
            cell_of y "$t-$np" lat_us "$size" "y,$t,$np,$size"; cells+=("$C")
            cell_of n "$t-$np" lat_us "$size" "n,$t,$np,$size"; cells+=("$C")
            ratio "y,$t-$np,lat_us,$size" "n,$t-$np,lat_us,$size"; cells+=("$C")
            cell_of y "$t-$np" overlap "$size" "y,$t,$np,$size"; cells+=("$C")
            cell_of n "$t-$np" overlap "$size" "n,$t,$np,$size"; cells+=("$C")
            row "${cells[@]}"
        done
    done
done
bench_notes
exit 0
