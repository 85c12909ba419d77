/*
 * axon_soak's collectives: every view the launcher declares complete (GO)
 * gets a team of all ranks, on which each rank posts the same persistent
 * collectives (allreduce, bcast, allgather) in turn and checks each result.
 * A member's failure ends the team's collective with an error; the team is
 * destroyed and the next view makes a new one with the new incarnation.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "soak_rank.h"

#define SOAK_AR_COUNT 16
#define SOAK_BC_COUNT 1024
#define SOAK_AG_COUNT 8

enum { SOAK_COLL_ALLREDUCE, SOAK_COLL_BCAST, SOAK_COLL_ALLGATHER, SOAK_COLL_KINDS };

static const char *soak_coll_name[] = {"allreduce", "bcast", "allgather"};

static uint64_t soak_bc_value(uint64_t iter, unsigned i)
{
    return iter * 1000003ull + (uint64_t)i * 7;
}

static uint64_t soak_ag_value(unsigned rank, uint64_t iter, unsigned i)
{
    return (uint64_t)rank * 1000 + iter * 100000 + i;
}

static int soak_coll_init(soak_rank_t *r)
{
    soak_coll_t     *c = &r->coll;
    axon_coll_args_t args[SOAK_COLL_KINDS] = {
        { .field_mask = AXON_COLL_ARG_OP, .coll = AXON_COLL_ALLREDUCE, .src = c->ar_src,
          .dst = c->ar_dst, .count = SOAK_AR_COUNT, .dt = AXON_DT_UINT64, .op = AXON_OP_SUM },
        { .field_mask = AXON_COLL_ARG_ROOT, .coll = AXON_COLL_BCAST, .dst = c->bc,
          .count = SOAK_BC_COUNT, .dt = AXON_DT_UINT64, .root = r->nranks - 1 },
        { .coll = AXON_COLL_ALLGATHER, .src = c->ag_src, .dst = c->ag_dst,
          .count = SOAK_AG_COUNT, .dt = AXON_DT_UINT64 },
    };
    axon_status_t    status;
    unsigned         k;

    for (k = 0; k < SOAK_COLL_KINDS; ++k) {
        status = axon_coll_init(c->team, &args[k], &c->coll[k]);
        if (status != AXON_OK) {
            soak_rank_fail(r, "axon_coll_init(%s) failed: %s", soak_coll_name[k],
                           axon_status_string(status));
            return -1;
        }
    }
    return 0;
}

/* Inputs of iteration iter (its kind is iter % SOAK_COLL_KINDS). */
static void soak_coll_prepare(soak_rank_t *r, uint64_t iter)
{
    soak_coll_t *c = &r->coll;
    unsigned     i;

    switch (iter % SOAK_COLL_KINDS) {
    case SOAK_COLL_ALLREDUCE:
        for (i = 0; i < SOAK_AR_COUNT; ++i) {
            c->ar_src[i] = (uint64_t)(r->me + 1) * (iter + 1) + i;
            c->ar_dst[i] = 0;
        }
        break;
    case SOAK_COLL_BCAST:
        for (i = 0; i < SOAK_BC_COUNT; ++i) {
            c->bc[i] = (r->me == r->nranks - 1) ? soak_bc_value(iter, i) : 0;
        }
        break;
    default:
        for (i = 0; i < SOAK_AG_COUNT; ++i) {
            c->ag_src[i] = soak_ag_value(r->me, iter, i);
        }
        memset(c->ag_dst, 0, sizeof(c->ag_dst));
        break;
    }
}

static void soak_coll_verify(soak_rank_t *r, uint64_t iter)
{
    soak_coll_t *c = &r->coll;
    uint64_t     n = r->nranks, expected, got;
    unsigned     i, m;

    for (i = 0; i < SOAK_AR_COUNT && iter % SOAK_COLL_KINDS == SOAK_COLL_ALLREDUCE; ++i) {
        expected = (iter + 1) * n * (n + 1) / 2 + n * i;
        if (c->ar_dst[i] != expected) {
            soak_rank_fail(r, "allreduce %llu element %u: %llu, expected %llu",
                           (unsigned long long)iter, i, (unsigned long long)c->ar_dst[i],
                           (unsigned long long)expected);
            return;
        }
    }
    for (i = 0; i < SOAK_BC_COUNT && iter % SOAK_COLL_KINDS == SOAK_COLL_BCAST; ++i) {
        if (c->bc[i] != soak_bc_value(iter, i)) {
            soak_rank_fail(r, "bcast %llu element %u: %llu, expected %llu",
                           (unsigned long long)iter, i, (unsigned long long)c->bc[i],
                           (unsigned long long)soak_bc_value(iter, i));
            return;
        }
    }
    for (m = 0; m < n && iter % SOAK_COLL_KINDS == SOAK_COLL_ALLGATHER; ++m) {
        for (i = 0; i < SOAK_AG_COUNT; ++i) {
            got = c->ag_dst[m * SOAK_AG_COUNT + i];
            if (got != soak_ag_value(m, iter, i)) {
                soak_rank_fail(r, "allgather %llu: member %u's element %u is %llu",
                               (unsigned long long)iter, m, i, (unsigned long long)got);
                return;
            }
        }
    }
}

