/*
 * softib's extended atomics (seed §8.7) at the device layer: masked
 * compare-and-swap and multi-field fetch-and-add on 4, 8, 16 and 32 bytes.
 *   - what the device reports, and CAP_MASK=ext_atomic taking it away;
 *   - post-time refusals (size, SGE, QP type, missing operand address);
 *   - random operands against this file's own model (written bit by bit,
 *     independently of framework/amo_cpu.c): the value returned (§8.7.2.2
 *     layout), the memory after, the bytes around untouched; also with the
 *     wire losing, duplicating and reordering packets, where an operation
 *     executed twice would leave the model behind;
 *   - access errors: nothing at the target changes;
 *   - concurrency: two devices of one process (each executing on its own
 *     thread) and a CPU thread hammer masked, standard and CPU atomics on
 *     shared words; every total comes out exact.
 */
#include "softib_env.h"

#include <atomic>
#include <random>
#include <thread>

namespace {

const int kLocalWrite = AXON_DEV_ACCESS_LOCAL_WRITE;
const int kRemoteAll  = AXON_DEV_ACCESS_LOCAL_WRITE | AXON_DEV_ACCESS_REMOTE_WRITE |
                        AXON_DEV_ACCESS_REMOTE_READ | AXON_DEV_ACCESS_REMOTE_ATOMIC;

const axon_dev_wr_opcode_t kMcs = AXON_DEV_WR_EXT_MASKED_ATOMIC_CMP_AND_SWP;
const axon_dev_wr_opcode_t kMfa = AXON_DEV_WR_EXT_MASKED_ATOMIC_FETCH_AND_ADD;

/* ---------------------------------------------------------------- the model */

/*
 * One operand (up to four 64-bit words, host order; a 4-byte operand in the
 * low half of word 0) and the fields of an operation on it.
 */
struct Op {
    axon_dev_wr_opcode_t opcode;
    unsigned             size;       /* 4, 8, 16, 32 */
    uint64_t             f[4][4];    /* MCS: compare_mask, compare, swap, swap_mask; MFA: add, boundary */
};

unsigned words_of(unsigned size)
{
    return (size <= 8) ? 1 : size / 8;
}

/* Multi-field add of one word, a bit at a time: a 1 of `ends` closes a field. */
uint64_t model_field_add(uint64_t a, uint64_t b, uint64_t ends, unsigned bits)
{
    uint64_t out = 0, carry = 0;

    for (unsigned i = 0; i < bits; ++i) {
        uint64_t s = ((a >> i) & 1) + ((b >> i) & 1) + carry;
        out |= (s & 1) << i;
        carry = s >> 1;
        if ((i == bits - 1) || ((ends >> i) & 1)) {
            carry = 0;
        }
    }
    return out;
}

/* new value of op on old (both words_of(size) words) */
void model_apply(const Op &op, const uint64_t *old, uint64_t *out)
{
    unsigned n    = words_of(op.size);
    unsigned bits = (op.size == 4) ? 32 : 64;
    uint64_t low  = (op.size == 4) ? 0xffffffffull : ~0ull;

    if (op.opcode == kMcs) {
        bool equal = true;
        for (unsigned i = 0; i < n; ++i) {
            equal = equal && (((old[i] ^ op.f[1][i]) & op.f[0][i] & low) == 0);
        }
        for (unsigned i = 0; i < n; ++i) {
            out[i] = equal ? (((old[i] & ~op.f[3][i]) | (op.f[2][i] & op.f[3][i])) & low) : old[i];
        }
    } else {
        for (unsigned i = 0; i < n; ++i) {
            out[i] = model_field_add(old[i] & low, op.f[0][i] & low, op.f[1][i], bits);
        }
    }
}

/* Read / write an operand of the shadow or target memory as words. */
void load_words(const uint8_t *p, unsigned size, uint64_t *w)
{
    if (size == 4) {
        uint32_t v;
        memcpy(&v, p, 4);
        w[0] = v;
    } else {
        memcpy(w, p, size);
    }
}

void store_words(uint8_t *p, unsigned size, const uint64_t *w)
{
    if (size == 4) {
        uint32_t v = (uint32_t)w[0];
        memcpy(p, &v, 4);
    } else {
        memcpy(p, w, size);
    }
}

/* ---------------------------------------------------------------- posting */

/*
 * Post op at raddr; the result lands at result (lkey). Operands of up to 8
 * bytes go by value, larger ones by the address of op.f[k] (read at post).
 */
int post_masked(axon_dev_qp_t *qp, uint64_t wr_id, const Op &op, void *result, uint32_t lkey,
                uint64_t raddr, uint32_t rkey, uint32_t sge_len = 0, int log_sz = -1)
{
    axon_dev_send_wr_t wr;
    axon_dev_sge_t     sge;
    auto field = [&](int k) -> uint64_t {
        return (op.size <= 8) ? op.f[k][0] : (uint64_t)(uintptr_t)op.f[k];
    };

    make_wr(&wr, &sge, wr_id, op.opcode, result, sge_len ? sge_len : op.size, lkey);
    wr.wr.masked_atomic.log_arg_sz  = (log_sz >= 0) ? (uint32_t)log_sz
                                                    : (uint32_t)__builtin_ctz(op.size);
    wr.wr.masked_atomic.remote_addr = raddr;
    wr.wr.masked_atomic.rkey        = rkey;
    if (op.opcode == kMcs) {
        wr.wr.masked_atomic.op.cmp_swap.compare_mask = field(0);
        wr.wr.masked_atomic.op.cmp_swap.compare_val  = field(1);
        wr.wr.masked_atomic.op.cmp_swap.swap_val     = field(2);
        wr.wr.masked_atomic.op.cmp_swap.swap_mask    = field(3);
    } else {
        wr.wr.masked_atomic.op.fetch_add.add_val        = field(0);
        wr.wr.masked_atomic.op.fetch_add.field_boundary = field(1);
    }
    return post_one(qp, &wr);
}

/* A fetch-and-add whose every word is one 64-bit field adding add (4 bytes: 32-bit). */
Op mfa_op(unsigned size, uint64_t add, uint64_t boundary = 0)
{
    Op op;
    memset(&op, 0, sizeof(op));
    op.opcode = kMfa;
    op.size   = size;
    for (unsigned i = 0; i < words_of(size); ++i) {
        op.f[0][i] = add;
        op.f[1][i] = boundary;
    }
    return op;
}

/* ---------------------------------------------------------------- random operations */

/* Random operands; compare-and-swap matches the current value about half the time. */
Op random_op(std::mt19937_64 &rng, axon_dev_wr_opcode_t opcode, unsigned size,
             const uint64_t *current)
{
    Op op;
    memset(&op, 0, sizeof(op));
    op.opcode = opcode;
    op.size   = size;
    for (unsigned i = 0; i < words_of(size); ++i) {
        for (int k = 0; k < 4; ++k) {
            op.f[k][i] = rng();
        }
        if (opcode == kMcs) {
            /* sparse or dense masks, and compares that agree where the mask looks */
            if (rng() & 1) op.f[0][i] &= rng();
            if (rng() & 1) op.f[3][i] |= rng();
            if (rng() & 1) op.f[1][i] = current[i] ^ (op.f[1][i] & ~op.f[0][i]);
        } else {
            /* field boundaries: none, every 8, 16 or 32 bits, or random */
            static const uint64_t kEnds[] = {0, 0x8080808080808080ull, 0x8000800080008000ull,
                                             0x8000000080000000ull};
            unsigned pick = rng() % 5;
            op.f[1][i]    = (pick < 4) ? kEnds[pick] : rng();
        }
    }
    if ((opcode == kMcs) && ((rng() % 4) == 0)) {
        /* all words agree: the swap happens */
        for (unsigned i = 0; i < words_of(size); ++i) {
            op.f[1][i] = current[i];
        }
    }
    return op;
}

class SoftibExtAtomic : public SoftibTest {
protected:
    Qp a_, b_;

