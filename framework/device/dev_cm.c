/*
 * The connection manager's front: event channels and their queues, ids and
 * their reference counts, the checks every back end shares, and the choice
 * of back end by the device an address belongs to (in the device back ends'
 * order, dev_backend.h). What an id does once bound is the back end's.
 */
#include "axon_config.h"
#include "dev_cm_backend.h"
#include "log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

const axon_dev_cm_ops_t *axon_dev_cm_backends[AXON_DEV_CM_MAX_BACKENDS + 1];

static const char *const axon_dev_cm_event_strs[] = {
    [AXON_DEV_CM_EVENT_ADDR_RESOLVED]    = "RDMA_CM_EVENT_ADDR_RESOLVED",
    [AXON_DEV_CM_EVENT_ADDR_ERROR]       = "RDMA_CM_EVENT_ADDR_ERROR",
    [AXON_DEV_CM_EVENT_ROUTE_RESOLVED]   = "RDMA_CM_EVENT_ROUTE_RESOLVED",
    [AXON_DEV_CM_EVENT_ROUTE_ERROR]      = "RDMA_CM_EVENT_ROUTE_ERROR",
    [AXON_DEV_CM_EVENT_CONNECT_REQUEST]  = "RDMA_CM_EVENT_CONNECT_REQUEST",
    [AXON_DEV_CM_EVENT_CONNECT_RESPONSE] = "RDMA_CM_EVENT_CONNECT_RESPONSE",
    [AXON_DEV_CM_EVENT_CONNECT_ERROR]    = "RDMA_CM_EVENT_CONNECT_ERROR",
    [AXON_DEV_CM_EVENT_UNREACHABLE]      = "RDMA_CM_EVENT_UNREACHABLE",
    [AXON_DEV_CM_EVENT_REJECTED]         = "RDMA_CM_EVENT_REJECTED",
    [AXON_DEV_CM_EVENT_ESTABLISHED]      = "RDMA_CM_EVENT_ESTABLISHED",
    [AXON_DEV_CM_EVENT_DISCONNECTED]     = "RDMA_CM_EVENT_DISCONNECTED",
    [AXON_DEV_CM_EVENT_DEVICE_REMOVAL]   = "RDMA_CM_EVENT_DEVICE_REMOVAL",
    [AXON_DEV_CM_EVENT_MULTICAST_JOIN]   = "RDMA_CM_EVENT_MULTICAST_JOIN",
    [AXON_DEV_CM_EVENT_MULTICAST_ERROR]  = "RDMA_CM_EVENT_MULTICAST_ERROR",
    [AXON_DEV_CM_EVENT_ADDR_CHANGE]      = "RDMA_CM_EVENT_ADDR_CHANGE",
    [AXON_DEV_CM_EVENT_TIMEWAIT_EXIT]    = "RDMA_CM_EVENT_TIMEWAIT_EXIT",
};

const char *axon_dev_cm_event_str(axon_dev_cm_event_type_t event)
{
    unsigned n = sizeof(axon_dev_cm_event_strs) / sizeof(axon_dev_cm_event_strs[0]);
    return ((unsigned)event < n) ? axon_dev_cm_event_strs[event] : "UNKNOWN EVENT";
}

const char *axon_dev_cm_addr_str(const struct sockaddr_in *addr, char *buf, size_t max)
{
    char ip[INET_ADDRSTRLEN] = "?";

    inet_ntop(AF_INET, &addr->sin_addr, ip, sizeof(ip));
    snprintf(buf, max, "%s:%u", ip, ntohs(addr->sin_port));
    return buf;
}

/* ------------------------------------------------------------ shared devices */

typedef struct axon_dev_cm_device {
    axon_list_link_t    link;
    axon_dev_context_t *ctx;
    int                 refcnt;
} axon_dev_cm_device_t;

static pthread_mutex_t  axon_dev_cm_devices_lock = PTHREAD_MUTEX_INITIALIZER;
static axon_list_link_t axon_dev_cm_devices      = {&axon_dev_cm_devices, &axon_dev_cm_devices};

int axon_dev_cm_open_device(const char *name, axon_dev_context_t **ctx_p)
{
    axon_dev_cm_device_t *dev;
    int ret = 0;

    if ((name == NULL) || (ctx_p == NULL)) {
        axon_error("axon_dev_cm_open_device: NULL %s", (name == NULL) ? "name" : "ctx_p");
        return EINVAL;
    }
    pthread_mutex_lock(&axon_dev_cm_devices_lock);
    axon_list_for_each(dev, &axon_dev_cm_devices, link) {
        if (!strcmp(dev->ctx->name, name)) {
            dev->refcnt++;
            *ctx_p = dev->ctx;
            goto out;
        }
    }
    dev = calloc(1, sizeof(*dev));
    if (dev == NULL) {
        axon_error("rdma cm: no memory to open device %s", name);
        ret = ENOMEM;
        goto out;
    }
    if ((ret = axon_dev_open(name, &dev->ctx)) != 0) {
        free(dev);
        goto out;
    }
    dev->refcnt = 1;
    axon_list_add_tail(&axon_dev_cm_devices, &dev->link);
    *ctx_p = dev->ctx;
out:
    pthread_mutex_unlock(&axon_dev_cm_devices_lock);
    return ret;
}

