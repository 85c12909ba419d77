/*
 * Remote CQ data for RMA (fi_writedata, fi_inject_writedata, fi_writemsg
 * with FI_REMOTE_CQ_DATA): the target endpoint gets one entry per write,
 * FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA with the data, only once the
 * written data is in its memory, without a receive of its own consumed;
 * FI_RMA_EVENT's counters count such a write once; bad calls are refused
 * before anything is sent. In one process and across processes over shm
 * and tcp.
 */
#include "ofi_test_node.h"

#include "env_guard.h"

#include <rdma/fi_rma.h>

#include <fcntl.h>

#include <set>

namespace {

const uint64_t kCaps = FI_TAGGED | FI_RMA;
const uint64_t kKey = 11;
const size_t kRegionSize = 4096;
const uint64_t kCqDataFlags = FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA;

void open_node(Node &n, uint64_t caps = kCaps)
{
    n.caps = caps;
    n.mr_mode = FI_MR_LOCAL;   /* offsets and requested keys */
    n.rma_counters = true;
    ASSERT_EQ(0, n.open());
}

/* The target's region, registered under kKey. */
struct CqDataRegion {
    std::vector<uint64_t> mem = std::vector<uint64_t>(kRegionSize / 8);
    struct fid_mr *mr = NULL;

    int reg(Node &n)
    {
        return fi_mr_reg(n.domain, mem.data(), kRegionSize, FI_REMOTE_READ | FI_REMOTE_WRITE, 0,
                         kKey, 0, &mr, NULL);
    }

    ~CqDataRegion()
    {
        if (mr != NULL) {
            EXPECT_EQ(0, fi_close(&mr->fid));
        }
    }
};

/* Nothing more on n's CQ, after progressing it and others a while. */
void expect_cq_empty(Node &n, std::vector<Node *> others)
{
    struct fi_cq_tagged_entry e;
    for (int i = 0; i < 200; ++i) {
        for (Node *o : others) (void)fi_cq_read(o->cq, &e, 0);
        ASSERT_EQ(-FI_EAGAIN, fi_cq_read(n.cq, &e, 1)) << "unexpected entry, flags 0x" << std::hex
                                                       << e.flags << " data 0x" << e.data;
    }
}

/* ---------------------------------------------------------------- one process */

class OfiProviderCqData : public OfiProvider {
protected:
    Node a, b;   /* a writes, b is the target */
    CqDataRegion region;
    fi_addr_t a_to_b = FI_ADDR_NOTAVAIL;
    struct fi_context ctx;

    void SetUp() override
    {
        open_node(a);
        open_node(b);
        a_to_b = a.insert(b.name);
        ASSERT_EQ(0, region.reg(b));
    }

