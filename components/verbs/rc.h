/*
 * rc: active messages and RDMA read/write over reliable-connected QPs.
 *
 * One iface per port ("rc/softib0:1"): a send CQ, a receive CQ and one SRQ
 * shared by every QP, registered bounce buffers for sends and receives, and a
 * small UD QP that carries the connection handshake (rc_hs.c).
 *
 * A connection (axon_rc_conn_t) is one RC QP to one peer worker, used both
 * ways: our eps to that peer all send on it, and what the peer sends on it is
 * delivered to the iface's handlers. It is created by our first ep_create to
 * the peer, or by the peer's connection request; the other side's later
 * ep_create reuses it.
 *
 * Send side: every WR takes a slot of the connection's descriptor ring (the
 * bounce buffer, completion and registration it releases); one WR in
 * tx_moderation is signaled and its completion releases every slot before
 * it. AMs also take a credit of the peer's receive window; credits come back
 * in the header of the peer's messages or in a CREDIT message once half a
 * window was consumed. No credit, slot, buffer or CQ room: NO_RESOURCE.
 *
 * Files by stage: rc_config.c (configuration, resources), rc_iface.c (open,
 * close, progress, receive path), rc_conn.c (connection life), rc_hs.c (rc's
 * own handshake: one of the two connection managers, see axon_rc_cm_t),
 * rc_ep.c (endpoints, send path), rc_rdma.c (keys, get/put), rc_amo.c;
 * rc_component.c is the rc plugin's descriptor. All but the descriptor are
 * one convenience library that the rc and rdmacm plugins link.
 */
#ifndef AXON_RC_H
#define AXON_RC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "component.h"
#include "list.h"
#include "sys.h"
#include "log.h"
#include "rcache.h"
#include "verbs_common.h"
#include "rc_wire.h"

/* Largest am_short (header + payload): bigger ones go through bcopy */
#define AXON_RC_MAX_SHORT        2048
/* Completions taken per poll_cq call */
#define AXON_RC_POLL_BATCH       16
/* With no signaled send out, the send CQ is looked at every this many polls */
#define AXON_RC_TX_IDLE_POLLS    16
/* Buckets of the QPN -> connection map (power of 2) */
#define AXON_RC_QPN_HASH         256
/* Handshake QP: buffers, and the retry interval of a REQ */
#define AXON_RC_HS_BUFS          64
#define AXON_RC_HS_RETRY_NS      100000000ull
/* Timers are checked every this many progress calls (and on every call while handshaking) */
#define AXON_RC_TIMER_INTERVAL   64
/* Iface close waits at most this long for goodbyes to go out */
#define AXON_RC_CLOSE_WAIT_SEC   0.5
/* RNR retries: infinite, a safety net only (credits keep receivers from running dry) */
#define AXON_RC_RNR_RETRY        7
#define AXON_RC_MIN_RNR_TIMER    12   /* 0.64 ms */
#define AXON_RC_MAX_RD_ATOMIC    16

/* Options, read from AXON_RC_* (table in rc_component.c) */
typedef struct axon_rc_config {
    size_t   seg_size;           /* max_bcopy */
    unsigned tx_queue_len;       /* send WRs in flight per connection */
    unsigned tx_bufs;            /* send bounce buffers per iface */
    unsigned rx_queue_len;       /* SRQ receive buffers per iface */
    unsigned tx_moderation;      /* one signaled send in this many */
    unsigned fc_window;          /* AMs a peer may send before credits come back */
    unsigned max_inline;         /* inline sends up to this many bytes (device permitting) */
    double   timeout;            /* transport ack timeout, seconds */
    unsigned retry_count;        /* transport retries before the peer is declared gone */
    double   keepalive_interval; /* idle time before a zero-length write probes the peer */
    double   connect_timeout;    /* handshake deadline */
    unsigned gid_index;
    unsigned rcache_max;         /* unused registrations kept (0: register per operation) */
} axon_rc_config_t;

typedef struct axon_rc_iface axon_rc_iface_t;
typedef struct axon_rc_conn  axon_rc_conn_t;
typedef struct axon_rc_ep    axon_rc_ep_t;

/* A local indirect key for an operation over several pieces (rc_layout.c) */
typedef struct axon_rc_layout_key axon_rc_layout_key_t;

