/*
 * Topology (framework/topo/): a device's distance from the calling thread
 * over hwloc XML and synthetic topologies of two packages on this host's
 * CPUs 0 and 1, and the lane choice it drives through axon_init with two
 * softib devices placed by AXON_SOFTIB_LOCALITY.
 */
#include <gtest/gtest.h>

#include <dirent.h>
#include <string.h>

#include <memory>
#include <string>
#include <vector>

extern "C" {
#include "axon_config.h"
#include "axon_int.h"
#include "dev.h"
#include "log.h"
#include "topo.h"
}

#include "env_guard.h"
#include "log_capture.h"
#include "topo_env.h"

namespace {

#ifdef HAVE_HWLOC
#define NEEDS_HWLOC()
#else
#define NEEDS_HWLOC() \
    GTEST_SKIP() << "built without hwloc: every distance is unknown (UnknownWithoutATopology, " \
                    "DeviceWithoutLocalityKeepsTheOrder)"
#endif

#define NEEDS_TWO_CPUS() \
    if (!two_cpus_usable()) GTEST_SKIP() << "this thread cannot run on CPUs 0 and 1"

/* Holds the topology of source for a scope. */
struct TopoHold {
    axon_status_t status;
    explicit TopoHold(const std::string &source) : status(axon_topo_get(source.c_str())) {}
    ~TopoHold()
    {
        if (status == AXON_OK) {
            axon_topo_put();
        }
    }
};

unsigned distance(const char *locality)
{
    return axon_topo_device_distance(locality, NULL, 0);
}

} // namespace

/* Distances over the two-package XML (hold_two_packages) or another topology. */
class TopoDistance : public ::testing::Test {
protected:
    TwoPackagesXml            xml;
    std::unique_ptr<TopoHold> topo;

    void hold(const std::string &source)
    {
        topo.reset(new TopoHold(source));
        ASSERT_EQ(AXON_OK, topo->status) << source;
    }
    void hold_two_packages()
    {
        ASSERT_TRUE(xml.ok());
        hold(xml.source());
    }
};

/* ---------------------------------------------------------------- distance */

TEST_F(TopoDistance, FollowsTheThreadsPackage)
{
    NEEDS_HWLOC();
    NEEDS_TWO_CPUS();
    ASSERT_NO_FATAL_FAILURE(hold_two_packages());
    {
        CpuBinding on(0);
        ASSERT_TRUE(on.ok());
        EXPECT_EQ(0u, distance(kNearCpu0));
        EXPECT_EQ(2u, distance(kNearCpu1)) << "one level from package 1 up to the machine, + 1";
    }
    {
        CpuBinding on(1);
        ASSERT_TRUE(on.ok());
        EXPECT_EQ(2u, distance(kNearCpu0));
        EXPECT_EQ(0u, distance(kNearCpu1));
    }
}

/* A thread that may run on both packages is as near to one device as to the other. */
TEST_F(TopoDistance, ThreadOverBothPackagesSeesDevicesAlike)
{
    NEEDS_HWLOC();
    NEEDS_TWO_CPUS();
    ASSERT_NO_FATAL_FAILURE(hold_two_packages());
    EXPECT_NE(AXON_TOPO_DISTANCE_UNKNOWN, distance(kNearCpu0));
    EXPECT_EQ(distance(kNearCpu0), distance(kNearCpu1));
    EXPECT_GT(distance(kNearCpu0), 0u);
}

TEST_F(TopoDistance, NumaLocalityInASyntheticTopology)
{
    NEEDS_HWLOC();
    NEEDS_TWO_CPUS();
    ASSERT_NO_FATAL_FAILURE(hold("synthetic:pack:2 numa:1 pu:1"));
    CpuBinding on(1);
    ASSERT_TRUE(on.ok());
    EXPECT_EQ(0u, distance("numa:1"));
    EXPECT_GT(distance("numa:0"), 0u);
    EXPECT_NE(AXON_TOPO_DISTANCE_UNKNOWN, distance("numa:0"));
    EXPECT_EQ(1, axon_topo_thread_numa_node(NULL, 0));
}

