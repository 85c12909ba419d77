/* The domain lock's contended halves and its internal side (axon_fi_mutex.h). */
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "axon_fi_mutex.h"

/* An internal thread waiting for the application to leave: yields, then naps doubling. */
#define AXON_FI_DLOCK_YIELDS       64
#define AXON_FI_DLOCK_NAP_MIN_NS   10000L     /* 10 us */
#define AXON_FI_DLOCK_NAP_MAX_NS   1000000L   /* 1 ms */

static void axon_fi_futex(axon_fi_mutex_t *mutex, int op, uint32_t value)
{
    (void)syscall(SYS_futex, &mutex->state, op | FUTEX_PRIVATE_FLAG, value, NULL, NULL, 0);
}

void axon_fi_mutex_lock_wait(axon_fi_mutex_t *mutex)
{
    /* Mark it contended (2); whoever held it wakes us at its unlock. Taking it we leave
     * it at 2, which costs a needless wake at most: others may still be waiting. */
    while (atomic_exchange_explicit(&mutex->state, 2, memory_order_acquire) != 0) {
        axon_fi_futex(mutex, FUTEX_WAIT, 2);   /* returns at once if it is no longer 2 */
    }
}

void axon_fi_mutex_wake(axon_fi_mutex_t *mutex)
{
    atomic_store_explicit(&mutex->state, 0, memory_order_release);
    axon_fi_futex(mutex, FUTEX_WAKE, 1);
}

/* membarrier(2) with the private expedited command, registered once per process: 1 if so. */
static int axon_fi_membarrier_ok;
static pthread_once_t axon_fi_membarrier_once = PTHREAD_ONCE_INIT;

static void axon_fi_membarrier_register(void)
{
#ifdef SYS_membarrier
    long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);

    axon_fi_membarrier_ok = (cmds > 0) && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
                            (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
                                     0, 0) == 0);
#endif
}

void axon_fi_dlock_init(axon_fi_dlock_t *lock, int want_bias)
{
    atomic_init(&lock->mutex.state, 0);
    atomic_init(&lock->app_inside, 0);
    atomic_init(&lock->internal, 0);
    lock->biased   = 0;
    if (want_bias) {
        (void)pthread_once(&axon_fi_membarrier_once, axon_fi_membarrier_register);
        lock->biased = axon_fi_membarrier_ok;
    }
}

void axon_fi_dlock_internal_wake(axon_fi_dlock_t *lock)
{
    if (!lock->biased) {
        return;
    }
    atomic_fetch_add_explicit(&lock->internal, 1, memory_order_seq_cst);
#ifdef SYS_membarrier
    /* Registered at init, so it cannot fail but for a kernel bug: nothing to fall back to. */
    (void)syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
#endif
}

void axon_fi_dlock_internal_sleep(axon_fi_dlock_t *lock)
{
    if (lock->biased) {
        atomic_fetch_sub_explicit(&lock->internal, 1, memory_order_release);
    }
}

void axon_fi_dlock_wait_app(axon_fi_dlock_t *lock)
{
    struct timespec nap = {0, 0};
    unsigned tries = 0;

    /* An application inside the fast way leaves at the end of its call, soon; but it may
     * be the one descheduled, or in a call that waits on a peer. */
    while (atomic_load_explicit(&lock->app_inside, memory_order_acquire) != 0) {
        if (++tries < AXON_FI_DLOCK_YIELDS) {
            sched_yield();
            continue;
        }
        nap.tv_nsec = (nap.tv_nsec == 0) ? AXON_FI_DLOCK_NAP_MIN_NS :
                      (nap.tv_nsec * 2 > AXON_FI_DLOCK_NAP_MAX_NS) ? AXON_FI_DLOCK_NAP_MAX_NS :
                                                                    nap.tv_nsec * 2;
        nanosleep(&nap, NULL);
    }
}