void axon_dev_cm_close_device(axon_dev_context_t *ctx)
{
    axon_dev_cm_device_t *dev;

    pthread_mutex_lock(&axon_dev_cm_devices_lock);
    axon_list_for_each(dev, &axon_dev_cm_devices, link) {
        if ((dev->ctx == ctx) && (--dev->refcnt == 0)) {
            axon_list_del(&dev->link);
            axon_dev_close(dev->ctx);
            free(dev);
            break;
        }
    }
    pthread_mutex_unlock(&axon_dev_cm_devices_lock);
}

/* ------------------------------------------------------------ channels */

int axon_dev_cm_chan_watch(axon_dev_cm_chan_t *chan, int fd)
{
    struct epoll_event e = {.events = EPOLLIN, .data.fd = fd};

    if (epoll_ctl(chan->super.fd, EPOLL_CTL_ADD, fd, &e) < 0) {
        axon_error("rdma cm: cannot watch fd %d: %s", fd, strerror(errno));
        return errno;
    }
    return 0;
}

void axon_dev_cm_chan_unwatch(axon_dev_cm_chan_t *chan, int fd)
{
    epoll_ctl(chan->super.fd, EPOLL_CTL_DEL, fd, NULL);
}

int axon_dev_cm_create_event_channel(axon_dev_cm_channel_t **channel_p)
{
    axon_dev_cm_chan_t *chan;
    int ret;

    if (channel_p == NULL) {
        axon_error("axon_dev_cm_create_event_channel: NULL channel_p");
        return EINVAL;
    }
    chan = calloc(1, sizeof(*chan));
    if (chan == NULL) {
        axon_error("rdma cm: no memory for an event channel");
        return ENOMEM;
    }
    chan->super.fd = epoll_create1(EPOLL_CLOEXEC);
    chan->queue_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if ((chan->super.fd < 0) || (chan->queue_fd < 0)) {
        ret = errno;
        axon_error("rdma cm: cannot create the channel's fds: %s", strerror(ret));
        goto err;
    }
    if ((ret = axon_dev_cm_chan_watch(chan, chan->queue_fd)) != 0) {
        goto err;
    }
    pthread_mutex_init(&chan->lock, NULL);
    axon_list_init(&chan->queue);
    *channel_p = &chan->super;
    return 0;

err:
    if (chan->super.fd >= 0) {
        close(chan->super.fd);
    }
    if (chan->queue_fd >= 0) {
        close(chan->queue_fd);
    }
    free(chan);
    return ret;
}

static axon_dev_cm_chan_t *axon_dev_cm_chan(axon_dev_cm_channel_t *channel)
{
    return (axon_dev_cm_chan_t *)channel;
}

static void axon_dev_cm_chan_free(axon_dev_cm_chan_t *chan)
{
    pthread_mutex_destroy(&chan->lock);
    free(chan);
}

int axon_dev_cm_destroy_event_channel(axon_dev_cm_channel_t *channel)
{
    axon_dev_cm_chan_t *chan = axon_dev_cm_chan(channel);
    int i, in_use;

    if (channel == NULL) {
        axon_error("axon_dev_cm_destroy_event_channel: NULL channel");
        return EINVAL;
    }
    pthread_mutex_lock(&chan->lock);
    if (chan->num_ids > 0) {
        pthread_mutex_unlock(&chan->lock);
        axon_error("rdma cm: cannot destroy an event channel with %u ids on it", chan->num_ids);
        return EBUSY;
    }
    /* Under the lock: a getter may be progressing the back ends. */
    for (i = 0; axon_dev_cm_backends[i] != NULL; ++i) {
        if (chan->be[i] != NULL) {
            axon_dev_cm_backends[i]->chan_close(chan->be[i]);
            chan->be[i] = NULL;
        }
    }
    close(chan->queue_fd);
    close(chan->super.fd);
    chan->closing = 1;
    in_use        = (chan->getters > 0);
    pthread_mutex_unlock(&chan->lock);
    /* A thread still blocked in get_event owns the memory until it leaves. */
    if (!in_use) {
        axon_dev_cm_chan_free(chan);
    }
    return 0;
}

/* Index of ops in the back-end list (its slot in chan->be). */
static int axon_dev_cm_backend_index(const axon_dev_cm_ops_t *ops)
{
    int i;

    for (i = 0; axon_dev_cm_backends[i] != NULL; ++i) {
        if (axon_dev_cm_backends[i] == ops) {
            return i;
        }
    }
    return -1;
}

void *axon_dev_cm_chan_state(axon_dev_cm_chan_t *chan, const axon_dev_cm_ops_t *ops)
{
    int i = axon_dev_cm_backend_index(ops);
    return (i < 0) ? NULL : chan->be[i];
}

