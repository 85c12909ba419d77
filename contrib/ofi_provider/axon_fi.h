/*
 * The libfabric provider "axon": libfabric's tagged RDM interface mapped onto
 * Axon's tag API, so that libfabric users (Open MPI's ofi MTL) run on Axon's
 * matching and transports. A client of api/axon.h only, like an MPI library.
 *
 *   fabric   one axon_context (AXON_FEATURE_TAG; never Axon's own ofi transport)
 *   domain   one axon_worker; one endpoint per domain (the worker's matching
 *            queues are the endpoint's)
 *   av       peers: the compact name (axon_fi_name_t) of each, the Axon
 *            endpoint created from its worker address (shared by duplicates)
 *   cq       a ring of completions + a ring of errors (both grow, never drop)
 *   eq       a software event queue (AV insert events, user writes)
 *   ep       tagged send/recv, inject, peek/claim/discard, cancel
 *
 * Matching is Axon's: the provider passes tag, ~ignore and the sender's
 * worker id through and turns request callbacks into CQ entries.
 */
#ifndef AXON_FI_H
#define AXON_FI_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>

#include "axon.h"

#define AXON_FI_PROV_NAME     "axon"
#define AXON_FI_FABRIC_NAME   "axon"
#define AXON_FI_DOMAIN_NAME   "axon"
#define AXON_FI_PROV_VERSION  FI_VERSION(AXON_VERSION_MAJOR, AXON_VERSION_MINOR)

/* Limits reported by fi_getinfo (see axon_fi_info.c). */
#define AXON_FI_INJECT_SIZE   4096          /* copied into a bounce buffer: reusable at once */
#define AXON_FI_TX_SIZE       1024          /* default tx/rx queue depth (op descriptors) */
#define AXON_FI_RX_SIZE       1024
#define AXON_FI_CQ_SIZE       1024          /* default CQ ring (it grows if overrun) */
#define AXON_FI_EQ_SIZE       64
#define AXON_FI_CQ_DATA_SIZE  4             /* Axon's imm_data */
#define AXON_FI_MAX_MSG_SIZE  ((size_t)1 << 40)

extern struct fi_provider axon_fi_prov;

