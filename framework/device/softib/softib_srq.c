/*
 * Receive queues: the ring shared by a QP's own receive queue and an SRQ,
 * and the SRQ object with its limit event.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "log.h"
#include "softib.h"

int softib_rq_init(softib_rq_t *rq, unsigned max_wr, unsigned max_sge)
{
    unsigned i, sges = max_sge ? max_sge : 1;

    memset(rq, 0, sizeof(*rq));
    rq->wqe      = calloc(max_wr, sizeof(*rq->wqe));
    rq->sge_pool = calloc((size_t)max_wr * sges, sizeof(*rq->sge_pool));
    if ((rq->wqe == NULL) || (rq->sge_pool == NULL)) {
        softib_rq_cleanup(rq);
        axon_error("softib: no memory for a receive queue of %u WRs", max_wr);
        return ENOMEM;
    }
    for (i = 0; i < max_wr; i++) {
        rq->wqe[i].sge = &rq->sge_pool[(size_t)i * sges];
    }
    rq->max_wr  = max_wr;
    rq->max_sge = max_sge;
    return 0;
}

void softib_rq_cleanup(softib_rq_t *rq)
{
    free(rq->wqe);
    free(rq->sge_pool);
    rq->wqe      = NULL;
    rq->sge_pool = NULL;
}

int softib_rq_post(softib_rq_t *rq, axon_dev_recv_wr_t *wr, axon_dev_recv_wr_t **bad_wr,
                   const char *what)
{
    softib_recv_wqe_t *wqe;

    for (; wr != NULL; wr = wr->next) {
        if ((wr->num_sge < 0) || ((unsigned)wr->num_sge > rq->max_sge) ||
            ((wr->num_sge > 0) && (wr->sg_list == NULL))) {
            axon_error("softib: %s: num_sge %d (max %u, sg_list %p)", what, wr->num_sge,
                       rq->max_sge, (void *)wr->sg_list);
            *bad_wr = wr;
            return EINVAL;
        }
        if (softib_rq_outstanding(rq) >= rq->max_wr) {
            axon_debug("softib: %s: receive queue full (%u WRs outstanding)", what, rq->max_wr);
            *bad_wr = wr;
            return ENOMEM;
        }
        wqe          = &rq->wqe[rq->tail % rq->max_wr];
        wqe->wr_id   = wr->wr_id;
        wqe->num_sge = wr->num_sge;
        if (wr->num_sge) {
            memcpy(wqe->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(*wqe->sge));
        }
        rq->tail++;
    }
    return 0;
}

int softib_rq_pop(softib_rq_t *rq, softib_recv_wqe_t *wqe, axon_dev_sge_t *sge)
{
    softib_recv_wqe_t *head;

    if ((rq->head == rq->tail) || (rq->managed && (rq->head == rq->en))) {
        return 0;   /* empty, or what is left waits for a RECV_ENABLE */
    }
    head         = &rq->wqe[rq->head % rq->max_wr];
    wqe->wr_id   = head->wr_id;
    wqe->num_sge = head->num_sge;
    wqe->sge     = sge;
    memcpy(sge, head->sge, (size_t)head->num_sge * sizeof(*sge));
    rq->head++;
    return 1;
}

void softib_srq_consumed(softib_dev_t *dev, softib_srq_t *srq)
{
    if (srq->limit && (softib_rq_count(&srq->rq) < srq->limit)) {
        srq->limit = 0;   /* one event per arming */
        softib_async_event(dev, AXON_DEV_EVENT_SRQ_LIMIT_REACHED, &srq->super);
    }
}

int softib_create_srq(axon_dev_pd_t *pd, axon_dev_srq_init_attr_t *init_attr,
                      axon_dev_srq_t **srq_p)
{
    softib_dev_t *dev = softib_dev(pd->context);
    axon_dev_srq_attr_t *attr = &init_attr->attr;
    softib_srq_t *srq;

    if (!(dev->attr.cap_flags & AXON_DEV_CAP_SRQ)) {
        axon_debug("softib: %s: SRQs are masked off", dev->super.name);
        return EOPNOTSUPP;
    }
    if ((attr->max_wr < 1) || (attr->max_wr > (uint32_t)dev->attr.max_srq_wr) ||
        (attr->max_sge > (uint32_t)dev->attr.max_srq_sge)) {
        axon_error("softib: create_srq: max_wr %u (1..%d), max_sge %u (max %d)", attr->max_wr,
                   dev->attr.max_srq_wr, attr->max_sge, dev->attr.max_srq_sge);
        return EINVAL;
    }
    srq = calloc(1, sizeof(*srq));
    if (srq == NULL) {
        axon_error("softib: no memory for an SRQ");
        return ENOMEM;
    }
    if (softib_rq_init(&srq->rq, attr->max_wr, attr->max_sge)) {
        free(srq);
        return ENOMEM;
    }
    srq->super.context     = pd->context;
    srq->super.pd          = pd;
    srq->super.srq_context = init_attr->srq_context;
    srq->limit             = 0;   /* the limit is armed by modify_srq only */
    pthread_mutex_lock(&dev->lock);
    softib_pd(pd)->refcnt++;
    pthread_mutex_unlock(&dev->lock);
    *srq_p = &srq->super;
    return 0;
}

