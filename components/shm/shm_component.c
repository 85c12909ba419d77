/* The shm component: its descriptor, configuration table and resource query. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "shm.h"
#include "log.h"

/* Largest cell: lengths travel as 32 bits, and larger cells are bulk transfers. */
#define AXON_SHM_CELL_SIZE_MAX ((size_t)1 << 30)
/* Most sender slots: 64 bytes each in every segment, 4 MiB at this bound. */
#define AXON_SHM_MAX_SENDERS_MAX (1u << 16)

static const axon_config_entry_t axon_shm_config_table[] = {
    {"FIFO_SIZE", "64",
     "Cells in each worker's receive ring (a power of two >= 2); a sender finding it full retries",
     offsetof(axon_shm_config_t, fifo_size), AXON_CONFIG_TYPE_UINT},

    {"MAX_SENDERS", "1024",
     "Endpoints that can send to one worker's receive ring at once (one 64-byte slot each "
     "in its segment; slots of dead processes are reused); connecting beyond that fails",
     offsetof(axon_shm_config_t, max_senders), AXON_CONFIG_TYPE_UINT},

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

    {"CMA", "y",
     "Single-copy get from a peer's memory with process_vm_readv (cross-memory attach); "
     "n leaves gets to the upper layer's fallback",
     offsetof(axon_shm_config_t, cma), AXON_CONFIG_TYPE_BOOL},

    {"LAYOUT_CMA_MIN", "2k",
     "A peer's layout key is written and read by single copy straight into its pieces "
     "when they hold at least this many bytes on average; smaller pieces go by messages "
     "the owner places (the kernel pins pages once per piece: 64-byte pieces by single "
     "copy are ten times slower)",
     offsetof(axon_shm_config_t, layout_cma_min), AXON_CONFIG_TYPE_SIZE},

    {"LIVENESS_INTERVAL", "100ms",
     "How often progress checks that the processes of connected peers still live (> 0); "
     "a dead peer is reported within about two intervals",
     offsetof(axon_shm_config_t, liveness_interval), AXON_CONFIG_TYPE_TIME},

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
    if (!axon_config_in_range("SHM_MAX_SENDERS", config->max_senders, 1,
                              AXON_SHM_MAX_SENDERS_MAX)) {
        return AXON_ERR_INVALID_PARAM;
    }
    if (config->rx_burst == 0) {
        axon_error("AXON_SHM_RX_BURST=%u is invalid: must be >= 1", config->rx_burst);
        return AXON_ERR_INVALID_PARAM;
    }
    if (!(config->liveness_interval > 0)) {
        axon_error("AXON_SHM_LIVENESS_INTERVAL=%gs is invalid: must be > 0",
                   config->liveness_interval);
        return AXON_ERR_INVALID_PARAM;
    }
    return axon_shm_seg_check_prefix(config->prefix, "AXON_SHM_PREFIX");
}

/*
 * Can process_vm_readv work at all? Yama's ptrace_scope 3 forbids it to
 * everyone; 1 (the common distribution default) allows it only towards
 * descendants and 2 only with CAP_SYS_PTRACE, so there gets fail per peer
 * with EPERM and fall back (axon_shm_ep_get_zcopy).
 */
static int axon_shm_cma_possible(void)
{
    char    buf[16];
    ssize_t n;
    int     fd, scope;

    fd = open("/proc/sys/kernel/yama/ptrace_scope", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return 1;  /* no Yama: ordinary same-user ptrace rules */
    }
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) {
        return 1;
    }
    buf[n] = '\0';
    scope  = atoi(buf);
    if (scope >= 3) {
        axon_debug("shm: yama ptrace_scope=%d forbids cross-memory attach, no get", scope);
        return 0;
    }
    if (scope > 0) {
        axon_debug("shm: yama ptrace_scope=%d: gets reach only peers it allows, others fall "
                   "back", scope);
    }
    return 1;
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
                               AXON_CAP_CONNECT_TO_IFACE | AXON_CAP_PEER_FAILURE;
    /* A cache-line transfer between cores and a copy on each side. */
    resource->latency_ns     = 80;
    resource->bandwidth_MBps = 10000;
    resource->overhead_ns    = 10;
    resource->max_short      = axon_shm_max_short(config->cell_size);
    resource->max_bcopy      = axon_shm_max_bcopy(config->cell_size);
    /* No am_zcopy; gets and puts move any length (chunked for the kernel). */
    resource->max_zcopy      = 0;
    if (config->cma && axon_shm_cma_possible()) {
        resource->cap_flags |= AXON_CAP_GET | AXON_CAP_PUT;
        axon_shm_costs_fill(resource);
    }
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
    .md_open       = axon_shm_md_open,
    .iface_open    = axon_shm_iface_open,
};
