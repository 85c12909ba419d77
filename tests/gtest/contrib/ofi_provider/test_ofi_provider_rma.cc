/*
 * The provider's RMA (FI_RMA): fi_mr_reg with remote access in both
 * registration modes clients use (scalable: offsets and requested keys, as
 * Sandia OpenSHMEM; basic: virtual addresses and provider keys, as Open
 * MPI's btl ofi), reads and writes byte-exact, edges, bad keys, injects,
 * iov forms, fences, counters, stale keys, two processes over shm and
 * tcp, and a killed target whose memory was mapped here.
 */
#include "ofi_test_node.h"

#include "env_guard.h"
#include "harness.h"

#include <rdma/fi_rma.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

namespace {

const size_t kRegion = 4096;
const uint64_t kRequestedKey = 7;
const uint64_t kRmaCaps = FI_TAGGED | FI_DIRECTED_RECV | FI_SOURCE | FI_RMA;

/* mr_mode hints: "scalable" offers nothing (offsets, requested keys); "basic" what btl ofi offers. */
int mr_mode_of(const std::string &mode)
{
    return (mode == "basic") ? (FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY) : FI_MR_LOCAL;
}

/* A node that exposes a region for remote access, and how peers address it. */
struct RmaTarget {
    struct fid_mr *mr = NULL;
    uint64_t key = 0, base = 0;    /* remote address of the region's first byte */

    int reg(Node &n, void *buf, size_t len, uint64_t requested = kRequestedKey)
    {
        int ret = fi_mr_reg(n.domain, buf, len, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, requested,
                            0, &mr, NULL);
        if (ret != 0) return ret;
        key  = fi_mr_key(mr);
        base = (n.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)buf : 0;
        return 0;
    }

    void close()
    {
        if (mr != NULL) {
            EXPECT_EQ(0, fi_close(&mr->fid));
        }
        mr = NULL;
    }

    ~RmaTarget() { close(); }
};

void open_rma_node(Node &n, const std::string &mode)
{
    n.caps         = kRmaCaps;
    n.mr_mode      = mr_mode_of(mode);
    n.rma_counters = true;
    ASSERT_EQ(0, n.open());
}

void fill(std::vector<char> &v, int seed)
{
    for (size_t i = 0; i < v.size(); ++i) v[i] = (char)(seed + i * 7);
}

/* ---------------------------------------------------------------- one process */

class OfiProviderRma : public OfiProvider, public ::testing::WithParamInterface<std::string> {
protected:
    Node a, b;
    RmaTarget t;
    std::vector<char> region = std::vector<char>(kRegion);
    fi_addr_t a_to_b = FI_ADDR_NOTAVAIL;
    struct fi_context ctx;

    void SetUp() override
    {
        open_rma_node(a, GetParam());
        open_rma_node(b, GetParam());
        a_to_b = a.insert(b.name);
        ASSERT_EQ(0, t.reg(b, region.data(), region.size()));
    }

    /* The one entry of an RMA on a: 0 on success, else the error entry's err. */
    int complete(uint64_t want_flags)
    {
        struct fi_cq_tagged_entry e;
        struct fi_cq_err_entry err;
        ssize_t ret = wait_cq(a, {&b}, &e, &err);
        if (ret == -FI_EAVAIL) {
            EXPECT_EQ(&ctx, err.op_context);
            EXPECT_EQ(want_flags, err.flags & want_flags);
            return err.err;
        }
        EXPECT_EQ(1, ret);
        EXPECT_EQ(&ctx, e.op_context);
        EXPECT_EQ(want_flags, e.flags);
        return ret == 1 ? 0 : -1;
    }

    int write(const void *buf, size_t len, uint64_t off)
    {
        EXPECT_EQ(0, fi_write(a.ep, buf, len, NULL, a_to_b, t.base + off, t.key, &ctx));
        return complete(FI_RMA | FI_WRITE);
    }

