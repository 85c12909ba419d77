/* Idle policy of polling loops (framework/idle.c): when progress gives the core away. */
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <unistd.h>
#include <vector>

extern "C" {
#include "idle.h"
#include "sys.h"
}

namespace {

/* Empty polls until the slow path first runs, then one more: did that one yield? */
int polls_until_slow_path(axon_idle_t *idle)
{
    idle->seen = axon_idle_thread_events;   /* events of this thread's earlier tests: old news */
    for (unsigned i = 0; i < AXON_IDLE_SPIN_POLLS - 1; ++i) {
        axon_idle_poll(idle, 0);
    }
    ++idle->polls;
    return axon_idle_wait(idle);
}

} // namespace

TEST(Idle, NeverYieldsWhenTold)
{
    axon_idle_t idle;

    axon_idle_init(&idle, AXON_IDLE_YIELD_NEVER, 0);
    EXPECT_EQ(0, polls_until_slow_path(&idle));
    for (int i = 0; i < 1000; ++i) {
        EXPECT_EQ(0, axon_idle_wait(&idle));
    }
}

TEST(Idle, AlwaysYieldsAfterTheShortSpin)
{
    axon_idle_t idle;

    axon_idle_init(&idle, AXON_IDLE_YIELD_ALWAYS, 1000.0);
    EXPECT_EQ(1, polls_until_slow_path(&idle));
}

TEST(Idle, AutoYieldsOnceIdleForTheSpinTime)
{
    axon_idle_t idle;
    double start;

    /* A spin time no test machine reaches between two polls unless oversubscribed. */
    const double kSpinTime = 0.2;
    axon_idle_init(&idle, AXON_IDLE_YIELD_AUTO, kSpinTime);
    start = axon_sys_time_sec();
    int first = polls_until_slow_path(&idle);
    if (first && axon_idle_oversubscribed(axon_sys_time_sec())) {
        GTEST_SKIP() << "the host is oversubscribed right now: auto yields at once";
    }
    EXPECT_EQ(0, first) << "yielded before the spin time";
    usleep(250 * 1000);
    int yielded = 0;
    for (unsigned i = 0; (i < AXON_IDLE_CLOCK_POLLS) && !yielded; ++i) {
        yielded = axon_idle_poll(&idle, 0);   /* the clock is read every CLOCK_POLLS */
    }
    EXPECT_EQ(1, yielded) << "idle for " << axon_sys_time_sec() - start << " s";
    EXPECT_EQ(1, axon_idle_poll(&idle, 0)) << "once yielding, every empty poll yields";
    /* Work starts a new stretch: the short spin and the spin time again (unless the
     * host is oversubscribed by then, which yields at once). */
    axon_idle_poll(&idle, 1);
    int after = 0, over = 0;
    double stretch = axon_sys_time_sec();
    for (unsigned i = 0; i < 2 * AXON_IDLE_SPIN_POLLS; ++i) {
        int yielded_now = axon_idle_poll(&idle, 0);
        if (yielded_now && (after == 0)) {
            /* The verdict that poll went by (a time of 0 reads it without a new
             * look at the load, which may differ by the end of the loop). */
            over = axon_idle_oversubscribed(0);
        }
        after += yielded_now;
    }
    if ((after > 0) && (axon_sys_time_sec() - stretch < kSpinTime)) {
        EXPECT_TRUE(over) << after << " yields within the spin time of a new stretch";
    }
}

TEST(Idle, WorkResetsTheSpin)
{
    axon_idle_t idle;

    axon_idle_init(&idle, AXON_IDLE_YIELD_ALWAYS, 0);
    for (unsigned i = 0; i < AXON_IDLE_SPIN_POLLS - 1; ++i) {
        axon_idle_poll(&idle, 0);
    }
    axon_idle_poll(&idle, 3);
    EXPECT_EQ(0u, idle.polls);
}

/* A thread that polls a busy worker and an idle one in turn is not idle: the idle
 * worker's slow path finds the other's events and spins again instead of yielding. */
TEST(Idle, ABusyWorkerKeepsTheThreadFromIdling)
{
    axon_idle_t busy, idle;
    int yields = 0;

    axon_idle_init(&busy, AXON_IDLE_YIELD_ALWAYS, 0);
    axon_idle_init(&idle, AXON_IDLE_YIELD_ALWAYS, 0);
    for (unsigned i = 0; i < 20 * AXON_IDLE_SPIN_POLLS; ++i) {
        yields += axon_idle_poll(&idle, 0);
        if (i % 8 == 0) {
            yields += axon_idle_poll(&busy, 1);
        }
    }
    EXPECT_EQ(0, yields);
    /* Alone, the idle worker yields after the short spin. */
    for (unsigned i = 0; i < 3 * AXON_IDLE_SPIN_POLLS; ++i) {
        yields += axon_idle_poll(&idle, 0);
    }
    EXPECT_GT(yields, 0);
}

/* A worker's own work restarts only its short spin: the first yield comes after
 * AXON_IDLE_SPIN_POLLS empty polls, not after twice as many (on an oversubscribed host
 * every poll in between holds a core a peer may need). */
TEST(Idle, OwnWorkIsNoNewsToTheWorker)
{
    axon_idle_t idle;

    axon_idle_init(&idle, AXON_IDLE_YIELD_ALWAYS, 0);
    axon_idle_poll(&idle, 1);
    for (unsigned i = 1; i < AXON_IDLE_SPIN_POLLS; ++i) {
        ASSERT_EQ(0, axon_idle_poll(&idle, 0)) << "poll " << i;
    }
    EXPECT_EQ(1, axon_idle_poll(&idle, 0));
}

/* Another thread's events are its own: they do not keep this thread from idling. */
TEST(Idle, AnotherThreadsEventsDoNotCount)
{
    axon_idle_t idle, theirs;
    std::atomic<bool> stop(false);
    int yields = 0;

    axon_idle_init(&idle, AXON_IDLE_YIELD_ALWAYS, 0);
    axon_idle_init(&theirs, AXON_IDLE_YIELD_NEVER, 0);
    std::thread busy([&theirs, &stop] {
        while (!stop.load(std::memory_order_relaxed)) {
            axon_idle_poll(&theirs, 1);
        }
    });
    for (unsigned i = 0; i < 4 * AXON_IDLE_SPIN_POLLS; ++i) {
        yields += axon_idle_poll(&idle, 0);
    }
    stop = true;
    busy.join();
    EXPECT_GT(yields, 0);
}

TEST(Idle, OversubscriptionIsSeen)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    std::atomic<bool> stop(false);
    std::vector<std::thread> spinners;
    double deadline;
    int seen = 0;

    ASSERT_GT(cores, 0);
    for (long i = 0; i < 2 * cores + 1; ++i) {
        spinners.emplace_back([&stop] {
            while (!stop.load(std::memory_order_relaxed)) {
            }
        });
    }
    /* The answer is cached for 50 ms; a few reads over half a second. */
    deadline = axon_sys_time_sec() + 0.5;
    while (!seen && (axon_sys_time_sec() < deadline)) {
        seen = axon_idle_oversubscribed(axon_sys_time_sec());
        usleep(20 * 1000);
    }
    stop = true;
    for (auto &t : spinners) {
        t.join();
    }
    EXPECT_EQ(1, seen) << 2 * cores + 1 << " threads spinning on " << cores << " cores";
}
