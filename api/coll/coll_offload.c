/*
 * Collectives the device runs (AXON_COLL_OFFLOAD, components/xchannel): a
 * team whose members all reach each other over a cross-channel device gets
 * offload queues at its join (team_join.c); then barrier, bcast and those
 * allreduces the device can compute are compiled into device chains at
 * init, and a post hands the chain over. The engine sees one operation per
 * post, which ends when worker progress finds the chain's completion.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "coll_algo.h"
#include "loader.h"

/* The worker's offload device, opened by the first team that can use it. */
struct axon_coll_xc {
    const axon_loaded_component_t *lc;
    const axon_resource_t         *rsc;
    axon_xc_worker_t              *handle;
};

/* Why a member cannot offload (AXON_COLL_XC_*), for the y error line. */
static const char *const axon_coll_xc_reasons[] = {
    [AXON_COLL_XC_OFF]    = "AXON_COLL_OFFLOAD=n there",
    [AXON_COLL_XC_NO_DEV] = "no offload component on a cross-channel device there",
    [AXON_COLL_XC_LANE]   = "reached over a device without cross-channel support",
    [AXON_COLL_XC_OPEN]   = "its offload device or queues could not be opened or connected",
};

const axon_coll_offload_ops_t *axon_coll_offload_ops(axon_worker_h worker)
{
    return (worker->coll_xc != NULL) ? worker->coll_xc->lc->component->coll_offload : NULL;
}

axon_xc_worker_t *axon_coll_offload_worker(axon_worker_h worker)
{
    return (worker->coll_xc != NULL) ? worker->coll_xc->handle : NULL;
}

/* The offload component's resource on dev_name, or NULL. */
static const axon_loaded_component_t *axon_coll_xc_find(axon_context_h ctx, const char *dev_name,
                                                        const axon_resource_t **rsc_p)
{
    const axon_loaded_component_t *lc;
    unsigned i, j;

    for (i = 0; i < ctx->comps.count; ++i) {
        lc = &ctx->comps.comps[i];
        if ((lc->component == NULL) || (lc->component->coll_offload == NULL)) {
            continue;
        }
        for (j = 0; j < lc->num_resources; ++j) {
            if ((dev_name == NULL) || !strcmp(lc->resources[j].dev_name, dev_name)) {
                *rsc_p = &lc->resources[j];
                return lc;
            }
        }
    }
    return NULL;
}

static unsigned axon_coll_xc_open(axon_worker_h worker, const axon_loaded_component_t *lc,
                                  const axon_resource_t *rsc)
{
    struct axon_coll_xc *xc = worker->coll_xc;
    axon_status_t status;

    if (xc != NULL) {    /* one device per worker */
        return (xc->rsc == rsc) ? 0 : AXON_COLL_XC_LANE;
    }
    xc = calloc(1, sizeof(*xc));
    if (xc == NULL) {
        return AXON_COLL_XC_OPEN;
    }
    status = lc->component->coll_offload->worker_open(rsc, lc->config, &xc->handle);
    if (status != AXON_OK) {
        axon_warn("collective offload: cannot open %s/%s: %s", rsc->tl_name, rsc->dev_name,
                  axon_status_string(status));
        free(xc);
        return AXON_COLL_XC_OPEN;
    }
    xc->lc           = lc;
    xc->rsc          = rsc;
    worker->coll_xc  = xc;
    return 0;
}

