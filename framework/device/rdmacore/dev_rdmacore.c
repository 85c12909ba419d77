/*
 * The rdma-core back end of the device layer: axon_dev_ops_t over libibverbs.
 * Each axon object wraps its ibv_* object; the ibv object's user context
 * pointer (cq_context, qp_context, srq_context) is set to the wrapper, so
 * completion and async events lead back to the axon object. The user's
 * context pointer lives in the axon object.
 *
 * Built only when configure finds libibverbs. A host without an RDMA device
 * is normal: the back end then lists nothing and says so at debug level.
 */
#include "axon_config.h"
#include "dev_backend.h"
#include "dev_rdmacore.h"
#include "log.h"
#include "topo.h"

#include <endian.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#ifdef HAVE_MLX5DV
#include <infiniband/mlx5dv.h>
#endif

#define AXON_DEV_RDMACORE_NAME "rdma-core"

void axon_dev_rdmacore_device_attr_from_ibv(const struct ibv_device_attr *in,
                                            axon_dev_attr_t *out)
{
    AXON_DEV_IBV_CONVERT(AXON_DEV_IBV_DEVICE_ATTR);
    out->fw_ver[sizeof(out->fw_ver) - 1] = '\0';
    out->node_guid      = be64toh(in->node_guid);        /* network order in ibv */
    out->sys_image_guid = be64toh(in->sys_image_guid);
}

void axon_dev_rdmacore_port_attr_from_ibv(const struct ibv_port_attr *in,
                                          axon_dev_port_attr_t *out)
{
    AXON_DEV_IBV_CONVERT(AXON_DEV_IBV_PORT_ATTR);
}

/* Both directions of one struct, from its field list. */
#define AXON_DEV_RDMACORE_CONVERTERS(_name, _ibv, _axon, _list)                          \
    void axon_dev_rdmacore_##_name##_from_ibv(const struct _ibv *in, _axon *out)         \
    {                                                                                     \
        AXON_DEV_IBV_CONVERT(_list);                                                 \
    }                                                                                     \
    void axon_dev_rdmacore_##_name##_to_ibv(const _axon *in, struct _ibv *out)           \
    {                                                                                     \
        AXON_DEV_IBV_CONVERT(_list);                                                 \
    }

AXON_DEV_RDMACORE_CONVERTERS(ah_attr, ibv_ah_attr, axon_dev_ah_attr_t, AXON_DEV_IBV_AH_ATTR)
AXON_DEV_RDMACORE_CONVERTERS(qp_cap, ibv_qp_cap, axon_dev_qp_cap_t, AXON_DEV_IBV_QP_CAP)
AXON_DEV_RDMACORE_CONVERTERS(qp_attr, ibv_qp_attr, axon_dev_qp_attr_t, AXON_DEV_IBV_QP_ATTR)
AXON_DEV_RDMACORE_CONVERTERS(srq_attr, ibv_srq_attr, axon_dev_srq_attr_t,
                             AXON_DEV_IBV_SRQ_ATTR)

void axon_dev_rdmacore_send_wr_to_ibv(const axon_dev_send_wr_t *in, struct ibv_send_wr *out)
{
    memset(out, 0, sizeof(*out));
    out->wr_id      = in->wr_id;
    out->sg_list    = (struct ibv_sge*)(void*)in->sg_list;
    out->num_sge    = in->num_sge;
    out->opcode     = (enum ibv_wr_opcode)in->opcode;
    out->send_flags = in->send_flags;
    out->imm_data   = in->imm_data;
    switch (in->opcode) {
    case AXON_DEV_WR_ATOMIC_CMP_AND_SWP:
    case AXON_DEV_WR_ATOMIC_FETCH_AND_ADD:
        out->wr.atomic.remote_addr = in->wr.atomic.remote_addr;
        out->wr.atomic.compare_add = in->wr.atomic.compare_add;
        out->wr.atomic.swap        = in->wr.atomic.swap;
        out->wr.atomic.rkey        = in->wr.atomic.rkey;
        break;
    case AXON_DEV_WR_RDMA_WRITE:
    case AXON_DEV_WR_RDMA_WRITE_WITH_IMM:
    case AXON_DEV_WR_RDMA_READ:
        out->wr.rdma.remote_addr = in->wr.rdma.remote_addr;
        out->wr.rdma.rkey        = in->wr.rdma.rkey;
        break;
    default:
        /* SEND: the UD fields matter only on a UD QP; harmless elsewhere. */
        out->wr.ud.ah          = (in->wr.ud.ah != NULL) ?
                                 AXON_DEV_RDMACORE(ah, in->wr.ud.ah)->ibv : NULL;
        out->wr.ud.remote_qpn  = in->wr.ud.remote_qpn;
        out->wr.ud.remote_qkey = in->wr.ud.remote_qkey;
        break;
    }
}

int axon_dev_rdmacore_event_from_ibv(const struct ibv_async_event *in,
                                     axon_dev_async_event_t *out)
{
    memset(out, 0, sizeof(*out));
    out->event_type = (axon_dev_event_type_t)in->event_type;
    switch (axon_dev_ibv_ev_elem((unsigned)in->event_type)) {
    case AXON_DEV_IBV_EV_CQ:
        out->element.cq = &((axon_dev_rdmacore_cq_t*)in->element.cq->cq_context)->super;
        return 0;
    case AXON_DEV_IBV_EV_QP:
        out->element.qp = &((axon_dev_rdmacore_qp_t*)in->element.qp->qp_context)->super;
        return 0;
    case AXON_DEV_IBV_EV_SRQ:
        out->element.srq = &((axon_dev_rdmacore_srq_t*)in->element.srq->srq_context)->super;
        return 0;
    case AXON_DEV_IBV_EV_PORT:
        out->element.port_num = in->element.port_num;
        return 0;
    case AXON_DEV_IBV_EV_DEVICE:
        return 0;
    default:
        return EINVAL;
    }
}

int axon_dev_rdmacore_event_to_ibv(const axon_dev_async_event_t *in,
                                   struct ibv_async_event *out)
{
    memset(out, 0, sizeof(*out));
    out->event_type = (enum ibv_event_type)in->event_type;
    switch (axon_dev_ibv_ev_elem((unsigned)in->event_type)) {
    case AXON_DEV_IBV_EV_CQ:
        out->element.cq = AXON_DEV_RDMACORE(cq, in->element.cq)->ibv;
        return 0;
    case AXON_DEV_IBV_EV_QP:
        out->element.qp = AXON_DEV_RDMACORE(qp, in->element.qp)->ibv;
        return 0;
    case AXON_DEV_IBV_EV_SRQ:
        out->element.srq = AXON_DEV_RDMACORE(srq, in->element.srq)->ibv;
        return 0;
    case AXON_DEV_IBV_EV_PORT:
        out->element.port_num = in->element.port_num;
        return 0;
    case AXON_DEV_IBV_EV_DEVICE:
        return 0;
    default:
        return EINVAL;
    }
}

