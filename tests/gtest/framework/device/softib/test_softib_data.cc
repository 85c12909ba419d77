/*
 * How data moves, beyond one operation of each kind: scatter/gather lists,
 * zero-length messages, more RDMA READs and atomics in flight than
 * max_rd_atomic allows at once, queue and SGE limits at post time (a slot
 * is taken until its completion is polled), and UC losing messages without
 * errors when the wire drops packets.
 */
#include "softib_env.h"

#include <functional>

namespace {

const int kLocalWrite = AXON_DEV_ACCESS_LOCAL_WRITE;
const int kRemoteAll  = AXON_DEV_ACCESS_LOCAL_WRITE | AXON_DEV_ACCESS_REMOTE_WRITE |
                        AXON_DEV_ACCESS_REMOTE_READ | AXON_DEV_ACCESS_REMOTE_ATOMIC;

class SoftibData : public SoftibTest {
protected:
    Qp a_, b_;
};

/* A send gathered from three SGEs of two MRs lands scattered over two receive SGEs. */
TEST_F(SoftibData, GatherSendScatterReceive)
{
    axon_dev_send_wr_t  wr;
    axon_dev_sge_t      sge[3];
    axon_dev_send_wr_t *bad = nullptr;
    axon_dev_recv_wr_t  rwr;
    axon_dev_sge_t      rsge[2];
    axon_dev_recv_wr_t *rbad = nullptr;
    axon_dev_wc_t       wc;
    uint8_t             expect[3000];

    open_dev();
    make_pair(AXON_DEV_QPT_RC, &a_, &b_);
    Buf s1 = dev_.reg(4096, 0);
    Buf s2 = dev_.reg(4096, 0);
    Buf r1 = dev_.reg(4096, kLocalWrite);
    Buf r2 = dev_.reg(4096, kLocalWrite);
    axon_test_fill(s1.ptr, 4096, 1);
    axon_test_fill(s2.ptr, 4096, 2);
    make_wr(&wr, &sge[0], 1, AXON_DEV_WR_SEND, s1.ptr + 10, 1000, s1.lkey());
    sge[1]     = {s2.addr(500), 1500, s2.lkey()};
    sge[2]     = {s1.addr(3000), 500, s1.lkey()};
    wr.num_sge = 3;
    memcpy(expect, s1.ptr + 10, 1000);
    memcpy(expect + 1000, s2.ptr + 500, 1500);
    memcpy(expect + 2500, s1.ptr + 3000, 500);

    memset(&rwr, 0, sizeof(rwr));
    rsge[0]     = {r1.addr(100), 1200, r1.lkey()};
    rsge[1]     = {r2.addr(0), 4096, r2.lkey()};
    rwr.wr_id   = 9;
    rwr.sg_list = rsge;
    rwr.num_sge = 2;
    ASSERT_EQ(0, axon_dev_post_recv(b_.qp, &rwr, &rbad));
    ASSERT_EQ(0, axon_dev_post_send(a_.qp, &wr, &bad));
    ASSERT_TRUE(poll_one(b_.rcq, &wc));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    EXPECT_EQ(3000u, wc.byte_len);
    EXPECT_EQ(0, memcmp(r1.ptr + 100, expect, 1200));
    EXPECT_EQ(0, memcmp(r2.ptr, expect + 1200, 1800));
    EXPECT_EQ(0, r1.ptr[99]);
    EXPECT_EQ(0, r1.ptr[1300]);
    EXPECT_EQ(0, r2.ptr[1800]);
}

/* A zero-length send consumes a receive and completes with byte_len 0. */
TEST_F(SoftibData, ZeroLengthSend)
{
    axon_dev_wc_t wc;

    open_dev();
    make_pair(AXON_DEV_QPT_RC, &a_, &b_);
    Buf rb = dev_.reg(64, kLocalWrite);
    ASSERT_EQ(0, post_recv(b_.qp, 4, rb.ptr, 64, rb.lkey()));
    ASSERT_EQ(0, post_send_op(a_.qp, 5, AXON_DEV_WR_SEND_WITH_IMM, nullptr, 0, 0));
    ASSERT_TRUE(poll_one(b_.rcq, &wc));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    EXPECT_EQ(0u, wc.byte_len);
    ASSERT_TRUE(poll_one(a_.scq, &wc));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status);
}

