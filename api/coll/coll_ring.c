/*
 * Ring algorithms: n - 1 steps, each member sending one block to the next
 * member and receiving one from the previous; bandwidth-optimal for large
 * messages on any team size.
 *
 * Reduce-scatter: in step s member r sends block r - s - 1 (its partial
 * sum) and folds the block r - s - 2 it receives into its own copy; after
 * n - 1 steps it holds block r complete. Every block is combined in the
 * same order on every run. Allgather: in step s member r forwards block
 * r - s and receives block r - s - 1. Allreduce = the two in turn.
 */
#include "coll_algo.h"

/* Element offset and count of block i, by the collective's layout. */
static void axon_coll_ring_block(axon_coll_h coll, uint32_t i, size_t *off, size_t *cnt)
{
    const axon_coll_args_t *a = &coll->args;
    uint32_t j;

    switch (a->coll) {
    case AXON_COLL_ALLGATHERV:
        *off = a->dst_displs[i];
        *cnt = a->dst_counts[i];
        return;
    case AXON_COLL_REDUCE_SCATTER:
        if (a->dst_counts != NULL) {
            for (*off = 0, j = 0; j < i; ++j) {
                *off += a->dst_counts[j];
            }
            *cnt = a->dst_counts[i];
            return;
        }
        /* blocks of count */
        /* fall through */
    case AXON_COLL_ALLGATHER:
        *off = i * a->count;
        *cnt = a->count;
        return;
    default:    /* allreduce: count split evenly */
        axon_coll_even_block(a->count, coll->team->size, i, off, cnt);
        return;
    }
}

static size_t axon_coll_ring_total(axon_coll_h coll, size_t *largest)
{
    size_t off, cnt, total = 0;
    uint32_t i;

    *largest = 0;
    for (i = 0; i < coll->team->size; ++i) {
        axon_coll_ring_block(coll, i, &off, &cnt);
        total   += cnt;
        *largest = (cnt > *largest) ? cnt : *largest;
    }
    return total;
}

/* One step of the reduce-scatter on buf (step s, and the fold of the step before). */
static void axon_coll_ring_rs_step(axon_coll_h coll, uint8_t *buf, uint8_t *tmp, uint32_t s)
{
    uint32_t n = coll->team->size, r = coll->team->rank;
    size_t off, cnt, dsz = coll->dt_size;

    coll->step = s;
    axon_coll_ring_block(coll, (r + 2 * n - s - 1) % n, &off, &cnt);
    axon_coll_send(coll, (r + 1) % n, buf + off * dsz, cnt * dsz);
    axon_coll_ring_block(coll, (r + 2 * n - s - 2) % n, &off, &cnt);
    axon_coll_recv(coll, (r + n - 1) % n, tmp, cnt * dsz);
}

static void axon_coll_ring_rs_fold(axon_coll_h coll, uint8_t *buf, const uint8_t *tmp,
                                   uint32_t s)
{
    uint32_t n = coll->team->size, r = coll->team->rank;
    size_t off, cnt;

    axon_coll_ring_block(coll, (r + 2 * n - s - 2) % n, &off, &cnt);
    coll->reduce(buf + off * coll->dt_size, tmp, cnt);
}

static void axon_coll_ring_ag_step(axon_coll_h coll, uint8_t *buf, uint32_t s, uint32_t step0)
{
    uint32_t n = coll->team->size, r = coll->team->rank;
    size_t off, cnt, dsz = coll->dt_size;

    coll->step = step0 + s;
    axon_coll_ring_block(coll, (r + n - s) % n, &off, &cnt);
    axon_coll_send(coll, (r + 1) % n, buf + off * dsz, cnt * dsz);
    axon_coll_ring_block(coll, (r + 2 * n - s - 1) % n, &off, &cnt);
    axon_coll_recv(coll, (r + n - 1) % n, buf + off * dsz, cnt * dsz);
}

static void axon_coll_ring_size(axon_coll_h coll, size_t *scratch, unsigned *reqs)
{
    size_t largest, total = axon_coll_ring_total(coll, &largest);

    coll->state[0] = (int64_t)total;   /* elements of all blocks, for every post */
    *reqs    = 2;
    *scratch = 0;
    if (coll->args.coll == AXON_COLL_ALLREDUCE) {
        *scratch = largest * coll->dt_size;
    } else if (coll->args.coll == AXON_COLL_REDUCE_SCATTER) {
        *scratch = (total + largest) * coll->dt_size;   /* the working copy, a block */
    }
}

/*
 * Phases: 0 prepare; 1 .. n-1 reduce-scatter steps (their folds in the next
 * call); n .. 2n-2 allgather steps; then done. Collectives that need only
 * one half skip the other.
 */
static axon_status_t axon_coll_ring_progress(axon_coll_h coll)
{
    const axon_coll_args_t *a = &coll->args;
    uint32_t n = coll->team->size, r = coll->team->rank, ph = coll->phase++;
    int reduces = (a->coll == AXON_COLL_ALLREDUCE) || (a->coll == AXON_COLL_REDUCE_SCATTER);
    int gathers = (a->coll != AXON_COLL_REDUCE_SCATTER);
    size_t total = (size_t)coll->state[0], off, cnt;
    size_t dsz = coll->dt_size;
    uint8_t *buf = (a->coll == AXON_COLL_REDUCE_SCATTER) ? coll->scratch : (uint8_t *)a->dst;
    uint8_t *tmp = (a->coll == AXON_COLL_REDUCE_SCATTER) ? coll->scratch + total * dsz :
                   coll->scratch;

    if (ph == 0) {
        axon_coll_ring_block(coll, r, &off, &cnt);
        if (reduces) {
            axon_coll_copy(buf, a->src, total * dsz);
        } else {
            axon_coll_copy(buf + off * dsz, a->src, cnt * dsz);
        }
        coll->phase = reduces ? 1 : n;
        return AXON_INPROGRESS;
    }
    if (ph < n) {
        if (ph > 1) {
            axon_coll_ring_rs_fold(coll, buf, tmp, ph - 2);
        }
        axon_coll_ring_rs_step(coll, buf, tmp, ph - 1);
        return AXON_INPROGRESS;
    }
    if ((ph == n) && reduces && (n > 1)) {
        axon_coll_ring_rs_fold(coll, buf, tmp, n - 2);
    }
    if (!gathers) {
        axon_coll_ring_block(coll, r, &off, &cnt);
        axon_coll_copy(a->dst, buf + off * dsz, cnt * dsz);
        return AXON_OK;
    }
    if (ph < 2 * n - 1) {
        axon_coll_ring_ag_step(coll, buf, ph - n, n);
        return AXON_INPROGRESS;
    }
    return AXON_OK;
}

#define AXON_COLL_RING(_coll, _var) \
    const axon_coll_algo_t _var = { \
        .name     = "ring", \
        .coll     = _coll, \
        .size     = axon_coll_ring_size, \
        .progress = axon_coll_ring_progress, \
    }

AXON_COLL_RING(AXON_COLL_ALLREDUCE, axon_coll_allreduce_ring);
AXON_COLL_RING(AXON_COLL_ALLGATHER, axon_coll_allgather_ring);
AXON_COLL_RING(AXON_COLL_ALLGATHERV, axon_coll_allgatherv_ring);
AXON_COLL_RING(AXON_COLL_REDUCE_SCATTER, axon_coll_reduce_scatter_ring);
