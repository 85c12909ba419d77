/*
 * One-sided operations done by the target's progress: the active messages,
 * and the internals rma.c, amo.c and rma_am.c share.
 *
 *   PUT        [token, addr, length, req, sender][data]   initiator → target; one per
 *                                                         fragment (bcopy), or one
 *                                                         am_zcopy placed straight into
 *                                                         the target's memory
 *   PUT_ACK    [req, from, length, status]                 target → initiator, per PUT
 *   GET_REQ    [token, addr, length, req, sender, offset]  initiator → target: send me
 *                                                         [addr, addr + length), which is
 *                                                         byte offset of the operation
 *   GET_REPLY  [req, from, offset, length, status][data]  target → initiator, fragmented to
 *                                                         the reply lane's bcopy size, or
 *                                                         one am_zcopy placed straight into
 *                                                         the get buffer; an error reply
 *                                                         carries no data and covers every
 *                                                         byte not sent yet
 *   AMO        [axon_amo_args_t, token, addr, req, sender]
 *                                                         initiator → target
 *   AMO_REPLY  [req, from, status, result words]          target → initiator, always (it is
 *                                                         also the remote completion)
 *
 * req is the initiator's request id, looked up in its worker's id map with
 * the replier's worker id (never a pointer). token names the mapping at the
 * target, which checks [addr, addr + length) against it (axon_mem_lookup)
 * before touching a byte; a bad key or range answers AXON_ERR_REMOTE_ACCESS.
 * Replies go through the target's reply endpoint to the initiator.
 *
 * Every operation not finished inside its call is a request on its
 * endpoint's list of operations (ep->rma.ops), in issue order, until it is
 * complete at the target: PUT_ACKs, GET_REPLYs, AMO_REPLYs, or the lane's
 * completion of an RDMA read/write. Flushes wait on that list; a fence
 * makes later operations wait (ep->rma.waitq) until the earlier ones left
 * it, unless all of them ride one ordered AM lane.
 */
#ifndef AXON_RMA_PROTO_H
#define AXON_RMA_PROTO_H

#include <stdint.h>
#include "request.h"
#include "rma.h"

enum {
    AXON_AM_RMA_PUT       = 12,
    AXON_AM_RMA_PUT_ACK   = 13,
    AXON_AM_RMA_GET_REQ   = 14,
    AXON_AM_RMA_GET_REPLY = 15,
    AXON_AM_RMA_AMO       = 16,
    AXON_AM_RMA_AMO_REPLY = 17,
};

typedef struct axon_rma_put_hdr {
    uint64_t token;
    uint64_t addr;          /* target address of the first byte of this fragment */
    uint64_t length;        /* payload bytes */
    uint64_t req_id;
    uint64_t sender_uuid;
} axon_rma_put_hdr_t;

typedef struct axon_rma_put_ack_hdr {
    uint64_t req_id;
    uint64_t from_uuid;
    uint64_t length;        /* the acked fragment's bytes */
    int64_t  status;
} axon_rma_put_ack_hdr_t;

typedef struct axon_rma_get_req_hdr {
    uint64_t token;
    uint64_t addr;
    uint64_t length;
    uint64_t req_id;
    uint64_t sender_uuid;
    uint64_t offset;        /* of addr in the operation: replies count from the operation's start */
} axon_rma_get_req_hdr_t;

typedef struct axon_rma_get_reply_hdr {
    uint64_t req_id;
    uint64_t from_uuid;
    uint64_t offset;
    uint64_t length;        /* payload bytes; an error covers [offset, offset + length) */
    int64_t  status;
} axon_rma_get_reply_hdr_t;

typedef struct axon_rma_amo_hdr {
    axon_amo_args_t args;
    uint64_t        token;
    uint64_t        addr;
    uint64_t        req_id;
    uint64_t        sender_uuid;
} axon_rma_amo_hdr_t;

