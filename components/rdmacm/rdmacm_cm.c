/*
 * rdmacm connections: the device through the CM, the CM calls of the active
 * side, and the events of the channel turned into rc connection states
 * (rdmacm.h has the rules).
 *
 * The CM shares one device context between its ids, and a QP it connects
 * must live on that context: the iface's PD, CQs and SRQ are made on the
 * context axon_dev_cm_open_device gives. A connection waits in REP_SENT
 * until the CM reports ESTABLISHED, so rc's connect deadline still covers a
 * CM that never answers; the first message of the peer confirms it too, as
 * an RTU does. Freeing the connection disconnects and destroys its id.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rdmacm.h"

static const char *const axon_rdmacm_rej_strs[] = {
    [AXON_RDMACM_REJ_NONE]         = "rejected by the peer",
    [AXON_RDMACM_REJ_RACE]         = "simultaneous connect",
    [AXON_RDMACM_REJ_WRONG_WORKER] = "the address belongs to another worker now",
    [AXON_RDMACM_REJ_VERSION]      = "wire version mismatch",
    [AXON_RDMACM_REJ_NO_RESOURCE]  = "the peer is out of resources",
};

static const char *axon_rdmacm_addr_str(const axon_dev_cm_id_t *id, char *buf, size_t max)
{
    char ip[INET_ADDRSTRLEN] = "?";

    inet_ntop(AF_INET, &id->dst_addr.sin_addr, ip, sizeof(ip));
    snprintf(buf, max, "%s:%u", ip, ntohs(id->dst_addr.sin_port));
    return buf;
}

static void axon_rdmacm_hello_fill(const axon_rdmacm_iface_t *iface, uint64_t peer_uuid,
                                   uint8_t reason, axon_rdmacm_hello_t *h)
{
    memset(h, 0, sizeof(*h));
    h->version  = AXON_RDMACM_WIRE_VERSION;
    h->reason   = reason;
    h->window   = (uint16_t)iface->rc.window;
    h->ka_rkey  = iface->rc.ka_mr->rkey;
    h->src_uuid = iface->rc.worker_uuid;
    h->dst_uuid = peer_uuid;
    h->ka_addr  = (uintptr_t)iface->rc.ka_buf;
}

/* The peer's HELLO from an event's private data; 0 if there is none. */
static int axon_rdmacm_hello_get(const axon_dev_cm_event_t *ev, axon_rdmacm_hello_t *h)
{
    const axon_dev_cm_conn_param_t *c = &ev->param.conn;

    if ((c->private_data == NULL) || (c->private_data_len < sizeof(*h))) {
        return 0;
    }
    memcpy(h, c->private_data, sizeof(*h));
    return h->version == AXON_RDMACM_WIRE_VERSION;
}

/* Connection parameters of connect and accept, with our HELLO. */
static void axon_rdmacm_conn_param(const axon_rdmacm_iface_t *iface,
                                   const axon_rdmacm_hello_t *hello,
                                   axon_dev_cm_conn_param_t *param)
{
    const axon_dev_attr_t *a = &iface->rc.dev.dev_attr;

    memset(param, 0, sizeof(*param));
    param->private_data        = hello;
    param->private_data_len    = sizeof(*hello);
    param->responder_resources = (uint8_t)((a->max_qp_rd_atom < AXON_RC_MAX_RD_ATOMIC) ?
                                           a->max_qp_rd_atom : AXON_RC_MAX_RD_ATOMIC);
    param->initiator_depth     = (uint8_t)((a->max_qp_init_rd_atom < AXON_RC_MAX_RD_ATOMIC) ?
                                           a->max_qp_init_rd_atom : AXON_RC_MAX_RD_ATOMIC);
    param->retry_count         = (uint8_t)iface->rc.config.retry_count;
    param->rnr_retry_count     = AXON_RC_RNR_RETRY;
}

/* ------------------------------------------------------------ device */

axon_status_t axon_rdmacm_dev_open(axon_verbs_dev_t *dev, const char *dev_name, int gid_index)
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

void axon_rdmacm_dev_close(axon_verbs_dev_t *dev)
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

