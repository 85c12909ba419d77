/*
 * softib's connection manager, the socket side: run from the channel's
 * get_event (when its fd is readable), it accepts connections, reads whole
 * CM messages, fires deadlines, and turns each into the id's next state
 * and the event librdmacm gives at that point (seed §7.3).
 */
#define _GNU_SOURCE
#include "axon_config.h"
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include "log.h"
#include "softib.h"
#include "softib_cm.h"

static void softib_cm_fail(softib_cm_id_t *sid, axon_dev_cm_event_type_t type, int status,
                           const softib_cm_msg_t *msg)
{
    softib_cm_close(sid);
    softib_cm_qp_error(sid);
    sid->state = SOFTIB_CM_FAILED;
    softib_cm_event(sid, type, status, msg);
}

/* An accepted socket that never became a request goes without a word. */
static void softib_cm_drop(softib_cm_id_t *sid)
{
    softib_cm_close(sid);
    sid->dead = 1;
}

void softib_cm_connect_done(softib_cm_id_t *sid, int err)
{
    if (err == 0) {
        err = softib_cm_send(sid, SOFTIB_CM_MSG_REQ, 0, NULL, 0);
    }
    if ((err == 0) && ((err = softib_cm_watch(sid, EPOLLIN)) == 0)) {
        sid->state = SOFTIB_CM_REQ_SENT;
        return;
    }
    if (err == ECONNREFUSED) {
        /*
         * Nobody listens on that port. The CM of a RoCE peer answers such a
         * REQ with a REJ "invalid service ID"; softib models a RoCE port, so
         * REJECTED with that reason (iWARP would give -ECONNREFUSED).
         */
        softib_cm_fail(sid, AXON_DEV_CM_EVENT_REJECTED, AXON_DEV_CM_REJ_INVALID_SERVICE_ID, NULL);
    } else {
        softib_cm_fail(sid, AXON_DEV_CM_EVENT_UNREACHABLE, -err, NULL);
    }
}

void softib_cm_finish_disconnect(softib_cm_id_t *sid)
{
    softib_cm_close(sid);
    sid->state = SOFTIB_CM_CLOSED;
    softib_cm_event(sid, AXON_DEV_CM_EVENT_DISCONNECTED, 0, NULL);
    softib_cm_event(sid, AXON_DEV_CM_EVENT_TIMEWAIT_EXIT, 0, NULL);
}

/* The peer disconnected first: DISCONNECTED now, TIMEWAIT_EXIT after our disconnect. */
static void softib_cm_peer_disconnected(softib_cm_id_t *sid)
{
    softib_cm_close(sid);
    sid->state = SOFTIB_CM_DISCONNECTED;
    softib_cm_event(sid, AXON_DEV_CM_EVENT_DISCONNECTED, 0, NULL);
}

/* ------------------------------------------------------------ passive side */

static void softib_cm_accept_conns(softib_cm_id_t *l)
{
    softib_cm_id_t *sid;
    int fd, one = 1;

    for (;;) {
        fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR) {
                continue;
            }
            if ((errno != EAGAIN) && (errno != EWOULDBLOCK)) {
                axon_debug("softib cm: accept on socket %d: %s", l->fd, strerror(errno));
            }
            return;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        sid = softib_cm_id_alloc(l->sc, NULL);
        if (sid == NULL) {
            close(fd);
            continue;
        }
        sid->fd       = fd;
        sid->listener = l;
        sid->state    = SOFTIB_CM_REQ_WAIT;
        sid->deadline = axon_sys_time_ns() + l->sc->timeout_ns;
        if (softib_cm_watch(sid, EPOLLIN) != 0) {
            softib_cm_drop(sid);
        }
    }
}

