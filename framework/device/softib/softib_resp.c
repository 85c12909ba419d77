/*
 * The responder: executes incoming requests and answers them.
 *
 * RC: a request with the expected PSN executes; an earlier PSN is a
 * duplicate (re-ACKed; a READ executes again; an atomic replays the result
 * saved in the responder resources, so it executes exactly once); a later
 * PSN means packets were lost (one NAK sequence error until the gap fills).
 * ACKs are coalesced: one per QP per progress pass, for the latest PSN that
 * asked for one. UC drops a message that lost a packet; UD checks the Q_Key
 * and writes the 40-byte GRH area before the payload.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include "log.h"
#include "softib_pkt.h"

typedef enum {
    RESP_OK = 0,
    RESP_RNR,                   /* no receive WQE: RNR NAK (RC), drop (UC/UD) */
    RESP_DROP,                  /* silently ignore the packet */
    RESP_ERR_INV_REQ,           /* requester: REM_INV_REQ_ERR; QP_REQ_ERR here */
    RESP_ERR_ACCESS,            /* requester: REM_ACCESS_ERR; QP_ACCESS_ERR here */
    RESP_ERR_WRITE_IMM_ACCESS,  /* RESP_ERR_ACCESS of an RDMA WRITE with immediate that
                                 * consumed a receive: that completes with LOC_ACCESS_ERR */
    RESP_ERR_REQ_ACCESS,        /* a request §7.1.4 counts as an access error (misaligned
                                 * atomic, too many reads or atomics): requester
                                 * REM_INV_REQ_ERR (IB's Invalid Request NAK); QP_ACCESS_ERR
                                 * here, not QP_REQ_ERR */
    RESP_ERR_RECV_LEN,          /* receiver: LOC_LEN_ERR; requester: REM_INV_REQ_ERR */
    RESP_ERR_RECV_PROT,         /* receiver: LOC_PROT_ERR; requester: REM_OP_ERR */
} softib_resp_status_t;

static uint32_t softib_resp_mtu(const softib_qp_t *qp)
{
    return (uint32_t)axon_dev_mtu_bytes(qp->attr.path_mtu);
}

/* Answer with an ACK or NAK; a full wire loses it like the fabric would */
/* Headers of a response to the requester (ACK, NAK, atomic ACK, read data) */
static void softib_resp_reply_init(softib_pkt_t *pkt, const softib_qp_t *qp, uint8_t opcode,
                                   uint32_t psn)
{
    memset(pkt, 0, sizeof(*pkt));
    pkt->opcode   = opcode;
    pkt->dest_qpn = qp->attr.dest_qp_num;
    pkt->src_qpn  = qp->super.qp_num;
    pkt->psn      = psn;
}

static void softib_resp_send_aeth(softib_dev_t *dev, softib_qp_t *qp, softib_aeth_code_t code,
                                  uint32_t psn)
{
    softib_pkt_t pkt;
    size_t len;

    softib_resp_reply_init(&pkt, qp, SOFTIB_OP_ACK, psn);
    pkt.aeth.code      = (uint8_t)code;
    pkt.aeth.rnr_timer = qp->attr.min_rnr_timer;
    len = softib_pkt_build(dev->tx_buf, &pkt);
    softib_send_pkt(dev, qp, &qp->attr.ah_attr.grh.dgid, qp->attr.dest_qp_num, len);
}

static void softib_resp_queue_ack(softib_dev_t *dev, softib_qp_t *qp, uint32_t psn)
{
    qp->resp.ack_psn = psn;
    if (!qp->ack_queued) {
        qp->ack_queued = 1;
        axon_list_add_tail(&dev->ack_list, &qp->ack_link);
    }
}

void softib_resp_flush_acks(softib_dev_t *dev)
{
    softib_qp_t *qp, *next;

    axon_list_for_each_safe(qp, next, &dev->ack_list, ack_link) {
        if (softib_resp_busy(qp) && softib_qp_can_recv(qp)) {
            continue;   /* answers leave in PSN order: after the read responses still due */
        }
        axon_list_del(&qp->ack_link);
        qp->ack_queued = 0;
        if (softib_qp_can_recv(qp)) {
            softib_resp_send_aeth(dev, qp, SOFTIB_AETH_ACK, qp->resp.ack_psn);
        }
    }
}

