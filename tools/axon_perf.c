/*
 * axon_perf: tag-matched latency and bandwidth benchmark over the public API.
 *
 * Two processes, a client and a server, each with its own context, worker and
 * endpoint. They exchange worker addresses over a stream socket (a socketpair
 * in --local mode, a TCP connection between hosts otherwise) and use the same
 * socket to synchronise around setup and teardown and to notice a dead peer.
 * Across hosts the client first sends the test parameters, so the server is
 * started with nothing but a port. The client measures and prints one RESULT
 * line per message size.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "axon.h"
#include "axon_perf.h"

const char *perf_test_names[PERF_TEST_LAST] = {
    [PERF_TEST_TAG_LAT] = "tag_lat",
    [PERF_TEST_TAG_BW]  = "tag_bw",
    [PERF_TEST_EP_MEM]  = "ep_mem",
    [PERF_TEST_TAG_FANIN]  = "tag_fanin",
    [PERF_TEST_TAG_FANOUT] = "tag_fanout",
    [PERF_TEST_PUT_LAT] = "put_lat",
    [PERF_TEST_PUT_BW]  = "put_bw",
    [PERF_TEST_GET_LAT] = "get_lat",
    [PERF_TEST_GET_BW]  = "get_bw",
    [PERF_TEST_AMO_LAT] = "amo_lat",
    [PERF_TEST_AMO_BW]  = "amo_bw",
    [PERF_TEST_COLL_BARRIER]   = "coll_barrier",
    [PERF_TEST_COLL_BCAST]     = "coll_bcast",
    [PERF_TEST_COLL_REDUCE]    = "coll_reduce",
    [PERF_TEST_COLL_ALLREDUCE] = "coll_allreduce",
    [PERF_TEST_COLL_ALLGATHER] = "coll_allgather",
    [PERF_TEST_COLL_ALLTOALL]  = "coll_alltoall",
};

typedef struct {
    const perf_params_t *params;
    perf_role_t          role;
    int                  fd;       /* to the peer process */
    axon_context_h       context;
    axon_worker_h        worker;
    axon_ep_h            ep;
    axon_ep_attr_t       attr;
    unsigned             nslots;   /* buffers of slot_size each, per direction */
    size_t               max_size; /* the largest message (packed bytes) */
    size_t               slot_size; /* the largest span a message covers */
    perf_layout_t        lay;      /* -D: this size's layout, both directions */
    perf_layout_t       *data;     /* &lay, or NULL: contiguous (fill and verify) */
    const axon_layout_t *layout;   /* &lay.layout, or NULL: contiguous */
    uint8_t             *sbuf;
    uint8_t             *rbuf;
    axon_request_h      *reqs;     /* one per window slot */
    axon_tag_recv_info_t info;
} perf_ctx_t;

typedef struct {
    double elapsed;   /* seconds, measured iterations only */
} perf_result_t;

pid_t    perf_children[PERF_COLL_MAX_NP];
unsigned perf_num_children;

/* ------------------------------------------------------------------ helpers */

double perf_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const char *perf_role_name(perf_role_t role)
{
    return (role == PERF_ROLE_CLIENT) ? "client" : "server";
}

static uint8_t perf_pattern(uint64_t seed, size_t i)
{
    return (uint8_t)(seed * 131 + i * 7 + (i >> 8) + 1);
}

void perf_fill(uint8_t *buf, size_t length, uint64_t seed)
{
    size_t i;

    for (i = 0; i < length; ++i) {
        buf[i] = perf_pattern(seed, i);
    }
}

int perf_verify(perf_role_t role, const uint8_t *buf, size_t length, uint64_t seed,
                const char *what)
{
    size_t i;

    for (i = 0; i < length; ++i) {
        if (buf[i] != perf_pattern(seed, i)) {
            fprintf(stderr, "axon_perf %s: %s %" PRIu64 ": data mismatch at offset %zu of %zu: "
                    "got 0x%02x, expected 0x%02x\n", perf_role_name(role), what, seed, i, length,
                    buf[i], perf_pattern(seed, i));
            return -1;
        }
    }
    return 0;
}

/* --------------------------------------------------------- socket to the peer */

