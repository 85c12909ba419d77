/*
 * Queue pairs: create, destroy, query, modify (the checks are the table in
 * softib_qp_attr.c; this file applies a transition), completions and the
 * move to ERR with its flush.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "log.h"
#include "softib.h"
#include "softib_direct.h"

#define SOFTIB_QP_CREATE_XCHAN (AXON_DEV_QP_CREATE_CROSS_CHANNEL | \
                                AXON_DEV_QP_CREATE_MANAGED_SEND | AXON_DEV_QP_CREATE_MANAGED_RECV)

static const unsigned softib_qp_type_caps[] = {
    [AXON_DEV_QPT_RC] = AXON_DEV_CAP_RC,
    [AXON_DEV_QPT_UC] = AXON_DEV_CAP_UC,
    [AXON_DEV_QPT_UD] = AXON_DEV_CAP_UD,
};

/* Completion opcode of each send opcode */
static const axon_dev_wc_opcode_t softib_wc_opcode[] = {
    [AXON_DEV_WR_RDMA_WRITE]           = AXON_DEV_WC_RDMA_WRITE,
    [AXON_DEV_WR_RDMA_WRITE_WITH_IMM]  = AXON_DEV_WC_RDMA_WRITE,
    [AXON_DEV_WR_SEND]                 = AXON_DEV_WC_SEND,
    [AXON_DEV_WR_SEND_WITH_IMM]        = AXON_DEV_WC_SEND,
    [AXON_DEV_WR_RDMA_READ]            = AXON_DEV_WC_RDMA_READ,
    [AXON_DEV_WR_ATOMIC_CMP_AND_SWP]   = AXON_DEV_WC_COMP_SWAP,
    [AXON_DEV_WR_ATOMIC_FETCH_AND_ADD] = AXON_DEV_WC_FETCH_ADD,
    [AXON_DEV_WR_EXT_MASKED_ATOMIC_CMP_AND_SWP]   = AXON_DEV_WC_MASKED_COMP_SWAP,
    [AXON_DEV_WR_EXT_MASKED_ATOMIC_FETCH_AND_ADD] = AXON_DEV_WC_MASKED_FETCH_ADD,
    [AXON_DEV_WR_SEND_ENABLE]          = AXON_DEV_WC_SEND_ENABLE,
    [AXON_DEV_WR_RECV_ENABLE]          = AXON_DEV_WC_RECV_ENABLE,
    [AXON_DEV_WR_CQE_WAIT]             = AXON_DEV_WC_CQE_WAIT,
    [AXON_DEV_WR_UMR_FILL]             = AXON_DEV_WC_UMR,
    [AXON_DEV_WR_UMR_INVALIDATE]       = AXON_DEV_WC_UMR,
};

softib_qp_t *softib_qp_lookup(softib_dev_t *dev, uint32_t qpn)
{
    softib_qp_t *qp;

    if (SOFTIB_QPN_SLOT(qpn) != softib_wire_slot(dev->wire)) {
        return NULL;
    }
    qp = dev->qps[SOFTIB_QPN_INDEX(qpn)];
    return ((qp != NULL) && (qp->super.qp_num == qpn)) ? qp : NULL;
}

int softib_qp_can_send(const softib_qp_t *qp)
{
    return (qp->super.state == AXON_DEV_QPS_RTS) || (qp->super.state == AXON_DEV_QPS_SQD);
}

int softib_qp_can_recv(const softib_qp_t *qp)
{
    return (qp->super.state >= AXON_DEV_QPS_RTR) && (qp->super.state <= AXON_DEV_QPS_SQE);
}

/* wqe is the head (sq_head): completions come in order */
void softib_qp_complete_send(softib_qp_t *qp, softib_send_wqe_t *wqe, axon_dev_wc_status_t st)
{
    softib_cq_src_t src = {qp, qp->sq_head, 0};
    softib_cq_t *cq     = softib_cq(qp->super.send_cq);
    axon_dev_wc_t wc;

    if (wqe->wait_cq != NULL) {
        wqe->wait_cq->refcnt--;
        wqe->wait_cq = NULL;
    }
    if ((st == AXON_DEV_WC_SUCCESS) && !qp->sq_sig_all &&
        !(wqe->flags & AXON_DEV_SEND_SIGNALED)) {
        if (cq->flags & AXON_DEV_CQ_IGNORE_OVERRUN) {
            softib_cq_src_release(&src);   /* nobody polls that CQ (softib_cq_push) */
        }
        return;   /* else its slot goes with a later signaled WQE's, when that is polled */
    }
    memset(&wc, 0, sizeof(wc));
    wc.wr_id    = wqe->wr_id;
    wc.status   = st;
    wc.opcode   = softib_wc_opcode[wqe->opcode];
    wc.byte_len = wqe->length;
    wc.qp_num   = qp->super.qp_num;
    softib_cq_push(cq, &wc, 0, &src);
}