/* A whole REQ arrived: a new id and CONNECT_REQUEST on the listener's channel. */
static void softib_cm_request(softib_cm_id_t *sid, const softib_cm_msg_t *m)
{
    softib_cm_id_t *l = sid->listener;
    axon_dev_cm_id_priv_t *id;
    socklen_t len;

    if ((l == NULL) || (l->id == NULL) || (l->state != SOFTIB_CM_LISTEN)) {
        softib_cm_drop(sid);
        return;
    }
    id = axon_dev_cm_id_new(sid->sc->chan, l->id->super.context, l->id->super.ps,
                            &softib_cm_ops);
    if (id == NULL) {
        softib_cm_drop(sid);
        return;
    }
    sid->id  = id;
    id->be   = sid;
    id->opts = l->id->opts;   /* rdma_set_option's, as the listener's */
    if (axon_dev_cm_open_device(l->id->super.verbs->name, &id->super.verbs) != 0) {
        sid->id = NULL;
        axon_dev_cm_id_drop(id);
        softib_cm_drop(sid);
        return;
    }
    id->super.port_num = l->id->super.port_num;
    sid->max_rd        = l->max_rd;
    len = sizeof(id->super.src_addr);
    getsockname(sid->fd, (struct sockaddr *)&id->super.src_addr, &len);
    len = sizeof(id->super.dst_addr);
    getpeername(sid->fd, (struct sockaddr *)&id->super.dst_addr, &len);
    sid->peer     = *m;
    sid->state    = SOFTIB_CM_REQ_RCVD;
    sid->deadline = 0;   /* the requester times out, not us */
    softib_cm_event(sid, AXON_DEV_CM_EVENT_CONNECT_REQUEST, 0, m);
}

/* ------------------------------------------------------------ active side */

/*
 * The REP: with a QP on the id, RTR, RTS and the RTU go now and the user
 * sees ESTABLISHED; without one, CONNECT_RESPONSE and establish() later.
 */
static void softib_cm_reply(softib_cm_id_t *sid, const softib_cm_msg_t *m)
{
    int ret;

    sid->peer     = *m;
    sid->deadline = 0;
    if (sid->id->super.ps == AXON_DEV_CM_PS_UDP) {   /* SIDR: no RTU, nothing to keep open */
        sid->state = SOFTIB_CM_CLOSED;
        softib_cm_close(sid);
        softib_cm_event(sid, AXON_DEV_CM_EVENT_ESTABLISHED, 0, m);
        return;
    }
    if (sid->id->super.qp == NULL) {
        sid->state = SOFTIB_CM_REP_RCVD;
        softib_cm_event(sid, AXON_DEV_CM_EVENT_CONNECT_RESPONSE, 0, m);
        return;
    }
    ret = softib_cm_qp_connect(sid);
    if (ret != 0) {
        axon_error("softib cm: cannot bring QP %u to RTS for the reply: %s",
                   sid->id->super.qp->qp_num, strerror(ret));
        softib_cm_send(sid, SOFTIB_CM_MSG_REJ, AXON_DEV_CM_REJ_CONSUMER_DEFINED, NULL, 0);
        softib_cm_fail(sid, AXON_DEV_CM_EVENT_CONNECT_ERROR, -ret, NULL);
        return;
    }
    if ((ret = softib_cm_send(sid, SOFTIB_CM_MSG_RTU, 0, NULL, 0)) != 0) {
        softib_cm_fail(sid, AXON_DEV_CM_EVENT_CONNECT_ERROR, -ret, NULL);
        return;
    }
    sid->state = SOFTIB_CM_ESTABLISHED;
    softib_cm_event(sid, AXON_DEV_CM_EVENT_ESTABLISHED, 0, m);
}

/* ------------------------------------------------------------ messages */

static void softib_cm_unexpected(softib_cm_id_t *sid, const softib_cm_msg_t *m)
{
    axon_debug("softib cm: message %u ignored in state %s", m->type,
               softib_cm_state_str(sid->state));
}

