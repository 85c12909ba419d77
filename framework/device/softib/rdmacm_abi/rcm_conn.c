/*
 * The QP of an id and the connection: create/destroy QP, connect, accept,
 * reject, establish, disconnect.
 */
#include <stdlib.h>
#include <string.h>
#include "dev_ibv_map.h"
#include "rcm.h"

/* rdma_create_qp without CQs: one per direction, each with its own channel (librdmacm's way). */
static int rcm_cq_make(struct rdma_cm_id *id, uint32_t depth, struct ibv_comp_channel **ch_p,
                       struct ibv_cq **cq_p)
{
    if ((*ch_p = ibv_create_comp_channel(id->verbs)) == NULL) {
        return errno;
    }
    if ((*cq_p = ibv_create_cq(id->verbs, (depth > 0) ? (int)depth : 1, id, *ch_p, 0)) == NULL) {
        int err = errno;

        ibv_destroy_comp_channel(*ch_p);
        *ch_p = NULL;
        return err;
    }
    return 0;
}

static void rcm_cqs_free(rcm_id_t *id)
{
    struct rdma_cm_id *c = &id->id;

    if (!id->own_cqs) {
        return;
    }
    if (c->send_cq != NULL)         ibv_destroy_cq(c->send_cq);
    if (c->send_cq_channel != NULL) ibv_destroy_comp_channel(c->send_cq_channel);
    if (c->recv_cq != NULL)         ibv_destroy_cq(c->recv_cq);
    if (c->recv_cq_channel != NULL) ibv_destroy_comp_channel(c->recv_cq_channel);
    c->send_cq = c->recv_cq = NULL;
    c->send_cq_channel = c->recv_cq_channel = NULL;
    id->own_cqs = 0;
}

/* A call without a PD takes the id's, or one made for the id (gone with it). */
static int rcm_id_pd(rcm_id_t *id, struct ibv_pd **pd_p)
{
    struct rdma_cm_id *c = &id->id;

    if (*pd_p != NULL) {
        return 0;
    }
    if (c->pd == NULL) {
        if ((c->pd = ibv_alloc_pd(c->verbs)) == NULL) {
            return errno;
        }
        id->own_pd = 1;
    }
    *pd_p = c->pd;
    return 0;
}

static int rcm_qp_defaults(rcm_id_t *id, struct ibv_pd **pd_p, struct ibv_qp_init_attr *attr)
{
    struct rdma_cm_id *c = &id->id;
    int ret;

    if ((ret = rcm_id_pd(id, pd_p)) != 0) {
        return ret;
    }
    if ((attr->srq == NULL) && (c->srq != NULL)) {
        attr->srq = c->srq;   /* rdma_create_srq's */
    }
    if ((attr->send_cq == NULL) || (attr->recv_cq == NULL)) {
        id->own_cqs = 1;
        if (((attr->send_cq == NULL) &&
             (ret = rcm_cq_make(c, attr->cap.max_send_wr, &c->send_cq_channel, &c->send_cq))) ||
            ((attr->recv_cq == NULL) &&
             (ret = rcm_cq_make(c, attr->cap.max_recv_wr, &c->recv_cq_channel, &c->recv_cq)))) {
            rcm_cqs_free(id);
            return ret;
        }
        if (attr->send_cq == NULL) attr->send_cq = c->send_cq;
        if (attr->recv_cq == NULL) attr->recv_cq = c->recv_cq;
    }
    return 0;
}

static int rcm_create_qp(struct rdma_cm_id *cm_id, struct ibv_pd *pd,
                         struct ibv_qp_init_attr *attr, uint32_t create_flags)
{
    rcm_id_t *id = RCM(id, cm_id);
    struct ibv_qp *qp;
    int ret;

    if (cm_id->verbs == NULL) {
        rcm_bridge()->log_error("rdma_create_qp: id %p has no device yet (bind or resolve "
                                "its address first)", (void*)cm_id);
        return rcm_ret(EINVAL);
    }
    if ((pd != NULL) && (pd->context != cm_id->verbs)) {
        rcm_bridge()->log_error("rdma_create_qp: the PD is of another device than id %p's",
                                (void*)cm_id);
        return rcm_ret(EINVAL);
    }
    if ((ret = rcm_qp_defaults(id, &pd, attr)) != 0) {
        return rcm_ret(ret);
    }
    if ((qp = rcm_bridge()->create_qp(id->dev, pd, attr, create_flags)) == NULL) {
        ret = errno;
        rcm_cqs_free(id);
        return rcm_ret(ret);
    }
    cm_id->qp      = qp;
    cm_id->qp_type = attr->qp_type;
    if (cm_id->pd == NULL) {
        cm_id->pd = pd;   /* rdma_reg_msgs(id, ...) registers on it, as librdmacm's */
    }
    return 0;
}

