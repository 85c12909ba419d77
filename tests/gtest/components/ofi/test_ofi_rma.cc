/*
 * ofi's put and get: fi_read / fi_write through the provider's memory keys
 * (lane "ofi"), and the same forced through active messages ("ofi_am"),
 * every byte checked, both kinds of memory. Skips when libfabric offers
 * no provider ofi can use.
 */
#include <gtest/gtest.h>

#include <vector>

#include "rma_env.h"

namespace {

/* Can a context use ofi here? */
bool ofi_available()
{
    axon_test_node_t node = {};

    if (axon_test_node_create(&node, "ofi", nullptr, 0) != AXON_OK) {
        return false;
    }
    axon_test_node_destroy(&node);
    return true;
}

/* ---------------------------------------------------------------- RMA */

class OfiRma : public ::testing::TestWithParam<RmaParam> {
protected:
    Session s_;
};

TEST_P(OfiRma, PutGetIntegrity)
{
    const size_t kSizes[] = {1, 8, 4096, 65537, 1u << 20};

    if (!ofi_available()) {
        GTEST_SKIP() << "no libfabric provider ofi can use here";
    }
    /* The "ofi" lane goes through fi_read / fi_write (off by default). */
    EnvGuard rma("AXON_OFI_RMA", GetParam().force_am ? "n" : "y");
    ASSERT_NO_FATAL_FAILURE(s_.start(GetParam()));
    for (int r : {kUserBig, kAllocBig}) {
        for (size_t i = 0; i < sizeof(kSizes) / sizeof(kSizes[0]); ++i) {
            size_t   len  = kSizes[i];
            uint64_t off  = 2 * i + 1;
            uint64_t seed = 100 * r + i + 1;

            std::vector<uint8_t> out(len);
            fill_pat(out.data(), len, seed, 0);
            ASSERT_EQ(AXON_OK, s_.put(out.data(), len, s_.addr(r, off), s_.rkey[r])) << len;
            ASSERT_EQ(AXON_OK, s_.flush()) << len;
            EXPECT_EQ(-1, s_.target->check(r, off, len, seed, 0)) << "put " << len;
            EXPECT_EQ(-1, s_.target->check_bg(r, off + len, 1)) << "byte after " << len;

            s_.target->fill(r, off, len, seed + 7, 0);
            std::vector<uint8_t> in(len);
            ASSERT_EQ(AXON_OK, s_.get(in.data(), len, s_.addr(r, off), s_.rkey[r])) << len;
            EXPECT_EQ(-1, check_pat(in.data(), len, seed + 7, 0)) << "get " << len;
            s_.target->restore(r, off, len);
        }
    }
    s_.finish();
}

const RmaParam kOfiRmaLanes[] = {
    {"ofi", "ofi", false},
    {"ofi_am", "ofi", true},
};

INSTANTIATE_TEST_SUITE_P(Lanes, OfiRma, ::testing::ValuesIn(kOfiRmaLanes), rma_name);

}  // namespace
