/* Test harness: peer processes, socket blobs, Axon object helpers. */
#define _GNU_SOURCE  /* setns, unshare */
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/mount.h>
#include <sys/prctl.h>
#endif
#include <sys/mman.h>
#include <sys/stat.h>
/* The ring's own claim, for the white-box helper below. */
#include "../../components/shm/shm_seg.h"

double axon_test_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void axon_test_sleep(double seconds)
{
    struct timespec ts;
    ts.tv_sec  = (time_t)seconds;
    ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ---------------------------------------------------------------- stacks */

/*
 * A peer that does not answer shows what its threads are doing: the test
 * process sends SIGQUIT to each of them, and the handler every peer installs
 * writes its thread's stack to stderr (the symbols libaxon exports by name,
 * the rest as module+offset for addr2line). The test process knows its peers
 * by the socket it waits on.
 */
#define AXON_TEST_MAX_PEERS 64

static struct {
    int   fd;
    pid_t pid;
} axon_test_live_peers[AXON_TEST_MAX_PEERS];

static void axon_test_peer_track(int fd, pid_t pid)
{
    int i;

    for (i = 0; i < AXON_TEST_MAX_PEERS; ++i) {
        if (axon_test_live_peers[i].pid <= 0) {
            axon_test_live_peers[i].fd  = fd;
            axon_test_live_peers[i].pid = pid;
            return;
        }
    }
}

static void axon_test_peer_close_fd(axon_test_peer_t *peer)
{
    int i;

    for (i = 0; i < AXON_TEST_MAX_PEERS; ++i) {
        if ((axon_test_live_peers[i].pid > 0) && (axon_test_live_peers[i].fd == peer->fd)) {
            axon_test_live_peers[i].pid = 0;
        }
    }
    if (peer->fd >= 0) {
        close(peer->fd);
        peer->fd = -1;
    }
}

/* The calling thread's stack: a peer's thread SIGQUIT was sent to, or one that crashed. */
static void axon_test_stack_handler(int sig)
{
    void *frames[64];
    char  head[80];
    int   n   = backtrace(frames, 64);
    int   len = snprintf(head, sizeof(head), "[peer %d] thread %ld:\n", (int)getpid(),
                         (long)syscall(SYS_gettid));

    (void)sig;
    if (write(STDERR_FILENO, head, (size_t)len) == len) {
        backtrace_symbols_fd(frames, n, STDERR_FILENO);
    }
}

/*
 * A crash says where: the faulting thread's stack, then the default action
 * (the exit status still says which signal). The sanitizers report crashes
 * their own, better way, and keep their handlers.
 */
static void axon_test_crash_handler(int sig)
{
    axon_test_stack_handler(sig);
    signal(sig, SIG_DFL);
    raise(sig);
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define AXON_TEST_CRASH_STACKS 0
#else
#define AXON_TEST_CRASH_STACKS 1
#endif

static void axon_test_crash_handler_install(void)
{
    static const int crashes[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};
    struct sigaction sa;
    void            *frame;
    size_t           i;

    backtrace(&frame, 1);  /* loads the unwinder now, not inside the handler */
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = axon_test_crash_handler;
    sa.sa_flags   = SA_RESETHAND | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    for (i = 0; AXON_TEST_CRASH_STACKS && (i < sizeof(crashes) / sizeof(crashes[0])); ++i) {
        sigaction(crashes[i], &sa, NULL);
    }
}

/* The test process too (its peers inherit it): a crash in CI says where. */
__attribute__((constructor)) static void axon_test_crash_stacks_init(void)
{
    axon_test_crash_handler_install();
}

static void axon_test_stack_handler_install(void)
{
    struct sigaction sa;
    void            *frame;
    sigset_t         set;

    backtrace(&frame, 1);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = axon_test_stack_handler;
    sa.sa_flags   = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGQUIT, &sa, NULL);
    sigemptyset(&set);
    sigaddset(&set, SIGQUIT);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
}

void axon_test_peer_show_stacks(pid_t pid)
{
    char           path[64];
    struct dirent *entry;
    DIR           *dir;
    long           tid;

    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    dir = opendir(path);
    if (dir == NULL) {
        return;
    }
    fprintf(stderr, "[harness] peer %d does not answer; the stacks of its threads:\n", (int)pid);
    while ((entry = readdir(dir)) != NULL) {
        tid = strtol(entry->d_name, NULL, 10);
        if ((tid > 0) && (syscall(SYS_tgkill, (long)pid, tid, SIGQUIT) == 0)) {
            axon_test_sleep(0.2);  /* one thread at a time: their lines do not mix */
        }
    }
    closedir(dir);
}

/* The test process waited on fd in vain: if a peer is at the other end, show its stacks. */
static void axon_test_show_stacks_of_fd(int fd)
{
    int i;

    for (i = 0; i < AXON_TEST_MAX_PEERS; ++i) {
        if ((axon_test_live_peers[i].pid > 0) && (axon_test_live_peers[i].fd == fd)) {
            axon_test_peer_show_stacks(axon_test_live_peers[i].pid);
        }
    }
}

/* ---------------------------------------------------------------- peers */

int axon_test_peer_spawn(axon_test_peer_t *peer, axon_test_peer_fn_t fn, void *arg,
                         double timeout_sec)
{
    int   sv[2];
    pid_t parent = getpid();
    pid_t pid;

    peer->pid = -1;
    peer->fd  = -1;
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        return -1;
    }

    /* Buffered output must not be written twice, by the child too. */
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        close(sv[0]);
        close(sv[1]);
        return -1;
    }

    if (pid == 0) {
        sigset_t set;
        unsigned secs = (unsigned)ceil(timeout_sec > 0 ? timeout_sec : 1.0);

        close(sv[0]);
        memset(axon_test_live_peers, 0, sizeof(axon_test_live_peers));  /* the test's, not ours */
        axon_test_stack_handler_install();
#ifdef __linux__
        /* An orphan would outlive a crashed test run. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) {
            _exit(126);
        }
#else
        (void)parent;
#endif
        signal(SIGALRM, SIG_DFL);
        sigemptyset(&set);
        sigaddset(&set, SIGALRM);
        sigprocmask(SIG_UNBLOCK, &set, NULL);
        alarm(secs);
        _exit(fn(sv[1], arg));
    }

    close(sv[1]);
    peer->pid = pid;
    peer->fd  = sv[0];
    axon_test_peer_track(peer->fd, pid);
    return 0;
}

/*
 * A child killed before it could clean up leaves its shared-memory segments
 * (named <prefix>-<uid>-<pid>-<n>); remove them so later tests see a clean
 * /dev/shm.
 */
void axon_test_remove_shm_of(pid_t pid)
{
    char     needle[64];
    char   **names;
    unsigned count, i;

    snprintf(needle, sizeof(needle), "-%u-%d-", (unsigned)geteuid(), (int)pid);
    names = axon_test_list_shm(needle, &count);
    for (i = 0; i < count; ++i) {
        char path[512];
        snprintf(path, sizeof(path), "/dev/shm/%s", names[i]);
        if (unlink(path) == 0) {
            fprintf(stderr, "[harness] removed %s left by peer %d\n", path, (int)pid);
        }
    }
    axon_test_names_free(names, count);
}

static int axon_test_peer_reap(axon_test_peer_t *peer, int status)
{
    if (!WIFEXITED(status)) {
        axon_test_remove_shm_of(peer->pid);
    }
    peer->pid = -1;
    axon_test_peer_close_fd(peer);
    if (WIFEXITED(status)) {
        return WEXITSTATUS(status);
    }
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "[harness] peer killed by signal %d (%s)\n", WTERMSIG(status),
                strsignal(WTERMSIG(status)));
    }
    return -1;
}

