/*
 * Tag receive: AM handlers, expected/unexpected paths, fragment reassembly,
 * probe, matched receive, cancel, and acks for synchronous sends.
 */
#include <stdlib.h>
#include <string.h>
#include "log.h"
#include "request.h"
#include "tag_proto.h"
#include "tag_space.h"

/* Small unexpected messages live in pool buffers of this payload size. */
#define AXON_UNEXP_SMALL_SIZE 256

typedef enum {
    AXON_UNEXP_EAGER,  /* data (possibly still arriving) in the descriptor */
    AXON_UNEXP_RNDV,   /* only the RTS: the data stays at the sender */
} axon_unexp_kind_t;

/* An unexpected message: small ones in pool buffers, large ones malloc'd whole. */
typedef struct axon_unexp_desc {
    axon_tm_unexp_t      tm;
    size_t               length;       /* the message's full length */
    size_t               received;     /* bytes arrived so far */
    struct axon_rx_frag *frag;         /* reassembly entry while fragments are missing */
    uint64_t             sync_sreq_id; /* nonzero: ack the sender when matched */
    uint32_t             imm_data;
    uint32_t             info_flags;   /* AXON_TAG_INFO_* */
    axon_unexp_kind_t    kind;
    uint8_t              space;        /* AXON_TAG_SPACE_* */
    int                  pooled;
    int                  queued;       /* in the matching queues (not taken by a probe) */
    axon_status_t        status;       /* AXON_OK, or why the message can never complete */
    uint8_t              data[] __attribute__((aligned(8)));
} axon_unexp_desc_t;

/* A multi-fragment message being reassembled, into a request or a descriptor. */
typedef struct axon_rx_frag {
    axon_list_link_t   link;   /* in worker->rx_frags[bucket] */
    uint64_t           sender_uuid;
    uint64_t           msg_id;
    axon_request_h     req;    /* matched: fragments go to the user buffer */
    axon_unexp_desc_t *desc;   /* unexpected: fragments go to the descriptor */
} axon_rx_frag_t;

static inline unsigned axon_rx_frag_bucket(uint64_t sender_uuid, uint64_t msg_id)
{
    return (unsigned)(((sender_uuid ^ msg_id) * 0x9E3779B97F4A7C15ull) >> 58);
}

static axon_rx_frag_t *axon_rx_frag_find(axon_worker_h worker, uint64_t sender_uuid,
                                         uint64_t msg_id)
{
    axon_rx_frag_t *frag;

    axon_list_for_each(frag, &worker->rx_frags[axon_rx_frag_bucket(sender_uuid, msg_id)], link) {
        if ((frag->sender_uuid == sender_uuid) && (frag->msg_id == msg_id)) {
            return frag;
        }
    }
    return NULL;
}

static axon_rx_frag_t *axon_rx_frag_add(axon_worker_h worker, uint64_t sender_uuid,
                                        uint64_t msg_id)
{
    axon_rx_frag_t *frag = axon_mpool_get(&worker->frag_mp);

    if (frag == NULL) {
        return NULL;
    }
    frag->sender_uuid = sender_uuid;
    frag->msg_id      = msg_id;
    frag->req         = NULL;
    frag->desc        = NULL;
    axon_list_add_tail(&worker->rx_frags[axon_rx_frag_bucket(sender_uuid, msg_id)],
                       &frag->link);
    return frag;
}

static void axon_rx_frag_remove(axon_worker_h worker, axon_rx_frag_t *frag)
{
    axon_list_del(&frag->link);
    axon_mpool_put(&worker->frag_mp, frag);
}

/* Copy a piece of a message into a receive buffer, never past its end. */
static inline void axon_tag_recv_copy(axon_request_h req, size_t offset, const void *data,
                                      size_t length)
{
    if (offset < req->recv.length) {
        if (length > req->recv.length - offset) {
            length = req->recv.length - offset;
        }
        if (req->flags & AXON_REQUEST_LAYOUT) {
            axon_layout_scatter(&req->recv.cursor, offset, data, length);
        } else {
            memcpy(req->recv.buffer + offset, data, length);
        }
    }
}

