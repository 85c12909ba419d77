/*
 * tcp iface: listens, accepts, and runs every connection's handshake and
 * receive path; progress also pushes the eps' queues (tcp_ep.c) and
 * delivers failures.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include "tcp.h"
#include "tcp_sock.h"
#include "sys.h"
#include "log.h"

static const axon_iface_ops_t axon_tcp_iface_ops;

#define axon_tcp_conn_of(_sock) axon_container_of(_sock, axon_tcp_conn_t, sock)

/* Events a connection waits for: data, goodbye or death, and room while its ep has a queue. */
#define AXON_TCP_CONN_EVENTS_RX (EPOLLIN | EPOLLRDHUP)

/* ---------------------------------------------------------------- sockets */

static void axon_tcp_conn_free(axon_tcp_conn_t *conn)
{
    free(conn->rx_buf);
    free(conn);
}

void axon_tcp_iface_release(axon_tcp_iface_t *iface, axon_tcp_sock_t *sock)
{
    if (iface->in_progress == 0) {
        axon_tcp_conn_free(axon_tcp_conn_of(sock));
        return;
    }
    /* Events fetched by this progress call may still point to it. */
    axon_list_add_tail(&iface->garbage, &sock->pend);
}

/* The in-flight zero-copy sends of failed eps complete with the error. */
unsigned axon_tcp_iface_dispatch_ep_reports(axon_tcp_iface_t *iface)
{
    axon_tl_completion_t *comp;
    axon_tcp_ep_t        *ep;
    unsigned              count = 0;

    while (!axon_list_is_empty(&iface->ep_reports)) {
        ep = axon_container_of(iface->ep_reports.next, axon_tcp_ep_t, report);
        axon_list_del(&ep->report);
        comp          = ep->zc_comp;
        ep->zc_active = 0;
        ep->zc_comp   = NULL;
        if (comp != NULL) {
            comp->func(comp, ep->status);
            ++count;
        }
    }
    return count;
}

/*
 * Hand failures to the upper layer: the in-flight zero-copy sends of failed
 * eps complete with the error, on this iface and the worker's other tcp
 * ifaces (whose connections to a failed peer this one closed), then
 * peer_failure names each peer whose connection died: the worker tells the
 * user last. Saved first: a callback may destroy an ep.
 */
static unsigned axon_tcp_iface_dispatch_reports(axon_tcp_iface_t *iface)
{
    axon_tcp_sock_t *sock;
    axon_status_t    status;
    uint64_t         peer_uuid;
    unsigned         count;

    count = axon_tcp_iface_dispatch_ep_reports(iface);
    if (!axon_list_is_empty(&iface->reports)) {
        count += axon_tcp_siblings_dispatch_ep_reports(iface);
    }
    while (!axon_list_is_empty(&iface->reports)) {
        sock      = axon_container_of(iface->reports.next, axon_tcp_sock_t, pend);
        peer_uuid = sock->peer_uuid;
        status    = sock->status;
        axon_list_del(&sock->pend);
        axon_tcp_iface_release(iface, sock);
        if (iface->peer_failure != NULL) {
            iface->peer_failure(iface->am_arg, peer_uuid, status);
            ++count;
        }
    }
    return count;
}

/* ---------------------------------------------------------------- connections */

axon_tcp_conn_t *axon_tcp_conn_find_open(axon_tcp_iface_t *iface, uint64_t peer_uuid,
                                         const axon_tcp_conn_t *exclude)
{
    axon_tcp_sock_t *sock;
    axon_tcp_conn_t *conn;

    axon_list_for_each(sock, &iface->conns, link) {
        conn = axon_tcp_conn_of(sock);
        if ((sock->peer_uuid == peer_uuid) && (conn->state == AXON_TCP_CONN_OPEN) &&
            (conn != exclude) && (sock->fd >= 0) &&
            !(sock->flags & (AXON_TCP_SOCK_FLAG_GOODBYE | AXON_TCP_SOCK_FLAG_TX_DONE))) {
            return conn;
        }
    }
    return NULL;
}

static axon_status_t axon_tcp_conn_register(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn,
                                            uint32_t events)
{
    axon_status_t status;

    axon_list_init(&conn->sock.pend);
    axon_list_init(&conn->connecting);
    axon_list_init(&conn->tx_eps);
    status = axon_tcp_sock_epoll_add(iface->epfd, &conn->sock, events);
    if (status != AXON_OK) {
        axon_list_init(&conn->sock.link);
        return status;
    }
    axon_list_add_tail(&iface->conns, &conn->sock.link);
    ++iface->nconns;
    /* A new socket: the next progress looks at every event. */
    iface->epoll_skip = 0;
    return AXON_OK;
}

axon_status_t axon_tcp_conn_add(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn, uint32_t events)
{
    conn->sock.kind = AXON_TCP_SOCK_CONN;
    conn->connector = 1;
    return axon_tcp_conn_register(iface, conn, events);
}

/* Leave the epoll set and every list; the caller frees or reports. */
static void axon_tcp_conn_close_sock(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn)
{
    if (conn->sock.fd >= 0) {
        axon_tcp_sock_close(iface->epfd, &conn->sock);
        --iface->nconns;
    }
    axon_list_del(&conn->sock.link);
    axon_list_del(&conn->sock.pend);
    axon_list_del(&conn->connecting);
}

void axon_tcp_conn_drop(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn)
{
    axon_tcp_conn_close_sock(iface, conn);
    axon_tcp_iface_release(iface, &conn->sock);
}

/* Close and tell the ep; a failure is reported (peer_failure) once the peer is known. */
static void axon_tcp_conn_close_one(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn,
                                    axon_status_t status, int graceful)
{
    axon_tcp_ep_t *ep;

    axon_tcp_conn_close_sock(iface, conn);
    conn->sock.status = status;
    conn->tx_owner    = NULL;
    conn->tx_count    = 0;
    while (!axon_list_is_empty(&conn->tx_eps)) {
        ep = axon_tcp_conn_first_ep(conn);
        axon_list_del(&ep->conn_link);
        axon_tcp_ep_conn_lost(ep, status, graceful);
    }
    /* An acceptor learns who the peer is from its HELLO: before that, nobody to report. */
    if (!graceful && (conn->connector || (conn->state == AXON_TCP_CONN_OPEN))) {
        axon_list_add_tail(&iface->reports, &conn->sock.pend);
        iface->super.idle = 0;
    } else {
        axon_tcp_iface_release(iface, &conn->sock);
    }
}

void axon_tcp_conn_fail(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn, axon_status_t status,
                        int graceful)
{
    uint64_t peer_uuid = conn->sock.peer_uuid;
    int      known     = conn->connector || (conn->state == AXON_TCP_CONN_OPEN);

    axon_tcp_conn_close_one(iface, conn, status, graceful);
    if (!graceful && known) {
        axon_tcp_iface_fail_peer(iface, peer_uuid, status);
    }
}

