/*
 * softib internals: the objects behind the device-layer handles, and the
 * calls between the stages of the engine.
 *
 * Every object embeds its axon_dev_* struct first, so a handle converts to
 * the object by cast. One mutex per device (dev->lock) serializes the whole
 * engine between the consumer's calls and the progress thread; functions
 * named softib_*_locked, and every engine function (req, resp, comp), expect
 * it held.
 *
 * Engine stages, as in rxe: the requester (softib_req.c) turns send WQEs into
 * packets, the responder (softib_resp.c) executes incoming requests and
 * answers them, the completer (softib_comp.c) turns answers into completions;
 * softib_progress.c drives the three from the wire and the timers.
 */
#ifndef SOFTIB_H
#define SOFTIB_H

#include <pthread.h>
#include <stdint.h>
#include "dev.h"
#include "list.h"
#include "config.h"
#include "sys.h"
#include "softib_wire.h"
#include "softib_amo.h"

#define SOFTIB_PORT_NUM        1
#define SOFTIB_MAX_SGE         16
#define SOFTIB_SGE_INLINE_ROOM 16             /* inline bytes a send WQE's SGE slot holds */
#define SOFTIB_MAX_QP_WR       16384
#define SOFTIB_MAX_CQE         65536
#define SOFTIB_MAX_SRQ_WR      16384
#define SOFTIB_MAX_RD_ATOM     16
#define SOFTIB_MR_TABLE_SIZE   16384          /* key index 0 is never used */
#define SOFTIB_MAX_PD          65536
#define SOFTIB_MAX_AH          65536
/* UD multicast: groups per device (host-wide), QPs per group */
#define SOFTIB_MCAST_GROUPS    64
#define SOFTIB_MCAST_MEMBERS   64
#define SOFTIB_MCAST_QPN       0xffffffu   /* the destination QP of a multicast send */
#define SOFTIB_GRH_LEN         40
#define SOFTIB_MAX_MSG         (1u << 31)
#define SOFTIB_PSN_MASK        0xffffffu
#define SOFTIB_DEFAULT_PKEY    0xffff
/* Requester: unacknowledged packets allowed in flight (go-back-N window) */
#define SOFTIB_SEND_WINDOW     256
/* Requester: request ACK at least every this many packets */
#define SOFTIB_ACK_EVERY       16

/* ------------------------------------------------------------ config */

/* AXON_SOFTIB_ATOMIC_CAP: the level query_device reports (the atomics stay the same). */
typedef enum {
    SOFTIB_ATOMIC_CAP_GLOB,   /* what softib gives: atomic with the CPU too */
    SOFTIB_ATOMIC_CAP_HCA,    /* the weaker level NICs report, which some clients require */
} softib_atomic_cap_t;

typedef struct softib_opts {
    unsigned            devices;
    unsigned            wire;            /* softib_wire_mode_t */
    char               *addr;
    unsigned            udp_port;
    unsigned            mtu;
    unsigned            max_inline;
    unsigned            dc_max_dcr;      /* responder contexts per DC target */
    char               *loss;
    char               *dup;
    char               *reorder;
    unsigned            seed;
    int                 progress_thread;
    int                 direct;          /* RDMA WRITE/READ data placed by the requester */
    unsigned            atomic_cap;      /* softib_atomic_cap_t: what query_device reports */
    axon_config_names_t cap_mask;
    axon_config_names_t locality;        /* per device, in order: where it pretends to sit */
} softib_opts_t;

extern const axon_config_entry_t softib_config_table[];

/* Parse AXON_SOFTIB_*; 0 or EINVAL (logged). softib_config_release() after. */
int      softib_config_read(softib_opts_t *opts);
void     softib_config_release(softib_opts_t *opts);
/* Validate and convert to wire parameters and the capability mask to remove. */
int      softib_config_params(const softib_opts_t *opts, unsigned dev_index,
                              softib_wire_params_t *params, uint64_t *cap_remove,
                              axon_dev_mtu_t *mtu);

/* Device dev_index's locality from AXON_SOFTIB_LOCALITY (checked by softib_config_params). */
void     softib_config_locality(const softib_opts_t *opts, unsigned dev_index, char *buf,
                                size_t max);

/* ------------------------------------------------------------ objects */

struct softib_qp;
struct softib_dct;
struct softib_umr;
struct softib_mkey_list;

/*
 * Cross-channel counting (seed §8.9.3): a WAIT or ENABLE task targets
 * base + n; WAIT_EN_LAST ends a task list, moving base by its largest n.
 */
typedef struct softib_xchan_count {
    unsigned base;
    unsigned max;
} softib_xchan_count_t;

/* Unread async events a device keeps; more are lost (with a warning) */
#define SOFTIB_ASYNC_QUEUE 256

typedef struct {
    axon_dev_async_event_t ev;
    const void            *element;   /* what ev names, for softib_async_forget */
} softib_async_entry_t;

