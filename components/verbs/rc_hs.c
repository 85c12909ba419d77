/*
 * rc's own connection manager: the handshake over the iface's UD QP (formats
 * and rules in rc_wire.h). The iface address is that QP's number; a REQ
 * (resent until answered) carries our QP, PSN, window and keep-alive target,
 * the REP the peer's, and the RTU on the RC QP itself confirms it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rc.h"

#define AXON_RC_HS_BUF_SIZE   (AXON_RC_HS_MSG_OFFSET + sizeof(axon_rc_hs_t))
#define AXON_RC_HS_RX_BUFS    (AXON_RC_HS_BUFS / 2)

/* wr_id bit of handshake receives (buffers are 64-byte aligned) */
#define AXON_RC_HS_WR_RECV    1ull


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


/* Take the peer's side from a REQ or REP and move the QP to RTS. */
static axon_status_t axon_rc_conn_connect(axon_rc_conn_t *conn, const axon_rc_hs_t *msg)
{
    axon_rc_iface_t *iface = conn->iface;
    const axon_rc_config_t *c = &iface->config;
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


static axon_status_t axon_rc_hs_connect(axon_rc_iface_t *iface, uint64_t peer_uuid,
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
    const char *why;

    if ((wc->status != AXON_DEV_WC_SUCCESS) || iface->hs_closed) {
        return;
    }
    why = axon_rc_hs_read(buf, wc->byte_len, &msg);
    if (why != NULL) {
        axon_debug("%s: %u-byte handshake message dropped: %s", iface->name, wc->byte_len,
                   why);
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
    }
}

static unsigned axon_rc_hs_progress(axon_rc_iface_t *iface)
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

/* ------------------------------------------------------------ the manager */

static axon_status_t axon_rc_hs_init(axon_rc_iface_t *iface, const void *cm_config)
{
    axon_verbs_qp_params_t params;
    axon_status_t status;
    unsigned i;

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

static void axon_rc_hs_cleanup(axon_rc_iface_t *iface)
{
    if (iface->hs_qp != NULL) {
        /* a request still in the CQ must not open a connection after close_all */
        iface->hs_closed = 1;
        axon_verbs_qp_to_err(iface->hs_qp);
        /* sends done and flushed receives give their buffers and AHs back */
        while (axon_rc_hs_progress(iface) > 0) {
        }
        axon_verbs_qp_destroy(iface->hs_qp);
        iface->hs_qp = NULL;
    }
    iface->hs_pool.num_free = iface->hs_pool.count;   /* what is left died with the QP */
    axon_verbs_bufpool_cleanup(&iface->hs_pool);
    axon_verbs_cq_destroy(iface->name, iface->hs_cq);
}

void axon_rc_hs_resend(axon_rc_conn_t *conn)
{
    axon_rc_hs_send_conn(conn, AXON_RC_HS_REQ);
}

static axon_status_t axon_rc_hs_get_address(axon_rc_iface_t *iface, void *dev_addr,
                                            void *iface_addr)
{
    axon_rc_iface_addr_t addr;

    axon_verbs_dev_addr_pack(&iface->dev, dev_addr);
    addr.ud_qpn = iface->hs_qp->qp_num;
    memcpy(iface_addr, &addr, sizeof(addr));
    return AXON_OK;
}

static int axon_rc_hs_is_reachable(axon_rc_iface_t *iface, const void *dev_addr,
                                   const void *iface_addr)
{
    axon_verbs_dev_addr_t addr;

    axon_verbs_dev_addr_unpack(dev_addr, &addr);
    return axon_verbs_dev_addr_reachable(&iface->dev, &addr);
}

static axon_status_t axon_rc_hs_conn_get(axon_rc_iface_t *iface, uint64_t peer_uuid,
                                         const void *dev_addr, const void *iface_addr,
                                         axon_rc_conn_t **conn_p)
{
    axon_verbs_dev_addr_t addr;
    axon_rc_iface_addr_t ifa;

    axon_verbs_dev_addr_unpack(dev_addr, &addr);
    memcpy(&ifa, iface_addr, sizeof(ifa));
    if (!axon_verbs_dev_addr_reachable(&iface->dev, &addr)) {
        axon_error("%s: worker 0x%llx is not reachable from this port", iface->name,
                   (unsigned long long)peer_uuid);
        return AXON_ERR_UNREACHABLE;
    }
    if ((ifa.ud_qpn == 0) || (ifa.ud_qpn > AXON_VERBS_PSN_MASK)) {
        axon_error("%s: bad handshake QP number 0x%x in the address of worker 0x%llx",
                   iface->name, ifa.ud_qpn, (unsigned long long)peer_uuid);
        return AXON_ERR_INVALID_ADDR;
    }
    return axon_rc_hs_connect(iface, peer_uuid, &addr, ifa.ud_qpn, conn_p);
}

static void axon_rc_hs_conn_destroy(axon_rc_conn_t *conn)
{
    axon_verbs_qp_destroy(conn->qp);
}

const axon_rc_cm_t axon_rc_hs_cm = {
    .name           = "rc",
    .iface_size     = sizeof(axon_rc_iface_t),
    .dev_addr_len   = AXON_VERBS_DEV_ADDR_LEN,
    .iface_addr_len = sizeof(axon_rc_iface_addr_t),
    .get_address    = axon_rc_hs_get_address,
    .is_reachable   = axon_rc_hs_is_reachable,
    .dev_open       = axon_verbs_dev_open,
    .dev_close      = axon_verbs_dev_close,
    .init           = axon_rc_hs_init,
    .cleanup        = axon_rc_hs_cleanup,
    .conn_get       = axon_rc_hs_conn_get,
    .progress       = axon_rc_hs_progress,
    .conn_destroy   = axon_rc_hs_conn_destroy,
};
