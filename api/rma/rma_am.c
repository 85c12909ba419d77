/*
 * One-sided operations as active messages (the protocol is in rma_proto.h):
 * the initiator's sends, the target's handlers that check the key and touch
 * memory, and the initiator's handlers for the replies.
 */
#include <string.h>
#include "log.h"
#include "rma_proto.h"

/* ---------------------------------------------------------------- initiator: sends */

static void axon_rma_put_hdr_init(axon_request_h req, axon_rma_put_hdr_t *hdr, size_t len)
{
    hdr->token       = req->rma.token;
    hdr->addr        = req->rma.remote_addr + req->rma.offset;
    hdr->length      = len;
    hdr->req_id      = req->id;
    hdr->sender_uuid = req->worker->uuid;
}

static size_t axon_rma_pack_put(void *dest, void *arg)
{
    axon_request_h req = arg;
    axon_rma_put_hdr_t *hdr = dest;
    size_t len = req->rma.ep->am_lane.max_bcopy - sizeof(*hdr);

    if (len > req->rma.length - req->rma.offset) {
        len = req->rma.length - req->rma.offset;
    }
    axon_rma_put_hdr_init(req, hdr, len);
    if (req->flags & AXON_REQUEST_LAYOUT) {
        axon_layout_gather(&req->rma.data.cursor, req->rma.offset, hdr + 1, len);
    } else {
        memcpy(hdr + 1, req->rma.data.buffer + req->rma.offset, len);
    }
    return sizeof(*hdr) + len;
}

/* Large contiguous data goes from the caller's buffer in one zero-copy message when it may. */
static inline int axon_rma_am_zcopy_ok(const axon_lane_t *lane, size_t hdr_len, size_t length)
{
    return (length > lane->max_bcopy - hdr_len) &&
           (lane->resource->cap_flags & AXON_CAP_AM_ZCOPY) && (lane->ops->ep_am_zcopy != NULL) &&
           (hdr_len <= lane->max_short) &&
           ((lane->resource->max_zcopy == 0) || (length <= lane->resource->max_zcopy));
}

/*
 * What sending len more bytes of req gave: the bytes are out, or the
 * operation stops at what is out (op_fail). True when the transport is full
 * and the caller must retry later.
 */
static inline int axon_rma_am_sent(axon_request_h req, axon_status_t status, size_t len)
{
    if (status == AXON_OK) {
        req->rma.offset += len;
    } else if (status != AXON_ERR_NO_RESOURCE) {
        axon_rma_op_fail(req, status);
    }
    return status == AXON_ERR_NO_RESOURCE;
}

static axon_status_t axon_rma_am_push_put(axon_request_h req)
{
    axon_lane_t *lane = &req->rma.ep->am_lane;
    axon_rma_put_hdr_t hdr;
    axon_status_t status;
    ssize_t packed;
    size_t left;

    while (req->rma.offset < req->rma.length) {
        left = req->rma.length - req->rma.offset;
        if (!(req->flags & AXON_REQUEST_LAYOUT) && (sizeof(hdr) + left <= lane->max_short)) {
            axon_rma_put_hdr_init(req, &hdr, left);
            status = lane->ops->ep_am_short(lane->tl_ep, AXON_AM_RMA_PUT, &hdr, sizeof(hdr),
                                            req->rma.data.buffer + req->rma.offset, left);
        } else if (!(req->flags & AXON_REQUEST_LAYOUT) && axon_rma_am_zcopy_ok(lane, sizeof(hdr), left)) {
            axon_rma_put_hdr_init(req, &hdr, left);
            req->tl_comp.func = axon_rma_zcopy_done;
            status = lane->ops->ep_am_zcopy(lane->tl_ep, AXON_AM_RMA_PUT, &hdr, sizeof(hdr),
                                            req->rma.data.buffer + req->rma.offset, left,
                                            &req->tl_comp);
            if (status == AXON_INPROGRESS) {
                axon_rma_zcopy_posted(req, left, 1);
                return AXON_INPROGRESS;
            }
        } else {
            packed = lane->ops->ep_am_bcopy(lane->tl_ep, AXON_AM_RMA_PUT, axon_rma_pack_put, req);
            status = (packed < 0) ? (axon_status_t)packed : AXON_OK;
            left   = (packed < 0) ? 0 : (size_t)packed - sizeof(hdr);
        }
        if (axon_rma_am_sent(req, status, left)) {
            return AXON_ERR_NO_RESOURCE;
        }
    }
    return axon_rma_op_state(req);
}

