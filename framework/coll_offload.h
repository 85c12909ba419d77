/*
 * Collective offload in the component ABI: a component whose device runs a
 * whole collective once it is posted (components/xchannel: the cross-channel
 * chains of seed §8.9). The collectives layer opens it once per worker,
 * connects a team during the team's join and hands it the collectives it can
 * run; whatever it refuses runs in software.
 */
#ifndef AXON_COLL_OFFLOAD_H
#define AXON_COLL_OFFLOAD_H

#include <stddef.h>
#include <stdint.h>
#include "axon_status.h"

struct axon_resource;

typedef struct axon_xc_worker axon_xc_worker_t;
typedef struct axon_xc_team   axon_xc_team_t;
typedef struct axon_xc_coll   axon_xc_coll_t;

typedef enum {
    AXON_XC_BARRIER = 0,
    AXON_XC_BCAST,
    AXON_XC_ALLREDUCE,
} axon_xc_kind_t;

/* Reductions the device computes: 64-bit elements. */
typedef enum {
    AXON_XC_INT64 = 0,
    AXON_XC_UINT64,
    AXON_XC_DOUBLE,
} axon_xc_type_t;

typedef enum {
    AXON_XC_SUM = 0,
    AXON_XC_BAND,
    AXON_XC_BXOR,
    AXON_XC_BOR,
    AXON_XC_MAX,
    AXON_XC_MIN,
} axon_xc_op_t;

typedef struct axon_xc_args {
    axon_xc_kind_t kind;
    const void    *src;    /* allreduce: count elements; bcast: the root's bytes */
    void          *dst;    /* allreduce: count elements; bcast: the others' bytes */
    size_t         count;  /* allreduce: elements; bcast: bytes */
    axon_xc_type_t type;   /* allreduce */
    axon_xc_op_t   op;     /* allreduce */
    uint32_t       root;   /* bcast */
    uint32_t       radix;  /* bcast: k of the k-nomial tree (2..) */
} axon_xc_args_t;

typedef struct axon_coll_offload_ops {
    /* The worker's handle on the device of rsc (one context for all its teams). */
    axon_status_t (*worker_open)(const struct axon_resource *rsc, const void *config,
                                 axon_xc_worker_t **worker_p);
    void          (*worker_close)(axon_xc_worker_t *worker);
    /* Bytes each member gives to its team's address exchange. */
    size_t        (*team_addr_len)(uint32_t size);
    /* Member rank's queues of a team of size, not yet connected; its address into addr. */
    axon_status_t (*team_open)(axon_xc_worker_t *worker, uint32_t rank, uint32_t size,
                               axon_xc_team_t **team_p, void *addr);
    /* addrs: every member's address in rank order. Peers may send once it returns. */
    axon_status_t (*team_connect)(axon_xc_team_t *team, const void *addrs);
    /* A member failed: every chain of the team ends in error, now and later. */
    void          (*team_fail)(axon_xc_team_t *team);
    void          (*team_close)(axon_xc_team_t *team);
    /* Would coll_init take args (buffers aside)? AXON_OK or AXON_ERR_UNSUPPORTED. */
    axon_status_t (*coll_applies)(axon_xc_team_t *team, const axon_xc_args_t *args);
    /* AXON_ERR_UNSUPPORTED (with a debug line why): run it in software. The
     * buffers stay registered with the device until coll_free. */
    axon_status_t (*coll_init)(axon_xc_team_t *team, const axon_xc_args_t *args,
                               axon_xc_coll_t **coll_p);
    /* Hand the chain to the device; the buffers are read and written from now on. */
    axon_status_t (*coll_post)(axon_xc_coll_t *coll);
    /* AXON_INPROGRESS while the chain runs, else how it ended (polls the device). */
    axon_status_t (*coll_test)(axon_xc_coll_t *coll);
    void          (*coll_free)(axon_xc_coll_t *coll);
} axon_coll_offload_ops_t;

#endif