    int read(void *buf, size_t len, uint64_t off)
    {
        EXPECT_EQ(0, fi_read(a.ep, buf, len, NULL, a_to_b, t.base + off, t.key, &ctx));
        return complete(FI_RMA | FI_READ);
    }
};

TEST_P(OfiProviderRma, GetinfoAnswersTheModeAndRmaAttributes)
{
    uint64_t want = (GetParam() == "basic") ? (FI_MR_VIRT_ADDR | FI_MR_PROV_KEY) : 0;
    EXPECT_EQ(want, (uint64_t)a.info->domain_attr->mr_mode);
    EXPECT_EQ(FI_RMA, a.info->caps & FI_RMA);
    EXPECT_EQ((uint64_t)(FI_READ | FI_WRITE), a.info->tx_attr->caps & (FI_READ | FI_WRITE));
    EXPECT_EQ((uint64_t)(FI_REMOTE_READ | FI_REMOTE_WRITE),
              a.info->rx_attr->caps & (FI_REMOTE_READ | FI_REMOTE_WRITE));
    EXPECT_EQ(8u, a.info->domain_attr->mr_key_size);
    EXPECT_LE(1u, a.info->tx_attr->rma_iov_limit);
    if (GetParam() == "scalable") {
        EXPECT_EQ(kRequestedKey, t.key);
    }
}

TEST_P(OfiProviderRma, WriteThenReadBackIsByteExactToTheEdges)
{
    std::vector<char> src(kRegion), back(kRegion);
    fill(src, 3);
    ASSERT_EQ(0, write(src.data(), kRegion, 0));
    EXPECT_EQ(0, memcmp(src.data(), region.data(), kRegion));
    ASSERT_EQ(0, read(back.data(), kRegion, 0));
    EXPECT_EQ(0, memcmp(src.data(), back.data(), kRegion));

    /* First and last byte alone, then the last 100. */
    char one = 0x5a, got = 0;
    ASSERT_EQ(0, write(&one, 1, 0));
    EXPECT_EQ(0x5a, region[0]);
    ASSERT_EQ(0, write(&one, 1, kRegion - 1));
    EXPECT_EQ(0x5a, region[kRegion - 1]);
    ASSERT_EQ(0, read(&got, 1, kRegion - 1));
    EXPECT_EQ(0x5a, got);
    fill(src, 11);
    ASSERT_EQ(0, write(src.data(), 100, kRegion - 100));
    EXPECT_EQ(0, memcmp(src.data(), &region[kRegion - 100], 100));
    EXPECT_EQ(0, memcmp(src.data(), &region[kRegion - 100], 100));

    /* Counters count each direction's messages. */
    EXPECT_EQ(4u, fi_cntr_read(a.wr_cntr));
    EXPECT_EQ(2u, fi_cntr_read(a.rd_cntr));
    EXPECT_EQ(0u, fi_cntr_readerr(a.wr_cntr));
}

TEST_P(OfiProviderRma, OutOfRangeIsAnErrorEntry)
{
    char two[2] = {1, 2};
    EXPECT_EQ(FI_EACCES, write(two, 2, kRegion - 1));
    EXPECT_EQ(FI_EACCES, read(two, 1, kRegion));
    EXPECT_EQ(1u, fi_cntr_readerr(a.wr_cntr));
    EXPECT_EQ(1u, fi_cntr_readerr(a.rd_cntr));
    EXPECT_EQ(0, region[kRegion - 1]);
    /* The key still works inside the region. */
    EXPECT_EQ(0, write(two, 2, kRegion - 2));
}

TEST_P(OfiProviderRma, UnknownKeyIsAnErrorEntry)
{
    char c = 1;
    ASSERT_EQ(0, fi_write(a.ep, &c, 1, NULL, a_to_b, t.base, t.key + 1000, &ctx));
    EXPECT_EQ(FI_EACCES, complete(FI_RMA | FI_WRITE));
    ASSERT_EQ(0, fi_read(a.ep, &c, 1, NULL, a_to_b, t.base, t.key + 1000, &ctx));
    EXPECT_EQ(FI_EACCES, complete(FI_RMA | FI_READ));
}

TEST_P(OfiProviderRma, InjectWriteBufferIsReusableAtOnce)
{
    std::vector<char> src(64);
    fill(src, 5);
    std::vector<char> want = src;
    ASSERT_EQ(0, fi_inject_write(a.ep, src.data(), src.size(), a_to_b, t.base + 128, t.key));
    memset(src.data(), 0, src.size());
    ASSERT_EQ(0, fi_cntr_wait(a.wr_cntr, 1, 20000));
    EXPECT_EQ(0, memcmp(want.data(), &region[128], want.size()));
    /* No CQ entry for an inject. */
    struct fi_cq_tagged_entry e;
    EXPECT_EQ(-FI_EAGAIN, fi_cq_read(a.cq, &e, 1));
    /* Over inject_size: refused. */
    std::vector<char> big(a.info->tx_attr->inject_size + 1);
    EXPECT_EQ(-FI_EMSGSIZE, fi_inject_write(a.ep, big.data(), big.size(), a_to_b, t.base, t.key));
}

TEST_P(OfiProviderRma, IovFormsScatterAndGather)
{
    std::vector<char> src(300);
    fill(src, 9);
    /* writev: three local pieces to one remote range. */
    struct iovec iov[3] = {{&src[0], 10}, {&src[10], 90}, {&src[100], 200}};
    ASSERT_EQ(0, fi_writev(a.ep, iov, NULL, 3, a_to_b, t.base + 1000, t.key, &ctx));
    ASSERT_EQ(0, complete(FI_RMA | FI_WRITE));
    EXPECT_EQ(0, memcmp(src.data(), &region[1000], 300));

    /* writemsg: two local pieces to three remote ranges (pieces cross ranges). */
    struct iovec two[2] = {{&src[0], 150}, {&src[150], 150}};
    struct fi_rma_iov rio[3] = {{t.base + 0, 100, t.key}, {t.base + 2000, 100, t.key},
                                {t.base + 3000, 100, t.key}};
    struct fi_msg_rma msg = {two, NULL, 2, a_to_b, rio, 3, &ctx, 0};
    ASSERT_EQ(0, fi_writemsg(a.ep, &msg, FI_COMPLETION));
    ASSERT_EQ(0, complete(FI_RMA | FI_WRITE));
    EXPECT_EQ(0, memcmp(&src[0], &region[0], 100));
    EXPECT_EQ(0, memcmp(&src[100], &region[2000], 100));
    EXPECT_EQ(0, memcmp(&src[200], &region[3000], 100));

    /* readmsg: the three ranges back into four local pieces. */
    std::vector<char> back(300, 0);
    struct iovec four[4] = {{&back[0], 50}, {&back[50], 120}, {&back[170], 30},
                            {&back[200], 100}};
    struct fi_msg_rma rmsg = {four, NULL, 4, a_to_b, rio, 3, &ctx, 0};
    ASSERT_EQ(0, fi_readmsg(a.ep, &rmsg, FI_COMPLETION));
    ASSERT_EQ(0, complete(FI_RMA | FI_READ));
    EXPECT_EQ(0, memcmp(src.data(), back.data(), 300));
    EXPECT_EQ(2u, fi_cntr_read(a.wr_cntr));
    EXPECT_EQ(1u, fi_cntr_read(a.rd_cntr));

    /* Local and remote sizes that differ, more remote iovecs than the limit: refused. */
    struct fi_rma_iov bad = {t.base, 299, t.key};
    struct fi_msg_rma bmsg = {two, NULL, 2, a_to_b, &bad, 1, &ctx, 0};
    EXPECT_EQ(-FI_EINVAL, fi_writemsg(a.ep, &bmsg, 0));
    std::vector<struct fi_rma_iov> many(a.info->tx_attr->rma_iov_limit + 1,
                                        {t.base, 1, t.key});
    struct fi_msg_rma mmsg = {two, NULL, 1, a_to_b, many.data(), many.size(), &ctx, 0};
    EXPECT_EQ(-FI_EINVAL, fi_writemsg(a.ep, &mmsg, 0));
}

TEST_P(OfiProviderRma, FencedReadSeesTheWriteBeforeIt)
{
    std::vector<char> src(kRegion), back(kRegion, 0);
    struct fi_context wctx, rctx;
    fill(src, 21);
    struct iovec wiov = {src.data(), kRegion}, riov = {back.data(), kRegion};
    struct fi_rma_iov rio = {t.base, kRegion, t.key};
    struct fi_msg_rma w = {&wiov, NULL, 1, a_to_b, &rio, 1, &wctx, 0};
    struct fi_msg_rma r = {&riov, NULL, 1, a_to_b, &rio, 1, &rctx, 0};
    ASSERT_EQ(0, fi_writemsg(a.ep, &w, FI_COMPLETION | FI_INJECT_COMPLETE));
    ASSERT_EQ(0, fi_readmsg(a.ep, &r, FI_COMPLETION | FI_FENCE));
    struct fi_cq_tagged_entry e;
    bool got_w = false, got_r = false;
    while (!(got_w && got_r)) {
        ASSERT_EQ(1, wait_cq(a, {&b}, &e));
        got_w |= (e.op_context == &wctx);
        got_r |= (e.op_context == &rctx);
    }
    EXPECT_EQ(0, memcmp(src.data(), back.data(), kRegion));
}

TEST_P(OfiProviderRma, KeysAreUniqueInADomain)
{
    std::vector<char> other(64);
    RmaTarget t2;
    if (GetParam() == "scalable") {
        EXPECT_EQ(-FI_ENOKEY, t2.reg(b, other.data(), other.size(), kRequestedKey));
        ASSERT_EQ(0, t2.reg(b, other.data(), other.size(), kRequestedKey + 1));
        EXPECT_EQ(kRequestedKey + 1, t2.key);
    } else {
        ASSERT_EQ(0, t2.reg(b, other.data(), other.size(), kRequestedKey));
        EXPECT_NE(t.key, t2.key);
    }
    /* Each key reaches its own region. */
    char c = 4;
    ASSERT_EQ(0, fi_write(a.ep, &c, 1, NULL, a_to_b, t2.base + 63, t2.key, &ctx));
    ASSERT_EQ(0, complete(FI_RMA | FI_WRITE));
    EXPECT_EQ(4, other[63]);
    EXPECT_EQ(0, region[63]);
}

INSTANTIATE_TEST_SUITE_P(MrModes, OfiProviderRma, ::testing::Values("scalable", "basic"),
                         [](const ::testing::TestParamInfo<std::string> &p) { return p.param; });

/* The pre-1.5 API's FI_MR_BASIC / FI_MR_SCALABLE are modes: echoed, and followed. */
class OfiProviderRmaOldApi : public OfiProvider {};

TEST_F(OfiProviderRmaOldApi, BasicAndScalableModesAreEchoedAndFollowed)
{
    for (int mode : {FI_MR_BASIC, FI_MR_SCALABLE}) {
        struct fi_info *hints = ompi_hints(), *info = NULL;
        struct fid_fabric *fabric;
        struct fid_domain *domain;
        struct fid_mr *mr;
        char buf[64];
        hints->caps = kRmaCaps;
        hints->domain_attr->mr_mode = (enum fi_mr_mode)mode;
        use_build_provider();
        ASSERT_EQ(0, fi_getinfo(FI_VERSION(1, 4), NULL, NULL, 0, hints, &info));
        EXPECT_EQ(mode, (int)info->domain_attr->mr_mode);
        ASSERT_EQ(0, fi_fabric(info->fabric_attr, &fabric, NULL));
        ASSERT_EQ(0, fi_domain(fabric, info, &domain, NULL));
        ASSERT_EQ(0, fi_mr_reg(domain, buf, sizeof(buf), FI_REMOTE_WRITE, 0, 1234, 0, &mr, NULL));
        if (mode == FI_MR_BASIC) {
            EXPECT_NE(1234u, fi_mr_key(mr));   /* the provider's key */
        } else {
            EXPECT_EQ(1234u, fi_mr_key(mr));
        }
        EXPECT_EQ(0, fi_close(&mr->fid));
        EXPECT_EQ(0, fi_close(&domain->fid));
        EXPECT_EQ(0, fi_close(&fabric->fid));
        fi_freeinfo(info);
        fi_freeinfo(hints);
    }
}

/* The child of the test below: an RMA with a key b never registered. */
int unknown_key_child()
{
    setenv("FI_LOG_LEVEL", "warn", 1);
    Node a, b;
    a.caps = b.caps = kRmaCaps;
    if ((a.open() != 0) || (b.open() != 0)) return 2;
    fi_addr_t dest = a.insert(b.name);
    char c = 0;
    struct fi_cq_tagged_entry e;
    struct fi_cq_err_entry err;
    if (fi_write(a.ep, &c, 1, NULL, dest, 0, 4242, NULL) != 0) return 3;
    if (wait_cq(a, {&b}, &e, &err) != -FI_EAVAIL) return 4;
    if (err.err != FI_EACCES) return 5;
    fflush(stderr);
    return 0;
}

/* An unknown key's error entry comes with a log line naming the key (FI_LOG_LEVEL: child). */
class OfiProviderRmaLog : public OfiProvider {};

TEST_F(OfiProviderRmaLog, UnknownKeyLogLineNamesTheKey)
{
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(_exit(unknown_key_child()), ::testing::ExitedWithCode(0),
                "RMA key 4242 of [^\n]*: no region registered for remote access under it\n");
}

/* ---------------------------------------------------------------- two processes */

/* A target process tells its initiator (over a pipe) its name, its region's key and base. */
int send_target(int wr, const Node &n, const RmaTarget &t)
{
    return ((write(wr, n.name, sizeof(n.name)) == (ssize_t)sizeof(n.name)) &&
            (write(wr, &t.key, 8) == 8) && (write(wr, &t.base, 8) == 8)) ? 0 : -1;
}

/* The initiator's side: the target inserted into n (*p), its key and base. */
void recv_target(int rd, Node &n, fi_addr_t *p, uint64_t *key, uint64_t *base)
{
    char peer[64];
    ASSERT_EQ((ssize_t)sizeof(peer), read(rd, peer, sizeof(peer)));
    ASSERT_EQ(8, read(rd, key, 8));
    ASSERT_EQ(8, read(rd, base, 8));
    *p = n.insert(peer);
}

/*
 * The target process: registers a region, tells the initiator its name, key
 * and base, then progresses while it serves commands: 'c' checksum of the
 * region, 'x' close the region, 'r' register it again (key and base back),
 * 'q' quit.
 */
int rma_target_main(const std::string &mode, int rd, int wr)
{
    Node n;
    open_rma_node(n, mode);
    if (::testing::Test::HasFatalFailure()) return 2;
    std::vector<char> region(kRegion, 0);
    RmaTarget t;
    if (t.reg(n, region.data(), region.size()) != 0) return 3;
    if (send_target(wr, n, t) != 0) return 4;
    fcntl(rd, F_SETFL, O_NONBLOCK);
    struct fi_cq_tagged_entry e;
    for (;;) {
        (void)fi_cq_read(n.cq, &e, 0);   /* progress: AM lanes need the target's */
        char cmd;
        ssize_t got = read(rd, &cmd, 1);
        if (got == 0) return 6;
        if (got < 0) continue;
        if (cmd == 'c') {
            uint64_t sum = 0;
            for (size_t i = 0; i < kRegion; ++i) sum = sum * 31 + (unsigned char)region[i];
            if (write(wr, &sum, 8) != 8) return 7;
        } else if (cmd == 'x') {
            t.close();
            if (write(wr, "k", 1) != 1) return 8;
        } else if (cmd == 'r') {
            if (t.reg(n, region.data(), region.size()) != 0) return 9;
            if (write(wr, &t.key, 8) != 8 || write(wr, &t.base, 8) != 8) return 10;
        } else {
            return 0;
        }
    }
}

/* lane = transport + "_" + registration mode. */
class OfiProviderRmaXproc : public OfiProvider, public ::testing::WithParamInterface<std::string> {};

TEST_P(OfiProviderRmaXproc, WriteReadInjectAndStaleKeyAcrossProcesses)
{
    std::string lane = GetParam(), tls = lane.substr(0, lane.find('_'));
    std::string mode = lane.substr(lane.find('_') + 1);
    EnvGuard env("AXON_TLS", tls.c_str());
    int to_child[2], to_parent[2];
    ASSERT_EQ(0, pipe(to_child));
    pid_t pid = fork_peer(to_parent);
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        _exit(rma_target_main(mode, to_child[0], to_parent[1]));
    }
    Node n;
    open_rma_node(n, mode);
    uint64_t key = 0, base = 0, sum;
    fi_addr_t p = FI_ADDR_NOTAVAIL;
    ASSERT_NO_FATAL_FAILURE(recv_target(to_parent[0], n, &p, &key, &base));
    struct fi_context ctx;
    struct fi_cq_tagged_entry e;
    struct fi_cq_err_entry err;

