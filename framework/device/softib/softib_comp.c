/*
 * The completer: ACKs, NAKs, read responses and atomic acknowledgements
 * become completions, in WQE order; the retransmission and RNR timers live
 * here too. Any error completion moves the QP to ERR.
 */
#include <errno.h>
#include <string.h>
#include "log.h"
#include "softib_direct.h"
#include "softib_pkt.h"

/* The responder moved: retries start over, the timer restarts (or stops). Answers come
 * in a pass (a 1 MiB read is 256 of them): the pass's clock, not one read each. */
static void softib_comp_progressed(softib_qp_t *qp)
{
    uint64_t tmo = softib_ack_timeout_ns(qp), now = softib_qp_dev(qp)->pass_ns;

    softib_direct_note_answer(qp, now);
    qp->comp.retry_left = qp->attr.retry_cnt;
    qp->comp.rnr_left   = qp->attr.rnr_retry;
    if ((qp->sq_head == qp->sq_started) || (tmo == 0)) {
        qp->comp.rto_deadline = 0;
    } else {
        qp->comp.rto_deadline = now + tmo;
        softib_qp_timer(qp, qp->comp.rto_deadline);
    }
}

/* Complete sends and writes whose every packet is acknowledged */
static int softib_comp_complete_acked(softib_qp_t *qp)
{
    softib_send_wqe_t *wqe;
    int n = 0;

    while (qp->sq_head != qp->sq_started) {
        wqe = softib_sq_wqe(qp, qp->sq_head);
        if (softib_wqe_is_rd_atomic(wqe) ||
            (softib_psn_diff(qp->comp.psn, softib_psn_add(wqe->first_psn, wqe->npkts)) < 0)) {
            break;
        }
        softib_qp_complete_send(qp, wqe, AXON_DEV_WC_SUCCESS);
        qp->sq_head++;
        n++;
    }
    return n;
}

/* Everything up to and including psn is acknowledged; returns nonzero on progress */
static int softib_comp_ack_upto(softib_qp_t *qp, uint32_t psn)
{
    uint32_t next = softib_psn_add(psn, 1);
    int progress  = 0;

    if (softib_psn_diff(next, qp->comp.psn) > 0) {
        qp->comp.psn = next;
        progress     = 1;
    }
    progress |= softib_comp_complete_acked(qp);
    softib_req_forward(qp);
    return progress;
}

/* The head WQE fails: it completes with st, the QP goes to ERR */
static void softib_comp_fail(softib_qp_t *qp, axon_dev_wc_status_t st)
{
    if (qp->sq_head != qp->sq_tail) {
        axon_debug("softib: QP 0x%x: WR 0x%llx completes with %s", qp->super.qp_num,
                   (unsigned long long)softib_sq_wqe(qp, qp->sq_head)->wr_id,
                   axon_dev_wc_status_str(st));
        softib_qp_complete_send(qp, softib_sq_wqe(qp, qp->sq_head), st);
        qp->sq_head++;
    }
    softib_qp_error(qp);
}

static const axon_dev_wc_status_t softib_nak_status[] = {
    [SOFTIB_AETH_NAK_INV_REQ] = AXON_DEV_WC_REM_INV_REQ_ERR,
    [SOFTIB_AETH_NAK_ACCESS]  = AXON_DEV_WC_REM_ACCESS_ERR,
    [SOFTIB_AETH_NAK_OP]      = AXON_DEV_WC_REM_OP_ERR,
};

static void softib_comp_aeth(softib_qp_t *qp, const softib_pkt_t *pkt)
{
    uint32_t prev = softib_psn_add(pkt->psn, SOFTIB_PSN_MASK);   /* psn - 1 */

    switch (pkt->aeth.code) {
    case SOFTIB_AETH_ACK:
        if (softib_comp_ack_upto(qp, pkt->psn)) {
            softib_comp_progressed(qp);
        }
        break;
    case SOFTIB_AETH_RNR_NAK:
        if (softib_comp_ack_upto(qp, prev)) {
            softib_comp_progressed(qp);
        }
        if ((qp->sq_head == qp->sq_started) || qp->comp.rnr_deadline ||
            (pkt->psn != qp->comp.psn)) {
            break;   /* stale or repeated */
        }
        if (qp->attr.rnr_retry != 7) {
            if (qp->comp.rnr_left == 0) {
                softib_comp_fail(qp, AXON_DEV_WC_RNR_RETRY_EXC_ERR);
                break;
            }
            qp->comp.rnr_left--;
        }
        qp->comp.rto_deadline = 0;
        qp->comp.rnr_psn      = pkt->psn;
        qp->comp.rnr_deadline = axon_sys_time_ns() + softib_rnr_timeout_ns(pkt->aeth.rnr_timer);
        softib_qp_timer(qp, qp->comp.rnr_deadline);
        break;
    case SOFTIB_AETH_NAK_SEQ:
        if (softib_comp_ack_upto(qp, prev)) {
            softib_comp_progressed(qp);
        }
        /* resend from the PSN the responder expects, unless we are there already */
        if ((pkt->psn == qp->comp.psn) && (softib_psn_diff(qp->req.psn, pkt->psn) > 0)) {
            softib_req_rewind(qp);
        }
        break;
    case SOFTIB_AETH_NAK_INV_REQ:
    case SOFTIB_AETH_NAK_ACCESS:
    case SOFTIB_AETH_NAK_OP:
        softib_comp_ack_upto(qp, prev);
        if (pkt->psn == qp->comp.psn) {
            softib_comp_fail(qp, softib_nak_status[pkt->aeth.code]);
        }
        break;
    default:
        axon_debug("softib: QP 0x%x: unknown AETH code %u", qp->super.qp_num, pkt->aeth.code);
        break;
    }
}