typedef struct {
    const void *hdr;
    size_t      length;
} axon_rma_am_hdr_pack_t;

static size_t axon_rma_pack_hdr(void *dest, void *arg)
{
    const axon_rma_am_hdr_pack_t *p = arg;

    memcpy(dest, p->hdr, p->length);
    return p->length;
}

/* A message that is a header alone (GET_REQ, AMO) carries the whole rest of req. */
static axon_status_t axon_rma_am_push_hdr(axon_request_h req, uint8_t am_id, const void *hdr,
                                          size_t hdr_len)
{
    axon_lane_t *lane = &req->rma.ep->am_lane;
    axon_rma_am_hdr_pack_t p = {hdr, hdr_len};
    axon_status_t status;
    ssize_t packed;

    if (hdr_len <= lane->max_short) {
        status = lane->ops->ep_am_short(lane->tl_ep, am_id, hdr, hdr_len, NULL, 0);
    } else {
        packed = lane->ops->ep_am_bcopy(lane->tl_ep, am_id, axon_rma_pack_hdr, &p);
        status = (packed < 0) ? (axon_status_t)packed : AXON_OK;
    }
    if (axon_rma_am_sent(req, status, req->rma.length - req->rma.offset)) {
        return AXON_ERR_NO_RESOURCE;
    }
    return axon_rma_op_state(req);
}

static axon_status_t axon_rma_am_push_get(axon_request_h req)
{
    axon_rma_get_req_hdr_t hdr;

    hdr.token       = req->rma.token;
    hdr.addr        = req->rma.remote_addr + req->rma.offset;
    hdr.length      = req->rma.length - req->rma.offset;
    hdr.req_id      = req->id;
    hdr.sender_uuid = req->worker->uuid;
    hdr.offset      = req->rma.offset;
    return axon_rma_am_push_hdr(req, AXON_AM_RMA_GET_REQ, &hdr, sizeof(hdr));
}

static axon_status_t axon_rma_am_push_amo(axon_request_h req)
{
    axon_rma_amo_hdr_t hdr;

    hdr.args        = req->rma.amo.args;
    hdr.token       = req->rma.token;
    hdr.addr        = req->rma.remote_addr;
    hdr.req_id      = req->id;
    hdr.sender_uuid = req->worker->uuid;
    return axon_rma_am_push_hdr(req, AXON_AM_RMA_AMO, &hdr, sizeof(hdr));
}

axon_status_t axon_rma_am_push(axon_request_h req)
{
    if (!(req->flags & AXON_REQUEST_IN_ID_MAP)) {
        axon_request_id_add(req, req->rma.ep->peer_uuid);  /* replies name it */
    }
    if (req->rma.offset >= req->rma.length) {
        return axon_rma_op_state(req);  /* all sent: waiting for the replies */
    }
    switch (req->rma.kind) {
    case AXON_RMA_KIND_PUT:
        return axon_rma_am_push_put(req);
    case AXON_RMA_KIND_GET:
        return axon_rma_am_push_get(req);
    case AXON_RMA_KIND_AMO:
        return axon_rma_am_push_amo(req);
    default:
        axon_error("request %p: no active message for RMA kind %u", (void *)req, req->rma.kind);
        axon_rma_op_fail(req, AXON_ERR_INVALID_PARAM);
        return axon_rma_op_state(req);
    }
}

