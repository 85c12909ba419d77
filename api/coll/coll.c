/*
 * The collective engine: init checks the arguments once and sizes what the
 * algorithm needs; each post runs the algorithm's rounds until it is done.
 * Nothing is allocated per post.
 */
#include <stdlib.h>
#include <string.h>
#include "coll.h"
#include "log.h"
#include "request.h"
#include "tag_space.h"

static void axon_coll_run(axon_coll_h coll);

static inline axon_tag_t axon_coll_tag(const axon_coll_h coll)
{
    return ((axon_tag_t)coll->team->id << (AXON_COLL_TAG_SEQ_BITS + AXON_COLL_TAG_STEP_BITS)) |
           ((axon_tag_t)(coll->seq & ((1u << AXON_COLL_TAG_SEQ_BITS) - 1))
            << AXON_COLL_TAG_STEP_BITS) |
           (coll->step & AXON_COLL_STEP_MAX);
}

/* ---------------------------------------------------------------- operations */

static void axon_coll_req_forget(axon_coll_h coll, axon_request_h req)
{
    unsigned i;

    for (i = 0; i < coll->max_reqs; ++i) {
        if (coll->reqs[i] == req) {
            coll->reqs[i] = NULL;
            return;
        }
    }
}

/*
 * A failed operation ends the collective, except a message of another size
 * than expected (members disagree on counts): that one is remembered and the
 * rounds go on, so the other members, which may not see the disagreement,
 * are not left waiting for us.
 */
static void axon_coll_op_status(axon_coll_h coll, axon_status_t status)
{
    if (status == AXON_ERR_MSG_TRUNCATED) {
        coll->mismatch = status;
    } else if ((status != AXON_OK) && (coll->error == AXON_OK)) {
        coll->error = status;
    }
}

static void axon_coll_op_done(axon_coll_h coll, axon_request_h req, axon_status_t status)
{
    coll->done_in_post = req;   /* if inside its own post call: not to be tracked */
    axon_coll_req_forget(coll, req);
    axon_request_free(req);
    axon_coll_op_end(coll, status);
}

void axon_coll_op_end(axon_coll_h coll, axon_status_t status)
{
    axon_coll_op_status(coll, status);
    --coll->pending;
    if (coll->pending > 0) {
        return;
    }
    if (coll->flags & AXON_COLL_F_FREED) {
        axon_coll_release(coll);    /* the last operation of a failed, freed collective */
    } else if ((coll->status == AXON_INPROGRESS) && !(coll->flags & AXON_COLL_F_IN_RUN)) {
        axon_coll_run(coll);
    }
}

static void axon_coll_send_cb(axon_request_h req, axon_status_t status, void *arg)
{
    axon_coll_op_done(arg, req, status);
}

/* A member that sent a different size disagrees on the arguments: an error, not a short result. */
static axon_status_t axon_coll_check_length(axon_coll_h coll, size_t got, size_t want,
                                            axon_status_t status)
{
    if ((status == AXON_OK || status == AXON_ERR_MSG_TRUNCATED) && (got != want)) {
        axon_error("collective %s (team 0x%x, #%u) on rank %u: a member sent %zu bytes where "
                   "%zu were expected: do all members pass the same counts and data type?",
                   coll->algo->name, coll->team->id, coll->seq, coll->team->rank, got, want);
        return AXON_ERR_MSG_TRUNCATED;
    }
    return status;
}

static void axon_coll_recv_cb(axon_request_h req, axon_status_t status,
                              const axon_tag_recv_info_t *info, void *arg)
{
    if (status != AXON_ERR_CANCELED) {
        status = axon_coll_check_length(arg, info->length, req->recv.length, status);
    }
    axon_coll_op_done(arg, req, status);
}

/*
 * Operations are counted before their call: from inside progress (a later
 * round, posted from the callback of the one before) a request may complete,
 * call back and be released inside the very call that returns it.
 */
static inline void axon_coll_op_start(axon_coll_h coll)
{
    ++coll->pending;
    coll->done_in_post = NULL;
}

/* After the call: uncount what finished in it, keep a live request for cancel. */
static axon_status_t axon_coll_op_track(axon_coll_h coll, axon_status_t status,
                                        axon_request_h req)
{
    unsigned i;

    if (status != AXON_INPROGRESS) {
        --coll->pending;
        axon_coll_op_status(coll, status);
        return status;
    }
    if (coll->done_in_post == req) {
        return AXON_OK;          /* completed (and released) inside the call */
    }
    for (i = 0; i < coll->max_reqs; ++i) {
        if (coll->reqs[i] == NULL) {
            coll->reqs[i] = req;
            return AXON_OK;
        }
    }
    /* More out than the algorithm declared: still completes, only cannot be canceled. */
    axon_debug("collective %s: more than %u operations out", coll->algo->name, coll->max_reqs);
    return AXON_OK;
}