    /* The target's next entry: a remote write with data. */
    uint64_t target_entry()
    {
        struct fi_cq_tagged_entry e;
        EXPECT_EQ(1, wait_cq(b, {&a}, &e));
        EXPECT_EQ(kCqDataFlags, e.flags);
        EXPECT_EQ(nullptr, e.op_context);
        return e.data;
    }
};

TEST_F(OfiProviderCqData, GetinfoAdvertisesCqDataAndReservesBit63ForWriteTargets)
{
    EXPECT_EQ(4u, b.info->domain_attr->cq_data_size);
    EXPECT_EQ(0u, b.info->mode & FI_RX_CQ_DATA);   /* no receive is consumed */
    /* A write target tags with 63 bits: bit 63 carries the data's event message. */
    EXPECT_EQ(0u, b.info->ep_attr->mem_tag_format & (1ull << 63));

    struct fi_info *hints = ompi_hints(), *info = NULL;
    hints->caps = kCaps;
    hints->mode |= FI_RX_CQ_DATA;   /* offered, not needed */
    ASSERT_EQ(0, getinfo(hints, &info));
    EXPECT_EQ(0u, info->mode & FI_RX_CQ_DATA);
    fi_freeinfo(info);
    hints->ep_attr->mem_tag_format = ~0ull;   /* all 64 bits: not with a write target */
    EXPECT_EQ(-FI_ENODATA, getinfo(hints, &info));
    /* An initiator only (no FI_REMOTE_WRITE) keeps all 64. */
    hints->caps = FI_TAGGED | FI_RMA | FI_WRITE | FI_READ;
    ASSERT_EQ(0, getinfo(hints, &info));
    EXPECT_EQ(1ull << 63, info->ep_attr->mem_tag_format & (1ull << 63));
    fi_freeinfo(info);
    fi_freeinfo(hints);
}

TEST_F(OfiProviderCqData, TargetEntryCarriesDataAfterTheDataAndTakesNoReceive)
{
    /* A receive posted at the target stays for the message meant for it. */
    uint64_t got = 0, sent = 77;
    struct fi_context rctx, sctx;
    ASSERT_EQ(0, fi_trecv(b.ep, &got, sizeof(got), NULL, FI_ADDR_UNSPEC, 5, 0, &rctx));

    std::vector<uint64_t> src(32);
    for (size_t i = 0; i < src.size(); ++i) src[i] = 0x1000 + i;
    ASSERT_EQ(0, fi_writedata(a.ep, src.data(), 256, NULL, 0xfeedbeef, a_to_b, 64, kKey, &ctx));
    EXPECT_EQ(0xfeedbeefu, target_entry());
    /* The entry came after the data: it is all there now. */
    EXPECT_EQ(0, memcmp(src.data(), &region.mem[8], 256));

    struct fi_cq_tagged_entry e;
    ASSERT_EQ(1, wait_cq(a, {&b}, &e));
    EXPECT_EQ((uint64_t)(FI_RMA | FI_WRITE), e.flags);
    EXPECT_EQ(&ctx, e.op_context);
    EXPECT_EQ(1u, fi_cntr_read(a.wr_cntr));
    expect_cq_empty(b, {&a});

    ASSERT_EQ(0, fi_tsend(a.ep, &sent, sizeof(sent), NULL, a_to_b, 5, &sctx));
    ASSERT_EQ(1, wait_cq(b, {&a}, &e));
    EXPECT_EQ(&rctx, e.op_context);
    EXPECT_EQ((uint64_t)(FI_TAGGED | FI_RECV), e.flags);
    EXPECT_EQ(77u, got);
}

TEST_F(OfiProviderCqData, EachInjectAndMsgWriteGivesExactlyOneEntry)
{
    const int n = 20;
    std::set<uint64_t> seen;
    for (int i = 0; i < n; ++i) {
        uint64_t v = 100 + i, w = 200 + i;
        ASSERT_EQ(0, fi_inject_writedata(a.ep, &v, 8, 2 * i, a_to_b, 0, kKey));
        struct iovec iov = {&w, 8};
        struct fi_rma_iov rio = {8, 8, kKey};
        struct fi_msg_rma msg = {&iov, NULL, 1, a_to_b, &rio, 1, &ctx, (uint64_t)(2 * i + 1)};
        ASSERT_EQ(0, fi_writemsg(a.ep, &msg, FI_COMPLETION | FI_REMOTE_CQ_DATA));
        struct fi_cq_tagged_entry e;
        ASSERT_EQ(1, wait_cq(a, {&b}, &e));   /* the msg form's; the inject has none */
        EXPECT_EQ((uint64_t)(FI_RMA | FI_WRITE), e.flags);
    }
    for (int i = 0; i < 2 * n; ++i) {
        EXPECT_TRUE(seen.insert(target_entry()).second) << "a data value twice";
    }
    EXPECT_EQ((size_t)(2 * n), seen.size());
    EXPECT_EQ(0u, *seen.begin());
    EXPECT_EQ((uint64_t)(2 * n - 1), *seen.rbegin());
    expect_cq_empty(b, {&a});
    EXPECT_EQ((uint64_t)(2 * n), fi_cntr_read(a.wr_cntr));
    EXPECT_EQ((uint64_t)(100 + n - 1), region.mem[0]);
    EXPECT_EQ((uint64_t)(200 + n - 1), region.mem[1]);
}

TEST_F(OfiProviderCqData, BadCallsAreRefusedAndSendNothing)
{
    uint64_t v = 1;
    /* Wider than cq_data_size (4 bytes). */
    EXPECT_EQ(-FI_EINVAL, fi_writedata(a.ep, &v, 8, NULL, 1ull << 32, a_to_b, 0, kKey, &ctx));
    EXPECT_EQ(-FI_EINVAL, fi_inject_writedata(a.ep, &v, 8, ~0ull, a_to_b, 0, kKey));
    /* Data with a read. */
    struct iovec iov = {&v, 8};
    struct fi_rma_iov rio = {0, 8, kKey};
    struct fi_msg_rma msg = {&iov, NULL, 1, a_to_b, &rio, 1, &ctx, 3};
    EXPECT_EQ(-FI_EINVAL, fi_readmsg(a.ep, &msg, FI_REMOTE_CQ_DATA));
    /* An endpoint without FI_RMA has no RMA at all. */
    Node c;
    open_node(c, FI_TAGGED);
    fi_addr_t c_to_b = c.insert(b.name);
    EXPECT_EQ(-FI_ENOSYS, fi_writedata(c.ep, &v, 8, NULL, 3, c_to_b, 0, kKey, &ctx));
    EXPECT_EQ(-FI_ENOSYS, fi_inject_writedata(c.ep, &v, 8, 3, c_to_b, 0, kKey));

    expect_cq_empty(b, {&a, &c});
    expect_cq_empty(a, {&b});
    EXPECT_EQ(0u, fi_cntr_read(a.wr_cntr));
    EXPECT_EQ(0u, region.mem[0]);
}

TEST_F(OfiProviderCqData, FailedWriteGivesTheTargetNoEntry)
{
    uint64_t v = 9;
    struct fi_cq_tagged_entry e;
    struct fi_cq_err_entry err;
    ASSERT_EQ(0, fi_writedata(a.ep, &v, 8, NULL, 5, a_to_b, kRegionSize, kKey, &ctx));
    ASSERT_EQ(-FI_EAVAIL, wait_cq(a, {&b}, &e, &err));
    EXPECT_EQ(FI_EACCES, err.err);
    expect_cq_empty(b, {&a});
    ASSERT_EQ(0, fi_writedata(a.ep, &v, 8, NULL, 6, a_to_b, 0, kKey, &ctx));
    EXPECT_EQ(6u, target_entry());
    EXPECT_EQ(9u, region.mem[0]);
}

/* With FI_RMA_EVENT at the target, a write with data counts once and is entered once. */
TEST_F(OfiProviderCqData, RmaEventCountersCountAWriteWithDataOnce)
{
    Node t;
    t.caps = kCaps | FI_RMA_EVENT;
    t.mr_mode = FI_MR_LOCAL;
    t.remote_counters = true;
    ASSERT_EQ(0, t.open());
    CqDataRegion treg;
    struct fid_cntr *writes = NULL;
    struct fi_cntr_attr attr = {};
    attr.events = FI_CNTR_EVENTS_COMP;
    ASSERT_EQ(0, treg.reg(t));
    ASSERT_EQ(0, fi_cntr_open(t.domain, &attr, &writes, NULL));
    ASSERT_EQ(0, fi_mr_bind(treg.mr, &writes->fid, FI_REMOTE_WRITE));
    fi_addr_t a_to_t = a.insert(t.name);
    const int n = 10;
    for (int i = 0; i < n; ++i) {
        uint64_t v = i + 1;
        ASSERT_EQ(0, fi_writedata(a.ep, &v, 8, NULL, 40 + i, a_to_t, 0, kKey, &ctx));
        struct fi_cq_tagged_entry e;
        ASSERT_EQ(1, wait_cq(a, {&t}, &e));
        ASSERT_EQ(1, wait_cq(t, {&a}, &e));
        EXPECT_EQ(kCqDataFlags, e.flags);
        EXPECT_EQ((uint64_t)(40 + i), e.data);
    }
    ASSERT_EQ(0, fi_cntr_wait(writes, n, 20000));
    expect_cq_empty(t, {&a});
    EXPECT_EQ((uint64_t)n, fi_cntr_read(writes));
    EXPECT_EQ((uint64_t)n, fi_cntr_read(t.rwr_cntr));
    EXPECT_EQ(0u, fi_cntr_read(t.rrd_cntr));
    EXPECT_EQ((uint64_t)n, treg.mem[0]);
    EXPECT_EQ(0, fi_close(&treg.mr->fid));   /* before the counter bound to it */
    treg.mr = NULL;
    EXPECT_EQ(0, fi_close(&writes->fid));
}

/* The child of the test below: data wider than cq_data_size, refused with a log line. */
int wide_data_child()
{
    setenv("FI_LOG_LEVEL", "warn", 1);
    Node a, b;
    a.caps = b.caps = kCaps;
    if ((a.open() != 0) || (b.open() != 0)) return 2;
    fi_addr_t dest = a.insert(b.name);
    uint64_t v = 0;
    if (fi_writedata(a.ep, &v, 8, NULL, 0x123456789ull, dest, 0, kKey, NULL) != -FI_EINVAL) {
        return 3;
    }
    fflush(stderr);
    return 0;
}

class OfiProviderCqDataLog : public OfiProvider {};

TEST_F(OfiProviderCqDataLog, WideDataLogLineNamesTheValue)
{
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(_exit(wide_data_child()), ::testing::ExitedWithCode(0),
                "remote CQ data 0x123456789 does not fit cq_data_size 4\n");
}

/* ---------------------------------------------------------------- two processes */

const int kRounds = 400;
const size_t kSlots = kRegionSize / 8;

/*
 * The initiator: write i + 1 into slot i % kSlots with data i, every other
 * one injected, up to 16 in flight, then wait until the target says it is done.
 */
int writer_main(int rd)
{
    char peer[64];
    if (read(rd, peer, sizeof(peer)) != (ssize_t)sizeof(peer)) return 9;
    Node n;
    n.caps = kCaps;
    n.mr_mode = FI_MR_LOCAL;
    n.rma_counters = true;
    if (n.open() != 0) return 10;
    fi_addr_t p = n.insert(peer);
    std::vector<uint64_t> vals(kRounds);
    std::vector<struct fi_context> ctxs(kRounds);
    struct fi_cq_tagged_entry e;
    int inflight = 0;
    for (int i = 0; i < kRounds; ++i) {
        vals[i] = i + 1;
        uint64_t off = 8 * (i % kSlots);
        ssize_t ret;
        do {
            ret = (i % 2) ? fi_inject_writedata(n.ep, &vals[i], 8, i, p, off, kKey) :
                            fi_writedata(n.ep, &vals[i], 8, NULL, i, p, off, kKey, &ctxs[i]);
            if (ret == -FI_EAGAIN) (void)fi_cq_read(n.cq, &e, 0);
        } while (ret == -FI_EAGAIN);
        if (ret != 0) return 11;
        if (!(i % 2) && (++inflight == 16)) {
            for (; inflight > 0; --inflight) {
                if (wait_cq(n, {}, &e) != 1) return 12;
            }
        }
    }
    for (; inflight > 0; --inflight) {
        if (wait_cq(n, {}, &e) != 1) return 13;
    }
    if (fi_cntr_wait(n.wr_cntr, kRounds, 20000) != 0) return 14;
    fcntl(rd, F_SETFL, O_NONBLOCK);
    for (;;) {   /* progress (the last events may still be leaving) until the target is done */
        char done;
        (void)fi_cq_read(n.cq, &e, 0);
        ssize_t got = read(rd, &done, 1);
        if (got == 0) return 15;
        if (got == 1) return 0;
    }
}

class OfiProviderCqDataXproc : public OfiProvider,
                               public ::testing::WithParamInterface<std::string> {};

/* Every write's entry arrives once, with its data, never before its data. */
TEST_P(OfiProviderCqDataXproc, EveryWriteIsEnteredOnceAfterItsData)
{
    EnvGuard env("AXON_TLS", GetParam().c_str());
    use_build_provider();
    Child c;
    c.start([=](int rd, int wr) { _exit(writer_main(rd)); });
    Node t;
    open_node(t);
    CqDataRegion region;
    ASSERT_EQ(0, region.reg(t));
    ASSERT_EQ((ssize_t)sizeof(t.name), write(c.to[1], t.name, sizeof(t.name)));
    volatile uint64_t *mem = region.mem.data();
    std::vector<int> seen(kRounds, 0);
    uint64_t early = 0;
    for (int got = 0; got < kRounds; ++got) {
        struct fi_cq_tagged_entry e;
        ASSERT_EQ(1, wait_cq(t, {}, &e)) << "stuck after " << got;
        ASSERT_EQ(kCqDataFlags, e.flags);
        ASSERT_LT(e.data, (uint64_t)kRounds);
        ++seen[e.data];
        if (mem[e.data % kSlots] < e.data + 1) {
            ++early;   /* entered before its data was there (later writes only add) */
        }
    }
    expect_cq_empty(t, {});
    EXPECT_EQ(0u, early);
    for (int i = 0; i < kRounds; ++i) {
        EXPECT_EQ(1, seen[i]) << "data " << i;
    }
    ASSERT_EQ(1, write(c.to[1], "q", 1));
    c.finish();
}

INSTANTIATE_TEST_SUITE_P(Lanes, OfiProviderCqDataXproc, ::testing::Values("shm", "tcp"),
                         [](const ::testing::TestParamInfo<std::string> &p) { return p.param; });

}  // namespace
