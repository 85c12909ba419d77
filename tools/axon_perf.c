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
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
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
static int perf_run(const perf_params_t *params, int fd, perf_role_t role)
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

/* ------------------------------------------------------------- across hosts */

/* Milliseconds left until deadline (a perf_now() value); -1 if no deadline. */
static int perf_ms_left(double deadline)
{
    double left;

    if (deadline <= 0) {
        return -1;
    }
    left = (deadline - perf_now()) * 1e3;
    return (left > 0) ? (int)left + 1 : 0;
}

static double perf_deadline(int wait_sec)
{
    return (wait_sec > 0) ? perf_now() + wait_sec : 0;
}

/*
 * Settings of a connected control socket: small messages go out at once, and
 * a peer that stops answering during the handshake is an error, not a hang.
 * (Later reads all follow a poll, so the receive timeout does not limit runs.)
 */
static void perf_sock_setup(int fd)
{
    struct timeval tv  = { .tv_sec = PERF_HANDSHAKE_SEC };
    int            one = 1;

    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

static void perf_sock_name(const struct sockaddr *sa, socklen_t len, char *buf, size_t size)
{
    char host[NI_MAXHOST], serv[NI_MAXSERV];

    if (getnameinfo(sa, len, host, sizeof(host), serv, sizeof(serv),
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
        snprintf(buf, size, "?");
        return;
    }
    snprintf(buf, size, "%s port %s", host, serv);
}

/*
 * -D and -R against the test and the sizes, and -R's method (from the
 * command line or the client's hello); 0 or -1 (printed).
 */
static int perf_check_layouts(const perf_params_t *params)
{
    const char *test = perf_test_names[params->test];
    unsigned    i;

    if ((perf_layout_check_spec(&params->layout) != 0) ||
        (perf_layout_check_spec(&params->rlayout) != 0)) {
        return -1;
    }
    if ((params->layout.kind != 0) && !perf_test_takes_layout(params->test)) {
        fprintf(stderr, "axon_perf: -D is for tag_lat, tag_bw, put_lat, put_bw, get_lat and "
                "get_bw, not %s\n", test);
        return -1;
    }
    if ((params->rlayout.kind != 0) && !perf_test_takes_rlayout(params->test)) {
        fprintf(stderr, "axon_perf: -R is for put_lat, put_bw, get_lat and get_bw, not %s\n",
                test);
        return -1;
    }
    if ((params->rmethod != PERF_RMETHOD_KEY) &&
        ((params->rlayout.kind == 0) || (params->test != PERF_TEST_PUT_BW))) {
        fprintf(stderr, "axon_perf: --%s is a way of put_bw with -R (the layout it places), "
                "not of %s%s\n", (params->rmethod == PERF_RMETHOD_PACK_UNPACK) ?
                "pack-unpack" : "separate-puts", test,
                (params->rlayout.kind == 0) ? " without -R" : "");
        return -1;
    }
    if ((params->rmethod == PERF_RMETHOD_SEPARATE_PUTS) && (params->layout.kind != 0)) {
        fprintf(stderr, "axon_perf: --separate-puts puts from a contiguous buffer (no -D)\n");
        return -1;
    }
    for (i = 0; i < params->num_sizes; ++i) {
        if ((params->layout.kind != 0) &&
            (perf_layout_check_size(&params->layout, params->sizes[i]) != 0)) {
            return -1;
        }
        if ((params->rlayout.kind != 0) &&
            ((perf_layout_check_size(&params->rlayout, params->sizes[i]) != 0))) {
            return -1;
        }
        if ((params->rlayout.kind != 0) && (params->sizes[i] == 0)) {
            fprintf(stderr, "axon_perf: -R maps the target's layout, which needs a size of "
                    "at least 1 byte, not 0\n");
            return -1;
        }
    }
    return 0;
}

/*
 * The client's hello: magic, test parameters, then the sizes; all 64-bit
 * big-endian words, so the two hosts need not share a byte order.
 */
static int perf_send_params(int fd, const perf_params_t *params)
{
    uint64_t words[PERF_WIRE_HDR_WORDS + PERF_MAX_SIZES];
    unsigned n = 0, i;

    words[n++] = PERF_WIRE_MAGIC;
    words[n++] = params->test;
    words[n++] = params->iters;
    words[n++] = params->warmup;
    words[n++] = params->window;
    words[n++] = (uint64_t)params->check;
    words[n++] = params->peers;
    words[n++] = (uint64_t)params->layout.kind;
    words[n++] = params->layout.block;
    words[n++] = params->layout.stride;
    words[n++] = params->layout.pieces;
    words[n++] = (uint64_t)params->rlayout.kind;
    words[n++] = params->rlayout.block;
    words[n++] = params->rlayout.stride;
    words[n++] = params->rlayout.pieces;
    words[n++] = params->rmethod;
    words[n++] = params->num_sizes;
    for (i = 0; i < params->num_sizes; ++i) {
        words[n++] = params->sizes[i];
    }
    for (i = 0; i < n; ++i) {
        words[i] = htobe64(words[i]);
    }
    return perf_sock_write(fd, words, n * sizeof(words[0]));
}

/* Read and check the client's hello; the same bounds as the command line. */
static int perf_recv_params(int fd, perf_params_t *params)
{
    uint64_t words[PERF_WIRE_HDR_WORDS], size;
    unsigned i;

    if (perf_sock_read(fd, words, sizeof(words)) != 0) {
        return -1;
    }
    for (i = 0; i < PERF_WIRE_HDR_WORDS; ++i) {
        words[i] = be64toh(words[i]);
    }

    if (words[0] != PERF_WIRE_MAGIC) {
        fprintf(stderr, "axon_perf server: the client is not an axon_perf of this "
                "version (bad hello 0x%016" PRIx64 ")\n", words[0]);
        return -1;
    }
    if ((words[1] >= PERF_TEST_LAST) || (words[2] == 0) || (words[2] > ULONG_MAX / 2) ||
        (words[3] > ULONG_MAX / 2) || (words[4] == 0) || (words[4] > PERF_MAX_WINDOW) ||
        (words[5] > 1) || (words[6] > PERF_FAN_MAX_PEERS) || (words[7] > AXON_LAYOUT_STRIDED) ||
        (words[8] > SIZE_MAX / 4) || (words[9] > SIZE_MAX / 4) || (words[10] > SIZE_MAX / 4) ||
        (words[11] > AXON_LAYOUT_STRIDED) || (words[12] > SIZE_MAX / 4) ||
        (words[13] > SIZE_MAX / 4) || (words[14] > SIZE_MAX / 4) ||
        (words[15] >= PERF_RMETHOD_LAST) ||
        (words[16] == 0) || (words[16] > PERF_MAX_SIZES)) {
        fprintf(stderr, "axon_perf server: the client sent invalid test parameters\n");
        return -1;
    }

    params->test      = (perf_test_t)words[1];
    params->iters     = (unsigned long)words[2];
    params->warmup    = (unsigned long)words[3];
    params->window    = (unsigned)words[4];
    params->check     = (int)words[5];
    params->peers     = (unsigned)words[6];
    params->layout.kind   = (int)words[7];
    params->layout.block  = (size_t)words[8];
    params->layout.stride = (size_t)words[9];
    params->layout.pieces = (size_t)words[10];
    params->rlayout.kind   = (int)words[11];
    params->rlayout.block  = (size_t)words[12];
    params->rlayout.stride = (size_t)words[13];
    params->rlayout.pieces = (size_t)words[14];
    params->rmethod        = (perf_rmethod_t)words[15];
    params->num_sizes = (unsigned)words[16];
    for (i = 0; i < params->num_sizes; ++i) {
        if (perf_sock_read(fd, &size, sizeof(size)) != 0) {
            return -1;
        }
        size = be64toh(size);
        if (size > SIZE_MAX / 2) {
            fprintf(stderr, "axon_perf server: the client sent an invalid size %" PRIu64
                    "\n", size);
            return -1;
        }
        params->sizes[i] = (size_t)size;
    }
    if (perf_check_layouts(params) != 0) {
        fprintf(stderr, "axon_perf server: the client sent an invalid layout\n");
        return -1;
    }
    return perf_test_is_fan(params->test) ? perf_fan_check_params(params) : 0;
}

/*
 * Listen on every address of this host: one IPv6 socket that also takes
 * IPv4 clients, or IPv4 only where IPv6 is off.
 */
static int perf_listen(const char *port)
{
    struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT };
    struct sockaddr_in  sin  = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY) };
    struct sockaddr_storage bound;
    socklen_t           len  = sizeof(bound);
    uint16_t            nport = (uint16_t)strtoul(port, NULL, 10);
    char                name[NI_MAXHOST + NI_MAXSERV + 8];
    int                 one = 1, zero = 0;
    int                 fd;

    sin6.sin6_port = htons(nport);
    sin.sin_port   = htons(nport);

    fd = socket(AF_INET6, SOCK_STREAM, 0);
    if (fd >= 0) {
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
        if (bind(fd, (struct sockaddr*)&sin6, sizeof(sin6)) != 0) {
            if (errno == EADDRINUSE) {
                goto err_bind;
            }
            close(fd);  /* e.g. IPv6 disabled on this host: fall back to IPv4 */
            fd = -1;
        }
    }
    if (fd < 0) {
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) {
            fprintf(stderr, "axon_perf server: socket failed: %s\n", strerror(errno));
            return -1;
        }
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, (struct sockaddr*)&sin, sizeof(sin)) != 0) {
            goto err_bind;
        }
    }

    if (listen(fd, 1) != 0) {
        fprintf(stderr, "axon_perf server: listen on port %s failed: %s\n", port,
                strerror(errno));
        close(fd);
        return -1;
    }

    /* With -p 0 the kernel picks the port; say which. */
    if (getsockname(fd, (struct sockaddr*)&bound, &len) == 0) {
        perf_sock_name((struct sockaddr*)&bound, len, name, sizeof(name));
        printf("# axon_perf server: listening on %s\n", name);
        fflush(stdout);
    }
    return fd;