/* What one send WR holds until its completion (or a later signaled one) */
typedef struct axon_rc_tx_desc {
    axon_rc_conn_t       *conn;
    void                 *buf;   /* bounce buffer to return, or NULL */
    axon_tl_completion_t *comp;  /* get/put to complete, or NULL */
    axon_rcache_region_t *region; /* the local buffer's registration to put back, or NULL */
    axon_rc_layout_key_t *layout_key; /* the local pieces' key to put back, or NULL */
    struct axon_umr_cached *iov_key;  /* ... when the domain's cache made it, or NULL */
    int                   signaled;   /* counted in the iface's tx_signaled */
} axon_rc_tx_desc_t;

typedef enum {
    AXON_RC_CONN_REQ_SENT = 0,  /* active: REQ out, waiting for REP */
    AXON_RC_CONN_REP_SENT,      /* passive: QP at RTS, waiting for RTU before sending */
    AXON_RC_CONN_OPEN,
    AXON_RC_CONN_FAILED,        /* status says why */
    AXON_RC_CONN_STATE_LAST
} axon_rc_conn_state_t;

/* Connection flags */
#define AXON_RC_CONN_F_RTU_PENDING    0x01  /* RTU waits for a send slot */
#define AXON_RC_CONN_F_CREDIT_PENDING 0x02  /* an explicit credit message is due */
#define AXON_RC_CONN_F_BYE_PENDING    0x04  /* our BYE is due */
#define AXON_RC_CONN_F_BYE_SENT       0x08  /* our BYE is posted */
#define AXON_RC_CONN_F_PEER_BYE       0x10  /* the peer said goodbye: errors are not failures */
#define AXON_RC_CONN_F_REPORTED       0x20  /* peer failure reported */
#define AXON_RC_CONN_F_KA_POSTED      0x40  /* a keep-alive write is in flight */
#define AXON_RC_CONN_F_UMR            0x80  /* the QP may post UMR fills (rc_layout.c) */
#define AXON_RC_CONN_F_PEER_LEFT      0x100 /* the peer's goodbye was LEAVE: no BYE owed */

struct axon_rc_conn {
    axon_rc_iface_t       *iface;
    axon_dev_qp_t         *qp;
    uint64_t               peer_uuid;
    uint32_t               conn_id;        /* ours, in handshake messages */
    uint32_t               peer_conn_id;
    uint8_t                state;          /* axon_rc_conn_state_t */
    uint8_t                active;         /* we sent the REQ this QP answers to */
    uint16_t               flags;          /* AXON_RC_CONN_F_* */
    uint32_t               umr_inline;     /* F_UMR: fill entries the QP takes inline */
    axon_status_t          status;         /* FAILED: what sends return */
    unsigned               num_eps;
    axon_list_link_t       eps;            /* axon_rc_ep_t.link */
    axon_list_link_t       link;           /* iface->conns while findable, else ->closing */
    axon_rc_conn_t        *qpn_next;       /* iface->qpn_hash chain */
    /* Peer */
    axon_verbs_dev_addr_t  peer_addr;
    uint32_t               peer_ud_qpn;
    uint32_t               peer_qpn;
    uint32_t               peer_psn;
    uint64_t               peer_ka_addr;
    uint32_t               peer_ka_rkey;
    uint32_t               psn;            /* our first PSN */
    /* Handshake timers (ns) */
    uint64_t               hs_deadline;
    uint64_t               hs_next;
    /* Send side */
    int32_t                tx_credits;     /* AMs we may still send */
    uint32_t               tx_depth;       /* slots in tx_desc (power of 2) */
    uint64_t               tx_posted;      /* WRs posted */
    uint64_t               tx_completed;   /* WRs whose slot was released */
    uint64_t               bye_end;        /* tx_posted after our BYE (or LEAVE) */
    uint64_t               tx_signaled;    /* 1 + number of the last signaled WR */
    axon_rc_tx_desc_t     *tx_desc;
    /* Receive side */
    uint32_t               rx_credits;     /* consumed messages not yet credited back */
    uint32_t               peer_window;
    uint64_t               last_heard_ns;  /* last completion on this QP */
    /* components/rdmacm: the CM id that made the QP, its flags */
    void                  *cm_id;
    uint8_t                cm_flags;
};

struct axon_rc_ep {
    axon_tl_ep_t      super;
    axon_rc_conn_t   *conn;       /* NULL once the connection is gone */
    uint64_t          peer_uuid;
    axon_status_t     status;     /* set when the connection failed */
    axon_list_link_t  link;       /* conn->eps */
};

