/*
 * tcp iface: its listening socket and epoll set, its connections' table and
 * their ends (goodbye, failure, release); progress reads the events and
 * hands each connection to its handshake (tcp_conn_hs.c) or receive path
 * (tcp_conn_rx.c), and delivers failures.
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

axon_status_t axon_tcp_conn_register(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn,
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
void axon_tcp_conn_peer_done(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn)
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
void axon_tcp_conn_lost(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn, ssize_t ret)
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
     * message is one syscall. epoll_wait still runs every
     * AXON_TCP_EPOLL_INTERVAL calls, for the listening socket and whatever
     * else has happened.
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

/* ---------------------------------------------------------------- waiting */

/* The epoll set is level-triggered: it is readable while any socket has work. */
static axon_status_t axon_tcp_iface_event_fd(axon_iface_t *tl_iface, int *fd_p)
{
    *fd_p = ((axon_tcp_iface_t*)tl_iface)->epfd;
    return AXON_OK;
}

/*
 * Armed unless progress has work: a socket ready, or what only polling
 * finds (a connect's deadline, reports to deliver, sockets to free). Frames
 * left in a receive buffer are partial: their rest makes the socket ready.
 */
static axon_status_t axon_tcp_iface_event_arm(axon_iface_t *tl_iface)
{
    axon_tcp_iface_t  *iface = (axon_tcp_iface_t*)tl_iface;
    struct epoll_event event;

    if (!axon_list_is_empty(&iface->connecting) || !axon_list_is_empty(&iface->ep_reports) ||
        !axon_list_is_empty(&iface->reports) || !axon_list_is_empty(&iface->garbage)) {
        return AXON_ERR_BUSY;
    }
    return (epoll_wait(iface->epfd, &event, 1, 0) > 0) ? AXON_ERR_BUSY : AXON_OK;
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
    .iface_event_fd     = axon_tcp_iface_event_fd,
    .iface_event_arm    = axon_tcp_iface_event_arm,
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
