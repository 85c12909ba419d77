/*
 * FI_RMA_EVENT: counters at the target of remote writes, atomics and reads,
 * bound to a region (fi_mr_bind) and to the endpoint (FI_REMOTE_WRITE /
 * FI_REMOTE_READ). Each access counts exactly once, only once its data is
 * visible in the target's memory, and fi_cntr_wait on such a counter drives
 * the target's progress itself; in one process and across processes (two
 * initiators) over shm and tcp.
 */
#include "ofi_event_env.h"

#include "env_guard.h"

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>

#include <fcntl.h>

namespace {

/* ---------------------------------------------------------------- one process */

class OfiProviderEvent : public OfiProvider {
protected:
    Node a, b;   /* a initiates, b is the target */
    EventRegion region;
    fi_addr_t a_to_b = FI_ADDR_NOTAVAIL;
    struct fi_context ctx;

    void SetUp() override
    {
        open_initiator(a);
        open_target(b);
        a_to_b = a.insert(b.name);
        ASSERT_EQ(0, region.reg(b));
    }

    void complete()
    {
        struct fi_cq_tagged_entry e;
        ASSERT_EQ(1, wait_cq(a, {&b}, &e));
    }
};

TEST_F(OfiProviderEvent, GetinfoListsRmaEventOnlyWhenAsked)
{
    struct fi_info *hints = ompi_hints(), *info = NULL;
    hints->caps = kTargetCaps;
    hints->domain_attr->mr_mode = FI_MR_LOCAL;
    ASSERT_EQ(0, getinfo(hints, &info));
    EXPECT_EQ(FI_RMA_EVENT, info->caps & FI_RMA_EVENT);
    EXPECT_EQ(FI_RMA_EVENT, info->rx_attr->caps & FI_RMA_EVENT);
    fi_freeinfo(info);
    hints->caps = kInitiatorCaps;
    ASSERT_EQ(0, getinfo(hints, &info));
    EXPECT_EQ(0u, info->caps & FI_RMA_EVENT);
    fi_freeinfo(info);
    fi_freeinfo(hints);
    ASSERT_EQ(0, getinfo(NULL, &info));   /* a cost: never offered unasked */
    EXPECT_EQ(0u, info->caps & FI_RMA_EVENT);
    fi_freeinfo(info);
}

/* Regions count without FI_MR_RMA_EVENT's fi_mr_enable step: the mode is never required. */
TEST_F(OfiProviderEvent, MrRmaEventModeIsNotRequired)
{
    struct fi_info *hints = ompi_hints(), *info = NULL;
    hints->caps = kTargetCaps;
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_RMA_EVENT;
    ASSERT_EQ(0, getinfo(hints, &info));
    EXPECT_EQ(0u, info->domain_attr->mr_mode & FI_MR_RMA_EVENT);
    fi_freeinfo(info);
    fi_freeinfo(hints);
    EXPECT_EQ(0, fi_mr_enable(region.mr));   /* harmless when a client calls it anyway */
    uint64_t v = 1;
    ASSERT_EQ(0, fi_write(a.ep, &v, 8, NULL, a_to_b, 0, kKey, &ctx));
    complete();
    ASSERT_EQ(0, fi_cntr_wait(region.writes, 1, kWaitMs));
}

TEST_F(OfiProviderEvent, EachWriteAtomicAndReadCountsOnce)
{
    const int n = 40;
    uint64_t v = 0, out = 0, one = 1;
    for (int i = 0; i < n; ++i) {
        v = i + 1;
        ASSERT_EQ(0, fi_write(a.ep, &v, 8, NULL, a_to_b, 0, kKey, &ctx));
        complete();
        ASSERT_EQ(0, fi_inject_write(a.ep, &v, 8, a_to_b, 8, kKey));   /* no entry */
        ASSERT_EQ(0, fi_atomic(a.ep, &one, 1, NULL, a_to_b, 16, kKey, FI_UINT64, FI_SUM,
                               &ctx));
        complete();
        ASSERT_EQ(0, fi_fetch_atomic(a.ep, &one, 1, NULL, &out, NULL, a_to_b, 24, kKey,
                                     FI_UINT64, FI_SUM, &ctx));
        complete();
        ASSERT_EQ(0, fi_read(a.ep, &out, 8, NULL, a_to_b, 0, kKey, &ctx));
        complete();
    }
    /* The inject writes have no entry: wait for all of them at the target. */
    ASSERT_EQ(0, fi_cntr_wait(region.writes, 4 * n, kWaitMs));
    ASSERT_EQ(0, fi_cntr_wait(region.reads, n, kWaitMs));
    for (int i = 0; i < 100; ++i) {   /* nothing more arrives */
        (void)fi_cntr_read(region.writes);
        (void)fi_cntr_read(region.reads);
    }
    EXPECT_EQ((uint64_t)(4 * n), fi_cntr_read(region.writes));
    EXPECT_EQ((uint64_t)n, fi_cntr_read(region.reads));
    EXPECT_EQ((uint64_t)(4 * n), fi_cntr_read(b.rwr_cntr));
    EXPECT_EQ((uint64_t)n, fi_cntr_read(b.rrd_cntr));
    EXPECT_EQ(0u, fi_cntr_readerr(region.writes));
    EXPECT_EQ((uint64_t)n, region.mem[0]);
    EXPECT_EQ((uint64_t)n, region.mem[1]);
    EXPECT_EQ((uint64_t)n, region.mem[2]);
    EXPECT_EQ((uint64_t)n, region.mem[3]);
}

/* Heap: measures the process's memory, which the sanitizers inflate (tests/README.md). */
class OfiProviderEventHeap : public OfiProviderEvent {};

long rss_kb()
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;