typedef struct softib_dev {
    axon_dev_context_t  super;
    pthread_mutex_t     lock;
    unsigned            index;            /* N of softibN */
    softib_opts_t       opts;
    softib_wire_t      *wire;
    axon_dev_gid_t      gid;
    axon_dev_attr_t     attr;             /* after capability masking */
    axon_dev_mtu_t      mtu;
    uint32_t            qkey_viol;
    uint32_t            dc_psn;            /* DCIs start here: past every PSN a DCI used */
    uint32_t            next_pd_handle;
    /* QPs by QPN index */
    struct softib_qp   *qps[SOFTIB_QPN_MAX_INDEX + 1];
    unsigned            next_qp_index;
    unsigned            num_qps;
    /* The QPs a progress pass looks at (softib_qp_activate): those with work now, and
     * those waiting only for a timer, none of which is due before timed_due (ns) */
    axon_list_link_t    active_list;
    axon_list_link_t    timed_list;
    uint64_t            timed_due;
    uint64_t            qp_visits;         /* QPs the passes visited, for softib_qp_visits */
    uint64_t            cq_serial;         /* the last CQ's serial (softib_cq_t.serial) */
    axon_list_link_t    ack_list;          /* QPs with a coalesced ACK to send */
    uint64_t            pass_ns;           /* the running pass's start: its packets' time */
    /* MR key table: key = index << 8 | generation */
    struct softib_mr  **mrs;
    unsigned            next_mr_index;
    uint8_t             mr_gen;
    unsigned            num_mrs;
    axon_list_link_t    mkey_lists;        /* UMR entry lists (softib_umr.c) */
    /* async events (softib_async.c): a queue, and a byte per queued event on a
     * socket pair whose read end is super.async_fd */
    pthread_mutex_t       async_lock;
    pthread_cond_t        async_acked;    /* an object's async_held went down */
    softib_async_entry_t  async_q[SOFTIB_ASYNC_QUEUE];
    unsigned              async_head, async_count;
    int                   async_wfd;
    /* progress thread */
    int                 thread_started;
    pthread_t           thread;
    int                 wake_fd;           /* eventfd: timers moved earlier, or stop */
    volatile int        stop;
    uint64_t            thread_deadline;   /* when the sleeping thread wakes (ns), 0 none */
    uint64_t            consumer_ns;       /* the consumer's last call into the engine, 0 none */
    int                 xchan_kick;        /* a WAIT's CQ grew or a queue was enabled: rerun */
    int                 cq_overrun;        /* a CQ overran: its QPs fail at the pass's end */
    struct softib_mcast_seg *mcast;        /* the multicast groups, once used (softib_mcast.c) */
    uint8_t             rx_buf[SOFTIB_WIRE_MAX_PKT];
    uint8_t             tx_buf[SOFTIB_WIRE_MAX_PKT];
} softib_dev_t;

typedef struct softib_pd {
    axon_dev_pd_t super;
    int           refcnt;                  /* MRs, QPs, SRQs, AHs using it */
} softib_pd_t;

typedef struct softib_mr {
    axon_dev_mr_t      super;
    unsigned           index;
    struct softib_umr *umr;                /* an indirect key's layout (softib_umr.c); NULL:
                                            * registered memory */
} softib_mr_t;

typedef struct softib_ah {
    axon_dev_ah_t      super;
    axon_dev_ah_attr_t attr;
} softib_ah_t;

typedef struct softib_comp_channel {
    axon_dev_comp_channel_t super;
    int                     wfd;           /* write end; super.fd is the read end */
    int                     refcnt;
    axon_list_link_t        cqs;           /* its live CQs (softib_cq_t.chan_link) */
} softib_comp_channel_t;

/*
 * The queue slots a completion holds until it is polled (seed glossary,
 * §3.3.11: a WR is outstanding until its completion was polled): a send
 * WQE's, with every unsignaled one before it, or one receive of the QP's
 * queue or SRQ. qp NULL: none (the QP was reset or destroyed).
 */
typedef struct softib_cq_src {
    struct softib_qp *qp;
    unsigned          sq_index;            /* send: the WQE's free-running index */
    int               recv;
} softib_cq_src_t;

typedef struct softib_cq {
    axon_dev_cq_t  super;
    axon_dev_wc_t *ring;
    softib_cq_src_t *src;                  /* beside each ring entry */
    unsigned       size;                   /* super.cqe + 1 slots */
    unsigned       head, tail;
    int            armed;                  /* 0, 1 = next completion, 2 = solicited only */
    int            error;                  /* overrun: unusable */
    int            refcnt;                 /* QPs and pending WAITs using it */
    uint32_t       flags;                  /* AXON_DEV_CQ_* */
    unsigned       produced;               /* completions ever pushed (WAITs count these) */
    unsigned       first_err;              /* produced count at the first error, 0 none */
    softib_xchan_count_t wait;             /* WAIT tasks on it */
    unsigned       events;                 /* events delivered, for ack_cq_events */
    uint64_t       serial;                 /* names it in its channel's events */
    axon_list_link_t chan_link;            /* in its channel's cqs */
} softib_cq_t;

typedef struct softib_recv_wqe {
    uint64_t        wr_id;
    int             num_sge;
    axon_dev_sge_t *sge;
} softib_recv_wqe_t;

/* A receive queue: of a QP, or the ring of an SRQ */
typedef struct softib_rq {
    softib_recv_wqe_t *wqe;
    axon_dev_sge_t    *sge_pool;
    unsigned           max_wr;
    unsigned           max_sge;
    unsigned           head, tail;         /* free-running; count = tail - head */
    unsigned           freed;              /* WQEs whose completion was polled */
    int                managed;            /* MANAGED_RECV: WQEs from en on are held */
    unsigned           en;
    softib_xchan_count_t en_count;
} softib_rq_t;

