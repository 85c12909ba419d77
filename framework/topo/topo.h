/*
 * The host's topology (hwloc), for placing work near the hardware it uses:
 * how far a network device sits from the calling thread's CPUs, and memory
 * on the calling thread's NUMA node. Loaded once per process while a
 * holder (a context) has it; queries after that only read it, so threads
 * call them concurrently (each under a context, which keeps it loaded).
 * Everything here runs at init, worker or endpoint creation, never per
 * message.
 *
 * A device's locality is a string (axon_resource_t.locality): "" for
 * unknown, "pci:DDDD:BB:DD.F" (its PCI bus id) or "numa:N" (it sits by NUMA
 * node N). A build without hwloc knows no locality: every device is at an
 * unknown distance, and device order stays as the components listed it.
 */
#ifndef AXON_TOPO_H
#define AXON_TOPO_H

#include <stddef.h>
#include "axon_status.h"

/* Distance of a device whose locality or the thread's binding is not known. */
#define AXON_TOPO_DISTANCE_UNKNOWN (~0u)

/*
 * Is locality a well-formed locality string ("" included)? When not,
 * AXON_ERR_INVALID_PARAM and an error line naming var_name and the bad
 * value. No topology needed.
 */
axon_status_t axon_topo_locality_check(const char *locality, const char *var_name);

/*
 * The locality of a device from its sysfs node (sysfs_path: the directory
 * whose "device" link leads to the bus it sits on, as
 * /sys/class/infiniband/mlx5_0 or /sys/class/net/eth0): "pci:<bus id>" when
 * that is a PCI function, else "" (a virtual device), with a debug line.
 */
void axon_topo_sysfs_locality(const char *sysfs_path, char *buf, size_t max);

/*
 * Take a reference on the process's topology: source "" is this host, read
 * on the first query that needs it (its PCI devices only when a locality
 * names one), "xml:PATH" an hwloc XML file, "synthetic:DESC" an hwloc
 * synthetic description (tests: two packages on a host with one), both
 * loaded here. A file source that cannot be loaded is
 * AXON_ERR_INVALID_PARAM with an error line; without hwloc every source
 * loads as "no topology" (a debug line).
 * A second holder asking for another source keeps the loaded one (warning).
 */
axon_status_t axon_topo_get(const char *source);
void          axon_topo_put(void);

/*
 * How far a device at locality is from the CPUs the calling thread is bound
 * to: 0 when they all sit under the device's package or NUMA node, else
 * how many levels the device sits below the smallest object holding both.
 * AXON_TOPO_DISTANCE_UNKNOWN when there is no topology, no locality or the
 * locality names nothing in the topology; why (if not NULL) then says so.
 */
unsigned      axon_topo_device_distance(const char *locality, char *why, size_t max);

/*
 * The NUMA node of the calling thread: the one its binding lies in, or, for
 * a binding over several, the node of the CPU it runs on now. -1 (why says
 * so) when unknown.
 */
int           axon_topo_thread_numa_node(char *why, size_t max);

/*
 * Prefer the calling thread's NUMA node for the pages of [addr, addr+length)
 * (page-aligned, mapped, not yet touched): mbind MPOL_PREFERRED, so a full
 * node still serves from another. For a shared file mapping the policy is
 * the file's, so pages allocated later by fallocate follow it too.
 * Returns the node, or -1 when nothing was bound (no topology, a topology
 * not of this host, unknown node, mbind refused: a kernel without NUMA, a
 * cpuset without the node), with a debug line saying why: placement only
 * helps, unplaced memory works.
 */
int           axon_topo_mem_bind_local(void *addr, size_t length);

/* "package 1 (cpus 0x2, NUMA node 1)" for locality, or why it is unknown; for axon_info. */
void          axon_topo_locality_describe(const char *locality, char *buf, size_t max);

/* "cpus 0x3 (NUMA node 0)": the calling thread's binding, for axon_info. */
void          axon_topo_binding_describe(char *buf, size_t max);

#endif
