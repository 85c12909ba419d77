/*
 * The opcode-by-QP-type table of ibv_post_send(3) (seed 002), every cell:
 * an allowed opcode does the real operation and the data is checked; a
 * disallowed one fails at post with EINVAL and *bad_wr pointing at it,
 * while the WR posted before it in the same list still executes.
 * Then the send flags: SIGNALED (with and without sq_sig_all), INLINE (up
 * to max_inline_data, buffer reusable at return, lkey ignored; over the
 * limit EINVAL), FENCE and SOLICITED, and completion channels with epoll.
 */
#include "softib_env.h"

#include <sys/epoll.h>

namespace {

const int kRemoteAll = AXON_DEV_ACCESS_LOCAL_WRITE | AXON_DEV_ACCESS_REMOTE_WRITE |
                       AXON_DEV_ACCESS_REMOTE_READ | AXON_DEV_ACCESS_REMOTE_ATOMIC;
const uint32_t kGrh = 40;   /* UD receive buffers start with the GRH area */

const char *op_name(axon_dev_wr_opcode_t op)
{
    switch (op) {
    case AXON_DEV_WR_RDMA_WRITE:           return "RdmaWrite";
    case AXON_DEV_WR_RDMA_WRITE_WITH_IMM:  return "RdmaWriteWithImm";
    case AXON_DEV_WR_SEND:                 return "Send";
    case AXON_DEV_WR_SEND_WITH_IMM:        return "SendWithImm";
    case AXON_DEV_WR_RDMA_READ:            return "RdmaRead";
    case AXON_DEV_WR_ATOMIC_CMP_AND_SWP:   return "AtomicCmpAndSwp";
    case AXON_DEV_WR_ATOMIC_FETCH_AND_ADD: return "AtomicFetchAndAdd";
    case AXON_DEV_WR_EXT_MASKED_ATOMIC_CMP_AND_SWP:   return "MaskedCmpAndSwp";
    case AXON_DEV_WR_EXT_MASKED_ATOMIC_FETCH_AND_ADD: return "MaskedFetchAndAdd";
    case AXON_DEV_WR_SEND_ENABLE:          return "SendEnable";
    case AXON_DEV_WR_RECV_ENABLE:          return "RecvEnable";
    case AXON_DEV_WR_CQE_WAIT:             return "CqeWait";
    case AXON_DEV_WR_UMR_FILL:             return "UmrFill";
    case AXON_DEV_WR_UMR_INVALIDATE:       return "UmrInvalidate";
    }
    return "?";
}

const char *qpt_name(axon_dev_qp_type_t type)
{
    return (type == AXON_DEV_QPT_RC) ? "Rc" : (type == AXON_DEV_QPT_UC) ? "Uc" : "Ud";
}

/* Seed 002's table: X where the QP type allows the opcode. */
bool opcode_allowed(axon_dev_qp_type_t type, axon_dev_wr_opcode_t op)
{
    switch (op) {
    case AXON_DEV_WR_SEND:
    case AXON_DEV_WR_SEND_WITH_IMM:
        return true;
    case AXON_DEV_WR_RDMA_WRITE:
    case AXON_DEV_WR_RDMA_WRITE_WITH_IMM:
        return type != AXON_DEV_QPT_UD;
    default:
        return type == AXON_DEV_QPT_RC;
    }
}

struct OpCase {
    axon_dev_qp_type_t   type;
    axon_dev_wr_opcode_t op;
};

void PrintTo(const OpCase &c, std::ostream *os)
{
    *os << qpt_name(c.type) << " " << op_name(c.op);
}

std::vector<OpCase> op_cases()
{
    std::vector<OpCase> v;
    for (axon_dev_qp_type_t t : {AXON_DEV_QPT_UD, AXON_DEV_QPT_UC, AXON_DEV_QPT_RC}) {
        for (int op = AXON_DEV_WR_RDMA_WRITE; op <= AXON_DEV_WR_ATOMIC_FETCH_AND_ADD; ++op) {
            v.push_back({t, (axon_dev_wr_opcode_t)op});
        }
    }
    return v;
}

/* ---------------------------------------------------------------- fixture */

class SoftibOpcode : public SoftibTest, public ::testing::WithParamInterface<OpCase> {
protected:
    Qp             a_, b_;
    axon_dev_ah_t *ah_ = nullptr;

    void pair(axon_dev_qp_type_t type, int sq_sig_all = 1, uint32_t max_inline = 0)
    {
        make_pair(type, &a_, &b_, sq_sig_all, max_inline);
        if (!HasFatalFailure() && (type == AXON_DEV_QPT_UD)) {
            ah_ = dev_.ah(dev_.gid);
        }
    }

    /* Address a WR from a_ to b_ (UD needs the AH, QPN and Q_Key). */
    void address(axon_dev_send_wr_t *wr)
    {
        if (a_.type == AXON_DEV_QPT_UD) {
            wr->wr.ud.ah          = ah_;
            wr->wr.ud.remote_qpn  = b_.qpn();
            wr->wr.ud.remote_qkey = kQkey;
        }
    }

