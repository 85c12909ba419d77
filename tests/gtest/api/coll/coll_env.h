/*
 * What the collectives suites share: N members of a team in ONE process
 * (a context and a worker each, endpoints all to all), driven by the test
 * thread, which progresses every worker in turn until each member's team
 * or collective is done; and the data types' values and the reference
 * reductions the results are checked against, computed here from the
 * semantics of api/axon_coll.h.
 *
 * In an unnamed namespace, like the other test headers: each suite that
 * includes it gets its own copy.
 */
#ifndef AXON_TEST_COLL_ENV_H
#define AXON_TEST_COLL_ENV_H

#include <gtest/gtest.h>

#include <sched.h>
#include <string.h>

#include <functional>
#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "axon.h"
#include "axon_int.h"  /* tag queues and request pool: what a test leaves behind */
#include "harness.h"

namespace {

const double kCollTimeout = 30.0;  /* one team creation or one collective, every member */

/* ---------------------------------------------------------------- lanes */

struct CollParam {
    const char        *label;  /* lane_nSIZE */
    const char        *tls;
    uint32_t           size;   /* members */
    axon_config_kv_t   config[2];  /* overrides; name NULL ends */
    const char *const *member_tls;  /* if set, member i's AXON_TLS (tls then names them all) */
};

inline std::ostream &operator<<(std::ostream &os, const CollParam &p)
{
    return os << p.label;
}

inline std::string coll_param_name(const ::testing::TestParamInfo<CollParam> &info)
{
    return std::string(info.param.label);
}

/*
 * Team sizes 1 to 8 over shm and tcp (one process: every member's worker
 * here); self only reaches its own worker, so it has teams of one. The
 * main lanes (every pass, ASan included; valgrind runs self) are each
 * transport once at a size that is no power of two for shm and one that is
 * for tcp, and the offload over rc (softib's cross-channel chains, issue
 * 19) at 5; the other sizes are variants (the plain pass).
 */
const CollParam kCollLanes[] = {
    {"self_n1", "self", 1}, {"shm_n5", "shm", 5}, {"tcp_n4", "tcp", 4},
    {"rc_xc_n5", "rc", 5, {{"COLL_OFFLOAD", "y"}}},
};

/*
 * Mixed transports in one team: members 0-2 may use shm or tcp, members 3
 * and 4 tcp alone, so pairs among 0-2 go over shm and every pair with 3
 * or 4 over tcp (Members::create checks each pair's lane).
 */
const char *const kShmTcpMembers[] = {"shm,tcp", "shm,tcp", "shm,tcp", "tcp", "tcp"};

const CollParam kCollSizes[] = {
    {"shm_n1", "shm", 1}, {"shm_n2", "shm", 2}, {"shm_n3", "shm", 3}, {"shm_n4", "shm", 4},
    {"shm_n6", "shm", 6}, {"shm_n7", "shm", 7}, {"shm_n8", "shm", 8},
    {"tcp_n2", "tcp", 2}, {"tcp_n3", "tcp", 3}, {"tcp_n5", "tcp", 5}, {"tcp_n6", "tcp", 6},
    {"tcp_n7", "tcp", 7}, {"tcp_n8", "tcp", 8},
    {"shm_tcp_n5", "shm,tcp", 5, {}, kShmTcpMembers},
    /* softib's transports through every test of the suites (CollSlow runs each
     * collective once on them at every size): rc in software, ud offloaded
     * (AXON_COLL_OFFLOAD=auto) */
    {"rc_n3", "rc", 3, {{"COLL_OFFLOAD", "n"}}}, {"ud_n6", "ud", 6},
    /* barrier, bcast and allreduce run by softib's cross-channel chains */
    {"rc_xc_n2", "rc", 2, {{"COLL_OFFLOAD", "y"}}}, {"rc_xc_n3", "rc", 3, {{"COLL_OFFLOAD", "y"}}},
    {"rc_xc_n4", "rc", 4, {{"COLL_OFFLOAD", "y"}}}, {"rc_xc_n6", "rc", 6, {{"COLL_OFFLOAD", "y"}}},
    {"rc_xc_n7", "rc", 7, {{"COLL_OFFLOAD", "y"}}}, {"rc_xc_n8", "rc", 8, {{"COLL_OFFLOAD", "y"}}},
    /* k-nomial trees of other radixes than the default binomial (bcast, reduce) */
    {"shm_radix3_n7", "shm", 7, {{"COLL_KNOMIAL_RADIX", "3"}}},
    {"shm_radix4_n8", "shm", 8, {{"COLL_KNOMIAL_RADIX", "4"}}},
};

/* ---------------------------------------------------------------- data types */

struct FloatInt  { float   v; int32_t i; };
struct DoubleInt { double  v; int32_t i; };
struct IntInt    { int32_t v; int32_t i; };
struct LongInt   { int64_t v; int32_t i; };

enum DtKind { kSigned, kUnsigned, kFloat, kPair };

struct DtInfo {
    axon_dt_t   dt;
    const char *name;
    size_t      size;
    DtKind      kind;
};

const DtInfo kDts[] = {
    {AXON_DT_INT8, "int8", 1, kSigned},          {AXON_DT_INT16, "int16", 2, kSigned},
    {AXON_DT_INT32, "int32", 4, kSigned},        {AXON_DT_INT64, "int64", 8, kSigned},
    {AXON_DT_UINT8, "uint8", 1, kUnsigned},      {AXON_DT_UINT16, "uint16", 2, kUnsigned},
    {AXON_DT_UINT32, "uint32", 4, kUnsigned},    {AXON_DT_UINT64, "uint64", 8, kUnsigned},
    {AXON_DT_FLOAT, "float", 4, kFloat},         {AXON_DT_DOUBLE, "double", 8, kFloat},
    {AXON_DT_FLOAT_INT32, "float_int32", sizeof(FloatInt), kPair},
    {AXON_DT_DOUBLE_INT32, "double_int32", sizeof(DoubleInt), kPair},
    {AXON_DT_INT32_INT32, "int32_int32", sizeof(IntInt), kPair},
    {AXON_DT_INT64_INT32, "int64_int32", sizeof(LongInt), kPair},
};

const char *const kOpNames[] = {"sum", "prod", "min", "max", "band", "bor",
                                "bxor", "land", "lor", "minloc", "maxloc"};

inline const DtInfo &dt_info(axon_dt_t dt)
{
    return kDts[dt];
}

/* Whether op reduces dt, as the header's comments on axon_op_t say. */
inline bool op_applies(axon_op_t op, axon_dt_t dt)
{
    DtKind kind = dt_info(dt).kind;
    switch (op) {
    case AXON_OP_SUM: case AXON_OP_PROD: case AXON_OP_MIN: case AXON_OP_MAX:
        return kind != kPair;
    case AXON_OP_BAND: case AXON_OP_BOR: case AXON_OP_BXOR: case AXON_OP_LAND: case AXON_OP_LOR:
        return (kind == kSigned) || (kind == kUnsigned);
    case AXON_OP_MINLOC: case AXON_OP_MAXLOC:
        return kind == kPair;
    default:
        return false;
    }
}

inline bool is_reduction(axon_coll_type_t coll)
{
    return (coll == AXON_COLL_REDUCE) || (coll == AXON_COLL_ALLREDUCE) ||
           (coll == AXON_COLL_REDUCE_SCATTER);
}

inline std::string combo_name(axon_dt_t dt, axon_op_t op)
{
    return std::string(dt_info(dt).name) + "/" + kOpNames[op];
}

inline uint64_t mix(uint64_t seed, uint64_t a, uint64_t b)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull ^ (a + 1) * 0xBF58476D1CE4E5B9ull ^
                 (b + 7) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    x *= 0xD6E8FEB86659FD93ull;
    return x ^ (x >> 32);
}

