/*
 * Code shared by the verbs transports (rc, ud), compiled into each plugin:
 * listing ports as resources, opening a device for an iface, the device
 * address format, a registered buffer pool, address handles and QP bring-up.
 *
 * Everything here goes through the device layer (dev.h), so the same plugin
 * runs on softib and on a real NIC (rdma-core). Where the two back ends want
 * different things (QP attribute masks), the difference is a table keyed by
 * the context's backend name, chosen once at open.
 *
 * Functions return axon_status_t and log one line on failure, naming the
 * device and the call that failed; the caller only passes the status up.
 */
#ifndef AXON_VERBS_COMMON_H
#define AXON_VERBS_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "component.h"
#include "dev.h"
#include "log.h"

/* ------------------------------------------------------------ resources */

/* What a transport needs from a port, besides the ACTIVE state. */
typedef struct axon_verbs_port_info {
    char                 dev_name[AXON_DEV_NAME_LEN];  /* "softib0" */
    const char          *backend;                      /* "softib", "rdma-core" */
    uint8_t              port_num;
    axon_dev_attr_t      dev_attr;
    axon_dev_port_attr_t port_attr;
} axon_verbs_port_info_t;

/*
 * Fill the transport-specific fields of res (cap_flags, max_short, max_bcopy,
 * max_zcopy, ep_memory, overhead_ns); tl_name, dev_name ("softib0:1"),
 * dev_type, latency_ns and bandwidth_MBps are already set. Return 0 to keep
 * the resource, -1 to skip it (after an axon_debug line saying why).
 */
typedef int (*axon_verbs_fill_cb_t)(const axon_verbs_port_info_t *info, axon_resource_t *res,
                                    void *arg);

/*
 * List every ACTIVE port of every device that has all of required_caps
 * (AXON_DEV_CAP_*) as a resource "<tl_name>/<dev>:<port>". A device lacking a
 * capability is skipped with a debug line naming what is missing ("softib0:1:
 * no srq, rc skipped"). No device at all is AXON_OK with *count_p = 0.
 * The array is malloc'd; the caller frees it.
 */
axon_status_t axon_verbs_query_resources(const char *tl_name, uint64_t required_caps,
                                         axon_verbs_fill_cb_t fill, void *arg,
                                         axon_resource_t **resources_p, unsigned *count_p);

/*
 * Performance estimates of a port: a softib port reports an emulation's
 * (latency >= 20 us, <= 1000 MB/s, so default selection prefers shm/tcp);
 * a real port's bandwidth comes from its active width and speed.
 */
void axon_verbs_port_estimates(const axon_verbs_port_info_t *info, double *latency_ns,
                               double *bandwidth_MBps);

/* ------------------------------------------------------------ device */

typedef enum {
    AXON_VERBS_BACKEND_SOFTIB = 0,
    AXON_VERBS_BACKEND_RDMACORE,
    AXON_VERBS_BACKEND_LAST
} axon_verbs_backend_t;

/* A device opened for one iface: context, protection domain, port. */
typedef struct axon_verbs_dev {
    axon_dev_context_t  *ctx;
    axon_dev_pd_t       *pd;
    axon_verbs_backend_t backend;       /* picks the QP attribute masks */
    uint8_t              port_num;
    int                  gid_index;
    axon_dev_gid_t       gid;
    axon_dev_attr_t      dev_attr;
    axon_dev_port_attr_t port_attr;
    char                 name[AXON_DEV_NAME_MAX]; /* "softib0:1", for log lines */
} axon_verbs_dev_t;

/*
 * Open the device of a resource's dev_name ("softib0:1"): context, PD, and
 * the port's attributes and GID (index gid_index). The port must be ACTIVE.
 */
axon_status_t axon_verbs_dev_open(axon_verbs_dev_t *dev, const char *dev_name, int gid_index);
void          axon_verbs_dev_close(axon_verbs_dev_t *dev);

/* A CQ of at least cqe entries (no completion channel: the iface polls). */
axon_status_t axon_verbs_cq_create(axon_verbs_dev_t *dev, int cqe, axon_dev_cq_t **cq_p);
/* NULL is nothing to do; a failure is logged as owner's */
void          axon_verbs_cq_destroy(const char *owner, axon_dev_cq_t *cq);

/* ------------------------------------------------------------ addresses */

/*
 * The device address on the wire (packed, 20 bytes): where the port is.
 * Reachable when the link layers match and, on InfiniBand, the GID subnet
 * prefixes match (no routing between subnets).
 */
