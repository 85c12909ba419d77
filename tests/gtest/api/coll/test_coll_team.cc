/*
 * Teams: split by color and key, several teams in flight on the same
 * workers, and collectives next to the application's own tag traffic,
 * which must never see theirs (a team has its own tag space). The members
 * are N workers of this process (coll_env.h), over the same lanes as the
 * collectives' suite.
 */
#include <gtest/gtest.h>

#include <string.h>

#include <algorithm>
#include <string>
#include <vector>

#include "coll_env.h"
#include "log_capture.h"

namespace {

class CollTeam : public CollTeamTest {
protected:
    Watchdog dog_{300};

    /* TAG too: the application's messages share the workers with the collectives. */
    void SetUp() override { MakeTeam(AXON_FEATURE_COLL | AXON_FEATURE_TAG); }

    /* Split every member's team[m]; the new teams (NULL for COLOR_NONE) ready in *out. */
    void Split(std::vector<axon_team_h> team, const std::vector<int> &color,
               const std::vector<int> &key, std::vector<axon_team_h> *out)
    {
        out->assign(team.size(), nullptr);
        for (uint32_t m = 0; m < team.size(); ++m) {
            if (team[m] == nullptr) {
                continue;
            }
            axon_team_h t = reinterpret_cast<axon_team_h>(0x1);
            ASSERT_EQ(AXON_OK, axon_team_split_nb(team[m], color[m], key[m], &t))
                << "member " << m;
            if (color[m] == AXON_TEAM_COLOR_NONE) {
                EXPECT_EQ(nullptr, t) << "member " << m << " passed AXON_TEAM_COLOR_NONE";
            } else {
                EXPECT_NE(nullptr, t) << "member " << m;
            }
            (*out)[m] = (color[m] == AXON_TEAM_COLOR_NONE) ? nullptr : t;
            if ((*out)[m] != nullptr) {
                g_.teams.insert(g_.teams.begin(), t);  /* destroyed before its parent */
            }
        }
        std::vector<axon_status_t> st;
        ASSERT_TRUE(m_.wait_teams(*out, &st)) << "split not done within " << kCollTimeout << " s";
        for (uint32_t m = 0; m < out->size(); ++m) {
            if ((*out)[m] != nullptr) {
                ASSERT_EQ(AXON_OK, st[m]) << "member " << m << ": " << axon_status_string(st[m]);
            }
        }
    }

    /* Init (args[m] on team[m], NULL teams skipped) on every member; handles in *colls. */
    void Init(const std::vector<axon_team_h> &team, const std::vector<axon_coll_args_t> &args,
              std::vector<axon_coll_h> *colls)
    {
        colls->assign(team.size(), nullptr);
        for (uint32_t m = 0; m < team.size(); ++m) {
            if (team[m] != nullptr) {
                ASSERT_EQ(AXON_OK, axon_coll_init(team[m], &args[m], &(*colls)[m]))
                    << "member " << m;
                g_.colls.push_back((*colls)[m]);
            }
        }
    }

    void Wait(const std::vector<axon_coll_h> &colls, std::vector<axon_status_t> *st,
              const char *what)
    {
        ASSERT_TRUE(m_.wait_colls(colls, st)) << what << ": not done within " << kCollTimeout
                                              << " s";
        for (size_t m = 0; m < colls.size(); ++m) {
            if (colls[m] != nullptr) {
                EXPECT_EQ(AXON_OK, (*st)[m]) << what << ", member " << m << ": "
                                             << axon_status_string((*st)[m]);
            }
        }
    }

    /* Allgather of every member's parent rank over team: who is where. */
    void ExpectMembers(const std::vector<axon_team_h> &team, const std::vector<uint32_t> &order,
                       const char *what)
    {
        uint32_t                      size = (uint32_t)order.size();
        std::vector<uint32_t>         mine(team.size());
        std::vector<std::vector<uint32_t>> all(team.size(), std::vector<uint32_t>(size, ~0u));
        std::vector<axon_coll_args_t> args(team.size());
        for (uint32_t m = 0; m < team.size(); ++m) {
            mine[m] = m;
            args[m] = {};
            args[m].coll  = AXON_COLL_ALLGATHER;
            args[m].src   = &mine[m];
            args[m].dst   = all[m].data();
            args[m].count = 1;
            args[m].dt    = AXON_DT_UINT32;
        }
        std::vector<axon_coll_h>   colls;
        std::vector<axon_status_t> st;
        Init(team, args, &colls);
        ASSERT_FALSE(HasFatalFailure());
        ASSERT_TRUE(m_.post_and_wait(colls, &st)) << what;
        for (uint32_t m = 0; m < team.size(); ++m) {
            if (team[m] != nullptr) {
                EXPECT_EQ(AXON_OK, st[m]) << what;
                EXPECT_TRUE(all[m] == order) << what << ": member " << m
                                             << " sees the members in another order";
            }
        }
    }
};

/* The ranks of the members with color c, in the order key then parent rank gives them. */
std::vector<uint32_t> expected_order(const std::vector<int> &color, const std::vector<int> &key,
                                     int c)
{
    std::vector<uint32_t> order;
    for (uint32_t m = 0; m < color.size(); ++m) {
        if (color[m] == c) {
            order.push_back(m);
        }
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t a, uint32_t b) { return key[a] < key[b]; });
    return order;
}

