/*
 * softib's cross-channel communication (seed §8.9, "CORE-Direct") at the
 * device layer, one test per rule the manual states:
 *   - §8.9.2.1 the capability bit and calc_cap (CAP_MASK takes them away);
 *   - §8.9.2.2 CQs marked CROSS_CHANNEL, IGNORE_OVERRUN keeping a CQ nobody
 *     polls usable (a WAIT still counts what it dropped);
 *   - §8.9.2.3 managed send / receive queues hold their WRs until enabled;
 *   - §8.9.3 WAIT(n), SEND_ENABLE(n), RECV_ENABLE(n), WAIT_EN_LAST ending a
 *     task list, the task-list post, CALC sends reduced in network order
 *     (§8.9.3.1);
 * plus a two-QP chain the device runs while the application sleeps, and
 * the error cases: bad WRs refused at post time (EINVAL), and an error in a
 * chain completing the rest of the chain in error instead of hanging.
 */
#include "softib_env.h"

#include <endian.h>

#include <random>

namespace {

const int      kLocalWrite  = AXON_DEV_ACCESS_LOCAL_WRITE;
const uint32_t kXchanCq     = AXON_DEV_CQ_CREATE_CROSS_CHANNEL | AXON_DEV_CQ_IGNORE_OVERRUN;
const uint32_t kXchan       = AXON_DEV_QP_CREATE_CROSS_CHANNEL;
const uint32_t kManagedSend = AXON_DEV_QP_CREATE_MANAGED_SEND;
const uint32_t kManagedRecv = AXON_DEV_QP_CREATE_MANAGED_RECV;
const double   kQuiet       = 0.2;   /* long enough for a held WR to have gone if it could */

axon_dev_send_wr_t wait_wr(axon_dev_cq_t *cq, int count, unsigned flags = AXON_DEV_SEND_SIGNALED)
{
    axon_dev_send_wr_t wr;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id                = 0xa000 + count;
    wr.opcode               = AXON_DEV_WR_CQE_WAIT;
    wr.send_flags           = flags;
    wr.wr.cqe_wait.cq       = cq;
    wr.wr.cqe_wait.cq_count = count;
    return wr;
}

axon_dev_send_wr_t enable_wr(axon_dev_wr_opcode_t opcode, axon_dev_qp_t *qp, int count,
                             unsigned flags = AXON_DEV_SEND_SIGNALED)
{
    axon_dev_send_wr_t wr;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id                   = 0xe000 + count;
    wr.opcode                  = opcode;
    wr.send_flags              = flags;
    wr.wr.wqe_enable.qp        = qp;
    wr.wr.wqe_enable.wqe_count = count;
    return wr;
}

int post_wr(axon_dev_qp_t *qp, axon_dev_send_wr_t wr)
{
    axon_dev_send_wr_t *bad = nullptr;
    return axon_dev_post_send(qp, &wr, &bad);
}

/* The next completion of cq must be (opcode, status[, wr_id]). */
void expect_wc(axon_dev_cq_t *cq, axon_dev_wc_opcode_t opcode, axon_dev_wc_status_t status,
               const char *what)
{
    axon_dev_wc_t wc;
    ASSERT_TRUE(poll_one(cq, &wc)) << what << ": no completion";
    EXPECT_EQ(status, wc.status) << what << ": " << wc_status_name(wc.status);
    if (status == AXON_DEV_WC_SUCCESS) {
        EXPECT_EQ(opcode, wc.opcode) << what;
    }
}

class SoftibXchannel : public SoftibTest {
protected:
    /* a (created with flags_a) and b (flags_b), their CQs cross-channel, connected, RTS */
    void pair(Qp *a, Qp *b, uint32_t flags_a, uint32_t flags_b = 0)
    {
        ASSERT_EQ(0, dev_.qp(a, AXON_DEV_QPT_RC, 1, nullptr, 0, 64,
                             dev_.cq(256, nullptr, kXchanCq), dev_.cq(256, nullptr, kXchanCq),
                             flags_a));
        ASSERT_EQ(0, dev_.qp(b, AXON_DEV_QPT_RC, 1, nullptr, 0, 64,
                             dev_.cq(256, nullptr, kXchanCq), dev_.cq(256, nullptr, kXchanCq),
                             flags_b));
        ASSERT_EQ(0, dev_.connect(*a, *b));
    }