err_bind:
    fprintf(stderr, "axon_perf server: cannot listen on TCP port %s: %s\n", port,
            strerror(errno));
    close(fd);
    return -1;
}

/* Wait for one client (forever if wait_sec is 0); the connected socket or -1. */
static int perf_accept(int lfd, int wait_sec)
{
    struct pollfd           pfd      = { .fd = lfd, .events = POLLIN };
    double                  deadline = perf_deadline(wait_sec);
    struct sockaddr_storage peer;
    socklen_t               len;
    char                    name[NI_MAXHOST + NI_MAXSERV + 8];
    int                     ret, fd;

    for (;;) {
        ret = poll(&pfd, 1, perf_ms_left(deadline));
        if ((ret < 0) && (errno != EINTR)) {
            fprintf(stderr, "axon_perf server: poll failed: %s\n", strerror(errno));
            return -1;
        }
        if (ret > 0) {
            len = sizeof(peer);
            fd  = accept(lfd, (struct sockaddr*)&peer, &len);
            if (fd >= 0) {
                break;
            }
            if ((errno != EINTR) && (errno != ECONNABORTED) && (errno != EAGAIN)) {
                fprintf(stderr, "axon_perf server: accept failed: %s\n", strerror(errno));
                return -1;
            }
        }
        if (perf_ms_left(deadline) == 0) {
            fprintf(stderr, "axon_perf server: no client connected within %d s "
                    "(--wait 0 waits forever)\n", wait_sec);
            return -1;
        }
    }

    perf_sock_name((struct sockaddr*)&peer, len, name, sizeof(name));
    printf("# axon_perf server: client %s connected\n", name);
    fflush(stdout);
    perf_sock_setup(fd);
    return fd;
}

