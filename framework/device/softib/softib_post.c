/*
 * post_send / post_recv: everything that can be refused at post time is
 * refused here (EINVAL, *bad_wr = the WR; WRs before it stay posted); what
 * only execution can find (keys, ranges, rights) completes with an error.
 */
#include <errno.h>
#include <string.h>
#include "log.h"
#include "softib.h"

/* Seed 002's table: the QP types each opcode is valid on; a DCI takes what RC does
 * (seed §8.6) but the cross-channel tasks and UMRs */
#define QPT(_t) (((_t) == AXON_DEV_QPT_DC_INI) ? (1u << 5) : (1u << (_t)))
#define QPT_REL (QPT(AXON_DEV_QPT_RC) | QPT(AXON_DEV_QPT_DC_INI))
#define QPT_NOT_DC (QPT(AXON_DEV_QPT_RC) | QPT(AXON_DEV_QPT_UC) | QPT(AXON_DEV_QPT_UD))
static const unsigned softib_wr_qp_types[] = {
    [AXON_DEV_WR_RDMA_WRITE]           = QPT_REL | QPT(AXON_DEV_QPT_UC),
    [AXON_DEV_WR_RDMA_WRITE_WITH_IMM]  = QPT_REL | QPT(AXON_DEV_QPT_UC),
    [AXON_DEV_WR_SEND]                 = QPT_REL | QPT(AXON_DEV_QPT_UC) | QPT(AXON_DEV_QPT_UD),
    [AXON_DEV_WR_SEND_WITH_IMM]        = QPT_REL | QPT(AXON_DEV_QPT_UC) | QPT(AXON_DEV_QPT_UD),
    [AXON_DEV_WR_RDMA_READ]            = QPT_REL,
    [AXON_DEV_WR_ATOMIC_CMP_AND_SWP]   = QPT_REL,
    [AXON_DEV_WR_ATOMIC_FETCH_AND_ADD] = QPT_REL,
    [AXON_DEV_WR_EXT_MASKED_ATOMIC_CMP_AND_SWP]   = QPT_REL,
    [AXON_DEV_WR_EXT_MASKED_ATOMIC_FETCH_AND_ADD] = QPT_REL,
    [AXON_DEV_WR_SEND_ENABLE]          = QPT_NOT_DC,
    [AXON_DEV_WR_RECV_ENABLE]          = QPT_NOT_DC,
    [AXON_DEV_WR_CQE_WAIT]             = QPT_NOT_DC,
    [AXON_DEV_WR_UMR_FILL]             = QPT_NOT_DC,
    [AXON_DEV_WR_UMR_INVALIDATE]       = QPT_NOT_DC,
};

static const char *const softib_wr_names[] = {
    "RDMA_WRITE", "RDMA_WRITE_WITH_IMM", "SEND", "SEND_WITH_IMM", "RDMA_READ",
    "ATOMIC_CMP_AND_SWP", "ATOMIC_FETCH_AND_ADD", "EXT_MASKED_ATOMIC_CMP_AND_SWP",
    "EXT_MASKED_ATOMIC_FETCH_AND_ADD", "SEND_ENABLE", "RECV_ENABLE", "CQE_WAIT", "UMR_FILL",
    "UMR_INVALIDATE"
};

#define SOFTIB_WR_OPCODE_LAST AXON_DEV_WR_UMR_INVALIDATE

static const char *const softib_qpt_names[] = {[2] = "RC", [3] = "UC", [4] = "UD",
                                               [AXON_DEV_QPT_DC_INI] = "DCI"};

#define SOFTIB_SEND_FLAGS_ALL (AXON_DEV_SEND_FENCE | AXON_DEV_SEND_SIGNALED | \
                               AXON_DEV_SEND_SOLICITED | AXON_DEV_SEND_INLINE | \
                               AXON_DEV_SEND_WITH_CALC | AXON_DEV_SEND_WAIT_EN_LAST)

/* Bytes of the value an atomic returns: 8, or a masked one's operand size */
static uint64_t softib_wr_atomic_size(const axon_dev_send_wr_t *wr)
{
    return softib_wr_is_ext_atomic(wr->opcode) ? (1ull << wr->wr.masked_atomic.log_arg_sz) : 8;
}

/*
 * A masked atomic's own checks: the device does them, the operand size is
 * one it does, operands passed by address are there.
 */
