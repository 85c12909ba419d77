/*
 * axon_perf internals shared by the messaging tests (axon_perf.c), the
 * many-peer tests (perf_peers.c: memory per endpoint in perf_ep_mem.c,
 * message rate to and from many peers in perf_fan.c), the one-sided tests
 * (perf_rma.c) and the collectives (perf_coll.c).
 */
#ifndef AXON_PERF_H
#define AXON_PERF_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "axon.h"
#include "perf_layout.h"

#define PERF_MAX_SIZES        64
#define PERF_MAX_WINDOW       65536
#define PERF_MAX_ADDR_LEN     (1u << 20)  /* sanity bound on a peer's address */
#define PERF_TIMEOUT_SEC      300         /* per message size: last resort against hangs */
#define PERF_CHILD_WAIT_SEC   30          /* after the run, how long the child may take */
#define PERF_CHILD_GRACE_SEC  5           /* same, after the client failed */
#define PERF_LIVENESS_SPINS   (1u << 16)  /* progress calls between peer checks */
#define PERF_CONNECT_WAIT_SEC 10          /* client: keep retrying the server this long */
#define PERF_ACCEPT_WAIT_SEC  120         /* server: wait this long for a client */
#define PERF_HANDSHAKE_SEC    60          /* a connected peer must answer within this */
#define PERF_RETRY_MS         100         /* between connection attempts */

/* First word of the client's hello: "AXPERF" and the protocol version. */
#define PERF_WIRE_MAGIC       0x4158504552460004ull
#define PERF_WIRE_ACCEPT      0x41585045524f4b21ull  /* "AXPEROK!": parameters taken */
#define PERF_WIRE_HDR_WORDS   17  /* magic, test, iters, warmup, window, check, peers,
                                   * layout kind, block, stride, pieces (-D), the same
                                   * of -R, its method, num_sizes */

#define PERF_TAG_DATA         1
#define PERF_TAG_ACK          2
#define PERF_EP_MEM_MAX_PEERS 4096        /* -t ep_mem: most peers (-n) */
#define PERF_COLL_MAX_NP      256         /* -t coll_*: most processes of --np */
#define PERF_FAN_MAX_PEERS    1024        /* -t tag_fan*: most --peers */
#define PERF_FAN_DEFAULT_PEERS 64
#define PERF_FAN_MAX_INFLIGHT (1 << 20)   /* -t tag_fan*: window x peers */
#define PERF_FAN_MAX_CHECK_BYTES (1ull << 30)  /* -t tag_fan* -c: a buffer per message */

typedef enum {
    PERF_TEST_TAG_LAT,
    PERF_TEST_TAG_BW,
    PERF_TEST_EP_MEM,
    PERF_TEST_TAG_FANIN,   /* perf_fan.c: many peers to one */
    PERF_TEST_TAG_FANOUT,  /* perf_fan.c: one to many peers */
    PERF_TEST_PUT_LAT,   /* perf_rma.c, PERF_TEST_PUT_LAT..PERF_TEST_AMO_BW */
    PERF_TEST_PUT_BW,
    PERF_TEST_GET_LAT,
    PERF_TEST_GET_BW,
    PERF_TEST_AMO_LAT,
    PERF_TEST_AMO_BW,
    PERF_TEST_COLL_BARRIER,  /* perf_coll.c, PERF_TEST_COLL_BARRIER..PERF_TEST_COLL_ALLTOALL */
    PERF_TEST_COLL_BCAST,
    PERF_TEST_COLL_REDUCE,
    PERF_TEST_COLL_ALLREDUCE,
    PERF_TEST_COLL_ALLGATHER,
    PERF_TEST_COLL_ALLTOALL,
    PERF_TEST_LAST
} perf_test_t;

/* How a put with -R reaches the target's layout. */
typedef enum {
    PERF_RMETHOD_KEY,            /* one put into the target's layout key (AXON_MEM_MAP_LAYOUT) */
    PERF_RMETHOD_SEPARATE_PUTS,  /* --separate-puts: a put per piece, into a contiguous key */
    PERF_RMETHOD_PACK_UNPACK,    /* --pack-unpack: put into a bounce, the target scatters it */
    PERF_RMETHOD_LAST
} perf_rmethod_t;

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
    const char   *host;       /* client mode: the server to connect to */
    const char   *port;       /* client and server modes */
    int           wait_sec;   /* --wait: -1 = mode default, 0 = forever */
    unsigned      np;         /* coll_*: --np processes forked here; 0 = a PMIx launcher's */
    int           overlap;    /* coll_*: --overlap, computing while the collective runs */
    unsigned      peers;      /* tag_fan*: --peers, workers of the server process */
    perf_layout_spec_t layout; /* -D: tag_lat, tag_bw, put_*, get_* (kind 0: contiguous) */
    perf_layout_spec_t rlayout; /* -R: put_*, get_*: the target's layout (kind 0: none) */
    perf_rmethod_t     rmethod; /* with -R */
} perf_params_t;

extern const char *perf_test_names[PERF_TEST_LAST];