/*
 * Member m's element i for op: small integers where the reduction adds or
 * multiplies (so every sum and product is exact and fits int8), full-width
 * bits where it compares or masks. Products: at most one factor 2 and one
 * factor -1 per element over any 8 members.
 */
template <typename T> T gen_value(axon_op_t op, DtKind kind, uint32_t m, size_t i, uint64_t seed)
{
    uint64_t h = mix(seed, m, i);
    switch (op) {
    case AXON_OP_SUM:
        return (kind == kUnsigned) ? (T)(h % 9) : (T)((int)(h % 9) - 4);
    case AXON_OP_PROD:
        if ((i * 7 + m + seed) % 11 == 0) {
            return (T)2;
        }
        return ((kind != kUnsigned) && ((i + 3 * m + seed) % 13 == 0)) ? (T)-1 : (T)1;
    case AXON_OP_MIN: case AXON_OP_MAX:
        if (kind == kFloat) {  /* quarters up to a million: exact in a float */
            return (T)(((double)(int64_t)(h % 8000001) - 4000000.0) * 0.25);
        }
        return (T)h;
    case AXON_OP_BAND:
        return (T)(h | mix(seed + 1, m, i));
    case AXON_OP_BOR:
        return (T)(h & mix(seed + 1, m, i) & mix(seed + 2, m, i));
    case AXON_OP_LAND:  /* mostly true, with values other than 1 */
        return (h % 8 == 0) ? (T)0 : (T)((h >> 8) | 1);
    case AXON_OP_LOR:
        return (h % 8 == 0) ? (T)((h >> 8) | 1) : (T)0;
    default:
        return (T)h;
    }
}

