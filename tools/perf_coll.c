/*
 * axon_perf -t coll_*: collectives over N processes, one worker each, in
 * one team, through the persistent API (one axon_coll_init per size, then
 * post and wait ITERS times).
 *
 *   --np N   this process forks N members; each sends its worker address to
 *            the parent over a socketpair and gets everyone's back, makes
 *            endpoints and a team of them (axon_team_create_nb). The same
 *            socket is the final synchronisation, and its EOF tells the
 *            parent a member died: it then kills the others.
 *   mpirun   the members are the job's processes (axon_job_bootstrap,
 *            axon_team_create_from_job).
 *
 * Per size every member times its own loop after a barrier; rank 0 prints
 * the largest of the members' averages (an allreduce of MAX). The result is
 * checked on the first iteration and on one more after the timed ones, each
 * time after the output was overwritten, so a broken collective cannot post
 * a fast number. --overlap, as OSU's non-blocking collective tests: post,
 * compute for about the collective's latency (no Axon call), wait.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "axon.h"
#include "axon_perf.h"

typedef struct {
    const perf_params_t *params;
    int                  fd;       /* --np: to the parent; -1 in a PMIx job */
    axon_context_h       context;
    axon_worker_h        worker;
    axon_team_h          team;
    uint32_t             rank, size;
    axon_ep_h           *eps;      /* --np: ours; in a job only eps[next] (the lane probe) */
    axon_coll_h          barrier;
    axon_coll_h          stats;    /* allreduce MAX of stat[] */
    double               stat[2], stat_max[2];
    char                 tl[32];
} perf_coll_t;

static const axon_coll_type_t perf_coll_types[] = {
    [PERF_TEST_COLL_BARRIER - PERF_TEST_COLL_BARRIER]   = AXON_COLL_BARRIER,
    [PERF_TEST_COLL_BCAST - PERF_TEST_COLL_BARRIER]     = AXON_COLL_BCAST,
    [PERF_TEST_COLL_REDUCE - PERF_TEST_COLL_BARRIER]    = AXON_COLL_REDUCE,
    [PERF_TEST_COLL_ALLREDUCE - PERF_TEST_COLL_BARRIER] = AXON_COLL_ALLREDUCE,
    [PERF_TEST_COLL_ALLGATHER - PERF_TEST_COLL_BARRIER] = AXON_COLL_ALLGATHER,
    [PERF_TEST_COLL_ALLTOALL - PERF_TEST_COLL_BARRIER]  = AXON_COLL_ALLTOALL,
};

static int perf_coll_status(const perf_coll_t *pc, axon_status_t status, const char *what)
{
    if (status == AXON_OK) {
        return 0;
    }
    fprintf(stderr, "axon_perf rank %u: %s failed: %s\n", pc->rank, what,
            axon_status_string(status));
    return -1;
}

static int perf_coll_init(perf_coll_t *pc, const axon_coll_args_t *args, axon_coll_h *coll_p)
{
    return perf_coll_status(pc, axon_coll_init(pc->team, args, coll_p), "axon_coll_init");
}

static int perf_coll_once(perf_coll_t *pc, axon_coll_h coll)
{
    axon_status_t status = axon_coll_post(coll);

    if (status == AXON_OK) {
        status = axon_coll_wait(coll);
    }
    return perf_coll_status(pc, status, "a collective");
}

/* ---------------------------------------------------------------- data */

/* Member r's element k of its block for member j (j = 0 where blocks are alike). */
static int64_t perf_coll_value(uint32_t r, uint32_t j, size_t k)
{
    return ((int64_t)(r + 1) << 40) + ((int64_t)j << 32) + (int64_t)k + 1;
}

/* What member rank finds in element i of its output, for a collective of count per block. */
static int64_t perf_coll_expect(const perf_coll_t *pc, size_t count, size_t i)
{
    uint32_t r;
    int64_t  sum = 0;

    switch (pc->params->test) {
    case PERF_TEST_COLL_BCAST:
        return perf_coll_value(0, 0, i);
    case PERF_TEST_COLL_ALLGATHER:
        return perf_coll_value((uint32_t)(i / count), 0, i % count);
    case PERF_TEST_COLL_ALLTOALL:
        return perf_coll_value((uint32_t)(i / count), pc->rank, i % count);
    default:    /* sums */
        for (r = 0; r < pc->size; ++r) {
            sum += perf_coll_value(r, 0, i);
        }
        return sum;
    }
}

