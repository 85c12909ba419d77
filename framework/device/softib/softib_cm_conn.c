/*
 * softib's connection manager, the connection: the QP transitions it makes
 * (INIT at create_qp, RTR and RTS at accept or on the reply, the error
 * state at disconnect), the CM messages and the events they turn into, and
 * connect / accept / reject / establish / disconnect / destroy.
 */
#define _GNU_SOURCE
#include "axon_config.h"
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>
#include "log.h"
#include "softib.h"
#include "softib_cm.h"

/* Ack timeout of CM-made QPs: 4.096 us * 2^14 = 67 ms, as the suites use. */
#define SOFTIB_CM_QP_TIMEOUT   14
/* RNR NAK delay the responder asks for: code 12 = 0.64 ms. */
#define SOFTIB_CM_MIN_RNR      12

/* ------------------------------------------------------------ the QP */

static uint32_t softib_cm_random_psn(void);

/*
 * A UD QP of an RDMA_PS_UDP id is ready to send at once: the peer comes with
 * each WR. softib wants the manual's full attribute groups (seed §4.5), so
 * access flags (none: UD has no RDMA) and the port's MTU go along too.
 */
static int softib_cm_ud_qp_ready(axon_dev_qp_t *qp)
{
    axon_dev_port_attr_t port;
    axon_dev_qp_attr_t attr;
    int ret;

    memset(&attr, 0, sizeof(attr));
    attr.qp_state   = AXON_DEV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num   = SOFTIB_PORT_NUM;
    attr.qkey       = AXON_DEV_CM_UDP_QKEY;
    if (((ret = axon_dev_modify_qp(qp, &attr, AXON_DEV_QP_STATE | AXON_DEV_QP_PKEY_INDEX |
                                             AXON_DEV_QP_PORT | AXON_DEV_QP_QKEY |
                                             AXON_DEV_QP_ACCESS_FLAGS)) != 0) ||
        ((ret = axon_dev_query_port(qp->context, SOFTIB_PORT_NUM, &port)) != 0)) {
        return ret;
    }
    attr.qp_state = AXON_DEV_QPS_RTR;
    attr.path_mtu = port.active_mtu;
    if ((ret = axon_dev_modify_qp(qp, &attr, AXON_DEV_QP_STATE | AXON_DEV_QP_PATH_MTU)) != 0) {
        return ret;
    }
    attr.qp_state = AXON_DEV_QPS_RTS;
    attr.sq_psn   = softib_cm_random_psn();
    return axon_dev_modify_qp(qp, &attr, AXON_DEV_QP_STATE | AXON_DEV_QP_SQ_PSN);
}

int softib_cm_create_qp(axon_dev_cm_id_priv_t *id, axon_dev_pd_t *pd,
                               axon_dev_qp_init_attr_t *init_attr)
{
    axon_dev_qp_attr_t attr;
    axon_dev_qp_t *qp;
    int ret;

    if ((ret = axon_dev_create_qp(pd, init_attr, &qp)) != 0) {
        return ret;
    }
    if (id->super.ps == AXON_DEV_CM_PS_UDP) {
        if ((ret = softib_cm_ud_qp_ready(qp)) != 0) {
            axon_dev_destroy_qp(qp);
            return ret;
        }
        id->super.qp = qp;
        return 0;
    }
    /* READ and ATOMIC come at RTR, if the connection grants responder resources. */
    memset(&attr, 0, sizeof(attr));
    attr.qp_state        = AXON_DEV_QPS_INIT;
    attr.pkey_index      = 0;
    attr.port_num        = SOFTIB_PORT_NUM;
    attr.qp_access_flags = AXON_DEV_ACCESS_LOCAL_WRITE | AXON_DEV_ACCESS_REMOTE_WRITE;
    ret = axon_dev_modify_qp(qp, &attr, AXON_DEV_QP_STATE | AXON_DEV_QP_PKEY_INDEX |
                                        AXON_DEV_QP_PORT | AXON_DEV_QP_ACCESS_FLAGS);
    if (ret != 0) {
        axon_dev_destroy_qp(qp);
        return ret;
    }
    id->super.qp = qp;
    return 0;
}

