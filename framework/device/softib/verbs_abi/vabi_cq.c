/*
 * Completion channels, completion queues, their events and polling.
 */
#include <stdlib.h>
#include <string.h>
#include "log.h"
#include "vabi.h"

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
    vabi_channel_t *ch = calloc(1, sizeof(*ch));
    int ret;

    if (ch == NULL) {
        return vabi_fail_null(ENOMEM);
    }
    if ((ret = axon_dev_create_comp_channel(vabi_dev(context), &ch->dev)) != 0) {
        free(ch);
        return vabi_fail_null(ret);
    }
    ch->ibv.context = context;
    ch->ibv.fd      = ch->dev->fd;
    return &ch->ibv;
}

int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
    int ret = axon_dev_destroy_comp_channel(VABI(channel, channel)->dev);

    if (ret) {
        return ret;   /* EBUSY while CQs use it */
    }
    free(channel);
    return 0;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
                             struct ibv_comp_channel *channel, int comp_vector)
{
    vabi_cq_t *cq;
    int ret;

    if ((comp_vector < 0) || (comp_vector >= context->num_comp_vectors)) {
        axon_error("libibverbs on softib: create_cq: comp_vector %d (the device has %d)",
                   comp_vector, context->num_comp_vectors);
        return vabi_fail_null(EINVAL);
    }
    cq = calloc(1, sizeof(*cq));
    if (cq == NULL) {
        return vabi_fail_null(ENOMEM);
    }
    /* The device's CQ context is the wrapper: events lead back to it. */
    ret = axon_dev_create_cq(vabi_dev(context), cqe, cq,
                             (channel != NULL) ? VABI(channel, channel)->dev : NULL, comp_vector,
                             &cq->dev);
    if (ret) {
        free(cq);
        return vabi_fail_null(ret);
    }
    cq->ibv.context    = context;
    cq->ibv.channel    = channel;
    cq->ibv.cq_context = cq_context;
    cq->ibv.cqe        = cq->dev->cqe;
    pthread_mutex_init(&cq->ibv.mutex, NULL);
    pthread_cond_init(&cq->ibv.cond, NULL);
    if (channel != NULL) {
        channel->refcnt++;
    }
    return &cq->ibv;
}

int ibv_destroy_cq(struct ibv_cq *cq)
{
    struct ibv_comp_channel *channel = cq->channel;
    int ret = axon_dev_destroy_cq(VABI(cq, cq)->dev);

    if (ret) {
        return ret;
    }
    if (channel != NULL) {
        channel->refcnt--;
    }
    pthread_mutex_destroy(&cq->mutex);
    pthread_cond_destroy(&cq->cond);
    free(cq);
    return 0;
}

int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
    (void)cq;
    (void)cqe;
    return vabi_unsupported("ibv_resize_cq");
}

int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context)
{
    axon_dev_cq_t *dcq;
    void *wrapper;
    int ret;

    if ((ret = axon_dev_get_cq_event(VABI(channel, channel)->dev, &dcq, &wrapper)) != 0) {
        errno = ret;
        return -1;
    }
    *cq         = &((vabi_cq_t*)wrapper)->ibv;
    *cq_context = (*cq)->cq_context;
    return 0;
}

void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
    axon_dev_ack_cq_events(VABI(cq, cq)->dev, nevents);
    pthread_mutex_lock(&cq->mutex);
    cq->comp_events_completed += nevents;
    pthread_cond_broadcast(&cq->cond);
    pthread_mutex_unlock(&cq->mutex);
}

/* Work completions pass through: the layouts are asserted equal (dev_ibv_map.h). */
int vabi_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc)
{
    return axon_dev_poll_cq(VABI(cq, cq)->dev, num_entries, (axon_dev_wc_t*)(void*)wc);
}

int vabi_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
    return axon_dev_req_notify_cq(VABI(cq, cq)->dev, solicited_only);
}
