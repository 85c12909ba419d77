# shellcheck shell=bash
# Shared by the scripts of contrib/bench (sourced, never run): options,
# finding axon_perf, installing the other libraries' tools, running a tool
# as server and client with a time limit, running mpirun over Open MPI's
# transports and over Axon's libfabric provider, reading axon_perf's and
# ucx_perftest's results, and printing the markdown tables.
#
# A script using it defines usage() and, if it calls lat_iters/bw_iters,
# iters(size tl budget min max). Results go into R[key] (the best value of
# each cell) and E[key] (the first error of a cell); the keys are the script's.

bench_prog=${0##*/}

die() { echo "$bench_prog: $*" >&2; exit 2; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# ------------------------------------------------------------------ options

bench_usage() {  # header-lines(2,19) what-the-sizes-are
    sed -n "${1}p" "$0" | sed 's/^# \{0,1\}//'
    cat <<EOF
Options:
  --quick       a tenth of the iterations (a rough table in about a minute)
  --sizes LIST  $2, comma separated, k/m suffixes (default 8,4k,64k,1m)
  --tls LIST    transports to compare: shm, tcp (default shm,tcp)
  --repeat N    run each measurement N times and keep the best (default 1)
  --keep        keep the raw tool outputs (their directory is printed)
EOF
}

to_bytes() {  # 8 | 4k | 1m -> bytes
    local v=${1,,} scale=1
    case $v in
        *k) scale=1024; v=${v%k} ;;
        *m) scale=$((1024 * 1024)); v=${v%m} ;;
    esac
    [[ $v =~ ^[0-9]+$ ]] || return 1
    echo $((v * scale))
}

# Sets quick, repeat, keep, sizes[] (bytes) and tls_list[]; a size of 0 is
# refused with the message given, if one is.
bench_parse_options() {  # [why-no-zero-size] -- args...
    local nonzero=$1 sizes_arg=8,4k,64k,1m tls_arg=shm,tcp s b t _list
    shift 2
    # the hook sets the two locals above (bash scopes them dynamically)
    bench_option_hook=bench_sizes_tls_option bench_goal_options "$@"
    sizes=()
    IFS=, read -ra _list <<<"$sizes_arg"
    for s in "${_list[@]}"; do
        b=$(to_bytes "$s") || die "invalid size '$s'"
        [ -z "$nonzero" ] || [ "$b" -gt 0 ] || die "$nonzero"
        sizes+=("$b")
    done
    [ ${#sizes[@]} -gt 0 ] || die "no sizes"
    tls_list=()
    IFS=, read -ra _list <<<"$tls_arg"
    for t in "${_list[@]}"; do
        case $t in shm|tcp) tls_list+=("$t") ;; *) die "unknown transport '$t' (shm, tcp)" ;; esac
    done
}

# bench_parse_options' own: --sizes LIST and --tls LIST.
bench_sizes_tls_option() {  # name value
    case $1 in
        --sizes) sizes_arg=${2:?--sizes needs a list} ;;
        --tls)   tls_arg=${2:?--tls needs a list} ;;
        *)       return 1 ;;
    esac
}

# The goal scripts' options: --quick, --repeat N, --keep, -h (the script's
# usage); sets quick, repeat, keep. Any other option goes to the script's
# goal_option NAME VALUE (or $bench_option_hook's), if it has one, which
# returns 0 when it took both.
bench_goal_options() {  # args...
    quick=0
    repeat=1
    keep=0
    while [ $# -gt 0 ]; do
        case $1 in
            --quick)   quick=1 ;;
            --repeat)  repeat=${2:?--repeat needs a number}; shift ;;
            --keep)    keep=1 ;;
            -h|--help) usage; exit 0 ;;
            *) declare -F "${bench_option_hook:-goal_option}" >/dev/null &&
                   "${bench_option_hook:-goal_option}" "$1" "${2:-}" ||
                   die "unknown option '$1' (see --help)"
               shift ;;
        esac
        shift
    done
    [[ $repeat =~ ^[1-9][0-9]*$ ]] || die "invalid --repeat '$repeat'"
}

