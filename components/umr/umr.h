/*
 * components/umr: the memory-domain service that turns a layout
 * (component.h's axon_md_layout_t) into one device key, by user-mode
 * memory registration (seed §8.8): an indirect key whose entries name one
 * registration of the memory the pieces span. A put or get through the
 * key is one RDMA operation, however many pieces it touches.
 *
 * It serves the verbs family's memory domain (rc_md.c: rc, rdmacm, dc),
 * whose protection domain the keys belong to; fills run on a QP of its own,
 * connected to itself, one at a time, waited for (a mapping is made once
 * and used many times; the caller is never on a fast path).
 */
#ifndef AXON_UMR_H
#define AXON_UMR_H

#include <pthread.h>
#include "component.h"
#include "rcache.h"
#include "verbs_common.h"

typedef struct axon_umr axon_umr_t;

/*
 * An indirect key over a layout. A layout longer than one key takes
 * (max_klm_list_size) is split into parts of at most that many entries, a
 * key each, under one outer key naming them (seed §8.8: an entry may be an
 * indirect key, up to max_umr_recursion_depth levels).
 */
typedef struct axon_umr_mkey {
    axon_dev_mr_t  *mr;          /* what peers and local operations name */
    uint32_t        num_parts;   /* 0: mr's entries name the span itself */
    axon_dev_mr_t **parts;
} axon_umr_mkey_t;

/* A layout's key: the span's registration and the indirect key over it */
typedef struct axon_umr_key {
    axon_dev_mr_t  *span;
    axon_umr_mkey_t mkey;
} axon_umr_key_t;

/*
 * The service on dev (its PD). AXON_ERR_UNSUPPORTED (with the reason at
 * debug level) when the device has no user-mode memory registration.
 */
axon_status_t axon_umr_open(axon_verbs_dev_t *dev, axon_umr_t **umr_p);
void          axon_umr_close(axon_umr_t *umr);

/*
 * A key over layout granting access (AXON_DEV_ACCESS_*), its range
 * [layout->base, + layout->size). AXON_ERR_UNSUPPORTED when the layout has
 * more entries than the device takes in two levels of keys.
 */
axon_status_t axon_umr_key_create(axon_umr_t *umr, const axon_md_layout_t *layout, int access,
                                  axon_umr_key_t *key);
/* Invalidate and release: later accesses through the key fail at the device. */
void          axon_umr_key_destroy(axon_umr_t *umr, axon_umr_key_t *key);

/* The parts: does the device take layout (in at most two levels of keys);
 * an indirect key over layout whose entries are all in span's memory,
 * filled and waited for. */
int           axon_umr_layout_fits(const axon_umr_t *umr, const axon_md_layout_t *layout);
axon_status_t axon_umr_mkey_make(axon_umr_t *umr, const axon_md_layout_t *layout, int access,
                                 axon_dev_mr_t *span, axon_umr_mkey_t *mkey);
void          axon_umr_mkey_release(axon_umr_t *umr, axon_umr_mkey_t *mkey);

/*
 * Transient keys (a rendezvous sender's layout), cached by layout (its base,
 * size, repeat and entries), so a layout sent again reuses its key. The
 * span comes from rcache, whose regions' memh is the device MR (rc_md.c's):
 * a key whose span the registration cache dropped (memory given back to the
 * system) is made again, never reused. Unused keys are kept up to a bound,
 * least recently used first out. Any thread.
 */
typedef struct axon_umr_cache  axon_umr_cache_t;
typedef struct axon_umr_cached axon_umr_cached_t;

axon_status_t axon_umr_cache_create(axon_umr_t *umr, axon_rcache_t *rcache,
                                    axon_umr_cache_t **cache_p);
void          axon_umr_cache_destroy(axon_umr_cache_t *cache);
/* A key over layout, held until put; AXON_ERR_UNSUPPORTED as axon_umr_key_create. */
axon_status_t axon_umr_cache_get(axon_umr_cache_t *cache, const axon_md_layout_t *layout,
                                 axon_umr_cached_t **entry_p);
void          axon_umr_cache_put(axon_umr_cache_t *cache, axon_umr_cached_t *entry);
uint32_t      axon_umr_cached_rkey(const axon_umr_cached_t *entry);
uint32_t      axon_umr_cached_lkey(const axon_umr_cached_t *entry);

#endif