int perf_sock_write(int fd, const void *data, size_t length)
{
    const char *p = data;
    ssize_t     ret;

    while (length > 0) {
        ret = send(fd, p, length, MSG_NOSIGNAL);
        if (ret < 0) {
            if (errno == EINTR) {
                continue;
            }
            fprintf(stderr, "axon_perf: write to peer failed: %s\n", strerror(errno));
            return -1;
        }
        p      += ret;
        length -= (size_t)ret;
    }
    return 0;
}

int perf_sock_read(int fd, void *data, size_t length)
{
    char   *p = data;
    ssize_t ret;

    while (length > 0) {
        ret = recv(fd, p, length, 0);
        if (ret < 0) {
            if (errno == EINTR) {
                continue;
            }
            if ((errno == EAGAIN) || (errno == EWOULDBLOCK)) {
                /* SO_RCVTIMEO of a TCP control connection ran out */
                fprintf(stderr, "axon_perf: peer did not answer within %d s\n",
                        PERF_HANDSHAKE_SEC);
                return -1;
            }
            fprintf(stderr, "axon_perf: read from peer failed: %s\n", strerror(errno));
            return -1;
        }
        if (ret == 0) {
            fprintf(stderr, "axon_perf: peer closed the connection (did it exit?)\n");
            return -1;
        }
        p      += ret;
        length -= (size_t)ret;
    }
    return 0;
}

/*
 * The peer still runs if its end of the socket is open. Pending data means
 * it is alive and already further ahead (e.g. at the final synchronisation).
 */
int perf_peer_alive(int fd)
{
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    char          c;
    ssize_t       ret;

    if (poll(&pfd, 1, 0) <= 0) {
        return 1;
    }
    ret = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (ret > 0) {
        return 1;
    }
    return (ret < 0) && ((errno == EAGAIN) || (errno == EWOULDBLOCK) || (errno == EINTR));
}

int perf_write_address(int fd, const void *address, size_t length)
{
    uint64_t len64 = length;

    return ((perf_sock_write(fd, &len64, sizeof(len64)) != 0) ||
            (perf_sock_write(fd, address, length) != 0)) ? -1 : 0;
}

int perf_read_address(int fd, void **address_p, size_t *length_p)
{
    uint64_t len64;
    void    *address;

    if (perf_sock_read(fd, &len64, sizeof(len64)) != 0) {
        return -1;
    }
    if ((len64 == 0) || (len64 > PERF_MAX_ADDR_LEN)) {
        fprintf(stderr, "axon_perf: peer sent an invalid address length %" PRIu64 "\n",
                len64);
        return -1;
    }
    address = malloc(len64);
    if (address == NULL) {
        fprintf(stderr, "axon_perf: failed to allocate %" PRIu64 " bytes\n", len64);
        return -1;
    }
    if (perf_sock_read(fd, address, len64) != 0) {
        free(address);
        return -1;
    }
    *address_p = address;
    *length_p  = len64;
    return 0;
}

/* Works on any connected stream socket, local or remote. */
int perf_exchange_address(int fd, const void *address, size_t length,
                          void **peer_address_p, size_t *peer_length_p)
{
    return ((perf_write_address(fd, address, length) != 0) ||
            (perf_read_address(fd, peer_address_p, peer_length_p) != 0)) ? -1 : 0;
}

/*
 * Barrier over the socket. Keeps progressing the workers while waiting, since
 * the peer may need our progress to finish (e.g. flushing its endpoint).
 */
int perf_sync(int fd, axon_worker_h const *workers, unsigned count)
{
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    char          c   = 's';
    unsigned      i;
    int           ret;

    if (perf_sock_write(fd, &c, 1) != 0) {
        return -1;
    }
    for (;;) {
        ret = poll(&pfd, 1, (count == 0) ? -1 : 0);
        if (ret > 0) {
            return perf_sock_read(fd, &c, 1);
        }
        if ((ret < 0) && (errno != EINTR)) {
            fprintf(stderr, "axon_perf: poll failed: %s\n", strerror(errno));
            return -1;
        }
        for (i = 0; i < count; ++i) {
            axon_worker_progress(workers[i]);
        }
    }
}

/* ------------------------------------------------------------- requests */

