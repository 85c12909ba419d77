/*
 * post_send / post_recv: everything that can be refused at post time is
 * refused here (EINVAL, *bad_wr = the WR; WRs before it stay posted); what
 * only execution can find (keys, ranges, rights) completes with an error.
 */
#include <errno.h>
#include <string.h>
#include "log.h"
#include "softib.h"

/* Seed 002's table: the QP types each opcode is valid on */
#define QPT(_t) (1u << (_t))
static const unsigned softib_wr_qp_types[] = {
    [AXON_DEV_WR_RDMA_WRITE]           = QPT(AXON_DEV_QPT_RC) | QPT(AXON_DEV_QPT_UC),
    [AXON_DEV_WR_RDMA_WRITE_WITH_IMM]  = QPT(AXON_DEV_QPT_RC) | QPT(AXON_DEV_QPT_UC),
    [AXON_DEV_WR_SEND]                 = QPT(AXON_DEV_QPT_RC) | QPT(AXON_DEV_QPT_UC) |
                                         QPT(AXON_DEV_QPT_UD),
    [AXON_DEV_WR_SEND_WITH_IMM]        = QPT(AXON_DEV_QPT_RC) | QPT(AXON_DEV_QPT_UC) |
                                         QPT(AXON_DEV_QPT_UD),
    [AXON_DEV_WR_RDMA_READ]            = QPT(AXON_DEV_QPT_RC),
    [AXON_DEV_WR_ATOMIC_CMP_AND_SWP]   = QPT(AXON_DEV_QPT_RC),
    [AXON_DEV_WR_ATOMIC_FETCH_AND_ADD] = QPT(AXON_DEV_QPT_RC),
};

static const char *const softib_wr_names[] = {
    "RDMA_WRITE", "RDMA_WRITE_WITH_IMM", "SEND", "SEND_WITH_IMM", "RDMA_READ",
    "ATOMIC_CMP_AND_SWP", "ATOMIC_FETCH_AND_ADD"
};
static const char *const softib_qpt_names[] = {[2] = "RC", [3] = "UC", [4] = "UD"};

#define SOFTIB_SEND_FLAGS_ALL (AXON_DEV_SEND_FENCE | AXON_DEV_SEND_SIGNALED | \
                               AXON_DEV_SEND_SOLICITED | AXON_DEV_SEND_INLINE)

static int softib_wr_is_atomic(axon_dev_wr_opcode_t op)
{
    return (op == AXON_DEV_WR_ATOMIC_CMP_AND_SWP) || (op == AXON_DEV_WR_ATOMIC_FETCH_AND_ADD);
}

/* The checks of one send WR; its total length on success */
static int softib_send_wr_check(softib_qp_t *qp, const axon_dev_send_wr_t *wr,
                                uint64_t *length_p)
{
    softib_dev_t *dev  = softib_qp_dev(qp);
    axon_dev_qp_type_t type = qp->super.qp_type;
    uint64_t length = 0;
    int i;

    if (((unsigned)wr->opcode > AXON_DEV_WR_ATOMIC_FETCH_AND_ADD)) {
        axon_error("softib: post_send: opcode %d is not a send opcode", (int)wr->opcode);
        return EINVAL;
    }
    if (!(softib_wr_qp_types[wr->opcode] & QPT(type))) {
        axon_error("softib: post_send: %s is not valid on a %s QP", softib_wr_names[wr->opcode],
                   softib_qpt_names[type]);
        return EINVAL;
    }
    if (softib_wr_is_atomic(wr->opcode) && !(dev->attr.cap_flags & AXON_DEV_CAP_ATOMIC)) {
        axon_error("softib: post_send: %s, but atomics are masked off on %s",
                   softib_wr_names[wr->opcode], dev->super.name);
        return EINVAL;
    }
    if (wr->send_flags & ~SOFTIB_SEND_FLAGS_ALL) {
        axon_error("softib: post_send: unknown send_flags 0x%x", wr->send_flags);
        return EINVAL;
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
    if (softib_wr_is_atomic(wr->opcode) && ((wr->num_sge != 1) || (length != 8))) {
        axon_error("softib: post_send: %s needs one 8-byte SGE (num_sge %d, %llu bytes)",
                   softib_wr_names[wr->opcode], wr->num_sge, (unsigned long long)length);
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
        if (length > mtu) {
            axon_error("softib: post_send: UD message of %llu bytes over the path MTU %zu",
                       (unsigned long long)length, mtu);
            return EINVAL;
        }
    }
    *length_p = length;
    return 0;
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
    if (softib_wr_is_atomic(wr->opcode)) {
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

int softib_post_send(axon_dev_qp_t *aqp, axon_dev_send_wr_t *wr, axon_dev_send_wr_t **bad_wr)
{
    softib_dev_t *dev = softib_dev(aqp->context);
    softib_qp_t *qp   = softib_qp(aqp);
    uint64_t length;
    int ret = 0;

    pthread_mutex_lock(&dev->lock);
    if (aqp->state < AXON_DEV_QPS_RTS) {
        axon_error("softib: post_send: QP 0x%x is not ready to send (state %d)", aqp->qp_num,
                   (int)aqp->state);
        *bad_wr = wr;
        ret     = EINVAL;
        goto out;
    }
    for (; wr != NULL; wr = wr->next) {
        if ((ret = softib_send_wr_check(qp, wr, &length)) != 0) {
            *bad_wr = wr;
            break;
        }
        if (qp->sq_tail - qp->sq_head >= qp->sq_size) {
            axon_debug("softib: post_send: send queue of QP 0x%x full (%u WRs)", aqp->qp_num,
                       qp->sq_size);
            *bad_wr = wr;
            ret     = ENOMEM;
            break;
        }
        softib_send_wr_copy(qp, softib_sq_wqe(qp, qp->sq_tail), wr, (uint32_t)length);
        qp->sq_tail++;
    }
    if ((aqp->state == AXON_DEV_QPS_ERR) || (aqp->state == AXON_DEV_QPS_SQE)) {
        softib_qp_flush(qp);
    }
out:
    softib_progress(dev);
    pthread_mutex_unlock(&dev->lock);
    return ret;
}

int softib_post_recv(axon_dev_qp_t *aqp, axon_dev_recv_wr_t *wr, axon_dev_recv_wr_t **bad_wr)
{
    softib_dev_t *dev = softib_dev(aqp->context);
    softib_qp_t *qp   = softib_qp(aqp);
    int ret;

    if (aqp->srq != NULL) {
        axon_error("softib: post_recv: QP 0x%x receives from an SRQ", aqp->qp_num);
        *bad_wr = wr;
        return EINVAL;
    }
    pthread_mutex_lock(&dev->lock);
    if (aqp->state == AXON_DEV_QPS_RESET) {
        axon_error("softib: post_recv: QP 0x%x is in RESET", aqp->qp_num);
        *bad_wr = wr;
        ret     = EINVAL;
        goto out;
    }
    ret = softib_rq_post(&qp->rq, wr, bad_wr, "post_recv");
    if (aqp->state == AXON_DEV_QPS_ERR) {
        softib_qp_flush(qp);
    }
    softib_progress(dev);
out:
    pthread_mutex_unlock(&dev->lock);
    return ret;
}
