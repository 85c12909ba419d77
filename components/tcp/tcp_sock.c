/* tcp socket helpers: options, listen, connect, epoll, non-blocking send and recv. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include "tcp_sock.h"
#include "log.h"

axon_status_t axon_tcp_sock_errno_status(int err)
{
    switch (err) {
    case ECONNREFUSED:
    case ENETUNREACH:
    case EHOSTUNREACH:
    case ENETDOWN:
    case EHOSTDOWN:
        return AXON_ERR_UNREACHABLE;
    case ETIMEDOUT:
        /* Keep-alive probes or retransmissions went unanswered. */
        return AXON_ERR_ENDPOINT_TIMEOUT;
    case ECONNRESET:
    case EPIPE:
    case ECONNABORTED:
    case ENOTCONN:
        return AXON_ERR_CONNECTION_RESET;
    case ENOMEM:
    case ENOBUFS:
        return AXON_ERR_NO_MEMORY;
    default:
        return AXON_ERR_IO_ERROR;
    }
}

const char *axon_tcp_sock_sa_str(const struct sockaddr_in *sa, char *buf, size_t max)
{
    char ip[INET_ADDRSTRLEN];

    if (inet_ntop(AF_INET, &sa->sin_addr, ip, sizeof(ip)) == NULL) {
        snprintf(ip, sizeof(ip), "?");
    }
    snprintf(buf, max, "%s:%u", ip, (unsigned)ntohs(sa->sin_port));
    return buf;
}

static void axon_tcp_sock_setopt(int fd, int level, int name, int value, const char *what,
                                 const char *iface_name)
{
    /* An option the kernel refuses costs performance or detection speed, not correctness. */
    if (setsockopt(fd, level, name, &value, sizeof(value)) != 0) {
        axon_warn("%s: setsockopt(%s=%d) failed: %s", iface_name, what, value, strerror(errno));
    }
}

/* Buffer sizes go on before connect/listen: the window scale is fixed at the handshake. */
static void axon_tcp_sock_set_buffers(int fd, const axon_tcp_config_t *config,
                                      const char *iface_name)
{
    if (config->sndbuf != 0) {
        axon_tcp_sock_setopt(fd, SOL_SOCKET, SO_SNDBUF, (int)config->sndbuf, "SO_SNDBUF",
                             iface_name);
    }
    if (config->rcvbuf != 0) {
        axon_tcp_sock_setopt(fd, SOL_SOCKET, SO_RCVBUF, (int)config->rcvbuf, "SO_RCVBUF",
                             iface_name);
    }
}

void axon_tcp_sock_set_options(int fd, const axon_tcp_config_t *config, const char *iface_name)
{
    if (config->nodelay) {
        axon_tcp_sock_setopt(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY", iface_name);
    }
    if (config->keepalive) {
        axon_tcp_sock_setopt(fd, SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE", iface_name);
        axon_tcp_sock_setopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, AXON_TCP_KEEPIDLE, "TCP_KEEPIDLE",
                             iface_name);
        axon_tcp_sock_setopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, AXON_TCP_KEEPINTVL,
                             "TCP_KEEPINTVL", iface_name);
        axon_tcp_sock_setopt(fd, IPPROTO_TCP, TCP_KEEPCNT, AXON_TCP_KEEPCNT, "TCP_KEEPCNT",
                             iface_name);
    }
}

