/*
 * Transient layout keys, cached by layout (umr.h). An entry owns a copy of
 * its layout, a reference on the registration cache's region of its span,
 * and the indirect key filled over that region. A hit checks the span
 * against the registration cache: the same region means the memory is the
 * one the key was made on; another region (the old one was dropped when the
 * memory went back to the system) means the entry is stale and a new one is
 * made (the stale one goes with its last user).
 */
#include <stdlib.h>
#include <string.h>
#include "list.h"
#include "log.h"
#include "sys.h"
#include "umr.h"

#define AXON_UMR_CACHE_BUCKETS    64
#define AXON_UMR_CACHE_MAX_UNUSED 32
#define AXON_UMR_CACHE_ACCESS     (AXON_DEV_ACCESS_LOCAL_WRITE | AXON_DEV_ACCESS_REMOTE_READ)

struct axon_umr_cached {
    axon_list_link_t        link;       /* its bucket; unlinked when stale */
    axon_list_link_t        lru;        /* cache->unused while refcount is 0 */
    uint64_t                hash;
    unsigned                refcount;
    int                     hashed;
    axon_md_layout_t        layout;     /* entries: the copy after the struct */
    axon_rcache_region_t   *region;
    axon_umr_mkey_t         mkey;
};

struct axon_umr_cache {
    axon_umr_t       *umr;
    axon_rcache_t    *rcache;
    pthread_mutex_t   lock;
    axon_list_link_t  buckets[AXON_UMR_CACHE_BUCKETS];
    axon_list_link_t  unused;
    unsigned          num_unused;
};

