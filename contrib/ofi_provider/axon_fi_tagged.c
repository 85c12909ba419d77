/*
 * Tagged messaging: each call is one Axon tag call; Axon matches. The
 * request callbacks turn completions into CQ entries (op_context = the
 * user's context). fi_tsenddata's data travels as Axon imm_data; a directed
 * receive passes the source's worker id (AXON_REQ_FLAG_SENDER); ignore bits
 * become the mask ~ignore. Op descriptors come from the domain's free list.
 */
#include <string.h>
#include "axon_fi.h"

#define AXON_FI_RECV_FLAGS (FI_TAGGED | FI_RECV)
#define AXON_FI_SEND_FLAGS (FI_TAGGED | FI_SEND)

static inline void axon_fi_inflight_add(axon_fi_ep_t *ep, axon_fi_op_t *op)
{
    op->next = &ep->inflight;
    op->prev = ep->inflight.prev;
    ep->inflight.prev->next = op;
    ep->inflight.prev = op;
    op->posted = 1;
}

static inline void axon_fi_inflight_del(axon_fi_op_t *op)
{
    if (op->posted) {
        op->next->prev = op->prev;
        op->prev->next = op->next;
        op->posted = 0;
    }
}

/* Errors a peer causes are reported as completions; the rest fail the call. */
static inline int axon_fi_is_peer_error(axon_status_t status)
{
    return (status == AXON_ERR_CONNECTION_RESET) || (status == AXON_ERR_ENDPOINT_TIMEOUT) ||
           (status == AXON_ERR_UNREACHABLE) || (status == AXON_ERR_IO_ERROR);
}

/* ---------------------------------------------------------------- callbacks */

static void axon_fi_send_done(axon_request_h req, axon_status_t status, void *user_data)
{
    axon_fi_op_t *op = user_data;
    axon_fi_domain_t *domain = op->domain;
    axon_fi_ep_t *ep = op->ep;

    axon_fi_inflight_del(op);
    if (op->bounce != NULL) {
        axon_fi_bounce_put(domain, op->bounce);
    }
    if ((ep != NULL) && (ep->tx_cq != NULL)) {
        if (status == AXON_OK) {
            if (op->comp) {
                axon_fi_cq_write(ep->tx_cq, op->context, op->flags, 0, NULL, 0, 0, 0);
            }
        } else if (op->context != NULL || op->comp) {
            axon_fi_cq_write_err(ep->tx_cq, op->context, op->flags, 0, NULL, 0, op->tag, 0,
                                 axon_fi_errno(status), status, 0);
        } else {
            AXON_FI_WARN(FI_LOG_EP_DATA, "inject to a peer failed: %s",
                         axon_status_string(status));
        }
    }
    axon_fi_op_put(domain, op);
}

static void axon_fi_recv_entry(axon_fi_ep_t *ep, axon_fi_op_t *op, axon_status_t status,
                               const axon_tag_recv_info_t *info)
{
    uint64_t flags = op->flags;
    uint64_t data  = 0;
    size_t len;

    if (ep->rx_cq == NULL) {
        return;
    }
    if ((status != AXON_ERR_CANCELED) && (info->flags & AXON_TAG_INFO_IMM_DATA)) {
        flags |= FI_REMOTE_CQ_DATA;
        data   = info->imm_data;
    }
    if ((status == AXON_OK) || (op->discard && (status == AXON_ERR_MSG_TRUNCATED))) {
        if (op->comp) {
            len = op->discard ? 0 : info->length;
            axon_fi_cq_write(ep->rx_cq, op->context, flags, len, op->discard ? NULL : op->buf,
                             data, info->sender_tag, info->sender_id);
        }
    } else if (status == AXON_ERR_MSG_TRUNCATED) {
        axon_fi_cq_write_err(ep->rx_cq, op->context, flags, op->len, op->buf, data,
                             info->sender_tag, info->length - op->len, FI_ETRUNC, status,
                             info->sender_id);
    } else if (status == AXON_ERR_CANCELED) {
        axon_fi_cq_write_err(ep->rx_cq, op->context, flags, 0, op->buf, 0, op->tag, 0,
                             FI_ECANCELED, status, 0);
    } else {
        axon_fi_cq_write_err(ep->rx_cq, op->context, flags, 0, op->buf, 0, op->tag, 0,
                             axon_fi_errno(status), status, 0);
    }
}

