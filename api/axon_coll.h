/*
 * Axon collectives: teams of workers and non-blocking collective operations
 * (context feature AXON_FEATURE_COLL). Included by axon.h.
 *
 *   team        an ordered group of workers, one per member, each reaching
 *               the others through endpoints. A team has its own tag space:
 *               its traffic never matches the application's tag receives.
 *   collective  initialized once for a set of buffers (axon_coll_init), then
 *               posted, tested and posted again as often as wanted
 *               (persistent, as MPI_Allreduce_init), freed at the end.
 *
 * Every member posts the same collectives on a team in the same order, with
 * matching arguments (root, counts, datatype, operation), as in MPI. Results
 * do not depend on timing: a reduction combines the members' contributions
 * in the same order every time, for the same team and count.
 * Collectives complete from axon_worker_progress() of the team's worker.
 */
#ifndef AXON_COLL_H
#define AXON_COLL_H

#include "axon.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct axon_team *axon_team_h;
typedef struct axon_coll *axon_coll_h;

/* ---------------------------------------------------------------- teams */

enum {
    AXON_TEAM_PARAM_EPS  = 1u << 0,   /* eps, size: required */
    AXON_TEAM_PARAM_RANK = 1u << 1,   /* rank: required */
};

typedef struct {
    uint64_t         field_mask;  /* AXON_TEAM_PARAM_*: which fields are set */
    const axon_ep_h *eps;         /* eps[i] reaches member i; eps[rank] is ignored (may be NULL) */
    uint32_t         size;        /* members, >= 1 */
    uint32_t         rank;        /* this worker's place, < size */
} axon_team_params_t;

/**
 * Create a team from endpoints to its members (the caller keeps the
 * endpoints open while the team lives). Every member calls it with the
 * members in the same order. Returns AXON_OK with a team that is ready once
 * axon_team_create_test() says AXON_OK (every member has joined).
 */
axon_status_t axon_team_create_nb(axon_worker_h worker, const axon_team_params_t *params,
                                  axon_team_h *team_p);
/** AXON_INPROGRESS until every member joined, then AXON_OK (or the error that ended it). */
axon_status_t axon_team_create_test(axon_team_h team);

/**
 * A team of every process of a PMIx job (axon_job_bootstrap), in rank order:
 * the team opens its own endpoints and closes them when destroyed.
 */
axon_status_t axon_team_create_from_job(axon_worker_h worker, const axon_job_t *job,
                                        axon_team_h *team_p);

/** Members that pass this color to axon_team_split_nb get no new team. */
#define AXON_TEAM_COLOR_NONE (-1)

/**
 * Split a ready team, as MPI_Comm_split: the members that pass the same
 * color form a new team, ranked by key, then by their rank in team.
 * *new_team_p is set at once (NULL for AXON_TEAM_COLOR_NONE) and becomes
 * ready as axon_team_create_test() says. Collective over team.
 */
axon_status_t axon_team_split_nb(axon_team_h team, int color, int key, axon_team_h *new_team_p);

/**
 * Destroy a team: its collectives must be freed first (else AXON_ERR_BUSY),
 * and a split of it must have completed. Endpoints the team opened itself
 * (from a job) are closed, so teams split from such a team are destroyed
 * before it (else AXON_ERR_BUSY); the caller's endpoints are left open.
 */
axon_status_t axon_team_destroy(axon_team_h team);

uint32_t      axon_team_rank(axon_team_h team);
uint32_t      axon_team_size(axon_team_h team);

/* ---------------------------------------------------------------- data types and operations */

typedef enum {
    AXON_DT_INT8, AXON_DT_INT16, AXON_DT_INT32, AXON_DT_INT64,
    AXON_DT_UINT8, AXON_DT_UINT16, AXON_DT_UINT32, AXON_DT_UINT64,
    AXON_DT_FLOAT, AXON_DT_DOUBLE,
    /* (value, index) pairs for MINLOC/MAXLOC, laid out as the C structs
     * {float v; int32_t i;}, {double v; int32_t i;} (padded to 16 bytes),
     * {int32_t v; int32_t i;}, {int64_t v; int32_t i;} (padded to 16) */
    AXON_DT_FLOAT_INT32, AXON_DT_DOUBLE_INT32, AXON_DT_INT32_INT32, AXON_DT_INT64_INT32,
    AXON_DT_LAST
} axon_dt_t;

typedef enum {
    AXON_OP_SUM, AXON_OP_PROD, AXON_OP_MIN, AXON_OP_MAX,
    AXON_OP_BAND, AXON_OP_BOR, AXON_OP_BXOR,     /* integer types */
    AXON_OP_LAND, AXON_OP_LOR,                   /* integer types; results 0 or 1 */
    AXON_OP_MINLOC, AXON_OP_MAXLOC,              /* pair types; ties: the smaller index */
    AXON_OP_LAST
} axon_op_t;

