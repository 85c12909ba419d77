/* The collectives' hooks in the core (api/protocols.c): teams live and die with the worker. */
#include "coll.h"

static axon_status_t axon_coll_worker_init(axon_worker_h worker)
{
    axon_list_init(&worker->teams);
    axon_list_init(&worker->coll_polls);
    worker->coll_xc       = NULL;
    worker->team_gens     = NULL;
    worker->num_team_gens = 0;
    return AXON_OK;
}

static void axon_coll_worker_cleanup(axon_worker_h worker)
{
    axon_team_destroy_all(worker);
    axon_coll_offload_worker_close(worker);
}

const axon_proto_ops_t axon_coll_proto = {
    .name           = "coll",
    .worker_init    = axon_coll_worker_init,
    .worker_cleanup = axon_coll_worker_cleanup,
    .peer_failed    = axon_coll_peer_failed,
    .progress       = axon_coll_offload_progress,
};
