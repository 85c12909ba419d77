/*
 * dc one-sided operations: RDMA read/write and device atomics on the
 * endpoint's DCI, with rc's keys (dc shares rc's memory domain), rc's key
 * checks and rc's mapping of Axon atomics onto work requests (rc_amo.c).
 */
#include <stdio.h>
#include <string.h>
#include "dc.h"

static axon_status_t axon_dc_ep_rdma(axon_tl_ep_t *tl_ep, axon_dev_wr_opcode_t opcode,
                                     void *buffer, size_t length, uint64_t remote_addr,
                                     const void *rkey_buf, axon_tl_completion_t *comp)
{
    axon_dc_ep_t *ep       = (axon_dc_ep_t *)tl_ep;
    axon_dc_iface_t *iface = (axon_dc_iface_t *)tl_ep->iface;
    const char *what = (opcode == AXON_DEV_WR_RDMA_READ) ? "get_zcopy" : "put_zcopy";
    axon_rcache_region_t *region;
    axon_dev_send_wr_t wr;
    axon_status_t status;
    axon_dc_dci_t *dci;
    axon_dev_sge_t sge;
    axon_rc_rkey_t rkey;

    if (ep->status != AXON_OK) {
        return (axon_status_t)ep->status;
    }
    if (length == 0) {
        return AXON_OK;
    }
    if ((rkey_buf == NULL) || (buffer == NULL) || (comp == NULL)) {
        axon_error("%s: %s: NULL %s", iface->name, what,
                   (rkey_buf == NULL) ? "rkey" : (buffer == NULL) ? "buffer" : "completion");
        return AXON_ERR_INVALID_PARAM;
    }
    status = axon_rc_rkey_unpack(iface->name, what, rkey_buf, remote_addr, length, &rkey);
    if (status != AXON_OK) {
        return status;
    }
    if (length > UINT32_MAX) {
        axon_error("%s: %s of %zu bytes: larger than one RDMA operation", iface->name, what,
                   length);
        return AXON_ERR_INVALID_PARAM;
    }
    dci = axon_dc_dci_for_ep(iface, ep);
    if (dci == NULL) {
        return AXON_ERR_UNSUPPORTED;   /* no DCI now: the caller falls back */
    }
    if (axon_rcache_get(iface->rcache, buffer, length, &region) != AXON_OK) {
        return AXON_ERR_UNSUPPORTED;   /* logged by the device; the caller falls back */
    }
    axon_verbs_rdma_wr(&wr, &sge, opcode, (uintptr_t)buffer, length,
                       axon_rc_region_mr(region)->lkey, remote_addr, rkey.rkey);
    status = axon_dc_dci_post(iface, dci, ep, &ep->target, &wr, NULL, comp, region);
    if (status != AXON_OK) {
        axon_rcache_put(iface->rcache, region);
        /* the endpoint's hello found no buffer: as no DCI, the caller falls back */
        return (status == AXON_ERR_NO_RESOURCE) ? AXON_ERR_UNSUPPORTED : status;
    }
    return AXON_INPROGRESS;
}

axon_status_t axon_dc_ep_get_zcopy(axon_tl_ep_t *tl_ep, void *buffer, size_t length,
                                   uint64_t remote_addr, const void *rkey,
                                   axon_tl_completion_t *comp)
{
    return axon_dc_ep_rdma(tl_ep, AXON_DEV_WR_RDMA_READ, buffer, length, remote_addr, rkey,
                           comp);
}

axon_status_t axon_dc_ep_put_zcopy(axon_tl_ep_t *tl_ep, const void *buffer, size_t length,
                                   uint64_t remote_addr, const void *rkey,
                                   axon_tl_completion_t *comp)
{
    return axon_dc_ep_rdma(tl_ep, AXON_DEV_WR_RDMA_WRITE, (void *)(uintptr_t)buffer, length,
                           remote_addr, rkey, comp);
}

/*
 * Several local pieces in one operation (dc's local layout keys): the
 * domain's cached key over the list (rc_md.c), made on the umr service's
 * QP, so the DCI posts only the operation; put back at its completion.
 */