/* Elements of the output this member checks (0: none). */
static size_t perf_coll_out_count(const perf_coll_t *pc, size_t count)
{
    switch (pc->params->test) {
    case PERF_TEST_COLL_BARRIER:   return 0;
    case PERF_TEST_COLL_REDUCE:    return (pc->rank == 0) ? count : 0;
    case PERF_TEST_COLL_BCAST:     return (pc->rank == 0) ? 0 : count;  /* the root's is input */
    case PERF_TEST_COLL_ALLGATHER:
    case PERF_TEST_COLL_ALLTOALL:  return count * pc->size;
    default:                       return count;
    }
}

static int perf_coll_verify(const perf_coll_t *pc, const int64_t *dst, size_t count, size_t size)
{
    size_t  i, n = perf_coll_out_count(pc, count);
    int64_t expect;

    for (i = 0; i < n; ++i) {
        expect = perf_coll_expect(pc, count, i);
        if (dst[i] != expect) {
            fprintf(stderr, "axon_perf rank %u: %s size %zu: wrong result at element %zu of "
                    "%zu: 0x%" PRIx64 ", expected 0x%" PRIx64 "\n", pc->rank,
                    perf_test_names[pc->params->test], size, i, n, (uint64_t)dst[i],
                    (uint64_t)expect);
            return -1;
        }
    }
    return 0;
}

/* Spin for sec seconds without calling Axon: the computation of --overlap. */
static void perf_coll_compute(double sec)
{
    double end = perf_now() + sec;

    while (perf_now() < end) {
    }
}

/* The largest value of each member's stat[0..n-1], in stat_max. */
static int perf_coll_max(perf_coll_t *pc)
{
    return perf_coll_once(pc, pc->stats);
}

/*
 * Average seconds per iteration of one member, after a barrier: post and
 * wait, or with compute > 0 post, compute, wait; compute < 0: only compute.
 */
static int perf_coll_loop(perf_coll_t *pc, axon_coll_h coll, double compute, double *avg)
{
    unsigned long i, iters = pc->params->iters;
    double        t0;

    if (perf_coll_once(pc, pc->barrier) != 0) {
        return -1;
    }
    t0 = perf_now();
    for (i = 0; i < iters; ++i) {
        if (compute < 0) {
            perf_coll_compute(-compute);
            continue;
        }
        if (perf_coll_status(pc, axon_coll_post(coll), "axon_coll_post") != 0) {
            return -1;
        }
        if (compute > 0) {
            perf_coll_compute(compute);
        }
        if (perf_coll_status(pc, axon_coll_wait(coll), "axon_coll_wait") != 0) {
            return -1;
        }
    }
    *avg = (perf_now() - t0) / (double)iters;
    return 0;
}

/* Overwrite the output, run once, check it. */
static int perf_coll_checked(perf_coll_t *pc, axon_coll_h coll, int64_t *dst, size_t count,
                             size_t size)
{
    memset(dst, 0xa5, perf_coll_out_count(pc, count) * sizeof(*dst));
    return ((perf_coll_once(pc, coll) != 0) ||
            (perf_coll_verify(pc, dst, count, size) != 0)) ? -1 : 0;
}

static void perf_coll_print(const perf_coll_t *pc, size_t size, const axon_coll_args_t *args,
                            const double *lat, int overlap)
{
    const perf_params_t *params = pc->params;
    axon_coll_attr_t     attr   = { .algorithm = "?" };
    double               sec    = (lat[0] > 0) ? lat[0] : 1e-9;

    axon_coll_query(pc->team, args->coll, args->dt, args->op, size, &attr);
    printf("RESULT test=%s tl=%s size=%zu iters=%lu latency_us=%.3f bandwidth_MBps=%.3f "
           "msgrate_Mps=%.3f ranks=%u algo=%s", perf_test_names[params->test], pc->tl, size,
           params->iters, sec * 1e6, (double)size / sec / 1e6, 1 / sec / 1e6, pc->size,
           attr.algorithm);
    if (overlap) {
        /* lat[1]: compute alone, lat[2]: compute with the collective running */
        double pct = 100 * (1 - (lat[2] - lat[1]) / sec);
        printf(" overlap_pct=%.1f compute_us=%.3f overlapped_us=%.3f", (pct > 0) ? pct : 0,
               lat[1] * 1e6, lat[2] * 1e6);
    }
    printf("\n");
    fflush(stdout);
}

