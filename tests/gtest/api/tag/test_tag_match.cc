/*
 * Unit tests for the tag matching engine (api/tag/tag_match.c): ordering rules
 * between hashed and wildcard receives, arrival order of unexpected messages,
 * probe/cancel/removal, hash collisions, and a randomized comparison with a
 * plain linear-scan reference model.
 */
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <vector>

#include <gtest/gtest.h>

extern "C" {
#include "tag_match.h"
}

namespace {

const axon_tag_t MASK_HIGH = 0xffffffff00000000ull;  /* "family": high half only */
const axon_tag_t MASK_LOW  = 0x00000000ffffffffull;

/* Keeps every posted/queued element at a stable address for the test's life. */
class TagMatch : public ::testing::Test {
protected:
    void SetUp() override
    {
        ASSERT_EQ(AXON_OK, axon_tm_init(&m_tm, 6));
        m_inited = true;
    }

    void TearDown() override
    {
        if (m_inited) {
            axon_tm_cleanup(&m_tm);
        }
    }

    void reinit(unsigned hash_bits)
    {
        axon_tm_cleanup(&m_tm);
        m_inited = false;
        ASSERT_EQ(AXON_OK, axon_tm_init(&m_tm, hash_bits));
        m_inited = true;
    }

    axon_tm_recv_t *post(axon_tag_t tag, axon_tag_t mask)
    {
        m_recvs.emplace_back();
        axon_tm_recv_t *recv = &m_recvs.back();
        recv->tag      = tag;
        recv->tag_mask = mask;
        axon_tm_post_recv(&m_tm, recv);
        return recv;
    }

    axon_tm_unexp_t *arrive(axon_tag_t tag)
    {
        m_unexps.emplace_back();
        axon_tm_unexp_t *unexp = &m_unexps.back();
        unexp->tag = tag;
        axon_tm_add_unexpected(&m_tm, unexp);
        return unexp;
    }

    axon_tag_match_t            m_tm;
    bool                        m_inited = false;
    std::deque<axon_tm_recv_t>  m_recvs;   /* deque: push_back keeps addresses */
    std::deque<axon_tm_unexp_t> m_unexps;
};

} // namespace

TEST_F(TagMatch, FullMaskExactMatch)
{
    axon_tm_recv_t *r = post(0x1234, AXON_TAG_MASK_FULL);

    EXPECT_EQ(r, axon_tm_match_expected(&m_tm, 0x1234, AXON_SENDER_ANY));
    /* Consumed: a second identical message finds nothing. */
    EXPECT_EQ(nullptr, axon_tm_match_expected(&m_tm, 0x1234, AXON_SENDER_ANY));
    EXPECT_EQ(0u, m_tm.num_expected);
}

TEST_F(TagMatch, NoMatchOnDifferentTag)
{
    axon_tm_recv_t *r = post(0x1234, AXON_TAG_MASK_FULL);

    EXPECT_EQ(nullptr, axon_tm_match_expected(&m_tm, 0x1235, AXON_SENDER_ANY));
    /* Differs only in the top bit: a full mask must still see it. */
    EXPECT_EQ(nullptr, axon_tm_match_expected(&m_tm, 0x1234 | (1ull << 63), AXON_SENDER_ANY));
    EXPECT_EQ(nullptr, axon_tm_match_expected(&m_tm, 0, AXON_SENDER_ANY));
    EXPECT_EQ(1u, m_tm.num_expected);
    /* The failed lookups did not disturb the receive. */
    EXPECT_EQ(r, axon_tm_match_expected(&m_tm, 0x1234, AXON_SENDER_ANY));
}

