/*
 * dc: active messages, RDMA read/write and device atomics over the
 * Dynamically Connected transport (seed §8.6): memory per peer independent
 * of the number of peers.
 *
 * One iface per port ("dc/softib0:1"): a DC target (DCT) on the iface's SRQ
 * and receive CQ, a send CQ, a pool of DC initiators (DCIs) and a random DC
 * key. An endpoint is the peer's DCT number and key plus an address handle
 * shared by every endpoint to the same port (tens of bytes): it borrows a
 * DCI to send, which the device connects to the WR's target.
 *
 * DCIs (dc_dci.c) follow AXON_DC_POLICY: dcs, an endpoint holds a DCI from
 * its first WR until all of its WRs completed; with none free it waits in a
 * FIFO and gets the next one freed; dcs_quota, the same, but an endpoint
 * that posted AXON_DC_QUOTA WRs while others wait takes no more until it
 * drained; shared, endpoints are spread round-robin over the DCIs and keep
 * theirs; once a DCI is full, its endpoints line up and post one WR each in
 * turn. An endpoint's WRs are on one DCI at a time, so they stay in order.
 * Every WR is signaled: its completion is what releases the DCI, and its
 * descriptor names the endpoint, so a DCI error fails the endpoint whose WR
 * broke it, and the DCI is reset and brought up again for the others; under
 * shared, the work of other endpoints the error flushed is posted again
 * then, in order, from a copy of each WR kept until its completion
 * (dc_replay.c).
 *
 * Flow control (dc_fc.c, dc_wire.h): per endpoint, a window of AMs and
 * credit requests answered by grants sent through the receiver's DCIs.
 *
 * Goodbye (dc_bye.c): a receive completion does not name its sender, so an
 * endpoint's first WR is a hello naming its DCT; both sides keep the DCT
 * of the other (the receiver's peer may be waiting on it) and send each a
 * goodbye when their iface closes. A goodbye fails the receiver's endpoints
 * to that DCT quietly (CONNECTION_RESET, not reported): a closed peer is not
 * a failed one.
 *
 * Files: dc_config.c (options, resources), dc_iface.c (open, close,
 * progress, receive path, address handles), dc_dci.c (the pool, posting,
 * completions, recovery), dc_replay.c (shared: flushed work posted again),
 * dc_ep.c (endpoints, AMs, keep-alive), dc_fc.c,
 * dc_bye.c, dc_rdma.c (get/put/atomics through rc's domain and helpers),
 * dc_component.c (the descriptor).
 */
#ifndef AXON_DC_H
#define AXON_DC_H

#include <stddef.h>
#include <stdint.h>
#include "component.h"
#include "list.h"
#include "sys.h"
#include "log.h"
#include "rcache.h"
#include "verbs_common.h"
#include "rc.h"
#include "dc_wire.h"

/* Largest am_short (header + payload): bigger ones go through bcopy */
#define AXON_DC_MAX_SHORT        2048
#define AXON_DC_POLL_BATCH       16
/* Buckets of the address-handle cache (power of 2) */
/* Timers (keep-alive, DCIs handed to a waiter that did not use them) every this many progress calls */
#define AXON_DC_TIMER_INTERVAL   64
/* A DCI handed to a waiting endpoint goes to the next one if unused for this many timer passes */
#define AXON_DC_HANDOFF_TICKS    2
/* Iface close waits at most this long for the DCIs to drain and its goodbyes to go */
#define AXON_DC_CLOSE_WAIT_SEC   0.5
/* Buckets of the table of peers that said hello (power of 2) */
#define AXON_DC_HELLO_HASH       256
#define AXON_DC_RNR_RETRY        7    /* infinite: credits keep the SRQ from running dry */
#define AXON_DC_MIN_RNR_TIMER    12   /* 0.64 ms */
#define AXON_DC_MAX_RD_ATOMIC    16
/* Endpoint ids: slot in the iface's table, and a generation so stale grants miss */
#define AXON_DC_EP_SLOT_BITS     20
#define AXON_DC_EP_SLOT_MASK     ((1u << AXON_DC_EP_SLOT_BITS) - 1)

