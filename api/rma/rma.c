/*
 * Put and get, and the life of every one-sided operation on its endpoint
 * (flush and fence are in rma_flush.c, atomics' public calls in amo.c, the
 * active messages in rma_am.c).
 *
 * The fast path (LOCAL/SHM key, nothing held back by a fence) copies and
 * returns. Anything else becomes a request on ep->rma.ops until it is
 * complete at the target; it moves by its key's path: memcpy (LOCAL/SHM),
 * the lane's RDMA read/write (ZCOPY; a lane that refuses sends the rest as
 * active messages) or active messages (AM, queued on the endpoint's pending
 * queue in order when the transport is full).
 *
 * A put or non-fetching atomic whose messages are all sent is done for the
 * caller (AXON_OK) but stays on ops, internally, until the target acks it:
 * that is what flush waits for. A failure the caller can no longer see is
 * kept in ep->rma.error and returned by the next flush.
 */
#include <string.h>
#include "log.h"
#include "rma_proto.h"

/* ---------------------------------------------------------------- checks */

axon_status_t axon_rma_check_failed(axon_ep_h ep, const struct axon_rkey *rkey, uint32_t feature,
                                    const void *req_p, const char *func)
{
    if ((ep == NULL) || (rkey == NULL) || (req_p == NULL)) {
        axon_error("%s: NULL %s", func, !ep ? "endpoint" : !rkey ? "rkey" : "req_p");
        return AXON_ERR_INVALID_PARAM;
    }
    if (!(ep->worker->context->features & feature)) {
        axon_error("%s: the context was created without AXON_FEATURE_%s", func,
                   (feature == AXON_FEATURE_AMO) ? "AMO" : "RMA");
        return AXON_ERR_INVALID_PARAM;
    }
    if (rkey->ep != ep) {
        axon_error("%s: key %p was unpacked on endpoint %p, not on %p", func, (const void *)rkey,
                   (void *)rkey->ep, (void *)ep);
        return AXON_ERR_INVALID_PARAM;
    }
    if (ep->close_req != NULL) {
        axon_error("%s: endpoint %p is closing", func, (void *)ep);
        return AXON_ERR_INVALID_PARAM;
    }
    if ((ep->status == AXON_OK) && (rkey->path == AXON_RMA_PATH_LOCAL)) {
        /* as the target would say of a token it no longer has */
        axon_debug("%s: key %p: its memory (this process's) was unmapped", func,
                   (const void *)rkey);
        return AXON_ERR_REMOTE_ACCESS;
    }
    return ep->status;  /* the peer is gone: no log, the error callback said it */
}

axon_status_t axon_rma_range_error(const struct axon_rkey *rkey, uint64_t addr, size_t length,
                                   const char *func)
{
    axon_error("%s: remote range [0x%llx, +%zu) is outside the key's [0x%llx, +%llu)", func,
               (unsigned long long)addr, length, (unsigned long long)rkey->remote_base,
               (unsigned long long)rkey->length);
    return AXON_ERR_REMOTE_ACCESS;
}

axon_status_t axon_rma_done_request(axon_worker_h worker, axon_status_t status,
                                    const axon_request_param_t *param, axon_request_h *req_p)
{
    axon_request_h req = axon_request_get(worker, param, 0);

    if (req == NULL) {
        axon_error("no memory for a request on worker %p", (void *)worker);
        return AXON_ERR_NO_MEMORY;
    }
    axon_request_complete(req, status);
    *req_p = req;
    return AXON_INPROGRESS;
}

/* ---------------------------------------------------------------- layouts */

/* The contiguous local piece at the operation's offset: its address and length. */
static uint8_t *axon_rma_segment(axon_request_h req, size_t *length_p)
{
    size_t left = req->rma.length - req->rma.offset;
    uint8_t *p;

    if (!(req->flags & AXON_REQUEST_LAYOUT)) {
        *length_p = left;
        return req->rma.data.buffer + req->rma.offset;
    }
    p = axon_layout_cursor_run(&req->rma.data.cursor, req->rma.offset, length_p);
    *length_p = (*length_p < left) ? *length_p : left;
    return p;
}

/* ---------------------------------------------------------------- operation life */

/* The rma protocol's part of a new endpoint: its lists, and the fence it has seen. */
static void axon_rma_ep_init(axon_ep_h ep)
{
    axon_list_init(&ep->rma.ops);
    axon_list_init(&ep->rma.flushes);
    axon_list_init(&ep->rma.waitq);
    ep->rma.seq         = 0;
    ep->rma.fence_seq   = 0;
    ep->rma.unordered   = 0;
    ep->rma.fence_epoch = ep->worker->rma_fence_epoch;
    ep->rma.error       = AXON_OK;
    ep->rma.draining    = 0;
}

