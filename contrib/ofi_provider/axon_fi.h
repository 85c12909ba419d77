/*
 * The libfabric provider "axon": libfabric's RDM interface (tagged and
 * untagged messages, RMA) mapped onto Axon's tag and RMA API, so that
 * libfabric users (Open MPI's ofi MTL, fabtests) run on Axon's matching and
 * transports. A client of api/axon.h only, like an MPI library.
 *
 *   fabric   one axon_context (TAG|RMA|AMO; never Axon's own ofi transport)
 *   domain   the free list of operation descriptors; a lock
 *            when the threading level asks for one; the table of memory
 *            keys peers fetch through the address servers (axon_fi_mr.c)
 *   ep       one axon_worker (its matching queues are the endpoint's), its
 *            name published by an address server, its connections: one
 *            axon_ep per peer, made at the first operation on the address
 *   av       names only: inserting never contacts the peer (axon_fi_av.c)
 *   cq       a ring of completions + a ring of errors (both grow, never drop)
 *   cntr     completion counters; poll: sets of CQs and counters
 *   eq       a software event queue (AV insert events, user writes)
 *
 * Matching is Axon's: the provider passes tag, ~ignore and the sender's
 * worker id through and turns request callbacks into CQ entries. Untagged
 * messages (FI_MSG) are tag messages with the reserved tag AXON_FI_MSG_TAG.
 * RMA is Axon's put/get with keys resolved at first use (axon_fi_rkey.c).
 */
#ifndef AXON_FI_H
#define AXON_FI_H

#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>

#include "axon.h"
#include "axon_fi_mutex.h"

#define AXON_FI_PROV_NAME     "axon"
#define AXON_FI_FABRIC_NAME   "axon"
#define AXON_FI_DOMAIN_NAME   "axon"
#define AXON_FI_PROV_VERSION  FI_VERSION(AXON_VERSION_MAJOR, AXON_VERSION_MINOR)

/* Limits reported by fi_getinfo (see axon_fi_info.c). */
#define AXON_FI_INJECT_SIZE   4096          /* AXON_REQ_FLAG_INJECT: reusable at once */
#define AXON_FI_TX_SIZE       1024          /* default tx/rx queue depth (op descriptors) */
#define AXON_FI_RX_SIZE       1024
#define AXON_FI_CQ_SIZE       1024          /* default CQ ring (it grows if overrun) */
#define AXON_FI_EQ_SIZE       64
#define AXON_FI_CQ_DATA_SIZE  4             /* Axon's imm_data */
#define AXON_FI_MAX_MSG_SIZE  ((size_t)1 << 40)
#define AXON_FI_CNTR_CNT      64            /* counters per domain (advertised) */
#define AXON_FI_EP_CNT        64            /* endpoints per domain (advertised): a worker each */
#define AXON_FI_MIN_MULTI_RECV 16384        /* FI_OPT_MIN_MULTI_RECV default */
#define AXON_FI_IOV_LIMIT     16            /* iovecs per message: an op holds their pieces */
#define AXON_FI_RMA_IOV_LIMIT 4             /* remote iovecs per RMA message: one Axon op each */
#define AXON_FI_MR_KEY_SIZE   8             /* fi_mr_key: 64 bits, resolved to Axon's packed key */
#define AXON_FI_ATOMIC_COUNT  16            /* elements per atomic call (the valid calls' count) */
#define AXON_FI_AMO_MAX_SIZE  32            /* the largest element (long double complex) */

/*
 * Untagged messages travel as tag messages with this tag. An endpoint with
 * FI_MSG reserves the bit for them: its tagged messages use the other 63.
 */
#define AXON_FI_MSG_TAG       (1ull << 63)

/*
 * FI_RMA_EVENT: after a remote write or atomic (or read) on a region of a
 * domain with FI_RMA_EVENT is flushed, the initiator tells the target with
 * a message of this tag (in the reserved bit's space: no user tag reaches
 * it; FI_MSG's tag differs), payload the key, imm_data the kind; the
 * target's endpoint counts it (axon_fi_event.c).
 */
#define AXON_FI_EVENT_TAG     (AXON_FI_MSG_TAG | 1)
#define AXON_FI_EVENT_WRITE   1             /* imm_data: FI_REMOTE_WRITE */
#define AXON_FI_EVENT_READ    2             /* imm_data: FI_REMOTE_READ */
#define AXON_FI_EVENT_DATA    4             /* imm_data flag: remote CQ data after the key */
#define AXON_FI_EVENT_KIND_BITS 3           /* imm_data above them: how many accesses */
#define AXON_FI_EVENT_HELD    8             /* (peer, key, kind) counts held back per ep */
#define AXON_FI_EVENT_RECVS   8             /* event receives an endpoint keeps posted */
/* Notifications an endpoint may have queued in Axon (the target's ring full): beyond it,
 * RMA and atomics to counting regions say -FI_EAGAIN until the target drained some. While
 * any is queued, new ones are added up in the endpoint's held counts instead, sent as one
 * message each when the queue empties (axon_fi_event.c). */
#define AXON_FI_EVENT_QUEUED_MAX 64

/*
 * Counting by words (axon_fi_event_words.c): a domain with FI_RMA_EVENT gives
 * each region with remote access a slot (up to the domain's capacity,
 * FI_AXON_RMA_EVENT_SLOTS); each endpoint that receives events allocates a
 * region of 2 words per slot through Axon (AXON_MEM_MAP_ALLOCATE), and
 * initiators add 1 to (slot, kind) there with an Axon atomic instead of
 * sending a message. Counters harvest the words' growth when read.
 */
#define AXON_FI_EVENT_SLOTS   256           /* default capacity: 4 KiB of words per endpoint */

/* A region's slot in the domain: the counters fi_mr_bind attached to it. */
typedef struct {
    struct axon_fi_cntr *cntr[2];           /* [0] FI_REMOTE_WRITE, [1] FI_REMOTE_READ */
    uint32_t             live_pos;          /* its place in the domain's live list */
    uint8_t              used;
} axon_fi_event_slot_t;

