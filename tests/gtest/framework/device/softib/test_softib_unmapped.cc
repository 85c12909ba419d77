/*
 * Registered memory the application gave back while it stayed registered
 * (a registration cache's window between munmap and its deregistration):
 * a NIC reaches the pinned pages, so a late request (a read re-executed
 * for a requester that asked again) does no harm. softib reaches memory
 * through the process's own mapping; it must not crash there either
 * (softib_guard.h). Reads see zeros, writes and atomic results are lost,
 * every operation completes, and both QPs go on moving data.
 *
 * The region is replaced by an inaccessible mapping rather than unmapped,
 * so that nothing else the test allocates can land at its address; an
 * access faults the same way (SIGSEGV). A file mapping cut short (SIGBUS)
 * is the other way memory disappears under a key.
 */
#include "softib_env.h"

#include <sys/mman.h>

#include "framework/device/softib/softib_guard.h"

namespace {

const int    kLocalWrite = AXON_DEV_ACCESS_LOCAL_WRITE;
const int    kRemoteAll  = AXON_DEV_ACCESS_LOCAL_WRITE | AXON_DEV_ACCESS_REMOTE_WRITE |
                           AXON_DEV_ACCESS_REMOTE_READ | AXON_DEV_ACCESS_REMOTE_ATOMIC;
const size_t kLen        = 64 * 1024;   /* many packets at any MTU */

class SoftibUnmapped : public SoftibTest {
protected:
    Qp             a_, b_;            /* a_ requests, b_ responds (loopback) */
    axon_dev_mr_t *gone_     = nullptr;
    uint8_t       *gone_ptr_ = nullptr;
    size_t         gone_len_ = 0;
    int            gone_fd_  = -1;

    void TearDown() override
    {
        if (gone_ != nullptr) {
            EXPECT_EQ(0, axon_dev_dereg_mr(gone_));
        }
        if (gone_ptr_ != nullptr) {
            munmap(gone_ptr_, gone_len_);
        }
        if (gone_fd_ >= 0) {
            close(gone_fd_);
        }
        SoftibTest::TearDown();
    }

    /* The pair, and len bytes of memory registered with access, filled; then taken away. */
    void take_away(size_t len, int access = kRemoteAll)
    {
        open_dev();
        make_pair(AXON_DEV_QPT_RC, &a_, &b_);
        void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(MAP_FAILED, p);
        gone_ptr_ = (uint8_t *)p;
        gone_len_ = len;
        memset(p, 0x5a, len);
        ASSERT_EQ(0, axon_dev_reg_mr(dev_.pd, p, len, access, &gone_));
        ASSERT_EQ(p, mmap(p, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0));
    }

    /* A shared file mapping registered, filled, then the file truncated under it (SIGBUS). */
    void cut_short(size_t len)
    {
        open_dev();
        make_pair(AXON_DEV_QPT_RC, &a_, &b_);
        gone_fd_ = memfd_create("softib_unmapped", MFD_CLOEXEC);
        ASSERT_LE(0, gone_fd_);
        ASSERT_EQ(0, ftruncate(gone_fd_, (off_t)len));
        void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, gone_fd_, 0);
        ASSERT_NE(MAP_FAILED, p);
        gone_ptr_ = (uint8_t *)p;
        gone_len_ = len;
        memset(p, 0x5a, len);
        ASSERT_EQ(0, axon_dev_reg_mr(dev_.pd, p, len, kRemoteAll, &gone_));
        ASSERT_EQ(0, ftruncate(gone_fd_, 0));
    }

    uint64_t gone_addr() const { return (uintptr_t)gone_ptr_; }

    /* One RDMA op of a_ and its completion status */
    int rdma(axon_dev_wr_opcode_t op, const Buf &local, uint32_t len, uint64_t raddr,
             uint32_t rkey)
    {
        axon_dev_wc_t wc;

        EXPECT_EQ(0, post_rdma(a_.qp, 7, op, local.ptr, len, local.lkey(), raddr, rkey));
        if (!poll_one(a_.scq, &wc)) {
            ADD_FAILURE() << "no completion";
            return -1;
        }
        return (int)wc.status;
    }

    /* Both QPs still work: a write into live memory and a read back, byte-exact. */
    void expect_pair_works()
    {
        Buf live = dev_.reg(kLen, kRemoteAll);
        Buf src  = dev_.reg(kLen, kLocalWrite);
        Buf back = dev_.reg(kLen, kLocalWrite);

        axon_test_fill(src.ptr, kLen, 41);
        ASSERT_EQ(AXON_DEV_WC_SUCCESS,
                  rdma(AXON_DEV_WR_RDMA_WRITE, src, kLen, live.addr(), live.rkey()));
        ASSERT_EQ(AXON_DEV_WC_SUCCESS,
                  rdma(AXON_DEV_WR_RDMA_READ, back, kLen, live.addr(), live.rkey()));
        EXPECT_EQ(-1, axon_test_check(back.ptr, kLen, 41)) << "the pair no longer moves data";
        EXPECT_EQ(AXON_DEV_QPS_RTS, query_state(a_.qp));
        EXPECT_EQ(AXON_DEV_QPS_RTS, query_state(b_.qp));
    }
};