axon_status_t axon_coll_send(axon_coll_h coll, uint32_t peer, const void *buf, size_t len)
{
    axon_request_param_t param;
    axon_request_h req = NULL;
    axon_status_t status;

    param.flags     = 0;
    param.cb.send   = axon_coll_send_cb;
    param.user_data = coll;
    axon_coll_op_start(coll);
    status = axon_tag_space_send_nb(coll->team->eps[peer], AXON_TAG_SPACE_COLL, buf, len,
                                    axon_coll_tag(coll), &param, &req);
    return axon_coll_op_track(coll, status, req);
}

axon_status_t axon_coll_recv(axon_coll_h coll, uint32_t peer, void *buf, size_t len)
{
    axon_request_param_t param;
    axon_tag_recv_info_t info;
    axon_request_h req = NULL;
    axon_status_t status;

    param.flags     = AXON_REQ_FLAG_SENDER;
    param.cb.recv   = axon_coll_recv_cb;
    param.user_data = coll;
    param.recv_info = &info;
    param.sender_id = coll->team->uuids[peer];
    axon_coll_op_start(coll);
    status = axon_tag_space_recv_nb(coll->team->worker, AXON_TAG_SPACE_COLL, buf, len,
                                    axon_coll_tag(coll), AXON_TAG_MASK_FULL, &param, &req);
    if (status == AXON_OK) {
        status = axon_coll_check_length(coll, info.length, len, status);
    }
    return axon_coll_op_track(coll, status, req);
}

/* ---------------------------------------------------------------- completion */

static void axon_coll_complete(axon_coll_h coll, axon_status_t status)
{
    if (coll->flags & AXON_COLL_F_RUNNING) {
        axon_list_del(&coll->link);
        coll->flags &= ~AXON_COLL_F_RUNNING;
    }
    if (status != AXON_OK) {
        axon_debug("collective %s (team 0x%x, #%u) on rank %u: %s", coll->algo->name,
                   coll->team->id, coll->seq, coll->team->rank, axon_status_string(status));
    }
    coll->status = status;
    if (coll->done != NULL) {
        coll->done(coll);
    }
}

/* Rounds until one leaves operations out, or the end. */
static void axon_coll_run(axon_coll_h coll)
{
    axon_status_t status;

    coll->flags |= AXON_COLL_F_IN_RUN;
    for (;;) {
        if (coll->error != AXON_OK) {
            status = coll->error;
            break;
        }
        status = coll->algo->progress(coll);
        if ((status != AXON_INPROGRESS) || (coll->pending > 0)) {
            break;
        }
    }
    coll->flags &= ~AXON_COLL_F_IN_RUN;
    if (status == AXON_INPROGRESS) {
        if (coll->error == AXON_OK) {
            return;        /* operations out: their completions run us again */
        }
        status = coll->error;
    }
    if ((status == AXON_OK) && (coll->mismatch != AXON_OK)) {
        status = coll->mismatch;
    }
    if ((status != AXON_OK) && (coll->error == AXON_OK)) {
        coll->error = status;
    }
    if ((status != AXON_OK) && (coll->pending > 0)) {
        /* Receives that will not be answered now: the collective ends here. */
        axon_coll_abort(coll, status);
        return;
    }
    axon_coll_complete(coll, status);
}

void axon_coll_abort(axon_coll_h coll, axon_status_t status)
{
    unsigned i;
    uint32_t in_run;

    if (coll->status != AXON_INPROGRESS) {
        return;
    }
    if (coll->error == AXON_OK) {
        coll->error = status;
    }
    axon_coll_offload_cancel(coll);
    /* Inside progress (a peer's failure) a canceled receive calls back at once;
     * the last one out would run the collective to its end and its callback may
     * free it under this loop: as in a run, the completions leave that to us. */
    in_run       = coll->flags & AXON_COLL_F_IN_RUN;
    coll->flags |= AXON_COLL_F_IN_RUN;
    for (i = 0; i < coll->max_reqs; ++i) {
        if (coll->reqs[i] != NULL) {
            /* Receives end canceled (from progress); sends finish on their own. */
            (void)axon_request_cancel(coll->team->worker, coll->reqs[i]);
        }
    }
    coll->flags = (coll->flags & ~AXON_COLL_F_IN_RUN) | in_run;
    axon_coll_complete(coll, coll->error);
}

void axon_coll_peer_failed(axon_worker_h worker, uint64_t peer_uuid, axon_status_t status)
{
    axon_coll_h coll, ctmp;
    axon_team_h team, ttmp;
    uint32_t i;

    axon_list_for_each_safe(team, ttmp, &worker->teams, link) {
        for (i = 0; i < team->size; ++i) {
            if ((i != team->rank) && (team->uuids[i] == peer_uuid)) {
                break;
            }
        }
        if (i == team->size) {
            continue;
        }
        axon_debug("team 0x%x: member %u (worker 0x%llx) failed: %s", team->id, i,
                   (unsigned long long)peer_uuid, axon_status_string(status));
        team->status = status;     /* a team with a dead member runs nothing more */
        axon_list_for_each_safe(coll, ctmp, &team->running, link) {
            axon_coll_abort(coll, status);
        }
    }
}

