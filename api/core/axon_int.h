/*
 * Internal objects behind the public handles: context, worker, endpoint.
 * Layering: api/ includes framework/; framework/ never includes api/.
 */
#ifndef AXON_INT_H
#define AXON_INT_H

#include "axon.h"
#include "component.h"
#include "config.h"
#include "idle.h"
#include "list.h"
#include "loader.h"
#include "log.h"
#include "mpool.h"
#include "select.h"
#include "tag_match.h"

/* Options every context reads (declared in context.c's table). */
typedef struct axon_global_opts {
    unsigned                 log_level;
    char                    *log_file;
    axon_config_allow_list_t tls;
    axon_config_allow_list_t net_devices;
    axon_config_names_t      component_path;
    int                      warn_unused_env;
    size_t                   bcopy_thresh;
    size_t                   rndv_thresh;
    size_t                   rndv_split_thresh;
    size_t                   rndv_runs_min;   /* mean run for lent runs (rndv_runs.c) */
    unsigned                 rndv_scheme;   /* axon_rndv_scheme_t: auto, get, stream */
    unsigned                 rc_max_peers;
    unsigned                 max_rndv_rails; /* lanes a rendezvous stripes over, 1..AXON_RNDV_RAILS_MAX */
    unsigned                 tag_hash_bits;
    unsigned                 max_unexp_pool;
    unsigned                 rma_path;      /* axon_rma_path_mode_t (mem.h): auto or am */
    unsigned                 atomic_mode;   /* axon_atomic_mode_t (mem.h): cpu, device, guess */
    unsigned                 yield;         /* axon_idle_yield_t (idle.h) */
    double                   yield_spin;    /* seconds idle before yielding the core */
    unsigned                 coll_algo[AXON_COLL_LAST];  /* index into axon_coll_algo_names */
    unsigned                 coll_knomial_radix;
    unsigned                 coll_offload;  /* AXON_COLL_OFFLOAD_*: auto, y, n */
    char                    *topology;      /* AXON_TOPOLOGY: topo.h's source */
} axon_global_opts_t;

/* AXON_COLL_OFFLOAD: the device runs barrier, bcast and allreduce where it can. */
enum {
    AXON_COLL_OFFLOAD_AUTO   = 0,   /* when every member of a team can */
    AXON_COLL_OFFLOAD_ALWAYS = 1,   /* y: a member that cannot is an error */
    AXON_COLL_OFFLOAD_NEVER  = 2,
};

/* Per collective: "auto", then the names of its algorithms (AXON_COLL_<NAME>_ALGO). */
extern const char *const *const axon_coll_algo_names[AXON_COLL_LAST];

extern const axon_config_entry_t axon_global_config_table[];

/* AXON_RNDV_SCHEME: how the receiver of a rendezvous takes the data. */
typedef enum {
    AXON_RNDV_SCHEME_AUTO   = 0,  /* a get where measured cheaper than streaming */
    AXON_RNDV_SCHEME_GET    = 1,  /* a get wherever the lane can */
    AXON_RNDV_SCHEME_STREAM = 2,  /* the sender streams after an RTR */
} axon_rndv_scheme_t;

extern const char *const axon_rndv_scheme_names[];

struct axon_context {
    axon_global_opts_t      opts;
    uint32_t                features;
    axon_component_set_t    comps;
    axon_select_resource_t *rscs;       /* resources admitted by AXON_TLS/NET_DEVICES */
    unsigned                num_rscs;
    struct axon_mem_ctx    *mem;        /* mapped memory, keys' segments, workers (mem.c) */
    int                     amo_device; /* AXON_ATOMIC_MODE resolved: the device does atomics */
};

/* One transport interface opened on a worker. */
typedef struct axon_worker_iface {
    axon_iface_t                 *iface;
    const axon_select_resource_t *rsc;
    unsigned                      distance;  /* of its device from the creating thread (topo.h) */
} axon_worker_iface_t;

#define AXON_RX_FRAG_BUCKETS 64
#define AXON_ID_BUCKETS      64
#define AXON_PEER_BUCKETS    64

/* Tag spaces: separate matching queues, so collectives' messages never meet
 * the application's receives (the space travels in the match header). */
