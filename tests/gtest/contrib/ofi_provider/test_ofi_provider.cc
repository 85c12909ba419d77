/*
 * The libfabric provider "axon" (contrib/ofi_provider), driven through the
 * libfabric API only, the way Open MPI's ofi MTL drives it: fi_getinfo with
 * FI_PROVIDER_PATH at the build's provider, then fabric/domain/AV/CQ/EP.
 * Two endpoints in one process (two domains, progressed in turn) and two
 * processes (a forked child). Each test bounds its time (alarm).
 */
#include "ofi_test_node.h"

#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

namespace {

/* ---------------------------------------------------------------- getinfo */

TEST_F(OfiProvider, GetinfoAcceptsOpenMpiHints)
{
    struct fi_info *hints = ompi_hints(), *info = NULL;

    ASSERT_EQ(0, getinfo(hints, &info));
    ASSERT_NE((void *)NULL, info);
    EXPECT_STREQ("axon", info->fabric_attr->prov_name);
    EXPECT_EQ(FI_EP_RDM, info->ep_attr->type);
    EXPECT_TRUE(info->caps & FI_TAGGED);
    EXPECT_TRUE(info->caps & FI_DIRECTED_RECV);
    EXPECT_EQ(4u, info->domain_attr->cq_data_size);
    EXPECT_TRUE(info->tx_attr->msg_order & FI_ORDER_SAS);
    EXPECT_EQ(FI_AV_MAP, info->domain_attr->av_type);
    EXPECT_GE(info->tx_attr->inject_size, 64u);
    EXPECT_TRUE(info->ep_attr->mem_tag_format & (1ull << 63));  /* all 64 tag bits */
    EXPECT_EQ(0u, info->mode & ~hints->mode);
    fi_freeinfo(info);

    /* Open MPI's second query: the same plus FI_REMOTE_CQ_DATA's 4 bytes. */
    hints->domain_attr->threading = FI_THREAD_SAFE;
    hints->domain_attr->av_type   = FI_AV_TABLE;
    ASSERT_EQ(0, getinfo(hints, &info));
    EXPECT_EQ(FI_THREAD_SAFE, info->domain_attr->threading);
    EXPECT_EQ(FI_AV_TABLE, info->domain_attr->av_type);
    fi_freeinfo(info);
    fi_freeinfo(hints);
}

TEST_F(OfiProvider, GetinfoEnodataForUnmatchableHints)
{
    struct fi_info *info = NULL;
    struct {
        const char *what;
        void (*set)(struct fi_info *);
    } cases[] = {
        {"caps FI_TRIGGER", [](struct fi_info *h) { h->caps |= FI_ATOMIC | FI_TRIGGER; }},
        {"caps FI_HMEM", [](struct fi_info *h) { h->caps |= FI_RMA | FI_HMEM; }},
        {"rma iov limit 5", [](struct fi_info *h) { h->tx_attr->rma_iov_limit = 5; }},
        {"mr key 16 bytes", [](struct fi_info *h) { h->domain_attr->mr_key_size = 16; }},
        {"ep type MSG", [](struct fi_info *h) { h->ep_attr->type = FI_EP_MSG; }},
        {"cq data 8", [](struct fi_info *h) { h->domain_attr->cq_data_size = 8; }},
        {"strict comp order", [](struct fi_info *h) { h->tx_attr->comp_order = FI_ORDER_STRICT; }},
        {"inject 1 MiB", [](struct fi_info *h) { h->tx_attr->inject_size = 1 << 20; }},
        {"iov limit 17", [](struct fi_info *h) { h->rx_attr->iov_limit = 17; }},
        {"addr format", [](struct fi_info *h) { h->addr_format = FI_SOCKADDR_IN6; }},
        {"domain name", [](struct fi_info *h) { h->domain_attr->name = strdup("mlx5_0"); }},
        {"msg order RAW", [](struct fi_info *h) { h->tx_attr->msg_order |= FI_ORDER_RAW; }},
    };

    for (auto &c : cases) {
        struct fi_info *hints = ompi_hints();
        c.set(hints);
        EXPECT_EQ(-FI_ENODATA, getinfo(hints, &info)) << c.what;
        fi_freeinfo(hints);
    }
}

TEST_F(OfiPair, TaggedSendRecv)
{
    char sbuf[3000], rbuf[3000];
    struct fi_context sctx, rctx;
    struct fi_cq_tagged_entry e;
    fi_addr_t src = FI_ADDR_NOTAVAIL;

    for (size_t i = 0; i < sizeof(sbuf); ++i) sbuf[i] = (char)(i * 7);
    memset(rbuf, 0, sizeof(rbuf));
    ASSERT_EQ(0, fi_trecv(b.ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, 0x1234, 0, &rctx));
    ASSERT_EQ(0, fi_tsend(a.ep, sbuf, sizeof(sbuf), NULL, a_to_b, 0x1234, &sctx));

    ASSERT_EQ(1, wait_cq(a, {&b}, &e));
    EXPECT_EQ(&sctx, e.op_context);
    EXPECT_EQ((uint64_t)(FI_TAGGED | FI_SEND), e.flags);

    ASSERT_EQ(1, wait_cq(b, {&a}, &e, NULL, &src));
    EXPECT_EQ(&rctx, e.op_context);
    EXPECT_EQ((uint64_t)(FI_TAGGED | FI_RECV), e.flags);
    EXPECT_EQ(sizeof(sbuf), e.len);
    EXPECT_EQ(0x1234u, e.tag);
    EXPECT_EQ(b_to_a, src);   /* FI_SOURCE: the sender's fi_addr */
    EXPECT_EQ(0, memcmp(sbuf, rbuf, sizeof(sbuf)));
}

TEST_F(OfiPair, SendDataArrivesAsCqData)
{
    uint64_t val = 42, got = 0;
    struct fi_context sctx, rctx;
    struct fi_cq_tagged_entry e;

    ASSERT_EQ(0, fi_trecv(b.ep, &got, sizeof(got), NULL, FI_ADDR_UNSPEC, 7, 0, &rctx));
    ASSERT_EQ(0, fi_tsenddata(a.ep, &val, sizeof(val), NULL, 0xdeadbeef, a_to_b, 7, &sctx));
    ASSERT_EQ(1, wait_cq(b, {&a}, &e));
    EXPECT_EQ((uint64_t)(FI_TAGGED | FI_RECV | FI_REMOTE_CQ_DATA), e.flags);
    EXPECT_EQ(0xdeadbeefu, e.data);
    EXPECT_EQ(42u, got);
    ASSERT_EQ(1, wait_cq(a, {&b}, &e));
    EXPECT_EQ(&sctx, e.op_context);
}

/* Data wider than cq_data_size (4 bytes) is refused, never cut to its low half
 * (untagged sends take the same path, axon_fi_sendv_common). */
TEST_F(OfiPair, SendDataWiderThanCqDataIsRefused)
{
    uint64_t val = 42, got = 0, wide = 0x100000001ull;
    struct fi_context sctx, rctx;
    struct fi_cq_tagged_entry e;

    ASSERT_EQ(4u, a.info->domain_attr->cq_data_size);
    EXPECT_EQ(-FI_EINVAL, fi_tsenddata(a.ep, &val, sizeof(val), NULL, wide, a_to_b, 7, &sctx));
    EXPECT_EQ(-FI_EINVAL, fi_tinjectdata(a.ep, &val, sizeof(val), wide, a_to_b, 7));

    /* nothing left: the receive gets the next, good one */
    ASSERT_EQ(0, fi_trecv(b.ep, &got, sizeof(got), NULL, FI_ADDR_UNSPEC, 7, 0, &rctx));
    ASSERT_EQ(0, fi_tsenddata(a.ep, &val, sizeof(val), NULL, 0xffffffffu, a_to_b, 7, &sctx));
    ASSERT_EQ(1, wait_cq(b, {&a}, &e));
    EXPECT_EQ(0xffffffffu, e.data);
    EXPECT_EQ(42u, got);
    ASSERT_EQ(1, wait_cq(a, {&b}, &e));
    EXPECT_EQ(&sctx, e.op_context);
    EXPECT_EQ(-FI_EAGAIN, fi_cq_read(a.cq, &e, 1)) << "a refused send completed";
}

TEST_F(OfiPair, InjectBufferReusableAndNoCompletion)
{
    char buf[256], rbuf[256];
    struct fi_context rctx;
    struct fi_cq_tagged_entry e;

    memset(buf, 'x', sizeof(buf));
    ASSERT_EQ(0, fi_tinjectdata(a.ep, buf, sizeof(buf), 5, a_to_b, 9));
    memset(buf, 'y', sizeof(buf));   /* reusable at once */
    ASSERT_EQ(0, fi_trecv(b.ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, 9, 0, &rctx));
    ASSERT_EQ(1, wait_cq(b, {&a}, &e));
    EXPECT_EQ(5u, e.data);
    for (char c : rbuf) ASSERT_EQ('x', c);
    EXPECT_EQ(-FI_EAGAIN, fi_cq_read(a.cq, &e, 1));   /* inject: no completion */
    EXPECT_EQ(-FI_EMSGSIZE, fi_tinject(a.ep, buf, a.info->tx_attr->inject_size + 1, a_to_b, 9));
}

TEST_F(OfiPair, TagIgnoreBitsAndOrder)
{
    int v[3] = {1, 2, 3}, r[3] = {0, 0, 0};
    struct fi_context ctx[6];
    struct fi_cq_tagged_entry e;

    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(0, fi_tsend(a.ep, &v[i], sizeof(int), NULL, a_to_b, 0x100 + i, &ctx[i]));
    }
    for (int i = 0; i < 3; ++i) {   /* any low byte: matched in send order */
        ASSERT_EQ(0, fi_trecv(b.ep, &r[i], sizeof(int), NULL, FI_ADDR_UNSPEC, 0x100, 0xff,
                              &ctx[3 + i]));
    }
    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(1, wait_cq(b, {&a}, &e));
        EXPECT_EQ(&ctx[3 + i], e.op_context);
        EXPECT_EQ((uint64_t)(0x100 + i), e.tag);
        EXPECT_EQ(v[i], r[i]);
    }
}

