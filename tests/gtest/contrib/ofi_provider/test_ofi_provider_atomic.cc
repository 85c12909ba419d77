/*
 * The provider's atomics (FI_ATOMIC): what the valid calls answer, every
 * offered (operation, datatype) of the three call families byte-exact
 * against a model of fi_atomic(3) (vectors of three elements, target
 * written and read back by RMA), in one process and across processes over
 * shm and tcp; two initiators hammering one location (native fetch-adds,
 * float sums, 2-byte neighbours in one word and MIN/MAX built from
 * compare-and-swap); an unsupported pair refused with its log line; a bad
 * key as an error entry.
 */
#include "ofi_test_node.h"

#include "env_guard.h"

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>

#include <new>
#include <fcntl.h>
#include <poll.h>

namespace {

const size_t kRegion = 8192;
const uint64_t kAmoKey = 9;
const uint64_t kAmoCaps = FI_TAGGED | FI_DIRECTED_RECV | FI_SOURCE | FI_RMA | FI_ATOMIC;
const size_t kElems = 3;

enum Family { kBase, kFetch, kCompare };

struct TypeInfo {
    enum fi_datatype dt;
    const char *name;
    size_t size;
    int kind;        /* 0 integer, 1 real, 2 complex */
    size_t sig;      /* significant bytes of each real part (long double: 10) */
};

const TypeInfo kTypes[] = {
    {FI_INT8, "int8", 1, 0, 1},          {FI_UINT8, "uint8", 1, 0, 1},
    {FI_INT16, "int16", 2, 0, 2},        {FI_UINT16, "uint16", 2, 0, 2},
    {FI_INT32, "int32", 4, 0, 4},        {FI_UINT32, "uint32", 4, 0, 4},
    {FI_INT64, "int64", 8, 0, 8},        {FI_UINT64, "uint64", 8, 0, 8},
    {FI_INT128, "int128", 16, 0, 16},    {FI_UINT128, "uint128", 16, 0, 16},
    {FI_FLOAT, "float", 4, 1, 4},        {FI_DOUBLE, "double", 8, 1, 8},
    {FI_LONG_DOUBLE, "long_double", sizeof(long double), 1, 10},
    {FI_FLOAT_COMPLEX, "float_complex", 8, 2, 4},
    {FI_DOUBLE_COMPLEX, "double_complex", 16, 2, 8},
    {FI_LONG_DOUBLE_COMPLEX, "long_double_complex", 2 * sizeof(long double), 2, 10},
};

const char *kOpNames[FI_ATOMIC_OP_LAST] = {
    "min", "max", "sum", "prod", "lor", "land", "bor", "band", "lxor", "bxor", "read",
    "write", "cswap", "cswap_ne", "cswap_le", "cswap_lt", "cswap_ge", "cswap_gt", "mswap"};

/* What the provider promises (README): the family's operations, less what the type lacks. */
bool expected_valid(const TypeInfo &t, int op, Family f)
{
    bool in_family = (f == kBase)  ? (op <= FI_BXOR || op == FI_ATOMIC_WRITE) :
                     (f == kFetch) ? (op <= FI_ATOMIC_WRITE) :
                                     (op >= FI_CSWAP);
    bool bitwise = (op == FI_BOR || op == FI_BAND || op == FI_BXOR || op == FI_MSWAP);
    if (!in_family) return false;
    if (t.kind == 2) return false;   /* complex: may straddle 32 bytes, none offered */
    if (t.kind == 1 && bitwise) return false;
    return true;
}

/* ---------------------------------------------------------------- the model */

template <class T, class UT> T model_int(int op, T o, T v, T c)
{
    switch (op) {
    case FI_MIN: return v < o ? v : o;
    case FI_MAX: return v > o ? v : o;
    case FI_SUM: return (T)((UT)o + (UT)v);
    case FI_PROD: return (T)((UT)o * (UT)v);
    case FI_LOR: return (T)(o || v);
    case FI_LAND: return (T)(o && v);
    case FI_BOR: return o | v;
    case FI_BAND: return o & v;
    case FI_LXOR: return (T)((o != 0) != (v != 0));
    case FI_BXOR: return o ^ v;
    case FI_ATOMIC_READ: return o;
    case FI_ATOMIC_WRITE: return v;
    case FI_CSWAP: return c == o ? v : o;
    case FI_CSWAP_NE: return c != o ? v : o;
    case FI_CSWAP_LE: return c <= o ? v : o;
    case FI_CSWAP_LT: return c < o ? v : o;
    case FI_CSWAP_GE: return c >= o ? v : o;
    case FI_CSWAP_GT: return c > o ? v : o;
    default: return (T)((v & c) | (o & ~c));   /* FI_MSWAP */
    }
}

template <class T> T model_real(int op, T o, T v, T c)
{
    switch (op) {
    case FI_MIN: return v < o ? v : o;
    case FI_MAX: return v > o ? v : o;
    case FI_SUM: return o + v;
    case FI_PROD: return o * v;
    case FI_LOR: return (T)(o != 0 || v != 0);
    case FI_LAND: return (T)(o != 0 && v != 0);
    case FI_LXOR: return (T)((o != 0) != (v != 0));
    case FI_ATOMIC_READ: return o;
    case FI_ATOMIC_WRITE: return v;
    case FI_CSWAP: return c == o ? v : o;
    case FI_CSWAP_NE: return c != o ? v : o;
    case FI_CSWAP_LE: return c <= o ? v : o;
    case FI_CSWAP_LT: return c < o ? v : o;
    case FI_CSWAP_GE: return c >= o ? v : o;
    default: return c > o ? v : o;              /* FI_CSWAP_GT */
    }
}

/* Element i of a pattern: k 0 target, 1 operand, 2 compare (some equal the target). */
double pattern(int k, size_t i)
{
    static const double target[kElems] = {5, 0, -3}, operand[kElems] = {0, 7, 2},
                        compare[kElems] = {5, 1, -3};
    return k == 0 ? target[i] : k == 1 ? operand[i] : compare[i];
}

template <class T> void put_val(uint8_t *p, T v)
{
    alignas(T) uint8_t b[sizeof(T)] = {};   /* a long double's padding stays zero */
    new (b) T(v);
    memcpy(p, b, sizeof(T));
}

template <class T> T get_val(const uint8_t *p)
{
    T v;
    memcpy(&v, p, sizeof(T));
    return v;
}

/* Fill element i of pattern k in bytes of type t. */
void make(const TypeInfo &t, int k, size_t i, uint8_t *p)
{
    double d = pattern(k, i);
    switch (t.dt) {
    case FI_INT8: put_val<int8_t>(p, (int8_t)d); break;
    case FI_UINT8: put_val<uint8_t>(p, (uint8_t)(int)d); break;
    case FI_INT16: put_val<int16_t>(p, (int16_t)d); break;
    case FI_UINT16: put_val<uint16_t>(p, (uint16_t)(int)d); break;
    case FI_INT32: put_val<int32_t>(p, (int32_t)d); break;
    case FI_UINT32: put_val<uint32_t>(p, (uint32_t)(int)d); break;
    case FI_INT64: put_val<int64_t>(p, (int64_t)d); break;
    case FI_UINT64: put_val<uint64_t>(p, (uint64_t)(int64_t)d); break;
    case FI_INT128: put_val<__int128>(p, (__int128)(int64_t)d); break;
    case FI_UINT128:
        put_val<unsigned __int128>(p, (unsigned __int128)(__int128)(int64_t)d);
        break;
    case FI_FLOAT: put_val<float>(p, (float)d + 0.5f); break;
    case FI_DOUBLE: put_val<double>(p, d + 0.25); break;
    default: put_val<long double>(p, (long double)d + 0.125L); break;
    }
}

/* out = the model's new value of element o with operand v, compare c. */
void model(const TypeInfo &t, int op, const uint8_t *o, const uint8_t *v, const uint8_t *c,
           uint8_t *out)
{
#define INT_CASE(_dt, T, UT) \
    case _dt: put_val<T>(out, model_int<T, UT>(op, get_val<T>(o), get_val<T>(v), get_val<T>(c))); \
        break;
#define REAL_CASE(_dt, T) \
    case _dt: put_val<T>(out, model_real<T>(op, get_val<T>(o), get_val<T>(v), get_val<T>(c))); \
        break;
    switch (t.dt) {
    INT_CASE(FI_INT8, int8_t, uint8_t)
    INT_CASE(FI_UINT8, uint8_t, uint8_t)
    INT_CASE(FI_INT16, int16_t, uint16_t)
    INT_CASE(FI_UINT16, uint16_t, uint16_t)
    INT_CASE(FI_INT32, int32_t, uint32_t)
    INT_CASE(FI_UINT32, uint32_t, uint32_t)
    INT_CASE(FI_INT64, int64_t, uint64_t)
    INT_CASE(FI_UINT64, uint64_t, uint64_t)
    INT_CASE(FI_INT128, __int128, unsigned __int128)
    INT_CASE(FI_UINT128, unsigned __int128, unsigned __int128)
    REAL_CASE(FI_FLOAT, float)
    REAL_CASE(FI_DOUBLE, double)
    default: REAL_CASE(FI_LONG_DOUBLE, long double)
    }
#undef INT_CASE
#undef REAL_CASE
}

/* Equal in the significant bytes (a long double's padding is anybody's). */
bool same(const TypeInfo &t, const uint8_t *a, const uint8_t *b)
{
    return memcmp(a, b, t.sig) == 0;
}

std::string hex(const uint8_t *p, size_t n)
{
    static const char *d = "0123456789abcdef";
    std::string s;
    for (size_t i = 0; i < n; ++i) {
        s += d[p[i] >> 4];
        s += d[p[i] & 15];
    }
    return s;
}

/* ---------------------------------------------------------------- initiator side */

/* An initiator with its peer's region at (base, key); others progressed while waiting. */
struct AmoInitiator {
    Node &n;
    fi_addr_t peer;
    uint64_t base, key;
    std::vector<Node *> others;
    struct fi_context ctx;

