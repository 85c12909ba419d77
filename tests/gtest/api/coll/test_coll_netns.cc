/*
 * Members on two hosts: four members as forked processes, 0 and 2 in one
 * network namespace, 1 and 3 in the other, the namespaces joined by a veth
 * pair, over tcp. Pairs across the namespaces can only go over the veth
 * pair, which each member checks with axon_ep_query. Every collective runs
 * once (reductions small and about 1 MiB, past the rendezvous threshold),
 * then a split into teams that cross the namespaces; each member checks
 * its own results against the references of coll_env.h. Skipped where
 * namespaces cannot be made (not root, no ip(8)).
 */
#include <gtest/gtest.h>

#include <poll.h>
#include <string.h>

#include <functional>
#include <string>
#include <vector>

#include "coll_proc.h"
#include "log_capture.h"

namespace {

const uint32_t kRanks      = 4;
const double   kRunTimeout = 120.0;  /* a member process's whole life */
const size_t   kOdd        = 13;
const size_t   kLarge      = (size_t)1 << 20;
const uint8_t  kSentinel   = 0xA5;

typedef std::vector<uint8_t> Bytes;

struct RankArgs {
    const CollParam         *param;
    const axon_test_netns_t *ns;
    uint32_t                 rank;
};

uint32_t side_of(uint32_t rank)
{
    return rank % 2;
}

/* Member rank's block of data for collective seed, as every member can compute it. */
uint64_t block_seed(uint64_t seed, uint32_t from, uint32_t to)
{
    return seed * 1000 + from * 64 + to;
}

/* One member process: its team, the collectives, and the first thing that went wrong. */
class Rank {
public:
    Member      me;
    uint32_t    rank = 0, n = kRanks;
    std::string fail;

    bool check(bool cond, const std::string &what)
    {
        if (!cond && fail.empty()) {
            fail = what;
        }
        return cond;
    }

    bool run(axon_team_h team, const axon_coll_args_t &a, const std::string &what)
    {
        axon_status_t st = me.run_on(team, a, kProcOpTimeout);
        return check(st == AXON_OK, what + ": " + axon_status_string(st));
    }

    /* Each pair's lane is tcp; across the namespaces, over the veth pair. */
    bool CheckLanes(const char *ifname)
    {
        for (uint32_t j = 0; j < n; ++j) {
            axon_ep_attr_t attr;
            if (j == rank) {
                continue;
            }
            std::string pair = "endpoint to " + std::to_string(j);
            if (!check(axon_ep_query(me.eps[j], &attr) == AXON_OK, pair + ": query") ||
                !check(!strcmp(attr.small_tl, "tcp"), pair + " over " + attr.small_tl)) {
                return false;
            }
            if (side_of(j) != side_of(rank)) {
                check(!strcmp(attr.small_dev, ifname) && !strcmp(attr.bulk_dev, ifname),
                      pair + " (the other namespace) over " + attr.small_dev + "/" +
                          attr.bulk_dev + ", not " + ifname);
            }
        }
        return fail.empty();
    }

    void Barrier()
    {
        axon_coll_args_t a = {};
        a.coll = AXON_COLL_BARRIER;
        a.dt   = AXON_DT_UINT8;
        run(me.team, a, "barrier");
    }

    void Bcast(size_t bytes, uint32_t root, uint64_t seed)
    {
        Bytes buf(bytes, kSentinel);
        if (rank == root) {
            axon_test_fill(buf.data(), bytes, seed);
        }
        axon_coll_args_t a = {};
        a.field_mask = AXON_COLL_ARG_ROOT;
        a.coll       = AXON_COLL_BCAST;
        a.dst        = buf.data();
        a.count      = bytes;
        a.dt         = AXON_DT_UINT8;
        a.root       = root;
        std::string what = "bcast of " + std::to_string(bytes) + " bytes";
        if (run(me.team, a, what)) {
            check(axon_test_check(buf.data(), bytes, seed) == -1, what + ": wrong data");
        }
    }

