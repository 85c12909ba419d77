/*
 * Tagged messaging (fi_tsend, fi_trecv, ...): each call is one Axon tag
 * call (axon_fi_xfer.c); Axon matches. fi_tsenddata's data travels as Axon
 * imm_data; a directed receive passes the source's worker id
 * (AXON_REQ_FLAG_SENDER); ignore bits become the mask ~ignore. On an
 * endpoint that also has FI_MSG, tag bit 63 is untagged messages' (the
 * advertised mem_tag_format leaves it out): receives always match it clear.
 */
#include <string.h>
#include "axon_fi.h"

#define AXON_FI_RECV_FLAGS (FI_TAGGED | FI_RECV)
#define AXON_FI_SEND_FLAGS (FI_TAGGED | FI_SEND)

/* ---------------------------------------------------------------- send */

static ssize_t axon_fi_tsendv_common(axon_fi_ep_t *ep, const struct iovec *iov, size_t count,
                                     fi_addr_t dest, uint64_t tag, uint64_t data, int has_data,
                                     void *context, uint64_t flags, int comp)
{
    if (AXON_FI_UNLIKELY(tag & ep->tag_reserved)) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "tag 0x%llx uses bit 63, which untagged messages take on "
                     "an endpoint with FI_MSG", (unsigned long long)tag);
        return -FI_EINVAL;
    }
    return axon_fi_sendv_common(ep, AXON_FI_SEND_FLAGS, iov, count, dest, tag, data, has_data,
                                context, flags, comp);
}

static ssize_t axon_fi_tsend_common(axon_fi_ep_t *ep, const void *buf, size_t len,
                                    fi_addr_t dest, uint64_t tag, uint64_t data, int has_data,
                                    void *context, uint64_t flags, int comp)
{
    struct iovec iov = {(void *)buf, len};

    return axon_fi_tsendv_common(ep, &iov, 1, dest, tag, data, has_data, context, flags, comp);
}

static ssize_t axon_fi_tsend(struct fid_ep *ep_fid, const void *buf, size_t len, void *desc,
                             fi_addr_t dest, uint64_t tag, void *context)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);

    return axon_fi_tsend_common(ep, buf, len, dest, tag, 0, 0, context, ep->tx_op_flags,
                                ep->tx_comp);
}

static ssize_t axon_fi_tsendv(struct fid_ep *ep_fid, const struct iovec *iov, void **desc,
                              size_t count, fi_addr_t dest, uint64_t tag, void *context)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);

    return axon_fi_tsendv_common(ep, iov, count, dest, tag, 0, 0, context, ep->tx_op_flags,
                                 ep->tx_comp);
}

static ssize_t axon_fi_tsendmsg(struct fid_ep *ep_fid, const struct fi_msg_tagged *msg,
                                uint64_t flags)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);

    return axon_fi_tsendv_common(ep, msg->msg_iov, msg->iov_count, msg->addr, msg->tag,
                                 msg->data, (flags & FI_REMOTE_CQ_DATA) != 0, msg->context,
                                 flags, !ep->tx_selective || (flags & FI_COMPLETION));
}

static ssize_t axon_fi_tinject(struct fid_ep *ep_fid, const void *buf, size_t len,
                               fi_addr_t dest, uint64_t tag)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);

    return axon_fi_tsend_common(ep, buf, len, dest, tag, 0, 0, NULL, FI_INJECT, 0);
}

static ssize_t axon_fi_tsenddata(struct fid_ep *ep_fid, const void *buf, size_t len, void *desc,
                                 uint64_t data, fi_addr_t dest, uint64_t tag, void *context)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);

    return axon_fi_tsend_common(ep, buf, len, dest, tag, data, 1, context, ep->tx_op_flags,
                                ep->tx_comp);
}

static ssize_t axon_fi_tinjectdata(struct fid_ep *ep_fid, const void *buf, size_t len,
                                   uint64_t data, fi_addr_t dest, uint64_t tag)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);

    return axon_fi_tsend_common(ep, buf, len, dest, tag, data, 1, NULL, FI_INJECT, 0);
}

/* ---------------------------------------------------------------- receive */

/* Axon's mask for (tag, ignore): bit 63 must be clear where untagged messages use it. */
static inline uint64_t axon_fi_trecv_mask(const axon_fi_ep_t *ep, uint64_t ignore)
{
    return ~ignore | ep->tag_reserved;
}

static ssize_t axon_fi_trecvv_common(axon_fi_ep_t *ep, const struct iovec *iov, size_t count,
                                     fi_addr_t src, uint64_t tag, uint64_t ignore,
                                     void *context, int comp)
{
    axon_fi_domain_t *domain = ep->domain;
    uint64_t sender;
    axon_fi_op_t *op;
    size_t len;
    ssize_t ret;

    ret = axon_fi_iov_size(iov, count, &len);
    if (ret != 0) {
        return ret;
    }
    axon_fi_lock(domain);
    ret = axon_fi_recv_sender(ep, src, &sender);
    if (ret == 0) {
        op = axon_fi_recv_op(ep, NULL, 0, tag & ~ep->tag_reserved, AXON_FI_RECV_FLAGS, context,
                             comp);
        if (op != NULL) {
            axon_fi_op_iov(op, iov, count, len);
            op->sender = sender;
            ret = axon_fi_recv_start(ep, op, axon_fi_trecv_mask(ep, ignore));
        } else {
            ret = -FI_EAGAIN;
        }
    }
    axon_fi_unlock(domain);
    return ret;
}