typedef struct __attribute__((packed)) axon_verbs_dev_addr {
    uint8_t  gid[16];
    uint16_t lid;          /* host order; 0 on Ethernet */
    uint8_t  link_layer;   /* axon_dev_link_layer_t */
    uint8_t  mtu;          /* axon_dev_mtu_t: the port's active MTU */
} axon_verbs_dev_addr_t;

#define AXON_VERBS_DEV_ADDR_LEN sizeof(axon_verbs_dev_addr_t)

/* Write this port's device address into buf (AXON_VERBS_DEV_ADDR_LEN bytes). */
void axon_verbs_dev_addr_pack(const axon_verbs_dev_t *dev, void *buf);
/* Read a (possibly unaligned) device address from the wire. */
void axon_verbs_dev_addr_unpack(const void *buf, axon_verbs_dev_addr_t *addr);
/* 1 if this port can reach the port at addr, else 0 (debug line says why). */
int  axon_verbs_dev_addr_reachable(const axon_verbs_dev_t *dev, const axon_verbs_dev_addr_t *addr);
/* The path MTU to use with a peer: the smaller of the two ports' MTUs. */
axon_dev_mtu_t axon_verbs_path_mtu(const axon_verbs_dev_t *dev, const axon_verbs_dev_addr_t *addr);

/* Address-vector attributes to reach addr (GRH on Ethernet, LID on IB). */
void axon_verbs_ah_attr_fill(const axon_verbs_dev_t *dev, const axon_verbs_dev_addr_t *addr,
                             axon_dev_ah_attr_t *ah_attr);
/* An address handle to reach addr (for UD sends). */
axon_status_t axon_verbs_ah_create(axon_verbs_dev_t *dev, const axon_verbs_dev_addr_t *addr,
                                   axon_dev_ah_t **ah_p);

/*
 * Address handles by destination port, shared by every connection or
 * target there (ud, dc): get finds or makes one and takes a reference, put
 * drops it (the handle goes with the last), cleanup destroys what is left.
 * Not thread-safe (one worker).
 */
#define AXON_VERBS_AH_BUCKETS 64

typedef struct axon_verbs_ah_entry {
    struct axon_verbs_ah_entry *next;      /* hash chain */
    axon_verbs_dev_addr_t       addr;
    axon_dev_ah_t              *ah;
    unsigned                    refcnt;
} axon_verbs_ah_entry_t;

typedef struct axon_verbs_ah_cache {
    axon_verbs_dev_t      *dev;
    const char            *name;           /* the iface's, for log lines */
    axon_verbs_ah_entry_t *buckets[AXON_VERBS_AH_BUCKETS];
} axon_verbs_ah_cache_t;

void                   axon_verbs_ah_cache_init(axon_verbs_ah_cache_t *cache,
                                                axon_verbs_dev_t *dev, const char *name);
/* NULL when no handle could be made (logged) */
axon_verbs_ah_entry_t *axon_verbs_ah_cache_get(axon_verbs_ah_cache_t *cache,
                                               const axon_verbs_dev_addr_t *addr);
void                   axon_verbs_ah_cache_put(axon_verbs_ah_cache_t *cache,
                                               axon_verbs_ah_entry_t *entry);
void                   axon_verbs_ah_cache_cleanup(axon_verbs_ah_cache_t *cache);

/* ------------------------------------------------------------ buffer pool */

/*
 * Registered buffers of one fixed size, carved from one MR, handed out from a
 * free list: the data path's bounce buffers, with no allocation per message.
 * Not thread-safe (one worker). A free element holds the list link in its
 * first bytes; an element in use is the caller's entirely. The pool is
 * anonymous memory, zero until written, and a buffer never handed out is
 * never touched (elements past `fresh` are on no list): an rc interface's
 * 10 MiB of bounce buffers cost the pages its traffic used, not all of them
 * at open (a device that pins at registration faults them in anyway).
 */
typedef struct axon_verbs_bufpool {
    uint8_t       *base;
    axon_dev_mr_t *mr;
    size_t         elem_size;   /* rounded up to 64 bytes */
    size_t         map_len;     /* of base's mapping */
    unsigned       count;
    unsigned       num_free;
    unsigned       fresh;       /* elements below it were handed out at least once */
    void          *free_list;
    const char    *name;
} axon_verbs_bufpool_t;

/* count buffers of elem_size bytes, LOCAL_WRITE registered on dev's PD. */
axon_status_t axon_verbs_bufpool_init(axon_verbs_bufpool_t *bp, axon_verbs_dev_t *dev,
                                      const char *name, size_t elem_size, unsigned count);