    Buf buf(size_t len) { return dev_.reg(len, kLocalWrite); }
};

/* ---------------------------------------------------------------- §8.9.2 resources */

TEST_F(SoftibXchannel, DeviceReportsCrossChannelAndItsCalcCapabilities)
{
    open_dev();
    const axon_dev_attr_t &a = dev_.attr;
    EXPECT_TRUE(a.cap_flags & AXON_DEV_CAP_CROSS_CHANNEL);
    EXPECT_EQ(7u, a.cross_channel.data_types);   /* INT, UINT, FLOAT */
    EXPECT_EQ(1u << AXON_DEV_CALC_DATA_SIZE_64_BIT, a.cross_channel.data_sizes);
    for (unsigned op : {AXON_DEV_CALC_OP_ADD, AXON_DEV_CALC_OP_BAND, AXON_DEV_CALC_OP_BXOR,
                        AXON_DEV_CALC_OP_BOR, AXON_DEV_CALC_OP_MAX, AXON_DEV_CALC_OP_MIN}) {
        EXPECT_TRUE(a.cross_channel.int_ops & (1ull << op)) << op;
        EXPECT_TRUE(a.cross_channel.uint_ops & (1ull << op)) << op;
    }
    EXPECT_EQ((1ull << AXON_DEV_CALC_OP_ADD) | (1ull << AXON_DEV_CALC_OP_MAX) |
              (1ull << AXON_DEV_CALC_OP_MIN), a.cross_channel.fp_ops);
    EXPECT_EQ(32u, a.cross_channel.max_calc_vector);
}

TEST_F(SoftibXchannel, CapMaskTakesCrossChannelAway)
{
    env_.set("AXON_SOFTIB_CAP_MASK", "cross_channel");
    open_dev();
    axon_dev_cq_t *cq = nullptr;
    Qp q;
    EXPECT_FALSE(dev_.attr.cap_flags & AXON_DEV_CAP_CROSS_CHANNEL);
    EXPECT_EQ(0u, dev_.attr.cross_channel.data_types | dev_.attr.cross_channel.int_ops |
                  dev_.attr.cross_channel.max_calc_vector);
    EXPECT_EQ(EOPNOTSUPP, axon_dev_create_cq_ex(dev_.ctx, 4, nullptr, nullptr, 0,
                                                AXON_DEV_CQ_CREATE_CROSS_CHANNEL, &cq));
    EXPECT_EQ(EOPNOTSUPP, dev_.qp(&q, AXON_DEV_QPT_RC, 1, nullptr, 0, 64, nullptr, nullptr,
                                  kXchan));
}

TEST_F(SoftibXchannel, UnknownCreateFlagsAreInvalid)
{
    open_dev();
    axon_dev_cq_t *cq = nullptr;
    axon_dev_srq_t *srq = nullptr;
    Qp q;
    EXPECT_EQ(EINVAL, axon_dev_create_cq_ex(dev_.ctx, 4, nullptr, nullptr, 0, 1u << 7, &cq));
    EXPECT_EQ(EINVAL, dev_.qp(&q, AXON_DEV_QPT_RC, 1, nullptr, 0, 64, nullptr, nullptr, 1u << 9));
    ASSERT_EQ(0, dev_.srq(16, 1, &srq));
    EXPECT_EQ(EINVAL, dev_.qp(&q, AXON_DEV_QPT_RC, 1, srq, 0, 64, nullptr, nullptr,
                              kXchan | kManagedRecv)) << "a managed SRQ";
}

/* IGNORE_OVERRUN: a CQ only the device watches fills up and stays usable */
TEST_F(SoftibXchannel, IgnoreOverrunCqStaysUsableAndWaitsCountWhatItDropped)
{
    open_dev();
    Qp x, x2, m, md;
    axon_dev_cq_t *small = dev_.cq(2, nullptr, kXchanCq);
    ASSERT_EQ(0, dev_.qp(&x, AXON_DEV_QPT_RC, 1, nullptr, 0, 64, small));
    ASSERT_EQ(0, dev_.qp(&x2, AXON_DEV_QPT_RC));
    ASSERT_EQ(0, dev_.connect(x, x2));
    pair(&m, &md, kXchan);
    Buf b = buf(64);
    for (int i = 0; i < 4; ++i) {
        ASSERT_EQ(0, post_recv(x2.qp, i, b.ptr, 64, b.lkey()));
    }
    ASSERT_EQ(0, post_wr(m.qp, wait_wr(small, 4)));
    for (int i = 0; i < 4; ++i) {
        ASSERT_EQ(0, post_send_op(x.qp, 1 + i, AXON_DEV_WR_SEND, b.ptr, 8, b.lkey()));
    }
    expect_wc(m.scq, AXON_DEV_WC_CQE_WAIT, AXON_DEV_WC_SUCCESS, "WAIT for 4 on a CQ of 2");
    axon_dev_wc_t wc[4];
    ASSERT_EQ(2, axon_dev_poll_cq(small, 4, wc)) << "full, not in error";
    EXPECT_EQ(3u, wc[0].wr_id) << "the oldest went";
    EXPECT_EQ(4u, wc[1].wr_id);
    axon_dev_async_event_t ev;
    EXPECT_FALSE(wait_async(dev_.ctx, AXON_DEV_EVENT_CQ_ERR, &ev, 0.05));
}

/* §8.9.2.2: the manual sets the overrun-ignore bit with (exp_)modify_cq */
TEST_F(SoftibXchannel, ModifyCqSetsAndClearsIgnoreOverrun)
{
    open_dev();
    Qp x, x2;
    axon_dev_cq_t *small = dev_.cq(2, nullptr, AXON_DEV_CQ_CREATE_CROSS_CHANNEL);
    ASSERT_EQ(0, dev_.qp(&x, AXON_DEV_QPT_RC, 1, nullptr, 0, 64, small));
    ASSERT_EQ(0, dev_.qp(&x2, AXON_DEV_QPT_RC));
    ASSERT_EQ(0, dev_.connect(x, x2));
    EXPECT_EQ(EINVAL, axon_dev_modify_cq(small, 1u << 7, AXON_DEV_CQ_ATTR_CAP_FLAGS));
    EXPECT_EQ(EINVAL, axon_dev_modify_cq(small, AXON_DEV_CQ_IGNORE_OVERRUN, 1 << 5));
    ASSERT_EQ(0, axon_dev_modify_cq(small, AXON_DEV_CQ_IGNORE_OVERRUN,
                                    AXON_DEV_CQ_ATTR_CAP_FLAGS));
    Buf b = buf(64);
    for (int i = 0; i < 8; ++i) {
        ASSERT_EQ(0, post_recv(x2.qp, i, b.ptr, 64, b.lkey()));
    }
    for (int i = 0; i < 4; ++i) {
        ASSERT_EQ(0, post_send_op(x.qp, 1 + i, AXON_DEV_WR_SEND, b.ptr, 8, b.lkey()));
    }
    Qp m, md;
    pair(&m, &md, kXchan);
    ASSERT_EQ(0, post_wr(m.qp, wait_wr(small, 4)));
    expect_wc(m.scq, AXON_DEV_WC_CQE_WAIT, AXON_DEV_WC_SUCCESS, "WAIT for the 4 sends");
    axon_dev_wc_t wc[4];
    axon_dev_async_event_t ev;
    EXPECT_FALSE(wait_async(dev_.ctx, AXON_DEV_EVENT_CQ_ERR, &ev, 0.05)) << "overrun ignored";
    ASSERT_EQ(2, axon_dev_poll_cq(small, 4, wc)) << "full, not in error";
    EXPECT_EQ(3u, wc[0].wr_id) << "the oldest went";

    /* cleared again: the next overrun is the CQ error it would be anywhere */
    ASSERT_EQ(0, axon_dev_modify_cq(small, 0, AXON_DEV_CQ_ATTR_CAP_FLAGS));
    for (int i = 0; i < 4; ++i) {
        ASSERT_EQ(0, post_send_op(x.qp, 10 + i, AXON_DEV_WR_SEND, b.ptr, 8, b.lkey()));
    }
    EXPECT_TRUE(wait_async(dev_.ctx, AXON_DEV_EVENT_CQ_ERR, &ev, kWcTimeout)) << "overrun";
}

/* §8.9.2.3: a managed send queue holds its WRs until a SEND_ENABLE */
TEST_F(SoftibXchannel, ManagedSendQueueHoldsWrsUntilSendEnable)
{
    open_dev();
    Qp b, b2, m, md;
    pair(&b, &b2, kManagedSend);
    pair(&m, &md, kXchan);
    Buf s = buf(64), r = buf(256);
    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(0, post_recv(b2.qp, i, r.ptr + 64 * i, 64, r.lkey()));
        ASSERT_EQ(0, post_send_op(b.qp, 1 + i, AXON_DEV_WR_SEND, s.ptr, 16, s.lkey()));
    }
    EXPECT_TRUE(no_wc(b.scq, kQuiet)) << "held";
    EXPECT_TRUE(no_wc(b2.rcq, 0.01));
    ASSERT_EQ(0, post_wr(m.qp, enable_wr(AXON_DEV_WR_SEND_ENABLE, b.qp, 1)));
    expect_wc(m.scq, AXON_DEV_WC_SEND_ENABLE, AXON_DEV_WC_SUCCESS, "SEND_ENABLE");
    expect_wc(b.scq, AXON_DEV_WC_SEND, AXON_DEV_WC_SUCCESS, "the one enabled");
    EXPECT_TRUE(no_wc(b.scq, kQuiet)) << "only one";
    /* count 0: everything posted so far */
    ASSERT_EQ(0, post_wr(m.qp, enable_wr(AXON_DEV_WR_SEND_ENABLE, b.qp, 0)));
    axon_dev_wc_t wc[2];
    ASSERT_EQ(2, poll_n(b.scq, 2, wc));
    EXPECT_EQ(3u, wc[1].wr_id);
    ASSERT_EQ(3, poll_n(b2.rcq, 3, wc));
}

