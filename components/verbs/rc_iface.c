/* rc iface: open, close, progress, and the receive path. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rc.h"

static void axon_rc_iface_close(axon_iface_t *tl_iface);
static unsigned axon_rc_iface_progress(axon_iface_t *tl_iface);

static axon_status_t axon_rc_iface_get_address(axon_iface_t *tl_iface, void *dev_addr,
                                               void *iface_addr)
{
    axon_rc_iface_t *iface = (axon_rc_iface_t *)tl_iface;

    return iface->cm->get_address(iface, dev_addr, iface_addr);
}

static int axon_rc_iface_is_reachable(axon_iface_t *tl_iface, const void *dev_addr,
                                      const void *iface_addr)
{
    axon_rc_iface_t *iface = (axon_rc_iface_t *)tl_iface;

    return (dev_addr != NULL) && (iface_addr != NULL) &&
           iface->cm->is_reachable(iface, dev_addr, iface_addr);
}

/* Every iface's copy gets the address lengths of its connection manager */
static const axon_iface_ops_t axon_rc_iface_ops = {
    .iface_close        = axon_rc_iface_close,
    .iface_progress     = axon_rc_iface_progress,
    .iface_get_address  = axon_rc_iface_get_address,
    .iface_is_reachable = axon_rc_iface_is_reachable,
    .ep_create          = axon_rc_ep_create,
    .ep_destroy         = axon_rc_ep_destroy,
    .ep_am_short        = axon_rc_ep_am_short,
    .ep_am_bcopy        = axon_rc_ep_am_bcopy,
    .ep_am_zcopy        = NULL,
    .ep_get_zcopy       = axon_rc_ep_get_zcopy,
    .ep_put_zcopy       = axon_rc_ep_put_zcopy,
    .ep_get_zcopy_iov   = axon_rc_ep_get_zcopy_iov,
    .ep_put_zcopy_iov   = axon_rc_ep_put_zcopy_iov,
    .ep_flush           = axon_rc_ep_flush,
    .ep_check           = axon_rc_ep_check,
    .ep_atomic          = axon_rc_ep_atomic,
};

/* ------------------------------------------------------------ receive path */

static void axon_rc_iface_deliver(axon_rc_iface_t *iface, axon_rc_conn_t *conn,
                                  const axon_rc_hdr_t *hdr, uint32_t byte_len)
{
    axon_am_handler_t handler;

    if (hdr->am_id >= AXON_AM_ID_MAX) {
        axon_warn("%s: message with AM id %u from worker 0x%llx dropped", iface->name,
                  hdr->am_id, (unsigned long long)conn->peer_uuid);
        return;
    }
    handler = iface->am_handlers[hdr->am_id];
    if (handler == NULL) {
        axon_warn("%s: no handler for AM id %u, message dropped", iface->name, hdr->am_id);
        return;
    }
    handler(iface->am_arg, hdr + 1, byte_len - sizeof(*hdr), AXON_AM_FLAG_NONE);
}

/* More credits than the window the peer granted: a broken or forged header (the
 * counter would overflow and we would overrun the peer's receive queue). */
static __attribute__((noinline, cold))
void axon_rc_conn_credits_excess(axon_rc_iface_t *iface, axon_rc_conn_t *conn, uint16_t credits)
{
    axon_warn("%s: peer QP 0x%x returned %u credits, beyond its window of %u: capped",
              iface->name, conn->peer_qpn, credits, conn->peer_window);
    conn->tx_credits = (int32_t)conn->peer_window;
}