    std::vector<char> src(kRegion), back(kRegion, 0);
    fill(src, 17);
    ASSERT_EQ(0, fi_write(n.ep, src.data(), kRegion, NULL, p, base, key, &ctx));
    ASSERT_EQ(1, wait_cq(n, {}, &e));
    /* The write completed: its data is visible at the target. */
    uint64_t want = 0;
    for (size_t i = 0; i < kRegion; ++i) want = want * 31 + (unsigned char)src[i];
    ASSERT_EQ(1, write(to_child[1], "c", 1));
    ASSERT_EQ(8, read(to_parent[0], &sum, 8));
    EXPECT_EQ(want, sum);
    ASSERT_EQ(0, fi_read(n.ep, back.data(), kRegion, NULL, p, base, key, &ctx));
    ASSERT_EQ(1, wait_cq(n, {}, &e));
    EXPECT_EQ(0, memcmp(src.data(), back.data(), kRegion));

    /* An inject, the source overwritten at once; the last byte alone. */
    std::vector<char> small(64), keep;
    fill(small, 99);
    keep = small;
    ASSERT_EQ(0, fi_inject_write(n.ep, small.data(), 64, p, base + kRegion - 64, key));
    memset(small.data(), 0, 64);
    ASSERT_EQ(0, fi_cntr_wait(n.wr_cntr, 2, 20000));
    ASSERT_EQ(0, fi_read(n.ep, back.data(), 64, NULL, p, base + kRegion - 64, key, &ctx));
    ASSERT_EQ(1, wait_cq(n, {}, &e));
    EXPECT_EQ(0, memcmp(keep.data(), back.data(), 64));

