/*
 * rc one-sided operations over several local pieces (ep_get/put_zcopy_iov):
 * one RDMA operation through a local indirect key (seed §8.8). The key
 * comes from a small pool of the iface's, made at the first use; each use
 * posts an invalidation and a UMR fill of the pieces on the connection's
 * own QP just before the read or write that names the key, so the
 * operation needs no wait (later WRs of a QP see its fills). Invalidating
 * first, not after, keeps a key whose last operation failed usable. The pieces' span is registered through the
 * registration cache like any zero-copy buffer, and the key returns to the
 * pool when the operation completes. Without UMR on the device or the QP
 * (a QP the RDMA CM made) the caller moves the pieces one operation each;
 * with no key or send slot free it tries again after completions
 * (AXON_ERR_NO_RESOURCE). More pieces than a pooled key takes (any number:
 * past AXON_TL_IOV_MAX too) go through the domain's cached key over the
 * list instead (rc_md.c's axon_rc_md_iov_key).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "rc.h"

#define AXON_RC_LAYOUT_KEYS    8     /* operations in flight through local layout keys */
#define AXON_RC_LAYOUT_ENTRIES AXON_TL_IOV_MAX   /* pieces of one operation */
#define AXON_RC_LAYOUT_MAX_GAP (64ul << 20)      /* span beyond the pieces' bytes registered */

struct axon_rc_layout_key {
    axon_dev_mr_t             *mkey;
    axon_dev_mkey_list_t      *list;    /* the fill's entries beyond the inline ones */
    struct axon_rc_layout_key *next;    /* free list */
};

void axon_rc_layout_keys_cleanup(axon_rc_iface_t *iface)
{
    unsigned i;

    for (i = 0; (iface->layout_keys != NULL) && (i < AXON_RC_LAYOUT_KEYS); ++i) {
        axon_rc_layout_key_t *k = &iface->layout_keys[i];

        if ((k->mkey != NULL) && (axon_dev_dereg_mr(k->mkey) != 0)) {
            axon_warn("%s: releasing a local layout key failed", iface->name);
        }
        if (k->list != NULL) {
            (void)axon_dev_dealloc_mkey_list(k->list);
        }
    }
    free(iface->layout_keys);
    free(iface->layout_regs);
    iface->layout_keys = NULL;
    iface->layout_regs = NULL;
}

/* The pool, made once: -1 (and a debug line) where the device has no UMR. */
static int axon_rc_layout_keys_init(axon_rc_iface_t *iface)
{
    axon_dev_mr_init_attr_t attr;
    unsigned i;

    if (iface->layout_keys_state != 0) {
        return iface->layout_keys_state;
    }
    iface->layout_keys_state = -1;
    if (!(iface->dev.dev_attr.cap_flags & AXON_DEV_CAP_UMR) ||
        (iface->dev.dev_attr.umr.max_klm_list_size < AXON_RC_LAYOUT_ENTRIES)) {
        axon_debug("%s: no UMR: several local pieces move one operation each", iface->name);
        return -1;
    }
    iface->layout_keys = calloc(AXON_RC_LAYOUT_KEYS, sizeof(*iface->layout_keys));
    iface->layout_regs = calloc(AXON_RC_LAYOUT_ENTRIES, sizeof(*iface->layout_regs));
    if ((iface->layout_keys == NULL) || (iface->layout_regs == NULL)) {
        axon_rc_layout_keys_cleanup(iface);
        return -1;
    }
    memset(&attr, 0, sizeof(attr));
    attr.max_reg_descriptors = AXON_RC_LAYOUT_ENTRIES;
    attr.create_flags        = AXON_DEV_MR_INDIRECT_KLMS;
    attr.access_flags        = AXON_DEV_ACCESS_LOCAL_WRITE;
    for (i = 0; i < AXON_RC_LAYOUT_KEYS; ++i) {
        axon_rc_layout_key_t *k = &iface->layout_keys[i];

        if ((axon_dev_create_mr(iface->dev.pd, &attr, &k->mkey) != 0) ||
            (axon_dev_alloc_mkey_list(iface->dev.pd, AXON_RC_LAYOUT_ENTRIES, &k->list) != 0)) {
            axon_warn("%s: cannot make local layout keys: pieces move one operation each",
                      iface->name);
            axon_rc_layout_keys_cleanup(iface);
            return -1;
        }
        k->next          = iface->layout_free;
        iface->layout_free = k;
    }
    iface->layout_keys_state = 1;
    return 1;
}