/* One non-blocking connect attempt bounded by timeout_ms; 0 or an errno. */
static int perf_connect_once(const struct addrinfo *ai, int timeout_ms, int *fd_p)
{
    struct pollfd pfd;
    socklen_t     len = sizeof(int);
    int           fd, flags, err = 0;

    fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd < 0) {
        return errno;
    }
    flags = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, flags | O_NONBLOCK);

    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        if (errno != EINPROGRESS) {
            err = errno;
            goto out_close;
        }
        pfd.fd     = fd;
        pfd.events = POLLOUT;
        do {
            err = poll(&pfd, 1, timeout_ms);
        } while ((err < 0) && (errno == EINTR));
        if (err == 0) {
            err = ETIMEDOUT;
            goto out_close;
        }
        if ((err < 0) || (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)) {
            err = errno;
            goto out_close;
        }
        if (err != 0) {
            goto out_close;
        }
    }

    fcntl(fd, F_SETFL, flags);
    *fd_p = fd;
    return 0;

out_close:
    close(fd);
    return err;
}

/*
 * Connect to the server, retrying every address until wait_sec (0: forever)
 * has passed, so that client and server can be started at the same time.
 */
static int perf_connect(const char *host, const char *port, int wait_sec)
{
    struct addrinfo  hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
    struct addrinfo *res, *ai;
    double           deadline = perf_deadline(wait_sec);
    int              ret, err = 0, fd = -1, ms;

    ret = getaddrinfo(host, port, &hints, &res);
    if (ret != 0) {
        fprintf(stderr, "axon_perf: cannot resolve '%s': %s\n", host, gai_strerror(ret));
        return -1;
    }

    for (;;) {
        for (ai = res; ai != NULL; ai = ai->ai_next) {
            ms  = perf_ms_left(deadline);
            err = perf_connect_once(ai, ((ms < 0) || (ms > 2000)) ? 2000 : ms, &fd);
            if (err == 0) {
                goto out;
            }
            if ((err != ECONNREFUSED) && (err != ETIMEDOUT) && (err != EHOSTUNREACH) &&
                (err != ENETUNREACH) && (err != ECONNRESET) && (err != EADDRNOTAVAIL)) {
                goto out_fail;  /* retrying will not help */
            }
        }
        ms = perf_ms_left(deadline);
        if (ms == 0) {
            goto out_fail;
        }
        usleep(1000 * (((ms < 0) || (ms > PERF_RETRY_MS)) ? PERF_RETRY_MS : ms));
    }

out_fail:
    fprintf(stderr, "axon_perf: cannot connect to %s port %s", host, port);
    if (wait_sec > 0) {
        fprintf(stderr, " (tried for up to %d s)", wait_sec);
    }
    fprintf(stderr, ": %s\n", strerror(err));
    fd = -1;
out:
    freeaddrinfo(res);
    if (fd >= 0) {
        perf_sock_setup(fd);
    }
    return fd;
}