/* Take a receive WQE for a new message (QP's queue or SRQ) and check its SGEs */
static softib_resp_status_t softib_resp_get_wqe(softib_dev_t *dev, softib_qp_t *qp, int check)
{
    softib_srq_t *srq = qp->super.srq ? softib_srq(qp->super.srq) : NULL;

    if (!qp->resp.have_wqe) {
        if (!softib_rq_pop(srq ? &srq->rq : &qp->rq, &qp->resp.wqe, qp->resp.sge)) {
            return RESP_RNR;
        }
        if (srq != NULL) {
            softib_srq_consumed(dev, srq);
        }
        qp->resp.have_wqe = 1;
    }
    qp->resp.offset = 0;
    if (check && (softib_sge_check(dev, qp->super.pd, qp->resp.wqe.sge, qp->resp.wqe.num_sge,
                                   AXON_DEV_ACCESS_LOCAL_WRITE) != SOFTIB_ACCESS_OK)) {
        return RESP_ERR_RECV_PROT;
    }
    return RESP_OK;
}

static uint64_t softib_resp_wqe_len(const softib_qp_t *qp)
{
    uint64_t len = 0;
    int i;

    for (i = 0; i < qp->resp.wqe.num_sge; i++) {
        len += qp->resp.wqe.sge[i].length;
    }
    return len;
}

static softib_resp_status_t softib_resp_recv_data(softib_dev_t *dev, softib_qp_t *qp,
                                                  const void *data, uint32_t len)
{
    if (qp->resp.offset + (uint64_t)len > softib_resp_wqe_len(qp)) {
        return RESP_ERR_RECV_LEN;
    }
    if (len && (softib_sge_copy_to(dev, qp->super.pd, qp->resp.wqe.sge, qp->resp.wqe.num_sge,
                                   qp->resp.offset, data, len) != SOFTIB_ACCESS_OK)) {
        return RESP_ERR_RECV_PROT;
    }
    qp->resp.offset += len;
    return RESP_OK;
}

static void softib_resp_complete(softib_qp_t *qp, const softib_pkt_t *pkt,
                                 axon_dev_wc_opcode_t opcode, uint32_t byte_len, int grh)
{
    softib_qp_complete_recv(qp, qp->resp.wqe.wr_id, AXON_DEV_WC_SUCCESS, opcode, byte_len,
                            pkt->imm, !!(pkt->info->hdrs & SOFTIB_HDR_IMM),
                            (qp->super.qp_type == AXON_DEV_QPT_UD) ? pkt->deth.src_qpn
                                                                   : qp->attr.dest_qp_num,
                            grh, !!(pkt->flags & SOFTIB_BTH_SE));
    qp->resp.have_wqe = 0;
}

static softib_resp_status_t softib_resp_send(softib_dev_t *dev, softib_qp_t *qp,
                                             const softib_pkt_t *pkt)
{
    unsigned flags = pkt->info->flags;
    softib_resp_status_t st;

    if (flags & SOFTIB_OPF_FIRST) {
        if ((st = softib_resp_get_wqe(dev, qp, 1)) != RESP_OK) {
            return st;
        }
        qp->resp.in_msg = SOFTIB_OPF_SEND;
    } else if (qp->resp.in_msg != SOFTIB_OPF_SEND) {
        return (qp->super.qp_type == AXON_DEV_QPT_RC) ? RESP_ERR_INV_REQ : RESP_DROP;
    }
    if ((st = softib_resp_recv_data(dev, qp, pkt->payload, pkt->paylen)) != RESP_OK) {
        return st;
    }
    if (flags & SOFTIB_OPF_LAST) {
        qp->resp.in_msg = 0;
        softib_resp_complete(qp, pkt, AXON_DEV_WC_RECV, qp->resp.offset, 0);
    }
    return RESP_OK;
}

/*
 * A write the key does not allow. Seed §7.2.9: with immediate (RC), the
 * receive it consumes completes with LOC_ACCESS_ERR rather than being
 * flushed; only the packet with the immediate (ONLY or LAST) says a message
 * has one, so a longer one refused at its first packet consumes nothing.
 */
static softib_resp_status_t softib_resp_write_denied(softib_dev_t *dev, softib_qp_t *qp,
                                                     unsigned flags)
{
    if ((flags & SOFTIB_OPF_RECV) && (qp->super.qp_type == AXON_DEV_QPT_RC) &&
        (qp->resp.have_wqe || (softib_resp_get_wqe(dev, qp, 0) == RESP_OK))) {
        return RESP_ERR_WRITE_IMM_ACCESS;
    }
    return RESP_ERR_ACCESS;
}