/* ---------------------------------------------------------------- target: replies */

static void axon_rma_reply(axon_worker_h worker, uint64_t uuid, uint8_t am_id, const void *hdr,
                           size_t hdr_len)
{
    axon_ep_h ep = axon_peer_reply_ep(worker, uuid);  /* a requester that is gone waits for nothing */
    axon_status_t status;

    if (ep == NULL) {
        return;
    }
    status = axon_ep_send_ctrl(ep, am_id, hdr, hdr_len);
    if ((status != AXON_OK) && (ep->status == AXON_OK)) {
        axon_warn("could not answer RMA message to peer %016llx: %s", (unsigned long long)uuid,
                  axon_status_string(status));
    }
}

static void axon_rma_get_reply_error(axon_worker_h worker, axon_ep_h ep, uint64_t uuid,
                                     uint64_t rreq_id, uint64_t offset, uint64_t length,
                                     axon_status_t status)
{
    axon_rma_get_reply_hdr_t reply = {rreq_id, worker->uuid, offset, length, status};

    if (ep != NULL) {
        (void)axon_ep_send_ctrl(ep, AXON_AM_RMA_GET_REPLY, &reply, sizeof(reply));
    } else {
        axon_rma_reply(worker, uuid, AXON_AM_RMA_GET_REPLY, &reply, sizeof(reply));
    }
}

typedef struct {
    axon_rma_get_reply_hdr_t hdr;
    const uint8_t           *data;      /* one run; or NULL: gather from the mapping */
    axon_context_h           context;
    uint64_t                 token;
    uint64_t                 addr;
} axon_rma_get_reply_pack_t;

static size_t axon_rma_pack_get_reply(void *dest, void *arg)
{
    axon_rma_get_reply_pack_t *p = arg;
    uint8_t *out = (uint8_t *)dest + sizeof(p->hdr);

    if (p->data != NULL) {
        memcpy(out, p->data, p->hdr.length);
    } else {
        /* a layout's runs, as many as fit; unmapped meanwhile: the reply says so */
        p->hdr.status = axon_mem_gather(p->context, p->token, p->addr, out, p->hdr.length);
    }
    memcpy(dest, &p->hdr, sizeof(p->hdr));
    return sizeof(p->hdr) + p->hdr.length;
}

static void axon_rma_get_reply_zcopy_done(axon_tl_completion_t *comp, axon_status_t status)
{
    axon_request_h req = axon_container_of(comp, struct axon_request, tl_comp);

    req->flags &= ~AXON_REQUEST_TL_BUSY;
    if (status != AXON_OK) {
        axon_debug("get reply of %zu bytes to %016llx failed: %s", req->rma.length,
                   (unsigned long long)req->peer_uuid, axon_status_string(status));
    }
    axon_request_put(req);  /* never touches the endpoint: it may be gone */
}

/*
 * Send a GET_REQ's data back, from where it left off. The range is looked
 * up again for every piece: the mapping may have gone meanwhile. rma.done
 * holds the initiator's offset of the first byte.
 */
