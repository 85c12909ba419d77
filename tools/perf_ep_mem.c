/*
 * axon_perf -t ep_mem: how much library memory one more peer costs.
 *
 * The server hosts one worker per peer (plus one for warming up) in one
 * context; the client, with one worker, connects to each in turn and
 * exchanges one message both ways, so every endpoint is wired up the way a
 * talking peer's is (transport connection, peer record, reply path). The
 * client's heap growth (mallinfo2: bytes in use in every arena plus mmapped
 * chunks) over the measured peers, divided by their number, is the memory
 * per endpoint. Peers are done one at a time so that no request pool grows
 * with their number. Transport state a device keeps outside the heap would
 * not show; softib allocates its queues with malloc, so it does.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "axon.h"
#include "axon_perf.h"

#define PERF_EP_MEM_TAG      3
#define PERF_EP_MEM_WAIT_SEC 30   /* one peer's round trip, or one teardown */

/* One side of the test: the client has one worker, the server one per peer. */
typedef struct {
    perf_role_t     role;
    int             fd;
    axon_context_h  context;
    unsigned        num_workers;
    axon_worker_h  *workers;
    axon_ep_h      *eps;        /* client: to each server worker; server: back to the client */
    void          **addrs;      /* client: the server workers' addresses */
    size_t         *addr_lens;
    void           *peer_addr;  /* server: the client's */
    size_t          peer_len;
} perf_ep_mem_t;

static size_t perf_ep_mem_heap(void)
{
    struct mallinfo2 mi = mallinfo2();

    return mi.uordblks + mi.hblkhd;
}

static int perf_ep_mem_check(const perf_ep_mem_t *m, axon_status_t status, const char *what,
                             unsigned peer)
{
    if (status < 0) {
        fprintf(stderr, "axon_perf ep_mem %s: %s (peer %u) failed: %s\n",
                perf_role_name(m->role), what, peer, axon_status_string(status));
        return -1;
    }
    return 0;
}

static void perf_ep_mem_progress(perf_ep_mem_t *m)
{
    unsigned i;

    for (i = 0; i < m->num_workers; ++i) {
        axon_worker_progress(m->workers[i]);
    }
}

/* Progress every worker until req completes (NULL: done already). */
static int perf_ep_mem_wait(perf_ep_mem_t *m, axon_request_h req, const char *what,
                            unsigned peer)
{
    double        end = perf_now() + PERF_EP_MEM_WAIT_SEC;
    axon_status_t status;

    if (req == NULL) {
        return 0;
    }
    while ((status = axon_request_test(req, NULL)) == AXON_INPROGRESS) {
        perf_ep_mem_progress(m);
        if (perf_now() > end) {
            fprintf(stderr, "axon_perf ep_mem %s: %s (peer %u) did not complete in %d s\n",
                    perf_role_name(m->role), what, peer, PERF_EP_MEM_WAIT_SEC);
            return -1;  /* the request stays with its worker, reclaimed at destroy */
        }
    }
    axon_request_free(req);
    return perf_ep_mem_check(m, status, what, peer);
}

static int perf_ep_mem_send(perf_ep_mem_t *m, unsigned i, const uint64_t *buf)
{
    axon_request_h req = NULL;
    axon_status_t  status;
    double         end = perf_now() + PERF_EP_MEM_WAIT_SEC;

    while ((status = axon_tag_send_nb(m->eps[i], buf, sizeof(*buf), PERF_EP_MEM_TAG, NULL,
                                      &req)) == AXON_ERR_NO_RESOURCE) {
        perf_ep_mem_progress(m);  /* not connected yet, or queues full */
        if (perf_now() > end) {
            return perf_ep_mem_check(m, status, "axon_tag_send_nb", i);
        }
    }
    if (perf_ep_mem_check(m, status, "axon_tag_send_nb", i) != 0) {
        return -1;
    }
    return perf_ep_mem_wait(m, (status == AXON_INPROGRESS) ? req : NULL, "a send", i);
}

/* Post a receive of peer i's message on worker w; *req_p NULL if it is there already. */
static int perf_ep_mem_recv(perf_ep_mem_t *m, unsigned w, unsigned i, uint64_t *buf,
                            axon_request_h *req_p)
{
    axon_request_h req = NULL;
    axon_status_t  status;

    status = axon_tag_recv_nb(m->workers[w], buf, sizeof(*buf), PERF_EP_MEM_TAG,
                              AXON_TAG_MASK_FULL, NULL, &req);
    if (perf_ep_mem_check(m, status, "axon_tag_recv_nb", i) != 0) {
        return -1;
    }
    *req_p = (status == AXON_INPROGRESS) ? req : NULL;
    return 0;
}

