/*
 * Layouts: checked here once per operation, then walked by a cursor in
 * packed order. Strided levels are arithmetic (no state); an iov level
 * keeps the piece it is in, so a walk forward in fragments costs one step
 * per piece in all.
 */
#include <stdlib.h>
#include <string.h>
#include "layout.h"
#include "log.h"

/* ---------------------------------------------------------------- checks */

/* What a check learns of one level: its size, its extent, whether its pieces are disjoint. */
typedef struct {
    size_t    size;
    int       empty;      /* no byte at all: lo/hi mean nothing */
    ptrdiff_t lo, hi;     /* [lo, hi) holds every byte, relative to the level's base */
    int       disjoint;   /* proven not to overlap (else the caller looks piece by piece) */
} axon_layout_facts_t;

static inline void axon_layout_piece(const axon_layout_t *layout, size_t i, ptrdiff_t *offset,
                                     size_t *length)
{
    if (layout->kind == AXON_LAYOUT_ABS_IOV) {
        const axon_iov_t *iov = (const axon_iov_t *)(const void *)layout->iov.pieces;

        *offset = (ptrdiff_t)(uintptr_t)iov[i].buffer;
        *length = iov[i].length;
    } else {
        *offset = layout->iov.pieces[i].offset;
        *length = layout->iov.pieces[i].length;
    }
}

static axon_status_t axon_layout_check_iov(const axon_layout_t *layout, axon_layout_facts_t *f,
                                           const char *func)
{
    int ascending = 1, descending = 1;
    ptrdiff_t offset, end, prev_lo = 0, prev_hi = 0;
    size_t i, length;

    if ((layout->iov.pieces == NULL) && (layout->iov.count > 0)) {
        axon_error("%s: iov layout with NULL pieces and count %zu", func, layout->iov.count);
        return AXON_ERR_INVALID_PARAM;
    }
    for (i = 0; i < layout->iov.count; ++i) {
        axon_layout_piece(layout, i, &offset, &length);
        if ((length > PTRDIFF_MAX) || __builtin_add_overflow(offset, (ptrdiff_t)length, &end)) {
            axon_error("%s: iov layout piece %zu (offset %td, length %zu) overflows ptrdiff_t",
                       func, i, offset, length);
            return AXON_ERR_INVALID_PARAM;
        }
        if (length > SIZE_MAX - f->size) {
            axon_error("%s: iov layout sizes overflow size_t at piece %zu (length %zu)", func,
                       i, length);
            return AXON_ERR_INVALID_PARAM;
        }
        f->size += length;
        if (length == 0) {
            continue;
        }
        if (!f->empty) {
            ascending  = ascending && (offset >= prev_hi);
            descending = descending && (end <= prev_lo);
        }
        f->lo    = (f->empty || (offset < f->lo)) ? offset : f->lo;
        f->hi    = (f->empty || (end > f->hi)) ? end : f->hi;
        f->empty = 0;
        prev_lo  = offset;
        prev_hi  = end;
    }
    f->disjoint = ascending || descending;
    return AXON_OK;
}

static axon_status_t axon_layout_check_level(const axon_layout_t *layout, int depth,
                                             axon_layout_facts_t *f, const char *func);

