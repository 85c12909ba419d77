/*
 * Event channels, ids and events; binding, listening and resolving.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "dev_ibv_map.h"
#include "rcm.h"

/* The wrappers' event counts; rdma_destroy_id waits on the condition for its id's. */
static pthread_mutex_t rcm_ids_lock  = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t  rcm_ids_acked = PTHREAD_COND_INITIALIZER;

struct rdma_event_channel *rdma_create_event_channel(void)
{
    rcm_channel_t *c = calloc(1, sizeof(*c));
    int ret;

    if (c == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    if ((ret = rcm_bridge()->create_event_channel(&c->dev)) != 0) {
        free(c);
        errno = ret;
        return NULL;
    }
    c->ch.fd      = c->dev->fd;
    c->stash_tail = &c->stash;
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->moved, NULL);
    return &c->ch;
}

void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
    rcm_channel_t *c = RCM(channel, channel);

    /* librdmacm returns nothing; the CM names an id still on it */
    if (rcm_bridge()->destroy_event_channel(c->dev) == 0) {
        pthread_cond_destroy(&c->moved);
        pthread_mutex_destroy(&c->lock);
        free(c);
    }
}

static rcm_id_t *rcm_id_new(struct rdma_event_channel *channel, void *context,
                            enum rdma_port_space ps)
{
    rcm_id_t *id = calloc(1, sizeof(*id));

    if (id == NULL) {
        return NULL;
    }
    id->id.channel = channel;
    id->id.context = context;
    id->id.ps      = ps;
    id->id.qp_type = (ps == RDMA_PS_UDP) ? IBV_QPT_UD : IBV_QPT_RC;
    return id;
}

int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id_p, void *context,
                   enum rdma_port_space ps)
{
    int sync = (channel == NULL);
    rcm_id_t *id;
    int ret;

    /* no channel: a synchronous id, on a private one (rcm_sync.c) */
    if (sync && ((ret = rcm_sync_channel_new(&channel)) != 0)) {
        return rcm_ret(ret);
    }
    if ((id = rcm_id_new(channel, context, ps)) == NULL) {
        ret = ENOMEM;
    } else if ((ret = rcm_bridge()->create_id(RCM(channel, channel)->dev, id,
                                              (axon_dev_cm_port_space_t)ps, &id->dev)) != 0) {
        free(id);
    }
    if (ret != 0) {
        if (sync) {
            rcm_sync_channel_release(RCM(channel, channel));
        }
        return rcm_ret(ret);
    }
    id->sync = sync;
    *id_p    = &id->id;
    return 0;
}

static void rcm_id_event_acked(rcm_id_t *id)
{
    pthread_mutex_lock(&rcm_ids_lock);
    if (--id->events == 0) {
        pthread_cond_broadcast(&rcm_ids_acked);
    }
    pthread_mutex_unlock(&rcm_ids_lock);
}

int rdma_destroy_id(struct rdma_cm_id *cm_id)
{
    rcm_id_t *id           = RCM(id, cm_id);
    struct rdma_event_channel *ch = cm_id->channel;
    int ret;

    if (id->sync) {
        rcm_sync_id_closing(id);
    }
    /* A QP the program destroyed with ibv_destroy_qp left the CM id then (rping does so). */
    if ((cm_id->qp != NULL) && (id->dev->qp != NULL)) {
        rcm_bridge()->qp_detach(cm_id->qp);   /* the program destroys it with ibv_destroy_qp */
    }
    if ((ret = rcm_bridge()->destroy_id(id->dev)) != 0) {
        return rcm_ret(ret);
    }
    if (id->own_pd) {
        ibv_dealloc_pd(cm_id->pd);
    }
    /*
     * As librdmacm: wait until every event given on the id is acknowledged,
     * so a thread still handling one (rping's CM thread with TIMEWAIT_EXIT)
     * is done with it before the program frees what the handler touches.
     */
    pthread_mutex_lock(&rcm_ids_lock);
    while (id->events > 0) {
        pthread_cond_wait(&rcm_ids_acked, &rcm_ids_lock);
    }
    pthread_mutex_unlock(&rcm_ids_lock);
    if (id->sync) {
        rcm_sync_channel_release(RCM(channel, ch));
    }
    free(id);
    return 0;
}