    /* Allreduce, or reduce to root (root >= 0), checked against the reference. */
    void Reduction(axon_coll_type_t coll, int root, size_t count, axon_dt_t dt, axon_op_t op,
                   uint64_t seed)
    {
        size_t size = dt_info(dt).size;
        Bytes  in(count * size), out(count * size, kSentinel), ref(count * size);
        fill_input(in.data(), count, dt, op, rank, seed);
        fill_input(ref.data(), count, dt, op, 0, seed);
        for (uint32_t m = 1; m < n; ++m) {
            Bytes other(count * size);
            fill_input(other.data(), count, dt, op, m, seed);
            reduce_into(ref.data(), other.data(), count, dt, op);
        }
        axon_coll_args_t a = {};
        a.field_mask = AXON_COLL_ARG_OP | ((root >= 0) ? AXON_COLL_ARG_ROOT : 0);
        a.coll       = coll;
        a.src        = in.data();
        a.dst        = out.data();
        a.count      = count;
        a.dt         = dt;
        a.op         = op;
        a.root       = (root >= 0) ? (uint32_t)root : 0;
        std::string what = std::string(coll == AXON_COLL_REDUCE ? "reduce " : "allreduce ") +
                           combo_name(dt, op) + " count " + std::to_string(count);
        if (run(me.team, a, what) && ((root < 0) || (rank == (uint32_t)root))) {
            ssize_t bad = first_diff(ref.data(), out.data(), count, dt);
            check(bad == -1, what + ": element " + std::to_string(bad) + " differs");
        }
    }

    void ReduceScatter(size_t count, uint64_t seed)
    {
        Bytes in(n * count * 4), out(count * 4, kSentinel), ref(n * count * 4);
        fill_input(in.data(), n * count, AXON_DT_INT32, AXON_OP_SUM, rank, seed);
        fill_input(ref.data(), n * count, AXON_DT_INT32, AXON_OP_SUM, 0, seed);
        for (uint32_t m = 1; m < n; ++m) {
            Bytes other(n * count * 4);
            fill_input(other.data(), n * count, AXON_DT_INT32, AXON_OP_SUM, m, seed);
            reduce_into(ref.data(), other.data(), n * count, AXON_DT_INT32, AXON_OP_SUM);
        }
        axon_coll_args_t a = {};
        a.field_mask = AXON_COLL_ARG_OP;
        a.coll       = AXON_COLL_REDUCE_SCATTER;
        a.src        = in.data();
        a.dst        = out.data();
        a.count      = count;
        a.dt         = AXON_DT_INT32;
        a.op         = AXON_OP_SUM;
        if (run(me.team, a, "reduce_scatter")) {
            check(first_diff(ref.data() + rank * count * 4, out.data(), count, AXON_DT_INT32) ==
                      -1, "reduce_scatter: wrong block");
        }
    }

    /* Allgather (root < 0) or gather to root: block j from member j. */
    void Gather(int root, size_t count, uint64_t seed)
    {
        size_t blk = count * 2;
        Bytes  in(blk), out(n * blk, kSentinel);
        axon_test_fill(in.data(), blk, block_seed(seed, rank, 0));
        axon_coll_args_t a = {};
        a.field_mask = (root >= 0) ? AXON_COLL_ARG_ROOT : 0;
        a.coll       = (root >= 0) ? AXON_COLL_GATHER : AXON_COLL_ALLGATHER;
        a.src        = in.data();
        a.dst        = out.data();
        a.count      = count;
        a.dt         = AXON_DT_UINT16;
        a.root       = (root >= 0) ? (uint32_t)root : 0;
        std::string what = (root >= 0) ? "gather" : "allgather";
        if (run(me.team, a, what) && ((root < 0) || (rank == (uint32_t)root))) {
            for (uint32_t j = 0; j < n; ++j) {
                check(axon_test_check(out.data() + j * blk, blk, block_seed(seed, j, 0)) == -1,
                      what + ": block of " + std::to_string(j));
            }
        }
    }

