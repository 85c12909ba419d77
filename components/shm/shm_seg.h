/*
 * Shared-memory segments: one per iface, a POSIX shm object in /dev/shm
 * named /<prefix>-<uid>-<pid>-<counter>. Layout, in 64-byte lines:
 *
 *   line 0    axon_shm_seg_ctl_t: magic, version, ring geometry (read-only
 *             once the magic is set)
 *   line 1    the ring's tail (axon_shm_fifo_ctl_t), written by producers
 *   line 2..  fifo_size cells of cell_size bytes
 *
 * The creator unlinks its segment when the iface closes, or at process exit
 * for ifaces never closed. A peer maps the segment by name and keeps the
 * mapping, so unlinking does not disturb endpoints already connected.
 */
#ifndef AXON_SHM_SEG_H
#define AXON_SHM_SEG_H

#include <stddef.h>
#include <stdint.h>
#include <stdatomic.h>
#include <sys/types.h>
#include "axon.h"
#include "list.h"
#include "shm_fifo.h"

#define AXON_SHM_SEG_MAGIC    0x314d48534e4f5841ull  /* "AXONSHM1" little-endian */
#define AXON_SHM_SEG_VERSION  1
#define AXON_SHM_SEG_NAME_MAX 48                     /* with the NUL; fixed in addresses */

typedef struct axon_shm_seg_ctl {
    /* Set last, with release: a peer that sees it sees the whole layout. */
    _Atomic uint64_t magic;
    uint32_t         version;
    uint32_t         fifo_size;     /* cells, a power of two */
    uint32_t         cell_size;     /* bytes per cell with its header */
    uint32_t         cells_offset;  /* from the start of the segment */
    int32_t          owner_pid;     /* for diagnostics only */
    uint32_t         owner_uid;
} __attribute__((aligned(AXON_SHM_FIFO_ALIGN))) axon_shm_seg_ctl_t;

_Static_assert(sizeof(axon_shm_seg_ctl_t) == AXON_SHM_FIFO_ALIGN, "shm control line");

/* A segment this process created. */
typedef struct axon_shm_seg {
    void             *addr;
    size_t            length;
    pid_t             owner_pid;   /* a forked child must not unlink its parent's */
    axon_list_link_t  list;        /* in the process's list of owned segments */
    char              name[AXON_SHM_SEG_NAME_MAX];
} axon_shm_seg_t;

/* Is prefix usable in a segment name? Logs why not, naming var_name. */
axon_status_t axon_shm_seg_check_prefix(const char *prefix, const char *var_name);

/*
 * Create, size and map a new segment and build an empty ring in it (fifo:
 * the owner's view of it). The segment is unlinked by axon_shm_seg_destroy()
 * or, if never destroyed, when the process exits.
 */
axon_status_t axon_shm_seg_create(const char *prefix, unsigned fifo_size, size_t cell_size,
                                  axon_shm_seg_t *seg, axon_shm_fifo_t *fifo);
void          axon_shm_seg_destroy(axon_shm_seg_t *seg);

/*
 * Map a peer's segment by name and check its layout; min_cell_size is the
 * smallest cell the caller can fill. On success *addr_p and *length_p are the
 * mapping and fifo a view of the peer's ring. Failure: AXON_ERR_UNREACHABLE
 * with an error line naming the segment.
 */
axon_status_t axon_shm_seg_attach(const char *name, size_t min_cell_size, void **addr_p,
                                  size_t *length_p, axon_shm_fifo_t *fifo);
void          axon_shm_seg_detach(void *addr, size_t length);

#endif
