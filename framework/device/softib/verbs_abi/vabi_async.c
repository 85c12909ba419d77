/*
 * Asynchronous events: the device layer's, with each element mapped to the
 * ibv object the program knows (the device object's context is its wrapper).
 * The device's destroy waits for the ack of each event it handed out, so
 * the wrapper outlives every event naming it.
 */
#include <string.h>
#include "log.h"
#include "vabi.h"

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
        return 0;
    }
    case AXON_DEV_IBV_EV_QP: {
        vabi_qp_t *qp = ev.element.qp->qp_context;

        event->element.qp = &qp->ex.qp_base;
        return 0;
    }
    case AXON_DEV_IBV_EV_SRQ: {
        vabi_srq_t *srq = ev.element.srq->srq_context;

        event->element.srq = &srq->ibv;
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
    struct ibv_context *context;
    pthread_mutex_t *mutex;
    uint32_t *completed;

    memset(&ev, 0, sizeof(ev));
    ev.event_type = (axon_dev_event_type_t)event->event_type;
    switch (axon_dev_ibv_ev_elem((unsigned)event->event_type)) {
    case AXON_DEV_IBV_EV_CQ:
        ev.element.cq = VABI(cq, event->element.cq)->dev;
        context       = event->element.cq->context;
        mutex         = &event->element.cq->mutex;
        completed     = &event->element.cq->async_events_completed;
        break;
    case AXON_DEV_IBV_EV_QP:
        ev.element.qp = VABI(qp, event->element.qp)->dev;
        context       = event->element.qp->context;
        mutex         = &event->element.qp->mutex;
        completed     = &event->element.qp->events_completed;
        break;
    case AXON_DEV_IBV_EV_SRQ:
        ev.element.srq = VABI(srq, event->element.srq)->dev;
        context        = event->element.srq->context;
        mutex          = &event->element.srq->mutex;
        completed      = &event->element.srq->events_completed;
        break;
    default:
        /* A port or device event names no object to hand back */
        return;
    }
    pthread_mutex_lock(mutex);
    ++*completed;   /* rdma-core's count, for programs that read it */
    pthread_mutex_unlock(mutex);
    /* the last access to the object: a destroy waiting for this ack may free it */
    axon_dev_ack_async_event(vabi_dev(context), &ev);
}