void softib_cm_qp_gone(axon_dev_cm_id_priv_t *id)
{
    /* the QP is only ever reached through id->super.qp: only its groups to leave */
    if (softib_cm_sid(id) != NULL) {
        softib_cm_mcast_detach_all(softib_cm_sid(id));
    }
}

/* The PSN this side announces: chosen once, so a program's own QP that took
 * it from init_qp_attr before the REP and the REP agree. */
static uint32_t softib_cm_psn(softib_cm_id_t *sid)
{
    if (!sid->psn_chosen) {
        sid->psn        = softib_cm_random_psn();
        sid->psn_chosen = 1;
    }
    return sid->psn;
}

static uint8_t softib_cm_min(unsigned a, unsigned b)
{
    return (uint8_t)((a < b) ? a : b);
}

/* What the QP may receive: reads and atomics only where we grant responder resources. */
static int softib_cm_access(const softib_cm_id_t *sid)
{
    return AXON_DEV_ACCESS_LOCAL_WRITE | AXON_DEV_ACCESS_REMOTE_WRITE |
           ((sid->resp_res > 0) ? (AXON_DEV_ACCESS_REMOTE_READ | AXON_DEV_ACCESS_REMOTE_ATOMIC) :
                                  0);
}

/*
 * The attributes that take a QP of sid's connection to state: the CM's own
 * QP at connect/accept, or a program's QP through init_qp_attr. INIT needs
 * only the device; RTR and RTS the peer's REQ or REP (sid->peer). The read
 * depth this side may use is the peer's grant: the REP's responder resources
 * for the requester, the accept's init_depth (already bounded by the REQ's)
 * for the responder.
 */
static int softib_cm_qp_attr(softib_cm_id_t *sid, axon_dev_qp_state_t state,
                             axon_dev_qp_attr_t *attr, int *mask_p)
{
    const softib_cm_msg_t *p = &sid->peer;
    axon_dev_port_attr_t port;
    int ret;

    memset(attr, 0, sizeof(*attr));
    attr->qp_state = state;
    switch (state) {
    case AXON_DEV_QPS_INIT:
        attr->port_num        = SOFTIB_PORT_NUM;
        attr->qp_access_flags = softib_cm_access(sid);
        *mask_p = AXON_DEV_QP_STATE | AXON_DEV_QP_PKEY_INDEX | AXON_DEV_QP_PORT |
                  AXON_DEV_QP_ACCESS_FLAGS;
        return 0;
    case AXON_DEV_QPS_RTR:
        if ((ret = axon_dev_query_port(sid->id->super.verbs, SOFTIB_PORT_NUM, &port)) != 0) {
            return ret;
        }
        attr->path_mtu           = (p->mtu < port.active_mtu) ? (axon_dev_mtu_t)p->mtu :
                                                                 port.active_mtu;
        attr->dest_qp_num        = ntohl(p->qpn);
        attr->rq_psn             = ntohl(p->psn) & SOFTIB_PSN_MASK;
        attr->max_dest_rd_atomic = sid->resp_res;
        attr->min_rnr_timer      = SOFTIB_CM_MIN_RNR;
        attr->qp_access_flags    = softib_cm_access(sid);
        attr->ah_attr.is_global         = 1;
        attr->ah_attr.port_num          = SOFTIB_PORT_NUM;
        attr->ah_attr.grh.hop_limit     = SOFTIB_CM_HOP_LIMIT;
        attr->ah_attr.grh.sgid_index    = 0;
        attr->ah_attr.grh.traffic_class = sid->id->opts.tos;   /* rdma_set_option's, or 0 */
        memcpy(attr->ah_attr.grh.dgid.raw, p->gid, sizeof(p->gid));
        *mask_p = AXON_DEV_QP_STATE | AXON_DEV_QP_PATH_MTU | AXON_DEV_QP_DEST_QPN |
                  AXON_DEV_QP_RQ_PSN | AXON_DEV_QP_AV | AXON_DEV_QP_MAX_DEST_RD_ATOMIC |
                  AXON_DEV_QP_MIN_RNR_TIMER | AXON_DEV_QP_ACCESS_FLAGS;
        return 0;
    case AXON_DEV_QPS_RTS:
        attr->sq_psn        = softib_cm_psn(sid);
        attr->timeout       = sid->id->opts.has_ack_timeout ? sid->id->opts.ack_timeout :
                                                              SOFTIB_CM_QP_TIMEOUT;
        attr->retry_cnt     = sid->retry;
        attr->rnr_retry     = p->rnr_retry_count;   /* the peer's, for our QP */
        attr->max_rd_atomic = (sid->listener != NULL) ? sid->init_depth :
                              softib_cm_min(sid->init_depth, p->responder_resources);
        *mask_p = AXON_DEV_QP_STATE | AXON_DEV_QP_SQ_PSN | AXON_DEV_QP_TIMEOUT |
                  AXON_DEV_QP_RETRY_CNT | AXON_DEV_QP_RNR_RETRY | AXON_DEV_QP_MAX_QP_RD_ATOMIC;
        return 0;
    default:
        axon_error("softib cm: init_qp_attr: QP state %d (INIT, RTR or RTS)", (int)state);
        return EINVAL;
    }
}