    while ((f != NULL) && fgets(line, sizeof(line), f)) {
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1) break;
    }
    if (f != NULL) fclose(f);
    return kb;
}

/*
 * A target that does not drive its progress while an initiator writes: the
 * notifications fill the way to it, then the initiator adds the rest up
 * (or, its table full, says -FI_EAGAIN) instead of queueing one message per
 * write without bound, which grew a SHMEM initiator by 0.5 KB a put. Once
 * the target drains, every write accepted counts exactly once.
 */
TEST_F(OfiProviderEventHeap, UndrainedTargetKeepsInitiatorBoundedAndCountsEachOnce)
{
    const int n = 200000;
    uint64_t v = 7;
    int accepted = 0;
    ssize_t ret;
    for (int i = 0; i < 1000; ++i, ++accepted) {   /* warm up: pools, the key */
        ASSERT_EQ(0, fi_inject_write(a.ep, &v, 8, a_to_b, 0, kKey));
    }
    long before = rss_kb();
    for (int i = 0; i < n; ++i) {
        ret = fi_inject_write(a.ep, &v, 8, a_to_b, 0, kKey);
        if (ret == 0) {
            ++accepted;
        } else {
            ASSERT_EQ(-FI_EAGAIN, ret);
        }
    }
    long grown = rss_kb() - before;
    EXPECT_LT(grown, 8 * 1024) << "kB grown over " << n << " writes to an idle target";
    /* Both sides progress now (a's queued notifications leave as b takes them in). */
    struct fi_cq_tagged_entry scratch;
    double deadline = now_sec() + kWaitMs / 1000.0;
    while ((fi_cntr_read(region.writes) < (uint64_t)accepted) && (now_sec() < deadline)) {
        (void)fi_cq_read(a.cq, &scratch, 0);
    }
    for (int i = 0; i < 100; ++i) {
        (void)fi_cq_read(a.cq, &scratch, 0);
        (void)fi_cntr_read(region.writes);
    }
    EXPECT_EQ((uint64_t)accepted, fi_cntr_read(region.writes));
    EXPECT_EQ((uint64_t)accepted, fi_cntr_read(b.rwr_cntr));
    EXPECT_EQ(0u, fi_cntr_readerr(region.writes));
    /* drained: the next write goes through and counts */
    ASSERT_EQ(0, fi_inject_write(a.ep, &v, 8, a_to_b, 0, kKey));
    ASSERT_EQ(0, fi_cntr_wait(region.writes, accepted + 1, kWaitMs));
    EXPECT_EQ(7u, region.mem[0]);
}

