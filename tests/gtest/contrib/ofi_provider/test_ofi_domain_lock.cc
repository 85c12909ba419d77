/*
 * The provider's domain lock, biased to the application
 * (contrib/ofi_provider/axon_fi_mutex.h): while the internal thread sleeps
 * the application holds it without the mutex; once the thread is awake
 * everyone takes the mutex; and an application thread and an internal thread
 * that keeps waking and sleeping are never inside at once. (The CPU may
 * still make the application's store visible after its load; that this is
 * harmless is membarrier's promise, which a race would show too rarely to
 * test: what fails here is the protocol's logic, when broken.)
 */
#include <gtest/gtest.h>

#include <atomic>
#include <iostream>
#include <memory>
#include <thread>

#include "dlock_probe.h"
#include "harness.h"

namespace {

/* A lock, freed at the end of the test. */
using Dlock = std::unique_ptr<axon_test_dlock_t, decltype(&axon_test_dlock_free)>;

Dlock new_lock(int want_bias)
{
    return Dlock(axon_test_dlock_new(want_bias), axon_test_dlock_free);
}

TEST(FiDomainLock, ApplicationSkipsTheMutexOnlyWhileNoThreadIsAwake)
{
    Dlock l = new_lock(1);
    axon_test_dlock_t *lock = l.get();
    ASSERT_NE(nullptr, lock);
    if (!axon_test_dlock_biased(lock)) {
        /* membarrier(2) is missing before Linux 4.14 and may be filtered (seccomp) */
        GTEST_SKIP() << "no membarrier(2) here: the lock is a plain mutex";
    }
    axon_test_dlock_app_lock(lock);
    EXPECT_EQ(0u, axon_test_dlock_mutex_state(lock)) << "took the mutex with no thread awake";
    EXPECT_EQ(1u, axon_test_dlock_app_inside(lock));
    axon_test_dlock_app_unlock(lock);
    EXPECT_EQ(0u, axon_test_dlock_app_inside(lock));

    axon_test_dlock_internal_wake(lock);
    axon_test_dlock_app_lock(lock);
    EXPECT_EQ(1u, axon_test_dlock_mutex_state(lock)) << "skipped the mutex with a thread awake";
    EXPECT_EQ(0u, axon_test_dlock_app_inside(lock));
    EXPECT_FALSE(axon_test_dlock_internal_trylock(lock));
    axon_test_dlock_app_unlock(lock);
    EXPECT_TRUE(axon_test_dlock_internal_trylock(lock));
    axon_test_dlock_internal_unlock(lock);
    axon_test_dlock_internal_sleep(lock);

    axon_test_dlock_app_lock(lock);
    EXPECT_EQ(0u, axon_test_dlock_mutex_state(lock)) << "the thread's sleep did not give it back";
    axon_test_dlock_app_unlock(lock);
}

TEST(FiDomainLock, UnbiasedLockIsAMutexForEveryone)
{
    Dlock l = new_lock(0);
    axon_test_dlock_t *lock = l.get();
    ASSERT_NE(nullptr, lock);
    EXPECT_EQ(0, axon_test_dlock_biased(lock));
    axon_test_dlock_app_lock(lock);
    EXPECT_EQ(1u, axon_test_dlock_mutex_state(lock));
    EXPECT_FALSE(axon_test_dlock_internal_trylock(lock));
    axon_test_dlock_app_unlock(lock);
    EXPECT_TRUE(axon_test_dlock_internal_trylock(lock));
    axon_test_dlock_internal_unlock(lock);
}

/*
 * The application thread takes the lock kAppHolds times; the internal one
 * wakes, takes it a few times (trying first, as the progress thread does),
 * sleeps, and again, until the application is done. Inside, each reads a
 * plain counter, works a little and writes it back plus one, and marks
 * itself in: a lost increment or a second thread inside is an overlap.
 */
const int    kAppHolds = 200000;
const int    kMinWakes = 20;
const double kWaitSec  = 30;

struct Shared {
    axon_test_dlock_t   *lock = nullptr;
    uint64_t             count = 0;     /* plain: the lock is all that guards it */
    std::atomic<int>     inside{0};
    std::atomic<int>     overlaps{0};
    std::atomic<bool>    app_done{false};
};

void hold(Shared &s)
{
    if (s.inside.fetch_add(1) != 0) {
        s.overlaps.fetch_add(1);
    }
    uint64_t v = s.count;
    for (volatile int spin = 0; spin < 8; spin = spin + 1) {
    }
    s.count = v + 1;
    s.inside.fetch_sub(1);
}

TEST(FiDomainLock, ApplicationAndWakingThreadNeverOverlap)
{
    Dlock l = new_lock(1);
    ASSERT_NE(nullptr, l.get());
    Shared s;
    s.lock = l.get();
    uint64_t internal_holds = 0, app_holds = 0;
    std::atomic<int> wakes{0};
    std::thread internal([&] {
        while (!s.app_done.load()) {
            axon_test_dlock_internal_wake(s.lock);
            ++wakes;
            for (int i = 0; i < 4; ++i) {
                if (!axon_test_dlock_internal_trylock(s.lock)) {
                    axon_test_dlock_internal_lock(s.lock);
                }
                hold(s);
                ++internal_holds;
                axon_test_dlock_internal_unlock(s.lock);
            }
            axon_test_dlock_internal_sleep(s.lock);
            for (volatile int spin = 0; spin < 2000; spin = spin + 1) {
            }
        }
    });
    /* At least kAppHolds, and on until the other thread has woken kMinWakes times (on a
     * loaded host, or under a sanitizer, it may not run at all for a while). */
    double deadline = axon_test_time() + kWaitSec;
    while (((app_holds < (uint64_t)kAppHolds) || (wakes.load() < kMinWakes)) &&
           ((app_holds % 1024) || (axon_test_time() < deadline))) {
        axon_test_dlock_app_lock(s.lock);
        hold(s);
        axon_test_dlock_app_unlock(s.lock);
        ++app_holds;
    }
    s.app_done = true;
    internal.join();
    EXPECT_EQ(0, s.overlaps.load());
    EXPECT_EQ(app_holds + internal_holds, s.count);
    EXPECT_GE(wakes.load(), kMinWakes) << "the internal thread hardly ran in " << kWaitSec
                                       << " s: the test proved little";
    if (!axon_test_dlock_biased(s.lock)) {
        std::cout << "[ note ] no membarrier(2) here: checked the mutex fallback only\n";
    }
}

}  // namespace