void softib_qp_complete_recv(softib_qp_t *qp, uint64_t wr_id, axon_dev_wc_status_t st,
                             axon_dev_wc_opcode_t opcode, uint32_t byte_len, uint32_t imm,
                             int with_imm, uint32_t src_qp, int grh, int solicited)
{
    softib_cq_src_t src = {qp, 0, 1};   /* one slot of its queue or SRQ */
    axon_dev_wc_t wc;

    memset(&wc, 0, sizeof(wc));
    wc.wr_id    = wr_id;
    wc.status   = st;
    wc.opcode   = opcode;
    wc.byte_len = byte_len;
    wc.qp_num   = qp->super.qp_num;
    wc.src_qp   = src_qp;
    if (with_imm) {
        wc.imm_data  = imm;
        wc.wc_flags |= AXON_DEV_WC_WITH_IMM;
    }
    if (grh) {
        wc.wc_flags |= AXON_DEV_WC_GRH;
    }
    softib_cq_push(softib_cq(qp->super.recv_cq), &wc, solicited, &src);
}

/* Every WQE still queued completes with WR_FLUSH_ERR, oldest first */
void softib_qp_flush(softib_qp_t *qp)
{
    softib_recv_wqe_t rwqe;
    axon_dev_sge_t sge[SOFTIB_MAX_SGE];
    unsigned from = qp->sq_head;

    for (; qp->sq_head != qp->sq_tail; qp->sq_head++) {
        softib_qp_complete_send(qp, softib_sq_wqe(qp, qp->sq_head), AXON_DEV_WC_WR_FLUSH_ERR);
    }
    /* enables that will never run: their managed queues would hold their WQEs forever */
    softib_xchan_drop(qp, from, 1);
    softib_umr_drop(qp, from);
    qp->sq_req = qp->sq_started = qp->sq_en = qp->sq_tail;
    qp->rq.en  = qp->rq.tail;   /* held receives are flushed too */
    qp->req.pkt = 0;
    if (qp->resp.have_wqe) {
        softib_qp_complete_recv(qp, qp->resp.wqe.wr_id, AXON_DEV_WC_WR_FLUSH_ERR,
                                AXON_DEV_WC_RECV, 0, 0, 0, 0, 0, 0);
        qp->resp.have_wqe = 0;
    }
    if (qp->super.srq == NULL) {
        while (softib_rq_pop(&qp->rq, &rwqe, sge)) {
            softib_qp_complete_recv(qp, rwqe.wr_id, AXON_DEV_WC_WR_FLUSH_ERR,
                                    AXON_DEV_WC_RECV, 0, 0, 0, 0, 0, 0);
        }
    }
    qp->resp.in_msg    = 0;
    qp->resp.rd_head   = qp->resp.rd_tail;
    qp->comp.rto_deadline = qp->comp.rnr_deadline = 0;
}

static void softib_qp_enter_error(softib_qp_t *qp)
{
    int was_err = (qp->super.state == AXON_DEV_QPS_ERR);

    qp->super.state  = AXON_DEV_QPS_ERR;
    qp->sq_draining  = 0;
    softib_qp_activate(qp);   /* what a pass still owes an errored QP, it does then */
    softib_qp_flush(qp);
    if (!was_err && (qp->super.srq != NULL)) {
        softib_qp_event(qp, AXON_DEV_EVENT_QP_LAST_WQE_REACHED);
    }
    if (qp->super.qp_type == AXON_DEV_QPT_DC_INI) {
        softib_dc_error(qp);
    }
    softib_direct_qp_update(qp, 0);
}

void softib_qp_event(softib_qp_t *qp, axon_dev_event_type_t type)
{
    if (qp->dct != NULL) {
        softib_dc_event(qp, type);
    } else {
        softib_async_event(softib_qp_dev(qp), type, &qp->super);
    }
}

