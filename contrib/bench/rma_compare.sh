#!/bin/bash
# Axon's one-sided operations against UCX's on this host, one run after
# another, and one table of the results.
#
#   contrib/bench/rma_compare.sh [--quick] [--sizes 8,4k,64k,1m] [--tls shm,tcp]
#                                [--repeat N] [--keep]
#
# For each transport (Axon AXON_TLS=shm | tcp, UCX UCX_TLS=sm | tcp) it runs
#   put latency   axon_perf -t put_lat   vs  ucx_perftest -t ucp_put_lat  (per size)
#   get latency   axon_perf -t get_lat   vs  ucx_perftest -t ucp_get      (per size)
#   put bandwidth axon_perf -t put_bw    vs  ucx_perftest -t ucp_put_bw   (per size)
#   fetch-add     axon_perf -t amo_lat   vs  ucx_perftest -t ucp_fadd     (8 B)
#   posted add    axon_perf -t amo_bw    vs  ucx_perftest -t ucp_add      (8 B, rate)
# Both map their memory with ALLOCATE (UCP_MEM_MAP_ALLOCATE in ucx_perftest),
# so on one host the peer's memory is reached directly where the library can.
# put latency is half a ping-pong round trip (each side polls the last byte
# of its memory); get and fetch-add latency are whole operations; bandwidth
# is MB/s (1e6 B/s); the add rate is million operations per second.
#
# Run from the source tree: axon_perf is taken from $AXON_PERF, else
# build/tools/axon_perf, else tools/axon_perf (an in-place build).
# ucx-utils is installed with apt-get if missing.
set -u

. "$(dirname "$0")/bench_lib.sh"

usage() { bench_usage 2,22 "put/get sizes"; }
bench_parse_options "sizes start at 1 byte (put_lat carries a mark in the last one)" -- "$@"

# ------------------------------------------------------------------ tools

bench_find_perf
"$perf" -h | grep -q amo_bw ||
    die "$perf has no one-sided tests (put_lat, amo_bw...): rebuild it"
bench_install ucx_perftest:ucx-utils
have_ucx=0
command -v ucx_perftest >/dev/null && have_ucx=1
# The UCP one-sided tests this script needs (their names changed across UCX versions).
if [ $have_ucx -eq 1 ]; then
    for t in ucp_put_lat ucp_put_bw ucp_get ucp_fadd ucp_add; do
        ucx_perftest -h 2>&1 | grep -qw "$t" ||
            echo "rma_compare.sh: this ucx_perftest has no $t; its cells will fail" >&2
    done
fi

# ------------------------------------------------------------------ running

bench_start /tmp/axon-rma-compare-XXXXXX
bench_error_words+='|unsupported'

# Iterations scale with the size so that every run takes about a second
# on a quiet machine; over tcp everything is executed by the target (UCX's
# get takes hundreds of microseconds there), so it gets a tenth as many.
iters() {  # size tl budget min max
    local n div=1 max=$5
    if [ "$2" = tcp ]; then div=16; max=$((max / 10)); fi
    n=$(clamp $(($3 / ($1 + 1) / div)) "$4" "$max")
    [ $quick -eq 1 ] && n=$((n / 10))
    echo $((n < 100 ? 100 : n))
}

# R[lib,tl,metric,size] = value; E[lib,tl,metric,size] = first error seen
record() {  # lib tl metric size value lower-is-better
    if [ -n "$err" ] || [ -z "$5" ]; then
        [ -z "${E[$1,$2,$3,$4]:-}" ] && E[$1,$2,$3,$4]=${err:-no value}
        return
    fi
    best "$1,$2,$3,$4" "$5" "$6"
}

# One comparison: the same metric from axon_perf -t $3 and ucx_perftest -t $4.
measure() {  # tl metric axon-test ucx-test size iters which(lat|bw|rate)
    local tl=$1 metric=$2 size=$5 n=$6 v low
    axon_run "$tl" "$3" "$size" "$n"
    case $7 in lat) v=$lat; low=1 ;; bw) v=$bw; low=0 ;; *) v=$rate; low=0 ;; esac
    record axon "$tl" "$metric" "$size" "$v" "$low"
    ucx_run "$tl" "$4" "$size" "$n"
    case $7 in lat) v=$lat ;; bw) v=$bw ;; *) v=$rate ;; esac
    record ucx "$tl" "$metric" "$size" "$v" "$low"
}

bench_announce
for tl in "${tls_list[@]}"; do
    for r in $(seq "$repeat"); do
        n=$(lat_iters 8 "$tl"); nb=$(bw_iters 8 "$tl")
        echo "== $tl atomics run $r/$repeat (lat iters $n, rate iters $nb)" >&2
        measure "$tl" fadd_lat_us amo_lat ucp_fadd 8 "$n" lat
        measure "$tl" add_rate_Mps amo_bw ucp_add 8 "$nb" rate
        for size in "${sizes[@]}"; do
            nl=$(lat_iters "$size" "$tl"); nb=$(bw_iters "$size" "$tl")
            echo "== $tl size=$size run $r/$repeat (lat iters $nl, bw iters $nb)" >&2
            measure "$tl" put_lat_us put_lat ucp_put_lat "$size" "$nl" lat
            measure "$tl" get_lat_us get_lat ucp_get "$size" "$nl" lat
            measure "$tl" put_bw_MBps put_bw ucp_put_bw "$size" "$nb" bw
        done
    done
done

# ------------------------------------------------------------------ table

line_of() {  # tl metric size
    local cells=("$1" "$2" "$(human "$3")") lib
    for lib in axon ucx; do cell_of "$lib" "$1" "$2" "$3" "$lib,$1,$2,$3"; cells+=("$C"); done
    ratio "axon,$1,$2,$3" "ucx,$1,$2,$3"; cells+=("$C")
    row "${cells[@]}"
}

bench_title ", one-sided operations,"
echo
echo "put_lat_us: half a put ping-pong round trip (ucp_put_lat); get_lat_us, fadd_lat_us: one"
echo "whole get (ucp_get) or 64-bit fetch-and-add (ucp_fadd); put_bw_MBps: streamed puts and a"
echo "flush (ucp_put_bw), 1 MB = 1e6 B; add_rate_Mps: posted 64-bit adds, million/s (ucp_add)."
echo "Latency: lower is better; bandwidth and rate: higher. Ratios are Axon / UCX."
echo
row transport metric size Axon UCX Axon/UCX
row --- --- ---: ---: ---: ---:
for tl in "${tls_list[@]}"; do
    line_of "$tl" fadd_lat_us 8
    line_of "$tl" add_rate_Mps 8
    for metric in put_lat_us get_lat_us put_bw_MBps; do
        for size in "${sizes[@]}"; do
            line_of "$tl" "$metric" "$size"
        done
    done
done
bench_footer
exit 0