/*
 * IB's implied NAK: an answer to a PSN after some of the responses the head
 * read or atomic still waits for means those were lost. Ask again from the
 * first missing one now, once per gap, rather than when the transport timer
 * expires (the timer still covers a gap nothing comes after).
 */
static void softib_comp_implied_nak(softib_qp_t *qp, softib_send_wqe_t *wqe, uint32_t psn)
{
    uint32_t expect_psn = softib_psn_add(wqe->first_psn, wqe->rcvd);

    if (qp->comp.read_retry && (qp->comp.read_retry_psn == expect_psn)) {
        return;
    }
    axon_trace("softib: QP 0x%x: answer to PSN 0x%x while %s waits for PSN 0x%x: asking again",
               qp->super.qp_num, psn, (wqe->opcode == AXON_DEV_WR_RDMA_READ) ? "a read" :
               "an atomic", expect_psn);
    qp->comp.read_retry     = 1;
    qp->comp.read_retry_psn = expect_psn;
    softib_req_rewind(qp);
}

static void softib_comp_read_resp(softib_qp_t *qp, const softib_pkt_t *pkt)
{
    softib_dev_t *dev = softib_qp_dev(qp);
    uint32_t mtu      = (uint32_t)axon_dev_mtu_bytes(qp->attr.path_mtu);
    softib_send_wqe_t *wqe;
    uint32_t off, expect, expect_psn;

    softib_comp_ack_upto(qp, softib_psn_add(pkt->psn, SOFTIB_PSN_MASK));
    if (qp->sq_head == qp->sq_started) {
        return;
    }
    wqe = softib_sq_wqe(qp, qp->sq_head);
    if (wqe->opcode != AXON_DEV_WR_RDMA_READ) {
        return;
    }
    expect_psn = softib_psn_add(wqe->first_psn, wqe->rcvd);
    if (pkt->psn != expect_psn) {
        /*
         * A later response of this read: the ones before it were lost
         * (IB's implied NAK). Ask again from the first missing one now,
         * once per gap, rather than waiting for the transport timer.
         */
        if (softib_psn_diff(pkt->psn, expect_psn) > 0) {
            softib_comp_implied_nak(qp, wqe, pkt->psn);
        }
        return;   /* duplicate or out of order */
    }
    off    = wqe->rcvd * mtu;
    expect = (wqe->length - off < mtu) ? wqe->length - off : mtu;
    if (pkt->paylen != expect) {
        axon_debug("softib: QP 0x%x: read response of %u bytes, expected %u", qp->super.qp_num,
                   pkt->paylen, expect);
        return;
    }
    if (pkt->paylen &&
        (softib_sge_copy_to(dev, qp->super.pd, wqe->sge, wqe->num_sge, off, pkt->payload,
                            pkt->paylen) != SOFTIB_ACCESS_OK)) {
        softib_comp_fail(qp, AXON_DEV_WC_LOC_PROT_ERR);
        return;
    }
    wqe->rcvd++;
    if (wqe->rcvd == wqe->npkts) {
        softib_qp_complete_send(qp, wqe, AXON_DEV_WC_SUCCESS);
        qp->sq_head++;
        softib_comp_ack_upto(qp, pkt->psn);
    }
    softib_comp_progressed(qp);
}

/*
 * The value a masked atomic found, as the consumer reads it (§8.7.2.2):
 * host-order 64-bit words, a 4-byte operand as one host-order 32-bit word.
 * Returns its size, 0 if the answer does not fit the WQE.
 */
static uint32_t softib_comp_ext_result(const softib_send_wqe_t *wqe, const softib_pkt_t *pkt,
                                       uint64_t *words)
{
    unsigned size = wqe->amo->size, n = softib_amo_words(size);
    uint32_t low;

    if (pkt->paylen != 8 * n) {
        return 0;
    }
    softib_pkt_get_words(pkt->payload, words, n);
    if (size == 4) {
        low = (uint32_t)words[0];
        memcpy(words, &low, sizeof(low));
    }
    return size;
}