TEST_F(TagMatch, WildcardMatchesFamily)
{
    axon_tag_t      family = 0xabcd00000000ull;
    axon_tm_recv_t *r      = post(family | 0x55, MASK_HIGH);

    /* Other high half: not in the family. */
    EXPECT_EQ(nullptr, axon_tm_match_expected(&m_tm, 0xabce00000000ull | 0x55, AXON_SENDER_ANY));
    EXPECT_EQ(r, axon_tm_match_expected(&m_tm, family | 0x99, AXON_SENDER_ANY));

    r = post(family, MASK_HIGH);
    EXPECT_EQ(r, axon_tm_match_expected(&m_tm, family | 0xffffffffull, AXON_SENDER_ANY));

    /* A zero mask matches anything. */
    r = post(0, 0);
    EXPECT_EQ(r, axon_tm_match_expected(&m_tm, 0xdeadbeefcafef00dull, AXON_SENDER_ANY));
    EXPECT_EQ(0u, m_tm.num_expected);
}

TEST_F(TagMatch, HashedPostedFirstWins)
{
    axon_tm_recv_t *hashed = post(0x700000005ull, AXON_TAG_MASK_FULL);
    axon_tm_recv_t *wild   = post(0x700000000ull, MASK_HIGH);

    EXPECT_EQ(hashed, axon_tm_match_expected(&m_tm, 0x700000005ull, AXON_SENDER_ANY));
    EXPECT_EQ(wild, axon_tm_match_expected(&m_tm, 0x700000005ull, AXON_SENDER_ANY));
    EXPECT_EQ(nullptr, axon_tm_match_expected(&m_tm, 0x700000005ull, AXON_SENDER_ANY));
}

TEST_F(TagMatch, WildcardPostedFirstWins)
{
    axon_tm_recv_t *wild   = post(0x700000000ull, MASK_HIGH);
    axon_tm_recv_t *hashed = post(0x700000005ull, AXON_TAG_MASK_FULL);

    EXPECT_EQ(wild, axon_tm_match_expected(&m_tm, 0x700000005ull, AXON_SENDER_ANY));
    EXPECT_EQ(hashed, axon_tm_match_expected(&m_tm, 0x700000005ull, AXON_SENDER_ANY));
    EXPECT_EQ(nullptr, axon_tm_match_expected(&m_tm, 0x700000005ull, AXON_SENDER_ANY));
}

TEST_F(TagMatch, InterleavedHashedAndWildcardKeepPostOrder)
{
    axon_tag_t      tag = 0x42;
    axon_tm_recv_t *h1  = post(tag, AXON_TAG_MASK_FULL);
    axon_tm_recv_t *w1  = post(0, 0);
    axon_tm_recv_t *h2  = post(tag, AXON_TAG_MASK_FULL);
    axon_tm_recv_t *w2  = post(tag, MASK_LOW);

    EXPECT_EQ(h1, axon_tm_match_expected(&m_tm, tag, AXON_SENDER_ANY));
    EXPECT_EQ(w1, axon_tm_match_expected(&m_tm, tag, AXON_SENDER_ANY));
    EXPECT_EQ(h2, axon_tm_match_expected(&m_tm, tag, AXON_SENDER_ANY));
    EXPECT_EQ(w2, axon_tm_match_expected(&m_tm, tag, AXON_SENDER_ANY));
}

TEST_F(TagMatch, SameTagReceivesMatchInPostOrder)
{
    std::vector<axon_tm_recv_t*> posted;

    for (int i = 0; i < 50; ++i) {
        posted.push_back(post(77, AXON_TAG_MASK_FULL));
        post(78, AXON_TAG_MASK_FULL); /* noise in the same hash table */
    }
    for (int i = 0; i < 50; ++i) {
        EXPECT_EQ(posted[i], axon_tm_match_expected(&m_tm, 77, AXON_SENDER_ANY)) << "i=" << i;
    }
    EXPECT_EQ(nullptr, axon_tm_match_expected(&m_tm, 77, AXON_SENDER_ANY));
    EXPECT_EQ(50u, m_tm.num_expected);
}

