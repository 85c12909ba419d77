/*
 * Tag protocols on the wire: the active message ids and their headers.
 *
 * Every message that is matched starts with M = [tag, sender, imm, flags]: the
 * sender's worker id (for receives from one sender) and the immediate data.
 * Eager (below the rendezvous threshold):
 *   EAGER_ONLY       [M][payload]                                     whole message
 *   EAGER_SYNC_ONLY  [M, sreq][payload]                               whole, acked when matched
 *   EAGER_FIRST      [M, total, msg_id, sreq][payload]                first fragment
 *   EAGER_MIDDLE     [msg_id, sender, offset][payload]                later fragments
 *   SYNC_ACK         [sreq, from]                                     receiver → sender
 * Rendezvous:
 *   RNDV_RTS   [M, length, sreq, address, key][rail keys]
 *                                                     sender → receiver, on the AM lane;
 *                                                     rail keys: the buffer's key on each
 *                                                     of the sender's rails (rndv_rails.c)
 *   RNDV_ATS   [sreq, from, status]                   receiver read the data itself (get)
 *   RNDV_RTR   [sreq, from, rreq, length, offset, put_address]
 *                                                     receiver asks the sender to send
 *                                                     [offset, length), or to put it at
 *                                                     put_address (split: the receiver gets
 *                                                     [0, offset) meanwhile)
 *   RNDV_DATA  [rreq, from, offset, length][payload]  sender → receiver, bulk lane(s)
 *   RNDV_PUT_DONE [rreq, from, offset, length, status] sender put its part
 *
 * A message is matched when its first fragment or RTS arrives; the AM lane
 * delivers those in send order, so order holds across protocols. sreq and
 * rreq are request ids, looked up in the owner's id map (never pointers).
 */
#ifndef AXON_TAG_PROTO_H
#define AXON_TAG_PROTO_H

#include <stdint.h>
#include "request.h"

enum {
    AXON_AM_TAG_EAGER_ONLY      = 1,
    AXON_AM_TAG_EAGER_FIRST     = 2,
    AXON_AM_TAG_EAGER_MIDDLE    = 3,
    AXON_AM_TAG_EAGER_SYNC_ONLY = 4,
    AXON_AM_TAG_SYNC_ACK        = 5,
    AXON_AM_RNDV_RTS            = 6,
    AXON_AM_RNDV_ATS            = 7,
    AXON_AM_RNDV_RTR            = 8,
    AXON_AM_RNDV_DATA           = 9,
    /* 10 is the core's AXON_AM_WIREUP_HELLO (axon_int.h) */
    AXON_AM_RNDV_PUT_DONE       = 11,
};

/* What a receiver matches on and reports (axon_tag_recv_info_t). */
typedef struct axon_tag_match_hdr {
    axon_tag_t tag;
    uint64_t   sender_uuid;
    uint32_t   imm_data;
    uint32_t   flags;        /* AXON_TAG_INFO_*, and the tag space in the top bits */
} axon_tag_match_hdr_t;

/* The tag space (AXON_TAG_SPACE_*) in a match header's flags: never reported to the user. */
#define AXON_TAG_SPACE_SHIFT 31

static inline unsigned axon_tag_space_of(const axon_tag_match_hdr_t *m)
{
    return (m->flags >> AXON_TAG_SPACE_SHIFT) & 1u;
}

/* What a receive reports about the message it got. */
static inline void axon_tag_info_set(axon_tag_recv_info_t *info, const axon_tag_match_hdr_t *m,
                                     size_t length)
{
    info->sender_tag = m->tag;
    info->length     = length;
    info->sender_id  = m->sender_uuid;
    info->imm_data   = m->imm_data;
    info->flags      = m->flags & AXON_TAG_INFO_IMM_DATA;
}

/* The sender's side: what a send request puts in front of its message. */
static inline void axon_tag_match_hdr_pack(axon_tag_match_hdr_t *m, axon_request_h req)
{
    m->tag         = req->send.tag;
    m->sender_uuid = req->worker->uuid;
    m->imm_data    = req->send.imm_data;
    m->flags       = req->send.info_flags;
}

typedef struct axon_eager_hdr {
    axon_tag_match_hdr_t m;
} axon_eager_hdr_t;

typedef struct axon_eager_sync_hdr {
    axon_tag_match_hdr_t m;
    uint64_t             sreq_id;
} axon_eager_sync_hdr_t;

typedef struct axon_eager_first_hdr {
    axon_tag_match_hdr_t m;
    uint64_t             total_length;
    uint64_t             msg_id;
    uint64_t             sreq_id;      /* 0 unless a synchronous send */
} axon_eager_first_hdr_t;

typedef struct axon_eager_middle_hdr {
    uint64_t msg_id;
    uint64_t sender_uuid;
    uint64_t offset;
} axon_eager_middle_hdr_t;