TEST_F(TopoDistance, UnknownLocalitySaysWhy)
{
    NEEDS_HWLOC();
    ASSERT_NO_FATAL_FAILURE(hold_two_packages());
    char why[128] = "";

    EXPECT_EQ(AXON_TOPO_DISTANCE_UNKNOWN, axon_topo_device_distance("", why, sizeof(why)));
    EXPECT_NE(nullptr, strstr(why, "no locality")) << why;
    EXPECT_EQ(AXON_TOPO_DISTANCE_UNKNOWN,
              axon_topo_device_distance("pci:0000:44:00.0", why, sizeof(why)));
    EXPECT_NE(nullptr, strstr(why, "0000:44:00.0 is not in the topology")) << why;
    EXPECT_EQ(AXON_TOPO_DISTANCE_UNKNOWN, axon_topo_device_distance("numa:7", why, sizeof(why)));
    EXPECT_NE(nullptr, strstr(why, "NUMA node 7")) << why;
}

TEST_F(TopoDistance, UnknownWithoutATopology)
{
    char why[128] = "";

    EXPECT_EQ(AXON_TOPO_DISTANCE_UNKNOWN, axon_topo_device_distance(kNearCpu0, why, sizeof(why)));
    EXPECT_NE('\0', why[0]);
    EXPECT_EQ(-1, axon_topo_thread_numa_node(NULL, 0));
}

/* ---------------------------------------------------------------- this host */

namespace {

/* The locality of one of this host's network interfaces on PCI, or "" if none is. */
std::string host_pci_nic()
{
    char loc[64] = "";
    DIR *dir = opendir("/sys/class/net");
    struct dirent *d;

    while ((dir != NULL) && (loc[0] == '\0') && ((d = readdir(dir)) != NULL)) {
        if (d->d_name[0] != '.') {
            std::string path = std::string("/sys/class/net/") + d->d_name;
            axon_topo_sysfs_locality(path.c_str(), loc, sizeof(loc));
        }
    }
    if (dir != NULL) {
        closedir(dir);
    }
    return loc;
}

} // namespace

/*
 * This host's topology is read on the first question that needs it, and its
 * PCI tree (hwloc reads every function's config space) only for a question
 * about a PCI locality: CPU and NUMA questions do not pay for it.
 */
TEST(TopoHost, PciTreeIsReadOnlyForAPciLocality)
{
    NEEDS_HWLOC();
    std::string nic = host_pci_nic();
    char why[128] = "";

    /* Another source first, so the host's is read afresh below (an XML file:
     * hwloc's synthetic parser copies overlapping memory, which valgrind reports). */
    {
        TwoPackagesXml xml;
        ASSERT_TRUE(xml.ok());
        TopoHold other(xml.source());
        ASSERT_EQ(AXON_OK, other.status);
    }
    LogCapture log(AXON_LOG_DEBUG);
    TopoHold host("");
    ASSERT_EQ(AXON_OK, host.status);
    EXPECT_FALSE(log.any_contains("topology of this host")) << "read before any question";

    EXPECT_LE(0, axon_topo_thread_numa_node(why, sizeof(why))) << why;
    EXPECT_NE(AXON_TOPO_DISTANCE_UNKNOWN, distance("numa:0"));
    EXPECT_TRUE(log.any_contains("topology of this host (CPUs and memory)"));
    EXPECT_FALSE(log.any_contains("topology of this host:")) << "PCI tree read for CPUs";

    if (nic.empty()) {
        GTEST_SKIP() << "no network interface of this host is on PCI";
    }
    EXPECT_NE(AXON_TOPO_DISTANCE_UNKNOWN, axon_topo_device_distance(nic.c_str(), why,
                                                                     sizeof(why)))
        << nic << ": " << why;
    EXPECT_TRUE(log.any_contains("topology of this host:")) << "PCI tree not read for " << nic;
}

/* ---------------------------------------------------------------- bad input */

TEST(TopoInput, MalformedLocalityIsNamed)
{
    const char *bad[] = {"pci:", "pci:0000:03:00", "pci:0000:03:00.0x", "pci:0000:03:20.0",
                         "numa:", "numa:-1", "numa:1x", "NUMA:1", "socket:0"};
    LogCapture  log(AXON_LOG_DEBUG);

    for (const char *loc : bad) {
        EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_topo_locality_check(loc, "AXON_X")) << loc;
        EXPECT_TRUE(log.any_contains("AXON_X", (std::string("'") + loc + "'").c_str())) << loc;
    }
    EXPECT_EQ(AXON_OK, axon_topo_locality_check("", "AXON_X"));
    EXPECT_EQ(AXON_OK, axon_topo_locality_check(kNearCpu1, "AXON_X"));
    EXPECT_EQ(AXON_OK, axon_topo_locality_check("numa:12", "AXON_X"));
}