static int perf_ep_mem_connect(perf_ep_mem_t *m, unsigned w, unsigned i, const void *addr,
                               size_t len)
{
    axon_ep_params_t params = { .address = addr, .address_length = len };

    return perf_ep_mem_check(m, axon_ep_create(m->workers[w], &params, &m->eps[i]),
                             "axon_ep_create", i);
}

/* Client: connect to server worker i and exchange one message with it. */
static int perf_ep_mem_client_peer(perf_ep_mem_t *m, unsigned i)
{
    uint64_t       out = i, in = 0;
    axon_request_h req;

    if ((perf_ep_mem_connect(m, 0, i, m->addrs[i], m->addr_lens[i]) != 0) ||
        (perf_ep_mem_recv(m, 0, i, &in, &req) != 0)) {
        return -1;
    }
    if ((perf_ep_mem_send(m, i, &out) != 0) || (perf_ep_mem_wait(m, req, "the reply", i) != 0)) {
        return -1;
    }
    if (in != i) {
        fprintf(stderr, "axon_perf ep_mem client: peer %u answered %" PRIu64 "\n", i, in);
        return -1;
    }
    return 0;
}

/* Server: worker i waits for the client's message and answers it. */
static int perf_ep_mem_server_peer(perf_ep_mem_t *m, unsigned i)
{
    uint64_t       in = UINT64_MAX;
    axon_request_h req;

    if ((perf_ep_mem_recv(m, i, i, &in, &req) != 0) ||
        (perf_ep_mem_wait(m, req, "the client's message", i) != 0)) {
        return -1;
    }
    if (in != i) {
        fprintf(stderr, "axon_perf ep_mem server: worker %u got %" PRIu64 "\n", i, in);
        return -1;
    }
    return (perf_ep_mem_connect(m, i, i, m->peer_addr, m->peer_len) != 0) ||
           (perf_ep_mem_send(m, i, &in) != 0) ? -1 : 0;
}

static void perf_ep_mem_result(const perf_ep_mem_t *m, unsigned eps, size_t heap_before,
                               size_t heap_after, double seconds)
{
    axon_ep_attr_t attr;
    long long      growth = (long long)heap_after - (long long)heap_before;

    if (axon_ep_query(m->eps[eps], &attr) != AXON_OK) {  /* the last peer's */
        memset(&attr, 0, sizeof(attr));
        snprintf(attr.small_tl, sizeof(attr.small_tl), "?");
        snprintf(attr.bulk_tl, sizeof(attr.bulk_tl), "?");
    }
    printf("# axon_perf %s: test=ep_mem peers=%u (+1 warm-up) small lane %s/%s, bulk lane "
           "%s/%s\n", axon_get_version_string(), eps, attr.small_tl, attr.small_dev,
           attr.bulk_tl, attr.bulk_dev);
    printf("RESULT test=ep_mem tl=%s bulk_tl=%s eps=%u bytes_per_ep=%lld heap_bytes=%lld "
           "wireup_us=%.1f\n", attr.small_tl, attr.bulk_tl, eps, growth / (long long)eps,
           growth, seconds / eps * 1e6);
    fflush(stdout);
}

/* Client: warm up on peer 0, then measure peers 1..n. */
static int perf_ep_mem_client(perf_ep_mem_t *m, unsigned n)
{
    size_t   before, after;
    double   start;
    unsigned i;

    if (perf_ep_mem_client_peer(m, 0) != 0) {
        return -1;
    }
    start  = perf_now();
    before = perf_ep_mem_heap();
    for (i = 1; i <= n; ++i) {
        if (perf_ep_mem_client_peer(m, i) != 0) {
            return -1;
        }
    }
    after = perf_ep_mem_heap();
    perf_ep_mem_result(m, n, before, after, perf_now() - start);
    return 0;
}

static int perf_ep_mem_server(perf_ep_mem_t *m, unsigned n)
{
    unsigned i;

    for (i = 0; i <= n; ++i) {
        if (perf_ep_mem_server_peer(m, i) != 0) {
            return -1;
        }
    }
    return 0;
}

