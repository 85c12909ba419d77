#!/bin/bash
# MPI one-sided latency over Axon's libfabric provider beside Open MPI's own
# one-sided components, one run after another, and one table of the results.
#
#   contrib/bench/osc_compare.sh [--quick] [--sizes 8,4k,64k,1m] [--repeat N] [--keep]
#
# tests/mpi/osc_lat.c (2 ranks; rank 0 holds MPI_Win_lock_all on a window
# from MPI_Win_create and times, per operation, MPI_Put + MPI_Win_flush,
# MPI_Get + MPI_Win_flush, and MPI_Fetch_and_op(MPI_SUM) of a long +
# MPI_Win_flush) runs under mpirun with
#   osc ucx              --mca pml ucx --mca osc ucx, pml_ucx_tls/devices any (UCX
#                        picks its transports; without an RDMA device Open MPI
#                        4.1 disqualifies pml ucx otherwise)
#   osc rdma, Axon       --mca pml cm --mca mtl ofi --mca osc rdma --mca btl self,ofi,
#                        ofi provider axon for both (Axon picks shm); Open MPI's
#                        default osc_rdma_acc_use_amo (only MPI_SUM is used)
#   osc rdma, Axon tcp   the same with AXON_TLS=tcp
#   osc rdma, vader      --mca pml ob1 --mca osc rdma --mca btl self,vader
#   osc rdma, tcp        --mca pml ob1 --mca osc rdma --mca btl self,tcp
# Every configuration names its osc component, so a run measures that one or
# fails (a fail[n] cell, with Open MPI's reason under the table). The table
# gives each latency (us, best of --repeat runs) and its ratio to osc ucx.
#
# Run from the source tree: the build is found from axon_perf ($AXON_PERF,
# else build/tools/axon_perf, else tools/axon_perf), as for mpi_compare.sh;
# the program is built with mpicc into <build>/tests/mpi/ when missing or
# older than its sources.
set -u

. "$(dirname "$0")/bench_lib.sh"

usage() {
    sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'
    cat <<EOF
Options:
  --quick       a tenth of the iterations
  --sizes LIST  put and get sizes, comma separated, k/m suffixes (default 8,4k,64k,1m);
                fetch_and_op is always one long
  --repeat N    run each measurement N times and keep the best (default 1)
  --keep        keep the raw outputs (their directory is printed)
EOF
}
bench_parse_options "sizes start at 8: a put carries its iteration number" -- \
    --sizes 8,4k,64k,1m "$@"
for s in "${sizes[@]}"; do
    [ "$s" -ge 8 ] || die "size $s: sizes start at 8 (a put carries its iteration number)"
done

# ------------------------------------------------------------------ tools

command -v mpicc >/dev/null || die "mpicc is needed (Debian: libopenmpi-dev)"
bench_find_mpi
srcdir=$(cd "$(dirname "$0")/../.." && pwd)
prog=$builddir/tests/mpi/osc_lat
if [ ! -x "$prog" ] || [ "$srcdir/tests/mpi/osc_lat.c" -nt "$prog" ] ||
        [ "$srcdir/tests/mpi/osc_win.h" -nt "$prog" ] ||
        [ "$srcdir/tests/mpi/mpi_check.h" -nt "$prog" ]; then
    mkdir -p "$builddir/tests/mpi" || die "cannot create $builddir/tests/mpi"
    mpicc -std=gnu11 -O2 -Wall -Wextra -o "$prog" "$srcdir/tests/mpi/osc_lat.c" ||
        die "could not build $prog"
fi

# ------------------------------------------------------------------ running

bench_start /tmp/axon-osc-compare-XXXXXX

configs=(osc-ucx osc-axon osc-axon-tcp osc-vader osc-tcp)
declare -A label=(
    [osc-ucx]="osc ucx"
    [osc-axon]="osc rdma, btl ofi, Axon"
    [osc-axon-tcp]="osc rdma, btl ofi, Axon tcp"
    [osc-vader]="osc rdma, btl vader"
    [osc-tcp]="osc rdma, btl tcp"
)

