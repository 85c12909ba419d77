/*
 * FI_PROGRESS_AUTO data progress: one thread per domain that progresses the
 * endpoints the application does not, so a target that never calls
 * libfabric still completes the operations that need its worker (under the
 * domain's lock, which an auto-progress domain always takes). It leaves
 * alone an endpoint the application's calls passed over since
 * the thread's last look: a caller that polls progresses that worker
 * itself, and a second thread taking its events would only contend for the
 * lock and, on a host with a core per process, for the core (a SHMEM
 * fetch-add answered by a polling target took 3.1-3.6 us with the thread
 * joining in, 0.42-0.49 us without). Endpoints nobody polls (SHMEM's
 * target endpoint, while the PE computes or polls another) are still served.
 *
 * Between passes the thread naps: AXON_FI_PROGRESS_MIN_NS after a pass
 * that handled something, doubling up to AXON_FI_PROGRESS_MAX_NS while
 * nothing happens. It tries the lock; found busy, it waits for it after the
 * next nap. So an endpoint is served two naps (2 ms) at most after the
 * application last passed over it.
 *
 * Idle at the longest nap, it sleeps instead: it arms every endpoint's
 * worker (axon_worker_arm) and waits on their descriptors, woken by a
 * message for any of them, by the application posting an operation
 * (axon_fi_progress_posted: work a worker may need progress for without a
 * message coming), or after AXON_FI_PROGRESS_SLEEP_NS (what transports only
 * notice by polling: a peer's death). A nap every millisecond costs a
 * context switch on a core another process is busy on (2 x 1000 a second
 * took 5 % off SHMEM's 1 MiB puts between two PEs on two cores). A wake-up
 * that finds nothing for the thread (the application handles its own
 * endpoints) makes the thread nap rather than sleep for a while, doubling
 * up to AXON_FI_PROGRESS_BACKOFF_MAX naps, so an application that keeps
 * posting or receiving is not followed by a wake-up for each message. A
 * worker that cannot be waited for (rc, ud, dc: polled devices) keeps the
 * thread napping.
 *
 * The thread takes the lock's internal side (axon_fi_mutex.h): awake from
 * its start until it sleeps on the descriptors, and again from its wake-up,
 * so an application serializing its calls takes the lock without a locked
 * instruction while the thread sleeps. A thread serving endpoints (its
 * last two wake-ups found work for it: one alone may be a straggler of
 * start-up, and a SHMEM put benchmark then ran its whole 40 ms in the
 * mutex) stays awake through its sleeps until one ends quiet (the
 * timeout) or a wake-up finds nothing:
 * over tcp a fetch-add every 20 ms to a computing target took 336 us
 * instead of 280 with a barrier at every wake-up (on a virtual machine,
 * where the barrier's interrupt costs 50 us), and the computing
 * application does not call in anyway.
 */
#define _GNU_SOURCE   /* ppoll */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>
#include "axon_fi.h"

#define AXON_FI_PROGRESS_MIN_NS  20000L     /* 20 us: right after activity */
#define AXON_FI_PROGRESS_MAX_NS  1000000L   /* 1 ms: idle (about 1000 wakeups a second) */
#define AXON_FI_PROGRESS_SLACK_NS 2000UL    /* how late the kernel may end a nap */
#define AXON_FI_PROGRESS_SLEEP_NS 100000000L /* 100 ms: the longest sleep */
#define AXON_FI_PROGRESS_BACKOFF_MAX 64     /* naps before sleeping again, at most */
#define AXON_FI_PROGRESS_SERVING 2          /* wake-ups in a row with work: a service */

/* The endpoints no call of the application progressed since the last look (lock held). */
static unsigned axon_fi_progress_neglected(axon_fi_eps_t *all)
{
    unsigned events = 0;
    axon_fi_ep_t *ep;
    size_t i;

    for (i = 0; i < all->count; ++i) {
        ep = all->eps[i];
        if (ep->app_passes != ep->thread_seen) {
            ep->thread_seen = ep->app_passes;
            continue;
        }
        events += axon_fi_ep_progress(ep);
    }
    return events;
}

