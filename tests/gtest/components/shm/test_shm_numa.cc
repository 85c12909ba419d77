/*
 * shm: a worker's receive ring (its segment, whose cells also carry the
 * streamed rendezvous data) prefers the NUMA node of the thread that made
 * the worker. Checked on the policy the segment carries (get_mempolicy
 * MPOL_F_ADDR: MPOL_DEFAULT when nothing placed it) and on where its pages
 * are (move_pages), against the node sysfs gives for the thread's CPU.
 */
#include <gtest/gtest.h>

#include <dirent.h>
#include <linux/mempolicy.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>
#include <vector>

extern "C" {
#include "axon_config.h"
#include "axon.h"
#include "shm_mem_seg.h"
#include "topo.h"
}

#include "log_capture.h"
#include "topo_env.h"

namespace {

/* The node sysfs puts cpu on (cpuN/nodeK), -1 without NUMA in sysfs. */
int sysfs_node_of_cpu(int cpu)
{
    std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu);
    DIR *d = opendir(dir.c_str());
    struct dirent *e;
    int node = -1;

    while ((d != nullptr) && ((e = readdir(d)) != nullptr)) {
        if ((strncmp(e->d_name, "node", 4) == 0) && (sscanf(e->d_name + 4, "%d", &node) == 1)) {
            break;
        }
    }
    if (d != nullptr) {
        closedir(d);
    }
    return node;
}

/* Where this process maps /dev/shm/<prefix>-*: start and length, {nullptr, 0} if not. */
std::pair<char *, size_t> shm_mapping(const std::string &prefix)
{
    FILE *maps = fopen("/proc/self/maps", "re");
    std::string needle = "/dev/shm/" + prefix + "-";
    unsigned long start, end;
    char line[512];
    std::pair<char *, size_t> found(nullptr, 0);

    while ((maps != nullptr) && fgets(line, sizeof(line), maps)) {
        if ((strstr(line, needle.c_str()) != nullptr) &&
            (sscanf(line, "%lx-%lx", &start, &end) == 2)) {
            found = std::make_pair(reinterpret_cast<char *>(start), (size_t)(end - start));
            break;
        }
    }
    if (maps != nullptr) {
        fclose(maps);
    }
    return found;
}

struct Policy {
    int           mode = -1;
    unsigned long nodes[4] = {0};
};

Policy policy_at(void *addr)
{
    Policy p;

    if (syscall(SYS_get_mempolicy, &p.mode, p.nodes, 8 * sizeof(p.nodes), addr,
                MPOL_F_ADDR) != 0) {
        p.mode = -1;
    }
    return p;
}

/*
 * The node of every page of [addr, addr + length), touched first by an
 * atomic add of 0 (a write that changes nothing: a plain read may leave a
 * shared page unmapped here, seen under valgrind as -ENOENT).
 */
std::vector<int> page_nodes(char *addr, size_t length)
{
    long page = sysconf(_SC_PAGESIZE);
    std::vector<void *> pages;
    std::vector<int> status;

    for (size_t off = 0; off < length; off += (size_t)page) {
        __atomic_fetch_add(addr + off, 0, __ATOMIC_RELAXED);
        pages.push_back(addr + off);
    }
    status.assign(pages.size(), -1);
    if (syscall(SYS_move_pages, 0, pages.size(), pages.data(), nullptr, status.data(), 0) != 0) {
        status.assign(1, -1000);
    }
    return status;
}

struct ShmWorker {
    axon_context_h ctx    = nullptr;
    axon_worker_h  worker = nullptr;

    axon_status_t open(const std::string &prefix, const char *topology,
                       const char *log_level = "warn")
    {
        axon_config_kv_t kv[] = {{"TLS", "shm"}, {"SHM_PREFIX", prefix.c_str()},
                                 {"TOPOLOGY", topology}, {"LOG_LEVEL", log_level}};
        axon_context_params_t params = {AXON_FEATURE_TAG, kv, 4};
        axon_status_t status = axon_init(&params, &ctx);

        return (status == AXON_OK) ? axon_worker_create(ctx, NULL, &worker) : status;
    }
    ~ShmWorker()
    {
        if (worker != nullptr) {
            axon_worker_destroy(worker);
        }
        if (ctx != nullptr) {
            axon_cleanup(ctx);
        }
    }
};

std::string test_prefix(const char *what)
{
    return "axt" + std::to_string(getpid()) + what;
}