/* Make sure chan has ops' state; 0 or errno. */
static int axon_dev_cm_chan_attach(axon_dev_cm_chan_t *chan, const axon_dev_cm_ops_t *ops)
{
    int i = axon_dev_cm_backend_index(ops);

    if (chan->be[i] != NULL) {
        return 0;
    }
    return ops->chan_open(chan, &chan->be[i]);
}

/* ------------------------------------------------------------ ids and events */

axon_dev_cm_id_priv_t *axon_dev_cm_id_new(axon_dev_cm_chan_t *chan, void *context,
                                          axon_dev_cm_port_space_t ps,
                                          const axon_dev_cm_ops_t *ops)
{
    axon_dev_cm_id_priv_t *id = calloc(1, sizeof(*id));

    if (id == NULL) {
        axon_error("rdma cm: no memory for an id");
        return NULL;
    }
    id->super.channel         = &chan->super;
    id->super.context         = context;
    id->super.ps              = ps;
    id->super.src_addr.sin_family = AF_INET;
    id->super.dst_addr.sin_family = AF_INET;
    id->chan                  = chan;
    id->ops                   = ops;
    id->refcnt                = 1;
    chan->num_ids++;
    return id;
}

void axon_dev_cm_id_drop(axon_dev_cm_id_priv_t *id)
{
    id->chan->num_ids--;
    free(id);
}

static void axon_dev_cm_id_put(axon_dev_cm_id_priv_t *id)
{
    if (--id->refcnt > 0) {
        return;
    }
    if ((id->ops != NULL) && (id->ops->release != NULL)) {
        id->ops->release(id);
    }
    free(id);
}

axon_dev_cm_ev_priv_t *axon_dev_cm_event_new(axon_dev_cm_id_priv_t *id,
                                             axon_dev_cm_event_type_t type, int status)
{
    axon_dev_cm_ev_priv_t *ev = calloc(1, sizeof(*ev));

    if (ev == NULL) {
        axon_error("rdma cm: no memory for event %s", axon_dev_cm_event_str(type));
        return NULL;
    }
    axon_list_init(&ev->link);
    ev->super.id     = &id->super;
    ev->super.event  = type;
    ev->super.status = status;
    id->refcnt++;
    return ev;
}

void axon_dev_cm_event_set_listen_id(axon_dev_cm_ev_priv_t *ev, axon_dev_cm_id_priv_t *lid)
{
    ev->super.listen_id = &lid->super;
    lid->refcnt++;
}

void axon_dev_cm_event_set_pdata(axon_dev_cm_ev_priv_t *ev, const void *pdata, size_t len)
{
    if (len > sizeof(ev->pdata)) {
        len = sizeof(ev->pdata);
    }
    if (len > 0) {
        memcpy(ev->pdata, pdata, len);
        ev->super.param.conn.private_data = ev->pdata;
    }
    ev->super.param.conn.private_data_len = (uint8_t)len;
}

static void axon_dev_cm_event_free(axon_dev_cm_ev_priv_t *ev)
{
    if ((ev->ops != NULL) && (ev->ops->event_release != NULL)) {
        ev->ops->event_release(ev);
    }
    axon_dev_cm_id_put(axon_dev_cm_id_priv(ev->super.id));
    if (ev->super.listen_id != NULL) {
        axon_dev_cm_id_put(axon_dev_cm_id_priv(ev->super.listen_id));
    }
    free(ev);
}

static void axon_dev_cm_queue_signal(axon_dev_cm_chan_t *chan, int nonempty)
{
    uint64_t v = 1;

    if (nonempty) {
        if (write(chan->queue_fd, &v, sizeof(v)) < 0) {
            axon_debug("rdma cm: queue eventfd: %s", strerror(errno));
        }
    } else if (read(chan->queue_fd, &v, sizeof(v)) < 0) {
        /* EAGAIN: already clear */
    }
}

static void axon_dev_cm_id_destroy_locked(axon_dev_cm_id_priv_t *id);

void axon_dev_cm_event_queue(axon_dev_cm_chan_t *chan, axon_dev_cm_ev_priv_t *ev)
{
    axon_dev_cm_id_priv_t *id = axon_dev_cm_id_priv(ev->super.id);

    /* An id destroyed meanwhile gets nothing more; a request to a gone listener goes. */
    if (id->destroyed) {
        axon_dev_cm_event_free(ev);
        return;
    }
    if ((ev->super.listen_id != NULL) && axon_dev_cm_id_priv(ev->super.listen_id)->destroyed) {
        axon_dev_cm_id_destroy_locked(id);
        axon_dev_cm_event_free(ev);
        return;
    }
    axon_debug("rdma cm: %s on id %p status %d", axon_dev_cm_event_str(ev->super.event),
               (void *)ev->super.id, ev->super.status);
    axon_list_add_tail(&chan->queue, &ev->link);
    axon_dev_cm_queue_signal(chan, 1);
}

/* chan->lock held by a getter leaving a blocking wait; unlocks it. Frees a
 * channel destroyed meanwhile once its last getter is out. */
static void axon_dev_cm_getter_leave(void *arg)
{
    axon_dev_cm_chan_t *chan = arg;
    int last_out;

    last_out = (--chan->getters == 0) && chan->closing;
    pthread_mutex_unlock(&chan->lock);
    if (last_out) {
        axon_dev_cm_chan_free(chan);
    }
}

