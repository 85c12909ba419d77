/*
 * rc's memory domain: the device context and protection domain every rc
 * iface of a context is opened on, and what is registered in it. Memory
 * the application maps is registered once here, whatever the number of
 * workers. Zero-copy operations and rendezvous keys (AXON_MEM_REG_TRANSIENT)
 * take their registration from the domain's registration cache
 * (framework/memory), so a buffer used again is registered once; cached
 * regions allow local writes and remote reads only. Keys the application
 * hands out get a registration of their own, with every right, which dies
 * at mem_dereg: a stale key then fails.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rc.h"
#include "umr.h"

#define AXON_RC_MR_ACCESS_CACHED (AXON_DEV_ACCESS_LOCAL_WRITE | AXON_DEV_ACCESS_REMOTE_READ)
#define AXON_RC_MR_ACCESS_KEY    (AXON_DEV_ACCESS_LOCAL_WRITE | AXON_DEV_ACCESS_REMOTE_READ | \
                                  AXON_DEV_ACCESS_REMOTE_WRITE | AXON_DEV_ACCESS_REMOTE_ATOMIC)

/* A key's memory handle: a cached region, an own MR or a layout's key, and its range. */
typedef struct axon_rc_memh {
    axon_rcache_region_t *region;   /* transient keys */
    axon_dev_mr_t        *mr;       /* the others but layouts */
    axon_umr_key_t        layout;   /* AXON_MEM_MAP_LAYOUT: layout.mkey.mr is the key */
    axon_umr_cached_t    *cached;   /* a transient layout's (rendezvous) key */
    uintptr_t             addr;
    size_t                length;
} axon_rc_memh_t;

static axon_status_t axon_rc_reg_mr(axon_rc_md_t *md, void *addr, size_t length, int access,
                                    axon_dev_mr_t **mr_p)
{
    int ret = axon_dev_reg_mr(md->dev.pd, addr, length, access, mr_p);

    if (ret != 0) {
        axon_debug("%s: reg_mr of %p, %zu bytes: error %d", md->name, addr, length, ret);
        return (ret == ENOMEM) ? AXON_ERR_NO_MEMORY : AXON_ERR_IO_ERROR;
    }
    return AXON_OK;
}

