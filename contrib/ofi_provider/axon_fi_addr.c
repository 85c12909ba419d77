/*
 * Endpoint names and the address server.
 *
 * A libfabric name must fit FI_NAME_MAX (64) bytes, since that is the buffer
 * Open MPI 4.1 gives fi_getname; an Axon worker address does not (100-300
 * bytes: one entry per transport interface). So each process runs a small
 * TCP server (a thread blocked in accept) that hands out the worker
 * addresses it publishes, and a name is {server ip:port, host, token}.
 * fi_av_insert asks the server once per peer. The server answers on its own
 * thread, so an insert never waits for the peer to progress.
 *
 * Protocol (one exchange per connection, network byte order):
 *   request  u32 magic, u32 version, u64 token
 *   reply    u32 magic, u32 status (0 = found), u32 length, length bytes
 *
 * The interface advertised: FI_AXON_IFACE, else the first IPv4 interface
 * that is up and not loopback, else 127.0.0.1. Peers on the same host (same
 * host-name hash) ask over loopback first.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#include <endian.h>
#include "axon_fi.h"

#define AXON_FI_SRV_MAGIC      0x41584653u   /* "AXFS" */
#define AXON_FI_SRV_TIMEOUT_MS 5000
#define AXON_FI_ADDR_MAX       (64 * 1024)   /* a worker address is far smaller */

typedef struct axon_fi_pub {
    struct axon_fi_pub *next;
    uint64_t            token;
    size_t              len;
    uint8_t             addr[];
} axon_fi_pub_t;

static struct {
    pthread_mutex_t lock;
    axon_fi_pub_t  *pubs;
    int             listen_fd;
    int             running;
    pthread_t       thread;
    uint16_t        port;        /* network order */
    struct in_addr  ip;
    uint64_t        host;
} axon_fi_srv = {PTHREAD_MUTEX_INITIALIZER, NULL, -1, 0, 0, 0, {0}, 0};

/* ---------------------------------------------------------------- names */

int axon_fi_name_check(const void *addr, size_t len, axon_fi_name_t *name)
{
    if ((addr == NULL) || (len < sizeof(*name))) {
        AXON_FI_WARN(FI_LOG_AV, "address of %zu bytes is not an axon name (%zu bytes)", len,
                     sizeof(*name));
        return -FI_EINVAL;
    }
    memcpy(name, addr, sizeof(*name));
    if (name->magic != AXON_FI_NAME_MAGIC) {
        AXON_FI_WARN(FI_LOG_AV, "address has bad magic 0x%08x (expected 0x%08x)", name->magic,
                     AXON_FI_NAME_MAGIC);
        return -FI_EINVAL;
    }
    if ((name->version != AXON_FI_NAME_VERSION) || (name->length != sizeof(*name))) {
        AXON_FI_WARN(FI_LOG_AV, "address has version %u length %u (expected %u, %zu)",
                     name->version, name->length, AXON_FI_NAME_VERSION, sizeof(*name));
        return -FI_EINVAL;
    }
    if (name->token == 0) {
        AXON_FI_WARN(FI_LOG_AV, "address has a null token");
        return -FI_EINVAL;
    }
    return 0;
}

void axon_fi_name_str(const axon_fi_name_t *name, char *buf, size_t len)
{
    char ip[INET6_ADDRSTRLEN];
    struct in6_addr a;

    memcpy(&a, name->ip, sizeof(a));
    if (IN6_IS_ADDR_V4MAPPED(&a)) {
        inet_ntop(AF_INET, &a.s6_addr[12], ip, sizeof(ip));
    } else {
        inet_ntop(AF_INET6, &a, ip, sizeof(ip));
    }
    snprintf(buf, len, "fi_axon://%s:%u/%016llx", ip, ntohs(name->port),
             (unsigned long long)name->token);
}

static uint64_t axon_fi_host_hash(void)
{
    char host[256] = "";
    uint64_t h = 1469598103934665603ull;   /* FNV-1a */
    const char *p;

    gethostname(host, sizeof(host) - 1);
    for (p = host; *p != '\0'; ++p) {
        h = (h ^ (uint8_t)*p) * 1099511628211ull;
    }
    return h;
}

/* The IPv4 address peers reach this process at. */
static struct in_addr axon_fi_pick_ip(void)
{
    struct ifaddrs *ifs, *ifa;
    struct in_addr ip;
    const char *want = NULL;
    char *param = NULL;

