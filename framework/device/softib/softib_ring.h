/*
 * softib's shm wire ring (softib_wire_shm.c): its cells, their words, and a
 * sender's claim of one. The ring lives in the receiving slot's shared
 * memory, so every word here may have been written by another process, or
 * be corrupt: a claim ends whatever the words say.
 */
#ifndef SOFTIB_RING_H
#define SOFTIB_RING_H

#include <stdatomic.h>
#include <stdint.h>
#include "dev.h"
#include "softib_wire.h"

#define SOFTIB_RING_ALIGN     64

/* A cell's word: lap (32 bits) | state (2) | claimer's generation (18) | claimer's slot (12) */
#define SOFTIB_CELL_FREE       0u
#define SOFTIB_CELL_CLAIMED    1u
#define SOFTIB_CELL_PUBLISHED  2u
#define SOFTIB_CELL_TAG_MASK   0x3fffffffu
#define SOFTIB_CELL_GEN_MASK   0x3ffffu

typedef struct softib_ring_cell {
    _Atomic uint64_t seq;
    uint32_t         len;
    uint32_t         reserved;
    axon_dev_gid_t   src_gid;
    uint8_t          data[SOFTIB_WIRE_MAX_PKT];
} __attribute__((aligned(SOFTIB_RING_ALIGN))) softib_ring_cell_t;

_Static_assert(sizeof(softib_ring_cell_t) % SOFTIB_RING_ALIGN == 0, "ring cell alignment");

static inline uint64_t softib_cell_word(uint32_t lap, unsigned state, uint32_t tag)
{
    return ((uint64_t)lap << 32) | ((uint64_t)state << 30) | (tag & SOFTIB_CELL_TAG_MASK);
}

static inline uint32_t softib_cell_lap(uint64_t word)   { return (uint32_t)(word >> 32); }
static inline unsigned softib_cell_state(uint64_t word) { return (unsigned)(word >> 30) & 3u; }
static inline uint32_t softib_cell_tag(uint64_t word)   { return (uint32_t)word & SOFTIB_CELL_TAG_MASK; }

/*
 * Claim the cell at the tail of the ring of 2^shift cells for this lap, as
 * sender tag: 0 with *cell_p (CLAIMED by us, the tail moved past it) and its
 * lap, or -1 when the ring is full. A cell taken for this lap (its claimer
 * may be dead) or freed for a later one (skipped by the consumer) is passed,
 * helping the tail on; a whole lap of cells passed by our own moves of the
 * tail is a ring that cannot take the packet now (cells naming laps far
 * ahead would otherwise keep us walking for up to 2^31 laps).
 */
static inline int softib_ring_claim(_Atomic uint64_t *tail, softib_ring_cell_t *cells,
                                    unsigned shift, uint32_t tag,
                                    softib_ring_cell_t **cell_p, uint32_t *lap_p)
{
    uint64_t claimed = softib_cell_word(0, SOFTIB_CELL_CLAIMED, tag);
    uint64_t pos, word, passed = 0;
    softib_ring_cell_t *cell;
    uint32_t lap;

    for (;;) {
        pos  = atomic_load_explicit(tail, memory_order_acquire);
        cell = &cells[pos & ((1ull << shift) - 1)];
        lap  = (uint32_t)(pos >> shift);
        word = atomic_load_explicit(&cell->seq, memory_order_acquire);
        if ((int32_t)(softib_cell_lap(word) - lap) < 0) {
            return -1;   /* the consumer has not emptied this cell's previous lap */
        }
        if ((softib_cell_lap(word) == lap) && (softib_cell_state(word) == SOFTIB_CELL_FREE) &&
            atomic_compare_exchange_strong_explicit(&cell->seq, &word,
                                                    claimed | ((uint64_t)lap << 32),
                                                    memory_order_acquire, memory_order_relaxed)) {
            atomic_compare_exchange_strong_explicit(tail, &pos, pos + 1,
                                                    memory_order_release, memory_order_relaxed);
            *cell_p = cell;
            *lap_p  = lap;
            return 0;
        }
        /* Help the tail past it; if our tail was stale, this fails and we reload. */
        if (atomic_compare_exchange_strong_explicit(tail, &pos, pos + 1, memory_order_release,
                                                    memory_order_relaxed) &&
            (++passed >> shift)) {
            return -1;
        }
    }
}

#endif