/* An endpoint's words: peers add to them, counters harvest them. */
typedef struct {
    axon_mem_h  memh;                       /* NULL: the endpoint counts by messages only */
    uint64_t   *base;                       /* 2 words per slot: write, read */
    uint64_t   *seen;                       /* each word's value at the last harvest */
    void       *packed;                     /* its key; peers read it under mr_lock */
    size_t      packed_len;
} axon_fi_event_words_t;

/* Accesses to one peer's region whose notification waits behind a queued one. */
typedef struct {
    fi_addr_t addr;
    uint64_t  key;
    uint32_t  count;
    uint8_t   kind;
} axon_fi_event_held_t;

/*
 * Whether caps make an endpoint a possible target of RMA writes (FI_RMA
 * alone means every direction): fi_writedata's remote CQ data reaches it
 * as an event message, so it listens for them and reserves bit 63.
 */
static inline int axon_fi_caps_rma_target(uint64_t caps)
{
    const uint64_t dirs = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;

    return (caps & FI_RMA) && ((caps & FI_REMOTE_WRITE) || !(caps & dirs));
}

/* Whether caps let peers read, write or do atomics on an endpoint's regions through it
 * (only such an endpoint gets RMA event words: SOS's transmit endpoints do not). */
static inline int axon_fi_caps_remote_target(uint64_t caps)
{
    const uint64_t dirs = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;

    return (caps & (FI_RMA | FI_ATOMIC)) &&
           ((caps & (FI_REMOTE_READ | FI_REMOTE_WRITE)) || !(caps & dirs));
}

#define AXON_FI_LIKELY(_x)    __builtin_expect(!!(_x), 1)
#define AXON_FI_UNLIKELY(_x)  __builtin_expect(!!(_x), 0)

extern struct fi_provider axon_fi_prov;

