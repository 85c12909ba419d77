/*
 * Wakeups: a ring's owner that wants to sleep (axon_worker_arm) arms its
 * ring (axon_shm_fifo_arm) and waits on its eventfd; the sender whose claim
 * disarms the ring writes to that eventfd once the cell is published.
 *
 * A sender reaches the owner's eventfd through a copy of the descriptor
 * (pidfd_getfd, the same permission as cross-memory attach), taken when its
 * endpoint is made. A sender that cannot take one (another pid namespace,
 * ptrace restrictions, an old kernel, valgrind) says so in the owner's segment
 * (deaf_senders), and the owner then refuses to sleep: its worker is
 * polled, as without wakeups.
 */
#define _GNU_SOURCE
#include "axon_config.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "shm.h"
#ifdef HAVE_VALGRIND_H
#include <valgrind/valgrind.h>
#endif

#ifndef SYS_pidfd_open
#define SYS_pidfd_open  434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

int axon_shm_wake_fd_open(const char *prefix)
{
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

    if (fd < 0) {
        axon_debug("shm (prefix %s): no eventfd (%s): this iface is polled, never woken",
                   prefix, strerror(errno));
    }
    return fd;
}

/* Is fd an eventfd? The copy must be what the owner published, not a reused number. */
static int axon_shm_wake_fd_is_eventfd(int fd)
{
    char path[64], target[64];
    ssize_t n;

    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    n = readlink(path, target, sizeof(target) - 1);
    if (n <= 0) {
        return 0;
    }
    target[n] = '\0';
    return strcmp(target, "anon_inode:[eventfd]") == 0;
}

/* A copy of the owner's eventfd number remote_fd, or -1 with *why set. */
static int axon_shm_wake_fd_copy(const axon_shm_ep_t *ep, int remote_fd, const char **why)
{
    int pidfd, fd;

    if (!(ep->flags & AXON_SHM_EP_FLAG_CHECKABLE)) {
        *why = "the owner is in another pid namespace";
        return -1;
    }
#ifdef HAVE_VALGRIND_H
    if (RUNNING_ON_VALGRIND) {
        *why = "valgrind does not run pidfd_open";   /* and warns at every call */
        return -1;
    }
#endif
    pidfd = (int)syscall(SYS_pidfd_open, ep->peer.pid, 0);
    if (pidfd < 0) {
        *why = strerror(errno);
        return -1;
    }
    fd = (int)syscall(SYS_pidfd_getfd, pidfd, remote_fd, 0);
    *why = (fd < 0) ? strerror(errno) : NULL;
    close(pidfd);
    if (fd < 0) {
        return -1;
    }
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    /* Still the owner (its pid not reused meanwhile), and its eventfd. */
    if (axon_proc_is_gone(&ep->peer, why) || !axon_shm_wake_fd_is_eventfd(fd)) {
        if (*why == NULL) {
            *why = "the descriptor is not an eventfd";
        }
        close(fd);
        return -1;
    }
    return fd;
}

void axon_shm_wake_take(axon_shm_ep_t *ep, const char *seg_name)
{
    int32_t     remote_fd = ep->peer_ctl->event_fd;
    const char *why       = NULL;

    ep->wake_fd = -1;
    if (remote_fd < 0) {
        return;   /* the owner has no eventfd: it never arms its ring */
    }
    ep->wake_fd = axon_shm_wake_fd_copy(ep, remote_fd, &why);
    if (ep->wake_fd < 0) {
        axon_debug("shm: cannot take the wakeup descriptor of %s (pid %d): %s; its owner "
                   "is polled from now on", seg_name, ep->peer.pid, why ? why : "unknown");
        atomic_fetch_add_explicit(&ep->peer_ctl->deaf_senders, 1, memory_order_relaxed);
        ep->flags |= AXON_SHM_EP_FLAG_DEAF;
    }
}

void axon_shm_wake_drop(axon_shm_ep_t *ep)
{
    if (ep->wake_fd >= 0) {
        close(ep->wake_fd);
        ep->wake_fd = -1;
    }
    if (ep->flags & AXON_SHM_EP_FLAG_DEAF) {
        atomic_fetch_sub_explicit(&ep->peer_ctl->deaf_senders, 1, memory_order_relaxed);
        ep->flags &= ~AXON_SHM_EP_FLAG_DEAF;
    }
}

void axon_shm_wake_peer(const axon_shm_ep_t *ep)
{
    uint64_t one = 1;

    /* EAGAIN (the counter full) still leaves the eventfd readable: nothing lost. */
    if (ep->wake_fd >= 0) {
        (void)!write(ep->wake_fd, &one, sizeof(one));
    }
}

axon_status_t axon_shm_iface_event_fd(axon_iface_t *tl_iface, int *fd_p)
{
    const axon_shm_iface_t *iface = (const axon_shm_iface_t*)tl_iface;

    if (iface->event_fd < 0) {
        return AXON_ERR_UNSUPPORTED;
    }
    *fd_p = iface->event_fd;
    return AXON_OK;
}

axon_status_t axon_shm_iface_event_arm(axon_iface_t *tl_iface)
{
    axon_shm_iface_t *iface = (axon_shm_iface_t*)tl_iface;
    uint64_t          count;

    if ((iface->event_fd < 0) ||
        (atomic_load_explicit(&iface->senders.ctl->deaf_senders, memory_order_relaxed) > 0)) {
        return AXON_ERR_UNSUPPORTED;
    }
    if (iface->failures_pending > 0) {
        return AXON_ERR_BUSY;
    }
    /* Wakeups already consumed by the progress that came before: forget them. */
    (void)!read(iface->event_fd, &count, sizeof(count));
    return axon_shm_fifo_arm(&iface->fifo, iface->head) ? AXON_OK : AXON_ERR_BUSY;
}