TEST_F(SoftibXchannel, ManagedRecvQueueHoldsWrsUntilRecvEnable)
{
    open_dev();
    Qp s, r, m, md;
    pair(&s, &r, 0, kManagedRecv);
    pair(&m, &md, kXchan);
    Buf sb = buf(64), rb = buf(64);
    ASSERT_EQ(0, post_recv(r.qp, 7, rb.ptr, 64, rb.lkey()));
    ASSERT_EQ(0, post_send_op(s.qp, 1, AXON_DEV_WR_SEND, sb.ptr, 16, sb.lkey()));
    EXPECT_TRUE(no_wc(r.rcq, kQuiet)) << "the receive is held: the sender gets RNR";
    EXPECT_TRUE(no_wc(s.scq, 0.01));
    ASSERT_EQ(0, post_wr(m.qp, enable_wr(AXON_DEV_WR_RECV_ENABLE, r.qp, 1)));
    expect_wc(m.scq, AXON_DEV_WC_RECV_ENABLE, AXON_DEV_WC_SUCCESS, "RECV_ENABLE");
    expect_wc(r.rcq, AXON_DEV_WC_RECV, AXON_DEV_WC_SUCCESS, "the enabled receive");
    expect_wc(s.scq, AXON_DEV_WC_SEND, AXON_DEV_WC_SUCCESS, "the send");
}