static int perf_run_server(const perf_params_t *cmdline)
{
    perf_params_t params = *cmdline;
    uint64_t      accept_word = htobe64(PERF_WIRE_ACCEPT);
    int           lfd, fd, ret;

    lfd = perf_listen(params.port);
    if (lfd < 0) {
        return -1;
    }
    fd = perf_accept(lfd, (params.wait_sec < 0) ? PERF_ACCEPT_WAIT_SEC : params.wait_sec);
    close(lfd);  /* one client per run */
    if (fd < 0) {
        return -1;
    }

    perf_set_alarm_handler();
    alarm(PERF_TIMEOUT_SEC);
    if ((perf_recv_params(fd, &params) != 0) ||
        (perf_sock_write(fd, &accept_word, sizeof(accept_word)) != 0)) {
        close(fd);
        return -1;
    }
    printf("# axon_perf server: test=%s sizes=%u iters=%lu\n", perf_test_names[params.test],
           params.num_sizes, params.iters);
    fflush(stdout);

    ret = perf_run(&params, fd, PERF_ROLE_SERVER);
    close(fd);
    alarm(0);
    printf("# axon_perf server: %s\n", (ret == 0) ? "done" : "failed");
    fflush(stdout);
    return ret;
}

static int perf_run_client(const perf_params_t *params)
{
    uint64_t word;
    int      fd, ret;

    fd = perf_connect(params->host, params->port,
                      (params->wait_sec < 0) ? PERF_CONNECT_WAIT_SEC : params->wait_sec);
    if (fd < 0) {
        return -1;
    }

    perf_set_alarm_handler();
    alarm(PERF_TIMEOUT_SEC);
    if ((perf_send_params(fd, params) != 0) || (perf_sock_read(fd, &word, sizeof(word)) != 0)) {
        fprintf(stderr, "axon_perf: handshake with the server at %s port %s failed\n",
                params->host, params->port);
        close(fd);
        return -1;
    }
    if (be64toh(word) != PERF_WIRE_ACCEPT) {
        fprintf(stderr, "axon_perf: %s port %s is not an axon_perf server of this version\n",
                params->host, params->port);
        close(fd);
        return -1;
    }

    printf("# axon_perf client: connected to %s port %s\n", params->host, params->port);
    ret = perf_run(params, fd, PERF_ROLE_CLIENT);
    close(fd);
    alarm(0);
    return ret;
}

/* ------------------------------------------------------------- arguments */

