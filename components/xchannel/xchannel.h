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

/* The team's QP to one other member. */
typedef struct axon_xc_peer {
    axon_dev_qp_t *qp;     /* managed sends; CALC capable */
    axon_dev_cq_t *rcq;    /* its receives only: what a WAIT on this member counts */
} axon_xc_peer_t;

struct axon_xc_team {
    axon_xc_worker_t *worker;
    uint32_t          rank;
    uint32_t          size;
    axon_xc_peer_t   *peers;      /* [size]; peers[rank] is empty */
    axon_dev_cq_t    *scq;        /* every send of the team: a chain's last WAIT counts them */
    axon_dev_qp_t    *mqp;        /* runs the chains' WAIT and ENABLE tasks */
    axon_dev_cq_t    *mcq;        /* the chains' last WAITs and errors: polled by the CPU */
    uint32_t          max_sge;    /* operands of one CALC send */
    uint64_t          next_seq;   /* posts so far: a chain's tasks carry its number */
    axon_list_link_t  posted;     /* collectives whose chain runs, in post order */
    axon_list_link_t  waiting;    /* posted by the user, queues full: they follow in order */
    unsigned          in_flight;  /* queue slots the running chains hold (AXON_XC_QP_WRS) */
    unsigned          unwaited;   /* sends of the last chain that the next one waits for */
    axon_xc_coll_t   *unwaited_by; /* that chain: freeing it must wait, its sends read it */
    axon_list_link_t  graveyard;  /* freed collectives whose last sends may still run */
    axon_status_t     failed;     /* AXON_OK, or why no chain can run any more */
};

/*
 * A collective compiled into work requests once (at init): each post hands
 * the same lists to the device again. wrs[] holds every send WR and task,
 * rwrs[] the receives; tasks[] the post_task items linking them.
 *
 * Twice, in fact, on two halves of the collective's own buffers, used by
 * posts in turn: a chain ends before its last sends are acknowledged (the
 * next chain waits for them), so post k + 1 must neither write its input
 * nor receive into what post k's sends may read again (a retransmission).
 * Post k + 2 may: post k + 1 completed, and with it every earlier send.
 */
#define AXON_XC_QP_WRS       256    /* per member QP; what chains in flight may hold */
#define AXON_XC_MQP_WRS      4096   /* the management QP's tasks */
#define AXON_XC_MAX_OPERANDS 16     /* SGEs of one CALC send we ask a QP for */
#define AXON_XC_BCAST_STAGE  8192   /* bcast bytes sent through the chain's own buffer */
/* Allreduce: CALC sends per round, each of the device's max_calc_vector elements at most */
#define AXON_XC_MAX_CHUNKS 32
#define AXON_XC_MAX_ITEMS 3   /* per member: receives, sends; plus the management QP */

typedef struct axon_xc_chain {
    axon_dev_send_wr_t *wrs;
    axon_dev_recv_wr_t *rwrs;
    axon_dev_sge_t     *sges;
    axon_dev_task_t    *tasks;
    uint32_t            n;                  /* team size */
    unsigned            num_wrs, num_rwrs, num_sges, num_tasks;
    unsigned            num_sends;          /* every send is signaled: the last WAIT counts them */
    unsigned            slots;              /* most WRs it puts on one queue (scaled for the MQP) */
    int32_t            *rcq_waits;          /* per member: WAITs on its rcq so far */
    int32_t            *enables;            /* per member: sends released so far */
    int32_t            *posted_sends;       /* per member: sends posted so far */
    axon_dev_send_wr_t **send_tail;         /* per member: last send WR, to link the next */
    axon_dev_recv_wr_t **recv_tail;
    axon_dev_send_wr_t *task_head, *task_tail;  /* the management QP's tasks */
    axon_dev_send_wr_t *scq_first;          /* WAIT for the sends of the chains before */
    axon_dev_send_wr_t *scq_last;           /* WAIT for its own sends, or NULL */
} axon_xc_chain_t;

struct axon_xc_coll {
    axon_xc_team_t   *team;
    axon_xc_args_t    args;
    axon_xc_chain_t   chains[2];   /* post k runs chains[k % 2] */
    unsigned          set;         /* the half of the post in flight (or the last) */
    axon_dev_mr_t    *mr;          /* the user's buffer (bcast) */
    axon_dev_mr_t    *scratch_mr;  /* allreduce, small bcast: the chains' own buffers */
    uint64_t         *scratch;     /* two halves of half_len bytes */
    size_t            half_len;
    uint64_t         *x_be[2];     /* allreduce: the input in network order */
    uint64_t         *res_be[2];   /* allreduce, an even member of a pair: the result */
    uint64_t         *res_ops[2][AXON_XC_MAX_OPERANDS];  /* allreduce: the CPU reduces these */
    unsigned          num_res_ops;
    uint8_t          *stage[2];    /* bcast up to AXON_XC_BCAST_STAGE: the chain's copy */
    uint32_t          chunk;       /* allreduce: elements per CALC send */
    uint64_t          seq;         /* of the post in flight */
    axon_status_t     status;
    axon_list_link_t  link;        /* in team->posted while its chain runs, or team->waiting */
};

/* The device's names of the element types and operations (xc_chain.c). */
extern const axon_dev_calc_data_type_t axon_xc_calc_types[];
extern const axon_dev_calc_op_t        axon_xc_calc_ops[];

/* Chain building (xc_chain.c), m another member. */
axon_status_t axon_xc_chain_init(axon_xc_chain_t *ch, const axon_xc_team_t *team,
                                 unsigned max_wrs, unsigned max_sges);
void          axon_xc_chain_cleanup(axon_xc_chain_t *ch);
void          axon_xc_chain_recv(axon_xc_chain_t *ch, uint32_t m, void *buf, size_t len,
                                 uint32_t lkey);
/* A send to m of the operands (n SGEs of len bytes each): n > 1 is a CALC send. */
void          axon_xc_chain_send(axon_xc_chain_t *ch, const axon_xc_coll_t *coll, uint32_t m,
                                 void *const *ops, unsigned n, size_t len, uint32_t lkey);
/* Tasks: release m's sends posted so far; wait for m's next receive. */
void          axon_xc_chain_enable(axon_xc_chain_t *ch, const axon_xc_team_t *team, uint32_t m);
void          axon_xc_chain_wait_recv(axon_xc_chain_t *ch, const axon_xc_team_t *team,
                                      uint32_t m);
/* Mark each queue's last task, link the task list; with own_sends the chain
 * ends once its own sends completed (they read the user's buffer). */
axon_status_t axon_xc_chain_finish(axon_xc_chain_t *ch, axon_xc_team_t *team, int own_sends);

/* Compilers, one per collective (xc_barrier.c, xc_bcast.c, xc_allreduce.c). */
axon_status_t axon_xc_barrier_compile(axon_xc_coll_t *coll, unsigned set);
axon_status_t axon_xc_bcast_compile(axon_xc_coll_t *coll, unsigned set);
axon_status_t axon_xc_allreduce_compile(axon_xc_coll_t *coll, unsigned set);
axon_status_t axon_xc_allreduce_check(const axon_xc_team_t *team, const axon_xc_args_t *args);
void          axon_xc_allreduce_result(axon_xc_coll_t *coll);

/* xc_team.c */
extern const axon_coll_offload_ops_t axon_xc_ops;
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
void          axon_xc_team_bury(axon_xc_team_t *team);

static inline uint32_t axon_xc_log2_ceil(uint32_t n)
{
    uint32_t k = 0;

    while ((1u << k) < n) {
        ++k;
    }
    return k;
}

#endif
