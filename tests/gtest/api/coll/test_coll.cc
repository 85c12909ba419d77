/*
 * Collectives, checked against references computed here: every collective
 * of api/axon_coll.h over every data type and operation that applies, with
 * counts 0, 1, odd and large (past the rendezvous threshold), every root,
 * uneven v-counts with zeros, the in-place forms, and a persistent
 * collective posted a thousand times. The members of a team are N workers
 * of this process (coll_env.h), for team sizes 1 to 8 over each lane.
 *
 * Reductions use small integers where they add or multiply, so every
 * result is exact whatever the order; one test checks with inexact values
 * that the result is the same bits on every member and every post.
 */
#include <gtest/gtest.h>

#include <string.h>

#include <string>
#include <vector>

#include "coll_env.h"
#include "log_capture.h"

namespace {

const size_t kOdd   = 13;
const size_t kLarge = (size_t)1 << 20;  /* bytes: past every lane's rendezvous threshold */

typedef std::vector<uint8_t> Bytes;

axon_coll_args_t make_args(axon_coll_type_t coll, const void *src, void *dst, size_t count,
                           axon_dt_t dt)
{
    axon_coll_args_t a = {};
    a.coll  = coll;
    a.src   = src;
    a.dst   = dst;
    a.count = count;
    a.dt    = dt;
    return a;
}

/* Non-NULL only for a buffer that holds something (count 0 passes NULL: nothing to point at). */
void *data_or_null(Bytes &b)
{
    return b.empty() ? nullptr : b.data();
}

std::vector<size_t> displs_of(const std::vector<size_t> &counts, size_t gap, bool reverse)
{
    std::vector<size_t> d(counts.size());
    size_t              at = 0;
    for (size_t k = 0; k < counts.size(); ++k) {
        size_t i = reverse ? counts.size() - 1 - k : k;
        d[i] = at;
        at  += counts[i] + gap;
    }
    return d;
}

size_t extent_of(const std::vector<size_t> &counts, const std::vector<size_t> &displs)
{
    size_t end = 0;
    for (size_t i = 0; i < counts.size(); ++i) {
        end = std::max(end, displs[i] + counts[i]);
    }
    return end;
}

const uint8_t kSentinel = 0xA5;

/* Where got first differs from want, for the failure message. */
std::string where_differs(const Bytes &want, const Bytes &got)
{
    if (want.size() != got.size()) {
        return "sizes " + std::to_string(want.size()) + " and " + std::to_string(got.size());
    }
    for (size_t i = 0; i < want.size(); ++i) {
        if (want[i] != got[i]) {
            char text[96];
            snprintf(text, sizeof(text), "byte %zu of %zu is 0x%02x, not 0x%02x", i, got.size(),
                     got[i], want[i]);
            return text;
        }
    }
    return "same";
}

class Coll : public CollTeamTest {
protected:
    Watchdog dog_{600};

    void SetUp() override { MakeTeam(AXON_FEATURE_COLL); }

    axon_team_h team(uint32_t m) const { return g_.teams[m]; }

    /* Init on every member, post, wait, free: true if every member's status is AXON_OK. */
    bool Run(const std::vector<axon_coll_args_t> &args, const std::string &what)
    {
        std::vector<axon_coll_h> colls(n_, nullptr);
        bool                     ok = true;
        for (uint32_t m = 0; m < n_; ++m) {
            axon_status_t st = axon_coll_init(team(m), &args[m], &colls[m]);
            EXPECT_EQ(AXON_OK, st) << what << ", member " << m << ": "
                                   << axon_status_string(st);
            ok = ok && (st == AXON_OK);
        }
        if (ok) {
            std::vector<axon_status_t> st;
            bool done = m_.post_and_wait(colls, &st);
            EXPECT_TRUE(done) << what << ": not done within " << kCollTimeout << " s";
            for (uint32_t m = 0; m < n_; ++m) {
                EXPECT_EQ(AXON_OK, st[m]) << what << ", member " << m << ": "
                                          << axon_status_string(st[m]);
                ok = ok && (st[m] == AXON_OK);
            }
            if (!done) {
                g_.colls.insert(g_.colls.end(), colls.begin(), colls.end());
                return false;  /* still running: the guard reports it */
            }
        }
        for (axon_coll_h c : colls) {
            if (c != nullptr) {
                EXPECT_EQ(AXON_OK, axon_coll_free(c)) << what;
            }
        }
        return ok;
    }

    /* Every member's count-element input for (dt, op), seeded by seed. */
    std::vector<Bytes> Inputs(size_t count, axon_dt_t dt, axon_op_t op, uint64_t seed)
    {
        std::vector<Bytes> in(n_, Bytes(count * dt_info(dt).size));
        for (uint32_t m = 0; m < n_; ++m) {
            fill_input(in[m].data(), count, dt, op, m, seed);
        }
        return in;
    }

    /* The reduction of every member's elements [first, first + count) of in. */
    Bytes Reference(const std::vector<Bytes> &in, size_t first, size_t count, axon_dt_t dt,
                    axon_op_t op)
    {
        size_t size = dt_info(dt).size;
        Bytes  ref(in[0].begin() + first * size, in[0].begin() + (first + count) * size);
        for (uint32_t m = 1; m < n_; ++m) {
            reduce_into(ref.data(), in[m].data() + first * size, count, dt, op);
        }
        return ref;
    }

    void ExpectSame(const void *want, const void *got, size_t count, axon_dt_t dt,
                    const std::string &what)
    {
        ssize_t bad = first_diff(want, got, count, dt);
        EXPECT_EQ(-1, bad) << what << ": element " << bad << " of " << count
                           << " differs from the reference";
    }