static void softib_cm_lost(softib_cm_id_t *sid, int err)
{
    switch (sid->state) {
    case SOFTIB_CM_REQ_WAIT:
        softib_cm_drop(sid);
        break;
    case SOFTIB_CM_REQ_SENT:
        softib_cm_fail(sid, AXON_DEV_CM_EVENT_UNREACHABLE, -err, NULL);
        break;
    case SOFTIB_CM_REQ_RCVD:
    case SOFTIB_CM_REP_SENT:
        softib_cm_fail(sid, AXON_DEV_CM_EVENT_CONNECT_ERROR, -err, NULL);
        break;
    case SOFTIB_CM_ESTABLISHED:
    case SOFTIB_CM_REP_RCVD:
        softib_cm_peer_disconnected(sid);
        break;
    case SOFTIB_CM_DREQ_SENT:
        softib_cm_finish_disconnect(sid);
        break;
    default:
        softib_cm_close(sid);
        break;
    }
}

static void softib_cm_handle(softib_cm_id_t *sid, const softib_cm_msg_t *m)
{
    switch (sid->state) {
    case SOFTIB_CM_REQ_WAIT:
        if (m->type == SOFTIB_CM_MSG_REQ) {
            softib_cm_request(sid, m);
        } else {
            softib_cm_drop(sid);
        }
        return;
    case SOFTIB_CM_REQ_SENT:
        if (m->type == SOFTIB_CM_MSG_REP) {
            softib_cm_reply(sid, m);
        } else if (m->type == SOFTIB_CM_MSG_REJ) {
            softib_cm_fail(sid, AXON_DEV_CM_EVENT_REJECTED, ntohs(m->reason), m);
        } else {
            softib_cm_unexpected(sid, m);
        }
        return;
    case SOFTIB_CM_REQ_RCVD:
    case SOFTIB_CM_REP_SENT:
        if (m->type == SOFTIB_CM_MSG_REJ) {
            /* the requester gave up (timeout, destroyed): as the IB CM reports it */
            softib_cm_fail(sid, AXON_DEV_CM_EVENT_REJECTED, ntohs(m->reason), m);
            return;
        }
        if ((sid->state == SOFTIB_CM_REP_SENT) && (m->type == SOFTIB_CM_MSG_RTU)) {
            sid->state    = SOFTIB_CM_ESTABLISHED;
            sid->deadline = 0;
            softib_cm_event(sid, AXON_DEV_CM_EVENT_ESTABLISHED, 0, NULL);
            return;
        }
        if ((sid->state == SOFTIB_CM_REP_SENT) && (m->type == SOFTIB_CM_MSG_DREQ)) {
            softib_cm_send(sid, SOFTIB_CM_MSG_DREP, 0, NULL, 0);
            softib_cm_peer_disconnected(sid);
            return;
        }
        softib_cm_unexpected(sid, m);
        return;
    case SOFTIB_CM_ESTABLISHED:
    case SOFTIB_CM_REP_RCVD:
        if (m->type == SOFTIB_CM_MSG_DREQ) {
            /* answered at once, so the disconnecting side finishes promptly */
            softib_cm_send(sid, SOFTIB_CM_MSG_DREP, 0, NULL, 0);
            softib_cm_peer_disconnected(sid);
        } else {
            softib_cm_unexpected(sid, m);
        }
        return;
    case SOFTIB_CM_DREQ_SENT:
        if (m->type == SOFTIB_CM_MSG_DREQ) {
            /* both disconnected at once */
            softib_cm_send(sid, SOFTIB_CM_MSG_DREP, 0, NULL, 0);
            softib_cm_finish_disconnect(sid);
        } else if (m->type == SOFTIB_CM_MSG_DREP) {
            softib_cm_finish_disconnect(sid);
        } else {
            softib_cm_unexpected(sid, m);
        }
        return;
    default:
        softib_cm_unexpected(sid, m);
        return;
    }
}

