/*
 * tcp endpoint: one outgoing connection. Connects without blocking, says
 * HELLO, and once ACCEPTed sends frames: straight from the caller's memory
 * when the socket takes them, the rest queued in the ep's send buffer (or,
 * for zero-copy, as a cursor into the caller's buffer) and pushed from
 * progress on EPOLLOUT. Its socket is also read: for the handshake answer,
 * a goodbye, and the end of stream that means the peer died.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include "tcp.h"
#include "tcp_sock.h"
#include "sys.h"
#include "log.h"

const char *const axon_tcp_ep_state_names[AXON_TCP_EP_STATE_LAST] = {
    [AXON_TCP_EP_CONNECTING] = "connecting",
    [AXON_TCP_EP_HANDSHAKE]  = "handshake",
    [AXON_TCP_EP_CONNECTED]  = "connected",
    [AXON_TCP_EP_FAILED]     = "failed",
    [AXON_TCP_EP_CLOSED]     = "closed by peer",
    [AXON_TCP_EP_CLOSING]    = "closing",
};

/* Events an ep's socket waits for: the peer's answer, goodbye or death, and room to send. */
#define AXON_TCP_EP_EVENTS_RX (EPOLLIN | EPOLLRDHUP)
#define AXON_TCP_EP_EVENTS_TX (EPOLLIN | EPOLLRDHUP | EPOLLOUT)

static inline axon_tcp_iface_t *axon_tcp_ep_iface(const axon_tcp_ep_t *ep)
{
    return (axon_tcp_iface_t*)ep->super.iface;
}

static inline int axon_tcp_ep_tx_empty(const axon_tcp_ep_t *ep)
{
    return (ep->tx_len == ep->tx_off) && !ep->zc_active;
}

static void axon_tcp_ep_log_peer(const axon_tcp_ep_t *ep, axon_log_level_t level,
                                 const char *what, const char *why)
{
    char sa_str[AXON_TCP_SA_STR_MAX];

    axon_log(level, "%s: %s worker %016llx at %s: %s", axon_tcp_ep_iface(ep)->name, what,
             (unsigned long long)ep->sock.peer_uuid,
             axon_tcp_sock_sa_str(&ep->sock.peer_sa, sa_str, sizeof(sa_str)), why);
}

/* Close and free (after progress if inside it); the upper layer is done with ep. */
static void axon_tcp_ep_release(axon_tcp_ep_t *ep)
{
    axon_tcp_iface_t *iface = axon_tcp_ep_iface(ep);

    axon_tcp_sock_close(iface->epfd, &ep->sock);
    axon_list_del(&ep->sock.link);
    axon_list_del(&ep->sock.pend);
    axon_tcp_iface_release(iface, &ep->sock);
}

/*
 * The connection is over: close it, drop what was queued, and have progress
 * complete the zero-copy send in flight and report the peer (unless it said
 * goodbye, which is not a failure).
 */
static void axon_tcp_ep_fail(axon_tcp_ep_t *ep, axon_status_t status, int graceful)
{
    axon_tcp_iface_t *iface = axon_tcp_ep_iface(ep);

    if ((ep->state == AXON_TCP_EP_FAILED) || (ep->state == AXON_TCP_EP_CLOSED)) {
        return;
    }
    if (ep->state == AXON_TCP_EP_CLOSING) {
        axon_tcp_ep_release(ep);   /* destroyed already: nobody to tell */
        return;
    }
    axon_debug("%s: ep %p to worker %016llx: %s -> %s (%s)", iface->name, (void*)ep,
               (unsigned long long)ep->sock.peer_uuid, axon_tcp_ep_state_names[ep->state],
               axon_tcp_ep_state_names[graceful ? AXON_TCP_EP_CLOSED : AXON_TCP_EP_FAILED],
               axon_status_string(status));
    axon_tcp_sock_close(iface->epfd, &ep->sock);
    axon_list_del(&ep->sock.pend);   /* off the connecting list */
    ep->state       = graceful ? AXON_TCP_EP_CLOSED : AXON_TCP_EP_FAILED;
    ep->sock.status = status;
    ep->tx_off      = 0;
    ep->tx_len      = 0;
    if (graceful) {
        ep->sock.flags |= AXON_TCP_SOCK_FLAG_GOODBYE;
    }
    if (!graceful || ep->zc_active) {
        axon_tcp_iface_report(iface, &ep->sock);
    }
}