/* libfabric prints a log format as given: the newline that ends each line is added here. */
#define AXON_FI_WARN(_subsys, _fmt, ...) \
    FI_WARN(&axon_fi_prov, _subsys, _fmt "\n", ##__VA_ARGS__)
#define AXON_FI_INFO(_subsys, _fmt, ...) \
    FI_INFO(&axon_fi_prov, _subsys, _fmt "\n", ##__VA_ARGS__)

/* -------------------------------------------------------------- names */

/*
 * An endpoint's name (fi_getname, fi_av_insert; FI_SOCKADDR_IN): the IPv4
 * address and port of the address server that hands out the endpoint's
 * worker address, with the worker's id in sin_zero. An id of 0 names "the
 * endpoint served there", which is what fi_getinfo makes of node/service.
 * Open MPI 4.1 gives fi_getname FI_NAME_MAX (64) bytes and an Axon worker
 * address takes 100-300, hence a locator rather than the address itself.
 */
typedef struct sockaddr_in axon_fi_name_t;

_Static_assert(sizeof(axon_fi_name_t) <= FI_NAME_MAX, "name must fit Open MPI's buffer");

/* A peer's name as given by a user: AF_INET, a port and an address; else -FI_EINVAL, logged. */
int      axon_fi_name_check(const void *addr, axon_fi_name_t *name);
/* The same check, silent (axon_fi_wire.c): NULL, or why addr is no name. */
const char *axon_fi_name_invalid(const void *addr, axon_fi_name_t *name);
uint64_t axon_fi_name_id(const axon_fi_name_t *name);
void     axon_fi_name_make(struct in_addr ip, uint16_t port, uint64_t id, axon_fi_name_t *name);
void     axon_fi_name_str(const axon_fi_name_t *name, char *buf, size_t len);
/* node/service as getaddrinfo reads them (IPv4); node NULL: this host's address. */
int      axon_fi_name_resolve(const char *node, const char *service, axon_fi_name_t *name);
/* The IPv4 address names advertise: FI_AXON_IFACE, else the first interface up not loopback. */
struct in_addr axon_fi_default_ip(void);

/* -------------------------------------------------------------- address servers */

typedef struct axon_fi_pub axon_fi_pub_t;
struct axon_fi_domain;

/*
 * Publish a worker address: served at src's port when it names one (a
 * listener of its own, bound to src), else by the process's shared server.
 * *name is where peers find it.
 */
int  axon_fi_addr_publish(const axon_fi_name_t *src, uint64_t id, const void *worker_addr,
                          size_t len, struct axon_fi_domain *domain,
                          const axon_fi_event_words_t *words, axon_fi_name_t *name,
                          axon_fi_pub_t **pub_p);
void axon_fi_addr_withdraw(axon_fi_pub_t *pub);
/* Ask name's server for the worker address (malloc'ed) and its id. */
int  axon_fi_addr_fetch(const axon_fi_name_t *name, void **addr_p, size_t *len_p,
                        uint64_t *id_p);
/* Ask name's server for the memory key key of the endpoint's domain: *blob_p (malloc'ed)
 * is what axon_fi_mr_export wrote; -FI_ENOKEY when the domain has no such key. */
int  axon_fi_addr_fetch_key(const axon_fi_name_t *name, uint64_t key, void **blob_p,
                            size_t *len_p);

/* -------------------------------------------------------------- objects */

typedef struct axon_fi_domain axon_fi_domain_t;
typedef struct axon_fi_ep     axon_fi_ep_t;
typedef struct axon_fi_cq     axon_fi_cq_t;
typedef struct axon_fi_cntr   axon_fi_cntr_t;
struct axon_fi_eq;

typedef struct axon_fi_fabric {
    struct fid_fabric fabric_fid;
    axon_context_h    context;
    int               refs;        /* domains and EQs open on it */
    pthread_mutex_t   lock;
} axon_fi_fabric_t;

/* An operation in flight: the request callback's user_data. */
typedef struct axon_fi_op {
    struct axon_fi_op  *next;      /* free list, or one of the ep's op lists */
    struct axon_fi_op  *prev;
    axon_fi_ep_t       *ep;        /* NULL once the endpoint closed under it */
    axon_fi_domain_t   *domain;
    axon_request_h      req;       /* posted receives: for fi_cancel */
    void               *context;   /* the user's op_context */
    void               *buf;
    size_t              len;
    size_t              used;      /* multi-receive buffers: bytes taken by messages */
    uint64_t            flags;     /* CQ entry flags: FI_TAGGED/FI_MSG | FI_SEND/FI_RECV ... */
    uint64_t            tag;
    uint64_t            sender;    /* receives: the source's worker id (AXON_SENDER_ANY) */
    axon_tag_message_h  msg;       /* FI_PEEK | FI_CLAIM: the claimed message */
    uint8_t             comp;      /* write a CQ entry on success */
    uint8_t             discard;   /* FI_DISCARD: drop the data, complete without it */
    uint8_t             posted;    /* on the ep's inflight list */
    uint8_t             multi;     /* a multi-receive buffer (FI_MULTI_RECV) */
    /* More than one iovec: the data is this layout of absolute pieces (base NULL), so
     * the message needs no allocation; layout NULL: buf/len are the data. */
    const axon_layout_t *layout;
    axon_layout_t       iov_layout;
    /* RMA: a message of several remote iovecs is one Axon op each, its local side a
     * layout of the pieces that land there (at most local + remote - 1 pieces in all). */
    axon_layout_piece_t pieces[AXON_FI_IOV_LIMIT + AXON_FI_RMA_IOV_LIMIT];
    axon_layout_t       rma_layouts[AXON_FI_RMA_IOV_LIMIT];
    uint32_t            pending;   /* RMA: Axon ops (and the flush) still due */
    axon_status_t       status;    /* RMA: the first failure among them */
    void               *bounce;    /* RMA inject: the copy written from */
    fi_addr_t           addr;      /* RMA: the target and key, to forget a stale key */
    uint64_t            key;
    uint8_t             notify;    /* AXON_FI_EVENT_* to tell the target (FI_RMA_EVENT,
                                    * remote CQ data), or 0 */
    uint64_t            cq_data;   /* fi_writedata: the target's CQ entry's data */
    /* Atomics (axon_fi_atomic.c): the elements' state is in bounce. */
    uint8_t             amo_datatype;
    uint8_t             amo_op;
    uint8_t             amo_size;      /* bytes per element */
    uint8_t             amo_count;     /* elements */
} axon_fi_op_t;

/* u64 -> u64 open-addressing map (keys never 0). */
typedef struct {
    uint64_t *keys;
    uint64_t *vals;
    size_t    cap;                 /* power of two */
    size_t    count;
} axon_fi_map_t;

/* u64 map */
int      axon_fi_map_put(axon_fi_map_t *map, uint64_t key, uint64_t val);
int      axon_fi_map_get(const axon_fi_map_t *map, uint64_t key, uint64_t *val);
void     axon_fi_map_del(axon_fi_map_t *map, uint64_t key);
void     axon_fi_map_free(axon_fi_map_t *map);

/* Chunks of op descriptors: allocated at open, grown rarely. */
typedef struct axon_fi_chunk {
    struct axon_fi_chunk *next;
} axon_fi_chunk_t;

/* A set of endpoints: the ones bound to a CQ, counter or AV (or a domain's
 * endpoints receiving RMA events). */
typedef struct {
    axon_fi_ep_t **eps;
    size_t         count, cap;
} axon_fi_eps_t;

struct axon_fi_domain {
    struct fid_domain      domain_fid;
    axon_fi_fabric_t      *fabric;
    enum fi_threading      threading;
    int                    locked;         /* FI_THREAD_SAFE and friends, FI_PROGRESS_AUTO */
    axon_fi_dlock_t        lock;           /* biased to the application (axon_fi_mutex.h) */
    int                    refs;           /* AVs, CQs, counters, EPs, MRs, poll sets */
    uint64_t               mr_mode;        /* normalized: FI_MR_VIRT_ADDR, FI_MR_PROV_KEY bits */
    /* Registrations with remote access, by key + 1 (the map's keys are never 0). Address
     * servers read it from their own threads: always under mr_lock. */
    pthread_mutex_t        mr_lock;
    axon_fi_map_t          mr_by_key;
    uint64_t               next_prov_key;  /* FI_MR_PROV_KEY: keys handed out */
    int                    rma_event;      /* FI_RMA_EVENT: regions tell of remote accesses */
    int                    mr_share;       /* regions mapped AXON_MEM_MAP_SHARED (mr_share) */
    void                  *free_bounce;    /* RMA inject copies (AXON_FI_INJECT_SIZE each) */
    /* op descriptors */
    axon_fi_op_t          *free_ops;
    axon_fi_chunk_t       *chunks;
    size_t                 op_chunk;       /* ops per growth step */
    axon_fi_eps_t          event_eps;      /* FI_RMA_EVENT: endpoints receiving events */
    axon_fi_eps_t          word_eps;       /* ... of them, those with words (the harvest's) */
    /* Counting by words: slots of regions (axon_fi_lock), the free ones reused oldest
     * first, the used ones listed for the harvest to walk. */
    uint32_t               event_nslots;   /* capacity; 0: messages only */
    axon_fi_event_slot_t  *event_slots;
    uint32_t              *event_free;     /* a ring of free slots */
    uint32_t               event_free_head, event_free_count;
    uint32_t              *event_live;     /* used slots */
    uint32_t               event_nlive;
    /* FI_PROGRESS_AUTO (axon_fi_progress.c): a thread progresses every endpoint. */
    axon_fi_eps_t          all_eps;
    pthread_t              progress_thread;
    int                    progress_running;
    int                    progress_stop;  /* under lock */
    int                    progress_asleep; /* the thread waits on armed workers (lock) */
    int                    progress_kick_fd; /* an eventfd that wakes it */
};


int  axon_fi_eps_add(axon_fi_eps_t *set, axon_fi_ep_t *ep);
void axon_fi_eps_del(axon_fi_eps_t *set, axon_fi_ep_t *ep);
void axon_fi_eps_free(axon_fi_eps_t *set);
/* Progress every endpoint's worker for a call of the application (FI_PROGRESS_MANUAL,
 * and the calls that read or wait); returns the events handled. */
unsigned axon_fi_eps_progress(const axon_fi_eps_t *set);
/* One pass over an endpoint's worker, counted by no one (the progress thread's). */
unsigned axon_fi_ep_progress(axon_fi_ep_t *ep);

/*
 * An AV entry's peer: its name as inserted and, once resolved (at the first
 * operation that needs it), its worker address. Duplicates share one.
 */
typedef struct axon_fi_peer {
    axon_fi_name_t  name;
    uint64_t        id;            /* the peer worker's id; 0 until known */
    void           *addr;          /* its worker address, once fetched */
    size_t          addr_len;
    axon_status_t   status;        /* why it cannot be resolved (sticky); AXON_OK */
    fi_addr_t       first;         /* the first fi_addr given to it (FI_SOURCE) */
    int             refs;          /* AV entries pointing here */
} axon_fi_peer_t;

typedef struct axon_fi_av {
    struct fid_av      av_fid;
    axon_fi_domain_t  *domain;
    enum fi_av_type    type;
    uint64_t           flags;
    struct axon_fi_eq *eq;
    axon_fi_peer_t   **table;      /* fi_addr -> peer (NULL: removed) */
    size_t             count, cap;
    axon_fi_map_t      by_id;      /* worker id -> peer pointer (duplicates) */
    axon_fi_map_t      by_sender;  /* worker id -> first fi_addr (FI_SOURCE) */
    axon_fi_eps_t      eps;        /* endpoints bound: their connections follow removals */
} axon_fi_av_t;

/* A peer's memory key as this endpoint reaches it: resolved at first use (axon_fi_rkey.c). */
typedef struct axon_fi_rkey {
    struct axon_fi_rkey *next;     /* every key of the connection, stale ones too */
    axon_rkey_h          rkey;
    uint64_t             addend;   /* remote address = libfabric's address + addend */
    int                  events;   /* the target counts accesses: tell it (FI_RMA_EVENT) */
    uint64_t             word;     /* its FI_REMOTE_WRITE word at the target (the read word
                                    * follows), on the connection's words key; 0: messages */
    uint64_t            *word_ptr; /* the words mapped here (axon_rkey_ptr), or NULL */
    /* The key's memory mapped here for the key's life (axon_rkey_map_window), in
     * libfabric's addresses: [win_lo, + win_len) at win_ptr; win_len 0: none */
    uint64_t             win_lo;
    uint64_t             win_len;
    uint8_t             *win_ptr;
} axon_fi_rkey_t;

/* An endpoint's connection to one peer: the Axon endpoint, made at first use. */
typedef struct axon_fi_conn {
    axon_ep_h        aep;          /* NULL: the peer could not be reached (status says why) */
    axon_status_t    status;       /* AXON_OK, or the failure of the peer or of its resolution */
    axon_fi_peer_t  *peer;
    int              refs;         /* fi_addrs of this endpoint leading here */
    axon_fi_map_t    rkeys;        /* libfabric key + 1 -> axon_fi_rkey_t */
    uint64_t         last_key;     /* the key + 1 found last (0: none), and its entry: */
    axon_fi_rkey_t  *last_rkey;    /* SHMEM puts one key after another */
    axon_fi_rkey_t  *all_rkeys;    /* destroyed with the connection */
    axon_rkey_h      words;        /* the peer endpoint's event words, unpacked once */
} axon_fi_conn_t;

typedef struct {
    struct fi_cq_tagged_entry e;
    uint64_t                  sender;   /* sender id, for fi_cq_readfrom */
} axon_fi_cqe_t;

typedef struct {
    struct fi_cq_err_entry e;
    uint64_t               sender;
} axon_fi_cq_err_t;

struct axon_fi_cq {
    struct fid_cq      cq_fid;
    axon_fi_domain_t  *domain;
    enum fi_cq_format  format;
    size_t             entry_size;
    axon_fi_cqe_t     *ring;
    size_t             size, head, count;     /* grows (doubles) when full */
    axon_fi_cq_err_t  *err;
    size_t             err_size, err_head, err_count;
    axon_fi_av_t      *av;                    /* of the bound endpoint: FI_SOURCE */
    axon_fi_eps_t      eps;                   /* endpoints bound: reading progresses them */
    int                signaled;              /* fi_cq_signal not yet seen by a wait */
    int                refs;                  /* endpoints bound, poll sets holding it */
};

struct axon_fi_cntr {
    struct fid_cntr    cntr_fid;
    axon_fi_domain_t  *domain;
    uint64_t           value, errors;
    uint64_t           polled;                /* value + errors at the last fi_poll */
    axon_fi_eps_t      eps;
    int                remote;                /* bound to a region: progress the domain's
                                               * event endpoints too */
    int                harvest;               /* counts remote accesses: take in the words */
    int                refs;
};

typedef struct axon_fi_eq_event {
    uint32_t                event;
    size_t                  len;
    union {
        struct fi_eq_entry     entry;
        struct fi_eq_err_entry err;
        uint8_t                raw[256];
    } u;
} axon_fi_eq_event_t;

typedef struct {
    axon_fi_eq_event_t *events;
    size_t              size, head, count;   /* grows (doubles) when full */
} axon_fi_eq_ring_t;

typedef struct axon_fi_eq {
    struct fid_eq       eq_fid;
    axon_fi_fabric_t   *fabric;
    axon_fi_eq_ring_t   events;
    axon_fi_eq_ring_t   errs;
    pthread_mutex_t     lock;       /* any thread may write or read an EQ */
    int                 refs;
} axon_fi_eq_t;

struct axon_fi_ep {
    struct fid_ep      ep_fid;
    axon_fi_domain_t  *domain;
    axon_worker_h      worker;
    /* Passes of the application's calls over the worker, and their count when the
     * domain's progress thread last looked (axon_fi_progress.c); both under the lock. */
    uint64_t           app_passes, thread_seen;
    /* The worker's descriptor for the thread's sleeps: wake_state 0 not asked yet,
     * 1 wake_fd is it, -1 the worker can only be polled. */
    int                wake_state, wake_fd;
    void              *worker_addr;
    size_t             worker_addr_len;
    axon_fi_name_t     name;
    axon_fi_pub_t     *pub;
    axon_fi_av_t      *av;
    axon_fi_cq_t      *tx_cq, *rx_cq;
    axon_fi_cntr_t    *tx_cntr, *rx_cntr;
    axon_fi_cntr_t    *rd_cntr, *wr_cntr;  /* FI_READ / FI_WRITE: RMA initiated here */
    axon_fi_cntr_t    *rrd_cntr, *rwr_cntr;  /* FI_REMOTE_READ / _WRITE: RMA events here */
    struct axon_fi_event_recv *events;     /* FI_RMA_EVENT: receives of notifications */
    int                events_posted;      /* of them, still posted */
    unsigned           events_queued;      /* notifications sent, still queued in Axon */
    axon_fi_event_held_t events_held[AXON_FI_EVENT_HELD];   /* added up while some are */
    unsigned           events_nheld;
    int                events_closing;     /* canceled: not posted again */
    uint64_t           events_sent;        /* event messages sent (fi_control, for tests) */
    axon_fi_event_words_t words;           /* counting by words, as a target */
    unsigned           word_adds;          /* as an initiator: word adds still in flight */
    struct axon_fi_eq *eq;
    uint64_t           caps;
    uint64_t           tag_reserved;       /* AXON_FI_MSG_TAG with FI_MSG, else 0 */
    uint64_t           tx_op_flags, rx_op_flags;
    int                tx_comp, rx_comp;   /* default: write a success entry */
    int                tx_selective, rx_selective;  /* FI_SELECTIVE_COMPLETION at bind */
    int                enabled;
    /* connections, by fi_addr (shared by duplicates: conn_by_peer) */
    axon_fi_conn_t   **conns;
    size_t             nconns;
    axon_fi_map_t      conn_by_peer;
    axon_fi_op_t       inflight;           /* operations whose callback is due (fi_cancel,
                                            * close) */
    axon_fi_op_t       claimed;            /* FI_PEEK|FI_CLAIM results awaiting FI_CLAIM */
    /* multi-receive: the buffer being filled, untagged receives posted after it */
    axon_fi_op_t      *mrecv;
    axon_fi_op_t       held;
    size_t             min_multi_recv;
};

/* -------------------------------------------------------------- locking */

/* The application's calls; the progress thread takes the lock's internal side. */
static inline void axon_fi_lock(axon_fi_domain_t *domain)
{
    if (domain->locked) {
        axon_fi_dlock_app_lock(&domain->lock);
    }
}

/*
 * A pass of a blocking wait (fi_cntr_wait, fi_cq_sread) that found nothing.
 * The workers the pass drove give the core away by Axon's own idle policy
 * (AXON_YIELD: soon on an oversubscribed host, after a spin otherwise); a
 * yield of ours after every empty pass on top made each pass a system call
 * and each wake-up late (a SHMEM fetch-add waits here). Every
 * AXON_FI_WAIT_YIELD_PASSES-th empty pass still yields, for waits that drive
 * no worker (counters of remote accesses counted by words).
 */
#define AXON_FI_WAIT_YIELD_PASSES 64
static inline void axon_fi_wait_idle(unsigned *empty_passes)
{
    if ((++*empty_passes % AXON_FI_WAIT_YIELD_PASSES) == 0) {
        sched_yield();
    }
}

static inline void axon_fi_unlock(axon_fi_domain_t *domain)
{
    if (domain->locked) {
        axon_fi_dlock_app_unlock(&domain->lock);
    }
}

/* -------------------------------------------------------------- functions */

/* Text of an error entry's prov_errno (an axon_status_t), for both strerror ops. */
const char *axon_fi_strerror(int prov_errno, char *buf, size_t len);
int  axon_fi_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
                     const struct fi_info *hints, struct fi_info **info);
int  axon_fi_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context);
int  axon_fi_domain_open(struct fid_fabric *fabric, struct fi_info *info,
                         struct fid_domain **domain, void *context);
