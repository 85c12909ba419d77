/*
 * Rendezvous: large messages move only once the receiver has matched them.
 *
 *   sender                         receiver
 *   RTS (AM lane, in order) ──────▶ match
 *                                   get from the sender's memory (shm: CMA, self: memcpy)
 *        ◀────────────────────────  ATS             — single copy, sender idle
 *   or, when the lane cannot get:
 *        ◀────────────────────────  RTR (length wanted)
 *   DATA (zero-copy, or pipelined bcopy fragments) ──▶ written into the receive buffer
 */
#include <string.h>
#include "log.h"
#include "request.h"
#include "tag_proto.h"

static void axon_rndv_recv_finish(axon_request_h req, axon_status_t status)
{
    if ((status == AXON_OK) && (req->recv.info.length > req->recv.length)) {
        status = AXON_ERR_MSG_TRUNCATED;
    }
    axon_request_complete(req, status);
}

static void axon_rndv_send_ats(axon_worker_h worker, axon_ep_h ep, uint64_t sreq_id,
                               axon_status_t status)
{
    axon_rndv_ats_hdr_t ats = {sreq_id, worker->uuid, status};

    if ((axon_ep_send_ctrl(ep, AXON_AM_RNDV_ATS, &ats, sizeof(ats)) != AXON_OK) &&
        (ep->status == AXON_OK)) {  /* a dead peer needs no answer */
        axon_warn("could not tell peer %016llx that rendezvous %llu is done",
                  (unsigned long long)ep->peer_uuid, (unsigned long long)sreq_id);
    }
}

static void axon_rndv_get_done(axon_tl_completion_t *comp, axon_status_t status)
{
    axon_request_h req = axon_container_of(comp, struct axon_request, tl_comp);
    axon_worker_h worker = req->worker;
    axon_ep_h ep;

    req->flags &= ~AXON_REQUEST_TL_BUSY;
    ep = axon_peer_reply_ep(worker, req->peer_uuid);
    if (ep != NULL) {
        axon_rndv_send_ats(worker, ep, req->recv.sreq_id, status);
    }
    axon_rndv_recv_finish(req, status);
}

void axon_rndv_recv_start(axon_request_h req, const axon_rndv_rts_hdr_t *rts)
{
    axon_worker_h worker = req->worker;
    size_t want = (rts->length < req->recv.length) ? rts->length : req->recv.length;
    axon_rndv_rtr_hdr_t rtr;
    axon_status_t status;
    axon_lane_t *lane;
    axon_ep_h ep;

    req->recv.info.sender_tag = rts->tag;
    req->recv.info.length     = rts->length;
    req->recv.sreq_id         = rts->sreq_id;
    req->recv.received        = 0;
    req->recv.expected        = want;
    req->peer_uuid            = rts->sender_uuid;

    ep = axon_peer_reply_ep(worker, rts->sender_uuid);
    if (ep == NULL) {
        axon_request_complete(req, AXON_ERR_UNREACHABLE);
        return;
    }
    if (ep->status != AXON_OK) {
        axon_request_complete(req, ep->status);
        return;
    }
    if (want == 0) {
        axon_rndv_send_ats(worker, ep, rts->sreq_id, AXON_OK);
        axon_rndv_recv_finish(req, AXON_OK);
        return;
    }

    lane = &ep->bulk_lane;
    if ((lane->resource->cap_flags & AXON_CAP_GET) && (lane->ops->ep_get_zcopy != NULL)) {
        req->tl_comp.func = axon_rndv_get_done;
        req->flags       |= AXON_REQUEST_TL_BUSY;
        status = lane->ops->ep_get_zcopy(lane->tl_ep, req->recv.buffer, want, rts->address,
                                         &req->tl_comp);
        if (status == AXON_INPROGRESS) {
            return;
        }
        if (status != AXON_ERR_UNSUPPORTED) {
            axon_rndv_get_done(&req->tl_comp, status);
            return;
        }
        req->flags &= ~AXON_REQUEST_TL_BUSY;
        /* Not allowed for this peer (e.g. ptrace policy): the sender sends. */
    }

    axon_request_id_add(req, rts->sender_uuid);
    rtr.sreq_id   = rts->sreq_id;
    rtr.from_uuid = worker->uuid;
    rtr.rreq_id   = req->id;
    rtr.length    = want;
    status = axon_ep_send_ctrl(ep, AXON_AM_RNDV_RTR, &rtr, sizeof(rtr));
    if (status != AXON_OK) {
        axon_request_id_del(req);
        axon_request_complete(req, status);
    }
}