/* Replies carry the replier's worker id: request ids are looked up per peer. */
typedef struct axon_sync_ack_hdr {
    uint64_t sreq_id;
    uint64_t from_uuid;
} axon_sync_ack_hdr_t;

/* Largest packed memory key an RTS carries; a lane whose keys are longer is not used to get. */
#define AXON_RNDV_RKEY_MAX AXON_MD_RKEY_MAX

typedef struct axon_rndv_rts_hdr {
    axon_tag_match_hdr_t m;
    uint64_t   length;
    uint64_t   sreq_id;
    uint64_t   address;     /* sender's buffer, for a get by the receiver */
    /* For lanes that reach peer memory through keys (AXON_CAP_NEED_MKEY):
     * the sender's buffer registered on its bulk lane, whose transport
     * rkey_tl names; rkey_len 0 when the buffer is not registered. */
    char       rkey_tl[AXON_TL_NAME_MAX];
    uint32_t   rkey_len;
    uint32_t   flags;       /* AXON_RNDV_RTS_* */
    uint64_t   runs_count;  /* AXON_RNDV_RTS_RUNS: the iovecs at address */
    uint32_t   rail_keys;   /* axon_rndv_rail_key_t entries after the header */
    uint32_t   reserved;
    uint8_t    rkey[AXON_RNDV_RKEY_MAX];
} axon_rndv_rts_hdr_t;

/* After an RTS: the send buffer's key on one of the sender's rails, named by its device. */
typedef struct axon_rndv_rail_key {
    char       dev_name[AXON_DEV_NAME_MAX];
    uint32_t   len;
    uint32_t   reserved;
    uint8_t    rkey[AXON_RNDV_RKEY_MAX];
} axon_rndv_rail_key_t;

/* An RTS with its rail keys, as it travels and as an unexpected one waits. */
static inline size_t axon_rndv_rts_size(const axon_rndv_rts_hdr_t *rts)
{
    return sizeof(*rts) + rts->rail_keys * sizeof(axon_rndv_rail_key_t);
}

/* recv.rndv_split: who moves a rendezvous's bytes besides the receiver's get */
enum {
    AXON_RNDV_SPLIT_NONE = 0,
    AXON_RNDV_SPLIT_HALF = 1,   /* the receiver reads the first half, the sender puts the rest */
    AXON_RNDV_SPLIT_RAILS = 2,  /* the receiver reads a stripe on each rail (rndv_rails.c) */
};

enum {
    /* The sender's data is not one range (a layout): the receiver asks for it (RTR). */
    AXON_RNDV_RTS_NO_GET = 1u << 0,
    /* The sender's data is a layout that rkey covers as one range (rc's UMR):
     * a get must go through that key, never by address alone. */
    AXON_RNDV_RTS_KEY_ONLY = 1u << 1,
    /* The sender's data is a layout whose runs (runs_count iovecs of its
     * memory) are at address, lent until the ATS: a lane that moves between
     * pieces on both sides (shm) reads them, then the data (rndv_runs.c). */
    AXON_RNDV_RTS_RUNS = 1u << 2,
};

typedef struct axon_rndv_ats_hdr {
    uint64_t sreq_id;
    uint64_t from_uuid;
    int64_t  status;
} axon_rndv_ats_hdr_t;

typedef struct axon_rndv_rtr_hdr {
    uint64_t sreq_id;
    uint64_t from_uuid;
    uint64_t rreq_id;
    uint64_t length;        /* bytes the receiver takes (less if truncating) */
    uint64_t offset;        /* the sender moves [offset, length); the receiver gets the rest */
    uint64_t put_address;   /* 0: as RNDV_DATA messages; else the receive buffer, to put into */
    uint64_t put_runs;      /* >0: put_address holds this many iovecs, where [offset,
                             * length) goes (a receiving layout's runs, rndv_runs.c) */
} axon_rndv_rtr_hdr_t;

typedef struct axon_rndv_put_done_hdr {
    uint64_t rreq_id;
    uint64_t from_uuid;
    uint64_t offset;
    uint64_t length;
    int64_t  status;        /* of the put: on an error the receiver fails the message */
} axon_rndv_put_done_hdr_t;

typedef struct axon_rndv_data_hdr {
    uint64_t rreq_id;
    uint64_t from_uuid;
    uint64_t offset;
    uint64_t length;    /* payload bytes, checked against what the transport delivers */
} axon_rndv_data_hdr_t;

/* The tag protocol's hooks in the core (tag_recv.c). */
extern const axon_proto_ops_t axon_tag_proto;
/* Its part of a new endpoint: eager limits and the rendezvous thresholds (tag_send.c). */
void          axon_tag_ep_init(axon_ep_h ep);
/* Steps of a rendezvous send (req->step): is a request one, and in which stage. */
axon_status_t axon_tag_step_rndv_rts(axon_request_h req);
axon_status_t axon_tag_step_rndv_bcopy(axon_request_h req);
axon_status_t axon_tag_step_rndv_zcopy(axon_request_h req);
/* Striped over the endpoint's rails (rndv_rails.c): 1 when an RTR's data goes that way
 * (req->step set), 0 when it is one lane's. */