/* The id's QP to RTR and RTS towards sid->peer (REQ or REP). */
int softib_cm_qp_connect(softib_cm_id_t *sid)
{
    static const axon_dev_qp_state_t states[] = {AXON_DEV_QPS_RTR, AXON_DEV_QPS_RTS};
    axon_dev_qp_attr_t attr;
    unsigned i;
    int mask, ret;

    for (i = 0; i < sizeof(states) / sizeof(states[0]); ++i) {
        if (((ret = softib_cm_qp_attr(sid, states[i], &attr, &mask)) != 0) ||
            ((ret = axon_dev_modify_qp(sid->id->super.qp, &attr, mask)) != 0)) {
            return ret;
        }
    }
    return 0;
}

/*
 * rdma_init_qp_attr: for a program's own QP (rping -q). RTR and RTS once the
 * peer is known: a request's id (the accept's grants default to the
 * request's, as accept without parameters gives them), or the requester
 * after CONNECT_RESPONSE. UD: INIT with the CM's qkey, RTR, RTS.
 */
int softib_cm_init_qp_attr(axon_dev_cm_id_priv_t *id, axon_dev_qp_attr_t *attr, int *mask_p)
{
    softib_cm_id_t *sid = softib_cm_sid(id);
    axon_dev_qp_state_t state = attr->qp_state;
    int peer_known;

    if (sid == NULL) {
        return softib_cm_bad_state(sid, "init_qp_attr (bind or resolve first)");
    }
    if (id->super.ps == AXON_DEV_CM_PS_UDP) {
        memset(attr, 0, sizeof(*attr));
        attr->qp_state = state;
        attr->port_num = SOFTIB_PORT_NUM;
        attr->qkey     = AXON_DEV_CM_UDP_QKEY;
        attr->sq_psn   = 0;
        *mask_p = (state == AXON_DEV_QPS_INIT) ? (AXON_DEV_QP_STATE | AXON_DEV_QP_PKEY_INDEX |
                                                  AXON_DEV_QP_PORT | AXON_DEV_QP_QKEY) :
                  (state == AXON_DEV_QPS_RTS) ? (AXON_DEV_QP_STATE | AXON_DEV_QP_SQ_PSN) :
                  AXON_DEV_QP_STATE;
        return 0;
    }
    peer_known = (sid->listener != NULL) ? (sid->state >= SOFTIB_CM_REQ_RCVD) :
                 ((sid->state == SOFTIB_CM_REP_RCVD) || (sid->state == SOFTIB_CM_ESTABLISHED));
    if ((state != AXON_DEV_QPS_INIT) && !peer_known) {
        return softib_cm_bad_state(sid, "init_qp_attr RTR/RTS (a CONNECT_REQUEST's id, or "
                                   "CONNECT_RESPONSE first)");
    }
    if ((sid->listener != NULL) && (sid->state == SOFTIB_CM_REQ_RCVD)) {
        /* not accepted yet: what accept without parameters grants */
        sid->resp_res   = softib_cm_min(sid->peer.initiator_depth, (unsigned)sid->max_rd);
        sid->init_depth = softib_cm_min(sid->peer.responder_resources, (unsigned)sid->max_rd);
        sid->retry      = sid->peer.retry_count;
    }
    return softib_cm_qp_attr(sid, state, attr, mask_p);
}

