/*
 * Protection domains, memory regions and address handles.
 */
#include <endian.h>
#include <stdlib.h>
#include <string.h>
#include "log.h"
#include "vabi.h"

#undef ibv_reg_mr        /* verbs.h maps these to inline wrappers; we define the entry points */
#undef ibv_reg_mr_iova

struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
    vabi_pd_t *pd = calloc(1, sizeof(*pd));
    int ret;

    if (pd == NULL) {
        return vabi_fail_null(ENOMEM);
    }
    if ((ret = axon_dev_alloc_pd(vabi_dev(context), &pd->dev)) != 0) {
        free(pd);
        return vabi_fail_null(ret);
    }
    pd->ibv.context = context;
    pd->ibv.handle  = pd->dev->handle;
    return &pd->ibv;
}

int ibv_dealloc_pd(struct ibv_pd *pd)
{
    int ret = axon_dev_dealloc_pd(VABI(pd, pd)->dev);

    if (ret == 0) {
        free(pd);
    }
    return ret;
}

/* The access flags softib's memory regions know; the optional ones may be dropped (verbs.h). */
#define VABI_ACCESS_KNOWN (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
                           IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND)

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
                                unsigned int access)
{
    unsigned int required = access & ~(unsigned)IBV_ACCESS_OPTIONAL_RANGE;
    vabi_mr_t *mr;
    int ret;

    if (iova != (uintptr_t)addr) {
        /* softib's remote addresses are the registering process's virtual addresses */
        axon_error("libibverbs on softib: reg_mr: iova 0x%llx differs from the address %p "
                   "(softib has no zero-based or offset regions)", (unsigned long long)iova, addr);
        return vabi_fail_null(EOPNOTSUPP);
    }
    if (required & ~VABI_ACCESS_KNOWN) {
        axon_error("libibverbs on softib: reg_mr: access flags 0x%x not supported (softib has "
                   "no zero-based, on-demand or hugetlb regions)", required & ~VABI_ACCESS_KNOWN);
        return vabi_fail_null(EOPNOTSUPP);
    }
    mr = calloc(1, sizeof(*mr));
    if (mr == NULL) {
        return vabi_fail_null(ENOMEM);
    }
    if ((ret = axon_dev_reg_mr(VABI(pd, pd)->dev, addr, length, (int)required, &mr->dev)) != 0) {
        free(mr);
        return vabi_fail_null(ret);
    }
    mr->ibv.context = pd->context;
    mr->ibv.pd      = pd;
    mr->ibv.addr    = addr;
    mr->ibv.length  = length;
    mr->ibv.handle  = mr->dev->lkey;
    mr->ibv.lkey    = mr->dev->lkey;
    mr->ibv.rkey    = mr->dev->rkey;
    return &mr->ibv;
}

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
    return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr, (unsigned)access);
}

struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
                               int access)
{
    return ibv_reg_mr_iova2(pd, addr, length, iova, (unsigned)access);
}

int ibv_dereg_mr(struct ibv_mr *mr)
{
    int ret = axon_dev_dereg_mr(VABI(mr, mr)->dev);

    if (ret == 0) {
        free(mr);
    }
    return ret;
}

struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
    axon_dev_ah_attr_t dattr;
    const struct ibv_ah_attr *in = attr;
    axon_dev_ah_attr_t *out = &dattr;
    vabi_ah_t *ah;
    int ret;

    AXON_DEV_IBV_CONVERT(AXON_DEV_IBV_AH_ATTR);
    ah = calloc(1, sizeof(*ah));
    if (ah == NULL) {
        return vabi_fail_null(ENOMEM);
    }
    if ((ret = axon_dev_create_ah(VABI(pd, pd)->dev, &dattr, &ah->dev)) != 0) {
        free(ah);
        return vabi_fail_null(ret);
    }
    ah->ibv.context = pd->context;
    ah->ibv.pd      = pd;
    return &ah->ibv;
}

int ibv_destroy_ah(struct ibv_ah *ah)
{
    int ret = axon_dev_destroy_ah(VABI(ah, ah)->dev);

    if (ret == 0) {
        free(ah);
    }
    return ret;
}

/*
 * The address handle that answers a received UD message: back to its
 * source, from the GRH the device wrote before the payload (softib's port
 * is RoCE-like, so every UD receive carries one).
 */
int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num, struct ibv_wc *wc,
                        struct ibv_grh *grh, struct ibv_ah_attr *ah_attr)
{
    union ibv_gid gid;
    uint32_t flow;
    int index;

    memset(ah_attr, 0, sizeof(*ah_attr));
    ah_attr->dlid          = wc->slid;
    ah_attr->sl            = wc->sl;
    ah_attr->src_path_bits = wc->dlid_path_bits;
    ah_attr->port_num      = port_num;
    if (!(wc->wc_flags & IBV_WC_GRH)) {
        axon_error("libibverbs on softib: init_ah_from_wc: the completion has no GRH "
                   "(an Ethernet port needs one to reply)");
        errno = EINVAL;
        return -1;
    }
    /* The GID the message was sent to is ours: its index is our source GID. */
    for (index = 0; !ibv_query_gid(context, port_num, index, &gid); index++) {
        if (!memcmp(&gid, &grh->dgid, sizeof(gid))) {
            break;
        }
    }
    if (memcmp(&gid, &grh->dgid, sizeof(gid))) {
        axon_error("libibverbs on softib: init_ah_from_wc: the GRH's destination GID is not "
                   "one of port %u", port_num);
        errno = EINVAL;
        return -1;
    }
    flow = be32toh(grh->version_tclass_flow);
    ah_attr->is_global          = 1;
    ah_attr->grh.dgid           = grh->sgid;
    ah_attr->grh.sgid_index     = (uint8_t)index;
    ah_attr->grh.flow_label     = flow & 0xfffff;
    ah_attr->grh.traffic_class  = (flow >> 20) & 0xff;
    ah_attr->grh.hop_limit      = 0xff;
    return 0;
}

struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc, struct ibv_grh *grh,
                                     uint8_t port_num)
{
    struct ibv_ah_attr attr;

    if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr)) {
        return NULL;
    }
    return ibv_create_ah(pd, &attr);
}