/* ---------------------------------------------------------------- §8.9.3 tasks */

/* WAIT(n) completes when n completions reached the CQ, polled or not; its queue waits */
TEST_F(SoftibXchannel, WaitHoldsItsQueueUntilTheCqCountedN)
{
    open_dev();
    Qp x, x2, m, md;
    pair(&x, &x2, 0);
    pair(&m, &md, kXchan);
    Buf b = buf(64);
    ASSERT_EQ(0, post_recv(x2.qp, 1, b.ptr, 64, b.lkey()));
    ASSERT_EQ(0, post_recv(x2.qp, 2, b.ptr, 64, b.lkey()));
    ASSERT_EQ(0, post_recv(md.qp, 3, b.ptr, 64, b.lkey()));
    ASSERT_EQ(0, post_wr(m.qp, wait_wr(x.scq, 2)));
    ASSERT_EQ(0, post_send_op(m.qp, 9, AXON_DEV_WR_SEND, b.ptr, 8, b.lkey()));
    ASSERT_EQ(0, post_send_op(x.qp, 1, AXON_DEV_WR_SEND, b.ptr, 8, b.lkey()));
    expect_wc(x.scq, AXON_DEV_WC_SEND, AXON_DEV_WC_SUCCESS, "first");
    EXPECT_TRUE(no_wc(md.rcq, kQuiet)) << "one completion of two: the SEND behind the WAIT waits";
    ASSERT_EQ(0, post_send_op(x.qp, 2, AXON_DEV_WR_SEND, b.ptr, 8, b.lkey()));
    expect_wc(md.rcq, AXON_DEV_WC_RECV, AXON_DEV_WC_SUCCESS, "the SEND after the WAIT");
    expect_wc(m.scq, AXON_DEV_WC_CQE_WAIT, AXON_DEV_WC_SUCCESS, "the WAIT, first");
    expect_wc(m.scq, AXON_DEV_WC_SEND, AXON_DEV_WC_SUCCESS, "then the SEND");
}

/* WAIT_EN_LAST ends a task list: the next list counts from past its largest count */
TEST_F(SoftibXchannel, WaitEnLastEndsATaskListAndMovesTheCount)
{
    open_dev();
    Qp x, x2, m, md;
    pair(&x, &x2, 0);
    pair(&m, &md, kXchan);
    Buf b = buf(64);
    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(0, post_recv(x2.qp, i, b.ptr, 64, b.lkey()));
    }
    const unsigned last = AXON_DEV_SEND_SIGNALED | AXON_DEV_SEND_WAIT_EN_LAST;
    ASSERT_EQ(0, post_wr(m.qp, wait_wr(x.scq, 1, last)));   /* completion 1 */
    ASSERT_EQ(0, post_wr(m.qp, wait_wr(x.scq, 1, last)));   /* completion 2 */
    ASSERT_EQ(0, post_wr(m.qp, wait_wr(x.scq, 1)));         /* completion 3 ... */
    ASSERT_EQ(0, post_wr(m.qp, wait_wr(x.scq, 1)));         /* ... the same list: 3 too */
    for (int i = 1; i <= 3; ++i) {
        ASSERT_EQ(0, post_send_op(x.qp, i, AXON_DEV_WR_SEND, b.ptr, 8, b.lkey()));
        expect_wc(x.scq, AXON_DEV_WC_SEND, AXON_DEV_WC_SUCCESS, "send");
        axon_dev_wc_t wc[2];
        int want = (i < 3) ? 1 : 2;
        ASSERT_EQ(want, poll_n(m.scq, want, wc)) << "after completion " << i;
        EXPECT_TRUE(no_wc(m.scq, (i < 3) ? kQuiet : 0.01)) << "after completion " << i;
    }
}

