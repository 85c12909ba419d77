/*
 * Memory pool of fixed-size elements: a free list refilled a chunk at a time,
 * so the data path gets and puts elements without calling malloc.
 * Not thread-safe: a pool belongs to one worker.
 */
#ifndef AXON_MPOOL_H
#define AXON_MPOOL_H

#include <stddef.h>
#include "axon_status.h"

typedef struct axon_mpool_elem {
    struct axon_mpool_elem *next;
} axon_mpool_elem_t;

typedef struct axon_mpool_chunk axon_mpool_chunk_t;

typedef struct axon_mpool {
    axon_mpool_elem_t  *free_list;
    axon_mpool_chunk_t *chunks;
    size_t              elem_size;       /* rounded to 16 bytes */
    unsigned            elems_per_chunk;
    unsigned            max_elems;       /* 0 = unlimited */
    unsigned            num_elems;
    unsigned            num_free;
    const char         *name;            /* for leak reports */
} axon_mpool_t;

axon_status_t axon_mpool_init(axon_mpool_t *mp, const char *name, size_t elem_size,
                              unsigned elems_per_chunk, unsigned max_elems);
/* Warns if elements are still out (a leak), then frees every chunk. */
void          axon_mpool_cleanup(axon_mpool_t *mp);
void         *axon_mpool_get_grow(axon_mpool_t *mp);

static inline void *axon_mpool_get(axon_mpool_t *mp)
{
    axon_mpool_elem_t *elem = mp->free_list;
    if (__builtin_expect(elem == NULL, 0)) {
        return axon_mpool_get_grow(mp);
    }
    mp->free_list = elem->next;
    --mp->num_free;
    return elem;
}

static inline void axon_mpool_put(axon_mpool_t *mp, void *obj)
{
    axon_mpool_elem_t *elem = (axon_mpool_elem_t *)obj;
    elem->next    = mp->free_list;
    mp->free_list = elem;
    ++mp->num_free;
}

#endif
