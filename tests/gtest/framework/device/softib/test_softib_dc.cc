/*
 * softib's Dynamically Connected transport (seed §8.6.1) at the device
 * layer, one test per rule the manual states:
 *   - §8.6.1.2 DC in the device attributes (CAP_MASK takes it away);
 *   - §8.6.1.3-5 a DCT created ready on a PD, CQ, SRQ and key, queried,
 *     destroyed (also while an initiator still sends to it);
 *   - §8.6.1.6 arming a DCT: one DCT_KEY_VIOLATION event per arm, the
 *     violation counter in query_dct; a wrong key is dropped as a UD Q_Key
 *     mismatch is (§8.6.1.7), so its initiator fails with RETRY_EXC_ERR;
 *   - §8.6.1.7 a DCI's transitions, send-only, each WR naming its target;
 *     one target at a time (retargeting after everything before is
 *     acknowledged), RC semantics: ordering per DCI, RDMA and atomics checked
 *     like RC, flush on error, RNR when the target's responder contexts are
 *     all taken;
 * plus the source of receive completions, many DCIs on one DCT, bad input
 * (EINVAL and a log line), a lossy, reordering, duplicating wire, and a DCT
 * in another process (shm and UDP wires) that only sleeps meanwhile.
 */
#include "log_capture.h"
#include "softib_env.h"
#include "framework/device/softib/softib_registry.h"
#include "framework/device/softib/softib_wire.h"

#include <algorithm>
#include <map>
#include <random>

namespace {

const int      kLocalWrite = AXON_DEV_ACCESS_LOCAL_WRITE;
const int      kRemoteAll  = AXON_DEV_ACCESS_LOCAL_WRITE | AXON_DEV_ACCESS_REMOTE_WRITE |
                             AXON_DEV_ACCESS_REMOTE_READ | AXON_DEV_ACCESS_REMOTE_ATOMIC;
const uint32_t kDctAccess  = AXON_DEV_ACCESS_REMOTE_WRITE | AXON_DEV_ACCESS_REMOTE_READ |
                             AXON_DEV_ACCESS_REMOTE_ATOMIC;
const uint64_t kKey        = 0x0123456789abcdefull;
const uint32_t kMsg        = 4096;   /* receive buffer per SRQ WQE */
const uint8_t  kFastTmo    = 8;      /* ack timeout ~1 ms: failures show quickly */

class SoftibDc : public SoftibTest {
protected:
    axon_dev_srq_t              *srq_ = nullptr;
    axon_dev_cq_t               *dcq_ = nullptr;   /* the DCTs' receive CQ */
    axon_dev_ah_t               *ah_  = nullptr;   /* this device (loopback) */
    Buf                          rbuf_;
    std::vector<axon_dev_dct_t *> dcts_;

    void TearDown() override
    {
        for (auto it = dcts_.rbegin(); it != dcts_.rend(); ++it) {
            EXPECT_EQ(0, axon_dev_destroy_dct(*it));
        }
        dcts_.clear();
        SoftibTest::TearDown();
    }

    /* Open the device with an SRQ of recvs receives of kMsg bytes (wr_id = index). */
    void open_dc(unsigned recvs = 128)
    {
        open_dev();
        ASSERT_NE(0u, dev_.attr.cap_flags & AXON_DEV_CAP_DC);
        ASSERT_EQ(0, dev_.srq(4096, 1, &srq_));
        dcq_  = dev_.cq(8192);
        ah_   = dev_.ah(dev_.gid);
        if (recvs == 0) {
            return;
        }
        rbuf_ = dev_.reg((size_t)recvs * kMsg, kLocalWrite);
        for (unsigned i = 0; i < recvs; ++i) {
            ASSERT_EQ(0, post_srq_recv(srq_, i, rbuf_.ptr + (size_t)i * kMsg, kMsg,
                                       rbuf_.lkey()));
        }
    }

    void dct_attr(axon_dev_dct_init_attr_t *a, uint64_t key, axon_dev_srq_t *srq = nullptr,
                  axon_dev_cq_t *cq = nullptr)
    {
        memset(a, 0, sizeof(*a));
        a->pd            = dev_.pd;
        a->cq            = cq ? cq : dcq_;
        a->srq           = srq ? srq : srq_;
        a->dc_key        = key;
        a->port          = 1;
        a->access_flags  = kDctAccess;
        a->min_rnr_timer = kMinRnrTimer;
        a->mtu           = kPathMtu;
        a->hop_limit     = 64;
    }

    axon_dev_dct_t *dct(uint64_t key = kKey, axon_dev_srq_t *srq = nullptr,
                        axon_dev_cq_t *cq = nullptr)
    {
        axon_dev_dct_init_attr_t a;
        axon_dev_dct_t          *d = nullptr;
        dct_attr(&a, key, srq, cq);
        int ret = axon_dev_create_dct(dev_.ctx, &a, &d);
        EXPECT_EQ(0, ret) << "create_dct";
        if (ret == 0) {
            dcts_.push_back(d);
        }
        return d;
    }

    void destroy_dct(axon_dev_dct_t *d)
    {
        dcts_.erase(std::find(dcts_.begin(), dcts_.end(), d));
        EXPECT_EQ(0, axon_dev_destroy_dct(d));
    }

    /* The §8.6.1.7 bring-up of a DCI: RESET -> INIT -> RTR -> RTS. */
    static int dci_up(const Qp &q, const axon_dev_gid_t &gid, uint8_t timeout, uint8_t retry,
                      uint8_t rnr)
    {
        axon_dev_qp_attr_t a;
        int                ret;

        memset(&a, 0, sizeof(a));
        a.qp_state = AXON_DEV_QPS_INIT;
        a.port_num = 1;
        a.dct_key  = kKey;
        ret = axon_dev_modify_qp(q.qp, &a, AXON_DEV_QP_STATE | AXON_DEV_QP_PKEY_INDEX |
                                           AXON_DEV_QP_PORT | AXON_DEV_QP_DC_KEY);
        if (ret != 0) return ret;
        memset(&a, 0, sizeof(a));
        a.qp_state = AXON_DEV_QPS_RTR;
        a.path_mtu = kPathMtu;
        fill_ah_attr(&a.ah_attr, gid);
        ret = axon_dev_modify_qp(q.qp, &a, AXON_DEV_QP_STATE | AXON_DEV_QP_AV |
                                           AXON_DEV_QP_PATH_MTU);
        if (ret != 0) return ret;
        memset(&a, 0, sizeof(a));
        a.qp_state      = AXON_DEV_QPS_RTS;
        a.timeout       = timeout;
        a.retry_cnt     = retry;
        a.rnr_retry     = rnr;
        a.max_rd_atomic = kRdAtomic;
        return axon_dev_modify_qp(q.qp, &a, AXON_DEV_QP_STATE | AXON_DEV_QP_TIMEOUT |
                                            AXON_DEV_QP_RETRY_CNT | AXON_DEV_QP_RNR_RETRY |
                                            AXON_DEV_QP_MAX_QP_RD_ATOMIC);
    }

    /* A DCI in RTS (its own send CQ unless scq is given). */
    void dci(Qp *q, uint8_t timeout = kTimeout, uint8_t retry = kRetryCnt,
             uint8_t rnr = kRnrRetry, uint32_t max_wr = 128, axon_dev_cq_t *scq = nullptr)
    {
        ASSERT_EQ(0, dev_.qp(q, AXON_DEV_QPT_DC_INI, 1, nullptr, 0, max_wr, scq));
        ASSERT_EQ(0, dci_up(*q, dev_.gid, timeout, retry, rnr));
    }

    /* Name the target DCT number dct (and the key) in wr and post it. */
    int post_dc(const Qp &q, axon_dev_send_wr_t *wr, uint32_t dct, uint64_t key = kKey)
    {
        axon_dev_send_wr_t *bad = nullptr;
        wr->dc.ah             = ah_;
        wr->dc.dct_number     = dct;
        wr->dc.dct_access_key = key;
        return axon_dev_post_send(q.qp, wr, &bad);
    }

    int post_dc(const Qp &q, axon_dev_send_wr_t *wr, const axon_dev_dct_t *d)
    {
        return post_dc(q, wr, d->dct_num);
    }

    int send(const Qp &q, uint32_t dct, uint64_t wr_id, void *addr, uint32_t len,
             uint32_t lkey, uint32_t imm, uint64_t key = kKey)
    {
        axon_dev_send_wr_t wr;
        axon_dev_sge_t     sge;
        make_wr(&wr, &sge, wr_id, AXON_DEV_WR_SEND_WITH_IMM, addr, len, lkey);
        wr.imm_data = htonl(imm);
        return post_dc(q, &wr, dct, key);
    }