void axon_test_peer_fail(const char *file, int line, const char *cond, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "[peer %d] %s:%d: %s failed:", (int)getpid(), file, line, cond);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int axon_test_peer_wait(axon_test_peer_t *peer, double timeout_sec)
{
    double deadline = axon_test_time() + timeout_sec;
    double nap      = 0.0005;
    int    status;
    pid_t  ret;

    if (peer->pid <= 0) {
        return -1;
    }

    for (;;) {
        ret = waitpid(peer->pid, &status, WNOHANG);
        if (ret == peer->pid) {
            return axon_test_peer_reap(peer, status);
        }
        if ((ret < 0) && (errno != EINTR)) {
            peer->pid = -1;
            return -1;
        }
        if (axon_test_time() > deadline) {
            break;
        }
        axon_test_sleep(nap);
        if (nap < 0.01) {
            nap *= 2;
        }
    }

    fprintf(stderr, "[harness] peer %d did not exit within %.1f s: killing it\n",
            (int)peer->pid, timeout_sec);
    axon_test_peer_show_stacks(peer->pid);
    kill(peer->pid, SIGKILL);
    while ((waitpid(peer->pid, &status, 0) < 0) && (errno == EINTR)) {
    }
    axon_test_peer_reap(peer, status);
    return -1;
}