static axon_status_t axon_layout_check_strided(const axon_layout_t *layout, int depth,
                                               axon_layout_facts_t *f, const char *func)
{
    size_t count = layout->strided.count;
    ptrdiff_t stride = layout->strided.stride, span, lo, hi, abs_stride;
    axon_layout_facts_t block = {0, 1, 0, 0, 1};
    axon_status_t status;

    if (layout->strided.block != NULL) {
        if (depth >= 2) {
            axon_error("%s: layout nested %d levels deep (at most 2)", func, depth + 1);
            return AXON_ERR_INVALID_PARAM;
        }
        status = axon_layout_check_level(layout->strided.block, depth + 1, &block, func);
        if (status != AXON_OK) {
            return status;
        }
    } else {
        if (layout->strided.block_length > PTRDIFF_MAX) {
            axon_error("%s: strided layout block_length %zu overflows ptrdiff_t", func,
                       layout->strided.block_length);
            return AXON_ERR_INVALID_PARAM;
        }
        block.size  = layout->strided.block_length;
        block.empty = (block.size == 0);
        block.hi    = (ptrdiff_t)block.size;
    }
    if (stride == PTRDIFF_MIN) {
        axon_error("%s: strided layout stride %td has no absolute value", func, stride);
        return AXON_ERR_INVALID_PARAM;
    }
    if ((block.size > 0) && (count > SIZE_MAX / block.size)) {
        axon_error("%s: strided layout count %zu x %zu-byte blocks overflows size_t", func, count,
                   block.size);
        return AXON_ERR_INVALID_PARAM;
    }
    f->size = count * block.size;
    if ((count == 0) || block.empty) {
        return AXON_OK;  /* empty: nothing to place, nothing to overlap */
    }
    if ((count - 1 > (size_t)PTRDIFF_MAX) ||
        __builtin_mul_overflow((ptrdiff_t)(count - 1), stride, &span) ||
        __builtin_add_overflow(block.lo, (span < 0) ? span : 0, &lo) ||
        __builtin_add_overflow(block.hi, (span > 0) ? span : 0, &hi)) {
        axon_error("%s: strided layout count %zu x stride %td overflows ptrdiff_t", func, count,
                   stride);
        return AXON_ERR_INVALID_PARAM;
    }
    abs_stride  = (stride < 0) ? -stride : stride;
    f->empty    = 0;
    f->lo       = lo;
    f->hi       = hi;
    f->disjoint = block.disjoint && ((count == 1) || (block.hi - block.lo <= abs_stride));
    return AXON_OK;
}

static axon_status_t axon_layout_check_level(const axon_layout_t *layout, int depth,
                                             axon_layout_facts_t *f, const char *func)
{
    f->size     = 0;
    f->empty    = 1;
    f->lo       = f->hi = 0;
    f->disjoint = 1;
    if (layout == NULL) {
        axon_error("%s: NULL layout", func);
        return AXON_ERR_INVALID_PARAM;
    }
    switch (layout->kind) {
    case AXON_LAYOUT_IOV:
        return axon_layout_check_iov(layout, f, func);
    case AXON_LAYOUT_STRIDED:
        return axon_layout_check_strided(layout, depth, f, func);
    default:
        axon_error("%s: layout kind %d is neither AXON_LAYOUT_IOV nor AXON_LAYOUT_STRIDED", func,
                   layout->kind);
        return AXON_ERR_INVALID_PARAM;
    }
}

typedef struct {
    ptrdiff_t start;
    size_t    length;
} axon_layout_span_t;

static int axon_layout_span_cmp(const void *a, const void *b)
{
    const axon_layout_span_t *x = a, *y = b;

    return (x->start > y->start) - (x->start < y->start);
}

/*
 * Pieces not proven disjoint by their shape (an unsorted list, interleaved
 * blocks): every piece, sorted. Only receiving layouts of such shapes pay it.
 */