    int send(const Qp &q, const axon_dev_dct_t *d, uint64_t wr_id, void *addr, uint32_t len,
             uint32_t lkey, uint32_t imm, uint64_t key = kKey)
    {
        return send(q, d->dct_num, wr_id, addr, len, lkey, imm, key);
    }

    int rdma(const Qp &q, const axon_dev_dct_t *d, uint64_t wr_id, axon_dev_wr_opcode_t op,
             void *addr, uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey)
    {
        axon_dev_send_wr_t wr;
        axon_dev_sge_t     sge;
        make_wr(&wr, &sge, wr_id, op, addr, len, lkey);
        wr.wr.rdma.remote_addr = raddr;
        wr.wr.rdma.rkey        = rkey;
        return post_dc(q, &wr, d);
    }

    int atomic(const Qp &q, const axon_dev_dct_t *d, uint64_t wr_id, axon_dev_wr_opcode_t op,
               uint64_t *result, uint32_t lkey, uint64_t raddr, uint32_t rkey,
               uint64_t compare_add, uint64_t swap = 0)
    {
        axon_dev_send_wr_t wr;
        axon_dev_sge_t     sge;
        make_wr(&wr, &sge, wr_id, op, result, 8, lkey);
        wr.wr.atomic.remote_addr = raddr;
        wr.wr.atomic.rkey        = rkey;
        wr.wr.atomic.compare_add = compare_add;
        wr.wr.atomic.swap        = swap;
        return post_dc(q, &wr, d);
    }

