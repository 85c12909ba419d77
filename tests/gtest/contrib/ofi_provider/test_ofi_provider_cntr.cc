/*
 * Counters (fi_cntr) as clients drive them beside completions: fi_cntr_wait
 * gives up after its timeout, and says -FI_EAVAIL when an error is counted
 * instead; set/add and their error twins change only their own number; a
 * counter counts each operation once; FI_REMOTE_WRITE / FI_REMOTE_READ
 * bindings need FI_RMA_EVENT; attributes the provider cannot honour are
 * refused.
 */
#include "ofi_test_node.h"

#include <rdma/fi_rma.h>

namespace {

const uint64_t kCaps = FI_TAGGED | FI_RMA;
const uint64_t kKey = 21;

struct fid_cntr *open_cntr(Node &n)
{
    struct fi_cntr_attr attr = {};
    struct fid_cntr *cntr = NULL;
    attr.events = FI_CNTR_EVENTS_COMP;
    EXPECT_EQ(0, fi_cntr_open(n.domain, &attr, &cntr, NULL));
    return cntr;
}

class OfiProviderCntr : public OfiProvider {
protected:
    Node a, b;
    fi_addr_t a_to_b = FI_ADDR_NOTAVAIL;
    std::vector<uint64_t> mem = std::vector<uint64_t>(16);
    struct fid_mr *mr = NULL;

    void SetUp() override
    {
        a.caps = b.caps = kCaps;
        a.mr_mode = b.mr_mode = FI_MR_LOCAL;
        a.rma_counters = true;
        ASSERT_EQ(0, a.open());
        ASSERT_EQ(0, b.open());
        a_to_b = a.insert(b.name);
        ASSERT_EQ(0, fi_mr_reg(b.domain, mem.data(), 8 * mem.size(), FI_REMOTE_WRITE, 0, kKey,
                               0, &mr, NULL));
    }

