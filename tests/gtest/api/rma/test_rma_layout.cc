/*
 * put and get with a layout on the local side (AXON_REQ_FLAG_LAYOUT) over
 * every lane: each kind of layout (layout_cases.h), small and large, into
 * and out of user and allocated memory, byte-exact against the packer of
 * the test, with nothing written outside the pieces on either side; and
 * bad layouts rejected with a line naming the value.
 */
#include <gtest/gtest.h>

#include <string.h>

#include <string>
#include <vector>

#include "rma_env.h"
#include "layout_cases.h"
#include "log_capture.h"

namespace {

class RmaLayout : public ::testing::TestWithParam<RmaParam> {
protected:
    Session s_;
};

const int kLayoutRegions[] = {kUserBig, kAllocBig};

TEST_P(RmaLayout, PutGetEveryKind)
{
    ASSERT_NO_FATAL_FAILURE(s_.start(GetParam()));
    for (int r : kLayoutRegions) {
        for (int kind = 0; kind < kLayoutKinds; ++kind) {
            for (size_t want : {kLayoutSmall, kLayoutLarge}) {
                std::unique_ptr<LayoutCase> lc = make_layout(kind, want);
                axon_request_param_t param = layout_param(*lc);
                size_t   len  = lc->size;
                uint64_t off  = 8 * kind + 3;
                uint64_t seed = 7000 + 100 * r + 10 * kind + (want == kLayoutLarge);
                std::string what = std::string(region_name(r)) + " region, " + lc->name() +
                                   ", " + std::to_string(len) + " bytes";

                std::vector<uint8_t> data(len);
                fill_pat(data.data(), len, seed, 0);
                lc->fill_blank();
                lc->place(data);
                ASSERT_EQ(AXON_OK, s_.run([&](axon_request_h *rq) {
                    return axon_put_nb(s_.ep, lc->base, len, s_.addr(r, off), s_.rkey[r], &param,
                                       rq);
                })) << "put, " << what;
                ASSERT_EQ(AXON_OK, s_.flush());
                EXPECT_EQ(-1, s_.target->check(r, off, len, seed, 0)) << "put, " << what;
                EXPECT_EQ(-1, s_.target->check_bg(r, off - 1, 1)) << "byte before, " << what;
                EXPECT_EQ(-1, s_.target->check_bg(r, off + len, 1)) << "byte after, " << what;
                EXPECT_EQ("", lc->check_received(data)) << "put changed its source, " << what;

                s_.target->fill(r, off, len, seed + 55, 0);
                fill_pat(data.data(), len, seed + 55, 0);
                lc->fill_blank();
                ASSERT_EQ(AXON_OK, s_.run([&](axon_request_h *rq) {
                    return axon_get_nb(s_.ep, lc->base, len, s_.addr(r, off), s_.rkey[r], &param,
                                       rq);
                })) << "get, " << what;
                EXPECT_EQ("", lc->check_received(data)) << "get, " << what;
                s_.target->restore(r, off, len);
            }
        }
        EXPECT_EQ(-1, s_.target->guards(r)) << region_name(r);
    }
    s_.finish();
}

TEST_P(RmaLayout, BadLayoutsNameTheirValue)
{
    ASSERT_NO_FATAL_FAILURE(s_.start(GetParam()));
    uint8_t              buf[64] = {};
    axon_layout_piece_t  overlap[2] = {{8, 16}, {0, 16}};
    axon_layout_t        iov = {};
    axon_request_param_t param = {};
    axon_request_h       req = nullptr;

    iov.kind       = AXON_LAYOUT_IOV;
    iov.iov.pieces = overlap;
    iov.iov.count  = 2;
    param.flags    = AXON_REQ_FLAG_LAYOUT;
    param.layout   = &iov;
    {
        LogCapture log;
        EXPECT_EQ(AXON_ERR_INVALID_PARAM,
                  axon_get_nb(s_.ep, buf, 32, s_.addr(kUserBig, 0), s_.rkey[kUserBig], &param,
                              &req));
        EXPECT_TRUE(log.any_contains("axon_get_nb: receiving layout pieces overlap"));
    }
    {
        LogCapture log;
        EXPECT_EQ(AXON_ERR_INVALID_PARAM,
                  axon_put_nb(s_.ep, buf, 31, s_.addr(kUserBig, 0), s_.rkey[kUserBig], &param,
                              &req));
        EXPECT_TRUE(log.any_contains("axon_put_nb: length 31 is not the layout's size 32"));
    }
    /* A put may read overlapping pieces. */
    for (int i = 0; i < 64; ++i) {
        buf[i] = (uint8_t)i;
    }
    ASSERT_EQ(AXON_OK, s_.run([&](axon_request_h *rq) {
        return axon_put_nb(s_.ep, buf, 32, s_.addr(kUserBig, 64), s_.rkey[kUserBig], &param, rq);
    }));
    ASSERT_EQ(AXON_OK, s_.flush());
    uint8_t back[32] = {};
    ASSERT_EQ(AXON_OK, s_.get(back, sizeof(back), s_.addr(kUserBig, 64), s_.rkey[kUserBig]));
    for (int i = 0; i < 32; ++i) {
        EXPECT_EQ((i < 16) ? i + 8 : i - 16, back[i]) << "byte " << i;
    }
    s_.target->restore(kUserBig, 64, 32);
    s_.finish();
}

const RmaParam kLayoutLanes[] = {
    {"self", "self", false},
    {"shm", "shm", false},
    {"tcp", "tcp", false},
    {"rc", "rc", false},
    {"ud", "ud", false},
    {"dc", "dc", false},
};
/* Active messages where the memory could be reached directly. */
const RmaParam kLayoutVariants[] = {
    {"shm_am", "shm", true},
    {"rc_am", "rc", true},
};

INSTANTIATE_TEST_SUITE_P(Lanes, RmaLayout, ::testing::ValuesIn(kLayoutLanes), rma_name);
INSTANTIATE_TEST_SUITE_P(Variants, RmaLayout, ::testing::ValuesIn(kLayoutVariants), rma_name);

}  // namespace