template <typename T> T apply_op(axon_op_t op, T a, T b)
{
    switch (op) {
    case AXON_OP_SUM:  return (T)(a + b);
    case AXON_OP_PROD: return (T)(a * b);
    case AXON_OP_MIN:  return (b < a) ? b : a;
    case AXON_OP_MAX:  return (b > a) ? b : a;
    case AXON_OP_LAND: return (T)((a != 0) && (b != 0));
    case AXON_OP_LOR:  return (T)((a != 0) || (b != 0));
    default:           return a;
    }
}

template <typename T> T apply_bits(axon_op_t op, T a, T b)
{
    switch (op) {
    case AXON_OP_BAND: return (T)(a & b);
    case AXON_OP_BOR:  return (T)(a | b);
    case AXON_OP_BXOR: return (T)(a ^ b);
    default:           return apply_op(op, a, b);
    }
}

/* Pairs: small values, so that ties are common; indices in no order of the members. */
template <typename P> P gen_pair(uint32_t m, size_t i, uint64_t seed)
{
    P p;
    memset(&p, 0, sizeof(p));
    uint64_t h = mix(seed, m, i);
    p.v = (decltype(p.v))((int)(h % 4) - 1);
    p.i = (int32_t)((h >> 16) % 1000) - 500;
    return p;
}

template <typename P> P apply_loc(axon_op_t op, P a, P b)
{
    bool better = (op == AXON_OP_MINLOC) ? (b.v < a.v) : (b.v > a.v);
    if (better) {
        return b;
    }
    if ((b.v == a.v) && (b.i < a.i)) {
        a.i = b.i;
    }
    return a;
}

template <typename T> void fill_typed(void *buf, size_t count, axon_op_t op, DtKind kind,
                                      uint32_t m, uint64_t seed)
{
    T *p = static_cast<T *>(buf);
    for (size_t i = 0; i < count; ++i) {
        p[i] = gen_value<T>(op, kind, m, i, seed);
    }
}

template <typename P> void fill_pairs(void *buf, size_t count, uint32_t m, uint64_t seed)
{
    P *p = static_cast<P *>(buf);
    for (size_t i = 0; i < count; ++i) {
        p[i] = gen_pair<P>(m, i, seed);
    }
}

template <typename T> void reduce_typed(void *acc, const void *in, size_t count, axon_op_t op)
{
    T       *a = static_cast<T *>(acc);
    const T *b = static_cast<const T *>(in);
    for (size_t i = 0; i < count; ++i) {
        a[i] = apply_bits<T>(op, a[i], b[i]);
    }
}

template <typename T> void reduce_float(void *acc, const void *in, size_t count, axon_op_t op)
{
    T       *a = static_cast<T *>(acc);
    const T *b = static_cast<const T *>(in);
    for (size_t i = 0; i < count; ++i) {
        a[i] = apply_op<T>(op, a[i], b[i]);
    }
}

