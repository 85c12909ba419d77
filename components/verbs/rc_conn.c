/*
 * rc connections: the handshake over the iface's UD QP (formats and rules in
 * rc_wire.h), connection life (open, goodbye, failure), and the timers that
 * retry handshakes and probe idle peers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rc.h"

/* A handshake buffer: GRH area (receives) or AH pointer (sends), then the message */
#define AXON_RC_HS_MSG_OFFSET 40
#define AXON_RC_HS_BUF_SIZE   (AXON_RC_HS_MSG_OFFSET + sizeof(axon_rc_hs_t))
#define AXON_RC_HS_RX_BUFS    (AXON_RC_HS_BUFS / 2)

/* wr_id bit of handshake receives (buffers are 64-byte aligned) */
#define AXON_RC_HS_WR_RECV    1ull

static const char *const axon_rc_conn_state_names[] = {
    "REQ_SENT", "REP_SENT", "OPEN", "FAILED"
};

/* ------------------------------------------------------------ lookup */

static unsigned axon_rc_qpn_bucket(uint32_t qpn)
{
    return (qpn ^ (qpn >> 8)) & (AXON_RC_QPN_HASH - 1);
}

axon_rc_conn_t *axon_rc_conn_by_qpn(axon_rc_iface_t *iface, uint32_t qpn)
{
    axon_rc_conn_t *conn = iface->qpn_hash[axon_rc_qpn_bucket(qpn)];

    while ((conn != NULL) && (conn->qp->qp_num != qpn)) {
        conn = conn->qpn_next;
    }
    return conn;
}

static void axon_rc_qpn_unhash(axon_rc_iface_t *iface, axon_rc_conn_t *conn)
{
    axon_rc_conn_t **pp = &iface->qpn_hash[axon_rc_qpn_bucket(conn->qp->qp_num)];

    while ((*pp != NULL) && (*pp != conn)) {
        pp = &(*pp)->qpn_next;
    }
    if (*pp != NULL) {
        *pp = conn->qpn_next;
    }
}

/* The findable connection with peer_uuid (not failed, no goodbye of ours), or NULL */
axon_rc_conn_t *axon_rc_conn_by_uuid(axon_rc_iface_t *iface, uint64_t uuid)
{
    axon_rc_conn_t *conn;

    axon_list_for_each(conn, &iface->conns, link) {
        if (conn->peer_uuid == uuid) {
            return conn;
        }
    }
    return NULL;
}

static axon_rc_conn_t *axon_rc_conn_by_id(axon_rc_iface_t *iface, uint32_t conn_id)
{
    axon_rc_conn_t *conn;

    axon_list_for_each(conn, &iface->conns, link) {
        if (conn->conn_id == conn_id) {
            return conn;
        }
    }
    axon_list_for_each(conn, &iface->closing, link) {
        if (conn->conn_id == conn_id) {
            return conn;
        }
    }
    return NULL;
}

/* No longer found by uuid: new eps to the peer get a new connection. */
void axon_rc_conn_retire(axon_rc_conn_t *conn)
{
    axon_list_del(&conn->link);
    axon_list_add_tail(&conn->iface->closing, &conn->link);
}

/* ------------------------------------------------------------ handshake messages */

static void axon_rc_hs_post_recv(axon_rc_iface_t *iface, void *buf)
{
    axon_dev_recv_wr_t wr, *bad;
    axon_dev_sge_t sge;
    int ret;

    sge.addr   = (uintptr_t)buf;
    sge.length = AXON_RC_HS_BUF_SIZE;
    sge.lkey   = axon_verbs_bufpool_lkey(&iface->hs_pool);
    wr.wr_id   = (uintptr_t)buf | AXON_RC_HS_WR_RECV;
    wr.next    = NULL;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ret = axon_dev_post_recv(iface->hs_qp, &wr, &bad);
    if (ret != 0) {
        axon_error("%s: handshake post_recv: %d", iface->name, ret);
        axon_verbs_bufpool_put(&iface->hs_pool, buf);
    }
}