TEST_F(TagMatch, WildcardReceivesMatchInPostOrder)
{
    axon_tm_recv_t *a = post(0x100000000ull, MASK_HIGH);
    axon_tm_recv_t *b = post(0x100000000ull, MASK_HIGH);
    axon_tm_recv_t *c = post(0x200000000ull, MASK_HIGH);

    /* c does not match; a then b do. */
    EXPECT_EQ(a, axon_tm_match_expected(&m_tm, 0x100000001ull, AXON_SENDER_ANY));
    EXPECT_EQ(b, axon_tm_match_expected(&m_tm, 0x100000002ull, AXON_SENDER_ANY));
    EXPECT_EQ(nullptr, axon_tm_match_expected(&m_tm, 0x100000003ull, AXON_SENDER_ANY));
    EXPECT_EQ(c, axon_tm_match_expected(&m_tm, 0x200000003ull, AXON_SENDER_ANY));
}

TEST_F(TagMatch, UnexpectedArrivalOrderFullMask)
{
    std::vector<axon_tm_unexp_t*> msgs;

    for (int i = 0; i < 20; ++i) {
        msgs.push_back(arrive(5));
        arrive(6);
    }
    for (int i = 0; i < 20; ++i) {
        EXPECT_EQ(msgs[i], axon_tm_match_unexpected(&m_tm, 5, AXON_TAG_MASK_FULL, AXON_SENDER_ANY, 1))
                << "i=" << i;
    }
    EXPECT_EQ(nullptr, axon_tm_match_unexpected(&m_tm, 5, AXON_TAG_MASK_FULL, AXON_SENDER_ANY, 1));
    EXPECT_EQ(20u, m_tm.num_unexpected);
}

TEST_F(TagMatch, UnexpectedArrivalOrderWildcard)
{
    axon_tm_unexp_t *m1 = arrive(0x300000009ull);
    axon_tm_unexp_t *x  = arrive(0x400000001ull);
    axon_tm_unexp_t *m2 = arrive(0x300000001ull);
    axon_tm_unexp_t *m3 = arrive(0x300000005ull);

    /* Arrival order across different tags (different buckets), not tag order. */
    EXPECT_EQ(m1, axon_tm_match_unexpected(&m_tm, 0x300000000ull, MASK_HIGH, AXON_SENDER_ANY, 1));
    EXPECT_EQ(m2, axon_tm_match_unexpected(&m_tm, 0x300000000ull, MASK_HIGH, AXON_SENDER_ANY, 1));
    EXPECT_EQ(m3, axon_tm_match_unexpected(&m_tm, 0x300000000ull, MASK_HIGH, AXON_SENDER_ANY, 1));
    EXPECT_EQ(nullptr, axon_tm_match_unexpected(&m_tm, 0x300000000ull, MASK_HIGH, AXON_SENDER_ANY, 1));
    EXPECT_EQ(x, axon_tm_match_unexpected(&m_tm, 0, 0, AXON_SENDER_ANY, 1));
    EXPECT_EQ(0u, m_tm.num_unexpected);
}

TEST_F(TagMatch, ProbeLeavesMessageQueued)
{
    axon_tm_unexp_t *a = arrive(11);
    axon_tm_unexp_t *b = arrive(11);

    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(a, axon_tm_match_unexpected(&m_tm, 11, AXON_TAG_MASK_FULL, AXON_SENDER_ANY, 0));
        EXPECT_EQ(a, axon_tm_match_unexpected(&m_tm, 0, 0, AXON_SENDER_ANY, 0));
    }
    EXPECT_EQ(2u, m_tm.num_unexpected);

    EXPECT_EQ(a, axon_tm_match_unexpected(&m_tm, 11, AXON_TAG_MASK_FULL, AXON_SENDER_ANY, 1));
    EXPECT_EQ(b, axon_tm_match_unexpected(&m_tm, 11, AXON_TAG_MASK_FULL, AXON_SENDER_ANY, 0));
    EXPECT_EQ(b, axon_tm_match_unexpected(&m_tm, 11, AXON_TAG_MASK_FULL, AXON_SENDER_ANY, 1));
    EXPECT_EQ(nullptr, axon_tm_match_unexpected(&m_tm, 11, AXON_TAG_MASK_FULL, AXON_SENDER_ANY, 0));
    EXPECT_EQ(0u, m_tm.num_unexpected);
}