static int perf_coll_size(perf_coll_t *pc, size_t size)
{
    const perf_params_t *params = pc->params;
    size_t               count  = size / sizeof(int64_t), blocks, k;
    axon_coll_args_t     args   = {
        .field_mask = AXON_COLL_ARG_ROOT | AXON_COLL_ARG_OP, .dt = AXON_DT_INT64,
        .op = AXON_OP_SUM, .root = 0, .count = count,
        .coll = perf_coll_types[params->test - PERF_TEST_COLL_BARRIER] };
    axon_coll_h          coll   = NULL;
    int64_t             *src, *dst;
    double               lat[3] = { 0 };
    unsigned long        i;
    int                  ret    = -1;

    blocks = ((args.coll == AXON_COLL_ALLGATHER) || (args.coll == AXON_COLL_ALLTOALL)) ?
             pc->size : 1;
    src = malloc((count ? count : 1) * blocks * sizeof(*src));
    dst = malloc((count ? count : 1) * blocks * sizeof(*dst));
    if ((src == NULL) || (dst == NULL)) {
        fprintf(stderr, "axon_perf rank %u: out of memory for %zu-byte buffers\n", pc->rank,
                size * blocks);
        goto out;
    }
    for (k = 0; k < count * blocks; ++k) {
        /* alltoall's block j goes to member j; the root's bcast data is in dst */
        src[k] = perf_coll_value(pc->rank, (args.coll == AXON_COLL_ALLTOALL) ?
                                 (uint32_t)(k / count) : 0, k % (count ? count : 1));
        dst[k] = (args.coll == AXON_COLL_BCAST) ? perf_coll_value(0, 0, k) : 0;
    }
    args.src = src;
    args.dst = dst;
    if ((perf_coll_init(pc, &args, &coll) != 0) ||
        (perf_coll_checked(pc, coll, dst, count, size) != 0)) {
        goto out;
    }
    for (i = 1; i < params->warmup; ++i) {
        if (perf_coll_once(pc, coll) != 0) {
            goto out;
        }
    }
    if ((perf_coll_loop(pc, coll, 0, &pc->stat[0]) != 0) || (perf_coll_max(pc) != 0)) {
        goto out;
    }
    lat[0] = pc->stat_max[0];
    if (params->overlap) {
        /* compute as long as the slowest member's collective takes */
        if ((perf_coll_loop(pc, coll, -lat[0], &pc->stat[0]) != 0) ||
            (perf_coll_loop(pc, coll, lat[0], &pc->stat[1]) != 0) || (perf_coll_max(pc) != 0)) {
            goto out;
        }
        lat[1] = pc->stat_max[0];
        lat[2] = pc->stat_max[1];
    }
    if (perf_coll_checked(pc, coll, dst, count, size) != 0) {
        goto out;
    }
    if (pc->rank == 0) {
        perf_coll_print(pc, size, &args, lat, params->overlap);
    }
    ret = 0;
out:
    if (coll != NULL) {
        axon_coll_free(coll);
    }
    free(src);
    free(dst);
    return ret;
}

/* ---------------------------------------------------------------- one member */