    void Allgatherv(uint64_t seed)
    {
        const size_t counts[kRanks] = {5, 0, 9, 2};
        size_t       displs[kRanks], at = 0;
        for (uint32_t j = n; j-- > 0;) {  /* reverse order, a gap after each */
            displs[j] = at;
            at       += counts[j] + 1;
        }
        Bytes in(counts[rank] * 4 + 1), out(at * 4, kSentinel), want(at * 4, kSentinel);
        axon_test_fill(in.data(), counts[rank] * 4, block_seed(seed, rank, 0));
        for (uint32_t j = 0; j < n; ++j) {
            axon_test_fill(want.data() + displs[j] * 4, counts[j] * 4, block_seed(seed, j, 0));
        }
        axon_coll_args_t a = {};
        a.field_mask = AXON_COLL_ARG_COUNTS;
        a.coll       = AXON_COLL_ALLGATHERV;
        a.src        = in.data();
        a.dst        = out.data();
        a.count      = counts[rank];
        a.dt         = AXON_DT_FLOAT;
        a.dst_counts = counts;
        a.dst_displs = displs;
        if (run(me.team, a, "allgatherv")) {
            check(want == out, "allgatherv: wrong data");
        }
    }

    /* Alltoall with count elements a block, or (v) uneven counts with zeros. */
    void Alltoall(bool v, size_t count, uint64_t seed)
    {
        std::vector<size_t> sc(n), sd(n), dc(n), dd(n);
        size_t              s_at = 0, d_at = 0;
        for (uint32_t j = 0; j < n; ++j) {
            sc[j] = v ? (((rank + 2 * j) % 4 == 1) ? 0 : (rank * 3 + j) % 7 + 1) : count;
            dc[j] = v ? (((j + 2 * rank) % 4 == 1) ? 0 : (j * 3 + rank) % 7 + 1) : count;
            sd[j] = s_at;
            dd[j] = d_at;
            s_at += sc[j] + (v ? 1 : 0);
            d_at += dc[j] + (v ? 2 : 0);
        }
        Bytes in(s_at * 8, kSentinel), out(d_at * 8, kSentinel), want(d_at * 8, kSentinel);
        for (uint32_t j = 0; j < n; ++j) {
            axon_test_fill(in.data() + sd[j] * 8, sc[j] * 8, block_seed(seed, rank, j));
            axon_test_fill(want.data() + dd[j] * 8, dc[j] * 8, block_seed(seed, j, rank));
        }
        axon_coll_args_t a = {};
        a.field_mask = v ? AXON_COLL_ARG_COUNTS : 0;
        a.coll       = v ? AXON_COLL_ALLTOALLV : AXON_COLL_ALLTOALL;
        a.src        = in.data();
        a.dst        = out.data();
        a.count      = v ? 0 : count;
        a.dt         = AXON_DT_UINT64;
        a.src_counts = v ? sc.data() : nullptr;
        a.src_displs = v ? sd.data() : nullptr;
        a.dst_counts = v ? dc.data() : nullptr;
        a.dst_displs = v ? dd.data() : nullptr;
        std::string what = v ? "alltoallv" : "alltoall";
        if (run(me.team, a, what)) {
            check(want == out, what + ": wrong data");
        }
    }

    void Scatter(uint32_t root, size_t count, uint64_t seed)
    {
        size_t blk = count * 2;
        Bytes  in(n * blk), out(blk, kSentinel);
        for (uint32_t j = 0; j < n; ++j) {
            axon_test_fill(in.data() + j * blk, blk, block_seed(seed, root, j));
        }
        axon_coll_args_t a = {};
        a.field_mask = AXON_COLL_ARG_ROOT;
        a.coll       = AXON_COLL_SCATTER;
        a.src        = (rank == root) ? in.data() : nullptr;
        a.dst        = out.data();
        a.count      = count;
        a.dt         = AXON_DT_UINT16;
        a.root       = root;
        if (run(me.team, a, "scatter")) {
            check(axon_test_check(out.data(), blk, block_seed(seed, root, rank)) == -1,
                  "scatter: wrong block");
        }
    }