void softib_qp_error(softib_qp_t *qp)
{
    if (qp->super.state != AXON_DEV_QPS_ERR) {
        axon_debug("softib: QP 0x%x moves to ERR", qp->super.qp_num);
    }
    softib_qp_enter_error(qp);
}

/*
 * Seed §7.1.1: the QPs whose send or receive CQ overran get QP_FATAL and go
 * to ERR (RESET ones have no work to fail; a DC target's contexts report
 * through the DCT, which has no fatal event). Once per QP until it is reset.
 */
void softib_qp_cq_overrun(softib_dev_t *dev)
{
    softib_qp_t *qp;
    unsigned i;

    dev->cq_overrun = 0;
    for (i = 1; i <= SOFTIB_QPN_MAX_INDEX; i++) {
        qp = dev->qps[i];
        if ((qp == NULL) || (qp->dct != NULL) || qp->cq_fatal ||
            (qp->super.state == AXON_DEV_QPS_RESET) ||
            (!softib_cq(qp->super.send_cq)->error && !softib_cq(qp->super.recv_cq)->error)) {
            continue;
        }
        axon_debug("softib: QP 0x%x: its %s CQ overran: QP_FATAL", qp->super.qp_num,
                   softib_cq(qp->super.send_cq)->error ? "send" : "receive");
        qp->cq_fatal = 1;
        softib_async_event(dev, AXON_DEV_EVENT_QP_FATAL, &qp->super);
        softib_qp_error(qp);
    }
}

/* Back to RESET: queues emptied without completions, engine state cleared */
void softib_qp_reset(softib_qp_t *qp)
{
    axon_dev_qp_cap_t cap = qp->cap;
    int dci               = (qp->super.qp_type == AXON_DEV_QPT_DC_INI);

    if (dci) {
        softib_dc_leave(qp);
    }
    softib_xchan_drop(qp, qp->sq_head, 0);
    softib_umr_drop(qp, qp->sq_head);
    qp->sq_free = qp->sq_head = qp->sq_req = qp->sq_started = qp->sq_tail;
    qp->sq_en = qp->sq_en_count.base = qp->sq_tail;
    qp->sq_en_count.max = 0;
    if (qp->super.srq == NULL) {
        qp->rq.head = qp->rq.freed = qp->rq.en = qp->rq.en_count.base = qp->rq.tail;
        qp->rq.en_count.max = 0;
    }
    /* the queues are empty: completions still in the CQs hold no slot of them */
    softib_cq_detach(softib_cq(qp->super.send_cq), qp);
    softib_cq_detach(softib_cq(qp->super.recv_cq), qp);
    if (qp->ack_queued) {
        axon_list_del(&qp->ack_link);
        qp->ack_queued = 0;
    }
    memset(&qp->req, 0, sizeof(qp->req));
    memset(&qp->comp, 0, sizeof(qp->comp));
    memset(&qp->resp, 0, sizeof(qp->resp));
    memset(&qp->dc, 0, sizeof(qp->dc));
    memset(&qp->attr, 0, sizeof(qp->attr));
    qp->cap         = cap;
    qp->sq_draining = 0;
    qp->cq_fatal    = 0;
    qp->direct_off  = 0;
    qp->direct_until = 0;
    qp->direct_late  = 0;
    qp->super.state = AXON_DEV_QPS_RESET;
    softib_direct_qp_update(qp, 0);
    if (dci) {
        softib_dc_start(qp);
    }
}

/* Free a QP and its queues (any of them may not have been allocated yet). */
static void softib_qp_free(softib_qp_t *qp)
{
    softib_rq_cleanup(&qp->rq);
    softib_umr_qp_free(qp);
    free(qp->sq_amo);
    free(qp->sq_inline);
    free(qp->sq_sge);
    free(qp->sq);
    free(qp);
}

int softib_qpn_alloc(softib_dev_t *dev, softib_qp_t *qp, const char *what)
{
    unsigned n, index = 0;

    for (n = 0; n < SOFTIB_QPN_MAX_INDEX; n++) {
        /* rotate through indexes, so a new QP does not get the number of one just gone */
        unsigned candidate = 1 + (dev->next_qp_index - 1 + n) % SOFTIB_QPN_MAX_INDEX;
        if (dev->qps[candidate] == NULL) {
            index = candidate;
            break;
        }
    }
    if (index == 0) {
        axon_error("softib: %s: all %u QP numbers of %s are in use", what, SOFTIB_QPN_MAX_INDEX,
                   dev->super.name);
        return ENOMEM;
    }
    dev->next_qp_index = index + 1;
    softib_wire_set_next_qp_index(dev->wire, dev->next_qp_index);
    qp->super.qp_num   = SOFTIB_QPN_MAKE(softib_wire_slot(dev->wire), index);
    dev->qps[index]    = qp;
    dev->num_qps++;
    return 0;
}

