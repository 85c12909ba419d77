/*
 * The Dynamically Connected transport (seed §8.6.1): DC initiators (DCIs)
 * and DC targets (DCTs), on the RC engine.
 *
 * A DCI is an RC requester whose peer changes. Each WQE names a target (AH
 * GID, DCT number, key); when a WQE for another target starts, it waits
 * until every WQE before it completed (all acknowledged), then connects.
 * With nothing outstanding for SOFTIB_DC_IDLE_NS the DCI disconnects: one
 * DC_DISCONNECT, resent on the DCI's ack timeout (retry_cnt times) until the
 * target confirms it. A
 * connection is named by the PSN of its first packet (conn_psn, in the DCETH
 * of every packet); PSNs run on across connections and across the DCI's
 * resets, so a target always sees a later connection of an initiator as
 * newer. There is no handshake: the first packet opens the connection.
 *
 * A DCT is a QP number (its anchor QP in the device table, which routes
 * packets here) and at most AXON_SOFTIB_DC_MAX_DCR responder contexts
 * (made as initiators first arrive), each an RC responder (softib_resp.c)
 * towards one initiator, found by its QPN and GID through a hash. A request with the wrong key is dropped, as a UD Q_Key mismatch is
 * (§8.6.1.7), counted and, if the DCT is armed, reported once
 * (DCT_KEY_VIOLATION); its initiator sees no answer and fails with
 * RETRY_EXC_ERR. The first packet of a newer connection (re)opens the
 * initiator's context; other packets of an unknown connection are stale (or
 * follow a lost first packet, which the initiator resends) and dropped; with
 * every context open, a new initiator gets an RNR NAK and retries with its
 * RNR count. A closed context keeps its connection's name until the slot is
 * needed, so late duplicates of a finished connection are recognized.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "log.h"
#include "softib_pkt.h"

/* destroy_dct waits at most this long for connected initiators to disconnect */
#define SOFTIB_DC_DRAIN_NS 200000000ull
/* A DCI without an ack timeout (timeout 0) still resends a lost DISCONNECT after this */
#define SOFTIB_DC_DISC_NS  10000000ull
/* A drained DCI stays connected this long: the next message to the same target costs no
 * reconnection (a responder context reopened, a DISCONNECT and its answer) */
#define SOFTIB_DC_IDLE_NS  100000ull

/* A responder context: one initiator's connection */
typedef struct softib_dcr {
    softib_qp_t    qp;           /* RC responder; its peer QPN is qp.attr.dest_qp_num */
    axon_dev_gid_t src_gid;
    uint64_t       src_gen;      /* the initiator's process (softib_wire_owner_gen), 0: unknown */
    uint32_t       conn_psn;
    int            open;
    int            hashed;       /* on dct->hash under (dest_qp_num, src_gid) */
    unsigned       closed_seq;   /* a closed slot is reused oldest first */
    struct softib_dcr *hash_next;
} softib_dcr_t;

typedef struct softib_dct {
    axon_dev_dct_t           super;
    softib_qp_t              anchor;     /* holds dct_num in the device's QP table */
    axon_dev_dct_init_attr_t init;
    axon_dev_dct_state_t     state;
    int                      armed;
    uint32_t                 key_violations;
    unsigned                 close_seq;
    unsigned                 num_open;
    unsigned                 max_dcr;    /* AXON_SOFTIB_DC_MAX_DCR when created */
    unsigned                 num_dcr;    /* made so far, in dcr[] */
    unsigned                 dcr_cap;    /* dcr[]'s room and hash[]'s buckets (power of 2):
                                          * grow with the initiators seen */
    softib_dcr_t           **dcr;
    softib_dcr_t           **hash;       /* (initiator QPN, GID) -> context */
} softib_dct_t;

