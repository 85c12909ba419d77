/*
 * axon_perf's many-peer tests (ep_mem, tag_fanin, tag_fanout): one worker in
 * the client process (the hub) and one worker per peer in the server process,
 * all in one context per side, so the hub's transports have one endpoint per
 * peer the way a process talking to many others does.
 */
#ifndef AXON_PERF_PEERS_H
#define AXON_PERF_PEERS_H

#include "axon_perf.h"

#define PERF_PEERS_WAIT_SEC 30   /* one request (a peer's round trip, a window's message) */
#define PERF_PEERS_ALL_EVERY 64  /* focused waits progress every worker this often */

typedef struct {
    perf_role_t     role;
    int             fd;
    const char     *test;       /* names the test in messages */
    axon_context_h  context;
    unsigned        num_peers;
    unsigned        num_workers; /* client: 1; server: one per peer */
    int             focus;       /* a wait progresses the waited peer's worker, the others
                                  * only every PERF_PEERS_ALL_EVERY spins: ep_mem talks to
                                  * one peer at a time, and each call into softib walks every
                                  * QP of the process, so progressing 1000 idle workers per
                                  * spin made a 1000-peer run take O(peers^2) */
    axon_worker_h  *workers;
    axon_ep_h      *eps;        /* client: to each server worker; server: each back to the client */
    void          **addrs;      /* client: the server workers' addresses */
    size_t         *addr_lens;
    void           *peer_addr;  /* server: the client's */
    size_t          peer_len;
} perf_peers_t;

/* axon_init, the workers, and the addresses swapped over fd; 0 or -1 (printed).
 * perf_peers_close undoes what was done either way. */
int  perf_peers_open(perf_peers_t *m, const char *test, perf_role_t role, int fd,
                     unsigned num_peers);
/* The end of a run that went well: both sides are done with traffic before
 * either closes, and both flushed their endpoints before either worker goes. */
int  perf_peers_finish(perf_peers_t *m);
/* Endpoints still open are closed at once, then workers and context go. */
void perf_peers_close(perf_peers_t *m);

/* 0, or -1 with a line naming what failed for which peer. */
int  perf_peers_check(const perf_peers_t *m, axon_status_t status, const char *what,
                      unsigned peer);
void perf_peers_progress(perf_peers_t *m);
/* Progress every worker until req completes (NULL: done already), at most
 * PERF_PEERS_WAIT_SEC; frees it. info (or NULL): a receive's, filled then. */
int  perf_peers_wait(perf_peers_t *m, axon_request_h req, axon_tag_recv_info_t *info,
                     const char *what, unsigned peer);
/* Endpoint i: to the address of server worker i (client) or to the client from
 * worker i (server). */
int  perf_peers_connect(perf_peers_t *m, unsigned i);
/* Start a tagged send on endpoint i, retrying while the transport is full;
 * *req_p NULL if it completed at once. */
int  perf_peers_send(perf_peers_t *m, unsigned i, const void *buf, size_t length,
                     axon_tag_t tag, axon_request_h *req_p);
/* Post a receive on worker w (for peer i's message); *req_p NULL if it is there already. */
int  perf_peers_recv(perf_peers_t *m, unsigned w, unsigned i, void *buf, size_t length,
                     axon_tag_t tag, axon_tag_t mask, axon_tag_recv_info_t *info,
                     axon_request_h *req_p);

#endif
