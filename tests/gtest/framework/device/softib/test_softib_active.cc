/*
 * The engine's schedule: a progress pass visits only the QPs with work
 * (softib_qp_activate in softib.h), so a thousand idle QPs cost it nothing,
 * a QP that finished its work leaves the active list again, and one that
 * only waits for a timer is looked at when the timer is due.
 * softib_qp_visits counts the QPs the passes visited.
 */
#include "softib_env.h"

extern "C" {
#include "framework/device/softib/softib.h"
}

namespace {

const int kIdleQps = 1000;
const int kPolls   = 100;

class SoftibActive : public SoftibTest {
protected:
    axon_dev_cq_t  *shared_cq_ = nullptr;
    std::vector<Qp> idle_;

    void SetUp() override
    {
        SoftibTest::SetUp();
        env_.set("AXON_SOFTIB_PROGRESS_THREAD", "n");   /* every pass is one of ours */
    }

    /* kIdleQps RC QPs connected in pairs, in RTS, nothing posted */
    void make_idle_qps()
    {
        shared_cq_ = dev_.cq(16);
        ASSERT_NE(nullptr, shared_cq_);
        idle_.resize(kIdleQps);
        for (int i = 0; i < kIdleQps; i++) {
            ASSERT_EQ(0, dev_.qp(&idle_[i], AXON_DEV_QPT_RC, 1, nullptr, 0, 4, shared_cq_,
                                 shared_cq_)) << "QP " << i;
        }
        for (int i = 0; i < kIdleQps; i += 2) {
            ASSERT_EQ(0, dev_.connect(idle_[i], idle_[i + 1])) << "pair " << i / 2;
        }
    }

    /* Visits of kPolls passes (each poll_cq is one) */
    uint64_t visits_of_polls(axon_dev_cq_t *cq)
    {
        uint64_t before = softib_qp_visits(dev_.ctx);
        axon_dev_wc_t wc;

        for (int i = 0; i < kPolls; i++) {
            EXPECT_EQ(0, axon_dev_poll_cq(cq, 1, &wc));
        }
        return softib_qp_visits(dev_.ctx) - before;
    }
};

/* Brought up and left alone, a thousand QPs are visited by no pass. */
TEST_F(SoftibActive, IdleQpsAreNotVisited)
{
    axon_dev_wc_t wc;

    open_dev();
    ASSERT_NO_FATAL_FAILURE(make_idle_qps());
    /* modify_qp activated each; one pass finds them idle and drops them */
    EXPECT_EQ(0, axon_dev_poll_cq(shared_cq_, 1, &wc));
    EXPECT_EQ(0u, visits_of_polls(shared_cq_)) << kIdleQps << " idle QPs visited";
}

/*
 * Among the idle ones, a pair exchanging RC sends is visited (a pass of a
 * device walking every QP would visit a thousand at once), and once its
 * messages are acknowledged it leaves the list.
 */
TEST_F(SoftibActive, BusyPairIsVisitedAloneAndLeavesWhenDone)
{
    const int kMsgs = 50;
    axon_dev_send_wr_t wr, *bad = nullptr;
    axon_dev_recv_wr_t rwr, *rbad = nullptr;
    axon_dev_sge_t sge, rsge;
    axon_dev_wc_t wc[kMsgs];
    Qp a, b;

    open_dev();
    ASSERT_NO_FATAL_FAILURE(make_idle_qps());
    ASSERT_NO_FATAL_FAILURE(make_pair(AXON_DEV_QPT_RC, &a, &b));
    Buf sbuf = dev_.reg(64, 0);
    Buf rbuf = dev_.reg(64 * kMsgs, AXON_DEV_ACCESS_LOCAL_WRITE);
    EXPECT_EQ(0, axon_dev_poll_cq(a.scq, 1, wc));   /* the bring-up's activations drained */
    ASSERT_EQ(0u, visits_of_polls(a.scq));

    uint64_t before = softib_qp_visits(dev_.ctx);
    for (int i = 0; i < kMsgs; i++) {
        memset(&rwr, 0, sizeof(rwr));
        rsge        = {rbuf.addr(64 * i), 64, rbuf.lkey()};
        rwr.wr_id   = i;
        rwr.sg_list = &rsge;
        rwr.num_sge = 1;
        ASSERT_EQ(0, axon_dev_post_recv(b.qp, &rwr, &rbad));
    }
    for (int i = 0; i < kMsgs; i++) {
        make_wr(&wr, &sge, i, AXON_DEV_WR_SEND, sbuf.ptr, 64, sbuf.lkey());
        ASSERT_EQ(0, axon_dev_post_send(a.qp, &wr, &bad));
    }
    ASSERT_EQ(kMsgs, poll_n(b.rcq, kMsgs, wc));
    ASSERT_EQ(kMsgs, poll_n(a.scq, kMsgs, wc));
    for (int i = 0; i < kMsgs; i++) {
        EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc[i].status) << wc_status_name(wc[i].status);
    }
    uint64_t busy = softib_qp_visits(dev_.ctx) - before;
    EXPECT_GT(busy, 0u) << "the sending pair was never visited";
    EXPECT_LT(busy, (uint64_t)kIdleQps) << "idle QPs were visited while a pair was busy";
    /* every packet is acknowledged: no timer, nothing to send, nothing to answer */
    EXPECT_EQ(0u, visits_of_polls(a.scq)) << "a finished pair stayed on the active list";
}