/* The worker's descriptor, asked once per endpoint; -1 if it can only be polled. */
static int axon_fi_progress_ep_fd(axon_fi_ep_t *ep)
{
    int fd;

    if (ep->wake_state == 0) {
        ep->wake_state = (axon_worker_get_efd(ep->worker, &fd) == AXON_OK) ? 1 : -1;
        ep->wake_fd    = (ep->wake_state > 0) ? fd : -1;
    }
    return ep->wake_fd;
}

/*
 * Arm every endpoint's worker for a sleep (lock held): fds[1..] get their
 * descriptors; 0 if one cannot be armed (work is due, or it can only be
 * polled): nap then.
 */
static int axon_fi_progress_arm(axon_fi_domain_t *domain, struct pollfd *fds, nfds_t *nfds_p)
{
    const axon_fi_eps_t *all = &domain->all_eps;
    axon_fi_ep_t        *ep;
    size_t               i;
    int                  fd;

    *nfds_p = 1;
    if (all->count > AXON_FI_EP_CNT) {
        return 0;   /* more endpoints than fds has room for: nap */
    }
    for (i = 0; i < all->count; ++i) {
        ep = all->eps[i];
        fd = axon_fi_progress_ep_fd(ep);
        if ((fd < 0) || (ep->events_nheld > 0) || (axon_worker_arm(ep->worker) != AXON_OK)) {
            return 0;
        }
        fds[*nfds_p].fd      = fd;
        fds[*nfds_p].events  = POLLIN;
        fds[*nfds_p].revents = 0;
        ++*nfds_p;
    }
    domain->progress_asleep = 1;
    return 1;
}

/* Doubled up to max, or first from 0: the naps' and the back-off's growth. */
static long axon_fi_progress_grow(long value, long first, long max)
{
    return (value == 0) ? first : (value * 2 > max) ? max : value * 2;
}

static void axon_fi_progress_nap(long ns)
{
    struct timespec nap = {0, ns};

    nanosleep(&nap, NULL);
}

/* Sleep on the armed descriptors; 1 if woken by one of them or a kick, 0 at the timeout. */
static int axon_fi_progress_sleep(axon_fi_domain_t *domain, struct pollfd *fds, nfds_t nfds)
{
    struct timespec timeout = {AXON_FI_PROGRESS_SLEEP_NS / 1000000000L,
                               AXON_FI_PROGRESS_SLEEP_NS % 1000000000L};
    uint64_t        count;
    int             n;

    fds[0].fd      = domain->progress_kick_fd;
    fds[0].events  = POLLIN;
    fds[0].revents = 0;
    n = ppoll(fds, nfds, &timeout, NULL);
    if ((n > 0) && (fds[0].revents & POLLIN)) {
        (void)!read(domain->progress_kick_fd, &count, sizeof(count));
    }
    return n > 0;
}