axon_status_t axon_tcp_sock_listen(const struct in_addr *ip, uint16_t port_lo, uint16_t port_hi,
                                   const axon_tcp_config_t *config, const char *iface_name,
                                   int *fd_p, uint16_t *port_p)
{
    struct sockaddr_in sa;
    socklen_t          sa_len;
    unsigned           port;
    char               sa_str[AXON_TCP_SA_STR_MAX];
    int                fd, err = 0;

    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        axon_error("%s: socket() failed: %s", iface_name, strerror(errno));
        return AXON_ERR_IO_ERROR;
    }
    /* A port left in TIME_WAIT by an earlier run must not block a fixed range. */
    axon_tcp_sock_setopt(fd, SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR", iface_name);
    /* Accepted sockets inherit these. */
    axon_tcp_sock_set_buffers(fd, config, iface_name);

    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr   = *ip;
    for (port = port_lo; port <= port_hi; ++port) {
        sa.sin_port = htons((uint16_t)port);
        if (bind(fd, (struct sockaddr*)&sa, sizeof(sa)) == 0) {
            break;
        }
        err = errno;
        if ((err != EADDRINUSE) || (port_lo == 0)) {
            axon_error("%s: cannot bind to %s: %s", iface_name,
                       axon_tcp_sock_sa_str(&sa, sa_str, sizeof(sa_str)), strerror(err));
            goto err_close;
        }
    }
    if (port > port_hi) {
        axon_error("%s: every port of AXON_TCP_PORT_RANGE=%u-%u is in use", iface_name,
                   port_lo, port_hi);
        close(fd);
        return AXON_ERR_BUSY;
    }

    if (listen(fd, SOMAXCONN) != 0) {
        err = errno;
        axon_error("%s: listen() failed: %s", iface_name, strerror(err));
        goto err_close;
    }
    sa_len = sizeof(sa);
    if (getsockname(fd, (struct sockaddr*)&sa, &sa_len) != 0) {
        err = errno;
        axon_error("%s: getsockname() failed: %s", iface_name, strerror(err));
        goto err_close;
    }

    *fd_p   = fd;
    *port_p = ntohs(sa.sin_port);
    return AXON_OK;

err_close:
    close(fd);
    return (err == EADDRNOTAVAIL) ? AXON_ERR_NO_DEVICE : AXON_ERR_IO_ERROR;
}

axon_status_t axon_tcp_sock_connect(const struct sockaddr_in *sa, const axon_tcp_config_t *config,
                                    const char *iface_name, int *fd_p, int *err_p)
{
    int fd;

    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        axon_error("%s: socket() failed: %s", iface_name, strerror(errno));
        return axon_tcp_sock_errno_status(errno);
    }
    axon_tcp_sock_set_buffers(fd, config, iface_name);
    axon_tcp_sock_set_options(fd, config, iface_name);

    *err_p = 0;
    if (connect(fd, (const struct sockaddr*)sa, sizeof(*sa)) != 0) {
        *err_p = errno;
    }
    *fd_p = fd;
    return AXON_OK;
}

axon_status_t axon_tcp_sock_epoll_add(int epfd, axon_tcp_sock_t *sock, uint32_t events)
{
    struct epoll_event ev;

    memset(&ev, 0, sizeof(ev));
    ev.events   = events;
    ev.data.ptr = sock;
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, sock->fd, &ev) != 0) {
        axon_error("tcp: epoll_ctl(ADD, fd %d) failed: %s", sock->fd, strerror(errno));
        return AXON_ERR_IO_ERROR;
    }
    sock->events = events;
    return AXON_OK;
}

void axon_tcp_sock_set_events(int epfd, axon_tcp_sock_t *sock, uint32_t events)
{
    struct epoll_event ev;

    if ((sock->events == events) || (sock->fd < 0)) {
        return;
    }
    memset(&ev, 0, sizeof(ev));
    ev.events   = events;
    ev.data.ptr = sock;
    if (epoll_ctl(epfd, EPOLL_CTL_MOD, sock->fd, &ev) != 0) {
        /* Only a bug gets here (the fd is ours and registered). */
        axon_error("tcp: epoll_ctl(MOD, fd %d) failed: %s", sock->fd, strerror(errno));
        return;
    }
    sock->events = events;
}

void axon_tcp_sock_close(int epfd, axon_tcp_sock_t *sock)
{
    if (sock->fd < 0) {
        return;
    }
    if (sock->events != 0) {
        (void)epoll_ctl(epfd, EPOLL_CTL_DEL, sock->fd, NULL);
        sock->events = 0;
    }
    close(sock->fd);
    sock->fd = -1;
}