    /* A two-sided message from a_ to b_: post, then check both completions. */
    void send_and_check(axon_dev_wr_opcode_t op, uint32_t len, unsigned flags,
                        const void *src, uint32_t lkey, uint64_t seed)
    {
        const uint32_t grh = (a_.type == AXON_DEV_QPT_UD) ? kGrh : 0;
        Buf            rb  = dev_.reg(len + grh + 64, AXON_DEV_ACCESS_LOCAL_WRITE);
        axon_dev_send_wr_t wr;
        axon_dev_sge_t     sge;
        axon_dev_wc_t      wc;

        ASSERT_EQ(0, post_recv(b_.qp, 77, rb.ptr, len + grh + 64, rb.lkey()));
        make_wr(&wr, &sge, 11, op, (void *)src, len, lkey, flags);
        wr.imm_data = htonl(0xabcd1234);
        address(&wr);
        ASSERT_EQ(0, post_one(a_.qp, &wr));
        ASSERT_TRUE(poll_one(a_.scq, &wc)) << "no send completion";
        EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
        EXPECT_EQ(11u, wc.wr_id);
        EXPECT_EQ(AXON_DEV_WC_SEND, wc.opcode);
        ASSERT_TRUE(poll_one(b_.rcq, &wc)) << "no receive completion";
        EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
        EXPECT_EQ(77u, wc.wr_id);
        EXPECT_EQ(AXON_DEV_WC_RECV, wc.opcode);
        EXPECT_EQ(len + grh, wc.byte_len);
        EXPECT_EQ(b_.qpn(), wc.qp_num);
        if (op == AXON_DEV_WR_SEND_WITH_IMM) {
            EXPECT_TRUE(wc.wc_flags & AXON_DEV_WC_WITH_IMM);
            EXPECT_EQ(htonl(0xabcd1234), wc.imm_data);
        } else {
            EXPECT_FALSE(wc.wc_flags & AXON_DEV_WC_WITH_IMM);
        }
        if (a_.type == AXON_DEV_QPT_UD) {
            EXPECT_TRUE(wc.wc_flags & AXON_DEV_WC_GRH);
            EXPECT_EQ(a_.qpn(), wc.src_qp);
        }
        EXPECT_EQ(-1, axon_test_check(rb.ptr + grh, len, seed)) << "payload";
    }

    /* Do the operation of an allowed cell and check the data it moved. */
    void run_allowed(axon_dev_wr_opcode_t op)
    {
        const uint32_t len = 3000;   /* three packets at the 1024-byte path MTU */
        axon_dev_wc_t  wc;

        if ((op == AXON_DEV_WR_SEND) || (op == AXON_DEV_WR_SEND_WITH_IMM)) {
            const uint32_t n = (a_.type == AXON_DEV_QPT_UD) ? 1000 : len;
            Buf sb = dev_.reg(n, 0);
            axon_test_fill(sb.ptr, n, 5);
            send_and_check(op, n, AXON_DEV_SEND_SIGNALED, sb.ptr, sb.lkey(), 5);
            return;
        }

        Buf      local  = dev_.reg(len, AXON_DEV_ACCESS_LOCAL_WRITE);
        Buf      remote = dev_.reg(len, kRemoteAll);
        Buf      rb     = dev_.reg(64, AXON_DEV_ACCESS_LOCAL_WRITE);
        uint64_t *word  = (uint64_t *)remote.ptr;
        uint64_t *res   = (uint64_t *)local.ptr;

        switch (op) {
        case AXON_DEV_WR_RDMA_WRITE:
        case AXON_DEV_WR_RDMA_WRITE_WITH_IMM: {
            axon_dev_send_wr_t wr;
            axon_dev_sge_t     sge;
            axon_test_fill(local.ptr, len, 9);
            if (op == AXON_DEV_WR_RDMA_WRITE_WITH_IMM) {
                ASSERT_EQ(0, post_recv(b_.qp, 55, rb.ptr, 64, rb.lkey()));
            }
            make_wr(&wr, &sge, 12, op, local.ptr, len, local.lkey());
            wr.imm_data           = htonl(0x5a5a0001);
            wr.wr.rdma.remote_addr = remote.addr();
            wr.wr.rdma.rkey        = remote.rkey();
            ASSERT_EQ(0, post_one(a_.qp, &wr));
            ASSERT_TRUE(poll_one(a_.scq, &wc));
            EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
            EXPECT_EQ(AXON_DEV_WC_RDMA_WRITE, wc.opcode);
            if (op == AXON_DEV_WR_RDMA_WRITE_WITH_IMM) {
                ASSERT_TRUE(poll_one(b_.rcq, &wc)) << "write with imm consumes a receive";
                EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
                EXPECT_EQ(55u, wc.wr_id);
                EXPECT_EQ(AXON_DEV_WC_RECV_RDMA_WITH_IMM, wc.opcode);
                EXPECT_TRUE(wc.wc_flags & AXON_DEV_WC_WITH_IMM);
                EXPECT_EQ(htonl(0x5a5a0001), wc.imm_data);
            } else {
                EXPECT_TRUE(no_wc(b_.rcq, 0.02)) << "plain write completes nothing remotely";
            }
            /* for UC the completion may precede the data landing on the peer */
            EXPECT_TRUE(wait_data(remote.ptr, len, 9, b_.rcq)) << "written data";
            break;
        }
        case AXON_DEV_WR_RDMA_READ:
            axon_test_fill(remote.ptr, len, 10);
            ASSERT_EQ(0, post_rdma(a_.qp, 13, op, local.ptr, len, local.lkey(), remote.addr(),
                                   remote.rkey()));
            ASSERT_TRUE(poll_one(a_.scq, &wc));
            EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
            EXPECT_EQ(AXON_DEV_WC_RDMA_READ, wc.opcode);
            EXPECT_EQ(len, wc.byte_len);
            EXPECT_EQ(-1, axon_test_check(local.ptr, len, 10));
            break;
        case AXON_DEV_WR_ATOMIC_CMP_AND_SWP:
            *word = 5;
            ASSERT_EQ(0, post_atomic(a_.qp, 14, op, res, local.lkey(), remote.addr(),
                                     remote.rkey(), 5, 9));
            ASSERT_TRUE(poll_one(a_.scq, &wc));
            EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
            EXPECT_EQ(AXON_DEV_WC_COMP_SWAP, wc.opcode);
            EXPECT_EQ(5u, *res) << "the old value comes back";
            EXPECT_EQ(9u, *word) << "swapped";
            /* compare fails: no swap, old value returned */
            ASSERT_EQ(0, post_atomic(a_.qp, 15, op, res, local.lkey(), remote.addr(),
                                     remote.rkey(), 5, 11));
            ASSERT_TRUE(poll_one(a_.scq, &wc));
            EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status);
            EXPECT_EQ(9u, *res);
            EXPECT_EQ(9u, *word);
            break;
        case AXON_DEV_WR_ATOMIC_FETCH_AND_ADD:
            *word = 100;
            ASSERT_EQ(0, post_atomic(a_.qp, 16, op, res, local.lkey(), remote.addr(),
                                     remote.rkey(), 7));
            ASSERT_TRUE(poll_one(a_.scq, &wc));
            EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
            EXPECT_EQ(AXON_DEV_WC_FETCH_ADD, wc.opcode);
            EXPECT_EQ(100u, *res);
            EXPECT_EQ(107u, *word);
            break;
        default:
            FAIL();
        }
    }

