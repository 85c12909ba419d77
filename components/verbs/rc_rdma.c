/*
 * rc memory keys and one-sided operations. Zero-copy operations and
 * rendezvous keys (AXON_MEM_REG_TRANSIENT) take their registration from the
 * iface's registration cache (framework/memory), so a buffer used again is
 * registered once; cached regions allow local writes and remote reads only.
 * Keys the application hands out get a registration of their own, with
 * every right, which dies at mem_dereg: a stale key then fails.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rc.h"

#define AXON_RC_MR_ACCESS_CACHED (AXON_DEV_ACCESS_LOCAL_WRITE | AXON_DEV_ACCESS_REMOTE_READ)
#define AXON_RC_MR_ACCESS_KEY    (AXON_DEV_ACCESS_LOCAL_WRITE | AXON_DEV_ACCESS_REMOTE_READ | \
                                  AXON_DEV_ACCESS_REMOTE_WRITE | AXON_DEV_ACCESS_REMOTE_ATOMIC)

/* A key's memory handle: a cached region or an own MR, and the range the key grants. */
typedef struct axon_rc_memh {
    axon_rcache_region_t *region;   /* transient keys */
    axon_dev_mr_t        *mr;       /* the others */
    uintptr_t             addr;
    size_t                length;
} axon_rc_memh_t;

static axon_status_t axon_rc_reg_mr(axon_rc_iface_t *iface, void *addr, size_t length,
                                    int access, axon_dev_mr_t **mr_p)
{
    int ret = axon_dev_reg_mr(iface->dev.pd, addr, length, access, mr_p);

    if (ret != 0) {
        axon_debug("%s: reg_mr of %p, %zu bytes: error %d", iface->name, addr, length, ret);
        return (ret == ENOMEM) ? AXON_ERR_NO_MEMORY : AXON_ERR_IO_ERROR;
    }
    return AXON_OK;
}

static void axon_rc_dereg_mr(axon_rc_iface_t *iface, axon_dev_mr_t *mr)
{
    int ret = axon_dev_dereg_mr(mr);

    if (ret != 0) {
        axon_warn("%s: dereg_mr: error %d", iface->name, ret);
    }
}

static axon_status_t axon_rc_rcache_reg(void *arg, void *addr, size_t length, void **memh_p)
{
    return axon_rc_reg_mr(arg, addr, length, AXON_RC_MR_ACCESS_CACHED, (axon_dev_mr_t **)memh_p);
}

static void axon_rc_rcache_dereg(void *arg, void *memh)
{
    axon_rc_dereg_mr(arg, memh);
}

static const axon_rcache_ops_t axon_rc_rcache_ops = {
    .reg   = axon_rc_rcache_reg,
    .dereg = axon_rc_rcache_dereg,
};

axon_status_t axon_rc_rcache_create(axon_rc_iface_t *iface)
{
    axon_rcache_params_t params = {
        .name       = iface->name,
        .ops        = &axon_rc_rcache_ops,
        .arg        = iface,
        .max_unused = iface->config.rcache_max,
    };

    return axon_rcache_create(&params, &iface->rcache);
}

static inline const axon_dev_mr_t *axon_rc_region_mr(const axon_rcache_region_t *region)
{
    return region->memh;
}

axon_status_t axon_rc_mem_reg(axon_iface_t *tl_iface, void *addr, size_t length, unsigned flags,
                              void **memh_p)
{
    axon_rc_iface_t *iface = (axon_rc_iface_t *)tl_iface;
    axon_rc_memh_t *memh;
    axon_status_t status;

    if ((addr == NULL) || (length == 0) || (memh_p == NULL)) {
        axon_error("%s: mem_reg of %p, %zu bytes: nothing to register", iface->name, addr,
                   length);
        return AXON_ERR_INVALID_PARAM;
    }
    memh = calloc(1, sizeof(*memh));
    if (memh == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    status = (flags & AXON_MEM_REG_TRANSIENT) ?
             axon_rcache_get(iface->rcache, addr, length, &memh->region) :
             axon_rc_reg_mr(iface, addr, length, AXON_RC_MR_ACCESS_KEY, &memh->mr);
    if (status != AXON_OK) {
        free(memh);
        return status;
    }
    memh->addr   = (uintptr_t)addr;
    memh->length = length;
    *memh_p      = memh;
    return AXON_OK;
}

void axon_rc_mem_dereg(axon_iface_t *tl_iface, void *memh)
{
    axon_rc_iface_t *iface = (axon_rc_iface_t *)tl_iface;
    axon_rc_memh_t *rc_memh = memh;

    if (rc_memh == NULL) {
        return;
    }
    if (rc_memh->region != NULL) {
        axon_rcache_put(iface->rcache, rc_memh->region);
    } else {
        axon_rc_dereg_mr(iface, rc_memh->mr);
    }
    free(rc_memh);
}

size_t axon_rc_rkey_pack(axon_iface_t *tl_iface, const void *memh, void *rkey_buf)
{
    const axon_rc_memh_t *rc_memh = memh;
    axon_rc_rkey_t rkey;

    (void)tl_iface;
    rkey.version = AXON_RC_RKEY_VERSION;
    rkey.rkey    = (rc_memh->region != NULL) ? axon_rc_region_mr(rc_memh->region)->rkey :
                                               rc_memh->mr->rkey;
    rkey.addr    = rc_memh->addr;
    rkey.length  = rc_memh->length;
    memcpy(rkey_buf, &rkey, sizeof(rkey));
    return sizeof(rkey);
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
    const char *what = (opcode == AXON_DEV_WR_RDMA_READ) ? "get" : "put";
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
        axon_error("%s: %s_zcopy: NULL %s", iface->name, what,
                   (rkey_buf == NULL) ? "rkey" : (buffer == NULL) ? "buffer" : "completion");
        return AXON_ERR_INVALID_PARAM;
    }
    memcpy(&rkey, rkey_buf, sizeof(rkey));
    if (rkey.version != AXON_RC_RKEY_VERSION) {
        axon_error("%s: %s_zcopy: rkey of version 0x%02x, expected 0x%02x (not packed by rc?)",
                   iface->name, what, rkey.version, AXON_RC_RKEY_VERSION);
        return AXON_ERR_INVALID_PARAM;
    }
    if ((remote_addr < rkey.addr) || (remote_addr - rkey.addr > rkey.length) ||
        (length > rkey.length - (remote_addr - rkey.addr))) {
        axon_error("%s: %s_zcopy: remote range 0x%llx+%zu is outside the key's 0x%llx+%llu",
                   iface->name, what, (unsigned long long)remote_addr, length,
                   (unsigned long long)rkey.addr, (unsigned long long)rkey.length);
        return AXON_ERR_INVALID_PARAM;
    }
    if (length > UINT32_MAX) {
        axon_error("%s: %s_zcopy of %zu bytes: larger than one RDMA operation", iface->name,
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
    memset(&wr, 0, sizeof(wr));
    sge.addr               = (uintptr_t)buffer;
    sge.length             = (uint32_t)length;
    sge.lkey               = axon_rc_region_mr(region)->lkey;
    wr.opcode              = opcode;
    wr.sg_list             = &sge;
    wr.num_sge             = 1;
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey        = rkey.rkey;
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
