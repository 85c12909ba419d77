/*
 * The table of a process's live mappings that peers on the same host check
 * before they read or write its memory by cross-memory attach
 * (process_vm_readv/writev). That path never asks the owner, so without the
 * table a key with a forged token, or one whose memory was unmapped since,
 * would reach whatever the owner has at that address now.
 *
 * The owner publishes one slot per mapping: {token, base, length}. The
 * token is written last when the slot is filled and cleared first when it
 * is emptied, so a slot whose token matches a key's names exactly the
 * key's range. A peer attaches the table once (an Axon memfd segment,
 * framework/mem_seg.h: sealed, checked by magic and id), checks the slot
 * its key names when it unpacks it, and before every operation checks the
 * token alone with one acquire load (axon_mem_table_slot_live).
 *
 * What the table cannot close: the owner unmapping while a peer's
 * operation is already under way. That is the user's error, as in UCX and
 * OpenSHMEM (peers must stop using a key before its memory is unmapped).
 */
#ifndef AXON_MEM_TABLE_H
#define AXON_MEM_TABLE_H

#include <stdint.h>
#include "axon_status.h"
#include "shm_mem_seg.h"
#include "proc.h"

/*
 * Slots per table, part of the format (a key's slot index is checked
 * against it): a mapping that finds no free slot is reached by active
 * messages instead.
 */
#define AXON_MEM_TABLE_SLOTS 1024

typedef struct axon_mem_table_slot {
    uint64_t token;    /* 0: free */
    uint64_t base;     /* the owner's address of the mapping */
    uint64_t length;
    uint64_t layout;   /* a layout key: the owner's address of its pieces (shm_md.h), else 0 */
} axon_mem_table_slot_t;

typedef struct axon_mem_table {
    axon_mem_seg_t         seg;        /* owner: the memfd segment; peer: its mapping */
    axon_mem_table_slot_t *slots;      /* in seg */
    uint64_t               id;         /* random; the segment's token, carried by keys */
} axon_mem_table_t;

/* Owner: create an empty table (fd in table->seg.fd, id in table->id). */
axon_status_t axon_mem_table_create(axon_mem_table_t *table);
/* Owner: clear every slot, then unmap and close. Peers' mappings stay, all slots empty. */
void          axon_mem_table_destroy(axon_mem_table_t *table);

/*
 * Owner (the caller serializes the calls on one table): publish a mapping
 * in the lowest free slot; its index, or -1 when the table is full (debug
 * line). token must not be 0. A slot is reused at once after a clear: keys
 * of the old mapping still fail, their token is not the new one.
 */
int           axon_mem_table_publish(axon_mem_table_t *table, uint64_t token, uint64_t base,
                                     uint64_t length, uint64_t layout);
/* Owner: empty the slot; from now on no peer's check of it succeeds. */
void          axon_mem_table_clear(axon_mem_table_t *table, uint32_t slot);

/*
 * Peer: map the table of process owner (fd and id from its key).
 * AXON_ERR_UNSUPPORTED when the system forbids opening the owner's fd (the
 * caller must not use cross-memory attach then); AXON_ERR_REMOTE_ACCESS
 * when it is not there or not that table (owner gone, context destroyed);
 * NO_RESOURCE / NO_MEMORY when out of fds or address space.
 */
axon_status_t axon_mem_table_attach(const axon_proc_t *owner, int32_t fd, uint64_t id,
                                    axon_mem_table_t *table);
void          axon_mem_table_detach(axon_mem_table_t *table);

/*
 * Peer, at unpack: does slot name exactly this mapping? Its address (for
 * axon_mem_table_slot_live), or NULL when the slot is out of the table or
 * holds another token, base or length.
 */
const axon_mem_table_slot_t *axon_mem_table_check(const axon_mem_table_t *table, uint32_t slot,
                                                  uint64_t token, uint64_t base, uint64_t length);

/* Peer, before every operation: is the mapping the slot was checked for still there? */
static inline int axon_mem_table_slot_live(const axon_mem_table_slot_t *slot, uint64_t token)
{
    return __atomic_load_n(&slot->token, __ATOMIC_ACQUIRE) == token;
}

#endif