/* Send a handshake message to a peer's UD QP; lost sends are covered by REQ retries. */
static void axon_rc_hs_send(axon_rc_iface_t *iface, const axon_verbs_dev_addr_t *addr,
                            uint32_t ud_qpn, const axon_rc_hs_t *msg)
{
    axon_dev_send_wr_t wr, *bad;
    axon_dev_sge_t sge;
    axon_dev_ah_t *ah;
    uint8_t *buf;
    int ret;

    buf = axon_verbs_bufpool_get(&iface->hs_pool);
    if (buf == NULL) {
        axon_debug("%s: no handshake buffer, message to QP 0x%x left to a retry", iface->name,
                   ud_qpn);
        return;
    }
    if (axon_verbs_ah_create(&iface->dev, addr, &ah) != AXON_OK) {
        axon_verbs_bufpool_put(&iface->hs_pool, buf);
        return;
    }
    memcpy(buf, &ah, sizeof(ah));
    memcpy(buf + AXON_RC_HS_MSG_OFFSET, msg, sizeof(*msg));
    memset(&wr, 0, sizeof(wr));
    sge.addr              = (uintptr_t)(buf + AXON_RC_HS_MSG_OFFSET);
    sge.length            = sizeof(*msg);
    sge.lkey              = axon_verbs_bufpool_lkey(&iface->hs_pool);
    wr.wr_id              = (uintptr_t)buf;
    wr.sg_list            = &sge;
    wr.num_sge            = 1;
    wr.opcode             = AXON_DEV_WR_SEND;
    wr.send_flags         = AXON_DEV_SEND_SIGNALED;
    wr.wr.ud.ah           = ah;
    wr.wr.ud.remote_qpn   = ud_qpn;
    wr.wr.ud.remote_qkey  = AXON_RC_HS_QKEY;
    ret = axon_dev_post_send(iface->hs_qp, &wr, &bad);
    if (ret != 0) {
        axon_debug("%s: handshake post_send to QP 0x%x: %d", iface->name, ud_qpn, ret);
        axon_dev_destroy_ah(ah);
        axon_verbs_bufpool_put(&iface->hs_pool, buf);
    }
}

/* Our side of a connection, as a REQ or REP. */
static void axon_rc_hs_fill(const axon_rc_conn_t *conn, uint8_t type, axon_rc_hs_t *msg)
{
    const axon_rc_iface_t *iface = conn->iface;

    memset(msg, 0, sizeof(*msg));
    msg->version      = AXON_RC_WIRE_VERSION;
    msg->type         = type;
    msg->window       = (uint16_t)iface->window;
    msg->conn_id      = conn->conn_id;
    msg->peer_conn_id = conn->peer_conn_id;
    msg->qpn          = conn->qp->qp_num;
    msg->psn          = conn->psn;
    msg->ud_qpn       = iface->hs_qp->qp_num;
    msg->src_uuid     = iface->worker_uuid;
    msg->dst_uuid     = conn->peer_uuid;
    msg->ka_addr      = (uintptr_t)iface->ka_buf;
    msg->ka_rkey      = iface->ka_mr->rkey;
    axon_verbs_dev_addr_pack(&iface->dev, &msg->dev_addr);
}

static void axon_rc_hs_send_conn(axon_rc_conn_t *conn, uint8_t type)
{
    axon_rc_hs_t msg;

    axon_rc_hs_fill(conn, type, &msg);
    axon_rc_hs_send(conn->iface, &conn->peer_addr, conn->peer_ud_qpn, &msg);
}

/* ------------------------------------------------------------ connection life */

axon_status_t axon_rc_conn_new(axon_rc_iface_t *iface, uint64_t peer_uuid,
                               const axon_verbs_dev_addr_t *addr, uint32_t ud_qpn,
                               axon_dev_qp_t *qp, axon_rc_conn_t **conn_p)
{
    axon_verbs_qp_params_t params;
    axon_rc_conn_t *conn;
    axon_status_t status;
    unsigned i;

    conn = calloc(1, sizeof(*conn));
    if (conn != NULL) {
        conn->tx_desc = calloc(iface->tx_depth, sizeof(*conn->tx_desc));
    }
    if ((conn == NULL) || (conn->tx_desc == NULL)) {
        axon_error("%s: cannot allocate a connection to worker 0x%llx", iface->name,
                   (unsigned long long)peer_uuid);
        free(conn);
        return AXON_ERR_NO_MEMORY;
    }
    memset(&params, 0, sizeof(params));
    params.type         = AXON_DEV_QPT_RC;
    params.send_cq      = iface->send_cq;
    params.recv_cq      = iface->recv_cq;
    params.srq          = iface->srq;
    params.max_send_wr  = iface->tx_depth;
    params.max_inline   = iface->max_inline;
    params.max_send_sge = 3;   /* header, AM header, payload of an inline am_short */
    params.qp_context   = conn;
    conn->qp = qp;   /* rc_adopt.c: a QP the CM made and connects */
    status = (qp != NULL) ? AXON_OK : axon_verbs_qp_create(&iface->dev, &params, &conn->qp, NULL);
    if ((status == AXON_OK) && (qp == NULL)) {
        status = axon_verbs_qp_rc_init(&iface->dev, conn->qp);
        if (status != AXON_OK) {
            axon_verbs_qp_destroy(conn->qp);
        }
    }
    if (status != AXON_OK) {
        free(conn->tx_desc);
        free(conn);
        return status;
    }
    for (i = 0; i < iface->tx_depth; ++i) {
        conn->tx_desc[i].conn = conn;
    }
    conn->iface         = iface;
    conn->peer_uuid     = peer_uuid;
    conn->conn_id       = iface->next_conn_id++;
    conn->peer_addr     = *addr;
    conn->peer_ud_qpn   = ud_qpn;
    conn->psn           = (uint32_t)axon_sys_generate_uuid() & AXON_VERBS_PSN_MASK;
    conn->tx_depth      = iface->tx_depth;
    conn->last_heard_ns = 0;
    conn->status        = AXON_OK;
    conn->state         = AXON_RC_CONN_FAILED;   /* not handshaking until set_state says so */
    axon_list_init(&conn->eps);
    axon_list_add_tail(&iface->conns, &conn->link);
    conn->qpn_next = iface->qpn_hash[axon_rc_qpn_bucket(conn->qp->qp_num)];
    iface->qpn_hash[axon_rc_qpn_bucket(conn->qp->qp_num)] = conn;
    *conn_p = conn;
    return AXON_OK;
}