typedef struct softib_srq {
    axon_dev_srq_t super;
    softib_rq_t    rq;
    uint32_t       limit;
    int            refcnt;
} softib_srq_t;

typedef struct softib_send_wqe {
    uint64_t             wr_id;
    axon_dev_wr_opcode_t opcode;
    unsigned             flags;
    uint32_t             imm;              /* network order, as given */
    uint64_t             remote_addr;
    uint32_t             rkey;
    uint64_t             compare_add;
    uint64_t             swap;
    axon_amo_args_t     *amo;              /* masked atomic: its operands (QP's pool) */
    axon_dev_gid_t       dgid;             /* UD */
    uint32_t             remote_qpn;       /* UD */
    uint32_t             remote_qkey;      /* UD */
    uint64_t             dc_key;           /* DCI: the target's key (dgid, remote_qpn its address) */
    uint32_t             length;
    int                  num_sge;
    axon_dev_sge_t      *sge;
    uint8_t             *inline_data;      /* INLINE: copied at post */
    softib_cq_t         *wait_cq;          /* CQE_WAIT: the CQ (holds a reference) */
    uint32_t             en_qpn;           /* SEND/RECV_ENABLE: the managed QP */
    unsigned             xchan_target;     /* WAIT: CQ count awaited; ENABLE: index released to */
    uint8_t              calc_op, calc_type;  /* WITH_CALC */
    struct softib_umr_wqe *umr;            /* UMR_FILL / INVALIDATE: its operands (QP's pool) */
    /* engine state */
    uint32_t             first_psn;
    uint32_t             npkts;            /* PSNs it uses (read: response packets) */
    uint32_t             rcvd;             /* read response packets received */
    int                  status;           /* local error found by the requester, or -1 */
} softib_send_wqe_t;

/* The value an atomic found: standard ones one word, masked ones one to four */
typedef struct softib_amo_result {
    uint64_t word[SOFTIB_AMO_MAX_WORDS];
    uint8_t  ext_size;                     /* 0 standard (ATOMIC_ACK), else the masked size */
} softib_amo_result_t;

/* A responder resource: the result of an executed atomic, replayed for duplicates */
typedef struct softib_atomic_res {
    uint32_t            psn;
    int                 valid;
    softib_amo_result_t orig;
} softib_atomic_res_t;

/* An executed RDMA READ (responses still to send) or atomic (its ACK still to send) */
typedef struct softib_resp_res {
    int                 atomic;
    int                 dup;               /* for a duplicate request: not counted against
                                            * max_dest_rd_atomic (softib_resp.c) */
    int                 first;             /* read: no response sent yet */
    uint32_t            psn;               /* PSN of the next response packet */
    uint32_t            rkey;
    uint32_t            left;              /* read: bytes still to send */
    uint64_t            va;                /* read: next byte */
    softib_amo_result_t orig;              /* atomic: the value found */
} softib_resp_res_t;

typedef struct softib_qp {
    axon_dev_qp_t      super;
    axon_dev_qp_attr_t attr;               /* values as set by modify_qp */
    axon_dev_qp_cap_t  cap;
    int                sq_sig_all;
    axon_list_link_t   sched_link;         /* dev->active_list or timed_list, per sched */
    int                sched;              /* SOFTIB_QP_IDLE, _ACTIVE, _TIMED */
    axon_list_link_t   ack_link;           /* dev->ack_list */
    int                ack_queued;
    int                sq_draining;
    int                cq_fatal;           /* QP_FATAL raised for an overrun CQ (until RESET) */
    int                direct_off;         /* the peer's process refused direct placement */
    uint64_t           direct_until;       /* place directly until then (ns): the responder
                                            * left our packets waiting (softib_direct.c) */
    unsigned           direct_late;        /* answers in a row that came that late */
    struct softib_dct *dct;                /* a DC target's QP: its number, or one initiator's
                                            * responder context (softib_dc.c) */

    /* send queue: ring of sq_size WQEs; free = oldest whose completion was not
     * polled (its slot is taken), head = oldest not completed, req = next for
     * the requester, tail = next free */
    softib_send_wqe_t *sq;
    axon_dev_sge_t    *sq_sge;
    uint8_t           *sq_inline;
    axon_amo_args_t   *sq_amo;             /* RC with masked atomics: one per WQE */
    struct softib_umr_wqe *sq_umr;         /* CREATE_UMR: one per WQE (softib_umr.c) */
    struct softib_klm *sq_klm;             /* ... and max_inl_klms inline entries per WQE */
    uint32_t           max_inl_klms;
    unsigned           sq_size;
    unsigned           sq_free, sq_head, sq_req, sq_tail;
    unsigned           sq_started;         /* WQEs before it have PSNs assigned */
    unsigned           sqd_tail;           /* SQD: WQEs before it still go out */
    uint32_t           create_flags;       /* AXON_DEV_QP_CREATE_* */
    unsigned           mcast_groups;       /* groups it is attached to (softib_mcast.c) */
    unsigned           sq_en;              /* MANAGED_SEND: WQEs from it on are held */
    softib_xchan_count_t sq_en_count;

    softib_rq_t        rq;

    struct {
        uint32_t psn;                      /* next PSN to send */
        uint32_t pkt;                      /* packets of WQE sq_req already sent */
        uint32_t max_psn;                  /* one past the highest PSN sent */
        int      blocked;                  /* the wire was full: retry soon */
    } req;

    struct {
        uint32_t psn;                      /* oldest unacknowledged PSN */
        unsigned retry_left;
        unsigned rnr_left;
        uint64_t rto_deadline;             /* retransmit timer (ns), 0 = off */
        uint64_t rnr_deadline;             /* RNR wait (ns), 0 = none */
        uint64_t wait_ns;                  /* since then the responder has not answered
                                            * anything outstanding (ns), 0 = nothing is */
        uint32_t rnr_psn;
        int      read_retry;               /* a read was asked again from read_retry_psn */
        uint32_t read_retry_psn;
    } comp;

    /* DCI (softib_dc.c): the target it is connected to (its DCT number is
     * attr.dest_qp_num), and the last disconnect until the target confirms it */
    struct {
        int            connected;
        axon_dev_gid_t dgid;
        uint64_t       key;
        uint32_t       conn_psn;           /* PSN of the connection's first packet */
        uint64_t       idle_deadline;      /* drained: disconnect then (ns), 0 = busy */
        int            disc_pending;
        axon_dev_gid_t disc_dgid;
        uint32_t       disc_dct, disc_psn;
        uint64_t       disc_key;
        unsigned       disc_left;          /* resends left */
        uint64_t       disc_deadline;      /* resend timer (ns), 0 = off */
    } dc;

    struct {
        uint32_t          psn;             /* expected PSN */
        int               nak_sent;
        int               comm_est;
        int               in_msg;          /* 0, or the opcode class of the message in progress */
        int               have_wqe;
        softib_recv_wqe_t wqe;             /* receive WQE being filled */
        axon_dev_sge_t    sge[SOFTIB_MAX_SGE];
        uint32_t          offset;          /* bytes received into it / written so far */
        uint64_t          va;              /* RDMA WRITE in progress */
        uint32_t          rkey;
        uint32_t          write_len;
        uint32_t          ack_psn;         /* last in-order PSN to acknowledge */
        softib_atomic_res_t atomics[SOFTIB_MAX_RD_ATOM];
        unsigned          atomic_next;
        /* Responder resources (max_dest_rd_atomic): executed reads and atomics
         * whose answers have not all left, sent in PSN order by resp_progress */
        softib_resp_res_t rdq[SOFTIB_MAX_RD_ATOM];
        unsigned          rd_head, rd_tail;  /* free-running; count = tail - head */
    } resp;
} softib_qp_t;