TEST_F(OfiPair, TruncationIsAnErrorEntry)
{
    char sbuf[100], rbuf[10];
    struct fi_context sctx, rctx;
    struct fi_cq_tagged_entry e;
    struct fi_cq_err_entry err;
    char text[64];

    memset(sbuf, 'q', sizeof(sbuf));
    ASSERT_EQ(0, fi_tsend(a.ep, sbuf, sizeof(sbuf), NULL, a_to_b, 3, &sctx));
    ASSERT_EQ(0, fi_trecv(b.ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, 3, 0, &rctx));
    ASSERT_EQ(-FI_EAVAIL, wait_cq(b, {&a}, &e, &err));
    EXPECT_EQ(FI_ETRUNC, err.err);
    EXPECT_EQ(&rctx, err.op_context);
    EXPECT_EQ(sizeof(rbuf), err.len);
    EXPECT_EQ(sizeof(sbuf) - sizeof(rbuf), err.olen);
    EXPECT_EQ(3u, err.tag);
    EXPECT_NE((const char *)NULL, fi_cq_strerror(b.cq, err.prov_errno, NULL, text, sizeof(text)));
    EXPECT_EQ(-FI_EAGAIN, fi_cq_readerr(b.cq, &err, 0));
}

TEST_F(OfiPair, CancelPostedReceive)
{
    char rbuf[16];
    struct fi_context rctx, other;
    struct fi_cq_tagged_entry e;
    struct fi_cq_err_entry err;

    ASSERT_EQ(0, fi_trecv(b.ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, 77, 0, &rctx));
    EXPECT_EQ(-FI_ENOENT, fi_cancel(&b.ep->fid, &other));
    ASSERT_EQ(0, fi_cancel(&b.ep->fid, &rctx));
    ASSERT_EQ(-FI_EAVAIL, wait_cq(b, {&a}, &e, &err));
    EXPECT_EQ(FI_ECANCELED, err.err);
    EXPECT_EQ(&rctx, err.op_context);
}

TEST_F(OfiPair, PeekClaimDiscard)
{
    int v = 11, w = 22, got = 0;
    struct fi_context sctx[2], pctx, cctx, dctx;
    struct fi_cq_tagged_entry e;
    struct fi_cq_err_entry err;
    struct iovec iov = {&got, sizeof(got)};
    struct fi_msg_tagged msg;

    memset(&msg, 0, sizeof(msg));
    msg.addr = FI_ADDR_UNSPEC;
    msg.tag  = 50;

    /* Nothing there: an FI_ENOMSG error entry. */
    msg.context = &pctx;
    ASSERT_EQ(0, fi_trecvmsg(b.ep, &msg, FI_PEEK | FI_COMPLETION));
    ASSERT_EQ(-FI_EAVAIL, wait_cq(b, {&a}, &e, &err));
    EXPECT_EQ(FI_ENOMSG, err.err);
    EXPECT_EQ(&pctx, err.op_context);

    ASSERT_EQ(0, fi_tsenddata(a.ep, &v, sizeof(v), NULL, 9, a_to_b, 50, &sctx[0]));
    ASSERT_EQ(1, wait_cq(a, {&b}, &e));

    /* Peek until it is there; it stays. */
    double deadline = now_sec() + kTimeout;
    ssize_t ret;
    do {
        ASSERT_EQ(0, fi_trecvmsg(b.ep, &msg, FI_PEEK | FI_COMPLETION));
        ret = wait_cq(b, {&a}, &e, &err);
    } while ((ret == -FI_EAVAIL) && (err.err == FI_ENOMSG) && (now_sec() < deadline));
    ASSERT_EQ(1, ret);
    EXPECT_EQ(sizeof(v), e.len);
    EXPECT_EQ(50u, e.tag);
    EXPECT_EQ(9u, e.data);

    /* Peek and claim, then receive the claimed message with the same context. */
    msg.context = &cctx;
    ASSERT_EQ(0, fi_trecvmsg(b.ep, &msg, FI_PEEK | FI_CLAIM | FI_COMPLETION));
    ASSERT_EQ(1, wait_cq(b, {&a}, &e));
    EXPECT_EQ(&cctx, e.op_context);
    msg.msg_iov   = &iov;
    msg.iov_count = 1;
    ASSERT_EQ(0, fi_trecvmsg(b.ep, &msg, FI_CLAIM | FI_COMPLETION));
    ASSERT_EQ(1, wait_cq(b, {&a}, &e));
    EXPECT_EQ(&cctx, e.op_context);
    EXPECT_EQ(11, got);

    /* Claimed: nobody else sees it. */
    msg.context = &pctx;
    msg.msg_iov = NULL;
    msg.iov_count = 0;
    ASSERT_EQ(0, fi_trecvmsg(b.ep, &msg, FI_PEEK | FI_COMPLETION));
    ASSERT_EQ(-FI_EAVAIL, wait_cq(b, {&a}, &e, &err));
    EXPECT_EQ(FI_ENOMSG, err.err);

    /* Peek | discard drops a message. */
    ASSERT_EQ(0, fi_tsend(a.ep, &w, sizeof(w), NULL, a_to_b, 50, &sctx[1]));
    ASSERT_EQ(1, wait_cq(a, {&b}, &e));
    msg.context = &dctx;
    deadline = now_sec() + kTimeout;
    do {
        ASSERT_EQ(0, fi_trecvmsg(b.ep, &msg, FI_PEEK | FI_DISCARD | FI_COMPLETION));
        ret = wait_cq(b, {&a}, &e, &err);
    } while ((ret == -FI_EAVAIL) && (err.err == FI_ENOMSG) && (now_sec() < deadline));
    ASSERT_EQ(1, ret);
    EXPECT_EQ(&dctx, e.op_context);
    ASSERT_EQ(0, fi_trecvmsg(b.ep, &msg, FI_PEEK | FI_COMPLETION));
    ASSERT_EQ(-FI_EAVAIL, wait_cq(b, {&a}, &e, &err));
    EXPECT_EQ(FI_ENOMSG, err.err);
}

