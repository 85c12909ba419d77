/* Request life cycle: get from the pool, complete, call back, release. */
#include <stdint.h>
#include <stdlib.h>
#include "request.h"
#include "log.h"

axon_request_h axon_request_get(axon_worker_h worker, const axon_request_param_t *param,
                                uint32_t flags)
{
    axon_request_h req = axon_mpool_get(&worker->req_mp);

    if (req == NULL) {
        return NULL;
    }
    req->flags   = flags;
    req->status  = AXON_INPROGRESS;
    req->worker  = worker;
    req->cb.send = NULL;
    req->user_data = NULL;
    if (param != NULL) {
        req->cb.send   = param->cb.send;  /* same storage as cb.recv */
        req->user_data = param->user_data;
    }
    axon_list_init(&req->list);
    return req;
}

void axon_request_put(axon_request_h req)
{
    axon_request_release_rndv(req);
    if (req->flags & AXON_REQUEST_OWN_BUFFER) {
        free((void *)req->send.buffer);
    }
    axon_mpool_put(&req->worker->req_mp, req);
}

/*
 * A run list is preceded by one entry that records its capacity, so that a
 * list goes back where it came from without its owner keeping the count.
 */
axon_status_t axon_request_runs_init(axon_worker_h worker)
{
    return axon_mpool_init(&worker->runs_mp, "rendezvous runs",
                           (AXON_REQUEST_RUNS_POOLED + 1) * sizeof(struct iovec), 2, 0);
}

struct iovec *axon_request_runs_get(axon_worker_h worker, size_t count)
{
    struct iovec *list;

    if (count <= AXON_REQUEST_RUNS_POOLED) {
        list = axon_mpool_get(&worker->runs_mp);
    } else {
        list = (count < SIZE_MAX / sizeof(*list)) ? malloc((count + 1) * sizeof(*list)) : NULL;
    }
    if (list == NULL) {
        return NULL;
    }
    list->iov_base = NULL;
    list->iov_len  = count;
    return list + 1;
}

void axon_request_runs_put(axon_worker_h worker, struct iovec *runs)
{
    struct iovec *list = runs - 1;

    if (list->iov_len <= AXON_REQUEST_RUNS_POOLED) {
        axon_mpool_put(&worker->runs_mp, list);
    } else {
        free(list);
    }
}

/* Run the callback; a request the user freed (in it or before) is released here. */
static void axon_request_invoke(axon_request_h req)
{
    axon_worker_h worker = req->worker;
    int           saved  = worker->in_progress;

    /* Calls the callback makes are user calls: what they complete is deferred. */
    worker->in_progress = 0;
    req->flags |= AXON_REQUEST_IN_CALLBACK;
    if (req->flags & AXON_REQUEST_RECV) {
        req->cb.recv(req, req->status, &req->recv.info, req->user_data);
    } else {
        req->cb.send(req, req->status, req->user_data);
    }
    req->flags &= ~AXON_REQUEST_IN_CALLBACK;
    worker->in_progress = saved;
}

void axon_request_complete(axon_request_h req, axon_status_t status)
{
    axon_request_release_rndv(req);
    if (req->flags & AXON_REQUEST_INTERNAL) {
        if (status != AXON_OK) {
            axon_debug("internal request %p ended: %s", (void *)req, axon_status_string(status));
        }
        axon_request_put(req);  /* nobody waits for the library's own messages */
        return;
    }
    req->status = status;
    req->flags |= AXON_REQUEST_COMPLETED;

    if (req->cb.send != NULL) {
        if (!req->worker->in_progress) {
            /* Callbacks never run inside the call that started the operation. */
            axon_list_add_tail(&req->worker->deferred, &req->list);
            return;
        }
        axon_request_invoke(req);
    }
    /* Read flags after the callback: it may have called axon_request_free. */
    if (req->flags & AXON_REQUEST_RELEASED) {
        axon_request_put(req);
    }
}

