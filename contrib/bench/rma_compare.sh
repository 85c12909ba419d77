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

usage() {
    sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'
    cat <<EOF
Options:
  --quick       a tenth of the iterations (a rough table in about a minute)
  --sizes LIST  put/get sizes, comma separated, k/m suffixes (default 8,4k,64k,1m)
  --tls LIST    transports to compare: shm, tcp (default shm,tcp)
  --repeat N    run each measurement N times and keep the best (default 1)
  --keep        keep the raw tool outputs (their directory is printed)
EOF
}

quick=0
sizes_arg=8,4k,64k,1m
tls_arg=shm,tcp
repeat=1
keep=0
while [ $# -gt 0 ]; do
    case $1 in
        --quick)  quick=1 ;;
        --sizes)  sizes_arg=${2:?--sizes needs a list}; shift ;;
        --tls)    tls_arg=${2:?--tls needs a list}; shift ;;
        --repeat) repeat=${2:?--repeat needs a number}; shift ;;
        --keep)   keep=1 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "rma_compare.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

die() { echo "rma_compare.sh: $*" >&2; exit 2; }

to_bytes() {  # 8 | 4k | 1m -> bytes
    local v=${1,,} scale=1
    case $v in
        *k) scale=1024; v=${v%k} ;;
        *m) scale=$((1024 * 1024)); v=${v%m} ;;
    esac
    [[ $v =~ ^[0-9]+$ ]] || return 1
    echo $((v * scale))
}

sizes=()
IFS=, read -ra _list <<<"$sizes_arg"
for s in "${_list[@]}"; do
    b=$(to_bytes "$s") || die "invalid size '$s'"
    [ "$b" -gt 0 ] || die "sizes start at 1 byte (put_lat carries a mark in the last one)"
    sizes+=("$b")
done
[ ${#sizes[@]} -gt 0 ] || die "no sizes"
tls_list=()
IFS=, read -ra _list <<<"$tls_arg"
for t in "${_list[@]}"; do
    case $t in shm|tcp) tls_list+=("$t") ;; *) die "unknown transport '$t' (shm, tcp)" ;; esac
done
[[ $repeat =~ ^[1-9][0-9]*$ ]] || die "invalid --repeat '$repeat'"

# ------------------------------------------------------------------ tools

top=$(cd "$(dirname "$0")/../.." && pwd)
perf=${AXON_PERF:-}
if [ -z "$perf" ]; then
    for p in "$top/build/tools/axon_perf" "$top/tools/axon_perf" \
             "$PWD/build/tools/axon_perf" "$PWD/tools/axon_perf"; do
        if [ -x "$p" ]; then perf=$p; break; fi
    done
fi
[ -n "$perf" ] && [ -x "$perf" ] ||
    die "axon_perf not found: build Axon (build/ or in place) or set AXON_PERF=path"
"$perf" -h | grep -q amo_bw ||
    die "$perf has no one-sided tests (put_lat, amo_bw...): rebuild it"
# Axon warns about AXON_* variables it does not know; this one is ours.
unset AXON_PERF

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}
if ! command -v ucx_perftest >/dev/null; then
    echo "== installing ucx-utils" >&2
    as_root apt-get update -q >&2 &&
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q ucx-utils >&2 ||
        echo "rma_compare.sh: could not install ucx-utils; its column will say so" >&2
fi
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