void softib_dc_caps(axon_dev_attr_t *attr, unsigned max_dcr)
{
    attr->dc.max_dci            = SOFTIB_QPN_MAX_INDEX;
    attr->dc.max_dct            = SOFTIB_QPN_MAX_INDEX;
    attr->dc.max_dc_req_rd_atom = SOFTIB_MAX_RD_ATOM;
    attr->dc.max_dc_res_rd_atom = SOFTIB_MAX_RD_ATOM;
    attr->dc.max_dcr            = max_dcr;
}

/* ------------------------------------------------------------ initiator */

int softib_dc_check(softib_qp_t *qp, const axon_dev_send_wr_t *wr)
{
    if (wr->dc.ah == NULL) {
        axon_error("softib: post_send: DCI 0x%x: WR 0x%llx names no target (wr->dc.ah NULL)",
                   qp->super.qp_num, (unsigned long long)wr->wr_id);
        return EINVAL;
    }
    if (wr->dc.ah->context != qp->super.context) {
        axon_error("softib: post_send: DCI 0x%x: the AH belongs to another device",
                   qp->super.qp_num);
        return EINVAL;
    }
    if ((wr->dc.dct_number == 0) || (wr->dc.dct_number > SOFTIB_PSN_MASK)) {
        axon_error("softib: post_send: DCI 0x%x: DCT number 0x%x (1..0xffffff)",
                   qp->super.qp_num, wr->dc.dct_number);
        return EINVAL;
    }
    return 0;
}

void softib_dc_copy(softib_send_wqe_t *wqe, const axon_dev_send_wr_t *wr)
{
    wqe->dgid       = ((const softib_ah_t *)wr->dc.ah)->attr.grh.dgid;
    wqe->remote_qpn = wr->dc.dct_number;
    wqe->dc_key     = wr->dc.dct_access_key;
}

void softib_dc_pkt(const softib_qp_t *qp, softib_pkt_t *pkt)
{
    pkt->flags         |= SOFTIB_BTH_DC;
    pkt->dceth.key      = qp->dc.key;
    pkt->dceth.conn_psn = qp->dc.conn_psn;
    pkt->dceth.mtu      = (uint8_t)qp->attr.path_mtu;
}

static void softib_dc_send_disc(softib_qp_t *qp)
{
    softib_dev_t *dev = softib_qp_dev(qp);
    uint64_t tmo      = softib_ack_timeout_ns(qp);
    softib_pkt_t pkt;
    size_t len;

    memset(&pkt, 0, sizeof(pkt));
    pkt.opcode         = SOFTIB_OP_DC_DISCONNECT;
    pkt.flags          = SOFTIB_BTH_DC;
    pkt.dest_qpn       = qp->dc.disc_dct;
    pkt.src_qpn        = qp->super.qp_num;
    pkt.psn            = qp->dc.disc_psn;
    pkt.dceth.key      = qp->dc.disc_key;
    pkt.dceth.conn_psn = qp->dc.disc_psn;
    pkt.dceth.mtu      = (uint8_t)qp->attr.path_mtu;
    len = softib_pkt_build(dev->tx_buf, &pkt);
    softib_send_pkt(dev, qp, &qp->dc.disc_dgid, qp->dc.disc_dct, len);  /* full wire: resent */
    qp->dc.disc_deadline = axon_sys_time_ns() + (tmo ? tmo : SOFTIB_DC_DISC_NS);
    softib_qp_timer(qp, qp->dc.disc_deadline);
}

/* End the current connection; 0 if the previous disconnect is still unconfirmed */
static int softib_dc_disconnect(softib_qp_t *qp)
{
    if (qp->dc.disc_pending) {
        return 0;
    }
    axon_trace("softib: DCI 0x%x disconnects from DCT 0x%x (connection 0x%x)", qp->super.qp_num,
               qp->attr.dest_qp_num, qp->dc.conn_psn);
    qp->dc.connected     = 0;
    qp->dc.idle_deadline = 0;
    qp->dc.disc_pending  = 1;
    qp->dc.disc_dgid    = qp->dc.dgid;
    qp->dc.disc_dct     = qp->attr.dest_qp_num;
    qp->dc.disc_key     = qp->dc.key;
    qp->dc.disc_psn     = qp->dc.conn_psn;
    qp->dc.disc_left    = qp->attr.retry_cnt;
    softib_dc_send_disc(qp);
    return 1;
}

