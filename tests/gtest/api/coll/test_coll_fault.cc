/*
 * A member killed inside a collective: four processes (this one, rank 0,
 * and three forked children) make a team from their exchanged addresses,
 * run collectives that work, then all but one post a collective that needs
 * the last one, which is killed with SIGKILL. Every survivor's collective
 * must complete with an error (not hang, not succeed) within the lane's
 * failure detection time, and the survivors then destroy their teams
 * cleanly. The lanes' failure options are those of the peer-failure tests
 * (api/core/test_peer_failure.cc); rc_xc runs the doomed collective as
 * device chains (AXON_COLL_OFFLOAD=y), stopped in error when rc's keepalive
 * sees the victim gone.
 */
#include <gtest/gtest.h>

#include <string.h>

#include <string>
#include <vector>

#include "coll_proc.h"
#include "log_capture.h"

namespace {

const double   kOpTimeout   = kProcOpTimeout;
const double   kPeerTimeout = 90.0;
const double   kDetectLimit = 5.0;  /* kill to the last survivor's completion */
const uint32_t kMembers     = 4;
const uint32_t kVictim      = 2;
const size_t   kQueued      = 40;   /* allreduces posted behind the doomed one */
const size_t   kQueuedCount = 1024; /* their elements: offloaded, a few fill the queues */

struct FaultParam {
    const char      *label;
    const char      *tls;
    axon_config_kv_t extra[3];
};

std::ostream &operator<<(std::ostream &os, const FaultParam &p)
{
    return os << p.label;
}

struct FaultArgs {
    const FaultParam *param;
    axon_coll_type_t  coll;  /* what the survivors post when the victim dies */
    size_t            queued;  /* allreduces posted behind it */
    uint32_t          rank;
};

/* Does the lane run barrier and allreduce as device chains (AXON_COLL_OFFLOAD=y)? */
bool offloads(const FaultParam &p)
{
    for (const axon_config_kv_t &kv : p.extra) {
        if ((kv.name != NULL) && !strcmp(kv.name, "COLL_OFFLOAD") && !strcmp(kv.value, "y")) {
            return true;
        }
    }
    return false;
}

/* A member, and what it does around the kill. */
struct FaultMember : Member {
    std::vector<axon_coll_h> queued;  /* behind coll, none done */
    std::vector<int64_t>     qin = std::vector<int64_t>(kQueuedCount, 1);
    std::vector<int64_t>     qout = std::vector<int64_t>(kQueuedCount);

    ~FaultMember()
    {
        for (axon_coll_h c : queued) {
            axon_coll_free(c);
        }
    }

    axon_status_t create(const FaultParam &p)
    {
        return Member::create(p.tls, p.extra, sizeof(p.extra) / sizeof(p.extra[0]));
    }

    /* Collectives that work, every pair of members talking (an alltoall). */
    bool warm_up(uint32_t rank, uint32_t size)
    {
        std::vector<int64_t> in(size, rank), out(size, -1);
        int64_t              one = 1, sum = 0;
        return (run(AXON_COLL_ALLTOALL, in.data(), out.data(), 1, kOpTimeout) == AXON_OK) &&
               (out[size - 1] == size - 1) &&
               (run(AXON_COLL_ALLREDUCE, &one, &sum, 1, kOpTimeout) == AXON_OK) &&
               (sum == size);
    }

    /* Post the collective that needs the victim, and n allreduces behind it;
     * AXON_INPROGRESS while they all run. */
    axon_status_t post_doomed(axon_coll_type_t kind, int64_t *src, int64_t *dst, size_t n)
    {
        axon_coll_args_t a = {};
        a.field_mask = AXON_COLL_ARG_OP;
        a.coll  = kind;
        a.src   = src;
        a.dst   = dst;
        a.count = (kind == AXON_COLL_BARRIER) ? 0 : 1;
        a.dt    = AXON_DT_INT64;
        a.op    = AXON_OP_SUM;
        axon_status_t st = axon_coll_init(team, &a, &coll);
        if (st != AXON_OK) {
            return st;
        }
        st = axon_coll_post(coll);
        if ((st != AXON_OK) && (st != AXON_INPROGRESS)) {
            return st;
        }
        a.coll  = AXON_COLL_ALLREDUCE;
        a.src   = qin.data();
        a.dst   = qout.data();
        a.count = kQueuedCount;
        for (size_t i = 0; i < n; ++i) {
            axon_coll_h c;
            if ((st = axon_coll_init(team, &a, &c)) != AXON_OK) {
                return st;
            }
            queued.push_back(c);
            st = axon_coll_post(c);
            if ((st != AXON_OK) && (st != AXON_INPROGRESS)) {
                return st;
            }
        }
        axon_test_progress_for(node.worker, 0.2);
        for (axon_coll_h c : queued) {
            if ((st = axon_coll_test(c)) != AXON_INPROGRESS) {
                return st;
            }
        }
        return axon_coll_test(coll);
    }

