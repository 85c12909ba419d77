/* Selection: AXON_TLS / AXON_NET_DEVICES filters and per-endpoint lane choice. */
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <utility>
#include <vector>

extern "C" {
#include "axon_int.h"
#include "log.h"
#include "select.h"
#include "topo.h"
}

#include "env_guard.h"

namespace {

struct log_capture {
    std::vector<std::string> errors, warnings;

    static void hook(axon_log_level_t level, const char *msg, void *arg)
    {
        auto *self = static_cast<log_capture *>(arg);
        if (level == AXON_LOG_ERROR) {
            self->errors.push_back(msg);
        } else if (level == AXON_LOG_WARN) {
            self->warnings.push_back(msg);
        }
    }
    log_capture()  { axon_log_set_hook(hook, this); }
    ~log_capture() { axon_log_set_hook(NULL, NULL); }

    static bool any(const std::vector<std::string> &v, const std::string &a,
                    const std::string &b = "")
    {
        for (const auto &l : v) {
            if (l.find(a) != std::string::npos && l.find(b) != std::string::npos) {
                return true;
            }
        }
        return false;
    }
};

axon_resource_t make_rsc(const char *tl, const char *dev, axon_dev_type_t type, double lat,
                         double bw, uint64_t caps = AXON_CAP_AM_SHORT | AXON_CAP_AM_BCOPY)
{
    axon_resource_t r;
    memset(&r, 0, sizeof(r));
    snprintf(r.tl_name, sizeof(r.tl_name), "%s", tl);
    snprintf(r.dev_name, sizeof(r.dev_name), "%s", dev);
    r.dev_type       = type;
    r.cap_flags      = caps;
    r.latency_ns     = lat;
    r.bandwidth_MBps = bw;
    r.max_short      = 128;
    r.max_bcopy      = 8192;
    return r;
}

const axon_component_t fake_desc = {AXON_COMPONENT_ABI_VERSION, "fake", "fake"};

/*
 * A synthetic set of loaded components: self, shm, a "verbs" component with
 * rc and ud on two devices, and one plugin that failed to load; add_dc()
 * adds a dc component with a resource on softib0 only (softib1 lacks DC).
 */
class SelectFilter : public ::testing::Test {
protected:
    std::vector<axon_resource_t> self_r, shm_r, verbs_r, dc_r;
    axon_loaded_component_t comps[5];
    axon_component_set_t set;
    axon_select_resource_t *out = NULL;
    unsigned count = 0;

    void SetUp() override
    {
        self_r  = {make_rsc("self", "self", AXON_DEV_TYPE_SELF, 5, 20000)};
        shm_r   = {make_rsc("shm", "memory", AXON_DEV_TYPE_SHM, 80, 10000)};
        verbs_r = {make_rsc("rc", "softib0:1", AXON_DEV_TYPE_NET, 900, 5000),
                   make_rsc("ud", "softib0:1", AXON_DEV_TYPE_NET, 1000, 4000),
                   make_rsc("rc", "softib1:1", AXON_DEV_TYPE_NET, 900, 5000),
                   make_rsc("ud", "softib1:1", AXON_DEV_TYPE_NET, 1000, 4000)};
        memset(comps, 0, sizeof(comps));
        fill(&comps[0], "self", self_r);
        fill(&comps[1], "shm", shm_r);
        fill(&comps[2], "verbs", verbs_r);
        comps[3].name  = (char *)"broken";
        comps[3].path  = (char *)"/plugins/libaxon_broken.so";
        comps[3].error = (char *)"undefined symbol: ibv_missing";
        set.comps = comps;
        set.count = 4;
    }

    void TearDown() override { free(out); }

    void add_dc(uint64_t extra_caps = 0)
    {
        dc_r = {make_rsc("dc", "softib0:1", AXON_DEV_TYPE_NET, 950, 4900,
                         AXON_CAP_AM_SHORT | AXON_CAP_AM_BCOPY | extra_caps)};
        fill(&comps[4], "dc", dc_r);
        set.count = 5;
    }

    void fill(axon_loaded_component_t *lc, const char *name, std::vector<axon_resource_t> &r)
    {
        lc->name          = (char *)name;
        lc->path          = (char *)name;
        lc->component     = &fake_desc;
        lc->resources     = r.data();
        lc->num_resources = (unsigned)r.size();
    }

    axon_status_t run(const char *tls, const char *devices = "all")
    {
        axon_config_allow_list_t t, d;
        EXPECT_EQ(0, axon_config_read_allow_list(tls, &t, NULL)) << tls;
        EXPECT_EQ(0, axon_config_read_allow_list(devices, &d, NULL)) << devices;
        free(out);
        out   = NULL;
        count = 0;
        axon_status_t status = axon_select_filter(&set, &t, &d,
                                                  AXON_CAP_AM_SHORT | AXON_CAP_AM_BCOPY, &out,
                                                  &count);
        axon_config_parser_allow_list.release(&t, NULL);
        axon_config_parser_allow_list.release(&d, NULL);
        return status;
    }

    std::multiset<std::string> selected() const
    {
        std::multiset<std::string> s;
        for (unsigned i = 0; i < count; ++i) {
            s.insert(std::string(out[i].resource->tl_name) + "/" + out[i].resource->dev_name);
        }
        return s;
    }
};

typedef std::multiset<std::string> names;

} // namespace

TEST_F(SelectFilter, AllAdmitsEverything)
{
    ASSERT_EQ(AXON_OK, run("all"));
    EXPECT_EQ(6u, count);
}

TEST_F(SelectFilter, SingleTransport)
{
    ASSERT_EQ(AXON_OK, run("shm"));
    EXPECT_EQ(names({"shm/memory"}), selected());
}

TEST_F(SelectFilter, ListOfTransports)
{
    ASSERT_EQ(AXON_OK, run("rc,self"));
    EXPECT_EQ(names({"self/self", "rc/softib0:1", "rc/softib1:1"}), selected());
}

TEST_F(SelectFilter, NegationExcludesListed)
{
    ASSERT_EQ(AXON_OK, run("^rc,ud"));
    EXPECT_EQ(names({"self/self", "shm/memory"}), selected());
}

TEST_F(SelectFilter, AliasSmIsShmAndSelf)
{
    ASSERT_EQ(AXON_OK, run("sm"));
    EXPECT_EQ(names({"self/self", "shm/memory"}), selected());
}