void axon_rdmacm_conn_destroy(axon_rc_conn_t *conn)
{
    axon_dev_cm_id_t *id = conn->cm_id;

    id->context = NULL;   /* late events of the id find no connection */
    if (conn->cm_flags & AXON_RDMACM_F_ESTABLISHED) {
        (void)axon_dev_cm_disconnect(id);
    }
    (void)axon_dev_cm_destroy_qp(id);
    (void)axon_dev_cm_destroy_id(id);
    conn->cm_id = NULL;
}

/* A QP on id with the iface's queues, and the connection around it. */
static axon_status_t axon_rdmacm_conn_new(axon_rdmacm_iface_t *iface, axon_dev_cm_id_t *id,
                                          uint64_t peer_uuid, int active,
                                          axon_rc_conn_t **conn_p)
{
    axon_dev_qp_init_attr_t attr;
    axon_status_t status;
    int ret;

    memset(&attr, 0, sizeof(attr));
    attr.send_cq             = iface->rc.send_cq;
    attr.recv_cq             = iface->rc.recv_cq;
    attr.srq                 = iface->rc.rx.srq;
    attr.qp_type             = AXON_DEV_QPT_RC;
    attr.cap.max_send_wr     = iface->rc.tx_depth;
    attr.cap.max_send_sge    = 3;   /* as rc's own QPs: header, AM header, payload */
    attr.cap.max_inline_data = iface->rc.max_inline;
    if ((ret = axon_dev_cm_create_qp(id, iface->rc.dev.pd, &attr)) != 0) {
        axon_error("%s: cannot create a QP for worker 0x%llx: %s", iface->rc.name,
                   (unsigned long long)peer_uuid, strerror(ret));
        return (ret == ENOMEM) ? AXON_ERR_NO_MEMORY : AXON_ERR_IO_ERROR;
    }
    status = axon_rc_conn_adopt(&iface->rc, id->qp, peer_uuid, active, conn_p);
    if (status != AXON_OK) {
        axon_dev_cm_destroy_qp(id);
        return status;
    }
    (*conn_p)->cm_id = id;
    id->context      = *conn_p;
    return AXON_OK;
}

/* ------------------------------------------------------------ active side */

axon_status_t axon_rdmacm_cm_connect(axon_rdmacm_iface_t *iface, uint64_t peer_uuid,
                                     const struct sockaddr_in *dst, axon_rc_conn_t **conn_p)
{
    struct sockaddr_in src = iface->addr;
    axon_dev_cm_id_t *id;
    axon_status_t status;
    char str[64];
    int ret;

    src.sin_port = 0;
    if ((ret = axon_dev_cm_create_id(iface->channel, NULL, AXON_DEV_CM_PS_TCP, &id)) != 0) {
        axon_error("%s: cannot create a CM id: %s", iface->rc.name, strerror(ret));
        return AXON_ERR_NO_MEMORY;
    }
    id->dst_addr = *dst;   /* for log lines if resolution fails (the CM sets it on success) */
    /* with a source address the id is bound to our device at once (librdmacm too) */
    ret = axon_dev_cm_resolve_addr(id, (const struct sockaddr *)&src,
                                   (const struct sockaddr *)dst, iface->timeout_ms);
    if (ret != 0) {
        axon_error("%s: cannot resolve %s (worker 0x%llx): %s", iface->rc.name,
                   axon_rdmacm_addr_str(id, str, sizeof(str)), (unsigned long long)peer_uuid,
                   strerror(ret));
        axon_dev_cm_destroy_id(id);
        return AXON_ERR_UNREACHABLE;
    }
    if (id->verbs != iface->rc.dev.ctx) {
        axon_error("%s: the connection manager bound %s to another device", iface->rc.name,
                   iface->addr_str);
        axon_dev_cm_destroy_id(id);
        return AXON_ERR_NO_DEVICE;
    }
    status = axon_rdmacm_conn_new(iface, id, peer_uuid, 1, conn_p);
    if (status != AXON_OK) {
        axon_dev_cm_destroy_id(id);
        return status;
    }
    (*conn_p)->peer_addr.link_layer = 0;   /* the CM knows where the peer is */
    return AXON_OK;
}