    /*
     * Split into {0, 1} and {2, 3}, each across the namespaces, keys
     * reversing the order; every member's parent rank gathered on the new
     * team says who is where, and a sum runs on it.
     */
    void Split()
    {
        axon_team_h   sub = nullptr;
        axon_status_t st  = axon_team_split_nb(me.team, (int)(rank / 2), -(int)rank, &sub);
        if (!check(st == AXON_OK, std::string("split: ") + axon_status_string(st))) {
            return;
        }
        st = me.wait_team(sub);
        if (check(st == AXON_OK, std::string("split team: ") + axon_status_string(st)) &&
            check((axon_team_size(sub) == 2) && (axon_team_rank(sub) == 1 - rank % 2),
                  "split team: size " + std::to_string(axon_team_size(sub)) + ", rank " +
                      std::to_string(axon_team_rank(sub)))) {
            uint32_t         mine = rank, all[2] = {~0u, ~0u};
            axon_coll_args_t a = {};
            a.coll  = AXON_COLL_ALLGATHER;
            a.src   = &mine;
            a.dst   = all;
            a.count = 1;
            a.dt    = AXON_DT_UINT32;
            uint32_t high = rank | 1;  /* the split team, highest key first */
            if (run(sub, a, "allgather on the split team")) {
                check((all[0] == high) && (all[1] == high - 1),
                      "split team members " + std::to_string(all[0]) + ", " +
                          std::to_string(all[1]));
            }
            int64_t one = (int64_t)rank + 1, sum = -1;
            a            = {};
            a.field_mask = AXON_COLL_ARG_OP;
            a.coll       = AXON_COLL_ALLREDUCE;
            a.src        = &one;
            a.dst        = &sum;
            a.count      = 1;
            a.dt         = AXON_DT_INT64;
            a.op         = AXON_OP_SUM;
            if (run(sub, a, "allreduce on the split team")) {
                check(sum == (int64_t)(2 * high + 1), "split team sum " + std::to_string(sum));
            }
        }
        st = axon_team_destroy(sub);
        check(st == AXON_OK, std::string("split team destroy: ") + axon_status_string(st));
    }

    /* In order, up to the first failure (the team is no use after a timed-out collective). */
    void EveryCollective()
    {
        const axon_coll_type_t      kReduce = AXON_COLL_REDUCE, kAll = AXON_COLL_ALLREDUCE;
        const std::function<void()> steps[] = {
            [&] { Barrier(); },
            [&] { Bcast(kOdd, 1, 1); },
            [&] { Bcast(kLarge + 1, 2, 2); },
            [&] { Reduction(kReduce, 2, kOdd, AXON_DT_INT32, AXON_OP_SUM, 3); },
            [&] { Reduction(kReduce, 3, kOdd, AXON_DT_DOUBLE_INT32, AXON_OP_MINLOC, 4); },
            [&] { Reduction(kAll, -1, kOdd, AXON_DT_INT64, AXON_OP_PROD, 5); },
            [&] { Reduction(kAll, -1, kLarge / 8, AXON_DT_DOUBLE, AXON_OP_SUM, 6); },
            [&] { Gather(-1, kOdd, 7); },
            [&] { Allgatherv(8); },
            [&] { Alltoall(false, kOdd, 9); },
            [&] { Alltoall(true, 0, 10); },
            [&] { ReduceScatter(kOdd, 11); },
            [&] { Gather(3, kOdd, 12); },
            [&] { Scatter(0, kOdd, 13); },
            [&] { Split(); },
            [&] { Barrier(); },
        };
        for (const std::function<void()> &step : steps) {
            if (!fail.empty()) {
                return;
            }
            step();
        }
    }
};

/* A member: into its namespace, the team, every collective; then waits to be let go. */
int rank_main(int fd, void *arg)
{
    RankArgs   *a = static_cast<RankArgs *>(arg);
    Rank        r;
    std::string note;

    r.rank = a->rank;
    PEER_CHECK(axon_test_netns_enter(a->ns, (int)side_of(a->rank)) == 0,
               "rank %u: cannot enter %s: %s", a->rank, a->ns->name[side_of(a->rank)],
               strerror(errno));
    axon_status_t st = r.me.create(a->param->tls, a->param->config, 2);
    PEER_CHECK(st == AXON_OK, "rank %u: node: %s", a->rank, axon_status_string(st));
    std::vector<std::string> addrs;
    PEER_CHECK(r.me.exchange(fd, kRanks, &addrs), "rank %u: addresses", a->rank);
    st = r.me.join(addrs, a->rank);
    PEER_CHECK(st == AXON_OK, "rank %u: team: %s", a->rank, axon_status_string(st));
    PEER_CHECK(r.CheckLanes(a->ns->ifname), "rank %u: %s", a->rank, r.fail.c_str());
    r.EveryCollective();
    PEER_CHECK(r.fail.empty(), "rank %u: %s", a->rank, r.fail.c_str());
    PEER_CHECK(axon_test_send_blob(fd, "done", 4) == 0);
    /* Progressing until every member is done: one may still need our worker. */
    PEER_CHECK(wait_note(fd, r.me.node.worker, kRunTimeout, &note) && (note == "exit"),
               "rank %u: not let go", a->rank);
    st = axon_team_destroy(r.me.team);
    r.me.team = nullptr;
    PEER_CHECK(st == AXON_OK, "rank %u: team destroy: %s", a->rank, axon_status_string(st));
    return 0;
}

/* A note from a member within timeout (its worker is its own to progress). */
bool await_note(int fd, double timeout, std::string *note)
{
    struct pollfd pfd = {fd, POLLIN, 0};
    int           ms  = (int)(timeout * 1000);
    return (poll(&pfd, 1, ms) > 0) && recv_note(fd, note);
}

/* Members as processes: plain pass only (Variants), never valgrind (Xproc). */
class CollXproc : public ::testing::TestWithParam<CollParam> {
protected:
    Watchdog                      dog_{300};
    axon_test_netns_t             ns_    = {};
    std::vector<axon_test_peer_t> peers_ = std::vector<axon_test_peer_t>(kRanks, {-1, -1});