static int perf_coll_bench(perf_coll_t *pc)
{
    const perf_params_t *params = pc->params;
    axon_coll_args_t     args   = { .coll = AXON_COLL_BARRIER };
    axon_ep_attr_t       attr;
    axon_status_t        status;
    unsigned             i;

    while ((status = axon_team_create_test(pc->team)) == AXON_INPROGRESS) {
        axon_worker_progress(pc->worker);
    }
    if (perf_coll_status(pc, status, "joining the team") != 0) {
        return -1;
    }
    if (perf_coll_init(pc, &args, &pc->barrier) != 0) {
        return -1;
    }
    args = (axon_coll_args_t){ .field_mask = AXON_COLL_ARG_OP, .coll = AXON_COLL_ALLREDUCE,
                               .src = pc->stat, .dst = pc->stat_max, .count = 2,
                               .dt = AXON_DT_DOUBLE, .op = AXON_OP_MAX };
    if (perf_coll_init(pc, &args, &pc->stats) != 0) {
        return -1;
    }
    snprintf(pc->tl, sizeof(pc->tl), "self");
    if ((pc->size > 1) && (axon_ep_query(pc->eps[(pc->rank + 1) % pc->size], &attr) == AXON_OK)) {
        snprintf(pc->tl, sizeof(pc->tl), "%s", attr.small_tl);
    }
    if (pc->rank == 0) {
        printf("# axon_perf %s: test=%s ranks=%u iters=%lu warmup=%lu launcher=%s%s\n"
               "# latency_us: the largest of the members' averages per collective\n",
               axon_get_version_string(), perf_test_names[params->test], pc->size,
               params->iters, params->warmup, (pc->fd >= 0) ? "fork" : "pmix",
               params->overlap ? " overlap=yes" : "");
        fflush(stdout);
    }
    for (i = 0; i < params->num_sizes; ++i) {
        alarm(PERF_TIMEOUT_SEC);
        if (perf_coll_size(pc, params->sizes[i]) != 0) {
            return -1;
        }
    }
    /* Nobody tears down before everyone is done. */
    return perf_coll_once(pc, pc->barrier);
}

/* The endpoints to the other members; eps[rank] stays NULL. */
static int perf_coll_connect(perf_coll_t *pc, void **addresses, size_t *lengths, int only_next)
{
    axon_ep_params_t ep_params;
    uint32_t         r;

    memset(&ep_params, 0, sizeof(ep_params));
    pc->eps = calloc(pc->size, sizeof(*pc->eps));
    if (pc->eps == NULL) {
        fprintf(stderr, "axon_perf rank %u: out of memory\n", pc->rank);
        return -1;
    }
    for (r = 0; r < pc->size; ++r) {
        if ((r == pc->rank) || (only_next && (r != (pc->rank + 1) % pc->size))) {
            continue;
        }
        ep_params.address        = addresses[r];
        ep_params.address_length = lengths[r];
        if (perf_coll_status(pc, axon_ep_create(pc->worker, &ep_params, &pc->eps[r]),
                             "axon_ep_create") != 0) {
            return -1;
        }
    }
    return 0;
}

static void perf_coll_teardown(perf_coll_t *pc)
{
    axon_request_h req;
    uint32_t       r;

    if (pc->barrier != NULL) {
        axon_coll_free(pc->barrier);
    }
    if (pc->stats != NULL) {
        axon_coll_free(pc->stats);
    }
    axon_team_destroy(pc->team);
    for (r = 0; (pc->eps != NULL) && (r < pc->size); ++r) {
        req = NULL;
        if ((pc->eps[r] != NULL) &&
            (axon_ep_close_nb(pc->eps[r], AXON_EP_CLOSE_FORCE, &req) == AXON_INPROGRESS)) {
            axon_request_free(req);
        }
    }
    free(pc->eps);
}

static int perf_coll_open(perf_coll_t *pc)
{
    axon_context_params_t ctx_params = { .features = AXON_FEATURE_COLL };

    if (perf_coll_status(pc, axon_init(&ctx_params, &pc->context), "axon_init") != 0) {
        return -1;
    }
    if (perf_coll_status(pc, axon_worker_create(pc->context, NULL, &pc->worker),
                         "axon_worker_create") != 0) {
        axon_cleanup(pc->context);
        return -1;
    }
    return 0;
}

static void perf_coll_close(perf_coll_t *pc)
{
    perf_coll_teardown(pc);
    axon_worker_destroy(pc->worker);
    axon_cleanup(pc->context);
}