axon_request_h axon_rma_request_get(axon_ep_h ep, const axon_request_param_t *param,
                                    axon_rma_kind_t kind)
{
    axon_request_h req = axon_request_get(ep->worker, param, 0);

    if (req == NULL) {
        axon_error("no memory for a request on endpoint %p", (void *)ep);
        return NULL;
    }
    req->step           = axon_rma_step;
    req->peer_uuid      = ep->peer_uuid;
    req->rma.ep         = ep;
    req->rma.rkey       = NULL;
    req->rma.kind       = (uint8_t)kind;
    req->rma.mode       = AXON_RMA_PATH_AM;
    req->rma.unordered  = 0;
    req->rma.detached   = 0;
    req->rma.zc_am      = 0;
    req->rma.status     = AXON_OK;
    req->rma.seq        = 0;
    req->rma.length     = 0;
    req->rma.offset     = 0;
    req->rma.done       = 0;
    req->rma.zc_len     = 0;
    req->rma.iov_busy_at = 0;
    axon_list_init(&req->rma.op_link);
    return req;
}

static void axon_rma_op_track(axon_request_h req)
{
    axon_ep_h ep = req->rma.ep;

    req->rma.seq = ++ep->rma.seq;
    axon_list_add_tail(&ep->rma.ops, &req->rma.op_link);
    ++ep->outstanding;  /* a flushing close waits for it too */
    if ((req->rma.mode == AXON_RMA_PATH_ZCOPY) || (req->rma.mode == AXON_RMA_PATH_DEVICE)) {
        req->rma.unordered = 1;
        ++ep->rma.unordered;
    }
}

static void axon_rma_op_untrack(axon_request_h req)
{
    axon_ep_h ep = req->rma.ep;

    axon_request_id_del(req);
    axon_list_del(&req->rma.op_link);
    if (req->rma.unordered) {
        req->rma.unordered = 0;
        --ep->rma.unordered;
    }
    --ep->outstanding;
}

/* A failure nobody holds a request for: the next flush reports it. */
static void axon_rma_op_note_error(axon_request_h req, axon_status_t status)
{
    axon_ep_h ep = req->rma.ep;

    if ((status == AXON_OK) || !(req->flags & AXON_REQUEST_INTERNAL)) {
        return;
    }
    axon_warn("%s to 0x%llx on endpoint %p failed at the target: %s",
              (req->rma.kind == AXON_RMA_KIND_PUT) ? "put" : "atomic",
              (unsigned long long)req->rma.remote_addr, (void *)ep, axon_status_string(status));
    if (ep->rma.error == AXON_OK) {
        ep->rma.error = status;
    }
}

static void axon_rma_flush_done(axon_request_h flush, axon_status_t status)
{
    axon_request_h parent = flush->rma.flush.parent;

    if (parent == NULL) {
        axon_request_complete(flush, status);
        return;
    }
    axon_request_put(flush);
    if ((status != AXON_OK) && (parent->rma.status == AXON_OK)) {
        parent->rma.status = status;
    }
    if (--parent->rma.flush.children == 0) {
        axon_request_complete(parent, parent->rma.status);
    }
}

static void axon_rma_run(axon_request_h req);

/* Operations a fence held back may go once every earlier one they wait for is done. */
static void axon_rma_waitq_drain(axon_ep_h ep)
{
    axon_request_h req;

    ep->rma.draining = 1;
    while (!axon_list_is_empty(&ep->rma.waitq) && (ep->status == AXON_OK)) {
        req = axon_list_first(&ep->rma.waitq, struct axon_request, list);
        if (axon_rma_first_op(ep)->rma.seq <= req->rma.wait_seq) {
            break;
        }
        axon_list_del(&req->list);
        axon_rma_run(req);
    }
    ep->rma.draining = 0;
}

/* ops lost a member: flushes and held-back operations may go on. */
static void axon_rma_ep_advance(axon_ep_h ep)
{
    axon_request_h flush;
    axon_status_t status;

    while (!axon_list_is_empty(&ep->rma.flushes)) {
        flush = axon_list_first(&ep->rma.flushes, struct axon_request, rma.op_link);
        if (!axon_list_is_empty(&ep->rma.ops) &&
            (axon_rma_first_op(ep)->rma.seq <= flush->rma.seq)) {
            break;
        }
        axon_list_del(&flush->rma.op_link);
        status        = ep->rma.error;
        ep->rma.error = AXON_OK;
        axon_rma_flush_done(flush, status);
    }
    if (!ep->rma.draining && !axon_list_is_empty(&ep->rma.waitq)) {
        axon_rma_waitq_drain(ep);
    }
}

/* The operation is complete at the target (or failed): off the endpoint, tell the caller. */
static void axon_rma_op_finish(axon_request_h req, axon_status_t status)
{
    axon_ep_h ep = req->rma.ep;

    axon_rma_op_untrack(req);
    axon_rma_op_note_error(req, status);
    axon_request_complete(req, status);
    axon_rma_ep_advance(ep);
    axon_ep_check_close(ep);
}

/* ---------------------------------------------------------------- paths */

