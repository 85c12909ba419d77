/*
 * self: loopback to the same worker. A message is handed to the worker's
 * handler at once, from inside the send, with no queue in between.
 */
#include <stdlib.h>
#include <string.h>
#include "component.h"
#include "log.h"

/* One message is staged here so the handler sees header and payload together. */
#define AXON_SELF_MAX_SHORT 256
#define AXON_SELF_MAX_BCOPY (64 * 1024)

typedef struct axon_self_iface {
    axon_iface_t         super;
    axon_iface_params_t  params;
    int                  busy;     /* a handler is running on the staging buffer */
    uint8_t              bounce[AXON_SELF_MAX_BCOPY] __attribute__((aligned(64)));
} axon_self_iface_t;

typedef struct axon_self_ep {
    axon_tl_ep_t super;
} axon_self_ep_t;

static void axon_self_deliver(axon_self_iface_t *iface, uint8_t am_id, const void *data,
                              size_t length)
{
    axon_am_handler_t handler = iface->params.am_handlers[am_id];

    if (handler == NULL) {
        axon_warn("self: dropping message with unregistered am id %u", am_id);
        return;
    }
    iface->busy = 1;
    handler(iface->params.am_arg, data, length, AXON_AM_FLAG_NONE);
    iface->busy = 0;
}

static axon_status_t axon_self_ep_am_short(axon_tl_ep_t *tl_ep, uint8_t am_id, const void *hdr,
                                           size_t hdr_len, const void *payload, size_t length)
{
    axon_self_iface_t *iface = (axon_self_iface_t *)tl_ep->iface;
    /* Aligned: handlers read their headers in place. */
    uint8_t staging[AXON_SELF_MAX_SHORT] __attribute__((aligned(16)));

    if ((am_id >= AXON_AM_ID_MAX) || (hdr_len + length > AXON_SELF_MAX_SHORT)) {
        axon_error("self: am_short id %u of %zu bytes exceeds limits (id < %u, %u bytes)",
                   am_id, hdr_len + length, AXON_AM_ID_MAX, AXON_SELF_MAX_SHORT);
        return AXON_ERR_INVALID_PARAM;
    }
    if (iface->busy) {
        /* A send from inside a handler's callback: retry from progress, so
         * the handler running below us finishes first and order holds. */
        return AXON_ERR_NO_RESOURCE;
    }
    memcpy(staging, hdr, hdr_len);
    if (length > 0) {  /* payload may be NULL for an empty message */
        memcpy(staging + hdr_len, payload, length);
    }
    axon_self_deliver(iface, am_id, staging, hdr_len + length);
    return AXON_OK;
}

static ssize_t axon_self_ep_am_bcopy(axon_tl_ep_t *tl_ep, uint8_t am_id, axon_pack_cb_t pack,
                                     void *arg)
{
    axon_self_iface_t *iface = (axon_self_iface_t *)tl_ep->iface;
    size_t length;

    if (am_id >= AXON_AM_ID_MAX) {
        axon_error("self: am_bcopy with invalid am id %u", am_id);
        return AXON_ERR_INVALID_PARAM;
    }
    if (iface->busy) {
        return AXON_ERR_NO_RESOURCE;
    }
    length = pack(iface->bounce, arg);
    axon_self_deliver(iface, am_id, iface->bounce, length);
    return (ssize_t)length;
}

/* The peer is this process: a get is a plain copy (rendezvous in one copy). */
static axon_status_t axon_self_ep_get_zcopy(axon_tl_ep_t *tl_ep, void *buffer, size_t length,
                                            uint64_t remote_addr, const void *rkey,
                                            axon_tl_completion_t *comp)
{
    memcpy(buffer, (const void *)(uintptr_t)remote_addr, length);
    return AXON_OK;
}

static axon_status_t axon_self_ep_put_zcopy(axon_tl_ep_t *tl_ep, const void *buffer,
                                            size_t length, uint64_t remote_addr,
                                            const void *rkey, axon_tl_completion_t *comp)
{
    memcpy((void *)(uintptr_t)remote_addr, buffer, length);
    return AXON_OK;
}

static axon_status_t axon_self_ep_flush(axon_tl_ep_t *tl_ep)
{
    return AXON_OK;  /* delivered inside the send */
}

static unsigned axon_self_iface_progress(axon_iface_t *iface)
{
    return 0;
}

/* Nothing arrives but inside a send: never a reason to wake, always armed. */
static axon_status_t axon_self_iface_event_fd(axon_iface_t *iface, int *fd_p)
{
    *fd_p = -1;
    return AXON_OK;
}