int softib_dc_req_target(softib_qp_t *qp, const softib_send_wqe_t *wqe)
{
    if (qp->dc.connected && (qp->attr.dest_qp_num == wqe->remote_qpn) &&
        (qp->dc.key == wqe->dc_key) && !memcmp(&qp->dc.dgid, &wqe->dgid, sizeof(wqe->dgid))) {
        qp->dc.idle_deadline = 0;
        return 0;
    }
    if (qp->sq_head != qp->sq_req) {
        return 1;   /* the previous target still owes acknowledgements */
    }
    if (qp->dc.connected && !softib_dc_disconnect(qp)) {
        return 1;
    }
    qp->dc.connected     = 1;
    qp->dc.dgid          = wqe->dgid;
    qp->dc.key           = wqe->dc_key;
    qp->dc.conn_psn      = qp->req.psn;
    qp->attr.dest_qp_num = wqe->remote_qpn;
    axon_trace("softib: DCI 0x%x connects to DCT 0x%x (connection 0x%x)", qp->super.qp_num,
               wqe->remote_qpn, qp->dc.conn_psn);
    return 0;
}

void softib_dc_req_idle(softib_qp_t *qp)
{
    if (qp->dc.connected && (qp->sq_head == qp->sq_tail) && !qp->dc.idle_deadline) {
        qp->dc.idle_deadline = axon_sys_time_ns() + SOFTIB_DC_IDLE_NS;
        softib_qp_timer(qp, qp->dc.idle_deadline);
    }
}

void softib_dc_timers(softib_qp_t *qp, uint64_t now)
{
    if (qp->dc.idle_deadline && (now >= qp->dc.idle_deadline)) {
        qp->dc.idle_deadline = 0;
        if ((qp->sq_head == qp->sq_tail) && !softib_dc_disconnect(qp)) {
            softib_dc_req_idle(qp);   /* the last disconnect is unconfirmed: later */
        }
    }
    if (!qp->dc.disc_pending || (now < qp->dc.disc_deadline)) {
        return;
    }
    if (qp->dc.disc_left == 0) {
        axon_debug("softib: DCI 0x%x: DCT 0x%x never confirmed the disconnect", qp->super.qp_num,
                   qp->dc.disc_dct);
        qp->dc.disc_pending  = 0;
        qp->dc.disc_deadline = 0;
        return;
    }
    qp->dc.disc_left--;
    softib_dc_send_disc(qp);
}

void softib_dc_disc_acked(softib_qp_t *qp, const softib_pkt_t *pkt)
{
    if ((qp->super.qp_type == AXON_DEV_QPT_DC_INI) && qp->dc.disc_pending &&
        (pkt->psn == qp->dc.disc_psn) && (pkt->src_qpn == qp->dc.disc_dct)) {
        qp->dc.disc_pending  = 0;
        qp->dc.disc_deadline = 0;
    }
}

/* A DCI in error: its target may drop the connection now (best effort, resent on the timer) */
void softib_dc_error(softib_qp_t *qp)
{
    if (qp->dc.connected) {
        qp->dc.disc_pending = 0;
        softib_dc_disconnect(qp);
    }
}

/* Reset or destroyed: one DISCONNECT (nothing resends it), the PSNs retired */
void softib_dc_leave(softib_qp_t *qp)
{
    softib_dev_t *dev = softib_qp_dev(qp);

    softib_dc_error(qp);
    if (softib_psn_diff(qp->req.max_psn, dev->dc_psn) >= 0) {
        dev->dc_psn = softib_psn_add(qp->req.max_psn, 1);
    }
}

void softib_dc_start(softib_qp_t *qp)
{
    softib_dev_t *dev = softib_qp_dev(qp);

    qp->req.psn = qp->req.max_psn = qp->comp.psn = dev->dc_psn;
}