static int softib_ext_atomic_check(softib_dev_t *dev, const axon_dev_send_wr_t *wr)
{
    uint32_t log_sz = wr->wr.masked_atomic.log_arg_sz;
    int cswap       = (wr->opcode == AXON_DEV_WR_EXT_MASKED_ATOMIC_CMP_AND_SWP);

    if (!(dev->attr.cap_flags & AXON_DEV_CAP_EXT_ATOMIC)) {
        axon_error("softib: post_send: %s, but extended atomics are masked off on %s",
                   softib_wr_names[wr->opcode], dev->super.name);
        return EOPNOTSUPP;
    }
    if ((log_sz > 5) || !(dev->attr.ext_atomic.log_atomic_arg_sizes & (1u << log_sz))) {
        axon_error("softib: post_send: %s with log_arg_sz %u (sizes 0x%x)",
                   softib_wr_names[wr->opcode], log_sz,
                   dev->attr.ext_atomic.log_atomic_arg_sizes);
        return EINVAL;
    }
    if ((log_sz > SOFTIB_AMO_LOG_INLINE) &&
        ((cswap && ((wr->wr.masked_atomic.op.cmp_swap.compare_mask == 0) ||
                    (wr->wr.masked_atomic.op.cmp_swap.compare_val == 0) ||
                    (wr->wr.masked_atomic.op.cmp_swap.swap_val == 0) ||
                    (wr->wr.masked_atomic.op.cmp_swap.swap_mask == 0))) ||
         (!cswap && ((wr->wr.masked_atomic.op.fetch_add.add_val == 0) ||
                     (wr->wr.masked_atomic.op.fetch_add.field_boundary == 0))))) {
        axon_error("softib: post_send: %s of %u bytes with a NULL operand address",
                   softib_wr_names[wr->opcode], 1u << log_sz);
        return EINVAL;
    }
    return 0;
}

