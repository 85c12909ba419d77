/*
 * Broadcast down a binomial tree rooted at root: a member receives from
 * its parent (its root-relative rank without the lowest set bit), then
 * sends to its children (rank + 2^k for every k below that bit).
 */
#include "coll_algo.h"

static void axon_coll_bcast_size(axon_coll_h coll, size_t *scratch, unsigned *reqs)
{
    *scratch = 0;
    *reqs    = axon_coll_log2_ceil(coll->team->size) + 1;
}

static axon_status_t axon_coll_bcast_progress(axon_coll_h coll)
{
    uint32_t n = coll->team->size, root = coll->args.root;
    uint32_t vr = axon_coll_vrank(coll->team->rank, root, n);
    uint32_t low = vr ? (vr & -vr) : axon_coll_pow2_ceil(n);
    size_t bytes = coll->args.count * coll->dt_size;
    uint32_t mask;

    switch (coll->phase++) {
    case 0:
        if (vr != 0) {
            axon_coll_recv(coll, axon_coll_rank(vr - low, root, n), coll->args.dst, bytes);
            return AXON_INPROGRESS;
        }
        /* the root has it */
        /* fall through */
    case 1:
        for (mask = low >> 1; mask > 0; mask >>= 1) {
            if (vr + mask < n) {
                axon_coll_send(coll, axon_coll_rank(vr + mask, root, n), coll->args.dst, bytes);
            }
        }
        coll->phase = 2;
        return AXON_INPROGRESS;
    default:
        return AXON_OK;
    }
}

const axon_coll_algo_t axon_coll_bcast_binomial = {
    .name     = "binomial",
    .coll     = AXON_COLL_BCAST,
    .size     = axon_coll_bcast_size,
    .progress = axon_coll_bcast_progress,
};
