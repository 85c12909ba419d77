/*
 * An offloaded collective: compiled into a chain at init, handed to the
 * device at each post, found complete by polling the management CQ for the
 * chain's last WAIT (or for the first task that failed).
 */
#include <endian.h>
#include <stdlib.h>
#include <string.h>
#include "log.h"
#include "xchannel.h"

/* The chains' own buffers: AXON_XC_SETS parts of set_len bytes (xchannel.h). */
static axon_status_t axon_xc_scratch(axon_xc_coll_t *coll, size_t set_len)
{
    axon_xc_team_t *team = coll->team;
    unsigned set;
    int ret;

    coll->set_len = (set_len + 63) & ~(size_t)63;
    coll->scratch = calloc(AXON_XC_SETS, coll->set_len);
    if (coll->scratch == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    for (set = 0; set < AXON_XC_SETS; ++set) {
        coll->input[set] = coll->scratch + set * coll->set_len;
    }
    ret = axon_dev_reg_mr(team->worker->dev.pd, coll->scratch, AXON_XC_SETS * coll->set_len,
                          AXON_DEV_ACCESS_LOCAL_WRITE, &coll->scratch_mr);
    if (ret != 0) {
        axon_error("xchannel: %s: cannot register %zu bytes at %p: %s", team->worker->dev.name,
                   AXON_XC_SETS * coll->set_len, coll->scratch, strerror(ret));
        return AXON_ERR_NO_RESOURCE;
    }
    return AXON_OK;
}

axon_status_t axon_xc_coll_applies(axon_xc_team_t *team, const axon_xc_args_t *args)
{
    switch (args->kind) {
    case AXON_XC_BARRIER:
        return (team->size > 1) ? AXON_OK : AXON_ERR_UNSUPPORTED;
    case AXON_XC_BCAST:
        if ((team->size < 2) || (args->count == 0) ||
            (args->count > (size_t)team->slot_len * AXON_XC_MAX_CHUNKS) || (args->radix < 2) ||
            (args->root >= team->size)) {
            axon_debug("xchannel: bcast of %zu bytes (radix %u, root %u) not offloaded (at most "
                       "%u bytes)", args->count, args->radix, args->root,
                       team->slot_len * AXON_XC_MAX_CHUNKS);
            return AXON_ERR_UNSUPPORTED;
        }
        return AXON_OK;
    case AXON_XC_ALLREDUCE:
        return (team->size > 1) ? axon_xc_allreduce_check(team, args) : AXON_ERR_UNSUPPORTED;
    default:
        axon_debug("xchannel: collective kind %d not offloaded", (int)args->kind);
        return AXON_ERR_UNSUPPORTED;
    }
}

static axon_status_t axon_xc_coll_compile(axon_xc_coll_t *coll, unsigned set)
{
    switch (coll->args.kind) {
    case AXON_XC_BARRIER:
        return axon_xc_barrier_compile(coll, set);
    case AXON_XC_BCAST:
        return axon_xc_bcast_compile(coll, set);
    default:
        return axon_xc_allreduce_compile(coll, set);
    }
}

static axon_status_t axon_xc_coll_setup(axon_xc_coll_t *coll)
{
    const axon_xc_args_t *args = &coll->args;
    axon_status_t status = axon_xc_coll_applies(coll->team, args);
    size_t pieces = 0;
    unsigned set;

    if (status != AXON_OK) {
        return status;
    }
    coll->chunk = coll->team->slot_len;
    if (args->kind == AXON_XC_ALLREDUCE) {
        status = axon_xc_scratch(coll, args->count * 8);
        pieces = AXON_XC_MAX_OPERANDS * ((args->count * 8 + coll->chunk - 1) / coll->chunk);
    } else if ((args->kind == AXON_XC_BCAST) && (coll->team->rank == args->root)) {
        status = axon_xc_scratch(coll, args->count);
    } else if (args->kind == AXON_XC_BCAST) {
        coll->num_pieces = (unsigned)((args->count + coll->chunk - 1) / coll->chunk);
        pieces           = coll->num_pieces;
    }
    for (set = 0; (set < AXON_XC_SETS) && (status == AXON_OK) && (pieces > 0); ++set) {
        coll->pieces[set] = calloc(pieces, sizeof(uint64_t));
        status            = (coll->pieces[set] != NULL) ? AXON_OK : AXON_ERR_NO_MEMORY;
    }
    for (set = 0; (set < AXON_XC_SETS) && (status == AXON_OK); ++set) {
        status = axon_xc_coll_compile(coll, set);
    }
    return status;
}

axon_status_t axon_xc_coll_init(axon_xc_team_t *team, const axon_xc_args_t *args,
                                axon_xc_coll_t **coll_p)
{
    axon_xc_coll_t *coll;
    axon_status_t status;

    coll = calloc(1, sizeof(*coll));
    if (coll == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    coll->team   = team;
    coll->args   = *args;
    coll->status = AXON_OK;
    axon_list_init(&coll->link);
    status = axon_xc_coll_setup(coll);
    if ((status == AXON_OK) && (coll->chains[0].slots > AXON_XC_CHAIN_MAX)) {
        /* more than the queues ever hold for one chain (a root of thousands) */
        axon_debug("xchannel: a chain of %u queue slots (at most %u): not offloaded",
                   coll->chains[0].slots, AXON_XC_CHAIN_MAX);
        status = AXON_ERR_UNSUPPORTED;
    }
    if (status != AXON_OK) {
        axon_xc_coll_free(coll);
        return status;
    }
    *coll_p = coll;
    return AXON_OK;
}

/* Hand the chain to the device: its queues have room for it. */
static axon_status_t axon_xc_coll_submit(axon_xc_coll_t *coll)
{
    axon_xc_team_t *team = coll->team;
    const uint64_t *src  = coll->args.src;
    axon_dev_task_t *bad = NULL;
    const axon_xc_patch_t *p;
    axon_dev_send_wr_t *wr;
    axon_xc_chain_t *ch;
    uint64_t *x;
    size_t i;
    int ret;

    coll->set = (coll->set + 1) % AXON_XC_SETS;   /* the last posts' sends may read theirs */
    ch        = &coll->chains[coll->set];
    x         = (uint64_t *)coll->input[coll->set];
    if (coll->args.kind == AXON_XC_ALLREDUCE) {
        for (i = 0; i < coll->args.count; ++i) {
            x[i] = htobe64(src[i]);
        }
    } else if (x != NULL) {   /* a bcast's root */
        memcpy(x, coll->args.dst, coll->args.count);
    }
    for (i = 0; i < ch->num_patches; ++i) {
        p         = &ch->patches[i];
        *p->field = (uintptr_t)axon_xc_slot(team, p->m, team->peers[p->m].claimed + p->idx);
    }
    for (i = 0; i < ch->num_from; ++i) {
        team->peers[ch->from[i]].claimed += (uint64_t)ch->recvs[ch->from[i]];
    }
    for (wr = ch->task_head; wr != NULL; wr = wr->next) {
        wr->wr_id = coll->seq;
    }
    ch->scq_first->wr.cqe_wait.cq_count = (int32_t)team->unwaited[team->submitted % AXON_XC_LAG];
    ret = axon_dev_post_task(team->worker->dev.ctx, ch->tasks, &bad);
    if (ret != 0) {
        axon_error("xchannel: %s: posting a chain of %u items failed at item %d: %s",
                   team->worker->dev.name, ch->num_tasks,
                   bad ? (int)(bad - ch->tasks) : -1, strerror(ret));
        team->failed = AXON_ERR_IO_ERROR;   /* the queues' counts no longer match the chains */
        return AXON_ERR_IO_ERROR;
    }
    team->in_flight += ch->slots;
    team->unwaited[team->submitted % AXON_XC_LAG] = ch->num_sends;
    coll->safe_at = ++team->submitted + AXON_XC_LAG;   /* chain s + LAG covered its sends */
    axon_list_add_tail(&team->posted, &coll->link);
    return AXON_OK;
}

/* Chains the user posted while the queues were full, in post order. */
static void axon_xc_team_submit_waiting(axon_xc_team_t *team)
{
    axon_xc_coll_t *coll;

    while (!axon_list_is_empty(&team->waiting)) {
        coll = axon_list_first(&team->waiting, axon_xc_coll_t, link);
        if ((team->failed == AXON_OK) && (team->in_flight > 0) &&
            (team->in_flight + coll->chains[0].slots > AXON_XC_CHAIN_MAX)) {
            return;
        }
        axon_list_del(&coll->link);
        if ((team->failed != AXON_OK) || (axon_xc_coll_submit(coll) != AXON_OK)) {
            coll->status = team->failed;
        }
    }
}

axon_status_t axon_xc_coll_post(axon_xc_coll_t *coll)
{
    axon_xc_team_t *team = coll->team;

    if (team->failed != AXON_OK) {
        return team->failed;
    }
    coll->seq    = ++team->next_seq;
    coll->status = AXON_INPROGRESS;
    /* Members post collectives in one order, and so must chains reach the
     * device: behind one that waits for room, every later one waits too. */
    if (axon_list_is_empty(&team->waiting) &&
        ((team->in_flight == 0) || (team->in_flight + coll->chains[0].slots <= AXON_XC_CHAIN_MAX))) {
        if (axon_xc_coll_submit(coll) != AXON_OK) {
            coll->status = team->failed;
        }
        return (coll->status == AXON_INPROGRESS) ? AXON_OK : coll->status;
    }
    axon_list_add_tail(&team->waiting, &coll->link);
    return AXON_OK;
}

static void axon_xc_coll_done(axon_xc_coll_t *coll, axon_status_t status)
{
    axon_xc_team_t *team = coll->team;
    axon_xc_chain_t *ch  = &coll->chains[coll->set];
    size_t c, len;
    unsigned i, d;

    axon_list_del(&coll->link);
    team->in_flight -= ch->slots;
    coll->status     = status;
    if (status != AXON_OK) {
        return;
    }
    if (coll->args.kind == AXON_XC_ALLREDUCE) {
        axon_xc_allreduce_finish(coll);
    } else if (coll->num_pieces > 0) {   /* a bcast's non-root: from the slots */
        for (c = 0; c < coll->num_pieces; ++c) {
            len = coll->args.count - c * coll->chunk;
            memcpy((uint8_t *)coll->args.dst + c * coll->chunk,
                   (const void *)(uintptr_t)coll->pieces[coll->set][c],
                   (len < coll->chunk) ? len : coll->chunk);
        }
    }
    /* its first task covered the sends of the chain LAG before: that one's slots are
     * free; these are read until the chain LAG after this one completes */
    d = (unsigned)(team->completed++ % AXON_XC_LAG);
    axon_xc_team_repost(team, d);
    for (i = 0; i < ch->num_from; ++i) {
        team->done_from[d * team->size + i]  = ch->from[i];
        team->done_count[d * team->size + i] = ch->recvs[ch->from[i]];
    }
    team->num_done[d] = ch->num_from;
}

/* Completions of the team's management QP: chains end in post order. */
static void axon_xc_team_poll(axon_xc_team_t *team)
{
    axon_dev_wc_t wc[16];
    axon_xc_coll_t *coll, *tmp;
    int i, n;

    while ((n = axon_dev_poll_cq(team->mcq, 16, wc)) > 0) {
        for (i = 0; i < n; ++i) {
            axon_list_for_each_safe(coll, tmp, &team->posted, link) {
                if (coll->seq != wc[i].wr_id) {
                    continue;
                }
                if (wc[i].status != AXON_DEV_WC_SUCCESS) {
                    axon_error("xchannel: %s: chain #%llu failed (task completion status %d): "
                               "a member is gone or its queues failed", team->worker->dev.name,
                               (unsigned long long)coll->seq, (int)wc[i].status);
                    team->failed = AXON_ERR_CONNECTION_RESET;
                    axon_xc_coll_done(coll, AXON_ERR_CONNECTION_RESET);
                } else {
                    axon_xc_coll_done(coll, AXON_OK);   /* only the last task signals */
                    axon_xc_team_bury(team, 0);
                }
                break;
            }
        }
    }
    axon_xc_team_submit_waiting(team);
}

axon_status_t axon_xc_coll_test(axon_xc_coll_t *coll)
{
    if (coll->status == AXON_INPROGRESS) {
        axon_xc_team_poll(coll->team);
    }
    return coll->status;
}

static void axon_xc_coll_release(axon_xc_coll_t *coll)
{
    unsigned set;

    for (set = 0; set < AXON_XC_SETS; ++set) {
        axon_xc_chain_cleanup(&coll->chains[set]);
        free(coll->pieces[set]);
    }
    if (coll->scratch_mr != NULL) {
        axon_dev_dereg_mr(coll->scratch_mr);
    }
    free(coll->scratch);
    free(coll);
}

/* Release the freed collectives whose buffers no send reads any more. */
void axon_xc_team_bury(axon_xc_team_t *team, int all)
{
    axon_xc_coll_t *coll, *tmp;

    axon_list_for_each_safe(coll, tmp, &team->graveyard, link) {
        if (all || (coll->safe_at <= team->completed)) {
            axon_list_del(&coll->link);
            axon_xc_coll_release(coll);
        }
    }
}

void axon_xc_coll_free(axon_xc_coll_t *coll)
{
    axon_xc_team_t *team = coll->team;

    axon_list_del(&coll->link);    /* a chain failed by team_fail: nothing runs it any more */
    if (coll->safe_at > team->completed) {
        /* its last sends may be unacknowledged still (and sent again from its buffers) */
        axon_list_add_tail(&team->graveyard, &coll->link);
        return;
    }
    axon_xc_coll_release(coll);
}
