/*
 * Tag send: eager (short, bcopy, multi-fragment, synchronous), the sender's
 * side of rendezvous, and the library's own control messages.
 */
#include <stdlib.h>
#include <string.h>
#include "log.h"
#include "request.h"
#include "tag_proto.h"

static size_t axon_tag_pack_only(void *dest, void *arg)
{
    axon_request_h req = arg;
    axon_eager_hdr_t *hdr = dest;

    axon_tag_match_hdr_pack(&hdr->m, req);
    if (req->send.length > 0) {  /* buffer may be NULL for an empty message */
        memcpy(hdr + 1, req->send.buffer, req->send.length);
    }
    return sizeof(*hdr) + req->send.length;
}

static size_t axon_tag_pack_sync(void *dest, void *arg)
{
    axon_request_h req = arg;
    axon_eager_sync_hdr_t *hdr = dest;

    axon_tag_match_hdr_pack(&hdr->m, req);
    hdr->sreq_id     = req->id;
    if (req->send.length > 0) {
        memcpy(hdr + 1, req->send.buffer, req->send.length);
    }
    return sizeof(*hdr) + req->send.length;
}

static size_t axon_tag_pack_first(void *dest, void *arg)
{
    axon_request_h req = arg;
    axon_eager_first_hdr_t *hdr = dest;
    size_t len = req->send.ep->am_lane.max_bcopy - sizeof(*hdr);

    axon_tag_match_hdr_pack(&hdr->m, req);
    hdr->total_length = req->send.length;
    hdr->msg_id       = req->send.msg_id;
    hdr->sreq_id      = (req->flags & AXON_REQUEST_SYNC) ? req->id : 0;
    memcpy(hdr + 1, req->send.buffer, len);
    return sizeof(*hdr) + len;
}

static size_t axon_tag_pack_middle(void *dest, void *arg)
{
    axon_request_h req = arg;
    axon_eager_middle_hdr_t *hdr = dest;
    size_t len = req->send.ep->am_lane.max_bcopy - sizeof(*hdr);

    if (len > req->send.length - req->send.offset) {
        len = req->send.length - req->send.offset;
    }
    hdr->msg_id      = req->send.msg_id;
    hdr->sender_uuid = req->worker->uuid;
    hdr->offset      = req->send.offset;
    memcpy(hdr + 1, req->send.buffer + req->send.offset, len);
    return sizeof(*hdr) + len;
}

static size_t axon_tag_pack_rndv_data(void *dest, void *arg)
{
    axon_request_h req = arg;
    axon_rndv_data_hdr_t *hdr = dest;
    size_t len = req->send.ep->bulk_lane.max_bcopy - sizeof(*hdr);

    if (len > req->send.rndv_length - req->send.offset) {
        len = req->send.rndv_length - req->send.offset;
    }
    hdr->rreq_id   = req->send.rreq_id;
    hdr->from_uuid = req->worker->uuid;
    hdr->offset    = req->send.offset;
    hdr->length    = len;
    memcpy(hdr + 1, req->send.buffer + req->send.offset, len);
    return sizeof(*hdr) + len;
}

static size_t axon_tag_pack_raw(void *dest, void *arg)
{
    axon_request_h req = arg;

    memcpy(dest, req->send.buffer, req->send.length);
    return req->send.length;
}

/* A transport-level "try again later" is this layer's "still queued". */
static inline axon_status_t axon_tag_retry_status(ssize_t status)
{
    return (status == AXON_ERR_NO_RESOURCE) ? AXON_INPROGRESS : (axon_status_t)status;
}

static void axon_tag_zcopy_done(axon_tl_completion_t *comp, axon_status_t status)
{
    axon_request_h req = axon_container_of(comp, struct axon_request, tl_comp);

    req->flags &= ~AXON_REQUEST_TL_BUSY;
    if (req->flags & AXON_REQUEST_ORPHANED) {
        axon_request_complete(req, (status == AXON_OK) ? AXON_ERR_CANCELED : status);
        return;
    }
    if (req->send.ep->status != AXON_OK) {
        /* The peer failed while we were busy; the failure sweep left us to finish. */
        axon_send_remote_done(req, req->send.ep->status);
        return;
    }
    axon_rndv_send_part_done(req, status);
}

/*
 * The sender's rendezvous data left within the call: the send is done, or,
 * in a split, still waits for the ATS of the receiver's half.
 */
