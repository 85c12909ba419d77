/*
 * Teams: made from endpoints, from a PMIx job, or by splitting a team.
 *
 * Every member must derive the same team id without talking: the id hashes
 * the members' worker ids in rank order and how many teams this worker has
 * made over exactly those members before (MPI_Comm_dup makes several), or,
 * for a split, the parent's id, its split count and the color. A team is
 * ready once its join (team_join.c) completed: every member made it.
 */
#include <stdlib.h>
#include <string.h>
#include "coll.h"
#include "log.h"

struct axon_team_gen {
    uint64_t hash;
    uint32_t count;
};

/* A split in progress: the allgather of (color, key) over the parent. */
typedef struct axon_team_split {
    axon_team_h  parent;
    axon_coll_h  gather;
    int32_t     *pairs;      /* (color, key) of every parent member */
    int32_t      mine[2];    /* this member's color and key */
    uint32_t     index;      /* the parent's split count at the call */
    axon_team_h  child;      /* the new team (NULL: none for this member, or destroyed) */
} axon_team_split_t;

static uint64_t axon_team_hash(uint64_t h, uint64_t v)
{
    /* FNV-1a over the 8 bytes of v */
    unsigned i;

    for (i = 0; i < 8; ++i) {
        h ^= (v >> (8 * i)) & 0xff;
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint32_t axon_team_fold(uint64_t h)
{
    uint32_t id = (uint32_t)(h ^ (h >> 32));

    return id ? id : 1;    /* id 0 is never used: a zero tag is easy to make by mistake */
}

/* How many teams this worker made before over the members with this hash. */
static axon_status_t axon_team_generation(axon_worker_h worker, uint64_t hash, uint32_t *gen)
{
    struct axon_team_gen *gens;
    unsigned i;

    for (i = 0; i < worker->num_team_gens; ++i) {
        if (worker->team_gens[i].hash == hash) {
            *gen = worker->team_gens[i].count++;
            return AXON_OK;
        }
    }
    gens = realloc(worker->team_gens, (worker->num_team_gens + 1) * sizeof(*gens));
    if (gens == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    worker->team_gens = gens;
    gens[worker->num_team_gens].hash  = hash;
    gens[worker->num_team_gens].count = 1;
    ++worker->num_team_gens;
    *gen = 0;
    return AXON_OK;
}

static axon_team_h axon_team_alloc(axon_worker_h worker, uint32_t size, uint32_t rank)
{
    axon_team_h team = calloc(1, sizeof(*team));

    if (team == NULL) {
        return NULL;
    }
    team->eps   = calloc(size ? size : 1, sizeof(*team->eps));
    team->uuids = calloc(size ? size : 1, sizeof(*team->uuids));
    if ((team->eps == NULL) || (team->uuids == NULL)) {
        free(team->eps);
        free(team->uuids);
        free(team);
        return NULL;
    }
    team->worker = worker;
    team->size   = size;
    team->rank   = rank;
    team->status = AXON_INPROGRESS;
    axon_list_init(&team->running);
    axon_list_init(&team->children);
    axon_list_init(&team->sibling);
    axon_list_add_tail(&worker->teams, &team->link);
    return team;
}

static void axon_team_free(axon_team_h team)
{
    axon_team_h child, tmp;

    axon_list_for_each_safe(child, tmp, &team->children, sibling) {
        axon_list_del(&child->sibling);
        child->parent = NULL;
    }
    axon_list_del(&team->sibling);
    axon_list_del(&team->link);
    axon_team_offload_close(team);
    free(team->eps);
    free(team->uuids);
    free(team);
}

axon_status_t axon_team_create_nb(axon_worker_h worker, const axon_team_params_t *params,
                                  axon_team_h *team_p)
{
    const uint64_t need = AXON_TEAM_PARAM_EPS | AXON_TEAM_PARAM_RANK;
    uint64_t hash = 0xcbf29ce484222325ull;
    axon_team_h team;
    axon_status_t status;
    uint32_t i, gen;

    if ((worker == NULL) || (params == NULL) || (team_p == NULL)) {
        axon_error("axon_team_create_nb: NULL %s",
                   !worker ? "worker" : !params ? "params" : "team_p");
        return AXON_ERR_INVALID_PARAM;
    }
    if (!(worker->context->features & AXON_FEATURE_COLL)) {
        axon_error("axon_team_create_nb: the context was made without AXON_FEATURE_COLL");
        return AXON_ERR_INVALID_PARAM;
    }
    if (((params->field_mask & need) != need) || (params->size == 0) ||
        (params->rank >= params->size) || ((params->size > 1) && (params->eps == NULL))) {
        axon_error("axon_team_create_nb: bad parameters (field_mask 0x%llx, size %u, rank %u, "
                   "eps %p): a team needs eps, size >= 1 and rank < size",
                   (unsigned long long)params->field_mask, params->size, params->rank,
                   (const void *)params->eps);
        return AXON_ERR_INVALID_PARAM;
    }
    for (i = 0; i < params->size; ++i) {
        if ((i != params->rank) && (params->eps[i] == NULL)) {
            axon_error("axon_team_create_nb: eps[%u] is NULL (member %u of %u)", i, i,
                       params->size);
            return AXON_ERR_INVALID_PARAM;
        }
    }

    team = axon_team_alloc(worker, params->size, params->rank);
    if (team == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    for (i = 0; i < params->size; ++i) {
        team->eps[i]   = (i == params->rank) ? NULL : params->eps[i];
        team->uuids[i] = (i == params->rank) ? worker->uuid : axon_ep_peer_id(params->eps[i]);
        hash = axon_team_hash(hash, team->uuids[i]);
    }
    status = axon_team_generation(worker, hash, &gen);
    if (status != AXON_OK) {
        axon_team_free(team);
        return status;
    }
    team->id = axon_team_fold(axon_team_hash(hash, gen));
    status = axon_team_join_start(team);
    if (status != AXON_OK) {
        axon_team_destroy(team);
        return status;
    }
    *team_p = team;
    return AXON_OK;
}

axon_status_t axon_team_create_test(axon_team_h team)
{
    return (team != NULL) ? team->status : AXON_ERR_INVALID_PARAM;
}

axon_status_t axon_team_create_from_job(axon_worker_h worker, const axon_job_t *job,
                                        axon_team_h *team_p)
{
    axon_team_params_t params;
    axon_ep_params_t ep_params;
    axon_ep_h *eps;
    axon_status_t status = AXON_OK;
    uint32_t i;

    if ((worker == NULL) || (job == NULL) || (team_p == NULL) || (job->size == 0) ||
        (job->rank >= job->size) || (job->addresses == NULL)) {
        axon_error("axon_team_create_from_job: bad job (rank %u of %u, addresses %p)",
                   job ? job->rank : 0, job ? job->size : 0,
                   job ? (void *)job->addresses : NULL);
        return AXON_ERR_INVALID_PARAM;
    }
    eps = calloc(job->size, sizeof(*eps));
    if (eps == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    memset(&ep_params, 0, sizeof(ep_params));
    for (i = 0; (i < job->size) && (status == AXON_OK); ++i) {
        if (i == job->rank) {
            continue;
        }
        ep_params.address        = job->addresses[i];
        ep_params.address_length = job->address_lengths[i];
        status = axon_ep_create(worker, &ep_params, &eps[i]);
    }
    if (status == AXON_OK) {
        params.field_mask = AXON_TEAM_PARAM_EPS | AXON_TEAM_PARAM_RANK;
        params.eps        = eps;
        params.size       = job->size;
        params.rank       = job->rank;
        status = axon_team_create_nb(worker, &params, team_p);
    }
    if (status == AXON_OK) {
        (*team_p)->own_eps = 1;
    } else {
        for (i = 0; i < job->size; ++i) {
            if (eps[i] != NULL) {
                axon_request_h req = NULL;
                if (axon_ep_close_nb(eps[i], AXON_EP_CLOSE_FORCE, &req) == AXON_INPROGRESS) {
                    axon_request_free(req);
                }
            }
        }
    }
    free(eps);
    return status;
}

/* ---------------------------------------------------------------- split */

static void axon_team_split_end(axon_team_split_t *split)
{
    if (split->child != NULL) {
        split->child->split = NULL;
    }
    free(split->pairs);
    free(split);
}

/* Members of the new team in their order: by key, then by rank in the parent. */
static uint32_t axon_team_split_members(const axon_team_split_t *split, uint32_t *members)
{
    const int32_t *p = split->pairs;
    uint32_t i, j, n = 0;

    for (i = 0; i < split->parent->size; ++i) {
        if (p[2 * i] != split->mine[0]) {
            continue;
        }
        for (j = n; (j > 0) && (p[2 * members[j - 1] + 1] > p[2 * i + 1]); --j) {
            members[j] = members[j - 1];
        }
        members[j] = i;
        ++n;
    }
    return n;
}

static axon_status_t axon_team_split_fill(axon_team_split_t *split)
{
    axon_team_h parent = split->parent, team = split->child;
    uint32_t *members, i, n;
    uint64_t hash;

    members = malloc(parent->size * sizeof(*members));
    if (members == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    n = axon_team_split_members(split, members);
    free(team->eps);       /* the placeholders of a team whose members were unknown */
    free(team->uuids);
    team->eps   = calloc(n, sizeof(*team->eps));
    team->uuids = calloc(n, sizeof(*team->uuids));
    if ((team->eps == NULL) || (team->uuids == NULL)) {
        free(members);
        return AXON_ERR_NO_MEMORY;
    }
    team->size = n;
    for (i = 0; i < n; ++i) {
        if (members[i] == parent->rank) {
            team->rank = i;
        }
        team->eps[i]   = parent->eps[members[i]];
        team->uuids[i] = parent->uuids[members[i]];
    }
    free(members);
    hash     = axon_team_hash(axon_team_hash(0xcbf29ce484222325ull, parent->id), split->index);
    team->id = axon_team_fold(axon_team_hash(hash, (uint32_t)split->mine[0]));
    return AXON_OK;
}

static void axon_team_split_done(axon_coll_h gather)
{
    axon_team_split_t *split = gather->done_arg;
    axon_status_t status = gather->status;

    if ((split->child != NULL) && (status == AXON_OK)) {
        status = axon_team_split_fill(split);
    }
    if ((split->child != NULL) && (status == AXON_OK)) {
        split->child->split = NULL;
        status = axon_team_join_start(split->child);   /* agree on offload */
    }
    if (split->child != NULL) {
        if (status != AXON_OK) {
            split->child->status = status;
            axon_error("team 0x%x: split (color %d) failed: %s", split->parent->id,
                       split->mine[0], axon_status_string(status));
        }
    }
    axon_team_split_end(split);
    axon_coll_free(gather);
}

axon_status_t axon_team_split_nb(axon_team_h parent, int color, int key, axon_team_h *new_team_p)
{
    axon_team_split_t *split;
    axon_coll_args_t args;
    axon_status_t status;

    if ((parent == NULL) || (new_team_p == NULL) || (color < AXON_TEAM_COLOR_NONE)) {
        axon_error("axon_team_split_nb: %s (color %d)", !parent ? "NULL team" :
                   !new_team_p ? "NULL new_team_p" : "a negative color other than "
                   "AXON_TEAM_COLOR_NONE", color);
        return AXON_ERR_INVALID_PARAM;
    }
    if (parent->status != AXON_OK) {
        axon_error("axon_team_split_nb: team 0x%x is not ready: %s", parent->id,
                   axon_status_string(parent->status));
        return (parent->status == AXON_INPROGRESS) ? AXON_ERR_BUSY : parent->status;
    }
    split = calloc(1, sizeof(*split));
    if (split == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    split->parent  = parent;
    split->index   = parent->num_splits++;
    split->mine[0] = color;
    split->mine[1] = key;
    split->pairs   = malloc(2 * sizeof(int32_t) * parent->size);
    if ((color != AXON_TEAM_COLOR_NONE) && (split->pairs != NULL)) {
        split->child = axon_team_alloc(parent->worker, 0, 0);
        if (split->child != NULL) {
            split->child->split  = split;
            split->child->parent = parent;
            axon_list_add_tail(&parent->children, &split->child->sibling);
        }
    }
    if ((split->pairs == NULL) || ((color != AXON_TEAM_COLOR_NONE) && (split->child == NULL))) {
        status = AXON_ERR_NO_MEMORY;
        goto err;
    }
    memset(&args, 0, sizeof(args));
    args.coll  = AXON_COLL_ALLGATHER;
    args.src   = split->mine;
    args.dst   = split->pairs;
    args.count = 2;
    args.dt    = AXON_DT_INT32;
    status = axon_coll_init_internal(parent, &args, &split->gather);
    if (status != AXON_OK) {
        goto err;
    }
    split->gather->done     = axon_team_split_done;
    split->gather->done_arg = split;
    *new_team_p = split->child;
    status = axon_coll_post(split->gather);   /* may complete (and free split) at once */
    return status;

err:
    if (split->child != NULL) {
        axon_team_free(split->child);
    }
    free(split->pairs);
    free(split);
    return status;
}

/* ---------------------------------------------------------------- destroy, query */

/* Is a collective other than the join running (the allgather of a split)? */
static int axon_team_splitting(axon_team_h team)
{
    axon_coll_h coll;

    axon_list_for_each(coll, &team->running, link) {
        if (coll != team->join) {
            return 1;
        }
    }
    return 0;
}

axon_status_t axon_team_destroy(axon_team_h team)
{
    axon_request_h req;
    uint32_t i;

    if (team == NULL) {
        return AXON_OK;
    }
    if (team->num_colls > 0) {
        axon_error("axon_team_destroy: team 0x%x still has %u collectives: free them first",
                   team->id, team->num_colls);
        return AXON_ERR_BUSY;
    }
    if (team->own_eps && !axon_list_is_empty(&team->children)) {
        axon_error("axon_team_destroy: teams split from team 0x%x use its endpoints: destroy "
                   "them first", team->id);
        return AXON_ERR_BUSY;
    }
    if (axon_team_splitting(team)) {
        axon_error("axon_team_destroy: team 0x%x is still splitting: wait until the new team "
                   "is ready (axon_team_create_test)", team->id);
        return AXON_ERR_BUSY;
    }
    if (team->split != NULL) {
        team->split->child = NULL;   /* the parent's allgather goes on without us */
    }
    if (team->join != NULL) {
        /* still joining: end the join quietly (not through axon_team_joined) */
        axon_coll_h join = team->join;
        join->done = NULL;
        axon_coll_abort(join, AXON_ERR_CANCELED);
        axon_coll_free(join);
        team->join = NULL;
    }
    for (i = 0; team->own_eps && (i < team->size); ++i) {
        if ((team->eps[i] != NULL) &&
            (axon_ep_close_nb(team->eps[i], AXON_EP_CLOSE_FORCE, &req) == AXON_INPROGRESS)) {
            axon_request_free(req);
        }
    }
    axon_team_free(team);
    return AXON_OK;
}

/* Teams the user left at worker destroy (their collectives are the user's leak). */
void axon_team_destroy_all(axon_worker_h worker)
{
    axon_team_h team, tmp;

    /* Leaves first: a team made from a job owns the endpoints its children use. */
    while (!axon_list_is_empty(&worker->teams)) {
        axon_list_for_each_safe(team, tmp, &worker->teams, link) {
            if (axon_list_is_empty(&team->children)) {
                team->num_colls = 0;
                if (axon_team_destroy(team) != AXON_OK) {
                    axon_team_free(team);   /* still splitting: nothing will progress it */
                }
            }
        }
    }
    free(worker->team_gens);
    worker->team_gens     = NULL;
    worker->num_team_gens = 0;
}

uint32_t axon_team_rank(axon_team_h team)
{
    return team->rank;
}

uint32_t axon_team_size(axon_team_h team)
{
    return team->size;
}