typedef struct axon_rma_amo_reply_hdr {
    uint64_t req_id;
    uint64_t from_uuid;
    int64_t  status;
    uint64_t result[AXON_AMO_MAX_WORDS];  /* only args.size / 8 words (at least one) travel */
} axon_rma_amo_reply_hdr_t;

/* Bytes of an AMO_REPLY for an operand of size bytes. */
static inline size_t axon_rma_amo_reply_len(unsigned size)
{
    return offsetof(axon_rma_amo_reply_hdr_t, result) +
           ((size < 8) ? 8 : size);
}

/* What a request whose step is axon_rma_step does (req->rma.kind). */
typedef enum {
    AXON_RMA_KIND_PUT = 0,
    AXON_RMA_KIND_GET,
    AXON_RMA_KIND_AMO,
    AXON_RMA_KIND_FLUSH,        /* an endpoint's flush, on ep->rma.flushes */
    AXON_RMA_KIND_WORKER_FLUSH, /* waits for one FLUSH per busy endpoint */
    AXON_RMA_KIND_GET_REPLY,    /* target side: the data of a GET_REQ, going back */
} axon_rma_kind_t;

/* The first operation not yet complete at the target on ep (list not empty). */
static inline axon_request_h axon_rma_first_op(axon_ep_h ep)
{
    return axon_list_first(&ep->rma.ops, struct axon_request, rma.op_link);
}

/* The last fence this endpoint has not seen yet applies to everything issued on it so far. */
static inline void axon_rma_fence_note(axon_ep_h ep)
{
    if (__builtin_expect(ep->rma.fence_epoch != ep->worker->rma_fence_epoch, 0)) {
        ep->rma.fence_epoch = ep->worker->rma_fence_epoch;
        ep->rma.fence_seq   = ep->rma.seq;
    }
}

/*
 * May an operation run at once on ep? Not while a fence holds operations
 * back: some are waiting already, or one from before the last fence is
 * still out.
 */
static inline int axon_rma_unfenced(axon_ep_h ep)
{
    axon_rma_fence_note(ep);
    return axon_list_is_empty(&ep->rma.waitq) &&
           (axon_list_is_empty(&ep->rma.ops) ||
            (axon_rma_first_op(ep)->rma.seq > ep->rma.fence_seq));
}

axon_status_t axon_rma_check_failed(axon_ep_h ep, const struct axon_rkey *rkey, uint32_t feature,
                                    const void *req_p, const char *func);

/* Common checks of every put/get/atomic: AXON_OK, or what is wrong (logged). */
static inline axon_status_t axon_rma_check(axon_ep_h ep, const struct axon_rkey *rkey,
                                           uint32_t feature, const void *req_p,
                                           const char *func)
{
    if (__builtin_expect((ep != NULL) && (rkey != NULL) && (req_p != NULL) && (rkey->ep == ep) &&
                         (ep->status == AXON_OK) && (ep->close_req == NULL) &&
                         (ep->worker->context->features & feature) &&
                         ((rkey->path != AXON_RMA_PATH_LOCAL) ||
                          axon_mem_ref_live(rkey->locks_ref)), 1)) {
        return AXON_OK;
    }
    return axon_rma_check_failed(ep, rkey, feature, req_p, func);
}

/* [addr, addr + length) outside the key: AXON_ERR_REMOTE_ACCESS, logged. */
axon_status_t axon_rma_range_error(const struct axon_rkey *rkey, uint64_t addr, size_t length,
                                   const char *func);
/* A request completed with status, for an operation done at once (AXON_REQ_FLAG_NO_IMM_CMPL). */
axon_status_t axon_rma_done_request(axon_worker_h worker, axon_status_t status,
                                    const axon_request_param_t *param, axon_request_h *req_p);

/* An operation finished inside its call: status, or a completed request if the caller wants one. */
static inline axon_status_t axon_rma_done_now(axon_worker_h worker, axon_status_t status,
                                              const axon_request_param_t *param,
                                              axon_request_h *req_p)
{
    if (__builtin_expect((param != NULL) && (param->flags & AXON_REQ_FLAG_NO_IMM_CMPL), 0)) {
        return axon_rma_done_request(worker, status, param, req_p);
    }
    return status;
}

