/*
 * softib's UDP wire: one non-blocking datagram socket per open device, bound
 * to the device's IPv4 address and port base + N * 4096 + slot (device 0:
 * base + slot). Every datagram starts with a small header, so that strays
 * (another program, another device's port) are told apart from packets.
 *
 * A full socket buffer (EAGAIN, ENOBUFS) counts as a lost packet: the send
 * returns 0 and the RC engine retransmits, as it would after a congested
 * switch dropped the packet.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include "softib_wire_priv.h"
#include "log.h"

#define SOFTIB_WIRE_UDP_MAGIC 0x53425731u   /* "SBW1" */

typedef struct softib_wire_udp_hdr {
    uint32_t magic;      /* network byte order, as the rest */
    uint16_t dev_index;
    uint16_t dest_slot;
} softib_wire_udp_hdr_t;

/* The port of (device, slot), or 0 if it does not fit in 16 bits. */
static unsigned softib_wire_udp_port(const softib_wire_t *wire, unsigned slot)
{
    unsigned long port = (unsigned long)wire->params.udp_port_base +
                         (unsigned long)wire->params.dev_index * SOFTIB_WIRE_PORTS_PER_DEV + slot;

    return (port <= 65535) ? (unsigned)port : 0;
}

static void softib_wire_udp_sockaddr(uint32_t ipv4_addr, unsigned port, struct sockaddr_in *sin)
{
    memset(sin, 0, sizeof(*sin));
    sin->sin_family      = AF_INET;
    sin->sin_port        = htons((uint16_t)port);
    sin->sin_addr.s_addr = ipv4_addr;
}

/* Raise a buffer; past net.core.[rw]mem_max only with CAP_NET_ADMIN (the FORCE options). */
static void softib_wire_udp_bufsize(int fd, int opt, int force_opt, const char *what)
{
    int size = SOFTIB_WIRE_SOCKBUF;

    if ((setsockopt(fd, SOL_SOCKET, force_opt, &size, sizeof(size)) != 0) &&
        (setsockopt(fd, SOL_SOCKET, opt, &size, sizeof(size)) != 0)) {
        axon_debug("softib: cannot set %s to %d: %m", what, size);
    }
}

int softib_wire_udp_open(softib_wire_t *wire)
{
    char               addr[INET_ADDRSTRLEN];
    struct sockaddr_in sin;
    unsigned           port;
    int                fd, ret;

    port = softib_wire_udp_port(wire, wire->slot);
    inet_ntop(AF_INET, &wire->params.ipv4_addr, addr, sizeof(addr));
    if (port == 0) {
        axon_error("softib%u: UDP port base %u + slot %u is past 65535",
                   wire->params.dev_index, wire->params.udp_port_base, wire->slot);
        return EINVAL;
    }

    fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        ret = errno;
        axon_error("softib%u: cannot create a UDP socket: %s", wire->params.dev_index,
                   strerror(ret));
        return ret;
    }
    softib_wire_udp_bufsize(fd, SO_RCVBUF, SO_RCVBUFFORCE, "SO_RCVBUF");
    softib_wire_udp_bufsize(fd, SO_SNDBUF, SO_SNDBUFFORCE, "SO_SNDBUF");

    softib_wire_udp_sockaddr(wire->params.ipv4_addr, port, &sin);
    if (bind(fd, (struct sockaddr*)&sin, sizeof(sin)) != 0) {
        ret = errno;
        if (ret == EADDRINUSE) {
            axon_error("softib%u: UDP port %s:%u (slot %u) is taken by another program; "
                       "choose another base with AXON_SOFTIB_UDP_PORT", wire->params.dev_index,
                       addr, port, wire->slot);
        } else {
            axon_error("softib%u: cannot bind UDP socket to %s:%u: %s",
                       wire->params.dev_index, addr, port, strerror(ret));
        }
        close(fd);
        return ret;
    }
    wire->udp_fd = fd;
    axon_debug("softib%u: slot %u listens on UDP %s:%u", wire->params.dev_index, wire->slot,
               addr, port);
    return 0;
}

void softib_wire_udp_close(softib_wire_t *wire)
{
    if (wire->udp_fd >= 0) {
        close(wire->udp_fd);
        wire->udp_fd = -1;
    }
}