static ssize_t axon_fi_trecv(struct fid_ep *ep_fid, void *buf, size_t len, void *desc,
                             fi_addr_t src, uint64_t tag, uint64_t ignore, void *context)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);
    struct iovec iov = {buf, len};

    return axon_fi_trecvv_common(ep, &iov, 1, src, tag, ignore, context, ep->rx_comp);
}

static ssize_t axon_fi_trecvv(struct fid_ep *ep_fid, const struct iovec *iov, void **desc,
                              size_t count, fi_addr_t src, uint64_t tag, uint64_t ignore,
                              void *context)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);

    return axon_fi_trecvv_common(ep, iov, count, src, tag, ignore, context, ep->rx_comp);
}

/* FI_PEEK [| FI_CLAIM | FI_DISCARD]: look at the unexpected messages now. */
static ssize_t axon_fi_tpeek(axon_fi_ep_t *ep, const struct fi_msg_tagged *msg, uint64_t flags,
                             uint64_t sender, int comp)
{
    int remove = (flags & (FI_CLAIM | FI_DISCARD)) != 0;
    axon_tag_message_h message = NULL;
    axon_tag_recv_info_t info;
    axon_status_t status;
    axon_fi_op_t *op;
    uint64_t cq_flags;

    if (ep->rx_cq == NULL) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "FI_PEEK on an endpoint without a receive CQ");
        return -FI_ENOCQ;
    }
    axon_worker_progress(ep->worker);   /* let arrivals in first */
    status = axon_tag_probe_from_nb(ep->worker, sender, msg->tag & ~ep->tag_reserved,
                                    axon_fi_trecv_mask(ep, msg->ignore), remove, &info,
                                    &message);
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
        op = axon_fi_recv_op(ep, NULL, 0, msg->tag, AXON_FI_RECV_FLAGS, msg->context, 0);
        if (op == NULL) {
            return -FI_ENOMEM;   /* the message stays claimed by nobody: rare, logged by Axon */
        }
        op->msg = message;
        if (flags & FI_DISCARD) {
            op->discard = 1;     /* receive it into nothing; the peek's entry below reports it */
            axon_fi_recv_start(ep, op, AXON_TAG_MASK_FULL);
        } else {
            axon_fi_list_add_tail(&ep->claimed, op);   /* until the FI_CLAIM receive */
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
static ssize_t axon_fi_tclaim(axon_fi_ep_t *ep, const struct fi_msg_tagged *msg, size_t len,
                              uint64_t flags, int comp)
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
    axon_fi_list_del(op);
    axon_fi_op_iov(op, msg->msg_iov, msg->iov_count, len);   /* count checked */
    op->discard = (flags & FI_DISCARD) != 0;
    op->comp    = (uint8_t)comp;
    return axon_fi_recv_start(ep, op, AXON_TAG_MASK_FULL);
}

static ssize_t axon_fi_trecvmsg(struct fid_ep *ep_fid, const struct fi_msg_tagged *msg,
                                uint64_t flags)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);
    axon_fi_domain_t *domain = ep->domain;
    int comp = !ep->rx_selective || (flags & FI_COMPLETION);
    uint64_t sender;
    axon_fi_op_t *op;
    size_t len;
    ssize_t ret;

    ret = axon_fi_iov_size(msg->msg_iov, msg->iov_count, &len);
    if (ret != 0) {
        return ret;
    }
    if (flags & FI_MULTI_RECV) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "FI_MULTI_RECV applies to untagged receives only");
        return -FI_EINVAL;
    }
    axon_fi_lock(domain);
    if (flags & FI_PEEK) {
        ret = axon_fi_recv_sender(ep, msg->addr, &sender);
        if (ret == 0) {
            ret = axon_fi_tpeek(ep, msg, flags, sender, comp);
        }
    } else if (flags & FI_CLAIM) {
        ret = axon_fi_tclaim(ep, msg, len, flags, comp);
    } else if ((ret = axon_fi_recv_sender(ep, msg->addr, &sender)) == 0) {
        op = axon_fi_recv_op(ep, NULL, 0, msg->tag & ~ep->tag_reserved, AXON_FI_RECV_FLAGS,
                             msg->context, comp);
        if (op != NULL) {
            axon_fi_op_iov(op, msg->msg_iov, msg->iov_count, len);
            op->sender = sender;
            ret = axon_fi_recv_start(ep, op, axon_fi_trecv_mask(ep, msg->ignore));
        } else {
            ret = -FI_EAGAIN;
        }
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