    /*
     * [SEND (ok), op (refused), SEND]: EINVAL, bad_wr = the second, the
     * first is delivered and the third is not.
     */
    void run_refused(axon_dev_wr_opcode_t op)
    {
        const uint32_t grh = (a_.type == AXON_DEV_QPT_UD) ? kGrh : 0;
        Buf            sb  = dev_.reg(256, kRemoteAll);
        Buf            rb  = dev_.reg(2 * 512, AXON_DEV_ACCESS_LOCAL_WRITE);
        axon_dev_send_wr_t  wr[3];
        axon_dev_sge_t      sge[3];
        axon_dev_send_wr_t *bad = nullptr;
        axon_dev_wc_t       wc;

        axon_test_fill(sb.ptr, 64, 3);
        ASSERT_EQ(0, post_recv(b_.qp, 1, rb.ptr, 512, rb.lkey()));
        ASSERT_EQ(0, post_recv(b_.qp, 2, rb.ptr + 512, 512, rb.lkey()));
        make_wr(&wr[0], &sge[0], 100, AXON_DEV_WR_SEND, sb.ptr, 64, sb.lkey());
        make_wr(&wr[1], &sge[1], 101, op, sb.ptr + 128, 8, sb.lkey());
        make_wr(&wr[2], &sge[2], 102, AXON_DEV_WR_SEND, sb.ptr, 64, sb.lkey());
        for (int i = 0; i < 3; ++i) {
            address(&wr[i]);
            if (i < 2) {
                wr[i].next = &wr[i + 1];
            }
        }
        /* give the refused WR whatever its opcode would need */
        wr[1].wr.atomic.remote_addr = sb.addr(192);
        wr[1].wr.atomic.rkey        = sb.rkey();
        if (a_.type == AXON_DEV_QPT_UD) {
            /* the UD view of the union overlaps; keep the address usable */
            address(&wr[1]);
        }
        EXPECT_EQ(EINVAL, axon_dev_post_send(a_.qp, &wr[0], &bad));
        EXPECT_EQ(&wr[1], bad) << "bad_wr must point at the refused WR";
        ASSERT_TRUE(poll_one(a_.scq, &wc)) << "the WR before the refused one was posted";
        EXPECT_EQ(100u, wc.wr_id);
        EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
        ASSERT_TRUE(poll_one(b_.rcq, &wc));
        EXPECT_EQ(1u, wc.wr_id);
        EXPECT_EQ(64u + grh, wc.byte_len);
        EXPECT_EQ(-1, axon_test_check(rb.ptr + grh, 64, 3));
        EXPECT_TRUE(no_wc(a_.scq, 0.05, &wc)) << "WR after the refused one ran: " << wc.wr_id;
        EXPECT_TRUE(no_wc(b_.rcq, 0.01, &wc));
        /* the QP is still usable */
        EXPECT_EQ(AXON_DEV_QPS_RTS, query_state(a_.qp));
    }
};

