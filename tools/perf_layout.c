/*
 * axon_perf -D strided:BLOCK:STRIDE | iov:N (see perf_layout.h).
 *
 *   strided  size / BLOCK blocks of BLOCK bytes, STRIDE bytes apart
 *            (STRIDE >= BLOCK: a receiving layout must not overlap itself).
 *   iov      N pieces of size / N bytes, each followed by a gap as long as
 *            a piece, so the data is really scattered and the pieces are
 *            described one by one (no run merges with the next).
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "axon_perf.h"
#include "perf_layout.h"

/* A decimal number that fills the whole of str. */
static int perf_layout_number(const char *str, const char *end, size_t *value_p)
{
    size_t value = 0;

    if (str == end) {
        return -1;
    }
    for (; str < end; ++str) {
        if ((*str < '0') || (*str > '9') || (value > (SIZE_MAX / 2 - 9) / 10)) {
            return -1;
        }
        value = value * 10 + (size_t)(*str - '0');
    }
    *value_p = value;
    return 0;
}

int perf_layout_parse(const char *arg, perf_layout_spec_t *spec)
{
    const char *colon;

    memset(spec, 0, sizeof(*spec));
    if (strncmp(arg, "strided:", 8) == 0) {
        colon = strchr(arg + 8, ':');
        spec->kind = AXON_LAYOUT_STRIDED;
        if ((colon != NULL) &&
            (perf_layout_number(arg + 8, colon, &spec->block) == 0) &&
            (perf_layout_number(colon + 1, colon + 1 + strlen(colon + 1), &spec->stride) == 0) &&
            (perf_layout_check_spec(spec) == 0)) {
            return 0;
        }
    } else if (strncmp(arg, "iov:", 4) == 0) {
        spec->kind = AXON_LAYOUT_IOV;
        if ((perf_layout_number(arg + 4, arg + strlen(arg), &spec->pieces) == 0) &&
            (perf_layout_check_spec(spec) == 0)) {
            return 0;
        }
    }
    fprintf(stderr, "axon_perf: invalid layout '%s' (strided:BLOCK:STRIDE with "
            "1 <= BLOCK <= STRIDE, or iov:N with 1 <= N <= %u)\n", arg,
            PERF_LAYOUT_MAX_PIECES);
    memset(spec, 0, sizeof(*spec));
    return -1;
}

int perf_layout_check_spec(const perf_layout_spec_t *spec)
{
    switch (spec->kind) {
    case 0:
        return 0;
    case AXON_LAYOUT_STRIDED:
        if ((spec->block >= 1) && (spec->stride >= spec->block) &&
            (spec->stride <= SIZE_MAX / 4)) {
            return 0;
        }
        fprintf(stderr, "axon_perf: strided layout block %zu stride %zu: need 1 <= block "
                "<= stride\n", spec->block, spec->stride);
        return -1;
    case AXON_LAYOUT_IOV:
        if ((spec->pieces >= 1) && (spec->pieces <= PERF_LAYOUT_MAX_PIECES)) {
            return 0;
        }
        fprintf(stderr, "axon_perf: iov layout of %zu pieces: need 1..%u\n", spec->pieces,
                PERF_LAYOUT_MAX_PIECES);
        return -1;
    default:
        fprintf(stderr, "axon_perf: unknown layout kind %d\n", spec->kind);
        return -1;
    }
}

int perf_layout_check_size(const perf_layout_spec_t *spec, size_t size)
{
    char name[64];

    perf_layout_name(spec, name, sizeof(name));
    if ((spec->kind == AXON_LAYOUT_STRIDED) &&
        ((size % spec->block != 0) ||
         ((size / spec->block > 1) && (size / spec->block - 1 > (SIZE_MAX / 4) / spec->stride)))) {
        fprintf(stderr, "axon_perf: size %zu is not a whole number of %s's %zu-byte blocks "
                "(or its span overflows)\n", size, name, spec->block);
        return -1;
    }
    if ((spec->kind == AXON_LAYOUT_IOV) && (size % spec->pieces != 0)) {
        fprintf(stderr, "axon_perf: size %zu does not split into %s's %zu equal pieces\n",
                size, name, spec->pieces);
        return -1;
    }
    return 0;
}

size_t perf_layout_span(const perf_layout_spec_t *spec, size_t size)
{
    size_t count;

    switch (spec->kind) {
    case AXON_LAYOUT_STRIDED:
        count = size / spec->block;
        return (count == 0) ? 0 : (count - 1) * spec->stride + spec->block;
    case AXON_LAYOUT_IOV:
        /* a gap as long as a piece after each but the last */
        return (size == 0) ? 0 : size * 2 - size / spec->pieces;
    default:
        return size;
    }
}

