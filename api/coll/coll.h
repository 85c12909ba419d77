/*
 * Collectives: teams and the engine that runs a collective as rounds of
 * point-to-point messages in the collectives' own tag space.
 *
 * A collective's tag is [team id 32 | sequence 20 | step 12]: every member
 * posts a team's collectives in the same order, so the n-th has the same
 * sequence number everywhere, and a message that arrives before its receive
 * is posted waits in the space's unexpected queue. An algorithm
 * (axon_coll_algo_t, coll_algo_*.c) is a state machine: each call of its
 * progress function posts the sends and receives of one round with
 * axon_coll_send/axon_coll_recv, and the engine calls it again once all of
 * them have completed, until it says AXON_OK.
 */
#ifndef AXON_COLL_INT_H
#define AXON_COLL_INT_H

#include "axon_int.h"
#include "coll_dt.h"
#include "coll_offload.h"

#define AXON_COLL_TAG_SEQ_BITS  20
#define AXON_COLL_TAG_STEP_BITS 12
#define AXON_COLL_STEP_MAX      ((1u << AXON_COLL_TAG_STEP_BITS) - 1)

typedef struct axon_coll_algo axon_coll_algo_t;

struct axon_team {
    axon_worker_h    worker;
    uint32_t         rank;
    uint32_t         size;
    uint32_t         id;          /* the same on every member: the tag's top bits */
    uint32_t         next_seq;    /* collectives posted so far */
    uint32_t         num_splits;  /* teams split from this one: their ids */
    uint32_t         num_colls;   /* the user's collectives not yet freed */
    axon_status_t    status;      /* AXON_INPROGRESS while members join, then OK or why not */
    int              own_eps;     /* made from a job: the team closes its endpoints */
    axon_ep_h       *eps;         /* eps[i] reaches member i; eps[rank] unused */
    uint64_t        *uuids;       /* members' worker ids */
    axon_coll_h      join;        /* the collective that makes the team ready */
    struct axon_team_join *joining; /* the join's rounds (team_join.c) */
    axon_xc_team_t  *xc;          /* offload queues, when every member can offload */
    uint64_t         xc_refusal;  /* else the first member's word that said why not */
    struct axon_team_split *split; /* a team being made by splitting this one */
    struct axon_team *parent;     /* split from it (NULL once it is destroyed) */
    axon_list_link_t children;    /* teams split from this one, alive */
    axon_list_link_t sibling;     /* in parent->children */
    axon_list_link_t link;        /* in the worker's teams */
    axon_list_link_t running;     /* collectives posted, not complete */
};

enum {
    AXON_COLL_F_FREED   = 1u << 0,  /* freed while operations were still out: free when done */
    AXON_COLL_F_IN_RUN  = 1u << 1,  /* the engine is calling the algorithm */
    AXON_COLL_F_RUNNING = 1u << 2,  /* on the team's running list */
    AXON_COLL_F_USER    = 1u << 3,  /* made by axon_coll_init (counted in team->num_colls) */
};

struct axon_coll {
    axon_team_h             team;
    axon_coll_args_t        args;        /* as given, IN_PLACE resolved into src/dst */
    const axon_coll_algo_t *algo;
    size_t                  dt_size;
    axon_coll_reduce_fn_t   reduce;      /* reductions: the kernel for (dt, op) */
    axon_status_t           status;      /* AXON_INPROGRESS while posted, else the last result */
    axon_status_t           error;       /* first failed operation of this post */
    axon_status_t           mismatch;    /* a message of another size than expected */
    uint32_t                seq;         /* of this post */
    uint32_t                step;        /* tag step of the next operations */
    uint32_t                phase;       /* the algorithm's own state */
    uint32_t                flags;       /* AXON_COLL_F_* */
    unsigned                pending;     /* operations of this round still out */
    axon_request_h          done_in_post; /* the last request that called back */
    unsigned                max_reqs;    /* room in reqs: most operations out at once */
    axon_request_h         *reqs;        /* those that returned a request, for cancel */
    uint8_t                *scratch;     /* algorithm's buffer, from init (reused by posts) */
    uint8_t                *copy_in;     /* in place, where the algorithm overwrites its input:
                                          * dst copied here at each post, the input from here */
    size_t                  copy_in_len;
    size_t                  scratch_len;
    int64_t                 state[8];    /* algorithm's counters (distance, peer, ...) */
    axon_xc_coll_t         *xc;          /* offloaded: the device's chain */
    axon_status_t           xc_status;   /* how the chain ended */
    axon_list_link_t        xc_link;     /* in the worker's polled offloads while it runs */
    void                  (*done)(axon_coll_h coll);  /* internal collectives: on completion */
    void                   *done_arg;
    axon_list_link_t        link;        /* in team->running */
};