/* The connection could not be made: fail it with one line naming the address and why. */
static void axon_rdmacm_conn_error(axon_rc_conn_t *conn, const axon_dev_cm_event_t *ev)
{
    axon_rdmacm_iface_t *iface = (axon_rdmacm_iface_t *)conn->iface;
    axon_status_t status = AXON_ERR_UNREACHABLE;
    axon_rdmacm_hello_t h;
    char addr[64], why[256];

    axon_rdmacm_addr_str(ev->id, addr, sizeof(addr));
    switch (ev->event) {
    case AXON_DEV_CM_EVENT_REJECTED:
        if (ev->status == AXON_DEV_CM_REJ_INVALID_SERVICE_ID) {
            snprintf(why, sizeof(why), "%s rejected the connection: nobody listens there "
                     "(reject reason %d, invalid service ID)", addr, ev->status);
        } else if (ev->status < 0) {
            snprintf(why, sizeof(why), "%s refused the connection: %s", addr,
                     strerror(-ev->status));
        } else {
            if (!axon_rdmacm_hello_get(ev, &h) || (h.reason >= AXON_RDMACM_REJ_LAST)) {
                h.reason = AXON_RDMACM_REJ_NONE;
            }
            snprintf(why, sizeof(why), "%s rejected the connection: %s (reject reason %d)",
                     addr, axon_rdmacm_rej_strs[h.reason], ev->status);
        }
        break;
    case AXON_DEV_CM_EVENT_UNREACHABLE:
    case AXON_DEV_CM_EVENT_CONNECT_ERROR:
        status = AXON_ERR_ENDPOINT_TIMEOUT;
        snprintf(why, sizeof(why), "%s did not answer the connection request (%s: %s)", addr,
                 axon_dev_cm_event_str(ev->event),
                 (ev->status < 0) ? strerror(-ev->status) : "timeout");
        break;
    default:   /* ADDR_ERROR, ROUTE_ERROR */
        snprintf(why, sizeof(why), "no route to %s from %s (%s: %s)", addr, iface->addr_str,
                 axon_dev_cm_event_str(ev->event),
                 strerror((ev->status < 0) ? -ev->status : EHOSTUNREACH));
        break;
    }
    axon_rc_conn_fail(conn, status, why);
}

/* A connection that lost a simultaneous connect goes without a word (its eps moved). */
static void axon_rdmacm_conn_drop(axon_rc_conn_t *conn)
{
    conn->flags |= AXON_RC_CONN_F_PEER_BYE;   /* not a failure of the peer */
    axon_rc_conn_fail(conn, AXON_ERR_CANCELED, "simultaneous connect: the peer's connection is "
                      "used");
}

static void axon_rdmacm_on_rejected(axon_rc_conn_t *conn, const axon_dev_cm_event_t *ev)
{
    axon_rdmacm_hello_t h;

    if ((ev->status == AXON_DEV_CM_REJ_CONSUMER_DEFINED) && axon_rdmacm_hello_get(ev, &h) &&
        (h.reason == AXON_RDMACM_REJ_RACE)) {
        /* the peer's request to us wins: our eps move to it when it comes */
        conn->cm_flags |= AXON_RDMACM_F_LOST_RACE;
        if (conn->num_eps == 0) {
            axon_rdmacm_conn_drop(conn);
        }
        return;
    }
    axon_rdmacm_conn_error(conn, ev);
}

static void axon_rdmacm_on_established(axon_rc_conn_t *conn, const axon_dev_cm_event_t *ev)
{
    axon_rdmacm_hello_t h;
    char addr[64], why[160];

    if (conn->active) {
        if (!axon_rdmacm_hello_get(ev, &h) || (h.src_uuid != conn->peer_uuid)) {
            snprintf(why, sizeof(why), "%s accepted without a HELLO of worker 0x%llx",
                     axon_rdmacm_addr_str(ev->id, addr, sizeof(addr)),
                     (unsigned long long)conn->peer_uuid);
            axon_rc_conn_fail(conn, AXON_ERR_UNREACHABLE, why);
            return;
        }
        axon_rc_conn_set_peer(conn, h.window, h.ka_addr, h.ka_rkey);
    }
    conn->cm_flags |= AXON_RDMACM_F_ESTABLISHED;
    axon_rc_conn_rx_ctrl(conn, AXON_RC_MSG_RTU);   /* the CM's RTU went through */
}

