/*
 * tcp wire format: a fixed-size handshake, then a stream of frames each way.
 *
 * The side that connects sends HELLO, the side that accepts answers it;
 * then both sides may send frames. Everything is in host byte order: the
 * magic number tells a peer of the other order, which is refused.
 *
 * One connection per pair of workers, used both ways: an ep created to a
 * worker that already has an open connection to us (one we accepted, whose
 * sending side nobody of ours uses) sends on it instead of connecting. Each
 * side's sending half has one owner at a time, so frames of one ep never
 * interleave with another's.
 *
 * Simultaneous connects: when a HELLO arrives from a worker we are
 * connecting to ourselves,
 *   - an ep of ours whose HELLO has not left yet moves onto the accepted
 *     connection and its own connection is closed with nothing sent;
 *   - if both HELLOs are out, the lower worker id keeps its own connection:
 *     its answer carries AXON_TCP_HS_FLAG_USE_MINE, and the higher side
 *     moves its ep (which has sent nothing but HELLO: data waits for the
 *     answer) onto the accepted connection from the lower side, and says
 *     goodbye on its own. If that connection has not arrived (or another ep
 *     took it), both connections stay, each used one way.
 * So a move never reorders anything: an ep moves before its first frame.
 *
 * Closing is per direction: a GOODBYE frame says "nothing more from me on
 * this connection" (the sending ep was destroyed, or the whole worker
 * leaves). A side closes the socket once it has both sent and received a
 * goodbye; one that receives a goodbye and has no sender on the connection
 * answers with its own and closes. A worker that leaves says goodbye on
 * every connection and closes them: a peer's ep on such a connection sees
 * goodbye then end of stream, and fails its later sends with
 * AXON_ERR_CONNECTION_RESET without reporting the peer failed. An end of
 * stream or a reset without a goodbye means the peer died.
 *
 * Every frame is an 8-byte header and a body padded to a multiple of 8, so
 * a receiver reading the stream into an aligned buffer finds every header
 * and body 8-byte aligned, as AM handlers require.
 */
#ifndef AXON_TCP_WIRE_H
#define AXON_TCP_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define AXON_TCP_MAGIC         0x41585443u  /* "AXTC" */
#define AXON_TCP_MAGIC_SWAPPED 0x43545841u  /* the same from a host of the other byte order */
#define AXON_TCP_VERSION       2  /* 2: both ways on one connection */

/* Frames and bodies are padded to this. */
#define AXON_TCP_ALIGN         8

/* Handshake operations */
enum {
    AXON_TCP_HS_HELLO  = 1,  /* connector -> acceptor: who I am, whom I expect */
    AXON_TCP_HS_ACCEPT = 2,  /* acceptor -> connector: data may flow, both ways */
    AXON_TCP_HS_REJECT = 3,  /* acceptor -> connector: reason follows, then close */
};

/* Why an acceptor refused a connection (axon_tcp_hs_t.reason) */
enum {
    AXON_TCP_REJECT_NONE = 0,
    AXON_TCP_REJECT_MAGIC,       /* not an Axon peer, or the other byte order */
    AXON_TCP_REJECT_VERSION,     /* another protocol version */
    AXON_TCP_REJECT_WRONG_PEER,  /* this worker is not the one the connector expected */
    AXON_TCP_REJECT_FRAME_SIZE,  /* the connector's segments are larger than we accept */
    AXON_TCP_REJECT_LAST
};

/*
 * The handshake, the first bytes each way. A stale address (a port reused
 * by another worker after the one the connector knew exited) is caught by
 * dst_uuid instead of delivering messages to a stranger.
 */
