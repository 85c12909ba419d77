/*
 * Test harness: peer processes, blob exchange over a socket, and helpers
 * that build Axon objects and wait for requests with a deadline; network
 * namespaces for runs that need two hosts, and one white-box helper that
 * plays a peer dying inside the shm ring.
 *
 * Peers are forked children joined to the test by a socketpair; a child runs
 * one function and _exit()s with its return value, so it never returns into
 * the test framework. A test that uses peers forks them before it creates
 * any Axon object of its own: each child builds its own context and worker.
 * Every wait here has a deadline, so a broken peer fails a test instead of
 * hanging it.
 */
#ifndef AXON_TEST_HARNESS_H
#define AXON_TEST_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "axon.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Deadline of one blob transfer over a peer socket. */
#define AXON_TEST_IO_TIMEOUT 60.0

/* ---------------------------------------------------------------- peers */

typedef struct axon_test_peer {
    pid_t pid;  /* -1 once reaped */
    int   fd;   /* the test's end of the socketpair; -1 once closed */
} axon_test_peer_t;

typedef int (*axon_test_peer_fn_t)(int fd, void *arg);

/*
 * Fork a child that runs fn(fd, arg) and _exit()s with its result. The child
 * is killed by SIGALRM after timeout_sec and by SIGKILL if the test process
 * dies. Returns 0, or -1 (errno set) if the socketpair or fork failed.
 */
int  axon_test_peer_spawn(axon_test_peer_t *peer, axon_test_peer_fn_t fn, void *arg,
                          double timeout_sec);

/*
 * Reap the child: its exit code, or -1 if it died by a signal or did not exit
 * within timeout_sec (it is then killed with SIGKILL). Always reaps and
 * closes the socket; a second call returns -1. A child that did not exit
 * normally has its /dev/shm segments (*-<uid>-<pid>-*) removed.
 */
int  axon_test_peer_wait(axon_test_peer_t *peer, double timeout_sec);

/*
 * In a peer function: a failed check prints where (and the optional printf
 * arguments) and makes the peer return 1, so the test's peer_wait fails.
 */