# The collective benchmarks' options: bench_parse_options' own plus --np LIST
# (rank counts) and --tests LIST (checked against known); sizes are whole
# 64-bit elements. Sets nps[] and tests[] as well.
bench_parse_coll_options() {  # default-tests known-tests default-sizes -- args...
    local np_arg=2,4 tests_arg=$1 known=" $2 " sizes_arg=$3 rest=() s n t
    shift 4
    while [ $# -gt 0 ]; do
        case $1 in
            --np)    np_arg=${2:?--np needs a list}; shift ;;
            --tests) tests_arg=${2:?--tests needs a list}; shift ;;
            --sizes) sizes_arg=${2:?--sizes needs a list}; shift ;;
            *)       rest+=("$1") ;;
        esac
        shift
    done
    bench_parse_options "collectives move whole 64-bit elements: sizes start at 8" -- \
        --sizes "$sizes_arg" "${rest[@]}"
    for s in "${sizes[@]}"; do
        [ $((s % 8)) -eq 0 ] || die "size $s is not a multiple of 8 (64-bit elements)"
    done
    IFS=, read -ra nps <<<"$np_arg"
    for n in "${nps[@]}"; do [[ $n =~ ^[1-9][0-9]*$ ]] || die "invalid --np '$n'"; done
    IFS=, read -ra tests <<<"$tests_arg"
    for t in "${tests[@]}"; do
        [[ $known == *" $t "* ]] || die "unknown test '$t' (see --help)"
    done
}

# ------------------------------------------------------------------ tools

# Sets perf: $AXON_PERF, else build/tools/axon_perf, else tools/axon_perf.
bench_find_perf() {
    local top p
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
    # Axon warns about AXON_* variables it does not know; this one is ours.
    unset AXON_PERF
}

# Why transport $1 cannot run here, or nothing when it can: its plugin is
# not built, did not load, or found no device (what axon_info, beside
# axon_perf, says when AXON_TLS names it). Call after bench_find_perf.
bench_tl_missing() {  # tl
    local info out why
    info=$(dirname "$perf")/axon_info
    [ -x "$info" ] || return 0  # cannot tell: the run will say
    out=$(AXON_TLS=$1 "$info" -d 2>&1)
    if grep -q "unknown transport '$1'" <<<"$out"; then
        echo "libaxon_$1.so is not built"
    elif why=$(grep -m1 -o "AXON_TLS names '$1', but its component .* could not be loaded: .*" \
                   <<<"$out"); then
        echo "libaxon_$1.so did not load: ${why#*could not be loaded: }"
    elif grep -q "AXON_TLS names '$1', but it has no usable device" <<<"$out"; then
        echo "no device for $1 on this host"
    fi
}

