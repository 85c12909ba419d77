/*
 * Synchronous ids: rdma_create_ep, rdma_get_request, rdma_destroy_ep, and
 * ids made without an event channel. Each call of such an id that leads to
 * an event (resolve, connect, accept, disconnect) waits for the id's next
 * event and leaves it in id->event until the id's next call or destroy, as
 * librdmacm does; an error event makes the call fail with its errno.
 *
 * softib's CM needs a channel, so such an id gets a private one. The ids its
 * connection requests create stay on it (librdmacm moves each to a channel
 * of its own; the CM cannot move an id), so a thread waiting for one id's
 * event stashes what it reads for the others, and only one thread at a
 * time waits in the CM.
 */
#include <stdlib.h>
#include <string.h>
#include "rcm.h"

int rcm_sync_channel_new(struct rdma_event_channel **ch_p)
{
    struct rdma_event_channel *ch = rdma_create_event_channel();

    if (ch == NULL) {
        return errno;
    }
    RCM(channel, ch)->sync  = 1;
    RCM(channel, ch)->users = 1;
    *ch_p = ch;
    return 0;
}

void rcm_sync_channel_hold(rcm_channel_t *c)
{
    pthread_mutex_lock(&c->lock);
    c->users++;
    pthread_mutex_unlock(&c->lock);
}

void rcm_sync_channel_release(rcm_channel_t *c)
{
    int last;

    pthread_mutex_lock(&c->lock);
    last = (--c->users == 0);
    pthread_mutex_unlock(&c->lock);
    if (last) {
        rdma_destroy_event_channel(&c->ch);
    }
}

/* Whose an event is: a request its listener's, every other event its id's. */
static rcm_id_t *rcm_sync_owner(const rcm_event_t *e)
{
    return RCM(id, (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST) ? e->ev.listen_id : e->ev.id);
}

/* c->lock held: the oldest stashed event of id, taken out, or NULL. */
static rcm_event_t *rcm_stash_take(rcm_channel_t *c, const rcm_id_t *id)
{
    rcm_event_t **pp, *e;

    for (pp = &c->stash; (e = *pp) != NULL; pp = &e->next) {
        if (rcm_sync_owner(e) == id) {
            *pp = e->next;
            if (c->stash_tail == &e->next) {
                c->stash_tail = pp;
            }
            e->next = NULL;
            return e;
        }
    }
    return NULL;
}

/* The event a sync id holds (its last call's, or its request), acknowledged. */
static void rcm_sync_ack_held(struct rdma_cm_id *cm_id)
{
    struct rdma_cm_event *ev = cm_id->event;

    if (ev != NULL) {
        cm_id->event = NULL;
        rdma_ack_cm_event(ev);
    }
}

/* An event whose id is going: acknowledged; a request is refused and its id destroyed. */
static void rcm_event_drop(rcm_event_t *e)
{
    struct rdma_cm_id *request = (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST) ? e->ev.id :
                                 NULL;

    if (request != NULL) {
        rdma_reject(request, NULL, 0);
    }
    rdma_ack_cm_event(&e->ev);
    if (request != NULL) {
        rdma_destroy_id(request);
    }
}

/* The id's next event: from the stash, or read from the CM by this thread
 * (stashing the other ids') while no other thread reads. */
static int rcm_sync_next(rcm_id_t *id, rcm_event_t **e_p)
{
    rcm_channel_t *c = RCM(channel, id->id.channel);
    rcm_event_t *e;
    rcm_id_t *owner;
    int ret;

    pthread_mutex_lock(&c->lock);
    while ((e = rcm_stash_take(c, id)) == NULL) {
        if (c->reading) {
            pthread_cond_wait(&c->moved, &c->lock);
            continue;
        }
        c->reading = 1;
        pthread_mutex_unlock(&c->lock);
        ret = rcm_event_get(c, &e);
        pthread_mutex_lock(&c->lock);
        c->reading = 0;
        pthread_cond_broadcast(&c->moved);
        if (ret != 0) {
            pthread_mutex_unlock(&c->lock);
            return ret;
        }
        if ((owner = rcm_sync_owner(e)) == id) {
            break;
        }
        if (owner->closing) {   /* its destroy waits for this acknowledgement */
            pthread_mutex_unlock(&c->lock);
            rcm_event_drop(e);
            pthread_mutex_lock(&c->lock);
            continue;
        }
        *c->stash_tail = e;
        c->stash_tail  = &e->next;
    }
    pthread_mutex_unlock(&c->lock);
    *e_p = e;
    return 0;
}

/* What a waiting call reports for the event it waited for (librdmacm's rule,
 * with an errno for an error event that carries no status). */
static int rcm_event_errno(const struct rdma_cm_event *ev)
{
    if (ev->event == RDMA_CM_EVENT_REJECTED) {
        return ECONNREFUSED;
    }
    if (ev->status != 0) {
        return (ev->status < 0) ? -ev->status : ev->status;
    }
    switch (ev->event) {
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
    case RDMA_CM_EVENT_CONNECT_ERROR:
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
        return EIO;
    case RDMA_CM_EVENT_UNREACHABLE:
        return EHOSTUNREACH;
    default:
        return 0;
    }
}

int rcm_sync_complete(rcm_id_t *id)
{
    rcm_event_t *e;
    int ret;

    if (!id->sync) {
        return 0;
    }
    rcm_sync_ack_held(&id->id);
    if ((ret = rcm_sync_next(id, &e)) != 0) {
        return rcm_ret(ret);
    }
    id->id.event = &e->ev;
    if ((ret = rcm_event_errno(&e->ev)) != 0) {
        rcm_bridge()->log_error("id %p: %s (status %d)", (void *)&id->id,
                                rdma_event_str(e->ev.event), e->ev.status);
    }
    return rcm_ret(ret);
}