static inline softib_dev_t *softib_dev(axon_dev_context_t *ctx) { return (softib_dev_t *)ctx; }
static inline softib_dev_t *softib_qp_dev(softib_qp_t *qp) { return (softib_dev_t *)qp->super.context; }
static inline softib_qp_t  *softib_qp(axon_dev_qp_t *qp) { return (softib_qp_t *)qp; }
static inline softib_cq_t  *softib_cq(axon_dev_cq_t *cq) { return (softib_cq_t *)cq; }
static inline softib_srq_t *softib_srq(axon_dev_srq_t *srq) { return (softib_srq_t *)srq; }
static inline softib_pd_t  *softib_pd(axon_dev_pd_t *pd) { return (softib_pd_t *)pd; }
/* RC-grade reliability (PSNs acknowledged, retries): RC and DC initiators */
static inline int softib_qp_reliable(const softib_qp_t *qp)
{
    return (qp->super.qp_type == AXON_DEV_QPT_RC) || (qp->super.qp_type == AXON_DEV_QPT_DC_INI);
}

static inline uint32_t softib_psn_add(uint32_t psn, uint32_t n) { return (psn + n) & SOFTIB_PSN_MASK; }
/* Signed distance a - b in the 24-bit PSN space */
static inline int32_t softib_psn_diff(uint32_t a, uint32_t b)
{
    return ((int32_t)((a - b) << 8)) >> 8;
}

static inline int softib_resp_busy(const softib_qp_t *qp)
{
    return qp->resp.rd_head != qp->resp.rd_tail;
}

static inline unsigned softib_rq_count(const softib_rq_t *rq) { return rq->tail - rq->head; }
/* WQEs holding a slot: posted, and not yet polled (softib_cq_src_t) */
static inline unsigned softib_rq_outstanding(const softib_rq_t *rq) { return rq->tail - rq->freed; }
/* One past the last send WQE the requester may take */
static inline unsigned softib_sq_limit(const softib_qp_t *qp)
{
    return (qp->create_flags & AXON_DEV_QP_CREATE_MANAGED_SEND) ? qp->sq_en : qp->sq_tail;
}
static inline unsigned softib_sq_index(const softib_qp_t *qp, unsigned n) { return n % qp->sq_size; }
static inline softib_send_wqe_t *softib_sq_wqe(softib_qp_t *qp, unsigned n)
{
    return &qp->sq[n % qp->sq_size];
}

/* ------------------------------------------------------------ calls between files */

/* device */
extern const axon_dev_ops_t softib_dev_ops;

/* async events (softib_async.c) */
int      softib_async_open(softib_dev_t *dev);
void     softib_async_close(softib_dev_t *dev);
void     softib_async_event(softib_dev_t *dev, axon_dev_event_type_t type, void *element);
/* element (a QP, CQ, SRQ or DCT) is being destroyed: its unread events go */
void     softib_async_forget(softib_dev_t *dev, const void *element);
/* After the destroy's forget, outside dev->lock (the reader's handler may call verbs) */
void     softib_async_wait_acked(softib_dev_t *dev, const unsigned *held);
int      softib_async_get(axon_dev_context_t *ctx, axon_dev_async_event_t *event);
void     softib_async_ack(axon_dev_context_t *ctx, axon_dev_async_event_t *event);