TEST_F(SelectFilter, NegatedAlias)
{
    ASSERT_EQ(AXON_OK, run("^sm"));
    EXPECT_EQ(names({"rc/softib0:1", "ud/softib0:1", "rc/softib1:1", "ud/softib1:1"}),
              selected());
}

TEST_F(SelectFilter, ComponentNameSelectsItsTransports)
{
    ASSERT_EQ(AXON_OK, run("verbs"));
    EXPECT_EQ(4u, count);
}

TEST_F(SelectFilter, UnknownNameIsAnErrorListingKnownNames)
{
    log_capture logs;
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, run("bogus"));
    ASSERT_TRUE(log_capture::any(logs.errors, "'bogus'"));
    EXPECT_TRUE(log_capture::any(logs.errors, "'bogus'", "shm"));
    EXPECT_TRUE(log_capture::any(logs.errors, "'bogus'", "self"));
    EXPECT_TRUE(log_capture::any(logs.errors, "'bogus'", "sm (alias)"));
}

TEST_F(SelectFilter, UnknownNameInAListOrNegationIsAnError)
{
    log_capture logs;
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, run("shm,tcpp"));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, run("^shm,bogus2"));
    EXPECT_TRUE(log_capture::any(logs.errors, "'tcpp'"));
    EXPECT_TRUE(log_capture::any(logs.errors, "'bogus2'"));
}

TEST_F(SelectFilter, FailedPluginNamedGivesAWarningWithTheReason)
{
    log_capture logs;
    ASSERT_EQ(AXON_OK, run("shm,broken"));
    EXPECT_EQ(names({"shm/memory"}), selected());
    EXPECT_TRUE(log_capture::any(logs.warnings, "broken", "undefined symbol: ibv_missing"));
}

TEST_F(SelectFilter, FailedPluginNotNamedIsSilent)
{
    log_capture logs;
    ASSERT_EQ(AXON_OK, run("all"));
    EXPECT_TRUE(logs.warnings.empty());
    EXPECT_TRUE(logs.errors.empty());
}

TEST_F(SelectFilter, NetDevicesRestrictNetworkTransportsOnly)
{
    ASSERT_EQ(AXON_OK, run("all", "softib1:1"));
    EXPECT_EQ(names({"self/self", "shm/memory", "rc/softib1:1", "ud/softib1:1"}), selected());
}

TEST_F(SelectFilter, NetDevicesNegation)
{
    ASSERT_EQ(AXON_OK, run("rc", "^softib1:1"));
    EXPECT_EQ(names({"rc/softib0:1"}), selected());
}

TEST_F(SelectFilter, UnknownNetDeviceIsAnErrorListingDevices)
{
    log_capture logs;
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, run("all", "mlx5_0:1"));
    EXPECT_TRUE(log_capture::any(logs.errors, "'mlx5_0:1'", "softib0:1"));
}

TEST_F(SelectFilter, ResourceLackingRequiredCapabilityIsSkipped)
{
    verbs_r[1].cap_flags = AXON_CAP_PUT | AXON_CAP_GET;  /* ud on softib0 cannot send AMs */
    ASSERT_EQ(AXON_OK, run("ud"));
    EXPECT_EQ(names({"ud/softib1:1"}), selected());
}

TEST_F(SelectFilter, EverythingExcludedLeavesNothing)
{
    ASSERT_EQ(AXON_OK, run("^all"));
    EXPECT_EQ(0u, count);
}

/* ---- lane choice ---- */

namespace {

/* A worker with few endpoints, below the default AXON_RC_MAX_PEERS. */
const axon_lane_select_params_t kFewPeers = {3, 256};

/* rc and ud on one device: rc faster, ud much smaller per endpoint. */
struct rc_ud_device {
    axon_resource_t rc = make_rsc("rc", "softib0:1", AXON_DEV_TYPE_NET, 1500, 900);
    axon_resource_t ud = make_rsc("ud", "softib0:1", AXON_DEV_TYPE_NET, 2000, 700);

    rc_ud_device()
    {
        rc.ep_memory = 70000;
        ud.ep_memory = 400;
    }
};

/* Debug lines, which the log hook sees whatever AXON_LOG_LEVEL says. */
struct debug_capture {
    std::vector<std::string> lines;

    static void hook(axon_log_level_t level, const char *msg, void *arg)
    {
        if (level == AXON_LOG_DEBUG) {
            static_cast<debug_capture *>(arg)->lines.push_back(msg);
        }
    }
    debug_capture()  { axon_log_set_hook(hook, this); }
    ~debug_capture() { axon_log_set_hook(NULL, NULL); }
};

} // namespace

TEST(SelectLanes, SmallByLatencyBulkByBandwidth)
{
    axon_resource_t a = make_rsc("shm", "memory", AXON_DEV_TYPE_SHM, 80, 10000);
    axon_resource_t b = make_rsc("rc", "softib0:1", AXON_DEV_TYPE_NET, 900, 25000);
    const axon_resource_t *c[] = {&b, &a};
    axon_lane_choice_t choice;

    ASSERT_EQ(AXON_OK, axon_select_lanes(c, 2, &kFewPeers, &choice));
    EXPECT_EQ(1, choice.small);
    EXPECT_EQ(0, choice.bulk);
}

TEST(SelectLanes, OverheadCountsTowardSmallLaneCost)
{
    axon_resource_t a = make_rsc("x", "d0", AXON_DEV_TYPE_NET, 100, 1000);
    axon_resource_t b = make_rsc("y", "d1", AXON_DEV_TYPE_NET, 150, 1000);
    a.overhead_ns = 200;
    b.overhead_ns = 10;
    const axon_resource_t *c[] = {&a, &b};
    axon_lane_choice_t choice;

    ASSERT_EQ(AXON_OK, axon_select_lanes(c, 2, &kFewPeers, &choice));
    EXPECT_EQ(1, choice.small);
    /* equal bandwidth: the lower-latency lane carries bulk too */
    EXPECT_EQ(1, choice.bulk);
}