TEST_F(OfiPair, DirectedReceive)
{
    Node c;
    ASSERT_EQ(0, c.open());
    fi_addr_t c_to_b = c.insert(b.name);
    fi_addr_t b_to_c = b.insert(c.name);
    int from_a = 1, from_c = 2, got = 0;
    struct fi_context ctx[3];
    struct fi_cq_tagged_entry e;

    /* Both send tag 5; a receive directed at c takes c's message, not a's earlier one. */
    ASSERT_EQ(0, fi_tsend(a.ep, &from_a, sizeof(int), NULL, a_to_b, 5, &ctx[0]));
    ASSERT_EQ(1, wait_cq(a, {&b, &c}, &e));
    ASSERT_EQ(0, fi_tsend(c.ep, &from_c, sizeof(int), NULL, c_to_b, 5, &ctx[1]));
    ASSERT_EQ(1, wait_cq(c, {&a, &b}, &e));
    ASSERT_EQ(0, fi_trecv(b.ep, &got, sizeof(got), NULL, b_to_c, 5, 0, &ctx[2]));
    ASSERT_EQ(1, wait_cq(b, {&a, &c}, &e));
    EXPECT_EQ(2, got);
    ASSERT_EQ(0, fi_trecv(b.ep, &got, sizeof(got), NULL, b_to_a, 5, 0, &ctx[2]));
    ASSERT_EQ(1, wait_cq(b, {&a, &c}, &e));
    EXPECT_EQ(1, got);
    EXPECT_EQ(-FI_EINVAL, fi_trecv(b.ep, &got, sizeof(got), NULL, 1234, 5, 0, &ctx[2]));
    c.close();
}

/* ---------------------------------------------------------------- AV and EQ */

TEST_F(OfiProvider, AvTableDuplicatesLookupAndBadAddresses)
{
    Node a, b;
    ASSERT_EQ(0, a.open(FI_AV_TABLE));
    ASSERT_EQ(0, b.open(FI_AV_TABLE));
    EXPECT_LE(a.namelen, (size_t)FI_NAME_MAX);   /* Open MPI 4.1's fi_getname buffer */

    fi_addr_t x = a.insert(b.name), y = a.insert(b.name);
    EXPECT_EQ(0u, x);
    EXPECT_EQ(1u, y);   /* table: the next index, the same peer */

    char back[64];
    size_t len = sizeof(back);
    ASSERT_EQ(0, fi_av_lookup(a.av, y, back, &len));
    EXPECT_EQ(a.namelen, len);
    EXPECT_EQ(0, memcmp(back, b.name, len));
    char str[128];
    len = sizeof(str);
    fi_av_straddr(a.av, b.name, str, &len);
    EXPECT_EQ(0, strncmp(str, "fi_axon://", 10)) << str;

    /* Both indices reach b; removing one keeps the other working. */
    int v = 3, got = 0;
    struct fi_context sctx, rctx;
    struct fi_cq_tagged_entry e;
    ASSERT_EQ(0, fi_av_remove(a.av, &x, 1, 0));
    ASSERT_EQ(0, fi_trecv(b.ep, &got, sizeof(got), NULL, FI_ADDR_UNSPEC, 1, 0, &rctx));
    ASSERT_EQ(0, fi_tsend(a.ep, &v, sizeof(v), NULL, y, 1, &sctx));
    ASSERT_EQ(1, wait_cq(b, {&a}, &e));
    EXPECT_EQ(3, got);
    EXPECT_EQ(-FI_EINVAL, fi_tsend(a.ep, &v, sizeof(v), NULL, x, 1, &sctx));

    /* A name that is not AF_INET, or names no port, fails cleanly. */
    struct sockaddr_in bad;
    memcpy(&bad, b.name, sizeof(bad));
    bad.sin_family = AF_INET6;
    fi_addr_t fa = 0;
    EXPECT_EQ(0, fi_av_insert(a.av, &bad, 1, &fa, 0, NULL));
    EXPECT_EQ(FI_ADDR_NOTAVAIL, fa);
    int errs[1] = {0};
    memcpy(&bad, b.name, sizeof(bad));
    bad.sin_port = 0;
    EXPECT_EQ(0, fi_av_insert(a.av, &bad, 1, &fa, FI_SYNC_ERR, errs));
    EXPECT_EQ(FI_EINVAL, errs[0]);
}

