/*
 * One axon_soak rank: its Axon objects, its peers' life cycle (a failure
 * reported by the endpoint's error callback, then the close, then the new
 * incarnation the launcher announced), the control channel, the main loop
 * and the checks at the end (nothing lost, nothing failed that lives, RSS).
 */
#define _GNU_SOURCE
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "soak_rank.h"

#define SOAK_CLOSE_SEC 10.0  /* closing an endpoint, canceling receives at the end */

void soak_rank_fail(soak_rank_t *r, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "axon_soak rank %u.%u: FAIL ", r->me, r->inc);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    ++r->stats.failures;
}

/* ---------------------------------------------------------------- patterns */

void soak_fill(void *buf, size_t length, uint64_t seed)
{
    unsigned char *p = buf;
    uint64_t       x = seed | 1;
    size_t         i;

    for (i = 0; i + 8 <= length; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(p + i, &x, 8);
    }
    for (; i < length; ++i) {
        p[i] = (unsigned char)(seed >> (i % 8));
    }
}

int soak_check(const void *buf, size_t length, uint64_t seed, size_t *bad_offset)
{
    const unsigned char *p = buf;
    unsigned char        expected[8];
    uint64_t             x = seed | 1;
    size_t               i, j;

    for (i = 0; i + 8 <= length; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if (memcmp(p + i, &x, 8) != 0) {
            memcpy(expected, &x, 8);
            for (j = 0; p[i + j] == expected[j]; ++j) {
            }
            *bad_offset = i + j;
            return 0;
        }
    }
    for (; i < length; ++i) {
        if (p[i] != (unsigned char)(seed >> (i % 8))) {
            *bad_offset = i;
            return 0;
        }
    }
    return 1;
}

/* ---------------------------------------------------------------- requests */

void soak_req_issue(soak_req_t *slot)
{
    slot->busy   = 1;
    slot->done   = 0;
    slot->status = AXON_INPROGRESS;
    slot->issued = soak_now();
}

int soak_req_started(soak_req_t *slot, soak_peer_t *peer, axon_status_t status)
{
    if (status == AXON_INPROGRESS) {
        return 1;
    }
    slot->busy = 0;
    if (status == AXON_ERR_NO_RESOURCE) {
        return 0;  /* not connected yet, or queues full */
    }
    if (status == AXON_OK) {
        soak_rank_fail(slot->rank, "an operation with AXON_REQ_FLAG_NO_IMM_CMPL returned "
                       "AXON_OK");
        return -1;
    }
    soak_req_error(peer, peer->inc, status);
    return -1;
}

static void soak_req_done(soak_req_t *slot, axon_status_t status,
                          const axon_tag_recv_info_t *info)
{
    if (!slot->busy || slot->done) {
        soak_rank_fail(slot->rank, "a request completed twice (status %s)",
                       axon_status_string(status));
        return;
    }
    slot->done   = 1;
    slot->status = status;
    if (info != NULL) {
        slot->info = *info;
    }
}

void soak_send_cb(axon_request_h req, axon_status_t status, void *arg)
{
    soak_req_done(arg, status, NULL);
    axon_request_free(req);
}

void soak_recv_cb(axon_request_h req, axon_status_t status, const axon_tag_recv_info_t *info,
                  void *arg)
{
    soak_req_done(arg, status, info);
    axon_request_free(req);
}

void soak_req_error(soak_peer_t *peer, unsigned inc, axon_status_t status)
{
    soak_rank_t *r = peer->rank;

    ++r->stats.req_errors;
    if ((int)inc > peer->err_inc_max) {
        peer->err_inc_max = (int)inc;
    }
    if (r->params->verbose) {
        printf("axon_soak rank %u.%u: a request to rank %u.%u ended: %s\n", r->me, r->inc,
               peer->index, inc, axon_status_string(status));
    }
}

/* ---------------------------------------------------------------- peers */

