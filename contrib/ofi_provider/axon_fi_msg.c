/*
 * Untagged messaging (fi_send, fi_recv, ...): Axon tag messages with the
 * reserved tag AXON_FI_MSG_TAG, received with a full mask, so untagged
 * messages get what tagged ones get from Axon: order per sender, truncation
 * as an error entry with olen, directed receives, CQ data. Receives go
 * through axon_fi_mrecv.c, which keeps them behind a multi-receive buffer
 * that is being filled (FI_MULTI_RECV).
 */
#include "axon_fi.h"

#define AXON_FI_MSG_RECV_FLAGS (FI_MSG | FI_RECV)
#define AXON_FI_MSG_SEND_FLAGS (FI_MSG | FI_SEND)

/* ---------------------------------------------------------------- send */

static ssize_t axon_fi_msg_send_common(axon_fi_ep_t *ep, const void *buf, size_t len,
                                       fi_addr_t dest, uint64_t data, int has_data,
                                       void *context, uint64_t flags, int comp)
{
    return axon_fi_send_common(ep, AXON_FI_MSG_SEND_FLAGS, buf, len, dest, AXON_FI_MSG_TAG,
                               data, has_data, context, flags, comp);
}

static ssize_t axon_fi_msg_sendv_common(axon_fi_ep_t *ep, const struct iovec *iov, size_t count,
                                        fi_addr_t dest, uint64_t data, int has_data,
                                        void *context, uint64_t flags, int comp)
{
    return axon_fi_sendv_common(ep, AXON_FI_MSG_SEND_FLAGS, iov, count, dest, AXON_FI_MSG_TAG,
                                data, has_data, context, flags, comp);
}

static ssize_t axon_fi_msg_send(struct fid_ep *ep_fid, const void *buf, size_t len, void *desc,
                                fi_addr_t dest, void *context)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);

    return axon_fi_msg_send_common(ep, buf, len, dest, 0, 0, context, ep->tx_op_flags,
                                   ep->tx_comp);
}

static ssize_t axon_fi_msg_sendv(struct fid_ep *ep_fid, const struct iovec *iov, void **desc,
                                 size_t count, fi_addr_t dest, void *context)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);

    return axon_fi_msg_sendv_common(ep, iov, count, dest, 0, 0, context, ep->tx_op_flags,
                                    ep->tx_comp);
}

static ssize_t axon_fi_msg_sendmsg(struct fid_ep *ep_fid, const struct fi_msg *msg,
                                   uint64_t flags)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);

    return axon_fi_msg_sendv_common(ep, msg->msg_iov, msg->iov_count, msg->addr, msg->data,
                                    (flags & FI_REMOTE_CQ_DATA) != 0, msg->context, flags,
                                    !ep->tx_selective || (flags & FI_COMPLETION));
}

static ssize_t axon_fi_msg_inject(struct fid_ep *ep_fid, const void *buf, size_t len,
                                  fi_addr_t dest)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);

    return axon_fi_msg_send_common(ep, buf, len, dest, 0, 0, NULL, FI_INJECT, 0);
}

static ssize_t axon_fi_msg_senddata(struct fid_ep *ep_fid, const void *buf, size_t len,
                                    void *desc, uint64_t data, fi_addr_t dest, void *context)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);

    return axon_fi_msg_send_common(ep, buf, len, dest, data, 1, context, ep->tx_op_flags,
                                   ep->tx_comp);
}

static ssize_t axon_fi_msg_injectdata(struct fid_ep *ep_fid, const void *buf, size_t len,
                                      uint64_t data, fi_addr_t dest)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);

    return axon_fi_msg_send_common(ep, buf, len, dest, data, 1, NULL, FI_INJECT, 0);
}

/* ---------------------------------------------------------------- receive */

static ssize_t axon_fi_msg_recv_common(axon_fi_ep_t *ep, const struct iovec *iov, size_t count,
                                       fi_addr_t src, void *context, uint64_t flags, int comp)
{
    axon_fi_domain_t *domain = ep->domain;
    int multi = (flags & FI_MULTI_RECV) != 0;
    uint64_t sender;
    axon_fi_op_t *op;
    size_t len;
    ssize_t ret;

    ret = axon_fi_iov_size(iov, count, &len);
    if (ret != 0) {
        return ret;
    }
    if (multi && !(ep->caps & FI_MULTI_RECV)) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "FI_MULTI_RECV receive on an endpoint without the "
                     "FI_MULTI_RECV capability");
        return -FI_EINVAL;
    }
    if (multi && (count > 1)) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "FI_MULTI_RECV buffer of %zu iovecs: it must be one",
                     count);
        return -FI_EINVAL;
    }
    axon_fi_lock(domain);
    ret = axon_fi_recv_sender(ep, src, &sender);
    if (ret == 0) {
        op = axon_fi_recv_op(ep, NULL, 0, AXON_FI_MSG_TAG, AXON_FI_MSG_RECV_FLAGS, context,
                             comp);
        if (op != NULL) {
            axon_fi_op_iov(op, iov, count, len);
            op->sender = sender;
            ret = axon_fi_mrecv_post(ep, op, multi);
        } else {
            ret = -FI_EAGAIN;
        }
    }
    axon_fi_unlock(domain);
    return ret;
}

static ssize_t axon_fi_msg_recv(struct fid_ep *ep_fid, void *buf, size_t len, void *desc,
                                fi_addr_t src, void *context)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);
    struct iovec iov = {buf, len};

    return axon_fi_msg_recv_common(ep, &iov, 1, src, context, ep->rx_op_flags, ep->rx_comp);
}

static ssize_t axon_fi_msg_recvv(struct fid_ep *ep_fid, const struct iovec *iov, void **desc,
                                 size_t count, fi_addr_t src, void *context)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);

    return axon_fi_msg_recv_common(ep, iov, count, src, context, ep->rx_op_flags, ep->rx_comp);
}

static ssize_t axon_fi_msg_recvmsg(struct fid_ep *ep_fid, const struct fi_msg *msg,
                                   uint64_t flags)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);

    return axon_fi_msg_recv_common(ep, msg->msg_iov, msg->iov_count, msg->addr, msg->context,
                                   flags, !ep->rx_selective || (flags & FI_COMPLETION));
}

struct fi_ops_msg axon_fi_msg_ops = {
    .size       = sizeof(struct fi_ops_msg),
    .recv       = axon_fi_msg_recv,
    .recvv      = axon_fi_msg_recvv,
    .recvmsg    = axon_fi_msg_recvmsg,
    .send       = axon_fi_msg_send,
    .sendv      = axon_fi_msg_sendv,
    .sendmsg    = axon_fi_msg_sendmsg,
    .inject     = axon_fi_msg_inject,
    .senddata   = axon_fi_msg_senddata,
    .injectdata = axon_fi_msg_injectdata,
};
