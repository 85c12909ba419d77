/*
 * Completion queues and completion channels.
 *
 * A CQ is a ring of cqe + 1 work completions filled by the engine under the
 * device lock; beside each, the queue slots it holds until it is polled. A
 * completion channel is a pipe: an event writes the CQ's pointer and serial
 * into it, so the read end works with poll/epoll and get_cq_event reads
 * which CQ fired; an event of a CQ destroyed before it was read is dropped
 * there (the pointer is looked up among the channel's live CQs, never
 * followed), as a kernel drops the events of a destroyed CQ.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "log.h"
#include "softib.h"

int softib_create_comp_channel(axon_dev_context_t *ctx, axon_dev_comp_channel_t **ch_p)
{
    softib_dev_t *dev = softib_dev(ctx);
    softib_comp_channel_t *ch;
    int pfd[2];

    if (!(dev->attr.cap_flags & AXON_DEV_CAP_COMP_CHANNEL)) {
        axon_debug("softib: %s: completion channels are masked off", ctx->name);
        return EOPNOTSUPP;
    }
    ch = calloc(1, sizeof(*ch));
    if (ch == NULL) {
        axon_error("softib: no memory for a completion channel");
        return ENOMEM;
    }
    if (pipe2(pfd, O_CLOEXEC) < 0) {
        int ret = errno;
        axon_error("softib: pipe for a completion channel: %s", strerror(ret));
        free(ch);
        return ret;
    }
    fcntl(pfd[1], F_SETFL, O_NONBLOCK);
    ch->super.context = ctx;
    ch->super.fd      = pfd[0];
    ch->wfd           = pfd[1];
    axon_list_init(&ch->cqs);
    *ch_p = &ch->super;
    return 0;
}

int softib_destroy_comp_channel(axon_dev_comp_channel_t *ach)
{
    softib_comp_channel_t *ch = (softib_comp_channel_t *)ach;
    softib_dev_t *dev         = softib_dev(ach->context);
    int refcnt;

    pthread_mutex_lock(&dev->lock);
    refcnt = ch->refcnt;
    pthread_mutex_unlock(&dev->lock);
    if (refcnt) {
        axon_debug("softib: destroy_comp_channel: %d CQs still use it", refcnt);
        return EBUSY;
    }
    close(ch->super.fd);
    close(ch->wfd);
    free(ch);
    return 0;
}

/* What a channel's pipe carries per event. */
typedef struct {
    softib_cq_t *cq;
    uint64_t     serial;
} softib_cq_event_t;

/* The event's CQ if it is still one of the channel's, else NULL (destroyed). */
static softib_cq_t *softib_cq_event_live(softib_dev_t *dev, softib_comp_channel_t *ch,
                                         const softib_cq_event_t *ev)
{
    softib_cq_t *cq, *found = NULL;

    pthread_mutex_lock(&dev->lock);
    axon_list_for_each(cq, &ch->cqs, chan_link) {
        if ((cq == ev->cq) && (cq->serial == ev->serial)) {
            found = cq;
            break;
        }
    }
    pthread_mutex_unlock(&dev->lock);
    return found;
}

int softib_get_cq_event(axon_dev_comp_channel_t *ch, axon_dev_cq_t **cq_p,
                        void **cq_context_p)
{
    softib_dev_t *dev = softib_dev(ch->context);
    softib_cq_event_t ev;
    softib_cq_t *cq;
    ssize_t n;
    int ret;

    do {
        if ((ret = softib_wait_fd(dev, ch->fd)) != 0) {
            return ret;
        }
        n = read(ch->fd, &ev, sizeof(ev));
        if (n != (ssize_t)sizeof(ev)) {
            return (n < 0) ? errno : EIO;
        }
        cq = softib_cq_event_live(dev, (softib_comp_channel_t *)ch, &ev);
    } while (cq == NULL);   /* its CQ was destroyed unread: the event went with it */
    *cq_p         = &cq->super;
    *cq_context_p = cq->super.cq_context;
    return 0;
}

void softib_ack_cq_events(axon_dev_cq_t *cq, unsigned int nevents)
{
    (void)cq;
    (void)nevents;   /* events hold nothing: destroy_cq need not wait for acks */
}

int softib_create_cq(axon_dev_context_t *ctx, int cqe, void *cq_context,
                     axon_dev_comp_channel_t *channel, int comp_vector, axon_dev_cq_t **cq_p)
{
    return softib_create_cq_ex(ctx, cqe, cq_context, channel, comp_vector, 0, cq_p);
}

