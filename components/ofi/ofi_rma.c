/* ofi get and put: fi_read / fi_write through keys the peer's domain packed (ofi_md.c). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include "ofi.h"

/*
 * fi_write whose completion means the data is in the target's memory
 * (FI_DELIVERY_COMPLETE). By default a software provider completes a write
 * once it left the socket, and the target applies it only when it next
 * progresses: a flushed put would not yet be visible to the target.
 */
static ssize_t axon_ofi_write(axon_ofi_iface_t *iface, axon_ofi_ep_t *ep, void *buffer,
                              size_t length, void *desc, uint64_t addr, uint64_t key,
                              axon_ofi_op_t *op)
{
    struct iovec       iov = {.iov_base = buffer, .iov_len = length};
    struct fi_rma_iov  rma = {.addr = addr, .len = length, .key = key};
    struct fi_msg_rma  msg = {
        .msg_iov       = &iov,
        .desc          = &desc,
        .iov_count     = 1,
        .addr          = ep->addr,
        .rma_iov       = &rma,
        .rma_iov_count = 1,
        .context       = &op->fi_ctx,
    };

    return fi_writemsg(iface->ep, &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE);
}

/*
 * Post one fi_read (get) or fi_write (put). AXON_ERR_UNSUPPORTED when this
 * one cannot go now (no operation free, the provider busy, no key): the
 * caller then moves the data by active messages.
 */
static axon_status_t axon_ofi_rma(axon_ofi_ep_t *ep, int is_get, void *buffer, size_t length,
                                  uint64_t remote_addr, const void *rkey_p,
                                  axon_tl_completion_t *comp)
{
    axon_ofi_iface_t *iface = axon_ofi_ep_iface(ep);
    const char       *what  = is_get ? "get" : "put";
    axon_ofi_rkey_t   rkey;
    axon_ofi_op_t    *op;
    void             *desc  = NULL;
    ssize_t           ret;
    int               reg;

    if (ep->status != AXON_OK) {
        return ep->status;
    }
    if ((rkey_p == NULL) || (comp == NULL)) {
        /* We cannot finish within the call, and cannot reach memory without a key. */
        axon_debug("%s: %s without a memory key or a completion", iface->name, what);
        return AXON_ERR_UNSUPPORTED;
    }
    memcpy(&rkey, rkey_p, sizeof(rkey));
    if ((remote_addr < rkey.start) || (length > rkey.length) ||
        (remote_addr - rkey.start > rkey.length - length)) {
        axon_error("%s: %s of %zu bytes at 0x%llx is outside the key's region [0x%llx, +%llu)",
                   iface->name, what, length, (unsigned long long)remote_addr,
                   (unsigned long long)rkey.start, (unsigned long long)rkey.length);
        return AXON_ERR_REMOTE_ACCESS;
    }
    if (length == 0) {
        return AXON_OK;
    }
    if ((length > iface->max_msg_size) || axon_list_is_empty(&iface->rma_free)) {
        axon_debug("%s: %s of %zu bytes cannot be posted now", iface->name, what, length);
        return AXON_ERR_UNSUPPORTED;
    }
    op = axon_list_first(&iface->rma_free, axon_ofi_op_t, link);
    if (iface->mr_mode & FI_MR_LOCAL) {
        reg = axon_ofi_mr_reg(iface->md, buffer, length, is_get ? FI_READ : FI_WRITE,
                              &op->local_mr);
        if (reg != 0) {
            axon_debug("%s: cannot register the %s buffer: %s", iface->name, what,
                       fi_strerror(-reg));
            op->local_mr = NULL;
            return AXON_ERR_UNSUPPORTED;
        }
        desc = fi_mr_desc(op->local_mr);
    }

    if (is_get) {
        ret = fi_read(iface->ep, buffer, length, desc, ep->addr, remote_addr - rkey.base,
                      rkey.key, &op->fi_ctx);
    } else {
        ret = axon_ofi_write(iface, ep, buffer, length, desc, remote_addr - rkey.base,
                             rkey.key, op);
    }
    if (ret != 0) {
        if (op->local_mr != NULL) {
            fi_close(&op->local_mr->fid);
            op->local_mr = NULL;
        }
        if (ret == -FI_EAGAIN) {
            return AXON_ERR_UNSUPPORTED;
        }
        axon_debug("%s: fi_%s to worker %016llx failed: %s", iface->name,
                   is_get ? "read" : "write", (unsigned long long)ep->peer->uuid,
                   fi_strerror((int)-ret));
        if (axon_ofi_is_peer_error(ret)) {
            axon_ofi_peer_fail(iface, ep->peer, axon_ofi_status(ret), ep->peer->gone);
            return ep->status;
        }
        return axon_ofi_status(ret);
    }
    axon_list_del(&op->link);
    op->kind = is_get ? AXON_OFI_OP_GET : AXON_OFI_OP_PUT;
    op->ep   = ep;
    op->comp = comp;
    ++ep->inflight;
    return AXON_INPROGRESS;
}

axon_status_t axon_ofi_ep_get_zcopy(axon_tl_ep_t *tl_ep, void *buffer, size_t length,
                                    uint64_t remote_addr, const void *rkey,
                                    axon_tl_completion_t *comp)
{
    return axon_ofi_rma((axon_ofi_ep_t*)tl_ep, 1, buffer, length, remote_addr, rkey, comp);
}

axon_status_t axon_ofi_ep_put_zcopy(axon_tl_ep_t *tl_ep, const void *buffer, size_t length,
                                    uint64_t remote_addr, const void *rkey,
                                    axon_tl_completion_t *comp)
{
    return axon_ofi_rma((axon_ofi_ep_t*)tl_ep, 0, (void*)buffer, length, remote_addr, rkey,
                        comp);
}
