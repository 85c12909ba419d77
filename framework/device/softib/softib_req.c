/*
 * The requester: send WQEs become packets.
 *
 * A WQE gets its PSNs when it first starts (sends and writes one per
 * packet, a read one per response packet, an atomic one). Retransmission is
 * go-back-N: softib_req_rewind() puts the requester back at the oldest
 * unacknowledged PSN, and it resends from there. UC and UD WQEs complete
 * when their last packet has left. A DC initiator is RC towards the target
 * of its current connection (softib_dc.c picks it as each WQE starts).
 */
#include <errno.h>
#include <string.h>
#include "log.h"
#include "softib_direct.h"
#include "softib_pkt.h"

/* IB encoding of the RNR NAK timer, in ns (code 0 is the longest) */
static const uint64_t softib_rnr_ns[32] = {
    655360000, 10000, 20000, 30000, 40000, 60000, 80000, 120000,
    160000, 240000, 320000, 480000, 640000, 960000, 1280000, 1920000,
    2560000, 3840000, 5120000, 7680000, 10240000, 15360000, 20480000, 30720000,
    40960000, 61440000, 81920000, 122880000, 163840000, 245760000, 327680000, 491520000,
};

uint64_t softib_rnr_timeout_ns(unsigned code)
{
    return softib_rnr_ns[code & 31];
}

uint64_t softib_ack_timeout_ns(const softib_qp_t *qp)
{
    uint64_t ns;

    if (qp->attr.timeout == 0) {
        return 0;   /* infinite: never retransmit */
    }
    ns = 4096ull << qp->attr.timeout;
    return (ns < 100000) ? 100000 : ns;
}

int softib_send_pkt(softib_dev_t *dev, softib_qp_t *qp, const axon_dev_gid_t *dgid,
                    uint32_t dest_qpn, size_t len)
{
    return softib_send_pkt_pay(dev, qp, dgid, dest_qpn, len, NULL, 0);
}

int softib_send_pkt_pay(softib_dev_t *dev, softib_qp_t *qp, const axon_dev_gid_t *dgid,
                        uint32_t dest_qpn, size_t hlen, const void *pay, size_t paylen)
{
    softib_wire_pkt_t pkt = {dev->tx_buf, (pay != NULL) ? hlen : hlen + paylen, pay,
                             (pay != NULL) ? paylen : 0};
    int ret = softib_wire_sendv(dev->wire, dgid, dest_qpn, &pkt);

    if (ret == EINVAL) {
        /* unroutable: the packet is lost, as on a real fabric; retries will tell */
        axon_debug("softib: QP 0x%x: packet to QPN 0x%x not routable", qp->super.qp_num,
                   dest_qpn);
        return 0;
    }
    return ret;
}

static uint32_t softib_qp_mtu(const softib_qp_t *qp)
{
    return (uint32_t)axon_dev_mtu_bytes(qp->attr.path_mtu);
}

/* Reads and atomics started and not completed */
static unsigned softib_req_rd_atomic_inflight(softib_qp_t *qp)
{
    unsigned idx, n = 0;

    for (idx = qp->sq_head; idx != qp->sq_req; idx++) {
        n += softib_wqe_is_rd_atomic(softib_sq_wqe(qp, idx));
    }
    return n;
}

void softib_req_rewind(softib_qp_t *qp)
{
    uint32_t psn = qp->comp.psn;
    softib_send_wqe_t *wqe;
    int32_t off;
    unsigned idx;

    for (idx = qp->sq_head; idx != qp->sq_started; idx++) {
        wqe = softib_sq_wqe(qp, idx);
        if (softib_wqe_is_rd_atomic(wqe)) {
            /* incomplete: its responses are what is missing */
            qp->sq_req  = idx;
            qp->req.pkt = wqe->rcvd;
            qp->req.psn = softib_psn_add(wqe->first_psn, wqe->rcvd);
            return;
        }
        if (softib_psn_diff(psn, softib_psn_add(wqe->first_psn, wqe->npkts)) < 0) {
            off         = softib_psn_diff(psn, wqe->first_psn);
            qp->sq_req  = idx;
            qp->req.pkt = (off > 0) ? (uint32_t)off : 0;
            qp->req.psn = softib_psn_add(wqe->first_psn, qp->req.pkt);
            return;
        }
    }
    qp->sq_req  = qp->sq_started;
    qp->req.pkt = 0;
    qp->req.psn = qp->req.max_psn;
}