void axon_tcp_ep_fail_peer(axon_tcp_iface_t *iface, uint64_t peer_uuid, axon_status_t status)
{
    axon_tcp_sock_t *sock, *tmp;
    axon_tcp_ep_t   *ep;

    axon_list_for_each_safe(sock, tmp, &iface->eps, link) {
        ep = axon_container_of(sock, axon_tcp_ep_t, sock);
        if ((sock->peer_uuid != peer_uuid) || (sock->fd < 0)) {
            continue;
        }
        axon_tcp_ep_log_peer(ep, AXON_LOG_WARN, "giving up on",
                             "its connection to us failed");
        axon_tcp_ep_fail(ep, status, 0);
    }
}

/* The peer closed (ret 0) or the socket failed (-errno) while we read. */
static void axon_tcp_ep_lost(axon_tcp_ep_t *ep, ssize_t ret)
{
    const char *why = (ret == 0) ? "connection closed without goodbye" : strerror((int)-ret);

    /* Its kernel took the connection, so it was there: a death, not an unreachable peer. */
    axon_tcp_ep_log_peer(ep, AXON_LOG_WARN,
                         (ep->state == AXON_TCP_EP_HANDSHAKE) ? "handshake failed with" : "lost",
                         why);
    axon_tcp_ep_fail(ep, (ret == 0) ? AXON_ERR_CONNECTION_RESET :
                         axon_tcp_sock_errno_status((int)-ret), 0);
}

static axon_status_t axon_tcp_ep_reject_status(uint8_t reason)
{
    /* A different worker at the address means ours is gone; the rest cannot work. */
    return (reason == AXON_TCP_REJECT_WRONG_PEER) ? AXON_ERR_UNREACHABLE : AXON_ERR_UNSUPPORTED;
}

/* The acceptor's answer to HELLO is in ep->rx.hs. */
static void axon_tcp_ep_handshake_done(axon_tcp_ep_t *ep)
{
    const axon_tcp_hs_t *hs = &ep->rx.hs;
    const char          *why;

    if ((hs->magic != AXON_TCP_MAGIC) || (hs->version != AXON_TCP_VERSION) ||
        ((hs->op != AXON_TCP_HS_ACCEPT) && (hs->op != AXON_TCP_HS_REJECT))) {
        axon_tcp_ep_log_peer(ep, AXON_LOG_ERROR, "handshake failed with",
                             "malformed answer (not an Axon tcp peer?)");
        axon_tcp_ep_fail(ep, AXON_ERR_IO_FORMAT, 0);
        return;
    }
    if (hs->op == AXON_TCP_HS_REJECT) {
        why = (hs->reason < AXON_TCP_REJECT_LAST) ? axon_tcp_reject_names[hs->reason] :
              "unknown reason";
        axon_tcp_ep_log_peer(ep, AXON_LOG_ERROR, "connection refused by", why);
        axon_tcp_ep_fail(ep, axon_tcp_ep_reject_status(hs->reason), 0);
        return;
    }
    if ((hs->src_uuid != ep->sock.peer_uuid) ||
        (hs->dst_uuid != axon_tcp_ep_iface(ep)->worker_uuid)) {
        axon_tcp_ep_log_peer(ep, AXON_LOG_ERROR, "handshake failed with",
                             "it accepted as another worker");
        axon_tcp_ep_fail(ep, AXON_ERR_UNREACHABLE, 0);
        return;
    }

    ep->state = AXON_TCP_EP_CONNECTED;
    axon_tcp_ep_log_peer(ep, AXON_LOG_DEBUG, "connected to", "accepted");
}

/* Read what the acceptor sends: the handshake answer, then only a goodbye. */
static void axon_tcp_ep_rx(axon_tcp_ep_t *ep)
{
    size_t  want;
    ssize_t ret;

    while (ep->sock.fd >= 0) {
        want = (ep->state == AXON_TCP_EP_HANDSHAKE) ? sizeof(ep->rx.hs) : sizeof(ep->rx.frame);
        ret  = axon_tcp_sock_recv(ep->sock.fd, (char*)&ep->rx + ep->rx_got, want - ep->rx_got);
        if (ret == -EAGAIN) {
            return;
        }
        if (ret <= 0) {
            axon_tcp_ep_lost(ep, ret);
            return;
        }
        ep->rx_got += (size_t)ret;
        if (ep->rx_got < want) {
            continue;
        }
        ep->rx_got = 0;

        if (ep->state == AXON_TCP_EP_HANDSHAKE) {
            axon_tcp_ep_handshake_done(ep);
        } else if ((ep->rx.frame.flags == AXON_TCP_FRAME_CTRL) &&
                   (ep->rx.frame.am_id == AXON_TCP_CTRL_GOODBYE) && (ep->rx.frame.length == 0)) {
            axon_tcp_ep_log_peer(ep, AXON_LOG_DEBUG, "goodbye from", "it closed");
            axon_tcp_ep_fail(ep, AXON_ERR_CONNECTION_RESET, 1);
        } else {
            axon_tcp_ep_log_peer(ep, AXON_LOG_ERROR, "protocol error from",
                                 "data on a connection that carries none this way");
            axon_tcp_ep_fail(ep, AXON_ERR_IO_FORMAT, 0);
        }
    }
}