typedef enum {
    AXON_DC_POLICY_DCS = 0,
    AXON_DC_POLICY_DCS_QUOTA,
    AXON_DC_POLICY_SHARED,
    AXON_DC_POLICY_LAST
} axon_dc_policy_t;

extern const char *const axon_dc_policy_names[];

/* Options, read from AXON_DC_* (dc_config.c) */
typedef struct axon_dc_config {
    size_t   seg_size;
    unsigned num_dci;
    unsigned policy;             /* axon_dc_policy_t */
    unsigned quota;
    unsigned tx_queue_len;       /* WRs in flight per DCI */
    unsigned tx_bufs;
    unsigned rx_queue_len;
    unsigned fc_window;
    unsigned max_inline;
    double   timeout;
    unsigned retry_count;
    double   keepalive_interval;
    unsigned rcache_max;
    unsigned gid_index;
} axon_dc_config_t;

typedef struct axon_dc_iface axon_dc_iface_t;
typedef struct axon_dc_ep    axon_dc_ep_t;

/* Where a message goes: what every DCI WR names */
typedef struct axon_dc_target {
    axon_verbs_ah_entry_t *ah;        /* one per destination port, kept until close */
    uint64_t               dc_key;
    uint32_t               dct_num;
} axon_dc_target_t;

/* What one send WR holds until its completion */
typedef struct axon_dc_tx_desc {
    axon_dc_ep_t         *ep;     /* whose work; NULL: a grant, or the ep was destroyed */
    void                 *buf;    /* bounce buffer to return, or NULL */
    axon_tl_completion_t *comp;   /* get/put/atomic to complete, or NULL */
    axon_rcache_region_t *region; /* local registration to put back, or NULL */
    struct axon_umr_cached *iov_key; /* local pieces' key to put back (rc_md.c), or NULL */
    uint8_t               grant;  /* an FC_GRANT: buf says where it goes */
} axon_dc_tx_desc_t;

/* A peer's DCT that a hello came from (it may hold endpoints to us) or went to (it
 * knows us): it gets our goodbye */
typedef struct axon_dc_hello_peer {
    axon_dc_target_t           target;
    struct axon_dc_hello_peer *next;   /* hash chain */
} axon_dc_hello_peer_t;

/* A grant that waits for a DCI or a buffer, or was flushed: sent again from progress */
typedef struct axon_dc_grant {
    axon_dc_target_t target;
    uint32_t         ep_id;
    uint16_t         credits;
} axon_dc_grant_t;

typedef struct axon_dc_dci {
    axon_dev_qp_t     *qp;
    axon_dc_ep_t      *owner;     /* dcs policies: the endpoint holding it */
    axon_dc_target_t   grant_to;  /* dcs, held with no owner: where its grants go (ah NULL: none) */
    uint64_t           posted;
    uint64_t           completed;
    uint64_t           handoff_tick; /* dcs: when it was handed to a waiting endpoint;
                                      * shared: when its line's head last moved */
    axon_list_link_t   line;         /* shared: endpoints waiting for room, in turn */
    uint32_t           quota_used;   /* the owner's WRs since it took the DCI */
    uint8_t            held;         /* dcs policies: out of the free stack */
    uint8_t            broken;       /* a WR failed: drain, then reset */
    uint8_t            index;
    /* closing: the goodbye it carries (its only WR), moot once that peer's came */
    uint8_t            bye_moot;
    axon_dc_target_t   bye_to;       /* ah NULL: none */
    /* shared: WRs of live endpoints another peer's failure flushed, in order, posted
     * again once the DCI is back (dc_replay.c); made at the first such flush */
    uint8_t           *replay;
    uint32_t           replay_count;
} axon_dc_dci_t;

