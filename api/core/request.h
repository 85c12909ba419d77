/* Requests: state of one operation in flight, from the worker's pool. */
#ifndef AXON_REQUEST_H
#define AXON_REQUEST_H

#include <stdlib.h>
#include "axon_int.h"
#include "amo_cpu.h"
#include "layout.h"

enum {
    AXON_REQUEST_COMPLETED   = 1u << 0,
    AXON_REQUEST_RELEASED    = 1u << 1,  /* the user called axon_request_free */
    AXON_REQUEST_RECV        = 1u << 2,  /* a receive: the recv callback type applies */
    AXON_REQUEST_IN_CALLBACK = 1u << 3,  /* free() inside the callback only marks it */
    AXON_REQUEST_POSTED      = 1u << 4,  /* receive in the expected queue, not matched */
    AXON_REQUEST_INTERNAL    = 1u << 5,  /* the library's own (control message) */
    AXON_REQUEST_SYNC        = 1u << 6,  /* synchronous send: done when matched */
    AXON_REQUEST_IN_ID_MAP   = 1u << 7,
    AXON_REQUEST_TL_BUSY     = 1u << 8,  /* a transport completion (tl_comp) is due */
    AXON_REQUEST_ORPHANED    = 1u << 9,  /* its endpoint was destroyed while TL_BUSY */
    AXON_REQUEST_RNDV_MEMH   = 1u << 10, /* send.rndv_memh to deregister at completion */
    AXON_REQUEST_OWN_BUFFER  = 1u << 11, /* send.buffer is the library's copy (AXON_REQ_FLAG_INJECT) */
    AXON_REQUEST_LAYOUT      = 1u << 12, /* the data is a layout over the buffer: walk the cursor */
    AXON_REQUEST_RNDV_RUNS   = 1u << 13, /* send/recv.rndv_runs: a layout's runs lent to the peer */
    AXON_REQUEST_RAIL_MEMH   = 1u << 14, /* rails.memh[1..]: registrations to release */
    AXON_REQUEST_SYNC_ACKED  = 1u << 15, /* sync send matched while fragments still wait to leave */
    AXON_REQUEST_RMA_RAILS   = 1u << 16, /* a put/get striped over rails (rma_rails.c) */
};

/*
 * One turn of a request on its endpoint's pending queue, set by the protocol
 * that queued it (the queue itself knows no protocol). Returns AXON_OK or an
 * error: finished, the queue completes it; AXON_ERR_NO_RESOURCE: the
 * transport is full, it stays first in the queue; AXON_INPROGRESS: all of it
 * left, it completes later by itself (the peer's answer, a transport
 * completion).
 */
typedef axon_status_t (*axon_request_step_t)(axon_request_h req);

/* Room for the largest reply a control message carries (AMO_REPLY of 32 bytes). */
#define AXON_CTRL_HDR_MAX 64

/*
 * A transport completion of one stripe of a rendezvous striped over rails
 * (rails.h); of a striped put/get (rma_rails.c): its next byte, where its
 * stripe ends, the piece in flight, and the owner's key on that rail.
 */
typedef struct axon_rail_comp {
    axon_tl_completion_t super;
    axon_request_h       req;
    size_t               offset;    /* of the stripe in the message */
    size_t               length;
    size_t               end;
    const void          *key;
} axon_rail_comp_t;

/*
 * A rendezvous striped over its endpoint's rails (rndv_rails.c), on either
 * side: the stripes not yet handed to a transport (bit i: stripe i), those
 * whose completion is due, stripes rail 0 took over from a rail that
 * refused them. The sender's buffer registered on the rails' domains
 * (AXON_REQUEST_RAIL_MEMH; [0] unused: send.rndv_memh); the receiver's
 * keys of the sender's buffer, one per rail, kept until every stripe is
 * posted (a full send queue posts later, from the tag protocol's progress).
 */
typedef struct axon_request_rails {
    uint8_t              todo;
    uint8_t              busy;
    uint8_t              moved;
    uint8_t              count;
    axon_rail_comp_t     comp[AXON_RNDV_RAILS_MAX];
    union {
        struct {
            void        *memh[AXON_RNDV_RAILS_MAX];
            axon_md_t   *md[AXON_RNDV_RAILS_MAX];
        } send;
        struct {
            uint64_t     address;
            uint8_t      rkey[AXON_RNDV_RAILS_MAX][AXON_MD_RKEY_MAX];
        } recv;
    };
} axon_request_rails_t;

