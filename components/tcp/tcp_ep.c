/*
 * tcp endpoint: a sender on a connection shared with the other eps to the
 * same peer worker. It attaches to an open connection with the peer, or
 * connects without blocking and says HELLO. Once open it sends frames
 * straight from the caller's memory when the socket takes them; the rest
 * is queued in the ep's send buffer (or, for zero-copy, as a cursor into
 * the caller's buffer) and pushed from progress on EPOLLOUT, while the
 * connection's other eps wait (only one queue per socket).
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
    [AXON_TCP_EP_CONNECTED]  = "connected",
    [AXON_TCP_EP_FAILED]     = "failed",
    [AXON_TCP_EP_CLOSED]     = "closed by peer",
    [AXON_TCP_EP_CLOSING]    = "closing",
};

/* Events an ep's connection waits for: the peer's frames, and room while a queue waits. */
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
             (unsigned long long)ep->peer_uuid,
             axon_tcp_sock_sa_str(&ep->peer_sa, sa_str, sizeof(sa_str)), why);
}

/* Off every list and freed: the upper layer is done with it and so is its connection. */
static void axon_tcp_ep_free(axon_tcp_ep_t *ep)
{
    axon_list_del(&ep->link);
    axon_list_del(&ep->report);
    free(ep);
}

void axon_tcp_ep_conn_lost(axon_tcp_ep_t *ep, axon_status_t status, int graceful)
{
    axon_tcp_iface_t *iface = axon_tcp_ep_iface(ep);

    ep->conn = NULL;
    if (ep->state == AXON_TCP_EP_CLOSING) {
        axon_tcp_ep_free(ep);   /* destroyed already: nobody to tell */
        return;
    }
    if ((ep->state == AXON_TCP_EP_FAILED) || (ep->state == AXON_TCP_EP_CLOSED)) {
        return;
    }
    axon_debug("%s: ep %p to worker %016llx: %s -> %s (%s)", iface->name, (void*)ep,
               (unsigned long long)ep->peer_uuid, axon_tcp_ep_state_names[ep->state],
               axon_tcp_ep_state_names[graceful ? AXON_TCP_EP_CLOSED : AXON_TCP_EP_FAILED],
               axon_status_string(status));
    ep->state  = graceful ? AXON_TCP_EP_CLOSED : AXON_TCP_EP_FAILED;
    ep->status = status;
    ep->tx_off = 0;
    ep->tx_len = 0;
    if (ep->zc_active) {
        /* Completed from progress, with the error. */
        axon_list_del(&ep->report);
        axon_list_add_tail(&iface->ep_reports, &ep->report);
        iface->super.idle = 0;
    }
}

/*
 * A send failed with errno err: this side of the connection is over. Its
 * receive side decides (from progress) whether the peer left on purpose
 * (a goodbye before the end of stream) or died, and reports that.
 */
static axon_status_t axon_tcp_ep_tx_error(axon_tcp_ep_t *ep, int err)
{
    axon_tcp_iface_t *iface  = axon_tcp_ep_iface(ep);
    axon_tcp_conn_t  *conn   = ep->conn;
    axon_status_t     status = axon_tcp_sock_errno_status(err);

    axon_tcp_ep_t    *other;

    axon_tcp_ep_log_peer(ep, AXON_LOG_DEBUG, "cannot send to", strerror(err));
    /* Every ep on the socket: none of them can send on it any more. */
    conn->tx_owner = NULL;
    conn->tx_count = 0;
    while (!axon_list_is_empty(&conn->tx_eps)) {
        other = axon_tcp_conn_first_ep(conn);
        axon_list_del(&other->conn_link);
        axon_tcp_ep_conn_lost(other, status, 0);
    }
    axon_tcp_conn_tx_done(iface, conn);
    return status;
}

/* Take ep off its connection's senders. */
static void axon_tcp_ep_detach(axon_tcp_ep_t *ep)
{
    axon_tcp_conn_t *conn = ep->conn;

    axon_list_del(&ep->conn_link);
    --conn->tx_count;
    if (conn->tx_owner == ep) {
        conn->tx_owner = NULL;
    }
    ep->conn = NULL;
}

