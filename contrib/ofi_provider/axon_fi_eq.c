/*
 * Event queue: a software ring of events (AV insert completions, user
 * writes), errors in order with the rest. Control path only, so it simply
 * takes its own mutex: any thread may read or write it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "axon_fi.h"

static int axon_fi_ring_grow(axon_fi_eq_ring_t *ring)
{
    size_t size = ring->size ? ring->size * 2 : AXON_FI_EQ_SIZE, i;
    axon_fi_eq_event_t *events = malloc(size * sizeof(*events));

    if (events == NULL) {
        return -FI_ENOMEM;
    }
    for (i = 0; i < ring->count; ++i) {
        events[i] = ring->events[(ring->head + i) % ring->size];
    }
    free(ring->events);
    ring->events = events;
    ring->size   = size;
    ring->head   = 0;
    return 0;
}

/* Errors wait in their own ring: reads fail with -FI_EAVAIL while one is there. */
int axon_fi_eq_post(axon_fi_eq_t *eq, uint32_t event, const void *buf, size_t len, int is_err)
{
    axon_fi_eq_ring_t *ring = is_err ? &eq->errs : &eq->events;
    axon_fi_eq_event_t *ev;
    int ret = 0;

    if (len > sizeof(ev->u)) {
        AXON_FI_WARN(FI_LOG_EQ, "event of %zu bytes is larger than %zu", len, sizeof(ev->u));
        return -FI_EINVAL;
    }
    pthread_mutex_lock(&eq->lock);
    if ((ring->count == ring->size) && ((ret = axon_fi_ring_grow(ring)) != 0)) {
        pthread_mutex_unlock(&eq->lock);
        return ret;
    }
    ev = &ring->events[(ring->head + ring->count) % ring->size];
    ev->event = event;
    ev->len   = len;
    memcpy(&ev->u, buf, len);
    ++ring->count;
    pthread_mutex_unlock(&eq->lock);
    return 0;
}

static void axon_fi_ring_pop(axon_fi_eq_ring_t *ring)
{
    ring->head = (ring->head + 1) % ring->size;
    --ring->count;
}

static ssize_t axon_fi_eq_read(struct fid_eq *eq_fid, uint32_t *event, void *buf, size_t len,
                               uint64_t flags)
{
    axon_fi_eq_t *eq = container_of(eq_fid, axon_fi_eq_t, eq_fid);
    axon_fi_eq_event_t *ev;
    ssize_t ret;

    pthread_mutex_lock(&eq->lock);
    if (eq->errs.count > 0) {
        ret = -FI_EAVAIL;
        goto out;
    }
    if (eq->events.count == 0) {
        ret = -FI_EAGAIN;
        goto out;
    }
    ev = &eq->events.events[eq->events.head];
    if (len < ev->len) {
        AXON_FI_WARN(FI_LOG_EQ, "fi_eq_read buffer of %zu bytes, event needs %zu", len, ev->len);
        ret = -FI_ETOOSMALL;
        goto out;
    }
    if (event != NULL) {
        *event = ev->event;
    }
    memcpy(buf, &ev->u, ev->len);
    ret = (ssize_t)ev->len;
    if (!(flags & FI_PEEK)) {
        axon_fi_ring_pop(&eq->events);
    }
out:
    pthread_mutex_unlock(&eq->lock);
    return ret;
}

static ssize_t axon_fi_eq_readerr(struct fid_eq *eq_fid, struct fi_eq_err_entry *buf,
                                  uint64_t flags)
{
    axon_fi_eq_t *eq = container_of(eq_fid, axon_fi_eq_t, eq_fid);
    ssize_t ret;

    pthread_mutex_lock(&eq->lock);
    if (eq->errs.count == 0) {
        ret = -FI_EAGAIN;
        goto out;
    }
    *buf = eq->errs.events[eq->errs.head].u.err;
    ret  = sizeof(*buf);
    if (!(flags & FI_PEEK)) {
        axon_fi_ring_pop(&eq->errs);
    }
out:
    pthread_mutex_unlock(&eq->lock);
    return ret;
}

