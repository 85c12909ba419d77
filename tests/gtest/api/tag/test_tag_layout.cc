/*
 * Tag messages with layouts (AXON_REQ_FLAG_LAYOUT) over every transport:
 * each kind of layout (layout_cases.h), eager and rendezvous, on the
 * sender, the receiver or both, received expected, unexpected and through
 * a probe, byte-exact against the packer of the test; truncation into a
 * layout; and every bad layout rejected with a log line naming its value.
 */
#include "tag_env.h"
#include "layout_cases.h"
#include "log_capture.h"

namespace {

class TagLayout : public ::testing::TestWithParam<TransportParam> {
protected:
    void Run(Role role0, Role role1) { run_roles(GetParam(), role0, role1); }
    void RunKind(int kind);
};

/* Which side of message i has the layout; its size class. */
enum { kSendLayout, kRecvLayout, kBothLayout, kDirections };

const int kMsgs = 2 * kDirections;

inline int msg_dir(int i) { return i % kDirections; }
inline size_t msg_want(int i) { return (i < kDirections) ? kLayoutSmall : kLayoutLarge; }
inline uint64_t msg_seed_of(int kind, int round, int i) { return 1000 * kind + 100 * round + i; }

/* The message's data: the layout's packed bytes over a region filled with its seed. */
std::vector<uint8_t> msg_data(int kind, int i, uint64_t seed)
{
    std::unique_ptr<LayoutCase> lc = make_layout(kind, msg_want(i));
    lc->fill_pattern(seed);
    return lc->pack();
}

/* The sender's side of message i: posted, waited later. */
struct LayoutSend {
    std::unique_ptr<LayoutCase> lc;
    std::vector<uint8_t>        data;
    axon_request_param_t        param;
    axon_request_h              req    = nullptr;
    axon_status_t               status = AXON_ERR_NO_MESSAGE;

    void post(Env &env, int kind, int i, uint64_t seed, bool sync)
    {
        lc = make_layout(kind, msg_want(i));
        lc->fill_pattern(seed);
        data  = lc->pack();
        param = layout_param(*lc);
        const void                 *buf = lc->base;
        size_t                      len = lc->size;
        const axon_request_param_t *p   = &param;
        if (msg_dir(i) == kRecvLayout) {
            buf = data.data();
            p   = NULL;
        }
        status = sync ? axon_tag_send_sync_nb(env.ep(), buf, len, 700 + i, p, &req) :
                        axon_tag_send_nb(env.ep(), buf, len, 700 + i, p, &req);
        ASSERT_TRUE((status == AXON_OK) || (status == AXON_INPROGRESS))
            << lc->name() << " send " << i << ": " << axon_status_string(status);
    }
};

/* The receiver's side of message i. */
struct LayoutRecv {
    std::unique_ptr<LayoutCase> lc;
    std::vector<uint8_t>        contig;
    axon_request_param_t        param;
    axon_request_h              req    = nullptr;
    axon_status_t               status = AXON_ERR_NO_MESSAGE;
    axon_tag_recv_info_t        info   = {};

    bool layout() const { return param.flags & AXON_REQ_FLAG_LAYOUT; }

    void prepare(int kind, int i)
    {
        lc = make_layout(kind, msg_want(i));
        lc->fill_blank();
        param = layout_param(*lc);
        if (msg_dir(i) == kSendLayout) {
            param = {};
            contig.assign(lc->size + GuardedBuf::kGuard, kLayoutFill);
        }
        param.recv_info = &info;
    }
    void *buffer() { return layout() ? (void *)lc->base : (void *)contig.data(); }

    void post(Env &env, int i)
    {
        status = axon_tag_recv_nb(env.worker, buffer(), lc->size, 700 + i, AXON_TAG_MASK_FULL,
                                  &param, &req);
    }

