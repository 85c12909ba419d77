/*
 * UD: unreliable datagrams with a 40-byte GRH area at the head of each
 * receive buffer (wc_flags GRH, the sender's GID inside, payload after it),
 * the Q_Key checked at the receiver (a mismatch is dropped silently and
 * counted in the port's qkey_viol_cntr), and messages over the path MTU
 * refused at post, as is an address handle of another PD. Address handles
 * need a GRH (the link layer is Ethernet).
 */
#include "softib_env.h"

namespace {

const uint32_t kGrh = 40;

/* struct ibv_grh: the source GID at byte 8, the destination GID at byte 24. */
const size_t kGrhSgidOffset = 8;
const size_t kGrhDgidOffset = 24;

class SoftibUd : public SoftibTest {
protected:
    Qp             a_, b_;
    axon_dev_ah_t *ah_ = nullptr;

    void ud_pair(int sq_sig_all = 1)
    {
        make_pair(AXON_DEV_QPT_UD, &a_, &b_, sq_sig_all);
        if (!HasFatalFailure()) {
            ah_ = dev_.ah(dev_.gid);
            ASSERT_NE(nullptr, ah_);
        }
    }

    int send_ud(const Qp &to, uint64_t wr_id, void *buf, uint32_t len, uint32_t lkey,
                uint32_t qkey = kQkey, unsigned flags = AXON_DEV_SEND_SIGNALED)
    {
        return post_ud_send(a_.qp, wr_id, buf, len, lkey, ah_, to.qpn(), qkey, flags);
    }

    uint32_t qkey_violations()
    {
        axon_dev_port_attr_t port;
        EXPECT_EQ(0, axon_dev_query_port(dev_.ctx, 1, &port));
        return port.qkey_viol_cntr;
    }
};

TEST_F(SoftibUd, GrhAreaHoldsSourceGidPayloadAtOffset40)
{
    axon_dev_wc_t wc;

    open_dev();
    ud_pair();
    Buf sb = dev_.reg(100, 0);
    Buf rb = dev_.reg(kGrh + 200, AXON_DEV_ACCESS_LOCAL_WRITE);
    memset(rb.ptr, 0xcc, rb.len);
    axon_test_fill(sb.ptr, 100, 7);
    ASSERT_EQ(0, post_recv(b_.qp, 1, rb.ptr, kGrh + 200, rb.lkey()));
    ASSERT_EQ(0, send_ud(b_, 2, sb.ptr, 100, sb.lkey()));
    ASSERT_TRUE(poll_one(b_.rcq, &wc));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    EXPECT_TRUE(wc.wc_flags & AXON_DEV_WC_GRH) << "wc_flags GRH";
    EXPECT_EQ(kGrh + 100, wc.byte_len) << "byte_len counts the GRH area";
    EXPECT_EQ(a_.qpn(), wc.src_qp);
    EXPECT_EQ(b_.qpn(), wc.qp_num);
    EXPECT_EQ(0, memcmp(rb.ptr + kGrhSgidOffset, dev_.gid.raw, 16)) << "source GID in the GRH";
    EXPECT_EQ(0, memcmp(rb.ptr + kGrhDgidOffset, dev_.gid.raw, 16)) << "dest GID in the GRH";
    EXPECT_EQ(-1, axon_test_check(rb.ptr + kGrh, 100, 7)) << "payload after the GRH";
    EXPECT_EQ(0xcc, rb.ptr[kGrh + 100]) << "wrote past the message";
    ASSERT_TRUE(poll_one(a_.scq, &wc));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status);
}

TEST_F(SoftibUd, QkeyMismatchDroppedSilentlyAndCounted)
{
    axon_dev_wc_t wc;

    open_dev();
    ud_pair();
    Buf sb = dev_.reg(64, 0);
    Buf rb = dev_.reg(2 * (kGrh + 64), AXON_DEV_ACCESS_LOCAL_WRITE);
    ASSERT_EQ(0, post_recv(b_.qp, 1, rb.ptr, kGrh + 64, rb.lkey()));
    ASSERT_EQ(0, post_recv(b_.qp, 2, rb.ptr + kGrh + 64, kGrh + 64, rb.lkey()));
    uint32_t before = qkey_violations();

    axon_test_fill(sb.ptr, 64, 1);
    ASSERT_EQ(0, send_ud(b_, 10, sb.ptr, 64, sb.lkey(), kQkey + 1));
    ASSERT_TRUE(poll_one(a_.scq, &wc));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << "UD sender does not learn of the drop";
    EXPECT_TRUE(no_wc(b_.rcq, 0.1, &wc)) << "mismatched Q_Key delivered to wr " << wc.wr_id;
    EXPECT_EQ(before + 1, qkey_violations());

    /* the receive it did not consume takes the next good message */
    axon_test_fill(sb.ptr, 64, 2);
    ASSERT_EQ(0, send_ud(b_, 11, sb.ptr, 64, sb.lkey()));
    ASSERT_TRUE(poll_one(b_.rcq, &wc));
    EXPECT_EQ(1u, wc.wr_id);
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status);
    EXPECT_EQ(-1, axon_test_check(rb.ptr + kGrh, 64, 2));
    EXPECT_EQ(AXON_DEV_QPS_RTS, query_state(b_.qp)) << "a Q_Key violation is no QP error";
}