static softib_resp_status_t softib_resp_write(softib_dev_t *dev, softib_qp_t *qp,
                                              const softib_pkt_t *pkt)
{
    unsigned flags = pkt->info->flags;
    softib_resp_status_t st;
    uint64_t va;

    if (flags & SOFTIB_OPF_FIRST) {
        if (!(qp->attr.qp_access_flags & AXON_DEV_ACCESS_REMOTE_WRITE)) {
            axon_debug("softib: QP 0x%x: RDMA WRITE, but the QP does not allow remote write",
                       qp->super.qp_num);
            return RESP_ERR_INV_REQ;
        }
        /* IB: the R_Key is not checked for a zero-length write (nothing is accessed) */
        if ((pkt->reth.len != 0) &&
            (softib_mr_check(dev, qp->super.pd, pkt->reth.rkey, pkt->reth.va, pkt->reth.len,
                             AXON_DEV_ACCESS_REMOTE_WRITE) != SOFTIB_ACCESS_OK)) {
            axon_debug("softib: QP 0x%x: RDMA WRITE to 0x%llx len %u rkey 0x%x denied",
                       qp->super.qp_num, (unsigned long long)pkt->reth.va, pkt->reth.len,
                       pkt->reth.rkey);
            return softib_resp_write_denied(dev, qp, flags);
        }
        qp->resp.va        = pkt->reth.va;
        qp->resp.rkey      = pkt->reth.rkey;
        qp->resp.write_len = pkt->reth.len;
        qp->resp.offset    = 0;
        qp->resp.in_msg    = SOFTIB_OPF_WRITE;
    } else if (qp->resp.in_msg != SOFTIB_OPF_WRITE) {
        return (qp->super.qp_type == AXON_DEV_QPT_RC) ? RESP_ERR_INV_REQ : RESP_DROP;
    }
    /* with immediate: the receive WQE must be there before anything is written */
    if ((flags & SOFTIB_OPF_RECV) && !qp->resp.have_wqe) {
        uint32_t offset = qp->resp.offset;

        if ((st = softib_resp_get_wqe(dev, qp, 0)) != RESP_OK) {
            return st;
        }
        qp->resp.offset = offset;
    }
    if ((uint64_t)qp->resp.offset + pkt->paylen > qp->resp.write_len) {
        return RESP_ERR_INV_REQ;
    }
    va = qp->resp.va + qp->resp.offset;
    if (pkt->paylen &&
        (softib_mem_access(dev, qp->super.pd, qp->resp.rkey, va, (void *)pkt->payload,
                           pkt->paylen, AXON_DEV_ACCESS_REMOTE_WRITE, SOFTIB_MEM_WRITE,
                           0) != SOFTIB_ACCESS_OK)) {
        return softib_resp_write_denied(dev, qp, flags);   /* deregistered (or invalidated)
                                                             * meanwhile */
    }
    qp->resp.offset += pkt->paylen;
    if (flags & SOFTIB_OPF_LAST) {
        qp->resp.in_msg = 0;
        if (flags & SOFTIB_OPF_COMP) {
            softib_resp_complete(qp, pkt, AXON_DEV_WC_RECV_RDMA_WITH_IMM, qp->resp.write_len, 0);
        }
    }
    return RESP_OK;
}

/* Take a responder resource for a read or atomic; NULL when all are in use */
static softib_resp_res_t *softib_resp_res_new(softib_qp_t *qp, uint32_t psn, int atomic,
                                              int dup)
{
    softib_resp_res_t *res;

    if (qp->resp.rd_tail - qp->resp.rd_head >= SOFTIB_MAX_RD_ATOM) {
        return NULL;
    }
    res         = &qp->resp.rdq[qp->resp.rd_tail++ % SOFTIB_MAX_RD_ATOM];
    res->atomic = atomic;
    res->dup    = dup;
    res->first  = 1;
    res->psn    = psn;
    res->rkey   = 0;
    res->left   = 0;
    res->va     = 0;
    memset(&res->orig, 0, sizeof(res->orig));
    return res;
}

