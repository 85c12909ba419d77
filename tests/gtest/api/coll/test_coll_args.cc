/*
 * What the collectives API refuses and what it tells: bad team parameters
 * and collective arguments fail with the documented status and a log line
 * naming the bad value; a running collective cannot be posted or freed, a
 * team with collectives cannot be destroyed (AXON_ERR_BUSY); axon_coll_query
 * agrees with which operations apply to which types (axon_dt_size and the
 * reduction kernels are test_coll_dt.cc's).
 */
#include <gtest/gtest.h>

#include <ctype.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <vector>

#include "coll_env.h"
#include "env_guard.h"
#include "log_capture.h"

namespace {

std::string lower(std::string s)
{
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return tolower(c); });
    return s;
}

/* Some captured line contains every one of words (case aside). */
bool logged(const LogCapture &log, std::initializer_list<std::string> words)
{
    for (const std::string &line : log.lines) {
        bool all = true;
        for (const std::string &w : words) {
            all = all && (lower(line).find(lower(w)) != std::string::npos);
        }
        if (all) {
            return true;
        }
    }
    return false;
}

std::string lines_of(const LogCapture &log)
{
    std::string s;
    for (const std::string &line : log.lines) {
        s += "\n    | " + line;
    }
    return s.empty() ? " (nothing logged)" : s;
}

class CollArgs : public CollTeamTest {
protected:
    Watchdog dog_{120};

    void SetUp() override { MakeTeam(AXON_FEATURE_COLL); }

    axon_coll_args_t Allreduce(const void *src, void *dst, size_t count)
    {
        axon_coll_args_t a = {};
        a.field_mask = AXON_COLL_ARG_OP;
        a.coll  = AXON_COLL_ALLREDUCE;
        a.src   = src;
        a.dst   = dst;
        a.count = count;
        a.dt    = AXON_DT_INT32;
        a.op    = AXON_OP_SUM;
        return a;
    }

    /* Init on member 0 must fail with want and log a line with every word. */
    void ExpectRefused(const axon_coll_args_t &a, axon_status_t want,
                       std::initializer_list<std::string> words, const char *what)
    {
        LogCapture  log;
        axon_coll_h coll = reinterpret_cast<axon_coll_h>(0x1);
        axon_status_t st = axon_coll_init(g_.teams[0], &a, &coll);
        EXPECT_EQ(want, st) << what << ": " << axon_status_string(st);
        if (st == AXON_OK) {
            EXPECT_EQ(AXON_OK, axon_coll_free(coll));
        }
        EXPECT_TRUE(logged(log, words)) << what << ": no log line naming the bad value;"
                                        << lines_of(log);
    }
};

TEST_P(CollArgs, TeamCreateRefusesBadParams)
{
    std::vector<axon_ep_h> eps = m_.eps[0];
    struct Case {
        const char              *what;
        uint64_t                 mask;
        const axon_ep_h         *eps;
        uint32_t                 size, rank;
        std::vector<std::string> words;
    } cases[] = {
        {"size 0", AXON_TEAM_PARAM_EPS | AXON_TEAM_PARAM_RANK, eps.data(), 0, 0, {"size", "0"}},
        {"rank 77 >= size", AXON_TEAM_PARAM_EPS | AXON_TEAM_PARAM_RANK, eps.data(), n_, 77,
         {"rank", "77"}},
        {"rank == size", AXON_TEAM_PARAM_EPS | AXON_TEAM_PARAM_RANK, eps.data(), n_, n_,
         {"rank", std::to_string(n_)}},
        {"NULL eps", AXON_TEAM_PARAM_EPS | AXON_TEAM_PARAM_RANK, nullptr, n_, 0, {"eps"}},
        {"no EPS in field_mask", AXON_TEAM_PARAM_RANK, eps.data(), n_, 0, {"eps"}},
        {"no RANK in field_mask", AXON_TEAM_PARAM_EPS, eps.data(), n_, 0, {"rank"}},
    };
    for (const Case &c : cases) {
        if ((c.eps == nullptr) && (n_ == 1)) {
            continue;  /* a team of one reads no endpoint: eps[rank] is ignored */
        }
        LogCapture         log;
        axon_team_params_t p = {};
        p.field_mask = c.mask;
        p.eps        = c.eps;
        p.size       = c.size;
        p.rank       = c.rank;
        axon_team_h   team = nullptr;
        axon_status_t st   = axon_team_create_nb(m_.worker(0), &p, &team);
        EXPECT_EQ(AXON_ERR_INVALID_PARAM, st) << c.what << ": " << axon_status_string(st);
        if (st == AXON_OK) {
            axon_team_destroy(team);
        }
        bool found = false;
        for (const std::string &line : log.lines) {
            bool all = true;
            for (const std::string &w : c.words) {
                all = all && (lower(line).find(w) != std::string::npos);
            }
            found = found || all;
        }
        EXPECT_TRUE(found) << c.what << ": no log line naming the bad value;" << lines_of(log);
    }
    LogCapture log;
    axon_team_h team = nullptr;
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_team_create_nb(m_.worker(0), nullptr, &team));
    EXPECT_FALSE(log.lines.empty()) << "NULL params: nothing logged";
}

