/* rc endpoints and the send path. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rc.h"

/* ------------------------------------------------------------ posting */

axon_status_t axon_rc_conn_post(axon_rc_conn_t *conn, axon_dev_send_wr_t *wr, void *buf,
                                axon_tl_completion_t *comp, axon_rcache_region_t *region,
                                int force_signal)
{
    axon_rc_iface_t *iface = conn->iface;
    uint64_t sn            = conn->tx_posted;
    axon_rc_tx_desc_t *d   = &conn->tx_desc[sn & (conn->tx_depth - 1)];
    axon_dev_send_wr_t *bad;
    int signal, ret;

    if (__builtin_expect(!axon_rc_conn_can_post(conn), 0)) {
        return AXON_ERR_NO_RESOURCE;
    }
    /* signal one in tx_moderation, and the WR taking the last slot so it frees them all */
    signal = force_signal || (sn + 1 - conn->tx_signaled >= iface->config.tx_moderation) ||
             (sn + 1 - conn->tx_completed == conn->tx_depth);
    if (signal) {
        wr->send_flags |= AXON_DEV_SEND_SIGNALED;
    }
    wr->wr_id = (uintptr_t)d;
    wr->next  = NULL;
    d->buf    = buf;
    d->comp   = comp;
    d->region = region;
    ret = axon_dev_post_send(conn->qp, wr, &bad);
    if (__builtin_expect(ret != 0, 0)) {
        d->buf = d->comp = NULL;
        d->region = NULL;
        axon_error("%s: post_send to worker 0x%llx (opcode %d): error %d", iface->name,
                   (unsigned long long)conn->peer_uuid, wr->opcode, ret);
        return AXON_ERR_IO_ERROR;
    }
    conn->tx_posted = sn + 1;
    --iface->tx_cq_avail;
    d->signaled = signal;
    if (signal) {
        conn->tx_signaled = sn + 1;
        ++iface->tx_signaled;
    }
    return AXON_OK;
}

/* Credits to return in a header: all that were consumed, at most what the field holds. */
static inline uint16_t axon_rc_conn_take_credits(axon_rc_conn_t *conn)
{
    uint32_t c = (conn->rx_credits > 0xffff) ? 0xffff : conn->rx_credits;

    conn->rx_credits -= c;
    return (uint16_t)c;
}

static inline void axon_rc_hdr_init(axon_rc_hdr_t *hdr, uint8_t am_id, uint8_t type,
                                    uint16_t credits)
{
    hdr->am_id    = am_id;
    hdr->type     = type;
    hdr->credits  = credits;
    hdr->reserved = 0;
}

axon_status_t axon_rc_conn_send_ctrl(axon_rc_conn_t *conn, uint8_t type)
{
    axon_rc_iface_t *iface = conn->iface;
    axon_dev_send_wr_t wr;
    axon_dev_sge_t sge;
    axon_rc_hdr_t hdr, *bhdr;
    axon_status_t status;
    void *buf = NULL;
    uint16_t credits;

    if (!axon_rc_conn_can_post(conn)) {
        return AXON_ERR_NO_RESOURCE;
    }
    memset(&wr, 0, sizeof(wr));
    credits = axon_rc_conn_take_credits(conn);
    if (iface->max_inline >= sizeof(hdr)) {
        axon_rc_hdr_init(&hdr, 0, type, credits);
        sge.addr        = (uintptr_t)&hdr;
        sge.lkey        = 0;
        wr.send_flags   = AXON_DEV_SEND_INLINE;
    } else {
        buf = axon_verbs_bufpool_get(&iface->tx_pool);
        if (buf == NULL) {
            conn->rx_credits += credits;
            return AXON_ERR_NO_RESOURCE;
        }
        bhdr = buf;
        axon_rc_hdr_init(bhdr, 0, type, credits);
        sge.addr = (uintptr_t)buf;
        sge.lkey = axon_verbs_bufpool_lkey(&iface->tx_pool);
    }
    sge.length = sizeof(hdr);
    wr.opcode  = AXON_DEV_WR_SEND;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    status = axon_rc_conn_post(conn, &wr, buf, NULL, NULL,
                               (type == AXON_RC_MSG_BYE) || (type == AXON_RC_MSG_LEAVE));
    if (status != AXON_OK) {
        conn->rx_credits += credits;
        if (buf != NULL) {
            axon_verbs_bufpool_put(&iface->tx_pool, buf);
        }
    }
    return status;
}

