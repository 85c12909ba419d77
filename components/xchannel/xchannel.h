/*
 * components/xchannel: collectives run by the device as cross-channel chains
 * (seed §8.9). A team has an RC QP to every other member, its sends managed
 * (held until a SEND_ENABLE releases them), each with a receive CQ of its own
 * that WAIT tasks count, and a management QP whose task list orders the whole
 * collective: wait for a message, release the sends that depend on it. The
 * CPU posts the chain and later finds one completion: everything in between
 * runs on the device (softib: its progress thread).
 */
#ifndef AXON_XCHANNEL_H
#define AXON_XCHANNEL_H

#include "coll_offload.h"
#include "component.h"
#include "list.h"
#include "verbs_common.h"

typedef struct axon_xc_config {
    double   timeout;      /* RC ack timeout, seconds */
    unsigned retry_count;
    unsigned gid_index;
} axon_xc_config_t;

struct axon_xc_worker {
    axon_verbs_dev_t        dev;
    const axon_xc_config_t *config;
};

/* The team's QP to one other member, and the ring its messages land in. */
typedef struct axon_xc_peer {
    axon_dev_qp_t *qp;       /* managed sends; CALC capable */
    axon_dev_cq_t *rcq;      /* its receives only: what a WAIT on this member counts */
    uint64_t       claimed;  /* ring receives the chains handed to the device so far use */
    uint64_t       posted;   /* ring receives posted so far */
} axon_xc_peer_t;

/*
 * Queue sizes. Every member QP keeps AXON_XC_RING receives posted into slots
 * of its own, so a member's message never finds its receiver unready (an RNR
 * NAK costs the 10 us RNR timer): chains name slots, not buffers, and a post
 * patches the slots its messages will land in into its SGEs.
 *
 * A chain ends when its result is in, not when its sends are acknowledged:
 * chain s's first task waits for the sends of chain s - AXON_XC_LAG, so a
 * post's first messages leave at once instead of after the last chain's
 * acknowledgements. What those sends read stays untouched until then: a
 * collective's input has AXON_XC_LAG + 1 sets that posts take in turn, and
 * a slot is posted again when the chain AXON_XC_LAG later completed. So the
 * running chains and the last AXON_XC_LAG completed ones hold the ring and
 * the send queues: chains take at most a (LAG + 1)-th of them each, and run
 * together while they fit in that.
 */
#define AXON_XC_LAG          2
#define AXON_XC_SETS         (AXON_XC_LAG + 1)
#define AXON_XC_RING         96     /* receives posted per member QP; also its send queue */
#define AXON_XC_CHAIN_MAX    (AXON_XC_RING / AXON_XC_SETS)  /* queue slots of running chains */
#define AXON_XC_MQP_WRS      4096   /* the management QP's tasks */
#define AXON_XC_MAX_OPERANDS 16     /* SGEs of one CALC send we ask a QP for */
#define AXON_XC_MAX_SLOT     4096   /* bytes per slot: max_calc_vector elements, at most this */
/* Messages per member and chain: allreduce's CALC sends per round, bcast's chunks */
#define AXON_XC_MAX_CHUNKS 32
#define AXON_XC_MAX_ITEMS 2   /* per member: sends; plus the management QP */

struct axon_xc_team {
    axon_xc_worker_t *worker;
    uint32_t          rank;
    uint32_t          size;
    axon_xc_peer_t   *peers;      /* [size]; peers[rank] is empty */
    axon_dev_cq_t    *scq;        /* every send of the team: a chain's last WAIT counts them */
    axon_dev_qp_t    *mqp;        /* runs the chains' WAIT and ENABLE tasks */
    axon_dev_cq_t    *mcq;        /* the chains' last WAITs and errors: polled by the CPU */
    uint32_t          max_sge;    /* operands of one CALC send */
    uint32_t          slot_len;   /* the largest message: one CALC vector */
    uint8_t          *ring;       /* AXON_XC_RING slots per other member */
    axon_dev_mr_t    *ring_mr;
    axon_dev_recv_wr_t *ring_wrs; /* AXON_XC_RING, to post receives with */
    axon_dev_sge_t   *ring_sges;
    uint32_t         *done_from;  /* [LAG][size]: receives of the last LAG completed chains, */
    int32_t          *done_count; /* chain c's at c % LAG: from these members, this many */
    unsigned          num_done[AXON_XC_LAG];
    uint64_t          next_seq;   /* posts so far: a chain's tasks carry its number */
    axon_list_link_t  posted;     /* collectives whose chain runs, in post order */
    axon_list_link_t  waiting;    /* posted by the user, queues full: they follow in order */
    unsigned          in_flight;  /* queue slots the running chains hold (AXON_XC_CHAIN_MAX) */
    uint64_t          submitted;  /* chains handed to the device so far */
    uint64_t          completed;  /* chains completed so far (in submission order) */
    unsigned          unwaited[AXON_XC_LAG];  /* chain s's sends, at s % LAG */
    axon_list_link_t  graveyard;  /* freed collectives whose last sends may still run */
    axon_status_t     failed;     /* AXON_OK, or why no chain can run any more */
};