/* A --np child: rank of size, the parent at the other end of fd. */
static int perf_coll_child(const perf_params_t *params, int fd, uint32_t rank)
{
    perf_coll_t        pc = { .params = params, .fd = fd, .rank = rank, .size = params->np };
    axon_team_params_t tp = { .field_mask = AXON_TEAM_PARAM_EPS | AXON_TEAM_PARAM_RANK,
                              .size = params->np, .rank = rank };
    void              *address, *addresses[PERF_COLL_MAX_NP] = { NULL };
    size_t             length, lengths[PERF_COLL_MAX_NP];
    uint32_t           r;
    int                ret = -1;

    if (perf_coll_open(&pc) != 0) {
        return -1;
    }
    if (perf_coll_status(&pc, axon_worker_get_address(pc.worker, &address, &length),
                         "axon_worker_get_address") != 0) {
        goto out;
    }
    ret = perf_write_address(fd, address, length);
    axon_worker_release_address(pc.worker, address);
    for (r = 0; (ret == 0) && (r < pc.size); ++r) {
        ret = perf_read_address(fd, &addresses[r], &lengths[r]);
    }
    if ((ret != 0) || (perf_coll_connect(&pc, addresses, lengths, 0) != 0)) {
        ret = -1;
        goto out;
    }
    tp.eps = pc.eps;
    ret    = ((perf_coll_status(&pc, axon_team_create_nb(pc.worker, &tp, &pc.team),
                                "axon_team_create_nb") != 0) || (perf_coll_bench(&pc) != 0) ||
              (perf_sync(fd, &pc.worker, 1) != 0)) ? -1 : 0;
out:
    for (r = 0; r < pc.size; ++r) {
        free(addresses[r]);
    }
    perf_coll_close(&pc);
    return ret;
}

/* ---------------------------------------------------------------- the parent of --np */

/*
 * Wait for every member's next message on its socket (what = 1: an
 * address, into addresses; 0: the final synchronisation byte); a member
 * whose socket ends first has died.
 */
static int perf_coll_gather(const int *fds, unsigned n, void **addresses, size_t *lengths)
{
    struct pollfd pfds[PERF_COLL_MAX_NP];
    unsigned      i, left = n;
    char          c;

    for (i = 0; i < n; ++i) {
        pfds[i] = (struct pollfd){ .fd = fds[i], .events = POLLIN };
    }
    while (left > 0) {
        if (poll(pfds, n, -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            fprintf(stderr, "axon_perf: poll failed: %s\n", strerror(errno));
            return -1;
        }
        for (i = 0; i < n; ++i) {
            if ((pfds[i].fd < 0) || (pfds[i].revents == 0)) {
                continue;
            }
            if ((addresses != NULL) ? perf_read_address(fds[i], &addresses[i], &lengths[i]) :
                perf_sock_read(fds[i], &c, 1)) {
                fprintf(stderr, "axon_perf: rank %u ended early\n", i);
                return -1;
            }
            pfds[i].fd = -1;
            --left;
        }
    }
    return 0;
}

/* Reap every member within a bounded time; 0 if all exited with status 0. */
static int perf_coll_reap(unsigned wait_sec, int quiet)
{
    char     who[32];
    unsigned i;
    int      ret = 0;

    for (i = 0; i < perf_num_children; ++i) {
        snprintf(who, sizeof(who), "rank %u", i);
        ret |= perf_wait_child(perf_children[i], wait_sec, quiet, who);
        perf_children[i] = 0;
    }
    return ret;
}

static int perf_coll_fork(const perf_params_t *params)
{
    void            *addresses[PERF_COLL_MAX_NP] = { NULL };
    size_t           lengths[PERF_COLL_MAX_NP];
    int              fds[PERF_COLL_MAX_NP] = { 0 }, sv[2];
    pid_t            parent = getpid();
    unsigned         i, j, n = params->np;
    char             c = 's';
    int              ret = -1;

    perf_set_alarm_handler();
    alarm(PERF_TIMEOUT_SEC * (params->num_sizes + 1));  /* backstop: members bound themselves */
    fflush(stdout);
    fflush(stderr);
    for (perf_num_children = 0; perf_num_children < n; ++perf_num_children) {
        i = perf_num_children;
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
            fprintf(stderr, "axon_perf: socketpair failed: %s\n", strerror(errno));
            goto out;
        }
        perf_children[i] = fork();
        if (perf_children[i] == 0) {
            signal(SIGALRM, SIG_DFL);
            alarm(0);
#ifdef __linux__
            prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
            if (getppid() != parent) {
                _exit(1);  /* the parent died before prctl took effect */
            }
            for (j = 0; j < i; ++j) {
                close(fds[j]);
            }
            close(sv[0]);
            alarm(PERF_TIMEOUT_SEC);
            ret = perf_coll_child(params, sv[1], i);
            exit((ret == 0) ? 0 : 1);
        }
        close(sv[1]);
        fds[i] = sv[0];
        if (perf_children[i] < 0) {
            fprintf(stderr, "axon_perf: fork failed: %s\n", strerror(errno));
            close(sv[0]);
            goto out;
        }
    }
    if (perf_coll_gather(fds, n, addresses, lengths) != 0) {
        goto out;
    }
    for (i = 0; i < n; ++i) {
        for (j = 0; j < n; ++j) {
            if (perf_write_address(fds[i], addresses[j], lengths[j]) != 0) {
                goto out;
            }
        }
    }
    if (perf_coll_gather(fds, n, NULL, NULL) != 0) {
        goto out;
    }
    for (i = 0, ret = 0; i < n; ++i) {
        ret |= perf_sock_write(fds[i], &c, 1);
    }
out:
    if (ret != 0) {
        perf_kill_children();
    }
    for (i = 0; i < perf_num_children; ++i) {
        close(fds[i]);
        free(addresses[i]);
    }
    if (perf_coll_reap((ret == 0) ? PERF_CHILD_WAIT_SEC : PERF_CHILD_GRACE_SEC, ret != 0) != 0) {
        ret = -1;
    }
    alarm(0);
    return ret;
}

