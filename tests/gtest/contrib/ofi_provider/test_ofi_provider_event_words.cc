/*
 * FI_RMA_EVENT counted by words: initiators add to words of the target
 * endpoint instead of sending it a message per access. Counts stay exact
 * from two initiators, for region and endpoint counters (several endpoints
 * in a domain each count their own), across fi_cntr_set / fi_cntr_add, when
 * a region, an initiator or the target closes with adds on their way, and when the domain's capacity
 * (FI_AXON_RMA_EVENT_SLOTS) leaves regions to the message path.
 */
#include "ofi_event_env.h"

#include "env_guard.h"
#include "harness.h"

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>

#include <atomic>

namespace {

class OfiProviderEventWords : public OfiProvider {
protected:
    Node a, c, b;   /* a and c initiate, b is the target */
    fi_addr_t a_to_b = FI_ADDR_NOTAVAIL, c_to_b = FI_ADDR_NOTAVAIL;
    struct fi_context ctx;

    void open_all()
    {
        open_initiator(a);
        open_initiator(c);
        open_target(b);
        a_to_b = a.insert(b.name);
        c_to_b = c.insert(b.name);
    }

    void complete(Node &n)
    {
        struct fi_cq_tagged_entry e;
        ASSERT_EQ(1, wait_cq(n, {&b}, &e));
    }

    /* Read cntr until it stops moving (nothing more arrives), then its value. */
    uint64_t settled(struct fid_cntr *cntr)
    {
        for (int i = 0; i < 200; ++i) (void)fi_cntr_read(cntr);
        return fi_cntr_read(cntr);
    }

