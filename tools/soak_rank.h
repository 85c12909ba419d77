/*
 * One axon_soak rank: its peers (one per other rank, reconnected when the
 * rank is restarted), its requests (every one tracked by a slot that its
 * callback marks done exactly once), its traffic and its team.
 */
#ifndef AXON_SOAK_RANK_H
#define AXON_SOAK_RANK_H

#include "axon.h"
#include "axon_soak.h"

#define SOAK_MSG_MAX      (256 * 1024)   /* largest tag message: rendezvous on every lane */
#define SOAK_MSG_HDR      32
#define SOAK_LAYOUT_BLOCK 256            /* layout sends: blocks of this, SOAK_LAYOUT_STRIDE apart */
#define SOAK_LAYOUT_STRIDE 320
#define SOAK_SEND_DEPTH   4              /* tag sends in flight per peer */
#define SOAK_RECVS        16             /* receives posted (any sender) */
#define SOAK_RMA_BLOCK    (64 * 1024)    /* each writer's block in a peer's window */
#define SOAK_TAG          ((axon_tag_t)0x534f414b00000001ull)

typedef struct soak_rank soak_rank_t;

/* A request's slot: set busy when issued, done by its callback, which must run once. */
typedef struct {
    soak_rank_t         *rank;
    int                  busy, done;
    axon_status_t        status;
    axon_tag_recv_info_t info;
    double               issued;
} soak_req_t;

typedef struct {
    soak_req_t     req;
    unsigned       dest_inc;
    size_t         length;
    char          *buffer;   /* packed message, or the strided source of a layout send */
    axon_layout_t  layout;
} soak_send_t;

typedef enum {
    SOAK_RMA_IDLE, SOAK_RMA_PUT, SOAK_RMA_FLUSH, SOAK_RMA_GET, SOAK_RMA_RESET, SOAK_RMA_ATOMIC,
} soak_rma_step_t;

/* put a pattern into our block of the peer's window, flush, get it back, fetch-and-add our
 * counter there (which only we touch; the first chain with an incarnation swaps it to 0, as
 * our previous incarnation left it anywhere): one operation at a time per peer */
typedef struct {
    soak_rma_step_t step;
    soak_req_t      req;
    uint64_t        seq, adds, one, fetched;
    int             counter_reset;   /* the swap to 0 was done */
    size_t          length;
    char           *local, *back;
    axon_iov_t      iov[2];
} soak_rma_t;

typedef enum {
    SOAK_PEER_NONE,   /* never reached, or closed after a failure */
    SOAK_PEER_LIVE,
    SOAK_PEER_FAILED, /* its error callback ran: close once its requests are done */
} soak_peer_state_t;

typedef struct {
    soak_rank_t      *rank;
    unsigned          index;
    soak_peer_state_t state;
    unsigned          inc;           /* the incarnation ep reaches */
    axon_ep_h         ep;
    axon_rkey_h       rkey;
    uint64_t          window;
    uint64_t          worker_id;
    /* a newer incarnation the launcher announced, to connect to once the old one failed */
    void             *pending;
    uint32_t          pending_length;
    unsigned          pending_inc;
    double            pending_since;
    /* sending */
    uint64_t          send_seq, sent_ok;
    soak_send_t       sends[SOAK_SEND_DEPTH];
    soak_rma_t        rma;
    int               err_inc_max;   /* latest incarnation a request to it failed on, or -1 */
    /* receiving from it: the latest incarnation seen */
    int               rx_inc;
    uint64_t          rx_next_seq;
    int               gap_inc_max;   /* latest incarnation whose messages skipped a number:
                                      * one cut short by its death, else lost */
} soak_peer_t;

typedef struct {
    soak_req_t     req;
    axon_request_h handle;  /* to cancel it at the end; gone once done */
    char          *buffer;
} soak_recv_t;

typedef struct {
    axon_team_h     team;
    int             ready, broken;
    unsigned        go_view;     /* the view the launcher said to make a team for */
    int             want;        /* a GO not yet acted on */
    axon_coll_h     coll[3];
    uint64_t        iters;       /* posted on this team */
    uint64_t        limit;       /* post no more than this many */
    int             running;
    double          posted;
    uint64_t        ar_src[16], ar_dst[16], bc[1024], ag_src[8], ag_dst[8 * SOAK_MAX_RANKS];
} soak_coll_t;

typedef enum {
    SOAK_RUN, SOAK_DRAIN, SOAK_FINAL, SOAK_EXIT,
} soak_phase_t;

struct soak_rank {
    const soak_params_t *params;
    int                  fd;
    unsigned             me, inc, view, connected_view;
    unsigned             nranks;
    soak_phase_t         phase;
    unsigned             rand_state;
    double               start;
    axon_context_h       context;
    axon_worker_h        worker;
    axon_mem_h           memh;
    char                *window;
    size_t               window_length;
    soak_peer_t          peers[SOAK_MAX_RANKS];
    soak_recv_t          recvs[SOAK_RECVS];
    unsigned             recv_head;    /* receives complete in the order posted */
    uint64_t             recv_err_ids[64];
    unsigned             recv_err_count;
    soak_coll_t          coll;
    soak_expect_t        expect;
    uint64_t             rx_count[SOAK_MAX_RANKS]; /* from each peer's latest incarnation */
    soak_stats_t         stats;
    double               next_sample, final_since;
    int                  drained_sent, final_sent;
};

/* A failed check: counted, and printed with the rank's name. */
void soak_rank_fail(soak_rank_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Request slots. */
void soak_req_issue(soak_req_t *slot);
/* What an initiating call returned: 1 in flight, 0 try again later (no resources), -1 failed. */
int  soak_req_started(soak_req_t *slot, soak_peer_t *peer, axon_status_t status);
void soak_send_cb(axon_request_h req, axon_status_t status, void *arg);
void soak_recv_cb(axon_request_h req, axon_status_t status, const axon_tag_recv_info_t *info,
                  void *arg);
/* A request ended with an error toward peer (incarnation inc). */
void soak_req_error(soak_peer_t *peer, unsigned inc, axon_status_t status);

/* Payloads: a pattern of the seed; 1 when buf holds it. */
void     soak_fill(void *buf, size_t length, uint64_t seed);
int      soak_check(const void *buf, size_t length, uint64_t seed, size_t *bad_offset);

/* soak_traffic.c: tag messages and RMA with one peer, the posted receives. */
int      soak_traffic_init(soak_rank_t *r);
void     soak_traffic_cleanup(soak_rank_t *r);
void     soak_peer_traffic(soak_rank_t *r, soak_peer_t *peer);
void     soak_recvs_post(soak_rank_t *r);
void     soak_recvs_handle(soak_rank_t *r);
int      soak_peer_busy(const soak_peer_t *peer);
void     soak_peer_reset_traffic(soak_peer_t *peer);

/* soak_coll.c: a team per view, persistent collectives on it. */
void     soak_coll_step(soak_rank_t *r);
void     soak_coll_destroy(soak_rank_t *r);

#endif
