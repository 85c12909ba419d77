/*
 * Cross-channel communication (seed §8.9, "CORE-Direct"): WAIT, SEND_ENABLE
 * and RECV_ENABLE tasks, and SENDs carrying a CALC reduction.
 *
 * Tasks are WQEs of their QP's send queue that make no packet: the requester
 * executes one when it reaches the head of the queue (every WQE before it
 * completed), so a task list runs on the device — the progress thread —
 * without the consumer calling in. A WAIT holds its queue until its CQ has
 * counted enough completions; an ENABLE moves the released limit of a managed
 * queue. Whatever either changes sets dev->xchan_kick so the progress pass
 * runs the queues again.
 *
 * Errors travel along a chain: a WAIT whose counted completions hold an error
 * fails (GENERAL_ERR) and moves its QP to ERR; an ENABLE flushed unexecuted
 * moves its managed QP to ERR, whose WQEs would otherwise be held forever.
 * Their flushed completions then fail the WAITs watching their CQs.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>
#include "dev_calc.h"
#include "log.h"
#include "softib.h"

#define CALC_BIT(_v) (1ull << (_v))

void softib_xchan_caps(axon_dev_attr_t *a)
{
    a->cross_channel.data_types = CALC_BIT(AXON_DEV_CALC_DATA_TYPE_INT) |
                                  CALC_BIT(AXON_DEV_CALC_DATA_TYPE_UINT) |
                                  CALC_BIT(AXON_DEV_CALC_DATA_TYPE_FLOAT);
    a->cross_channel.data_sizes = CALC_BIT(AXON_DEV_CALC_DATA_SIZE_64_BIT);
    a->cross_channel.int_ops    = CALC_BIT(AXON_DEV_CALC_OP_LAST + 1) - 1;
    a->cross_channel.uint_ops   = a->cross_channel.int_ops;
    a->cross_channel.fp_ops     = CALC_BIT(AXON_DEV_CALC_OP_ADD) | CALC_BIT(AXON_DEV_CALC_OP_MAX) |
                                  CALC_BIT(AXON_DEV_CALC_OP_MIN);
    a->cross_channel.max_calc_vector = SOFTIB_CALC_MAX_VECTOR;
}

/* ------------------------------------------------------------ post time */

static int softib_calc_check(softib_dev_t *dev, const axon_dev_send_wr_t *wr)
{
    const axon_dev_attr_t *a = &dev->attr;
    unsigned op = wr->calc.calc_op, type = wr->calc.data_type, size = wr->calc.data_size;
    uint32_t len;
    uint64_t ops;
    int i;

    if ((wr->opcode != AXON_DEV_WR_SEND) && (wr->opcode != AXON_DEV_WR_SEND_WITH_IMM)) {
        axon_error("softib: post_send: WITH_CALC on opcode %d (only SEND carries a CALC)",
                   (int)wr->opcode);
        return EINVAL;
    }
    if (wr->send_flags & AXON_DEV_SEND_INLINE) {
        axon_error("softib: post_send: WITH_CALC with INLINE (the operands are the SGEs)");
        return EINVAL;
    }
    if ((type > 63) || !(a->cross_channel.data_types & CALC_BIT(type)) || (size > 63) ||
        !(a->cross_channel.data_sizes & CALC_BIT(size))) {
        axon_error("softib: post_send: CALC data type %u size %u not supported (types 0x%llx, "
                   "sizes 0x%llx)", type, size, (unsigned long long)a->cross_channel.data_types,
                   (unsigned long long)a->cross_channel.data_sizes);
        return EINVAL;
    }
    ops = (type == AXON_DEV_CALC_DATA_TYPE_INT)  ? a->cross_channel.int_ops :
          (type == AXON_DEV_CALC_DATA_TYPE_UINT) ? a->cross_channel.uint_ops :
                                                   a->cross_channel.fp_ops;
    if ((op > 63) || !(ops & CALC_BIT(op))) {
        axon_error("softib: post_send: CALC operation %u not supported on data type %u "
                   "(ops 0x%llx)", op, type, (unsigned long long)ops);
        return EINVAL;
    }
    if ((wr->num_sge < 1) || (wr->sg_list == NULL)) {
        axon_error("softib: post_send: CALC with num_sge %d (one SGE per operand)",
                   wr->num_sge);
        return EINVAL;
    }
    len = wr->sg_list[0].length;
    if ((len == 0) || (len % 8) || (len / 8 > a->cross_channel.max_calc_vector)) {
        axon_error("softib: post_send: CALC operand of %u bytes (8-byte elements, at most %u)",
                   len, a->cross_channel.max_calc_vector);
        return EINVAL;
    }
    for (i = 1; i < wr->num_sge; i++) {
        if (wr->sg_list[i].length != len) {
            axon_error("softib: post_send: CALC operand %d of %u bytes, operand 0 of %u", i,
                       wr->sg_list[i].length, len);
            return EINVAL;
        }
    }
    return 0;
}

