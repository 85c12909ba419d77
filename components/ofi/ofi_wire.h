/*
 * What ofi puts on the wire: the tag of every tagged message, and the packed
 * memory key. The body of a message is the AM's bytes alone.
 *
 * Tag: bits 0..7 the AM id, bits 8..15 the kind. Receives match every tag
 * (ignore mask all ones), so the tag only tells the receiver what it got.
 */
#ifndef AXON_OFI_WIRE_H
#define AXON_OFI_WIRE_H

#include <stdint.h>

#define AXON_OFI_TAG_AM_MASK     0xffull
#define AXON_OFI_TAG_KIND_SHIFT  8
#define AXON_OFI_TAG_KIND_MASK   0xffull

/* Message kinds */
enum {
    AXON_OFI_KIND_AM   = 0,  /* an active message for the handler of its id */
    AXON_OFI_KIND_PING = 1,  /* body: axon_ofi_ping_t; answered by a PONG */
    AXON_OFI_KIND_BYE  = 2,  /* body: the sender's worker uuid; it sends no more */
    AXON_OFI_KIND_PONG = 3,  /* body: the answering worker's uuid */
};

/*
 * A ping carries the pinger's address, since the pinged worker may have no
 * endpoint to it (CONNECT_TO_IFACE: it learns of us from our messages).
 * Only the first AXON_OFI_PING_LEN(len) bytes go on the wire.
 */
typedef struct axon_ofi_ping {
    uint64_t uuid;
    uint8_t  len;
    uint8_t  name[56];      /* AXON_OFI_NAME_MAX */
} __attribute__((packed)) axon_ofi_ping_t;

#define AXON_OFI_PING_LEN(_len) (sizeof(uint64_t) + 1 + (size_t)(_len))

static inline uint64_t axon_ofi_tag(unsigned kind, unsigned am_id)
{
    return ((uint64_t)kind << AXON_OFI_TAG_KIND_SHIFT) | am_id;
}

/*
 * Packed memory key (32 bytes, what AXON_RNDV_RKEY_MAX allows): the
 * provider's key, what the peer subtracts from a virtual address to get the
 * offset the provider wants (the region's start, or 0 under
 * FI_MR_VIRT_ADDR), and the region, so an access outside it fails at the
 * initiator without a message.
 */
typedef struct axon_ofi_rkey {
    uint64_t key;
    uint64_t base;
    uint64_t start;
    uint64_t length;
} __attribute__((packed)) axon_ofi_rkey_t;

#endif
