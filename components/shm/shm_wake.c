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
 *
 * A peer that dies wakes nobody by its ring, so a sleeping worker watches
 * its peers' processes too: the descriptor it sleeps on is an epoll set of
 * the eventfd and a pidfd for each peer process (readable once it has
 * exited). Arming looks at the pidfds first: a dead peer's endpoints fail
 * there (AXON_ERR_BUSY, the failure is reported by the next progress), and
 * its pidfd leaves the set, so it wakes the worker once.
 */
#define _GNU_SOURCE
#include "axon_config.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "shm.h"
#include "sys.h"
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

void axon_shm_wake_wait_open(axon_shm_iface_t *iface)
{
    struct epoll_event event;

    iface->wait_fd = iface->event_fd;
    if (iface->event_fd < 0) {
        return;
    }
    iface->wait_fd = epoll_create1(EPOLL_CLOEXEC);
    memset(&event, 0, sizeof(event));
    event.events   = EPOLLIN;
    event.data.ptr = NULL;   /* the eventfd; an endpoint's pidfd carries the endpoint */
    if ((iface->wait_fd < 0) ||
        (epoll_ctl(iface->wait_fd, EPOLL_CTL_ADD, iface->event_fd, &event) != 0)) {
        axon_debug("shm %s: no epoll set (%s): a sleeping worker sees a dead peer only "
                   "when it wakes", iface->seg.name, strerror(errno));
        if (iface->wait_fd >= 0) {
            close(iface->wait_fd);
        }
        iface->wait_fd = iface->event_fd;
    }
}

void axon_shm_wake_wait_close(axon_shm_iface_t *iface)
{
    if ((iface->wait_fd >= 0) && (iface->wait_fd != iface->event_fd)) {
        close(iface->wait_fd);
    }
    iface->wait_fd = -1;
}

/* The peer's pidfd, or -1 with *why set. */
static int axon_shm_wake_pidfd(const axon_shm_ep_t *ep, const char **why)
{
    int pidfd;

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
    /* Still the owner: its pid not reused since it published its address. */
    if (axon_proc_is_gone(&ep->peer, why)) {
        close(pidfd);
        return -1;
    }
    fcntl(pidfd, F_SETFD, FD_CLOEXEC);
    return pidfd;
}

/* A copy of the owner's (pidfd's) eventfd number remote_fd, or -1 with *why set. */
static int axon_shm_wake_fd_copy(int pidfd, int remote_fd, const char **why)
{
    int fd = (int)syscall(SYS_pidfd_getfd, pidfd, remote_fd, 0);

    *why = (fd < 0) ? strerror(errno) : NULL;
    if (fd < 0) {
        return -1;
    }
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    /* The owner's eventfd, not whatever took that number. */
    if (!axon_shm_wake_fd_is_eventfd(fd)) {
        *why = "the descriptor is not an eventfd";
        close(fd);
        return -1;
    }
    return fd;
}

/* Another endpoint of this iface that watches the same process, or NULL. */
static axon_shm_ep_t *axon_shm_wake_watcher(axon_shm_iface_t *iface, const axon_shm_ep_t *ep)
{
    axon_shm_ep_t *other;

    axon_list_for_each(other, &iface->eps, list) {
        if ((other != ep) && other->pid_watched && axon_proc_equal(&other->peer, &ep->peer)) {
            return other;
        }
    }
    return NULL;
}

/*
 * Wake the sleeping worker when the peer's process exits: one watch a
 * process (its user endpoint and the one answering it share it; a pidfd
 * each would double the descriptors an endpoint costs), kept in pidfd.
 */
static void axon_shm_wake_watch(axon_shm_ep_t *ep, int pidfd)
{
    axon_shm_iface_t  *iface = (axon_shm_iface_t*)ep->super.iface;
    struct epoll_event event;

    if ((pidfd < 0) || (iface->wait_fd < 0) || (iface->wait_fd == iface->event_fd) ||
        (axon_shm_wake_watcher(iface, ep) != NULL)) {
        if (pidfd >= 0) {
            close(pidfd);
        }
        return;
    }
    memset(&event, 0, sizeof(event));
    event.events   = EPOLLIN;
    event.data.ptr = ep;
    if (epoll_ctl(iface->wait_fd, EPOLL_CTL_ADD, pidfd, &event) == 0) {
        ep->pid_fd      = pidfd;
        ep->pid_watched = 1;
    } else {
        axon_debug("shm %s: cannot watch pid %d (%s): a sleeping worker sees its death "
                   "only when it wakes", iface->seg.name, ep->peer.pid, strerror(errno));
        close(pidfd);
    }
}