/* As rdma_disconnect and a rejection do: the QP stops and flushes. */
void softib_cm_qp_error(softib_cm_id_t *sid)
{
    axon_dev_qp_attr_t attr;

    if ((sid->id == NULL) || (sid->id->super.qp == NULL)) {
        return;
    }
    memset(&attr, 0, sizeof(attr));
    attr.qp_state = AXON_DEV_QPS_ERR;
    axon_dev_modify_qp(sid->id->super.qp, &attr, AXON_DEV_QP_STATE);
}

/* ------------------------------------------------------------ messages and events */

int softib_cm_send(softib_cm_id_t *sid, softib_cm_msg_type_t type, uint16_t reason,
                   const void *pdata, size_t len)
{
    softib_cm_msg_t m;
    ssize_t n;

    if (type == SOFTIB_CM_MSG_REQ) {
        m = sid->out;
    } else if (type == SOFTIB_CM_MSG_REP) {
        m = sid->out;
        m.type = (uint8_t)type;
    } else {
        softib_cm_msg_init(&m, type);
        m.reason    = htons(reason);
        m.pdata_len = (uint8_t)len;
        if (len > 0) {
            memcpy(m.pdata, pdata, len);
        }
    }
    if (sid->fd < 0) {
        return ENOTCONN;
    }
    /* A fresh connection's socket buffer always takes one small message whole. */
    n = send(sid->fd, &m, sizeof(m), MSG_NOSIGNAL);
    if (n != (ssize_t)sizeof(m)) {
        axon_debug("softib cm: cannot send message %d on socket %d: %s", type, sid->fd,
                   (n < 0) ? strerror(errno) : "short write");
        return (n < 0) ? errno : EIO;
    }
    return 0;
}

_Static_assert(offsetof(axon_dev_cm_conn_param_t, private_data_len) ==
               offsetof(axon_dev_cm_ud_param_t, private_data_len), "conn and ud share pdata");

void softib_cm_ud_route(axon_dev_cm_ud_param_t *ud, uint32_t qp_num, const uint8_t *dgid,
                        uint8_t tos)
{
    ud->qp_num                    = qp_num;
    ud->qkey                      = AXON_DEV_CM_UDP_QKEY;
    ud->ah_attr.is_global         = 1;
    ud->ah_attr.port_num          = SOFTIB_PORT_NUM;
    ud->ah_attr.grh.hop_limit     = SOFTIB_CM_HOP_LIMIT;
    ud->ah_attr.grh.traffic_class = tos;
    memcpy(ud->ah_attr.grh.dgid.raw, dgid, sizeof(ud->ah_attr.grh.dgid.raw));
}

/* A UD peer: its QP, the qkey every RDMA_PS_UDP QP has, and the route to its GID. */
static void softib_cm_ud_param(axon_dev_cm_ev_priv_t *ev, const softib_cm_msg_t *msg,
                               uint8_t tos)
{
    axon_dev_cm_event_set_pdata(ev, msg->pdata, msg->pdata_len);  /* conn's = ud's */
    softib_cm_ud_route(&ev->super.param.ud, ntohl(msg->qpn), msg->gid, tos);
}