static void *axon_fi_progress_main(void *arg)
{
    axon_fi_domain_t *domain = arg;
    axon_fi_dlock_t  *lock = &domain->lock;
    struct pollfd     fds[AXON_FI_EP_CNT + 1];
    nfds_t            nfds = 0;
    long              nap = AXON_FI_PROGRESS_MIN_NS;
    unsigned          events;
    long              backoff = 0, backoff_span = 0;
    int               stop = 0, busy = 0, armed = 0, woken = 0;
    int               lowered, served = 0;

    /* Naps as asked: the default slack (50 us) would make the shortest one 70 us. */
    (void)prctl(PR_SET_TIMERSLACK, AXON_FI_PROGRESS_SLACK_NS, 0, 0, 0);
    axon_fi_dlock_internal_wake(lock);
    while (!stop) {
        events = 0;
        armed  = 0;
        if (!busy) {
            busy = !axon_fi_dlock_internal_trylock(lock);
        } else {
            /* Found busy last time: an application polling one endpoint nonstop holds the
             * lock most of the time, and the others would wait for a lucky try. */
            axon_fi_dlock_internal_lock(lock);
            busy = 0;
        }
        if (busy) {
            axon_fi_progress_nap(nap);
            continue;
        }
        domain->progress_asleep = 0;
        stop = domain->progress_stop;
        if (!stop) {
            events = axon_fi_progress_neglected(&domain->all_eps);
            if ((events == 0) && (nap >= AXON_FI_PROGRESS_MAX_NS) && (backoff == 0)) {
                armed = axon_fi_progress_arm(domain, fds, &nfds);
            }
        }
        axon_fi_dlock_internal_unlock(lock);
        if (woken) {
            /* The last sleep's wake-up: for the thread's own endpoints, or not. */
            backoff_span = (events > 0) ? 0 :
                           axon_fi_progress_grow(backoff_span, 1, AXON_FI_PROGRESS_BACKOFF_MAX);
            backoff = backoff_span;
            served  = (events > 0) ? served + 1 : 0;
            woken   = 0;
        }
        if (stop) {
            break;
        }
        if (events > 0) {
            nap = AXON_FI_PROGRESS_MIN_NS;
            continue;
        }
        if (armed) {
            /* Asleep, the thread leaves the application the lock's fast way, unless it
             * is serving endpoints the application does not (a target computing while
             * peers' requests come): each wake-up would cost a barrier then. */
            lowered = (served < AXON_FI_PROGRESS_SERVING);
            if (lowered) {
                axon_fi_dlock_internal_sleep(lock);
            }
            woken   = axon_fi_progress_sleep(domain, fds, nfds);
            served  = woken ? served : 0;   /* a quiet sleep ends the service */
            if (lowered) {
                axon_fi_dlock_internal_wake(lock);
            }
            continue;
        }
        axon_fi_progress_nap(nap);
        if (backoff > 0) {
            --backoff;
        }
        nap = axon_fi_progress_grow(nap, AXON_FI_PROGRESS_MIN_NS, AXON_FI_PROGRESS_MAX_NS);
    }
    axon_fi_dlock_internal_sleep(lock);
    return NULL;
}

void axon_fi_progress_kick(axon_fi_domain_t *domain)
{
    uint64_t one = 1;

    domain->progress_asleep = 0;
    (void)!write(domain->progress_kick_fd, &one, sizeof(one));
}

int axon_fi_progress_start(axon_fi_domain_t *domain)
{
    int ret;

    domain->progress_kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (domain->progress_kick_fd < 0) {
        AXON_FI_WARN(FI_LOG_DOMAIN, "FI_PROGRESS_AUTO: no eventfd for the progress thread: %s",
                     strerror(errno));
        return -FI_EAGAIN;
    }
    ret = pthread_create(&domain->progress_thread, NULL, axon_fi_progress_main, domain);
    if (ret != 0) {
        AXON_FI_WARN(FI_LOG_DOMAIN, "FI_PROGRESS_AUTO: the progress thread did not start: %s",
                     strerror(ret));
        close(domain->progress_kick_fd);
        domain->progress_kick_fd = -1;
        return -FI_EAGAIN;
    }
    (void)pthread_setname_np(domain->progress_thread, "axon-fi-prog");   /* for top -H */
    domain->progress_running = 1;
    return 0;
}

void axon_fi_progress_stop(axon_fi_domain_t *domain)
{
    if (!domain->progress_running) {
        return;
    }
    axon_fi_lock(domain);
    domain->progress_stop = 1;
    axon_fi_progress_kick(domain);
    axon_fi_unlock(domain);
    pthread_join(domain->progress_thread, NULL);
    close(domain->progress_kick_fd);
    domain->progress_kick_fd = -1;
    domain->progress_running = 0;
}