/* A receive's buffer and length; with AXON_REQ_FLAG_LAYOUT the buffer is the layout's base. */
static inline void axon_tag_recv_set_buffer(axon_request_h req, void *buffer, size_t length,
                                            const axon_request_param_t *param)
{
    req->recv.buffer = buffer;
    req->recv.length = length;
    if ((param != NULL) && (param->flags & AXON_REQ_FLAG_LAYOUT)) {
        axon_layout_cursor_init(&req->recv.cursor, param->layout, buffer);
        req->flags |= AXON_REQUEST_LAYOUT;
    }
}

static inline void axon_tag_recv_finish(axon_request_h req)
{
    axon_request_complete(req, (req->recv.info.length > req->recv.length) ?
                               AXON_ERR_MSG_TRUNCATED : AXON_OK);
}

/* A synchronous send was matched: tell its sender. */
static void axon_tag_send_sync_ack(axon_worker_h worker, uint64_t sender_uuid, uint64_t sreq_id)
{
    axon_sync_ack_hdr_t ack = {sreq_id, worker->uuid};
    axon_ep_h ep = axon_peer_reply_ep(worker, sender_uuid);

    if ((ep == NULL) ||
        ((axon_ep_send_ctrl(ep, AXON_AM_TAG_SYNC_ACK, &ack, sizeof(ack)) != AXON_OK) &&
         (ep->status == AXON_OK))) {
        axon_log(axon_peer_stray_level(worker, sender_uuid, AXON_LOG_WARN),
                 "could not acknowledge synchronous send %llu to peer %016llx",
                 (unsigned long long)sreq_id, (unsigned long long)sender_uuid);
    }
}

static axon_unexp_desc_t *axon_unexp_desc_get(axon_worker_h worker, size_t length)
{
    axon_unexp_desc_t *desc;

    if (sizeof(*desc) + length <= worker->unexp_mp.elem_size) {
        desc = axon_mpool_get(&worker->unexp_mp);
        if (desc != NULL) {
            desc->pooled = 1;
            return desc;
        }
    }
    desc = malloc(sizeof(*desc) + length);
    if (desc == NULL) {
        axon_error("no memory to buffer an unexpected message of %zu bytes", length);
        return NULL;
    }
    desc->pooled = 0;
    return desc;
}

static void axon_unexp_desc_put(axon_worker_h worker, axon_unexp_desc_t *desc)
{
    if (desc->pooled) {
        axon_mpool_put(&worker->unexp_mp, desc);
    } else {
        free(desc);
    }
}

static void axon_unexp_desc_init(axon_unexp_desc_t *desc, const axon_tag_match_hdr_t *m,
                                 size_t length, axon_unexp_kind_t kind)
{
    desc->tm.tag     = m->tag;
    desc->tm.sender  = m->sender_uuid;
    desc->imm_data   = m->imm_data;
    desc->info_flags = m->flags & AXON_TAG_INFO_IMM_DATA;
    desc->space      = (uint8_t)axon_tag_space_of(m);
    desc->length     = length;
    desc->kind       = kind;
}

static void axon_unexp_queue(axon_worker_h worker, axon_unexp_desc_t *desc)
{
    desc->queued = 1;
    desc->status = AXON_OK;
    axon_tm_add_unexpected(&worker->tm[desc->space], &desc->tm);
}

static inline void axon_tag_info_from_desc(axon_tag_recv_info_t *info,
                                           const axon_unexp_desc_t *desc)
{
    info->sender_tag = desc->tm.tag;
    info->length     = desc->length;
    info->sender_id  = desc->tm.sender;
    info->imm_data   = desc->imm_data;
    info->flags      = desc->info_flags;
}

static axon_unexp_desc_t *axon_unexp_take(axon_worker_h worker, unsigned space, axon_tag_t tag,
                                          axon_tag_t tag_mask, uint64_t sender, int remove)
{
    axon_tm_unexp_t *unexp = axon_tm_match_unexpected(&worker->tm[space], tag, tag_mask, sender,
                                                      remove);
    axon_unexp_desc_t *desc;

    if (unexp == NULL) {
        return NULL;
    }
    desc = axon_container_of(unexp, axon_unexp_desc_t, tm);
    if (remove) {
        desc->queued = 0;
    }
    return desc;
}

/* A posted receive leaves the expected queue: it can no longer be canceled. */
static inline axon_request_h axon_tag_match_posted(axon_worker_h worker,
                                                   const axon_tag_match_hdr_t *m)
{
    axon_tm_recv_t *recv = axon_tm_match_expected(&worker->tm[axon_tag_space_of(m)], m->tag,
                                                  m->sender_uuid);
    axon_request_h req;

    if (recv == NULL) {
        return NULL;
    }
    req = axon_container_of(recv, struct axon_request, recv.tm);
    req->flags &= ~AXON_REQUEST_POSTED;
    return req;
}