/* LOCAL/SHM: the range is mapped here; the whole operation is done now. */
static axon_status_t axon_rma_local_run(axon_request_h req)
{
    const struct axon_rkey *rkey = req->rma.rkey;
    uint8_t *target = rkey->local_base + (req->rma.remote_addr - rkey->remote_base);

    switch (req->rma.kind) {
    case AXON_RMA_KIND_PUT:
        if (req->flags & AXON_REQUEST_LAYOUT) {
            axon_layout_gather(&req->rma.data.cursor, 0, target, req->rma.length);
        } else {
            memmove(target, req->rma.data.buffer, req->rma.length);
        }
        break;
    case AXON_RMA_KIND_GET:
        if (req->flags & AXON_REQUEST_LAYOUT) {
            axon_layout_scatter(&req->rma.data.cursor, 0, target, req->rma.length);
        } else {
            memmove(req->rma.data.buffer, target, req->rma.length);
        }
        break;
    case AXON_RMA_KIND_AMO:
        axon_amo_local_exec(rkey, req->rma.remote_addr, &req->rma.amo.args,
                            req->rma.amo.result);
        break;
    default:
        break;
    }
    req->rma.offset = req->rma.done = req->rma.length;
    return AXON_OK;
}

/*
 * The next AXON_TL_IOV_MAX runs of a layout (at most max bytes) in one
 * operation: done at once (shm: one process_vm_readv/writev) or in
 * progress (rc: one RDMA operation through a local UMR key); *len_p says
 * how many bytes they hold.
 */
static axon_status_t axon_rma_zcopy_runs(axon_request_h req, const axon_lane_t *lane,
                                         const void *tl_rkey, size_t max, size_t *len_p)
{
    struct iovec *iov = req->worker->zcopy_iov;   /* one op at a time per worker */
    size_t start = req->rma.offset, pos = start, end = req->rma.length, run, n;

    if ((max != 0) && (end - start > max)) {
        end = start + max;
    }
    for (n = 0; (n < AXON_TL_IOV_MAX) && (pos < end); ++n, pos += run) {
        iov[n].iov_base = axon_layout_cursor_run(&req->rma.data.cursor, pos, &run);
        run             = (run < end - pos) ? run : end - pos;
        iov[n].iov_len  = run;
    }
    *len_p = pos - start;
    req->tl_comp.func = axon_rma_zcopy_done;
    return (req->rma.kind == AXON_RMA_KIND_PUT) ?
           lane->ops->ep_put_zcopy_iov(lane->tl_ep, iov, n, req->rma.remote_addr + start,
                                       tl_rkey, &req->tl_comp) :
           lane->ops->ep_get_zcopy_iov(lane->tl_ep, iov, n, req->rma.remote_addr + start,
                                       tl_rkey, &req->tl_comp);
}

/*
 * ZCOPY: the lane reads or writes the target's memory, a contiguous piece
 * at a time (a layout's runs in batches where the lane takes them). AXON_ERR_UNSUPPORTED when the lane refuses (not connected,
 * queue full, system policy): the caller sends the rest as messages.
 */
static axon_status_t axon_rma_zcopy_push(axon_request_h req)
{
    const struct axon_rkey *rkey = req->rma.rkey;
    const axon_lane_t *lane = rkey->zcopy_lane;
    const void *tl_rkey = (rkey->tl_rkey_len != 0) ? rkey->tl_rkey : NULL;
    size_t max = lane->resource->max_zcopy;
    axon_status_t status;
    uint8_t *local;
    size_t len;

    if ((req->rma.kind == AXON_RMA_KIND_PUT) ? (lane->ops->ep_put_zcopy == NULL) :
                                               (lane->ops->ep_get_zcopy == NULL)) {
        return AXON_ERR_UNSUPPORTED;
    }
    if (__builtin_expect((req->flags & AXON_REQUEST_RMA_RAILS) ||
                         ((rkey->dev_keys != NULL) && axon_rma_rails_start(req)), 0)) {
        return axon_rma_rails_push(req);
    }
    int batch = (req->flags & AXON_REQUEST_LAYOUT) &&
                ((req->rma.kind == AXON_RMA_KIND_PUT) ? (lane->ops->ep_put_zcopy_iov != NULL) :
                                                        (lane->ops->ep_get_zcopy_iov != NULL));

    /* a lane busy for batches is asked again once its iface had events, not at every
     * progress: a batch is a walk of up to AXON_TL_IOV_MAX runs */
    if (batch && (req->rma.iov_busy_at == req->worker->iface_events + 1)) {
        return AXON_ERR_NO_RESOURCE;
    }
    while (batch && (req->rma.offset < req->rma.length) && !(req->flags & AXON_REQUEST_TL_BUSY)) {
        status = axon_rma_zcopy_runs(req, lane, tl_rkey, max, &len);
        if (status == AXON_OK) {
            req->rma.offset += len;
            req->rma.done   += len;
        } else if (status == AXON_INPROGRESS) {
            axon_rma_zcopy_posted(req, len, 0);
        } else if (status == AXON_ERR_UNSUPPORTED) {
            batch = 0;   /* not in batches here (rc without UMR): run by run */
        } else if (status == AXON_ERR_NO_RESOURCE) {
            req->rma.iov_busy_at = req->worker->iface_events + 1;
            return status;   /* keys or slots busy: queued, tried again after events */
        } else {
            axon_rma_op_fail(req, status);
        }
    }
    while ((req->rma.offset < req->rma.length) && !(req->flags & AXON_REQUEST_TL_BUSY)) {
        local = axon_rma_segment(req, &len);
        if ((max != 0) && (len > max)) {
            len = max;
        }
        req->tl_comp.func = axon_rma_zcopy_done;
        status = (req->rma.kind == AXON_RMA_KIND_PUT) ?
                 lane->ops->ep_put_zcopy(lane->tl_ep, local, len,
                                         req->rma.remote_addr + req->rma.offset, tl_rkey,
                                         &req->tl_comp) :
                 lane->ops->ep_get_zcopy(lane->tl_ep, local, len,
                                         req->rma.remote_addr + req->rma.offset, tl_rkey,
                                         &req->tl_comp);
        if (status == AXON_OK) {
            req->rma.offset += len;
            req->rma.done   += len;
        } else if (status == AXON_INPROGRESS) {
            axon_rma_zcopy_posted(req, len, 0);
        } else if (status == AXON_ERR_UNSUPPORTED) {
            return status;
        } else {
            axon_rma_op_fail(req, status);
        }
    }
    return axon_rma_op_state(req);
}

