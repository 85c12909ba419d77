/*
 * ud: active messages over one unreliable-datagram QP per iface, reaching
 * every peer, with Axon's own reliability on top (ud_wire.h has the packet
 * format and the connection handshake).
 *
 * Per peer worker there is one connection (axon_ud_conn_t), whichever side
 * connected; it is also the transport endpoint handed to the upper layer,
 * counted by reference, so every ep to that peer shares its sequence space.
 * A connection is small on purpose (the per-peer cost is what makes UD scale
 * past RC): send state is a few counters and a list of the iface's send
 * descriptors that wait for an ack; receive state is the next PSN, a short
 * sorted list of packets held beyond a gap, and a reassembly buffer taken
 * from an iface pool only while a fragmented message is arriving.
 *
 * Send descriptors (axon_ud_desc_t) are registered bounce buffers from one
 * pool per iface: a packet stays in its descriptor until acknowledged, so
 * retransmission re-posts it. Window full, or no descriptor left, is
 * AXON_ERR_NO_RESOURCE; a full send queue only delays the post.
 *
 * Timers run from progress on a coarse clock read once per call; time that
 * passed without any progress call is not counted, so a worker that stopped
 * progressing for a while does not fail its peers when it comes back.
 *
 * Files by stage: ud_component.c (configuration, resources), ud_iface.c
 * (open, close, progress, receive dispatch, connection table), ud_ep.c
 * (endpoints, the send calls), ud_reliab.c (posting, acks, retransmission,
 * in-order delivery, reassembly, keepalive, probes, failure and close),
 * ud_alive.c (the thread that answers probes while the worker is busy).
 */
#ifndef AXON_UD_H
#define AXON_UD_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include "component.h"
#include "list.h"
#include "log.h"
#include "sys.h"
#include "verbs_common.h"
#include "ud_wire.h"

/* Bytes of descriptor in front of each send and receive buffer */
#define AXON_UD_DESC_LEN        64
/* Offset of the header in a receive buffer; the payload follows it */
#define AXON_UD_RX_HDR_OFF      (AXON_UD_DESC_LEN + AXON_UD_GRH_LEN)
/* Receive buffers posted per post_recv call, and completions per poll */
#define AXON_UD_RX_BATCH        32
#define AXON_UD_TX_POLL         32
/* Receive completions handled per progress call */
#define AXON_UD_RX_BURST        64
/* Buckets of the connection lookup by peer uuid (a power of two) */
#define AXON_UD_HASH_SIZE       256
/* Connection ids: table index in the low bits, a generation above */
#define AXON_UD_ID_INDEX_BITS   20
#define AXON_UD_ID_INDEX_MASK   ((1u << AXON_UD_ID_INDEX_BITS) - 1)
#define AXON_UD_ID_GEN_MAX      0xffeu
/* Retransmission timeout backs off up to this many doublings */
#define AXON_UD_RTO_SHIFT_MAX   5
/* A gap between progress calls above this is not counted by the timers (ns) */
#define AXON_UD_PROGRESS_GAP_NS 100000000ull
/* Bounds of the options */
#define AXON_UD_SEG_SIZE_MIN    ((size_t)256)
#define AXON_UD_SEG_SIZE_MAX    ((size_t)1 << 20)
#define AXON_UD_WINDOW_MAX      32768u
/* Largest MTU of any port (verbs' 4096) */
#define AXON_UD_MTU_MAX         ((size_t)4096)
/* Alive QP: receives posted, answers in flight, address handles kept */
#define AXON_UD_ALIVE_RX        32
#define AXON_UD_ALIVE_TX        16
#define AXON_UD_ALIVE_AHS       16
/* Alive thread without a completion channel: polls this often (ms) */
#define AXON_UD_ALIVE_POLL_MS   10

