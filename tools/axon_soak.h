/*
 * axon_soak: a soak test on the public API. A launcher process forks N ranks
 * (one worker each) and talks to each over a socketpair (the control
 * channel: addresses, membership views, the end of the run); the ranks run
 * mixed tag, RMA, atomic and collective traffic with each other and verify
 * every byte, while the launcher SIGKILLs a rank now and then and starts a
 * new incarnation of it, which the others must see fail and reconnect to.
 */
#ifndef AXON_SOAK_H
#define AXON_SOAK_H

#include <stddef.h>
#include <stdint.h>

#define SOAK_MAX_RANKS 16

typedef struct {
    unsigned ranks;
    double   time_sec;       /* traffic time; draining and checks come after */
    double   kill_interval;  /* 0: no kills */
    double   warmup_sec;     /* RSS is measured from here on */
    double   rss_growth_pct; /* allowed growth of a rank's RSS after warm-up, percent ... */
    double   rss_growth_mib; /* ... or MiB, whichever is larger */
    double   req_bound_sec;  /* a request in flight longer than this is lost */
    double   detect_bound_sec; /* a killed peer must be reported within this */
    unsigned seed;
    int      verbose;
} soak_params_t;

/* ---------------------------------------------------------------- control channel */

typedef enum {
    SOAK_CTL_JOIN = 1,  /* rank -> launcher: its worker address, key and window */
    SOAK_CTL_PEER,      /* launcher -> rank: a peer's JOIN, for view `view` */
    SOAK_CTL_CONNECTED, /* rank -> launcher: it reaches every peer of view `view` */
    SOAK_CTL_GO,        /* launcher -> rank: everyone reaches everyone in `view`: make a team */
    SOAK_CTL_STOP,      /* launcher -> rank: start no more traffic, finish what is in flight */
    SOAK_CTL_DRAINED,   /* rank -> launcher: nothing in flight; payload soak_drained_t */
    SOAK_CTL_EXPECT,    /* launcher -> rank: what to receive before the end; soak_expect_t */
    SOAK_CTL_FINAL,     /* rank -> launcher: its counters and verdict; soak_stats_t */
    SOAK_CTL_EXIT,      /* launcher -> rank: everyone is done, close down */
} soak_ctl_type_t;

typedef struct {
    uint32_t type;
    uint32_t rank;
    uint32_t inc;   /* the rank's incarnation (0 for the first, +1 per restart) */
    uint32_t view;
    uint32_t length; /* payload bytes that follow */
} soak_ctl_hdr_t;

/* JOIN and PEER payload: this, then the address and the packed key. */
typedef struct {
    uint64_t window;      /* address of the rank's mapped window */
    uint32_t address_length;
    uint32_t rkey_length;
} soak_peer_info_t;

typedef struct {
    uint64_t sent_ok[SOAK_MAX_RANKS];  /* tag messages to each peer's current incarnation */
    uint64_t coll_iters;               /* collectives completed or posted on the last team */
} soak_drained_t;

typedef struct {
    uint64_t expect[SOAK_MAX_RANKS];   /* tag messages from each peer's current incarnation */
    uint32_t final_inc[SOAK_MAX_RANKS];
    uint64_t coll_iters;               /* collectives every member completes on its team */
} soak_expect_t;

typedef struct {
    uint64_t msgs, bytes, stale_msgs, layout_msgs, sync_msgs;
    uint64_t rma_puts, rma_gets, rma_bytes, atomics;
    uint64_t colls;
    uint64_t req_errors;   /* requests that ended with an error (toward killed peers) */
    uint64_t peer_failures; /* error callbacks */
    uint64_t failures;     /* checks that failed */
    uint64_t rss_warm, rss_last, rss_max, rss_samples; /* bytes */
} soak_stats_t;

/* 0, or -1 (printed). The launcher's and a rank's ends. */
int  soak_ctl_send(int fd, const soak_ctl_hdr_t *hdr, const void *payload);
/* Reads one message: 0, or -1 at EOF/error; *payload_p malloc'd (or NULL). */
int  soak_ctl_recv(int fd, soak_ctl_hdr_t *hdr, void **payload_p);
double soak_now(void);

int  soak_launch(const soak_params_t *params);
/* A rank's life; returns its exit status. */
int  soak_rank_main(const soak_params_t *params, int fd, unsigned rank, unsigned inc);

#endif