/* mr: the one access path every memory access goes through */
typedef enum {
    SOFTIB_ACCESS_OK = 0,
    SOFTIB_ACCESS_BAD_KEY,                 /* no such key, another PD, an invalid indirect key */
    SOFTIB_ACCESS_BAD_RANGE,
    SOFTIB_ACCESS_BAD_RIGHTS,
} softib_access_t;

typedef enum {
    SOFTIB_MEM_CHECK,                      /* access rights and bounds only */
    SOFTIB_MEM_READ,                       /* ... then memory to buf */
    SOFTIB_MEM_WRITE,                      /* ... then buf to memory */
} softib_mem_op_t;

/*
 * len bytes at addr through key: checked (and copied, per op) piece by piece
 * when key is an indirect one, level counting the indirect keys above it
 * (0 from the callers outside mr and umr).
 */
softib_access_t softib_mem_access(softib_dev_t *dev, axon_dev_pd_t *pd, uint32_t key,
                                  uint64_t addr, void *buf, uint64_t len, int access,
                                  softib_mem_op_t op, unsigned level);
/* The contiguous bytes [addr, addr + len) through key (atomics): *ptr_p, or an error */
softib_access_t softib_mem_resolve(softib_dev_t *dev, axon_dev_pd_t *pd, uint32_t key,
                                   uint64_t addr, uint64_t len, int access, unsigned level,
                                   void **ptr_p);
static inline softib_access_t softib_mr_check(softib_dev_t *dev, axon_dev_pd_t *pd,
                                              uint32_t key, uint64_t addr, uint64_t len,
                                              int access)
{
    return softib_mem_access(dev, pd, key, addr, NULL, len, access, SOFTIB_MEM_CHECK, 0);
}
/* The MR of key on pd, or NULL */
softib_mr_t    *softib_mr_lookup(softib_dev_t *dev, axon_dev_pd_t *pd, uint32_t key);
/* A registered (not indirect) region: [addr, addr + len) inside it, with the rights asked */
softib_access_t softib_mr_range(const softib_mr_t *mr, uint64_t addr, uint64_t len, int access);
/* Access flags a region or key may have; 0 or EINVAL (logged, naming what) */
int             softib_mr_access_check(uint64_t access, const char *what);
/* Give mr (its addr, length, access set) a key on pd; 0 or ENOMEM (logged) */
int             softib_mr_add(softib_dev_t *dev, axon_dev_pd_t *pd, softib_mr_t *mr,
                              const char *what);
/* Gather len bytes at offset off of an SGE list into dst, or scatter src into it. */
softib_access_t softib_sge_copy_from(softib_dev_t *dev, axon_dev_pd_t *pd,
                                     const axon_dev_sge_t *sge, int num_sge, uint32_t off,
                                     void *dst, uint32_t len);
softib_access_t softib_sge_copy_to(softib_dev_t *dev, axon_dev_pd_t *pd,
                                   const axon_dev_sge_t *sge, int num_sge, uint32_t off,
                                   const void *src, uint32_t len);
softib_access_t softib_sge_check(softib_dev_t *dev, axon_dev_pd_t *pd,
                                 const axon_dev_sge_t *sge, int num_sge, int access);
/*
 * Where a packet's payload can be read in place: [addr, addr + len) of a
 * registered (not indirect) region through key with the rights asked, or
 * bytes [off, off + len) of an SGE list lying in one SGE of such a region.
 * NULL otherwise: the caller copies, and the copy reports what is wrong.
 */
const void     *softib_mem_ptr(softib_dev_t *dev, axon_dev_pd_t *pd, uint32_t key,
                               uint64_t addr, uint64_t len, int access);
const void     *softib_sge_ptr(softib_dev_t *dev, axon_dev_pd_t *pd, const axon_dev_sge_t *sge,
                               int num_sge, uint32_t off, uint32_t len);
void            softib_mr_table_free(softib_dev_t *dev);

/* cq */
/* src: the slots the completion holds until polled (NULL none); a CQ with IGNORE_OVERRUN,
 * which only the device watches (seed §8.9.1), frees them now */
void softib_cq_push(softib_cq_t *cq, const axon_dev_wc_t *wc, int solicited,
                    const softib_cq_src_t *src);
/* The slots a polled (or dropped) completion held are free */
void softib_cq_src_release(const softib_cq_src_t *src);
/* qp's completions still in cq hold nothing of its queues any more (qp reset or
 * destroyed); the SRQ slots they held are free, as the SRQ may go before them */
void softib_cq_detach(softib_cq_t *cq, const struct softib_qp *qp);

/* rq (QP receive queue and SRQ) */
int  softib_rq_init(softib_rq_t *rq, unsigned max_wr, unsigned max_sge);
void softib_rq_cleanup(softib_rq_t *rq);
int  softib_rq_post(softib_rq_t *rq, axon_dev_recv_wr_t *wr, axon_dev_recv_wr_t **bad_wr,
                    const char *what);