/*
 * The reads and atomics the requester has outstanding, as far as the
 * responder knows: those whose answers have not all left. A duplicate's
 * answers do not count: the requester counts its request once, and as
 * answers leave in order, the first execution's have left before the
 * requester could see the request done and send the next one. So a
 * requester within max_dest_rd_atomic never exceeds this.
 */
static unsigned softib_resp_rd_outstanding(const softib_qp_t *qp)
{
    unsigned idx, n = 0;

    for (idx = qp->resp.rd_head; idx != qp->resp.rd_tail; idx++) {
        n += !qp->resp.rdq[idx % SOFTIB_MAX_RD_ATOM].dup;
    }
    return n;
}

static softib_resp_status_t softib_resp_read(softib_dev_t *dev, softib_qp_t *qp,
                                             const softib_pkt_t *pkt, int dup)
{
    softib_resp_res_t *res;

    if (!(qp->attr.qp_access_flags & AXON_DEV_ACCESS_REMOTE_READ)) {
        axon_debug("softib: QP 0x%x: RDMA READ, but the QP does not allow remote read",
                   qp->super.qp_num);
        return RESP_ERR_INV_REQ;
    }
    /* IB: the R_Key is not checked for a zero-length read (nothing is accessed) */
    if ((pkt->reth.len != 0) &&
        (softib_mr_check(dev, qp->super.pd, pkt->reth.rkey, pkt->reth.va, pkt->reth.len,
                         AXON_DEV_ACCESS_REMOTE_READ) != SOFTIB_ACCESS_OK)) {
        axon_debug("softib: QP 0x%x: RDMA READ of 0x%llx len %u rkey 0x%x denied",
                   qp->super.qp_num, (unsigned long long)pkt->reth.va, pkt->reth.len,
                   pkt->reth.rkey);
        return RESP_ERR_ACCESS;
    }
    /* responses go out from softib_resp_progress, as the wire takes them */
    res = softib_resp_res_new(qp, pkt->psn, 0, dup);
    if (res == NULL) {
        return RESP_DROP;   /* every resource holds a duplicate's answers: it resends */
    }
    res->va   = pkt->reth.va;
    res->rkey = pkt->reth.rkey;
    res->left = pkt->reth.len;
    return RESP_OK;
}

/*
 * A masked atomic's operands from the payload: the size is one softib does
 * and the payload holds exactly the fields of the operation.
 */
static softib_resp_status_t softib_resp_ext_args(const softib_qp_t *qp, const softib_pkt_t *pkt,
                                                 axon_amo_args_t *args)
{
    int cswap       = (pkt->opcode == SOFTIB_OP_MASKED_CMP_SWAP);
    unsigned log_sz = pkt->ext_atomic.log_sz, words, n = 0;

    if ((log_sz > 5) || !(SOFTIB_AMO_EXT_SIZES & (1u << log_sz))) {
        axon_debug("softib: QP 0x%x: masked atomic of log size %u", qp->super.qp_num, log_sz);
        return RESP_ERR_INV_REQ;
    }
    words = softib_amo_words(1u << log_sz);
    if (pkt->paylen != 8 * words * (cswap ? SOFTIB_EXT_CMP_SWAP_FIELDS
                                          : SOFTIB_EXT_FETCH_ADD_FIELDS)) {
        axon_debug("softib: QP 0x%x: masked atomic with %u bytes of operands", qp->super.qp_num,
                   pkt->paylen);
        return RESP_ERR_INV_REQ;
    }
    memset(args, 0, sizeof(*args));
    args->op    = cswap ? AXON_AMO_MASKED_CSWAP : AXON_AMO_MFADD;
    args->size  = (uint8_t)(1u << log_sz);
    args->fetch = 1;
    softib_pkt_get_words(pkt->payload + 8 * words * n++, args->value, words);
    if (cswap) {
        softib_pkt_get_words(pkt->payload + 8 * words * n++, args->compare, words);
    }
    softib_pkt_get_words(pkt->payload + 8 * words * n++, args->mask, words);
    if (cswap) {
        softib_pkt_get_words(pkt->payload + 8 * words * n++, args->swap_mask, words);
    }
    return RESP_OK;
}

/*
 * Standard and masked atomics: the QP allows them, the operand is naturally
 * aligned (IB: invalid request otherwise), the key grants REMOTE_ATOMIC on
 * every byte (else remote access error); only then is memory touched.
 */