static void axon_rc_conn_free(axon_rc_conn_t *conn)
{
    axon_rc_iface_t *iface = conn->iface;
    axon_rc_tx_desc_t *d;
    uint64_t sn;

    axon_rc_qpn_unhash(iface, conn);
    axon_list_del(&conn->link);
    if ((iface->ext != NULL) && (conn->cm_id != NULL)) {
        iface->ext->conn_teardown(conn);   /* rc_adopt.c: the CM destroys its QP */
    } else {
        axon_verbs_qp_destroy(conn->qp);
    }
    /* what never completed (iface close only): give back, fail operations */
    for (sn = conn->tx_completed; sn != conn->tx_posted; ++sn) {
        d = &conn->tx_desc[sn & (conn->tx_depth - 1)];
        if (d->buf != NULL) {
            axon_verbs_bufpool_put(&iface->tx_pool, d->buf);
        }
        if (d->mr != NULL) {
            axon_dev_dereg_mr(d->mr);
        }
        if (d->comp != NULL) {
            d->comp->func(d->comp, AXON_ERR_CANCELED);
        }
        ++iface->tx_cq_avail;
    }
    free(conn->tx_desc);
    free(conn);
}

/* Take the peer's side from a REQ or REP and move the QP to RTS. */
static axon_status_t axon_rc_conn_connect(axon_rc_conn_t *conn, const axon_rc_hs_t *msg)
{
    axon_rc_iface_t *iface = conn->iface;
    const axon_rc_config_t *c = iface->config;
    axon_verbs_rc_peer_t peer;

    conn->peer_conn_id = msg->conn_id;
    conn->peer_qpn     = msg->qpn;
    conn->peer_psn     = msg->psn;
    conn->peer_ud_qpn  = msg->ud_qpn;
    conn->peer_addr    = msg->dev_addr;
    conn->peer_ka_addr = msg->ka_addr;
    conn->peer_ka_rkey = msg->ka_rkey;
    conn->peer_window  = msg->window;
    conn->tx_credits   = msg->window;

    memset(&peer, 0, sizeof(peer));
    peer.addr          = msg->dev_addr;
    peer.qpn           = msg->qpn;
    peer.peer_psn      = msg->psn;
    peer.local_psn     = conn->psn;
    peer.path_mtu      = axon_verbs_path_mtu(&iface->dev, &msg->dev_addr);
    peer.timeout       = iface->timeout_exp;
    peer.retry_cnt     = (uint8_t)c->retry_count;
    peer.rnr_retry     = AXON_RC_RNR_RETRY;
    peer.min_rnr_timer = AXON_RC_MIN_RNR_TIMER;
    peer.max_rd_atomic = AXON_RC_MAX_RD_ATOMIC;
    return axon_verbs_qp_rc_connect(&iface->dev, conn->qp, &peer);
}

void axon_rc_conn_set_state(axon_rc_conn_t *conn, axon_rc_conn_state_t state)
{
    axon_rc_iface_t *iface = conn->iface;
    int was_hs = (conn->state == AXON_RC_CONN_REQ_SENT) || (conn->state == AXON_RC_CONN_REP_SENT);
    int is_hs  = (state == AXON_RC_CONN_REQ_SENT) || (state == AXON_RC_CONN_REP_SENT);

    iface->hs_waiting += (unsigned)is_hs;
    iface->hs_waiting -= (unsigned)was_hs;
    axon_trace("%s: connection 0x%x to worker 0x%llx: %s -> %s", iface->name, conn->conn_id,
               (unsigned long long)conn->peer_uuid, axon_rc_conn_state_names[conn->state],
               axon_rc_conn_state_names[state]);
    conn->state = state;
}

