#!/bin/bash
# The OSU micro-benchmarks under Open MPI, over its own shared memory and
# over Axon, one run after another, and ratio tables of the results.
#
#   contrib/bench/osu_compare.sh [--osu DIR | --osu-tarball FILE] [--quick]
#       [--sizes 8,4k,64k,1m] [--tls shm,tcp] [--tests LIST] [--repeat N]
#       [--timeout SEC] [--keep]
#
# Programs (one mpirun per program, rank count, size and configuration):
#   osu_latency, osu_bw, osu_bibw, osu_mbw_mr   2 ranks
#   osu_barrier, osu_allreduce, osu_bcast       2 and 4 ranks
# Configurations (all with --oversubscribe --bind-to none):
#   ob1+vader    --mca pml ob1 --mca btl self,vader: the baseline of every ratio
#   Axon         --mca pml cm --mca mtl ofi on Axon's provider (shm on one host)
#   Axon tcp     the same with AXON_TLS=tcp                  (--tls with tcp)
#   tcp;ofi_rxm  --mca pml cm --mca mtl ofi on libfabric's tcp (--tls with tcp)
# The tables give each value (best of --repeat runs) and its ratio to
# ob1+vader's: latency tables in us (lower is better, so a ratio below 1 is
# faster than ob1+vader), bandwidth tables in MB/s (higher is better).
#
# OSU (7.1.1 tested): --osu names a build (or install) tree; without it the
# tarball (--osu-tarball, else ../shared/clients/osu-micro-benchmarks-7.1.1.tar.gz
# beside the source tree) is built once with mpicc into
# ${XDG_CACHE_HOME:-$HOME/.cache}/axon-clients and reused from there.
# Axon's build is found from axon_perf ($AXON_PERF, else build/tools/axon_perf,
# else tools/axon_perf): the provider in <build>/contrib/ofi_provider/.libs,
# libaxon in <build>/.libs.
set -u

. "$(dirname "$0")/bench_lib.sh"

usage() {
    sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'
    cat <<EOF
Options:
  --osu DIR          an OSU build or install tree (its MPI programs are searched in it)
  --osu-tarball FILE the OSU tarball to build when --osu is not given
  --quick            a tenth of OSU's iterations
  --sizes LIST       message sizes, comma separated, k/m suffixes (default 8,4k,64k,1m)
  --tls LIST         Axon's transports: shm (its default choice), tcp (adds Axon
                     with AXON_TLS=tcp and libfabric's tcp;ofi_rxm); default shm
  --tests LIST       programs, comma separated, with or without osu_ (default
                     latency,bw,bibw,mbw_mr,barrier,allreduce,bcast)
  --repeat N         run each measurement N times and keep the best (default 1)
  --timeout SEC      time limit of each mpirun (default 180, 60 with --quick)
  --keep             keep the raw outputs (their directory is printed)
EOF
}

osu_dir=
tarball=
tests_arg=latency,bw,bibw,mbw_mr,barrier,allreduce,bcast
timeout_arg=
rest=()
while [ $# -gt 0 ]; do
    case $1 in
        --osu)         osu_dir=${2:?--osu needs a directory}; shift ;;
        --osu-tarball) tarball=${2:?--osu-tarball needs a file}; shift ;;
        --tests)       tests_arg=${2:?--tests needs a list}; shift ;;
        --timeout)     timeout_arg=${2:?--timeout needs seconds}; shift ;;
        *)             rest+=("$1") ;;
    esac
    shift
done
bench_parse_options "OSU prints no result for 0 bytes; sizes start at 1" -- \
    --tls shm "${rest[@]}"
[ -z "$timeout_arg" ] || [[ $timeout_arg =~ ^[1-9][0-9]*$ ]] ||
    die "invalid --timeout '$timeout_arg'"

# program:ranks:kind (lat: us, lower is better; bw: MB/s, higher is better)
all_tests=(osu_latency:2:lat osu_bw:2:bw osu_bibw:2:bw osu_mbw_mr:2:bw
           osu_barrier:2:lat osu_barrier:4:lat osu_allreduce:2:lat
           osu_allreduce:4:lat osu_bcast:2:lat osu_bcast:4:lat)