/* DEVICE: the amo lane's device executes the atomic (amo.c checked the op). */
static axon_status_t axon_rma_device_push(axon_request_h req)
{
    const struct axon_rkey *rkey = req->rma.rkey;
    const axon_lane_t *lane      = rkey->amo_lane;
    axon_status_t status;

    if ((req->rma.offset >= req->rma.length) || (req->flags & AXON_REQUEST_TL_BUSY)) {
        return axon_rma_op_state(req);
    }
    req->tl_comp.func = axon_rma_zcopy_done;
    status = lane->ops->ep_atomic(lane->tl_ep, &req->rma.amo.args, req->rma.remote_addr,
                                  rkey->amo_tl_rkey, req->rma.amo.dev_result, &req->tl_comp);
    if (status == AXON_INPROGRESS) {
        axon_rma_zcopy_posted(req, 1, 0);
        return AXON_INPROGRESS;
    }
    if (status == AXON_ERR_NO_RESOURCE) {
        return status;
    }
    axon_rma_op_fail(req, (status == AXON_OK) ? AXON_ERR_IO_ERROR : status);
    req->rma.offset = req->rma.done = req->rma.length;
    return axon_rma_op_state(req);
}

/*
 * A device atomic completed: 1 when the operation is done (result stored),
 * 0 when an XOR's compare-and-swap found another value and goes again.
 */
static int axon_rma_device_amo_done(axon_request_h req)
{
    axon_amo_args_t *args = &req->rma.amo.args;
    uint64_t old          = req->rma.amo.dev_result[0];

    if (req->rma.amo.xor_loop && (old != args->compare[0])) {
        args->compare[0] = old;
        args->value[0]   = old ^ req->rma.amo.xor_value;
        return 0;
    }
    if (req->rma.amo.result != NULL) {
        axon_amo_result_store(req->rma.amo.result, args->size, req->rma.amo.dev_result);
    }
    return 1;
}

/*
 * Move req as far as it goes now. AXON_OK or an error: finished (nothing
 * outstanding); AXON_INPROGRESS: waiting for the transport or the target;
 * AXON_ERR_NO_RESOURCE: messages to send, the transport is full (or, with
 * queued == 0, earlier messages are queued on the endpoint).
 */
static axon_status_t axon_rma_push(axon_request_h req, int queued)
{
    axon_status_t status;

    switch (req->rma.mode) {
    case AXON_RMA_PATH_LOCAL:
    case AXON_RMA_PATH_SHM:
        return axon_rma_local_run(req);
    case AXON_RMA_PATH_DEVICE:
        return axon_rma_device_push(req);
    case AXON_RMA_PATH_ZCOPY:
        status = axon_rma_zcopy_push(req);
        if (status != AXON_ERR_UNSUPPORTED) {
            return status;
        }
        axon_debug("endpoint %p: %s lane refused %s of %zu bytes at 0x%llx: by messages",
                   (void *)req->rma.ep, req->rma.rkey->zcopy_lane->resource->tl_name,
                   (req->rma.kind == AXON_RMA_KIND_PUT) ? "a put" : "a get",
                   req->rma.length - req->rma.offset,
                   (unsigned long long)(req->rma.remote_addr + req->rma.offset));
        req->rma.mode = AXON_RMA_PATH_AM;
        if (req->rma.unordered) {
            req->rma.unordered = 0;
            --req->rma.ep->rma.unordered;
        }
        /* fall through */
    default:
        if (!queued && !axon_list_is_empty(&req->rma.ep->pending)) {
            return AXON_ERR_NO_RESOURCE;
        }
        return axon_rma_am_push(req);
    }
}