static axon_status_t axon_dc_ep_rdma_iov(axon_tl_ep_t *tl_ep, axon_dev_wr_opcode_t opcode,
                                         const struct iovec *iov, size_t n,
                                         uint64_t remote_addr, const void *rkey_buf,
                                         axon_tl_completion_t *comp)
{
    axon_dc_ep_t *ep       = (axon_dc_ep_t *)tl_ep;
    axon_dc_iface_t *iface = (axon_dc_iface_t *)tl_ep->iface;
    struct axon_umr_cached *key;
    axon_dev_send_wr_t wr;
    axon_status_t status;
    axon_dc_dci_t *dci;
    axon_dev_sge_t sge;

    if (ep->status != AXON_OK) {
        return (axon_status_t)ep->status;
    }
    /* done at once is not what RDMA does: only with a completion */
    if ((comp == NULL) || (rkey_buf == NULL)) {
        return AXON_ERR_UNSUPPORTED;
    }
    dci = axon_dc_dci_for_ep(iface, ep);
    if (dci == NULL) {
        return AXON_ERR_NO_RESOURCE;   /* a DCI frees at a completion */
    }
    status = axon_rc_iov_key_wr(iface->md, iface->name, opcode, iov, n, remote_addr, rkey_buf,
                                &key, &wr, &sge);
    if (status != AXON_OK) {
        return status;
    }
    status = axon_dc_dci_post(iface, dci, ep, &ep->target, &wr, NULL, comp, NULL);
    if (status != AXON_OK) {
        axon_rc_md_iov_key_put(iface->md, key);
        return (status == AXON_ERR_NO_RESOURCE) ? AXON_ERR_UNSUPPORTED : status;
    }
    axon_dc_dci_last_desc(iface, dci)->iov_key = key;
    return AXON_INPROGRESS;
}

axon_status_t axon_dc_ep_get_zcopy_iov(axon_tl_ep_t *tl_ep, const struct iovec *iov,
                                       size_t iov_count, uint64_t remote_addr, const void *rkey,
                                       axon_tl_completion_t *comp)
{
    return axon_dc_ep_rdma_iov(tl_ep, AXON_DEV_WR_RDMA_READ, iov, iov_count, remote_addr, rkey,
                               comp);
}

axon_status_t axon_dc_ep_put_zcopy_iov(axon_tl_ep_t *tl_ep, const struct iovec *iov,
                                       size_t iov_count, uint64_t remote_addr, const void *rkey,
                                       axon_tl_completion_t *comp)
{
    return axon_dc_ep_rdma_iov(tl_ep, AXON_DEV_WR_RDMA_WRITE, iov, iov_count, remote_addr, rkey,
                               comp);
}

axon_status_t axon_dc_ep_atomic(axon_tl_ep_t *tl_ep, const axon_amo_args_t *args,
                                uint64_t remote_addr, const void *rkey_buf, uint64_t *result,
                                axon_tl_completion_t *comp)
{
    axon_dc_ep_t *ep       = (axon_dc_ep_t *)tl_ep;
    axon_dc_iface_t *iface = (axon_dc_iface_t *)tl_ep->iface;
    axon_tl_completion_t *slot_comp;
    axon_dev_send_wr_t wr;
    axon_status_t status;
    axon_dc_dci_t *dci;
    axon_dev_sge_t sge;
    axon_rc_rkey_t rkey;

    if (ep->status != AXON_OK) {
        return (axon_status_t)ep->status;
    }
    status = axon_rc_amo_check(iface->name, iface->super.resource, args, remote_addr,
                               rkey_buf, result, comp, &rkey);
    if (status != AXON_OK) {
        return status;
    }
    dci = axon_dc_dci_for_ep(iface, ep);
    if (dci == NULL) {
        return AXON_ERR_NO_RESOURCE;
    }
    status = axon_rc_amo_prepare(&iface->amo_pool, &iface->dev, iface->name, args, remote_addr,
                                 rkey.rkey, result, comp, &wr, &sge, &slot_comp);
    if (status != AXON_OK) {
        return status;
    }
    status = axon_dc_dci_post(iface, dci, ep, &ep->target, &wr, NULL, slot_comp, NULL);
    if (status != AXON_OK) {
        axon_rc_amo_unprepare(slot_comp);
        return status;
    }
    return AXON_INPROGRESS;
}