    /* The next entry: 0, or the error entry's err. */
    int complete()
    {
        struct fi_cq_tagged_entry e;
        struct fi_cq_err_entry err;
        ssize_t ret = wait_cq(n, others, &e, &err);
        if (ret == -FI_EAVAIL) return err.err;
        EXPECT_EQ(1, ret);
        return ret == 1 ? 0 : -1;
    }

    int write(const void *buf, size_t len, uint64_t off)
    {
        EXPECT_EQ(0, fi_write(n.ep, buf, len, NULL, peer, base + off, key, &ctx));
        return complete();
    }

    int read(void *buf, size_t len, uint64_t off)
    {
        EXPECT_EQ(0, fi_read(n.ep, buf, len, NULL, peer, base + off, key, &ctx));
        return complete();
    }

    /* One call of family f with op on type t at off; checks target and results. */
    void check_one(const TypeInfo &t, int op, Family f, uint64_t off)
    {
        uint8_t tgt[kElems * 32], val[kElems * 32], cmp[kElems * 32], res[kElems * 32];
        uint8_t want[kElems * 32], got[kElems * 32];
        size_t len = kElems * t.size;
        SCOPED_TRACE(std::string(t.name) + " " + kOpNames[op] + " family " + std::to_string(f));
        memset(res, 0xee, sizeof(res));
        for (size_t i = 0; i < kElems; ++i) {
            make(t, 0, i, tgt + i * t.size);
            make(t, 1, i, val + i * t.size);
            make(t, 2, i, cmp + i * t.size);
            model(t, op, tgt + i * t.size, val + i * t.size, cmp + i * t.size,
                  want + i * t.size);
        }
        ASSERT_EQ(0, write(tgt, len, off));
        uint64_t want_flags = FI_ATOMIC | (f == kBase ? FI_WRITE : FI_READ);
        ssize_t ret;
        if (f == kBase) {
            ret = fi_atomic(n.ep, val, kElems, NULL, peer, base + off, key, t.dt,
                            (enum fi_op)op, &ctx);
        } else if (f == kFetch) {
            ret = fi_fetch_atomic(n.ep, op == FI_ATOMIC_READ ? NULL : val, kElems, NULL, res,
                                  NULL, peer, base + off, key, t.dt, (enum fi_op)op, &ctx);
        } else {
            ret = fi_compare_atomic(n.ep, val, kElems, NULL, cmp, NULL, res, NULL, peer,
                                    base + off, key, t.dt, (enum fi_op)op, &ctx);
        }
        ASSERT_EQ(0, ret);
        struct fi_cq_tagged_entry e;
        ASSERT_EQ(1, wait_cq(n, others, &e));
        EXPECT_EQ(&ctx, e.op_context);
        EXPECT_EQ(want_flags, e.flags);
        ASSERT_EQ(0, read(got, len, off));
        for (size_t i = 0; i < kElems; ++i) {
            EXPECT_TRUE(same(t, want + i * t.size, got + i * t.size))
                << "element " << i << " target " << hex(got + i * t.size, t.size) << " want "
                << hex(want + i * t.size, t.size);
            if (f != kBase) {
                EXPECT_TRUE(same(t, tgt + i * t.size, res + i * t.size))
                    << "element " << i << " result " << hex(res + i * t.size, t.size)
                    << " want " << hex(tgt + i * t.size, t.size);
            }
        }
    }

