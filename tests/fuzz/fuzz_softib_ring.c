/*
 * softib's shm wire ring as a sender finds it in the receiving slot's shared
 * memory (framework/device/softib/softib_ring.h): the first byte picks the
 * ring's size (2 to 16 cells), then the tail and each cell's word. A claim
 * must end, and a claimed cell is written and published as
 * softib_wire_shm_send does.
 */
#include <stdlib.h>
#include <string.h>
#include "fuzz.h"
#include "softib/softib_ring.h"

/* The sender's identity in cell words (slot 5, generation 3). */
#define AXON_FUZZ_RING_TAG ((3u << 12) | 5u)

int axon_fuzz_softib_ring(const uint8_t *data, size_t size)
{
    _Atomic uint64_t tail;
    softib_ring_cell_t *cells, *cell;
    unsigned shift, ncells, i;
    uint64_t word;
    uint32_t lap;
    int claimed;

    if (size < 1 + sizeof(uint64_t)) {
        return 1;
    }
    shift  = 1 + data[0] % 4;
    ncells = 1u << shift;
    cells  = aligned_alloc(SOFTIB_RING_ALIGN, ncells * sizeof(*cells));
    if (cells == NULL) {
        return 1;
    }
    memset(cells, 0, ncells * sizeof(*cells));   /* a fresh segment: every cell FREE, lap 0 */
    memcpy(&word, data + 1, sizeof(word));
    atomic_init(&tail, word);
    for (i = 0; (i < ncells) && (1 + (i + 2) * sizeof(word) <= size); ++i) {
        memcpy(&word, data + 1 + (i + 1) * sizeof(word), sizeof(word));
        atomic_init(&cells[i].seq, word);
    }
    claimed = softib_ring_claim(&tail, cells, shift, AXON_FUZZ_RING_TAG, &cell, &lap) == 0;
    if (claimed) {
        memset(cell->data, 0x5a, SOFTIB_WIRE_MAX_PKT);
        cell->len = SOFTIB_WIRE_MAX_PKT;
        word      = softib_cell_word(lap, SOFTIB_CELL_CLAIMED, AXON_FUZZ_RING_TAG);
        atomic_compare_exchange_strong(&cell->seq, &word,
                                       softib_cell_word(lap, SOFTIB_CELL_PUBLISHED,
                                                        AXON_FUZZ_RING_TAG));
    }
    free(cells);
    return claimed ? 0 : 1;
}
