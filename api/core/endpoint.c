/* Endpoint: lanes to one peer, chosen from reachability and estimates. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "address.h"
#include "log.h"
#include "rails.h"
#include "request.h"

static void axon_lane_init(axon_lane_t *lane, axon_tl_ep_t *tl_ep, const axon_iface_t *iface,
                           axon_md_t *md)
{
    lane->tl_ep     = tl_ep;
    lane->ops       = iface->ops;
    lane->resource  = iface->resource;
    lane->md        = md;
    lane->max_short = iface->resource->max_short;
    lane->max_bcopy = iface->resource->max_bcopy;
}

/* Does iface reach the peer through its address entry e? */
static int axon_ep_entry_reaches(axon_iface_t *iface, const axon_address_t *addr,
                                 const axon_address_entry_t *e)
{
    if (strcmp(e->tl_name, iface->resource->tl_name) ||
        (e->dev_addr_len != iface->ops->dev_addr_len) ||
        (e->iface_addr_len != iface->ops->iface_addr_len)) {
        return 0;
    }
    if (!iface->ops->iface_is_reachable(iface, e->dev_addr, e->iface_addr)) {
        axon_debug("%s/%s does not reach peer %016llx", e->tl_name, e->dev_name,
                   (unsigned long long)addr->uuid);
        return 0;
    }
    return 1;
}

/* The entry of addr that iface reaches: of its own device's name (by_name), else any. */
static const axon_address_entry_t *axon_ep_entry_for(axon_iface_t *iface,
                                                     const axon_address_t *addr, int by_name)
{
    unsigned j;

    for (j = 0; j < addr->num_entries; ++j) {
        if ((by_name == !strcmp(addr->entries[j].dev_name, iface->resource->dev_name)) &&
            axon_ep_entry_reaches(iface, addr, &addr->entries[j])) {
            return &addr->entries[j];
        }
    }
    return NULL;
}

/*
 * For each worker iface, the entry of the peer address it reaches: the one
 * of its own device's name if that reaches (softib0 to softib0, softib1 to
 * softib1: rails then use distinct devices at both ends), else the first;
 * and its device's distance from the worker's thread (distances may be
 * NULL). Ifaces that pair by name come first: among equals, lane choice
 * takes the listed order, and a device of another name may look reachable
 * without being so (softib's devices share a GID, their wires are apart).
 */
unsigned axon_ep_find_candidates(axon_worker_h worker, const axon_address_t *addr,
                                 const axon_address_entry_t **entries, unsigned *iface_idx,
                                 const axon_resource_t **rscs, unsigned *distances)
{
    const axon_address_entry_t *found;
    uint64_t listed = 0;   /* ifaces paired by name (a worker's fit an address: <= 32) */
    unsigned i, n = 0;
    int by_name;

    for (by_name = 1; by_name >= 0; --by_name) {
        for (i = 0; (i < worker->num_ifaces) && (i < 64); ++i) {
            axon_iface_t *iface = worker->ifaces[i].iface;

            if ((listed >> i) & 1) {
                continue;
            }
            found = axon_ep_entry_for(iface, addr, by_name);
            if (found == NULL) {
                continue;
            }
            listed      |= 1ull << i;
            entries[n]   = found;
            iface_idx[n] = i;
            rscs[n]      = iface->resource;
            if (distances != NULL) {
                distances[n] = worker->ifaces[i].distance;
            }
            ++n;
        }
    }
    return n;
}

axon_status_t axon_ep_open_lane(axon_worker_h worker, unsigned idx, uint64_t uuid,
                                const axon_address_entry_t *entry, axon_lane_t *lane)
{
    axon_iface_t *iface = worker->ifaces[idx].iface;
    axon_tl_ep_t *tl_ep;
    axon_status_t status;

    status = iface->ops->ep_create(iface, uuid, entry->dev_addr, entry->iface_addr, &tl_ep);
    if (status != AXON_OK) {
        return status;
    }
    tl_ep->iface = iface;
    axon_lane_init(lane, tl_ep, iface, worker->ifaces[idx].rsc->md);
    snprintf(lane->peer_dev, sizeof(lane->peer_dev), "%s", entry->dev_name);
    return AXON_OK;
}

/*
 * Device atomic mode: every atomic goes through a device, so the endpoint
 * needs a lane with device atomics even where shm or self carry the rest
 * (same host, same process: the atomics loop back through the device). No
 * such lane: atomics on this endpoint fail (amo.c), the rest works.
 */
