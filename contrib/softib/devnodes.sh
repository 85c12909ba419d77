#!/bin/bash
# Run a command where /dev/infiniband/<name> exists for each of softib's
# devices, in a private mount namespace: nothing outside it sees the nodes.
#   contrib/softib/devnodes.sh command [args...]
# UCX (1.13) lists a verbs device only when /dev/infiniband/<dev_name> is a
# character device it may read and write, the kernel's uverbs node; it never
# opens it (every verb goes through libibverbs), so each node here is a bind
# of /dev/null. /dev cannot take a new directory without changing it for the
# whole host, so the namespace gets a tmpfs on /dev holding the original
# entries (binds, symlinks copied) plus infiniband/. Without root, a user
# namespace maps the caller to root inside it (unshare -r), which mounting
# needs; the command then runs as that root of the namespace, no more
# privileged outside it than the caller. The devices: softib0..N-1,
# N = AXON_SOFTIB_DEVICES (1), as softib names them.
set -eu
[ $# -gt 0 ] || { echo "usage: $0 command [args...]" >&2; exit 2; }
ndev=${AXON_SOFTIB_DEVICES:-1}
case $ndev in ''|*[!0-9]*) echo "$0: AXON_SOFTIB_DEVICES='$ndev' is not a number" >&2; exit 2 ;; esac

if [ "${AXON_DEVNODES_INSIDE:-}" != 1 ]; then
    if [ "$(id -u)" -eq 0 ]; then userns=(); else userns=(--user --map-root-user); fi
    AXON_DEVNODES_INSIDE=1 exec unshare "${userns[@]}" --mount --propagation private \
        bash "$0" "$@"
fi
unset AXON_DEVNODES_INSIDE

# The original /dev stays reachable through an open descriptor once the
# tmpfs covers it: no directory to make (and leave behind) for it.
exec 3</dev
old=/proc/$$/fd/3
mount -t tmpfs -o mode=755 axon-dev /dev
for entry in "$old"/* "$old"/.[!.]*; do
    [ -e "$entry" ] || [ -L "$entry" ] || continue
    name=/dev/${entry##*/}
    if [ -L "$entry" ]; then
        cp -P "$entry" "$name"
    elif [ -d "$entry" ]; then
        mkdir "$name" && mount --no-canonicalize --rbind "$entry" "$name"
    else
        touch "$name" && mount --no-canonicalize --bind "$entry" "$name"
    fi
done
mkdir /dev/infiniband
for ((i = 0; i < ndev; i++)); do
    touch "/dev/infiniband/softib$i"
    mount --no-canonicalize --bind "$old/null" "/dev/infiniband/softib$i"
done
exec 3<&-
exec "$@"