    /* a_ requests, b_ responds; ACK timeout short enough for a lossy wire */
    void rc_pair(uint8_t timeout = kTimeout, unsigned b_access = AXON_DEV_ACCESS_REMOTE_WRITE |
                                                                  AXON_DEV_ACCESS_REMOTE_READ |
                                                                  AXON_DEV_ACCESS_REMOTE_ATOMIC)
    {
        ASSERT_EQ(0, dev_.qp(&a_, AXON_DEV_QPT_RC, 1, nullptr, 0, 256));
        ASSERT_EQ(0, dev_.qp(&b_, AXON_DEV_QPT_RC, 1, nullptr, 0, 256));
        ASSERT_EQ(0, dev_.up(a_, b_.qpn(), dev_.gid, kPsnB, kPsnA, timeout));
        ASSERT_EQ(0, dev_.to_init(b_, b_access));
        ASSERT_EQ(0, dev_.to_rtr(b_, a_.qpn(), dev_.gid, kPsnA));
        ASSERT_EQ(0, dev_.to_rts(b_, kPsnB, timeout));
    }

    /*
     * rounds batches of random operations (every op and size) on a 4 KiB
     * target, checked against a shadow copy run through the model.
     */
    void random_vs_model(int rounds, uint64_t seed)
    {
        const size_t   kTarget = 4096, kBatch = 64;
        const unsigned kSizes[] = {4, 8, 16, 32};
        std::mt19937_64 rng(seed);
        axon_dev_wc_t   wc[kBatch];

        Buf local  = dev_.reg(kBatch * 32, kLocalWrite);
        Buf remote = dev_.reg(kTarget, kRemoteAll);
        std::vector<uint8_t> shadow(kTarget);
        axon_test_fill(remote.ptr, kTarget, seed);
        memcpy(shadow.data(), remote.ptr, kTarget);

        for (int r = 0; r < rounds; ++r) {
            std::vector<std::vector<uint64_t>> expect(kBatch);
            std::vector<Op>                    ops(kBatch);
            memset(local.ptr, 0xa5, kBatch * 32);
            for (size_t i = 0; i < kBatch; ++i) {
                unsigned size = kSizes[rng() % 4];
                /* a few hot blocks, so operations of different sizes overlap */
                size_t   off  = (rng() % 8) * 32 + (rng() % (32 / size)) * size;
                uint64_t old[4] = {0}, out[4] = {0};

                if (rng() % 4 == 0) {
                    off = 256 + (rng() % ((kTarget - 256) / size)) * size;
                }
                load_words(&shadow[off], size, old);
                ops[i] = random_op(rng, (rng() & 1) ? kMcs : kMfa, size, old);
                model_apply(ops[i], old, out);
                store_words(&shadow[off], size, out);
                expect[i].assign(old, old + words_of(size));
                ASSERT_EQ(0, post_masked(a_.qp, i, ops[i], local.ptr + 32 * i, local.lkey(),
                                         remote.addr(off), remote.rkey()))
                    << "round " << r << " op " << i;
            }
            ASSERT_EQ((int)kBatch, poll_n(a_.scq, kBatch, wc, 20)) << "round " << r;
            for (size_t i = 0; i < kBatch; ++i) {
                const Op &op = ops[i];
                ASSERT_EQ(AXON_DEV_WC_SUCCESS, wc[i].status) << wc_status_name(wc[i].status);
                EXPECT_EQ((uint64_t)i, wc[i].wr_id);
                EXPECT_EQ(op.size, wc[i].byte_len);
                EXPECT_EQ((op.opcode == kMcs) ? AXON_DEV_WC_MASKED_COMP_SWAP
                                              : AXON_DEV_WC_MASKED_FETCH_ADD, wc[i].opcode);
                uint64_t got[4] = {0};
                load_words(local.ptr + 32 * i, op.size, got);
                for (unsigned w = 0; w < words_of(op.size); ++w) {
                    EXPECT_EQ(expect[i][w], got[w]) << "round " << r << " op " << i << " ("
                        << ((op.opcode == kMcs) ? "masked cswap " : "mfadd ") << op.size
                        << " B) word " << w << ": previous value";
                }
                /* the result fills exactly size bytes of its SGE */
                if (op.size < 32) {
                    EXPECT_EQ(0xa5, local.ptr[32 * i + op.size]) << "result overran its SGE";
                }
            }
            ASSERT_EQ(0, memcmp(shadow.data(), remote.ptr, kTarget))
                << "target memory differs from the model after round " << r << " (seed "
                << seed << ")";
        }
    }
};

/* ---------------------------------------------------------------- capabilities */

TEST_F(SoftibExtAtomic, DeviceReportsExtendedAtomics)
{
    open_dev();
    const axon_dev_attr_t &a = dev_.attr;
    EXPECT_NE(0u, a.cap_flags & AXON_DEV_CAP_EXT_ATOMIC);
    EXPECT_EQ((1u << 2) | (1u << 3) | (1u << 4) | (1u << 5), a.ext_atomic.log_atomic_arg_sizes);
    EXPECT_EQ(3u, a.ext_atomic.max_fa_bit_boundary) << "fields up to 8 bytes (log2)";
    EXPECT_EQ(3u, a.ext_atomic.log_max_atomic_inline) << "operands up to 8 bytes by value";
    /* 4 and 8 bytes are CPU atomics; 32 never (a lock among softib's own atomics) */
    EXPECT_EQ((1u << 2) | (1u << 3), a.ext_atomic.log_glob_arg_sizes & ((1u << 2) | (1u << 3)));
    EXPECT_EQ(0u, a.ext_atomic.log_glob_arg_sizes & (1u << 5));
#if defined(__x86_64__)
    EXPECT_NE(0u, a.ext_atomic.log_glob_arg_sizes & (1u << 4)) << "cmpxchg16b";
#endif
}

TEST_F(SoftibExtAtomic, CapMaskRemovesThem)
{
    axon_dev_wc_t wc;

    env_.set("AXON_SOFTIB_CAP_MASK", "ext_atomic");
    open_dev();
    EXPECT_EQ(0u, dev_.attr.cap_flags & AXON_DEV_CAP_EXT_ATOMIC);
    EXPECT_NE(0u, dev_.attr.cap_flags & AXON_DEV_CAP_ATOMIC) << "standard atomics stay";
    EXPECT_EQ(0u, dev_.attr.ext_atomic.log_atomic_arg_sizes);
    EXPECT_EQ(0u, dev_.attr.ext_atomic.max_fa_bit_boundary);
    EXPECT_EQ(0u, dev_.attr.ext_atomic.log_max_atomic_inline);
    rc_pair();
    Buf local  = dev_.reg(64, kLocalWrite);
    Buf remote = dev_.reg(64, kRemoteAll);
    Op op = mfa_op(8, 1);
    EXPECT_EQ(EOPNOTSUPP, post_masked(a_.qp, 1, op, local.ptr, local.lkey(), remote.addr(),
                                      remote.rkey()));
    op.opcode = kMcs;
    EXPECT_EQ(EOPNOTSUPP, post_masked(a_.qp, 2, op, local.ptr, local.lkey(), remote.addr(),
                                      remote.rkey()));
    EXPECT_TRUE(no_wc(a_.scq, 0.05)) << "a refused WR completed";
    /* the QP is still fine for standard atomics */
    ASSERT_EQ(0, post_atomic(a_.qp, 3, AXON_DEV_WR_ATOMIC_FETCH_AND_ADD, local.ptr, local.lkey(),
                             remote.addr(), remote.rkey(), 5));
    ASSERT_TRUE(poll_one(a_.scq, &wc));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    EXPECT_EQ(5u, *(uint64_t *)remote.ptr);
}

/* ---------------------------------------------------------------- post-time checks */

TEST_F(SoftibExtAtomic, RefusedAtPost)
{
    Qp u1, u2;

    open_dev();
    rc_pair();
    make_pair(AXON_DEV_QPT_UC, &u1, &u2);
    Buf local  = dev_.reg(64, kLocalWrite);
    Buf remote = dev_.reg(64, kRemoteAll);
    Op op = mfa_op(8, 1);

    EXPECT_EQ(EINVAL, post_masked(a_.qp, 1, op, local.ptr, local.lkey(), remote.addr(),
                                  remote.rkey(), 8, 1)) << "2-byte operand";
    EXPECT_EQ(EINVAL, post_masked(a_.qp, 1, op, local.ptr, local.lkey(), remote.addr(),
                                  remote.rkey(), 64, 6)) << "64-byte operand";
    EXPECT_EQ(EINVAL, post_masked(a_.qp, 1, op, local.ptr, local.lkey(), remote.addr(),
                                  remote.rkey(), 16)) << "SGE longer than the operand";
    EXPECT_EQ(EINVAL, post_masked(u1.qp, 1, op, local.ptr, local.lkey(), remote.addr(),
                                  remote.rkey())) << "UC QP";
    /* 16 bytes: operands by address, so none may be NULL */
    Op wide = mfa_op(16, 1);
    axon_dev_send_wr_t wr;
    axon_dev_sge_t     sge;
    make_wr(&wr, &sge, 1, kMfa, local.ptr, 16, local.lkey());
    wr.wr.masked_atomic.log_arg_sz                  = 4;
    wr.wr.masked_atomic.remote_addr                 = remote.addr();
    wr.wr.masked_atomic.rkey                        = remote.rkey();
    wr.wr.masked_atomic.op.fetch_add.add_val        = (uintptr_t)wide.f[0];
    wr.wr.masked_atomic.op.fetch_add.field_boundary = 0;
    EXPECT_EQ(EINVAL, post_one(a_.qp, &wr)) << "NULL field boundary address";
    EXPECT_TRUE(no_wc(a_.scq, 0.05)) << "a refused WR completed";
    EXPECT_EQ(AXON_DEV_QPS_RTS, query_state(a_.qp)) << "refusals leave the QP alone";
}

/* ---------------------------------------------------------------- semantics */

/* A few hand-checked cases, one per size, both ops: the layout of §8.7.2.2. */
TEST_F(SoftibExtAtomic, HandCheckedCases)
{
    axon_dev_wc_t wc;

    open_dev();
    rc_pair();
    Buf local  = dev_.reg(64, kLocalWrite);
    Buf remote = dev_.reg(64, kRemoteAll);
    uint64_t *t = (uint64_t *)remote.ptr;

    /* 4 bytes: fields of 8 bits; the other half of the word stays */
    uint32_t *h = (uint32_t *)remote.ptr;
    h[0] = 0xff7f01ffu;
    h[1] = 0x11111111u;
    Op op = mfa_op(4, 0x01010101, 0x80808080);
    ASSERT_EQ(0, post_masked(a_.qp, 1, op, local.ptr, local.lkey(), remote.addr(0),
                             remote.rkey()));
    ASSERT_TRUE(poll_one(a_.scq, &wc));
    ASSERT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    EXPECT_EQ(4u, wc.byte_len);
    EXPECT_EQ(0xff7f01ffu, *(uint32_t *)local.ptr);
    EXPECT_EQ(0x00800200u, h[0]) << "each byte adds 1, carries dropped";
    EXPECT_EQ(0x11111111u, h[1]);

    /* 16 bytes: masked compare on word 1 only, swap the low half of word 0 */
    t[2] = 0x0123456789abcdefull;
    t[3] = 0xfedcba9876543210ull;
    memset(&op, 0, sizeof(op));
    op.opcode  = kMcs;
    op.size    = 16;
    op.f[0][0] = 0;                        /* compare mask */
    op.f[0][1] = 0xffff000000000000ull;
    op.f[1][1] = 0xfedc000000000000ull;    /* compare */
    op.f[2][0] = 0xaaaaaaaaaaaaaaaaull;    /* swap */
    op.f[2][1] = 0xbbbbbbbbbbbbbbbbull;
    op.f[3][0] = 0x00000000ffffffffull;    /* swap mask */
    ASSERT_EQ(0, post_masked(a_.qp, 2, op, local.ptr, local.lkey(), remote.addr(16),
                             remote.rkey()));
    ASSERT_TRUE(poll_one(a_.scq, &wc));
    ASSERT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    EXPECT_EQ(AXON_DEV_WC_MASKED_COMP_SWAP, wc.opcode);
    EXPECT_EQ(0x0123456789abcdefull, ((uint64_t *)local.ptr)[0]);
    EXPECT_EQ(0xfedcba9876543210ull, ((uint64_t *)local.ptr)[1]);
    EXPECT_EQ(0x01234567aaaaaaaaull, t[2]);
    EXPECT_EQ(0xfedcba9876543210ull, t[3]);

    /* word 1 no longer compares equal: nothing is swapped */
    op.f[1][1] = 0x1111000000000000ull;
    op.f[3][1] = ~0ull;
    ASSERT_EQ(0, post_masked(a_.qp, 3, op, local.ptr, local.lkey(), remote.addr(16),
                             remote.rkey()));
    ASSERT_TRUE(poll_one(a_.scq, &wc));
    ASSERT_EQ(AXON_DEV_WC_SUCCESS, wc.status);
    EXPECT_EQ(0x01234567aaaaaaaaull, t[2]) << "compare failed: nothing swapped";
    EXPECT_EQ(0xfedcba9876543210ull, t[3]);

    /* 32 bytes: one 64-bit field per word, the top bit's carry dropped */
    for (int i = 0; i < 4; ++i) {
        t[4 + i] = ~0ull - (uint64_t)i;
    }
    op = mfa_op(32, 2);
    ASSERT_EQ(0, post_masked(a_.qp, 4, op, local.ptr, local.lkey(), remote.addr(32),
                             remote.rkey()));
    ASSERT_TRUE(poll_one(a_.scq, &wc));
    ASSERT_EQ(AXON_DEV_WC_SUCCESS, wc.status);
    EXPECT_EQ(AXON_DEV_WC_MASKED_FETCH_ADD, wc.opcode);
    EXPECT_EQ(32u, wc.byte_len);
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(~0ull - (uint64_t)i, ((uint64_t *)local.ptr)[i]);
        EXPECT_EQ(1ull - (uint64_t)i, t[4 + i]) << "word " << i;
    }
}