template <typename P> void reduce_pairs(void *acc, const void *in, size_t count, axon_op_t op)
{
    P       *a = static_cast<P *>(acc);
    const P *b = static_cast<const P *>(in);
    for (size_t i = 0; i < count; ++i) {
        a[i] = apply_loc<P>(op, a[i], b[i]);
    }
}

/* Member m's input of count elements of dt for op (from seed). */
inline void fill_input(void *buf, size_t count, axon_dt_t dt, axon_op_t op, uint32_t m,
                       uint64_t seed)
{
    DtKind k = dt_info(dt).kind;
    switch (dt) {
    case AXON_DT_INT8:   fill_typed<int8_t>(buf, count, op, k, m, seed); break;
    case AXON_DT_INT16:  fill_typed<int16_t>(buf, count, op, k, m, seed); break;
    case AXON_DT_INT32:  fill_typed<int32_t>(buf, count, op, k, m, seed); break;
    case AXON_DT_INT64:  fill_typed<int64_t>(buf, count, op, k, m, seed); break;
    case AXON_DT_UINT8:  fill_typed<uint8_t>(buf, count, op, k, m, seed); break;
    case AXON_DT_UINT16: fill_typed<uint16_t>(buf, count, op, k, m, seed); break;
    case AXON_DT_UINT32: fill_typed<uint32_t>(buf, count, op, k, m, seed); break;
    case AXON_DT_UINT64: fill_typed<uint64_t>(buf, count, op, k, m, seed); break;
    case AXON_DT_FLOAT:  fill_typed<float>(buf, count, op, k, m, seed); break;
    case AXON_DT_DOUBLE: fill_typed<double>(buf, count, op, k, m, seed); break;
    case AXON_DT_FLOAT_INT32:  fill_pairs<FloatInt>(buf, count, m, seed); break;
    case AXON_DT_DOUBLE_INT32: fill_pairs<DoubleInt>(buf, count, m, seed); break;
    case AXON_DT_INT32_INT32:  fill_pairs<IntInt>(buf, count, m, seed); break;
    case AXON_DT_INT64_INT32:  fill_pairs<LongInt>(buf, count, m, seed); break;
    default: break;
    }
}

/* acc = acc op in, element by element. */
inline void reduce_into(void *acc, const void *in, size_t count, axon_dt_t dt, axon_op_t op)
{
    switch (dt) {
    case AXON_DT_INT8:   reduce_typed<int8_t>(acc, in, count, op); break;
    case AXON_DT_INT16:  reduce_typed<int16_t>(acc, in, count, op); break;
    case AXON_DT_INT32:  reduce_typed<int32_t>(acc, in, count, op); break;
    case AXON_DT_INT64:  reduce_typed<int64_t>(acc, in, count, op); break;
    case AXON_DT_UINT8:  reduce_typed<uint8_t>(acc, in, count, op); break;
    case AXON_DT_UINT16: reduce_typed<uint16_t>(acc, in, count, op); break;
    case AXON_DT_UINT32: reduce_typed<uint32_t>(acc, in, count, op); break;
    case AXON_DT_UINT64: reduce_typed<uint64_t>(acc, in, count, op); break;
    case AXON_DT_FLOAT:  reduce_float<float>(acc, in, count, op); break;
    case AXON_DT_DOUBLE: reduce_float<double>(acc, in, count, op); break;
    case AXON_DT_FLOAT_INT32:  reduce_pairs<FloatInt>(acc, in, count, op); break;
    case AXON_DT_DOUBLE_INT32: reduce_pairs<DoubleInt>(acc, in, count, op); break;
    case AXON_DT_INT32_INT32:  reduce_pairs<IntInt>(acc, in, count, op); break;
    case AXON_DT_INT64_INT32:  reduce_pairs<LongInt>(acc, in, count, op); break;
    default: break;
    }
}

/* Bytes of element i that carry data (a pair's padding does not). */
inline size_t dt_data_bytes(axon_dt_t dt)
{
    switch (dt) {
    case AXON_DT_DOUBLE_INT32: case AXON_DT_INT64_INT32: return 12;
    default:                   return dt_info(dt).size;
    }
}