TEST(SelectLanes, NeedsAmCapabilities)
{
    axon_resource_t a = make_rsc("x", "d0", AXON_DEV_TYPE_NET, 100, 1000, AXON_CAP_AM_BCOPY);
    axon_resource_t b = make_rsc("y", "d1", AXON_DEV_TYPE_NET, 500, 100, AXON_CAP_AM_SHORT);
    const axon_resource_t *c[] = {&a, &b};
    axon_lane_choice_t choice;

    ASSERT_EQ(AXON_OK, axon_select_lanes(c, 2, &kFewPeers, &choice));
    EXPECT_EQ(1, choice.small);
    EXPECT_EQ(0, choice.bulk);
    EXPECT_EQ(AXON_ERR_UNREACHABLE, axon_select_lanes(c, 1, &kFewPeers, &choice));
}

TEST(SelectLanes, NothingReachable)
{
    axon_lane_choice_t choice;
    EXPECT_EQ(AXON_ERR_UNREACHABLE, axon_select_lanes(NULL, 0, &kFewPeers, &choice));
}

TEST(SelectLanes, FewPeersEstimatesDecide)
{
    rc_ud_device d;
    const axon_resource_t *c[] = {&d.ud, &d.rc};
    axon_lane_choice_t choice;

    for (unsigned num_eps : {0u, 1u, 255u}) {
        axon_lane_select_params_t params = {num_eps, 256};
        ASSERT_EQ(AXON_OK, axon_select_lanes(c, 2, &params, &choice));
        EXPECT_EQ(1, choice.small) << num_eps << " endpoints: rc has the lower latency";
        EXPECT_EQ(1, choice.bulk) << num_eps << " endpoints: rc has the higher bandwidth";
    }
}

TEST(SelectLanes, ManyPeersSmallestEndpointMemoryWins)
{
    rc_ud_device d;
    const axon_resource_t *c[] = {&d.rc, &d.ud};
    axon_lane_choice_t choice;

    for (unsigned num_eps : {256u, 257u, 100000u}) {
        axon_lane_select_params_t params = {num_eps, 256};
        ASSERT_EQ(AXON_OK, axon_select_lanes(c, 2, &params, &choice));
        EXPECT_EQ(1, choice.small) << num_eps << " endpoints";
        EXPECT_EQ(1, choice.bulk) << num_eps << " endpoints";
    }
}

TEST(SelectLanes, ThresholdZeroAlwaysSavesMemory)
{
    rc_ud_device d;
    const axon_resource_t *c[] = {&d.rc, &d.ud};
    axon_lane_select_params_t params = {0, 0};
    axon_lane_choice_t choice;

    ASSERT_EQ(AXON_OK, axon_select_lanes(c, 2, &params, &choice));
    EXPECT_EQ(1, choice.small);
    EXPECT_EQ(1, choice.bulk);
}

TEST(SelectLanes, ManyPeersMemoryComparedOnlyWithinADevice)
{
    /* shm reaches the peer faster; a tiny-endpoint transport elsewhere does not displace it */
    rc_ud_device d;
    axon_resource_t shm = make_rsc("shm", "memory", AXON_DEV_TYPE_SHM, 80, 10000);
    shm.ep_memory = 4096;
    const axon_resource_t *c[] = {&d.rc, &shm, &d.ud};
    axon_lane_select_params_t params = {1000, 256};
    axon_lane_choice_t choice;

    ASSERT_EQ(AXON_OK, axon_select_lanes(c, 3, &params, &choice));
    EXPECT_EQ(1, choice.small);
    EXPECT_EQ(1, choice.bulk);

    /* the same transports on a second device: each lane stays on its own device */
    axon_resource_t rc1 = make_rsc("rc", "softib1:1", AXON_DEV_TYPE_NET, 1000, 2000);
    axon_resource_t ud1 = make_rsc("ud", "softib1:1", AXON_DEV_TYPE_NET, 3000, 1500);
    rc1.ep_memory = 70000;
    ud1.ep_memory = 300;  /* smaller than softib0's ud, but on another device */
    const axon_resource_t *c2[] = {&d.rc, &d.ud, &rc1, &ud1};
    ASSERT_EQ(AXON_OK, axon_select_lanes(c2, 4, &params, &choice));
    EXPECT_EQ(3, choice.small) << "softib1 has the best latency; its ud is the small lane";
    EXPECT_EQ(3, choice.bulk);

    /* a different device type with the same name is another device */
    axon_resource_t odd = make_rsc("odd", "softib0:1", AXON_DEV_TYPE_SHM, 5000, 100);
    odd.ep_memory = 1;
    const axon_resource_t *c3[] = {&d.rc, &odd};
    ASSERT_EQ(AXON_OK, axon_select_lanes(c3, 2, &params, &choice));
    EXPECT_EQ(0, choice.small);
    EXPECT_EQ(0, choice.bulk);
}

TEST(SelectLanes, ManyPeersEqualMemoryKeepsTheFaster)
{
    rc_ud_device d;
    d.ud.ep_memory = d.rc.ep_memory;
    const axon_resource_t *c[] = {&d.ud, &d.rc};
    axon_lane_select_params_t params = {500, 256};
    axon_lane_choice_t choice;

    ASSERT_EQ(AXON_OK, axon_select_lanes(c, 2, &params, &choice));
    EXPECT_EQ(1, choice.small);
    EXPECT_EQ(1, choice.bulk);
}

TEST(SelectLanes, TiesInEstimatesGoToTheFirstCandidate)
{
    axon_resource_t a = make_rsc("x", "d0", AXON_DEV_TYPE_NET, 100, 1000);
    axon_resource_t b = make_rsc("y", "d0", AXON_DEV_TYPE_NET, 100, 1000);
    const axon_resource_t *c[] = {&a, &b};
    axon_lane_choice_t choice;

    ASSERT_EQ(AXON_OK, axon_select_lanes(c, 2, &kFewPeers, &choice));
    EXPECT_EQ(0, choice.small);
    EXPECT_EQ(0, choice.bulk);
}

/* ---- the nearest device of the chosen transport (framework/topo/ distances) ---- */

namespace {

const unsigned kUnknown = AXON_TOPO_DISTANCE_UNKNOWN;

/* Lanes chosen among c at distances dist are small and bulk (candidate indices). */
void expect_lanes(const axon_resource_t *const *c, unsigned n, const unsigned *dist, int small,
                  int bulk, unsigned num_eps = 3)
{
    axon_lane_select_params_t params = {num_eps, 256, dist};
    axon_lane_choice_t choice = {-1, -1};

    EXPECT_EQ(AXON_OK, axon_select_lanes(c, n, &params, &choice));
    EXPECT_EQ(small, choice.small) << "small lane";
    EXPECT_EQ(bulk, choice.bulk) << "bulk lane";
}

} // namespace