int           axon_rndv_rails_start(axon_request_h req);
axon_status_t axon_tag_step_rndv_rails(axon_request_h req);
/* A send registered on its bulk lane's domain: register on the other rails' too. */
void          axon_rndv_rails_register(axon_request_h req);
/* The RTS's rail keys (AXON_REQUEST_RAIL_MEMH): how many were packed into keys. */
uint32_t      axon_rndv_rails_pack_keys(axon_request_h req, axon_rndv_rail_key_t *keys);
/* A receive matched an RTS with rail keys: read the stripes on every rail.
 * AXON_OK when started (or failed and completed), else the caller gets one way. */
axon_status_t axon_rndv_rails_get(axon_request_h req, axon_ep_h ep,
                                  const axon_rndv_rts_hdr_t *rts, size_t want);
/* The tag protocol's progress: post the stripes of receives whose rails were full. */
unsigned      axon_rndv_rails_progress(axon_worker_h worker);
/* A peer failed: its receives' stripes not yet posted never will be. */
void          axon_rndv_rails_peer_failed(axon_worker_h worker, uint64_t peer_uuid,
                                          axon_status_t status);

/* Rendezvous (rndv.c) */
/* An endpoint's rendezvous threshold, and from what size the receiver gets the data. */
void          axon_rndv_ep_init(axon_ep_h ep);
/* A receive matched an RTS: fetch the data (get) or ask for it (RTR). */
void          axon_rndv_recv_start(axon_request_h req, const axon_rndv_rts_hdr_t *rts);
/* Register a rendezvous send's buffer when its bulk lane gets through keys (best effort). */
void          axon_rndv_send_register(axon_request_h req);
/* The RTS of a rendezvous send, with the packed key of its registration if any. */
void          axon_rndv_rts_pack(axon_request_h req, axon_rndv_rts_hdr_t *rts);
/* Where a split message's halves meet: cache-line aligned, so no line has two writers. */
static inline size_t axon_rndv_split_offset(size_t length)
{
    return (length / 2) & ~(size_t)63;
}
/* A rendezvous receive's data is in (or failed): ATS to the sender, and complete. */
void          axon_rndv_recv_got(axon_request_h req, axon_status_t status);
/*
 * Ask the sender of req's rendezvous for [offset, length) with an RTR: as
 * RNDV_DATA (put_address 0), or put at put_address (put_runs > 0: a layout's
 * runs listed there). req goes into the id map for the answer, and out again
 * when the RTR could not be sent, whose status is returned.
 */
axon_status_t axon_rndv_send_rtr(axon_request_h req, axon_ep_h ep, size_t length, size_t offset,
                                 uint64_t put_address, uint64_t put_runs);
/* Does the receiver read a rendezvous of want bytes from ep's peer by a get (where the lane can)? */
int           axon_rndv_get_pays(axon_ep_h ep, size_t want);
/* Does it split the copy with the sender (RNDV_SPLIT_THRESH; not on a crowded host)? */
int           axon_rndv_split_pays(axon_worker_h worker, size_t want);
/* length more bytes of a split rendezvous receive are in (or failed). */
void          axon_rndv_recv_part_done(axon_request_h req, size_t length, axon_status_t status);

/* Rendezvous of layouts by lent runs (rndv_runs.c), over lanes with ep_get_zcopy_riov. */
/* A layout send's runs for the receiver to read, when its lane can (best effort). */
void          axon_rndv_runs_lend(axon_request_h req);
/* A receive matched an RTS where a layout is on either side: AXON_OK when started or failed. */
axon_status_t axon_rndv_runs_recv(axon_request_h req, axon_ep_h ep,
                                  const axon_rndv_rts_hdr_t *rts, size_t want);
/* An RTR asks the sender to put [offset, length) with runs on either side: AXON_OK when done. */
axon_status_t axon_rndv_runs_put(axon_request_h req, const axon_rndv_rtr_hdr_t *rtr,
                                 axon_status_t *status_p);
void         *axon_rndv_rx_dest(void *arg, uint8_t am_id, const void *hdr, size_t hdr_len,
                                size_t data_length);
void          axon_rndv_register_handlers(axon_worker_h worker);

/* A send's transport operations are all done (the last with status): finish it
 * if its endpoint went away or its peer failed meanwhile. 1 when finished here. */
int           axon_tag_send_tl_done(axon_request_h req, axon_status_t status);
/* A send that waited for its peer is done (ack, ATS, all data out, or failure). */
void          axon_send_remote_done(axon_request_h req, axon_status_t status);
/* The receiver matched a synchronous send (its SYNC_ACK). */
void          axon_tag_sync_acked(axon_request_h req);
/* One of the events a rendezvous send waits for (ATS, own data part) happened. */
void          axon_rndv_send_part_done(axon_request_h req, axon_status_t status);

#endif