/* The checks of one send WR; its total length on success */
static int softib_send_wr_check(softib_qp_t *qp, const axon_dev_send_wr_t *wr,
                                uint64_t *length_p)
{
    softib_dev_t *dev  = softib_qp_dev(qp);
    axon_dev_qp_type_t type = qp->super.qp_type;
    uint64_t length = 0;
    int i, ret;

    if (((unsigned)wr->opcode > SOFTIB_WR_OPCODE_LAST)) {
        axon_error("softib: post_send: opcode %d is not a send opcode", (int)wr->opcode);
        return EINVAL;
    }
    if (!(softib_wr_qp_types[wr->opcode] & QPT(type))) {
        axon_error("softib: post_send: %s is not valid on a %s QP", softib_wr_names[wr->opcode],
                   softib_qpt_names[type]);
        return EINVAL;
    }
    if (softib_wr_is_std_atomic(wr->opcode) && !(dev->attr.cap_flags & AXON_DEV_CAP_ATOMIC)) {
        axon_error("softib: post_send: %s, but atomics are masked off on %s",
                   softib_wr_names[wr->opcode], dev->super.name);
        return EINVAL;
    }
    if (softib_wr_is_ext_atomic(wr->opcode) && (ret = softib_ext_atomic_check(dev, wr))) {
        return ret;
    }
    if (wr->send_flags & ~SOFTIB_SEND_FLAGS_ALL) {
        axon_error("softib: post_send: unknown send_flags 0x%x", wr->send_flags);
        return EINVAL;
    }
    if ((ret = softib_xchan_check(qp, wr)) != 0) {
        return ret;
    }
    if ((type == AXON_DEV_QPT_DC_INI) && ((ret = softib_dc_check(qp, wr)) != 0)) {
        return ret;
    }
    if (softib_wr_is_xchan_task(wr->opcode)) {
        *length_p = 0;   /* no data, no SGEs looked at */
        return 0;
    }
    if (softib_wr_is_umr(wr->opcode)) {
        *length_p = 0;   /* its entries are its operands, not SGEs */
        return softib_umr_check(qp, wr);
    }
    if ((wr->num_sge < 0) || ((unsigned)wr->num_sge > qp->cap.max_send_sge) ||
        ((wr->num_sge > 0) && (wr->sg_list == NULL))) {
        axon_error("softib: post_send: num_sge %d (max_send_sge %u, sg_list %p)", wr->num_sge,
                   qp->cap.max_send_sge, (void *)wr->sg_list);
        return EINVAL;
    }
    for (i = 0; i < wr->num_sge; i++) {
        length += wr->sg_list[i].length;
    }
    if (wr->send_flags & AXON_DEV_SEND_WITH_CALC) {
        length = wr->sg_list[0].length;   /* one result vector of the operands' length */
    }
    if (length > SOFTIB_MAX_MSG) {
        axon_error("softib: post_send: message of %llu bytes over max_msg_sz %u",
                   (unsigned long long)length, SOFTIB_MAX_MSG);
        return EINVAL;
    }
    if (wr->send_flags & AXON_DEV_SEND_INLINE) {
        if ((wr->opcode != AXON_DEV_WR_SEND) && (wr->opcode != AXON_DEV_WR_SEND_WITH_IMM) &&
            (wr->opcode != AXON_DEV_WR_RDMA_WRITE) &&
            (wr->opcode != AXON_DEV_WR_RDMA_WRITE_WITH_IMM)) {
            axon_error("softib: post_send: INLINE with %s (only SEND and RDMA_WRITE)",
                       softib_wr_names[wr->opcode]);
            return EINVAL;
        }
        if (length > qp->cap.max_inline_data) {
            axon_error("softib: post_send: INLINE of %llu bytes over max_inline_data %u",
                       (unsigned long long)length, qp->cap.max_inline_data);
            return EINVAL;
        }
    }
    if (softib_wr_is_atomic(wr->opcode) &&
        ((wr->num_sge != 1) || (length != softib_wr_atomic_size(wr)))) {
        axon_error("softib: post_send: %s needs one %llu-byte SGE (num_sge %d, %llu bytes)",
                   softib_wr_names[wr->opcode],
                   (unsigned long long)softib_wr_atomic_size(wr), wr->num_sge,
                   (unsigned long long)length);
        return EINVAL;
    }
    if (type == AXON_DEV_QPT_UD) {
        size_t mtu = axon_dev_mtu_bytes(qp->attr.path_mtu ? qp->attr.path_mtu : dev->mtu);

        if (wr->wr.ud.ah == NULL) {
            axon_error("softib: post_send: UD WR without an AH");
            return EINVAL;
        }
        if (wr->wr.ud.ah->context != qp->super.context) {
            axon_error("softib: post_send: the AH belongs to another device");
            return EINVAL;
        }
        /* Seed §3.3.8: the PD ties a UD QP to the AHs it may use. The PD is known at post
         * time, so the WR is refused there (IB allows that or an error CQE instead) */
        if (wr->wr.ud.ah->pd != qp->super.pd) {
            axon_error("softib: post_send: the AH is on PD %u, QP 0x%x on PD %u",
                       wr->wr.ud.ah->pd->handle, qp->super.qp_num, qp->super.pd->handle);
            return EINVAL;
        }
        if (length > mtu) {
            axon_error("softib: post_send: UD message of %llu bytes over the path MTU %zu",
                       (unsigned long long)length, mtu);
            return EINVAL;
        }
    }
    *length_p = length;
    return 0;
}

/* An operand field: the value itself (up to 8 bytes), else read where it points */
static void softib_ext_operand(uint64_t *dst, uint64_t field, unsigned size, unsigned inline_max)
{
    if (size <= inline_max) {
        dst[0] = (size == 4) ? (field & 0xffffffffull) : field;
    } else {
        memcpy(dst, (const void *)(uintptr_t)field, size);
    }
}

/* A masked atomic's operands into the WQE's block, read now as the WR is posted */
static void softib_ext_atomic_copy(axon_amo_args_t *amo, const axon_dev_send_wr_t *wr)
{
    unsigned size = 1u << wr->wr.masked_atomic.log_arg_sz;
    unsigned inl  = 1u << SOFTIB_AMO_LOG_INLINE;

    memset(amo, 0, sizeof(*amo));
    amo->size  = (uint8_t)size;
    amo->fetch = 1;
    if (wr->opcode == AXON_DEV_WR_EXT_MASKED_ATOMIC_CMP_AND_SWP) {
        amo->op = AXON_AMO_MASKED_CSWAP;
        softib_ext_operand(amo->value, wr->wr.masked_atomic.op.cmp_swap.swap_val, size, inl);
        softib_ext_operand(amo->compare, wr->wr.masked_atomic.op.cmp_swap.compare_val, size,
                           inl);
        softib_ext_operand(amo->mask, wr->wr.masked_atomic.op.cmp_swap.compare_mask, size,
                           inl);
        softib_ext_operand(amo->swap_mask, wr->wr.masked_atomic.op.cmp_swap.swap_mask, size,
                           inl);
    } else {
        amo->op = AXON_AMO_MFADD;
        softib_ext_operand(amo->value, wr->wr.masked_atomic.op.fetch_add.add_val, size, inl);
        softib_ext_operand(amo->mask, wr->wr.masked_atomic.op.fetch_add.field_boundary, size,
                           inl);
    }
}