TEST_P(SoftibOpcode, Cell)
{
    const OpCase &c = GetParam();

    open_dev();
    pair(c.type);
    if (HasFatalFailure()) {
        return;
    }
    if (opcode_allowed(c.type, c.op)) {
        run_allowed(c.op);
    } else {
        run_refused(c.op);
    }
}

INSTANTIATE_TEST_SUITE_P(Seed002, SoftibOpcode, ::testing::ValuesIn(op_cases()),
                         [](const ::testing::TestParamInfo<OpCase> &info) {
                             return std::string(qpt_name(info.param.type)) +
                                    op_name(info.param.op) +
                                    (opcode_allowed(info.param.type, info.param.op)
                                         ? "Completes" : "RefusedAtPost");
                         });

/* ---------------------------------------------------------------- send flags */

class SoftibSendFlags : public SoftibOpcode {};

/* sq_sig_all = 0: only WRs with SIGNALED produce a send completion. */
TEST_F(SoftibSendFlags, SignaledOnlyWhenFlaggedWithoutSqSigAll)
{
    axon_dev_wc_t wc[8];

    open_dev();
    pair(AXON_DEV_QPT_RC, 0);
    Buf sb = dev_.reg(64, 0);
    Buf rb = dev_.reg(4 * 64, AXON_DEV_ACCESS_LOCAL_WRITE);
    for (int i = 0; i < 4; ++i) {
        ASSERT_EQ(0, post_recv(b_.qp, i, rb.ptr + 64 * i, 64, rb.lkey()));
    }
    ASSERT_EQ(0, post_send_op(a_.qp, 1, AXON_DEV_WR_SEND, sb.ptr, 8, sb.lkey(), 0));
    ASSERT_EQ(0, post_send_op(a_.qp, 2, AXON_DEV_WR_SEND, sb.ptr, 8, sb.lkey(),
                              AXON_DEV_SEND_SIGNALED));
    ASSERT_EQ(0, post_send_op(a_.qp, 3, AXON_DEV_WR_SEND, sb.ptr, 8, sb.lkey(), 0));
    ASSERT_EQ(0, post_send_op(a_.qp, 4, AXON_DEV_WR_SEND, sb.ptr, 8, sb.lkey(),
                              AXON_DEV_SEND_SIGNALED));
    ASSERT_EQ(4, poll_n(b_.rcq, 4, wc)) << "every message arrives";
    ASSERT_EQ(2, poll_n(a_.scq, 2, wc));
    EXPECT_EQ(2u, wc[0].wr_id);
    EXPECT_EQ(4u, wc[1].wr_id);
    EXPECT_TRUE(no_wc(a_.scq, 0.05)) << "an unsignaled WR completed";
}

/* sq_sig_all = 1: every WR completes, SIGNALED or not. */
TEST_F(SoftibSendFlags, AllSignaledWithSqSigAll)
{
    axon_dev_wc_t wc[4];

    open_dev();
    pair(AXON_DEV_QPT_RC, 1);
    Buf sb = dev_.reg(64, 0);
    Buf rb = dev_.reg(2 * 64, AXON_DEV_ACCESS_LOCAL_WRITE);
    ASSERT_EQ(0, post_recv(b_.qp, 0, rb.ptr, 64, rb.lkey()));
    ASSERT_EQ(0, post_recv(b_.qp, 1, rb.ptr + 64, 64, rb.lkey()));
    ASSERT_EQ(0, post_send_op(a_.qp, 1, AXON_DEV_WR_SEND, sb.ptr, 8, sb.lkey(), 0));
    ASSERT_EQ(0, post_send_op(a_.qp, 2, AXON_DEV_WR_SEND, sb.ptr, 8, sb.lkey(),
                              AXON_DEV_SEND_SIGNALED));
    ASSERT_EQ(2, poll_n(a_.scq, 2, wc));
    EXPECT_EQ(1u, wc[0].wr_id);
    EXPECT_EQ(2u, wc[1].wr_id);
}

/* Unsignaled RDMA reads and writes complete silently, and in order. */
TEST_F(SoftibSendFlags, UnsignaledRdmaThenSignaledCompletesInOrder)
{
    axon_dev_wc_t wc;

    open_dev();
    pair(AXON_DEV_QPT_RC, 0);
    Buf local  = dev_.reg(4096, AXON_DEV_ACCESS_LOCAL_WRITE);
    Buf remote = dev_.reg(4096, kRemoteAll);
    axon_test_fill(local.ptr, 2048, 21);
    ASSERT_EQ(0, post_rdma(a_.qp, 1, AXON_DEV_WR_RDMA_WRITE, local.ptr, 2048, local.lkey(),
                           remote.addr(), remote.rkey(), 0));
    ASSERT_EQ(0, post_rdma(a_.qp, 2, AXON_DEV_WR_RDMA_READ, local.ptr + 2048, 2048,
                           local.lkey(), remote.addr(), remote.rkey(), AXON_DEV_SEND_SIGNALED));
    ASSERT_TRUE(poll_one(a_.scq, &wc));
    EXPECT_EQ(2u, wc.wr_id);
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status);
    EXPECT_EQ(-1, axon_test_check(local.ptr + 2048, 2048, 21));
    EXPECT_TRUE(no_wc(a_.scq, 0.02));
}

