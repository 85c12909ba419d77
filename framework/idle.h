/*
 * Idle policy of a polling loop: spin while work may come at any moment,
 * give the core away once it clearly will not. A process that busy-polls
 * while the peer it waits for has no core (more runnable threads than
 * cores: 4 ranks on 2 cores) holds that peer off for a whole time slice;
 * every handshake (rendezvous RTS/ATS, sync acks) then costs milliseconds.
 *
 * The caller reports each poll's events; after AXON_IDLE_SPIN_POLLS empty
 * polls in a row the slow path looks at the clock (every
 * AXON_IDLE_CLOCK_POLLS-th poll) and, once the host is oversubscribed or the
 * idle stretch has lasted spin_time, yields the core on every empty poll
 * until one finds work.
 *
 * Idleness is the polling thread's, not a worker's: a thread that
 * progresses two workers in turn, one of them busy (a SHMEM PE's context and
 * target endpoints), is not idle, though one worker never finds anything.
 * Counted per worker alone, that worker's empty polls made the thread yield
 * on every pass (a fetch-add answered in 0.8-1.0 us instead of 0.43). So a
 * poll that finds events also counts in the thread's event count, and a
 * worker's slow path first asks whether the count moved since its last look
 * (another worker of the thread found work: not idle, spin again). The
 * empty poll, the loop latency waits in, touches no thread-local storage.
 */
#ifndef AXON_IDLE_H
#define AXON_IDLE_H

/* Empty polls before the slow path runs at all: keeps it off the latency path. */
#define AXON_IDLE_SPIN_POLLS 64
/* Past them, while the stretch is short of spin_time, the clock (and the host's
 * load) is looked at every this many empty polls: a read costs tens of ns, and a
 * waiting ping-pong passes the first 64 polls within its round trip. */
#define AXON_IDLE_CLOCK_POLLS 16

typedef enum {
    AXON_IDLE_YIELD_AUTO   = 0,  /* oversubscribed, or idle for spin_time */
    AXON_IDLE_YIELD_ALWAYS = 1,  /* after the short spin, every time */
    AXON_IDLE_YIELD_NEVER  = 2,  /* pure busy-polling */
} axon_idle_yield_t;

extern const char *const axon_idle_yield_names[];

typedef struct axon_idle {
    unsigned      polls;       /* empty polls in a row */
    unsigned      mode;        /* axon_idle_yield_t */
    double        spin_time;   /* seconds of idleness before yielding (auto) */
    double        since;       /* when the current idle stretch passed the short spin;
                                * -1 once it yields on every empty poll */
    unsigned long seen;        /* axon_idle_thread_events at the last slow path */
} axon_idle_t;

/* Polls of the calling thread that found events, over every worker it progresses. */
extern __thread unsigned long axon_idle_thread_events;

void axon_idle_init(axon_idle_t *idle, unsigned mode, double spin_time);

/* Slow path of axon_idle_poll: yields the core or not; says which (idle.c). */
int axon_idle_wait(axon_idle_t *idle);

/* One poll found events (work done) or nothing; 1 if it yielded the core. */
static inline int axon_idle_poll(axon_idle_t *idle, unsigned events)
{
    if (events != 0) {
        idle->polls = 0;
        idle->seen  = ++axon_idle_thread_events;   /* its own work is no news to it */
    } else if (++idle->polls >= AXON_IDLE_SPIN_POLLS) {
        return axon_idle_wait(idle);
    }
    return 0;
}

/* Are more threads runnable on the host than it has cores? Cached (idle.c). */
int axon_idle_oversubscribed(double now);

/*
 * Processes of Axon on this host, as a transport that can tell counts them
 * (shm, from its rings in /dev/shm); 0 while none has.
 */
void axon_idle_set_host_procs(unsigned procs);

/*
 * Do Axon's own processes outnumber the cores, and are more threads than
 * cores runnable right now? Then a process cannot count on its peer being
 * on a core while it waits for it. Runnable threads alone do not say so:
 * two ranks beside low-priority CPU hogs have a core each whenever they want.
 */
int axon_idle_crowded(double now);

#endif
