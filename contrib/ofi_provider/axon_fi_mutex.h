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

/*
 * The domain's lock, biased to the application. A domain the application
 * serializes (FI_THREAD_DOMAIN) with FI_PROGRESS_AUTO is shared with one
 * other thread, the provider's progress thread, which sleeps whenever
 * there is nothing for it. While no internal thread is awake the
 * application enters with a plain store and a load, no locked instruction:
 * a SHMEM put to mapped memory, which takes the lock once, took 41-51 ns
 * with the mutex's two locked instructions and 29-34 ns without (UCX's:
 * 33-50). An internal thread leaving its sleep raises `internal` and runs
 * membarrier(2): after it, the application either sees `internal` and takes
 * the mutex, or was inside already and is seen there (`app_inside`); the
 * thread takes the mutex and waits for it to leave. The barrier costs the
 * thread 1 us, and 50 us when an application thread is running (an
 * interrupt to its core, slow on a virtual machine), once per wake-up: the
 * thread then naps, awake, until it sleeps again and lowers `internal`.
 * Without membarrier (before Linux 4.14, or filtered) or in a domain whose
 * application threads may overlap, every side takes the mutex.
 */
typedef struct axon_fi_dlock {
    axon_fi_mutex_t  mutex;
    _Atomic uint32_t app_inside;  /* the application holds it the fast way (its own writes) */
    _Atomic uint32_t internal;    /* internal threads awake: the application takes the mutex */
    int              biased;      /* fixed at init */
} axon_fi_dlock_t;

/* want_bias: the application serializes its calls; biased only where membarrier(2) is too. */
void axon_fi_dlock_init(axon_fi_dlock_t *lock, int want_bias);

/* The internal thread's side: awake before its first lock after a sleep, asleep after its
 * last unlock before one. */
void axon_fi_dlock_internal_wake(axon_fi_dlock_t *lock);
void axon_fi_dlock_internal_sleep(axon_fi_dlock_t *lock);
/* Wait until an application inside the fast way has left (the mutex held): yielding, then
 * napping up to a millisecond, as a mutex's waiter would sleep. */
void axon_fi_dlock_wait_app(axon_fi_dlock_t *lock);

/* 1 if taken; 0 if held, by the mutex or by an application inside the fast way. */
static inline int axon_fi_dlock_internal_trylock(axon_fi_dlock_t *lock)
{
    if (!axon_fi_mutex_trylock(&lock->mutex)) {
        return 0;
    }
    if (atomic_load_explicit(&lock->app_inside, memory_order_acquire) != 0) {
        axon_fi_mutex_unlock(&lock->mutex);
        return 0;
    }
    return 1;
}

static inline void axon_fi_dlock_internal_lock(axon_fi_dlock_t *lock)
{
    axon_fi_mutex_lock(&lock->mutex);
    axon_fi_dlock_wait_app(lock);
}

static inline void axon_fi_dlock_internal_unlock(axon_fi_dlock_t *lock)
{
    axon_fi_mutex_unlock(&lock->mutex);
}

/* The application's side. */
static inline void axon_fi_dlock_app_lock(axon_fi_dlock_t *lock)
{
    if (lock->biased) {
        atomic_store_explicit(&lock->app_inside, 1, memory_order_relaxed);
        /* Only the compiler is held back: the internal side's membarrier orders the CPU. */
        atomic_signal_fence(memory_order_seq_cst);
        if (__builtin_expect(atomic_load_explicit(&lock->internal, memory_order_acquire) == 0,
                             1)) {
            return;
        }
        atomic_store_explicit(&lock->app_inside, 0, memory_order_release);
    }
    axon_fi_mutex_lock(&lock->mutex);
}

static inline void axon_fi_dlock_app_unlock(axon_fi_dlock_t *lock)
{
    /* Only the application writes app_inside, and a hold through the mutex left it 0. */
    if (atomic_load_explicit(&lock->app_inside, memory_order_relaxed) != 0) {
        atomic_store_explicit(&lock->app_inside, 0, memory_order_release);
        return;
    }
    axon_fi_mutex_unlock(&lock->mutex);
}

#endif