    axon_dev_dct_attr_t query(axon_dev_dct_t *d)
    {
        axon_dev_dct_attr_t a;
        EXPECT_EQ(0, axon_dev_query_dct(d, &a));
        return a;
    }
};

/* Slow: lossy storms and many senders, not for the sanitizer passes (tests/README.md). */
class SoftibDcSlow : public SoftibDc {};

/* ---------------------------------------------------------------- §8.6.1.2 capabilities */

TEST_F(SoftibDc, CapabilitiesInDeviceAttributes)
{
    open_dev();
    const axon_dev_attr_t &a = dev_.attr;
    EXPECT_NE(0u, a.cap_flags & AXON_DEV_CAP_DC);
    EXPECT_STREQ("dc", axon_dev_cap_names[7]);
    EXPECT_GT(a.dc.max_dci, 0u);
    EXPECT_GT(a.dc.max_dct, 0u);
    EXPECT_GT(a.dc.max_dc_req_rd_atom, 0);
    EXPECT_GT(a.dc.max_dc_res_rd_atom, 0);
    EXPECT_GT(a.dc.max_dcr, 1u);
}

TEST_F(SoftibDc, MaxDcrIsConfigurableAndOutOfRangeValuesAreRefused)
{
    env_.set("AXON_SOFTIB_DC_MAX_DCR", "3");
    open_dev();
    EXPECT_EQ(3u, dev_.attr.dc.max_dcr);
    dev_.close();
    for (const char *bad : {"0", "65537"}) {
        env_.set("AXON_SOFTIB_DC_MAX_DCR", bad);
        LogCapture log;
        EXPECT_EQ(EINVAL, dev_.open()) << bad;
        EXPECT_TRUE(log.any_contains((std::string("AXON_SOFTIB_DC_MAX_DCR=") + bad).c_str()))
            << bad;
    }
}

TEST_F(SoftibDc, CapMaskRemovesDc)
{
    env_.set("AXON_SOFTIB_CAP_MASK", "dc");
    open_dev();
    EXPECT_EQ(0u, dev_.attr.cap_flags & AXON_DEV_CAP_DC);
    EXPECT_EQ(0u, dev_.attr.dc.max_dci);
    EXPECT_EQ(0u, dev_.attr.dc.max_dct);
    EXPECT_NE(0u, dev_.attr.cap_flags & AXON_DEV_CAP_RC) << "only DC removed";
    Qp q;
    EXPECT_EQ(EOPNOTSUPP, dev_.qp(&q, AXON_DEV_QPT_DC_INI));
    ASSERT_EQ(0, dev_.srq(16, 1, &srq_));
    dcq_ = dev_.cq();
    axon_dev_dct_init_attr_t a;
    axon_dev_dct_t          *d = nullptr;
    dct_attr(&a, kKey);
    EXPECT_EQ(EOPNOTSUPP, axon_dev_create_dct(dev_.ctx, &a, &d));
}

/* ---------------------------------------------------------------- §8.6.1.3-5 DCT objects */

TEST_F(SoftibDc, DctCreateQueryDestroy)
{
    open_dc(4);
    axon_dev_dct_init_attr_t in;
    axon_dev_dct_t          *d = nullptr, *e = dct(kKey + 1);
    dct_attr(&in, kKey);
    in.dct_context   = this;
    in.min_rnr_timer = 12;
    in.tclass        = 3;
    in.flow_label    = 0x1234;
    in.hop_limit     = 9;
    in.access_flags  = AXON_DEV_ACCESS_REMOTE_READ;
    ASSERT_EQ(0, axon_dev_create_dct(dev_.ctx, &in, &d));
    dcts_.push_back(d);
    EXPECT_NE(0u, d->dct_num);
    EXPECT_NE(e->dct_num, d->dct_num);
    EXPECT_EQ(dev_.pd, d->pd);
    EXPECT_EQ(srq_, d->srq);
    EXPECT_EQ(dcq_, d->cq);
    EXPECT_EQ((void *)this, d->dct_context);

    axon_dev_dct_attr_t a = query(d);
    EXPECT_EQ(AXON_DEV_DCT_STATE_ACTIVE, a.state) << "ready as created: no modify";
    EXPECT_EQ(kKey, a.dc_key);
    EXPECT_EQ(dev_.pd, a.pd);
    EXPECT_EQ(dcq_, a.cq);
    EXPECT_EQ(srq_, a.srq);
    EXPECT_EQ(1, a.port);
    EXPECT_EQ((uint32_t)AXON_DEV_ACCESS_REMOTE_READ, a.access_flags);
    EXPECT_EQ(12, a.min_rnr_timer);
    EXPECT_EQ(3, a.tclass);
    EXPECT_EQ(0x1234u, a.flow_label);
    EXPECT_EQ(kPathMtu, a.mtu);
    EXPECT_EQ(0, a.pkey_index);
    EXPECT_EQ(0, a.gid_index);
    EXPECT_EQ(9, a.hop_limit);
    EXPECT_EQ(0u, a.key_violations);

    /* The DCT holds its SRQ and CQ */
    EXPECT_EQ(EBUSY, axon_dev_destroy_srq(srq_));
    EXPECT_EQ(EBUSY, axon_dev_destroy_cq(dcq_));
    double t0 = axon_test_time();
    destroy_dct(d);
    destroy_dct(e);
    EXPECT_LT(axon_test_time() - t0, 0.1) << "nobody connected: nothing to wait for";
}

/* ---------------------------------------------------------------- §8.6.1.7 the DCI */

TEST_F(SoftibDc, DciTransitionsFollowTheManualsTable)
{
    open_dc(4);
    Qp q;
    axon_dev_qp_attr_t a;
    ASSERT_EQ(0, dev_.qp(&q, AXON_DEV_QPT_DC_INI));
    const int st = AXON_DEV_QP_STATE;

    memset(&a, 0, sizeof(a));
    a.qp_state = AXON_DEV_QPS_INIT;
    a.port_num = 1;
    a.dct_key  = 0x77;
    EXPECT_EINVAL_LOGS(axon_dev_modify_qp(q.qp, &a, st | AXON_DEV_QP_PKEY_INDEX |
                                                    AXON_DEV_QP_PORT),
                       "lacks required DC_KEY");
    EXPECT_EINVAL_LOGS(axon_dev_modify_qp(q.qp, &a, st | AXON_DEV_QP_PKEY_INDEX |
                                                    AXON_DEV_QP_PORT | AXON_DEV_QP_DC_KEY |
                                                    AXON_DEV_QP_QKEY),
                       "does not allow QKEY");
    ASSERT_EQ(0, axon_dev_modify_qp(q.qp, &a, st | AXON_DEV_QP_PKEY_INDEX | AXON_DEV_QP_PORT |
                                              AXON_DEV_QP_DC_KEY));
    /* INIT -> INIT: the manual lists its three attributes as required */
    EXPECT_EQ(EINVAL, axon_dev_modify_qp(q.qp, &a, st | AXON_DEV_QP_PKEY_INDEX));
    EXPECT_EQ(0, axon_dev_modify_qp(q.qp, &a, st | AXON_DEV_QP_PKEY_INDEX | AXON_DEV_QP_PORT |
                                              AXON_DEV_QP_ACCESS_FLAGS));

    memset(&a, 0, sizeof(a));
    a.qp_state = AXON_DEV_QPS_RTR;
    a.path_mtu = kPathMtu;
    a.dct_key  = 0x99;
    fill_ah_attr(&a.ah_attr, dev_.gid);
    EXPECT_EINVAL_LOGS(axon_dev_modify_qp(q.qp, &a, st | AXON_DEV_QP_PATH_MTU), "lacks required AV");
    EXPECT_EQ(EINVAL, axon_dev_modify_qp(q.qp, &a, st | AXON_DEV_QP_AV | AXON_DEV_QP_PATH_MTU |
                                                   AXON_DEV_QP_DEST_QPN))
        << "a DCI has no fixed destination";
    ASSERT_EQ(0, axon_dev_modify_qp(q.qp, &a, st | AXON_DEV_QP_AV | AXON_DEV_QP_PATH_MTU |
                                              AXON_DEV_QP_DC_KEY));

    memset(&a, 0, sizeof(a));
    a.qp_state      = AXON_DEV_QPS_RTS;
    a.timeout       = kTimeout;
    a.retry_cnt     = kRetryCnt;
    a.rnr_retry     = kRnrRetry;
    a.max_rd_atomic = kRdAtomic;
    const int rts = st | AXON_DEV_QP_TIMEOUT | AXON_DEV_QP_RETRY_CNT | AXON_DEV_QP_RNR_RETRY |
                    AXON_DEV_QP_MAX_QP_RD_ATOMIC;
    EXPECT_EINVAL_LOGS(axon_dev_modify_qp(q.qp, &a, rts | AXON_DEV_QP_SQ_PSN),
                       "does not allow SQ_PSN");
    EXPECT_EQ(EINVAL, axon_dev_modify_qp(q.qp, &a, rts & ~AXON_DEV_QP_RETRY_CNT));
    ASSERT_EQ(0, axon_dev_modify_qp(q.qp, &a, rts | AXON_DEV_QP_MIN_RNR_TIMER));
    EXPECT_EQ(0, axon_dev_modify_qp(q.qp, &a, st | AXON_DEV_QP_MIN_RNR_TIMER)) << "RTS -> RTS";
    a.qp_state = AXON_DEV_QPS_SQD;
    EXPECT_EINVAL_LOGS(axon_dev_modify_qp(q.qp, &a, st), "cannot go from RTS to SQD");

    axon_dev_qp_init_attr_t init;
    memset(&a, 0, sizeof(a));
    ASSERT_EQ(0, axon_dev_query_qp(q.qp, &a, 0, &init));
    EXPECT_EQ(AXON_DEV_QPS_RTS, a.qp_state);
    EXPECT_EQ(0x99u, a.dct_key);
    EXPECT_EQ(AXON_DEV_QPT_DC_INI, init.qp_type);
    EXPECT_EQ(0u, init.cap.max_recv_wr) << "a DCI does not receive";
}

/* Sends reach the DCT's SRQ and CQ; the completion names the DCT and the initiator. */
TEST_F(SoftibDc, SendReceiveCompletionNamesTheSource)
{
    open_dc(8);
    axon_dev_dct_t *d = dct();
    Qp q;
    dci(&q);
    Buf sb = dev_.reg(3 * kMsg, 0);
    const uint32_t len[3] = {0, 100, 3000};   /* 3000: three packets of the 1024-byte MTU */
    for (int i = 0; i < 3; ++i) {
        axon_test_fill(sb.ptr + i * kMsg, len[i], 10 + i);
        ASSERT_EQ(0, send(q, d, i, sb.ptr + i * kMsg, len[i], sb.lkey(), 0x1000 + i));
    }
    axon_dev_wc_t wc;
    for (int i = 0; i < 3; ++i) {
        ASSERT_TRUE(poll_one(q.scq, &wc)) << i;
        EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
        EXPECT_EQ(AXON_DEV_WC_SEND, wc.opcode);
        EXPECT_EQ((uint64_t)i, wc.wr_id);
        EXPECT_EQ(q.qpn(), wc.qp_num);
    }
    for (int i = 0; i < 3; ++i) {
        ASSERT_TRUE(poll_one(dcq_, &wc)) << i;
        EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
        EXPECT_EQ(AXON_DEV_WC_RECV, wc.opcode);
        EXPECT_EQ((uint64_t)i, wc.wr_id) << "the SRQ's WQEs in order";
        EXPECT_EQ(d->dct_num, wc.qp_num);
        EXPECT_EQ(q.qpn(), wc.src_qp) << "the DCI's number";
        EXPECT_EQ(len[i], wc.byte_len);
        EXPECT_EQ((unsigned)AXON_DEV_WC_WITH_IMM, wc.wc_flags) << "no GRH: DC is connected";
        EXPECT_EQ(0x1000u + i, ntohl(wc.imm_data));
        EXPECT_EQ(0, wc.slid) << "RoCE-like port: no LIDs";
        EXPECT_EQ(-1, axon_test_check(rbuf_.ptr + i * kMsg, len[i], 10 + i));
    }
    EXPECT_EQ(0u, query(d).key_violations);
}

/*
 * One DCI, two DCTs, targets changing between WRs posted at once: the DCI
 * connects to one target at a time, each DCT receives its messages in the
 * DCI's order, every byte right, and the DCI completes in posting order.
 */
TEST_F(SoftibDc, RetargetingBetweenTwoDctsKeepsOrder)
{
    const int n = 60;
    open_dc(n);
    axon_dev_cq_t  *cq_b = dev_.cq(256);
    axon_dev_dct_t *t[2] = {dct(), dct(kKey, nullptr, cq_b)};
    Qp q;
    dci(&q);
    Buf sb = dev_.reg((size_t)n * kMsg, 0);
    std::mt19937 rng(7);
    std::vector<int> target(n), size(n);
    std::map<uint32_t, std::vector<int>> want;   /* DCT number -> message indexes */
    for (int i = 0; i < n; ++i) {
        target[i] = (i < 4) ? 0 : (int)(rng() % 2);   /* runs of either, and a switch each */
        size[i]   = 1 + (int)(rng() % 3000);
        axon_test_fill(sb.ptr + (size_t)i * kMsg, size[i], 500 + i);
        ASSERT_EQ(0, send(q, t[target[i]], i, sb.ptr + (size_t)i * kMsg, size[i], sb.lkey(), i));
        want[t[target[i]]->dct_num].push_back(i);
    }
    axon_dev_wc_t wc;
    for (int i = 0; i < n; ++i) {
        ASSERT_TRUE(poll_one(q.scq, &wc)) << i;
        ASSERT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
        EXPECT_EQ((uint64_t)i, wc.wr_id) << "completions in posting order";
    }
    axon_dev_cq_t *cqs[2] = {dcq_, cq_b};
    for (int k = 0; k < 2; ++k) {
        const std::vector<int> &mine = want[t[k]->dct_num];
        for (size_t j = 0; j < mine.size(); ++j) {
            ASSERT_TRUE(poll_one(cqs[k], &wc)) << "DCT " << k << " message " << j;
            ASSERT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
            EXPECT_EQ(t[k]->dct_num, wc.qp_num);
            int i = (int)ntohl(wc.imm_data);
            EXPECT_EQ(mine[j], i) << "DCT " << k << ": the DCI's order";
            EXPECT_EQ((uint32_t)size[i], wc.byte_len);
            EXPECT_EQ(-1, axon_test_check(rbuf_.ptr + wc.wr_id * kMsg, size[i], 500 + i));
        }
        EXPECT_TRUE(no_wc(cqs[k], 0.05)) << "a message arrived twice";
    }
}

/* One-sided operations through a DCI, checked like RC's; reads and atomics switch targets. */
TEST_F(SoftibDc, RdmaWriteReadAndAtomicsViaDci)
{
    open_dc(8);
    axon_dev_dct_t *a = dct(), *b = dct();
    Qp q;
    dci(&q);
    Buf remote = dev_.reg(16384, kRemoteAll);
    Buf local  = dev_.reg(16384, kLocalWrite);
    axon_dev_wc_t wc;

    axon_test_fill(local.ptr, 5000, 42);
    ASSERT_EQ(0, rdma(q, a, 1, AXON_DEV_WR_RDMA_WRITE, local.ptr, 5000, local.lkey(),
                      remote.addr(), remote.rkey()));
    ASSERT_EQ(0, rdma(q, b, 2, AXON_DEV_WR_RDMA_READ, local.ptr + 8192, 5000, local.lkey(),
                      remote.addr(), remote.rkey()));
    for (int i = 1; i <= 2; ++i) {
        ASSERT_TRUE(poll_one(q.scq, &wc));
        ASSERT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
        EXPECT_EQ((uint64_t)i, wc.wr_id);
    }
    EXPECT_EQ(-1, axon_test_check(remote.ptr, 5000, 42));
    EXPECT_EQ(-1, axon_test_check(local.ptr + 8192, 5000, 42)) << "read back through DCT b";

    uint64_t *word = (uint64_t *)(remote.ptr + 12288), *res = (uint64_t *)(local.ptr + 12288);
    *word = 100;
    for (int i = 0; i < 4; ++i) {
        ASSERT_EQ(0, atomic(q, (i % 2) ? b : a, 10 + i, AXON_DEV_WR_ATOMIC_FETCH_AND_ADD,
                            res + i, local.lkey(), remote.addr(12288), remote.rkey(), 5));
    }
    ASSERT_EQ(0, atomic(q, a, 14, AXON_DEV_WR_ATOMIC_CMP_AND_SWP, res + 4, local.lkey(),
                        remote.addr(12288), remote.rkey(), 120, 7));
    for (int i = 0; i < 5; ++i) {
        ASSERT_TRUE(poll_one(q.scq, &wc));
        ASSERT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
        EXPECT_EQ((uint64_t)(10 + i), wc.wr_id);
        EXPECT_EQ((i < 4) ? AXON_DEV_WC_FETCH_ADD : AXON_DEV_WC_COMP_SWAP, wc.opcode);
    }
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(100u + 5 * i, res[i]);
    }
    EXPECT_EQ(120u, res[4]);
    EXPECT_EQ(7u, *word);

