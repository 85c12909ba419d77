#!/bin/bash
# The layer rules of docs/design.md, checked on the source tree (#include
# lines) and, given a build directory, on the objects built from it (nm: the
# symbols each object uses and where they are defined).
#   tests/layering/check_layers.sh [SRCDIR [BUILDDIR]]
# Prints one line per violation, "file:line: what: rule", and exits 1 if
# there is any; else one summary line, exit 0.
#
# Layers, lowest first; a layer uses only itself and the layers below it:
#   base        framework/          services, status codes, the component ABI
#   device      framework/device/   the verbs-shaped device layer and its
#                                   back ends (softib/, rdmacore/)
#   components  components/<name>/  transport plugins; one does not use
#                                   another's files, except within a family
#   api         api/                the public API and its protocols
#   clients     tools/, contrib/<name>/  only the installed headers (and the
#                                   symbols they declare), plus their own files
# Installed headers (axoninclude_HEADERS in Makefile.am) include only
# installed headers. Within api/, calls follow the concerns: mem < core <
# the protocols (tag, rma), which do not call each other, < coll, which
# builds on them; core reaches the protocols only through the table in
# api/protocols.c.
set -u -o pipefail
src=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
build=${2:-}
[ -z "$build" ] || build=$(cd "$build" && pwd)
cd "$src" || exit 2

# Components that share files: rdmacm builds on the verbs family's rc, xchannel
# on its verbs helpers, umr serves its memory domain.
families='verbs:rdmacm:xchannel:umr'

files=$(find framework components api tools contrib -name '*.[ch]' 2>/dev/null | sort)
public=$(awk '/^axoninclude_HEADERS[ \t]*\+?=/ { on = 1; sub(/^[^=]*=/, "") }
              on { cont = sub(/\\$/, ""); print; if (!cont) on = 0 }' Makefile.am | tr -s ' \t' '\n' |
         grep . | sort)
if [ -z "$public" ]; then
    echo "check_layers: no axoninclude_HEADERS in $src/Makefile.am" >&2
    exit 2
fi