void axon_tcp_iface_fail_peer(axon_tcp_iface_t *iface, uint64_t peer_uuid, axon_status_t status)
{
    axon_tcp_iface_close_peer(iface, peer_uuid, status);
    axon_tcp_siblings_fail_peer(iface, peer_uuid, status);
}

void axon_tcp_iface_close_peer(axon_tcp_iface_t *iface, uint64_t peer_uuid, axon_status_t status)
{
    axon_tcp_sock_t *sock;
    axon_tcp_conn_t *conn;
    char             sa_str[AXON_TCP_SA_STR_MAX];

again:
    /* Closing one connection may close others (its ep's): start over each time. */
    axon_list_for_each(sock, &iface->conns, link) {
        conn = axon_tcp_conn_of(sock);
        if ((sock->peer_uuid != peer_uuid) ||
            (!conn->connector && (conn->state != AXON_TCP_CONN_OPEN))) {
            continue;
        }
        axon_warn("%s: giving up on the connection with worker %016llx (%s): another "
                  "connection to it failed", iface->name, (unsigned long long)peer_uuid,
                  axon_tcp_sock_sa_str(&sock->peer_sa, sa_str, sizeof(sa_str)));
        axon_tcp_conn_close_one(iface, conn, status, 0);
        goto again;
    }
}

int axon_tcp_conn_say_goodbye(axon_tcp_conn_t *conn)
{
    axon_tcp_frame_t frame = axon_tcp_frame_make(0, AXON_TCP_CTRL_GOODBYE, AXON_TCP_FRAME_CTRL, 0);
    struct iovec     iov   = {&frame, sizeof(frame)};

    conn->sock.flags |= AXON_TCP_SOCK_FLAG_TX_DONE;
    return (axon_tcp_sock_sendv(conn->sock.fd, &iov, 1, AXON_TCP_IO_CHUNK_MIN) ==
            (ssize_t)sizeof(frame)) ? 0 : -1;
}

void axon_tcp_conn_tx_done(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn)
{
    conn->sock.flags |= AXON_TCP_SOCK_FLAG_TX_DONE;
    if (conn->sock.fd < 0) {
        return;
    }
    if (conn->sock.flags & AXON_TCP_SOCK_FLAG_GOODBYE) {
        /* Both ways are done: nothing unread is left, so the close sends no reset. */
        axon_tcp_conn_close_one(iface, conn, AXON_ERR_CONNECTION_RESET, 1);
        return;
    }
    /* The peer may still send: keep reading until its goodbye. */
    axon_tcp_sock_set_events(iface->epfd, &conn->sock, AXON_TCP_CONN_EVENTS_RX);
}

/* The peer said goodbye: with no sender of ours on it, the connection is over. */
static void axon_tcp_conn_peer_done(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn)
{
    if (conn->tx_count > 0) {
        return;   /* ours still send; the peer reads until our goodbye */
    }
    if (!(conn->sock.flags & AXON_TCP_SOCK_FLAG_TX_DONE)) {
        /* We never sent on it: an empty send buffer always takes 8 bytes. */
        (void)axon_tcp_conn_say_goodbye(conn);
    }
    axon_tcp_conn_close_one(iface, conn, AXON_ERR_CONNECTION_RESET, 1);
}

/* The peer closed or the socket failed: ret is recv()'s 0 or -errno. */
static void axon_tcp_conn_lost(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn, ssize_t ret)
{
    char          sa_str[AXON_TCP_SA_STR_MAX];
    axon_status_t status;

    axon_tcp_sock_sa_str(&conn->sock.peer_sa, sa_str, sizeof(sa_str));
    if (conn->sock.flags & AXON_TCP_SOCK_FLAG_GOODBYE) {
        axon_debug("%s: peer %016llx (%s) closed its connection", iface->name,
                   (unsigned long long)conn->sock.peer_uuid, sa_str);
        axon_tcp_conn_close_one(iface, conn, AXON_ERR_CONNECTION_RESET, 1);
        return;
    }
    status = (ret == 0) ? AXON_ERR_CONNECTION_RESET : axon_tcp_sock_errno_status((int)-ret);
    if (conn->state != AXON_TCP_CONN_OPEN) {
        if (!conn->connector) {
            axon_debug("%s: connection from %s closed during the handshake", iface->name,
                       sa_str);
            axon_tcp_conn_drop(iface, conn);
            return;
        }
        /* Its kernel took the connection, so it was there: a death, not an unreachable peer. */
        axon_warn("%s: handshake failed with worker %016llx at %s: %s", iface->name,
                  (unsigned long long)conn->sock.peer_uuid, sa_str,
                  (ret == 0) ? "connection closed without goodbye" : strerror((int)-ret));
        axon_tcp_conn_fail(iface, conn, status, 0);
        return;
    }
    axon_warn("%s: peer %016llx (%s) is gone: %s", iface->name,
              (unsigned long long)conn->sock.peer_uuid, sa_str,
              (ret == 0) ? "connection closed without goodbye" : strerror((int)-ret));
    axon_tcp_conn_fail(iface, conn, status, 0);
}

static void axon_tcp_conn_handshake(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn);

static unsigned axon_tcp_iface_accept(axon_tcp_iface_t *iface)
{
    struct sockaddr_in sa;
    socklen_t          sa_len;
    axon_tcp_conn_t   *conn;
    char               sa_str[AXON_TCP_SA_STR_MAX];
    unsigned           count;
    int                fd;

    for (count = 0; count < AXON_TCP_ACCEPT_BURST; ++count) {
        sa_len = sizeof(sa);
        fd = accept4(iface->listen.fd, (struct sockaddr*)&sa, &sa_len,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if ((errno == ECONNABORTED) || (errno == EINTR) || (errno == EPROTO)) {
                continue;   /* that client gave up; others may wait */
            }
            if ((errno != EAGAIN) && (errno != EWOULDBLOCK)) {
                /* Out of descriptors: the peer's connect times out and it reports us. */
                axon_warn("%s: accept() failed: %s", iface->name, strerror(errno));
            }
            break;
        }

        conn = calloc(1, sizeof(*conn));
        if (conn == NULL) {
            axon_error("%s: cannot allocate a connection", iface->name);
            close(fd);
            break;
        }
        conn->sock.fd      = fd;
        conn->sock.kind    = AXON_TCP_SOCK_CONN;
        conn->sock.peer_sa = sa;
        conn->state        = AXON_TCP_CONN_HANDSHAKE;
        axon_tcp_sock_set_options(fd, iface->config, iface->name);
        if (axon_tcp_conn_register(iface, conn, AXON_TCP_CONN_EVENTS_RX) != AXON_OK) {
            close(fd);
            free(conn);
            break;
        }
        /*
         * No deadline for its HELLO: the connector sends it from progress,
         * and a busy process is not a dead one. Death shows as EOF or a
         * keep-alive timeout.
         */
        axon_debug("%s: accepted a connection from %s", iface->name,
                   axon_tcp_sock_sa_str(&sa, sa_str, sizeof(sa_str)));
        /* Its HELLO is often there already: one recv() saves a round through epoll. */
        axon_tcp_conn_handshake(iface, conn);
    }
    return count;
}

