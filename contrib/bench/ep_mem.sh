#!/bin/bash
# Memory per peer endpoint of each transport, side by side.
#
# Runs `axon_perf --local -t ep_mem` once per transport: a server process
# hosts one worker per peer, the client connects to each and exchanges one
# message with it, and reports its heap growth per endpoint (mallinfo2).
# Prints a table with each transport's bytes per endpoint, how many times
# smaller it is than rc's, and what a thousand and a million peers would cost.
# A transport whose plugin is not built (dc: libaxon_dc.so) gets a row that
# says so instead of a number.
#
# Run from the source tree: axon_perf is taken from $AXON_PERF, else
# build/tools/axon_perf, else tools/axon_perf (an in-place build).
set -u

. "$(dirname "$0")/bench_lib.sh"

usage() {
    sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
    cat <<EOF
Options:
  --tls LIST    transports, comma separated (default shm,tcp,rc,ud,dc)
  --peers N     endpoints measured per transport (default 64)
EOF
}

tls_arg=shm,tcp,rc,ud,dc
peers=64
while [ $# -gt 0 ]; do
    case $1 in
        --tls)   tls_arg=${2:?--tls needs a list}; shift ;;
        --peers) peers=${2:?--peers needs a number}; shift ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown option '$1' (see --help)" ;;
    esac
    shift
done

[[ $peers =~ ^[1-9][0-9]*$ ]] || die "invalid --peers '$peers'"
bench_find_perf

declare -A bytes lanes errs skipped
IFS=, read -ra tls_list <<<"$tls_arg"
for tl in "${tls_list[@]}"; do
    skipped[$tl]=$(bench_tl_missing "$tl")
    if [ -n "${skipped[$tl]}" ]; then
        echo "== $tl: skipped: ${skipped[$tl]}" >&2
        continue
    fi
    echo "== $tl: $peers peers" >&2
    out=$(AXON_TLS=$tl timeout -k 5 120 "$perf" --local -t ep_mem -n "$peers" 2>&1)
    line=$(grep -m1 '^RESULT test=ep_mem' <<<"$out")
    if [ -z "$line" ]; then
        errs[$tl]=$(grep -v '^#' <<<"$out" | grep -m1 . | cut -c1-120)
        continue
    fi
    bytes[$tl]=$(sed -n 's/.* bytes_per_ep=\([-0-9]*\).*/\1/p' <<<"$line")
    lanes[$tl]=$(sed -n 's/.* tl=\([^ ]*\) bulk_tl=\([^ ]*\).*/\1\/\2/p' <<<"$line")
done

human() {  # bytes -> B / KiB / MiB / GiB
    awk -v b="$1" 'BEGIN {
        split("B KiB MiB GiB TiB", u, " "); i = 1
        while (b >= 1024 && i < 5) { b /= 1024; i++ }
        printf (i == 1) ? "%d %s" : "%.1f %s", b, u[i] }'
}

echo
echo "Memory per peer endpoint ($peers peers, client heap growth; $(uname -n)," \
     "$(date -u '+%Y-%m-%d %H:%M UTC'))"
echo
echo "| transport | lanes (small/bulk) | bytes/ep | rc / this | 1k peers | 1M peers |"
echo "| --- | --- | ---: | ---: | ---: | ---: |"
for tl in "${tls_list[@]}"; do
    if [ -n "${skipped[$tl]}" ]; then
        echo "| $tl | - | skipped: ${skipped[$tl]} | - | - | - |"
        continue
    fi
    if [ -z "${bytes[$tl]:-}" ]; then
        echo "| $tl | - | fail: ${errs[$tl]:-no result} | - | - | - |"
        continue
    fi
    b=${bytes[$tl]}
    ratio=-
    if [ -n "${bytes[rc]:-}" ] && [ "$b" -gt 0 ]; then
        ratio=$(awk -v r="${bytes[rc]}" -v b="$b" 'BEGIN { printf "%.1f", r / b }')
    fi
    echo "| $tl | ${lanes[$tl]} | $b | $ratio | $(human $((b * 1000))) |" \
         "$(human $((b * 1000000))) |"
done