/*
 * rc's connection manager: how an iface's connections come up. rc's own
 * (rc_hs.c: REQ/REP/RTU over a UD QP; the rc component) or the RDMA CM
 * (components/rdmacm). Queues, data path, credits, keep-alives, goodbyes
 * and failures are the same code for both; none of these is per message.
 */
typedef struct axon_rc_cm {
    const char   *name;          /* the transport: names the iface ("rc/softib0:1") */
    size_t        iface_size;    /* the iface struct, an axon_rc_iface_t first */
    size_t        dev_addr_len;
    size_t        iface_addr_len;
    axon_status_t (*get_address)(axon_rc_iface_t *iface, void *dev_addr, void *iface_addr);
    int           (*is_reachable)(axon_rc_iface_t *iface, const void *dev_addr,
                                  const void *iface_addr);
    axon_status_t (*dev_open)(axon_verbs_dev_t *dev, const char *dev_name, int gid_index);
    void          (*dev_close)(axon_verbs_dev_t *dev);
    /* once the queues exist (cm_config: the component's own options) / once the
     * connections are gone; cleanup also after a failed init */
    axon_status_t (*init)(axon_rc_iface_t *iface, const void *cm_config);
    void          (*cleanup)(axon_rc_iface_t *iface);
    /* The connection to peer_uuid our eps may use: the findable one, or a new one
     * that comes up in the background (bad addresses fail here, logged) */
    axon_status_t (*conn_get)(axon_rc_iface_t *iface, uint64_t peer_uuid, const void *dev_addr,
                              const void *iface_addr, axon_rc_conn_t **conn_p);
    /* Handshake messages or CM events; with the timers, every call while connecting */
    unsigned      (*progress)(axon_rc_iface_t *iface);
    void          (*conn_destroy)(axon_rc_conn_t *conn);   /* its QP, and what made it */
} axon_rc_cm_t;

/* The memory domain (rc_md.c): the device every iface of a context shares. */
typedef struct axon_rc_md {
    axon_md_t                 super;
    const axon_rc_cm_t       *cm;            /* opened the device */
    axon_verbs_dev_t          dev;
    axon_rcache_t            *rcache;        /* zero-copy and rendezvous registrations */
    pthread_mutex_t           umr_lock;      /* opens umr once */
    struct axon_umr          *umr;           /* layout keys (components/umr), when asked */
    struct axon_umr_cache    *umr_cache;     /* ... transient ones, cached */
    axon_status_t             umr_status;    /* ... or why not */
    char                      name[AXON_TL_NAME_MAX + AXON_DEV_NAME_MAX]; /* "rc/softib0:1" */
} axon_rc_md_t;

struct axon_rc_iface {
    axon_iface_t              super;
    axon_iface_ops_t          ops;           /* rc's, with the manager's addresses */
    const axon_rc_cm_t       *cm;
    axon_verbs_dev_t          dev;           /* the domain's (a copy: not closed here) */
    axon_rc_config_t          config;
    char                      name[AXON_TL_NAME_MAX + AXON_DEV_NAME_MAX]; /* "rc/softib0:1" */
    /* Upper layer */
    void                     *am_arg;
    axon_am_handler_t         am_handlers[AXON_AM_ID_MAX];
    axon_peer_failure_cb_t    peer_failure;
    uint64_t                  worker_uuid;
    /* Limits */
    size_t                    seg_size;
    size_t                    max_short;
    uint32_t                  max_inline;    /* actual, header included */
    uint32_t                  tx_depth;
    uint32_t                  window;
    uint8_t                   timeout_exp;
    uint64_t                  keepalive_ns;
    uint64_t                  connect_ns;
    /* Queues shared by every connection */
    axon_dev_cq_t            *send_cq;
    axon_dev_cq_t            *recv_cq;
    axon_verbs_srq_ring_t     rx;            /* the SRQ and its refill chain */
    int                       tx_cq_avail;   /* send CQ entries not promised to a WR */
    int                       tx_poll_due;   /* the last poll delivered and skipped the send CQ */
    unsigned                  tx_signaled;   /* signaled WRs not completed, every connection */
    unsigned                  tx_idle_polls; /* polls that skipped the send CQ: none was out */
    axon_verbs_bufpool_t      tx_pool;
    axon_verbs_bufpool_t      rx_pool;
    axon_verbs_bufpool_t      amo_pool;      /* device atomics' result slots (rc_amo.c) */
    /* Handshake (rc_hs.c) */
    axon_dev_qp_t            *hs_qp;
    int                       hs_closed;     /* closing: handshake messages are drained, not read */
    axon_dev_cq_t            *hs_cq;
    axon_verbs_bufpool_t      hs_pool;
    unsigned                  hs_waiting;    /* connections coming up (either manager) */
    /* The domain's registrations of user memory (rc_md.c) */
    axon_rc_md_t             *md;
    axon_rcache_t            *rcache;
    /* Local layout keys (rc_layout.c): made at the first use, 1 ready, -1 none */
    axon_rc_layout_key_t     *layout_keys;
    axon_rc_layout_key_t     *layout_free;
    axon_dev_mem_region_t    *layout_regs;   /* a fill's entries, copied by the post */
    int                       layout_keys_state;
    /* Keep-alive target: peers' zero-length writes name it */
    void                     *ka_buf;
    axon_dev_mr_t            *ka_mr;
    /* Connections */
    axon_list_link_t          conns;         /* findable by peer uuid */
    axon_list_link_t          closing;       /* goodbye exchange or failure in progress */
    axon_rc_conn_t           *qpn_hash[AXON_RC_QPN_HASH];
    uint32_t                  next_conn_id;
    unsigned                  timer_skip;
    int                       leaving;       /* closing: goodbyes say LEAVE */
};

