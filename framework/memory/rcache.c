/*
 * Registration cache (see rcache.h). Regions sit in an array sorted by
 * address (they never overlap, so ends are sorted too); lookups are binary
 * searches. Everything is guarded by the memory monitor's lock, which its
 * thread holds while it invalidates. Nothing is allocated, freed or
 * deregistered with that lock held (memmon.h says why): the index grows
 * before the lock is taken and dropped regions wait on a garbage list.
 * The cache's users (the workers of one memory domain) may call from
 * several threads: every change happens under the monitor's lock, and a
 * collect takes the garbage whole under it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "list.h"
#include "log.h"
#include "memmon.h"
#include "rcache.h"

/* Registration attempts that an invalidation may interrupt before giving up caching. */
#define AXON_RCACHE_RETRIES 3

typedef struct axon_rcache_entry {
    axon_rcache_region_t super;
    /* rcache->unused (LRU order) while indexed and unused, else a garbage list */
    axon_list_link_t     link;
    unsigned             refs;
    uint8_t              indexed;  /* in rcache->index: lookups find it */
} axon_rcache_entry_t;

struct axon_rcache {
    char                      name[64];
    const axon_rcache_ops_t  *ops;
    void                     *arg;
    unsigned                  max_unused;
    axon_memmon_sub_t        *sub;
    axon_rcache_entry_t     **index;
    size_t                    count;
    size_t                    cap;
    axon_list_link_t          unused;
    unsigned                  nunused;
    axon_list_link_t          garbage;
    int                       has_garbage;   /* read without the lock by collect */
    axon_rcache_stats_t       stats;
};

/* ------------------------------------------------------------ the index */