/* 32 READs and 32 fetch-adds posted at once with max_rd_atomic 4: all complete, in order. */
TEST_F(SoftibData, ReadsAndAtomicsBeyondMaxRdAtomic)
{
    const int     n = 32;
    axon_dev_wc_t wc[2 * n];

    open_dev();
    make_pair(AXON_DEV_QPT_RC, &a_, &b_);
    Buf local  = dev_.reg(n * 1024 + n * 8, kLocalWrite);
    Buf remote = dev_.reg(n * 1024 + 8, kRemoteAll);
    axon_test_fill(remote.ptr, n * 1024, 6);
    for (int i = 0; i < n; ++i) {
        ASSERT_EQ(0, post_rdma(a_.qp, i, AXON_DEV_WR_RDMA_READ, local.ptr + i * 1024, 1024,
                               local.lkey(), remote.addr(i * 1024), remote.rkey()));
    }
    uint64_t *res = (uint64_t *)(local.ptr + n * 1024);
    for (int i = 0; i < n; ++i) {
        ASSERT_EQ(0, post_atomic(a_.qp, n + i, AXON_DEV_WR_ATOMIC_FETCH_AND_ADD, res + i,
                                 local.lkey(), remote.addr(n * 1024), remote.rkey(), 1));
    }
    ASSERT_EQ(2 * n, poll_n(a_.scq, 2 * n, wc));
    for (int i = 0; i < 2 * n; ++i) {
        EXPECT_EQ((uint64_t)i, wc[i].wr_id);
        EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc[i].status) << wc_status_name(wc[i].status);
    }
    EXPECT_EQ(-1, axon_test_check(local.ptr, n * 1024, 6));
    for (int i = 0; i < n; ++i) {
        EXPECT_EQ((uint64_t)i, res[i]);
    }
    EXPECT_EQ((uint64_t)n, *(uint64_t *)(remote.ptr + n * 1024));
}

/* A long RDMA WRITE and READ cross many packets (path MTU 1024). */
TEST_F(SoftibData, LargeWriteAndReadBack)
{
    const uint32_t len = 1 << 20;
    axon_dev_wc_t  wc;

    open_dev();
    make_pair(AXON_DEV_QPT_RC, &a_, &b_);
    Buf src    = dev_.reg(len, kLocalWrite);
    Buf remote = dev_.reg(len, kRemoteAll);
    Buf back   = dev_.reg(len, kLocalWrite);
    axon_test_fill(src.ptr, len, 8);
    ASSERT_EQ(0, post_rdma(a_.qp, 1, AXON_DEV_WR_RDMA_WRITE, src.ptr, len, src.lkey(),
                           remote.addr(), remote.rkey()));
    ASSERT_EQ(0, post_rdma(a_.qp, 2, AXON_DEV_WR_RDMA_READ, back.ptr, len, back.lkey(),
                           remote.addr(), remote.rkey()));
    ASSERT_TRUE(poll_one(a_.scq, &wc, 20));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status);
    ASSERT_TRUE(poll_one(a_.scq, &wc, 20));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status);
    EXPECT_EQ(2u, wc.wr_id);
    EXPECT_EQ(-1, axon_test_check(remote.ptr, len, 8));
    EXPECT_EQ(-1, axon_test_check(back.ptr, len, 8));
}

/* More SGEs than max_send_sge / max_recv_sge: refused at post. */
TEST_F(SoftibData, TooManySgesRefused)
{
    axon_dev_qp_attr_t      qa;
    axon_dev_qp_init_attr_t init;
    axon_dev_send_wr_t      wr;
    axon_dev_recv_wr_t      rwr;
    axon_dev_send_wr_t     *bad  = nullptr;
    axon_dev_recv_wr_t     *rbad = nullptr;

    open_dev();
    make_pair(AXON_DEV_QPT_RC, &a_, &b_);
    ASSERT_EQ(0, axon_dev_query_qp(a_.qp, &qa, AXON_DEV_QP_CAP, &init));
    Buf b = dev_.reg(4096, kLocalWrite);
    std::vector<axon_dev_sge_t> sges(init.cap.max_send_sge + init.cap.max_recv_sge + 2,
                                     axon_dev_sge_t{b.addr(), 8, b.lkey()});
    memset(&wr, 0, sizeof(wr));
    wr.sg_list    = sges.data();
    wr.num_sge    = (int)init.cap.max_send_sge + 1;
    wr.opcode     = AXON_DEV_WR_SEND;
    wr.send_flags = AXON_DEV_SEND_SIGNALED;
    EXPECT_EQ(EINVAL, axon_dev_post_send(a_.qp, &wr, &bad));
    EXPECT_EQ(&wr, bad);
    memset(&rwr, 0, sizeof(rwr));
    rwr.sg_list = sges.data();
    rwr.num_sge = (int)init.cap.max_recv_sge + 1;
    EXPECT_EQ(EINVAL, axon_dev_post_recv(b_.qp, &rwr, &rbad));
    EXPECT_EQ(&rwr, rbad);
    wr.num_sge = -1;
    EXPECT_EQ(EINVAL, axon_dev_post_send(a_.qp, &wr, &bad)) << "negative num_sge";
}

