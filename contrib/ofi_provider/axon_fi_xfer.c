/*
 * The data path both message interfaces share: a send is one Axon tag send
 * on the destination's connection, a receive one Axon tag receive on the
 * endpoint's worker; request callbacks turn completions into CQ entries
 * and counter increments (op_context = the user's context). Op descriptors
 * come from the domain's free list, and an inject is copied by Axon only
 * when it cannot leave inside the call: nothing is allocated per message.
 */
#include <string.h>
#include "axon_fi.h"

void axon_fi_inflight_add(axon_fi_ep_t *ep, axon_fi_op_t *op)
{
    axon_fi_list_add_tail(&ep->inflight, op);
    op->posted = 1;
    axon_fi_progress_posted(ep->domain);
}

void axon_fi_inflight_del(axon_fi_op_t *op)
{
    if (op->posted) {
        axon_fi_list_del(op);
        op->posted = 0;
    }
}

/* Errors a peer causes are reported as completions; the rest fail the call. */
static inline int axon_fi_is_peer_error(axon_status_t status)
{
    return (status == AXON_ERR_CONNECTION_RESET) || (status == AXON_ERR_ENDPOINT_TIMEOUT) ||
           (status == AXON_ERR_UNREACHABLE) || (status == AXON_ERR_IO_ERROR);
}

/* ---------------------------------------------------------------- send */

/* A finished send: counted, and an entry unless it succeeded without asking for one. */
static void axon_fi_send_entry(axon_fi_ep_t *ep, void *context, uint64_t flags, uint64_t tag,
                               int comp, axon_status_t status)
{
    axon_fi_cntr_count(ep->tx_cntr, status == AXON_OK);
    if (ep->tx_cq == NULL) {
        return;
    }
    if (status == AXON_OK) {
        if (comp) {
            axon_fi_cq_write(ep->tx_cq, context, flags, 0, NULL, 0, 0, 0);
        }
    } else {
        /* Injects too (context NULL): a failed send is never dropped silently. */
        axon_fi_cq_write_err(ep->tx_cq, context, flags, 0, NULL, 0,
                             (flags & FI_TAGGED) ? tag : 0, 0, axon_fi_errno(status), status, 0);
    }
}

static void axon_fi_send_done(axon_request_h req, axon_status_t status, void *user_data)
{
    axon_fi_op_t *op = user_data;
    axon_fi_domain_t *domain = op->domain;

    axon_fi_inflight_del(op);
    if (op->ep != NULL) {
        axon_fi_send_entry(op->ep, op->context, op->flags, op->tag, op->comp, status);
    }
    axon_fi_op_put(domain, op);
}

typedef struct {
    const struct iovec *iov;
    size_t      count;
    size_t      len;
    fi_addr_t   dest;
    uint64_t    tag;
    uint64_t    data;
    void       *context;
    uint64_t    cq_flags;
    uint8_t     has_data;
    uint8_t     inject;
    uint8_t     comp;
    uint8_t     sync;
} axon_fi_send_t;

static ssize_t axon_fi_send(axon_fi_ep_t *ep, const axon_fi_send_t *send)
{
    axon_fi_domain_t *domain = ep->domain;
    axon_request_param_t param;
    axon_fi_conn_t *conn;
    axon_request_h req;
    axon_status_t status;
    axon_fi_op_t *op;
    const void *buf;
    ssize_t ret = 0;

    if (AXON_FI_UNLIKELY(send->inject && (send->len > AXON_FI_INJECT_SIZE))) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "inject of %zu bytes exceeds inject_size %d", send->len,
                     AXON_FI_INJECT_SIZE);
        return -FI_EMSGSIZE;
    }
    axon_fi_lock(domain);
    status = axon_fi_conn_get(ep, send->dest, &conn);
    if (AXON_FI_UNLIKELY(status != AXON_OK)) {
        if (status == AXON_ERR_INVALID_ADDR) {
            ret = -FI_EINVAL;   /* not in the AV: logged */
        } else if (status == AXON_ERR_NO_MEMORY) {
            ret = -FI_ENOMEM;
        } else {
            /* The peer cannot be reached: the send completes, in error. */
            axon_fi_send_entry(ep, send->context, send->cq_flags, send->tag, send->comp,
                               status);
        }
        goto out;
    }
    op = axon_fi_op_get(domain);
    if (op == NULL) {
        ret = -FI_EAGAIN;
        goto out;
    }
    op->domain  = domain;
    op->ep      = ep;
    op->context = send->context;
    op->flags   = send->cq_flags;
    op->tag     = send->tag;
    op->comp    = send->comp;
    axon_fi_op_iov(op, send->iov, send->count, send->len);
    buf         = (op->layout != NULL) ? NULL : op->buf;

    /* Inject: Axon copies the data (packed) only if the send cannot leave inside the call. */
    param.flags     = (send->has_data ? AXON_REQ_FLAG_IMM_DATA : 0) |
                      (send->inject ? AXON_REQ_FLAG_INJECT : 0) |
                      ((op->layout != NULL) ? AXON_REQ_FLAG_LAYOUT : 0);
    param.layout    = op->layout;
    param.imm_data  = (uint32_t)send->data;
    param.cb.send   = axon_fi_send_done;
    param.user_data = op;
    param.recv_info = NULL;
    param.sender_id = AXON_SENDER_ANY;
    status = send->sync ?
             axon_tag_send_sync_nb(conn->aep, buf, send->len, send->tag, &param, &req) :
             axon_tag_send_nb(conn->aep, buf, send->len, send->tag, &param, &req);
    if (status == AXON_INPROGRESS) {
        axon_fi_inflight_add(ep, op);
        axon_request_free(req);   /* the callback still comes */
        goto out;
    }
    if ((status == AXON_OK) || axon_fi_is_peer_error(status)) {
        axon_fi_send_entry(ep, send->context, send->cq_flags, send->tag, send->comp, status);
    } else {
        if (status == AXON_ERR_NO_RESOURCE) {
            axon_worker_progress(ep->worker);
        } else {
            AXON_FI_WARN(FI_LOG_EP_DATA, "send of %zu bytes to fi_addr %llu failed: %s",
                         send->len, (unsigned long long)send->dest, axon_status_string(status));
        }
        ret = -axon_fi_errno(status);
    }
    axon_fi_op_put(domain, op);
