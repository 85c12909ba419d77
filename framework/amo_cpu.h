/*
 * Atomics executed by a CPU on the memory they target: by the target process
 * itself (self, operations arriving as active messages) or by a process on
 * the same host that has the target's allocated segment mapped (shm).
 *
 * Every Axon atomic a CPU executes on a mapped region takes one of the
 * region's lock stripes (chosen by the 32-byte block the operand sits in,
 * counted from the region's start so every process agrees). That makes a
 * 32-byte extended atomic, which no instruction can do, atomic with respect
 * to every other Axon atomic on the location, whatever its size. The table
 * lives with the memory: in the header of an allocated segment (shared by
 * every process mapping it) or beside a mapping of the caller's memory.
 * A lock word holds its owner's pid: a waiter that spins long finds a dead
 * owner (shm peer killed mid-operation) and takes the lock over, so no
 * process hangs on a dead one.
 */
#ifndef AXON_AMO_CPU_H
#define AXON_AMO_CPU_H

#include <stddef.h>
#include <stdint.h>
#include "amo_args.h"
#include "axon_status.h"

#define AXON_AMO_LOCKS      64   /* stripes per region */
#define AXON_AMO_BLOCK_SHIFT 5   /* a stripe covers 32-byte blocks: the largest operand */

typedef struct axon_amo_lock {
    uint32_t word;               /* 0 free, else the owner's pid; accessed atomically */
    uint32_t pad[15];            /* one cache line each */
} axon_amo_lock_t;

typedef struct axon_amo_lock_table {
    axon_amo_lock_t lock[AXON_AMO_LOCKS];
} axon_amo_lock_table_t;

/*
 * AXON_OK, or AXON_ERR_INVALID_PARAM (logged) for an op/size pair that does
 * not exist: ADD..CSWAP take 4 or 8 bytes, MASKED_CSWAP and MFADD 8, 16 or 32.
 */
axon_status_t axon_amo_args_check(const axon_amo_args_t *args);

/* Initialise a table (all locks free). */
void axon_amo_lock_table_init(axon_amo_lock_table_t *table);

/*
 * Execute args on the operand at addr (naturally aligned, args->size bytes),
 * region_offset bytes from the start of the region whose table is given;
 * write the previous value to result (args->size / 8 words, at least one)
 * when result is not NULL.
 *
 * The stripe is the operand's 32-byte block, (region_offset >>
 * AXON_AMO_BLOCK_SHIFT) % AXON_AMO_LOCKS when the region starts 32-byte
 * aligned; a misaligned region start is allowed (it counts blocks of the
 * address space, the start being equally misaligned in every mapping).
 * Words are read and written with single-word atomic accesses, so plain
 * readers never see a torn 4- or 8-byte word; a 4- or 8-byte operand
 * changes by one compare-and-swap, so the operation is also atomic against
 * CPU atomics on it that take no stripe (through axon_rkey_ptr); 16- and
 * 32-byte ones are atomic against Axon's atomics only. args must have passed
 * axon_amo_args_check: anything else changes nothing (result 0). No system
 * call, allocation or log unless the stripe is contended for long.
 */
void axon_amo_cpu_exec(axon_amo_lock_table_t *table, uint64_t region_offset, void *addr,
                       const axon_amo_args_t *args, uint64_t *result);

/*
 * The stripe lock exec takes for an operand at addr / region_offset, taken
 * and released by hand: for code that must update a location under the same
 * lock (and for tests that play a process dying while holding it). Not
 * reentrant. A waiter takes over a lock whose owner process died (logged).
 */
axon_amo_lock_t *axon_amo_lock_acquire(axon_amo_lock_table_t *table, uint64_t region_offset,
                                       const void *addr);
void             axon_amo_lock_release(axon_amo_lock_t *lock);

/*
 * The operation's definition, with no atomicity: new value from old (both
 * args->size / 8 words, a 4-byte operand in the low half of word 0, whose
 * high half the result leaves 0). MASKED_CSWAP: value is the swap value,
 * mask the compare mask. MFADD: value is the addend, mask the boundaries (a
 * 1 ends a field; bit 63 of each word always does). An op/size pair that
 * args_check refuses gives new == old.
 * axon_amo_cpu_exec applies it under the lock; tests check it against their
 * own model.
 */
void axon_amo_apply(const axon_amo_args_t *args, const uint64_t *old, uint64_t *new_value);

#endif
