#!/bin/bash
# Axon's collectives against Open MPI's own on the same ranks, sizes and
# iterations, one run after another, and one ratio table per collective.
#
#   contrib/bench/coll_compare.sh [--np 2,4] [--sizes 8,4k,64k,1m]
#       [--tests barrier,bcast,reduce,allreduce,allgather,alltoall]
#       [--repeat N] [--quick] [--keep]
#
#   Axon      axon_perf --np N -t coll_<test> (Axon's default transports:
#             shm on one host), through its persistent collectives
#   Open MPI  contrib/bench/coll_mpi.c under mpirun --mca pml ob1 --mca btl
#             self,vader: MPI_Barrier, Bcast, Reduce, Allreduce, Allgather,
#             Alltoall
# Both time ITERS calls per rank after a barrier and report the largest of
# the ranks' averages in us; int64 sums, root 0; sizes are bytes per rank
# (the block of allgather and alltoall). ratio = Axon / Open MPI (below 1:
# Axon is faster). Each cell is the best of --repeat runs.
#
# Run from the source tree: axon_perf is $AXON_PERF, else build/tools/axon_perf,
# else tools/axon_perf; coll_mpi is built with mpicc into <build>/contrib/bench/
# when missing or older than its source.
set -u

. "$(dirname "$0")/bench_lib.sh"

usage() {
    sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'
    cat <<EOF
Options:
  --np LIST     rank counts, comma separated (default 2,4)
  --sizes LIST  bytes per rank, comma separated, k/m suffixes, multiples of 8
                (default 8,4k,64k,1m; the barrier runs once per rank count)
  --tests LIST  collectives, comma separated (default all six)
  --repeat N    run each measurement N times and keep the best (default 1)
  --quick       a tenth of the iterations
  --keep        keep the raw outputs (their directory is printed)
EOF
}

all_tests="barrier bcast reduce allreduce allgather alltoall"
bench_parse_coll_options "${all_tests// /,}" "$all_tests" 8,4k,64k,1m -- "$@"

# ------------------------------------------------------------------ tools

command -v mpicc >/dev/null || die "mpicc is needed (Debian: libopenmpi-dev)"
bench_find_mpi
srcdir=$(cd "$(dirname "$0")/../.." && pwd)
mpi_prog=$builddir/contrib/bench/coll_mpi
if [ ! -x "$mpi_prog" ] || [ "$srcdir/contrib/bench/coll_mpi.c" -nt "$mpi_prog" ]; then
    mkdir -p "$builddir/contrib/bench" || die "cannot create $builddir/contrib/bench"
    mpicc -std=gnu11 -O2 -Wall -Wextra -o "$mpi_prog" "$srcdir/contrib/bench/coll_mpi.c" ||
        die "could not build $mpi_prog"
fi

# ------------------------------------------------------------------ running

bench_start /tmp/axon-coll-compare-XXXXXX

# Iterations: about 128 MiB per rank's worth, at least 50 and at most
# 100000 (a sub-microsecond collective needs tens of milliseconds of loop
# to stand above the scheduler's noise); a tenth with --quick (at least 10).
iters() {  # size
    local n
    n=$(clamp $(((1 << 27) / ($1 + 1))) 50 100000)
    [ $quick -eq 1 ] && n=$((n / 10 < 10 ? 10 : n / 10))
    echo "$n"
}

# lat (empty on failure) and err of one run's first RESULT line.
read_lat() {  # out
    local line
    lat=; err=
    line=$(grep -m1 '^RESULT' "$1")
    if [ -z "$line" ]; then err=$(first_error "$1"); return; fi
    lat=$(sed -n 's/.* latency_us=\([0-9.]*\).*/\1/p' <<<"$line")
}

coll_run() {  # lib test np size
    local out="$work/$1-$2-$3-$4" n
    n=$(iters "$4")
    if [ "$1" = axon ]; then
        AXON_SHM_PREFIX=$shm_prefix timeout "$run_timeout" "$perf" --np "$3" -t "coll_$2" \
            -s "$4" -n "$n" -W "$(warmup_of "$n")" >"$out" 2>&1 &
        fg_pid=$!
        wait "$fg_pid"
        fg_pid=
        rm -f /dev/shm/"$shm_prefix"-*
    else
        mpi_run "$out" ob1-vader "$3" "$mpi_prog" -t "$2" -s "$4" -n "$n" -W "$(warmup_of "$n")"
    fi
    read_lat "$out"
    if [ -n "$err" ]; then
        [ -z "${E[$1,$2,$3,$4]:-}" ] && E[$1,$2,$3,$4]=$err
    else
        best "$1,$2-$3,lat_us,$4" "$lat" 1
    fi
}

sizes_of() { if [ "$1" = barrier ]; then echo 0; else echo "${sizes[@]}"; fi; }

echo "== axon_perf: $perf" >&2
echo "== MPI program: $mpi_prog" >&2
bench_load_check
echo "== tests: ${tests[*]}; ranks: ${nps[*]}; sizes: ${sizes[*]}; repeat: $repeat" >&2
for t in "${tests[@]}"; do
    for np in "${nps[@]}"; do
        for size in $(sizes_of "$t"); do
            for r in $(seq "$repeat"); do
                echo "== $t np=$np size=$size run $r/$repeat ($(iters "$size") iterations)" >&2
                coll_run axon "$t" "$np" "$size"
                coll_run mpi "$t" "$np" "$size"
            done
        done
    done
done

# ------------------------------------------------------------------ tables

echo
echo "Axon vs Open MPI $(mpi_version) (ob1 + vader) collectives $(bench_where)"
bench_load_line " (the end includes this run's busy-polling ranks)"
echo "Largest of the ranks' average latency per collective in us (lower is better);" \
    "ratio = Axon / Open MPI."
for t in "${tests[@]}"; do
    echo
    echo "$t:"
    echo
    header=(ranks)
    align=(---:)
    for size in $(sizes_of "$t"); do
        header+=("$(human "$size") Axon" "Open MPI" "ratio")
        align+=(---: ---: ---:)
    done
    row "${header[@]}"
    row "${align[@]}"
    for np in "${nps[@]}"; do
        cells=("$np")
        for size in $(sizes_of "$t"); do
            cell_of axon "$t-$np" lat_us "$size" "axon,$t,$np,$size"; cells+=("$C")
            cell_of mpi "$t-$np" lat_us "$size" "mpi,$t,$np,$size"; cells+=("$C")
            ratio "axon,$t-$np,lat_us,$size" "mpi,$t-$np,lat_us,$size"; cells+=("$C")
        done
        row "${cells[@]}"
    done
done
bench_notes
exit 0