out:
    axon_fi_unlock(domain);
    return ret;
}

ssize_t axon_fi_sendv_common(axon_fi_ep_t *ep, uint64_t cq_flags, const struct iovec *iov,
                             size_t count, fi_addr_t dest, uint64_t tag, uint64_t data,
                             int has_data, void *context, uint64_t flags, int comp)
{
    axon_fi_send_t send = {
        .iov      = iov,
        .count    = count,
        .dest     = dest,
        .tag      = tag,
        .data     = data,
        .context  = context,
        .cq_flags = cq_flags,
        .has_data = (uint8_t)has_data,
        .inject   = (flags & FI_INJECT) != 0,
        .comp     = (uint8_t)comp,
        .sync     = (flags & FI_DELIVERY_COMPLETE) != 0,
    };
    int ret = axon_fi_iov_size(iov, count, &send.len);

    if (has_data && (data >> (8 * AXON_FI_CQ_DATA_SIZE))) {   /* never cut silently */
        AXON_FI_WARN(FI_LOG_EP_DATA, "remote CQ data 0x%llx does not fit cq_data_size %d",
                     (unsigned long long)data, AXON_FI_CQ_DATA_SIZE);
        return -FI_EINVAL;
    }
    return (ret != 0) ? ret : axon_fi_send(ep, &send);
}

ssize_t axon_fi_send_common(axon_fi_ep_t *ep, uint64_t cq_flags, const void *buf, size_t len,
                            fi_addr_t dest, uint64_t tag, uint64_t data, int has_data,
                            void *context, uint64_t flags, int comp)
{
    struct iovec iov = {(void *)buf, len};

    return axon_fi_sendv_common(ep, cq_flags, &iov, 1, dest, tag, data, has_data, context,
                                flags, comp);
}

/* ---------------------------------------------------------------- receive */

void axon_fi_recv_entry(axon_fi_ep_t *ep, axon_fi_op_t *op, axon_status_t status,
                        const axon_tag_recv_info_t *info, uint64_t extra_flags)
{
    uint64_t flags  = op->flags | extra_flags;
    uint64_t tag    = (flags & FI_TAGGED) ? op->tag : 0;
    uint64_t data   = 0, sender = 0;
    size_t avail    = op->len - op->used;
    void *buf       = (op->buf != NULL) ? (uint8_t *)op->buf + op->used : NULL;
    int ok          = (status == AXON_OK) || (op->discard && (status == AXON_ERR_MSG_TRUNCATED));

    axon_fi_cntr_count(ep->rx_cntr, ok);
    if (ep->rx_cq == NULL) {
        return;
    }
    if ((info != NULL) && (status != AXON_ERR_CANCELED)) {
        if (info->flags & AXON_TAG_INFO_IMM_DATA) {
            flags |= FI_REMOTE_CQ_DATA;
            data   = info->imm_data;
        }
        tag    = (flags & FI_TAGGED) ? info->sender_tag : 0;
        sender = info->sender_id;
    }
    if (ok) {
        if (op->comp || (extra_flags & FI_MULTI_RECV)) {
            axon_fi_cq_write(ep->rx_cq, op->context, flags, op->discard ? 0 : info->length,
                             op->discard ? NULL : buf, data, tag, sender);
        }
    } else if ((status == AXON_ERR_MSG_TRUNCATED) && (info != NULL)) {
        axon_fi_cq_write_err(ep->rx_cq, op->context, flags, avail, buf, data, tag,
                             info->length - avail, FI_ETRUNC, status, sender);
    } else {
        axon_fi_cq_write_err(ep->rx_cq, op->context, flags, 0, buf, 0, tag, 0,
                             axon_fi_errno(status), status, 0);
    }
}

