# shellcheck shell=bash
# Sourced by tests/mpi/run_mpi_tests.sh, tests/ofi/run_fabtests.sh and
# contrib/bench/bench_lib.sh.
# A killed mpirun can leave busy-polling ranks behind: every mpirun runs in
# a session of its own (setsid), and whatever is left of it is found by that
# session id and killed, nothing else.

session_pids() {  # sid (zombies, dead already, are not counted)
    ps -eo pid=,sid=,stat= | awk -v s="$1" '$2 == s && $3 !~ /^Z/ { print $1 }'
}
kill_session() {  # sid
    local left
    left=$(session_pids "$1")
    # shellcheck disable=SC2086 # one pid per word
    [ -n "$left" ] && kill -9 $left 2>/dev/null
}

# The caller's exit trap: kills what is left of the run under way ($run_pid),
# removes its scratch directory ($tmp) and Axon's shm segments ($shm_prefix).
session_cleanup() {
    [ -n "$run_pid" ] && kill_session "$run_pid"
    rm -rf "$tmp"
    rm -f /dev/shm/"$shm_prefix"-*
}
