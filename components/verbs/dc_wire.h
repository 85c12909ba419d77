/*
 * dc wire formats: the header of every message a DCI sends to a DCT, the
 * flow-control request's payload and the iface address. Little-endian host
 * order, as rc's (rc_wire.h); packed rkeys are rc's (dc shares rc's memory
 * domain).
 *
 * Flow control (dc_fc.c): a receive completion does not name the sending
 * endpoint, so the sender asks for credits: once it sent half its window
 * since its last request, it sends FC_REQ (after those AMs, on the same DCI,
 * so the receiver has consumed them when it reads the request) naming its
 * DCT, key, port and endpoint id and the number of AMs the request covers;
 * the receiver answers FC_GRANT with that number to the sender's DCT.
 *
 * Goodbye (dc_bye.c): an endpoint's first WR is a HELLO naming the sender's
 * DCT, so the receiver knows who may be waiting on it (both sides keep the
 * other's DCT); an iface that closes sends BYE, naming its DCT, to each of
 * them, and a receiver of BYE fails its endpoints to that DCT quietly: a
 * close, not a failure.
 * Control messages (FC_REQ, FC_GRANT, KEEPALIVE, HELLO, BYE) need no credit.
 */
#ifndef AXON_DC_WIRE_H
#define AXON_DC_WIRE_H

#include <stdint.h>
#include "verbs_common.h"

typedef enum {
    AXON_DC_MSG_AM        = 0,  /* an active message: am_id, payload follows */
    AXON_DC_MSG_FC_REQ    = 1,  /* credits: covers `credits` AMs; axon_dc_sender_t follows */
    AXON_DC_MSG_FC_GRANT  = 2,  /* `credits` AMs of endpoint ep_id were consumed */
    AXON_DC_MSG_KEEPALIVE = 3,  /* an idle endpoint's probe: dropped by the receiver */
    AXON_DC_MSG_HELLO     = 4,  /* an endpoint's first WR: axon_dc_sender_t follows */
    AXON_DC_MSG_BYE       = 5,  /* the sender's iface closes: axon_dc_sender_t follows */
    AXON_DC_MSG_LAST
} axon_dc_msg_type_t;

/* 8 bytes before every payload (keeps it 8-byte aligned in the receive buffer) */
typedef struct axon_dc_hdr {
    uint8_t  am_id;
    uint8_t  type;      /* axon_dc_msg_type_t */
    uint16_t credits;   /* FC_REQ, FC_GRANT; 0 otherwise */
    uint32_t ep_id;     /* FC_REQ: the sender's endpoint; FC_GRANT: the one granted */
} axon_dc_hdr_t;

/* The sender's DCT, after FC_REQ (where the grant goes), HELLO and BYE (who it is) */
typedef struct __attribute__((packed)) axon_dc_sender {
    axon_verbs_dev_addr_t dev_addr;
    uint32_t              dct_num;
    uint64_t              dc_key;
} axon_dc_sender_t;

/* Iface address: the DCT and its key (the device address is verbs_common's) */
typedef struct __attribute__((packed)) axon_dc_iface_addr {
    uint32_t dct_num;
    uint64_t dc_key;
} axon_dc_iface_addr_t;

#endif