    if (dev_.attr.cap_flags & AXON_DEV_CAP_EXT_ATOMIC) {   /* the extended atomics too */
        axon_dev_send_wr_t wr;
        axon_dev_sge_t     sge;
        make_wr(&wr, &sge, 20, AXON_DEV_WR_EXT_MASKED_ATOMIC_FETCH_AND_ADD, res + 5, 8,
                local.lkey());
        wr.wr.masked_atomic.log_arg_sz                  = 3;
        wr.wr.masked_atomic.remote_addr                 = remote.addr(12288);
        wr.wr.masked_atomic.rkey                        = remote.rkey();
        wr.wr.masked_atomic.op.fetch_add.add_val        = 0x0000000100000001ull;
        wr.wr.masked_atomic.op.fetch_add.field_boundary = 0x0000000080000000ull;
        ASSERT_EQ(0, post_dc(q, &wr, b));
        ASSERT_TRUE(poll_one(q.scq, &wc));
        ASSERT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
        EXPECT_EQ(AXON_DEV_WC_MASKED_FETCH_ADD, wc.opcode);
        EXPECT_EQ(7u, res[5]);
        EXPECT_EQ(0x0000000100000008ull, *word);
    }

    /* WRITE_WITH_IMM consumes a receive at the DCT and names the DCI */
    axon_dev_send_wr_t wr;
    axon_dev_sge_t     sge;
    make_wr(&wr, &sge, 30, AXON_DEV_WR_RDMA_WRITE_WITH_IMM, local.ptr, 64, local.lkey());
    wr.wr.rdma.remote_addr = remote.addr(64);
    wr.wr.rdma.rkey        = remote.rkey();
    wr.imm_data            = htonl(0xabc);
    ASSERT_EQ(0, post_dc(q, &wr, a));
    ASSERT_TRUE(poll_one(q.scq, &wc));
    ASSERT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    ASSERT_TRUE(poll_one(dcq_, &wc));
    EXPECT_EQ(AXON_DEV_WC_RECV_RDMA_WITH_IMM, wc.opcode);
    EXPECT_EQ(a->dct_num, wc.qp_num);
    EXPECT_EQ(q.qpn(), wc.src_qp);
    EXPECT_EQ(0xabcu, ntohl(wc.imm_data));
}

/* A DCT without remote write refuses writes as an RC QP would: REM_INV_REQ_ERR. */
TEST_F(SoftibDc, DctAccessFlagsCheckedLikeRc)
{
    open_dc(4);
    axon_dev_dct_init_attr_t in;
    axon_dev_dct_t          *d = nullptr;
    dct_attr(&in, kKey);
    in.access_flags = AXON_DEV_ACCESS_REMOTE_READ;
    ASSERT_EQ(0, axon_dev_create_dct(dev_.ctx, &in, &d));
    dcts_.push_back(d);
    Qp q;
    dci(&q);
    Buf remote = dev_.reg(4096, kRemoteAll);
    Buf local  = dev_.reg(4096, kLocalWrite);
    axon_dev_wc_t wc;
    ASSERT_EQ(0, rdma(q, d, 1, AXON_DEV_WR_RDMA_READ, local.ptr, 64, local.lkey(),
                      remote.addr(), remote.rkey()));
    ASSERT_TRUE(poll_one(q.scq, &wc));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    ASSERT_EQ(0, rdma(q, d, 2, AXON_DEV_WR_RDMA_WRITE, local.ptr, 64, local.lkey(),
                      remote.addr(), remote.rkey()));
    ASSERT_TRUE(poll_one(q.scq, &wc));
    EXPECT_EQ(AXON_DEV_WC_REM_INV_REQ_ERR, wc.status) << wc_status_name(wc.status);
    axon_dev_async_event_t ev;
    ASSERT_TRUE(wait_async(dev_.ctx, AXON_DEV_EVENT_DCT_REQ_ERR, &ev));
    EXPECT_EQ(d, ev.element.dct);
}

/* ---------------------------------------------------------------- §8.6.1.6 the DC key */

TEST_F(SoftibDc, KeyMismatchDroppedCountedAndReportedOncePerArm)
{
    open_dc(8);
    axon_dev_dct_t *d = dct();
    EXPECT_EINVAL_LOGS(axon_dev_arm_dct(d, 1), "comp_mask 0x1");
    ASSERT_EQ(0, axon_dev_arm_dct(d, 0));
    Qp q1, q2, q3, ok;
    dci(&q1, kFastTmo, 1);
    Buf sb = dev_.reg(64, 0);
    axon_dev_wc_t wc;
    axon_dev_async_event_t ev;

    ASSERT_EQ(0, send(q1, d, 1, sb.ptr, 64, sb.lkey(), 1, kKey ^ 1));
    ASSERT_EQ(0, send(q1, d, 2, sb.ptr, 64, sb.lkey(), 2, kKey ^ 1));
    ASSERT_TRUE(poll_one(q1.scq, &wc));
    EXPECT_EQ(AXON_DEV_WC_RETRY_EXC_ERR, wc.status) << "dropped as a wrong Q_Key is: "
                                                     << wc_status_name(wc.status);
    ASSERT_TRUE(poll_one(q1.scq, &wc));
    EXPECT_EQ(AXON_DEV_WC_WR_FLUSH_ERR, wc.status) << wc_status_name(wc.status);
    EXPECT_EQ(AXON_DEV_QPS_ERR, query_state(q1.qp));
    ASSERT_TRUE(wait_async(dev_.ctx, AXON_DEV_EVENT_DCT_KEY_VIOLATION, &ev));
    EXPECT_EQ(d, ev.element.dct);
    uint32_t seen = query(d).key_violations;
    EXPECT_GE(seen, 2u) << "the first packet and its retry";
    EXPECT_TRUE(no_wc(dcq_, 0.01)) << "nothing received";

    /* "FIRED": no event until armed again, but still counted */
    dci(&q2, kFastTmo, 0);
    ASSERT_EQ(0, send(q2, d, 3, sb.ptr, 64, sb.lkey(), 3, 0));
    ASSERT_TRUE(poll_one(q2.scq, &wc));
    EXPECT_EQ(AXON_DEV_WC_RETRY_EXC_ERR, wc.status) << wc_status_name(wc.status);
    EXPECT_FALSE(wait_async(dev_.ctx, AXON_DEV_EVENT_DCT_KEY_VIOLATION, &ev, 0.1));
    EXPECT_GT(query(d).key_violations, seen);

    ASSERT_EQ(0, axon_dev_arm_dct(d, 0));
    dci(&q3, kFastTmo, 0);
    ASSERT_EQ(0, send(q3, d, 4, sb.ptr, 64, sb.lkey(), 4, kKey + 1));
    ASSERT_TRUE(wait_async(dev_.ctx, AXON_DEV_EVENT_DCT_KEY_VIOLATION, &ev));
    EXPECT_EQ(d, ev.element.dct);

    /* The right key still gets through */
    dci(&ok);
    ASSERT_EQ(0, send(ok, d, 5, sb.ptr, 64, sb.lkey(), 5));
    ASSERT_TRUE(poll_one(ok.scq, &wc));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    ASSERT_TRUE(poll_one(dcq_, &wc));
    EXPECT_EQ(ok.qpn(), wc.src_qp);
}

/* ---------------------------------------------------------------- errors */

