/*
 * Collective offload (issue 19, components/xchannel): barrier, bcast and
 * allreduce compiled into softib's cross-channel chains over an rc team
 * with AXON_COLL_OFFLOAD=y. What the device computes is named "offload" by
 * axon_coll_query and the rest runs in software; a posted chain runs to its
 * end on the device while the application makes no progress call (and in
 * software it does not); hundreds of chains in flight wait in order for
 * queue room; double sums are the same bits on every member; and a team
 * with a member reached over tcp refuses offload under y but runs in
 * software under auto. The members are N workers of this process
 * (coll_env.h); a member killed mid-chain is CollFault's rc_xc lane.
 */
#include <gtest/gtest.h>

#include <math.h>
#include <string.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "coll_env.h"
#include "log_capture.h"

namespace {

typedef std::vector<uint8_t> Bytes;

const size_t kMaxOffloaded = 1024;  /* allreduce elements: 32 chunks of softib's 32 */
const size_t kMaxOffloadedBcast = kMaxOffloaded * 8;  /* bytes: 32 ring slots of 256 */

/* A copy of p whose AXON_COLL_OFFLOAD is value (the other overrides kept). */
CollParam with_offload(const CollParam &p, const char *value)
{
    CollParam q = p;
    q.config[0] = {"COLL_OFFLOAD", value};
    return q;
}

std::string algorithm_of(axon_team_h team, axon_coll_type_t coll, axon_dt_t dt, axon_op_t op,
                         size_t bytes)
{
    axon_coll_attr_t attr;
    memset(&attr, 0, sizeof(attr));
    axon_status_t st = axon_coll_query(team, coll, dt, op, bytes, &attr);
    return (st == AXON_OK) ? std::string(attr.algorithm) :
                             std::string("(") + axon_status_string(st) + ")";
}

axon_coll_args_t allreduce_args(const void *src, void *dst, size_t count, axon_dt_t dt,
                                axon_op_t op)
{
    axon_coll_args_t a = {};
    a.field_mask = AXON_COLL_ARG_OP;
    a.coll       = AXON_COLL_ALLREDUCE;
    a.src        = src;
    a.dst        = dst;
    a.count      = count;
    a.dt         = dt;
    a.op         = op;
    return a;
}

axon_coll_args_t bcast_args(void *buf, size_t bytes, uint32_t root)
{
    axon_coll_args_t a = {};
    a.field_mask = AXON_COLL_ARG_ROOT;
    a.coll       = AXON_COLL_BCAST;
    a.dst        = buf;
    a.count      = bytes;
    a.dt         = AXON_DT_UINT8;
    a.root       = root;
    return a;
}

axon_coll_args_t barrier_args()
{
    axon_coll_args_t a = {};
    a.coll = AXON_COLL_BARRIER;
    a.dt   = AXON_DT_UINT8;
    return a;
}

/*
 * One allreduce (int64 sum over 100 elements: four chunks), one barrier and
 * one bcast (4 KiB from the last member) on every member of a team, posted
 * back to back with no progress call anywhere; the test thread then sleeps
 * and gives every worker ONE progress call. Offloaded, the device ran the
 * chains meanwhile and that call finds them done.
 */
struct UnattendedRun {
    static const size_t kCount = 100;
    static const size_t kBytes = 4096;
    static const uint64_t kSeed = 1900;

    uint32_t                 n;
    std::vector<Bytes>       in, out, buf;
    std::vector<axon_coll_h> colls;  /* member m's allreduce, barrier, bcast at 3m.. */
    std::vector<axon_status_t> st;

    /* Init and post everything; a gtest failure (fatal) on error. */
    void start(const std::vector<axon_team_h> &teams, CollGuard *guard)
    {
        n = (uint32_t)teams.size();
        in.assign(n, Bytes(kCount * 8));
        out.assign(n, Bytes(kCount * 8, 0xA5));
        buf.assign(n, Bytes(kBytes, 0xA5));
        colls.assign(3 * n, nullptr);
        axon_test_fill(buf[n - 1].data(), kBytes, kSeed);
        for (uint32_t m = 0; m < n; ++m) {
            fill_input(in[m].data(), kCount, AXON_DT_INT64, AXON_OP_SUM, m, kSeed);
            axon_coll_args_t a[3] = {
                allreduce_args(in[m].data(), out[m].data(), kCount, AXON_DT_INT64, AXON_OP_SUM),
                barrier_args(), bcast_args(buf[m].data(), kBytes, n - 1)};
            for (int k = 0; k < 3; ++k) {
                ASSERT_EQ(AXON_OK, axon_coll_init(teams[m], &a[k], &colls[3 * m + k]))
                    << "member " << m << ", collective " << k;
                guard->colls.push_back(colls[3 * m + k]);
            }
        }
        for (uint32_t m = 0; m < n; ++m) {
            for (int k = 0; k < 3; ++k) {
                axon_status_t s = axon_coll_post(colls[3 * m + k]);
                ASSERT_TRUE((s == AXON_OK) || (s == AXON_INPROGRESS))
                    << "member " << m << ", collective " << k << ": " << axon_status_string(s);
            }
        }
    }