/*
 * A send failed with errno err. A peer that closed on purpose may have left
 * its goodbye in our receive queue: read that before calling it a failure.
 */
static axon_status_t axon_tcp_ep_tx_error(axon_tcp_ep_t *ep, int err)
{
    axon_tcp_ep_rx(ep);
    if (ep->sock.fd >= 0) {
        axon_tcp_ep_log_peer(ep, AXON_LOG_WARN, "lost", strerror(err));
        axon_tcp_ep_fail(ep, axon_tcp_sock_errno_status(err), 0);
    }
    return ep->sock.status;
}

/* Room for length bytes at the end of the queue (up to limit), or NULL. */
static char *axon_tcp_ep_tx_reserve(axon_tcp_ep_t *ep, size_t length, size_t limit)
{
    size_t keep;

    if (limit - ep->tx_len >= length) {
        return ep->tx_buf + ep->tx_len;
    }
    /* Move the queue to the front, keeping its alignment: appended frames stay aligned. */
    keep = ep->tx_off % AXON_TCP_ALIGN;
    memmove(ep->tx_buf + keep, ep->tx_buf + ep->tx_off, ep->tx_len - ep->tx_off);
    ep->tx_len -= ep->tx_off - keep;
    ep->tx_off  = keep;
    return (limit - ep->tx_len >= length) ? ep->tx_buf + ep->tx_len : NULL;
}

/* Copy iov[0..iovcnt) to dest, skipping the first skip bytes. */
static void axon_tcp_iov_copy(char *dest, const struct iovec *iov, size_t iovcnt, size_t skip)
{
    size_t i, len;

    for (i = 0; i < iovcnt; ++i) {
        if (skip >= iov[i].iov_len) {
            skip -= iov[i].iov_len;
            continue;
        }
        len = iov[i].iov_len - skip;
        memcpy(dest, (const char*)iov[i].iov_base + skip, len);
        dest += len;
        skip  = 0;
    }
}

/* Account for sent bytes of the queue; returns those that went to the zero-copy cursor. */
static size_t axon_tcp_ep_tx_consume(axon_tcp_ep_t *ep, size_t sent)
{
    size_t queued = ep->tx_len - ep->tx_off;

    if (sent < queued) {
        ep->tx_off += sent;
        return 0;
    }
    ep->tx_off = ep->tx_len = 0;
    return sent - queued;
}

/*
 * Push the queue (buffer, then zero-copy cursor) in one sendmsg. From
 * progress only: it may complete the zero-copy send, whose callback may
 * destroy ep. Returns completions.
 */
static unsigned axon_tcp_ep_tx_progress(axon_tcp_ep_t *ep)
{
    axon_tcp_iface_t     *iface = axon_tcp_ep_iface(ep);
    axon_tl_completion_t *comp;
    struct iovec          iov[3];
    size_t                iovcnt = 0, i, zc_sent;
    ssize_t               ret;

    if (ep->tx_len > ep->tx_off) {
        iov[iovcnt].iov_base = ep->tx_buf + ep->tx_off;
        iov[iovcnt].iov_len  = ep->tx_len - ep->tx_off;
        ++iovcnt;
    }
    if (ep->zc_active) {
        for (i = 0; i < ep->zc_iovcnt; ++i) {
            iov[iovcnt++] = ep->zc_iov[i];
        }
    }

    if (iovcnt > 0) {
        ret = axon_tcp_sock_sendv(ep->sock.fd, iov, iovcnt);
        if (ret < 0) {
            if (ep->state == AXON_TCP_EP_CLOSING) {
                axon_tcp_ep_release(ep);   /* nobody left to tell */
            } else {
                axon_tcp_ep_tx_error(ep, (int)-ret);
            }
            return 0;
        }
        zc_sent = axon_tcp_ep_tx_consume(ep, (size_t)ret);
        if (zc_sent > 0) {
            axon_tcp_iov_advance(ep->zc_iov, &ep->zc_iovcnt, zc_sent);
        }
        if ((ep->tx_len > ep->tx_off) || (ep->zc_active && (ep->zc_iovcnt > 0))) {
            return 0;   /* EPOLLOUT stays armed */
        }
    }

    /* All out: done with the zero-copy send, stop waiting for room. */
    comp = NULL;
    if (ep->zc_active) {
        comp          = ep->zc_comp;
        ep->zc_active = 0;
        ep->zc_comp   = NULL;
    }
    if (ep->state == AXON_TCP_EP_CLOSING) {
        axon_tcp_ep_release(ep);   /* its goodbye was the last frame */
        return 0;
    }
    axon_tcp_sock_set_events(iface->epfd, &ep->sock, AXON_TCP_EP_EVENTS_RX);
    if (comp != NULL) {
        comp->func(comp, AXON_OK);
        return 1;
    }
    return 0;
}

