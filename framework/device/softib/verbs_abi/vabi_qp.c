/*
 * Queue pairs and shared receive queues: creation, state, queries.
 * Posting is in vabi_post.c.
 */
#include <stdlib.h>
#include <string.h>
#include "log.h"
#include "dev_cm.h"
#include "vabi.h"

static axon_dev_cq_t *vabi_cq_dev(struct ibv_cq *cq)
{
    return (cq != NULL) ? VABI(cq, cq)->dev : NULL;
}

static int vabi_qp_type_ok(enum ibv_qp_type type)
{
    if ((type == IBV_QPT_RC) || (type == IBV_QPT_UC) || (type == IBV_QPT_UD)) {
        return 0;
    }
    axon_error("libibverbs on softib: create_qp: QP type %d not supported (softib has RC, UC "
               "and UD)", (int)type);
    return EOPNOTSUPP;
}

static int vabi_qp_create_plain(void *arg, axon_dev_pd_t *pd, axon_dev_qp_init_attr_t *attr,
                                axon_dev_qp_t **qp_p)
{
    (void)arg;
    return axon_dev_create_qp(pd, attr, qp_p);
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
    return vabi_create_qp_by(pd, attr, 0, vabi_qp_create_plain, NULL);
}

struct ibv_qp *vabi_create_qp_by(struct ibv_pd *pd, struct ibv_qp_init_attr *attr,
                                 uint32_t create_flags, vabi_qp_create_fn_t create, void *arg)
{
    axon_dev_qp_init_attr_t dattr;
    vabi_qp_t *qp;
    int ret;

    if ((ret = vabi_qp_type_ok(attr->qp_type)) != 0) {
        return vabi_fail_null(ret);
    }
    memset(&dattr, 0, sizeof(dattr));
    dattr.send_cq    = vabi_cq_dev(attr->send_cq);
    dattr.recv_cq    = vabi_cq_dev(attr->recv_cq);
    dattr.srq        = (attr->srq != NULL) ? VABI(srq, attr->srq)->dev : NULL;
    dattr.qp_type    = (axon_dev_qp_type_t)attr->qp_type;
    dattr.sq_sig_all = attr->sq_sig_all;
    if (create_flags & IBV_QP_CREATE_BLOCK_SELF_MCAST_LB) {
        dattr.create_flags |= AXON_DEV_QP_CREATE_BLOCK_SELF_MCAST_LB;
    }
    {
        const struct ibv_qp_cap *in = &attr->cap;
        axon_dev_qp_cap_t *out      = &dattr.cap;
        AXON_DEV_IBV_CONVERT(AXON_DEV_IBV_QP_CAP);
    }
    qp = calloc(1, sizeof(*qp));
    if (qp == NULL) {
        return vabi_fail_null(ENOMEM);
    }
    dattr.qp_context = qp;   /* async events lead back to the wrapper */
    if ((ret = create(arg, VABI(pd, pd)->dev, &dattr, &qp->dev)) != 0) {
        free(qp);
        return vabi_fail_null(ret);
    }
    {   /* the actual capacities, as verbs returns them */
        const axon_dev_qp_cap_t *in = &dattr.cap;
        struct ibv_qp_cap *out      = &attr->cap;
        AXON_DEV_IBV_CONVERT(AXON_DEV_IBV_QP_CAP);
    }
    qp->ex.qp_base.context    = pd->context;
    qp->ex.qp_base.qp_context = attr->qp_context;
    qp->ex.qp_base.pd         = pd;
    qp->ex.qp_base.send_cq    = attr->send_cq;
    qp->ex.qp_base.recv_cq    = attr->recv_cq;
    qp->ex.qp_base.srq        = attr->srq;
    qp->ex.qp_base.handle     = qp->dev->qp_num;
    qp->ex.qp_base.qp_num     = qp->dev->qp_num;
    qp->ex.qp_base.state      = IBV_QPS_RESET;
    qp->ex.qp_base.qp_type    = attr->qp_type;
    pthread_mutex_init(&qp->ex.qp_base.mutex, NULL);
    pthread_cond_init(&qp->ex.qp_base.cond, NULL);
    return &qp->ex.qp_base;
}