TEST_F(SoftibUd, OverPathMtuRefusedAtPost)
{
    axon_dev_send_wr_t  wr[2];
    axon_dev_sge_t      sge[2];
    axon_dev_send_wr_t *bad = nullptr;
    axon_dev_wc_t       wc;
    const uint32_t      mtu = (uint32_t)axon_dev_mtu_bytes(kPathMtu);

    open_dev();
    ud_pair();
    Buf sb = dev_.reg(mtu + 1, 0);
    Buf rb = dev_.reg(kGrh + mtu, AXON_DEV_ACCESS_LOCAL_WRITE);
    ASSERT_EQ(0, post_recv(b_.qp, 1, rb.ptr, kGrh + mtu, rb.lkey()));
    for (int i = 0; i < 2; ++i) {
        make_wr(&wr[i], &sge[i], 20 + i, AXON_DEV_WR_SEND, sb.ptr, mtu + i, sb.lkey());
        wr[i].wr.ud.ah          = ah_;
        wr[i].wr.ud.remote_qpn  = b_.qpn();
        wr[i].wr.ud.remote_qkey = kQkey;
    }
    wr[0].next = &wr[1];
    EXPECT_EQ(EINVAL, axon_dev_post_send(a_.qp, &wr[0], &bad)) << "MTU + 1 bytes";
    EXPECT_EQ(&wr[1], bad);
    /* exactly the MTU went */
    ASSERT_TRUE(poll_one(a_.scq, &wc));
    EXPECT_EQ(20u, wc.wr_id);
    ASSERT_TRUE(poll_one(b_.rcq, &wc));
    EXPECT_EQ(kGrh + mtu, wc.byte_len);
    EXPECT_TRUE(no_wc(a_.scq, 0.02));
}

TEST_F(SoftibUd, ReceiveTooSmallLocLenErr)
{
    axon_dev_wc_t wc;

    open_dev();
    ud_pair();
    Buf sb = dev_.reg(256, 0);
    Buf rb = dev_.reg(kGrh + 256, AXON_DEV_ACCESS_LOCAL_WRITE);
    ASSERT_EQ(0, post_recv(b_.qp, 1, rb.ptr, kGrh + 100, rb.lkey()));
    ASSERT_EQ(0, send_ud(b_, 2, sb.ptr, 101, sb.lkey()));
    ASSERT_TRUE(poll_one(b_.rcq, &wc));
    EXPECT_EQ(AXON_DEV_WC_LOC_LEN_ERR, wc.status) << wc_status_name(wc.status);
    EXPECT_EQ(AXON_DEV_QPS_ERR, query_state(b_.qp));
    ASSERT_TRUE(poll_one(a_.scq, &wc));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << "a UD sender gets no NAK";
}

TEST_F(SoftibUd, OneQpSendsToSeveralDestinations)
{
    Qp            c;
    axon_dev_wc_t wc;

    open_dev();
    ud_pair();
    ASSERT_EQ(0, dev_.qp(&c, AXON_DEV_QPT_UD));
    ASSERT_EQ(0, dev_.up(c, 0, dev_.gid, 0, 0));
    Buf sb = dev_.reg(64, 0);
    Buf rb = dev_.reg(2 * (kGrh + 64), AXON_DEV_ACCESS_LOCAL_WRITE);
    ASSERT_EQ(0, post_recv(b_.qp, 1, rb.ptr, kGrh + 64, rb.lkey()));
    ASSERT_EQ(0, post_recv(c.qp, 2, rb.ptr + kGrh + 64, kGrh + 64, rb.lkey()));
    ASSERT_EQ(0, send_ud(b_, 3, sb.ptr, 16, sb.lkey()));
    ASSERT_EQ(0, send_ud(c, 4, sb.ptr, 32, sb.lkey()));
    ASSERT_TRUE(poll_one(b_.rcq, &wc));
    EXPECT_EQ(kGrh + 16, wc.byte_len);
    EXPECT_EQ(a_.qpn(), wc.src_qp);
    ASSERT_TRUE(poll_one(c.rcq, &wc));
    EXPECT_EQ(kGrh + 32, wc.byte_len);
    EXPECT_EQ(a_.qpn(), wc.src_qp);
}