void check_split(const std::vector<axon_team_h> &teams, const std::vector<int> &color,
                 const std::vector<int> &key)
{
    for (uint32_t m = 0; m < teams.size(); ++m) {
        if (teams[m] == nullptr) {
            continue;
        }
        std::vector<uint32_t> order = expected_order(color, key, color[m]);
        uint32_t              rank  = (uint32_t)(std::find(order.begin(), order.end(), m) -
                                                 order.begin());
        EXPECT_EQ(order.size(), axon_team_size(teams[m])) << "member " << m;
        EXPECT_EQ(rank, axon_team_rank(teams[m])) << "member " << m;
    }
}

/*
 * Even and odd ranks, ranked in reverse by key; the last member (of three or
 * more) stays out. The new teams' ranks and sizes, the members' order seen
 * by an allgather, and a reduction over each.
 */
TEST_P(CollTeam, SplitByColorAndKey)
{
    std::vector<int> color(n_), key(n_);
    for (uint32_t m = 0; m < n_; ++m) {
        color[m] = (int)(m % 2);
        key[m]   = (int)(n_ - m);
    }
    if (n_ >= 3) {
        color[n_ - 1] = AXON_TEAM_COLOR_NONE;
    }
    std::vector<axon_team_h> sub;
    Split(g_.teams, color, key, &sub);
    ASSERT_FALSE(HasFatalFailure());
    check_split(sub, color, key);

    /* Only one color's order can be checked per allgather (its members share a size). */
    for (int c = 0; c < 2; ++c) {
        std::vector<axon_team_h> of_c(n_, nullptr);
        for (uint32_t m = 0; m < n_; ++m) {
            of_c[m] = (color[m] == c) ? sub[m] : nullptr;
        }
        std::vector<uint32_t> order = expected_order(color, key, c);
        if (!order.empty()) {
            ExpectMembers(of_c, order, c ? "odd ranks" : "even ranks");
            ASSERT_FALSE(HasFatalFailure());
        }
    }

    /* Both new teams reduce at once: the sum of their members' parent ranks. */
    std::vector<int64_t>          in(n_), out(n_, -1);
    std::vector<axon_coll_args_t> args(n_);
    for (uint32_t m = 0; m < n_; ++m) {
        in[m] = m;
        args[m] = {};
        args[m].field_mask = AXON_COLL_ARG_OP;
        args[m].coll  = AXON_COLL_ALLREDUCE;
        args[m].src   = &in[m];
        args[m].dst   = &out[m];
        args[m].count = 1;
        args[m].dt    = AXON_DT_INT64;
        args[m].op    = AXON_OP_SUM;
    }
    std::vector<axon_coll_h>   colls;
    std::vector<axon_status_t> st;
    Init(sub, args, &colls);
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_TRUE(m_.post_and_wait(colls, &st));
    for (uint32_t m = 0; m < n_; ++m) {
        if (sub[m] == nullptr) {
            EXPECT_EQ(-1, out[m]);
            continue;
        }
        int64_t want = 0;
        for (uint32_t j : expected_order(color, key, color[m])) {
            want += j;
        }
        EXPECT_EQ(AXON_OK, st[m]);
        EXPECT_EQ(want, out[m]) << "member " << m;
    }
}

