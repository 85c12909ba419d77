/*
 * Which algorithm runs a collective: the one AXON_COLL_<NAME>_ALGO names,
 * else the default for the team size and message size.
 */
#include <string.h>
#include "coll_algo.h"

/* Every algorithm of each collective; the first is the default where no rule below picks. */
static const axon_coll_algo_t *const axon_coll_algos[AXON_COLL_LAST][3] = {
    [AXON_COLL_BARRIER]        = {&axon_coll_barrier_dissemination},
    [AXON_COLL_BCAST]          = {&axon_coll_bcast_knomial},
    [AXON_COLL_REDUCE]         = {&axon_coll_reduce_knomial},
    [AXON_COLL_ALLREDUCE]      = {&axon_coll_allreduce_recursive_doubling,
                                  &axon_coll_allreduce_ring},
    [AXON_COLL_ALLGATHER]      = {&axon_coll_allgather_ring, &axon_coll_allgather_bruck},
    [AXON_COLL_ALLGATHERV]     = {&axon_coll_allgatherv_ring},
    [AXON_COLL_ALLTOALL]       = {&axon_coll_alltoall_pairwise},
    [AXON_COLL_ALLTOALLV]      = {&axon_coll_alltoallv_pairwise},
    [AXON_COLL_REDUCE_SCATTER] = {&axon_coll_reduce_scatter_ring},
    [AXON_COLL_GATHER]         = {&axon_coll_gather_linear},
    [AXON_COLL_SCATTER]        = {&axon_coll_scatter_linear},
};

/* Allreduce moves its vector log2(n) times whole by recursive doubling and
 * about twice in pieces by ring, which also splits the reduction work: the
 * ring wins once the vector is large (on 2 members too: 78 against 98-135 us
 * at 1 MiB over shm). */
#define AXON_COLL_ALLREDUCE_RING_BYTES (64 * 1024)
/* Allgather: Bruck's log2(n) rounds copy the result once more than the ring's
 * n - 1; below this total the rounds cost more than the copy. */
#define AXON_COLL_ALLGATHER_RING_BYTES (64 * 1024)

static const axon_coll_algo_t *axon_coll_algo_by_name(axon_coll_type_t coll, const char *name)
{
    unsigned i;

    for (i = 0; (i < 3) && (axon_coll_algos[coll][i] != NULL); ++i) {
        if (strcmp(axon_coll_algos[coll][i]->name, name) == 0) {
            return axon_coll_algos[coll][i];
        }
    }
    return NULL;
}

const axon_coll_algo_t *axon_coll_algo_select(axon_team_h team, const axon_coll_args_t *args)
{
    unsigned chosen = team->worker->context->opts.coll_algo[args->coll];
    const axon_coll_algo_t *algo;

    if (chosen != 0) {
        algo = axon_coll_algo_by_name(args->coll, axon_coll_algo_names[args->coll][chosen]);
        if (algo != NULL) {
            return algo;
        }
    }
    if ((args->coll == AXON_COLL_ALLREDUCE) && (team->size > 1) &&
        (args->count >= team->size) &&
        (args->count * axon_dt_size(args->dt) >= AXON_COLL_ALLREDUCE_RING_BYTES)) {
        return &axon_coll_allreduce_ring;
    }
    if ((args->coll == AXON_COLL_ALLGATHER) && (team->size > 2) &&
        (args->count * axon_dt_size(args->dt) * team->size < AXON_COLL_ALLGATHER_RING_BYTES)) {
        return &axon_coll_allgather_bruck;
    }
    return axon_coll_algos[args->coll][0];
}
