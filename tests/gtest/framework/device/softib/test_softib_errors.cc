/*
 * Each work-completion error status produced by the situation that causes
 * it (the lead's table in the issue: local and remote protection, lengths,
 * remote access, retries, RNR), the QP moving to ERR with every later WR
 * flushed, and the async events: QP_ACCESS_ERR / QP_REQ_ERR at the
 * responder, CQ_ERR on overrun (and QP_FATAL on the CQ's QPs),
 * SRQ_LIMIT_REACHED, QP_LAST_WQE_REACHED and COMM_EST. All on one device,
 * QPs talking to each other through the wire.
 */
#include <atomic>
#include <thread>

#include "softib_env.h"

namespace {

const int kLocalWrite = AXON_DEV_ACCESS_LOCAL_WRITE;
const int kRemoteAll  = AXON_DEV_ACCESS_LOCAL_WRITE | AXON_DEV_ACCESS_REMOTE_WRITE |
                        AXON_DEV_ACCESS_REMOTE_READ | AXON_DEV_ACCESS_REMOTE_ATOMIC;
const unsigned kQpAll = AXON_DEV_ACCESS_REMOTE_WRITE | AXON_DEV_ACCESS_REMOTE_READ |
                        AXON_DEV_ACCESS_REMOTE_ATOMIC;

/* Bring-up knobs of one side. */
struct Side {
    unsigned access        = kQpAll;
    uint8_t  timeout       = kTimeout;
    uint8_t  retry_cnt     = kRetryCnt;
    uint8_t  rnr_retry     = kRnrRetry;
    uint8_t  min_rnr_timer = kMinRnrTimer;
    bool     rts           = true;    /* false: stop in RTR */
};

class SoftibErr : public SoftibTest {
protected:
    Qp a_, b_;   /* a_ requests, b_ responds */

    int up(const Qp &q, uint32_t dest, uint32_t rq_psn, uint32_t sq_psn, const Side &s)
    {
        int ret = dev_.to_init(q, s.access);
        if (ret == 0) ret = dev_.to_rtr(q, dest, dev_.gid, rq_psn, s.min_rnr_timer);
        if ((ret == 0) && s.rts) {
            ret = dev_.to_rts(q, sq_psn, s.timeout, s.retry_cnt, s.rnr_retry);
        }
        return ret;
    }

    void rc_pair(const Side &sa = Side(), const Side &sb = Side(), int sq_sig_all = 1,
                 axon_dev_srq_t *srq_b = nullptr)
    {
        ASSERT_EQ(0, dev_.qp(&a_, AXON_DEV_QPT_RC, sq_sig_all));
        ASSERT_EQ(0, dev_.qp(&b_, AXON_DEV_QPT_RC, 1, srq_b));
        ASSERT_EQ(0, up(a_, b_.qpn(), kPsnB, kPsnA, sa));
        ASSERT_EQ(0, up(b_, a_.qpn(), kPsnA, kPsnB, sb));
    }

    /* One completion on cq with status; the QP it belongs to ends in ERR on error. */
    void expect_wc(axon_dev_cq_t *cq, uint64_t wr_id, axon_dev_wc_status_t status,
                   const Qp *q, const char *what)
    {
        axon_dev_wc_t wc;
        ASSERT_TRUE(poll_one(cq, &wc)) << what << ": no completion";
        EXPECT_EQ(wr_id, wc.wr_id) << what;
        EXPECT_EQ(status, wc.status) << what << ": got " << wc_status_name(wc.status)
                                     << " expected " << wc_status_name(status);
        if ((status != AXON_DEV_WC_SUCCESS) && q) {
            EXPECT_EQ(AXON_DEV_QPS_ERR, query_state(q->qp)) << what << ": QP not in ERR";
            EXPECT_EQ(AXON_DEV_QPS_ERR, q->qp->state) << what << ": qp->state";
        }
    }