static void soak_peer_err_cb(void *arg, axon_ep_h ep, axon_status_t status)
{
    soak_peer_t *peer = arg;
    soak_rank_t *r    = peer->rank;

    if (r->phase == SOAK_EXIT) {
        return;  /* peers that exit first may look failed (shm, ud) */
    }
    if (ep != peer->ep || peer->state != SOAK_PEER_LIVE) {
        soak_rank_fail(r, "error callback for rank %u.%u ran again (%s)", peer->index,
                       peer->inc, axon_status_string(status));
        return;
    }
    peer->state = SOAK_PEER_FAILED;
    ++r->stats.peer_failures;
    if (r->coll.team != NULL) {
        r->coll.broken = 1;
    }
    if (r->params->verbose) {
        printf("axon_soak rank %u.%u: rank %u.%u failed: %s\n", r->me, r->inc, peer->index,
               peer->inc, axon_status_string(status));
    }
}

static axon_status_t soak_wait(soak_rank_t *r, axon_request_h req)
{
    double        end = soak_now() + SOAK_CLOSE_SEC;
    axon_status_t status;

    while ((status = axon_request_test(req, NULL)) == AXON_INPROGRESS && soak_now() < end) {
        axon_worker_progress(r->worker);
    }
    if (status != AXON_INPROGRESS) {
        axon_request_free(req);
    }
    return status;
}

static void soak_peer_close(soak_rank_t *r, soak_peer_t *peer)
{
    axon_request_h req = NULL;

    if (peer->rkey != NULL) {
        axon_rkey_destroy(peer->rkey);
        peer->rkey = NULL;
    }
    if (peer->ep != NULL &&
        axon_ep_close_nb(peer->ep, AXON_EP_CLOSE_FORCE, &req) == AXON_INPROGRESS &&
        soak_wait(r, req) == AXON_INPROGRESS) {
        soak_rank_fail(r, "closing the endpoint to rank %u.%u did not end in %.0f s",
                       peer->index, peer->inc, SOAK_CLOSE_SEC);
    }
    peer->ep    = NULL;
    peer->state = SOAK_PEER_NONE;
}

/* Reach the incarnation the launcher announced. */
static void soak_peer_connect(soak_rank_t *r, soak_peer_t *peer)
{
    const soak_peer_info_t *info = peer->pending;
    const char             *addr = (const char *)(info + 1);
    axon_ep_params_t        params = {
        .address = addr, .address_length = info->address_length,
        .err_cb = soak_peer_err_cb, .err_cb_arg = peer,
    };
    axon_status_t           status;

    peer->inc     = peer->pending_inc;
    peer->window  = info->window;
    status        = axon_ep_create(r->worker, &params, &peer->ep);
    if (status != AXON_OK) {
        soak_rank_fail(r, "axon_ep_create to rank %u.%u failed: %s", peer->index, peer->inc,
                       axon_status_string(status));
        peer->ep = NULL;
        return;
    }
    peer->state     = SOAK_PEER_LIVE;
    peer->worker_id = axon_ep_peer_id(peer->ep);
    status = axon_ep_rkey_unpack(peer->ep, addr + info->address_length, info->rkey_length,
                                 &peer->rkey);
    if (status != AXON_OK) {
        soak_rank_fail(r, "unpacking rank %u.%u's key failed: %s", peer->index, peer->inc,
                       axon_status_string(status));
        peer->rkey = NULL;
    }
    soak_peer_reset_traffic(peer);
    free(peer->pending);
    peer->pending = NULL;
    if (r->params->verbose) {
        printf("axon_soak rank %u.%u: connected to rank %u.%u\n", r->me, r->inc, peer->index,
               peer->inc);
    }
}

/* Failed peers are closed once their requests ended (and the team is gone); announced
 * incarnations are reached; a view every peer of which is reached is reported. */
