/*
 * Memory monitor: tells registration caches when the application gives
 * memory back to the kernel (munmap, mremap, madvise(DONTNEED), free()
 * trimming the heap), so a buffer later allocated at the same address is
 * never used with a key that pins the old pages.
 *
 * One per process, on Linux's userfaultfd: watched ranges are registered
 * in write-protect mode, and nothing is ever write-protected, so no page
 * fault comes to us, only the unmap, remove and remap events. The kernel
 * holds the thread that unmaps until its event is read. The monitor's
 * thread reads with the monitor lock held and runs the subscribers'
 * callbacks before dropping it: a lookup that takes the lock after munmap
 * returned sees the invalidation, never a stale region.
 *
 * Rule for every user of the lock: never give memory back (free, munmap,
 * deregistration) while holding it; the unmapping thread would wait for
 * the monitor, and the monitor for the lock.
 */
#ifndef AXON_MEMMON_H
#define AXON_MEMMON_H

#include <stddef.h>
#include <stdint.h>
#include "axon_status.h"

/* Called by the monitor thread, monitor lock held: [start, end) is gone. */
typedef void (*axon_memmon_cb_t)(void *arg, uintptr_t start, uintptr_t end);

typedef struct axon_memmon_sub axon_memmon_sub_t;

/*
 * Start getting events (the first subscriber starts the monitor).
 * AXON_ERR_UNSUPPORTED when this process cannot watch memory (no
 * userfaultfd, or not permitted); logged once, at info level.
 */
axon_status_t axon_memmon_subscribe(axon_memmon_cb_t cb, void *arg, axon_memmon_sub_t **sub_p);
/* Stop; the callback is not running and will not run again once it returns. */
void          axon_memmon_unsubscribe(axon_memmon_sub_t *sub);

/*
 * Report events on the pages holding [addr, addr + length). Fails
 * (AXON_ERR_UNSUPPORTED) for memory the kernel cannot watch this way, e.g.
 * a private file mapping; the caller then must not cache it.
 */
axon_status_t axon_memmon_watch(uintptr_t addr, size_t length);

/* The lock the monitor holds while it reads and dispatches events. */
void          axon_memmon_lock(void);
void          axon_memmon_unlock(void);

/* Events dispatched so far (monitor lock held): invalidations since a mark. */
uint64_t      axon_memmon_events(void);

#endif
