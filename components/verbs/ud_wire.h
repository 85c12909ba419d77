/*
 * ud wire format: every datagram is a 24-byte header and a payload of at
 * most the path MTU minus the header. The receive buffer has the 40-byte GRH
 * area in front (verbs puts it there for UD), so with 64-byte aligned
 * buffers and 64 bytes of descriptor before the GRH the payload starts
 * 8-byte aligned, as AM handlers require.
 *
 * Sequenced packets (DATA, CREQ, PING, BYE) carry a packet sequence number
 * per direction of a connection; the receiver delivers them exactly once and
 * in order and acknowledges cumulatively (ack = the next PSN it expects) plus
 * a 32-bit selective-ack bitmap of what it holds beyond a gap. Every packet,
 * sequenced or not (ACK), carries the sender's current ack, so replies carry
 * acknowledgements for free.
 *
 * A connection is identified on each side by a 32-bit id (table index and a
 * generation); packets name the receiver's id (dst_id) and the sender's
 * (src_id). The first packet of a connector is CREQ (PSN 0) with dst_id NONE:
 * the acceptor finds or makes its state for the connector from the payload
 * (uuid, QPN, device address) and answers with an ACK that tells its id.
 * Both sides connecting at once each adopt the other's CREQ (one state per
 * pair of workers either way).
 *
 * Liveness: acks come from the peer's progress, so a peer that computes for
 * long without progressing sends none. A sender still waiting for an ack
 * PROBEs the peer's second QP ("alive QP", served by a thread of the peer's
 * iface, ud_alive.c), which answers ALIVE; a connection fails only when
 * neither acks nor answers came for AXON_UD_TIMEOUT. A side that failed a
 * connection whose peer lives on (it was starved past the timeout) answers
 * that peer's sequenced packets with RESET, or the peer, its probes
 * answered, would wait for acks forever.
 *
 * A worker that closes says LEAVE to its peers once its goodbyes went (or
 * waited their time): a goodbye of theirs after it would wait for an ack in
 * vain, so a peer that hears LEAVE lets the connection go as after a
 * goodbye, without sending its own (MPI_Finalize closes every rank at once).
 * LEAVE is not acknowledged: one lost costs the peer its wait, no more.
 *
 * Everything is in host byte order (like the tcp transport's frames): peers
 * of one job share an architecture.
 */
#ifndef AXON_UD_WIRE_H
#define AXON_UD_WIRE_H

#include <stdint.h>
#include "verbs_common.h"

/* Q_Key of every Axon UD QP: packets of other UD users are dropped by the device. */
#define AXON_UD_QKEY        0x1ee7a550u
/* dst_id of a packet to a connection whose id the sender does not know yet */
#define AXON_UD_ID_NONE     0xffffffffu
/* Bytes before the header in a receive buffer (verbs' GRH area for UD) */
#define AXON_UD_GRH_LEN     40
/* Bits of the selective ack */
#define AXON_UD_SACK_BITS   32

/* Packet types: sequenced ones first. */
enum {
    AXON_UD_PKT_DATA = 0,  /* an AM or one fragment of it */
    AXON_UD_PKT_CREQ,      /* connect request, PSN 0 of the connector's stream */
    AXON_UD_PKT_PING,      /* keepalive: must be acknowledged, delivers nothing */
    AXON_UD_PKT_BYE,       /* the sender has no endpoint to us any more */
    AXON_UD_PKT_ACK,       /* not sequenced: acknowledgement only */
    AXON_UD_PKT_RESET,     /* not sequenced: the sender failed the connection named: fail yours */
    AXON_UD_PKT_PROBE,     /* not sequenced, to the peer's alive QP: are you there? */
    AXON_UD_PKT_ALIVE,     /* not sequenced, from the alive QP: the worker's process lives */
    AXON_UD_PKT_LEAVE,     /* not sequenced: the sender's worker closed, it answers no more */
    AXON_UD_PKT_LAST
};

/* Fragment flags of DATA */
#define AXON_UD_FLAG_FIRST 0x1
#define AXON_UD_FLAG_LAST  0x2

typedef struct axon_ud_hdr {
    uint32_t dst_id;   /* receiver's connection id, or AXON_UD_ID_NONE (CREQ) */
    uint32_t src_id;   /* sender's connection id */
    uint32_t psn;      /* sequenced packets: this packet's number */
    uint32_t ack;      /* every PSN before this arrived at the sender of this packet */
    uint32_t sack;     /* bit i: PSN ack + 1 + i arrived too */
    uint8_t  type;     /* AXON_UD_PKT_* */
    uint8_t  flags;    /* AXON_UD_FLAG_* */
    uint8_t  am_id;
    uint8_t  reserved;
} axon_ud_hdr_t;

_Static_assert(sizeof(axon_ud_hdr_t) == 24, "ud header must keep payloads 8-byte aligned");

/* Payload of CREQ: who connects, whom it means, and how to answer it. */
typedef struct __attribute__((packed)) axon_ud_creq {
    uint64_t src_uuid;
    uint64_t dst_uuid;
    uint32_t src_qpn;
    uint8_t  dev_addr[AXON_VERBS_DEV_ADDR_LEN];
    uint32_t src_alive_qpn;  /* 0: the connector answers no probes */
} axon_ud_creq_t;

/*
 * Payload of PROBE (header: the prober's ids; dst_id may be NONE while
 * connecting). Only the worker it names answers: a dead worker's QP number
 * taken over by another process must not keep the dead one "alive".
 */
typedef struct __attribute__((packed)) axon_ud_probe {
    uint64_t dst_uuid;
    uint32_t src_qpn;        /* the prober's main QP: where ALIVE goes */
    uint8_t  dev_addr[AXON_VERBS_DEV_ADDR_LEN];
} axon_ud_probe_t;

/* Payload of ALIVE (header: the probe's ids, swapped): who answers. */
typedef struct __attribute__((packed)) axon_ud_alive_msg {
    uint64_t src_uuid;
} axon_ud_alive_msg_t;

/* Iface address: the QP numbers. */
typedef struct __attribute__((packed)) axon_ud_iface_addr {
    uint32_t qpn;
    uint32_t alive_qpn;      /* 0: this worker answers no probes (AXON_UD_ALIVE=n) */
} axon_ud_iface_addr_t;

/*
 * A datagram received with byte_len bytes (the GRH area included) and hdr
 * after the GRH: its payload length, or -1 when it is no ud packet (shorter
 * than its header, a type we do not know, or shorter than what its type
 * carries). hdr is read only once byte_len says it arrived.
 */
static inline int64_t axon_ud_pkt_payload(uint32_t byte_len, const axon_ud_hdr_t *hdr)
{
    static const uint8_t min_payload[AXON_UD_PKT_LAST] = {
        [AXON_UD_PKT_CREQ]  = sizeof(axon_ud_creq_t),
        [AXON_UD_PKT_PROBE] = sizeof(axon_ud_probe_t),
        [AXON_UD_PKT_ALIVE] = sizeof(axon_ud_alive_msg_t),
    };
    uint32_t paylen;

    if ((byte_len < AXON_UD_GRH_LEN + sizeof(*hdr)) || (hdr->type >= AXON_UD_PKT_LAST)) {
        return -1;
    }
    paylen = byte_len - AXON_UD_GRH_LEN - (uint32_t)sizeof(*hdr);
    return (paylen < min_payload[hdr->type]) ? -1 : (int64_t)paylen;
}

/* Signed distance a - b between PSNs (32-bit, wrapping) */
static inline int32_t axon_ud_psn_diff(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b);
}

#endif