TEST_F(TagMatch, CancelPostedReceive)
{
    axon_tm_recv_t *h1 = post(9, AXON_TAG_MASK_FULL);
    axon_tm_recv_t *h2 = post(9, AXON_TAG_MASK_FULL);
    axon_tm_recv_t *w1 = post(0, 0);
    axon_tm_recv_t *w2 = post(0, 0);
    EXPECT_EQ(4u, m_tm.num_expected);

    axon_tm_remove_recv(&m_tm, h1);
    axon_tm_remove_recv(&m_tm, w1);
    EXPECT_EQ(2u, m_tm.num_expected);

    /* h2 was posted before w2, so it wins now that h1 and w1 are gone. */
    EXPECT_EQ(h2, axon_tm_match_expected(&m_tm, 9, AXON_SENDER_ANY));
    EXPECT_EQ(w2, axon_tm_match_expected(&m_tm, 9, AXON_SENDER_ANY));
    EXPECT_EQ(nullptr, axon_tm_match_expected(&m_tm, 9, AXON_SENDER_ANY));
    EXPECT_EQ(0u, m_tm.num_expected);
}

TEST_F(TagMatch, RemoveUnexpectedFromMiddle)
{
    /* Same tag twice so the removed one sits in the middle of its bucket
     * as well as in the middle of the arrival list. */
    axon_tm_unexp_t *a = arrive(21);
    axon_tm_unexp_t *b = arrive(22);
    axon_tm_unexp_t *c = arrive(21);
    axon_tm_unexp_t *d = arrive(21);
    axon_tm_unexp_t *e = arrive(23);

    axon_tm_remove_unexpected(&m_tm, c);
    EXPECT_EQ(4u, m_tm.num_unexpected);

    /* Through the bucket view. */
    EXPECT_EQ(a, axon_tm_match_unexpected(&m_tm, 21, AXON_TAG_MASK_FULL, AXON_SENDER_ANY, 0));
    /* Through the arrival view: a, b, d, e. */
    EXPECT_EQ(a, axon_tm_match_unexpected(&m_tm, 0, 0, AXON_SENDER_ANY, 1));
    EXPECT_EQ(d, axon_tm_match_unexpected(&m_tm, 21, AXON_TAG_MASK_FULL, AXON_SENDER_ANY, 0));
    EXPECT_EQ(b, axon_tm_match_unexpected(&m_tm, 0, 0, AXON_SENDER_ANY, 1));
    /* d removed through the bucket must leave the arrival list too. */
    EXPECT_EQ(d, axon_tm_match_unexpected(&m_tm, 21, AXON_TAG_MASK_FULL, AXON_SENDER_ANY, 1));
    EXPECT_EQ(e, axon_tm_match_unexpected(&m_tm, 0, 0, AXON_SENDER_ANY, 0));
    EXPECT_EQ(nullptr, axon_tm_match_unexpected(&m_tm, 21, AXON_TAG_MASK_FULL, AXON_SENDER_ANY, 0));
    EXPECT_EQ(e, axon_tm_match_unexpected(&m_tm, 0, 0, AXON_SENDER_ANY, 1));
    EXPECT_EQ(nullptr, axon_tm_match_unexpected(&m_tm, 0, 0, AXON_SENDER_ANY, 0));
    EXPECT_EQ(0u, m_tm.num_unexpected);

    /* The removed element is not reachable from either list. */
    EXPECT_TRUE(axon_list_is_empty(&m_tm.unexp_all));
    for (unsigned i = 0; i <= m_tm.hash_mask; ++i) {
        EXPECT_TRUE(axon_list_is_empty(&m_tm.unexp_hash[i])) << "bucket " << i;
    }
}