    /* Progress until the doomed collectives complete; when, and the doomed one's
     * status (AXON_INPROGRESS or AXON_OK if any queued behind it is so). */
    axon_status_t finish_doomed(double timeout, double *t_done)
    {
        double        end = axon_test_time() + timeout;
        axon_status_t st;
        for (;;) {
            st = axon_coll_test(coll);
            for (axon_coll_h c : queued) {
                axon_status_t q = axon_coll_test(c);
                st = ((q == AXON_INPROGRESS) || (q == AXON_OK)) ? q : st;
                if (q == AXON_INPROGRESS) {
                    break;
                }
            }
            if ((st != AXON_INPROGRESS) || (axon_test_time() >= end)) {
                break;
            }
            axon_test_progress(node.worker);
        }
        *t_done = axon_test_time();
        return st;
    }

    /* Free, destroy the team (AXON_OK expected), close the endpoints. */
    axon_status_t leave()
    {
        axon_status_t st = axon_coll_free(coll);
        coll = nullptr;
        for (axon_coll_h c : queued) {
            axon_status_t q = axon_coll_free(c);
            st = (st == AXON_OK) ? q : st;
        }
        queued.clear();
        if (st != AXON_OK) {
            return st;
        }
        st   = axon_team_destroy(team);
        team = nullptr;
        close_eps();
        return st;
    }
};

/* A child member: its address up, everyone's down; then as rank 0 says. */
int member_main(int fd, void *arg)
{
    FaultArgs               *a = static_cast<FaultArgs *>(arg);
    FaultMember              me;
    std::string              note;
    std::vector<std::string> addrs;

    PEER_CHECK(me.create(*a->param) == AXON_OK);
    PEER_CHECK(me.exchange(fd, kMembers, &addrs));
    axon_status_t st = me.join(addrs, a->rank);
    PEER_CHECK(st == AXON_OK, "rank %u: team: %s", a->rank, axon_status_string(st));
    PEER_CHECK(me.warm_up(a->rank, kMembers), "rank %u: collectives before the kill", a->rank);
    PEER_CHECK(axon_test_send_blob(fd, "ready", 5) == 0);

    if (a->rank == kVictim) {
        for (;;) {  /* alive and progressing, in no collective, until killed */
            axon_test_progress(me.node.worker);
        }
    }
    PEER_CHECK(wait_note(fd, me.node.worker, kOpTimeout, &note) && (note == "go"));
    int64_t one = 1, sum = -1;
    st = me.post_doomed(a->coll, &one, &sum, a->queued);
    PEER_CHECK(st == AXON_INPROGRESS, "rank %u: completed without the victim: %s", a->rank,
               axon_status_string(st));
    PEER_CHECK(axon_test_send_blob(fd, "posted", 6) == 0);

    double t_done;
    st = me.finish_doomed(kDetectLimit + 10, &t_done);
    PEER_CHECK(wait_note(fd, me.node.worker, kOpTimeout, &note) && (note.size() == sizeof(double)));
    double t0;
    memcpy(&t0, note.data(), sizeof(t0));
    PEER_CHECK(st != AXON_INPROGRESS, "rank %u: still running %.1f s after the kill", a->rank,
               axon_test_time() - t0);
    PEER_CHECK(st != AXON_OK, "rank %u: completed OK without the victim", a->rank);
    PEER_CHECK(t_done - t0 <= kDetectLimit, "rank %u: failed %.3f s after the kill", a->rank,
               t_done - t0);
    fprintf(stderr, "[coll-fault] rank %u: %s %.3f s after the kill\n", a->rank,
            axon_status_string(st), t_done - t0);
    st = me.leave();
    PEER_CHECK(st == AXON_OK, "rank %u: leaving: %s", a->rank, axon_status_string(st));
    PEER_CHECK(axon_test_send_blob(fd, "done", 4) == 0);
    return 0;
}

/*
 * A child member of a team whose victim dies before it joins: the victim
 * only gives its address; the others, once told, join (and must fail).
 */
int join_member_main(int fd, void *arg)
{
    FaultArgs               *a = static_cast<FaultArgs *>(arg);
    FaultMember              me;
    std::string              note;
    std::vector<std::string> addrs;

    PEER_CHECK(me.create(*a->param) == AXON_OK);
    PEER_CHECK(me.exchange(fd, kMembers, &addrs));
    PEER_CHECK(axon_test_send_blob(fd, "ready", 5) == 0);
    if (a->rank == kVictim) {
        for (;;) {  /* never joins: killed first */
            axon_test_progress(me.node.worker);
        }
    }
    PEER_CHECK(wait_note(fd, me.node.worker, kOpTimeout, &note) && (note == "go"));
    axon_status_t st = me.join(addrs, a->rank);
    PEER_CHECK((st != AXON_OK) && (st != AXON_ERR_TIMED_OUT), "rank %u: joining without the "
               "victim: %s", a->rank, axon_status_string(st));
    st = axon_team_destroy(me.team);
    me.team = nullptr;
    PEER_CHECK(st == AXON_OK, "rank %u: destroying the failed team: %s", a->rank,
               axon_status_string(st));
    PEER_CHECK(axon_test_send_blob(fd, "done", 4) == 0);
    return 0;
}

class CollFault : public ::testing::TestWithParam<FaultParam> {
protected:
    Watchdog                      dog_{180};
    std::vector<axon_test_peer_t> peers_ = std::vector<axon_test_peer_t>(kMembers, {-1, -1});
    pid_t                         dead_  = -1;

