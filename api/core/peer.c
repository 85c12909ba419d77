/*
 * Peers: every worker this worker talks to, by worker id. The first message
 * on an endpoint is a hello carrying the sender's address, so a receiver can
 * always answer (acks, rendezvous) and watch the sender's liveness, even if
 * it never made an endpoint to it.
 */
#include <stdlib.h>
#include <string.h>
#include "address.h"
#include "log.h"
#include "request.h"

static inline axon_list_link_t *axon_peer_bucket(axon_worker_h worker, uint64_t uuid)
{
    return &worker->peers[(uuid * 0x9E3779B97F4A7C15ull) >> 58];
}

axon_peer_t *axon_peer_find(axon_worker_h worker, uint64_t uuid)
{
    axon_peer_t *peer;

    axon_list_for_each(peer, axon_peer_bucket(worker, uuid), link) {
        if (peer->uuid == uuid) {
            return peer;
        }
    }
    return NULL;
}

/* Off the dead peers' list: freed, or an endpoint to it was made again. */
static void axon_peer_unbury(axon_worker_h worker, axon_peer_t *peer)
{
    if (peer->buried) {
        axon_list_del(&peer->dead_link);
        --worker->num_dead_peers;
        peer->buried = 0;
    }
}

static void axon_peer_free(axon_worker_h worker, axon_peer_t *peer)
{
    axon_peer_unbury(worker, peer);
    axon_list_del(&peer->link);
    free(peer->address);
    free(peer);
}

/*
 * A failed peer no endpoint reaches: nothing will write to it or hear from
 * it again (a restarted process is a new worker). Only its status stays,
 * for what still refers to it (an unexpected message it sent, matched
 * later, fails with it), among the last AXON_PEER_DEAD_MAX dead peers.
 */
static void axon_peer_bury(axon_worker_h worker, axon_peer_t *peer)
{
    free(peer->address);
    peer->address        = NULL;
    peer->address_length = 0;
    axon_list_add_tail(&worker->dead_peers, &peer->dead_link);
    peer->buried = 1;
    if (++worker->num_dead_peers > AXON_PEER_DEAD_MAX) {
        axon_peer_free(worker, axon_list_first(&worker->dead_peers, axon_peer_t, dead_link));
    }
}

axon_status_t axon_peer_gone_status(axon_worker_h worker, uint64_t uuid)
{
    axon_peer_t *peer = axon_peer_find(worker, uuid);

    return ((peer != NULL) && (peer->status != AXON_OK)) ? peer->status : AXON_ERR_UNREACHABLE;
}

axon_log_level_t axon_peer_stray_level(axon_worker_h worker, uint64_t uuid,
                                       axon_log_level_t otherwise)
{
    axon_peer_t *peer = axon_peer_find(worker, uuid);

    return ((peer == NULL) || (peer->status != AXON_OK)) ? AXON_LOG_DEBUG : otherwise;
}

static axon_peer_t *axon_peer_get(axon_worker_h worker, uint64_t uuid, const void *address,
                                  size_t address_length)
{
    axon_peer_t *peer = axon_peer_find(worker, uuid);

    if (peer == NULL) {
        peer = calloc(1, sizeof(*peer));
        if (peer == NULL) {
            return NULL;
        }
        peer->uuid   = uuid;
        peer->status = AXON_OK;
        axon_list_add_tail(axon_peer_bucket(worker, uuid), &peer->link);
    }
    axon_peer_unbury(worker, peer);   /* an endpoint is coming: it keeps the record */
    if ((peer->address == NULL) && (address != NULL)) {
        peer->address = malloc(address_length);
        if (peer->address == NULL) {
            return NULL;
        }
        memcpy(peer->address, address, address_length);
        peer->address_length = address_length;
    }
    return peer;
}

axon_status_t axon_peer_attach_ep(axon_worker_h worker, axon_ep_h ep, const void *address,
                                  size_t address_length)
{
    axon_peer_t *peer = axon_peer_get(worker, ep->peer_uuid, address, address_length);

    if (peer == NULL) {
        axon_error("no memory to record peer %016llx", (unsigned long long)ep->peer_uuid);
        return AXON_ERR_NO_MEMORY;
    }
    ep->peer = peer;
    /* A user endpoint is preferred for replies over an internal one. */
    if ((peer->ep == NULL) || (peer->ep->internal && !ep->internal)) {
        peer->ep = ep;
    }
    return AXON_OK;
}