/* ------------------------------------------------------------ target */

void softib_dc_event(softib_qp_t *qp, axon_dev_event_type_t type)
{
    /* what a responder context reports is the DCT's; the rest concerns the initiator */
    if (type == AXON_DEV_EVENT_QP_REQ_ERR) {
        type = AXON_DEV_EVENT_DCT_REQ_ERR;
    } else if (type == AXON_DEV_EVENT_QP_ACCESS_ERR) {
        type = AXON_DEV_EVENT_DCT_ACCESS_ERR;
    } else {
        return;
    }
    softib_async_event(softib_qp_dev(qp), type, &qp->dct->super);
}

static inline softib_dcr_t **softib_dcr_bucket(softib_dct_t *dct, uint32_t qpn)
{
    return &dct->hash[(qpn ^ (qpn >> 8) ^ (qpn >> 16)) & (dct->dcr_cap - 1)];
}

static softib_dcr_t *softib_dcr_find(softib_dct_t *dct, const axon_dev_gid_t *gid, uint32_t qpn)
{
    softib_dcr_t *dcr;

    if (dct->dcr_cap == 0) {
        return NULL;
    }
    for (dcr = *softib_dcr_bucket(dct, qpn); dcr != NULL; dcr = dcr->hash_next) {
        if ((dcr->qp.attr.dest_qp_num == qpn) && !memcmp(&dcr->src_gid, gid, sizeof(*gid))) {
            return dcr;
        }
    }
    return NULL;
}

static void softib_dcr_unhash(softib_dct_t *dct, softib_dcr_t *dcr)
{
    softib_dcr_t **pp = softib_dcr_bucket(dct, dcr->qp.attr.dest_qp_num);

    while (*pp != dcr) {
        pp = &(*pp)->hash_next;
    }
    *pp         = dcr->hash_next;
    dcr->hashed = 0;
}

/* A slot for a new initiator: a new one, else the one closed longest ago; NULL if all are open */
static void softib_dcr_hash(softib_dct_t *dct, softib_dcr_t *dcr)
{
    softib_dcr_t **bucket = softib_dcr_bucket(dct, dcr->qp.attr.dest_qp_num);

    dcr->hash_next = *bucket;
    *bucket        = dcr;
    dcr->hashed    = 1;
}

/* Room for twice the contexts, and as many buckets (the hash rebuilt) */
static int softib_dcr_grow(softib_dct_t *dct)
{
    unsigned cap = dct->dcr_cap ? 2 * dct->dcr_cap : 4, i;
    softib_dcr_t **dcr  = realloc(dct->dcr, cap * sizeof(*dcr));
    softib_dcr_t **hash = calloc(cap, sizeof(*hash));

    if ((dcr == NULL) || (hash == NULL)) {
        axon_error("softib: DCT 0x%x: no memory for %u responder contexts", dct->super.dct_num,
                   cap);
        free(hash);
        if (dcr != NULL) {
            dct->dcr = dcr;
        }
        return ENOMEM;
    }
    free(dct->hash);
    dct->dcr     = dcr;
    dct->hash    = hash;
    dct->dcr_cap = cap;
    for (i = 0; i < dct->num_dcr; i++) {
        if (dct->dcr[i]->hashed) {
            softib_dcr_hash(dct, dct->dcr[i]);
        }
    }
    return 0;
}