int softib_create_qp(axon_dev_pd_t *pd, axon_dev_qp_init_attr_t *init, axon_dev_qp_t **qp_p)
{
    softib_dev_t *dev = softib_dev(pd->context);
    axon_dev_qp_cap_t *cap = &init->cap;
    int dci = (init->qp_type == AXON_DEV_QPT_DC_INI), amo;
    unsigned i, sges;
    softib_qp_t *qp;

    if ((init->qp_type != AXON_DEV_QPT_RC) && (init->qp_type != AXON_DEV_QPT_UC) &&
        (init->qp_type != AXON_DEV_QPT_UD) && !dci) {
        axon_error("softib: create_qp: QP type %d is not RC, UC, UD or DC_INI",
                   (int)init->qp_type);
        return EINVAL;
    }
    if (!(dev->attr.cap_flags & (dci ? AXON_DEV_CAP_DC : softib_qp_type_caps[init->qp_type]))) {
        axon_debug("softib: %s: QP type %d is masked off", dev->super.name, (int)init->qp_type);
        return EOPNOTSUPP;
    }
    if (dci && ((init->srq != NULL) || init->create_flags)) {
        axon_error("softib: create_qp: a DC initiator only sends (srq %p, create_flags 0x%x)",
                   (void *)init->srq, init->create_flags);
        return EINVAL;
    }
    if (init->create_flags & ~(SOFTIB_QP_CREATE_XCHAN | AXON_DEV_QP_CREATE_UMR |
                               AXON_DEV_QP_CREATE_BLOCK_SELF_MCAST_LB)) {
        axon_error("softib: create_qp: unknown create_flags 0x%x", init->create_flags);
        return EINVAL;
    }
    if (((init->create_flags & SOFTIB_QP_CREATE_XCHAN) &&
         !(dev->attr.cap_flags & AXON_DEV_CAP_CROSS_CHANNEL)) ||
        ((init->create_flags & AXON_DEV_QP_CREATE_UMR) &&
         !(dev->attr.cap_flags & AXON_DEV_CAP_UMR))) {
        axon_error("softib: create_qp: create_flags 0x%x, but %s is masked off on %s",
                   init->create_flags, (init->create_flags & AXON_DEV_QP_CREATE_UMR) &&
                   !(dev->attr.cap_flags & AXON_DEV_CAP_UMR) ? "UMR" : "cross-channel",
                   dev->super.name);
        return EOPNOTSUPP;
    }
    if ((init->create_flags & AXON_DEV_QP_CREATE_UMR) &&
        (init->max_inl_send_klms > dev->attr.umr.max_send_wqe_inline_klms)) {
        axon_error("softib: create_qp: max_inl_send_klms %u over the device's %u",
                   init->max_inl_send_klms, dev->attr.umr.max_send_wqe_inline_klms);
        return EINVAL;
    }
    if ((init->create_flags & AXON_DEV_QP_CREATE_MANAGED_RECV) && (init->srq != NULL)) {
        axon_error("softib: create_qp: MANAGED_RECV with an SRQ (only a QP's own receive "
                   "queue can be managed)");
        return EINVAL;
    }
    if ((init->send_cq == NULL) || (init->recv_cq == NULL)) {
        axon_error("softib: create_qp: send_cq %p, recv_cq %p", (void *)init->send_cq,
                   (void *)init->recv_cq);
        return EINVAL;
    }
    if ((init->srq != NULL) && !(dev->attr.cap_flags & AXON_DEV_CAP_SRQ)) {
        axon_debug("softib: %s: SRQs are masked off", dev->super.name);
        return EOPNOTSUPP;
    }
    if ((cap->max_send_wr > (uint32_t)dev->attr.max_qp_wr) ||
        ((init->srq == NULL) && (cap->max_recv_wr > (uint32_t)dev->attr.max_qp_wr)) ||
        (cap->max_send_sge > (uint32_t)dev->attr.max_sge) ||
        ((init->srq == NULL) && (cap->max_recv_sge > (uint32_t)dev->attr.max_sge)) ||
        (cap->max_inline_data > dev->attr.max_inline_data)) {
        axon_error("softib: create_qp: cap send_wr %u recv_wr %u send_sge %u recv_sge %u "
                   "inline %u over the device limits (%d, %d, %u)", cap->max_send_wr,
                   cap->max_recv_wr, cap->max_send_sge, cap->max_recv_sge,
                   cap->max_inline_data, dev->attr.max_qp_wr, dev->attr.max_sge,
                   dev->attr.max_inline_data);
        return EINVAL;
    }

    qp = calloc(1, sizeof(*qp));
    if (qp == NULL) {
        goto err_nomem;
    }
    qp->cap         = *cap;
    if (qp->cap.max_send_wr == 0) {
        qp->cap.max_send_wr = 1;
    }
    if ((init->srq != NULL) || dci) {
        qp->cap.max_recv_wr = qp->cap.max_recv_sge = 0;
    } else if (qp->cap.max_recv_wr == 0) {
        qp->cap.max_recv_wr = 1;
    }
    qp->sq_size   = qp->cap.max_send_wr;
    sges          = qp->cap.max_send_sge ? qp->cap.max_send_sge : 1;
    /*
     * A send WQE can carry inline what its SGEs' room holds (16 bytes each),
     * as rxe's and a NIC's do: more than asked is granted (the manual allows
     * it) and written back, so a QP made with max_inline_data 0 still posts
     * a 16-byte INLINE send (librdmacm's rdma_xclient does).
     */
    if ((dev->attr.cap_flags & AXON_DEV_CAP_INLINE) &&
        (qp->cap.max_inline_data < sges * SOFTIB_SGE_INLINE_ROOM)) {
        qp->cap.max_inline_data = (sges * SOFTIB_SGE_INLINE_ROOM < dev->attr.max_inline_data) ?
                                  sges * SOFTIB_SGE_INLINE_ROOM : dev->attr.max_inline_data;
    }
    qp->sq        = calloc(qp->sq_size, sizeof(*qp->sq));
    qp->sq_sge    = calloc((size_t)qp->sq_size * sges, sizeof(*qp->sq_sge));
    qp->sq_inline = qp->cap.max_inline_data ?
                    malloc((size_t)qp->sq_size * qp->cap.max_inline_data) : NULL;
    /* masked atomics carry up to 128 bytes of operands: only QPs that may post them */
    amo           = ((init->qp_type == AXON_DEV_QPT_RC) || dci) &&
                    (dev->attr.cap_flags & AXON_DEV_CAP_EXT_ATOMIC);
    qp->sq_amo    = amo ? calloc(qp->sq_size, sizeof(*qp->sq_amo)) : NULL;
    if ((qp->sq == NULL) || (qp->sq_sge == NULL) ||
        (qp->cap.max_inline_data && (qp->sq_inline == NULL)) || (amo && (qp->sq_amo == NULL))) {
        goto err_free;
    }
    for (i = 0; i < qp->sq_size; i++) {
        qp->sq[i].amo = qp->sq_amo ? &qp->sq_amo[i] : NULL;
        qp->sq[i].sge = &qp->sq_sge[(size_t)i * sges];
        qp->sq[i].inline_data = qp->sq_inline ?
                                &qp->sq_inline[(size_t)i * qp->cap.max_inline_data] : NULL;
    }
    if ((init->srq == NULL) && !dci && softib_rq_init(&qp->rq, qp->cap.max_recv_wr,
                                                      qp->cap.max_recv_sge)) {
        goto err_free;
    }
    if ((init->create_flags & AXON_DEV_QP_CREATE_UMR) &&
        softib_umr_qp_init(qp, init->max_inl_send_klms)) {
        goto err_free;
    }

    qp->super.context    = pd->context;
    qp->super.pd         = pd;
    qp->super.send_cq    = init->send_cq;
    qp->super.recv_cq    = init->recv_cq;
    qp->super.srq        = init->srq;
    qp->super.qp_context = init->qp_context;
    qp->super.qp_type    = init->qp_type;
    qp->super.state      = AXON_DEV_QPS_RESET;
    qp->sq_sig_all       = init->sq_sig_all;
    qp->create_flags     = init->create_flags;
    qp->rq.managed       = !!(init->create_flags & AXON_DEV_QP_CREATE_MANAGED_RECV);
    axon_list_init(&qp->ack_link);

    pthread_mutex_lock(&dev->lock);
    if (softib_qpn_alloc(dev, qp, "create_qp")) {
        pthread_mutex_unlock(&dev->lock);
        softib_qp_free(qp);
        return ENOMEM;
    }
    if (dci) {
        softib_dc_start(qp);
    }
    softib_pd(pd)->refcnt++;
    softib_cq(init->send_cq)->refcnt++;
    softib_cq(init->recv_cq)->refcnt++;
    if (init->srq != NULL) {
        softib_srq(init->srq)->refcnt++;
    }
    pthread_mutex_unlock(&dev->lock);

    *cap  = qp->cap;
    init->max_inl_send_klms = qp->max_inl_klms;
    *qp_p = &qp->super;
    return 0;

err_free:
    softib_qp_free(qp);
err_nomem:
    axon_error("softib: no memory for a QP (%u send WRs, %u receive WRs)", cap->max_send_wr,
               cap->max_recv_wr);
    return ENOMEM;
}