/* Every byte of p is v (the index of the first other, else -1) */
long first_not(const uint8_t *p, size_t len, uint8_t v)
{
    for (size_t i = 0; i < len; ++i) {
        if (p[i] != v) {
            return (long)i;
        }
    }
    return -1;
}

TEST_F(SoftibUnmapped, ReadSeesZeros)
{
    take_away(kLen);
    Buf           dst    = dev_.reg(kLen, kLocalWrite);
    unsigned long faults = softib_guard_faults();

    memset(dst.ptr, 0xee, kLen);
    ASSERT_EQ(AXON_DEV_WC_SUCCESS, rdma(AXON_DEV_WR_RDMA_READ, dst, kLen, gone_addr(),
                                        gone_->rkey));
    EXPECT_EQ(-1, first_not(dst.ptr, kLen, 0)) << "not zeros where the memory was gone";
    EXPECT_GT(softib_guard_faults(), faults) << "the read never reached the memory";
    expect_pair_works();
}

TEST_F(SoftibUnmapped, WriteIsLost)
{
    take_away(kLen);
    Buf src = dev_.reg(kLen, kLocalWrite);

    axon_test_fill(src.ptr, kLen, 5);
    ASSERT_EQ(AXON_DEV_WC_SUCCESS, rdma(AXON_DEV_WR_RDMA_WRITE, src, kLen, gone_addr(),
                                        gone_->rkey));
    expect_pair_works();
}

TEST_F(SoftibUnmapped, AtomicResultIsZero)
{
    axon_dev_wc_t wc;

    take_away(4096);
    Buf result = dev_.reg(8, kLocalWrite);
    memset(result.ptr, 0xee, 8);
    ASSERT_EQ(0, post_atomic(a_.qp, 3, AXON_DEV_WR_ATOMIC_FETCH_AND_ADD, result.ptr,
                             result.lkey(), gone_addr() + 64, gone_->rkey, 1));
    ASSERT_TRUE(poll_one(a_.scq, &wc));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    EXPECT_EQ(-1, first_not(result.ptr, 8, 0));
    expect_pair_works();
}

/* The requester's side: a send gathered from memory gone under its key goes as zeros. */
TEST_F(SoftibUnmapped, SendFromGoneMemoryArrivesAsZeros)
{
    axon_dev_wc_t wc;

    take_away(kLen, kLocalWrite);
    Buf dst = dev_.reg(kLen, kLocalWrite);
    memset(dst.ptr, 0xee, kLen);
    ASSERT_EQ(0, post_recv(b_.qp, 9, dst.ptr, kLen, dst.lkey()));
    ASSERT_EQ(0, post_send_op(a_.qp, 8, AXON_DEV_WR_SEND, gone_ptr_, kLen, gone_->lkey));
    ASSERT_TRUE(poll_one(a_.scq, &wc));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    ASSERT_TRUE(poll_one(b_.rcq, &wc));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    EXPECT_EQ(kLen, wc.byte_len);
    EXPECT_EQ(-1, first_not(dst.ptr, kLen, 0));
    expect_pair_works();
}

/* A receive buffer gone under its key: the message is lost, both sides complete. */
TEST_F(SoftibUnmapped, ReceiveIntoGoneMemoryIsLost)
{
    axon_dev_wc_t wc;

    take_away(kLen, kLocalWrite);
    Buf src = dev_.reg(kLen, kLocalWrite);
    axon_test_fill(src.ptr, kLen, 6);
    ASSERT_EQ(0, post_recv(b_.qp, 9, gone_ptr_, kLen, gone_->lkey));
    ASSERT_EQ(0, post_send_op(a_.qp, 8, AXON_DEV_WR_SEND, src.ptr, kLen, src.lkey()));
    ASSERT_TRUE(poll_one(b_.rcq, &wc));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    ASSERT_TRUE(poll_one(a_.scq, &wc));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    expect_pair_works();
}

TEST_F(SoftibUnmapped, ReadOfTruncatedFileSeesZeros)
{
    cut_short(kLen);
    Buf dst = dev_.reg(kLen, kLocalWrite);

    memset(dst.ptr, 0xee, kLen);
    ASSERT_EQ(AXON_DEV_WC_SUCCESS, rdma(AXON_DEV_WR_RDMA_READ, dst, kLen, gone_addr(),
                                        gone_->rkey));
    EXPECT_EQ(-1, first_not(dst.ptr, kLen, 0));
    expect_pair_works();
}

/* A fault outside a guard still kills the process, as it would without softib. */
int fault_outside_a_guard(int fd, void *arg)
{
    (void)fd;
    (void)arg;
    EXPECT_EQ(0, softib_guard_init());
    *(volatile uint8_t *)(uintptr_t)8 = 1;
    return 0;
}

TEST_F(SoftibUnmapped, FaultOutsideAGuardStillKills)
{
    axon_test_peer_t child;

    ASSERT_EQ(0, axon_test_peer_spawn(&child, fault_outside_a_guard, nullptr, 30.0));
#if defined(__SANITIZE_ADDRESS__)
    EXPECT_EQ(1, axon_test_peer_wait(&child, 30.0));   /* ASan reported the SEGV */
#else
    EXPECT_EQ(-1, axon_test_peer_wait(&child, 30.0));  /* died by the signal */
#endif
}

} // namespace
