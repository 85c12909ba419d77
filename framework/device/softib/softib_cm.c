/*
 * softib's connection manager, the calls up to a connection: which
 * addresses are softib's, the channel's epoll and timer, ids, binding and
 * listening sockets, address and route resolution (immediate: softib needs
 * no ARP or path query). softib_cm_conn.c has the connection itself.
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

typedef struct {
    double timeout;
} softib_cm_opts_t;

const axon_config_entry_t softib_cm_config_table[] = {
    {"TIMEOUT", "5s", "how long the softib connection manager waits for the peer's answer "
     "(connect, accept, disconnect) before UNREACHABLE / CONNECT_ERROR",
     offsetof(softib_cm_opts_t, timeout), AXON_CONFIG_TYPE_TIME},
    AXON_CONFIG_END
};

static const char *const softib_cm_state_strs[] = {
    [SOFTIB_CM_IDLE]           = "idle",
    [SOFTIB_CM_ADDR_RESOLVED]  = "address resolved",
    [SOFTIB_CM_ROUTE_RESOLVED] = "route resolved",
    [SOFTIB_CM_LISTEN]         = "listening",
    [SOFTIB_CM_CONNECTING]     = "connecting",
    [SOFTIB_CM_REQ_SENT]       = "request sent",
    [SOFTIB_CM_REP_RCVD]       = "reply received",
    [SOFTIB_CM_REQ_WAIT]       = "waiting for request",
    [SOFTIB_CM_REQ_RCVD]       = "request received",
    [SOFTIB_CM_REP_SENT]       = "reply sent",
    [SOFTIB_CM_ESTABLISHED]    = "established",
    [SOFTIB_CM_DREQ_SENT]      = "disconnect sent",
    [SOFTIB_CM_DISCONNECTED]   = "disconnected",
    [SOFTIB_CM_CLOSED]         = "closed",
    [SOFTIB_CM_FAILED]         = "failed",
};

const char *softib_cm_state_str(softib_cm_state_t state)
{
    return softib_cm_state_strs[state];
}

/* ------------------------------------------------------------ addresses */

/* softib's IPv4 address (network order); ENODEV when it has no device. */
static int softib_cm_local_ip(uint32_t *ip_p)
{
    softib_wire_params_t params;
    softib_opts_t opts;
    axon_dev_mtu_t mtu;
    uint64_t remove;
    int ret;

    if (softib_config_read(&opts) != 0) {
        return EINVAL;
    }
    ret = (opts.devices == 0) ? ENODEV : softib_config_params(&opts, 0, &params, &remove, &mtu);
    softib_config_release(&opts);
    if (ret == 0) {
        *ip_p = params.ipv4_addr;
    }
    return ret;
}

static int softib_cm_is_loopback(uint32_t ip)
{
    return (ntohl(ip) >> 24) == 127;
}

static int softib_cm_owns_addr(const struct sockaddr_in *addr)
{
    uint32_t ip;

    return (softib_cm_local_ip(&ip) == 0) &&
           ((addr->sin_addr.s_addr == htonl(INADDR_ANY)) || (addr->sin_addr.s_addr == ip));
}

/*
 * Our own address, or one the kernel routes to from the same kind of
 * address: a loopback softib reaches the other loopback addresses of this
 * host (softib processes given 127.0.0.x each), a networked one the hosts
 * the kernel has a route to.
 */
static int softib_cm_routes_to(const struct sockaddr_in *dst)
{
    uint32_t ip, d = dst->sin_addr.s_addr;
    int fd, ok;

    if (softib_cm_local_ip(&ip) != 0) {
        return 0;
    }
    if ((d == ip) || IN_MULTICAST(ntohl(d))) {
        return 1;   /* ours, or a group (the joins of this host's devices, softib_cm_mcast.c) */
    }
    if (softib_cm_is_loopback(ip) || softib_cm_is_loopback(d)) {
        return softib_cm_is_loopback(ip) && softib_cm_is_loopback(d);
    }
    if ((d == htonl(INADDR_ANY)) || (d == htonl(INADDR_BROADCAST))) {
        return 0;
    }
    fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return 0;
    }
    ok = (connect(fd, (const struct sockaddr *)dst, sizeof(*dst)) == 0);
    close(fd);
    return ok;
}