static void axon_rc_iface_rx_completion(axon_rc_iface_t *iface, const axon_dev_wc_t *wc)
{
    void *buf = (void *)(uintptr_t)wc->wr_id;
    axon_rc_hdr_t *hdr = buf;
    axon_rc_conn_t *conn;

    if (__builtin_expect(wc->status != AXON_DEV_WC_SUCCESS, 0)) {
        /* a QP of the SRQ went to error while receiving: the send side reports it */
        axon_debug("%s: receive completion: %s", iface->name,
                   axon_dev_wc_status_str(wc->status));
        axon_verbs_srq_ring_return(&iface->rx, buf);
        return;
    }
    conn = axon_rc_conn_by_qpn(iface, wc->qp_num);
    if (__builtin_expect((conn == NULL) || (wc->byte_len < sizeof(*hdr)), 0)) {
        axon_debug("%s: %u-byte message on unknown QP 0x%x dropped", iface->name, wc->byte_len,
                   wc->qp_num);
        axon_verbs_srq_ring_return(&iface->rx, buf);
        return;
    }
    conn->last_heard_ns = 0;   /* heard: the timer pass restarts the idle clock */
    conn->tx_credits   += hdr->credits;
    if (__builtin_expect(conn->tx_credits > (int32_t)conn->peer_window, 0)) {
        axon_rc_conn_credits_excess(iface, conn, hdr->credits);
    }
    if (__builtin_expect(hdr->type == AXON_RC_MSG_AM, 1)) {
        if (conn->state == AXON_RC_CONN_REP_SENT) {
            /* the RTU overtook nothing: data proves the peer is up */
            axon_rc_conn_rx_ctrl(conn, AXON_RC_MSG_RTU);
        }
        axon_rc_iface_deliver(iface, conn, hdr, wc->byte_len);
        ++conn->rx_credits;
        if ((conn->rx_credits >= iface->window / 2) &&
            !(conn->flags & AXON_RC_CONN_F_CREDIT_PENDING)) {
            conn->flags |= AXON_RC_CONN_F_CREDIT_PENDING;
        }
    } else {
        axon_rc_conn_rx_ctrl(conn, hdr->type);
    }
    axon_verbs_srq_ring_return(&iface->rx, buf);
    if (__builtin_expect(conn->flags & AXON_RC_CONN_F_CREDIT_PENDING, 0)) {
        axon_rc_conn_post_pending(conn);
    }
}

void axon_rc_iface_poll_closing(axon_rc_iface_t *iface)
{
    axon_dev_wc_t wc[AXON_RC_POLL_BATCH];
    axon_rc_conn_t *conn;
    axon_rc_hdr_t *hdr;
    int n, i;

    n = axon_dev_poll_cq(iface->recv_cq, AXON_RC_POLL_BATCH, wc);
    for (i = 0; i < n; ++i) {
        hdr  = (axon_rc_hdr_t *)(uintptr_t)wc[i].wr_id;
        conn = axon_rc_conn_by_qpn(iface, wc[i].qp_num);
        if ((wc[i].status == AXON_DEV_WC_SUCCESS) && (conn != NULL) &&
            (wc[i].byte_len >= sizeof(*hdr))) {
            /* a message still proves the peer up (the RTU overtook nothing): a
             * connection that never opens sends no goodbye */
            axon_rc_conn_rx_ctrl(conn, (hdr->type == AXON_RC_MSG_AM) ? AXON_RC_MSG_RTU :
                                                                       hdr->type);
        }
        axon_verbs_srq_ring_return(&iface->rx, hdr);
    }
}

/* ------------------------------------------------------------ send completions */

void axon_rc_iface_tx_completion(axon_rc_iface_t *iface, const axon_dev_wc_t *wc)
{
    axon_rc_tx_desc_t *desc = (axon_rc_tx_desc_t *)(uintptr_t)wc->wr_id;
    axon_rc_conn_t *conn    = desc->conn;
    axon_status_t status    = AXON_OK;
    uint64_t mask           = conn->tx_depth - 1;
    uint64_t sn, end;
    axon_rc_tx_desc_t *d;

    /* the WR's number from its slot: outstanding WRs never exceed the ring */
    sn  = conn->tx_completed +
          (((uint64_t)(desc - conn->tx_desc) - conn->tx_completed) & mask);
    end = sn + 1;
    if (wc->status != AXON_DEV_WC_SUCCESS) {
        /* RC completes in order and always reports an error: the WRs before sn succeeded.
         * A refused key fails that WR as a remote access error (the QP breaks anyway). */
        status = (wc->status == AXON_DEV_WC_RETRY_EXC_ERR) ? AXON_ERR_ENDPOINT_TIMEOUT :
                 (wc->status == AXON_DEV_WC_WR_FLUSH_ERR) ? AXON_ERR_CANCELED :
                 (wc->status == AXON_DEV_WC_REM_ACCESS_ERR) ? AXON_ERR_REMOTE_ACCESS :
                 AXON_ERR_CONNECTION_RESET;
        /* Flushed because the connection failed: report why it failed, not a cancel. */
        if ((status == AXON_ERR_CANCELED) && (conn->status != AXON_OK)) {
            status = conn->status;
        }
    }
    conn->last_heard_ns = 0;
    for (; conn->tx_completed < end; ++conn->tx_completed) {
        d = &conn->tx_desc[conn->tx_completed & mask];
        if (d->buf != NULL) {
            axon_verbs_bufpool_put(&iface->tx_pool, d->buf);
            d->buf = NULL;
        }
        if (d->region != NULL) {
            axon_rcache_put(iface->rcache, d->region);
            d->region = NULL;
        }
        if (d->layout_key != NULL) {
            axon_rc_layout_key_put(iface, d->layout_key);
            d->layout_key = NULL;
        }
        if (d->iov_key != NULL) {
            axon_rc_md_iov_key_put(iface->md, d->iov_key);
            d->iov_key = NULL;
        }
        ++iface->tx_cq_avail;
        if (d->signaled) {
            d->signaled = 0;
            --iface->tx_signaled;
        }
        if (d->comp != NULL) {
            axon_tl_completion_t *comp = d->comp;
            d->comp = NULL;
            comp->func(comp, (conn->tx_completed == sn) ? status : AXON_OK);
        }
    }
    if (conn->flags & AXON_RC_CONN_F_KA_POSTED) {
        conn->flags &= ~AXON_RC_CONN_F_KA_POSTED;
    }
    if ((wc->status != AXON_DEV_WC_SUCCESS) && (conn->status == AXON_OK)) {
        axon_rc_conn_fail(conn, (status == AXON_ERR_REMOTE_ACCESS) ? AXON_ERR_CONNECTION_RESET :
                                                                     status,
                          axon_dev_wc_status_str(wc->status));
    } else if (conn->flags & (AXON_RC_CONN_F_RTU_PENDING | AXON_RC_CONN_F_CREDIT_PENDING |
                              AXON_RC_CONN_F_BYE_PENDING)) {
        axon_rc_conn_post_pending(conn);
    }
}

