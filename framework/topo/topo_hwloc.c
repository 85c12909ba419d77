/*
 * The topology service on hwloc (topo.h). One topology per process, kept
 * while a holder (a context) has it and replaced only when a holder asks for
 * another source while none holds it; freed at exit.
 *
 * This host's topology is read on the first question that needs it, in two
 * parts: CPUs and NUMA nodes (a few ms of sysfs), and the same with the PCI
 * tree, read only when a device's locality names a PCI function (hwloc reads
 * every function's config space: ~2 ms each on a virtual machine, where each
 * read traps). A process on shared memory or without NICs never pays for
 * the PCI part; each test process of the suite started paying ~20 ms before.
 * A file source is loaded by axon_topo_get, so a bad one fails there.
 * hwloc's read-only queries are thread-safe: a part, once loaded, is read
 * without the lock until the last holder goes and another source comes.
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

typedef enum {
    AXON_TOPO_CPUS,   /* packages, cores, NUMA nodes */
    AXON_TOPO_IO,     /* the same and the PCI devices and bridges device locality needs */
    AXON_TOPO_PARTS
} axon_topo_part_t;

static pthread_mutex_t  axon_topo_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned         axon_topo_holders;
static int              axon_topo_have_source;        /* axon_topo_source is set */
static char             axon_topo_source[256];
static int              axon_topo_thissystem;
static hwloc_topology_t axon_topo[AXON_TOPO_PARTS];   /* NULL until read */
static int              axon_topo_failed[AXON_TOPO_PARTS];

#define AXON_TOPO_WHY(...) \
    do { if (why != NULL) { snprintf(why, max, __VA_ARGS__); } } while (0)

/*
 * hwloc components left out: Linux's sysfs gives the PCI tree without
 * libpciaccess ("pci", which keeps memory past the topology's end), and
 * packages and NUMA nodes without cpuid ("x86", which cannot run under
 * valgrind and says so on stderr); GPUs are no network devices.
 */
static const char *const axon_topo_skipped[] = {"pci", "x86", "opencl", "gl"};

/* Read one topology: this host's (kind HOST), or a file's; NULL on failure. */
static hwloc_topology_t axon_topo_read(axon_topo_source_t kind, const char *arg, int with_io)
{
    hwloc_topology_t topo;
    unsigned i;
    int ret = 0;

    if (hwloc_topology_init(&topo) != 0) {
        return NULL;
    }
    hwloc_topology_set_io_types_filter(topo, with_io ? HWLOC_TYPE_FILTER_KEEP_IMPORTANT :
                                                       HWLOC_TYPE_FILTER_KEEP_NONE);
    hwloc_topology_set_type_filter(topo, HWLOC_OBJ_OS_DEVICE, HWLOC_TYPE_FILTER_KEEP_NONE);
    for (i = 0; i < sizeof(axon_topo_skipped) / sizeof(axon_topo_skipped[0]); ++i) {
        hwloc_topology_set_components(topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST,
                                      axon_topo_skipped[i]);
    }
    if (kind == AXON_TOPO_SOURCE_XML) {
        ret = hwloc_topology_set_xml(topo, arg);
    } else if (kind == AXON_TOPO_SOURCE_SYNTHETIC) {
        ret = hwloc_topology_set_synthetic(topo, arg);
    }
    if ((ret != 0) || (hwloc_topology_load(topo) != 0)) {
        hwloc_topology_destroy(topo);
        return NULL;
    }
    axon_debug("topology of %s%s: %d packages, %d NUMA nodes, %d PCI devices kept",
               axon_topo_source[0] ? axon_topo_source : "this host",
               with_io ? "" : " (CPUs and memory)",
               hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE),
               hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE),
               hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PCI_DEVICE));
    return topo;
}

static void axon_topo_unload(void)
{
    /* A file's topology is both parts at once. */
    if ((axon_topo[AXON_TOPO_IO] != NULL) &&
        (axon_topo[AXON_TOPO_IO] != axon_topo[AXON_TOPO_CPUS])) {
        hwloc_topology_destroy(axon_topo[AXON_TOPO_IO]);
    }
    if (axon_topo[AXON_TOPO_CPUS] != NULL) {
        hwloc_topology_destroy(axon_topo[AXON_TOPO_CPUS]);
    }
    memset(axon_topo, 0, sizeof(axon_topo));
    memset(axon_topo_failed, 0, sizeof(axon_topo_failed));
    axon_topo_have_source = 0;
}