/* The handshake is done: frames flow, into a buffer sized by what the peer sends. */
static axon_status_t axon_tcp_conn_open(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn,
                                        uint32_t max_body)
{
    size_t body;
    char   sa_str[AXON_TCP_SA_STR_MAX];

    /* Room for the largest plain frame the peer sends, and for any zero-copy header. */
    body              = (max_body > AXON_TCP_MAX_SHORT) ? max_body : AXON_TCP_MAX_SHORT;
    conn->rx_base_cap = axon_tcp_frame_wire_len(body);
    if (conn->rx_base_cap < AXON_TCP_RX_BUF_MIN) {
        conn->rx_base_cap = AXON_TCP_RX_BUF_MIN;
    }
    conn->rx_buf = malloc(conn->rx_base_cap);
    if (conn->rx_buf == NULL) {
        axon_error("%s: cannot allocate a %zu-byte receive buffer for %s", iface->name,
                   conn->rx_base_cap, axon_tcp_sock_sa_str(&conn->sock.peer_sa, sa_str,
                                                           sizeof(sa_str)));
        return AXON_ERR_NO_MEMORY;
    }
    conn->rx_cap   = conn->rx_base_cap;
    conn->max_body = max_body;
    conn->state    = AXON_TCP_CONN_OPEN;
    return AXON_OK;
}

/*
 * Do we have a connection of our own to peer_uuid that its side will read
 * a HELLO from (so it can move its ep onto it)?
 */
static int axon_tcp_iface_has_hello_out(axon_tcp_iface_t *iface, uint64_t peer_uuid)
{
    axon_tcp_sock_t *sock;
    axon_tcp_conn_t *conn;

    axon_list_for_each(sock, &iface->conns, link) {
        conn = axon_tcp_conn_of(sock);
        if (conn->connector && (sock->peer_uuid == peer_uuid) && conn->hs_sent &&
            !(sock->flags & (AXON_TCP_SOCK_FLAG_GOODBYE | AXON_TCP_SOCK_FLAG_TX_DONE))) {
            return 1;
        }
    }
    return 0;
}

/* The connector's HELLO is in conn->hs: answer it. The conn is OPEN afterwards, or closed. */
static void axon_tcp_conn_hello(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn)
{
    axon_tcp_hs_t  answer;
    axon_tcp_ep_t *adopt = NULL;
    struct iovec   iov;
    char           sa_str[AXON_TCP_SA_STR_MAX];
    ssize_t        ret;
    uint8_t        reason;

    axon_tcp_sock_sa_str(&conn->sock.peer_sa, sa_str, sizeof(sa_str));
    reason = axon_tcp_hello_check(&conn->hs, iface->worker_uuid);
    answer = axon_tcp_hs_make((reason == AXON_TCP_REJECT_NONE) ? AXON_TCP_HS_ACCEPT :
                              AXON_TCP_HS_REJECT, reason, iface->worker_uuid,
                              conn->hs.src_uuid, (uint32_t)iface->max_bcopy, 0);
    if (reason == AXON_TCP_REJECT_NONE) {
        /*
         * Simultaneous connects (tcp_wire.h): an ep of ours whose HELLO has
         * not left takes this connection instead; else, if both HELLOs are
         * out, the lower worker id keeps its own connection.
         */
        adopt = axon_tcp_ep_find_unsent(iface, conn->hs.src_uuid);
        if ((adopt == NULL) && (iface->worker_uuid < conn->hs.src_uuid) &&
            axon_tcp_iface_has_hello_out(iface, conn->hs.src_uuid)) {
            answer.flags = AXON_TCP_HS_FLAG_USE_MINE;
        }
    }
    iov.iov_base    = &answer;
    iov.iov_len     = sizeof(answer);
    /* A fresh socket's send buffer always holds 32 bytes; anything else is an error. */
    ret = axon_tcp_sock_sendv(conn->sock.fd, &iov, 1, AXON_TCP_IO_CHUNK_MIN);

    if (reason != AXON_TCP_REJECT_NONE) {
        /* The connector logs the error; here it is a stranger or a stale address. */
        axon_debug("%s: rejected the connection from %s (worker %016llx, expecting %016llx): "
                   "%s", iface->name, sa_str, (unsigned long long)conn->hs.src_uuid,
                   (unsigned long long)conn->hs.dst_uuid, axon_tcp_reject_names[reason]);
        axon_tcp_conn_drop(iface, conn);
        return;
    }
    if (ret != (ssize_t)sizeof(answer)) {
        axon_debug("%s: cannot answer the handshake of %s: %s", iface->name, sa_str,
                   (ret < 0) ? strerror((int)-ret) : "socket full");
        axon_tcp_conn_drop(iface, conn);
        return;
    }
    if (axon_tcp_conn_open(iface, conn, conn->hs.max_body) != AXON_OK) {
        axon_tcp_conn_drop(iface, conn);
        return;
    }
    conn->sock.peer_uuid = conn->hs.src_uuid;
    axon_debug("%s: connection from worker %016llx (%s) accepted%s", iface->name,
               (unsigned long long)conn->sock.peer_uuid, sa_str,
               (answer.flags & AXON_TCP_HS_FLAG_USE_MINE) ? ", asked to use ours" : "");
    if (adopt != NULL) {
        axon_tcp_ep_move(adopt, conn);
    }
}

static axon_status_t axon_tcp_conn_reject_status(uint8_t reason)
{
    /* A different worker at the address means ours is gone; the rest cannot work. */
    return (reason == AXON_TCP_REJECT_WRONG_PEER) ? AXON_ERR_UNREACHABLE : AXON_ERR_UNSUPPORTED;
}

static void axon_tcp_conn_answer_error(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn,
                                       axon_status_t status, const char *what, const char *why)
{
    char sa_str[AXON_TCP_SA_STR_MAX];

    axon_error("%s: %s worker %016llx at %s: %s", iface->name, what,
               (unsigned long long)conn->sock.peer_uuid,
               axon_tcp_sock_sa_str(&conn->sock.peer_sa, sa_str, sizeof(sa_str)), why);
    axon_tcp_conn_fail(iface, conn, status, 0);
}