    ip.s_addr = htonl(INADDR_LOOPBACK);
    if ((fi_param_get_str(&axon_fi_prov, "iface", &param) == FI_SUCCESS) && (param != NULL) &&
        (*param != '\0')) {
        want = param;
    }
    if (getifaddrs(&ifs) != 0) {
        return ip;
    }
    for (ifa = ifs; ifa != NULL; ifa = ifa->ifa_next) {
        if ((ifa->ifa_addr == NULL) || (ifa->ifa_addr->sa_family != AF_INET) ||
            !(ifa->ifa_flags & IFF_UP)) {
            continue;
        }
        if (want != NULL ? strcmp(ifa->ifa_name, want) != 0 :
                           (ifa->ifa_flags & IFF_LOOPBACK) != 0) {
            continue;
        }
        ip = ((struct sockaddr_in *)ifa->ifa_addr)->sin_addr;
        break;
    }
    if ((want != NULL) && (ifa == NULL)) {
        AXON_FI_WARN(FI_LOG_CORE, "FI_AXON_IFACE=%s: no such IPv4 interface up; using 127.0.0.1",
                     want);
    }
    freeifaddrs(ifs);
    return ip;
}

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

/* ---------------------------------------------------------------- server */

static void axon_fi_srv_answer(int fd)
{
    uint32_t req[4], rep[3];
    uint64_t token;
    axon_fi_pub_t *pub;
    uint8_t *copy = NULL;
    size_t len = 0;

    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    if ((axon_fi_io(fd, req, sizeof(req), 0) != 0) || (ntohl(req[0]) != AXON_FI_SRV_MAGIC)) {
        return;
    }
    memcpy(&token, &req[2], sizeof(token));
    token = be64toh(token);

    pthread_mutex_lock(&axon_fi_srv.lock);
    for (pub = axon_fi_srv.pubs; pub != NULL; pub = pub->next) {
        if (pub->token == token) {
            copy = malloc(pub->len);
            if (copy != NULL) {
                memcpy(copy, pub->addr, pub->len);
                len = pub->len;
            }
            break;
        }
    }
    pthread_mutex_unlock(&axon_fi_srv.lock);

    rep[0] = htonl(AXON_FI_SRV_MAGIC);
    rep[1] = htonl(copy != NULL ? 0 : 1);
    rep[2] = htonl((uint32_t)len);
    if ((axon_fi_io(fd, rep, sizeof(rep), 1) == 0) && (len > 0)) {
        axon_fi_io(fd, copy, len, 1);
    }
    free(copy);
}

static void *axon_fi_srv_main(void *arg)
{
    int fd;

    (void)arg;
    for (;;) {
        fd = accept(axon_fi_srv.listen_fd, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) {
                continue;
            }
            break;   /* shut down by axon_fi_srv_stop */
        }
        axon_fi_srv_answer(fd);
        close(fd);
    }
    return NULL;
}

static int axon_fi_srv_start(void)
{
    struct sockaddr_in sin;
    socklen_t slen = sizeof(sin);
    int fd, one = 1;

    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        AXON_FI_WARN(FI_LOG_CORE, "address server: socket: %s", strerror(errno));
        return -FI_EIO;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    memset(&sin, 0, sizeof(sin));
    sin.sin_family      = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_ANY);
    if ((bind(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) || (listen(fd, 128) != 0) ||
        (getsockname(fd, (struct sockaddr *)&sin, &slen) != 0)) {
        AXON_FI_WARN(FI_LOG_CORE, "address server: bind/listen: %s", strerror(errno));
        close(fd);
        return -FI_EIO;
    }
    axon_fi_srv.listen_fd = fd;
    axon_fi_srv.port      = sin.sin_port;
    axon_fi_srv.ip        = axon_fi_pick_ip();
    axon_fi_srv.host      = axon_fi_host_hash();
    if (pthread_create(&axon_fi_srv.thread, NULL, axon_fi_srv_main, NULL) != 0) {
        AXON_FI_WARN(FI_LOG_CORE, "address server: cannot start its thread");
        close(fd);
        axon_fi_srv.listen_fd = -1;
        return -FI_ENOMEM;
    }
    axon_fi_srv.running = 1;
    return 0;
}

/* Called with the lock held, when nothing is published any more. */
static void axon_fi_srv_stop(void)
{
    pthread_t thread = axon_fi_srv.thread;
    int fd = axon_fi_srv.listen_fd;

    axon_fi_srv.running   = 0;
    axon_fi_srv.listen_fd = -1;
    shutdown(fd, SHUT_RDWR);   /* wakes accept() with an error */
    pthread_mutex_unlock(&axon_fi_srv.lock);
    pthread_join(thread, NULL);
    pthread_mutex_lock(&axon_fi_srv.lock);
    close(fd);
}

static uint64_t axon_fi_new_token(void)
{
    static uint64_t counter;
    uint64_t token = 0;

    if (getrandom(&token, sizeof(token), GRND_NONBLOCK) != sizeof(token)) {
        token = ((uint64_t)getpid() << 32) ^ (uint64_t)time(NULL);
    }
    token ^= ++counter;
    return (token != 0) ? token : 1;
}