void axon_rc_layout_key_put(axon_rc_iface_t *iface, axon_rc_layout_key_t *key)
{
    key->next          = iface->layout_free;
    iface->layout_free = key;
}

/* Pieces of one length at one forward stride (a strided layout's runs): a repeat fill */
typedef struct axon_rc_layout_repeat {
    size_t                      byte_count, stride, count;
    axon_dev_mem_repeat_block_t block;
} axon_rc_layout_repeat_t;

static int axon_rc_layout_regular(const struct iovec *iov, size_t n, axon_rc_layout_repeat_t *r)
{
    uintptr_t stride;
    size_t i;

    if (n < 2) {
        return 0;
    }
    stride = (uintptr_t)iov[1].iov_base - (uintptr_t)iov[0].iov_base;
    if ((stride < iov[0].iov_len) || (stride > PTRDIFF_MAX)) {
        return 0;
    }
    for (i = 1; i < n; ++i) {
        if ((iov[i].iov_len != iov[0].iov_len) ||
            ((uintptr_t)iov[i].iov_base - (uintptr_t)iov[i - 1].iov_base != stride)) {
            return 0;
        }
    }
    r->byte_count = iov[0].iov_len;
    r->stride     = stride;
    r->count      = n;
    return 1;
}

/* The fill of key with iov (n pieces, all in mr), its packed bytes at the first piece:
 * one repeated entry for a regular stride, else a list (entries in regs). */
static void axon_rc_layout_fill_wr(axon_dev_send_wr_t *wr, axon_dev_mem_region_t *regs,
                                   axon_rc_layout_repeat_t *r, const axon_rc_layout_key_t *key,
                                   const struct iovec *iov, size_t n, axon_dev_mr_t *mr,
                                   uint32_t max_inline)
{
    size_t i;

    memset(wr, 0, sizeof(*wr));
    wr->opcode                = AXON_DEV_WR_UMR_FILL;
    wr->wr.umr.exp_access     = AXON_DEV_ACCESS_LOCAL_WRITE;
    wr->wr.umr.modified_mr    = key->mkey;
    wr->wr.umr.base_addr      = (uintptr_t)iov[0].iov_base;
    if (axon_rc_layout_regular(iov, n, r)) {
        r->block.base_addr                          = (uintptr_t)iov[0].iov_base;
        r->block.mr                                 = mr;
        r->block.byte_count                         = &r->byte_count;
        r->block.stride                             = &r->stride;
        wr->send_flags                              = AXON_DEV_SEND_INLINE;
        wr->wr.umr.umr_type                         = AXON_DEV_UMR_REPEAT;
        wr->wr.umr.num_mrs                          = 1;
        wr->wr.umr.mem_list.rb.mem_repeat_block_list = &r->block;
        wr->wr.umr.mem_list.rb.repeat_count         = &r->count;
        wr->wr.umr.mem_list.rb.stride_dim           = 1;
        return;
    }
    for (i = 0; i < n; ++i) {
        regs[i].base_addr = (uintptr_t)iov[i].iov_base;
        regs[i].mr        = mr;
        regs[i].length    = iov[i].iov_len;
    }
    wr->send_flags                   = (n <= max_inline) ? AXON_DEV_SEND_INLINE : 0;
    wr->wr.umr.umr_type              = AXON_DEV_UMR_MR_LIST;
    wr->wr.umr.memory_objects        = (n <= max_inline) ? NULL : key->list;
    wr->wr.umr.num_mrs               = (uint32_t)n;
    wr->wr.umr.mem_list.mem_reg_list = regs;
}

