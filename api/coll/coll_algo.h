/*
 * What the algorithms share: rank arithmetic and the algorithm table.
 */
#ifndef AXON_COLL_ALGO_H
#define AXON_COLL_ALGO_H

#include <string.h>
#include "coll.h"
#include "log.h"

/* (a + b) mod n for a, b < n: no division on the per-round path. */
static inline uint32_t axon_coll_add_mod(uint32_t a, uint32_t b, uint32_t n)
{
    return (a + b >= n) ? (a + b - n) : (a + b);
}

/* Rank relative to root, and back. */
static inline uint32_t axon_coll_vrank(uint32_t rank, uint32_t root, uint32_t n)
{
    return axon_coll_add_mod(rank, n - root, n);
}

static inline uint32_t axon_coll_rank(uint32_t vrank, uint32_t root, uint32_t n)
{
    return axon_coll_add_mod(vrank, root, n);
}

static inline uint32_t axon_coll_pow2_ceil(uint32_t n)
{
    uint32_t p = 1;

    while (p < n) {
        p <<= 1;
    }
    return p;
}

static inline uint32_t axon_coll_pow2_floor(uint32_t n)
{
    uint32_t p = axon_coll_pow2_ceil(n);

    return (p > n) ? (p >> 1) : p;
}

static inline unsigned axon_coll_log2_ceil(uint32_t n)
{
    unsigned k = 0;

    while ((1u << k) < n) {
        ++k;
    }
    return k;
}

static inline void axon_coll_copy(void *dst, const void *src, size_t bytes)
{
    if ((dst != src) && (bytes > 0)) {
        memcpy(dst, src, bytes);
    }
}

/* Element offset and count of block i of an even split of count over n. */
static inline void axon_coll_even_block(size_t count, uint32_t n, uint32_t i, size_t *off,
                                        size_t *cnt)
{
    size_t q = count / n, rem = count % n;

    *cnt = q + (i < rem);
    *off = i * q + ((i < rem) ? i : rem);
}

extern const axon_coll_algo_t axon_coll_barrier_dissemination;
extern const axon_coll_algo_t axon_coll_bcast_knomial;
extern const axon_coll_algo_t axon_coll_reduce_knomial;
extern const axon_coll_algo_t axon_coll_allreduce_recursive_doubling;
extern const axon_coll_algo_t axon_coll_allreduce_ring;
extern const axon_coll_algo_t axon_coll_allgather_ring;
extern const axon_coll_algo_t axon_coll_allgather_bruck;
extern const axon_coll_algo_t axon_coll_allgatherv_ring;
extern const axon_coll_algo_t axon_coll_reduce_scatter_ring;
extern const axon_coll_algo_t axon_coll_alltoall_pairwise;
extern const axon_coll_algo_t axon_coll_alltoallv_pairwise;
extern const axon_coll_algo_t axon_coll_gather_linear;
extern const axon_coll_algo_t axon_coll_scatter_linear;

#endif