TEST(SelectNearest, NearerDeviceWinsOverTheFirstListed)
{
    axon_resource_t d0 = make_rsc("rc", "mlx5_0:1", AXON_DEV_TYPE_NET, 1500, 12000);
    axon_resource_t d1 = make_rsc("rc", "mlx5_1:1", AXON_DEV_TYPE_NET, 1500, 12000);
    const axon_resource_t *c[] = {&d0, &d1};
    const unsigned far_near[] = {2, 0}, near_far[] = {0, 2};

    expect_lanes(c, 2, far_near, 1, 1);
    expect_lanes(c, 2, near_far, 0, 0);
}

/* Distance ranks before the device's estimates: the far NIC may be faster on paper. */
TEST(SelectNearest, DistanceComesBeforeBandwidth)
{
    axon_resource_t fast_far = make_rsc("rc", "mlx5_0:1", AXON_DEV_TYPE_NET, 1000, 25000);
    axon_resource_t slow_near = make_rsc("rc", "mlx5_1:1", AXON_DEV_TYPE_NET, 1500, 12000);
    const axon_resource_t *c[] = {&fast_far, &slow_near};
    const unsigned dist[] = {2, 0};

    expect_lanes(c, 2, dist, 1, 1);
    EXPECT_TRUE(axon_select_nearer(&slow_near, 0, &fast_far, 2));
    EXPECT_TRUE(axon_select_nearer(&fast_far, 1, &slow_near, 1)) << "equal distance: bandwidth";
    EXPECT_FALSE(axon_select_nearer(&fast_far, 1, &fast_far, 1)) << "equal: neither";
    EXPECT_TRUE(axon_select_nearer(&slow_near, 7, &fast_far, kUnknown)) << "unknown ranks last";
}

/* Equally near devices: each lane's own estimate decides, as without distances. */
TEST(SelectNearest, EquallyNearDevicesGoByTheLanesEstimates)
{
    axon_resource_t quick = make_rsc("rc", "mlx5_0:1", AXON_DEV_TYPE_NET, 1000, 12000);
    axon_resource_t wide  = make_rsc("rc", "mlx5_1:1", AXON_DEV_TYPE_NET, 1500, 25000);
    axon_resource_t far   = make_rsc("rc", "mlx5_2:1", AXON_DEV_TYPE_NET, 500, 50000);
    const axon_resource_t *c[] = {&far, &quick, &wide};
    const unsigned dist[] = {2, 0, 0};

    expect_lanes(c, 3, dist, 1, 2);
}

/* Only devices of the transport the estimates chose compete: ud nearby does not displace rc. */
TEST(SelectNearest, OtherTransportsDoNotCompete)
{
    axon_resource_t rc_far = make_rsc("rc", "mlx5_0:1", AXON_DEV_TYPE_NET, 1500, 12000);
    axon_resource_t ud_near = make_rsc("ud", "mlx5_1:1", AXON_DEV_TYPE_NET, 2000, 9000);
    const axon_resource_t *c[] = {&rc_far, &ud_near};
    const unsigned dist[] = {2, 0};

    expect_lanes(c, 2, dist, 0, 0);
}

/* One device of unknown distance: the listed order stays, whichever it is, and a debug line says so. */
TEST(SelectNearest, UnknownDistanceKeepsTheListedOrder)
{
    axon_resource_t d0 = make_rsc("rc", "mlx5_0:1", AXON_DEV_TYPE_NET, 1500, 12000);
    axon_resource_t d1 = make_rsc("rc", "mlx5_1:1", AXON_DEV_TYPE_NET, 1500, 12000);
    const axon_resource_t *c[] = {&d0, &d1};
    const unsigned first_unknown[] = {kUnknown, 0}, second_unknown[] = {3, kUnknown};
    debug_capture log;

    expect_lanes(c, 2, first_unknown, 0, 0);
    expect_lanes(c, 2, second_unknown, 0, 0);
    expect_lanes(c, 2, NULL, 0, 0);
    bool said = false;
    for (const auto &l : log.lines) {
        said = said || ((l.find("rc/mlx5_0:1 has no known distance") != std::string::npos) &&
                        (l.find("keep their listed order") != std::string::npos));
    }
    EXPECT_TRUE(said);
}

/* Past AXON_RC_MAX_PEERS the memory rule moves within the nearest device, not back to the first. */
TEST(SelectNearest, ManyPeersStayOnTheNearestDevice)
{
    rc_ud_device far, near;
    snprintf(near.rc.dev_name, sizeof(near.rc.dev_name), "softib1:1");
    snprintf(near.ud.dev_name, sizeof(near.ud.dev_name), "softib1:1");
    const axon_resource_t *c[] = {&far.rc, &far.ud, &near.rc, &near.ud};
    const unsigned dist[] = {2, 2, 0, 0};

    expect_lanes(c, 4, dist, 3, 3, 300);
}

TEST(SelectLanes, ManyPeersMemoryChoiceNeedsTheLaneCapability)
{
    /* ud without bcopy: it can take the small lane only; rc keeps bulk */
    rc_ud_device d;
    d.ud.cap_flags = AXON_CAP_AM_SHORT;
    const axon_resource_t *c[] = {&d.rc, &d.ud};
    axon_lane_select_params_t params = {300, 256};
    axon_lane_choice_t choice;

    ASSERT_EQ(AXON_OK, axon_select_lanes(c, 2, &params, &choice));
    EXPECT_EQ(1, choice.small);
    EXPECT_EQ(0, choice.bulk);

    /* and without am_short nothing of ud is usable for small messages */
    d.ud.cap_flags = AXON_CAP_AM_BCOPY;
    ASSERT_EQ(AXON_OK, axon_select_lanes(c, 2, &params, &choice));
    EXPECT_EQ(0, choice.small);
    EXPECT_EQ(1, choice.bulk);
}