int rcm_id_sync(rcm_id_t *id)
{
    axon_dev_cm_id_t *dev = id->dev;

    if ((dev->verbs != NULL) && (id->id.verbs == NULL)) {
        if ((id->id.verbs = rcm_bridge()->context(dev->verbs)) == NULL) {
            return errno;
        }
        id->id.port_num = dev->port_num;
    }
    memcpy(&id->id.route.addr.src_sin, &dev->src_addr, sizeof(dev->src_addr));
    memcpy(&id->id.route.addr.dst_sin, &dev->dst_addr, sizeof(dev->dst_addr));
    return 0;
}

int rdma_bind_addr(struct rdma_cm_id *cm_id, struct sockaddr *addr)
{
    int ret = rcm_bridge()->bind_addr(RCM(id, cm_id)->dev, addr);

    return rcm_ret(ret ? ret : rcm_id_sync(RCM(id, cm_id)));
}

int rdma_listen(struct rdma_cm_id *cm_id, int backlog)
{
    return rcm_ret(rcm_bridge()->listen(RCM(id, cm_id)->dev, backlog));
}

int rdma_resolve_addr(struct rdma_cm_id *cm_id, struct sockaddr *src_addr,
                      struct sockaddr *dst_addr, int timeout_ms)
{
    int ret = rcm_bridge()->resolve_addr(RCM(id, cm_id)->dev, src_addr, dst_addr, timeout_ms);

    if ((ret == 0) && ((ret = rcm_id_sync(RCM(id, cm_id))) == 0)) {
        return rcm_sync_complete(RCM(id, cm_id));
    }
    return rcm_ret(ret);
}

int rdma_resolve_route(struct rdma_cm_id *cm_id, int timeout_ms)
{
    int ret = rcm_bridge()->resolve_route(RCM(id, cm_id)->dev, timeout_ms);

    return ret ? rcm_ret(ret) : rcm_sync_complete(RCM(id, cm_id));
}

__be16 rdma_get_src_port(struct rdma_cm_id *cm_id)
{
    return axon_dev_cm_src_port(RCM(id, cm_id)->dev);
}

__be16 rdma_get_dst_port(struct rdma_cm_id *cm_id)
{
    return axon_dev_cm_dst_port(RCM(id, cm_id)->dev);
}

/* The contexts ids on softib's devices get (one per device, as librdmacm's). */
struct ibv_context **rdma_get_devices(int *num_devices)
{
    struct ibv_device **devs = ibv_get_device_list(NULL);
    struct ibv_context **list;
    int i, n = 0;

    if (devs == NULL) {
        return NULL;
    }
    for (i = 0; devs[i] != NULL; i++) {
    }
    if ((list = calloc((size_t)i + 1, sizeof(*list))) != NULL) {
        for (i = 0; devs[i] != NULL; i++) {
            if ((list[n] = rcm_bridge()->context_by_name(devs[i]->name)) != NULL) {
                n++;
            }
        }
    } else {
        errno = ENOMEM;
    }
    ibv_free_device_list(devs);
    if ((list != NULL) && (num_devices != NULL)) {
        *num_devices = n;
    }
    return list;
}

void rdma_free_devices(struct ibv_context **list)
{
    free(list);   /* the contexts stay: they are the ids' */
}

const char *rdma_event_str(enum rdma_cm_event_type event)
{
    return rcm_bridge()->event_str((axon_dev_cm_event_type_t)event);
}

/* ------------------------------------------------------------ events */

/* A CONNECT_REQUEST's new id: the listener's channel, context and port space
 * (and a synchronous listener's requests are synchronous ids). */
static rcm_id_t *rcm_id_of_request(axon_dev_cm_event_t *dev, rcm_id_t *listener)
{
    rcm_id_t *id = rcm_id_new(listener->id.channel, listener->id.context, listener->id.ps);

    if (id != NULL) {
        id->dev           = dev->id;
        dev->id->context  = id;
        if ((id->sync = listener->sync)) {
            rcm_sync_channel_hold(RCM(channel, listener->id.channel));
        }
    }
    return id;
}