    void expect_async(axon_dev_event_type_t type, const void *element, const char *what)
    {
        axon_dev_async_event_t ev;
        ASSERT_TRUE(wait_async(dev_.ctx, type, &ev)) << what << ": no "
                                                     << axon_dev_event_type_str(type);
        EXPECT_EQ(element, (const void *)ev.element.qp) << what;
    }
};

/* ---------------------------------------------------------------- local protection */

class SoftibWcStatus : public SoftibErr {};

TEST_F(SoftibWcStatus, LocProtErrSendWithBadLkey)
{
    open_dev();
    rc_pair();
    Buf sb = dev_.reg(64, kLocalWrite);
    ASSERT_EQ(0, post_send_op(a_.qp, 1, AXON_DEV_WR_SEND, sb.ptr, 64, sb.lkey() ^ 0x5a5a00));
    expect_wc(a_.scq, 1, AXON_DEV_WC_LOC_PROT_ERR, &a_, "bad lkey");
}

TEST_F(SoftibWcStatus, LocProtErrSgeOutsideMr)
{
    open_dev();
    rc_pair();
    Buf sb = dev_.reg(4096, kLocalWrite);
    /* last byte one past the region */
    ASSERT_EQ(0, post_send_op(a_.qp, 1, AXON_DEV_WR_SEND, sb.ptr + 4000, 97, sb.lkey()));
    expect_wc(a_.scq, 1, AXON_DEV_WC_LOC_PROT_ERR, &a_, "SGE past the MR");
}

TEST_F(SoftibWcStatus, LocProtErrSgeBeforeMr)
{
    open_dev();
    rc_pair();
    Buf sb = dev_.reg(8192, -1);
    axon_dev_mr_t *mr = nullptr;
    ASSERT_EQ(0, axon_dev_reg_mr(dev_.pd, sb.ptr + 4096, 4096, kLocalWrite, &mr));
    ASSERT_EQ(0, post_send_op(a_.qp, 1, AXON_DEV_WR_SEND, sb.ptr + 4090, 16, mr->lkey));
    expect_wc(a_.scq, 1, AXON_DEV_WC_LOC_PROT_ERR, &a_, "SGE before the MR");
    EXPECT_EQ(0, axon_dev_dereg_mr(mr));
}

TEST_F(SoftibWcStatus, LocProtErrMrOfAnotherPd)
{
    axon_dev_pd_t *pd2 = nullptr;

    open_dev();
    rc_pair();
    ASSERT_EQ(0, axon_dev_alloc_pd(dev_.ctx, &pd2));
    Buf sb = dev_.reg(64, -1);
    axon_dev_mr_t *mr = nullptr;
    ASSERT_EQ(0, axon_dev_reg_mr(pd2, sb.ptr, 64, kLocalWrite, &mr));
    ASSERT_EQ(0, post_send_op(a_.qp, 1, AXON_DEV_WR_SEND, sb.ptr, 64, mr->lkey));
    expect_wc(a_.scq, 1, AXON_DEV_WC_LOC_PROT_ERR, &a_, "MR of another PD");
    EXPECT_EQ(EBUSY, axon_dev_dealloc_pd(pd2)) << "PD with an MR";
    EXPECT_EQ(0, axon_dev_dereg_mr(mr));
    EXPECT_EQ(0, axon_dev_dealloc_pd(pd2));
}

TEST_F(SoftibWcStatus, LocProtErrAfterDeregMr)
{
    open_dev();
    rc_pair();
    Buf sb = dev_.reg(64, kLocalWrite);
    uint32_t lkey = sb.lkey();
    dev_.dereg(sb);
    ASSERT_EQ(0, post_send_op(a_.qp, 1, AXON_DEV_WR_SEND, sb.ptr, 64, lkey));
    expect_wc(a_.scq, 1, AXON_DEV_WC_LOC_PROT_ERR, &a_, "deregistered MR");
}

TEST_F(SoftibWcStatus, LocProtErrReadIntoMrWithoutLocalWrite)
{
    open_dev();
    rc_pair();
    Buf local  = dev_.reg(256, 0);
    Buf remote = dev_.reg(256, kRemoteAll);
    axon_test_fill(remote.ptr, 256, 1);
    ASSERT_EQ(0, post_rdma(a_.qp, 1, AXON_DEV_WR_RDMA_READ, local.ptr, 256, local.lkey(),
                           remote.addr(), remote.rkey()));
    expect_wc(a_.scq, 1, AXON_DEV_WC_LOC_PROT_ERR, &a_, "READ into read-only MR");
    for (int i = 0; i < 256; ++i) {
        ASSERT_EQ(0, local.ptr[i]) << "READ wrote into an MR without LOCAL_WRITE at " << i;
    }
}

TEST_F(SoftibWcStatus, LocProtErrAtomicResultIntoMrWithoutLocalWrite)
{
    open_dev();
    rc_pair();
    Buf local  = dev_.reg(64, 0);
    Buf remote = dev_.reg(64, kRemoteAll);
    *(uint64_t *)remote.ptr = 10;
    ASSERT_EQ(0, post_atomic(a_.qp, 1, AXON_DEV_WR_ATOMIC_FETCH_AND_ADD, local.ptr,
                             local.lkey(), remote.addr(), remote.rkey(), 1));
    expect_wc(a_.scq, 1, AXON_DEV_WC_LOC_PROT_ERR, &a_, "atomic result into read-only MR");
    EXPECT_EQ(0u, *(uint64_t *)local.ptr);
}

/* ---------------------------------------------------------------- lengths, receive side */

TEST_F(SoftibWcStatus, SendLargerThanReceiveLocLenErrAndRemInvReqErr)
{
    open_dev();
    rc_pair();
    Buf sb = dev_.reg(256, 0);
    Buf rb = dev_.reg(256, kLocalWrite);
    ASSERT_EQ(0, post_recv(b_.qp, 7, rb.ptr, 100, rb.lkey()));
    ASSERT_EQ(0, post_send_op(a_.qp, 1, AXON_DEV_WR_SEND, sb.ptr, 101, sb.lkey()));
    expect_wc(b_.rcq, 7, AXON_DEV_WC_LOC_LEN_ERR, &b_, "receiver");
    expect_wc(a_.scq, 1, AXON_DEV_WC_REM_INV_REQ_ERR, &a_, "requester");
    EXPECT_EQ(0, rb.ptr[100]) << "wrote past the receive SGE";
}

TEST_F(SoftibWcStatus, ReceiveSgeBadLkeyLocProtErrAndRemOpErr)
{
    open_dev();
    rc_pair();
    Buf sb = dev_.reg(64, 0);
    Buf rb = dev_.reg(64, kLocalWrite);
    ASSERT_EQ(0, post_recv(b_.qp, 7, rb.ptr, 64, rb.lkey() + 0x100));
    ASSERT_EQ(0, post_send_op(a_.qp, 1, AXON_DEV_WR_SEND, sb.ptr, 64, sb.lkey()));
    expect_wc(b_.rcq, 7, AXON_DEV_WC_LOC_PROT_ERR, &b_, "receiver");
    expect_wc(a_.scq, 1, AXON_DEV_WC_REM_OP_ERR, &a_, "requester");
}

TEST_F(SoftibWcStatus, ReceiveIntoMrWithoutLocalWriteLocProtErrAndRemOpErr)
{
    open_dev();
    rc_pair();
    Buf sb = dev_.reg(64, 0);
    Buf rb = dev_.reg(64, 0);
    axon_test_fill(sb.ptr, 64, 2);
    ASSERT_EQ(0, post_recv(b_.qp, 7, rb.ptr, 64, rb.lkey()));
    ASSERT_EQ(0, post_send_op(a_.qp, 1, AXON_DEV_WR_SEND, sb.ptr, 64, sb.lkey()));
    expect_wc(b_.rcq, 7, AXON_DEV_WC_LOC_PROT_ERR, &b_, "receiver");
    expect_wc(a_.scq, 1, AXON_DEV_WC_REM_OP_ERR, &a_, "requester");
    for (int i = 0; i < 64; ++i) {
        ASSERT_EQ(0, rb.ptr[i]) << "received into an MR without LOCAL_WRITE";
    }
}

/* ---------------------------------------------------------------- remote access */

class SoftibRemoteAccess : public SoftibErr {
protected:
    /* op against remote (rkey, offset, len) must fail REM_ACCESS_ERR and break b_. */
    void expect_rem_access(axon_dev_wr_opcode_t op, int remote_access, uint32_t rkey_xor,
                           size_t offset, uint32_t len, const char *what)
    {
        open_dev();
        rc_pair();
        Buf local  = dev_.reg(8192, kLocalWrite);
        Buf remote = dev_.reg(4096, remote_access);
        axon_test_fill(remote.ptr, 4096, 3);
        if ((op == AXON_DEV_WR_ATOMIC_CMP_AND_SWP) || (op == AXON_DEV_WR_ATOMIC_FETCH_AND_ADD)) {
            ASSERT_EQ(0, post_atomic(a_.qp, 1, op, local.ptr, local.lkey(),
                                     remote.addr(offset), remote.rkey() ^ rkey_xor, 1, 2));
        } else {
            ASSERT_EQ(0, post_rdma(a_.qp, 1, op, local.ptr, len, local.lkey(),
                                   remote.addr(offset), remote.rkey() ^ rkey_xor));
        }
        expect_wc(a_.scq, 1, AXON_DEV_WC_REM_ACCESS_ERR, &a_, what);
        expect_async(AXON_DEV_EVENT_QP_ACCESS_ERR, b_.qp, what);
        EXPECT_EQ(AXON_DEV_QPS_ERR, query_state(b_.qp)) << what << ": responder not in ERR";
        EXPECT_EQ(-1, axon_test_check(remote.ptr, 4096, 3)) << what << ": target memory changed";
    }
};

TEST_F(SoftibRemoteAccess, WriteBadRkey)
{
    expect_rem_access(AXON_DEV_WR_RDMA_WRITE, kRemoteAll, 0x10000, 0, 64, "write bad rkey");
}

TEST_F(SoftibRemoteAccess, WritePastEndOfMr)
{
    expect_rem_access(AXON_DEV_WR_RDMA_WRITE, kRemoteAll, 0, 4096 - 32, 64, "write past end");
}

TEST_F(SoftibRemoteAccess, WriteToMrWithoutRemoteWrite)
{
    expect_rem_access(AXON_DEV_WR_RDMA_WRITE, kLocalWrite | AXON_DEV_ACCESS_REMOTE_READ, 0, 0,
                      64, "write without REMOTE_WRITE");
}

TEST_F(SoftibRemoteAccess, ReadBadRkey)
{
    expect_rem_access(AXON_DEV_WR_RDMA_READ, kRemoteAll, 0x10000, 0, 64, "read bad rkey");
}

TEST_F(SoftibRemoteAccess, ReadPastEndOfMr)
{
    expect_rem_access(AXON_DEV_WR_RDMA_READ, kRemoteAll, 0, 2048, 4096, "read past end");
}

TEST_F(SoftibRemoteAccess, ReadFromMrWithoutRemoteRead)
{
    expect_rem_access(AXON_DEV_WR_RDMA_READ, kLocalWrite | AXON_DEV_ACCESS_REMOTE_WRITE, 0, 0,
                      64, "read without REMOTE_READ");
}

TEST_F(SoftibRemoteAccess, AtomicBadRkey)
{
    expect_rem_access(AXON_DEV_WR_ATOMIC_FETCH_AND_ADD, kRemoteAll, 0x10000, 0, 8,
                      "atomic bad rkey");
}

TEST_F(SoftibRemoteAccess, AtomicOnMrWithoutRemoteAtomic)
{
    expect_rem_access(AXON_DEV_WR_ATOMIC_CMP_AND_SWP,
                      kLocalWrite | AXON_DEV_ACCESS_REMOTE_WRITE | AXON_DEV_ACCESS_REMOTE_READ, 0,
                      0, 8, "atomic without REMOTE_ATOMIC");
}

TEST_F(SoftibRemoteAccess, AtomicPastEndOfMr)
{
    expect_rem_access(AXON_DEV_WR_ATOMIC_FETCH_AND_ADD, kRemoteAll, 0, 4096, 8,
                      "atomic past end");
}

/*
 * IB: the R_Key (and the address) of a zero-length RDMA READ or WRITE is not
 * checked, since no memory is touched; real NICs accept any key. Both QPs
 * stay usable: a normal write after them still lands.
 */
TEST_F(SoftibRemoteAccess, ZeroLengthReadAndWriteSkipRkeyCheck)
{
    open_dev();
    rc_pair();
    Buf local  = dev_.reg(64, kLocalWrite);
    Buf remote = dev_.reg(64, kRemoteAll);
    Buf rbuf   = dev_.reg(64, kLocalWrite);
    axon_test_fill(local.ptr, 64, 5);
    axon_test_fill(remote.ptr, 64, 6);
    const uint32_t bad_rkey = remote.rkey() ^ 0x10000;

    ASSERT_EQ(0, post_rdma(a_.qp, 1, AXON_DEV_WR_RDMA_WRITE, local.ptr, 0, local.lkey(), 0,
                           bad_rkey));
    expect_wc(a_.scq, 1, AXON_DEV_WC_SUCCESS, nullptr, "zero-length write, bad rkey");
    ASSERT_EQ(0, post_rdma(a_.qp, 2, AXON_DEV_WR_RDMA_READ, local.ptr, 0, local.lkey(),
                           0xdead0000, 0xffffffff));
    expect_wc(a_.scq, 2, AXON_DEV_WC_SUCCESS, nullptr, "zero-length read, bad rkey");

    /* with immediate: the receiver completes, 0 bytes, nothing written */
    ASSERT_EQ(0, post_recv(b_.qp, 9, rbuf.ptr, 64, rbuf.lkey()));
    ASSERT_EQ(0, post_rdma(a_.qp, 3, AXON_DEV_WR_RDMA_WRITE_WITH_IMM, local.ptr, 0,
                           local.lkey(), 0, bad_rkey));
    expect_wc(a_.scq, 3, AXON_DEV_WC_SUCCESS, nullptr, "zero-length write with imm");
    axon_dev_wc_t wc;
    ASSERT_TRUE(poll_one(b_.rcq, &wc)) << "no receive completion for the write with imm";
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    EXPECT_EQ(AXON_DEV_WC_RECV_RDMA_WITH_IMM, wc.opcode);
    EXPECT_EQ(0u, wc.byte_len);

    EXPECT_EQ(AXON_DEV_QPS_RTS, query_state(a_.qp));
    EXPECT_EQ(AXON_DEV_QPS_RTS, query_state(b_.qp));
    EXPECT_EQ(-1, axon_test_check(remote.ptr, 64, 6)) << "a zero-length op changed memory";

    ASSERT_EQ(0, post_rdma(a_.qp, 4, AXON_DEV_WR_RDMA_WRITE, local.ptr, 64, local.lkey(),
                           remote.addr(), remote.rkey()));
    expect_wc(a_.scq, 4, AXON_DEV_WC_SUCCESS, nullptr, "write after the zero-length ones");
    EXPECT_EQ(-1, axon_test_check(remote.ptr, 64, 5)) << "the normal write did not land";
    /* a non-zero length with the same bad key is still refused */
    ASSERT_EQ(0, post_rdma(a_.qp, 5, AXON_DEV_WR_RDMA_WRITE, local.ptr, 1, local.lkey(),
                           remote.addr(), bad_rkey));
    expect_wc(a_.scq, 5, AXON_DEV_WC_REM_ACCESS_ERR, &a_, "one byte, bad rkey");
}

/*
 * Seed §7.2.9: an RDMA WRITE with immediate the rkey does not allow completes
 * the receive it consumes with LOC_ACCESS_ERR (not WR_FLUSH_ERR); the
 * requester gets REM_ACCESS_ERR, the responder QP_ACCESS_ERR and ERR, and the
 * receives behind the consumed one are flushed.
 */
TEST_F(SoftibRemoteAccess, WriteWithImmBadRkeyLocAccessErrAtReceiver)
{
    open_dev();
    rc_pair();
    Buf local  = dev_.reg(64, kLocalWrite);
    Buf remote = dev_.reg(64, kRemoteAll);
    Buf rbuf   = dev_.reg(64, kLocalWrite);
    axon_test_fill(remote.ptr, 64, 6);
    ASSERT_EQ(0, post_recv(b_.qp, 7, rbuf.ptr, 64, rbuf.lkey()));
    ASSERT_EQ(0, post_recv(b_.qp, 8, rbuf.ptr, 64, rbuf.lkey()));
    ASSERT_EQ(0, post_rdma(a_.qp, 1, AXON_DEV_WR_RDMA_WRITE_WITH_IMM, local.ptr, 64,
                           local.lkey(), remote.addr(), remote.rkey() ^ 0x10000));
    expect_wc(b_.rcq, 7, AXON_DEV_WC_LOC_ACCESS_ERR, &b_, "the consumed receive");
    expect_wc(b_.rcq, 8, AXON_DEV_WC_WR_FLUSH_ERR, &b_, "the receive behind it");
    expect_wc(a_.scq, 1, AXON_DEV_WC_REM_ACCESS_ERR, &a_, "requester");
    expect_async(AXON_DEV_EVENT_QP_ACCESS_ERR, b_.qp, "write with imm, bad rkey");
    EXPECT_EQ(-1, axon_test_check(remote.ptr, 64, 6)) << "target memory changed";
}

/* The target QP's qp_access_flags lack the right: REM_INV_REQ_ERR, responder ERR + QP_REQ_ERR. */
class SoftibQpAccess : public SoftibErr {
protected:
    void expect_req_err(axon_dev_wr_opcode_t op, unsigned qp_access, const char *what)
    {
        Side sb;

        open_dev();
        sb.access = qp_access;
        rc_pair(Side(), sb);
        Buf local  = dev_.reg(64, kLocalWrite);
        Buf remote = dev_.reg(64, kRemoteAll);
        axon_test_fill(remote.ptr, 64, 4);
        if ((op == AXON_DEV_WR_ATOMIC_CMP_AND_SWP) || (op == AXON_DEV_WR_ATOMIC_FETCH_AND_ADD)) {
            ASSERT_EQ(0, post_atomic(a_.qp, 1, op, local.ptr, local.lkey(), remote.addr(),
                                     remote.rkey(), 1, 2));
        } else {
            ASSERT_EQ(0, post_rdma(a_.qp, 1, op, local.ptr, 32, local.lkey(), remote.addr(),
                                   remote.rkey()));
        }
        expect_wc(a_.scq, 1, AXON_DEV_WC_REM_INV_REQ_ERR, &a_, what);
        expect_async(AXON_DEV_EVENT_QP_REQ_ERR, b_.qp, what);
        EXPECT_EQ(AXON_DEV_QPS_ERR, query_state(b_.qp)) << what << ": responder not in ERR";
        EXPECT_EQ(-1, axon_test_check(remote.ptr, 64, 4)) << what << ": target memory changed";
    }
};

TEST_F(SoftibQpAccess, WriteToQpWithoutRemoteWrite)
{
    expect_req_err(AXON_DEV_WR_RDMA_WRITE,
                   AXON_DEV_ACCESS_REMOTE_READ | AXON_DEV_ACCESS_REMOTE_ATOMIC, "write");
}

TEST_F(SoftibQpAccess, ReadFromQpWithoutRemoteRead)
{
    expect_req_err(AXON_DEV_WR_RDMA_READ,
                   AXON_DEV_ACCESS_REMOTE_WRITE | AXON_DEV_ACCESS_REMOTE_ATOMIC, "read");
}

TEST_F(SoftibQpAccess, AtomicOnQpWithoutRemoteAtomic)
{
    expect_req_err(AXON_DEV_WR_ATOMIC_FETCH_AND_ADD,
                   AXON_DEV_ACCESS_REMOTE_WRITE | AXON_DEV_ACCESS_REMOTE_READ, "atomic");
}

/* ---------------------------------------------------------------- atomics' own rules */

/*
 * The requester sees IB's Invalid Request NAK (REM_INV_REQ_ERR); the
 * responder's event is the one seed §7.1.4 lists a misaligned atomic under,
 * QP_ACCESS_ERR (not QP_REQ_ERR, §7.1.3's opcode errors), and it goes to ERR.
 */
TEST_F(SoftibWcStatus, MisalignedAtomicRemInvReqErrAndQpAccessErr)
{
    open_dev();
    rc_pair();
    Buf local  = dev_.reg(64, kLocalWrite);
    Buf remote = dev_.reg(64, kRemoteAll);
    ASSERT_EQ(0, post_atomic(a_.qp, 1, AXON_DEV_WR_ATOMIC_FETCH_AND_ADD, local.ptr,
                             local.lkey(), remote.addr(4), remote.rkey(), 1));
    expect_wc(a_.scq, 1, AXON_DEV_WC_REM_INV_REQ_ERR, &a_, "misaligned atomic");
    axon_dev_async_event_t ev;
    std::vector<axon_dev_event_type_t> others;
    ASSERT_TRUE(wait_async(dev_.ctx, AXON_DEV_EVENT_QP_ACCESS_ERR, &ev, kWcTimeout, &others))
        << "no QP_ACCESS_ERR at the responder";
    EXPECT_EQ((void *)b_.qp, (void *)ev.element.qp);
    for (axon_dev_event_type_t t : others) {
        EXPECT_NE(AXON_DEV_EVENT_QP_REQ_ERR, t) << "QP_REQ_ERR for a misaligned atomic";
    }
    EXPECT_EQ(AXON_DEV_QPS_ERR, query_state(b_.qp)) << "responder not in ERR";
    for (int i = 0; i < 64; ++i) {
        ASSERT_EQ(0, remote.ptr[i]);
    }
}

TEST_F(SoftibWcStatus, AtomicLocalSgeNot8BytesRefusedAtPost)
{
    axon_dev_send_wr_t  wr;
    axon_dev_sge_t      sge;
    axon_dev_send_wr_t *bad = nullptr;

    open_dev();
    rc_pair();
    Buf local  = dev_.reg(64, kLocalWrite);
    Buf remote = dev_.reg(64, kRemoteAll);
    for (uint32_t len : {4u, 16u}) {
        make_wr(&wr, &sge, 1, AXON_DEV_WR_ATOMIC_CMP_AND_SWP, local.ptr, len, local.lkey());
        wr.wr.atomic.remote_addr = remote.addr();
        wr.wr.atomic.rkey        = remote.rkey();
        EXPECT_EQ(EINVAL, axon_dev_post_send(a_.qp, &wr, &bad)) << "SGE of " << len;
        EXPECT_EQ(&wr, bad);
    }
    EXPECT_TRUE(no_wc(a_.scq, 0.02));
    EXPECT_EQ(AXON_DEV_QPS_RTS, query_state(a_.qp));
}

/* ---------------------------------------------------------------- reads and atomics in flight */

/*
 * The responder holds a requester to the responder resources it granted at
 * RTR (max_dest_rd_atomic): one more read or atomic outstanding is seed
 * §7.1.4's "too many RDMA Read or Atomic requests" (QP_ACCESS_ERR, ERR; the
 * requester gets IB's Invalid Request NAK, REM_INV_REQ_ERR). The requester
 * keeps at most its max_rd_atomic in flight, so a pair whose numbers agree
 * never trips it.
 */
class SoftibRdAtomicLimit : public SoftibErr {
protected:
    /* a_ with max_rd_atomic req_depth towards b_ granting resp_resources */
    void limit_pair(uint8_t req_depth, uint8_t resp_resources)
    {
        axon_dev_qp_attr_t a;
        int mask;

        ASSERT_EQ(0, dev_.qp(&a_, AXON_DEV_QPT_RC, 1, nullptr, 0, 64));
        ASSERT_EQ(0, dev_.qp(&b_, AXON_DEV_QPT_RC, 1, nullptr, 0, 64));
        ASSERT_EQ(0, dev_.to_init(a_));
        ASSERT_EQ(0, dev_.to_init(b_));
        ASSERT_EQ(0, dev_.to_rtr(a_, b_.qpn(), dev_.gid, kPsnB));
        mask = SoftibDev::rtr_attrs(AXON_DEV_QPT_RC, a_.qpn(), dev_.gid, kPsnA, kMinRnrTimer,
                                    kPathMtu, &a);
        a.max_dest_rd_atomic = resp_resources;
        ASSERT_EQ(0, axon_dev_modify_qp(b_.qp, &a, mask));
        mask = SoftibDev::rts_attrs(AXON_DEV_QPT_RC, kPsnA, kTimeout, kRetryCnt, kRnrRetry, &a);
        a.max_rd_atomic = req_depth;
        ASSERT_EQ(0, axon_dev_modify_qp(a_.qp, &a, mask));
        ASSERT_EQ(0, dev_.to_rts(b_, kPsnB));
    }

