/*
 * One atomic operation as the layers pass it down: from the API to a
 * transport (component.h, ep_atomic), in active messages, and to whoever
 * executes it (amo_cpu.h, a device). Types only: part of the component ABI.
 */
#ifndef AXON_AMO_ARGS_H
#define AXON_AMO_ARGS_H

#include <stdint.h>

#define AXON_AMO_MAX_WORDS  4    /* 32 bytes: the largest operand */

/* Operations: the public ones first, with axon_atomic_op_t's values (api/rma/amo.c checks) */
typedef enum {
    AXON_AMO_ADD          = 0,
    AXON_AMO_AND          = 1,
    AXON_AMO_OR           = 2,
    AXON_AMO_XOR          = 3,
    AXON_AMO_SWAP         = 4,
    AXON_AMO_CSWAP        = 5,
    AXON_AMO_MASKED_CSWAP = 6,  /* extended, §8.7 */
    AXON_AMO_MFADD        = 7,  /* extended, §8.7 */
    AXON_AMO_LAST
} axon_amo_op_t;

/*
 * One atomic's operands, in host-order 64-bit words (a 4-byte operand uses
 * the low 32 bits of word 0). Travels as is in active messages: fixed layout.
 */
typedef struct axon_amo_args {
    uint8_t  op;                              /* axon_amo_op_t */
    uint8_t  size;                            /* 4, 8 (all ops), 16, 32 (extended only) */
    uint8_t  fetch;                           /* 1: the caller wants the previous value */
    uint8_t  reserved[5];
    uint64_t value[AXON_AMO_MAX_WORDS];       /* operand; swap value; mfadd: add */
    uint64_t compare[AXON_AMO_MAX_WORDS];     /* CSWAP and MASKED_CSWAP */
    uint64_t mask[AXON_AMO_MAX_WORDS];        /* MASKED_CSWAP: compare mask; MFADD: boundaries */
    uint64_t swap_mask[AXON_AMO_MAX_WORDS];   /* MASKED_CSWAP */
} axon_amo_args_t;

#endif