# The awk functions both checks share: a file's layer and what it may use.
rules='
function layer(p,   a) {
    if (p ~ /^framework\/device\//) return "device"
    if (p ~ /^framework\//)         return "base"
    if (p ~ /^api\//)               return "api"
    if (p ~ /^tools\//)             return "tools"
    split(p, a, "/")
    return a[1] "/" a[2]            # components/<name>, contrib/<name>
}
function rank(l) {
    if (l == "base")   return 0
    if (l == "device") return 1
    if (l ~ /^components\//) return 2
    if (l == "api")    return 3
    return 4                        # tools, contrib/<name>
}
function family(l,   n, f, i, j, m) {
    n = split(FAMILIES, f, " ")
    for (i = 1; i <= n; ++i) {
        m = split(f[i], j, ":")
        for (; m > 0; --m) if (l == "components/" j[m]) return f[i]
    }
    return l
}
# Why user (a layer) may not use target (a layer; public: target is
# installed), or "" if it may.
function broken(user, target, public) {
    if (user == target) return ""
    if (rank(user) == 4)
        return public ? "" : "tools/ and contrib/ use only the installed headers and what they declare"
    if (rank(target) > rank(user))
        return "a lower layer never uses an upper one (base < device < components < api < tools, contrib)"
    if ((rank(user) == 2) && (rank(target) == 2) && (family(user) != family(target)))
        return "a component does not use another component'"'"'s files"
    return ""
}
# Within api/: the concern of a file, and why user (a file) may not call into
# target (a file), or "" if it may.
function concern(p,   a) {
    if (p == "api/protocols.c") return "table"
    split(p, a, "/")
    return a[2]
}
function concern_rank(c) {
    return (c == "mem") ? 0 : (c == "core") ? 1 : (c == "table") ? 2 : (c == "coll") ? 4 : 3
}
function concern_broken(user, target,   u, t) {
    u = concern(user); t = concern(target)
    if ((u == t) || (u == "table") || (t == "table")) return ""
    if ((concern_rank(t) == 3) && (concern_rank(u) == 3))
        return "a protocol of api/ does not call another (" u " calls " t ")"
    if (concern_rank(t) > concern_rank(u))
        return "within api/, a concern calls only the ones below it (mem < core < the protocols, reached through api/protocols.c, < coll)"
    return ""
}
'

violations=$(mktemp)
trap 'rm -f "$violations"' EXIT

# ---- includes: resolve each "name" include to a file of the tree
# shellcheck disable=SC2086
grep -Hn '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' $files /dev/null |
awk -v FILES="$files" -v PUBLIC="$public" -v FAMILIES="${families//,/ }" "$rules"'
BEGIN {
    n = split(FILES, f, "\n")
    for (i = 1; i <= n; ++i) { exists[f[i]] = 1; b = f[i]; sub(/.*\//, "", b); by_base[b] = by_base[b] " " f[i] }
    n = split(PUBLIC, f, "\n")
    for (i = 1; i <= n; ++i) is_public[f[i]] = 1
}
function resolve(file, name,   dir, cand, c, k, b) {
    dir = file; sub(/[^\/]*$/, "", dir)
    if ((dir name) in exists) return dir name
    if (name in exists) return name
    b = name; sub(/.*\//, "", b)
    k = split(by_base[b], cand, " ")
    for (c = 1; c <= k; ++c) if (("/" cand[c]) ~ ("/" name "$")) return cand[c]
    return ""                       # generated (axon_config.h) or not ours
}
{
    file = $0; sub(/:.*/, "", file)
    rest = substr($0, length(file) + 2); line = rest; sub(/:.*/, "", line)
    name = rest; sub(/^[^"]*"/, "", name); sub(/".*/, "", name)
    target = resolve(file, name)
    if (target == "") next
    if ((file in is_public) && !(target in is_public))
        why = "an installed header includes only installed headers"
    else
        why = broken(layer(file), layer(target), target in is_public)
    if (why != "") printf "%s:%s: includes %s: %s\n", file, line, target, why
}' >>"$violations" || { echo "check_layers: the include check failed to run" >&2; exit 2; }
nincl=$(echo "$files" | wc -l)

# ---- calls: the symbols each built object uses, against where they are defined
nobj=0
if [ -n "$build" ]; then
    map=$(mktemp)
    trap 'rm -f "$violations" "$map"' EXIT
    # An object's source: <dir>/[<target>-]<name>.o (libtool's in .libs/) from <dir>/<name>.c
    while read -r obj; do
        rel=${obj#"$build"/}; dir=${rel%/*}; dir=${dir%/.libs}
        base=${rel##*/}; base=${base%.o}
        for s in "$dir/${base#*-}.c" "$dir/$base.c"; do
            if [ -f "$s" ]; then echo "$obj $s"; break; fi
        done
    done < <(find "$build"/framework "$build"/components "$build"/api "$build"/tools \
                  "$build"/contrib -name '*.o' 2>/dev/null | sort) >"$map"
    nobj=$(wc -l <"$map")
    # Names the installed headers declare: what clients may call.
    # shellcheck disable=SC2086
    declared=$(cat $public | grep -o '\<[A-Za-z_][A-Za-z0-9_]*\>' | sort -u)
    if [ "$nobj" -gt 0 ]; then
        # shellcheck disable=SC2046
        nm -A -g $(cut -d' ' -f1 "$map") 2>/dev/null |
        awk -v MAP="$map" -v DECLARED="$declared" -v FAMILIES="${families//,/ }" "$rules"'
        BEGIN {
            while ((getline l < MAP) > 0) { split(l, a, " "); source[a[1]] = a[2] }
            n = split(DECLARED, d, "\n")
            for (i = 1; i <= n; ++i) is_declared[d[i]] = 1
        }
        {
            obj = $1; sub(/:.*/, "", obj)
            sym = $NF; type = $(NF - 1)
            if (!(obj in source)) next
            if (type == "U") { ++nref; ref_src[nref] = source[obj]; ref_sym[nref] = sym }
            else if (type ~ /^[A-Z]$/) {
                defined_in[sym] = defined_in[sym] " " layer(source[obj])
                defined_file[sym] = source[obj]
            }
        }
        END {
            for (r = 1; r <= nref; ++r) {
                sym = ref_sym[r]
                if (!(sym in defined_in)) continue     # libc, libibverbs, ...
                user = layer(ref_src[r]); why = ""
                n = split(defined_in[sym], where, " ")
                for (i = 1; i <= n; ++i) {
                    why = broken(user, where[i], sym in is_declared)
                    if (why == "") break
                }
                if ((why == "") && (user == "api") && (n == 1) && (where[1] == "api"))
                    why = concern_broken(ref_src[r], defined_file[sym])
                if (why != "") print ref_src[r] "\t" sym "\t" where[1] "\t" why
            }
        }' | sort -u | while IFS=$'\t' read -r file sym where why; do
            # The first use inside a function body (indented), else any mention.
            line=$(grep -n -m1 -E "^[[:space:]]+.*\<$sym\>" "$file" | cut -d: -f1)
            [ -n "$line" ] || line=$(grep -n -w -m1 -- "$sym" "$file" | cut -d: -f1)
            echo "$file:${line:-?}: uses $sym (defined in the $where layer): $why"
        done >>"$violations" || { echo "check_layers: the symbol check failed to run" >&2; exit 2; }
    fi
fi

if [ -s "$violations" ]; then
    cat "$violations"
    echo "check_layers: $(wc -l <"$violations") violation(s) of the layer rules (docs/design.md)"
    exit 1
fi
echo "check_layers: layers respected ($nincl files${build:+, $nobj objects})"