/* ------------------------------------------------------------ channel state */

static int softib_cm_chan_open(axon_dev_cm_chan_t *chan, void **state_p)
{
    struct epoll_event e = {.events = EPOLLIN};
    softib_cm_opts_t opts;
    softib_cm_chan_t *sc;
    int ret;

    if (axon_config_parse(softib_cm_config_table, "SOFTIB_CM_", &opts, NULL, 0) != AXON_OK) {
        return EINVAL;
    }
    sc = calloc(1, sizeof(*sc));
    if (sc == NULL) {
        axon_error("softib cm: no memory for channel state");
        return ENOMEM;
    }
    sc->chan       = chan;
    sc->timeout_ns = (uint64_t)(opts.timeout * 1e9);
    axon_list_init(&sc->ids);
    sc->epfd     = epoll_create1(EPOLL_CLOEXEC);
    sc->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    e.data.ptr   = sc;   /* the channel itself marks the timer */
    if ((sc->epfd < 0) || (sc->timer_fd < 0) ||
        (epoll_ctl(sc->epfd, EPOLL_CTL_ADD, sc->timer_fd, &e) < 0)) {
        ret = errno;
        axon_error("softib cm: cannot create the channel's epoll and timer: %s", strerror(ret));
        goto err;
    }
    if ((ret = axon_dev_cm_chan_watch(chan, sc->epfd)) != 0) {
        goto err;
    }
    *state_p = sc;
    return 0;

err:
    if (sc->epfd >= 0) {
        close(sc->epfd);
    }
    if (sc->timer_fd >= 0) {
        close(sc->timer_fd);
    }
    free(sc);
    return ret;
}

static void softib_cm_chan_close(void *state)
{
    softib_cm_chan_t *sc = state;
    softib_cm_id_t *sid, *tmp;

    /* Only accepted sockets whose request never came can be left. */
    axon_list_for_each_safe(sid, tmp, &sc->ids, link) {
        softib_cm_free(sid);
    }
    axon_dev_cm_chan_unwatch(sc->chan, sc->epfd);
    close(sc->timer_fd);
    close(sc->epfd);
    free(sc);
}

void softib_cm_timer_update(softib_cm_chan_t *sc)
{
    struct itimerspec its;
    softib_cm_id_t *sid;
    uint64_t next = 0;

    axon_list_for_each(sid, &sc->ids, link) {
        if (sid->deadline && (!next || (sid->deadline < next))) {
            next = sid->deadline;
        }
    }
    memset(&its, 0, sizeof(its));
    its.it_value.tv_sec  = (time_t)(next / 1000000000ull);
    its.it_value.tv_nsec = (long)(next % 1000000000ull);
    timerfd_settime(sc->timer_fd, TFD_TIMER_ABSTIME, &its, NULL);
}

/* ------------------------------------------------------------ ids */

softib_cm_id_t *softib_cm_id_alloc(softib_cm_chan_t *sc, axon_dev_cm_id_priv_t *id)
{
    softib_cm_id_t *sid = calloc(1, sizeof(*sid));

    if (sid == NULL) {
        axon_error("softib cm: no memory for an id");
        return NULL;
    }
    sid->sc    = sc;
    sid->id    = id;
    sid->fd    = -1;
    sid->state = SOFTIB_CM_IDLE;
    axon_list_add_tail(&sc->ids, &sid->link);
    if (id != NULL) {
        id->be = sid;
    }
    return sid;
}

