#!/bin/bash
# What a test's name says (tests/README.md, "Names" and "Labels").
#   tests/test_names.sh BUILDDIR        check every name of BUILDDIR's tests/axon_gtest:
#                                       "PASS name" or "FAIL name" lines for run_tests.sh
#   tests/test_names.sh --select PASS   the names (one "Prefix/Suite.Test/param" a line,
#                                       on stdin) that PASS runs: asan, valgrind, alone
#                                       (the tests the plain pass runs one at a time) or
#                                       group (those it may run several to a process)
#   tests/test_names.sh --check         the names on stdin that break the convention
set -u

# One awk program reads a name into its parts and labels; "mode" says what to print.
read_names() {  # mode [pass]
    awk -v mode="$1" -v pass="${2:-}" '
    {
        full = $0; prefix = ""; param = ""
        dot = index(full, ".")
        head = substr(full, 1, dot - 1); tail = substr(full, dot + 1)
        if (split(head, h, "/") == 2) { prefix = h[1]; suite = h[2] } else { suite = head }
        slash = index(tail, "/")
        if (slash) { test = substr(tail, 1, slash - 1); param = substr(tail, slash + 1) }
        else       { test = tail }
        label = ""
        if (match(suite, /(Xproc|Slow|Heap|Timed|Fault)$/)) label = substr(suite, RSTART)
        lane = (prefix == "Lanes" || prefix == "Variants")
        ofi  = (suite ~ /^Ofi/) || (lane && param ~ /^ofi/)
        one_process = lane ? (param ~ /^self/) : (label != "Xproc")

        if (mode == "check") {
            why = ""
            if (dot == 0)                                    why = "no Suite.Test"
            else if (prefix != "" && prefix !~ /^[A-Z][A-Za-z0-9]*$/) why = "prefix not CamelCase"
            else if (suite !~ /^[A-Z][A-Za-z0-9]*$/)         why = "suite not CamelCase"
            else if (suite ~ /Test$/)                        why = "suite ends in Test"
            else if (test !~ /^[A-Z][A-Za-z0-9]*$/)          why = "test not CamelCase"
            else if (lane && param !~ /^[a-z][a-z0-9]*(_[a-z0-9]+)*$/) why = "lane not a transport name"
            else if (param != "" && param !~ /^[A-Za-z0-9_]+$/) why = "parameter name"
            if (why != "") print full ": " why
            next
        }
        if (pass == "asan")
            ok = label != "Slow" && label != "Heap" && label != "Fault" && !ofi && prefix != "Variants"
        else if (pass == "valgrind")
            ok = label == "" && !ofi && one_process
        else if (pass == "alone")
            ok = label == "Timed" || label == "Fault"
        else if (pass == "group")
            ok = label != "Slow" && label != "Heap" && label != "Timed" && label != "Fault" && !ofi
        else { print "unknown pass: " pass > "/dev/stderr"; exit 2 }
        if (ok) print full
    }'
}

case "${1:-}" in
    --select) read_names select "${2:-}"; exit ;;
    --check)  bad=$(read_names check); [ -n "$bad" ] && echo "$bad"; [ -z "$bad" ]; exit ;;
esac

builddir=${1:-$(pwd)}
gtest=$builddir/tests/axon_gtest
if [ -x "$builddir/tests/.libs/axon_gtest" ]; then
    gtest=$builddir/tests/.libs/axon_gtest
    export LD_LIBRARY_PATH="$builddir/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
names=$("$gtest" --gtest_list_tests | awk '/^[^ ]/ { s = $1; next } /^  / { print s $1 }')
bad=$(read_names check <<<"$names")
if [ -n "$names" ] && [ -z "$bad" ]; then
    echo "PASS test-names-follow-the-convention"
else
    echo "FAIL test-names-follow-the-convention"
    sed 's/^/    | /' <<<"$bad" | head -20
fi
# The check itself: each planted name breaks one rule and must be reported.
planted='select_filter.AliasIb
SelectFilter.alias_ib
ConfigTest.Defaults
Lanes/Tag.PingPong/Shm'
if [ "$(read_names check <<<"$planted" | wc -l)" -eq 4 ]; then
    echo "PASS test-names-check-catches-planted-names"
else
    echo "FAIL test-names-check-catches-planted-names"
fi