/* First (or only) piece of an eager message arrived: match it or queue it. */
static void axon_tag_rx_first(axon_worker_h worker, const axon_tag_match_hdr_t *m, size_t total,
                              const void *data, size_t length, axon_rx_frag_t *frag,
                              uint64_t sync_sreq_id)
{
    axon_request_h req = axon_tag_match_posted(worker, m);
    axon_unexp_desc_t *desc;

    if (req != NULL) {
        axon_tag_info_set(&req->recv.info, m, total);
        req->recv.received = length;
        axon_tag_recv_copy(req, 0, data, length);
        if (sync_sreq_id != 0) {
            axon_tag_send_sync_ack(worker, m->sender_uuid, sync_sreq_id);
        }
        if (frag != NULL) {
            frag->req = req;
        } else {
            axon_tag_recv_finish(req);
        }
        return;
    }

    desc = axon_unexp_desc_get(worker, total);
    if (desc == NULL) {
        if (frag != NULL) {
            axon_rx_frag_remove(worker, frag);
        }
        return;
    }
    axon_unexp_desc_init(desc, m, total, AXON_UNEXP_EAGER);
    desc->received     = length;
    desc->frag         = frag;
    desc->sync_sreq_id = sync_sreq_id;
    if (length > 0) {
        memcpy(desc->data, data, length);
    }
    if (frag != NULL) {
        frag->desc = desc;
    }
    axon_unexp_queue(worker, desc);
}

static void axon_tag_am_eager_only(void *arg, const void *data, size_t length, unsigned flags)
{
    const axon_eager_hdr_t *hdr = data;

    if (length < sizeof(*hdr)) {
        axon_error("dropping eager message of %zu bytes: shorter than its header", length);
        return;
    }
    axon_tag_rx_first(arg, &hdr->m, length - sizeof(*hdr), hdr + 1, length - sizeof(*hdr),
                      NULL, 0);
}

static void axon_tag_am_eager_sync(void *arg, const void *data, size_t length, unsigned flags)
{
    const axon_eager_sync_hdr_t *hdr = data;

    if ((length < sizeof(*hdr)) || (hdr->sreq_id == 0)) {
        axon_error("dropping malformed synchronous message of %zu bytes", length);
        return;
    }
    axon_tag_rx_first(arg, &hdr->m, length - sizeof(*hdr), hdr + 1, length - sizeof(*hdr),
                      NULL, hdr->sreq_id);
}

static void axon_tag_am_eager_first(void *arg, const void *data, size_t length, unsigned flags)
{
    const axon_eager_first_hdr_t *hdr = data;
    axon_worker_h worker = arg;
    axon_rx_frag_t *frag;

    if ((length < sizeof(*hdr)) || (hdr->total_length <= length - sizeof(*hdr))) {
        axon_error("dropping malformed first fragment: %zu bytes, total %llu", length,
                   (length < sizeof(*hdr)) ? 0ull : (unsigned long long)hdr->total_length);
        return;
    }
    frag = axon_rx_frag_add(worker, hdr->m.sender_uuid, hdr->msg_id);
    if (frag == NULL) {
        axon_error("no memory to reassemble message %llu", (unsigned long long)hdr->msg_id);
        return;
    }
    axon_tag_rx_first(worker, &hdr->m, hdr->total_length, hdr + 1, length - sizeof(*hdr), frag,
                      hdr->sreq_id);
}

