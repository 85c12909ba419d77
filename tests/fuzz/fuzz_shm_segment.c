/*
 * A shm segment, whose every byte other processes write (components/shm/
 * shm_seg.c). As a sender maps a peer's: its control line checked by
 * axon_shm_seg_check, then, if accepted, a sender slot taken, a cell claimed,
 * filled to the brim and published, the slot given back, as shm_ep.c does. As
 * the owner sees its own: the ring's head peeked, and a stuck head judged
 * against the senders' slots (axon_shm_senders_unstick). All must stay inside
 * the mapping and end, whatever the peers wrote into cells and slots.
 */
#include <stdlib.h>
#include <string.h>
#include "components/shm/shm_seg.h"
#include "fuzz.h"

/* The smallest cells a sender may fill (AXON_SHM_CELL_SIZE's floor). */
#define AXON_FUZZ_SHM_CELL_MIN (2 * AXON_SHM_FIFO_ALIGN)

int axon_fuzz_shm_segment(const uint8_t *data, size_t size)
{
    static axon_proc_t self;
    axon_shm_senders_t senders;
    axon_shm_sender_t *slot;
    axon_shm_seg_ctl_t ctl;
    axon_shm_fifo_t fifo;
    axon_shm_cell_t *cell;
    uint64_t pos, word;
    int wake;
    void *seg = NULL;
    int accepted;

    /* axon_shm_seg_attach maps nothing shorter; mappings are page aligned. */
    if ((size < AXON_SHM_SEG_SLOTS_OFFSET) || (posix_memalign(&seg, 4096, size) != 0)) {
        return 1;
    }
    memcpy(seg, data, size);
    accepted = axon_shm_seg_check("fuzz", seg, size, AXON_FUZZ_SHM_CELL_MIN, &ctl);
    if (accepted) {
        if (self.pid == 0) {
            axon_proc_self(&self);
        }
        axon_shm_fifo_view(&fifo, (axon_shm_seg_ctl_t *)seg + 1, (char *)seg + ctl.cells_offset,
                           ctl.fifo_size, ctl.cell_size);
        axon_shm_senders_view(&senders, seg, ctl.senders);
        if (axon_shm_sender_acquire(&senders, &fifo, &self, "fuzz", &slot, &word) == AXON_OK) {
            if (axon_shm_fifo_claim(&fifo, &slot->claim, &cell, &pos, &wake) == AXON_OK) {
                memset(axon_shm_cell_payload(cell), 0xa5,
                       axon_shm_cell_payload_max(ctl.cell_size));
                axon_shm_fifo_publish(cell, pos, 1, 0);
            }
            axon_shm_sender_release(slot, word);
        }
        axon_shm_senders_unstick(&senders, &fifo, 0, &self, "fuzz");
        cell = axon_shm_fifo_peek(&fifo, 0);
        if (cell != NULL) {
            axon_fuzz_touch(cell, sizeof(*cell));
            axon_shm_fifo_release(&fifo, cell, 0);
        }
    }
    free(seg);
    return accepted ? 0 : 1;
}