static softib_resp_status_t softib_resp_atomic(softib_dev_t *dev, softib_qp_t *qp,
                                               const softib_pkt_t *pkt,
                                               softib_amo_result_t *orig)
{
    int ext = (pkt->info->hdrs & SOFTIB_HDR_EXTATOMIC) != 0;
    uint64_t va   = ext ? pkt->ext_atomic.va : pkt->atomic.va;
    uint32_t rkey = ext ? pkt->ext_atomic.rkey : pkt->atomic.rkey;
    softib_resp_status_t st;
    axon_amo_args_t args;
    void *target;

    if (!(qp->attr.qp_access_flags & AXON_DEV_ACCESS_REMOTE_ATOMIC)) {
        axon_debug("softib: QP 0x%x: atomic, but the QP does not allow remote atomics",
                   qp->super.qp_num);
        return RESP_ERR_INV_REQ;
    }
    if (ext) {
        if (!(dev->attr.cap_flags & AXON_DEV_CAP_EXT_ATOMIC)) {
            axon_debug("softib: QP 0x%x: masked atomic, but %s has them masked off",
                       qp->super.qp_num, dev->super.name);
            return RESP_ERR_INV_REQ;
        }
        if ((st = softib_resp_ext_args(qp, pkt, &args)) != RESP_OK) {
            return st;
        }
    } else {
        memset(&args, 0, sizeof(args));
        args.op         = (pkt->opcode == SOFTIB_OP_CMP_SWAP) ? AXON_AMO_CSWAP : AXON_AMO_ADD;
        args.size       = 8;
        args.fetch      = 1;
        args.value[0]   = pkt->atomic.swap_add;
        args.compare[0] = pkt->atomic.compare;
    }
    if (va & (args.size - 1)) {
        axon_debug("softib: QP 0x%x: atomic at 0x%llx is not %u-byte aligned", qp->super.qp_num,
                   (unsigned long long)va, args.size);
        return RESP_ERR_REQ_ACCESS;
    }
    if (softib_mem_resolve(dev, qp->super.pd, rkey, va, args.size, AXON_DEV_ACCESS_REMOTE_ATOMIC,
                           0, &target) != SOFTIB_ACCESS_OK) {
        axon_debug("softib: QP 0x%x: %u-byte atomic at 0x%llx rkey 0x%x denied",
                   qp->super.qp_num, args.size, (unsigned long long)va, rkey);
        return RESP_ERR_ACCESS;
    }
    memset(orig, 0, sizeof(*orig));
    orig->ext_size = ext ? args.size : 0;
    softib_amo_exec(&args, target, orig->word);
    return RESP_OK;
}

/* Send the next packet of a responder resource: -1 the wire is full, 1 it is all sent, 0 more */
static int softib_resp_res_send(softib_dev_t *dev, softib_qp_t *qp, softib_resp_res_t *res,
                                uint32_t mtu)
{
    uint32_t paylen = 0;
    const void *pay = NULL;
    softib_pkt_t pkt;
    size_t hlen;
    int last = 1;

    if (res->atomic && res->orig.ext_size) {
        softib_resp_reply_init(&pkt, qp, SOFTIB_OP_MASKED_ATOMIC_ACK, res->psn);
        pkt.aeth.code = SOFTIB_AETH_ACK;
        paylen        = 8 * softib_amo_words(res->orig.ext_size);
    } else if (res->atomic) {
        softib_resp_reply_init(&pkt, qp, SOFTIB_OP_ATOMIC_ACK, res->psn);
        pkt.aeth.code   = SOFTIB_AETH_ACK;
        pkt.atomic_orig = res->orig.word[0];
    } else {
        paylen = (res->left < mtu) ? res->left : mtu;
        last   = (paylen == res->left);
        softib_resp_reply_init(&pkt, qp,
                               (res->first && last) ? SOFTIB_OP_READ_RESP_ONLY :
                               res->first ? SOFTIB_OP_READ_RESP_FIRST :
                               last ? SOFTIB_OP_READ_RESP_LAST : SOFTIB_OP_READ_RESP_MIDDLE,
                               res->psn);
    }
    hlen = softib_pkt_build(dev->tx_buf, &pkt);
    if (res->atomic) {
        softib_pkt_put_words(dev->tx_buf + hlen, res->orig.word, paylen / 8);
    } else if (paylen &&
               ((pay = softib_mem_ptr(dev, qp->super.pd, res->rkey, res->va, paylen,
                                      AXON_DEV_ACCESS_REMOTE_READ)) != NULL)) {
        /* read in place by the wire */
    } else if (paylen &&
               (softib_mem_access(dev, qp->super.pd, res->rkey, res->va, dev->tx_buf + hlen,
                                  paylen, AXON_DEV_ACCESS_REMOTE_READ, SOFTIB_MEM_READ,
                                  0) != SOFTIB_ACCESS_OK)) {
        return 1;   /* deregistered (or invalidated) meanwhile: the requester times out */
    }
    if (softib_send_pkt_pay(dev, qp, &qp->attr.ah_attr.grh.dgid, qp->attr.dest_qp_num, hlen,
                            pay, paylen)) {
        return -1;
    }
    if (res->atomic) {
        paylen = 0;   /* the result, not read data */
    }
    res->va   += paylen;
    res->left -= paylen;
    res->psn   = softib_psn_add(res->psn, 1);
    res->first = 0;
    return last;
}

