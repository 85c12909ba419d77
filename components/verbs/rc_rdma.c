/*
 * rc one-sided operations: the local buffer's registration comes from the
 * memory domain's registration cache (rc_md.c), so a buffer used again is
 * registered once.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rc.h"

axon_status_t axon_rc_rkey_unpack(const char *name, const char *what, const void *rkey_buf,
                                  uint64_t remote_addr, size_t length, axon_rc_rkey_t *rkey)
{
    memcpy(rkey, rkey_buf, sizeof(*rkey));
    if (rkey->version != AXON_RC_RKEY_VERSION) {
        axon_error("%s: %s: rkey of version 0x%02x, expected 0x%02x (not packed by rc or dc?)",
                   name, what, rkey->version, AXON_RC_RKEY_VERSION);
        return AXON_ERR_INVALID_PARAM;
    }
    if ((remote_addr < rkey->addr) || (remote_addr - rkey->addr > rkey->length) ||
        (length > rkey->length - (remote_addr - rkey->addr))) {
        axon_error("%s: %s: remote range 0x%llx+%zu is outside the key's 0x%llx+%llu", name,
                   what, (unsigned long long)remote_addr, length,
                   (unsigned long long)rkey->addr, (unsigned long long)rkey->length);
        return AXON_ERR_INVALID_PARAM;
    }
    return AXON_OK;
}

axon_status_t axon_rc_iov_key_wr(axon_rc_md_t *md, const char *name,
                                 axon_dev_wr_opcode_t opcode, const struct iovec *iov, size_t n,
                                 uint64_t remote_addr, const void *rkey_buf,
                                 struct axon_umr_cached **key_p, axon_dev_send_wr_t *wr,
                                 axon_dev_sge_t *sge)
{
    axon_rc_rkey_t rkey;
    axon_status_t status;
    uint64_t addr;
    uint32_t lkey;
    size_t total;

    status = axon_rc_md_iov_key(md, iov, n, key_p, &lkey, &addr, &total);
    if (status != AXON_OK) {
        return (status == AXON_ERR_NO_MEMORY) ? status : AXON_ERR_UNSUPPORTED;
    }
    status = axon_rc_rkey_unpack(name, (opcode == AXON_DEV_WR_RDMA_READ) ? "get_zcopy_iov" :
                                                                          "put_zcopy_iov",
                                 rkey_buf, remote_addr, total, &rkey);
    if (status != AXON_OK) {
        axon_rc_md_iov_key_put(md, *key_p);
        return status;
    }
    axon_verbs_rdma_wr(wr, sge, opcode, addr, total, lkey, remote_addr, rkey.rkey);
    return AXON_OK;
}

/*
 * Check and post one RDMA read or write. A key that is malformed or does not
 * cover the range fails here, before the wire: on RC a remote access error
 * would also break the connection.
 */
static axon_status_t axon_rc_ep_rdma(axon_tl_ep_t *tl_ep, axon_dev_wr_opcode_t opcode, void *buffer,
                                     size_t length, uint64_t remote_addr, const void *rkey_buf,
                                     axon_tl_completion_t *comp)
{
    axon_rc_ep_t *ep = (axon_rc_ep_t *)tl_ep;
    axon_rc_iface_t *iface = (axon_rc_iface_t *)tl_ep->iface;
    const char *what = (opcode == AXON_DEV_WR_RDMA_READ) ? "get_zcopy" : "put_zcopy";
    axon_rc_conn_t *conn = ep->conn;
    axon_dev_send_wr_t wr;
    axon_status_t status;
    axon_dev_sge_t sge;
    axon_rc_rkey_t rkey;
    axon_rcache_region_t *region;

    if (conn == NULL) {
        return ep->status;
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
        axon_error("%s: %s of %zu bytes: larger than one RDMA operation", iface->name,
                   what, length);
        return AXON_ERR_INVALID_PARAM;
    }
    if ((conn->state != AXON_RC_CONN_OPEN) || (conn->flags & AXON_RC_CONN_F_RTU_PENDING) ||
        !axon_rc_conn_can_post(conn)) {
        /* not connected yet, or the send queue is full: the caller falls back */
        return AXON_ERR_UNSUPPORTED;
    }
    if (axon_rcache_get(iface->rcache, buffer, length, &region) != AXON_OK) {
        return AXON_ERR_UNSUPPORTED;   /* logged by the device; the caller falls back */
    }
    axon_verbs_rdma_wr(&wr, &sge, opcode, (uintptr_t)buffer, length,
                       axon_rc_region_mr(region)->lkey, remote_addr, rkey.rkey);
    status = axon_rc_conn_post(conn, &wr, NULL, comp, region, 1);
    if (status != AXON_OK) {
        axon_rcache_put(iface->rcache, region);
        return (status == AXON_ERR_NO_RESOURCE) ? AXON_ERR_UNSUPPORTED : status;
    }
    return AXON_INPROGRESS;
}

axon_status_t axon_rc_ep_get_zcopy(axon_tl_ep_t *tl_ep, void *buffer, size_t length,
                                   uint64_t remote_addr, const void *rkey,
                                   axon_tl_completion_t *comp)
{
    return axon_rc_ep_rdma(tl_ep, AXON_DEV_WR_RDMA_READ, buffer, length, remote_addr, rkey,
                           comp);
}

axon_status_t axon_rc_ep_put_zcopy(axon_tl_ep_t *tl_ep, const void *buffer, size_t length,
                                   uint64_t remote_addr, const void *rkey,
                                   axon_tl_completion_t *comp)
{
    return axon_rc_ep_rdma(tl_ep, AXON_DEV_WR_RDMA_WRITE, (void *)(uintptr_t)buffer, length,
                           remote_addr, rkey, comp);
}
