/*
 * Memory registration: Axon needs none for messages (mr_mode 0: descriptors
 * are ignored), but applications may register anyway (fabtests always does
 * for some buffers), so fi_mr_reg gives a region object that records what
 * was asked. Without FI_RMA there is no remote access to grant.
 */
#include <stdlib.h>
#include "axon_fi.h"

#define AXON_FI_MR_ACCESS (FI_SEND | FI_RECV | FI_READ | FI_WRITE)

typedef struct {
    struct fid_mr     mr_fid;
    axon_fi_domain_t *domain;
} axon_fi_mr_t;

static int axon_fi_mr_close(struct fid *fid)
{
    axon_fi_mr_t *mr = container_of(fid, axon_fi_mr_t, mr_fid.fid);

    axon_fi_lock(mr->domain);
    --mr->domain->refs;
    axon_fi_unlock(mr->domain);
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
    .bind     = axon_fi_no_bind,
    .control  = axon_fi_mr_control,
    .ops_open = axon_fi_no_ops_open,
};

static int axon_fi_mr_regattr(struct fid *fid, const struct fi_mr_attr *attr, uint64_t flags,
                              struct fid_mr **mr_p)
{
    axon_fi_domain_t *domain = container_of(fid, axon_fi_domain_t, domain_fid.fid);
    axon_fi_mr_t *mr;

    if ((attr == NULL) || (attr->iov_count > 1)) {
        AXON_FI_WARN(FI_LOG_MR, "fi_mr_reg: %zu iovs (mr_iov_limit is 1)",
                     attr ? attr->iov_count : 0);
        return -FI_EINVAL;
    }
    if (attr->access & ~(uint64_t)AXON_FI_MR_ACCESS) {
        AXON_FI_WARN(FI_LOG_MR, "fi_mr_reg: access 0x%llx asks for remote access (no FI_RMA)",
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