void rcm_sync_id_closing(rcm_id_t *id)
{
    rcm_channel_t *c = RCM(channel, id->id.channel);
    rcm_event_t *e, *mine = NULL;

    pthread_mutex_lock(&c->lock);
    id->closing = 1;
    while ((e = rcm_stash_take(c, id)) != NULL) {
        e->next = mine;
        mine    = e;
    }
    pthread_mutex_unlock(&c->lock);
    rcm_sync_ack_held(&id->id);
    while ((e = mine) != NULL) {
        mine = e->next;
        rcm_event_drop(e);
    }
}

/* ------------------------------------------------------------ endpoints */

static int rcm_ep_passive(struct rdma_cm_id *cm_id, const struct rdma_addrinfo *res,
                          struct ibv_pd *pd, const struct ibv_qp_init_attr *qp_init_attr)
{
    rcm_id_t *id = RCM(id, cm_id);

    if (rdma_bind_addr(cm_id, res->ai_src_addr) != 0) {
        return -1;
    }
    cm_id->pd = pd;   /* each request's QP goes on it (NULL: a PD of the request's own) */
    if (qp_init_attr != NULL) {
        if ((id->request_qp = malloc(sizeof(*id->request_qp))) == NULL) {
            return rcm_ret(ENOMEM);
        }
        *id->request_qp         = *qp_init_attr;
        id->request_qp->qp_type = res->ai_qp_type;
    }
    return 0;
}

static int rcm_ep_active(struct rdma_cm_id *cm_id, const struct rdma_addrinfo *res,
                         struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
    if ((rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr, 2000) != 0) ||
        (rdma_resolve_route(cm_id, 2000) != 0)) {
        return -1;
    }
    if (qp_init_attr == NULL) {
        return 0;
    }
    qp_init_attr->qp_type = res->ai_qp_type;
    return rdma_create_qp(cm_id, pd, qp_init_attr);
}

int rdma_create_ep(struct rdma_cm_id **id_p, struct rdma_addrinfo *res, struct ibv_pd *pd,
                   struct ibv_qp_init_attr *qp_init_attr)
{
    struct rdma_cm_id *cm_id;
    int passive, ret, err;

    if ((id_p == NULL) || (res == NULL)) {
        rcm_bridge()->log_error("rdma_create_ep: NULL %s", (id_p == NULL) ? "id" : "addrinfo");
        return rcm_ret(EINVAL);
    }
    passive = !!(res->ai_flags & RAI_PASSIVE);
    if ((passive ? res->ai_src_addr : res->ai_dst_addr) == NULL) {
        rcm_bridge()->log_error("rdma_create_ep: the addrinfo has no %s address",
                                passive ? "source (RAI_PASSIVE)" : "destination");
        return rcm_ret(EINVAL);
    }
    if ((res->ai_route_len > 0) || (res->ai_connect_len > 0)) {
        return rcm_unsupported("rdma_create_ep with an InfiniBand route or connect data");
    }
    if (rdma_create_id(NULL, &cm_id, NULL, (enum rdma_port_space)res->ai_port_space) != 0) {
        return -1;
    }
    if (res->ai_qp_type != 0) {
        cm_id->qp_type = (enum ibv_qp_type)res->ai_qp_type;
    }
    ret = passive ? rcm_ep_passive(cm_id, res, pd, qp_init_attr) :
                    rcm_ep_active(cm_id, res, pd, qp_init_attr);
    if (ret != 0) {
        err = errno;
        rdma_destroy_ep(cm_id);
        return rcm_ret(err);
    }
    *id_p = cm_id;
    return 0;
}

void rdma_destroy_ep(struct rdma_cm_id *cm_id)
{
    rcm_id_t *id = RCM(id, cm_id);

    if (cm_id->qp != NULL) {
        rdma_destroy_qp(cm_id);
    }
    if (cm_id->srq != NULL) {
        rdma_destroy_srq(cm_id);
    }
    free(id->request_qp);
    id->request_qp = NULL;
    rdma_destroy_id(cm_id);
}

/* A request to a synchronous listener: its new id, with the QP the listener's
 * rdma_create_ep asked for; the request stays in the new id's event. */
int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id_p)
{
    rcm_id_t *l = RCM(id, listen);
    struct ibv_qp_init_attr attr;
    struct rdma_cm_id *request;
    rcm_event_t *e;
    int ret;

    if (!l->sync) {
        rcm_bridge()->log_error("rdma_get_request: listener %p has an event channel of the "
                                "program's (read its requests with rdma_get_cm_event)",
                                (void *)listen);
        return rcm_ret(EINVAL);
    }
    rcm_sync_ack_held(listen);
    if ((ret = rcm_sync_next(l, &e)) != 0) {
        return rcm_ret(ret);
    }
    if ((e->ev.event != RDMA_CM_EVENT_CONNECT_REQUEST) || (e->ev.status != 0)) {
        rcm_bridge()->log_error("rdma_get_request: %s (status %d) on listener %p",
                                rdma_event_str(e->ev.event), e->ev.status, (void *)listen);
        ret = (e->ev.status != 0) ? rcm_event_errno(&e->ev) : EINVAL;
        if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST) {
            rcm_event_drop(e);
        } else {
            listen->event = &e->ev;   /* the listener's own: held as a call's event */
        }
        return rcm_ret(ret);
    }
    request = e->ev.id;
    if (l->request_qp != NULL) {
        attr = *l->request_qp;
        if (rdma_create_qp(request, listen->pd, &attr) != 0) {
            ret = errno;
            rcm_event_drop(e);   /* the peer is refused, not left waiting */
            return rcm_ret(ret);
        }
    }
    request->event = &e->ev;
    *id_p          = request;
    return 0;
}