static void axon_ep_open_amo_lane(axon_ep_h ep, const axon_resource_t *const *rscs, unsigned n,
                                  const unsigned *iface_idx, const unsigned *distances,
                                  const axon_address_entry_t *const *entries)
{
    unsigned order[AXON_ADDRESS_MAX_TLS], i, j, k;

    if (!ep->worker->context->amo_device) {
        return;
    }
    if (ep->am_lane.resource->cap_flags & AXON_CAP_AMO_DEVICE) {
        ep->amo_lane = ep->am_lane;
        return;
    }
    if (ep->bulk_lane.resource->cap_flags & AXON_CAP_AMO_DEVICE) {
        ep->amo_lane = ep->bulk_lane;
        return;
    }
    /* The nearest device first (topo.h's distance; equal ones in listed order). */
    for (k = 0; k < n; ++k) {
        for (j = k; (j > 0) && (distances[k] < distances[order[j - 1]]); --j) {
            order[j] = order[j - 1];
        }
        order[j] = k;
    }
    for (k = 0; k < n; ++k) {
        i = order[k];
        if ((rscs[i]->cap_flags & AXON_CAP_AMO_DEVICE) &&
            (axon_ep_open_lane(ep->worker, iface_idx[i], ep->peer_uuid, entries[i],
                               &ep->amo_lane) == AXON_OK)) {
            axon_debug("endpoint %p to %016llx: atomics on %s/%s", (void *)ep,
                       (unsigned long long)ep->peer_uuid, rscs[i]->tl_name, rscs[i]->dev_name);
            return;
        }
    }
    axon_debug("endpoint %p to %016llx: no lane with device atomics", (void *)ep,
               (unsigned long long)ep->peer_uuid);
}

/* The amo lane, when it is a transport endpoint of its own. */
static void axon_ep_close_amo_lane(axon_ep_h ep)
{
    if ((ep->amo_lane.tl_ep != NULL) && (ep->amo_lane.tl_ep != ep->am_lane.tl_ep) &&
        (ep->amo_lane.tl_ep != ep->bulk_lane.tl_ep)) {
        ep->amo_lane.ops->ep_destroy(ep->amo_lane.tl_ep);
    }
    ep->amo_lane.tl_ep = NULL;
}