/* Run an operation that is on no queue (held back before, or between transport ops). */
static void axon_rma_run(axon_request_h req)
{
    axon_status_t status = axon_rma_push(req, 0);

    if (status == AXON_ERR_NO_RESOURCE) {
        axon_ep_pending_push(req->rma.ep, req);
    } else if (status != AXON_INPROGRESS) {
        axon_rma_op_finish(req, status);
    }
}

static void axon_rma_detached_done(axon_request_h req)
{
    axon_request_complete(req, (req->rma.status != AXON_OK) ? req->rma.status :
                                                              AXON_ERR_CANCELED);
}

void axon_rma_zcopy_done(axon_tl_completion_t *comp, axon_status_t status)
{
    axon_request_h req = axon_container_of(comp, struct axon_request, tl_comp);

    req->flags &= ~AXON_REQUEST_TL_BUSY;
    if (req->rma.detached) {
        axon_rma_detached_done(req);  /* its endpoint may be gone */
        return;
    }
    if ((req->rma.mode == AXON_RMA_PATH_DEVICE) && (status == AXON_OK) &&
        !axon_rma_device_amo_done(req)) {
        req->rma.offset = 0;  /* the XOR's next compare-and-swap */
        axon_rma_run(req);
        return;
    }
    if (!req->rma.zc_am || (status != AXON_OK)) {
        /* An RDMA op is complete at the target now; a failed message is never acked. */
        req->rma.done += req->rma.zc_len;
    }
    if (status != AXON_OK) {
        axon_rma_op_fail(req, status);
    }
    axon_rma_tl_done(req);
}

void axon_rma_tl_done(axon_request_h req)
{
    axon_status_t status;

    if (req->rma.detached) {
        if (!(req->flags & AXON_REQUEST_TL_BUSY)) {
            axon_rma_detached_done(req);  /* its endpoint may be gone */
        }
        return;
    }
    if ((req->rma.mode == AXON_RMA_PATH_ZCOPY) && (req->rma.offset < req->rma.length)) {
        axon_rma_run(req);
        return;
    }
    status = axon_rma_op_state(req);
    if (status != AXON_INPROGRESS) {
        axon_rma_op_finish(req, status);
    }
}

void axon_rma_op_progress(axon_request_h req, size_t length, axon_status_t status)
{
    if (status != AXON_OK) {
        axon_rma_op_fail(req, status);
    }
    req->rma.done += length;
    if (!axon_list_is_empty(&req->list)) {
        return;  /* still queued: the queue's turn finishes it */
    }
    status = axon_rma_op_state(req);
    if (status != AXON_INPROGRESS) {
        axon_rma_op_finish(req, status);
    }
}

axon_request_h axon_rma_op_find(axon_worker_h worker, uint64_t req_id, uint64_t from_uuid,
                                axon_rma_kind_t kind, const char *what)
{
    axon_request_h req = axon_request_id_find(worker, req_id, from_uuid);

    if ((req == NULL) || (req->step != axon_rma_step) || (req->rma.kind != kind)) {
        axon_debug("dropping %s for unknown operation %llu from %016llx", what,
                   (unsigned long long)req_id, (unsigned long long)from_uuid);
        return NULL;
    }
    return req;
}

axon_status_t axon_rma_step(axon_request_h req)
{
    axon_ep_h ep = req->rma.ep;
    axon_status_t status;

    status = axon_rma_push(req, 1);
    if ((status == AXON_ERR_NO_RESOURCE) || (status == AXON_INPROGRESS)) {
        return status;  /* still queued; or finishes on its replies or completion */
    }
    /* Finished: the queue's owner completes it once it is off the queue. */
    axon_rma_op_untrack(req);
    axon_rma_op_note_error(req, status);
    axon_rma_ep_advance(ep);
    return status;
}

/* Has the caller nothing more to wait for (its buffer or operands are copied out)? */
static inline int axon_rma_caller_done(axon_request_h req)
{
    return (req->rma.mode == AXON_RMA_PATH_AM) && (req->rma.offset == req->rma.length) &&
           !(req->flags & AXON_REQUEST_TL_BUSY) &&
           ((req->rma.kind == AXON_RMA_KIND_PUT) ||
            ((req->rma.kind == AXON_RMA_KIND_AMO) && (req->rma.amo.result == NULL)));
}

/*
 * Must req wait behind operations from before a fence? Not if it and all of
 * them travel one ordered AM lane: the target executes them in order.
 */
static int axon_rma_must_wait(axon_request_h req)
{
    axon_ep_h ep = req->rma.ep;

    if (!axon_list_is_empty(&ep->rma.waitq)) {
        return 1;
    }
    if (axon_rma_first_op(ep)->rma.seq > ep->rma.fence_seq) {
        return 0;
    }
    return (req->rma.mode != AXON_RMA_PATH_AM) || (ep->rma.unordered != 0) ||
           !(ep->am_lane.resource->cap_flags & AXON_CAP_AM_ORDERED);
}