int vabi_qp_ex_check(const struct ibv_qp_init_attr_ex *attr, const char *what)
{
    const uint32_t known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
                           IBV_QP_INIT_ATTR_CREATE_FLAGS;

    if (attr->comp_mask & ~known) {
        axon_error("libibverbs on softib: %s: comp_mask 0x%x not supported (a PD, send ops "
                   "flags and create flags only)", what, attr->comp_mask);
        return EOPNOTSUPP;
    }
    if ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) &&
        (attr->create_flags & ~(uint32_t)IBV_QP_CREATE_BLOCK_SELF_MCAST_LB)) {
        axon_error("libibverbs on softib: %s: create_flags 0x%x not supported "
                   "(BLOCK_SELF_MCAST_LB only)", what, attr->create_flags);
        return EOPNOTSUPP;
    }
    return 0;
}

/*
 * The extended form: a PD, send ops flags for the ibv_wr_* interface, and
 * the create flag BLOCK_SELF_MCAST_LB. XRC domains, RSS and the rest are
 * not supported.
 */
struct ibv_qp *vabi_create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr)
{
    struct ibv_qp *qp;
    int ret;

    (void)context;
    if ((ret = vabi_qp_ex_check(attr, "create_qp_ex")) != 0) {
        return vabi_fail_null(ret);
    }
    if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD)) {
        axon_error("libibverbs on softib: create_qp_ex: comp_mask 0x%x has no PD",
                   attr->comp_mask);
        return vabi_fail_null(EINVAL);
    }
    qp = vabi_create_qp_by(attr->pd, (struct ibv_qp_init_attr*)(void*)attr,
                           (attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) ?
                           attr->create_flags : 0, vabi_qp_create_plain, NULL);
    if ((qp != NULL) && (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
        ((ret = vabi_wr_init(VABI(qp, qp), attr->send_ops_flags)) != 0)) {
        ibv_destroy_qp(qp);
        return vabi_fail_null(ret);
    }
    return qp;
}

/* Attribute mask bits modify_qp/query_qp know: IBV_QP_STATE .. IBV_QP_DEST_QPN. */
#define VABI_QP_ATTR_KNOWN ((IBV_QP_DEST_QPN << 1) - 1)

/*
 * Programs written for rdma-core follow the IB specification's per-type
 * table of modify_qp attributes (the kernel's); softib follows the manual's
 * grouping (seed §4.5: "All QPs", "Connected", "Unconnected"), which also
 * requires, for UD and UC, attributes that mean nothing to them. Those are
 * filled in here when the program leaves them out, with values that have no
 * effect on that QP type: access flags of a UD QP (it has no RDMA), UC's
 * read, retry and RNR settings (it has no reads, acknowledgements or RNR),
 * and a UD QP's path MTU, which is the port's.
 */
static const struct {
    enum ibv_qp_type  type;
    enum ibv_qp_state from, to;
    int               fill;
} vabi_spec_fills[] = {
    {IBV_QPT_UD, IBV_QPS_RESET, IBV_QPS_INIT, IBV_QP_ACCESS_FLAGS},
    {IBV_QPT_UD, IBV_QPS_INIT,  IBV_QPS_RTR,  IBV_QP_PATH_MTU},
    {IBV_QPT_UC, IBV_QPS_INIT,  IBV_QPS_RTR,  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER},
    {IBV_QPT_UC, IBV_QPS_RTR,   IBV_QPS_RTS,  IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                              IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC},
};