static void axon_rc_dereg_mr(axon_rc_md_t *md, axon_dev_mr_t *mr)
{
    int ret = axon_dev_dereg_mr(mr);

    if (ret != 0) {
        axon_warn("%s: dereg_mr: error %d", md->name, ret);
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

static axon_status_t axon_rc_mem_reg(axon_md_t *tl_md, void *addr, size_t length, unsigned flags,
                                     void **memh_p)
{
    axon_rc_md_t *md = (axon_rc_md_t *)tl_md;
    axon_rc_memh_t *memh;
    axon_status_t status;

    if ((addr == NULL) || (length == 0) || (memh_p == NULL)) {
        axon_error("%s: mem_reg of %p, %zu bytes: nothing to register", md->name, addr, length);
        return AXON_ERR_INVALID_PARAM;
    }
    memh = calloc(1, sizeof(*memh));
    if (memh == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    status = (flags & AXON_MEM_REG_TRANSIENT) ?
             axon_rcache_get(md->rcache, addr, length, &memh->region) :
             axon_rc_reg_mr(md, addr, length, AXON_RC_MR_ACCESS_KEY, &memh->mr);
    if (status != AXON_OK) {
        free(memh);
        return status;
    }
    memh->addr   = (uintptr_t)addr;
    memh->length = length;
    *memh_p      = memh;
    return AXON_OK;
}

static void axon_rc_mem_dereg(axon_md_t *tl_md, void *memh)
{
    axon_rc_md_t *md = (axon_rc_md_t *)tl_md;
    axon_rc_memh_t *rc_memh = memh;

    if (rc_memh == NULL) {
        return;
    }
    if (rc_memh->region != NULL) {
        axon_rcache_put(md->rcache, rc_memh->region);
    } else if (rc_memh->cached != NULL) {
        axon_umr_cache_put(md->umr_cache, rc_memh->cached);
    } else if (rc_memh->layout.mkey.mr != NULL) {
        axon_umr_key_destroy(md->umr, &rc_memh->layout);
    } else {
        axon_rc_dereg_mr(md, rc_memh->mr);
    }
    free(rc_memh);
}

/* The layout-key service, opened at the first layout (most contexts never map one). */
static axon_status_t axon_rc_md_umr(axon_rc_md_t *md)
{
    pthread_mutex_lock(&md->umr_lock);
    if ((md->umr == NULL) && (md->umr_status == AXON_OK)) {
        md->umr_status = axon_umr_open(&md->dev, &md->umr);
        if (md->umr_status == AXON_OK) {
            md->umr_status = axon_umr_cache_create(md->umr, md->rcache, &md->umr_cache);
        }
    }
    pthread_mutex_unlock(&md->umr_lock);
    return md->umr_status;
}

/* A list's pieces this far apart beyond their bytes would register too much between them */
#define AXON_RC_IOV_KEY_MAX_GAP (64ul << 20)
/* Entries of an iov key's layout kept on the stack */
#define AXON_RC_IOV_KEY_ROOM    64

axon_status_t axon_rc_md_iov_key(axon_rc_md_t *md, const struct iovec *iov, size_t iov_count,
                                 struct axon_umr_cached **key_p, uint32_t *lkey_p,
                                 uint64_t *addr_p, size_t *total_p)
{
    axon_md_layout_entry_t room[AXON_RC_IOV_KEY_ROOM], *entries;
    axon_md_layout_t layout;
    uintptr_t lo, hi, p;
    axon_status_t status;
    size_t i, total = 0;

    if ((iov_count == 0) || (iov_count > UINT32_MAX) || (axon_rc_md_umr(md) != AXON_OK)) {
        return AXON_ERR_UNSUPPORTED;
    }
    lo = hi = (uintptr_t)iov[0].iov_base;
    for (i = 0; i < iov_count; ++i) {
        p = (uintptr_t)iov[i].iov_base;
        if (iov[i].iov_len == 0) {
            return AXON_ERR_UNSUPPORTED;
        }
        lo     = (p < lo) ? p : lo;
        hi     = (p + iov[i].iov_len > hi) ? p + iov[i].iov_len : hi;
        total += iov[i].iov_len;
    }
    if ((total > UINT32_MAX) || (hi - lo > AXON_RC_IOV_KEY_MAX_GAP + 2 * total)) {
        axon_debug("%s: %zu pieces of %zu bytes over a span of %zu: no key", md->name,
                   iov_count, total, (size_t)(hi - lo));
        return AXON_ERR_UNSUPPORTED;
    }
    entries = (iov_count <= AXON_RC_IOV_KEY_ROOM) ? room : malloc(iov_count * sizeof(*entries));
    if (entries == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    for (i = 0; i < iov_count; ++i) {
        entries[i].addr   = (uintptr_t)iov[i].iov_base;
        entries[i].length = iov[i].iov_len;
        entries[i].stride = 0;
    }
    layout.base        = (uintptr_t)iov[0].iov_base;
    layout.size        = total;
    layout.repeat      = 1;
    layout.num_entries = (uint32_t)iov_count;
    layout.entries     = entries;
    layout.span_addr   = lo;
    layout.span_length = hi - lo;
    status = axon_umr_cache_get(md->umr_cache, &layout, key_p);
    if (entries != room) {
        free(entries);
    }
    if (status == AXON_OK) {
        *lkey_p  = axon_umr_cached_lkey(*key_p);
        *addr_p  = layout.base;
        *total_p = total;
    }
    return status;
}

void axon_rc_md_iov_key_put(axon_rc_md_t *md, struct axon_umr_cached *key)
{
    axon_umr_cache_put(md->umr_cache, key);
}

static axon_status_t axon_rc_mem_reg_layout(axon_md_t *tl_md, const axon_md_layout_t *layout,
                                            unsigned flags, void **memh_p)
{
    axon_rc_md_t *md = (axon_rc_md_t *)tl_md;
    axon_rc_memh_t *memh;
    axon_status_t status;

    status = axon_rc_md_umr(md);
    if (status != AXON_OK) {
        return status;
    }
    memh = calloc(1, sizeof(*memh));
    if (memh == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    /* transient (a rendezvous): cached, read-only; else the key dies at mem_dereg */
    status = (flags & AXON_MEM_REG_TRANSIENT) ?
             axon_umr_cache_get(md->umr_cache, layout, &memh->cached) :
             axon_umr_key_create(md->umr, layout, AXON_RC_MR_ACCESS_KEY, &memh->layout);
    if (status != AXON_OK) {
        free(memh);
        return status;
    }
    memh->addr   = layout->base;
    memh->length = layout->size;
    *memh_p      = memh;
    return AXON_OK;
}

static size_t axon_rc_rkey_pack(axon_md_t *tl_md, const void *memh, void *rkey_buf)
{
    const axon_rc_memh_t *rc_memh = memh;
    axon_rc_rkey_t rkey;

    (void)tl_md;
    rkey.version = AXON_RC_RKEY_VERSION;
    rkey.rkey    = (rc_memh->region != NULL) ? axon_rc_region_mr(rc_memh->region)->rkey :
                   (rc_memh->cached != NULL) ? axon_umr_cached_rkey(rc_memh->cached) :
                   (rc_memh->layout.mkey.mr != NULL) ? rc_memh->layout.mkey.mr->rkey :
                                                    rc_memh->mr->rkey;
    rkey.addr    = rc_memh->addr;
    rkey.length  = rc_memh->length;
    memcpy(rkey_buf, &rkey, sizeof(rkey));
    return sizeof(rkey);
}

static void axon_rc_md_close(axon_md_t *tl_md)
{
    axon_rc_md_t *md = (axon_rc_md_t *)tl_md;

    if (md->umr_cache != NULL) {
        axon_umr_cache_destroy(md->umr_cache);   /* before the regions it holds go */
    }
    if (md->rcache != NULL) {
        axon_rcache_destroy(md->rcache);   /* every iface, so every operation, is gone */
    }
    if (md->umr != NULL) {
        axon_umr_close(md->umr);
    }
    pthread_mutex_destroy(&md->umr_lock);
    md->cm->dev_close(&md->dev);
    free(md);
}

static const axon_md_ops_t axon_rc_md_ops = {
    .md_close       = axon_rc_md_close,
    .rkey_max_len   = sizeof(axon_rc_rkey_t),
    .mem_reg        = axon_rc_mem_reg,
    .mem_dereg      = axon_rc_mem_dereg,
    .rkey_pack      = axon_rc_rkey_pack,
    .mem_reg_layout = axon_rc_mem_reg_layout,
};

axon_status_t axon_rc_md_open(const axon_resource_t *resource, unsigned gid_index,
                              unsigned rcache_max, const axon_rc_cm_t *cm, axon_md_t **md_p)
{
    axon_rcache_params_t params = {
        .ops        = &axon_rc_rcache_ops,
        .max_unused = rcache_max,
    };
    axon_rc_md_t *md = calloc(1, sizeof(*md));
    axon_status_t status;

    if (md == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    md->super.ops = &axon_rc_md_ops;
    md->cm        = cm;
    pthread_mutex_init(&md->umr_lock, NULL);
    snprintf(md->name, sizeof(md->name), "%s/%s", cm->name, resource->dev_name);
    status = cm->dev_open(&md->dev, resource->dev_name, (int)gid_index);
    if (status != AXON_OK) {
        free(md);
        return status;
    }
    params.name = md->name;
    params.arg  = md;
    status = axon_rcache_create(&params, &md->rcache);
    if (status != AXON_OK) {
        axon_rc_md_close(&md->super);
        return status;
    }
    *md_p = &md->super;
    return AXON_OK;
}
