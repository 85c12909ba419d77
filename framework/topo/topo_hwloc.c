/*
 * The topology service on hwloc (topo.h). One topology per process, loaded
 * with the important I/O devices (NICs, their bridges) by the first holder
 * and kept for later contexts (a load reads sysfs for tens of milliseconds);
 * replaced only when a holder asks for another source while none holds it,
 * freed at exit. hwloc's read-only queries are thread-safe, so only get/put
 * take the lock.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/mempolicy.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <hwloc.h>
#include "log.h"
#include "topo.h"
#include "topo_parse.h"

static pthread_mutex_t  axon_topo_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned         axon_topo_holders;
static hwloc_topology_t axon_topo;          /* NULL while nobody holds it */
static int              axon_topo_thissystem;
static char             axon_topo_source[256];

/* The topology while a holder has it, else NULL: a query outside any context sees none. */
static hwloc_topology_t axon_topo_held(void)
{
    return (__atomic_load_n(&axon_topo_holders, __ATOMIC_ACQUIRE) > 0) ? axon_topo : NULL;
}

#define AXON_TOPO_WHY(...) \
    do { if (why != NULL) { snprintf(why, max, __VA_ARGS__); } } while (0)

/*
 * hwloc components left out: Linux's sysfs gives the PCI tree without
 * libpciaccess ("pci", which keeps memory past the topology's end), and
 * packages and NUMA nodes without cpuid ("x86", which cannot run under
 * valgrind and says so on stderr); GPUs are no network devices.
 */
static const char *const axon_topo_skipped[] = {"pci", "x86", "opencl", "gl"};