/* INLINE up to the QP's max_inline_data: source not registered (lkey 0),
 * overwritten right after post, the data still arrives intact. */
TEST_F(SoftibSendFlags, InlineSendUpToMaxInlineBufferReusable)
{
    axon_dev_qp_attr_t      qa;
    axon_dev_qp_init_attr_t init;
    axon_dev_wc_t           wc;

    open_dev();
    ASSERT_GT(dev_.attr.max_inline_data, 0u);
    pair(AXON_DEV_QPT_RC, 1, dev_.attr.max_inline_data);
    ASSERT_EQ(0, axon_dev_query_qp(a_.qp, &qa, AXON_DEV_QP_CAP, &init));
    const uint32_t max = init.cap.max_inline_data;
    ASSERT_GE(max, dev_.attr.max_inline_data);

    std::vector<uint8_t> src(max);
    Buf rb = dev_.reg(max, AXON_DEV_ACCESS_LOCAL_WRITE);
    ASSERT_EQ(0, post_recv(b_.qp, 1, rb.ptr, max, rb.lkey()));
    axon_test_fill(src.data(), max, 31);
    ASSERT_EQ(0, post_send_op(a_.qp, 2, AXON_DEV_WR_SEND, src.data(), max, 0,
                              AXON_DEV_SEND_INLINE));
    memset(src.data(), 0xee, max);   /* reusable at return */
    ASSERT_TRUE(poll_one(a_.scq, &wc));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    ASSERT_TRUE(poll_one(b_.rcq, &wc));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    EXPECT_EQ(max, wc.byte_len);
    EXPECT_EQ(-1, axon_test_check(rb.ptr, max, 31));
}

/* INLINE RDMA WRITE, likewise. */
TEST_F(SoftibSendFlags, InlineRdmaWriteBufferReusable)
{
    axon_dev_wc_t wc;

    open_dev();
    pair(AXON_DEV_QPT_RC, 1, 128);
    Buf     remote = dev_.reg(4096, kRemoteAll);
    uint8_t src[128];
    axon_test_fill(src, sizeof(src), 32);
    ASSERT_EQ(0, post_rdma(a_.qp, 3, AXON_DEV_WR_RDMA_WRITE, src, sizeof(src), 0xdeadbeef,
                           remote.addr(100), remote.rkey(), AXON_DEV_SEND_INLINE));
    memset(src, 0, sizeof(src));
    ASSERT_TRUE(poll_one(a_.scq, &wc));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    EXPECT_EQ(-1, axon_test_check(remote.ptr + 100, 128, 32));
    EXPECT_EQ(0, remote.ptr[99]);
    EXPECT_EQ(0, remote.ptr[228]);
}

/* INLINE one byte over the QP's max_inline_data: EINVAL at post, bad_wr set. */
TEST_F(SoftibSendFlags, InlineOverMaxInlineRefused)
{
    axon_dev_qp_attr_t      qa;
    axon_dev_qp_init_attr_t init;
    axon_dev_send_wr_t      wr;
    axon_dev_sge_t          sge;
    axon_dev_send_wr_t     *bad = nullptr;

    open_dev();
    pair(AXON_DEV_QPT_RC, 1, 64);
    ASSERT_EQ(0, axon_dev_query_qp(a_.qp, &qa, AXON_DEV_QP_CAP, &init));
    const uint32_t max = init.cap.max_inline_data;
    ASSERT_GE(max, 64u);
    std::vector<uint8_t> src(max + 1);
    make_wr(&wr, &sge, 1, AXON_DEV_WR_SEND, src.data(), max + 1, 0, AXON_DEV_SEND_INLINE);
    EXPECT_EQ(EINVAL, axon_dev_post_send(a_.qp, &wr, &bad));
    EXPECT_EQ(&wr, bad);
    EXPECT_TRUE(no_wc(a_.scq, 0.02));
    EXPECT_EQ(AXON_DEV_QPS_RTS, query_state(a_.qp));
}

/* A QP asking for less inline than its SGEs' room (16 bytes each, 4 here)
 * gets that room, written back, as rxe's and a NIC's WQE give it: a 64-byte
 * INLINE send from a QP made with max_inline_data 0 goes (librdmacm's
 * rdma_xclient posts one), 65 bytes are refused. */