/* Warns if buffers are still out, then deregisters and frees. */
void          axon_verbs_bufpool_cleanup(axon_verbs_bufpool_t *bp);

/* Buffer index <-> address, for wr_ids that carry an index. */
static inline void *axon_verbs_bufpool_at(const axon_verbs_bufpool_t *bp, unsigned index)
{
    return bp->base + (size_t)index * bp->elem_size;
}

static inline unsigned axon_verbs_bufpool_index(const axon_verbs_bufpool_t *bp, const void *buf)
{
    return (unsigned)(((const uint8_t *)buf - bp->base) / bp->elem_size);
}

/* A free buffer, or NULL when all are in use. */
static inline void *axon_verbs_bufpool_get(axon_verbs_bufpool_t *bp)
{
    void *buf = bp->free_list;
    if (__builtin_expect(buf != NULL, 1)) {
        bp->free_list = *(void **)buf;
    } else if (bp->fresh < bp->count) {
        buf = axon_verbs_bufpool_at(bp, bp->fresh++);
    } else {
        return NULL;
    }
    --bp->num_free;
    return buf;
}

static inline void axon_verbs_bufpool_put(axon_verbs_bufpool_t *bp, void *buf)
{
    *(void **)buf = bp->free_list;
    bp->free_list = buf;
    ++bp->num_free;
}

static inline uint32_t axon_verbs_bufpool_lkey(const axon_verbs_bufpool_t *bp)
{
    return bp->mr->lkey;
}

/* ------------------------------------------------------------ SRQ receive ring */

/*
 * Every buffer of a pool posted to a shared receive queue (rc, dc): a
 * buffer whose message was handled comes back (return) and the ones back go
 * to the SRQ in one post (refill), one call per batch. Not thread-safe (one
 * worker). A failed post keeps the chain for the next refill.
 */
#define AXON_VERBS_SRQ_BATCH_MAX 32u   /* at most len / 16 */

typedef struct axon_verbs_srq_ring {
    axon_dev_srq_t       *srq;
    axon_verbs_bufpool_t *pool;
    axon_dev_recv_wr_t   *wrs;      /* the refill chain: one WR and SGE per buffer */
    axon_dev_sge_t       *sges;
    unsigned              refill;   /* buffers in the chain, not posted yet */
    unsigned              batch;    /* post once this many came back (a post costs a device pass) */
    const char           *name;     /* the iface's, for log lines */
} axon_verbs_srq_ring_t;

/* An SRQ of len receives of buf_len bytes each, every buffer of pool (len of them) posted;
 * window: the most messages one peer may have in flight (at most len). */
axon_status_t axon_verbs_srq_ring_init(axon_verbs_srq_ring_t *ring, axon_verbs_dev_t *dev,
                                       axon_verbs_bufpool_t *pool, unsigned len,
                                       unsigned window, uint32_t buf_len, const char *name);
void          axon_verbs_srq_ring_refill(axon_verbs_srq_ring_t *ring);
/* The SRQ and what it holds: the pool's buffers are all free again (for its cleanup). */
void          axon_verbs_srq_ring_cleanup(axon_verbs_srq_ring_t *ring);

/* Refill from progress: only a batch's worth, so a message delivered is not followed
 * by a post of its one buffer before the caller sees it (the SRQ keeps len - batch). */
static inline void axon_verbs_srq_ring_refill_batch(axon_verbs_srq_ring_t *ring)
{
    if (ring->refill >= ring->batch) {
        axon_verbs_srq_ring_refill(ring);
    }
}

/* Queue a receive buffer for the next refill. */
static inline void axon_verbs_srq_ring_return(axon_verbs_srq_ring_t *ring, void *buf)
{
    unsigned i = ring->refill++;

    ring->sges[i].addr = (uintptr_t)buf;
    ring->wrs[i].wr_id = (uintptr_t)buf;
    if (i > 0) {
        ring->wrs[i - 1].next = &ring->wrs[i];
    }
}

/*
 * An am_bcopy's bounce buffer from pool, the caller's pack callback run behind
 * hdr_size bytes of transport header: the buffer (*len_p bytes packed), or
 * NULL with *status_p: no buffer free, or a callback that wrote more than
 * seg_size (logged; the buffer goes back).
 */
