/* The shm component: its descriptor, configuration table and resource query. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "shm.h"
#include "log.h"

/* Where POSIX shm objects live on Linux; without it there is no device. */
#define AXON_SHM_DIR "/dev/shm"

/* Largest cell: lengths travel as 32 bits, and larger cells are bulk transfers. */
#define AXON_SHM_CELL_SIZE_MAX ((size_t)1 << 30)

static const axon_config_entry_t axon_shm_config_table[] = {
    {"FIFO_SIZE", "256",
     "Cells in each worker's receive ring (a power of two >= 2); a sender finding it full retries",
     offsetof(axon_shm_config_t, fifo_size), AXON_CONFIG_TYPE_UINT},

    {"CELL_SIZE", "8k",
     "Bytes per ring cell, its 16-byte header included (a multiple of 64, >= 128); "
     "bounds the largest bcopy message",
     offsetof(axon_shm_config_t, cell_size), AXON_CONFIG_TYPE_SIZE},

    {"RX_BURST", "16",
     "Most messages one progress call delivers from the receive ring (>= 1)",
     offsetof(axon_shm_config_t, rx_burst), AXON_CONFIG_TYPE_UINT},

    {"PREFIX", "axon",
     "Name prefix of the shared-memory segments in " AXON_SHM_DIR,
     offsetof(axon_shm_config_t, prefix), AXON_CONFIG_TYPE_STRING},

    AXON_CONFIG_END
};

axon_status_t axon_shm_config_check(const axon_shm_config_t *config)
{
    if ((config->fifo_size < 2) || (config->fifo_size & (config->fifo_size - 1))) {
        axon_error("AXON_SHM_FIFO_SIZE=%u is invalid: must be a power of two >= 2",
                   config->fifo_size);
        return AXON_ERR_INVALID_PARAM;
    }
    if ((config->cell_size < 2 * AXON_SHM_FIFO_ALIGN) ||
        (config->cell_size % AXON_SHM_FIFO_ALIGN) ||
        (config->cell_size > AXON_SHM_CELL_SIZE_MAX)) {
        axon_error("AXON_SHM_CELL_SIZE=%zu is invalid: must be a multiple of %d between %d "
                   "and %zu", config->cell_size, AXON_SHM_FIFO_ALIGN, 2 * AXON_SHM_FIFO_ALIGN,
                   AXON_SHM_CELL_SIZE_MAX);
        return AXON_ERR_INVALID_PARAM;
    }
    if (config->rx_burst == 0) {
        axon_error("AXON_SHM_RX_BURST=%u is invalid: must be >= 1", config->rx_burst);
        return AXON_ERR_INVALID_PARAM;
    }
    return axon_shm_seg_check_prefix(config->prefix, "AXON_SHM_PREFIX");
}

static axon_status_t axon_shm_query(const void *config_v, axon_resource_t **resources_p,
                                    unsigned *count_p)
{
    const axon_shm_config_t *config = config_v;
    axon_resource_t         *resource;
    axon_status_t            status;

    status = axon_shm_config_check(config);
    if (status != AXON_OK) {
        return status;
    }

    /* Containers may lack a writable /dev/shm: no device, not an error. */
    if (access(AXON_SHM_DIR, W_OK | X_OK) != 0) {
        axon_debug("shm: %s is not writable, no shared-memory transport", AXON_SHM_DIR);
        *resources_p = NULL;
        *count_p     = 0;
        return AXON_OK;
    }

    resource = calloc(1, sizeof(*resource));
    if (resource == NULL) {
        axon_error("shm: cannot allocate the resource list");
        return AXON_ERR_NO_MEMORY;
    }
    snprintf(resource->tl_name, sizeof(resource->tl_name), "shm");
    snprintf(resource->dev_name, sizeof(resource->dev_name), "memory");
    resource->dev_type       = AXON_DEV_TYPE_SHM;
    resource->cap_flags      = AXON_CAP_AM_SHORT | AXON_CAP_AM_BCOPY | AXON_CAP_AM_ORDERED |
                               AXON_CAP_CONNECT_TO_IFACE;
    /* A cache-line transfer between cores and a copy on each side. */
    resource->latency_ns     = 80;
    resource->bandwidth_MBps = 10000;
    resource->overhead_ns    = 10;
    resource->max_short      = axon_shm_max_short(config->cell_size);
    resource->max_bcopy      = axon_shm_max_bcopy(config->cell_size);
    resource->max_zcopy      = 0;
    resource->ep_memory      = sizeof(axon_shm_ep_t);

    *resources_p = resource;
    *count_p     = 1;
    return AXON_OK;
}

AXON_COMPONENT_EXPORT const axon_component_t AXON_COMPONENT_SYMBOL = {
    .abi_version   = AXON_COMPONENT_ABI_VERSION,
    .name          = "shm",
    .description   = "processes on one host: a receive ring per worker in shared memory",
    .config_prefix = "SHM_",
    .config_table  = axon_shm_config_table,
    .config_size   = sizeof(axon_shm_config_t),
    .query         = axon_shm_query,
    .iface_open    = axon_shm_iface_open,
};