static axon_status_t axon_tag_rndv_data_sent(axon_request_h req)
{
    if (req->send.rndv_parts == 1) {
        return req->send.rndv_status;
    }
    --req->send.rndv_parts;
    return AXON_REQUEST_WAIT_REMOTE;
}

/* Rendezvous data [offset, rndv_length) straight from the user buffer. */
static axon_status_t axon_tag_send_rndv_zcopy(axon_request_h req)
{
    axon_ep_h ep = req->send.ep;
    axon_rndv_data_hdr_t hdr;
    axon_status_t status;

    hdr.rreq_id       = req->send.rreq_id;
    hdr.from_uuid     = req->worker->uuid;
    hdr.offset        = req->send.offset;
    hdr.length        = req->send.rndv_length - req->send.offset;
    req->tl_comp.func = axon_tag_zcopy_done;
    status = ep->bulk_lane.ops->ep_am_zcopy(ep->bulk_lane.tl_ep, AXON_AM_RNDV_DATA, &hdr,
                                            sizeof(hdr), req->send.buffer + hdr.offset,
                                            hdr.length, &req->tl_comp);
    if (status == AXON_INPROGRESS) {
        req->flags |= AXON_REQUEST_TL_BUSY;
        return AXON_REQUEST_WAIT_REMOTE;
    }
    return (status != AXON_OK) ? axon_tag_retry_status(status) : axon_tag_rndv_data_sent(req);
}

/* Send fragments through pack until offset reaches end. */
static axon_status_t axon_tag_send_fragments(axon_request_h req, axon_lane_t *lane, uint8_t am_id,
                                             axon_pack_cb_t pack, size_t hdr_len, size_t end)
{
    ssize_t packed;

    while (req->send.offset < end) {
        packed = lane->ops->ep_am_bcopy(lane->tl_ep, am_id, pack, req);
        if (packed < 0) {
            return axon_tag_retry_status(packed);
        }
        req->send.offset += (size_t)packed - hdr_len;
    }
    return AXON_OK;
}

axon_status_t axon_tag_send_progress(axon_request_h req)
{
    axon_ep_h ep = req->send.ep;
    axon_lane_t *lane = &ep->am_lane;
    axon_rndv_rts_hdr_t rts;
    axon_eager_hdr_t eager;
    axon_status_t status;
    ssize_t packed;

    switch (req->proto) {
    case AXON_SEND_PROTO_SHORT:
        axon_tag_match_hdr_pack(&eager.m, req);
        return axon_tag_retry_status(lane->ops->ep_am_short(lane->tl_ep, AXON_AM_TAG_EAGER_ONLY,
                                                            &eager, sizeof(eager),
                                                            req->send.buffer, req->send.length));
    case AXON_SEND_PROTO_BCOPY:
        packed = lane->ops->ep_am_bcopy(lane->tl_ep, AXON_AM_TAG_EAGER_ONLY, axon_tag_pack_only,
                                        req);
        return (packed < 0) ? axon_tag_retry_status(packed) : AXON_OK;
    case AXON_SEND_PROTO_SYNC:
        packed = lane->ops->ep_am_bcopy(lane->tl_ep, AXON_AM_TAG_EAGER_SYNC_ONLY,
                                        axon_tag_pack_sync, req);
        return (packed < 0) ? axon_tag_retry_status(packed) : AXON_REQUEST_WAIT_REMOTE;
    case AXON_SEND_PROTO_MULTI:
        if (req->send.offset == 0) {
            packed = lane->ops->ep_am_bcopy(lane->tl_ep, AXON_AM_TAG_EAGER_FIRST,
                                            axon_tag_pack_first, req);
            if (packed < 0) {
                return axon_tag_retry_status(packed);
            }
            req->send.offset = (size_t)packed - sizeof(axon_eager_first_hdr_t);
        }
        status = axon_tag_send_fragments(req, lane, AXON_AM_TAG_EAGER_MIDDLE,
                                         axon_tag_pack_middle, sizeof(axon_eager_middle_hdr_t),
                                         req->send.length);
        if ((status == AXON_OK) && (req->flags & AXON_REQUEST_SYNC)) {
            return AXON_REQUEST_WAIT_REMOTE;
        }
        return status;
    case AXON_SEND_PROTO_RNDV_RTS:
        axon_rndv_rts_pack(req, &rts);
        status = lane->ops->ep_am_short(lane->tl_ep, AXON_AM_RNDV_RTS, &rts, sizeof(rts), NULL, 0);
        return (status == AXON_OK) ? AXON_REQUEST_WAIT_REMOTE : axon_tag_retry_status(status);
    case AXON_SEND_PROTO_RNDV_BCOPY:
        status = axon_tag_send_fragments(req, &ep->bulk_lane, AXON_AM_RNDV_DATA,
                                         axon_tag_pack_rndv_data, sizeof(axon_rndv_data_hdr_t),
                                         req->send.rndv_length);
        return (status != AXON_OK) ? status : axon_tag_rndv_data_sent(req);
    case AXON_SEND_PROTO_RNDV_ZCOPY:
        return axon_tag_send_rndv_zcopy(req);
    case AXON_SEND_PROTO_CTRL:
        return axon_tag_retry_status(lane->ops->ep_am_short(lane->tl_ep, req->ctrl.am_id,
                                                            req->ctrl.hdr, req->ctrl.hdr_len,
                                                            NULL, 0));
    case AXON_SEND_PROTO_HELLO:
        packed = lane->ops->ep_am_bcopy(lane->tl_ep, AXON_AM_WIREUP_HELLO, axon_tag_pack_raw,
                                        req);
        return (packed < 0) ? axon_tag_retry_status(packed) : AXON_OK;
    case AXON_SEND_PROTO_RMA:
        return axon_rma_send_progress(req);
    case AXON_SEND_PROTO_CLOSE:
        break;
    }
    axon_error("request %p has no send protocol %d", (void *)req, (int)req->proto);
    return AXON_ERR_INVALID_PARAM;
}