/* Whose an event is until acknowledged: a request is its listener's (as librdmacm
 * counts it), every other event its id's. */
static rcm_id_t *rcm_event_owner_of(const struct rdma_cm_event *ev)
{
    return RCM(id, (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) ? ev->listen_id : ev->id);
}

static void rcm_ud_param(const axon_dev_cm_ud_param_t *ud, struct rdma_ud_param *param)
{
    param->private_data     = ud->private_data;
    param->private_data_len = ud->private_data_len;
    param->qp_num           = ud->qp_num;
    param->qkey             = ud->qkey;
    {
        const axon_dev_ah_attr_t *in = &ud->ah_attr;
        struct ibv_ah_attr *out      = &param->ah_attr;
        AXON_DEV_IBV_CONVERT(AXON_DEV_IBV_AH_ATTR);
    }
}

int rcm_event_get(rcm_channel_t *c, rcm_event_t **e_p)
{
    rcm_event_t *e = calloc(1, sizeof(*e));
    rcm_id_t *id;
    int ret;

    if (e == NULL) {
        return ENOMEM;
    }
    if ((ret = rcm_bridge()->get_event(c->dev, &e->dev)) != 0) {
        free(e);
        return ret;
    }
    if (e->dev->event == AXON_DEV_CM_EVENT_CONNECT_REQUEST) {
        e->ev.listen_id = &((rcm_id_t*)e->dev->listen_id->context)->id;
        if (rcm_id_of_request(e->dev, RCM(id, e->ev.listen_id)) == NULL) {
            rcm_bridge()->reject(e->dev->id, NULL, 0);
            rcm_bridge()->destroy_id(e->dev->id);
            rcm_bridge()->ack_event(e->dev);
            free(e);
            return ENOMEM;
        }
    }
    id = e->dev->id->context;
    if ((ret = rcm_id_sync(id)) != 0) {
        rcm_bridge()->log_error("%s: no ibv_context for the id's device",
                                rdma_event_str((enum rdma_cm_event_type)e->dev->event));
    }
    e->ev.id     = &id->id;
    e->ev.event  = (enum rdma_cm_event_type)e->dev->event;
    e->ev.status = e->dev->status;
    if (id->id.ps == RDMA_PS_UDP) {
        rcm_ud_param(&e->dev->param.ud, &e->ev.param.ud);
    } else {
        const axon_dev_cm_conn_param_t *in = &e->dev->param.conn;
        struct rdma_conn_param *out        = &e->ev.param.conn;

        out->private_data        = in->private_data;
        out->private_data_len    = in->private_data_len;
        out->responder_resources = in->responder_resources;
        out->initiator_depth     = in->initiator_depth;
        out->flow_control        = in->flow_control;
        out->retry_count         = in->retry_count;
        out->rnr_retry_count     = in->rnr_retry_count;
        out->srq                 = in->srq;
        out->qp_num              = in->qp_num;
    }
    pthread_mutex_lock(&rcm_ids_lock);
    rcm_event_owner_of(&e->ev)->events++;
    pthread_mutex_unlock(&rcm_ids_lock);
    *e_p = e;
    return 0;
}

int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event_p)
{
    rcm_event_t *e;
    int ret;

    if ((ret = rcm_event_get(RCM(channel, channel), &e)) != 0) {
        return rcm_ret(ret);
    }
    e->ev.id->event = &e->ev;
    *event_p        = &e->ev;
    return 0;
}

int rdma_ack_cm_event(struct rdma_cm_event *event)
{
    rcm_event_t *e    = RCM(event, event);
    rcm_id_t *owner   = rcm_event_owner_of(event);
    int ret;

    if ((ret = rcm_bridge()->ack_event(e->dev)) != 0) {
        return rcm_ret(ret);
    }
    if (event->id->event == event) {
        event->id->event = NULL;
    }
    free(e);
    rcm_id_event_acked(owner);
    return 0;
}