void softib_cm_event(softib_cm_id_t *sid, axon_dev_cm_event_type_t type, int status,
                     const softib_cm_msg_t *msg)
{
    axon_dev_cm_conn_param_t *c;
    axon_dev_cm_ev_priv_t *ev;

    ev = axon_dev_cm_event_new(sid->id, type, status);
    if (ev == NULL) {
        return;
    }
    if ((msg != NULL) && (sid->id->super.ps == AXON_DEV_CM_PS_UDP)) {
        softib_cm_ud_param(ev, msg, sid->id->opts.tos);
    } else if (msg != NULL) {
        /* The peer's resources, seen from this side (as librdmacm reports them). */
        c = &ev->super.param.conn;
        axon_dev_cm_event_set_pdata(ev, msg->pdata, msg->pdata_len);
        c->responder_resources = msg->initiator_depth;
        c->initiator_depth     = msg->responder_resources;
        c->flow_control        = msg->flow_control;
        c->retry_count         = msg->retry_count;
        c->rnr_retry_count     = msg->rnr_retry_count;
        c->srq                 = msg->srq;
        c->qp_num              = ntohl(msg->qpn);
    }
    if ((type == AXON_DEV_CM_EVENT_CONNECT_REQUEST) && (sid->listener != NULL)) {
        axon_dev_cm_event_set_listen_id(ev, sid->listener->id);
    }
    axon_dev_cm_event_queue(sid->sc->chan, ev);
}

/* ------------------------------------------------------------ connection calls */

static uint32_t softib_cm_random_psn(void)
{
    static uint32_t seq;   /* ids of several channels connect from several threads */
    uint64_t x = axon_sys_time_ns() ^ ((uint64_t)getpid() << 32) ^
                 (__atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED) * 0x9e3779b97f4a7c15ull);

    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (uint32_t)x & SOFTIB_PSN_MASK;
}

/* Our half of a REQ or REP: QPN, PSN, GID, MTU. */
static int softib_cm_fill_local(softib_cm_id_t *sid, softib_cm_msg_t *m, uint32_t qpn, int srq)
{
    axon_dev_context_t *ctx = sid->id->super.verbs;
    axon_dev_port_attr_t port;
    axon_dev_gid_t gid;
    int ret;

    if (((ret = axon_dev_query_port(ctx, SOFTIB_PORT_NUM, &port)) != 0) ||
        ((ret = axon_dev_query_gid(ctx, SOFTIB_PORT_NUM, 0, &gid)) != 0)) {
        return ret;
    }
    m->qpn   = htonl(qpn);
    m->psn   = htonl(softib_cm_psn(sid));
    m->mtu   = (uint8_t)port.active_mtu;
    m->srq   = (uint8_t)(srq != 0);
    memcpy(m->gid, gid.raw, sizeof(m->gid));
    return 0;
}

int softib_cm_connect(axon_dev_cm_id_priv_t *id, const axon_dev_cm_conn_param_t *param)
{
    softib_cm_id_t *sid = softib_cm_sid(id);
    axon_dev_qp_t *qp   = id->super.qp;
    struct pollfd pfd;
    softib_cm_msg_t *m;
    socklen_t len;
    int ret;

    if ((sid == NULL) || (sid->state != SOFTIB_CM_ROUTE_RESOLVED)) {
        return softib_cm_bad_state(sid, "connect (resolve_route first)");
    }
    m = &sid->out;
    softib_cm_msg_init(m, SOFTIB_CM_MSG_REQ);
    if ((ret = softib_cm_fill_local(sid, m, qp ? qp->qp_num : param->qp_num,
                                    qp ? (qp->srq != NULL) : param->srq)) != 0) {
        return ret;
    }
    sid->resp_res  = softib_cm_min(param->responder_resources, (unsigned)sid->max_rd);
    sid->init_depth = softib_cm_min(param->initiator_depth, (unsigned)sid->max_rd);
    sid->retry     = softib_cm_min(param->retry_count, 7);
    sid->rnr_retry = softib_cm_min(param->rnr_retry_count, 7);
    m->responder_resources = sid->resp_res;
    m->initiator_depth     = sid->init_depth;
    m->retry_count         = sid->retry;
    m->rnr_retry_count     = sid->rnr_retry;
    m->flow_control        = param->flow_control;
    m->pdata_len           = param->private_data_len;
    if (param->private_data_len > 0) {
        memcpy(m->pdata, param->private_data, param->private_data_len);
    }

    sid->deadline = axon_sys_time_ns() + sid->sc->timeout_ns;
    sid->state    = SOFTIB_CM_CONNECTING;
    ret = connect(sid->fd, (const struct sockaddr *)&id->super.dst_addr,
                  sizeof(id->super.dst_addr)) ? errno : 0;
    if (ret == EINPROGRESS) {
        /* over loopback the handshake is usually done already: no need to wait */
        pfd.fd     = sid->fd;
        pfd.events = POLLOUT;
        if (poll(&pfd, 1, 0) == 1) {
            len = sizeof(ret);
            if (getsockopt(sid->fd, SOL_SOCKET, SO_ERROR, &ret, &len) < 0) {
                ret = errno;
            }
            softib_cm_connect_done(sid, ret);
        } else if ((ret = softib_cm_watch(sid, EPOLLOUT)) != 0) {
            return ret;
        }
    } else {
        /* done (or refused) at once: the same as when the connect completes */
        softib_cm_connect_done(sid, ret);
    }
    softib_cm_timer_update(sid->sc);
    return 0;
}

