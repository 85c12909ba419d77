#!/bin/bash
# Axon against UCX and libfabric on this host, one run after another, and one
# table of the results.
#
#   contrib/bench/compare.sh [--quick] [--sizes 8,4k,64k,1m] [--tls shm,tcp]
#                            [--repeat N] [--keep]
#
# For each transport (shm, tcp) and size it runs
#   Axon       axon_perf --local -t tag_lat / tag_bw          AXON_TLS=shm | tcp
#   UCX        ucx_perftest server + client, tag_lat / tag_bw  UCX_TLS=sm | tcp
#   libfabric  fi_pingpong server + client, rdm tagged         -p shm | tcp
# and, with tcp, a row "ofi": Axon over libfabric's tcp provider
#   (AXON_TLS=ofi AXON_OFI_PROVIDER=tcp axon_perf), beside fi_pingpong -p tcp
# and prints latency (half round trip, us), streaming bandwidth (MB/s = 1e6
# B/s), ping-pong bandwidth (size / latency) and the 8 B message rate, with
# Axon's ratios to the others. fi_pingpong has no streaming test, so its
# bandwidth appears only as ping-pong bandwidth.
#
# Run from the source tree: axon_perf is taken from $AXON_PERF, else
# build/tools/axon_perf, else tools/axon_perf (an in-place build).
# ucx-utils and libfabric-bin are installed with apt-get if missing.
set -u

. "$(dirname "$0")/bench_lib.sh"

usage() { bench_usage 2,19 "message sizes"; }
bench_parse_options "" -- "$@"

# ------------------------------------------------------------------ tools

bench_find_perf
bench_install ucx_perftest:ucx-utils fi_pingpong:libfabric-bin
have_ucx=0; have_fi=0
command -v ucx_perftest >/dev/null && have_ucx=1
command -v fi_pingpong >/dev/null && have_fi=1

# ------------------------------------------------------------------ running

bench_start /tmp/axon-compare-XXXXXX

# Iterations scale with the size so that every run takes about a second
# on a quiet machine; tcp is about ten times slower than shm.
iters() {  # size tl budget min max
    local n div=1
    [ "$2" = tcp ] && div=8
    [ $quick -eq 1 ] && div=$((div * 10))
    n=$(clamp $(($3 / ($1 + 1) / div)) "$4" "$5")
    echo $((n < 100 ? 100 : n))
}

fi_run() {  # tl size iters
    local out="$work/fi-$1-$2" n=$3 line
    lat=; bw=; rate=; err=
    [ $have_fi -eq 1 ] || { err="fi_pingpong not installed"; return; }
    next_port
    client_server "$out" "$port" fi_pingpong -p "$1" -e rdm -m tagged -B "$port" \
        -S "$2" -I "$n" -- fi_pingpong -p "$1" -e rdm -m tagged -P "$port" -S "$2" \
        -I "$n" 127.0.0.1
    # bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
    line=$(awk '/^bytes/ { getline; print; exit }' "$out")
    if [ -z "$line" ]; then
        err=$(both_errors "$out")
        return
    fi
    read -r _ _ _ _ _ bw lat rate <<<"$line"
}

# R[lib,tl,metric,size] = value; E[lib,tl,size] = first error seen
record() {  # lib tl size metric-of-lat metric-of-bw
    local lib=$1 tl=$2 size=$3
    if [ -n "$err" ]; then
        [ -z "${E[$lib,$tl,$size]:-}" ] && E[$lib,$tl,$size]=$err
        return
    fi
    [ -n "$4" ] && [ -n "$lat" ] && best "$lib,$tl,$4,$size" "$lat" 1
    [ -n "$4" ] && [ -n "$lat" ] && best "$lib,$tl,pp_MBps,$size" \
        "$(awk -v s="$size" -v l="$lat" 'BEGIN { printf "%.3f", (l > 0) ? s / l : 0 }')" 0
    [ -n "$5" ] && [ -n "$bw" ] && best "$lib,$tl,$5,$size" "$bw" 0
    [ -n "$5" ] && [ -n "$rate" ] && best "$lib,$tl,msgrate,$size" "$rate" 0
}

