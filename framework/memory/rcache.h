/*
 * Registration cache: a device registration made for one zero-copy
 * operation is kept for the next one on the same pages, so sending the
 * same buffer a thousand times registers it once. Regions are page
 * aligned and never overlap: a request that straddles cached regions gets
 * one region covering all of them. Unused regions are kept up to a bound,
 * least recently used first out.
 *
 * Correct when the application frees memory: every region's pages are
 * watched by the memory monitor (memmon.h), and a range given back to the
 * kernel leaves the cache before the unmap returns. Memory that cannot be
 * watched (e.g. a private file mapping) is registered for the one use, as
 * without a cache. Regions freed by the monitor are deregistered at the
 * next get, put or collect, by a user of the cache rather than the
 * monitor's thread. Several threads may share one cache (the workers of a
 * memory domain): every change is made under the monitor's lock.
 */
#ifndef AXON_RCACHE_H
#define AXON_RCACHE_H

#include <stddef.h>
#include <stdint.h>
#include "axon_status.h"

typedef struct axon_rcache axon_rcache_t;

typedef struct axon_rcache_ops {
    /* Register [addr, addr + length) with the device; *memh_p goes into the region. */
    axon_status_t (*reg)(void *arg, void *addr, size_t length, void **memh_p);
    void          (*dereg)(void *arg, void *memh);
} axon_rcache_ops_t;

typedef struct axon_rcache_params {
    const char              *name;         /* for log lines: "rc softib0:1" */
    const axon_rcache_ops_t *ops;
    void                    *arg;          /* first argument of the ops */
    unsigned                 max_unused;   /* unused regions kept at most */
} axon_rcache_params_t;

typedef struct axon_rcache_region {
    uintptr_t start;   /* page aligned: the registered range is [start, end) */
    uintptr_t end;
    void     *memh;    /* what ops->reg gave */
} axon_rcache_region_t;

typedef struct axon_rcache_stats {
    uint64_t hits;
    uint64_t misses;
    uint64_t regs;          /* ops->reg calls */
    uint64_t deregs;        /* ops->dereg calls */
    uint64_t invalidated;   /* regions dropped because their memory went away */
    uint64_t uncached;      /* registrations of memory that cannot be watched */
} axon_rcache_stats_t;

/* Where memory cannot be watched the cache registers per use (axon_rcache_is_caching). */
axon_status_t axon_rcache_create(const axon_rcache_params_t *params, axon_rcache_t **rcache_p);
int           axon_rcache_is_caching(const axon_rcache_t *rcache);
/* Deregisters everything; regions still in use are reported (a caller's leak). */
void          axon_rcache_destroy(axon_rcache_t *rcache);

/* A region holding [addr, addr + length), registered, held until axon_rcache_put. */
axon_status_t axon_rcache_get(axon_rcache_t *rcache, void *addr, size_t length,
                              axon_rcache_region_t **region_p);
void          axon_rcache_put(axon_rcache_t *rcache, axon_rcache_region_t *region);

/*
 * Deregister the regions the monitor dropped since the last get or put;
 * for a user's progress, so unmapped memory does not stay pinned while
 * no zero-copy operation runs. One load when there is nothing to do.
 */
void          axon_rcache_collect(axon_rcache_t *rcache);

void          axon_rcache_get_stats(axon_rcache_t *rcache, axon_rcache_stats_t *stats);

#endif