/* A payload that could not be read: what pinned pages no longer mapped would send */
static const uint8_t softib_wire_udp_zeros[SOFTIB_WIRE_MAX_PKT];

int softib_wire_udp_send(softib_wire_t *wire, uint32_t ipv4_addr, unsigned slot,
                         const softib_wire_pkt_t *pkt)
{
    softib_wire_udp_hdr_t hdr;
    struct sockaddr_in    sin;
    struct iovec          iov[3];
    struct msghdr         msg;
    unsigned              port = softib_wire_udp_port(wire, slot);
    ssize_t               n;

    if ((port == 0) || (wire->udp_fd < 0)) {
        return 0;  /* no such port, or no socket (shm mode): lost */
    }
    hdr.magic     = htonl(SOFTIB_WIRE_UDP_MAGIC);
    hdr.dev_index = htons((uint16_t)wire->params.dev_index);
    hdr.dest_slot = htons((uint16_t)slot);
    softib_wire_udp_sockaddr(ipv4_addr, port, &sin);

    iov[0].iov_base = &hdr;
    iov[0].iov_len  = sizeof(hdr);
    iov[1].iov_base = (void *)(uintptr_t)pkt->hdr;
    iov[1].iov_len  = pkt->hlen;
    iov[2].iov_base = (void *)(uintptr_t)pkt->pay;
    iov[2].iov_len  = pkt->paylen;
    memset(&msg, 0, sizeof(msg));
    msg.msg_name    = &sin;
    msg.msg_namelen = sizeof(sin);
    msg.msg_iov     = iov;
    msg.msg_iovlen  = (pkt->paylen != 0) ? 3 : 2;

    do {
        n = sendmsg(wire->udp_fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
        if ((n < 0) && (errno == EFAULT) && (iov[2].iov_base != softib_wire_udp_zeros)) {
            /* registered memory unmapped meanwhile (softib_guard.h): it goes as zeros */
            iov[2].iov_base = (void *)softib_wire_udp_zeros;
            errno           = EINTR;
        }
    } while ((n < 0) && (errno == EINTR));
    if ((n < 0) && (errno != EAGAIN) && (errno != ENOBUFS) && (errno != ECONNREFUSED)) {
        axon_debug("softib%u: UDP send to port %u failed: %m", wire->params.dev_index, port);
    }
    return 0;  /* sent, or lost */
}

ssize_t softib_wire_udp_recv(softib_wire_t *wire, void *buf, axon_dev_gid_t *src_gid)
{
    softib_wire_udp_hdr_t hdr;
    struct sockaddr_in    sin;
    struct iovec          iov[2];
    struct msghdr         msg;
    ssize_t               n;

    if (wire->udp_fd < 0) {
        return 0;
    }
    for (;;) {
        iov[0].iov_base = &hdr;
        iov[0].iov_len  = sizeof(hdr);
        iov[1].iov_base = buf;
        iov[1].iov_len  = SOFTIB_WIRE_MAX_PKT;
        memset(&msg, 0, sizeof(msg));
        msg.msg_name    = &sin;
        msg.msg_namelen = sizeof(sin);
        msg.msg_iov     = iov;
        msg.msg_iovlen  = 2;

        n = recvmsg(wire->udp_fd, &msg, MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            if ((errno == EAGAIN) || (errno == EWOULDBLOCK) || (errno == ECONNREFUSED)) {
                return 0;
            }
            return -errno;
        }
        if ((msg.msg_flags & MSG_TRUNC) || ((size_t)n < sizeof(hdr)) ||
            (hdr.magic != htonl(SOFTIB_WIRE_UDP_MAGIC)) ||
            (ntohs(hdr.dev_index) != wire->params.dev_index) ||
            (ntohs(hdr.dest_slot) != wire->slot) || (sin.sin_family != AF_INET)) {
            axon_debug("softib%u: dropping a stray %zd-byte datagram from port %u",
                       wire->params.dev_index, n, ntohs(sin.sin_port));
            continue;
        }
        softib_wire_gid_from_ipv4(sin.sin_addr.s_addr, src_gid);
        return n - (ssize_t)sizeof(hdr);
    }
}