void soak_coll_destroy(soak_rank_t *r)
{
    soak_coll_t  *c = &r->coll;
    axon_status_t status;
    unsigned      k;

    for (k = 0; k < SOAK_COLL_KINDS; ++k) {
        if (c->coll[k] != NULL && (status = axon_coll_free(c->coll[k])) != AXON_OK) {
            soak_rank_fail(r, "axon_coll_free(%s) failed: %s", soak_coll_name[k],
                           axon_status_string(status));
        }
        c->coll[k] = NULL;
    }
    if (c->team != NULL && (status = axon_team_destroy(c->team)) != AXON_OK) {
        soak_rank_fail(r, "axon_team_destroy failed: %s", axon_status_string(status));
    }
    c->team    = NULL;
    c->ready   = 0;
    c->broken  = 0;
    c->running = 0;
    c->iters   = 0;
}

static void soak_coll_create(soak_rank_t *r)
{
    soak_coll_t       *c = &r->coll;
    axon_ep_h          eps[SOAK_MAX_RANKS] = {NULL};
    axon_team_params_t params = {
        .field_mask = AXON_TEAM_PARAM_EPS | AXON_TEAM_PARAM_RANK, .eps = eps,
        .size = r->nranks, .rank = r->me,
    };
    axon_status_t      status;
    unsigned           i;

    for (i = 0; i < r->nranks; ++i) {
        if (i != r->me && r->peers[i].state != SOAK_PEER_LIVE) {
            return;  /* not yet: after a failure the team waits for the new incarnation */
        }
        eps[i] = r->peers[i].ep;
    }
    c->want = 0;
    status  = axon_team_create_nb(r->worker, &params, &c->team);
    if (status != AXON_OK) {
        soak_rank_fail(r, "axon_team_create_nb (view %u) failed: %s", c->go_view,
                       axon_status_string(status));
        c->team = NULL;
        return;
    }
    c->posted = soak_now();
}

/* A collective or a team creation running longer than the request bound is lost. */
static void soak_coll_check_time(soak_rank_t *r, const char *what)
{
    soak_coll_t *c = &r->coll;

    if (soak_now() - c->posted > r->params->req_bound_sec) {
        soak_rank_fail(r, "%s did not end in %.0f s", what, r->params->req_bound_sec);
        c->posted = 1e30;  /* once */
    }
}

void soak_coll_step(soak_rank_t *r)
{
    soak_coll_t  *c = &r->coll;
    axon_status_t status;
    uint64_t      iter;

    if (c->team != NULL && !c->ready) {
        status = axon_team_create_test(c->team);
        if (status == AXON_INPROGRESS) {
            soak_coll_check_time(r, "creating a team");
            return;
        }
        if (status != AXON_OK || c->broken || soak_coll_init(r) != 0) {
            ++r->stats.req_errors;   /* a member failed while it formed */
            c->broken = 1;
        }
        c->ready = 1;
    }
    if (c->running) {
        iter   = c->iters - 1;
        status = axon_coll_test(c->coll[iter % SOAK_COLL_KINDS]);
        if (status == AXON_INPROGRESS) {
            soak_coll_check_time(r, soak_coll_name[iter % SOAK_COLL_KINDS]);
            return;
        }
        c->running = 0;
        if (status == AXON_OK) {
            soak_coll_verify(r, iter);
            ++r->stats.colls;
        } else {
            ++r->stats.req_errors;
            c->broken = 1;
        }
    }
    if (c->team != NULL && c->broken) {
        soak_coll_destroy(r);
    }
    if (c->want && c->team == NULL) {
        soak_coll_create(r);
        return;
    }
    if (c->ready && !c->broken && c->iters < c->limit) {
        iter = c->iters;
        soak_coll_prepare(r, iter);
        status = axon_coll_post(c->coll[iter % SOAK_COLL_KINDS]);
        if (status != AXON_OK) {
            ++r->stats.req_errors;
            c->broken = 1;
            return;
        }
        ++c->iters;
        c->running = 1;
        c->posted  = soak_now();
    }
}