static void softib_send_wr_copy(softib_qp_t *qp, softib_send_wqe_t *wqe,
                                const axon_dev_send_wr_t *wr, uint32_t length)
{
    uint32_t off = 0;
    int i;

    wqe->wr_id   = wr->wr_id;
    wqe->opcode  = wr->opcode;
    wqe->flags   = wr->send_flags;
    wqe->imm     = wr->imm_data;
    wqe->length  = length;
    wqe->status  = -1;
    wqe->rcvd    = 0;
    wqe->npkts   = 0;
    wqe->wait_cq = NULL;
    wqe->calc_op   = (uint8_t)wr->calc.calc_op;
    wqe->calc_type = (uint8_t)wr->calc.data_type;
    if (softib_wr_is_xchan_task(wr->opcode)) {
        softib_xchan_copy(qp, wqe, wr);
        wqe->num_sge = 0;
        return;
    }
    if (softib_wr_is_umr(wr->opcode)) {
        softib_umr_copy(qp, wqe, wr);
        wqe->num_sge = 0;
        return;
    }
    if (softib_wr_is_ext_atomic(wr->opcode)) {
        wqe->remote_addr = wr->wr.masked_atomic.remote_addr;
        wqe->rkey        = wr->wr.masked_atomic.rkey;
        softib_ext_atomic_copy(wqe->amo, wr);
    } else if (softib_wr_is_std_atomic(wr->opcode)) {
        wqe->remote_addr = wr->wr.atomic.remote_addr;
        wqe->rkey        = wr->wr.atomic.rkey;
        wqe->compare_add = wr->wr.atomic.compare_add;
        wqe->swap        = wr->wr.atomic.swap;
    } else if (qp->super.qp_type == AXON_DEV_QPT_UD) {
        const softib_ah_t *ah = (const softib_ah_t *)wr->wr.ud.ah;

        wqe->dgid        = ah->attr.grh.dgid;
        wqe->remote_qpn  = wr->wr.ud.remote_qpn & SOFTIB_PSN_MASK;
        /* A Q_Key with the high bit set means: use the QP's own */
        wqe->remote_qkey = (wr->wr.ud.remote_qkey & 0x80000000u) ? qp->attr.qkey
                                                                  : wr->wr.ud.remote_qkey;
    } else {
        wqe->remote_addr = wr->wr.rdma.remote_addr;
        wqe->rkey        = wr->wr.rdma.rkey;
    }
    if (qp->super.qp_type == AXON_DEV_QPT_DC_INI) {
        softib_dc_copy(wqe, wr);
    }
    if (wr->send_flags & AXON_DEV_SEND_INLINE) {
        /* Copied now, so the caller may reuse the buffer at return; the lkey is ignored */
        for (i = 0; i < wr->num_sge; i++) {
            if (wr->sg_list[i].length) {
                memcpy(wqe->inline_data + off, (const void *)(uintptr_t)wr->sg_list[i].addr,
                       wr->sg_list[i].length);
            }
            off += wr->sg_list[i].length;
        }
        wqe->num_sge = 0;
    } else {
        wqe->num_sge = wr->num_sge;
        if (wr->num_sge) {
            memcpy(wqe->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(*wqe->sge));
        }
    }
}

static int softib_post_send_locked(softib_qp_t *qp, axon_dev_send_wr_t *wr,
                                   axon_dev_send_wr_t **bad_wr)
{
    axon_dev_qp_t *aqp = &qp->super;
    uint64_t length;
    int ret = 0;

    if (aqp->state < AXON_DEV_QPS_RTS) {
        axon_error("softib: post_send: QP 0x%x is not ready to send (state %d)", aqp->qp_num,
                   (int)aqp->state);
        *bad_wr = wr;
        return EINVAL;
    }
    for (; wr != NULL; wr = wr->next) {
        if ((ret = softib_send_wr_check(qp, wr, &length)) != 0) {
            *bad_wr = wr;
            break;
        }
        /* a WR holds its slot until its completion is polled (softib_cq_src_t) */
        if (qp->sq_tail - qp->sq_free >= qp->sq_size) {
            axon_debug("softib: post_send: send queue of QP 0x%x full (%u WRs outstanding)",
                       aqp->qp_num, qp->sq_size);
            *bad_wr = wr;
            ret     = ENOMEM;
            break;
        }
        softib_send_wr_copy(qp, softib_sq_wqe(qp, qp->sq_tail), wr, (uint32_t)length);
        qp->sq_tail++;
    }
    softib_qp_activate(qp);   /* the doorbell */
    if ((aqp->state == AXON_DEV_QPS_ERR) || (aqp->state == AXON_DEV_QPS_SQE)) {
        softib_qp_flush(qp);
    }
    return ret;
}