# Iterations: 5000 for small sizes, fewer as they grow (each about a second
# on shared memory); a quarter over tcp, a tenth with --quick.
iters() {  # size config
    local n
    n=$(clamp $(((1 << 30) / ($1 + 1))) 200 5000)
    [[ $2 == *tcp ]] && n=$((n / 4))
    [ $quick -eq 1 ] && n=$((n / 10))
    echo $((n < 50 ? 50 : n))
}

# One mpirun per configuration and size: put and get of that size (and
# fetch_and_op with the first size). R[config,test,lat_us,size].
osc_run() {  # config size first-size?
    local out="$work/$1-$2" n tests=put,get line t s v
    n=$(iters "$2" "$1")
    [ "$3" -eq 1 ] && tests=put,get,fop
    echo "== $1 size=$2 ($n iterations)" >&2
    mpi_run "$out" "$1" 2 "$prog" -t "$tests" -s "$2" -n "$n" -w "$(warmup_of "$n")"
    if ! grep -q '^RESULT test=osc_' "$out" || grep -q 'FAIL' "$out"; then
        # the same reason at every size reads as one note
        [ -z "${E[$1,$2]:-}" ] && E[$1,$2]=$(first_error "$out" |
            sed -E 's/^.*FAIL (MPI_[A-Za-z_]+) of [0-9]+ B /\1 /')
        [ "$3" -eq 1 ] && [ -z "${E[$1,fop]:-}" ] && E[$1,fop]=${E[$1,$2]}
        return
    fi
    while read -r line; do
        t=$(sed -n 's/.*test=osc_\([a-z]*\) .*/\1/p' <<<"$line")
        s=$(sed -n 's/.* size=\([0-9]*\) .*/\1/p' <<<"$line")
        v=$(sed -n 's/.* latency_us=\([0-9.]*\).*/\1/p' <<<"$line")
        [ "$t" = fop ] && s=8
        best "$1,$t,lat_us,$s" "$v" 1
    done < <(grep '^RESULT test=osc_' "$out")
}

echo "== program: $prog" >&2
echo "== build: $builddir" >&2
bench_load_check
echo "== sizes: ${sizes[*]}; repeat: $repeat" >&2
for r in $(seq "$repeat"); do
    for c in "${configs[@]}"; do
        first=1
        for size in "${sizes[@]}"; do
            osc_run "$c" "$size" "$first"
            first=0
        done
    done
done

# ------------------------------------------------------------------ table

echo
echo "Open MPI $(mpi_version) one-sided latency $(bench_where)"
bench_load_line
echo "One operation + MPI_Win_flush in us under MPI_Win_lock_all, 2 ranks (lower is" \
    "better); x ucx = latency / osc ucx's."
echo
header=("operation")
align=(---)
for c in "${configs[@]}"; do
    header+=("${label[$c]} us")
    align+=(---:)
    if [ "$c" != osc-ucx ]; then
        header+=("x ucx")
        align+=(---:)
    fi
done
row "${header[@]}"
row "${align[@]}"
rows=()
for size in "${sizes[@]}"; do rows+=("put:$size"); done
for size in "${sizes[@]}"; do rows+=("get:$size"); done
rows+=("fop:8")
for entry in "${rows[@]}"; do
    t=${entry%%:*}
    size=${entry#*:}
    case $t in
        put) cells=("MPI_Put $(human "$size")") ;;
        get) cells=("MPI_Get $(human "$size")") ;;
        fop) cells=("MPI_Fetch_and_op long") ;;
    esac
    for c in "${configs[@]}"; do
        if [ "$t" = fop ]; then ekey="$c,fop"; else ekey="$c,$size"; fi
        if [ -n "${R[$c,$t,lat_us,$size]:-}" ]; then
            cell_of "$c" "$t" lat_us "$size" "$ekey"
        else
            note_of "$c" osc_lat "$ekey"    # one note per reason, whatever the operation
        fi
        cells+=("$C")
        if [ "$c" != osc-ucx ]; then
            ratio "$c,$t,lat_us,$size" "osc-ucx,$t,lat_us,$size"; cells+=("$C")
        fi
    done
    row "${cells[@]}"
done
bench_notes
exit 0