static axon_status_t axon_layout_check_pieces(const axon_layout_t *layout, size_t size,
                                              const char *func)
{
    axon_layout_cursor_t cursor;
    axon_layout_span_t *spans;
    axon_status_t status = AXON_OK;
    size_t count = 0, pos, length, i;
    uint8_t *p;

    axon_layout_cursor_init(&cursor, layout, NULL);
    for (pos = 0; axon_layout_cursor_run(&cursor, pos, &length), length > 0; pos += length) {
        ++count;
    }
    spans = malloc(count * sizeof(*spans));
    if (spans == NULL) {
        axon_error("%s: no memory to check %zu layout pieces for overlaps", func, count);
        return AXON_ERR_NO_MEMORY;
    }
    axon_layout_cursor_init(&cursor, layout, NULL);
    for (pos = 0, i = 0; pos < size; pos += length, ++i) {
        p = axon_layout_cursor_run(&cursor, pos, &length);
        spans[i].start  = (ptrdiff_t)(uintptr_t)p;
        spans[i].length = length;
    }
    qsort(spans, count, sizeof(*spans), axon_layout_span_cmp);
    for (i = 1; i < count; ++i) {
        if ((size_t)(spans[i].start - spans[i - 1].start) < spans[i - 1].length) {
            axon_error("%s: receiving layout pieces overlap: offset %td (%zu bytes) and "
                       "offset %td (%zu bytes)", func, spans[i - 1].start, spans[i - 1].length,
                       spans[i].start, spans[i].length);
            status = AXON_ERR_INVALID_PARAM;
            break;
        }
    }
    free(spans);
    return status;
}

axon_status_t axon_layout_check(const axon_layout_t *layout, int dest, size_t *size_p,
                                const char *func)
{
    axon_layout_facts_t facts;
    axon_status_t status;

    status = axon_layout_check_level(layout, 1, &facts, func);
    if (status != AXON_OK) {
        return status;
    }
    if (dest && !facts.disjoint) {
        status = axon_layout_check_pieces(layout, facts.size, func);
        if (status != AXON_OK) {
            return status;
        }
    }
    *size_p = facts.size;
    return AXON_OK;
}

axon_status_t axon_layout_param_check(const axon_request_param_t *param, size_t length, int dest,
                                      const char *func)
{
    axon_status_t status;
    size_t size;

    status = axon_layout_check(param->layout, dest, &size, func);
    if (status != AXON_OK) {
        return status;
    }
    if (size != length) {
        axon_error("%s: length %zu is not the layout's size %zu", func, length, size);
        return AXON_ERR_INVALID_PARAM;
    }
    return AXON_OK;
}

/* ---------------------------------------------------------------- cursor */

static size_t axon_layout_size(const axon_layout_t *layout)
{
    size_t i, size = 0, length;
    ptrdiff_t offset;

    if (layout->kind == AXON_LAYOUT_STRIDED) {
        return layout->strided.count * ((layout->strided.block == NULL) ?
                                        layout->strided.block_length :
                                        axon_layout_size(layout->strided.block));
    }
    for (i = 0; i < layout->iov.count; ++i) {
        axon_layout_piece(layout, i, &offset, &length);
        size += length;
    }
    return size;
}

void axon_layout_cursor_init(axon_layout_cursor_t *cursor, const axon_layout_t *layout,
                             const void *base)
{
    cursor->layout     = layout;
    cursor->base       = (uint8_t *)(uintptr_t)base;
    cursor->block_size = ((layout->kind == AXON_LAYOUT_STRIDED) &&
                          (layout->strided.block != NULL)) ?
                         axon_layout_size(layout->strided.block) : 0;
    cursor->piece      = 0;
    cursor->piece_pos  = 0;
    cursor->block      = 0;
}

/* Addresses as integers: a NULL base with absolute offsets is allowed. */
static inline uint8_t *axon_layout_addr(uintptr_t base, ptrdiff_t offset, size_t pos)
{
    return (uint8_t *)(base + (uintptr_t)offset + pos);
}

/* The run at pos of an iov level based at base; the cursor's piece is this level's. */
static uint8_t *axon_layout_iov_run(axon_layout_cursor_t *cursor, const axon_layout_t *layout,
                                    uintptr_t base, size_t pos, size_t *length_p)
{
    ptrdiff_t offset;
    size_t length;

    if (pos < cursor->piece_pos) {
        cursor->piece     = 0;
        cursor->piece_pos = 0;
    }
    for (; cursor->piece < layout->iov.count; ++cursor->piece) {
        axon_layout_piece(layout, cursor->piece, &offset, &length);
        if (pos - cursor->piece_pos < length) {
            *length_p = length - (pos - cursor->piece_pos);
            return axon_layout_addr(base, offset, pos - cursor->piece_pos);
        }
        cursor->piece_pos += length;
    }
    *length_p = 0;
    return NULL;
}