/* Take the oldest receive WQE (copying its SGEs into sge); 0 if the queue is empty. */
int  softib_rq_pop(softib_rq_t *rq, softib_recv_wqe_t *wqe, axon_dev_sge_t *sge);
/* After an SRQ lost a WQE: fire the limit event when it falls below an armed limit. */
void softib_srq_consumed(softib_dev_t *dev, softib_srq_t *srq);

/* Reads and atomics: the send opcodes that wait for answers carrying data */
static inline int softib_wr_is_std_atomic(axon_dev_wr_opcode_t op)
{
    return (op == AXON_DEV_WR_ATOMIC_CMP_AND_SWP) || (op == AXON_DEV_WR_ATOMIC_FETCH_AND_ADD);
}
static inline int softib_wr_is_ext_atomic(axon_dev_wr_opcode_t op)
{
    return (op == AXON_DEV_WR_EXT_MASKED_ATOMIC_CMP_AND_SWP) ||
           (op == AXON_DEV_WR_EXT_MASKED_ATOMIC_FETCH_AND_ADD);
}
static inline int softib_wr_is_atomic(axon_dev_wr_opcode_t op)
{
    return softib_wr_is_std_atomic(op) || softib_wr_is_ext_atomic(op);
}
/* Cross-channel tasks: executed locally by the requester, no packet */
static inline int softib_wr_is_xchan_task(axon_dev_wr_opcode_t op)
{
    return (op >= AXON_DEV_WR_SEND_ENABLE) && (op <= AXON_DEV_WR_CQE_WAIT);
}
static inline int softib_wr_is_umr(axon_dev_wr_opcode_t op)
{
    return (op == AXON_DEV_WR_UMR_FILL) || (op == AXON_DEV_WR_UMR_INVALIDATE);
}
static inline int softib_wqe_is_rd_atomic(const softib_send_wqe_t *wqe)
{
    return (wqe->opcode == AXON_DEV_WR_RDMA_READ) || softib_wr_is_atomic(wqe->opcode);
}

/* qp */
void softib_qp_error(softib_qp_t *qp);                       /* -> ERR, flush */
void softib_qp_flush(softib_qp_t *qp);
void softib_qp_complete_send(softib_qp_t *qp, softib_send_wqe_t *wqe, axon_dev_wc_status_t st);
void softib_qp_complete_recv(softib_qp_t *qp, uint64_t wr_id, axon_dev_wc_status_t st,
                             axon_dev_wc_opcode_t opcode, uint32_t byte_len, uint32_t imm,
                             int with_imm, uint32_t src_qp, int grh, int solicited);
softib_qp_t *softib_qp_lookup(softib_dev_t *dev, uint32_t qpn);
int  softib_qp_can_send(const softib_qp_t *qp);
int  softib_qp_can_recv(const softib_qp_t *qp);
void softib_qp_reset(softib_qp_t *qp);
/* After CQs overran (dev->cq_overrun): their QPs get QP_FATAL and go to ERR */
void softib_qp_cq_overrun(softib_dev_t *dev);
/* An async event about qp (a DCT's responder context reports it as the DCT's) */
void softib_qp_event(softib_qp_t *qp, axon_dev_event_type_t type);
/* Give qp a free QP number of dev (lock held); 0 or ENOMEM (logged) */
int  softib_qpn_alloc(softib_dev_t *dev, softib_qp_t *qp, const char *what);

/* ah: the address checks shared by create_ah and modify_qp's AV */
int  softib_ah_attr_check(const char *what, const axon_dev_ah_attr_t *attr);

/* qp_attr: the transition table */
int  softib_qp_attr_check(softib_qp_t *qp, const axon_dev_qp_attr_t *attr, int mask,
                          axon_dev_qp_state_t *new_state_p);

/* engine */
void     softib_progress(softib_dev_t *dev);
uint64_t softib_next_deadline(softib_dev_t *dev);
void     softib_timer_changed(softib_dev_t *dev, uint64_t deadline);

/*
 * The schedule (a NIC's doorbell list): a QP is on the active list or the
 * timed list whenever softib_qp_idle() is false. Engine work appears on a
 * QP only through a packet for it, a consumer call on it (post_send,
 * modify_qp), a timer it arms (softib_qp_timer), an ENABLE of its queue or
 * its move to ERR, and each of those puts it on the active list. A pass
 * visits the active QPs; one left waiting only for a timer moves to the
 * timed list (looked at when its earliest timer is due), an idle one
 * leaves. Idle QPs cost a pass nothing. Lock held.
 */
enum { SOFTIB_QP_IDLE, SOFTIB_QP_ACTIVE, SOFTIB_QP_TIMED };
static inline void softib_qp_deactivate(softib_qp_t *qp)
{
    if (qp->sched != SOFTIB_QP_IDLE) {
        qp->sched = SOFTIB_QP_IDLE;
        axon_list_del(&qp->sched_link);
    }
}
static inline void softib_qp_activate(softib_qp_t *qp)
{
    if (qp->sched != SOFTIB_QP_ACTIVE) {
        softib_qp_deactivate(qp);
        qp->sched = SOFTIB_QP_ACTIVE;
        axon_list_add_tail(&softib_qp_dev(qp)->active_list, &qp->sched_link);
    }
}
int      softib_qp_idle(const softib_qp_t *qp);
/* qp armed a timer due at deadline (ns): it stays active, the thread wakes in time */
void     softib_qp_timer(softib_qp_t *qp, uint64_t deadline);
/* QPs the progress passes of ctx visited so far (tests: idle QPs are not visited) */
uint64_t softib_qp_visits(axon_dev_context_t *ctx);
int      softib_wait_fd(softib_dev_t *dev, int fd);
int      softib_thread_start(softib_dev_t *dev);
void     softib_thread_stop(softib_dev_t *dev);