int perf_check_status(perf_role_t role, axon_status_t status, const char *what)
{
    if (status < 0) {
        fprintf(stderr, "axon_perf %s: %s failed: %s\n", perf_role_name(role), what,
                axon_status_string(status));
        return -1;
    }
    return 0;
}

/*
 * Complete one operation: nothing to do if it finished at once (req NULL),
 * otherwise progress until it does, checking now and then that the peer is
 * still there so a dead peer is an error rather than a hang.
 */
static int perf_wait(perf_ctx_t *ctx, axon_request_h req, axon_tag_recv_info_t *info,
                     const char *what)
{
    axon_status_t status;
    unsigned      spins = 0;

    if (req == NULL) {
        return 0;
    }

    while ((status = axon_request_test(req, info)) == AXON_INPROGRESS) {
        axon_worker_progress(ctx->worker);
        if ((++spins % PERF_LIVENESS_SPINS) == 0 && !perf_peer_alive(ctx->fd)) {
            fprintf(stderr, "axon_perf %s: peer exited while waiting for %s\n",
                    perf_role_name(ctx->role), what);
            axon_request_free(req);
            return -1;
        }
    }

    axon_request_free(req);
    return perf_check_status(ctx->role, status, what);
}

/* Start a send; *req_p is NULL if it completed at once. */
static int perf_send(perf_ctx_t *ctx, const void *buf, size_t length, axon_tag_t tag,
                     const axon_layout_t *layout, axon_request_h *req_p)
{
    axon_request_param_t param = { .flags = layout ? AXON_REQ_FLAG_LAYOUT : 0,
                                   .layout = layout };
    axon_request_h       req   = NULL;
    axon_status_t        status;
    unsigned             spins = 0;

    for (;;) {
        status = axon_tag_send_nb(ctx->ep, buf, length, tag, layout ? &param : NULL, &req);
        if (status != AXON_ERR_NO_RESOURCE) {
            break;
        }
        /* Transport queues are full: let them drain and retry. */
        axon_worker_progress(ctx->worker);
        if ((++spins % PERF_LIVENESS_SPINS) == 0 && !perf_peer_alive(ctx->fd)) {
            fprintf(stderr, "axon_perf %s: peer exited while sending\n",
                    perf_role_name(ctx->role));
            return -1;
        }
    }

    if (perf_check_status(ctx->role, status, "axon_tag_send_nb") != 0) {
        return -1;
    }
    *req_p = (status == AXON_INPROGRESS) ? req : NULL;
    return 0;
}

/* Start a receive; *req_p is NULL if it completed at once (info then filled). */
static int perf_recv(perf_ctx_t *ctx, void *buf, size_t length, axon_tag_t tag,
                     const axon_layout_t *layout, axon_tag_recv_info_t *info,
                     axon_request_h *req_p)
{
    axon_request_param_t param = { .flags = layout ? AXON_REQ_FLAG_LAYOUT : 0,
                                   .recv_info = info, .layout = layout };
    axon_request_h       req   = NULL;
    axon_status_t        status;

    status = axon_tag_recv_nb(ctx->worker, buf, length, tag, AXON_TAG_MASK_FULL,
                              &param, &req);
    if (perf_check_status(ctx->role, status, "axon_tag_recv_nb") != 0) {
        return -1;
    }
    *req_p = (status == AXON_INPROGRESS) ? req : NULL;
    return 0;
}