axon_status_t axon_rma_start(axon_request_h req, const axon_request_param_t *param,
                             axon_request_h *req_p)
{
    uint32_t flags = (param != NULL) ? param->flags : 0;
    axon_ep_h ep = req->rma.ep;
    axon_status_t status;

    axon_rma_fence_note(ep);
    axon_rma_op_track(req);
    if (axon_rma_must_wait(req)) {
        req->rma.wait_seq = ep->rma.fence_seq;
        axon_list_add_tail(&ep->rma.waitq, &req->list);
        *req_p = req;
        return AXON_INPROGRESS;
    }

    status = axon_rma_push(req, 0);
    if (status == AXON_ERR_NO_RESOURCE) {
        axon_ep_pending_push(ep, req);
        *req_p = req;
        return AXON_INPROGRESS;
    }
    if (status == AXON_INPROGRESS) {
        if (!(flags & AXON_REQ_FLAG_NO_IMM_CMPL) && axon_rma_caller_done(req)) {
            req->flags |= AXON_REQUEST_INTERNAL;  /* tracked for flush only */
            return AXON_OK;
        }
        *req_p = req;
        return AXON_INPROGRESS;
    }
    axon_rma_op_untrack(req);
    return axon_request_finish_now(req, status, flags, req_p);
}

/* ---------------------------------------------------------------- failure */

/* ep is destroyed or its peer failed: every operation on ep ends with status. */
static void axon_rma_ep_abort(axon_ep_h ep, axon_status_t status)
{
    axon_request_h req, tmp;

    axon_list_for_each_safe(req, tmp, &ep->pending, list) {
        if (req->step == axon_rma_step) {  /* not a GET_REPLY: the core fails those */
            axon_list_del(&req->list);
        }
    }
    while (!axon_list_is_empty(&ep->rma.waitq)) {
        req = axon_list_first(&ep->rma.waitq, struct axon_request, list);
        axon_list_del(&req->list);
    }
    while (!axon_list_is_empty(&ep->rma.ops)) {
        req = axon_rma_first_op(ep);
        axon_rma_op_untrack(req);
        if (req->flags & AXON_REQUEST_TL_BUSY) {
            /* The transport still owes the completion; it finishes the request alone. */
            req->rma.detached = 1;
            req->rma.status   = status;
            continue;
        }
        axon_request_complete(req, status);
    }
    while (!axon_list_is_empty(&ep->rma.flushes)) {
        req = axon_list_first(&ep->rma.flushes, struct axon_request, rma.op_link);
        axon_list_del(&req->rma.op_link);
        axon_rma_flush_done(req, status);
    }
    ep->rma.error = AXON_OK;
}

const axon_proto_ops_t axon_rma_proto = {
    .name        = "rma",
    .worker_init = axon_rma_worker_init,
    .ep_init     = axon_rma_ep_init,
    .ep_abort    = axon_rma_ep_abort,
};

/* ---------------------------------------------------------------- put / get */

/*
 * Fill a data request and start it. With a layout the data is walked by a
 * cursor over buffer as its base; an iov list's layout (AXON_LAYOUT_ABS_IOV,
 * built on the caller's stack) is kept in the request.
 */
