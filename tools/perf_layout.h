/*
 * axon_perf -D: non-contiguous data. The option names a shape; for each
 * message size (the packed size, -s) it becomes an axon_layout_t over a
 * buffer of the layout's span. Test data is filled and checked in packed
 * order, through the layout.
 */
#ifndef AXON_PERF_LAYOUT_H
#define AXON_PERF_LAYOUT_H

#include <stddef.h>
#include <stdint.h>
#include "axon.h"

#define PERF_LAYOUT_MAX_PIECES (1u << 20)  /* -D iov:N: most pieces */

/* What -D said; kind 0: contiguous (no -D). */
typedef struct {
    int    kind;         /* 0, AXON_LAYOUT_IOV or AXON_LAYOUT_STRIDED */
    size_t block;        /* strided: bytes per block */
    size_t stride;       /* strided: bytes from one block's start to the next's */
    size_t pieces;       /* iov: number of pieces */
} perf_layout_spec_t;

/* One size's layout. */
typedef struct {
    axon_layout_t        layout;
    axon_layout_piece_t *pieces;   /* iov: pieces.count of them */
    size_t               size;     /* packed bytes */
    size_t               span;     /* bytes from the base to the end of the last piece */
    uint8_t             *scratch;  /* size bytes: the packed copy for fill and verify */
} perf_layout_t;

/* Parse "strided:BLOCK:STRIDE" or "iov:N"; 0, or -1 with a line naming the value. */
int    perf_layout_parse(const char *arg, perf_layout_spec_t *spec);
/* Is spec (from the command line or the peer) one the tool takes? 0 or -1 (printed). */
int    perf_layout_check_spec(const perf_layout_spec_t *spec);
/* Can a message of size bytes have this shape? 0 or -1 (printed). */
int    perf_layout_check_size(const perf_layout_spec_t *spec, size_t size);
/* Bytes a buffer needs for a message of size bytes (size itself when contiguous). */
size_t perf_layout_span(const perf_layout_spec_t *spec, size_t size);
/* "strided:64:128", "iov:16" or "" into buf. */
void   perf_layout_name(const perf_layout_spec_t *spec, char *buf, size_t len);

/* Build the layout of one size (spec checked); 0, or -1 out of memory (printed). */
int    perf_layout_build(const perf_layout_spec_t *spec, size_t size, perf_layout_t *l);
void   perf_layout_free(perf_layout_t *l);
/* Offset from the base of the last packed byte (size > 0). */
size_t perf_layout_last_offset(const perf_layout_t *l);
/* Its pieces in packed order: how many, and piece i's offset from the base and length. */
size_t perf_layout_count(const perf_layout_t *l);
void   perf_layout_piece(const perf_layout_t *l, size_t i, size_t *offset_p, size_t *length_p);
/* Copy the packed bytes between base (through l) and packed, l->size of them. */
void   perf_layout_gather(const perf_layout_t *l, const uint8_t *base, uint8_t *packed);
void   perf_layout_scatter(const perf_layout_t *l, const uint8_t *packed, uint8_t *base);
/* Fill the size bytes at base with the test pattern of seed, in packed
 * order through l (NULL: contiguous). */
void   perf_layout_fill(perf_layout_t *l, uint8_t *base, size_t size, uint64_t seed);
/* Check the first size bytes of the data at base hold the pattern of seed
 * (with a layout: of its packed bytes, size <= l->size) and, with a layout,
 * that the gaps between its pieces are still zero; 0 or -1 (printed, naming what). */
int    perf_layout_verify(perf_layout_t *l, int role, const uint8_t *base, size_t size,
                          uint64_t seed, const char *what);

#endif
