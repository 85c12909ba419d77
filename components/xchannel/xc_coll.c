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

static axon_status_t axon_xc_reg(axon_xc_team_t *team, void *buf, size_t len,
                                 axon_dev_mr_t **mr_p)
{
    int ret = axon_dev_reg_mr(team->worker->dev.pd, buf, len, AXON_DEV_ACCESS_LOCAL_WRITE, mr_p);

    if (ret != 0) {
        axon_error("xchannel: %s: cannot register %zu bytes at %p: %s", team->worker->dev.name,
                   len, buf, strerror(ret));
        return AXON_ERR_NO_RESOURCE;
    }
    return AXON_OK;
}

/* The chains' own buffers: two halves of half_len bytes (xchannel.h). */
static axon_status_t axon_xc_scratch(axon_xc_coll_t *coll, size_t half_len)
{
    coll->half_len = (half_len + 63) & ~(size_t)63;
    coll->scratch  = calloc(2, coll->half_len);
    if (coll->scratch == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    return axon_xc_reg(coll->team, coll->scratch, 2 * coll->half_len, &coll->scratch_mr);
}

static void *axon_xc_half(axon_xc_coll_t *coll, unsigned set)
{
    return (uint8_t *)coll->scratch + set * coll->half_len;
}

/* Per half: operands x, the neighbour's input, one per round; then the result. */
static axon_status_t axon_xc_allreduce_buffers(axon_xc_coll_t *coll)
{
    uint32_t rounds = axon_xc_log2_ceil(coll->team->size + 1) + 1;
    size_t count = coll->args.count;
    axon_status_t status = axon_xc_scratch(coll, (rounds + 3) * count * 8);
    unsigned set;

    coll->chunk = coll->team->worker->dev.dev_attr.cross_channel.max_calc_vector;
    for (set = 0; (set < 2) && (status == AXON_OK); ++set) {
        coll->x_be[set]   = axon_xc_half(coll, set);
        coll->res_be[set] = coll->x_be[set] + (rounds + 2) * count;
    }
    return status;
}

axon_status_t axon_xc_coll_applies(axon_xc_team_t *team, const axon_xc_args_t *args)
{
    switch (args->kind) {
    case AXON_XC_BARRIER:
        return (team->size > 1) ? AXON_OK : AXON_ERR_UNSUPPORTED;
    case AXON_XC_BCAST:
        if ((team->size < 2) || (args->count == 0) ||
            (args->count > team->worker->dev.dev_attr.max_mr_size) || (args->radix < 2) ||
            (args->root >= team->size)) {
            axon_debug("xchannel: bcast of %zu bytes (radix %u, root %u) not offloaded",
                       args->count, args->radix, args->root);
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
    axon_status_t status = axon_xc_coll_applies(coll->team, &coll->args);
    unsigned set;

    if (status != AXON_OK) {
        return status;
    }
    if (coll->args.kind == AXON_XC_ALLREDUCE) {
        status = axon_xc_allreduce_buffers(coll);
    } else if ((coll->args.kind == AXON_XC_BCAST) && (coll->args.count <= AXON_XC_BCAST_STAGE)) {
        status = axon_xc_scratch(coll, coll->args.count);
        coll->stage[0] = axon_xc_half(coll, 0);
        coll->stage[1] = axon_xc_half(coll, 1);
    } else if (coll->args.kind == AXON_XC_BCAST) {
        status = axon_xc_reg(coll->team, coll->args.dst, coll->args.count, &coll->mr);
    }
    for (set = 0; (set < 2) && (status == AXON_OK); ++set) {
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
    if ((status == AXON_OK) && (coll->chains[0].slots > AXON_XC_QP_WRS / 2)) {
        /* more than the queues ever hold for one chain (a root of thousands) */
        axon_debug("xchannel: a chain of %u queue slots (at most %u): not offloaded",
                   coll->chains[0].slots, AXON_XC_QP_WRS / 2);
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
    axon_dev_send_wr_t *wr;
    axon_xc_chain_t *ch;
    size_t i;
    int ret;

    coll->set = !coll->set;   /* the other half: the last post's sends may still read this one */
    ch        = &coll->chains[coll->set];
    if (coll->args.kind == AXON_XC_ALLREDUCE) {
        for (i = 0; i < coll->args.count; ++i) {
            coll->x_be[coll->set][i] = htobe64(src[i]);
        }
    } else if ((coll->stage[coll->set] != NULL) && (team->rank == coll->args.root)) {
        memcpy(coll->stage[coll->set], coll->args.dst, coll->args.count);
    }
    for (wr = ch->task_head; wr != NULL; wr = wr->next) {
        wr->wr_id = coll->seq;
    }
    ch->scq_first->wr.cqe_wait.cq_count = (int32_t)team->unwaited;
    if (ch->scq_last != NULL) {
        ch->scq_last->wr.cqe_wait.cq_count =
            (int32_t)(team->unwaited + ch->num_sends);
    }
    ret = axon_dev_post_task(team->worker->dev.ctx, ch->tasks, &bad);
    if (ret != 0) {
        axon_error("xchannel: %s: posting a chain of %u items failed at item %d: %s",
                   team->worker->dev.name, ch->num_tasks,
                   bad ? (int)(bad - ch->tasks) : -1, strerror(ret));
        team->failed = AXON_ERR_IO_ERROR;   /* the queues' counts no longer match the chains */
        return AXON_ERR_IO_ERROR;
    }
    team->in_flight += ch->slots;
    team->unwaited    = (ch->scq_last != NULL) ? 0 : ch->num_sends;
    team->unwaited_by = (team->unwaited > 0) ? coll : NULL;
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
            (team->in_flight + coll->chains[0].slots > AXON_XC_QP_WRS / 2)) {
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
        ((team->in_flight == 0) || (team->in_flight + coll->chains[0].slots <= AXON_XC_QP_WRS / 2))) {
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
    axon_list_del(&coll->link);
    coll->team->in_flight -= coll->chains[coll->set].slots;
    if ((status == AXON_OK) && (coll->args.kind == AXON_XC_ALLREDUCE)) {
        axon_xc_allreduce_result(coll);
    } else if ((status == AXON_OK) && (coll->stage[coll->set] != NULL) &&
               (coll->team->rank != coll->args.root)) {
        memcpy(coll->args.dst, coll->stage[coll->set], coll->args.count);
    }
    coll->status = status;
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
                    axon_xc_team_bury(team);
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
    axon_xc_chain_cleanup(&coll->chains[0]);
    axon_xc_chain_cleanup(&coll->chains[1]);
    if (coll->mr != NULL) {
        axon_dev_dereg_mr(coll->mr);
    }
    if (coll->scratch_mr != NULL) {
        axon_dev_dereg_mr(coll->scratch_mr);
    }
    free(coll->scratch);
    free(coll);
}

/* The next chain's first WAIT covered every send before it: the dead can go. */
void axon_xc_team_bury(axon_xc_team_t *team)
{
    axon_xc_coll_t *coll, *tmp;

    axon_list_for_each_safe(coll, tmp, &team->graveyard, link) {
        axon_list_del(&coll->link);
        axon_xc_coll_release(coll);
    }
}

void axon_xc_coll_free(axon_xc_coll_t *coll)
{
    axon_xc_team_t *team = coll->team;

    axon_list_del(&coll->link);    /* a chain failed by team_fail: nothing runs it any more */
    if (team->unwaited_by == coll) {
        /* its last sends may be unacknowledged still (and sent again from its buffers) */
        team->unwaited_by = NULL;
        axon_list_add_tail(&team->graveyard, &coll->link);
        return;
    }
    axon_xc_coll_release(coll);
}