# apt-get install the packages whose command is missing; on failure their
# cells say so.
bench_install() {  # command:package...
    local missing=() cp what="its column"
    [ $# -gt 1 ] && what="their columns"
    for cp in "$@"; do
        command -v "${cp%%:*}" >/dev/null || missing+=("${cp#*:}")
    done
    [ ${#missing[@]} -gt 0 ] || return 0
    echo "== installing ${missing[*]}" >&2
    as_root apt-get update -q >&2 &&
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2 ||
        echo "$bench_prog: could not install ${missing[*]}; $what will say so" >&2
}

# ------------------------------------------------------------------ running

# The raw outputs go to $work. The run in progress: a server in the
# background and a client (or --local run) waited for; both are ended on
# exit, whatever the reason.
bench_start() {  # mktemp-template
    work=$(mktemp -d "$1")
    srv_pid=
    fg_pid=
    trap bench_cleanup EXIT
    trap 'exit 130' INT TERM HUP
    run_timeout=$((quick ? 60 : 180))
    port=$((20000 + RANDOM % 20000))
}
bench_cleanup() {
    [ -n "$fg_pid" ] && kill "$fg_pid" 2>/dev/null
    [ -n "$srv_pid" ] && kill "$srv_pid" 2>/dev/null
    [ -n "${mpi_sid:-}" ] && kill_session "$mpi_sid"
    [ -n "${shm_prefix:-}" ] && rm -f /dev/shm/"$shm_prefix"-*
    if [ "$keep" -eq 0 ]; then rm -rf "$work"; fi
}

next_port() { port=$((port + 1)); [ $port -lt 65000 ] || port=20000; }

# Iterations scale with the size (the script's iters) so that every run
# takes about a second on a quiet machine.
clamp() { local v=$1; [ "$v" -lt "$2" ] && v=$2; [ "$v" -gt "$3" ] && v=$3; echo "$v"; }
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

# What an error line says first (a script may add words).
bench_error_words='error|timed out|did not|refused|denied|no such'

# The line that best explains a failed run: an error line if there is one.
first_error() {  # files...
    local line
    local text
    text=$(cat "$@" 2>/dev/null | grep -vE ' (DIAG|INFO|WARN) ')  # UCX's chatter
    line=$(grep -iE -m1 "$bench_error_words" <<<"$text")
    [ -n "$line" ] || line=$(grep -iE -m1 'fail' <<<"$text")
    [ -n "$line" ] || line=$(grep -v '^[#|+]' <<<"$text" | grep -m1 .)
    # strip timestamps and process ids so that equal errors share one note
    sed -E 's/^\[[0-9.]+\] +\[[^]]*\] *//; s/^\[[^]]*:[0-9]+\] *//' <<<"${line:-no result line}" |
        cut -c1-160
}

# Client and server each say why; either may hold the cause.
both_errors() {  # client-output (the server's is beside it, .srv)
    local c s
    c=$(first_error "$1")
    s=$(first_error "$1.srv")
    if [ "$c" = "$s" ]; then echo "$c"; else echo "client: $c; server: $s"; fi
}

# Run a command with its output in out, in the background (ended on exit), and wait.
bench_fg() {  # out command...
    local out=$1
    shift
    "$@" >"$out" 2>&1 &
    fg_pid=$!
    wait "$fg_pid"
    fg_pid=
}

# A field of the RESULT line axon_perf wrote to out, or nothing.
bench_result() {  # out field
    sed -n "/^RESULT/{s/.* $2=\\([-0-9.]*\\).*/\\1/p;q}" "$1"
}

# Each measurement sets the globals lat, bw, rate (empty on failure) and err.
axon_run() {  # tl test size iters
    local out="$work/axon-$1-$2-$3" n=$4
    lat=; bw=; rate=; err=
    bench_fg "$out" env AXON_TLS="$1" timeout "$run_timeout" "$perf" --local -t "$2" -s "$3" \
        -n "$n" -W "$(warmup_of "$n")"
    if ! grep -q '^RESULT' "$out"; then
        err=$(first_error "$out")
        return
    fi
    lat=$(bench_result "$out" latency_us)
    bw=$(bench_result "$out" bandwidth_MBps)
    rate=$(bench_result "$out" msgrate_Mps)
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
declare -A R    # R[the script's cell key] = value
declare -A E    # E[the script's error key] = first error seen
best() {  # key value lower-is-better
    local old=${R[$1]:-}
    if [ -z "$old" ] || awk -v a="$2" -v b="$old" -v low="$3" \
            'BEGIN { exit !((low && a < b) || (!low && a > b)) }'; then
        R[$1]=$2
    fi
}

# One run of the caller's measure-function (which sets value, or err on
# failure) into R[key/who], the best so far, or its first error into E[key/who];
# the raw output goes to $work, numbered by $runs.
bench_measure() {  # key who lower-is-better measure-function args...
    local key=$1 who=$2 low=$3 fn=$4
    shift 4
    value=
    err=
    echo "== $key: $who" >&2
    "$fn" "$work/$key-$who-$((++runs))" "$@"
    if [ -n "$value" ]; then
        best "$key/$who" "$value" "$low"
    elif [ -z "${E[$key/$who]:-}" ]; then
        E[$key/$who]=$err
    fi
}

# Sets load_start; warns on stderr when the machine is busy already.
bench_load_check() {
    load_start=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null)
    if awk -v l="${load_start:-0}" 'BEGIN { exit !(l > 0.5) }'; then
        echo "== warning: load average $load_start: other processes are busy," \
            "expect noisy numbers" >&2
    fi
}

# The stderr lines before the runs.
bench_announce() {
    echo "== axon_perf: $perf" >&2
    bench_load_check
    echo "== sizes: ${sizes[*]}; transports: ${tls_list[*]}; repeat: $repeat" >&2
}

# ------------------------------------------------------------------ Open MPI

# Sets builddir (the build axon_perf belongs to), provdir (Axon's libfabric
# provider in it), shm_prefix and mpi_base[] (the mpirun arguments of every
# run: busy-polling ranks, possibly more than cores, must not be bound to one).
bench_find_mpi() {
    command -v mpirun >/dev/null ||
        die "mpirun is needed (Debian: openmpi-bin, libopenmpi-dev)"
    bench_find_perf
    builddir=$(cd "$(dirname "$perf")/.." && pwd)
    provdir=$builddir/contrib/ofi_provider/.libs
    shm_prefix=axb$$  # Axon takes prefixes of up to 13 characters
    mpi_base=(--oversubscribe --bind-to none)
    if [ "$(id -u)" -eq 0 ]; then
        export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    fi
}

mpi_version() { mpirun --version 2>/dev/null | sed -n '1s/.*(Open MPI) //p'; }

# The launcher and its arguments for a configuration (launcher, cfg[]):
#   ob1-vader  Open MPI's shared memory     ob1-tcp  Open MPI's tcp btl
#   ofi-tcp    cm + ofi MTL on libfabric's tcp provider (tcp;ofi_rxm)
#   axon       cm + ofi MTL on Axon's provider (Axon picks its transports)
#   axon-tcp   the same with AXON_TLS=tcp
# and for one-sided MPI (osc), each naming the osc component so that none
# other can stand in:
#   osc-ucx        --mca pml ucx --mca osc ucx (UCX picks its transports)
#   osc-axon       axon + --mca osc rdma --mca btl self,ofi over the axon provider
#   osc-axon-tcp   the same with AXON_TLS=tcp
#   osc-vader      --mca pml ob1 --mca osc rdma --mca btl self,vader
#   osc-tcp        --mca pml ob1 --mca osc rdma --mca btl self,tcp
# and for SHMEM:
#   sos-axon   Sandia OpenSHMEM on Axon's provider; sos-sockets on libfabric's
#              sockets provider (Open MPI only launches them and lends SOS its
#              PMI: its own MPI layer is pinned to ob1 + vader, off libfabric)
#   oshmem-ucx Open MPI's OpenSHMEM (oshrun, spml ucx)
mpi_config_args() {  # config -> launcher, cfg[]
    local axon_env=(-x "FI_PROVIDER_PATH=$provdir" -x "AXON_SHM_PREFIX=$shm_prefix"
                    -x "LD_LIBRARY_PATH=$builddir/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
    local axon=(--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include axon "${axon_env[@]}")
    local osc_axon=(--mca osc rdma --mca btl "self,ofi" --mca btl_ofi_provider_include axon)
    local sos=(--mca pml ob1 --mca btl self,vader)
    launcher=mpirun
    case $1 in
        ob1-vader)    cfg=(--mca pml ob1 --mca btl "self,vader") ;;
        ob1-tcp)      cfg=(--mca pml ob1 --mca btl "self,tcp") ;;
        ofi-tcp)      cfg=(--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include tcp) ;;
        axon)         cfg=("${axon[@]}") ;;
        axon-tcp)     cfg=("${axon[@]}" -x AXON_TLS=tcp) ;;
        osc-ucx)      cfg=(--mca pml ucx --mca osc ucx --mca pml_ucx_tls any --mca pml_ucx_devices any) ;;
        osc-axon)     cfg=("${axon[@]}" "${osc_axon[@]}") ;;
        osc-axon-tcp) cfg=("${axon[@]}" "${osc_axon[@]}" -x AXON_TLS=tcp) ;;
        osc-vader)    cfg=(--mca pml ob1 --mca osc rdma --mca btl "self,vader") ;;
        osc-tcp)      cfg=(--mca pml ob1 --mca osc rdma --mca btl "self,tcp") ;;
        sos-axon)     cfg=("${sos[@]}" -x SHMEM_OFI_PROVIDER=axon "${axon_env[@]}") ;;
        sos-sockets)  cfg=("${sos[@]}" -x SHMEM_OFI_PROVIDER=sockets) ;;
        oshmem-ucx)   cfg=(--mca spml ucx); launcher=oshrun ;;
        *)            die "unknown MPI configuration '$1'" ;;
    esac
}