TEST_F(SoftibSendFlags, InlineRoomOfTheSgesGrantedWhenLessWasAsked)
{
    axon_dev_qp_attr_t      qa;
    axon_dev_qp_init_attr_t init;
    axon_dev_send_wr_t      wr;
    axon_dev_sge_t          sge;
    axon_dev_send_wr_t     *bad = nullptr;
    axon_dev_wc_t           wc;
    uint8_t                 src[65];

    open_dev();
    pair(AXON_DEV_QPT_RC, 1, 0);
    ASSERT_EQ(0, axon_dev_query_qp(a_.qp, &qa, AXON_DEV_QP_CAP, &init));
    ASSERT_EQ(64u, init.cap.max_inline_data);
    Buf rb = dev_.reg(64, AXON_DEV_ACCESS_LOCAL_WRITE);
    ASSERT_EQ(0, post_recv(b_.qp, 1, rb.ptr, 64, rb.lkey()));
    axon_test_fill(src, sizeof(src), 34);
    make_wr(&wr, &sge, 1, AXON_DEV_WR_SEND, src, 65, 0, AXON_DEV_SEND_INLINE);
    EXPECT_EQ(EINVAL, axon_dev_post_send(a_.qp, &wr, &bad));
    ASSERT_EQ(0, post_send_op(a_.qp, 2, AXON_DEV_WR_SEND, src, 64, 0, AXON_DEV_SEND_INLINE));
    ASSERT_TRUE(poll_one(b_.rcq, &wc));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    EXPECT_EQ(64u, wc.byte_len);
    EXPECT_EQ(-1, axon_test_check(rb.ptr, 64, 34));
}

/* Several SGEs gather into one inline message. */
TEST_F(SoftibSendFlags, InlineGathersSeveralSges)
{
    axon_dev_send_wr_t  wr;
    axon_dev_sge_t      sge[3];
    axon_dev_send_wr_t *bad = nullptr;
    axon_dev_wc_t       wc;
    uint8_t             src[96];

    open_dev();
    pair(AXON_DEV_QPT_RC, 1, 128);
    Buf rb = dev_.reg(128, AXON_DEV_ACCESS_LOCAL_WRITE);
    axon_test_fill(src, sizeof(src), 33);
    ASSERT_EQ(0, post_recv(b_.qp, 1, rb.ptr, 128, rb.lkey()));
    make_wr(&wr, &sge[0], 5, AXON_DEV_WR_SEND, src, 32, 0, AXON_DEV_SEND_INLINE);
    sge[1] = {(uintptr_t)(src + 32), 32, 0};
    sge[2] = {(uintptr_t)(src + 64), 32, 0};
    wr.num_sge = 3;
    ASSERT_EQ(0, axon_dev_post_send(a_.qp, &wr, &bad));
    memset(src, 0, sizeof(src));
    ASSERT_TRUE(poll_one(b_.rcq, &wc));
    EXPECT_EQ(96u, wc.byte_len);
    EXPECT_EQ(-1, axon_test_check(rb.ptr, 96, 33));
}

/*
 * FENCE: a WRITE fenced behind a READ sends what the READ brought, because
 * it waits until the READ completed.
 */
TEST_F(SoftibSendFlags, FencedWriteWaitsForPriorRead)
{
    axon_dev_wc_t wc[2];
    const uint32_t len = 8192;

    open_dev();
    pair(AXON_DEV_QPT_RC, 1);
    Buf local  = dev_.reg(len, AXON_DEV_ACCESS_LOCAL_WRITE);
    Buf remote = dev_.reg(2 * len, kRemoteAll);
    axon_test_fill(remote.ptr, len, 41);
    ASSERT_EQ(0, post_rdma(a_.qp, 1, AXON_DEV_WR_RDMA_READ, local.ptr, len, local.lkey(),
                           remote.addr(), remote.rkey()));
    ASSERT_EQ(0, post_rdma(a_.qp, 2, AXON_DEV_WR_RDMA_WRITE, local.ptr, len, local.lkey(),
                           remote.addr(len), remote.rkey(),
                           AXON_DEV_SEND_SIGNALED | AXON_DEV_SEND_FENCE));
    ASSERT_EQ(2, poll_n(a_.scq, 2, wc));
    EXPECT_EQ(1u, wc[0].wr_id);
    EXPECT_EQ(2u, wc[1].wr_id);
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc[0].status);
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc[1].status);
    EXPECT_EQ(-1, axon_test_check(remote.ptr + len, len, 41)) << "the write did not wait";
}

/* FENCE also orders an atomic's result before a fenced send of it. */
TEST_F(SoftibSendFlags, FencedSendWaitsForPriorAtomic)
{
    axon_dev_wc_t wc[2];

    open_dev();
    pair(AXON_DEV_QPT_RC, 1);
    Buf local  = dev_.reg(64, AXON_DEV_ACCESS_LOCAL_WRITE);
    Buf remote = dev_.reg(64, kRemoteAll);
    Buf rb     = dev_.reg(64, AXON_DEV_ACCESS_LOCAL_WRITE);
    *(uint64_t *)remote.ptr = 4242;
    ASSERT_EQ(0, post_recv(b_.qp, 9, rb.ptr, 64, rb.lkey()));
    ASSERT_EQ(0, post_atomic(a_.qp, 1, AXON_DEV_WR_ATOMIC_FETCH_AND_ADD, local.ptr,
                             local.lkey(), remote.addr(), remote.rkey(), 1));
    ASSERT_EQ(0, post_send_op(a_.qp, 2, AXON_DEV_WR_SEND, local.ptr, 8, local.lkey(),
                              AXON_DEV_SEND_SIGNALED | AXON_DEV_SEND_FENCE));
    ASSERT_EQ(2, poll_n(a_.scq, 2, wc));
    ASSERT_TRUE(poll_one(b_.rcq, wc));
    EXPECT_EQ(4242u, *(uint64_t *)rb.ptr);
    EXPECT_EQ(4243u, *(uint64_t *)remote.ptr);
}