int  axon_fi_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr, struct fid_eq **eq,
                     void *context);
int  axon_fi_av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **av,
                     void *context);
int  axon_fi_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq,
                     void *context);
int  axon_fi_cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr,
                       struct fid_cntr **cntr, void *context);
int  axon_fi_poll_open(struct fid_domain *domain, struct fi_poll_attr *attr,
                       struct fid_poll **pollset);
int  axon_fi_ep_open(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep,
                     void *context);
extern struct fi_ops_mr axon_fi_mr_ops;
/* An exported key: u64 addend and u64 flags (big endian); with AXON_FI_MR_BLOB_WORDS
 * u64 the address of the region's write word at the asking endpoint, u32 the length
 * of that endpoint's packed words key, u32 0, the packed words key; then Axon's packed
 * key of the region. */
#define AXON_FI_MR_BLOB_HEAD    16
#define AXON_FI_MR_BLOB_EVENTS  1ull   /* flags: the target counts accesses (FI_RMA_EVENT) */
#define AXON_FI_MR_BLOB_WORDS   2ull   /* flags: ... by words (else by messages) */
#define AXON_FI_MR_BLOB_WORDS_HEAD 16
/* A key blob's parts (axon_fi_wire.c); words_key only with AXON_FI_MR_BLOB_WORDS. */
typedef struct axon_fi_mr_blob {
    uint64_t       addend;
    uint64_t       flags;          /* AXON_FI_MR_BLOB_* */
    uint64_t       word;           /* the region's write word at the asking endpoint */
    const uint8_t *words_key;      /* that endpoint's packed words key */
    size_t         words_key_len;
    const uint8_t *key;            /* Axon's packed key of the region */
    size_t         key_len;
} axon_fi_mr_blob_t;
/* Write b at blob (room for all of it); returns the length. */
size_t axon_fi_mr_blob_write(uint8_t *blob, const axon_fi_mr_blob_t *b);
/* Split a fetched blob; its keys point into it. -1 if its lengths do not hold. */
int    axon_fi_mr_blob_parse(const uint8_t *blob, size_t len, axon_fi_mr_blob_t *b);
/* A registration's key as peers fetch it from the endpoint whose words are given (address
 * server thread, see above); malloc'ed. -FI_ENOKEY if key is not registered for remote
 * access. */