TEST_F(OfiProvider, AvReportsInsertsOnItsEq)
{
    Node a, b;
    ASSERT_EQ(0, a.open());
    ASSERT_EQ(0, b.open());
    struct fi_eq_attr eq_attr;
    struct fi_av_attr av_attr;
    struct fid_eq *eq;
    struct fid_av *av;
    struct fi_eq_entry entry;
    uint32_t event = 0;
    fi_addr_t fa[2];
    int ctx;

    memset(&eq_attr, 0, sizeof(eq_attr));
    ASSERT_EQ(0, fi_eq_open(a.fabric, &eq_attr, &eq, NULL));
    memset(&av_attr, 0, sizeof(av_attr));
    av_attr.type  = FI_AV_MAP;
    av_attr.flags = FI_EVENT;
    ASSERT_EQ(0, fi_av_open(a.domain, &av_attr, &av, NULL));
    ASSERT_EQ(0, fi_av_bind(av, &eq->fid, 0));
    char names[128];   /* names are packed at the AV's address length */
    memcpy(names, b.name, b.namelen);
    memcpy(names + b.namelen, a.name, a.namelen);
    ASSERT_EQ(0, fi_av_insert(av, names, 2, fa, 0, &ctx));
    ssize_t ret = fi_eq_sread(eq, &event, &entry, sizeof(entry), 5000, 0);
    if (ret == -FI_EAVAIL) {
        struct fi_eq_err_entry err;
        EXPECT_EQ((ssize_t)sizeof(err), fi_eq_readerr(eq, &err, 0));
        ADD_FAILURE() << "insert of name " << err.data << " failed: " << fi_strerror(err.err);
    }
    ASSERT_EQ((ssize_t)sizeof(entry), ret);
    EXPECT_EQ((uint32_t)FI_AV_COMPLETE, event);
    EXPECT_EQ(&ctx, entry.context);
    EXPECT_EQ(2u, entry.data);
    EXPECT_EQ(-FI_EAGAIN, fi_eq_read(eq, &event, &entry, sizeof(entry), 0));

    /* User events too. */
    entry.data = 99;
    EXPECT_EQ((ssize_t)sizeof(entry), fi_eq_write(eq, FI_NOTIFY, &entry, sizeof(entry), 0));
    ASSERT_EQ((ssize_t)sizeof(entry), fi_eq_read(eq, &event, &entry, sizeof(entry), 0));
    EXPECT_EQ((uint32_t)FI_NOTIFY, event);
    EXPECT_EQ(99u, entry.data);

    EXPECT_EQ(0, fi_close(&av->fid));
    EXPECT_EQ(0, fi_close(&eq->fid));
}

TEST_F(OfiProvider, ThreadSafeDomainAndAxonTls)
{
    Node a;
    ASSERT_EQ(0, a.open(FI_AV_MAP, FI_THREAD_SAFE));
    a.close();

    /* The provider never runs Axon over its own ofi transport. */
    const char *saved = getenv("AXON_TLS");
    std::string keep = saved ? saved : "";
    setenv("AXON_TLS", "ofi", 1);
    Node b;
    EXPECT_NE(0, b.open());
    b.close();
    setenv("AXON_TLS", "shm,self,ofi", 1);
    Node c;
    EXPECT_EQ(0, c.open());
    c.close();
    setenv("AXON_TLS", "^tcp", 1);
    Node d;
    EXPECT_EQ(0, d.open());
    d.close();
    if (saved) setenv("AXON_TLS", keep.c_str(), 1); else unsetenv("AXON_TLS");
}

/*
 * libfabric prints a provider's log format as given, so the provider ends
 * each line itself. FI_LOG_LEVEL is read once, when libfabric starts: the
 * warnings are made in a re-executed child (a death test in threadsafe
 * style), whose stderr the expectation reads.
 */
TEST_F(OfiProvider, LogLinesEndWithNewline)
{
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            setenv("FI_LOG_LEVEL", "warn", 1);
            Node a;
            char addr[64];
            size_t len;
            if (a.open() != 0) _exit(2);
            for (fi_addr_t bad : {(fi_addr_t)777, (fi_addr_t)778}) {
                len = sizeof(addr);
                if (fi_av_lookup(a.av, bad, addr, &len) != -FI_EINVAL) _exit(3);
            }
            fflush(stderr);
            _exit(0);
        },
        ::testing::ExitedWithCode(0), "fi_addr 777 is not in the AV\nlibfabric:[^\n]*fi_addr 778 is not in the AV\n");
}

/* ---------------------------------------------------------------- addresses */

/* A TCP port on 127.0.0.1 that nobody listens on now (bound, then released). */
std::string free_port()
{
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    memset(&sin, 0, sizeof(sin));
    sin.sin_family      = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(0, bind(fd, (struct sockaddr *)&sin, sizeof(sin)));
    EXPECT_EQ(0, getsockname(fd, (struct sockaddr *)&sin, &len));
    ::close(fd);
    return std::to_string(ntohs(sin.sin_port));
}

const struct sockaddr_in *as_sin(const void *addr)
{
    return static_cast<const struct sockaddr_in *>(addr);
}

TEST_F(OfiProvider, GetinfoGivesSourceAndDestinationAddresses)
{
    struct fi_info *hints = ompi_hints(), *info = NULL;
    std::string port = free_port();
    uint16_t nport = htons((uint16_t)std::stoi(port));

    use_build_provider();
    /* FI_SOURCE: node/service are where the endpoint will be reached. */
    ASSERT_EQ(0, fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", port.c_str(), FI_SOURCE, hints,
                            &info));
    EXPECT_EQ((uint32_t)FI_SOCKADDR_IN, info->addr_format);
    ASSERT_EQ(sizeof(struct sockaddr_in), info->src_addrlen);
    EXPECT_EQ(AF_INET, as_sin(info->src_addr)->sin_family);
    EXPECT_EQ(nport, as_sin(info->src_addr)->sin_port);
    EXPECT_EQ(htonl(INADDR_LOOPBACK), as_sin(info->src_addr)->sin_addr.s_addr);
    EXPECT_EQ(nullptr, info->dest_addr);
    fi_freeinfo(info);

    /* Without it: the peer to talk to, and a source address all the same. */
    ASSERT_EQ(0, fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", port.c_str(), 0, hints, &info));
    ASSERT_EQ(sizeof(struct sockaddr_in), info->dest_addrlen);
    EXPECT_EQ(nport, as_sin(info->dest_addr)->sin_port);
    EXPECT_EQ(htonl(INADDR_LOOPBACK), as_sin(info->dest_addr)->sin_addr.s_addr);
    EXPECT_EQ(sizeof(struct sockaddr_in), info->src_addrlen);
    EXPECT_NE(nullptr, info->src_addr);
    fi_freeinfo(info);

    /* No node, service, flags or hints: a source address, and per-direction caps. */
    ASSERT_EQ(0, fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, NULL, &info));
    for (struct fi_info *i = info; i != NULL; i = i->next) {
        if (strcmp(i->fabric_attr->prov_name, "axon") != 0) continue;
        EXPECT_EQ(sizeof(struct sockaddr_in), i->src_addrlen);
        EXPECT_NE(nullptr, i->src_addr);
        EXPECT_EQ(0u, i->tx_attr->caps & (FI_RECV | FI_DIRECTED_RECV | FI_SOURCE));
        EXPECT_EQ(0u, i->rx_attr->caps & FI_SEND);
        EXPECT_EQ(0u, i->rx_attr->caps & ~i->caps);
    }
    fi_freeinfo(info);

    /* A node that does not resolve names nothing. */
    EXPECT_EQ(-FI_ENODATA, fi_getinfo(FI_VERSION(1, 17), "no-such-host.invalid", port.c_str(),
                                      0, hints, &info));
    fi_freeinfo(hints);
}

/*
 * fabtests' way, without an out-of-band exchange: the server's endpoint
 * comes from node/service with FI_SOURCE, the client inserts the dest_addr
 * node/service give it and sends first; the server learns the client's
 * name from that message.
 */