static axon_status_t axon_topo_load(const char *source)
{
    axon_topo_source_t kind;
    const char *arg;
    axon_status_t status;
    unsigned i;
    int ret = 0;

    status = axon_topo_source_parse(source, &kind, &arg);
    if (status != AXON_OK) {
        return status;
    }
    if (hwloc_topology_init(&axon_topo) != 0) {
        axon_error("hwloc_topology_init failed: %s", strerror(errno));
        axon_topo = NULL;
        return AXON_ERR_NO_MEMORY;
    }
    /* PCI devices and the bridges above them: what device locality needs. */
    hwloc_topology_set_io_types_filter(axon_topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    hwloc_topology_set_type_filter(axon_topo, HWLOC_OBJ_OS_DEVICE, HWLOC_TYPE_FILTER_KEEP_NONE);
    for (i = 0; i < sizeof(axon_topo_skipped) / sizeof(axon_topo_skipped[0]); ++i) {
        hwloc_topology_set_components(axon_topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST,
                                      axon_topo_skipped[i]);
    }
    if (kind == AXON_TOPO_SOURCE_XML) {
        ret = hwloc_topology_set_xml(axon_topo, arg);
    } else if (kind == AXON_TOPO_SOURCE_SYNTHETIC) {
        ret = hwloc_topology_set_synthetic(axon_topo, arg);
    }
    if ((ret != 0) || (hwloc_topology_load(axon_topo) != 0)) {
        axon_error("AXON_TOPOLOGY='%s': hwloc cannot load it (%s)", source,
                   (ret != 0) ? "bad file or description" : strerror(errno));
        hwloc_topology_destroy(axon_topo);
        axon_topo = NULL;
        return AXON_ERR_INVALID_PARAM;
    }
    axon_topo_thissystem = hwloc_topology_is_thissystem(axon_topo);
    snprintf(axon_topo_source, sizeof(axon_topo_source), "%s", source);
    axon_debug("topology of %s: %d packages, %d NUMA nodes, %d PCI devices kept",
               source[0] ? source : "this host",
               hwloc_get_nbobjs_by_type(axon_topo, HWLOC_OBJ_PACKAGE),
               hwloc_get_nbobjs_by_type(axon_topo, HWLOC_OBJ_NUMANODE),
               hwloc_get_nbobjs_by_type(axon_topo, HWLOC_OBJ_PCI_DEVICE));
    return AXON_OK;
}

static void axon_topo_unload(void)
{
    if (axon_topo != NULL) {
        hwloc_topology_destroy(axon_topo);
        axon_topo = NULL;
    }
}

static void __attribute__((destructor)) axon_topo_at_exit(void)
{
    axon_topo_unload();
}

axon_status_t axon_topo_get(const char *source)
{
    axon_status_t status = AXON_OK;
    int same;

    pthread_mutex_lock(&axon_topo_lock);
    same = (axon_topo != NULL) && (strcmp(source, axon_topo_source) == 0);
    if ((axon_topo_holders == 0) && !same) {
        axon_topo_unload();
        status = axon_topo_load(source);
    } else if (!same) {
        axon_warn("AXON_TOPOLOGY='%s' ignored: this process already uses '%s' until its "
                  "contexts are cleaned up", source, axon_topo_source);
    }
    if (status == AXON_OK) {
        __atomic_add_fetch(&axon_topo_holders, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&axon_topo_lock);
    return status;
}

void axon_topo_put(void)
{
    pthread_mutex_lock(&axon_topo_lock);
    if (axon_topo_holders > 0) {
        __atomic_sub_fetch(&axon_topo_holders, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&axon_topo_lock);
}

/*
 * The CPUs the calling thread may run on, as far as the topology has them
 * (a file's topology may hold fewer than the host); NULL and why if none.
 */
static hwloc_bitmap_t axon_topo_thread_cpus(char *why, size_t max)
{
    hwloc_bitmap_t cpus;
    cpu_set_t set;
    int cpu;

    if (axon_topo_held() == NULL) {
        AXON_TOPO_WHY("no topology loaded");
        return NULL;
    }
    if (pthread_getaffinity_np(pthread_self(), sizeof(set), &set) != 0) {
        AXON_TOPO_WHY("the thread's binding cannot be read");
        return NULL;
    }
    cpus = hwloc_bitmap_alloc();
    if (cpus == NULL) {
        AXON_TOPO_WHY("out of memory");
        return NULL;
    }
    for (cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (CPU_ISSET(cpu, &set)) {
            hwloc_bitmap_set(cpus, (unsigned)cpu);
        }
    }
    hwloc_bitmap_and(cpus, cpus, hwloc_topology_get_topology_cpuset(axon_topo));
    if (hwloc_bitmap_iszero(cpus)) {
        AXON_TOPO_WHY("none of the thread's CPUs is in the topology");
        hwloc_bitmap_free(cpus);
        return NULL;
    }
    return cpus;
}

/*
 * Where a locality is: the object whose CPUs are the device's local ones (a
 * PCI device's first non-I/O ancestor, a NUMA node itself), or NULL and why.
 */
static hwloc_obj_t axon_topo_locality_obj(const char *locality, char *why, size_t max)
{
    axon_topo_locality_t loc;
    hwloc_obj_t obj;

    if (axon_topo_held() == NULL) {
        AXON_TOPO_WHY("no topology loaded");
        return NULL;
    }
    if (axon_topo_locality_parse(locality, &loc) != 0) {
        AXON_TOPO_WHY("malformed locality '%s'", locality);
        return NULL;
    }
    switch (loc.kind) {
    case AXON_TOPO_AT_PCI:
        obj = hwloc_get_pcidev_by_busid(axon_topo, loc.domain, loc.bus, loc.dev, loc.func);
        if (obj == NULL) {
            AXON_TOPO_WHY("PCI device %s is not in the topology", locality + 4);
            return NULL;
        }
        return hwloc_get_non_io_ancestor_obj(axon_topo, obj);
    case AXON_TOPO_AT_NUMA:
        obj = hwloc_get_numanode_obj_by_os_index(axon_topo, loc.numa);
        if (obj == NULL) {
            AXON_TOPO_WHY("NUMA node %u is not in the topology", loc.numa);
        }
        return obj;
    default:
        AXON_TOPO_WHY("the device has no locality");
        return NULL;
    }
}

unsigned axon_topo_device_distance(const char *locality, char *why, size_t max)
{
    hwloc_obj_t dev, near, thread_obj, common;
    hwloc_bitmap_t cpus;
    unsigned distance;

    dev = axon_topo_locality_obj(locality, why, max);
    if (dev == NULL) {
        return AXON_TOPO_DISTANCE_UNKNOWN;
    }
    cpus = axon_topo_thread_cpus(why, max);
    if (cpus == NULL) {
        return AXON_TOPO_DISTANCE_UNKNOWN;
    }
    if (hwloc_bitmap_isincluded(cpus, dev->cpuset)) {
        distance = 0;
    } else {
        /* A NUMA node hangs off a normal object: measure the tree from there. */
        near       = hwloc_obj_type_is_memory(dev->type) ? dev->parent : dev;
        thread_obj = hwloc_get_obj_covering_cpuset(axon_topo, cpus);
        common     = hwloc_get_common_ancestor_obj(axon_topo, near, thread_obj);
        distance   = 1 + (unsigned)(near->depth - common->depth);
    }
    hwloc_bitmap_free(cpus);
    return distance;
}

int axon_topo_thread_numa_node(char *why, size_t max)
{
    hwloc_bitmap_t cpus, nodes;
    hwloc_obj_t pu;
    int node = -1, cpu;

    cpus = axon_topo_thread_cpus(why, max);
    if (cpus == NULL) {
        return -1;
    }
    nodes = hwloc_bitmap_alloc();
    if (nodes == NULL) {
        AXON_TOPO_WHY("out of memory");
        hwloc_bitmap_free(cpus);
        return -1;
    }
    hwloc_cpuset_to_nodeset(axon_topo, cpus, nodes);
    if (hwloc_bitmap_weight(nodes) == 1) {
        node = hwloc_bitmap_first(nodes);
    } else {
        /* Bound across nodes: where it runs now is where it first touches. */
        cpu = sched_getcpu();
        pu  = (cpu >= 0) ? hwloc_get_pu_obj_by_os_index(axon_topo, (unsigned)cpu) : NULL;
        if ((pu != NULL) && (hwloc_bitmap_weight(pu->nodeset) == 1)) {
            node = hwloc_bitmap_first(pu->nodeset);
        } else {
            AXON_TOPO_WHY("the thread spans %d NUMA nodes and its CPU %d has no single one",
                          hwloc_bitmap_weight(nodes), cpu);
        }
    }
    hwloc_bitmap_free(nodes);
    hwloc_bitmap_free(cpus);
    return node;
}

int axon_topo_mem_bind_local(void *addr, size_t length)
{
    unsigned long mask[4] = {0};   /* up to 256 nodes; larger ones stay unbound */
    char why[128];
    int node;

    if ((axon_topo_held() != NULL) && !axon_topo_thissystem) {
        axon_debug("memory at %p not bound: the topology (AXON_TOPOLOGY='%s') is not this "
                   "host's", addr, axon_topo_source);
        return -1;
    }
    node = axon_topo_thread_numa_node(why, sizeof(why));
    if ((node < 0) || ((unsigned)node >= 8 * sizeof(mask))) {
        axon_debug("memory at %p not bound: %s", addr,
                   (node < 0) ? why : "NUMA node number past 255");
        return -1;
    }
    mask[node / (8 * sizeof(mask[0]))] |= 1ul << (node % (8 * sizeof(mask[0])));
    /* The kernel reads maxnode - 1 bits. */
    if (syscall(SYS_mbind, addr, length, MPOL_PREFERRED, mask, 8 * sizeof(mask) + 1, 0) != 0) {
        /* A kernel without NUMA, a cpuset whose mems leave the node out: unplaced still works. */
        axon_debug("memory at %p not bound: mbind of %zu bytes to NUMA node %d failed: %s", addr,
                   length, node, strerror(errno));
        return -1;
    }
    return node;
}

void axon_topo_locality_describe(const char *locality, char *buf, size_t max)
{
    char cpus[64], nodes[64], why[128];
    hwloc_obj_t obj;

    obj = axon_topo_locality_obj(locality, why, sizeof(why));
    if (obj == NULL) {
        snprintf(buf, max, "unknown (%s)", why);
        return;
    }
    hwloc_bitmap_snprintf(cpus, sizeof(cpus), obj->cpuset);
    hwloc_bitmap_list_snprintf(nodes, sizeof(nodes), obj->nodeset);
    snprintf(buf, max, "%s %u (cpus %s, NUMA node %s)", hwloc_obj_type_string(obj->type),
             hwloc_obj_type_is_memory(obj->type) ? obj->os_index : obj->logical_index, cpus,
             nodes);
}

void axon_topo_binding_describe(char *buf, size_t max)
{
    char cpus_str[64], why[128];
    hwloc_bitmap_t cpus;
    int node;

    cpus = axon_topo_thread_cpus(why, sizeof(why));
    if (cpus == NULL) {
        snprintf(buf, max, "unknown (%s)", why);
        return;
    }
    hwloc_bitmap_snprintf(cpus_str, sizeof(cpus_str), cpus);
    hwloc_bitmap_free(cpus);
    node = axon_topo_thread_numa_node(why, sizeof(why));
    if (node >= 0) {
        snprintf(buf, max, "cpus %s (NUMA node %d)", cpus_str, node);
    } else {
        snprintf(buf, max, "cpus %s (NUMA node unknown: %s)", cpus_str, why);
    }
}