/* §8.9.3: one task list to several QPs: QP B's managed send waits for A's completion */
TEST_F(SoftibXchannel, TwoQpChainCompletesWhileTheApplicationSleeps)
{
    env_.set("AXON_SOFTIB_PROGRESS_THREAD", "1");
    open_dev();
    Qp a, a2, b, b2, m, md;
    pair(&a, &a2, 0);
    pair(&b, &b2, kXchan | kManagedSend);
    pair(&m, &md, kXchan);
    Buf src = buf(64), ra = buf(64), rb = buf(64);
    axon_test_fill(src.ptr, 64, 0x5eed);
    ASSERT_EQ(0, post_recv(a2.qp, 1, ra.ptr, 64, ra.lkey()));
    ASSERT_EQ(0, post_recv(b2.qp, 2, rb.ptr, 64, rb.lkey()));

    axon_dev_sge_t     sa, sb;
    axon_dev_send_wr_t send_a, send_b, tasks_m[2];
    make_wr(&send_a, &sa, 10, AXON_DEV_WR_SEND, src.ptr, 64, src.lkey());
    make_wr(&send_b, &sb, 20, AXON_DEV_WR_SEND, src.ptr, 64, src.lkey());
    tasks_m[0]      = wait_wr(a.scq, 1);
    tasks_m[1]      = enable_wr(AXON_DEV_WR_SEND_ENABLE, b.qp, 1,
                                AXON_DEV_SEND_SIGNALED | AXON_DEV_SEND_WAIT_EN_LAST);
    tasks_m[0].next = &tasks_m[1];
    /* managed WRs before the ENABLE that releases them (EINVAL otherwise) */
    axon_dev_task_t t[3], *bad = nullptr;
    memset(t, 0, sizeof(t));
    t[0].task_type = AXON_DEV_TASK_SEND; t[0].item.qp = b.qp; t[0].item.send_wr = &send_b;
    t[1].task_type = AXON_DEV_TASK_SEND; t[1].item.qp = m.qp; t[1].item.send_wr = tasks_m;
    t[2].task_type = AXON_DEV_TASK_SEND; t[2].item.qp = a.qp; t[2].item.send_wr = &send_a;
    t[0].next = &t[1];
    t[1].next = &t[2];
    ASSERT_EQ(0, axon_dev_post_task(dev_.ctx, t, &bad));

    /* no call into Axon from here: the progress thread is the NIC */
    double deadline = axon_test_time() + kWcTimeout;
    usleep(100000);
    while ((axon_test_check(rb.ptr, 64, 0x5eed) != -1) && (axon_test_time() < deadline)) {
        usleep(10000);
    }
    EXPECT_EQ(-1, axon_test_check(rb.ptr, 64, 0x5eed)) << "B's send arrived before any poll";
    EXPECT_EQ(-1, axon_test_check(ra.ptr, 64, 0x5eed));
    expect_wc(b2.rcq, AXON_DEV_WC_RECV, AXON_DEV_WC_SUCCESS, "B's message");
    expect_wc(b.scq, AXON_DEV_WC_SEND, AXON_DEV_WC_SUCCESS, "B's send");
    expect_wc(a.scq, AXON_DEV_WC_SEND, AXON_DEV_WC_SUCCESS, "A's send");
    expect_wc(m.scq, AXON_DEV_WC_CQE_WAIT, AXON_DEV_WC_SUCCESS, "the WAIT");
    expect_wc(m.scq, AXON_DEV_WC_SEND_ENABLE, AXON_DEV_WC_SUCCESS, "the SEND_ENABLE");
}

/* CALC (§8.9.3, §8.9.3.1): the sender's device reduces its SGEs, data in network order */
struct CalcCase {
    axon_dev_calc_data_type_t type;
    axon_dev_calc_op_t        op;
};

uint64_t model_calc(const CalcCase &c, uint64_t a, uint64_t b)
{
    double x, y;
    if (c.type == AXON_DEV_CALC_DATA_TYPE_FLOAT) {
        memcpy(&x, &a, 8);
        memcpy(&y, &b, 8);
        x = (c.op == AXON_DEV_CALC_OP_ADD) ? x + y : (c.op == AXON_DEV_CALC_OP_MAX) ?
            std::max(x, y) : std::min(x, y);
        memcpy(&a, &x, 8);
        return a;
    }
    bool sgn = (c.type == AXON_DEV_CALC_DATA_TYPE_INT);
    switch (c.op) {
    case AXON_DEV_CALC_OP_ADD:  return a + b;
    case AXON_DEV_CALC_OP_BAND: return a & b;
    case AXON_DEV_CALC_OP_BXOR: return a ^ b;
    case AXON_DEV_CALC_OP_BOR:  return a | b;
    case AXON_DEV_CALC_OP_MAX:  return (sgn ? (int64_t)a < (int64_t)b : a < b) ? b : a;
    default:                    return (sgn ? (int64_t)b < (int64_t)a : b < a) ? b : a;
    }
}

