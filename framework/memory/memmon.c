/* Memory monitor on userfaultfd (see memmon.h for the why). */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "list.h"
#include "log.h"
#include "memmon.h"

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

#define AXON_MEMMON_EVENTS (UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_EVENT_REMOVE | \
                            UFFD_FEATURE_EVENT_REMAP)

struct axon_memmon_sub {
    axon_list_link_t link;
    axon_memmon_cb_t cb;
    void            *arg;
};

static struct {
    pthread_mutex_t  lock;      /* held while reading and dispatching events */
    pthread_mutex_t  start;     /* serializes subscribe/unsubscribe */
    axon_list_link_t subs;
    unsigned         nsubs;
    int              uffd;
    int              stop_fd;   /* eventfd: wakes the thread to exit */
    pid_t            pid;       /* the process that owns uffd (not a forked child) */
    pthread_t        thread;
    uint64_t         events;
    int              failed;    /* could not start: do not try again */
} axon_memmon = {
    .lock  = PTHREAD_MUTEX_INITIALIZER,
    .start = PTHREAD_MUTEX_INITIALIZER,
    .subs  = {&axon_memmon.subs, &axon_memmon.subs},
    .uffd  = -1,
};

void axon_memmon_lock(void)
{
    pthread_mutex_lock(&axon_memmon.lock);
}

void axon_memmon_unlock(void)
{
    pthread_mutex_unlock(&axon_memmon.lock);
}

uint64_t axon_memmon_events(void)
{
    return axon_memmon.events;
}

static int axon_memmon_uffd_open(void)
{
    /* User-mode-only descriptors are allowed without privilege (Linux 5.11). */
    int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);

    if (fd < 0) {
        fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    }
    return fd;
}