static void axon_tag_am_eager_middle(void *arg, const void *data, size_t length, unsigned flags)
{
    const axon_eager_middle_hdr_t *hdr = data;
    axon_worker_h worker = arg;
    axon_unexp_desc_t *desc;
    axon_rx_frag_t *frag;
    axon_request_h req;
    size_t total;

    if (length < sizeof(*hdr)) {
        axon_error("dropping middle fragment of %zu bytes: shorter than its header", length);
        return;
    }
    length -= sizeof(*hdr);
    frag = axon_rx_frag_find(worker, hdr->sender_uuid, hdr->msg_id);
    if (frag == NULL) {
        axon_log(axon_peer_stray_level(worker, hdr->sender_uuid, AXON_LOG_WARN),
                 "dropping fragment of unknown message %llu from %016llx",
                 (unsigned long long)hdr->msg_id, (unsigned long long)hdr->sender_uuid);
        return;
    }

    if (frag->req != NULL) {
        req   = frag->req;
        total = req->recv.info.length;
        if ((hdr->offset > total) || (length > total - hdr->offset)) {
            goto bad_offset;
        }
        axon_tag_recv_copy(req, hdr->offset, hdr + 1, length);
        req->recv.received += length;
        if (req->recv.received == total) {
            axon_rx_frag_remove(worker, frag);
            axon_tag_recv_finish(req);
        }
        return;
    }

    desc  = frag->desc;
    total = desc->length;
    if ((hdr->offset > total) || (length > total - hdr->offset)) {
        goto bad_offset;
    }
    memcpy(desc->data + hdr->offset, hdr + 1, length);
    desc->received += length;
    if (desc->received == total) {
        desc->frag = NULL;
        axon_rx_frag_remove(worker, frag);
    }
    return;

bad_offset:
    axon_error("dropping fragment at offset %llu + %zu beyond message length %zu",
               (unsigned long long)hdr->offset, length, total);
}

static void axon_tag_am_sync_ack(void *arg, const void *data, size_t length, unsigned flags)
{
    const axon_sync_ack_hdr_t *hdr = data;
    axon_request_h req;

    if (length != sizeof(*hdr)) {
        axon_error("dropping synchronous-send ack of %zu bytes", length);
        return;
    }
    req = axon_request_id_find(arg, hdr->sreq_id, hdr->from_uuid);
    if (req == NULL) {
        axon_debug("ack for unknown synchronous send %llu", (unsigned long long)hdr->sreq_id);
        return;
    }
    axon_tag_sync_acked(req);
}

static void axon_tag_am_rts(void *arg, const void *data, size_t length, unsigned flags)
{
    const axon_rndv_rts_hdr_t *rts = data;
    axon_worker_h worker = arg;
    axon_unexp_desc_t *desc;
    axon_request_h req;

    if ((length < sizeof(*rts)) || (rts->rail_keys > AXON_RNDV_RAILS_MAX) ||
        (length != axon_rndv_rts_size(rts))) {
        axon_error("dropping rendezvous request of %zu bytes (expected %zu and %u rail keys "
                   "of %zu)", length, sizeof(*rts), (length < sizeof(*rts)) ? 0 : rts->rail_keys,
                   sizeof(axon_rndv_rail_key_t));
        return;
    }
    req = axon_tag_match_posted(worker, &rts->m);
    if (req != NULL) {
        axon_rndv_recv_start(req, rts);
        return;
    }

    desc = axon_unexp_desc_get(worker, length);
    if (desc == NULL) {
        return;
    }
    axon_unexp_desc_init(desc, &rts->m, rts->length, AXON_UNEXP_RNDV);
    desc->received     = 0;
    desc->frag         = NULL;
    desc->sync_sreq_id = 0;
    memcpy(desc->data, rts, length);
    axon_unexp_queue(worker, desc);
}