    /* Sleep, one progress call per worker, every collective tested once. */
    void one_look(Members &members)
    {
        usleep(300 * 1000);
        for (uint32_t m = 0; m < n; ++m) {
            axon_worker_progress(members.worker(m));
        }
        st.assign(colls.size(), AXON_INPROGRESS);
        for (size_t i = 0; i < colls.size(); ++i) {
            st[i] = axon_coll_test(colls[i]);
        }
    }

    size_t still_running() const
    {
        return (size_t)std::count(st.begin(), st.end(), AXON_INPROGRESS);
    }

    void check_results() const
    {
        Bytes ref = in[0];
        for (uint32_t m = 1; m < n; ++m) {
            reduce_into(ref.data(), in[m].data(), kCount, AXON_DT_INT64, AXON_OP_SUM);
        }
        for (uint32_t m = 0; m < n; ++m) {
            EXPECT_EQ(-1, first_diff(ref.data(), out[m].data(), kCount, AXON_DT_INT64))
                << "allreduce, member " << m;
            EXPECT_EQ(-1, axon_test_check(buf[m].data(), kBytes, kSeed)) << "bcast, member " << m;
        }
    }
};

/* ---------------------------------------------------------------- one offload team */

class CollOffload : public CollTeamTest {
protected:
    Watchdog dog_{600};

    void SetUp() override { MakeTeam(AXON_FEATURE_COLL); }