static void perf_usage(FILE *stream)
{
    fprintf(stream,
            "Usage: axon_perf --local [test options]        both sides on this host\n"
            "       axon_perf -p PORT [--wait SEC]          server: wait for one client\n"
            "       axon_perf HOST -p PORT [test options]   client: run against a server\n"
            "       axon_perf --np N -t coll_... [options]  collectives, N processes here\n"
            "       mpirun -np N axon_perf -t coll_... [options]  the same, a PMIx job\n"
            "\n"
            "Messaging and collectives benchmark over the Axon public API.\n"
            "\n"
            "  --local           run client and server as two processes on this host\n"
            "  -p PORT           TCP port of the control connection: the server listens\n"
            "                    on it (every address; 0 = any free port, printed), the\n"
            "                    client connects to it on HOST\n"
            "  --wait SEC        server: how long to wait for a client (default %d);\n"
            "                    client: how long to keep retrying the server (default %d);\n"
            "                    0 = forever\n"
            "\n"
            "Test options (given to the client, which passes them to the server):\n"
            "  -t TEST           tag_lat (ping-pong, default), tag_bw (windowed stream),\n"
            "                    ep_mem (library memory per endpoint: the server hosts one\n"
            "                    worker per peer, the client connects to each and\n"
            "                    exchanges one message with it), tag_fanin (message\n"
            "                    rate, many to one: each of --peers server workers\n"
            "                    streams windows to the client's one worker), tag_fanout\n"
            "                    (one to many: the client streams to every peer in\n"
            "                    turn), or one of the one-sided\n"
            "                    tests, on memory the peer mapped with\n"
            "                    AXON_MEM_MAP_ALLOCATE (see docs/design.md, RMA):\n"
            "                    put_lat (ping-pong of puts, each side polling the last\n"
            "                    byte of its memory), put_bw (windowed puts, one flush at\n"
            "                    the end), get_lat, get_bw (windowed), amo_lat (fetch-and-\n"
            "                    add round trips on a 64-bit word; -s 4: a 32-bit one),\n"
            "                    amo_bw (windowed posted adds on that word, one flush)\n"
            "                    or a collective (persistent: one init per size, then\n"
            "                    post and wait ITERS times): coll_barrier, coll_bcast,\n"
            "                    coll_reduce, coll_allreduce (int64 sums; root 0),\n"
            "                    coll_allgather, coll_alltoall; -s is bytes per member\n"
            "                    (a multiple of 8), its block for allgather/alltoall\n"
            "  --np N            coll_*: fork N processes here (1..%d); without it, run\n"
            "                    over the job of a PMIx launcher (mpirun)\n"
            "  --overlap         coll_*: compute (as long as the collective takes) between\n"
            "                    post and wait; adds overlap_pct= to the lines\n"
            "  --peers N         tag_fanin, tag_fanout: peers, one worker each in the\n"
            "                    server process (default %d, at most %d)\n"
            "  -s SIZE[,SIZE..]  message sizes in bytes, k/m/g suffixes allowed (default 8)\n"
            "  -n ITERS          measured iterations (default 100000 for the *_lat tests,\n"
            "                    1000 for coll_*, 10000 for the others); ep_mem: peers\n"
            "                    (default 64, at most %d)\n"
            "  -w WINDOW         tag_bw, put_bw, get_bw, amo_bw: operations in flight;\n"
            "                    tag_fan*: messages in flight per peer (default 32)\n"
            "  -W WARMUP         iterations before timing starts (default min(1000, ITERS/10))\n"
            "  -c                verify received data (off by default)\n"
            "  -D LAYOUT         tag_lat, tag_bw, put_*, get_*: non-contiguous data, the\n"
            "                    packed size being -s; tag tests use it on both sides,\n"
            "                    put/get on the local side (the remote side: -R).\n"
            "                    strided:BLOCK:STRIDE: -s / BLOCK blocks of\n"
            "                    BLOCK bytes, STRIDE (>= BLOCK) apart; iov:N: N pieces of\n"
            "                    -s / N bytes, each followed by a gap of a piece's length.\n"
            "                    -s must split evenly; -c checks the data through it\n"
            "  -R LAYOUT         put_*, get_*: the target's side is a layout (the same\n"
            "                    shapes as -D, packed size -s; combines with -D): the\n"
            "                    target maps its buffer with AXON_MEM_MAP_LAYOUT, one\n"
            "                    key per size, and each put or get is one operation on\n"
            "                    that key; -c checks the data through it, gaps included\n"
            "  --separate-puts   put_bw -R, no -D: instead of the layout key, one put per\n"
            "                    piece into a contiguous key at the piece's place (-w:\n"
            "                    puts in flight); an iteration is all pieces\n"
            "  --pack-unpack     put_bw -R: instead of the layout key, gather (through -D)\n"
            "                    into a bounce buffer, put it contiguous into one of -w\n"
            "                    bounce slots of the target, flush, send the target a tag\n"
            "                    message naming the slot; the target scatters the slot\n"
            "                    into its layout and answers; an iteration ends with the\n"
            "                    answer (-w of them in flight)\n"
            "  -h, --help        print this help\n"
            "\n"
            "The client prints a '# lanes:' line with the transports chosen, then one\n"
            "line per size:\n"
            "  RESULT test=T tl=LANE size=S iters=N latency_us=X bandwidth_MBps=Y "
            "msgrate_Mps=Z\n"
            "with -D followed by layout=strided:BLOCK:STRIDE or layout=iov:N, with -R by\n"
            "rlayout=LAYOUT rmethod=key|separate_puts|pack_unpack.\n"
            "ep_mem prints the heap growth of the client process (mallinfo2) per peer\n"
            "and the time to create an endpoint and exchange a message with a new peer:\n"
            "  RESULT test=ep_mem tl=LANE bulk_tl=LANE eps=N bytes_per_ep=B heap_bytes=H "
            "wireup_us=T\n"
            "tag_fan* count the messages of all peers (iters is per peer; latency_us is\n"
            "the time per message) and add peers=N.\n"
            "coll_* (rank 0 prints) add ranks=N algo=A; latency_us is the largest of the\n"
            "members' averages per collective, bandwidth_MBps is size / latency.\n"
            "Each side picks its transports from its own AXON_* environment (e.g.\n"
            "AXON_TLS=tcp). Exit status: 0 success, 1 run or connection failure,\n"
            "2 bad arguments.\n", PERF_ACCEPT_WAIT_SEC, PERF_CONNECT_WAIT_SEC,
            PERF_COLL_MAX_NP, PERF_FAN_DEFAULT_PEERS, PERF_FAN_MAX_PEERS,
            PERF_EP_MEM_MAX_PEERS);
}