    /* count reads of len each, posted as one list */
    void post_reads(int count, const Buf &local, const Buf &remote, uint32_t len)
    {
        std::vector<axon_dev_send_wr_t> wr(count);
        std::vector<axon_dev_sge_t>     sge(count);
        axon_dev_send_wr_t             *bad = nullptr;

        for (int i = 0; i < count; ++i) {
            make_wr(&wr[i], &sge[i], i, AXON_DEV_WR_RDMA_READ, local.ptr + (size_t)i * len, len,
                    local.lkey());
            wr[i].wr.rdma.remote_addr = remote.addr((size_t)i * len);
            wr[i].wr.rdma.rkey        = remote.rkey();
            wr[i].next                = (i + 1 < count) ? &wr[i + 1] : nullptr;
        }
        ASSERT_EQ(0, axon_dev_post_send(a_.qp, wr.data(), &bad));
    }

    /* One read over limit_pair(req_depth, resp_resources) completes with status */
    void one_read(uint8_t req_depth, uint8_t resp_resources, axon_dev_wc_status_t status,
                  const char *what)
    {
        open_dev();
        limit_pair(req_depth, resp_resources);
        Buf local  = dev_.reg(64, kLocalWrite);
        Buf remote = dev_.reg(64, kRemoteAll);
        ASSERT_EQ(0, post_rdma(a_.qp, 1, AXON_DEV_WR_RDMA_READ, local.ptr, 64, local.lkey(),
                               remote.addr(), remote.rkey()));
        expect_wc(a_.scq, 1, status, &a_, what);
    }
};

/* No responder resources granted: the first read is already one too many. */
TEST_F(SoftibRdAtomicLimit, ReadToResponderWithoutResourcesRemInvReqErrAndQpAccessErr)
{
    one_read(1, 0, AXON_DEV_WC_REM_INV_REQ_ERR, "read, no responder resources");
    ASSERT_FALSE(HasFatalFailure());
    expect_async(AXON_DEV_EVENT_QP_ACCESS_ERR, b_.qp, "read, no responder resources");
    EXPECT_EQ(AXON_DEV_QPS_ERR, query_state(b_.qp)) << "responder not in ERR";
}

/*
 * The requester may have 2 in flight, the responder granted 1. Each read is
 * answered in 100 packets, more than the responder sends per request it
 * takes in, so the second arrives while the first still has answers to send.
 */
TEST_F(SoftibRdAtomicLimit, ReadsBeyondMaxDestRdAtomicRemInvReqErrAndQpAccessErr)
{
    const int      n   = 2;
    const uint32_t len = 100 * 1024;
    axon_dev_wc_t  wc[n];

    open_dev();
    limit_pair(2, 1);
    Buf local  = dev_.reg((size_t)n * len, kLocalWrite);
    Buf remote = dev_.reg((size_t)n * len, kRemoteAll);
    post_reads(n, local, remote, len);
    ASSERT_EQ(n, poll_n(a_.scq, n, wc, 20));
    int first_err = -1;
    for (int i = 0; i < n; ++i) {
        if ((wc[i].status != AXON_DEV_WC_SUCCESS) && (first_err < 0)) {
            first_err = i;
        }
    }
    ASSERT_GE(first_err, 0) << "2 reads against 1 responder resource both succeeded";
    EXPECT_EQ(AXON_DEV_WC_REM_INV_REQ_ERR, wc[first_err].status)
        << wc_status_name(wc[first_err].status);
    expect_async(AXON_DEV_EVENT_QP_ACCESS_ERR, b_.qp, "too many reads");
    EXPECT_EQ(AXON_DEV_QPS_ERR, query_state(b_.qp)) << "responder not in ERR";
}

/*
 * The same long reads (a third would be sent while the responder still
 * answers the first two, were the requester not bound), and atomics, with
 * max_rd_atomic = max_dest_rd_atomic = 2: all complete.
 */
TEST_F(SoftibRdAtomicLimit, MatchingLimitsNeverTripTheResponder)
{
    const int      n   = 8;
    const uint32_t len = 100 * 1024;
    axon_dev_wc_t  wc[2 * n];
    std::vector<axon_dev_event_type_t> events;
    axon_dev_async_event_t ev;

    open_dev();
    limit_pair(2, 2);
    Buf local  = dev_.reg((size_t)n * len + n * 8, kLocalWrite);
    Buf remote = dev_.reg((size_t)n * len + 8, kRemoteAll);
    axon_test_fill(remote.ptr, (size_t)n * len, 9);
    post_reads(n, local, remote, len);
    uint64_t *res = (uint64_t *)(local.ptr + (size_t)n * len);
    for (int i = 0; i < n; ++i) {
        ASSERT_EQ(0, post_atomic(a_.qp, n + i, AXON_DEV_WR_ATOMIC_FETCH_AND_ADD, res + i,
                                 local.lkey(), remote.addr((size_t)n * len), remote.rkey(), 1));
    }
    ASSERT_EQ(2 * n, poll_n(a_.scq, 2 * n, wc, 20));
    for (int i = 0; i < 2 * n; ++i) {
        EXPECT_EQ((uint64_t)i, wc[i].wr_id);
        EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc[i].status) << wc_status_name(wc[i].status);
    }
    EXPECT_EQ(-1, axon_test_check(local.ptr, (size_t)n * len, 9));
    EXPECT_EQ((uint64_t)n, *(uint64_t *)(remote.ptr + (size_t)n * len));
    EXPECT_FALSE(wait_async(dev_.ctx, AXON_DEV_EVENT_QP_ACCESS_ERR, &ev, 0.05, &events));
    EXPECT_EQ(AXON_DEV_QPS_RTS, query_state(b_.qp));
}