axon_status_t axon_rc_conn_get(axon_rc_iface_t *iface, uint64_t peer_uuid,
                               const axon_verbs_dev_addr_t *addr, uint32_t ud_qpn,
                               axon_rc_conn_t **conn_p)
{
    axon_rc_conn_t *conn = axon_rc_conn_by_uuid(iface, peer_uuid);
    axon_status_t status;
    uint64_t now;

    if (conn != NULL) {
        *conn_p = conn;
        return AXON_OK;
    }
    status = axon_rc_conn_new(iface, peer_uuid, addr, ud_qpn, NULL, &conn);
    if (status != AXON_OK) {
        return status;
    }
    if (peer_uuid == iface->worker_uuid) {
        /* Our own worker (device atomic mode loops atomics back through the
         * device): the QP is connected to itself, no handshake. */
        axon_rc_hs_t self;

        axon_rc_hs_fill(conn, AXON_RC_HS_REQ, &self);
        conn->active = 1;
        if (axon_rc_conn_connect(conn, &self) != AXON_OK) {
            axon_rc_conn_fail(conn, AXON_ERR_UNREACHABLE, "cannot connect the QP to itself");
        } else {
            axon_rc_conn_set_state(conn, AXON_RC_CONN_OPEN);
        }
        *conn_p = conn;
        return AXON_OK;
    }
    now               = axon_rc_now_ns();
    conn->active      = 1;
    axon_rc_conn_set_state(conn, AXON_RC_CONN_REQ_SENT);
    conn->hs_deadline = now + iface->connect_ns;
    conn->hs_next     = now + AXON_RC_HS_RETRY_NS;
    axon_rc_hs_send_conn(conn, AXON_RC_HS_REQ);
    *conn_p = conn;
    return AXON_OK;
}

/* Passive side (or the loser of simultaneous REQs): connect to the REQ and answer. */
static void axon_rc_conn_accept(axon_rc_conn_t *conn, const axon_rc_hs_t *msg, uint64_t now)
{
    axon_status_t status;

    conn->active = 0;
    status = axon_rc_conn_connect(conn, msg);
    if (status != AXON_OK) {
        axon_rc_conn_fail(conn, AXON_ERR_UNREACHABLE, "cannot connect the QP to the request");
        return;
    }
    axon_rc_conn_set_state(conn, AXON_RC_CONN_REP_SENT);
    conn->hs_deadline = now + conn->iface->connect_ns;
    axon_rc_hs_send_conn(conn, AXON_RC_HS_REP);
}

static void axon_rc_hs_rx_req(axon_rc_iface_t *iface, const axon_rc_hs_t *msg, uint64_t now)
{
    axon_rc_conn_t *conn;
    axon_rc_hs_t rej;

    if (msg->dst_uuid != iface->worker_uuid) {
        axon_debug("%s: request from worker 0x%llx for worker 0x%llx, which is not here: "
                   "rejected", iface->name, (unsigned long long)msg->src_uuid,
                   (unsigned long long)msg->dst_uuid);
        memset(&rej, 0, sizeof(rej));
        rej.version      = AXON_RC_WIRE_VERSION;
        rej.type         = AXON_RC_HS_REJ;
        rej.peer_conn_id = msg->conn_id;
        rej.ud_qpn       = iface->hs_qp->qp_num;
        rej.src_uuid     = iface->worker_uuid;
        rej.dst_uuid     = msg->src_uuid;
        axon_verbs_dev_addr_pack(&iface->dev, &rej.dev_addr);
        axon_rc_hs_send(iface, &msg->dev_addr, msg->ud_qpn, &rej);
        return;
    }
    conn = axon_rc_conn_by_uuid(iface, msg->src_uuid);
    if ((conn != NULL) && (conn->state == AXON_RC_CONN_REQ_SENT)) {
        if (iface->worker_uuid < msg->src_uuid) {
            return;   /* both connect: ours wins, the peer answers it */
        }
        axon_rc_conn_accept(conn, msg, now);
        return;
    }
    if (conn != NULL) {
        if (conn->peer_conn_id == msg->conn_id) {
            if (!conn->active) {
                axon_rc_hs_send_conn(conn, AXON_RC_HS_REP);   /* our REP was lost */
            }
            return;   /* else: the REQ that lost a simultaneous connect, answered already */
        }
        /* the peer started over (it said goodbye, or lost the connection) */
        axon_debug("%s: worker 0x%llx opens a new connection; connection 0x%x retired",
                   iface->name, (unsigned long long)msg->src_uuid, conn->conn_id);
        axon_rc_conn_retire(conn);
    }
    if (axon_rc_conn_new(iface, msg->src_uuid, &msg->dev_addr, msg->ud_qpn, NULL, &conn) !=
        AXON_OK) {
        return;   /* logged; the peer retries */
    }
    axon_rc_conn_accept(conn, msg, now);
}