axon_status_t axon_rma_get_reply_push(axon_request_h req)
{
    axon_ep_h ep = req->rma.ep;
    axon_worker_h worker = req->worker;
    axon_lane_t *lane = &ep->am_lane;
    axon_rma_get_reply_pack_t p;
    axon_status_t status;
    ssize_t packed;
    uint8_t *data;
    size_t left;

    while (req->rma.offset < req->rma.length) {
        if (ep->status != AXON_OK) {
            return AXON_OK;  /* nobody to answer */
        }
        left = req->rma.length - req->rma.offset;
        data = axon_mem_lookup(worker->context, req->rma.token,
                               req->rma.remote_addr + req->rma.offset, left, &left, NULL, NULL,
                               &status);
        if (data == NULL) {
            left = req->rma.length - req->rma.offset;
            axon_rma_get_reply_error(worker, ep, req->peer_uuid, req->rma.rreq_id,
                                     req->rma.done + req->rma.offset, left, status);
            return AXON_OK;
        }
        p.hdr.req_id    = req->rma.rreq_id;
        p.hdr.from_uuid = worker->uuid;
        p.hdr.offset    = req->rma.done + req->rma.offset;
        p.hdr.status    = AXON_OK;
        /* zcopy sends the rest at once; a layout's run short of it goes by bcopy */
        if ((left == req->rma.length - req->rma.offset) &&
            axon_rma_am_zcopy_ok(lane, sizeof(p.hdr), left)) {
            p.hdr.length      = left;
            req->tl_comp.func = axon_rma_get_reply_zcopy_done;
            status = lane->ops->ep_am_zcopy(lane->tl_ep, AXON_AM_RMA_GET_REPLY, &p.hdr,
                                            sizeof(p.hdr), data, left, &req->tl_comp);
            if (status == AXON_INPROGRESS) {
                req->flags      |= AXON_REQUEST_TL_BUSY;
                req->rma.offset  = req->rma.length;
                return AXON_INPROGRESS;
            }
            packed = (status == AXON_OK) ? (ssize_t)(sizeof(p.hdr) + left) : status;
        } else {
            p.hdr.length = lane->max_bcopy - sizeof(p.hdr);
            p.data       = data;
            if (left < req->rma.length - req->rma.offset) {
                /* a layout's run: gather runs up to a full message */
                left         = req->rma.length - req->rma.offset;
                p.data       = NULL;
                p.context    = worker->context;
                p.token      = req->rma.token;
                p.addr       = req->rma.remote_addr + req->rma.offset;
            }
            if (p.hdr.length > left) {
                p.hdr.length = left;
            }
            packed = lane->ops->ep_am_bcopy(lane->tl_ep, AXON_AM_RMA_GET_REPLY,
                                            axon_rma_pack_get_reply, &p);
        }
        if (packed == AXON_ERR_NO_RESOURCE) {
            return AXON_ERR_NO_RESOURCE;
        }
        if (packed < 0) {
            axon_debug("get reply to %016llx: %s", (unsigned long long)req->peer_uuid,
                       axon_status_string((axon_status_t)packed));
            return AXON_OK;  /* the transport failed: its peer failure follows */
        }
        req->rma.offset += (size_t)packed - sizeof(p.hdr);
    }
    return AXON_OK;
}

/* ---------------------------------------------------------------- target: handlers */

/* A PUT's data into the mapping, run by run (one run unless it is a layout's). */
static axon_status_t axon_rma_am_put_write(axon_worker_h worker, const axon_rma_put_hdr_t *hdr)
{
    const uint8_t *src = (const uint8_t *)(hdr + 1);
    size_t done = 0, run;
    axon_status_t status = AXON_OK;
    uint8_t *dest;

    do {
        dest = axon_mem_lookup(worker->context, hdr->token, hdr->addr + done, hdr->length - done,
                               &run, NULL, NULL, &status);
        if (dest == NULL) {
            return status;
        }
        memcpy(dest, src + done, run);
        done += run;
    } while (done < hdr->length);
    return AXON_OK;
}

static void axon_rma_am_put(void *arg, const void *data, size_t length, unsigned flags)
{
    axon_worker_h worker = arg;
    const axon_rma_put_hdr_t *hdr = data;
    axon_rma_put_ack_hdr_t ack;
    axon_status_t status = AXON_OK;

    if (length < sizeof(*hdr)) {
        axon_error("dropping an RMA PUT of %zu bytes: shorter than its header", length);
        return;
    }
    if (flags & AXON_AM_FLAG_PLACED) {
        if (length != sizeof(*hdr)) {
            axon_error("placed RMA PUT from %016llx with %zu header bytes",
                       (unsigned long long)hdr->sender_uuid, length);
            status = AXON_ERR_IO_FORMAT;
        }
        /* else am_rx_dest checked the range and the data is in place */
    } else if (length - sizeof(*hdr) != hdr->length) {
        axon_error("RMA PUT from %016llx announces %llu bytes, carries %zu",
                   (unsigned long long)hdr->sender_uuid, (unsigned long long)hdr->length,
                   length - sizeof(*hdr));
        status = AXON_ERR_IO_FORMAT;
    } else {
        status = axon_rma_am_put_write(worker, hdr);
    }
    ack.req_id    = hdr->req_id;
    ack.from_uuid = worker->uuid;
    ack.length    = hdr->length;
    ack.status    = status;
    axon_rma_reply(worker, hdr->sender_uuid, AXON_AM_RMA_PUT_ACK, &ack, sizeof(ack));
}