    /* A read fenced behind a write that completes early (FI_INJECT_COMPLETE: no flush)
     * sees the write's data. */
    fill(src, 41);
    struct fi_context wctx, rctx;
    struct iovec wiov = {src.data(), kRegion}, riov = {back.data(), kRegion};
    struct fi_rma_iov rio = {base, kRegion, key};
    struct fi_msg_rma wmsg = {&wiov, NULL, 1, p, &rio, 1, &wctx, 0};
    struct fi_msg_rma rmsg = {&riov, NULL, 1, p, &rio, 1, &rctx, 0};
    ASSERT_EQ(0, fi_writemsg(n.ep, &wmsg, FI_COMPLETION | FI_INJECT_COMPLETE));
    ASSERT_EQ(0, fi_readmsg(n.ep, &rmsg, FI_COMPLETION | FI_FENCE));
    for (int got = 0; got < 2; ++got) ASSERT_EQ(1, wait_cq(n, {}, &e));
    EXPECT_EQ(0, memcmp(src.data(), back.data(), kRegion));

    /* 64 writes in flight at once, each its own entry, then the whole region checked. */
    fill(src, 57);
    std::vector<struct fi_context> ctxs(64);
    for (size_t i = 0; i < 64; ++i) {
        ASSERT_EQ(0, fi_write(n.ep, &src[i * 64], 64, NULL, p, base + i * 64, key, &ctxs[i]));
    }
    for (int got = 0; got < 64; ++got) ASSERT_EQ(1, wait_cq(n, {}, &e));
    want = 0;
    for (size_t i = 0; i < kRegion; ++i) want = want * 31 + (unsigned char)src[i];
    ASSERT_EQ(1, write(to_child[1], "c", 1));
    ASSERT_EQ(8, read(to_parent[0], &sum, 8));
    EXPECT_EQ(want, sum);