axon_status_t axon_ep_create_internal(axon_worker_h worker, const void *address,
                                      size_t address_length, int internal, axon_ep_h *ep_p)
{
    const axon_address_entry_t *entries[AXON_ADDRESS_MAX_TLS];
    const axon_resource_t *rscs[AXON_ADDRESS_MAX_TLS];
    unsigned iface_idx[AXON_ADDRESS_MAX_TLS], distances[AXON_ADDRESS_MAX_TLS];
    axon_lane_select_params_t sel_params;
    axon_lane_choice_t choice;
    axon_address_t *addr;
    axon_status_t status;
    axon_ep_h ep;
    unsigned n;

    addr = malloc(sizeof(*addr));
    if (addr == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    status = axon_address_unpack(address, address_length, addr);
    if (status != AXON_OK) {
        goto out;
    }

    n = axon_ep_find_candidates(worker, addr, entries, iface_idx, rscs, distances);
    sel_params.num_eps   = worker->num_eps;
    sel_params.max_peers = worker->context->opts.rc_max_peers;
    sel_params.distances = distances;
    status = axon_select_lanes(rscs, n, &sel_params, &choice);
    if (status != AXON_OK) {
        axon_error("no transport reaches peer %016llx: it offers %u transport(s), this worker "
                   "%u, %u reachable (AXON_LOG_LEVEL=debug tells why)",
                   (unsigned long long)addr->uuid, addr->num_entries, worker->num_ifaces, n);
        goto out;
    }

    ep = calloc(1, sizeof(*ep));
    if (ep == NULL) {
        status = AXON_ERR_NO_MEMORY;
        goto out;
    }
    ep->worker    = worker;
    ep->peer_uuid = addr->uuid;
    ep->internal  = internal;
    ep->status    = AXON_OK;
    axon_list_init(&ep->pending);
    axon_list_init(&ep->pending_link);

    status = axon_ep_open_lane(worker, iface_idx[choice.small], addr->uuid, entries[choice.small],
                               &ep->am_lane);
    if (status != AXON_OK) {
        goto err_free_ep;
    }
    if (choice.bulk == choice.small) {
        ep->bulk_lane = ep->am_lane;
    } else {
        status = axon_ep_open_lane(worker, iface_idx[choice.bulk], addr->uuid,
                                   entries[choice.bulk], &ep->bulk_lane);
        if (status != AXON_OK) {
            goto err_destroy_am;
        }
    }

    axon_ep_open_amo_lane(ep, rscs, n, iface_idx, distances, entries);
    axon_protocols_call(ep_init, ep);

    axon_list_add_tail(&worker->eps, &ep->link);
    ++worker->num_eps;
    status = axon_peer_attach_ep(worker, ep, address, address_length);
    if (status != AXON_OK) {
        axon_ep_destroy_now(ep, AXON_ERR_CANCELED);
        goto out;
    }
    axon_debug("%s endpoint %p to %016llx: am lane %s/%s, bulk lane %s/%s, rndv from %zu bytes, "
               "get from %zu bytes (%s)",
               internal ? "internal" : "user", (void *)ep, (unsigned long long)addr->uuid,
               ep->am_lane.resource->tl_name, ep->am_lane.resource->dev_name,
               ep->bulk_lane.resource->tl_name, ep->bulk_lane.resource->dev_name,
               ep->rndv_thresh, ep->rndv_get_min,
               (ep->rndv_get_min == SIZE_MAX) ? "never" : "or larger");
    *ep_p = ep;
    goto out;

err_destroy_am:
    ep->am_lane.ops->ep_destroy(ep->am_lane.tl_ep);
err_free_ep:
    free(ep);
out:
    free(addr);
    return status;
}

uint64_t axon_ep_peer_id(axon_ep_h ep)
{
    return (ep != NULL) ? ep->peer_uuid : AXON_SENDER_ANY;
}

axon_status_t axon_ep_create(axon_worker_h worker, const axon_ep_params_t *params,
                             axon_ep_h *ep_p)
{
    axon_status_t status;
    axon_peer_t *peer;
    axon_ep_h ep;

    if ((worker == NULL) || (params == NULL) || (ep_p == NULL)) {
        axon_error("axon_ep_create: NULL %s", !worker ? "worker" : !params ? "params" : "ep_p");
        return AXON_ERR_INVALID_PARAM;
    }

    status = axon_ep_create_internal(worker, params->address, params->address_length, 0, &ep);
    if (status != AXON_OK) {
        return status;
    }
    ep->err_cb     = params->err_cb;
    ep->err_cb_arg = params->err_cb_arg;
    peer = ep->peer;
    if (peer->status != AXON_OK) {
        ep->status = peer->status;  /* already known dead */
    }
    /* The peer learns our address before any message of ours can need a reply. */
    status = axon_peer_send_hello(ep);
    if (status != AXON_OK) {
        axon_ep_destroy_now(ep, AXON_ERR_CANCELED);
        return status;
    }
    *ep_p = ep;
    return AXON_OK;
}

/* Drop queued sends and release the transport endpoints. */
void axon_ep_destroy_now(axon_ep_h ep, axon_status_t status)
{
    axon_worker_h worker = ep->worker;
    axon_request_h req, tmp;
    unsigned i;

    axon_protocols_call(ep_abort, ep, status);  /* protocols' requests leave their lists first */
    axon_ep_fail_pending(ep, status);
    /* Sends waiting for the peer: their transport operation, if any, still
     * owes a completion, which then finds the request orphaned. */
    for (i = 0; (ep->outstanding > 0) && (i < AXON_ID_BUCKETS); ++i) {
        axon_list_for_each_safe(req, tmp, &worker->id_map[i], id_link) {
            if ((req->flags & AXON_REQUEST_RECV) || (req->send.ep != ep)) {
                continue;
            }
            axon_request_id_del(req);
            --ep->outstanding;
            if (req->flags & AXON_REQUEST_TL_BUSY) {
                req->flags |= AXON_REQUEST_ORPHANED;
            } else {
                axon_request_complete(req, status);
            }
        }
    }
    axon_peer_detach_ep(ep);
    axon_list_del(&ep->link);
    --worker->num_eps;
    axon_ep_close_amo_lane(ep);
    axon_ep_close_rails(ep);
    if (ep->bulk_lane.tl_ep != ep->am_lane.tl_ep) {
        ep->bulk_lane.ops->ep_destroy(ep->bulk_lane.tl_ep);
    }
    ep->am_lane.ops->ep_destroy(ep->am_lane.tl_ep);
    free(ep);
}

void axon_ep_check_close(axon_ep_h ep)
{
    axon_request_h close_req = ep->close_req;

    if ((close_req == NULL) ||
        ((ep->status == AXON_OK) && (!axon_list_is_empty(&ep->pending) || ep->outstanding))) {
        return;
    }
    axon_ep_destroy_now(ep, ep->status == AXON_OK ? AXON_ERR_CANCELED : ep->status);
    axon_request_complete(close_req, AXON_OK);
}

void axon_ep_pending_push(axon_ep_h ep, axon_request_h req)
{
    axon_list_add_tail(&ep->pending, &req->list);
    axon_worker_ep_pending_add(ep->worker, ep);
}

void axon_ep_fail_pending(axon_ep_h ep, axon_status_t status)
{
    axon_request_h req;

    while (!axon_list_is_empty(&ep->pending)) {
        req = axon_list_first(&ep->pending, struct axon_request, list);
        axon_list_del(&req->list);
        if (!(req->flags & AXON_REQUEST_TL_BUSY)) {
            axon_request_send_untrack(req);
            axon_request_complete(req, status);
        }
    }
    axon_list_del(&ep->pending_link);
}

/* Retry queued requests in order, each by its own step; returns how many left the queue. */
int axon_ep_progress_pending(axon_ep_h ep)
{
    axon_request_h req;
    axon_status_t status;
    int count = 0;

    while (!axon_list_is_empty(&ep->pending)) {
        req = axon_list_first(&ep->pending, struct axon_request, list);
        status = req->step(req);
        if (status == AXON_ERR_NO_RESOURCE) {
            return count;
        }
        axon_list_del(&req->list);
        ++count;
        if (status == AXON_INPROGRESS) {
            continue;  /* completes on the peer's answer or the transport's completion */
        }
        axon_request_send_untrack(req);
        axon_request_complete(req, status);
    }

    axon_list_del(&ep->pending_link);
    axon_ep_check_close(ep);
    return count;
}

/* A queued control message (req->ctrl): one short AM. */
static axon_status_t axon_ep_ctrl_step(axon_request_h req)
{
    axon_lane_t *lane = &req->ctrl.ep->am_lane;

    return lane->ops->ep_am_short(lane->tl_ep, req->ctrl.am_id, req->ctrl.hdr, req->ctrl.hdr_len,
                                  NULL, 0);
}

axon_status_t axon_ep_send_ctrl(axon_ep_h ep, uint8_t am_id, const void *hdr, size_t hdr_len)
{
    axon_request_h req;
    axon_status_t status;

    if (ep->status != AXON_OK) {
        return ep->status;
    }
    if (axon_list_is_empty(&ep->pending)) {
        status = ep->am_lane.ops->ep_am_short(ep->am_lane.tl_ep, am_id, hdr, hdr_len, NULL, 0);
        if (status != AXON_ERR_NO_RESOURCE) {
            return status;
        }
    }

    req = axon_request_get(ep->worker, NULL, AXON_REQUEST_INTERNAL);
    if (req == NULL) {
        axon_error("no memory to queue control message %u", am_id);
        return AXON_ERR_NO_MEMORY;
    }
    req->step         = axon_ep_ctrl_step;
    req->ctrl.ep      = ep;
    req->ctrl.am_id   = am_id;
    req->ctrl.hdr_len = hdr_len;
    memcpy(req->ctrl.hdr, hdr, hdr_len);
    axon_ep_pending_push(ep, req);
    return AXON_OK;
}

axon_status_t axon_ep_close_nb(axon_ep_h ep, unsigned mode, axon_request_h *req_p)
{
    axon_request_h req;

    if ((ep == NULL) || (mode > AXON_EP_CLOSE_FORCE)) {
        axon_error("axon_ep_close_nb: %s", ep ? "invalid mode" : "NULL endpoint");
        return AXON_ERR_INVALID_PARAM;
    }
    if (ep->close_req != NULL) {
        axon_error("axon_ep_close_nb: endpoint %p is already closing", (void *)ep);
        return AXON_ERR_INVALID_PARAM;
    }

    if ((mode == AXON_EP_CLOSE_FORCE) || (ep->status != AXON_OK) ||
        (axon_list_is_empty(&ep->pending) && (ep->outstanding == 0))) {
        axon_ep_destroy_now(ep, AXON_ERR_CANCELED);
        return AXON_OK;
    }
    if (req_p == NULL) {
        axon_error("axon_ep_close_nb: flushing close of %p needs req_p", (void *)ep);
        return AXON_ERR_INVALID_PARAM;
    }

    req = axon_request_get(ep->worker, NULL, 0);
    if (req == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    req->step     = NULL;  /* never queued: axon_ep_check_close finishes it */
    ep->close_req = req;
    *req_p        = req;
    return AXON_INPROGRESS;
}

axon_status_t axon_ep_query(axon_ep_h ep, axon_ep_attr_t *attr)
{
    if ((ep == NULL) || (attr == NULL)) {
        axon_error("axon_ep_query: NULL %s", ep ? "attr" : "endpoint");
        return AXON_ERR_INVALID_PARAM;
    }
    memset(attr, 0, sizeof(*attr));
    snprintf(attr->small_tl, sizeof(attr->small_tl), "%s", ep->am_lane.resource->tl_name);
    snprintf(attr->small_dev, sizeof(attr->small_dev), "%s", ep->am_lane.resource->dev_name);
    snprintf(attr->bulk_tl, sizeof(attr->bulk_tl), "%s", ep->bulk_lane.resource->tl_name);
    snprintf(attr->bulk_dev, sizeof(attr->bulk_dev), "%s", ep->bulk_lane.resource->dev_name);
    attr->eager_short_max = ep->eager_short_max;
    return AXON_OK;
}
