/*
 * axon_perf: tag-matched latency and bandwidth benchmark over the public API.
 *
 * Two processes, a client and a server, each with its own context, worker and
 * endpoint. They exchange worker addresses over a stream socket (a socketpair
 * in --local mode) and use the same socket to synchronise around setup and
 * teardown and to notice a dead peer. The client measures and prints one
 * RESULT line per message size.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
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

#define PERF_MAX_SIZES        64
#define PERF_MAX_WINDOW       65536
#define PERF_MAX_ADDR_LEN     (1u << 20)  /* sanity bound on a peer's address */
#define PERF_TIMEOUT_SEC      300         /* per message size: last resort against hangs */
#define PERF_CHILD_WAIT_SEC   30          /* after the run, how long the child may take */
#define PERF_CHILD_GRACE_SEC  5           /* same, after the client failed */
#define PERF_LIVENESS_SPINS   (1u << 16)  /* progress calls between peer checks */

#define PERF_TAG_DATA         1
#define PERF_TAG_ACK          2

typedef enum {
    PERF_TEST_TAG_LAT,
    PERF_TEST_TAG_BW,
    PERF_TEST_LAST
} perf_test_t;

static const char *perf_test_names[PERF_TEST_LAST] = {
    [PERF_TEST_TAG_LAT] = "tag_lat",
    [PERF_TEST_TAG_BW]  = "tag_bw",
};

typedef enum {
    PERF_ROLE_CLIENT,  /* drives the test and prints results */
    PERF_ROLE_SERVER
} perf_role_t;

typedef struct {
    perf_test_t   test;
    size_t        sizes[PERF_MAX_SIZES];
    unsigned      num_sizes;
    unsigned long iters;
    unsigned long warmup;
    unsigned      window;
    int           check;
    int           local;
} perf_params_t;

typedef struct {
    const perf_params_t *params;
    perf_role_t          role;
    int                  fd;       /* to the peer process */
    axon_context_h       context;
    axon_worker_h        worker;
    axon_ep_h            ep;
    axon_ep_attr_t       attr;
    unsigned             nslots;   /* buffers of max_size each, per direction */
    size_t               max_size;
    uint8_t             *sbuf;
    uint8_t             *rbuf;
    axon_request_h      *reqs;     /* one per window slot */
    axon_tag_recv_info_t info;
} perf_ctx_t;

typedef struct {
    double elapsed;   /* seconds, measured iterations only */
} perf_result_t;

static pid_t perf_child_pid = -1;

/* ------------------------------------------------------------------ helpers */

static double perf_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char *perf_role_name(perf_role_t role)
{
    return (role == PERF_ROLE_CLIENT) ? "client" : "server";
}

static void perf_fill(uint8_t *buf, size_t length, uint64_t seed)
{
    size_t i;

    for (i = 0; i < length; ++i) {
        buf[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 8) + 1);
    }
}

static int perf_verify(const perf_ctx_t *ctx, const uint8_t *buf, size_t length,
                       uint64_t seed)
{
    size_t  i;
    uint8_t expected;

    for (i = 0; i < length; ++i) {
        expected = (uint8_t)(seed * 131 + i * 7 + (i >> 8) + 1);
        if (buf[i] != expected) {
            fprintf(stderr, "axon_perf %s: data mismatch in message %" PRIu64
                    " at offset %zu of %zu: got 0x%02x, expected 0x%02x\n",
                    perf_role_name(ctx->role), seed, i, length, buf[i], expected);
            return -1;
        }
    }
    return 0;
}

/* --------------------------------------------------------- socket to the peer */

static int perf_sock_write(int fd, const void *data, size_t length)
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