int softib_modify_cq(axon_dev_cq_t *acq, uint32_t cq_cap_flags, int attr_mask)
{
    softib_dev_t *dev = softib_dev(acq->context);
    softib_cq_t *cq   = softib_cq(acq);

    if ((attr_mask & ~AXON_DEV_CQ_ATTR_CAP_FLAGS) ||
        (cq_cap_flags & ~AXON_DEV_CQ_IGNORE_OVERRUN)) {
        axon_error("softib: modify_cq: attr_mask 0x%x, cq_cap_flags 0x%x (only "
                   "AXON_DEV_CQ_ATTR_CAP_FLAGS with IGNORE_OVERRUN)", attr_mask, cq_cap_flags);
        return EINVAL;
    }
    if (cq_cap_flags && !(dev->attr.cap_flags & AXON_DEV_CAP_CROSS_CHANNEL)) {
        axon_error("softib: modify_cq: IGNORE_OVERRUN, but cross-channel is masked off on %s",
                   dev->super.name);
        return EOPNOTSUPP;
    }
    if (attr_mask & AXON_DEV_CQ_ATTR_CAP_FLAGS) {
        pthread_mutex_lock(&dev->lock);
        cq->flags = (cq->flags & ~AXON_DEV_CQ_IGNORE_OVERRUN) | cq_cap_flags;
        pthread_mutex_unlock(&dev->lock);
    }
    return 0;
}

int softib_create_cq_ex(axon_dev_context_t *ctx, int cqe, void *cq_context,
                        axon_dev_comp_channel_t *channel, int comp_vector, uint32_t flags,
                        axon_dev_cq_t **cq_p)
{
    softib_dev_t *dev = softib_dev(ctx);
    softib_cq_t *cq;

    if (flags & ~(AXON_DEV_CQ_CREATE_CROSS_CHANNEL | AXON_DEV_CQ_IGNORE_OVERRUN)) {
        axon_error("softib: create_cq: unknown flags 0x%x", flags);
        return EINVAL;
    }
    if (flags && !(dev->attr.cap_flags & AXON_DEV_CAP_CROSS_CHANNEL)) {
        axon_error("softib: create_cq: flags 0x%x, but cross-channel is masked off on %s",
                   flags, ctx->name);
        return EOPNOTSUPP;
    }

    if ((cqe < 1) || (cqe > dev->attr.max_cqe)) {
        axon_error("softib: create_cq: cqe %d not in 1..%d", cqe, dev->attr.max_cqe);
        return EINVAL;
    }
    if (comp_vector < 0) {
        axon_error("softib: create_cq: comp_vector %d", comp_vector);
        return EINVAL;
    }
    cq = calloc(1, sizeof(*cq));
    if (cq == NULL) {
        goto err_nomem;
    }
    cq->size = (unsigned)cqe + 1;
    cq->ring = calloc(cq->size, sizeof(*cq->ring));
    cq->src  = calloc(cq->size, sizeof(*cq->src));
    if ((cq->ring == NULL) || (cq->src == NULL)) {
        free(cq->src);
        free(cq->ring);
        free(cq);
        goto err_nomem;
    }
    cq->super.context    = ctx;
    cq->super.channel    = channel;
    cq->super.cq_context = cq_context;
    cq->super.cqe        = cqe;
    cq->flags            = flags;
    if (channel != NULL) {
        pthread_mutex_lock(&dev->lock);
        ((softib_comp_channel_t *)channel)->refcnt++;
        cq->serial = ++dev->cq_serial;
        axon_list_add_tail(&((softib_comp_channel_t *)channel)->cqs, &cq->chan_link);
        pthread_mutex_unlock(&dev->lock);
    }
    *cq_p = &cq->super;
    return 0;

err_nomem:
    axon_error("softib: no memory for a CQ of %d entries", cqe);
    return ENOMEM;
}

int softib_destroy_cq(axon_dev_cq_t *acq)
{
    softib_dev_t *dev = softib_dev(acq->context);
    softib_cq_t *cq   = softib_cq(acq);

    pthread_mutex_lock(&dev->lock);
    if (cq->refcnt) {
        pthread_mutex_unlock(&dev->lock);
        axon_debug("softib: destroy_cq: %d QPs still use it", cq->refcnt);
        return EBUSY;
    }
    if (acq->channel != NULL) {
        ((softib_comp_channel_t *)acq->channel)->refcnt--;
        axon_list_del(&cq->chan_link);   /* its unread events are dropped at read */
    }
    softib_async_forget(dev, acq);
    pthread_mutex_unlock(&dev->lock);
    softib_async_wait_acked(dev, &acq->async_held);
    free(cq->src);
    free(cq->ring);
    free(cq);
    return 0;
}