    /* Wait and check the data against the sender's. */
    void finish(Env &env, int kind, int i, uint64_t seed)
    {
        std::string what = lc->name() + " message " + std::to_string(i);
        EXPECT_EQ(AXON_OK, env.wait(status, req, &info)) << what;
        EXPECT_EQ(lc->size, info.length) << what;
        std::vector<uint8_t> data = msg_data(kind, i, seed);
        if (layout()) {
            EXPECT_EQ("", lc->check_received(data)) << what;
        } else {
            EXPECT_EQ(0, memcmp(contig.data(), data.data(), data.size())) << what;
            EXPECT_TRUE(std::all_of(contig.begin() + lc->size, contig.end(),
                                    [](uint8_t c) { return c == kLayoutFill; }))
                << what << ": written past the buffer";
        }
    }
};

/*
 * Round 0: receives posted first (expected; one synchronous send). Round 1:
 * sends first (unexpected: the first taken by a probe and a matched receive).
 */
void TagLayout::RunKind(int kind)
{
    Run([&](Env &env) {
        LayoutRecv rx[kMsgs];
        for (int i = 0; i < kMsgs; ++i) {
            rx[i].prepare(kind, i);
            rx[i].post(env, i);
        }
        ASSERT_TRUE(env.barrier());
        for (int i = 0; i < kMsgs; ++i) {
            rx[i].finish(env, kind, i, msg_seed_of(kind, 0, i));
        }
        ASSERT_TRUE(env.barrier());

        LayoutRecv ux[kMsgs];
        ASSERT_TRUE(env.barrier());
        axon_tag_message_h msg = nullptr;
        ASSERT_TRUE(env.progress_until([&] {
            return axon_tag_probe_nb(env.worker, 700, AXON_TAG_MASK_FULL, 1, NULL, &msg) ==
                   AXON_OK;
        }));
        ux[0].prepare(kind, 0);
        ux[0].status = axon_tag_msg_recv_nb(env.worker, ux[0].buffer(), ux[0].lc->size, msg,
                                            &ux[0].param, &ux[0].req);
        axon_test_progress_for(env.worker, 0.02);
        for (int i = 1; i < kMsgs; ++i) {
            ux[i].prepare(kind, i);
            ux[i].post(env, i);
        }
        for (int i = 0; i < kMsgs; ++i) {
            ux[i].finish(env, kind, i, msg_seed_of(kind, 1, i));
        }
    }, [&](Env &env) {
        for (int round = 0; round < 2; ++round) {
            LayoutSend tx[kMsgs];
            if (round == 0) {
                ASSERT_TRUE(env.barrier());
            }
            for (int i = 0; i < kMsgs; ++i) {
                ASSERT_NO_FATAL_FAILURE(tx[i].post(env, kind, i, msg_seed_of(kind, round, i),
                                                   (round == 0) && (i == kBothLayout)));
            }
            if (round == 1) {
                ASSERT_TRUE(env.barrier());
            }
            for (int i = 0; i < kMsgs; ++i) {
                EXPECT_EQ(AXON_OK, env.wait(tx[i].status, tx[i].req, NULL))
                    << tx[i].lc->name() << " send " << i;
            }
            if (round == 0) {
                ASSERT_TRUE(env.barrier());
            }
        }
    });
}

TEST_P(TagLayout, IovEveryDirection) { RunKind(kLayoutIov); }
TEST_P(TagLayout, StridedEveryDirection) { RunKind(kLayoutStrided); }
TEST_P(TagLayout, StridedOfStridedEveryDirection) { RunKind(kLayoutStridedStrided); }
TEST_P(TagLayout, StridedOfIovEveryDirection) { RunKind(kLayoutStridedIov); }

/* A message longer than the receiving layout fills the layout only, then reports truncation. */
TEST_P(TagLayout, LongerMessageTruncatesIntoLayout)
{
    const size_t kExtra = 333;

    Run([&](Env &env) {
        ASSERT_TRUE(env.barrier());
        for (int kind = 0; kind < kLayoutKinds; ++kind) {
            for (size_t want : {kLayoutSmall, kLayoutLarge}) {
                std::unique_ptr<LayoutCase> lc = make_layout(kind, want);
                std::string what = lc->name() + ", " + std::to_string(lc->size) + " bytes";
                axon_tag_recv_info_t info  = {};
                axon_request_param_t param = layout_param(*lc);
                axon_request_h       req   = nullptr;
                lc->fill_blank();
                axon_status_t status = axon_tag_recv_nb(env.worker, lc->base, lc->size, 800,
                                                        AXON_TAG_MASK_FULL, &param, &req);
                EXPECT_EQ(AXON_ERR_MSG_TRUNCATED, env.wait(status, req, &info)) << what;
                EXPECT_EQ(lc->size + kExtra, info.length) << what;
                std::vector<uint8_t> sent(lc->size + kExtra);
                fill_msg(sent.data(), sent.size(), lc->size);
                EXPECT_EQ("", lc->check_received(sent)) << what;
            }
        }
    }, [&](Env &env) {
        ASSERT_TRUE(env.barrier());
        for (int kind = 0; kind < kLayoutKinds; ++kind) {
            for (size_t want : {kLayoutSmall, kLayoutLarge}) {
                size_t               size = make_layout(kind, want)->size;
                std::vector<uint8_t> msg(size + kExtra);
                fill_msg(msg.data(), msg.size(), size);
                ASSERT_EQ(AXON_OK, env.send(msg.data(), msg.size(), 800));
            }
        }
    });
}

/* Every transport once; tcp_rndv and the *_rndv lanes make the large messages smaller too. */
const TransportParam kLayoutLanes[] = {
    {"self", "self", 1},
    {"shm", "shm", 1},
    {"tcp", "tcp", 1},
    {"rc", "rc", 1},
    {"ud", "ud", 1},
    {"dc", "dc", 1},
};
/* Rendezvous from 1 KiB, so the small messages take it too; CMA forced, off or split
 * (lent runs of any size: the default streams runs under 1 KiB on average). */
const TransportParam kLayoutVariants[] = {
    {"shm_rndv", "shm", 1, false,
     {{"RNDV_THRESH", "1K"}, {"RNDV_SCHEME", "get"}, {"RNDV_RUNS_MIN", "0"}}},
    {"shm_nocma", "shm", 1, false, {{"RNDV_THRESH", "1K"}, {"SHM_CMA", "n"}}},
    /* both sides copy (split) from 4 KiB: lent runs read and written by both */
    {"shm_split", "shm", 1, false,
     {{"RNDV_THRESH", "1K"}, {"RNDV_SPLIT_THRESH", "4K"}, {"RNDV_RUNS_MIN", "0"}}},
    {"tcp_rndv", "tcp", 1, false, {{"RNDV_THRESH", "1K"}}},
    {"rc_rndv", "rc", 1, false, {{"RNDV_THRESH", "1K"}}},
};

INSTANTIATE_TEST_SUITE_P(Lanes, TagLayout, ::testing::ValuesIn(kLayoutLanes), transport_name);
INSTANTIATE_TEST_SUITE_P(Variants, TagLayout, ::testing::ValuesIn(kLayoutVariants),
                         transport_name);

/* ---------------------------------------------------------------- bad layouts */

class TagLayoutCheck : public ::testing::Test {
protected:
    void SetUp() override
    {
        ASSERT_EQ(AXON_OK, axon_test_node_create(&ng_.node, "self", NULL, 0));
        ASSERT_EQ(AXON_OK, axon_test_ep_create(ng_.node.worker, ng_.node.address,
                                               ng_.node.address_length, &ep_));
    }
    void TearDown() override
    {
        if (ep_ != nullptr) {
            axon_test_ep_close(ng_.node.worker, ep_, AXON_EP_CLOSE_FORCE, 1.0);
        }
    }

