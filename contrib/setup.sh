#!/bin/bash
# Set up a fresh Debian 12 machine, build Axon, and run either the demo or the tests.
#   contrib/setup.sh demo   install dependencies, build, run a two-process tag
#                           ping-pong and bandwidth benchmark (axon_perf --local)
#   contrib/setup.sh test   install dependencies, build, run the whole test suite;
#                           the last line is "N passed, M failed"
set -eu
mode=${1:-}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

case "$mode" in
    demo|test) ;;
    *) echo "usage: $0 demo|test" >&2; exit 2 ;;
esac

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

packages=(autoconf automake libtool pkg-config make gcc g++ procps
          googletest libgtest-dev
          libibverbs-dev librdmacm-dev libhwloc-dev libfabric-dev libpmix-dev)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
        missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "== installing: ${missing[*]}"
    as_root apt-get update -q
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        "${missing[@]}"
fi

echo "== building"
jobs=$(nproc 2>/dev/null || echo 2)
if [ ! -x configure ] || [ configure.ac -nt configure ]; then
    ./autogen.sh >/dev/null
fi
if [ ! -f Makefile ] || [ configure -nt Makefile ]; then
    ./configure
fi
make -j"$jobs" >/dev/null

if [ "$mode" = demo ]; then
    echo "== axon_info: transports on this host"
    ./tools/axon_info -d
    echo "== tag latency, 8 bytes, auto-selected transport"
    ./tools/axon_perf --local -t tag_lat -s 8 -n 100000
    echo "== tag bandwidth, 1 MiB messages"
    ./tools/axon_perf --local -t tag_bw -s 1048576 -n 5000
    exit 0
fi

echo "== building tests"
make -j"$jobs" check TESTS= >/dev/null
echo "== running tests"
exec ./tests/run_tests.sh