/*
 * An error completes the failing WR with its status and flushes the rest, in
 * order, whatever target they name; the DCT keeps serving other DCIs, and
 * the failed DCI works again after RESET.
 */
TEST_F(SoftibDc, ErrorFlushesEveryOutstandingWr)
{
    open_dc(16);
    axon_dev_dct_t *a = dct(), *b = dct();
    Qp q, other;
    dci(&q);
    dci(&other);
    Buf remote = dev_.reg(4096, kRemoteAll);
    Buf sb     = dev_.reg(64, 0);
    axon_dev_wc_t wc;

    ASSERT_EQ(0, send(q, a, 0, sb.ptr, 64, sb.lkey(), 0));
    ASSERT_EQ(0, rdma(q, a, 1, AXON_DEV_WR_RDMA_WRITE, sb.ptr, 64, sb.lkey(), remote.addr(),
                      remote.rkey() ^ 0x100));
    for (int i = 2; i < 7; ++i) {
        ASSERT_EQ(0, send(q, (i % 2) ? a : b, i, sb.ptr, 64, sb.lkey(), i));
    }
    ASSERT_TRUE(poll_one(q.scq, &wc));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    ASSERT_TRUE(poll_one(q.scq, &wc));
    EXPECT_EQ(1u, wc.wr_id);
    EXPECT_EQ(AXON_DEV_WC_REM_ACCESS_ERR, wc.status) << wc_status_name(wc.status);
    for (int i = 2; i < 7; ++i) {
        ASSERT_TRUE(poll_one(q.scq, &wc)) << i;
        EXPECT_EQ((uint64_t)i, wc.wr_id);
        EXPECT_EQ(AXON_DEV_WC_WR_FLUSH_ERR, wc.status) << wc_status_name(wc.status);
    }
    EXPECT_EQ(AXON_DEV_QPS_ERR, query_state(q.qp));
    axon_dev_async_event_t ev;
    ASSERT_TRUE(wait_async(dev_.ctx, AXON_DEV_EVENT_DCT_ACCESS_ERR, &ev));
    EXPECT_EQ(a, ev.element.dct);
    ASSERT_EQ(0, send(q, a, 9, sb.ptr, 64, sb.lkey(), 9));
    ASSERT_TRUE(poll_one(q.scq, &wc));
    EXPECT_EQ(AXON_DEV_WC_WR_FLUSH_ERR, wc.status) << "posted in ERR: flushed";

    ASSERT_EQ(0, send(other, a, 10, sb.ptr, 64, sb.lkey(), 10));
    ASSERT_TRUE(poll_one(other.scq, &wc));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << "the DCT serves other DCIs";

    axon_dev_qp_attr_t attr;
    memset(&attr, 0, sizeof(attr));
    attr.qp_state = AXON_DEV_QPS_RESET;
    ASSERT_EQ(0, axon_dev_modify_qp(q.qp, &attr, AXON_DEV_QP_STATE));
    ASSERT_EQ(0, dci_up(q, dev_.gid, kTimeout, kRetryCnt, kRnrRetry));
    ASSERT_EQ(0, send(q, a, 11, sb.ptr, 64, sb.lkey(), 11));
    ASSERT_TRUE(poll_one(q.scq, &wc));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << "after RESET: " << wc_status_name(wc.status);
    int received = 0;
    while (poll_one(dcq_, &wc, 0.05)) {
        EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
        ++received;
    }
    EXPECT_EQ(3, received) << "WRs 0, 10 and 11";
}

/* Moving a DCI to ERR flushes WRs a target holds back with RNR (its SRQ is empty). */
TEST_F(SoftibDc, ModifyToErrFlushesWrsWaitingForTheTarget)
{
    open_dc(4);
    axon_dev_srq_t *empty = nullptr;
    ASSERT_EQ(0, dev_.srq(16, 1, &empty));
    axon_dev_dct_t *d = dct(kKey, empty);
    Qp q;
    dci(&q);
    Buf sb = dev_.reg(64, 0);
    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(0, send(q, d, i, sb.ptr, 64, sb.lkey(), i));
    }
    axon_dev_wc_t wc;
    EXPECT_TRUE(no_wc(q.scq, 0.05)) << "RNR retries forever (rnr_retry 7)";
    axon_dev_qp_attr_t attr;
    memset(&attr, 0, sizeof(attr));
    attr.qp_state = AXON_DEV_QPS_ERR;
    ASSERT_EQ(0, axon_dev_modify_qp(q.qp, &attr, AXON_DEV_QP_STATE));
    for (int i = 0; i < 3; ++i) {
        ASSERT_TRUE(poll_one(q.scq, &wc)) << i;
        EXPECT_EQ((uint64_t)i, wc.wr_id);
        EXPECT_EQ(AXON_DEV_WC_WR_FLUSH_ERR, wc.status) << wc_status_name(wc.status);
    }
    double t0 = axon_test_time();
    destroy_dct(d);   /* the failed DCI told the DCT it left: nothing to wait for */
    EXPECT_LT(axon_test_time() - t0, 0.1);
}

TEST_F(SoftibDc, BadInputIsEinvalWithALogLine)
{
    open_dc(4);
    axon_dev_dct_t *d = dct();
    Qp q, bad;
    dci(&q);
    Buf sb = dev_.reg(64, 0);
    axon_dev_send_wr_t  wr;
    axon_dev_send_wr_t *bad_wr = nullptr;
    axon_dev_sge_t      sge;

    make_wr(&wr, &sge, 1, AXON_DEV_WR_SEND, sb.ptr, 64, sb.lkey());
    EXPECT_EINVAL_LOGS(axon_dev_post_send(q.qp, &wr, &bad_wr), "names no target");
    EXPECT_EQ(&wr, bad_wr);
    wr.dc.ah = ah_;
    EXPECT_EINVAL_LOGS(axon_dev_post_send(q.qp, &wr, &bad_wr), "DCT number 0x0");
    wr.dc.dct_number = 0x1000000;
    EXPECT_EINVAL_LOGS(axon_dev_post_send(q.qp, &wr, &bad_wr), "DCT number 0x1000000");
    axon_dev_send_wr_t en;
    memset(&en, 0, sizeof(en));
    en.opcode                  = AXON_DEV_WR_SEND_ENABLE;
    en.wr.wqe_enable.qp        = q.qp;
    en.dc.ah                   = ah_;
    en.dc.dct_number           = d->dct_num;
    EXPECT_EINVAL_LOGS(axon_dev_post_send(q.qp, &en, &bad_wr), "not valid on a DCI QP");
    EXPECT_EINVAL_LOGS(post_recv(q.qp, 1, sb.ptr, 64, sb.lkey()), "DC initiator");
    EXPECT_EINVAL_LOGS(dev_.qp(&bad, AXON_DEV_QPT_DC_INI, 1, srq_), "only sends");

    axon_dev_dct_init_attr_t a;
    axon_dev_dct_t          *none = nullptr;
    dct_attr(&a, kKey);
    a.srq = nullptr;
    EXPECT_EINVAL_LOGS(axon_dev_create_dct(dev_.ctx, &a, &none), "all three needed");
    dct_attr(&a, kKey);
    a.port = 2;
    EXPECT_EINVAL_LOGS(axon_dev_create_dct(dev_.ctx, &a, &none), "port 2");
    dct_attr(&a, kKey);
    a.mtu = (axon_dev_mtu_t)6;
    EXPECT_EINVAL_LOGS(axon_dev_create_dct(dev_.ctx, &a, &none), "mtu 6");
    dct_attr(&a, kKey);
    a.access_flags = AXON_DEV_ACCESS_MW_BIND;
    EXPECT_EINVAL_LOGS(axon_dev_create_dct(dev_.ctx, &a, &none), "access_flags 0x10");
    dct_attr(&a, kKey);
    a.gid_index = 1;
    EXPECT_EINVAL_LOGS(axon_dev_create_dct(dev_.ctx, &a, &none), "gid_index 1");
    dct_attr(&a, kKey);
    a.create_flags = 1;
    EXPECT_EINVAL_LOGS(axon_dev_create_dct(dev_.ctx, &a, &none), "create_flags 0x1");
    dct_attr(&a, kKey);
    a.min_rnr_timer = 32;
    EXPECT_EINVAL_LOGS(axon_dev_create_dct(dev_.ctx, &a, &none), "min_rnr_timer 32");
    EXPECT_EQ(nullptr, none);
}

/* ---------------------------------------------------------------- destroy while in use */

/*
 * destroy_dct while a DCI sends to it: the DCT finishes with its connected
 * initiator (which drains, then disconnects) before it goes; what is sent
 * to it afterwards finds nobody and fails with RETRY_EXC_ERR.
 */
