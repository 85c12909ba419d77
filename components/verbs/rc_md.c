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