static void axon_fi_recv_done(axon_request_h req, axon_status_t status,
                              const axon_tag_recv_info_t *info, void *user_data)
{
    axon_fi_op_t *op = user_data;

    axon_fi_inflight_del(op);
    if (op->ep != NULL) {
        axon_fi_recv_entry(op->ep, op, status, info);
    }
    axon_request_free(req);
    axon_fi_op_put(op->domain, op);
}

/* ---------------------------------------------------------------- send */

static ssize_t axon_fi_tsend_common(axon_fi_ep_t *ep, const void *buf, size_t len,
                                    fi_addr_t dest, uint64_t tag, uint64_t data, int has_data,
                                    void *context, int inject, int comp)
{
    axon_fi_domain_t *domain = ep->domain;
    axon_request_param_t param;
    axon_fi_peer_t *peer;
    axon_request_h req;
    axon_status_t status;
    axon_fi_op_t *op;
    const void *src = buf;
    ssize_t ret = 0;

    axon_fi_lock(domain);
    peer = (ep->av != NULL) ? axon_fi_av_peer(ep->av, dest) : NULL;
    if (peer == NULL) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "send to fi_addr %llu, which is not in the AV",
                     (unsigned long long)dest);
        ret = -FI_EINVAL;
        goto out;
    }
    op = axon_fi_op_get(domain);
    if (op == NULL) {
        ret = -FI_EAGAIN;
        goto out;
    }
    op->domain  = domain;
    op->ep      = ep;
    op->context = context;
    op->flags   = AXON_FI_SEND_FLAGS;
    op->tag     = tag;
    op->comp    = (uint8_t)comp;
    if (inject && (len > 0)) {
        if (len > AXON_FI_INJECT_SIZE) {
            axon_fi_op_put(domain, op);
            AXON_FI_WARN(FI_LOG_EP_DATA, "inject of %zu bytes exceeds inject_size %d", len,
                         AXON_FI_INJECT_SIZE);
            ret = -FI_EMSGSIZE;
            goto out;
        }
        op->bounce = axon_fi_bounce_get(domain);
        if (op->bounce == NULL) {
            axon_fi_op_put(domain, op);
            ret = -FI_EAGAIN;
            goto out;
        }
        memcpy(op->bounce, buf, len);
        src = op->bounce;
    }

    param.flags     = has_data ? AXON_REQ_FLAG_IMM_DATA : 0;
    param.imm_data  = (uint32_t)data;
    param.cb.send   = axon_fi_send_done;
    param.user_data = op;
    param.recv_info = NULL;
    param.sender_id = AXON_SENDER_ANY;
    status = axon_tag_send_nb(peer->ep, src, len, tag, &param, &req);
    if (status == AXON_INPROGRESS) {
        axon_fi_inflight_add(ep, op);
        axon_request_free(req);   /* the callback still comes */
        goto out;
    }
    if (op->bounce != NULL) {
        axon_fi_bounce_put(domain, op->bounce);
    }
    if (status == AXON_OK) {
        if (comp && (ep->tx_cq != NULL)) {
            axon_fi_cq_write(ep->tx_cq, context, AXON_FI_SEND_FLAGS, 0, NULL, 0, 0, 0);
        }
    } else if (axon_fi_is_peer_error(status) && !(inject && !comp) && (ep->tx_cq != NULL)) {
        axon_fi_cq_write_err(ep->tx_cq, context, AXON_FI_SEND_FLAGS, 0, NULL, 0, tag, 0,
                             axon_fi_errno(status), status, 0);
    } else {
        if (status == AXON_ERR_NO_RESOURCE) {
            axon_worker_progress(domain->worker);
        } else {
            AXON_FI_WARN(FI_LOG_EP_DATA, "send of %zu bytes to fi_addr %llu failed: %s", len,
                         (unsigned long long)dest, axon_status_string(status));
        }
        ret = -axon_fi_errno(status);
    }
    axon_fi_op_put(domain, op);
out:
    axon_fi_unlock(domain);
    return ret;
}

