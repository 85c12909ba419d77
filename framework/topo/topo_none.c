/*
 * The topology service without hwloc (topo.h): sources are still checked,
 * but no device has a known distance and no memory is bound, so device
 * order and placement stay as they were before topology was used.
 */
#include <stdio.h>
#include "log.h"
#include "topo.h"
#include "topo_parse.h"

#define AXON_TOPO_NONE_WHY "Axon was built without hwloc"

axon_status_t axon_topo_get(const char *source)
{
    axon_topo_source_t kind;
    const char *arg;
    axon_status_t status;

    status = axon_topo_source_parse(source, &kind, &arg);
    if (status == AXON_OK) {
        axon_debug("no topology: " AXON_TOPO_NONE_WHY);
    }
    return status;
}

void axon_topo_put(void)
{
}

unsigned axon_topo_device_distance(const char *locality, char *why, size_t max)
{
    (void)locality;
    if (why != NULL) {
        snprintf(why, max, AXON_TOPO_NONE_WHY);
    }
    return AXON_TOPO_DISTANCE_UNKNOWN;
}

int axon_topo_thread_numa_node(char *why, size_t max)
{
    if (why != NULL) {
        snprintf(why, max, AXON_TOPO_NONE_WHY);
    }
    return -1;
}

int axon_topo_mem_bind_local(void *addr, size_t length)
{
    axon_debug("%zu bytes at %p not bound to a NUMA node: " AXON_TOPO_NONE_WHY, length, addr);
    return -1;
}

void axon_topo_locality_describe(const char *locality, char *buf, size_t max)
{
    (void)locality;
    snprintf(buf, max, "unknown (" AXON_TOPO_NONE_WHY ")");
}

void axon_topo_binding_describe(char *buf, size_t max)
{
    snprintf(buf, max, "unknown (" AXON_TOPO_NONE_WHY ")");
}