/*
 * A send to a peer that never answers leaves its QP waiting for the
 * retransmission timer only: no pass visits it until the timer is due,
 * which still fires (retry_cnt 1: two timeouts, then RETRY_EXC_ERR).
 */
TEST_F(SoftibActive, QpWaitingForATimerIsVisitedWhenItIsDue)
{
    const uint8_t kTimeout67ms = 14;
    axon_dev_send_wr_t wr, *bad = nullptr;
    axon_dev_sge_t sge;
    axon_dev_wc_t wc;
    Qp a, silent;

    open_dev();
    ASSERT_EQ(0, dev_.qp(&a, AXON_DEV_QPT_RC));
    ASSERT_EQ(0, dev_.qp(&silent, AXON_DEV_QPT_RC));   /* left in RESET: drops what comes */
    ASSERT_EQ(0, dev_.up(a, silent.qpn(), dev_.gid, kPsnB, kPsnA, kTimeout67ms, 1));
    Buf sbuf = dev_.reg(64, 0);
    make_wr(&wr, &sge, 1, AXON_DEV_WR_SEND, sbuf.ptr, 64, sbuf.lkey());
    double sent = axon_test_time();
    ASSERT_EQ(0, axon_dev_post_send(a.qp, &wr, &bad));   /* its pass sends the packet */
    EXPECT_EQ(0, axon_dev_poll_cq(a.scq, 1, &wc));      /* ... this one delivers it, dropped */
    uint64_t visits = visits_of_polls(a.scq);
    if (axon_test_time() - sent < 0.060) {   /* the polls ended before the timer was due */
        EXPECT_EQ(0u, visits) << "a QP waiting for its timer was visited by every pass";
    }
    ASSERT_TRUE(poll_one(a.scq, &wc)) << "the retransmission timer never fired";
    EXPECT_EQ(AXON_DEV_WC_RETRY_EXC_ERR, wc.status) << wc_status_name(wc.status);
    EXPECT_GE(axon_test_time() - sent, 0.12) << "two 67 ms timeouts";
}

/*
 * A CQ with completions in it returns them at once, as a NIC's CQ would:
 * a pass first would only put the packets that arrived meanwhile (and the
 * ACKs they ask for) between the consumer and what it could already have.
 * Only an empty CQ's poll runs the engine.
 */
TEST_F(SoftibActive, CompletionsAlreadyThereAreReturnedBeforeAPass)
{
    const int kMsgs = 4;
    axon_dev_wc_t wc[kMsgs + 1];
    Qp a, b;

    open_dev();
    ASSERT_NO_FATAL_FAILURE(make_pair(AXON_DEV_QPT_RC, &a, &b));
    Buf sbuf = dev_.reg(64, 0);
    Buf rbuf = dev_.reg(64 * (kMsgs + 3), AXON_DEV_ACCESS_LOCAL_WRITE);
    for (int i = 0; i <= kMsgs + 2; i++) {
        ASSERT_EQ(0, post_recv(b.qp, i, rbuf.ptr + 64 * i, 64, rbuf.lkey()));
    }
    for (int i = 0; i < kMsgs; i++) {
        ASSERT_EQ(0, post_send_op(a.qp, i, AXON_DEV_WR_SEND, sbuf.ptr, 64, sbuf.lkey()));
    }
    /* the sender's completions mean the receiver's are all in b.rcq */
    ASSERT_EQ(kMsgs, poll_n(a.scq, kMsgs, wc));
    /* one more message on the wire (its post's pass sent it), not received yet */
    ASSERT_EQ(0, post_send_op(a.qp, kMsgs, AXON_DEV_WR_SEND, sbuf.ptr, 64, sbuf.lkey()));
    EXPECT_EQ(kMsgs, axon_dev_poll_cq(b.rcq, kMsgs + 1, wc))
        << "the poll ran a pass before returning what was there";
    for (int i = 0; i < kMsgs; i++) {
        EXPECT_EQ((uint64_t)i, wc[i].wr_id);
    }
    /* now empty: the next poll runs the engine and finds the last one */
    ASSERT_EQ(1, poll_n(b.rcq, 1, wc));
    EXPECT_EQ((uint64_t)kMsgs, wc[0].wr_id);
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc[0].status) << wc_status_name(wc[0].status);
    ASSERT_EQ(1, poll_n(a.scq, 1, wc));

    /* A poll for no entries is a call for progress, full CQ or not: with one message in
     * b.rcq and one on the wire, it receives the second. */
    ASSERT_EQ(0, post_send_op(a.qp, kMsgs + 1, AXON_DEV_WR_SEND, sbuf.ptr, 64, sbuf.lkey()));
    ASSERT_EQ(1, poll_n(a.scq, 1, wc));
    ASSERT_EQ(0, post_send_op(a.qp, kMsgs + 2, AXON_DEV_WR_SEND, sbuf.ptr, 64, sbuf.lkey()));
    EXPECT_EQ(0, axon_dev_poll_cq(b.rcq, 0, wc));
    EXPECT_EQ(2, axon_dev_poll_cq(b.rcq, kMsgs, wc)) << "the poll for none ran no pass";
    ASSERT_EQ(1, poll_n(a.scq, 1, wc));
}

} // namespace
