/*
 * Rendezvous data striped over the endpoint's rails (api/core/rails.h): one
 * stripe per rail, sized by the rails' bandwidth shares, each moved on its
 * rail at the same time as the others.
 *
 * Streamed (tcp: the receiver sent an RTR): the sender sends each stripe
 * as one zero-copy RNDV_DATA on its rail. The receiver needs nothing new:
 * every RNDV_DATA says where it goes, and the receive completes once all
 * bytes are in, on whichever lanes they came.
 *
 * Read (rc: keys): the sender registers its buffer on every rail's domain
 * and the RTS carries each key named by the sender's device; the receiver
 * reads each stripe on its rail to that device, and sends the ATS once
 * every stripe is in (recv_part_done).
 *
 * A rail that refuses its stripe outright (an error, not a full queue)
 * hands it to rail 0. A read rail 0 refuses waits for the stripes in
 * flight; with none left, the receiver asks the sender to send the message
 * (an RTR), as on one lane. A rail that fails after taking it fails the message
 * (a streamed stripe may be partly written: only its own bytes of the
 * receive buffer, never beyond). The transports also report the peer
 * failed (tcp: a connection of the peer died; rc: its QP errored), which
 * fails the other side: an error on both sides, never a hang.
 */
#include <stdio.h>
#include <string.h>
#include "log.h"
#include "rails.h"
#include "request.h"
#include "tag_proto.h"

/* The lane that carries stripe i: its rail's, or rail 0's once its rail refused it. */
static inline const axon_lane_t *axon_rndv_rail_lane(axon_request_h req,
                                                     const axon_ep_rails_t *rails, unsigned i)
{
    return &rails->lane[(req->rails.moved & (1u << i)) ? 0 : i];
}

/* Stripe i of [begin, end) over count rails: its offset, and its length in *length. */
static inline size_t axon_rndv_stripe(const axon_ep_rails_t *rails, unsigned i, unsigned count,
                                      size_t begin, size_t end, size_t *length)
{
    size_t lo = axon_rail_bound(rails, i, begin, end);
    size_t hi = (i + 1 == count) ? end : axon_rail_bound(rails, i + 1, begin, end);

    *length = hi - lo;
    return lo;
}

static void axon_rndv_rails_init(axon_request_h req, unsigned count,
                                 void (*func)(axon_tl_completion_t *comp, axon_status_t status))
{
    unsigned i;

    req->rails.count = (uint8_t)count;
    req->rails.todo  = (uint8_t)((1u << count) - 1);
    req->rails.busy  = 0;
    req->rails.moved = 0;
    for (i = 0; i < count; ++i) {
        req->rails.comp[i].super.func = func;
        req->rails.comp[i].req        = req;
    }
}

/* ---------------------------------------------------------------- streamed (sender) */

static void axon_rndv_rail_sent(axon_tl_completion_t *comp, axon_status_t status)
{
    axon_request_h req = axon_container_of(comp, axon_rail_comp_t, super)->req;

    if ((status != AXON_OK) && (req->send.rndv_status == AXON_OK)) {
        req->send.rndv_status = status;
    }
    if ((--req->rails.busy == 0) && !axon_tag_send_tl_done(req, status) &&
        (req->rails.todo == 0)) {
        axon_rndv_send_part_done(req, req->send.rndv_status);
    }   /* else: stripes still in flight, or still queued: its step hands over the rest */
}

int axon_rndv_rails_start(axon_request_h req)
{
    axon_ep_h ep = req->send.ep;
    unsigned count;

    if (!axon_rails_worth(req->send.rndv_length - req->send.offset) ||
        (req->flags & AXON_REQUEST_LAYOUT) ||
        !(ep->bulk_lane.resource->cap_flags & AXON_CAP_AM_ZCOPY)) {
        return 0;
    }
    count = axon_rails_for(axon_ep_rails(ep), req->send.rndv_length - req->send.offset);
    if (count < 2) {
        return 0;
    }
    axon_rndv_rails_init(req, count, axon_rndv_rail_sent);
    req->step = axon_tag_step_rndv_rails;
    return 1;
}

