/*
 * iovecs through the libfabric provider "axon": fi_tsendv/fi_trecvv,
 * fi_tsendmsg/fi_trecvmsg and their untagged forms with up to iov_limit
 * iovecs on either side, carried as Axon iov layouts. Every transfer is
 * checked byte for byte against the packed pattern, and the gaps between
 * receiving iovecs must stay untouched.
 */
#include "ofi_test_node.h"

#include "env_guard.h"

#include <unistd.h>

#include <string>
#include <vector>

namespace {

const size_t kEager = 3000;        /* well under any rendezvous threshold */
const size_t kRndv  = 1 << 20;     /* over the default one (shm measures it at start) */
const size_t kGap   = 40;          /* bytes between iovecs: must not be written */
const char   kUntouched = (char)0xee;

char pattern(size_t i, unsigned seed)
{
    return (char)((i * 131 + seed * 17 + (i >> 8)) & 0xff);
}

/* count lengths summing to total, uneven (every other one a quarter longer). */
std::vector<size_t> uneven(size_t total, size_t count)
{
    std::vector<size_t> lengths(count);
    size_t base = total / count, packed = 0;

    for (size_t k = 0; k < count; ++k) {
        size_t end = (k + 1 == count) ? total : (k + 1) * base + ((k % 2) ? 0 : base / 4);
        lengths[k] = end - packed;
        packed     = end;
    }
    return lengths;
}

/*
 * iovecs of the given lengths, kGap apart in one block of memory. A
 * sending list holds pattern(seed) in packed order; a receiving one holds
 * kUntouched everywhere.
 */
struct IovList {
    std::vector<char>         mem;
    std::vector<struct iovec> iov;

    IovList(const std::vector<size_t> &lengths, bool sending, unsigned seed = 0)
        : iov(lengths.size())
    {
        size_t at = 0, packed = 0;

        for (size_t len : lengths) at += kGap + len;
        mem.assign(at + kGap, kUntouched);
        at = 0;
        for (size_t k = 0; k < lengths.size(); ++k) {
            iov[k].iov_base = &mem[at + kGap];
            iov[k].iov_len  = lengths[k];
            if (sending) {
                for (size_t i = 0; i < lengths[k]; ++i) {
                    static_cast<char *>(iov[k].iov_base)[i] = pattern(packed + i, seed);
                }
            }
            at     += kGap + lengths[k];
            packed += lengths[k];
        }
    }

    IovList(size_t total, size_t count, bool sending, unsigned seed = 0)
        : IovList(uneven(total, count), sending, seed)
    {
    }

    size_t size() const
    {
        size_t n = 0;
        for (const struct iovec &v : iov) n += v.iov_len;
        return n;
    }