/* Deliver an unexpected message (taken out of the queues) to a new receive. */
static axon_status_t axon_tag_recv_unexp(axon_worker_h worker, axon_unexp_desc_t *desc,
                                         void *buffer, size_t length,
                                         const axon_request_param_t *param,
                                         axon_request_h *req_p)
{
    uint32_t flags = (param != NULL) ? param->flags : 0;
    axon_request_h req;

    if (desc->sync_sreq_id != 0) {
        axon_tag_send_sync_ack(worker, desc->tm.sender, desc->sync_sreq_id);
        desc->sync_sreq_id = 0;  /* once, even if this receive fails below */
    }

    if ((desc->kind == AXON_UNEXP_EAGER) && (desc->frag == NULL) && (desc->length <= length) &&
        !(flags & AXON_REQ_FLAG_NO_IMM_CMPL)) {
        /* Whole message already here and it fits: done without a request. */
        if (flags & AXON_REQ_FLAG_LAYOUT) {
            axon_layout_cursor_t cursor;

            axon_layout_cursor_init(&cursor, param->layout, buffer);
            axon_layout_scatter(&cursor, 0, desc->data, desc->length);
        } else if (desc->length > 0) {  /* buffer may be NULL for an empty message */
            memcpy(buffer, desc->data, desc->length);
        }
        if ((param != NULL) && (param->recv_info != NULL)) {
            axon_tag_info_from_desc(param->recv_info, desc);
        }
        axon_unexp_desc_put(worker, desc);
        return AXON_OK;
    }

    req = axon_request_get(worker, param, AXON_REQUEST_RECV);
    if (req == NULL) {
        axon_unexp_desc_put(worker, desc);
        axon_error("no memory for a receive request; message dropped");
        return AXON_ERR_NO_MEMORY;
    }
    axon_tag_recv_set_buffer(req, buffer, length, param);
    axon_tag_info_from_desc(&req->recv.info, desc);

    if (desc->status != AXON_OK) {
        /* Taken by a probe, then its sender died mid-message. */
        axon_request_complete(req, desc->status);
        axon_unexp_desc_put(worker, desc);
        *req_p = req;
        return AXON_INPROGRESS;
    }
    if (desc->kind == AXON_UNEXP_RNDV) {
        /* with its rail keys: recv_start reads them before the descriptor goes */
        axon_rndv_recv_start(req, (const axon_rndv_rts_hdr_t *)desc->data);
        axon_unexp_desc_put(worker, desc);
        *req_p = req;
        return AXON_INPROGRESS;
    }

    req->recv.received = desc->received;
    axon_tag_recv_copy(req, 0, desc->data, desc->received);
    if (desc->frag != NULL) {
        /* Later fragments land straight in the user buffer. */
        desc->frag->desc = NULL;
        desc->frag->req  = req;
    } else {
        axon_tag_recv_finish(req);
    }
    axon_unexp_desc_put(worker, desc);
    *req_p = req;
    return AXON_INPROGRESS;
}

static int axon_tag_recv_check(const char *func, axon_worker_h worker, void *buffer,
                               size_t length, const axon_request_param_t *param,
                               axon_request_h *req_p)
{
    int layout = (param != NULL) && (param->flags & AXON_REQ_FLAG_LAYOUT);

    if ((worker == NULL) || (req_p == NULL) || ((buffer == NULL) && (length > 0) && !layout)) {
        axon_error("%s: NULL %s (length %zu)", func,
                   !worker ? "worker" : !req_p ? "req_p" : "buffer", length);
        return 0;
    }
    return !layout || (axon_layout_param_check(param, length, 1, func) == AXON_OK);
}