static int perf_sock_read(int fd, void *data, size_t length)
{
    char   *p = data;
    ssize_t ret;

    while (length > 0) {
        ret = recv(fd, p, length, 0);
        if (ret < 0) {
            if (errno == EINTR) {
                continue;
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
static int perf_peer_alive(int fd)
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

/*
 * Send our worker address (64-bit length, then the bytes) and read the
 * peer's. Works on any connected stream socket, local or remote.
 */
static int perf_exchange_address(int fd, const void *address, size_t length,
                                 void **peer_address_p, size_t *peer_length_p)
{
    uint64_t len64 = length;
    void    *peer_address;

    if ((perf_sock_write(fd, &len64, sizeof(len64)) != 0) ||
        (perf_sock_write(fd, address, length) != 0) ||
        (perf_sock_read(fd, &len64, sizeof(len64)) != 0)) {
        return -1;
    }

    if ((len64 == 0) || (len64 > PERF_MAX_ADDR_LEN)) {
        fprintf(stderr, "axon_perf: peer sent an invalid address length %" PRIu64 "\n",
                len64);
        return -1;
    }

    peer_address = malloc(len64);
    if (peer_address == NULL) {
        fprintf(stderr, "axon_perf: failed to allocate %" PRIu64 " bytes\n", len64);
        return -1;
    }

    if (perf_sock_read(fd, peer_address, len64) != 0) {
        free(peer_address);
        return -1;
    }

    *peer_address_p = peer_address;
    *peer_length_p  = len64;
    return 0;
}

/*
 * Barrier over the socket. Keeps progressing the worker while waiting, since
 * the peer may need our progress to finish (e.g. flushing its endpoint).
 */
static int perf_sync(perf_ctx_t *ctx)
{
    struct pollfd pfd = { .fd = ctx->fd, .events = POLLIN };
    char          c   = 's';
    int           ret;

    if (perf_sock_write(ctx->fd, &c, 1) != 0) {
        return -1;
    }

    for (;;) {
        ret = poll(&pfd, 1, (ctx->worker == NULL) ? -1 : 0);
        if (ret > 0) {
            return perf_sock_read(ctx->fd, &c, 1);
        }
        if ((ret < 0) && (errno != EINTR)) {
            fprintf(stderr, "axon_perf: poll failed: %s\n", strerror(errno));
            return -1;
        }
        if (ctx->worker != NULL) {
            axon_worker_progress(ctx->worker);
        }
    }
}

/* ------------------------------------------------------------- requests */

static int perf_check_status(const perf_ctx_t *ctx, axon_status_t status, const char *what)
{
    if (status < 0) {
        fprintf(stderr, "axon_perf %s: %s failed: %s\n", perf_role_name(ctx->role), what,
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
    return perf_check_status(ctx, status, what);
}

/* Start a send; *req_p is NULL if it completed at once. */
static int perf_send(perf_ctx_t *ctx, const void *buf, size_t length, axon_tag_t tag,
                     axon_request_h *req_p)
{
    axon_request_h req = NULL;
    axon_status_t  status;
    unsigned       spins = 0;

    for (;;) {
        status = axon_tag_send_nb(ctx->ep, buf, length, tag, NULL, &req);
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

    if (perf_check_status(ctx, status, "axon_tag_send_nb") != 0) {
        return -1;
    }
    *req_p = (status == AXON_INPROGRESS) ? req : NULL;
    return 0;
}

/* Start a receive; *req_p is NULL if it completed at once (info then filled). */
static int perf_recv(perf_ctx_t *ctx, void *buf, size_t length, axon_tag_t tag,
                     axon_tag_recv_info_t *info, axon_request_h *req_p)
{
    axon_request_param_t param = { .recv_info = info };
    axon_request_h       req   = NULL;
    axon_status_t        status;

    status = axon_tag_recv_nb(ctx->worker, buf, length, tag, AXON_TAG_MASK_FULL,
                              &param, &req);
    if (perf_check_status(ctx, status, "axon_tag_recv_nb") != 0) {
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
 * Ping-pong. The server echoes each message back from the buffer it landed
 * in, and receives alternate between two buffers so the next receive can be
 * posted before the reply goes out.
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
                perf_fill(ctx->sbuf, size, i);
            }
            if ((perf_recv(ctx, ctx->rbuf, size, PERF_TAG_DATA, info, &rreq) != 0) ||
                (perf_send(ctx, ctx->sbuf, size, PERF_TAG_DATA, &sreq) != 0) ||
                (perf_wait(ctx, sreq, NULL, "a send") != 0) ||
                (perf_wait_recv(ctx, rreq, info, size, PERF_TAG_DATA) != 0)) {
                return -1;
            }
            if (params->check && (perf_verify(ctx, ctx->rbuf, size, i) != 0)) {
                return -1;
            }
        }
        result->elapsed = perf_now() - t0;
        return 0;
    }

    if (perf_recv(ctx, ctx->rbuf, size, PERF_TAG_DATA, info, &rreq) != 0) {
        return -1;
    }
    for (i = 0; i < total; ++i) {
        rbuf = ctx->rbuf + (i % 2) * ctx->max_size;
        if (perf_wait_recv(ctx, rreq, info, size, PERF_TAG_DATA) != 0) {
            return -1;
        }
        if (params->check && (perf_verify(ctx, rbuf, size, i) != 0)) {
            return -1;
        }
        if ((i + 1 < total) &&
            (perf_recv(ctx, ctx->rbuf + ((i + 1) % 2) * ctx->max_size, size,
                       PERF_TAG_DATA, info, &rreq) != 0)) {
            return -1;
        }
        if ((perf_send(ctx, rbuf, size, PERF_TAG_DATA, &sreq) != 0) ||
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
            if (perf_recv(ctx, ctx->rbuf, 0, PERF_TAG_ACK, &ack_info, &ack_req) != 0) {
                goto out;
            }
            for (k = 0; k < w; ++k) {
                seq  = done + k;
                slot = params->check ? k : 0;
                if (params->check) {
                    perf_fill(ctx->sbuf + slot * ctx->max_size, size, seq);
                }
                if (perf_send(ctx, ctx->sbuf + slot * ctx->max_size, size, PERF_TAG_DATA,
                              &ctx->reqs[k]) != 0) {
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
                if (perf_recv(ctx, ctx->rbuf + slot * ctx->max_size, size, PERF_TAG_DATA,
                              &infos[k], &ctx->reqs[k]) != 0) {
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
                    (perf_verify(ctx, ctx->rbuf + k * ctx->max_size, size, done + k) != 0)) {
                    goto out_cancel;
                }
            }
            if ((perf_send(ctx, ctx->sbuf, 0, PERF_TAG_ACK, &ack_req) != 0) ||
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
           "msgrate_Mps=%.3f\n", perf_test_names[params->test], tl, size, params->iters,
           latency_us, (double)size * iters / elapsed / 1e6, iters / elapsed / 1e6);
    fflush(stdout);
}

static int perf_alloc_buffers(perf_ctx_t *ctx)
{
    const perf_params_t *params = ctx->params;
    unsigned             i;
    size_t               bytes;

    ctx->max_size = 1;  /* never 0: keep distinct non-NULL buffers */
    for (i = 0; i < params->num_sizes; ++i) {
        if (params->sizes[i] > ctx->max_size) {
            ctx->max_size = params->sizes[i];
        }
    }

    /* Two receive buffers for ping-pong; a window's worth when checking data. */
    ctx->nslots = (params->check && (params->window > 2)) ? params->window : 2;
    if (ctx->max_size > SIZE_MAX / ctx->nslots) {
        fprintf(stderr, "axon_perf: buffer size overflow\n");
        return -1;
    }
    bytes     = ctx->max_size * ctx->nslots;
    ctx->sbuf = malloc(bytes);
    ctx->rbuf = malloc(bytes);
    ctx->reqs = calloc(params->window, sizeof(*ctx->reqs));
    if ((ctx->sbuf == NULL) || (ctx->rbuf == NULL) || (ctx->reqs == NULL)) {
        fprintf(stderr, "axon_perf: failed to allocate 2 x %zu bytes of buffers\n", bytes);
        return -1;
    }

    for (i = 0; i < ctx->nslots; ++i) {
        perf_fill(ctx->sbuf + i * ctx->max_size, ctx->max_size, 0);
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
    if (perf_check_status(ctx, status, "axon_ep_close_nb") != 0) {
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

    status = axon_init(&ctx_params, &ctx.context);
    if (perf_check_status(&ctx, status, "axon_init") != 0) {
        return -1;
    }

    status = axon_worker_create(ctx.context, NULL, &ctx.worker);
    if (perf_check_status(&ctx, status, "axon_worker_create") != 0) {
        goto out_cleanup;
    }

    status = axon_worker_get_address(ctx.worker, &address, &address_length);
    if (perf_check_status(&ctx, status, "axon_worker_get_address") != 0) {
        goto out_destroy_worker;
    }

    if (perf_exchange_address(fd, address, address_length, &peer_address,
                              &peer_length) != 0) {
        goto out_release_address;
    }

    ep_params.address        = peer_address;
    ep_params.address_length = peer_length;
    status = axon_ep_create(ctx.worker, &ep_params, &ctx.ep);
    if (perf_check_status(&ctx, status, "axon_ep_create") != 0) {
        goto out_free_peer;
    }

    status = axon_ep_query(ctx.ep, &ctx.attr);
    if ((perf_check_status(&ctx, status, "axon_ep_query") != 0) ||
        (perf_alloc_buffers(&ctx) != 0)) {
        goto out_close_ep;
    }

    /* Both endpoints exist before any message flows. */
    if (perf_sync(&ctx) != 0) {
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
    if ((perf_sync(&ctx) != 0) || (perf_close_ep(&ctx) != 0) || (perf_sync(&ctx) != 0)) {
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

static void perf_alarm_handler(int sig)
{
    static const char msg[] = "axon_perf: timed out, killing the peer\n";
    ssize_t           ret;

    if (perf_child_pid > 0) {
        kill(perf_child_pid, SIGKILL);
    }
    ret = write(STDERR_FILENO, msg, sizeof(msg) - 1);
    (void)ret;
    _exit(1);
}

/*
 * Reap the child within a bounded time; 0 only if it exited with status 0.
 * quiet: the run already failed, so the child's own status adds nothing.
 */
static int perf_wait_child(pid_t pid, unsigned timeout_sec, int quiet)
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
            fprintf(stderr, "axon_perf: server process did not exit in %u s, killing it\n",
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
        fprintf(stderr, "axon_perf: server process killed by signal %d\n", WTERMSIG(status));
    } else {
        fprintf(stderr, "axon_perf: server process failed (exit status %d)\n",
                WEXITSTATUS(status));
    }
    return -1;
}

static int perf_run_local(const perf_params_t *params)
{
    struct sigaction sa;
    pid_t            parent = getpid();
    pid_t            pid;
    int              sv[2];
    int              ret;

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
    perf_child_pid = pid;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = perf_alarm_handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    alarm(PERF_TIMEOUT_SEC);

    ret = perf_run(params, sv[0], PERF_ROLE_CLIENT);
    close(sv[0]);  /* the server sees EOF if it is still waiting for us */

    /* If the client failed, the server sees EOF on the socket and gives up
     * by itself; the timeout is only a backstop. */
    alarm(0);
    if (perf_wait_child(pid, (ret == 0) ? PERF_CHILD_WAIT_SEC : PERF_CHILD_GRACE_SEC,
                        ret != 0) != 0) {
        ret = -1;
    }
    return ret;
}

/* ------------------------------------------------------------- arguments */

static void perf_usage(FILE *stream)
{
    fprintf(stream,
            "Usage: axon_perf --local [options]\n"
            "\n"
            "Tag-matched messaging benchmark over the Axon public API.\n"
            "\n"
            "  --local           run client and server as two processes on this host\n"
            "  -t TEST           tag_lat (ping-pong, default) or tag_bw (windowed stream)\n"
            "  -s SIZE[,SIZE..]  message sizes in bytes, k/m/g suffixes allowed (default 8)\n"
            "  -n ITERS          measured iterations (default 100000 for tag_lat,\n"
            "                    10000 for tag_bw)\n"
            "  -w WINDOW         tag_bw: messages in flight per window (default 32)\n"
            "  -W WARMUP         iterations before timing starts (default min(1000, ITERS/10))\n"
            "  -c                verify received data (off by default)\n"
            "  -h, --help        print this help\n"
            "\n"
            "The client prints one line per size:\n"
            "  RESULT test=T tl=LANE size=S iters=N latency_us=X bandwidth_MBps=Y "
            "msgrate_Mps=Z\n"
            "Transports follow the usual AXON_* environment variables (e.g. AXON_TLS).\n");
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
        { "local", no_argument, NULL, 'L' },
        { "help",  no_argument, NULL, 'h' },
        { NULL,    0,           NULL, 0   }
    };
    unsigned long long value;
    int                have_iters = 0, have_warmup = 0;
    int                opt, i;

    memset(params, 0, sizeof(*params));
    params->test      = PERF_TEST_TAG_LAT;
    params->sizes[0]  = 8;
    params->num_sizes = 1;
    params->window    = 32;

    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":t:s:n:w:W:ch", long_opts, NULL)) != -1) {
        switch (opt) {
        case 'L':
            params->local = 1;
            break;
        case 't':
            for (i = 0; i < PERF_TEST_LAST; ++i) {
                if (strcmp(optarg, perf_test_names[i]) == 0) {
                    break;
                }
            }
            if (i == PERF_TEST_LAST) {
                fprintf(stderr, "axon_perf: unknown test '%s' (tag_lat, tag_bw)\n", optarg);
                return -1;
            }
            params->test = (perf_test_t)i;
            break;
        case 's':
            if (perf_parse_sizes(optarg, params) != 0) {
                return -1;
            }
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
        fprintf(stderr, "axon_perf: unexpected argument '%s' (see -h)\n", argv[optind]);
        return -1;
    }

    if (!have_iters) {
        params->iters = (params->test == PERF_TEST_TAG_LAT) ? 100000 : 10000;
    }
    if (!have_warmup) {
        params->warmup = (params->iters / 10 < 1000) ? params->iters / 10 : 1000;
    }
    return 0;
}

int main(int argc, char **argv)
{
    perf_params_t params;

    if (perf_parse_args(argc, argv, &params) != 0) {
        return 2;
    }

    if (!params.local) {
        fprintf(stderr, "axon_perf: cross-host mode is not available yet; "
                "use --local to run both sides on this host\n");
        return 2;
    }

    /* A peer that dies must show up as an error on a write, not kill us. */
    signal(SIGPIPE, SIG_IGN);

    return (perf_run_local(&params) == 0) ? 0 : 1;
}