    /* n writes from node (one with an entry, one inject each time) to key at slot. */
    void writes(Node &n, fi_addr_t to, int count, uint64_t key, uint64_t slot)
    {
        uint64_t v = slot + 1;
        for (int i = 0; i < count; ++i) {
            ASSERT_EQ(0, fi_write(n.ep, &v, 8, NULL, to, 8 * slot, key, &ctx));
            complete(n);
        }
    }
};

/*
 * Writes, inject writes, atomics, fetching atomics and reads from two
 * initiators: every one counted once on the region's and the endpoint's
 * counters, and not one event message sent.
 */
TEST_F(OfiProviderEventWords, TwoInitiatorsCountExactlyWithoutMessages)
{
    open_all();
    EventRegion region;
    ASSERT_EQ(0, region.reg(b));
    const int n = 50;
    uint64_t one = 1, out = 0;
    for (int i = 0; i < n; ++i) {
        for (auto p : {std::make_pair(&a, a_to_b), std::make_pair(&c, c_to_b)}) {
            Node &x = *p.first;
            uint64_t v = i + 1;
            ASSERT_EQ(0, fi_write(x.ep, &v, 8, NULL, p.second, 0, kKey, &ctx));
            complete(x);
            ASSERT_EQ(0, fi_inject_write(x.ep, &v, 8, p.second, 8, kKey));
            ASSERT_EQ(0, fi_atomic(x.ep, &one, 1, NULL, p.second, 16, kKey, FI_UINT64, FI_SUM,
                                   &ctx));
            complete(x);
            ASSERT_EQ(0, fi_fetch_atomic(x.ep, &one, 1, NULL, &out, NULL, p.second, 24, kKey,
                                         FI_UINT64, FI_SUM, &ctx));
            complete(x);
            ASSERT_EQ(0, fi_read(x.ep, &out, 8, NULL, p.second, 0, kKey, &ctx));
            complete(x);
        }
    }
    ASSERT_EQ(0, fi_cntr_wait(region.writes, 2 * 4 * n, kWaitMs));
    ASSERT_EQ(0, fi_cntr_wait(region.reads, 2 * n, kWaitMs));
    EXPECT_EQ((uint64_t)(2 * 4 * n), settled(region.writes));
    EXPECT_EQ((uint64_t)(2 * n), settled(region.reads));
    EXPECT_EQ((uint64_t)(2 * 4 * n), settled(b.rwr_cntr));
    EXPECT_EQ((uint64_t)(2 * n), settled(b.rrd_cntr));
    EXPECT_EQ((uint64_t)(2 * n), region.mem[2]);
    EXPECT_EQ((uint64_t)(2 * n), region.mem[3]);
    EXPECT_EQ(0u, events_sent(a.ep));
    EXPECT_EQ(0u, events_sent(c.ep));
}

/* fi_cntr_set and fi_cntr_add in the middle: what came before is replaced or kept, what
 * comes after adds to the new value, each access once. */
TEST_F(OfiProviderEventWords, SetAndAddInTheMiddleKeepLaterCountsExact)
{
    open_all();
    EventRegion region;
    ASSERT_EQ(0, region.reg(b));
    writes(a, a_to_b, 30, kKey, 0);
    ASSERT_EQ(0, fi_cntr_wait(region.writes, 30, kWaitMs));
    ASSERT_EQ(0, fi_cntr_set(region.writes, 1000));
    ASSERT_EQ(0, fi_cntr_set(b.rwr_cntr, 0));
    writes(c, c_to_b, 20, kKey, 1);
    ASSERT_EQ(0, fi_cntr_add(region.writes, 5));
    writes(a, a_to_b, 10, kKey, 0);
    ASSERT_EQ(0, fi_cntr_wait(region.writes, 1035, kWaitMs));
    EXPECT_EQ(1035u, settled(region.writes));
    EXPECT_EQ(30u, settled(b.rwr_cntr));
    EXPECT_EQ(0u, events_sent(a.ep) + events_sent(c.ep));
}

/* Two endpoints of one target domain share its region; each endpoint's FI_REMOTE_WRITE
 * counter counts the accesses that came to it, the region's counter all of them. */
TEST_F(OfiProviderEventWords, EachEndpointOfADomainCountsItsOwn)
{
    open_all();
    EventRegion region;
    ASSERT_EQ(0, region.reg(b));
    struct fid_ep *ep2 = NULL;
    struct fid_cntr *rwr2 = NULL;
    struct fi_cntr_attr attr = {};
    attr.events = FI_CNTR_EVENTS_COMP;
    ASSERT_EQ(0, fi_endpoint(b.domain, b.info, &ep2, NULL));
    ASSERT_EQ(0, fi_cntr_open(b.domain, &attr, &rwr2, NULL));
    ASSERT_EQ(0, fi_ep_bind(ep2, &b.av->fid, 0));
    ASSERT_EQ(0, fi_ep_bind(ep2, &b.cq->fid, FI_TRANSMIT | FI_RECV));   /* progressed with b */
    ASSERT_EQ(0, fi_ep_bind(ep2, &rwr2->fid, FI_REMOTE_WRITE));
    ASSERT_EQ(0, fi_enable(ep2));
    char name2[64];
    size_t len2 = sizeof(name2);
    ASSERT_EQ(0, fi_getname(&ep2->fid, name2, &len2));
    fi_addr_t a_to_b2 = a.insert(name2);
    writes(a, a_to_b, 12, kKey, 0);
    writes(a, a_to_b2, 7, kKey, 1);
    writes(c, c_to_b, 5, kKey, 2);
    ASSERT_EQ(0, fi_cntr_wait(region.writes, 24, kWaitMs));
    EXPECT_EQ(24u, settled(region.writes));
    EXPECT_EQ(17u, settled(b.rwr_cntr));
    EXPECT_EQ(7u, settled(rwr2));
    EXPECT_EQ(0u, events_sent(a.ep) + events_sent(c.ep));
    EXPECT_EQ(0, fi_close(&ep2->fid));
    EXPECT_EQ(0, fi_close(&rwr2->fid));
}

/*
 * A region closes while adds for it are on their way (as active messages,
 * which the target executes in its progress; a write's CQ entry comes once
 * its add is posted): the close counts what had arrived, the late adds land in the
 * freed slot, and the next region, given that slot (capacity 1), counts
 * only its own accesses; the endpoint's counter gets every one.
 */
TEST_F(OfiProviderEventWords, RegionClosedWithAddsInFlightLeavesTheNextExact)
{
    EnvGuard env;
    env.set("AXON_TLS", "tcp");
    env.set("AXON_RMA_PATH", "am");   /* else an add to memory of this process is a CPU's */
    env.set("FI_AXON_RMA_EVENT_SLOTS", "1");
    open_all();
    const int n = 40, m = 9;
    EventRegion first;
    ASSERT_EQ(0, first.reg(b));
    writes(a, a_to_b, n, kKey, 0);   /* b is not progressed after the last entry */
    ASSERT_EQ(0, fi_close(&first.mr->fid));
    first.mr = NULL;
    uint64_t counted = fi_cntr_read(first.writes);   /* unbound now: no more progress */
    EXPECT_LT(counted, (uint64_t)n) << "no add was on its way at the close";
    struct fi_cq_tagged_entry e;
    for (int i = 0; i < 2000; ++i) (void)fi_cq_read(b.cq, &e, 0);   /* the late adds land */
    EventRegion second;
    ASSERT_EQ(0, second.reg(b, kKey + 1));
    writes(c, c_to_b, m, kKey + 1, 1);
    ASSERT_EQ(0, fi_cntr_wait(second.writes, m, kWaitMs));
    EXPECT_EQ((uint64_t)m, settled(second.writes));
    EXPECT_EQ(counted, settled(first.writes));
    EXPECT_EQ((uint64_t)(n + m), settled(b.rwr_cntr));
    EXPECT_EQ(0u, events_sent(a.ep) + events_sent(c.ep));
}

/*
 * An initiator closes right after its last writes, their adds still to be
 * posted or on their way (active messages): its close lets them finish
 * (operations drained, adds waited for, connections flushed), so the
 * target, progressing meanwhile, counts every write.
 */
TEST_F(OfiProviderEventWords, InitiatorCloseLetsItsAddsFinish)
{
    EnvGuard env;
    env.set("AXON_TLS", "tcp");
    env.set("AXON_RMA_PATH", "am");
    open_all();
    const int n = 30;
    EventRegion region;
    ASSERT_EQ(0, region.reg(b));
    uint64_t v = 4;
    for (int i = 0; i < n; ++i) {   /* no wait: b is progressed only while a closes */
        ASSERT_EQ(0, fi_write(a.ep, &v, 8, NULL, a_to_b, 0, kKey, &ctx));
    }
    std::atomic<bool> closed{false};
    std::thread target([&] {
        struct fi_cq_tagged_entry e;
        while (!closed.load()) (void)fi_cq_read(b.cq, &e, 0);   /* b's domain: this thread's */
    });
    a.close();
    closed = true;
    target.join();
    ASSERT_EQ(0, fi_cntr_wait(region.writes, n, kWaitMs));
    EXPECT_EQ((uint64_t)n, settled(region.writes));
    EXPECT_EQ((uint64_t)n, settled(b.rwr_cntr));
}

/*
 * The target endpoint closes while an initiator's adds are on their way:
 * they fail there (its words are gone), which is no failure of the
 * initiator's: nothing is logged for its application (Axon reported it as
 * an operation of the application's that failed at the target, 2 runs in
 * 30 of SOS's finalize over tcp), and its adds in flight are all answered.
 */
TEST_F(OfiProviderEventWords, TargetClosedWithAddsInFlightLeavesInitiatorQuiet)
{
    EnvGuard env;
    env.set("AXON_TLS", "tcp");
    env.set("AXON_RMA_PATH", "am");
    open_all();
    EventRegion region;
    ASSERT_EQ(0, region.reg(b));
    writes(a, a_to_b, 20, kKey, 0);   /* b is not progressed after the last entry */
    ASSERT_EQ(0, axon_test_stderr_capture_begin());
    EXPECT_EQ(0, fi_close(&b.ep->fid));   /* its words go first, then what came is read */
    b.ep = NULL;
    struct fi_cq_tagged_entry e;
    for (int i = 0; i < 2000; ++i) (void)fi_cq_read(a.cq, &e, 0);   /* the answers come */
    char *log = axon_test_stderr_capture_end();
    ASSERT_NE(nullptr, log);
    EXPECT_EQ(nullptr, strstr(log, "failed at the target")) << log;
    free(log);
}

/* Capacity for one region: the second one counts by messages, exactly too. */
TEST_F(OfiProviderEventWords, RegionsBeyondCapacityCountByMessages)
{
    EnvGuard env("FI_AXON_RMA_EVENT_SLOTS", "1");
    open_all();
    EventRegion words, messages;
    ASSERT_EQ(0, words.reg(b));
    ASSERT_EQ(0, messages.reg(b, kKey + 1));
    writes(a, a_to_b, 11, kKey, 0);
    writes(a, a_to_b, 6, kKey + 1, 0);
    writes(c, c_to_b, 4, kKey + 1, 1);
    ASSERT_EQ(0, fi_cntr_wait(words.writes, 11, kWaitMs));
    ASSERT_EQ(0, fi_cntr_wait(messages.writes, 10, kWaitMs));
    EXPECT_EQ(11u, settled(words.writes));
    EXPECT_EQ(10u, settled(messages.writes));
    EXPECT_EQ(21u, settled(b.rwr_cntr));
    /* a message each, or fewer when some were added up behind a queued one */
    EXPECT_GT(events_sent(a.ep), 0u);
    EXPECT_LE(events_sent(a.ep), 6u);
    EXPECT_GT(events_sent(c.ep), 0u);
    EXPECT_LE(events_sent(c.ep), 4u);
}

/* Capacity 0: every access is a message, as before words existed; a bad capacity fails
 * the domain. */
TEST_F(OfiProviderEventWords, CapacityZeroCountsByMessagesAndBadCapacityFails)
{
    {
        EnvGuard env("FI_AXON_RMA_EVENT_SLOTS", "0");
        open_all();
        EventRegion region;
        ASSERT_EQ(0, region.reg(b));
        writes(a, a_to_b, 8, kKey, 0);
        ASSERT_EQ(0, fi_cntr_wait(region.writes, 8, kWaitMs));
        EXPECT_EQ(8u, settled(region.writes));
        EXPECT_GT(events_sent(a.ep), 0u);
        EXPECT_LE(events_sent(a.ep), 8u);
    }
    EnvGuard env("FI_AXON_RMA_EVENT_SLOTS", "-3");
    Node bad;
    bad.caps = kTargetCaps;
    bad.mr_mode = FI_MR_LOCAL;
    EXPECT_EQ(-FI_EINVAL, bad.open());
}

}  // namespace
