/* Worker: transport interfaces, matching queues, progress. */
#include <stdlib.h>
#include <string.h>
#include "address.h"
#include "log.h"
#include "mem.h"
#include "request.h"
#include "sys.h"
#include "topo.h"

static void axon_worker_close_ifaces(axon_worker_h worker)
{
    unsigned i;

    for (i = 0; i < worker->num_ifaces; ++i) {
        worker->ifaces[i].iface->ops->iface_close(worker->ifaces[i].iface);
    }
    free(worker->ifaces);
    worker->ifaces     = NULL;
    worker->num_ifaces = 0;
}

/* Zero-copy receive placement, where the AM's protocol registered one (rendezvous, RMA data). */
static void *axon_worker_am_rx_dest(void *arg, uint8_t am_id, const void *hdr, size_t hdr_len,
                                    size_t data_length)
{
    axon_worker_h worker = arg;

    if ((am_id >= AXON_AM_ID_MAX) || (worker->am_rx_dest[am_id] == NULL)) {
        return NULL;
    }
    return worker->am_rx_dest[am_id](arg, am_id, hdr, hdr_len, data_length);
}

/* Protocols' worker parts, in table order; on failure the caller cleans up those done. */
static axon_status_t axon_worker_protos_init(axon_worker_h worker)
{
    const axon_proto_ops_t *proto;
    axon_status_t status;

    for (; (proto = axon_protocols[worker->num_protos]) != NULL; ++worker->num_protos) {
        status = (proto->worker_init != NULL) ? proto->worker_init(worker) : AXON_OK;
        if (status != AXON_OK) {
            axon_error("worker %016llx: %s protocol: %s", (unsigned long long)worker->uuid,
                       proto->name, axon_status_string(status));
            return status;
        }
    }
    return AXON_OK;
}

static void axon_worker_protos_cleanup(axon_worker_h worker)
{
    const axon_proto_ops_t *proto;

    while (worker->num_protos > 0) {
        proto = axon_protocols[--worker->num_protos];
        if (proto->worker_cleanup != NULL) {
            proto->worker_cleanup(worker);
        }
    }
}

/*
 * How far a network device is from the thread creating the worker (the
 * thread that will drive it); lane choice prefers the nearest. Said at debug
 * level either way, with the reason when it is unknown.
 */
static unsigned axon_worker_distance(axon_worker_h worker, const axon_resource_t *rsc)
{
    char why[160];
    unsigned distance;

    if (rsc->dev_type != AXON_DEV_TYPE_NET) {
        return AXON_TOPO_DISTANCE_UNKNOWN;   /* shm and self: one per host, nothing to rank */
    }
    distance = axon_topo_device_distance(rsc->locality, why, sizeof(why));
    if (distance == AXON_TOPO_DISTANCE_UNKNOWN) {
        axon_debug("worker %016llx: %s/%s: distance unknown (%s), device order unchanged",
                   (unsigned long long)worker->uuid, rsc->tl_name, rsc->dev_name, why);
    } else {
        axon_debug("worker %016llx: %s/%s at %s: distance %u from this thread",
                   (unsigned long long)worker->uuid, rsc->tl_name, rsc->dev_name,
                   rsc->locality, distance);
    }
    return distance;
}

static axon_status_t axon_worker_open_ifaces(axon_worker_h worker)
{
    axon_context_h ctx = worker->context;
    axon_iface_params_t params;
    axon_status_t status;
    unsigned i;

    worker->ifaces = calloc(ctx->num_rscs, sizeof(*worker->ifaces));
    if (worker->ifaces == NULL) {
        return AXON_ERR_NO_MEMORY;
    }

    params.am_handlers = worker->am_handlers;
    params.am_arg      = worker;
    params.worker_uuid = worker->uuid;
    params.am_rx_dest  = axon_worker_am_rx_dest;
    params.peer_failure = axon_peer_failure;
    for (i = 0; i < ctx->num_rscs; ++i) {
        const axon_select_resource_t *rsc = &ctx->rscs[i];
        axon_iface_t *iface;

        params.md = rsc->md;
        status = rsc->owner->component->iface_open(rsc->resource, rsc->owner->config, &params,
                                                   &iface);
        if (status != AXON_OK) {
            axon_error("failed to open %s/%s: %s", rsc->resource->tl_name,
                       rsc->resource->dev_name, axon_status_string(status));
            axon_worker_close_ifaces(worker);
            return status;
        }
        iface->resource = rsc->resource;
        worker->ifaces[worker->num_ifaces].iface    = iface;
        worker->ifaces[worker->num_ifaces].rsc      = rsc;
        worker->ifaces[worker->num_ifaces].distance = axon_worker_distance(worker, rsc->resource);
        ++worker->num_ifaces;
        axon_debug("worker %016llx: opened %s/%s", (unsigned long long)worker->uuid,
                   rsc->resource->tl_name, rsc->resource->dev_name);
    }
    return AXON_OK;
}