/* The socket took only sent bytes of a frame of iov: queue the rest, wait for room. */
static void axon_tcp_ep_tx_keep(axon_tcp_ep_t *ep, const struct iovec *iov, size_t iovcnt,
                                size_t sent, size_t length)
{
    axon_trace("%s: socket took %zu of %zu bytes, queueing the rest", axon_tcp_ep_iface(ep)->name,
               sent, length);
    /* The queue was empty: bytes keep their frame offsets, so alignment is kept. */
    axon_tcp_iov_copy(ep->tx_buf + sent, iov, iovcnt, sent);
    ep->tx_off = sent;
    ep->tx_len = length;
    axon_tcp_sock_set_events(axon_tcp_ep_iface(ep)->epfd, &ep->sock, AXON_TCP_EP_EVENTS_TX);
}

/* ---------------------------------------------------------------- connection setup */

static void axon_tcp_ep_connect_done(axon_tcp_ep_t *ep)
{
    socklen_t len = sizeof(int);
    int       err = 0;

    if (getsockopt(ep->sock.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
        err = errno;
    }
    if (err != 0) {
        axon_tcp_ep_log_peer(ep, AXON_LOG_ERROR, "cannot connect to", strerror(err));
        axon_tcp_ep_fail(ep, axon_tcp_sock_errno_status(err), 0);
        return;
    }
    /*
     * The deadline ends here: the answer to HELLO needs the peer's progress,
     * and a busy peer is not a dead one (death shows as EOF or keep-alive).
     */
    axon_list_del(&ep->sock.pend);
    /* HELLO waits in the send buffer; EPOLLOUT (still armed) sends it. */
    ep->state = AXON_TCP_EP_HANDSHAKE;
    axon_tcp_sock_set_events(axon_tcp_ep_iface(ep)->epfd, &ep->sock, AXON_TCP_EP_EVENTS_TX);
}

void axon_tcp_ep_check_timeout(axon_tcp_ep_t *ep, double now)
{
    char why[96];

    /* Only the kernel's connect is bounded: a handshake answer waits for the
     * peer to progress, and a live peer may compute for a long time. A dead
     * one closes the socket, a vanished host trips keepalive. */
    if ((ep->state != AXON_TCP_EP_CONNECTING) || (now < ep->sock.deadline)) {
        return;
    }
    snprintf(why, sizeof(why), "no connection after %gs (AXON_TCP_CONNECT_TIMEOUT)",
             axon_tcp_ep_iface(ep)->config->connect_timeout);
    axon_tcp_ep_log_peer(ep, AXON_LOG_ERROR, "cannot connect to", why);
    axon_tcp_ep_fail(ep, AXON_ERR_UNREACHABLE, 0);
}

axon_status_t axon_tcp_ep_create(axon_iface_t *tl_iface, uint64_t peer_uuid,
                                 const void *dev_addr, const void *iface_addr,
                                 axon_tl_ep_t **ep_p)
{
    axon_tcp_iface_t   *iface = (axon_tcp_iface_t*)tl_iface;
    axon_tcp_hs_t       hello;
    struct sockaddr_in  sa;
    axon_tcp_ep_t      *ep;
    axon_status_t       status;
    uint32_t            events;
    int                 fd, err;

    if ((dev_addr == NULL) || (iface_addr == NULL)) {
        axon_error("%s: ep_create needs the peer's device and iface addresses", iface->name);
        return AXON_ERR_INVALID_ADDR;
    }
    status = axon_tcp_iface_check_peer(iface, dev_addr, iface_addr, AXON_LOG_ERROR, &sa);
    if (status != AXON_OK) {
        return status;
    }

    /* Struct and send buffer in one allocation: nothing is allocated per message. */
    ep = malloc(axon_tcp_ep_alloc_size(iface->max_bcopy));
    if (ep == NULL) {
        axon_error("%s: cannot allocate an endpoint", iface->name);
        return AXON_ERR_NO_MEMORY;
    }
    memset(ep, 0, sizeof(*ep));
    ep->super.iface    = tl_iface;
    ep->sock.fd        = -1;
    ep->sock.kind      = AXON_TCP_SOCK_EP;
    ep->sock.peer_uuid = peer_uuid;
    ep->sock.peer_sa   = sa;
    ep->sock.deadline  = axon_sys_time_sec() + iface->config->connect_timeout;
    ep->state          = AXON_TCP_EP_CONNECTING;
    ep->tx_cap         = axon_tcp_frame_wire_len(iface->max_bcopy);
    axon_list_init(&ep->sock.link);
    axon_list_init(&ep->sock.pend);

    /* HELLO goes first through the send queue, like any frame. */
    memset(&hello, 0, sizeof(hello));
    hello.magic    = AXON_TCP_MAGIC;
    hello.version  = AXON_TCP_VERSION;
    hello.op       = AXON_TCP_HS_HELLO;
    hello.src_uuid = iface->worker_uuid;
    hello.dst_uuid = peer_uuid;
    hello.max_body = (uint32_t)iface->max_bcopy;
    memcpy(ep->tx_buf, &hello, sizeof(hello));
    ep->tx_len = sizeof(hello);

    status = axon_tcp_sock_connect(&sa, iface->config, iface->name, &fd, &err);
    if (status != AXON_OK) {
        free(ep);
        return status;
    }
    ep->sock.fd = fd;
    axon_list_add_tail(&iface->eps, &ep->sock.link);
    if (err == EINPROGRESS) {
        axon_list_add_tail(&iface->connecting, &ep->sock.pend);
    }

    if ((err == 0) || (err == EINPROGRESS)) {
        /* EPOLLOUT says when connect() finished; then it sends HELLO. */
        if (err == 0) {
            ep->state = AXON_TCP_EP_HANDSHAKE;
        }
        events = (err == 0) ? AXON_TCP_EP_EVENTS_TX : EPOLLOUT;
        status = axon_tcp_sock_epoll_add(iface->epfd, &ep->sock, events);
        if (status != AXON_OK) {
            axon_tcp_ep_release(ep);
            return status;
        }
    } else {
        /* Refused at once: a failure like any other, reported from progress. */
        axon_tcp_ep_log_peer(ep, AXON_LOG_ERROR, "cannot connect to", strerror(err));
        axon_tcp_ep_fail(ep, axon_tcp_sock_errno_status(err), 0);
    }

    *ep_p = &ep->super;
    return AXON_OK;
}

/* Queue a goodbye behind what is queued (the buffer keeps room for it). */
static void axon_tcp_ep_queue_goodbye(axon_tcp_ep_t *ep)
{
    axon_tcp_frame_t frame = axon_tcp_frame_make(0, AXON_TCP_CTRL_GOODBYE, AXON_TCP_FRAME_CTRL, 0);
    char            *dest;

    dest = axon_tcp_ep_tx_reserve(ep, sizeof(frame), ep->tx_cap + sizeof(frame));
    if (dest != NULL) {
        memcpy(dest, &frame, sizeof(frame));
        ep->tx_len += sizeof(frame);
    }
}

/* Send what is queued once, never blocking; is everything out? */
static int axon_tcp_ep_tx_try(axon_tcp_ep_t *ep)
{
    struct iovec iov;
    ssize_t      ret;

    if (ep->tx_len == ep->tx_off) {
        return 1;
    }
    iov.iov_base = ep->tx_buf + ep->tx_off;
    iov.iov_len  = ep->tx_len - ep->tx_off;
    ret = axon_tcp_sock_sendv(ep->sock.fd, &iov, 1);
    if (ret < 0) {
        return 1;   /* the peer is gone: nothing more will go out */
    }
    axon_tcp_ep_tx_consume(ep, (size_t)ret);
    return ep->tx_len == ep->tx_off;
}

void axon_tcp_ep_destroy(axon_tl_ep_t *tl_ep)
{
    axon_tcp_ep_t        *ep    = (axon_tcp_ep_t*)tl_ep;
    axon_tcp_iface_t     *iface = axon_tcp_ep_iface(ep);
    axon_tl_completion_t *comp;
    struct linger         lin   = {1, 0};

    /* An undelivered failure report dies with the ep: nobody asks about it any more. */
    axon_list_del(&ep->sock.pend);

    if (ep->zc_active) {
        /* The frame cannot be finished without the buffer: cut the stream (RST). */
        comp          = ep->zc_comp;
        ep->zc_active = 0;
        ep->zc_comp   = NULL;
        if (ep->sock.fd >= 0) {
            axon_tcp_ep_log_peer(ep, AXON_LOG_WARN, "aborting the connection to",
                                 "destroyed with a zero-copy send in flight");
            (void)setsockopt(ep->sock.fd, SOL_SOCKET, SO_LINGER, &lin, sizeof(lin));
        }
        axon_tcp_ep_release(ep);
        if (comp != NULL) {
            comp->func(comp, AXON_ERR_CANCELED);
        }
        return;
    }

    switch (ep->state) {
    case AXON_TCP_EP_CONNECTED:
        /* Queued frames go out before the goodbye, so the peer sees no failure. */
        axon_tcp_ep_queue_goodbye(ep);
        if (!axon_tcp_ep_tx_try(ep)) {
            ep->state = AXON_TCP_EP_CLOSING;
            axon_list_del(&ep->sock.link);
            axon_list_add_tail(&iface->closing, &ep->sock.link);
            axon_tcp_sock_set_events(iface->epfd, &ep->sock, AXON_TCP_EP_EVENTS_TX);
            return;
        }
        break;
    case AXON_TCP_EP_HANDSHAKE:
        /* Once HELLO is out the acceptor knows us: tell it we leave on purpose. */
        if (ep->tx_len == ep->tx_off) {
            axon_tcp_ep_queue_goodbye(ep);
            (void)axon_tcp_ep_tx_try(ep);
        }
        break;
    default:
        break;
    }
    axon_tcp_ep_release(ep);
}

void axon_tcp_ep_close_now(axon_tcp_ep_t *ep)
{
    if (ep->state != AXON_TCP_EP_CLOSING) {
        axon_tcp_ep_destroy(&ep->super);
        if (ep->state != AXON_TCP_EP_CLOSING) {
            return;   /* freed */
        }
    }
    /* A last try for what a slow peer has not taken yet. */
    (void)axon_tcp_ep_tx_try(ep);
    axon_tcp_ep_release(ep);
}

/* ---------------------------------------------------------------- progress */

unsigned axon_tcp_ep_handle_events(axon_tcp_ep_t *ep, uint32_t events)
{
    ssize_t ret;

    switch (ep->state) {
    case AXON_TCP_EP_CONNECTING:
        axon_tcp_ep_connect_done(ep);
        /* Connected: send HELLO now rather than on the next call. */
        return (ep->state == AXON_TCP_EP_HANDSHAKE) ? axon_tcp_ep_tx_progress(ep) : 0;
    case AXON_TCP_EP_CLOSING:
        if (events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP)) {
            /* A goodbye, an end of stream or an error: the peer takes nothing more. */
            ret = axon_tcp_sock_recv(ep->sock.fd, &ep->rx, sizeof(ep->rx));
            if (ret != -EAGAIN) {
                axon_tcp_ep_release(ep);
                return 0;
            }
        }
        break;
    default:
        if (events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP)) {
            axon_tcp_ep_rx(ep);
            if (ep->sock.fd < 0) {
                return 0;
            }
        }
        break;
    }
    if (events & EPOLLOUT) {
        return axon_tcp_ep_tx_progress(ep);
    }
    return 0;
}