TEST(TopoInput, BadSourceIsNamed)
{
    LogCapture log(AXON_LOG_DEBUG);

    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_topo_get("lstopo.xml"));
    EXPECT_TRUE(log.any_contains("AXON_TOPOLOGY", "'lstopo.xml'"));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_topo_get("xml:"));
#ifdef HAVE_HWLOC
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_topo_get("xml:/nonexistent/topo.xml"));
    EXPECT_TRUE(log.any_contains("AXON_TOPOLOGY", "/nonexistent/topo.xml"));
#endif
}

TEST(TopoInput, MalformedSoftibLocalityIsNamed)
{
    EnvGuard env;
    env.set("AXON_SOFTIB_DEVICES", "2");
    env.set("AXON_SOFTIB_LOCALITY", "pci:0000:03:00.0,pci:zz");
    LogCapture log(AXON_LOG_DEBUG);
    axon_dev_info_t *list;
    int count, softibs = 0;

    ASSERT_EQ(AXON_OK, axon_dev_get_list(&list, &count));
    for (int i = 0; i < count; ++i) {
        softibs += !strcmp(list[i].backend, "softib");
    }
    axon_dev_free_list(list);
    EXPECT_EQ(0, softibs) << "softib listed devices under a bad AXON_SOFTIB_LOCALITY";
    EXPECT_TRUE(log.any_contains("AXON_SOFTIB_LOCALITY", "'pci:zz'"));

    env.set("AXON_SOFTIB_LOCALITY", "numa:0,numa:1,numa:0");
    ASSERT_EQ(AXON_OK, axon_dev_get_list(&list, &count));
    axon_dev_free_list(list);
    EXPECT_TRUE(log.any_contains("AXON_SOFTIB_LOCALITY lists 3 localities for 2 devices"));
}

/* ---------------------------------------------------------------- lane choice */

namespace {

/*
 * One context over rc on two softib devices (placed by locality, "none" for
 * none), a worker made by the calling thread and an endpoint to a second
 * worker; the devices of its lanes, or "" if something failed. What it is
 * asked: AXON_NET_DEVICES, or device atomics with shm carrying the rest.
 */
struct RcLanes {
    std::string small, bulk, amo;
};

struct LaneAsk {
    const char *net_devices = "all";
    bool        device_atomics_beside_shm = false;
};

RcLanes rc_lanes(const std::string &topology, const char *locality, const LaneAsk &ask)
{
    EnvGuard env;
    env.set("AXON_SOFTIB_DEVICES", "2");
    env.set("AXON_SOFTIB_LOCALITY", locality);
    axon_config_kv_t kv[] = {{"TLS", ask.device_atomics_beside_shm ? "shm,rc" : "rc"},
                             {"TOPOLOGY", topology.c_str()}, {"NET_DEVICES", ask.net_devices},
                             {"LOG_LEVEL", "debug"},
                             {"ATOMIC_MODE", ask.device_atomics_beside_shm ? "device" : "cpu"}};
    axon_context_params_t params = {AXON_FEATURE_TAG | AXON_FEATURE_RMA | AXON_FEATURE_AMO, kv, 5};
    axon_worker_h w1 = NULL, w2 = NULL;
    axon_context_h ctx;
    axon_ep_h ep;
    RcLanes lanes;
    void *addr;
    size_t len;

    if (axon_init(&params, &ctx) != AXON_OK) {
        ADD_FAILURE() << "axon_init";
        return lanes;
    }
    if ((axon_worker_create(ctx, NULL, &w1) == AXON_OK) &&
        (axon_worker_create(ctx, NULL, &w2) == AXON_OK) &&
        (axon_worker_get_address(w2, &addr, &len) == AXON_OK)) {
        axon_ep_params_t ep_params = {addr, len};
        if (axon_ep_create(w1, &ep_params, &ep) == AXON_OK) {
            lanes.small = ep->am_lane.resource->dev_name;
            lanes.bulk  = ep->bulk_lane.resource->dev_name;
            lanes.amo   = (ep->amo_lane.tl_ep != NULL) ? ep->amo_lane.resource->dev_name : "";
            axon_ep_close_nb(ep, AXON_EP_CLOSE_FORCE, NULL);
        }
        axon_worker_release_address(w2, addr);
    }
    if (w1 != NULL) {
        axon_worker_destroy(w1);
    }
    if (w2 != NULL) {
        axon_worker_destroy(w2);
    }
    axon_cleanup(ctx);
    return lanes;
}

/* The lanes of a worker made on CPU cpu, over the two-package XML. */
RcLanes rc_lanes_on_cpu(int cpu, const std::string &locality, const LaneAsk &ask = LaneAsk())
{
    TwoPackagesXml xml;
    CpuBinding on(cpu);

    if (!xml.ok() || !on.ok()) {
        ADD_FAILURE() << (xml.ok() ? "cannot bind to CPU " : "cannot write the XML ") << cpu;
        return RcLanes();
    }
    return rc_lanes(xml.source(), locality.c_str(), ask);
}

const std::string kBothPlaced = std::string(kNearCpu0) + "," + kNearCpu1;

} // namespace