    void Allreduce(size_t count, axon_dt_t dt, axon_op_t op, bool in_place, uint64_t seed);
    void Reduce(size_t count, axon_dt_t dt, axon_op_t op, uint32_t root, bool in_place,
                uint64_t seed);
    void ReduceScatter(const std::vector<size_t> *counts, size_t count, axon_dt_t dt,
                       axon_op_t op, bool in_place, uint64_t seed);
    void Bcast(size_t count, axon_dt_t dt, uint32_t root, uint64_t seed);
    void Allgather(size_t count, bool in_place, uint64_t seed);
    void Allgatherv(const std::vector<size_t> &counts, bool in_place, uint64_t seed);
    void Alltoall(size_t count, bool in_place, uint64_t seed);
    void Alltoallv(const std::vector<std::vector<size_t>> &counts, bool in_place,
                   uint64_t seed);
    void Gather(size_t count, uint32_t root, bool in_place, uint64_t seed);
    void Scatter(size_t count, uint32_t root, bool in_place, uint64_t seed);
};

std::string what_of(const char *coll, axon_dt_t dt, axon_op_t op, size_t count,
                    bool in_place, int root = -1)
{
    std::string s = std::string(coll) + " " + combo_name(dt, op) + " count " +
                    std::to_string(count);
    if (root >= 0) {
        s += " root " + std::to_string(root);
    }
    return in_place ? s + " in place" : s;
}

/* ---------------------------------------------------------------- reductions */

void Coll::Allreduce(size_t count, axon_dt_t dt, axon_op_t op, bool in_place, uint64_t seed)
{
    std::string        what = what_of("allreduce", dt, op, count, in_place);
    std::vector<Bytes> in   = Inputs(count, dt, op, seed);
    std::vector<Bytes> out(n_, Bytes(count * dt_info(dt).size, kSentinel));
    std::vector<axon_coll_args_t> args(n_);
    for (uint32_t m = 0; m < n_; ++m) {
        if (in_place) {
            out[m] = in[m];
        }
        args[m] = make_args(AXON_COLL_ALLREDUCE, in_place ? nullptr : data_or_null(in[m]),
                            data_or_null(out[m]), count, dt);
        args[m].field_mask = AXON_COLL_ARG_OP | (in_place ? AXON_COLL_ARG_FLAGS : 0);
        args[m].op         = op;
        args[m].flags      = in_place ? AXON_COLL_FLAG_IN_PLACE : 0;
    }
    ASSERT_TRUE(Run(args, what));
    Bytes ref = Reference(in, 0, count, dt, op);
    for (uint32_t m = 0; m < n_; ++m) {
        ExpectSame(ref.data(), out[m].data(), count, dt, what + ", member " + std::to_string(m));
    }
}

void Coll::Reduce(size_t count, axon_dt_t dt, axon_op_t op, uint32_t root, bool in_place,
                  uint64_t seed)
{
    std::string        what = what_of("reduce", dt, op, count, in_place, root);
    std::vector<Bytes> in   = Inputs(count, dt, op, seed);
    Bytes              out(count * dt_info(dt).size, kSentinel);
    std::vector<Bytes> scratch(n_, Bytes(count * dt_info(dt).size, kSentinel));
    std::vector<axon_coll_args_t> args(n_);
    if (in_place) {
        out = in[root];
    }
    for (uint32_t m = 0; m < n_; ++m) {
        bool place = in_place && (m == root);  /* the flag is the root's alone */
        args[m] = make_args(AXON_COLL_REDUCE, place ? nullptr : data_or_null(in[m]),
                            m == root ? data_or_null(out) : data_or_null(scratch[m]), count, dt);
        args[m].field_mask = AXON_COLL_ARG_OP | AXON_COLL_ARG_ROOT |
                             (place ? AXON_COLL_ARG_FLAGS : 0);
        args[m].op    = op;
        args[m].root  = root;
        args[m].flags = place ? AXON_COLL_FLAG_IN_PLACE : 0;
    }
    ASSERT_TRUE(Run(args, what));
    Bytes ref = Reference(in, 0, count, dt, op);
    ExpectSame(ref.data(), out.data(), count, dt, what);
    for (uint32_t m = 0; m < n_; ++m) {
        /* Inputs are read only. */
        Bytes again(count * dt_info(dt).size);
        fill_input(again.data(), count, dt, op, m, seed);
        if (!(in_place && (m == root))) {
            EXPECT_TRUE(again == in[m]) << what << ": member " << m << "'s src was written";
        }
    }
}

void Coll::ReduceScatter(const std::vector<size_t> *counts, size_t count, axon_dt_t dt,
                         axon_op_t op, bool in_place, uint64_t seed)
{
    size_t              size = dt_info(dt).size;
    std::vector<size_t> c    = counts ? *counts : std::vector<size_t>(n_, count);
    std::vector<size_t> first(n_, 0);
    size_t              total = 0;
    for (uint32_t m = 0; m < n_; ++m) {
        first[m] = total;
        total   += c[m];
    }
    std::string what = what_of(counts ? "reduce_scatter (dst_counts)" : "reduce_scatter", dt, op,
                               counts ? total : count, in_place);
    std::vector<Bytes> in = Inputs(total, dt, op, seed);
    std::vector<Bytes> out(n_);
    std::vector<axon_coll_args_t> args(n_);
    for (uint32_t m = 0; m < n_; ++m) {
        out[m]  = in_place ? in[m] : Bytes(c[m] * size, kSentinel);
        args[m] = make_args(AXON_COLL_REDUCE_SCATTER, in_place ? nullptr : data_or_null(in[m]),
                            data_or_null(out[m]), counts ? 0 : count, dt);
        args[m].field_mask = AXON_COLL_ARG_OP | (counts ? AXON_COLL_ARG_COUNTS : 0) |
                             (in_place ? AXON_COLL_ARG_FLAGS : 0);
        args[m].op         = op;
        args[m].dst_counts = counts ? counts->data() : nullptr;
        args[m].flags      = in_place ? AXON_COLL_FLAG_IN_PLACE : 0;
    }
    ASSERT_TRUE(Run(args, what));
    for (uint32_t m = 0; m < n_; ++m) {
        Bytes ref = Reference(in, first[m], c[m], dt, op);
        ExpectSame(ref.data(), out[m].data(), c[m], dt, what + ", member " + std::to_string(m));
    }
}

/* Every operation on every type it applies to, counts 0, 1 and odd. */
TEST_P(Coll, AllreduceEveryTypeAndOperation)
{
    uint64_t seed = 1;
    for (const DtInfo &d : kDts) {
        for (int op = 0; op < AXON_OP_LAST; ++op) {
            if (!op_applies((axon_op_t)op, d.dt)) {
                continue;
            }
            for (size_t count : {(size_t)0, (size_t)1, kOdd}) {
                Allreduce(count, d.dt, (axon_op_t)op, false, seed++);
                ASSERT_FALSE(HasFatalFailure());
            }
        }
    }
}

TEST_P(Coll, AllreduceLarge)
{
    Allreduce(kLarge / sizeof(double), AXON_DT_DOUBLE, AXON_OP_SUM, false, 7);
    ASSERT_FALSE(HasFatalFailure());
    Allreduce(kLarge / sizeof(DoubleInt), AXON_DT_DOUBLE_INT32, AXON_OP_MAXLOC, false, 8);
    ASSERT_FALSE(HasFatalFailure());
    Allreduce(kLarge / 4 + 3, AXON_DT_UINT32, AXON_OP_BXOR, true, 9);
}

TEST_P(Coll, AllreduceInPlace)
{
    uint64_t seed = 100;
    for (const DtInfo &d : kDts) {
        for (int op = 0; op < AXON_OP_LAST; ++op) {
            if (op_applies((axon_op_t)op, d.dt)) {
                Allreduce(kOdd, d.dt, (axon_op_t)op, true, seed++);
                ASSERT_FALSE(HasFatalFailure());
            }
        }
    }
}

/* Every combination once, the root turning with them; then every root for a few counts. */
TEST_P(Coll, ReduceEveryTypeOperationAndRoot)
{
    uint64_t seed = 200;
    uint32_t k    = 0;
    for (const DtInfo &d : kDts) {
        for (int op = 0; op < AXON_OP_LAST; ++op) {
            if (op_applies((axon_op_t)op, d.dt)) {
                Reduce(kOdd, d.dt, (axon_op_t)op, k++ % n_, false, seed++);
                ASSERT_FALSE(HasFatalFailure());
            }
        }
    }
    for (uint32_t root = 0; root < n_; ++root) {
        for (size_t count : {(size_t)0, (size_t)1, kOdd}) {
            Reduce(count, AXON_DT_INT32, AXON_OP_SUM, root, false, seed++);
            ASSERT_FALSE(HasFatalFailure());
            Reduce(count, AXON_DT_FLOAT_INT32, AXON_OP_MINLOC, root, false, seed++);
            ASSERT_FALSE(HasFatalFailure());
        }
    }
    Reduce(kLarge / sizeof(double), AXON_DT_DOUBLE, AXON_OP_SUM, n_ - 1, false, seed++);
}

TEST_P(Coll, ReduceInPlaceAtEveryRoot)
{
    uint64_t seed = 300;
    for (uint32_t root = 0; root < n_; ++root) {
        Reduce(kOdd, AXON_DT_INT64, AXON_OP_PROD, root, true, seed++);
        ASSERT_FALSE(HasFatalFailure());
        Reduce(kOdd, AXON_DT_DOUBLE_INT32, AXON_OP_MAXLOC, root, true, seed++);
        ASSERT_FALSE(HasFatalFailure());
    }
}

TEST_P(Coll, ReduceScatterBlocks)
{
    uint64_t seed = 400;
    for (const DtInfo &d : kDts) {
        for (int op = 0; op < AXON_OP_LAST; ++op) {
            if (op_applies((axon_op_t)op, d.dt)) {
                ReduceScatter(nullptr, 3, d.dt, (axon_op_t)op, false, seed++);
                ASSERT_FALSE(HasFatalFailure());
            }
        }
    }
    for (size_t count : {(size_t)0, (size_t)1, kOdd, kLarge / 4 / n_ + 1}) {
        ReduceScatter(nullptr, count, AXON_DT_INT32, AXON_OP_SUM, false, seed++);
        ASSERT_FALSE(HasFatalFailure());
    }
}

/* dst_counts: uneven, with zeros (member 1's block empty, and more). */
std::vector<size_t> uneven_counts(uint32_t n, size_t scale)
{
    std::vector<size_t> c(n);
    for (uint32_t i = 0; i < n; ++i) {
        c[i] = (i % 3 == 1) ? 0 : (i * 5 + 2) * scale;
    }
    return c;
}

TEST_P(Coll, ReduceScatterDstCounts)
{
    std::vector<size_t> c = uneven_counts(n_, 1);
    std::vector<size_t> zeros(n_, 0);
    uint64_t            seed = 500;
    const std::pair<axon_dt_t, axon_op_t> combos[] = {
        {AXON_DT_INT32, AXON_OP_SUM},        {AXON_DT_DOUBLE, AXON_OP_MAX},
        {AXON_DT_UINT8, AXON_OP_BXOR},       {AXON_DT_INT16, AXON_OP_LOR},
        {AXON_DT_INT64_INT32, AXON_OP_MINLOC}, {AXON_DT_FLOAT, AXON_OP_PROD},
    };
    for (auto &cb : combos) {
        ReduceScatter(&c, 0, cb.first, cb.second, false, seed++);
        ASSERT_FALSE(HasFatalFailure());
    }
    ReduceScatter(&zeros, 0, AXON_DT_INT32, AXON_OP_SUM, false, seed++);
    ASSERT_FALSE(HasFatalFailure());
    std::vector<size_t> big = uneven_counts(n_, kLarge / 8 / (5 * n_ + 2) + 1);
    ReduceScatter(&big, 0, AXON_DT_DOUBLE, AXON_OP_SUM, false, seed++);
}

TEST_P(Coll, ReduceScatterInPlace)
{
    std::vector<size_t> c = uneven_counts(n_, 2);
    ReduceScatter(nullptr, kOdd, AXON_DT_INT32, AXON_OP_SUM, true, 600);
    ASSERT_FALSE(HasFatalFailure());
    ReduceScatter(&c, 0, AXON_DT_DOUBLE_INT32, AXON_OP_MINLOC, true, 601);
}

/*
 * Inexact values (random doubles and floats): every member gets the same
 * bits, and so does every post of the same collective.
 */
TEST_P(Coll, ReductionIsBitIdenticalAcrossMembersAndPosts)
{
    const size_t count = 1001;
    for (axon_dt_t dt : {AXON_DT_DOUBLE, AXON_DT_FLOAT}) {
        std::vector<Bytes> in(n_, Bytes(count * dt_info(dt).size));
        std::vector<Bytes> out(n_, Bytes(count * dt_info(dt).size));
        std::vector<axon_coll_h> colls(n_, nullptr);
        for (uint32_t m = 0; m < n_; ++m) {
            for (size_t i = 0; i < count; ++i) {
                double v = (double)(mix(77, m, i) >> 11) * 0x1p-53 * 3.3 - 1.1;  /* inexact */
                if (dt == AXON_DT_DOUBLE) {
                    reinterpret_cast<double *>(in[m].data())[i] = v * 1e-3 * (double)(m + 1);
                } else {
                    reinterpret_cast<float *>(in[m].data())[i] = (float)(v * (m + 1));
                }
            }
            axon_coll_args_t a = make_args(AXON_COLL_ALLREDUCE, in[m].data(), out[m].data(),
                                           count, dt);
            a.field_mask = AXON_COLL_ARG_OP;
            a.op         = AXON_OP_SUM;
            ASSERT_EQ(AXON_OK, axon_coll_init(team(m), &a, &colls[m]));
            g_.colls.push_back(colls[m]);
        }
        Bytes first;
        for (int post = 0; post < 5; ++post) {
            std::vector<axon_status_t> st;
            ASSERT_TRUE(m_.post_and_wait(colls, &st)) << "post " << post;
            for (uint32_t m = 0; m < n_; ++m) {
                ASSERT_EQ(AXON_OK, st[m]) << axon_status_string(st[m]);
                if (first.empty()) {
                    first = out[m];
                }
                EXPECT_TRUE(out[m] == first) << dt_info(dt).name << ": member " << m
                                             << ", post " << post << " got other bits";
            }
            for (Bytes &o : out) {
                std::fill(o.begin(), o.end(), kSentinel);
            }
        }
    }
}

/* One allreduce initialized once, posted 1000 times with new input each time. */
TEST_P(Coll, PersistentAllreducePostedThousandTimes)
{
    const size_t             count = 4;
    std::vector<Bytes>       in(n_, Bytes(count * 8)), out(n_, Bytes(count * 8));
    std::vector<axon_coll_h> colls(n_, nullptr);
    for (uint32_t m = 0; m < n_; ++m) {
        axon_coll_args_t a = make_args(AXON_COLL_ALLREDUCE, in[m].data(), out[m].data(), count,
                                       AXON_DT_INT64);
        a.field_mask = AXON_COLL_ARG_OP;
        a.op         = AXON_OP_SUM;
        ASSERT_EQ(AXON_OK, axon_coll_init(team(m), &a, &colls[m]));
        g_.colls.push_back(colls[m]);
    }
    for (int post = 0; post < 1000; ++post) {
        for (uint32_t m = 0; m < n_; ++m) {
            fill_input(in[m].data(), count, AXON_DT_INT64, AXON_OP_SUM, m, 1000 + post);
        }
        std::vector<axon_status_t> st;
        ASSERT_TRUE(m_.post_and_wait(colls, &st)) << "post " << post;
        Bytes ref = Reference(in, 0, count, AXON_DT_INT64, AXON_OP_SUM);
        for (uint32_t m = 0; m < n_; ++m) {
            ASSERT_EQ(AXON_OK, st[m]) << "post " << post << ": " << axon_status_string(st[m]);
            ASSERT_EQ(-1, first_diff(ref.data(), out[m].data(), count, AXON_DT_INT64))
                << "post " << post << ", member " << m;
        }
    }
}

/* ---------------------------------------------------------------- barrier */

/* No member leaves the barrier before the last one entered it. */
TEST_P(Coll, BarrierWaitsForEveryMember)
{
    std::vector<axon_coll_h> colls(n_, nullptr);
    for (uint32_t m = 0; m < n_; ++m) {
        axon_coll_args_t a = make_args(AXON_COLL_BARRIER, nullptr, nullptr, 0, AXON_DT_UINT8);
        ASSERT_EQ(AXON_OK, axon_coll_init(team(m), &a, &colls[m]));
        g_.colls.push_back(colls[m]);
    }
    for (uint32_t last : {n_ - 1, 0u, n_ / 2}) {
        std::vector<axon_status_t> st(n_, AXON_INPROGRESS);
        for (uint32_t m = 0; m < n_; ++m) {
            if (m != last) {
                axon_status_t s = axon_coll_post(colls[m]);
                ASSERT_TRUE((s == AXON_OK) || (s == AXON_INPROGRESS)) << axon_status_string(s);
            }
        }
        m_.progress_for(0.02);
        for (uint32_t m = 0; m < n_; ++m) {
            if (m != last) {
                EXPECT_EQ(AXON_INPROGRESS, axon_coll_test(colls[m]))
                    << "member " << m << " left the barrier before member " << last
                    << " entered it";
            }
        }
        axon_status_t s = axon_coll_post(colls[last]);
        ASSERT_TRUE((s == AXON_OK) || (s == AXON_INPROGRESS)) << axon_status_string(s);
        ASSERT_TRUE(m_.wait_colls(colls, &st)) << "barrier not done, last " << last;
        for (uint32_t m = 0; m < n_; ++m) {
            EXPECT_EQ(AXON_OK, st[m]) << "member " << m;
        }
    }
}

/* ---------------------------------------------------------------- data movement */

void Coll::Bcast(size_t count, axon_dt_t dt, uint32_t root, uint64_t seed)
{
    size_t             bytes = count * dt_info(dt).size;
    std::string        what  = what_of("bcast", dt, AXON_OP_SUM, count, false, root);
    std::vector<Bytes> buf(n_, Bytes(bytes, kSentinel));
    std::vector<axon_coll_args_t> args(n_);
    axon_test_fill(buf[root].data(), bytes, seed);
    for (uint32_t m = 0; m < n_; ++m) {
        args[m] = make_args(AXON_COLL_BCAST, nullptr, data_or_null(buf[m]), count, dt);
        args[m].field_mask = AXON_COLL_ARG_ROOT;
        args[m].root       = root;
    }
    ASSERT_TRUE(Run(args, what));
    for (uint32_t m = 0; m < n_; ++m) {
        EXPECT_EQ(-1, axon_test_check(buf[m].data(), bytes, seed)) << what << ", member " << m;
    }
}

TEST_P(Coll, BcastFromEveryRoot)
{
    uint64_t seed = 700;
    for (uint32_t root = 0; root < n_; ++root) {
        for (size_t count : {(size_t)0, (size_t)1, kOdd, kLarge + 1}) {
            Bcast(count, AXON_DT_UINT8, root, seed++);
            ASSERT_FALSE(HasFatalFailure());
        }
        Bcast(kOdd, AXON_DT_DOUBLE_INT32, root, seed++);
        ASSERT_FALSE(HasFatalFailure());
    }
}

void Coll::Allgather(size_t count, bool in_place, uint64_t seed)
{
    std::string        what = what_of("allgather", AXON_DT_INT16, AXON_OP_SUM, count, in_place);
    size_t             blk  = count * 2;
    std::vector<Bytes> in(n_, Bytes(blk)), out(n_, Bytes(blk * n_, kSentinel));
    std::vector<axon_coll_args_t> args(n_);
    for (uint32_t m = 0; m < n_; ++m) {
        axon_test_fill(in[m].data(), blk, seed + m);
        if (in_place) {
            memcpy(out[m].data() + m * blk, in[m].data(), blk);
        }
        args[m] = make_args(AXON_COLL_ALLGATHER, in_place ? nullptr : data_or_null(in[m]),
                            data_or_null(out[m]), count, AXON_DT_INT16);
        args[m].field_mask = in_place ? AXON_COLL_ARG_FLAGS : 0;
        args[m].flags      = in_place ? AXON_COLL_FLAG_IN_PLACE : 0;
    }
    ASSERT_TRUE(Run(args, what));
    for (uint32_t m = 0; m < n_; ++m) {
        for (uint32_t j = 0; j < n_; ++j) {
            EXPECT_EQ(-1, axon_test_check(out[m].data() + j * blk, blk, seed + j))
                << what << ": member " << m << ", block of " << j;
        }
    }
}

TEST_P(Coll, AllgatherCounts)
{
    uint64_t seed = 800;
    for (size_t count : {(size_t)0, (size_t)1, kOdd, kLarge / 2 / n_ + 1}) {
        Allgather(count, false, seed);
        seed += 100;
        ASSERT_FALSE(HasFatalFailure());
        Allgather(count, true, seed);
        seed += 100;
        ASSERT_FALSE(HasFatalFailure());
    }
}

void Coll::Allgatherv(const std::vector<size_t> &counts, bool in_place, uint64_t seed)
{
    std::string         what   = std::string("allgatherv") + (in_place ? " in place" : "");
    std::vector<size_t> displs = displs_of(counts, 3, true);
    size_t              extent = extent_of(counts, displs) * 4;
    std::vector<Bytes>  in(n_), out(n_, Bytes(extent, kSentinel));
    std::vector<axon_coll_args_t> args(n_);
    for (uint32_t m = 0; m < n_; ++m) {
        in[m].resize(counts[m] * 4);
        axon_test_fill(in[m].data(), in[m].size(), seed + m);
        if (in_place) {
            memcpy(out[m].data() + displs[m] * 4, in[m].data(), in[m].size());
        }
        args[m] = make_args(AXON_COLL_ALLGATHERV, in_place ? nullptr : data_or_null(in[m]),
                            data_or_null(out[m]), counts[m], AXON_DT_FLOAT);
        args[m].field_mask = AXON_COLL_ARG_COUNTS | (in_place ? AXON_COLL_ARG_FLAGS : 0);
        args[m].dst_counts = counts.data();
        args[m].dst_displs = displs.data();
        args[m].flags      = in_place ? AXON_COLL_FLAG_IN_PLACE : 0;
    }
    ASSERT_TRUE(Run(args, what));
    for (uint32_t m = 0; m < n_; ++m) {
        Bytes want(extent, kSentinel);  /* the gaps between blocks untouched */
        for (uint32_t j = 0; j < n_; ++j) {
            axon_test_fill(want.data() + displs[j] * 4, counts[j] * 4, seed + j);
        }
        EXPECT_TRUE(want == out[m]) << what << ": member " << m << "'s dst: "
                                    << where_differs(want, out[m]);
    }
}

TEST_P(Coll, AllgathervUnevenCountsWithZeros)
{
    std::vector<size_t> zeros(n_, 0);
    Allgatherv(uneven_counts(n_, 1), false, 900);
    ASSERT_FALSE(HasFatalFailure());
    Allgatherv(uneven_counts(n_, 1), true, 910);
    ASSERT_FALSE(HasFatalFailure());
    Allgatherv(zeros, false, 920);
    ASSERT_FALSE(HasFatalFailure());
    Allgatherv(uneven_counts(n_, kLarge / 4 / (5 * n_ + 2) + 1), false, 930);
}

/* Block j of member m's alltoall input: seeded by (m, j). */
uint64_t block_seed(uint64_t seed, uint32_t from, uint32_t to)
{
    return seed + from * 64 + to;
}

void Coll::Alltoall(size_t count, bool in_place, uint64_t seed)
{
    std::string        what = what_of("alltoall", AXON_DT_INT32, AXON_OP_SUM, count, in_place);
    size_t             blk  = count * 4;
    std::vector<Bytes> in(n_, Bytes(blk * n_)), out(n_, Bytes(blk * n_, kSentinel));
    std::vector<axon_coll_args_t> args(n_);
    for (uint32_t m = 0; m < n_; ++m) {
        for (uint32_t j = 0; j < n_; ++j) {
            axon_test_fill(in[m].data() + j * blk, blk, block_seed(seed, m, j));
        }
        if (in_place) {
            out[m] = in[m];
        }
        args[m] = make_args(AXON_COLL_ALLTOALL, in_place ? nullptr : data_or_null(in[m]),
                            data_or_null(out[m]), count, AXON_DT_INT32);
        args[m].field_mask = in_place ? AXON_COLL_ARG_FLAGS : 0;
        args[m].flags      = in_place ? AXON_COLL_FLAG_IN_PLACE : 0;
    }
    ASSERT_TRUE(Run(args, what));
    for (uint32_t m = 0; m < n_; ++m) {
        for (uint32_t j = 0; j < n_; ++j) {
            EXPECT_EQ(-1, axon_test_check(out[m].data() + j * blk, blk, block_seed(seed, j, m)))
                << what << ": member " << m << ", block from " << j;
        }
    }
}

TEST_P(Coll, AlltoallCounts)
{
    uint64_t seed = 1000;
    for (size_t count : {(size_t)0, (size_t)1, kOdd, kLarge / 4 / n_ + 1}) {
        Alltoall(count, false, seed);
        seed += 1000;
        ASSERT_FALSE(HasFatalFailure());
        Alltoall(count, true, seed);
        seed += 1000;
        ASSERT_FALSE(HasFatalFailure());
    }
}

/*
 * counts[m][j]: elements member m sends to j (so j receives counts[m][j]
 * from m). Blocks laid out in reverse member order with gaps.
 */
void Coll::Alltoallv(const std::vector<std::vector<size_t>> &counts, bool in_place,
                     uint64_t seed)
{
    std::string what = std::string("alltoallv") + (in_place ? " in place" : "");
    std::vector<std::vector<size_t>> sc(n_), sd(n_), dc(n_, std::vector<size_t>(n_)), dd(n_);
    std::vector<Bytes>               in(n_), out(n_);
    std::vector<axon_coll_args_t>    args(n_);
    for (uint32_t m = 0; m < n_; ++m) {
        for (uint32_t j = 0; j < n_; ++j) {
            dc[m][j] = counts[j][m];
        }
    }
    for (uint32_t m = 0; m < n_; ++m) {
        sc[m] = counts[m];
        sd[m] = displs_of(sc[m], 1, true);
        dd[m] = displs_of(dc[m], 2, false);
        if (in_place) {  /* symmetric counts: dst's layout is the input's too */
            sc[m] = dc[m];
            sd[m] = dd[m];
        }
        in[m].assign(extent_of(sc[m], sd[m]) * 8, kSentinel);
        for (uint32_t j = 0; j < n_; ++j) {
            axon_test_fill(in[m].data() + sd[m][j] * 8, sc[m][j] * 8, block_seed(seed, m, j));
        }
        out[m] = in_place ? in[m] : Bytes(extent_of(dc[m], dd[m]) * 8, kSentinel);
        args[m] = make_args(AXON_COLL_ALLTOALLV, in_place ? nullptr : data_or_null(in[m]),
                            data_or_null(out[m]), 0, AXON_DT_UINT64);
        args[m].field_mask = AXON_COLL_ARG_COUNTS | (in_place ? AXON_COLL_ARG_FLAGS : 0);
        args[m].src_counts = sc[m].data();
        args[m].src_displs = sd[m].data();
        args[m].dst_counts = dc[m].data();
        args[m].dst_displs = dd[m].data();
        args[m].flags      = in_place ? AXON_COLL_FLAG_IN_PLACE : 0;
    }
    ASSERT_TRUE(Run(args, what));
    for (uint32_t m = 0; m < n_; ++m) {
        Bytes want(out[m].size(), kSentinel);
        for (uint32_t j = 0; j < n_; ++j) {
            axon_test_fill(want.data() + dd[m][j] * 8, dc[m][j] * 8, block_seed(seed, j, m));
        }
        EXPECT_TRUE(want == out[m]) << what << ": member " << m << "'s dst: "
                                    << where_differs(want, out[m]);
    }
}

TEST_P(Coll, AlltoallvUnevenCountsWithZeros)
{
    std::vector<std::vector<size_t>> uneven(n_, std::vector<size_t>(n_));
    std::vector<std::vector<size_t>> sym(n_, std::vector<size_t>(n_));
    std::vector<std::vector<size_t>> big(n_, std::vector<size_t>(n_));
    std::vector<std::vector<size_t>> zeros(n_, std::vector<size_t>(n_, 0));
    for (uint32_t m = 0; m < n_; ++m) {
        for (uint32_t j = 0; j < n_; ++j) {
            uneven[m][j] = (m + 2 * j) % 4 == 1 ? 0 : (m * 3 + j) % 7 + 1;
            sym[m][j]    = (m + j) % 3 == 2 ? 0 : m + j + 1;
            big[m][j]    = (m == j + 1) ? 0 : (kLarge / 8 / n_) * ((m + j) % 3 + 1) / 2;
        }
    }
    Alltoallv(uneven, false, 1100);
    ASSERT_FALSE(HasFatalFailure());
    Alltoallv(sym, false, 1200);
    ASSERT_FALSE(HasFatalFailure());
    Alltoallv(zeros, false, 1300);
    ASSERT_FALSE(HasFatalFailure());
    Alltoallv(big, false, 1400);
}

/* In place, dst laid out with gaps (counts symmetric, as in place needs). */
TEST_P(Coll, AlltoallvInPlace)
{
    std::vector<std::vector<size_t>> sym(n_, std::vector<size_t>(n_));
    for (uint32_t m = 0; m < n_; ++m) {
        for (uint32_t j = 0; j < n_; ++j) {
            sym[m][j] = (m + j) % 3 == 2 ? 0 : m + j + 1;
        }
    }
    Alltoallv(sym, true, 1500);
}

void Coll::Gather(size_t count, uint32_t root, bool in_place, uint64_t seed)
{
    std::string what = what_of("gather", AXON_DT_UINT16, AXON_OP_SUM, count, in_place, root);
    size_t      blk  = count * 2;
    std::vector<Bytes> in(n_, Bytes(blk)), scratch(n_, Bytes(blk * n_, kSentinel));
    Bytes              out(blk * n_, kSentinel);
    std::vector<axon_coll_args_t> args(n_);
    for (uint32_t m = 0; m < n_; ++m) {
        axon_test_fill(in[m].data(), blk, seed + m);
    }
    if (in_place) {
        memcpy(out.data() + root * blk, in[root].data(), blk);
    }
    for (uint32_t m = 0; m < n_; ++m) {
        bool place = in_place && (m == root);
        args[m] = make_args(AXON_COLL_GATHER, place ? nullptr : data_or_null(in[m]),
                            m == root ? data_or_null(out) : data_or_null(scratch[m]), count,
                            AXON_DT_UINT16);
        args[m].field_mask = AXON_COLL_ARG_ROOT | (place ? AXON_COLL_ARG_FLAGS : 0);
        args[m].root       = root;
        args[m].flags      = place ? AXON_COLL_FLAG_IN_PLACE : 0;
    }
    ASSERT_TRUE(Run(args, what));
    for (uint32_t j = 0; j < n_; ++j) {
        EXPECT_EQ(-1, axon_test_check(out.data() + j * blk, blk, seed + j))
            << what << ": block of " << j;
    }
}

void Coll::Scatter(size_t count, uint32_t root, bool in_place, uint64_t seed)
{
    std::string what = what_of("scatter", AXON_DT_UINT16, AXON_OP_SUM, count, in_place, root);
    size_t      blk  = count * 2;
    Bytes       in(blk * n_);
    std::vector<Bytes> out(n_, Bytes(blk, kSentinel));
    std::vector<axon_coll_args_t> args(n_);
    for (uint32_t j = 0; j < n_; ++j) {
        axon_test_fill(in.data() + j * blk, blk, seed + j);
    }
    Bytes sent = in;
    for (uint32_t m = 0; m < n_; ++m) {
        bool place = in_place && (m == root);
        args[m] = make_args(AXON_COLL_SCATTER, m == root ? data_or_null(in) : nullptr,
                            place ? nullptr : data_or_null(out[m]), count, AXON_DT_UINT16);
        args[m].field_mask = AXON_COLL_ARG_ROOT | (place ? AXON_COLL_ARG_FLAGS : 0);
        args[m].root       = root;
        args[m].flags      = place ? AXON_COLL_FLAG_IN_PLACE : 0;
    }
    ASSERT_TRUE(Run(args, what));
    for (uint32_t m = 0; m < n_; ++m) {
        if (in_place && (m == root)) {
            EXPECT_TRUE(Bytes(blk, kSentinel) == out[m]) << what << ": the root's dst written";
            continue;
        }
        EXPECT_EQ(-1, axon_test_check(out[m].data(), blk, seed + m)) << what << ", member " << m;
    }
    EXPECT_TRUE(sent == in) << what << ": the root's src was written";
}

TEST_P(Coll, GatherAtEveryRoot)
{
    uint64_t seed = 1500;
    for (uint32_t root = 0; root < n_; ++root) {
        for (size_t count : {(size_t)0, (size_t)1, kOdd, kLarge / 2 / n_ + 1}) {
            Gather(count, root, false, seed);
            seed += 16;
            ASSERT_FALSE(HasFatalFailure());
        }
        Gather(kOdd, root, true, seed);
        seed += 16;
        ASSERT_FALSE(HasFatalFailure());
    }
}

TEST_P(Coll, ScatterFromEveryRoot)
{
    uint64_t seed = 1600;
    for (uint32_t root = 0; root < n_; ++root) {
        for (size_t count : {(size_t)0, (size_t)1, kOdd, kLarge / 2 / n_ + 1}) {
            Scatter(count, root, false, seed);
            seed += 16;
            ASSERT_FALSE(HasFatalFailure());
        }
        Scatter(kOdd, root, true, seed);
        seed += 16;
        ASSERT_FALSE(HasFatalFailure());
    }
}

/* Buffers only the root uses may be NULL elsewhere (reduce's and gather's dst, scatter's src). */
TEST_P(Coll, NonRootBuffersMayBeNull)
{
    uint32_t           root = n_ / 2;
    std::vector<Bytes> in(n_, Bytes(kOdd * 4));
    Bytes              out(kOdd * 4 * n_, kSentinel);
    std::vector<axon_coll_args_t> args(n_);
    for (uint32_t m = 0; m < n_; ++m) {
        fill_input(in[m].data(), kOdd, AXON_DT_INT32, AXON_OP_SUM, m, 1700);
        args[m] = make_args(AXON_COLL_REDUCE, in[m].data(), m == root ? out.data() : nullptr,
                            kOdd, AXON_DT_INT32);
        args[m].field_mask = AXON_COLL_ARG_ROOT | AXON_COLL_ARG_OP;
        args[m].root       = root;
        args[m].op         = AXON_OP_SUM;
    }
    ASSERT_TRUE(Run(args, "reduce, dst NULL off the root"));
    Bytes ref = Reference(in, 0, kOdd, AXON_DT_INT32, AXON_OP_SUM);
    ExpectSame(ref.data(), out.data(), kOdd, AXON_DT_INT32, "reduce, dst NULL off the root");

    for (uint32_t m = 0; m < n_; ++m) {
        args[m].coll       = AXON_COLL_GATHER;
        args[m].field_mask = AXON_COLL_ARG_ROOT;
    }
    ASSERT_TRUE(Run(args, "gather, dst NULL off the root"));
    for (uint32_t j = 0; j < n_; ++j) {
        EXPECT_EQ(0, memcmp(in[j].data(), out.data() + j * kOdd * 4, kOdd * 4)) << "block " << j;
    }

    std::vector<Bytes> got(n_, Bytes(kOdd * 4, kSentinel));
    for (uint32_t m = 0; m < n_; ++m) {
        args[m] = make_args(AXON_COLL_SCATTER, m == root ? out.data() : nullptr, got[m].data(),
                            kOdd, AXON_DT_INT32);
        args[m].field_mask = AXON_COLL_ARG_ROOT;
        args[m].root       = root;
    }
    ASSERT_TRUE(Run(args, "scatter, src NULL off the root"));
    for (uint32_t m = 0; m < n_; ++m) {
        EXPECT_TRUE(got[m] == in[m]) << "scatter, member " << m;
    }
}

INSTANTIATE_TEST_SUITE_P(Lanes, Coll, ::testing::ValuesIn(kCollLanes), coll_param_name);
INSTANTIATE_TEST_SUITE_P(Variants, Coll, ::testing::ValuesIn(kCollSizes), coll_param_name);

}  // namespace