/* A send queue that is full refuses the next WR (and names it in bad_wr). */
TEST_F(SoftibData, FullSendQueueRefusesNextWr)
{
    axon_dev_qp_attr_t      qa;
    axon_dev_qp_init_attr_t init;

    open_dev();
    /* nobody answers: the WRs stay outstanding */
    ASSERT_EQ(0, dev_.qp(&a_, AXON_DEV_QPT_RC, 1, nullptr, 0, 8));
    ASSERT_EQ(0, dev_.up(a_, (a_.qpn() & ~0xfffu) | 0xffe, dev_.gid, 0, 0));
    ASSERT_EQ(0, axon_dev_query_qp(a_.qp, &qa, AXON_DEV_QP_CAP, &init));
    Buf b = dev_.reg(64, kLocalWrite);
    const uint32_t depth = init.cap.max_send_wr;
    ASSERT_GE(depth, 8u);
    ASSERT_LE(depth, 4096u);
    for (uint32_t i = 0; i < depth; ++i) {
        ASSERT_EQ(0, post_send_op(a_.qp, i, AXON_DEV_WR_SEND, b.ptr, 8, b.lkey())) << i;
    }
    axon_dev_send_wr_t  wr;
    axon_dev_sge_t      sge;
    axon_dev_send_wr_t *bad = nullptr;
    make_wr(&wr, &sge, 999, AXON_DEV_WR_SEND, b.ptr, 8, b.lkey());
    EXPECT_EQ(ENOMEM, axon_dev_post_send(a_.qp, &wr, &bad)) << "queue of " << depth;
    EXPECT_EQ(&wr, bad);
}

/*
 * Seed glossary and §3.3.11: a WR is outstanding until its completion is
 * polled, and max_send_wr / max_recv_wr bound the outstanding WRs. So a
 * queue stays full while its completions wait in the CQ, and each one
 * polled frees one slot. Without a poll, post returns ENOMEM for as long as
 * one cares to try (each post also drives the engine, which completes
 * everything meanwhile).
 */
bool post_refused_for(std::function<int()> post, double seconds)
{
    double deadline = axon_test_time() + seconds;
    while (axon_test_time() < deadline) {
        int ret = post();
        if (ret != ENOMEM) {
            ADD_FAILURE() << "post returned " << ret << " with every slot outstanding";
            return false;
        }
        usleep(1000);
    }
    return true;
}

const uint32_t kDepth = 4;   /* send and receive queues of the slot tests */

class SoftibDataSlots : public SoftibData {
protected:
    /* a_ and b_ with queues of kDepth, connected */
    void slot_pair(int sq_sig_all)
    {
        axon_dev_qp_attr_t      qa;
        axon_dev_qp_init_attr_t init;

        ASSERT_EQ(0, dev_.qp(&a_, AXON_DEV_QPT_RC, sq_sig_all, nullptr, 0, kDepth));
        ASSERT_EQ(0, dev_.qp(&b_, AXON_DEV_QPT_RC, 1, nullptr, 0, kDepth));
        ASSERT_EQ(0, dev_.connect(a_, b_));
        ASSERT_EQ(0, axon_dev_query_qp(a_.qp, &qa, AXON_DEV_QP_CAP, &init));
        ASSERT_EQ(kDepth, init.cap.max_send_wr);
        ASSERT_EQ(kDepth, init.cap.max_recv_wr);
    }