axon_status_t axon_tag_step_rndv_rails(axon_request_h req)
{
    const axon_ep_rails_t *rails = req->send.ep->rails;
    const axon_lane_t *lane;
    axon_rndv_data_hdr_t hdr;
    axon_status_t status;
    size_t length;
    unsigned i;

    hdr.rreq_id   = req->send.rreq_id;
    hdr.from_uuid = req->worker->uuid;
    for (i = 0; i < req->rails.count; ++i) {
        if (!(req->rails.todo & (1u << i))) {
            continue;
        }
        hdr.offset = axon_rndv_stripe(rails, i, req->rails.count, req->send.offset,
                                      req->send.rndv_length, &length);
        hdr.length = length;
        lane       = axon_rndv_rail_lane(req, rails, i);
        status     = lane->ops->ep_am_zcopy(lane->tl_ep, AXON_AM_RNDV_DATA, &hdr, sizeof(hdr),
                                            req->send.buffer + hdr.offset, length,
                                            &req->rails.comp[i].super);
        if (status == AXON_ERR_NO_RESOURCE) {
            continue;   /* that rail is busy: the others go on */
        }
        if ((status != AXON_OK) && (status != AXON_INPROGRESS) && (lane != &rails->lane[0])) {
            axon_debug("rendezvous stripe %u refused by %s/%s (%s): rail 0 takes it", i,
                       lane->resource->tl_name, lane->resource->dev_name,
                       axon_status_string(status));
            req->rails.moved |= (uint8_t)(1u << i);
            --i;   /* the same stripe again, on rail 0 */
            continue;
        }
        req->rails.todo &= (uint8_t)~(1u << i);
        if (status == AXON_INPROGRESS) {
            ++req->rails.busy;
            req->flags |= AXON_REQUEST_TL_BUSY;
        } else if ((status != AXON_OK) && (req->send.rndv_status == AXON_OK)) {
            req->send.rndv_status = status;
        }
    }
    if (req->rails.todo != 0) {
        return AXON_ERR_NO_RESOURCE;   /* stays first in the queue until all are out */
    }
    if (req->rails.busy > 0) {
        return AXON_INPROGRESS;   /* the last completion finishes it */
    }
    if (req->send.rndv_parts == 1) {
        return req->send.rndv_status;
    }
    --req->send.rndv_parts;   /* a split: the ATS of the receiver's half is still due */
    return AXON_INPROGRESS;
}

/* ---------------------------------------------------------------- read (receiver) */

void axon_rndv_rails_register(axon_request_h req)
{
    const axon_ep_rails_t *rails;
    const axon_lane_t *lane;
    unsigned count, i;
    void *memh;

    if (!axon_rails_worth(req->send.length) || (req->flags & AXON_REQUEST_LAYOUT)) {
        return;
    }
    rails = axon_ep_rails(req->send.ep);
    count = axon_rails_for(rails, req->send.length);
    if (count < 2) {
        return;
    }
    req->rails.count = (uint8_t)count;
    for (i = 1; i < count; ++i) {
        lane                = &rails->lane[i];
        req->rails.send.memh[i] = NULL;
        req->rails.send.md[i]   = lane->md;
        if ((lane->md == NULL) || (lane->md->ops->rkey_max_len > AXON_RNDV_RKEY_MAX) ||
            (lane->md->ops->mem_reg(lane->md, (void *)(uintptr_t)req->send.buffer,
                                    req->send.length, AXON_MEM_REG_TRANSIENT, &memh) !=
             AXON_OK)) {
            axon_debug("%s/%s: rendezvous buffer not registered, that rail is not read",
                       lane->resource->tl_name, lane->resource->dev_name);
            continue;
        }
        req->rails.send.memh[i] = memh;
        req->flags             |= AXON_REQUEST_RAIL_MEMH;
    }
}

uint32_t axon_rndv_rails_pack_keys(axon_request_h req, axon_rndv_rail_key_t *keys)
{
    const axon_ep_rails_t *rails = req->send.ep->rails;
    const axon_lane_t *lane;
    uint32_t n = 0;
    unsigned i;

    if (!(req->flags & AXON_REQUEST_RAIL_MEMH) || !(req->flags & AXON_REQUEST_RNDV_MEMH)) {
        return 0;
    }
    for (i = 0; i < req->rails.count; ++i) {
        void *memh = (i == 0) ? req->send.rndv_memh : req->rails.send.memh[i];

        if (memh == NULL) {
            continue;
        }
        lane = &rails->lane[i];
        memset(&keys[n], 0, sizeof(keys[n]));
        snprintf(keys[n].dev_name, sizeof(keys[n].dev_name), "%s", lane->resource->dev_name);
        keys[n].len = (uint32_t)lane->md->ops->rkey_pack(lane->md, memh, keys[n].rkey);
        ++n;
    }
    return n;
}

static void axon_rndv_rail_got(axon_tl_completion_t *comp, axon_status_t status)
{
    axon_rail_comp_t *rc = axon_container_of(comp, axon_rail_comp_t, super);
    axon_request_h req = rc->req;

    if (--req->rails.busy == 0) {
        req->flags &= ~AXON_REQUEST_TL_BUSY;
    }
    axon_rndv_recv_part_done(req, rc->length, status);
}