/* ---------------------------------------------------------------- sends */

/* Out of line: called only before the handshake ends, or after the connection did. */
static __attribute__((noinline, cold))
axon_status_t axon_tcp_ep_not_ready(const axon_tcp_ep_t *ep)
{
    switch (ep->state) {
    case AXON_TCP_EP_CONNECTING:
    case AXON_TCP_EP_HANDSHAKE:
        return AXON_ERR_NO_RESOURCE;   /* queued above us, retried from progress */
    case AXON_TCP_EP_FAILED:
    case AXON_TCP_EP_CLOSED:
        return ep->sock.status;
    default:
        axon_error("%s: send on a destroyed endpoint", axon_tcp_ep_iface(ep)->name);
        return AXON_ERR_INVALID_PARAM;
    }
}

static __attribute__((noinline, cold))
axon_status_t axon_tcp_ep_am_invalid(const axon_tcp_iface_t *iface, const char *op,
                                     uint8_t am_id, size_t hdr_len, size_t length, size_t max)
{
    if (am_id >= AXON_AM_ID_MAX) {
        axon_error("%s: %s with invalid am_id %u (max %d)", iface->name, op, am_id,
                   AXON_AM_ID_MAX - 1);
    } else {
        axon_error("%s: %s of %zu + %zu bytes exceeds its limit %zu", iface->name, op, hdr_len,
                   length, max);
    }
    return AXON_ERR_INVALID_PARAM;
}