static void axon_rdmacm_on_disconnected(axon_rdmacm_iface_t *iface, axon_rc_conn_t *conn)
{
    unsigned i;

    if (conn->state == AXON_RC_CONN_FAILED) {
        return;
    }
    /* the peer's goodbye came before its disconnect: let it be received first */
    for (i = 0; (i < 64) && !(conn->flags & AXON_RC_CONN_F_PEER_BYE); ++i) {
        if (axon_rc_iface_poll(&iface->rc) == 0) {
            break;
        }
    }
    if (conn->num_eps == 0) {
        conn->flags |= AXON_RC_CONN_F_PEER_BYE;   /* we were leaving too: nobody to tell */
    }
    axon_rc_conn_fail(conn, AXON_ERR_CONNECTION_RESET,
                      "the peer disconnected (rdma cm DISCONNECTED) without saying goodbye");
}

/* ------------------------------------------------------------ passive side */

static void axon_rdmacm_reject(axon_rdmacm_iface_t *iface, axon_dev_cm_id_t *id,
                               uint64_t peer_uuid, axon_rdmacm_rej_t reason)
{
    axon_rdmacm_hello_t h;

    axon_rdmacm_hello_fill(iface, peer_uuid, (uint8_t)reason, &h);
    (void)axon_dev_cm_reject(id, &h, sizeof(h));
}

/* Returns 1 if the id was taken (accepted), 0 if it is to be destroyed. */
static int axon_rdmacm_on_request(axon_rdmacm_iface_t *iface, const axon_dev_cm_event_t *ev)
{
    axon_dev_cm_id_t *id = ev->id;
    axon_rc_conn_t *old, *conn;
    axon_dev_cm_conn_param_t param;
    axon_rdmacm_hello_t h, mine;
    char addr[64], why[160];
    int ret;

    if (!axon_rdmacm_hello_get(ev, &h)) {
        axon_debug("%s: connection request without a valid HELLO: rejected", iface->rc.name);
        axon_rdmacm_reject(iface, id, 0, AXON_RDMACM_REJ_VERSION);
        return 0;
    }
    if (h.dst_uuid != iface->rc.worker_uuid) {
        axon_debug("%s: request from worker 0x%llx for worker 0x%llx, not here: rejected",
                   iface->rc.name, (unsigned long long)h.src_uuid,
                   (unsigned long long)h.dst_uuid);
        axon_rdmacm_reject(iface, id, h.src_uuid, AXON_RDMACM_REJ_WRONG_WORKER);
        return 0;
    }
    old = axon_rc_conn_by_uuid(&iface->rc, h.src_uuid);
    if ((old != NULL) && old->active && !(old->cm_flags & AXON_RDMACM_F_LOST_RACE) &&
        !(old->flags & AXON_RC_CONN_F_PEER_BYE) && (iface->rc.worker_uuid < h.src_uuid)) {
        /* both connect: ours wins (up or not yet), the peer moves its eps to it */
        axon_rdmacm_reject(iface, id, h.src_uuid, AXON_RDMACM_REJ_RACE);
        return 0;
    }
    if (axon_rdmacm_conn_new(iface, id, h.src_uuid, 0, &conn) != AXON_OK) {
        axon_rdmacm_reject(iface, id, h.src_uuid, AXON_RDMACM_REJ_NO_RESOURCE);
        return 0;
    }
    axon_rc_conn_set_peer(conn, h.window, h.ka_addr, h.ka_rkey);
    if (old != NULL) {
        if (old->active && (old->state == AXON_RC_CONN_REP_SENT)) {
            axon_rc_conn_move_eps(old, conn);   /* the peer's wins: ours goes */
            axon_rdmacm_conn_drop(old);
        } else {
            /* the peer started over (after its goodbye, or a failure) */
            axon_rc_conn_retire(old);
        }
    }
    axon_rdmacm_hello_fill(iface, h.src_uuid, AXON_RDMACM_REJ_NONE, &mine);
    axon_rdmacm_conn_param(iface, &mine, &param);
    ret = axon_dev_cm_accept(id, &param);
    if (ret != 0) {
        /* the requester gave up already: a failure only for eps that were waiting on it */
        if (conn->num_eps == 0) {
            conn->flags |= AXON_RC_CONN_F_PEER_BYE;
        }
        snprintf(why, sizeof(why), "cannot accept the request of %s: %s",
                 axon_rdmacm_addr_str(id, addr, sizeof(addr)), strerror(ret));
        axon_rc_conn_fail(conn, AXON_ERR_UNREACHABLE, why);
    }
    return 1;   /* the connection owns the id now: freed with it */
}