TEST_F(SoftibExtAtomic, RandomOperandsMatchTheModel)
{
    open_dev();
    rc_pair();
    random_vs_model(25, 20240611);
}

/*
 * With packets lost, duplicated and reordered, every masked atomic still
 * executes exactly once: duplicates get the saved answer replayed.
 */
/* Slow: a lossy run, not for the sanitizer passes (tests/README.md). */
class SoftibExtAtomicSlow : public SoftibExtAtomic {};

TEST_F(SoftibExtAtomicSlow, ExactlyOnceOnALossyWire)
{
    env_.set("AXON_SOFTIB_LOSS", "0.1");
    env_.set("AXON_SOFTIB_DUP", "0.3");
    env_.set("AXON_SOFTIB_REORDER", "0.1");
    open_dev();
    rc_pair(10);   /* 4 ms ACK timeout */
    random_vs_model(8, 77);
}

/* ---------------------------------------------------------------- access errors */

class SoftibExtAtomicAccess : public SoftibExtAtomic {
protected:
    /*
     * A masked fetch-and-add of size bytes at (offset, rkey ^ rkey_xor) into
     * a 4 KiB buffer whose first mr_len bytes are registered with
     * remote_access fails with status; not a byte of the buffer changes.
     */
    void expect_fail(int remote_access, uint32_t rkey_xor, size_t offset, unsigned size,
                     axon_dev_wc_status_t status, const char *what, size_t mr_len = 4096,
                     unsigned qp_access = AXON_DEV_ACCESS_REMOTE_WRITE |
                                          AXON_DEV_ACCESS_REMOTE_READ |
                                          AXON_DEV_ACCESS_REMOTE_ATOMIC)
    {
        axon_dev_mr_t *mr = nullptr;
        axon_dev_wc_t  wc;

        open_dev();
        rc_pair(kTimeout, qp_access);
        Buf local  = dev_.reg(64, kLocalWrite);
        Buf remote = dev_.reg(4096, -1);
        ASSERT_EQ(0, axon_dev_reg_mr(dev_.pd, remote.ptr, mr_len, remote_access, &mr));
        axon_test_fill(remote.ptr, 4096, 3);
        Op op = mfa_op(size, 1);
        ASSERT_EQ(0, post_masked(a_.qp, 1, op, local.ptr, local.lkey(), remote.addr(offset),
                                 mr->rkey ^ rkey_xor));
        ASSERT_TRUE(poll_one(a_.scq, &wc)) << what;
        EXPECT_EQ(status, wc.status) << what << ": " << wc_status_name(wc.status);
        EXPECT_EQ(AXON_DEV_QPS_ERR, query_state(a_.qp)) << what;
        EXPECT_EQ(-1, axon_test_check(remote.ptr, 4096, 3)) << what << ": target changed";
        EXPECT_EQ(0, axon_dev_dereg_mr(mr));
    }
};

