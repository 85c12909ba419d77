/*
 * Memory registration. Messages need none (descriptors are ignored), so a
 * registration without remote access is bookkeeping only. One with
 * FI_REMOTE_READ/FI_REMOTE_WRITE is mapped with axon_mem_map and its key
 * packed once; the domain's table (key -> region) is what a peer's address
 * server request for the key is answered from (axon_fi_addr.c), because a
 * libfabric key is 64 bits and Axon's packed key 100+ bytes.
 *
 * Modes (the domain's mr_mode, as fi_getinfo answered it):
 *   FI_MR_PROV_KEY   the provider picks keys (a counter: never reused in a domain);
 *                    without it the requested key names the region, a duplicate
 *                    fails with -FI_ENOKEY
 *   FI_MR_VIRT_ADDR  remote addresses are virtual addresses; without it they are
 *                    offsets, the region's start being the registration's offset
 * Peers get the difference as an addend: Axon address = libfabric address + addend.
 *
 * Shared pages (FI_AXON_MR_SHARE): a region mapped with AXON_MEM_MAP_SHARED
 * has its whole pages moved into memory peers on the host map, so their
 * puts, gets and atomics on it are loads and stores instead of a system
 * call each. By default in domains where keys are the application's and
 * addresses offsets (FI_MR_SCALABLE): what SHMEM libraries register their
 * symmetric heap and data with, once, at start; not in basic-mode domains
 * (MPI's BTLs, registering buffers as they come). Axon declines what must
 * not move (shared or read-only memory) and maps it plainly.
 *
 * FI_RMA_EVENT (a domain opened with it): the exported key tells peers to
 * count each access at the target: by adding to the region's words at the
 * endpoint asked (a slot of the domain's, axon_fi_event_words.c), or, the
 * region having no slot, by a message (axon_fi_event.c); fi_mr_bind attaches
 * the counters they move (FI_REMOTE_WRITE / FI_REMOTE_READ).
 */
#include <endian.h>
#include <stdlib.h>
#include <string.h>
#include "axon_fi.h"

#define AXON_FI_MR_LOCAL_ACCESS  (FI_SEND | FI_RECV | FI_READ | FI_WRITE)
#define AXON_FI_MR_REMOTE_ACCESS (FI_REMOTE_READ | FI_REMOTE_WRITE)

typedef struct {
    struct fid_mr     mr_fid;
    axon_fi_domain_t *domain;
    axon_mem_h        memh;        /* NULL: no remote access granted */
    void             *packed;      /* axon_rkey_pack's buffer */
    size_t            packed_len;
    uint64_t          addend;
    axon_fi_cntr_t   *wr_cntr;     /* FI_REMOTE_WRITE events (fi_mr_bind), or NULL */
    axon_fi_cntr_t   *rd_cntr;     /* FI_REMOTE_READ events */
    int32_t           slot;        /* FI_RMA_EVENT: its words' slot; -1: by messages */
} axon_fi_mr_t;

uint64_t axon_fi_mr_mode_bits(uint64_t mr_mode)
{
    if (mr_mode == FI_MR_BASIC) {
        return FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    }
    return (mr_mode == FI_MR_SCALABLE) ? 0 : mr_mode;
}

int axon_fi_mr_export(axon_fi_domain_t *domain, const axon_fi_event_words_t *words,
                      uint64_t key, void **blob_p, size_t *len_p)
{
    axon_fi_mr_blob_t b = {0};
    axon_fi_mr_t *mr = NULL;
    uint8_t *blob = NULL;
    uint64_t val;

    pthread_mutex_lock(&domain->mr_lock);
    if (axon_fi_map_get(&domain->mr_by_key, key + 1, &val)) {
        mr = (axon_fi_mr_t *)(uintptr_t)val;
        b.addend  = mr->addend;
        b.key     = mr->packed;
        b.key_len = mr->packed_len;
        if (domain->rma_event) {
            b.flags = AXON_FI_MR_BLOB_EVENTS;
            if ((mr->slot >= 0) && (words != NULL) && (words->packed != NULL)) {
                b.flags        |= AXON_FI_MR_BLOB_WORDS;
                b.word          = (uint64_t)(uintptr_t)(words->base + 2 * mr->slot);
                b.words_key     = words->packed;
                b.words_key_len = words->packed_len;
            }
        }
        blob = malloc(AXON_FI_MR_BLOB_HEAD + AXON_FI_MR_BLOB_WORDS_HEAD + b.words_key_len +
                      b.key_len);
        if (blob != NULL) {
            *len_p = axon_fi_mr_blob_write(blob, &b);
        }
    }
    pthread_mutex_unlock(&domain->mr_lock);
    *blob_p = blob;
    return (mr == NULL) ? -FI_ENOKEY : (blob == NULL) ? -FI_ENOMEM : 0;
}

