/*
 * rc wire formats: the header of every message on an RC QP, the connection
 * handshake carried by each iface's UD QP, the iface address and the packed
 * rkey. Fields are little-endian host order (both ends run Axon on x86/arm
 * little-endian hosts); every message carries a version so a mismatch is
 * rejected instead of misread.
 *
 * Handshake (rc_conn.c), active side A, passive side B:
 *   A: REQ (uuid, QPN, PSN, port, conn id) over UD, again every retry interval
 *   B: creates or reuses its QP for A, moves it to RTS, answers REP (same
 *      fields); a repeated REQ gets the same REP again
 *   A: moves to RTS, sends RTU as the first message on the RC QP itself,
 *      so it is reliable; B sends nothing before RTU (A's QP may not be
 *      ready to receive)
 *   Simultaneous REQs: the REQ of the worker with the lower uuid wins; the
 *   other side answers it with the QP it had created for its own REQ.
 *   REJ: the REQ named a worker that is not this one (stale address).
 * Goodbye: each side sends BYE on the RC QP after its last endpoint went
 * away; the QP is destroyed once both BYEs are through. An error after the
 * peer's BYE is not a failure. A closing iface says LEAVE instead: it waits
 * for no BYE back, and its peer owes none (its QP may be gone already).
 */
#ifndef AXON_RC_WIRE_H
#define AXON_RC_WIRE_H

#include <stdint.h>
#include <string.h>
#include "verbs_common.h"

#define AXON_RC_WIRE_VERSION 1

/* Message types on the RC QP */
typedef enum {
    AXON_RC_MSG_AM     = 0,  /* an active message: am_id, payload follows */
    AXON_RC_MSG_CREDIT = 1,  /* credits only; consumes none */
    AXON_RC_MSG_RTU    = 2,  /* first message of the connecting side: the QP is up */
    AXON_RC_MSG_BYE    = 3,  /* the sender has no endpoint left on this connection */
    AXON_RC_MSG_LEAVE  = 4,  /* a BYE from a closing iface: it reads nothing more */
    AXON_RC_MSG_LAST
} axon_rc_msg_type_t;

/*
 * 8 bytes before every payload: keeps the payload 8-byte aligned in the
 * receive buffer, and returns credits on every message.
 */
typedef struct axon_rc_hdr {
    uint8_t  am_id;
    uint8_t  type;      /* axon_rc_msg_type_t */
    uint16_t credits;   /* receive credits returned to the peer */
    uint32_t reserved;
} axon_rc_hdr_t;

/* Handshake messages on the UD QP */
typedef enum {
    AXON_RC_HS_REQ = 1,
    AXON_RC_HS_REP = 2,
    AXON_RC_HS_REJ = 3,
} axon_rc_hs_type_t;

typedef struct __attribute__((packed)) axon_rc_hs {
    uint8_t               version;      /* AXON_RC_WIRE_VERSION */
    uint8_t               type;         /* axon_rc_hs_type_t */
    uint16_t              window;       /* credits the sender grants (its receive window) */
    uint32_t              conn_id;      /* sender's connection id (REQ: the active side's) */
    uint32_t              peer_conn_id; /* REP/REJ: the REQ's conn_id */
    uint32_t              qpn;          /* sender's RC QP */
    uint32_t              psn;          /* first PSN the sender sends */
    uint32_t              ud_qpn;       /* sender's handshake QP, for the answer */
    uint64_t              src_uuid;
    uint64_t              dst_uuid;     /* the worker the sender means to reach */
    uint64_t              ka_addr;      /* sender's keep-alive target (zero-length writes) */
    uint32_t              ka_rkey;
    axon_verbs_dev_addr_t dev_addr;     /* sender's port */
} axon_rc_hs_t;

/* A handshake buffer: GRH area (receives) or AH pointer (sends), then the message */
#define AXON_RC_HS_MSG_OFFSET 40

/*
 * A handshake datagram received with byte_len bytes into buf (the GRH area
 * first): NULL with the message copied to *msg, or why it is none of ours.
 */
static inline const char *axon_rc_hs_read(const uint8_t *buf, uint32_t byte_len,
                                          axon_rc_hs_t *msg)
{
    if (byte_len < AXON_RC_HS_MSG_OFFSET + sizeof(*msg)) {
        return "shorter than a handshake";
    }
    memcpy(msg, buf + AXON_RC_HS_MSG_OFFSET, sizeof(*msg));
    if (msg->version != AXON_RC_WIRE_VERSION) {
        return "another wire version";
    }
    if ((msg->type < AXON_RC_HS_REQ) || (msg->type > AXON_RC_HS_REJ)) {
        return "unknown message type";
    }
    return NULL;
}

/* Iface address: how to reach the iface's handshake QP */
typedef struct __attribute__((packed)) axon_rc_iface_addr {
    uint32_t ud_qpn;
} axon_rc_iface_addr_t;

/* Packed rkey: the key, and the registered range so bad addresses fail locally */
#define AXON_RC_RKEY_VERSION 0xa1
typedef struct __attribute__((packed)) axon_rc_rkey {
    uint8_t  version;   /* AXON_RC_RKEY_VERSION */
    uint32_t rkey;
    uint64_t addr;
    uint64_t length;
} axon_rc_rkey_t;

/* Q_Key of the handshake QPs */
#define AXON_RC_HS_QKEY 0x1a7c0001u

#endif