TEST_F(TagMatch, HashCollisionsStayExact)
{
    const int                     n = 256;
    std::vector<axon_tm_recv_t*>  recvs;
    std::vector<axon_tm_unexp_t*> unexps;

    reinit(1); /* two buckets: nearly everything collides */

    for (int i = 0; i < n; ++i) {
        /* Tags that differ in low bits, high bits, and both. */
        recvs.push_back(post(((axon_tag_t)i << 40) | (axon_tag_t)i, AXON_TAG_MASK_FULL));
        unexps.push_back(arrive(((axon_tag_t)i << 40) | (axon_tag_t)(i + 1000)));
    }
    /* Match in reverse order so each lookup must skip colliding entries. */
    for (int i = n - 1; i >= 0; --i) {
        axon_tag_t rtag = ((axon_tag_t)i << 40) | (axon_tag_t)i;
        axon_tag_t utag = ((axon_tag_t)i << 40) | (axon_tag_t)(i + 1000);
        EXPECT_EQ(nullptr, axon_tm_match_unexpected(&m_tm, rtag, AXON_TAG_MASK_FULL, AXON_SENDER_ANY, 0));
        EXPECT_EQ(unexps[i], axon_tm_match_unexpected(&m_tm, utag, AXON_TAG_MASK_FULL, AXON_SENDER_ANY, 1));
        EXPECT_EQ(nullptr, axon_tm_match_expected(&m_tm, utag, AXON_SENDER_ANY));
        EXPECT_EQ(recvs[i], axon_tm_match_expected(&m_tm, rtag, AXON_SENDER_ANY));
    }
    EXPECT_EQ(0u, m_tm.num_expected);
    EXPECT_EQ(0u, m_tm.num_unexpected);
}

TEST_F(TagMatch, Counters)
{
    EXPECT_EQ(0u, m_tm.num_expected);
    EXPECT_EQ(0u, m_tm.num_unexpected);

    axon_tm_recv_t *r1 = post(1, AXON_TAG_MASK_FULL);
    post(2, MASK_LOW);
    post(3, AXON_TAG_MASK_FULL);
    EXPECT_EQ(3u, m_tm.num_expected);

    axon_tm_unexp_t *u1 = arrive(4);
    arrive(5);
    EXPECT_EQ(2u, m_tm.num_unexpected);
    EXPECT_EQ(3u, m_tm.num_expected);

    /* A failed match changes nothing. */
    EXPECT_EQ(nullptr, axon_tm_match_expected(&m_tm, 99, AXON_SENDER_ANY));
    EXPECT_EQ(nullptr, axon_tm_match_unexpected(&m_tm, 99, AXON_TAG_MASK_FULL, AXON_SENDER_ANY, 1));
    EXPECT_EQ(3u, m_tm.num_expected);
    EXPECT_EQ(2u, m_tm.num_unexpected);

    axon_tm_remove_recv(&m_tm, r1);
    EXPECT_EQ(2u, m_tm.num_expected);
    EXPECT_NE(nullptr, axon_tm_match_expected(&m_tm, 2, AXON_SENDER_ANY));
    EXPECT_EQ(1u, m_tm.num_expected);

    axon_tm_remove_unexpected(&m_tm, u1);
    EXPECT_EQ(1u, m_tm.num_unexpected);
    EXPECT_NE(nullptr, axon_tm_match_unexpected(&m_tm, 5, 0, AXON_SENDER_ANY, 0)); /* probe */
    EXPECT_EQ(1u, m_tm.num_unexpected);
    EXPECT_NE(nullptr, axon_tm_match_unexpected(&m_tm, 5, AXON_TAG_MASK_FULL, AXON_SENDER_ANY, 1));
    EXPECT_EQ(0u, m_tm.num_unexpected);
    EXPECT_EQ(1u, m_tm.num_expected);
}

