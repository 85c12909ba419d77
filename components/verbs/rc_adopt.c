/*
 * rc connections that someone else set up: the rdmacm transport connects
 * QPs through the device layer's connection manager (dev_cm.h) and hands
 * them to rc's data path here, without rc's UD handshake.
 *
 * The CM shares one device context between its ids, and a QP it connects
 * must live on that context: the iface's PD, CQs and SRQ are made on the
 * context axon_dev_cm_open_device gives (axon_rc_adopt_dev_open). A
 * connection adopted here waits in REP_SENT ("the QP is connected, the peer
 * has not confirmed") until the CM reports ESTABLISHED, so rc's own
 * connect deadline still covers a CM that never answers; the first message
 * of the peer confirms it too, as an RTU does. Freeing the connection
 * disconnects and destroys the CM id (axon_rc_adopt_teardown).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rc_adopt.h"

/* ------------------------------------------------------------ device */

axon_status_t axon_rc_adopt_dev_open(axon_verbs_dev_t *dev, const char *dev_name, int gid_index)
{
    char name[AXON_DEV_NAME_LEN];
    const char *colon = strrchr(dev_name, ':');
    int ret;

    memset(dev, 0, sizeof(*dev));
    if ((colon == NULL) || ((size_t)(colon - dev_name) >= sizeof(name)) ||
        (atoi(colon + 1) < 1) || (atoi(colon + 1) > 255)) {
        axon_error("rdmacm: bad device name '%s' (expected <device>:<port>)", dev_name);
        return AXON_ERR_INVALID_PARAM;
    }
    memcpy(name, dev_name, (size_t)(colon - dev_name));
    name[colon - dev_name] = '\0';
    snprintf(dev->name, sizeof(dev->name), "%s", dev_name);
    dev->port_num  = (uint8_t)atoi(colon + 1);
    dev->gid_index = gid_index;
    if ((ret = axon_dev_cm_open_device(name, &dev->ctx)) != 0) {
        axon_error("rdmacm: cannot open %s through the connection manager: %s", name,
                   strerror(ret));
        return AXON_ERR_NO_DEVICE;
    }
    dev->backend = (strcmp(dev->ctx->backend, "softib") == 0) ? AXON_VERBS_BACKEND_SOFTIB :
                                                                 AXON_VERBS_BACKEND_RDMACORE;
    if (((ret = axon_dev_query_device(dev->ctx, &dev->dev_attr)) != 0) ||
        ((ret = axon_dev_query_port(dev->ctx, dev->port_num, &dev->port_attr)) != 0) ||
        ((ret = axon_dev_query_gid(dev->ctx, dev->port_num, gid_index, &dev->gid)) != 0) ||
        ((ret = axon_dev_alloc_pd(dev->ctx, &dev->pd)) != 0)) {
        axon_error("rdmacm: %s: device query or alloc_pd failed: %s", dev->name, strerror(ret));
        axon_dev_cm_close_device(dev->ctx);
        dev->ctx = NULL;
        return AXON_ERR_NO_DEVICE;
    }
    return AXON_OK;
}

void axon_rc_adopt_dev_close(axon_verbs_dev_t *dev)
{
    int ret;

    if (dev->ctx == NULL) {
        return;
    }
    if ((dev->pd != NULL) && ((ret = axon_dev_dealloc_pd(dev->pd)) != 0)) {
        axon_warn("rdmacm: %s: dealloc_pd: %s (objects still use it)", dev->name, strerror(ret));
    }
    axon_dev_cm_close_device(dev->ctx);
    dev->ctx = NULL;
    dev->pd  = NULL;
}

/* ------------------------------------------------------------ connections */

void axon_rc_adopt_qp_attr(const axon_rc_iface_t *iface, axon_dev_qp_init_attr_t *attr)
{
    memset(attr, 0, sizeof(*attr));
    attr->send_cq             = iface->send_cq;
    attr->recv_cq             = iface->recv_cq;
    attr->srq                 = iface->srq;
    attr->qp_type             = AXON_DEV_QPT_RC;
    attr->cap.max_send_wr     = iface->tx_depth;
    attr->cap.max_send_sge    = 3;   /* as rc's own QPs: header, AM header, payload */
    attr->cap.max_inline_data = iface->max_inline;
}

axon_status_t axon_rc_conn_adopt(axon_rc_iface_t *iface, axon_dev_qp_t *qp, uint64_t peer_uuid,
                                 void *cm_id, int active, axon_rc_conn_t **conn_p)
{
    axon_verbs_dev_addr_t none;
    axon_rc_conn_t *conn;
    axon_status_t status;

    memset(&none, 0, sizeof(none));
    status = axon_rc_conn_new(iface, peer_uuid, &none, 0, qp, &conn);
    if (status != AXON_OK) {
        return status;
    }
    conn->cm_id  = cm_id;
    conn->active = (uint8_t)active;
    axon_rc_conn_set_state(conn, AXON_RC_CONN_REP_SENT);
    conn->hs_deadline = axon_rc_now_ns() + iface->connect_ns;
    *conn_p = conn;
    return AXON_OK;
}

void axon_rc_conn_adopt_peer(axon_rc_conn_t *conn, uint16_t window, uint64_t ka_addr,
                             uint32_t ka_rkey)
{
    conn->peer_window  = window;
    conn->tx_credits   = window;
    conn->peer_ka_addr = ka_addr;
    conn->peer_ka_rkey = ka_rkey;
}

void axon_rc_conn_adopt_established(axon_rc_conn_t *conn)
{
    /* the CM's RTU went through: what an RTU on the QP does for rc's handshake */
    axon_rc_conn_rx_ctrl(conn, AXON_RC_MSG_RTU);
}

axon_status_t axon_rc_adopt_ep_new(axon_rc_iface_t *iface, axon_rc_conn_t *conn,
                                   uint64_t peer_uuid, axon_tl_ep_t **ep_p)
{
    axon_rc_ep_t *ep = calloc(1, sizeof(*ep));

    if (ep == NULL) {
        axon_error("%s: cannot allocate an endpoint", iface->name);
        return AXON_ERR_NO_MEMORY;
    }
    ep->super.iface = &iface->super;
    ep->peer_uuid   = peer_uuid;
    ep->status      = AXON_OK;
    ep->conn        = conn;
    axon_list_add_tail(&conn->eps, &ep->link);
    ++conn->num_eps;
    *ep_p = &ep->super;
    return AXON_OK;
}

void axon_rc_adopt_move_eps(axon_rc_conn_t *from, axon_rc_conn_t *to)
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

void axon_rc_adopt_teardown(axon_rc_conn_t *conn)
{
    axon_dev_cm_id_t *id = conn->cm_id;

    id->context = NULL;   /* late events of the id find no connection */
    if (conn->cm_flags & AXON_RC_ADOPT_F_ESTABLISHED) {
        (void)axon_dev_cm_disconnect(id);
    }
    (void)axon_dev_cm_destroy_qp(id);
    (void)axon_dev_cm_destroy_id(id);
    conn->cm_id = NULL;
}