axon_status_t axon_tag_space_recv_nb(axon_worker_h worker, unsigned space, void *buffer,
                                     size_t length, axon_tag_t tag, axon_tag_t tag_mask,
                                     const axon_request_param_t *param, axon_request_h *req_p)
{
    axon_unexp_desc_t *desc;
    axon_request_h req;
    uint64_t sender;

    if (!axon_tag_recv_check("axon_tag_recv_nb", worker, buffer, length, param, req_p)) {
        return AXON_ERR_INVALID_PARAM;
    }

    sender = ((param != NULL) && (param->flags & AXON_REQ_FLAG_SENDER)) ? param->sender_id :
             AXON_SENDER_ANY;
    desc = axon_unexp_take(worker, space, tag, tag_mask, sender, 1);
    if (desc != NULL) {
        return axon_tag_recv_unexp(worker, desc, buffer, length, param, req_p);
    }

    req = axon_request_get(worker, param, AXON_REQUEST_RECV | AXON_REQUEST_POSTED);
    if (req == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    axon_tag_recv_set_buffer(req, buffer, length, param);
    req->recv.received    = 0;
    req->recv.tm.tag      = tag;
    req->recv.tm.tag_mask = tag_mask;
    req->recv.tm.sender   = sender;
    req->recv.space       = (uint8_t)space;
    axon_tm_post_recv(&worker->tm[space], &req->recv.tm);
    *req_p = req;
    return AXON_INPROGRESS;
}

axon_status_t axon_tag_recv_nb(axon_worker_h worker, void *buffer, size_t length,
                               axon_tag_t tag, axon_tag_t tag_mask,
                               const axon_request_param_t *param, axon_request_h *req_p)
{
    return axon_tag_space_recv_nb(worker, AXON_TAG_SPACE_APP, buffer, length, tag, tag_mask,
                                  param, req_p);
}

axon_status_t axon_tag_probe_from_nb(axon_worker_h worker, uint64_t sender_id, axon_tag_t tag,
                                     axon_tag_t tag_mask, int remove,
                                     axon_tag_recv_info_t *info, axon_tag_message_h *msg_p)
{
    axon_unexp_desc_t *desc;

    if ((worker == NULL) || (remove && (msg_p == NULL))) {
        axon_error("axon_tag_probe_nb: NULL %s", worker ? "msg_p (needed with remove)" : "worker");
        return AXON_ERR_INVALID_PARAM;
    }
    desc = axon_unexp_take(worker, AXON_TAG_SPACE_APP, tag, tag_mask, sender_id, remove);
    if (desc == NULL) {
        return AXON_ERR_NO_MESSAGE;
    }
    if (info != NULL) {
        axon_tag_info_from_desc(info, desc);
    }
    if (remove) {
        /* Matched now (MPI_Improbe): a synchronous sender may complete. */
        if (desc->sync_sreq_id != 0) {
            axon_tag_send_sync_ack(worker, desc->tm.sender, desc->sync_sreq_id);
            desc->sync_sreq_id = 0;
        }
        *msg_p = (axon_tag_message_h)desc;
    }
    return AXON_OK;
}

axon_status_t axon_tag_probe_nb(axon_worker_h worker, axon_tag_t tag, axon_tag_t tag_mask,
                                int remove, axon_tag_recv_info_t *info,
                                axon_tag_message_h *msg_p)
{
    return axon_tag_probe_from_nb(worker, AXON_SENDER_ANY, tag, tag_mask, remove, info, msg_p);
}

axon_status_t axon_tag_msg_recv_nb(axon_worker_h worker, void *buffer, size_t length,
                                   axon_tag_message_h message,
                                   const axon_request_param_t *param, axon_request_h *req_p)
{
    if (!axon_tag_recv_check("axon_tag_msg_recv_nb", worker, buffer, length, param, req_p)) {
        return AXON_ERR_INVALID_PARAM;
    }
    if (message == NULL) {
        axon_error("axon_tag_msg_recv_nb: NULL message");
        return AXON_ERR_INVALID_PARAM;
    }
    return axon_tag_recv_unexp(worker, (axon_unexp_desc_t *)message, buffer, length, param,
                               req_p);
}

axon_status_t axon_request_cancel(axon_worker_h worker, axon_request_h req)
{
    if ((worker == NULL) || (req == NULL)) {
        axon_error("axon_request_cancel: NULL %s", worker ? "request" : "worker");
        return AXON_ERR_INVALID_PARAM;
    }
    if (!(req->flags & AXON_REQUEST_RECV)) {
        return AXON_ERR_UNSUPPORTED;  /* sends cannot be recalled (MPI deprecates it) */
    }
    if (!(req->flags & AXON_REQUEST_POSTED)) {
        return AXON_ERR_BUSY;         /* matched or done: completes normally */
    }
    axon_tm_remove_recv(&worker->tm[req->recv.space], &req->recv.tm);
    req->flags &= ~AXON_REQUEST_POSTED;
    axon_request_complete(req, AXON_ERR_CANCELED);
    return AXON_OK;
}

/* Fail receives and unexpected messages that depend on a dead peer. */
static void axon_tag_peer_failed(axon_worker_h worker, uint64_t peer_uuid, axon_status_t status)
{
    axon_unexp_desc_t *desc;
    axon_tm_unexp_t *unexp, *tmp;
    axon_rx_frag_t *frag, *ftmp;
    axon_request_h req;
    unsigned i;

    /* Messages still arriving from the peer will never be whole. */
    for (i = 0; i < AXON_RX_FRAG_BUCKETS; ++i) {
        axon_list_for_each_safe(frag, ftmp, &worker->rx_frags[i], link) {
            if (frag->sender_uuid != peer_uuid) {
                continue;
            }
            req  = frag->req;
            desc = frag->desc;
            if ((desc != NULL) && desc->queued) {
                axon_tm_remove_unexpected(&worker->tm[desc->space], &desc->tm);
                axon_unexp_desc_put(worker, desc);
            } else if (desc != NULL) {
                /* A probe holds it: its receive will report the failure. */
                desc->frag   = NULL;
                desc->status = status;
            }
            axon_rx_frag_remove(worker, frag);
            if (req != NULL) {
                axon_request_complete(req, status);
            }
        }
    }
    /* Rendezvous requests whose data stayed at the dead sender. */
    for (i = 0; i < AXON_TAG_SPACES; ++i) {
        axon_list_for_each_safe(unexp, tmp, &worker->tm[i].unexp_all, all_link) {
            desc = axon_container_of(unexp, axon_unexp_desc_t, tm);
            if ((desc->kind == AXON_UNEXP_RNDV) && (desc->tm.sender == peer_uuid)) {
                axon_tm_remove_unexpected(&worker->tm[i], unexp);
                axon_unexp_desc_put(worker, desc);
            }
        }
    }
    axon_rndv_rails_peer_failed(worker, peer_uuid, status);
}

/* The matching engine, pools for small unexpected messages and reassembly, AM handlers. */
static axon_status_t axon_tag_worker_init(axon_worker_h worker)
{
    axon_status_t status;

    axon_list_init(&worker->rail_waits);
    status = axon_tm_init(&worker->tm[AXON_TAG_SPACE_APP], worker->context->opts.tag_hash_bits);
    if (status != AXON_OK) {
        return status;
    }
    /* Collectives receive from known senders with full masks: a few buckets do. */
    status = axon_tm_init(&worker->tm[AXON_TAG_SPACE_COLL], 6);
    if (status != AXON_OK) {
        goto err_tm_app;
    }
    status = axon_mpool_init(&worker->unexp_mp, "unexpected",
                             sizeof(axon_unexp_desc_t) + AXON_UNEXP_SMALL_SIZE, 64,
                             worker->context->opts.max_unexp_pool);
    if (status != AXON_OK) {
        goto err_tm;
    }
    status = axon_mpool_init(&worker->frag_mp, "reassembly", sizeof(axon_rx_frag_t), 32, 0);
    if (status != AXON_OK) {
        goto err_unexp;
    }
    worker->am_handlers[AXON_AM_TAG_EAGER_ONLY]      = axon_tag_am_eager_only;
    worker->am_handlers[AXON_AM_TAG_EAGER_FIRST]     = axon_tag_am_eager_first;
    worker->am_handlers[AXON_AM_TAG_EAGER_MIDDLE]    = axon_tag_am_eager_middle;
    worker->am_handlers[AXON_AM_TAG_EAGER_SYNC_ONLY] = axon_tag_am_eager_sync;
    worker->am_handlers[AXON_AM_TAG_SYNC_ACK]        = axon_tag_am_sync_ack;
    worker->am_handlers[AXON_AM_RNDV_RTS]            = axon_tag_am_rts;
    axon_rndv_register_handlers(worker);
    return AXON_OK;

err_unexp:
    axon_mpool_cleanup(&worker->unexp_mp);
err_tm:
    axon_tm_cleanup(&worker->tm[AXON_TAG_SPACE_COLL]);
err_tm_app:
    axon_tm_cleanup(&worker->tm[AXON_TAG_SPACE_APP]);
    return status;
}

static void axon_tag_worker_cleanup(axon_worker_h worker)
{
    axon_rx_frag_t *frag;
    unsigned i;

    axon_unexp_desc_t *desc;

    for (i = 0; i < AXON_TAG_SPACES; ++i) {
        while ((desc = axon_unexp_take(worker, i, 0, 0, AXON_SENDER_ANY, 1)) != NULL) {
            axon_unexp_desc_put(worker, desc);
        }
    }
    /* Receives still posted are left linked: the buckets go with the matching
     * engine and the requests with the worker's pool. */
    for (i = 0; i < AXON_RX_FRAG_BUCKETS; ++i) {
        while (!axon_list_is_empty(&worker->rx_frags[i])) {
            frag = axon_list_first(&worker->rx_frags[i], axon_rx_frag_t, link);
            axon_rx_frag_remove(worker, frag);
        }
    }
    axon_mpool_cleanup(&worker->frag_mp);
    axon_mpool_cleanup(&worker->unexp_mp);
    for (i = 0; i < AXON_TAG_SPACES; ++i) {
        axon_tm_cleanup(&worker->tm[i]);
    }
}

const axon_proto_ops_t axon_tag_proto = {
    .name           = "tag",
    .worker_init    = axon_tag_worker_init,
    .worker_cleanup = axon_tag_worker_cleanup,
    .ep_init        = axon_tag_ep_init,
    .peer_failed    = axon_tag_peer_failed,
    .progress       = axon_rndv_rails_progress,
};