static void softib_comp_atomic_ack(softib_qp_t *qp, const softib_pkt_t *pkt)
{
    softib_dev_t *dev = softib_qp_dev(qp);
    softib_send_wqe_t *wqe;
    uint64_t orig[SOFTIB_AMO_MAX_WORDS];
    uint32_t len = sizeof(orig[0]);
    int ext = (pkt->opcode == SOFTIB_OP_MASKED_ATOMIC_ACK);

    softib_comp_ack_upto(qp, softib_psn_add(pkt->psn, SOFTIB_PSN_MASK));
    if (qp->sq_head == qp->sq_started) {
        return;
    }
    wqe = softib_sq_wqe(qp, qp->sq_head);
    if (!(ext ? softib_wr_is_ext_atomic(wqe->opcode) : softib_wr_is_std_atomic(wqe->opcode)) ||
        (pkt->psn != wqe->first_psn)) {
        return;
    }
    if (ext && ((len = softib_comp_ext_result(wqe, pkt, orig)) == 0)) {
        axon_debug("softib: QP 0x%x: masked atomic answer of %u bytes for a %u-byte operand",
                   qp->super.qp_num, pkt->paylen, wqe->amo->size);
        return;
    }
    if (!ext) {
        orig[0] = pkt->atomic_orig;
    }
    if (softib_sge_copy_to(dev, qp->super.pd, wqe->sge, wqe->num_sge, 0, orig,
                           len) != SOFTIB_ACCESS_OK) {
        softib_comp_fail(qp, AXON_DEV_WC_LOC_PROT_ERR);
        return;
    }
    wqe->rcvd = 1;
    softib_qp_complete_send(qp, wqe, AXON_DEV_WC_SUCCESS);
    qp->sq_head++;
    softib_comp_ack_upto(qp, pkt->psn);
    softib_comp_progressed(qp);
}

void softib_comp_rx(softib_dev_t *dev, softib_qp_t *qp, const softib_pkt_t *pkt)
{
    (void)dev;
    if (pkt->opcode == SOFTIB_OP_DC_DISCONNECT_ACK) {
        softib_dc_disc_acked(qp, pkt);
        return;
    }
    if (!softib_qp_reliable(qp) || !softib_qp_can_send(qp) ||
        (pkt->src_qpn != qp->attr.dest_qp_num)) {
        return;
    }
    /* An answer to a PSN never sent is garbage (or from an earlier life of the QPN) */
    if (softib_psn_diff(pkt->psn, qp->req.max_psn) >= 0) {
        return;
    }
    if (qp->sq_head != qp->sq_started) {
        softib_send_wqe_t *wqe = softib_sq_wqe(qp, qp->sq_head);

        /* answers past the head read/atomic, none of its own missing ones among them */
        if (softib_wqe_is_rd_atomic(wqe) && (wqe->rcvd < wqe->npkts) &&
            (softib_psn_diff(pkt->psn, softib_psn_add(wqe->first_psn, wqe->npkts)) >= 0)) {
            softib_comp_implied_nak(qp, wqe, pkt->psn);
        }
    }
    if (pkt->opcode == SOFTIB_OP_ACK) {
        softib_comp_aeth(qp, pkt);
    } else if ((pkt->opcode == SOFTIB_OP_ATOMIC_ACK) ||
               (pkt->opcode == SOFTIB_OP_MASKED_ATOMIC_ACK)) {
        softib_comp_atomic_ack(qp, pkt);
    } else if (pkt->info->flags & SOFTIB_OPF_READ) {
        softib_comp_read_resp(qp, pkt);
    }
}

void softib_comp_timers(softib_qp_t *qp, uint64_t now)
{
    if (qp->dc.disc_deadline || qp->dc.idle_deadline) {
        softib_dc_timers(qp, now);
    }
    if (qp->comp.rnr_deadline && (now >= qp->comp.rnr_deadline)) {
        qp->comp.rnr_deadline = 0;
        softib_req_rewind(qp);
    }
    if (qp->comp.rto_deadline && (now >= qp->comp.rto_deadline)) {
        if (qp->sq_head == qp->sq_started) {
            qp->comp.rto_deadline = 0;
            return;
        }
        if (qp->comp.retry_left == 0) {
            softib_comp_fail(qp, AXON_DEV_WC_RETRY_EXC_ERR);
            return;
        }
        qp->comp.retry_left--;
        axon_trace("softib: QP 0x%x: retransmit from PSN 0x%x (%u retries left)",
                   qp->super.qp_num, qp->comp.psn, qp->comp.retry_left);
        softib_req_rewind(qp);
        qp->comp.read_retry   = 0;   /* a gap asked again and lost again may ask once more */
        qp->comp.rto_deadline = now + softib_ack_timeout_ns(qp);
    }
}