void softib_req_forward(softib_qp_t *qp)
{
    softib_send_wqe_t *wqe;
    int32_t off;

    if ((int)(qp->sq_head - qp->sq_req) > 0) {
        qp->sq_req  = qp->sq_head;
        qp->req.pkt = 0;
        qp->req.psn = (qp->sq_req == qp->sq_started) ? qp->req.max_psn
                                                      : softib_sq_wqe(qp, qp->sq_req)->first_psn;
    }
    /* Skip what the responder acknowledged already (sent before a rewind) */
    while ((qp->sq_req != qp->sq_started) && (softib_psn_diff(qp->comp.psn, qp->req.psn) > 0)) {
        wqe = softib_sq_wqe(qp, qp->sq_req);
        if (softib_wqe_is_rd_atomic(wqe) && (wqe->rcvd < wqe->npkts)) {
            break;   /* an ACK past a read or atomic does not bring its answers: resend it */
        }
        if (softib_psn_diff(qp->comp.psn, softib_psn_add(wqe->first_psn, wqe->npkts)) >= 0) {
            qp->sq_req++;
            qp->req.pkt = 0;
            qp->req.psn = softib_psn_add(wqe->first_psn, wqe->npkts);
            continue;
        }
        if (!softib_wqe_is_rd_atomic(wqe)) {
            off         = softib_psn_diff(qp->comp.psn, wqe->first_psn);
            qp->req.pkt = (uint32_t)off;
            qp->req.psn = qp->comp.psn;
        }
        break;
    }
}

/* First time a WQE goes: fence and read/atomic limits, local keys, PSNs. 0 = go, 1 = wait */
static int softib_req_start(softib_qp_t *qp, softib_send_wqe_t *wqe)
{
    softib_dev_t *dev = softib_qp_dev(qp);
    unsigned max_rd   = qp->attr.max_rd_atomic;
    uint32_t mtu      = softib_qp_mtu(qp);
    int access        = softib_wqe_is_rd_atomic(wqe) ? AXON_DEV_ACCESS_LOCAL_WRITE : 0;

    if ((qp->super.qp_type == AXON_DEV_QPT_DC_INI) && softib_dc_req_target(qp, wqe)) {
        return 1;
    }
    if (softib_qp_reliable(qp)) {
        if ((wqe->flags & AXON_DEV_SEND_FENCE) && softib_req_rd_atomic_inflight(qp)) {
            return 1;
        }
        if (softib_wqe_is_rd_atomic(wqe) && (max_rd == 0)) {
            /* Seed §7.2.3: no initiator depth (rdma_cm's initiator_depth left 0) */
            axon_debug("softib: QP 0x%x: WR 0x%llx is a read or atomic, max_rd_atomic is 0",
                       qp->super.qp_num, (unsigned long long)wqe->wr_id);
            wqe->status = AXON_DEV_WC_LOC_QP_OP_ERR;
            return 0;
        }
        /* never more in flight than max_rd_atomic: a peer that granted as many
         * responder resources (max_dest_rd_atomic) never refuses one */
        if (softib_wqe_is_rd_atomic(wqe) && (softib_req_rd_atomic_inflight(qp) >= max_rd)) {
            return 1;
        }
    }
    if (softib_sge_check(dev, qp->super.pd, wqe->sge, wqe->num_sge, access) !=
        SOFTIB_ACCESS_OK) {
        axon_debug("softib: QP 0x%x: WR 0x%llx has a bad local SGE", qp->super.qp_num,
                   (unsigned long long)wqe->wr_id);
        wqe->status = AXON_DEV_WC_LOC_PROT_ERR;
        return 0;
    }
    wqe->first_psn = qp->req.psn;
    wqe->rcvd      = 0;
    if (softib_wr_is_atomic(wqe->opcode) || (qp->super.qp_type == AXON_DEV_QPT_UD)) {
        wqe->npkts = 1;
    } else {
        wqe->npkts = wqe->length ? (wqe->length + mtu - 1) / mtu : 1;
    }
    qp->sq_started++;
    return 0;
}