/* A vector a chain reads: a buffer of the collective's, or what came from a member. */
typedef struct axon_xc_opnd {
    void    *addr;     /* the collective's own buffer, or NULL: */
    uint32_t m, idx;   /* the chain's idx-th receive from member m (and on, chunk by chunk) */
} axon_xc_opnd_t;

/* An address known only at post: the slot of the chain's idx-th receive from m. */
typedef struct axon_xc_patch {
    uint64_t *field;   /* an SGE's address, or a piece of the result the CPU reads */
    uint32_t  m, idx;
} axon_xc_patch_t;

/*
 * A collective compiled into work requests once (at init): each post hands
 * the same lists to the device again, its slots patched in. wrs[] holds
 * every send WR and task; tasks[] the post_task items linking them.
 *
 * AXON_XC_SETS times, in fact, on as many sets of the collective's input
 * (the CPU writes it at post), used by posts in turn: post k + SETS writes
 * what post k's sends may read again (a retransmission) only after post
 * k + SETS - 1 completed, and with it every send LAG chains before it.
 */
typedef struct axon_xc_chain {
    axon_dev_send_wr_t *wrs;
    axon_dev_sge_t     *sges;
    axon_xc_patch_t    *patches;
    axon_dev_task_t    *tasks;
    uint32_t            n;                  /* team size */
    unsigned            num_wrs, num_sges, num_patches, num_tasks;
    unsigned            num_sends;          /* every send is signaled: the next chain counts them */
    unsigned            slots;              /* most WRs it puts on one queue (scaled for the MQP) */
    int32_t            *rcq_waits;          /* per member: WAITs on its rcq so far */
    int32_t            *enables;            /* per member: sends released so far */
    int32_t            *posted_sends;       /* per member: sends posted so far */
    int32_t            *recvs;              /* per member: ring receives it uses */
    uint32_t           *from;               /* the members it receives from */
    unsigned            num_from;
    axon_dev_send_wr_t **send_tail;         /* per member: last send WR, to link the next */
    axon_dev_send_wr_t *task_head, *task_tail;  /* the management QP's tasks */
    axon_dev_send_wr_t *scq_first;          /* WAIT for the sends of the chains before */
} axon_xc_chain_t;

struct axon_xc_coll {
    axon_xc_team_t   *team;
    axon_xc_args_t    args;
    axon_xc_chain_t   chains[AXON_XC_SETS];   /* post k runs chains[k % SETS] */
    unsigned          set;         /* the set of the post in flight (or the last) */
    axon_dev_mr_t    *scratch_mr;  /* the chains' own buffers */
    uint8_t          *scratch;     /* SETS parts of set_len bytes */
    size_t            set_len;
    uint8_t          *input[AXON_XC_SETS];   /* allreduce: x in network order; bcast root: dst */
    uint64_t         *pieces[AXON_XC_SETS];  /* the result's chunks at completion (addresses) */
    unsigned          num_pieces;  /* allreduce: operands times chunks; bcast: chunks */
    size_t            chunk;       /* bytes per message of the vector */
    uint64_t          seq;         /* of the post in flight */
    uint64_t          safe_at;     /* team->completed from which no send reads its buffers */
    axon_status_t     status;
    axon_list_link_t  link;        /* in team->posted while its chain runs, or team->waiting */
};