/* The target's endpoint closes under an initiator whose notifications are queued, with
 * counts held back behind them; then the initiator closes. Its queued ones end in error
 * (Axon's callbacks, inside its progress): nothing is sent from there into the connection
 * being torn down, and both close cleanly. */
TEST_F(OfiProviderEvent, TargetGoneUnderHeldNotificationsClosesCleanly)
{
    uint64_t v = 9;
    for (int i = 0; i < 20000; ++i) {
        ssize_t ret = fi_inject_write(a.ep, &v, 8, a_to_b, 0, kKey);
        ASSERT_TRUE((ret == 0) || (ret == -FI_EAGAIN)) << ret;
    }
    ASSERT_EQ(0, fi_close(&b.ep->fid));
    b.ep = NULL;
    a.close();
    EXPECT_EQ(9u, region.mem[0]);
}

TEST_F(OfiProviderEvent, FailedAccessCountsNothing)
{
    uint64_t v = 5;
    struct fi_cq_tagged_entry e;
    struct fi_cq_err_entry err;
    ASSERT_EQ(0, fi_write(a.ep, &v, 8, NULL, a_to_b, kRegionSize, kKey, &ctx));   /* past end */
    ASSERT_EQ(-FI_EAVAIL, wait_cq(a, {&b}, &e, &err));
    ASSERT_EQ(0, fi_write(a.ep, &v, 8, NULL, a_to_b, 0, kKey, &ctx));
    complete();
    ASSERT_EQ(0, fi_cntr_wait(region.writes, 1, kWaitMs));
    for (int i = 0; i < 100; ++i) (void)fi_cntr_read(region.writes);
    EXPECT_EQ(1u, fi_cntr_read(region.writes));
    EXPECT_EQ(5u, region.mem[0]);
}

TEST_F(OfiProviderEvent, BindingsNeedTheCapability)
{
    /* a's domain has no FI_RMA_EVENT: neither a region nor an endpoint binding is taken. */
    std::vector<uint64_t> mem(16);
    struct fid_mr *mr = NULL;
    struct fid_cntr *cntr = NULL;
    struct fi_cntr_attr attr = {};
    attr.events = FI_CNTR_EVENTS_COMP;
    ASSERT_EQ(0, fi_mr_reg(a.domain, mem.data(), 128, FI_REMOTE_WRITE, 0, 9, 0, &mr, NULL));
    ASSERT_EQ(0, fi_cntr_open(a.domain, &attr, &cntr, NULL));
    EXPECT_EQ(-FI_EINVAL, fi_mr_bind(mr, &cntr->fid, FI_REMOTE_WRITE));
    EXPECT_EQ(0, fi_close(&mr->fid));
    /* b's does: a bad flag is still refused. */
    ASSERT_EQ(0, fi_mr_reg(b.domain, mem.data(), 128, FI_REMOTE_WRITE, 0, 9, 0, &mr, NULL));
    EXPECT_EQ(-FI_EINVAL, fi_mr_bind(mr, &cntr->fid, FI_SEND));
    EXPECT_EQ(0, fi_close(&mr->fid));
    EXPECT_EQ(0, fi_close(&cntr->fid));
}

/* ---------------------------------------------------------------- two processes */

const int kRounds = 300;

/*
 * Initiator id: round i writes i + 1 into its slot, then adds 1 to the shared
 * word 2: two remote writes a round, each waited for before the next.
 */