TEST_F(SoftibXchannel, CalcSendCarriesTheReductionOfItsSgesInNetworkOrder)
{
    open_dev();
    Qp c, c2;
    pair(&c, &c2, kXchan);
    const int kElems = 32, kOps = 3;
    Buf ops = buf(kOps * kElems * 8), res = buf(kElems * 8);
    std::mt19937_64 rng(42);
    std::vector<CalcCase> cases;
    for (auto t : {AXON_DEV_CALC_DATA_TYPE_INT, AXON_DEV_CALC_DATA_TYPE_UINT}) {
        for (auto op : {AXON_DEV_CALC_OP_ADD, AXON_DEV_CALC_OP_BAND, AXON_DEV_CALC_OP_BXOR,
                        AXON_DEV_CALC_OP_BOR, AXON_DEV_CALC_OP_MAX, AXON_DEV_CALC_OP_MIN}) {
            cases.push_back({t, op});
        }
    }
    for (auto op : {AXON_DEV_CALC_OP_ADD, AXON_DEV_CALC_OP_MAX, AXON_DEV_CALC_OP_MIN}) {
        cases.push_back({AXON_DEV_CALC_DATA_TYPE_FLOAT, op});
    }
    for (const CalcCase &cc : cases) {
        SCOPED_TRACE(testing::Message() << "type " << cc.type << " op " << cc.op);
        uint64_t host[kOps][kElems], want[kElems];
        for (int k = 0; k < kOps; ++k) {
            for (int i = 0; i < kElems; ++i) {
                host[k][i] = rng();
                if (cc.type == AXON_DEV_CALC_DATA_TYPE_FLOAT) {
                    double d = std::uniform_real_distribution<double>(-1e6, 1e6)(rng);
                    memcpy(&host[k][i], &d, 8);
                }
                uint64_t be = htobe64(host[k][i]);
                memcpy(ops.ptr + (k * kElems + i) * 8, &be, 8);
                want[i] = k ? model_calc(cc, want[i], host[k][i]) : host[k][i];
            }
        }
        memset(res.ptr, 0, res.len);
        ASSERT_EQ(0, post_recv(c2.qp, 1, res.ptr, kElems * 8, res.lkey()));
        axon_dev_sge_t sge[kOps];
        for (int k = 0; k < kOps; ++k) {
            sge[k] = {ops.addr(k * kElems * 8), kElems * 8, ops.lkey()};
        }
        axon_dev_send_wr_t wr;
        memset(&wr, 0, sizeof(wr));
        wr.opcode         = AXON_DEV_WR_SEND;
        wr.send_flags     = AXON_DEV_SEND_SIGNALED | AXON_DEV_SEND_WITH_CALC;
        wr.sg_list        = sge;
        wr.num_sge        = kOps;
        wr.calc.calc_op   = cc.op;
        wr.calc.data_type = cc.type;
        wr.calc.data_size = AXON_DEV_CALC_DATA_SIZE_64_BIT;
        ASSERT_EQ(0, post_wr(c.qp, wr));
        axon_dev_wc_t wc;
        ASSERT_TRUE(poll_one(c.scq, &wc));
        EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status);
        EXPECT_EQ((uint32_t)kElems * 8, wc.byte_len);
        ASSERT_TRUE(poll_one(c2.rcq, &wc));
        EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status);
        EXPECT_EQ((uint32_t)kElems * 8, wc.byte_len) << "one result vector";
        for (int i = 0; i < kElems; ++i) {
            uint64_t be;
            memcpy(&be, res.ptr + i * 8, 8);
            ASSERT_EQ(want[i], be64toh(be)) << "element " << i;
        }
    }
}

/* ---------------------------------------------------------------- errors */

TEST_F(SoftibXchannel, TasksAndCalcNeedACrossChannelQp)
{
    open_dev();
    Qp p, p2, x, x2;
    pair(&p, &p2, 0);
    pair(&x, &x2, kManagedSend);
    Buf b = buf(64);
    EXPECT_EQ(EINVAL, post_wr(p.qp, wait_wr(x.scq, 1)));
    EXPECT_EQ(EINVAL, post_wr(p.qp, enable_wr(AXON_DEV_WR_SEND_ENABLE, x.qp, 0)));
    EXPECT_EQ(EINVAL, post_send_op(p.qp, 1, AXON_DEV_WR_SEND, b.ptr, 8, b.lkey(),
                                   AXON_DEV_SEND_WITH_CALC));
}