void axon_test_peer_kill(axon_test_peer_t *peer)
{
    int status;

    if (peer->pid > 0) {
        kill(peer->pid, SIGKILL);
        while ((waitpid(peer->pid, &status, 0) < 0) && (errno == EINTR)) {
        }
        axon_test_remove_shm_of(peer->pid);
        peer->pid = -1;
    }
    axon_test_peer_close_fd(peer);
}

pid_t axon_test_peer_crash(axon_test_peer_t *peer)
{
    pid_t pid = peer->pid;
    int   status;

    if (pid <= 0) {
        return -1;
    }
    kill(pid, SIGKILL);
    while ((waitpid(pid, &status, 0) < 0) && (errno == EINTR)) {
    }
    peer->pid = -1;
    axon_test_peer_close_fd(peer);
    return pid;
}

int axon_test_peer_stop(axon_test_peer_t *peer)
{
    int status;

    if ((peer->pid <= 0) || (kill(peer->pid, SIGSTOP) != 0)) {
        return -1;
    }
    /* WUNTRACED reports the stop once the whole thread group has stopped. */
    while (waitpid(peer->pid, &status, WUNTRACED) < 0) {
        if (errno != EINTR) {
            return -1;
        }
    }
    return WIFSTOPPED(status) ? 0 : -1;
}

/* ---------------------------------------------------------------- blobs */

/* Wait until fd is ready for events; 0 if ready, -1 on timeout or error. */
static int axon_test_wait_fd(int fd, short events, double deadline)
{
    struct pollfd pfd;
    int           ret;

    for (;;) {
        double left = deadline - axon_test_time();
        if (left <= 0) {
            axon_test_show_stacks_of_fd(fd);
            errno = ETIMEDOUT;
            return -1;
        }
        pfd.fd      = fd;
        pfd.events  = events;
        pfd.revents = 0;
        ret = poll(&pfd, 1, (int)(left * 1000) + 1);
        if (ret > 0) {
            return 0;
        }
        if ((ret < 0) && (errno != EINTR)) {
            return -1;
        }
    }
}

static int axon_test_write_all(int fd, const void *buf, size_t len, double deadline)
{
    const char *p = (const char *)buf;
    ssize_t     n;

    while (len > 0) {
        if (axon_test_wait_fd(fd, POLLOUT, deadline) != 0) {
            return -1;
        }
        n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0) {
            if ((errno == EINTR) || (errno == EAGAIN)) {
                continue;
            }
            return -1;
        }
        p   += n;
        len -= (size_t)n;
    }
    return 0;
}

static int axon_test_read_all(int fd, void *buf, size_t len, double deadline)
{
    char   *p = (char *)buf;
    ssize_t n;

    while (len > 0) {
        if (axon_test_wait_fd(fd, POLLIN, deadline) != 0) {
            return -1;
        }
        n = read(fd, p, len);
        if (n < 0) {
            if ((errno == EINTR) || (errno == EAGAIN)) {
                continue;
            }
            return -1;
        }
        if (n == 0) {
            errno = EPIPE;  /* the peer closed its end */
            return -1;
        }
        p   += n;
        len -= (size_t)n;
    }
    return 0;
}

int axon_test_send_blob(int fd, const void *buf, size_t len)
{
    double   deadline = axon_test_time() + AXON_TEST_IO_TIMEOUT;
    uint64_t hdr      = len;

    if (axon_test_write_all(fd, &hdr, sizeof(hdr), deadline) != 0) {
        return -1;
    }
    return axon_test_write_all(fd, buf, len, deadline);
}

int axon_test_recv_blob(int fd, void **buf_p, size_t *len_p)
{
    double   deadline = axon_test_time() + AXON_TEST_IO_TIMEOUT;
    uint64_t hdr;
    void    *buf;

    if (axon_test_read_all(fd, &hdr, sizeof(hdr), deadline) != 0) {
        return -1;
    }
    if (hdr > (1ull << 30)) {
        errno = EPROTO;
        return -1;
    }
    buf = malloc(hdr ? (size_t)hdr : 1);
    if (buf == NULL) {
        return -1;
    }
    if (axon_test_read_all(fd, buf, (size_t)hdr, deadline) != 0) {
        free(buf);
        return -1;
    }
    *buf_p = buf;
    *len_p = (size_t)hdr;
    return 0;
}

