/*
 * FI_PROGRESS_AUTO data progress: one thread per domain that progresses
 * every endpoint's worker when the application is not inside the provider
 * (it only tries the domain's lock, which an auto-progress domain always
 * takes), so a target that never calls libfabric still completes the
 * operations that need its worker. Axon's API has no wait descriptor, so
 * an idle thread sleeps instead: after a pass that handled nothing it
 * sleeps AXON_FI_PROGRESS_MIN_NS, doubling up to AXON_FI_PROGRESS_MAX_NS
 * while nothing happens, back to the minimum after any event.
 */
#include <string.h>
#include <time.h>
#include "axon_fi.h"

#define AXON_FI_PROGRESS_MIN_NS  20000L     /* 20 us: right after activity */
#define AXON_FI_PROGRESS_MAX_NS  1000000L   /* 1 ms: idle (about 1000 wakeups a second) */

static void *axon_fi_progress_main(void *arg)
{
    axon_fi_domain_t *domain = arg;
    struct timespec nap = {0, AXON_FI_PROGRESS_MIN_NS};
    unsigned events;
    int stop = 0;

    while (!stop) {
        events = 0;
        if (pthread_mutex_trylock(&domain->lock) == 0) {
            stop = domain->progress_stop;
            if (!stop) {
                events = axon_fi_eps_progress(&domain->all_eps);
            }
            pthread_mutex_unlock(&domain->lock);
        }
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