/* ---------------------------------------------------------------- init, post, free */

void axon_coll_release(axon_coll_h coll)
{
    axon_coll_offload_release(coll);
    free(coll->reqs);
    free(coll->scratch);
    free(coll->copy_in);
    free(coll);
}

axon_status_t axon_coll_init_internal(axon_team_h team, const axon_coll_args_t *args,
                                      axon_coll_h *coll_p)
{
    axon_coll_h coll;
    size_t scratch_len = 0;
    unsigned max_reqs  = 0;
    axon_status_t status;

    coll = calloc(1, sizeof(*coll));
    if (coll == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    coll->team    = team;
    coll->args    = *args;
    coll->dt_size = axon_dt_size(args->dt);
    coll->reduce  = axon_coll_reduce_fn(args->dt, args->op);
    coll->status  = AXON_OK;
    axon_list_init(&coll->xc_link);
    status = axon_coll_offload_init(coll);    /* the device's, if it runs it */
    if ((status == AXON_OK) && (coll->algo == NULL)) {
        coll->algo = axon_coll_algo_select(team, args);
        status     = (coll->algo != NULL) ? AXON_OK : AXON_ERR_UNSUPPORTED;
    }
    if (status != AXON_OK) {
        axon_coll_release(coll);
        return status;
    }
    coll->algo->size(coll, &scratch_len, &max_reqs);
    coll->max_reqs    = max_reqs;
    coll->scratch_len = scratch_len;
    coll->reqs        = calloc(max_reqs ? max_reqs : 1, sizeof(*coll->reqs));
    coll->scratch     = scratch_len ? malloc(scratch_len) : NULL;
    if ((coll->reqs == NULL) || (scratch_len && (coll->scratch == NULL))) {
        axon_error("no memory for a %s of %zu scratch bytes", coll->algo->name, scratch_len);
        axon_coll_release(coll);
        return AXON_ERR_NO_MEMORY;
    }
    *coll_p = coll;
    return AXON_OK;
}

axon_status_t axon_coll_post(axon_coll_h coll)
{
    axon_team_h team;

    if (coll == NULL) {
        axon_error("axon_coll_post: NULL collective");
        return AXON_ERR_INVALID_PARAM;
    }
    team = coll->team;
    if ((coll->status == AXON_INPROGRESS) || (coll->pending > 0)) {
        axon_error("axon_coll_post: %s (team 0x%x) is still running", coll->algo->name,
                   team->id);
        return AXON_ERR_BUSY;
    }
    if ((team->status != AXON_OK) && (coll != team->join)) {
        return (team->status == AXON_INPROGRESS) ? AXON_ERR_BUSY : team->status;
    }
    if (coll->copy_in != NULL) {
        memcpy(coll->copy_in, coll->args.dst, coll->copy_in_len);
    }
    coll->seq    = team->next_seq++;
    coll->step   = 0;
    coll->phase  = 0;
    coll->error    = AXON_OK;
    coll->mismatch = AXON_OK;
    coll->status = AXON_INPROGRESS;
    coll->flags |= AXON_COLL_F_RUNNING;
    axon_list_add_tail(&team->running, &coll->link);
    axon_coll_run(coll);
    return AXON_OK;
}

axon_status_t axon_coll_test(axon_coll_h coll)
{
    return (coll != NULL) ? coll->status : AXON_ERR_INVALID_PARAM;
}

axon_status_t axon_coll_wait(axon_coll_h coll)
{
    if (coll == NULL) {
        axon_error("axon_coll_wait: NULL collective");
        return AXON_ERR_INVALID_PARAM;
    }
    while (coll->status == AXON_INPROGRESS) {
        axon_worker_progress(coll->team->worker);
    }
    return coll->status;
}

axon_status_t axon_coll_free(axon_coll_h coll)
{
    if (coll == NULL) {
        return AXON_OK;
    }
    if (coll->status == AXON_INPROGRESS) {
        axon_error("axon_coll_free: %s (team 0x%x, #%u) is still running", coll->algo->name,
                   coll->team->id, coll->seq);
        return AXON_ERR_BUSY;
    }
    if (coll->flags & AXON_COLL_F_USER) {
        --coll->team->num_colls;
    }
    if (coll->pending > 0) {
        coll->flags |= AXON_COLL_F_FREED;   /* a failed post's sends are still out */
        return AXON_OK;
    }
    axon_coll_release(coll);
    return AXON_OK;
}
