/*
 * A target with two devices of one transport (rc over two softib devices,
 * AXON_SOFTIB_DEVICES=2, in another process): its keys name each device's
 * registration (api/mem/rkey.c), an initiator uses the one of the device
 * its lane reaches, and a large put or get stripes over the endpoint's
 * rails (api/rma/rma_rails.c): byte-exact, inside the range, and a rail
 * that breaks ends the operation with an error, never a hang.
 */
#include "rma_env.h"
#include "../tag/rails_rc_probe.h"
#include "rails.h"
extern "C" {
#include "rkey_format.h"
}

namespace {

const RmaParam kRc = {"rc", "rc", false, nullptr, false};

/* The device names of a packed key's entries of transport tl, in order. */
std::vector<std::string> key_devices(const std::vector<uint8_t> &key, const char *tl)
{
    std::vector<std::string> devs;
    axon_rkey_hdr_t          hdr;
    axon_rkey_entry_iter_t   iter;
    const uint8_t           *e;

    EXPECT_EQ(AXON_OK, axon_rkey_parse(key.data(), key.size(), &hdr));
    axon_rkey_entry_iter_init(&hdr, &iter);
    while ((e = axon_rkey_entry_next(key.data(), &hdr, tl, &iter)) != nullptr) {
        devs.push_back((const char *)e + AXON_RKEY_ENTRY_DEV);
    }
    return devs;
}

class RmaRails : public ::testing::Test {
public:
    EnvGuard devices_{"AXON_SOFTIB_DEVICES", "2"};
    Session  s_;

    /* Put len bytes of pattern seed at off of the big user region, flush, check all of it. */
    void put_and_check(uint64_t off, size_t len, uint64_t seed)
    {
        std::vector<uint8_t> buf(len);
        fill_pat(buf.data(), len, seed, 0);
        ASSERT_EQ(AXON_OK, s_.put(buf.data(), len, s_.addr(kUserBig, off), s_.rkey[kUserBig]))
            << len << " bytes at " << off;
        ASSERT_EQ(AXON_OK, s_.flush());
        EXPECT_EQ(-1, s_.target->check(kUserBig, off, len, seed, 0)) << len << " bytes at " << off;
        EXPECT_EQ(-1, s_.target->check_bg(kUserBig, 0, off)) << "before the range";
        EXPECT_EQ(-1, s_.target->check_bg(kUserBig, off + len, kBigLen - off - len))
            << "after the range";
        EXPECT_EQ(-1, s_.target->guards(kUserBig));
        s_.target->restore(kUserBig, off, len);
    }

    /* Get len bytes at off into a buffer with guards; check them against the background. */
    void get_and_check(uint64_t off, size_t len)
    {
        std::vector<uint8_t> buf(len + 2 * kGuard, kGuardByte);
        ASSERT_EQ(AXON_OK, s_.get(buf.data() + kGuard, len, s_.addr(kUserBig, off),
                                  s_.rkey[kUserBig]))
            << len << " bytes at " << off;
        EXPECT_EQ(-1, check_pat(buf.data() + kGuard, len, bg_seed(kUserBig), off));
        EXPECT_TRUE(all_bytes_are(buf.data(), kGuard, kGuardByte));
        EXPECT_TRUE(all_bytes_are(buf.data() + kGuard + len, kGuard, kGuardByte));
    }

    /*
     * A put long enough to open the endpoint's rails, then progress until
     * rail 1 is connected: until then it refuses its stripes, and rail 0
     * moves them (what the first large operations to a peer do).
     */
    void rails_up()
    {
        ASSERT_NO_FATAL_FAILURE(put_and_check(0, 2 * AXON_RNDV_RAIL_MIN, 1));
        ASSERT_NE(nullptr, s_.ep->rails);
        ASSERT_EQ(2u, s_.ep->rails->count);
        ASSERT_NO_FATAL_FAILURE(wait_connected(s_.ep->rails->lane[1]));
    }