static inline uint64_t axon_rc_now_ns(void)
{
    return (uint64_t)(axon_sys_time_sec() * 1e9);
}

/* rc_config.c */
extern const axon_config_entry_t axon_rc_config_table[];
axon_status_t axon_rc_config_check(const axon_rc_config_t *c);
/* A port's rc resource (arg: the axon_rc_config_t): capabilities, limits, memory per ep */
int           axon_rc_fill_resource(const axon_verbs_port_info_t *info, axon_resource_t *res,
                                    void *arg);

/* rc_iface.c */
/* An iface on resource whose connections cm brings up (cm_config: cm's options). */
axon_status_t axon_rc_iface_open(const axon_resource_t *resource, const axon_rc_config_t *config,
                                 const axon_iface_params_t *params, const axon_rc_cm_t *cm,
                                 const void *cm_config, axon_iface_t **iface_p);
/* Poll both CQs once (no timers, no manager): returns completions handled. */
unsigned      axon_rc_iface_poll(axon_rc_iface_t *iface);
/* A completion on the send CQ (wr_id = descriptor). */
void          axon_rc_iface_tx_completion(axon_rc_iface_t *iface, const axon_dev_wc_t *wc);

/* rc_hs.c: rc's own connection manager */
extern const axon_rc_cm_t axon_rc_hs_cm;
/* REQ_SENT: send the REQ again (timers) */
void          axon_rc_hs_resend(axon_rc_conn_t *conn);

/* rc_conn.c */
/* The keep-alive target peers write to (both managers). */
axon_status_t axon_rc_conn_iface_init(axon_rc_iface_t *iface);
void          axon_rc_conn_iface_cleanup(axon_rc_iface_t *iface);
axon_rc_conn_t *axon_rc_conn_by_qpn(axon_rc_iface_t *iface, uint32_t qpn);
/* The findable connection to uuid, or NULL. */
axon_rc_conn_t *axon_rc_conn_by_uuid(axon_rc_iface_t *iface, uint64_t uuid);
/* A new connection on qp (NULL: create one, taken to INIT), not handshaking yet. */
axon_status_t axon_rc_conn_new(axon_rc_iface_t *iface, uint64_t peer_uuid,
                               const axon_verbs_dev_addr_t *addr, uint32_t ud_qpn,
                               axon_dev_qp_t *qp, axon_rc_conn_t **conn_p);
void          axon_rc_conn_set_state(axon_rc_conn_t *conn, axon_rc_conn_state_t state);
/* A connection on a QP someone else connects (the CM): REP_SENT ("the QP is up, the
 * peer has not confirmed") until axon_rc_conn_rx_ctrl(RTU), within RC_CONNECT_TIMEOUT. */
axon_status_t axon_rc_conn_adopt(axon_rc_iface_t *iface, axon_dev_qp_t *qp, uint64_t peer_uuid,
                                 int active, axon_rc_conn_t **conn_p);
/* What the peer grants: its receive window, its keep-alive target. */
void          axon_rc_conn_set_peer(axon_rc_conn_t *conn, uint16_t window, uint64_t ka_addr,
                                    uint32_t ka_rkey);
