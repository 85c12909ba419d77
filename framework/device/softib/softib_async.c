/*
 * Asynchronous events: a queue per device, and a socket pair whose read end
 * is the context's async_fd, carrying one byte per queued event so the fd is
 * readable while an event waits (programs poll it, as the kernel's).
 *
 * Why a queue and not the events themselves through a pipe: an event names
 * its object by pointer, and destroying a QP, CQ, SRQ or DCT must take its
 * unread events back (the kernel drops them too), or the reader gets a
 * pointer to freed memory; UCX destroys QPs whose LAST_WQE_REACHED is still
 * unread. softib_async_forget does that. A byte it cannot take back (a
 * reader already read it) makes that reader find the queue empty and wait
 * again. An event already got names its object until acked: the destroy
 * waits for that (softib_async_wait_acked), as libibverbs' destroy does.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "log.h"
#include "softib.h"

int softib_async_open(softib_dev_t *dev)
{
    int sv[2], ret;

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        ret = errno;
        axon_error("softib: socket pair for async events of %s: %s", dev->super.name,
                   strerror(ret));
        return ret;
    }
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    dev->super.async_fd = sv[0];
    dev->async_wfd      = sv[1];
    dev->async_head     = dev->async_count = 0;
    pthread_mutex_init(&dev->async_lock, NULL);
    pthread_cond_init(&dev->async_acked, NULL);
    return 0;
}

void softib_async_close(softib_dev_t *dev)
{
    close(dev->super.async_fd);
    close(dev->async_wfd);
    pthread_mutex_destroy(&dev->async_lock);
    pthread_cond_destroy(&dev->async_acked);
}

/* Which kind of object an event names (softib's all name one) */
typedef enum {
    SOFTIB_ASYNC_QP,
    SOFTIB_ASYNC_CQ,
    SOFTIB_ASYNC_SRQ,
    SOFTIB_ASYNC_DCT,
} softib_async_obj_t;

static softib_async_obj_t softib_async_obj(axon_dev_event_type_t type)
{
    switch (type) {
    case AXON_DEV_EVENT_CQ_ERR:
        return SOFTIB_ASYNC_CQ;
    case AXON_DEV_EVENT_SRQ_ERR:
    case AXON_DEV_EVENT_SRQ_LIMIT_REACHED:
        return SOFTIB_ASYNC_SRQ;
    case AXON_DEV_EVENT_DCT_KEY_VIOLATION:
    case AXON_DEV_EVENT_DCT_ACCESS_ERR:
    case AXON_DEV_EVENT_DCT_REQ_ERR:
        return SOFTIB_ASYNC_DCT;
    default:
        return SOFTIB_ASYNC_QP;
    }
}

/* Sets the member of ev's union that element is */
static void softib_async_name(axon_dev_async_event_t *ev, void *element)
{
    switch (softib_async_obj(ev->event_type)) {
    case SOFTIB_ASYNC_CQ:
        ev->element.cq = element;
        break;
    case SOFTIB_ASYNC_SRQ:
        ev->element.srq = element;
        break;
    case SOFTIB_ASYNC_DCT:
        ev->element.dct = element;
        break;
    case SOFTIB_ASYNC_QP:
        ev->element.qp = element;
        break;
    }
}

/* Where the object ev names counts its got, unacked events */
static unsigned *softib_async_held(const axon_dev_async_event_t *ev)
{
    switch (softib_async_obj(ev->event_type)) {
    case SOFTIB_ASYNC_CQ:
        return &ev->element.cq->async_held;
    case SOFTIB_ASYNC_SRQ:
        return &ev->element.srq->async_held;
    case SOFTIB_ASYNC_DCT:
        return &ev->element.dct->async_held;
    case SOFTIB_ASYNC_QP:
    default:
        return &ev->element.qp->async_held;
    }
}