    /* Every offered pair of every family; returns how many ran. */
    int check_all()
    {
        int ran = 0;
        for (const TypeInfo &t : kTypes) {
            for (int op = 0; op < FI_ATOMIC_OP_LAST; ++op) {
                for (Family f : {kBase, kFetch, kCompare}) {
                    size_t count = 0;
                    enum fi_op o = (enum fi_op)op;
                    int valid = (f == kBase)  ? fi_atomicvalid(n.ep, t.dt, o, &count) :
                                (f == kFetch) ? fi_fetch_atomicvalid(n.ep, t.dt, o, &count) :
                                                fi_compare_atomicvalid(n.ep, t.dt, o, &count);
                    if (valid != 0) continue;
                    check_one(t, op, f, 64 * (ran % 64));
                    if (::testing::Test::HasFatalFailure()) return ran;
                    ++ran;
                }
            }
        }
        return ran;
    }
};

int expected_pairs()
{
    int n = 0;
    for (const TypeInfo &t : kTypes)
        for (int op = 0; op < FI_ATOMIC_OP_LAST; ++op)
            for (Family f : {kBase, kFetch, kCompare}) n += expected_valid(t, op, f);
    return n;
}

/* A region, aligned so every element is naturally aligned, registered for remote access. */
struct AmoRegion {
    uint8_t *buf = (uint8_t *)aligned_alloc(64, kRegion);
    struct fid_mr *mr = NULL;
    uint64_t key = 0, base = 0;