int softib_cm_watch(softib_cm_id_t *sid, uint32_t events)
{
    struct epoll_event e = {.events = events, .data.ptr = sid};
    int op = sid->ep_events ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;

    if (epoll_ctl(sid->sc->epfd, op, sid->fd, &e) < 0) {
        axon_error("softib cm: cannot watch socket %d: %s", sid->fd, strerror(errno));
        return errno;
    }
    sid->ep_events = events;
    return 0;
}

void softib_cm_close(softib_cm_id_t *sid)
{
    if (sid->fd < 0) {
        return;
    }
    if (sid->ep_events) {
        epoll_ctl(sid->sc->epfd, EPOLL_CTL_DEL, sid->fd, NULL);
        sid->ep_events = 0;
    }
    close(sid->fd);
    sid->fd       = -1;
    sid->deadline = 0;
}

void softib_cm_free(softib_cm_id_t *sid)
{
    softib_cm_id_t *other;

    softib_cm_close(sid);
    softib_cm_mcast_free(sid);
    axon_list_for_each(other, &sid->sc->ids, link) {
        if (other->listener == sid) {
            other->listener = NULL;
        }
    }
    axon_list_del(&sid->link);
    if ((sid->id != NULL) && (sid->id->super.verbs != NULL)) {
        axon_dev_cm_close_device(sid->id->super.verbs);
        sid->id->super.verbs = NULL;
    }
    if (sid->id != NULL) {
        sid->id->be = NULL;
    }
    free(sid);
}