static inline uint8_t *axon_verbs_am_bcopy_pack(axon_verbs_bufpool_t *pool, const char *name,
                                                size_t hdr_size, size_t seg_size,
                                                axon_pack_cb_t pack, void *arg, size_t *len_p,
                                                axon_status_t *status_p)
{
    uint8_t *buf = (uint8_t *)axon_verbs_bufpool_get(pool);
    size_t len;

    if (buf == NULL) {
        *status_p = AXON_ERR_NO_RESOURCE;
        return NULL;
    }
    len = pack(buf + hdr_size, arg);
    if (__builtin_expect(len > seg_size, 0)) {
        axon_error("%s: am_bcopy pack callback wrote %zu bytes (max %zu)", name, len, seg_size);
        axon_verbs_bufpool_put(pool, buf);
        *status_p = AXON_ERR_INVALID_PARAM;
        return NULL;
    }
    *len_p = len;
    return buf;
}

/* A send of length bytes from a pool buffer: inline (copied at post) up to max_inline */
static inline void axon_verbs_send_wr(axon_dev_send_wr_t *wr, axon_dev_sge_t *sge, void *buf,
                                      size_t length, const axon_verbs_bufpool_t *pool,
                                      size_t max_inline)
{
    sge->addr      = (uintptr_t)buf;
    sge->length    = (uint32_t)length;
    sge->lkey      = axon_verbs_bufpool_lkey(pool);
    wr->opcode     = AXON_DEV_WR_SEND;
    wr->sg_list    = sge;
    wr->num_sge    = 1;
    wr->send_flags = (length <= max_inline) ? AXON_DEV_SEND_INLINE : 0;
}

/*
 * A progress call that delivered returns at once (its caller waits for that)
 * and leaves the send CQ, whose poll is a device pass too, to the next call:
 * never two calls in a row without it. 1: skip the send CQ this time.
 */
static inline int axon_verbs_tx_poll_skip(int *due, int delivered)
{
    if (delivered && !*due) {
        *due = 1;
        return 1;
    }
    *due = 0;
    return 0;
}

/* One RDMA read or write of length bytes: local at addr (lkey), the peer's at remote_addr (rkey) */
static inline void axon_verbs_rdma_wr(axon_dev_send_wr_t *wr, axon_dev_sge_t *sge,
                                      axon_dev_wr_opcode_t opcode, uintptr_t addr, size_t length,
                                      uint32_t lkey, uint64_t remote_addr, uint32_t rkey)
{
    memset(wr, 0, sizeof(*wr));
    sge->addr               = addr;
    sge->length             = (uint32_t)length;
    sge->lkey               = lkey;
    wr->opcode              = opcode;
    wr->sg_list             = sge;
    wr->num_sge             = 1;
    wr->wr.rdma.remote_addr = remote_addr;
    wr->wr.rdma.rkey        = rkey;
}

/*
 * A short active message's WR: the transport header (hdr_size bytes at
 * inline_hdr), the caller's header and the payload. Up to max_inline bytes in
 * all they go inline as three SGEs (the device copies them at post time);
 * else all three are copied into a bounce buffer of pool (*buf_p), whose
 * first hdr_size bytes are then the transport header. Returns where the
 * caller writes that header, or NULL when no buffer is free.
 */
static inline void *axon_verbs_am_short_wr(axon_verbs_bufpool_t *pool, uint32_t max_inline,
                                           void *inline_hdr, size_t hdr_size, const void *hdr,
                                           size_t hdr_len, const void *payload, size_t length,
                                           axon_dev_send_wr_t *wr, axon_dev_sge_t sge[3],
                                           uint8_t **buf_p)
{
    size_t total = hdr_size + hdr_len + length;
    uint8_t *buf;
    int n = 0;

    wr->opcode  = AXON_DEV_WR_SEND;
    wr->sg_list = sge;
    if (total <= max_inline) {
        sge[n].addr     = (uintptr_t)inline_hdr;
        sge[n++].length = (uint32_t)hdr_size;
        if (hdr_len > 0) {
            sge[n].addr     = (uintptr_t)hdr;
            sge[n++].length = (uint32_t)hdr_len;
        }
        if (length > 0) {
            sge[n].addr     = (uintptr_t)payload;
            sge[n++].length = (uint32_t)length;
        }
        sge[0].lkey = sge[1].lkey = sge[2].lkey = 0;
        wr->send_flags = AXON_DEV_SEND_INLINE;
        wr->num_sge    = n;
        *buf_p         = NULL;
        return inline_hdr;
    }
    buf = (uint8_t *)axon_verbs_bufpool_get(pool);
    if (buf == NULL) {
        return NULL;
    }
    if (hdr_len > 0) {
        memcpy(buf + hdr_size, hdr, hdr_len);
    }
    if (length > 0) {
        memcpy(buf + hdr_size + hdr_len, payload, length);
    }
    sge[0].addr    = (uintptr_t)buf;
    sge[0].length  = (uint32_t)total;
    sge[0].lkey    = axon_verbs_bufpool_lkey(pool);
    wr->send_flags = 0;
    wr->num_sge    = 1;
    *buf_p         = buf;
    return buf;
}