int softib_destroy_qp(axon_dev_qp_t *aqp)
{
    softib_dev_t *dev = softib_dev(aqp->context);
    softib_qp_t *qp   = softib_qp(aqp);

    pthread_mutex_lock(&dev->lock);
    if (aqp->qp_type == AXON_DEV_QPT_DC_INI) {
        softib_dc_leave(qp);
    }
    softib_xchan_drop(qp, qp->sq_head, 0);
    softib_umr_drop(qp, qp->sq_head);
    softib_mcast_qp_destroyed(dev, qp);   /* a destroyed QP leaves its groups */
    softib_cq_detach(softib_cq(aqp->send_cq), qp);
    softib_cq_detach(softib_cq(aqp->recv_cq), qp);
    softib_direct_qp_update(qp, 1);
    dev->qps[SOFTIB_QPN_INDEX(aqp->qp_num)] = NULL;
    dev->num_qps--;
    softib_qp_deactivate(qp);
    if (qp->ack_queued) {
        axon_list_del(&qp->ack_link);
    }
    softib_pd(aqp->pd)->refcnt--;
    softib_cq(aqp->send_cq)->refcnt--;
    softib_cq(aqp->recv_cq)->refcnt--;
    if (aqp->srq != NULL) {
        softib_srq(aqp->srq)->refcnt--;
    }
    softib_async_forget(dev, aqp);   /* unreachable now: no new event can name it */
    pthread_mutex_unlock(&dev->lock);
    softib_async_wait_acked(dev, &aqp->async_held);
    softib_qp_free(qp);
    return 0;
}