typedef struct axon_tcp_hs {
    uint32_t magic;      /* AXON_TCP_MAGIC */
    uint16_t version;    /* AXON_TCP_VERSION */
    uint8_t  op;         /* AXON_TCP_HS_* */
    uint8_t  reason;     /* AXON_TCP_REJECT_*, with REJECT */
    uint64_t src_uuid;   /* worker that sends this */
    uint64_t dst_uuid;   /* worker it expects at the other end */
    uint32_t max_body;   /* largest plain frame body the sender of this sends */
    uint32_t flags;      /* AXON_TCP_HS_FLAG_*, with ACCEPT */
} axon_tcp_hs_t;

/* Handshake flags */
#define AXON_TCP_HS_FLAG_USE_MINE 0x1  /* both connected at once: use my connection to you */

/* Frame flags */
#define AXON_TCP_FRAME_ZCOPY 0x1  /* body = hdr_len header bytes + data to place */
#define AXON_TCP_FRAME_CTRL  0x2  /* transport control: am_id is an AXON_TCP_CTRL_* */
#define AXON_TCP_FRAME_FLAGS (AXON_TCP_FRAME_ZCOPY | AXON_TCP_FRAME_CTRL)

/* Control frames (flag CTRL, empty body) */
enum {
    /* The sender sends nothing more on this connection: an EOF after it is no failure. */
    AXON_TCP_CTRL_GOODBYE = 1,
};

/*
 * Frame header. hdr_len is used only by zero-copy frames; plain frames carry
 * 0 there (a body of max_bcopy = 64 KiB would not fit 16 bits anyway).
 */
typedef struct axon_tcp_frame {
    uint32_t length;     /* body bytes, without this header and the padding */
    uint8_t  am_id;
    uint8_t  flags;      /* AXON_TCP_FRAME_* */
    uint16_t hdr_len;    /* ZCOPY: the header part of the body */
} axon_tcp_frame_t;

_Static_assert(sizeof(axon_tcp_frame_t) == AXON_TCP_ALIGN, "frame header must keep alignment");
_Static_assert(sizeof(axon_tcp_hs_t) % AXON_TCP_ALIGN == 0, "handshake must keep alignment");

/* Padding after a body of length bytes. */
static inline size_t axon_tcp_pad(size_t length)
{
    return (AXON_TCP_ALIGN - (length % AXON_TCP_ALIGN)) % AXON_TCP_ALIGN;
}

/* Bytes a frame with a body of length bytes occupies on the wire. */
static inline size_t axon_tcp_frame_wire_len(size_t length)
{
    return sizeof(axon_tcp_frame_t) + length + axon_tcp_pad(length);
}

static inline axon_tcp_frame_t axon_tcp_frame_make(uint32_t length, uint8_t am_id, uint8_t flags,
                                                   uint16_t hdr_len)
{
    axon_tcp_frame_t frame;

    frame.length  = length;
    frame.am_id   = am_id;
    frame.flags   = flags;
    frame.hdr_len = hdr_len;
    return frame;
}

/* A handshake as this side sends it. */
static inline axon_tcp_hs_t axon_tcp_hs_make(uint8_t op, uint8_t reason, uint64_t src_uuid,
                                             uint64_t dst_uuid, uint32_t max_body,
                                             uint32_t flags)
{
    axon_tcp_hs_t hs = {AXON_TCP_MAGIC, AXON_TCP_VERSION, op, reason, src_uuid, dst_uuid,
                        max_body, flags};

    return hs;
}

/*
 * A peer's HELLO to worker_uuid (tcp_wire.c): AXON_TCP_REJECT_NONE or why it
 * is refused. Its frame headers: axon_tcp_frame_invalid (tcp.h).
 */
uint8_t axon_tcp_hello_check(const axon_tcp_hs_t *hs, uint64_t worker_uuid);

/* Zeros to send as padding (shared, never written). */
extern const uint8_t axon_tcp_zero_pad[AXON_TCP_ALIGN];
/* Why a connection was refused, by AXON_TCP_REJECT_*, for log lines. */
extern const char *const axon_tcp_reject_names[AXON_TCP_REJECT_LAST];

#endif
