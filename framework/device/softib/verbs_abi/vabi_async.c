/*
 * Asynchronous events: the device layer's, with each element mapped to the
 * ibv object the program knows (the device object's context is its wrapper).
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
    case AXON_DEV_IBV_EV_CQ:
        event->element.cq = ibv_cq_ex_to_cq(&((vabi_cq_t*)ev.element.cq->cq_context)->ex);
        return 0;
    case AXON_DEV_IBV_EV_QP:
        event->element.qp = &((vabi_qp_t*)ev.element.qp->qp_context)->ex.qp_base;
        return 0;
    case AXON_DEV_IBV_EV_SRQ:
        event->element.srq = &((vabi_srq_t*)ev.element.srq->srq_context)->ibv;
        return 0;
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
    axon_dev_context_t *dev = NULL;

    memset(&ev, 0, sizeof(ev));
    ev.event_type = (axon_dev_event_type_t)event->event_type;
    switch (axon_dev_ibv_ev_elem((unsigned)event->event_type)) {
    case AXON_DEV_IBV_EV_CQ:
        ev.element.cq = VABI(cq, event->element.cq)->dev;
        dev = ev.element.cq->context;
        break;
    case AXON_DEV_IBV_EV_QP:
        ev.element.qp = VABI(qp, event->element.qp)->dev;
        dev = ev.element.qp->context;
        break;
    case AXON_DEV_IBV_EV_SRQ:
        ev.element.srq = VABI(srq, event->element.srq)->dev;
        dev = ev.element.srq->context;
        break;
    default:
        /* A port or device event names no context to hand it back to; the
         * device layer's events of that kind hold nothing to release. */
        return;
    }
    axon_dev_ack_async_event(dev, &ev);
}
