/*
 * Allgather by Bruck's algorithm (Bruck et al., 1997): ceil(log2 n) rounds
 * on any team size, for small blocks where the ring's n - 1 rounds cost more
 * than the extra copies. Member r keeps blocks r, r + 1, ... in order in a
 * scratch buffer; in the round of distance d it sends the first
 * min(d, n - d) blocks it holds to r - d and appends as many from r + d.
 * At the end block i of the scratch is member r + i's: one rotation puts
 * them in place.
 */
#include "coll_algo.h"

static void axon_coll_bruck_size(axon_coll_h coll, size_t *scratch, unsigned *reqs)
{
    *scratch = coll->team->size * coll->args.count * coll->dt_size;
    *reqs    = 2;
}

static axon_status_t axon_coll_bruck_progress(axon_coll_h coll)
{
    uint32_t n = coll->team->size, r = coll->team->rank;
    size_t block = coll->args.count * coll->dt_size;
    uint32_t d = (coll->phase == 0) ? 0 : (1u << (coll->phase - 1)), blocks, i;

    if (coll->phase++ == 0) {
        axon_coll_copy(coll->scratch, coll->args.src, block);
        return AXON_INPROGRESS;
    }
    if (d < n) {
        blocks     = (d < n - d) ? d : (n - d);
        coll->step = coll->phase - 2;
        axon_coll_send(coll, (r + n - d) % n, coll->scratch, blocks * block);
        axon_coll_recv(coll, (r + d) % n, coll->scratch + d * block, blocks * block);
        return AXON_INPROGRESS;
    }
    for (i = 0; i < n; ++i) {
        axon_coll_copy(axon_coll_dst_at(coll, ((r + i) % n) * coll->args.count),
                       coll->scratch + i * block, block);
    }
    return AXON_OK;
}

const axon_coll_algo_t axon_coll_allgather_bruck = {
    .name     = "bruck",
    .coll     = AXON_COLL_ALLGATHER,
    .size     = axon_coll_bruck_size,
    .progress = axon_coll_bruck_progress,
};
