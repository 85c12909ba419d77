/*
 * What is particular to device atomic mode (AXON_ATOMIC_MODE=device) over
 * rc on softib: every atomic is executed by the device (rc's ep_atomic:
 * standard verbs atomics and §8.7 masked ones, XOR by a compare-and-swap
 * loop), so they complete while the target only sleeps (softib's progress
 * thread is the responder); what the device cannot do is refused, never
 * done by a CPU; the same process loops through the device; guess mode.
 *
 * Correctness of every atomic, the multi-process counters, flushes, bad
 * and killed targets in device mode: the *_devamo lanes of test_rma.cc.
 * The target process, regions and Session: rma_env.h.
 */
#include <gtest/gtest.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <string>

#include "rma_env.h"

namespace {

/* AXON_TLS of every process: rc alone, or shm carrying the rest. */
const RmaParam kDeviceLanes[] = {
    {"rc", "rc", false, "device"},
    {"shm_rc", "shm,rc", false, "device"},
    {"dc", "dc", false, "device"},
};

class DeviceAmo : public ::testing::TestWithParam<RmaParam> {
protected:
    Session s_;

    uint64_t read64(int r, uint64_t off, size_t size)
    {
        std::vector<uint8_t> v = s_.target->read(r, off, size);
        uint64_t             x = 0;
        if (v.size() == size) {
            memcpy(&x, v.data(), size);
        }
        return x;
    }