/* Endpoint flags */
#define AXON_DC_EP_F_WAITING   0x01  /* in line: the iface's (dcs) or its DCI's (shared) */
#define AXON_DC_EP_F_FC_OUT    0x02  /* an FC_REQ is out, its grant not back */
#define AXON_DC_EP_F_FC_DUE    0x04  /* an FC_REQ is due (found no room) */
#define AXON_DC_EP_F_REPORTED  0x08  /* peer failure reported */
#define AXON_DC_EP_F_HELLO_DUE 0x10  /* nothing posted yet: a hello goes first */
#define AXON_DC_EP_F_PEER_BYE  0x20  /* the peer said goodbye: errors are not failures */

struct axon_dc_ep {
    axon_tl_ep_t       super;
    axon_dc_target_t   target;
    axon_dc_dci_t     *dci;          /* held (dcs) or assigned (shared); NULL: none */
    uint64_t           peer_uuid;
    uint64_t           last_tx_ns;   /* coarse: the iface's clock at the last post */
    axon_list_link_t   wait_link;    /* iface->waiters (dcs), dci->line (shared) */
    uint32_t           id;
    int32_t            tx_credits;
    uint32_t           outstanding;  /* WRs not completed */
    uint16_t           fc_unrequested; /* AMs sent that no FC_REQ covers yet */
    uint8_t            flags;
    int8_t             status;       /* axon_status_t: set once the endpoint failed */
};

struct axon_dc_iface {
    axon_iface_t              super;
    axon_verbs_dev_t          dev;           /* the domain's (a copy: not closed here) */
    axon_dc_config_t          config;
    char                      name[AXON_TL_NAME_MAX + AXON_DEV_NAME_MAX]; /* "dc/softib0:1" */
    /* Upper layer */
    void                     *am_arg;
    axon_am_handler_t         am_handlers[AXON_AM_ID_MAX];  /* all NULL once closing */
    axon_peer_failure_cb_t    peer_failure;
    int                       closing;       /* iface_close runs: AMs are read, not delivered */
    /* Limits */
    size_t                    seg_size;
    size_t                    max_short;
    uint32_t                  max_inline;
    uint32_t                  tx_depth;      /* per DCI, power of 2 */
    uint32_t                  tx_data_depth; /* of which endpoints' WRs may take */
    uint32_t                  window;
    uint8_t                   timeout_exp;
    uint64_t                  keepalive_ns;
    /* Target side */
    axon_dev_dct_t           *dct;
    uint64_t                  dc_key;
    axon_dev_cq_t            *send_cq;
    axon_dev_cq_t            *recv_cq;
    axon_verbs_srq_ring_t     rx;
    axon_verbs_bufpool_t      tx_pool;
    axon_verbs_bufpool_t      rx_pool;
    axon_verbs_bufpool_t      amo_pool;
    axon_rc_md_t             *md;
    axon_rcache_t            *rcache;
    /* DCIs */
    unsigned                  num_dci;       /* the pool's size */
    unsigned                  num_created;   /* DCIs 0..num_created-1 exist (made when needed) */
    axon_dc_dci_t            *dcis;
    axon_dc_tx_desc_t        *tx_desc;       /* num_dci rings of tx_depth */
    uint8_t                  *tx_copy;       /* shared: a copy of each WR (dc_replay.c) */
    size_t                    copy_size;     /* ... bytes of one */
    uint8_t                  *free_dcis;     /* stack of indices (dcs policies) */
    unsigned                  num_free;
    unsigned                  next_ep_dci;   /* shared: round-robin of new eps */
    unsigned                  next_grant_dci;
    axon_list_link_t          waiters;       /* FIFO of eps waiting for a DCI */
    /* Grants that wait (ring, grown when full) */
    axon_dc_grant_t          *grants;
    unsigned                  grants_size;
    unsigned                  grants_head;
    unsigned                  grants_count;
    int                       tx_poll_due;   /* the last poll delivered and skipped the send CQ */
    /* Endpoints by id */
    axon_dc_ep_t            **eps;
    unsigned                  eps_size;
    unsigned                  eps_free_hint;
    uint32_t                  ep_gen;
    /* Address handles */
    axon_verbs_ah_cache_t     ahs;
    /* Peers a hello came from or went to, no goodbye since (dc_bye.c) */
    axon_dc_hello_peer_t     *hello_peers[AXON_DC_HELLO_HASH];
    unsigned                  num_hello_peers;
    /* Timers */
    unsigned                  timer_skip;
    uint64_t                  tick;
    uint64_t                  now_ns;        /* coarse clock, set by the timer pass */
    uint64_t                  next_ka_ns;
};