int rdma_create_qp(struct rdma_cm_id *cm_id, struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
    return rcm_create_qp(cm_id, pd, attr, 0);
}

/* An SRQ for the id's QPs (rdma_create_qp takes it when given none). */
int rdma_create_srq(struct rdma_cm_id *cm_id, struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
    rcm_id_t *id = RCM(id, cm_id);
    struct ibv_srq *srq;
    int ret;

    if ((cm_id->verbs == NULL) || (attr == NULL) || (cm_id->srq != NULL)) {
        rcm_bridge()->log_error("rdma_create_srq: id %p %s", (void *)cm_id,
                                (cm_id->verbs == NULL) ? "has no device yet" :
                                (attr == NULL) ? "NULL attributes" : "has an SRQ already");
        return rcm_ret(EINVAL);
    }
    if ((ret = rcm_id_pd(id, &pd)) != 0) {
        return rcm_ret(ret);
    }
    if ((srq = ibv_create_srq(pd, attr)) == NULL) {
        return -1;   /* errno and the line are libibverbs' */
    }
    cm_id->srq = srq;
    return 0;
}

int rdma_create_srq_ex(struct rdma_cm_id *cm_id, struct ibv_srq_init_attr_ex *attr)
{
    struct ibv_srq_init_attr basic;
    int ret;

    if ((attr == NULL) || (attr->comp_mask & ~(uint32_t)(IBV_SRQ_INIT_ATTR_TYPE |
                                                         IBV_SRQ_INIT_ATTR_PD)) ||
        ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && (attr->srq_type != IBV_SRQT_BASIC))) {
        return rcm_unsupported("rdma_create_srq_ex beyond a basic SRQ (XRC, tag matching, "
                               "a CQ)");
    }
    memset(&basic, 0, sizeof(basic));
    basic.srq_context = attr->srq_context;
    basic.attr        = attr->attr;
    ret = rdma_create_srq(cm_id, (attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) ? attr->pd : NULL,
                          &basic);
    attr->attr = basic.attr;
    return ret;
}

void rdma_destroy_srq(struct rdma_cm_id *cm_id)
{
    if ((cm_id->srq != NULL) && (ibv_destroy_srq(cm_id->srq) == 0)) {
        cm_id->srq = NULL;   /* the CQs stay: they are the QP's (rdma_destroy_qp's) */
    }
}

/*
 * The extended form: a PD, send ops flags (the ibv_wr_* interface, as
 * libibverbs' ibv_create_qp_ex on softib gives it) and the create flag
 * BLOCK_SELF_MCAST_LB; other fields are not supported. ibv_qp_init_attr is
 * the start of ibv_qp_init_attr_ex.
 */