void softib_async_event(softib_dev_t *dev, axon_dev_event_type_t type, void *element)
{
    softib_async_entry_t *entry;
    char bell = 0;

    axon_debug("softib: %s: async event %s", dev->super.name, axon_dev_event_type_str(type));
    pthread_mutex_lock(&dev->async_lock);
    if (dev->async_count == SOFTIB_ASYNC_QUEUE) {
        pthread_mutex_unlock(&dev->async_lock);
        axon_warn("softib: %s: async event %s lost (%u unread: nobody reads events)",
                  dev->super.name, axon_dev_event_type_str(type), SOFTIB_ASYNC_QUEUE);
        return;
    }
    entry = &dev->async_q[(dev->async_head + dev->async_count++) % SOFTIB_ASYNC_QUEUE];
    memset(&entry->ev, 0, sizeof(entry->ev));
    entry->ev.event_type = type;
    entry->element       = element;
    softib_async_name(&entry->ev, element);
    /* the queue has room for the byte's event, and the socket for far more bytes */
    if (send(dev->async_wfd, &bell, 1, MSG_DONTWAIT | MSG_NOSIGNAL) != 1) {
        axon_warn("softib: %s: async event doorbell: %s", dev->super.name, strerror(errno));
    }
    pthread_mutex_unlock(&dev->async_lock);
}

void softib_async_forget(softib_dev_t *dev, const void *element)
{
    unsigned i, kept = 0, dropped = 0;
    softib_async_entry_t *from, *to;
    char bell;

    pthread_mutex_lock(&dev->async_lock);
    for (i = 0; i < dev->async_count; i++) {
        from = &dev->async_q[(dev->async_head + i) % SOFTIB_ASYNC_QUEUE];
        if (from->element == element) {
            dropped++;
            continue;
        }
        to = &dev->async_q[(dev->async_head + kept++) % SOFTIB_ASYNC_QUEUE];
        if (to != from) {
            *to = *from;
        }
    }
    dev->async_count = kept;
    for (i = 0; i < dropped; i++) {
        if (recv(dev->super.async_fd, &bell, 1, MSG_DONTWAIT) != 1) {
            break;   /* a reader holds it: it will find no event for it */
        }
    }
    pthread_mutex_unlock(&dev->async_lock);
    if (dropped) {
        axon_debug("softib: %s: %u unread async events of a destroyed object dropped",
                   dev->super.name, dropped);
    }
}

int softib_async_get(axon_dev_context_t *ctx, axon_dev_async_event_t *event)
{
    softib_dev_t *dev = softib_dev(ctx);
    int nonblock, ret;
    char bell;

    for (;;) {
        if ((ret = softib_wait_fd(dev, ctx->async_fd)) != 0) {
            return ret;
        }
        if (recv(ctx->async_fd, &bell, 1, MSG_DONTWAIT) != 1) {
            ret = errno;
        } else {
            pthread_mutex_lock(&dev->async_lock);
            if (dev->async_count > 0) {
                *event          = dev->async_q[dev->async_head].ev;
                dev->async_head = (dev->async_head + 1) % SOFTIB_ASYNC_QUEUE;
                ++*softib_async_held(event);   /* before its destroy can look */
                dev->async_count--;
                pthread_mutex_unlock(&dev->async_lock);
                return 0;
            }
            pthread_mutex_unlock(&dev->async_lock);   /* its event was forgotten */
            ret = EAGAIN;
        }
        nonblock = fcntl(ctx->async_fd, F_GETFL) & O_NONBLOCK;
        if ((ret != EAGAIN) || nonblock) {
            return ret;
        }
    }
}

void softib_async_ack(axon_dev_context_t *ctx, axon_dev_async_event_t *event)
{
    softib_dev_t *dev = softib_dev(ctx);

    pthread_mutex_lock(&dev->async_lock);
    --*softib_async_held(event);
    pthread_cond_broadcast(&dev->async_acked);
    pthread_mutex_unlock(&dev->async_lock);
}

void softib_async_wait_acked(softib_dev_t *dev, const unsigned *held)
{
    struct timespec deadline;
    int warned = 0;

    pthread_mutex_lock(&dev->async_lock);
    while (*held > 0) {
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += 1;
        if ((pthread_cond_timedwait(&dev->async_acked, &dev->async_lock, &deadline) ==
             ETIMEDOUT) && !warned) {
            /* a program that never acks hangs here, as over libibverbs: say why */
            axon_warn("softib: %s: destroy waits for %u async events to be acked",
                      dev->super.name, *held);
            warned = 1;
        }
    }
    pthread_mutex_unlock(&dev->async_lock);
}