/* Equal keys keep the parent team's order; a split of a split works too. */
TEST_P(CollTeam, SplitWithEqualKeysKeepsTeamOrder)
{
    std::vector<int> color(n_, 7), key(n_, 0);
    std::vector<axon_team_h> copy;
    Split(g_.teams, color, key, &copy);
    ASSERT_FALSE(HasFatalFailure());
    check_split(copy, color, key);
    std::vector<uint32_t> order = expected_order(color, key, 7);
    ExpectMembers(copy, order, "a copy of the team");
    ASSERT_FALSE(HasFatalFailure());

    std::vector<int> half(n_);
    for (uint32_t m = 0; m < n_; ++m) {
        half[m] = (m < n_ / 2) ? 0 : 1;
    }
    std::vector<axon_team_h> sub;
    Split(copy, half, key, &sub);
    ASSERT_FALSE(HasFatalFailure());
    check_split(sub, half, key);
    std::vector<axon_team_h> upper(n_, nullptr);
    for (uint32_t m = n_ / 2; m < n_; ++m) {
        upper[m] = sub[m];
    }
    ExpectMembers(upper, expected_order(half, key, 1), "the upper half");
}

/*
 * Three teams on the same workers with collectives in flight on each at
 * once: the first team, a second created after it from the same endpoints,
 * and a split; members post them in different orders (each team's own
 * order is the same everywhere, as the header asks).
 */
TEST_P(CollTeam, TeamsInFlightTogether)
{
    std::vector<axon_team_h> first = g_.teams, second;
    m_.create_team(&second);
    ASSERT_FALSE(HasFatalFailure());
    g_.teams.insert(g_.teams.end(), second.begin(), second.end());
    std::vector<int> color(n_), key(n_, 0);
    for (uint32_t m = 0; m < n_; ++m) {
        color[m] = (int)(m % 2);
    }
    std::vector<axon_team_h> sub;
    Split(first, color, key, &sub);
    ASSERT_FALSE(HasFatalFailure());

    const size_t count = 1000;
    std::vector<std::vector<int32_t>> in(n_, std::vector<int32_t>(count));
    std::vector<std::vector<int32_t>> out_a(n_, std::vector<int32_t>(count, -1));
    std::vector<std::vector<int32_t>> out_b(n_, std::vector<int32_t>(count * n_, -1));
    std::vector<std::vector<int32_t>> out_c(n_, std::vector<int32_t>(count, -1));
    std::vector<axon_coll_args_t>     a(n_), b(n_), c(n_);
    for (uint32_t m = 0; m < n_; ++m) {
        for (size_t i = 0; i < count; ++i) {
            in[m][i] = (int32_t)(m * 100000 + i);
        }
        a[m] = {};
        a[m].field_mask = AXON_COLL_ARG_OP;
        a[m].coll = AXON_COLL_ALLREDUCE;
        a[m].src  = in[m].data();
        a[m].dst  = out_a[m].data();
        a[m].count = count;
        a[m].dt    = AXON_DT_INT32;
        a[m].op    = AXON_OP_SUM;
        b[m] = a[m];
        b[m].coll = AXON_COLL_ALLGATHER;
        b[m].dst  = out_b[m].data();
        c[m] = a[m];
        c[m].op  = AXON_OP_MAX;
        c[m].dst = out_c[m].data();
    }
    std::vector<axon_coll_h> ca, cb, cc;
    Init(first, a, &ca);
    Init(second, b, &cb);
    Init(sub, c, &cc);
    ASSERT_FALSE(HasFatalFailure());
    for (int round = 0; round < 3; ++round) {
        for (uint32_t m = 0; m < n_; ++m) {
            axon_coll_h order[3] = {ca[m], cb[m], cc[m]};
            std::rotate(order, order + (m + round) % 3, order + 3);
            for (axon_coll_h h : order) {
                axon_status_t s = axon_coll_post(h);
                ASSERT_TRUE((s == AXON_OK) || (s == AXON_INPROGRESS)) << axon_status_string(s);
            }
        }
        std::vector<axon_status_t> sa, sb, sc;
        Wait(ca, &sa, "allreduce on the first team");
        Wait(cb, &sb, "allgather on the second team");
        Wait(cc, &sc, "allreduce max on the split");
        ASSERT_FALSE(HasFatalFailure());
        for (uint32_t m = 0; m < n_; ++m) {
            for (size_t i = 0; i < count; ++i) {
                int64_t sum = 0;
                int32_t max = -1;
                for (uint32_t j = 0; j < n_; ++j) {
                    sum += in[j][i];
                    if (color[j] == color[m]) {
                        max = std::max(max, in[j][i]);
                    }
                    ASSERT_EQ(in[j][i], out_b[m][j * count + i]) << "allgather, member " << m;
                }
                ASSERT_EQ((int32_t)sum, out_a[m][i]) << "allreduce, member " << m << ", " << i;
                ASSERT_EQ(max, out_c[m][i]) << "split's allreduce, member " << m << ", " << i;
            }
        }
    }
}