enum {
    AXON_TAG_SPACE_APP  = 0,
    AXON_TAG_SPACE_COLL = 1,
    AXON_TAG_SPACES
};

/* What this worker knows of a peer worker: its address (from its hello, or
 * from the user's endpoint) and the endpoint replies go through. A failed
 * peer no endpoint reaches keeps only its status, among the last
 * AXON_PEER_DEAD_MAX such (worker->dead_peers, oldest first). */
typedef struct axon_peer {
    axon_list_link_t link;         /* in worker->peers[bucket] */
    axon_list_link_t dead_link;    /* in worker->dead_peers, once only its status is left */
    uint64_t         uuid;
    void            *address;
    size_t           address_length;
    axon_ep_h        ep;           /* user or internal endpoint to the peer, or NULL */
    axon_status_t    status;       /* AXON_OK, or why the peer is gone */
    int              buried;       /* on worker->dead_peers */
} axon_peer_t;

#define AXON_PEER_DEAD_MAX 1024

struct axon_worker {
    axon_context_h       context;
    uint64_t             uuid;
    axon_worker_iface_t *ifaces;
    unsigned             num_ifaces;
    axon_am_handler_t    am_handlers[AXON_AM_ID_MAX];
    axon_am_rx_dest_t    am_rx_dest[AXON_AM_ID_MAX];  /* zero-copy placement, NULL: none */
    unsigned             num_protos;      /* of axon_protocols, set up on this worker */
    axon_mpool_t         req_mp;
    axon_mpool_t         runs_mp;         /* rendezvous run lists (axon_request_runs_get) */
    axon_mpool_t         unexp_mp;        /* small unexpected messages */
    axon_mpool_t         frag_mp;         /* reassembly of multi-fragment messages */
    axon_tag_match_t     tm[AXON_TAG_SPACES];  /* the application's, the collectives' */
    axon_list_link_t     teams;           /* collectives: every team of the worker */
    struct iovec         zcopy_iov[AXON_TL_IOV_MAX];  /* rma.c: a layout's runs for one op */
    struct axon_team_gen *team_gens;      /* teams made so far over each set of members */
    unsigned             num_team_gens;
    axon_list_link_t     coll_polls;      /* offloaded collectives whose device chain runs */
    axon_list_link_t     rail_waits;      /* receives with rendezvous stripes still to post */
    struct axon_coll_xc *coll_xc;         /* the worker's offload device (coll_offload.c) */
    unsigned             proto_polls;     /* protocols that want their progress hook called */
    axon_list_link_t     eps;             /* every open endpoint */
    unsigned             num_eps;         /* on eps: lane choice past AXON_RC_MAX_PEERS */
    axon_list_link_t     pending_eps;     /* endpoints with queued sends */
    axon_list_link_t     deferred;        /* completed requests awaiting their callback */
    axon_list_link_t     rx_frags[AXON_RX_FRAG_BUCKETS];
    axon_list_link_t     id_map[AXON_ID_BUCKETS];   /* requests awaiting a peer */
    axon_list_link_t     peers[AXON_PEER_BUCKETS];
    axon_list_link_t     dead_peers;      /* failed peers' statuses, oldest first */
    unsigned             num_dead_peers;
    uint64_t             next_msg_id;
    uint64_t             next_req_id;
    void                *address;         /* packed once, sent in every hello */
    size_t               address_length;
    int                  in_progress;     /* >0 inside axon_worker_progress */
    int                  efd;             /* axon_worker_get_efd's epoll set, or -1 */
    unsigned             progress_calls;  /* idle ifaces are polled once in AXON_IFACE_IDLE_POLLS */
    uint64_t             iface_events;    /* events the ifaces handled: busy lanes may be free */
    axon_idle_t          idle;            /* when empty progress calls yield the core */
    axon_list_link_t     mem_link;        /* in the context's workers (mem.c) */
    uint32_t             rma_fence_epoch; /* axon_worker_fence calls (rma.c) */
};