/* Queue a request behind the endpoint's earlier sends. */
static void axon_tag_send_enqueue(axon_ep_h ep, axon_request_h req)
{
    axon_list_add_tail(&ep->pending, &req->list);
    axon_worker_ep_pending_add(ep->worker, ep);
}

void axon_send_remote_done(axon_request_h req, axon_status_t status)
{
    axon_ep_h ep = req->send.ep;

    axon_request_id_del(req);
    --ep->outstanding;
    axon_request_complete(req, status);
    axon_ep_check_close(ep);
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
    req->proto        = AXON_SEND_PROTO_CTRL;
    req->ctrl.ep      = ep;
    req->ctrl.am_id   = am_id;
    req->ctrl.hdr_len = hdr_len;
    memcpy(req->ctrl.hdr, hdr, hdr_len);
    axon_tag_send_enqueue(ep, req);
    return AXON_OK;
}

/*
 * AXON_REQ_FLAG_INJECT: the rest of the send reads a copy the request owns
 * (freed with it), so the caller's buffer is free when the call returns.
 * Made only for a send that cannot leave inside the call: the slow path.
 */
static axon_status_t axon_tag_send_own_copy(axon_request_h req)
{
    uint8_t *copy;

    if (req->flags & AXON_REQUEST_OWN_BUFFER) {
        return AXON_OK;
    }
    copy = malloc((req->send.length > 0) ? req->send.length : 1);
    if (copy == NULL) {
        axon_error("axon_tag_send_nb: no memory for a copy of a %zu-byte inject send",
                   req->send.length);
        return AXON_ERR_NO_MEMORY;
    }
    memcpy(copy, req->send.buffer, req->send.length);
    req->send.buffer = copy;
    req->flags      |= AXON_REQUEST_OWN_BUFFER;
    return AXON_OK;
}