TEST_F(TagMatch, EmptyQueuesMatchNothing)
{
    EXPECT_EQ(nullptr, axon_tm_match_expected(&m_tm, 0, AXON_SENDER_ANY));
    EXPECT_EQ(nullptr, axon_tm_match_unexpected(&m_tm, 0, 0, AXON_SENDER_ANY, 1));
    EXPECT_EQ(nullptr, axon_tm_match_unexpected(&m_tm, 0, AXON_TAG_MASK_FULL, AXON_SENDER_ANY, 0));

    /* Drained queues behave like fresh ones. */
    post(0, 0);
    arrive(0);
    EXPECT_NE(nullptr, axon_tm_match_expected(&m_tm, 0, AXON_SENDER_ANY));
    EXPECT_NE(nullptr, axon_tm_match_unexpected(&m_tm, 0, 0, AXON_SENDER_ANY, 1));
    EXPECT_EQ(nullptr, axon_tm_match_expected(&m_tm, 0, AXON_SENDER_ANY));
    EXPECT_EQ(nullptr, axon_tm_match_unexpected(&m_tm, 0, 0, AXON_SENDER_ANY, 1));
}

TEST(TagMatchInit, RejectsOutOfRangeHashBits)
{
    axon_tag_match_t tm;

    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_tm_init(&tm, 0));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_tm_init(&tm, 21));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_tm_init(&tm, 64));

    ASSERT_EQ(AXON_OK, axon_tm_init(&tm, 1));
    EXPECT_EQ(1u, tm.hash_mask);
    axon_tm_cleanup(&tm);

    ASSERT_EQ(AXON_OK, axon_tm_init(&tm, 20));
    EXPECT_EQ((1u << 20) - 1, tm.hash_mask);
    EXPECT_EQ(0u, tm.num_expected);
    EXPECT_EQ(0u, tm.num_unexpected);
    axon_tm_cleanup(&tm);
}

/* ------------------------------------------------------------ reference model */

namespace {

/* The obvious implementation: one vector per queue, scanned front to back. */
struct RefModel {
    struct Recv  { int id; axon_tag_t tag, mask; uint64_t sender; };
    struct Unexp { int id; axon_tag_t tag; uint64_t sender; };

    static bool sender_ok(uint64_t msg_sender, uint64_t want)
    {
        return (want == AXON_SENDER_ANY) || (want == msg_sender);
    }

    std::vector<Recv>  expected;    /* post order */
    std::vector<Unexp> unexpected;  /* arrival order */

    int match_expected(axon_tag_t msg_tag, uint64_t msg_sender)
    {
        for (size_t i = 0; i < expected.size(); ++i) {
            if ((((msg_tag ^ expected[i].tag) & expected[i].mask) == 0) &&
                sender_ok(msg_sender, expected[i].sender)) {
                int id = expected[i].id;
                expected.erase(expected.begin() + i);
                return id;
            }
        }
        return -1;
    }

