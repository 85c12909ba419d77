/*
 * Barrier by dissemination (Hensgen, Finkel, Manber): in round k every
 * member signals member rank + 2^k and waits for rank - 2^k; after
 * ceil(log2 n) rounds each has heard, transitively, from all. Any team size.
 */
#include "coll_algo.h"

static void axon_coll_barrier_size(axon_coll_h coll, size_t *scratch, unsigned *reqs)
{
    *scratch = 0;
    *reqs    = 2;
}

static axon_status_t axon_coll_barrier_progress(axon_coll_h coll)
{
    uint32_t n = coll->team->size, r = coll->team->rank;
    uint32_t dist = 1u << coll->phase;

    if (dist >= n) {
        return AXON_OK;
    }
    coll->step = coll->phase++;
    axon_coll_send(coll, axon_coll_add_mod(r, dist, n), NULL, 0);
    axon_coll_recv(coll, axon_coll_add_mod(r, n - dist, n), NULL, 0);
    return AXON_INPROGRESS;
}

const axon_coll_algo_t axon_coll_barrier_dissemination = {
    .name     = "dissemination",
    .coll     = AXON_COLL_BARRIER,
    .size     = axon_coll_barrier_size,
    .progress = axon_coll_barrier_progress,
};
