#!/bin/bash
# Tests of bounded.sh, the time limit the runners put on every test program:
# the command's status passes through; a command past its limit gets 124,
# a stack of every thread of it and of its children on stderr, and no
# process of it is left. Prints "PASS name" or "FAIL name" per check.
#   tests/harness/bounded_test.sh BUILDDIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
bounded="$here/bounded.sh"
tmp=$(mktemp -d /tmp/axon-bounded-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

check_tail=30
. "$here/script_check.sh"

t_status_passes_through() {
    local rc
    "$bounded" 10 true || return 1
    "$bounded" 10 sh -c 'exit 7'; rc=$?
    [ $rc -eq 7 ] || { echo "status $rc, expected 7"; return 1; }
    # stdin reaches the command, as under timeout(1)
    [ "$(echo through | "$bounded" 10 cat)" = through ] || { echo "stdin lost"; return 1; }
}

# A parent and a child, both asleep: where they sleep is reported, both go.
t_hang_reported_and_killed() {
    local rc start left mark="axon-bounded-$$-$RANDOM"
    start=$SECONDS
    # Both processes carry the mark: another "sleep 300" on the host is not ours to count.
    "$bounded" -k 2 1 bash -c "(exec -a $mark-child sleep 300) & exec -a $mark sleep 301" \
        2>"$tmp/err"; rc=$?
    cat "$tmp/err"
    [ $rc -eq 124 ] || { echo "status $rc, expected 124"; return 1; }
    [ $((SECONDS - start)) -lt 60 ] || { echo "took $((SECONDS - start)) s"; return 1; }
    grep -q "did not end within 1 s" "$tmp/err" || { echo "no hang line"; return 1; }
    [ "$(grep -c '^=== pid ' "$tmp/err")" -ge 2 ] || { echo "not both processes"; return 1; }
    if command -v gdb >/dev/null && ! grep -q 'gdb could not attach' "$tmp/err"; then
        grep -q '^#0 .*sleep' "$tmp/err" || { echo "no frame in a sleep call"; return 1; }
    else
        grep -q 'wchan' "$tmp/err" || { echo "no thread state"; return 1; }
    fi
    sleep 0.2
    left=$(pgrep -f "$mark")
    [ -z "$left" ] || { echo "left behind: $left"; kill -9 $left; return 1; }
}

# SIGTERM to the wrapper (the outer limit of a runner) reaches the command.
t_term_forwarded() {
    local pid mark="axon-bounded-term-$$-$RANDOM"
    "$bounded" 300 bash -c "exec -a $mark sleep 302" &
    pid=$!
    for _ in $(seq 50); do pgrep -f "$mark" >/dev/null && break; sleep 0.1; done
    kill -TERM "$pid"
    wait "$pid"
    sleep 0.2
    ! pgrep -f "$mark" >/dev/null || { echo "command left running"; pkill -9 -f "$mark"; return 1; }
}

t_bad_limit_refused() {
    local rc
    "$bounded" 1.5x true 2>"$tmp/err"; rc=$?
    cat "$tmp/err"
    [ $rc -eq 125 ] && grep -q "LIMIT '1.5x'" "$tmp/err"
}

check harness_bounded_status_passes_through  t_status_passes_through
check harness_bounded_hang_reported_and_killed t_hang_reported_and_killed
check harness_bounded_term_forwarded         t_term_forwarded
check harness_bounded_bad_limit_refused      t_bad_limit_refused
