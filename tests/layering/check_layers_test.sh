#!/bin/bash
# Tests of check_layers.sh: the tree and its build pass; a wrong-way include
# or call planted in a temporary copy of the sources (never in the tree)
# fails, naming the file, the line and the rule. Prints "PASS name" or
# "FAIL name" per check; run_tests.sh counts them.
#   tests/layering/check_layers_test.sh BUILDDIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
builddir=${1:-$(pwd)}
layers="$here/check_layers.sh"
tmp=$(mktemp -d /tmp/axon-layers-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

. "$here/../harness/script_check.sh"

# A fresh copy of what the check reads, for one test to plant into.
copy_tree() {  # dir
    mkdir -p "$1"
    cp "$src/Makefile.am" "$1/"
    (cd "$src" && find framework components api tools contrib -name '*.[ch]' -print0 |
         xargs -0 tar -cf -) | tar -xf - -C "$1"
}

# The check fails, printing the expected lines (fixed strings).
fails_with() {  # dir [builddir] -- expected...
    local dir=$1 bld="" out rc line
    shift
    if [ "$1" != -- ]; then bld=$1; shift; fi
    shift
    out=$(bash "$layers" "$dir" $bld 2>&1); rc=$?
    echo "$out"
    [ $rc -eq 1 ] || { echo "exit status $rc, not 1"; return 1; }
    for line in "$@"; do
        grep -qF -- "$line" <<<"$out" || { echo "missing: $line"; return 1; }
    done
}

t_tree_and_build_pass() {
    bash "$layers" "$src" "$builddir" && bash "$layers" "$src" "$builddir" | grep -q ' objects)$'
}

t_planted_include_upward() {
    copy_tree "$tmp/up"
    sed -i '2i #include "axon_int.h"' "$tmp/up/framework/log.c"
    fails_with "$tmp/up" -- \
        "framework/log.c:2: includes api/core/axon_int.h: a lower layer never uses an upper one"
}

t_planted_include_across_components() {
    copy_tree "$tmp/across"
    sed -i '3i #include "shm.h"' "$tmp/across/components/tcp/tcp_ep.c"
    fails_with "$tmp/across" -- \
        "components/tcp/tcp_ep.c:3: includes components/shm/shm.h: a component does not use another component's files"
}

t_planted_include_of_internals_by_tool() {
    copy_tree "$tmp/tool"
    sed -i '2i #include "log.h"' "$tmp/tool/tools/axon_perf.c"
    fails_with "$tmp/tool" -- \
        "tools/axon_perf.c:2: includes framework/log.h: tools/ and contrib/ use only the installed headers"
}

# Calls: objects of a planted build directory, a framework file calling into
# api/ and a tool calling an internal function.
t_planted_calls() {
    local d=$tmp/calls b=$tmp/calls-build
    copy_tree "$d"
    mkdir -p "$b/api" "$b/framework" "$b/tools"
    printf 'int axon_planted_api(void)\n{\n    return 1;\n}\n' >"$d/api/planted_api.c"
    printf 'int axon_planted_api(void);\n\nint axon_planted_base(void)\n{\n    return axon_planted_api();\n}\n' \
        >"$d/framework/planted_base.c"
    printf 'int axon_planted_base(void);\n\nint main(void)\n{\n    return axon_planted_base();\n}\n' \
        >"$d/tools/planted_tool.c"
    cc -c -o "$b/api/planted_api.o" "$d/api/planted_api.c" &&
        cc -c -o "$b/framework/planted_base.o" "$d/framework/planted_base.c" &&
        cc -c -o "$b/tools/planted_tool.o" "$d/tools/planted_tool.c" || return 1
    fails_with "$d" "$b" -- \
        "framework/planted_base.c:5: uses axon_planted_api (defined in the api layer): a lower layer never uses an upper one" \
        "tools/planted_tool.c:5: uses axon_planted_base (defined in the base layer): tools/ and contrib/ use only the installed headers and what they declare" \
        "check_layers: 2 violation(s)"
}

# Calls within api/: one protocol calling another, core calling a protocol directly.
t_planted_calls_across_concerns() {
    local d=$tmp/concerns b=$tmp/concerns-build
    copy_tree "$d"
    mkdir -p "$b/api/tag" "$b/api/rma" "$b/api/core"
    printf 'int axon_planted_rma(void)\n{\n    return 1;\n}\n' >"$d/api/rma/planted_rma.c"
    printf 'int axon_planted_rma(void);\n\nint axon_planted_tag(void)\n{\n    return axon_planted_rma();\n}\n' \
        >"$d/api/tag/planted_tag.c"
    printf 'int axon_planted_tag(void);\n\nint axon_planted_core(void)\n{\n    return axon_planted_tag();\n}\n' \
        >"$d/api/core/planted_core.c"
    cc -c -o "$b/api/rma/planted_rma.o" "$d/api/rma/planted_rma.c" &&
        cc -c -o "$b/api/tag/planted_tag.o" "$d/api/tag/planted_tag.c" &&
        cc -c -o "$b/api/core/planted_core.o" "$d/api/core/planted_core.c" || return 1
    fails_with "$d" "$b" -- \
        "api/tag/planted_tag.c:5: uses axon_planted_rma (defined in the api layer): a protocol of api/ does not call another (tag calls rma)" \
        "api/core/planted_core.c:5: uses axon_planted_tag (defined in the api layer): within api/, a concern calls only the ones below it" \
        "check_layers: 2 violation(s)"
}

# The collectives build on the protocols: coll may call tag, tag may not call coll.
t_planted_calls_with_coll() {
    local d=$tmp/coll b=$tmp/coll-build
    copy_tree "$d"
    mkdir -p "$b/api/tag" "$b/api/coll"
    printf 'int axon_planted_coll(void);\n\nint axon_planted_tag(void)\n{\n    return axon_planted_coll();\n}\n' \
        >"$d/api/tag/planted_tag.c"
    printf 'int axon_planted_tag(void);\n\nint axon_planted_coll(void)\n{\n    return axon_planted_tag();\n}\n' \
        >"$d/api/coll/planted_coll.c"
    cc -c -o "$b/api/tag/planted_tag.o" "$d/api/tag/planted_tag.c" &&
        cc -c -o "$b/api/coll/planted_coll.o" "$d/api/coll/planted_coll.c" || return 1
    fails_with "$d" "$b" -- \
        "api/tag/planted_tag.c:5: uses axon_planted_coll (defined in the api layer): within api/, a concern calls only the ones below it" \
        "check_layers: 1 violation(s)"
}

check layering_tree_and_build_pass             t_tree_and_build_pass
check layering_catches_upward_include          t_planted_include_upward
check layering_catches_include_across_components t_planted_include_across_components
check layering_catches_tool_including_internals t_planted_include_of_internals_by_tool
check layering_catches_wrong_way_calls         t_planted_calls
check layering_catches_calls_across_concerns   t_planted_calls_across_concerns
check layering_lets_coll_call_the_protocols    t_planted_calls_with_coll