/* Bound to package 0's CPU the worker uses softib0, to package 1's softib1. */
TEST(TopoLaneChoice, DeviceFollowsTheThreadsPackage)
{
    NEEDS_HWLOC();
    NEEDS_TWO_CPUS();
    for (int cpu = 0; cpu < 2; ++cpu) {
        LogCapture log(AXON_LOG_DEBUG);
        RcLanes lanes = rc_lanes_on_cpu(cpu, kBothPlaced);
        std::string near = "softib" + std::to_string(cpu) + ":1";

        EXPECT_EQ(near, lanes.small) << "thread on CPU " << cpu;
        EXPECT_EQ(near, lanes.bulk) << "thread on CPU " << cpu;
        EXPECT_TRUE(log.any_contains(("rc/" + near).c_str(), "distance 0 from this thread"));
    }
}

/* The ranking is a preference among the devices AXON_NET_DEVICES admits, never over it. */
TEST(TopoLaneChoice, NetDevicesOverridesTheRanking)
{
    NEEDS_HWLOC();
    NEEDS_TWO_CPUS();
    LaneAsk only_softib0;
    only_softib0.net_devices = "softib0:1";
    RcLanes lanes = rc_lanes_on_cpu(1, kBothPlaced, only_softib0);

    EXPECT_EQ("softib0:1", lanes.small);
    EXPECT_EQ("softib0:1", lanes.bulk);
}

/* Device atomic mode with shm carrying messages: the atomics' own rc lane is the near device's. */
TEST(TopoLaneChoice, DeviceAtomicsUseTheNearestDevice)
{
    NEEDS_HWLOC();
    NEEDS_TWO_CPUS();
    LaneAsk atomics;
    atomics.device_atomics_beside_shm = true;
    for (int cpu = 0; cpu < 2; ++cpu) {
        RcLanes lanes = rc_lanes_on_cpu(cpu, kBothPlaced, atomics);

        EXPECT_EQ("memory", lanes.small) << "shm carries the messages";
        EXPECT_EQ("softib" + std::to_string(cpu) + ":1", lanes.amo) << "thread on CPU " << cpu;
    }
}

/* A device without locality: the first device, as before topology, and a debug line why. */
TEST(TopoLaneChoice, DeviceWithoutLocalityKeepsTheOrder)
{
    NEEDS_TWO_CPUS();
    LogCapture log(AXON_LOG_DEBUG);
    /* softib1 sits by CPU 1, softib0 has no locality: the order wins. */
    RcLanes lanes = rc_lanes_on_cpu(1, std::string("none,") + kNearCpu1);

    EXPECT_EQ("softib0:1", lanes.small);
    EXPECT_EQ("softib0:1", lanes.bulk);
#ifdef HAVE_HWLOC
    EXPECT_TRUE(log.any_contains("rc/softib0:1: distance unknown", "the device has no locality"));
#else
    EXPECT_TRUE(log.any_contains("rc/softib0:1: distance unknown", "built without hwloc"));
    /* Without hwloc even placed devices keep the order. */
    lanes = rc_lanes_on_cpu(1, kBothPlaced);
    EXPECT_EQ("softib0:1", lanes.small);
    EXPECT_EQ("softib0:1", lanes.bulk);
#endif
    EXPECT_TRUE(log.any_contains("has no known distance", "keep their listed order"));
}