axon_status_t axon_tcp_ep_am_short(axon_tl_ep_t *tl_ep, uint8_t am_id, const void *hdr,
                                   size_t hdr_len, const void *payload, size_t length)
{
    axon_tcp_ep_t          *ep    = (axon_tcp_ep_t*)tl_ep;
    const axon_tcp_iface_t *iface = axon_tcp_ep_iface(ep);
    axon_tcp_frame_t        frame;
    struct iovec            iov[4];
    size_t                  body, wire;
    ssize_t                 ret;
    char                   *dest;

    /* Written so that hdr_len + length cannot wrap around. */
    if (__builtin_expect((am_id >= AXON_AM_ID_MAX) || (length > iface->max_short) ||
                         (hdr_len > iface->max_short - length), 0)) {
        return axon_tcp_ep_am_invalid(iface, "am_short", am_id, hdr_len, length,
                                      iface->max_short);
    }
    if (__builtin_expect(ep->state != AXON_TCP_EP_CONNECTED, 0)) {
        return axon_tcp_ep_not_ready(ep);
    }
    if (__builtin_expect(ep->zc_active, 0)) {
        return AXON_ERR_NO_RESOURCE;   /* later frames wait for the zero-copy one */
    }

    body  = hdr_len + length;
    wire  = axon_tcp_frame_wire_len(body);
    frame = axon_tcp_frame_make((uint32_t)body, am_id, 0, 0);
    iov[0].iov_base = &frame;
    iov[0].iov_len  = sizeof(frame);
    iov[1].iov_base = (void*)hdr;
    iov[1].iov_len  = hdr_len;
    iov[2].iov_base = (void*)payload;
    iov[2].iov_len  = length;
    iov[3].iov_base = (void*)axon_tcp_zero_pad;
    iov[3].iov_len  = axon_tcp_pad(body);

    if (__builtin_expect(ep->tx_len == ep->tx_off, 1)) {
        ret = axon_tcp_sock_sendv(ep->sock.fd, iov, 4);
        if (__builtin_expect(ret == (ssize_t)wire, 1)) {
            return AXON_OK;
        }
        if (ret < 0) {
            return axon_tcp_ep_tx_error(ep, (int)-ret);
        }
        axon_tcp_ep_tx_keep(ep, iov, 4, (size_t)ret, wire);
        return AXON_OK;
    }

    /* Behind queued bytes: copy the frame in whole, or not at all. */
    dest = axon_tcp_ep_tx_reserve(ep, wire, ep->tx_cap);
    if (dest == NULL) {
        return AXON_ERR_NO_RESOURCE;
    }
    axon_tcp_iov_copy(dest, iov, 4, 0);
    ep->tx_len += wire;
    return AXON_OK;
}