static int vabi_spec_fill(struct ibv_qp *qp, const struct ibv_qp_attr *attr, int attr_mask,
                          axon_dev_qp_attr_t *dattr)
{
    enum ibv_qp_state from = (attr_mask & IBV_QP_CUR_STATE) ? attr->cur_qp_state : qp->state;
    struct ibv_port_attr port;
    unsigned i;
    int fill = 0;

    if (!(attr_mask & IBV_QP_STATE)) {
        return 0;
    }
    for (i = 0; i < sizeof(vabi_spec_fills) / sizeof(vabi_spec_fills[0]); i++) {
        if ((vabi_spec_fills[i].type == qp->qp_type) && (vabi_spec_fills[i].from == from) &&
            (vabi_spec_fills[i].to == attr->qp_state)) {
            fill = vabi_spec_fills[i].fill & ~attr_mask;
        }
    }
    /* The values: 0 for all but the MTU (dattr starts from the program's attr). */
    if (fill & IBV_QP_ACCESS_FLAGS)       dattr->qp_access_flags    = 0;
    if (fill & IBV_QP_MAX_DEST_RD_ATOMIC) dattr->max_dest_rd_atomic = 0;
    if (fill & IBV_QP_MIN_RNR_TIMER)      dattr->min_rnr_timer      = 0;
    if (fill & IBV_QP_TIMEOUT)            dattr->timeout            = 0;
    if (fill & IBV_QP_RETRY_CNT)          dattr->retry_cnt          = 0;
    if (fill & IBV_QP_RNR_RETRY)          dattr->rnr_retry          = 0;
    if (fill & IBV_QP_MAX_QP_RD_ATOMIC)   dattr->max_rd_atomic      = 0;
    if (fill & IBV_QP_PATH_MTU) {
        if (ibv_query_port(qp->context, 1, &port)) {
            return 0;   /* softib names the missing attribute itself */
        }
        dattr->path_mtu = (axon_dev_mtu_t)port.active_mtu;
    }
    return fill;
}

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask)
{
    axon_dev_qp_attr_t dattr;
    const struct ibv_qp_attr *in = attr;
    axon_dev_qp_attr_t *out = &dattr;
    int ret;

    if (attr_mask & ~VABI_QP_ATTR_KNOWN) {
        axon_error("libibverbs on softib: modify_qp: attribute mask bits 0x%x not supported "
                   "(rate limit and the extended attributes)", attr_mask & ~VABI_QP_ATTR_KNOWN);
        return EOPNOTSUPP;
    }
    AXON_DEV_IBV_CONVERT(AXON_DEV_IBV_QP_ATTR);
    attr_mask |= vabi_spec_fill(qp, attr, attr_mask, &dattr);
    if ((ret = axon_dev_modify_qp(VABI(qp, qp)->dev, &dattr, attr_mask)) != 0) {
        return ret;
    }
    if (attr_mask & IBV_QP_STATE) {
        qp->state = attr->qp_state;
    }
    return 0;
}

int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
                 struct ibv_qp_init_attr *init_attr)
{
    axon_dev_qp_init_attr_t dinit;
    axon_dev_qp_attr_t dattr;
    int ret;

    if ((ret = axon_dev_query_qp(VABI(qp, qp)->dev, &dattr, attr_mask & VABI_QP_ATTR_KNOWN,
                                 &dinit)) != 0) {
        return ret;
    }
    {
        const axon_dev_qp_attr_t *in = &dattr;
        struct ibv_qp_attr *out      = attr;
        AXON_DEV_IBV_CONVERT(AXON_DEV_IBV_QP_ATTR);
    }
    memset(init_attr, 0, sizeof(*init_attr));
    init_attr->qp_context = qp->qp_context;
    init_attr->send_cq    = qp->send_cq;
    init_attr->recv_cq    = qp->recv_cq;
    init_attr->srq        = qp->srq;
    init_attr->qp_type    = qp->qp_type;
    init_attr->sq_sig_all = dinit.sq_sig_all;
    {
        const axon_dev_qp_cap_t *in = &dinit.cap;
        struct ibv_qp_cap *out      = &init_attr->cap;
        AXON_DEV_IBV_CONVERT(AXON_DEV_IBV_QP_CAP);
    }
    qp->state = attr->qp_state;   /* an error may have moved it */
    return 0;
}

int ibv_destroy_qp(struct ibv_qp *qp)
{
    int ret;

    /* librdmacm's QP leaves its id through the CM, which would otherwise still drive it */
    ret = (VABI(qp, qp)->cm_id != NULL) ? axon_dev_cm_destroy_qp(VABI(qp, qp)->cm_id) :
                                          axon_dev_destroy_qp(VABI(qp, qp)->dev);
    if (ret != 0) {
        return ret;
    }
    vabi_wr_cleanup(VABI(qp, qp));
    pthread_mutex_destroy(&qp->mutex);
    pthread_cond_destroy(&qp->cond);
    free(qp);
    return 0;
}