/* Decimal number with an optional k/m/g (binary) suffix. */
static int perf_parse_number(const char *str, int allow_suffix, unsigned long long *value_p)
{
    unsigned long long value, scale = 1;
    char              *end;

    if ((*str < '0') || (*str > '9')) {
        return -1;  /* also rejects signs and empty strings */
    }

    errno = 0;
    value = strtoull(str, &end, 10);
    if (errno != 0) {
        return -1;
    }

    if (allow_suffix && (*end != '\0') && (end[1] == '\0')) {
        switch (*end) {
        case 'k': case 'K': scale = 1ull << 10; ++end; break;
        case 'm': case 'M': scale = 1ull << 20; ++end; break;
        case 'g': case 'G': scale = 1ull << 30; ++end; break;
        default: break;
        }
    }
    if ((*end != '\0') || ((value != 0) && (scale > ULLONG_MAX / value))) {
        return -1;
    }

    *value_p = value * scale;
    return 0;
}

static int perf_parse_sizes(const char *arg, perf_params_t *params)
{
    unsigned long long value;
    char              *copy, *tok, *save = NULL;
    int                ret = 0;

    copy = strdup(arg);
    if (copy == NULL) {
        fprintf(stderr, "axon_perf: out of memory\n");
        return -1;
    }

    params->num_sizes = 0;
    if (arg[0] == '\0' || arg[strlen(arg) - 1] == ',' || strstr(arg, ",,") != NULL ||
        arg[0] == ',') {
        ret = -1;
    }
    for (tok = strtok_r(copy, ",", &save); (ret == 0) && (tok != NULL);
         tok = strtok_r(NULL, ",", &save)) {
        if ((perf_parse_number(tok, 1, &value) != 0) || (value > SIZE_MAX / 2)) {
            ret = -1;
        } else if (params->num_sizes == PERF_MAX_SIZES) {
            fprintf(stderr, "axon_perf: at most %d sizes\n", PERF_MAX_SIZES);
            ret = -1;
        } else {
            params->sizes[params->num_sizes++] = (size_t)value;
        }
    }

    if ((ret != 0) || (params->num_sizes == 0)) {
        fprintf(stderr, "axon_perf: invalid size list '%s'\n", arg);
        ret = -1;
    }
    free(copy);
    return ret;
}

