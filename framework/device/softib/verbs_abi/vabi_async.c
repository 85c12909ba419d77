/*
 * Asynchronous events: the device layer's, with each element mapped to the
 * ibv object the program knows (the device object's context is its wrapper).
 */
#include <string.h>
#include "log.h"
#include "vabi.h"

/* One more event about an object, under its mutex (the ack counts in another thread). */
static void vabi_async_count(pthread_mutex_t *mutex, unsigned *counter)
{
    pthread_mutex_lock(mutex);
    ++*counter;
    pthread_mutex_unlock(mutex);
}

void vabi_async_wait_acked(pthread_mutex_t *mutex, pthread_cond_t *cond,
                           const unsigned *reported, const uint32_t *completed)
{
    pthread_mutex_lock(mutex);
    while (*completed != *reported) {
        pthread_cond_wait(cond, mutex);
    }
    pthread_mutex_unlock(mutex);
}

int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event)
{
    axon_dev_async_event_t ev;
    int ret;

    if ((ret = axon_dev_get_async_event(vabi_dev(context), &ev)) != 0) {
        errno = ret;
        return -1;
    }
    memset(event, 0, sizeof(*event));
    event->event_type = (enum ibv_event_type)ev.event_type;
    switch (axon_dev_ibv_ev_elem((unsigned)ev.event_type)) {
    case AXON_DEV_IBV_EV_CQ: {
        vabi_cq_t *cq = ev.element.cq->cq_context;

        event->element.cq = ibv_cq_ex_to_cq(&cq->ex);
        vabi_async_count(&cq->ex.mutex, &cq->events_reported);
        return 0;
    }
    case AXON_DEV_IBV_EV_QP: {
        vabi_qp_t *qp = ev.element.qp->qp_context;

        event->element.qp = &qp->ex.qp_base;
        vabi_async_count(&qp->ex.qp_base.mutex, &qp->events_reported);
        return 0;
    }
    case AXON_DEV_IBV_EV_SRQ: {
        vabi_srq_t *srq = ev.element.srq->srq_context;

        event->element.srq = &srq->ibv;
        vabi_async_count(&srq->ibv.mutex, &srq->events_reported);
        return 0;
    }
    case AXON_DEV_IBV_EV_PORT:
        event->element.port_num = ev.element.port_num;
        return 0;
    case AXON_DEV_IBV_EV_DEVICE:
        return 0;
    default:
        /* DC target events: no DC target can be made through this ABI */
        axon_error("libibverbs on softib: async event %s (%d) has no ibv form",
                   axon_dev_event_type_str(ev.event_type), (int)ev.event_type);
        errno = EIO;
        return -1;
    }
}

void ibv_ack_async_event(struct ibv_async_event *event)
{
    axon_dev_async_event_t ev;
    axon_dev_context_t *dev;
    pthread_mutex_t *mutex;
    pthread_cond_t *cond;
    uint32_t *completed;

    memset(&ev, 0, sizeof(ev));
    ev.event_type = (axon_dev_event_type_t)event->event_type;
    switch (axon_dev_ibv_ev_elem((unsigned)event->event_type)) {
    case AXON_DEV_IBV_EV_CQ:
        ev.element.cq = VABI(cq, event->element.cq)->dev;
        dev           = ev.element.cq->context;
        mutex         = &event->element.cq->mutex;
        cond          = &event->element.cq->cond;
        completed     = &event->element.cq->async_events_completed;
        break;
    case AXON_DEV_IBV_EV_QP:
        ev.element.qp = VABI(qp, event->element.qp)->dev;
        dev           = ev.element.qp->context;
        mutex         = &event->element.qp->mutex;
        cond          = &event->element.qp->cond;
        completed     = &event->element.qp->events_completed;
        break;
    case AXON_DEV_IBV_EV_SRQ:
        ev.element.srq = VABI(srq, event->element.srq)->dev;
        dev            = ev.element.srq->context;
        mutex          = &event->element.srq->mutex;
        cond           = &event->element.srq->cond;
        completed      = &event->element.srq->events_completed;
        break;
    default:
        /* A port or device event names no context to hand it back to; the
         * device layer's events of that kind hold nothing to release. */
        return;
    }
    axon_dev_ack_async_event(dev, &ev);
    /* the last access to the object: a destroy waiting for this ack may free it */
    pthread_mutex_lock(mutex);
    ++*completed;
    pthread_cond_broadcast(cond);
    pthread_mutex_unlock(mutex);
}