TEST_F(SoftibUd, InlineUdSend)
{
    axon_dev_wc_t wc;
    uint8_t       src[48];

    open_dev();
    make_pair(AXON_DEV_QPT_UD, &a_, &b_, 1, 64);
    ah_ = dev_.ah(dev_.gid);
    Buf rb = dev_.reg(kGrh + 64, AXON_DEV_ACCESS_LOCAL_WRITE);
    ASSERT_EQ(0, post_recv(b_.qp, 1, rb.ptr, kGrh + 64, rb.lkey()));
    axon_test_fill(src, sizeof(src), 9);
    ASSERT_EQ(0, send_ud(b_, 2, src, sizeof(src), 0, kQkey,
                         AXON_DEV_SEND_SIGNALED | AXON_DEV_SEND_INLINE));
    memset(src, 0, sizeof(src));
    ASSERT_TRUE(poll_one(b_.rcq, &wc));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status);
    EXPECT_EQ(-1, axon_test_check(rb.ptr + kGrh, sizeof(src), 9));
}

TEST_F(SoftibUd, CreateAhRequiresGrhAndPortOne)
{
    axon_dev_ah_attr_t a;
    axon_dev_ah_t     *ah = nullptr;

    open_dev();
    fill_ah_attr(&a, dev_.gid);
    a.is_global = 0;
    EXPECT_EQ(EINVAL, axon_dev_create_ah(dev_.pd, &a, &ah)) << "no GRH on Ethernet";
    fill_ah_attr(&a, dev_.gid);
    a.port_num = 2;
    EXPECT_EQ(EINVAL, axon_dev_create_ah(dev_.pd, &a, &ah)) << "port 2";
    fill_ah_attr(&a, dev_.gid);
    a.grh.sgid_index = 1;
    EXPECT_EQ(EINVAL, axon_dev_create_ah(dev_.pd, &a, &ah)) << "sgid_index 1";
    fill_ah_attr(&a, dev_.gid);
    ASSERT_EQ(0, axon_dev_create_ah(dev_.pd, &a, &ah));
    EXPECT_EQ(EBUSY, axon_dev_dealloc_pd(dev_.pd)) << "PD with an AH";
    EXPECT_EQ(0, axon_dev_destroy_ah(ah));
}

/*
 * Seed §3.3.8: a UD QP reaches only the destinations of AHs on its own PD.
 * softib refuses an AH of another PD at post time (EINVAL, bad_wr on it; the
 * WRs before it go), as IB allows; nothing of it ever completes or arrives.
 */
TEST_F(SoftibUd, AhOfAnotherPdRefusedAtPost)
{
    axon_dev_send_wr_t  wr[2];
    axon_dev_sge_t      sge[2];
    axon_dev_send_wr_t *bad = nullptr;
    axon_dev_pd_t      *other_pd = nullptr;
    axon_dev_ah_t      *other_ah = nullptr;
    axon_dev_ah_attr_t  a;
    axon_dev_wc_t       wc;

    open_dev();
    ud_pair();
    ASSERT_EQ(0, axon_dev_alloc_pd(dev_.ctx, &other_pd));
    fill_ah_attr(&a, dev_.gid);
    ASSERT_EQ(0, axon_dev_create_ah(other_pd, &a, &other_ah));
    Buf sb = dev_.reg(64, 0);
    Buf rb = dev_.reg(2 * (kGrh + 64), AXON_DEV_ACCESS_LOCAL_WRITE);
    ASSERT_EQ(0, post_recv(b_.qp, 1, rb.ptr, kGrh + 64, rb.lkey()));
    ASSERT_EQ(0, post_recv(b_.qp, 2, rb.ptr + kGrh + 64, kGrh + 64, rb.lkey()));
    for (int i = 0; i < 2; ++i) {
        make_wr(&wr[i], &sge[i], 30 + i, AXON_DEV_WR_SEND, sb.ptr, 64, sb.lkey());
        wr[i].wr.ud.remote_qpn  = b_.qpn();
        wr[i].wr.ud.remote_qkey = kQkey;
    }
    wr[0].wr.ud.ah = ah_;
    wr[1].wr.ud.ah = other_ah;
    wr[0].next     = &wr[1];
    EXPECT_EQ(EINVAL, axon_dev_post_send(a_.qp, &wr[0], &bad)) << "AH of another PD";
    EXPECT_EQ(&wr[1], bad);
    ASSERT_TRUE(poll_one(a_.scq, &wc));
    EXPECT_EQ(30u, wc.wr_id);
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    ASSERT_TRUE(poll_one(b_.rcq, &wc));
    EXPECT_EQ(1u, wc.wr_id);
    EXPECT_TRUE(no_wc(a_.scq, 0.05, &wc)) << "the refused WR completed: " << wc.wr_id;
    EXPECT_TRUE(no_wc(b_.rcq, 0.05, &wc)) << "the refused WR arrived in " << wc.wr_id;
    EXPECT_EQ(AXON_DEV_QPS_RTS, query_state(a_.qp)) << "a refused post is no QP error";
    EXPECT_EQ(0, axon_dev_destroy_ah(other_ah));
    EXPECT_EQ(0, axon_dev_dealloc_pd(other_pd));
}