static axon_status_t axon_self_iface_event_arm(axon_iface_t *iface)
{
    return AXON_OK;
}

static axon_status_t axon_self_iface_get_address(axon_iface_t *super, void *dev_addr,
                                                 void *iface_addr)
{
    axon_self_iface_t *iface = (axon_self_iface_t *)super;

    memcpy(iface_addr, &iface->params.worker_uuid, sizeof(uint64_t));
    return AXON_OK;
}

static int axon_self_iface_is_reachable(axon_iface_t *super, const void *dev_addr,
                                        const void *iface_addr)
{
    axon_self_iface_t *iface = (axon_self_iface_t *)super;

    return memcmp(iface_addr, &iface->params.worker_uuid, sizeof(uint64_t)) == 0;
}

static axon_status_t axon_self_ep_create(axon_iface_t *iface, uint64_t peer_uuid,
                                         const void *dev_addr, const void *iface_addr,
                                         axon_tl_ep_t **ep_p)
{
    axon_self_ep_t *ep = calloc(1, sizeof(*ep));

    if (ep == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    ep->super.iface = iface;
    *ep_p = &ep->super;
    return AXON_OK;
}

static void axon_self_ep_destroy(axon_tl_ep_t *ep)
{
    free(ep);
}

static void axon_self_iface_close(axon_iface_t *iface)
{
    free(iface);
}

static const axon_iface_ops_t axon_self_iface_ops = {
    .iface_close        = axon_self_iface_close,
    .iface_progress     = axon_self_iface_progress,
    .iface_event_fd     = axon_self_iface_event_fd,
    .iface_event_arm    = axon_self_iface_event_arm,
    .dev_addr_len       = 0,
    .iface_addr_len     = sizeof(uint64_t),
    .iface_get_address  = axon_self_iface_get_address,
    .iface_is_reachable = axon_self_iface_is_reachable,
    .ep_create          = axon_self_ep_create,
    .ep_destroy         = axon_self_ep_destroy,
    .ep_am_short        = axon_self_ep_am_short,
    .ep_am_bcopy        = axon_self_ep_am_bcopy,
    .ep_am_zcopy        = NULL,
    .ep_get_zcopy       = axon_self_ep_get_zcopy,
    .ep_put_zcopy       = axon_self_ep_put_zcopy,
    .ep_flush           = axon_self_ep_flush,
    .ep_check           = NULL,
};

static axon_status_t axon_self_query(const void *config, axon_resource_t **resources_p,
                                     unsigned *count_p)
{
    axon_resource_t *rsc = calloc(1, sizeof(*rsc));

    if (rsc == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    strcpy(rsc->tl_name, "self");
    strcpy(rsc->dev_name, "self");
    rsc->dev_type       = AXON_DEV_TYPE_SELF;
    rsc->cap_flags      = AXON_CAP_AM_SHORT | AXON_CAP_AM_BCOPY | AXON_CAP_AM_ORDERED |
                          AXON_CAP_CONNECT_TO_IFACE | AXON_CAP_GET |
                          AXON_CAP_PUT;
    rsc->latency_ns     = 5;
    rsc->bandwidth_MBps = 20000;
    rsc->overhead_ns    = 5;
    rsc->max_short      = AXON_SELF_MAX_SHORT;
    rsc->max_bcopy      = AXON_SELF_MAX_BCOPY;
    rsc->max_zcopy      = 0;
    rsc->ep_memory      = sizeof(axon_self_ep_t);
    *resources_p = rsc;
    *count_p     = 1;
    return AXON_OK;
}

static axon_status_t axon_self_iface_open(const axon_resource_t *resource, const void *config,
                                          const axon_iface_params_t *params,
                                          axon_iface_t **iface_p)
{
    axon_self_iface_t *iface = malloc(sizeof(*iface));

    if (iface == NULL) {
        axon_error("self: out of memory opening an iface");
        return AXON_ERR_NO_MEMORY;
    }
    iface->super.ops      = &axon_self_iface_ops;
    iface->super.resource = resource;
    iface->super.idle     = 1;  /* delivers inside the send: progress has nothing to find */
    iface->params         = *params;
    iface->busy           = 0;
    *iface_p = &iface->super;
    return AXON_OK;
}

AXON_COMPONENT_EXPORT const axon_component_t AXON_COMPONENT_SYMBOL = {
    .abi_version   = AXON_COMPONENT_ABI_VERSION,
    .name          = "self",
    .description   = "loopback to the same worker",
    .config_prefix = "SELF_",
    .config_table  = NULL,
    .config_size   = 0,
    .query         = axon_self_query,
    .iface_open    = axon_self_iface_open,
};