/* Seed §7.2.3: a requester with no initiator depth (max_rd_atomic 0) cannot read: LOC_QP_OP_ERR. */
TEST_F(SoftibRdAtomicLimit, MaxRdAtomicZeroReadLocQpOpErr)
{
    one_read(0, 4, AXON_DEV_WC_LOC_QP_OP_ERR, "read with max_rd_atomic 0");
    ASSERT_FALSE(HasFatalFailure());
    EXPECT_EQ(AXON_DEV_QPS_RTS, query_state(b_.qp)) << "nothing reached the responder";
}

/* ---------------------------------------------------------------- retries */

class SoftibRetry : public SoftibErr {};

TEST_F(SoftibRetry, RetryExcErrWhenDestinationQpDestroyed)
{
    Side sa;

    open_dev();
    sa.timeout   = 8;   /* ~1 ms */
    sa.retry_cnt = 1;
    rc_pair(sa);
    dev_.destroy_qp(&b_);
    Buf sb = dev_.reg(64, 0);
    double start = axon_test_time();
    ASSERT_EQ(0, post_send_op(a_.qp, 1, AXON_DEV_WR_SEND, sb.ptr, 64, sb.lkey()));
    expect_wc(a_.scq, 1, AXON_DEV_WC_RETRY_EXC_ERR, &a_, "peer destroyed");
    EXPECT_LT(axon_test_time() - start, 2.0) << "retries took too long for timeout 8";
}