axon_fi_cntr_t *axon_fi_mr_event_cntr(axon_fi_domain_t *domain, uint64_t key, unsigned kind)
{
    axon_fi_cntr_t *cntr = NULL;
    axon_fi_mr_t *mr;
    uint64_t val;

    pthread_mutex_lock(&domain->mr_lock);
    if (axon_fi_map_get(&domain->mr_by_key, key + 1, &val)) {
        mr   = (axon_fi_mr_t *)(uintptr_t)val;
        cntr = (kind == AXON_FI_EVENT_WRITE) ? mr->wr_cntr : mr->rd_cntr;
    }
    pthread_mutex_unlock(&domain->mr_lock);
    return cntr;
}

/* fi_mr_bind(mr, cntr, FI_REMOTE_WRITE | FI_REMOTE_READ): counters of remote accesses. */
static int axon_fi_mr_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
    axon_fi_mr_t *mr = container_of(fid, axon_fi_mr_t, mr_fid.fid);
    axon_fi_domain_t *domain = mr->domain;
    axon_fi_cntr_t *cntr;

    if (bfid->fclass != FI_CLASS_CNTR) {
        AXON_FI_WARN(FI_LOG_MR, "fi_mr_bind: class %zu (a counter only: no FI_MR_ENDPOINT)",
                     bfid->fclass);
        return -FI_EINVAL;
    }
    if (!domain->rma_event || (mr->memh == NULL) || (flags == 0) ||
        (flags & ~(uint64_t)AXON_FI_MR_REMOTE_ACCESS)) {
        AXON_FI_WARN(FI_LOG_MR, "fi_mr_bind: flags 0x%llx on a region %s: FI_REMOTE_WRITE "
                     "and/or FI_REMOTE_READ on a remotely accessible region of a domain "
                     "with FI_RMA_EVENT", (unsigned long long)flags,
                     !domain->rma_event ? "of a domain without FI_RMA_EVENT" :
                     (mr->memh == NULL) ? "without remote access" : "with remote access");
        return -FI_EINVAL;
    }
    cntr = container_of(bfid, axon_fi_cntr_t, cntr_fid.fid);
    if (((flags & FI_REMOTE_WRITE) && (mr->wr_cntr != NULL)) ||
        ((flags & FI_REMOTE_READ) && (mr->rd_cntr != NULL))) {
        AXON_FI_WARN(FI_LOG_MR, "fi_mr_bind: the region already has a counter for 0x%llx",
                     (unsigned long long)flags);
        return -FI_EINVAL;
    }
    axon_fi_lock(domain);
    pthread_mutex_lock(&domain->mr_lock);
    if (flags & FI_REMOTE_WRITE) {
        mr->wr_cntr = cntr;
        ++cntr->refs;
    }
    if (flags & FI_REMOTE_READ) {
        mr->rd_cntr = cntr;
        ++cntr->refs;
    }
    if (mr->slot >= 0) {   /* what the harvest moves */
        domain->event_slots[mr->slot].cntr[0] = mr->wr_cntr;
        domain->event_slots[mr->slot].cntr[1] = mr->rd_cntr;
    }
    cntr->remote  = 1;
    cntr->harvest = 1;
    pthread_mutex_unlock(&domain->mr_lock);
    axon_fi_unlock(domain);
    return 0;
}