void axon_peer_detach_ep(axon_ep_h ep)
{
    axon_worker_h worker = ep->worker;
    axon_peer_t *peer    = ep->peer;
    axon_ep_h other, next = NULL;

    if (peer == NULL) {
        return;
    }
    ep->peer = NULL;
    axon_list_for_each(other, &worker->eps, link) {
        if ((other != ep) && (other->peer == peer)) {
            next = other;
            break;
        }
    }
    /* Another endpoint to the same peer takes over replies. */
    if (peer->ep == ep) {
        peer->ep = next;
    }
    if ((next == NULL) && (peer->status != AXON_OK) && !peer->buried) {
        axon_peer_bury(worker, peer);
    }
}

axon_ep_h axon_peer_reply_ep(axon_worker_h worker, uint64_t uuid)
{
    axon_peer_t *peer = axon_peer_find(worker, uuid);
    axon_status_t status;
    axon_ep_h ep;

    if (peer == NULL) {
        axon_error("no address known for peer %016llx: cannot reply", (unsigned long long)uuid);
        return NULL;
    }
    if (peer->ep != NULL) {
        return peer->ep;
    }
    if (peer->status != AXON_OK) {
        axon_debug("peer %016llx failed (%s): nothing to answer it", (unsigned long long)uuid,
                   axon_status_string(peer->status));
        return NULL;
    }
    if (peer->address == NULL) {
        axon_error("no address known for peer %016llx: cannot reply", (unsigned long long)uuid);
        return NULL;
    }
    /* The peer may have exited since it wrote to us: the transports' details
     * (a shm segment gone, a refused connection) go to debug, and the one
     * line below says what failed. */
    axon_log_demote++;
    status = axon_ep_create_internal(worker, peer->address, peer->address_length, 1, &ep);
    axon_log_demote--;
    if (status != AXON_OK) {
        /* A peer that closed or died is no news; callers say what went unanswered. */
        axon_log((status == AXON_ERR_UNREACHABLE) || (status == AXON_ERR_CONNECTION_RESET) ||
                 (status == AXON_ERR_ENDPOINT_TIMEOUT) ? AXON_LOG_DEBUG : AXON_LOG_ERROR,
                 "cannot reach back to peer %016llx: %s",
                 (unsigned long long)uuid, axon_status_string(status));
        return NULL;
    }
    if (peer->status != AXON_OK) {
        ep->status = peer->status;
    }
    return ep;
}

static size_t axon_peer_pack_hello(void *dest, void *arg)
{
    axon_request_h req = arg;

    memcpy(dest, req->send.buffer, req->send.length);
    return req->send.length;
}

/* The hello's turn on the pending queue (req->send: the worker's address). */
static axon_status_t axon_peer_hello_step(axon_request_h req)
{
    axon_lane_t *lane = &req->send.ep->am_lane;
    ssize_t packed;

    packed = lane->ops->ep_am_bcopy(lane->tl_ep, AXON_AM_WIREUP_HELLO, axon_peer_pack_hello, req);
    return (packed < 0) ? (axon_status_t)packed : AXON_OK;
}