    /* Send and receive of layout over buf: both rejected (recv: dest_only says the send
     * is fine) with a line containing words. */
    void expect_rejected(const axon_layout_t &layout, size_t length, const char *words,
                         bool dest_only = false)
    {
        axon_request_param_t param = {};
        axon_request_h       req   = nullptr;
        param.flags  = AXON_REQ_FLAG_LAYOUT;
        param.layout = &layout;
        if (!dest_only) {
            LogCapture log;
            EXPECT_EQ(AXON_ERR_INVALID_PARAM,
                      axon_tag_send_nb(ep_, buf_, length, 1, &param, &req)) << words;
            EXPECT_TRUE(log.any_contains(words)) << "send: no line saying " << words;
        }
        LogCapture log;
        EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_tag_recv_nb(ng_.node.worker, buf_, length, 1,
                                                           AXON_TAG_MASK_FULL, &param, &req))
            << words;
        EXPECT_TRUE(log.any_contains(words)) << "recv: no line saying " << words;
    }

    NodeGuard ng_;
    axon_ep_h ep_ = nullptr;
    uint8_t   buf_[256];
};

TEST_F(TagLayoutCheck, EachBadLayoutNamesItsValue)
{
    axon_layout_t bad = {};
    bad.kind = 7;
    expect_rejected(bad, 0, "layout kind 7");

    axon_layout_t iov = {};
    iov.kind      = AXON_LAYOUT_IOV;
    iov.iov.count = 3;
    expect_rejected(iov, 0, "NULL pieces and count 3");

    axon_layout_piece_t overflow[1] = {{PTRDIFF_MAX - 4, 10}};
    iov.iov.pieces = overflow;
    iov.iov.count  = 1;
    expect_rejected(iov, 10, "offset 9223372036854775803, length 10");

    axon_layout_t strided = {};
    strided.kind                 = AXON_LAYOUT_STRIDED;
    strided.strided.count        = SIZE_MAX / 2;
    strided.strided.block_length = 4;
    strided.strided.stride       = 4;
    expect_rejected(strided, 0, "count 9223372036854775807 x 4-byte blocks overflows size_t");

    strided.strided.count        = (size_t)1 << 40;
    strided.strided.block_length = 1;
    strided.strided.stride       = (ptrdiff_t)1 << 40;
    expect_rejected(strided, (size_t)1 << 40, "count 1099511627776 x stride 1099511627776");

    /* Three levels: strided of strided of bytes, itself in a strided. */
    axon_layout_t inner = {};
    inner.kind                 = AXON_LAYOUT_STRIDED;
    inner.strided.count        = 2;
    inner.strided.block_length = 2;
    inner.strided.stride       = 4;
    axon_layout_t middle = inner;
    middle.strided.block = &inner;
    axon_layout_t outer = middle;
    outer.strided.stride = 16;
    outer.strided.block  = &middle;
    expect_rejected(outer, 16, "nested 3 levels deep");

    /* A good layout with a wrong length. */
    expect_rejected(inner, 5, "length 5 is not the layout's size 4");

    /* Overlapping pieces: fine to send from, not to receive into. */
    axon_layout_piece_t overlap[2] = {{0, 10}, {5, 10}};
    iov.iov.pieces = overlap;
    iov.iov.count  = 2;
    expect_rejected(iov, 20, "overlap: offset 0 (10 bytes) and offset 5 (10 bytes)", true);
    strided.strided.count        = 3;
    strided.strided.block_length = 8;
    strided.strided.stride       = -6;
    expect_rejected(strided, 24, "overlap", true);
}