/* Options, read from AXON_UD_* (see the table in ud_component.c). */
typedef struct axon_ud_config {
    size_t   seg_size;            /* max_bcopy: fragments reassembled at the receiver */
    unsigned tx_window;           /* unacknowledged packets per peer */
    unsigned tx_bufs;             /* send descriptors of an iface */
    unsigned tx_queue_len;        /* send WRs on the QP */
    unsigned rx_queue_len;        /* receive buffers posted */
    unsigned reasm_bufs;          /* messages being reassembled at once, all peers */
    double   retx_timeout;        /* seconds before an unacked packet goes again */
    double   timeout;             /* seconds without an ack before the peer is failed */
    double   keepalive_interval;  /* seconds of silence before a ping */
    unsigned gid_index;
    int      alive;               /* answer liveness probes from a thread */
} axon_ud_config_t;

/* Descriptor flags */
#define AXON_UD_DESC_UNACKED 0x1  /* on its connection's list, waiting for the ack */
#define AXON_UD_DESC_UNSENT  0x2  /* never posted: the peer's id or queue room was missing */
#define AXON_UD_DESC_SACKED  0x4  /* the receiver holds it beyond a gap: no retransmit */

typedef struct axon_ud_conn axon_ud_conn_t;

/*
 * The first AXON_UD_DESC_LEN bytes of a send or receive buffer. The packet
 * (send) or GRH area (receive) follows. While free, the buffer pool keeps
 * its link in the first 8 bytes: next is only used while in use.
 */
typedef struct axon_ud_desc {
    struct axon_ud_desc *next;     /* send: unacked list; receive: held list */
    axon_ud_conn_t      *conn;     /* send: owner, NULL once it let go */
    uint64_t             sent_ns;  /* send: last post (iface virtual clock) */
    uint32_t             psn;
    uint32_t             len;      /* send: header + payload; receive: payload */
    uint8_t              flags;    /* AXON_UD_DESC_* */
    uint8_t              hw;       /* posts whose completion has not come */
} axon_ud_desc_t;

_Static_assert(sizeof(axon_ud_desc_t) <= AXON_UD_DESC_LEN, "descriptor must fit its room");

static inline axon_ud_hdr_t *axon_ud_desc_hdr(axon_ud_desc_t *desc)
{
    return (axon_ud_hdr_t *)((char *)desc + AXON_UD_DESC_LEN);
}


/* Connection states */
typedef enum {
    AXON_UD_CONN_CONNECTING = 0,  /* CREQ out, the peer's id unknown */
    AXON_UD_CONN_CONNECTED,
    AXON_UD_CONN_FAILED,          /* status says why; sends return it */
} axon_ud_conn_state_t;

/* Connection flags */
#define AXON_UD_CONN_ACK_NOW    0x001  /* a duplicate or a gap: acknowledge at once */
#define AXON_UD_CONN_ON_WORK    0x002  /* on iface->work */
#define AXON_UD_CONN_ON_ACTIVE  0x004  /* on iface->active (something unacked) */
#define AXON_UD_CONN_NEED_CREQ  0x008  /* no descriptor was left for the CREQ yet */
#define AXON_UD_CONN_WANT_BYE   0x010  /* last ep gone: say goodbye */
#define AXON_UD_CONN_BYE_SENT   0x020  /* our goodbye is the last thing we sent */
#define AXON_UD_CONN_PEER_BYE   0x040  /* the peer's goodbye is the last thing it sent */
#define AXON_UD_CONN_REPORT     0x080  /* failed, peer_failure not yet called */
#define AXON_UD_CONN_LINGER     0x100  /* both said goodbye: freed at linger_ns */
#define AXON_UD_CONN_REASM_BAD  0x200  /* the message being reassembled is dropped */
#define AXON_UD_CONN_RESET_PEER 0x400  /* failed (not after a goodbye): its peer's packets get RESET */
#define AXON_UD_CONN_TOMB       0x800  /* failed, no endpoint: kept till timer_ns to answer them */