static void axon_rma_am_get_req(void *arg, const void *data, size_t length, unsigned flags)
{
    axon_worker_h worker = arg;
    const axon_rma_get_req_hdr_t *hdr = data;
    axon_status_t status;
    axon_request_h req;
    axon_ep_h ep;
    size_t run;

    if (length != sizeof(*hdr)) {
        axon_error("dropping an RMA GET_REQ of %zu bytes (expected %zu)", length, sizeof(*hdr));
        return;
    }
    ep = axon_peer_reply_ep(worker, hdr->sender_uuid);
    if (ep == NULL) {
        return;
    }
    if (axon_mem_lookup(worker->context, hdr->token, hdr->addr, hdr->length, &run, NULL, NULL,
                        &status) == NULL) {
        axon_rma_get_reply_error(worker, ep, hdr->sender_uuid, hdr->req_id, hdr->offset,
                                 hdr->length, status);
        return;
    }
    req = axon_request_get(worker, NULL, AXON_REQUEST_INTERNAL);
    if (req == NULL) {
        axon_rma_get_reply_error(worker, ep, hdr->sender_uuid, hdr->req_id, hdr->offset,
                                 hdr->length, AXON_ERR_NO_MEMORY);
        return;
    }
    req->step            = axon_rma_get_reply_push;
    req->peer_uuid       = hdr->sender_uuid;
    req->rma.ep          = ep;
    req->rma.kind        = AXON_RMA_KIND_GET_REPLY;
    req->rma.token       = hdr->token;
    req->rma.remote_addr = hdr->addr;
    req->rma.length      = hdr->length;
    req->rma.offset      = 0;
    req->rma.done        = hdr->offset;
    req->rma.rreq_id     = hdr->req_id;
    if (axon_list_is_empty(&ep->pending)) {
        status = axon_rma_get_reply_push(req);
        if (status == AXON_INPROGRESS) {
            return;
        }
        if (status != AXON_ERR_NO_RESOURCE) {
            axon_request_put(req);
            return;
        }
    }
    axon_ep_pending_push(ep, req);
}

static void axon_rma_am_amo(void *arg, const void *data, size_t length, unsigned flags)
{
    axon_worker_h worker = arg;
    const axon_rma_amo_hdr_t *hdr = data;
    axon_rma_amo_reply_hdr_t reply;
    axon_amo_lock_table_t *locks;
    uint64_t region_offset;
    axon_status_t status;
    uint8_t *target;
    unsigned size;

    if (length != sizeof(*hdr)) {
        axon_error("dropping an RMA AMO of %zu bytes (expected %zu)", length, sizeof(*hdr));
        return;
    }
    memset(&reply, 0, sizeof(reply));
    size   = hdr->args.size;
    status = axon_amo_args_check(&hdr->args);
    if (status != AXON_OK) {
        size = 8;
    } else if (hdr->addr & (size - 1)) {
        axon_error("RMA AMO from %016llx at 0x%llx: not aligned to its %u bytes",
                   (unsigned long long)hdr->sender_uuid, (unsigned long long)hdr->addr, size);
        status = AXON_ERR_INVALID_PARAM;
    } else {
        target = axon_mem_lookup(worker->context, hdr->token, hdr->addr, size, NULL, &locks,
                                 &region_offset, &status);
        if ((target != NULL) && ((uintptr_t)target & (size - 1))) {
            /* a layout key's piece may put an aligned offset at an unaligned address */
            axon_error("RMA AMO from %016llx at 0x%llx: its location %p is not aligned to its "
                       "%u bytes", (unsigned long long)hdr->sender_uuid,
                       (unsigned long long)hdr->addr, (void *)target, size);
            status = AXON_ERR_INVALID_PARAM;
        } else if (target != NULL) {
            axon_amo_cpu_exec(locks, region_offset, target, &hdr->args, reply.result);
        }
    }
    reply.req_id    = hdr->req_id;
    reply.from_uuid = worker->uuid;
    reply.status    = status;
    axon_rma_reply(worker, hdr->sender_uuid, AXON_AM_RMA_AMO_REPLY, &reply,
                   axon_rma_amo_reply_len(size));
}