    /* The first len packed bytes are pattern(seed), every other byte untouched. */
    ::testing::AssertionResult holds(size_t len, unsigned seed) const
    {
        size_t packed = 0;
        const char *p = mem.data();

        for (const struct iovec &v : iov) {
            for (; p < static_cast<const char *>(v.iov_base); ++p) {
                if (*p != kUntouched) {
                    return ::testing::AssertionFailure() << "gap byte " << (p - mem.data())
                                                         << " written";
                }
            }
            for (size_t i = 0; i < v.iov_len; ++i, ++p, ++packed) {
                char want = (packed < len) ? pattern(packed, seed) : kUntouched;
                if (*p != want) {
                    return ::testing::AssertionFailure() << "packed byte " << packed << " of "
                                                         << len << " is " << (int)(uint8_t)*p
                                                         << ", not " << (int)(uint8_t)want;
                }
            }
        }
        for (; p < mem.data() + mem.size(); ++p) {
            if (*p != kUntouched) {
                return ::testing::AssertionFailure() << "tail byte " << (p - mem.data())
                                                     << " written";
            }
        }
        return ::testing::AssertionSuccess();
    }
};

/* One send or receive: the v call or, with use_msg, the msg call. */
ssize_t post_send(Node &n, fi_addr_t dest, bool tagged, bool use_msg, const IovList &l,
                  uint64_t tag, void *ctx, uint64_t flags = 0)
{
    size_t count = l.iov.size();

    if (!use_msg) {
        return tagged ? fi_tsendv(n.ep, l.iov.data(), NULL, count, dest, tag, ctx)
                      : fi_sendv(n.ep, l.iov.data(), NULL, count, dest, ctx);
    }
    if (tagged) {
        struct fi_msg_tagged m = {l.iov.data(), NULL, count, dest, tag, 0, ctx, 0};
        return fi_tsendmsg(n.ep, &m, flags | FI_COMPLETION);
    }
    struct fi_msg m = {l.iov.data(), NULL, count, dest, ctx, 0};
    return fi_sendmsg(n.ep, &m, flags | FI_COMPLETION);
}

ssize_t post_recv(Node &n, bool tagged, bool use_msg, IovList &l, uint64_t tag, void *ctx)
{
    size_t count = l.iov.size();

    if (!use_msg) {
        return tagged ? fi_trecvv(n.ep, l.iov.data(), NULL, count, FI_ADDR_UNSPEC, tag, 0, ctx)
                      : fi_recvv(n.ep, l.iov.data(), NULL, count, FI_ADDR_UNSPEC, ctx);
    }
    if (tagged) {
        struct fi_msg_tagged m = {l.iov.data(), NULL, count, FI_ADDR_UNSPEC, tag, 0, ctx, 0};
        return fi_trecvmsg(n.ep, &m, FI_COMPLETION);
    }
    struct fi_msg m = {l.iov.data(), NULL, count, FI_ADDR_UNSPEC, ctx, 0};
    return fi_recvmsg(n.ep, &m, FI_COMPLETION);
}

/* Two endpoints with tagged and untagged messages, opened by each test (after its env). */
class OfiIov : public OfiProvider {
protected:
    Node a, b;
    fi_addr_t a_to_b = FI_ADDR_NOTAVAIL, b_to_a = FI_ADDR_NOTAVAIL;
    size_t limit = 0;

    void open_pair()
    {
        a.caps = b.caps = kMsgCaps;
        ASSERT_EQ(0, a.open());
        ASSERT_EQ(0, b.open());
        a_to_b = a.insert(b.name);
        b_to_a = b.insert(a.name);
        limit  = a.info->tx_attr->iov_limit;
        ASSERT_EQ(limit, b.info->rx_attr->iov_limit);
    }

    /* One message of total bytes from src to dst, send_count iovecs into recv_count. */
    void transfer(Node &src, Node &dst, fi_addr_t to_dst, bool tagged, bool use_msg,
                  size_t send_count, size_t recv_count, size_t total, unsigned seed)
    {
        SCOPED_TRACE(::testing::Message() << (tagged ? "tagged " : "untagged ")
                     << (use_msg ? "msg " : "v ") << send_count << " -> " << recv_count
                     << " iovecs, " << total << " bytes");
        IovList out(total, send_count, true, seed), in(total, recv_count, false);
        struct fi_context sctx, rctx;
        struct fi_cq_tagged_entry e;
        uint64_t tag = tagged ? 0x77 : 0;

        ASSERT_EQ(0, post_recv(dst, tagged, use_msg, in, tag, &rctx));
        ASSERT_EQ(0, post_send(src, to_dst, tagged, use_msg, out, tag, &sctx));
        ASSERT_EQ(1, wait_cq(src, {&dst}, &e));
        EXPECT_EQ(&sctx, e.op_context);
        EXPECT_EQ((uint64_t)((tagged ? FI_TAGGED : FI_MSG) | FI_SEND), e.flags);
        ASSERT_EQ(1, wait_cq(dst, {&src}, &e));
        EXPECT_EQ(&rctx, e.op_context);
        EXPECT_EQ((uint64_t)((tagged ? FI_TAGGED : FI_MSG) | FI_RECV), e.flags);
        EXPECT_EQ(total, e.len);
        EXPECT_TRUE(in.holds(total, seed));
    }