/* A getter cancelled inside epoll_wait holds no lock; take it to leave. */
static void axon_dev_cm_getter_cancelled(void *arg)
{
    axon_dev_cm_chan_t *chan = arg;

    pthread_mutex_lock(&chan->lock);
    axon_dev_cm_getter_leave(chan);
}

/* Blocks until an event comes; returns 0 with the lock held, or errno
 * without it. Inside, the thread counts as a getter so that destroying the
 * channel under it leaves the memory alone. */
static int axon_dev_cm_get_wait(axon_dev_cm_chan_t *chan)
{
    struct epoll_event e;
    int ret = 0, n;

    chan->getters++;
    pthread_mutex_unlock(&chan->lock);
    pthread_cleanup_push(axon_dev_cm_getter_cancelled, chan);
    n   = epoll_wait(chan->super.fd, &e, 1, -1);
    ret = ((n < 0) && (errno != EINTR)) ? errno : 0;
    pthread_cleanup_pop(0);
    pthread_mutex_lock(&chan->lock);
    if (chan->closing) {
        /* Destroyed under us: librdmacm's getter stays blocked in read() on
         * the closed fd, so this one sleeps too (cancellable) instead of
         * returning an error the caller would take as the channel failing. */
        axon_dev_cm_getter_leave(chan);
        for (;;) {
            pause();
        }
    }
    if (ret != 0) {
        axon_error("rdma cm: waiting for events: %s", strerror(ret));
        axon_dev_cm_getter_leave(chan);
        return ret;
    }
    chan->getters--;
    return 0;
}

int axon_dev_cm_get_event(axon_dev_cm_channel_t *channel, axon_dev_cm_event_t **event_p)
{
    axon_dev_cm_chan_t *chan = axon_dev_cm_chan(channel);
    axon_dev_cm_ev_priv_t *ev;
    int i, flags, ret;

    if ((channel == NULL) || (event_p == NULL)) {
        axon_error("axon_dev_cm_get_event: NULL %s", (channel == NULL) ? "channel" : "event_p");
        return EINVAL;
    }
    pthread_mutex_lock(&chan->lock);
    for (;;) {
        if (!axon_list_is_empty(&chan->queue)) {
            ev = axon_list_first(&chan->queue, axon_dev_cm_ev_priv_t, link);
            axon_list_del(&ev->link);
            if (axon_list_is_empty(&chan->queue)) {
                axon_dev_cm_queue_signal(chan, 0);
            }
            pthread_mutex_unlock(&chan->lock);
            *event_p = &ev->super;
            return 0;
        }
        for (i = 0; axon_dev_cm_backends[i] != NULL; ++i) {
            if (chan->be[i] != NULL) {
                axon_dev_cm_backends[i]->chan_progress(chan, chan->be[i]);
            }
        }
        if (!axon_list_is_empty(&chan->queue)) {
            continue;
        }
        flags = fcntl(chan->super.fd, F_GETFL);
        if ((flags < 0) || (flags & O_NONBLOCK)) {
            pthread_mutex_unlock(&chan->lock);
            return EAGAIN;
        }
        if ((ret = axon_dev_cm_get_wait(chan)) != 0) {
            return ret;
        }
    }
}

int axon_dev_cm_ack_event(axon_dev_cm_event_t *event)
{
    axon_dev_cm_chan_t *chan;

    if (event == NULL) {
        axon_error("axon_dev_cm_ack_event: NULL event");
        return EINVAL;
    }
    chan = axon_dev_cm_id_priv(event->id)->chan;
    pthread_mutex_lock(&chan->lock);
    axon_dev_cm_event_free((axon_dev_cm_ev_priv_t *)event);
    pthread_mutex_unlock(&chan->lock);
    return 0;
}

int axon_dev_cm_create_id(axon_dev_cm_channel_t *channel, void *context,
                          axon_dev_cm_port_space_t ps, axon_dev_cm_id_t **id_p)
{
    axon_dev_cm_chan_t *chan = axon_dev_cm_chan(channel);
    axon_dev_cm_id_priv_t *id;

    if ((channel == NULL) || (id_p == NULL)) {
        axon_error("axon_dev_cm_create_id: NULL %s (synchronous ids are not supported)",
                   (channel == NULL) ? "channel" : "id_p");
        return EINVAL;
    }
    if ((ps != AXON_DEV_CM_PS_TCP) && (ps != AXON_DEV_CM_PS_UDP)) {
        axon_error("axon_dev_cm_create_id: port space 0x%x: only RDMA_PS_TCP (0x%x) and "
                   "RDMA_PS_UDP (0x%x) are supported", (unsigned)ps,
                   (unsigned)AXON_DEV_CM_PS_TCP, (unsigned)AXON_DEV_CM_PS_UDP);
        return EINVAL;
    }
    pthread_mutex_lock(&chan->lock);
    id = axon_dev_cm_id_new(chan, context, ps, NULL);
    pthread_mutex_unlock(&chan->lock);
    if (id == NULL) {
        return ENOMEM;
    }
    *id_p = &id->super;
    return 0;
}