static softib_dcr_t *softib_dcr_take(softib_dct_t *dct)
{
    softib_dcr_t *best = NULL, *dcr;
    unsigned i;

    if (dct->num_dcr < dct->max_dcr) {
        if ((dct->num_dcr == dct->dcr_cap) && softib_dcr_grow(dct)) {
            return NULL;
        }
        if ((dcr = calloc(1, sizeof(*dcr))) == NULL) {
            axon_error("softib: DCT 0x%x: no memory for a responder context",
                       dct->super.dct_num);
            return NULL;
        }
        dcr->qp.super.context = dct->super.context;
        dcr->qp.super.pd      = dct->super.pd;
        dcr->qp.super.send_cq = dcr->qp.super.recv_cq = dct->super.cq;
        dcr->qp.super.srq     = dct->super.srq;
        dcr->qp.super.qp_num  = dct->super.dct_num;
        dcr->qp.super.qp_type = AXON_DEV_QPT_RC;
        dcr->qp.super.state   = AXON_DEV_QPS_RESET;
        dcr->qp.dct           = dct;
        axon_list_init(&dcr->qp.ack_link);
        return dct->dcr[dct->num_dcr++] = dcr;
    }
    if (dct->num_open == dct->num_dcr) {
        return NULL;
    }
    for (i = 0; i < dct->num_dcr; i++) {
        if (!dct->dcr[i]->open && ((best == NULL) || (dct->dcr[i]->closed_seq < best->closed_seq))) {
            best = dct->dcr[i];
        }
    }
    softib_dcr_unhash(dct, best);   /* it forgets its last initiator */
    return best;
}

static void softib_dcr_close(softib_dct_t *dct, softib_dcr_t *dcr)
{
    softib_qp_flush(&dcr->qp);   /* a receive taken by an unfinished message completes flushed */
    if (dcr->qp.ack_queued) {
        axon_list_del(&dcr->qp.ack_link);
        dcr->qp.ack_queued = 0;
    }
    dcr->qp.super.state = AXON_DEV_QPS_RESET;
    dcr->open           = 0;
    dct->num_open--;
    dcr->closed_seq     = ++dct->close_seq;
}

static void softib_dcr_open(softib_dev_t *dev, softib_dct_t *dct, softib_dcr_t *dcr,
                            const softib_pkt_t *pkt, const axon_dev_gid_t *src_gid)
{
    softib_qp_t *qp = &dcr->qp;
    unsigned mtu    = pkt->dceth.mtu;

    if (dcr->open) {
        softib_dcr_close(dct, dcr);   /* its last connection was never disconnected */
    }
    memset(&qp->resp, 0, sizeof(qp->resp));
    memset(&qp->attr, 0, sizeof(qp->attr));
    qp->attr.dest_qp_num        = pkt->src_qpn;
    qp->attr.ah_attr.grh.dgid   = *src_gid;
    /* read responses follow the initiator's MTU, as its completer expects */
    qp->attr.path_mtu           = ((mtu >= AXON_DEV_MTU_256) && (mtu <= dev->mtu)) ?
                                  (axon_dev_mtu_t)mtu : dct->init.mtu;
    qp->attr.qp_access_flags    = dct->init.access_flags;
    qp->attr.min_rnr_timer      = dct->init.min_rnr_timer;
    qp->attr.max_dest_rd_atomic = SOFTIB_MAX_RD_ATOM;
    qp->resp.psn                = pkt->dceth.conn_psn;
    qp->resp.ack_psn            = softib_psn_add(pkt->dceth.conn_psn, SOFTIB_PSN_MASK);
    qp->resp.comm_est           = 1;
    qp->super.state             = AXON_DEV_QPS_RTS;
    dcr->src_gid                = *src_gid;
    dcr->src_gen                = softib_wire_owner_gen(dev->wire, src_gid, pkt->src_qpn);
    dcr->conn_psn               = pkt->dceth.conn_psn;
    dcr->open                   = 1;
    dct->num_open++;
    if (!dcr->hashed) {
        softib_dcr_hash(dct, dcr);
    }
}

/*
 * An initiator's QP number now belongs to another process (its owner died and
 * the slot went to a new one, whose PSNs start over): its first packet opens a
 * new connection, not a stale one of the old owner's. Asked only of first
 * packets that look stale.
 */
static int softib_dcr_new_owner(softib_dev_t *dev, const softib_dcr_t *dcr,
                                const axon_dev_gid_t *src_gid)
{
    uint64_t gen = softib_wire_owner_gen(dev->wire, src_gid, dcr->qp.attr.dest_qp_num);

    return (gen != 0) && (dcr->src_gen != 0) && (gen != dcr->src_gen);
}