TEST_F(SoftibExtAtomicAccess, BadRkey)
{
    expect_fail(kRemoteAll, 0x10000, 0, 16, AXON_DEV_WC_REM_ACCESS_ERR, "bad rkey");
}

TEST_F(SoftibExtAtomicAccess, MrWithoutRemoteAtomic)
{
    expect_fail(kLocalWrite | AXON_DEV_ACCESS_REMOTE_WRITE | AXON_DEV_ACCESS_REMOTE_READ, 0, 0,
                32, AXON_DEV_WC_REM_ACCESS_ERR, "MR without REMOTE_ATOMIC");
}

/* The MR ends 8 bytes into the operand. */
TEST_F(SoftibExtAtomicAccess, StraddlesTheEndOfTheMr)
{
    expect_fail(kRemoteAll, 0, 4064, 32, AXON_DEV_WC_REM_ACCESS_ERR, "straddles the end",
                4072);
}

/* Wholly past the end of the MR (but inside the buffer, so a write would show). */
TEST_F(SoftibExtAtomicAccess, PastTheEndOfTheMr)
{
    expect_fail(kRemoteAll, 0, 2048, 16, AXON_DEV_WC_REM_ACCESS_ERR, "past the end", 2048);
}

/* As with standard atomics (and IB): a misaligned operand is an invalid request. */
TEST_F(SoftibExtAtomicAccess, Misaligned)
{
    expect_fail(kRemoteAll, 0, 8, 16, AXON_DEV_WC_REM_INV_REQ_ERR, "16 B at an 8-aligned address");
}