/* -1 if count elements of a and b hold the same values, else the first that differs. */
inline ssize_t first_diff(const void *a, const void *b, size_t count, axon_dt_t dt)
{
    size_t         size = dt_info(dt).size, data = dt_data_bytes(dt);
    const uint8_t *pa = static_cast<const uint8_t *>(a), *pb = static_cast<const uint8_t *>(b);
    if (data == size) {
        if (memcmp(pa, pb, count * size) == 0) {
            return -1;
        }
    }
    for (size_t i = 0; i < count; ++i) {
        if (memcmp(pa + i * size, pb + i * size, data) != 0) {
            return (ssize_t)i;
        }
    }
    return -1;
}

/* ---------------------------------------------------------------- members */

/*
 * N members in this process: node i is member i of every full team; eps[i][j]
 * reaches member j from member i (NULL where j == i).
 */
class Members {
public:
    std::vector<axon_test_node_t>       nodes;
    std::vector<std::vector<axon_ep_h>> eps;

    Members() {}
    Members(const Members &) = delete;
    Members &operator=(const Members &) = delete;
    ~Members() { teardown(); }

    uint32_t size() const { return (uint32_t)nodes.size(); }
    axon_worker_h worker(uint32_t i) const { return nodes[i].worker; }

    /* Nodes and endpoints; gtest failures (fatal) on error. Each pair's lane is
     * checked: the one pair_tl names, or every_pair_tl if set (selection may
     * prefer another transport than the lists' order says). */
    void create(const CollParam &p, uint32_t features, const char *every_pair_tl = nullptr)
    {
        std::vector<axon_config_kv_t> kv;
        for (const axon_config_kv_t &e : p.config) {
            if (e.name != NULL) {
                kv.push_back(e);
            }
        }
        nodes.assign(p.size, axon_test_node_t());
        for (uint32_t i = 0; i < p.size; ++i) {
            ASSERT_EQ(AXON_OK, axon_test_node_create_features(&nodes[i], features,
                                                              member_tls(p, i), kv.data(),
                                                              kv.size()))
                << "member " << i << " over " << member_tls(p, i);
        }
        std::vector<std::string> lanes_seen;
        eps.assign(p.size, std::vector<axon_ep_h>(p.size, nullptr));
        for (uint32_t i = 0; i < p.size; ++i) {
            for (uint32_t j = 0; j < p.size; ++j) {
                if (i != j) {
                    ASSERT_EQ(AXON_OK, axon_test_ep_create(nodes[i].worker, nodes[j].address,
                                                           nodes[j].address_length, &eps[i][j]))
                        << "endpoint " << i << " -> " << j;
                    axon_ep_attr_t attr;
                    ASSERT_EQ(AXON_OK, axon_ep_query(eps[i][j], &attr));
                    ASSERT_EQ(every_pair_tl ? every_pair_tl : pair_tl(p, i, j), attr.small_tl)
                        << "endpoint " << i << " -> " << j << ": the lane the test is named after";
                    if (std::find(lanes_seen.begin(), lanes_seen.end(), attr.small_tl) ==
                        lanes_seen.end()) {
                        lanes_seen.push_back(attr.small_tl);
                    }
                }
            }
        }
        if ((p.member_tls != nullptr) && (every_pair_tl == nullptr)) {
            ASSERT_LE(2u, lanes_seen.size()) << "a mixed lane whose pairs all use one transport";
        }
    }

    static const char *member_tls(const CollParam &p, uint32_t i)
    {
        return (p.member_tls != nullptr) ? p.member_tls[i] : p.tls;
    }

    /*
     * The transport members i and j talk over: the first of i's list that j
     * has too (the lists name the faster first, as selection prefers it).
     */
    static std::string pair_tl(const CollParam &p, uint32_t i, uint32_t j)
    {
        std::vector<std::string> mine = split_list(member_tls(p, i));
        std::vector<std::string> its  = split_list(member_tls(p, j));
        for (const std::string &tl : mine) {
            if (std::find(its.begin(), its.end(), tl) != its.end()) {
                return tl;
            }
        }
        return "(none in common)";
    }