    int reg(Node &n)
    {
        memset(buf, 0, kRegion);
        int ret = fi_mr_reg(n.domain, buf, kRegion, FI_REMOTE_READ | FI_REMOTE_WRITE, 0,
                            kAmoKey, 0, &mr, NULL);
        if (ret != 0) return ret;
        key  = fi_mr_key(mr);
        base = (n.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)buf : 0;
        return 0;
    }

    ~AmoRegion()
    {
        if (mr != NULL) {
            EXPECT_EQ(0, fi_close(&mr->fid));
        }
        free(buf);
    }
};

void open_amo_node(Node &n)
{
    n.caps         = kAmoCaps;
    n.mr_mode      = FI_MR_LOCAL;   /* scalable: offsets and requested keys, as SOS */
    n.rma_counters = true;
    ASSERT_EQ(0, n.open());
}

/* ---------------------------------------------------------------- one process */

class OfiProviderAtomic : public OfiProvider {
protected:
    Node a, b;
    AmoRegion region;
    fi_addr_t a_to_b = FI_ADDR_NOTAVAIL;

    void SetUp() override
    {
        open_amo_node(a);
        open_amo_node(b);
        a_to_b = a.insert(b.name);
        ASSERT_EQ(0, region.reg(b));
    }

    AmoInitiator initiator() { return AmoInitiator{a, a_to_b, region.base, region.key, {&b}, {}}; }
};

TEST_F(OfiProviderAtomic, GetinfoListsAtomicsWithRma)
{
    EXPECT_EQ((uint64_t)(FI_RMA | FI_ATOMIC), a.info->caps & (FI_RMA | FI_ATOMIC));
    EXPECT_EQ((uint64_t)FI_ATOMIC, a.info->tx_attr->caps & FI_ATOMIC);
    EXPECT_EQ(8u, a.info->domain_attr->mr_key_size);
    /* FI_ATOMIC alone also means every direction. */
    struct fi_info *hints = ompi_hints(), *info = NULL;
    hints->caps = FI_ATOMIC;
    ASSERT_EQ(0, getinfo(hints, &info));
    EXPECT_EQ((uint64_t)(FI_READ | FI_WRITE), info->tx_attr->caps & (FI_READ | FI_WRITE));
    EXPECT_EQ((uint64_t)(FI_REMOTE_READ | FI_REMOTE_WRITE),
              info->rx_attr->caps & (FI_REMOTE_READ | FI_REMOTE_WRITE));
    fi_freeinfo(info);
    fi_freeinfo(hints);
}

TEST_F(OfiProviderAtomic, ValidCallsAnswerExactlyTheOfferedPairs)
{
    for (const TypeInfo &t : kTypes) {
        for (int op = 0; op < FI_ATOMIC_OP_LAST; ++op) {
            for (Family f : {kBase, kFetch, kCompare}) {
                size_t count = 0;
                enum fi_op o = (enum fi_op)op;
                int ret = (f == kBase)  ? fi_atomicvalid(a.ep, t.dt, o, &count) :
                          (f == kFetch) ? fi_fetch_atomicvalid(a.ep, t.dt, o, &count) :
                                          fi_compare_atomicvalid(a.ep, t.dt, o, &count);
                bool want = expected_valid(t, op, f);
                EXPECT_EQ(want ? 0 : -FI_EOPNOTSUPP, ret) << t.name << " " << kOpNames[op]
                                                          << " family " << f;
                if (want) {
                    EXPECT_EQ(16u, count);
                }
                struct fi_atomic_attr attr = {0, 0};
                uint64_t flags = (f == kFetch)   ? FI_FETCH_ATOMIC :
                                 (f == kCompare) ? FI_COMPARE_ATOMIC : 0;
                ret = fi_query_atomic(a.domain, t.dt, o, &attr, flags);
                EXPECT_EQ(want ? 0 : -FI_EOPNOTSUPP, ret);
                if (want) {
                    EXPECT_EQ(t.size, attr.size);
                }
            }
        }
    }
    /* What Sandia OpenSHMEM 1.5.3 checks at startup (src/transport_ofi.c) is all there. */
    size_t count;
    for (enum fi_datatype dt : {FI_INT32, FI_INT64, FI_UINT32, FI_UINT64}) {
        EXPECT_EQ(0, fi_atomicvalid(a.ep, dt, FI_SUM, &count));
        EXPECT_EQ(0, fi_fetch_atomicvalid(a.ep, dt, FI_SUM, &count));
        EXPECT_EQ(0, fi_compare_atomicvalid(a.ep, dt, FI_CSWAP, &count));
        EXPECT_EQ(0, fi_compare_atomicvalid(a.ep, dt, FI_MSWAP, &count));
    }
    for (enum fi_datatype dt : {FI_FLOAT, FI_DOUBLE, FI_INT32, FI_INT64}) {
        EXPECT_EQ(0, fi_atomicvalid(a.ep, dt, FI_ATOMIC_WRITE, &count));
        EXPECT_EQ(0, fi_fetch_atomicvalid(a.ep, dt, FI_ATOMIC_WRITE, &count));
        EXPECT_EQ(0, fi_fetch_atomicvalid(a.ep, dt, FI_ATOMIC_READ, &count));
    }
    for (enum fi_datatype dt : {FI_FLOAT, FI_DOUBLE, FI_LONG_DOUBLE, FI_INT16}) {
        EXPECT_EQ(0, fi_atomicvalid(a.ep, dt, FI_MIN, &count));
        EXPECT_EQ(0, fi_atomicvalid(a.ep, dt, FI_MAX, &count));
        EXPECT_EQ(0, fi_atomicvalid(a.ep, dt, FI_PROD, &count));
    }
    /* Its complex reductions (soft support there) are refused: SOS reduces them itself. */
    for (enum fi_datatype dt : {FI_FLOAT_COMPLEX, FI_DOUBLE_COMPLEX}) {
        EXPECT_EQ(-FI_EOPNOTSUPP, fi_atomicvalid(a.ep, dt, FI_SUM, &count));
        EXPECT_EQ(-FI_EOPNOTSUPP, fi_atomicvalid(a.ep, dt, FI_PROD, &count));
    }
}

TEST_F(OfiProviderAtomic, EveryOfferedPairMatchesTheModel)
{
    AmoInitiator ini = initiator();
    EXPECT_EQ(expected_pairs(), ini.check_all());
    EXPECT_EQ(0u, fi_cntr_readerr(a.wr_cntr));
    EXPECT_EQ(0u, fi_cntr_readerr(a.rd_cntr));
}

TEST_F(OfiProviderAtomic, CountersTakeBaseAsWritesAndFetchesAsReads)
{
    int64_t one = 1, got = 0;
    ASSERT_EQ(0, fi_inject_atomic(a.ep, &one, 1, a_to_b, region.base, region.key, FI_INT64,
                                  FI_SUM));
    one = 100;   /* the inject's operand was copied */
    ASSERT_EQ(0, fi_cntr_wait(a.wr_cntr, 1, 20000));
    struct fi_cq_tagged_entry e;
    EXPECT_EQ(-FI_EAGAIN, fi_cq_read(a.cq, &e, 1));   /* no entry for an inject */
    struct fi_context ctx;
    ASSERT_EQ(0, fi_fetch_atomic(a.ep, &one, 1, NULL, &got, NULL, a_to_b, region.base,
                                 region.key, FI_INT64, FI_SUM, &ctx));
    ASSERT_EQ(1, wait_cq(a, {&b}, &e));
    EXPECT_EQ(1, got);
    EXPECT_EQ(101, get_val<int64_t>(region.buf));
    EXPECT_EQ(1u, fi_cntr_read(a.wr_cntr));
    EXPECT_EQ(1u, fi_cntr_read(a.rd_cntr));
}

TEST_F(OfiProviderAtomic, MsgFormsSpreadElementsOverIovecs)
{
    int32_t v[4] = {1, 2, 3, 4}, res[4] = {0, 0, 0, 0};
    for (int i = 0; i < 4; ++i) put_val<int32_t>(region.buf + 256 + 4 * i, 10 * (i + 1));
    struct fi_ioc iov[2] = {{&v[0], 1}, {&v[1], 3}};
    struct fi_ioc rv[2] = {{&res[0], 3}, {&res[3], 1}};
    struct fi_rma_ioc rma[2] = {{region.base + 256, 2, region.key},
                                {region.base + 264, 2, region.key}};
    struct fi_context ctx;
    struct fi_msg_atomic msg = {iov, NULL, 2, a_to_b, rma, 2, FI_INT32, FI_MAX, &ctx, 0};
    ASSERT_EQ(0, fi_fetch_atomicmsg(a.ep, &msg, rv, NULL, 2, FI_COMPLETION));
    struct fi_cq_tagged_entry e;
    ASSERT_EQ(1, wait_cq(a, {&b}, &e));
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(10 * (i + 1), res[i]);
        EXPECT_EQ(10 * (i + 1), get_val<int32_t>(region.buf + 256 + 4 * i));
    }
    /* More elements than the valid calls' count: refused. */
    std::vector<int32_t> many(17, 1);
    EXPECT_EQ(-FI_EMSGSIZE, fi_atomic(a.ep, many.data(), many.size(), NULL, a_to_b,
                                      region.base, region.key, FI_INT32, FI_SUM, &ctx));
    /* An element across a 32-byte boundary cannot be atomic: refused. */
    long double ld = 1;
    EXPECT_EQ(-FI_EINVAL, fi_atomic(a.ep, &ld, 1, NULL, a_to_b, region.base + 24, region.key,
                                    FI_LONG_DOUBLE, FI_SUM, &ctx));
}