TEST_F(SoftibRetry, RetryExcErrWhenDestinationQpnDoesNotExist)
{
    Side sa;

    open_dev();
    sa.timeout   = 8;
    sa.retry_cnt = 1;
    ASSERT_EQ(0, dev_.qp(&a_, AXON_DEV_QPT_RC));
    /* our slot, an index nobody has */
    ASSERT_EQ(0, up(a_, (a_.qpn() & ~0xfffu) | 0xffe, 0, 0, sa));
    Buf sb = dev_.reg(64, kRemoteAll);
    ASSERT_EQ(0, post_rdma(a_.qp, 1, AXON_DEV_WR_RDMA_WRITE, sb.ptr, 64, sb.lkey(), sb.addr(),
                           sb.rkey()));
    expect_wc(a_.scq, 1, AXON_DEV_WC_RETRY_EXC_ERR, &a_, "no such QPN");
}

/* retry_cnt 0: the first timeout is final. */
TEST_F(SoftibRetry, RetryCntZeroFailsAfterFirstTimeout)
{
    Side sa;

    open_dev();
    sa.timeout   = 8;
    sa.retry_cnt = 0;
    rc_pair(sa);
    dev_.destroy_qp(&b_);
    Buf sb = dev_.reg(64, kLocalWrite);
    ASSERT_EQ(0, post_rdma(a_.qp, 1, AXON_DEV_WR_RDMA_READ, sb.ptr, 8, sb.lkey(), sb.addr(32),
                           sb.rkey()));
    expect_wc(a_.scq, 1, AXON_DEV_WC_RETRY_EXC_ERR, &a_, "retry_cnt 0");
}

class SoftibRnr : public SoftibErr {};

/* No receive and rnr_retry 0: RNR_RETRY_EXC_ERR at once. */
TEST_F(SoftibRnr, RnrRetryZeroFailsRnrRetryExcErr)
{
    Side sa, sb;

    open_dev();
    sa.rnr_retry     = 0;
    sb.min_rnr_timer = 1;
    rc_pair(sa, sb);
    Buf buf = dev_.reg(64, 0);
    ASSERT_EQ(0, post_send_op(a_.qp, 1, AXON_DEV_WR_SEND, buf.ptr, 64, buf.lkey()));
    expect_wc(a_.scq, 1, AXON_DEV_WC_RNR_RETRY_EXC_ERR, &a_, "rnr_retry 0");
    /* the responder is not in error: an RNR NAK is not its fault */
    EXPECT_EQ(AXON_DEV_QPS_RTS, query_state(b_.qp));
}

/* rnr_retry 3 with no receive: fails after the retries, not before ~3 RNR waits. */
TEST_F(SoftibRnr, RnrRetryCountedThenRnrRetryExcErr)
{
    Side sa, sb;

    open_dev();
    sa.rnr_retry     = 3;
    sb.min_rnr_timer = 14;   /* 1.28 ms */
    rc_pair(sa, sb);
    Buf    buf   = dev_.reg(64, 0);
    double start = axon_test_time();
    ASSERT_EQ(0, post_send_op(a_.qp, 1, AXON_DEV_WR_SEND, buf.ptr, 64, buf.lkey()));
    expect_wc(a_.scq, 1, AXON_DEV_WC_RNR_RETRY_EXC_ERR, &a_, "rnr_retry 3");
    EXPECT_GE(axon_test_time() - start, 3 * 0.00128 * 0.9) << "did not wait the RNR timer";
}

