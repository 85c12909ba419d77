/*
 * axon_perf across hosts: the server listens and takes one client at a
 * time; the client connects, sends its parameters (the server starts with
 * nothing but a port), and both run the test over that socket (perf_run).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include "axon.h"
#include "axon_perf.h"

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
int perf_check_layouts(const perf_params_t *params)
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

int perf_run_server(const perf_params_t *cmdline)
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

int perf_run_client(const perf_params_t *params)
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
