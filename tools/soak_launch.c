/*
 * axon_soak's launcher: forks the ranks before any Axon object exists here,
 * relays their addresses, runs the membership views (a view changes when a
 * killed rank's new incarnation joins; the next kill waits until every rank
 * reaches every other in the current view), ends the run and sums up.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "axon_soak.h"

#define SOAK_SETTLE_SEC 15.0  /* after detection: reconnecting, draining, final counts */

typedef enum {
    SOAK_PHASE_JOIN,    /* waiting for JOINs (at the start, or of a new incarnation) */
    SOAK_PHASE_CONNECT, /* PEERs sent, waiting for CONNECTED of the view */
    SOAK_PHASE_RUN,     /* GO sent */
    SOAK_PHASE_DRAIN,   /* STOP sent, waiting for DRAINED */
    SOAK_PHASE_FINAL,   /* EXPECT sent, waiting for FINAL */
} soak_phase_t;

typedef struct {
    pid_t          pid;
    int            fd;
    unsigned       inc;
    void          *info;        /* its JOIN payload (NULL until joined) */
    uint32_t       info_length;
    unsigned       connected;   /* the last view it said it reaches */
    int            drained, finished;
    soak_drained_t drain;
    soak_stats_t   stats;
} soak_member_t;

typedef struct {
    const soak_params_t *params;
    soak_member_t        m[SOAK_MAX_RANKS];
    soak_phase_t         phase;
    unsigned             view;
    double               phase_start, end, last_go;
    unsigned             kills;
    int                  failed;
    int                  aborted;     /* the run ended before its end: kill the ranks */
    unsigned             rand_state;
} soak_launcher_t;

static void soak_fail(soak_launcher_t *l, const char *what, unsigned rank)
{
    fprintf(stderr, "axon_soak launcher: FAIL %s (rank %u)\n", what, rank);
    l->failed = 1;
}

static int soak_fork_rank(soak_launcher_t *l, unsigned rank)
{
    soak_member_t *m = &l->m[rank];
    pid_t          parent = getpid();
    int            sv[2], status;
    unsigned       i;

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        fprintf(stderr, "axon_soak: socketpair failed: %s\n", strerror(errno));
        return -1;
    }
    fflush(NULL);
    m->pid = fork();
    if (m->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) {
            _exit(1);  /* the launcher died before prctl took effect */
        }
        for (i = 0; i < l->params->ranks; ++i) {
            if (l->m[i].fd >= 0) {
                close(l->m[i].fd);
            }
        }
        close(sv[0]);
        status = soak_rank_main(l->params, sv[1], rank, m->inc);
        fflush(NULL);
        _exit(status);
    }
    close(sv[1]);
    if (m->pid < 0) {
        fprintf(stderr, "axon_soak: fork failed: %s\n", strerror(errno));
        close(sv[0]);
        return -1;
    }
    m->fd = sv[0];
    free(m->info);
    m->info      = NULL;
    m->connected = (unsigned)-1;
    return 0;
}

static int soak_send_all(soak_launcher_t *l, uint32_t type, const void *payload,
                         uint32_t length)
{
    unsigned i;

    for (i = 0; i < l->params->ranks; ++i) {
        soak_ctl_hdr_t hdr = { .type = type, .rank = i, .inc = l->m[i].inc, .view = l->view,
                               .length = length };
        if (soak_ctl_send(l->m[i].fd, &hdr, payload) != 0) {
            return -1;
        }
    }
    return 0;
}

/* Tell rank `to` about `about` in the current view. */
static int soak_send_peer(soak_launcher_t *l, unsigned to, unsigned about)
{
    soak_ctl_hdr_t hdr = { .type = SOAK_CTL_PEER, .rank = about, .inc = l->m[about].inc,
                           .view = l->view, .length = l->m[about].info_length };

    return soak_ctl_send(l->m[to].fd, &hdr, l->m[about].info);
}

static int soak_all(const soak_launcher_t *l, int (*pred)(const soak_member_t *, unsigned),
                    unsigned view)
{
    unsigned i;

    for (i = 0; i < l->params->ranks; ++i) {
        if (!pred(&l->m[i], view)) {
            return 0;
        }
    }
    return 1;
}

static int soak_is_joined(const soak_member_t *m, unsigned view)
{
    (void)view;
    return m->info != NULL;
}

static int soak_is_connected(const soak_member_t *m, unsigned view)
{
    return m->connected == view;
}

static int soak_is_drained(const soak_member_t *m, unsigned view)
{
    (void)view;
    return m->drained;
}

static int soak_is_finished(const soak_member_t *m, unsigned view)
{
    (void)view;
    return m->finished;
}

