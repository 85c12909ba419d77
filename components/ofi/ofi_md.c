/*
 * ofi's memory domain: the provider entry, fabric and domain every ofi
 * iface of a context opens its endpoint in, and the memory keys of that
 * domain. The domain is FI_THREAD_SAFE, since the workers sharing it may
 * run in threads of their own, and its keys are not bound to an endpoint
 * (no FI_MR_ENDPOINT), so one registration serves every worker.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include "ofi.h"

/* What mem_reg hands out. */
typedef struct axon_ofi_memh {
    struct fid_mr *mr;
    uint64_t       key;
    uint64_t       start;
    uint64_t       length;
} axon_ofi_memh_t;

int axon_ofi_mr_reg(axon_ofi_md_t *md, const void *addr, size_t length, uint64_t access,
                    struct fid_mr **mr_p)
{
    /* Keys we choose (no FI_MR_PROV_KEY) must differ within the domain. */
    uint64_t key = __atomic_fetch_add(&md->next_key, 1, __ATOMIC_RELAXED);

    return fi_mr_reg(md->domain, addr, length, access, 0, key, 0, mr_p, NULL);
}

static axon_status_t axon_ofi_mem_reg(axon_md_t *tl_md, void *addr, size_t length,
                                      unsigned flags, void **memh_p)
{
    axon_ofi_md_t   *md = (axon_ofi_md_t*)tl_md;
    axon_ofi_memh_t *memh;
    int              ret;

    (void)flags;   /* no cache: every registration is the caller's own */
    if (length == 0) {
        axon_error("%s: mem_reg of 0 bytes at %p", md->name, addr);
        return AXON_ERR_INVALID_PARAM;
    }
    memh = calloc(1, sizeof(*memh));
    if (memh == NULL) {
        axon_error("%s: cannot allocate a memory handle", md->name);
        return AXON_ERR_NO_MEMORY;
    }
    ret = axon_ofi_mr_reg(md, addr, length, FI_REMOTE_READ | FI_REMOTE_WRITE | FI_READ |
                          FI_WRITE, &memh->mr);
    if (ret != 0) {
        axon_error("%s: fi_mr_reg of %zu bytes at %p failed: %s", md->name, length, addr,
                   fi_strerror(-ret));
        free(memh);
        return axon_ofi_status(ret);
    }
    memh->key    = fi_mr_key(memh->mr);
    memh->start  = (uint64_t)(uintptr_t)addr;
    memh->length = length;
    *memh_p      = memh;
    return AXON_OK;
}

static void axon_ofi_mem_dereg(axon_md_t *tl_md, void *memh_v)
{
    axon_ofi_memh_t *memh = memh_v;

    (void)tl_md;
    if (memh != NULL) {
        fi_close(&memh->mr->fid);
        free(memh);
    }
}

static size_t axon_ofi_rkey_pack(axon_md_t *tl_md, const void *memh_v, void *rkey_buf)
{
    const axon_ofi_md_t   *md   = (const axon_ofi_md_t*)tl_md;
    const axon_ofi_memh_t *memh = memh_v;
    axon_ofi_rkey_t        rkey;

    rkey.key    = memh->key;
    /*
     * The provider's reported mr_mode decides: without FI_MR_VIRT_ADDR the
     * target adds the region's start to what it gets (libfabric 1.17's tcp
     * reports mr_mode 0 and does exactly that), so we send offsets.
     */
    rkey.base   = (md->mr_mode & FI_MR_VIRT_ADDR) ? 0 : memh->start;
    rkey.start  = memh->start;
    rkey.length = memh->length;
    memcpy(rkey_buf, &rkey, sizeof(rkey));
    return sizeof(rkey);
}

static void axon_ofi_md_close(axon_md_t *tl_md)
{
    axon_ofi_md_t *md = (axon_ofi_md_t*)tl_md;

    if (md->domain != NULL) {
        fi_close(&md->domain->fid);
    }
    if (md->fabric != NULL) {
        fi_close(&md->fabric->fid);
    }
    if (md->info != NULL) {
        fi_freeinfo(md->info);
    }
    free(md);
}

static const axon_md_ops_t axon_ofi_md_ops = {
    .md_close     = axon_ofi_md_close,
    .rkey_max_len = sizeof(axon_ofi_rkey_t),
    .mem_reg      = axon_ofi_mem_reg,
    .mem_dereg    = axon_ofi_mem_dereg,
    .rkey_pack    = axon_ofi_rkey_pack,
};

axon_status_t axon_ofi_md_open(const axon_resource_t *resource, const void *config,
                               axon_md_t **md_p)
{
    const struct fi_info *pick;
    struct fi_info       *list = NULL;
    axon_ofi_md_t        *md;
    const char           *what;
    int                   ret;

    (void)config;
    md = calloc(1, sizeof(*md));
    if (md == NULL) {
        axon_error("ofi/%s: cannot allocate a memory domain", resource->dev_name);
        return AXON_ERR_NO_MEMORY;
    }
    md->super.ops = &axon_ofi_md_ops;
    md->next_key  = 1;
    snprintf(md->name, sizeof(md->name), "ofi/%s", resource->dev_name);
    /* The same entry query saw: the provider's first domain past this host. */
    what = "fi_getinfo";
    ret  = axon_ofi_getinfo(resource->dev_name, !!(resource->cap_flags & AXON_CAP_GET), &list);
    if (ret == 0) {
        pick     = axon_ofi_info_pick(list);
        md->info = fi_dupinfo(pick);
        fi_freeinfo(list);
        ret      = (md->info != NULL) ? 0 : -FI_ENOMEM;
    }
    if (ret == 0) {
        md->mr_mode = md->info->domain_attr->mr_mode;
        what = "fi_fabric";
        ret  = fi_fabric(md->info->fabric_attr, &md->fabric, NULL);
    }
    if (ret == 0) {
        what = "fi_domain";
        ret  = fi_domain(md->fabric, md->info, &md->domain, NULL);
    }
    if (ret != 0) {
        axon_error("%s: %s failed: %s", md->name, what, fi_strerror(-ret));
        axon_ofi_md_close(&md->super);
        return axon_ofi_status(ret);
    }
    *md_p = &md->super;
    return AXON_OK;
}