/* Sources may overlap, pieces may be empty, layouts may be empty. */
TEST_F(TagLayoutCheck, OverlappingSourceAndEmptyLayoutsAreAccepted)
{
    axon_layout_piece_t  pieces[3] = {{0, 10}, {5, 0}, {4, 10}};
    axon_layout_t        iov       = {};
    axon_request_param_t sparam    = {};
    axon_request_param_t rparam    = {};
    axon_tag_recv_info_t info      = {};
    axon_request_h       sreq = nullptr, rreq = nullptr;
    uint8_t              in[20];
    axon_worker_h        w = ng_.node.worker;

    iov.kind       = AXON_LAYOUT_IOV;
    iov.iov.pieces = pieces;
    iov.iov.count  = 3;
    sparam.flags   = AXON_REQ_FLAG_LAYOUT;
    sparam.layout  = &iov;
    for (int i = 0; i < 20; ++i) {
        buf_[i] = (uint8_t)i;
    }
    axon_status_t rs = axon_tag_recv_nb(w, in, sizeof(in), 2, AXON_TAG_MASK_FULL, NULL, &rreq);
    axon_status_t ss = axon_tag_send_nb(ep_, buf_, 20, 2, &sparam, &sreq);
    EXPECT_EQ(AXON_OK, axon_test_wait_req(w, ss, sreq, NULL, 5.0));
    EXPECT_EQ(AXON_OK, axon_test_wait_req(w, rs, rreq, &info, 5.0));
    EXPECT_EQ(20u, info.length);
    for (int i = 0; i < 20; ++i) {
        EXPECT_EQ((i < 10) ? i : i - 6, in[i]) << "byte " << i;
    }

    /* An empty layout over a NULL base: a zero-length message. */
    axon_layout_t empty = {};
    empty.kind           = AXON_LAYOUT_STRIDED;
    empty.strided.stride = 1;
    rparam.flags  = AXON_REQ_FLAG_LAYOUT;
    rparam.layout = &empty;
    sparam.layout = &empty;
    rs = axon_tag_recv_nb(w, NULL, 0, 3, AXON_TAG_MASK_FULL, &rparam, &rreq);
    ss = axon_tag_send_nb(ep_, NULL, 0, 3, &sparam, &sreq);
    EXPECT_EQ(AXON_OK, axon_test_wait_req(w, ss, sreq, NULL, 5.0));
    EXPECT_EQ(AXON_OK, axon_test_wait_req(w, rs, rreq, &info, 5.0));
    EXPECT_EQ(0u, info.length);
}