/* rnr_retry 7 retries forever: a receive posted 50 ms later gets the message. */
TEST_F(SoftibRnr, RnrRetrySevenWaitsForReceive)
{
    Side          sa, sb;
    axon_dev_wc_t wc;

    open_dev();
    sa.rnr_retry     = 7;
    sb.min_rnr_timer = 1;
    rc_pair(sa, sb);
    Buf sbuf = dev_.reg(64, 0);
    Buf rbuf = dev_.reg(64, kLocalWrite);
    axon_test_fill(sbuf.ptr, 64, 5);
    ASSERT_EQ(0, post_send_op(a_.qp, 1, AXON_DEV_WR_SEND, sbuf.ptr, 64, sbuf.lkey()));
    EXPECT_TRUE(no_wc(a_.scq, 0.05, &wc)) << "completed without a receive: "
                                          << wc_status_name(wc.status);
    ASSERT_EQ(0, post_recv(b_.qp, 9, rbuf.ptr, 64, rbuf.lkey()));
    expect_wc(b_.rcq, 9, AXON_DEV_WC_SUCCESS, nullptr, "receiver");
    expect_wc(a_.scq, 1, AXON_DEV_WC_SUCCESS, nullptr, "requester");
    EXPECT_EQ(-1, axon_test_check(rbuf.ptr, 64, 5));
}

/* RNR also applies to RDMA WRITE with immediate (it consumes a receive). */
TEST_F(SoftibRnr, WriteWithImmWithoutReceiveRnr)
{
    Side sa;

    open_dev();
    sa.rnr_retry = 0;
    rc_pair(sa);
    Buf local  = dev_.reg(64, kLocalWrite);
    Buf remote = dev_.reg(64, kRemoteAll);
    ASSERT_EQ(0, post_rdma(a_.qp, 1, AXON_DEV_WR_RDMA_WRITE_WITH_IMM, local.ptr, 64,
                           local.lkey(), remote.addr(), remote.rkey()));
    expect_wc(a_.scq, 1, AXON_DEV_WC_RNR_RETRY_EXC_ERR, &a_, "write with imm, no receive");
}

/* ---------------------------------------------------------------- flush */

class SoftibFlush : public SoftibErr {};

/* After an error, queued sends and posted receives come back WR_FLUSH_ERR, unsignaled too. */
TEST_F(SoftibFlush, QueuedSendsAndRecvsFlushAfterError)
{
    axon_dev_wc_t wc;

    open_dev();
    rc_pair(Side(), Side(), 0);
    Buf sb = dev_.reg(64, kLocalWrite);
    Buf rb = dev_.reg(128, kLocalWrite);
    ASSERT_EQ(0, post_recv(a_.qp, 50, rb.ptr, 64, rb.lkey()));
    ASSERT_EQ(0, post_recv(a_.qp, 51, rb.ptr + 64, 64, rb.lkey()));

    axon_dev_send_wr_t  wr[3];
    axon_dev_sge_t      sge[3];
    axon_dev_send_wr_t *bad = nullptr;
    make_wr(&wr[0], &sge[0], 1, AXON_DEV_WR_SEND, sb.ptr, 64, sb.lkey() ^ 0x700, 0);
    make_wr(&wr[1], &sge[1], 2, AXON_DEV_WR_SEND, sb.ptr, 64, sb.lkey(),
            AXON_DEV_SEND_SIGNALED);
    make_wr(&wr[2], &sge[2], 3, AXON_DEV_WR_SEND, sb.ptr, 64, sb.lkey(), 0);
    wr[0].next = &wr[1];
    wr[1].next = &wr[2];
    ASSERT_EQ(0, axon_dev_post_send(a_.qp, &wr[0], &bad));

    expect_wc(a_.scq, 1, AXON_DEV_WC_LOC_PROT_ERR, &a_, "unsignaled WR in error");
    expect_wc(a_.scq, 2, AXON_DEV_WC_WR_FLUSH_ERR, &a_, "queued signaled WR");
    expect_wc(a_.scq, 3, AXON_DEV_WC_WR_FLUSH_ERR, &a_, "queued unsignaled WR");
    expect_wc(a_.rcq, 50, AXON_DEV_WC_WR_FLUSH_ERR, &a_, "posted receive");
    expect_wc(a_.rcq, 51, AXON_DEV_WC_WR_FLUSH_ERR, &a_, "posted receive");
    EXPECT_TRUE(no_wc(a_.scq, 0.02, &wc));
}

/* In ERR, new sends and receives are accepted and flushed. */
TEST_F(SoftibFlush, PostsAfterErrorFlush)
{
    axon_dev_qp_attr_t a;

    open_dev();
    rc_pair(Side(), Side(), 0);
    memset(&a, 0, sizeof(a));
    a.qp_state = AXON_DEV_QPS_ERR;
    ASSERT_EQ(0, axon_dev_modify_qp(a_.qp, &a, AXON_DEV_QP_STATE));
    Buf sb = dev_.reg(64, kLocalWrite);
    ASSERT_EQ(0, post_send_op(a_.qp, 4, AXON_DEV_WR_SEND, sb.ptr, 64, sb.lkey(), 0));
    ASSERT_EQ(0, post_rdma(a_.qp, 5, AXON_DEV_WR_RDMA_READ, sb.ptr, 8, sb.lkey(), 0, 0,
                           AXON_DEV_SEND_SIGNALED));
    ASSERT_EQ(0, post_recv(a_.qp, 6, sb.ptr, 64, sb.lkey()));
    expect_wc(a_.scq, 4, AXON_DEV_WC_WR_FLUSH_ERR, &a_, "send after ERR");
    expect_wc(a_.scq, 5, AXON_DEV_WC_WR_FLUSH_ERR, &a_, "read after ERR");
    expect_wc(a_.rcq, 6, AXON_DEV_WC_WR_FLUSH_ERR, &a_, "receive after ERR");
}

/* modify_qp -> ERR flushes what is posted, and the peer's later sends fail. */
TEST_F(SoftibFlush, ModifyToErrFlushesPostedReceives)
{
    axon_dev_qp_attr_t a;

    open_dev();
    rc_pair();
    Buf rb = dev_.reg(64, kLocalWrite);
    ASSERT_EQ(0, post_recv(b_.qp, 1, rb.ptr, 64, rb.lkey()));
    ASSERT_EQ(0, post_recv(b_.qp, 2, rb.ptr, 64, rb.lkey()));
    memset(&a, 0, sizeof(a));
    a.qp_state = AXON_DEV_QPS_ERR;
    ASSERT_EQ(0, axon_dev_modify_qp(b_.qp, &a, AXON_DEV_QP_STATE));
    expect_wc(b_.rcq, 1, AXON_DEV_WC_WR_FLUSH_ERR, &b_, "first receive");
    expect_wc(b_.rcq, 2, AXON_DEV_WC_WR_FLUSH_ERR, &b_, "second receive");
}

/* An error completion is delivered even when the WR was unsignaled. */
TEST_F(SoftibFlush, UnsignaledErrorStillCompletes)
{
    open_dev();
    rc_pair(Side(), Side(), 0);
    Buf local  = dev_.reg(64, kLocalWrite);
    Buf remote = dev_.reg(64, kRemoteAll);
    ASSERT_EQ(0, post_rdma(a_.qp, 8, AXON_DEV_WR_RDMA_WRITE, local.ptr, 8, local.lkey(),
                           remote.addr(), remote.rkey() ^ 0x1000, 0));
    expect_wc(a_.scq, 8, AXON_DEV_WC_REM_ACCESS_ERR, &a_, "unsignaled write, bad rkey");
}

/* ---------------------------------------------------------------- async events */

