/*
 * Reductions by trees and pairs. The order in which contributions combine
 * depends only on the team and the root, never on arrival times, so a
 * floating-point result is the same on every run.
 *
 * reduce: k-nomial tree (coll_knomial.h); a member folds its children's
 * partial results into its own nearest child first, then sends to its parent.
 * allreduce (recursive doubling): members beyond the largest power of two p
 * first fold into a neighbour (rank 2i into 2i + 1), the p remaining
 * exchange and combine with partners at distance 1, 2, 4, ..., and hand the
 * result back to those that folded.
 */
#include "coll_knomial.h"

/* ------------------------------------------------------------ reduce */

static void axon_coll_reduce_size(axon_coll_h coll, size_t *scratch, unsigned *reqs)
{
    uint32_t n = coll->team->size, k = axon_coll_radix(coll);
    uint32_t vr = axon_coll_vrank(coll->team->rank, coll->args.root, n);
    uint32_t children[AXON_COLL_KNOMIAL_MAX_CHILDREN];
    axon_coll_knomial_t tree;
    size_t bytes = coll->args.count * coll->dt_size;

    /* one slot per child, and the partial result of a member that is not the root */
    axon_coll_knomial(vr, n, k, &tree);
    *reqs    = axon_coll_knomial_max_children(n, k) + 1;
    *scratch = bytes * (axon_coll_knomial_children(vr, n, &tree, children) + (vr != 0));
}

static axon_status_t axon_coll_reduce_progress(axon_coll_h coll)
{
    uint32_t n = coll->team->size, root = coll->args.root;
    uint32_t vr = axon_coll_vrank(coll->team->rank, root, n);
    size_t bytes = coll->args.count * coll->dt_size;
    uint8_t *acc = (vr == 0) ? (uint8_t *)coll->args.dst : coll->scratch;
    uint8_t *slot = coll->scratch + ((vr == 0) ? 0 : bytes);
    uint32_t children[AXON_COLL_KNOMIAL_MAX_CHILDREN];
    axon_coll_knomial_t tree;
    unsigned i, num;

    axon_coll_knomial(vr, n, axon_coll_radix(coll), &tree);
    num = axon_coll_knomial_children(vr, n, &tree, children);
    switch (coll->phase++) {
    case 0:
        axon_coll_copy(acc, coll->args.src, bytes);
        for (i = 0; i < num; ++i) {
            axon_coll_recv(coll, axon_coll_rank(children[i], root, n), slot + i * bytes, bytes);
        }
        return AXON_INPROGRESS;
    case 1:
        /* nearest child first, whatever arrived first */
        for (i = 0; i < num; ++i) {
            coll->reduce(acc, slot + i * bytes, coll->args.count);
        }
        if (vr != 0) {
            axon_coll_send(coll, axon_coll_rank(tree.parent, root, n), acc, bytes);
        }
        return AXON_INPROGRESS;
    default:
        return AXON_OK;
    }
}

const axon_coll_algo_t axon_coll_reduce_knomial = {
    .name     = "knomial",
    .coll     = AXON_COLL_REDUCE,
    .size     = axon_coll_reduce_size,
    .progress = axon_coll_reduce_progress,
};

/* ------------------------------------------------------------ allreduce */

enum {
    AXON_RD_START, AXON_RD_FOLDED_IN, AXON_RD_ROUND, AXON_RD_FOLD_OUT, AXON_RD_WAIT_RESULT,
    AXON_RD_DONE
};

#define AXON_RD_STEP_FOLD_OUT AXON_COLL_STEP_MAX

static void axon_coll_rd_size(axon_coll_h coll, size_t *scratch, unsigned *reqs)
{
    *scratch = coll->args.count * coll->dt_size;
    *reqs    = 2;
}

/* The real rank of the member that is vrank v among the p that exchange. */
static inline uint32_t axon_coll_rd_real(uint32_t v, uint32_t rem)
{
    return (v < rem) ? (2 * v + 1) : (v + rem);
}

static axon_status_t axon_coll_rd_progress(axon_coll_h coll)
{
    uint32_t n = coll->team->size, r = coll->team->rank;
    uint32_t p = axon_coll_pow2_floor(n), rem = n - p;
    uint32_t v = (r < 2 * rem) ? (r / 2) : (r - rem);
    size_t bytes = coll->args.count * coll->dt_size;
    uint8_t *dst = coll->args.dst;
    int64_t *mask = &coll->state[0], *reduce_due = &coll->state[1];

    switch (coll->phase) {
    case AXON_RD_START:
        axon_coll_copy(dst, coll->args.src, bytes);
        *mask       = 1;
        *reduce_due = 0;
        if ((r < 2 * rem) && !(r & 1)) {
            axon_coll_send(coll, r + 1, dst, bytes);
            coll->phase = AXON_RD_WAIT_RESULT;
            return AXON_INPROGRESS;
        }
        if (r < 2 * rem) {
            axon_coll_recv(coll, r - 1, coll->scratch, bytes);
            *reduce_due = 1;
        }
        coll->phase = AXON_RD_ROUND;
        return AXON_INPROGRESS;
    case AXON_RD_ROUND:
        if (*reduce_due) {
            coll->reduce(dst, coll->scratch, coll->args.count);
            *reduce_due = 0;
        }
        if ((uint32_t)*mask < p) {
            uint32_t partner = axon_coll_rd_real(v ^ (uint32_t)*mask, rem);
            coll->step = 1 + axon_coll_log2_ceil((uint32_t)*mask);
            axon_coll_send(coll, partner, dst, bytes);
            axon_coll_recv(coll, partner, coll->scratch, bytes);
            *mask     <<= 1;
            *reduce_due = 1;
            return AXON_INPROGRESS;
        }
        coll->phase = AXON_RD_FOLD_OUT;
        /* fall through */
    case AXON_RD_FOLD_OUT:
        coll->phase = AXON_RD_DONE;
        if (r < 2 * rem) {
            coll->step = AXON_RD_STEP_FOLD_OUT;
            axon_coll_send(coll, r - 1, dst, bytes);
        }
        return AXON_INPROGRESS;
    case AXON_RD_WAIT_RESULT:
        /* our send of dst is done: now it may be overwritten */
        coll->phase = AXON_RD_DONE;
        coll->step  = AXON_RD_STEP_FOLD_OUT;
        axon_coll_recv(coll, r + 1, dst, bytes);
        return AXON_INPROGRESS;
    default:
        return AXON_OK;
    }
}

const axon_coll_algo_t axon_coll_allreduce_recursive_doubling = {
    .name     = "recursive_doubling",
    .coll     = AXON_COLL_ALLREDUCE,
    .size     = axon_coll_rd_size,
    .progress = axon_coll_rd_progress,
};