    axon_team_h team(uint32_t m) const { return g_.teams[m]; }
};

/*
 * What the device computes is "offload" on every member: barrier, bcast of
 * 1 byte to 32 ring slots (larger ones run in software), and allreduce of int64, uint64 and double with every
 * operation of the device that applies, 1 to 1024 elements. Other types,
 * operations, 1025 elements or none, and the other collectives name a
 * software algorithm.
 */
TEST_P(CollOffload, QueryNamesOffloadForWhatTheDeviceComputes)
{
    const axon_op_t dev_ops[] = {AXON_OP_SUM, AXON_OP_BAND, AXON_OP_BOR,
                                 AXON_OP_BXOR, AXON_OP_MAX, AXON_OP_MIN};
    const size_t counts[] = {1, 2, 31, 32, 33, 64, 100, 1000, kMaxOffloaded};
    for (uint32_t m = 0; m < n_; ++m) {
        std::string who = "member " + std::to_string(m) + ": ";
        EXPECT_EQ("offload", algorithm_of(team(m), AXON_COLL_BARRIER, AXON_DT_UINT8,
                                          AXON_OP_SUM, 0)) << who << "barrier";
        for (size_t bytes : {(size_t)1, (size_t)7, (size_t)256, (size_t)257, (size_t)4096,
                             kMaxOffloadedBcast}) {
            EXPECT_EQ("offload", algorithm_of(team(m), AXON_COLL_BCAST, AXON_DT_UINT8,
                                              AXON_OP_SUM, bytes))
                << who << "bcast of " << bytes << " bytes";
        }
        for (size_t bytes : {kMaxOffloadedBcast + 1, (size_t)1 << 20}) {
            EXPECT_NE("offload", algorithm_of(team(m), AXON_COLL_BCAST, AXON_DT_UINT8,
                                              AXON_OP_SUM, bytes))
                << who << "bcast of " << bytes << " bytes";
        }
        EXPECT_EQ("offload", algorithm_of(team(m), AXON_COLL_BCAST, AXON_DT_DOUBLE, AXON_OP_SUM,
                                          8 * 1000)) << who << "bcast of 1000 doubles";
        EXPECT_NE("offload", algorithm_of(team(m), AXON_COLL_BCAST, AXON_DT_UINT8, AXON_OP_SUM,
                                          0)) << who << "bcast of nothing";
        for (axon_dt_t dt : {AXON_DT_INT64, AXON_DT_UINT64, AXON_DT_DOUBLE}) {
            for (axon_op_t op : dev_ops) {
                if (!op_applies(op, dt)) {
                    continue;
                }
                for (size_t count : counts) {
                    EXPECT_EQ("offload", algorithm_of(team(m), AXON_COLL_ALLREDUCE, dt, op,
                                                      count * 8))
                        << who << "allreduce " << combo_name(dt, op) << " of " << count;
                }
                for (size_t count : {(size_t)0, kMaxOffloaded + 1, (size_t)4096}) {
                    std::string algo = algorithm_of(team(m), AXON_COLL_ALLREDUCE, dt, op,
                                                    count * 8);
                    EXPECT_NE("offload", algo)
                        << who << "allreduce " << combo_name(dt, op) << " of " << count;
                    EXPECT_NE('(', algo[0])
                        << who << "allreduce " << combo_name(dt, op) << " of " << count;
                }
            }
            for (axon_op_t op : {AXON_OP_PROD, AXON_OP_LAND, AXON_OP_LOR}) {
                if (!op_applies(op, dt)) {
                    continue;
                }
                std::string algo = algorithm_of(team(m), AXON_COLL_ALLREDUCE, dt, op, 8 * 10);
                EXPECT_NE("offload", algo) << who << "allreduce " << combo_name(dt, op);
                EXPECT_NE('(', algo[0]) << who << "allreduce " << combo_name(dt, op);
            }
        }
        for (axon_dt_t dt : {AXON_DT_INT32, AXON_DT_UINT32, AXON_DT_FLOAT, AXON_DT_INT8}) {
            std::string algo = algorithm_of(team(m), AXON_COLL_ALLREDUCE, dt, AXON_OP_SUM,
                                            dt_info(dt).size * 10);
            EXPECT_NE("offload", algo) << who << "allreduce " << combo_name(dt, AXON_OP_SUM);
            EXPECT_NE('(', algo[0]) << who << "allreduce " << combo_name(dt, AXON_OP_SUM);
        }
        for (axon_coll_type_t coll : {AXON_COLL_REDUCE, AXON_COLL_ALLGATHER, AXON_COLL_ALLTOALL}) {
            EXPECT_NE("offload", algorithm_of(team(m), coll, AXON_DT_INT64, AXON_OP_SUM, 64))
                << who << "collective " << (int)coll;
        }
    }
}

/* What the query named runs: the device's allreduces and the software ones, side by side. */
TEST_P(CollOffload, OffloadedAndSoftwareAllreducesAgree)
{
    struct Case {
        axon_dt_t dt;
        axon_op_t op;
        size_t    count;
    };
    const Case cases[] = {
        {AXON_DT_INT64, AXON_OP_BXOR, 1},   {AXON_DT_UINT64, AXON_OP_BAND, 33},
        {AXON_DT_UINT64, AXON_OP_BOR, 64},  {AXON_DT_INT64, AXON_OP_MIN, 500},
        {AXON_DT_DOUBLE, AXON_OP_MAX, kMaxOffloaded},
        {AXON_DT_INT64, AXON_OP_SUM, kMaxOffloaded + 1},  /* software from here */
        {AXON_DT_INT64, AXON_OP_PROD, 40},  {AXON_DT_INT32, AXON_OP_SUM, 40},
        {AXON_DT_UINT64, AXON_OP_LAND, 40},
    };
    for (const Case &c : cases) {
        std::string what = "allreduce " + combo_name(c.dt, c.op) + " of " +
                           std::to_string(c.count);
        size_t             bytes = c.count * dt_info(c.dt).size;
        std::vector<Bytes> in(n_, Bytes(bytes)), out(n_, Bytes(bytes, 0xA5));
        std::vector<axon_coll_h> colls(n_, nullptr);
        for (uint32_t m = 0; m < n_; ++m) {
            fill_input(in[m].data(), c.count, c.dt, c.op, m, 2000 + c.count);
            axon_coll_args_t a = allreduce_args(in[m].data(), out[m].data(), c.count, c.dt,
                                                c.op);
            ASSERT_EQ(AXON_OK, axon_coll_init(team(m), &a, &colls[m])) << what;
            g_.colls.push_back(colls[m]);
        }
        std::vector<axon_status_t> st;
        ASSERT_TRUE(m_.post_and_wait(colls, &st)) << what;
        Bytes ref = in[0];
        for (uint32_t m = 1; m < n_; ++m) {
            reduce_into(ref.data(), in[m].data(), c.count, c.dt, c.op);
        }
        for (uint32_t m = 0; m < n_; ++m) {
            EXPECT_EQ(AXON_OK, st[m]) << what << ", member " << m;
            EXPECT_EQ(-1, first_diff(ref.data(), out[m].data(), c.count, c.dt))
                << what << ", member " << m;
        }
    }
}

/*
 * Bcasts travel in ring slots, a chunk each: sizes around a slot and the
 * largest offloaded one, from a different root each, each initialized once
 * and posted 40 times with new data from the root, every member's copy
 * checked after every post (slots are posted again as chains complete, so a
 * slot reused too early would show up as another post's bytes).
 */
TEST_P(CollOffload, PersistentBcastsInRingSlotsKeepEveryPostsData)
{
    const size_t sizes[] = {1, 255, 256, 257, 1000, kMaxOffloadedBcast - 1, kMaxOffloadedBcast};
    uint32_t root = 0;
    for (size_t bytes : sizes) {
        std::string what = "bcast of " + std::to_string(bytes) + " bytes from member " +
                           std::to_string(root);
        std::vector<Bytes> buf(n_, Bytes(bytes));
        std::vector<axon_coll_h> colls(n_, nullptr);
        for (uint32_t m = 0; m < n_; ++m) {
            axon_coll_args_t a = bcast_args(buf[m].data(), bytes, root);
            ASSERT_EQ(AXON_OK, axon_coll_init(team(m), &a, &colls[m])) << what;
            g_.colls.push_back(colls[m]);
            ASSERT_EQ("offload", algorithm_of(team(m), AXON_COLL_BCAST, AXON_DT_UINT8,
                                              AXON_OP_SUM, bytes)) << what;
        }
        for (uint64_t post = 0; post < 40; ++post) {
            uint64_t seed = 5000 + bytes * 100 + post;
            for (uint32_t m = 0; m < n_; ++m) {
                if (m == root) {
                    axon_test_fill(buf[m].data(), bytes, seed);
                } else {
                    memset(buf[m].data(), 0xA5, bytes);
                }
            }
            std::vector<axon_status_t> st;
            ASSERT_TRUE(m_.post_and_wait(colls, &st)) << what << ", post " << post;
            for (uint32_t m = 0; m < n_; ++m) {
                ASSERT_EQ(AXON_OK, st[m]) << what << ", post " << post << ", member " << m;
                ASSERT_EQ(-1, axon_test_check(buf[m].data(), bytes, seed))
                    << what << ", post " << post << ", member " << m;
            }
        }
        root = (root + 1) % n_;
    }
}

/*
 * The chains run without the application: posted on every member, then no
 * progress call for 300 ms, then one per worker finds every collective done
 * with the right result.
 */
TEST_P(CollOffload, ChainsRunWithoutTheApplication)
{
    UnattendedRun run;
    run.start(g_.teams, &g_);
    ASSERT_FALSE(HasFatalFailure());
    run.one_look(m_);
    for (size_t i = 0; i < run.colls.size(); ++i) {
        EXPECT_EQ(AXON_OK, run.st[i]) << "member " << i / 3 << ", collective " << i % 3 << ": "
                                      << axon_status_string(run.st[i]);
    }
    if (run.still_running() > 0) {
        std::vector<axon_status_t> st = run.st;
        ASSERT_TRUE(m_.wait_colls(run.colls, &st));  /* released cleanly all the same */
    }
    run.check_results();
}

/*
 * The sibling of the test above with AXON_COLL_OFFLOAD=n: the same sequence
 * in software is still running after the sleep and one progress call each
 * (its messages wait for the members' progress), and finishes with more.
 * A team of two may finish in one call each (a single exchange), so the
 * check needs three members or more.
 */
TEST_P(CollOffload, InSoftwareTheSameSequenceWaitsForTheApplication)
{
    CollParam p = with_offload(GetParam(), "n");
    Members   sw;
    CollGuard guard;
    sw.create(p, AXON_FEATURE_COLL);
    ASSERT_FALSE(HasFatalFailure());
    sw.create_team(&guard.teams);
    ASSERT_FALSE(HasFatalFailure());
    EXPECT_NE("offload", algorithm_of(guard.teams[0], AXON_COLL_BARRIER, AXON_DT_UINT8,
                                      AXON_OP_SUM, 0));
    UnattendedRun run;
    run.start(guard.teams, &guard);
    ASSERT_FALSE(HasFatalFailure());
    run.one_look(sw);
    if (n_ >= 3) {
        EXPECT_LT(0u, run.still_running())
            << "every collective finished in software with one progress call per member";
    }
    std::vector<axon_status_t> st = run.st;
    ASSERT_TRUE(sw.wait_colls(run.colls, &st));
    for (size_t i = 0; i < st.size(); ++i) {
        EXPECT_EQ(AXON_OK, st[i]) << "member " << i / 3 << ", collective " << i % 3;
    }
    run.check_results();
    guard.release();
    sw.check_clean();
}

/*
 * Many chains in flight: 201 collectives per member (barrier, bcast of 1 KiB
 * from a rotating root, allreduce of 1024 doubles = 32 chunks) posted back
 * to back on distinct handles, far more than the queues hold, so most wait
 * in order for room; then all are waited for, every result checked, and
 * every handle posted once more.
 */
TEST_P(CollOffload, HundredsOfChainsInFlightWaitInOrder)
{
    const size_t   kColls = 201, kBcastBytes = 1024, kCount = kMaxOffloaded;
    std::vector<std::vector<Bytes>> in(kColls), out(kColls);
    std::vector<axon_coll_h>        colls(kColls * n_, nullptr);
    for (size_t k = 0; k < kColls; ++k) {
        in[k].assign(n_, Bytes());
        out[k].assign(n_, Bytes());
        for (uint32_t m = 0; m < n_; ++m) {
            axon_coll_args_t a;
            switch (k % 3) {
            case 0:
                a = barrier_args();
                break;
            case 1:
                out[k][m].assign(kBcastBytes, 0xA5);
                a = bcast_args(out[k][m].data(), kBcastBytes, (uint32_t)(k % n_));
                break;
            default:
                in[k][m].assign(kCount * 8, 0);
                out[k][m].assign(kCount * 8, 0xA5);
                a = allreduce_args(in[k][m].data(), out[k][m].data(), kCount, AXON_DT_DOUBLE,
                                   AXON_OP_SUM);
                break;
            }
            ASSERT_EQ(AXON_OK, axon_coll_init(team(m), &a, &colls[k * n_ + m]))
                << "collective " << k << ", member " << m;
            g_.colls.push_back(colls[k * n_ + m]);
        }
    }
    for (int pass = 0; pass < 2; ++pass) {
        uint64_t seed = 3000 + pass * kColls;
        for (size_t k = 0; k < kColls; ++k) {
            if (k % 3 == 1) {
                axon_test_fill(out[k][k % n_].data(), kBcastBytes, seed + k);
            } else if (k % 3 == 2) {
                for (uint32_t m = 0; m < n_; ++m) {
                    fill_input(in[k][m].data(), kCount, AXON_DT_DOUBLE, AXON_OP_SUM, m,
                               seed + k);
                }
            }
        }
        /* member by member: member 0's chains all wait for the others' first */
        std::vector<axon_status_t> st(colls.size(), AXON_INPROGRESS);
        for (uint32_t m = 0; m < n_; ++m) {
            for (size_t k = 0; k < kColls; ++k) {
                axon_status_t s = axon_coll_post(colls[k * n_ + m]);
                ASSERT_TRUE((s == AXON_OK) || (s == AXON_INPROGRESS))
                    << "pass " << pass << ", collective " << k << ", member " << m << ": "
                    << axon_status_string(s);
            }
        }
        ASSERT_TRUE(m_.wait_colls(colls, &st, 120.0)) << "pass " << pass;
        for (size_t k = 0; k < kColls; ++k) {
            std::string what = "pass " + std::to_string(pass) + ", collective " +
                               std::to_string(k);
            Bytes ref;
            if (k % 3 == 2) {
                ref = in[k][0];
                for (uint32_t m = 1; m < n_; ++m) {
                    reduce_into(ref.data(), in[k][m].data(), kCount, AXON_DT_DOUBLE,
                                AXON_OP_SUM);
                }
            }
            for (uint32_t m = 0; m < n_; ++m) {
                ASSERT_EQ(AXON_OK, st[k * n_ + m]) << what << ", member " << m;
                if (k % 3 == 1) {
                    ASSERT_EQ(-1, axon_test_check(out[k][m].data(), kBcastBytes, seed + k))
                        << what << " (bcast), member " << m;
                } else if (k % 3 == 2) {
                    ASSERT_EQ(-1, first_diff(ref.data(), out[k][m].data(), kCount,
                                             AXON_DT_DOUBLE))
                        << what << " (allreduce), member " << m;
                }
            }
        }
        for (size_t k = 0; k < kColls; ++k) {
            for (uint32_t m = 0; (k % 3 != 0) && (m < n_); ++m) {
                std::fill(out[k][m].begin(), out[k][m].end(), 0xA5);
            }
        }
    }
}

/*
 * Two offloaded teams on the same workers (the second made from the same
 * endpoints): each has its own queues, so members may post the teams'
 * chains in different orders (each team's own order the same everywhere):
 * member m posts team A's allreduce and team B's bcast and barrier rotated
 * by m, three rounds, every result checked.
 */
TEST_P(CollOffload, TwoTeamsChainsInDifferentOrders)
{
    const size_t             kCount = 300, kBytes = 10000;
    std::vector<axon_team_h> second;
    m_.create_team(&second);
    ASSERT_FALSE(HasFatalFailure());
    g_.teams.insert(g_.teams.end(), second.begin(), second.end());
    ASSERT_EQ("offload", algorithm_of(second[0], AXON_COLL_BARRIER, AXON_DT_UINT8, AXON_OP_SUM,
                                      0));
    std::vector<std::vector<uint64_t>> in(n_, std::vector<uint64_t>(kCount));
    std::vector<std::vector<uint64_t>> out(n_, std::vector<uint64_t>(kCount));
    std::vector<Bytes>                 buf(n_, Bytes(kBytes));
    std::vector<axon_coll_h>           colls(3 * n_, nullptr);
    for (uint32_t m = 0; m < n_; ++m) {
        axon_coll_args_t a[3] = {
            allreduce_args(in[m].data(), out[m].data(), kCount, AXON_DT_UINT64, AXON_OP_BXOR),
            bcast_args(buf[m].data(), kBytes, n_ / 2), barrier_args()};
        for (int k = 0; k < 3; ++k) {
            axon_team_h t = (k == 0) ? team(m) : second[m];
            ASSERT_EQ(AXON_OK, axon_coll_init(t, &a[k], &colls[3 * m + k]));
            g_.colls.push_back(colls[3 * m + k]);
        }
    }
    for (int round = 0; round < 3; ++round) {
        uint64_t seed = 4000 + round;
        std::vector<uint64_t> ref(kCount, 0);
        for (uint32_t m = 0; m < n_; ++m) {
            fill_input(in[m].data(), kCount, AXON_DT_UINT64, AXON_OP_BXOR, m, seed);
            reduce_into(ref.data(), in[m].data(), kCount, AXON_DT_UINT64, AXON_OP_BXOR);
            std::fill(out[m].begin(), out[m].end(), 0);
            std::fill(buf[m].begin(), buf[m].end(), 0xA5);
        }
        axon_test_fill(buf[n_ / 2].data(), kBytes, seed);
        for (uint32_t m = 0; m < n_; ++m) {
            /* team B's two keep their order; team A's one goes before, between or after */
            int order[3][3] = {{0, 1, 2}, {1, 0, 2}, {1, 2, 0}};
            for (int k : order[(m + round) % 3]) {
                axon_status_t s = axon_coll_post(colls[3 * m + k]);
                ASSERT_TRUE((s == AXON_OK) || (s == AXON_INPROGRESS))
                    << "round " << round << ", member " << m << ": " << axon_status_string(s);
            }
        }
        std::vector<axon_status_t> st;
        ASSERT_TRUE(m_.wait_colls(colls, &st)) << "round " << round;
        for (uint32_t m = 0; m < n_; ++m) {
            for (int k = 0; k < 3; ++k) {
                EXPECT_EQ(AXON_OK, st[3 * m + k]) << "round " << round << ", member " << m;
            }
            EXPECT_TRUE(out[m] == ref) << "round " << round << ": allreduce, member " << m;
            EXPECT_EQ(-1, axon_test_check(buf[m].data(), kBytes, seed))
                << "round " << round << ": bcast, member " << m;
        }
    }
}

/*
 * Inexact double sums (every chunk count up to 1024 elements): the device's
 * result has the same bits on every member and every post, and is the sum
 * of the inputs up to rounding (the reference adds in rank order, the
 * device in the tree's).
 */
TEST_P(CollOffload, DoubleSumsAreBitIdenticalAcrossMembers)
{
    for (size_t count : {(size_t)1, (size_t)33, (size_t)777, kMaxOffloaded}) {
        ASSERT_EQ("offload", algorithm_of(team(0), AXON_COLL_ALLREDUCE, AXON_DT_DOUBLE,
                                          AXON_OP_SUM, count * 8));
        std::vector<std::vector<double>> in(n_, std::vector<double>(count));
        std::vector<std::vector<double>> out(n_, std::vector<double>(count, -1.0));
        std::vector<axon_coll_h>         colls(n_, nullptr);
        for (uint32_t m = 0; m < n_; ++m) {
            for (size_t i = 0; i < count; ++i) {
                double v = (double)(mix(1905, m, i) >> 11) * 0x1p-53 * 3.3 - 1.1;
                in[m][i] = v * pow(10.0, (double)((m * 7 + i) % 9) - 4.0);  /* mixed scales */
            }
            axon_coll_args_t a = allreduce_args(in[m].data(), out[m].data(), count,
                                                AXON_DT_DOUBLE, AXON_OP_SUM);
            ASSERT_EQ(AXON_OK, axon_coll_init(team(m), &a, &colls[m]));
            g_.colls.push_back(colls[m]);
        }
        std::vector<double> first;
        for (int post = 0; post < 3; ++post) {
            std::string what = std::to_string(count) + " doubles, post " + std::to_string(post);
            std::vector<axon_status_t> st;
            ASSERT_TRUE(m_.post_and_wait(colls, &st)) << what;
            for (uint32_t m = 0; m < n_; ++m) {
                ASSERT_EQ(AXON_OK, st[m]) << what << ", member " << m;
                if (first.empty()) {
                    first = out[m];
                }
                EXPECT_EQ(0, memcmp(first.data(), out[m].data(), count * 8))
                    << what << ": member " << m << " has other bits than member 0";
            }
        }
        for (size_t i = 0; i < count; ++i) {
            double sum = 0.0, mag = 0.0;
            for (uint32_t m = 0; m < n_; ++m) {
                sum += in[m][i];
                mag += fabs(in[m][i]);
            }
            ASSERT_LE(fabs(first[i] - sum), mag * 1e-14)
                << count << " doubles: element " << i << " is " << first[i] << ", not " << sum;
        }
    }
}

/*
 * Offload at 5 members in every pass; sizes 2 to 8 (powers of two or not,
 * so the folded members too) in the plain pass.
 */
const CollParam kOffloadLanes[] = {
    {"rc_xc_n5", "rc", 5, {{"COLL_OFFLOAD", "y"}}},
};

const CollParam kOffloadSizes[] = {
    {"rc_xc_n2", "rc", 2, {{"COLL_OFFLOAD", "y"}}}, {"rc_xc_n3", "rc", 3, {{"COLL_OFFLOAD", "y"}}},
    {"rc_xc_n4", "rc", 4, {{"COLL_OFFLOAD", "y"}}}, {"rc_xc_n6", "rc", 6, {{"COLL_OFFLOAD", "y"}}},
    {"rc_xc_n7", "rc", 7, {{"COLL_OFFLOAD", "y"}}}, {"rc_xc_n8", "rc", 8, {{"COLL_OFFLOAD", "y"}}},
    /* bcast chains down other k-nomial trees than the binomial */
    {"rc_xc_radix3_n7", "rc", 7, {{"COLL_OFFLOAD", "y"}, {"COLL_KNOMIAL_RADIX", "3"}}},
    {"rc_xc_radix4_n8", "rc", 8, {{"COLL_OFFLOAD", "y"}, {"COLL_KNOMIAL_RADIX", "4"}}},
};

INSTANTIATE_TEST_SUITE_P(Lanes, CollOffload, ::testing::ValuesIn(kOffloadLanes),
                         coll_param_name);
INSTANTIATE_TEST_SUITE_P(Variants, CollOffload, ::testing::ValuesIn(kOffloadSizes),
                         coll_param_name);

/* ---------------------------------------------------------------- a member over tcp */

/*
 * Members 0-3 have rc (softib, cross-channel) and tcp, member 4 tcp alone.
 * Selection never prefers softib's emulated rc over tcp (verbs_common.c's
 * estimates), so every pair talks over tcp: the team cannot offload, and
 * member 0 is the first to say so (it reaches member 1 over tcp). Under y
 * the team still joins, but every member's barrier, bcast and allreduce
 * init fails AXON_ERR_UNSUPPORTED with a line that names the member and
 * why; what never offloads (allgather) runs. Under auto the same team runs
 * them in software.
 */
const char *const kRcTcpMembers[] = {"rc,tcp", "rc,tcp", "rc,tcp", "rc,tcp", "tcp"};

class CollOffloadMixed : public CollTeamTest {
protected:
    Watchdog dog_{300};

