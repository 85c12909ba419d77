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
 * again.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
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
    return 0;
}

void softib_async_close(softib_dev_t *dev)
{
    close(dev->super.async_fd);
    close(dev->async_wfd);
    pthread_mutex_destroy(&dev->async_lock);
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
    switch (type) {
    case AXON_DEV_EVENT_CQ_ERR:
        entry->ev.element.cq = element;
        break;
    case AXON_DEV_EVENT_SRQ_ERR:
    case AXON_DEV_EVENT_SRQ_LIMIT_REACHED:
        entry->ev.element.srq = element;
        break;
    case AXON_DEV_EVENT_DCT_KEY_VIOLATION:
    case AXON_DEV_EVENT_DCT_ACCESS_ERR:
    case AXON_DEV_EVENT_DCT_REQ_ERR:
        entry->ev.element.dct = element;
        break;
    default:
        entry->ev.element.qp = element;
        break;
    }
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

void softib_async_ack(axon_dev_async_event_t *event)
{
    (void)event;   /* events hold no resources */
}
