/*
 * Broadcast down a k-nomial tree rooted at root (coll_knomial.h; radix
 * AXON_COLL_KNOMIAL_RADIX): a member receives from its parent, then sends
 * to its children, the farthest (largest subtree) first.
 */
#include "coll_knomial.h"

static void axon_coll_bcast_size(axon_coll_h coll, size_t *scratch, unsigned *reqs)
{
    *scratch = 0;
    *reqs    = axon_coll_knomial_max_children(coll->team->size, axon_coll_radix(coll)) + 1;
}

static axon_status_t axon_coll_bcast_progress(axon_coll_h coll)
{
    uint32_t n = coll->team->size, root = coll->args.root;
    uint32_t vr = axon_coll_vrank(coll->team->rank, root, n);
    size_t bytes = coll->args.count * coll->dt_size;
    uint32_t children[AXON_COLL_KNOMIAL_MAX_CHILDREN];
    axon_coll_knomial_t tree;
    unsigned i;

    axon_coll_knomial(vr, n, axon_coll_radix(coll), &tree);
    switch (coll->phase++) {
    case 0:
        if (vr != 0) {
            axon_coll_recv(coll, axon_coll_rank(tree.parent, root, n), coll->args.dst, bytes);
            return AXON_INPROGRESS;
        }
        /* the root has it */
        /* fall through */
    case 1:
        coll->phase = 2;
        for (i = axon_coll_knomial_children(vr, n, &tree, children); i > 0; --i) {
            axon_coll_send(coll, axon_coll_rank(children[i - 1], root, n), coll->args.dst,
                           bytes);
        }
        return AXON_INPROGRESS;
    default:
        return AXON_OK;
    }
}

const axon_coll_algo_t axon_coll_bcast_knomial = {
    .name     = "knomial",
    .coll     = AXON_COLL_BCAST,
    .size     = axon_coll_bcast_size,
    .progress = axon_coll_bcast_progress,
};