void axon_shm_wake_unwatch(axon_shm_ep_t *ep)
{
    axon_shm_iface_t *iface = (axon_shm_iface_t*)ep->super.iface;

    if (ep->pid_watched) {
        (void)epoll_ctl(iface->wait_fd, EPOLL_CTL_DEL, ep->pid_fd, NULL);
        ep->pid_watched = 0;
    }
    if (ep->pid_fd >= 0) {
        close(ep->pid_fd);
        ep->pid_fd = -1;
    }
}

void axon_shm_wake_take(axon_shm_ep_t *ep, const char *seg_name)
{
    int32_t     remote_fd = ep->peer_ctl->event_fd;
    const char *why       = NULL;
    int         pidfd     = axon_shm_wake_pidfd(ep, &why);

    ep->wake_fd     = -1;
    ep->pid_fd      = -1;
    ep->pid_watched = 0;
    if ((remote_fd >= 0) && (pidfd >= 0)) {
        ep->wake_fd = axon_shm_wake_fd_copy(pidfd, remote_fd, &why);
    }
    axon_shm_wake_watch(ep, pidfd);
    if ((remote_fd >= 0) && (ep->wake_fd < 0)) {   /* none: the owner never arms its ring */
        axon_debug("shm: cannot take the wakeup descriptor of %s (pid %d): %s; its owner "
                   "is polled from now on", seg_name, ep->peer.pid, why ? why : "unknown");
        atomic_fetch_add_explicit(&ep->peer_ctl->deaf_senders, 1, memory_order_relaxed);
        ep->flags |= AXON_SHM_EP_FLAG_DEAF;
    }
}

/*
 * The watch of ep (unlinked, its peer alive) passes, pidfd and all, to another
 * endpoint of that process; 0 if there is none.
 */
static int axon_shm_wake_hand_over(axon_shm_ep_t *ep)
{
    axon_shm_iface_t  *iface = (axon_shm_iface_t*)ep->super.iface;
    struct epoll_event event;
    axon_shm_ep_t     *other;

    axon_list_for_each(other, &iface->eps, list) {
        if ((other->status == AXON_OK) && axon_proc_equal(&other->peer, &ep->peer)) {
            memset(&event, 0, sizeof(event));
            event.events   = EPOLLIN;
            event.data.ptr = other;
            if (epoll_ctl(iface->wait_fd, EPOLL_CTL_MOD, ep->pid_fd, &event) != 0) {
                return 0;
            }
            other->pid_fd      = ep->pid_fd;
            other->pid_watched = 1;
            ep->pid_fd         = -1;
            ep->pid_watched    = 0;
            return 1;
        }
    }
    return 0;
}

void axon_shm_wake_drop(axon_shm_ep_t *ep)
{
    /* Watched, so the iface is open (its close unwatches what it leaves behind). */
    if (!ep->pid_watched || (ep->status != AXON_OK) || !axon_shm_wake_hand_over(ep)) {
        axon_shm_wake_unwatch(ep);
    }
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

    if (iface->wait_fd < 0) {
        return AXON_ERR_UNSUPPORTED;
    }
    *fd_p = iface->wait_fd;
    return AXON_OK;
}

/* Peers whose pidfd says they exited: failed now (a peer that closed first only left). */
static void axon_shm_wake_reap(axon_shm_iface_t *iface)
{
    struct epoll_event events[16];
    axon_shm_ep_t     *ep;
    int                n, i;

    if (iface->wait_fd == iface->event_fd) {
        return;
    }
    n = epoll_wait(iface->wait_fd, events, 16, 0);
    for (i = 0; i < n; ++i) {
        ep = events[i].data.ptr;
        if (ep == NULL) {
            continue;   /* the eventfd */
        }
        axon_shm_wake_unwatch(ep);
        axon_shm_iface_check_ep(iface, ep, axon_sys_time_sec());
        if (ep->status == AXON_OK) {   /* /proc could not tell; the pidfd can */
            axon_shm_iface_fail_ep(iface, ep, AXON_ERR_CONNECTION_RESET, "exited");
        }
    }
}

axon_status_t axon_shm_iface_event_arm(axon_iface_t *tl_iface)
{
    axon_shm_iface_t *iface = (axon_shm_iface_t*)tl_iface;
    uint64_t          count;

    if ((iface->event_fd < 0) ||
        (atomic_load_explicit(&iface->senders.ctl->deaf_senders, memory_order_relaxed) > 0)) {
        return AXON_ERR_UNSUPPORTED;
    }
    axon_shm_wake_reap(iface);
    if (iface->failures_pending > 0) {
        return AXON_ERR_BUSY;
    }
    /* Wakeups already consumed by the progress that came before: forget them. */
    (void)!read(iface->event_fd, &count, sizeof(count));
    return axon_shm_fifo_arm(&iface->fifo, iface->head) ? AXON_OK : AXON_ERR_BUSY;
}
