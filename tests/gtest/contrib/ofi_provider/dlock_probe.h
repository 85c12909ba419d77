/*
 * The provider's domain lock (contrib/ofi_provider/axon_fi_mutex.h) for the
 * C++ tests, which cannot include its C11 atomics: each call is the lock's.
 */
#ifndef AXON_TEST_DLOCK_PROBE_H
#define AXON_TEST_DLOCK_PROBE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct axon_fi_dlock axon_test_dlock_t;

axon_test_dlock_t *axon_test_dlock_new(int want_bias);   /* NULL without memory */
void     axon_test_dlock_free(axon_test_dlock_t *lock);
int      axon_test_dlock_biased(const axon_test_dlock_t *lock);
uint32_t axon_test_dlock_mutex_state(axon_test_dlock_t *lock);
uint32_t axon_test_dlock_app_inside(axon_test_dlock_t *lock);

void axon_test_dlock_app_lock(axon_test_dlock_t *lock);
void axon_test_dlock_app_unlock(axon_test_dlock_t *lock);
void axon_test_dlock_internal_wake(axon_test_dlock_t *lock);
void axon_test_dlock_internal_sleep(axon_test_dlock_t *lock);
int  axon_test_dlock_internal_trylock(axon_test_dlock_t *lock);
void axon_test_dlock_internal_lock(axon_test_dlock_t *lock);
void axon_test_dlock_internal_unlock(axon_test_dlock_t *lock);

#ifdef __cplusplus
}
#endif

#endif