axon_status_t axon_worker_create(axon_context_h context, const axon_worker_params_t *params,
                                 axon_worker_h *worker_p)
{
    axon_worker_h worker;
    axon_status_t status;
    unsigned i;

    if ((context == NULL) || (worker_p == NULL)) {
        axon_error("axon_worker_create: NULL %s", context ? "worker_p" : "context");
        return AXON_ERR_INVALID_PARAM;
    }
    if ((params != NULL) && (params->reserved != 0)) {
        axon_error("axon_worker_create: reserved field is %u, must be 0", params->reserved);
        return AXON_ERR_INVALID_PARAM;
    }

    worker = calloc(1, sizeof(*worker));
    if (worker == NULL) {
        axon_error("axon_worker_create: out of memory");
        return AXON_ERR_NO_MEMORY;
    }
    worker->context = context;
    worker->efd     = -1;
    do {
        worker->uuid = axon_sys_generate_uuid();
    } while (worker->uuid == AXON_SENDER_ANY);  /* receivers use 0 for "any sender" */
    axon_idle_init(&worker->idle, context->opts.yield, context->opts.yield_spin);
    axon_list_init(&worker->eps);
    axon_list_init(&worker->dead_peers);
    axon_list_init(&worker->pending_eps);
    axon_list_init(&worker->deferred);
    for (i = 0; i < AXON_RX_FRAG_BUCKETS; ++i) {
        axon_list_init(&worker->rx_frags[i]);
    }
    for (i = 0; i < AXON_ID_BUCKETS; ++i) {
        axon_list_init(&worker->id_map[i]);
    }
    for (i = 0; i < AXON_PEER_BUCKETS; ++i) {
        axon_list_init(&worker->peers[i]);
    }

    status = axon_mpool_init(&worker->req_mp, "requests", sizeof(struct axon_request), 128, 0);
    if (status != AXON_OK) {
        goto err_free;
    }
    status = axon_request_runs_init(worker);
    if (status != AXON_OK) {
        goto err_req_mp;
    }
    axon_peer_register_handlers(worker);
    status = axon_worker_protos_init(worker);
    if (status != AXON_OK) {
        goto err_protos;
    }

    status = axon_worker_open_ifaces(worker);
    if (status != AXON_OK) {
        goto err_protos;
    }
    status = axon_address_pack(worker, &worker->address, &worker->address_length);
    if (status != AXON_OK) {
        goto err_ifaces;
    }
    /* Keys packed from now on name this worker: its peers may use them. */
    axon_mem_worker_attach(worker);

    *worker_p = worker;
    return AXON_OK;

err_ifaces:
    axon_worker_close_ifaces(worker);
err_protos:
    axon_worker_protos_cleanup(worker);
    axon_mpool_cleanup(&worker->runs_mp);
err_req_mp:
    axon_mpool_cleanup(&worker->req_mp);
err_free:
    free(worker);
    return status;
}

void axon_worker_destroy(axon_worker_h worker)
{
    axon_ep_h ep, tmp;

    if (worker == NULL) {
        return;
    }
    axon_list_for_each_safe(ep, tmp, &worker->eps, link) {
        if (!ep->internal) {
            axon_debug("worker destroy: force-closing endpoint %p", (void *)ep);
        }
        axon_ep_destroy_now(ep, AXON_ERR_CANCELED);
    }
    axon_mem_worker_detach(worker);
    axon_worker_efd_close(worker);
    axon_worker_close_ifaces(worker);
    axon_peer_cleanup_all(worker);
    free(worker->address);
    axon_worker_protos_cleanup(worker);
    /* Requests the user never freed are reclaimed with the pool, and their run lists. */
    worker->req_mp.num_free  = worker->req_mp.num_elems;
    worker->runs_mp.num_free = worker->runs_mp.num_elems;
    axon_mpool_cleanup(&worker->req_mp);
    axon_mpool_cleanup(&worker->runs_mp);
    free(worker);
}

void axon_worker_ep_pending_add(axon_worker_h worker, axon_ep_h ep)
{
    if (axon_list_is_empty(&ep->pending_link)) {
        axon_list_add_tail(&worker->pending_eps, &ep->pending_link);
    }
}

/* The protocols' own polling (offloaded collectives), while one asks for it. */
static unsigned axon_protocols_progress(axon_worker_h worker)
{
    const axon_proto_ops_t *const *proto;
    unsigned count = 0;

    for (proto = axon_protocols; *proto != NULL; ++proto) {
        if ((*proto)->progress != NULL) {
            count += (*proto)->progress(worker);
        }
    }
    return count;
}

unsigned axon_worker_progress(axon_worker_h worker)
{
    axon_iface_t *iface;
    axon_ep_h ep, tmp;
    unsigned count = 0, i;

    ++worker->in_progress;
    /* Tested inline: an out-of-line call per poll shows in small-message latency. */
    if (!axon_list_is_empty(&worker->deferred)) {
        count += axon_request_dispatch_deferred(worker);
    }
    ++worker->progress_calls;
    for (i = 0; i < worker->num_ifaces; ++i) {
        iface = worker->ifaces[i].iface;
        if (iface->idle && (worker->progress_calls & (AXON_IFACE_IDLE_POLLS - 1))) {
            continue;
        }
        count += iface->ops->iface_progress(iface);
    }
    worker->iface_events += count;
    if (worker->proto_polls > 0) {
        count += axon_protocols_progress(worker);
    }
    /* Receiving freed ring space on the peer side; retry queued sends. */
    axon_list_for_each_safe(ep, tmp, &worker->pending_eps, pending_link) {
        count += (unsigned)axon_ep_progress_pending(ep);
    }
    --worker->in_progress;
    axon_idle_poll(&worker->idle, count);
    return count;
}

uint64_t axon_worker_id(axon_worker_h worker)
{
    return (worker != NULL) ? worker->uuid : AXON_SENDER_ANY;
}

axon_status_t axon_worker_get_address(axon_worker_h worker, void **address_p, size_t *length_p)
{
    if ((worker == NULL) || (address_p == NULL) || (length_p == NULL)) {
        axon_error("axon_worker_get_address: NULL argument");
        return AXON_ERR_INVALID_PARAM;
    }
    *address_p = malloc(worker->address_length);
    if (*address_p == NULL) {
        axon_error("axon_worker_get_address: out of memory");
        return AXON_ERR_NO_MEMORY;
    }
    memcpy(*address_p, worker->address, worker->address_length);
    *length_p = worker->address_length;
    return AXON_OK;
}

void axon_worker_release_address(axon_worker_h worker, void *address)
{
    free(address);
}