uint64_t axon_coll_offload_word(axon_team_h team)
{
    axon_worker_h worker = team->worker;
    const axon_loaded_component_t *lc = NULL;
    const axon_resource_t *rsc = NULL, *lane;
    unsigned reason = 0;
    uint32_t i, member = team->rank;

    if (worker->context->opts.coll_offload == AXON_COLL_OFFLOAD_NEVER) {
        return axon_coll_xc_word(AXON_COLL_XC_OFF, member);
    }
    for (i = 0; (i < team->size) && (reason == 0); ++i) {
        if (i == team->rank) {
            continue;
        }
        lane = team->eps[i]->am_lane.resource;
        if ((lane == NULL) || ((lc = axon_coll_xc_find(worker->context, lane->dev_name,
                                                         &rsc)) == NULL)) {
            reason = (axon_coll_xc_find(worker->context, NULL, &rsc) == NULL) ?
                     AXON_COLL_XC_NO_DEV : AXON_COLL_XC_LANE;
            member = i;
            axon_debug("team 0x%x: member %u is reached over %s/%s: no collective offload",
                       team->id, i, lane ? lane->tl_name : "-", lane ? lane->dev_name : "-");
        } else if ((reason = axon_coll_xc_open(worker, lc, rsc)) == AXON_COLL_XC_LANE) {
            member = i;     /* on another device than the worker's offload device */
        }
    }
    if ((reason == 0) && (team->size > 1)) {
        return AXON_COLL_XC_OK;
    }
    if (worker->context->opts.coll_offload == AXON_COLL_OFFLOAD_ALWAYS) {
        if (reason == AXON_COLL_XC_LANE) {
            axon_error("team 0x%x: rank %u cannot offload collectives (AXON_COLL_OFFLOAD=y): "
                       "member %u is %s", team->id, team->rank, member,
                       axon_coll_xc_reasons[reason]);
        } else if (reason != 0) {
            axon_error("team 0x%x: rank %u cannot offload collectives (AXON_COLL_OFFLOAD=y): %s",
                       team->id, team->rank, axon_coll_xc_reasons[reason]);
        }
    }
    return axon_coll_xc_word(reason ? reason : AXON_COLL_XC_NO_DEV, member);
}

void axon_coll_offload_worker_close(axon_worker_h worker)
{
    if (worker->coll_xc != NULL) {
        axon_coll_offload_ops(worker)->worker_close(worker->coll_xc->handle);
        free(worker->coll_xc);
        worker->coll_xc = NULL;
    }
}

/* ---------------------------------------------------------------- the algorithm */

static void axon_coll_offload_unpoll(axon_coll_h coll)
{
    axon_worker_h worker = coll->team->worker;

    axon_list_del(&coll->xc_link);
    if (axon_list_is_empty(&worker->coll_polls)) {
        --worker->proto_polls;
    }
}

static void axon_coll_offload_size(axon_coll_h coll, size_t *scratch, unsigned *reqs)
{
    (void)coll;
    *scratch = 0;
    *reqs    = 0;
}

/* Post the chain, then (phase 1, once it ended) report how. */
static axon_status_t axon_coll_offload_run(axon_coll_h coll)
{
    axon_worker_h worker = coll->team->worker;
    axon_status_t status;

    if (coll->phase++ > 0) {
        return coll->xc_status;
    }
    status = axon_coll_offload_ops(worker)->coll_post(coll->xc);
    if (status != AXON_OK) {
        return status;
    }
    ++coll->pending;
    if (axon_list_is_empty(&worker->coll_polls)) {
        ++worker->proto_polls;
    }
    axon_list_add_tail(&worker->coll_polls, &coll->xc_link);
    return AXON_INPROGRESS;
}

static const axon_coll_algo_t axon_coll_offload_algo = {
    .name     = "offload",
    .coll     = AXON_COLL_LAST,   /* barrier, bcast and allreduce */
    .size     = axon_coll_offload_size,
    .progress = axon_coll_offload_run,
};

unsigned axon_coll_offload_progress(axon_worker_h worker)
{
    const axon_coll_offload_ops_t *ops = axon_coll_offload_ops(worker);
    axon_coll_h coll, tmp;
    axon_status_t status;
    unsigned count = 0;

    axon_list_for_each_safe(coll, tmp, &worker->coll_polls, xc_link) {
        status = ops->coll_test(coll->xc);
        if (status == AXON_INPROGRESS) {
            continue;
        }
        axon_coll_offload_unpoll(coll);
        coll->xc_status = status;
        axon_coll_op_end(coll, AXON_OK);
        ++count;
    }
    return count;
}

/* A member failed while the chain ran: the device stops it in error. */
void axon_coll_offload_cancel(axon_coll_h coll)
{
    if (axon_list_is_empty(&coll->xc_link)) {
        return;
    }
    axon_coll_offload_ops(coll->team->worker)->team_fail(coll->team->xc);
    axon_coll_offload_unpoll(coll);
    --coll->pending;
}

void axon_coll_offload_release(axon_coll_h coll)
{
    if (coll->xc != NULL) {
        axon_coll_offload_ops(coll->team->worker)->coll_free(coll->xc);
        coll->xc = NULL;
    }
}

/* ---------------------------------------------------------------- init */