static axon_status_t axon_tag_send_common(axon_ep_h ep, const void *buffer, size_t length,
                                          axon_tag_t tag, const axon_request_param_t *param,
                                          axon_request_h *req_p, int sync)
{
    uint32_t flags = (param != NULL) ? param->flags : 0;
    axon_eager_hdr_t eager;
    axon_request_h req;
    axon_status_t status;

    if ((ep == NULL) || (req_p == NULL) || ((buffer == NULL) && (length > 0))) {
        axon_error("axon_tag_send_nb: NULL %s (length %zu)",
                   !ep ? "endpoint" : !req_p ? "req_p" : "buffer", length);
        return AXON_ERR_INVALID_PARAM;
    }
    if (ep->close_req != NULL) {
        axon_error("axon_tag_send_nb: endpoint %p is closing", (void *)ep);
        return AXON_ERR_INVALID_PARAM;
    }
    if (ep->status != AXON_OK) {
        return ep->status;  /* the peer is gone */
    }

    /* Fast path: one short AM, no request. Queued sends go first to keep order. */
    if ((length <= ep->eager_short_max) && !sync && axon_list_is_empty(&ep->pending) &&
        !(flags & AXON_REQ_FLAG_NO_IMM_CMPL)) {
        eager.m.tag         = tag;
        eager.m.sender_uuid = ep->worker->uuid;
        eager.m.imm_data    = (flags & AXON_REQ_FLAG_IMM_DATA) ? param->imm_data : 0;
        eager.m.flags       = (flags & AXON_REQ_FLAG_IMM_DATA) ? AXON_TAG_INFO_IMM_DATA : 0;
        status = ep->am_lane.ops->ep_am_short(ep->am_lane.tl_ep, AXON_AM_TAG_EAGER_ONLY, &eager,
                                              sizeof(eager), buffer, length);
        if (status != AXON_ERR_NO_RESOURCE) {
            return status;
        }
    }

    req = axon_request_get(ep->worker, param, 0);
    if (req == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    req->send.ep     = ep;
    req->send.buffer = buffer;
    req->send.length = length;
    req->send.tag        = tag;
    req->send.imm_data   = (flags & AXON_REQ_FLAG_IMM_DATA) ? param->imm_data : 0;
    req->send.info_flags = (flags & AXON_REQ_FLAG_IMM_DATA) ? AXON_TAG_INFO_IMM_DATA : 0;
    req->send.offset     = 0;
    /* A rendezvous names (and registers) its buffer for the peer: copy first. */
    if ((flags & AXON_REQ_FLAG_INJECT) && (length >= ep->rndv_thresh) &&
        (axon_tag_send_own_copy(req) != AXON_OK)) {
        axon_request_put(req);
        return AXON_ERR_NO_MEMORY;
    }

    if (length >= ep->rndv_thresh) {
        /* Matched at the receiver before any data moves: sync for free. */
        req->proto = AXON_SEND_PROTO_RNDV_RTS;
        req->send.rndv_parts   = 1;  /* the ATS, or the data once an RTR asks for it */
        req->send.rndv_status  = AXON_OK;
        axon_rndv_send_register(req);
    } else if (sync) {
        req->flags |= AXON_REQUEST_SYNC;
        if (length + sizeof(axon_eager_sync_hdr_t) - sizeof(axon_eager_hdr_t) <=
            ep->eager_bcopy_max) {
            req->proto = AXON_SEND_PROTO_SYNC;
        } else {
            req->proto       = AXON_SEND_PROTO_MULTI;
            req->send.msg_id = ep->worker->next_msg_id++;
        }
    } else if (length <= ep->eager_short_max) {
        req->proto = AXON_SEND_PROTO_SHORT;
    } else if (length <= ep->eager_bcopy_max) {
        req->proto = AXON_SEND_PROTO_BCOPY;
    } else {
        req->proto       = AXON_SEND_PROTO_MULTI;
        req->send.msg_id = ep->worker->next_msg_id++;
    }
    if ((req->proto == AXON_SEND_PROTO_RNDV_RTS) || sync) {
        axon_request_id_add(req, ep->peer_uuid);
        ++ep->outstanding;
    }

    if (axon_list_is_empty(&ep->pending)) {
        status = axon_tag_send_progress(req);
        if (status == AXON_REQUEST_WAIT_REMOTE) {
            *req_p = req;
            return AXON_INPROGRESS;
        }
        if (status != AXON_INPROGRESS) {
            if (req->flags & AXON_REQUEST_IN_ID_MAP) {
                axon_request_id_del(req);
                --ep->outstanding;
            }
            return axon_request_finish_now(req, status, flags, req_p);
        }
    }

    /* Not all of it left: the rest is read from a copy (same offsets). */
    if ((flags & AXON_REQ_FLAG_INJECT) && (axon_tag_send_own_copy(req) != AXON_OK)) {
        if (req->flags & AXON_REQUEST_IN_ID_MAP) {
            axon_request_id_del(req);
            --ep->outstanding;
        }
        axon_request_put(req);
        return AXON_ERR_NO_MEMORY;
    }
    axon_tag_send_enqueue(ep, req);
    *req_p = req;
    return AXON_INPROGRESS;
}

axon_status_t axon_tag_send_nb(axon_ep_h ep, const void *buffer, size_t length, axon_tag_t tag,
                               const axon_request_param_t *param, axon_request_h *req_p)
{
    return axon_tag_send_common(ep, buffer, length, tag, param, req_p, 0);
}

axon_status_t axon_tag_send_sync_nb(axon_ep_h ep, const void *buffer, size_t length,
                                    axon_tag_t tag, const axon_request_param_t *param,
                                    axon_request_h *req_p)
{
    return axon_tag_send_common(ep, buffer, length, tag, param, req_p, 1);
}