/* The run at pos of a strided level of contiguous blocks (no state). */
static inline uint8_t *axon_layout_block_run(const axon_layout_t *layout, uintptr_t base,
                                             size_t pos, size_t *length_p)
{
    size_t block_length = layout->strided.block_length, i;

    if ((block_length == 0) || ((i = pos / block_length) >= layout->strided.count)) {
        *length_p = 0;
        return NULL;
    }
    *length_p = block_length - pos % block_length;
    return axon_layout_addr(base, (ptrdiff_t)((uintptr_t)i * (uintptr_t)layout->strided.stride),
                            pos % block_length);
}

uint8_t *axon_layout_cursor_run(axon_layout_cursor_t *cursor, size_t pos, size_t *length_p)
{
    const axon_layout_t *layout = cursor->layout, *inner;
    uintptr_t base = (uintptr_t)cursor->base;
    size_t i;

    if (layout->kind != AXON_LAYOUT_STRIDED) {
        return axon_layout_iov_run(cursor, layout, base, pos, length_p);
    }
    inner = layout->strided.block;
    if (inner == NULL) {
        return axon_layout_block_run(layout, base, pos, length_p);
    }
    if ((cursor->block_size == 0) || ((i = pos / cursor->block_size) >= layout->strided.count)) {
        *length_p = 0;
        return NULL;
    }
    base += (uintptr_t)i * (uintptr_t)layout->strided.stride;
    if (inner->kind == AXON_LAYOUT_STRIDED) {
        return axon_layout_block_run(inner, base, pos % cursor->block_size, length_p);
    }
    if (i != cursor->block) {
        cursor->block     = i;  /* the inner walk starts again in this block */
        cursor->piece     = 0;
        cursor->piece_pos = 0;
    }
    return axon_layout_iov_run(cursor, inner, base, pos % cursor->block_size, length_p);
}

void axon_layout_gather(axon_layout_cursor_t *cursor, size_t pos, void *dest, size_t length)
{
    uint8_t *out = dest, *p;
    size_t run;

    while (length > 0) {
        p = axon_layout_cursor_run(cursor, pos, &run);
        if (run == 0) {
            break;
        }
        run = (run < length) ? run : length;
        memcpy(out, p, run);
        out    += run;
        pos    += run;
        length -= run;
    }
}

void axon_layout_scatter(axon_layout_cursor_t *cursor, size_t pos, const void *src,
                         size_t length)
{
    const uint8_t *in = src;
    uint8_t *p;
    size_t run;

    while (length > 0) {
        p = axon_layout_cursor_run(cursor, pos, &run);
        if (run == 0) {
            break;
        }
        run = (run < length) ? run : length;
        memcpy(p, in, run);
        in     += run;
        pos    += run;
        length -= run;
    }
}

/* ---------------------------------------------------------------- copies */

/* Bytes of a level's piece list (an iov level's; none for strided) */
static size_t axon_layout_pieces_size(const axon_layout_t *layout)
{
    return (layout->kind == AXON_LAYOUT_IOV) ? layout->iov.count * sizeof(axon_layout_piece_t) :
                                               0;
}

/* Copy level src into *dst, its piece list to *spare (which it advances). */
static void axon_layout_copy_level(axon_layout_t *dst, const axon_layout_t *src, uint8_t **spare)
{
    size_t bytes = axon_layout_pieces_size(src);

    *dst = *src;
    if (bytes > 0) {
        memcpy(*spare, src->iov.pieces, bytes);
        dst->iov.pieces = (const axon_layout_piece_t *)(const void *)*spare;
        *spare         += bytes;
    }
}