    /* Every count pair of {1, 2, limit}, both directions, tagged and untagged. */
    void transfer_all(size_t total)
    {
        const size_t counts[] = {1, 2, limit};
        unsigned seed = 0;

        for (bool tagged : {true, false}) {
            for (size_t sc : counts) {
                for (size_t rc : counts) {
                    ++seed;
                    transfer(a, b, a_to_b, tagged, seed % 2, sc, rc, total, seed);
                    transfer(b, a, b_to_a, tagged, !(seed % 2), rc, sc, total, seed + 100);
                    if (HasFatalFailure()) return;
                }
            }
        }
    }
};

TEST_F(OfiIov, GetinfoAdvertisesIovLimitAndAcceptsHintsUpToIt)
{
    struct fi_info *hints = ompi_hints(), *info = NULL;

    ASSERT_EQ(0, getinfo(hints, &info));
    size_t limit = info->tx_attr->iov_limit;
    EXPECT_GE(limit, 16u);
    EXPECT_EQ(limit, info->rx_attr->iov_limit);
    EXPECT_EQ(0u, info->tx_attr->rma_iov_limit);   /* no FI_RMA */
    fi_freeinfo(info);

    hints->tx_attr->iov_limit = limit;
    hints->rx_attr->iov_limit = 4;
    ASSERT_EQ(0, getinfo(hints, &info));
    EXPECT_EQ(limit, info->tx_attr->iov_limit);
    fi_freeinfo(info);

    hints->tx_attr->iov_limit = limit + 1;
    EXPECT_EQ(-FI_ENODATA, getinfo(hints, &info));
    hints->tx_attr->iov_limit = 1;
    hints->rx_attr->iov_limit = limit + 1;
    EXPECT_EQ(-FI_ENODATA, getinfo(hints, &info));
    fi_freeinfo(hints);
}

TEST_F(OfiIov, EagerIovecsAreByteExact)
{
    open_pair();
    transfer_all(kEager);
}

TEST_F(OfiIov, RendezvousIovecsAreByteExact)
{
    open_pair();
    transfer_all(kRndv);
}

TEST_F(OfiIov, LowRendezvousThresholdIovecsAreByteExact)
{
    EnvGuard env("AXON_RNDV_THRESH", "1K");

    open_pair();
    transfer_all(64 * 1024 + 3);
}

TEST_F(OfiIov, ZeroLengthIovecsAreSkipped)
{
    open_pair();
    IovList out({100, 0, 250, 150, 0}, true, 9), in({0, 300, 0, 200}, false);
    struct fi_context sctx, rctx;
    struct fi_cq_tagged_entry e;

    ASSERT_EQ(0, post_recv(b, true, false, in, 5, &rctx));
    ASSERT_EQ(0, post_send(a, a_to_b, true, false, out, 5, &sctx));
    ASSERT_EQ(1, wait_cq(a, {&b}, &e));
    ASSERT_EQ(1, wait_cq(b, {&a}, &e));
    EXPECT_EQ(500u, e.len);
    EXPECT_TRUE(in.holds(500, 9));
}

/* A message longer than the iovecs: FI_ETRUNC, len what fit, olen the rest. */
TEST_F(OfiIov, TruncationIntoFewerBytesIsAnErrorEntry)
{
    open_pair();
    for (size_t total : {(size_t)4000, kRndv}) {
        for (bool tagged : {true, false}) {
            SCOPED_TRACE(::testing::Message() << total << (tagged ? " tagged" : " untagged"));
            IovList out(total, limit, true, 3), in(300, 3, false);
            struct fi_context sctx, rctx;
            struct fi_cq_tagged_entry e;
            struct fi_cq_err_entry err;

            ASSERT_EQ(0, post_recv(b, tagged, tagged, in, 6, &rctx));
            ASSERT_EQ(0, post_send(a, a_to_b, tagged, !tagged, out, 6, &sctx));
            ASSERT_EQ(-FI_EAVAIL, wait_cq(b, {&a}, &e, &err));
            EXPECT_EQ(FI_ETRUNC, err.err);
            EXPECT_EQ(&rctx, err.op_context);
            EXPECT_EQ(300u, err.len);
            EXPECT_EQ(total - 300, err.olen);
            EXPECT_EQ(tagged ? 6u : 0u, err.tag);
            EXPECT_TRUE(in.holds(300, 3));
            ASSERT_EQ(1, wait_cq(a, {&b}, &e));   /* the send itself succeeded */
            EXPECT_EQ(&sctx, e.op_context);
        }
    }
}

/* Injected iovecs are reusable as soon as the call returns (fi_tsendmsg with FI_INJECT). */
TEST_F(OfiIov, InjectedIovecsAreReusableAtOnce)
{
    open_pair();
    IovList out(1000, 5, true, 4), in(1000, 2, false);
    struct fi_context sctx, rctx;
    struct fi_cq_tagged_entry e;
    struct fi_msg_tagged m = {out.iov.data(), NULL, out.iov.size(), a_to_b, 8, 0, &sctx, 0};

    ASSERT_EQ(0, fi_tsendmsg(a.ep, &m, FI_INJECT | FI_COMPLETION));
    memset(out.mem.data(), 'z', out.mem.size());
    ASSERT_EQ(0, post_recv(b, true, false, in, 8, &rctx));
    ASSERT_EQ(1, wait_cq(b, {&a}, &e));
    EXPECT_EQ(1000u, e.len);
    EXPECT_TRUE(in.holds(1000, 4));
    ASSERT_EQ(1, wait_cq(a, {&b}, &e));
    EXPECT_EQ(&sctx, e.op_context);
}

TEST_F(OfiIov, MoreIovecsThanTheLimitAreRefused)
{
    open_pair();
    IovList over(1000, limit + 1, true);
    struct fi_context ctx;
    struct fi_cq_tagged_entry e;

    for (bool tagged : {true, false}) {
        for (bool use_msg : {false, true}) {
            EXPECT_EQ(-FI_EINVAL, post_send(a, a_to_b, tagged, use_msg, over, 1, &ctx));
            EXPECT_EQ(-FI_EINVAL, post_recv(b, tagged, use_msg, over, 1, &ctx));
        }
    }
    /* Nothing was posted: no entries on either side. */
    EXPECT_EQ(-FI_EAGAIN, fi_cq_read(a.cq, &e, 1));
    EXPECT_EQ(-FI_EAGAIN, fi_cq_read(b.cq, &e, 1));

    /* A multi-receive buffer is one iovec. */
    IovList two(1 << 16, 2, false);
    struct fi_msg m = {two.iov.data(), NULL, 2, FI_ADDR_UNSPEC, &ctx, 0};
    EXPECT_EQ(-FI_EINVAL, fi_recvmsg(b.ep, &m, FI_MULTI_RECV));
}

TEST_F(OfiIov, OverLimitLogLineNamesTheCount)
{
    /* Before libfabric's first call: the death test's child runs this test from the start. */
    EnvGuard env("FI_LOG_LEVEL", "warn");
    struct fi_info *hints = ompi_hints(), *info = NULL;

    ASSERT_EQ(0, getinfo(hints, &info));
    size_t count = info->tx_attr->iov_limit + 1;
    std::string line = "iov count " + std::to_string(count) + " exceeds iov_limit " +
                       std::to_string(count - 1) + "\n";
    fi_freeinfo(info);
    fi_freeinfo(hints);

    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            Node n;
            if (n.open() != 0) _exit(2);
            std::vector<char> buf(count);
            std::vector<struct iovec> iov(count);
            for (size_t i = 0; i < count; ++i) {
                iov[i].iov_base = &buf[i];
                iov[i].iov_len  = 1;
            }
            if (fi_tsendv(n.ep, iov.data(), NULL, count, 0, 1, NULL) != -FI_EINVAL) _exit(3);
            fflush(stderr);
            _exit(0);
        },
        ::testing::ExitedWithCode(0), line);
}

}  // namespace