TEST_F(SoftibXchannel, WaitOnACqOfAnotherContextOrWithoutTheFlagIsInvalid)
{
    open_dev();
    Qp m, md;
    pair(&m, &md, kXchan);
    SoftibDev other;
    ASSERT_EQ(0, other.open());
    EXPECT_EQ(EINVAL, post_wr(m.qp, wait_wr(other.cq(16, nullptr, kXchanCq), 1)));
    EXPECT_EQ(EINVAL, post_wr(m.qp, wait_wr(dev_.cq(16), 1))) << "a CQ without CROSS_CHANNEL";
    EXPECT_EQ(EINVAL, post_wr(m.qp, wait_wr(nullptr, 1)));
    EXPECT_EQ(EINVAL, post_wr(m.qp, wait_wr(m.scq, -1)));
}

TEST_F(SoftibXchannel, EnableBeyondThePostedWrsOrOfAnUnmanagedQueueIsInvalid)
{
    open_dev();
    Qp b, b2, m, md;
    pair(&b, &b2, kManagedSend | kManagedRecv);
    pair(&m, &md, kXchan);
    Buf s = buf(64);
    ASSERT_EQ(0, post_send_op(b.qp, 1, AXON_DEV_WR_SEND, s.ptr, 8, s.lkey()));
    ASSERT_EQ(0, post_recv(b.qp, 2, s.ptr, 64, s.lkey()));
    EXPECT_EQ(EINVAL, post_wr(m.qp, enable_wr(AXON_DEV_WR_SEND_ENABLE, b.qp, 2)));
    EXPECT_EQ(EINVAL, post_wr(m.qp, enable_wr(AXON_DEV_WR_RECV_ENABLE, b.qp, 2)));
    EXPECT_EQ(EINVAL, post_wr(m.qp, enable_wr(AXON_DEV_WR_SEND_ENABLE, b.qp, -1)));
    EXPECT_EQ(EINVAL, post_wr(m.qp, enable_wr(AXON_DEV_WR_SEND_ENABLE, md.qp, 0)))
        << "md's send queue is not managed";
    EXPECT_EQ(EINVAL, post_wr(m.qp, enable_wr(AXON_DEV_WR_RECV_ENABLE, m.qp, 0)));
    /* within the posted ones: accepted */
    EXPECT_EQ(0, post_wr(m.qp, enable_wr(AXON_DEV_WR_SEND_ENABLE, b.qp, 1)));
}

TEST_F(SoftibXchannel, CalcOnAnUnsupportedTypeSizeOpOrLengthIsInvalid)
{
    open_dev();
    Qp c, c2;
    pair(&c, &c2, kXchan);
    Buf b = buf(1024);
    struct Bad {
        int      type, size, op;
        uint32_t len0, len1;
        axon_dev_wr_opcode_t opcode;
        const char *why;
    } bad[] = {
        {AXON_DEV_CALC_DATA_TYPE_FLOAT, 0, AXON_DEV_CALC_OP_BXOR, 8, 8, AXON_DEV_WR_SEND,
         "bitwise on FLOAT"},
        {7, 0, AXON_DEV_CALC_OP_ADD, 8, 8, AXON_DEV_WR_SEND, "no such type"},
        {AXON_DEV_CALC_DATA_TYPE_INT, 1, AXON_DEV_CALC_OP_ADD, 8, 8, AXON_DEV_WR_SEND,
         "no such size"},
        {AXON_DEV_CALC_DATA_TYPE_INT, 0, 9, 8, 8, AXON_DEV_WR_SEND, "no such operation"},
        {AXON_DEV_CALC_DATA_TYPE_INT, 0, AXON_DEV_CALC_OP_ADD, 12, 12, AXON_DEV_WR_SEND,
         "not whole elements"},
        {AXON_DEV_CALC_DATA_TYPE_INT, 0, AXON_DEV_CALC_OP_ADD, 33 * 8, 33 * 8,
         AXON_DEV_WR_SEND, "over max_calc_vector"},
        {AXON_DEV_CALC_DATA_TYPE_INT, 0, AXON_DEV_CALC_OP_ADD, 16, 8, AXON_DEV_WR_SEND,
         "operands of different lengths"},
        {AXON_DEV_CALC_DATA_TYPE_INT, 0, AXON_DEV_CALC_OP_ADD, 8, 8, AXON_DEV_WR_RDMA_WRITE,
         "not a SEND"},
    };
    for (const Bad &x : bad) {
        axon_dev_sge_t sge[2] = {{b.addr(0), x.len0, b.lkey()}, {b.addr(512), x.len1, b.lkey()}};
        axon_dev_send_wr_t wr;
        memset(&wr, 0, sizeof(wr));
        wr.opcode         = x.opcode;
        wr.send_flags     = AXON_DEV_SEND_SIGNALED | AXON_DEV_SEND_WITH_CALC;
        wr.sg_list        = sge;
        wr.num_sge        = 2;
        wr.calc.calc_op   = (axon_dev_calc_op_t)x.op;
        wr.calc.data_type = (axon_dev_calc_data_type_t)x.type;
        wr.calc.data_size = (axon_dev_calc_data_size_t)x.size;
        EXPECT_EQ(EINVAL, post_wr(c.qp, wr)) << x.why;
    }
    EXPECT_EQ(EINVAL, post_send_op(c.qp, 1, AXON_DEV_WR_SEND, b.ptr, 8, b.lkey(),
                                   AXON_DEV_SEND_WAIT_EN_LAST)) << "WAIT_EN_LAST on a SEND";
    EXPECT_TRUE(no_wc(c.scq, 0.01)) << "nothing was posted";
}