/* Seconds on a monotonic clock. */
double perf_now(void);
const char *perf_role_name(perf_role_t role);
/* 0, or -1 with a line naming what failed and why. */
int    perf_check_status(perf_role_t role, axon_status_t status, const char *what);
/* Barrier with the peer process; progresses the count workers meanwhile. */
int    perf_sync(int fd, axon_worker_h const *workers, unsigned count);
/* End a RESULT line: " layout=strided:64:128" (or iov:N) with -D, " rlayout=...
 * rmethod=key|separate_puts|pack_unpack" with -R, then the newline. */
void   perf_print_layout(const perf_params_t *params);
/* Test data: a pattern of seed; verify names what (and seed) at a mismatch. */
void   perf_fill(uint8_t *buf, size_t length, uint64_t seed);
int    perf_verify(perf_role_t role, const uint8_t *buf, size_t length, uint64_t seed,
                   const char *what);
/* Whole-buffer socket I/O to the peer process; 0 or -1 (printed). */
int    perf_sock_write(int fd, const void *data, size_t length);
int    perf_sock_read(int fd, void *data, size_t length);
/* Is the peer's end of the socket still open? */
int    perf_peer_alive(int fd);
/* Write an address (64-bit length, then the bytes); read one (malloc'd). */
int    perf_write_address(int fd, const void *address, size_t length);
int    perf_read_address(int fd, void **address_p, size_t *length_p);
/* Send our worker address and read the peer's (malloc'd). */
int    perf_exchange_address(int fd, const void *address, size_t length,
                             void **peer_address_p, size_t *peer_length_p);

/* Processes forked here: the timeout (alarm, perf_set_alarm_handler) kills them. */
extern pid_t    perf_children[PERF_COLL_MAX_NP];
extern unsigned perf_num_children;
void   perf_kill_children(void);
void   perf_set_alarm_handler(void);
/* Reap one within timeout_sec; 0 only if it exited with status 0. who names
 * it in the messages; quiet: the run already failed, its status adds nothing. */
int    perf_wait_child(pid_t pid, unsigned timeout_sec, int quiet, const char *who);

/* One test between this process and the peer at fd, every size (axon_perf.c). */
int    perf_run(const perf_params_t *params, int fd, perf_role_t role);
/* Across hosts (perf_net.c): the server waits for clients; the client runs the test. */
int    perf_run_server(const perf_params_t *cmdline);
int    perf_run_client(const perf_params_t *params);
/* -D and -R given are ones this test takes and can parse (0 or -1, printed). */
int    perf_check_layouts(const perf_params_t *params);
/* The command line into params (perf_args.c): 0, or -1 (printed); -h prints usage and exits. */
int    perf_parse_args(int argc, char **argv, perf_params_t *params);

/* -t ep_mem, either role: params->iters is the number of peers measured. */
int    perf_ep_mem_run(const perf_params_t *params, int fd, perf_role_t role);

/* May -D be given to this test? */
static inline int perf_test_takes_layout(perf_test_t test)
{
    return (test == PERF_TEST_TAG_LAT) || (test == PERF_TEST_TAG_BW) ||
           ((test >= PERF_TEST_PUT_LAT) && (test <= PERF_TEST_GET_BW));
}

/* May -R be given to this test? */
static inline int perf_test_takes_rlayout(perf_test_t test)
{
    return (test >= PERF_TEST_PUT_LAT) && (test <= PERF_TEST_GET_BW);
}
/* -R's method names, for RESULT lines. */
extern const char *const perf_rmethod_names[PERF_RMETHOD_LAST];

static inline int perf_test_is_fan(perf_test_t test)
{
    return (test == PERF_TEST_TAG_FANIN) || (test == PERF_TEST_TAG_FANOUT);
}
/* tag_fanin, tag_fanout: are --peers, -w and -c ones the test takes? (0 or -1, printed) */
int    perf_fan_check_params(const perf_params_t *params);
/* Either role of those tests; name is the test's -t name. */
int    perf_fan_run(const perf_params_t *params, int fd, perf_role_t role, const char *name);

static inline int perf_test_is_rma(perf_test_t test)
{
    return (test >= PERF_TEST_PUT_LAT) && (test <= PERF_TEST_AMO_BW);
}
/* The one-sided tests: are the sizes ones the test takes? (0 or -1, printed) */
int    perf_rma_check_params(const perf_params_t *params);
/* Either role of those tests; name is the test's -t name. */
int    perf_rma_run(const perf_params_t *params, int fd, perf_role_t role, const char *name);

static inline int perf_test_is_coll(perf_test_t test)
{
    return (test >= PERF_TEST_COLL_BARRIER) && (test <= PERF_TEST_COLL_ALLTOALL);
}
/* The collectives: are the sizes ones the test takes? (0 or -1, printed) */
int    perf_coll_check_params(const perf_params_t *params);
/* Run them: --np forks the processes, otherwise the PMIx launcher's job. */
int    perf_coll_run(const perf_params_t *params);

#endif