static axon_status_t axon_rma_data_start(axon_ep_h ep, axon_rma_kind_t kind, uint8_t *buffer,
                                         const axon_layout_t *layout, size_t length,
                                         uint64_t remote_addr, axon_rkey_h rkey,
                                         const axon_request_param_t *param,
                                         axon_request_h *req_p)
{
    axon_request_h req = axon_rma_request_get(ep, param, kind);

    if (req == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    req->rma.rkey           = rkey;
    req->rma.mode           = (uint8_t)rkey->path;
    req->rma.token          = rkey->token;
    req->rma.remote_addr    = remote_addr;
    req->rma.length         = length;
    req->rma.data.buffer    = buffer;
    if (layout != NULL) {
        if (layout->kind == AXON_LAYOUT_ABS_IOV) {
            req->rma.data.own_layout = *layout;
            layout = &req->rma.data.own_layout;
        }
        axon_layout_cursor_init(&req->rma.data.cursor, layout, buffer);
        req->flags |= AXON_REQUEST_LAYOUT;
    }
    return axon_rma_start(req, param, req_p);
}

/*
 * put and get whose local side is a layout over buffer (AXON_REQ_FLAG_LAYOUT,
 * or an iov list): checked, then copied in place on LOCAL/SHM paths, else
 * moved run by run (ZCOPY) or gathered into and scattered from active messages.
 */
static axon_status_t axon_rma_layout_nb(axon_ep_h ep, axon_rma_kind_t kind, uint8_t *buffer,
                                        const axon_layout_t *layout, size_t length,
                                        uint64_t remote_addr, axon_rkey_h rkey,
                                        const axon_request_param_t *param, axon_request_h *req_p,
                                        const char *func)
{
    axon_layout_cursor_t cursor;
    uint8_t *target;

    if (!axon_rkey_range_ok(rkey, remote_addr, length)) {
        return axon_rma_range_error(rkey, remote_addr, length, func);
    }
    if (length == 0) {
        return axon_rma_done_now(ep->worker, AXON_OK, param, req_p);
    }
    target = axon_rkey_mapped(rkey, remote_addr, length);
    if ((target != NULL) && axon_rma_unfenced(ep)) {
        axon_layout_cursor_init(&cursor, layout, buffer);
        if (kind == AXON_RMA_KIND_PUT) {
            axon_layout_gather(&cursor, 0, target, length);
        } else {
            axon_layout_scatter(&cursor, 0, target, length);
        }
        return axon_rma_done_now(ep->worker, AXON_OK, param, req_p);
    }
    return axon_rma_data_start(ep, kind, buffer, layout, length, remote_addr, rkey, param,
                               req_p);
}

/* AXON_REQ_FLAG_LAYOUT on put or get: out of line, the contiguous path stays as it was. */
static __attribute__((noinline)) axon_status_t
axon_rma_param_layout_nb(axon_ep_h ep, axon_rma_kind_t kind, uint8_t *buffer, size_t length,
                         uint64_t remote_addr, axon_rkey_h rkey,
                         const axon_request_param_t *param, axon_request_h *req_p,
                         const char *func)
{
    axon_status_t status = axon_layout_param_check(param, length, kind == AXON_RMA_KIND_GET,
                                                   func);

    if (status != AXON_OK) {
        return status;
    }
    return axon_rma_layout_nb(ep, kind, buffer, param->layout, length, remote_addr, rkey, param,
                              req_p, func);
}

/*
 * put and get: checks, then the fast path in place where the range is mapped here (kind is a
 * constant at both call sites, so each gets its own copy with no branch on it).
 */
static inline __attribute__((always_inline)) axon_status_t
axon_rma_contig_nb(axon_ep_h ep, axon_rma_kind_t kind, uint8_t *buffer, size_t length,
                   uint64_t remote_addr, axon_rkey_h rkey, const axon_request_param_t *param,
                   axon_request_h *req_p, const char *func)
{
    axon_status_t status = axon_rma_check(ep, rkey, AXON_FEATURE_RMA, req_p, func);
    uint8_t *target;

    if (__builtin_expect(status != AXON_OK, 0)) {
        return status;
    }
    if (__builtin_expect((param != NULL) && (param->flags & AXON_REQ_FLAG_LAYOUT), 0)) {
        return axon_rma_param_layout_nb(ep, kind, buffer, length, remote_addr, rkey, param,
                                        req_p, func);
    }
    if (__builtin_expect(!axon_rkey_range_ok(rkey, remote_addr, length), 0)) {
        return axon_rma_range_error(rkey, remote_addr, length, func);
    }
    if (__builtin_expect((buffer == NULL) && (length > 0), 0)) {
        axon_error("%s: NULL buffer of %zu bytes", func, length);
        return AXON_ERR_INVALID_PARAM;
    }
    if (__builtin_expect(length == 0, 0)) {
        return axon_rma_done_now(ep->worker, AXON_OK, param, req_p);
    }
    target = axon_rkey_mapped(rkey, remote_addr, length);
    if ((target != NULL) && axon_rma_unfenced(ep)) {
        if (kind == AXON_RMA_KIND_PUT) {
            memmove(target, buffer, length);
        } else {
            memmove(buffer, target, length);
        }
        return axon_rma_done_now(ep->worker, AXON_OK, param, req_p);
    }
    return axon_rma_data_start(ep, kind, buffer, NULL, length, remote_addr, rkey, param, req_p);
}

axon_status_t axon_rkey_ptr(axon_rkey_h rkey, uint64_t remote_addr, size_t length,
                            unsigned flags, void **ptr_p)
{
    uint8_t *p;

    if ((rkey == NULL) || (ptr_p == NULL) || (length == 0) || (flags & ~AXON_RKEY_PTR_ATOMICS)) {
        axon_error("axon_rkey_ptr: %s (flags 0x%x)", (rkey == NULL) ? "NULL rkey" :
                   (ptr_p == NULL) ? "NULL ptr_p" : (length == 0) ? "length 0" : "unknown flag",
                   flags);
        return AXON_ERR_INVALID_PARAM;
    }
    if (!axon_rkey_range_ok(rkey, remote_addr, length)) {
        return axon_rma_range_error(rkey, remote_addr, length, "axon_rkey_ptr");
    }
    if ((rkey->path == AXON_RMA_PATH_LOCAL) && !axon_mem_ref_live(rkey->locks_ref)) {
        axon_error("axon_rkey_ptr: key %p: its memory (this process's) was unmapped",
                   (void *)rkey);
        return AXON_ERR_REMOTE_ACCESS;
    }
    p = axon_rkey_mapped(rkey, remote_addr, length);
    if ((p == NULL) || ((flags & AXON_RKEY_PTR_ATOMICS) && (rkey->amo != AXON_RKEY_AMO_CPU))) {
        return AXON_ERR_UNSUPPORTED;   /* not mapped here (or a device's atomics): the ops */
    }
    *ptr_p = p;
    return AXON_OK;
}

axon_status_t axon_rkey_map_window(axon_rkey_h rkey, uint64_t *remote_addr_p, size_t *length_p,
                                   void **ptr_p)
{
    if ((rkey == NULL) || (remote_addr_p == NULL) || (length_p == NULL) || (ptr_p == NULL)) {
        axon_error("axon_rkey_map_window: NULL %s", (rkey == NULL) ? "rkey" : "output pointer");
        return AXON_ERR_INVALID_PARAM;
    }
    if ((rkey->path == AXON_RMA_PATH_LOCAL) || (rkey->map_base == NULL) || (rkey->map_len == 0)) {
        return AXON_ERR_UNSUPPORTED;
    }
    *remote_addr_p = rkey->map_lo;
    *length_p      = rkey->map_len;
    *ptr_p         = rkey->map_base;
    return AXON_OK;
}

axon_status_t axon_put_nb(axon_ep_h ep, const void *buffer, size_t length, uint64_t remote_addr,
                          axon_rkey_h rkey, const axon_request_param_t *param,
                          axon_request_h *req_p)
{
    return axon_rma_contig_nb(ep, AXON_RMA_KIND_PUT, (uint8_t *)(uintptr_t)buffer, length,
                              remote_addr, rkey, param, req_p, "axon_put_nb");
}

axon_status_t axon_get_nb(axon_ep_h ep, void *buffer, size_t length, uint64_t remote_addr,
                          axon_rkey_h rkey, const axon_request_param_t *param,
                          axon_request_h *req_p)
{
    return axon_rma_contig_nb(ep, AXON_RMA_KIND_GET, buffer, length, remote_addr, rkey, param,
                              req_p, "axon_get_nb");
}

/* Total bytes of an iov list; AXON_ERR_INVALID_PARAM (logged) for a malformed one. */
static axon_status_t axon_rma_iov_length(const axon_iov_t *iov, size_t iov_count,
                                         size_t *length_p, const char *func)
{
    size_t i, total = 0;

    if ((iov == NULL) && (iov_count > 0)) {
        axon_error("%s: NULL iov of %zu entries", func, iov_count);
        return AXON_ERR_INVALID_PARAM;
    }
    for (i = 0; i < iov_count; ++i) {
        if ((iov[i].buffer == NULL) && (iov[i].length > 0)) {
            axon_error("%s: iov[%zu] is a NULL buffer of %zu bytes", func, i, iov[i].length);
            return AXON_ERR_INVALID_PARAM;
        }
        if (iov[i].length > SIZE_MAX - total) {
            axon_error("%s: iov lengths overflow at entry %zu", func, i);
            return AXON_ERR_INVALID_PARAM;
        }
        total += iov[i].length;
    }
    *length_p = total;
    return AXON_OK;
}

static axon_status_t axon_rma_iov_start(axon_ep_h ep, axon_rma_kind_t kind, const axon_iov_t *iov,
                                        size_t iov_count, uint64_t remote_addr, axon_rkey_h rkey,
                                        const axon_request_param_t *param, axon_request_h *req_p,
                                        const char *func)
{
    axon_status_t status = axon_rma_check(ep, rkey, AXON_FEATURE_RMA, req_p, func);
    axon_layout_t layout;
    size_t length;

    if (status != AXON_OK) {
        return status;
    }
    status = axon_rma_iov_length(iov, iov_count, &length, func);
    if (status != AXON_OK) {
        return status;
    }
    /* Absolute addresses: the same shape as layout pieces over a NULL base. */
    layout.kind       = AXON_LAYOUT_ABS_IOV;
    layout.iov.pieces = (const axon_layout_piece_t *)(const void *)iov;
    layout.iov.count  = iov_count;
    return axon_rma_layout_nb(ep, kind, NULL, &layout, length, remote_addr, rkey, param, req_p,
                              func);
}

axon_status_t axon_put_iov_nb(axon_ep_h ep, const axon_iov_t *iov, size_t iov_count,
                              uint64_t remote_addr, axon_rkey_h rkey,
                              const axon_request_param_t *param, axon_request_h *req_p)
{
    return axon_rma_iov_start(ep, AXON_RMA_KIND_PUT, iov, iov_count, remote_addr, rkey, param,
                              req_p, "axon_put_iov_nb");
}

axon_status_t axon_get_iov_nb(axon_ep_h ep, const axon_iov_t *iov, size_t iov_count,
                              uint64_t remote_addr, axon_rkey_h rkey,
                              const axon_request_param_t *param, axon_request_h *req_p)
{
    return axon_rma_iov_start(ep, AXON_RMA_KIND_GET, iov, iov_count, remote_addr, rkey, param,
                              req_p, "axon_get_iov_nb");
}