namespace {

/*
 * The softib lanes (rc, ud), N devices' worth of queue pairs in one
 * process: costly, so one test that runs each collective once at sizes that
 * take both protocols, in the plain pass only (Slow).
 */
class CollSlow : public Coll {
};

TEST_P(CollSlow, EveryCollectiveOnce)
{
    uint32_t root = n_ - 1;
    Allreduce(kOdd, AXON_DT_INT32, AXON_OP_SUM, false, 1);
    ASSERT_FALSE(HasFatalFailure());
    Allreduce(kLarge / 8, AXON_DT_DOUBLE, AXON_OP_MAX, true, 2);
    ASSERT_FALSE(HasFatalFailure());
    Reduce(kOdd, AXON_DT_DOUBLE_INT32, AXON_OP_MINLOC, root, false, 3);
    ASSERT_FALSE(HasFatalFailure());
    ReduceScatter(nullptr, kOdd, AXON_DT_UINT16, AXON_OP_BOR, false, 4);
    ASSERT_FALSE(HasFatalFailure());
    Bcast(kLarge + 1, AXON_DT_UINT8, root, 5);
    ASSERT_FALSE(HasFatalFailure());
    Allgather(kLarge / 2 / n_ + 1, false, 6);
    ASSERT_FALSE(HasFatalFailure());
    Allgatherv(uneven_counts(n_, 3), false, 7);
    ASSERT_FALSE(HasFatalFailure());
    Alltoall(kLarge / 4 / n_ + 1, false, 8);
    ASSERT_FALSE(HasFatalFailure());
    Gather(kOdd, root, false, 9);
    ASSERT_FALSE(HasFatalFailure());
    Scatter(kOdd, 0, false, 10);
}

const CollParam kSoftibLanes[] = {
    {"rc_n1", "rc", 1}, {"rc_n2", "rc", 2}, {"rc_n3", "rc", 3}, {"rc_n4", "rc", 4},
    {"rc_n5", "rc", 5}, {"rc_n6", "rc", 6}, {"rc_n7", "rc", 7}, {"rc_n8", "rc", 8},
    {"ud_n1", "ud", 1}, {"ud_n2", "ud", 2}, {"ud_n3", "ud", 3}, {"ud_n4", "ud", 4},
    {"ud_n5", "ud", 5}, {"ud_n6", "ud", 6}, {"ud_n7", "ud", 7}, {"ud_n8", "ud", 8},
};

INSTANTIATE_TEST_SUITE_P(Lanes, CollSlow, ::testing::ValuesIn(kSoftibLanes), coll_param_name);

}  // namespace
