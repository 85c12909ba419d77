#!/bin/bash
# SHMEM on Axon against Open MPI's OpenSHMEM over UCX, on one host, 2 PEs,
# one run after another, one table with the goals of issue 22:
#
#   contrib/bench/shmem_compare.sh [--quick] [--sizes 8,4k,64k,1m] [--repeat N] [--keep]
#
# contrib/bench/shmem_lat.c (OpenSHMEM 1.4 calls only), built with each
# library's oshcc, runs as
#   SOS on Axon     Sandia OpenSHMEM 1.5.3 over libfabric's provider axon
#                   (SHMEM_OFI_PROVIDER=axon; Axon picks shm on one host)
#   SOS on sockets  the same SOS over libfabric's own sockets provider
#   Open MPI + UCX  Open MPI's OpenSHMEM (oshrun --mca spml ucx)
# measuring, PE 0 to PE 1 (PE 1 idle in shmem_barrier_all):
#   put_lat_us   shmem_putmem + shmem_quiet one after the other: a put until
#                it is visible at the target (SOS perf suite's streaming put
#                latency, shmem_latency_put_perf)
#   get_lat_us   shmem_getmem one after the other
#   fadd_lat_us  shmem_atomic_fetch_add of 1 on a long (8 B)
#   put_bw_MBps  windows of 64 shmem_putmem_nbi, each ended by shmem_quiet
#                (1 MB = 1e6 B)
# The table gives each value (best of --repeat rounds), its ratio to Open
# MPI's over UCX, and the goals as verdicts: SOS on Axon 8 B put latency and
# fetch-add latency <= 1.0x, 1 MiB put bandwidth >= 1.0x (8 B and 1 MiB are
# always measured). SOS on sockets is there for scale, with no goal.
#
# Exit status: 0 every goal met, 1 a goal missed or not measured, 2 bad
# options or tools missing. SOS is the build tests/shmem/run_sos_tests.sh
# caches (${XDG_CACHE_HOME:-$HOME/.cache}/axon-clients/sos-*), made by it
# here when missing (about a minute); Axon's build is found from axon_perf
# ($AXON_PERF, else build/tools/axon_perf, else tools/axon_perf); the two
# shmem_lat programs go to <build>/contrib/bench/.
set -u

. "$(dirname "$0")/bench_lib.sh"

usage() {
    sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'
    cat <<EOF
Options:
  --quick       a tenth of the iterations (a rough verdict, about a minute)
  --sizes LIST  put/get sizes, comma separated, k/m suffixes (default 8,4k,64k,1m)
  --repeat N    run everything N times, in N rounds, and keep the best (default 1)
  --keep        keep the raw outputs (their directory is printed)
EOF
}
bench_parse_options "SHMEM sizes start at 1 byte" -- "$@"
# The goals' sizes are always measured.
for goal_size in 8 1048576; do
    [[ " ${sizes[*]} " == *" $goal_size "* ]] || sizes+=("$goal_size")
done
mapfile -t sizes < <(printf '%s\n' "${sizes[@]}" | sort -n)

# ------------------------------------------------------------------ tools

srcdir=$(cd "$(dirname "$0")/../.." && pwd)
bench_find_mpi
if ! command -v oshcc >/dev/null || ! command -v oshrun >/dev/null; then
    die "Open MPI's OpenSHMEM is needed: oshcc and oshrun (Debian: libopenmpi-dev, openmpi-bin)"
fi
. "$srcdir/tests/shmem/sos_cache.sh"
sos_locate "$srcdir"    # sos_dir and sos_tarball here: sos_prefix runs in a subshell
sos=$(sos_prefix "$srcdir")
if [ -z "$sos" ]; then
    [ -n "$sos_dir" ] || die "SOS's tarball $sos_tarball is missing (AXON_CLIENTS_DIR)"
    echo "== building SOS once (tests/shmem/run_sos_tests.sh; log in $sos_dir)" >&2
    SOS_TESTS=hello SOS_NP=2 bash "$srcdir/tests/shmem/run_sos_tests.sh" "$builddir" sockets >&2
    sos=$(sos_prefix "$srcdir") || die "SOS did not build (see $sos_dir/build.log)"
fi

# shmem_lat built with an oshcc, when missing or older than its source.
build_lat() {  # oshcc program
    if [ ! -x "$2" ] || [ "$srcdir/contrib/bench/shmem_lat.c" -nt "$2" ]; then
        "$1" -std=gnu11 -O2 -Wall -Wextra -o "$2" "$srcdir/contrib/bench/shmem_lat.c" ||
            die "could not build $2 with $1"
    fi
}
mkdir -p "$builddir/contrib/bench" || die "cannot create $builddir/contrib/bench"
declare -A prog=([sos-axon]=$builddir/contrib/bench/shmem_lat-sos
                 [sos-sockets]=$builddir/contrib/bench/shmem_lat-sos
                 [oshmem-ucx]=$builddir/contrib/bench/shmem_lat-oshmem)
build_lat "$sos/bin/oshcc" "${prog[sos-axon]}"
build_lat oshcc "${prog[oshmem-ucx]}"

# ------------------------------------------------------------------ running

bench_start /tmp/axon-shmem-compare-XXXXXX

configs=(sos-axon sos-sockets oshmem-ucx)
size_list=$(IFS=,; echo "${sizes[*]}")

# Iterations at 8 B (shmem_lat scales them down above 4 KiB); sockets' round
# trips take tens of microseconds, so it gets a tenth as many.
iters_of() {  # config
    local n=100000
    [ "$1" = sos-sockets ] && n=$((n / 10))
    [ $quick -eq 1 ] && n=$((n / 10))
    echo "$n"
}