class SoftibAsync : public SoftibErr {
protected:
    /* a_ sends cqe + 2 signaled writes into scq (its send CQ) that nobody polls */
    void overrun(axon_dev_cq_t *scq)
    {
        ASSERT_LE(scq->cqe, dev_.attr.max_qp_wr - 2);
        const uint32_t n = (uint32_t)scq->cqe + 2;
        ASSERT_EQ(0, dev_.qp(&a_, AXON_DEV_QPT_RC, 1, nullptr, 0, n, scq));
        ASSERT_EQ(0, dev_.qp(&b_, AXON_DEV_QPT_RC));
        ASSERT_EQ(0, dev_.connect(a_, b_));
        Buf local  = dev_.reg(64, kLocalWrite);
        Buf remote = dev_.reg(64, kRemoteAll);
        for (uint32_t i = 0; i < n; ++i) {
            ASSERT_EQ(0, post_rdma(a_.qp, i, AXON_DEV_WR_RDMA_WRITE, local.ptr, 8, local.lkey(),
                                   remote.addr(), remote.rkey()));
        }
        /* nobody polls: the progress thread completes them into a full CQ */
        expect_async(AXON_DEV_EVENT_CQ_ERR, scq, "overrun");
        axon_dev_wc_t wc;
        EXPECT_LT(axon_dev_poll_cq(scq, 1, &wc), 0) << "an overrun CQ is unusable";
    }
};

TEST_F(SoftibAsync, CqOverrunCqErr)
{
    open_dev();
    axon_dev_cq_t *scq = dev_.cq(4);
    ASSERT_NE(nullptr, scq);
    ASSERT_GE(scq->cqe, 4);
    overrun(scq);
}

/*
 * Seed §7.1.1: after a CQ overrun every QP using that CQ, as its send or its
 * receive CQ, gets QP_FATAL and goes to ERR; a QP on other CQs gets nothing.
 */
TEST_F(SoftibAsync, CqOverrunQpFatalOnQpsOfThatCq)
{
    Qp c, d;

    open_dev();
    axon_dev_cq_t *scq = dev_.cq(4);
    ASSERT_NE(nullptr, scq);
    /* c receives into the CQ that overruns; d, its peer, uses CQs of its own */
    ASSERT_EQ(0, dev_.qp(&c, AXON_DEV_QPT_RC, 1, nullptr, 0, 64, nullptr, scq));
    ASSERT_EQ(0, dev_.qp(&d, AXON_DEV_QPT_RC));
    ASSERT_EQ(0, dev_.connect(c, d));
    overrun(scq);
    ASSERT_FALSE(HasFatalFailure());

    /* the events of the next moments, by QP */
    std::map<const void *, int> fatal;
    double deadline = axon_test_time() + 0.5;
    while (axon_test_time() < deadline) {
        axon_dev_async_event_t ev;
        if (axon_dev_get_async_event(dev_.ctx, &ev) != 0) {
            fd_readable(dev_.ctx->async_fd, 0.05);
            continue;
        }
        axon_dev_ack_async_event(dev_.ctx, &ev);
        if (ev.event_type == AXON_DEV_EVENT_QP_FATAL) {
            fatal[(const void *)ev.element.qp]++;
        }
    }
    EXPECT_EQ(1, fatal[a_.qp]) << "the QP whose send CQ overran";
    EXPECT_EQ(1, fatal[c.qp]) << "the QP whose receive CQ overran";
    EXPECT_EQ(0, fatal[b_.qp]) << "a QP on other CQs";
    EXPECT_EQ(0, fatal[d.qp]) << "a QP on other CQs";
    EXPECT_EQ(AXON_DEV_QPS_ERR, query_state(a_.qp));
    EXPECT_EQ(AXON_DEV_QPS_ERR, query_state(c.qp));
    EXPECT_EQ(AXON_DEV_QPS_RTS, query_state(b_.qp));
    EXPECT_EQ(AXON_DEV_QPS_RTS, query_state(d.qp));
}

TEST_F(SoftibAsync, CommEstOnFirstPacketInRtr)
{
    Side sb;

    open_dev();
    sb.rts = false;
    rc_pair(Side(), sb);
    EXPECT_EQ(AXON_DEV_QPS_RTR, query_state(b_.qp));
    Buf sbuf = dev_.reg(64, 0);
    Buf rbuf = dev_.reg(64, kLocalWrite);
    ASSERT_EQ(0, post_recv(b_.qp, 3, rbuf.ptr, 64, rbuf.lkey()));
    ASSERT_EQ(0, post_send_op(a_.qp, 1, AXON_DEV_WR_SEND, sbuf.ptr, 64, sbuf.lkey()));
    expect_wc(b_.rcq, 3, AXON_DEV_WC_SUCCESS, nullptr, "receive in RTR");
    expect_wc(a_.scq, 1, AXON_DEV_WC_SUCCESS, nullptr, "ACKed from RTR");
    expect_async(AXON_DEV_EVENT_COMM_EST, b_.qp, "first packet in RTR");
}

TEST_F(SoftibAsync, NoCommEstInRts)
{
    open_dev();
    rc_pair();
    Buf sbuf = dev_.reg(64, 0);
    Buf rbuf = dev_.reg(64, kLocalWrite);
    ASSERT_EQ(0, post_recv(b_.qp, 3, rbuf.ptr, 64, rbuf.lkey()));
    ASSERT_EQ(0, post_send_op(a_.qp, 1, AXON_DEV_WR_SEND, sbuf.ptr, 64, sbuf.lkey()));
    expect_wc(b_.rcq, 3, AXON_DEV_WC_SUCCESS, nullptr, "receive");
    axon_dev_async_event_t ev;
    EXPECT_FALSE(wait_async(dev_.ctx, AXON_DEV_EVENT_COMM_EST, &ev, 0.05));
}

/* ---------------------------------------------------------------- SRQ */

class SoftibSrq : public SoftibErr {
protected:
    /* b_, a QP on an SRQ, moved to ERR: its LAST_WQE_REACHED is queued */
    void qp_on_srq_to_err()
    {
        axon_dev_srq_t    *srq = nullptr;
        axon_dev_qp_attr_t a;

        open_dev();
        ASSERT_EQ(0, dev_.srq(16, 1, &srq));
        rc_pair(Side(), Side(), 1, srq);
        memset(&a, 0, sizeof(a));
        a.qp_state = AXON_DEV_QPS_ERR;
        ASSERT_EQ(0, axon_dev_modify_qp(b_.qp, &a, AXON_DEV_QP_STATE));
    }
};

/* Armed with limit 4 over 8 WQEs: no event at 4 left, the event at 3, then disarmed. */
TEST_F(SoftibSrq, LimitEventWhenWqesFallBelowLimit)
{
    axon_dev_srq_t        *srq = nullptr;
    axon_dev_srq_attr_t    sa;
    axon_dev_async_event_t ev;
    axon_dev_wc_t          wc;

    open_dev();
    ASSERT_EQ(0, dev_.srq(16, 1, &srq));
    rc_pair(Side(), Side(), 1, srq);
    Buf rb = dev_.reg(8 * 64, kLocalWrite);
    Buf sb = dev_.reg(64, 0);
    for (int i = 0; i < 8; ++i) {
        ASSERT_EQ(0, post_srq_recv(srq, i, rb.ptr + 64 * i, 64, rb.lkey()));
    }
    memset(&sa, 0, sizeof(sa));
    sa.srq_limit = 4;
    ASSERT_EQ(0, axon_dev_modify_srq(srq, &sa, AXON_DEV_SRQ_LIMIT));
    ASSERT_EQ(0, axon_dev_query_srq(srq, &sa));
    EXPECT_EQ(4u, sa.srq_limit);

    for (int i = 0; i < 4; ++i) {
        ASSERT_EQ(0, post_send_op(a_.qp, i, AXON_DEV_WR_SEND, sb.ptr, 8, sb.lkey()));
        ASSERT_TRUE(poll_one(b_.rcq, &wc));
        EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status);
    }
    EXPECT_FALSE(wait_async(dev_.ctx, AXON_DEV_EVENT_SRQ_LIMIT_REACHED, &ev, 0.05))
        << "event with 4 WQEs left (limit 4)";
    ASSERT_EQ(0, post_send_op(a_.qp, 4, AXON_DEV_WR_SEND, sb.ptr, 8, sb.lkey()));
    ASSERT_TRUE(poll_one(b_.rcq, &wc));
    ASSERT_TRUE(wait_async(dev_.ctx, AXON_DEV_EVENT_SRQ_LIMIT_REACHED, &ev));
    EXPECT_EQ(srq, ev.element.srq);
    ASSERT_EQ(0, axon_dev_query_srq(srq, &sa));
    EXPECT_EQ(0u, sa.srq_limit) << "limit not disarmed";
    /* disarmed: no second event */
    ASSERT_EQ(0, post_send_op(a_.qp, 5, AXON_DEV_WR_SEND, sb.ptr, 8, sb.lkey()));
    ASSERT_TRUE(poll_one(b_.rcq, &wc));
    EXPECT_FALSE(wait_async(dev_.ctx, AXON_DEV_EVENT_SRQ_LIMIT_REACHED, &ev, 0.05));
}