void     softib_req_progress(softib_qp_t *qp);
void     softib_resp_progress(softib_qp_t *qp);
void     softib_req_rewind(softib_qp_t *qp);
uint64_t softib_ack_timeout_ns(const softib_qp_t *qp);
uint64_t softib_rnr_timeout_ns(unsigned code);
/* The packet: its headers in dev->tx_buf (hlen bytes), then paylen bytes of payload at pay,
 * or already staged behind the headers when pay is NULL */
int      softib_send_pkt_pay(softib_dev_t *dev, softib_qp_t *qp, const axon_dev_gid_t *dgid,
                             uint32_t dest_qpn, size_t hlen, const void *pay, size_t paylen);
int      softib_send_pkt(softib_dev_t *dev, softib_qp_t *qp, const axon_dev_gid_t *dgid,
                         uint32_t dest_qpn, size_t len);

void     softib_req_forward(softib_qp_t *qp);
void     softib_resp_flush_acks(softib_dev_t *dev);
void     softib_comp_timers(softib_qp_t *qp, uint64_t now);

/* xchan (softib_xchan.c): cross-channel tasks and CALC */
#define SOFTIB_CALC_MAX_VECTOR 32          /* elements: a result fits the smallest MTU */
void softib_xchan_caps(axon_dev_attr_t *attr);
int  softib_xchan_check(softib_qp_t *qp, const axon_dev_send_wr_t *wr);
void softib_xchan_copy(softib_qp_t *qp, softib_send_wqe_t *wqe, const axon_dev_send_wr_t *wr);
/* A task at the head of the requester: 1 done (completed, maybe in error), 0 still waits */
int  softib_xchan_exec(softib_qp_t *qp, softib_send_wqe_t *wqe);
/* WQEs [from, sq_tail) leave without executing: drop their references, fail their targets */
void softib_xchan_drop(softib_qp_t *qp, unsigned from, int fail_targets);
softib_access_t softib_calc_reduce(softib_qp_t *qp, const softib_send_wqe_t *wqe,
                                   uint8_t *out);

/* dc (softib_dc.c): DC initiators and targets (seed §8.6) */
/* AXON_SOFTIB_DC_MAX_DCR's ceiling: initiators a DCT serves at once */
#define SOFTIB_DC_MAX_DCR 65536
void softib_dc_caps(axon_dev_attr_t *attr, unsigned max_dcr);
int  softib_dc_check(softib_qp_t *qp, const axon_dev_send_wr_t *wr);
void softib_dc_copy(softib_send_wqe_t *wqe, const axon_dev_send_wr_t *wr);
/* Before a DCI's WQE starts: 0 connected to its target, 1 wait (earlier WQEs unacknowledged) */
int  softib_dc_req_target(softib_qp_t *qp, const softib_send_wqe_t *wqe);
/* After the requester: a DCI with nothing outstanding disconnects soon */
void softib_dc_req_idle(softib_qp_t *qp);
void softib_dc_timers(softib_qp_t *qp, uint64_t now);
void softib_dc_error(softib_qp_t *qp);
/* A DCI stops (reset, destroy): it disconnects, its PSNs are left behind; starts: its
 * PSNs follow every PSN the device's DCIs used */
void softib_dc_leave(softib_qp_t *qp);
void softib_dc_start(softib_qp_t *qp);
void softib_dc_event(softib_qp_t *qp, axon_dev_event_type_t type);

/* umr (softib_umr.c): indirect memory keys (seed §8.8) */
void softib_umr_caps(axon_dev_attr_t *attr);
/* create_qp with CREATE_UMR: the per-WQE operand pool; 0 or ENOMEM */
int  softib_umr_qp_init(softib_qp_t *qp, uint32_t max_inl_klms);
void softib_umr_qp_free(softib_qp_t *qp);
int  softib_umr_check(softib_qp_t *qp, const axon_dev_send_wr_t *wr);
void softib_umr_copy(softib_qp_t *qp, softib_send_wqe_t *wqe, const axon_dev_send_wr_t *wr);
/* A UMR at the requester: 1 done (the requester goes on), 0 it waits or failed the QP */
int  softib_umr_req(softib_qp_t *qp, softib_send_wqe_t *wqe);
/* WQEs [from, sq_tail) leave without executing: their entry lists are free again */
void softib_umr_drop(softib_qp_t *qp, unsigned from);
/* An indirect key's walk (softib_mem_access / _resolve call it for such keys) */
softib_access_t softib_umr_access(softib_dev_t *dev, softib_mr_t *mr, uint64_t addr,
                                  void *buf, uint64_t len, int access, softib_mem_op_t op,
                                  unsigned level);
softib_access_t softib_umr_resolve(softib_dev_t *dev, softib_mr_t *mr, uint64_t addr,
                                   uint64_t len, int access, unsigned level, void **ptr_p);
void softib_umr_free(softib_mr_t *mr);
void softib_mkey_lists_free(softib_dev_t *dev);

/* ------------------------------------------------------------ the ops, one file per object */
int  softib_alloc_pd(axon_dev_context_t *ctx, axon_dev_pd_t **pd_p);
int  softib_dealloc_pd(axon_dev_pd_t *pd);
int  softib_reg_mr(axon_dev_pd_t *pd, void *addr, size_t length, int access,
                   axon_dev_mr_t **mr_p);
