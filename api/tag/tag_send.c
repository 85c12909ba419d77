/*
 * Tag send: eager (short, bcopy, multi-fragment, synchronous), the sender's
 * side of rendezvous, and the library's own control messages.
 */
#include <stdlib.h>
#include <string.h>
#include "log.h"
#include "request.h"
#include "tag_proto.h"
#include "tag_space.h"

/* Copy [offset, +length) of the message to dest: gathered from a layout as it is packed. */
static inline void axon_tag_send_copy(axon_request_h req, void *dest, size_t offset,
                                      size_t length)
{
    if (req->flags & AXON_REQUEST_LAYOUT) {
        axon_layout_gather(&req->send.cursor, offset, dest, length);
    } else {
        memcpy(dest, req->send.buffer + offset, length);
    }
}

static size_t axon_tag_pack_only(void *dest, void *arg)
{
    axon_request_h req = arg;
    axon_eager_hdr_t *hdr = dest;

    axon_tag_match_hdr_pack(&hdr->m, req);
    if (req->send.length > 0) {  /* buffer may be NULL for an empty message */
        axon_tag_send_copy(req, hdr + 1, 0, req->send.length);
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
        axon_tag_send_copy(req, hdr + 1, 0, req->send.length);
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
    axon_tag_send_copy(req, hdr + 1, 0, len);
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
    axon_tag_send_copy(req, hdr + 1, req->send.offset, len);
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
    axon_tag_send_copy(req, hdr + 1, req->send.offset, len);
    return sizeof(*hdr) + len;
}


int axon_tag_send_tl_done(axon_request_h req, axon_status_t status)
{
    req->flags &= ~AXON_REQUEST_TL_BUSY;
    if (req->flags & AXON_REQUEST_ORPHANED) {
        axon_request_complete(req, (status == AXON_OK) ? AXON_ERR_CANCELED : status);
        return 1;
    }
    if (req->send.ep->status != AXON_OK) {
        /* The peer failed while we were busy; the failure sweep left us to finish. */
        axon_send_remote_done(req, req->send.ep->status);
        return 1;
    }
    return 0;
}

static void axon_tag_zcopy_done(axon_tl_completion_t *comp, axon_status_t status)
{
    axon_request_h req = axon_container_of(comp, struct axon_request, tl_comp);

    if (!axon_tag_send_tl_done(req, status)) {
        axon_rndv_send_part_done(req, status);
    }
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
    return AXON_INPROGRESS;
}

/* Rendezvous data [offset, rndv_length) straight from the user buffer. */
axon_status_t axon_tag_step_rndv_zcopy(axon_request_h req)
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
        return AXON_INPROGRESS;
    }
    return (status != AXON_OK) ? status : axon_tag_rndv_data_sent(req);
}

/* Send fragments through pack until offset reaches end. */
static axon_status_t axon_tag_send_fragments(axon_request_h req, axon_lane_t *lane, uint8_t am_id,
                                             axon_pack_cb_t pack, size_t hdr_len, size_t end)
{
    ssize_t packed;

    while (req->send.offset < end) {
        packed = lane->ops->ep_am_bcopy(lane->tl_ep, am_id, pack, req);
        if (packed < 0) {
            return (axon_status_t)packed;
        }
        req->send.offset += (size_t)packed - hdr_len;
    }
    return AXON_OK;
}

/* Eager sends, one step each (req->step); the returns of axon_request_step_t. */
static axon_status_t axon_tag_step_short(axon_request_h req)
{
    axon_lane_t *lane = &req->send.ep->am_lane;
    axon_eager_hdr_t eager;

    axon_tag_match_hdr_pack(&eager.m, req);
    return lane->ops->ep_am_short(lane->tl_ep, AXON_AM_TAG_EAGER_ONLY, &eager, sizeof(eager),
                                  req->send.buffer, req->send.length);
}

static axon_status_t axon_tag_step_bcopy(axon_request_h req)
{
    axon_lane_t *lane = &req->send.ep->am_lane;
    ssize_t packed;

    packed = lane->ops->ep_am_bcopy(lane->tl_ep, AXON_AM_TAG_EAGER_ONLY, axon_tag_pack_only, req);
    return (packed < 0) ? (axon_status_t)packed : AXON_OK;
}

/* Sent whole; done when the receiver's SYNC_ACK says it matched. */
static axon_status_t axon_tag_step_sync(axon_request_h req)
{
    axon_lane_t *lane = &req->send.ep->am_lane;
    ssize_t packed;

    packed = lane->ops->ep_am_bcopy(lane->tl_ep, AXON_AM_TAG_EAGER_SYNC_ONLY, axon_tag_pack_sync,
                                    req);
    return (packed < 0) ? (axon_status_t)packed : AXON_INPROGRESS;
}