static void axon_fi_recv_done(axon_request_h req, axon_status_t status,
                              const axon_tag_recv_info_t *info, void *user_data)
{
    axon_fi_op_t *op = user_data;

    axon_fi_inflight_del(op);
    axon_request_free(req);
    if (op->ep != NULL) {
        axon_fi_recv_entry(op->ep, op, status, info, 0);
    }
    axon_fi_op_put(op->domain, op);
}

axon_fi_op_t *axon_fi_recv_op(axon_fi_ep_t *ep, void *buf, size_t len, uint64_t tag,
                              uint64_t cq_flags, void *context, int comp)
{
    axon_fi_op_t *op = axon_fi_op_get(ep->domain);

    if (op != NULL) {
        op->domain  = ep->domain;
        op->ep      = ep;
        op->context = context;
        op->buf     = buf;
        op->len     = len;
        op->tag     = tag;
        op->flags   = cq_flags;
        op->comp    = (uint8_t)comp;
    }
    return op;
}

void axon_fi_recv_param(axon_fi_op_t *op, axon_tag_recv_callback_t cb,
                        axon_tag_recv_info_t *info, axon_request_param_t *param)
{
    param->flags     = ((op->sender != AXON_SENDER_ANY) ? AXON_REQ_FLAG_SENDER : 0) |
                       ((op->layout != NULL) ? AXON_REQ_FLAG_LAYOUT : 0);
    param->layout    = op->layout;
    param->imm_data  = 0;
    param->cb.recv   = cb;
    param->user_data = op;
    param->recv_info = info;
    param->sender_id = op->sender;
}

ssize_t axon_fi_recv_start(axon_fi_ep_t *ep, axon_fi_op_t *op, uint64_t mask)
{
    axon_fi_domain_t *domain = ep->domain;
    axon_request_param_t param;
    axon_tag_recv_info_t info;
    axon_request_h req;
    axon_status_t status;
    void *buf;

    if (op->discard) {
        op->layout = NULL;   /* receives into nothing */
    }
    axon_fi_recv_param(op, axon_fi_recv_done, &info, &param);
    buf = (op->layout != NULL) ? NULL : op->buf;   /* a layout's pieces are addresses */
    if (op->msg != NULL) {
        status = axon_tag_msg_recv_nb(ep->worker, op->discard ? NULL : buf,
                                      op->discard ? 0 : op->len, op->msg, &param, &req);
        op->msg = NULL;
    } else {
        status = axon_tag_recv_nb(ep->worker, buf, op->len, op->tag, mask, &param, &req);
    }
    if (status == AXON_INPROGRESS) {
        op->req = req;
        axon_fi_inflight_add(ep, op);
        return 0;
    }
    if (status == AXON_OK) {
        axon_fi_recv_entry(ep, op, AXON_OK, &info, 0);
        axon_fi_op_put(domain, op);
        return 0;
    }
    if (status == AXON_ERR_NO_RESOURCE) {
        axon_worker_progress(ep->worker);
    } else {
        AXON_FI_WARN(FI_LOG_EP_DATA, "receive of %zu bytes failed: %s", op->len,
                     axon_status_string(status));
    }
    axon_fi_op_put(domain, op);
    return -axon_fi_errno(status);
}

int axon_fi_recv_sender(axon_fi_ep_t *ep, fi_addr_t src, uint64_t *sender)
{
    axon_fi_peer_t *peer;

    *sender = AXON_SENDER_ANY;
    if ((src == FI_ADDR_UNSPEC) || !(ep->caps & FI_DIRECTED_RECV)) {
        return 0;
    }
    peer = (ep->av != NULL) ? axon_fi_av_peer(ep->av, src) : NULL;
    if (peer == NULL) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "receive from fi_addr %llu, which is not in the AV",
                     (unsigned long long)src);
        return -FI_EINVAL;
    }
    if ((peer->id == 0) && (axon_fi_av_resolve(ep->av, peer) != AXON_OK)) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "receive from fi_addr %llu: its worker cannot be reached",
                     (unsigned long long)src);
        return -FI_EHOSTUNREACH;
    }
    *sender = peer->id;
    return 0;
}