/* As with standard atomics: a QP that does not allow remote atomics refuses the request. */
TEST_F(SoftibExtAtomicAccess, QpWithoutRemoteAtomic)
{
    expect_fail(kRemoteAll, 0, 0, 8, AXON_DEV_WC_REM_INV_REQ_ERR, "QP without REMOTE_ATOMIC",
                4096, AXON_DEV_ACCESS_REMOTE_WRITE | AXON_DEV_ACCESS_REMOTE_READ);
}

/* ---------------------------------------------------------------- concurrency */

/* One device of the concurrency test: a QP pair whose responder executes on the device's thread. */
struct Lane {
    SoftibDev      dev;
    Qp             a, b;
    axon_dev_mr_t *target_mr = nullptr;
    Buf            local;
    int            errors = 0;
};

/*
 * Run ops (round robin) count times each through lane's requester, windowed;
 * failures counted in lane->errors.
 */
void hammer(Lane *lane, const std::vector<std::pair<Op, uint64_t>> *ops,
            const std::vector<int> *standard_faa_offsets, uint8_t *target, int count)
{
    const int window = 32;
    int posted = 0, done = 0, kinds = (int)(ops->size() + standard_faa_offsets->size());
    int total  = count * kinds;
    axon_dev_wc_t wc[window];
    double deadline = axon_test_time() + 60;

    while ((done < total) && (axon_test_time() < deadline)) {
        while ((posted < total) && (posted - done < window)) {
            int k = posted % kinds, ret;
            uint8_t *res = lane->local.ptr + 32 * (posted % window);
            if (k < (int)ops->size()) {
                ret = post_masked(lane->a.qp, posted, (*ops)[k].first, res, lane->local.lkey(),
                                  (uintptr_t)(target + (*ops)[k].second), lane->target_mr->rkey);
            } else {
                int off = (*standard_faa_offsets)[k - ops->size()];
                ret = post_atomic(lane->a.qp, posted, AXON_DEV_WR_ATOMIC_FETCH_AND_ADD, res,
                                  lane->local.lkey(), (uintptr_t)(target + off),
                                  lane->target_mr->rkey, 1);
            }
            if (ret != 0) {
                lane->errors++;
                return;
            }
            posted++;
        }
        int n = axon_dev_poll_cq(lane->a.scq, window, wc);
        if (n < 0) {
            lane->errors++;
            return;
        }
        for (int i = 0; i < n; ++i) {
            lane->errors += (wc[i].status != AXON_DEV_WC_SUCCESS);
        }
        done += n;
    }
    lane->errors += (done != total);
}

