/*
 * The host-wide slot registry of one softib device: a small POSIX shm
 * segment ("/axon-softib<N>.reg") with one entry per slot 1..4094. A process
 * that opens the device takes the lowest free slot; the entry names the
 * owner (pid + process start time, so a reused pid is told apart) and the
 * shm segment of the slot's receive ring.
 *
 * Writers (open, close, reaping) hold a robust process-shared mutex, so a
 * holder killed mid-update never blocks the others. Readers (senders looking
 * up a destination) take no lock: an entry's generation is odd while the slot
 * is owned and changes at every claim and release, so a reader that sees the
 * same odd generation before and after copying an entry has a consistent copy.
 */
#ifndef SOFTIB_REGISTRY_H
#define SOFTIB_REGISTRY_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include "proc.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SOFTIB_REGISTRY_SLOT_MIN  1
#define SOFTIB_REGISTRY_SLOT_MAX  4094      /* slot 0 and 4095 are not QP-number slots */
#define SOFTIB_REGISTRY_NAME_LEN  64

typedef struct softib_registry softib_registry_t;

/*
 * Host-wide segments (the registry, the multicast groups): map name, of
 * size bytes, creating it if needed; init(seg, name) runs under an flock of
 * the segment and initializes it when its magic is not there yet (checks it
 * otherwise). Their writers' locks are robust and process-shared. Errors:
 * errno values.
 */
int      softib_shared_seg_open(const char *name, size_t size,
                                int (*init)(void *seg, const char *name), void **seg_p);
int      softib_shared_lock_init(pthread_mutex_t *lock);
int      softib_shared_lock(pthread_mutex_t *lock, const char *name);

/* What a process needs to know to tell whether another one still lives. */
typedef axon_proc_t softib_registry_owner_t;

/* Map (creating it if needed) the registry of device dev_index. Errors: errno values. */
int      softib_registry_open(unsigned dev_index, softib_registry_t **reg_p);
void     softib_registry_close(softib_registry_t *reg);

/*
 * Writers' lock. A holder that died leaves the lock to the next taker, who
 * finds every entry either fully published or free (the generation is
 * written last). Returns 0 or an errno.
 */
int      softib_registry_lock(softib_registry_t *reg);
void     softib_registry_unlock(softib_registry_t *reg);

/* Locked: free every slot whose owner is gone, calling unlink_ring(name) for its ring. */
void     softib_registry_reap(softib_registry_t *reg, void (*unlink_ring)(const char *name));
/* Locked: the lowest free slot and the (odd) generation it gets when published. ENOSPC if none. */
int      softib_registry_find_free(softib_registry_t *reg, unsigned *slot_p, uint64_t *gen_p);
/* Locked: make slot ours at generation gen (from find_free), its ring named ring. */
void     softib_registry_publish(softib_registry_t *reg, unsigned slot, uint64_t gen,
                                 const char *ring);
/* Locked: give slot back (gen must be the one it was published with). */
void     softib_registry_release(softib_registry_t *reg, unsigned slot, uint64_t gen);

/*
 * Lock-free: the slot's current generation (even: free) and, when it is
 * owned, its ring name (max bytes) and owner. Returns 0 when owned, ENOENT
 * when free, EINVAL for a slot out of range.
 */
int      softib_registry_lookup(const softib_registry_t *reg, unsigned slot, uint64_t *gen_p,
                                char *ring, size_t max, softib_registry_owner_t *owner);
/*
 * Where the owner of slot numbers its next QP. Kept across owners, so that a
 * process taking a dead one's slot does not hand out the QP numbers the dead
 * one's peers may still send to (QP numbers carry the slot). Owner only.
 */
uint32_t softib_registry_next_qp_index(const softib_registry_t *reg, unsigned slot);
void     softib_registry_set_next_qp_index(softib_registry_t *reg, unsigned slot, uint32_t index);
/* Lock-free, one shared load: the slot's current generation (even: free). */
uint64_t softib_registry_gen(const softib_registry_t *reg, unsigned slot);

/* This process's identity, as published in its slots. */
void     softib_registry_owner_self(softib_registry_owner_t *owner);
/* Nonzero when the owner is provably gone (dead, zombie, or its pid reused). */
int      softib_registry_owner_gone(const softib_registry_owner_t *owner, const char **why);

#ifdef __cplusplus
}
#endif

#endif