/* ------------------------------------------------------------ endpoints */

axon_status_t axon_rc_ep_create(axon_iface_t *tl_iface, uint64_t peer_uuid, const void *dev_addr,
                                const void *iface_addr, axon_tl_ep_t **ep_p)
{
    axon_rc_iface_t *iface = (axon_rc_iface_t *)tl_iface;
    axon_rc_conn_t *conn = NULL;
    axon_status_t status;
    axon_rc_ep_t *ep;

    if ((dev_addr == NULL) || (iface_addr == NULL) || (ep_p == NULL)) {
        axon_error("%s: ep_create: NULL %s", iface->name,
                   (dev_addr == NULL) ? "device address" :
                   (iface_addr == NULL) ? "iface address" : "ep_p");
        return AXON_ERR_INVALID_PARAM;
    }
    ep = calloc(1, sizeof(*ep));
    if (ep == NULL) {
        axon_error("%s: cannot allocate an endpoint", iface->name);
        return AXON_ERR_NO_MEMORY;
    }
    /* one connection per pair of workers: a later ep (ours or the peer's) reuses it */
    status = iface->cm->conn_get(iface, peer_uuid, dev_addr, iface_addr, &conn);
    if (status != AXON_OK) {
        free(ep);
        return status;
    }
    ep->super.iface = tl_iface;
    ep->conn        = conn;
    ep->peer_uuid   = peer_uuid;
    ep->status      = AXON_OK;
    axon_list_add_tail(&conn->eps, &ep->link);
    ++conn->num_eps;
    *ep_p = &ep->super;
    return AXON_OK;
}

void axon_rc_ep_destroy(axon_tl_ep_t *tl_ep)
{
    axon_rc_ep_t *ep     = (axon_rc_ep_t *)tl_ep;
    axon_rc_conn_t *conn = ep->conn;

    if (conn != NULL) {
        axon_list_del(&ep->link);
        --conn->num_eps;
        axon_rc_conn_ep_removed(conn);
    }
    free(ep);
}

/* The connection an AM may go out on now, or the status to return. */
static inline axon_status_t axon_rc_ep_am_conn(axon_rc_ep_t *ep, axon_rc_conn_t **conn_p)
{
    axon_rc_conn_t *conn = ep->conn;

    if (__builtin_expect(conn == NULL, 0)) {
        return ep->status;
    }
    if (__builtin_expect((conn->state != AXON_RC_CONN_OPEN) ||
                         (conn->flags & AXON_RC_CONN_F_RTU_PENDING) ||
                         (conn->tx_credits <= 0) || !axon_rc_conn_can_post(conn), 0)) {
        return AXON_ERR_NO_RESOURCE;   /* connecting, or the peer's window is full */
    }
    *conn_p = conn;
    return AXON_OK;
}

axon_status_t axon_rc_ep_am_short(axon_tl_ep_t *tl_ep, uint8_t am_id, const void *hdr,
                                  size_t hdr_len, const void *payload, size_t length)
{
    axon_rc_ep_t *ep = (axon_rc_ep_t *)tl_ep;
    axon_rc_iface_t *iface = (axon_rc_iface_t *)tl_ep->iface;
    axon_dev_send_wr_t wr;
    axon_dev_sge_t sge[3];
    axon_rc_hdr_t h, *bh;
    axon_rc_conn_t *conn = NULL;
    axon_status_t status;
    uint16_t credits;
    uint8_t *buf = NULL;

    if (__builtin_expect((hdr_len + length > iface->max_short) || (am_id >= AXON_AM_ID_MAX), 0)) {
        axon_error("%s: am_short of %zu bytes with AM id %u (max %zu bytes, id < %u)",
                   iface->name, hdr_len + length, am_id, iface->max_short, AXON_AM_ID_MAX);
        return AXON_ERR_INVALID_PARAM;
    }
    status = axon_rc_ep_am_conn(ep, &conn);
    if (status != AXON_OK) {
        return status;
    }
    bh = axon_verbs_am_short_wr(&iface->tx_pool, iface->max_inline, &h, sizeof(h), hdr,
                                hdr_len, payload, length, &wr, sge, &buf);
    if (bh == NULL) {
        return AXON_ERR_NO_RESOURCE;
    }
    credits = axon_rc_conn_take_credits(conn);
    axon_rc_hdr_init(bh, am_id, AXON_RC_MSG_AM, credits);
    status = axon_rc_conn_post(conn, &wr, buf, NULL, NULL, 0);
    if (__builtin_expect(status != AXON_OK, 0)) {
        conn->rx_credits += credits;
        if (buf != NULL) {
            axon_verbs_bufpool_put(&iface->tx_pool, buf);
        }
        return status;
    }
    --conn->tx_credits;
    return AXON_OK;
}

