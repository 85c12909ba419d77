/*
 * The receive ring: a bounded lock-free queue of fixed-size cells with many
 * producers (the peers' endpoints, in other processes) and one consumer (the
 * iface that owns the ring). Each cell carries a sequence number that says
 * whose turn it is (D. Vyukov's bounded-queue scheme), so producers contend
 * only on the tail and the consumer reads no shared counter at all.
 *
 * For position pos (a 64-bit counter that never wraps in practice), cell
 * cells[pos & mask] holds seq == pos when free for that lap, pos + 1 once
 * published, and pos + size once consumed (free for the next lap).
 *
 * A producer that dies between claiming a cell and publishing it would stop
 * the consumer for good. So every producer first writes the position it is
 * about to claim into its claim word (a line of the segment only it writes,
 * shm_seg.h), and the consumer can later prove who held a stuck cell.
 *
 * A consumer about to sleep arms the ring (axon_shm_fifo_arm): it sets the
 * top bit of the tail, which every producer's claim swaps out anyway; the
 * producer whose claim clears it wakes the consumer after publishing. So a
 * wakeup costs the senders nothing until someone waits.
 *
 * Everything here is static inline: it is the whole send and receive path.
 */
#ifndef AXON_SHM_FIFO_H
#define AXON_SHM_FIFO_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "axon_status.h"

#define AXON_SHM_FIFO_ALIGN 64

/* The ring is shared between processes: its atomics must not hide a lock. */
_Static_assert(__atomic_always_lock_free(sizeof(uint64_t), 0),
               "shm ring needs lock-free 64-bit atomics");

/* The tail's top bit: the consumer waits for a wakeup (positions never reach it). */
#define AXON_SHM_FIFO_ARMED (1ull << 63)

/* Producers' counter, alone on its cache line so claiming does not disturb cells. */
typedef struct axon_shm_fifo_ctl {
    _Atomic uint64_t tail;
} __attribute__((aligned(AXON_SHM_FIFO_ALIGN))) axon_shm_fifo_ctl_t;

/* Head of every cell; the payload follows it in the same cell. */
typedef struct axon_shm_cell {
    _Atomic uint64_t seq;
    uint32_t         length;  /* payload bytes */
    uint8_t          am_id;
    uint8_t          reserved[3];
} axon_shm_cell_t;

/* 16 bytes keeps the payload aligned for any type a pack callback writes. */
_Static_assert(sizeof(axon_shm_cell_t) == 16, "shm cell header size");

/* A process's view of one ring (the owner's or a peer's mapping of it). */
typedef struct axon_shm_fifo {
    axon_shm_fifo_ctl_t *ctl;
    char                *cells;
    uint64_t             mask;       /* size - 1 */
    size_t               cell_size;  /* including the header */
} axon_shm_fifo_t;

static inline axon_shm_cell_t *axon_shm_fifo_cell(const axon_shm_fifo_t *fifo, uint64_t pos)
{
    return (axon_shm_cell_t*)(fifo->cells + (size_t)(pos & fifo->mask) * fifo->cell_size);
}

static inline void *axon_shm_cell_payload(axon_shm_cell_t *cell)
{
    return cell + 1;
}

/* Bytes of payload a cell of cell_size bytes holds. */
static inline size_t axon_shm_cell_payload_max(size_t cell_size)
{
    return cell_size - sizeof(axon_shm_cell_t);
}

/* Set up a view; ctl and cells must be 64-byte aligned, size a power of two. */
static inline void axon_shm_fifo_view(axon_shm_fifo_t *fifo, void *ctl, void *cells,
                                      uint64_t size, size_t cell_size)
{
    fifo->ctl       = (axon_shm_fifo_ctl_t*)ctl;
    fifo->cells     = (char*)cells;
    fifo->mask      = size - 1;
    fifo->cell_size = cell_size;
}

/* Owner only, before any peer can see the ring: every cell free for lap 0. */
static inline void axon_shm_fifo_init(const axon_shm_fifo_t *fifo)
{
    uint64_t pos;

    for (pos = 0; pos <= fifo->mask; ++pos) {
        atomic_init(&axon_shm_fifo_cell(fifo, pos)->seq, pos);
    }
    atomic_init(&fifo->ctl->tail, 0);
}

/* A claim word's value when its producer is not trying any position. */
#define AXON_SHM_FIFO_CLAIM_NONE UINT64_MAX

/*
 * Producer: take the next free cell, announcing each position tried in
 * *claim first (see axon_shm_senders_unstick() for why this is enough).
 * AXON_ERR_NO_RESOURCE when the ring is full; no cell was taken then, so the
 * caller may simply retry later. A claimed cell must be published, even if
 * the caller has nothing to say (the consumer waits for cells in order).
 * *wake_p is set when the consumer armed the ring: this claim disarmed it,
 * and the caller wakes the consumer once the cell is published.
 */
