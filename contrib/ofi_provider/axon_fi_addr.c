/*
 * Address servers: where peers fetch an endpoint's worker address from its
 * name. A name must fit FI_NAME_MAX (64) bytes, since that is the buffer
 * Open MPI 4.1 gives fi_getname; an Axon worker address does not (100-300
 * bytes: one entry per transport interface). So a process serves the worker
 * addresses it publishes over TCP, each listener a thread blocked in accept:
 *
 *   shared     one per process, on an ephemeral port, started with the
 *              first publication: answers by worker id (id 0: its only
 *              publication, if it has just one)
 *   dedicated  one per endpoint opened with a src_addr that names a port
 *              (fi_getinfo with FI_SOURCE and a service): bound to that
 *              address, answers every request with its endpoint, so
 *              "node:service" alone reaches it
 *
 * The servers answer from their own threads: a peer's lookup never waits
 * for the endpoint's owner to progress.
 *
 * Protocol (one exchange per connection, network byte order):
 *   request  u32 magic, u32 version, u64 id, u32 kind, u32 0, u64 key
 *   reply    u32 magic, u32 status (0 = found), u64 id, u32 length, length bytes
 * kind ADDR: the bytes are the worker address. kind KEY: they are the memory
 * key `key` of the endpoint's domain as axon_fi_mr_export gives it, read
 * from the domain's table under its lock (RMA initiators resolve a 64-bit
 * libfabric key to Axon's packed key this way, once per peer and key),
 * with the place of the region's RMA event words at that endpoint.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "axon_fi.h"

#define AXON_FI_SRV_MAGIC      0x41584653u   /* "AXFS" */
#define AXON_FI_SRV_VERSION    4   /* 4: key blobs may carry RMA event words */
#define AXON_FI_SRV_KIND_ADDR  0
#define AXON_FI_SRV_KIND_KEY   1
#define AXON_FI_SRV_TIMEOUT_MS 5000
#define AXON_FI_ADDR_MAX       (64 * 1024)   /* a worker address is far smaller */

typedef struct axon_fi_listener {
    struct axon_fi_listener *next;
    int                      fd;
    pthread_t                thread;
    struct in_addr           ip;          /* bound to (INADDR_ANY for the shared one) */
    uint16_t                 port;        /* network order */
    int                      dedicated;
    int                      users;       /* publications it serves */
} axon_fi_listener_t;

struct axon_fi_pub {
    struct axon_fi_pub  *next;
    axon_fi_listener_t  *listener;
    axon_fi_domain_t    *domain;      /* its memory keys (the endpoint's domain outlives it) */
    const axon_fi_event_words_t *words;   /* the endpoint's RMA event words (it outlives
                                           * the publication) */
    uint64_t             id;
    size_t               len;
    uint8_t              addr[];
};

static struct {
    pthread_mutex_t     lock;
    axon_fi_pub_t      *pubs;
    axon_fi_listener_t *listeners;
    axon_fi_listener_t *shared;
} axon_fi_srv = {PTHREAD_MUTEX_INITIALIZER, NULL, NULL, NULL};

/* ---------------------------------------------------------------- I/O helpers */

static int axon_fi_wait_fd(int fd, short events, int timeout_ms)
{
    struct pollfd pfd = {fd, events, 0};
    int ret;

    do {
        ret = poll(&pfd, 1, timeout_ms);
    } while ((ret < 0) && (errno == EINTR));
    return (ret > 0) ? 0 : -FI_ETIMEDOUT;
}

static int axon_fi_io(int fd, void *buf, size_t len, int is_write)
{
    uint8_t *p = buf;
    ssize_t n;

    while (len > 0) {
        if (axon_fi_wait_fd(fd, is_write ? POLLOUT : POLLIN, AXON_FI_SRV_TIMEOUT_MS) != 0) {
            return -FI_ETIMEDOUT;
        }
        n = is_write ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
        if (n < 0) {
            if ((errno == EINTR) || (errno == EAGAIN)) {
                continue;
            }
            return -FI_EIO;
        }
        if (n == 0) {
            return -FI_ECONNRESET;
        }
        p   += n;
        len -= (size_t)n;
    }
    return 0;
}