static void axon_rc_hs_rx_rep(axon_rc_iface_t *iface, const axon_rc_hs_t *msg)
{
    axon_rc_conn_t *conn = axon_rc_conn_by_id(iface, msg->peer_conn_id);

    if ((conn == NULL) || (conn->state != AXON_RC_CONN_REQ_SENT) ||
        (conn->peer_uuid != msg->src_uuid)) {
        return;   /* a repeated answer */
    }
    if (axon_rc_conn_connect(conn, msg) != AXON_OK) {
        axon_rc_conn_fail(conn, AXON_ERR_UNREACHABLE, "cannot connect the QP to the reply");
        return;
    }
    axon_rc_conn_set_state(conn, AXON_RC_CONN_OPEN);
    conn->flags |= AXON_RC_CONN_F_RTU_PENDING;
    axon_rc_conn_post_pending(conn);
}

static void axon_rc_hs_rx_rej(axon_rc_iface_t *iface, const axon_rc_hs_t *msg)
{
    axon_rc_conn_t *conn = axon_rc_conn_by_id(iface, msg->peer_conn_id);

    if ((conn != NULL) && (conn->state == AXON_RC_CONN_REQ_SENT)) {
        axon_rc_conn_fail(conn, AXON_ERR_UNREACHABLE,
                          "the address belongs to another worker now (request rejected)");
    }
}

static void axon_rc_hs_rx(axon_rc_iface_t *iface, const axon_dev_wc_t *wc, uint8_t *buf,
                          uint64_t now)
{
    axon_rc_hs_t msg;

    if ((wc->status != AXON_DEV_WC_SUCCESS) || iface->hs_closed ||
        (wc->byte_len < AXON_RC_HS_MSG_OFFSET + sizeof(msg))) {
        if ((wc->status == AXON_DEV_WC_SUCCESS) && !iface->hs_closed) {
            axon_debug("%s: %u-byte handshake message dropped", iface->name, wc->byte_len);
        }
        return;
    }
    memcpy(&msg, buf + AXON_RC_HS_MSG_OFFSET, sizeof(msg));
    if (msg.version != AXON_RC_WIRE_VERSION) {
        axon_debug("%s: handshake version %u from worker 0x%llx, expected %u: dropped",
                   iface->name, msg.version, (unsigned long long)msg.src_uuid,
                   AXON_RC_WIRE_VERSION);
        return;
    }
    switch (msg.type) {
    case AXON_RC_HS_REQ:
        axon_rc_hs_rx_req(iface, &msg, now);
        break;
    case AXON_RC_HS_REP:
        if (msg.dst_uuid == iface->worker_uuid) {
            axon_rc_hs_rx_rep(iface, &msg);
        }
        break;
    case AXON_RC_HS_REJ:
        if (msg.dst_uuid == iface->worker_uuid) {
            axon_rc_hs_rx_rej(iface, &msg);
        }
        break;
    default:
        axon_debug("%s: handshake message type %u dropped", iface->name, msg.type);
        break;
    }
}

unsigned axon_rc_conn_hs_progress(axon_rc_iface_t *iface)
{
    axon_dev_wc_t wc[8];
    axon_dev_ah_t *ah;
    uint64_t now = 0;
    uint8_t *buf;
    int n, i;

    n = axon_dev_poll_cq(iface->hs_cq, 8, wc);
    for (i = 0; i < n; ++i) {
        buf = (uint8_t *)(uintptr_t)(wc[i].wr_id & ~AXON_RC_HS_WR_RECV);
        if (wc[i].wr_id & AXON_RC_HS_WR_RECV) {
            if (now == 0) {
                now = axon_rc_now_ns();
            }
            axon_rc_hs_rx(iface, &wc[i], buf, now);
            if (wc[i].status != AXON_DEV_WC_WR_FLUSH_ERR) {
                axon_rc_hs_post_recv(iface, buf);
            } else {
                axon_verbs_bufpool_put(&iface->hs_pool, buf);
            }
        } else {
            memcpy(&ah, buf, sizeof(ah));
            axon_dev_destroy_ah(ah);
            axon_verbs_bufpool_put(&iface->hs_pool, buf);
        }
    }
    return (n > 0) ? (unsigned)n : 0;
}

/* ------------------------------------------------------------ RC control messages */

