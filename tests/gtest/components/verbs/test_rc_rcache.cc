/*
 * rc's registration cache, counted at the device (softib counts every
 * reg_mr of the process): a thousand rendezvous sends of one buffer
 * register it once on each side, and a buffer freed and allocated again
 * at the same address is registered again and its new contents arrive.
 * The rendezvous is forced to the get protocol, the one that registers.
 */
#include <gtest/gtest.h>

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <thread>
#include <vector>

extern "C" {
#include "axon.h"
#include "harness.h"
#include "framework/device/softib/softib.h"
#include "framework/memory/rcache.h"
}

#include "env_guard.h"
#include "rcache_probe.h"

namespace {

const double kTimeout = 60.0;
const size_t kLen     = 256 * 1024;   /* above rc's rendezvous threshold */
const int    kSends   = 1000;
const int    kRounds  = 3;            /* buffers freed and allocated again */

/*
 * A buffer allocated, freed and allocated again at the same address, given
 * back to the kernel in between: mapped directly, not by malloc, whose
 * large blocks come from mmap and go back with munmap only while its heap
 * has no room for them (on transparent huge pages, glibc.malloc.hugetlb=1
 * as tests/run_tests.sh runs the suite, the heap has room: a freed block
 * stays mapped, and its registration rightly stays valid). The monitor
 * sees an munmap the same whoever calls it.
 */
uint8_t *buffer_alloc(void *where)
{
    void *p = mmap(where, kLen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    return static_cast<uint8_t *>((p == MAP_FAILED) ? NULL : p);
}

void buffer_free(uint8_t *buf)
{
    munmap(buf, kLen);
}

/* Sends kSends messages from one buffer, then kRounds times from a new one. */
int peer_sender(int fd, void *)
{
    axon_test_node_t node = {};
    axon_ep_h ep;
    uint64_t regs;
    uint8_t *buf;

    PEER_CHECK(axon_test_node_create(&node, "rc", NULL, 0) == AXON_OK);
    PEER_CHECK(axon_test_connect_peer(fd, &node, &ep) == 0);
    buf = buffer_alloc(NULL);
    axon_test_fill(buf, kLen, 1);
    regs = softib_mr_reg_count();
    for (int i = 0; i < kSends; ++i) {
        PEER_CHECK(axon_test_send(node.worker, ep, buf, kLen, 7, kTimeout) == AXON_OK);
    }
    PEER_CHECK(softib_mr_reg_count() - regs == 1);
    for (int r = 0; r < kRounds; ++r) {
        buffer_free(buf);
        buf = buffer_alloc(buf);
        axon_test_fill(buf, kLen, 100 + r);
        PEER_CHECK(axon_test_send(node.worker, ep, buf, kLen, 8, kTimeout) == AXON_OK);
    }
    buffer_free(buf);
    PEER_CHECK(axon_test_sync_progress(fd, node.worker, kTimeout) == 0);
    PEER_CHECK(axon_test_ep_close(node.worker, ep, 0, kTimeout) == AXON_OK);
    axon_test_node_destroy(&node);
    return 0;
}

TEST(RcRcacheXproc, SameBufferRegisteredOnceAndFreedBufferAgain)
{
    EnvGuard env("AXON_RNDV_SCHEME", "get");
    axon_test_peer_t peer;
    axon_test_node_t node = {};
    void *addr;
    size_t len;
    uint64_t regs;
    uint8_t *buf, *old;
    int same = 0;

    ASSERT_EQ(0, axon_test_peer_spawn(&peer, peer_sender, nullptr, 3 * kTimeout));
    ASSERT_EQ(AXON_OK, axon_test_node_create(&node, "rc", NULL, 0));
    ASSERT_EQ(0, axon_test_exchange_address(peer.fd, node.address, node.address_length, &addr,
                                            &len));
    free(addr);
    buf = buffer_alloc(NULL);
    regs = softib_mr_reg_count();
    for (int i = 0; i < kSends; ++i) {
        ASSERT_EQ(AXON_OK, axon_test_recv(node.worker, buf, kLen, 7, AXON_TAG_MASK_FULL, NULL,
                                          kTimeout)) << i;
    }
    EXPECT_EQ(-1, axon_test_check(buf, kLen, 1));
    EXPECT_EQ(1u, softib_mr_reg_count() - regs) << "receive buffer registered more than once";
    for (int r = 0; r < kRounds; ++r) {
        old = buf;
        buffer_free(buf);
        buf = buffer_alloc(old);
        same += (buf == old);
        memset(buf, 0, kLen);
        regs = softib_mr_reg_count();
        ASSERT_EQ(AXON_OK, axon_test_recv(node.worker, buf, kLen, 8, AXON_TAG_MASK_FULL, NULL,
                                          kTimeout)) << r;
        EXPECT_EQ(-1, axon_test_check(buf, kLen, 100 + r)) << "round " << r;
        EXPECT_EQ(1u, softib_mr_reg_count() - regs) << "round " << r << ": the freed buffer's "
                                                        "registration was used again";
    }
    buffer_free(buf);
    EXPECT_GT(same, 0) << "mmap never gave the freed address again: the case went untested";
    ASSERT_EQ(0, axon_test_sync_progress(peer.fd, node.worker, kTimeout));
    EXPECT_EQ(0, axon_test_peer_wait(&peer, 3 * kTimeout));
    axon_test_node_destroy(&node);
}

}  // namespace

/* ---------------------------------------------------------------- one domain, threads */

/* A pair of workers of one context, driven by one thread: a ping-pong of rendezvous sends. */
struct PairThread {
    axon_context_h context;
    int            id;
    int            failures = 0;
    std::thread    thread;

