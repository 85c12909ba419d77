/*
 * The domain's lock: a three-state futex mutex (0 free, 1 held, 2 held with
 * waiters; U. Drepper, "Futexes Are Tricky"). Taking and giving back a free
 * lock is one locked instruction each; glibc's pthread_mutex_t spent ~60
 * instructions a pair on it, a tenth of a SHMEM put to mapped memory, which
 * takes the lock once. Waiters sleep in the kernel (never spin): on a host
 * with as many processes as cores, the holder may be the one descheduled.
 */
#ifndef AXON_FI_MUTEX_H
#define AXON_FI_MUTEX_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct axon_fi_mutex {
    _Atomic uint32_t state;
} axon_fi_mutex_t;

/* The contended halves: wait in the kernel, wake one waiter. */
void axon_fi_mutex_lock_wait(axon_fi_mutex_t *mutex);
void axon_fi_mutex_wake(axon_fi_mutex_t *mutex);

/* 1 if taken, 0 if held by someone. */
static inline int axon_fi_mutex_trylock(axon_fi_mutex_t *mutex)
{
    uint32_t expected = 0;

    return atomic_compare_exchange_strong_explicit(&mutex->state, &expected, 1,
                                                   memory_order_acquire, memory_order_relaxed);
}

static inline void axon_fi_mutex_lock(axon_fi_mutex_t *mutex)
{
    if (__builtin_expect(!axon_fi_mutex_trylock(mutex), 0)) {
        axon_fi_mutex_lock_wait(mutex);
    }
}

static inline void axon_fi_mutex_unlock(axon_fi_mutex_t *mutex)
{
    /* 1 -> 0: nobody waits. 2 -> 1: someone may: free it and wake one. */
    if (__builtin_expect(atomic_fetch_sub_explicit(&mutex->state, 1, memory_order_release) != 1,
                         0)) {
        axon_fi_mutex_wake(mutex);
    }
}

#endif