ssize_t axon_tcp_sock_sendv(int fd, const struct iovec *iov, size_t iovcnt, size_t chunk_max)
{
    struct iovec  chunk[AXON_TCP_SOCK_IOV_MAX];
    struct msghdr msg;
    size_t        total = 0, want, n, skip = 0;
    ssize_t       ret;

    /*
     * At most chunk_max bytes per sendmsg (AXON_TCP_IO_CHUNK): over loopback
     * one huge send holds the socket while the receiver waits to copy, and
     * the two copies run one after the other instead of overlapping; many
     * small ones cost a system call each. Which wins depends on the host.
     */
    memset(&msg, 0, sizeof(msg));
    for (;;) {
        for (n = 0, want = 0; (iovcnt > 0) && (n < AXON_TCP_SOCK_IOV_MAX) &&
                              (want < chunk_max); ++n) {
            chunk[n].iov_base = (char*)iov[n].iov_base + ((n == 0) ? skip : 0);
            chunk[n].iov_len  = iov[n].iov_len - ((n == 0) ? skip : 0);
            if (want + chunk[n].iov_len > chunk_max) {
                chunk[n].iov_len = chunk_max - want;
            }
            want += chunk[n].iov_len;
            if (n + 1 == iovcnt) {
                ++n;
                break;
            }
        }
        if (want == 0) {
            return (ssize_t)total;
        }
        msg.msg_iov    = chunk;
        msg.msg_iovlen = n;
        ret = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (ret < 0) {
            if ((errno == EAGAIN) || (errno == EWOULDBLOCK) || (errno == EINTR)) {
                return (ssize_t)total;
            }
            return (total > 0) ? (ssize_t)total : -errno;
        }
        total += (size_t)ret;
        if ((size_t)ret < want) {
            return (ssize_t)total;  /* the socket is full */
        }
        /* Advance past what went out. */
        skip += (size_t)ret;
        while ((iovcnt > 0) && (skip >= iov[0].iov_len)) {
            skip -= iov[0].iov_len;
            ++iov;
            --iovcnt;
        }
        if (iovcnt == 0) {
            return (ssize_t)total;
        }
    }
}

ssize_t axon_tcp_sock_recv(int fd, void *buf, size_t length, size_t chunk)
{
    ssize_t ret;

    /* Bounded like sends: long copies under the socket lock stall the sender. */
    if (length > chunk) {
        length = chunk;
    }
    do {
        ret = recv(fd, buf, length, MSG_DONTWAIT);
    } while ((ret < 0) && (errno == EINTR));
    if (ret >= 0) {
        return ret;
    }
    return (errno == EWOULDBLOCK) ? -EAGAIN : -errno;
}

void axon_tcp_iov_advance(struct iovec *iov, size_t *iovcnt, size_t n)
{
    size_t i = 0, j;

    while ((i < *iovcnt) && (n >= iov[i].iov_len)) {
        n -= iov[i].iov_len;
        ++i;
    }
    if (i < *iovcnt) {
        iov[i].iov_base  = (char*)iov[i].iov_base + n;
        iov[i].iov_len  -= n;
    }
    for (j = i; j < *iovcnt; ++j) {
        iov[j - i] = iov[j];
    }
    *iovcnt -= i;
}

uint64_t axon_tcp_sock_netns(void)
{
    struct stat st;

    if (stat("/proc/self/ns/net", &st) != 0) {
        return 0;
    }
    return (uint64_t)st.st_ino;
}

axon_status_t axon_tcp_sock_if_addr(const char *name, struct in_addr *ip, struct in_addr *netmask,
                                    int *is_loopback)
{
    struct ifaddrs *ifa_list, *ifa;
    axon_status_t   status = AXON_ERR_NO_DEVICE;

    if (getifaddrs(&ifa_list) != 0) {
        axon_error("tcp: getifaddrs() failed: %s", strerror(errno));
        return AXON_ERR_IO_ERROR;
    }
    for (ifa = ifa_list; ifa != NULL; ifa = ifa->ifa_next) {
        if ((ifa->ifa_addr == NULL) || (ifa->ifa_addr->sa_family != AF_INET) ||
            !(ifa->ifa_flags & IFF_UP) || strcmp(ifa->ifa_name, name)) {
            continue;
        }
        *ip          = ((const struct sockaddr_in*)ifa->ifa_addr)->sin_addr;
        netmask->s_addr = (ifa->ifa_netmask != NULL) ?
                          ((const struct sockaddr_in*)ifa->ifa_netmask)->sin_addr.s_addr :
                          INADDR_BROADCAST;
        *is_loopback = !!(ifa->ifa_flags & IFF_LOOPBACK);
        status       = AXON_OK;
        break;
    }
    freeifaddrs(ifa_list);
    return status;
}