int initiator_main(int id, int rd)
{
    char peer[64];
    if (read(rd, peer, sizeof(peer)) != (ssize_t)sizeof(peer)) return 9;
    Node n;
    n.caps = kInitiatorCaps;
    n.mr_mode = FI_MR_LOCAL;
    if (n.open() != 0) return 10;
    fi_addr_t p = n.insert(peer);
    struct fi_context ctx;
    struct fi_cq_tagged_entry e;
    for (int i = 0; i < kRounds; ++i) {
        uint64_t v = i + 1, one = 1;
        if (fi_write(n.ep, &v, 8, NULL, p, 8 * id, kKey, &ctx) != 0) return 11;
        if (wait_cq(n, {}, &e) != 1) return 12;
        if (fi_atomic(n.ep, &one, 1, NULL, p, 16, kKey, FI_UINT64, FI_SUM, &ctx) != 0) return 13;
        if (wait_cq(n, {}, &e) != 1) return 14;
    }
    if (events_sent(n.ep) != 0) return 16;   /* counted by words: no message */
    /* Progress (the last event may still be leaving) until the target has counted. */
    fcntl(rd, F_SETFL, O_NONBLOCK);
    for (;;) {
        char done;
        (void)fi_cq_read(n.cq, &e, 0);
        ssize_t got = read(rd, &done, 1);
        if (got == 0) return 15;
        if (got == 1) return 0;
    }
}

class OfiProviderEventXproc : public OfiProvider,
                              public ::testing::WithParamInterface<std::string> {};

/*
 * The target only waits on its region's counter: every count it sees must
 * already be in its memory (the slots and the shared word account for at
 * least that many writes), and the total ends exact.
 */
TEST_P(OfiProviderEventXproc, TwoInitiatorsCountExactlyAndAfterTheData)
{
    EnvGuard env("AXON_TLS", GetParam().c_str());
    use_build_provider();
    Child c[2];
    for (int id = 0; id < 2; ++id) {
        c[id].start([=](int rd, int wr) { _exit(initiator_main(id, rd)); });
    }
    Node t;
    open_target(t);
    EventRegion region;
    ASSERT_EQ(0, region.reg(t));
    for (int id = 0; id < 2; ++id) {
        ASSERT_EQ((ssize_t)sizeof(t.name), write(c[id].to[1], t.name, sizeof(t.name)));
    }
    const uint64_t total = 2 * 2 * kRounds;
    volatile uint64_t *mem = region.mem.data();
    uint64_t seen = 0, early = 0;
    while (seen < total) {
        ASSERT_EQ(0, fi_cntr_wait(region.writes, seen + 1, kWaitMs)) << "stuck at " << seen;
        seen = fi_cntr_read(region.writes);
        if (mem[0] + mem[1] + mem[2] < seen) {
            ++early;   /* counted before its data was there */
        }
    }
    for (int i = 0; i < 1000; ++i) (void)fi_cntr_read(region.writes);
    EXPECT_EQ(0u, early);
    EXPECT_EQ(total, fi_cntr_read(region.writes));
    EXPECT_EQ(total, fi_cntr_read(t.rwr_cntr));
    EXPECT_EQ(0u, fi_cntr_read(region.reads));
    EXPECT_EQ((uint64_t)kRounds, mem[0]);
    EXPECT_EQ((uint64_t)kRounds, mem[1]);
    EXPECT_EQ((uint64_t)(2 * kRounds), mem[2]);
    for (int id = 0; id < 2; ++id) {
        ASSERT_EQ(1, write(c[id].to[1], "q", 1));
        c[id].finish();
    }
}

INSTANTIATE_TEST_SUITE_P(Lanes, OfiProviderEventXproc, ::testing::Values("shm", "tcp"),
                         [](const ::testing::TestParamInfo<std::string> &p) { return p.param; });

}  // namespace