int softib_cm_accept(axon_dev_cm_id_priv_t *id, const axon_dev_cm_conn_param_t *param)
{
    softib_cm_id_t *sid = softib_cm_sid(id);
    axon_dev_qp_t *qp   = id->super.qp;
    softib_cm_msg_t *m;
    uint8_t rnr_retry;
    int ret;

    if ((sid == NULL) || (sid->state != SOFTIB_CM_REQ_RCVD)) {
        return softib_cm_bad_state(sid, "accept (a CONNECT_REQUEST's id)");
    }
    /* By default grant what the requester asked for. */
    sid->resp_res   = softib_cm_min(param ? param->responder_resources :
                                    sid->peer.initiator_depth, (unsigned)sid->max_rd);
    sid->init_depth = softib_cm_min(param ? param->initiator_depth :
                                    sid->peer.responder_resources, (unsigned)sid->max_rd);
    sid->init_depth = softib_cm_min(sid->init_depth, sid->peer.responder_resources);
    sid->retry      = sid->peer.retry_count;
    rnr_retry       = param ? softib_cm_min(param->rnr_retry_count, 7) : 7;

    m = &sid->out;
    softib_cm_msg_init(m, SOFTIB_CM_MSG_REP);
    if ((ret = softib_cm_fill_local(sid, m, qp ? qp->qp_num : (param ? param->qp_num : 0),
                                    qp ? (qp->srq != NULL) : (param && param->srq))) != 0) {
        return ret;
    }
    m->responder_resources = sid->resp_res;
    m->initiator_depth     = sid->init_depth;
    m->retry_count         = sid->retry;
    m->rnr_retry_count     = rnr_retry;      /* for the requester's QP */
    m->flow_control        = param ? param->flow_control : 0;
    m->pdata_len           = param ? param->private_data_len : 0;
    if (m->pdata_len > 0) {
        memcpy(m->pdata, param->private_data, m->pdata_len);
    }
    /* as rdma_accept: RTR and RTS before the reply goes out (a UD QP is in RTS) */
    if ((qp != NULL) && (id->super.ps != AXON_DEV_CM_PS_UDP) &&
        (ret = softib_cm_qp_connect(sid)) != 0) {
        return ret;
    }
    if ((ret = softib_cm_send(sid, SOFTIB_CM_MSG_REP, 0, NULL, 0)) != 0) {
        axon_error("softib cm: accept: the requester is gone (%s)", strerror(ret));
        return ret;
    }
    if (id->super.ps == AXON_DEV_CM_PS_UDP) {   /* SIDR: the reply ends the exchange */
        sid->state = SOFTIB_CM_CLOSED;
        softib_cm_close(sid);
        softib_cm_timer_update(sid->sc);
        return 0;
    }
    sid->state    = SOFTIB_CM_REP_SENT;
    sid->deadline = axon_sys_time_ns() + sid->sc->timeout_ns;
    softib_cm_timer_update(sid->sc);
    return 0;
}

int softib_cm_reject(axon_dev_cm_id_priv_t *id, const void *pdata, uint8_t len)
{
    softib_cm_id_t *sid = softib_cm_sid(id);

    if ((sid == NULL) || (sid->state != SOFTIB_CM_REQ_RCVD)) {
        return softib_cm_bad_state(sid, "reject (a CONNECT_REQUEST's id)");
    }
    softib_cm_send(sid, SOFTIB_CM_MSG_REJ, AXON_DEV_CM_REJ_CONSUMER_DEFINED, pdata, len);
    softib_cm_close(sid);
    sid->state = SOFTIB_CM_FAILED;
    return 0;
}