    void TearDown() override
    {
        for (axon_test_peer_t &p : peers_) {
            axon_test_peer_kill(&p);
        }
        axon_test_netns_destroy(&ns_);
    }
};

TEST_P(CollXproc, EveryCollectiveAcrossNamespaces)
{
    int ret = axon_test_netns_create(&ns_);
    if (ret > 0) {
        GTEST_SKIP() << "cannot create network namespaces here (needs root and ip(8))";
    }
    ASSERT_EQ(0, ret) << "creating the network namespaces failed";

    std::vector<RankArgs> args(kRanks);
    for (uint32_t r = 0; r < kRanks; ++r) {
        args[r] = {&GetParam(), &ns_, r};
        ASSERT_EQ(0, axon_test_peer_spawn(&peers_[r], rank_main, &args[r], kRunTimeout))
            << "fork of rank " << r;
    }
    std::vector<std::string> addrs(kRanks);
    ASSERT_EQ("", share_addresses(peers_, &addrs));

    bool all_done = true;
    for (uint32_t r = 0; (r < kRanks) && all_done; ++r) {
        std::string note;
        all_done = await_note(peers_[r].fd, kRunTimeout, &note) && (note == "done");
        EXPECT_TRUE(all_done) << "rank " << r << " did not finish its collectives";
        if (!all_done) {
            EXPECT_EQ(0, axon_test_peer_wait(&peers_[r], 5.0)) << "rank " << r << " failed";
        }
    }
    if (!all_done) {
        return;  /* the others are killed on the way out */
    }
    for (uint32_t r = 0; r < kRanks; ++r) {
        EXPECT_EQ(0, axon_test_send_blob(peers_[r].fd, "exit", 4)) << "rank " << r;
    }
    for (uint32_t r = 0; r < kRanks; ++r) {
        EXPECT_EQ(0, axon_test_peer_wait(&peers_[r], kProcOpTimeout)) << "rank " << r
                                                                       << " failed";
    }
}

const CollParam kNetnsLanes[] = {
    {"tcp_netns", "tcp", kRanks},
};

INSTANTIATE_TEST_SUITE_P(Variants, CollXproc, ::testing::ValuesIn(kNetnsLanes),
                         coll_param_name);

}  // namespace