    /* Progress until lane's rc connection is up (the first operations go by messages). */
    void wait_connected(const axon_lane_t &lane)
    {
        double end = axon_test_time() + kOpTimeout;
        while (!axon_test_rc_ep_connected(lane.tl_ep) && (axon_test_time() < end)) {
            axon_test_progress(s_.node.worker);
        }
        ASSERT_TRUE(axon_test_rc_ep_connected(lane.tl_ep)) << lane.resource->dev_name;
    }

    uint64_t rail_posted(unsigned i)
    {
        return axon_test_rc_ep_posted(s_.ep->rails->lane[i].tl_ep);
    }
};

/*
 * The target registers on both devices; this side has only softib1 (its
 * lane reaches the target's softib1). The key's first rc entry is softib0's:
 * taken before, the target's softib1 found no such region (or another one).
 * The lane is connected first, so that every operation goes by RDMA with
 * the key (before, the first ones go by messages).
 */
TEST_F(RmaRails, KeyOfTheDeviceTheLaneReaches)
{
    ASSERT_NO_FATAL_FAILURE(s_.spawn_target(kRc));
    {
        EnvGuard only("AXON_NET_DEVICES", "softib1:1");
        ASSERT_NO_FATAL_FAILURE(s_.connect(kRc));
    }
    std::vector<std::string> devs = key_devices(s_.keys[kUserBig], "rc");
    ASSERT_EQ(2u, devs.size());
    EXPECT_EQ("softib0:1", devs[0]);
    EXPECT_EQ("softib1:1", devs[1]);
    ASSERT_STREQ("softib1:1", s_.ep->bulk_lane.resource->dev_name);
    ASSERT_EQ((int)AXON_RMA_PATH_ZCOPY, (int)s_.path(kUserBig));
    ASSERT_NO_FATAL_FAILURE(wait_connected(s_.ep->bulk_lane));

    ASSERT_NO_FATAL_FAILURE(put_and_check(4096, 65536, 11));
    ASSERT_NO_FATAL_FAILURE(get_and_check(8192, 65536));
    EXPECT_EQ(nullptr, s_.ep->rails) << "one device here: no rails";
    s_.finish();
}

/*
 * The same two sides, by active messages: the target's answers need an
 * endpoint of its own back to us. Its softib0 looks as reachable as its
 * softib1 (softib's devices share a GID, their wires are apart), and
 * listed first it was taken: no answer to its connection request, the
 * put failed after the handshake's timeout. An iface that pairs with the
 * peer's device of its own name is now preferred.
 */
TEST_F(RmaRails, TargetAnswersOverTheDeviceOfTheSameName)
{
    const RmaParam am = {"rc_am", "rc", true, nullptr, false};

    ASSERT_NO_FATAL_FAILURE(s_.spawn_target(am));
    {
        EnvGuard only("AXON_NET_DEVICES", "softib1:1");
        ASSERT_NO_FATAL_FAILURE(s_.connect(am));
    }
    ASSERT_EQ((int)AXON_RMA_PATH_AM, (int)s_.path(kUserBig));
    ASSERT_NO_FATAL_FAILURE(put_and_check(4096, 65536, 12));
    ASSERT_NO_FATAL_FAILURE(get_and_check(8192, 65536));
    s_.finish();
}

/* Large puts and gets go over both devices; small ones open no rails. */
TEST_F(RmaRails, LargePutAndGetStripeOverTwoDevices)
{
    ASSERT_NO_FATAL_FAILURE(s_.start(kRc));
    ASSERT_EQ((int)AXON_RMA_PATH_ZCOPY, (int)s_.path(kUserBig));
    ASSERT_NE(nullptr, s_.rkey[kUserBig]->dev_keys) << "the key's other device";

    ASSERT_NO_FATAL_FAILURE(put_and_check(64, 2 * AXON_RNDV_RAIL_MIN - 1, 3));
    ASSERT_NO_FATAL_FAILURE(get_and_check(64, 2 * AXON_RNDV_RAIL_MIN - 1));
    EXPECT_FALSE(s_.ep->rails_known) << "too short to stripe: no rails opened";

    ASSERT_NO_FATAL_FAILURE(rails_up());
    const size_t sizes[] = {2 * AXON_RNDV_RAIL_MIN, (1 << 20) + 7, 4 << 20};
    const uint64_t offs[] = {0, 4093, 8192};
    for (size_t k = 0; k < 3; ++k) {
        uint64_t before = rail_posted(1);
        ASSERT_NO_FATAL_FAILURE(put_and_check(offs[k], sizes[k], 100 + k));
        EXPECT_GT(rail_posted(1), before) << "rail 1 wrote its stripe of " << sizes[k];
        before = rail_posted(1);
        ASSERT_NO_FATAL_FAILURE(get_and_check(offs[k], sizes[k]));
        EXPECT_GT(rail_posted(1), before) << "rail 1 read its stripe of " << sizes[k];
    }
    s_.finish();
}

/* Many striped puts in flight, then one flush: each one's bytes where they belong. */
TEST_F(RmaRails, StripedPutsInFlightTogether)
{
    const size_t          len = 512 * 1024, n = 8;
    std::vector<uint8_t>  buf(len * n);
    std::vector<axon_request_h> reqs(n);
    std::vector<axon_status_t>  sts(n);

    ASSERT_NO_FATAL_FAILURE(s_.start(kRc));
    ASSERT_NO_FATAL_FAILURE(rails_up());
    uint64_t before = rail_posted(1);
    fill_pat(buf.data(), buf.size(), 77, 0);
    for (size_t i = 0; i < n; ++i) {
        sts[i] = s_.start_op([&](axon_request_h *r) {
            return axon_put_nb(s_.ep, buf.data() + i * len, len, s_.addr(kUserBig, i * len),
                               s_.rkey[kUserBig], NULL, r);
        }, &reqs[i]);
    }
    for (size_t i = 0; i < n; ++i) {
        EXPECT_EQ(AXON_OK, s_.wait(sts[i], reqs[i])) << "put " << i;
    }
    ASSERT_EQ(AXON_OK, s_.flush());
    EXPECT_EQ(-1, s_.target->check(kUserBig, 0, len * n, 77, 0));
    EXPECT_EQ(-1, s_.target->check_bg(kUserBig, len * n, kBigLen - len * n));
    EXPECT_EQ(-1, s_.target->guards(kUserBig));
    EXPECT_GE(rail_posted(1) - before, n) << "each put wrote a stripe on rail 1";
    s_.finish();
}

/*
 * Rail 1's QP goes to the error state under a 4 MiB put: the put and the
 * flush end in time, with an error or the bytes written; nothing outside
 * the range, and the initiator's requests all go back to the pool.
 */
TEST_F(RmaRails, RailInErrorEndsTheOperation)
{
    const size_t         len = 4 << 20;
    std::vector<uint8_t> buf(len);
    axon_request_h       req = nullptr;

    ASSERT_NO_FATAL_FAILURE(s_.start(kRc));
    ASSERT_NO_FATAL_FAILURE(rails_up());
    fill_pat(buf.data(), len, 9, 0);
    axon_status_t st = s_.start_op([&](axon_request_h *r) {
        return axon_put_nb(s_.ep, buf.data(), len, s_.addr(kUserBig, 0), s_.rkey[kUserBig],
                           NULL, r);
    }, &req);
    ASSERT_EQ(AXON_INPROGRESS, st);
    EXPECT_TRUE(req->flags & AXON_REQUEST_RMA_RAILS);
    ASSERT_EQ(0, axon_test_rc_ep_break(s_.ep->rails->lane[1].tl_ep));
    axon_status_t done = s_.wait(st, req);
    EXPECT_NE(AXON_ERR_TIMED_OUT, done);
    axon_status_t fl = s_.flush();
    EXPECT_NE(AXON_ERR_TIMED_OUT, fl);
    if ((done == AXON_OK) && (fl == AXON_OK)) {
        EXPECT_EQ(-1, s_.target->check(kUserBig, 0, len, 9, 0));
    }
    EXPECT_EQ(-1, s_.target->check_bg(kUserBig, len, kBigLen - len)) << "after the range";
    EXPECT_EQ(-1, s_.target->guards(kUserBig));
    s_.finish(true);
}

/*
 * Rail 1 still connects, so rail 0 takes its stripe once its own is out;
 * the device has room for one more registration, so rail 0's own stripe
 * goes by RDMA and the stripe it took cannot be registered. No wait cures
 * that: the operation goes on by messages from the first byte not moved
 * (it retried for ever before), byte-exact and inside the range.
 */
void refused_midway(RmaRails *t, Session &s, bool get)
{
    const size_t         len = 4 << 20;
    std::vector<uint8_t> buf(len + 2 * kGuard, kGuardByte);
    uint8_t             *data = buf.data() + kGuard;
    axon_request_h       req  = nullptr;

    ASSERT_NO_FATAL_FAILURE(s.start(kRc));
    ASSERT_EQ(AXON_OK, s.put(data, 4096, s.addr(kUserBig, 0), s.rkey[kUserBig]));  /* bulk lane */
    ASSERT_NO_FATAL_FAILURE(t->wait_connected(s.ep->bulk_lane));
    ASSERT_EQ(AXON_OK, s.flush());
    s.target->restore(kUserBig, 0, 4096);
    void *tl_ep = s.ep->bulk_lane.tl_ep;
    void *fill  = axon_test_rc_ep_fill_mrs(tl_ep, 1);
    ASSERT_NE(nullptr, fill) << "the device never refused a registration";
    fill_pat(data, len, 21, 0);
    uint64_t before = axon_test_rc_ep_posted(tl_ep);
    axon_status_t st = s.start_op([&](axon_request_h *r) {
        return get ? axon_get_nb(s.ep, data, len, s.addr(kUserBig, 0), s.rkey[kUserBig], NULL, r) :
                     axon_put_nb(s.ep, data, len, s.addr(kUserBig, 0), s.rkey[kUserBig], NULL, r);
    }, &req);
    if (st == AXON_INPROGRESS) {
        EXPECT_TRUE(req->flags & AXON_REQUEST_RMA_RAILS) << "striped";
    }
    axon_status_t done = s.wait(st, req);
    axon_test_rc_mrs_release(fill);
    ASSERT_EQ(AXON_OK, done);
    ASSERT_EQ(AXON_OK, s.flush());
    EXPECT_GT(axon_test_rc_ep_posted(tl_ep), before) << "rail 0 moved its own stripe by RDMA";
    if (get) {
        EXPECT_EQ(-1, check_pat(data, len, bg_seed(kUserBig), 0));
    } else {
        EXPECT_EQ(-1, s.target->check(kUserBig, 0, len, 21, 0));
        EXPECT_EQ(-1, s.target->check_bg(kUserBig, len, kBigLen - len)) << "after the range";
    }
    EXPECT_TRUE(all_bytes_are(buf.data(), kGuard, kGuardByte));
    EXPECT_TRUE(all_bytes_are(data + len, kGuard, kGuardByte));
    EXPECT_EQ(-1, s.target->guards(kUserBig));
    s.finish();
}

TEST_F(RmaRails, RailZeroRefusedMidwayPutFinishesByMessages)
{
    refused_midway(this, s_, false);
}

TEST_F(RmaRails, RailZeroRefusedMidwayGetFinishesByMessages)
{
    refused_midway(this, s_, true);
}

}  // namespace