/* The RTS's key for the sender's device dev, or NULL. */
static const axon_rndv_rail_key_t *axon_rndv_rail_key(const axon_rndv_rts_hdr_t *rts,
                                                      const char *dev)
{
    const axon_rndv_rail_key_t *keys = (const axon_rndv_rail_key_t *)(rts + 1);
    uint32_t i;

    for (i = 0; i < rts->rail_keys; ++i) {
        if (!strncmp(keys[i].dev_name, dev, sizeof(keys[i].dev_name)) &&
            (keys[i].len > 0) && (keys[i].len <= AXON_RNDV_RKEY_MAX)) {
            return &keys[i];
        }
    }
    return NULL;
}

/*
 * Post the stripes still to post, rail 0's last (the others' refusals move
 * there). A stripe rail 0 refuses stays to post (its send queue is full, or
 * its connection still coming up). Stripes that failed at once are added
 * up in *failed, with their first error in *status_p, for the caller to
 * account once the request is in a stable state.
 */
static void axon_rndv_rails_post(axon_request_h req, const axon_ep_rails_t *rails,
                                 size_t *failed, axon_status_t *status_p)
{
    const axon_lane_t *lane;
    axon_rail_comp_t *comp;
    axon_status_t status;
    unsigned k, i;

    for (k = 1; k <= req->rails.count; ++k) {
        i = k % req->rails.count;
        if (!(req->rails.todo & (1u << i))) {
            continue;
        }
        comp = &req->rails.comp[i];
        for (;;) {
            unsigned on = (req->rails.moved & (1u << i)) ? 0 : i;

            lane   = &rails->lane[on];
            status = lane->ops->ep_get_zcopy(lane->tl_ep, req->recv.buffer + comp->offset,
                                             comp->length, req->rails.recv.address + comp->offset,
                                             req->rails.recv.rkey[on], &comp->super);
            if ((status != AXON_ERR_UNSUPPORTED) || (on == 0)) {
                break;
            }
            req->rails.moved |= (uint8_t)(1u << i);   /* refused: rail 0 reads it */
        }
        if (status == AXON_ERR_UNSUPPORTED) {
            continue;   /* rail 0 is full or not up yet: later */
        }
        req->rails.todo &= (uint8_t)~(1u << i);
        if (status == AXON_INPROGRESS) {
            ++req->rails.busy;
            req->flags |= AXON_REQUEST_TL_BUSY;
            continue;
        }
        *failed += comp->length;   /* AXON_OK of an empty stripe, or an error */
        if ((status != AXON_OK) && (*status_p == AXON_OK)) {
            *status_p = status;
        }
    }
}

/* req waits for the tag protocol's progress to post the rest (or leaves that list). */
static void axon_rndv_rails_wait(axon_request_h req, int wait)
{
    axon_worker_h worker = req->worker;

    if (wait) {
        axon_list_add_tail(&worker->rail_waits, &req->list);
        ++worker->proto_polls;
    } else {
        axon_list_del(&req->list);
        --worker->proto_polls;
    }
}

/* The bytes of the stripes not yet posted. */
static size_t axon_rndv_rails_unposted(axon_request_h req)
{
    size_t bytes = 0;
    unsigned i;

    for (i = 0; i < req->rails.count; ++i) {
        if (req->rails.todo & (1u << i)) {
            bytes += req->rails.comp[i].length;
        }
    }
    req->rails.todo = 0;
    return bytes;
}

/*
 * Stripes are left to post and none is in flight: rail 0 refused them, and
 * no completion of ours will make room (a registration the device refused
 * stays refused). As a receive on one lane does when its lane cannot read,
 * ask the sender to send: an RTR for the whole message (the stripes read
 * so far get the same bytes again). With a stripe failed already, the rest
 * is given up with it. The bytes the receive is to count as failed go into
 * *failed, their error into *status_p.
 */
static void axon_rndv_rails_stuck(axon_request_h req, axon_ep_h ep, size_t *failed,
                                  axon_status_t *status_p)
{
    axon_status_t status;

    if ((*failed > 0) || (req->recv.rndv_status != AXON_OK)) {
        *failed += axon_rndv_rails_unposted(req);
        return;
    }
    axon_debug("rendezvous %llu: rail 0 refused the rest of %zu bytes with no stripe in "
               "flight: the sender sends it", (unsigned long long)req->recv.sreq_id,
               req->recv.expected);
    req->rails.todo      = 0;
    req->recv.received   = 0;
    req->recv.rndv_split = AXON_RNDV_SPLIT_NONE;   /* the data ends it, no ATS */
    axon_request_id_del(req);
    status = axon_rndv_send_rtr(req, ep, req->recv.expected, 0, 0, 0);
    if (status != AXON_OK) {
        *failed   = req->recv.expected;
        *status_p = status;
    }
}