unsigned axon_request_dispatch_deferred(axon_worker_h worker)
{
    axon_list_link_t batch;
    axon_request_h req;
    unsigned count = 0;

    if (axon_list_is_empty(&worker->deferred)) {
        return 0;
    }
    /* Take the current batch only: callbacks that complete more requests
     * defer them to the next progress call instead of looping here. */
    batch.next       = worker->deferred.next;
    batch.prev       = worker->deferred.prev;
    batch.next->prev = &batch;
    batch.prev->next = &batch;
    axon_list_init(&worker->deferred);

    while (!axon_list_is_empty(&batch)) {
        req = axon_list_first(&batch, struct axon_request, list);
        axon_list_del(&req->list);
        axon_request_invoke(req);
        if (req->flags & AXON_REQUEST_RELEASED) {
            axon_request_put(req);
        }
        ++count;
    }
    return count;
}

axon_status_t axon_request_test(axon_request_h req, axon_tag_recv_info_t *info)
{
    if (req == NULL) {
        axon_error("axon_request_test: NULL request");
        return AXON_ERR_INVALID_PARAM;
    }
    if (!(req->flags & AXON_REQUEST_COMPLETED)) {
        return AXON_INPROGRESS;
    }
    if ((info != NULL) && (req->flags & AXON_REQUEST_RECV)) {
        *info = req->recv.info;
    }
    return req->status;
}

axon_status_t axon_request_wait(axon_worker_h worker, axon_request_h req,
                                axon_tag_recv_info_t *info)
{
    axon_status_t status;

    if ((worker == NULL) || (req == NULL)) {
        axon_error("axon_request_wait: NULL %s", worker ? "request" : "worker");
        return AXON_ERR_INVALID_PARAM;
    }
    while ((status = axon_request_test(req, info)) == AXON_INPROGRESS) {
        axon_worker_progress(worker);
    }
    return status;
}

void axon_request_free(axon_request_h req)
{
    if (req == NULL) {
        return;
    }
    /* A completed request waiting for its deferred callback is still owned
     * by the deferred list; the dispatcher releases it. */
    if ((req->flags & AXON_REQUEST_COMPLETED) && !(req->flags & AXON_REQUEST_IN_CALLBACK) &&
        axon_list_is_empty(&req->list)) {
        axon_request_put(req);
        return;
    }
    req->flags |= AXON_REQUEST_RELEASED;
}

static inline unsigned axon_request_id_bucket(uint64_t id)
{
    return (unsigned)(id & (AXON_ID_BUCKETS - 1));
}

void axon_request_id_add(axon_request_h req, uint64_t peer_uuid)
{
    axon_worker_h worker = req->worker;

    /* Ids start at 1: 0 means "none" on the wire (e.g. not a sync send). */
    req->id        = ++worker->next_req_id;
    req->peer_uuid = peer_uuid;
    req->flags    |= AXON_REQUEST_IN_ID_MAP;
    axon_list_add_tail(&worker->id_map[axon_request_id_bucket(req->id)], &req->id_link);
}

void axon_request_id_del(axon_request_h req)
{
    if (req->flags & AXON_REQUEST_IN_ID_MAP) {
        axon_list_del(&req->id_link);
        req->flags &= ~AXON_REQUEST_IN_ID_MAP;
    }
}

axon_request_h axon_request_id_find(axon_worker_h worker, uint64_t id, uint64_t peer_uuid)
{
    axon_request_h req;

    axon_list_for_each(req, &worker->id_map[axon_request_id_bucket(id)], id_link) {
        /* The peer must match too: an id is only meaningful to the peer it was given to. */
        if ((req->id == id) && (req->peer_uuid == peer_uuid)) {
            return req;
        }
    }
    return NULL;
}

axon_status_t axon_request_finish_now(axon_request_h req, axon_status_t status, uint32_t flags,
                                      axon_request_h *req_p)
{
    if (((status == AXON_OK) && !(flags & AXON_REQ_FLAG_NO_IMM_CMPL)) || (status < 0)) {
        axon_request_put(req);
        return status;
    }
    axon_request_complete(req, status);
    *req_p = req;
    return AXON_INPROGRESS;
}