void softib_resp_progress(softib_qp_t *qp)
{
    softib_dev_t *dev = softib_qp_dev(qp);
    uint32_t mtu      = softib_resp_mtu(qp);
    unsigned budget   = 64;
    int ret;

    while (softib_resp_busy(qp) && (budget-- > 0)) {
        if (!softib_qp_can_recv(qp)) {
            qp->resp.rd_head = qp->resp.rd_tail;
            break;
        }
        ret = softib_resp_res_send(dev, qp, &qp->resp.rdq[qp->resp.rd_head % SOFTIB_MAX_RD_ATOM],
                                   mtu);
        if (ret < 0) {
            softib_qp_timer(qp, axon_sys_time_ns() + 50000);
            break;   /* wire full: continue on the next pass */
        }
        qp->resp.rd_head += (unsigned)ret;
    }
}

/* A request failed at the responder: tell the requester (RC), complete, go to ERR */
static void softib_resp_fail(softib_dev_t *dev, softib_qp_t *qp, const softib_pkt_t *pkt,
                             softib_resp_status_t st)
{
    int rc = (qp->super.qp_type == AXON_DEV_QPT_RC);

    switch (st) {
    case RESP_ERR_INV_REQ:
    case RESP_ERR_REQ_ACCESS:
        if (!rc) {
            return;   /* UC/UD: dropped */
        }
        softib_resp_send_aeth(dev, qp, SOFTIB_AETH_NAK_INV_REQ, pkt->psn);
        softib_qp_event(qp, (st == RESP_ERR_INV_REQ) ? AXON_DEV_EVENT_QP_REQ_ERR
                                                     : AXON_DEV_EVENT_QP_ACCESS_ERR);
        break;
    case RESP_ERR_WRITE_IMM_ACCESS:
        softib_qp_complete_recv(qp, qp->resp.wqe.wr_id, AXON_DEV_WC_LOC_ACCESS_ERR,
                                AXON_DEV_WC_RECV_RDMA_WITH_IMM, 0, 0, 0, 0, 0, 0);
        qp->resp.have_wqe = 0;
        /* the requester and this QP see an access error */
        /* fall through */
    case RESP_ERR_ACCESS:
        if (!rc) {
            qp->resp.in_msg = 0;
            return;
        }
        softib_resp_send_aeth(dev, qp, SOFTIB_AETH_NAK_ACCESS, pkt->psn);
        softib_qp_event(qp, AXON_DEV_EVENT_QP_ACCESS_ERR);
        break;
    case RESP_ERR_RECV_LEN:
    case RESP_ERR_RECV_PROT:
        softib_qp_complete_recv(qp, qp->resp.wqe.wr_id,
                                (st == RESP_ERR_RECV_LEN) ? AXON_DEV_WC_LOC_LEN_ERR
                                                          : AXON_DEV_WC_LOC_PROT_ERR,
                                AXON_DEV_WC_RECV, qp->resp.offset, 0, 0, 0, 0, 0);
        qp->resp.have_wqe = 0;
        if (rc) {
            softib_resp_send_aeth(dev, qp, (st == RESP_ERR_RECV_LEN) ? SOFTIB_AETH_NAK_INV_REQ
                                                                     : SOFTIB_AETH_NAK_OP,
                                  pkt->psn);
        }
        break;
    default:
        return;
    }
    softib_qp_error(qp);
}

