/*
 * Idle policy of a polling loop: spin while work may come at any moment,
 * give the core away once it clearly will not. A process that busy-polls
 * while the peer it waits for has no core (more runnable threads than
 * cores: 4 ranks on 2 cores) holds that peer off for a whole time slice;
 * every handshake (rendezvous RTS/ATS, sync acks) then costs milliseconds.
 *
 * The caller reports each poll's events; after AXON_IDLE_SPIN_POLLS empty
 * polls in a row the slow path looks at the clock and yields the core when
 * the host is oversubscribed or the idle stretch has lasted spin_time.
 *
 * The stretch belongs to the polling thread, not to what it polls: a thread
 * that progresses two workers in turn, one of them busy (a SHMEM PE's
 * context and target endpoints), is not idle, though one worker never finds
 * anything. Per worker, that worker's empty polls made the thread yield on
 * every pass (a fetch-add answered in 0.8-1.0 us instead of 0.43).
 */
#ifndef AXON_IDLE_H
#define AXON_IDLE_H

/* Empty polls before the slow path runs at all: keeps it off the latency path. */
#define AXON_IDLE_SPIN_POLLS 64

typedef enum {
    AXON_IDLE_YIELD_AUTO   = 0,  /* oversubscribed, or idle for spin_time */
    AXON_IDLE_YIELD_ALWAYS = 1,  /* after the short spin, every time */
    AXON_IDLE_YIELD_NEVER  = 2,  /* pure busy-polling */
} axon_idle_yield_t;

extern const char *const axon_idle_yield_names[];

/* The policy, per worker (its context's AXON_YIELD and AXON_YIELD_SPIN). */
typedef struct axon_idle {
    unsigned mode;        /* axon_idle_yield_t */
    double   spin_time;   /* seconds of idleness before yielding (auto) */
} axon_idle_t;

/* The calling thread's idle stretch, over everything it polls. */
typedef struct axon_idle_stretch {
    unsigned polls;       /* empty polls in a row */
    double   since;       /* when the stretch passed the short spin */
} axon_idle_stretch_t;

extern __thread axon_idle_stretch_t axon_idle_stretch;

void axon_idle_init(axon_idle_t *idle, unsigned mode, double spin_time);

/* Slow path of axon_idle_poll: yields the core or not; says which (idle.c). */
int axon_idle_wait(const axon_idle_t *idle);

/* One poll of the calling thread, under idle's policy, found events (work done) or nothing. */
static inline void axon_idle_poll(const axon_idle_t *idle, unsigned events)
{
    axon_idle_stretch_t *stretch = &axon_idle_stretch;

    if (events != 0) {
        stretch->polls = 0;
    } else if (++stretch->polls >= AXON_IDLE_SPIN_POLLS) {
        axon_idle_wait(idle);
    }
}

/* Are more threads runnable on the host than it has cores? Cached (idle.c). */
int axon_idle_oversubscribed(double now);

#endif