TEST(SelectLanes, CandidateLackingALaneCapabilityIsSkippedWithADebugLine)
{
    rc_ud_device d;
    d.rc.cap_flags = AXON_CAP_AM_BCOPY;  /* no short AMs */
    const axon_resource_t *c[] = {&d.rc, &d.ud};
    axon_lane_choice_t choice;
    debug_capture logs;

    ASSERT_EQ(AXON_OK, axon_select_lanes(c, 2, &kFewPeers, &choice));
    EXPECT_EQ(1, choice.small);
    EXPECT_EQ(0, choice.bulk);
    bool found = false;
    for (const auto &l : logs.lines) {
        found = found || ((l.find("rc/softib0:1") != std::string::npos) &&
                          (l.find("am_short") != std::string::npos));
    }
    EXPECT_TRUE(found) << "no debug line names rc/softib0:1 and am_short";
}

namespace {

/* rc, ud and dc on a device with DC: dc has the smallest endpoints by far. */
struct rc_ud_dc_device : rc_ud_device {
    axon_resource_t dc = make_rsc("dc", "softib0:1", AXON_DEV_TYPE_NET, 1700, 850);

    rc_ud_dc_device() { dc.ep_memory = 48; }
};

typedef std::pair<int, int> lanes_t;  /* small, bulk: indices into the candidates */

/* The lanes among c of an endpoint made when the worker has num_eps (threshold 256). */
lanes_t pick(std::vector<const axon_resource_t *> c, unsigned num_eps)
{
    axon_lane_select_params_t params = {num_eps, 256};
    axon_lane_choice_t choice = {-1, -1};

    EXPECT_EQ(AXON_OK, axon_select_lanes(c.data(), (unsigned)c.size(), &params, &choice));
    return {choice.small, choice.bulk};
}

} // namespace

TEST(SelectLanes, FewPeersDcDoesNotDisplaceRc)
{
    rc_ud_dc_device d;

    EXPECT_EQ(lanes_t(2, 2), pick({&d.dc, &d.ud, &d.rc}, 255));
}

TEST(SelectLanes, ManyPeersPreferDcOverUdWhereTheDeviceHasIt)
{
    rc_ud_dc_device d;

    for (unsigned num_eps : {256u, 1024u}) {
        EXPECT_EQ(lanes_t(2, 2), pick({&d.rc, &d.ud, &d.dc}, num_eps)) << num_eps;
        EXPECT_EQ(lanes_t(0, 0), pick({&d.dc, &d.rc, &d.ud}, num_eps)) << num_eps;
        EXPECT_EQ(lanes_t(1, 1), pick({&d.ud, &d.dc, &d.rc}, num_eps)) << num_eps;
    }
}

TEST(SelectLanes, ManyPeersFallBackToUdOnADeviceWithoutDc)
{
    /* softib0 has DC; softib1 does not (no dc resource there) and reaches the peer faster */
    rc_ud_dc_device d0;
    axon_resource_t rc1 = make_rsc("rc", "softib1:1", AXON_DEV_TYPE_NET, 1000, 2000);
    axon_resource_t ud1 = make_rsc("ud", "softib1:1", AXON_DEV_TYPE_NET, 1200, 1500);
    rc1.ep_memory = 70000;
    ud1.ep_memory = 400;

    EXPECT_EQ(lanes_t(1, 1), pick({&rc1, &ud1}, 300));
    /* the lanes stay on the faster device, whose smallest endpoints are ud's */
    EXPECT_EQ(lanes_t(4, 4), pick({&d0.rc, &d0.ud, &d0.dc, &rc1, &ud1}, 300));
}

TEST(SelectLanes, ManyPeersDcWithoutALaneCapabilityLeavesThatLaneToUd)
{
    rc_ud_dc_device d;
    d.dc.cap_flags = AXON_CAP_AM_SHORT;  /* dc that cannot bcopy: small lane only */

    EXPECT_EQ(lanes_t(2, 1), pick({&d.rc, &d.ud, &d.dc}, 256));
}

TEST(SelectLanes, SwitchToDcSaysSoNamingTheThreshold)
{
    rc_ud_dc_device d;
    const axon_resource_t *c[] = {&d.rc, &d.ud, &d.dc};
    axon_lane_select_params_t params = {256, 256};
    axon_lane_choice_t choice;
    debug_capture logs;

    ASSERT_EQ(AXON_OK, axon_select_lanes(c, 3, &params, &choice));
    bool found = false;
    for (const auto &l : logs.lines) {
        found = found || ((l.find("AXON_RC_MAX_PEERS=256") != std::string::npos) &&
                          (l.find("dc/softib0:1 (48 bytes") != std::string::npos));
    }
    EXPECT_TRUE(found);
}

TEST(SelectLanes, SwitchToSmallerEndpointsSaysSoAtDebugLevel)
{
    rc_ud_device d;
    const axon_resource_t *c[] = {&d.rc, &d.ud};
    axon_lane_select_params_t params = {256, 256};
    axon_lane_choice_t choice;
    debug_capture logs;

    ASSERT_EQ(AXON_OK, axon_select_lanes(c, 2, &params, &choice));
    bool found = false;
    for (const auto &l : logs.lines) {
        found = found || ((l.find("AXON_RC_MAX_PEERS=256") != std::string::npos) &&
                          (l.find("ud/softib0:1") != std::string::npos));
    }
    EXPECT_TRUE(found);
}

TEST_F(SelectFilter, AliasIbIsRcAndUd)
{
    ASSERT_EQ(AXON_OK, run("ib"));
    EXPECT_EQ(names({"rc/softib0:1", "ud/softib0:1", "rc/softib1:1", "ud/softib1:1"}),
              selected());
    ASSERT_EQ(AXON_OK, run("ib,self"));
    EXPECT_EQ(5u, count);
    ASSERT_EQ(AXON_OK, run("^ib"));
    EXPECT_EQ(names({"self/self", "shm/memory"}), selected());
}

TEST_F(SelectFilter, AliasIbIncludesDcWhereItIsLoaded)
{
    add_dc();
    ASSERT_EQ(AXON_OK, run("ib"));
    EXPECT_EQ(names({"rc/softib0:1", "ud/softib0:1", "dc/softib0:1", "rc/softib1:1",
                     "ud/softib1:1"}), selected());
    ASSERT_EQ(AXON_OK, run("^ib"));
    EXPECT_EQ(names({"self/self", "shm/memory"}), selected());
}

TEST_F(SelectFilter, AliasIbWithoutADcComponentIsNoError)
{
    /* libaxon_dc.so not built: the alias still names dc, which matches nothing */
    log_capture logs;
    ASSERT_EQ(AXON_OK, run("ib"));
    EXPECT_EQ(4u, count);
    EXPECT_TRUE(logs.errors.empty());
    EXPECT_TRUE(logs.warnings.empty());
}

