/*
 * axon_coll_init and axon_coll_query: arguments checked once, at init, with
 * a log line that names the bad value; in-place forms resolved into
 * src/dst so that algorithms never see AXON_COLL_FLAG_IN_PLACE.
 */
#include <stdlib.h>
#include <string.h>
#include "coll.h"
#include "log.h"

static const char *const axon_coll_names[AXON_COLL_LAST] = {
    "barrier", "bcast", "reduce", "allreduce", "allgather", "allgatherv", "alltoall",
    "alltoallv", "reduce_scatter", "gather", "scatter",
};

static int axon_coll_is_reduction(axon_coll_type_t coll)
{
    return (coll == AXON_COLL_REDUCE) || (coll == AXON_COLL_ALLREDUCE) ||
           (coll == AXON_COLL_REDUCE_SCATTER);
}

static int axon_coll_is_rooted(axon_coll_type_t coll)
{
    return (coll == AXON_COLL_BCAST) || (coll == AXON_COLL_REDUCE) ||
           (coll == AXON_COLL_GATHER) || (coll == AXON_COLL_SCATTER);
}

static size_t axon_coll_sum(const size_t *counts, uint32_t n)
{
    size_t total = 0;
    uint32_t i;

    for (i = 0; i < n; ++i) {
        total += counts[i];
    }
    return total;
}

/* Elements a buffer laid out by counts and displacements spans (gaps and any order). */
static size_t axon_coll_span(const size_t *counts, const size_t *displs, uint32_t n)
{
    size_t end = 0;
    uint32_t i;

    for (i = 0; i < n; ++i) {
        if ((counts[i] > 0) && (displs[i] + counts[i] > end)) {
            end = displs[i] + counts[i];
        }
    }
    return end;
}

/* Elements this member reads from src and writes to dst (before in-place). */
static void axon_coll_extent(const axon_coll_args_t *a, uint32_t n, uint32_t rank,
                             size_t *src_elems, size_t *dst_elems)
{
    int root = (rank == a->root);

    *src_elems = *dst_elems = 0;
    switch (a->coll) {
    case AXON_COLL_BARRIER:
        break;
    case AXON_COLL_BCAST:
        *dst_elems = a->count;
        break;
    case AXON_COLL_REDUCE:
        *src_elems = a->count;
        *dst_elems = root ? a->count : 0;
        break;
    case AXON_COLL_ALLREDUCE:
        *src_elems = *dst_elems = a->count;
        break;
    case AXON_COLL_ALLGATHER:
        *src_elems = a->count;
        *dst_elems = n * a->count;
        break;
    case AXON_COLL_ALLGATHERV:
        *src_elems = a->count;
        *dst_elems = axon_coll_span(a->dst_counts, a->dst_displs, n);
        break;
    case AXON_COLL_ALLTOALL:
        *src_elems = *dst_elems = n * a->count;
        break;
    case AXON_COLL_ALLTOALLV:
        *src_elems = axon_coll_span(a->src_counts, a->src_displs, n);
        *dst_elems = axon_coll_span(a->dst_counts, a->dst_displs, n);
        break;
    case AXON_COLL_REDUCE_SCATTER:
        *src_elems = a->dst_counts ? axon_coll_sum(a->dst_counts, n) : n * a->count;
        *dst_elems = a->dst_counts ? a->dst_counts[rank] : a->count;
        break;
    case AXON_COLL_GATHER:
        *src_elems = a->count;
        *dst_elems = root ? n * a->count : 0;
        break;
    case AXON_COLL_SCATTER:
        *src_elems = root ? n * a->count : 0;
        *dst_elems = a->count;
        break;
    default:
        break;
    }
}