/*
 * The application's wildcard receives (any tag, any sender), posted before
 * the collectives, see none of their traffic; the collectives complete; then
 * the application's own messages arrive intact.
 */
TEST_P(CollTeam, CollectivesNeverMatchApplicationReceives)
{
    const size_t kAppLen = 300 << 10;  /* room for anything the collectives send */
    std::vector<std::vector<uint8_t>> rbuf(n_, std::vector<uint8_t>(kAppLen));
    std::vector<axon_request_h>       recvs(n_, nullptr);
    for (uint32_t m = 0; m < n_; ++m) {
        axon_request_param_t p = {};
        p.flags = AXON_REQ_FLAG_NO_IMM_CMPL;
        ASSERT_EQ(AXON_INPROGRESS, axon_tag_recv_nb(m_.worker(m), rbuf[m].data(), kAppLen, 0, 0,
                                                    &p, &recvs[m]));
    }

    /* Small and rendezvous-sized collectives of several kinds. */
    const size_t big = 256 << 10;
    std::vector<std::vector<uint8_t>> src(n_, std::vector<uint8_t>(big * n_));
    std::vector<std::vector<uint8_t>> dst(n_, std::vector<uint8_t>(big * n_));
    const axon_coll_type_t kinds[] = {AXON_COLL_BARRIER, AXON_COLL_ALLREDUCE, AXON_COLL_BCAST,
                                      AXON_COLL_ALLTOALL, AXON_COLL_ALLGATHER};
    for (axon_coll_type_t kind : kinds) {
        for (size_t count : {(size_t)8, big / n_}) {
            std::vector<axon_coll_args_t> args(n_);
            for (uint32_t m = 0; m < n_; ++m) {
                axon_test_fill(src[m].data(), src[m].size(), m);
                args[m] = {};
                args[m].field_mask = AXON_COLL_ARG_OP;
                args[m].coll  = kind;
                args[m].src   = src[m].data();
                args[m].dst   = dst[m].data();
                args[m].count = (kind == AXON_COLL_BARRIER) ? 0 : count;
                args[m].dt    = AXON_DT_UINT8;
                args[m].op    = AXON_OP_BXOR;
            }
            std::vector<axon_coll_h>   colls;
            std::vector<axon_status_t> st;
            Init(g_.teams, args, &colls);
            ASSERT_FALSE(HasFatalFailure());
            ASSERT_TRUE(m_.post_and_wait(colls, &st)) << "collective " << kind;
            for (uint32_t m = 0; m < n_; ++m) {
                EXPECT_EQ(AXON_OK, st[m]) << "collective " << kind << ", member " << m;
                EXPECT_EQ(AXON_INPROGRESS, axon_request_test(recvs[m], NULL))
                    << "member " << m << "'s application receive matched collective traffic ("
                    << kind << ")";
            }
        }
    }
    m_.progress_for(0.01);

    /* Member m sends to m + 1; with one member there is no one to send to. */
    std::vector<uint8_t>        msg(1000);
    std::vector<axon_request_h> sends;
    for (uint32_t m = 0; (n_ > 1) && (m < n_); ++m) {
        axon_request_h req = nullptr;
        axon_test_fill(msg.data(), msg.size(), 5000 + m);
        axon_status_t s = axon_tag_send_nb(m_.eps[m][(m + 1) % n_], msg.data(), msg.size(),
                                           0xABC00 + m, NULL, &req);
        ASSERT_TRUE((s == AXON_OK) || (s == AXON_INPROGRESS)) << axon_status_string(s);
        if (s == AXON_INPROGRESS) {
            sends.push_back(req);
        }
    }
    if (n_ == 1) {
        EXPECT_EQ(AXON_OK, axon_request_cancel(m_.worker(0), recvs[0]));
    }
    std::vector<axon_tag_recv_info_t> info(n_);
    ASSERT_TRUE(m_.progress_until([&] {
        for (axon_request_h r : sends) {
            if (axon_request_test(r, NULL) == AXON_INPROGRESS) {
                return false;
            }
        }
        for (uint32_t m = 0; m < n_; ++m) {
            if (axon_request_test(recvs[m], &info[m]) == AXON_INPROGRESS) {
                return false;
            }
        }
        return true;
    })) << "the application's messages did not arrive";
    for (axon_request_h r : sends) {
        EXPECT_EQ(AXON_OK, axon_request_test(r, NULL));
        axon_request_free(r);
    }
    for (uint32_t m = 0; m < n_; ++m) {
        axon_status_t s = axon_request_test(recvs[m], &info[m]);
        axon_request_free(recvs[m]);
        if (n_ == 1) {
            EXPECT_EQ(AXON_ERR_CANCELED, s);
            continue;
        }
        uint32_t from = (m + n_ - 1) % n_;
        EXPECT_EQ(AXON_OK, s) << "member " << m;
        EXPECT_EQ(0xABC00u + from, info[m].sender_tag) << "member " << m;
        EXPECT_EQ(msg.size(), info[m].length) << "member " << m;
        EXPECT_EQ(-1, axon_test_check(rbuf[m].data(), msg.size(), 5000 + from)) << "member " << m;
    }
}