struct axon_ud_conn {
    axon_tl_ep_t      super;       /* what ep_create returns (shared, refcnt) */
    uint32_t          id;          /* ours */
    uint32_t          peer_id;     /* the peer's, AXON_UD_ID_NONE while connecting */
    uint32_t          dest_qpn;
    uint16_t          max_payload; /* bytes of payload per packet (path MTU - header) */
    uint8_t           state;       /* axon_ud_conn_state_t */
    uint8_t           rto_shift;   /* retransmission backoff */
    /* send side */
    uint32_t          tx_psn;      /* next PSN to assign */
    uint32_t          tx_acked;    /* every PSN before it was acknowledged */
    unsigned          unsent;      /* descriptors with AXON_UD_DESC_UNSENT */
    axon_ud_desc_t   *tx_head;     /* unacked (and unsent), in PSN order */
    axon_ud_desc_t   *tx_tail;
    uint64_t          ack_ns;      /* last ack progress, or when something became unacked */
    /* receive side */
    uint32_t          rx_psn;      /* next PSN expected */
    uint32_t          ack_sent;    /* rx_psn as last told to the peer */
    axon_ud_desc_t   *rx_held;     /* received beyond a gap, in PSN order */
    char             *reasm;       /* message being reassembled, or NULL */
    uint32_t          reasm_len;
    uint8_t           reasm_am_id;
    uint16_t          flags;       /* AXON_UD_CONN_* */
    uint16_t          refcnt;      /* eps handed out */
    axon_status_t     status;
    uint64_t          last_rx_ns;  /* last valid packet from the peer */
    uint64_t          timer_ns;    /* last ping sent, or the linger deadline */
    uint64_t          peer_uuid;
    axon_verbs_ah_entry_t *ah;   /* shared by every connection to the peer's port */
    uint32_t          alive_qpn;   /* the peer's alive QP, 0 if it has none */
    uint64_t          alive_ns;    /* last ALIVE from the peer (0: none) */
    uint64_t          probe_ns;    /* last PROBE sent */
    axon_list_link_t  hash_link;   /* iface->hash[] */
    axon_list_link_t  active_link; /* iface->active */
    axon_list_link_t  work_link;   /* iface->work */
};

/* The alive QP and its thread (ud_alive.c); nothing else touches them. */
typedef struct axon_ud_alive {
    axon_dev_comp_channel_t *channel;   /* NULL: the thread polls the CQ */
    axon_dev_cq_t           *cq;        /* receives and answers */
    axon_dev_qp_t           *qp;
    axon_verbs_bufpool_t     bufs;
    unsigned                 tx_posted;
    int                      wake[2];   /* a pipe: closing the iface wakes the thread */
    int                      started;
    pthread_t                thread;
    struct {
        axon_verbs_dev_addr_t addr;
        axon_dev_ah_t        *ah;
    }                        ahs[AXON_UD_ALIVE_AHS];  /* recent probers, round robin */
    unsigned                 next_ah;
    uint64_t                 answered;  /* probes answered (debug line at close) */
} axon_ud_alive_t;

typedef struct axon_ud_iface {
    axon_iface_t            super;
    /* Device and queues */
    axon_verbs_dev_t        dev;
    axon_dev_cq_t          *send_cq;
    axon_dev_cq_t          *recv_cq;
    axon_dev_qp_t          *qp;
    uint32_t                max_inline;
    axon_verbs_bufpool_t    tx_pool;
    axon_verbs_bufpool_t    rx_pool;
    unsigned                tx_posted;     /* send WRs not completed */
    unsigned                tx_queue_len;
    unsigned                rx_posted;     /* receive buffers on the QP */
    unsigned                rx_queue_len;
    unsigned                rx_held;       /* receive buffers held beyond gaps */
    unsigned                rx_hold_max;
    size_t                  rx_buf_len;    /* GRH area + MTU, what each receive takes */
    uint16_t                max_payload;   /* our port's MTU minus the header */
    /* Reassembly buffers: a fixed array handed out through a stack */
    char                   *reasm_mem;
    char                  **reasm_free;
    unsigned                reasm_nfree;
    /* Receive side */
    void                   *am_arg;
    axon_am_handler_t       am_handlers[AXON_AM_ID_MAX];
    axon_peer_failure_cb_t  peer_failure;
    uint64_t                worker_uuid;
    unsigned                in_progress;   /* progress is not re-entered from a handler */
    /* Clock: virtual time = coarse monotonic time minus the gaps not counted */
    uint64_t                now_ns;
    uint64_t                last_real_ns;
    uint64_t                skipped_ns;
    uint64_t                next_timer_ns;
    uint64_t                next_scan_ns;
    /* Options (converted to ns) */
    const axon_ud_config_t *config;
    uint64_t                retx_ns;
    uint64_t                timeout_ns;
    uint64_t                keepalive_ns;
    uint64_t                probe_ns;      /* unacked this long: probe, and again as often */
    unsigned                tx_window;
    size_t                  seg_size;
    size_t                  reasm_size;    /* max(seg_size, largest MTU) */
    size_t                  max_short;
    char                   *bcopy_buf;     /* pack target of a multi-fragment bcopy */
    /* Connections */
    axon_ud_conn_t        **conns;         /* by id index */
    unsigned                conns_size;
    unsigned                num_conns;
    unsigned                next_index;
    unsigned                next_gen;
    axon_list_link_t        hash[AXON_UD_HASH_SIZE];
    axon_list_link_t        active;        /* conns with something unacked */
    axon_list_link_t        work;          /* conns with an ack, post, goodbye or report due */
    axon_verbs_ah_cache_t   ahs;
    unsigned                reports;       /* conns with AXON_UD_CONN_REPORT */
    axon_ud_alive_t         alive;
    char                    name[AXON_DEV_NAME_MAX + 8];  /* "ud/softib0:1" */
} axon_ud_iface_t;