tests=()
IFS=, read -ra _names <<<"$tests_arg"
for t in "${_names[@]}"; do
    t=osu_${t#osu_}
    n=${#tests[@]}
    for a in "${all_tests[@]}"; do [ "${a%%:*}" = "$t" ] && tests+=("$a"); done
    [ ${#tests[@]} -gt "$n" ] || die "unknown test '$t' (see --help)"
done
[ ${#tests[@]} -gt 0 ] || die "no tests"

configs=(ob1-vader)
for tl in "${tls_list[@]}"; do
    case $tl in shm) configs+=(axon) ;; tcp) configs+=(axon-tcp ofi-tcp) ;; esac
done
declare -A col=([ob1-vader]="ob1+vader" [axon]="Axon" [axon-tcp]="Axon tcp"
                [ofi-tcp]="tcp;ofi_rxm")

# ------------------------------------------------------------------ tools

bench_find_mpi
srcdir=$(cd "$(dirname "$0")/../.." && pwd)

# Builds the tarball into the cache once, in a directory of its own that
# takes the tree's name when the build succeeded (a lock keeps two scripts
# from building at the same time); sets osu_dir.
osu_build() {
    local cache=${XDG_CACHE_HOME:-$HOME/.cache}/axon-clients top log tmp
    tarball=${tarball:-$srcdir/../shared/clients/osu-micro-benchmarks-7.1.1.tar.gz}
    [ -f "$tarball" ] || die "no OSU tarball at $tarball: name one (--osu-tarball) or a build (--osu)"
    top=$(tar -tzf "$tarball" 2>/dev/null | head -1 | cut -d/ -f1)
    [ -n "$top" ] || die "cannot read $tarball"
    osu_dir=$cache/$top
    mkdir -p "$cache" || die "cannot create $cache"
    exec 9>"$cache/.$top.lock"
    flock 9
    if [ ! -d "$osu_dir" ]; then
        command -v mpicc >/dev/null || die "mpicc is needed to build OSU (Debian: libopenmpi-dev)"
        log=$cache/$top-build.log
        tmp=$(mktemp -d "$cache/.build-XXXXXX") || die "cannot create a directory in $cache"
        echo "== building $top into $osu_dir (a minute or two; log: $log)" >&2
        if ! (tar -xzf "$tarball" -C "$tmp" && cd "$tmp/$top" && autoreconf -fi &&
                ./configure CC=mpicc CXX=mpicxx && make -j2) >"$log" 2>&1 ||
           ! mv "$tmp/$top" "$osu_dir"; then
            rm -rf "$tmp"
            die "building OSU failed, see $log"
        fi
        rm -rf "$tmp"
    fi
    exec 9>&-
}
if [ -z "$osu_dir" ]; then
    osu_build
fi
[ -d "$osu_dir" ] || die "--osu $osu_dir: no such directory"
osu_dir=$(cd "$osu_dir" && pwd)

# The programs, wherever the tree keeps them (c/mpi/pt2pt/standard/ in a 7.x
# build, libexec/osu-micro-benchmarks/mpi/... installed).
declare -A prog
found=0
for t in "${tests[@]}"; do
    t=${t%%:*}
    [ -n "${prog[$t]:-}" ] && continue
    prog[$t]=$(find "$osu_dir" -path '*/mpi/*' -name "$t" -type f -perm -u+x -print -quit)
    if [ -n "${prog[$t]}" ]; then found=1
    else echo "$bench_prog: $t not found in $osu_dir; its cells will fail" >&2; fi
done
[ $found -eq 1 ] || die "no OSU MPI programs in $osu_dir (build OSU, or leave --osu out)"

# ------------------------------------------------------------------ running

bench_start /tmp/axon-osu-compare-XXXXXX
[ -n "$timeout_arg" ] && run_timeout=$timeout_arg
bench_error_words+='|exited|signal|abort'

# OSU's own iteration counts (iterations and warm-up, up to 8 KiB and
# above); --quick passes a tenth of them, otherwise OSU chooses.
osu_iters() {  # program size -> iters[]
    local small large i x
    iters=()
    [ $quick -eq 1 ] || return 0
    case $1 in
        osu_latency) small="10000 100" large="1000 10" ;;
        osu_bw|osu_bibw|osu_mbw_mr) small="100 10" large="20 2" ;;
        *) small="1000 100" large="100 10" ;;
    esac
    if [ "$2" -gt 8192 ]; then read -r i x <<<"$large"; else read -r i x <<<"$small"; fi
    iters=(-i $(((i + 9) / 10)) -x $(((x + 9) / 10)))
}

# One run; sets val (empty on failure) and err. osu_barrier has no sizes
# (size 0): its result is a line with one number.
osu_run() {  # config program ranks size
    local out="$work/$1-$2-$3-$4-$r" rc
    val=; err=
    if [ -z "${prog[$2]}" ]; then err="$2 not found in $osu_dir"; return; fi
    osu_iters "$2" "$4"
    if [ "$4" -eq 0 ]; then
        mpi_run "$out" "$1" "$3" "${prog[$2]}" "${iters[@]}"
        rc=$?
        val=$(awk 'NF == 1 && $1 ~ /^[0-9.]+$/ { v = $1 } END { print v }' "$out")
    else
        mpi_run "$out" "$1" "$3" "${prog[$2]}" -m "$4:$4" "${iters[@]}"
        rc=$?
        val=$(awk -v s="$4" '$1 == s && $2 ~ /^[0-9.]+$/ { v = $2 } END { print v }' "$out")
    fi
    if [ $rc -ne 0 ] || [ -z "$val" ]; then
        [ $rc -ne 0 ] && [ $rc -ne 124 ] && echo "mpirun exited with status $rc" >>"$out"
        val=
        err=$(first_error "$out")
    fi
}

echo "== OSU: $osu_dir" >&2
echo "== build: $builddir" >&2
bench_load_check
echo "== sizes: ${sizes[*]}; configurations: ${configs[*]}; repeat: $repeat;" \
    "time limit: $run_timeout s" >&2
for t in "${tests[@]}"; do
    IFS=: read -r name np _ <<<"$t"
    tsizes=("${sizes[@]}")
    [ "$name" = osu_barrier ] && tsizes=(0)
    for size in "${tsizes[@]}"; do
        for r in $(seq "$repeat"); do
            for c in "${configs[@]}"; do
                echo "== $name -np $np size=$size $c run $r/$repeat" >&2
                osu_run "$c" "$name" "$np" "$size"
                key="$c,$name,$np,$size"
                if [ -n "$err" ]; then
                    [ -z "${E[$key]:-}" ] && E[$key]=$err
                else
                    best "$key" "$val" "$([[ $t == *:lat ]] && echo 1 || echo 0)"
                fi
            done
        done
    done
done

# ------------------------------------------------------------------ table

# The best value as OSU printed it, else the failure note.
cell() {  # config program ranks size
    local key="$1,$2,$3,$4"
    C=${R[$key]:-}
    [ -n "$C" ] || note_of "${col[$1]}" "$2 -np $3" "$key"
}

table() {  # kind unit better
    local t name np size c header align cells
    header=(program ranks size "${col[ob1-vader]} $2")
    align=(--- ---: ---: ---:)
    for c in "${configs[@]:1}"; do
        header+=("${col[$c]} $2" "${col[$c]} / ${col[ob1-vader]} ($3 is better)")
        align+=(---: ---:)
    done
    row "${header[@]}"
    row "${align[@]}"
    for t in "${tests[@]}"; do
        [[ $t == *:$1 ]] || continue
        IFS=: read -r name np _ <<<"$t"
        tsizes=("${sizes[@]}")
        [ "$name" = osu_barrier ] && tsizes=(0)
        for size in "${tsizes[@]}"; do
            cells=("$name" "$np")
            if [ "$size" -eq 0 ]; then cells+=("-"); else cells+=("$(human "$size")"); fi
            cell ob1-vader "$name" "$np" "$size"; cells+=("$C")
            for c in "${configs[@]:1}"; do
                cell "$c" "$name" "$np" "$size"; cells+=("$C")
                ratio "$c,$name,$np,$size" "ob1-vader,$name,$np,$size"; cells+=("$C")
            done
            row "${cells[@]}"
        done
    done
}

osu_version=$(sed -n 's/^# OSU MPI .* v\([0-9.]*\)$/\1/p' "$work"/* 2>/dev/null | head -1)
echo
echo "OSU micro-benchmarks ${osu_version:-?} under Open MPI $(mpi_version) $(bench_where)"
bench_load_line
echo "Ratio = the configuration's value / ${col[ob1-vader]}'s (--mca pml ob1 --mca btl self,vader)."
echo "Axon: --mca pml cm --mca mtl ofi, provider axon (its default transports: shm)."
[[ " ${configs[*]} " == *" axon-tcp "* ]] &&
    echo "Axon tcp: the same with AXON_TLS=tcp; tcp;ofi_rxm: libfabric's tcp provider."
if [[ " ${tests[*]} " == *:lat* ]]; then
    echo
    echo "Latency in us: lower is better, a ratio below 1 is faster than ${col[ob1-vader]}."
    echo
    table lat us lower
fi
if [[ " ${tests[*]} " == *:bw* ]]; then
    echo
    echo "Bandwidth in MB/s (OSU's, 1e6 B/s): higher is better, a ratio above 1 is faster" \
        "than ${col[ob1-vader]}."
    echo
    table bw MB/s higher
fi
bench_notes
exit 0