/* A descriptor with the unmap events, plus write-protect on shmem when the kernel has it. */
static int axon_memmon_uffd_create(void)
{
    struct uffdio_api api = {.api = UFFD_API, .features = 0};
    uint64_t offered;
    int fd;

    fd = axon_memmon_uffd_open();
    if (fd < 0) {
        axon_info("memmon: userfaultfd: %s; registration caches are off", strerror(errno));
        return -1;
    }
    /* The handshake can be made once per descriptor: ask what exists on a first one. */
    if (ioctl(fd, UFFDIO_API, &api) != 0) {
        axon_info("memmon: UFFDIO_API: %s; registration caches are off", strerror(errno));
        close(fd);
        return -1;
    }
    offered = api.features;
    close(fd);
    if ((offered & AXON_MEMMON_EVENTS) != AXON_MEMMON_EVENTS) {
        axon_info("memmon: userfaultfd lacks unmap events (features 0x%llx); "
                  "registration caches are off", (unsigned long long)offered);
        return -1;
    }
    fd = axon_memmon_uffd_open();
    api.api      = UFFD_API;
    api.features = AXON_MEMMON_EVENTS;
#ifdef UFFD_FEATURE_WP_HUGETLBFS_SHMEM
    api.features |= offered & UFFD_FEATURE_WP_HUGETLBFS_SHMEM;
#endif
    if ((fd < 0) || (ioctl(fd, UFFDIO_API, &api) != 0)) {
        axon_info("memmon: userfaultfd handshake: %s; registration caches are off",
                  strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    return fd;
}

static void axon_memmon_dispatch(uintptr_t start, uintptr_t end)
{
    axon_memmon_sub_t *sub;

    ++axon_memmon.events;
    axon_list_for_each(sub, &axon_memmon.subs, link) {
        sub->cb(sub->arg, start, end);
    }
}

/* Read every queued event; the lock is held (see memmon.h). */
static void axon_memmon_drain(void)
{
    struct uffd_msg msg;
    ssize_t n;

    while ((n = read(axon_memmon.uffd, &msg, sizeof(msg))) == (ssize_t)sizeof(msg)) {
        switch (msg.event) {
        case UFFD_EVENT_UNMAP:
        case UFFD_EVENT_REMOVE:
            axon_memmon_dispatch(msg.arg.remove.start, msg.arg.remove.end);
            break;
        case UFFD_EVENT_REMAP:
            /* The pages moved: the old range holds nothing we registered. */
            axon_memmon_dispatch(msg.arg.remap.from, msg.arg.remap.from + msg.arg.remap.len);
            break;
        default:
            axon_debug("memmon: userfaultfd event %u ignored", (unsigned)msg.event);
            break;
        }
    }
    if ((n < 0) && (errno != EAGAIN) && (errno != EINTR)) {
        axon_warn("memmon: reading userfaultfd: %s", strerror(errno));
    }
}

static void *axon_memmon_thread(void *arg)
{
    struct pollfd fds[2] = {
        {.fd = axon_memmon.uffd, .events = POLLIN},
        {.fd = axon_memmon.stop_fd, .events = POLLIN},
    };

    (void)arg;
    for (;;) {
        if ((poll(fds, 2, -1) < 0) && (errno != EINTR)) {
            axon_warn("memmon: poll: %s", strerror(errno));
        }
        if (fds[1].revents & POLLIN) {
            break;
        }
        if (fds[0].revents & (POLLIN | POLLERR | POLLHUP)) {
            /* Lock first: the unmapping thread resumes as soon as we read. */
            axon_memmon_lock();
            axon_memmon_drain();
            axon_memmon_unlock();
        }
    }
    /*
     * Closing the descriptor unregisters every watched range and releases
     * any thread waiting on an event: from then on nobody waits for us. The
     * reader closes it, not the thread that joins it: joining frees memory
     * (glibc trims its cache of thread stacks, and the heap with it), and
     * a heap shrink in a watched range before the close would wait for a
     * reader that has exited, with the allocator's locks held.
     */
    close(axon_memmon.uffd);
    return NULL;
}

/* fork() while the monitor dispatches would leave the child's copy of the lock held. */
static void axon_memmon_atfork_prepare(void)
{
    axon_memmon_lock();
}

static void axon_memmon_atfork_parent(void)
{
    axon_memmon_unlock();
}

/*
 * The child inherits the descriptors, not the thread, and its address space
 * is not watched. Its copy of the descriptor would keep the parent's watch
 * alive past the parent's close (the kernel releases it with the last
 * copy): the parent's unmaps would then wait for a reader that has exited.
 */
static void axon_memmon_atfork_child(void)
{
    if (axon_memmon.uffd >= 0) {
        close(axon_memmon.uffd);
        close(axon_memmon.stop_fd);
        axon_memmon.uffd = -1;
    }
    axon_memmon_unlock();
}

static void axon_memmon_atfork_init(void)
{
    pthread_atfork(axon_memmon_atfork_prepare, axon_memmon_atfork_parent,
                   axon_memmon_atfork_child);
}

static axon_status_t axon_memmon_start(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;

    pthread_once(&once, axon_memmon_atfork_init);
    if (axon_memmon.failed) {
        return AXON_ERR_UNSUPPORTED;
    }
    axon_memmon.uffd = axon_memmon_uffd_create();
    if (axon_memmon.uffd < 0) {
        axon_memmon.failed = 1;
        return AXON_ERR_UNSUPPORTED;
    }
    axon_memmon.stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if ((axon_memmon.stop_fd < 0) ||
        (pthread_create(&axon_memmon.thread, NULL, axon_memmon_thread, NULL) != 0)) {
        axon_warn("memmon: cannot start the monitor thread; registration caches are off");
        if (axon_memmon.stop_fd >= 0) {
            close(axon_memmon.stop_fd);
        }
        close(axon_memmon.uffd);
        axon_memmon.uffd   = -1;
        axon_memmon.failed = 1;
        return AXON_ERR_UNSUPPORTED;
    }
    axon_memmon.pid = getpid();
    return AXON_OK;
}

static void axon_memmon_stop(void)
{
    uint64_t one = 1;

    if (write(axon_memmon.stop_fd, &one, sizeof(one)) != (ssize_t)sizeof(one)) {
        axon_warn("memmon: cannot wake the monitor thread: %s", strerror(errno));
    }
    pthread_join(axon_memmon.thread, NULL);   /* it closed the userfaultfd */
    close(axon_memmon.stop_fd);
    axon_memmon.uffd = -1;
}

/* In a forked child the descriptors are closed (axon_memmon_atfork_child). */
static int axon_memmon_running(void)
{
    return (axon_memmon.uffd >= 0) && (axon_memmon.pid == getpid());
}

axon_status_t axon_memmon_subscribe(axon_memmon_cb_t cb, void *arg, axon_memmon_sub_t **sub_p)
{
    axon_memmon_sub_t *sub = calloc(1, sizeof(*sub));
    axon_status_t status = AXON_OK;

    if (sub == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    sub->cb  = cb;
    sub->arg = arg;
    pthread_mutex_lock(&axon_memmon.start);
    if (axon_memmon.uffd >= 0 && !axon_memmon_running()) {
        status = AXON_ERR_UNSUPPORTED;   /* a child cloned without the fork handlers */
    } else if (axon_memmon.nsubs == 0) {
        status = axon_memmon_start();
    }
    if (status == AXON_OK) {
        axon_memmon_lock();
        axon_list_add_tail(&axon_memmon.subs, &sub->link);
        ++axon_memmon.nsubs;
        axon_memmon_unlock();
    }
    pthread_mutex_unlock(&axon_memmon.start);
    if (status != AXON_OK) {
        free(sub);
        return status;
    }
    *sub_p = sub;
    return AXON_OK;
}

void axon_memmon_unsubscribe(axon_memmon_sub_t *sub)
{
    pthread_mutex_lock(&axon_memmon.start);
    axon_memmon_lock();
    axon_list_del(&sub->link);
    --axon_memmon.nsubs;
    axon_memmon_unlock();
    if ((axon_memmon.nsubs == 0) && axon_memmon_running()) {
        axon_memmon_stop();
    }
    pthread_mutex_unlock(&axon_memmon.start);
    free(sub);
}

axon_status_t axon_memmon_watch(uintptr_t addr, size_t length)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = addr & ~(page - 1);
    uintptr_t end = (addr + length + page - 1) & ~(page - 1);
    struct uffdio_register reg;

    if (!axon_memmon_running()) {
        return AXON_ERR_UNSUPPORTED;
    }
    memset(&reg, 0, sizeof(reg));
    reg.range.start = start;
    reg.range.len   = end - start;
    /* Write-protect mode without protecting anything: events, never faults. */
    reg.mode        = UFFDIO_REGISTER_MODE_WP;
    if (ioctl(axon_memmon.uffd, UFFDIO_REGISTER, &reg) != 0) {
        axon_debug("memmon: cannot watch 0x%lx+%lu: %s (not cached)", (unsigned long)start,
                   (unsigned long)(end - start), strerror(errno));
        return AXON_ERR_UNSUPPORTED;
    }
    return AXON_OK;
}