    /*
     * recv(id) posts receive id into b_'s queue of kDepth (its own or an
     * SRQ): kDepth receives filled by a_'s sends hold every slot until one
     * completion is polled, which frees exactly one.
     */
    void receives_held_until_polled(const std::function<int(uint64_t)> &recv)
    {
        axon_dev_wc_t wc[kDepth];
        Buf sb = dev_.reg(64, 0);

        for (uint32_t i = 0; i < kDepth; ++i) {
            ASSERT_EQ(0, recv(i));
        }
        for (uint32_t i = 0; i < kDepth; ++i) {
            ASSERT_EQ(0, post_send_op(a_.qp, i, AXON_DEV_WR_SEND, sb.ptr, 64, sb.lkey()));
        }
        ASSERT_EQ((int)kDepth, poll_n(a_.scq, kDepth, wc)) << "the sends completed";
        EXPECT_TRUE(post_refused_for([&] { return recv(kDepth); }, 0.05))
            << "receives completed, not polled: still outstanding";
        ASSERT_TRUE(poll_one(b_.rcq, &wc[0]));
        EXPECT_EQ(0u, wc[0].wr_id);
        EXPECT_EQ(0, recv(kDepth)) << "one polled, one slot";
        EXPECT_TRUE(post_refused_for([&] { return recv(kDepth + 1); }, 0.02));
    }
};

TEST_F(SoftibDataSlots, SendSlotFreedWhenItsCompletionIsPolled)
{
    axon_dev_wc_t wc[kDepth];

    open_dev();
    slot_pair(1);
    Buf local  = dev_.reg(64, kLocalWrite);
    Buf remote = dev_.reg(64, kRemoteAll);
    auto write = [&](uint64_t id) {
        return post_rdma(a_.qp, id, AXON_DEV_WR_RDMA_WRITE, local.ptr, 8, local.lkey(),
                         remote.addr(), remote.rkey());
    };
    for (uint32_t i = 0; i < kDepth; ++i) {
        ASSERT_EQ(0, write(i));
    }
    EXPECT_TRUE(post_refused_for([&] { return write(100); }, 0.1))
        << "completed, not polled: still outstanding";
    ASSERT_TRUE(poll_one(a_.scq, &wc[0]));
    EXPECT_EQ(0u, wc[0].wr_id);
    EXPECT_EQ(0, write(kDepth)) << "one polled, one slot";
    EXPECT_TRUE(post_refused_for([&] { return write(101); }, 0.02));
    ASSERT_EQ((int)kDepth, poll_n(a_.scq, kDepth, wc));
    for (uint32_t i = 0; i < kDepth; ++i) {
        EXPECT_EQ(i + 1, wc[i].wr_id);
        EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc[i].status) << wc_status_name(wc[i].status);
    }
    for (uint32_t i = 0; i < kDepth; ++i) {
        EXPECT_EQ(0, write(10 + i)) << "all polled, all free";
    }
}

/* The usual verbs rule: an unsignaled WR's slot goes with the next signaled one's, when polled. */
TEST_F(SoftibDataSlots, UnsignaledSlotsFreedWithTheNextSignaledCompletionPolled)
{
    axon_dev_wc_t wc;

    open_dev();
    slot_pair(0);
    Buf local  = dev_.reg(64, kLocalWrite);
    Buf remote = dev_.reg(64, kRemoteAll);
    auto write = [&](uint64_t id, unsigned flags) {
        return post_rdma(a_.qp, id, AXON_DEV_WR_RDMA_WRITE, local.ptr, 8, local.lkey(),
                         remote.addr(), remote.rkey(), flags);
    };
    for (int round = 0; round < 2; ++round) {
        for (uint32_t i = 0; i + 1 < kDepth; ++i) {
            ASSERT_EQ(0, write(round * 10 + i, 0)) << "round " << round;
        }
        ASSERT_EQ(0, write(round * 10 + 9, AXON_DEV_SEND_SIGNALED));
        EXPECT_TRUE(post_refused_for([&] { return write(100, AXON_DEV_SEND_SIGNALED); }, 0.05))
            << "round " << round << ": unsignaled WRs done, the signaled one not polled";
        ASSERT_TRUE(poll_one(a_.scq, &wc));
        EXPECT_EQ((uint64_t)round * 10 + 9, wc.wr_id);
        EXPECT_TRUE(no_wc(a_.scq, 0.01)) << "an unsignaled WR completed";
    }
}

TEST_F(SoftibDataSlots, ReceiveSlotFreedWhenItsCompletionIsPolled)
{
    axon_dev_wc_t wc[kDepth];

    open_dev();
    slot_pair(1);
    Buf rb = dev_.reg(64 * (kDepth + 2), kLocalWrite);
    receives_held_until_polled([&](uint64_t id) {
        return post_recv(b_.qp, id, rb.ptr + (id % (kDepth + 2)) * 64, 64, rb.lkey());
    });
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_EQ((int)kDepth - 1, poll_n(b_.rcq, kDepth - 1, wc));
}

/*
 * An SRQ's slots too: a receive a QP took stays outstanding until its
 * completion is polled; when the QP goes, the SRQ has its slots back (its
 * completions may stay in the CQ, the SRQ may go before they are polled).
 */