int axon_test_exchange_address(int fd, const void *my_addr, size_t my_len,
                               void **peer_addr_p, size_t *peer_len_p)
{
    /* A socketpair buffers far more than an address: sending first cannot block. */
    if (axon_test_send_blob(fd, my_addr, my_len) != 0) {
        return -1;
    }
    return axon_test_recv_blob(fd, peer_addr_p, peer_len_p);
}

int axon_test_sync(int fd)
{
    double deadline = axon_test_time() + AXON_TEST_IO_TIMEOUT;
    char   c        = 's';

    if (axon_test_write_all(fd, &c, 1, deadline) != 0) {
        return -1;
    }
    return axon_test_read_all(fd, &c, 1, deadline);
}

int axon_test_sync_progress(int fd, axon_worker_h worker, double timeout_sec)
{
    double deadline = axon_test_time() + timeout_sec;
    char   c        = 's';

    if (axon_test_write_all(fd, &c, 1, deadline) != 0) {
        return -1;
    }
    while (axon_test_time() < deadline) {
        struct pollfd pfd = {fd, POLLIN, 0};
        axon_test_progress(worker);
        if (poll(&pfd, 1, 0) > 0) {
            return axon_test_read_all(fd, &c, 1, deadline);
        }
    }
    axon_test_show_stacks_of_fd(fd);
    errno = ETIMEDOUT;
    return -1;
}

/* ---------------------------------------------------------------- nodes */

axon_status_t axon_test_node_create(axon_test_node_t *node, const char *tls,
                                    const axon_config_kv_t *extra, size_t extra_count)
{
    return axon_test_node_create_features(node, AXON_FEATURE_TAG, tls, extra, extra_count);
}