/*
 * A team whose split is still in flight (not every member has called it)
 * cannot be destroyed: the split's allgather runs on it. Once the last
 * member joins the split, destroying the new teams and then the parent works.
 */
TEST_P(CollTeam, DestroyWhileSplittingIsBusy)
{
    if (n_ < 2) {
        GTEST_SKIP() << "a team of one splits at once";
    }
    std::vector<axon_team_h> parent = g_.teams;
    std::vector<axon_team_h> child(n_, nullptr);
    for (uint32_t m = 0; m + 1 < n_; ++m) {
        ASSERT_EQ(AXON_OK, axon_team_split_nb(parent[m], 0, (int)m, &child[m]));
        g_.teams.insert(g_.teams.begin(), child[m]);
    }
    m_.progress_for(0.05);
    {
        LogCapture log;
        EXPECT_EQ(AXON_ERR_BUSY, axon_team_destroy(parent[0]));
        EXPECT_TRUE(log.any_contains("still splitting"));
    }
    ASSERT_EQ(AXON_OK, axon_team_split_nb(parent[n_ - 1], 0, (int)(n_ - 1), &child[n_ - 1]));
    g_.teams.insert(g_.teams.begin(), child[n_ - 1]);
    std::vector<axon_status_t> st;
    ASSERT_TRUE(m_.wait_teams(child, &st));
    for (uint32_t m = 0; m < n_; ++m) {
        EXPECT_EQ(AXON_OK, st[m]) << "member " << m;
        EXPECT_EQ(n_, axon_team_size(child[m]));
    }
}

/*
 * A team that is still joining (one member never made it) can be
 * destroyed: the join ends quietly, its receives are canceled and their
 * requests come back to the pools once progress has run.
 */
TEST_P(CollTeam, DestroyWhileJoiningIsClean)
{
    if (n_ < 2) {
        GTEST_SKIP() << "a team of one is ready at once";
    }
    std::vector<axon_team_h> joining(n_ - 1, nullptr);
    for (uint32_t i = 0; i + 1 < n_; ++i) {
        axon_team_params_t params = {};
        params.field_mask = AXON_TEAM_PARAM_EPS | AXON_TEAM_PARAM_RANK;
        params.eps        = m_.eps[i].data();
        params.size       = n_;
        params.rank       = i;
        ASSERT_EQ(AXON_OK, axon_team_create_nb(m_.nodes[i].worker, &params, &joining[i]));
    }
    m_.progress_for(0.05);
    for (uint32_t i = 0; i + 1 < n_; ++i) {
        EXPECT_EQ(AXON_INPROGRESS, axon_team_create_test(joining[i])) << "member " << i;
        EXPECT_EQ(AXON_OK, axon_team_destroy(joining[i])) << "member " << i;
    }
    m_.progress_for(0.05);
    for (uint32_t i = 0; i + 1 < n_; ++i) {
        axon_worker_h w = m_.nodes[i].worker;
        EXPECT_EQ(0u, w->req_mp.num_elems - w->req_mp.num_free) << "member " << i;
        EXPECT_EQ(0u, w->tm[AXON_TAG_SPACE_COLL].num_expected) << "member " << i;
    }
    /* The absent member got the others' join messages: let its worker drop them. */
    m_.skip_clean_check = true;
}

INSTANTIATE_TEST_SUITE_P(Lanes, CollTeam, ::testing::ValuesIn(kCollLanes), coll_param_name);
INSTANTIATE_TEST_SUITE_P(Variants, CollTeam, ::testing::ValuesIn(kCollSizes), coll_param_name);

}  // namespace