static void axon_rndv_am_ats(void *arg, const void *data, size_t length, unsigned flags)
{
    const axon_rndv_ats_hdr_t *ats = data;
    axon_request_h req;

    if (length != sizeof(*ats)) {
        axon_error("dropping rendezvous ATS of %zu bytes", length);
        return;
    }
    req = axon_request_id_find(arg, ats->sreq_id, ats->from_uuid);
    if ((req == NULL) || (req->proto != AXON_SEND_PROTO_RNDV_RTS)) {
        axon_debug("ATS for unknown rendezvous send %llu", (unsigned long long)ats->sreq_id);
        return;
    }
    axon_send_remote_done(req, (axon_status_t)ats->status);
}

static void axon_rndv_am_rtr(void *arg, const void *data, size_t length, unsigned flags)
{
    const axon_rndv_rtr_hdr_t *rtr = data;
    axon_request_h req;
    axon_ep_h ep;

    if (length != sizeof(*rtr)) {
        axon_error("dropping rendezvous RTR of %zu bytes", length);
        return;
    }
    req = axon_request_id_find(arg, rtr->sreq_id, rtr->from_uuid);
    if ((req == NULL) || (req->proto != AXON_SEND_PROTO_RNDV_RTS)) {
        axon_debug("RTR for unknown rendezvous send %llu", (unsigned long long)rtr->sreq_id);
        return;
    }
    if (rtr->length > req->send.length) {
        axon_error("peer %016llx asks for %llu bytes of a %zu-byte message",
                   (unsigned long long)rtr->from_uuid, (unsigned long long)rtr->length,
                   req->send.length);
        axon_send_remote_done(req, AXON_ERR_IO_FORMAT);
        return;
    }
    if (rtr->length == 0) {
        axon_send_remote_done(req, AXON_OK);
        return;
    }

    ep = req->send.ep;
    req->send.rndv_length = rtr->length;
    req->send.rreq_id     = rtr->rreq_id;
    req->send.offset      = 0;
    req->proto = ((ep->bulk_lane.resource->cap_flags & AXON_CAP_AM_ZCOPY) &&
                  (ep->bulk_lane.ops->ep_am_zcopy != NULL)) ?
                 AXON_SEND_PROTO_RNDV_ZCOPY : AXON_SEND_PROTO_RNDV_BCOPY;
    /* Data goes behind whatever the endpoint already queued. */
    axon_list_add_tail(&ep->pending, &req->list);
    axon_worker_ep_pending_add(ep->worker, ep);
    axon_ep_progress_pending(ep);
}

void *axon_rndv_rx_dest(axon_worker_h worker, const void *hdr_p, size_t hdr_len,
                        size_t data_length)
{
    axon_rndv_data_hdr_t hdr;
    axon_request_h req;

    if (hdr_len != sizeof(hdr)) {
        return NULL;
    }
    memcpy(&hdr, hdr_p, sizeof(hdr));
    req = axon_request_id_find(worker, hdr.rreq_id, hdr.from_uuid);
    if ((req == NULL) || !(req->flags & AXON_REQUEST_RECV) ||
        (hdr.offset > req->recv.expected) ||
        (data_length > req->recv.expected - hdr.offset)) {
        return NULL;  /* the handler reports it */
    }
    req->recv.placing = data_length;
    return req->recv.buffer + hdr.offset;
}

static void axon_rndv_am_data(void *arg, const void *data, size_t length, unsigned flags)
{
    const axon_rndv_data_hdr_t *hdr = data;
    axon_request_h req;
    size_t len;

    if (length < sizeof(*hdr)) {
        axon_error("dropping rendezvous data of %zu bytes", length);
        return;
    }
    req = axon_request_id_find(arg, hdr->rreq_id, hdr->from_uuid);
    if ((req == NULL) || !(req->flags & AXON_REQUEST_RECV)) {
        axon_warn("dropping rendezvous data for unknown receive %llu from %016llx",
                  (unsigned long long)hdr->rreq_id, (unsigned long long)hdr->from_uuid);
        return;
    }

    if (flags & AXON_AM_FLAG_PLACED) {
        len = req->recv.placing;
        req->recv.placing = 0;
    } else {
        len = length - sizeof(*hdr);
        if ((hdr->offset > req->recv.expected) || (len > req->recv.expected - hdr->offset)) {
            axon_error("dropping rendezvous data at %llu + %zu beyond %zu bytes expected",
                       (unsigned long long)hdr->offset, len, req->recv.expected);
            return;
        }
        memcpy(req->recv.buffer + hdr->offset, hdr + 1, len);
    }
    req->recv.received += len;
    if (req->recv.received >= req->recv.expected) {
        axon_request_id_del(req);
        axon_rndv_recv_finish(req, AXON_OK);
    }
}

void axon_rndv_register_handlers(axon_worker_h worker)
{
    worker->am_handlers[AXON_AM_RNDV_ATS]  = axon_rndv_am_ats;
    worker->am_handlers[AXON_AM_RNDV_RTR]  = axon_rndv_am_rtr;
    worker->am_handlers[AXON_AM_RNDV_DATA] = axon_rndv_am_data;
}