static softib_opcode_t softib_req_opcode(const softib_send_wqe_t *wqe, int first, int last)
{
    int imm = (wqe->opcode == AXON_DEV_WR_SEND_WITH_IMM) ||
              (wqe->opcode == AXON_DEV_WR_RDMA_WRITE_WITH_IMM);

    if ((wqe->opcode == AXON_DEV_WR_SEND) || (wqe->opcode == AXON_DEV_WR_SEND_WITH_IMM)) {
        if (first && last) {
            return imm ? SOFTIB_OP_SEND_ONLY_IMM : SOFTIB_OP_SEND_ONLY;
        }
        return first ? SOFTIB_OP_SEND_FIRST :
               last  ? (imm ? SOFTIB_OP_SEND_LAST_IMM : SOFTIB_OP_SEND_LAST) :
                       SOFTIB_OP_SEND_MIDDLE;
    }
    if (first && last) {
        return imm ? SOFTIB_OP_WRITE_ONLY_IMM : SOFTIB_OP_WRITE_ONLY;
    }
    return first ? SOFTIB_OP_WRITE_FIRST :
           last  ? (imm ? SOFTIB_OP_WRITE_LAST_IMM : SOFTIB_OP_WRITE_LAST) :
                   SOFTIB_OP_WRITE_MIDDLE;
}

/* A masked atomic's header, and its operands as payload; returns the payload length */
static uint32_t softib_req_ext_atomic(const softib_send_wqe_t *wqe, softib_pkt_t *pkt,
                                      uint8_t *pay)
{
    const axon_amo_args_t *amo = wqe->amo;
    unsigned words = softib_amo_words(amo->size), log_sz = 0, n = 0;

    while ((1u << log_sz) < amo->size) {
        log_sz++;
    }
    pkt->opcode            = (amo->op == AXON_AMO_MASKED_CSWAP) ? SOFTIB_OP_MASKED_CMP_SWAP
                                                                : SOFTIB_OP_MASKED_FETCH_ADD;
    pkt->ext_atomic.va     = wqe->remote_addr;
    pkt->ext_atomic.rkey   = wqe->rkey;
    pkt->ext_atomic.log_sz = (uint8_t)log_sz;
    /* the order of softib_ext_atomic_eth_t's comment */
    softib_pkt_put_words(pay + 8 * words * n++, amo->value, words);
    if (amo->op == AXON_AMO_MASKED_CSWAP) {
        softib_pkt_put_words(pay + 8 * words * n++, amo->compare, words);
    }
    softib_pkt_put_words(pay + 8 * words * n++, amo->mask, words);
    if (amo->op == AXON_AMO_MASKED_CSWAP) {
        softib_pkt_put_words(pay + 8 * words * n++, amo->swap_mask, words);
    }
    return 8 * words * n;
}