static void softib_resp_duplicate(softib_dev_t *dev, softib_qp_t *qp, const softib_pkt_t *pkt)
{
    unsigned i;

    if (pkt->opcode == SOFTIB_OP_READ_REQ) {
        /* executed again (reads have no side effect), from what the request asks now;
         * its responses queue behind those already due (no resource left: dropped) */
        if ((softib_resp_read(dev, qp, pkt, 1) == RESP_OK)) {
            softib_resp_progress(qp);
        }
        return;
    }
    if (pkt->info->flags & SOFTIB_OPF_ATOMIC) {
        for (i = 0; i < SOFTIB_MAX_RD_ATOM; i++) {
            if (qp->resp.atomics[i].valid && (qp->resp.atomics[i].psn == pkt->psn)) {
                softib_resp_res_t *res = softib_resp_res_new(qp, pkt->psn, 1, 1);

                if (res != NULL) {
                    res->orig = qp->resp.atomics[i].orig;   /* replayed, not executed again */
                    softib_resp_progress(qp);
                }
                return;
            }
        }
        return;   /* too old to remember: its answer arrived long ago */
    }
    softib_resp_queue_ack(dev, qp, softib_psn_add(qp->resp.psn, SOFTIB_PSN_MASK));
}

static void softib_resp_rc(softib_dev_t *dev, softib_qp_t *qp, const softib_pkt_t *pkt)
{
    unsigned flags = pkt->info->flags;
    int32_t diff   = softib_psn_diff(pkt->psn, qp->resp.psn);
    softib_resp_status_t st;
    uint32_t npkts = 1, mtu;
    softib_amo_result_t orig = {{0}, 0};

    if (diff > 0) {
        if (!qp->resp.nak_sent) {
            qp->resp.nak_sent = 1;
            softib_resp_send_aeth(dev, qp, SOFTIB_AETH_NAK_SEQ, qp->resp.psn);
        }
        return;
    }
    if (diff < 0) {
        softib_resp_duplicate(dev, qp, pkt);
        return;
    }
    if (flags & (SOFTIB_OPF_READ | SOFTIB_OPF_ATOMIC)) {
        /* Seed §7.1.4: too many reads or atomics is the requester's error */
        if (softib_resp_rd_outstanding(qp) >= qp->attr.max_dest_rd_atomic) {
            axon_debug("softib: QP 0x%x: PSN 0x%x: a read or atomic over max_dest_rd_atomic "
                       "%u", qp->super.qp_num, pkt->psn, qp->attr.max_dest_rd_atomic);
            softib_resp_fail(dev, qp, pkt, RESP_ERR_REQ_ACCESS);
            return;
        }
        if (qp->resp.rd_tail - qp->resp.rd_head >= SOFTIB_MAX_RD_ATOM) {
            softib_resp_progress(qp);
            if (qp->resp.rd_tail - qp->resp.rd_head >= SOFTIB_MAX_RD_ATOM) {
                return;   /* duplicates' answers hold the resources: the requester resends */
            }
        }
    }
    if (flags & SOFTIB_OPF_SEND) {
        st = softib_resp_send(dev, qp, pkt);
    } else if (flags & SOFTIB_OPF_WRITE) {
        st = softib_resp_write(dev, qp, pkt);
    } else if (flags & SOFTIB_OPF_READ) {
        st = softib_resp_read(dev, qp, pkt, 0);
        mtu   = softib_resp_mtu(qp);
        npkts = pkt->reth.len ? (pkt->reth.len + mtu - 1) / mtu : 1;
    } else {
        st = softib_resp_atomic(dev, qp, pkt, &orig);
    }
    if (st == RESP_RNR) {
        axon_debug("softib: QP 0x%x: no receive WQE for PSN 0x%x: RNR NAK", qp->super.qp_num,
                   pkt->psn);
        softib_resp_send_aeth(dev, qp, SOFTIB_AETH_RNR_NAK, pkt->psn);
        return;
    }
    if (st != RESP_OK) {
        softib_resp_fail(dev, qp, pkt, st);
        return;
    }
    qp->resp.nak_sent = 0;
    qp->resp.psn      = softib_psn_add(qp->resp.psn, npkts);
    if (flags & SOFTIB_OPF_ATOMIC) {
        softib_atomic_res_t *res = &qp->resp.atomics[qp->resp.atomic_next++ % SOFTIB_MAX_RD_ATOM];

        res->valid = 1;
        res->psn   = pkt->psn;
        res->orig  = orig;
        /* room checked above: the ACK leaves behind the read responses before it */
        softib_resp_res_new(qp, pkt->psn, 1, 0)->orig = orig;
        softib_resp_progress(qp);
    } else if (flags & SOFTIB_OPF_READ) {
        softib_resp_progress(qp);
    } else if (pkt->flags & SOFTIB_BTH_ACKREQ) {
        softib_resp_queue_ack(dev, qp, pkt->psn);
    }
}