TEST_P(CollArgs, InitRefusesBadArgs)
{
    int32_t buf[16 * 8] = {0}, out[16 * 8];
    uint32_t bad_root = n_ + 40;

    ExpectRefused(Allreduce(nullptr, out, 4), AXON_ERR_INVALID_PARAM, {"src"}, "NULL src");
    ExpectRefused(Allreduce(buf, nullptr, 4), AXON_ERR_INVALID_PARAM, {"dst"}, "NULL dst");
    axon_coll_args_t a = Allreduce(buf, out, 4);
    a.coll = (axon_coll_type_t)99;
    ExpectRefused(a, AXON_ERR_INVALID_PARAM, {"99"}, "unknown collective");
    a = Allreduce(buf, out, 4);
    a.dt = (axon_dt_t)98;
    ExpectRefused(a, AXON_ERR_INVALID_PARAM, {"98"}, "unknown data type");
    a = Allreduce(buf, out, 4);
    a.op = (axon_op_t)97;
    ExpectRefused(a, AXON_ERR_INVALID_PARAM, {"97"}, "unknown operation");

    /* Operations that do not apply to the type: what axon_coll_query refuses. */
    a = Allreduce(buf, out, 4);
    a.dt = AXON_DT_FLOAT;
    a.op = AXON_OP_BAND;
    ExpectRefused(a, AXON_ERR_UNSUPPORTED, {"band"}, "BAND on float");
    a.dt = AXON_DT_DOUBLE;
    a.op = AXON_OP_LOR;
    ExpectRefused(a, AXON_ERR_UNSUPPORTED, {"lor"}, "LOR on double");
    a.dt = AXON_DT_INT32;
    a.op = AXON_OP_MINLOC;
    ExpectRefused(a, AXON_ERR_UNSUPPORTED, {"minloc"}, "MINLOC on int32");
    a.dt = AXON_DT_DOUBLE_INT32;
    a.op = AXON_OP_SUM;
    a.count = 2;
    ExpectRefused(a, AXON_ERR_UNSUPPORTED, {"sum"}, "SUM on a (value, index) pair");

    /* Roots out of the team. */
    for (axon_coll_type_t coll : {AXON_COLL_BCAST, AXON_COLL_REDUCE, AXON_COLL_GATHER,
                                  AXON_COLL_SCATTER}) {
        a = Allreduce(buf, out, 4);
        a.coll       = coll;
        a.field_mask = AXON_COLL_ARG_OP | AXON_COLL_ARG_ROOT;
        a.root       = bad_root;
        ExpectRefused(a, AXON_ERR_INVALID_PARAM, {"root", std::to_string(bad_root)},
                      "root >= size");
        a.root = n_;
        ExpectRefused(a, AXON_ERR_INVALID_PARAM, {"root", std::to_string(n_)}, "root == size");
    }

    /* v-collectives without their arrays. */
    a = Allreduce(buf, out, 4);
    a.coll = AXON_COLL_ALLGATHERV;
    ExpectRefused(a, AXON_ERR_INVALID_PARAM, {"count"}, "allgatherv without counts");
    a.field_mask |= AXON_COLL_ARG_COUNTS;
    ExpectRefused(a, AXON_ERR_INVALID_PARAM, {"count"}, "allgatherv with NULL dst_counts");
    a.coll = AXON_COLL_ALLTOALLV;
    ExpectRefused(a, AXON_ERR_INVALID_PARAM, {"count"}, "alltoallv with NULL arrays");

    /* NULL where a handle goes. */
    LogCapture  log;
    axon_coll_h coll = nullptr;
    a = Allreduce(buf, out, 4);
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_coll_init(nullptr, &a, &coll));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_coll_init(g_.teams[0], nullptr, &coll));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_coll_init(g_.teams[0], &a, nullptr));
    EXPECT_GE(log.lines.size(), 3u) << lines_of(log);

    /* Count 0 needs no buffers. */
    a = Allreduce(nullptr, nullptr, 0);
    ASSERT_EQ(AXON_OK, axon_coll_init(g_.teams[0], &a, &coll)) << "count 0 with NULL buffers";
    EXPECT_EQ(AXON_OK, axon_coll_free(coll));
}