TEST_F(SoftibDc, DestroyWhileADciSendsLetsItFinish)
{
    const int n = 50;
    open_dc(n);
    axon_dev_dct_t *d = dct();
    Qp q;
    dci(&q, kFastTmo, 1);
    Buf sb = dev_.reg(1024, 0);
    for (int i = 0; i < n; ++i) {
        ASSERT_EQ(0, send(q, d, i, sb.ptr, 1024, sb.lkey(), i));
    }
    axon_dev_wc_t wc[n];
    ASSERT_EQ(1, poll_n(q.scq, 1, wc)) << "sending";
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc[0].status);
    uint32_t gone = d->dct_num;
    double   t0   = axon_test_time();
    destroy_dct(d);
    double took = axon_test_time() - t0;
    EXPECT_LT(took, 1.0);
    ASSERT_EQ(n - 1, poll_n(q.scq, n - 1, wc));
    int ok = 1;
    for (int i = 0; i < n - 1; ++i) {
        ok += (wc[i].status == AXON_DEV_WC_SUCCESS);
    }
    if ((ok < n) && (took >= 0.19)) {
        /* destroy_dct's bound (200 ms) passed with the DCI not through (a host too busy
         * to run this process; seen once in CI): what was not done by then fails with
         * RETRY_EXC (its target is gone) or is flushed behind it, nothing else */
        for (int i = 0; i < n - 1; ++i) {
            EXPECT_TRUE((wc[i].status == AXON_DEV_WC_SUCCESS) ||
                        (wc[i].status == AXON_DEV_WC_RETRY_EXC_ERR) ||
                        (wc[i].status == AXON_DEV_WC_WR_FLUSH_ERR)) << wc_status_name(wc[i].status);
        }
        EXPECT_EQ(ok, poll_n(dcq_, n, wc)) << "each message completed well was received";
        GTEST_SKIP() << "destroy_dct took " << took << " s: its bound passed first";
    }
    for (int i = 0; i < n - 1; ++i) {
        EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc[i].status) << i << ": " << wc_status_name(wc[i].status);
    }
    EXPECT_EQ(n, poll_n(dcq_, n, wc)) << "every message was received";

    ASSERT_EQ(0, send(q, gone, 99, sb.ptr, 64, sb.lkey(), 99));
    ASSERT_TRUE(poll_one(q.scq, wc));
    EXPECT_EQ(AXON_DEV_WC_RETRY_EXC_ERR, wc[0].status) << wc_status_name(wc[0].status);
}

/*
 * An initiator that cannot finish (its target's SRQ is empty: RNR forever)
 * holds destroy_dct for a bounded time only; then its WRs fail.
 */
TEST_F(SoftibDc, DestroyWaitsForAStuckInitiatorBoundedly)
{
    open_dc(4);
    axon_dev_srq_t *empty = nullptr;
    ASSERT_EQ(0, dev_.srq(16, 1, &empty));
    axon_dev_cq_t  *cq = dev_.cq(16);
    axon_dev_dct_t *d  = dct(kKey, empty, cq);
    Qp q;
    dci(&q, kFastTmo, 1);
    Buf sb = dev_.reg(64, 0);
    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(0, send(q, d, i, sb.ptr, 64, sb.lkey(), i));
    }
    axon_dev_wc_t wc;
    EXPECT_TRUE(no_wc(q.scq, 0.02));
    double t0 = axon_test_time();
    destroy_dct(d);
    double took = axon_test_time() - t0;
    EXPECT_GT(took, 0.05) << "it waited for the connected initiator";
    EXPECT_LT(took, 2.0) << "but not forever";
    ASSERT_TRUE(poll_one(q.scq, &wc));
    EXPECT_EQ(0u, wc.wr_id);
    EXPECT_EQ(AXON_DEV_WC_RETRY_EXC_ERR, wc.status) << wc_status_name(wc.status);
    for (int i = 1; i < 3; ++i) {
        ASSERT_TRUE(poll_one(q.scq, &wc));
        EXPECT_EQ(AXON_DEV_WC_WR_FLUSH_ERR, wc.status) << wc_status_name(wc.status);
    }
}

/* A DCI destroyed or reset while connected tells its target, whose destroy has nobody to wait for. */
TEST_F(SoftibDc, DestroyedOrResetDciLeavesItsTarget)
{
    open_dc(64);
    axon_dev_dct_t *d = dct();
    Qp q, r;
    dci(&q);
    dci(&r);
    Buf sb = dev_.reg(64, 0);
    axon_dev_wc_t wc;
    for (int i = 0; i < 20; ++i) {
        ASSERT_EQ(0, send(q, d, i, sb.ptr, 64, sb.lkey(), i));
        ASSERT_EQ(0, send(r, d, i, sb.ptr, 64, sb.lkey(), i));
    }
    ASSERT_TRUE(poll_one(q.scq, &wc));
    ASSERT_TRUE(poll_one(r.scq, &wc));
    dev_.destroy_qp(&q);   /* with sends outstanding: connected */
    axon_dev_qp_attr_t attr;
    memset(&attr, 0, sizeof(attr));
    attr.qp_state = AXON_DEV_QPS_RESET;
    ASSERT_EQ(0, axon_dev_modify_qp(r.qp, &attr, AXON_DEV_QP_STATE));
    double t0 = axon_test_time();
    destroy_dct(d);
    EXPECT_LT(axon_test_time() - t0, 0.1) << "both initiators said they left";
}

/* ---------------------------------------------------------------- many DCIs, lossy wire */

/*
 * More DCIs than a DCT has responder contexts, all sending at once: those
 * that find every context taken are told RNR and retry, nobody fails, and
 * each DCI's messages arrive in its order (none is promised across DCIs).
 */
TEST_F(SoftibDcSlow, ManyDcisOnOneDctShareItsResponderContexts)
{
    env_.set("AXON_SOFTIB_DC_MAX_DCR", "16");
    open_dc(0);
    ASSERT_EQ(16u, dev_.attr.dc.max_dcr);
    const int ndci = (int)dev_.attr.dc.max_dcr + 8, per = 8, total = ndci * per;
    Buf rb = dev_.reg((size_t)total * 64, kLocalWrite);
    for (int i = 0; i < total; ++i) {
        ASSERT_EQ(0, post_srq_recv(srq_, i, rb.ptr + i * 64, 64, rb.lkey()));
    }
    axon_dev_dct_t *d   = dct();
    axon_dev_cq_t  *scq = dev_.cq(4096);
    std::vector<Qp> q(ndci);
    for (auto &x : q) {
        dci(&x, kTimeout, kRetryCnt, kRnrRetry, 16, scq);
    }
    /* One task list: every WR queued before the device runs any, so all DCIs
     * connect at once and some find every responder context taken */
    Buf sb = dev_.reg(64, 0);
    std::vector<axon_dev_send_wr_t> wr(total);
    std::vector<axon_dev_sge_t>     sge(total);
    std::vector<axon_dev_task_t>    task(ndci);
    for (int i = 0; i < ndci; ++i) {
        for (int k = 0; k < per; ++k) {
            axon_dev_send_wr_t *w = &wr[i * per + k];
            make_wr(w, &sge[i * per + k], i * per + k, AXON_DEV_WR_SEND_WITH_IMM, sb.ptr, 64,
                    sb.lkey());
            w->imm_data          = htonl(i << 16 | k);
            w->dc.ah             = ah_;
            w->dc.dct_number     = d->dct_num;
            w->dc.dct_access_key = kKey;
            w->next              = (k + 1 < per) ? w + 1 : nullptr;
        }
        memset(&task[i], 0, sizeof(task[i]));
        task[i].task_type    = AXON_DEV_TASK_SEND;
        task[i].item.qp      = q[i].qp;
        task[i].item.send_wr = &wr[i * per];
        task[i].next         = (i + 1 < ndci) ? &task[i + 1] : nullptr;
    }
    axon_dev_task_t *bad_task = nullptr;
    ASSERT_EQ(0, axon_dev_post_task(dev_.ctx, task.data(), &bad_task));
    std::vector<axon_dev_wc_t> wc(total);
    ASSERT_EQ(total, poll_n(scq, total, wc.data(), 20));
    for (auto &w : wc) {
        ASSERT_EQ(AXON_DEV_WC_SUCCESS, w.status) << wc_status_name(w.status);
    }
    ASSERT_EQ(total, poll_n(dcq_, total, wc.data(), 20));
    std::map<uint32_t, int> next;   /* src_qp -> next k */
    std::map<uint32_t, int> index;
    for (int i = 0; i < ndci; ++i) {
        index[q[i].qpn()] = i;
    }
    for (auto &w : wc) {
        ASSERT_EQ(AXON_DEV_WC_SUCCESS, w.status) << wc_status_name(w.status);
        uint32_t imm = ntohl(w.imm_data);
        ASSERT_EQ(index.at(w.src_qp), (int)(imm >> 16)) << "the source is the sender";
        EXPECT_EQ(next[w.src_qp]++, (int)(imm & 0xffff)) << "DCI " << (imm >> 16);
    }
    EXPECT_EQ((size_t)ndci, next.size());
}