/*
 * Accept what is pending and read the HELLOs that arrived, now rather than
 * on later events: a peer just told us its connection is there.
 */
static void axon_tcp_iface_read_hellos(axon_tcp_iface_t *iface)
{
    axon_tcp_conn_t *waiting[AXON_TCP_ACCEPT_BURST];
    axon_tcp_sock_t *sock;
    axon_tcp_conn_t *conn;
    unsigned         i, n = 0;

    (void)axon_tcp_iface_accept(iface);
    /* Collected first: a HELLO may move an ep and close another connection. */
    axon_list_for_each(sock, &iface->conns, link) {
        conn = axon_tcp_conn_of(sock);
        if (!conn->connector && (conn->state == AXON_TCP_CONN_HANDSHAKE) &&
            (n < AXON_TCP_ACCEPT_BURST)) {
            waiting[n++] = conn;
        }
    }
    /* Closed ones wait on the garbage list until progress ends: still readable here. */
    for (i = 0; i < n; ++i) {
        if ((waiting[i]->sock.fd >= 0) && (waiting[i]->state == AXON_TCP_CONN_HANDSHAKE)) {
            axon_tcp_conn_handshake(iface, waiting[i]);
        }
    }
}

/* The acceptor's answer to our HELLO is in conn->hs. */
static void axon_tcp_conn_answer(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn)
{
    const axon_tcp_hs_t *hs = &conn->hs;
    axon_tcp_conn_t     *other;
    axon_tcp_ep_t       *ep;
    const char          *why;

    if ((hs->magic != AXON_TCP_MAGIC) || (hs->version != AXON_TCP_VERSION) ||
        ((hs->op != AXON_TCP_HS_ACCEPT) && (hs->op != AXON_TCP_HS_REJECT))) {
        axon_tcp_conn_answer_error(iface, conn, AXON_ERR_IO_FORMAT, "handshake failed with",
                                   "malformed answer (not an Axon tcp peer?)");
        return;
    }
    if ((hs->op == AXON_TCP_HS_REJECT) && (conn->tx_count == 0)) {
        axon_tcp_conn_drop(iface, conn);   /* its ep is gone: nobody to tell */
        return;
    }
    if (hs->op == AXON_TCP_HS_REJECT) {
        why = (hs->reason < AXON_TCP_REJECT_LAST) ? axon_tcp_reject_names[hs->reason] :
              "unknown reason";
        axon_tcp_conn_answer_error(iface, conn, axon_tcp_conn_reject_status(hs->reason),
                                   "connection refused by", why);
        return;
    }
    if ((hs->src_uuid != conn->sock.peer_uuid) || (hs->dst_uuid != iface->worker_uuid)) {
        axon_tcp_conn_answer_error(iface, conn, AXON_ERR_UNREACHABLE, "handshake failed with",
                                   "it accepted as another worker");
        return;
    }
    if (hs->max_body > AXON_TCP_SEG_SIZE_MAX) {
        axon_tcp_conn_answer_error(iface, conn, AXON_ERR_UNSUPPORTED, "handshake failed with",
                                   "its segment size is too large");
        return;
    }
    if (axon_tcp_conn_open(iface, conn, hs->max_body) != AXON_OK) {
        axon_tcp_conn_fail(iface, conn, AXON_ERR_NO_MEMORY, 0);
        return;
    }

    if (conn->tx_count == 0) {
        return;   /* its ep left after HELLO: we said goodbye already */
    }
    ep = axon_tcp_conn_first_ep(conn);
    if ((hs->flags & AXON_TCP_HS_FLAG_USE_MINE) && (ep->tx_off == ep->tx_len)) {
        /* The peer keeps its connection to us: its HELLO came first, or is waiting. */
        other = axon_tcp_conn_find_open(iface, conn->sock.peer_uuid, conn);
        if (other == NULL) {
            axon_tcp_iface_read_hellos(iface);
            other = axon_tcp_conn_find_open(iface, conn->sock.peer_uuid, conn);
        }
        if ((other != NULL) && (ep->conn == conn)) {
            axon_tcp_ep_move(ep, other);
            return;
        }
        /* Not arrived (slow network): both connections stay, each used one way. */
    }
    if (ep->conn == conn) {
        axon_tcp_ep_open(ep);
    }
}

/* Read the handshake of either side; complete, it is answered or checked. */
static void axon_tcp_conn_handshake(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn)
{
    ssize_t ret;

    ret = axon_tcp_sock_recv(conn->sock.fd, (char*)&conn->hs + conn->hs_got,
                             sizeof(conn->hs) - conn->hs_got, AXON_TCP_IO_CHUNK_MIN);
    if (ret == -EAGAIN) {
        return;
    }
    if (ret <= 0) {
        axon_tcp_conn_lost(iface, conn, ret);
        return;
    }
    conn->hs_got += (size_t)ret;
    if (conn->hs_got < sizeof(conn->hs)) {
        return;
    }
    if (conn->connector) {
        axon_tcp_conn_answer(iface, conn);
    } else {
        axon_tcp_conn_hello(iface, conn);
    }
}

/* Make rx_buf hold needed bytes from rx_head on: move them to the front, or grow. */
static axon_status_t axon_tcp_conn_rx_room(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn,
                                           size_t needed)
{
    size_t avail = conn->rx_tail - conn->rx_head;
    char  *buf;

    if (conn->rx_head + needed <= conn->rx_cap) {
        return AXON_OK;
    }
    /* rx_head is a multiple of 8, so frames stay aligned at the front. */
    memmove(conn->rx_buf, conn->rx_buf + conn->rx_head, avail);
    conn->rx_head = 0;
    conn->rx_tail = avail;
    if (needed <= conn->rx_cap) {
        return AXON_OK;
    }
    /* Only a zero-copy frame nobody placed is this large; shrunk back once delivered. */
    buf = realloc(conn->rx_buf, needed);
    if (buf == NULL) {
        axon_error("%s: cannot grow a receive buffer to %zu bytes", iface->name, needed);
        return AXON_ERR_NO_MEMORY;
    }
    conn->rx_buf = buf;
    conn->rx_cap = needed;
    return AXON_OK;
}

static void axon_tcp_conn_rx_shrink(axon_tcp_conn_t *conn)
{
    size_t avail = conn->rx_tail - conn->rx_head;
    char  *buf;

    memmove(conn->rx_buf, conn->rx_buf + conn->rx_head, avail);
    conn->rx_head = 0;
    conn->rx_tail = avail;
    buf = realloc(conn->rx_buf, conn->rx_base_cap);
    if (buf != NULL) {   /* else keep the large one */
        conn->rx_buf = buf;
        conn->rx_cap = conn->rx_base_cap;
    }
}