axon_status_t axon_peer_send_hello(axon_ep_h ep)
{
    axon_worker_h worker = ep->worker;
    axon_request_h req;

    req = axon_request_get(worker, NULL, AXON_REQUEST_INTERNAL);
    if (req == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    req->step        = axon_peer_hello_step;
    req->send.ep     = ep;
    req->send.buffer = worker->address;
    req->send.length = worker->address_length;
    axon_ep_pending_push(ep, req);
    axon_ep_progress_pending(ep);
    return AXON_OK;
}

static void axon_peer_am_hello(void *arg, const void *data, size_t length, unsigned flags)
{
    axon_worker_h worker = arg;
    axon_address_t *addr;
    axon_peer_t *peer;

    addr = malloc(sizeof(*addr));
    if (addr == NULL) {
        return;
    }
    if (axon_address_unpack(data, length, addr) != AXON_OK) {
        axon_error("dropping a hello with a malformed address (%zu bytes)", length);
        goto out;
    }
    peer = axon_peer_find(worker, addr->uuid);
    if ((peer != NULL) && (peer->status != AXON_OK)) {
        goto out;   /* it died since it said hello: a straggler */
    }
    peer = axon_peer_get(worker, addr->uuid, data, length);
    if (peer == NULL) {
        axon_error("no memory to record peer %016llx", (unsigned long long)addr->uuid);
        goto out;
    }
    /* Reach back now: replies need it, and the endpoint watches the peer's
     * liveness for receives in progress from it. */
    if ((peer->ep == NULL) && (peer->uuid != worker->uuid)) {
        (void)axon_peer_reply_ep(worker, peer->uuid);
    }
out:
    free(addr);
}

/* Fail everything that depended on a peer; called by transports from progress. */
void axon_peer_failure(void *arg, uint64_t peer_uuid, axon_status_t status)
{
    axon_worker_h worker = arg;
    axon_peer_t *peer = axon_peer_find(worker, peer_uuid);
    axon_request_h req, rtmp;
    axon_ep_h ep, etmp;
    unsigned i;

    if ((peer != NULL) && (peer->status != AXON_OK)) {
        return;  /* already handled: several transports may report one death */
    }
    axon_info("peer %016llx failed: %s", (unsigned long long)peer_uuid, axon_status_string(status));
    if (peer != NULL) {
        peer->status = status;
    }
    /* Protocols' requests leave their own lists of each endpoint first. */
    axon_list_for_each_safe(ep, etmp, &worker->eps, link) {
        if (ep->peer_uuid != peer_uuid) {
            continue;
        }
        ep->status = status;  /* callbacks run below must not start new operations */
        axon_protocols_call(ep_abort, ep, status);
    }

    /* Queued sends next: they complete in order. */
    axon_list_for_each(ep, &worker->eps, link) {
        if (ep->peer_uuid != peer_uuid) {
            continue;
        }
        axon_ep_fail_pending(ep, status);
    }

    /* Requests waiting for the peer's answer or data. A transport operation
     * still in flight completes through its own callback instead. */
    for (i = 0; i < AXON_ID_BUCKETS; ++i) {
        axon_list_for_each_safe(req, rtmp, &worker->id_map[i], id_link) {
            if ((req->peer_uuid != peer_uuid) || (req->flags & AXON_REQUEST_TL_BUSY)) {
                continue;
            }
            axon_request_id_del(req);
            if (!(req->flags & AXON_REQUEST_RECV)) {
                --req->send.ep->outstanding;
            }
            axon_request_complete(req, status);
        }
    }
    axon_protocols_call(peer_failed, worker, peer_uuid, status);

    /* Tell the user last; the callback may close the endpoint. */
    axon_list_for_each_safe(ep, etmp, &worker->eps, link) {
        if ((ep->peer_uuid != peer_uuid) || ep->err_notified) {
            continue;
        }
        ep->err_notified = 1;
        if (ep->close_req != NULL) {
            axon_ep_check_close(ep);
        } else if (!ep->internal && (ep->err_cb != NULL)) {
            ep->err_cb(ep->err_cb_arg, ep, status);
        }
    }

    /* Endpoints made to answer the peer answer nobody now; without them a
     * long job would keep one per peer it outlived. Transports allow this
     * from their failure report. Once its last endpoint goes, the peer keeps only its status. */
    axon_list_for_each_safe(ep, etmp, &worker->eps, link) {
        if ((ep->peer_uuid == peer_uuid) && ep->internal && (ep->close_req == NULL)) {
            axon_ep_destroy_now(ep, status);
        }
    }
}

void axon_peer_cleanup_all(axon_worker_h worker)
{
    unsigned i;

    for (i = 0; i < AXON_PEER_BUCKETS; ++i) {
        while (!axon_list_is_empty(&worker->peers[i])) {
            axon_peer_free(worker, axon_list_first(&worker->peers[i], axon_peer_t, link));
        }
    }
}

void axon_peer_register_handlers(axon_worker_h worker)
{
    worker->am_handlers[AXON_AM_WIREUP_HELLO] = axon_peer_am_hello;
}
