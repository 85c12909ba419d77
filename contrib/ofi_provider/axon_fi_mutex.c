/* The domain lock's contended halves (axon_fi_mutex.h). */
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "axon_fi_mutex.h"

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