TEST_F(OfiProviderAtomic, UnsupportedPairIsRefused)
{
    float f = 1;
    struct fi_context ctx;
    EXPECT_EQ(-FI_EOPNOTSUPP, fi_atomic(a.ep, &f, 1, NULL, a_to_b, region.base, region.key,
                                        FI_FLOAT, FI_BOR, &ctx));
    EXPECT_EQ(-FI_EOPNOTSUPP, fi_atomic(a.ep, &f, 1, NULL, a_to_b, region.base, region.key,
                                        FI_INT32, FI_ATOMIC_READ, &ctx));
    EXPECT_EQ(-FI_EOPNOTSUPP, fi_atomic(a.ep, &f, 1, NULL, a_to_b, region.base, region.key,
                                        FI_INT32, FI_CSWAP, &ctx));
    double dc[2] = {1, 2};
    EXPECT_EQ(-FI_EOPNOTSUPP, fi_atomic(a.ep, dc, 1, NULL, a_to_b, region.base, region.key,
                                        FI_DOUBLE_COMPLEX, FI_SUM, &ctx));
    struct fi_cq_tagged_entry e;
    EXPECT_EQ(-FI_EAGAIN, fi_cq_read(a.cq, &e, 1));
}

TEST_F(OfiProviderAtomic, BadKeyIsAnErrorEntry)
{
    int64_t one = 1, got = 0;
    struct fi_context ctx;
    struct fi_cq_tagged_entry e;
    struct fi_cq_err_entry err;
    ASSERT_EQ(0, fi_fetch_atomic(a.ep, &one, 1, NULL, &got, NULL, a_to_b, region.base,
                                 region.key + 1000, FI_INT64, FI_SUM, &ctx));
    ASSERT_EQ(-FI_EAVAIL, wait_cq(a, {&b}, &e, &err));
    EXPECT_EQ(FI_EACCES, err.err);
    EXPECT_EQ((uint64_t)(FI_ATOMIC | FI_READ), err.flags & (FI_ATOMIC | FI_READ));
    /* Out of the region with the right key: an error entry too, nothing touched. */
    ASSERT_EQ(0, fi_atomic(a.ep, &one, 1, NULL, a_to_b, region.base + kRegion, region.key,
                           FI_INT64, FI_SUM, &ctx));
    ASSERT_EQ(-FI_EAVAIL, wait_cq(a, {&b}, &e, &err));
    EXPECT_EQ(FI_EACCES, err.err);
    EXPECT_EQ(1u, fi_cntr_readerr(a.wr_cntr));
    EXPECT_EQ(1u, fi_cntr_readerr(a.rd_cntr));
}

