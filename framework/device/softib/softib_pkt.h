/*
 * softib's packet format, modelled on the InfiniBand transport headers: a
 * BTH on every packet, then the extension headers the opcode table says the
 * opcode carries (RETH, AtomicETH, AETH, AtomicAckETH, DETH, ImmDt), then the
 * payload. Multi-byte fields travel in network byte order, so hosts of any
 * endianness talk over UDP.
 */
#ifndef SOFTIB_PKT_H
#define SOFTIB_PKT_H

#include <stddef.h>
#include <stdint.h>
#include "softib.h"

/* Opcodes: one set for every QP type; the table says which type may use which */
typedef enum {
    SOFTIB_OP_SEND_FIRST = 0,
    SOFTIB_OP_SEND_MIDDLE,
    SOFTIB_OP_SEND_LAST,
    SOFTIB_OP_SEND_LAST_IMM,
    SOFTIB_OP_SEND_ONLY,
    SOFTIB_OP_SEND_ONLY_IMM,
    SOFTIB_OP_WRITE_FIRST,
    SOFTIB_OP_WRITE_MIDDLE,
    SOFTIB_OP_WRITE_LAST,
    SOFTIB_OP_WRITE_LAST_IMM,
    SOFTIB_OP_WRITE_ONLY,
    SOFTIB_OP_WRITE_ONLY_IMM,
    SOFTIB_OP_READ_REQ,
    SOFTIB_OP_READ_RESP_FIRST,
    SOFTIB_OP_READ_RESP_MIDDLE,
    SOFTIB_OP_READ_RESP_LAST,
    SOFTIB_OP_READ_RESP_ONLY,
    SOFTIB_OP_ACK,
    SOFTIB_OP_ATOMIC_ACK,
    SOFTIB_OP_CMP_SWAP,
    SOFTIB_OP_FETCH_ADD,
    SOFTIB_OP_UD_SEND_ONLY,
    SOFTIB_OP_UD_SEND_ONLY_IMM,
    SOFTIB_OP_MASKED_CMP_SWAP,      /* extended atomics: operands in the payload */
    SOFTIB_OP_MASKED_FETCH_ADD,
    SOFTIB_OP_MASKED_ATOMIC_ACK,    /* the value found, in the payload */
    SOFTIB_OP_DC_DISCONNECT,        /* DCI -> DCT: the connection of dceth.conn_psn ends */
    SOFTIB_OP_DC_DISCONNECT_ACK,    /* DCT -> DCI: it ended (PSN = its conn_psn) */
    SOFTIB_OP_LAST
} softib_opcode_t;

/* Extension headers an opcode carries */
#define SOFTIB_HDR_RETH      (1u << 0)
#define SOFTIB_HDR_AETH      (1u << 1)
#define SOFTIB_HDR_ATOMIC    (1u << 2)
#define SOFTIB_HDR_ATOMICACK (1u << 3)
#define SOFTIB_HDR_DETH      (1u << 4)
#define SOFTIB_HDR_IMM       (1u << 5)
#define SOFTIB_HDR_EXTATOMIC (1u << 6)

/* What an opcode is */
#define SOFTIB_OPF_REQUEST   (1u << 0)   /* requester -> responder */
#define SOFTIB_OPF_FIRST     (1u << 1)
#define SOFTIB_OPF_LAST      (1u << 2)
#define SOFTIB_OPF_PAYLOAD   (1u << 3)
#define SOFTIB_OPF_SEND      (1u << 4)
#define SOFTIB_OPF_WRITE     (1u << 5)
#define SOFTIB_OPF_READ      (1u << 6)
#define SOFTIB_OPF_ATOMIC    (1u << 7)
#define SOFTIB_OPF_RECV      (1u << 8)   /* consumes a receive WQE */
#define SOFTIB_OPF_COMP      (1u << 9)   /* completes a receive WQE */

/* QP types allowed, a bit per axon_dev_qp_type_t (DC initiators receive no requests) */
#define SOFTIB_QPT_BIT(_t)   (((unsigned)(_t) < 32) ? (1u << (_t)) : 0)
#define SOFTIB_QPT_RC        SOFTIB_QPT_BIT(AXON_DEV_QPT_RC)
#define SOFTIB_QPT_UC        SOFTIB_QPT_BIT(AXON_DEV_QPT_UC)
#define SOFTIB_QPT_UD        SOFTIB_QPT_BIT(AXON_DEV_QPT_UD)

typedef struct softib_opcode_info {
    const char *name;
    unsigned    hdrs;       /* SOFTIB_HDR_* */
    unsigned    flags;      /* SOFTIB_OPF_* */
    unsigned    qp_types;   /* SOFTIB_QPT_* */
} softib_opcode_info_t;

extern const softib_opcode_info_t softib_opcode_table[SOFTIB_OP_LAST];

/* BTH flags */
#define SOFTIB_BTH_SE        (1u << 0)   /* solicited event */
#define SOFTIB_BTH_ACKREQ    (1u << 1)
#define SOFTIB_BTH_DC        (1u << 2)   /* from a DCI: a DCETH follows the BTH */
#define SOFTIB_BTH_MCAST     (1u << 3)   /* a UD send to a group: its MGID follows the BTH */

typedef struct softib_bth {
    uint8_t  opcode;
    uint8_t  flags;
    uint16_t reserved;
    uint32_t dest_qpn;
    uint32_t src_qpn;
    uint32_t psn;
} __attribute__((packed)) softib_bth_t;

