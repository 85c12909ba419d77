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
#include "perf_peers.h"

#define PERF_EP_MEM_TAG 3

static size_t perf_ep_mem_heap(void)
{
    struct mallinfo2 mi = mallinfo2();

    return mi.uordblks + mi.hblkhd;
}

static int perf_ep_mem_send(perf_peers_t *m, unsigned i, const uint64_t *buf)
{
    axon_request_h req;

    return (perf_peers_send(m, i, buf, sizeof(*buf), PERF_EP_MEM_TAG, &req) != 0) ||
           (perf_peers_wait(m, req, NULL, "a send", i) != 0) ? -1 : 0;
}

/* Post a receive of peer i's message on worker w; *req_p NULL if it is there already. */
static int perf_ep_mem_recv(perf_peers_t *m, unsigned w, unsigned i, uint64_t *buf,
                            axon_request_h *req_p)
{
    return perf_peers_recv(m, w, i, buf, sizeof(*buf), PERF_EP_MEM_TAG, AXON_TAG_MASK_FULL,
                           NULL, req_p);
}

/* Client: connect to server worker i and exchange one message with it. */
static int perf_ep_mem_client_peer(perf_peers_t *m, unsigned i)
{
    uint64_t       out = i, in = 0;
    axon_request_h req;

    if ((perf_peers_connect(m, i) != 0) || (perf_ep_mem_recv(m, 0, i, &in, &req) != 0)) {
        return -1;
    }
    if ((perf_ep_mem_send(m, i, &out) != 0) || (perf_peers_wait(m, req, NULL, "the reply", i) != 0)) {
        return -1;
    }
    if (in != i) {
        fprintf(stderr, "axon_perf ep_mem client: peer %u answered %" PRIu64 "\n", i, in);
        return -1;
    }
    return 0;
}

/* Server: worker i waits for the client's message and answers it. */
static int perf_ep_mem_server_peer(perf_peers_t *m, unsigned i)
{
    uint64_t       in = UINT64_MAX;
    axon_request_h req;

    if ((perf_ep_mem_recv(m, i, i, &in, &req) != 0) ||
        (perf_peers_wait(m, req, NULL, "the client's message", i) != 0)) {
        return -1;
    }
    if (in != i) {
        fprintf(stderr, "axon_perf ep_mem server: worker %u got %" PRIu64 "\n", i, in);
        return -1;
    }
    return (perf_peers_connect(m, i) != 0) || (perf_ep_mem_send(m, i, &in) != 0) ? -1 : 0;
}

static void perf_ep_mem_result(const perf_peers_t *m, unsigned eps, size_t heap_before,
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
static int perf_ep_mem_client(perf_peers_t *m, unsigned n)
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

static int perf_ep_mem_server(perf_peers_t *m, unsigned n)
{
    unsigned i;

    for (i = 0; i <= n; ++i) {
        if (perf_ep_mem_server_peer(m, i) != 0) {
            return -1;
        }
    }
    return 0;
}

int perf_ep_mem_run(const perf_params_t *params, int fd, perf_role_t role)
{
    perf_peers_t m;
    unsigned     n   = (unsigned)params->iters;
    int          ret = -1;

    /* The first peer warms up. */
    if (perf_peers_open(&m, "ep_mem", role, fd, n + 1) == 0) {
        m.focus = 1;
        ret = (role == PERF_ROLE_CLIENT) ? perf_ep_mem_client(&m, n) : perf_ep_mem_server(&m, n);
        if (ret == 0) {
            ret = perf_peers_finish(&m);
        }
    }
    perf_peers_close(&m);
    return ret;
}