static ssize_t axon_fi_tsend(struct fid_ep *ep_fid, const void *buf, size_t len, void *desc,
                             fi_addr_t dest, uint64_t tag, void *context)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);

    return axon_fi_tsend_common(ep, buf, len, dest, tag, 0, 0, context,
                                (ep->tx_op_flags & FI_INJECT) != 0, ep->tx_comp);
}

static ssize_t axon_fi_tsendv(struct fid_ep *ep_fid, const struct iovec *iov, void **desc,
                              size_t count, fi_addr_t dest, uint64_t tag, void *context)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);

    if (count > 1) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "iov count %zu exceeds iov_limit 1", count);
        return -FI_EINVAL;
    }
    return axon_fi_tsend_common(ep, count ? iov[0].iov_base : NULL, count ? iov[0].iov_len : 0,
                                dest, tag, 0, 0, context, (ep->tx_op_flags & FI_INJECT) != 0,
                                ep->tx_comp);
}

static ssize_t axon_fi_tsendmsg(struct fid_ep *ep_fid, const struct fi_msg_tagged *msg,
                                uint64_t flags)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);
    int comp = !ep->tx_selective || (flags & FI_COMPLETION);

    if (msg->iov_count > 1) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "iov count %zu exceeds iov_limit 1", msg->iov_count);
        return -FI_EINVAL;
    }
    return axon_fi_tsend_common(ep, msg->iov_count ? msg->msg_iov[0].iov_base : NULL,
                                msg->iov_count ? msg->msg_iov[0].iov_len : 0, msg->addr,
                                msg->tag, msg->data, (flags & FI_REMOTE_CQ_DATA) != 0,
                                msg->context, (flags & FI_INJECT) != 0, comp);
}

static ssize_t axon_fi_tinject(struct fid_ep *ep_fid, const void *buf, size_t len,
                               fi_addr_t dest, uint64_t tag)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);

    return axon_fi_tsend_common(ep, buf, len, dest, tag, 0, 0, NULL, 1, 0);
}

static ssize_t axon_fi_tsenddata(struct fid_ep *ep_fid, const void *buf, size_t len, void *desc,
                                 uint64_t data, fi_addr_t dest, uint64_t tag, void *context)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);

    return axon_fi_tsend_common(ep, buf, len, dest, tag, data, 1, context,
                                (ep->tx_op_flags & FI_INJECT) != 0, ep->tx_comp);
}

static ssize_t axon_fi_tinjectdata(struct fid_ep *ep_fid, const void *buf, size_t len,
                                   uint64_t data, fi_addr_t dest, uint64_t tag)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);

    return axon_fi_tsend_common(ep, buf, len, dest, tag, data, 1, NULL, 1, 0);
}

/* ---------------------------------------------------------------- receive */

/* The sender a receive or peek is restricted to; AXON_SENDER_ANY for any. */
static int axon_fi_recv_sender(axon_fi_ep_t *ep, fi_addr_t src, uint64_t *sender)
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
    *sender = peer->peer_id;
    return 0;
}

/* Start a receive (or a claimed message's receive) described by op. */
static ssize_t axon_fi_recv_start(axon_fi_ep_t *ep, axon_fi_op_t *op, uint64_t sender,
                                  uint64_t tag, uint64_t ignore)
{
    axon_fi_domain_t *domain = ep->domain;
    axon_request_param_t param;
    axon_tag_recv_info_t info;
    axon_request_h req;
    axon_status_t status;

    param.flags     = (sender != AXON_SENDER_ANY) ? AXON_REQ_FLAG_SENDER : 0;
    param.imm_data  = 0;
    param.cb.recv   = axon_fi_recv_done;
    param.user_data = op;
    param.recv_info = &info;
    param.sender_id = sender;
    if (op->msg != NULL) {
        status = axon_tag_msg_recv_nb(domain->worker, op->discard ? NULL : op->buf,
                                      op->discard ? 0 : op->len, op->msg, &param, &req);
        op->msg = NULL;
    } else {
        status = axon_tag_recv_nb(domain->worker, op->buf, op->len, tag, ~ignore, &param, &req);
    }
    if (status == AXON_INPROGRESS) {
        op->req = req;
        axon_fi_inflight_add(ep, op);
        return 0;
    }
    if (status == AXON_OK) {
        axon_fi_recv_entry(ep, op, AXON_OK, &info);
        axon_fi_op_put(domain, op);
        return 0;
    }
    if (status == AXON_ERR_NO_RESOURCE) {
        axon_worker_progress(domain->worker);
    } else {
        AXON_FI_WARN(FI_LOG_EP_DATA, "receive of %zu bytes failed: %s", op->len,
                     axon_status_string(status));
    }
    axon_fi_op_put(domain, op);
    return -axon_fi_errno(status);
}

