/*
 * softib's atomics as the responder executes them: the standard 8-byte
 * CMP_AND_SWP / FETCH_AND_ADD and the masked (extended, seed §8.7) ones of 4,
 * 8, 16 and 32 bytes. Operands use the API layer's operand block
 * (framework/amo_cpu.h) so both layers compute with one definition,
 * axon_amo_apply().
 *
 * Atomicity. Every softib atomic of the process takes the stripe lock of its
 * 32-byte block (one table for all softib devices of the process), then:
 *   4, 8 bytes  compare-and-swap loop on the word: atomic with CPU atomics too
 *   16 bytes    cmpxchg16b loop where the CPU has it (x86-64): likewise
 *   32 bytes    word by word under the lock: atomic among softib's atomics
 *               only (AXON_DEV_ATOMIC_HCA), no instruction does 32 bytes
 * Standard atomics take the lock too: a 32-byte operation may hold any
 * naturally aligned block, and knowing that none does would cost a handshake
 * as dear as the uncontended lock itself (one compare-and-swap).
 */
#ifndef SOFTIB_AMO_H
#define SOFTIB_AMO_H

#include <stdint.h>
#include "amo_cpu.h"

#define SOFTIB_AMO_MAX_WORDS AXON_AMO_MAX_WORDS   /* 32 bytes */

/* Operands of up to 2^3 bytes travel by value in the WR, larger ones by address */
#define SOFTIB_AMO_LOG_INLINE 3

/* The masked sizes softib does (bit n: 2^n bytes): 4, 8, 16 and 32. */
#define SOFTIB_AMO_EXT_SIZES ((1u << 2) | (1u << 3) | (1u << 4) | (1u << 5))

/* 64-bit words an operand of size bytes covers (a 4-byte one: the low half of word 0). */
static inline unsigned softib_amo_words(unsigned size)
{
    return (size <= 8) ? 1 : size / 8;
}

/* The masked sizes that are atomic with the CPU too (bit n: 2^n bytes). */
uint32_t softib_amo_glob_sizes(void);

/*
 * Execute args (op ADD or CSWAP on 8 bytes, MASKED_CSWAP or MFADD on 4, 8,
 * 16 or 32) on the operand at addr, which the caller checked (registered,
 * naturally aligned); the previous value goes to prev (softib_amo_words
 * words). A 4-byte masked operation works on the low 32 bits of the words.
 */
void softib_amo_exec(const axon_amo_args_t *args, void *addr, uint64_t *prev);

#endif