TEST_F(SelectFilter, DcByNameLikeRcAndUd)
{
    add_dc();
    ASSERT_EQ(AXON_OK, run("dc"));
    EXPECT_EQ(names({"dc/softib0:1"}), selected());
    ASSERT_EQ(AXON_OK, run("dc,ud"));
    EXPECT_EQ(names({"dc/softib0:1", "ud/softib0:1", "ud/softib1:1"}), selected());
    ASSERT_EQ(AXON_OK, run("^dc"));
    EXPECT_EQ(6u, count);
}

TEST_F(SelectFilter, EmulatedDcOnlyWhenNamed)
{
    add_dc(AXON_CAP_EMULATED);
    ASSERT_EQ(AXON_OK, run("all"));
    EXPECT_EQ(0u, selected().count("dc/softib0:1")) << "a software device needs AXON_TLS to name it";
    ASSERT_EQ(AXON_OK, run("^shm"));
    EXPECT_EQ(0u, selected().count("dc/softib0:1"));
    ASSERT_EQ(AXON_OK, run("dc"));
    EXPECT_EQ(names({"dc/softib0:1"}), selected());
    ASSERT_EQ(AXON_OK, run("ib"));
    EXPECT_EQ(1u, selected().count("dc/softib0:1"));
}

TEST_F(SelectFilter, DcNamedButNotLoadedListsKnownTransports)
{
    log_capture logs;
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, run("dc"));
    EXPECT_TRUE(log_capture::any(logs.errors, "'dc'", "ud"));
}

TEST_F(SelectFilter, UnknownNameListsTheIbAlias)
{
    log_capture logs;
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, run("infiniband"));
    EXPECT_TRUE(log_capture::any(logs.errors, "'infiniband'", "ib (alias)"));
}

TEST_F(SelectFilter, DeviceLackingRcCapabilitiesIsSkippedWithADebugLine)
{
    verbs_r[2].cap_flags = AXON_CAP_AM_SHORT;  /* rc on softib1 cannot bcopy */
    debug_capture logs;
    ASSERT_EQ(AXON_OK, run("ib"));
    EXPECT_EQ(names({"rc/softib0:1", "ud/softib0:1", "ud/softib1:1"}), selected());
    bool found = false;
    for (const auto &l : logs.lines) {
        found = found || ((l.find("rc/softib1:1") != std::string::npos) &&
                          (l.find("lacks") != std::string::npos));
    }
    EXPECT_TRUE(found);
}

/* ---- through axon_init, with the real components ---- */

namespace {

struct tls_case {
    const char *tls;
    std::set<std::string> expect;   /* transports the context may use */
    axon_status_t status;
};

/* gtest would otherwise print the raw bytes, padding included. */
void PrintTo(const tls_case &tc, std::ostream *os)
{
    *os << "AXON_TLS=\"" << tc.tls << "\"";
}

class SelectTlsEnv : public ::testing::TestWithParam<tls_case> {};

std::string tls_case_name(const ::testing::TestParamInfo<tls_case> &info)
{
    std::string n;
    for (const char *p = info.param.tls; *p; ++p) {
        n += isalnum((unsigned char)*p) ? *p : (*p == '^' ? 'X' : '_');
    }
    return n.empty() ? std::string("empty") : n;
}

} // namespace

TEST_P(SelectTlsEnv, AxonTlsEnvironmentVariable)
{
    const tls_case &tc = GetParam();
    axon_context_params_t params = {AXON_FEATURE_TAG, NULL, 0};
    axon_context_h ctx = NULL;

    setenv("AXON_TLS", tc.tls, 1);
    axon_status_t status = axon_init(&params, &ctx);
    unsetenv("AXON_TLS");
    ASSERT_EQ(tc.status, status) << "AXON_TLS=" << tc.tls;
    if (status != AXON_OK) {
        return;
    }
    /* Transports other components add (rdmacm, ...) are not this table's business. */
    static const std::set<std::string> known = {"self", "shm", "tcp", "rc", "ud"};
    std::set<std::string> got;
    for (unsigned i = 0; i < ctx->num_rscs; ++i) {
        if (known.count(ctx->rscs[i].resource->tl_name)) {
            got.insert(ctx->rscs[i].resource->tl_name);
        }
    }
    EXPECT_EQ(tc.expect, got) << "AXON_TLS=" << tc.tls;
    axon_cleanup(ctx);
}

/* rc and ud come from softib0 (AXON_SOFTIB_DEVICES defaults to 1). */
INSTANTIATE_TEST_SUITE_P(Forms, SelectTlsEnv, ::testing::Values(
    /* rc and ud run on softib here, a software device: only when named. */
    tls_case{"all",        {"self", "shm", "tcp"},             AXON_OK},
    tls_case{"self",       {"self"},                           AXON_OK},
    tls_case{"shm",        {"shm"},                            AXON_OK},
    tls_case{"tcp",        {"tcp"},                            AXON_OK},
    tls_case{"rc",         {"rc"},                             AXON_OK},
    tls_case{"ud",         {"ud"},                             AXON_OK},
    tls_case{"rc,ud",      {"rc", "ud"},                       AXON_OK},
    tls_case{"ib",         {"rc", "ud"},                       AXON_OK},
    tls_case{"ib,self",    {"self", "rc", "ud"},               AXON_OK},
    tls_case{"shm,self",   {"self", "shm"},                    AXON_OK},
    tls_case{"sm",         {"self", "shm"},                    AXON_OK},
    tls_case{"^shm",       {"self", "tcp"},                    AXON_OK},
    tls_case{"^self",      {"shm", "tcp"},                     AXON_OK},
    tls_case{"^sm",        {"tcp"},                            AXON_OK},
    tls_case{"^ib",        {"self", "shm", "tcp"},             AXON_OK},
    tls_case{"^sm,tcp",    {},                                 AXON_ERR_NO_ELEM},
    tls_case{"^all",       {},                                 AXON_ERR_NO_ELEM},
    tls_case{"bogus",      {},                                 AXON_ERR_INVALID_PARAM},
    tls_case{"^",          {},                                 AXON_ERR_INVALID_PARAM},
    tls_case{"",           {},                                 AXON_ERR_INVALID_PARAM}),
    tls_case_name);

