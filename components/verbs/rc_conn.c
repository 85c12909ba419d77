/*
 * rc connections, whichever manager brings them up (rc_hs.c, the CM): their
 * life (open, goodbye, failure), and the timers that end handshakes that take
 * too long and probe idle peers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rc.h"

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

/* No longer found by uuid: new eps to the peer get a new connection. */
void axon_rc_conn_retire(axon_rc_conn_t *conn)
{
    axon_list_del(&conn->link);
    axon_list_add_tail(&conn->iface->closing, &conn->link);
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
    params.srq          = iface->rx.srq;
    params.max_send_wr  = iface->tx_depth;
    params.max_inline   = iface->max_inline;
    params.max_send_sge = 3;   /* header, AM header, payload of an inline am_short */
    params.qp_context   = conn;
    if (iface->dev.dev_attr.cap_flags & AXON_DEV_CAP_UMR) {
        params.create_flags = AXON_DEV_QP_CREATE_UMR;   /* local layout keys (rc_layout.c) */
        params.max_inl_klms = iface->dev.dev_attr.umr.max_send_wqe_inline_klms;
    }
    conn->qp = qp;   /* a QP the CM made and connects */
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
    if ((qp == NULL) && (params.create_flags & AXON_DEV_QP_CREATE_UMR)) {
        conn->flags      = AXON_RC_CONN_F_UMR;
        conn->umr_inline = params.max_inl_klms;
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
    iface->cm->conn_destroy(conn);
    /* what never completed (iface close only): give back, fail operations */
    for (sn = conn->tx_completed; sn != conn->tx_posted; ++sn) {
        d = &conn->tx_desc[sn & (conn->tx_depth - 1)];
        if (d->buf != NULL) {
            axon_verbs_bufpool_put(&iface->tx_pool, d->buf);
        }
        if (d->region != NULL) {
            axon_rcache_put(iface->rcache, d->region);
        }
        if (d->layout_key != NULL) {
            axon_rc_layout_key_put(iface, d->layout_key);
        }
        if (d->iov_key != NULL) {
            axon_rc_md_iov_key_put(iface->md, d->iov_key);
        }
        if (d->comp != NULL) {
            d->comp->func(d->comp, AXON_ERR_CANCELED);
        }
        if (d->signaled) {
            --iface->tx_signaled;
        }
        ++iface->tx_cq_avail;
    }
    free(conn->tx_desc);
    free(conn);
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

axon_status_t axon_rc_conn_adopt(axon_rc_iface_t *iface, axon_dev_qp_t *qp, uint64_t peer_uuid,
                                 int active, axon_rc_conn_t **conn_p)
{
    axon_verbs_dev_addr_t none;
    axon_status_t status;

    memset(&none, 0, sizeof(none));
    status = axon_rc_conn_new(iface, peer_uuid, &none, 0, qp, conn_p);
    if (status != AXON_OK) {
        return status;
    }
    (*conn_p)->active      = (uint8_t)active;
    axon_rc_conn_set_state(*conn_p, AXON_RC_CONN_REP_SENT);
    (*conn_p)->hs_deadline = axon_rc_now_ns() + iface->connect_ns;
    return AXON_OK;
}

void axon_rc_conn_set_peer(axon_rc_conn_t *conn, uint16_t window, uint64_t ka_addr,
                           uint32_t ka_rkey)
{
    conn->peer_window  = window;
    conn->tx_credits   = window;
    conn->peer_ka_addr = ka_addr;
    conn->peer_ka_rkey = ka_rkey;
}

void axon_rc_conn_move_eps(axon_rc_conn_t *from, axon_rc_conn_t *to)
{
    axon_rc_ep_t *ep, *tmp;

    axon_list_for_each_safe(ep, tmp, &from->eps, link) {
        axon_list_del(&ep->link);
        axon_list_add_tail(&to->eps, &ep->link);
        ep->conn = to;
        ++to->num_eps;
    }
    from->num_eps = 0;
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
    case AXON_RC_MSG_LEAVE:
        conn->flags |= AXON_RC_CONN_F_PEER_LEFT;   /* and a goodbye all the same */
        __attribute__((fallthrough));
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
        ((conn->flags & AXON_RC_CONN_F_PEER_LEFT) ||   /* it reads no answer */
         (axon_rc_conn_send_ctrl(conn, conn->iface->leaving ? AXON_RC_MSG_LEAVE :
                                                              AXON_RC_MSG_BYE) == AXON_OK))) {
        conn->flags &= ~AXON_RC_CONN_F_BYE_PENDING;
        conn->flags |= AXON_RC_CONN_F_BYE_SENT;
        conn->bye_end = conn->tx_posted;
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
                     "(is the worker alive?)", iface->config.connect_timeout);
            axon_rc_conn_fail(conn, AXON_ERR_ENDPOINT_TIMEOUT, why);
        } else if (now >= conn->hs_next) {
            conn->hs_next = now + AXON_RC_HS_RETRY_NS;
            axon_rc_hs_resend(conn);
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
    return AXON_OK;
}

void axon_rc_conn_iface_cleanup(axon_rc_iface_t *iface)
{
    int ret;

    if ((iface->ka_mr != NULL) && ((ret = axon_dev_dereg_mr(iface->ka_mr)) != 0)) {
        axon_warn("%s: dereg_mr: %d", iface->name, ret);
    }
    free(iface->ka_buf);
}

/* Our goodbye to conn's peer is still to go through: the BYE (or LEAVE) itself,
 * or a LEAVE after it while the peer may still mean to say goodbye. A peer
 * that left reads nothing (MPI_Finalize closes every rank at once). */
static int axon_rc_conn_bye_pending(const axon_rc_conn_t *conn)
{
    if ((conn->state != AXON_RC_CONN_OPEN) || (conn->flags & AXON_RC_CONN_F_PEER_LEFT)) {
        return 0;
    }
    if (conn->flags & AXON_RC_CONN_F_BYE_PENDING) {
        return 1;
    }
    return (conn->flags & AXON_RC_CONN_F_BYE_SENT) &&
           ((conn->tx_completed < conn->bye_end) ||
            (!(conn->flags & AXON_RC_CONN_F_PEER_BYE) &&
             (conn->tx_completed != conn->tx_posted)));
}

static int axon_rc_conn_close_ready(axon_rc_iface_t *iface)
{
    axon_rc_conn_t *conn;

    axon_list_for_each(conn, &iface->closing, link) {
        if (axon_rc_conn_bye_pending(conn)) {
            return 0;
        }
    }
    return 1;
}

void axon_rc_conn_close_all(axon_rc_iface_t *iface)
{
    axon_rc_conn_t *conn, *tmp;
    axon_rc_ep_t *ep, *etmp;
    double deadline = axon_sys_time_sec() + AXON_RC_CLOSE_WAIT_SEC;
    axon_dev_wc_t wc[AXON_RC_POLL_BATCH];
    int n, i;

    /* A peer still owing us its BYE would send it to a QP gone by then, and wait
     * for it in vain: LEAVE tells it not to (a BYE of ours went out already).
     * The BYEs that arrived say which peers owe none. */
    iface->leaving = 1;
    axon_rc_iface_poll_closing(iface);
    axon_list_for_each(conn, &iface->closing, link) {
        if ((conn->state == AXON_RC_CONN_OPEN) && (conn->flags & AXON_RC_CONN_F_BYE_SENT) &&
            !(conn->flags & AXON_RC_CONN_F_PEER_BYE)) {
            (void)axon_rc_conn_send_ctrl(conn, AXON_RC_MSG_LEAVE);   /* else it waits */
        }
    }
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
        axon_rc_iface_poll_closing(iface);
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