axon_status_t axon_umr_cache_create(axon_umr_t *umr, axon_rcache_t *rcache,
                                    axon_umr_cache_t **cache_p)
{
    axon_umr_cache_t *cache = calloc(1, sizeof(*cache));
    unsigned i;

    if (cache == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    cache->umr    = umr;
    cache->rcache = rcache;
    pthread_mutex_init(&cache->lock, NULL);
    for (i = 0; i < AXON_UMR_CACHE_BUCKETS; ++i) {
        axon_list_init(&cache->buckets[i]);
    }
    axon_list_init(&cache->unused);
    *cache_p = cache;
    return AXON_OK;
}

static uint64_t axon_umr_layout_hash(const axon_md_layout_t *l)
{
    return axon_sys_hash64(l->entries, l->num_entries * sizeof(*l->entries),
                           l->base ^ (l->size << 17) ^ (l->repeat << 41));
}

static int axon_umr_layout_equal(const axon_md_layout_t *a, const axon_md_layout_t *b)
{
    return (a->base == b->base) && (a->size == b->size) && (a->repeat == b->repeat) &&
           (a->num_entries == b->num_entries) &&
           (memcmp(a->entries, b->entries, a->num_entries * sizeof(*a->entries)) == 0);
}

/* Caller holds the lock; entry is unused or stale. */
static void axon_umr_cached_free(axon_umr_cache_t *cache, axon_umr_cached_t *e)
{
    if (e->hashed) {
        axon_list_del(&e->link);
    }
    axon_umr_mkey_release(cache->umr, &e->mkey);
    axon_rcache_put(cache->rcache, e->region);
    free(e);
}

/* A new entry for layout over region (whose reference it takes); caller holds the lock. */
static axon_status_t axon_umr_cached_new(axon_umr_cache_t *cache, const axon_md_layout_t *layout,
                                         uint64_t hash, axon_rcache_region_t *region,
                                         axon_umr_cached_t **entry_p)
{
    size_t bytes = layout->num_entries * sizeof(*layout->entries);
    axon_umr_cached_t *e = malloc(sizeof(*e) + bytes);
    axon_status_t status;

    if (e == NULL) {
        axon_rcache_put(cache->rcache, region);
        return AXON_ERR_NO_MEMORY;
    }
    status = axon_umr_mkey_make(cache->umr, layout, AXON_UMR_CACHE_ACCESS, region->memh,
                                &e->mkey);
    if (status != AXON_OK) {
        axon_rcache_put(cache->rcache, region);
        free(e);
        return status;
    }
    memcpy(e + 1, layout->entries, bytes);
    e->layout         = *layout;
    e->layout.entries = (const axon_md_layout_entry_t *)(e + 1);
    e->hash           = hash;
    e->refcount       = 1;
    e->hashed         = 1;
    e->region         = region;
    axon_list_add_tail(&cache->buckets[hash % AXON_UMR_CACHE_BUCKETS], &e->link);
    *entry_p = e;
    return AXON_OK;
}

static axon_umr_cached_t *axon_umr_cache_find(axon_umr_cache_t *cache,
                                              const axon_md_layout_t *layout, uint64_t hash)
{
    axon_umr_cached_t *e;

    axon_list_for_each(e, &cache->buckets[hash % AXON_UMR_CACHE_BUCKETS], link) {
        if ((e->hash == hash) && axon_umr_layout_equal(&e->layout, layout)) {
            return e;
        }
    }
    return NULL;
}

axon_status_t axon_umr_cache_get(axon_umr_cache_t *cache, const axon_md_layout_t *layout,
                                 axon_umr_cached_t **entry_p)
{
    uint64_t hash = axon_umr_layout_hash(layout);
    axon_rcache_region_t *region;
    axon_umr_cached_t *e;
    axon_status_t status;

    if (!axon_umr_layout_fits(cache->umr, layout)) {
        return AXON_ERR_UNSUPPORTED;
    }
    status = axon_rcache_get(cache->rcache, (void *)(uintptr_t)layout->span_addr,
                             layout->span_length, &region);
    if (status != AXON_OK) {
        return status;
    }
    pthread_mutex_lock(&cache->lock);
    e = axon_umr_cache_find(cache, layout, hash);
    if ((e != NULL) && (e->region == region)) {
        axon_rcache_put(cache->rcache, region);   /* the entry holds one already */
        if (e->refcount++ == 0) {
            axon_list_del(&e->lru);
            --cache->num_unused;
        }
        *entry_p = e;
        pthread_mutex_unlock(&cache->lock);
        return AXON_OK;
    }
    if (e != NULL) {
        /* stale: its span was registered again since; out of the hash, freed when unused */
        axon_list_del(&e->link);
        e->hashed = 0;
        if (e->refcount == 0) {
            axon_list_del(&e->lru);
            --cache->num_unused;
            axon_umr_cached_free(cache, e);
        }
    }
    status = axon_umr_cached_new(cache, layout, hash, region, entry_p);
    pthread_mutex_unlock(&cache->lock);
    return status;
}

void axon_umr_cache_put(axon_umr_cache_t *cache, axon_umr_cached_t *e)
{
    axon_umr_cached_t *old;

    pthread_mutex_lock(&cache->lock);
    if (--e->refcount == 0) {
        if (!e->hashed) {
            axon_umr_cached_free(cache, e);
        } else {
            axon_list_add_tail(&cache->unused, &e->lru);
            if (++cache->num_unused > AXON_UMR_CACHE_MAX_UNUSED) {
                old = axon_list_first(&cache->unused, axon_umr_cached_t, lru);
                axon_list_del(&old->lru);
                --cache->num_unused;
                axon_umr_cached_free(cache, old);
            }
        }
    }
    pthread_mutex_unlock(&cache->lock);
}

uint32_t axon_umr_cached_rkey(const axon_umr_cached_t *entry)
{
    return entry->mkey.mr->rkey;
}

uint32_t axon_umr_cached_lkey(const axon_umr_cached_t *entry)
{
    return entry->mkey.mr->lkey;
}

void axon_umr_cache_destroy(axon_umr_cache_t *cache)
{
    axon_umr_cached_t *e, *tmp;
    unsigned i;

    for (i = 0; i < AXON_UMR_CACHE_BUCKETS; ++i) {
        axon_list_for_each_safe(e, tmp, &cache->buckets[i], link) {
            if (e->refcount != 0) {
                axon_warn("umr: a layout key still in use at close (%u users)", e->refcount);
            }
            axon_umr_cached_free(cache, e);
        }
    }
    pthread_mutex_destroy(&cache->lock);
    free(cache);
}