static int axon_fi_mr_close(struct fid *fid)
{
    axon_fi_mr_t *mr = container_of(fid, axon_fi_mr_t, mr_fid.fid);
    axon_fi_domain_t *domain = mr->domain;

    if (mr->memh != NULL) {
        /* Out of the table first: no peer fetches the key once it is unmapped. */
        pthread_mutex_lock(&domain->mr_lock);
        axon_fi_map_del(&domain->mr_by_key, mr->mr_fid.key + 1);
        pthread_mutex_unlock(&domain->mr_lock);
        axon_rkey_buffer_release(mr->packed);
        axon_mem_unmap(domain->fabric->context, mr->memh);
    }
    axon_fi_lock(domain);
    axon_fi_event_slot_put(domain, mr->slot);   /* its words harvested first */
    if (mr->wr_cntr != NULL) {
        --mr->wr_cntr->refs;
    }
    if (mr->rd_cntr != NULL) {
        --mr->rd_cntr->refs;
    }
    --domain->refs;
    axon_fi_unlock(domain);
    free(mr);
    return 0;
}

static int axon_fi_mr_control(struct fid *fid, int command, void *arg)
{
    return (command == FI_ENABLE) ? 0 : -FI_ENOSYS;
}

static struct fi_ops axon_fi_mr_fi_ops = {
    .size     = sizeof(struct fi_ops),
    .close    = axon_fi_mr_close,
    .bind     = axon_fi_mr_bind,
    .control  = axon_fi_mr_control,
    .ops_open = axon_fi_no_ops_open,
};

int axon_fi_mr_share_wanted(uint64_t mr_mode)
{
    char *v = NULL;

    if ((fi_param_get_str(&axon_fi_prov, "mr_share", &v) == FI_SUCCESS) && (v != NULL) &&
        (*v != '\0') && (strcmp(v, "auto") != 0)) {
        if ((strcmp(v, "1") == 0) || (strcmp(v, "0") == 0)) {
            return *v == '1';
        }
        AXON_FI_WARN(FI_LOG_MR, "FI_AXON_MR_SHARE=%s: not auto, 1 or 0; auto it is", v);
    }
    return !(mr_mode & (FI_MR_VIRT_ADDR | FI_MR_PROV_KEY));
}

/* Map the region, pack its key and enter it in the domain's table under its key. */
static int axon_fi_mr_grant(axon_fi_mr_t *mr, const struct fi_mr_attr *attr)
{
    axon_fi_domain_t *domain = mr->domain;
    axon_mem_map_params_t params = {attr->mr_iov[0].iov_base, attr->mr_iov[0].iov_len,
                                    domain->mr_share ? AXON_MEM_MAP_SHARED : 0, NULL};
    axon_status_t status;
    uint64_t key, found;
    int ret = 0;

    status = axon_mem_map(domain->fabric->context, &params, &mr->memh);
    if (status == AXON_OK) {
        status = axon_rkey_pack(domain->fabric->context, mr->memh, &mr->packed,
                                &mr->packed_len);
        if (status != AXON_OK) {
            axon_mem_unmap(domain->fabric->context, mr->memh);
        }
    }
    if (status != AXON_OK) {
        AXON_FI_WARN(FI_LOG_MR, "fi_mr_reg: mapping %zu bytes at %p failed: %s", params.length,
                     params.address, axon_status_string(status));
        mr->memh = NULL;
        return -axon_fi_errno(status);
    }
    mr->addend = (domain->mr_mode & FI_MR_VIRT_ADDR) ? 0 :
                 (uint64_t)(uintptr_t)params.address - attr->offset;
    if (domain->rma_event) {
        axon_fi_lock(domain);
        mr->slot = axon_fi_event_slot_get(domain);   /* none free: it counts by messages */
        axon_fi_unlock(domain);
    }

    pthread_mutex_lock(&domain->mr_lock);
    key = (domain->mr_mode & FI_MR_PROV_KEY) ? domain->next_prov_key++ : attr->requested_key;
    if (key == UINT64_MAX) {
        AXON_FI_WARN(FI_LOG_MR, "fi_mr_reg: key 0x%llx is reserved", (unsigned long long)key);
        ret = -FI_ENOKEY;
    } else if (axon_fi_map_get(&domain->mr_by_key, key + 1, &found)) {
        AXON_FI_WARN(FI_LOG_MR, "fi_mr_reg: key %llu is already registered in the domain",
                     (unsigned long long)key);
        ret = -FI_ENOKEY;
    } else {
        ret = axon_fi_map_put(&domain->mr_by_key, key + 1, (uintptr_t)mr);
    }
    pthread_mutex_unlock(&domain->mr_lock);
    if (ret != 0) {
        axon_fi_lock(domain);
        axon_fi_event_slot_put(domain, mr->slot);
        axon_fi_unlock(domain);
        mr->slot = -1;
        axon_rkey_buffer_release(mr->packed);
        axon_mem_unmap(domain->fabric->context, mr->memh);
        mr->memh = NULL;
        return ret;
    }
    mr->mr_fid.key = key;
    return 0;
}