bench_announce
for tl in "${tls_list[@]}"; do
    for size in "${sizes[@]}"; do
        nl=$(lat_iters "$size" "$tl"); nb=$(bw_iters "$size" "$tl")
        for r in $(seq "$repeat"); do
            echo "== $tl size=$size run $r/$repeat (lat iters $nl, bw iters $nb)" >&2
            axon_run "$tl" tag_lat "$size" "$nl"; record axon "$tl" "$size" lat_us ""
            axon_run "$tl" tag_bw "$size" "$nb";  record axon "$tl" "$size" "" bw_MBps
            ucx_run "$tl" tag_lat "$size" "$nl";  record ucx "$tl" "$size" lat_us ""
            ucx_run "$tl" tag_bw "$size" "$nb";   record ucx "$tl" "$size" "" bw_MBps
            fi_run "$tl" "$size" "$nl";           record fi "$tl" "$size" lat_us ""
            if [ "$tl" = tcp ]; then
                # Row "ofi": Axon over libfabric's tcp provider (components/ofi),
                # beside the same fi_pingpong -p tcp run.
                record fi ofi "$size" lat_us ""
                AXON_OFI_PROVIDER=tcp axon_run ofi tag_lat "$size" "$nl"
                record axon ofi "$size" lat_us ""
                AXON_OFI_PROVIDER=tcp axon_run ofi tag_bw "$size" "$nb"
                record axon ofi "$size" "" bw_MBps
            fi
        done
    done
done

# ------------------------------------------------------------------ table

# fi_pingpong measures no streaming bandwidth; failures are noted per size.
cell() {  # lib tl metric size
    if [ "$1" = fi ] && [ -z "${R[$1,$2,$3,$4]:-}" ] &&
       { [ "$3" = bw_MBps ] || [ "$3" = msgrate ]; }; then
        C="n/a"
    else
        cell_of "$1" "$2" "$3" "$4" "$1,$2,$4"
    fi
}

bench_title " vs libfabric $(fi_info --version 2>/dev/null | sed -n 's/^libfabric: //p')"
echo
echo "lat_us: half round trip (lower is better); bw_MBps: streaming tag_bw, 1 MB = 1e6 B;"
echo "pp_MBps: ping-pong bandwidth = size / lat_us. Ratios are Axon / other."
echo
# tcp brings the row "ofi" (Axon over libfabric's tcp provider, no UCX counterpart).
table_tls=("${tls_list[@]}")
for tl in "${tls_list[@]}"; do [ "$tl" = tcp ] && table_tls+=(ofi); done
row transport metric size Axon UCX libfabric Axon/UCX Axon/libfabric
row --- --- ---: ---: ---: ---: ---: ---:
for tl in "${table_tls[@]}"; do
    for metric in lat_us bw_MBps pp_MBps; do
        for size in "${sizes[@]}"; do
            cells=("$tl" "$metric" "$(human "$size")")
            for lib in axon ucx fi; do cell "$lib" "$tl" "$metric" "$size"; cells+=("$C"); done
            for lib in ucx fi; do
                ratio "axon,$tl,$metric,$size" "$lib,$tl,$metric,$size"; cells+=("$C")
            done
            row "${cells[@]}"
        done
    done
done
smallest=${sizes[0]}
echo
echo "Message rate, $(human "$smallest") tag_bw (million messages/s, higher is better):"
echo
row transport Axon UCX Axon/UCX
row --- ---: ---: ---:
for tl in "${tls_list[@]}"; do
    cells=("$tl")
    for lib in axon ucx; do cell "$lib" "$tl" msgrate "$smallest"; cells+=("$C"); done
    ratio "axon,$tl,msgrate,$smallest" "ucx,$tl,msgrate,$smallest"; cells+=("$C")
    row "${cells[@]}"
done
bench_footer
exit 0