static inline uint64_t axon_dc_now_ns(void)
{
    return (uint64_t)(axon_sys_time_sec() * 1e9);
}

/* dc_config.c */
extern const axon_config_entry_t axon_dc_config_table[];
axon_status_t axon_dc_config_check(const axon_dc_config_t *c);
int           axon_dc_fill_resource(const axon_verbs_port_info_t *info, axon_resource_t *res,
                                    void *arg);

/* dc_iface.c */
axon_status_t axon_dc_iface_open(const axon_resource_t *resource, const axon_dc_config_t *c,
                                 const axon_iface_params_t *params, axon_iface_t **iface_p);
/* The cached address handle of a port (created at the first use; NULL: logged) */
unsigned      axon_dc_iface_poll(axon_dc_iface_t *iface);

/* dc_dci.c */
axon_status_t axon_dc_dci_pool_init(axon_dc_iface_t *iface);
/* iface close: progress until no DCI has WRs in flight or until deadline; 1 if drained */
int           axon_dc_dci_drain(axon_dc_iface_t *iface, double deadline);
/* A DCI with nothing in flight (iface close: whoever held it), a new one if none and
 * the pool has room, or NULL */
axon_dc_dci_t *axon_dc_dci_idle(axon_dc_iface_t *iface);
/* iface close, after the drain: destroy the DCIs */
void          axon_dc_dci_pool_cleanup(axon_dc_iface_t *iface);
/*
 * The DCI ep may post one WR on now, taking one per the policy; NULL when
 * it has to wait (AXON_ERR_NO_RESOURCE for the caller).
 */
axon_dc_dci_t *axon_dc_dci_for_ep(axon_dc_iface_t *iface, axon_dc_ep_t *ep);
/* A DCI for ep's keep-alive probe if one is at hand; never waits in a line (a pass over
 * thousands of idle endpoints would stand in front of those with work) */
axon_dc_dci_t *axon_dc_dci_for_probe(axon_dc_iface_t *iface, axon_dc_ep_t *ep);
/* shared: the DCI a new endpoint keeps (round-robin over the pool) */
axon_dc_dci_t *axon_dc_dci_of_new_ep(axon_dc_iface_t *iface);
/* A DCI with room for a grant to target (a grant has no order to keep); NULL if none */
axon_dc_dci_t *axon_dc_dci_for_grant(axon_dc_iface_t *iface, const axon_dc_target_t *target);
/*
 * Post wr on dci to target for ep (NULL: a grant or a goodbye); the
 * descriptor releases buf/comp/region at completion. An endpoint's first WR
 * has its hello posted before it (the slot kept for control messages takes
 * it). Never fails for lack of room (the caller got the DCI above); NO_RESOURCE
 * if that hello found no buffer, IO_ERROR if the device refused (logged).
 */
/* The descriptor of the WR dci posted last (to hang more on it than the post takes). */
axon_dc_tx_desc_t *axon_dc_dci_last_desc(axon_dc_iface_t *iface, axon_dc_dci_t *dci);
axon_status_t axon_dc_dci_post(axon_dc_iface_t *iface, axon_dc_dci_t *dci, axon_dc_ep_t *ep,
                               const axon_dc_target_t *target, axon_dev_send_wr_t *wr,
                               void *buf, axon_tl_completion_t *comp,
                               axon_rcache_region_t *region);