/* [lo, hi) holding every piece, and their total; 0 when a piece is empty (not a layout run). */
static size_t axon_rc_layout_span(const struct iovec *iov, size_t n, uintptr_t *lo, uintptr_t *hi)
{
    size_t i, total = 0;

    *lo = *hi = (uintptr_t)iov[0].iov_base;
    for (i = 0; i < n; ++i) {
        uintptr_t p = (uintptr_t)iov[i].iov_base;

        if (iov[i].iov_len == 0) {
            return 0;
        }
        *lo    = (p < *lo) ? p : *lo;
        *hi    = (p + iov[i].iov_len > *hi) ? p + iov[i].iov_len : *hi;
        total += iov[i].iov_len;
    }
    return total;
}

/*
 * More pieces than a pooled key takes: one operation through the domain's
 * cached key over the list (rc_md.c; made on the umr service's QP, so it
 * needs no fill here), put back when the operation completes.
 */
static axon_status_t axon_rc_ep_rdma_iov_cached(axon_rc_iface_t *iface, axon_rc_conn_t *conn,
                                                axon_dev_wr_opcode_t opcode,
                                                const struct iovec *iov, size_t n,
                                                uint64_t remote_addr, const void *rkey_buf,
                                                axon_tl_completion_t *comp)
{
    struct axon_umr_cached *key;
    axon_dev_send_wr_t wr;
    axon_dev_sge_t sge;
    axon_status_t status;

    if ((conn->state != AXON_RC_CONN_OPEN) || (conn->flags & AXON_RC_CONN_F_RTU_PENDING) ||
        (rkey_buf == NULL)) {
        return AXON_ERR_UNSUPPORTED;
    }
    if (!axon_rc_conn_can_post(conn)) {
        return (conn->tx_signaled != conn->tx_completed) ? AXON_ERR_NO_RESOURCE :
                                                           AXON_ERR_UNSUPPORTED;
    }
    status = axon_rc_iov_key_wr(iface->md, iface->name, opcode, iov, n, remote_addr, rkey_buf,
                                &key, &wr, &sge);
    if (status != AXON_OK) {
        return status;
    }
    status = axon_rc_conn_post(conn, &wr, NULL, comp, NULL, 1);
    if (status != AXON_OK) {
        axon_rc_md_iov_key_put(iface->md, key);
        return (status == AXON_ERR_NO_RESOURCE) ? AXON_ERR_UNSUPPORTED : status;
    }
    conn->tx_desc[(conn->tx_posted - 1) & (conn->tx_depth - 1)].iov_key = key;
    return AXON_INPROGRESS;
}