void perf_layout_name(const perf_layout_spec_t *spec, char *buf, size_t len)
{
    switch (spec->kind) {
    case AXON_LAYOUT_STRIDED:
        snprintf(buf, len, "strided:%zu:%zu", spec->block, spec->stride);
        break;
    case AXON_LAYOUT_IOV:
        snprintf(buf, len, "iov:%zu", spec->pieces);
        break;
    default:
        snprintf(buf, len, "%s", "");
        break;
    }
}

int perf_layout_build(const perf_layout_spec_t *spec, size_t size, perf_layout_t *l)
{
    size_t piece, i;

    memset(l, 0, sizeof(*l));
    l->size    = size;
    l->span    = perf_layout_span(spec, size);
    l->scratch = malloc(size ? size : 1);
    if (spec->kind == AXON_LAYOUT_STRIDED) {
        l->layout.kind                  = AXON_LAYOUT_STRIDED;
        l->layout.strided.count         = size / spec->block;
        l->layout.strided.block_length  = spec->block;
        l->layout.strided.stride        = (ptrdiff_t)spec->stride;
        l->layout.strided.block         = NULL;
    } else {
        piece     = size / spec->pieces;
        l->pieces = calloc(spec->pieces, sizeof(*l->pieces));
        if (l->pieces != NULL) {
            for (i = 0; i < spec->pieces; ++i) {
                l->pieces[i].offset = (ptrdiff_t)(i * 2 * piece);
                l->pieces[i].length = piece;
            }
        }
        l->layout.kind       = AXON_LAYOUT_IOV;
        l->layout.iov.pieces = l->pieces;
        l->layout.iov.count  = spec->pieces;
    }
    if ((l->scratch == NULL) || ((spec->kind == AXON_LAYOUT_IOV) && (l->pieces == NULL))) {
        fprintf(stderr, "axon_perf: out of memory for a layout of %zu bytes\n", size);
        perf_layout_free(l);
        return -1;
    }
    return 0;
}

void perf_layout_free(perf_layout_t *l)
{
    free(l->pieces);
    free(l->scratch);
    memset(l, 0, sizeof(*l));
}

size_t perf_layout_count(const perf_layout_t *l)
{
    return (l->layout.kind == AXON_LAYOUT_STRIDED) ? l->layout.strided.count
                                                    : l->layout.iov.count;
}

void perf_layout_piece(const perf_layout_t *l, size_t i, size_t *offset_p, size_t *length_p)
{
    if (l->layout.kind == AXON_LAYOUT_STRIDED) {
        *offset_p = i * (size_t)l->layout.strided.stride;
        *length_p = l->layout.strided.block_length;
    } else {
        *offset_p = (size_t)l->pieces[i].offset;
        *length_p = l->pieces[i].length;
    }
}

size_t perf_layout_last_offset(const perf_layout_t *l)
{
    return l->span - 1;  /* both shapes end with a piece */
}

void perf_layout_gather(const perf_layout_t *l, const uint8_t *base, uint8_t *packed)
{
    size_t i, off, len;

    for (i = 0; i < perf_layout_count(l); ++i) {
        perf_layout_piece(l, i, &off, &len);
        memcpy(packed, base + off, len);
        packed += len;
    }
}

void perf_layout_scatter(const perf_layout_t *l, const uint8_t *packed, uint8_t *base)
{
    size_t i, off, len;

    for (i = 0; i < perf_layout_count(l); ++i) {
        perf_layout_piece(l, i, &off, &len);
        memcpy(base + off, packed, len);
        packed += len;
    }
}

void perf_layout_fill(perf_layout_t *l, uint8_t *base, size_t size, uint64_t seed)
{
    if (l == NULL) {
        perf_fill(base, size, seed);
        return;
    }
    perf_fill(l->scratch, l->size, seed);
    perf_layout_scatter(l, l->scratch, base);
}

int perf_layout_verify(perf_layout_t *l, int role, const uint8_t *base, size_t size,
                       uint64_t seed, const char *what)
{
    size_t i, j, off, len, end = 0;

    if (l == NULL) {
        return perf_verify((perf_role_t)role, base, size, seed, what);
    }
    for (i = 0; i < perf_layout_count(l); ++i) {
        perf_layout_piece(l, i, &off, &len);
        for (j = end; j < off; ++j) {
            if (base[j] != 0) {
                fprintf(stderr, "axon_perf %s: %s: byte %zu, in the gap before piece %zu, "
                        "was written (0x%02x)\n", perf_role_name((perf_role_t)role), what, j,
                        i, base[j]);
                return -1;
            }
        }
        end = off + len;
    }
    perf_layout_gather(l, base, l->scratch);
    return perf_verify((perf_role_t)role, l->scratch, (size < l->size) ? size : l->size, seed,
                       what);
}