int softib_cm_establish(axon_dev_cm_id_priv_t *id)
{
    softib_cm_id_t *sid = softib_cm_sid(id);
    int ret;

    if ((sid == NULL) || (sid->state != SOFTIB_CM_REP_RCVD)) {
        return softib_cm_bad_state(sid, "establish (after CONNECT_RESPONSE)");
    }
    if ((ret = softib_cm_send(sid, SOFTIB_CM_MSG_RTU, 0, NULL, 0)) != 0) {
        return ret;
    }
    sid->state = SOFTIB_CM_ESTABLISHED;
    return 0;
}

int softib_cm_disconnect(axon_dev_cm_id_priv_t *id)
{
    softib_cm_id_t *sid = softib_cm_sid(id);

    if (sid == NULL) {
        return softib_cm_bad_state(sid, "disconnect");
    }
    switch (sid->state) {
    case SOFTIB_CM_ESTABLISHED:
    case SOFTIB_CM_REP_SENT:
    case SOFTIB_CM_REP_RCVD:
        softib_cm_qp_error(sid);
        sid->local_disc = 1;
        if (softib_cm_send(sid, SOFTIB_CM_MSG_DREQ, 0, NULL, 0) != 0) {
            softib_cm_finish_disconnect(sid);   /* nobody to wait for */
            return 0;
        }
        sid->state    = SOFTIB_CM_DREQ_SENT;
        sid->deadline = axon_sys_time_ns() + sid->sc->timeout_ns;
        softib_cm_timer_update(sid->sc);
        return 0;
    case SOFTIB_CM_DISCONNECTED:
        /* the peer went first; DISCONNECTED was given: now the timewait ends */
        softib_cm_qp_error(sid);
        sid->local_disc = 1;
        sid->state      = SOFTIB_CM_CLOSED;
        softib_cm_event(sid, AXON_DEV_CM_EVENT_TIMEWAIT_EXIT, 0, NULL);
        return 0;
    case SOFTIB_CM_DREQ_SENT:
    case SOFTIB_CM_CLOSED:
        return 0;   /* already on its way */
    default:
        return softib_cm_bad_state(sid, "disconnect (not connected)");
    }
}

/* The user destroyed the id: tell the peer as the IB CM does, then close. */
void softib_cm_destroy(axon_dev_cm_id_priv_t *id)
{
    softib_cm_id_t *sid = softib_cm_sid(id), *other, *tmp;
    softib_cm_chan_t *sc;

    if (sid == NULL) {
        return;
    }
    sc = sid->sc;
    softib_cm_mcast_detach_all(sid);   /* destroying an id leaves its groups (§5.2.28) */
    switch (sid->state) {
    case SOFTIB_CM_LISTEN:
        axon_list_for_each_safe(other, tmp, &sid->sc->ids, link) {
            if ((other->listener == sid) && (other->id == NULL)) {
                softib_cm_free(other);
            }
        }
        break;
    case SOFTIB_CM_REQ_SENT:
        softib_cm_send(sid, SOFTIB_CM_MSG_REJ, AXON_DEV_CM_REJ_TIMEOUT, NULL, 0);
        break;
    case SOFTIB_CM_REQ_RCVD:
    case SOFTIB_CM_REP_SENT:
        softib_cm_send(sid, SOFTIB_CM_MSG_REJ, AXON_DEV_CM_REJ_CONSUMER_DEFINED, NULL, 0);
        break;
    case SOFTIB_CM_ESTABLISHED:
    case SOFTIB_CM_REP_RCVD:
        softib_cm_qp_error(sid);
        softib_cm_send(sid, SOFTIB_CM_MSG_DREQ, 0, NULL, 0);
        break;
    default:
        break;
    }
    softib_cm_free(sid);
    softib_cm_timer_update(sc);
}