void axon_rc_conn_rx_ctrl(axon_rc_conn_t *conn, uint8_t type)
{
    switch (type) {
    case AXON_RC_MSG_RTU:
        if (conn->state == AXON_RC_CONN_REP_SENT) {
            axon_rc_conn_set_state(conn, AXON_RC_CONN_OPEN);
            axon_rc_conn_post_pending(conn);
        }
        break;
    case AXON_RC_MSG_CREDIT:
        break;   /* the header's credits were taken already */
    case AXON_RC_MSG_BYE:
        conn->flags |= AXON_RC_CONN_F_PEER_BYE;
        if ((conn->num_eps == 0) && !(conn->flags & AXON_RC_CONN_F_BYE_SENT)) {
            conn->flags |= AXON_RC_CONN_F_BYE_PENDING;
            axon_rc_conn_retire(conn);
            axon_rc_conn_post_pending(conn);
        }
        break;
    default:
        axon_debug("%s: control message type %u from worker 0x%llx dropped", conn->iface->name,
                   type, (unsigned long long)conn->peer_uuid);
        break;
    }
}

int axon_rc_conn_post_pending(axon_rc_conn_t *conn)
{
    if (conn->state != AXON_RC_CONN_OPEN) {
        return conn->flags & (AXON_RC_CONN_F_RTU_PENDING | AXON_RC_CONN_F_CREDIT_PENDING |
                              AXON_RC_CONN_F_BYE_PENDING);
    }
    if ((conn->flags & AXON_RC_CONN_F_RTU_PENDING) &&
        (axon_rc_conn_send_ctrl(conn, AXON_RC_MSG_RTU) == AXON_OK)) {
        conn->flags &= ~AXON_RC_CONN_F_RTU_PENDING;
    }
    if (conn->flags & AXON_RC_CONN_F_RTU_PENDING) {
        return 1;   /* nothing may overtake the RTU */
    }
    if (conn->flags & AXON_RC_CONN_F_CREDIT_PENDING) {
        if ((conn->rx_credits == 0) || (conn->flags & AXON_RC_CONN_F_BYE_SENT) ||
            (axon_rc_conn_send_ctrl(conn, AXON_RC_MSG_CREDIT) == AXON_OK)) {
            conn->flags &= ~AXON_RC_CONN_F_CREDIT_PENDING;
        }
    }
    if ((conn->flags & AXON_RC_CONN_F_BYE_PENDING) && (conn->num_eps == 0) &&
        (axon_rc_conn_send_ctrl(conn, AXON_RC_MSG_BYE) == AXON_OK)) {
        conn->flags &= ~AXON_RC_CONN_F_BYE_PENDING;
        conn->flags |= AXON_RC_CONN_F_BYE_SENT;
    }
    return conn->flags & (AXON_RC_CONN_F_CREDIT_PENDING | AXON_RC_CONN_F_BYE_PENDING);
}

void axon_rc_conn_ep_removed(axon_rc_conn_t *conn)
{
    if ((conn->num_eps > 0) || (conn->state == AXON_RC_CONN_FAILED)) {
        return;
    }
    if (!(conn->flags & AXON_RC_CONN_F_BYE_SENT)) {
        conn->flags |= AXON_RC_CONN_F_BYE_PENDING;
    }
    axon_rc_conn_retire(conn);
    axon_rc_conn_post_pending(conn);
}

void axon_rc_conn_fail(axon_rc_conn_t *conn, axon_status_t status, const char *why)
{
    axon_rc_iface_t *iface = conn->iface;
    int graceful = !!(conn->flags & AXON_RC_CONN_F_PEER_BYE);
    axon_rc_ep_t *ep, *tmp;

    if (conn->status != AXON_OK) {
        return;   /* failed already */
    }
    if (graceful) {
        axon_debug("%s: connection to worker 0x%llx closed (%s) after its goodbye", iface->name,
                   (unsigned long long)conn->peer_uuid, why);
    } else {
        axon_error("%s: connection 0x%x to worker 0x%llx failed in state %s: %s (%s)",
                   iface->name, conn->conn_id, (unsigned long long)conn->peer_uuid,
                   axon_rc_conn_state_names[conn->state], why, axon_status_string(status));
    }
    axon_rc_conn_set_state(conn, AXON_RC_CONN_FAILED);
    conn->status = status;
    conn->flags &= ~(AXON_RC_CONN_F_RTU_PENDING | AXON_RC_CONN_F_CREDIT_PENDING |
                     AXON_RC_CONN_F_BYE_PENDING);
    axon_list_for_each_safe(ep, tmp, &conn->eps, link) {
        axon_list_del(&ep->link);
        ep->conn   = NULL;
        ep->status = status;
    }
    conn->num_eps = 0;
    axon_verbs_qp_to_err(conn->qp);
    axon_rc_conn_retire(conn);
    if (!graceful && !(conn->flags & AXON_RC_CONN_F_REPORTED)) {
        conn->flags |= AXON_RC_CONN_F_REPORTED;
        if (iface->peer_failure != NULL) {
            iface->peer_failure(iface->am_arg, conn->peer_uuid, status);
        }
    }
}

/* ------------------------------------------------------------ timers */