/* Close every endpoint, flushing (after a failure: at once). */
static void perf_ep_mem_close(perf_ep_mem_t *m, unsigned count, int force)
{
    axon_request_h req;
    axon_status_t  status;
    unsigned       i;

    for (i = 0; i < count; ++i) {
        if (m->eps[i] == NULL) {
            continue;
        }
        req    = NULL;
        status = axon_ep_close_nb(m->eps[i], force ? AXON_EP_CLOSE_FORCE : AXON_EP_CLOSE_FLUSH,
                                  &req);
        m->eps[i] = NULL;
        if (status == AXON_INPROGRESS) {
            perf_ep_mem_wait(m, req, "closing an endpoint", i);
        }
    }
}

/* Exchange addresses: the server sends each of its workers', the client its own each time. */
static int perf_ep_mem_addresses(perf_ep_mem_t *m, unsigned count)
{
    void    *addr, *peer;
    size_t   len, peer_len;
    unsigned i;
    int      ret;

    for (i = 0; i < count; ++i) {
        axon_worker_h w = m->workers[(m->role == PERF_ROLE_CLIENT) ? 0 : i];

        if (perf_ep_mem_check(m, axon_worker_get_address(w, &addr, &len),
                              "axon_worker_get_address", i) != 0) {
            return -1;
        }
        ret = perf_exchange_address(m->fd, addr, len, &peer, &peer_len);
        axon_worker_release_address(w, addr);
        if (ret != 0) {
            return -1;
        }
        if (m->role == PERF_ROLE_CLIENT) {
            m->addrs[i]     = peer;
            m->addr_lens[i] = peer_len;
        } else if (m->peer_addr == NULL) {
            m->peer_addr = peer;
            m->peer_len  = peer_len;
        } else {
            free(peer);
        }
    }
    return 0;
}

int perf_ep_mem_run(const perf_params_t *params, int fd, perf_role_t role)
{
    axon_context_params_t ctx_params = { .features = AXON_FEATURE_TAG };
    perf_ep_mem_t         m          = { .role = role, .fd = fd };
    unsigned              n          = (unsigned)params->iters;
    unsigned              count      = n + 1;  /* the first peer warms up */
    unsigned              i;
    int                   ret        = -1;

    m.num_workers = (role == PERF_ROLE_CLIENT) ? 1 : count;
    m.workers     = calloc(m.num_workers, sizeof(*m.workers));
    m.eps         = calloc(count, sizeof(*m.eps));
    m.addrs       = calloc(count, sizeof(*m.addrs));
    m.addr_lens   = calloc(count, sizeof(*m.addr_lens));
    if (!m.workers || !m.eps || !m.addrs || !m.addr_lens) {
        fprintf(stderr, "axon_perf ep_mem: out of memory for %u peers\n", n);
        goto out_free;
    }
    if (perf_ep_mem_check(&m, axon_init(&ctx_params, &m.context), "axon_init", 0) != 0) {
        goto out_free;
    }
    for (i = 0; i < m.num_workers; ++i) {
        if (perf_ep_mem_check(&m, axon_worker_create(m.context, NULL, &m.workers[i]),
                              "axon_worker_create", i) != 0) {
            goto out_destroy;
        }
    }
    if (perf_ep_mem_addresses(&m, count) != 0) {
        goto out_destroy;
    }

    ret = (role == PERF_ROLE_CLIENT) ? perf_ep_mem_client(&m, n) : perf_ep_mem_server(&m, n);
    /* Both sides are done with traffic before either closes, and both closed before
     * either worker goes away. */
    if ((ret != 0) || (perf_sync(m.fd, m.workers, m.num_workers) != 0)) {
        ret = -1;
        goto out_destroy;
    }
    perf_ep_mem_close(&m, count, 0);
    ret = perf_sync(m.fd, m.workers, m.num_workers);

out_destroy:
    perf_ep_mem_close(&m, count, 1);
    for (i = 0; i < m.num_workers; ++i) {
        axon_worker_destroy(m.workers[i]);  /* NULL is fine */
    }
    axon_cleanup(m.context);
out_free:
    for (i = 0; (m.addrs != NULL) && (i < count); ++i) {
        free(m.addrs[i]);
    }
    free(m.peer_addr);
    free(m.addr_lens);
    free(m.addrs);
    free(m.eps);
    free(m.workers);
    return ret;
}