/*
 * A collective still running (one member has not posted yet) cannot be
 * posted again or freed, nor its team destroyed; a completed one not yet
 * freed still keeps its team.
 */
TEST_P(CollArgs, RunningCollectiveIsBusy)
{
    if (n_ < 2) {
        GTEST_SKIP() << "a team of one completes at once";
    }
    std::vector<int32_t>     in(n_ * 4, 1), out(n_ * 4);
    std::vector<axon_coll_h> colls(n_, nullptr);
    for (uint32_t m = 0; m < n_; ++m) {
        axon_coll_args_t a = Allreduce(&in[m * 4], &out[m * 4], 4);
        ASSERT_EQ(AXON_OK, axon_coll_init(g_.teams[m], &a, &colls[m]));
        g_.colls.push_back(colls[m]);
    }
    axon_status_t s = axon_coll_post(colls[0]);
    ASSERT_TRUE((s == AXON_OK) || (s == AXON_INPROGRESS)) << axon_status_string(s);
    m_.progress_for(0.01);
    ASSERT_EQ(AXON_INPROGRESS, axon_coll_test(colls[0]));
    {
        LogCapture log;
        EXPECT_EQ(AXON_ERR_BUSY, axon_coll_post(colls[0])) << "posting a running collective";
        EXPECT_EQ(AXON_ERR_BUSY, axon_coll_free(colls[0])) << "freeing a running collective";
        EXPECT_EQ(AXON_ERR_BUSY, axon_team_destroy(g_.teams[0]))
            << "destroying a team with a running collective";
        EXPECT_EQ(AXON_ERR_BUSY, axon_team_destroy(g_.teams[1]))
            << "destroying a team with a collective not freed";
    }
    std::vector<axon_status_t> st(n_, AXON_INPROGRESS);
    for (uint32_t m = 1; m < n_; ++m) {
        s = axon_coll_post(colls[m]);
        ASSERT_TRUE((s == AXON_OK) || (s == AXON_INPROGRESS)) << axon_status_string(s);
    }
    ASSERT_TRUE(m_.wait_colls(colls, &st));
    for (uint32_t m = 0; m < n_; ++m) {
        EXPECT_EQ(AXON_OK, st[m]) << "member " << m;
        EXPECT_EQ((int32_t)n_, out[m * 4]) << "the refused calls changed the result";
    }
    LogCapture log;
    EXPECT_EQ(AXON_ERR_BUSY, axon_team_destroy(g_.teams[0]))
        << "destroying a team with a completed collective not freed";
}

/* Teams of one complete everything at once, and wait returns at once too. */
TEST_P(CollArgs, WaitReturnsTheStatus)
{
    std::vector<int32_t>     in(n_ * 4, 2), out(n_ * 4);
    std::vector<axon_coll_h> colls(n_, nullptr);
    for (uint32_t m = 0; m < n_; ++m) {
        axon_coll_args_t a = Allreduce(&in[m * 4], &out[m * 4], 4);
        ASSERT_EQ(AXON_OK, axon_coll_init(g_.teams[m], &a, &colls[m]));
        g_.colls.push_back(colls[m]);
    }
    std::vector<axon_status_t> st;
    ASSERT_TRUE(m_.post_and_wait(colls, &st));
    for (uint32_t m = 0; m < n_; ++m) {
        /* Completed: wait needs no progress of the others. */
        EXPECT_EQ(AXON_OK, axon_coll_wait(colls[m]));
        EXPECT_EQ(AXON_OK, axon_coll_test(colls[m]));
        EXPECT_EQ(2 * (int32_t)n_, out[m * 4]);
    }
    if (n_ == 1) {
        axon_status_t s = axon_coll_post(colls[0]);
        EXPECT_TRUE((s == AXON_OK) || (s == AXON_INPROGRESS)) << axon_status_string(s);
        EXPECT_EQ(AXON_OK, axon_coll_wait(colls[0])) << "a team of one waits for nobody";
    }
}

