/* The provider's domain lock, called from the C++ tests (dlock_probe.h). */
#include <stdlib.h>
#include "dlock_probe.h"
#include "contrib/ofi_provider/axon_fi_mutex.h"

axon_test_dlock_t *axon_test_dlock_new(int want_bias)
{
    axon_fi_dlock_t *lock = malloc(sizeof(*lock));

    if (lock != NULL) {
        axon_fi_dlock_init(lock, want_bias);
    }
    return lock;
}

void axon_test_dlock_free(axon_test_dlock_t *lock)
{
    free(lock);
}

int axon_test_dlock_biased(const axon_test_dlock_t *lock)
{
    return lock->biased;
}

uint32_t axon_test_dlock_mutex_state(axon_test_dlock_t *lock)
{
    return atomic_load(&lock->mutex.state);
}

uint32_t axon_test_dlock_app_inside(axon_test_dlock_t *lock)
{
    return atomic_load(&lock->app_inside);
}

void axon_test_dlock_app_lock(axon_test_dlock_t *lock)
{
    axon_fi_dlock_app_lock(lock);
}

void axon_test_dlock_app_unlock(axon_test_dlock_t *lock)
{
    axon_fi_dlock_app_unlock(lock);
}

void axon_test_dlock_internal_wake(axon_test_dlock_t *lock)
{
    axon_fi_dlock_internal_wake(lock);
}

void axon_test_dlock_internal_sleep(axon_test_dlock_t *lock)
{
    axon_fi_dlock_internal_sleep(lock);
}

int axon_test_dlock_internal_trylock(axon_test_dlock_t *lock)
{
    return axon_fi_dlock_internal_trylock(lock);
}

void axon_test_dlock_internal_lock(axon_test_dlock_t *lock)
{
    axon_fi_dlock_internal_lock(lock);
}

void axon_test_dlock_internal_unlock(axon_test_dlock_t *lock)
{
    axon_fi_dlock_internal_unlock(lock);
}
