/*
 * Memory segments allocated for remote access (AXON_MEM_MAP_ALLOCATE): an
 * anonymous memfd mapped shared, so that processes on the same host map it
 * too and put, get and do atomics on it without the owner's help.
 *
 * Layout: one header page (magic, token, length, owner, the atomic lock
 * table), then the user's memory. A peer maps it through /proc/<pid>/fd/<fd>
 * of the owner (what the key carries) and checks magic, token and length
 * before using it, so a reused pid or fd never gives it someone else's
 * memory. A memfd disappears with its last mapping: nothing leaks when a
 * process is killed. Its pages prefer the NUMA node of the thread that
 * allocated it (bound before any touch, since a peer's put may touch first).
 */
#ifndef AXON_MEM_SEG_H
#define AXON_MEM_SEG_H

#include <stddef.h>
#include <stdint.h>
#include "axon_status.h"
#include "amo_cpu.h"
#include "proc.h"

/* Header bytes (identity + a 4 KiB lock table) before the user's memory;
 * rounded up to the page size at run time, so the user's memory is page aligned. */
#define AXON_MEM_SEG_HDR_SIZE 8192

typedef struct axon_mem_seg {
    int                    fd;        /* owner: the memfd; peer: -1 once mapped */
    void                  *base;      /* the mapping, header included */
    size_t                 map_length;
    void                  *address;   /* the user's memory: base + the header (page aligned) */
    size_t                 length;    /* the user's bytes, as asked (mapped: rounded to pages) */
    uint64_t               token;
    axon_amo_lock_table_t *locks;     /* in the header */
} axon_mem_seg_t;

/*
 * Owner: allocate length zeroed bytes (rounded up to pages) with the given
 * token. The key must carry our axon_proc_self(), seg->fd, seg->length and
 * the token. The fd is close-on-exec; a forked child inherits the mapping
 * but is not the owner peers look for. Free unmaps and closes (peers' own
 * mappings stay valid); on a cleared or freed seg it does nothing.
 */
axon_status_t axon_mem_seg_alloc(size_t length, uint64_t token, axon_mem_seg_t *seg);
void          axon_mem_seg_free(axon_mem_seg_t *seg);

/*
 * Pieces of alloc, for memory moved into a segment (shm_mem_share.c): a
 * sealed memfd sized for a header and length bytes, the header's bytes (a
 * multiple of the page size: the user's memory starts at that offset), a
 * header written at hdr (the fd's first bytes, mapped), and its lock table.
 */
axon_status_t          axon_mem_seg_create_fd(size_t length, int *fd_p, size_t *map_length_p);
size_t                 axon_mem_seg_hdr_size(void);
void                   axon_mem_seg_hdr_init(void *hdr, size_t length, uint64_t token);
axon_amo_lock_table_t *axon_mem_seg_hdr_locks(void *hdr);

/*
 * Peer: map the owner's segment (owner identity and fd from its key) and
 * check it is the one the key names. AXON_ERR_REMOTE_ACCESS (logged) when
 * it cannot be opened or is not that segment (owner gone, no such fd, not
 * an Axon memfd, other token, length or owner); AXON_ERR_UNSUPPORTED (debug
 * line) when the system forbids opening another process's fd (caller falls
 * back); NO_RESOURCE / NO_MEMORY when out of fds or address space. Holds
 * no fd afterwards. The owner may attach its own segment (a second mapping).
 */
axon_status_t axon_mem_seg_attach(const axon_proc_t *owner, int32_t fd, size_t length,
                                  uint64_t token, axon_mem_seg_t *seg);
void          axon_mem_seg_detach(axon_mem_seg_t *seg);   /* unmap; no-op when cleared */

#endif
