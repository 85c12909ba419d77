/*
 * rcm: the librdmacm ABI (rdma-core 44) on softib's connection manager,
 * built as a librdmacm.so.1 next to verbs_abi's libibverbs.so.1 so that
 * unmodified rdma_cm programs (rping, ucmatose) run on softib with the same
 * LD_LIBRARY_PATH (docs/design.md, "softib behind the libibverbs ABI").
 *
 * Each rdma_* object is the first member of a wrapper holding the CM's
 * object; the CM id's user context is the wrapper, so an event leads back
 * to the program's id. The CM and the ibv objects are libibverbs.so.1's,
 * reached through its bridge (vabi_rdmacm.h): id->verbs, the program's PD
 * and CQs and rdma_create_qp's QP all belong to that one softib instance.
 */
#ifndef AXON_RCM_H
#define AXON_RCM_H

#include <errno.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include "vabi_rdmacm.h"

typedef struct rcm_event rcm_event_t;

/*
 * An event channel. A synchronous id's is private (rcm_sync.c): made with
 * the id and shared by the ids its requests create; the events read on it
 * that another of its ids waits for are stashed until that id asks.
 */
typedef struct {
    struct rdma_event_channel ch;    /* what the program holds */
    axon_dev_cm_channel_t    *dev;
    int                       sync;
    pthread_mutex_t           lock;  /* sync: the fields below */
    pthread_cond_t            moved; /* a reader stashed an event or left */
    unsigned                  users; /* sync ids on it; the last destroys it */
    int                       reading;   /* a thread waits in the CM's get_event */
    rcm_event_t              *stash, **stash_tail;
} rcm_channel_t;

typedef struct {
    struct rdma_cm_id  id;           /* what the program holds */
    axon_dev_cm_id_t  *dev;
    unsigned           events;       /* given and not yet acknowledged */
    int                own_pd;       /* id.pd, send_cq, recv_cq were made here */
    int                own_cqs;
    int                sync;         /* no channel of the program's: calls wait */
    int                closing;      /* sync: being destroyed (its events are dropped) */
    struct ibv_qp_init_attr *request_qp; /* passive rdma_create_ep: each request's QP */
} rcm_id_t;

struct rcm_event {
    struct rdma_cm_event ev;         /* what the program holds */
    axon_dev_cm_event_t *dev;
    rcm_event_t         *next;       /* in a sync channel's stash */
};

#define RCM(_type, _obj) ((rcm_##_type##_t*)(void*)(_obj))

static inline const vabi_rdmacm_bridge_t *rcm_bridge(void)
{
    return axon_softib_rdmacm_bridge();
}

/* librdmacm's convention: 0, or -1 with errno. */
static inline int rcm_ret(int err)
{
    if (err != 0) {
        errno = err;
        return -1;
    }
    return 0;
}

/* A call softib's CM lacks: one log line naming it, then -1 with errno ENOSYS. */
int  rcm_unsupported(const char *call);
/* The id's fields the CM may have changed: device, port, addresses. */
int  rcm_id_sync(rcm_id_t *id);
/* The next event of a channel, wrapped (0 or errno); rdma_get_cm_event's body. */
int  rcm_event_get(rcm_channel_t *c, rcm_event_t **e_p);

/* rcm_sync.c: synchronous ids */
/* rdma_create_id without a channel: a private one for the id. */
int  rcm_sync_channel_new(struct rdma_event_channel **ch_p);
/* One more (a request's new id) or one fewer id on a sync channel; the last destroys it. */
void rcm_sync_channel_hold(rcm_channel_t *c);
void rcm_sync_channel_release(rcm_channel_t *c);
/* A sync id's call waits for the id's next event (librdmacm: ucma_complete): -1/errno on
 * an error event; the event stays in id.event until the next call or destroy. */
int  rcm_sync_complete(rcm_id_t *id);
/* Before a sync id goes: its stashed events and id.event are acknowledged. */
void rcm_sync_id_closing(rcm_id_t *id);

#endif