/* libfabric prints a log format as given: the newline that ends each line is added here. */
#define AXON_FI_WARN(_subsys, _fmt, ...) \
    FI_WARN(&axon_fi_prov, _subsys, _fmt "\n", ##__VA_ARGS__)
#define AXON_FI_INFO(_subsys, _fmt, ...) \
    FI_INFO(&axon_fi_prov, _subsys, _fmt "\n", ##__VA_ARGS__)

/* -------------------------------------------------------------- names */

/*
 * An endpoint's name (fi_getname, fi_av_insert). Open MPI 4.1 hands
 * fi_getname a buffer of FI_NAME_MAX (64) bytes, and an Axon worker address
 * is 100-300 bytes, so the name is a locator: where the owner's address
 * server listens and which worker to ask it for. fi_av_insert fetches the
 * worker address from there (axon_fi_addr.c) once per peer.
 */
#define AXON_FI_NAME_MAGIC    0x4158464eu   /* "AXFN" */
#define AXON_FI_NAME_VERSION  1

typedef struct {
    uint32_t magic;
    uint8_t  version;
    uint8_t  length;       /* sizeof(axon_fi_name_t) */
    uint16_t port;         /* address server's TCP port, network order */
    uint8_t  ip[16];       /* its IPv6 address (IPv4 mapped) */
    uint64_t host;         /* hash of the host name: same host -> ask over loopback */
    uint64_t token;        /* names the domain (worker) at that server; never 0 */
} axon_fi_name_t;

_Static_assert(sizeof(axon_fi_name_t) <= FI_NAME_MAX, "name must fit Open MPI's buffer");

int  axon_fi_name_check(const void *addr, size_t len, axon_fi_name_t *name);
void axon_fi_name_str(const axon_fi_name_t *name, char *buf, size_t len);

/* Publish a worker address under a new name; withdraw it. */
int  axon_fi_addr_publish(const void *worker_addr, size_t len, axon_fi_name_t *name);
void axon_fi_addr_withdraw(const axon_fi_name_t *name);
/* Fetch the worker address a name stands for (malloc'ed). */
int  axon_fi_addr_fetch(const axon_fi_name_t *name, void **addr_p, size_t *len_p);

/* -------------------------------------------------------------- objects */

typedef struct axon_fi_domain axon_fi_domain_t;
struct axon_fi_ep;
struct axon_fi_cq;
struct axon_fi_eq;

typedef struct axon_fi_fabric {
    struct fid_fabric fabric_fid;
    axon_context_h    context;
    int               refs;        /* domains and EQs open on it */
    pthread_mutex_t   lock;
} axon_fi_fabric_t;

/* An operation in flight: the request callback's user_data. */
typedef struct axon_fi_op {
    struct axon_fi_op  *next;      /* free list, or the ep's posted/claimed list */
    struct axon_fi_op  *prev;
    struct axon_fi_ep  *ep;        /* NULL once the endpoint closed under it */
    axon_fi_domain_t   *domain;
    axon_request_h      req;       /* posted receives: for fi_cancel */
    void               *context;   /* the user's op_context */
    void               *buf;
    size_t              len;
    uint64_t            flags;     /* CQ entry flags: FI_TAGGED | FI_SEND/FI_RECV ... */
    uint64_t            tag;
    axon_tag_message_h  msg;       /* FI_PEEK | FI_CLAIM: the claimed message */
    void               *bounce;    /* inject: the copy of the user's data */
    uint8_t             comp;      /* write a CQ entry on success */
    uint8_t             discard;   /* FI_DISCARD: drop the data, complete without it */
    uint8_t             posted;    /* on the ep's inflight list */
} axon_fi_op_t;

/* Chunks of op descriptors and inject buffers: allocated at open, grown rarely. */
typedef struct axon_fi_chunk {
    struct axon_fi_chunk *next;
} axon_fi_chunk_t;

typedef struct axon_fi_domain {
    struct fid_domain      domain_fid;
    axon_fi_fabric_t      *fabric;
    axon_worker_h          worker;
    void                  *worker_addr;
    size_t                 worker_addr_len;
    axon_fi_name_t         name;
    enum fi_threading      threading;
    int                    locked;         /* FI_THREAD_SAFE and friends: one mutex */
    pthread_mutex_t        lock;
    int                    refs;           /* AVs, CQs, EPs */
    struct axon_fi_ep     *ep;             /* the one endpoint */
    uint64_t               mr_mode;
    /* op descriptors and inject bounce buffers */
    axon_fi_op_t          *free_ops;
    void                  *free_bounce;    /* singly linked through the first word */
    axon_fi_chunk_t       *chunks;
    size_t                 op_chunk;       /* ops per growth step */
} axon_fi_domain_t;

typedef struct axon_fi_peer {
    axon_fi_name_t  name;
    axon_ep_h       ep;
    uint64_t        peer_id;       /* axon_ep_peer_id(ep) */
    fi_addr_t       first;         /* the first fi_addr given to it (FI_SOURCE) */
    int             refs;          /* AV entries pointing here */
    axon_status_t   failed;        /* the peer's failure, AXON_OK while alive */
} axon_fi_peer_t;

/* u64 -> u64 open-addressing map (keys never 0): name token -> peer, sender id -> fi_addr. */
typedef struct {
    uint64_t *keys;
    uint64_t *vals;
    size_t    cap;                 /* power of two */
    size_t    count;
} axon_fi_map_t;

typedef struct axon_fi_av {
    struct fid_av      av_fid;
    axon_fi_domain_t  *domain;
    enum fi_av_type    type;
    uint64_t           flags;
    struct axon_fi_eq *eq;
    axon_fi_peer_t   **table;      /* fi_addr -> peer (NULL: removed) */
    size_t             count, cap;
    axon_fi_map_t      by_token;   /* name token -> peer pointer */
    axon_fi_map_t      by_sender;  /* sender id -> fi_addr */
    int                refs;       /* endpoints bound */
} axon_fi_av_t;

typedef struct {
    struct fi_cq_tagged_entry e;
    uint64_t                  sender;   /* sender id, for fi_cq_readfrom */
} axon_fi_cqe_t;

typedef struct {
    struct fi_cq_err_entry e;
    uint64_t               sender;
} axon_fi_cq_err_t;

typedef struct axon_fi_cq {
    struct fid_cq      cq_fid;
    axon_fi_domain_t  *domain;
    enum fi_cq_format  format;
    size_t             entry_size;
    axon_fi_cqe_t     *ring;
    size_t             size, head, count;     /* grows (doubles) when full */
    axon_fi_cq_err_t  *err;
    size_t             err_size, err_head, err_count;
    axon_fi_av_t      *av;                    /* of the bound endpoint: FI_SOURCE */
    volatile int       signaled;
    int                refs;
} axon_fi_cq_t;

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

typedef struct axon_fi_ep {
    struct fid_ep      ep_fid;
    axon_fi_domain_t  *domain;
    axon_fi_av_t      *av;
    axon_fi_cq_t      *tx_cq, *rx_cq;
    struct axon_fi_eq *eq;
    uint64_t           caps;
    uint64_t           tx_op_flags, rx_op_flags;
    int                tx_comp, rx_comp;   /* default: write a success entry */
    int                tx_selective, rx_selective;  /* FI_SELECTIVE_COMPLETION at bind */
    int                enabled;
    axon_fi_op_t       inflight;           /* operations whose callback is due (fi_cancel,
                                            * close) */
    axon_fi_op_t       claimed;            /* FI_PEEK|FI_CLAIM results awaiting FI_CLAIM */
} axon_fi_ep_t;

/* -------------------------------------------------------------- locking */

static inline void axon_fi_lock(axon_fi_domain_t *domain)
{
    if (domain->locked) {
        pthread_mutex_lock(&domain->lock);
    }
}

static inline void axon_fi_unlock(axon_fi_domain_t *domain)
{
    if (domain->locked) {
        pthread_mutex_unlock(&domain->lock);
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
int  axon_fi_ep_open(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep,
                     void *context);

/* Axon status -> positive libfabric error number. */
int  axon_fi_errno(axon_status_t status);

/* Op descriptors (domain lock held). */
axon_fi_op_t *axon_fi_op_get(axon_fi_domain_t *domain);
void          axon_fi_op_put(axon_fi_domain_t *domain, axon_fi_op_t *op);
void         *axon_fi_bounce_get(axon_fi_domain_t *domain);
void          axon_fi_bounce_put(axon_fi_domain_t *domain, void *bounce);

/* CQ writes (from callbacks or the posting call; domain lock held). */
void axon_fi_cq_write(axon_fi_cq_t *cq, void *context, uint64_t flags, size_t len, void *buf,
                      uint64_t data, uint64_t tag, uint64_t sender);
void axon_fi_cq_write_err(axon_fi_cq_t *cq, void *context, uint64_t flags, size_t len,
                          void *buf, uint64_t data, uint64_t tag, size_t olen, int err,
                          int prov_errno, uint64_t sender);

/* AV lookups for the data path. */
static inline axon_fi_peer_t *axon_fi_av_peer(axon_fi_av_t *av, fi_addr_t addr)
{
    return (addr < av->count) ? av->table[addr] : NULL;
}
fi_addr_t axon_fi_av_sender_addr(axon_fi_av_t *av, uint64_t sender);

/* EQ: post an event from inside the provider. */
int axon_fi_eq_post(axon_fi_eq_t *eq, uint32_t event, const void *buf, size_t len, int is_err);

/* u64 map */
int      axon_fi_map_put(axon_fi_map_t *map, uint64_t key, uint64_t val);
int      axon_fi_map_get(const axon_fi_map_t *map, uint64_t key, uint64_t *val);
void     axon_fi_map_del(axon_fi_map_t *map, uint64_t key);
void     axon_fi_map_free(axon_fi_map_t *map);

extern struct fi_ops_tagged axon_fi_tagged_ops;

/* -ENOSYS fillers for ops the provider does not offer. */
int axon_fi_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags);
int axon_fi_no_control(struct fid *fid, int command, void *arg);
int axon_fi_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
                        void *context);
extern struct fi_ops_msg axon_fi_no_msg_ops;
extern struct fi_ops_rma axon_fi_no_rma_ops;

#endif /* AXON_FI_H */