TEST(SelectEndpoint, SelfLaneToOwnWorkerShmLaneWhenSelfExcluded)
{
    for (const char *tls : {"all", "shm"}) {
        axon_config_kv_t kv[] = {{"TLS", tls}};
        axon_context_params_t params = {AXON_FEATURE_TAG, kv, 1};
        axon_context_h ctx;
        axon_worker_h worker;
        axon_ep_attr_t attr;
        axon_ep_h ep;
        void *addr;
        size_t len;

        ASSERT_EQ(AXON_OK, axon_init(&params, &ctx));
        ASSERT_EQ(AXON_OK, axon_worker_create(ctx, NULL, &worker));
        ASSERT_EQ(AXON_OK, axon_worker_get_address(worker, &addr, &len));
        axon_ep_params_t ep_params = {addr, len};
        ASSERT_EQ(AXON_OK, axon_ep_create(worker, &ep_params, &ep));
        ASSERT_EQ(AXON_OK, axon_ep_query(ep, &attr));
        EXPECT_STREQ(strcmp(tls, "all") ? "shm" : "self", attr.small_tl) << tls;
        EXPECT_STREQ(attr.small_tl, attr.bulk_tl);
        axon_ep_close_nb(ep, AXON_EP_CLOSE_FORCE, NULL);
        axon_worker_release_address(worker, addr);
        axon_worker_destroy(worker);
        axon_cleanup(ctx);
    }
}

TEST(SelectEndpoint, UnreachablePeerIsAClearError)
{
    /* A worker that only has self cannot reach another worker. */
    axon_config_kv_t kv[] = {{"TLS", "self"}};
    axon_context_params_t params = {AXON_FEATURE_TAG, kv, 1};
    axon_context_h ctx;
    axon_worker_h w1, w2;
    axon_ep_h ep;
    void *addr;
    size_t len;

    ASSERT_EQ(AXON_OK, axon_init(&params, &ctx));
    ASSERT_EQ(AXON_OK, axon_worker_create(ctx, NULL, &w1));
    ASSERT_EQ(AXON_OK, axon_worker_create(ctx, NULL, &w2));
    ASSERT_EQ(AXON_OK, axon_worker_get_address(w2, &addr, &len));
    axon_ep_params_t ep_params = {addr, len};
    {
        log_capture logs;
        EXPECT_EQ(AXON_ERR_UNREACHABLE, axon_ep_create(w1, &ep_params, &ep));
        EXPECT_TRUE(log_capture::any(logs.errors, "no transport reaches"));
    }
    axon_worker_release_address(w2, addr);
    axon_worker_destroy(w1);
    axon_worker_destroy(w2);
    axon_cleanup(ctx);
}

namespace {

/* Does the context have a dc resource (libaxon_dc.so built, the device has DC)? */
bool context_has_dc(axon_context_h ctx)
{
    for (unsigned i = 0; i < ctx->num_rscs; ++i) {
        if (strcmp(ctx->rscs[i].resource->tl_name, "dc") == 0) {
            return true;
        }
    }
    return false;
}

/*
 * AXON_TLS=ib, AXON_RC_MAX_PEERS=2: one worker connects to kPeers others;
 * the small lane of each endpoint in order (bulk and devices must match it).
 * has_dc: whether the context found a dc resource.
 */
std::vector<std::string> ib_lanes_past_two_peers(bool *has_dc)
{
    const unsigned kPeers = 4;
    axon_config_kv_t kv[] = {{"TLS", "ib"}, {"RC_MAX_PEERS", "2"}};
    axon_context_params_t params = {AXON_FEATURE_TAG, kv, 2};
    axon_worker_h workers[kPeers + 1];
    axon_ep_h eps[kPeers];
    std::vector<std::string> lanes;
    axon_context_h ctx;
    unsigned i;

    EXPECT_EQ(AXON_OK, axon_init(&params, &ctx));
    if (::testing::Test::HasFailure()) {
        return lanes;
    }
    *has_dc = context_has_dc(ctx);
    for (i = 0; i <= kPeers; ++i) {
        EXPECT_EQ(AXON_OK, axon_worker_create(ctx, NULL, &workers[i]));
    }
    for (i = 0; i < kPeers; ++i) {
        axon_ep_attr_t attr;
        void *addr;
        size_t len;

        EXPECT_EQ(AXON_OK, axon_worker_get_address(workers[i + 1], &addr, &len));
        axon_ep_params_t ep_params = {addr, len};
        EXPECT_EQ(AXON_OK, axon_ep_create(workers[0], &ep_params, &eps[i]));
        axon_worker_release_address(workers[i + 1], addr);
        EXPECT_EQ(AXON_OK, axon_ep_query(eps[i], &attr));
        EXPECT_STREQ(attr.small_tl, attr.bulk_tl) << "endpoint " << i;
        EXPECT_STREQ(attr.small_dev, attr.bulk_dev) << "endpoint " << i;
        lanes.push_back(attr.small_tl);
    }
    for (i = 0; i < kPeers; ++i) {
        axon_ep_close_nb(eps[i], AXON_EP_CLOSE_FORCE, NULL);
    }
    for (i = 0; i <= kPeers; ++i) {
        axon_worker_destroy(workers[i]);
    }
    axon_cleanup(ctx);
    return lanes;
}

typedef std::vector<std::string> tl_names;

} // namespace

/* A device without DC: rc while the worker has fewer than AXON_RC_MAX_PEERS
 * endpoints, then ud (same device, smaller endpoints). */
TEST(SelectEndpoint, IbUsesRcForFewPeersThenUdWithoutDc)
{
    EnvGuard env("AXON_SOFTIB_CAP_MASK", "dc");
    bool has_dc = true;

    EXPECT_EQ(tl_names({"rc", "rc", "ud", "ud"}), ib_lanes_past_two_peers(&has_dc));
    EXPECT_FALSE(has_dc) << "a device without DC has no dc resource";
}

/* A device with DC (softib's default): rc, then dc, whose endpoints are smaller than ud's. */
TEST(SelectEndpoint, IbUsesRcForFewPeersThenDc)
{
    bool has_dc = false;
    tl_names lanes = ib_lanes_past_two_peers(&has_dc);

    if (!has_dc) {
        GTEST_SKIP() << "libaxon_dc.so is not built: no dc resource to prefer";
    }
    EXPECT_EQ(tl_names({"rc", "rc", "dc", "dc"}), lanes);
}