/* The value checks every collective shares; a log line for the first bad one. */
static axon_status_t axon_coll_check(axon_team_h team, const axon_coll_args_t *a,
                                     axon_coll_args_t *out)
{
    const char *name;

    if ((unsigned)a->coll >= AXON_COLL_LAST) {
        axon_error("axon_coll_init: unknown collective %d", (int)a->coll);
        return AXON_ERR_INVALID_PARAM;
    }
    name = axon_coll_names[a->coll];
    *out = *a;
    if (!(a->field_mask & AXON_COLL_ARG_ROOT)) {
        out->root = 0;
    }
    if (!(a->field_mask & AXON_COLL_ARG_FLAGS)) {
        out->flags = 0;
    }
    if (!(a->field_mask & AXON_COLL_ARG_COUNTS)) {
        out->src_counts = out->src_displs = out->dst_counts = out->dst_displs = NULL;
    }
    if (a->coll == AXON_COLL_BARRIER) {
        return AXON_OK;
    }
    if (axon_dt_size(a->dt) == 0) {
        axon_error("axon_coll_init: %s: unknown data type %d", name, (int)a->dt);
        return AXON_ERR_INVALID_PARAM;
    }
    if (axon_coll_is_reduction(a->coll)) {
        if (!(a->field_mask & AXON_COLL_ARG_OP) || ((unsigned)a->op >= AXON_OP_LAST)) {
            axon_error("axon_coll_init: %s: %s operation %d", name,
                       (a->field_mask & AXON_COLL_ARG_OP) ? "unknown" : "no (field_mask lacks "
                       "AXON_COLL_ARG_OP)", (int)a->op);
            return AXON_ERR_INVALID_PARAM;
        }
        if (!axon_coll_op_applies(a->dt, a->op)) {
            axon_error("axon_coll_init: %s: operation %s does not apply to %s", name,
                       axon_op_name(a->op), axon_dt_name(a->dt));
            return AXON_ERR_UNSUPPORTED;
        }
    }
    if (axon_coll_is_rooted(a->coll) && (out->root >= team->size)) {
        axon_error("axon_coll_init: %s: root %u is not a member (team of %u)", name, out->root,
                   team->size);
        return AXON_ERR_INVALID_PARAM;
    }
    if (((a->coll == AXON_COLL_ALLGATHERV) || (a->coll == AXON_COLL_ALLTOALLV)) &&
        ((out->dst_counts == NULL) || (out->dst_displs == NULL) ||
         ((a->coll == AXON_COLL_ALLTOALLV) &&
          ((out->src_counts == NULL) || (out->src_displs == NULL))))) {
        axon_error("axon_coll_init: %s needs its count and displacement arrays "
                   "(AXON_COLL_ARG_COUNTS)", name);
        return AXON_ERR_INVALID_PARAM;
    }
    if ((a->coll == AXON_COLL_ALLGATHERV) && (out->dst_counts[team->rank] != a->count)) {
        axon_error("axon_coll_init: allgatherv: rank %u contributes count %zu but "
                   "dst_counts[%u] is %zu", team->rank, a->count, team->rank,
                   out->dst_counts[team->rank]);
        return AXON_ERR_INVALID_PARAM;
    }
    return AXON_OK;
}

/* In place: where the input really is. Returns the bytes of dst that must be
 * copied aside at each post (the algorithm overwrites its input), or 0. */
static axon_status_t axon_coll_resolve_in_place(axon_team_h team, axon_coll_args_t *a,
                                                size_t dt_size, size_t *copy_in)
{
    uint32_t r = team->rank;
    int root = (r == a->root);
    size_t src_elems, dst_elems;

    *copy_in = 0;
    if (!(a->flags & AXON_COLL_FLAG_IN_PLACE)) {
        return AXON_OK;
    }
    axon_coll_extent(a, team->size, r, &src_elems, &dst_elems);
    switch (a->coll) {
    case AXON_COLL_ALLREDUCE:
        a->src = a->dst;
        return AXON_OK;
    case AXON_COLL_REDUCE:
    case AXON_COLL_GATHER:
        if (!root) {
            break;
        }
        a->src = (a->coll == AXON_COLL_REDUCE) ? a->dst :
                 (const uint8_t *)a->dst + r * a->count * dt_size;
        return AXON_OK;
    case AXON_COLL_ALLGATHER:
        a->src = (const uint8_t *)a->dst + r * a->count * dt_size;
        return AXON_OK;
    case AXON_COLL_ALLGATHERV:
        a->src = (const uint8_t *)a->dst + a->dst_displs[r] * dt_size;
        return AXON_OK;
    case AXON_COLL_ALLTOALL:
    case AXON_COLL_ALLTOALLV:
        if (a->coll == AXON_COLL_ALLTOALLV) {
            a->src_counts = a->dst_counts;
            a->src_displs = a->dst_displs;
        }
        *copy_in = dst_elems * dt_size;
        return AXON_OK;
    case AXON_COLL_REDUCE_SCATTER:
        *copy_in = src_elems * dt_size;
        return AXON_OK;
    case AXON_COLL_SCATTER:
        if (!root) {
            break;
        }
        a->dst = NULL;
        return AXON_OK;
    default:
        break;
    }
    axon_error("axon_coll_init: %s on rank %u cannot be in place (MPI_IN_PLACE)",
               axon_coll_names[a->coll], r);
    return AXON_ERR_INVALID_PARAM;
}