/* A zero-length RDMA write to the peer's keep-alive target: it needs no receive and no credit. */
static void axon_rc_conn_keepalive(axon_rc_conn_t *conn)
{
    axon_dev_send_wr_t wr;

    memset(&wr, 0, sizeof(wr));
    wr.opcode              = AXON_DEV_WR_RDMA_WRITE;
    wr.num_sge             = 0;
    wr.wr.rdma.remote_addr = conn->peer_ka_addr;
    wr.wr.rdma.rkey        = conn->peer_ka_rkey;
    if (axon_rc_conn_post(conn, &wr, NULL, NULL, NULL, 1) == AXON_OK) {
        conn->flags |= AXON_RC_CONN_F_KA_POSTED;
    }
}

static void axon_rc_conn_timer(axon_rc_conn_t *conn, uint64_t now)
{
    axon_rc_iface_t *iface = conn->iface;
    char why[128];

    switch (conn->state) {
    case AXON_RC_CONN_REQ_SENT:
        if (now >= conn->hs_deadline) {
            snprintf(why, sizeof(why), "no answer to the connection request within %gs "
                     "(is the worker alive?)", iface->config->connect_timeout);
            axon_rc_conn_fail(conn, AXON_ERR_ENDPOINT_TIMEOUT, why);
        } else if (now >= conn->hs_next) {
            conn->hs_next = now + AXON_RC_HS_RETRY_NS;
            axon_rc_hs_send_conn(conn, AXON_RC_HS_REQ);
        }
        break;
    case AXON_RC_CONN_REP_SENT:
        if (now >= conn->hs_deadline) {
            axon_rc_conn_fail(conn, AXON_ERR_ENDPOINT_TIMEOUT,
                              "the connecting worker never confirmed the connection");
        }
        break;
    case AXON_RC_CONN_OPEN:
        if (conn->last_heard_ns == 0) {
            conn->last_heard_ns = now;
        } else if ((now - conn->last_heard_ns >= iface->keepalive_ns) &&
                   !(conn->flags & AXON_RC_CONN_F_KA_POSTED)) {
            conn->last_heard_ns = now;
            axon_rc_conn_keepalive(conn);
        }
        if (conn->flags & (AXON_RC_CONN_F_RTU_PENDING | AXON_RC_CONN_F_CREDIT_PENDING |
                           AXON_RC_CONN_F_BYE_PENDING)) {
            axon_rc_conn_post_pending(conn);
        }
        break;
    default:
        break;
    }
}

void axon_rc_conn_timers(axon_rc_iface_t *iface, uint64_t now)
{
    axon_rc_conn_t *conn, *tmp;

    axon_list_for_each_safe(conn, tmp, &iface->conns, link) {
        axon_rc_conn_timer(conn, now);
    }
    axon_list_for_each_safe(conn, tmp, &iface->closing, link) {
        axon_rc_conn_timer(conn, now);
    }
}

/* Nothing of ours in flight, and nobody will send on it again */
static int axon_rc_conn_done(const axon_rc_conn_t *conn)
{
    if (conn->tx_completed != conn->tx_posted) {
        return 0;
    }
    if (conn->state == AXON_RC_CONN_FAILED) {
        return 1;
    }
    return (conn->num_eps == 0) && (conn->flags & AXON_RC_CONN_F_BYE_SENT) &&
           (conn->flags & AXON_RC_CONN_F_PEER_BYE);
}

void axon_rc_conn_reap(axon_rc_iface_t *iface)
{
    axon_rc_conn_t *conn, *tmp;

    axon_list_for_each_safe(conn, tmp, &iface->closing, link) {
        if (axon_rc_conn_done(conn)) {
            axon_debug("%s: connection 0x%x to worker 0x%llx closed", iface->name,
                       conn->conn_id, (unsigned long long)conn->peer_uuid);
            axon_rc_conn_free(conn);
        }
    }
}

/* ------------------------------------------------------------ iface setup */