TEST(SelectEndpoint, IbDefaultsToRc)
{
    axon_config_kv_t kv[] = {{"TLS", "ib"}};
    axon_context_params_t params = {AXON_FEATURE_TAG, kv, 1};
    axon_worker_h w1, w2;
    axon_context_h ctx;
    axon_ep_attr_t attr;
    axon_ep_h ep;
    void *addr;
    size_t len;

    ASSERT_EQ(AXON_OK, axon_init(&params, &ctx));
    EXPECT_EQ(256u, ctx->opts.rc_max_peers);
    ASSERT_EQ(AXON_OK, axon_worker_create(ctx, NULL, &w1));
    ASSERT_EQ(AXON_OK, axon_worker_create(ctx, NULL, &w2));
    ASSERT_EQ(AXON_OK, axon_worker_get_address(w2, &addr, &len));
    axon_ep_params_t ep_params = {addr, len};
    ASSERT_EQ(AXON_OK, axon_ep_create(w1, &ep_params, &ep));
    ASSERT_EQ(AXON_OK, axon_ep_query(ep, &attr));
    EXPECT_STREQ("rc", attr.small_tl);
    EXPECT_STREQ("rc", attr.bulk_tl);
    axon_ep_close_nb(ep, AXON_EP_CLOSE_FORCE, NULL);
    axon_worker_release_address(w2, addr);
    axon_worker_destroy(w1);
    axon_worker_destroy(w2);
    axon_cleanup(ctx);
}

/* ---------------------------------------------------------------- rendezvous get or stream */

namespace {

axon_resource_t costed_rsc(double copy_MBps, double get_overhead_ns, double get_MBps,
                           uint64_t extra_caps = AXON_CAP_GET)
{
    axon_resource_t r = make_rsc("shm", "memory", AXON_DEV_TYPE_SHM, 100, 10000,
                                 AXON_CAP_AM_SHORT | AXON_CAP_AM_BCOPY | extra_caps);
    r.copy_MBps        = copy_MBps;
    r.copy_cached_MBps = 0;  /* as fast as a large copy */
    r.get_overhead_ns  = get_overhead_ns;
    r.get_MBps         = get_MBps;
    return r;
}

} // namespace

TEST(SelectGetMin, UnmeasuredGetsWhereverPossible)
{
    axon_resource_t r = costed_rsc(0, 0, 0);

    EXPECT_EQ(0u, axon_select_get_min(&r, 256 * 1024));
    r = costed_rsc(10000, 500, 0);
    EXPECT_EQ(0u, axon_select_get_min(&r, 256 * 1024));
}

TEST(SelectGetMin, NoGetCapabilityMeansNothingToChoose)
{
    axon_resource_t r = costed_rsc(10000, 500, 50000, 0);

    EXPECT_EQ(0u, axon_select_get_min(&r, 256 * 1024));
}

TEST(SelectGetMin, GetSlowerThanTwoCopiesNeverPays)
{
    /* A virtual machine that pins pages slowly: 55 GB/s memcpy, 14 GB/s get. */
    axon_resource_t r = costed_rsc(55000, 670, 14000);
    EXPECT_EQ(SIZE_MAX, axon_select_get_min(&r, 256 * 1024));

    /* Exactly as fast as two copies: still no gain. */
    r = costed_rsc(10000, 0, 5000);
    EXPECT_EQ(SIZE_MAX, axon_select_get_min(&r, 256 * 1024));
}

TEST(SelectGetMin, CrossoverWhereTheSavedCopyPaysTheGet)
{
    /* Streaming 0.2 ns/B (two copies at 10 GB/s), a get 0.1 ns/B plus 900 ns + 100 ns latency,
     * both of the get's costs taken 1.25 times: it wins from 1250 / 0.075 = 16 667 bytes. */
    axon_resource_t r = costed_rsc(10000, 900, 10000);
    size_t min = axon_select_get_min(&r, 256 * 1024);

    EXPECT_GE(min, 16650u);
    EXPECT_LE(min, 16680u);
    /* A costlier call moves it up; a faster get moves it down. */
    r.get_overhead_ns = 1900;
    EXPECT_GT(axon_select_get_min(&r, 256 * 1024), min);
    r = costed_rsc(10000, 900, 20000);
    EXPECT_LT(axon_select_get_min(&r, 256 * 1024), min);
}

TEST(SelectGetMin, Capped)
{
    /* Barely cheaper: the crossover lies past the cap, which bounds it. */
    axon_resource_t r = costed_rsc(10000, 100000, 8000);

    EXPECT_EQ(256u * 1024, axon_select_get_min(&r, 256 * 1024));
}

TEST(SelectGetMin, AGetNotClearlyCheaperPerByteNeverPays)
{
    /* 0.17 ns/B against 0.2 for two copies: within what the model leaves out. */
    axon_resource_t r = costed_rsc(10000, 0, 6000);

    EXPECT_EQ(SIZE_MAX, axon_select_get_min(&r, 256 * 1024));
}

TEST(SelectGetMin, CopiesInCacheKeepMessagesUpToTheCapOnTheRing)
{
    /* A 1 MiB copy from a busy shared cache at 10 GB/s, a 64 KiB one at 50 GB/s: the get
     * (20 GB/s) beats the first but not the second, so it starts at the cap. This host
     * put 64 KiB on the get, 3x slower, when the large copy alone set the threshold. */
    axon_resource_t r = costed_rsc(10000, 1000, 20000);

    size_t large_only = axon_select_get_min(&r, 256 * 1024);

    EXPECT_LT(large_only, 64u * 1024);
    r.copy_cached_MBps = 50000;
    EXPECT_EQ(256u * 1024, axon_select_get_min(&r, 256 * 1024));
    /* Faster in cache but still slower than the get: the crossover moves up, below the cap. */
    r.copy_cached_MBps = 12000;
    EXPECT_GT(axon_select_get_min(&r, 256 * 1024), large_only);
    EXPECT_LT(axon_select_get_min(&r, 256 * 1024), 256u * 1024);
    /* Measured slower in cache than out of it: noise, the large copy's speed stands. */
    r.copy_cached_MBps = 5000;
    EXPECT_EQ(large_only, axon_select_get_min(&r, 256 * 1024));
}