int softib_query_qp(axon_dev_qp_t *aqp, axon_dev_qp_attr_t *attr, int attr_mask,
                    axon_dev_qp_init_attr_t *init)
{
    softib_dev_t *dev = softib_dev(aqp->context);
    softib_qp_t *qp   = softib_qp(aqp);

    (void)attr_mask;   /* everything is returned, as verbs allow */
    pthread_mutex_lock(&dev->lock);
    *attr              = qp->attr;
    attr->qp_state     = aqp->state;
    attr->cur_qp_state = aqp->state;
    attr->cap          = qp->cap;
    attr->sq_draining  = (uint8_t)qp->sq_draining;
    if (init != NULL) {
        memset(init, 0, sizeof(*init));
        init->qp_context = aqp->qp_context;
        init->send_cq    = aqp->send_cq;
        init->recv_cq    = aqp->recv_cq;
        init->srq        = aqp->srq;
        init->cap        = qp->cap;
        init->qp_type    = aqp->qp_type;
        init->sq_sig_all = qp->sq_sig_all;
        init->create_flags = qp->create_flags;
        init->max_inl_send_klms = qp->max_inl_klms;
    }
    pthread_mutex_unlock(&dev->lock);
    return 0;
}

/* Copy the attributes named by mask; the checks passed already */
static void softib_qp_attr_apply(softib_qp_t *qp, const axon_dev_qp_attr_t *attr, int mask)
{
    axon_dev_qp_attr_t *a = &qp->attr;

#define COPY(_bit, _field) if (mask & (_bit)) { a->_field = attr->_field; }
    COPY(AXON_DEV_QP_EN_SQD_ASYNC_NOTIFY, en_sqd_async_notify);
    COPY(AXON_DEV_QP_ACCESS_FLAGS, qp_access_flags);
    COPY(AXON_DEV_QP_PKEY_INDEX, pkey_index);
    COPY(AXON_DEV_QP_PORT, port_num);
    COPY(AXON_DEV_QP_QKEY, qkey);
    COPY(AXON_DEV_QP_AV, ah_attr);
    COPY(AXON_DEV_QP_PATH_MTU, path_mtu);
    COPY(AXON_DEV_QP_TIMEOUT, timeout);
    COPY(AXON_DEV_QP_RETRY_CNT, retry_cnt);
    COPY(AXON_DEV_QP_RNR_RETRY, rnr_retry);
    COPY(AXON_DEV_QP_RQ_PSN, rq_psn);
    COPY(AXON_DEV_QP_MAX_QP_RD_ATOMIC, max_rd_atomic);
    COPY(AXON_DEV_QP_MIN_RNR_TIMER, min_rnr_timer);
    COPY(AXON_DEV_QP_SQ_PSN, sq_psn);
    COPY(AXON_DEV_QP_MAX_DEST_RD_ATOMIC, max_dest_rd_atomic);
    COPY(AXON_DEV_QP_PATH_MIG_STATE, path_mig_state);
    COPY(AXON_DEV_QP_DEST_QPN, dest_qp_num);
    COPY(AXON_DEV_QP_DC_KEY, dct_key);
    if (mask & AXON_DEV_QP_ALT_PATH) {
        a->alt_ah_attr    = attr->alt_ah_attr;
        a->alt_pkey_index = attr->alt_pkey_index;
        a->alt_port_num   = attr->alt_port_num;
        a->alt_timeout    = attr->alt_timeout;
    }
#undef COPY
}