int  softib_dereg_mr(axon_dev_mr_t *mr);
uint64_t softib_mr_reg_count(void);   /* successful reg_mr calls of this process */
uint64_t softib_umr_key_count(void);  /* indirect keys this process created */
uint64_t softib_umr_fill_count(void); /* UMR fills this process's QPs executed */
int  softib_create_comp_channel(axon_dev_context_t *ctx, axon_dev_comp_channel_t **ch_p);
int  softib_destroy_comp_channel(axon_dev_comp_channel_t *ch);
int  softib_get_cq_event(axon_dev_comp_channel_t *ch, axon_dev_cq_t **cq_p,
                         void **cq_context_p);
void softib_ack_cq_events(axon_dev_cq_t *cq, unsigned int nevents);
int  softib_create_cq(axon_dev_context_t *ctx, int cqe, void *cq_context,
                      axon_dev_comp_channel_t *channel, int comp_vector, axon_dev_cq_t **cq_p);
int  softib_modify_cq(axon_dev_cq_t *cq, uint32_t cq_cap_flags, int attr_mask);
int  softib_create_cq_ex(axon_dev_context_t *ctx, int cqe, void *cq_context,
                         axon_dev_comp_channel_t *channel, int comp_vector, uint32_t flags,
                         axon_dev_cq_t **cq_p);
int  softib_destroy_cq(axon_dev_cq_t *cq);
int  softib_poll_cq(axon_dev_cq_t *cq, int num_entries, axon_dev_wc_t *wc);
int  softib_req_notify_cq(axon_dev_cq_t *cq, int solicited_only);
int  softib_create_srq(axon_dev_pd_t *pd, axon_dev_srq_init_attr_t *init_attr,
                       axon_dev_srq_t **srq_p);
int  softib_modify_srq(axon_dev_srq_t *srq, axon_dev_srq_attr_t *attr, int attr_mask);
int  softib_query_srq(axon_dev_srq_t *srq, axon_dev_srq_attr_t *attr);
int  softib_destroy_srq(axon_dev_srq_t *srq);
int  softib_post_srq_recv(axon_dev_srq_t *srq, axon_dev_recv_wr_t *wr,
                          axon_dev_recv_wr_t **bad_wr);
int  softib_create_qp(axon_dev_pd_t *pd, axon_dev_qp_init_attr_t *init_attr,
                      axon_dev_qp_t **qp_p);
int  softib_modify_qp(axon_dev_qp_t *qp, axon_dev_qp_attr_t *attr, int attr_mask);
int  softib_query_qp(axon_dev_qp_t *qp, axon_dev_qp_attr_t *attr, int attr_mask,
                     axon_dev_qp_init_attr_t *init_attr);
int  softib_destroy_qp(axon_dev_qp_t *qp);
int  softib_post_send(axon_dev_qp_t *qp, axon_dev_send_wr_t *wr, axon_dev_send_wr_t **bad_wr);
int  softib_post_recv(axon_dev_qp_t *qp, axon_dev_recv_wr_t *wr, axon_dev_recv_wr_t **bad_wr);
int  softib_post_task(axon_dev_context_t *ctx, axon_dev_task_t *task,
                      axon_dev_task_t **bad_task);
int  softib_create_ah(axon_dev_pd_t *pd, axon_dev_ah_attr_t *attr, axon_dev_ah_t **ah_p);
int  softib_destroy_ah(axon_dev_ah_t *ah);

/* UD multicast (softib_mcast.c): groups, a QP's leave at its destruction, the
 * fan-out of a packet built in dev->tx_buf (as softib_send_pkt_pay takes it) */
int  softib_attach_mcast(axon_dev_qp_t *qp, const axon_dev_gid_t *gid, uint16_t lid);
int  softib_detach_mcast(axon_dev_qp_t *qp, const axon_dev_gid_t *gid, uint16_t lid);
int  softib_gid_is_mcast(const axon_dev_gid_t *gid);
void softib_mcast_qp_destroyed(softib_dev_t *dev, softib_qp_t *qp);
void softib_mcast_close(softib_dev_t *dev);
int  softib_mcast_send(softib_dev_t *dev, softib_qp_t *qp, const axon_dev_gid_t *mgid,
                       size_t hlen, const void *pay, size_t paylen);
int  softib_create_dct(axon_dev_context_t *ctx, axon_dev_dct_init_attr_t *attr,
                       axon_dev_dct_t **dct_p);
int  softib_destroy_dct(axon_dev_dct_t *dct);
int  softib_query_dct(axon_dev_dct_t *dct, axon_dev_dct_attr_t *attr);
int  softib_arm_dct(axon_dev_dct_t *dct, uint32_t comp_mask);
int  softib_create_mr(axon_dev_pd_t *pd, axon_dev_mr_init_attr_t *attr, axon_dev_mr_t **mr_p);
int  softib_query_mkey(axon_dev_mr_t *mr, axon_dev_mkey_attr_t *attr);
int  softib_alloc_mkey_list(axon_dev_pd_t *pd, uint32_t max_klm_list_size,
                            axon_dev_mkey_list_t **list_p);
int  softib_dealloc_mkey_list(axon_dev_mkey_list_t *list);

#endif