/* Every rank joined: the first view to all, or a new incarnation's view to it and to the rest. */
static int soak_start_view(soak_launcher_t *l, int first, unsigned newcomer)
{
    unsigned i, j;

    l->view += first ? 0 : 1;
    for (i = 0; i < l->params->ranks; ++i) {
        for (j = 0; j < l->params->ranks; ++j) {
            if (i != j && (first || i == newcomer || j == newcomer) &&
                soak_send_peer(l, i, j) != 0) {
                return -1;
            }
        }
    }
    l->phase       = SOAK_PHASE_CONNECT;
    l->phase_start = soak_now();
    return 0;
}

static int soak_kill_one(soak_launcher_t *l)
{
    unsigned       victim = 1 + (unsigned)rand_r(&l->rand_state) % (l->params->ranks - 1);
    soak_member_t *m      = &l->m[victim];

    if (l->params->verbose) {
        printf("axon_soak: killing rank %u (incarnation %u, pid %d)\n", victim, m->inc,
               (int)m->pid);
    }
    kill(m->pid, SIGKILL);
    waitpid(m->pid, NULL, 0);
    close(m->fd);
    m->fd = -1;
    ++m->inc;
    ++l->kills;
    l->phase       = SOAK_PHASE_JOIN;
    l->phase_start = soak_now();
    return soak_fork_rank(l, victim);
}

static int soak_on_message(soak_launcher_t *l, unsigned rank, const soak_ctl_hdr_t *hdr,
                           void *payload)
{
    soak_member_t *m = &l->m[rank];

    switch (hdr->type) {
    case SOAK_CTL_JOIN:
        m->info        = payload;
        m->info_length = hdr->length;
        if (soak_all(l, soak_is_joined, 0)) {
            return soak_start_view(l, l->kills == 0, rank);
        }
        return 0;
    case SOAK_CTL_CONNECTED:
        m->connected = hdr->view;
        if (l->phase == SOAK_PHASE_CONNECT && soak_all(l, soak_is_connected, l->view)) {
            l->phase   = SOAK_PHASE_RUN;
            l->last_go = soak_now();
            if (l->params->verbose) {
                printf("axon_soak: view %u: every rank reaches every other (%.1f s)\n",
                       l->view, l->last_go - l->phase_start);
            }
            return soak_send_all(l, SOAK_CTL_GO, NULL, 0);
        }
        break;
    case SOAK_CTL_DRAINED:
        if (hdr->length != sizeof(m->drain)) {
            break;
        }
        memcpy(&m->drain, payload, sizeof(m->drain));
        m->drained = 1;
        break;
    case SOAK_CTL_FINAL:
        if (hdr->length != sizeof(m->stats)) {
            break;
        }
        memcpy(&m->stats, payload, sizeof(m->stats));
        m->finished = 1;
        break;
    default:
        soak_fail(l, "unknown control message", rank);
    }
    free(payload);
    return 0;
}

/* A rank's control channel closed, and not because we killed it. */
static void soak_report_death(soak_launcher_t *l, unsigned rank)
{
    soak_member_t *m = &l->m[rank];
    int            status = 0;

    soak_fail(l, "rank died (not killed by the launcher)", rank);
    if (waitpid(m->pid, &status, 0) == m->pid) {
        if (WIFSIGNALED(status)) {
            fprintf(stderr, "axon_soak launcher: rank %u.%u (pid %d) was killed by signal %d\n",
                    rank, m->inc, (int)m->pid, WTERMSIG(status));
        } else {
            fprintf(stderr, "axon_soak launcher: rank %u.%u (pid %d) exited with %d\n", rank,
                    m->inc, (int)m->pid, WEXITSTATUS(status));
        }
        m->pid = 0;
    }
}

/* Who sent what to whom, in the last incarnations: what each rank must have received. */
static int soak_send_expect(soak_launcher_t *l)
{
    soak_expect_t e;
    unsigned      i, j;

    memset(&e, 0, sizeof(e));
    for (j = 0; j < l->params->ranks; ++j) {
        e.final_inc[j] = l->m[j].inc;
        if (l->m[j].drain.coll_iters > e.coll_iters) {
            e.coll_iters = l->m[j].drain.coll_iters;
        }
    }
    for (i = 0; i < l->params->ranks; ++i) {
        soak_ctl_hdr_t hdr = { .type = SOAK_CTL_EXPECT, .rank = i, .inc = l->m[i].inc,
                               .view = l->view, .length = sizeof(e) };
        for (j = 0; j < l->params->ranks; ++j) {
            e.expect[j] = l->m[j].drain.sent_ok[i];
        }
        if (soak_ctl_send(l->m[i].fd, &hdr, &e) != 0) {
            return -1;
        }
    }
    l->phase       = SOAK_PHASE_FINAL;
    l->phase_start = soak_now();
    return 0;
}