TEST_F(SoftibDataSlots, SrqSlotFreedWhenItsCompletionIsPolledOrItsQpDestroyed)
{
    axon_dev_srq_t *srq = nullptr;

    open_dev();
    ASSERT_EQ(0, dev_.srq(kDepth, 1, &srq));
    ASSERT_EQ(0, dev_.qp(&a_, AXON_DEV_QPT_RC, 1, nullptr, 0, kDepth));
    ASSERT_EQ(0, dev_.qp(&b_, AXON_DEV_QPT_RC, 1, srq, 0, kDepth));
    ASSERT_EQ(0, dev_.connect(a_, b_));
    Buf  rb   = dev_.reg(64 * (kDepth + 2), kLocalWrite);
    auto recv = [&](uint64_t id) {
        return post_srq_recv(srq, id, rb.ptr + (id % (kDepth + 2)) * 64, 64, rb.lkey());
    };
    receives_held_until_polled(recv);
    ASSERT_FALSE(HasFatalFailure());
    dev_.destroy_qp(&b_);
    EXPECT_EQ(0, recv(kDepth + 1)) << "the QP went: the slots of its unpolled receives are free";
}

/*
 * A CQ with IGNORE_OVERRUN is one only the device watches (seed §8.9.1):
 * nobody polls it, so what completes into it frees its slots at once.
 */
TEST_F(SoftibDataSlots, IgnoreOverrunCqFreesSlotsAtCompletion)
{
    open_dev();
    axon_dev_cq_t *scq = dev_.cq(64, nullptr, AXON_DEV_CQ_IGNORE_OVERRUN);
    ASSERT_NE(nullptr, scq);
    ASSERT_EQ(0, dev_.qp(&a_, AXON_DEV_QPT_RC, 1, nullptr, 0, kDepth, scq));
    ASSERT_EQ(0, dev_.qp(&b_, AXON_DEV_QPT_RC, 1, nullptr, 0, kDepth));
    ASSERT_EQ(0, dev_.connect(a_, b_));
    Buf local  = dev_.reg(64, kLocalWrite);
    Buf remote = dev_.reg(64, kRemoteAll);
    for (uint32_t i = 0; i < 4 * kDepth; ++i) {
        double deadline = axon_test_time() + kWcTimeout;
        int    ret;
        while ((ret = post_rdma(a_.qp, i, AXON_DEV_WR_RDMA_WRITE, local.ptr, 8, local.lkey(),
                                remote.addr(), remote.rkey())) == ENOMEM) {
            ASSERT_LT(axon_test_time(), deadline) << "WR " << i << ": no slot freed";
            usleep(100);
        }
        ASSERT_EQ(0, ret) << "WR " << i;
    }
}

/* UC recovers nothing: with half the packets lost some messages vanish, none fails. */
TEST_F(SoftibData, UcLossDropsMessagesWithoutErrors)
{
    const int     n = 100;
    axon_dev_wc_t wc[16];

    env_.set("AXON_SOFTIB_LOSS", "0.5");
    open_dev();
    ASSERT_EQ(0, dev_.qp(&a_, AXON_DEV_QPT_UC, 1, nullptr, 0, 128));
    ASSERT_EQ(0, dev_.qp(&b_, AXON_DEV_QPT_UC, 1, nullptr, 0, 128));
    ASSERT_EQ(0, dev_.connect(a_, b_));
    Buf sb = dev_.reg(64, 0);
    Buf rb = dev_.reg(n * 64, kLocalWrite);
    for (int i = 0; i < n; ++i) {
        ASSERT_EQ(0, post_recv(b_.qp, i, rb.ptr + i * 64, 64, rb.lkey()));
    }
    for (int i = 0; i < n; ++i) {
        ASSERT_EQ(0, post_send_op(a_.qp, i, AXON_DEV_WR_SEND, sb.ptr, 64, sb.lkey()));
        ASSERT_TRUE(poll_one(a_.scq, wc));
        ASSERT_EQ(AXON_DEV_WC_SUCCESS, wc[0].status) << wc_status_name(wc[0].status);
    }
    int got = 0, ret;
    while ((ret = poll_n(b_.rcq, 16, wc, 0.1)) > 0) {
        for (int k = 0; k < ret; ++k) {
            EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc[k].status) << wc_status_name(wc[k].status);
        }
        got += ret;
    }
    EXPECT_GT(got, 20);
    EXPECT_LT(got, 80);
    EXPECT_EQ(AXON_DEV_QPS_RTS, query_state(a_.qp));
    EXPECT_EQ(AXON_DEV_QPS_RTS, query_state(b_.qp));
}