struct axon_request {
    uint32_t          flags;
    axon_status_t     status;
    axon_worker_h     worker;
    void             *user_data;
    union {
        axon_send_callback_t     send;
        axon_tag_recv_callback_t recv;
    } cb;
    axon_list_link_t  list;      /* ep pending queue or worker deferred list */
    /* While waiting for a peer (ack, RTR, rendezvous data) */
    axon_list_link_t  id_link;
    uint64_t          id;
    uint64_t          peer_uuid;
    axon_tl_completion_t tl_comp;
    axon_request_step_t step;    /* its pending-queue turn (queued requests) */
    union {
        struct {
            axon_ep_h          ep;
            const uint8_t     *buffer;
            size_t             length;
            axon_tag_t         tag;
            uint32_t           imm_data;    /* with AXON_TAG_INFO_IMM_DATA in info_flags */
            uint32_t           info_flags;
            size_t             offset;      /* bytes already sent */
            uint64_t           msg_id;
            size_t             rndv_length; /* bytes the receiver asked for */
            uint64_t           rreq_id;
            /* Events the rendezvous still waits for (ATS, own part) and the first error */
            uint8_t            rndv_parts;
            axon_status_t      rndv_status;
            /* The buffer registered for the receiver's get (AXON_REQUEST_RNDV_MEMH) */
            void              *rndv_memh;
            axon_md_t         *rndv_memh_md;
            /* AXON_REQUEST_RNDV_RUNS: the layout's runs, for the receiver to read (rndv_runs.c) */
            struct iovec      *rndv_runs;
            size_t             rndv_runs_count;
            axon_layout_cursor_t cursor;    /* AXON_REQUEST_LAYOUT: buffer is its base */
        } send;
        struct {
            axon_tm_recv_t       tm;
            uint8_t             *buffer;
            size_t               length;
            size_t               received;  /* bytes of the message arrived so far */
            size_t               expected;  /* bytes that will arrive (rendezvous) */
            uint64_t             sreq_id;   /* the sender's request (rendezvous) */
            axon_status_t        rndv_status; /* first error of a split rendezvous */
            uint8_t              rndv_split;  /* AXON_RNDV_SPLIT_*: ATS when all arrived */
            uint8_t              space;       /* AXON_TAG_SPACE_*: whose matching queues */
            /* AXON_REQUEST_RNDV_RUNS: run lists of a split, one lent to the sender */
            struct iovec        *rndv_runs;
            axon_tag_recv_info_t info;
            axon_layout_cursor_t cursor;      /* AXON_REQUEST_LAYOUT: buffer is its base */
        } recv;
        struct {
            axon_ep_h          ep;          /* same place as send.ep */
            size_t             hdr_len;
            uint8_t            am_id;
            uint8_t            hdr[AXON_CTRL_HDR_MAX];
        } ctrl;
        struct {
            axon_ep_h          ep;          /* same place as send.ep */
            const struct axon_rkey *rkey;   /* must outlive the operation */
            uint8_t            kind;        /* axon_rma_kind_t (rma_proto.h) */
            uint8_t            mode;        /* axon_rma_path_t it moves by now */
            uint8_t            unordered;   /* counted in ep->rma.unordered */
            uint8_t            detached;    /* off its endpoint (failure, close): finish alone */
            uint8_t            zc_am;       /* the transport op in flight is an am_zcopy */
            axon_status_t      status;      /* first error */
            uint64_t           seq;         /* place on ep->rma.ops */
            uint64_t           wait_seq;    /* in waitq: runs once ops up to this are done */
            axon_list_link_t   op_link;     /* ep->rma.ops, or ep->rma.flushes */
            uint64_t           token;
            uint64_t           remote_addr;
            uint64_t           rreq_id;     /* GET_REPLY stream: the initiator's request */
            /* Progress in units (bytes; one for an atomic): issued, and complete at the target */
            size_t             length;
            size_t             offset;
            size_t             done;
            size_t             zc_len;      /* bytes of the transport op in flight */
            uint64_t           iov_busy_at; /* worker->iface_events when the lane's
                                             * batch was busy (+1: never) */
            union {
                struct {
                    uint8_t          *buffer;    /* contiguous, or the layout's base */
                    /* AXON_REQUEST_LAYOUT: the cursor walks the caller's layout, or
                     * own_layout (an iov list of axon_put/get_iov_nb) */
                    axon_layout_cursor_t cursor;
                    axon_layout_t     own_layout;
                } data;
                struct {
                    axon_amo_args_t   args;
                    void             *result;    /* NULL: not fetching */
                    /* DEVICE: what the device wrote; XOR as a CSWAP loop (amo.c) */
                    uint64_t          dev_result[AXON_AMO_MAX_WORDS];
                    uint64_t          xor_value;
                    uint8_t           xor_loop;
                } amo;
                struct {
                    axon_request_h    parent;    /* FLUSH for a WORKER_FLUSH */
                    unsigned          children;  /* WORKER_FLUSH: FLUSHes still waiting */
                } flush;
            };
        } rma;
    };
    /* A rendezvous striped over rails, either side: last, off the small messages' lines */
    axon_request_rails_t rails;
};