# One run of every test and size: R[config,test,size] = latency (us) or
# bandwidth (MB/s), the best so far; else E[config] = the first error.
declare -A lib_name
run_config() {  # config round
    local c=$1 out="$work/$1-$2" line t size lat bw ok=0
    mpi_run "$out" "$c" 2 "${prog[$c]}" -s "$size_list" -n "$(iters_of "$c")"
    while read -r line; do
        t=$(sed -n 's/.* test=\([a-z_]*\) .*/\1/p' <<<"$line")
        size=$(sed -n 's/.* size=\([0-9]*\) .*/\1/p' <<<"$line")
        lat=$(sed -n 's/.* latency_us=\([0-9.]*\).*/\1/p' <<<"$line")
        bw=$(sed -n 's/.* bandwidth_MBps=\([0-9.]*\).*/\1/p' <<<"$line")
        if [ "$t" = put_bw ]; then best "$c,$t,$size" "$bw" 0; else best "$c,$t,$size" "$lat" 1; fi
        ok=1
    done < <(grep '^RESULT ' "$out")
    [ -n "${lib_name[$c]:-}" ] || lib_name[$c]=$(sed -n 's/^# shmem_lat: \(.*\), window .*/\1/p' "$out" | head -1)
    # A run that printed results but failed a check is no measurement.
    if grep -q '^shmem_lat: ' "$out" || [ $ok -eq 0 ]; then
        [ -n "${E[$c]:-}" ] || E[$c]=$(first_error "$out")
    fi
}

echo "== build: $builddir; SOS: $sos" >&2
bench_load_check
echo "== sizes: ${sizes[*]}; repeat: $repeat" >&2
for ((round = 1; round <= repeat; ++round)); do
    for c in "${configs[@]}"; do
        echo "== $c round $round/$repeat ($(iters_of "$c") iterations at 8 B)" >&2
        run_config "$c" "$round"
    done
done
# A configuration with a failed check has no numbers, whatever other rounds gave.
for c in "${configs[@]}"; do
    if [ -n "${E[$c]:-}" ]; then
        for k in "${!R[@]}"; do [[ $k == "$c",* ]] && unset 'R[$k]'; done
    fi
done

# ------------------------------------------------------------------ table

missed=0
goals=0
# One row: the three values, the two ratios to UCX, the goal and its verdict.
line_of() {  # test metric size goal(- | "<= 1.0" | ">= 1.0")
    local t=$1 s=$3 cells=("$2" "$(human "$3")") c a u verdict="-"
    for c in "${configs[@]}"; do
        a=${R[$c,$t,$s]:-}
        if [ -n "$a" ]; then
            case $2 in *_us) cells+=("$(printf '%.3f' "$a")") ;; *) cells+=("$(printf '%.1f' "$a")") ;; esac
        else
            note_of "$c" run "$c"
            cells+=("$C")
        fi
    done
    ratio "sos-axon,$t,$s" "oshmem-ucx,$t,$s"; cells+=("$C")
    ratio "sos-sockets,$t,$s" "oshmem-ucx,$t,$s"; cells+=("$C")
    if [ "$4" != - ]; then
        goals=$((goals + 1))
        a=${R[sos-axon,$t,$s]:-} u=${R[oshmem-ucx,$t,$s]:-}
        if [ -z "$a" ] || [ -z "$u" ]; then
            verdict="not measured"
        elif awk -v a="$a" -v u="$u" -v g="$4" 'BEGIN { split(g, w, " ");
                 r = (u > 0) ? a / u : 1e9; exit !((w[1] == "<=") ? r <= w[2] : r >= w[2]) }'; then
            verdict=PASS
        else
            verdict=MISS
        fi
        [ "$verdict" = PASS ] || missed=$((missed + 1))
    fi
    cells+=("$4" "$verdict")
    row "${cells[@]}"
}

echo
echo "SHMEM, 2 PEs on one host, $(bench_where)"
bench_load_line " (the end includes this run's busy-polling PEs)"
echo "SOS: ${lib_name[sos-axon]:-${lib_name[sos-sockets]:-Sandia OpenSHMEM}} over libfabric's" \
    "axon / sockets provider; Open MPI $(mpi_version)'s OpenSHMEM over UCX" \
    "$(ucx_info -v 2>/dev/null | sed -n 's/^# Version //p') (oshrun, spml ucx)."
echo "put_lat_us: shmem_putmem + shmem_quiet; get_lat_us: shmem_getmem; fadd_lat_us:"
echo "shmem_atomic_fetch_add on a long; put_bw_MBps: windows of 64 shmem_putmem_nbi + shmem_quiet,"
echo "1 MB = 1e6 B. Latency: lower is better; bandwidth: higher. Ratios are to Open MPI + UCX."
echo
row metric size "SOS on Axon" "SOS on sockets" "Open MPI + UCX" "Axon/UCX" "sockets/UCX" goal verdict
row --- ---: ---: ---: ---: ---: ---: --- ---
for size in "${sizes[@]}"; do
    line_of put_lat put_lat_us "$size" "$([ "$size" -eq 8 ] && echo '<= 1.0' || echo -)"
done
for size in "${sizes[@]}"; do
    line_of get_lat get_lat_us "$size" -
done
line_of fadd_lat fadd_lat_us 8 "<= 1.0"
for size in "${sizes[@]}"; do
    line_of put_bw put_bw_MBps "$size" "$([ "$size" -eq 1048576 ] && echo '>= 1.0' || echo -)"
done
bench_notes
echo
bench_goals_exit "$missed" "$goals"