void softib_cq_src_release(const softib_cq_src_t *src)
{
    softib_qp_t *qp = src->qp;

    if (qp == NULL) {
        return;
    }
    if (src->recv) {
        ((qp->super.srq != NULL) ? &softib_srq(qp->super.srq)->rq : &qp->rq)->freed++;
    } else if ((int)(src->sq_index + 1 - qp->sq_free) > 0) {
        qp->sq_free = src->sq_index + 1;   /* the unsignaled WQEs before it too */
    }
}

void softib_cq_detach(softib_cq_t *cq, const softib_qp_t *qp)
{
    softib_cq_src_t *src;
    unsigned i;

    for (i = cq->head; i != cq->tail; i++) {
        src = &cq->src[i % cq->size];
        if (src->qp == qp) {
            if (src->recv && (qp->super.srq != NULL)) {
                softib_cq_src_release(src);
            }
            src->qp = NULL;
        }
    }
}

void softib_cq_push(softib_cq_t *cq, const axon_dev_wc_t *wc, int solicited,
                    const softib_cq_src_t *src)
{
    static const softib_cq_src_t none = {NULL, 0, 0};
    softib_dev_t *dev = softib_dev(cq->super.context);
    softib_comp_channel_t *ch;

    if (cq->error) {
        return;
    }
    if (cq->flags & AXON_DEV_CQ_CREATE_CROSS_CHANNEL) {
        /* WAITs count what arrives, polled or not; one may be satisfied now */
        cq->produced++;
        if ((wc->status != AXON_DEV_WC_SUCCESS) && !cq->first_err) {
            cq->first_err = cq->produced;
        }
        dev->xchan_kick = 1;
        softib_timer_changed(dev, axon_sys_time_ns());
    }
    if ((cq->tail - cq->head >= (unsigned)cq->super.cqe) &&
        (cq->flags & AXON_DEV_CQ_IGNORE_OVERRUN)) {
        softib_cq_src_release(&cq->src[cq->head % cq->size]);
        cq->head++;   /* nobody polls it: the oldest completion goes */
    }
    if (cq->tail - cq->head >= (unsigned)cq->super.cqe) {
        axon_error("softib: %s: CQ of %d entries overrun", dev->super.name, cq->super.cqe);
        cq->error = 1;
        softib_async_event(dev, AXON_DEV_EVENT_CQ_ERR, &cq->super);
        /* its QPs fail at the end of the pass, not inside the stage pushing this */
        dev->cq_overrun = 1;
        softib_timer_changed(dev, axon_sys_time_ns());
        return;
    }
    cq->ring[cq->tail % cq->size] = *wc;
    if ((src != NULL) && (cq->flags & AXON_DEV_CQ_IGNORE_OVERRUN)) {
        softib_cq_src_release(src);   /* only the device watches it: nobody will poll */
        src = NULL;
    }
    cq->src[cq->tail % cq->size] = (src != NULL) ? *src : none;
    cq->tail++;
    if ((cq->armed == 1) ||
        ((cq->armed == 2) && (solicited || (wc->status != AXON_DEV_WC_SUCCESS)))) {
        softib_cq_event_t ev = {cq, cq->serial};

        cq->armed = 0;
        ch        = (softib_comp_channel_t *)cq->super.channel;
        if ((ch != NULL) && (write(ch->wfd, &ev, sizeof(ev)) != sizeof(ev))) {
            axon_warn("softib: completion event lost (channel full)");
        }
        cq->events++;
    }
}

int softib_poll_cq(axon_dev_cq_t *acq, int num_entries, axon_dev_wc_t *wc)
{
    softib_dev_t *dev = softib_dev(acq->context);
    softib_cq_t *cq   = softib_cq(acq);
    int n = 0;

    if (num_entries < 0) {
        axon_error("softib: poll_cq: num_entries %d", num_entries);
        return -EINVAL;
    }
    pthread_mutex_lock(&dev->lock);
    /* Completions already there go out first, as from a NIC's CQ: a pass now would only
     * delay them. A poll for none is a call for progress. */
    if ((cq->head == cq->tail) || (num_entries == 0)) {
        softib_progress(dev);
    }
    if (cq->error) {
        pthread_mutex_unlock(&dev->lock);
        return -EIO;
    }
    while ((n < num_entries) && (cq->head != cq->tail)) {
        wc[n++] = cq->ring[cq->head % cq->size];
        softib_cq_src_release(&cq->src[cq->head % cq->size]);
        cq->head++;
    }
    pthread_mutex_unlock(&dev->lock);
    return n;
}

int softib_req_notify_cq(axon_dev_cq_t *acq, int solicited_only)
{
    softib_dev_t *dev = softib_dev(acq->context);
    softib_cq_t *cq   = softib_cq(acq);

    pthread_mutex_lock(&dev->lock);
    cq->armed = solicited_only ? 2 : 1;
    pthread_mutex_unlock(&dev->lock);
    return 0;
}