    void TearDown() override
    {
        if (mr != NULL) {
            EXPECT_EQ(0, fi_close(&mr->fid));
        }
    }
};

TEST_F(OfiProviderCntr, WaitGivesUpAfterItsTimeout)
{
    double start = now_sec();
    EXPECT_EQ(-FI_ETIMEDOUT, fi_cntr_wait(a.wr_cntr, 1, 200));
    double took = now_sec() - start;
    EXPECT_GE(took, 0.19);
    EXPECT_LT(took, 5.0);
    start = now_sec();
    EXPECT_EQ(-FI_ETIMEDOUT, fi_cntr_wait(a.wr_cntr, 1, 0));   /* a poll */
    EXPECT_LT(now_sec() - start, 1.0);
    EXPECT_EQ(0u, fi_cntr_read(a.wr_cntr));
}

TEST_F(OfiProviderCntr, WaitReturnsOnceReachedAndCountsEachWriteOnce)
{
    uint64_t v = 3;
    for (int i = 0; i < 5; ++i) {
        ASSERT_EQ(0, fi_inject_write(a.ep, &v, 8, a_to_b, 8 * i, kKey));
    }
    ASSERT_EQ(0, fi_cntr_wait(a.wr_cntr, 5, 20000));
    EXPECT_EQ(0, fi_cntr_wait(a.wr_cntr, 5, 0));   /* already there: no wait */
    EXPECT_EQ(-FI_ETIMEDOUT, fi_cntr_wait(a.wr_cntr, 6, 50));
    EXPECT_EQ(5u, fi_cntr_read(a.wr_cntr));
    EXPECT_EQ(0u, fi_cntr_read(a.rd_cntr));
    EXPECT_EQ(0u, fi_cntr_readerr(a.wr_cntr));
    for (int i = 0; i < 5; ++i) EXPECT_EQ(3u, mem[i]);
}

TEST_F(OfiProviderCntr, WaitSaysEavailWhenAnErrorIsCountedMeanwhile)
{
    /* Another thread counts an error while this one waits (FI_THREAD_SAFE domain). */
    Node s;
    ASSERT_EQ(0, s.open(FI_AV_MAP, FI_THREAD_SAFE));
    struct fid_cntr *c = open_cntr(s);
    ASSERT_NE(nullptr, c);
    std::thread failer([c] {
        usleep(100000);
        EXPECT_EQ(0, fi_cntr_adderr(c, 1));
    });
    double start = now_sec();
    EXPECT_EQ(-FI_EAVAIL, fi_cntr_wait(c, 1, 20000));
    EXPECT_GE(now_sec() - start, 0.09);
    EXPECT_LT(now_sec() - start, 5.0);
    failer.join();
    EXPECT_EQ(0, fi_close(&c->fid));

    /* An error counted before the wait is no news: the wait runs to its timeout. */
    uint64_t v = 3;
    ASSERT_EQ(0, fi_inject_write(a.ep, &v, 8, a_to_b, 8 * mem.size(), kKey));  /* past the end */
    for (int i = 0; (i < 1000) && (fi_cntr_readerr(a.wr_cntr) == 0); ++i) usleep(1000);
    EXPECT_EQ(1u, fi_cntr_readerr(a.wr_cntr));
    EXPECT_EQ(-FI_ETIMEDOUT, fi_cntr_wait(a.wr_cntr, 1, 100));
    EXPECT_EQ(0u, fi_cntr_read(a.wr_cntr));
}

TEST_F(OfiProviderCntr, SetAddAndTheirErrorTwinsChangeOnlyTheirNumber)
{
    struct fid_cntr *c = open_cntr(a);
    ASSERT_NE(nullptr, c);
    EXPECT_EQ(0, fi_cntr_set(c, 5));
    EXPECT_EQ(0, fi_cntr_add(c, 3));
    EXPECT_EQ(8u, fi_cntr_read(c));
    EXPECT_EQ(0u, fi_cntr_readerr(c));
    EXPECT_EQ(0, fi_cntr_adderr(c, 2));
    EXPECT_EQ(0, fi_cntr_adderr(c, 2));
    EXPECT_EQ(4u, fi_cntr_readerr(c));
    EXPECT_EQ(0, fi_cntr_seterr(c, 1));
    EXPECT_EQ(1u, fi_cntr_readerr(c));
    EXPECT_EQ(8u, fi_cntr_read(c));
    EXPECT_EQ(0, fi_cntr_wait(c, 8, 0));
    EXPECT_EQ(0, fi_cntr_set(c, 0));
    EXPECT_EQ(0u, fi_cntr_read(c));
    EXPECT_EQ(1u, fi_cntr_readerr(c));
    EXPECT_EQ(0, fi_close(&c->fid));
}

TEST_F(OfiProviderCntr, RemoteBindingsNeedRmaEvent)
{
    struct fid_cntr *c = open_cntr(b);
    struct fid_ep *ep2 = NULL;
    ASSERT_NE(nullptr, c);
    ASSERT_EQ(0, fi_endpoint(b.domain, b.info, &ep2, NULL));
    EXPECT_EQ(-FI_ENOSYS, fi_ep_bind(ep2, &c->fid, FI_REMOTE_WRITE));
    EXPECT_EQ(-FI_ENOSYS, fi_ep_bind(ep2, &c->fid, FI_RECV | FI_REMOTE_READ));
    EXPECT_EQ(-FI_EINVAL, fi_mr_bind(mr, &c->fid, FI_REMOTE_WRITE));
    EXPECT_EQ(0, fi_ep_bind(ep2, &c->fid, FI_RECV));
    EXPECT_EQ(0, fi_close(&ep2->fid));
    EXPECT_EQ(0, fi_close(&c->fid));

    Node t;   /* with FI_RMA_EVENT: both bindings are taken */
    t.caps = kCaps | FI_RMA_EVENT;
    t.mr_mode = FI_MR_LOCAL;
    t.remote_counters = true;
    ASSERT_EQ(0, t.open());
    EXPECT_NE(nullptr, t.rwr_cntr);
    EXPECT_NE(nullptr, t.rrd_cntr);
}

TEST_F(OfiProviderCntr, AttributesItCannotHonourAreRefused)
{
    struct fi_cntr_attr attr = {};
    struct fid_cntr *c = NULL;
    attr.events = (enum fi_cntr_events)1;   /* not FI_CNTR_EVENTS_COMP */
    EXPECT_EQ(-FI_ENOSYS, fi_cntr_open(a.domain, &attr, &c, NULL));
    attr.events = FI_CNTR_EVENTS_COMP;
    attr.wait_obj = FI_WAIT_FD;
    EXPECT_EQ(-FI_ENOSYS, fi_cntr_open(a.domain, &attr, &c, NULL));
    attr.wait_obj = FI_WAIT_NONE;
    attr.flags = 1;
    EXPECT_EQ(-FI_EINVAL, fi_cntr_open(a.domain, &attr, &c, NULL));
    attr.flags = 0;
    ASSERT_EQ(0, fi_cntr_open(a.domain, &attr, &c, NULL));
    EXPECT_EQ(0, fi_close(&c->fid));
}

}  // namespace