/* UD multicast groups (softib_mcast.c); errno values, as libibverbs returns them. */
int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
    return axon_dev_attach_mcast(VABI(qp, qp)->dev, (const axon_dev_gid_t *)(const void *)gid,
                                 lid);
}

int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
    return axon_dev_detach_mcast(VABI(qp, qp)->dev, (const axon_dev_gid_t *)(const void *)gid,
                                 lid);
}

/* The ibv_wr_* interface: only of a QP created with send ops flags (as rdma-core). */
struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
    return (VABI(qp, qp)->wr != NULL) ? &VABI(qp, qp)->ex : NULL;
}

struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
    axon_dev_srq_init_attr_t dattr;
    vabi_srq_t *srq;
    int ret;

    memset(&dattr, 0, sizeof(dattr));
    {
        const struct ibv_srq_attr *in = &attr->attr;
        axon_dev_srq_attr_t *out      = &dattr.attr;
        AXON_DEV_IBV_CONVERT(AXON_DEV_IBV_SRQ_ATTR);
    }
    srq = calloc(1, sizeof(*srq));
    if (srq == NULL) {
        return vabi_fail_null(ENOMEM);
    }
    dattr.srq_context = srq;
    if ((ret = axon_dev_create_srq(VABI(pd, pd)->dev, &dattr, &srq->dev)) != 0) {
        free(srq);
        return vabi_fail_null(ret);
    }
    {
        const axon_dev_srq_attr_t *in = &dattr.attr;
        struct ibv_srq_attr *out      = &attr->attr;
        AXON_DEV_IBV_CONVERT(AXON_DEV_IBV_SRQ_ATTR);
    }
    srq->ibv.context     = pd->context;
    srq->ibv.srq_context = attr->srq_context;
    srq->ibv.pd          = pd;
    pthread_mutex_init(&srq->ibv.mutex, NULL);
    pthread_cond_init(&srq->ibv.cond, NULL);
    return &srq->ibv;
}

/* The extended form: a basic SRQ on a PD only (no XRC, no tag matching). */
struct ibv_srq *vabi_create_srq_ex(struct ibv_context *context, struct ibv_srq_init_attr_ex *attr)
{
    (void)context;
    if ((attr->comp_mask & ~(IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD)) ||
        !(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) ||
        ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && (attr->srq_type != IBV_SRQT_BASIC))) {
        axon_error("libibverbs on softib: create_srq_ex: comp_mask 0x%x, type %d not supported "
                   "(a basic SRQ on a PD only)", attr->comp_mask, (int)attr->srq_type);
        return vabi_fail_null(EOPNOTSUPP);
    }
    return ibv_create_srq(attr->pd, (struct ibv_srq_init_attr*)(void*)attr);
}

int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int attr_mask)
{
    axon_dev_srq_attr_t dattr;
    const struct ibv_srq_attr *in = attr;
    axon_dev_srq_attr_t *out = &dattr;

    AXON_DEV_IBV_CONVERT(AXON_DEV_IBV_SRQ_ATTR);
    return axon_dev_modify_srq(VABI(srq, srq)->dev, &dattr, attr_mask);
}

int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
    axon_dev_srq_attr_t dattr;
    const axon_dev_srq_attr_t *in = &dattr;
    struct ibv_srq_attr *out = attr;
    int ret;

    if ((ret = axon_dev_query_srq(VABI(srq, srq)->dev, &dattr)) != 0) {
        return ret;
    }
    AXON_DEV_IBV_CONVERT(AXON_DEV_IBV_SRQ_ATTR);
    return 0;
}

int ibv_destroy_srq(struct ibv_srq *srq)
{
    int ret;

    if ((ret = axon_dev_destroy_srq(VABI(srq, srq)->dev)) != 0) {
        return ret;
    }
    pthread_mutex_destroy(&srq->mutex);
    pthread_cond_destroy(&srq->cond);
    free(srq);
    return 0;
}