int softib_post_send(axon_dev_qp_t *aqp, axon_dev_send_wr_t *wr, axon_dev_send_wr_t **bad_wr)
{
    softib_dev_t *dev = softib_dev(aqp->context);
    int ret;

    pthread_mutex_lock(&dev->lock);
    ret = softib_post_send_locked(softib_qp(aqp), wr, bad_wr);
    softib_progress(dev);
    pthread_mutex_unlock(&dev->lock);
    return ret;
}

static int softib_post_recv_locked(softib_qp_t *qp, axon_dev_recv_wr_t *wr,
                                   axon_dev_recv_wr_t **bad_wr)
{
    axon_dev_qp_t *aqp = &qp->super;
    int ret;

    if (aqp->srq != NULL) {
        axon_error("softib: post_recv: QP 0x%x receives from an SRQ", aqp->qp_num);
        *bad_wr = wr;
        return EINVAL;
    }
    if (aqp->qp_type == AXON_DEV_QPT_DC_INI) {
        axon_error("softib: post_recv: QP 0x%x is a DC initiator (it only sends)", aqp->qp_num);
        *bad_wr = wr;
        return EINVAL;
    }
    if (aqp->state == AXON_DEV_QPS_RESET) {
        axon_error("softib: post_recv: QP 0x%x is in RESET", aqp->qp_num);
        *bad_wr = wr;
        return EINVAL;
    }
    ret = softib_rq_post(&qp->rq, wr, bad_wr, "post_recv");
    if (aqp->state == AXON_DEV_QPS_ERR) {
        softib_qp_flush(qp);
    }
    return ret;
}

int softib_post_recv(axon_dev_qp_t *aqp, axon_dev_recv_wr_t *wr, axon_dev_recv_wr_t **bad_wr)
{
    softib_dev_t *dev = softib_dev(aqp->context);
    int ret;

    pthread_mutex_lock(&dev->lock);
    ret = softib_post_recv_locked(softib_qp(aqp), wr, bad_wr);
    if (aqp->state != AXON_DEV_QPS_RESET) {
        softib_progress(dev);
    }
    pthread_mutex_unlock(&dev->lock);
    return ret;
}

/*
 * The task list (seed §8.9.3) under the device lock: the engine sees every
 * WR of the list queued before it runs any (an ENABLE still checks, as it is
 * posted, that the WRs it releases are: list the managed WRs first).
 */
int softib_post_task(axon_dev_context_t *ctx, axon_dev_task_t *task,
                     axon_dev_task_t **bad_task)
{
    softib_dev_t *dev = softib_dev(ctx);
    axon_dev_send_wr_t *bad_send;
    axon_dev_recv_wr_t *bad_recv;
    int ret = 0;

    pthread_mutex_lock(&dev->lock);
    for (; task != NULL; task = task->next) {
        if ((task->comp_mask != 0) || (task->item.qp == NULL) ||
            (task->item.qp->context != ctx) ||
            ((task->task_type != AXON_DEV_TASK_SEND) && (task->task_type != AXON_DEV_TASK_RECV))) {
            axon_error("softib: post_task: task of type %d on QP %p with comp_mask 0x%x (a send "
                       "or receive task on a QP of %s, comp_mask 0)", (int)task->task_type,
                       (void *)task->item.qp, task->comp_mask, ctx->name);
            ret = EINVAL;
        } else if (task->task_type == AXON_DEV_TASK_SEND) {
            ret = softib_post_send_locked(softib_qp(task->item.qp), task->item.send_wr,
                                          &bad_send);
        } else {
            ret = softib_post_recv_locked(softib_qp(task->item.qp), task->item.recv_wr,
                                          &bad_recv);
        }
        if (ret != 0) {
            *bad_task = task;
            break;
        }
    }
    softib_progress(dev);
    pthread_mutex_unlock(&dev->lock);
    return ret;
}