axon_status_t axon_test_node_create_features(axon_test_node_t *node, uint32_t features,
                                             const char *tls, const axon_config_kv_t *extra,
                                             size_t extra_count)
{
    axon_context_params_t params;
    axon_config_kv_t     *kv;
    size_t                n = 0, i;
    axon_status_t         status;

    memset(node, 0, sizeof(*node));
    kv = (axon_config_kv_t *)calloc(extra_count + 1, sizeof(*kv));
    if (kv == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    if (tls != NULL) {
        kv[n].name  = "TLS";
        kv[n].value = tls;
        ++n;
    }
    for (i = 0; i < extra_count; ++i) {
        kv[n++] = extra[i];
    }

    memset(&params, 0, sizeof(params));
    params.features     = features;
    params.config       = kv;
    params.config_count = n;
    status = axon_init(&params, &node->context);
    free(kv);
    if (status != AXON_OK) {
        goto err;
    }

    status = axon_worker_create(node->context, NULL, &node->worker);
    if (status != AXON_OK) {
        goto err_cleanup;
    }

    status = axon_worker_get_address(node->worker, &node->address, &node->address_length);
    if (status != AXON_OK) {
        goto err_destroy;
    }
    return AXON_OK;

err_destroy:
    axon_worker_destroy(node->worker);
err_cleanup:
    axon_cleanup(node->context);
err:
    memset(node, 0, sizeof(*node));
    return status;
}

void axon_test_node_destroy(axon_test_node_t *node)
{
    if (node->address != NULL) {
        axon_worker_release_address(node->worker, node->address);
    }
    if (node->worker != NULL) {
        axon_worker_destroy(node->worker);
    }
    if (node->context != NULL) {
        axon_cleanup(node->context);
    }
    memset(node, 0, sizeof(*node));
}

axon_status_t axon_test_ep_create(axon_worker_h worker, const void *address, size_t length,
                                  axon_ep_h *ep_p)
{
    return axon_test_ep_create_err(worker, address, length, NULL, NULL, ep_p);
}

axon_status_t axon_test_ep_create_err(axon_worker_h worker, const void *address, size_t length,
                                      axon_ep_error_callback_t err_cb, void *err_cb_arg,
                                      axon_ep_h *ep_p)
{
    axon_ep_params_t params;

    memset(&params, 0, sizeof(params));
    params.address        = address;
    params.address_length = length;
    params.err_cb         = err_cb;
    params.err_cb_arg     = err_cb_arg;
    return axon_ep_create(worker, &params, ep_p);
}

int axon_test_connect_peer(int fd, const axon_test_node_t *node, axon_ep_h *ep_p)
{
    void  *peer_addr;
    size_t peer_len;
    int    ret;

    if (axon_test_exchange_address(fd, node->address, node->address_length, &peer_addr,
                                   &peer_len) != 0) {
        return -1;
    }
    ret = (axon_test_ep_create(node->worker, peer_addr, peer_len, ep_p) == AXON_OK) ? 0 : -1;
    free(peer_addr);
    return ret;
}

axon_status_t axon_test_ep_close(axon_worker_h worker, axon_ep_h ep, unsigned mode,
                                 double timeout_sec)
{
    axon_request_h req    = NULL;
    axon_status_t  status = axon_ep_close_nb(ep, mode, &req);

    return axon_test_wait_req(worker, status, req, NULL, timeout_sec);
}

/* ---------------------------------------------------------------- shm internals */

int axon_test_shm_claim_unpublished(pid_t pid)
{
    char                      needle[64], path[512];
    char                    **names;
    unsigned                  count, i;
    const axon_shm_seg_ctl_t *ctl;
    axon_shm_sender_t        *slots, *mine = NULL;
    axon_shm_fifo_t           fifo;
    axon_shm_cell_t          *cell;
    struct stat               st;
    uint64_t                  pos, owner;
    int                       wake;
    void                     *addr;
    int                       fd, ret = -1;

    snprintf(needle, sizeof(needle), "-%u-%d-", (unsigned)geteuid(), (int)pid);
    names = axon_test_list_shm(needle, &count);
    if (count != 1) {
        axon_test_names_free(names, count);
        return -1;
    }
    snprintf(path, sizeof(path), "/dev/shm/%s", names[0]);
    axon_test_names_free(names, count);
    fd = open(path, O_RDWR);
    if (fd < 0) {
        return -1;
    }
    if ((fstat(fd, &st) != 0) || (st.st_size < (off_t)sizeof(*ctl))) {
        close(fd);
        return -1;
    }
    addr = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (addr == MAP_FAILED) {
        return -1;
    }
    /* Layout of shm_seg.c: control line, ring tail, slots' line, slots, cells. */
    ctl   = (const axon_shm_seg_ctl_t *)addr;
    slots = (axon_shm_sender_t *)((char *)addr + sizeof(axon_shm_seg_ctl_t) +
                                  sizeof(axon_shm_fifo_ctl_t) + sizeof(axon_shm_senders_ctl_t));
    if ((ctl->magic != AXON_SHM_SEG_MAGIC) || (ctl->version != AXON_SHM_SEG_VERSION) ||
        ((size_t)ctl->cells_offset + (size_t)ctl->fifo_size * ctl->cell_size >
         (size_t)st.st_size) ||
        ((char *)(slots + ctl->senders) > (char *)addr + ctl->cells_offset)) {
        goto out;
    }
    /* The slot our endpoint to that ring holds. */
    for (i = 0; i < ctl->senders; ++i) {
        owner = atomic_load(&slots[i].owner);
        if (((owner & AXON_SHM_SENDER_PID_MASK) == (uint64_t)getpid()) &&
            (owner & AXON_SHM_SENDER_READY)) {
            mine = &slots[i];
            break;
        }
    }
    if (mine == NULL) {
        goto out;
    }
    axon_shm_fifo_view(&fifo, (axon_shm_seg_ctl_t *)addr + 1, (char *)addr + ctl->cells_offset,
                       ctl->fifo_size, ctl->cell_size);
    if (axon_shm_fifo_claim(&fifo, &mine->claim, &cell, &pos, &wake) == AXON_OK) {
        ret = 0;  /* and never published */
    }
out:
    munmap(addr, (size_t)st.st_size);
    return ret;
}

/* ---------------------------------------------------------------- network namespaces */

#define AXON_TEST_NETNS_DIR    "/var/run/netns"
#define AXON_TEST_NETNS_PREFIX "axt-"

/* Run ip(8) with the arguments (NULL-terminated); its exit status, 127 if it could not run. */
static int axon_test_ip(const char *arg, ...)
{
    const char *argv[16];
    va_list     ap;
    int         argc = 0, status;
    pid_t       pid;

    argv[argc++] = "ip";
    va_start(ap, arg);
    for (; (arg != NULL) && (argc < 15); arg = va_arg(ap, const char *)) {
        argv[argc++] = arg;
    }
    va_end(ap);
    argv[argc] = NULL;

    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        return 127;
    }
    if (pid == 0) {
        execvp("ip", (char *const *)argv);
        _exit(127);
    }
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            return 127;
        }
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 127;
}

