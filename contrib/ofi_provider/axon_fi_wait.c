/*
 * Waiting. Axon's API has no wait object (no file descriptor that becomes
 * readable when a worker has work), so a blocking read progresses the
 * workers until something completes, yielding the core when nothing
 * happened. Wait objects that promise a descriptor or a wait set are
 * refused with a log line naming them.
 */
#include <time.h>
#include "axon_fi.h"

static const char *axon_fi_wait_obj_names[] = {
    [FI_WAIT_NONE] = "FI_WAIT_NONE",   [FI_WAIT_UNSPEC] = "FI_WAIT_UNSPEC",
    [FI_WAIT_SET] = "FI_WAIT_SET",     [FI_WAIT_FD] = "FI_WAIT_FD",
    [FI_WAIT_MUTEX_COND] = "FI_WAIT_MUTEX_COND", [FI_WAIT_YIELD] = "FI_WAIT_YIELD",
    [FI_WAIT_POLLFD] = "FI_WAIT_POLLFD",
};

int axon_fi_wait_obj_check(enum fi_wait_obj wait_obj, const char *what)
{
    const size_t n = sizeof(axon_fi_wait_obj_names) / sizeof(axon_fi_wait_obj_names[0]);

    switch (wait_obj) {
    case FI_WAIT_NONE:
    case FI_WAIT_UNSPEC:
    case FI_WAIT_YIELD:
        return 0;
    default:
        AXON_FI_WARN(FI_LOG_CORE, "%s wait object %d (%s) not supported: FI_WAIT_NONE, "
                     "FI_WAIT_UNSPEC and FI_WAIT_YIELD only (Axon has no wait descriptor)", what,
                     (int)wait_obj, ((unsigned)wait_obj < n) ? axon_fi_wait_obj_names[wait_obj] :
                     "unknown");
        return -FI_ENOSYS;
    }
}

int axon_fi_expired(const struct timespec *start, int timeout_ms)
{
    struct timespec now;

    if (timeout_ms < 0) {
        return 0;
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - start->tv_sec) * 1000 + (now.tv_nsec - start->tv_nsec) / 1000000 >=
           timeout_ms;
}
