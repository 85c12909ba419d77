/* Idle policy of polling loops: when to give the core away (idle.h). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>
#include "idle.h"
#include "sys.h"

const char *const axon_idle_yield_names[] = {"auto", "always", "never", NULL};

/*
 * How often the host's load is read again. /proc/loadavg costs a few
 * microseconds; it is read only by pollers that have been idle anyway.
 */
#define AXON_IDLE_LOAD_INTERVAL 0.05

__thread unsigned long axon_idle_thread_events;

void axon_idle_init(axon_idle_t *idle, unsigned mode, double spin_time)
{
    idle->polls     = 0;
    idle->mode      = mode;
    idle->spin_time = spin_time;
    idle->since     = 0;
    idle->seen      = 0;
}

/* Threads runnable now (the reader included), from /proc/loadavg's "R/T" field; -1 if unknown. */
static long axon_idle_runnable(void)
{
    char buf[128];
    long running = -1;
    ssize_t n;
    int fd;

    fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) {
        return -1;
    }
    buf[n] = '\0';
    if (sscanf(buf, "%*s %*s %*s %ld/", &running) != 1) {
        return -1;
    }
    return running;
}

/*
 * Shared by every worker of the process; the races between threads that
 * refresh it at once are harmless (each writes a fresh answer).
 */
static _Atomic double   axon_idle_next_check;
static _Atomic int      axon_idle_over;
static _Atomic long     axon_idle_cores;
static _Atomic unsigned axon_idle_host_procs;

int axon_idle_oversubscribed(double now)
{
    long cores, running;

    if (now >= atomic_load_explicit(&axon_idle_next_check, memory_order_relaxed)) {
        atomic_store_explicit(&axon_idle_next_check, now + AXON_IDLE_LOAD_INTERVAL,
                              memory_order_relaxed);
        cores   = sysconf(_SC_NPROCESSORS_ONLN);
        running = axon_idle_runnable();
        atomic_store_explicit(&axon_idle_cores, cores, memory_order_relaxed);
        atomic_store_explicit(&axon_idle_over, (cores > 0) && (running > cores),
                              memory_order_relaxed);
    }
    return atomic_load_explicit(&axon_idle_over, memory_order_relaxed);
}

void axon_idle_set_host_procs(unsigned procs)
{
    atomic_store_explicit(&axon_idle_host_procs, procs, memory_order_relaxed);
}

int axon_idle_crowded(double now)
{
    /* The load first: it also refreshes the count of cores. */
    return axon_idle_oversubscribed(now) &&
           ((long)atomic_load_explicit(&axon_idle_host_procs, memory_order_relaxed) >
            atomic_load_explicit(&axon_idle_cores, memory_order_relaxed));
}

int axon_idle_wait(axon_idle_t *idle)
{
    double now;

    if (idle->mode == AXON_IDLE_YIELD_NEVER) {
        return 0;
    }
    if (axon_idle_thread_events != idle->seen) {
        /* Another worker of this thread found work since the last look: not idle. */
        idle->seen  = axon_idle_thread_events;
        idle->polls = 0;
        return 0;
    }
    if ((idle->mode == AXON_IDLE_YIELD_AUTO) &&
        ((idle->polls == AXON_IDLE_SPIN_POLLS) || (idle->since >= 0))) {
        if (idle->polls == AXON_IDLE_SPIN_POLLS) {
            now = idle->since = axon_sys_time_sec();   /* a new idle stretch */
        } else if ((idle->polls % AXON_IDLE_CLOCK_POLLS) != 0) {
            return 0;   /* still spinning: the clock is read every AXON_IDLE_CLOCK_POLLS */
        } else {
            now = axon_sys_time_sec();
        }
        if (!axon_idle_oversubscribed(now) && (now - idle->since < idle->spin_time)) {
            return 0;
        }
        idle->since = -1;   /* idle for good: every empty poll yields until work comes */
    }
    sched_yield();
    return 1;
}