/* Does this process have CAP_SYS_ADMIN (what creating a namespace needs)? */
static int axon_test_have_sys_admin(void)
{
    FILE              *f = fopen("/proc/self/status", "r");
    char               line[256];
    unsigned long long caps = 0;

    if (f == NULL) {
        return 0;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "CapEff: %llx", &caps) == 1) {
            break;
        }
    }
    fclose(f);
    return (caps >> 21) & 1;  /* CAP_SYS_ADMIN */
}

/* Namespaces named axt-<pid>-* whose test process is gone: a crashed run's. */
static void axon_test_netns_sweep(void)
{
    DIR           *dir = opendir(AXON_TEST_NETNS_DIR);
    struct dirent *ent;
    char           stale[16][256];
    unsigned       count = 0, i;
    int            pid;

    if (dir == NULL) {
        return;
    }
    while (((ent = readdir(dir)) != NULL) && (count < 16)) {
        if ((sscanf(ent->d_name, AXON_TEST_NETNS_PREFIX "%d-", &pid) == 1) && (pid > 0) &&
            (kill(pid, 0) != 0) && (errno == ESRCH)) {
            snprintf(stale[count++], sizeof(stale[0]), "%s", ent->d_name);
        }
    }
    closedir(dir);
    for (i = 0; i < count; ++i) {
        fprintf(stderr, "[harness] removing network namespace %s left by a dead run\n",
                stale[i]);
        axon_test_ip("netns", "del", stale[i], NULL);
    }
}

int axon_test_netns_create(axon_test_netns_t *ns)
{
    static unsigned counter;
    unsigned        n = counter++;
    unsigned        side;
    int             ret;

    memset(ns, 0, sizeof(*ns));
    axon_test_netns_sweep();
    for (side = 0; side < 2; ++side) {
        snprintf(ns->name[side], sizeof(ns->name[side]), AXON_TEST_NETNS_PREFIX "%d-%u-%c",
                 (int)getpid(), n, (char)('a' + side));
        snprintf(ns->addr[side], sizeof(ns->addr[side]), "10.199.%u.%u", n % 256, side + 1);
    }
    /* Each end lives in its own namespace, so one name serves both. */
    snprintf(ns->ifname, sizeof(ns->ifname), "axv0");

    ret = axon_test_ip("netns", "add", ns->name[0], NULL);
    if (ret != 0) {
        if ((ret == 127) || (geteuid() != 0) || !axon_test_have_sys_admin()) {
            return 1;
        }
        fprintf(stderr, "[harness] ip netns add %s failed (%d)\n", ns->name[0], ret);
        return -1;
    }
    ns->created = 1;
    if (axon_test_ip("netns", "add", ns->name[1], NULL) != 0) {
        fprintf(stderr, "[harness] ip netns add %s failed\n", ns->name[1]);
        goto err;
    }
    ns->created = 2;
    /* Created inside side 0, the peer end straight in side 1: nothing touches ours. */
    if (axon_test_ip("-n", ns->name[0], "link", "add", ns->ifname, "type", "veth", "peer",
                     "name", ns->ifname, "netns", ns->name[1], NULL) != 0) {
        fprintf(stderr, "[harness] creating the veth pair in %s failed\n", ns->name[0]);
        goto err;
    }
    for (side = 0; side < 2; ++side) {
        char cidr[24];
        snprintf(cidr, sizeof(cidr), "%s/24", ns->addr[side]);
        if ((axon_test_ip("-n", ns->name[side], "addr", "add", cidr, "dev", ns->ifname,
                          NULL) != 0) ||
            (axon_test_ip("-n", ns->name[side], "link", "set", ns->ifname, "up", NULL) != 0) ||
            (axon_test_ip("-n", ns->name[side], "link", "set", "lo", "up", NULL) != 0)) {
            fprintf(stderr, "[harness] configuring %s in %s failed\n", ns->ifname,
                    ns->name[side]);
            goto err;
        }
    }
    return 0;

err:
    axon_test_netns_destroy(ns);
    return -1;
}