struct axon_coll_algo {
    const char       *name;
    axon_coll_type_t  coll;
    /* Can it run args on team? 0: choose another. NULL: always. */
    int             (*applies)(axon_team_h team, const axon_coll_args_t *args);
    /* Sizes for init: scratch bytes and most operations out at once. */
    void            (*size)(axon_coll_h coll, size_t *scratch_len, unsigned *max_reqs);
    /* One round: post its operations; AXON_INPROGRESS while rounds remain,
     * AXON_OK when the result is complete, or an error. phase and step are 0
     * at the first call of a post. */
    axon_status_t   (*progress)(axon_coll_h coll);
};

/* Operations of the current round, to or from member peer, tagged with the
 * current step (the algorithm moves coll->step between rounds). */
axon_status_t axon_coll_send(axon_coll_h coll, uint32_t peer, const void *buf, size_t len);
axon_status_t axon_coll_recv(axon_coll_h coll, uint32_t peer, void *buf, size_t len);

/* Element helpers */
static inline uint8_t *axon_coll_dst_at(axon_coll_h coll, size_t elems)
{
    return (uint8_t *)coll->args.dst + elems * coll->dt_size;
}

static inline const uint8_t *axon_coll_src_at(axon_coll_h coll, size_t elems)
{
    return (const uint8_t *)coll->args.src + elems * coll->dt_size;
}

/* Algorithm table (coll_select.c): the default for (coll, team size, bytes),
 * or the one AXON_COLL_<NAME>_ALGO names. */
const axon_coll_algo_t *axon_coll_algo_select(axon_team_h team, const axon_coll_args_t *args);

/* Internal collectives (team join and split): run on team without the caller's
 * readiness check; done(coll) is called on completion. */
axon_status_t axon_coll_init_internal(axon_team_h team, const axon_coll_args_t *args,
                                      axon_coll_h *coll_p);
void          axon_coll_release(axon_coll_h coll);

/* A round's operation that is not a request (an offloaded chain) ended. */
void          axon_coll_op_end(axon_coll_h coll, axon_status_t status);

/* Offload (coll_offload.c): run args on the team's device, if it can. */
axon_status_t axon_coll_offload_init(axon_coll_h coll);
int           axon_coll_offload_applies(axon_team_h team, const axon_coll_args_t *args);
void          axon_coll_offload_cancel(axon_coll_h coll);
void          axon_coll_offload_release(axon_coll_h coll);
/*
 * This member's word for the join: bit 0 if it can offload over team, else
 * why not (bits 8..15) and the member concerned (bits 32..63).
 */
enum {
    AXON_COLL_XC_OK      = 1,
    AXON_COLL_XC_OFF     = 1,   /* reasons */
    AXON_COLL_XC_NO_DEV,
    AXON_COLL_XC_LANE,
    AXON_COLL_XC_OPEN,
};

static inline uint64_t axon_coll_xc_word(unsigned reason, uint32_t member)
{
    return ((uint64_t)member << 32) | ((uint64_t)reason << 8);
}

uint64_t      axon_coll_offload_word(axon_team_h team);
const axon_coll_offload_ops_t *axon_coll_offload_ops(axon_worker_h worker);
axon_xc_worker_t *axon_coll_offload_worker(axon_worker_h worker);
void          axon_coll_offload_worker_close(axon_worker_h worker);
unsigned      axon_coll_offload_progress(axon_worker_h worker);

/* Team join (team_join.c): the join's rounds; ready at once for a team of one. */
axon_status_t axon_team_join_start(axon_team_h team);
void          axon_team_join_cleanup(axon_team_h team);
/* The join's state and the team's offload queues go (team destroy). */
void          axon_team_offload_close(axon_team_h team);

/* End a running collective with status: its receives are canceled, sends left to finish. */
void          axon_coll_abort(axon_coll_h coll, axon_status_t status);

/* Fail every running collective of teams with member peer_uuid (peer failure). */
void          axon_coll_peer_failed(axon_worker_h worker, uint64_t peer_uuid,
                                    axon_status_t status);

extern const axon_proto_ops_t axon_coll_proto;

/* Destroy the teams the user left (worker destroy). */
void          axon_team_destroy_all(axon_worker_h worker);

#endif