void          axon_dc_dci_tx_completion(axon_dc_iface_t *iface, const axon_dev_wc_t *wc);
/* What a descriptor holds goes back: bounce buffer, registration, local pieces' key */
void          axon_dc_dci_desc_release(axon_dc_iface_t *iface, axon_dc_tx_desc_t *d);

/*
 * dc_replay.c, shared policy only (iface->tx_copy set): a copy of every WR
 * posted (inline data included), so that the WRs of live endpoints flushed
 * by another peer's failure of their DCI go out again once it recovered.
 */
axon_status_t axon_dc_replay_init(axon_dc_iface_t *iface);
void          axon_dc_replay_cleanup(axon_dc_iface_t *iface);
/* The WR just posted into descriptor d: keep its copy */
void          axon_dc_replay_save(axon_dc_iface_t *iface, const axon_dc_tx_desc_t *d,
                                  const axon_dev_send_wr_t *wr);
/* d's WR of a live endpoint was flushed: 1 when kept to post again (d emptied) */
int           axon_dc_replay_keep(axon_dc_iface_t *iface, axon_dc_dci_t *dci,
                                  axon_dc_tx_desc_t *d);
/* dci is back (up != 0) or lost: post what it kept, in order, or fail it */
void          axon_dc_replay_post(axon_dc_iface_t *iface, axon_dc_dci_t *dci, int up);
/* ep goes away: its kept WRs complete as canceled instead */
void          axon_dc_replay_ep_detach(axon_dc_iface_t *iface, axon_dc_dci_t *dci,
                                       axon_dc_ep_t *ep);
/* ep goes away: its descriptors forget it, its DCI and FIFO place are given up */
void          axon_dc_dci_ep_detach(axon_dc_iface_t *iface, axon_dc_ep_t *ep);
/* Timer pass: a DCI handed to a waiter that did not use it moves on */
void          axon_dc_dci_timers(axon_dc_iface_t *iface);
/* Room for an endpoint's WR: the last slots are kept for credit requests and grants, so
 * an endpoint waiting for credits can ask for them on a DCI others keep full */
static inline int axon_dc_dci_has_room(const axon_dc_iface_t *iface, const axon_dc_dci_t *dci)
{
    return !dci->broken && ((dci->posted - dci->completed) < iface->tx_data_depth);
}
static inline int axon_dc_dci_has_ctrl_room(const axon_dc_iface_t *iface,
                                            const axon_dc_dci_t *dci)
{
    return !dci->broken && ((dci->posted - dci->completed) < iface->tx_depth);
}

/* dc_ep.c */
axon_status_t axon_dc_ep_create(axon_iface_t *tl_iface, uint64_t peer_uuid, const void *dev_addr,
                                const void *iface_addr, axon_tl_ep_t **ep_p);
void          axon_dc_ep_destroy(axon_tl_ep_t *tl_ep);
axon_status_t axon_dc_ep_am_short(axon_tl_ep_t *tl_ep, uint8_t am_id, const void *hdr,
                                  size_t hdr_len, const void *payload, size_t length);
ssize_t       axon_dc_ep_am_bcopy(axon_tl_ep_t *tl_ep, uint8_t am_id, axon_pack_cb_t pack,
                                  void *arg);
axon_status_t axon_dc_ep_flush(axon_tl_ep_t *tl_ep);
axon_status_t axon_dc_ep_check(axon_tl_ep_t *tl_ep);
axon_dc_ep_t *axon_dc_ep_by_id(axon_dc_iface_t *iface, uint32_t id);
/* The endpoint failed (status): later calls return it, the peer is reported once */
void          axon_dc_ep_fail(axon_dc_iface_t *iface, axon_dc_ep_t *ep, axon_status_t status,
                              const char *why);