static int softib_cm_socket(softib_cm_id_t *sid)
{
    int one = 1;

    sid->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (sid->fd < 0) {
        axon_error("softib cm: socket: %s", strerror(errno));
        return errno;
    }
    setsockopt(sid->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    /* CM messages are small and answered at once: no Nagle delay */
    setsockopt(sid->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return 0;
}

/* The CM's shared softib0 for this id. */
static int softib_cm_device(softib_cm_id_t *sid)
{
    axon_dev_attr_t attr;
    int ret;

    if ((ret = axon_dev_cm_open_device("softib0", &sid->id->super.verbs)) != 0) {
        return ret;
    }
    sid->id->super.port_num = SOFTIB_PORT_NUM;
    sid->max_rd = (axon_dev_query_device(sid->id->super.verbs, &attr) == 0) ?
                  attr.max_qp_rd_atom : 0;
    return 0;
}

/* A socket bound to addr, a device, the local address. */
static int softib_cm_bind_sid(axon_dev_cm_id_priv_t *id, const struct sockaddr_in *addr)
{
    softib_cm_id_t *sid = softib_cm_id_alloc(axon_dev_cm_chan_state(id->chan, &softib_cm_ops), id);
    socklen_t len = sizeof(id->super.src_addr);
    char str[64];
    int ret;

    if (sid == NULL) {
        return ENOMEM;
    }
    if ((ret = softib_cm_socket(sid)) != 0) {
        goto err;
    }
    if (bind(sid->fd, (const struct sockaddr *)addr, sizeof(*addr)) < 0) {
        ret = errno;
        axon_error("softib cm: cannot bind to %s: %s",
                   axon_dev_cm_addr_str(addr, str, sizeof(str)), strerror(ret));
        goto err;
    }
    getsockname(sid->fd, (struct sockaddr *)&id->super.src_addr, &len);
    if ((ret = softib_cm_device(sid)) != 0) {
        goto err;
    }
    return 0;

err:
    softib_cm_free(sid);
    return ret;
}

static int softib_cm_bind_addr(axon_dev_cm_id_priv_t *id, const struct sockaddr_in *addr)
{
    return softib_cm_bind_sid(id, addr);
}

int softib_cm_bad_state(softib_cm_id_t *sid, const char *what)
{
    axon_error("softib cm: %s: id %p is in state '%s'", what, sid ? (void *)sid->id : NULL,
               sid ? softib_cm_state_str(sid->state) : "not bound");
    return EINVAL;
}

static int softib_cm_resolve_addr(axon_dev_cm_id_priv_t *id, const struct sockaddr_in *src,
                                  const struct sockaddr_in *dst, int timeout_ms)
{
    struct sockaddr_in any;
    softib_cm_id_t *sid = softib_cm_sid(id);
    char str[64];
    int ret;

    if ((sid != NULL) && (sid->state != SOFTIB_CM_IDLE)) {
        return softib_cm_bad_state(sid, "resolve_addr");
    }
    if (sid == NULL) {
        if (src == NULL) {
            memset(&any, 0, sizeof(any));
            any.sin_family = AF_INET;
            softib_cm_local_ip(&any.sin_addr.s_addr);
            src = &any;
        }
        if ((ret = softib_cm_bind_sid(id, src)) != 0) {
            return ret;
        }
        sid = softib_cm_sid(id);
    }
    if (!softib_cm_routes_to(dst)) {
        axon_debug("softib cm: no softib device routes to %s",
                   axon_dev_cm_addr_str(dst, str, sizeof(str)));
        softib_cm_event(sid, AXON_DEV_CM_EVENT_ADDR_ERROR, -EHOSTUNREACH, NULL);
        return 0;
    }
    id->super.dst_addr = *dst;
    sid->state         = SOFTIB_CM_ADDR_RESOLVED;
    softib_cm_event(sid, AXON_DEV_CM_EVENT_ADDR_RESOLVED, 0, NULL);
    return 0;
}

static int softib_cm_resolve_route(axon_dev_cm_id_priv_t *id, int timeout_ms)
{
    softib_cm_id_t *sid = softib_cm_sid(id);

    if ((sid == NULL) || (sid->state != SOFTIB_CM_ADDR_RESOLVED)) {
        return softib_cm_bad_state(sid, "resolve_route (resolve_addr first)");
    }
    sid->state = SOFTIB_CM_ROUTE_RESOLVED;
    softib_cm_event(sid, AXON_DEV_CM_EVENT_ROUTE_RESOLVED, 0, NULL);
    return 0;
}

static int softib_cm_listen(axon_dev_cm_id_priv_t *id, int backlog)
{
    softib_cm_id_t *sid = softib_cm_sid(id);
    int ret;

    if ((sid == NULL) || (sid->state != SOFTIB_CM_IDLE) || (sid->fd < 0)) {
        return softib_cm_bad_state(sid, "listen (bind_addr first)");
    }
    if (listen(sid->fd, backlog ? backlog : SOMAXCONN) < 0) {
        axon_error("softib cm: listen: %s", strerror(errno));
        return errno;
    }
    if ((ret = softib_cm_watch(sid, EPOLLIN)) != 0) {
        return ret;
    }
    sid->state = SOFTIB_CM_LISTEN;
    return 0;
}

const axon_dev_cm_ops_t softib_cm_ops = {
    .name          = "softib",
    .owns_addr     = softib_cm_owns_addr,
    .routes_to     = softib_cm_routes_to,
    .chan_open     = softib_cm_chan_open,
    .chan_close    = softib_cm_chan_close,
    .chan_progress = softib_cm_chan_progress,
    .bind_addr     = softib_cm_bind_addr,
    .resolve_addr  = softib_cm_resolve_addr,
    .resolve_route = softib_cm_resolve_route,
    .listen        = softib_cm_listen,
    .create_qp     = softib_cm_create_qp,
    .connect       = softib_cm_connect,
    .accept        = softib_cm_accept,
    .reject        = softib_cm_reject,
    .establish     = softib_cm_establish,
    .init_qp_attr  = softib_cm_init_qp_attr,
    .disconnect    = softib_cm_disconnect,
    .join_multicast  = softib_cm_join_multicast,
    .leave_multicast = softib_cm_leave_multicast,
    .qp_gone       = softib_cm_qp_gone,
    .destroy       = softib_cm_destroy,
    .release       = NULL,
    .event_release = NULL,
    .config_table  = softib_cm_config_table,
    .config_prefix = "SOFTIB_CM_",
};