/* Whatever applies is supported (with an algorithm's name), the rest is not. */
TEST_P(CollArgs, QueryAgreesWithTheTypesAndOperations)
{
    for (int coll = 0; coll < AXON_COLL_LAST; ++coll) {
        for (const DtInfo &d : kDts) {
            for (int op = 0; op < AXON_OP_LAST; ++op) {
                for (size_t size : {(size_t)0, (size_t)8, (size_t)1 << 20}) {
                    bool reduction = is_reduction((axon_coll_type_t)coll);
                    if (!reduction && (op > 0)) {
                        continue;  /* op is ignored */
                    }
                    axon_coll_attr_t attr;
                    memset(&attr, 0, sizeof(attr));
                    LogCapture    log;
                    axon_status_t st = axon_coll_query(g_.teams[0], (axon_coll_type_t)coll,
                                                       d.dt, (axon_op_t)op, size, &attr);
                    std::string what = "coll " + std::to_string(coll) + " " +
                                       combo_name(d.dt, (axon_op_t)op) + " size " +
                                       std::to_string(size);
                    if (!reduction || op_applies((axon_op_t)op, d.dt)) {
                        EXPECT_EQ(AXON_OK, st) << what;
                        EXPECT_NE('\0', attr.algorithm[0]) << what << ": no algorithm named";
                        EXPECT_NE(nullptr, memchr(attr.algorithm, '\0', sizeof(attr.algorithm)))
                            << what << ": algorithm name not terminated";
                        EXPECT_EQ(AXON_OK, axon_coll_query(g_.teams[0], (axon_coll_type_t)coll,
                                                           d.dt, (axon_op_t)op, size, nullptr))
                            << what << ", attr NULL";
                    } else {
                        EXPECT_EQ(AXON_ERR_UNSUPPORTED, st) << what;
                    }
                }
            }
        }
    }
    /* A non-reduction ignores op, even one that applies to nothing. */
    EXPECT_EQ(AXON_OK, axon_coll_query(g_.teams[0], AXON_COLL_BCAST, AXON_DT_FLOAT, AXON_OP_BAND,
                                       64, nullptr));
    LogCapture log;
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_coll_query(g_.teams[0], AXON_COLL_LAST, AXON_DT_INT8,
                                                      AXON_OP_SUM, 8, nullptr));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_coll_query(g_.teams[0], AXON_COLL_ALLREDUCE,
                                                      AXON_DT_LAST, AXON_OP_SUM, 8, nullptr));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_coll_query(g_.teams[0], AXON_COLL_ALLREDUCE,
                                                      AXON_DT_INT8, AXON_OP_LAST, 8, nullptr));
}

/* AXON_FEATURE_COLL alone (and with the others) makes a context. */
/*
 * The default algorithms change with the size (allreduce: recursive doubling,
 * then the ring from 64 KiB), and AXON_COLL_<NAME>_ALGO forces one whatever
 * the size; a forced ring still reduces right when the vector is shorter
 * than the team (empty blocks).
 */
TEST_P(CollArgs, AlgorithmVariablesChooseTheAlgorithm)
{
    axon_coll_attr_t attr;
    ASSERT_EQ(AXON_OK, axon_coll_query(g_.teams[0], AXON_COLL_ALLREDUCE, AXON_DT_INT64,
                                       AXON_OP_SUM, 8, &attr));
    EXPECT_STREQ("recursive_doubling", attr.algorithm);
    if (n_ > 1) {
        ASSERT_EQ(AXON_OK, axon_coll_query(g_.teams[0], AXON_COLL_ALLREDUCE, AXON_DT_INT64,
                                           AXON_OP_SUM, 1 << 20, &attr));
        EXPECT_STREQ("ring", attr.algorithm);
    }

    EnvGuard  env("AXON_COLL_ALLREDUCE_ALGO", "ring");
    Members   m2;
    CollGuard g2;
    m2.create(GetParam(), AXON_FEATURE_COLL);
    ASSERT_FALSE(HasFatalFailure());
    m2.create_team(&g2.teams);
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_EQ(AXON_OK, axon_coll_query(g2.teams[0], AXON_COLL_ALLREDUCE, AXON_DT_INT64,
                                       AXON_OP_SUM, 8, &attr));
    EXPECT_STREQ("ring", attr.algorithm);

    std::vector<int32_t>       in(n_), out(n_, -1);
    std::vector<axon_coll_h>   colls(n_, nullptr);
    std::vector<axon_status_t> st;
    for (uint32_t m = 0; m < n_; ++m) {
        in[m] = (int32_t)(m + 1);
        axon_coll_args_t a = Allreduce(&in[m], &out[m], 1);
        ASSERT_EQ(AXON_OK, axon_coll_init(g2.teams[m], &a, &colls[m]));
        g2.colls.push_back(colls[m]);
    }
    ASSERT_TRUE(m2.post_and_wait(colls, &st));
    for (uint32_t m = 0; m < n_; ++m) {
        EXPECT_EQ(AXON_OK, st[m]);
        EXPECT_EQ((int32_t)(n_ * (n_ + 1) / 2), out[m]) << "member " << m;
    }
    g2.release();
    m2.check_clean();
}

