/*
 * A peer's shm segment as a sender maps it (components/shm/shm_seg.c): its
 * control line checked by axon_shm_seg_check, then, if accepted, a cell
 * claimed, filled to the brim and published as shm_ep.c does, and the ring's
 * head read as the owner reads it: all inside the mapping, whatever the
 * peer wrote into its cells' sequence numbers.
 */
#include <stdlib.h>
#include <string.h>
#include "components/shm/shm_seg.h"
#include "fuzz.h"

/* The smallest cells a sender may fill (AXON_SHM_CELL_SIZE's floor). */
#define AXON_FUZZ_SHM_CELL_MIN (2 * AXON_SHM_FIFO_ALIGN)

int axon_fuzz_shm_segment(const uint8_t *data, size_t size)
{
    _Atomic uint64_t claim = AXON_SHM_FIFO_CLAIM_NONE;
    axon_shm_seg_ctl_t ctl;
    axon_shm_fifo_t fifo;
    axon_shm_cell_t *cell;
    void *seg = NULL;
    uint64_t pos;
    int accepted;

    /* axon_shm_seg_attach maps nothing shorter; mappings are page aligned. */
    if ((size < AXON_SHM_SEG_SLOTS_OFFSET) || (posix_memalign(&seg, 4096, size) != 0)) {
        return 1;
    }
    memcpy(seg, data, size);
    accepted = axon_shm_seg_check("fuzz", seg, size, AXON_FUZZ_SHM_CELL_MIN, &ctl);
    if (accepted) {
        axon_shm_fifo_view(&fifo, (axon_shm_seg_ctl_t *)seg + 1, (char *)seg + ctl.cells_offset,
                           ctl.fifo_size, ctl.cell_size);
        if (axon_shm_fifo_claim(&fifo, &claim, &cell, &pos) == AXON_OK) {
            memset(axon_shm_cell_payload(cell), 0xa5, axon_shm_cell_payload_max(ctl.cell_size));
            axon_shm_fifo_publish(cell, pos, 1, 0);
        }
        cell = axon_shm_fifo_peek(&fifo, 0);
        if (cell != NULL) {
            axon_fuzz_touch(cell, sizeof(*cell));
            axon_shm_fifo_release(&fifo, cell, 0);
        }
    }
    free(seg);
    return accepted ? 0 : 1;
}