int axon_test_netns_enter(const axon_test_netns_t *ns, int side)
{
#ifdef __linux__
    char path[128];
    int  fd, ret;

    snprintf(path, sizeof(path), AXON_TEST_NETNS_DIR "/%s", ns->name[side]);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    ret = setns(fd, CLONE_NEWNET);
    close(fd);
    if (ret != 0) {
        return -1;
    }
    /* /sys shows the devices of the namespace it was mounted in: remount it privately. */
    if ((unshare(CLONE_NEWNS) == 0) &&
        (mount("none", "/", NULL, MS_SLAVE | MS_REC, NULL) == 0) &&
        (umount2("/sys", MNT_DETACH) == 0)) {
        mount(ns->name[side], "/sys", "sysfs", 0, NULL);
    }
    /* A veth end reports carrier a moment after both ends are up: wait for it. */
    snprintf(path, sizeof(path), "/sys/class/net/%s/operstate", ns->ifname);
    for (double end = axon_test_time() + 5.0; axon_test_time() < end; axon_test_sleep(0.005)) {
        char  state[16] = "";
        FILE *f         = fopen(path, "r");
        if (f == NULL) {
            break;  /* no sysfs of our own: nothing to wait on */
        }
        ret = (fgets(state, sizeof(state), f) != NULL) && !strncmp(state, "up", 2);
        fclose(f);
        if (ret) {
            break;
        }
    }
    return 0;
#else
    (void)ns;
    (void)side;
    errno = ENOSYS;
    return -1;
#endif
}

void axon_test_netns_destroy(axon_test_netns_t *ns)
{
    while (ns->created > 0) {
        const char *name = ns->name[--ns->created];
        if (axon_test_ip("netns", "del", name, NULL) != 0) {
            fprintf(stderr, "[harness] ip netns del %s failed\n", name);
        }
    }
}

/* ---------------------------------------------------------------- progress */

static axon_test_progress_hook_t axon_test_hook;
static void                     *axon_test_hook_arg;

void axon_test_set_progress_hook(axon_test_progress_hook_t hook, void *arg)
{
    axon_test_hook     = hook;
    axon_test_hook_arg = arg;
}

/*
 * Idle for this long, a test naps between polls instead of yielding: most
 * waits of the fault and slow tests are timers (a peer declared dead after
 * seconds, a retransmission), and yielding through them kept a core busy
 * (the Fault and Timed tests: 190 s of CPU in 100 s on two cores, half of
 * it in sched_yield), the CPU CI's background builds run on. Traffic in
 * flight never idles this long, so message rates are untouched.
 */
#define AXON_TEST_IDLE_BEFORE_NAP 0.001   /* s */
#define AXON_TEST_NAP_US          100

unsigned axon_test_progress(axon_worker_h worker)
{
    static __thread double idle_since;   /* 0: the last poll did something */
    unsigned count = axon_worker_progress(worker);
    double   now;

    if (count != 0) {
        idle_since = 0;
    } else {
        /* Peers may share a core with us: an idle poll gives it up. */
        now = axon_test_time();
        if (idle_since == 0) {
            idle_since = now;
        }
        if (now - idle_since < AXON_TEST_IDLE_BEFORE_NAP) {
            sched_yield();
        } else {
            usleep(AXON_TEST_NAP_US);
        }
    }
    if (axon_test_hook != NULL) {
        axon_test_hook(axon_test_hook_arg);
    }
    return count;
}

axon_status_t axon_test_wait_req(axon_worker_h worker, axon_status_t status,
                                 axon_request_h req, axon_tag_recv_info_t *info,
                                 double timeout_sec)
{
    double deadline;

    if (status != AXON_INPROGRESS) {
        return status;
    }

    deadline = axon_test_time() + timeout_sec;
    for (;;) {
        status = axon_request_test(req, info);
        if (status != AXON_INPROGRESS) {
            break;
        }
        if (axon_test_time() > deadline) {
            status = AXON_ERR_TIMED_OUT;
            break;
        }
        axon_test_progress(worker);
    }
    axon_request_free(req);
    return status;
}

int axon_test_progress_until(axon_worker_h worker, const volatile int *flag,
                             double timeout_sec)
{
    double deadline = axon_test_time() + timeout_sec;

    while (!*flag && (axon_test_time() < deadline)) {
        axon_test_progress(worker);
    }
    return *flag;
}

void axon_test_progress_for(axon_worker_h worker, double seconds)
{
    double deadline = axon_test_time() + seconds;

    while (axon_test_time() < deadline) {
        axon_test_progress(worker);
    }
}

axon_status_t axon_test_send(axon_worker_h worker, axon_ep_h ep, const void *buf, size_t len,
                             axon_tag_t tag, double timeout_sec)
{
    axon_request_h req    = NULL;
    axon_status_t  status = axon_tag_send_nb(ep, buf, len, tag, NULL, &req);

    return axon_test_wait_req(worker, status, req, NULL, timeout_sec);
}