/* ------------------------------------------------------------ progress */

unsigned axon_rc_iface_poll(axon_rc_iface_t *iface)
{
    axon_dev_wc_t wc[AXON_RC_POLL_BATCH];
    unsigned events = 0;
    int n, i;

    axon_verbs_srq_ring_refill_batch(&iface->rx);
    n = axon_dev_poll_cq(iface->recv_cq, AXON_RC_POLL_BATCH, wc);
    for (i = 0; i < n; ++i) {
        axon_rc_iface_rx_completion(iface, &wc[i]);
    }
    if (axon_verbs_tx_poll_skip(&iface->tx_poll_due, n > 0)) {
        return (unsigned)n;
    }
    events += (n > 0) ? (unsigned)n : 0;
    /* Entries come from signaled WRs, or from a failure flushing any: with none of the
     * first out, a look now and then finds the second (a poll is a device pass) */
    if ((iface->tx_signaled == 0) && (++iface->tx_idle_polls < AXON_RC_TX_IDLE_POLLS)) {
        return events;
    }
    iface->tx_idle_polls = 0;

    n = axon_dev_poll_cq(iface->send_cq, AXON_RC_POLL_BATCH, wc);
    for (i = 0; i < n; ++i) {
        axon_rc_iface_tx_completion(iface, &wc[i]);
    }
    return events + ((n > 0) ? (unsigned)n : 0);
}

static unsigned axon_rc_iface_progress(axon_iface_t *tl_iface)
{
    axon_rc_iface_t *iface = (axon_rc_iface_t *)tl_iface;
    unsigned events = axon_rc_iface_poll(iface);

    /* the manager and the timers: on every call while connecting, else now and then */
    if ((iface->hs_waiting > 0) || (--iface->timer_skip == 0)) {
        iface->timer_skip = AXON_RC_TIMER_INTERVAL;
        events += iface->cm->progress(iface);
        axon_rc_conn_timers(iface, axon_rc_now_ns());
        axon_rc_conn_reap(iface);
        axon_rcache_collect(iface->rcache);   /* unpin what the application unmapped */
    }
    return events;
}

/* ------------------------------------------------------------ open / close */

static axon_status_t axon_rc_iface_rx_init(axon_rc_iface_t *iface)
{
    return axon_verbs_srq_ring_init(&iface->rx, &iface->dev, &iface->rx_pool,
                                    iface->config.rx_queue_len, iface->window,
                                    (uint32_t)(sizeof(axon_rc_hdr_t) + iface->seg_size),
                                    iface->name);
}