/* UD drops what it cannot place; a receive queue left empty loses the message, no RNR. */
TEST_F(SoftibUd, NoReceivePostedDropsMessage)
{
    axon_dev_wc_t wc;

    open_dev();
    ud_pair();
    Buf sb = dev_.reg(64, 0);
    Buf rb = dev_.reg(kGrh + 64, AXON_DEV_ACCESS_LOCAL_WRITE);
    axon_test_fill(sb.ptr, 64, 1);
    ASSERT_EQ(0, send_ud(b_, 1, sb.ptr, 64, sb.lkey()));
    ASSERT_TRUE(poll_one(a_.scq, &wc));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status);
    usleep(20000);
    ASSERT_EQ(0, post_recv(b_.qp, 5, rb.ptr, kGrh + 64, rb.lkey()));
    EXPECT_TRUE(no_wc(b_.rcq, 0.05)) << "a dropped datagram arrived later";
    axon_test_fill(sb.ptr, 64, 2);
    ASSERT_EQ(0, send_ud(b_, 2, sb.ptr, 64, sb.lkey()));
    ASSERT_TRUE(poll_one(b_.rcq, &wc));
    EXPECT_EQ(-1, axon_test_check(rb.ptr + kGrh, 64, 2));
}


/*
 * The injection knobs reach the wire (the lossy RC suites rely on it): UD,
 * which recovers nothing, loses about AXON_SOFTIB_LOSS of its datagrams
 * and receives about AXON_SOFTIB_DUP more.
 */
class SoftibUdInjection : public SoftibUd {
protected:
    /* A UD pair whose queues hold every datagram of count_delivered(). */
    void big_pair()
    {
        ASSERT_EQ(0, dev_.qp(&a_, AXON_DEV_QPT_UD, 1, nullptr, 0, 512));
        ASSERT_EQ(0, dev_.qp(&b_, AXON_DEV_QPT_UD, 1, nullptr, 0, 512, nullptr,
                             dev_.cq(1024)));
        ASSERT_EQ(0, dev_.connect(a_, b_));
        ah_ = dev_.ah(dev_.gid);
        ASSERT_NE(nullptr, ah_);
    }

    /* Send n datagrams, return how many receives completed. */
    int count_delivered(int n)
    {
        axon_dev_wc_t wc[16];
        Buf sb = dev_.reg(64, 0);
        Buf rb = dev_.reg(2 * n * (kGrh + 64), AXON_DEV_ACCESS_LOCAL_WRITE);
        for (int i = 0; i < 2 * n; ++i) {
            EXPECT_EQ(0, post_recv(b_.qp, i, rb.ptr + i * (kGrh + 64), kGrh + 64, rb.lkey()));
        }
        for (int i = 0; i < n; ++i) {
            EXPECT_EQ(0, send_ud(b_, i, sb.ptr, 64, sb.lkey()));
            EXPECT_TRUE(poll_one(a_.scq, wc));
        }
        int got = 0, ret;
        /* a datagram held back for reordering is released within ~ms */
        while ((ret = poll_n(b_.rcq, 16, wc, 0.1)) > 0) {
            got += ret;
        }
        return got;
    }
};

TEST_F(SoftibUdInjection, LossDropsAboutThatShare)
{
    env_.set("AXON_SOFTIB_LOSS", "0.5");
    open_dev();
    big_pair();
    int got = count_delivered(200);
    EXPECT_GT(got, 40);
    EXPECT_LT(got, 160);
}

TEST_F(SoftibUdInjection, DupDeliversExtraCopies)
{
    env_.set("AXON_SOFTIB_DUP", "0.5");
    open_dev();
    big_pair();
    int got = count_delivered(200);
    EXPECT_GT(got, 240);
    EXPECT_LT(got, 360);
}

}  // namespace