    static std::vector<std::string> split_list(const char *list)
    {
        std::vector<std::string> out;
        std::string              s(list);
        for (size_t at = 0; at <= s.size();) {
            size_t comma = s.find(',', at);
            comma = (comma == std::string::npos) ? s.size() : comma;
            out.push_back(s.substr(at, comma - at));
            at = comma + 1;
        }
        return out;
    }

    /* One round: every worker progressed once (the CPU given up if none did anything). */
    void progress()
    {
        unsigned count = 0;
        for (const axon_test_node_t &n : nodes) {
            count += axon_worker_progress(n.worker);
        }
        if (count == 0) {
            sched_yield();
        }
    }

    void progress_for(double seconds)
    {
        double end = axon_test_time() + seconds;
        while (axon_test_time() < end) {
            progress();
        }
    }

    /* Progress every worker until done() or timeout; false on timeout. */
    bool progress_until(const std::function<bool()> &done, double timeout = kCollTimeout)
    {
        double end = axon_test_time() + timeout;
        while (!done()) {
            if (axon_test_time() > end) {
                return false;
            }
            progress();
        }
        return true;
    }

    /* Every team in teams (NULL entries skipped) created; their statuses in st. */
    bool wait_teams(const std::vector<axon_team_h> &teams, std::vector<axon_status_t> *st)
    {
        st->assign(teams.size(), AXON_INPROGRESS);
        return progress_until([&] {
            bool all = true;
            for (size_t i = 0; i < teams.size(); ++i) {
                if ((teams[i] != nullptr) && ((*st)[i] == AXON_INPROGRESS)) {
                    (*st)[i] = axon_team_create_test(teams[i]);
                    all      = all && ((*st)[i] != AXON_INPROGRESS);
                }
            }
            return all;
        });
    }

    /* A team of every member (rank i on worker i), ready; failures fatal. */
    void create_team(std::vector<axon_team_h> *teams)
    {
        teams->assign(size(), nullptr);
        for (uint32_t i = 0; i < size(); ++i) {
            axon_team_params_t params = {};
            params.field_mask = AXON_TEAM_PARAM_EPS | AXON_TEAM_PARAM_RANK;
            params.eps        = eps[i].data();
            params.size       = size();
            params.rank       = i;
            ASSERT_EQ(AXON_OK, axon_team_create_nb(nodes[i].worker, &params, &(*teams)[i]))
                << "member " << i;
            ASSERT_NE(nullptr, (*teams)[i]);
        }
        std::vector<axon_status_t> st;
        ASSERT_TRUE(wait_teams(*teams, &st))
            << "the team was not created within " << kCollTimeout << " s";
        for (uint32_t i = 0; i < size(); ++i) {
            ASSERT_EQ(AXON_OK, st[i]) << "member " << i << ": " << axon_status_string(st[i]);
            EXPECT_EQ(i, axon_team_rank((*teams)[i]));
            EXPECT_EQ(size(), axon_team_size((*teams)[i]));
        }
    }

    /* Post every collective (NULL skipped); true once all completed (statuses in st). */
    bool post_and_wait(const std::vector<axon_coll_h> &colls, std::vector<axon_status_t> *st,
                       double timeout = kCollTimeout)
    {
        st->assign(colls.size(), AXON_INPROGRESS);
        for (size_t i = 0; i < colls.size(); ++i) {
            if (colls[i] != nullptr) {
                axon_status_t s = axon_coll_post(colls[i]);
                if ((s != AXON_OK) && (s != AXON_INPROGRESS)) {
                    (*st)[i] = s;  /* failed to start: that is its status */
                }
            }
        }
        return wait_colls(colls, st, timeout);
    }

