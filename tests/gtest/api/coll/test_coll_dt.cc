/*
 * The collectives' data types and local reductions (api/coll/coll_dt.c):
 * sizes as C lays the types out, every kernel against a reference written
 * out here element by element, the refused pairs, the names for logs.
 */
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

extern "C" {
#include "coll_dt.h"
}

namespace {

template <typename V> struct Pair {
    V       v;
    int32_t i;
};

/* More elements than one vector loop's block (64), not a multiple of it: the tail runs too. */
const size_t kCount = 150;

bool is_integer(axon_dt_t dt) { return dt <= AXON_DT_UINT64; }
bool is_float(axon_dt_t dt) { return (dt == AXON_DT_FLOAT) || (dt == AXON_DT_DOUBLE); }
bool is_pair(axon_dt_t dt) { return (dt >= AXON_DT_FLOAT_INT32) && (dt < AXON_DT_LAST); }

/* What axon_coll.h promises, spelled out independently of the library's table. */
bool expected_applies(axon_dt_t dt, axon_op_t op)
{
    switch (op) {
    case AXON_OP_SUM: case AXON_OP_PROD: case AXON_OP_MIN: case AXON_OP_MAX:
        return is_integer(dt) || is_float(dt);
    case AXON_OP_BAND: case AXON_OP_BOR: case AXON_OP_BXOR: case AXON_OP_LAND: case AXON_OP_LOR:
        return is_integer(dt);
    case AXON_OP_MINLOC: case AXON_OP_MAXLOC:
        return is_pair(dt);
    default:
        return false;
    }
}

/* A deterministic stream of 64-bit values (splitmix64). */
struct Bits {
    uint64_t s;
    uint64_t next()
    {
        uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z          = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z          = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
};

/* Integers: the extremes and -1/0/1 against each other (wrap-around, signs), then random bits. */
template <typename T> void fill_values(std::vector<T> &a, std::vector<T> &b, std::true_type)
{
    const T special[] = {std::numeric_limits<T>::max(), std::numeric_limits<T>::min(), T(-1),
                         T(0), T(1), T(2), T(std::numeric_limits<T>::max() / 2 + 1)};
    const size_t n = sizeof(special) / sizeof(special[0]);
    Bits         bits{uint64_t(sizeof(T)) * 7919};
    for (size_t k = 0; k < kCount; ++k) {
        if (k < n * n) {
            a[k] = special[k / n];
            b[k] = special[k % n];
        } else {
            a[k] = T(bits.next());
            b[k] = (k % 5 == 0) ? T(0) : T(bits.next());   /* zeros for LAND/LOR */
        }
    }
}

/* Floats: signs, equal values, fractions; products overflow to inf in float. */
template <typename T> void fill_values(std::vector<T> &a, std::vector<T> &b, std::false_type)
{
    Bits bits{42};
    for (size_t k = 0; k < kCount; ++k) {
        a[k] = T(int64_t(bits.next() % 2001) - 1000) / 8;
        b[k] = (k % 7 == 0) ? a[k] : T(int64_t(bits.next() % 2001) - 1000) * T(1e15) / 3;
    }
}

template <typename T> T reference(axon_op_t op, T a, T b, std::true_type)
{
    /* Wrap-around as two's complement: compute in 64 bits, keep the low bits. */
    switch (op) {
    case AXON_OP_SUM:  return T(uint64_t(a) + uint64_t(b));
    case AXON_OP_PROD: return T(uint64_t(a) * uint64_t(b));
    case AXON_OP_MIN:  return std::min(a, b);
    case AXON_OP_MAX:  return std::max(a, b);
    case AXON_OP_BAND: return T(a & b);
    case AXON_OP_BOR:  return T(a | b);
    case AXON_OP_BXOR: return T(a ^ b);
    case AXON_OP_LAND: return (a && b) ? 1 : 0;
    case AXON_OP_LOR:  return (a || b) ? 1 : 0;
    default:           ADD_FAILURE() << "op " << op; return 0;
    }
}

template <typename T> T reference(axon_op_t op, T a, T b, std::false_type)
{
    switch (op) {
    case AXON_OP_SUM:  return a + b;
    case AXON_OP_PROD: return a * b;
    case AXON_OP_MIN:  return std::min(a, b);
    case AXON_OP_MAX:  return std::max(a, b);
    default:           ADD_FAILURE() << "op " << op; return 0;
    }
}

/* MPI's MINLOC/MAXLOC: the better value with its index; equal values, the smaller index. */
template <typename V> Pair<V> reference(axon_op_t op, Pair<V> a, Pair<V> b)
{
    bool b_better = (op == AXON_OP_MINLOC) ? (b.v < a.v) : (b.v > a.v);
    bool a_better = (op == AXON_OP_MINLOC) ? (a.v < b.v) : (a.v > b.v);
    if (a_better) return a;
    if (b_better) return b;
    return Pair<V>{a.v, std::min(a.i, b.i)};
}

axon_coll_reduce_fn_t kernel(axon_dt_t dt, axon_op_t op)
{
    axon_coll_reduce_fn_t fn = axon_coll_reduce_fn(dt, op);
    EXPECT_NE(nullptr, fn) << axon_dt_name(dt) << " " << axon_op_name(op);
    return fn;
}

template <typename T> void check_scalar(axon_dt_t dt, axon_op_t op)
{
    std::vector<T> a(kCount), b(kCount), out;
    fill_values(a, b, std::is_integral<T>());
    out = a;
    axon_coll_reduce_fn_t fn = kernel(dt, op);
    if (fn == nullptr) return;
    fn(out.data(), b.data(), kCount);
    for (size_t k = 0; k < kCount; ++k) {
        T want = reference(op, a[k], b[k], std::is_integral<T>());
        ASSERT_EQ(want, out[k]) << axon_dt_name(dt) << " " << axon_op_name(op) << " element " << k
                                << ": " << +a[k] << ", " << +b[k];
    }
}

template <typename V> void check_pair(axon_dt_t dt, axon_op_t op)
{
    std::vector<Pair<V>> a(kCount), b(kCount), out;
    Bits                 bits{7};
    for (size_t k = 0; k < kCount; ++k) {
        /* Few values, so many ties; indices on both sides of each other, negative too. */
        a[k] = Pair<V>{V(int(bits.next() % 5) - 2), int32_t(bits.next() % 9) - 4};
        b[k] = Pair<V>{V(int(bits.next() % 5) - 2), int32_t(bits.next() % 9) - 4};
    }
    out                      = a;
    axon_coll_reduce_fn_t fn = kernel(dt, op);
    if (fn == nullptr) return;
    fn(out.data(), b.data(), kCount);
    size_t ties = 0;
    for (size_t k = 0; k < kCount; ++k) {
        Pair<V> want = reference(op, a[k], b[k]);
        ties += (a[k].v == b[k].v) && (a[k].i != b[k].i);
        ASSERT_TRUE((want.v == out[k].v) && (want.i == out[k].i))
            << axon_dt_name(dt) << " " << axon_op_name(op) << " element " << k << ": (" << +a[k].v
            << ", " << a[k].i << "), (" << +b[k].v << ", " << b[k].i << ") gave (" << +out[k].v
            << ", " << out[k].i << ")";
    }
    EXPECT_GT(ties, 10u) << "too few ties to test the index rule";
}

TEST(CollDt, SizesMatchCStructs)
{
    struct FloatInt { float v; int32_t i; };
    struct DoubleInt { double v; int32_t i; };
    struct IntInt { int32_t v; int32_t i; };
    struct LongInt { int64_t v; int32_t i; };

    EXPECT_EQ(1u, axon_dt_size(AXON_DT_INT8));
    EXPECT_EQ(2u, axon_dt_size(AXON_DT_INT16));
    EXPECT_EQ(4u, axon_dt_size(AXON_DT_INT32));
    EXPECT_EQ(8u, axon_dt_size(AXON_DT_INT64));
    EXPECT_EQ(1u, axon_dt_size(AXON_DT_UINT8));
    EXPECT_EQ(2u, axon_dt_size(AXON_DT_UINT16));
    EXPECT_EQ(4u, axon_dt_size(AXON_DT_UINT32));
    EXPECT_EQ(8u, axon_dt_size(AXON_DT_UINT64));
    EXPECT_EQ(sizeof(float), axon_dt_size(AXON_DT_FLOAT));
    EXPECT_EQ(sizeof(double), axon_dt_size(AXON_DT_DOUBLE));
    EXPECT_EQ(sizeof(FloatInt), axon_dt_size(AXON_DT_FLOAT_INT32));
    EXPECT_EQ(sizeof(DoubleInt), axon_dt_size(AXON_DT_DOUBLE_INT32));
    EXPECT_EQ(sizeof(IntInt), axon_dt_size(AXON_DT_INT32_INT32));
    EXPECT_EQ(sizeof(LongInt), axon_dt_size(AXON_DT_INT64_INT32));
    if (alignof(double) == 8) {   /* x86-64, aarch64, ...: what axon_coll.h documents */
        EXPECT_EQ(8u, axon_dt_size(AXON_DT_FLOAT_INT32));
        EXPECT_EQ(16u, axon_dt_size(AXON_DT_DOUBLE_INT32));
        EXPECT_EQ(8u, axon_dt_size(AXON_DT_INT32_INT32));
        EXPECT_EQ(16u, axon_dt_size(AXON_DT_INT64_INT32));
    }
    EXPECT_EQ(0u, axon_dt_size(AXON_DT_LAST));
    EXPECT_EQ(0u, axon_dt_size(axon_dt_t(-1)));
    EXPECT_EQ(0u, axon_dt_size(axon_dt_t(1000)));
}

TEST(CollDt, EveryOpMatchesAReference)
{
    int checked = 0;
    for (int d = 0; d < AXON_DT_LAST; ++d) {
        for (int o = 0; o < AXON_OP_LAST; ++o) {
            axon_dt_t dt = axon_dt_t(d);
            axon_op_t op = axon_op_t(o);
            ASSERT_EQ(expected_applies(dt, op), axon_coll_op_applies(dt, op) != 0)
                << axon_dt_name(dt) << " " << axon_op_name(op);
            if (!expected_applies(dt, op)) continue;
            ++checked;
            switch (dt) {
            case AXON_DT_INT8:         check_scalar<int8_t>(dt, op); break;
            case AXON_DT_INT16:        check_scalar<int16_t>(dt, op); break;
            case AXON_DT_INT32:        check_scalar<int32_t>(dt, op); break;
            case AXON_DT_INT64:        check_scalar<int64_t>(dt, op); break;
            case AXON_DT_UINT8:        check_scalar<uint8_t>(dt, op); break;
            case AXON_DT_UINT16:       check_scalar<uint16_t>(dt, op); break;
            case AXON_DT_UINT32:       check_scalar<uint32_t>(dt, op); break;
            case AXON_DT_UINT64:       check_scalar<uint64_t>(dt, op); break;
            case AXON_DT_FLOAT:        check_scalar<float>(dt, op); break;
            case AXON_DT_DOUBLE:       check_scalar<double>(dt, op); break;
            case AXON_DT_FLOAT_INT32:  check_pair<float>(dt, op); break;
            case AXON_DT_DOUBLE_INT32: check_pair<double>(dt, op); break;
            case AXON_DT_INT32_INT32:  check_pair<int32_t>(dt, op); break;
            case AXON_DT_INT64_INT32:  check_pair<int64_t>(dt, op); break;
            default:                   FAIL() << "type " << d;
            }
            if (HasFatalFailure()) return;
        }
    }
    EXPECT_EQ(10 * 4 + 8 * 5 + 4 * 2, checked);
}

/* A kernel of no elements touches nothing (the buffers may be NULL). */
TEST(CollDt, ZeroCountTouchesNothing)
{
    int32_t a = 5, b = 7;
    axon_coll_reduce_fn(AXON_DT_INT32, AXON_OP_SUM)(&a, &b, 0);
    axon_coll_reduce_fn(AXON_DT_INT32, AXON_OP_SUM)(nullptr, nullptr, 0);
    EXPECT_EQ(5, a);
}

/* What axon_coll_reduce_fn_t documents for NaN: a comparison with one is false, so in's element wins. */
TEST(CollDt, FloatMinMaxWithNanGiveTheIncomingElement)
{
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (axon_op_t op : {AXON_OP_MIN, AXON_OP_MAX}) {
        double inout[2] = {nan, 1.0};
        double in[2]    = {1.0, nan};
        axon_coll_reduce_fn(AXON_DT_DOUBLE, op)(inout, in, 2);
        EXPECT_EQ(1.0, inout[0]) << axon_op_name(op);
        EXPECT_TRUE(std::isnan(inout[1])) << axon_op_name(op);
    }
}

TEST(CollDt, OpsThatDoNotApplyAreRefused)
{
    int refused = 0;
    for (int d = -1; d <= AXON_DT_LAST + 1; ++d) {
        for (int o = -1; o <= AXON_OP_LAST + 1; ++o) {
            axon_dt_t dt = axon_dt_t(d);
            axon_op_t op = axon_op_t(o);
            bool in_range = (d >= 0) && (d < AXON_DT_LAST) && (o >= 0) && (o < AXON_OP_LAST);
            if (in_range && expected_applies(dt, op)) continue;
            ++refused;
            EXPECT_EQ(0, axon_coll_op_applies(dt, op)) << d << " " << o;
            EXPECT_EQ(nullptr, axon_coll_reduce_fn(dt, op)) << d << " " << o;
        }
    }
    /* 14 x 11 in range, 88 of them apply; 17 x 14 in all. */
    EXPECT_EQ(17 * 14 - 88, refused);
    EXPECT_EQ(nullptr, axon_coll_reduce_fn(axon_dt_t(1 << 20), AXON_OP_SUM));
    EXPECT_EQ(nullptr, axon_coll_reduce_fn(AXON_DT_INT32, axon_op_t(1 << 20)));
}

TEST(CollDt, NamesForLogs)
{
    EXPECT_STREQ("int32", axon_dt_name(AXON_DT_INT32));
    EXPECT_STREQ("uint8", axon_dt_name(AXON_DT_UINT8));
    EXPECT_STREQ("double", axon_dt_name(AXON_DT_DOUBLE));
    EXPECT_STREQ("double_int32", axon_dt_name(AXON_DT_DOUBLE_INT32));
    EXPECT_STREQ("int64_int32", axon_dt_name(AXON_DT_INT64_INT32));
    EXPECT_STREQ("sum", axon_op_name(AXON_OP_SUM));
    EXPECT_STREQ("bxor", axon_op_name(AXON_OP_BXOR));
    EXPECT_STREQ("maxloc", axon_op_name(AXON_OP_MAXLOC));

    std::set<std::string> dts, ops;
    for (int d = 0; d < AXON_DT_LAST; ++d) dts.insert(axon_dt_name(axon_dt_t(d)));
    for (int o = 0; o < AXON_OP_LAST; ++o) ops.insert(axon_op_name(axon_op_t(o)));
    EXPECT_EQ(size_t(AXON_DT_LAST), dts.size()) << "two types share a name";
    EXPECT_EQ(size_t(AXON_OP_LAST), ops.size()) << "two operations share a name";
    EXPECT_EQ(0u, dts.count("unknown"));
    EXPECT_EQ(0u, ops.count("unknown"));

    for (int bad : {-1, int(AXON_DT_LAST), 1000}) EXPECT_STREQ("unknown", axon_dt_name(axon_dt_t(bad)));
    for (int bad : {-1, int(AXON_OP_LAST), 1000}) EXPECT_STREQ("unknown", axon_op_name(axon_op_t(bad)));
}

}  // namespace