/* ---------------------------------------------------------------- serving */

/* The publication a request for id reaches through listener (lock held). */
static axon_fi_pub_t *axon_fi_srv_find(const axon_fi_listener_t *listener, uint64_t id)
{
    axon_fi_pub_t *pub, *only = NULL;
    int served = 0;

    for (pub = axon_fi_srv.pubs; pub != NULL; pub = pub->next) {
        if (pub->listener != listener) {
            continue;
        }
        if ((pub->id == id) || listener->dedicated) {
            return pub;
        }
        only = pub;
        ++served;
    }
    return ((id == 0) && (served == 1)) ? only : NULL;
}

/* What a request asks of pub (lock held): a malloc'ed copy of the bytes, or NULL. */
static uint8_t *axon_fi_srv_reply(const axon_fi_pub_t *pub, uint32_t kind, uint64_t key,
                                  size_t *len_p)
{
    void *blob = NULL;
    uint8_t *copy;

    if (kind == AXON_FI_SRV_KIND_KEY) {
        return (axon_fi_mr_export(pub->domain, pub->words, key, &blob, len_p) == 0) ? blob :
               NULL;
    }
    copy = malloc(pub->len);
    if (copy != NULL) {
        memcpy(copy, pub->addr, pub->len);
        *len_p = pub->len;
    }
    return copy;
}

static void axon_fi_srv_answer(const axon_fi_listener_t *listener, int fd)
{
    uint32_t req[8], rep[5];
    uint64_t id, key, be;
    axon_fi_pub_t *pub;
    uint8_t *copy = NULL;
    size_t len = 0;

    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    if ((axon_fi_io(fd, req, sizeof(req), 0) != 0) || (ntohl(req[0]) != AXON_FI_SRV_MAGIC) ||
        (ntohl(req[1]) != AXON_FI_SRV_VERSION)) {
        return;
    }
    memcpy(&be, &req[2], sizeof(be));
    id = be64toh(be);
    memcpy(&be, &req[6], sizeof(be));
    key = be64toh(be);

    pthread_mutex_lock(&axon_fi_srv.lock);
    pub = axon_fi_srv_find(listener, id);
    if (pub != NULL) {
        copy = axon_fi_srv_reply(pub, ntohl(req[4]), key, &len);
        id   = pub->id;
    }
    pthread_mutex_unlock(&axon_fi_srv.lock);

    be     = htobe64(id);
    rep[0] = htonl(AXON_FI_SRV_MAGIC);
    rep[1] = htonl(copy != NULL ? 0 : 1);
    memcpy(&rep[2], &be, sizeof(be));
    rep[4] = htonl(copy != NULL ? (uint32_t)len : 0);
    if ((axon_fi_io(fd, rep, sizeof(rep), 1) == 0) && (copy != NULL)) {
        axon_fi_io(fd, copy, len, 1);
    }
    free(copy);
}

static void *axon_fi_srv_main(void *arg)
{
    axon_fi_listener_t *listener = arg;
    int fd;

    for (;;) {
        fd = accept(listener->fd, NULL, NULL);
        if (fd < 0) {
            if ((errno == EINTR) || (errno == ECONNABORTED)) {
                continue;
            }
            break;   /* shut down by axon_fi_listener_stop */
        }
        axon_fi_srv_answer(listener, fd);
        close(fd);
    }
    return NULL;
}