/* Move every ep of from to to (the connection that won a simultaneous connect). */
void          axon_rc_conn_move_eps(axon_rc_conn_t *from, axon_rc_conn_t *to);
/* No longer found by uuid: new eps to the peer get a new connection. */
void          axon_rc_conn_retire(axon_rc_conn_t *conn);
/* Handshake retries and deadlines, keep-alives, pending control messages. */
void          axon_rc_conn_timers(axon_rc_iface_t *iface, uint64_t now);
/* A control message (RTU, CREDIT, BYE, LEAVE) arrived on conn. */
void          axon_rc_conn_rx_ctrl(axon_rc_conn_t *conn, uint8_t type);
/* Closing: the peers' control messages that arrived (messages are dropped: no
 * worker to take them) */
void          axon_rc_iface_poll_closing(axon_rc_iface_t *iface);
/* The connection failed: fail its eps, report the peer unless it said goodbye. */
void          axon_rc_conn_fail(axon_rc_conn_t *conn, axon_status_t status, const char *why);
/* An ep left conn: the last one starts the goodbye. */
void          axon_rc_conn_ep_removed(axon_rc_conn_t *conn);
/* Try to post what the flags say is due; 0 if nothing is left pending. */
int           axon_rc_conn_post_pending(axon_rc_conn_t *conn);
/* Free connections whose goodbye exchange finished. */
void          axon_rc_conn_reap(axon_rc_iface_t *iface);
/* iface_close: goodbyes out (bounded wait), then every QP destroyed. */
void          axon_rc_conn_close_all(axon_rc_iface_t *iface);

/* rc_ep.c */
axon_status_t axon_rc_ep_create(axon_iface_t *tl_iface, uint64_t peer_uuid, const void *dev_addr,
                                const void *iface_addr, axon_tl_ep_t **ep_p);
void          axon_rc_ep_destroy(axon_tl_ep_t *tl_ep);
axon_status_t axon_rc_ep_am_short(axon_tl_ep_t *tl_ep, uint8_t am_id, const void *hdr,
                                  size_t hdr_len, const void *payload, size_t length);
ssize_t       axon_rc_ep_am_bcopy(axon_tl_ep_t *tl_ep, uint8_t am_id, axon_pack_cb_t pack,
                                  void *arg);
axon_status_t axon_rc_ep_flush(axon_tl_ep_t *tl_ep);
axon_status_t axon_rc_ep_check(axon_tl_ep_t *tl_ep);
/*
 * Post one send WR on conn (slot, CQ room and signaling handled here); the
 * descriptor fields buf/comp/region are released on completion. AXON_OK or
 * AXON_ERR_NO_RESOURCE (nothing posted, nothing taken).
 */
axon_status_t axon_rc_conn_post(axon_rc_conn_t *conn, axon_dev_send_wr_t *wr, void *buf,
                                axon_tl_completion_t *comp, axon_rcache_region_t *region,
                                int force_signal);
/* Send a header-only control message (no credit needed). */
axon_status_t axon_rc_conn_send_ctrl(axon_rc_conn_t *conn, uint8_t type);
/* Room for one more WR on conn? */
static inline int axon_rc_conn_can_post(const axon_rc_conn_t *conn)
{
    return ((conn->tx_posted - conn->tx_completed) < conn->tx_depth) &&
           (conn->iface->tx_cq_avail > 0);
}

/*
 * rc_md.c: the domain of resource, its device opened by cm (port GID
 * gid_index), keeping up to rcache_max unused registrations. It uses only
 * cm's name, dev_open and dev_close: dc shares the domain with a manager
 * that has just those.
 */
axon_status_t axon_rc_md_open(const axon_resource_t *resource, unsigned gid_index,
                              unsigned rcache_max, const axon_rc_cm_t *cm, axon_md_t **md_p);
static inline const axon_dev_mr_t *axon_rc_region_mr(const axon_rcache_region_t *region)
{
    return (const axon_dev_mr_t *)region->memh;
}
/*
 * rc_md.c: one local key over iov's pieces in order, for an operation of
 * more pieces than a pooled key takes (rc) or any (dc): the domain's cached
 * layout key (components/umr: keys over keys past max_klm_list_size), made
 * on the umr service's QP and waited for, so any QP of the domain may name
 * it. *addr_p is the key's first byte, *total_p its length. Held until
 * axon_rc_md_iov_key_put. AXON_ERR_UNSUPPORTED: no UMR, a zero-length
 * piece, or pieces too far apart to register their span (logged at debug
 * level): the caller moves the pieces one operation each.
 */