static inline axon_ud_iface_t *axon_ud_conn_iface(const axon_ud_conn_t *conn)
{
    return (axon_ud_iface_t *)conn->super.iface;
}

/* Bytes one peer costs: its connection and its slot in the id table. */
static inline size_t axon_ud_ep_memory(void)
{
    return sizeof(axon_ud_conn_t) + sizeof(axon_ud_conn_t *);
}

/* Post one signaled datagram of len bytes at buf to (ah, qpn); 0 or an errno. */
static inline int axon_ud_post_datagram(axon_dev_qp_t *qp, uint64_t wr_id, const void *buf,
                                        uint32_t len, uint32_t lkey, int send_inline,
                                        axon_dev_ah_t *ah, uint32_t qpn)
{
    axon_dev_send_wr_t wr, *bad;
    axon_dev_sge_t sge;

    sge.addr             = (uintptr_t)buf;
    sge.length           = len;
    sge.lkey             = lkey;
    wr.wr_id             = wr_id;
    wr.next              = NULL;
    wr.sg_list           = &sge;
    wr.num_sge           = 1;
    wr.opcode            = AXON_DEV_WR_SEND;
    wr.send_flags        = AXON_DEV_SEND_SIGNALED | (send_inline ? AXON_DEV_SEND_INLINE : 0);
    wr.imm_data          = 0;
    wr.wr.ud.ah          = ah;
    wr.wr.ud.remote_qpn  = qpn;
    wr.wr.ud.remote_qkey = AXON_UD_QKEY;
    return axon_dev_post_send(qp, &wr, &bad);
}

/* ud_component.c */
axon_status_t axon_ud_config_check(const axon_ud_config_t *config);

/* ud_iface.c */
axon_status_t axon_ud_iface_open(const axon_resource_t *resource, const void *config,
                                 const axon_iface_params_t *params, axon_iface_t **iface_p);
/* Virtual now for the send path (reads the clock) */
uint64_t      axon_ud_iface_vnow(axon_ud_iface_t *iface);
/* Check a peer's addresses; logs why not at log_level. */
axon_status_t axon_ud_iface_check_peer(const axon_ud_iface_t *iface, const void *dev_addr,
                                       const void *iface_addr, axon_log_level_t log_level,
                                       axon_verbs_dev_addr_t *addr,
                                       axon_ud_iface_addr_t *iaddr);
/* Connection table and lookup */
axon_ud_conn_t *axon_ud_conn_new(axon_ud_iface_t *iface, uint64_t peer_uuid,
                                 const axon_verbs_dev_addr_t *addr, uint32_t qpn,
                                 uint32_t alive_qpn);
axon_ud_conn_t *axon_ud_conn_find(axon_ud_iface_t *iface, uint64_t peer_uuid,
                                  const axon_verbs_dev_addr_t *addr, uint32_t qpn,
                                  uint32_t peer_id);
void          axon_ud_conn_free(axon_ud_conn_t *conn);
void          axon_ud_conn_work(axon_ud_conn_t *conn);