/* The device's names of the element types and operations (xc_chain.c). */
extern const axon_dev_calc_data_type_t axon_xc_calc_types[];
extern const axon_dev_calc_op_t        axon_xc_calc_ops[];

/* Chain building (xc_chain.c), m another member. */
axon_status_t axon_xc_chain_init(axon_xc_chain_t *ch, const axon_xc_team_t *team,
                                 unsigned max_wrs, unsigned max_sges, unsigned max_patches);
void          axon_xc_chain_cleanup(axon_xc_chain_t *ch);
/* The chain's next ring receive from m: its index among the chain's receives from m. */
uint32_t      axon_xc_chain_recv(axon_xc_chain_t *ch, uint32_t m);
/* Chunk c (of chunk bytes) of vector v. */
axon_xc_opnd_t axon_xc_opnd_chunk(const axon_xc_opnd_t *v, unsigned c, size_t chunk);
/* *field is op's address, now or (a ring slot) at each post. */
void          axon_xc_chain_place(axon_xc_chain_t *ch, uint64_t *field, const axon_xc_opnd_t *op);
/* A send to m of the operands (n vectors of len bytes each): n > 1 is a CALC send. */
void          axon_xc_chain_send(axon_xc_chain_t *ch, const axon_xc_coll_t *coll, uint32_t m,
                                 const axon_xc_opnd_t *ops, unsigned n, size_t len);
/* Tasks: release m's sends posted so far; wait for m's next receive. */
void          axon_xc_chain_enable(axon_xc_chain_t *ch, const axon_xc_team_t *team, uint32_t m);
void          axon_xc_chain_wait_recv(axon_xc_chain_t *ch, const axon_xc_team_t *team,
                                      uint32_t m);
/* Mark each queue's last task, link the task list. */
axon_status_t axon_xc_chain_finish(axon_xc_chain_t *ch, axon_xc_team_t *team);

/* Compilers, one per collective (xc_barrier.c, xc_bcast.c, xc_allreduce.c). */
axon_status_t axon_xc_barrier_compile(axon_xc_coll_t *coll, unsigned set);
axon_status_t axon_xc_bcast_compile(axon_xc_coll_t *coll, unsigned set);
axon_status_t axon_xc_allreduce_compile(axon_xc_coll_t *coll, unsigned set);
axon_status_t axon_xc_allreduce_check(const axon_xc_team_t *team, const axon_xc_args_t *args);
void          axon_xc_allreduce_finish(axon_xc_coll_t *coll);

/* xc_team.c */
extern const axon_coll_offload_ops_t axon_xc_ops;
/* Member m's slot of the receive that is its seq-th since the team connected. */
static inline void *axon_xc_slot(const axon_xc_team_t *team, uint32_t m, uint64_t seq)
{
    uint32_t j = (m < team->rank) ? m : m - 1;

    return team->ring + ((size_t)j * AXON_XC_RING + seq % AXON_XC_RING) * team->slot_len;
}
/* Post again the receives of the completed chain kept at d (done_from): nothing reads them. */
void          axon_xc_team_repost(axon_xc_team_t *team, unsigned d);
axon_status_t axon_xc_worker_open(const axon_resource_t *rsc, const void *config,
                                  axon_xc_worker_t **worker_p);
void          axon_xc_worker_close(axon_xc_worker_t *worker);

/* xc_coll.c */
axon_status_t axon_xc_coll_applies(axon_xc_team_t *team, const axon_xc_args_t *args);
axon_status_t axon_xc_coll_init(axon_xc_team_t *team, const axon_xc_args_t *args,
                                axon_xc_coll_t **coll_p);
axon_status_t axon_xc_coll_post(axon_xc_coll_t *coll);
axon_status_t axon_xc_coll_test(axon_xc_coll_t *coll);
void          axon_xc_coll_free(axon_xc_coll_t *coll);
void          axon_xc_team_bury(axon_xc_team_t *team, int all);

static inline uint32_t axon_xc_log2_ceil(uint32_t n)
{
    uint32_t k = 0;

    while ((1u << k) < n) {
        ++k;
    }
    return k;
}

#endif