/*
 * What a DCI adds to each request: the target's key, and the connection the
 * packet belongs to (the PSN of its first packet: the target keeps one
 * responder context per initiator, reset by a newer connection) with the
 * initiator's path MTU, which the target's read responses follow.
 */
typedef struct softib_dceth {
    uint64_t key;
    uint32_t conn_psn;
    uint8_t  mtu;
    uint8_t  reserved[3];
} __attribute__((packed)) softib_dceth_t;

typedef struct softib_reth {
    uint64_t va;
    uint32_t rkey;
    uint32_t len;
} __attribute__((packed)) softib_reth_t;

/* AETH syndromes: an ACK, or why not */
typedef enum {
    SOFTIB_AETH_ACK = 0,
    SOFTIB_AETH_RNR_NAK,
    SOFTIB_AETH_NAK_SEQ,        /* PSN sequence error: resend from the PSN */
    SOFTIB_AETH_NAK_INV_REQ,    /* -> REM_INV_REQ_ERR */
    SOFTIB_AETH_NAK_ACCESS,     /* -> REM_ACCESS_ERR */
    SOFTIB_AETH_NAK_OP,         /* -> REM_OP_ERR */
} softib_aeth_code_t;

typedef struct softib_aeth {
    uint8_t  code;              /* softib_aeth_code_t */
    uint8_t  rnr_timer;         /* RNR NAK: the responder's min_rnr_timer */
    uint16_t reserved;
    uint32_t msn;
} __attribute__((packed)) softib_aeth_t;

typedef struct softib_atomic_eth {
    uint64_t va;
    uint64_t swap_add;
    uint64_t compare;
    uint32_t rkey;
    uint32_t reserved;
} __attribute__((packed)) softib_atomic_eth_t;

/*
 * A masked atomic's header; the payload holds its operands, each
 * softib_amo_words(2^log_sz) big-endian 64-bit words (a 4-byte operand in
 * the low half of one): compare-and-swap sends swap, compare, compare mask,
 * swap mask; fetch-and-add sends add, field boundaries. Its answer,
 * MASKED_ATOMIC_ACK, carries the value found the same way.
 */
typedef struct softib_ext_atomic_eth {
    uint64_t va;
    uint32_t rkey;
    uint8_t  log_sz;
    uint8_t  reserved[3];
} __attribute__((packed)) softib_ext_atomic_eth_t;

/* Operand fields a masked atomic request carries */
#define SOFTIB_EXT_CMP_SWAP_FIELDS  4
#define SOFTIB_EXT_FETCH_ADD_FIELDS 2

typedef struct softib_atomic_ack_eth {
    uint64_t orig;
} __attribute__((packed)) softib_atomic_ack_eth_t;

typedef struct softib_deth {
    uint32_t qkey;
    uint32_t src_qpn;
} __attribute__((packed)) softib_deth_t;

typedef struct softib_immdt {
    uint32_t imm;               /* kept as the consumer gave it (network order) */
} __attribute__((packed)) softib_immdt_t;

/* A parsed packet: host-order copies of the headers, and where the payload is */
typedef struct softib_pkt {
    softib_opcode_t             opcode;
    const softib_opcode_info_t *info;
    uint8_t                     flags;
    uint32_t                    dest_qpn;
    uint32_t                    src_qpn;
    uint32_t                    psn;
    softib_dceth_t              dceth;
    axon_dev_gid_t              mgid;          /* SOFTIB_BTH_MCAST */
    softib_reth_t               reth;
    softib_aeth_t               aeth;
    softib_atomic_eth_t         atomic;
    softib_ext_atomic_eth_t     ext_atomic;
    uint64_t                    atomic_orig;
    softib_deth_t               deth;
    uint32_t                    imm;
    const uint8_t              *payload;
    uint32_t                    paylen;
} softib_pkt_t;

/* Headers of pkt written at buf; returns where the payload goes (header length). */
size_t softib_pkt_build(void *buf, const softib_pkt_t *pkt);
/* Re-address a built packet (a multicast copy per member). */
void   softib_pkt_set_dest_qpn(void *buf, uint32_t dest_qpn);
/* Parse len bytes; 0 or EINVAL for a malformed packet. */
int    softib_pkt_parse(const void *buf, size_t len, softib_pkt_t *pkt);
/* n 64-bit words to / from big-endian bytes (masked atomic operands and results) */
void   softib_pkt_put_words(uint8_t *buf, const uint64_t *words, unsigned n);
void   softib_pkt_get_words(const uint8_t *buf, uint64_t *words, unsigned n);

/* The stages that take parsed packets: requests to the responder, answers to the completer */
void   softib_resp_rx(softib_dev_t *dev, softib_qp_t *qp, const softib_pkt_t *pkt,
                      const axon_dev_gid_t *src_gid);
void   softib_comp_rx(softib_dev_t *dev, softib_qp_t *qp, const softib_pkt_t *pkt);
/* DC (softib_dc.c): a DCI's packet gets its DCETH; a DCT takes requests; a DCI its DISCONNECT_ACK */
void   softib_dc_pkt(const softib_qp_t *qp, softib_pkt_t *pkt);
void   softib_dc_rx(softib_dev_t *dev, struct softib_dct *dct, const softib_pkt_t *pkt,
                    const axon_dev_gid_t *src_gid);
void   softib_dc_disc_acked(softib_qp_t *qp, const softib_pkt_t *pkt);

#endif
