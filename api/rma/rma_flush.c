/*
 * Flush and fence: a flush completes once every one-sided operation issued
 * before it on its endpoint (axon_ep_flush_nb) or on every endpoint of the
 * worker (axon_worker_flush_nb) is complete at the target; a fence orders
 * what follows after what came before. The operations' life is rma.c's.
 */
#include <stdatomic.h>
#include "log.h"
#include "rma_proto.h"

static int axon_rma_context_ok(axon_context_h context, const char *func)
{
    if (!(context->features & (AXON_FEATURE_RMA | AXON_FEATURE_AMO))) {
        axon_error("%s: the context was created without AXON_FEATURE_RMA or AXON_FEATURE_AMO",
                   func);
        return 0;
    }
    return 1;
}

/* Nothing outstanding: stores done by this CPU (LOCAL/SHM) are ordered before what follows. */
static axon_status_t axon_rma_flush_now(axon_worker_h worker, axon_status_t status,
                                        const axon_request_param_t *param, axon_request_h *req_p)
{
    atomic_thread_fence(memory_order_release);
    return axon_rma_done_now(worker, status, param, req_p);
}

/* A flush waiting on ep for everything issued on it so far. */
static void axon_rma_flush_add(axon_ep_h ep, axon_request_h flush, axon_request_h parent)
{
    flush->step              = axon_rma_step;  /* never queued: marks an rma request */
    flush->rma.ep            = ep;
    flush->rma.kind          = AXON_RMA_KIND_FLUSH;
    flush->rma.seq           = ep->rma.seq;
    flush->rma.flush.parent  = parent;
    axon_list_add_tail(&ep->rma.flushes, &flush->rma.op_link);
}

axon_status_t axon_ep_flush_nb(axon_ep_h ep, const axon_request_param_t *param,
                               axon_request_h *req_p)
{
    axon_status_t status;
    axon_request_h req;

    if ((ep == NULL) || (req_p == NULL)) {
        axon_error("axon_ep_flush_nb: NULL %s", ep ? "req_p" : "endpoint");
        return AXON_ERR_INVALID_PARAM;
    }
    if (!axon_rma_context_ok(ep->worker->context, "axon_ep_flush_nb")) {
        return AXON_ERR_INVALID_PARAM;
    }
    if (ep->status != AXON_OK) {
        return ep->status;
    }
    if (axon_list_is_empty(&ep->rma.ops)) {
        status        = ep->rma.error;
        ep->rma.error = AXON_OK;
        return axon_rma_flush_now(ep->worker, status, param, req_p);
    }
    req = axon_request_get(ep->worker, param, 0);
    if (req == NULL) {
        axon_error("axon_ep_flush_nb: no memory for a request");
        return AXON_ERR_NO_MEMORY;
    }
    axon_rma_flush_add(ep, req, NULL);
    *req_p = req;
    return AXON_INPROGRESS;
}

axon_status_t axon_worker_flush_nb(axon_worker_h worker, const axon_request_param_t *param,
                                   axon_request_h *req_p)
{
    axon_status_t status = AXON_OK;
    axon_request_h req, child;
    axon_ep_h ep;

    if ((worker == NULL) || (req_p == NULL)) {
        axon_error("axon_worker_flush_nb: NULL %s", worker ? "req_p" : "worker");
        return AXON_ERR_INVALID_PARAM;
    }
    if (!axon_rma_context_ok(worker->context, "axon_worker_flush_nb")) {
        return AXON_ERR_INVALID_PARAM;
    }
    req = axon_request_get(worker, param, 0);
    if (req == NULL) {
        axon_error("axon_worker_flush_nb: no memory for a request");
        return AXON_ERR_NO_MEMORY;
    }
    req->step                = axon_rma_step;  /* never queued: marks an rma request */
    req->rma.kind            = AXON_RMA_KIND_WORKER_FLUSH;
    req->rma.status          = AXON_OK;
    req->rma.flush.children  = 0;
    axon_list_init(&req->rma.op_link);
    axon_list_for_each(ep, &worker->eps, link) {
        if (axon_list_is_empty(&ep->rma.ops)) {
            if ((ep->rma.error != AXON_OK) && (status == AXON_OK)) {
                status = ep->rma.error;
            }
            ep->rma.error = AXON_OK;
            continue;
        }
        child = axon_request_get(worker, NULL, AXON_REQUEST_INTERNAL);
        if (child == NULL) {
            axon_error("axon_worker_flush_nb: no memory to wait on endpoint %p", (void *)ep);
            status = AXON_ERR_NO_MEMORY;
            continue;
        }
        axon_rma_flush_add(ep, child, req);
        ++req->rma.flush.children;
    }
    req->rma.status = status;
    if (req->rma.flush.children == 0) {
        axon_request_put(req);
        return axon_rma_flush_now(worker, status, param, req_p);
    }
    *req_p = req;
    return AXON_INPROGRESS;
}

axon_status_t axon_worker_fence(axon_worker_h worker)
{
    if (worker == NULL) {
        axon_error("axon_worker_fence: NULL worker");
        return AXON_ERR_INVALID_PARAM;
    }
    if (!axon_rma_context_ok(worker->context, "axon_worker_fence")) {
        return AXON_ERR_INVALID_PARAM;
    }
    /* Endpoints see the new epoch at their next operation; direct stores keep their order. */
    ++worker->rma_fence_epoch;
    atomic_thread_fence(memory_order_release);
    return AXON_OK;
}