void *axon_rma_rx_dest(void *arg, uint8_t am_id, const void *hdr_p, size_t hdr_len,
                       size_t data_length)
{
    axon_worker_h worker = arg;
    axon_rma_get_reply_hdr_t reply;
    axon_rma_put_hdr_t put;
    axon_status_t status;
    axon_request_h req;

    if (am_id == AXON_AM_RMA_PUT) {
        if (hdr_len != sizeof(put)) {
            return NULL;
        }
        memcpy(&put, hdr_p, sizeof(put));
        if (put.length != data_length) {
            return NULL;  /* the handler reports it */
        }
        /* NULL when the range is not one run (a layout's): the handler places it */
        return axon_mem_lookup(worker->context, put.token, put.addr, data_length, NULL, NULL,
                               NULL, &status);
    }
    if (hdr_len != sizeof(reply)) {
        return NULL;
    }
    memcpy(&reply, hdr_p, sizeof(reply));
    req = axon_request_id_find(worker, reply.req_id, reply.from_uuid);
    if ((req == NULL) || (req->step != axon_rma_step) || (req->rma.kind != AXON_RMA_KIND_GET) || (req->flags & AXON_REQUEST_LAYOUT) ||
        (reply.status != AXON_OK) || (reply.length != data_length) ||
        (reply.offset > req->rma.length) || (data_length > req->rma.length - reply.offset)) {
        return NULL;
    }
    return req->rma.data.buffer + reply.offset;
}

/* ---------------------------------------------------------------- initiator: replies */

static void axon_rma_am_put_ack(void *arg, const void *data, size_t length, unsigned flags)
{
    const axon_rma_put_ack_hdr_t *ack = data;
    axon_request_h req;

    if (length != sizeof(*ack)) {
        axon_error("dropping an RMA PUT_ACK of %zu bytes (expected %zu)", length, sizeof(*ack));
        return;
    }
    req = axon_rma_op_find(arg, ack->req_id, ack->from_uuid, AXON_RMA_KIND_PUT, "PUT_ACK");
    if (req == NULL) {
        return;
    }
    if (ack->length > req->rma.offset - req->rma.done) {
        axon_error("PUT_ACK from %016llx acks %llu bytes of put %llu, %zu are unacked",
                   (unsigned long long)ack->from_uuid, (unsigned long long)ack->length,
                   (unsigned long long)ack->req_id, req->rma.offset - req->rma.done);
        return;
    }
    axon_rma_op_progress(req, ack->length, (axon_status_t)ack->status);
}