static axon_status_t axon_tag_step_multi(axon_request_h req)
{
    axon_lane_t *lane = &req->send.ep->am_lane;
    axon_status_t status;
    ssize_t packed;

    if (req->send.offset == 0) {
        packed = lane->ops->ep_am_bcopy(lane->tl_ep, AXON_AM_TAG_EAGER_FIRST, axon_tag_pack_first,
                                        req);
        if (packed < 0) {
            return (axon_status_t)packed;
        }
        req->send.offset = (size_t)packed - sizeof(axon_eager_first_hdr_t);
    }
    status = axon_tag_send_fragments(req, lane, AXON_AM_TAG_EAGER_MIDDLE, axon_tag_pack_middle,
                                     sizeof(axon_eager_middle_hdr_t), req->send.length);
    if ((status == AXON_OK) && (req->flags & AXON_REQUEST_SYNC)) {
        /* matched already (axon_tag_sync_acked): done now that the last fragment is out */
        return (req->flags & AXON_REQUEST_SYNC_ACKED) ? AXON_OK : AXON_INPROGRESS;
    }
    return status;
}

/* Rendezvous: the RTS, then the receiver's ATS or RTR decides. */
axon_status_t axon_tag_step_rndv_rts(axon_request_h req)
{
    axon_lane_t *lane = &req->send.ep->am_lane;
    axon_rndv_rail_key_t keys[AXON_RNDV_RAILS_MAX];
    axon_rndv_rts_hdr_t rts;
    axon_status_t status;

    axon_rndv_rts_pack(req, &rts);
    rts.rail_keys = axon_rndv_rails_pack_keys(req, keys);
    status = lane->ops->ep_am_short(lane->tl_ep, AXON_AM_RNDV_RTS, &rts, sizeof(rts), keys,
                                    rts.rail_keys * sizeof(keys[0]));
    return (status == AXON_OK) ? AXON_INPROGRESS : status;
}

/* Rendezvous data the receiver asked for (RTR), pipelined through bcopy AMs. */
axon_status_t axon_tag_step_rndv_bcopy(axon_request_h req)
{
    axon_status_t status;

    status = axon_tag_send_fragments(req, &req->send.ep->bulk_lane, AXON_AM_RNDV_DATA,
                                     axon_tag_pack_rndv_data, sizeof(axon_rndv_data_hdr_t),
                                     req->send.rndv_length);
    return (status != AXON_OK) ? status : axon_tag_rndv_data_sent(req);
}

/* The tag protocol's part of a new endpoint: what fits one eager message, and rendezvous. */
void axon_tag_ep_init(axon_ep_h ep)
{
    size_t bcopy_thresh = ep->worker->context->opts.bcopy_thresh;

    ep->eager_short_max = ep->am_lane.max_short - sizeof(axon_eager_hdr_t);
    if ((bcopy_thresh > 0) && (ep->eager_short_max >= bcopy_thresh)) {
        ep->eager_short_max = bcopy_thresh - 1;
    }
    ep->eager_bcopy_max = ep->am_lane.max_bcopy - sizeof(axon_eager_hdr_t);
    axon_rndv_ep_init(ep);
}

void axon_send_remote_done(axon_request_h req, axon_status_t status)
{
    axon_ep_h ep = req->send.ep;

    axon_request_id_del(req);
    --ep->outstanding;
    axon_request_complete(req, status);
    axon_ep_check_close(ep);
}

/*
 * The receiver matches a message on its first fragment, so the ack of a
 * synchronous send of several fragments can come while the rest still waits
 * on the endpoint's queue, reading the caller's buffer: completing it then
 * would hand the buffer back (and the request to the pool) too early. It
 * completes when its last fragment leaves (axon_tag_step_multi).
 */
void axon_tag_sync_acked(axon_request_h req)
{
    if ((req->step == axon_tag_step_multi) && (req->send.offset < req->send.length)) {
        req->flags |= AXON_REQUEST_SYNC_ACKED;
        return;
    }
    axon_send_remote_done(req, AXON_OK);
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
    axon_tag_send_copy(req, copy, 0, req->send.length);
    req->send.buffer = copy;
    req->flags      |= AXON_REQUEST_OWN_BUFFER;
    req->flags      &= ~AXON_REQUEST_LAYOUT;  /* the copy is packed */
    return AXON_OK;
}