TEST_F(OfiProvider, EndpointIsReachableAtItsSourceAddress)
{
    std::string port = free_port();
    Node server, client, again;
    char buf[64];
    struct fi_context ctx;
    struct fi_cq_tagged_entry e;

    ASSERT_EQ(0, server.open_at("127.0.0.1", port.c_str(), FI_SOURCE));
    EXPECT_EQ(htons((uint16_t)std::stoi(port)), as_sin(server.name)->sin_port);
    ASSERT_EQ(0, client.open_at("127.0.0.1", port.c_str(), 0));
    ASSERT_NE(nullptr, client.info->dest_addr);

    fi_addr_t to_server = client.insert(client.info->dest_addr);
    ASSERT_EQ(0, fi_trecv(server.ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, 1, 0, &ctx));
    ASSERT_EQ(0, fi_tsend(client.ep, client.name, client.namelen, NULL, to_server, 1, &ctx));
    ASSERT_EQ(1, wait_cq(server, {&client}, &e));
    EXPECT_EQ(client.namelen, e.len);
    fi_addr_t to_client = server.insert(buf);
    int v = 7, got = 0;
    ASSERT_EQ(0, fi_trecv(client.ep, &got, sizeof(got), NULL, FI_ADDR_UNSPEC, 2, 0, &ctx));
    ASSERT_EQ(0, fi_tsend(server.ep, &v, sizeof(v), NULL, to_client, 2, &ctx));
    double deadline = now_sec() + kTimeout;
    while ((got != 7) && (now_sec() < deadline)) {
        (void)fi_cq_read(client.cq, &e, 1);
        (void)fi_cq_read(server.cq, &e, 1);
    }
    EXPECT_EQ(7, got);

    /* The address is taken: a second endpoint there fails, it does not hide. */
    EXPECT_EQ(-FI_EADDRINUSE, again.open_at("127.0.0.1", port.c_str(), FI_SOURCE));
}

/* ---------------------------------------------------------------- CQ waits */

TEST_F(OfiProvider, CqSignalWakesSread)
{
    Node a;
    struct fi_cq_tagged_entry e;
    ASSERT_EQ(0, a.open());

    /* A signal before the wait ends the next wait at once. */
    ASSERT_EQ(0, fi_cq_signal(a.cq));
    double t0 = now_sec();
    EXPECT_EQ(-FI_EAGAIN, fi_cq_sread(a.cq, &e, 1, NULL, 5000));
    EXPECT_LT(now_sec() - t0, 1.0);

    /* A thread blocked in fi_cq_sread is woken by another thread's signal. */
    ssize_t ret = 0;
    double waited = 0;
    std::thread waiter([&] {
        double start = now_sec();
        ret    = fi_cq_sread(a.cq, &e, 1, NULL, 20000);
        waited = now_sec() - start;
    });
    usleep(200 * 1000);
    ASSERT_EQ(0, fi_cq_signal(a.cq));
    waiter.join();
    EXPECT_EQ(-FI_EAGAIN, ret);
    EXPECT_LT(waited, 5.0);

    /* Nothing and no signal: the timeout ends it. */
    t0 = now_sec();
    EXPECT_EQ(-FI_EAGAIN, fi_cq_sread(a.cq, &e, 1, NULL, 300));
    EXPECT_GE(now_sec() - t0, 0.25);
}

/* ---------------------------------------------------------------- peers gone */

/*
 * Inserting is local: the name of a peer that has exited inserts like any
 * other. Sending to it then completes in error, at once, for every send.
 */
TEST_F(OfiProvider, InsertOfAnExitedPeerSucceedsAndSendsFail)
{
    int to_parent[2];
    pid_t pid = fork_peer(to_parent);
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        Node c;
        if (c.open() != 0) _exit(2);
        if (write(to_parent[1], c.name, sizeof(c.name)) != (ssize_t)sizeof(c.name)) _exit(3);
        c.close();
        _exit(0);
    }
    char peer[64];
    ASSERT_EQ((ssize_t)sizeof(peer), read(to_parent[0], peer, sizeof(peer)));
    int status = 0;
    ASSERT_EQ(pid, waitpid(pid, &status, 0));
    ASSERT_TRUE(WIFEXITED(status) && (WEXITSTATUS(status) == 0));

    Node n;
    ASSERT_EQ(0, n.open());
    fi_addr_t p = FI_ADDR_NOTAVAIL;
    double t0 = now_sec();
    ASSERT_EQ(1, fi_av_insert(n.av, peer, 1, &p, 0, NULL));
    EXPECT_LT(now_sec() - t0, 1.0);
    ASSERT_NE(FI_ADDR_NOTAVAIL, p);

    int v = 1;
    struct fi_context ctx[2];
    struct fi_cq_tagged_entry e;
    struct fi_cq_err_entry err;
    for (int i = 0; i < 2; ++i) {
        ASSERT_EQ(0, fi_tsend(n.ep, &v, sizeof(v), NULL, p, 1, &ctx[i]));
        ASSERT_EQ(-FI_EAVAIL, wait_cq(n, {}, &e, &err)) << "send " << i;
        EXPECT_EQ(&ctx[i], err.op_context);
        EXPECT_EQ(FI_EHOSTUNREACH, err.err);
        EXPECT_EQ((uint64_t)(FI_TAGGED | FI_SEND), err.flags);
    }
    /* An inject has no context, but its failure is not lost either. */
    ASSERT_EQ(0, fi_tinject(n.ep, &v, sizeof(v), p, 1));
    ASSERT_EQ(-FI_EAVAIL, wait_cq(n, {}, &e, &err));
    EXPECT_EQ(nullptr, err.op_context);
    EXPECT_EQ(FI_EHOSTUNREACH, err.err);
    ::close(to_parent[0]);
    ::close(to_parent[1]);
}