axon_status_t axon_rc_conn_iface_init(axon_rc_iface_t *iface)
{
    axon_verbs_qp_params_t params;
    axon_status_t status;
    unsigned i;
    int ret;

    if (posix_memalign(&iface->ka_buf, 64, 64) != 0) {
        axon_error("%s: cannot allocate the keep-alive target", iface->name);
        return AXON_ERR_NO_MEMORY;
    }
    ret = axon_dev_reg_mr(iface->dev.pd, iface->ka_buf, 64,
                          AXON_DEV_ACCESS_LOCAL_WRITE | AXON_DEV_ACCESS_REMOTE_WRITE,
                          &iface->ka_mr);
    if (ret != 0) {
        axon_error("%s: reg_mr of the keep-alive target: %d", iface->name, ret);
        return AXON_ERR_IO_ERROR;
    }
    status = axon_verbs_cq_create(&iface->dev, AXON_RC_HS_BUFS * 2, &iface->hs_cq);
    if (status != AXON_OK) {
        return status;
    }
    status = axon_verbs_bufpool_init(&iface->hs_pool, &iface->dev, "rc handshake",
                                     AXON_RC_HS_BUF_SIZE, AXON_RC_HS_BUFS);
    if (status != AXON_OK) {
        return status;
    }
    memset(&params, 0, sizeof(params));
    params.type        = AXON_DEV_QPT_UD;
    params.send_cq     = iface->hs_cq;
    params.recv_cq     = iface->hs_cq;
    params.max_send_wr = AXON_RC_HS_BUFS - AXON_RC_HS_RX_BUFS;
    params.max_recv_wr = AXON_RC_HS_RX_BUFS;
    status = axon_verbs_qp_create(&iface->dev, &params, &iface->hs_qp, NULL);
    if (status != AXON_OK) {
        return status;
    }
    status = axon_verbs_qp_ud_up(&iface->dev, iface->hs_qp, AXON_RC_HS_QKEY, 0);
    if (status != AXON_OK) {
        return status;
    }
    for (i = 0; i < AXON_RC_HS_RX_BUFS; ++i) {
        axon_rc_hs_post_recv(iface, axon_verbs_bufpool_get(&iface->hs_pool));
    }
    return AXON_OK;
}

void axon_rc_conn_iface_cleanup(axon_rc_iface_t *iface)
{
    int ret;

    if (iface->hs_qp != NULL) {
        /* a request still in the CQ must not open a connection after close_all */
        iface->hs_closed = 1;
        axon_verbs_qp_to_err(iface->hs_qp);
        /* sends done and flushed receives give their buffers and AHs back */
        while (axon_rc_conn_hs_progress(iface) > 0) {
        }
        axon_verbs_qp_destroy(iface->hs_qp);
        iface->hs_qp = NULL;
    }
    iface->hs_pool.num_free = iface->hs_pool.count;   /* what is left died with the QP */
    axon_verbs_bufpool_cleanup(&iface->hs_pool);
    if ((iface->hs_cq != NULL) && ((ret = axon_dev_destroy_cq(iface->hs_cq)) != 0)) {
        axon_warn("%s: destroy_cq: %d", iface->name, ret);
    }
    if ((iface->ka_mr != NULL) && ((ret = axon_dev_dereg_mr(iface->ka_mr)) != 0)) {
        axon_warn("%s: dereg_mr: %d", iface->name, ret);
    }
    free(iface->ka_buf);
}

/* Goodbyes of ours posted and through, or nothing left to wait for */
static int axon_rc_conn_close_ready(axon_rc_iface_t *iface)
{
    axon_rc_conn_t *conn;
    int pending = 0;

    axon_list_for_each(conn, &iface->closing, link) {
        if ((conn->state == AXON_RC_CONN_OPEN) &&
            ((conn->flags & AXON_RC_CONN_F_BYE_PENDING) ||
             ((conn->flags & AXON_RC_CONN_F_BYE_SENT) &&
              (conn->tx_completed != conn->tx_posted)))) {
            pending = 1;
        }
    }
    return !pending;
}

void axon_rc_conn_close_all(axon_rc_iface_t *iface)
{
    axon_rc_conn_t *conn, *tmp;
    axon_rc_ep_t *ep, *etmp;
    double deadline = axon_sys_time_sec() + AXON_RC_CLOSE_WAIT_SEC;
    axon_dev_wc_t wc[AXON_RC_POLL_BATCH];
    int n, i;

    /* connections whose eps were never destroyed are dropped: detach the eps */
    axon_list_for_each_safe(conn, tmp, &iface->conns, link) {
        axon_list_for_each_safe(ep, etmp, &conn->eps, link) {
            axon_list_del(&ep->link);
            ep->conn   = NULL;
            ep->status = AXON_ERR_CANCELED;
        }
        conn->num_eps = 0;
        axon_rc_conn_ep_removed(conn);
    }
    /* let our goodbyes through, so peers see a close and not a failure */
    iface->peer_failure = NULL;   /* the worker is going away: nobody to tell */
    while (!axon_rc_conn_close_ready(iface) && (axon_sys_time_sec() < deadline)) {
        n = axon_dev_poll_cq(iface->send_cq, AXON_RC_POLL_BATCH, wc);
        for (i = 0; i < n; ++i) {
            axon_rc_iface_tx_completion(iface, &wc[i]);
        }
    }
    axon_list_for_each_safe(conn, tmp, &iface->conns, link) {
        axon_rc_conn_free(conn);
    }
    axon_list_for_each_safe(conn, tmp, &iface->closing, link) {
        axon_rc_conn_free(conn);
    }
}
