# The verdict of one check of a script test, for run_tests.sh to count:
# sourced by the script tests (tools_test.sh, softib_verbs_test.sh, ...).
#
#   check NAME COMMAND [ARGS...]
#
# runs the command with its output in $tmp/NAME.out (the caller makes $tmp)
# and prints "PASS NAME" and its time ("PASS NAME 12 ms"), or "FAIL NAME"
# and the output's last $check_tail lines (default 20). Checks whose name
# does not match the glob $check_filter (default *) are not run.

check() {  # name command...
    local name=$1; shift
    # shellcheck disable=SC2053  # the filter is a glob
    [[ $name == ${check_filter:-*} ]] || return 0
    local start=${EPOCHREALTIME//[!0-9]/}
    if "$@" >"$tmp/$name.out" 2>&1; then
        echo "PASS $name $(( (${EPOCHREALTIME//[!0-9]/} - start) / 1000 )) ms"
    else
        echo "FAIL $name"
        sed 's/^/    | /' "$tmp/$name.out" | tail -"${check_tail:-20}"
    fi
}