TEST_F(OfiMsgPair, UntaggedSendRecvOrderDataAndTruncation)
{
    EXPECT_TRUE(a.info->caps & FI_MSG);
    EXPECT_EQ(0u, a.info->ep_attr->mem_tag_format & (1ull << 63));   /* bit 63 is FI_MSG's */

    /* Per-sender order over every size (eager and rendezvous); FI_SOURCE. */
    size_t sizes[3] = {8, 70000, 3};
    std::vector<char> sbuf(70000), rbuf[3];
    struct fi_context sctx[3], rctx[3];
    struct fi_cq_tagged_entry e;
    fi_addr_t src;
    for (size_t j = 0; j < sbuf.size(); ++j) sbuf[j] = (char)(j * 13);
    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(0, fi_send(a.ep, sbuf.data(), sizes[i], NULL, a_to_b, &sctx[i]));
    }
    for (int i = 0; i < 3; ++i) {
        rbuf[i].assign(70000, 0);
        ASSERT_EQ(0, fi_recv(b.ep, rbuf[i].data(), rbuf[i].size(), NULL, FI_ADDR_UNSPEC,
                             &rctx[i]));
    }
    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(1, wait_cq(b, {&a}, &e, NULL, &src));
        EXPECT_EQ(&rctx[i], e.op_context);
        EXPECT_EQ((uint64_t)(FI_MSG | FI_RECV), e.flags);
        EXPECT_EQ(sizes[i], e.len);
        EXPECT_EQ(0u, e.tag);
        EXPECT_EQ(b_to_a, src);
        EXPECT_EQ(0, memcmp(sbuf.data(), rbuf[i].data(), sizes[i]));
    }
    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(1, wait_cq(a, {&b}, &e));
        EXPECT_EQ((uint64_t)(FI_MSG | FI_SEND), e.flags);
    }

    /* CQ data and inject. */
    uint64_t val = 5, got = 0;
    ASSERT_EQ(0, fi_senddata(a.ep, &val, sizeof(val), NULL, 0xabcd, a_to_b, &sctx[0]));
    ASSERT_EQ(0, fi_recv(b.ep, &got, sizeof(got), NULL, FI_ADDR_UNSPEC, &rctx[0]));
    ASSERT_EQ(1, wait_cq(b, {&a}, &e));
    EXPECT_EQ((uint64_t)(FI_MSG | FI_RECV | FI_REMOTE_CQ_DATA), e.flags);
    EXPECT_EQ(0xabcdu, e.data);
    EXPECT_EQ(5u, got);
    ASSERT_EQ(1, wait_cq(a, {&b}, &e));
    val = 6;
    ASSERT_EQ(0, fi_inject(a.ep, &val, sizeof(val), a_to_b));
    val = 0;
    ASSERT_EQ(0, fi_recv(b.ep, &got, sizeof(got), NULL, FI_ADDR_UNSPEC, &rctx[0]));
    ASSERT_EQ(1, wait_cq(b, {&a}, &e));
    EXPECT_EQ(6u, got);
    EXPECT_EQ(-FI_EAGAIN, fi_cq_read(a.cq, &e, 1));   /* inject: no completion */

    /* Truncation: an error entry with olen; the next message arrives intact. */
    struct fi_cq_err_entry err;
    char small[10];
    ASSERT_EQ(0, fi_send(a.ep, sbuf.data(), 100, NULL, a_to_b, &sctx[0]));
    ASSERT_EQ(0, fi_send(a.ep, sbuf.data(), 4, NULL, a_to_b, &sctx[1]));
    ASSERT_EQ(0, fi_recv(b.ep, small, sizeof(small), NULL, FI_ADDR_UNSPEC, &rctx[0]));
    ASSERT_EQ(-FI_EAVAIL, wait_cq(b, {&a}, &e, &err));
    EXPECT_EQ(FI_ETRUNC, err.err);
    EXPECT_EQ(&rctx[0], err.op_context);
    EXPECT_EQ(sizeof(small), err.len);
    EXPECT_EQ(90u, err.olen);
    EXPECT_EQ((uint64_t)(FI_MSG | FI_RECV), err.flags & (FI_MSG | FI_RECV | FI_TAGGED));
    ASSERT_EQ(0, fi_recv(b.ep, small, sizeof(small), NULL, FI_ADDR_UNSPEC, &rctx[1]));
    ASSERT_EQ(1, wait_cq(b, {&a}, &e));
    EXPECT_EQ(4u, e.len);
    EXPECT_EQ(0, memcmp(sbuf.data(), small, 4));
    EXPECT_EQ(6u, fi_cntr_read(b.rx_cntr));   /* 3 in order, data, inject, after truncation */
    EXPECT_EQ(1u, fi_cntr_readerr(b.rx_cntr));
}

TEST_F(OfiMsgPair, TaggedAndUntaggedDoNotMix)
{
    /* A tagged receive that ignores every tag bit still takes no untagged message. */
    int v = 9, got_t = 0, got_u = 0;
    struct fi_context tctx, uctx, sctx;
    struct fi_cq_tagged_entry e;
    struct fi_cq_err_entry err;
    ASSERT_EQ(0, fi_trecv(b.ep, &got_t, sizeof(got_t), NULL, FI_ADDR_UNSPEC, 0, ~0ull, &tctx));
    ASSERT_EQ(0, fi_send(a.ep, &v, sizeof(v), NULL, a_to_b, &sctx));
    ASSERT_EQ(0, fi_recv(b.ep, &got_u, sizeof(got_u), NULL, FI_ADDR_UNSPEC, &uctx));
    ASSERT_EQ(1, wait_cq(b, {&a}, &e));
    EXPECT_EQ(&uctx, e.op_context);
    EXPECT_EQ(9, got_u);
    EXPECT_EQ(0, got_t);
    ASSERT_EQ(0, fi_cancel(&b.ep->fid, &tctx));
    ASSERT_EQ(-FI_EAVAIL, wait_cq(b, {&a}, &e, &err));
    EXPECT_EQ(FI_ECANCELED, err.err);

    /* Bit 63 belongs to untagged messages here. */
    EXPECT_EQ(-FI_EINVAL, fi_tsend(a.ep, &v, sizeof(v), NULL, a_to_b, 1ull << 63, &sctx));
}

TEST_F(OfiMsgPair, DirectedUntaggedReceive)
{
    Node c;
    c.caps = kMsgCaps;
    ASSERT_EQ(0, c.open());
    fi_addr_t c_to_b = c.insert(b.name), b_to_c = b.insert(c.name);
    int from_a = 1, from_c = 2, got = 0;
    struct fi_context ctx[3];
    struct fi_cq_tagged_entry e;

    ASSERT_EQ(0, fi_send(a.ep, &from_a, sizeof(int), NULL, a_to_b, &ctx[0]));
    ASSERT_EQ(1, wait_cq(a, {&b, &c}, &e));
    ASSERT_EQ(0, fi_send(c.ep, &from_c, sizeof(int), NULL, c_to_b, &ctx[1]));
    ASSERT_EQ(1, wait_cq(c, {&a, &b}, &e));
    ASSERT_EQ(0, fi_recv(b.ep, &got, sizeof(got), NULL, b_to_c, &ctx[2]));
    ASSERT_EQ(1, wait_cq(b, {&a, &c}, &e));
    EXPECT_EQ(2, got);
    ASSERT_EQ(0, fi_recv(b.ep, &got, sizeof(got), NULL, b_to_a, &ctx[2]));
    ASSERT_EQ(1, wait_cq(b, {&a, &c}, &e));
    EXPECT_EQ(1, got);
    c.close();
}

/*
 * A multi-receive buffer takes messages one after the other until less
 * than FI_OPT_MIN_MULTI_RECV is left; a receive posted after it gets
 * nothing before it is released.
 */
TEST_F(OfiMsgPair, MultiRecvBufferFillsInOrder)
{
    size_t min = 64;
    ASSERT_EQ(0, fi_setopt(&b.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min,
                           sizeof(min)));
    char mbuf[256], after[64];
    struct iovec iov = {mbuf, sizeof(mbuf)};
    struct fi_msg msg;
    struct fi_context mctx, actx, sctx[5];
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov   = &iov;
    msg.iov_count = 1;
    msg.addr      = FI_ADDR_UNSPEC;
    msg.context   = &mctx;
    ASSERT_EQ(0, fi_recvmsg(b.ep, &msg, FI_MULTI_RECV));
    ASSERT_EQ(0, fi_recv(b.ep, after, sizeof(after), NULL, FI_ADDR_UNSPEC, &actx));

    char s[5][64];
    for (int i = 0; i < 5; ++i) {
        memset(s[i], 'a' + i, sizeof(s[i]));
        ASSERT_EQ(0, fi_send(a.ep, s[i], sizeof(s[i]), NULL, a_to_b, &sctx[i]));
    }
    struct fi_cq_tagged_entry e;
    for (int i = 0; i < 4; ++i) {
        ASSERT_EQ(1, wait_cq(b, {&a}, &e)) << "message " << i;
        EXPECT_EQ(&mctx, e.op_context);
        EXPECT_EQ((void *)(mbuf + 64 * i), e.buf) << "message " << i;
        EXPECT_EQ(64u, e.len);
        EXPECT_EQ(i == 3, (e.flags & FI_MULTI_RECV) != 0) << "message " << i;
        EXPECT_EQ(0, memcmp(mbuf + 64 * i, s[i], 64));
    }
    ASSERT_EQ(1, wait_cq(b, {&a}, &e));
    EXPECT_EQ(&actx, e.op_context);
    EXPECT_EQ(0, memcmp(after, s[4], 64));
}