work=$(mktemp -d /tmp/axon-rma-compare-XXXXXX)
# The run in progress: a server in the background and a client (or --local
# run) waited for; both are ended on exit, whatever the reason.
srv_pid=
fg_pid=
cleanup() {
    [ -n "$fg_pid" ] && kill "$fg_pid" 2>/dev/null
    [ -n "$srv_pid" ] && kill "$srv_pid" 2>/dev/null
    if [ "$keep" -eq 0 ]; then rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

run_timeout=$((quick ? 60 : 180))
port=$((20000 + RANDOM % 20000))
next_port() { port=$((port + 1)); [ $port -lt 65000 ] || port=20000; }

# Iterations scale with the size so that every run takes about a second
# on a quiet machine; over tcp everything is executed by the target (UCX's
# get takes hundreds of microseconds there), so it gets a tenth as many.
clamp() { local v=$1; [ "$v" -lt "$2" ] && v=$2; [ "$v" -gt "$3" ] && v=$3; echo "$v"; }
iters() {  # size tl budget min max
    local n div=1 max=$5
    if [ "$2" = tcp ]; then div=16; max=$((max / 10)); fi
    n=$(clamp $(($3 / ($1 + 1) / div)) "$4" "$max")
    [ $quick -eq 1 ] && n=$((n / 10))
    echo $((n < 100 ? 100 : n))
}
lat_iters() { iters "$1" "$2" $((1 << 31)) 1000 100000; }
bw_iters()  { iters "$1" "$2" $((1 << 33)) 2000 1000000; }
warmup_of() { local w=$(($1 / 10)); [ $w -gt 1000 ] && w=1000; echo "$w"; }

# Wait until something listens on TCP port $1 (without connecting to it:
# the servers here take exactly one client), or the process $2 is gone.
wait_listen() {
    local i
    for i in $(seq 200); do
        [ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ] && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.05
    done
    return 1
}

# Start a server in the background, wait for its port, run the client.
# Output: client in $out, server in $out.srv; status of the client.
client_server() {  # out port server-cmd... -- client-cmd...
    local out=$1 p=$2; shift 2
    local srv=() spid rc
    while [ "$1" != "--" ]; do srv+=("$1"); shift; done
    shift
    timeout "$run_timeout" "${srv[@]}" >"$out.srv" 2>&1 &
    spid=$!
    srv_pid=$spid
    if ! wait_listen "$p" "$spid"; then
        kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null
        srv_pid=
        cp "$out.srv" "$out"
        echo "server did not start listening on port $p" >>"$out"
        return 1
    fi
    timeout "$run_timeout" "$@" >"$out" 2>&1 &
    fg_pid=$!
    wait "$fg_pid"
    rc=$?
    fg_pid=
    # The server ends with its client; a failed client may leave it waiting.
    for _ in $(seq 50); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
    kill "$spid" 2>/dev/null
    wait "$spid" 2>/dev/null
    srv_pid=
    [ $rc -eq 124 ] && echo "timed out after $run_timeout s" >>"$out"
    return $rc
}

# The line that best explains a failed run: an error line if there is one.
first_error() {  # files...
    local line
    local text
    text=$(cat "$@" 2>/dev/null | grep -vE ' (DIAG|INFO|WARN) ')  # UCX's chatter
    line=$(grep -iE -m1 'error|timed out|did not|refused|denied|no such|unsupported' <<<"$text")
    [ -n "$line" ] || line=$(grep -iE -m1 'fail' <<<"$text")
    [ -n "$line" ] || line=$(grep -v '^[#|+]' <<<"$text" | grep -m1 .)
    # strip timestamps and process ids so that equal errors share one note
    sed -E 's/^\[[0-9.]+\] +\[[^]]*\] *//; s/^\[[^]]*:[0-9]+\] *//' <<<"${line:-no result line}" |
        cut -c1-160
}

both_errors() {  # client-output (the server's is beside it, .srv)
    local c s
    c=$(first_error "$1")
    s=$(first_error "$1.srv")
    if [ "$c" = "$s" ]; then echo "$c"; else echo "client: $c; server: $s"; fi
}

# Each measurement sets the globals lat, bw, rate (empty on failure) and err.
axon_run() {  # tl test size iters
    local out="$work/axon-$1-$2-$3" n=$4 line
    lat=; bw=; rate=; err=
    AXON_TLS=$1 timeout "$run_timeout" "$perf" --local -t "$2" -s "$3" -n "$n" \
        -W "$(warmup_of "$n")" >"$out" 2>&1 &
    fg_pid=$!
    wait "$fg_pid"
    fg_pid=
    line=$(grep -m1 '^RESULT' "$out")
    if [ -z "$line" ]; then
        err=$(first_error "$out")
        return
    fi
    lat=$(sed -n 's/.* latency_us=\([0-9.]*\).*/\1/p' <<<"$line")
    bw=$(sed -n 's/.* bandwidth_MBps=\([0-9.]*\).*/\1/p' <<<"$line")
    rate=$(sed -n 's/.* msgrate_Mps=\([0-9.]*\).*/\1/p' <<<"$line")
    grep -m1 '^# lanes:' "$out" >"$work/lanes-axon-$1"
}

ucx_run() {  # tl test size iters
    local out="$work/ucx-$1-$2-$3" n=$4 tls line
    lat=; bw=; rate=; err=
    [ $have_ucx -eq 1 ] || { err="ucx_perftest not installed"; return; }
    case $1 in shm) tls=sm ;; *) tls=$1 ;; esac
    next_port
    client_server "$out" "$port" env UCX_TLS=$tls ucx_perftest -p "$port" -- \
        env UCX_TLS=$tls UCX_LOG_LEVEL=info ucx_perftest 127.0.0.1 -p "$port" -t "$2" \
        -s "$3" -n "$n" -w "$(warmup_of "$n")"
    # Final: iters p50 lat_avg lat_overall bw_avg bw_overall(MiB/s) rate_avg rate_overall
    line=$(grep -m1 '^Final:' "$out")
    if [ -z "$line" ]; then
        err=$(both_errors "$out")
        return
    fi
    read -r _ _ _ _ lat _ bw _ rate <<<"$line"
    bw=$(awk -v b="$bw" 'BEGIN { printf "%.3f", b * 1.048576 }')      # MiB/s -> MB/s
    rate=$(awk -v r="$rate" 'BEGIN { printf "%.3f", r / 1e6 }')
    grep -m1 -o 'ep_cfg\[0\]: .*' "$out" >"$work/lanes-ucx-$1"
}