/** Bytes of one element of dt; 0 for a value that is not a type. */
size_t        axon_dt_size(axon_dt_t dt);

/* ---------------------------------------------------------------- collectives */

typedef enum {
    AXON_COLL_BARRIER,
    AXON_COLL_BCAST,          /* dst: count elements, root's sent to every member */
    AXON_COLL_REDUCE,         /* src: count; dst (root): count */
    AXON_COLL_ALLREDUCE,      /* src: count; dst: count */
    AXON_COLL_ALLGATHER,      /* src: count; dst: size * count, member i's at i * count */
    AXON_COLL_ALLGATHERV,     /* src: count; dst: dst_counts[i] at dst_displs[i] */
    AXON_COLL_ALLTOALL,       /* src, dst: size * count; block i goes to / came from member i */
    AXON_COLL_ALLTOALLV,      /* src_counts/src_displs, dst_counts/dst_displs */
    AXON_COLL_REDUCE_SCATTER, /* src: size * count; dst: count, block rank of the reduction
                               * (with dst_counts: src is their sum, dst gets dst_counts[rank]) */
    AXON_COLL_GATHER,         /* src: count; dst (root): size * count */
    AXON_COLL_SCATTER,        /* src (root): size * count; dst: count */
    AXON_COLL_LAST
} axon_coll_type_t;

enum {
    /* The input is already where the output goes (MPI_IN_PLACE); src is
     * ignored. allreduce; reduce (root); allgather(v) and gather (root): the
     * own block already in dst; alltoall(v): dst holds the input;
     * reduce_scatter: dst holds the whole input, the result goes to its
     * start; scatter (root): src is read, the root's block stays there. */
    AXON_COLL_FLAG_IN_PLACE = 1u << 0,
};

enum {
    AXON_COLL_ARG_ROOT   = 1u << 0,   /* root (bcast, reduce, gather, scatter; else 0) */
    AXON_COLL_ARG_OP     = 1u << 1,   /* op (reductions) */
    AXON_COLL_ARG_COUNTS = 1u << 2,   /* the v-arrays (allgatherv, alltoallv, reduce_scatter) */
    AXON_COLL_ARG_FLAGS  = 1u << 3,   /* flags */
};

typedef struct {
    uint64_t         field_mask;   /* AXON_COLL_ARG_*: which optional fields are set */
    axon_coll_type_t coll;
    const void      *src;
    void            *dst;
    size_t           count;        /* elements of dt, as the collective says */
    axon_dt_t        dt;
    axon_op_t        op;
    uint32_t         root;
    uint32_t         flags;        /* AXON_COLL_FLAG_* */
    const size_t    *src_counts;   /* elements, per member */
    const size_t    *src_displs;   /* elements, per member */
    const size_t    *dst_counts;
    const size_t    *dst_displs;
} axon_coll_args_t;

/**
 * Check args and prepare a collective on team (ready) for posting; nothing
 * is sent. The buffers and arrays must stay valid until axon_coll_free().
 * AXON_ERR_INVALID_PARAM (logged, naming the bad value) for bad arguments;
 * AXON_ERR_UNSUPPORTED for what axon_coll_query refuses.
 */
axon_status_t axon_coll_init(axon_team_h team, const axon_coll_args_t *args, axon_coll_h *coll_p);
/** Start it (again, once the previous post completed). */
axon_status_t axon_coll_post(axon_coll_h coll);
/** AXON_INPROGRESS while posted and running, else the status of the last post. */
axon_status_t axon_coll_test(axon_coll_h coll);
/** Progress the team's worker until the collective completes; its status. */
axon_status_t axon_coll_wait(axon_coll_h coll);
/** Release a collective that is not running (AXON_ERR_BUSY if it is). */
axon_status_t axon_coll_free(axon_coll_h coll);

/** What axon_coll_query tells: the algorithm the team would run. */
typedef struct {
    char algorithm[32];
} axon_coll_attr_t;

/**
 * Can team run coll on dt with op (ignored where no reduction) for
 * messages of size bytes? AXON_OK (attr, if not NULL, names the algorithm),
 * AXON_ERR_UNSUPPORTED, or AXON_ERR_INVALID_PARAM for a value out of range.
 */
axon_status_t axon_coll_query(axon_team_h team, axon_coll_type_t coll, axon_dt_t dt,
                              axon_op_t op, size_t size, axon_coll_attr_t *attr);

#ifdef __cplusplus
}
#endif

#endif /* AXON_COLL_H */