static int axon_coll_xc_reduction(const axon_coll_args_t *a, axon_xc_args_t *x)
{
    static const struct { axon_op_t op; axon_xc_op_t xc; } ops[] = {
        {AXON_OP_SUM, AXON_XC_SUM}, {AXON_OP_BAND, AXON_XC_BAND}, {AXON_OP_BXOR, AXON_XC_BXOR},
        {AXON_OP_BOR, AXON_XC_BOR}, {AXON_OP_MAX, AXON_XC_MAX},   {AXON_OP_MIN, AXON_XC_MIN},
    };
    unsigned i;

    switch (a->dt) {
    case AXON_DT_INT64:  x->type = AXON_XC_INT64;  break;
    case AXON_DT_UINT64: x->type = AXON_XC_UINT64; break;
    case AXON_DT_DOUBLE: x->type = AXON_XC_DOUBLE; break;
    default:             return 0;
    }
    for (i = 0; i < sizeof(ops) / sizeof(ops[0]); ++i) {
        if (ops[i].op == a->op) {
            x->op = ops[i].xc;
            return 1;
        }
    }
    return 0;
}

/*
 * AXON_COLL_OFFLOAD=y on a team that cannot offload: the join kept the first
 * refusing member's word; its member field names the member concerned (for
 * LANE: the one it reaches over another device).
 */
static axon_status_t axon_coll_offload_refused(axon_coll_h coll)
{
    axon_team_h team = coll->team;
    unsigned reason  = (unsigned)(team->xc_refusal >> 8) & 0xff;
    uint32_t refuser = (uint32_t)(team->xc_refusal >> 16) & 0xffff;
    uint32_t member  = (uint32_t)(team->xc_refusal >> 32);

    if ((reason == 0) || (reason > AXON_COLL_XC_OPEN)) {
        reason = AXON_COLL_XC_OPEN;
    }
    if (reason == AXON_COLL_XC_LANE) {
        axon_error("axon_coll_init: AXON_COLL_OFFLOAD=y, but team 0x%x cannot offload its "
                   "collectives: member %u reaches member %u over a device without "
                   "cross-channel support", team->id, refuser, member);
    } else {
        axon_error("axon_coll_init: AXON_COLL_OFFLOAD=y, but team 0x%x cannot offload its "
                   "collectives: member %u: %s", team->id, member, axon_coll_xc_reasons[reason]);
    }
    return AXON_ERR_UNSUPPORTED;
}

/* The device's arguments for a; 0 if the device never runs such a collective. */
static int axon_coll_xc_args(axon_team_h team, const axon_coll_args_t *a, axon_xc_args_t *x)
{
    memset(x, 0, sizeof(*x));
    switch (a->coll) {
    case AXON_COLL_BARRIER:
        x->kind = AXON_XC_BARRIER;
        return 1;
    case AXON_COLL_BCAST:
        x->kind  = AXON_XC_BCAST;
        x->dst   = a->dst;
        x->count = a->count * axon_dt_size(a->dt);
        x->root  = a->root;
        x->radix = team->worker->context->opts.coll_knomial_radix;
        return 1;
    case AXON_COLL_ALLREDUCE:
        x->kind  = AXON_XC_ALLREDUCE;
        x->src   = a->src;
        x->dst   = a->dst;
        x->count = a->count;
        return axon_coll_xc_reduction(a, x);
    default:
        return 0;
    }
}

int axon_coll_offload_applies(axon_team_h team, const axon_coll_args_t *args)
{
    axon_xc_args_t x;

    return (team->xc != NULL) && axon_coll_xc_args(team, args, &x) &&
           (axon_coll_offload_ops(team->worker)->coll_applies(team->xc, &x) == AXON_OK);
}

axon_status_t axon_coll_offload_init(axon_coll_h coll)
{
    axon_team_h team = coll->team;
    axon_xc_args_t x;
    axon_status_t status;

    if ((team->size < 2) || !axon_coll_xc_args(team, &coll->args, &x)) {
        return AXON_OK;     /* software */
    }
    if (team->xc == NULL) {
        return (team->worker->context->opts.coll_offload == AXON_COLL_OFFLOAD_ALWAYS) ?
               axon_coll_offload_refused(coll) : AXON_OK;
    }
    status = axon_coll_offload_ops(team->worker)->coll_init(team->xc, &x, &coll->xc);
    if (status == AXON_ERR_UNSUPPORTED) {
        return AXON_OK;
    }
    if (status == AXON_OK) {
        coll->algo = &axon_coll_offload_algo;
    }
    return status;
}