/* First region ending after addr (count if none). */
static size_t axon_rcache_search(const axon_rcache_t *rcache, uintptr_t addr)
{
    size_t lo = 0, hi = rcache->count, mid;

    while (lo < hi) {
        mid = (lo + hi) / 2;
        if (rcache->index[mid]->super.end <= addr) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

static void axon_rcache_index_insert(axon_rcache_t *rcache, axon_rcache_entry_t *entry)
{
    size_t pos = axon_rcache_search(rcache, entry->super.start);

    memmove(&rcache->index[pos + 1], &rcache->index[pos],
            (rcache->count - pos) * sizeof(*rcache->index));
    rcache->index[pos] = entry;
    ++rcache->count;
    entry->indexed = 1;
}

static void axon_rcache_add_garbage(axon_rcache_t *rcache, axon_rcache_entry_t *entry)
{
    axon_list_add_tail(&rcache->garbage, &entry->link);
    __atomic_store_n(&rcache->has_garbage, 1, __ATOMIC_RELEASE);
}

/* Take the region at pos out of lookups; unused, it goes to the garbage. */
static void axon_rcache_drop_at(axon_rcache_t *rcache, size_t pos)
{
    axon_rcache_entry_t *entry = rcache->index[pos];

    memmove(&rcache->index[pos], &rcache->index[pos + 1],
            (rcache->count - pos - 1) * sizeof(*rcache->index));
    --rcache->count;
    entry->indexed = 0;
    if (entry->refs == 0) {
        axon_list_del(&entry->link);   /* from the unused list */
        --rcache->nunused;
        axon_rcache_add_garbage(rcache, entry);
    }
}

/* Drop every region overlapping [start, end). */
static unsigned axon_rcache_drop_range(axon_rcache_t *rcache, uintptr_t start, uintptr_t end)
{
    size_t pos = axon_rcache_search(rcache, start);
    unsigned dropped = 0;

    while ((pos < rcache->count) && (rcache->index[pos]->super.start < end)) {
        axon_rcache_drop_at(rcache, pos);
        ++dropped;
    }
    return dropped;
}

/*
 * Room for one more region, most likely: the index grows outside the
 * monitor lock (nothing is allocated under it). Another user may take the
 * room before we insert; the insert checks again.
 */
static axon_status_t axon_rcache_reserve(axon_rcache_t *rcache)
{
    axon_rcache_entry_t **index, **old = NULL;
    size_t cap;

    axon_memmon_lock();
    cap = (rcache->count < rcache->cap) ? 0 : (rcache->cap ? rcache->cap * 2 : 16);
    axon_memmon_unlock();
    if (cap == 0) {
        return AXON_OK;
    }
    index = malloc(cap * sizeof(*index));
    if (index == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    axon_memmon_lock();
    if (rcache->cap < cap) {   /* nobody grew it meanwhile */
        if (rcache->count > 0) {
            memcpy(index, rcache->index, rcache->count * sizeof(*index));
        }
        old           = rcache->index;
        rcache->index = index;
        rcache->cap   = cap;
        index         = NULL;
    }
    axon_memmon_unlock();
    free(index);
    free(old);
    return AXON_OK;
}

/* ------------------------------------------------------------ garbage */

/* Lock held: move the garbage to a list of the caller's. */
static void axon_rcache_take_garbage(axon_rcache_t *rcache, axon_list_link_t *list)
{
    axon_list_link_t *head = &rcache->garbage;

    axon_list_init(list);
    if (!axon_list_is_empty(head)) {
        list->next       = head->next;
        list->prev       = head->prev;
        list->next->prev = list;
        list->prev->next = list;
        axon_list_init(head);
    }
    __atomic_store_n(&rcache->has_garbage, 0, __ATOMIC_RELAXED);
}

/* Lock not held: deregister and free. */
static void axon_rcache_free_list(axon_rcache_t *rcache, axon_list_link_t *list)
{
    axon_rcache_entry_t *entry, *tmp;
    unsigned n = 0;

    axon_list_for_each_safe(entry, tmp, list, link) {
        axon_list_del(&entry->link);
        rcache->ops->dereg(rcache->arg, entry->super.memh);
        free(entry);
        ++n;
    }
    if (n > 0) {
        axon_memmon_lock();
        rcache->stats.deregs += n;
        axon_memmon_unlock();
    }
}

void axon_rcache_collect(axon_rcache_t *rcache)
{
    axon_list_link_t garbage;

    if (!__atomic_load_n(&rcache->has_garbage, __ATOMIC_ACQUIRE)) {
        return;
    }
    axon_memmon_lock();
    axon_rcache_take_garbage(rcache, &garbage);
    axon_memmon_unlock();
    axon_rcache_free_list(rcache, &garbage);
}

static void axon_rcache_invalidate(void *arg, uintptr_t start, uintptr_t end)
{
    axon_rcache_t *rcache = arg;

    rcache->stats.invalidated += axon_rcache_drop_range(rcache, start, end);
}

/* ------------------------------------------------------------ lifetime */

axon_status_t axon_rcache_create(const axon_rcache_params_t *params, axon_rcache_t **rcache_p)
{
    axon_rcache_t *rcache = calloc(1, sizeof(*rcache));
    axon_status_t status;

    if (rcache == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    snprintf(rcache->name, sizeof(rcache->name), "%s", params->name);
    rcache->ops        = params->ops;
    rcache->arg        = params->arg;
    rcache->max_unused = params->max_unused;
    axon_list_init(&rcache->unused);
    axon_list_init(&rcache->garbage);
    status = axon_memmon_subscribe(axon_rcache_invalidate, rcache, &rcache->sub);
    if (status == AXON_ERR_UNSUPPORTED) {
        /* Every get registers and every put deregisters, as without a cache. */
        axon_debug("rcache %s: memory cannot be watched here: not caching", rcache->name);
        rcache->sub = NULL;
    } else if (status != AXON_OK) {
        free(rcache);
        return status;
    }
    *rcache_p = rcache;
    return AXON_OK;
}

void axon_rcache_destroy(axon_rcache_t *rcache)
{
    axon_rcache_entry_t *entry;
    unsigned in_use = 0;

    if (rcache->sub != NULL) {
        axon_memmon_unsubscribe(rcache->sub);   /* no invalidation runs past this */
    }
    while (rcache->count > 0) {
        entry = rcache->index[0];
        axon_rcache_drop_at(rcache, 0);
        if (entry->refs > 0) {
            ++in_use;   /* a caller's leak: deregistered all the same */
            axon_rcache_add_garbage(rcache, entry);
        }
    }
    if (in_use > 0) {
        axon_warn("rcache %s: %u regions still in use at destroy", rcache->name, in_use);
    }
    axon_rcache_collect(rcache);
    free(rcache->index);
    free(rcache);
}

int axon_rcache_is_caching(const axon_rcache_t *rcache)
{
    return rcache->sub != NULL;
}

void axon_rcache_get_stats(axon_rcache_t *rcache, axon_rcache_stats_t *stats)
{
    axon_memmon_lock();
    *stats = rcache->stats;
    axon_memmon_unlock();
}

/* ------------------------------------------------------------ get and put */

static uintptr_t axon_rcache_page_mask(void)
{
    static uintptr_t mask;

    if (mask == 0) {
        mask = (uintptr_t)sysconf(_SC_PAGESIZE) - 1;
    }
    return mask;
}

/* Lock held: a region holding [start, end), taken; NULL if none. */
static axon_rcache_entry_t *axon_rcache_lookup(axon_rcache_t *rcache, uintptr_t start,
                                               uintptr_t end)
{
    size_t pos = axon_rcache_search(rcache, start);
    axon_rcache_entry_t *entry;

    if ((pos == rcache->count) || (rcache->index[pos]->super.start > start) ||
        (rcache->index[pos]->super.end < end)) {
        return NULL;
    }
    entry = rcache->index[pos];
    if (entry->refs++ == 0) {
        axon_list_del(&entry->link);   /* from the unused list */
        --rcache->nunused;
    }
    return entry;
}

/* Lock held: grow [start, end) over the regions it touches, so one region replaces them. */
static void axon_rcache_cover(const axon_rcache_t *rcache, uintptr_t *start, uintptr_t *end)
{
    size_t pos = axon_rcache_search(rcache, *start);

    for (; (pos < rcache->count) && (rcache->index[pos]->super.start < *end); ++pos) {
        if (rcache->index[pos]->super.start < *start) {
            *start = rcache->index[pos]->super.start;
        }
        if (rcache->index[pos]->super.end > *end) {
            *end = rcache->index[pos]->super.end;
        }
    }
}

static axon_status_t axon_rcache_register(axon_rcache_t *rcache, axon_rcache_entry_t *entry,
                                          uintptr_t start, uintptr_t end)
{
    axon_status_t status = rcache->ops->reg(rcache->arg, (void *)start, end - start,
                                            &entry->super.memh);

    if (status == AXON_OK) {
        entry->super.start = start;
        entry->super.end   = end;
    }
    return status;
}

/* A registration for this use only (memory that cannot be watched). */
static axon_status_t axon_rcache_get_uncached(axon_rcache_t *rcache, axon_rcache_entry_t *entry,
                                              uintptr_t start, uintptr_t end)
{
    axon_status_t status = axon_rcache_register(rcache, entry, start, end);

    if (status != AXON_OK) {
        free(entry);
        return status;
    }
    entry->refs = 1;
    axon_memmon_lock();
    ++rcache->stats.regs;
    ++rcache->stats.uncached;
    axon_memmon_unlock();
    return AXON_OK;
}

/* Register the miss [start, end) (or more, over the regions it touches) and index it. */
static axon_status_t axon_rcache_miss(axon_rcache_t *rcache, uintptr_t start, uintptr_t end,
                                      axon_rcache_entry_t **entry_p)
{
    axon_rcache_entry_t *entry = calloc(1, sizeof(*entry));
    uintptr_t rstart, rend;
    axon_status_t status;
    uint64_t events;
    int attempt;

    if (entry == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    if (axon_memmon_watch(start, end - start) != AXON_OK) {
        *entry_p = entry;
        return axon_rcache_get_uncached(rcache, entry, start, end);
    }
    for (attempt = 0; attempt < AXON_RCACHE_RETRIES; ++attempt) {
        status = axon_rcache_reserve(rcache);
        if (status != AXON_OK) {
            break;
        }
        axon_memmon_lock();
        rstart = start;
        rend   = end;
        axon_rcache_cover(rcache, &rstart, &rend);
        events = axon_memmon_events();
        axon_memmon_unlock();
        /* The covered regions were watched and registered: their pages are there. */
        status = axon_rcache_register(rcache, entry, rstart, rend);
        if ((status != AXON_OK) && ((rstart != start) || (rend != end))) {
            status = axon_rcache_register(rcache, entry, start, end);
        }
        if (status != AXON_OK) {
            break;
        }
        axon_memmon_lock();
        ++rcache->stats.regs;
        if (axon_memmon_events() == events) {
            /* Nothing went away meanwhile: the new region replaces what it covers. */
            axon_rcache_drop_range(rcache, entry->super.start, entry->super.end);
        }
        if ((axon_memmon_events() == events) && (rcache->count < rcache->cap)) {
            axon_rcache_index_insert(rcache, entry);
            entry->refs = 1;
            ++rcache->stats.misses;
            axon_memmon_unlock();
            *entry_p = entry;
            return AXON_OK;
        }
        axon_memmon_unlock();
        /* Some memory went away while we registered (maybe ours), or another
         * user took the room we made: start over. */
        rcache->ops->dereg(rcache->arg, entry->super.memh);
        axon_memmon_lock();
        ++rcache->stats.deregs;
        axon_memmon_unlock();
    }
    if (status != AXON_OK) {
        free(entry);
        return status;
    }
    *entry_p = entry;
    return axon_rcache_get_uncached(rcache, entry, start, end);
}

axon_status_t axon_rcache_get(axon_rcache_t *rcache, void *addr, size_t length,
                              axon_rcache_region_t **region_p)
{
    uintptr_t mask = axon_rcache_page_mask();
    uintptr_t start = (uintptr_t)addr & ~mask;
    uintptr_t end = ((uintptr_t)addr + (length ? length : 1) + mask) & ~mask;
    axon_rcache_entry_t *entry;
    axon_status_t status;

    if (end < start) {
        axon_error("rcache %s: range %p+%zu wraps around", rcache->name, addr, length);
        return AXON_ERR_INVALID_PARAM;
    }
    axon_memmon_lock();
    entry = axon_rcache_lookup(rcache, start, end);
    if (entry != NULL) {
        ++rcache->stats.hits;
    }
    axon_memmon_unlock();
    axon_rcache_collect(rcache);
    if (entry == NULL) {
        status = axon_rcache_miss(rcache, start, end, &entry);
        if (status != AXON_OK) {
            return status;
        }
    }
    *region_p = &entry->super;
    return AXON_OK;
}

void axon_rcache_put(axon_rcache_t *rcache, axon_rcache_region_t *region)
{
    axon_rcache_entry_t *entry = (axon_rcache_entry_t *)region;

    axon_memmon_lock();
    if (--entry->refs == 0) {
        if (!entry->indexed) {
            axon_rcache_add_garbage(rcache, entry);
        } else {
            axon_list_add_tail(&rcache->unused, &entry->link);
            ++rcache->nunused;
            while (rcache->nunused > rcache->max_unused) {
                entry = axon_list_first(&rcache->unused, axon_rcache_entry_t, link);
                axon_rcache_drop_at(rcache, axon_rcache_search(rcache, entry->super.start));
            }
        }
    }
    axon_memmon_unlock();
    axon_rcache_collect(rcache);
}