/* The CPUs this thread may run on, in order. */
std::vector<int> usable_cpus()
{
    std::vector<int> cpus;
    cpu_set_t allowed;

    if (pthread_getaffinity_np(pthread_self(), sizeof(allowed), &allowed) == 0) {
        for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
            if (CPU_ISSET(cpu, &allowed)) {
                cpus.push_back(cpu);
            }
        }
    }
    return cpus;
}

/* [addr, addr + length) carries MPOL_PREFERRED for node alone, and every page is there. */
void expect_prefers(char *addr, size_t length, int node)
{
    Policy p = policy_at(addr), want;

    want.nodes[node / 64] = 1ul << (node % 64);
    EXPECT_EQ(MPOL_PREFERRED, p.mode) << "no placement on the memory";
    EXPECT_EQ(0, memcmp(want.nodes, p.nodes, sizeof(want.nodes)))
        << "expected node " << node << ", the memory prefers mask 0x" << std::hex << p.nodes[0];
    EXPECT_EQ(MPOL_PREFERRED, policy_at(addr + length - 1).mode) << "the policy covers it all";
    for (int at : page_nodes(addr, length)) {
        ASSERT_EQ(node, at) << "a page is not on node " << node;
    }
}

} // namespace

/* A worker made on a CPU's thread: its ring prefers that CPU's node, and is there. */
TEST(ShmPlacement, RingPrefersTheReceiversNode)
{
#ifndef HAVE_HWLOC
    GTEST_SKIP() << "built without hwloc: nothing is placed (RingUnboundWithoutThisHostsTopology)";
#endif
    std::vector<int> cpus = usable_cpus();
    ASSERT_FALSE(cpus.empty());
    if (sysfs_node_of_cpu(cpus[0]) < 0) {
        GTEST_SKIP() << "no NUMA nodes in sysfs";
    }
    /* The first and the last CPU: on a host of two nodes they lie on different ones. */
    for (int cpu : {cpus.front(), cpus.back()}) {
        CpuBinding on(cpu);
        ASSERT_TRUE(on.ok());
        std::string prefix = test_prefix(("nm" + std::to_string(cpu)).c_str());
        ShmWorker w;
        ASSERT_EQ(AXON_OK, w.open(prefix, ""));

        std::pair<char *, size_t> seg = shm_mapping(prefix);
        ASSERT_NE(nullptr, seg.first) << "no mapping of /dev/shm/" << prefix << "-*";
        SCOPED_TRACE("ring of a worker made on CPU " + std::to_string(cpu));
        expect_prefers(seg.first, seg.second, sysfs_node_of_cpu(cpu));
    }
}

/* Memory peers map (AXON_MEM_MAP_ALLOCATE over shm) prefers its owner's node before a peer touches it. */
TEST(ShmPlacement, AllocatedMemoryPrefersTheOwnersNode)
{
#ifndef HAVE_HWLOC
    GTEST_SKIP() << "built without hwloc: nothing is placed";
#endif
    std::vector<int> cpus = usable_cpus();
    ASSERT_FALSE(cpus.empty());
    if (sysfs_node_of_cpu(cpus.back()) < 0) {
        GTEST_SKIP() << "no NUMA nodes in sysfs";
    }
    CpuBinding on(cpus.back());
    ASSERT_TRUE(on.ok());
    ASSERT_EQ(AXON_OK, axon_topo_get(""));
    axon_mem_seg_t seg;
    ASSERT_EQ(AXON_OK, axon_mem_seg_alloc(1 << 20, 0x5eed, &seg));
    expect_prefers(static_cast<char *>(seg.address), 1 << 20, sysfs_node_of_cpu(cpus.back()));
    axon_mem_seg_free(&seg);
    axon_topo_put();
}

/* A topology that is not this host's (or none) places nothing, and says why. */
TEST(ShmPlacement, RingUnboundWithoutThisHostsTopology)
{
    std::string prefix = test_prefix("nobd");
    LogCapture log(AXON_LOG_DEBUG);
    {
        ShmWorker w;
        ASSERT_EQ(AXON_OK, w.open(prefix, "synthetic:pack:2 numa:1 pu:1", "debug"));
        std::pair<char *, size_t> seg = shm_mapping(prefix);
        ASSERT_NE(nullptr, seg.first);
        EXPECT_EQ(MPOL_DEFAULT, policy_at(seg.first).mode);
    }
#ifdef HAVE_HWLOC
    EXPECT_TRUE(log.any_contains("not bound: the topology", "is not this host's"));
#else
    EXPECT_TRUE(log.any_contains("not bound to a NUMA node: Axon was built without hwloc"));
#endif
}