/* The child of the test below: an unsupported pair, with FI_LOG_LEVEL=warn. */
int unsupported_child()
{
    setenv("FI_LOG_LEVEL", "warn", 1);
    Node a;
    a.caps = kAmoCaps;
    if (a.open() != 0) return 2;
    float f = 1;
    if (fi_atomic(a.ep, &f, 1, NULL, 0, 0, kAmoKey, FI_FLOAT, FI_BXOR, NULL) != -FI_EOPNOTSUPP) {
        return 3;
    }
    fflush(stderr);
    return 0;
}

class OfiProviderAtomicLog : public OfiProvider {};

TEST_F(OfiProviderAtomicLog, UnsupportedPairLogLineNamesIt)
{
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(_exit(unsupported_child()), ::testing::ExitedWithCode(0),
                "fi_atomic: FI_BXOR on FI_FLOAT is not supported");
}

/* ---------------------------------------------------------------- two processes */

/* A target process: registers a region, gives its name, key and base, progresses until told. */
void amo_target_main(int rd, int wr)
{
    Node n;
    open_amo_node(n);
    if (::testing::Test::HasFatalFailure()) _exit(2);
    AmoRegion region;
    if (region.reg(n) != 0) _exit(3);
    if (write(wr, n.name, sizeof(n.name)) != (ssize_t)sizeof(n.name)) _exit(4);
    if (write(wr, &region.key, 8) != 8 || write(wr, &region.base, 8) != 8) _exit(5);
    fcntl(rd, F_SETFL, O_NONBLOCK);
    struct fi_cq_tagged_entry e;
    for (;;) {
        (void)fi_cq_read(n.cq, &e, 0);   /* progress: AM lanes need the target's */
        char cmd;
        ssize_t got = read(rd, &cmd, 1);
        if (got == 0) _exit(6);
        if (got == 1) {
            n.close();
            _exit(0);
        }
    }
}