static ssize_t axon_fi_eq_write(struct fid_eq *eq_fid, uint32_t event, const void *buf,
                                size_t len, uint64_t flags)
{
    axon_fi_eq_t *eq = container_of(eq_fid, axon_fi_eq_t, eq_fid);
    int ret;

    if ((buf == NULL) && (len > 0)) {
        return -FI_EINVAL;
    }
    ret = axon_fi_eq_post(eq, event, buf, len, 0);
    return (ret == 0) ? (ssize_t)len : ret;
}

static ssize_t axon_fi_eq_sread(struct fid_eq *eq_fid, uint32_t *event, void *buf, size_t len,
                                int timeout, uint64_t flags)
{
    struct timespec start, now, nap = {0, 100000};
    ssize_t ret;

    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        ret = axon_fi_eq_read(eq_fid, event, buf, len, flags);
        if (ret != -FI_EAGAIN) {
            return ret;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((timeout >= 0) && ((now.tv_sec - start.tv_sec) * 1000 +
                               (now.tv_nsec - start.tv_nsec) / 1000000 >= timeout)) {
            return -FI_EAGAIN;
        }
        nanosleep(&nap, NULL);   /* events come from other threads' calls */
    }
}

static const char *axon_fi_eq_strerror(struct fid_eq *eq, int prov_errno, const void *err_data,
                                       char *buf, size_t len)
{
    return axon_fi_strerror(prov_errno, buf, len);
}

static struct fi_ops_eq axon_fi_eq_ops = {
    .size     = sizeof(struct fi_ops_eq),
    .read     = axon_fi_eq_read,
    .readerr  = axon_fi_eq_readerr,
    .write    = axon_fi_eq_write,
    .sread    = axon_fi_eq_sread,
    .strerror = axon_fi_eq_strerror,
};

static int axon_fi_eq_close(struct fid *fid)
{
    axon_fi_eq_t *eq = container_of(fid, axon_fi_eq_t, eq_fid.fid);

    if (eq->refs > 0) {
        AXON_FI_WARN(FI_LOG_EQ, "EQ still bound to %d AVs/endpoints", eq->refs);
        return -FI_EBUSY;
    }
    pthread_mutex_lock(&eq->fabric->lock);
    --eq->fabric->refs;
    pthread_mutex_unlock(&eq->fabric->lock);
    pthread_mutex_destroy(&eq->lock);
    free(eq->events.events);
    free(eq->errs.events);
    free(eq);
    return 0;
}

static struct fi_ops axon_fi_eq_fi_ops = {
    .size     = sizeof(struct fi_ops),
    .close    = axon_fi_eq_close,
    .bind     = axon_fi_no_bind,
    .control  = axon_fi_no_control,
    .ops_open = axon_fi_no_ops_open,
};

int axon_fi_eq_open(struct fid_fabric *fabric_fid, struct fi_eq_attr *attr, struct fid_eq **eq_p,
                    void *context)
{
    axon_fi_fabric_t *fabric = container_of(fabric_fid, axon_fi_fabric_t, fabric_fid);
    axon_fi_eq_t *eq;

    if ((attr != NULL) && (attr->wait_obj != FI_WAIT_NONE) &&
        (attr->wait_obj != FI_WAIT_UNSPEC) && (attr->wait_obj != FI_WAIT_YIELD)) {
        AXON_FI_WARN(FI_LOG_EQ, "EQ wait object %d not supported", (int)attr->wait_obj);
        return -FI_ENOSYS;
    }
    eq = calloc(1, sizeof(*eq));
    if (eq == NULL) {
        return -FI_ENOMEM;
    }
    eq->events.size   = ((attr != NULL) && (attr->size > 0)) ? attr->size : AXON_FI_EQ_SIZE;
    eq->events.events = calloc(eq->events.size, sizeof(*eq->events.events));
    if (eq->events.events == NULL) {
        free(eq);
        return -FI_ENOMEM;
    }
    pthread_mutex_init(&eq->lock, NULL);
    eq->fabric             = fabric;
    eq->eq_fid.fid.fclass  = FI_CLASS_EQ;
    eq->eq_fid.fid.context = context;
    eq->eq_fid.fid.ops     = &axon_fi_eq_fi_ops;
    eq->eq_fid.ops         = &axon_fi_eq_ops;
    pthread_mutex_lock(&fabric->lock);
    ++fabric->refs;
    pthread_mutex_unlock(&fabric->lock);
    *eq_p = &eq->eq_fid;
    return 0;
}