int rdma_create_qp_ex(struct rdma_cm_id *cm_id, struct ibv_qp_init_attr_ex *attr)
{
    struct ibv_qp_init_attr basic;
    int ret;

    if (attr == NULL) {
        rcm_bridge()->log_error("rdma_create_qp_ex: NULL attributes");
        return rcm_ret(EINVAL);
    }
    if (rcm_bridge()->qp_ex_check(attr, "rdma_create_qp_ex") != 0) {
        return rcm_ret(ENOSYS);
    }
    memcpy(&basic, attr, sizeof(basic));
    ret = rcm_create_qp(cm_id, (attr->comp_mask & IBV_QP_INIT_ATTR_PD) ? attr->pd : NULL, &basic,
                        (attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) ? attr->create_flags
                                                                         : 0);
    memcpy(attr, &basic, sizeof(basic));   /* the caps granted */
    if ((ret == 0) && (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
        ((ret = rcm_bridge()->qp_ex_init(cm_id->qp, attr->send_ops_flags)) != 0)) {
        rdma_destroy_qp(cm_id);
        return rcm_ret(ret);
    }
    return ret;
}

void rdma_destroy_qp(struct rdma_cm_id *cm_id)
{
    /* not when ibv_destroy_qp has destroyed it already (the CM id has no QP then) */
    if ((cm_id->qp != NULL) &&
        ((RCM(id, cm_id)->dev->qp == NULL) || (ibv_destroy_qp(cm_id->qp) == 0))) {
        cm_id->qp = NULL;
    }
    rcm_cqs_free(RCM(id, cm_id));
}

/*
 * The program's parameters; RDMA_MAX_RESP_RES / RDMA_MAX_INIT_DEPTH, or no
 * parameters at all, mean the device's limits, as librdmacm takes them.
 */
static int rcm_param_in(struct rdma_cm_id *cm_id, const struct rdma_conn_param *in,
                        axon_dev_cm_conn_param_t *out)
{
    struct ibv_device_attr dev;
    int ret;

    if ((ret = ibv_query_device(cm_id->verbs, &dev)) != 0) {
        return ret;
    }
    memset(out, 0, sizeof(*out));
    out->responder_resources = (uint8_t)dev.max_qp_rd_atom;
    out->initiator_depth     = (uint8_t)dev.max_qp_init_rd_atom;
    out->retry_count         = 7;
    out->rnr_retry_count     = 7;
    if (in == NULL) {
        return 0;
    }
    out->private_data     = in->private_data;
    out->private_data_len = in->private_data_len;
    if (in->responder_resources < out->responder_resources) {
        out->responder_resources = in->responder_resources;
    }
    if (in->initiator_depth < out->initiator_depth) {
        out->initiator_depth = in->initiator_depth;
    }
    out->flow_control    = in->flow_control;
    out->retry_count     = in->retry_count;
    out->rnr_retry_count = in->rnr_retry_count;
    out->srq             = in->srq;
    out->qp_num          = in->qp_num;
    return 0;
}

int rdma_connect(struct rdma_cm_id *cm_id, struct rdma_conn_param *conn_param)
{
    axon_dev_cm_conn_param_t param;
    int ret;

    if (cm_id->verbs == NULL) {
        rcm_bridge()->log_error("rdma_connect: id %p has no device yet (resolve the route "
                                "first)", (void*)cm_id);
        return rcm_ret(EINVAL);
    }
    if ((ret = rcm_param_in(cm_id, conn_param, &param)) != 0) {
        return rcm_ret(ret);
    }
    if ((ret = rcm_bridge()->connect(RCM(id, cm_id)->dev, &param)) != 0) {
        return rcm_ret(ret);
    }
    return rcm_sync_complete(RCM(id, cm_id));   /* ESTABLISHED (or CONNECT_RESPONSE) */
}

int rdma_accept(struct rdma_cm_id *cm_id, struct rdma_conn_param *conn_param)
{
    axon_dev_cm_conn_param_t param;
    int ret;

    /* NULL: the request's resources (the CM's rule) */
    if ((conn_param != NULL) && ((ret = rcm_param_in(cm_id, conn_param, &param)) != 0)) {
        return rcm_ret(ret);
    }
    ret = rcm_bridge()->accept(RCM(id, cm_id)->dev, (conn_param != NULL) ? &param : NULL);
    if ((ret != 0) || (cm_id->ps == RDMA_PS_UDP)) {   /* UD: no event follows */
        return rcm_ret(ret);
    }
    return rcm_sync_complete(RCM(id, cm_id));   /* ESTABLISHED */
}

int rdma_reject(struct rdma_cm_id *cm_id, const void *private_data, uint8_t private_data_len)
{
    return rcm_ret(rcm_bridge()->reject(RCM(id, cm_id)->dev, private_data, private_data_len));
}

int rdma_establish(struct rdma_cm_id *cm_id)
{
    return rcm_ret(rcm_bridge()->establish(RCM(id, cm_id)->dev));
}

/* For a QP of the program's own (rping -q): the CM's attributes for qp_attr->qp_state. */
int rdma_init_qp_attr(struct rdma_cm_id *cm_id, struct ibv_qp_attr *qp_attr, int *qp_attr_mask)
{
    axon_dev_qp_attr_t dattr;
    int ret;

    if ((qp_attr == NULL) || (qp_attr_mask == NULL)) {
        rcm_bridge()->log_error("rdma_init_qp_attr: NULL %s",
                                (qp_attr == NULL) ? "qp_attr" : "qp_attr_mask");
        return rcm_ret(EINVAL);
    }
    memset(&dattr, 0, sizeof(dattr));
    dattr.qp_state = (axon_dev_qp_state_t)qp_attr->qp_state;
    if ((ret = rcm_bridge()->init_qp_attr(RCM(id, cm_id)->dev, &dattr, qp_attr_mask)) != 0) {
        return rcm_ret(ret);
    }
    {
        const axon_dev_qp_attr_t *in = &dattr;
        struct ibv_qp_attr *out      = qp_attr;
        AXON_DEV_IBV_CONVERT(AXON_DEV_IBV_QP_ATTR);
    }
    return 0;
}

/* TOS, ACK_TIMEOUT, REUSEADDR, AFONLY (the CM's, dev_cm.h); an IB path: ENOSYS. */
int rdma_set_option(struct rdma_cm_id *cm_id, int level, int optname, void *optval,
                    size_t optlen)
{
    return rcm_ret(rcm_bridge()->set_option(RCM(id, cm_id)->dev, level, optname, optval,
                                            optlen));
}

int rdma_disconnect(struct rdma_cm_id *cm_id)
{
    int ret = rcm_bridge()->disconnect(RCM(id, cm_id)->dev);

    return ret ? rcm_ret(ret) : rcm_sync_complete(RCM(id, cm_id));   /* DISCONNECTED */
}