static int softib_task_check(softib_qp_t *qp, const axon_dev_send_wr_t *wr)
{
    const axon_dev_context_t *ctx = qp->super.context;
    softib_qp_t *tq;
    unsigned base, posted, n;

    if (wr->opcode == AXON_DEV_WR_CQE_WAIT) {
        const axon_dev_cq_t *cq = wr->wr.cqe_wait.cq;

        if ((cq == NULL) || (cq->context != ctx)) {
            axon_error("softib: post_send: CQE_WAIT on CQ %p, not a CQ of %s's context",
                       (const void *)cq, ctx->name);
            return EINVAL;
        }
        if (!(softib_cq((axon_dev_cq_t *)cq)->flags & AXON_DEV_CQ_CREATE_CROSS_CHANNEL)) {
            axon_error("softib: post_send: CQE_WAIT on a CQ created without CROSS_CHANNEL");
            return EINVAL;
        }
        if (wr->wr.cqe_wait.cq_count < 0) {
            axon_error("softib: post_send: CQE_WAIT for %d completions",
                       wr->wr.cqe_wait.cq_count);
            return EINVAL;
        }
        return 0;
    }
    if ((wr->wr.wqe_enable.qp == NULL) || (wr->wr.wqe_enable.qp->context != ctx)) {
        axon_error("softib: post_send: %s_ENABLE of QP %p, not a QP of %s's context",
                   (wr->opcode == AXON_DEV_WR_SEND_ENABLE) ? "SEND" : "RECV",
                   (void *)wr->wr.wqe_enable.qp, ctx->name);
        return EINVAL;
    }
    tq = softib_qp(wr->wr.wqe_enable.qp);
    if (wr->opcode == AXON_DEV_WR_SEND_ENABLE) {
        base   = tq->sq_en_count.base;
        posted = tq->sq_tail;
    } else {
        base   = tq->rq.en_count.base;
        posted = tq->rq.tail;
    }
    if (!(tq->create_flags & ((wr->opcode == AXON_DEV_WR_SEND_ENABLE) ?
                              AXON_DEV_QP_CREATE_MANAGED_SEND : AXON_DEV_QP_CREATE_MANAGED_RECV))) {
        axon_error("softib: post_send: %s_ENABLE of QP 0x%x, whose %s queue is not managed",
                   (wr->opcode == AXON_DEV_WR_SEND_ENABLE) ? "SEND" : "RECV", tq->super.qp_num,
                   (wr->opcode == AXON_DEV_WR_SEND_ENABLE) ? "send" : "receive");
        return EINVAL;
    }
    n = (unsigned)wr->wr.wqe_enable.wqe_count;
    if ((wr->wr.wqe_enable.wqe_count < 0) || ((int)(posted - (base + n)) < 0)) {
        axon_error("softib: post_send: ENABLE of %d WRs of QP 0x%x, %u posted past its base",
                   wr->wr.wqe_enable.wqe_count, tq->super.qp_num, posted - base);
        return EINVAL;
    }
    return 0;
}

int softib_xchan_check(softib_qp_t *qp, const axon_dev_send_wr_t *wr)
{
    int task = softib_wr_is_xchan_task(wr->opcode);

    if ((wr->send_flags & AXON_DEV_SEND_WAIT_EN_LAST) && !task) {
        axon_error("softib: post_send: WAIT_EN_LAST on opcode %d (only on WAIT and ENABLE)",
                   (int)wr->opcode);
        return EINVAL;
    }
    if (!task && !(wr->send_flags & AXON_DEV_SEND_WITH_CALC)) {
        return 0;
    }
    if (!(qp->create_flags & AXON_DEV_QP_CREATE_CROSS_CHANNEL)) {
        axon_error("softib: post_send: %s on QP 0x%x, created without CROSS_CHANNEL",
                   task ? "a cross-channel task" : "WITH_CALC", qp->super.qp_num);
        return EINVAL;
    }
    return task ? softib_task_check(qp, wr) : softib_calc_check(softib_qp_dev(qp), wr);
}

/* base + n; the last task of a list moves base past the list's largest n */
static unsigned softib_xchan_count(softib_xchan_count_t *c, unsigned n, int last)
{
    unsigned target = c->base + n;

    if (n > c->max) {
        c->max = n;
    }
    if (last) {
        c->base += c->max;
        c->max   = 0;
    }
    return target;
}

void softib_xchan_copy(softib_qp_t *qp, softib_send_wqe_t *wqe, const axon_dev_send_wr_t *wr)
{
    int last = !!(wr->send_flags & AXON_DEV_SEND_WAIT_EN_LAST);
    softib_xchan_count_t *count;
    softib_qp_t *tq;
    unsigned n;

    (void)qp;
    if (wr->opcode == AXON_DEV_WR_CQE_WAIT) {
        wqe->wait_cq = softib_cq(wr->wr.cqe_wait.cq);
        wqe->wait_cq->refcnt++;
        wqe->xchan_target = softib_xchan_count(&wqe->wait_cq->wait,
                                               (unsigned)wr->wr.cqe_wait.cq_count, last);
        return;
    }
    tq    = softib_qp(wr->wr.wqe_enable.qp);
    count = (wr->opcode == AXON_DEV_WR_SEND_ENABLE) ? &tq->sq_en_count : &tq->rq.en_count;
    n     = (unsigned)wr->wr.wqe_enable.wqe_count;
    if (n == 0) {   /* all posted so far */
        n = ((wr->opcode == AXON_DEV_WR_SEND_ENABLE) ? tq->sq_tail : tq->rq.tail) - count->base;
    }
    wqe->en_qpn       = tq->super.qp_num;
    wqe->xchan_target = softib_xchan_count(count, n, last);
}