/* ---------------------------------------------------------------- channels */

class SoftibChannel : public SoftibOpcode {
protected:
    axon_dev_comp_channel_t *ch_ = nullptr;

    /* RC pair whose b_ receive CQ reports to a (non-blocking) channel. */
    void channel_pair()
    {
        ch_ = dev_.channel();
        ASSERT_NE(nullptr, ch_);
        set_nonblock(ch_->fd);
        axon_dev_cq_t *rcq = dev_.cq(64, ch_);
        ASSERT_NE(nullptr, rcq);
        ASSERT_EQ(0, dev_.qp(&a_, AXON_DEV_QPT_RC));
        ASSERT_EQ(0, dev_.qp(&b_, AXON_DEV_QPT_RC, 1, nullptr, 0, 64, nullptr, rcq));
        ASSERT_EQ(0, dev_.connect(a_, b_));
    }

    void send(uint64_t id, unsigned flags, void *buf, uint32_t lkey)
    {
        axon_dev_wc_t wc;
        ASSERT_EQ(0, post_send_op(a_.qp, id, AXON_DEV_WR_SEND, buf, 8, lkey,
                                  AXON_DEV_SEND_SIGNALED | flags));
        ASSERT_TRUE(poll_one(a_.scq, &wc));
        ASSERT_EQ(AXON_DEV_WC_SUCCESS, wc.status);
    }

    Buf sb_, rb_;

    /* The channel pair with n 64-byte receives posted on b_ and its receive CQ armed
     * (solicited_only as given); sb_ is a registered buffer to send from. */
    void armed_receives(int n, int solicited_only)
    {
        open_dev();
        channel_pair();
        if (HasFatalFailure()) return;
        sb_ = dev_.reg(64, 0);
        rb_ = dev_.reg(64 * n, AXON_DEV_ACCESS_LOCAL_WRITE);
        for (int i = 0; i < n; ++i) {
            ASSERT_EQ(0, post_recv(b_.qp, i + 1, rb_.ptr + 64 * i, 64, rb_.lkey()));
        }
        ASSERT_EQ(0, axon_dev_req_notify_cq(b_.rcq, solicited_only));
    }

    /* get_cq_event on the channel: returns b_'s receive CQ, then ack it. */
    void take_event()
    {
        axon_dev_cq_t *cq  = nullptr;
        void          *ctx = nullptr;
        ASSERT_EQ(0, axon_dev_get_cq_event(ch_, &cq, &ctx));
        EXPECT_EQ(b_.rcq, cq);
        axon_dev_ack_cq_events(cq, 1);
    }
};

/*
 * An event of a CQ destroyed before the event was read goes with it: the
 * channel then has nothing to give (EAGAIN), never the freed CQ (as a
 * kernel drops a destroyed CQ's events).
 */
TEST_F(SoftibChannel, UnreadEventGoesWithItsDestroyedCq)
{
    axon_dev_wc_t wc;

    armed_receives(1, 0);
    if (HasFatalFailure()) return;
    send(10, 0, sb_.ptr, sb_.lkey());
    ASSERT_TRUE(fd_readable(ch_->fd, kWcTimeout)) << "no event";
    ASSERT_TRUE(poll_one(b_.rcq, &wc));

    /* b_'s receive CQ goes, its event unread: the channel has nothing to give */
    dev_.destroy_qp(&b_);
    dev_.destroy_cq(b_.rcq);
    b_.rcq = nullptr;
    axon_dev_cq_t *cq  = nullptr;
    void          *ctx = nullptr;
    EXPECT_EQ(EAGAIN, axon_dev_get_cq_event(ch_, &cq, &ctx)) << "the destroyed CQ's event";
    EXPECT_FALSE(fd_readable(ch_->fd, 0)) << "the event is still in the channel";
}

/* req_notify(solicited_only): an unsolicited receive does not wake the fd, a solicited one does. */
TEST_F(SoftibChannel, SolicitedOnlyWakesOnSolicited)
{
    axon_dev_wc_t wc;

    armed_receives(2, 1);
    if (HasFatalFailure()) return;
    send(10, 0, sb_.ptr, sb_.lkey());
    ASSERT_TRUE(poll_one(b_.rcq, &wc)) << "the unsolicited message arrives";
    EXPECT_FALSE(fd_readable(ch_->fd, 0.1)) << "woken by an unsolicited completion";
    axon_dev_cq_t *cq  = nullptr;
    void          *ctx = nullptr;
    EXPECT_EQ(EAGAIN, axon_dev_get_cq_event(ch_, &cq, &ctx));

    send(11, AXON_DEV_SEND_SOLICITED, sb_.ptr, sb_.lkey());
    EXPECT_TRUE(fd_readable(ch_->fd, kWcTimeout)) << "not woken by a solicited completion";
    take_event();
    ASSERT_TRUE(poll_one(b_.rcq, &wc));
    EXPECT_EQ(2u, wc.wr_id);
}