static void axon_rma_am_get_reply(void *arg, const void *data, size_t length, unsigned flags)
{
    const axon_rma_get_reply_hdr_t *hdr = data;
    axon_status_t status;
    axon_request_h req;

    if (length < sizeof(*hdr)) {
        axon_error("dropping an RMA GET_REPLY of %zu bytes: shorter than its header", length);
        return;
    }
    req = axon_rma_op_find(arg, hdr->req_id, hdr->from_uuid, AXON_RMA_KIND_GET, "GET_REPLY");
    if (req == NULL) {
        return;
    }
    status = (axon_status_t)hdr->status;
    if ((hdr->offset > req->rma.length) || (hdr->length > req->rma.length - hdr->offset) ||
        (hdr->length > req->rma.length - req->rma.done) ||
        ((status == AXON_OK) && !(flags & AXON_AM_FLAG_PLACED) &&
         (length - sizeof(*hdr) != hdr->length))) {
        axon_error("GET_REPLY from %016llx for get %llu: bytes [%llu, +%llu) with %zu of "
                   "payload do not fit its %zu bytes (%zu arrived)",
                   (unsigned long long)hdr->from_uuid, (unsigned long long)hdr->req_id,
                   (unsigned long long)hdr->offset, (unsigned long long)hdr->length,
                   length - sizeof(*hdr), req->rma.length, req->rma.done);
        axon_rma_op_progress(req, req->rma.length - req->rma.done, AXON_ERR_IO_FORMAT);
        return;
    }
    if ((status == AXON_OK) && !(flags & AXON_AM_FLAG_PLACED)) {
        if (req->flags & AXON_REQUEST_LAYOUT) {
            axon_layout_scatter(&req->rma.data.cursor, hdr->offset, hdr + 1, hdr->length);
        } else {
            memcpy(req->rma.data.buffer + hdr->offset, hdr + 1, hdr->length);
        }
    }
    axon_rma_op_progress(req, hdr->length, status);
}

static void axon_rma_am_amo_reply(void *arg, const void *data, size_t length, unsigned flags)
{
    const axon_rma_amo_reply_hdr_t *reply = data;
    axon_status_t status;
    axon_request_h req;

    if ((length < axon_rma_amo_reply_len(4)) || (length > sizeof(*reply))) {
        axon_error("dropping an RMA AMO_REPLY of %zu bytes", length);
        return;
    }
    req = axon_rma_op_find(arg, reply->req_id, reply->from_uuid, AXON_RMA_KIND_AMO,
                           "AMO_REPLY");
    if (req == NULL) {
        return;
    }
    if (req->rma.done >= req->rma.offset) {
        axon_error("AMO_REPLY from %016llx for atomic %llu that was not sent or is answered",
                   (unsigned long long)reply->from_uuid, (unsigned long long)reply->req_id);
        return;
    }
    status = (axon_status_t)reply->status;
    if ((status == AXON_OK) && (length != axon_rma_amo_reply_len(req->rma.amo.args.size))) {
        axon_error("AMO_REPLY from %016llx of %zu bytes for a %u-byte atomic",
                   (unsigned long long)reply->from_uuid, length, req->rma.amo.args.size);
        status = AXON_ERR_IO_FORMAT;
    }
    if ((status == AXON_OK) && (req->rma.amo.result != NULL)) {
        axon_amo_result_store(req->rma.amo.result, req->rma.amo.args.size, reply->result);
    }
    axon_rma_op_progress(req, 1, status);
}

axon_status_t axon_rma_worker_init(axon_worker_h worker)
{
    worker->am_handlers[AXON_AM_RMA_PUT]       = axon_rma_am_put;
    worker->am_handlers[AXON_AM_RMA_PUT_ACK]   = axon_rma_am_put_ack;
    worker->am_handlers[AXON_AM_RMA_GET_REQ]   = axon_rma_am_get_req;
    worker->am_handlers[AXON_AM_RMA_GET_REPLY] = axon_rma_am_get_reply;
    worker->am_handlers[AXON_AM_RMA_AMO]       = axon_rma_am_amo;
    worker->am_handlers[AXON_AM_RMA_AMO_REPLY] = axon_rma_am_amo_reply;
    worker->am_rx_dest[AXON_AM_RMA_PUT]        = axon_rma_rx_dest;
    worker->am_rx_dest[AXON_AM_RMA_GET_REPLY]  = axon_rma_rx_dest;
    return AXON_OK;
}
