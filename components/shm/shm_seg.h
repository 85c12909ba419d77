/*
 * Shared-memory segments: one per iface, a POSIX shm object in /dev/shm
 * named /<prefix>-<uid>-<pid>-<counter>. Layout, in 64-byte lines:
 *
 *   line 0    axon_shm_seg_ctl_t: magic, version, ring geometry, owner
 *             (read-only once the magic is set)
 *   line 1    the ring's tail (axon_shm_fifo_ctl_t), written by producers
 *   line 2    axon_shm_senders_ctl_t: how many sender slots were ever taken,
 *             and whether the owner closed its iface (its goodbye)
 *   line 3..  senders sender slots (axon_shm_sender_t), one per endpoint
 *             sending to this ring, each written by its endpoint only
 *   then      fifo_size cells of cell_size bytes, at cells_offset
 *
 * The creator's thread reads the ring, so the segment's pages prefer its
 * NUMA node (bound before they are allocated). The creator unlinks its
 * segment when the iface closes, or at process exit
 * for ifaces never closed. A peer maps the segment by name and keeps the
 * mapping, so unlinking does not disturb endpoints already connected.
 * Segments of processes killed before they could unlink are reaped by the
 * next process of the same user that opens an iface (axon_shm_seg_create).
 *
 * This file also knows processes by identity (axon_proc_t): a pid alone
 * is reused, and means nothing in another pid namespace.
 */
#ifndef AXON_SHM_SEG_H
#define AXON_SHM_SEG_H

#include <stddef.h>
#include <stdint.h>
#include <stdatomic.h>
#include <sys/types.h>
#include "axon_status.h"
#include "proc.h"
#include "list.h"
#include "shm_fifo.h"

/* Where POSIX shm objects live on Linux (glibc's shm_open directory). */
#define AXON_SHM_DIR          "/dev/shm"

#define AXON_SHM_SEG_MAGIC    0x314d48534e4f5841ull  /* "AXONSHM1" little-endian */
#define AXON_SHM_SEG_VERSION  5                      /* 3: sender slots, 4: closed,
                                                      * 5: wakeups (armed tail, event fd) */
#define AXON_SHM_SEG_VERSION_REAP 2                  /* oldest whose control line we can reap */
#define AXON_SHM_SEG_NAME_MAX 48                     /* with the NUL; fixed in addresses */

typedef struct axon_shm_seg_ctl {
    /* Set last, with release: a peer that sees it sees the whole layout. */
    _Atomic uint64_t magic;
    uint32_t         version;
    uint32_t         fifo_size;     /* cells, a power of two */
    uint32_t         cell_size;     /* bytes per cell with its header */
    uint32_t         cells_offset;  /* from the start of the segment */
    uint32_t         owner_uid;
    uint32_t         senders;       /* sender slots, from line 3 on */
    uint64_t         host_id;       /* axon_sys_host_id() of the creator */
    axon_proc_t  owner;         /* the creator: lets a later process prove it dead */
} __attribute__((aligned(AXON_SHM_FIFO_ALIGN))) axon_shm_seg_ctl_t;

_Static_assert(sizeof(axon_shm_seg_ctl_t) == AXON_SHM_FIFO_ALIGN, "shm control line");

/*
 * Sender slots. Every endpoint sending to a ring holds one for its lifetime:
 * claim says which position it tries (axon_shm_fifo_claim), the rest who it
 * is, so that the ring's owner can prove a stuck cell's producer dead and
 * skip the cell (axon_shm_senders_unstick). The owner word packs the pid,
 * a ready bit (the identity below is written) and a generation that changes
 * with every change of hands, so a CAS on it cannot hit a later owner.
 */
#define AXON_SHM_SENDER_PID_MASK  0xffffffffull  /* 0: the slot is free */
#define AXON_SHM_SENDER_READY     (1ull << 32)
#define AXON_SHM_SENDER_GEN_ONE   (1ull << 33)

typedef struct axon_shm_sender {
    _Atomic uint64_t claim;       /* position tried last, or AXON_SHM_FIFO_CLAIM_NONE */
    _Atomic uint64_t owner;       /* AXON_SHM_SENDER_* word */
    _Atomic uint64_t start_time;  /* the owner's axon_proc_t, valid once READY */
    _Atomic uint64_t ns_id;
} __attribute__((aligned(AXON_SHM_FIFO_ALIGN))) axon_shm_sender_t;

/* Slots at and above hwm were never taken: scans stop there. */
typedef struct axon_shm_senders_ctl {
    _Atomic uint32_t hwm;
    /* Set by the owner when its iface closes normally: a sender that finds the
     * owner gone after it was set saw a peer leave, not fail (shm's goodbye). */
    _Atomic uint32_t closed;
    /* Wakeups (axon_shm_fifo_arm): the owner's eventfd, by its number in the owner
     * (a sender takes a copy with pidfd_getfd), -1 none; and how many senders could
     * not take one: while any, the owner never sleeps on the ring. */
    int32_t          event_fd;
    _Atomic uint32_t deaf_senders;
} __attribute__((aligned(AXON_SHM_FIFO_ALIGN))) axon_shm_senders_ctl_t;