/* Out of line: a message no handler wants is a bug somewhere, not a fast path. */
static __attribute__((noinline, cold))
void axon_tcp_conn_drop_am(const axon_tcp_iface_t *iface, const axon_tcp_conn_t *conn,
                           uint8_t am_id, size_t length)
{
    axon_warn("%s: dropped am_id %u (%zu bytes) from worker %016llx: no handler", iface->name,
              am_id, length, (unsigned long long)conn->sock.peer_uuid);
}

static inline void axon_tcp_conn_deliver(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn,
                                         uint8_t am_id, const void *data, size_t length,
                                         unsigned flags)
{
    axon_am_handler_t handler = iface->am_handlers[am_id];

    if (__builtin_expect(handler != NULL, 1)) {
        handler(iface->am_arg, data, length, flags);
    } else {
        axon_tcp_conn_drop_am(iface, conn, am_id, length);
    }
}

/*
 * A zero-copy frame whose header is in rx_buf at rx_head: ask where its data
 * goes. Returns 1 when the data continues on the socket (placement in
 * flight), 0 when the frame was delivered or goes the unplaced way.
 */
static int axon_tcp_conn_place(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn,
                               const axon_tcp_frame_t *frame, unsigned *count_p)
{
    size_t  hdr_end  = sizeof(*frame) + frame->hdr_len;
    size_t  data_len = frame->length - frame->hdr_len;
    size_t  wire     = axon_tcp_frame_wire_len(frame->length);
    size_t  avail    = conn->rx_tail - conn->rx_head;
    size_t  in_buf, consumed;
    char   *hdr      = conn->rx_buf + conn->rx_head + sizeof(*frame);
    void   *dest;

    dest = iface->am_rx_dest(iface->am_arg, frame->am_id, hdr, frame->hdr_len, data_len);
    if (dest == NULL) {
        conn->rx_unplaced = 1;
        return 0;
    }

    /* What the last bulk read took of the data: copied once, the rest comes straight in. */
    in_buf = avail - hdr_end;
    if (in_buf > data_len) {
        in_buf = data_len;
    }
    if (in_buf > 0) {
        memcpy(dest, hdr + frame->hdr_len, in_buf);
    }

    if (in_buf == data_len) {
        consumed       = (avail < wire) ? avail : wire;
        conn->rx_head += consumed;
        conn->rx_skip  = wire - consumed;   /* padding not read yet */
        iface->am_handlers[frame->am_id](iface->am_arg, hdr, frame->hdr_len,
                                         AXON_AM_FLAG_PLACED);
        ++(*count_p);
        return 0;
    }

    /* Keep frame header and AM header at the front for the handler; the rest was data. */
    memmove(conn->rx_buf, conn->rx_buf + conn->rx_head, hdr_end);
    conn->rx_head    = 0;
    conn->rx_tail    = hdr_end;
    conn->place_dest = dest;
    conn->place_len  = data_len;
    conn->place_done = in_buf;
    return 1;
}

static void axon_tcp_conn_place_done(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn)
{
    axon_tcp_frame_t frame;

    memcpy(&frame, conn->rx_buf, sizeof(frame));
    conn->place_dest = NULL;
    conn->rx_skip    = axon_tcp_pad(frame.length);
    conn->rx_head    = 0;
    conn->rx_tail    = 0;   /* the header stays in place until the handler returns */
    iface->am_handlers[frame.am_id](iface->am_arg, conn->rx_buf + sizeof(frame), frame.hdr_len,
                                    AXON_AM_FLAG_PLACED);
}

static __attribute__((noinline, cold))
void axon_tcp_conn_malformed(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn,
                             const axon_tcp_frame_t *frame, const char *why)
{
    char sa_str[AXON_TCP_SA_STR_MAX];

    axon_error("%s: malformed frame from worker %016llx (%s): am_id %u flags 0x%x length %u "
               "hdr_len %u: %s; dropping the connection", iface->name,
               (unsigned long long)conn->sock.peer_uuid,
               axon_tcp_sock_sa_str(&conn->sock.peer_sa, sa_str, sizeof(sa_str)),
               frame->am_id, frame->flags, frame->length, frame->hdr_len, why);
}

/* Deliver every complete frame in rx_buf; the socket keeps what is not in yet. */
static axon_status_t axon_tcp_conn_parse(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn,
                                         unsigned *count_p)
{
    axon_tcp_frame_t frame;
    const char      *why;
    size_t           avail, wire, needed;
    char            *body;

    for (;;) {
        avail  = conn->rx_tail - conn->rx_head;
        needed = sizeof(frame);
        if (avail < needed) {
            break;
        }
        memcpy(&frame, conn->rx_buf + conn->rx_head, sizeof(frame));
        why = axon_tcp_frame_invalid(&frame, conn->max_body);
        if (__builtin_expect(why != NULL, 0)) {
            axon_tcp_conn_malformed(iface, conn, &frame, why);
            return AXON_ERR_IO_FORMAT;
        }
        if (frame.flags & AXON_TCP_FRAME_CTRL) {
            /* Goodbye: the peer's last frame on this connection. */
            conn->sock.flags |= AXON_TCP_SOCK_FLAG_GOODBYE;
            conn->rx_head    += sizeof(frame);
            break;
        }

        if ((frame.flags & AXON_TCP_FRAME_ZCOPY) && !conn->rx_unplaced &&
            (iface->am_rx_dest != NULL) && (iface->am_handlers[frame.am_id] != NULL)) {
            needed = sizeof(frame) + frame.hdr_len;
            if (avail < needed) {
                break;
            }
            if (axon_tcp_conn_place(iface, conn, &frame, count_p)) {
                return AXON_OK;   /* the data goes straight from the socket now */
            }
            if (!conn->rx_unplaced) {
                if (__builtin_expect(conn->sock.fd < 0, 0)) {
                    return AXON_OK;
                }
                continue;         /* placed from what was buffered */
            }
        }

        wire = axon_tcp_frame_wire_len(frame.length);
        if (avail < wire) {
            needed = wire;
            break;
        }
        body               = conn->rx_buf + conn->rx_head + sizeof(frame);
        conn->rx_head     += wire;
        conn->rx_unplaced  = 0;
        axon_tcp_conn_deliver(iface, conn, frame.am_id, body, frame.length, AXON_AM_FLAG_NONE);
        ++(*count_p);
        if (__builtin_expect(conn->sock.fd < 0, 0)) {
            return AXON_OK;   /* a handler closed it (aborted its ep's send) */
        }
    }

    if (conn->rx_head == conn->rx_tail) {
        conn->rx_head = conn->rx_tail = 0;
    }
    /*
     * Back to the usual size once no oversized frame is pending. A buffer of
     * a few MB is kept: growing it again costs a page fault per page.
     */
    if ((conn->rx_cap > conn->rx_base_cap) && (conn->rx_cap > AXON_TCP_RX_BUF_KEEP) &&
        (needed <= conn->rx_base_cap)) {
        axon_tcp_conn_rx_shrink(conn);
    }
    /* Room for the frame in progress, so the next recv() has somewhere to go. */
    return axon_tcp_conn_rx_room(iface, conn, needed);
}

