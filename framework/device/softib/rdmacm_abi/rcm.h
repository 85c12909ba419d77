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
#include <rdma/rdma_cma.h>
#include "vabi_rdmacm.h"

typedef struct {
    struct rdma_event_channel ch;    /* what the program holds */
    axon_dev_cm_channel_t    *dev;
} rcm_channel_t;

typedef struct {
    struct rdma_cm_id  id;           /* what the program holds */
    axon_dev_cm_id_t  *dev;
    unsigned           events;       /* given and not yet acknowledged */
    int                own_pd;       /* id.pd, send_cq, recv_cq were made here */
    int                own_cqs;
} rcm_id_t;

typedef struct {
    struct rdma_cm_event ev;         /* what the program holds */
    axon_dev_cm_event_t *dev;
} rcm_event_t;

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

#endif