/*
 * Two devices (each its own engine lock and thread) and a CPU thread on one
 * 128-byte area; N operations of each kind per device, 4N per CPU kind:
 *   block A (0..31):   dev0 32-byte add of 1 to each word; dev1 standard
 *                      fetch-add on word 1 and 8-byte add of 1 to each
 *                      16-bit field of word 3
 *   block B (32..47):  dev1 16-byte add of 1 to each word; dev0 standard
 *                      fetch-add on word 0; the CPU adds to word 1 when
 *                      16-byte operations are CPU atomics
 *   block C (64..71):  both devices 4-byte adds on the low half, the CPU on
 *                      the high half
 *   block D (96..103): dev0 8-byte masked compare-and-swaps of the top byte
 *                      (one never matches, one rewrites it unchanged) while
 *                      the CPU adds to the word: no add is lost
 */
TEST_F(SoftibExtAtomic, ConcurrentMaskedStandardAndCpuAtomicsCountExactly)
{
    const int N = 20000;
    Lane lanes[2];

    env_.set("AXON_SOFTIB_DEVICES", "2");
    uint8_t *target = nullptr;
    ASSERT_EQ(0, posix_memalign((void **)&target, 4096, 4096));
    memset(target, 0, 4096);
    for (int d = 0; d < 2; ++d) {
        Lane &l = lanes[d];
        ASSERT_EQ(0, l.dev.open(d ? "softib1" : "softib0"));
        ASSERT_EQ(0, l.dev.qp(&l.a, AXON_DEV_QPT_RC, 1, nullptr, 0, 64));
        ASSERT_EQ(0, l.dev.qp(&l.b, AXON_DEV_QPT_RC, 1, nullptr, 0, 64));
        ASSERT_EQ(0, l.dev.connect(l.a, l.b));
        ASSERT_EQ(0, axon_dev_reg_mr(l.dev.pd, target, 4096, kRemoteAll, &l.target_mr));
        l.local = l.dev.reg(32 * 32, kLocalWrite);
    }
    const bool glob16 = lanes[0].dev.attr.ext_atomic.log_glob_arg_sizes & (1u << 4);

    Op mcs_top;   /* compare the top byte with 0xff (never there): always fails */
    memset(&mcs_top, 0, sizeof(mcs_top));
    mcs_top.opcode  = kMcs;
    mcs_top.size    = 8;
    mcs_top.f[0][0] = 0xff00000000000000ull;
    mcs_top.f[1][0] = 0xff00000000000000ull;
    mcs_top.f[2][0] = 0xffffffffffffffffull;
    mcs_top.f[3][0] = ~0ull;
    Op mcs_ok = mcs_top;  /* compare the top byte with 0, swap in 0 there: always succeeds */
    mcs_ok.f[1][0] = 0;
    mcs_ok.f[2][0] = 0;
    mcs_ok.f[3][0] = 0xff00000000000000ull;

    std::vector<std::pair<Op, uint64_t>> ops0 = {
        {mfa_op(32, 1), 0}, {mfa_op(4, 1), 64}, {mcs_top, 96}, {mcs_ok, 96}};
    std::vector<int> std0 = {32};
    std::vector<std::pair<Op, uint64_t>> ops1 = {
        {mfa_op(8, 0x0001000100010001ull, 0x8000800080008000ull), 24}, {mfa_op(16, 1), 32},
        {mfa_op(4, 1), 64}};
    std::vector<int> std1 = {8};

    std::atomic<bool> go(false);
    std::thread t0([&] { while (!go) {} hammer(&lanes[0], &ops0, &std0, target, N); });
    std::thread t1([&] { while (!go) {} hammer(&lanes[1], &ops1, &std1, target, N); });
    std::thread cpu([&] {
        while (!go) {}
        for (int i = 0; i < 4 * N; ++i) {
            if (glob16) {
                __atomic_fetch_add((uint64_t *)(target + 40), 1, __ATOMIC_SEQ_CST);
            }
            __atomic_fetch_add((uint32_t *)(target + 68), 1, __ATOMIC_SEQ_CST);
            __atomic_fetch_add((uint64_t *)(target + 96), 1, __ATOMIC_SEQ_CST);
            if ((i & 63) == 0) {
                sched_yield();
            }
        }
    });
    go = true;
    t0.join();
    t1.join();
    cpu.join();
    EXPECT_EQ(0, lanes[0].errors) << "softib0's operations";
    EXPECT_EQ(0, lanes[1].errors) << "softib1's operations";

    const uint64_t *w = (const uint64_t *)target;
    const uint64_t  n = N;
    EXPECT_EQ(n, w[0]) << "A word 0: 32-byte adds";
    EXPECT_EQ(2 * n, w[1]) << "A word 1: 32-byte adds + standard fetch-adds";
    EXPECT_EQ(n, w[2]) << "A word 2: 32-byte adds";
    EXPECT_EQ(n * 0x0001000100010002ull, w[3]) << "A word 3: 32-byte adds + 16-bit field adds";
    EXPECT_EQ(2 * n, w[4]) << "B word 0: 16-byte adds + standard fetch-adds";
    EXPECT_EQ(n + (glob16 ? 4 * n : 0), w[5]) << "B word 1: 16-byte adds + CPU adds";
    EXPECT_EQ(2 * n, *(const uint32_t *)(target + 64)) << "C low: 4-byte adds of both devices";
    EXPECT_EQ(4 * n, *(const uint32_t *)(target + 68)) << "C high: CPU adds (4-byte ops left it)";
    EXPECT_EQ(4 * n, w[12]) << "D: CPU adds survive masked compare-and-swaps of the top byte";

    for (int d = 0; d < 2; ++d) {
        EXPECT_EQ(0, axon_dev_dereg_mr(lanes[d].target_mr));
        lanes[d].dev.close();
    }
    free(target);
}

}  // namespace