/* ------------------------------------------------------------ events */

static void axon_rdmacm_cm_event(axon_rdmacm_iface_t *iface, axon_dev_cm_event_t *ev)
{
    axon_rc_conn_t *conn = ev->id->context;
    axon_dev_cm_conn_param_t param;
    axon_rdmacm_hello_t hello;
    char addr[64], why[160];
    int ret;

    axon_trace("%s: %s (status %d) on id %p", iface->rc.name, axon_dev_cm_event_str(ev->event),
               ev->status, (void *)ev->id);
    if (ev->event == AXON_DEV_CM_EVENT_CONNECT_REQUEST) {
        axon_dev_cm_id_t *id = ev->id;
        int taken = axon_rdmacm_on_request(iface, ev);
        axon_dev_cm_ack_event(ev);
        if (!taken) {
            axon_dev_cm_destroy_id(id);
        }
        return;
    }
    if ((conn == NULL) || (conn->state == AXON_RC_CONN_FAILED)) {
        axon_dev_cm_ack_event(ev);   /* a connection gone already */
        return;
    }
    switch (ev->event) {
    case AXON_DEV_CM_EVENT_ADDR_RESOLVED:
        if ((ret = axon_dev_cm_resolve_route(ev->id, iface->timeout_ms)) != 0) {
            snprintf(why, sizeof(why), "cannot resolve the route to %s: %s",
                     axon_rdmacm_addr_str(ev->id, addr, sizeof(addr)), strerror(ret));
            axon_rc_conn_fail(conn, AXON_ERR_UNREACHABLE, why);
        }
        break;
    case AXON_DEV_CM_EVENT_ROUTE_RESOLVED:
        axon_rdmacm_hello_fill(iface, conn->peer_uuid, AXON_RDMACM_REJ_NONE, &hello);
        axon_rdmacm_conn_param(iface, &hello, &param);
        if ((ret = axon_dev_cm_connect(ev->id, &param)) != 0) {
            snprintf(why, sizeof(why), "cannot connect to %s: %s",
                     axon_rdmacm_addr_str(ev->id, addr, sizeof(addr)), strerror(ret));
            axon_rc_conn_fail(conn, AXON_ERR_UNREACHABLE, why);
        }
        break;
    case AXON_DEV_CM_EVENT_ESTABLISHED:
        axon_rdmacm_on_established(conn, ev);
        break;
    case AXON_DEV_CM_EVENT_REJECTED:
        axon_rdmacm_on_rejected(conn, ev);
        break;
    case AXON_DEV_CM_EVENT_ADDR_ERROR:
    case AXON_DEV_CM_EVENT_ROUTE_ERROR:
    case AXON_DEV_CM_EVENT_UNREACHABLE:
    case AXON_DEV_CM_EVENT_CONNECT_ERROR:
        axon_rdmacm_conn_error(conn, ev);
        break;
    case AXON_DEV_CM_EVENT_DISCONNECTED:
    case AXON_DEV_CM_EVENT_DEVICE_REMOVAL:
        axon_rdmacm_on_disconnected(iface, conn);
        break;
    default:
        break;   /* TIMEWAIT_EXIT, ADDR_CHANGE: nothing to do */
    }
    axon_dev_cm_ack_event(ev);
}

unsigned axon_rdmacm_cm_progress(axon_rc_iface_t *rc_iface)
{
    axon_rdmacm_iface_t *iface = (axon_rdmacm_iface_t *)rc_iface;
    axon_dev_cm_event_t *ev;
    unsigned n;
    int ret;

    for (n = 0; n < AXON_RDMACM_EVENTS_MAX; ++n) {
        ret = axon_dev_cm_get_event(iface->channel, &ev);
        if (ret != 0) {
            if (ret != EAGAIN) {
                axon_error("%s: reading the CM event channel: %s", iface->rc.name,
                           strerror(ret));
            }
            break;
        }
        axon_rdmacm_cm_event(iface, ev);
    }
    return n;
}