/* Read what the socket has: into rx_buf, or into a placement destination. */
static unsigned axon_tcp_conn_rx(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn)
{
    uint8_t       pad[AXON_TCP_ALIGN];
    axon_status_t status;
    unsigned      count = 0, round;
    size_t        want;
    ssize_t       ret;
    char         *dest;

    for (round = 0; round < AXON_TCP_RX_ROUNDS; ++round) {
        if (conn->place_dest != NULL) {
            dest = conn->place_dest + conn->place_done;
            want = conn->place_len - conn->place_done;
        } else if (conn->rx_skip > 0) {
            dest = (char*)pad;
            want = conn->rx_skip;
        } else {
            dest = conn->rx_buf + conn->rx_tail;
            want = conn->rx_cap - conn->rx_tail;
        }

        ret = axon_tcp_sock_recv(conn->sock.fd, dest, want, iface->config->io_chunk);
        if (ret == -EAGAIN) {
            break;
        }
        if (ret <= 0) {
            axon_tcp_conn_lost(iface, conn, ret);
            break;
        }

        if (conn->place_dest != NULL) {
            conn->place_done += (size_t)ret;
            if (conn->place_done == conn->place_len) {
                axon_tcp_conn_place_done(iface, conn);
                ++count;
            }
        } else if (conn->rx_skip > 0) {
            conn->rx_skip -= (size_t)ret;
        } else {
            conn->rx_tail += (size_t)ret;
            status = axon_tcp_conn_parse(iface, conn, &count);
            if (status != AXON_OK) {
                axon_tcp_conn_fail(iface, conn, status, 0);
                break;
            }
        }
        if (__builtin_expect(conn->sock.fd < 0, 0)) {
            break;   /* closed by a handler */
        }
        if (__builtin_expect(conn->sock.flags & AXON_TCP_SOCK_FLAG_GOODBYE, 0)) {
            axon_debug("%s: worker %016llx said goodbye; %u ep(s) of ours still send", iface->name,
                       (unsigned long long)conn->sock.peer_uuid, conn->tx_count);
            axon_tcp_conn_peer_done(iface, conn);
            break;   /* nothing follows a goodbye but the end of the stream */
        }
        if ((size_t)ret < want) {
            break;   /* the socket is drained */
        }
    }
    return count;
}

unsigned axon_tcp_conn_handle_events(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn,
                                     uint32_t events)
{
    unsigned count = 0;

    if (conn->state == AXON_TCP_CONN_CONNECTING) {
        return axon_tcp_ep_connected(axon_tcp_conn_first_ep(conn));
    }
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP)) {
        if (conn->state == AXON_TCP_CONN_HANDSHAKE) {
            axon_tcp_conn_handshake(iface, conn);
        }
        if ((conn->sock.fd >= 0) && (conn->state == AXON_TCP_CONN_OPEN)) {
            count += axon_tcp_conn_rx(iface, conn);
        }
        if (conn->sock.fd < 0) {
            return count;
        }
    }
    if (events & EPOLLOUT) {
        if (conn->tx_owner != NULL) {
            count += axon_tcp_ep_tx_progress(conn->tx_owner);
        } else {
            axon_tcp_sock_set_events(iface->epfd, &conn->sock, AXON_TCP_CONN_EVENTS_RX);
        }
    }
    return count;
}

/* ---------------------------------------------------------------- progress */

static void axon_tcp_iface_check_timeouts(axon_tcp_iface_t *iface)
{
    axon_tcp_conn_t *conn, *tmp;
    double           now = axon_sys_time_sec();

    axon_list_for_each_safe(conn, tmp, &iface->connecting, connecting) {
        axon_tcp_conn_check_timeout(iface, conn, now);
    }
}

/*
 * The one connection to poll with recv() instead of epoll_wait(): open,
 * nothing of ours waiting for room, no zero-copy placement in flight (its
 * reads are large and rare anyway), and nothing else on the iface.
 */
static inline axon_tcp_conn_t *axon_tcp_iface_only_conn(axon_tcp_iface_t *iface)
{
    axon_tcp_conn_t *conn;

    if (iface->nconns != 1) {
        return NULL;
    }
    conn = axon_container_of(iface->conns.next, axon_tcp_conn_t, sock.link);
    if ((conn->state != AXON_TCP_CONN_OPEN) || (conn->sock.events & EPOLLOUT) ||
        (conn->sock.flags & AXON_TCP_SOCK_FLAG_GOODBYE)) {
        return NULL;
    }
    return conn;
}

/* Nothing but the listening socket: no connection, endpoint or report to look after. */
static void axon_tcp_iface_update_idle(axon_tcp_iface_t *iface)
{
    iface->super.idle = (iface->nconns == 0) && axon_list_is_empty(&iface->eps) &&
                        axon_list_is_empty(&iface->ep_reports) &&
                        axon_list_is_empty(&iface->reports);
}

static unsigned axon_tcp_iface_progress(axon_iface_t *tl_iface)
{
    axon_tcp_iface_t  *iface = (axon_tcp_iface_t*)tl_iface;
    struct epoll_event events[AXON_TCP_EVENTS_MAX];
    axon_tcp_sock_t   *sock;
    axon_tcp_conn_t   *conn;
    unsigned           count = 0;
    uint64_t           now;
    int                i, n;

    /* A callback progressing us again: the outer call is already reading. */
    if (iface->in_progress) {
        return 0;
    }
    /*
     * Only a listening socket (super.idle, set below): the worker calls us
     * once in AXON_IFACE_IDLE_POLLS, and new connections are not
     * latency-critical, so look once per AXON_TCP_IDLE_POLL_NS.
     */
    if (iface->super.idle) {
        now = axon_sys_coarse_ns();
        if (now < iface->idle_next_ns) {
            return 0;
        }
        iface->idle_next_ns = now + AXON_TCP_IDLE_POLL_NS;
    }
    ++iface->in_progress;

    /*
     * One connection: read it straight away, so noticing and reading a
     * message is one syscall. epoll_wait still runs when the read finds
     *      * every AXON_TCP_EPOLL_INTERVAL calls, for the listening socket and
     * whatever else has happened.
     */
    conn = axon_tcp_iface_only_conn(iface);
    if ((conn != NULL) && (iface->epoll_skip > 0)) {
        --iface->epoll_skip;   /* also under traffic: a new connection waits 64 calls at most */
        count = axon_tcp_conn_rx(iface, conn);
        goto out_events;
    }

    iface->epoll_skip = AXON_TCP_EPOLL_INTERVAL - 1;
    n = epoll_wait(iface->epfd, events, AXON_TCP_EVENTS_MAX, 0);
    for (i = 0; i < n; ++i) {
        sock = events[i].data.ptr;
        if (sock->fd < 0) {
            continue;   /* closed by an earlier event of this batch */
        }
        if (sock->kind == AXON_TCP_SOCK_LISTEN) {
            count += axon_tcp_iface_accept(iface);
        } else {
            count += axon_tcp_conn_handle_events(iface, axon_tcp_conn_of(sock),
                                                 events[i].events);
        }
    }

out_events:
    /* After the events: a connect that finished while we were away is not late. */
    if (!axon_list_is_empty(&iface->connecting)) {
        axon_tcp_iface_check_timeouts(iface);
    }
    if (!axon_list_is_empty(&iface->ep_reports) || !axon_list_is_empty(&iface->reports)) {
        count += axon_tcp_iface_dispatch_reports(iface);
    }

    --iface->in_progress;
    while (!axon_list_is_empty(&iface->garbage)) {
        sock = axon_container_of(iface->garbage.next, axon_tcp_sock_t, pend);
        axon_list_del(&sock->pend);
        axon_tcp_conn_free(axon_tcp_conn_of(sock));
    }
    axon_tcp_iface_update_idle(iface);
    return count;
}