/* AXON_REQ_FLAG_INJECT with a layout: the pieces may change once the call returns. */
TEST_F(TagLayoutCheck, InjectedLayoutIsPackedAtTheCall)
{
    axon_worker_h w = ng_.node.worker;

    for (size_t want : {kLayoutSmall, kLayoutLarge}) {
        std::unique_ptr<LayoutCase> lc = make_layout(kLayoutStridedIov, want);
        axon_request_param_t        param = layout_param(*lc);
        std::vector<uint8_t>        in(lc->size);
        axon_tag_recv_info_t        info = {};
        axon_request_h              sreq = nullptr, rreq = nullptr;

        lc->fill_pattern(want);
        std::vector<uint8_t> sent = lc->pack();
        param.flags |= AXON_REQ_FLAG_INJECT;
        axon_status_t ss = axon_tag_send_nb(ep_, lc->base, lc->size, 4, &param, &sreq);
        ASSERT_TRUE((ss == AXON_OK) || (ss == AXON_INPROGRESS)) << axon_status_string(ss);
        lc->fill_blank();
        axon_request_param_t rparam = {};
        rparam.recv_info = &info;
        axon_status_t rs = axon_tag_recv_nb(w, in.data(), in.size(), 4, AXON_TAG_MASK_FULL,
                                            &rparam, &rreq);
        EXPECT_EQ(AXON_OK, axon_test_wait_req(w, rs, rreq, &info, 5.0)) << want;
        EXPECT_EQ(AXON_OK, axon_test_wait_req(w, ss, sreq, NULL, 5.0)) << want;
        EXPECT_EQ(lc->size, info.length);
        EXPECT_TRUE(in == sent) << lc->size << "-byte injected layout send";
    }
}

}  // namespace