/* Receives from an SRQ are shared: two QPs consume the same WQEs. */
TEST_F(SoftibSrq, TwoQpsShareOneSrq)
{
    axon_dev_srq_t *srq = nullptr;
    Qp              c, d;
    axon_dev_wc_t   wc[2];

    open_dev();
    ASSERT_EQ(0, dev_.srq(16, 1, &srq));
    axon_dev_cq_t *rcq = dev_.cq();
    ASSERT_EQ(0, dev_.qp(&a_, AXON_DEV_QPT_RC));
    ASSERT_EQ(0, dev_.qp(&c, AXON_DEV_QPT_RC));
    ASSERT_EQ(0, dev_.qp(&b_, AXON_DEV_QPT_RC, 1, srq, 0, 64, nullptr, rcq));
    ASSERT_EQ(0, dev_.qp(&d, AXON_DEV_QPT_RC, 1, srq, 0, 64, nullptr, rcq));
    ASSERT_EQ(0, dev_.connect(a_, b_));
    ASSERT_EQ(0, dev_.connect(c, d));
    Buf rb = dev_.reg(2 * 64, kLocalWrite);
    Buf sb = dev_.reg(64, 0);
    ASSERT_EQ(0, post_srq_recv(srq, 100, rb.ptr, 64, rb.lkey()));
    ASSERT_EQ(0, post_srq_recv(srq, 101, rb.ptr + 64, 64, rb.lkey()));
    ASSERT_EQ(0, post_send_op(a_.qp, 1, AXON_DEV_WR_SEND, sb.ptr, 8, sb.lkey()));
    ASSERT_EQ(0, post_send_op(c.qp, 2, AXON_DEV_WR_SEND, sb.ptr, 8, sb.lkey()));
    ASSERT_EQ(2, poll_n(rcq, 2, wc));
    EXPECT_NE(wc[0].qp_num, wc[1].qp_num);
    EXPECT_NE(wc[0].wr_id, wc[1].wr_id);
}

/* A QP on an SRQ that enters ERR reports QP_LAST_WQE_REACHED. */
TEST_F(SoftibSrq, LastWqeReachedWhenQpOnSrqEntersErr)
{
    ASSERT_NO_FATAL_FAILURE(qp_on_srq_to_err());
    expect_async(AXON_DEV_EVENT_QP_LAST_WQE_REACHED, b_.qp, "QP on SRQ to ERR");
}

/*
 * Destroying a QP takes its unread events back (as the kernel does): the
 * reader must not get a pointer to the freed QP. UCX destroys QPs whose
 * LAST_WQE_REACHED it has not read yet.
 */
TEST_F(SoftibSrq, UnreadEventGoesWithItsDestroyedQp)
{
    axon_dev_async_event_t ev;

    ASSERT_NO_FATAL_FAILURE(qp_on_srq_to_err());
    ASSERT_TRUE(fd_readable(dev_.ctx->async_fd, kWcTimeout)) << "no event queued";
    dev_.destroy_qp(&b_);
    EXPECT_FALSE(fd_readable(dev_.ctx->async_fd, 0)) << "the destroyed QP's event still rings";
    EXPECT_EQ(EAGAIN, axon_dev_get_async_event(dev_.ctx, &ev));
}

/*
 * An event got but not yet acked still names its QP: destroying the QP waits
 * for the ack (libibverbs' rule). UCX's async thread reads LAST_WQE_REACHED
 * while its main thread destroys that QP; without the wait the ack read
 * freed memory.
 */
TEST_F(SoftibSrq, DestroyWaitsForTheAckOfAnEventGot)
{
    axon_dev_async_event_t ev;
    std::atomic<bool>      destroyed(false);

    ASSERT_NO_FATAL_FAILURE(qp_on_srq_to_err());
    ASSERT_TRUE(fd_readable(dev_.ctx->async_fd, kWcTimeout)) << "no event queued";
    ASSERT_EQ(0, axon_dev_get_async_event(dev_.ctx, &ev));
    ASSERT_EQ(AXON_DEV_EVENT_QP_LAST_WQE_REACHED, ev.event_type);
    uint32_t qpn = b_.qp->qp_num;
    std::thread destroyer([&] {
        dev_.destroy_qp(&b_);
        destroyed = true;
    });
    usleep(100000);
    EXPECT_FALSE(destroyed) << "the QP was destroyed under an unacked event";
    EXPECT_EQ(qpn, ev.element.qp->qp_num);   /* still the QP (ASan: not freed) */
    axon_dev_ack_async_event(dev_.ctx, &ev);
    destroyer.join();
    EXPECT_TRUE(destroyed);
}

/* srq_limit above max_wr is refused; post_recv on a QP with an SRQ is refused. */
TEST_F(SoftibSrq, BadLimitAndPostRecvOnSrqQpRefused)
{
    axon_dev_srq_t     *srq = nullptr;
    axon_dev_srq_attr_t sa, got;

    open_dev();
    ASSERT_EQ(0, dev_.srq(16, 1, &srq));
    ASSERT_EQ(0, axon_dev_query_srq(srq, &got));
    EXPECT_GE(got.max_wr, 16u);
    memset(&sa, 0, sizeof(sa));
    sa.srq_limit = got.max_wr + 1;
    EXPECT_EQ(EINVAL, axon_dev_modify_srq(srq, &sa, AXON_DEV_SRQ_LIMIT));
    rc_pair(Side(), Side(), 1, srq);
    Buf rb = dev_.reg(64, kLocalWrite);
    EXPECT_EQ(EINVAL, post_recv(b_.qp, 1, rb.ptr, 64, rb.lkey()));
}


/* A QP on an SRQ that fails does not flush the SRQ: its WQEs serve the other QPs. */
TEST_F(SoftibSrq, SrqReceivesSurviveQpError)
{
    axon_dev_srq_t    *srq = nullptr;
    axon_dev_qp_attr_t a;
    axon_dev_wc_t      wc;
    Qp                 c, d;

    open_dev();
    ASSERT_EQ(0, dev_.srq(16, 1, &srq));
    rc_pair(Side(), Side(), 1, srq);
    ASSERT_EQ(0, dev_.qp(&c, AXON_DEV_QPT_RC));
    ASSERT_EQ(0, dev_.qp(&d, AXON_DEV_QPT_RC, 1, srq));
    ASSERT_EQ(0, dev_.connect(c, d));
    Buf rb = dev_.reg(64, kLocalWrite);
    Buf sb = dev_.reg(64, 0);
    ASSERT_EQ(0, post_srq_recv(srq, 42, rb.ptr, 64, rb.lkey()));
    memset(&a, 0, sizeof(a));
    a.qp_state = AXON_DEV_QPS_ERR;
    ASSERT_EQ(0, axon_dev_modify_qp(b_.qp, &a, AXON_DEV_QP_STATE));
    EXPECT_TRUE(no_wc(b_.rcq, 0.05, &wc)) << "SRQ receive flushed with the QP: " << wc.wr_id;
    axon_test_fill(sb.ptr, 64, 12);
    ASSERT_EQ(0, post_send_op(c.qp, 1, AXON_DEV_WR_SEND, sb.ptr, 64, sb.lkey()));
    expect_wc(d.rcq, 42, AXON_DEV_WC_SUCCESS, nullptr, "the other QP on the SRQ");
    EXPECT_EQ(-1, axon_test_check(rb.ptr, 64, 12));
}

}  // namespace