/* ------------------------------------------------------------ helpers */

/* errno of a failed ibv call that returns NULL or -1; never 0. */
static int axon_dev_rdmacore_errno(void)
{
    return (errno > 0) ? errno : EIO;
}

/* Allocate a zeroed wrapper or log; every object creation starts here. */
static void *axon_dev_rdmacore_alloc(size_t size, const char *what)
{
    void *obj = calloc(1, size);

    if (obj == NULL) {
        axon_error("rdma-core: cannot allocate a %s", what);
    }
    return obj;
}

/* An ibv call that creates an object returned NULL: log why, free the wrapper, return errno. */
static int __attribute__((format(printf, 2, 3)))
axon_dev_rdmacore_create_failed(void *wrapper, const char *call_fmt, ...)
{
    int ret = axon_dev_rdmacore_errno();
    char call[160];
    va_list ap;

    va_start(ap, call_fmt);
    vsnprintf(call, sizeof(call), call_fmt, ap);
    va_end(ap);
    axon_error("rdma-core: %s failed: %s", call, strerror(ret));
    free(wrapper);
    return ret;
}

#define AXON_DEV_RDMACORE_CHECK(_cond, _fmt, ...)                          \
    do {                                                                 \
        if (!(_cond)) {                                                  \
            axon_error("rdma-core: " _fmt, ## __VA_ARGS__);              \
            return EINVAL;                                               \
        }                                                                \
    } while (0)

/*
 * Destroy an object and free its wrapper; a wrapper the device refuses to
 * destroy stays the caller's (verbs' rule: the object still exists).
 */
#define AXON_DEV_RDMACORE_DESTROY(_name, _kind, _type, _verb)             \
    static int axon_dev_rdmacore_##_name(_type *obj)                     \
    {                                                                    \
        int ret = _verb(AXON_DEV_RDMACORE(_kind, obj)->ibv);             \
                                                                         \
        if (ret != 0) {                                                  \
            ret = (ret > 0) ? ret : axon_dev_rdmacore_errno();           \
            axon_debug("rdma-core: " #_verb " failed: %s", strerror(ret)); \
            return ret;                                                  \
        }                                                                \
        free(AXON_DEV_RDMACORE(_kind, obj));                             \
        return 0;                                                        \
    }

/* ------------------------------------------------------------ device */

static const axon_dev_ops_t axon_dev_rdmacore_ops;

static void axon_dev_rdmacore_close(axon_dev_context_t *ctx)
{
    axon_dev_rdmacore_context_t *rctx = AXON_DEV_RDMACORE(context, ctx);
    int ret;

    ret = ibv_close_device(rctx->ibv);
    if (ret != 0) {
        axon_warn("rdma-core: closing %s failed: %s", ctx->name, strerror(errno));
    }
    free(rctx);
}

/*
 * struct ibv_device_attr has no inline limit: find it the way an application
 * would, by creating a throwaway RC QP and reading back what it granted.
 */
static int axon_dev_rdmacore_probe_inline(axon_dev_rdmacore_context_t *rctx)
{
    static const uint32_t sizes[] = {1024, 512, 256, 128, 64, 32};
    struct ibv_qp_init_attr init;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    int result = 0;
    size_t i;

    pd = ibv_alloc_pd(rctx->ibv);
    if (pd == NULL) {
        return 0;
    }
    cq = ibv_create_cq(rctx->ibv, 1, NULL, NULL, 0);
    if (cq == NULL) {
        ibv_dealloc_pd(pd);
        return 0;
    }
    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
        memset(&init, 0, sizeof(init));
        init.send_cq             = cq;
        init.recv_cq             = cq;
        init.qp_type             = IBV_QPT_RC;
        init.cap.max_send_wr     = 1;
        init.cap.max_recv_wr     = 1;
        init.cap.max_send_sge    = 1;
        init.cap.max_recv_sge    = 1;
        init.cap.max_inline_data = sizes[i];
        qp = ibv_create_qp(pd, &init);
        if (qp != NULL) {
            result = (int)init.cap.max_inline_data;
            ibv_destroy_qp(qp);
            break;
        }
    }
    ibv_destroy_cq(cq);
    ibv_dealloc_pd(pd);
    axon_debug("rdma-core: %s: max_inline_data %d", rctx->super.name, result);
    return result;
}

/* DC (seed §8.6) is mlx5dv's DCI/DCT QPs upstream: reported unsupported, with this reason. */
#define AXON_DEV_RDMACORE_NO_DC "the rdma-core back end does not drive mlx5dv DCI/DCT QPs"
/* UMR (seed §8.8) is mlx5dv_create_mkey and its mkey WRs upstream, which need an mlx5 to
 * be verified on: the same, with this reason. */
#define AXON_DEV_RDMACORE_NO_UMR "the rdma-core back end does not drive mlx5dv_create_mkey"

#ifdef HAVE_MLX5DV
/* The experimental capabilities, where the device is an mlx5 (seed §8). */
static void axon_dev_rdmacore_query_mlx5dv(axon_dev_rdmacore_context_t *rctx,
                                           axon_dev_attr_t *attr)
{
    struct mlx5dv_context dv;

    if (!mlx5dv_is_supported(rctx->ibv->device)) {
        return;
    }
    memset(&dv, 0, sizeof(dv));
    dv.comp_mask = MLX5DV_CONTEXT_MASK_DC_ODP_CAPS | MLX5DV_CONTEXT_MASK_DCI_STREAMS;
    if (mlx5dv_query_device(rctx->ibv, &dv) != 0) {
        axon_debug("rdma-core: %s: mlx5dv_query_device failed", rctx->super.name);
        return;
    }
    /* The provider answers the DC masks only when the kernel speaks DC; the
     * flag stays clear while this back end cannot create DCIs and DCTs. */
    if (dv.comp_mask & (MLX5DV_CONTEXT_MASK_DC_ODP_CAPS | MLX5DV_CONTEXT_MASK_DCI_STREAMS)) {
        axon_debug("rdma-core: %s: the device has DC, but %s", rctx->super.name,
                   AXON_DEV_RDMACORE_NO_DC);
    }
    /* Every mlx5 has indirect mkeys (mlx5dv_create_mkey); the flag stays clear likewise. */
    axon_debug("rdma-core: %s: the device has UMR, but %s", rctx->super.name,
               AXON_DEV_RDMACORE_NO_UMR);
    /*
     * Extended (masked) atomics: left zero. The PCIe atomic sizes of
     * ibv_query_device_ex are what the NIC does to host memory, not masked
     * atomics a WR can ask for, and upstream libibverbs / mlx5dv have no
     * masked-atomic work request (post_send refuses those opcodes).
     */
}
#endif

static int axon_dev_rdmacore_query_device(axon_dev_context_t *ctx, axon_dev_attr_t *attr)
{
    axon_dev_rdmacore_context_t *rctx = AXON_DEV_RDMACORE(context, ctx);
    struct ibv_device_attr ibv_attr;
    int ret;

    AXON_DEV_RDMACORE_CHECK(attr != NULL, "query_device: NULL attr");
    ret = ibv_query_device(rctx->ibv, &ibv_attr);
    if (ret != 0) {
        axon_error("rdma-core: %s: ibv_query_device failed: %s", ctx->name, strerror(ret));
        return ret;
    }
    axon_dev_rdmacore_device_attr_from_ibv(&ibv_attr, attr);
    if (rctx->max_inline < 0) {
        rctx->max_inline = axon_dev_rdmacore_probe_inline(rctx);
    }
    attr->max_inline_data = (uint32_t)rctx->max_inline;
    /* Every verbs HCA has the three QP types and completion channels. */
    attr->cap_flags = AXON_DEV_CAP_RC | AXON_DEV_CAP_UC | AXON_DEV_CAP_UD |
                      AXON_DEV_CAP_COMP_CHANNEL;
    if (attr->max_srq > 0) {
        attr->cap_flags |= AXON_DEV_CAP_SRQ;
    }
    if (attr->atomic_cap != AXON_DEV_ATOMIC_NONE) {
        attr->cap_flags |= AXON_DEV_CAP_ATOMIC;
    }
    if (attr->max_inline_data > 0) {
        attr->cap_flags |= AXON_DEV_CAP_INLINE;
    }
    if (attr->max_mcast_grp > 0) {
        attr->cap_flags |= AXON_DEV_CAP_MCAST;
    }
#ifdef HAVE_MLX5DV
    axon_dev_rdmacore_query_mlx5dv(rctx, attr);
#endif
    return 0;
}

static int axon_dev_rdmacore_query_port(axon_dev_context_t *ctx, uint8_t port_num,
                                        axon_dev_port_attr_t *attr)
{
    struct ibv_port_attr ibv_attr;
    int ret;

    AXON_DEV_RDMACORE_CHECK(attr != NULL, "query_port: NULL attr");
    memset(&ibv_attr, 0, sizeof(ibv_attr));
    ret = ibv_query_port(AXON_DEV_RDMACORE(context, ctx)->ibv, port_num, &ibv_attr);
    if (ret != 0) {
        axon_error("rdma-core: %s: query_port %u failed: %s", ctx->name, port_num,
                   strerror(ret));
        return ret;
    }
    axon_dev_rdmacore_port_attr_from_ibv(&ibv_attr, attr);
    return 0;
}

static int axon_dev_rdmacore_query_gid(axon_dev_context_t *ctx, uint8_t port_num, int index,
                                       axon_dev_gid_t *gid)
{
    union ibv_gid ibv_gid;

    AXON_DEV_RDMACORE_CHECK(gid != NULL, "query_gid: NULL gid");
    if (ibv_query_gid(AXON_DEV_RDMACORE(context, ctx)->ibv, port_num, index, &ibv_gid) != 0) {
        axon_error("rdma-core: %s: query_gid port %u index %d failed", ctx->name, port_num,
                   index);
        return EINVAL;
    }
    memcpy(gid->raw, ibv_gid.raw, sizeof(gid->raw));
    return 0;
}

/* The P_Key comes back in host order, like every other axon_dev value. */
static int axon_dev_rdmacore_query_pkey(axon_dev_context_t *ctx, uint8_t port_num, int index,
                                        uint16_t *pkey)
{
    __be16 ibv_pkey;

    AXON_DEV_RDMACORE_CHECK(pkey != NULL, "query_pkey: NULL pkey");
    if (ibv_query_pkey(AXON_DEV_RDMACORE(context, ctx)->ibv, port_num, index, &ibv_pkey) != 0) {
        axon_error("rdma-core: %s: query_pkey port %u index %d failed", ctx->name, port_num,
                   index);
        return EINVAL;
    }
    *pkey = be16toh(ibv_pkey);
    return 0;
}

/* ------------------------------------------------------------ PD, MR */

static int axon_dev_rdmacore_alloc_pd(axon_dev_context_t *ctx, axon_dev_pd_t **pd_p)
{
    axon_dev_rdmacore_pd_t *pd;

    AXON_DEV_RDMACORE_CHECK(pd_p != NULL, "alloc_pd: NULL pd_p");
    pd = axon_dev_rdmacore_alloc(sizeof(*pd), "PD");
    if (pd == NULL) {
        return ENOMEM;
    }
    pd->ibv = ibv_alloc_pd(AXON_DEV_RDMACORE(context, ctx)->ibv);
    if (pd->ibv == NULL) {
        return axon_dev_rdmacore_create_failed(pd, "%s: ibv_alloc_pd", ctx->name);
    }
    pd->super.context = ctx;
    pd->super.handle  = pd->ibv->handle;
    *pd_p = &pd->super;
    return 0;
}

AXON_DEV_RDMACORE_DESTROY(dealloc_pd, pd, axon_dev_pd_t, ibv_dealloc_pd)

static int axon_dev_rdmacore_reg_mr(axon_dev_pd_t *pd, void *addr, size_t length, int access,
                                    axon_dev_mr_t **mr_p)
{
    axon_dev_rdmacore_mr_t *mr;

    AXON_DEV_RDMACORE_CHECK(mr_p != NULL, "reg_mr: NULL mr_p");
    mr = axon_dev_rdmacore_alloc(sizeof(*mr), "MR");
    if (mr == NULL) {
        return ENOMEM;
    }
    mr->ibv = ibv_reg_mr(AXON_DEV_RDMACORE(pd, pd)->ibv, addr, length, access);
    if (mr->ibv == NULL) {
        return axon_dev_rdmacore_create_failed(mr, "ibv_reg_mr(%p, %zu, access 0x%x)", addr,
                                               length, access);
    }
    mr->super.context = pd->context;
    mr->super.pd      = pd;
    mr->super.addr    = mr->ibv->addr;
    mr->super.length  = mr->ibv->length;
    mr->super.lkey    = mr->ibv->lkey;
    mr->super.rkey    = mr->ibv->rkey;
    mr->super.access  = access;
    *mr_p = &mr->super;
    return 0;
}

AXON_DEV_RDMACORE_DESTROY(dereg_mr, mr, axon_dev_mr_t, ibv_dereg_mr)

/* ------------------------------------------------------------ CQ, channel */

static int axon_dev_rdmacore_create_comp_channel(axon_dev_context_t *ctx,
                                                 axon_dev_comp_channel_t **ch_p)
{
    axon_dev_rdmacore_channel_t *ch;

    AXON_DEV_RDMACORE_CHECK(ch_p != NULL, "create_comp_channel: NULL ch_p");
    ch = axon_dev_rdmacore_alloc(sizeof(*ch), "completion channel");
    if (ch == NULL) {
        return ENOMEM;
    }
    ch->ibv = ibv_create_comp_channel(AXON_DEV_RDMACORE(context, ctx)->ibv);
    if (ch->ibv == NULL) {
        return axon_dev_rdmacore_create_failed(ch, "%s: ibv_create_comp_channel", ctx->name);
    }
    ch->super.context = ctx;
    ch->super.fd      = ch->ibv->fd;
    *ch_p = &ch->super;
    return 0;
}

AXON_DEV_RDMACORE_DESTROY(destroy_comp_channel, channel, axon_dev_comp_channel_t,
                          ibv_destroy_comp_channel)

static int axon_dev_rdmacore_get_cq_event(axon_dev_comp_channel_t *ch, axon_dev_cq_t **cq_p,
                                          void **cq_context_p)
{
    axon_dev_rdmacore_cq_t *cq;
    struct ibv_cq *ibv_cq;
    void *wrapper;

    AXON_DEV_RDMACORE_CHECK((cq_p != NULL) && (cq_context_p != NULL),
                            "get_cq_event: NULL cq_p or cq_context_p");
    if (ibv_get_cq_event(AXON_DEV_RDMACORE(channel, ch)->ibv, &ibv_cq, &wrapper) != 0) {
        return axon_dev_rdmacore_errno();   /* EAGAIN on a non-blocking fd */
    }
    cq            = wrapper;
    *cq_p         = &cq->super;
    *cq_context_p = cq->super.cq_context;
    return 0;
}

static void axon_dev_rdmacore_ack_cq_events(axon_dev_cq_t *cq, unsigned int nevents)
{
    ibv_ack_cq_events(AXON_DEV_RDMACORE(cq, cq)->ibv, nevents);
}

static int axon_dev_rdmacore_create_cq(axon_dev_context_t *ctx, int cqe, void *cq_context,
                                       axon_dev_comp_channel_t *channel, int comp_vector,
                                       axon_dev_cq_t **cq_p)
{
    axon_dev_rdmacore_cq_t *cq;

    AXON_DEV_RDMACORE_CHECK(cq_p != NULL, "create_cq: NULL cq_p");
    AXON_DEV_RDMACORE_CHECK(cqe > 0, "create_cq: invalid cqe %d", cqe);
    cq = axon_dev_rdmacore_alloc(sizeof(*cq), "CQ");
    if (cq == NULL) {
        return ENOMEM;
    }
    cq->ibv = ibv_create_cq(AXON_DEV_RDMACORE(context, ctx)->ibv, cqe, cq,
                            (channel != NULL) ? AXON_DEV_RDMACORE(channel, channel)->ibv : NULL,
                            comp_vector);
    if (cq->ibv == NULL) {
        return axon_dev_rdmacore_create_failed(cq, "%s: ibv_create_cq(%d)", ctx->name, cqe);
    }
    cq->super.context    = ctx;
    cq->super.channel    = channel;
    cq->super.cq_context = cq_context;
    cq->super.cqe        = cq->ibv->cqe;
    *cq_p = &cq->super;
    return 0;
}

/*
 * Cross-channel (seed §8.9) exists only in the old MLNX_OFED "exp" verbs;
 * upstream rdma-core has no such interface: refused, with the reason.
 */
#define AXON_DEV_RDMACORE_NO_XCHAN "upstream rdma-core has no cross-channel verbs"

static int axon_dev_rdmacore_create_cq_ex(axon_dev_context_t *ctx, int cqe, void *cq_context,
                                          axon_dev_comp_channel_t *channel, int comp_vector,
                                          uint32_t flags, axon_dev_cq_t **cq_p)
{
    if (flags != 0) {
        axon_error("rdma-core: create_cq: flags 0x%x: %s", flags, AXON_DEV_RDMACORE_NO_XCHAN);
        return EOPNOTSUPP;
    }
    return axon_dev_rdmacore_create_cq(ctx, cqe, cq_context, channel, comp_vector, cq_p);
}

static int axon_dev_rdmacore_modify_cq(axon_dev_cq_t *cq, uint32_t cq_cap_flags, int attr_mask)
{
    (void)cq_cap_flags;
    (void)attr_mask;
    axon_error("rdma-core: %s: modify_cq: %s", cq->context->name, AXON_DEV_RDMACORE_NO_XCHAN);
    return EOPNOTSUPP;
}

static int axon_dev_rdmacore_post_task(axon_dev_context_t *ctx, axon_dev_task_t *task,
                                       axon_dev_task_t **bad_task)
{
    axon_error("rdma-core: %s: post_task: %s", ctx->name, AXON_DEV_RDMACORE_NO_XCHAN);
    *bad_task = task;
    return EOPNOTSUPP;
}

AXON_DEV_RDMACORE_DESTROY(destroy_cq, cq, axon_dev_cq_t, ibv_destroy_cq)

/* Work completions have the same layout (asserted above): poll in place. */
static int axon_dev_rdmacore_poll_cq(axon_dev_cq_t *cq, int num_entries, axon_dev_wc_t *wc)
{
    int n = ibv_poll_cq(AXON_DEV_RDMACORE(cq, cq)->ibv, num_entries, (struct ibv_wc*)(void*)wc);

    return (n >= 0) ? n : -EIO;
}

static int axon_dev_rdmacore_req_notify_cq(axon_dev_cq_t *cq, int solicited_only)
{
    return ibv_req_notify_cq(AXON_DEV_RDMACORE(cq, cq)->ibv, solicited_only);
}

/* ------------------------------------------------------------ SRQ */

static int axon_dev_rdmacore_create_srq(axon_dev_pd_t *pd, axon_dev_srq_init_attr_t *init_attr,
                                        axon_dev_srq_t **srq_p)
{
    struct ibv_srq_init_attr ibv_init;
    axon_dev_rdmacore_srq_t *srq;

    AXON_DEV_RDMACORE_CHECK((init_attr != NULL) && (srq_p != NULL),
                            "create_srq: NULL init_attr or srq_p");
    srq = axon_dev_rdmacore_alloc(sizeof(*srq), "SRQ");
    if (srq == NULL) {
        return ENOMEM;
    }
    memset(&ibv_init, 0, sizeof(ibv_init));
    ibv_init.srq_context = srq;
    axon_dev_rdmacore_srq_attr_to_ibv(&init_attr->attr, &ibv_init.attr);
    srq->ibv = ibv_create_srq(AXON_DEV_RDMACORE(pd, pd)->ibv, &ibv_init);
    if (srq->ibv == NULL) {
        return axon_dev_rdmacore_create_failed(srq, "ibv_create_srq(max_wr %u, max_sge %u)",
                                               init_attr->attr.max_wr, init_attr->attr.max_sge);
    }
    axon_dev_rdmacore_srq_attr_from_ibv(&ibv_init.attr, &init_attr->attr);
    srq->super.context     = pd->context;
    srq->super.pd          = pd;
    srq->super.srq_context = init_attr->srq_context;
    *srq_p = &srq->super;
    return 0;
}

static int axon_dev_rdmacore_modify_srq(axon_dev_srq_t *srq, axon_dev_srq_attr_t *attr,
                                        int attr_mask)
{
    struct ibv_srq_attr ibv_attr;

    AXON_DEV_RDMACORE_CHECK(attr != NULL, "modify_srq: NULL attr");
    axon_dev_rdmacore_srq_attr_to_ibv(attr, &ibv_attr);
    return ibv_modify_srq(AXON_DEV_RDMACORE(srq, srq)->ibv, &ibv_attr, attr_mask);
}

static int axon_dev_rdmacore_query_srq(axon_dev_srq_t *srq, axon_dev_srq_attr_t *attr)
{
    struct ibv_srq_attr ibv_attr;
    int ret;

    AXON_DEV_RDMACORE_CHECK(attr != NULL, "query_srq: NULL attr");
    ret = ibv_query_srq(AXON_DEV_RDMACORE(srq, srq)->ibv, &ibv_attr);
    if (ret == 0) {
        axon_dev_rdmacore_srq_attr_from_ibv(&ibv_attr, attr);
    }
    return ret;
}

AXON_DEV_RDMACORE_DESTROY(destroy_srq, srq, axon_dev_srq_t, ibv_destroy_srq)

/* Receive WRs have the same layout (asserted above): post the caller's list. */
static int axon_dev_rdmacore_post_srq_recv(axon_dev_srq_t *srq, axon_dev_recv_wr_t *wr,
                                           axon_dev_recv_wr_t **bad_wr)
{
    return ibv_post_srq_recv(AXON_DEV_RDMACORE(srq, srq)->ibv, (struct ibv_recv_wr*)(void*)wr,
                             (struct ibv_recv_wr**)(void*)bad_wr);
}

/* ------------------------------------------------------------ QP */

static int axon_dev_rdmacore_create_qp(axon_dev_pd_t *pd, axon_dev_qp_init_attr_t *init_attr,
                                       axon_dev_qp_t **qp_p)
{
    struct ibv_qp_init_attr ibv_init;
    axon_dev_rdmacore_qp_t *qp;

    AXON_DEV_RDMACORE_CHECK((init_attr != NULL) && (qp_p != NULL),
                            "create_qp: NULL init_attr or qp_p");
    AXON_DEV_RDMACORE_CHECK((init_attr->send_cq != NULL) && (init_attr->recv_cq != NULL),
                            "create_qp: NULL %s", (init_attr->send_cq == NULL) ?
                            "send_cq" : "recv_cq");
    if (init_attr->create_flags & AXON_DEV_QP_CREATE_UMR) {
        axon_error("rdma-core: create_qp: AXON_DEV_QP_CREATE_UMR: %s", AXON_DEV_RDMACORE_NO_UMR);
        return EOPNOTSUPP;
    }
    if (init_attr->create_flags != 0) {
        axon_error("rdma-core: create_qp: create_flags 0x%x: %s", init_attr->create_flags,
                   AXON_DEV_RDMACORE_NO_XCHAN);
        return EOPNOTSUPP;
    }
    if (init_attr->qp_type == AXON_DEV_QPT_DC_INI) {
        axon_error("rdma-core: create_qp: DC initiator: %s", AXON_DEV_RDMACORE_NO_DC);
        return EOPNOTSUPP;
    }
    qp = axon_dev_rdmacore_alloc(sizeof(*qp), "QP");
    if (qp == NULL) {
        return ENOMEM;
    }
    memset(&ibv_init, 0, sizeof(ibv_init));
    ibv_init.qp_context = qp;
    ibv_init.send_cq    = AXON_DEV_RDMACORE(cq, init_attr->send_cq)->ibv;
    ibv_init.recv_cq    = AXON_DEV_RDMACORE(cq, init_attr->recv_cq)->ibv;
    ibv_init.srq        = (init_attr->srq != NULL) ?
                          AXON_DEV_RDMACORE(srq, init_attr->srq)->ibv : NULL;
    axon_dev_rdmacore_qp_cap_to_ibv(&init_attr->cap, &ibv_init.cap);
    ibv_init.qp_type    = (enum ibv_qp_type)init_attr->qp_type;
    ibv_init.sq_sig_all = init_attr->sq_sig_all;
    qp->ibv = ibv_create_qp(AXON_DEV_RDMACORE(pd, pd)->ibv, &ibv_init);
    if (qp->ibv == NULL) {
        return axon_dev_rdmacore_create_failed(qp, "ibv_create_qp(type %d)", init_attr->qp_type);
    }
    axon_dev_rdmacore_qp_cap_from_ibv(&ibv_init.cap, &init_attr->cap);
    qp->super.context    = pd->context;
    qp->super.pd         = pd;
    qp->super.send_cq    = init_attr->send_cq;
    qp->super.recv_cq    = init_attr->recv_cq;
    qp->super.srq        = init_attr->srq;
    qp->super.qp_context = init_attr->qp_context;
    qp->super.qp_num     = qp->ibv->qp_num;
    qp->super.qp_type    = init_attr->qp_type;
    qp->super.state      = AXON_DEV_QPS_RESET;
    *qp_p = &qp->super;
    return 0;
}

static int axon_dev_rdmacore_modify_qp(axon_dev_qp_t *qp, axon_dev_qp_attr_t *attr,
                                       int attr_mask)
{
    struct ibv_qp_attr ibv_attr;
    int ret;

    AXON_DEV_RDMACORE_CHECK(attr != NULL, "modify_qp: NULL attr");
    axon_dev_rdmacore_qp_attr_to_ibv(attr, &ibv_attr);
    ret = ibv_modify_qp(AXON_DEV_RDMACORE(qp, qp)->ibv, &ibv_attr, attr_mask);
    if (ret != 0) {
        axon_debug("rdma-core: QP 0x%x: ibv_modify_qp(mask 0x%x) failed: %s", qp->qp_num,
                   attr_mask, strerror(ret));
        return ret;
    }
    if (attr_mask & AXON_DEV_QP_STATE) {
        qp->state = attr->qp_state;
    }
    return 0;
}

static int axon_dev_rdmacore_query_qp(axon_dev_qp_t *qp, axon_dev_qp_attr_t *attr, int attr_mask,
                                      axon_dev_qp_init_attr_t *init_attr)
{
    struct ibv_qp_init_attr ibv_init;
    struct ibv_qp_attr ibv_attr;
    int ret;

    AXON_DEV_RDMACORE_CHECK((attr != NULL) && (init_attr != NULL),
                            "query_qp: NULL attr or init_attr");
    memset(&ibv_attr, 0, sizeof(ibv_attr));
    memset(&ibv_init, 0, sizeof(ibv_init));
    ret = ibv_query_qp(AXON_DEV_RDMACORE(qp, qp)->ibv, &ibv_attr, attr_mask, &ibv_init);
    if (ret != 0) {
        return ret;
    }
    axon_dev_rdmacore_qp_attr_from_ibv(&ibv_attr, attr);
    /* The CQ/SRQ pointers are ours, not the ibv ones the query returns. */
    memset(init_attr, 0, sizeof(*init_attr));
    init_attr->qp_context = qp->qp_context;
    init_attr->send_cq    = qp->send_cq;
    init_attr->recv_cq    = qp->recv_cq;
    init_attr->srq        = qp->srq;
    axon_dev_rdmacore_qp_cap_from_ibv(&ibv_init.cap, &init_attr->cap);
    init_attr->qp_type    = qp->qp_type;
    init_attr->sq_sig_all = ibv_init.sq_sig_all;
    qp->state             = attr->qp_state;
    return 0;
}

AXON_DEV_RDMACORE_DESTROY(destroy_qp, qp, axon_dev_qp_t, ibv_destroy_qp)

/*
 * Opcodes libibverbs lacks (the extended atomics): refused, logged. Their
 * numbers mean other operations to libibverbs, so they must never reach it.
 */
static int axon_dev_rdmacore_wr_refused(const axon_dev_send_wr_t *wr)
{
    if (wr->send_flags & (AXON_DEV_SEND_WITH_CALC | AXON_DEV_SEND_WAIT_EN_LAST)) {
        axon_error("rdma-core: post_send: send_flags 0x%x: %s", wr->send_flags,
                   AXON_DEV_RDMACORE_NO_XCHAN);
        return 1;
    }
    if ((unsigned)wr->opcode <= AXON_DEV_WR_ATOMIC_FETCH_AND_ADD) {
        return 0;
    }
    axon_error("rdma-core: post_send: opcode %d (%s) is not supported by libibverbs",
               (int)wr->opcode,
               ((wr->opcode == AXON_DEV_WR_EXT_MASKED_ATOMIC_CMP_AND_SWP) ||
                (wr->opcode == AXON_DEV_WR_EXT_MASKED_ATOMIC_FETCH_AND_ADD)) ? "extended atomic" :
               ((wr->opcode >= AXON_DEV_WR_SEND_ENABLE) && (wr->opcode <= AXON_DEV_WR_CQE_WAIT)) ?
               "cross-channel task: " AXON_DEV_RDMACORE_NO_XCHAN :
               ((wr->opcode == AXON_DEV_WR_UMR_FILL) || (wr->opcode == AXON_DEV_WR_UMR_INVALIDATE)) ?
               "UMR: " AXON_DEV_RDMACORE_NO_UMR : "unknown");
    return 1;
}

/* Send WRs differ in layout: convert a bounded batch on the stack at a time. */
#define AXON_DEV_RDMACORE_POST_BATCH 16

static int axon_dev_rdmacore_post_send(axon_dev_qp_t *qp, axon_dev_send_wr_t *wr,
                                       axon_dev_send_wr_t **bad_wr)
{
    struct ibv_send_wr batch[AXON_DEV_RDMACORE_POST_BATCH], *ibv_bad;
    axon_dev_send_wr_t *src[AXON_DEV_RDMACORE_POST_BATCH];
    int n, i, ret;

    AXON_DEV_RDMACORE_CHECK(bad_wr != NULL, "post_send: NULL bad_wr");
    while (wr != NULL) {
        for (n = 0; (wr != NULL) && (n < AXON_DEV_RDMACORE_POST_BATCH); ++n, wr = wr->next) {
            if (axon_dev_rdmacore_wr_refused(wr)) {
                break;   /* the WRs before it still go out, as verbs would post them */
            }
            src[n] = wr;
            axon_dev_rdmacore_send_wr_to_ibv(wr, &batch[n]);
            batch[n].next = NULL;
            if (n > 0) {
                batch[n - 1].next = &batch[n];
            }
        }
        ibv_bad = NULL;
        ret = ibv_post_send(AXON_DEV_RDMACORE(qp, qp)->ibv, batch, &ibv_bad);
        if (ret != 0) {
            /* Earlier WRs stay posted; report the first one that was not. */
            i = (ibv_bad != NULL) ? (int)(ibv_bad - batch) : 0;
            *bad_wr = src[((i >= 0) && (i < n)) ? i : 0];
            return ret;
        }
        if ((wr != NULL) && axon_dev_rdmacore_wr_refused(wr)) {
            *bad_wr = wr;
            return EOPNOTSUPP;
        }
    }
    return 0;
}

static int axon_dev_rdmacore_post_recv(axon_dev_qp_t *qp, axon_dev_recv_wr_t *wr,
                                       axon_dev_recv_wr_t **bad_wr)
{
    return ibv_post_recv(AXON_DEV_RDMACORE(qp, qp)->ibv, (struct ibv_recv_wr*)(void*)wr,
                         (struct ibv_recv_wr**)(void*)bad_wr);
}

/* ------------------------------------------------------------ AH */

static int axon_dev_rdmacore_create_ah(axon_dev_pd_t *pd, axon_dev_ah_attr_t *attr,
                                       axon_dev_ah_t **ah_p)
{
    struct ibv_ah_attr ibv_attr;
    axon_dev_rdmacore_ah_t *ah;

    AXON_DEV_RDMACORE_CHECK((attr != NULL) && (ah_p != NULL), "create_ah: NULL attr or ah_p");
    ah = axon_dev_rdmacore_alloc(sizeof(*ah), "AH");
    if (ah == NULL) {
        return ENOMEM;
    }
    axon_dev_rdmacore_ah_attr_to_ibv(attr, &ibv_attr);
    ah->ibv = ibv_create_ah(AXON_DEV_RDMACORE(pd, pd)->ibv, &ibv_attr);
    if (ah->ibv == NULL) {
        return axon_dev_rdmacore_create_failed(ah, "ibv_create_ah");
    }
    ah->super.context = pd->context;
    ah->super.pd      = pd;
    *ah_p = &ah->super;
    return 0;
}

AXON_DEV_RDMACORE_DESTROY(destroy_ah, ah, axon_dev_ah_t, ibv_destroy_ah)

/* ------------------------------------------------------------ multicast */

static int axon_dev_rdmacore_mcast(axon_dev_qp_t *qp, const axon_dev_gid_t *gid, uint16_t lid,
                                   int attach)
{
    union ibv_gid ibv_gid;
    int ret;

    AXON_DEV_RDMACORE_CHECK(gid != NULL, "attach/detach_mcast: NULL gid");
    memcpy(ibv_gid.raw, gid->raw, sizeof(ibv_gid.raw));
    ret = attach ? ibv_attach_mcast(AXON_DEV_RDMACORE(qp, qp)->ibv, &ibv_gid, lid) :
                   ibv_detach_mcast(AXON_DEV_RDMACORE(qp, qp)->ibv, &ibv_gid, lid);
    return (ret == 0) ? 0 : ((ret > 0) ? ret : errno);
}

static int axon_dev_rdmacore_attach_mcast(axon_dev_qp_t *qp, const axon_dev_gid_t *gid,
                                          uint16_t lid)
{
    return axon_dev_rdmacore_mcast(qp, gid, lid, 1);
}

static int axon_dev_rdmacore_detach_mcast(axon_dev_qp_t *qp, const axon_dev_gid_t *gid,
                                          uint16_t lid)
{
    return axon_dev_rdmacore_mcast(qp, gid, lid, 0);
}

/* ------------------------------------------------------------ async events */

static int axon_dev_rdmacore_get_async_event(axon_dev_context_t *ctx,
                                             axon_dev_async_event_t *event)
{
    struct ibv_async_event ibv_event;

    AXON_DEV_RDMACORE_CHECK(event != NULL, "get_async_event: NULL event");
    for (;;) {
        if (ibv_get_async_event(AXON_DEV_RDMACORE(context, ctx)->ibv, &ibv_event) != 0) {
            return axon_dev_rdmacore_errno();   /* EAGAIN on a non-blocking fd */
        }
        if (axon_dev_rdmacore_event_from_ibv(&ibv_event, event) == 0) {
            return 0;
        }
        /* An event type newer than dev.h: nothing can name it, so skip it. */
        axon_debug("rdma-core: %s: ignoring async event %d (%s)", ctx->name,
                   ibv_event.event_type, ibv_event_type_str(ibv_event.event_type));
        ibv_ack_async_event(&ibv_event);
    }
}

static void axon_dev_rdmacore_ack_async_event(axon_dev_context_t *ctx,
                                              axon_dev_async_event_t *event)
{
    struct ibv_async_event ibv_event;

    (void)ctx;   /* the event names its ibv object */
    if (axon_dev_rdmacore_event_to_ibv(event, &ibv_event) == 0) {
        ibv_ack_async_event(&ibv_event);
    }
}

static int axon_dev_rdmacore_create_dct(axon_dev_context_t *ctx, axon_dev_dct_init_attr_t *attr,
                                        axon_dev_dct_t **dct_p)
{
    (void)attr;
    (void)dct_p;
    axon_error("rdma-core: %s: create_dct: %s", ctx->name, AXON_DEV_RDMACORE_NO_DC);
    return EOPNOTSUPP;
}

static int axon_dev_rdmacore_create_mr(axon_dev_pd_t *pd, axon_dev_mr_init_attr_t *attr,
                                       axon_dev_mr_t **mr_p)
{
    (void)attr;
    (void)mr_p;
    axon_error("rdma-core: %s: create_mr (indirect key): %s", pd->context->name,
               AXON_DEV_RDMACORE_NO_UMR);
    return EOPNOTSUPP;
}

/* Every MR here is registered memory, never an indirect key */
static int axon_dev_rdmacore_query_mkey(axon_dev_mr_t *mr, axon_dev_mkey_attr_t *attr)
{
    (void)attr;
    axon_error("rdma-core: %s: query_mkey: key 0x%x is no indirect key (%s)", mr->context->name,
               mr->lkey, AXON_DEV_RDMACORE_NO_UMR);
    return EINVAL;
}

static int axon_dev_rdmacore_alloc_mkey_list(axon_dev_pd_t *pd, uint32_t max_klm_list_size,
                                             axon_dev_mkey_list_t **list_p)
{
    (void)max_klm_list_size;
    (void)list_p;
    axon_error("rdma-core: %s: alloc_mkey_list: %s", pd->context->name,
               AXON_DEV_RDMACORE_NO_UMR);
    return EOPNOTSUPP;
}

/* No list is ever allocated here */
static int axon_dev_rdmacore_dealloc_mkey_list(axon_dev_mkey_list_t *list)
{
    axon_error("rdma-core: %s: dealloc_mkey_list: %s", list->context->name,
               AXON_DEV_RDMACORE_NO_UMR);
    return EINVAL;
}

/* No DCT is ever created here: the other DCT calls cannot be reached with one. */
static int axon_dev_rdmacore_dct_none(axon_dev_dct_t *dct)
{
    axon_error("rdma-core: %s: DCT 0x%x: %s", dct->context->name, dct->dct_num,
               AXON_DEV_RDMACORE_NO_DC);
    return EOPNOTSUPP;
}

static int axon_dev_rdmacore_query_dct(axon_dev_dct_t *dct, axon_dev_dct_attr_t *attr)
{
    (void)attr;
    return axon_dev_rdmacore_dct_none(dct);
}

static int axon_dev_rdmacore_arm_dct(axon_dev_dct_t *dct, uint32_t comp_mask)
{
    (void)comp_mask;
    return axon_dev_rdmacore_dct_none(dct);
}

static const axon_dev_ops_t axon_dev_rdmacore_ops = {
    .close                = axon_dev_rdmacore_close,
    .query_device         = axon_dev_rdmacore_query_device,
    .query_port           = axon_dev_rdmacore_query_port,
    .query_gid            = axon_dev_rdmacore_query_gid,
    .query_pkey           = axon_dev_rdmacore_query_pkey,
    .alloc_pd             = axon_dev_rdmacore_alloc_pd,
    .dealloc_pd           = axon_dev_rdmacore_dealloc_pd,
    .reg_mr               = axon_dev_rdmacore_reg_mr,
    .dereg_mr             = axon_dev_rdmacore_dereg_mr,
    .create_comp_channel  = axon_dev_rdmacore_create_comp_channel,
    .destroy_comp_channel = axon_dev_rdmacore_destroy_comp_channel,
    .get_cq_event         = axon_dev_rdmacore_get_cq_event,
    .ack_cq_events        = axon_dev_rdmacore_ack_cq_events,
    .create_cq            = axon_dev_rdmacore_create_cq,
    .create_cq_ex         = axon_dev_rdmacore_create_cq_ex,
    .modify_cq            = axon_dev_rdmacore_modify_cq,
    .destroy_cq           = axon_dev_rdmacore_destroy_cq,
    .poll_cq              = axon_dev_rdmacore_poll_cq,
    .req_notify_cq        = axon_dev_rdmacore_req_notify_cq,
    .create_srq           = axon_dev_rdmacore_create_srq,
    .modify_srq           = axon_dev_rdmacore_modify_srq,
    .query_srq            = axon_dev_rdmacore_query_srq,
    .destroy_srq          = axon_dev_rdmacore_destroy_srq,
    .post_srq_recv        = axon_dev_rdmacore_post_srq_recv,
    .create_qp            = axon_dev_rdmacore_create_qp,
    .modify_qp            = axon_dev_rdmacore_modify_qp,
    .query_qp             = axon_dev_rdmacore_query_qp,
    .destroy_qp           = axon_dev_rdmacore_destroy_qp,
    .post_send            = axon_dev_rdmacore_post_send,
    .post_recv            = axon_dev_rdmacore_post_recv,
    .post_task            = axon_dev_rdmacore_post_task,
    .create_ah            = axon_dev_rdmacore_create_ah,
    .destroy_ah           = axon_dev_rdmacore_destroy_ah,
    .attach_mcast         = axon_dev_rdmacore_attach_mcast,
    .detach_mcast         = axon_dev_rdmacore_detach_mcast,
    .create_dct           = axon_dev_rdmacore_create_dct,
    .destroy_dct          = axon_dev_rdmacore_dct_none,
    .query_dct            = axon_dev_rdmacore_query_dct,
    .arm_dct              = axon_dev_rdmacore_arm_dct,
    .create_mr            = axon_dev_rdmacore_create_mr,
    .query_mkey           = axon_dev_rdmacore_query_mkey,
    .alloc_mkey_list      = axon_dev_rdmacore_alloc_mkey_list,
    .dealloc_mkey_list    = axon_dev_rdmacore_dealloc_mkey_list,
    .get_async_event      = axon_dev_rdmacore_get_async_event,
    .ack_async_event      = axon_dev_rdmacore_ack_async_event,
};

/* ------------------------------------------------------------ back end */

/* ibv_get_device_list, with "none" (NULL or zero) reported the same way. */
static struct ibv_device **axon_dev_rdmacore_devices(int *num_p)
{
    struct ibv_device **devs;

    *num_p = 0;
    devs = ibv_get_device_list(num_p);
    if ((devs == NULL) || (*num_p <= 0)) {
        if (devs != NULL) {
            ibv_free_device_list(devs);
        }
        *num_p = 0;
        return NULL;
    }
    return devs;
}

static int axon_dev_rdmacore_get_list(axon_dev_info_t *list, int max)
{
    struct ibv_device **devs;
    int num, i;

    devs = axon_dev_rdmacore_devices(&num);
    if (devs == NULL) {
        axon_debug("rdma-core: no hardware devices found");
        return 0;
    }
    for (i = 0; (i < num) && (i < max); ++i) {
        memset(&list[i], 0, sizeof(list[i]));
        snprintf(list[i].name, sizeof(list[i].name), "%s", ibv_get_device_name(devs[i]));
        list[i].backend   = AXON_DEV_RDMACORE_NAME;
        list[i].node_guid = be64toh(ibv_get_device_guid(devs[i]));
        axon_topo_sysfs_locality(devs[i]->ibdev_path, list[i].locality,
                                 sizeof(list[i].locality));
    }
    ibv_free_device_list(devs);
    return num;
}

static int axon_dev_rdmacore_open(const char *name, axon_dev_context_t **ctx_p)
{
    axon_dev_rdmacore_context_t *rctx;
    struct ibv_device **devs;
    struct ibv_context *ibv = NULL;
    int num, i, ret = ENODEV;

    devs = axon_dev_rdmacore_devices(&num);
    for (i = 0; i < num; ++i) {
        if (strcmp(ibv_get_device_name(devs[i]), name) != 0) {
            continue;
        }
        ibv = ibv_open_device(devs[i]);
        if (ibv == NULL) {
            ret = axon_dev_rdmacore_errno();
            axon_error("rdma-core: cannot open %s: %s", name, strerror(ret));
        }
        break;
    }
    if (devs != NULL) {
        ibv_free_device_list(devs);
    }
    if (ibv == NULL) {
        return ret;   /* ENODEV: not ours */
    }
    rctx = axon_dev_rdmacore_alloc(sizeof(*rctx), "device context");
    if (rctx == NULL) {
        ibv_close_device(ibv);
        return ENOMEM;
    }
    rctx->ibv           = ibv;
    rctx->max_inline    = -1;
    rctx->super.ops     = &axon_dev_rdmacore_ops;
    rctx->super.backend = AXON_DEV_RDMACORE_NAME;
    rctx->super.async_fd = ibv->async_fd;
    snprintf(rctx->super.name, sizeof(rctx->super.name), "%s", name);
    *ctx_p = &rctx->super;
    return 0;
}

static void axon_dev_rdmacore_summary(char *buf, size_t max)
{
    struct ibv_device **devs;
    int num;

    devs = axon_dev_rdmacore_devices(&num);
    if (devs == NULL) {
        snprintf(buf, max, "no hardware devices found; no cross_channel: %s; no dc: %s; "
                 "no umr: %s", AXON_DEV_RDMACORE_NO_XCHAN, AXON_DEV_RDMACORE_NO_DC,
                 AXON_DEV_RDMACORE_NO_UMR);
        return;
    }
    ibv_free_device_list(devs);
    snprintf(buf, max, "%d device%s; no cross_channel: %s; no dc: %s; no umr: %s", num,
             (num == 1) ? "" : "s", AXON_DEV_RDMACORE_NO_XCHAN, AXON_DEV_RDMACORE_NO_DC,
             AXON_DEV_RDMACORE_NO_UMR);
}

const axon_dev_backend_t axon_dev_rdmacore_backend = {
    .name          = AXON_DEV_RDMACORE_NAME,
    .order         = 1,   /* after the software device */
    .get_list      = axon_dev_rdmacore_get_list,
    .open          = axon_dev_rdmacore_open,
    .summary       = axon_dev_rdmacore_summary,
    .config_table  = NULL,
    .config_prefix = NULL,
#ifdef HAVE_RDMACM
    .cm            = &axon_dev_rdmacore_cm_ops,
#endif
};
AXON_DEV_BACKEND_REGISTER(axon_dev_rdmacore_backend)