/* A listener on ip:port (port 0: any), serving from its own thread (lock held). */
static int axon_fi_listener_start(struct in_addr ip, uint16_t port, int dedicated,
                                  axon_fi_listener_t **listener_p)
{
    axon_fi_listener_t *listener;
    struct sockaddr_in sin;
    socklen_t slen = sizeof(sin);
    int one = 1, ret;

    listener = calloc(1, sizeof(*listener));
    if (listener == NULL) {
        return -FI_ENOMEM;
    }
    listener->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener->fd < 0) {
        AXON_FI_WARN(FI_LOG_CORE, "address server: socket: %s", strerror(errno));
        free(listener);
        return -FI_EIO;
    }
    setsockopt(listener->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr   = ip;
    sin.sin_port   = port;
    if ((bind(listener->fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) ||
        (listen(listener->fd, 128) != 0) ||
        (getsockname(listener->fd, (struct sockaddr *)&sin, &slen) != 0)) {
        char str[INET_ADDRSTRLEN];
        ret = (errno == EADDRINUSE) ? -FI_EADDRINUSE :
              (errno == EADDRNOTAVAIL) ? -FI_EADDRNOTAVAIL : -FI_EIO;
        inet_ntop(AF_INET, &ip, str, sizeof(str));
        AXON_FI_WARN(FI_LOG_CORE, "address server: cannot listen on %s:%u: %s", str, ntohs(port),
                     strerror(errno));
        close(listener->fd);
        free(listener);
        return ret;
    }
    listener->ip        = ip;
    listener->port      = sin.sin_port;
    listener->dedicated = dedicated;
    if (pthread_create(&listener->thread, NULL, axon_fi_srv_main, listener) != 0) {
        AXON_FI_WARN(FI_LOG_CORE, "address server: cannot start its thread");
        close(listener->fd);
        free(listener);
        return -FI_ENOMEM;
    }
    listener->next = axon_fi_srv.listeners;
    axon_fi_srv.listeners = listener;
    *listener_p = listener;
    return 0;
}

/* Called with the lock held when the listener serves nobody any more. */
static void axon_fi_listener_stop(axon_fi_listener_t *listener)
{
    axon_fi_listener_t **pp;

    for (pp = &axon_fi_srv.listeners; *pp != listener; pp = &(*pp)->next) {
    }
    *pp = listener->next;
    if (axon_fi_srv.shared == listener) {
        axon_fi_srv.shared = NULL;
    }
    shutdown(listener->fd, SHUT_RDWR);   /* wakes accept() with an error */
    pthread_mutex_unlock(&axon_fi_srv.lock);
    pthread_join(listener->thread, NULL);  /* it may be answering: that takes the lock */
    pthread_mutex_lock(&axon_fi_srv.lock);
    close(listener->fd);
    free(listener);
}

int axon_fi_addr_publish(const axon_fi_name_t *src, uint64_t id, const void *worker_addr,
                         size_t len, axon_fi_domain_t *domain,
                         const axon_fi_event_words_t *words, axon_fi_name_t *name,
                         axon_fi_pub_t **pub_p)
{
    struct in_addr any = {htonl(INADDR_ANY)};
    axon_fi_listener_t *listener = NULL;
    struct in_addr ip;
    axon_fi_pub_t *pub;
    int ret = 0;

    pub = malloc(sizeof(*pub) + len);
    if (pub == NULL) {
        return -FI_ENOMEM;
    }
    memcpy(pub->addr, worker_addr, len);
    pub->len    = len;
    pub->id     = id;
    pub->domain = domain;
    pub->words  = words;
    ip = ((src != NULL) && (src->sin_addr.s_addr != htonl(INADDR_ANY))) ? src->sin_addr :
         axon_fi_default_ip();

    pthread_mutex_lock(&axon_fi_srv.lock);
    if ((src != NULL) && (src->sin_port != 0)) {
        ret = axon_fi_listener_start(ip, src->sin_port, 1, &listener);
    } else if ((listener = axon_fi_srv.shared) == NULL) {
        ret = axon_fi_listener_start(any, 0, 0, &listener);
        axon_fi_srv.shared = listener;
    }
    if (ret == 0) {
        ++listener->users;
        pub->listener = listener;
        pub->next     = axon_fi_srv.pubs;
        axon_fi_srv.pubs = pub;
        axon_fi_name_make(ip, listener->port, id, name);
        *pub_p = pub;
    }
    pthread_mutex_unlock(&axon_fi_srv.lock);
    if (ret != 0) {
        free(pub);
    }
    return ret;
}

void axon_fi_addr_withdraw(axon_fi_pub_t *pub)
{
    axon_fi_pub_t **pp;
    axon_fi_listener_t *listener = pub->listener;

    pthread_mutex_lock(&axon_fi_srv.lock);
    for (pp = &axon_fi_srv.pubs; *pp != pub; pp = &(*pp)->next) {
    }
    *pp = pub->next;
    free(pub);
    if (--listener->users == 0) {
        axon_fi_listener_stop(listener);
    }
    pthread_mutex_unlock(&axon_fi_srv.lock);
}

/* ---------------------------------------------------------------- client */

static int axon_fi_connect(const axon_fi_name_t *name)
{
    struct sockaddr_in sin;
    int fd, err = 0;
    socklen_t elen = sizeof(err);

    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr   = name->sin_addr;
    sin.sin_port   = name->sin_port;
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        return -1;
    }
    if ((connect(fd, (const struct sockaddr *)&sin, sizeof(sin)) != 0) &&
        (errno != EINPROGRESS)) {
        close(fd);
        return -1;
    }
    if ((axon_fi_wait_fd(fd, POLLOUT, AXON_FI_SRV_TIMEOUT_MS) != 0) ||
        (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0) || (err != 0)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* One request of kind for key to name's server: *blob_p (malloc'ed), its length and the id. */
static int axon_fi_srv_ask(const axon_fi_name_t *name, uint32_t kind, uint64_t key,
                           void **blob_p, size_t *len_p, uint64_t *id_p)
{
    uint32_t req[8], rep[5];
    uint64_t be = htobe64(axon_fi_name_id(name));
    void *blob;
    size_t len = 0;
    int fd, ret;

    fd = axon_fi_connect(name);
    if (fd < 0) {
        return -FI_ECONNREFUSED;
    }
    req[0] = htonl(AXON_FI_SRV_MAGIC);
    req[1] = htonl(AXON_FI_SRV_VERSION);
    memcpy(&req[2], &be, sizeof(be));
    req[4] = htonl(kind);
    req[5] = 0;
    be     = htobe64(key);
    memcpy(&req[6], &be, sizeof(be));
    ret = axon_fi_io(fd, req, sizeof(req), 1);
    if (ret == 0) {
        ret = axon_fi_io(fd, rep, sizeof(rep), 0);
    }
    if (ret == 0) {
        len = ntohl(rep[4]);
        if ((ntohl(rep[0]) != AXON_FI_SRV_MAGIC) || (len > AXON_FI_ADDR_MAX)) {
            ret = -FI_EIO;
        } else if ((ntohl(rep[1]) != 0) || (len == 0)) {
            ret = (kind == AXON_FI_SRV_KIND_KEY) ? -FI_ENOKEY : -FI_ENOENT;
        }
    }
    if (ret == 0) {
        blob = malloc(len);
        if (blob == NULL) {
            ret = -FI_ENOMEM;
        } else if ((ret = axon_fi_io(fd, blob, len, 0)) != 0) {
            free(blob);
        } else {
            memcpy(&be, &rep[2], sizeof(be));
            *id_p   = be64toh(be);
            *blob_p = blob;
            *len_p  = len;
        }
    }
    close(fd);
    return ret;
}

int axon_fi_addr_fetch(const axon_fi_name_t *name, void **addr_p, size_t *len_p,
                       uint64_t *id_p)
{
    char str[96];
    int ret = axon_fi_srv_ask(name, AXON_FI_SRV_KIND_ADDR, 0, addr_p, len_p, id_p);

    if (ret != 0) {
        axon_fi_name_str(name, str, sizeof(str));
        AXON_FI_WARN(FI_LOG_AV, "cannot fetch the worker address of %s: %s", str,
                     fi_strerror(-ret));
    }
    return ret;
}

int axon_fi_addr_fetch_key(const axon_fi_name_t *name, uint64_t key, void **blob_p,
                           size_t *len_p)
{
    uint64_t id;

    return axon_fi_srv_ask(name, AXON_FI_SRV_KIND_KEY, key, blob_p, len_p, &id);
}