axon_status_t axon_rc_md_iov_key(axon_rc_md_t *md, const struct iovec *iov, size_t iov_count,
                                 struct axon_umr_cached **key_p, uint32_t *lkey_p,
                                 uint64_t *addr_p, size_t *total_p);
void          axon_rc_md_iov_key_put(axon_rc_md_t *md, struct axon_umr_cached *key);
/*
 * rc_rdma.c: the key over iov (above), the remote key checked against
 * [remote_addr, + the pieces' total), and the read or write naming both in
 * wr (its one entry in sge), for rc's and dc's ep_get/put_zcopy_iov. On
 * success the caller posts wr and puts *key_p back at its completion.
 */
axon_status_t axon_rc_iov_key_wr(axon_rc_md_t *md, const char *name,
                                 axon_dev_wr_opcode_t opcode, const struct iovec *iov, size_t n,
                                 uint64_t remote_addr, const void *rkey_buf,
                                 struct axon_umr_cached **key_p, axon_dev_send_wr_t *wr,
                                 axon_dev_sge_t *sge);

/* rc_rdma.c */
/*
 * Read a packed rkey (from the wire, maybe unaligned) and check that it
 * covers remote_addr + length; logs "<name>: <what>: ..." and returns
 * AXON_ERR_INVALID_PARAM if not. Also dc's.
 */
axon_status_t axon_rc_rkey_unpack(const char *name, const char *what, const void *rkey_buf,
                                  uint64_t remote_addr, size_t length, axon_rc_rkey_t *rkey);
axon_status_t axon_rc_ep_get_zcopy(axon_tl_ep_t *tl_ep, void *buffer, size_t length,
                                   uint64_t remote_addr, const void *rkey,
                                   axon_tl_completion_t *comp);
axon_status_t axon_rc_ep_put_zcopy(axon_tl_ep_t *tl_ep, const void *buffer, size_t length,
                                   uint64_t remote_addr, const void *rkey,
                                   axon_tl_completion_t *comp);

/* rc_layout.c: several local pieces in one operation through a local UMR key */
axon_status_t axon_rc_ep_get_zcopy_iov(axon_tl_ep_t *tl_ep, const struct iovec *iov,
                                       size_t iov_count, uint64_t remote_addr, const void *rkey,
                                       axon_tl_completion_t *comp);
axon_status_t axon_rc_ep_put_zcopy_iov(axon_tl_ep_t *tl_ep, const struct iovec *iov,
                                       size_t iov_count, uint64_t remote_addr, const void *rkey,
                                       axon_tl_completion_t *comp);
/* A completed operation's key back to the pool; the pool's end at iface close. */
void          axon_rc_layout_key_put(axon_rc_iface_t *iface, axon_rc_layout_key_t *key);
void          axon_rc_layout_keys_cleanup(axon_rc_iface_t *iface);

/* rc_amo.c: atomics executed by the device (AXON_ATOMIC_MODE=device); also dc's */
uint32_t      axon_rc_amo_device_ops(const axon_dev_attr_t *attr);
/* Check an ep_atomic call against the resource's device ops and the key (logs). */
axon_status_t axon_rc_amo_check(const char *name, const axon_resource_t *res,
                                const axon_amo_args_t *args, uint64_t remote_addr,
                                const void *rkey_buf, const uint64_t *result,
                                const axon_tl_completion_t *comp, axon_rc_rkey_t *rkey);
/*
 * Take a result slot of pool (registered on dev at the first atomic) and fill
 * wr and sge for args at remote_addr: post wr with *slot_comp_p as the WR's
 * completion, which copies the result to result and then calls comp.
 * AXON_ERR_NO_RESOURCE: every slot in flight.
 */
axon_status_t axon_rc_amo_prepare(axon_verbs_bufpool_t *pool, axon_verbs_dev_t *dev,
                                  const char *name, const axon_amo_args_t *args,
                                  uint64_t remote_addr, uint32_t rkey, uint64_t *result,
                                  axon_tl_completion_t *comp, axon_dev_send_wr_t *wr,
                                  axon_dev_sge_t *sge, axon_tl_completion_t **slot_comp_p);
/* A prepared slot whose WR was not posted goes back to its pool. */
void          axon_rc_amo_unprepare(axon_tl_completion_t *slot_comp);
axon_status_t axon_rc_ep_atomic(axon_tl_ep_t *tl_ep, const axon_amo_args_t *args,
                                uint64_t remote_addr, const void *rkey, uint64_t *result,
                                axon_tl_completion_t *comp);

#endif