TEST_F(SoftibXchannel, PostTaskRefusesABadTaskAndKeepsThoseBefore)
{
    open_dev();
    Qp p, p2;
    pair(&p, &p2, 0);
    Buf b = buf(64);
    axon_dev_recv_wr_t rwr;
    axon_dev_sge_t sge = {b.addr(), 64, b.lkey()};
    memset(&rwr, 0, sizeof(rwr));
    rwr.sg_list = &sge;
    rwr.num_sge = 1;
    axon_dev_task_t t[2], *bad = nullptr;
    memset(t, 0, sizeof(t));
    t[0].task_type = AXON_DEV_TASK_RECV; t[0].item.qp = p2.qp; t[0].item.recv_wr = &rwr;
    t[1].task_type = AXON_DEV_TASK_RECV; t[1].item.qp = p2.qp; t[1].item.recv_wr = &rwr;
    t[1].comp_mask = 1;
    t[0].next = &t[1];
    EXPECT_EQ(EINVAL, axon_dev_post_task(dev_.ctx, t, &bad));
    EXPECT_EQ(&t[1], bad);
    ASSERT_EQ(0, post_send_op(p.qp, 1, AXON_DEV_WR_SEND, b.ptr, 8, b.lkey()));
    expect_wc(p2.rcq, AXON_DEV_WC_RECV, AXON_DEV_WC_SUCCESS, "the first task's receive");
}

/* An error anywhere in a chain completes the rest of it in error: nothing hangs */
TEST_F(SoftibXchannel, ErrorInAChainCompletesItsRemainingWrsInError)
{
    open_dev();
    Qp a, a2, b, b2, m, md;
    pair(&a, &a2, 0);
    pair(&b, &b2, kManagedSend);
    pair(&m, &md, kXchan);
    Buf s = buf(64);
    ASSERT_EQ(0, post_recv(a2.qp, 1, s.ptr, 64, s.lkey()));
    ASSERT_EQ(0, post_send_op(b.qp, 2, AXON_DEV_WR_SEND, s.ptr, 8, s.lkey()));
    ASSERT_EQ(0, post_wr(m.qp, wait_wr(a.scq, 1)));
    ASSERT_EQ(0, post_wr(m.qp, enable_wr(AXON_DEV_WR_SEND_ENABLE, b.qp, 1)));
    ASSERT_EQ(0, post_send_op(a.qp, 3, AXON_DEV_WR_SEND, s.ptr, 8, s.lkey() + 0x100))
        << "a bad lkey: A's send fails";
    expect_wc(a.scq, AXON_DEV_WC_SEND, AXON_DEV_WC_LOC_PROT_ERR, "A's send");
    expect_wc(m.scq, AXON_DEV_WC_CQE_WAIT, AXON_DEV_WC_GENERAL_ERR, "the WAIT on it");
    expect_wc(m.scq, AXON_DEV_WC_SEND_ENABLE, AXON_DEV_WC_WR_FLUSH_ERR, "the ENABLE after");
    expect_wc(b.scq, AXON_DEV_WC_SEND, AXON_DEV_WC_WR_FLUSH_ERR, "B's held send");
    EXPECT_EQ(AXON_DEV_QPS_ERR, query_state(b.qp));
}

TEST_F(SoftibXchannel, CqWithAPendingWaitIsBusy)
{
    open_dev();
    Qp m, md;
    pair(&m, &md, kXchan);
    axon_dev_cq_t *watched = dev_.cq(16, nullptr, kXchanCq);
    ASSERT_EQ(0, post_wr(m.qp, wait_wr(watched, 1)));
    EXPECT_EQ(EBUSY, axon_dev_destroy_cq(watched));
    /* destroying the QP first (the teardown) lets it go */
}

}  // namespace