/* Build and send the next packet of wqe: 0, EAGAIN (nothing sent), or a WC error */
static int softib_req_send_one(softib_qp_t *qp, softib_send_wqe_t *wqe)
{
    softib_dev_t *dev = softib_qp_dev(qp);
    const axon_dev_gid_t *dgid = &qp->attr.ah_attr.grh.dgid;
    uint32_t mtu = softib_qp_mtu(qp), off = 0, paylen = 0, dest = qp->attr.dest_qp_num;
    uint8_t ext_pay[SOFTIB_EXT_CMP_SWAP_FIELDS * SOFTIB_AMO_MAX_WORDS * 8];
    const void *pay = NULL;
    softib_pkt_t pkt;
    size_t hlen;
    int ret;

    memset(&pkt, 0, sizeof(pkt));
    pkt.src_qpn = qp->super.qp_num;
    pkt.psn     = softib_psn_add(wqe->first_psn, qp->req.pkt);
    if (qp->super.qp_type == AXON_DEV_QPT_DC_INI) {
        dgid = &qp->dc.dgid;
        softib_dc_pkt(qp, &pkt);
    }
    switch (wqe->opcode) {
    case AXON_DEV_WR_RDMA_READ:
        off           = qp->req.pkt * mtu;
        pkt.opcode    = SOFTIB_OP_READ_REQ;
        pkt.reth.va   = wqe->remote_addr + off;
        pkt.reth.rkey = wqe->rkey;
        pkt.reth.len  = wqe->length - off;
        break;
    case AXON_DEV_WR_ATOMIC_CMP_AND_SWP:
    case AXON_DEV_WR_ATOMIC_FETCH_AND_ADD:
        pkt.opcode      = (wqe->opcode == AXON_DEV_WR_ATOMIC_CMP_AND_SWP) ? SOFTIB_OP_CMP_SWAP
                                                                          : SOFTIB_OP_FETCH_ADD;
        pkt.atomic.va   = wqe->remote_addr;
        pkt.atomic.rkey = wqe->rkey;
        if (wqe->opcode == AXON_DEV_WR_ATOMIC_CMP_AND_SWP) {
            pkt.atomic.compare  = wqe->compare_add;
            pkt.atomic.swap_add = wqe->swap;
        } else {
            pkt.atomic.swap_add = wqe->compare_add;
        }
        break;
    case AXON_DEV_WR_EXT_MASKED_ATOMIC_CMP_AND_SWP:
    case AXON_DEV_WR_EXT_MASKED_ATOMIC_FETCH_AND_ADD:
        paylen = softib_req_ext_atomic(wqe, &pkt, ext_pay);
        break;
    default: {
        int first = (qp->req.pkt == 0), last = (qp->req.pkt + 1 >= wqe->npkts);

        off    = qp->req.pkt * mtu;
        paylen = (wqe->length - off < mtu) ? wqe->length - off : mtu;
        if (qp->super.qp_type == AXON_DEV_QPT_UD) {
            pkt.opcode       = (wqe->opcode == AXON_DEV_WR_SEND_WITH_IMM) ?
                               SOFTIB_OP_UD_SEND_ONLY_IMM : SOFTIB_OP_UD_SEND_ONLY;
            pkt.deth.qkey    = wqe->remote_qkey;
            pkt.deth.src_qpn = qp->super.qp_num;
            dgid             = &wqe->dgid;
            dest             = wqe->remote_qpn;
            if ((dest == SOFTIB_MCAST_QPN) && softib_gid_is_mcast(dgid)) {
                pkt.flags |= SOFTIB_BTH_MCAST;   /* to a group (seed §4.6.13) */
                pkt.mgid   = *dgid;
            }
        } else {
            pkt.opcode = softib_req_opcode(wqe, first, last);
        }
        if (first) {
            pkt.reth.va   = wqe->remote_addr;
            pkt.reth.rkey = wqe->rkey;
            pkt.reth.len  = wqe->length;
        }
        if (last && (wqe->flags & AXON_DEV_SEND_SOLICITED) &&
            (wqe->opcode != AXON_DEV_WR_RDMA_WRITE)) {
            pkt.flags |= SOFTIB_BTH_SE;
        }
        if (softib_qp_reliable(qp) && (last || ((pkt.psn % SOFTIB_ACK_EVERY) == 0))) {
            pkt.flags |= SOFTIB_BTH_ACKREQ;
        }
        pkt.imm = wqe->imm;
        break;
    }
    }
    pkt.dest_qpn = dest;
    hlen = softib_pkt_build(dev->tx_buf, &pkt);
    if (softib_wr_is_ext_atomic(wqe->opcode)) {
        memcpy(dev->tx_buf + hlen, ext_pay, paylen);
    } else if (paylen && !(wqe->flags & (AXON_DEV_SEND_INLINE | AXON_DEV_SEND_WITH_CALC)) &&
               ((pay = softib_sge_ptr(dev, qp->super.pd, wqe->sge, wqe->num_sge, off,
                                      paylen)) != NULL)) {
        /* read in place by the wire */
    } else if (paylen) {
        if (wqe->flags & AXON_DEV_SEND_INLINE) {
            memcpy(dev->tx_buf + hlen, wqe->inline_data + off, paylen);
        } else if (wqe->flags & AXON_DEV_SEND_WITH_CALC) {
            /* one packet: the result vector fits the smallest MTU */
            if (softib_calc_reduce(qp, wqe, dev->tx_buf + hlen) != SOFTIB_ACCESS_OK) {
                return AXON_DEV_WC_LOC_PROT_ERR;
            }
        } else if (softib_sge_copy_from(dev, qp->super.pd, wqe->sge, wqe->num_sge, off,
                                        dev->tx_buf + hlen, paylen) != SOFTIB_ACCESS_OK) {
            return AXON_DEV_WC_LOC_PROT_ERR;   /* the MR went away after the WR started */
        }
    }
    ret = (pkt.flags & SOFTIB_BTH_MCAST) ? softib_mcast_send(dev, qp, dgid, hlen, pay, paylen) :
          softib_send_pkt_pay(dev, qp, dgid, dest, hlen, pay, paylen);
    if (ret) {
        qp->req.blocked = 1;
        softib_qp_timer(qp, axon_sys_time_ns() + 50000);
        return EAGAIN;
    }
    return 0;
}