static void softib_resp_uc(softib_dev_t *dev, softib_qp_t *qp, const softib_pkt_t *pkt)
{
    unsigned flags = pkt->info->flags;
    softib_resp_status_t st;

    if (pkt->psn != qp->resp.psn) {
        /* packets were lost: the message in progress is gone, its receive WQE stays */
        qp->resp.in_msg = 0;
    }
    qp->resp.psn = softib_psn_add(pkt->psn, 1);
    if (!(flags & SOFTIB_OPF_FIRST) && !qp->resp.in_msg) {
        return;
    }
    st = (flags & SOFTIB_OPF_SEND) ? softib_resp_send(dev, qp, pkt)
                                   : softib_resp_write(dev, qp, pkt);
    if ((st == RESP_RNR) || (st == RESP_DROP)) {
        qp->resp.in_msg = 0;
    } else if (st != RESP_OK) {
        softib_resp_fail(dev, qp, pkt, st);
    }
}

static void softib_resp_ud(softib_dev_t *dev, softib_qp_t *qp, const softib_pkt_t *pkt,
                           const axon_dev_gid_t *src_gid)
{
    uint8_t grh[SOFTIB_GRH_LEN];
    softib_resp_status_t st;
    uint16_t paylen;

    if (pkt->deth.qkey != qp->attr.qkey) {
        dev->qkey_viol++;
        axon_debug("softib: QP 0x%x: Q_Key 0x%x does not match 0x%x: dropped", qp->super.qp_num,
                   pkt->deth.qkey, qp->attr.qkey);
        return;
    }
    if ((st = softib_resp_get_wqe(dev, qp, 1)) == RESP_RNR) {
        return;   /* unreliable: no receive, no message */
    }
    if (st == RESP_OK) {
        /* The GRH area: an IPv6-style header with the source and destination GIDs */
        memset(grh, 0, sizeof(grh));
        grh[0] = 0x60;
        paylen = htons((uint16_t)pkt->paylen);
        memcpy(&grh[4], &paylen, sizeof(paylen));
        grh[6] = 0x1b;
        grh[7] = 64;
        memcpy(&grh[8], src_gid->raw, 16);
        /* a multicast packet's destination is its group (§4.6.13) */
        memcpy(&grh[24], (pkt->flags & SOFTIB_BTH_MCAST) ? pkt->mgid.raw : dev->gid.raw, 16);
        if ((st = softib_resp_recv_data(dev, qp, grh, sizeof(grh))) == RESP_OK) {
            st = softib_resp_recv_data(dev, qp, pkt->payload, pkt->paylen);
        }
    }
    if (st != RESP_OK) {
        softib_resp_fail(dev, qp, pkt, st);
        return;
    }
    softib_resp_complete(qp, pkt, AXON_DEV_WC_RECV, qp->resp.offset, 1);
}

void softib_resp_rx(softib_dev_t *dev, softib_qp_t *qp, const softib_pkt_t *pkt,
                    const axon_dev_gid_t *src_gid)
{
    if (!softib_qp_can_recv(qp) ||
        !(pkt->info->qp_types & SOFTIB_QPT_BIT(qp->super.qp_type))) {
        return;
    }
    if ((qp->super.qp_type != AXON_DEV_QPT_UD) && (pkt->src_qpn != qp->attr.dest_qp_num)) {
        return;   /* not our peer */
    }
    if (!qp->resp.comm_est && (qp->super.state == AXON_DEV_QPS_RTR)) {
        qp->resp.comm_est = 1;
        softib_qp_event(qp, AXON_DEV_EVENT_COMM_EST);
    }
    switch (qp->super.qp_type) {
    case AXON_DEV_QPT_RC:
        softib_resp_rc(dev, qp, pkt);
        break;
    case AXON_DEV_QPT_UC:
        softib_resp_uc(dev, qp, pkt);
        break;
    default:
        softib_resp_ud(dev, qp, pkt, src_gid);
        break;
    }
}