axon_status_t axon_test_recv(axon_worker_h worker, void *buf, size_t len, axon_tag_t tag,
                             axon_tag_t tag_mask, axon_tag_recv_info_t *info,
                             double timeout_sec)
{
    axon_tag_recv_info_t imm_info;
    axon_request_param_t param;
    axon_request_h       req = NULL;
    axon_status_t        status;

    memset(&param, 0, sizeof(param));
    memset(&imm_info, 0, sizeof(imm_info));
    param.recv_info = &imm_info;
    status = axon_tag_recv_nb(worker, buf, len, tag, tag_mask, &param, &req);
    if (status == AXON_INPROGRESS) {
        return axon_test_wait_req(worker, status, req, info, timeout_sec);
    }
    if (info != NULL) {
        *info = imm_info;
    }
    return status;
}

/* ---------------------------------------------------------------- data */

void axon_test_fill_at(void *buf, size_t len, uint64_t seed, size_t base)
{
    uint8_t *p = (uint8_t *)buf;
    size_t   i;

    for (i = 0; i < len; ++i) {
        p[i] = axon_test_pattern_byte(seed, base + i);
    }
}

ssize_t axon_test_check_at(const void *buf, size_t len, uint64_t seed, size_t base)
{
    const uint8_t *p = (const uint8_t *)buf;
    size_t         i;

    for (i = 0; i < len; ++i) {
        if (p[i] != axon_test_pattern_byte(seed, base + i)) {
            return (ssize_t)i;
        }
    }
    return -1;
}

void axon_test_fill(void *buf, size_t len, uint64_t seed)
{
    axon_test_fill_at(buf, len, seed, 0);
}

ssize_t axon_test_check(const void *buf, size_t len, uint64_t seed)
{
    return axon_test_check_at(buf, len, seed, 0);
}

/* ---------------------------------------------------------------- stderr */

static int axon_test_saved_stderr = -1;
static int axon_test_capture_fd   = -1;

int axon_test_stderr_capture_begin(void)
{
    char path[] = "/tmp/axon-test-stderr-XXXXXX";
    int  fd;

    if (axon_test_saved_stderr >= 0) {
        return -1;
    }
    fd = mkstemp(path);
    if (fd < 0) {
        return -1;
    }
    unlink(path);
    fflush(stderr);
    axon_test_saved_stderr = dup(2);
    if ((axon_test_saved_stderr < 0) || (dup2(fd, 2) < 0)) {
        close(fd);
        if (axon_test_saved_stderr >= 0) {
            close(axon_test_saved_stderr);
            axon_test_saved_stderr = -1;
        }
        return -1;
    }
    axon_test_capture_fd = fd;
    return 0;
}

char *axon_test_stderr_capture_end(void)
{
    char   *text;
    off_t   size;
    ssize_t n;
    size_t  got = 0;

    if (axon_test_saved_stderr < 0) {
        return NULL;
    }
    fflush(stderr);
    dup2(axon_test_saved_stderr, 2);
    close(axon_test_saved_stderr);
    axon_test_saved_stderr = -1;

    size = lseek(axon_test_capture_fd, 0, SEEK_END);
    text = (char *)malloc((size > 0 ? (size_t)size : 0) + 1);
    if (text != NULL) {
        while (size > 0 && got < (size_t)size) {
            n = pread(axon_test_capture_fd, text + got, (size_t)size - got, (off_t)got);
            if (n <= 0) {
                break;
            }
            got += (size_t)n;
        }
        text[got] = '\0';
    }
    close(axon_test_capture_fd);
    axon_test_capture_fd = -1;
    return text;
}

/* ---------------------------------------------------------------- /dev/shm */

char **axon_test_list_shm(const char *needle, unsigned *count_p)
{
    DIR           *dir = opendir("/dev/shm");
    struct dirent *ent;
    char         **names = NULL, **grown;
    unsigned       count = 0;

    *count_p = 0;
    if (dir == NULL) {
        return NULL;
    }
    while ((ent = readdir(dir)) != NULL) {
        if (strstr(ent->d_name, needle) == NULL) {
            continue;
        }
        grown = (char **)realloc(names, (count + 1) * sizeof(*names));
        if (grown == NULL) {
            break;
        }
        names          = grown;
        names[count++] = strdup(ent->d_name);
    }
    closedir(dir);
    *count_p = count;
    return names;
}

void axon_test_names_free(char **names, unsigned count)
{
    unsigned i;

    for (i = 0; (names != NULL) && (i < count); ++i) {
        free(names[i]);
    }
    free(names);
}