/* After a packet left: advance the position, complete UC/UD WQEs, arm the timer */
static void softib_req_sent(softib_qp_t *qp, softib_send_wqe_t *wqe)
{
    uint64_t tmo, now;

    if (softib_wqe_is_rd_atomic(wqe)) {
        qp->req.pkt = wqe->npkts;
    } else {
        qp->req.pkt++;
    }
    qp->req.psn = softib_psn_add(wqe->first_psn, qp->req.pkt);
    if (softib_psn_diff(qp->req.psn, qp->req.max_psn) > 0) {
        qp->req.max_psn = qp->req.psn;
    }
    if (softib_qp_reliable(qp) && (qp->comp.rto_deadline == 0)) {
        /* nothing was outstanding (no timer): from now the responder owes an answer */
        now = axon_sys_time_ns();
        if (qp->comp.wait_ns == 0) {
            qp->comp.wait_ns = now;
        }
        if ((tmo = softib_ack_timeout_ns(qp)) != 0) {
            qp->comp.rto_deadline = now + tmo;
            softib_qp_timer(qp, qp->comp.rto_deadline);
        }
    }
    if (qp->req.pkt < wqe->npkts) {
        return;
    }
    qp->sq_req++;
    qp->req.pkt = 0;
    if (!softib_qp_reliable(qp)) {
        /* unreliable: done once it left; UC and UD complete in order, so wqe is the head */
        softib_qp_complete_send(qp, wqe, AXON_DEV_WC_SUCCESS);
        qp->sq_head++;
    }
}

void softib_req_progress(softib_qp_t *qp)
{
    softib_dev_t *dev = softib_qp_dev(qp);
    softib_send_wqe_t *wqe;
    int budget = 64, ret;

    qp->req.blocked = 0;
    if (!softib_qp_can_send(qp)) {
        return;
    }
    while ((budget > 0) && ((int)(softib_sq_limit(qp) - qp->sq_req) > 0) &&
           !qp->comp.rnr_deadline) {
        budget--;
        if ((qp->super.state == AXON_DEV_QPS_SQD) && ((int)(qp->sq_req - qp->sqd_tail) >= 0)) {
            break;
        }
        if (softib_qp_reliable(qp) &&
            (softib_psn_diff(qp->req.psn, qp->comp.psn) >= SOFTIB_SEND_WINDOW)) {
            break;
        }
        wqe = softib_sq_wqe(qp, qp->sq_req);
        if (softib_wr_is_xchan_task(wqe->opcode)) {
            /* a task runs once everything before it completed */
            if ((qp->sq_head != qp->sq_req) || !softib_xchan_exec(qp, wqe)) {
                break;
            }
            continue;
        }
        if (softib_wr_is_umr(wqe->opcode)) {
            if (!softib_umr_req(qp, wqe)) {
                break;
            }
            continue;
        }
        if (softib_direct_try(qp, wqe)) {
            continue;   /* its data is in place, it completed */
        }
        if ((qp->req.pkt == 0) && (qp->sq_req == qp->sq_started) && (wqe->status < 0) &&
            softib_req_start(qp, wqe)) {
            break;
        }
        if (wqe->status < 0) {
            ret = softib_req_send_one(qp, wqe);
            if (ret == EAGAIN) {
                break;
            }
            if (ret == 0) {
                softib_req_sent(qp, wqe);
                continue;
            }
            wqe->status = ret;
        }
        /* A local error completes once everything before it has */
        if (qp->sq_head == qp->sq_req) {
            softib_qp_complete_send(qp, wqe, (axon_dev_wc_status_t)wqe->status);
            qp->sq_head++;
            softib_qp_error(qp);
        }
        break;
    }
    if (qp->super.qp_type == AXON_DEV_QPT_DC_INI) {
        softib_dc_req_idle(qp);
    }
    if ((budget == 0) && ((int)(softib_sq_limit(qp) - qp->sq_req) > 0) && !qp->req.blocked) {
        /* more to send than one pass sends: come back soon, even if nobody calls in */
        qp->req.blocked = 1;
        softib_qp_timer(qp, axon_sys_time_ns());
    }
    if (qp->sq_draining && (qp->super.state == AXON_DEV_QPS_SQD) &&
        ((int)(qp->sq_head - qp->sqd_tail) >= 0)) {
        qp->sq_draining = 0;
        if (qp->attr.en_sqd_async_notify) {
            softib_async_event(dev, AXON_DEV_EVENT_SQ_DRAINED, &qp->super);
        }
    }
}
