/*
 * Worker: waiting for events instead of polling (axon_worker_get_efd,
 * axon_worker_arm). The worker's descriptor is an epoll set of its ifaces'
 * event descriptors; arming asks every iface to arm itself, after the
 * worker's own queues say nothing is due that only progress would find.
 */
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>
#include "axon_int.h"
#include "log.h"

/* The epoll set of the ifaces' descriptors; AXON_ERR_UNSUPPORTED if one has none. */
static axon_status_t axon_worker_efd_open(axon_worker_h worker)
{
    const axon_resource_t *rsc;
    struct epoll_event     event;
    axon_iface_t          *iface;
    axon_status_t          status;
    unsigned               i;
    int                    efd, fd;

    for (i = 0; i < worker->num_ifaces; ++i) {
        iface = worker->ifaces[i].iface;
        if ((iface->ops->iface_event_fd == NULL) || (iface->ops->iface_event_arm == NULL)) {
            axon_debug("worker %016llx: %s/%s can only be polled: no waiting for this worker",
                       (unsigned long long)worker->uuid, iface->resource->tl_name,
                       iface->resource->dev_name);
            return AXON_ERR_UNSUPPORTED;
        }
    }
    efd = epoll_create1(EPOLL_CLOEXEC);
    if (efd < 0) {
        axon_error("worker %016llx: epoll_create1: %s", (unsigned long long)worker->uuid,
                   strerror(errno));
        return AXON_ERR_IO_ERROR;
    }
    for (i = 0; i < worker->num_ifaces; ++i) {
        iface  = worker->ifaces[i].iface;
        rsc    = iface->resource;
        fd     = -1;
        status = iface->ops->iface_event_fd(iface, &fd);
        if (status != AXON_OK) {
            axon_debug("worker %016llx: %s/%s has no event descriptor: %s",
                       (unsigned long long)worker->uuid, rsc->tl_name, rsc->dev_name,
                       axon_status_string(status));
            goto err_close;
        }
        if (fd < 0) {
            continue;   /* never has events of its own */
        }
        memset(&event, 0, sizeof(event));
        event.events  = EPOLLIN;
        event.data.fd = fd;
        if (epoll_ctl(efd, EPOLL_CTL_ADD, fd, &event) != 0) {
            axon_error("worker %016llx: adding the descriptor %d of %s/%s: %s",
                       (unsigned long long)worker->uuid, fd, rsc->tl_name, rsc->dev_name,
                       strerror(errno));
            status = AXON_ERR_IO_ERROR;
            goto err_close;
        }
    }
    worker->efd = efd;
    return AXON_OK;

err_close:
    close(efd);
    return status;
}

/* The epoll set, made at the first get_efd or arm. */
static axon_status_t axon_worker_efd_ensure(axon_worker_h worker)
{
    return (worker->efd >= 0) ? AXON_OK : axon_worker_efd_open(worker);
}

axon_status_t axon_worker_get_efd(axon_worker_h worker, int *fd_p)
{
    axon_status_t status;

    if ((worker == NULL) || (fd_p == NULL)) {
        axon_error("axon_worker_get_efd: NULL %s", (worker == NULL) ? "worker" : "fd_p");
        return AXON_ERR_INVALID_PARAM;
    }
    status = axon_worker_efd_ensure(worker);
    if (status == AXON_OK) {
        *fd_p = worker->efd;
    }
    return status;
}

/* Work of the worker's own that only progress finds (no message will announce it). */
static int axon_worker_has_due_work(axon_worker_h worker)
{
    return !axon_list_is_empty(&worker->deferred) || !axon_list_is_empty(&worker->pending_eps) ||
           !axon_list_is_empty(&worker->rail_waits) || (worker->proto_polls > 0);
}

axon_status_t axon_worker_arm(axon_worker_h worker)
{
    axon_iface_t *iface;
    axon_status_t status;
    unsigned      i;

    if (worker == NULL) {
        axon_error("axon_worker_arm: NULL worker");
        return AXON_ERR_INVALID_PARAM;
    }
    status = axon_worker_efd_ensure(worker);
    if (status != AXON_OK) {
        return status;
    }
    if (axon_worker_has_due_work(worker)) {
        return AXON_ERR_BUSY;
    }
    for (i = 0; i < worker->num_ifaces; ++i) {
        iface  = worker->ifaces[i].iface;
        status = iface->ops->iface_event_arm(iface);
        if (status != AXON_OK) {
            return status;
        }
    }
    return AXON_OK;
}

void axon_worker_efd_close(axon_worker_h worker)
{
    if (worker->efd >= 0) {
        close(worker->efd);
        worker->efd = -1;
    }
}
