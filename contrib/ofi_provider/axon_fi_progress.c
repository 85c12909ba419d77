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
 * Axon's API has no wait descriptor, so the thread sleeps instead: after a
 * pass that handled nothing it sleeps AXON_FI_PROGRESS_MIN_NS, doubling up
 * to AXON_FI_PROGRESS_MAX_NS while nothing happens, back to the minimum
 * after any event. It tries the lock; found busy, it waits for it after the
 * next nap. So an endpoint is served two naps (2 ms) at most after the
 * application last passed over it, and the thread wakes no more often for
 * an application that keeps calling.
 */
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include "axon_fi.h"

#define AXON_FI_PROGRESS_MIN_NS  20000L     /* 20 us: right after activity */
#define AXON_FI_PROGRESS_MAX_NS  1000000L   /* 1 ms: idle (about 1000 wakeups a second) */
#define AXON_FI_PROGRESS_SLACK_NS 2000UL    /* how late the kernel may end a nap */

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

static void *axon_fi_progress_main(void *arg)
{
    axon_fi_domain_t *domain = arg;
    struct timespec nap = {0, AXON_FI_PROGRESS_MIN_NS};
    unsigned events;
    int stop = 0, busy = 0;

    /* Naps as asked: the default slack (50 us) would make the shortest one 70 us. */
    (void)prctl(PR_SET_TIMERSLACK, AXON_FI_PROGRESS_SLACK_NS, 0, 0, 0);
    while (!stop) {
        events = 0;
        if (!busy) {
            busy = (pthread_mutex_trylock(&domain->lock) != 0);
        } else {
            /* Found busy last time: an application polling one endpoint nonstop holds the
             * lock most of the time, and the others would wait for a lucky try. */
            pthread_mutex_lock(&domain->lock);
            busy = 0;
        }
        if (busy) {
            nanosleep(&nap, NULL);
            continue;
        }
        stop = domain->progress_stop;
        if (!stop) {
            events = axon_fi_progress_neglected(&domain->all_eps);
        }
        pthread_mutex_unlock(&domain->lock);
        if (events > 0) {
            nap.tv_nsec = AXON_FI_PROGRESS_MIN_NS;
            continue;
        }
        nanosleep(&nap, NULL);
        nap.tv_nsec = (nap.tv_nsec * 2 > AXON_FI_PROGRESS_MAX_NS) ? AXON_FI_PROGRESS_MAX_NS :
                      nap.tv_nsec * 2;
    }
    return NULL;
}

int axon_fi_progress_start(axon_fi_domain_t *domain)
{
    int ret = pthread_create(&domain->progress_thread, NULL, axon_fi_progress_main, domain);

    if (ret != 0) {
        AXON_FI_WARN(FI_LOG_DOMAIN, "FI_PROGRESS_AUTO: the progress thread did not start: %s",
                     strerror(ret));
        return -FI_EAGAIN;
    }
    domain->progress_running = 1;
    return 0;
}

void axon_fi_progress_stop(axon_fi_domain_t *domain)
{
    if (!domain->progress_running) {
        return;
    }
    pthread_mutex_lock(&domain->lock);
    domain->progress_stop = 1;
    pthread_mutex_unlock(&domain->lock);
    pthread_join(domain->progress_thread, NULL);
    domain->progress_running = 0;
}