/* FI_DELIVERY_COMPLETE: the send completes once the receiver has taken the message. */
TEST_F(OfiMsgPair, DeliveryCompleteWaitsForTheReceiver)
{
    int v = 3, got = 0;
    struct iovec iov = {&v, sizeof(v)};
    struct fi_msg msg;
    struct fi_context sctx, rctx;
    struct fi_cq_tagged_entry e;
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov   = &iov;
    msg.iov_count = 1;
    msg.addr      = a_to_b;
    msg.context   = &sctx;
    ASSERT_EQ(0, fi_sendmsg(a.ep, &msg, FI_DELIVERY_COMPLETE | FI_COMPLETION));
    double until = now_sec() + 0.3;
    while (now_sec() < until) {
        ASSERT_EQ(-FI_EAGAIN, fi_cq_read(a.cq, &e, 1));
        (void)fi_cq_read(b.cq, &e, 0);
    }
    ASSERT_EQ(0, fi_recv(b.ep, &got, sizeof(got), NULL, FI_ADDR_UNSPEC, &rctx));
    ASSERT_EQ(1, wait_cq(a, {&b}, &e));
    EXPECT_EQ(&sctx, e.op_context);
    ASSERT_EQ(1, wait_cq(b, {&a}, &e));
    EXPECT_EQ(3, got);
}

/* Counters count completions (errors apart), poll sets report what moved, MRs register. */
TEST_F(OfiMsgPair, CountersPollSetsAndRegistration)
{
    int v[3] = {1, 2, 3}, r[3];
    struct fi_context sctx[3], rctx[3];
    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(0, fi_recv(b.ep, &r[i], sizeof(int), NULL, FI_ADDR_UNSPEC, &rctx[i]));
        ASSERT_EQ(0, fi_send(a.ep, &v[i], sizeof(int), NULL, a_to_b, &sctx[i]));
    }
    /* Waiting on b's counter progresses b only: a's sends were progressed by their call. */
    struct fi_poll_attr pattr;
    struct fid_poll *pollset;
    memset(&pattr, 0, sizeof(pattr));
    ASSERT_EQ(0, fi_poll_open(b.domain, &pattr, &pollset));
    ASSERT_EQ(0, fi_poll_add(pollset, &b.rx_cntr->fid, 0));
    ASSERT_EQ(0, fi_cntr_wait(b.rx_cntr, 3, 20000));
    EXPECT_EQ(0, fi_cntr_wait(a.tx_cntr, 3, 20000));
    EXPECT_EQ(3u, fi_cntr_read(a.tx_cntr));
    EXPECT_EQ(0u, fi_cntr_read(a.rx_cntr));
    EXPECT_EQ(-FI_ETIMEDOUT, fi_cntr_wait(b.rx_cntr, 4, 100));

    void *ctxs[4];
    EXPECT_EQ(1, fi_poll(pollset, ctxs, 4));    /* the counter moved */
    EXPECT_EQ((void *)&b.rx_cntr, ctxs[0]);
    EXPECT_EQ(0, fi_poll(pollset, ctxs, 4));    /* not since */
    ASSERT_EQ(0, fi_poll_add(pollset, &b.cq->fid, 0));
    EXPECT_EQ(1, fi_poll(pollset, ctxs, 4));    /* b's CQ holds three entries */
    EXPECT_EQ(nullptr, ctxs[0]);                /* the CQ's context */
    ASSERT_EQ(0, fi_poll_del(pollset, &b.cq->fid, 0));
    ASSERT_EQ(0, fi_poll_del(pollset, &b.rx_cntr->fid, 0));
    EXPECT_EQ(0, fi_close(&pollset->fid));
    EXPECT_EQ(0, fi_cntr_set(b.rx_cntr, 10));
    EXPECT_EQ(0, fi_cntr_add(b.rx_cntr, 2));
    EXPECT_EQ(12u, fi_cntr_read(b.rx_cntr));

    struct fid_mr *mr;
    char buf[128];
    ASSERT_EQ(0, fi_mr_reg(a.domain, buf, sizeof(buf), FI_SEND | FI_RECV, 0, 42, 0, &mr, NULL));
    EXPECT_EQ(42u, fi_mr_key(mr));
    EXPECT_EQ(0, fi_close(&mr->fid));
    /* Remote access maps the memory: the key is the requested one (no FI_MR_PROV_KEY). */
    ASSERT_EQ(0, fi_mr_reg(a.domain, buf, sizeof(buf), FI_REMOTE_WRITE, 0, 43, 0, &mr, NULL));
    EXPECT_EQ(43u, fi_mr_key(mr));
    EXPECT_EQ(0, fi_close(&mr->fid));
}

/* Endpoints of one domain have their own matching: each gets its own messages. */
TEST_F(OfiProvider, EndpointsOfOneDomainMatchSeparately)
{
    Node a, b;
    ASSERT_EQ(0, a.open());
    ASSERT_EQ(0, b.open());
    struct fid_ep *ep2 = NULL;
    struct fid_cq *cq2 = NULL;
    ASSERT_EQ(0, b.open_second_ep(&ep2, &cq2));
    char name2[64];
    size_t len2 = sizeof(name2);
    ASSERT_EQ(0, fi_getname(&ep2->fid, name2, &len2));
    EXPECT_NE(0, memcmp(name2, b.name, len2));

    fi_addr_t to_b1 = a.insert(b.name), to_b2 = a.insert(name2);
    int one = 1, two = 2, got1 = 0, got2 = 0;
    struct fi_context ctx[4];
    struct fi_cq_tagged_entry e;
    ASSERT_EQ(0, fi_tsend(a.ep, &two, sizeof(int), NULL, to_b2, 5, &ctx[0]));
    ASSERT_EQ(0, fi_tsend(a.ep, &one, sizeof(int), NULL, to_b1, 5, &ctx[1]));
    ASSERT_EQ(0, fi_trecv(b.ep, &got1, sizeof(int), NULL, FI_ADDR_UNSPEC, 5, 0, &ctx[2]));
    ASSERT_EQ(0, fi_trecv(ep2, &got2, sizeof(int), NULL, FI_ADDR_UNSPEC, 5, 0, &ctx[3]));
    ASSERT_EQ(1, wait_cq(b, {&a}, &e));
    EXPECT_EQ(&ctx[2], e.op_context);
    double deadline = now_sec() + kTimeout;
    ssize_t ret;
    while (((ret = fi_cq_read(cq2, &e, 1)) == -FI_EAGAIN) && (now_sec() < deadline)) {
        (void)fi_cq_read(a.cq, &e, 0);
    }
    ASSERT_EQ(1, ret);
    EXPECT_EQ(&ctx[3], e.op_context);
    EXPECT_EQ(1, got1);
    EXPECT_EQ(2, got2);
    EXPECT_EQ(0, fi_close(&ep2->fid));
    EXPECT_EQ(0, fi_close(&cq2->fid));
}