/* An answer without a responder context: DISCONNECT_ACK, or an RNR NAK */
static void softib_dc_reply(softib_dev_t *dev, softib_dct_t *dct, const softib_pkt_t *req,
                            const axon_dev_gid_t *src_gid, softib_opcode_t opcode)
{
    softib_pkt_t pkt;
    size_t len;

    memset(&pkt, 0, sizeof(pkt));
    pkt.opcode         = opcode;
    pkt.dest_qpn       = req->src_qpn;
    pkt.src_qpn        = dct->super.dct_num;
    pkt.psn            = req->psn;
    pkt.aeth.code      = SOFTIB_AETH_RNR_NAK;
    pkt.aeth.rnr_timer = dct->init.min_rnr_timer;
    len = softib_pkt_build(dev->tx_buf, &pkt);
    softib_send_pkt(dev, &dct->anchor, src_gid, req->src_qpn, len);
}

void softib_dc_rx(softib_dev_t *dev, softib_dct_t *dct, const softib_pkt_t *pkt,
                  const axon_dev_gid_t *src_gid)
{
    uint32_t conn = pkt->dceth.conn_psn;
    softib_dcr_t *dcr;

    if (!(pkt->flags & SOFTIB_BTH_DC) || !(pkt->info->flags & SOFTIB_OPF_REQUEST)) {
        return;   /* only DC initiators talk to a DCT */
    }
    if (pkt->dceth.key != dct->init.dc_key) {
        dct->key_violations++;
        axon_debug("softib: DCT 0x%x: DC key 0x%llx from QP 0x%x does not match: dropped",
                   dct->super.dct_num, (unsigned long long)pkt->dceth.key, pkt->src_qpn);
        if (dct->armed) {
            dct->armed = 0;   /* "FIRED" until armed again */
            softib_async_event(dev, AXON_DEV_EVENT_DCT_KEY_VIOLATION, &dct->super);
        }
        return;
    }
    dcr = softib_dcr_find(dct, src_gid, pkt->src_qpn);
    if (pkt->opcode == SOFTIB_OP_DC_DISCONNECT) {
        if ((dcr != NULL) && dcr->open && (dcr->conn_psn == conn)) {
            softib_dcr_close(dct, dcr);
        }
        softib_dc_reply(dev, dct, pkt, src_gid, SOFTIB_OP_DC_DISCONNECT_ACK);
        return;
    }
    if ((dcr == NULL) || !dcr->open || (dcr->conn_psn != conn)) {
        if ((pkt->psn != conn) || (dct->state != AXON_DEV_DCT_STATE_ACTIVE) ||
            ((dcr != NULL) && (softib_psn_diff(conn, dcr->conn_psn) <= 0) &&
             !softib_dcr_new_owner(dev, dcr, src_gid))) {
            return;   /* stale, after a lost first packet, or the DCT is going away */
        }
        if ((dcr == NULL) && ((dcr = softib_dcr_take(dct)) == NULL)) {
            axon_debug("softib: DCT 0x%x: all %u responder contexts busy: RNR NAK to QP 0x%x",
                       dct->super.dct_num, dct->max_dcr, pkt->src_qpn);
            softib_dc_reply(dev, dct, pkt, src_gid, SOFTIB_OP_ACK);
            return;
        }
        softib_dcr_open(dev, dct, dcr, pkt, src_gid);
    }
    softib_qp_activate(&dcr->qp);   /* read responses may be due */
    softib_resp_rx(dev, &dcr->qp, pkt, src_gid);
}

/* ------------------------------------------------------------ DCT objects */