static int perf_parse_args(int argc, char **argv, perf_params_t *params)
{
    static const struct option long_opts[] = {
        { "local", no_argument,       NULL, 'L' },
        { "wait",  required_argument, NULL, 'T' },
        { "np",    required_argument, NULL, 'N' },
        { "overlap", no_argument,     NULL, 'O' },
        { "peers", required_argument, NULL, 'P' },
        { "separate-puts", no_argument, NULL, 'S' },
        { "pack-unpack", no_argument, NULL, 'U' },
        { "help",  no_argument,       NULL, 'h' },
        { NULL,    0,           NULL, 0   }
    };
    unsigned long long value;
    int                have_iters = 0, have_warmup = 0, have_sizes = 0;
    const char        *test_opt = NULL;  /* a test option seen (the server takes none) */
    char               short_opt[3] = "-?";
    int                opt, i;

    memset(params, 0, sizeof(*params));
    params->test      = PERF_TEST_TAG_LAT;
    params->sizes[0]  = 8;
    params->num_sizes = 1;
    params->window    = 32;
    params->wait_sec  = -1;

    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":t:s:n:w:W:cD:R:p:h", long_opts, NULL)) != -1) {
        if (strchr("tsnwWcDR", opt) != NULL) {
            short_opt[1] = (char)opt;
            test_opt     = short_opt;
        } else if ((opt == 'S') || (opt == 'U')) {
            test_opt = (opt == 'S') ? "--separate-puts" : "--pack-unpack";
        }
        if (((opt == 'S') || (opt == 'U')) && (params->rmethod != PERF_RMETHOD_KEY)) {
            fprintf(stderr, "axon_perf: give one of --separate-puts and --pack-unpack\n");
            return -1;
        }
        switch (opt) {
        case 'L':
            params->local = 1;
            break;
        case 'p':
            if ((perf_parse_number(optarg, 0, &value) != 0) || (value > 65535)) {
                fprintf(stderr, "axon_perf: invalid port '%s' (0..65535)\n", optarg);
                return -1;
            }
            params->port = optarg;
            break;
        case 'N':
            if ((perf_parse_number(optarg, 0, &value) != 0) || (value == 0) ||
                (value > PERF_COLL_MAX_NP)) {
                fprintf(stderr, "axon_perf: invalid --np '%s' (processes, 1..%d)\n", optarg,
                        PERF_COLL_MAX_NP);
                return -1;
            }
            params->np = (unsigned)value;
            break;
        case 'O':
            params->overlap = 1;
            break;
        case 'P':
            if ((perf_parse_number(optarg, 0, &value) != 0) || (value == 0) ||
                (value > PERF_FAN_MAX_PEERS)) {
                fprintf(stderr, "axon_perf: invalid --peers '%s' (1..%d)\n", optarg,
                        PERF_FAN_MAX_PEERS);
                return -1;
            }
            params->peers = (unsigned)value;
            break;
        case 'T':
            if ((perf_parse_number(optarg, 0, &value) != 0) || (value > INT_MAX)) {
                fprintf(stderr, "axon_perf: invalid --wait '%s' (seconds, 0 = forever)\n",
                        optarg);
                return -1;
            }
            params->wait_sec = (int)value;
            break;
        case 't':
            for (i = 0; i < PERF_TEST_LAST; ++i) {
                if (strcmp(optarg, perf_test_names[i]) == 0) {
                    break;
                }
            }
            if (i == PERF_TEST_LAST) {
                fprintf(stderr, "axon_perf: unknown test '%s' (tag_lat, tag_bw, ep_mem, "
                        "tag_fanin, tag_fanout, put_lat, put_bw, get_lat, get_bw, amo_lat, amo_bw, coll_barrier, "
                        "coll_bcast, coll_reduce, coll_allreduce, coll_allgather, "
                        "coll_alltoall)\n", optarg);
                return -1;
            }
            params->test = (perf_test_t)i;
            break;
        case 's':
            if (perf_parse_sizes(optarg, params) != 0) {
                return -1;
            }
            have_sizes = 1;
            break;
        case 'n':
            if ((perf_parse_number(optarg, 0, &value) != 0) || (value == 0) ||
                (value > ULONG_MAX / 2)) {
                fprintf(stderr, "axon_perf: invalid iteration count '%s'\n", optarg);
                return -1;
            }
            params->iters = (unsigned long)value;
            have_iters    = 1;
            break;
        case 'w':
            if ((perf_parse_number(optarg, 0, &value) != 0) || (value == 0) ||
                (value > PERF_MAX_WINDOW)) {
                fprintf(stderr, "axon_perf: invalid window '%s' (1..%d)\n", optarg,
                        PERF_MAX_WINDOW);
                return -1;
            }
            params->window = (unsigned)value;
            break;
        case 'W':
            if ((perf_parse_number(optarg, 0, &value) != 0) || (value > ULONG_MAX / 2)) {
                fprintf(stderr, "axon_perf: invalid warmup count '%s'\n", optarg);
                return -1;
            }
            params->warmup = (unsigned long)value;
            have_warmup    = 1;
            break;
        case 'c':
            params->check = 1;
            break;
        case 'D':
            if (perf_layout_parse(optarg, &params->layout) != 0) {
                return -1;
            }
            break;
        case 'R':
            if (perf_layout_parse(optarg, &params->rlayout) != 0) {
                return -1;
            }
            break;
        case 'S':
            params->rmethod = PERF_RMETHOD_SEPARATE_PUTS;
            break;
        case 'U':
            params->rmethod = PERF_RMETHOD_PACK_UNPACK;
            break;
        case 'h':
            perf_usage(stdout);
            exit(0);
        case ':':
            fprintf(stderr, "axon_perf: option '%s' needs a value\n", argv[optind - 1]);
            return -1;
        default:
            fprintf(stderr, "axon_perf: unknown option '%s' (see -h)\n", argv[optind - 1]);
            return -1;
        }
    }

    if (optind < argc) {
        params->host = argv[optind++];
    }
    if (optind < argc) {
        fprintf(stderr, "axon_perf: unexpected argument '%s' (see -h)\n", argv[optind]);
        return -1;
    }

    if (perf_test_is_coll(params->test)) {
        if (params->local || (params->host != NULL) || (params->port != NULL) ||
            (params->wait_sec >= 0)) {
            fprintf(stderr, "axon_perf: %s runs with --np N or under a PMIx launcher "
                    "(mpirun): no --local, HOST, -p or --wait\n", perf_test_names[params->test]);
            return -1;
        }
    } else if (params->peers && !perf_test_is_fan(params->test)) {
        fprintf(stderr, "axon_perf: --peers is for tag_fanin and tag_fanout, not %s (ep_mem: "
                "-n)\n", perf_test_names[params->test]);
        return -1;
    } else if (params->np || params->overlap) {
        fprintf(stderr, "axon_perf: --np and --overlap are for the coll_* tests, not %s\n",
                perf_test_names[params->test]);
        return -1;
    } else if (params->local) {
        if ((params->host != NULL) || (params->port != NULL) || (params->wait_sec >= 0)) {
            fprintf(stderr, "axon_perf: --local runs both sides here and takes no HOST, "
                    "-p or --wait\n");
            return -1;
        }
    } else if (params->host != NULL) {
        if (params->port == NULL) {
            fprintf(stderr, "axon_perf: client mode needs the server's port: "
                    "axon_perf %s -p PORT\n", params->host);
            return -1;
        }
        if (strcmp(params->port, "0") == 0) {
            fprintf(stderr, "axon_perf: the client needs the server's port, not 0\n");
            return -1;
        }
    } else if (params->port != NULL) {
        if (test_opt != NULL) {
            fprintf(stderr, "axon_perf: %s is a client option; the server takes the test "
                    "parameters from its client\n", test_opt);
            return -1;
        }
    } else {
        fprintf(stderr, "axon_perf: give --local (both sides here), -p PORT (server) or "
                "HOST -p PORT (client); see -h\n");
        return -1;
    }

    if (params->test == PERF_TEST_EP_MEM) {
        if (!have_iters) {
            params->iters = 64;
        } else if (params->iters > PERF_EP_MEM_MAX_PEERS) {
            fprintf(stderr, "axon_perf: ep_mem measures at most %d peers, not %lu\n",
                    PERF_EP_MEM_MAX_PEERS, params->iters);
            return -1;
        }
    } else if (!have_iters && perf_test_is_coll(params->test)) {
        params->iters = 1000;
    } else if (!have_iters) {
        params->iters = ((params->test == PERF_TEST_TAG_LAT) ||
                         (params->test == PERF_TEST_PUT_LAT) ||
                         (params->test == PERF_TEST_GET_LAT) ||
                         (params->test == PERF_TEST_AMO_LAT)) ? 100000 : 10000;
    }
    if (perf_test_is_fan(params->test)) {
        params->peers = params->peers ? params->peers : PERF_FAN_DEFAULT_PEERS;
        if (perf_fan_check_params(params) != 0) {
            return -1;
        }
    }
    if (perf_test_is_rma(params->test) && (perf_rma_check_params(params) != 0)) {
        return -1;
    }
    if (perf_check_layouts(params) != 0) {
        return -1;
    }
    if ((params->test == PERF_TEST_COLL_BARRIER) && !have_sizes) {
        params->sizes[0] = 0;  /* a barrier moves no data */
    }
    if (perf_test_is_coll(params->test) && (perf_coll_check_params(params) != 0)) {
        return -1;
    }
    if (!have_warmup) {
        params->warmup = (params->iters / 10 < 1000) ? params->iters / 10 : 1000;
    }
    return 0;
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
