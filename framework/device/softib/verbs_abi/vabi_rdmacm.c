/*
 * The bridge to librdmacm on softib (vabi_rdmacm.h): the CM calls of this
 * library's softib, and the ibv objects of the CM's devices and QPs.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "log.h"
#include "vabi.h"
#include "vabi_rdmacm.h"

/* The CM's device contexts seen so far, each with its ibv_context. */
typedef struct vabi_cm_device {
    axon_dev_context_t    *dev;
    vabi_context_t        *ctx;
    struct vabi_cm_device *next;
} vabi_cm_device_t;

static pthread_mutex_t   vabi_cm_devices_lock = PTHREAD_MUTEX_INITIALIZER;
static vabi_cm_device_t *vabi_cm_devices;

static void vabi_rdmacm_log_error(const char *fmt, ...)
{
    char msg[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    axon_error("librdmacm on softib: %s", msg);
}

static struct ibv_device *vabi_rdmacm_device(const char *name)
{
    struct ibv_device **list = ibv_get_device_list(NULL), *found = NULL;
    int i;

    for (i = 0; (list != NULL) && (list[i] != NULL) && (found == NULL); i++) {
        if (!strcmp(list[i]->name, name)) {
            found = list[i];   /* devices outlive the list (vabi_device.c) */
        }
    }
    ibv_free_device_list(list);
    return found;
}

/* A new entry for dev: a reference of our own on it, and its ibv_context. */
static vabi_cm_device_t *vabi_rdmacm_device_add(axon_dev_context_t *dev)
{
    struct ibv_device *device = vabi_rdmacm_device(dev->name);
    axon_dev_context_t *held;
    vabi_cm_device_t *d;

    if (device == NULL) {
        vabi_rdmacm_log_error("the CM's device %s is not in the device list", dev->name);
        return NULL;
    }
    if ((d = calloc(1, sizeof(*d))) == NULL) {
        vabi_rdmacm_log_error("no memory for device %s", dev->name);
        return NULL;
    }
    if (axon_dev_cm_open_device(dev->name, &held) != 0) {
        free(d);
        return NULL;
    }
    if ((held != dev) || ((d->ctx = vabi_context_new(device, dev)) == NULL)) {
        if (held != dev) {
            vabi_rdmacm_log_error("device %s: the CM opened a second context", dev->name);
        }
        axon_dev_cm_close_device(held);
        free(d);
        return NULL;
    }
    d->dev          = dev;
    d->next         = vabi_cm_devices;
    vabi_cm_devices = d;
    return d;
}

static struct ibv_context *vabi_rdmacm_context(axon_dev_context_t *dev)
{
    vabi_cm_device_t *d;

    pthread_mutex_lock(&vabi_cm_devices_lock);
    for (d = vabi_cm_devices; (d != NULL) && (d->dev != dev); d = d->next) {
    }
    if (d == NULL) {
        d = vabi_rdmacm_device_add(dev);
    }
    pthread_mutex_unlock(&vabi_cm_devices_lock);
    return (d != NULL) ? &d->ctx->vctx.context : vabi_fail_null(ENODEV);
}

static struct ibv_context *vabi_rdmacm_context_by_name(const char *name)
{
    struct ibv_context *ctx;
    axon_dev_context_t *dev;
    int ret;

    if ((ret = axon_dev_cm_open_device(name, &dev)) != 0) {
        return vabi_fail_null(ret);
    }
    ctx = vabi_rdmacm_context(dev);
    axon_dev_cm_close_device(dev);   /* the entry holds a reference of its own */
    return ctx;
}

static int vabi_rdmacm_qp_create(void *arg, axon_dev_pd_t *pd, axon_dev_qp_init_attr_t *attr,
                                 axon_dev_qp_t **qp_p)
{
    axon_dev_cm_id_t *id = arg;
    int ret = axon_dev_cm_create_qp(id, pd, attr);

    if (ret == 0) {
        *qp_p = id->qp;
    }
    return ret;
}

static struct ibv_qp *vabi_rdmacm_create_qp(axon_dev_cm_id_t *id, struct ibv_pd *pd,
                                            struct ibv_qp_init_attr *attr, uint32_t create_flags)
{
    struct ibv_qp *qp = vabi_create_qp_by(pd, attr, create_flags, vabi_rdmacm_qp_create, id);

    if (qp != NULL) {
        VABI(qp, qp)->cm_id = id;
        qp->state           = IBV_QPS_INIT;   /* where the CM leaves it */
    }
    return qp;
}

static int vabi_rdmacm_qp_ex_init(struct ibv_qp *qp, uint64_t send_ops)
{
    return vabi_wr_init(VABI(qp, qp), send_ops);
}

static void vabi_rdmacm_qp_detach(struct ibv_qp *qp)
{
    VABI(qp, qp)->cm_id = NULL;
}

static const vabi_rdmacm_bridge_t vabi_rdmacm_bridge = {
    .create_event_channel  = axon_dev_cm_create_event_channel,
    .destroy_event_channel = axon_dev_cm_destroy_event_channel,
    .get_event             = axon_dev_cm_get_event,
    .ack_event             = axon_dev_cm_ack_event,
    .event_str             = axon_dev_cm_event_str,
    .create_id             = axon_dev_cm_create_id,
    .destroy_id            = axon_dev_cm_destroy_id,
    .bind_addr             = axon_dev_cm_bind_addr,
    .listen                = axon_dev_cm_listen,
    .resolve_addr          = axon_dev_cm_resolve_addr,
    .resolve_route         = axon_dev_cm_resolve_route,
    .connect               = axon_dev_cm_connect,
    .accept                = axon_dev_cm_accept,
    .reject                = axon_dev_cm_reject,
    .establish             = axon_dev_cm_establish,
    .disconnect            = axon_dev_cm_disconnect,
    .set_option            = axon_dev_cm_set_option,
    .init_qp_attr          = axon_dev_cm_init_qp_attr,
    .join_multicast        = axon_dev_cm_join_multicast,
    .leave_multicast       = axon_dev_cm_leave_multicast,
    .context               = vabi_rdmacm_context,
    .context_by_name       = vabi_rdmacm_context_by_name,
    .create_qp             = vabi_rdmacm_create_qp,
    .qp_detach             = vabi_rdmacm_qp_detach,
    .qp_ex_init            = vabi_rdmacm_qp_ex_init,
    .log_error             = vabi_rdmacm_log_error,
    .qp_ex_check           = vabi_qp_ex_check,
};

const vabi_rdmacm_bridge_t *axon_softib_rdmacm_bridge(void)
{
    return &vabi_rdmacm_bridge;
}