static void softib_cm_readable(softib_cm_id_t *sid)
{
    ssize_t n;

    while (sid->fd >= 0) {
        n = recv(sid->fd, (uint8_t *)&sid->rx + sid->rx_len, sizeof(sid->rx) - sid->rx_len, 0);
        if (n > 0) {
            sid->rx_len += (size_t)n;
            if (sid->rx_len < sizeof(sid->rx)) {
                continue;
            }
            sid->rx_len = 0;
            if (softib_cm_msg_check(&sid->rx) != 0) {
                axon_debug("softib cm: bad message on socket %d", sid->fd);
                softib_cm_lost(sid, EPROTO);
                return;
            }
            softib_cm_handle(sid, &sid->rx);
        } else if (n == 0) {
            softib_cm_lost(sid, ECONNRESET);
        } else if (errno == EINTR) {
            continue;
        } else if ((errno == EAGAIN) || (errno == EWOULDBLOCK)) {
            return;
        } else {
            softib_cm_lost(sid, errno);
        }
    }
}

/* ------------------------------------------------------------ deadlines */

static void softib_cm_expire(softib_cm_id_t *sid)
{
    sid->deadline = 0;
    switch (sid->state) {
    case SOFTIB_CM_REQ_WAIT:
        softib_cm_drop(sid);
        break;
    case SOFTIB_CM_REQ_SENT:
        softib_cm_send(sid, SOFTIB_CM_MSG_REJ, AXON_DEV_CM_REJ_TIMEOUT, NULL, 0);
        /* fall through */
    case SOFTIB_CM_CONNECTING:
        softib_cm_fail(sid, AXON_DEV_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL);
        break;
    case SOFTIB_CM_REP_SENT:
        softib_cm_send(sid, SOFTIB_CM_MSG_REJ, AXON_DEV_CM_REJ_TIMEOUT, NULL, 0);
        softib_cm_fail(sid, AXON_DEV_CM_EVENT_CONNECT_ERROR, -ETIMEDOUT, NULL);
        break;
    case SOFTIB_CM_DREQ_SENT:
        softib_cm_finish_disconnect(sid);   /* as a DREQ that timed out */
        break;
    default:
        break;
    }
}

/* ------------------------------------------------------------ progress */

#define SOFTIB_CM_EVENTS_PER_WAIT 32

void softib_cm_chan_progress(axon_dev_cm_chan_t *chan, void *state)
{
    struct epoll_event evs[SOFTIB_CM_EVENTS_PER_WAIT];
    softib_cm_chan_t *sc = state;
    softib_cm_id_t *sid, *tmp;
    uint64_t now, ticks;
    socklen_t len;
    int n, i, err;

    (void)chan;
    do {
        n = epoll_wait(sc->epfd, evs, SOFTIB_CM_EVENTS_PER_WAIT, 0);
        for (i = 0; i < n; ++i) {
            if (evs[i].data.ptr == sc) {
                if (read(sc->timer_fd, &ticks, sizeof(ticks)) < 0) {
                    /* EAGAIN: re-armed meanwhile */
                }
                continue;
            }
            sid = evs[i].data.ptr;
            if (sid->dead || (sid->fd < 0)) {
                continue;
            }
            if (sid->state == SOFTIB_CM_LISTEN) {
                softib_cm_accept_conns(sid);
            } else if (sid->state == SOFTIB_CM_CONNECTING) {
                err = 0;
                len = sizeof(err);
                if (getsockopt(sid->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) {
                    err = errno;
                }
                softib_cm_connect_done(sid, err);
            } else {
                softib_cm_readable(sid);
            }
        }
    } while (n == SOFTIB_CM_EVENTS_PER_WAIT);

    now = axon_sys_time_ns();
    axon_list_for_each(sid, &sc->ids, link) {
        if (!sid->dead && sid->deadline && (sid->deadline <= now)) {
            softib_cm_expire(sid);
        }
    }
    axon_list_for_each_safe(sid, tmp, &sc->ids, link) {
        if (sid->dead) {
            axon_list_del(&sid->link);
            free(sid);
        }
    }
    softib_cm_timer_update(sc);
}