static void axon_tcp_ep_queue_goodbye(axon_tcp_ep_t *ep);

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
unsigned axon_tcp_ep_tx_progress(axon_tcp_ep_t *ep)
{
    axon_tcp_iface_t     *iface = axon_tcp_ep_iface(ep);
    axon_tcp_conn_t      *conn  = ep->conn;
    axon_tl_completion_t *comp;
    struct iovec          iov[3];
    size_t                iovcnt, i, zc_sent;
    ssize_t               ret;
    int                   last;

again:
    iovcnt = 0;
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
        ret = axon_tcp_sock_sendv(conn->sock.fd, iov, iovcnt, iface->config->io_chunk);
        if (ret < 0) {
            axon_tcp_ep_tx_error(ep, (int)-ret);   /* frees ep if CLOSING */
            return 0;
        }
        if ((ret > 0) && (conn->state != AXON_TCP_CONN_OPEN)) {
            conn->hs_sent = 1;   /* the peer may read our HELLO now: no silent move any more */
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
    conn->tx_owner = NULL;
    comp           = NULL;
    if (ep->zc_active) {
        comp          = ep->zc_comp;
        ep->zc_active = 0;
        ep->zc_comp   = NULL;
    }
    if (ep->state == AXON_TCP_EP_CLOSING) {
        last = (conn->tx_count == 1);
        if (last && !ep->bye_queued) {
            /* The others left while it drained: it says the connection's goodbye. */
            axon_tcp_ep_queue_goodbye(ep);
            ep->bye_queued = 1;
            conn->tx_owner = ep;
            goto again;
        }
        axon_tcp_ep_detach(ep);
        axon_tcp_ep_free(ep);
        if (last) {
            axon_tcp_conn_tx_done(iface, conn);   /* its goodbye was the last frame */
        } else {
            axon_tcp_sock_set_events(iface->epfd, &conn->sock, AXON_TCP_EP_EVENTS_RX);
        }
        return 0;
    }
    axon_tcp_sock_set_events(iface->epfd, &conn->sock, AXON_TCP_EP_EVENTS_RX);
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
    ep->tx_off          = sent;
    ep->tx_len          = length;
    ep->conn->tx_owner  = ep;
    axon_tcp_sock_set_events(axon_tcp_ep_iface(ep)->epfd, &ep->conn->sock,
                             AXON_TCP_EP_EVENTS_TX);
}

/* ---------------------------------------------------------------- connection setup */

unsigned axon_tcp_ep_connected(axon_tcp_ep_t *ep)
{
    axon_tcp_iface_t *iface = axon_tcp_ep_iface(ep);
    axon_tcp_conn_t  *conn  = ep->conn;
    socklen_t         len   = sizeof(int);
    int               err   = 0;

    if (getsockopt(conn->sock.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
        err = errno;
    }
    if (err != 0) {
        axon_tcp_ep_log_peer(ep, AXON_LOG_ERROR, "cannot connect to", strerror(err));
        axon_tcp_conn_fail(iface, conn, axon_tcp_sock_errno_status(err), 0);
        return 0;
    }
    /*
     * The deadline ends here: the answer to HELLO needs the peer's progress,
     * and a busy peer is not a dead one (death shows as EOF or keep-alive).
     */
    axon_list_del(&conn->connecting);
    conn->state = AXON_TCP_CONN_HANDSHAKE;
    axon_tcp_sock_set_events(iface->epfd, &conn->sock, AXON_TCP_EP_EVENTS_TX);
    /* HELLO waits in the send queue: send it now rather than on the next call. */
    return axon_tcp_ep_tx_progress(ep);
}

void axon_tcp_conn_check_timeout(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn, double now)
{
    char why[96];

    /* Only the kernel's connect is bounded: a handshake answer waits for the
     * peer to progress, and a live peer may compute for a long time. A dead
     * one closes the socket, a vanished host trips keepalive. */
    if ((conn->state != AXON_TCP_CONN_CONNECTING) || (now < conn->deadline)) {
        return;
    }
    snprintf(why, sizeof(why), "no connection after %gs (AXON_TCP_CONNECT_TIMEOUT)",
             iface->config->connect_timeout);
    axon_tcp_ep_log_peer(axon_tcp_conn_first_ep(conn), AXON_LOG_ERROR, "cannot connect to", why);
    axon_tcp_conn_fail(iface, conn, AXON_ERR_UNREACHABLE, 0);
}

void axon_tcp_ep_open(axon_tcp_ep_t *ep)
{
    ep->state  = AXON_TCP_EP_CONNECTED;
    ep->tx_off = 0;
    ep->tx_len = 0;
    axon_tcp_ep_log_peer(ep, AXON_LOG_DEBUG, "connected to",
                         ep->conn->connector ? "our connection" : "its connection");
}

/* Attach ep to the senders of conn. */
static void axon_tcp_ep_add_to(axon_tcp_ep_t *ep, axon_tcp_conn_t *conn)
{
    ep->conn = conn;
    axon_list_add_tail(&conn->tx_eps, &ep->conn_link);
    ++conn->tx_count;
}

static void axon_tcp_ep_attach(axon_tcp_ep_t *ep, axon_tcp_conn_t *conn)
{
    axon_tcp_ep_add_to(ep, conn);
    axon_tcp_ep_open(ep);
}

void axon_tcp_ep_move(axon_tcp_ep_t *ep, axon_tcp_conn_t *conn)
{
    axon_tcp_iface_t *iface = axon_tcp_ep_iface(ep);
    axon_tcp_conn_t  *old   = ep->conn;

    axon_tcp_ep_detach(ep);
    if (!old->hs_sent) {
        axon_tcp_conn_drop(iface, old);   /* not a byte went out: the peer saw nothing */
    } else if (axon_tcp_conn_say_goodbye(old) != 0) {
        /* Impossible on a socket that sent 32 bytes and got them answered; be safe. */
        axon_tcp_conn_fail(iface, old, AXON_ERR_CONNECTION_RESET, 1);
    } else {
        axon_tcp_conn_tx_done(iface, old);
    }
    axon_tcp_ep_attach(ep, conn);
}

axon_tcp_ep_t *axon_tcp_ep_find_unsent(axon_tcp_iface_t *iface, uint64_t peer_uuid)
{
    axon_tcp_ep_t *ep;

    axon_list_for_each(ep, &iface->eps, link) {
        if ((ep->peer_uuid == peer_uuid) && (ep->state == AXON_TCP_EP_CONNECTING) &&
            (ep->conn != NULL) && !ep->conn->hs_sent) {
            return ep;
        }
    }
    return NULL;
}

axon_status_t axon_tcp_ep_create(axon_iface_t *tl_iface, uint64_t peer_uuid,
                                 const void *dev_addr, const void *iface_addr,
                                 axon_tl_ep_t **ep_p)
{
    axon_tcp_iface_t   *iface = (axon_tcp_iface_t*)tl_iface;
    axon_tcp_hs_t       hello;
    struct sockaddr_in  sa;
    axon_tcp_conn_t    *conn;
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
    ep->super.iface = tl_iface;
    ep->peer_uuid   = peer_uuid;
    ep->peer_sa     = sa;
    ep->state       = AXON_TCP_EP_CONNECTING;
    ep->tx_cap      = axon_tcp_frame_wire_len(iface->max_bcopy);
    axon_list_init(&ep->report);
    axon_list_add_tail(&iface->eps, &ep->link);
    iface->super.idle = 0;

    /* The peer connected to us already: send on its connection (tcp_wire.h). */
    conn = axon_tcp_conn_find_open(iface, peer_uuid, NULL);
    if (conn != NULL) {
        axon_tcp_ep_attach(ep, conn);
        *ep_p = &ep->super;
        return AXON_OK;
    }

    conn = calloc(1, sizeof(*conn));
    if (conn == NULL) {
        axon_error("%s: cannot allocate a connection", iface->name);
        axon_tcp_ep_free(ep);
        return AXON_ERR_NO_MEMORY;
    }
    conn->sock.peer_uuid = peer_uuid;
    conn->sock.peer_sa   = sa;
    conn->deadline       = axon_sys_time_sec() + iface->config->connect_timeout;
    conn->state          = AXON_TCP_CONN_CONNECTING;

    /* HELLO goes first through the send queue, like any frame. */
    hello = axon_tcp_hs_make(AXON_TCP_HS_HELLO, AXON_TCP_REJECT_NONE, iface->worker_uuid,
                             peer_uuid, (uint32_t)iface->max_bcopy, 0);
    memcpy(ep->tx_buf, &hello, sizeof(hello));
    ep->tx_len = sizeof(hello);

    status = axon_tcp_sock_connect(&sa, iface->config, iface->name, &fd, &err);
    if (status != AXON_OK) {
        free(conn);
        axon_tcp_ep_free(ep);
        return status;
    }
    conn->sock.fd = fd;
    if (err == 0) {
        conn->state = AXON_TCP_CONN_HANDSHAKE;
    }
    /* EPOLLOUT says when connect() finished; then it sends HELLO. */
    events = (err == 0) ? AXON_TCP_EP_EVENTS_TX : EPOLLOUT;
    status = axon_tcp_conn_add(iface, conn, events);
    if (status != AXON_OK) {
        close(fd);
        free(conn);
        axon_tcp_ep_free(ep);
        return status;
    }
    axon_tcp_ep_add_to(ep, conn);
    conn->tx_owner = ep;   /* HELLO is in its queue */
    if (err == EINPROGRESS) {
        axon_list_add_tail(&iface->connecting, &conn->connecting);
    } else if (err != 0) {
        /* Refused at once: a failure like any other, reported from progress. */
        axon_tcp_ep_log_peer(ep, AXON_LOG_ERROR, "cannot connect to", strerror(err));
        axon_tcp_conn_fail(iface, conn, axon_tcp_sock_errno_status(err), 0);
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
    ret = axon_tcp_sock_sendv(ep->conn->sock.fd, &iov, 1,
                              axon_tcp_ep_iface(ep)->config->io_chunk);
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
    axon_tcp_conn_t      *conn  = ep->conn;
    axon_tl_completion_t *comp;
    struct linger         lin   = {1, 0};
    int                   last;

    /* An undelivered completion dies with the ep: nobody asks about it any more. */
    axon_list_del(&ep->report);

    if (conn == NULL) {
        axon_tcp_ep_free(ep);   /* failed or closed: nothing left to say */
        return;
    }

    if (ep->zc_active) {
        /* The frame cannot be finished without the buffer: cut the stream (RST). */
        comp          = ep->zc_comp;
        ep->zc_active = 0;
        ep->zc_comp   = NULL;
        axon_tcp_ep_log_peer(ep, AXON_LOG_WARN, "aborting the connection to",
                             "destroyed with a zero-copy send in flight");
        (void)setsockopt(conn->sock.fd, SOL_SOCKET, SO_LINGER, &lin, sizeof(lin));
        axon_tcp_ep_detach(ep);
        axon_tcp_ep_free(ep);
        /* The peer's half and other eps on it go too: what it sends us is lost, so it failed. */
        axon_tcp_conn_fail(iface, conn, AXON_ERR_CONNECTION_RESET, 0);
        if (comp != NULL) {
            comp->func(comp, AXON_ERR_CANCELED);
        }
        return;
    }

    switch (ep->state) {
    case AXON_TCP_EP_CONNECTED:
        last = (conn->tx_count == 1);
        if ((conn->tx_owner != NULL) && (conn->tx_owner != ep)) {
            /* Another ep's bytes are queued, so ours is empty, and that ep stays. */
            axon_tcp_ep_detach(ep);
            axon_tcp_ep_free(ep);
            return;
        }
        /* Queued frames go out before the goodbye, so the peer sees no failure. */
        if (last) {
            axon_tcp_ep_queue_goodbye(ep);
            ep->bye_queued = 1;
        }
        if (!axon_tcp_ep_tx_try(ep)) {
            conn->tx_owner = ep;
            ep->state      = AXON_TCP_EP_CLOSING;
            axon_list_del(&ep->link);
            axon_list_add_tail(&iface->closing, &ep->link);
            axon_tcp_sock_set_events(iface->epfd, &conn->sock, AXON_TCP_EP_EVENTS_TX);
            return;
        }
        axon_tcp_ep_detach(ep);
        axon_tcp_ep_free(ep);
        if (last) {
            axon_tcp_conn_tx_done(iface, conn);
        }
        return;
    case AXON_TCP_EP_CONNECTING:
        /*
         * Its own connection, not open yet. Once all of HELLO is out the
         * acceptor knows us, and may have put an ep of its own on the
         * connection: say goodbye and keep reading, as on an open one.
         */
        axon_tcp_ep_detach(ep);
        if (conn->hs_sent && (ep->tx_len == ep->tx_off) &&
            (axon_tcp_conn_say_goodbye(conn) == 0)) {
            axon_tcp_conn_tx_done(iface, conn);
        } else {
            axon_tcp_conn_drop(iface, conn);   /* the peer saw no (whole) HELLO */
        }
        break;
    default:
        break;
    }
    axon_tcp_ep_free(ep);
}

void axon_tcp_ep_close_now(axon_tcp_ep_t *ep)
{
    axon_tcp_conn_t *conn = ep->conn;
    int              all, last;

    /* A last try for what a slow peer has not taken yet (ep is CLOSING). */
    all  = axon_tcp_ep_tx_try(ep);
    last = (conn->tx_count == 1);
    if (!all || (last && ep->bye_queued)) {
        /* Our goodbye is out, or a frame was cut: no goodbye may follow. */
        conn->sock.flags |= AXON_TCP_SOCK_FLAG_TX_DONE;
    }
    axon_tcp_ep_detach(ep);
    axon_tcp_ep_free(ep);
}

/* ---------------------------------------------------------------- sends */

/* Out of line: called only before the handshake ends, or after the connection did. */
static __attribute__((noinline, cold))
axon_status_t axon_tcp_ep_not_ready(const axon_tcp_ep_t *ep)
{
    switch (ep->state) {
    case AXON_TCP_EP_CONNECTING:
        return AXON_ERR_NO_RESOURCE;   /* queued above us, retried from progress */
    case AXON_TCP_EP_FAILED:
    case AXON_TCP_EP_CLOSED:
        return ep->status;
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

    if (__builtin_expect(ep->conn->tx_owner == NULL, 1)) {
        ret = axon_tcp_sock_sendv(ep->conn->sock.fd, iov, 4, iface->config->io_chunk);
        if (__builtin_expect(ret == (ssize_t)wire, 1)) {
            return AXON_OK;
        }
        if (ret < 0) {
            return axon_tcp_ep_tx_error(ep, (int)-ret);
        }
        axon_tcp_ep_tx_keep(ep, iov, 4, (size_t)ret, wire);
        return AXON_OK;
    }

    if (ep->conn->tx_owner != ep) {
        return AXON_ERR_NO_RESOURCE;   /* another ep's frame is half out */
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
    if (__builtin_expect(ep->conn->tx_owner != NULL, 0)) {
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
    ret = axon_tcp_sock_sendv(ep->conn->sock.fd, &iov, 1, iface->config->io_chunk);
    if (__builtin_expect(ret < 0, 0)) {
        return axon_tcp_ep_tx_error(ep, (int)-ret);
    }
    if (__builtin_expect((size_t)ret < iov.iov_len, 0)) {
        /* The rest is already where the queue keeps it. */
        axon_trace("%s: socket took %zd of %zu bytes, queueing the rest", iface->name, ret,
                   iov.iov_len);
        ep->tx_off         = (size_t)ret;
        ep->tx_len         = iov.iov_len;
        ep->conn->tx_owner = ep;
        axon_tcp_sock_set_events(iface->epfd, &ep->conn->sock, AXON_TCP_EP_EVENTS_TX);
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

    if (ep->conn->tx_owner == NULL) {
        ret = axon_tcp_sock_sendv(ep->conn->sock.fd, iov, 4, iface->config->io_chunk);
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
    } else if (ep->conn->tx_owner != ep) {
        return AXON_ERR_NO_RESOURCE;   /* another ep's frame is half out */
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
    ep->zc_comp         = comp;
    ep->zc_active       = 1;
    ep->conn->tx_owner  = ep;
    axon_tcp_sock_set_events(iface->epfd, &ep->conn->sock, AXON_TCP_EP_EVENTS_TX);
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
        return ep->status;
    default:
        return AXON_OK;   /* nothing of the caller's is queued before the handshake ends */
    }
}

axon_status_t axon_tcp_ep_check(axon_tl_ep_t *tl_ep)
{
    const axon_tcp_ep_t *ep = (const axon_tcp_ep_t*)tl_ep;

    return ((ep->state == AXON_TCP_EP_FAILED) || (ep->state == AXON_TCP_EP_CLOSED)) ?
           ep->status : AXON_OK;
}