static axon_fi_op_t *axon_fi_recv_op(axon_fi_ep_t *ep, void *buf, size_t len, uint64_t tag,
                                     void *context, int comp)
{
    axon_fi_op_t *op = axon_fi_op_get(ep->domain);

    if (op != NULL) {
        op->domain  = ep->domain;
        op->ep      = ep;
        op->context = context;
        op->buf     = buf;
        op->len     = len;
        op->tag     = tag;
        op->flags   = AXON_FI_RECV_FLAGS;
        op->comp    = (uint8_t)comp;
    }
    return op;
}

static ssize_t axon_fi_trecv_common(axon_fi_ep_t *ep, void *buf, size_t len, fi_addr_t src,
                                    uint64_t tag, uint64_t ignore, void *context, int comp)
{
    axon_fi_domain_t *domain = ep->domain;
    uint64_t sender;
    axon_fi_op_t *op;
    ssize_t ret;

    axon_fi_lock(domain);
    ret = axon_fi_recv_sender(ep, src, &sender);
    if (ret == 0) {
        op  = axon_fi_recv_op(ep, buf, len, tag, context, comp);
        ret = (op != NULL) ? axon_fi_recv_start(ep, op, sender, tag, ignore) : -FI_EAGAIN;
    }
    axon_fi_unlock(domain);
    return ret;
}

static ssize_t axon_fi_trecv(struct fid_ep *ep_fid, void *buf, size_t len, void *desc,
                             fi_addr_t src, uint64_t tag, uint64_t ignore, void *context)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);

    return axon_fi_trecv_common(ep, buf, len, src, tag, ignore, context, ep->rx_comp);
}

static ssize_t axon_fi_trecvv(struct fid_ep *ep_fid, const struct iovec *iov, void **desc,
                              size_t count, fi_addr_t src, uint64_t tag, uint64_t ignore,
                              void *context)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);

    if (count > 1) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "iov count %zu exceeds iov_limit 1", count);
        return -FI_EINVAL;
    }
    return axon_fi_trecv_common(ep, count ? iov[0].iov_base : NULL, count ? iov[0].iov_len : 0,
                                src, tag, ignore, context, ep->rx_comp);
}

/* FI_PEEK [| FI_CLAIM | FI_DISCARD]: look at the unexpected messages now. */
static ssize_t axon_fi_tpeek(axon_fi_ep_t *ep, const struct fi_msg_tagged *msg, uint64_t flags,
                             uint64_t sender, int comp)
{
    axon_fi_domain_t *domain = ep->domain;
    int remove = (flags & (FI_CLAIM | FI_DISCARD)) != 0;
    axon_tag_message_h message = NULL;
    axon_tag_recv_info_t info;
    axon_status_t status;
    axon_fi_op_t *op;
    uint64_t cq_flags;

    if (ep->rx_cq == NULL) {
        return -FI_ENOCQ;
    }
    axon_worker_progress(domain->worker);   /* let arrivals in first */
    status = axon_tag_probe_from_nb(domain->worker, sender, msg->tag, ~msg->ignore, remove,
                                    &info, &message);
    if (status == AXON_ERR_NO_MESSAGE) {
        axon_fi_cq_write_err(ep->rx_cq, msg->context, AXON_FI_RECV_FLAGS, 0, NULL, 0, msg->tag,
                             0, FI_ENOMSG, status, 0);
        return 0;
    }
    if (status != AXON_OK) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "peek failed: %s", axon_status_string(status));
        return -axon_fi_errno(status);
    }
    if (remove) {
        op = axon_fi_recv_op(ep, NULL, 0, msg->tag, msg->context, 0);
        if (op == NULL) {
            return -FI_ENOMEM;   /* the message stays claimed by nobody: rare, logged by Axon */
        }
        op->msg = message;
        if (flags & FI_DISCARD) {
            op->discard = 1;     /* receive it into nothing; the peek's entry below reports it */
            axon_fi_recv_start(ep, op, AXON_SENDER_ANY, 0, 0);
        } else {
            op->next = &ep->claimed;   /* until the FI_CLAIM receive with this context */
            op->prev = ep->claimed.prev;
            ep->claimed.prev->next = op;
            ep->claimed.prev = op;
        }
    }
    if (comp) {
        cq_flags = AXON_FI_RECV_FLAGS;
        if (info.flags & AXON_TAG_INFO_IMM_DATA) {
            cq_flags |= FI_REMOTE_CQ_DATA;
        }
        axon_fi_cq_write(ep->rx_cq, msg->context, cq_flags, info.length, NULL, info.imm_data,
                         info.sender_tag, info.sender_id);
    }
    return 0;
}