/* chan->lock held. Children the user never saw go with their listener. */
static void axon_dev_cm_id_destroy_locked(axon_dev_cm_id_priv_t *id)
{
    axon_dev_cm_ev_priv_t *ev, *tmp;
    axon_list_link_t orphans;

    id->destroyed = 1;
    id->chan->num_ids--;
    if (id->ops != NULL) {
        id->ops->destroy(id);
    }
    axon_list_init(&orphans);
    axon_list_for_each_safe(ev, tmp, &id->chan->queue, link) {
        if ((ev->super.id == &id->super) || (ev->super.listen_id == &id->super)) {
            axon_list_del(&ev->link);
            axon_list_add_tail(&orphans, &ev->link);
        }
    }
    if (axon_list_is_empty(&id->chan->queue)) {
        axon_dev_cm_queue_signal(id->chan, 0);
    }
    axon_list_for_each_safe(ev, tmp, &orphans, link) {
        axon_list_del(&ev->link);
        if ((ev->super.event == AXON_DEV_CM_EVENT_CONNECT_REQUEST) &&
            (ev->super.listen_id == &id->super) &&
            !axon_dev_cm_id_priv(ev->super.id)->destroyed) {
            axon_dev_cm_id_destroy_locked(axon_dev_cm_id_priv(ev->super.id));
        }
        axon_dev_cm_event_free(ev);
    }
    axon_dev_cm_id_put(id);
}

/* Lock the id's channel after the checks every call makes; NULL if bad. */
static axon_dev_cm_id_priv_t *axon_dev_cm_id_lock(axon_dev_cm_id_t *id, const char *what,
                                                  int need_bound)
{
    axon_dev_cm_id_priv_t *priv = axon_dev_cm_id_priv(id);

    if (id == NULL) {
        axon_error("axon_dev_cm_%s: NULL id", what);
        return NULL;
    }
    pthread_mutex_lock(&priv->chan->lock);
    if (priv->destroyed) {
        pthread_mutex_unlock(&priv->chan->lock);
        axon_error("axon_dev_cm_%s: id %p was destroyed", what, (void *)id);
        return NULL;
    }
    if (need_bound && (priv->ops == NULL)) {
        pthread_mutex_unlock(&priv->chan->lock);
        axon_error("axon_dev_cm_%s: id %p is not bound to a device (bind_addr or "
                   "resolve_addr first)", what, (void *)id);
        return NULL;
    }
    return priv;
}

static void axon_dev_cm_id_unlock(axon_dev_cm_id_priv_t *priv)
{
    pthread_mutex_unlock(&priv->chan->lock);
}