int  axon_fi_mr_export(axon_fi_domain_t *domain, const axon_fi_event_words_t *words,
                       uint64_t key, void **blob_p, size_t *len_p);
/* mr_mode as the domain applies it: the old FI_MR_BASIC / FI_MR_SCALABLE as their bits. */
uint64_t axon_fi_mr_mode_bits(uint64_t mr_mode);
/* Share regions' pages in a domain of (normalized) mr_mode? FI_AXON_MR_SHARE decides. */
int      axon_fi_mr_share_wanted(uint64_t mr_mode);

/* Axon status -> positive libfabric error number. */
int  axon_fi_errno(axon_status_t status);

/* Op descriptors (domain lock held). */
axon_fi_op_t *axon_fi_op_get(axon_fi_domain_t *domain);
void          axon_fi_op_put(axon_fi_domain_t *domain, axon_fi_op_t *op);
/* RMA inject copies of AXON_FI_INJECT_SIZE bytes (domain lock held; NULL: no memory). */
void         *axon_fi_bounce_get(axon_fi_domain_t *domain);
void          axon_fi_bounce_put(axon_fi_domain_t *domain, void *buf);
void          axon_fi_bounce_free_all(axon_fi_domain_t *domain);

/* Wait objects a CQ or counter may be opened with: none or busy progress. */
int  axon_fi_wait_obj_check(enum fi_wait_obj wait_obj, const char *what);
/* Whether timeout_ms (negative: never) has passed since start. */
int  axon_fi_expired(const struct timespec *start, int timeout_ms);