ssize_t axon_rc_ep_am_bcopy(axon_tl_ep_t *tl_ep, uint8_t am_id, axon_pack_cb_t pack, void *arg)
{
    axon_rc_ep_t *ep = (axon_rc_ep_t *)tl_ep;
    axon_rc_iface_t *iface = (axon_rc_iface_t *)tl_ep->iface;
    axon_dev_send_wr_t wr;
    axon_dev_sge_t sge;
    axon_rc_conn_t *conn = NULL;
    axon_status_t status;
    uint16_t credits;
    uint8_t *buf;
    size_t len;

    if (__builtin_expect(am_id >= AXON_AM_ID_MAX, 0)) {
        axon_error("%s: am_bcopy with AM id %u (must be < %u)", iface->name, am_id,
                   AXON_AM_ID_MAX);
        return AXON_ERR_INVALID_PARAM;
    }
    status = axon_rc_ep_am_conn(ep, &conn);
    if (status != AXON_OK) {
        return status;
    }
    buf = axon_verbs_am_bcopy_pack(&iface->tx_pool, iface->name, sizeof(axon_rc_hdr_t),
                                   iface->seg_size, pack, arg, &len, &status);
    if (buf == NULL) {
        return status;
    }
    credits = axon_rc_conn_take_credits(conn);
    axon_rc_hdr_init((axon_rc_hdr_t *)buf, am_id, AXON_RC_MSG_AM, credits);
    axon_verbs_send_wr(&wr, &sge, buf, sizeof(axon_rc_hdr_t) + len, &iface->tx_pool,
                       iface->max_inline);
    status = axon_rc_conn_post(conn, &wr, (wr.send_flags & AXON_DEV_SEND_INLINE) ? NULL : buf,
                               NULL, NULL, 0);
    if (__builtin_expect(status != AXON_OK, 0)) {
        conn->rx_credits += credits;
        axon_verbs_bufpool_put(&iface->tx_pool, buf);
        return status;
    }
    if (wr.send_flags & AXON_DEV_SEND_INLINE) {
        axon_verbs_bufpool_put(&iface->tx_pool, buf);   /* copied at post */
    }
    --conn->tx_credits;
    return (ssize_t)len;
}

axon_status_t axon_rc_ep_flush(axon_tl_ep_t *tl_ep)
{
    axon_rc_ep_t *ep = (axon_rc_ep_t *)tl_ep;
    axon_rc_conn_t *conn = ep->conn;
    axon_dev_send_wr_t wr;

    if (conn == NULL) {
        return ep->status;
    }
    if (conn->tx_completed == conn->tx_posted) {
        return AXON_OK;
    }
    if ((conn->tx_signaled < conn->tx_posted) && (conn->state == AXON_RC_CONN_OPEN)) {
        /* the last WRs are unsignaled: a signaled empty write after them completes them */
        memset(&wr, 0, sizeof(wr));
        wr.opcode              = AXON_DEV_WR_RDMA_WRITE;
        wr.wr.rdma.remote_addr = conn->peer_ka_addr;
        wr.wr.rdma.rkey        = conn->peer_ka_rkey;
        (void)axon_rc_conn_post(conn, &wr, NULL, NULL, NULL, 1);
    }
    return AXON_INPROGRESS;
}

axon_status_t axon_rc_ep_check(axon_tl_ep_t *tl_ep)
{
    axon_rc_ep_t *ep = (axon_rc_ep_t *)tl_ep;

    return (ep->conn == NULL) ? ep->status : AXON_OK;
}