/* RC over a lossy loopback still delivers every message once, in order. */
/* Slow: a lossy run, not for the sanitizer passes (tests/README.md). */
class SoftibDataSlow : public SoftibData {};

TEST_F(SoftibDataSlow, RcLossyLoopbackDeliversInOrder)
{
    const int     n = 200;
    axon_dev_wc_t wc;

    env_.set("AXON_SOFTIB_LOSS", "0.2");
    env_.set("AXON_SOFTIB_REORDER", "0.2");
    open_dev();
    ASSERT_EQ(0, dev_.qp(&a_, AXON_DEV_QPT_RC, 1, nullptr, 0, 256));
    ASSERT_EQ(0, dev_.qp(&b_, AXON_DEV_QPT_RC, 1, nullptr, 0, 256));
    ASSERT_EQ(0, dev_.up(a_, b_.qpn(), dev_.gid, kPsnB, kPsnA, 10));
    ASSERT_EQ(0, dev_.up(b_, a_.qpn(), dev_.gid, kPsnA, kPsnB, 10));
    Buf sb = dev_.reg(n * 64, 0);
    Buf rb = dev_.reg(n * 64, kLocalWrite);
    for (int i = 0; i < n; ++i) {
        ASSERT_EQ(0, post_recv(b_.qp, i, rb.ptr + i * 64, 64, rb.lkey()));
    }
    for (int i = 0; i < n; ++i) {
        axon_test_fill(sb.ptr + i * 64, 64, 100 + i);
        ASSERT_EQ(0, post_send_op(a_.qp, i, AXON_DEV_WR_SEND, sb.ptr + i * 64, 64, sb.lkey()));
    }
    for (int i = 0; i < n; ++i) {
        ASSERT_TRUE(poll_one(b_.rcq, &wc, 10)) << "message " << i;
        ASSERT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
        ASSERT_EQ((uint64_t)i, wc.wr_id);
        EXPECT_EQ(-1, axon_test_check(rb.ptr + i * 64, 64, 100 + i)) << "message " << i;
    }
    for (int i = 0; i < n; ++i) {
        ASSERT_TRUE(poll_one(a_.scq, &wc, 10));
        ASSERT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    }
    EXPECT_TRUE(no_wc(b_.rcq, 0.05)) << "a message arrived twice";
}


/*
 * Duplicated and lost packets make the responder see atomic requests again:
 * it must replay the saved result, never execute twice.
 */
TEST_F(SoftibData, AtomicsExecuteOnceUnderDuplicationAndLoss)
{
    const int     n = 200;
    axon_dev_wc_t wc;

    env_.set("AXON_SOFTIB_DUP", "0.3");
    env_.set("AXON_SOFTIB_LOSS", "0.1");
    open_dev();
    ASSERT_EQ(0, dev_.qp(&a_, AXON_DEV_QPT_RC, 1, nullptr, 0, 256));
    ASSERT_EQ(0, dev_.qp(&b_, AXON_DEV_QPT_RC, 1, nullptr, 0, 256));
    ASSERT_EQ(0, dev_.up(a_, b_.qpn(), dev_.gid, kPsnB, kPsnA, 10));
    ASSERT_EQ(0, dev_.up(b_, a_.qpn(), dev_.gid, kPsnA, kPsnB, 10));
    Buf local  = dev_.reg(n * 8, kLocalWrite);
    Buf remote = dev_.reg(64, kRemoteAll);
    uint64_t *res = (uint64_t *)local.ptr;
    for (int i = 0; i < n; ++i) {
        ASSERT_EQ(0, post_atomic(a_.qp, i, AXON_DEV_WR_ATOMIC_FETCH_AND_ADD, res + i,
                                 local.lkey(), remote.addr(), remote.rkey(), 1));
    }
    for (int i = 0; i < n; ++i) {
        ASSERT_TRUE(poll_one(a_.scq, &wc, 10)) << "fetch-add " << i;
        ASSERT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
        EXPECT_EQ((uint64_t)i, wc.wr_id);
    }
    for (int i = 0; i < n; ++i) {
        EXPECT_EQ((uint64_t)i, res[i]) << "fetch-add " << i;
    }
    EXPECT_EQ((uint64_t)n, *(uint64_t *)remote.ptr) << "an atomic executed twice or never";
}

}  // namespace