/* A process's view of a segment's sender slots. */
typedef struct axon_shm_senders {
    axon_shm_senders_ctl_t *ctl;
    axon_shm_sender_t      *slots;
    uint32_t                count;
} axon_shm_senders_t;

/* Where lines 2 and 3 of the layout above start. */
#define AXON_SHM_SEG_SENDERS_OFFSET (sizeof(axon_shm_seg_ctl_t) + sizeof(axon_shm_fifo_ctl_t))
#define AXON_SHM_SEG_SLOTS_OFFSET   (AXON_SHM_SEG_SENDERS_OFFSET + sizeof(axon_shm_senders_ctl_t))

/* Set up views of the sender slots of a segment mapped at addr. */
static inline void axon_shm_senders_view(axon_shm_senders_t *senders, void *addr,
                                         uint32_t count)
{
    senders->ctl   = (axon_shm_senders_ctl_t*)((char*)addr + AXON_SHM_SEG_SENDERS_OFFSET);
    senders->slots = (axon_shm_sender_t*)((char*)addr + AXON_SHM_SEG_SLOTS_OFFSET);
    senders->count = count;
}

/* A segment this process created. */
typedef struct axon_shm_seg {
    void             *addr;
    size_t            length;
    pid_t             owner_pid;   /* a forked child must not unlink its parent's */
    int               numa_node;   /* its pages' preferred node (the creator's), -1: none */
    axon_list_link_t  list;        /* in the process's list of owned segments */
    char              name[AXON_SHM_SEG_NAME_MAX];
} axon_shm_seg_t;

/* Is prefix usable in a segment name? Logs why not, naming var_name. */
axon_status_t axon_shm_seg_check_prefix(const char *prefix, const char *var_name);

/*
 * Create, size and map a new segment with an empty ring and nsenders free
 * sender slots (fifo, senders: the owner's views of them); host_id and owner
 * go into its control line, event_fd (the owner's eventfd, -1: none) into the
 * senders' control line. The first call in a process first reaps the
 * segments of dead processes (see shm_seg.c). The segment is unlinked by
 * axon_shm_seg_destroy() or, if never destroyed, when the process exits.
 */
axon_status_t axon_shm_seg_create(const char *prefix, unsigned fifo_size, size_t cell_size,
                                  unsigned nsenders, uint64_t host_id,
                                  const axon_proc_t *owner, int event_fd, axon_shm_seg_t *seg,
                                  axon_shm_fifo_t *fifo, axon_shm_senders_t *senders);
/* The owner closes seg: mark it closed (senders see a goodbye), unlink, unmap. */
void          axon_shm_seg_destroy(axon_shm_seg_t *seg, axon_shm_senders_t *senders);

/*
 * Is the layout of the peer segment mapped at addr (length bytes) one we can
 * send cells of min_cell_size bytes into? 1 with its control line copied to
 * *copy (the peer may rewrite its own later), else 0 and a log line saying why.
 */
int           axon_shm_seg_check(const char *name, const void *addr, size_t length,
                                 size_t min_cell_size, axon_shm_seg_ctl_t *copy);
/*
 * Map a peer's segment by name and check its layout; min_cell_size is the
 * smallest cell the caller can fill. On success *addr_p and *length_p are the
 * mapping, fifo and senders views of the peer's ring and sender slots.
 * Failure: AXON_ERR_UNREACHABLE with an error line naming the segment.
 */
axon_status_t axon_shm_seg_attach(const char *name, size_t min_cell_size, void **addr_p,
                                  size_t *length_p, axon_shm_fifo_t *fifo,
                                  axon_shm_senders_t *senders);
void          axon_shm_seg_detach(void *addr, size_t length);

/*
 * Living processes with a segment named like name ("/<prefix>-<uid>-<pid>-<n>":
 * the same prefix and user) in /dev/shm: the processes of Axon on this host
 * that shm can reach (at least 1, the caller's own). For the idle policy
 * (axon_idle_set_host_procs); a directory scan, for the slow path.
 */
unsigned      axon_shm_seg_count_procs(const char *name);

/*
 * Take a sender slot of a peer's segment for an endpoint of process self:
 * a free one, else one whose owner is verifiably dead and holds no cell of
 * the ring. *slot_p and *word_p (the owner word, for the release) are set on
 * success. AXON_ERR_NO_RESOURCE with an error line naming seg_name when
 * every slot is taken. Slow path: may read /proc for every slot.
 */
axon_status_t axon_shm_sender_acquire(const axon_shm_senders_t *senders,
                                      const axon_shm_fifo_t *fifo, const axon_proc_t *self,
                                      const char *seg_name, axon_shm_sender_t **slot_p,
                                      uint64_t *word_p);
/* Give the slot back (every cell the endpoint claimed is published). */
void          axon_shm_sender_release(axon_shm_sender_t *slot, uint64_t word);

/*
 * Ring owner, when the cell at head has stayed claimed but unpublished for a
 * while: if every sender slot announcing head belongs to a dead process,
 * give the cell back to producers and free those slots. 1 if the cell was
 * dropped (head must then advance), 0 if it must be waited for.
 */
int           axon_shm_senders_unstick(const axon_shm_senders_t *senders,
                                       const axon_shm_fifo_t *fifo, uint64_t head,
                                       const axon_proc_t *self, const char *seg_name);

#endif