    int match_unexpected(axon_tag_t tag, axon_tag_t mask, uint64_t sender, bool remove)
    {
        for (size_t i = 0; i < unexpected.size(); ++i) {
            if ((((unexpected[i].tag ^ tag) & mask) == 0) &&
                sender_ok(unexpected[i].sender, sender)) {
                int id = unexpected[i].id;
                if (remove) {
                    unexpected.erase(unexpected.begin() + i);
                }
                return id;
            }
        }
        return -1;
    }
};

struct RecvNode {
    axon_tm_recv_t r;   /* first member: node address == &r */
    int            id;
};

struct UnexpNode {
    axon_tm_unexp_t u;
    int             id;
};

int recv_id(axon_tm_recv_t *r)
{
    return (r == NULL) ? -1 : reinterpret_cast<RecvNode*>(r)->id;
}

int unexp_id(axon_tm_unexp_t *u)
{
    return (u == NULL) ? -1 : reinterpret_cast<UnexpNode*>(u)->id;
}

/*
 * Random operations mimicking how a worker drives the engine: an arriving
 * message first looks for a posted receive, else is queued; a new receive
 * first looks in the unexpected queue, else is posted. Plus probes, cancels
 * and removals. Every result is compared with the reference model.
 */
void run_random(unsigned hash_bits, uint64_t seed, int num_ops)
{
    static const axon_tag_t masks[] = {
        AXON_TAG_MASK_FULL, AXON_TAG_MASK_FULL, AXON_TAG_MASK_FULL,
        MASK_HIGH, MASK_LOW, 0, 0xff00ff00ff00ff00ull, ~(axon_tag_t)1
    };
    std::mt19937_64                          rng(seed);
    axon_tag_match_t                         tm;
    RefModel                                 ref;
    std::vector<std::unique_ptr<RecvNode>>   recv_nodes;
    std::vector<std::unique_ptr<UnexpNode>>  unexp_nodes;
    int                                      next_id = 0;

    ASSERT_EQ(AXON_OK, axon_tm_init(&tm, hash_bits));

    /* A small tag space so matches and collisions are frequent. */
    auto rand_tag = [&]() -> axon_tag_t {
        if (rng() % 16 == 0) {
            return rng();
        }
        return ((rng() % 3) << 32) | ((rng() % 3) << 8) | (rng() % 4);
    };
    auto rand_mask = [&]() -> axon_tag_t {
        return masks[rng() % (sizeof(masks) / sizeof(masks[0]))];
    };
    /* Three senders; half of the receives and probes take any of them. */
    auto rand_sender = [&]() -> uint64_t { return 0x5e00 + rng() % 3; };
    auto rand_want   = [&]() -> uint64_t {
        return (rng() % 2) ? AXON_SENDER_ANY : rand_sender();
    };
    auto find_recv = [&](int id) -> RecvNode* {
        for (auto &n : recv_nodes) {
            if (n->id == id) return n.get();
        }
        return nullptr;
    };
    auto find_unexp = [&](int id) -> UnexpNode* {
        for (auto &n : unexp_nodes) {
            if (n->id == id) return n.get();
        }
        return nullptr;
    };

    for (int op = 0; op < num_ops; ++op) {
        unsigned kind = rng() % 100;

        /* Keep the queues from growing without bound: bias toward draining. */
        if ((ref.expected.size() > 64) && (kind < 40)) {
            kind += 40;
        }
        if ((ref.unexpected.size() > 64) && (kind >= 40) && (kind < 80)) {
            kind -= 40;
        }

        if (kind < 40) {
            /* Message arrival. */
            axon_tag_t tag    = rand_tag();
            uint64_t   sender = rand_sender();
            int        got    = recv_id(axon_tm_match_expected(&tm, tag, sender));
            int        exp    = ref.match_expected(tag, sender);
            ASSERT_EQ(exp, got) << "arrival op " << op << " tag " << std::hex << tag;
            if (got < 0) {
                auto node      = std::unique_ptr<UnexpNode>(new UnexpNode());
                node->id       = next_id++;
                node->u.tag    = tag;
                node->u.sender = sender;
                axon_tm_add_unexpected(&tm, &node->u);
                ref.unexpected.push_back({node->id, tag, sender});
                unexp_nodes.push_back(std::move(node));
            } else {
                recv_nodes.erase(std::find_if(recv_nodes.begin(), recv_nodes.end(),
                        [&](const std::unique_ptr<RecvNode> &n) { return n->id == got; }));
            }
        } else if (kind < 80) {
            /* New receive. */
            axon_tag_t tag  = rand_tag();
            axon_tag_t mask = rand_mask();
            uint64_t   want = rand_want();
            int        got  = unexp_id(axon_tm_match_unexpected(&tm, tag, mask, want, 1));
            int        exp  = ref.match_unexpected(tag, mask, want, true);
            ASSERT_EQ(exp, got) << "recv op " << op;
            if (got < 0) {
                auto node        = std::unique_ptr<RecvNode>(new RecvNode());
                node->id         = next_id++;
                node->r.tag      = tag;
                node->r.tag_mask = mask;
                node->r.sender   = want;
                axon_tm_post_recv(&tm, &node->r);
                ref.expected.push_back({node->id, tag, mask, want});
                recv_nodes.push_back(std::move(node));
            } else {
                unexp_nodes.erase(std::find_if(unexp_nodes.begin(), unexp_nodes.end(),
                        [&](const std::unique_ptr<UnexpNode> &n) { return n->id == got; }));
            }
        } else if (kind < 90) {
            /* Probe. */
            axon_tag_t tag  = rand_tag();
            axon_tag_t mask = rand_mask();
            uint64_t   want = rand_want();
            int        got  = unexp_id(axon_tm_match_unexpected(&tm, tag, mask, want, 0));
            int        exp  = ref.match_unexpected(tag, mask, want, false);
            ASSERT_EQ(exp, got) << "probe op " << op;
        } else if (kind < 95) {
            /* Cancel a random posted receive. */
            if (!ref.expected.empty()) {
                size_t    idx  = rng() % ref.expected.size();
                int       id   = ref.expected[idx].id;
                RecvNode *node = find_recv(id);
                ASSERT_NE(nullptr, node);
                axon_tm_remove_recv(&tm, &node->r);
                ref.expected.erase(ref.expected.begin() + idx);
                recv_nodes.erase(std::find_if(recv_nodes.begin(), recv_nodes.end(),
                        [&](const std::unique_ptr<RecvNode> &n) { return n->id == id; }));
            }
        } else {
            /* Drop a random unexpected message (e.g. its endpoint closed). */
            if (!ref.unexpected.empty()) {
                size_t     idx  = rng() % ref.unexpected.size();
                int        id   = ref.unexpected[idx].id;
                UnexpNode *node = find_unexp(id);
                ASSERT_NE(nullptr, node);
                axon_tm_remove_unexpected(&tm, &node->u);
                ref.unexpected.erase(ref.unexpected.begin() + idx);
                unexp_nodes.erase(std::find_if(unexp_nodes.begin(), unexp_nodes.end(),
                        [&](const std::unique_ptr<UnexpNode> &n) { return n->id == id; }));
            }
        }

        ASSERT_EQ(ref.expected.size(), tm.num_expected) << "op " << op;
        ASSERT_EQ(ref.unexpected.size(), tm.num_unexpected) << "op " << op;
    }

    /* Drain both queues through the engine, in model order. */
    while (!ref.unexpected.empty()) {
        int exp = ref.unexpected.front().id;
        ASSERT_EQ(exp, unexp_id(axon_tm_match_unexpected(&tm, 0, 0, AXON_SENDER_ANY, 1)));
        ref.unexpected.erase(ref.unexpected.begin());
    }
    while (!ref.expected.empty()) {
        RefModel::Recv r = ref.expected.front();
        /* The receive's own tag (and sender) matches it and every receive
         * posted before it has already been drained, so it must come out first. */
        ASSERT_EQ(r.id, recv_id(axon_tm_match_expected(
                      &tm, r.tag, (r.sender == AXON_SENDER_ANY) ? 0x5e00 : r.sender)));
        ref.expected.erase(ref.expected.begin());
    }
    EXPECT_EQ(0u, tm.num_expected);
    EXPECT_EQ(0u, tm.num_unexpected);
    axon_tm_cleanup(&tm);
}

} // namespace

TEST(TagMatchRandom, AgainstReferenceModel)
{
    static const unsigned hash_bits[] = { 1, 2, 4, 10 };

    for (unsigned bits : hash_bits) {
        for (uint64_t seed = 1; seed <= 3; ++seed) {
            SCOPED_TRACE(::testing::Message() << "hash_bits=" << bits << " seed=" << seed);
            run_random(bits, seed * 7919 + bits, 5000);
            if (HasFatalFailure()) {
                return;
            }
        }
    }
}