/*
 * Members that disagree on the count: no member hangs; the members that
 * receive a message of another size than they expect end with
 * AXON_ERR_MSG_TRUNCATED and a line asking about the counts (member 1,
 * which disagrees with everyone and receives from the root, always does),
 * and every member's next collective with matching counts works.
 */
TEST_P(CollArgs, MismatchedCountsFailWithoutHanging)
{
    if (n_ < 2) {
        GTEST_SKIP() << "a team of one has nobody to disagree with";
    }
    for (axon_coll_type_t type : {AXON_COLL_ALLREDUCE, AXON_COLL_BCAST, AXON_COLL_ALLGATHER}) {
        std::vector<std::vector<int32_t>> in(n_, std::vector<int32_t>(8 * n_, 1));
        std::vector<std::vector<int32_t>> out(n_, std::vector<int32_t>(8 * n_, 0));
        std::vector<axon_coll_h>          colls(n_, nullptr);
        std::vector<axon_status_t>        st;
        for (uint32_t m = 0; m < n_; ++m) {
            axon_coll_args_t a = Allreduce(in[m].data(), out[m].data(), (m == 1) ? 4 : 5);
            a.coll = type;
            ASSERT_EQ(AXON_OK, axon_coll_init(g_.teams[m], &a, &colls[m]));
            g_.colls.push_back(colls[m]);
        }
        LogCapture log;
        ASSERT_TRUE(m_.post_and_wait(colls, &st)) << "collective " << type << " hung";
        EXPECT_EQ(AXON_ERR_MSG_TRUNCATED, st[1]) << "collective " << type << ": "
                                                  << axon_status_string(st[1]);
        EXPECT_TRUE(log.any_contains("same counts")) << "collective " << type << lines_of(log);
        for (uint32_t m = 0; m < n_; ++m) {
            EXPECT_TRUE((st[m] == AXON_OK) || (st[m] == AXON_ERR_MSG_TRUNCATED))
                << "collective " << type << ", member " << m << ": "
                << axon_status_string(st[m]);
        }
    }
    /* The team still works for members that agree. */
    std::vector<int32_t>       in(n_, 2), out(n_, 0);
    std::vector<axon_coll_h>   colls(n_, nullptr);
    std::vector<axon_status_t> st;
    for (uint32_t m = 0; m < n_; ++m) {
        axon_coll_args_t a = Allreduce(&in[m], &out[m], 1);
        ASSERT_EQ(AXON_OK, axon_coll_init(g_.teams[m], &a, &colls[m]));
        g_.colls.push_back(colls[m]);
    }
    ASSERT_TRUE(m_.post_and_wait(colls, &st));
    for (uint32_t m = 0; m < n_; ++m) {
        EXPECT_EQ(AXON_OK, st[m]);
        EXPECT_EQ(2 * (int32_t)n_, out[m]);
    }
}

TEST(CollFeature, InitAcceptsFeatureColl)
{
    for (uint32_t features : {(uint32_t)AXON_FEATURE_COLL,
                              (uint32_t)(AXON_FEATURE_COLL | AXON_FEATURE_TAG | AXON_FEATURE_RMA)}) {
        axon_test_node_t node;
        ASSERT_EQ(AXON_OK, axon_test_node_create_features(&node, features, "self", nullptr, 0))
            << "features 0x" << std::hex << features;
        axon_test_node_destroy(&node);
    }
}

const CollParam kArgsLanes[] = {
    {"self_n1", "self", 1}, {"shm_n3", "shm", 3}, {"tcp_n2", "tcp", 2},
};

INSTANTIATE_TEST_SUITE_P(Lanes, CollArgs, ::testing::ValuesIn(kArgsLanes), coll_param_name);

}  // namespace