    void write64(int r, uint64_t off, uint64_t value, size_t size)
    {
        s_.target->write(r, off, &value, size);
    }
};

TEST_P(DeviceAmo, KeysTakeTheDevicePath)
{
    ASSERT_NO_FATAL_FAILURE(s_.start(GetParam()));  /* checks every key's amo path */
    if (GetParam().tl() == "shm") {
        /* put/get keep their own path: shm carries them, not the amo lane */
        EXPECT_STREQ("shm", s_.ep->am_lane.resource->tl_name);
        EXPECT_EQ((int)AXON_RMA_PATH_SHM, (int)s_.path(kAllocBig));
    }
    s_.finish();
}

/* The target sleeps in a blocking read: softib's progress thread answers. */
TEST_P(DeviceAmo, TargetThatOnlySleeps)
{
    ASSERT_NO_FATAL_FAILURE(s_.start(GetParam()));
    uint64_t one = 1, old = 0;
    /* connected first: the handshake needs the target's progress */
    write64(kAllocBig, 0, 0, 8);
    write64(kUserBig, 64, 0, 4);
    ASSERT_EQ(AXON_OK, s_.atomic(AXON_ATOMIC_ADD, 8, &one, NULL, &old, s_.addr(kAllocBig, 0),
                                 s_.rkey[kAllocBig]));
    s_.target->block();
    double t0 = axon_test_time();
    for (int i = 0; i < 100; ++i) {
        ASSERT_EQ(AXON_OK, s_.atomic(AXON_ATOMIC_ADD, 8, &one, NULL, &old,
                                     s_.addr(kAllocBig, 0), s_.rkey[kAllocBig]));
        EXPECT_EQ((uint64_t)(i + 1), old);
    }
    uint32_t x = 0x5a5a, old32 = 0;
    uint64_t cmp[4] = {}, cm[4] = {}, sw[4] = {~0ull, ~0ull, ~0ull, ~0ull};
    uint64_t sm[4] = {1, 2, 3, 4}, res[4], expect[4];
    for (int w = 0; w < 4; ++w) {
        expect[w] = (bg_value(kUserBig, 128 + 8 * w, 8) & ~sm[w]) | sm[w];
    }
    ASSERT_EQ(AXON_OK, s_.atomic(AXON_ATOMIC_XOR, 4, &x, NULL, &old32, s_.addr(kUserBig, 64),
                                 s_.rkey[kUserBig]));
    ASSERT_EQ(AXON_OK, s_.masked_cswap(32, cmp, cm, sw, sm, res, s_.addr(kUserBig, 128),
                                       s_.rkey[kUserBig]));
    EXPECT_EQ(AXON_OK, s_.flush());
    printf("[rma_device] 103 atomics in %.3f s while the target slept\n",
           axon_test_time() - t0);
    EXPECT_EQ(101u, read64(kAllocBig, 0, 8));
    EXPECT_EQ(0x5a5au, read64(kUserBig, 64, 4));
    std::vector<uint8_t> v = s_.target->read(kUserBig, 128, 32);
    ASSERT_EQ(32u, v.size());
    EXPECT_EQ(0, memcmp(expect, v.data(), 32));
    s_.finish();
}

/* Without extended atomics only 64-bit ADD and CSWAP are native: the rest is refused. */
TEST_P(DeviceAmo, NoExtAtomicIsUnsupported)
{
    EnvGuard env("AXON_SOFTIB_CAP_MASK", "ext_atomic");  /* the target inherits it */
    ASSERT_NO_FATAL_FAILURE(s_.start(GetParam()));
    const int r = kAllocBig;
    uint64_t  v = 3, old = 0, cmp = 0;
    uint32_t  v32 = 3;
    for (uint64_t off = 0; off < 64; off += 8) {
        write64(r, off, 0, 8);
    }
    EXPECT_EQ(AXON_OK, s_.atomic(AXON_ATOMIC_ADD, 8, &v, NULL, &old, s_.addr(r, 0), s_.rkey[r]));
    EXPECT_EQ(AXON_OK, s_.atomic(AXON_ATOMIC_CSWAP, 8, &v, &cmp, &old, s_.addr(r, 8),
                                 s_.rkey[r]));
    EXPECT_EQ(AXON_OK, s_.atomic(AXON_ATOMIC_XOR, 8, &v, NULL, &old, s_.addr(r, 16),
                                 s_.rkey[r])) << "XOR loops on the native 64-bit CSWAP";
    EXPECT_EQ(AXON_ERR_UNSUPPORTED, s_.atomic(AXON_ATOMIC_AND, 8, &v, NULL, &old,
                                              s_.addr(r, 24), s_.rkey[r]));
    EXPECT_EQ(AXON_ERR_UNSUPPORTED, s_.atomic(AXON_ATOMIC_ADD, 4, &v32, NULL, NULL,
                                              s_.addr(r, 32), s_.rkey[r]));
    uint64_t w[4] = {};
    EXPECT_EQ(AXON_ERR_UNSUPPORTED, s_.masked_cswap(16, w, w, w, w, w, s_.addr(r, 64),
                                                    s_.rkey[r]));
    EXPECT_EQ(AXON_ERR_UNSUPPORTED, s_.mfadd(8, w, w, w, s_.addr(r, 64), s_.rkey[r]));
    EXPECT_EQ(3u, read64(r, 0, 8));
    EXPECT_EQ(3u, read64(r, 8, 8));
    EXPECT_EQ(3u, read64(r, 16, 8));
    EXPECT_EQ(0u, read64(r, 24, 8));
    EXPECT_EQ(0u, read64(r, 32, 8));
    EXPECT_EQ(-1, s_.target->check_bg(r, 64, 64)) << "a refused extended atomic wrote";
    s_.finish();
}

INSTANTIATE_TEST_SUITE_P(Lanes, DeviceAmo, ::testing::ValuesIn(kDeviceLanes), rma_name);

/*
 * The same process over rc alone: an endpoint to our own worker, the
 * atomic loops back through the device (rc connects the worker's QP to
 * itself). With self carrying the rest: the self_devamo lane of test_rma.cc.
 */
TEST(DeviceAmoLocal, SameProcessLoopsThroughDevice)
{
    Node node;
    ASSERT_EQ(AXON_OK, node.create("rc", false, "device"));
    axon_mem_map_params_t mp = {};
    mp.length = 65536;
    mp.flags  = AXON_MEM_MAP_ALLOCATE;
    axon_mem_h memh = nullptr;
    void      *base = nullptr;
    size_t     len  = 0;
    ASSERT_EQ(AXON_OK, axon_mem_map(node.context, &mp, &memh));
    ASSERT_EQ(AXON_OK, axon_mem_query(memh, &base, &len));
    void  *key = nullptr;
    size_t key_len = 0;
    ASSERT_EQ(AXON_OK, axon_rkey_pack(node.context, memh, &key, &key_len));
    axon_ep_h ep = nullptr;
    ASSERT_EQ(AXON_OK, axon_test_ep_create(node.worker, node.address, node.address_length, &ep));
    ASSERT_NE(nullptr, ep->amo_lane.tl_ep);
    EXPECT_STREQ("rc", ep->amo_lane.resource->tl_name);
    axon_rkey_h rkey = nullptr;
    ASSERT_EQ(AXON_OK, axon_ep_rkey_unpack(ep, key, key_len, &rkey));
    axon_rkey_buffer_release(key);
    EXPECT_EQ((int)AXON_RKEY_AMO_DEVICE, (int)rkey->amo);
    uint64_t one = 1, old = 7;
    for (int i = 0; i < 10; ++i) {
        axon_request_h req = nullptr;
        axon_status_t  st  = axon_atomic_nb(ep, AXON_ATOMIC_ADD, 8, &one, NULL, &old,
                                            (uintptr_t)base, rkey, NULL, &req);
        ASSERT_EQ(AXON_OK, axon_test_wait_req(node.worker, st, req, NULL, kOpTimeout));
        EXPECT_EQ((uint64_t)i, old);
    }
    EXPECT_EQ(10u, *(volatile uint64_t *)base);
    axon_rkey_destroy(rkey);
    axon_test_ep_close(node.worker, ep, AXON_EP_CLOSE_FLUSH, kOpTimeout);
    axon_mem_unmap(node.context, memh);
}

/* guess: device only when every transport AXON_TLS admits has device atomics. */
TEST(DeviceAmoMode, GuessFollowsTheTransports)
{
    Node rc_only, mixed, cpu;
    ASSERT_EQ(AXON_OK, rc_only.create("rc", false, "guess"));
    EXPECT_EQ(1, rc_only.context->amo_device);
    ASSERT_EQ(AXON_OK, mixed.create("shm,rc", false, "guess"));
    EXPECT_EQ(0, mixed.context->amo_device);
    ASSERT_EQ(AXON_OK, cpu.create("rc", false, "cpu"));
    EXPECT_EQ(0, cpu.context->amo_device);
}

}  // namespace