int axon_fi_addr_publish(const void *worker_addr, size_t len, axon_fi_name_t *name)
{
    axon_fi_pub_t *pub;
    struct in6_addr mapped;
    int ret = 0;

    pub = malloc(sizeof(*pub) + len);
    if (pub == NULL) {
        return -FI_ENOMEM;
    }
    memcpy(pub->addr, worker_addr, len);
    pub->len = len;

    pthread_mutex_lock(&axon_fi_srv.lock);
    if (!axon_fi_srv.running) {
        ret = axon_fi_srv_start();
    }
    if (ret == 0) {
        pub->token = axon_fi_new_token();
        pub->next  = axon_fi_srv.pubs;
        axon_fi_srv.pubs = pub;

        memset(name, 0, sizeof(*name));
        memset(&mapped, 0, sizeof(mapped));
        mapped.s6_addr[10] = 0xff;
        mapped.s6_addr[11] = 0xff;
        memcpy(&mapped.s6_addr[12], &axon_fi_srv.ip, 4);
        name->magic   = AXON_FI_NAME_MAGIC;
        name->version = AXON_FI_NAME_VERSION;
        name->length  = sizeof(*name);
        name->port    = axon_fi_srv.port;
        memcpy(name->ip, &mapped, sizeof(name->ip));
        name->host    = axon_fi_srv.host;
        name->token   = pub->token;
    }
    pthread_mutex_unlock(&axon_fi_srv.lock);
    if (ret != 0) {
        free(pub);
    }
    return ret;
}

void axon_fi_addr_withdraw(const axon_fi_name_t *name)
{
    axon_fi_pub_t **pp, *pub;

    pthread_mutex_lock(&axon_fi_srv.lock);
    for (pp = &axon_fi_srv.pubs; (pub = *pp) != NULL; pp = &pub->next) {
        if (pub->token == name->token) {
            *pp = pub->next;
            free(pub);
            break;
        }
    }
    if ((axon_fi_srv.pubs == NULL) && axon_fi_srv.running) {
        axon_fi_srv_stop();
    }
    pthread_mutex_unlock(&axon_fi_srv.lock);
}

/* ---------------------------------------------------------------- client */

static int axon_fi_connect(const struct sockaddr_in *sin)
{
    int fd, err = 0;
    socklen_t elen = sizeof(err);

    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        return -1;
    }
    if ((connect(fd, (const struct sockaddr *)sin, sizeof(*sin)) != 0) &&
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

static int axon_fi_ask(const struct sockaddr_in *sin, uint64_t token, void **addr_p,
                       size_t *len_p)
{
    uint32_t req[4], rep[3];
    uint64_t be_token = htobe64(token);
    void *addr;
    size_t len;
    int fd, ret;

    fd = axon_fi_connect(sin);
    if (fd < 0) {
        return -FI_ECONNREFUSED;
    }
    req[0] = htonl(AXON_FI_SRV_MAGIC);
    req[1] = htonl(AXON_FI_NAME_VERSION);
    memcpy(&req[2], &be_token, sizeof(be_token));
    ret = axon_fi_io(fd, req, sizeof(req), 1);
    if (ret == 0) {
        ret = axon_fi_io(fd, rep, sizeof(rep), 0);
    }
    if ((ret == 0) && ((ntohl(rep[0]) != AXON_FI_SRV_MAGIC) || (ntohl(rep[1]) != 0) ||
                       (ntohl(rep[2]) == 0) || (ntohl(rep[2]) > AXON_FI_ADDR_MAX))) {
        ret = -FI_ENOENT;
    }
    if (ret == 0) {
        len  = ntohl(rep[2]);
        addr = malloc(len);
        if (addr == NULL) {
            ret = -FI_ENOMEM;
        } else if ((ret = axon_fi_io(fd, addr, len, 0)) != 0) {
            free(addr);
        } else {
            *addr_p = addr;
            *len_p  = len;
        }
    }
    close(fd);
    return ret;
}

int axon_fi_addr_fetch(const axon_fi_name_t *name, void **addr_p, size_t *len_p)
{
    struct sockaddr_in sin;
    char str[96];
    int ret = -FI_ECONNREFUSED;

    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_port   = name->port;
    if (name->host == axon_fi_host_hash()) {
        sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ret = axon_fi_ask(&sin, name->token, addr_p, len_p);
    }
    if (ret != 0) {
        memcpy(&sin.sin_addr, &name->ip[12], 4);
        ret = axon_fi_ask(&sin, name->token, addr_p, len_p);
    }
    if (ret != 0) {
        axon_fi_name_str(name, str, sizeof(str));
        AXON_FI_WARN(FI_LOG_AV, "cannot fetch the worker address of %s: %s", str,
                     fi_strerror(-ret));
    }
    return ret;
}