int softib_modify_qp(axon_dev_qp_t *aqp, axon_dev_qp_attr_t *attr, int mask)
{
    softib_dev_t *dev = softib_dev(aqp->context);
    softib_qp_t *qp   = softib_qp(aqp);
    axon_dev_qp_state_t cur, next;
    int ret;

    pthread_mutex_lock(&dev->lock);
    if ((ret = softib_qp_attr_check(qp, attr, mask, &next)) != 0) {
        pthread_mutex_unlock(&dev->lock);
        return ret;
    }
    cur = aqp->state;
    if (next == AXON_DEV_QPS_RESET) {
        softib_qp_reset(qp);
        pthread_mutex_unlock(&dev->lock);
        return 0;
    }
    softib_qp_attr_apply(qp, attr, mask);
    if (next == AXON_DEV_QPS_ERR) {
        softib_qp_enter_error(qp);
        pthread_mutex_unlock(&dev->lock);
        return 0;
    }
    if (mask & AXON_DEV_QP_RQ_PSN) {
        qp->resp.psn     = qp->attr.rq_psn;
        qp->resp.ack_psn = softib_psn_add(qp->attr.rq_psn, SOFTIB_PSN_MASK);
    }
    if (mask & AXON_DEV_QP_SQ_PSN) {
        qp->req.psn = qp->req.max_psn = qp->comp.psn = qp->attr.sq_psn;
    }
    if (mask & AXON_DEV_QP_RETRY_CNT) {
        qp->comp.retry_left = qp->attr.retry_cnt;
    }
    if (mask & AXON_DEV_QP_RNR_RETRY) {
        qp->comp.rnr_left = qp->attr.rnr_retry;
    }
    if ((aqp->qp_type == AXON_DEV_QPT_UD) && !(qp->attr.path_mtu)) {
        qp->attr.path_mtu = dev->mtu;
    }
    if ((cur == AXON_DEV_QPS_RTS) && (next == AXON_DEV_QPS_SQD)) {
        /* WQEs already started still go out; the rest waits for RTS */
        qp->sqd_tail    = qp->sq_req + (qp->req.pkt ? 1 : 0);
        qp->sq_draining = 1;
    }
    if (next == AXON_DEV_QPS_RTS) {
        qp->sq_draining = 0;
    }
    aqp->state = next;
    softib_direct_qp_update(qp, 0);
    softib_qp_activate(qp);   /* RTS again, SQD: the requester has a look */
    softib_progress(dev);
    pthread_mutex_unlock(&dev->lock);
    return 0;
}