/*
 * Start an operation that cannot finish on the fast path: req is filled
 * (kind, mode, addresses, lengths); this tracks it on its endpoint, runs or
 * queues it, and returns what the public call returns.
 */
axon_status_t axon_rma_start(axon_request_h req, const axon_request_param_t *param,
                             axon_request_h *req_p);
/* A request for an operation on ep, with the fields every kind uses. */
axon_request_h axon_rma_request_get(axon_ep_h ep, const axon_request_param_t *param,
                                    axon_rma_kind_t kind);

/* Stop issuing: what is out still completes, then the operation ends with status. */
static inline void axon_rma_op_fail(axon_request_h req, axon_status_t status)
{
    if (req->rma.status == AXON_OK) {
        req->rma.status = status;
    }
    req->rma.length = req->rma.offset;
}

/* AXON_INPROGRESS while the transport or the target still owe something; else the end status. */
static inline axon_status_t axon_rma_op_state(axon_request_h req)
{
    if ((req->flags & AXON_REQUEST_TL_BUSY) || (req->rma.done < req->rma.length)) {
        return AXON_INPROGRESS;
    }
    return req->rma.status;
}

/* Completion of an operation's RDMA read/write or zero-copy message (rma.c). */
void axon_rma_zcopy_done(axon_tl_completion_t *comp, axon_status_t status);

/* The transport took len bytes of req and owes axon_rma_zcopy_done (am: a message, not RDMA). */
static inline void axon_rma_zcopy_posted(axon_request_h req, size_t len, int am)
{
    req->flags      |= AXON_REQUEST_TL_BUSY;
    req->rma.zc_am   = (uint8_t)am;
    req->rma.zc_len  = len;
    req->rma.offset += len;
}

/* A transport completion of req came in (TL_BUSY cleared if none is left): go on or end. */
void axon_rma_tl_done(axon_request_h req);

/* rma_rails.c: stripe a large put/get over the endpoint's rails (1) or not (0); move it. */
int           axon_rma_rails_start(axon_request_h req);
axon_status_t axon_rma_rails_push(axon_request_h req);

/* Called from rma_am.c as replies arrive: length more units of req are complete. */
void axon_rma_op_progress(axon_request_h req, size_t length, axon_status_t status);
/* Find the operation a reply names: NULL (logged) if none. */
axon_request_h axon_rma_op_find(axon_worker_h worker, uint64_t req_id, uint64_t from_uuid,
                                axon_rma_kind_t kind, const char *what);

/*
 * amo.c: execute an atomic on a range mapped in this process (LOCAL/SHM key);
 * result (NULL: not fetching) gets the previous value as the public calls
 * lay it out (4 bytes for a 4-byte operand, else size / 8 words).
 */
void axon_amo_local_exec(const struct axon_rkey *rkey, uint64_t remote_addr,
                         const axon_amo_args_t *args, void *result);
/* Store a fetched value (args->size / 8 words, one for 4 bytes) into the caller's result. */
void axon_amo_result_store(void *result, unsigned size, const uint64_t *words);

/* Send the active messages of an operation in AM mode (rma_am.c). */
axon_status_t axon_rma_am_push(axon_request_h req);
/* Target side: push a GET_REPLY stream (its step on the pending queue). */
axon_status_t axon_rma_get_reply_push(axon_request_h req);

/* Zero-copy receive placement of PUT and GET_REPLY data (worker->am_rx_dest). */
void *axon_rma_rx_dest(void *arg, uint8_t am_id, const void *hdr, size_t hdr_len,
                       size_t data_length);

/* The pending-queue step of every initiator's operation (req->step), which also marks
 * a request as one: push it further (axon_request_step_t). */
axon_status_t axon_rma_step(axon_request_h req);
/* The rma protocol's hooks in the core (rma.c). */
extern const axon_proto_ops_t axon_rma_proto;

#endif