class OfiProviderAtomicXproc : public OfiProvider,
                               public ::testing::WithParamInterface<std::string> {};

TEST_P(OfiProviderAtomicXproc, EveryOfferedPairMatchesTheModelAcrossProcesses)
{
    EnvGuard env("AXON_TLS", GetParam().c_str());
    use_build_provider();
    Child target;
    target.start([](int rd, int wr) { amo_target_main(rd, wr); });
    Node n;
    open_amo_node(n);
    char peer[64];
    uint64_t key, base;
    ASSERT_EQ((ssize_t)sizeof(peer), read(target.from[0], peer, sizeof(peer)));
    ASSERT_EQ(8, read(target.from[0], &key, 8));
    ASSERT_EQ(8, read(target.from[0], &base, 8));
    AmoInitiator ini{n, n.insert(peer), base, key, {}, {}};
    EXPECT_EQ(expected_pairs(), ini.check_all());
    ASSERT_EQ(1, write(target.to[1], "q", 1));
    target.finish();
}

/*
 * Two initiators on one location, 1000 operations each: native fetch-adds
 * (their results all distinct), float sums and 2-byte sums on the two
 * halves of one word (both compare-and-swap loops), fetching MAX and MIN
 * (a loop too) whose results never fall behind the initiator's own last
 * operand: a lost update would break each of these.
 */
const int kHammer = 1000;

