/*
 * tcp connection set-up: accepting, and the HELLO each side sends and
 * answers before a connection carries messages (tcp_wire.h); a connector's
 * socket comes from tcp_ep.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>
#include "tcp.h"
#include "tcp_sock.h"

unsigned axon_tcp_iface_accept(axon_tcp_iface_t *iface)
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
void axon_tcp_conn_handshake(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn)
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