axon_request_h axon_request_get(axon_worker_h worker, const axon_request_param_t *param,
                                uint32_t flags);
/* Mark complete; the callback runs now inside progress, else at the next progress. */
void           axon_request_complete(axon_request_h req, axon_status_t status);
/* Run callbacks of requests completed outside progress. */
unsigned       axon_request_dispatch_deferred(axon_worker_h worker);
/* Return a request that never left the library (completed at once, no NO_IMM_CMPL). */
void           axon_request_put(axon_request_h req);
/*
 * An operation that finished inside its call with status: AXON_OK without
 * NO_IMM_CMPL and errors return at once (the request goes back); otherwise
 * the caller gets the completed request (AXON_INPROGRESS).
 */
axon_status_t  axon_request_finish_now(axon_request_h req, axon_status_t status, uint32_t flags,
                                       axon_request_h *req_p);

/* Release the registrations of a send striped over rails (rails.c). */
void axon_request_release_rails(axon_request_h req);

/*
 * Run lists of a rendezvous (api/tag/rndv_runs.c): up to AXON_REQUEST_RUNS_POOLED
 * iovecs from the worker's pool, so a message's lists cost no malloc; longer ones
 * (rare: runs average at least AXON_RNDV_RUNS_MIN bytes) from malloc. NULL without memory.
 */
#define AXON_REQUEST_RUNS_POOLED 1023
axon_status_t axon_request_runs_init(axon_worker_h worker);
struct iovec *axon_request_runs_get(axon_worker_h worker, size_t count);
void          axon_request_runs_put(axon_worker_h worker, struct iovec *runs);

/*
 * A rendezvous's registration and lent runs end with the request: the
 * buffer is the user's again.
 */
static inline void axon_request_release_rndv(axon_request_h req)
{
    if (req->flags & AXON_REQUEST_RNDV_MEMH) {
        axon_md_t *md = req->send.rndv_memh_md;

        req->flags &= ~AXON_REQUEST_RNDV_MEMH;
        md->ops->mem_dereg(md, req->send.rndv_memh);
    }
    if (req->flags & AXON_REQUEST_RAIL_MEMH) {
        axon_request_release_rails(req);
    }
    if (req->flags & AXON_REQUEST_RNDV_RUNS) {
        req->flags &= ~AXON_REQUEST_RNDV_RUNS;
        axon_request_runs_put(req->worker, (req->flags & AXON_REQUEST_RECV) ?
                                           req->recv.rndv_runs : req->send.rndv_runs);
    }
}

/* Id map: requests a peer refers to by id (never by pointer). */
void           axon_request_id_add(axon_request_h req, uint64_t peer_uuid);
void           axon_request_id_del(axon_request_h req);
axon_request_h axon_request_id_find(axon_worker_h worker, uint64_t id, uint64_t peer_uuid);

/* A send the peer was to answer (sync, rendezvous) ends without the answer: drop its id. */
static inline void axon_request_send_untrack(axon_request_h req)
{
    if (req->flags & AXON_REQUEST_IN_ID_MAP) {
        axon_request_id_del(req);
        --req->send.ep->outstanding;
    }
}

#endif