static int axon_fi_mr_regattr(struct fid *fid, const struct fi_mr_attr *attr, uint64_t flags,
                              struct fid_mr **mr_p)
{
    axon_fi_domain_t *domain = container_of(fid, axon_fi_domain_t, domain_fid.fid);
    axon_fi_mr_t *mr;
    int ret;

    if ((attr == NULL) || (attr->iov_count > 1)) {
        AXON_FI_WARN(FI_LOG_MR, "fi_mr_reg: %zu iovs (mr_iov_limit is 1)",
                     attr ? attr->iov_count : 0);
        return -FI_EINVAL;
    }
    if (attr->access & ~(uint64_t)(AXON_FI_MR_LOCAL_ACCESS | AXON_FI_MR_REMOTE_ACCESS)) {
        AXON_FI_WARN(FI_LOG_MR, "fi_mr_reg: access 0x%llx not supported",
                     (unsigned long long)attr->access);
        return -FI_EINVAL;
    }
    if ((flags != 0) || (attr->iface != FI_HMEM_SYSTEM)) {
        AXON_FI_WARN(FI_LOG_MR, "fi_mr_reg: flags 0x%llx, iface %d: host memory only",
                     (unsigned long long)flags, (int)attr->iface);
        return -FI_EINVAL;
    }
    mr = calloc(1, sizeof(*mr));
    if (mr == NULL) {
        return -FI_ENOMEM;
    }
    mr->domain               = domain;
    mr->mr_fid.fid.fclass    = FI_CLASS_MR;
    mr->mr_fid.fid.context   = attr->context;
    mr->mr_fid.fid.ops       = &axon_fi_mr_fi_ops;
    mr->mr_fid.mem_desc      = mr;
    mr->mr_fid.key           = attr->requested_key;
    mr->slot                 = -1;
    /* Axon maps no empty range: an empty region has nothing to reach remotely. */
    if ((attr->access & AXON_FI_MR_REMOTE_ACCESS) && (attr->iov_count == 1) &&
        (attr->mr_iov[0].iov_len > 0)) {
        ret = axon_fi_mr_grant(mr, attr);
        if (ret != 0) {
            free(mr);
            return ret;
        }
    } else if (domain->mr_mode & FI_MR_PROV_KEY) {
        pthread_mutex_lock(&domain->mr_lock);
        mr->mr_fid.key = domain->next_prov_key++;   /* a key nobody can use remotely */
        pthread_mutex_unlock(&domain->mr_lock);
    }
    axon_fi_lock(domain);
    ++domain->refs;
    axon_fi_unlock(domain);
    *mr_p = &mr->mr_fid;
    return 0;
}

static int axon_fi_mr_regv(struct fid *fid, const struct iovec *iov, size_t count,
                           uint64_t access, uint64_t offset, uint64_t requested_key,
                           uint64_t flags, struct fid_mr **mr, void *context)
{
    struct fi_mr_attr attr = {
        .mr_iov        = iov,
        .iov_count     = count,
        .access        = access,
        .offset        = offset,
        .requested_key = requested_key,
        .context       = context,
        .iface         = FI_HMEM_SYSTEM,
    };

    return axon_fi_mr_regattr(fid, &attr, flags, mr);
}

static int axon_fi_mr_reg(struct fid *fid, const void *buf, size_t len, uint64_t access,
                          uint64_t offset, uint64_t requested_key, uint64_t flags,
                          struct fid_mr **mr, void *context)
{
    struct iovec iov = {(void *)buf, len};

    return axon_fi_mr_regv(fid, &iov, 1, access, offset, requested_key, flags, mr, context);
}

struct fi_ops_mr axon_fi_mr_ops = {
    .size    = sizeof(struct fi_ops_mr),
    .reg     = axon_fi_mr_reg,
    .regv    = axon_fi_mr_regv,
    .regattr = axon_fi_mr_regattr,
};