axon_status_t axon_rndv_rails_get(axon_request_h req, axon_ep_h ep,
                                  const axon_rndv_rts_hdr_t *rts, size_t want)
{
    const axon_ep_rails_t *rails;
    const axon_rndv_rail_key_t *key;
    axon_status_t status = AXON_OK;
    const axon_lane_t *lane;
    size_t failed = 0;
    unsigned count, i;

    if (!axon_rails_worth(want) || (req->flags & AXON_REQUEST_LAYOUT) || (rts->flags != 0)) {
        return AXON_ERR_UNSUPPORTED;
    }
    rails = axon_ep_rails(ep);
    count = axon_rails_for(rails, want);
    if (count < 2) {
        return AXON_ERR_UNSUPPORTED;
    }
    for (i = 0; i < count; ++i) {
        lane = &rails->lane[i];
        key  = axon_rndv_rail_key(rts, rails->lane[i].peer_dev);
        if ((key == NULL) || !(lane->resource->cap_flags & AXON_CAP_GET) ||
            (lane->ops->ep_get_zcopy == NULL) ||
            strncmp(rts->rkey_tl, lane->resource->tl_name, sizeof(rts->rkey_tl))) {
            axon_debug("rendezvous %llu: no key for rail %u (%s to the peer's %s): one lane reads",
                       (unsigned long long)rts->sreq_id, i, lane->resource->dev_name,
                       rails->lane[i].peer_dev);
            return AXON_ERR_UNSUPPORTED;
        }
        memcpy(req->rails.recv.rkey[i], key->rkey, key->len);
    }

    axon_rndv_rails_init(req, count, axon_rndv_rail_got);
    req->rails.recv.address = rts->address;
    for (i = 0; i < count; ++i) {
        req->rails.comp[i].offset = axon_rndv_stripe(rails, i, count, 0, want,
                                                     &req->rails.comp[i].length);
    }
    axon_rndv_rails_post(req, rails, &failed, &status);
    if ((req->rails.busy == 0) && (failed == 0) && (req->rails.todo != 0)) {
        return AXON_ERR_UNSUPPORTED;   /* nothing could be posted: one lane's way */
    }
    req->recv.rndv_split = AXON_RNDV_SPLIT_RAILS;   /* the ATS once all stripes are in */
    if ((req->rails.todo != 0) && (req->rails.busy == 0)) {
        axon_rndv_rails_stuck(req, ep, &failed, &status);   /* one failed: the rest too */
    }
    if (req->rails.todo != 0) {
        axon_rndv_rails_wait(req, 1);
    }
    if (failed > 0) {
        axon_rndv_recv_part_done(req, failed, status);
    }
    return AXON_OK;
}

/* A receive waiting to post stripes: try again, or give them up if the peer is gone;
 * 1 if any stripe left the waiting ones. */
static unsigned axon_rndv_rails_retry(axon_request_h req)
{
    axon_peer_t *peer = axon_peer_find(req->worker, req->peer_uuid);
    axon_status_t status = AXON_OK;
    uint8_t todo = req->rails.todo;
    size_t failed = 0;

    if ((peer == NULL) || (peer->ep == NULL) || (peer->ep->status != AXON_OK) ||
        (peer->ep->rails == NULL)) {
        status = ((peer != NULL) && (peer->status != AXON_OK)) ? peer->status :
                 AXON_ERR_CANCELED;
        failed = axon_rndv_rails_unposted(req);
    } else {
        axon_rndv_rails_post(req, peer->ep->rails, &failed, &status);
        if ((req->rails.todo != 0) && (req->rails.busy == 0)) {
            axon_rndv_rails_stuck(req, peer->ep, &failed, &status);
        }
    }
    if (req->rails.todo == todo) {
        return 0;
    }
    if (req->rails.todo == 0) {
        axon_rndv_rails_wait(req, 0);
    }
    if (failed > 0) {
        axon_rndv_recv_part_done(req, failed, status);
    }
    return 1;
}

unsigned axon_rndv_rails_progress(axon_worker_h worker)
{
    axon_request_h req, tmp;
    unsigned count = 0;

    axon_list_for_each_safe(req, tmp, &worker->rail_waits, list) {
        count += axon_rndv_rails_retry(req);
    }
    return count;
}

void axon_rndv_rails_peer_failed(axon_worker_h worker, uint64_t peer_uuid, axon_status_t status)
{
    axon_request_h req, tmp;
    size_t failed;

    axon_list_for_each_safe(req, tmp, &worker->rail_waits, list) {
        if (req->peer_uuid == peer_uuid) {
            failed = axon_rndv_rails_unposted(req);
            axon_rndv_rails_wait(req, 0);
            axon_rndv_recv_part_done(req, failed, status);
        }
    }
}
