# shellcheck shell=bash
# Where Sandia OpenSHMEM is built (sourced by tests/shmem/run_sos_tests.sh,
# which builds it, and by contrib/bench/shmem_compare.sh and
# tests/tools_test.sh, which use that build): once per tarball, keyed by its
# sha256, in ${XDG_CACHE_HOME:-$HOME/.cache}/axon-clients/sos-<sum>/, outside
# the tree. The tarball is taken from $AXON_CLIENTS_DIR (default
# ../shared/clients beside the tree).

# Sets sos_tarball, sos_cache and sos_dir (empty when the tarball is missing).
sos_locate() {  # top-of-the-tree
    sos_tarball=${AXON_CLIENTS_DIR:-$1/../shared/clients}/SOS-1.5.3-with-tests-sos.tar.gz
    sos_cache=${XDG_CACHE_HOME:-$HOME/.cache}/axon-clients
    sos_dir=
    if [ -f "$sos_tarball" ]; then
        sos_dir=$sos_cache/sos-$(sha256sum "$sos_tarball" | cut -c1-16)
    fi
}

# SOS's installation (oshcc, libsma) once the build finished, else nothing.
sos_prefix() {  # top-of-the-tree
    sos_locate "$1"
    [ -n "$sos_dir" ] && [ -f "$sos_dir/built" ] && echo "$sos_dir/prefix"
}
