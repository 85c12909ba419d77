/*
 * Gather and scatter, linear: the root posts one receive (send) per member
 * at once and the members one send (receive) each. The root's link is the
 * bottleneck either way; trees only add copies.
 */
#include "coll_algo.h"

static void axon_coll_linear_size(axon_coll_h coll, size_t *scratch, unsigned *reqs)
{
    *scratch = 0;
    *reqs    = (coll->team->rank == coll->args.root) ? coll->team->size : 1;
}

static axon_status_t axon_coll_linear_progress(axon_coll_h coll)
{
    const axon_coll_args_t *a = &coll->args;
    uint32_t n = coll->team->size, r = coll->team->rank, i;
    size_t bytes = a->count * coll->dt_size;
    int gather = (a->coll == AXON_COLL_GATHER);

    if (coll->phase++ > 0) {
        return AXON_OK;
    }
    if (r != a->root) {
        if (gather) {
            axon_coll_send(coll, a->root, a->src, bytes);
        } else {
            axon_coll_recv(coll, a->root, a->dst, bytes);
        }
        return AXON_INPROGRESS;
    }
    for (i = 0; i < n; ++i) {
        if (i == r) {
            /* in place: the root's block is already where it goes (dst NULL for scatter) */
            if (gather) {
                axon_coll_copy(axon_coll_dst_at(coll, i * a->count), a->src, bytes);
            } else if (a->dst != NULL) {
                axon_coll_copy(a->dst, axon_coll_src_at(coll, i * a->count), bytes);
            }
        } else if (gather) {
            axon_coll_recv(coll, i, axon_coll_dst_at(coll, i * a->count), bytes);
        } else {
            axon_coll_send(coll, i, axon_coll_src_at(coll, i * a->count), bytes);
        }
    }
    return AXON_INPROGRESS;
}

const axon_coll_algo_t axon_coll_gather_linear = {
    .name     = "linear",
    .coll     = AXON_COLL_GATHER,
    .size     = axon_coll_linear_size,
    .progress = axon_coll_linear_progress,
};

const axon_coll_algo_t axon_coll_scatter_linear = {
    .name     = "linear",
    .coll     = AXON_COLL_SCATTER,
    .size     = axon_coll_linear_size,
    .progress = axon_coll_linear_progress,
};