/* ------------------------------------------------------------ execution */

int softib_xchan_exec(softib_qp_t *qp, softib_send_wqe_t *wqe)
{
    softib_dev_t *dev = softib_qp_dev(qp);
    axon_dev_wc_status_t st = AXON_DEV_WC_SUCCESS;
    softib_cq_t *cq   = wqe->wait_cq;
    softib_qp_t *tq;
    unsigned *limit;

    if (wqe->opcode == AXON_DEV_WR_CQE_WAIT) {
        if (cq->first_err && ((int)(wqe->xchan_target - cq->first_err) >= 0)) {
            axon_debug("softib: QP 0x%x: WAIT for completion %u of a CQ whose completion %u "
                       "failed", qp->super.qp_num, wqe->xchan_target, cq->first_err);
            st = AXON_DEV_WC_GENERAL_ERR;
        } else if ((int)(cq->produced - wqe->xchan_target) < 0) {
            return 0;
        }
    } else if ((tq = softib_qp_lookup(dev, wqe->en_qpn)) == NULL) {
        axon_debug("softib: QP 0x%x: ENABLE of QP 0x%x, which is gone", qp->super.qp_num,
                   wqe->en_qpn);
        st = AXON_DEV_WC_GENERAL_ERR;
    } else {
        limit = (wqe->opcode == AXON_DEV_WR_SEND_ENABLE) ? &tq->sq_en : &tq->rq.en;
        if ((int)(wqe->xchan_target - *limit) > 0) {
            *limit          = wqe->xchan_target;
            dev->xchan_kick = 1;
            softib_qp_activate(tq);   /* released WQEs are its work now */
        }
    }
    softib_qp_complete_send(qp, wqe, st);
    qp->sq_head++;
    qp->sq_req = qp->sq_started = qp->sq_head;
    if (st != AXON_DEV_WC_SUCCESS) {
        softib_qp_error(qp);
    }
    return 1;
}

void softib_xchan_drop(softib_qp_t *qp, unsigned from, int fail_targets)
{
    softib_dev_t *dev = softib_qp_dev(qp);
    softib_send_wqe_t *wqe;
    softib_qp_t *tq;

    for (; from != qp->sq_tail; from++) {
        wqe = softib_sq_wqe(qp, from);
        if (wqe->wait_cq != NULL) {
            wqe->wait_cq->refcnt--;
            wqe->wait_cq = NULL;
        }
        if (!fail_targets || ((wqe->opcode != AXON_DEV_WR_SEND_ENABLE) &&
                              (wqe->opcode != AXON_DEV_WR_RECV_ENABLE))) {
            continue;
        }
        tq = softib_qp_lookup(dev, wqe->en_qpn);
        if ((tq != NULL) && (tq->super.state != AXON_DEV_QPS_ERR) &&
            (tq->super.state != AXON_DEV_QPS_RESET)) {
            axon_debug("softib: QP 0x%x: its ENABLE of QP 0x%x was flushed: that QP fails too",
                       qp->super.qp_num, tq->super.qp_num);
            softib_qp_error(tq);
        }
    }
}

/* ------------------------------------------------------------ CALC */

softib_access_t softib_calc_reduce(softib_qp_t *qp, const softib_send_wqe_t *wqe, uint8_t *out)
{
    uint64_t acc[SOFTIB_CALC_MAX_VECTOR], v[SOFTIB_CALC_MAX_VECTOR];
    unsigned i, n = wqe->length / 8;
    softib_access_t ret;
    int k;

    /* operand k is bytes [k * length, (k + 1) * length) of the gather list */
    for (k = 0; k < wqe->num_sge; k++) {
        ret = softib_sge_copy_from(softib_qp_dev(qp), qp->super.pd, wqe->sge, wqe->num_sge,
                                   (uint32_t)k * wqe->length, v, wqe->length);
        if (ret != SOFTIB_ACCESS_OK) {
            return ret;
        }
        for (i = 0; i < n; i++) {
            acc[i] = k ? axon_dev_calc_apply(wqe->calc_op, wqe->calc_type, acc[i], be64toh(v[i]))
                       : be64toh(v[i]);
        }
    }
    for (i = 0; i < n; i++) {
        acc[i] = htobe64(acc[i]);
    }
    memcpy(out, acc, wqe->length);
    return SOFTIB_ACCESS_OK;
}