/* ---------------------------------------------------------------- open, close */

axon_status_t axon_tcp_iface_open(const axon_resource_t *resource, const void *config_v,
                                  const axon_iface_params_t *params, axon_iface_t **iface_p)
{
    const axon_tcp_config_t *config = config_v;
    axon_tcp_iface_t        *iface;
    axon_status_t            status;
    uint16_t                 port_lo, port_hi;
    char                     sa_str[AXON_TCP_SA_STR_MAX];
    struct sockaddr_in       sa;

    status = axon_tcp_config_check(config, &port_lo, &port_hi);
    if (status != AXON_OK) {
        return status;
    }
    if (params == NULL) {
        axon_error("tcp: iface_open needs parameters");
        return AXON_ERR_INVALID_PARAM;
    }

    iface = calloc(1, sizeof(*iface));
    if (iface == NULL) {
        axon_error("tcp: cannot allocate an iface");
        return AXON_ERR_NO_MEMORY;
    }
    iface->super.ops      = &axon_tcp_iface_ops;
    iface->super.resource = resource;
    iface->epfd           = -1;
    iface->listen.fd      = -1;
    iface->listen.kind    = AXON_TCP_SOCK_LISTEN;
    iface->am_arg         = params->am_arg;
    /* A copy: read on every message, and the caller's table may be on its stack. */
    if (params->am_handlers != NULL) {
        memcpy(iface->am_handlers, params->am_handlers, sizeof(iface->am_handlers));
    }
    iface->am_rx_dest     = params->am_rx_dest;
    iface->peer_failure   = params->peer_failure;
    iface->worker_uuid    = params->worker_uuid;
    iface->config         = config;
    iface->max_short      = axon_tcp_max_short(config->seg_size);
    iface->max_bcopy      = config->seg_size;
    iface->host_id        = axon_sys_host_id();
    iface->netns          = axon_tcp_sock_netns();
    snprintf(iface->name, sizeof(iface->name), "tcp/%s", resource->dev_name);
    axon_list_init(&iface->listen.link);
    axon_list_init(&iface->listen.pend);
    axon_list_init(&iface->eps);
    axon_list_init(&iface->closing);
    axon_list_init(&iface->ep_reports);
    axon_list_init(&iface->conns);
    axon_list_init(&iface->connecting);
    axon_list_init(&iface->reports);
    axon_list_init(&iface->garbage);

    status = axon_tcp_sock_if_addr(resource->dev_name, &iface->ip, &iface->netmask,
                                   &iface->is_loopback);
    if (status != AXON_OK) {
        if (status == AXON_ERR_NO_DEVICE) {
            axon_error("%s: the interface is down or has no IPv4 address any more", iface->name);
        }
        goto err_free;
    }

    iface->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (iface->epfd < 0) {
        axon_error("%s: epoll_create1() failed: %s", iface->name, strerror(errno));
        status = AXON_ERR_IO_ERROR;
        goto err_free;
    }
    status = axon_tcp_sock_listen(&iface->ip, port_lo, port_hi, config, iface->name,
                                  &iface->listen.fd, &iface->port);
    if (status != AXON_OK) {
        goto err_close_epoll;
    }
    status = axon_tcp_sock_epoll_add(iface->epfd, &iface->listen, EPOLLIN);
    if (status != AXON_OK) {
        goto err_close_listen;
    }

    memset(&sa, 0, sizeof(sa));
    sa.sin_addr = iface->ip;
    sa.sin_port = htons(iface->port);
    axon_debug("%s: worker %016llx listening on %s", iface->name,
               (unsigned long long)iface->worker_uuid,
               axon_tcp_sock_sa_str(&sa, sa_str, sizeof(sa_str)));
    axon_tcp_siblings_add(iface);
    *iface_p = &iface->super;
    return AXON_OK;

err_close_listen:
    close(iface->listen.fd);
err_close_epoll:
    close(iface->epfd);
err_free:
    free(iface);
    return status;
}

static void axon_tcp_iface_close(axon_iface_t *tl_iface)
{
    axon_tcp_iface_t *iface = (axon_tcp_iface_t*)tl_iface;
    axon_tcp_sock_t  *sock;
    axon_tcp_conn_t  *conn;
    axon_tcp_ep_t    *ep;

    axon_tcp_siblings_del(iface);
    /* Endpoints the upper layer left open go with the iface (with a goodbye). */
    while (!axon_list_is_empty(&iface->eps)) {
        ep = axon_container_of(iface->eps.next, axon_tcp_ep_t, link);
        axon_tcp_ep_destroy(&ep->super);
    }
    while (!axon_list_is_empty(&iface->closing)) {
        ep = axon_container_of(iface->closing.next, axon_tcp_ep_t, link);
        axon_tcp_ep_close_now(ep);
    }
    /* Peers sending to us learn that we leave on purpose. */
    while (!axon_list_is_empty(&iface->conns)) {
        sock = axon_container_of(iface->conns.next, axon_tcp_sock_t, link);
        conn = axon_tcp_conn_of(sock);
        if ((conn->state == AXON_TCP_CONN_OPEN) &&
            !(sock->flags & AXON_TCP_SOCK_FLAG_TX_DONE)) {
            (void)axon_tcp_conn_say_goodbye(conn);
        }
        axon_tcp_conn_close_sock(iface, conn);
        axon_tcp_conn_free(conn);
    }
    /* Failures nobody will hear of now: only connections are left there. */
    while (!axon_list_is_empty(&iface->reports)) {
        sock = axon_container_of(iface->reports.next, axon_tcp_sock_t, pend);
        axon_list_del(&sock->pend);
        axon_tcp_conn_free(axon_tcp_conn_of(sock));
    }
    axon_tcp_sock_close(iface->epfd, &iface->listen);
    close(iface->epfd);
    free(iface);
}