/* CQ writes (from callbacks or the posting call; domain lock held). */
void axon_fi_cq_write(axon_fi_cq_t *cq, void *context, uint64_t flags, size_t len, void *buf,
                      uint64_t data, uint64_t tag, uint64_t sender);
void axon_fi_cq_write_err(axon_fi_cq_t *cq, void *context, uint64_t flags, size_t len,
                          void *buf, uint64_t data, uint64_t tag, size_t olen, int err,
                          int prov_errno, uint64_t sender);

/* Counters: a completion, successful or not (domain lock held). */
static inline void axon_fi_cntr_count(axon_fi_cntr_t *cntr, int ok)
{
    if (cntr != NULL) {
        if (ok) {
            ++cntr->value;
        } else {
            ++cntr->errors;
        }
    }
}

/* AV lookups. */
static inline axon_fi_peer_t *axon_fi_av_peer(axon_fi_av_t *av, fi_addr_t addr)
{
    return (addr < av->count) ? av->table[addr] : NULL;
}
fi_addr_t     axon_fi_av_sender_addr(axon_fi_av_t *av, uint64_t sender);
/* Fetch the peer's worker address if not yet done; AXON_ERR_UNREACHABLE when it cannot be. */
axon_status_t axon_fi_av_resolve(axon_fi_av_t *av, axon_fi_peer_t *peer);

/* Connections (axon_fi_conn.c). */
axon_status_t axon_fi_conn_make(axon_fi_ep_t *ep, fi_addr_t addr, axon_fi_conn_t **conn_p);
void          axon_fi_conn_drop(axon_fi_ep_t *ep, fi_addr_t addr);
void          axon_fi_conn_close_all(axon_fi_ep_t *ep);

/*
 * The connection to fi_addr addr, made by the first operation on it. One
 * branch on the data path: a connection that exists and reaches its peer.
 * AXON_ERR_INVALID_ADDR: addr is not in the AV; other errors: the peer
 * cannot be reached (the operation completes in error).
 */
/* The connection made for fi_addr addr so far, or NULL. */
static inline axon_fi_conn_t *axon_fi_conn_find(const axon_fi_ep_t *ep, fi_addr_t addr)
{
    return (addr < ep->nconns) ? ep->conns[addr] : NULL;
}

static inline axon_status_t axon_fi_conn_get(axon_fi_ep_t *ep, fi_addr_t addr,
                                             axon_fi_conn_t **conn_p)
{
    axon_fi_conn_t *conn = axon_fi_conn_find(ep, addr);

    if (AXON_FI_LIKELY((conn != NULL) && (conn->aep != NULL))) {
        *conn_p = conn;
        return AXON_OK;
    }
    return axon_fi_conn_make(ep, addr, conn_p);
}

/* RMA keys (axon_fi_rkey.c): key on conn, resolved through the peer's address server at
 * first use (a failure is logged); the data path is one map lookup. */
axon_status_t axon_fi_rkey_resolve(axon_fi_conn_t *conn, uint64_t key, axon_fi_rkey_t **rkey_p);
/* Forget a key found stale (the target closed it): the next use resolves it again. */
void          axon_fi_rkey_forget(axon_fi_ep_t *ep, fi_addr_t addr, uint64_t key);
/* A finished RMA or atomic message (what: its name in the log line; NULL: "RMA write"/
 * "RMA read"): counted, a stale key forgotten, and a CQ entry unless it succeeded
 * without asking for one (axon_fi_rma.c) */
void          axon_fi_rma_entry(axon_fi_ep_t *ep, const char *what, void *context,
                                uint64_t cq_flags, int comp, fi_addr_t dest, uint64_t key,
                                axon_status_t status);
void          axon_fi_rkey_destroy_all(axon_fi_conn_t *conn);

/* key as resolved on conn so far (not forgotten as stale since), or NULL. */
static inline axon_fi_rkey_t *axon_fi_rkey_find(axon_fi_conn_t *conn, uint64_t key)
{
    uint64_t val;

    if (AXON_FI_LIKELY(conn->last_key == key + 1)) {
        return conn->last_rkey;
    }
    if (!axon_fi_map_get(&conn->rkeys, key + 1, &val)) {
        return NULL;
    }
    conn->last_key  = key + 1;
    conn->last_rkey = (axon_fi_rkey_t *)(uintptr_t)val;
    return conn->last_rkey;
}