/* The phase's deadline passed: what it waited for is a failure. */
static double soak_phase_limit(const soak_launcher_t *l)
{
    const soak_params_t *p = l->params;

    switch (l->phase) {
    case SOAK_PHASE_JOIN:
    case SOAK_PHASE_CONNECT:
        return p->detect_bound_sec + SOAK_SETTLE_SEC;
    case SOAK_PHASE_DRAIN:
    case SOAK_PHASE_FINAL:
        return p->req_bound_sec + SOAK_SETTLE_SEC;
    default:
        return 0;
    }
}

static const char *soak_phase_name[] = {"joining", "connecting", "running", "draining",
                                        "final counts"};

static int soak_is_running(const soak_member_t *m, unsigned view)
{
    (void)m;
    (void)view;
    return 1;
}

/* What a phase waits for of each rank */
static int (*const soak_phase_pred[])(const soak_member_t *, unsigned) = {
    soak_is_joined, soak_is_connected, soak_is_running, soak_is_drained, soak_is_finished};

/* Where a rank that holds up a phase is: its threads' stacks on stderr (gdb, if installed). */
static void soak_print_stacks(const soak_member_t *m, unsigned rank)
{
    char cmd[320];

    if (m->pid <= 0) {
        return;
    }
    snprintf(cmd, sizeof(cmd),
             "command -v gdb >/dev/null && timeout 30 gdb -p %d -batch -nx "
             "-ex 'set pagination off' -ex 'thread apply all bt 30' 2>&1 | "
             "grep -E '^(Thread|#)' | head -300 | sed 's/^/axon_soak stacks of rank %u: /' >&2",
             (int)m->pid, rank);
    fflush(NULL);
    if (system(cmd) != 0) {
        fprintf(stderr, "axon_soak launcher: no stacks of rank %u (pid %d): gdb missing or "
                "could not attach\n", rank, (int)m->pid);
    }
}

/* One step of the run: kill, stop or move on when a phase is over. 1: the run is over. */
static int soak_step(soak_launcher_t *l)
{
    const soak_params_t *p   = l->params;
    double               now = soak_now();
    double               limit = soak_phase_limit(l);
    unsigned             i;

    if (limit > 0 && now - l->phase_start > limit) {
        fprintf(stderr, "axon_soak launcher: %s took longer than %.0f s\n",
                soak_phase_name[l->phase], limit);
        for (i = 0; i < p->ranks; ++i) {
            if (!soak_phase_pred[l->phase](&l->m[i], l->view)) {
                soak_fail(l, soak_phase_name[l->phase], i);
                soak_print_stacks(&l->m[i], i);
            }
        }
        return 1;
    }
    switch (l->phase) {
    case SOAK_PHASE_RUN:
        if (now >= l->end) {
            l->phase       = SOAK_PHASE_DRAIN;
            l->phase_start = now;
            return soak_send_all(l, SOAK_CTL_STOP, NULL, 0) != 0;
        }
        /* a restart must fit before the end, with time for traffic with it */
        if (p->kill_interval > 0 && now - l->last_go >= p->kill_interval &&
            now + 2.0 < l->end) {
            return soak_kill_one(l) != 0;
        }
        return 0;
    case SOAK_PHASE_DRAIN:
        return soak_all(l, soak_is_drained, 0) ? (soak_send_expect(l) != 0) : 0;
    case SOAK_PHASE_FINAL:
        return soak_all(l, soak_is_finished, 0);
    default:
        return 0;
    }
}