    /* Progress until every collective (NULL skipped) left AXON_INPROGRESS; st: as above
     * (entries not AXON_INPROGRESS are taken as done already). */
    bool wait_colls(const std::vector<axon_coll_h> &colls, std::vector<axon_status_t> *st,
                    double timeout = kCollTimeout)
    {
        if (st->size() != colls.size()) {
            st->assign(colls.size(), AXON_INPROGRESS);
        }
        return progress_until([&] {
            bool all = true;
            for (size_t i = 0; i < colls.size(); ++i) {
                if ((colls[i] != nullptr) && ((*st)[i] == AXON_INPROGRESS)) {
                    (*st)[i] = axon_coll_test(colls[i]);
                    all      = all && ((*st)[i] != AXON_INPROGRESS);
                }
            }
            return all;
        }, timeout);
    }

    /* Nothing left behind on any worker: requests, receives, unexpected messages. */
    bool skip_clean_check = false;  /* a test left messages on purpose */

    void check_clean()
    {
        progress_for(0.002);
        for (uint32_t m = 0; m < size(); ++m) {
            axon_worker_h w = nodes[m].worker;
            EXPECT_EQ(0u, w->req_mp.num_elems - w->req_mp.num_free)
                << "member " << m << ": requests not returned";
            for (size_t s = 0; s < AXON_TAG_SPACES; ++s) {
                EXPECT_EQ(0u, w->tm[s].num_unexpected)
                    << "member " << m << ", tag space " << s << ": messages nobody received";
                EXPECT_EQ(0u, w->tm[s].num_expected)
                    << "member " << m << ", tag space " << s << ": receives never matched";
            }
        }
    }

    void teardown()
    {
        std::vector<axon_request_h> reqs;
        std::vector<axon_worker_h>  owners;
        for (uint32_t i = 0; i < eps.size(); ++i) {
            for (axon_ep_h ep : eps[i]) {
                if (ep == nullptr) {
                    continue;
                }
                axon_request_h req = nullptr;
                axon_status_t  st  = axon_ep_close_nb(ep, AXON_EP_CLOSE_FLUSH, &req);
                if (st == AXON_INPROGRESS) {
                    reqs.push_back(req);
                }
            }
        }
        bool closed = progress_until([&] {
            for (axon_request_h req : reqs) {
                if (axon_request_test(req, NULL) == AXON_INPROGRESS) {
                    return false;
                }
            }
            return true;
        }, 10.0);
        EXPECT_TRUE(closed) << "closing the endpoints did not finish";
        for (axon_request_h req : reqs) {
            axon_request_free(req);
        }
        eps.clear();
        /* All at once: a ud member's close waits (linger) for the acks of its
         * goodbyes, which come only from members that still progress; one
         * after another, each waited out the whole linger. */
        std::vector<std::thread> closers;
        for (axon_test_node_t &n : nodes) {
            if (n.context != nullptr) {
                closers.emplace_back(axon_test_node_destroy, &n);
            }
        }
        for (std::thread &t : closers) {
            t.join();
        }
        nodes.clear();
    }
};

/* Frees collectives and destroys teams on every way out of a test. */
struct CollGuard {
    std::vector<axon_coll_h> colls;
    std::vector<axon_team_h> teams;

    ~CollGuard() { release(); }
    void release()
    {
        for (axon_coll_h c : colls) {
            if (c != nullptr) {
                EXPECT_EQ(AXON_OK, axon_coll_free(c));
            }
        }
        colls.clear();
        for (axon_team_h t : teams) {
            if (t != nullptr) {
                EXPECT_EQ(AXON_OK, axon_team_destroy(t));
            }
        }
        teams.clear();
    }
};

/*
 * The in-process suites' fixture: every member's team is made before each
 * test (contexts with the features the suite needs), and after it every
 * collective and team is released and the workers are checked clean.
 */
class CollTeamTest : public ::testing::TestWithParam<CollParam> {
protected:
    Members   m_;
    CollGuard g_;
    uint32_t  n_ = 0;

    void MakeTeam(uint32_t features)
    {
        m_.create(GetParam(), features);
        ASSERT_FALSE(HasFatalFailure());
        m_.create_team(&g_.teams);
        ASSERT_FALSE(HasFatalFailure());
        n_ = GetParam().size;
    }

    void TearDown() override
    {
        g_.release();
        if (!m_.skip_clean_check) {
            m_.check_clean();
        }
    }
};

}  // namespace

#endif