/* Grow or shrink the ring, keeping the posted WQEs in order (and the slots of taken ones) */
static int softib_srq_resize(softib_srq_t *srq, unsigned max_wr)
{
    unsigned taken = srq->rq.head - srq->rq.freed;   /* their completions not polled yet */
    softib_rq_t new_rq;

    if (softib_rq_init(&new_rq, max_wr, srq->rq.max_sge)) {
        return ENOMEM;
    }
    while (softib_rq_pop(&srq->rq, &new_rq.wqe[new_rq.tail], new_rq.wqe[new_rq.tail].sge)) {
        new_rq.tail++;
    }
    new_rq.freed = new_rq.head - taken;   /* free-running: they stay outstanding */
    softib_rq_cleanup(&srq->rq);
    srq->rq = new_rq;
    return 0;
}

int softib_modify_srq(axon_dev_srq_t *asrq, axon_dev_srq_attr_t *attr, int attr_mask)
{
    softib_dev_t *dev = softib_dev(asrq->context);
    softib_srq_t *srq = softib_srq(asrq);
    unsigned max_wr;
    int ret = 0;

    if (attr_mask & ~(AXON_DEV_SRQ_MAX_WR | AXON_DEV_SRQ_LIMIT)) {
        axon_error("softib: modify_srq: unknown mask bits 0x%x", attr_mask);
        return EINVAL;
    }
    pthread_mutex_lock(&dev->lock);
    max_wr = (attr_mask & AXON_DEV_SRQ_MAX_WR) ? attr->max_wr : srq->rq.max_wr;
    if ((attr_mask & AXON_DEV_SRQ_MAX_WR) &&
        ((max_wr < 1) || (max_wr > (unsigned)dev->attr.max_srq_wr) ||
         (max_wr < softib_rq_outstanding(&srq->rq)))) {
        axon_error("softib: modify_srq: max_wr %u (1..%d, at least the %u outstanding)", max_wr,
                   dev->attr.max_srq_wr, softib_rq_outstanding(&srq->rq));
        ret = EINVAL;
        goto out;
    }
    if ((attr_mask & AXON_DEV_SRQ_LIMIT) && (attr->srq_limit > max_wr)) {
        axon_error("softib: modify_srq: srq_limit %u over max_wr %u", attr->srq_limit, max_wr);
        ret = EINVAL;
        goto out;
    }
    if ((attr_mask & AXON_DEV_SRQ_MAX_WR) && (max_wr != srq->rq.max_wr) &&
        (ret = softib_srq_resize(srq, max_wr)) != 0) {
        goto out;
    }
    if (attr_mask & AXON_DEV_SRQ_LIMIT) {
        srq->limit = attr->srq_limit;
    }
out:
    pthread_mutex_unlock(&dev->lock);
    return ret;
}

int softib_query_srq(axon_dev_srq_t *asrq, axon_dev_srq_attr_t *attr)
{
    softib_dev_t *dev = softib_dev(asrq->context);
    softib_srq_t *srq = softib_srq(asrq);

    pthread_mutex_lock(&dev->lock);
    attr->max_wr    = srq->rq.max_wr;
    attr->max_sge   = srq->rq.max_sge;
    attr->srq_limit = srq->limit;
    pthread_mutex_unlock(&dev->lock);
    return 0;
}

int softib_destroy_srq(axon_dev_srq_t *asrq)
{
    softib_dev_t *dev = softib_dev(asrq->context);
    softib_srq_t *srq = softib_srq(asrq);

    pthread_mutex_lock(&dev->lock);
    if (srq->refcnt) {
        pthread_mutex_unlock(&dev->lock);
        axon_debug("softib: destroy_srq: %d QPs still use it", srq->refcnt);
        return EBUSY;
    }
    softib_pd(asrq->pd)->refcnt--;
    softib_async_forget(dev, asrq);
    pthread_mutex_unlock(&dev->lock);
    softib_async_wait_acked(dev, &asrq->async_held);
    softib_rq_cleanup(&srq->rq);
    free(srq);
    return 0;
}

int softib_post_srq_recv(axon_dev_srq_t *asrq, axon_dev_recv_wr_t *wr,
                         axon_dev_recv_wr_t **bad_wr)
{
    softib_dev_t *dev = softib_dev(asrq->context);
    int ret;

    pthread_mutex_lock(&dev->lock);
    ret = softib_rq_post(&softib_srq(asrq)->rq, wr, bad_wr, "post_srq_recv");
    softib_progress(dev);   /* an RNR-waiting sender may now proceed */
    pthread_mutex_unlock(&dev->lock);
    return ret;
}
