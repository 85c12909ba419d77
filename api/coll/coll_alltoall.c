/*
 * All-to-all by pairwise exchange: in step s member r sends its block for
 * r + s and receives the block of r - s, one partner each way per step, so
 * no member is flooded. (With v-counts, blocks come from the arrays.)
 */
#include "coll_algo.h"

static void axon_coll_a2a_block(axon_coll_h coll, int to_dst, uint32_t i, size_t *off,
                                size_t *cnt)
{
    const axon_coll_args_t *a = &coll->args;

    if (a->coll == AXON_COLL_ALLTOALLV) {
        *off = to_dst ? a->dst_displs[i] : a->src_displs[i];
        *cnt = to_dst ? a->dst_counts[i] : a->src_counts[i];
    } else {
        *off = i * a->count;
        *cnt = a->count;
    }
}

static void axon_coll_a2a_size(axon_coll_h coll, size_t *scratch, unsigned *reqs)
{
    *scratch = 0;
    *reqs    = 2;
}

static axon_status_t axon_coll_a2a_progress(axon_coll_h coll)
{
    uint32_t n = coll->team->size, r = coll->team->rank, s = coll->phase++;
    size_t off, cnt, roff, rcnt, dsz = coll->dt_size;

    if (s == 0) {
        axon_coll_a2a_block(coll, 0, r, &off, &cnt);
        axon_coll_a2a_block(coll, 1, r, &roff, &rcnt);
        if (cnt != rcnt) {
            axon_error("alltoallv: rank %u sends itself %zu elements and expects %zu", r, cnt,
                       rcnt);
            return AXON_ERR_INVALID_PARAM;
        }
        axon_coll_copy(axon_coll_dst_at(coll, roff), axon_coll_src_at(coll, off), cnt * dsz);
        return AXON_INPROGRESS;
    }
    if (s >= n) {
        return AXON_OK;
    }
    coll->step = s;
    axon_coll_a2a_block(coll, 0, (r + s) % n, &off, &cnt);
    axon_coll_send(coll, (r + s) % n, axon_coll_src_at(coll, off), cnt * dsz);
    axon_coll_a2a_block(coll, 1, (r + n - s) % n, &roff, &rcnt);
    axon_coll_recv(coll, (r + n - s) % n, axon_coll_dst_at(coll, roff), rcnt * dsz);
    return AXON_INPROGRESS;
}

const axon_coll_algo_t axon_coll_alltoall_pairwise = {
    .name     = "pairwise",
    .coll     = AXON_COLL_ALLTOALL,
    .size     = axon_coll_a2a_size,
    .progress = axon_coll_a2a_progress,
};

const axon_coll_algo_t axon_coll_alltoallv_pairwise = {
    .name     = "pairwise",
    .coll     = AXON_COLL_ALLTOALLV,
    .size     = axon_coll_a2a_size,
    .progress = axon_coll_a2a_progress,
};