/* ---------------------------------------------------------------- a PMIx job */

static int perf_coll_job(const perf_params_t *params)
{
    perf_coll_t   pc = { .params = params, .fd = -1 };
    axon_job_t    job;
    axon_status_t status;
    int           ret = -1;

    alarm(PERF_TIMEOUT_SEC);
    if (perf_coll_open(&pc) != 0) {
        return -1;
    }
    status = axon_job_bootstrap(pc.worker, &job);
    if (status == AXON_ERR_UNREACHABLE) {
        fprintf(stderr, "axon_perf: %s needs --np N or a PMIx launcher (mpirun -np N "
                "axon_perf ...); no launcher started this process\n",
                perf_test_names[params->test]);
        goto out;
    }
    if (perf_coll_status(&pc, status, "axon_job_bootstrap") != 0) {
        goto out;
    }
    pc.rank = job.rank;
    pc.size = job.size;
    /* The team opens endpoints of its own; ours to the next rank only names the lane. */
    ret = ((perf_coll_status(&pc, axon_team_create_from_job(pc.worker, &job, &pc.team),
                             "axon_team_create_from_job") != 0) ||
           (perf_coll_connect(&pc, job.addresses, job.address_lengths, 1) != 0) ||
           (perf_coll_bench(&pc) != 0)) ? -1 : 0;
    axon_job_release(&job);
out:
    perf_coll_close(&pc);
    return ret;
}

int perf_coll_check_params(const perf_params_t *params)
{
    unsigned i;

    for (i = 0; i < params->num_sizes; ++i) {
        if ((params->test != PERF_TEST_COLL_BARRIER) &&
            ((params->sizes[i] == 0) || (params->sizes[i] % sizeof(int64_t) != 0))) {
            fprintf(stderr, "axon_perf: %s takes sizes in whole 64-bit elements (a multiple "
                    "of 8 bytes, at least 8), not %zu\n", perf_test_names[params->test],
                    params->sizes[i]);
            return -1;
        }
    }
    return 0;
}

int perf_coll_run(const perf_params_t *params)
{
    return (params->np > 0) ? perf_coll_fork(params) : perf_coll_job(params);
}