    void run()
    {
        axon_worker_h a = nullptr, b = nullptr;
        axon_ep_h     ab = nullptr, ba = nullptr;
        void         *addr;
        size_t        len;
        std::vector<uint8_t> out(kLen), in(kLen);

        if ((axon_worker_create(context, NULL, &a) != AXON_OK) ||
            (axon_worker_create(context, NULL, &b) != AXON_OK)) {
            ++failures;
            return;
        }
        if ((axon_worker_get_address(b, &addr, &len) == AXON_OK) &&
            (axon_test_ep_create(a, addr, len, &ab) == AXON_OK)) {
            axon_worker_release_address(b, addr);
        }
        if ((axon_worker_get_address(a, &addr, &len) == AXON_OK) &&
            (axon_test_ep_create(b, addr, len, &ba) == AXON_OK)) {
            axon_worker_release_address(a, addr);
        }
        for (int i = 0; (i < 50) && (ab != nullptr) && (ba != nullptr); ++i) {
            axon_request_h sreq = nullptr, rreq = nullptr;
            axon_test_fill(out.data(), kLen, (uint64_t)(id * 1000 + i));
            axon_status_t rs = axon_tag_recv_nb(b, in.data(), kLen, 9, AXON_TAG_MASK_FULL, NULL,
                                                &rreq);
            axon_status_t ss = axon_tag_send_nb(ab, out.data(), kLen, 9, NULL, &sreq);
            /* Both ends progress here: a and b are this thread's alone. */
            double deadline = axon_test_time() + kTimeout;
            while (((sreq != nullptr) && (axon_request_test(sreq, NULL) == AXON_INPROGRESS)) ||
                   ((rreq != nullptr) && (axon_request_test(rreq, NULL) == AXON_INPROGRESS))) {
                axon_worker_progress(a);
                axon_worker_progress(b);
                if (axon_test_time() > deadline) {
                    break;
                }
            }
            failures += (axon_test_wait_req(a, ss, sreq, NULL, 1.0) != AXON_OK) ||
                        (axon_test_wait_req(b, rs, rreq, NULL, 1.0) != AXON_OK) ||
                        (axon_test_check(in.data(), kLen, (uint64_t)(id * 1000 + i)) != -1);
        }
        failures += (ab == nullptr) || (ba == nullptr);
        if (ab != nullptr) {
            axon_test_ep_close(a, ab, AXON_EP_CLOSE_FORCE, 5.0);
        }
        if (ba != nullptr) {
            axon_test_ep_close(b, ba, AXON_EP_CLOSE_FORCE, 5.0);
        }
        axon_worker_destroy(a);
        axon_worker_destroy(b);
    }
};

/*
 * Workers of one context in threads of their own share rc's memory domain:
 * its device context, protection domain and registration cache. Rendezvous
 * by get registers through the shared cache from every thread at once;
 * every message arrives whole.
 */
TEST(RcDomain, WorkersInThreadsShareTheDomain)
{
    EnvGuard         env("AXON_RNDV_SCHEME", "get");
    axon_test_node_t node = {};
    PairThread       pairs[3];

    ASSERT_EQ(AXON_OK, axon_test_node_create(&node, "rc", NULL, 0));
    uint64_t regs = softib_mr_reg_count();
    for (int t = 0; t < 3; ++t) {
        pairs[t].context = node.context;
        pairs[t].id      = t;
        pairs[t].thread  = std::thread(&PairThread::run, &pairs[t]);
    }
    for (int t = 0; t < 3; ++t) {
        pairs[t].thread.join();
        EXPECT_EQ(0, pairs[t].failures) << "thread " << t;
    }
    /* Six workers' bounce buffers, and each thread's two buffers once: not one per message. */
    if (cache_can_watch()) {
        EXPECT_LT(softib_mr_reg_count() - regs, 60u) << "the shared cache did not serve them";
    }
    axon_test_node_destroy(&node);
}