static int softib_dct_attr_check(softib_dev_t *dev, const axon_dev_dct_init_attr_t *a)
{
    const uint32_t access = AXON_DEV_ACCESS_LOCAL_WRITE | AXON_DEV_ACCESS_REMOTE_WRITE |
                            AXON_DEV_ACCESS_REMOTE_READ | AXON_DEV_ACCESS_REMOTE_ATOMIC;
    axon_dev_context_t *ctx = &dev->super;

#define CHECK(_cond, ...)                                  \
    if (!(_cond)) {                                        \
        axon_error("softib: create_dct: " __VA_ARGS__);    \
        return EINVAL;                                     \
    }
    CHECK((a->pd != NULL) && (a->cq != NULL) && (a->srq != NULL), "pd %p, cq %p, srq %p (all "
          "three needed)", (void *)a->pd, (void *)a->cq, (void *)a->srq);
    CHECK((a->pd->context == ctx) && (a->cq->context == ctx) && (a->srq->context == ctx),
          "the PD, CQ or SRQ belongs to another device than %s", ctx->name);
    CHECK(a->port == SOFTIB_PORT_NUM, "port %u (softib has port 1 only)", a->port);
    CHECK(!(a->access_flags & ~access), "access_flags 0x%x", a->access_flags);
    CHECK((a->mtu >= AXON_DEV_MTU_256) && (a->mtu <= dev->mtu), "mtu %d (port MTU is %d)",
          (int)a->mtu, (int)dev->mtu);
    CHECK(a->min_rnr_timer <= 31, "min_rnr_timer %u (0..31)", a->min_rnr_timer);
    CHECK(a->pkey_index == 0, "pkey_index %u (the table has entry 0 only)", a->pkey_index);
    CHECK(a->gid_index == 0, "gid_index %u (the table has entry 0 only)", a->gid_index);
    CHECK(a->create_flags == 0, "create_flags 0x%x (none defined)", a->create_flags);
#undef CHECK
    return 0;
}

int softib_create_dct(axon_dev_context_t *ctx, axon_dev_dct_init_attr_t *attr,
                      axon_dev_dct_t **dct_p)
{
    softib_dev_t *dev = softib_dev(ctx);
    softib_dct_t *dct;
    int ret;

    if (!(dev->attr.cap_flags & AXON_DEV_CAP_DC)) {
        axon_error("softib: create_dct: DC is masked off on %s", ctx->name);
        return EOPNOTSUPP;
    }
    if ((attr == NULL) || (dct_p == NULL)) {
        axon_error("softib: create_dct: attr %p, dct_p %p", (void *)attr, (void *)dct_p);
        return EINVAL;
    }
    if ((ret = softib_dct_attr_check(dev, attr)) != 0) {
        return ret;
    }
    if ((dct = calloc(1, sizeof(*dct))) == NULL) {
        axon_error("softib: create_dct: no memory");
        return ENOMEM;
    }
    dct->max_dcr                  = dev->opts.dc_max_dcr;
    dct->init                     = *attr;
    dct->state                    = AXON_DEV_DCT_STATE_ACTIVE;
    dct->super.context            = ctx;
    dct->super.pd                 = attr->pd;
    dct->super.cq                 = attr->cq;
    dct->super.srq                = attr->srq;
    dct->super.dct_context        = attr->dct_context;
    dct->anchor.super.context     = ctx;
    dct->anchor.super.pd          = attr->pd;
    dct->anchor.super.qp_type     = AXON_DEV_QPT_RC;
    dct->anchor.dct               = dct;
    axon_list_init(&dct->anchor.ack_link);
    pthread_mutex_lock(&dev->lock);
    if (softib_qpn_alloc(dev, &dct->anchor, "create_dct")) {
        pthread_mutex_unlock(&dev->lock);
        free(dct);
        return ENOMEM;
    }
    dct->super.dct_num = dct->anchor.super.qp_num;
    softib_pd(attr->pd)->refcnt++;
    softib_cq(attr->cq)->refcnt++;
    softib_srq(attr->srq)->refcnt++;
    pthread_mutex_unlock(&dev->lock);
    *dct_p = &dct->super;
    return 0;
}