static axon_status_t axon_coll_check_buffers(axon_team_h team, const axon_coll_args_t *a,
                                             const axon_coll_args_t *orig)
{
    size_t src_elems, dst_elems;

    axon_coll_extent(a, team->size, team->rank, &src_elems, &dst_elems);
    if ((a->flags & AXON_COLL_FLAG_IN_PLACE) && (a->coll == AXON_COLL_SCATTER) &&
        (team->rank == a->root)) {
        dst_elems = 0;
    }
    if (((a->src == NULL) && (src_elems > 0) && !(orig->flags & AXON_COLL_FLAG_IN_PLACE)) ||
        ((a->dst == NULL) && (dst_elems > 0))) {
        axon_error("axon_coll_init: %s on rank %u: NULL %s for %zu elements",
                   axon_coll_names[a->coll], team->rank, (a->dst == NULL) ? "dst" : "src",
                   (a->dst == NULL) ? dst_elems : src_elems);
        return AXON_ERR_INVALID_PARAM;
    }
    return AXON_OK;
}

axon_status_t axon_coll_init(axon_team_h team, const axon_coll_args_t *args, axon_coll_h *coll_p)
{
    axon_coll_args_t a;
    axon_status_t status;
    size_t copy_in;

    if ((team == NULL) || (args == NULL) || (coll_p == NULL)) {
        axon_error("axon_coll_init: NULL %s", !team ? "team" : !args ? "args" : "coll_p");
        return AXON_ERR_INVALID_PARAM;
    }
    if (team->status != AXON_OK) {
        axon_error("axon_coll_init: team 0x%x is %s", team->id,
                   (team->status == AXON_INPROGRESS) ? "not ready yet" :
                   axon_status_string(team->status));
        return (team->status == AXON_INPROGRESS) ? AXON_ERR_BUSY : team->status;
    }
    status = axon_coll_check(team, args, &a);
    if (status == AXON_OK) {
        status = axon_coll_check_buffers(team, &a, args);
    }
    if (status == AXON_OK) {
        status = axon_coll_resolve_in_place(team, &a, axon_dt_size(a.dt), &copy_in);
    }
    if (status != AXON_OK) {
        return status;
    }
    status = axon_coll_init_internal(team, &a, coll_p);
    if (status != AXON_OK) {
        return status;
    }
    if (copy_in > 0) {
        (*coll_p)->copy_in = malloc(copy_in);
        if ((*coll_p)->copy_in == NULL) {
            axon_coll_release(*coll_p);
            return AXON_ERR_NO_MEMORY;
        }
        (*coll_p)->copy_in_len = copy_in;
        (*coll_p)->args.src    = (*coll_p)->copy_in;
    }
    (*coll_p)->flags |= AXON_COLL_F_USER;
    ++team->num_colls;
    return AXON_OK;
}

axon_status_t axon_coll_query(axon_team_h team, axon_coll_type_t coll, axon_dt_t dt,
                              axon_op_t op, size_t size, axon_coll_attr_t *attr)
{
    const axon_coll_algo_t *algo;
    axon_coll_args_t args;

    if (team == NULL) {
        axon_error("axon_coll_query: NULL team");
        return AXON_ERR_INVALID_PARAM;
    }
    if (((unsigned)coll >= AXON_COLL_LAST) || ((unsigned)dt >= AXON_DT_LAST) ||
        ((unsigned)op >= AXON_OP_LAST)) {
        axon_error("axon_coll_query: collective %d, data type %d or operation %d out of range",
                   (int)coll, (int)dt, (int)op);
        return AXON_ERR_INVALID_PARAM;
    }
    if (axon_coll_is_reduction(coll) && !axon_coll_op_applies(dt, op)) {
        return AXON_ERR_UNSUPPORTED;
    }
    memset(&args, 0, sizeof(args));
    args.coll  = coll;
    args.dt    = dt;
    args.op    = op;
    args.count = size / axon_dt_size(dt);
    algo = axon_coll_algo_select(team, &args);
    if (algo == NULL) {
        return AXON_ERR_UNSUPPORTED;
    }
    if (attr != NULL) {
        snprintf(attr->algorithm, sizeof(attr->algorithm), "%s",
                 axon_coll_offload_applies(team, &args) ? "offload" : algo->name);
    }
    return AXON_OK;
}