/* An endpoint's one-sided operations (rma.c): what flush and fence wait for. */
typedef struct axon_ep_rma {
    axon_list_link_t ops;          /* requests not yet complete at the target, in issue order */
    axon_list_link_t flushes;      /* flush requests waiting for ops issued before them */
    axon_list_link_t waitq;        /* requests a fence holds back, in issue order */
    uint64_t         seq;          /* of the last request put on ops */
    uint64_t         fence_seq;    /* ops up to this one come before the last fence */
    unsigned         unordered;    /* requests on ops that may complete out of order (zcopy) */
    uint32_t         fence_epoch;  /* the worker's fence count when last looked at */
    axon_status_t    error;        /* a failure of an operation already reported done */
    int              draining;     /* inside the waitq drain */
} axon_ep_rma_t;

/* Most lanes one rendezvous stripes its data over (AXON_MAX_RNDV_RAILS is at most this). */
#define AXON_RNDV_RAILS_MAX 4

/* A transport endpoint used by an axon endpoint, with its limits cached. */
typedef struct axon_lane {
    axon_tl_ep_t           *tl_ep;
    const axon_iface_ops_t *ops;
    const axon_resource_t  *resource;
    axon_md_t              *md;         /* the resource's memory domain, or NULL */
    size_t                  max_short;
    size_t                  max_bcopy;
    char                    peer_dev[AXON_DEV_NAME_MAX];  /* the peer's device it reaches */
} axon_lane_t;

/*
 * The lanes a rendezvous stripes its data over: lane[0] is the endpoint's
 * bulk lane, the others lanes of the same transport on other devices that
 * reach the peer. Lane i moves bytes [bound(i), bound(i + 1)) of a range,
 * its share of the lanes' summed bandwidth estimates (shares in 1/65536).
 */
typedef struct axon_ep_rails {
    unsigned    count;                         /* 2..AXON_RNDV_RAILS_MAX */
    uint32_t    share[AXON_RNDV_RAILS_MAX];    /* cumulative: share[count - 1] = 65536 */
    axon_lane_t lane[AXON_RNDV_RAILS_MAX];   /* peer_dev: whose key a get on it needs */
} axon_ep_rails_t;

struct axon_ep {
    axon_worker_h    worker;
    axon_list_link_t link;          /* in worker->eps */
    axon_list_link_t pending_link;  /* in worker->pending_eps while sends are queued */
    axon_list_link_t pending;       /* queued send requests, in send order */
    /*
     * Every eager message rides the AM lane, so messages to one peer keep
     * their order; the bulk lane is for rendezvous data.
     */
    axon_lane_t      am_lane;
    axon_lane_t      bulk_lane;
    /* Device atomic mode: the lane whose device executes atomics (AXON_CAP_AMO_DEVICE),
     * maybe one of the two above; tl_ep NULL when none reaches the peer. */
    axon_lane_t      amo_lane;
    /* Rendezvous data striped over several lanes (rails.c): opened at the first
     * rendezvous that would use them (rails_known), NULL: the bulk lane alone. */
    struct axon_ep_rails *rails;
    int              rails_known;
    size_t           eager_short_max;  /* payload that fits one short AM */
    size_t           eager_bcopy_max;  /* payload that fits one bcopy AM */
    axon_request_h   close_req;        /* set while a flushing close waits */
    axon_peer_t     *peer;
    uint64_t         peer_uuid;
    size_t           rndv_thresh;      /* messages this large use rendezvous */
    size_t           rndv_get_min;     /* rendezvous this large is read by a get, smaller
                                        * ones the sender streams (SIZE_MAX: never get) */
    unsigned         outstanding;      /* sends waiting for the peer (ack, rendezvous) */
    int              internal;         /* created for replies, not by the user */
    axon_status_t    status;           /* AXON_OK, or the failure of the peer */
    int              err_notified;
    axon_ep_error_callback_t err_cb;
    void            *err_cb_arg;
    axon_ep_rma_t    rma;
};

/*
 * What a protocol (tag/, rma/; coll/ next) hooks into the core's objects.
 * The core calls these through axon_protocols (api/protocols.c) and names no
 * protocol; a protocol calls the core. Any hook may be NULL.
 */