static inline axon_status_t axon_fi_rkey_get(axon_fi_conn_t *conn, uint64_t key,
                                             axon_fi_rkey_t **rkey_p)
{
    if (AXON_FI_LIKELY((*rkey_p = axon_fi_rkey_find(conn, key)) != NULL)) {
        return AXON_OK;
    }
    return axon_fi_rkey_resolve(conn, key, rkey_p);
}

/* The worker id a receive from src is restricted to (AXON_SENDER_ANY for any source). */
int axon_fi_recv_sender(axon_fi_ep_t *ep, fi_addr_t src, uint64_t *sender);

/* EQ: post an event from inside the provider. */
int axon_fi_eq_post(axon_fi_eq_t *eq, uint32_t event, const void *buf, size_t len, int is_err);

/* -------------------------------------------------------------- auto progress */

/* FI_PROGRESS_AUTO: start the domain's progress thread (its lock is then always taken). */
int  axon_fi_progress_start(axon_fi_domain_t *domain);
void axon_fi_progress_stop(axon_fi_domain_t *domain);
/* Wake the thread from its sleep (lock held). */
void axon_fi_progress_kick(axon_fi_domain_t *domain);
/*
 * The application posted an operation, or changed the endpoints (lock held):
 * a worker may need progress that no message will announce (a send queued
 * for ring space), so a sleeping thread is woken to look.
 */
static inline void axon_fi_progress_posted(axon_fi_domain_t *domain)
{
    if (AXON_FI_UNLIKELY(domain->progress_asleep)) {
        axon_fi_progress_kick(domain);
    }
}

/* -------------------------------------------------------------- RMA events */

/* Whether an endpoint listens for event messages: in a domain with FI_RMA_EVENT, or a
 * possible target of fi_writedata. */
static inline int axon_fi_event_listens(const axon_fi_domain_t *domain, uint64_t caps)
{
    return domain->rma_event || axon_fi_caps_rma_target(caps);
}
/* Post the endpoint's event receives (fi_enable, lock held); close cancels them. */
int  axon_fi_event_open(axon_fi_ep_t *ep);
void axon_fi_event_close(axon_fi_ep_t *ep);
/* Tell op's target that its access (op->notify) is done and visible, with op->cq_data
 * when notify has AXON_FI_EVENT_DATA (lock held). */
void axon_fi_event_notify(axon_fi_op_t *op);
/* Send the counts held back behind queued notifications once none is queued; called from
 * the provider's calls, never from Axon's callbacks (lock held). */
void axon_fi_event_flush(axon_fi_ep_t *ep);
static inline void axon_fi_event_flush_due(axon_fi_ep_t *ep)
{
    if (AXON_FI_UNLIKELY(ep->events_nheld > 0) && (ep->events_queued == 0)) {
        axon_fi_event_flush(ep);
    }
}
/* Too many notifications queued (a target slower than its initiator): progress once and
 * say so, for the operation to return -FI_EAGAIN instead of queueing without bound. */
static inline int axon_fi_event_backlog(axon_fi_ep_t *ep)
{
    if (AXON_FI_LIKELY(ep->events_queued < AXON_FI_EVENT_QUEUED_MAX)) {
        return 0;
    }
    axon_worker_progress(ep->worker);
    axon_fi_event_flush_due(ep);
    return ep->events_queued >= AXON_FI_EVENT_QUEUED_MAX;
}
/* Counting by words (axon_fi_event_words.c; lock held). The domain's slots, from
 * FI_AXON_RMA_EVENT_SLOTS; a region's slot (-1: none free, it counts by messages) and its
 * release (the words harvested first); an endpoint's words (a failure leaves it on
 * messages) and their end (harvested, then unmapped once peers cannot fetch them). */
int      axon_fi_event_slots_open(axon_fi_domain_t *domain);
void     axon_fi_event_slots_close(axon_fi_domain_t *domain);
int32_t  axon_fi_event_slot_get(axon_fi_domain_t *domain);
void     axon_fi_event_slot_put(axon_fi_domain_t *domain, int32_t slot);
void     axon_fi_event_words_open(axon_fi_ep_t *ep);
void     axon_fi_event_words_close(axon_fi_ep_t *ep);
/* Take the growth of every endpoint's words of the live slots into their counters;
 * returns the accesses found. */
unsigned axon_fi_event_harvest(axon_fi_domain_t *domain);
/* As an initiator: add op's access to its word at the target; 0 when the key has none or
 * the add cannot be posted (the caller sends a message instead). */
int      axon_fi_event_add(axon_fi_op_t *op);
/* A count added through the words mapped here (rkey->word_ptr): release, so the access
 * it tells of is visible before it. */
static inline void axon_fi_event_word_add(const axon_fi_rkey_t *rkey, int read)
{
    __atomic_fetch_add(rkey->word_ptr + (read ? 1 : 0), 1, __ATOMIC_RELEASE);
}
/* Wait (bounded) for the endpoint's word adds in flight, before its connections close. */
void     axon_fi_event_adds_drain(axon_fi_ep_t *ep);
/* Unpack a parsed key blob's words part on conn (rkey->word set; left 0 if it cannot be
 * used). */
void     axon_fi_event_words_unpack(axon_fi_conn_t *conn, const axon_fi_mr_blob_t *blob,
                                    axon_fi_rkey_t *rkey);

/* The counter bound to the region under key for kind (AXON_FI_EVENT_*), NULL if none. */
axon_fi_cntr_t *axon_fi_mr_event_cntr(axon_fi_domain_t *domain, uint64_t key, unsigned kind);
/* Progress what moves cntr: its endpoints and, bound to a region, the event endpoints;
 * returns the events handled. */
unsigned axon_fi_cntr_progress(axon_fi_cntr_t *cntr);

/* -------------------------------------------------------------- data path */

/*
 * A send as a tagged or untagged call asks for it (axon_fi_xfer.c): tag is
 * Axon's (the user's, or AXON_FI_MSG_TAG), cq_flags the entry's (FI_TAGGED |
 * FI_SEND or FI_MSG | FI_SEND), flags the call's (op_flags, or fi_*msg's):
 * FI_INJECT copies the data, FI_DELIVERY_COMPLETE completes once the
 * receiver matched the message. The v form sends count iovecs (at most
 * AXON_FI_IOV_LIMIT, else -FI_EINVAL, logged) as one message.
 */