/* ud_ep.c */
axon_status_t axon_ud_ep_create(axon_iface_t *tl_iface, uint64_t peer_uuid, const void *dev_addr,
                                const void *iface_addr, axon_tl_ep_t **ep_p);
void          axon_ud_ep_destroy(axon_tl_ep_t *tl_ep);
axon_status_t axon_ud_ep_am_short(axon_tl_ep_t *tl_ep, uint8_t am_id, const void *hdr,
                                  size_t hdr_len, const void *payload, size_t length);
ssize_t       axon_ud_ep_am_bcopy(axon_tl_ep_t *tl_ep, uint8_t am_id, axon_pack_cb_t pack,
                                  void *arg);
axon_status_t axon_ud_ep_flush(axon_tl_ep_t *tl_ep);
axon_status_t axon_ud_ep_check(axon_tl_ep_t *tl_ep);

/* ud_reliab.c: send side */
/* A descriptor for a sequenced packet of type on conn (PSN assigned), or NULL. */
axon_ud_desc_t *axon_ud_tx_desc_get(axon_ud_conn_t *conn);
/* Queue a filled sequenced packet (len = header + payload) and post it when possible. */
void          axon_ud_tx_send(axon_ud_conn_t *conn, axon_ud_desc_t *desc, uint8_t type,
                              uint8_t flags, uint8_t am_id, uint32_t len);
/* The CREQ of a new connection (PSN 0); 0, or -1 if no descriptor was free. */
int           axon_ud_tx_creq(axon_ud_conn_t *conn);
/* Post what waits on conn (unsent packets, goodbye, ack); returns packets posted. */
unsigned      axon_ud_tx_resume(axon_ud_conn_t *conn);
/* Send completions; returns how many. */
unsigned      axon_ud_tx_poll(axon_ud_iface_t *iface);
/* Acknowledgement (ack, sack) from the peer arrived. */
void          axon_ud_tx_acked(axon_ud_conn_t *conn, uint32_t ack, uint32_t sack);
/* Timers of the connections with something unacked, and keepalives. */
unsigned      axon_ud_timers(axon_ud_iface_t *iface);
/* This iface's alive QP number for addresses and CREQs (0: it answers no probes). */
static inline uint32_t axon_ud_alive_qpn(const axon_ud_iface_t *iface)
{
    return (iface->alive.qp != NULL) ? iface->alive.qp->qp_num : 0;
}
/* An ALIVE for conn arrived. */
static inline void axon_ud_conn_alive(axon_ud_conn_t *conn)
{
    conn->alive_ns = axon_ud_conn_iface(conn)->now_ns;
}
/* conn failed: tell its peer with a RESET (at most one per retransmission timeout). */
void          axon_ud_tx_reset(axon_ud_conn_t *conn);
/* Our worker closes: tell conn's peer (LEAVE, unacknowledged). 0, or -1: no room now. */
int           axon_ud_tx_leave(axon_ud_conn_t *conn);
/* A failed conn no endpoint holds: freed now, or kept a while to answer its peer (TOMB). */
void          axon_ud_conn_bury(axon_ud_conn_t *conn);
/* Fail conn (once): sends return status, peer_failure from the next progress. */
void          axon_ud_conn_fail(axon_ud_conn_t *conn, axon_status_t status, const char *why);
/* Drop every descriptor conn holds (send and receive). */
void          axon_ud_conn_release_bufs(axon_ud_conn_t *conn);

/* ud_alive.c: the alive QP and its thread (start: 0 or a status, logged) */
axon_status_t axon_ud_alive_start(axon_ud_iface_t *iface);
void          axon_ud_alive_stop(axon_ud_iface_t *iface);

/* ud_reliab.c: receive side */
/* A sequenced packet for conn in receive buffer desc; takes or returns the buffer. */
void          axon_ud_rx_seq(axon_ud_conn_t *conn, axon_ud_desc_t *desc);
/* Return a receive buffer to the pool. */
static inline void axon_ud_rx_put(axon_ud_iface_t *iface, axon_ud_desc_t *desc)
{
    axon_verbs_bufpool_put(&iface->rx_pool, desc);
}

#endif