    void TearDown() override
    {
        for (axon_test_peer_t &p : peers_) {
            axon_test_peer_kill(&p);
        }
        if (dead_ > 0) {
            axon_test_remove_shm_of(dead_);
        }
    }

    void KillInside(axon_coll_type_t kind, size_t queued = 0)
    {
        std::vector<FaultArgs> args(kMembers);
        for (uint32_t r = 1; r < kMembers; ++r) {
            args[r] = {&GetParam(), kind, queued, r};
            ASSERT_EQ(0, axon_test_peer_spawn(&peers_[r], member_main, &args[r], kPeerTimeout));
        }
        FaultMember me;
        ASSERT_EQ(AXON_OK, me.create(GetParam()));
        std::vector<std::string> addrs(kMembers);
        addrs[0].assign(static_cast<char *>(me.node.address), me.node.address_length);
        ASSERT_EQ("", share_addresses(peers_, &addrs));
        ASSERT_EQ(AXON_OK, me.join(addrs, 0));
        ASSERT_TRUE(me.warm_up(0, kMembers)) << "collectives before the kill";
        if (offloads(GetParam())) {  /* the doomed collective is a device chain */
            axon_coll_attr_t attr;
            ASSERT_EQ(AXON_OK, axon_coll_query(me.team, kind, AXON_DT_INT64, AXON_OP_SUM,
                                               (kind == AXON_COLL_BARRIER) ? 0 : 8, &attr));
            EXPECT_STREQ("offload", attr.algorithm);
        }
        for (uint32_t r = 1; r < kMembers; ++r) {
            ASSERT_TRUE(wait_note(peers_[r].fd, me.node.worker, kOpTimeout))
                << "rank " << r << " not ready";
        }

        for (uint32_t r = 1; r < kMembers; ++r) {
            if (r != kVictim) {
                ASSERT_EQ(0, axon_test_send_blob(peers_[r].fd, "go", 2));
            }
        }
        int64_t one = 1, sum = -1;
        ASSERT_EQ(AXON_INPROGRESS, me.post_doomed(kind, &one, &sum, queued))
            << "completed without the victim";
        for (uint32_t r = 1; r < kMembers; ++r) {
            if (r != kVictim) {
                ASSERT_TRUE(wait_note(peers_[r].fd, me.node.worker, kOpTimeout))
                    << "rank " << r << " did not post";
            }
        }
        EXPECT_EQ(AXON_INPROGRESS, axon_coll_test(me.coll));

        double t0 = axon_test_time();
        dead_ = axon_test_peer_crash(&peers_[kVictim]);
        ASSERT_GT(dead_, 0);
        for (uint32_t r = 1; r < kMembers; ++r) {
            if (r != kVictim) {
                ASSERT_EQ(0, axon_test_send_blob(peers_[r].fd, &t0, sizeof(t0)));
            }
        }
        double        t_done;
        axon_status_t st = me.finish_doomed(kDetectLimit + 10, &t_done);
        EXPECT_NE(AXON_INPROGRESS, st) << "still running " << axon_test_time() - t0
                                       << " s after the kill";
        EXPECT_NE(AXON_OK, st) << "completed OK without the victim";
        EXPECT_LE(t_done - t0, kDetectLimit) << "failed late";
        fprintf(stderr, "[coll-fault] rank 0: %s %.3f s after the kill\n",
                axon_status_string(st), t_done - t0);
        if (st != AXON_INPROGRESS) {
            EXPECT_EQ(AXON_OK, me.leave()) << "the survivor's team does not go cleanly";
        }
        for (uint32_t r = 1; r < kMembers; ++r) {
            if (r != kVictim) {
                /* Progressing: a survivor may still need us to finish. */
                EXPECT_TRUE(wait_note(peers_[r].fd, me.node.worker, kPeerTimeout))
                    << "survivor rank " << r << " did not finish";
                int ret = axon_test_peer_wait(&peers_[r], kOpTimeout);
                EXPECT_EQ(0, ret) << "survivor rank " << r << " failed";
            }
        }
    }
};

/*
 * A member killed before the team forms: every survivor's join ends with an
 * error. Its exchange was aborted by the failure while receives of it were
 * outstanding; canceling them completed the join's allgather, whose
 * callback freed it, under the abort still walking its requests (a crash
 * seen by axon_soak over dc).
 */
TEST_P(CollFault, KilledMemberFailsSurvivorsJoin)
{
    std::vector<FaultArgs> args(kMembers);
    for (uint32_t r = 1; r < kMembers; ++r) {
        args[r] = {&GetParam(), AXON_COLL_BARRIER, 0, r};
        ASSERT_EQ(0, axon_test_peer_spawn(&peers_[r], join_member_main, &args[r], kPeerTimeout));
    }
    FaultMember me;
    ASSERT_EQ(AXON_OK, me.create(GetParam()));
    std::vector<std::string> addrs(kMembers);
    addrs[0].assign(static_cast<char *>(me.node.address), me.node.address_length);
    ASSERT_EQ("", share_addresses(peers_, &addrs));
    for (uint32_t r = 1; r < kMembers; ++r) {
        ASSERT_TRUE(wait_note(peers_[r].fd, me.node.worker, kOpTimeout)) << "rank " << r;
    }
    dead_ = axon_test_peer_crash(&peers_[kVictim]);
    ASSERT_GT(dead_, 0);
    for (uint32_t r = 1; r < kMembers; ++r) {
        if (r != kVictim) {
            ASSERT_EQ(0, axon_test_send_blob(peers_[r].fd, "go", 2));
        }
    }
    axon_status_t st = me.join(addrs, 0);
    EXPECT_NE(AXON_OK, st) << "joined without the victim";
    EXPECT_NE(AXON_ERR_TIMED_OUT, st) << "the join did not end";
    EXPECT_EQ(AXON_OK, axon_team_destroy(me.team));
    me.team = nullptr;
    for (uint32_t r = 1; r < kMembers; ++r) {
        if (r != kVictim) {
            EXPECT_TRUE(wait_note(peers_[r].fd, me.node.worker, kPeerTimeout))
                << "survivor rank " << r << " did not finish";
            EXPECT_EQ(0, axon_test_peer_wait(&peers_[r], kOpTimeout)) << "survivor rank " << r;
        }
    }
}

TEST_P(CollFault, KilledMemberFailsSurvivorsAllreduce)
{
    KillInside(AXON_COLL_ALLREDUCE);
}

TEST_P(CollFault, KilledMemberFailsSurvivorsBarrier)
{
    KillInside(AXON_COLL_BARRIER);
}

/* Behind the doomed barrier, allreduces in flight (offloaded: most queued for room). */
TEST_P(CollFault, KilledMemberFailsEverySurvivorCollectiveInFlight)
{
    KillInside(AXON_COLL_BARRIER, kQueued);
}

const FaultParam kFaultParams[] = {
    {"shm", "shm", {{NULL, NULL}}},
    {"tcp", "tcp", {{NULL, NULL}}},
    /* softib: the short timeouts of the peer-failure tests */
    {"rc", "rc", {{"RC_TIMEOUT", "0.2s"}, {"RC_KEEPALIVE_INTERVAL", "0.5s"}}},
    {"ud", "ud", {{"UD_TIMEOUT", "3s"}, {"UD_KEEPALIVE_INTERVAL", "0.25s"}}},
    /* rc with the collectives offloaded: the victim's death is seen by rc's
     * keepalive, and the survivors' device chains are stopped in error */
    {"rc_xc", "rc", {{"RC_TIMEOUT", "0.2s"}, {"RC_KEEPALIVE_INTERVAL", "0.5s"},
                     {"COLL_OFFLOAD", "y"}}},
};

std::string fault_param_name(const ::testing::TestParamInfo<FaultParam> &info)
{
    return info.param.label;
}

INSTANTIATE_TEST_SUITE_P(Lanes, CollFault, ::testing::ValuesIn(kFaultParams), fault_param_name);

}  // namespace
