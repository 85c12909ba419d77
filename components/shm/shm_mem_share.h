/*
 * The caller's memory moved into a segment peers on the host map
 * (AXON_MEM_MAP_SHARED; how and what moves: shm_mem_share.c).
 */
#ifndef AXON_SHM_MEM_SHARE_H
#define AXON_SHM_MEM_SHARE_H

#include "shm_mem_seg.h"

/*
 * Move the whole pages of [addr, addr + length) into a new segment named by
 * token, mapped where they were with their contents, and a partial page at
 * either end too when it is program data (a loaded object's .data/.bss).
 * seg then describes the segment as axon_mem_seg_alloc's would (fd, header
 * at base, the pages at address, length their bytes) and peers attach it the
 * same way; seg->address below addr (or past its end) says a partial page
 * moved. AXON_ERR_UNSUPPORTED (debug line): no page that may move, or memory
 * that must not move; nothing changed.
 */
axon_status_t axon_mem_share(void *addr, size_t length, uint64_t token, axon_mem_seg_t *seg);

/* Move the pages back into private memory (if still ours there) and free the segment. */
void          axon_mem_unshare(axon_mem_seg_t *seg);

#endif
