/* Memory pool: grows by chunks; elements return to a free list, never to malloc. */
#include <stdlib.h>
#include "mpool.h"
#include "log.h"

struct axon_mpool_chunk {
    axon_mpool_chunk_t *next;
    /* Padding keeps elements 16-byte aligned after the header. */
    void               *pad;
    char                elems[];
};

axon_status_t axon_mpool_init(axon_mpool_t *mp, const char *name, size_t elem_size,
                              unsigned elems_per_chunk, unsigned max_elems)
{
    if ((elem_size == 0) || (elems_per_chunk == 0)) {
        axon_error("mpool '%s': invalid element size %zu or chunk count %u", name,
                   elem_size, elems_per_chunk);
        return AXON_ERR_INVALID_PARAM;
    }
    if (elem_size < sizeof(axon_mpool_elem_t)) {
        elem_size = sizeof(axon_mpool_elem_t);
    }
    mp->free_list       = NULL;
    mp->chunks          = NULL;
    mp->elem_size       = (elem_size + 15) & ~(size_t)15;
    mp->elems_per_chunk = elems_per_chunk;
    mp->max_elems       = max_elems;
    mp->num_elems       = 0;
    mp->num_free        = 0;
    mp->name            = name;
    return AXON_OK;
}

void axon_mpool_cleanup(axon_mpool_t *mp)
{
    axon_mpool_chunk_t *chunk;

    if (mp->num_free != mp->num_elems) {
        axon_warn("mpool '%s': %u of %u elements were not returned", mp->name,
                  mp->num_elems - mp->num_free, mp->num_elems);
    }
    while ((chunk = mp->chunks) != NULL) {
        mp->chunks = chunk->next;
        free(chunk);
    }
    mp->free_list = NULL;
    mp->num_elems = mp->num_free = 0;
}

void *axon_mpool_get_grow(axon_mpool_t *mp)
{
    axon_mpool_chunk_t *chunk;
    unsigned i, count = mp->elems_per_chunk;

    if (mp->max_elems != 0) {
        if (mp->num_elems >= mp->max_elems) {
            return NULL;
        }
        if (count > mp->max_elems - mp->num_elems) {
            count = mp->max_elems - mp->num_elems;
        }
    }

    chunk = malloc(sizeof(*chunk) + (size_t)count * mp->elem_size);
    if (chunk == NULL) {
        axon_error("mpool '%s': failed to allocate %u elements of %zu bytes", mp->name,
                   count, mp->elem_size);
        return NULL;
    }
    chunk->next = mp->chunks;
    mp->chunks  = chunk;
    for (i = 0; i < count; ++i) {
        axon_mpool_put(mp, chunk->elems + (size_t)i * mp->elem_size);
    }
    mp->num_elems += count;
    return axon_mpool_get(mp);
}
