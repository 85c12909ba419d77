/*
 * tcp receive path: a connection's bytes read, framed, and each message
 * delivered to its AM handler or placed straight into a receive buffer.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include "tcp.h"
#include "tcp_sock.h"

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
unsigned axon_tcp_conn_rx(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn)
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