int hammer_main(int id, int rd, int wr)
{
    char peer[64];
    uint64_t base, key;
    if (read(rd, peer, sizeof(peer)) != (ssize_t)sizeof(peer)) return 9;
    if (read(rd, &key, 8) != 8 || read(rd, &base, 8) != 8) return 9;
    Node n;
    n.caps = kAmoCaps;
    n.mr_mode = FI_MR_LOCAL;
    if (n.open() != 0) return 10;
    fi_addr_t p = n.insert(peer);
    struct fi_context ctx;
    struct fi_cq_tagged_entry e;
    int64_t fetched_sum = 0;
    for (int i = 0; i < kHammer; ++i) {
        int64_t one = 1, old = -1;
        float fone = 1;
        int16_t sone = 1;
        int32_t mx = 2 * i + id, mn = -(2 * i + id), oldmax = 0, oldmin = 0;
        if (fi_fetch_atomic(n.ep, &one, 1, NULL, &old, NULL, p, base, key, FI_INT64, FI_SUM,
                            &ctx) != 0) return 11;
        if (wait_cq(n, {}, &e) != 1) return 12;
        fetched_sum += old;
        if (fi_atomic(n.ep, &fone, 1, NULL, p, base + 8, key, FI_FLOAT, FI_SUM, &ctx) != 0)
            return 13;
        if (wait_cq(n, {}, &e) != 1) return 14;
        if (fi_atomic(n.ep, &sone, 1, NULL, p, base + 16 + 2 * id, key, FI_INT16, FI_SUM,
                      &ctx) != 0) return 15;
        if (wait_cq(n, {}, &e) != 1) return 16;
        if (fi_fetch_atomic(n.ep, &mx, 1, NULL, &oldmax, NULL, p, base + 32, key, FI_INT32,
                            FI_MAX, &ctx) != 0) return 17;
        if (wait_cq(n, {}, &e) != 1) return 18;
        if ((i > 0) && (oldmax < 2 * (i - 1) + id)) return 19;   /* our last MAX was lost */
        if (fi_fetch_atomic(n.ep, &mn, 1, NULL, &oldmin, NULL, p, base + 36, key, FI_INT32,
                            FI_MIN, &ctx) != 0) return 20;
        if (wait_cq(n, {}, &e) != 1) return 21;
        if ((i > 0) && (oldmin > -(2 * (i - 1) + id))) return 22;
    }
    if (write(wr, &fetched_sum, 8) != 8) return 23;
    return 0;
}

TEST_P(OfiProviderAtomicXproc, TwoInitiatorsOnOneLocationStayExact)
{
    EnvGuard env("AXON_TLS", GetParam().c_str());
    use_build_provider();
    /* This process is the target: it progresses while the two children hammer it. The
     * children are forked before it opens anything (as every Xproc test here). */
    Child c[2];
    for (int id = 0; id < 2; ++id) {
        c[id].start([=](int rd, int wr) { _exit(hammer_main(id, rd, wr)); });
    }
    Node t;
    open_amo_node(t);
    AmoRegion region;
    ASSERT_EQ(0, region.reg(t));
    for (int id = 0; id < 2; ++id) {
        ASSERT_EQ((ssize_t)sizeof(t.name), write(c[id].to[1], t.name, sizeof(t.name)));
        ASSERT_EQ(8, write(c[id].to[1], &region.key, 8));
        ASSERT_EQ(8, write(c[id].to[1], &region.base, 8));
    }
    int64_t sums[2] = {0, 0};
    int done = 0;
    double deadline = now_sec() + 60;
    struct fi_cq_tagged_entry e;
    for (int id = 0; id < 2; ++id) fcntl(c[id].from[0], F_SETFL, O_NONBLOCK);
    while (done < 2 && now_sec() < deadline) {
        (void)fi_cq_read(t.cq, &e, 0);
        for (int id = 0; id < 2; ++id) {
            if (read(c[id].from[0], &sums[id], 8) == 8) ++done;
        }
    }
    for (int id = 0; id < 2; ++id) c[id].finish();
    ASSERT_EQ(2, done);
    EXPECT_EQ((int64_t)(2 * kHammer) * (2 * kHammer - 1) / 2, sums[0] + sums[1]);
    EXPECT_EQ(2 * kHammer, get_val<int64_t>(region.buf));
    EXPECT_EQ((float)(2 * kHammer), get_val<float>(region.buf + 8));
    EXPECT_EQ(kHammer, get_val<int16_t>(region.buf + 16));
    EXPECT_EQ(kHammer, get_val<int16_t>(region.buf + 18));
    EXPECT_EQ(2 * (kHammer - 1) + 1, get_val<int32_t>(region.buf + 32));
    EXPECT_EQ(-(2 * (kHammer - 1) + 1), get_val<int32_t>(region.buf + 36));
}

INSTANTIATE_TEST_SUITE_P(Lanes, OfiProviderAtomicXproc, ::testing::Values("shm", "tcp"),
                         [](const ::testing::TestParamInfo<std::string> &p) { return p.param; });

}  // namespace