/* Take source as the process's: a file is read now (with its PCI tree), this host later. */
static axon_status_t axon_topo_begin(const char *source)
{
    axon_topo_source_t kind;
    hwloc_topology_t topo;
    const char *arg;
    axon_status_t status;

    status = axon_topo_source_parse(source, &kind, &arg);
    if (status != AXON_OK) {
        return status;
    }
    snprintf(axon_topo_source, sizeof(axon_topo_source), "%s", source);
    axon_topo_thissystem = 1;
    if (kind != AXON_TOPO_SOURCE_HOST) {
        topo = axon_topo_read(kind, arg, 1);
        if (topo == NULL) {
            axon_error("AXON_TOPOLOGY='%s': hwloc cannot load it (bad file or description)",
                       source);
            return AXON_ERR_INVALID_PARAM;
        }
        axon_topo_thissystem = hwloc_topology_is_thissystem(topo);
        axon_topo[AXON_TOPO_CPUS] = topo;
        axon_topo[AXON_TOPO_IO]   = topo;
    }
    axon_topo_have_source = 1;
    return AXON_OK;
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
    same = axon_topo_have_source && (strcmp(source, axon_topo_source) == 0);
    if ((axon_topo_holders == 0) && !same) {
        axon_topo_unload();
        status = axon_topo_begin(source);
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
 * A part of the topology while a holder has it, read on first use; NULL and
 * why when nobody holds it (a query outside any context sees none) or this
 * host's cannot be read (said once, at error level).
 */
static hwloc_topology_t axon_topo_part(axon_topo_part_t part, char *why, size_t max)
{
    hwloc_topology_t topo = NULL;

    if (__atomic_load_n(&axon_topo_holders, __ATOMIC_ACQUIRE) == 0) {
        AXON_TOPO_WHY("no topology loaded");
        return NULL;
    }
    topo = __atomic_load_n(&axon_topo[part], __ATOMIC_ACQUIRE);
    if (topo != NULL) {
        return topo;
    }
    pthread_mutex_lock(&axon_topo_lock);
    if ((axon_topo_holders > 0) && (axon_topo[part] == NULL) && !axon_topo_failed[part]) {
        topo = axon_topo_read(AXON_TOPO_SOURCE_HOST, NULL, part == AXON_TOPO_IO);
        if (topo == NULL) {
            axon_error("hwloc cannot read this host's topology%s: %s",
                       (part == AXON_TOPO_IO) ? " with its PCI devices" : "", strerror(errno));
            axon_topo_failed[part] = 1;
        }
        __atomic_store_n(&axon_topo[part], topo, __ATOMIC_RELEASE);
    }
    topo = (axon_topo_holders > 0) ? axon_topo[part] : NULL;
    pthread_mutex_unlock(&axon_topo_lock);
    if (topo == NULL) {
        AXON_TOPO_WHY("no topology loaded");
    }
    return topo;
}

/*
 * The CPUs the calling thread may run on, as far as topo has them (a file's
 * topology may hold fewer than the host); NULL and why if none.
 */
static hwloc_bitmap_t axon_topo_thread_cpus(hwloc_topology_t topo, char *why, size_t max)
{
    hwloc_bitmap_t cpus;
    cpu_set_t set;
    int cpu;

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
    hwloc_bitmap_and(cpus, cpus, hwloc_topology_get_topology_cpuset(topo));
    if (hwloc_bitmap_iszero(cpus)) {
        AXON_TOPO_WHY("none of the thread's CPUs is in the topology");
        hwloc_bitmap_free(cpus);
        return NULL;
    }
    return cpus;
}

/*
 * Where a locality is: the object whose CPUs are the device's local ones (a
 * PCI device's first non-I/O ancestor, a NUMA node itself) and the topology
 * (part) that holds it, or NULL and why. Only a PCI locality reads the PCI part.
 */
static hwloc_obj_t axon_topo_locality_obj(const char *locality, hwloc_topology_t *topo_p,
                                          char *why, size_t max)
{
    axon_topo_locality_t loc;
    hwloc_topology_t topo;
    hwloc_obj_t obj;

    if (axon_topo_locality_parse(locality, &loc) != 0) {
        AXON_TOPO_WHY("malformed locality '%s'", locality);
        return NULL;
    }
    switch (loc.kind) {
    case AXON_TOPO_AT_PCI:
        topo = axon_topo_part(AXON_TOPO_IO, why, max);
        if (topo == NULL) {
            return NULL;
        }
        obj = hwloc_get_pcidev_by_busid(topo, loc.domain, loc.bus, loc.dev, loc.func);
        if (obj == NULL) {
            AXON_TOPO_WHY("PCI device %s is not in the topology", locality + 4);
            return NULL;
        }
        obj = hwloc_get_non_io_ancestor_obj(topo, obj);
        break;
    case AXON_TOPO_AT_NUMA:
        topo = axon_topo_part(AXON_TOPO_CPUS, why, max);
        if (topo == NULL) {
            return NULL;
        }
        obj = hwloc_get_numanode_obj_by_os_index(topo, loc.numa);
        if (obj == NULL) {
            AXON_TOPO_WHY("NUMA node %u is not in the topology", loc.numa);
        }
        break;
    default:
        AXON_TOPO_WHY("the device has no locality");
        return NULL;
    }
    *topo_p = topo;
    return obj;
}

unsigned axon_topo_device_distance(const char *locality, char *why, size_t max)
{
    hwloc_obj_t dev, near, thread_obj, common;
    hwloc_topology_t topo;
    hwloc_bitmap_t cpus;
    unsigned distance;

    dev = axon_topo_locality_obj(locality, &topo, why, max);
    if (dev == NULL) {
        return AXON_TOPO_DISTANCE_UNKNOWN;
    }
    cpus = axon_topo_thread_cpus(topo, why, max);
    if (cpus == NULL) {
        return AXON_TOPO_DISTANCE_UNKNOWN;
    }
    if (hwloc_bitmap_isincluded(cpus, dev->cpuset)) {
        distance = 0;
    } else {
        /* A NUMA node hangs off a normal object: measure the tree from there. */
        near       = hwloc_obj_type_is_memory(dev->type) ? dev->parent : dev;
        thread_obj = hwloc_get_obj_covering_cpuset(topo, cpus);
        common     = hwloc_get_common_ancestor_obj(topo, near, thread_obj);
        distance   = 1 + (unsigned)(near->depth - common->depth);
    }
    hwloc_bitmap_free(cpus);
    return distance;
}

int axon_topo_thread_numa_node(char *why, size_t max)
{
    hwloc_topology_t topo;
    hwloc_bitmap_t cpus, nodes;
    hwloc_obj_t pu;
    int node = -1, cpu;

    topo = axon_topo_part(AXON_TOPO_CPUS, why, max);
    cpus = (topo != NULL) ? axon_topo_thread_cpus(topo, why, max) : NULL;
    if (cpus == NULL) {
        return -1;
    }
    nodes = hwloc_bitmap_alloc();
    if (nodes == NULL) {
        AXON_TOPO_WHY("out of memory");
        hwloc_bitmap_free(cpus);
        return -1;
    }
    hwloc_cpuset_to_nodeset(topo, cpus, nodes);
    if (hwloc_bitmap_weight(nodes) == 1) {
        node = hwloc_bitmap_first(nodes);
    } else {
        /* Bound across nodes: where it runs now is where it first touches. */
        cpu = sched_getcpu();
        pu  = (cpu >= 0) ? hwloc_get_pu_obj_by_os_index(topo, (unsigned)cpu) : NULL;
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

    if ((__atomic_load_n(&axon_topo_holders, __ATOMIC_ACQUIRE) > 0) && !axon_topo_thissystem) {
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
    hwloc_topology_t topo;
    hwloc_obj_t obj;

    obj = axon_topo_locality_obj(locality, &topo, why, sizeof(why));
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
    hwloc_topology_t topo;
    hwloc_bitmap_t cpus = NULL;
    int node;

    topo = axon_topo_part(AXON_TOPO_CPUS, why, sizeof(why));
    if (topo != NULL) {
        cpus = axon_topo_thread_cpus(topo, why, sizeof(why));
    }
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