ssize_t axon_fi_send_common(axon_fi_ep_t *ep, uint64_t cq_flags, const void *buf, size_t len,
                            fi_addr_t dest, uint64_t tag, uint64_t data, int has_data,
                            void *context, uint64_t flags, int comp);
ssize_t axon_fi_sendv_common(axon_fi_ep_t *ep, uint64_t cq_flags, const struct iovec *iov,
                             size_t count, fi_addr_t dest, uint64_t tag, uint64_t data,
                             int has_data, void *context, uint64_t flags, int comp);
axon_fi_op_t *axon_fi_recv_op(axon_fi_ep_t *ep, void *buf, size_t len, uint64_t tag,
                              uint64_t cq_flags, void *context, int comp);
/* Axon's parameters for a receive into op, completing through cb. */
void          axon_fi_recv_param(axon_fi_op_t *op, axon_tag_recv_callback_t cb,
                                 axon_tag_recv_info_t *info, axon_request_param_t *param);
/* Post a receive (or a claimed message's receive) described by op, matching (tag, mask). */
ssize_t       axon_fi_recv_start(axon_fi_ep_t *ep, axon_fi_op_t *op, uint64_t mask);
/* The CQ entry (and count) of a finished receive into op->buf + op->used; info may be NULL. */
void          axon_fi_recv_entry(axon_fi_ep_t *ep, axon_fi_op_t *op, axon_status_t status,
                                 const axon_tag_recv_info_t *info, uint64_t extra_flags);
void          axon_fi_inflight_add(axon_fi_ep_t *ep, axon_fi_op_t *op);
void          axon_fi_inflight_del(axon_fi_op_t *op);

/* Untagged receives: held behind a multi-receive buffer while it is being filled. */
ssize_t axon_fi_mrecv_post(axon_fi_ep_t *ep, axon_fi_op_t *op, int multi);
int     axon_fi_mrecv_cancel(axon_fi_ep_t *ep, void *context);
void    axon_fi_mrecv_close(axon_fi_ep_t *ep);

/* An iov list's size; more than AXON_FI_IOV_LIMIT iovecs (or a size overflowing) fail
 * with -FI_EINVAL, logged with the count. */
static inline int axon_fi_iov_size(const struct iovec *iov, size_t count, size_t *len)
{
    size_t i, sum = 0;

    if (AXON_FI_UNLIKELY(count > AXON_FI_IOV_LIMIT)) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "iov count %zu exceeds iov_limit %d", count,
                     AXON_FI_IOV_LIMIT);
        return -FI_EINVAL;
    }
    for (i = 0; i < count; ++i) {
        if (AXON_FI_UNLIKELY(sum + iov[i].iov_len < sum)) {
            AXON_FI_WARN(FI_LOG_EP_DATA, "iov %zu of %zu: length %zu overflows the message "
                         "size", i, count, iov[i].iov_len);
            return -FI_EINVAL;
        }
        sum += iov[i].iov_len;
    }
    *len = sum;
    return 0;
}

/* op's data as the layout of count > 1 checked iovecs of len bytes (axon_fi_iov.c). */
void axon_fi_op_layout(axon_fi_op_t *op, const struct iovec *iov, size_t count, size_t len);

/* op's data from a checked iov list of len bytes: one iovec stays contiguous. */
static inline void axon_fi_op_iov(axon_fi_op_t *op, const struct iovec *iov, size_t count,
                                  size_t len)
{
    if (AXON_FI_LIKELY(count <= 1)) {
        op->buf    = count ? iov[0].iov_base : NULL;
        op->len    = len;
        op->layout = NULL;
    } else {
        axon_fi_op_layout(op, iov, count, len);
    }
}

static inline void axon_fi_list_init(axon_fi_op_t *head)
{
    head->next = head->prev = head;
}

static inline void axon_fi_list_add_tail(axon_fi_op_t *head, axon_fi_op_t *op)
{
    op->next = head;
    op->prev = head->prev;
    head->prev->next = op;
    head->prev = op;
}

static inline void axon_fi_list_del(axon_fi_op_t *op)
{
    op->next->prev = op->prev;
    op->prev->next = op->next;
}

extern struct fi_ops_tagged axon_fi_tagged_ops;
extern struct fi_ops_msg    axon_fi_msg_ops;
extern struct fi_ops_rma    axon_fi_rma_ops;
extern struct fi_ops_atomic axon_fi_atomic_ops;

/* Atomics: the call families of fi_atomic(3) and what each offers (axon_fi_atomic_calc.c). */
typedef enum {
    AXON_FI_AMO_BASE,      /* fi_atomic*: no result */
    AXON_FI_AMO_FETCH,     /* fi_fetch_atomic* */
    AXON_FI_AMO_COMPARE    /* fi_compare_atomic* */
} axon_fi_amo_family_t;

/* The element size of datatype when family offers op on it, else 0. */
size_t      axon_fi_amo_size(enum fi_datatype datatype, enum fi_op op,
                             axon_fi_amo_family_t family);
/* out = what op makes of the element old with operand val and compare cmp (NULL: zero). */
void        axon_fi_amo_calc(enum fi_datatype datatype, enum fi_op op, const void *old,
                             const void *val, const void *cmp, void *out);
const char *axon_fi_amo_type_name(enum fi_datatype datatype);
/* fi_query_atomic (domain op). */
int         axon_fi_query_atomic(struct fid_domain *domain, enum fi_datatype datatype,
                                 enum fi_op op, struct fi_atomic_attr *attr, uint64_t flags);

/* -ENOSYS fillers for ops the provider does not offer. */
int axon_fi_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags);
int axon_fi_no_control(struct fid *fid, int command, void *arg);
int axon_fi_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
                        void *context);
extern struct fi_ops_msg axon_fi_no_msg_ops;   /* endpoints without FI_MSG */
extern struct fi_ops_rma axon_fi_no_rma_ops;
extern struct fi_ops_atomic axon_fi_no_atomic_ops;   /* endpoints without FI_ATOMIC */

#endif /* AXON_FI_H */