    void MakeTeam(const char *offload)
    {
        m_.create(with_offload(GetParam(), offload), AXON_FEATURE_COLL, "tcp");
        ASSERT_FALSE(HasFatalFailure());
        m_.create_team(&g_.teams);  /* the join itself succeeds */
        ASSERT_FALSE(HasFatalFailure());
        n_ = GetParam().size;
    }
};

TEST_P(CollOffloadMixed, OffloadYesRefusesATeamWithATcpMember)
{
    LogCapture log;
    MakeTeam("y");
    ASSERT_FALSE(HasFatalFailure());
    uint32_t n = n_;
    int64_t  one = 1, sum = 0;
    uint8_t  buf[64] = {0};
    for (uint32_t m = 0; m < n; ++m) {
        axon_coll_args_t a[3] = {barrier_args(), bcast_args(buf, sizeof(buf), 0),
                                 allreduce_args(&one, &sum, 1, AXON_DT_INT64, AXON_OP_SUM)};
        for (const axon_coll_args_t &args : a) {
            axon_coll_h   c  = nullptr;
            axon_status_t st = axon_coll_init(g_.teams[m], &args, &c);
            EXPECT_EQ(AXON_ERR_UNSUPPORTED, st)
                << "member " << m << ", collective " << (int)args.coll << ": "
                << axon_status_string(st);
            if (st == AXON_OK) {
                g_.colls.push_back(c);
            }
        }
        EXPECT_NE("offload", algorithm_of(g_.teams[m], AXON_COLL_BARRIER, AXON_DT_UINT8,
                                          AXON_OP_SUM, 0));
    }
    EXPECT_TRUE(log.any_contains("AXON_COLL_OFFLOAD=y")) << "no error line about the refusal";
    EXPECT_TRUE(log.any_contains("cannot offload its collectives: member 0 reaches member 1 "
                                 "over a device without cross-channel support"))
        << "no error line naming the member and why";
    /* what the device never runs is software under y too */
    std::vector<std::vector<int64_t>> got(n, std::vector<int64_t>(n, -1));
    std::vector<int64_t>              mine(n);
    std::vector<axon_coll_h>          colls(n, nullptr);
    for (uint32_t m = 0; m < n; ++m) {
        mine[m] = 10 + m;
        axon_coll_args_t a = {};
        a.coll  = AXON_COLL_ALLGATHER;
        a.src   = &mine[m];
        a.dst   = got[m].data();
        a.count = 1;
        a.dt    = AXON_DT_INT64;
        ASSERT_EQ(AXON_OK, axon_coll_init(g_.teams[m], &a, &colls[m])) << "member " << m;
        g_.colls.push_back(colls[m]);
    }
    std::vector<axon_status_t> st;
    ASSERT_TRUE(m_.post_and_wait(colls, &st));
    for (uint32_t m = 0; m < n; ++m) {
        EXPECT_EQ(AXON_OK, st[m]) << "allgather, member " << m;
        EXPECT_TRUE(got[m] == mine) << "allgather, member " << m;
    }
}

TEST_P(CollOffloadMixed, OffloadAutoRunsTheSameTeamInSoftware)
{
    MakeTeam("auto");
    ASSERT_FALSE(HasFatalFailure());
    uint32_t                   n = n_;
    std::vector<int64_t>       one(n, 1), sum(n, 0);
    std::vector<Bytes>         buf(n, Bytes(1000, 0xA5));
    std::vector<axon_coll_h>   colls;
    axon_test_fill(buf[2].data(), 1000, 77);
    for (uint32_t m = 0; m < n; ++m) {
        EXPECT_NE("offload", algorithm_of(g_.teams[m], AXON_COLL_BARRIER, AXON_DT_UINT8,
                                          AXON_OP_SUM, 0)) << "member " << m;
        one[m] = m + 1;
        axon_coll_args_t a[3] = {barrier_args(), bcast_args(buf[m].data(), 1000, 2),
                                 allreduce_args(&one[m], &sum[m], 1, AXON_DT_INT64,
                                                AXON_OP_SUM)};
        for (const axon_coll_args_t &args : a) {
            axon_coll_h c = nullptr;
            ASSERT_EQ(AXON_OK, axon_coll_init(g_.teams[m], &args, &c)) << "member " << m;
            g_.colls.push_back(c);
            colls.push_back(c);
        }
    }
    std::vector<axon_status_t> st;
    ASSERT_TRUE(m_.post_and_wait(colls, &st));
    for (uint32_t m = 0; m < n; ++m) {
        for (int k = 0; k < 3; ++k) {
            EXPECT_EQ(AXON_OK, st[3 * m + k]) << "member " << m << ", collective " << k;
        }
        EXPECT_EQ((int64_t)(n * (n + 1) / 2), sum[m]) << "allreduce, member " << m;
        EXPECT_EQ(-1, axon_test_check(buf[m].data(), 1000, 77)) << "bcast, member " << m;
    }
}

const CollParam kMixedLanes[] = {
    {"rc_tcp_n5", "rc,tcp", 5, {}, kRcTcpMembers},
};

INSTANTIATE_TEST_SUITE_P(Lanes, CollOffloadMixed, ::testing::ValuesIn(kMixedLanes),
                         coll_param_name);

}  // namespace