/*
 * Two DCIs, two DCTs, sends, reads and fetch-adds with changing targets over
 * a wire that loses, duplicates and reorders: every message once, in each
 * DCI's order, every atomic executed exactly once, all data right.
 */
TEST_F(SoftibDcSlow, LossyWireRetargetingExactlyOnceInOrder)
{
    const int n = 60;
    env_.set("AXON_SOFTIB_LOSS", "0.1");
    env_.set("AXON_SOFTIB_DUP", "0.1");
    env_.set("AXON_SOFTIB_REORDER", "0.1");
    open_dc(2 * n);
    axon_dev_cq_t  *cq_b = dev_.cq(1024);
    axon_dev_dct_t *t[2] = {dct(), dct(kKey, nullptr, cq_b)};
    Qp q[2];
    dci(&q[0], 10, 7, 7, 256);
    dci(&q[1], 10, 7, 7, 256);
    Buf sb     = dev_.reg((size_t)2 * n * 2048, 0);
    Buf remote = dev_.reg(8192, kRemoteAll);
    Buf local  = dev_.reg((size_t)n * 2 * 2048, kLocalWrite);
    axon_test_fill(remote.ptr, 4096, 77);
    uint64_t *counter = (uint64_t *)(remote.ptr + 4096);
    std::mt19937 rng(11);
    std::map<uint32_t, std::vector<uint32_t>> sent;   /* (DCT) -> imms in order, per DCI */
    int adds = 0;
    for (int i = 0; i < n; ++i) {
        for (int k = 0; k < 2; ++k) {
            int which = (int)(rng() % 2), what = (int)(rng() % 4);
            uint64_t id = (uint64_t)k << 32 | i;
            uint8_t *l = local.ptr + ((size_t)k * n + i) * 2048;
            if (what == 0) {
                ASSERT_EQ(0, rdma(q[k], t[which], id, AXON_DEV_WR_RDMA_READ, l, 2000,
                                  local.lkey(), remote.addr(100), remote.rkey()));
            } else if (what == 1) {
                ASSERT_EQ(0, atomic(q[k], t[which], id, AXON_DEV_WR_ATOMIC_FETCH_AND_ADD,
                                    (uint64_t *)l, local.lkey(), remote.addr(4096),
                                    remote.rkey(), 1));
                ++adds;
            } else {
                uint32_t imm = (uint32_t)(k << 16 | i), len = 1 + (uint32_t)(rng() % 2000);
                uint8_t *p = sb.ptr + ((size_t)k * n + i) * 2048;
                axon_test_fill(p, len, imm);
                ASSERT_EQ(0, send(q[k], t[which], id, p, len, sb.lkey(), imm));
                sent[t[which]->dct_num].push_back(imm);
            }
        }
    }
    axon_dev_wc_t wc;
    for (int k = 0; k < 2; ++k) {
        for (int i = 0; i < n; ++i) {
            ASSERT_TRUE(poll_one(q[k].scq, &wc, 10)) << "DCI " << k << " WR " << i;
            ASSERT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
            ASSERT_EQ((uint64_t)k << 32 | i, wc.wr_id) << "in posting order";
            if (wc.opcode == AXON_DEV_WC_RDMA_READ) {
                EXPECT_EQ(-1, axon_test_check_at(local.ptr + ((size_t)k * n + i) * 2048, 2000,
                                                 77, 100));
            }
        }
    }
    EXPECT_EQ((uint64_t)adds, *counter) << "each fetch-add executed once";
    axon_dev_cq_t *cqs[2] = {dcq_, cq_b};
    for (int j = 0; j < 2; ++j) {
        std::map<int, std::vector<uint32_t>> got;   /* per DCI */
        std::map<int, std::vector<uint32_t>> want;
        for (uint32_t imm : sent[t[j]->dct_num]) {
            want[imm >> 16].push_back(imm);
        }
        for (size_t m = 0; m < sent[t[j]->dct_num].size(); ++m) {
            ASSERT_TRUE(poll_one(cqs[j], &wc, 10)) << "DCT " << j << " message " << m;
            ASSERT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
            uint32_t imm = ntohl(wc.imm_data);
            EXPECT_EQ(q[imm >> 16].qpn(), wc.src_qp);
            EXPECT_EQ(-1, axon_test_check(rbuf_.ptr + wc.wr_id * kMsg, wc.byte_len, imm));
            got[imm >> 16].push_back(imm);
        }
        EXPECT_EQ(want, got) << "DCT " << j << ": each DCI's messages once, in order";
        EXPECT_TRUE(no_wc(cqs[j], 0.05)) << "a message arrived twice";
    }
}

/*
 * A process's slot, and with it its DCI numbers, goes to the next process
 * once it is gone; the new DCI's PSNs start over. Its first message must
 * open a new connection at a DCT that still holds the old owner's (same
 * QP number, a later or equal PSN): taken for a stale packet, it was
 * dropped until the new initiator ran out of retries (seen by axon_soak
 * over dc after a killed rank's restart).
 */
class SoftibDcSlotXproc : public SoftibDc {
  protected:
    /* Poll cq (which drives the device) until fd has data or its end closed. */
    bool progress_until_readable(axon_dev_cq_t *cq, int fd, double timeout)
    {
        double deadline = axon_test_time() + timeout;
        do {
            axon_dev_wc_t wc;
            if (fd_readable(fd, 0)) {
                return true;
            }
            if (!no_wc(cq, 0.001, &wc)) {
                ADD_FAILURE() << "an unexpected completion, status " << wc_status_name(wc.status);
                return false;
            }
        } while (axon_test_time() < deadline);
        return false;
    }
};

TEST_F(SoftibDcSlotXproc, DciNumberReusedByANewProcessReachesTheDct)
{
    struct Target {
        axon_dev_gid_t gid;
        uint32_t       dct;
        int            index;   /* the message's immediate data */
    };
    /* One message to the DCT, its completion, the DCI's number up; then exit. */
    auto initiator = [](int fd, void *arg) -> int {
        const Target &t = *static_cast<Target *>(arg);
        SoftibDev     dev;
        Qp            q;
        axon_dev_wc_t wc;
        PEER_CHECK(dev.open() == 0, "open");
        PEER_CHECK(dev.qp(&q, AXON_DEV_QPT_DC_INI, 1, nullptr, 0, 16) == 0, "create the DCI");
        PEER_CHECK(dci_up(q, t.gid, kTimeout, kRetryCnt, kRnrRetry) == 0, "the DCI up");
        Buf                 b = dev.reg(4096, kLocalWrite);
        axon_dev_send_wr_t  wr, *bad = nullptr;
        axon_dev_sge_t      sge;
        axon_test_fill(b.ptr, 64, 700 + t.index);
        make_wr(&wr, &sge, 1, AXON_DEV_WR_SEND_WITH_IMM, b.ptr, 64, b.lkey());
        wr.imm_data           = htonl((uint32_t)t.index);
        wr.dc.ah              = dev.ah(t.gid);
        wr.dc.dct_number      = t.dct;
        wr.dc.dct_access_key  = kKey;
        PEER_CHECK(axon_dev_post_send(q.qp, &wr, &bad) == 0, "post");
        PEER_CHECK(poll_one(q.scq, &wc, 20), "no completion");
        PEER_CHECK(wc.status == AXON_DEV_WC_SUCCESS, "process %d's message: %s", t.index,
                   wc_status_name(wc.status));
        uint32_t qpn = q.qpn();
        PEER_CHECK(axon_test_send_blob(fd, &qpn, sizeof(qpn)) == 0, "the DCI's number");
        return 0;
    };

    /*
     * No progress thread here: a fork while one runs can copy a lock it
     * holds (ASan's allocator's), and the child hangs on it. Polling the
     * DCT's CQ until the child is done makes the DCT answer instead.
     */
    env_.set("AXON_SOFTIB_PROGRESS_THREAD", "n");
    open_dc(4);
    axon_dev_dct_t *d = dct();
    ASSERT_NE(nullptr, d);
    uint32_t qpn[2] = {0, 0};
    for (int k = 0; k < 2; ++k) {
        Target           t = {dev_.gid, d->dct_num, k};
        axon_test_peer_t peer;
        axon_dev_wc_t    wc;
        ASSERT_EQ(0, axon_test_peer_spawn(&peer, initiator, &t, 60));
        ASSERT_TRUE(poll_one(dcq_, &wc, 20)) << "process " << k << "'s message";
        ASSERT_TRUE(progress_until_readable(dcq_, peer.fd, 20)) << "process " << k;
        ASSERT_EQ(0, recv_struct(peer.fd, &qpn[k])) << "process " << k;
        ASSERT_TRUE(progress_until_readable(dcq_, peer.fd, 20)) << "process " << k << " exits";
        EXPECT_EQ(0, axon_test_peer_wait(&peer, 30)) << "process " << k << " (see its stderr)";
        ASSERT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
        EXPECT_EQ((uint32_t)k, ntohl(wc.imm_data));
        EXPECT_EQ(-1, axon_test_check(rbuf_.ptr + wc.wr_id * kMsg, wc.byte_len, 700 + k));
        if (k == 0) {
            /* softib numbers a slot's QPs on across owners; rewound, as after their wrap */
            softib_registry_t *reg = nullptr;
            ASSERT_EQ(0, softib_registry_open(0, &reg));
            softib_registry_set_next_qp_index(reg, SOFTIB_QPN_SLOT(qpn[0]),
                                              SOFTIB_QPN_INDEX(qpn[0]));
            softib_registry_close(reg);
        }
    }
    if (qpn[0] != qpn[1]) {
        GTEST_SKIP() << "another process took the slot in between: DCI 0x" << std::hex << qpn[0]
                     << ", then 0x" << qpn[1];
    }
}