/* FI_CLAIM [| FI_DISCARD]: receive the message an earlier FI_PEEK | FI_CLAIM took. */
static ssize_t axon_fi_tclaim(axon_fi_ep_t *ep, const struct fi_msg_tagged *msg, uint64_t flags,
                              int comp)
{
    axon_fi_op_t *op;

    for (op = ep->claimed.next; op != &ep->claimed; op = op->next) {
        if (op->context == msg->context) {
            break;
        }
    }
    if (op == &ep->claimed) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "FI_CLAIM with context %p, which claimed no message",
                     msg->context);
        return -FI_EINVAL;
    }
    op->next->prev = op->prev;
    op->prev->next = op->next;
    op->buf     = msg->iov_count ? msg->msg_iov[0].iov_base : NULL;
    op->len     = msg->iov_count ? msg->msg_iov[0].iov_len : 0;
    op->discard = (flags & FI_DISCARD) != 0;
    op->comp    = (uint8_t)comp;
    return axon_fi_recv_start(ep, op, AXON_SENDER_ANY, 0, 0);
}

static ssize_t axon_fi_trecvmsg(struct fid_ep *ep_fid, const struct fi_msg_tagged *msg,
                                uint64_t flags)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);
    axon_fi_domain_t *domain = ep->domain;
    int comp = !ep->rx_selective || (flags & FI_COMPLETION);
    uint64_t sender;
    axon_fi_op_t *op;
    ssize_t ret;

    if (msg->iov_count > 1) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "iov count %zu exceeds iov_limit 1", msg->iov_count);
        return -FI_EINVAL;
    }
    axon_fi_lock(domain);
    if (flags & FI_PEEK) {
        ret = axon_fi_recv_sender(ep, msg->addr, &sender);
        if (ret == 0) {
            ret = axon_fi_tpeek(ep, msg, flags, sender, comp);
        }
    } else if (flags & FI_CLAIM) {
        ret = axon_fi_tclaim(ep, msg, flags, comp);
    } else if ((ret = axon_fi_recv_sender(ep, msg->addr, &sender)) == 0) {
        op  = axon_fi_recv_op(ep, msg->iov_count ? msg->msg_iov[0].iov_base : NULL,
                              msg->iov_count ? msg->msg_iov[0].iov_len : 0, msg->tag,
                              msg->context, comp);
        ret = (op != NULL) ? axon_fi_recv_start(ep, op, sender, msg->tag, msg->ignore) :
                             -FI_EAGAIN;
    }
    axon_fi_unlock(domain);
    return ret;
}

struct fi_ops_tagged axon_fi_tagged_ops = {
    .size       = sizeof(struct fi_ops_tagged),
    .recv       = axon_fi_trecv,
    .recvv      = axon_fi_trecvv,
    .recvmsg    = axon_fi_trecvmsg,
    .send       = axon_fi_tsend,
    .sendv      = axon_fi_tsendv,
    .sendmsg    = axon_fi_tsendmsg,
    .inject     = axon_fi_tinject,
    .senddata   = axon_fi_tsenddata,
    .injectdata = axon_fi_tinjectdata,
};