/* req_notify(0): any completion wakes the fd. */
TEST_F(SoftibChannel, AnyCompletionWakesWhenNotSolicitedOnly)
{
    axon_dev_wc_t wc;

    armed_receives(1, 0);
    if (HasFatalFailure()) return;
    send(10, 0, sb_.ptr, sb_.lkey());
    EXPECT_TRUE(fd_readable(ch_->fd, kWcTimeout));
    take_event();
    ASSERT_TRUE(poll_one(b_.rcq, &wc));
}

/* Without req_notify no event is generated; notification is one-shot. */
TEST_F(SoftibChannel, NotifyIsOneShot)
{
    axon_dev_wc_t wc;

    open_dev();
    channel_pair();
    if (HasFatalFailure()) return;
    Buf sb = dev_.reg(64, 0);
    Buf rb = dev_.reg(3 * 64, AXON_DEV_ACCESS_LOCAL_WRITE);
    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(0, post_recv(b_.qp, i, rb.ptr + 64 * i, 64, rb.lkey()));
    }
    send(1, 0, sb.ptr, sb.lkey());
    ASSERT_TRUE(poll_one(b_.rcq, &wc));
    EXPECT_FALSE(fd_readable(ch_->fd, 0.05)) << "event without req_notify";

    ASSERT_EQ(0, axon_dev_req_notify_cq(b_.rcq, 0));
    send(2, 0, sb.ptr, sb.lkey());
    ASSERT_TRUE(fd_readable(ch_->fd, kWcTimeout));
    take_event();
    ASSERT_TRUE(poll_one(b_.rcq, &wc));
    send(3, 0, sb.ptr, sb.lkey());
    ASSERT_TRUE(poll_one(b_.rcq, &wc));
    EXPECT_FALSE(fd_readable(ch_->fd, 0.05)) << "second event without re-arming";
}

/* The channel fd works with epoll. */
TEST_F(SoftibChannel, ChannelFdWorksWithEpoll)
{
    struct epoll_event ev, out;
    axon_dev_wc_t      wc;

    armed_receives(1, 0);
    if (HasFatalFailure()) return;
    int ep = epoll_create1(0);
    ASSERT_GE(ep, 0);
    ev.events   = EPOLLIN;
    ev.data.u64 = 7;
    ASSERT_EQ(0, epoll_ctl(ep, EPOLL_CTL_ADD, ch_->fd, &ev));
    EXPECT_EQ(0, epoll_wait(ep, &out, 1, 0)) << "readable before any completion";
    send(10, 0, sb_.ptr, sb_.lkey());
    ASSERT_EQ(1, epoll_wait(ep, &out, 1, (int)(kWcTimeout * 1000)));
    EXPECT_EQ(7u, out.data.u64);
    take_event();
    ASSERT_TRUE(poll_one(b_.rcq, &wc));
    EXPECT_EQ(0, epoll_wait(ep, &out, 1, 20)) << "still readable after get_cq_event";
    close(ep);
}

/* A CQ in use by a channel keeps it; destroy_comp_channel is EBUSY until the CQ is gone. */
TEST_F(SoftibChannel, DestroyChannelBusyWhileCqUsesIt)
{
    axon_dev_comp_channel_t *ch = nullptr;
    axon_dev_cq_t           *cq = nullptr;

    open_dev();
    ASSERT_EQ(0, axon_dev_create_comp_channel(dev_.ctx, &ch));
    ASSERT_EQ(0, axon_dev_create_cq(dev_.ctx, 16, nullptr, ch, 0, &cq));
    EXPECT_EQ(EBUSY, axon_dev_destroy_comp_channel(ch));
    EXPECT_EQ(0, axon_dev_destroy_cq(cq));
    EXPECT_EQ(0, axon_dev_destroy_comp_channel(ch));
}


/* RDMA WRITE with immediate and SOLICITED wakes a solicited-only notification too. */
TEST_F(SoftibChannel, SolicitedWriteWithImmWakes)
{
    axon_dev_wc_t wc;

    open_dev();
    channel_pair();
    if (HasFatalFailure()) return;
    Buf local  = dev_.reg(64, AXON_DEV_ACCESS_LOCAL_WRITE);
    Buf remote = dev_.reg(64, AXON_DEV_ACCESS_LOCAL_WRITE | AXON_DEV_ACCESS_REMOTE_WRITE);
    Buf rb     = dev_.reg(64, AXON_DEV_ACCESS_LOCAL_WRITE);
    ASSERT_EQ(0, post_recv(b_.qp, 1, rb.ptr, 64, rb.lkey()));
    ASSERT_EQ(0, axon_dev_req_notify_cq(b_.rcq, 1));
    ASSERT_EQ(0, post_rdma(a_.qp, 2, AXON_DEV_WR_RDMA_WRITE_WITH_IMM, local.ptr, 16,
                           local.lkey(), remote.addr(), remote.rkey(),
                           AXON_DEV_SEND_SIGNALED | AXON_DEV_SEND_SOLICITED));
    EXPECT_TRUE(fd_readable(ch_->fd, kWcTimeout));
    take_event();
    ASSERT_TRUE(poll_one(b_.rcq, &wc));
    EXPECT_EQ(AXON_DEV_WC_RECV_RDMA_WITH_IMM, wc.opcode);
}

}  // namespace