static inline axon_status_t axon_shm_fifo_claim(const axon_shm_fifo_t *fifo,
                                                _Atomic uint64_t *claim,
                                                axon_shm_cell_t **cell_p, uint64_t *pos_p,
                                                int *wake_p)
{
    uint64_t         tail = atomic_load_explicit(&fifo->ctl->tail, memory_order_relaxed);
    uint64_t         pos  = tail & ~AXON_SHM_FIFO_ARMED;
    axon_shm_cell_t *cell;
    uint64_t         seq;
    int64_t          diff;

    for (;;) {
        cell = axon_shm_fifo_cell(fifo, pos);
        /* Acquire pairs with the consumer's release: it is done reading the cell. */
        seq  = atomic_load_explicit(&cell->seq, memory_order_acquire);
        diff = (int64_t)(seq - pos);
        if (diff == 0) {
            /* Announce, then claim. Release on both: a consumer that sees the tail
             * past pos sees this store (or a later one of ours, made after we
             * published pos). On failure pos is reloaded with the current tail. */
            atomic_store_explicit(claim, pos, memory_order_release);
            if (atomic_compare_exchange_weak_explicit(&fifo->ctl->tail, &tail, pos + 1,
                                                      memory_order_release,
                                                      memory_order_relaxed)) {
                *cell_p = cell;
                *pos_p  = pos;
                *wake_p = (tail & AXON_SHM_FIFO_ARMED) != 0;
                return AXON_OK;
            }
            pos = tail & ~AXON_SHM_FIFO_ARMED;
        } else if (__builtin_expect(diff < 0, 0)) {
            /* The cell still holds the previous lap: the consumer is a lap behind.
             * Withdraw a claim that lost its race, so it cannot look like ours. */
            atomic_store_explicit(claim, AXON_SHM_FIFO_CLAIM_NONE, memory_order_release);
            return AXON_ERR_NO_RESOURCE;
        } else {
            /* Another producer took pos; catch up with the tail. Having seen its cell
             * (acquire), we see its move of the tail: a tail still at pos means no
             * producer took it, and the cell's number is corrupt (the peer's ring is
             * the peer's to break, not ours to spin on): full, as far as we can tell. */
            tail = atomic_load_explicit(&fifo->ctl->tail, memory_order_relaxed);
            if (__builtin_expect((tail & ~AXON_SHM_FIFO_ARMED) == pos, 0)) {
                atomic_store_explicit(claim, AXON_SHM_FIFO_CLAIM_NONE, memory_order_release);
                return AXON_ERR_NO_RESOURCE;
            }
            pos = tail & ~AXON_SHM_FIFO_ARMED;
        }
    }
}

/* Producer: hand a filled cell to the consumer. */
static inline void axon_shm_fifo_publish(axon_shm_cell_t *cell, uint64_t pos, uint8_t am_id,
                                         uint32_t length)
{
    cell->length = length;
    cell->am_id  = am_id;
    /* Release: the payload and header are visible before the cell is. */
    atomic_store_explicit(&cell->seq, pos + 1, memory_order_release);
}

/* Consumer: the cell at head if it has been published, else NULL. */
static inline axon_shm_cell_t *axon_shm_fifo_peek(const axon_shm_fifo_t *fifo, uint64_t head)
{
    axon_shm_cell_t *cell = axon_shm_fifo_cell(fifo, head);

    if (atomic_load_explicit(&cell->seq, memory_order_acquire) != head + 1) {
        return NULL;
    }
    return cell;
}

/* Consumer: give the cell read at head back to producers, for the next lap. */
static inline void axon_shm_fifo_release(const axon_shm_fifo_t *fifo, axon_shm_cell_t *cell,
                                         uint64_t head)
{
    atomic_store_explicit(&cell->seq, head + fifo->mask + 1, memory_order_release);
}

/* Consumer: is the cell at head claimed by a producer but not published yet? */
static inline int axon_shm_fifo_is_claimed(const axon_shm_fifo_t *fifo, uint64_t head)
{
    /* Acquire pairs with the producers' release CAS: their claim words are
     * visible to whatever the caller reads next. */
    uint64_t tail = atomic_load_explicit(&fifo->ctl->tail, memory_order_acquire);

    return ((tail & ~AXON_SHM_FIFO_ARMED) != head) && (axon_shm_fifo_peek(fifo, head) == NULL);
}

/*
 * Consumer, before it sleeps: ask the next producer for a wakeup. 1 if armed
 * (nothing was claimed past head: the next claim sees the bit), 0 if cells
 * are claimed or published past head (the bit is taken back: consume first).
 * The fetch-or is ordered with every producer's CAS on the tail, so a claim
 * either precedes it (seen here) or sees the bit.
 */
static inline int axon_shm_fifo_arm(const axon_shm_fifo_t *fifo, uint64_t head)
{
    uint64_t tail = atomic_fetch_or_explicit(&fifo->ctl->tail, AXON_SHM_FIFO_ARMED,
                                             memory_order_seq_cst);

    if ((tail & ~AXON_SHM_FIFO_ARMED) == head) {
        return 1;
    }
    atomic_fetch_and_explicit(&fifo->ctl->tail, ~AXON_SHM_FIFO_ARMED, memory_order_relaxed);
    return 0;
}

/*
 * Consumer: give the claimed, unpublished cell at head back to producers,
 * for the next lap, without reading it: its producer is known dead. A CAS,
 * so a cell published meanwhile is never lost. 1 if the cell was dropped.
 */
static inline int axon_shm_fifo_drop_claimed(const axon_shm_fifo_t *fifo, uint64_t head)
{
    uint64_t seq = head;

    return atomic_compare_exchange_strong_explicit(&axon_shm_fifo_cell(fifo, head)->seq, &seq,
                                                   head + fifo->mask + 1,
                                                   memory_order_acq_rel, memory_order_acquire);
}

#endif