# Best of $repeat runs: lowest latency, highest bandwidth and rate.
declare -A R    # R[lib,tl,metric,size] = value
declare -A E    # E[lib,tl,metric,size] = first error seen
best() {  # key value lower-is-better
    local old=${R[$1]:-}
    if [ -z "$old" ] || awk -v a="$2" -v b="$old" -v low="$3" \
            'BEGIN { exit !((low && a < b) || (!low && a > b)) }'; then
        R[$1]=$2
    fi
}
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

echo "== axon_perf: $perf" >&2
load_start=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null)
if awk -v l="${load_start:-0}" 'BEGIN { exit !(l > 0.5) }'; then
    echo "== warning: load average $load_start: other processes are busy, expect noisy numbers" >&2
fi
echo "== sizes: ${sizes[*]}; transports: ${tls_list[*]}; repeat: $repeat" >&2
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

# The cell functions set $C rather than print, so that the list of failure
# notes they add to survives (no subshells).
notes=()
note_of() {  # lib tl metric size
    local e=${E[$1,$2,$3,$4]:-} i
    C="-"
    [ -n "$e" ] || return
    for i in "${!notes[@]}"; do
        if [ "${notes[$i]}" = "$1 $2: $e" ]; then C="fail[$((i + 1))]"; return; fi
    done
    notes+=("$1 $2: $e")
    C="fail[${#notes[@]}]"
}
cell() {  # lib tl metric size
    local v=${R[$1,$2,$3,$4]:-}
    if [ -n "$v" ]; then
        case $3 in
            *_us|*_Mps) C=$(printf '%.3f' "$v") ;;
            *)          C=$(printf '%.1f' "$v") ;;
        esac
    else
        note_of "$1" "$2" "$3" "$4"
    fi
}
ratio() {  # key-a key-b
    local a=${R[$1]:-} b=${R[$2]:-}
    C="-"
    if [ -n "$a" ] && [ -n "$b" ]; then
        C=$(awk -v a="$a" -v b="$b" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
    fi
}
human() {  # bytes
    if [ "$1" -gt 0 ] && [ $(($1 % 1048576)) -eq 0 ]; then echo "$(($1 / 1048576)) MiB"
    elif [ "$1" -gt 0 ] && [ $(($1 % 1024)) -eq 0 ]; then echo "$(($1 / 1024)) KiB"
    else echo "$1 B"; fi
}
row() {  # cells... -> one markdown row
    local out="|" c
    for c in "$@"; do out+=" $c |"; done
    echo "$out"
}
line_of() {  # tl metric size
    local cells=("$1" "$2" "$(human "$3")") lib
    for lib in axon ucx; do cell "$lib" "$1" "$2" "$3"; cells+=("$C"); done
    ratio "axon,$1,$2,$3" "ucx,$1,$2,$3"; cells+=("$C")
    row "${cells[@]}"
}

axon_version=$(sed -n 's/^# axon_perf \([^:]*\):.*/\1/p' "$work"/axon-* 2>/dev/null | head -1)
echo
echo "Axon ${axon_version:-?} vs UCX $(ucx_info -v 2>/dev/null | sed -n 's/^# Version //p')," \
    "one-sided operations, on $(uname -n), $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M UTC')" \
    "$([ $quick -eq 1 ] && echo '(--quick)')$([ "$repeat" -gt 1 ] && echo "(best of $repeat)")"
echo "Load average (1 min) at start ${load_start:-?}, at end $(cut -d' ' -f1 /proc/loadavg 2>/dev/null)" \
    "(the end includes this run's two busy-polling processes)."
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
echo
echo "Lanes:"
for tl in "${tls_list[@]}"; do
    [ -s "$work/lanes-axon-$tl" ] && echo "  axon $tl: $(sed 's/^# lanes: //' "$work/lanes-axon-$tl")"
    [ -s "$work/lanes-ucx-$tl" ] && echo "  ucx  $tl: $(cat "$work/lanes-ucx-$tl")"
done
if [ ${#notes[@]} -gt 0 ]; then
    echo
    echo "Failures:"
    for i in "${!notes[@]}"; do
        echo "  [$((i + 1))] ${notes[$i]}"
    done
fi
[ "$keep" -eq 1 ] && echo && echo "Raw outputs: $work"
exit 0