#define PEER_CHECK(_cond, ...)                                                     \
    do {                                                                           \
        if (!(_cond)) {                                                            \
            axon_test_peer_fail(__FILE__, __LINE__, #_cond, " " __VA_ARGS__);      \
            return 1;                                                              \
        }                                                                          \
    } while (0)

void axon_test_peer_fail(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Kill and reap without waiting (cleanup after a failed test). */
void axon_test_peer_kill(axon_test_peer_t *peer);

/*
 * Crash the child: SIGKILL, then reap it as its launcher would, so it is
 * gone (not a zombie) for peers that look for it. Unlike the calls above it
 * leaves the child's /dev/shm segments in place, as a real crash does; the
 * test removes them later with axon_test_remove_shm_of(pid). Returns the
 * pid the child had, or -1 if there was none.
 */
pid_t axon_test_peer_crash(axon_test_peer_t *peer);

/*
 * Stop the child whole (SIGSTOP) and return once every thread of it has
 * stopped: kill() alone returns while a thread may still run for a moment.
 * 0 on success, -1 if there is no child or it did not stop.
 */
int axon_test_peer_stop(axon_test_peer_t *peer);

/*
 * Print the stack of every thread of a peer to stderr (each peer writes its
 * own on SIGQUIT). Waits on a peer's socket that time out, and a peer that
 * does not exit in time, call it by themselves.
 */
void axon_test_peer_show_stacks(pid_t pid);

/* Remove the /dev/shm segments (*-<uid>-<pid>-*) of a process that is gone. */
void axon_test_remove_shm_of(pid_t pid);

/* ---------------------------------------------------------------- blobs */

/* Send len bytes prefixed by their length. 0 on success, -1 on error. */
int  axon_test_send_blob(int fd, const void *buf, size_t len);
/*
 * Receive one blob into a malloc'd buffer (at least 1 byte allocated, so a
 * 0-length blob still gives a non-NULL pointer). 0 on success, -1 on error,
 * end of stream or after AXON_TEST_IO_TIMEOUT.
 */
int  axon_test_recv_blob(int fd, void **buf_p, size_t *len_p);
/* Send my address, then receive the peer's (both sides call this). */
int  axon_test_exchange_address(int fd, const void *my_addr, size_t my_len,
                                void **peer_addr_p, size_t *peer_len_p);
/* A barrier over the socket: both sides call it; 0 on success. */
int  axon_test_sync(int fd);
/* Same, progressing worker while waiting (so the peer's sends can drain). */
int  axon_test_sync_progress(int fd, axon_worker_h worker, double timeout_sec);

/* ---------------------------------------------------------------- nodes */

/* A context and one worker, with the worker's address. */
typedef struct axon_test_node {
    axon_context_h context;
    axon_worker_h  worker;
    void          *address;
    size_t         address_length;
} axon_test_node_t;

/*
 * Build a context (features TAG, TLS=tls unless tls is NULL, then the extra
 * overrides) and a worker. On failure nothing is left allocated.
 */
axon_status_t axon_test_node_create(axon_test_node_t *node, const char *tls,
                                    const axon_config_kv_t *extra, size_t extra_count);
/* The same with the context's features (AXON_FEATURE_*) chosen by the caller. */
axon_status_t axon_test_node_create_features(axon_test_node_t *node, uint32_t features,
                                             const char *tls, const axon_config_kv_t *extra,
                                             size_t extra_count);
void          axon_test_node_destroy(axon_test_node_t *node);

/* Create an endpoint to a peer address. */
axon_status_t axon_test_ep_create(axon_worker_h worker, const void *address, size_t length,
                                  axon_ep_h *ep_p);
/* The same with err_cb(err_cb_arg, ep, status) called if the peer fails. */
axon_status_t axon_test_ep_create_err(axon_worker_h worker, const void *address, size_t length,
                                      axon_ep_error_callback_t err_cb, void *err_cb_arg,
                                      axon_ep_h *ep_p);
/* Exchange node's address with the peer on fd and create an endpoint to the peer's; 0 or -1. */
int           axon_test_connect_peer(int fd, const axon_test_node_t *node, axon_ep_h *ep_p);
/* Close an endpoint (mode AXON_EP_CLOSE_*) and wait for the close to finish. */
axon_status_t axon_test_ep_close(axon_worker_h worker, axon_ep_h ep, unsigned mode,
                                 double timeout_sec);

/* ---------------------------------------------------------------- shm internals */

/*
 * White box: claim one cell of the receive ring in the shm segment of
 * process pid (its only one) the way this process's endpoint to it would
 * (announced in the sender slot that endpoint holds), and never publish
 * it, as a producer killed between the two steps leaves it. 0, or -1 if
 * there is no such segment, no slot of ours in it, or its ring is full.
 */
int axon_test_shm_claim_unpublished(pid_t pid);

/* ---------------------------------------------------------------- network namespaces */

/*
 * Two network namespaces joined by a veth pair, for running two peers as on
 * two hosts. Names carry the test process's pid and a counter, so runs never
 * collide; namespaces left by a test process that died are removed by the
 * next create.
 */
typedef struct axon_test_netns {
    char name[2][48];   /* the namespaces, side 0 and side 1 */
    char addr[2][16];   /* IPv4 address of each side's end of the pair */
    char ifname[16];    /* name of the veth end, the same on both sides */
    int  created;       /* namespaces that exist (to delete) */
} axon_test_netns_t;

/*
 * Create both namespaces, each with lo up and its end of the veth pair up
 * and addressed. Returns 0 on success, 1 if this process may not create
 * namespaces (not root, or no ip(8)): the caller skips; -1 on any other
 * failure (stderr says which step). Nothing is left behind on failure.
 */
int  axon_test_netns_create(axon_test_netns_t *ns);
/*
 * In a forked child: join side's namespace, the way `ip netns exec` does
 * (a private mount namespace with the namespace's own /sys, so whatever
 * reads /sys/class/net sees its devices). 0, or -1 with errno set.
 */
int  axon_test_netns_enter(const axon_test_netns_t *ns, int side);
/* Delete both namespaces (and with them the veth pair); safe to call twice. */
void axon_test_netns_destroy(axon_test_netns_t *ns);

/* ---------------------------------------------------------------- progress */

/*
 * Called after every progress call the harness makes; lets a test run two
 * roles on one worker cooperatively (NULL to remove).
 */
typedef void (*axon_test_progress_hook_t)(void *arg);
void     axon_test_set_progress_hook(axon_test_progress_hook_t hook, void *arg);

/* axon_worker_progress (yielding the CPU if nothing happened), then the hook. */
unsigned axon_test_progress(axon_worker_h worker);

/*
 * Finish an operation whose initiating call returned status: AXON_OK is
 * returned as is, an error as is, AXON_INPROGRESS is progressed until req
 * completes (info filled for receives) or timeout_sec passes
 * (AXON_ERR_TIMED_OUT). The request is freed in every case.
 */
axon_status_t axon_test_wait_req(axon_worker_h worker, axon_status_t status,
                                 axon_request_h req, axon_tag_recv_info_t *info,
                                 double timeout_sec);

/* Progress until *flag != 0 or timeout_sec; returns the final *flag. */
int      axon_test_progress_until(axon_worker_h worker, const volatile int *flag,
                                  double timeout_sec);
/* Progress for seconds, whatever happens. */
void     axon_test_progress_for(axon_worker_h worker, double seconds);

/* Blocking send / receive built on the two above. */
axon_status_t axon_test_send(axon_worker_h worker, axon_ep_h ep, const void *buf, size_t len,
                             axon_tag_t tag, double timeout_sec);
axon_status_t axon_test_recv(axon_worker_h worker, void *buf, size_t len, axon_tag_t tag,
                             axon_tag_t tag_mask, axon_tag_recv_info_t *info,
                             double timeout_sec);

/* ---------------------------------------------------------------- data */

/* Deterministic bytes from (seed, index): a message can be checked anywhere. */
static inline uint8_t axon_test_pattern_byte(uint64_t seed, size_t i)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + (uint64_t)i * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    return (uint8_t)(x ^ (x >> 17) ^ (i >> 8));
}

void     axon_test_fill(void *buf, size_t len, uint64_t seed);
/* Index of the first byte that differs from the pattern, or -1. */
ssize_t  axon_test_check(const void *buf, size_t len, uint64_t seed);
/* The same for bytes [base, base + len) of the pattern. Here, not in the C++
 * helpers, so that the byte loops run optimised whatever the test code is built with. */
void     axon_test_fill_at(void *buf, size_t len, uint64_t seed, size_t base);
ssize_t  axon_test_check_at(const void *buf, size_t len, uint64_t seed, size_t base);

/* Monotonic seconds. */
double   axon_test_time(void);

/* ---------------------------------------------------------------- stderr */

/*
 * Redirect file descriptor 2 to a temporary file; end returns everything
 * written meanwhile (malloc'd, NUL-terminated) and restores stderr.
 */
int      axon_test_stderr_capture_begin(void);
char    *axon_test_stderr_capture_end(void);

/* Names of /dev/shm entries whose name contains needle (malloc'd array of
 * malloc'd strings, count in *count_p); free with axon_test_names_free. */
char   **axon_test_list_shm(const char *needle, unsigned *count_p);
void     axon_test_names_free(char **names, unsigned count);

#ifdef __cplusplus
}
#endif

#endif
