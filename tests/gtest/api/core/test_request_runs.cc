/*
 * The run lists of a layout rendezvous (api/core/request.c): up to
 * AXON_REQUEST_RUNS_POOLED entries they come from the worker's pool and go
 * back to it, so messages after the first allocate nothing; longer ones
 * come from malloc and go back there (ASan and valgrind check the frees).
 */
#include <gtest/gtest.h>

#include <vector>

#include "axon.h"
#include "axon_int.h"   /* the worker's pool counters */
#include "harness.h"
extern "C" {
#include "request.h"
}

namespace {

class RequestRuns : public ::testing::Test {
protected:
    axon_test_node_t node_ = {};

    void SetUp() override { ASSERT_EQ(AXON_OK, axon_test_node_create(&node_, "self", NULL, 0)); }
    void TearDown() override { axon_test_node_destroy(&node_); }

    /* Every entry written: an overrun shows under the sanitizers. */
    static void fill(struct iovec *runs, size_t count)
    {
        for (size_t i = 0; i < count; ++i) {
            runs[i].iov_base = &runs[i];
            runs[i].iov_len  = i;
        }
    }
};

TEST_F(RequestRuns, ListsOfPoolSizeAreReusedNotAllocatedEachTime)
{
    axon_worker_h w = node_.worker;
    for (size_t i = 0; i < 200; ++i) {
        size_t count = 1 + (i * 97) % AXON_REQUEST_RUNS_POOLED;
        struct iovec *runs = axon_request_runs_get(w, count);
        ASSERT_NE(nullptr, runs) << count;
        fill(runs, count);
        axon_request_runs_put(w, runs);
    }
    struct iovec *largest = axon_request_runs_get(w, AXON_REQUEST_RUNS_POOLED);
    ASSERT_NE(nullptr, largest);
    fill(largest, AXON_REQUEST_RUNS_POOLED);
    axon_request_runs_put(w, largest);
    EXPECT_LE(w->runs_mp.num_elems, 2u) << "one list at a time grew the pool";
    EXPECT_EQ(w->runs_mp.num_elems, w->runs_mp.num_free);

    /* Several at once (a split receive and sends in flight): the pool grows to them,
     * and every list is its own. */
    std::vector<struct iovec *> held;
    for (size_t i = 0; i < 5; ++i) {
        held.push_back(axon_request_runs_get(w, 64));
        ASSERT_NE(nullptr, held.back());
        fill(held.back(), 64);
    }
    for (size_t i = 1; i < held.size(); ++i) {
        EXPECT_NE(held[i - 1], held[i]);
    }
    for (struct iovec *runs : held) {
        axon_request_runs_put(w, runs);
    }
    EXPECT_GE(w->runs_mp.num_elems, 5u);
    EXPECT_EQ(w->runs_mp.num_elems, w->runs_mp.num_free);
}

TEST_F(RequestRuns, LongerListsComeFromMallocAndLeaveThePoolAlone)
{
    axon_worker_h w = node_.worker;
    unsigned before = w->runs_mp.num_elems;
    size_t count = 4 * AXON_REQUEST_RUNS_POOLED;
    struct iovec *runs = axon_request_runs_get(w, count);
    ASSERT_NE(nullptr, runs);
    fill(runs, count);
    EXPECT_EQ(before, w->runs_mp.num_elems);
    axon_request_runs_put(w, runs);
    EXPECT_EQ(before, w->runs_mp.num_elems);
    EXPECT_EQ(nullptr, axon_request_runs_get(w, SIZE_MAX / 8)) << "an impossible size";
}

}  // namespace