ssize_t axon_tcp_ep_am_bcopy(axon_tl_ep_t *tl_ep, uint8_t am_id, axon_pack_cb_t pack, void *arg)
{
    axon_tcp_ep_t          *ep    = (axon_tcp_ep_t*)tl_ep;
    const axon_tcp_iface_t *iface = axon_tcp_ep_iface(ep);
    axon_tcp_frame_t        frame;
    struct iovec            iov;
    size_t                  length;
    ssize_t                 ret;
    char                   *dest;

    if (__builtin_expect(am_id >= AXON_AM_ID_MAX, 0)) {
        return axon_tcp_ep_am_invalid(iface, "am_bcopy", am_id, 0, 0, iface->max_bcopy);
    }
    if (__builtin_expect(ep->state != AXON_TCP_EP_CONNECTED, 0)) {
        return axon_tcp_ep_not_ready(ep);
    }
    /* A whole segment fits only an empty buffer; later frames wait for the zero-copy one. */
    if (__builtin_expect(!axon_tcp_ep_tx_empty(ep), 0)) {
        return AXON_ERR_NO_RESOURCE;
    }

    /* Packed straight into the send buffer: the only copy, and sent from there. */
    dest   = ep->tx_buf;
    length = pack(dest + sizeof(frame), arg);
    if (__builtin_expect(length > iface->max_bcopy, 0)) {
        axon_error("%s: am_bcopy pack callback wrote %zu bytes, max_bcopy is %zu", iface->name,
                   length, iface->max_bcopy);
        return AXON_ERR_INVALID_PARAM;
    }
    frame = axon_tcp_frame_make((uint32_t)length, am_id, 0, 0);
    memcpy(dest, &frame, sizeof(frame));
    memset(dest + sizeof(frame) + length, 0, axon_tcp_pad(length));
    iov.iov_base = dest;
    iov.iov_len  = axon_tcp_frame_wire_len(length);
    ret = axon_tcp_sock_sendv(ep->sock.fd, &iov, 1);
    if (__builtin_expect(ret < 0, 0)) {
        return axon_tcp_ep_tx_error(ep, (int)-ret);
    }
    if (__builtin_expect((size_t)ret < iov.iov_len, 0)) {
        /* The rest is already where the queue keeps it. */
        axon_trace("%s: socket took %zd of %zu bytes, queueing the rest", iface->name, ret,
                   iov.iov_len);
        ep->tx_off = (size_t)ret;
        ep->tx_len = iov.iov_len;
        axon_tcp_sock_set_events(iface->epfd, &ep->sock, AXON_TCP_EP_EVENTS_TX);
    }
    return (ssize_t)length;
}