/* ---------------------------------------------------------------- across processes */

const int    kXprocMsgs   = 20;
const size_t kXprocRegion = 32 * 1024;

/* What the target tells the initiator: its DCT, GID and memory; then the DCI's number back. */
struct DcPeerInfo {
    uint32_t       dct_num;
    uint32_t       rkey;
    uint64_t       addr;
    axon_dev_gid_t gid;
};

/*
 * The target process: a DCT on an SRQ, served by the progress thread while
 * the process blocks on the socket; then it checks what arrived.
 */
int dc_xproc_target(int fd, void *arg)
{
    const SoftibWire &cfg = *static_cast<SoftibWire *>(arg);
    EnvGuard      env;
    SoftibDev     dev;
    axon_dev_srq_t *srq = nullptr;
    axon_dev_dct_t *dct = nullptr;
    axon_dev_dct_init_attr_t a;
    DcPeerInfo    info;
    uint32_t      dci = 0;
    axon_dev_wc_t wc;

    softib_wire_env(cfg, 1, &env);
    env.set("AXON_SOFTIB_PROGRESS_THREAD", "y");
    PEER_CHECK(dev.open() == 0, "open");
    Buf region = dev.reg(kXprocRegion, kRemoteAll);
    Buf rb     = dev.reg(kXprocMsgs * kMsg, kLocalWrite);
    axon_test_fill(region.ptr + kXprocRegion / 2, kXprocRegion / 4, 66);
    PEER_CHECK(dev.srq(64, 1, &srq) == 0, "create_srq");
    for (int i = 0; i < kXprocMsgs; ++i) {
        PEER_CHECK(post_srq_recv(srq, i, rb.ptr + i * kMsg, kMsg, rb.lkey()) == 0, "recv");
    }
    memset(&a, 0, sizeof(a));
    a.pd = dev.pd; a.cq = dev.cq(64); a.srq = srq; a.dc_key = kKey; a.port = 1;
    a.access_flags = kDctAccess; a.min_rnr_timer = kMinRnrTimer; a.mtu = kPathMtu;
    PEER_CHECK(axon_dev_create_dct(dev.ctx, &a, &dct) == 0, "create_dct");
    info.dct_num = dct->dct_num;
    info.rkey    = region.rkey();
    info.addr    = region.addr();
    info.gid     = dev.gid;
    PEER_CHECK(axon_test_send_blob(fd, &info, sizeof(info)) == 0, "send info");
    PEER_CHECK(recv_struct(fd, &dci) == 0, "the DCI's number");
    PEER_CHECK(axon_test_sync(fd) == 0, "sync: the initiator is done");   /* no softib call */
    for (int i = 0; i < kXprocMsgs; ++i) {
        PEER_CHECK(poll_one(a.cq, &wc, 20), "message %d did not arrive", i);
        PEER_CHECK(wc.status == AXON_DEV_WC_SUCCESS, "message %d: %s", i,
                   wc_status_name(wc.status));
        PEER_CHECK((wc.src_qp == dci) && (wc.qp_num == dct->dct_num), "message %d from 0x%x "
                   "to 0x%x", i, wc.src_qp, wc.qp_num);
        PEER_CHECK(ntohl(wc.imm_data) == (uint32_t)i, "message %d came as %u", i,
                   ntohl(wc.imm_data));
        PEER_CHECK(axon_test_check(rb.ptr + wc.wr_id * kMsg, wc.byte_len, 300 + i) == -1,
                   "message %d corrupt", i);
    }
    PEER_CHECK(axon_test_check(region.ptr, kXprocRegion / 4, 55) == -1, "RDMA write data");
    PEER_CHECK(*(uint64_t *)(region.ptr + kXprocRegion - 8) == 4 * 9, "fetch-add word");
    PEER_CHECK(axon_dev_destroy_dct(dct) == 0, "destroy_dct");
    return 0;
}

using SoftibDcXproc = SoftibWithPeer<SoftibDc, SoftibWire>;

TEST_P(SoftibDcXproc, DciToADctInAnotherProcess)
{
    SoftibWire    cfg = GetParam();
    DcPeerInfo    info;
    Qp            q;
    axon_dev_wc_t wc;

    softib_wire_env(cfg, 0, &env_);
    ASSERT_EQ(0, axon_test_peer_spawn(&peer_, dc_xproc_target, &cfg, 60));
    spawned_ = true;
    open_dev();
    ASSERT_EQ(0, recv_struct(peer_.fd, &info));
    ah_ = dev_.ah(info.gid);
    dci(&q);
    uint32_t dci_num = q.qpn();
    ASSERT_EQ(0, axon_test_send_blob(peer_.fd, &dci_num, sizeof(dci_num)));
    Buf sb = dev_.reg(kXprocRegion, kLocalWrite);
    for (int i = 0; i < kXprocMsgs; ++i) {
        uint32_t len = 1 + (uint32_t)i * 200;   /* up to four packets */
        axon_test_fill(sb.ptr + i * 1024, len, 300 + i);
        ASSERT_EQ(0, send(q, info.dct_num, i, sb.ptr + i * 1024, len, sb.lkey(), i));
    }
    for (int i = 0; i < kXprocMsgs; ++i) {
        ASSERT_TRUE(poll_one(q.scq, &wc, 20)) << i;
        ASSERT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    }
    axon_test_fill(sb.ptr, kXprocRegion / 4, 55);
    axon_dev_send_wr_t wr;
    axon_dev_sge_t     sge;
    make_wr(&wr, &sge, 100, AXON_DEV_WR_RDMA_WRITE, sb.ptr, kXprocRegion / 4, sb.lkey());
    wr.wr.rdma.remote_addr = info.addr;
    wr.wr.rdma.rkey        = info.rkey;
    ASSERT_EQ(0, post_dc(q, &wr, info.dct_num));
    make_wr(&wr, &sge, 101, AXON_DEV_WR_RDMA_READ, sb.ptr + kXprocRegion / 2,
            kXprocRegion / 4, sb.lkey());
    wr.wr.rdma.remote_addr = info.addr + kXprocRegion / 2;
    wr.wr.rdma.rkey        = info.rkey;
    ASSERT_EQ(0, post_dc(q, &wr, info.dct_num));
    uint64_t *res = (uint64_t *)(sb.ptr + kXprocRegion - 64);
    for (int i = 0; i < 4; ++i) {
        make_wr(&wr, &sge, 200 + i, AXON_DEV_WR_ATOMIC_FETCH_AND_ADD, res + i, 8, sb.lkey());
        wr.wr.atomic.remote_addr = info.addr + kXprocRegion - 8;
        wr.wr.atomic.rkey        = info.rkey;
        wr.wr.atomic.compare_add = 9;
        ASSERT_EQ(0, post_dc(q, &wr, info.dct_num));
    }
    for (int i = 0; i < 6; ++i) {
        ASSERT_TRUE(poll_one(q.scq, &wc, 20)) << i;
        ASSERT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    }
    EXPECT_EQ(-1, axon_test_check(sb.ptr + kXprocRegion / 2, kXprocRegion / 4, 66));
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(9u * i, res[i]);
    }
    ASSERT_EQ(0, axon_test_sync(peer_.fd));
    EXPECT_EQ(0, axon_test_peer_wait(&peer_, 60)) << "the target failed (see its stderr)";
    spawned_ = false;
}

INSTANTIATE_TEST_SUITE_P(Wire, SoftibDcXproc, ::testing::ValuesIn(kSoftibPeerWires),
                         softib_wire_name);

}  // namespace