# session_pids, kill_session
. "$(dirname "${BASH_SOURCE[0]}")/../../tests/mpi/session.sh"

# One mpirun of a configuration (the script's config, as mpi_config_args
# gives it), bounded by $run_timeout; nothing it started survives it, nor
# do Axon's shared memory segments. Output in $out; status of mpirun.
mpi_run() {  # out config ranks program args...
    local out=$1 rc
    mpi_config_args "$2"
    if [[ $2 == *axon* ]] && [ ! -f "$provdir/libaxon-fi.so" ]; then
        echo "error: the Axon provider is not built ($provdir/libaxon-fi.so)" >"$out"
        return 1
    fi
    setsid timeout -k 5 "$run_timeout" "$launcher" "${mpi_base[@]}" "${cfg[@]}" -np "$3" \
        "${@:4}" >"$out" 2>&1 </dev/null &
    mpi_sid=$!
    wait "$mpi_sid"
    rc=$?
    [ $rc -eq 124 ] && echo "timed out after $run_timeout s" >>"$out"
    kill_session "$mpi_sid"
    mpi_sid=
    rm -f /dev/shm/"$shm_prefix"-*
    return $rc
}

# ------------------------------------------------------------------ table

# The cell functions set $C rather than print, so that the list of failure
# notes they add to survives (no subshells).
notes=()
note_of() {  # lib tl error-key
    local e=${E[$3]:-} i
    C="-"
    [ -n "$e" ] || return
    for i in "${!notes[@]}"; do
        if [ "${notes[$i]}" = "$1 $2: $e" ]; then C="fail[$((i + 1))]"; return; fi
    done
    notes+=("$1 $2: $e")
    C="fail[${#notes[@]}]"
}
# The value of R[lib,tl,metric,size] (3 decimals for latencies and rates), else its failure note.
cell_of() {  # lib tl metric size error-key
    local v=${R[$1,$2,$3,$4]:-}
    if [ -z "$v" ]; then
        note_of "$1" "$2" "$5"
        return
    fi
    case $3 in
        *_us|*_Mps|msgrate) C=$(printf '%.3f' "$v") ;;
        *)                  C=$(printf '%.1f' "$v") ;;
    esac
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

