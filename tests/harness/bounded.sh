#!/bin/bash
# A command with a time limit, like timeout(1), that says where it hung:
#
#   tests/harness/bounded.sh [-k KILL_AFTER] LIMIT COMMAND [ARGS...]
#
# LIMIT and KILL_AFTER are seconds (KILL_AFTER default 5). The command's exit
# status is returned; when LIMIT passes first, every thread of the command
# and of its descendants gets a stack trace on stderr (gdb when installed,
# else each thread's state and kernel wait channel from /proc), then they
# get SIGTERM, SIGKILL KILL_AFTER seconds later, and the status is 124, as
# timeout's. A hang in CI is then a report of where, not only of how long.
# SIGTERM or SIGINT to this script goes on to the command and its
# descendants.
set -u

kill_after=5
if [ "${1:-}" = -k ]; then
    kill_after=${2:?-k needs seconds}
    shift 2
fi
limit=${1:?usage: bounded.sh [-k KILL_AFTER] LIMIT COMMAND [ARGS...]}
shift
[ $# -gt 0 ] || { echo "bounded.sh: no command" >&2; exit 125; }
case $limit$kill_after in
    *[!0-9]*) echo "bounded.sh: LIMIT '$limit' and KILL_AFTER '$kill_after': whole seconds" >&2
              exit 125 ;;
esac

# The command and everything it started that is still its descendant
tree_pids() {  # root
    ps -e -o pid=,ppid= | awk -v root="$1" '
        { parent[$1] = $2 }
        END {
            for (p in parent) {
                for (q = p; q != "" && q > 1; q = parent[q]) {
                    if (q == root) { print p; break }
                }
            }
        }'
}

thread_stacks() {  # pid
    local p=$1 t
    if command -v gdb >/dev/null; then
        timeout 30 gdb -p "$p" -batch -nx -ex 'set pagination off' \
            -ex 'thread apply all bt 30' 2>&1 | grep -E '^(Thread|#)' | head -600
        [ "${PIPESTATUS[0]}" -eq 0 ] && return
        echo "  (gdb could not attach; from /proc)"
    fi
    for t in /proc/"$p"/task/*; do
        [ -d "$t" ] || continue
        printf '  thread %s %s state %s wchan %s syscall %s\n' "${t##*/}" \
            "$(cat "$t/comm" 2>/dev/null)" \
            "$(awk '{print $3}' "$t/stat" 2>/dev/null)" \
            "$(cat "$t/wchan" 2>/dev/null)" \
            "$(cut -d' ' -f1 "$t/syscall" 2>/dev/null)"
    done
}

report_hang() {  # root
    local p
    echo "bounded.sh: '$command' did not end within $limit s; where its threads are:"
    for p in $(tree_pids "$1"); do
        [ -r "/proc/$p/cmdline" ] || continue
        echo "=== pid $p: $(tr '\0' ' ' <"/proc/$p/cmdline" | cut -c1-200)"
        thread_stacks "$p"
    done
}

signal_tree() {  # root signal
    local pids
    pids=$(tree_pids "$1")
    # the deepest first would not matter: every one gets it at once
    [ -n "$pids" ] && kill -s "$2" $pids 2>/dev/null
}

child=
sleeper=
forward() {  # signal
    [ -n "$sleeper" ] && kill "$sleeper" 2>/dev/null
    [ -n "$child" ] && signal_tree "$child" "$1"
    exit $((128 + $(kill -l "$1")))
}
trap 'forward TERM' TERM
trap 'forward INT' INT

command="$*"
exec 3<&0          # a background job would read /dev/null otherwise
"$@" <&3 &
child=$!
exec 3<&-
sleep "$limit" &
sleeper=$!

# whichever ends first: the command (its status) or the limit
while :; do
    wait -n -p done "$child" "$sleeper"
    rc=$?
    [ "${done:-}" = "$child" ] && { kill "$sleeper" 2>/dev/null; exit $rc; }
    [ "${done:-}" = "$sleeper" ] && break
done
report_hang "$child" >&2
signal_tree "$child" TERM
for _ in $(seq $((kill_after * 10))); do
    kill -0 "$child" 2>/dev/null || break
    sleep 0.1
done
signal_tree "$child" KILL
wait "$child" 2>/dev/null
exit 124