static axon_status_t axon_tag_send_common(axon_ep_h ep, const void *buffer, size_t length,
                                          axon_tag_t tag, const axon_request_param_t *param,
                                          axon_request_h *req_p, int sync, unsigned space)
{
    uint32_t flags = (param != NULL) ? param->flags : 0;
    uint32_t space_flags = (uint32_t)space << AXON_TAG_SPACE_SHIFT;
    axon_eager_hdr_t eager;
    axon_request_h req;
    axon_status_t status;

    if ((ep == NULL) || (req_p == NULL) ||
        ((buffer == NULL) && (length > 0) && !(flags & AXON_REQ_FLAG_LAYOUT))) {
        axon_error("axon_tag_send_nb: NULL %s (length %zu)",
                   !ep ? "endpoint" : !req_p ? "req_p" : "buffer", length);
        return AXON_ERR_INVALID_PARAM;
    }
    if ((flags & AXON_REQ_FLAG_LAYOUT) &&
        (axon_layout_param_check(param, length, 0, "axon_tag_send_nb") != AXON_OK)) {
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
        !(flags & (AXON_REQ_FLAG_NO_IMM_CMPL | AXON_REQ_FLAG_LAYOUT))) {
        eager.m.tag         = tag;
        eager.m.sender_uuid = ep->worker->uuid;
        eager.m.imm_data    = (flags & AXON_REQ_FLAG_IMM_DATA) ? param->imm_data : 0;
        eager.m.flags       = ((flags & AXON_REQ_FLAG_IMM_DATA) ? AXON_TAG_INFO_IMM_DATA : 0) |
                              space_flags;
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
    req->send.info_flags = ((flags & AXON_REQ_FLAG_IMM_DATA) ? AXON_TAG_INFO_IMM_DATA : 0) |
                           space_flags;
    req->send.offset     = 0;
    if (flags & AXON_REQ_FLAG_LAYOUT) {
        /* Gathered by the pack callbacks: never the short path, which takes one pointer. */
        axon_layout_cursor_init(&req->send.cursor, param->layout, buffer);
        req->flags |= AXON_REQUEST_LAYOUT;
    }
    /* A rendezvous names (and registers) its buffer for the peer: copy first. */
    if ((flags & AXON_REQ_FLAG_INJECT) && (length >= ep->rndv_thresh) &&
        (axon_tag_send_own_copy(req) != AXON_OK)) {
        axon_request_put(req);
        return AXON_ERR_NO_MEMORY;
    }

    if (length >= ep->rndv_thresh) {
        /* Matched at the receiver before any data moves: sync for free. */
        req->step = axon_tag_step_rndv_rts;
        req->send.rndv_parts   = 1;  /* the ATS, or the data once an RTR asks for it */
        req->send.rndv_status  = AXON_OK;
        axon_rndv_send_register(req);
    } else if (sync) {
        req->flags |= AXON_REQUEST_SYNC;
        if (length + sizeof(axon_eager_sync_hdr_t) - sizeof(axon_eager_hdr_t) <=
            ep->eager_bcopy_max) {
            req->step = axon_tag_step_sync;
        } else {
            req->step        = axon_tag_step_multi;
            req->send.msg_id = ep->worker->next_msg_id++;
        }
    } else if ((length <= ep->eager_short_max) && !(req->flags & AXON_REQUEST_LAYOUT)) {
        req->step = axon_tag_step_short;
    } else if (length <= ep->eager_bcopy_max) {
        req->step = axon_tag_step_bcopy;
    } else {
        req->step        = axon_tag_step_multi;
        req->send.msg_id = ep->worker->next_msg_id++;
    }
    if ((length >= ep->rndv_thresh) || sync) {
        axon_request_id_add(req, ep->peer_uuid);
        ++ep->outstanding;
    }

    if (axon_list_is_empty(&ep->pending)) {
        status = req->step(req);
        if (status == AXON_INPROGRESS) {
            *req_p = req;
            return AXON_INPROGRESS;
        }
        if (status != AXON_ERR_NO_RESOURCE) {
            axon_request_send_untrack(req);
            return axon_request_finish_now(req, status, flags, req_p);
        }
    }

    /* Not all of it left: the rest is read from a copy (same offsets). */
    if ((flags & AXON_REQ_FLAG_INJECT) && (axon_tag_send_own_copy(req) != AXON_OK)) {
        axon_request_send_untrack(req);
        axon_request_put(req);
        return AXON_ERR_NO_MEMORY;
    }
    axon_ep_pending_push(ep, req);
    *req_p = req;
    return AXON_INPROGRESS;
}

axon_status_t axon_tag_send_nb(axon_ep_h ep, const void *buffer, size_t length, axon_tag_t tag,
                               const axon_request_param_t *param, axon_request_h *req_p)
{
    return axon_tag_send_common(ep, buffer, length, tag, param, req_p, 0, AXON_TAG_SPACE_APP);
}

axon_status_t axon_tag_space_send_nb(axon_ep_h ep, unsigned space, const void *buffer,
                                     size_t length, axon_tag_t tag,
                                     const axon_request_param_t *param, axon_request_h *req_p)
{
    return axon_tag_send_common(ep, buffer, length, tag, param, req_p, 0, space);
}

axon_status_t axon_tag_send_sync_nb(axon_ep_h ep, const void *buffer, size_t length,
                                    axon_tag_t tag, const axon_request_param_t *param,
                                    axon_request_h *req_p)
{
    return axon_tag_send_common(ep, buffer, length, tag, param, req_p, 1, AXON_TAG_SPACE_APP);
}