static axon_status_t axon_rc_ep_rdma_iov(axon_tl_ep_t *tl_ep, axon_dev_wr_opcode_t opcode,
                                         const struct iovec *iov, size_t n,
                                         uint64_t remote_addr, const void *rkey_buf,
                                         axon_tl_completion_t *comp)
{
    axon_rc_ep_t *ep = (axon_rc_ep_t *)tl_ep;
    axon_rc_iface_t *iface = (axon_rc_iface_t *)tl_ep->iface;
    axon_rc_conn_t *conn = ep->conn;
    axon_rc_layout_repeat_t repeat;
    axon_rcache_region_t *region;
    axon_rc_layout_key_t *key;
    axon_dev_send_wr_t inval, fill, wr;
    axon_rc_rkey_t rkey;
    axon_dev_sge_t sge;
    axon_status_t status;
    uintptr_t lo, hi;
    size_t total;

    /* done at once is not what RDMA does: only with a completion */
    if ((comp != NULL) && (conn != NULL) && (n > AXON_RC_LAYOUT_ENTRIES)) {
        return axon_rc_ep_rdma_iov_cached(iface, conn, opcode, iov, n, remote_addr, rkey_buf,
                                          comp);
    }
    if ((comp == NULL) || (conn == NULL) || (n == 0) ||
        !(conn->flags & AXON_RC_CONN_F_UMR) || (axon_rc_layout_keys_init(iface) < 0)) {
        return AXON_ERR_UNSUPPORTED;
    }
    if ((conn->state != AXON_RC_CONN_OPEN) || (conn->flags & AXON_RC_CONN_F_RTU_PENDING)) {
        return AXON_ERR_UNSUPPORTED;   /* not connected yet: the caller goes another way */
    }
    /* a key: each held one is on a signaled operation, whose completion returns it */
    if (iface->layout_free == NULL) {
        return AXON_ERR_NO_RESOURCE;
    }
    /* three WRs (invalidate, fill, the operation): wait only for a signaled WR in flight;
     * unsignaled ones are freed by a later signaled one, which run-by-run posts make */
    if ((conn->tx_posted + 3 - conn->tx_completed > conn->tx_depth) ||
        (iface->tx_cq_avail < 3)) {
        return (conn->tx_signaled != conn->tx_completed) ? AXON_ERR_NO_RESOURCE :
                                                           AXON_ERR_UNSUPPORTED;
    }
    total = axon_rc_layout_span(iov, n, &lo, &hi);
    if ((total == 0) || (total > UINT32_MAX) || (rkey_buf == NULL) ||
        (hi - lo > AXON_RC_LAYOUT_MAX_GAP + 2 * total)) {
        /* run by run: that path checks and reports; pieces far apart (heap and
         * stack) would register the whole address range between them */
        return AXON_ERR_UNSUPPORTED;
    }
    status = axon_rc_rkey_unpack(iface->name, (opcode == AXON_DEV_WR_RDMA_READ) ?
                                 "get_zcopy_iov" : "put_zcopy_iov", rkey_buf, remote_addr,
                                 total, &rkey);
    if (status != AXON_OK) {
        return status;
    }
    if (axon_rcache_get(iface->rcache, (void *)lo, hi - lo, &region) != AXON_OK) {
        return AXON_ERR_UNSUPPORTED;
    }
    key                = iface->layout_free;
    iface->layout_free = key->next;
    axon_rc_layout_fill_wr(&fill, iface->layout_regs, &repeat, key, iov, n,
                           (axon_dev_mr_t *)axon_rc_region_mr(region), conn->umr_inline);
    axon_verbs_rdma_wr(&wr, &sge, opcode, (uintptr_t)iov[0].iov_base, total, key->mkey->lkey,
                       remote_addr, rkey.rkey);
    memset(&inval, 0, sizeof(inval));
    inval.opcode              = AXON_DEV_WR_UMR_INVALIDATE;
    inval.wr.umr.modified_mr  = key->mkey;
    status = axon_rc_conn_post(conn, &inval, NULL, NULL, NULL, 0);
    if (status == AXON_OK) {
        status = axon_rc_conn_post(conn, &fill, NULL, NULL, NULL, 0);
    }
    if (status == AXON_OK) {
        status = axon_rc_conn_post(conn, &wr, NULL, comp, region, 1);
        if (status == AXON_OK) {
            conn->tx_desc[(conn->tx_posted - 1) & (conn->tx_depth - 1)].layout_key = key;
            return AXON_INPROGRESS;
        }
        /* the fill is posted on a QP that failed: the key leaves the pool */
        axon_rcache_put(iface->rcache, region);
        return status;
    }
    axon_rc_layout_key_put(iface, key);
    axon_rcache_put(iface->rcache, region);
    return (status == AXON_ERR_NO_RESOURCE) ? AXON_ERR_UNSUPPORTED : status;
}

axon_status_t axon_rc_ep_get_zcopy_iov(axon_tl_ep_t *tl_ep, const struct iovec *iov,
                                       size_t iov_count, uint64_t remote_addr, const void *rkey,
                                       axon_tl_completion_t *comp)
{
    return axon_rc_ep_rdma_iov(tl_ep, AXON_DEV_WR_RDMA_READ, iov, iov_count, remote_addr, rkey,
                               comp);
}

axon_status_t axon_rc_ep_put_zcopy_iov(axon_tl_ep_t *tl_ep, const struct iovec *iov,
                                       size_t iov_count, uint64_t remote_addr, const void *rkey,
                                       axon_tl_completion_t *comp)
{
    return axon_rc_ep_rdma_iov(tl_ep, AXON_DEV_WR_RDMA_WRITE, iov, iov_count, remote_addr, rkey,
                               comp);
}