/* ---------------------------------------------------------------- addresses */

static axon_status_t axon_tcp_iface_get_address(axon_iface_t *tl_iface, void *dev_addr,
                                                void *iface_addr)
{
    const axon_tcp_iface_t *iface = (const axon_tcp_iface_t*)tl_iface;
    axon_tcp_dev_addr_t     dev;
    axon_tcp_iface_addr_t   addr;

    /* Addresses are blobs in a larger buffer: copy, never cast (alignment). */
    memset(&dev, 0, sizeof(dev));
    dev.ip      = iface->ip.s_addr;
    dev.netmask = iface->netmask.s_addr;
    dev.host_id = iface->host_id;
    dev.netns   = iface->netns;
    memcpy(dev_addr, &dev, sizeof(dev));

    addr.port = htons(iface->port);
    memcpy(iface_addr, &addr, sizeof(addr));
    return AXON_OK;
}

/* The peer's device address names this network stack: same host and namespace */
static int axon_tcp_same_stack(const axon_tcp_iface_t *iface, const axon_tcp_dev_addr_t *dev)
{
    return (dev->host_id == iface->host_id) && (dev->netns == iface->netns);
}

axon_status_t axon_tcp_iface_check_peer(const axon_tcp_iface_t *iface, const void *dev_addr,
                                        const void *iface_addr, axon_log_level_t log_level,
                                        struct sockaddr_in *sa)
{
    axon_tcp_dev_addr_t   dev;
    axon_tcp_iface_addr_t addr;
    char                  ip_str[INET_ADDRSTRLEN];
    uint32_t              mask = iface->netmask.s_addr;
    int                   peer_loopback, same_stack;

    memcpy(&dev, dev_addr, sizeof(dev));
    if (inet_ntop(AF_INET, &dev.ip, ip_str, sizeof(ip_str)) == NULL) {
        ip_str[0] = '\0';
    }
    if ((dev.ip == htonl(INADDR_ANY)) || (dev.ip == htonl(INADDR_BROADCAST))) {
        axon_log(log_level, "%s: malformed peer address %s", iface->name, ip_str);
        return AXON_ERR_INVALID_ADDR;
    }

    peer_loopback = ((ntohl(dev.ip) >> 24) == IN_LOOPBACKNET);
    same_stack    = axon_tcp_same_stack(iface, &dev);
    if (peer_loopback) {
        /* Every host and network namespace has its own 127.0.0.1. */
        if (!iface->is_loopback) {
            axon_log(log_level, "%s: peer address %s is loopback, reached through lo only",
                     iface->name, ip_str);
            return AXON_ERR_UNREACHABLE;
        }
        if (!same_stack) {
            axon_log(log_level, "%s: peer loopback %s is in another host or network namespace",
                     iface->name, ip_str);
            return AXON_ERR_UNREACHABLE;
        }
    } else {
        if (iface->is_loopback) {
            axon_log(log_level, "%s: peer address %s is not loopback", iface->name, ip_str);
            return AXON_ERR_UNREACHABLE;
        }
        if ((dev.ip & mask) != (iface->ip.s_addr & mask)) {
            axon_log(log_level, "%s: peer address %s is outside our subnet", iface->name, ip_str);
            return AXON_ERR_UNREACHABLE;
        }
        /* docker0 and the like have one address on every host: ours would answer. */
        if ((dev.ip == iface->ip.s_addr) && !same_stack) {
            axon_log(log_level, "%s: peer address %s is our own, on another host", iface->name,
                     ip_str);
            return AXON_ERR_UNREACHABLE;
        }
    }
    if (iface_addr == NULL) {
        return AXON_OK;   /* the device alone was asked about */
    }

    memcpy(&addr, iface_addr, sizeof(addr));
    if (addr.port == 0) {
        axon_log(log_level, "%s: malformed peer address %s: port 0", iface->name, ip_str);
        return AXON_ERR_INVALID_ADDR;
    }
    memset(sa, 0, sizeof(*sa));
    sa->sin_family      = AF_INET;
    sa->sin_addr.s_addr = dev.ip;
    sa->sin_port        = addr.port;
    return AXON_OK;
}

/*
 * A peer in this network stack (same host and namespace) is reached through
 * the kernel's loopback whatever the interface named: eth0's address to a
 * process beside us moves as fast as lo's, not at eth0's link speed.
 */
static double axon_tcp_iface_peer_bandwidth(axon_iface_t *tl_iface, const void *dev_addr)
{
    const axon_tcp_iface_t *iface = (const axon_tcp_iface_t *)tl_iface;
    axon_tcp_dev_addr_t dev;

    memcpy(&dev, dev_addr, sizeof(dev));
    return axon_tcp_same_stack(iface, &dev) ? AXON_TCP_BANDWIDTH_LO : 0;
}

static int axon_tcp_iface_is_reachable(axon_iface_t *tl_iface, const void *dev_addr,
                                       const void *iface_addr)
{
    struct sockaddr_in sa;

    return axon_tcp_iface_check_peer((const axon_tcp_iface_t*)tl_iface, dev_addr, iface_addr,
                                     AXON_LOG_DEBUG, &sa) == AXON_OK;
}

static const axon_iface_ops_t axon_tcp_iface_ops = {
    .iface_close        = axon_tcp_iface_close,
    .iface_progress     = axon_tcp_iface_progress,
    .dev_addr_len       = sizeof(axon_tcp_dev_addr_t),
    .iface_addr_len     = sizeof(axon_tcp_iface_addr_t),
    .iface_get_address  = axon_tcp_iface_get_address,
    .iface_is_reachable = axon_tcp_iface_is_reachable,
    .iface_peer_bandwidth = axon_tcp_iface_peer_bandwidth,
    .ep_create          = axon_tcp_ep_create,
    .ep_destroy         = axon_tcp_ep_destroy,
    .ep_am_short        = axon_tcp_ep_am_short,
    .ep_am_bcopy        = axon_tcp_ep_am_bcopy,
    .ep_am_zcopy        = axon_tcp_ep_am_zcopy,
    .ep_get_zcopy       = NULL,   /* no one-sided reads over a socket */
    .ep_flush           = axon_tcp_ep_flush,
    .ep_check           = axon_tcp_ep_check,
};