/* Return what the back end's _op says, called on a bound id with its channel locked. */
#define AXON_DEV_CM_CALL_BOUND(_id, _op, ...)                                   \
    do {                                                                        \
        axon_dev_cm_id_priv_t *_priv = axon_dev_cm_id_lock(_id, #_op, 1);       \
        int _ret;                                                               \
                                                                                \
        if (_priv == NULL) {                                                    \
            return EINVAL;                                                      \
        }                                                                       \
        _ret = _priv->ops->_op(_priv, ## __VA_ARGS__);                          \
        axon_dev_cm_id_unlock(_priv);                                           \
        return _ret;                                                            \
    } while (0)

int axon_dev_cm_destroy_id(axon_dev_cm_id_t *id)
{
    axon_dev_cm_id_priv_t *priv = axon_dev_cm_id_lock(id, "destroy_id", 0);
    axon_dev_cm_chan_t *chan;

    if (priv == NULL) {
        return EINVAL;
    }
    chan = priv->chan;
    axon_dev_cm_id_destroy_locked(priv);
    pthread_mutex_unlock(&chan->lock);
    return 0;
}

/* ------------------------------------------------------------ addresses */

static int axon_dev_cm_check_in(const char *what, const char *name, const struct sockaddr *sa)
{
    if (sa == NULL) {
        axon_error("axon_dev_cm_%s: NULL %s address", what, name);
        return EINVAL;
    }
    if (sa->sa_family != AF_INET) {
        axon_error("axon_dev_cm_%s: %s address family %d: only AF_INET (%d) is supported",
                   what, name, sa->sa_family, AF_INET);
        return EINVAL;
    }
    return 0;
}

int axon_dev_cm_bind_addr(axon_dev_cm_id_t *id, const struct sockaddr *addr)
{
    const struct sockaddr_in *in = (const struct sockaddr_in *)addr;
    const axon_dev_cm_ops_t *const *be;
    axon_dev_cm_id_priv_t *priv;
    char str[64];
    int ret;

    if ((ret = axon_dev_cm_check_in("bind_addr", "local", addr)) != 0) {
        return ret;
    }
    if ((priv = axon_dev_cm_id_lock(id, "bind_addr", 0)) == NULL) {
        return EINVAL;
    }
    if (priv->ops != NULL) {
        axon_error("axon_dev_cm_bind_addr: id %p is already bound", (void *)id);
        ret = EINVAL;
        goto out;
    }
    for (be = axon_dev_cm_backends; *be != NULL; ++be) {
        if ((*be)->owns_addr(in)) {
            break;
        }
    }
    if (*be == NULL) {
        axon_error("axon_dev_cm_bind_addr: no RDMA device has address %s",
                   axon_dev_cm_addr_str(in, str, sizeof(str)));
        ret = EADDRNOTAVAIL;
        goto out;
    }
    if ((ret = axon_dev_cm_chan_attach(priv->chan, *be)) != 0) {
        goto out;
    }
    priv->ops = *be;
    if ((ret = priv->ops->bind_addr(priv, in)) != 0) {
        priv->ops = NULL;
    }
out:
    axon_dev_cm_id_unlock(priv);
    return ret;
}

int axon_dev_cm_resolve_addr(axon_dev_cm_id_t *id, const struct sockaddr *src,
                             const struct sockaddr *dst, int timeout_ms)
{
    const struct sockaddr_in *src_in = (const struct sockaddr_in *)src;
    const struct sockaddr_in *dst_in = (const struct sockaddr_in *)dst;
    const axon_dev_cm_ops_t *const *be;
    axon_dev_cm_id_priv_t *priv;
    axon_dev_cm_ev_priv_t *ev;
    char str[64];
    int ret;

    if (((ret = axon_dev_cm_check_in("resolve_addr", "destination", dst)) != 0) ||
        ((src != NULL) && (ret = axon_dev_cm_check_in("resolve_addr", "source", src)) != 0)) {
        return ret;
    }
    /* a multicast group is resolved to join it (join_multicast), not to connect */
    if ((dst_in->sin_port == 0) && !IN_MULTICAST(ntohl(dst_in->sin_addr.s_addr))) {
        axon_error("axon_dev_cm_resolve_addr: destination %s has port 0",
                   axon_dev_cm_addr_str(dst_in, str, sizeof(str)));
        return EINVAL;
    }
    if (timeout_ms < 0) {
        axon_error("axon_dev_cm_resolve_addr: timeout %d ms is negative", timeout_ms);
        return EINVAL;
    }
    if ((priv = axon_dev_cm_id_lock(id, "resolve_addr", 0)) == NULL) {
        return EINVAL;
    }
    if (priv->ops == NULL) {
        for (be = axon_dev_cm_backends; *be != NULL; ++be) {
            if ((src_in != NULL) ? (*be)->owns_addr(src_in) : (*be)->routes_to(dst_in)) {
                break;
            }
        }
        if (*be == NULL) {
            /* Like librdmacm: resolution failures come as an event. */
            axon_debug("rdma cm: no RDMA device %s %s", src_in ? "has" : "routes to",
                       axon_dev_cm_addr_str(src_in ? src_in : dst_in, str, sizeof(str)));
            if ((ev = axon_dev_cm_event_new(priv, AXON_DEV_CM_EVENT_ADDR_ERROR,
                                            src_in ? -EADDRNOTAVAIL : -EHOSTUNREACH))) {
                axon_dev_cm_event_queue(priv->chan, ev);
            }
            ret = (ev != NULL) ? 0 : ENOMEM;
            goto out;
        }
        if ((ret = axon_dev_cm_chan_attach(priv->chan, *be)) != 0) {
            goto out;
        }
        priv->ops = *be;
    }
    ret = priv->ops->resolve_addr(priv, src_in, dst_in, timeout_ms);
out:
    axon_dev_cm_id_unlock(priv);
    return ret;
}

/* ------------------------------------------------------------ calls on a bound id */

int axon_dev_cm_resolve_route(axon_dev_cm_id_t *id, int timeout_ms)
{
    if (timeout_ms < 0) {
        axon_error("axon_dev_cm_resolve_route: timeout %d ms is negative", timeout_ms);
        return EINVAL;
    }
    AXON_DEV_CM_CALL_BOUND(id, resolve_route, timeout_ms);
}

int axon_dev_cm_listen(axon_dev_cm_id_t *id, int backlog)
{
    if (backlog < 0) {
        axon_error("axon_dev_cm_listen: backlog %d is negative", backlog);
        return EINVAL;
    }
    AXON_DEV_CM_CALL_BOUND(id, listen, backlog);
}

int axon_dev_cm_create_qp(axon_dev_cm_id_t *id, axon_dev_pd_t *pd,
                          axon_dev_qp_init_attr_t *init_attr)
{
    axon_dev_cm_id_priv_t *priv;
    int ret = EINVAL;

    if ((pd == NULL) || (init_attr == NULL)) {
        axon_error("axon_dev_cm_create_qp: NULL %s", (pd == NULL) ? "pd" : "init_attr");
        return EINVAL;
    }
    if ((priv = axon_dev_cm_id_lock(id, "create_qp", 1)) == NULL) {
        return EINVAL;
    }
    if (id->verbs == NULL) {
        axon_error("axon_dev_cm_create_qp: id %p has no device yet", (void *)id);
    } else if (pd->context != id->verbs) {
        axon_error("axon_dev_cm_create_qp: pd of device %s, the id is on %s",
                   pd->context->name, id->verbs->name);
    } else if (id->qp != NULL) {
        axon_error("axon_dev_cm_create_qp: id %p already has QP %u", (void *)id,
                   id->qp->qp_num);
    } else if (init_attr->qp_type != ((id->ps == AXON_DEV_CM_PS_UDP) ? AXON_DEV_QPT_UD :
                                                                        AXON_DEV_QPT_RC)) {
        axon_error("axon_dev_cm_create_qp: QP type %d: RDMA_PS_TCP ids carry RC QPs (%d), "
                   "RDMA_PS_UDP ids UD QPs (%d)", init_attr->qp_type, AXON_DEV_QPT_RC,
                   AXON_DEV_QPT_UD);
    } else {
        ret = priv->ops->create_qp(priv, pd, init_attr);
    }
    axon_dev_cm_id_unlock(priv);
    return ret;
}

int axon_dev_cm_destroy_qp(axon_dev_cm_id_t *id)
{
    axon_dev_cm_id_priv_t *priv;
    axon_dev_qp_t *qp;

    if ((priv = axon_dev_cm_id_lock(id, "destroy_qp", 0)) == NULL) {
        return EINVAL;
    }
    qp = id->qp;
    if (qp == NULL) {
        axon_dev_cm_id_unlock(priv);
        axon_error("axon_dev_cm_destroy_qp: id %p has no QP", (void *)id);
        return EINVAL;
    }
    if (priv->ops != NULL) {
        priv->ops->qp_gone(priv);
    }
    id->qp = NULL;
    axon_dev_cm_id_unlock(priv);
    return axon_dev_destroy_qp(qp);
}

static int axon_dev_cm_check_pdata(const char *what, const void *pdata, unsigned len,
                                   unsigned max)
{
    if (len > max) {
        axon_error("axon_dev_cm_%s: private data of %u bytes, at most %u", what, len, max);
        return EINVAL;
    }
    if ((len > 0) && (pdata == NULL)) {
        axon_error("axon_dev_cm_%s: NULL private data of %u bytes", what, len);
        return EINVAL;
    }
    return 0;
}

int axon_dev_cm_connect(axon_dev_cm_id_t *id, const axon_dev_cm_conn_param_t *param)
{
    if (param == NULL) {
        axon_error("axon_dev_cm_connect: NULL conn_param");
        return EINVAL;
    }
    if (axon_dev_cm_check_pdata("connect", param->private_data, param->private_data_len,
                                AXON_DEV_CM_CONNECT_PDATA_MAX) != 0) {
        return EINVAL;
    }
    AXON_DEV_CM_CALL_BOUND(id, connect, param);
}

int axon_dev_cm_accept(axon_dev_cm_id_t *id, const axon_dev_cm_conn_param_t *param)
{
    if ((param != NULL) &&
        (axon_dev_cm_check_pdata("accept", param->private_data, param->private_data_len,
                                 AXON_DEV_CM_ACCEPT_PDATA_MAX) != 0)) {
        return EINVAL;
    }
    AXON_DEV_CM_CALL_BOUND(id, accept, param);
}

int axon_dev_cm_reject(axon_dev_cm_id_t *id, const void *private_data, uint8_t private_data_len)
{
    if (axon_dev_cm_check_pdata("reject", private_data, private_data_len,
                                AXON_DEV_CM_REJECT_PDATA_MAX) != 0) {
        return EINVAL;
    }
    AXON_DEV_CM_CALL_BOUND(id, reject, private_data, private_data_len);
}

/* An option's value of the type librdmacm gives it; EINVAL (logged) on another length. */
static int axon_dev_cm_option_value(const char *name, const void *optval, size_t optlen,
                                    size_t want, unsigned max, unsigned *value)
{
    unsigned v;

    if ((optval == NULL) || (optlen != want)) {
        axon_error("axon_dev_cm_set_option: %s takes %zu bytes, not %zu%s", name, want, optlen,
                   (optval == NULL) ? " (and a NULL value)" : "");
        return EINVAL;
    }
    v = (want == sizeof(uint8_t)) ? *(const uint8_t *)optval : (unsigned)*(const int *)optval;
    if (v > max) {
        axon_error("axon_dev_cm_set_option: %s %u is over %u", name, v, max);
        return EINVAL;
    }
    *value = v;
    return 0;
}

int axon_dev_cm_set_option(axon_dev_cm_id_t *id, int level, int optname, const void *optval,
                           size_t optlen)
{
    axon_dev_cm_id_priv_t *priv;
    axon_dev_cm_options_t o;
    unsigned v;
    int ret;

    if (level != AXON_DEV_CM_OPTION_ID) {
        axon_error("axon_dev_cm_set_option: level %d option %d: %s", level, optname,
                   (level == AXON_DEV_CM_OPTION_IB) ? "InfiniBand path records are not "
                   "supported (the route is resolved)" : "unknown level");
        return (level == AXON_DEV_CM_OPTION_IB) ? ENOSYS : EINVAL;
    }
    if ((priv = axon_dev_cm_id_lock(id, "set_option", 0)) == NULL) {
        return EINVAL;
    }
    o = priv->opts;
    switch (optname) {
    case AXON_DEV_CM_OPTION_ID_TOS:
        ret = axon_dev_cm_option_value("TOS", optval, optlen, sizeof(uint8_t), 255, &v);
        o.tos     = (uint8_t)v;
        o.has_tos = 1;
        break;
    case AXON_DEV_CM_OPTION_ID_ACK_TIMEOUT:
        ret = axon_dev_cm_option_value("ACK_TIMEOUT", optval, optlen, sizeof(uint8_t), 31, &v);
        o.ack_timeout     = (uint8_t)v;
        o.has_ack_timeout = 1;
        break;
    case AXON_DEV_CM_OPTION_ID_REUSEADDR:
        ret = axon_dev_cm_option_value("REUSEADDR", optval, optlen, sizeof(int), 1, &v);
        o.reuseaddr = (int)v;
        break;
    case AXON_DEV_CM_OPTION_ID_AFONLY:
        ret = axon_dev_cm_option_value("AFONLY", optval, optlen, sizeof(int), 1, &v);
        o.afonly = (int)v;
        break;
    default:
        axon_error("axon_dev_cm_set_option: option %d of level RDMA_OPTION_ID is unknown",
                   optname);
        ret = EINVAL;
        break;
    }
    if (ret == 0) {
        priv->opts = o;
        if ((priv->ops != NULL) && (priv->ops->set_option != NULL)) {
            ret = priv->ops->set_option(priv);
        }
    }
    axon_dev_cm_id_unlock(priv);
    return ret;
}

int axon_dev_cm_init_qp_attr(axon_dev_cm_id_t *id, axon_dev_qp_attr_t *attr, int *mask_p)
{
    axon_dev_cm_id_priv_t *priv;
    int ret;

    if ((attr == NULL) || (mask_p == NULL)) {
        axon_error("axon_dev_cm_init_qp_attr: NULL %s", (attr == NULL) ? "attr" : "mask_p");
        return EINVAL;
    }
    if ((priv = axon_dev_cm_id_lock(id, "init_qp_attr", 1)) == NULL) {
        return EINVAL;
    }
    ret = (priv->ops->init_qp_attr != NULL) ? priv->ops->init_qp_attr(priv, attr, mask_p) :
                                              EOPNOTSUPP;
    axon_dev_cm_id_unlock(priv);
    return ret;
}

/* A multicast group's address (dev_cm.h): IPv4, 224.0.0.0/4. */
static int axon_dev_cm_mcast_addr(const struct sockaddr *addr, const char *what)
{
    char buf[32];

    if ((addr == NULL) || (addr->sa_family != AF_INET)) {
        axon_error("axon_dev_cm_%s: %s address (IPv4 multicast groups only)", what,
                   (addr == NULL) ? "NULL" : "not an IPv4");
        return EINVAL;
    }
    if (!IN_MULTICAST(ntohl(((const struct sockaddr_in *)addr)->sin_addr.s_addr))) {
        axon_error("axon_dev_cm_%s: %s is not a multicast address (224.0.0.0/4)", what,
                   axon_dev_cm_addr_str((const struct sockaddr_in *)addr, buf, sizeof(buf)));
        return EINVAL;
    }
    return 0;
}

/* join (send_only, context) or leave addr's group on a bound id (dev_cm.h). */
static int axon_dev_cm_mcast(axon_dev_cm_id_t *id, const struct sockaddr *addr, int join,
                             int send_only, void *context)
{
    const char *what = join ? "join_multicast" : "leave_multicast";
    const struct sockaddr_in *in = (const struct sockaddr_in *)addr;
    axon_dev_cm_id_priv_t *priv;
    int ret;

    if ((ret = axon_dev_cm_mcast_addr(addr, what)) != 0) {
        return ret;
    }
    if ((priv = axon_dev_cm_id_lock(id, what, 1)) == NULL) {
        return EINVAL;
    }
    if (join && (priv->ops->join_multicast != NULL)) {
        ret = priv->ops->join_multicast(priv, in, send_only, context);
    } else if (!join && (priv->ops->leave_multicast != NULL)) {
        ret = priv->ops->leave_multicast(priv, in);
    } else {
        ret = EOPNOTSUPP;   /* a back end without groups */
    }
    axon_dev_cm_id_unlock(priv);
    return ret;
}

int axon_dev_cm_join_multicast(axon_dev_cm_id_t *id, const struct sockaddr *addr,
                               int send_only, void *context)
{
    return axon_dev_cm_mcast(id, addr, 1, send_only, context);
}

int axon_dev_cm_leave_multicast(axon_dev_cm_id_t *id, const struct sockaddr *addr)
{
    return axon_dev_cm_mcast(id, addr, 0, 0, NULL);
}

int axon_dev_cm_establish(axon_dev_cm_id_t *id)
{
    AXON_DEV_CM_CALL_BOUND(id, establish);
}

int axon_dev_cm_disconnect(axon_dev_cm_id_t *id)
{
    AXON_DEV_CM_CALL_BOUND(id, disconnect);
}