/* ---------------------------------------------------------------- two processes */

/* Child: echo kRounds tagged messages back with their data + 1, then exit 0. */
const int kRounds = 200;

int child_main(int rd, int wr)
{
    Node n;
    char peer[64];
    if (n.open() != 0) return 2;
    if (write(wr, n.name, sizeof(n.name)) != (ssize_t)sizeof(n.name)) return 3;
    if (read(rd, peer, sizeof(peer)) != (ssize_t)sizeof(peer)) return 4;
    fi_addr_t p = FI_ADDR_NOTAVAIL;
    if (fi_av_insert(n.av, peer, 1, &p, 0, NULL) != 1) return 5;

    std::vector<char> buf(70000);
    struct fi_context rctx, sctx;
    struct fi_cq_tagged_entry e;
    for (int i = 0; i < kRounds; ++i) {
        if (fi_trecv(n.ep, buf.data(), buf.size(), NULL, p, 0x40, 0xff, &rctx) != 0) return 6;
        if (wait_cq(n, {}, &e) != 1) return 7;
        if (!(e.flags & FI_REMOTE_CQ_DATA)) return 8;
        ssize_t r;
        while ((r = fi_tsenddata(n.ep, buf.data(), e.len, NULL, e.data + 1, p, e.tag + 1,
                                 &sctx)) == -FI_EAGAIN) {
        }
        if (r != 0) return 9;
        if (wait_cq(n, {}, &e) != 1) return 10;
    }
    /* Wait for the parent's goodbye so no message is in flight when we go. */
    if (read(rd, peer, 1) < 0) return 11;
    return 0;
}

TEST_F(OfiProvider, TwoProcessesPingPong)
{
    int to_child[2], to_parent[2];
    ASSERT_EQ(0, pipe(to_child));
    ASSERT_EQ(0, pipe(to_parent));
    use_build_provider();
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        alarm(60);
        _exit(child_main(to_child[0], to_parent[1]));
    }
    Node n;
    char peer[64];
    ASSERT_EQ(0, n.open());
    ASSERT_EQ((ssize_t)sizeof(peer), read(to_parent[0], peer, sizeof(peer)));
    ASSERT_EQ((ssize_t)sizeof(n.name), write(to_child[1], n.name, sizeof(n.name)));
    fi_addr_t p = n.insert(peer);

    std::vector<char> sbuf(65536), rbuf(65536);
    struct fi_context sctx, rctx;
    struct fi_cq_tagged_entry e;
    size_t sizes[] = {0, 1, 8, 100, 4096, 9000, 65536};
    for (int i = 0; i < kRounds; ++i) {
        size_t len = sizes[i % (sizeof(sizes) / sizeof(sizes[0]))];
        for (size_t j = 0; j < len; ++j) sbuf[j] = (char)(i + j);
        ASSERT_EQ(0, fi_trecv(n.ep, rbuf.data(), rbuf.size(), NULL, p, 0x41, 0, &rctx));
        ASSERT_EQ(0, fi_tsenddata(n.ep, sbuf.data(), len, NULL, (uint64_t)i, p, 0x40, &sctx));
        int got_send = 0, got_recv = 0;
        while (!(got_send && got_recv)) {
            ASSERT_EQ(1, wait_cq(n, {}, &e)) << "round " << i;
            if (e.op_context == &sctx) {
                got_send = 1;
            } else {
                ASSERT_EQ(&rctx, e.op_context);
                EXPECT_EQ(len, e.len);
                EXPECT_EQ((uint64_t)i + 1, e.data);
                EXPECT_EQ(0x41u, e.tag);
                ASSERT_EQ(0, memcmp(sbuf.data(), rbuf.data(), len)) << "round " << i;
                got_recv = 1;
            }
        }
    }
    ASSERT_EQ(1, write(to_child[1], "x", 1));
    int status = 0;
    ASSERT_EQ(pid, waitpid(pid, &status, 0));
    EXPECT_TRUE(WIFEXITED(status) && (WEXITSTATUS(status) == 0)) << "child status " << status;
    for (int fd : {to_child[0], to_child[1], to_parent[0], to_parent[1]}) ::close(fd);
}

TEST_F(OfiProvider, PeerDeathGivesErrorsNotHangs)
{
    int to_parent[2], to_child[2];
    ASSERT_EQ(0, pipe(to_parent));
    ASSERT_EQ(0, pipe(to_child));
    use_build_provider();
    setenv("AXON_TLS", "tcp", 1);   /* tcp sees a dead peer at once (reset) */
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        alarm(60);
        Node c;
        char peer[64];
        if (c.open() != 0) _exit(2);
        if (write(to_parent[1], c.name, sizeof(c.name)) != 64) _exit(3);
        if (read(to_child[0], peer, sizeof(peer)) != 64) _exit(4);
        fi_addr_t p;
        if (fi_av_insert(c.av, peer, 1, &p, 0, NULL) != 1) _exit(5);
        int v = 1;
        struct fi_context ctx;
        struct fi_cq_tagged_entry e;
        if (fi_tsend(c.ep, &v, sizeof(v), NULL, p, 1, &ctx) != 0) _exit(6);
        if (wait_cq(c, {}, &e) != 1) _exit(7);
        pause();   /* until killed */
        _exit(0);
    }
    Node n;
    char peer[64];
    ASSERT_EQ(0, n.open());
    unsetenv("AXON_TLS");
    ASSERT_EQ(64, read(to_parent[0], peer, sizeof(peer)));
    ASSERT_EQ(64, write(to_child[1], n.name, sizeof(n.name)));
    fi_addr_t p = n.insert(peer);
    int got = 0;
    struct fi_context rctx, sctx;
    struct fi_cq_tagged_entry e;
    ASSERT_EQ(0, fi_trecv(n.ep, &got, sizeof(got), NULL, p, 1, 0, &rctx));
    ASSERT_EQ(1, wait_cq(n, {}, &e));
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);

    /* Sends to the dead peer end in error entries within the timeout, never a hang. */
    std::vector<char> big(1 << 20);
    struct fi_cq_err_entry err;
    ssize_t ret = 1;
    double deadline = now_sec() + kTimeout;
    while ((ret == 1) && (now_sec() < deadline)) {
        ssize_t s = fi_tsend(n.ep, big.data(), big.size(), NULL, p, 2, &sctx);
        if (s == -FI_EAGAIN) continue;
        ASSERT_EQ(0, s);
        ret = wait_cq(n, {}, &e, &err);
    }
    ASSERT_EQ(-FI_EAVAIL, ret);
    EXPECT_NE(0, err.err);
    for (int fd : {to_child[0], to_child[1], to_parent[0], to_parent[1]}) ::close(fd);
}

}  // namespace