axon_status_t axon_rc_iface_open(const axon_resource_t *resource, const axon_rc_config_t *c,
                                 const axon_iface_params_t *params, const axon_rc_cm_t *cm,
                                 const void *cm_config, axon_iface_t **iface_p)
{
    const axon_rc_md_t *md = (const axon_rc_md_t *)params->md;
    axon_rc_iface_t *iface;
    axon_status_t status;
    uint32_t tx_cqe;

    if ((md == NULL) || (md->cm != cm)) {
        axon_error("%s/%s: opened without the memory domain of its device", cm->name,
                   resource->dev_name);
        return AXON_ERR_INVALID_PARAM;
    }
    iface = calloc(1, cm->iface_size);
    if (iface == NULL) {
        axon_error("%s/%s: cannot allocate the interface", cm->name, resource->dev_name);
        return AXON_ERR_NO_MEMORY;
    }
    iface->ops                = axon_rc_iface_ops;
    iface->ops.dev_addr_len   = cm->dev_addr_len;
    iface->ops.iface_addr_len = cm->iface_addr_len;
    iface->super.ops          = &iface->ops;
    iface->super.resource     = resource;
    iface->config             = *c;
    iface->cm                 = cm;
    snprintf(iface->name, sizeof(iface->name), "%s/%s", cm->name, resource->dev_name);
    iface->am_arg       = params->am_arg;
    iface->peer_failure = params->peer_failure;
    iface->worker_uuid  = params->worker_uuid;
    if (params->am_handlers != NULL) {
        memcpy(iface->am_handlers, params->am_handlers, sizeof(iface->am_handlers));
    }
    iface->seg_size     = c->seg_size;
    iface->max_short    = resource->max_short;
    iface->window       = c->fc_window;
    iface->tx_depth     = 1;
    while (iface->tx_depth < c->tx_queue_len) {
        iface->tx_depth <<= 1;
    }
    iface->timeout_exp  = axon_verbs_timeout_exp(c->timeout);
    iface->keepalive_ns = (uint64_t)(c->keepalive_interval * 1e9);
    iface->connect_ns   = (uint64_t)(c->connect_timeout * 1e9);
    iface->timer_skip   = AXON_RC_TIMER_INTERVAL;
    iface->next_conn_id = (uint32_t)axon_sys_generate_uuid() | 1;
    axon_list_init(&iface->conns);
    axon_list_init(&iface->closing);

    iface->dev    = md->dev;
    iface->md     = (axon_rc_md_t *)md;
    iface->rcache = md->rcache;
    iface->max_inline = (c->max_inline < iface->dev.dev_attr.max_inline_data) ?
                        c->max_inline : iface->dev.dev_attr.max_inline_data;
    /* every send WR may complete (flush), so the send CQ has room for all of them */
    tx_cqe             = (c->tx_bufs > 1024) ? c->tx_bufs * 4 : 4096;
    iface->tx_cq_avail = (int)tx_cqe;
    if (((status = axon_verbs_cq_create(&iface->dev, (int)tx_cqe, &iface->send_cq)) != AXON_OK) ||
        ((status = axon_verbs_cq_create(&iface->dev, (int)c->rx_queue_len * 2,
                                        &iface->recv_cq)) != AXON_OK) ||
        ((status = axon_verbs_bufpool_init(&iface->tx_pool, &iface->dev, "rc send",
                                           sizeof(axon_rc_hdr_t) + c->seg_size,
                                           c->tx_bufs)) != AXON_OK) ||
        ((status = axon_verbs_bufpool_init(&iface->rx_pool, &iface->dev, "rc receive",
                                           sizeof(axon_rc_hdr_t) + c->seg_size,
                                           c->rx_queue_len)) != AXON_OK) ||
        ((status = axon_rc_iface_rx_init(iface)) != AXON_OK) ||
        ((status = axon_rc_conn_iface_init(iface)) != AXON_OK) ||
        ((status = cm->init(iface, cm_config)) != AXON_OK)) {
        axon_rc_iface_close(&iface->super);
        return status;
    }
    axon_debug("%s: open (%s back end, inline %u, ack timeout exponent %u)", iface->name,
               iface->dev.ctx->backend, iface->max_inline, iface->timeout_exp);
    *iface_p = &iface->super;
    return AXON_OK;
}

static void axon_rc_iface_close(axon_iface_t *tl_iface)
{
    axon_rc_iface_t *iface = (axon_rc_iface_t *)tl_iface;

    axon_rc_conn_close_all(iface);
    iface->cm->cleanup(iface);
    axon_rc_conn_iface_cleanup(iface);
    axon_rc_layout_keys_cleanup(iface);
    axon_verbs_srq_ring_cleanup(&iface->rx);
    axon_verbs_bufpool_cleanup(&iface->rx_pool);
    axon_verbs_bufpool_cleanup(&iface->tx_pool);
    axon_verbs_bufpool_cleanup(&iface->amo_pool);
    axon_verbs_cq_destroy(iface->name, iface->recv_cq);
    axon_verbs_cq_destroy(iface->name, iface->send_cq);
    free(iface);
}