/* ------------------------------------------------------------ QPs */

/* Sizes of a new QP; create writes back the actual cap (max_inline may grow). */
typedef struct axon_verbs_qp_params {
    axon_dev_qp_type_t type;
    axon_dev_cq_t     *send_cq;
    axon_dev_cq_t     *recv_cq;
    axon_dev_srq_t    *srq;             /* NULL: the QP has its own receive queue */
    uint32_t           max_send_wr;
    uint32_t           max_recv_wr;     /* ignored with an SRQ */
    uint32_t           max_inline;      /* asked for; clamped to the device's */
    uint32_t           max_send_sge;    /* 0 means 1 */
    uint32_t           create_flags;    /* AXON_DEV_QP_CREATE_* */
    uint32_t           max_inl_klms;    /* CREATE_UMR: UMR entries inline in a WR (written
                                         * back: what the device gave) */
    void              *qp_context;
} axon_verbs_qp_params_t;

axon_status_t axon_verbs_qp_create(axon_verbs_dev_t *dev, axon_verbs_qp_params_t *params,
                                   axon_dev_qp_t **qp_p, axon_dev_qp_cap_t *cap_p);
/* Destroy (moving to ERR first is the caller's choice); logs a failure. */
void          axon_verbs_qp_destroy(axon_dev_qp_t *qp);

/*
 * UD: RESET -> INIT -> RTR -> RTS with qkey, send PSN sq_psn. The attribute
 * masks follow the back end: softib takes seed §4.5 literally (ACCESS_FLAGS
 * at INIT, PATH_MTU at RTR); rdma-core takes neither on UD.
 */
axon_status_t axon_verbs_qp_ud_up(axon_verbs_dev_t *dev, axon_dev_qp_t *qp, uint32_t qkey,
                                  uint32_t sq_psn);

/* RC: RESET -> INIT with remote read/write access (before receives are posted). */
axon_status_t axon_verbs_qp_rc_init(axon_verbs_dev_t *dev, axon_dev_qp_t *qp);

/* What RC needs of the peer and of the transport's timing to go to RTS. */
typedef struct axon_verbs_rc_peer {
    axon_verbs_dev_addr_t addr;         /* peer's port */
    uint32_t              qpn;          /* peer's QP number */
    uint32_t              peer_psn;     /* first PSN the peer sends (our rq_psn) */
    uint32_t              local_psn;    /* first PSN we send (our sq_psn) */
    axon_dev_mtu_t        path_mtu;
    uint8_t               timeout;      /* IB exponent: 4.096 us * 2^timeout */
    uint8_t               retry_cnt;    /* 0..7 */
    uint8_t               rnr_retry;    /* 0..7 (7 = infinite) */
    uint8_t               min_rnr_timer;/* IB code, 1..31 */
    uint8_t               max_rd_atomic;/* outstanding RDMA reads/atomics, both ways */
} axon_verbs_rc_peer_t;

/* RC: INIT -> RTR -> RTS connected to peer. */
axon_status_t axon_verbs_qp_rc_connect(axon_verbs_dev_t *dev, axon_dev_qp_t *qp,
                                       const axon_verbs_rc_peer_t *peer);

/*
 * DC initiator (seed §8.6.1.7): RESET -> INIT (key) -> RTR (the port's own
 * address and MTU: each WR names its target) -> RTS with the transport's
 * timing; no PSN (a DCI's run on across connections). Also after a reset.
 */
axon_status_t axon_verbs_qp_dci_up(axon_verbs_dev_t *dev, axon_dev_qp_t *qp, uint64_t dc_key,
                                   uint8_t timeout, uint8_t retry_cnt, uint8_t rnr_retry,
                                   uint8_t max_rd_atomic);

/* Move a QP to RESET (from any state: what a broken DCI goes through to be reused). */
axon_status_t axon_verbs_qp_reset(axon_verbs_dev_t *dev, axon_dev_qp_t *qp);

/* Move a QP to ERR (flushes every posted WR with WR_FLUSH_ERR). */
axon_status_t axon_verbs_qp_to_err(axon_dev_qp_t *qp);

/* The IB timeout exponent (1..31) for an ack timeout of at most seconds. */
uint8_t axon_verbs_timeout_exp(double seconds);

/* 24-bit PSNs */
#define AXON_VERBS_PSN_MASK 0xffffffu

#endif
