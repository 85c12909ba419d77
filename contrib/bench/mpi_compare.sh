#!/bin/bash
# Open MPI's ping-pong latency over its own transports and over Axon, one
# run after another, and one table of the results.
#
#   contrib/bench/mpi_compare.sh [--quick] [--sizes 8] [--repeat N] [--keep]
#
# tests/mpi/lat.c (2 ranks, half the round trip of MPI_Send/MPI_Recv) runs
# under mpirun with
#   ob1 + vader       --mca pml ob1 --mca btl self,vader (Open MPI's shared memory)
#   ob1 + tcp         --mca pml ob1 --mca btl self,tcp
#   cm + ofi tcp      --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include tcp
#   cm + ofi Axon     ... --mca mtl_ofi_provider_include axon (Axon picks shm)
#   cm + ofi Axon tcp the same with AXON_TLS=tcp
# and the table gives each latency (us, best of --repeat runs) and its ratio
# to ob1 + vader.
#
# Run from the source tree: the build is found from axon_perf ($AXON_PERF,
# else build/tools/axon_perf, else tools/axon_perf): the provider in
# <build>/contrib/ofi_provider/.libs, libaxon in <build>/.libs; the latency
# program is built with mpicc into <build>/tests/mpi/ when missing or older
# than its source.
set -u

. "$(dirname "$0")/bench_lib.sh"

usage() {
    sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'
    cat <<EOF
Options:
  --quick       a tenth of the iterations
  --sizes LIST  message sizes, comma separated, k/m suffixes (default 8)
  --repeat N    run each measurement N times and keep the best (default 1)
  --keep        keep the raw outputs (their directory is printed)
EOF
}
bench_parse_options "" -- --sizes 8 "$@"

# ------------------------------------------------------------------ tools

command -v mpicc >/dev/null || die "mpicc is needed (Debian: libopenmpi-dev)"
bench_find_mpi
srcdir=$(cd "$(dirname "$0")/../.." && pwd)
lat_prog=$builddir/tests/mpi/lat
if [ ! -x "$lat_prog" ] || [ "$srcdir/tests/mpi/lat.c" -nt "$lat_prog" ] ||
        [ "$srcdir/tests/mpi/mpi_check.h" -nt "$lat_prog" ]; then
    mkdir -p "$builddir/tests/mpi" || die "cannot create $builddir/tests/mpi"
    mpicc -std=gnu11 -O2 -Wall -Wextra -o "$lat_prog" "$srcdir/tests/mpi/lat.c" ||
        die "could not build $lat_prog"
fi

# ------------------------------------------------------------------ running

bench_start /tmp/axon-mpi-compare-XXXXXX

configs=(ob1-vader ob1-tcp ofi-tcp axon axon-tcp)
declare -A label=(
    [ob1-vader]="ob1 + vader (Open MPI shared memory)"
    [ob1-tcp]="ob1 + tcp (Open MPI tcp btl)"
    [ofi-tcp]="cm + ofi, libfabric tcp"
    [axon]="cm + ofi, Axon (default transports)"
    [axon-tcp]="cm + ofi, Axon, AXON_TLS=tcp"
)

# Iterations: 20000 for small messages (under a second over shared memory),
# fewer as they grow; a quarter over tcp, a tenth with --quick.
iters() {  # size config
    local n
    n=$(clamp $(((1 << 31) / ($1 + 1))) 200 20000)
    [[ $2 == *tcp ]] && n=$((n / 4))
    [ $quick -eq 1 ] && n=$((n / 10))
    echo $((n < 100 ? 100 : n))
}

lat_run() {  # config size iters
    local out="$work/$1-$2" n=$3 line
    lat=; err=
    mpi_run "$out" "$1" 2 "$lat_prog" -s "$2" -n "$n" -w "$(warmup_of "$n")"
    line=$(grep -m1 '^RESULT test=mpi_lat' "$out")
    if [ -z "$line" ]; then
        err=$(first_error "$out")
        return
    fi
    lat=$(sed -n 's/.* latency_us=\([0-9.]*\).*/\1/p' <<<"$line")
}

echo "== latency program: $lat_prog" >&2
echo "== build: $builddir" >&2
bench_load_check
echo "== sizes: ${sizes[*]}; repeat: $repeat" >&2
for size in "${sizes[@]}"; do
    for r in $(seq "$repeat"); do
        for c in "${configs[@]}"; do
            n=$(iters "$size" "$c")
            echo "== $c size=$size run $r/$repeat ($n iterations)" >&2
            lat_run "$c" "$size" "$n"
            if [ -n "$err" ]; then
                [ -z "${E[$c,$size]:-}" ] && E[$c,$size]=$err
            else
                best "$c,lat,lat_us,$size" "$lat" 1
            fi
        done
    done
done

# ------------------------------------------------------------------ table

echo
echo "Open MPI $(mpi_version) ping-pong latency $(bench_where)"
bench_load_line
echo "Half round trip of MPI_Send/MPI_Recv in us (lower is better); ratio = latency /" \
    "ob1 + vader's."
echo
header=("Open MPI over")
align=(---)
for size in "${sizes[@]}"; do
    header+=("$(human "$size") us" "ratio")
    align+=(---: ---:)
done
row "${header[@]}"
row "${align[@]}"
for c in "${configs[@]}"; do
    cells=("${label[$c]}")
    for size in "${sizes[@]}"; do
        cell_of "$c" lat lat_us "$size" "$c,$size"; cells+=("$C")
        ratio "$c,lat,lat_us,$size" "ob1-vader,lat,lat_us,$size"; cells+=("$C")
    done
    row "${cells[@]}"
done
bench_notes
exit 0