axon_layout_t *axon_layout_dup(const axon_layout_t *layout)
{
    const axon_layout_t *inner = (layout->kind == AXON_LAYOUT_STRIDED) ?
                                 layout->strided.block : NULL;
    size_t size = 2 * sizeof(axon_layout_t) + axon_layout_pieces_size(layout) +
                  ((inner != NULL) ? axon_layout_pieces_size(inner) : 0);
    axon_layout_t *copy = malloc(size);
    uint8_t *spare;

    if (copy == NULL) {
        return NULL;
    }
    spare = (uint8_t *)(copy + 2);
    axon_layout_copy_level(copy, layout, &spare);
    if (inner != NULL) {
        axon_layout_copy_level(copy + 1, inner, &spare);
        copy->strided.block = copy + 1;
    }
    return copy;
}

/* ---------------------------------------------------------------- device layouts */

/* Each run of layout (based at base) as an entry, into entries (NULL: count only) */
static uint32_t axon_layout_md_runs(const axon_layout_t *layout, uintptr_t base,
                                    axon_md_layout_entry_t *entries, uint64_t *lo, uint64_t *hi)
{
    axon_layout_cursor_t cursor;
    size_t pos, length;
    uint32_t n = 0;
    uint8_t *p;

    axon_layout_cursor_init(&cursor, layout, (void *)base);
    for (pos = 0; (p = axon_layout_cursor_run(&cursor, pos, &length)), length > 0;
         pos += length, ++n) {
        if (entries != NULL) {
            entries[n].addr   = (uintptr_t)p;
            entries[n].length = length;
            entries[n].stride = 0;
            *lo = ((n == 0) || ((uintptr_t)p < *lo)) ? (uintptr_t)p : *lo;
            *hi = ((n == 0) || ((uintptr_t)p + length > *hi)) ? (uintptr_t)p + length : *hi;
        }
        if (n == UINT32_MAX - 1) {
            break;   /* far past any device's list; the domain refuses it */
        }
    }
    return n;
}

axon_status_t axon_layout_md_make(const axon_layout_t *layout, const void *base, size_t size,
                                  axon_md_layout_entry_t *room, uint32_t room_len,
                                  axon_md_layout_t *md, axon_md_layout_entry_t **entries_p)
{
    const axon_layout_t *block = layout;
    axon_layout_t one;
    axon_md_layout_entry_t *entries;
    uint64_t lo = 0, hi = 0, repeat = 1, stride = 0;
    uint32_t i, n;

    /* A strided top level with a forward stride is the device's repeat form:
     * one block's runs, count times; anything else is a list of every run. */
    if ((layout->kind == AXON_LAYOUT_STRIDED) && (layout->strided.count > 1) &&
        (layout->strided.stride > 0)) {
        repeat = layout->strided.count;
        stride = (uint64_t)layout->strided.stride;
        block  = layout->strided.block;
        if (block == NULL) {
            one.kind                 = AXON_LAYOUT_STRIDED;
            one.strided.count        = 1;
            one.strided.block_length = layout->strided.block_length;
            one.strided.stride       = 0;
            one.strided.block        = NULL;
            block                    = &one;
        }
    }
    n = axon_layout_md_runs(block, (uintptr_t)base, NULL, NULL, NULL);
    if (n == 0) {
        return AXON_ERR_INVALID_PARAM;   /* no byte: mem_map refused it already */
    }
    entries = (n <= room_len) ? room : calloc(n, sizeof(*entries));
    if (entries == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    axon_layout_md_runs(block, (uintptr_t)base, entries, &lo, &hi);
    for (i = 0; i < n; ++i) {
        entries[i].stride = stride;
    }
    md->base        = (uintptr_t)base;
    md->size        = size;
    md->repeat      = repeat;
    md->num_entries = n;
    md->entries     = entries;
    md->span_addr   = lo;
    md->span_length = hi - lo + (repeat - 1) * stride;
    *entries_p      = (entries == room) ? NULL : entries;
    return AXON_OK;
}