axon_status_t axon_tcp_ep_am_zcopy(axon_tl_ep_t *tl_ep, uint8_t am_id, const void *hdr,
                                   size_t hdr_len, const void *buffer, size_t length,
                                   axon_tl_completion_t *comp)
{
    axon_tcp_ep_t          *ep    = (axon_tcp_ep_t*)tl_ep;
    const axon_tcp_iface_t *iface = axon_tcp_ep_iface(ep);
    axon_tcp_frame_t        frame;
    struct iovec            iov[4];
    size_t                  body, head, wire, sent = 0;
    ssize_t                 ret;
    char                   *dest;

    if (__builtin_expect((am_id >= AXON_AM_ID_MAX) || (hdr_len > iface->max_short) ||
                         (length > AXON_TCP_MAX_ZCOPY), 0)) {
        return axon_tcp_ep_am_invalid(iface, "am_zcopy", am_id, hdr_len, length,
                                      (hdr_len > iface->max_short) ? iface->max_short :
                                      AXON_TCP_MAX_ZCOPY);
    }
    if (__builtin_expect(ep->state != AXON_TCP_EP_CONNECTED, 0)) {
        return axon_tcp_ep_not_ready(ep);
    }
    if (ep->zc_active) {
        return AXON_ERR_NO_RESOURCE;   /* one in flight per ep */
    }

    body  = hdr_len + length;
    head  = sizeof(frame) + hdr_len;
    wire  = axon_tcp_frame_wire_len(body);
    frame = axon_tcp_frame_make((uint32_t)body, am_id, AXON_TCP_FRAME_ZCOPY, (uint16_t)hdr_len);
    iov[0].iov_base = &frame;
    iov[0].iov_len  = sizeof(frame);
    iov[1].iov_base = (void*)hdr;
    iov[1].iov_len  = hdr_len;
    iov[2].iov_base = (void*)buffer;
    iov[2].iov_len  = length;
    iov[3].iov_base = (void*)axon_tcp_zero_pad;
    iov[3].iov_len  = axon_tcp_pad(body);

    if (ep->tx_len == ep->tx_off) {
        ret = axon_tcp_sock_sendv(ep->sock.fd, iov, 4);
        if (ret == (ssize_t)wire) {
            return AXON_OK;
        }
        if (ret < 0) {
            return axon_tcp_ep_tx_error(ep, (int)-ret);
        }
        sent = (size_t)ret;
        if (sent < head) {
            /* Header bytes are the caller's only during this call: queue them. */
            axon_tcp_iov_copy(ep->tx_buf + sent, iov, 2, sent);
            ep->tx_off = sent;
            ep->tx_len = head;
        }
    } else {
        /* Behind queued bytes: headers into the queue, the payload stays where it is. */
        dest = axon_tcp_ep_tx_reserve(ep, head, ep->tx_cap);
        if (dest == NULL) {
            return AXON_ERR_NO_RESOURCE;
        }
        axon_tcp_iov_copy(dest, iov, 2, 0);
        ep->tx_len += head;
        sent        = head;   /* as far as the cursor is concerned */
    }

    ep->zc_iov[0]  = iov[2];
    ep->zc_iov[1]  = iov[3];
    ep->zc_iovcnt  = 2;
    if (sent > head) {
        axon_tcp_iov_advance(ep->zc_iov, &ep->zc_iovcnt, sent - head);
    }
    ep->zc_comp    = comp;
    ep->zc_active  = 1;
    axon_tcp_sock_set_events(iface->epfd, &ep->sock, AXON_TCP_EP_EVENTS_TX);
    return AXON_INPROGRESS;
}

axon_status_t axon_tcp_ep_flush(axon_tl_ep_t *tl_ep)
{
    const axon_tcp_ep_t *ep = (const axon_tcp_ep_t*)tl_ep;

    switch (ep->state) {
    case AXON_TCP_EP_CONNECTED:
        return axon_tcp_ep_tx_empty(ep) ? AXON_OK : AXON_INPROGRESS;
    case AXON_TCP_EP_FAILED:
    case AXON_TCP_EP_CLOSED:
        return ep->sock.status;
    default:
        return AXON_OK;   /* nothing of the caller's is queued before the handshake ends */
    }
}

axon_status_t axon_tcp_ep_check(axon_tl_ep_t *tl_ep)
{
    const axon_tcp_ep_t *ep = (const axon_tcp_ep_t*)tl_ep;

    return ((ep->state == AXON_TCP_EP_FAILED) || (ep->state == AXON_TCP_EP_CLOSED)) ?
           ep->sock.status : AXON_OK;
}