/*
 * New initiators are refused at once; connected ones have until they
 * disconnect, or SOFTIB_DC_DRAIN_NS, to finish (the DCT keeps answering
 * them meanwhile). After that the DCT number is gone: an initiator still
 * sending gets no answer and fails with RETRY_EXC_ERR.
 */
int softib_destroy_dct(axon_dev_dct_t *adct)
{
    softib_dev_t *dev = softib_dev(adct->context);
    softib_dct_t *dct = (softib_dct_t *)adct;
    uint64_t deadline = axon_sys_time_ns() + SOFTIB_DC_DRAIN_NS;
    softib_dcr_t *dcr;
    unsigned i;

    pthread_mutex_lock(&dev->lock);
    dct->state = AXON_DEV_DCT_STATE_DRAINING;
    while (dct->num_open && (axon_sys_time_ns() < deadline)) {
        softib_progress(dev);
        pthread_mutex_unlock(&dev->lock);
        usleep(50);
        pthread_mutex_lock(&dev->lock);
    }
    if (dct->num_open) {
        axon_debug("softib: DCT 0x%x destroyed with %u initiators still connected",
                   adct->dct_num, dct->num_open);
    }
    dct->state = AXON_DEV_DCT_STATE_DRAINED;
    dev->qps[SOFTIB_QPN_INDEX(adct->dct_num)] = NULL;
    dev->num_qps--;
    for (i = 0; i < dct->num_dcr; i++) {
        dcr = dct->dcr[i];
        if (dcr->open) {
            softib_dcr_close(dct, dcr);
        }
        softib_qp_deactivate(&dcr->qp);
        softib_cq_detach(softib_cq(adct->cq), &dcr->qp);   /* the SRQ slots they hold */
        free(dcr);
    }
    softib_pd(adct->pd)->refcnt--;
    softib_cq(adct->cq)->refcnt--;
    softib_srq(adct->srq)->refcnt--;
    softib_async_forget(dev, adct);
    pthread_mutex_unlock(&dev->lock);
    softib_async_wait_acked(dev, &adct->async_held);
    free(dct->dcr);
    free(dct->hash);
    free(dct);
    return 0;
}

int softib_query_dct(axon_dev_dct_t *adct, axon_dev_dct_attr_t *attr)
{
    softib_dev_t *dev = softib_dev(adct->context);
    softib_dct_t *dct = (softib_dct_t *)adct;
    const axon_dev_dct_init_attr_t *in = &dct->init;

    if (attr == NULL) {
        axon_error("softib: query_dct: DCT 0x%x: NULL attr", adct->dct_num);
        return EINVAL;
    }
    memset(attr, 0, sizeof(*attr));
    pthread_mutex_lock(&dev->lock);
    attr->state          = dct->state;
    attr->key_violations = dct->key_violations;
    pthread_mutex_unlock(&dev->lock);
    attr->pd             = in->pd;
    attr->cq             = in->cq;
    attr->srq            = in->srq;
    attr->dc_key         = in->dc_key;
    attr->port           = in->port;
    attr->access_flags   = in->access_flags;
    attr->min_rnr_timer  = in->min_rnr_timer;
    attr->tclass         = in->tclass;
    attr->flow_label     = in->flow_label;
    attr->mtu            = in->mtu;
    attr->pkey_index     = in->pkey_index;
    attr->gid_index      = in->gid_index;
    attr->hop_limit      = in->hop_limit;
    return 0;
}

int softib_arm_dct(axon_dev_dct_t *adct, uint32_t comp_mask)
{
    softib_dev_t *dev = softib_dev(adct->context);

    if (comp_mask != 0) {
        axon_error("softib: arm_dct: DCT 0x%x: comp_mask 0x%x (must be 0)", adct->dct_num,
                   comp_mask);
        return EINVAL;
    }
    pthread_mutex_lock(&dev->lock);
    ((softib_dct_t *)adct)->armed = 1;
    pthread_mutex_unlock(&dev->lock);
    return 0;
}