    /* Out of range: an error entry. */
    ASSERT_EQ(0, fi_read(n.ep, back.data(), 2, NULL, p, base + kRegion - 1, key, &ctx));
    ASSERT_EQ(-FI_EAVAIL, wait_cq(n, {}, &e, &err));
    EXPECT_EQ(FI_EACCES, err.err);

    /* The target closes the region: the cached key is stale. */
    char k;
    ASSERT_EQ(1, write(to_child[1], "x", 1));
    ASSERT_EQ(1, read(to_parent[0], &k, 1));
    ASSERT_EQ(0, fi_write(n.ep, src.data(), 8, NULL, p, base, key, &ctx));
    ASSERT_EQ(-FI_EAVAIL, wait_cq(n, {}, &e, &err));
    EXPECT_EQ(FI_EACCES, err.err);
    EXPECT_EQ(67u, fi_cntr_read(n.wr_cntr));
    EXPECT_EQ(1u, fi_cntr_readerr(n.wr_cntr));

    /* Registered again (the same requested key in scalable mode, a new one in basic): the
     * stale key was forgotten, so the next write resolves it afresh. */
    ASSERT_EQ(1, write(to_child[1], "r", 1));
    ASSERT_EQ(8, read(to_parent[0], &key, 8));
    ASSERT_EQ(8, read(to_parent[0], &base, 8));
    fill(src, 23);
    want = 0;
    for (size_t i = 0; i < kRegion; ++i) want = want * 31 + (unsigned char)src[i];
    ASSERT_EQ(0, fi_write(n.ep, src.data(), kRegion, NULL, p, base, key, &ctx));
    ASSERT_EQ(1, wait_cq(n, {}, &e));
    ASSERT_EQ(1, write(to_child[1], "c", 1));
    ASSERT_EQ(8, read(to_parent[0], &sum, 8));
    EXPECT_EQ(want, sum);