# Where and how a table was measured: "on <host>, N cores, <date> (best of N)".
bench_where() {
    echo "on $(uname -n), $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M UTC')" \
        "$([ $quick -eq 1 ] && echo '(--quick)')$([ "$repeat" -gt 1 ] && echo "(best of $repeat)")"
}
bench_load_line() {  # [what the end includes]
    echo "Load average (1 min) at start ${load_start:-?}," \
        "at end $(cut -d' ' -f1 /proc/loadavg 2>/dev/null)${1:-}."
}

# The title: "Axon <version> vs UCX <version><what> on <host>...", and the load.
bench_title() {  # what
    local axon_version
    axon_version=$(sed -n 's/^# axon_perf \([^:]*\):.*/\1/p' "$work"/axon-* 2>/dev/null | head -1)
    echo
    echo "Axon ${axon_version:-?} vs UCX $(ucx_info -v 2>/dev/null | sed -n 's/^# Version //p')$1" \
        "$(bench_where)"
    bench_load_line " (the end includes this run's two busy-polling processes)"
}

# After the tables: the lanes each library chose, the failure notes, where the raw outputs are.
bench_footer() {
    local tl i
    echo
    echo "Lanes:"
    for tl in "${tls_list[@]}"; do
        [ -s "$work/lanes-axon-$tl" ] &&
            echo "  axon $tl: $(sed 's/^# lanes: //' "$work/lanes-axon-$tl")"
        [ -s "$work/lanes-ucx-$tl" ] && echo "  ucx  $tl: $(cat "$work/lanes-ucx-$tl")"
    done
    bench_notes
}

# The failure notes of the run, then where the raw outputs are (--keep).
# The last line of a run with goals, and its exit status: 0 all met, 1 not.
# One goal's table row: who's and ref's values of key (the caller's R, with
# E the notes of failed runs), their ratio and the verdict against the goal;
# a miss or a missing value counts in the caller's $missed.
bench_goal_row() {  # what key who ref op(<=|>=) goal
    local what=$1 key=$2 who=$3 ref=$4 op=$5 target=$6 a b ratio verdict
    a=${R[$key/$who]:-}
    b=${R[$key/$ref]:-}
    if [ -z "$a" ] || [ -z "$b" ]; then
        missed=$((missed + 1))
        echo "| $what | ${a:-fail} | ${b:-fail} | - | $op $target | FAIL:" \
             "${E[$key/$who]:-${E[$key/$ref]:-no result}} |"
        return
    fi
    ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { printf (b > 0) ? "%.3f" : "inf", a / b }')
    if [ "$ratio" != inf ] && awk -v r="$ratio" -v g="$target" -v op="$op" \
            'BEGIN { exit !((op == "<=") ? r <= g : r >= g) }'; then
        verdict=PASS
    else
        verdict=MISS
        missed=$((missed + 1))
    fi
    echo "| $what | $a | $b | $ratio | $op $target | $verdict |"
}

bench_goals_exit() {  # missed-count goal-count
    if [ "$1" -eq 0 ]; then
        echo "all $2 goals met"
        exit 0
    fi
    echo "$1 of $2 goals missed or not measured"
    exit 1
}

bench_notes() {
    local i
    if [ ${#notes[@]} -gt 0 ]; then
        echo
        echo "Failures:"
        for i in "${!notes[@]}"; do
            echo "  [$((i + 1))] ${notes[$i]}"
        done
    fi
    [ "$keep" -eq 1 ] && echo && echo "Raw outputs: $work"
}