static void soak_peers_maintain(soak_rank_t *r)
{
    int      all_live = 1;
    unsigned i;

    for (i = 0; i < r->nranks; ++i) {
        soak_peer_t *peer = &r->peers[i];

        if (i == r->me) {
            continue;
        }
        if (peer->pending != NULL && peer->state == SOAK_PEER_LIVE &&
            soak_now() - peer->pending_since > r->params->detect_bound_sec) {
            soak_rank_fail(r, "rank %u.%u was killed %.0f s ago and no error reported it",
                           peer->index, peer->inc, r->params->detect_bound_sec);
            peer->state = SOAK_PEER_FAILED;
            r->coll.broken = (r->coll.team != NULL);
        }
        if (peer->state == SOAK_PEER_FAILED && !soak_peer_busy(peer) && r->coll.team == NULL) {
            soak_peer_close(r, peer);
        }
        if (peer->state == SOAK_PEER_NONE && peer->pending != NULL) {
            soak_peer_connect(r, peer);
        }
        all_live = all_live && peer->state == SOAK_PEER_LIVE && peer->pending == NULL;
    }
    if (all_live && r->connected_view != r->view) {
        soak_ctl_hdr_t hdr = { .type = SOAK_CTL_CONNECTED, .rank = r->me, .inc = r->inc,
                               .view = r->view };

        r->connected_view = r->view;
        soak_ctl_send(r->fd, &hdr, NULL);
    }
}

/* ---------------------------------------------------------------- control */

static void soak_send_drained(soak_rank_t *r)
{
    soak_ctl_hdr_t hdr = { .type = SOAK_CTL_DRAINED, .rank = r->me, .inc = r->inc,
                           .view = r->view, .length = sizeof(soak_drained_t) };
    soak_drained_t d;
    unsigned       i;

    for (i = 0; i < r->nranks; ++i) {
        if (i != r->me && soak_peer_busy(&r->peers[i])) {
            return;
        }
    }
    /* a collective still running waits for members that stopped before posting it: the
     * launcher's EXPECT has every member post up to the furthest one */
    memset(&d, 0, sizeof(d));
    for (i = 0; i < r->nranks; ++i) {
        d.sent_ok[i] = (r->peers[i].state == SOAK_PEER_LIVE) ? r->peers[i].sent_ok : 0;
    }
    d.coll_iters    = r->coll.iters;
    r->drained_sent = 1;
    soak_ctl_send(r->fd, &hdr, &d);
}

/* -1: the launcher is gone. */
static int soak_ctl_poll(soak_rank_t *r)
{
    struct pollfd  pfd = { .fd = r->fd, .events = POLLIN };
    soak_ctl_hdr_t hdr;
    void          *payload;
    soak_peer_t   *peer;

    while (poll(&pfd, 1, 0) > 0) {
        if (soak_ctl_recv(r->fd, &hdr, &payload) != 0) {
            return -1;
        }
        switch (hdr.type) {
        case SOAK_CTL_PEER:
            if (hdr.rank >= r->nranks || hdr.rank == r->me) {
                soak_rank_fail(r, "the launcher announced rank %u", hdr.rank);
                break;
            }
            peer = &r->peers[hdr.rank];
            free(peer->pending);
            peer->pending        = payload;
            peer->pending_length = hdr.length;
            peer->pending_inc    = hdr.inc;
            peer->pending_since  = soak_now();
            payload              = NULL;
            r->view              = hdr.view;
            break;
        case SOAK_CTL_GO:
            r->coll.want    = 1;
            r->coll.go_view = hdr.view;
            break;
        case SOAK_CTL_STOP:
            r->phase        = SOAK_DRAIN;
            r->coll.limit   = r->coll.iters;
            break;
        case SOAK_CTL_EXPECT:
            if (hdr.length == sizeof(r->expect)) {
                memcpy(&r->expect, payload, sizeof(r->expect));
            }
            r->phase       = SOAK_FINAL;
            r->coll.limit  = r->expect.coll_iters;
            r->final_since = soak_now();
            break;
        case SOAK_CTL_EXIT:
            r->phase = SOAK_EXIT;
            break;
        default:
            soak_rank_fail(r, "unknown control message %u", hdr.type);
        }
        free(payload);
    }
    return 0;
}

/* ---------------------------------------------------------------- time and memory */