/* Wait for a receive and check what arrived. */
static int perf_wait_recv(perf_ctx_t *ctx, axon_request_h req, axon_tag_recv_info_t *info,
                          size_t length, axon_tag_t tag)
{
    if (perf_wait(ctx, req, info, "a receive") != 0) {
        return -1;
    }
    if ((info->length != length) || (info->sender_tag != tag)) {
        fprintf(stderr, "axon_perf %s: received %zu bytes with tag %" PRIu64
                ", expected %zu bytes with tag %" PRIu64 "\n", perf_role_name(ctx->role),
                info->length, (uint64_t)info->sender_tag, length, (uint64_t)tag);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------- tag_lat */

/*
 * Ping-pong. The server replies from its send buffer, as ucx_perftest and
 * fi_pingpong do: echoing from the buffer a large message just landed in
 * would make the next transfer read lines still dirty in the other core's
 * cache, a cost of the benchmark and not of the transport (it made 1 MiB
 * over shm CMA look 1.7x slower). Receives alternate between two buffers so
 * the next receive can be posted before the reply goes out. With -c both
 * sides fill their message with the iteration's pattern and check the other's.
 */
static int perf_tag_lat(perf_ctx_t *ctx, size_t size, perf_result_t *result)
{
    const perf_params_t *params = ctx->params;
    unsigned long        total  = params->warmup + params->iters;
    axon_tag_recv_info_t *info  = &ctx->info;
    axon_request_h       sreq, rreq;
    unsigned long        i;
    double               t0     = perf_now();
    uint8_t             *rbuf;

    if (ctx->role == PERF_ROLE_CLIENT) {
        for (i = 0; i < total; ++i) {
            if (i == params->warmup) {
                t0 = perf_now();
            }
            if (params->check) {
                perf_layout_fill(ctx->data, ctx->sbuf, size, i);
            }
            if ((perf_recv(ctx, ctx->rbuf, size, PERF_TAG_DATA, ctx->layout, info,
                           &rreq) != 0) ||
                (perf_send(ctx, ctx->sbuf, size, PERF_TAG_DATA, ctx->layout, &sreq) != 0) ||
                (perf_wait(ctx, sreq, NULL, "a send") != 0) ||
                (perf_wait_recv(ctx, rreq, info, size, PERF_TAG_DATA) != 0)) {
                return -1;
            }
            if (params->check &&
                (perf_layout_verify(ctx->data, ctx->role, ctx->rbuf, size, i, "message") != 0)) {
                return -1;
            }
        }
        result->elapsed = perf_now() - t0;
        return 0;
    }

    if (perf_recv(ctx, ctx->rbuf, size, PERF_TAG_DATA, ctx->layout, info, &rreq) != 0) {
        return -1;
    }
    for (i = 0; i < total; ++i) {
        rbuf = ctx->rbuf + (i % 2) * ctx->slot_size;
        if (perf_wait_recv(ctx, rreq, info, size, PERF_TAG_DATA) != 0) {
            return -1;
        }
        if (params->check &&
            (perf_layout_verify(ctx->data, ctx->role, rbuf, size, i, "message") != 0)) {
            return -1;
        }
        if ((i + 1 < total) &&
            (perf_recv(ctx, ctx->rbuf + ((i + 1) % 2) * ctx->slot_size, size,
                       PERF_TAG_DATA, ctx->layout, info, &rreq) != 0)) {
            return -1;
        }
        if (params->check) {
            perf_layout_fill(ctx->data, ctx->sbuf, size, i);
        }
        if ((perf_send(ctx, ctx->sbuf, size, PERF_TAG_DATA, ctx->layout, &sreq) != 0) ||
            (perf_wait(ctx, sreq, NULL, "a send") != 0)) {
            return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------- tag_bw */

/*
 * Windows of messages, each window acknowledged by the server with a 0-byte
 * message, so neither side ever has more than one window in flight. Without
 * -c every message of a window uses the same buffer (content is not checked).
 */
static int perf_tag_bw(perf_ctx_t *ctx, size_t size, perf_result_t *result)
{
    const perf_params_t  *params = ctx->params;
    unsigned long         total  = params->warmup + params->iters;
    axon_tag_recv_info_t *infos  = NULL;
    axon_tag_recv_info_t  ack_info;
    axon_request_h        ack_req;
    unsigned long         done, seq;
    unsigned              w, k, slot;
    double                t0     = perf_now();
    int                   ret    = -1;

    if (ctx->role == PERF_ROLE_SERVER) {
        infos = calloc(params->window, sizeof(*infos));
        if (infos == NULL) {
            fprintf(stderr, "axon_perf server: out of memory\n");
            return -1;
        }
    }

    for (done = 0; done < total; done += w) {
        if (done == params->warmup) {
            t0 = perf_now();
        }
        w = ((total - done) < params->window) ? (unsigned)(total - done) : params->window;

        if (ctx->role == PERF_ROLE_CLIENT) {
            if (perf_recv(ctx, ctx->rbuf, 0, PERF_TAG_ACK, NULL, &ack_info, &ack_req) != 0) {
                goto out;
            }
            for (k = 0; k < w; ++k) {
                seq  = done + k;
                slot = params->check ? k : 0;
                if (params->check) {
                    perf_layout_fill(ctx->data, ctx->sbuf + slot * ctx->slot_size, size, seq);
                }
                if (perf_send(ctx, ctx->sbuf + slot * ctx->slot_size, size, PERF_TAG_DATA,
                              ctx->layout, &ctx->reqs[k]) != 0) {
                    goto out_cancel;
                }
            }
            for (k = 0; k < w; ++k) {
                if (perf_wait(ctx, ctx->reqs[k], NULL, "a send") != 0) {
                    ctx->reqs[k] = NULL;
                    goto out_cancel;
                }
                ctx->reqs[k] = NULL;
            }
            if (perf_wait_recv(ctx, ack_req, &ack_info, 0, PERF_TAG_ACK) != 0) {
                goto out;
            }
        } else {
            /* Receives with one tag match in post order, so slot k gets
             * message done + k. */
            for (k = 0; k < w; ++k) {
                slot = params->check ? k : 0;
                if (perf_recv(ctx, ctx->rbuf + slot * ctx->slot_size, size, PERF_TAG_DATA,
                              ctx->layout, &infos[k], &ctx->reqs[k]) != 0) {
                    goto out_cancel;
                }
            }
            for (k = 0; k < w; ++k) {
                if (perf_wait_recv(ctx, ctx->reqs[k], &infos[k], size, PERF_TAG_DATA) != 0) {
                    ctx->reqs[k] = NULL;
                    goto out_cancel;
                }
                ctx->reqs[k] = NULL;
                if (params->check &&
                    (perf_layout_verify(ctx->data, ctx->role, ctx->rbuf + k * ctx->slot_size,
                                        size, done + k, "message") != 0)) {
                    goto out_cancel;
                }
            }
            if ((perf_send(ctx, ctx->sbuf, 0, PERF_TAG_ACK, NULL, &ack_req) != 0) ||
                (perf_wait(ctx, ack_req, NULL, "the window ack") != 0)) {
                goto out;
            }
        }
    }

    result->elapsed = perf_now() - t0;
    ret = 0;
    goto out;

out_cancel:
    /* The run is failing; drop our hold on requests still outstanding. */
    for (k = 0; k < params->window; ++k) {
        if (ctx->reqs[k] != NULL) {
            axon_request_free(ctx->reqs[k]);
            ctx->reqs[k] = NULL;
        }
    }
out:
    free(infos);
    return ret;
}

/* ------------------------------------------------------------- driver */

const char *const perf_rmethod_names[PERF_RMETHOD_LAST] = {
    [PERF_RMETHOD_KEY] = "key", [PERF_RMETHOD_SEPARATE_PUTS] = "separate_puts",
    [PERF_RMETHOD_PACK_UNPACK] = "pack_unpack",
};

void perf_print_layout(const perf_params_t *params)
{
    char name[64];

    if (params->layout.kind != 0) {
        perf_layout_name(&params->layout, name, sizeof(name));
        printf(" layout=%s", name);
    }
    if (params->rlayout.kind != 0) {
        perf_layout_name(&params->rlayout, name, sizeof(name));
        printf(" rlayout=%s rmethod=%s", name, perf_rmethod_names[params->rmethod]);
    }
    printf("\n");
    fflush(stdout);
}

static void perf_print_result(const perf_ctx_t *ctx, size_t size, const perf_result_t *result)
{
    const perf_params_t *params  = ctx->params;
    double               elapsed = (result->elapsed > 0) ? result->elapsed : 1e-9;
    double               iters   = (double)params->iters;
    double               latency_us;
    const char          *tl;

    tl = (size <= ctx->attr.eager_short_max) ? ctx->attr.small_tl : ctx->attr.bulk_tl;
    if (params->test == PERF_TEST_TAG_LAT) {
        latency_us = elapsed / iters / 2 * 1e6;  /* half round trip */
    } else {
        latency_us = elapsed / iters * 1e6;      /* per message */
    }

    printf("RESULT test=%s tl=%s size=%zu iters=%lu latency_us=%.3f bandwidth_MBps=%.3f "
           "msgrate_Mps=%.3f", perf_test_names[params->test], tl, size, params->iters,
           latency_us, (double)size * iters / elapsed / 1e6, iters / elapsed / 1e6);
    perf_print_layout(params);
}

#define PERF_PAGE_SIZE 4096

static int perf_alloc_buffers(perf_ctx_t *ctx)
{
    const perf_params_t *params = ctx->params;
    unsigned             i;
    size_t               bytes;

    ctx->max_size  = 1;  /* never 0: keep distinct non-NULL buffers */
    ctx->slot_size = 1;
    for (i = 0; i < params->num_sizes; ++i) {
        if (params->sizes[i] > ctx->max_size) {
            ctx->max_size = params->sizes[i];
        }
        bytes = perf_layout_span(&params->layout, params->sizes[i]);
        if (bytes > ctx->slot_size) {
            ctx->slot_size = bytes;
        }
    }

    /* Two receive buffers for ping-pong; a window's worth when checking data. */
    ctx->nslots = (params->check && (params->window > 2)) ? params->window : 2;
    /* Page-aligned slots, as the OSU benchmarks' buffers: a 4 KiB piece that
     * straddles two pages costs cross-memory attach (and a NIC) twice the
     * page work, which would measure the allocator, not the transport. */
    if (ctx->slot_size > SIZE_MAX - PERF_PAGE_SIZE) {
        fprintf(stderr, "axon_perf: buffer size overflow\n");
        return -1;
    }
    ctx->slot_size = (ctx->slot_size + PERF_PAGE_SIZE - 1) / PERF_PAGE_SIZE * PERF_PAGE_SIZE;
    if (ctx->slot_size > SIZE_MAX / ctx->nslots) {
        fprintf(stderr, "axon_perf: buffer size overflow\n");
        return -1;
    }
    bytes     = ctx->slot_size * ctx->nslots;
    ctx->sbuf = aligned_alloc(PERF_PAGE_SIZE, bytes);
    ctx->rbuf = aligned_alloc(PERF_PAGE_SIZE, bytes);
    ctx->reqs = calloc(params->window, sizeof(*ctx->reqs));
    if ((ctx->sbuf == NULL) || (ctx->rbuf == NULL) || (ctx->reqs == NULL)) {
        fprintf(stderr, "axon_perf: failed to allocate 2 x %zu bytes of buffers\n", bytes);
        return -1;
    }

    for (i = 0; i < ctx->nslots; ++i) {
        perf_fill(ctx->sbuf + i * ctx->slot_size, ctx->slot_size, 0);
    }
    memset(ctx->rbuf, 0, bytes);
    return 0;
}

static int perf_close_ep(perf_ctx_t *ctx)
{
    axon_request_h req = NULL;
    axon_status_t  status;

    status  = axon_ep_close_nb(ctx->ep, AXON_EP_CLOSE_FLUSH, &req);
    ctx->ep = NULL;
    if (perf_check_status(ctx->role, status, "axon_ep_close_nb") != 0) {
        return -1;
    }
    return perf_wait(ctx, (status == AXON_INPROGRESS) ? req : NULL, NULL,
                     "the endpoint to close");
}

/* Everything one side does, from axon_init to axon_cleanup. */
int perf_run(const perf_params_t *params, int fd, perf_role_t role)
{
    axon_context_params_t ctx_params = { .features = AXON_FEATURE_TAG };
    perf_ctx_t            ctx        = { .params = params, .role = role, .fd = fd };
    void                 *address    = NULL;
    void                 *peer_address = NULL;
    size_t                address_length, peer_length;
    axon_ep_params_t      ep_params;
    perf_result_t         result     = { 0 };
    axon_status_t         status;
    unsigned              i;
    int                   ret        = -1;

    if (params->test == PERF_TEST_EP_MEM) {
        return perf_ep_mem_run(params, fd, role);
    }
    if (perf_test_is_fan(params->test)) {
        return perf_fan_run(params, fd, role, perf_test_names[params->test]);
    }
    if (perf_test_is_rma(params->test)) {
        return perf_rma_run(params, fd, role, perf_test_names[params->test]);
    }

    status = axon_init(&ctx_params, &ctx.context);
    if (perf_check_status(ctx.role, status, "axon_init") != 0) {
        return -1;
    }

    status = axon_worker_create(ctx.context, NULL, &ctx.worker);
    if (perf_check_status(ctx.role, status, "axon_worker_create") != 0) {
        goto out_cleanup;
    }

    status = axon_worker_get_address(ctx.worker, &address, &address_length);
    if (perf_check_status(ctx.role, status, "axon_worker_get_address") != 0) {
        goto out_destroy_worker;
    }

    if (perf_exchange_address(fd, address, address_length, &peer_address,
                              &peer_length) != 0) {
        goto out_release_address;
    }

    ep_params.address        = peer_address;
    ep_params.address_length = peer_length;
    status = axon_ep_create(ctx.worker, &ep_params, &ctx.ep);
    if (perf_check_status(ctx.role, status, "axon_ep_create") != 0) {
        goto out_free_peer;
    }

    status = axon_ep_query(ctx.ep, &ctx.attr);
    if ((perf_check_status(ctx.role, status, "axon_ep_query") != 0) ||
        (perf_alloc_buffers(&ctx) != 0)) {
        goto out_close_ep;
    }

    /* Both endpoints exist before any message flows. */
    if (perf_sync(ctx.fd, &ctx.worker, 1) != 0) {
        goto out_close_ep;
    }

    if (role == PERF_ROLE_CLIENT) {
        printf("# axon_perf %s: test=%s iters=%lu warmup=%lu window=%u check=%s\n",
               axon_get_version_string(), perf_test_names[params->test], params->iters,
               params->warmup, params->window, params->check ? "yes" : "no");
        printf("# lanes: small=%s/%s bulk=%s/%s eager_short_max=%zu\n",
               ctx.attr.small_tl, ctx.attr.small_dev, ctx.attr.bulk_tl, ctx.attr.bulk_dev,
               ctx.attr.eager_short_max);
        fflush(stdout);
    }

    for (i = 0; i < params->num_sizes; ++i) {
        alarm(PERF_TIMEOUT_SEC);
        if (params->layout.kind != 0) {
            /* gaps of this size's layout were pieces of an earlier one: zero them */
            perf_layout_free(&ctx.lay);
            memset(ctx.rbuf, 0, ctx.slot_size * ctx.nslots);
            if (perf_layout_build(&params->layout, params->sizes[i], &ctx.lay) != 0) {
                goto out_close_ep;
            }
            ctx.data   = &ctx.lay;
            ctx.layout = &ctx.lay.layout;
        }
        if (params->test == PERF_TEST_TAG_LAT) {
            ret = perf_tag_lat(&ctx, params->sizes[i], &result);
        } else {
            ret = perf_tag_bw(&ctx, params->sizes[i], &result);
        }
        if (ret != 0) {
            goto out_close_ep;
        }
        if (role == PERF_ROLE_CLIENT) {
            perf_print_result(&ctx, params->sizes[i], &result);
        }
    }

    /* All traffic is done on both sides before either endpoint closes, and
     * both flushes are done before either worker goes away. */
    ret = -1;
    if ((perf_sync(ctx.fd, &ctx.worker, 1) != 0) || (perf_close_ep(&ctx) != 0) ||
        (perf_sync(ctx.fd, &ctx.worker, 1) != 0)) {
        goto out_close_ep;
    }
    ret = 0;

out_close_ep:
    if (ctx.ep != NULL) {
        /* Error path: do not wait on a peer that may be gone. */
        axon_request_h req = NULL;
        if (axon_ep_close_nb(ctx.ep, AXON_EP_CLOSE_FORCE, &req) == AXON_INPROGRESS) {
            axon_request_free(req);
        }
    }
    perf_layout_free(&ctx.lay);
    free(ctx.reqs);
    free(ctx.rbuf);
    free(ctx.sbuf);
out_free_peer:
    free(peer_address);
out_release_address:
    axon_worker_release_address(ctx.worker, address);
out_destroy_worker:
    axon_worker_destroy(ctx.worker);
out_cleanup:
    axon_cleanup(ctx.context);
    return ret;
}

/* ------------------------------------------------------------- processes */

void perf_kill_children(void)
{
    unsigned i;

    for (i = 0; i < perf_num_children; ++i) {
        if (perf_children[i] > 0) {
            kill(perf_children[i], SIGKILL);
        }
    }
}

static void perf_alarm_handler(int sig)
{
    static const char msg_child[] = "axon_perf: timed out, killing the other processes\n";
    static const char msg[]       = "axon_perf: timed out\n";
    ssize_t           ret;

    (void)sig;
    if (perf_num_children > 0) {
        perf_kill_children();
        ret = write(STDERR_FILENO, msg_child, sizeof(msg_child) - 1);
    } else {
        ret = write(STDERR_FILENO, msg, sizeof(msg) - 1);
    }
    (void)ret;
    _exit(1);
}

void perf_set_alarm_handler(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = perf_alarm_handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
}

/*
 * Reap the child within a bounded time; 0 only if it exited with status 0.
 * quiet: the run already failed, so the child's own status adds nothing.
 */
int perf_wait_child(pid_t pid, unsigned timeout_sec, int quiet, const char *who)
{
    int      status;
    unsigned ms;
    pid_t    ret;

    for (ms = 0;; ms += 10) {
        ret = waitpid(pid, &status, WNOHANG);
        if (ret == pid) {
            break;
        }
        if ((ret < 0) && (errno != EINTR)) {
            fprintf(stderr, "axon_perf: waitpid failed: %s\n", strerror(errno));
            return -1;
        }
        if (ms >= timeout_sec * 1000) {
            fprintf(stderr, "axon_perf: %s did not exit in %u s, killing it\n", who,
                    timeout_sec);
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        usleep(10000);
    }

    if (WIFEXITED(status) && (WEXITSTATUS(status) == 0)) {
        return 0;
    }
    if (quiet) {
        return -1;
    }
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "axon_perf: %s killed by signal %d\n", who, WTERMSIG(status));
    } else {
        fprintf(stderr, "axon_perf: %s failed (exit status %d)\n", who, WEXITSTATUS(status));
    }
    return -1;
}

static int perf_run_local(const perf_params_t *params)
{
    pid_t parent = getpid();
    pid_t pid;
    int   sv[2];
    int   ret;

    /* Before fork and before any axon call: the library state must not be
     * shared between the two processes. */
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        fprintf(stderr, "axon_perf: socketpair failed: %s\n", strerror(errno));
        return -1;
    }

    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid < 0) {
        fprintf(stderr, "axon_perf: fork failed: %s\n", strerror(errno));
        close(sv[0]);
        close(sv[1]);
        return -1;
    }

    if (pid == 0) {
        close(sv[0]);
#ifdef __linux__
        prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
        if (getppid() != parent) {
            _exit(1);  /* the parent died before prctl took effect */
        }
        alarm(PERF_TIMEOUT_SEC);  /* default action terminates the process */
        ret = perf_run(params, sv[1], PERF_ROLE_SERVER);
        close(sv[1]);
        exit((ret == 0) ? 0 : 1);
    }

    close(sv[1]);
    perf_children[0]  = pid;
    perf_num_children = 1;
    perf_set_alarm_handler();
    alarm(PERF_TIMEOUT_SEC);

    ret = perf_run(params, sv[0], PERF_ROLE_CLIENT);
    close(sv[0]);  /* the server sees EOF if it is still waiting for us */

    /* If the client failed, the server sees EOF on the socket and gives up
     * by itself; the timeout is only a backstop. */
    alarm(0);
    if (perf_wait_child(pid, (ret == 0) ? PERF_CHILD_WAIT_SEC : PERF_CHILD_GRACE_SEC,
                        ret != 0, "server process") != 0) {
        ret = -1;
    }
    return ret;
}

int main(int argc, char **argv)
{
    perf_params_t params;
    int           ret;

    if (perf_parse_args(argc, argv, &params) != 0) {
        return 2;
    }

    /* A peer that dies must show up as an error on a write, not kill us. */
    signal(SIGPIPE, SIG_IGN);

    if (perf_test_is_coll(params.test)) {
        ret = perf_coll_run(&params);
    } else if (params.local) {
        ret = perf_run_local(&params);
    } else if (params.host != NULL) {
        ret = perf_run_client(&params);
    } else {
        ret = perf_run_server(&params);
    }
    return (ret == 0) ? 0 : 1;
}