static void soak_summary(soak_launcher_t *l)
{
    const char  *tls = getenv("AXON_TLS");
    soak_stats_t sum;
    unsigned     i;

    memset(&sum, 0, sizeof(sum));
    for (i = 0; i < l->params->ranks; ++i) {
        const soak_stats_t *s = &l->m[i].stats;

        sum.msgs += s->msgs;
        sum.bytes += s->bytes;
        sum.stale_msgs += s->stale_msgs;
        sum.layout_msgs += s->layout_msgs;
        sum.sync_msgs += s->sync_msgs;
        sum.rma_puts += s->rma_puts;
        sum.rma_gets += s->rma_gets;
        sum.rma_bytes += s->rma_bytes;
        sum.atomics += s->atomics;
        sum.colls += s->colls;
        sum.req_errors += s->req_errors;
        sum.peer_failures += s->peer_failures;
        sum.failures += s->failures;
        printf("axon_soak:   rank %u (incarnation %u): %llu msgs, %llu rma, %llu atomics, "
               "%llu colls; RSS after warm-up %.1f MiB, end %.1f MiB, max %.1f MiB "
               "(%llu samples)\n",
               i, l->m[i].inc, (unsigned long long)s->msgs,
               (unsigned long long)(s->rma_puts + s->rma_gets), (unsigned long long)s->atomics,
               (unsigned long long)s->colls, s->rss_warm / 1048576.0, s->rss_last / 1048576.0,
               s->rss_max / 1048576.0, (unsigned long long)s->rss_samples);
    }
    printf("axon_soak tls=%s ranks=%u time=%.0fs: msgs=%llu (%llu with layouts, %llu sync, "
           "%llu late from older incarnations) bytes=%llu rma=%llu (%llu bytes) atomics=%llu colls=%llu "
           "kills=%u restarts=%u peer_failures_seen=%llu errored_requests=%llu "
           "rss_rank0=%.1f->%.1fMiB checks_failed=%llu: %s\n",
           tls ? tls : "all", l->params->ranks, l->params->time_sec,
           (unsigned long long)sum.msgs, (unsigned long long)sum.layout_msgs,
           (unsigned long long)sum.sync_msgs, (unsigned long long)sum.stale_msgs,
           (unsigned long long)sum.bytes, (unsigned long long)(sum.rma_puts + sum.rma_gets),
           (unsigned long long)sum.rma_bytes, (unsigned long long)sum.atomics,
           (unsigned long long)sum.colls, l->kills, l->kills,
           (unsigned long long)sum.peer_failures, (unsigned long long)sum.req_errors,
           l->m[0].stats.rss_warm / 1048576.0, l->m[0].stats.rss_last / 1048576.0,
           (unsigned long long)sum.failures,
           (l->failed || sum.failures > 0) ? "FAIL" : "PASS");
    if (sum.failures > 0) {
        l->failed = 1;
    }
}

/* Ranks exit once told; any left after a while (a hang, a failed run) are killed. */
static void soak_reap(soak_launcher_t *l)
{
    double   end = soak_now() + 20;
    unsigned i;
    int      status;

    for (i = 0; i < l->params->ranks; ++i) {
        soak_member_t *m = &l->m[i];

        if (m->pid <= 0) {
            continue;
        }
        while (waitpid(m->pid, &status, WNOHANG) == 0) {
            if (soak_now() > end || l->aborted) {
                fprintf(stderr, "axon_soak launcher: rank %u (pid %d) killed at the end\n", i,
                        (int)m->pid);
                kill(m->pid, SIGKILL);
                waitpid(m->pid, &status, 0);
                l->failed = 1;
                break;
            }
            usleep(10000);
        }
        /* a rank that reported failed checks exits with 1 as well */
        if (!WIFEXITED(status) || (WEXITSTATUS(status) != 0 && m->stats.failures == 0)) {
            soak_fail(l, "rank did not exit cleanly", i);
        }
        if (m->fd >= 0) {
            close(m->fd);
        }
        free(m->info);
    }
}

int soak_launch(const soak_params_t *params)
{
    soak_launcher_t l;
    struct pollfd   pfd[SOAK_MAX_RANKS];
    soak_ctl_hdr_t  hdr;
    void           *payload;
    unsigned        i;
    int             done = 0;

    memset(&l, 0, sizeof(l));
    l.params     = params;
    l.rand_state = params->seed;
    for (i = 0; i < params->ranks; ++i) {
        l.m[i].fd = -1;
    }
    printf("axon_soak: %u ranks, %.0f s, kill every %.1f s, seed %u\n", params->ranks,
           params->time_sec, params->kill_interval, params->seed);
    l.phase_start = soak_now();
    l.end         = l.phase_start + params->time_sec;
    for (i = 0; i < params->ranks; ++i) {
        if (soak_fork_rank(&l, i) != 0) {
            l.failed = 1;
            done     = 1;
            break;
        }
    }
    while (!done) {
        for (i = 0; i < params->ranks; ++i) {
            pfd[i].fd     = l.m[i].fd;
            pfd[i].events = POLLIN;
        }
        if (poll(pfd, params->ranks, 100) < 0 && errno != EINTR) {
            break;
        }
        for (i = 0; i < params->ranks && !done; ++i) {
            if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR))) {
                continue;
            }
            if (soak_ctl_recv(l.m[i].fd, &hdr, &payload) != 0) {
                soak_report_death(&l, i);
                done = 1;
            } else if (soak_on_message(&l, i, &hdr, payload) != 0) {
                done = 1;
            }
        }
        done = done || soak_step(&l);
    }
    l.aborted = l.failed || l.phase != SOAK_PHASE_FINAL;
    if (!l.aborted) {
        soak_send_all(&l, SOAK_CTL_EXIT, NULL, 0);
    }
    soak_reap(&l);
    soak_summary(&l);
    return l.failed ? -1 : 0;
}