typedef struct axon_proto_ops {
    const char    *name;
    /* Pools, AM handlers and placements (worker->am_handlers, am_rx_dest). */
    axon_status_t (*worker_init)(axon_worker_h worker);
    void          (*worker_cleanup)(axon_worker_h worker);
    /* The endpoint's lanes are open: set the protocol's part of it. */
    void          (*ep_init)(axon_ep_h ep);
    /* The endpoint is destroyed or its peer failed: end what waits on the
     * protocol's own lists of ep, before the core fails ep's pending queue. */
    void          (*ep_abort)(axon_ep_h ep, axon_status_t status);
    /* A peer failed: end what waits on it outside endpoints (receives). */
    void          (*peer_failed)(axon_worker_h worker, uint64_t peer_uuid, axon_status_t status);
    /* Called by worker progress while worker->proto_polls > 0 (a protocol
     * raises it while it has something to poll besides the transports). */
    unsigned      (*progress)(axon_worker_h worker);
} axon_proto_ops_t;

/* Every protocol, NULL-terminated; init hooks run in this order, cleanups reversed. */
extern const axon_proto_ops_t *const axon_protocols[];

/* Call _hook(...) of every protocol that has one, in table order. */
#define axon_protocols_call(_hook, ...) \
    do { \
        const axon_proto_ops_t *const *_proto; \
        for (_proto = axon_protocols; *_proto != NULL; ++_proto) { \
            if ((*_proto)->_hook != NULL) { \
                (*_proto)->_hook(__VA_ARGS__); \
            } \
        } \
    } while (0)

/* Worker internals used across api/ files */
void axon_worker_ep_pending_add(axon_worker_h worker, axon_ep_h ep);
/* Close the worker's epoll set of event descriptors, if axon_worker_get_efd made one. */
void axon_worker_efd_close(axon_worker_h worker);
void axon_ep_destroy_now(axon_ep_h ep, axon_status_t status);
int  axon_ep_progress_pending(axon_ep_h ep);
/* Complete ep's queued requests with status (those a transport still owes a completion to
 * finish from there). */
void axon_ep_fail_pending(axon_ep_h ep, axon_status_t status);
/* Queue req behind ep's earlier sends; req->step runs at its turn. */
void axon_ep_pending_push(axon_ep_h ep, axon_request_h req);
/* Send a small control message on ep, queueing it if the transport is full. */
axon_status_t axon_ep_send_ctrl(axon_ep_h ep, uint8_t am_id, const void *hdr, size_t hdr_len);
/* Finish a flushing close once nothing is queued or outstanding. */
void axon_ep_check_close(axon_ep_h ep);

/* The wire-up message, first on every endpoint: [worker address]. Protocols'
 * AM ids are in their own headers (tag_proto.h, rma_proto.h). */
#define AXON_AM_WIREUP_HELLO 10

/* Peers (peer.c) */
axon_peer_t  *axon_peer_find(axon_worker_h worker, uint64_t uuid);
/* How loud to be of a message about a request we do not know: a peer that
 * failed (or is forgotten) still has messages in flight when it dies, which
 * are no news (debug); from a live peer, otherwise. */
axon_log_level_t axon_peer_stray_level(axon_worker_h worker, uint64_t uuid,
                                       axon_log_level_t otherwise);
/* Why a peer we cannot answer is gone: its failure, or AXON_ERR_UNREACHABLE if unknown. */
axon_status_t axon_peer_gone_status(axon_worker_h worker, uint64_t uuid);
/* The endpoint to reach a peer that sent us something: the user's, or an
 * internal one made from its hello. NULL (logged) if none can be made. */
axon_ep_h     axon_peer_reply_ep(axon_worker_h worker, uint64_t uuid);
axon_status_t axon_peer_attach_ep(axon_worker_h worker, axon_ep_h ep, const void *address,
                                  size_t address_length);
void          axon_peer_detach_ep(axon_ep_h ep);
axon_status_t axon_peer_send_hello(axon_ep_h ep);
void          axon_peer_failure(void *arg, uint64_t peer_uuid, axon_status_t status);
void          axon_peer_cleanup_all(axon_worker_h worker);
void          axon_peer_register_handlers(axon_worker_h worker);
/* Endpoint creation shared by axon_ep_create and reply endpoints. */
axon_status_t axon_ep_create_internal(axon_worker_h worker, const void *address,
                                      size_t address_length, int internal, axon_ep_h *ep_p);

#endif