/* Timer pass: endpoints idle for the keep-alive interval probe their peer */
void          axon_dc_ep_keepalive(axon_dc_iface_t *iface);
void          axon_dc_ep_table_cleanup(axon_dc_iface_t *iface);

/* dc_fc.c */
/* Post a control message of type that names our DCT (axon_dc_sender_t follows the
 * header) on dci to target; NO_RESOURCE without a buffer when it cannot be inline */
axon_status_t axon_dc_post_signed(axon_dc_iface_t *iface, axon_dc_dci_t *dci, axon_dc_ep_t *ep,
                                  const axon_dc_target_t *target, uint8_t type,
                                  uint16_t credits, uint32_t ep_id);
/* The DCT a signed message names (its address handle made if new); 0: dropped, logged */
int           axon_dc_sender_target(axon_dc_iface_t *iface, const axon_dc_hdr_t *hdr,
                                    uint32_t length, axon_dc_target_t *target);
/* An AM was posted: count it, ask for credits once half the window is spent */
void          axon_dc_fc_sent(axon_dc_iface_t *iface, axon_dc_ep_t *ep, axon_dc_dci_t *dci);
/* Post the FC_REQ that found no room (before the ep's next message) */
void          axon_dc_fc_post_due(axon_dc_iface_t *iface, axon_dc_ep_t *ep);
/* FC_REQ or FC_GRANT received */
void          axon_dc_fc_rx(axon_dc_iface_t *iface, const axon_dc_hdr_t *hdr, uint32_t length);
/* Send what waits in the grant ring (from progress) */
void          axon_dc_fc_progress(axon_dc_iface_t *iface);
/* A grant's WR was flushed (not the target's fault): queue it again */
void          axon_dc_fc_grant_requeue(axon_dc_iface_t *iface, const void *buf);
void          axon_dc_fc_cleanup(axon_dc_iface_t *iface);

/* dc_bye.c */
/* ep's first WR goes on dci: post its hello before it (the flag is cleared) */
axon_status_t axon_dc_bye_hello(axon_dc_iface_t *iface, axon_dc_dci_t *dci, axon_dc_ep_t *ep);
/* HELLO or BYE received */
void          axon_dc_bye_rx(axon_dc_iface_t *iface, const axon_dc_hdr_t *hdr, uint32_t length);
/* A peer failed: no goodbye for it (it would only break a DCI at close) */
void          axon_dc_bye_forget(axon_dc_iface_t *iface, const axon_dc_target_t *target);
/* iface close: a goodbye to every peer that said hello, each through before deadline */
void          axon_dc_bye_send_all(axon_dc_iface_t *iface, double deadline);
void          axon_dc_bye_cleanup(axon_dc_iface_t *iface);

/* dc_rdma.c */
axon_status_t axon_dc_ep_get_zcopy(axon_tl_ep_t *tl_ep, void *buffer, size_t length,
                                   uint64_t remote_addr, const void *rkey,
                                   axon_tl_completion_t *comp);
axon_status_t axon_dc_ep_put_zcopy(axon_tl_ep_t *tl_ep, const void *buffer, size_t length,
                                   uint64_t remote_addr, const void *rkey,
                                   axon_tl_completion_t *comp);
axon_status_t axon_dc_ep_get_zcopy_iov(axon_tl_ep_t *tl_ep, const struct iovec *iov,
                                       size_t iov_count, uint64_t remote_addr, const void *rkey,
                                       axon_tl_completion_t *comp);
axon_status_t axon_dc_ep_put_zcopy_iov(axon_tl_ep_t *tl_ep, const struct iovec *iov,
                                       size_t iov_count, uint64_t remote_addr, const void *rkey,
                                       axon_tl_completion_t *comp);
axon_status_t axon_dc_ep_atomic(axon_tl_ep_t *tl_ep, const axon_amo_args_t *args,
                                uint64_t remote_addr, const void *rkey, uint64_t *result,
                                axon_tl_completion_t *comp);

#endif