    ASSERT_EQ(1, write(to_child[1], "q", 1));
    int status = 0;
    ASSERT_EQ(pid, waitpid(pid, &status, 0));
    EXPECT_TRUE(WIFEXITED(status) && (WEXITSTATUS(status) == 0)) << "child status " << status;
    for (int fd : {to_child[0], to_child[1], to_parent[0], to_parent[1]}) ::close(fd);
}

/*
 * A target whose region is reached by loads and stores here (shm, scalable mode: its
 * pages shared, the region page-aligned) is killed: once its failure is known, writes
 * and reads to it end in error entries, never in a success that wrote its orphaned
 * pages. Before the kill the same write succeeds (so the direct path was taken).
 */
TEST(OfiProviderRmaFault, KilledTargetOfMappedMemoryFailsItsAccesses)
{
    EnvGuard env("AXON_TLS", "shm");
    int to_parent[2];
    pid_t pid = fork_peer(to_parent);
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        Node n;
        open_rma_node(n, "scalable");
        void *m = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                       0);
        RmaTarget t;
        if ((m == MAP_FAILED) || (t.reg(n, m, 2 * 4096) != 0)) _exit(3);
        if (send_target(to_parent[1], n, t) != 0) _exit(4);
        for (;;) pause();   /* until killed */
    }
    Node n;
    open_rma_node(n, "scalable");
    uint64_t key = 0, base = 0;
    fi_addr_t p = FI_ADDR_NOTAVAIL;
    ASSERT_NO_FATAL_FAILURE(recv_target(to_parent[0], n, &p, &key, &base));
    struct fi_context ctx;
    struct fi_cq_tagged_entry e;
    struct fi_cq_err_entry err;
    char buf[64] = {1, 2, 3};

    ASSERT_EQ(0, fi_write(n.ep, buf, sizeof(buf), NULL, p, base, key, &ctx));
    ASSERT_EQ(1, wait_cq(n, {}, &e)) << "a write to the live target";
    ASSERT_EQ(0, kill(pid, SIGKILL));
    int status = 0;
    ASSERT_EQ(pid, waitpid(pid, &status, 0));
    double until = axon_test_time() + 10.0;
    ssize_t ret = 1;
    while ((ret == 1) && (axon_test_time() < until)) {
        ASSERT_EQ(0, fi_write(n.ep, buf, sizeof(buf), NULL, p, base, key, &ctx));
        ret = wait_cq(n, {}, &e, &err);
    }
    ASSERT_EQ(-FI_EAVAIL, ret) << "writes to a killed target kept succeeding";
    EXPECT_NE(0, err.err);
    ASSERT_EQ(0, fi_read(n.ep, buf, sizeof(buf), NULL, p, base, key, &ctx));
    EXPECT_EQ(-FI_EAVAIL, wait_cq(n, {}, &e, &err)) << "a read from a killed target";
    axon_test_remove_shm_of(pid);
    ::close(to_parent[0]);
    ::close(to_parent[1]);
}

INSTANTIATE_TEST_SUITE_P(Lanes, OfiProviderRmaXproc,
                         ::testing::Values("shm_scalable", "shm_basic", "tcp_scalable",
                                           "tcp_basic"),
                         [](const ::testing::TestParamInfo<std::string> &p) { return p.param; });

}  // namespace