static uint64_t soak_rss(void)
{
    unsigned long size, resident;
    FILE         *f = fopen("/proc/self/statm", "r");
    int           n;

    if (f == NULL) {
        return 0;
    }
    n = fscanf(f, "%lu %lu", &size, &resident);
    fclose(f);
    return (n == 2) ? (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

/* Once a second: the RSS series, and requests in flight past the bound (lost). */
static void soak_periodic(soak_rank_t *r)
{
    double   now = soak_now();
    uint64_t rss;
    unsigned i, j;

    if (now < r->next_sample) {
        return;
    }
    r->next_sample = now + 1.0;
    rss            = soak_rss();
    if (now - r->start >= r->params->warmup_sec) {
        if (r->stats.rss_samples++ == 0) {
            r->stats.rss_warm = rss;
        }
        r->stats.rss_last = rss;
        r->stats.rss_max  = (rss > r->stats.rss_max) ? rss : r->stats.rss_max;
    }
    for (i = 0; i < r->nranks; ++i) {
        soak_req_t *slots[SOAK_SEND_DEPTH + 1];

        for (j = 0; j < SOAK_SEND_DEPTH; ++j) {
            slots[j] = &r->peers[i].sends[j].req;
        }
        slots[SOAK_SEND_DEPTH] = &r->peers[i].rma.req;
        for (j = 0; j <= SOAK_SEND_DEPTH; ++j) {
            if (slots[j]->busy && !slots[j]->done &&
                now - slots[j]->issued > r->params->req_bound_sec) {
                soak_rank_fail(r, "a request to rank %u.%u is lost (in flight %.0f s)", i,
                               r->peers[i].inc, now - slots[j]->issued);
                slots[j]->issued = 1e30;  /* once */
            }
        }
    }
}

/* ---------------------------------------------------------------- the end */

static int soak_final_ready(soak_rank_t *r)
{
    unsigned i;

    if (soak_now() - r->final_since > r->params->req_bound_sec) {
        return 1;  /* the checks say what is missing */
    }
    for (i = 0; i < r->nranks; ++i) {
        if (i != r->me && r->expect.expect[i] > 0 &&
            (r->peers[i].rx_inc != (int)r->expect.final_inc[i] ||
             r->rx_count[i] < r->expect.expect[i])) {
            return 0;
        }
    }
    /* the last view's team formed (the others wait for us in it), its collectives done */
    return r->coll.broken || (!r->coll.want && r->coll.ready && !r->coll.running &&
                              r->coll.iters >= r->coll.limit);
}

static void soak_final_checks(soak_rank_t *r)
{
    const soak_params_t *p = r->params;
    uint64_t             got, bound;
    unsigned             i, j;

    for (i = 0; i < r->nranks; ++i) {
        soak_peer_t *peer = &r->peers[i];

        if (i == r->me) {
            continue;
        }
        got = (peer->rx_inc == (int)r->expect.final_inc[i]) ? r->rx_count[i] : 0;
        if (got != r->expect.expect[i]) {
            soak_rank_fail(r, "received %llu messages from rank %u.%u, which sent %llu",
                           (unsigned long long)got, i, r->expect.final_inc[i],
                           (unsigned long long)r->expect.expect[i]);
        }
        if (peer->state != SOAK_PEER_LIVE || peer->inc != r->expect.final_inc[i]) {
            soak_rank_fail(r, "rank %u.%u is not reached at the end", i,
                           r->expect.final_inc[i]);
        }
        if (peer->gap_inc_max >= (int)r->expect.final_inc[i]) {
            soak_rank_fail(r, "messages from rank %u.%u, which was never killed, are missing",
                           i, r->expect.final_inc[i]);
        }
        if (peer->err_inc_max >= (int)r->expect.final_inc[i]) {
            soak_rank_fail(r, "requests to rank %u.%u, which was never killed, failed", i,
                           r->expect.final_inc[i]);
        }
        for (j = 0; j < r->recv_err_count; ++j) {
            if (peer->state == SOAK_PEER_LIVE && r->recv_err_ids[j] == peer->worker_id) {
                soak_rank_fail(r, "a receive of rank %u.%u's message failed", i, peer->inc);
            }
        }
    }
    if (r->coll.team == NULL || !r->coll.ready || r->coll.broken ||
        r->coll.iters != r->coll.limit) {
        soak_rank_fail(r, "the last team did %llu of %llu collectives (team %s)",
                       (unsigned long long)r->coll.iters, (unsigned long long)r->coll.limit,
                       (r->coll.team == NULL) ? "gone" : r->coll.broken ? "broken" :
                       r->coll.ready ? "ready" : "forming");
    }
    /* judged on the first incarnations, which lived the whole run through every kill (rank 0
     * always does); a restarted one is still filling its pools when the run ends */
    if (r->inc == 0 && r->stats.rss_samples >= 2) {
        bound = (uint64_t)(r->stats.rss_warm * p->rss_growth_pct / 100.0);
        if (bound < (uint64_t)(p->rss_growth_mib * 1048576.0)) {
            bound = (uint64_t)(p->rss_growth_mib * 1048576.0);
        }
        if (r->stats.rss_last > r->stats.rss_warm + bound) {
            soak_rank_fail(r, "RSS grew from %.1f MiB after warm-up to %.1f MiB (bound "
                           "+%.1f MiB)", r->stats.rss_warm / 1048576.0,
                           r->stats.rss_last / 1048576.0, bound / 1048576.0);
        }
    }
}

static void soak_send_final(soak_rank_t *r)
{
    soak_ctl_hdr_t hdr = { .type = SOAK_CTL_FINAL, .rank = r->me, .inc = r->inc,
                           .view = r->view, .length = sizeof(soak_stats_t) };

    soak_final_checks(r);
    r->final_sent = 1;
    soak_ctl_send(r->fd, &hdr, &r->stats);
}

/* Cancel the receives still posted and let them end. */
static void soak_recvs_cancel(soak_rank_t *r)
{
    double   end = soak_now() + SOAK_CLOSE_SEC;
    unsigned i, left;

    for (i = 0; i < SOAK_RECVS; ++i) {
        if (r->recvs[i].req.busy && !r->recvs[i].req.done) {
            axon_request_cancel(r->worker, r->recvs[i].handle);
        }
    }
    do {
        axon_worker_progress(r->worker);
        soak_recvs_handle(r);
        for (i = 0, left = 0; i < SOAK_RECVS; ++i) {
            left += r->recvs[i].req.busy;
        }
    } while (left > 0 && soak_now() < end);
    if (left > 0) {
        soak_rank_fail(r, "%u canceled receives did not end", left);
    }
}

/* ---------------------------------------------------------------- setup and main loop */

static int soak_rank_open(soak_rank_t *r)
{
    axon_context_params_t ctx = {
        .features = AXON_FEATURE_TAG | AXON_FEATURE_RMA | AXON_FEATURE_AMO | AXON_FEATURE_COLL,
    };
    axon_mem_map_params_t map = { .flags = AXON_MEM_MAP_ALLOCATE };
    soak_ctl_hdr_t        hdr = { .type = SOAK_CTL_JOIN, .rank = r->me, .inc = r->inc };
    soak_peer_info_t     *info;
    void                 *addr, *rkey, *window;
    size_t                addr_len, rkey_len;
    axon_status_t         status;
    int                   ret;

    map.length = (size_t)r->nranks * (SOAK_RMA_BLOCK + sizeof(uint64_t));
    if ((status = axon_init(&ctx, &r->context)) != AXON_OK ||
        (status = axon_worker_create(r->context, NULL, &r->worker)) != AXON_OK ||
        (status = axon_mem_map(r->context, &map, &r->memh)) != AXON_OK ||
        (status = axon_mem_query(r->memh, &window, &r->window_length)) != AXON_OK) {
        soak_rank_fail(r, "setting up Axon failed: %s", axon_status_string(status));
        return -1;
    }
    r->window = window;
    if ((status = axon_worker_get_address(r->worker, &addr, &addr_len)) != AXON_OK) {
        soak_rank_fail(r, "axon_worker_get_address failed: %s", axon_status_string(status));
        return -1;
    }
    if ((status = axon_rkey_pack(r->context, r->memh, &rkey, &rkey_len)) != AXON_OK) {
        axon_worker_release_address(r->worker, addr);
        soak_rank_fail(r, "axon_rkey_pack failed: %s", axon_status_string(status));
        return -1;
    }
    hdr.length = (uint32_t)(sizeof(*info) + addr_len + rkey_len);
    info       = malloc(hdr.length);
    if (info != NULL) {
        info->window         = (uint64_t)(uintptr_t)window;
        info->address_length = (uint32_t)addr_len;
        info->rkey_length    = (uint32_t)rkey_len;
        memcpy(info + 1, addr, addr_len);
        memcpy((char *)(info + 1) + addr_len, rkey, rkey_len);
    }
    axon_worker_release_address(r->worker, addr);
    axon_rkey_buffer_release(rkey);
    ret = (info != NULL) ? soak_ctl_send(r->fd, &hdr, info) : -1;
    free(info);
    return ret;
}

static void soak_rank_close(soak_rank_t *r)
{
    unsigned i;

    if (r->worker != NULL) {
        soak_recvs_cancel(r);
        soak_coll_destroy(r);
        for (i = 0; i < r->nranks; ++i) {
            if (i != r->me) {
                soak_peer_close(r, &r->peers[i]);
            }
            free(r->peers[i].pending);
        }
    }
    if (r->memh != NULL) {
        axon_mem_unmap(r->context, r->memh);
    }
    axon_worker_destroy(r->worker);
    axon_cleanup(r->context);
    soak_traffic_cleanup(r);
}

int soak_rank_main(const soak_params_t *params, int fd, unsigned rank, unsigned inc)
{
    static soak_rank_t rank_state;  /* large: receive slots, peers; one per process */
    soak_rank_t       *r = &rank_state;
    unsigned           i, spins = 0;

    memset(r, 0, sizeof(*r));
    r->params         = params;
    r->fd             = fd;
    r->me             = rank;
    r->inc            = inc;
    r->nranks         = params->ranks;
    r->connected_view = (unsigned)-1;
    r->view           = (unsigned)-1;
    r->rand_state     = params->seed ^ (rank * 7919u) ^ (inc * 104729u);
    r->start          = soak_now();
    r->coll.limit     = UINT64_MAX;
    for (i = 0; i < r->nranks; ++i) {
        r->peers[i].rank        = r;
        r->peers[i].index       = i;
        r->peers[i].err_inc_max = -1;
        r->peers[i].rx_inc      = -1;
        r->peers[i].gap_inc_max = -1;
    }
    if (soak_traffic_init(r) != 0) {
        soak_rank_fail(r, "out of memory");
        return 1;
    }
    if (soak_rank_open(r) != 0) {
        soak_rank_close(r);
        return 1;
    }
    soak_recvs_post(r);
    while (r->phase != SOAK_EXIT) {
        axon_worker_progress(r->worker);
        soak_recvs_handle(r);
        if ((++spins & 15) == 0 && soak_ctl_poll(r) != 0) {
            soak_rank_fail(r, "the launcher is gone");
            break;
        }
        for (i = 0; i < r->nranks; ++i) {
            if (i != r->me) {
                soak_peer_traffic(r, &r->peers[i]);
            }
        }
        soak_peers_maintain(r);
        soak_coll_step(r);
        soak_periodic(r);
        if (r->phase == SOAK_DRAIN && !r->drained_sent) {
            soak_send_drained(r);
        }
        if (r->phase == SOAK_FINAL && !r->final_sent && soak_final_ready(r)) {
            soak_send_final(r);
        }
    }
    soak_rank_close(r);
    return (r->stats.failures == 0) ? 0 : 1;
}
