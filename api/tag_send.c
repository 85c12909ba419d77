/* Tag send: eager short, eager bcopy, and multi-fragment eager. */
#include <string.h>
#include "log.h"
#include "request.h"
#include "tag_proto.h"

static size_t axon_tag_pack_only(void *dest, void *arg)
{
    axon_request_h req = arg;
    axon_eager_hdr_t *hdr = dest;

    hdr->tag = req->send.tag;
    if (req->send.length > 0) {  /* buffer may be NULL for an empty message */
        memcpy(hdr + 1, req->send.buffer, req->send.length);
    }
    return sizeof(*hdr) + req->send.length;
}

static size_t axon_tag_pack_first(void *dest, void *arg)
{
    axon_request_h req = arg;
    axon_eager_first_hdr_t *hdr = dest;
    size_t len = req->send.ep->am_lane.max_bcopy - sizeof(*hdr);

    hdr->tag          = req->send.tag;
    hdr->total_length = req->send.length;
    hdr->msg_id       = req->send.msg_id;
    hdr->sender_uuid  = req->worker->uuid;
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

axon_status_t axon_tag_send_progress(axon_request_h req)
{
    axon_lane_t *lane = &req->send.ep->am_lane;
    axon_status_t status;
    ssize_t packed;

    switch (req->send.proto) {
    case AXON_SEND_PROTO_SHORT:
        status = lane->ops->ep_am_short(lane->tl_ep, AXON_AM_TAG_EAGER_ONLY, &req->send.tag,
                                        sizeof(req->send.tag), req->send.buffer,
                                        req->send.length);
        return (status == AXON_ERR_NO_RESOURCE) ? AXON_INPROGRESS : status;
    case AXON_SEND_PROTO_BCOPY:
        packed = lane->ops->ep_am_bcopy(lane->tl_ep, AXON_AM_TAG_EAGER_ONLY,
                                        axon_tag_pack_only, req);
        if (packed < 0) {
            return (packed == AXON_ERR_NO_RESOURCE) ? AXON_INPROGRESS : (axon_status_t)packed;
        }
        return AXON_OK;
    case AXON_SEND_PROTO_MULTI:
        if (req->send.offset == 0) {
            packed = lane->ops->ep_am_bcopy(lane->tl_ep, AXON_AM_TAG_EAGER_FIRST,
                                            axon_tag_pack_first, req);
            if (packed < 0) {
                return (packed == AXON_ERR_NO_RESOURCE) ? AXON_INPROGRESS :
                                                          (axon_status_t)packed;
            }
            req->send.offset = (size_t)packed - sizeof(axon_eager_first_hdr_t);
        }
        while (req->send.offset < req->send.length) {
            packed = lane->ops->ep_am_bcopy(lane->tl_ep, AXON_AM_TAG_EAGER_MIDDLE,
                                            axon_tag_pack_middle, req);
            if (packed < 0) {
                return (packed == AXON_ERR_NO_RESOURCE) ? AXON_INPROGRESS :
                                                          (axon_status_t)packed;
            }
            req->send.offset += (size_t)packed - sizeof(axon_eager_middle_hdr_t);
        }
        return AXON_OK;
    case AXON_SEND_PROTO_CLOSE:
        break;
    }
    axon_error("request %p has no send protocol %d", (void *)req, (int)req->send.proto);
    return AXON_ERR_INVALID_PARAM;
}

axon_status_t axon_tag_send_nb(axon_ep_h ep, const void *buffer, size_t length, axon_tag_t tag,
                               const axon_request_param_t *param, axon_request_h *req_p)
{
    uint32_t flags = (param != NULL) ? param->flags : 0;
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

    /* Fast path: one short AM, no request. Queued sends go first to keep order. */
    if ((length <= ep->eager_short_max) && axon_list_is_empty(&ep->pending) &&
        !(flags & AXON_REQ_FLAG_NO_IMM_CMPL)) {
        status = ep->am_lane.ops->ep_am_short(ep->am_lane.tl_ep, AXON_AM_TAG_EAGER_ONLY, &tag,
                                              sizeof(tag), buffer, length);
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
    req->send.tag    = tag;
    req->send.offset = 0;
    if (length <= ep->eager_short_max) {
        req->send.proto = AXON_SEND_PROTO_SHORT;
    } else if (length <= ep->eager_bcopy_max) {
        req->send.proto = AXON_SEND_PROTO_BCOPY;
    } else {
        req->send.proto  = AXON_SEND_PROTO_MULTI;
        req->send.msg_id = ep->worker->next_msg_id++;
    }

    if (axon_list_is_empty(&ep->pending)) {
        status = axon_tag_send_progress(req);
        if (status != AXON_INPROGRESS) {
            if ((status == AXON_OK) && !(flags & AXON_REQ_FLAG_NO_IMM_CMPL)) {
                axon_request_put(req);
                return AXON_OK;
            }
            if (status < 0) {
                axon_request_put(req);
                return status;
            }
            axon_request_complete(req, status);
            *req_p = req;
            return AXON_INPROGRESS;
        }
    }

    axon_list_add_tail(&ep->pending, &req->list);
    axon_worker_ep_pending_add(ep->worker, ep);
    *req_p = req;
    return AXON_INPROGRESS;
}
