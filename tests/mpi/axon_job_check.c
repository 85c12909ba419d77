/*
 * An Axon program (no MPI) started by a PMIx launcher: axon_job_bootstrap
 * gives each process its rank, the job's size and every worker's address;
 * every rank then sends its rank to every other one and checks what it
 * receives. Then the job as a team (axon_team_create_from_job): an
 * allreduce of the ranks, a split by parity whose parent cannot be destroyed
 * while the new team uses its endpoints, an allreduce on the new team.
 * Exit 0 only when all of it held; bounded by alarm().
 *   mpirun -np N axon_job_check      (run_mpi_tests.sh does, over shm and tcp)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "axon.h"

#define CHECK(_cond, _code)                                                    \
    do {                                                                       \
        if (!(_cond)) {                                                        \
            fprintf(stderr, "axon_job_check: %s failed\n", #_cond);            \
            return (_code);                                                    \
        }                                                                      \
    } while (0)

/* Sum of the ranks over team (each member's value: its job rank). */
static int team_sum(axon_team_h team, uint64_t mine, uint64_t want)
{
    axon_coll_args_t args;
    axon_coll_h      coll;
    uint64_t         sum = 0;
    int              ok;

    memset(&args, 0, sizeof(args));
    args.field_mask = AXON_COLL_ARG_OP;
    args.coll       = AXON_COLL_ALLREDUCE;
    args.src        = &mine;
    args.dst        = &sum;
    args.count      = 1;
    args.dt         = AXON_DT_UINT64;
    args.op         = AXON_OP_SUM;
    if (axon_coll_init(team, &args, &coll) != AXON_OK) {
        return 0;
    }
    ok = (axon_coll_post(coll) == AXON_OK) && (axon_coll_wait(coll) == AXON_OK) && (sum == want);
    return (axon_coll_free(coll) == AXON_OK) && ok;
}

static axon_status_t team_ready(axon_worker_h worker, axon_team_h team)
{
    axon_status_t status;

    while ((status = axon_team_create_test(team)) == AXON_INPROGRESS) {
        axon_worker_progress(worker);
    }
    return status;
}

/* The job as a team, a split of it, and the order their destruction needs. */
static int check_teams(axon_worker_h worker, const axon_job_t *job)
{
    axon_team_h team, half;
    uint64_t    n = job->size, want_half = 0, r;

    CHECK(axon_team_create_from_job(worker, job, &team) == AXON_OK, 20);
    CHECK(team_ready(worker, team) == AXON_OK, 21);
    CHECK(team_sum(team, job->rank, n * (n - 1) / 2), 22);
    CHECK(axon_team_split_nb(team, (int)(job->rank % 2), 0, &half) == AXON_OK, 23);
    CHECK(team_ready(worker, half) == AXON_OK, 24);
    for (r = job->rank % 2; r < n; r += 2) {
        want_half += r;
    }
    CHECK(axon_team_size(half) == (uint32_t)((n - job->rank % 2 + 1) / 2), 25);
    CHECK(team_sum(half, job->rank, want_half), 26);
    /* the job team owns the endpoints the half uses */
    CHECK(axon_team_destroy(team) == AXON_ERR_BUSY, 27);
    CHECK(axon_team_destroy(half) == AXON_OK, 28);
    CHECK(team_sum(team, 1, n), 29);   /* also: nobody closes endpoints still in use */
    CHECK(axon_team_destroy(team) == AXON_OK, 30);
    return 0;
}

static axon_status_t wait_req(axon_worker_h worker, axon_status_t status, axon_request_h req)
{
    if ((status != AXON_INPROGRESS) || (req == NULL)) {
        return status;
    }
    status = axon_request_wait(worker, req, NULL);
    axon_request_free(req);
    return status;
}

int main(void)
{
    axon_context_params_t params;
    axon_context_h        context;
    axon_worker_h         worker;
    axon_job_t            job;
    axon_ep_h            *eps;
    uint32_t              r;

    alarm(60);
    memset(&params, 0, sizeof(params));
    params.features = AXON_FEATURE_TAG | AXON_FEATURE_COLL;
    CHECK(axon_init(&params, &context) == AXON_OK, 2);
    CHECK(axon_worker_create(context, NULL, &worker) == AXON_OK, 3);
    CHECK(axon_job_bootstrap(worker, &job) == AXON_OK, 4);
    CHECK((job.size >= 1) && (job.rank < job.size), 5);
    eps = calloc(job.size, sizeof(*eps));
    CHECK(eps != NULL, 6);

    for (r = 0; r < job.size; ++r) {
        axon_ep_params_t ep_params;

        memset(&ep_params, 0, sizeof(ep_params));
        ep_params.address        = job.addresses[r];
        ep_params.address_length = job.address_lengths[r];
        CHECK(axon_ep_create(worker, &ep_params, &eps[r]) == AXON_OK, 7);
    }
    /* Post every receive, then every send: ranks by tag, each value its sender's rank. */
    uint32_t       *got  = calloc(job.size, sizeof(*got));
    axon_request_h *rreq = calloc(job.size, sizeof(*rreq));
    axon_status_t  *rst  = calloc(job.size, sizeof(*rst));
    CHECK((got != NULL) && (rreq != NULL) && (rst != NULL), 8);
    for (r = 0; r < job.size; ++r) {
        got[r] = ~0u;
        rst[r] = axon_tag_recv_nb(worker, &got[r], sizeof(got[r]), 0x4a0b0000ull + r,
                                  AXON_TAG_MASK_FULL, NULL, &rreq[r]);
    }
    for (r = 0; r < job.size; ++r) {
        axon_request_h sreq = NULL;
        axon_status_t  st   = axon_tag_send_nb(eps[r], &job.rank, sizeof(job.rank),
                                               0x4a0b0000ull + job.rank, NULL, &sreq);
        CHECK(wait_req(worker, st, sreq) == AXON_OK, 9);
    }
    for (r = 0; r < job.size; ++r) {
        CHECK(wait_req(worker, rst[r], rreq[r]) == AXON_OK, 10);
        CHECK(got[r] == r, 11);
    }
    printf("axon_job_check: rank %u of %u heard from every rank\n", job.rank, job.size);
    r = (uint32_t)check_teams(worker, &job);
    CHECK(r == 0, (int)r);
    printf("axon_job_check: rank %u: job team, split and destroy order hold\n", job.rank);

    /* Nobody leaves before everyone has heard from everyone (its eps would fail). */
    for (r = 0; r < job.size; ++r) {
        axon_request_h req = NULL;
        CHECK(wait_req(worker, axon_ep_close_nb(eps[r], AXON_EP_CLOSE_FLUSH, &req), req) ==
              AXON_OK, 12);
    }
    free(got);
    free(rreq);
    free(rst);
    free(eps);
    axon_job_release(&job);
    axon_worker_destroy(worker);
    axon_cleanup(context);
    return 0;
}
