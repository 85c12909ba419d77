/*
 * Connections: an endpoint's Axon endpoint to each peer it talks to, made
 * at the first operation on an fi_addr (axon_fi_conn_get is the data path's
 * one branch; this file is its slow side). Making one resolves the peer
 * (the AV fetches its worker address) and calls axon_ep_create on the
 * endpoint's worker. A peer that cannot be reached gets a connection
 * without an Axon endpoint whose status fails every operation on it at
 * once, in an error entry: nothing waits, nothing is dropped silently.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "axon_fi.h"

#define AXON_FI_CONN_CLOSE_WAIT_MS 2000   /* flushing connections at endpoint close, at most */

static void axon_fi_conn_failed(void *arg, axon_ep_h aep, axon_status_t status)
{
    axon_fi_conn_t *conn = arg;
    char str[96];

    conn->status = status;
    axon_fi_name_str(&conn->peer->name, str, sizeof(str));
    AXON_FI_INFO(FI_LOG_EP_DATA, "peer %s failed: %s", str, axon_status_string(status));
}

static int axon_fi_conn_slots(axon_fi_ep_t *ep, fi_addr_t addr)
{
    size_t n = ep->nconns ? ep->nconns : 64;
    axon_fi_conn_t **conns;

    while (n <= addr) {
        n *= 2;
    }
    if (n == ep->nconns) {
        return 0;
    }
    conns = realloc(ep->conns, n * sizeof(*conns));
    if (conns == NULL) {
        return -FI_ENOMEM;
    }
    memset(conns + ep->nconns, 0, (n - ep->nconns) * sizeof(*conns));
    ep->conns  = conns;
    ep->nconns = n;
    return 0;
}

/* A new connection to peer; unreachable ones are kept too, with their status. */
static axon_fi_conn_t *axon_fi_conn_new(axon_fi_ep_t *ep, axon_fi_peer_t *peer)
{
    axon_fi_conn_t *conn;
    axon_ep_params_t params;
    char str[96];

    conn = calloc(1, sizeof(*conn));
    if (conn == NULL) {
        return NULL;
    }
    conn->peer   = peer;
    conn->status = axon_fi_av_resolve(ep->av, peer);
    if (conn->status == AXON_OK) {
        params.address        = peer->addr;
        params.address_length = peer->addr_len;
        params.err_cb         = axon_fi_conn_failed;
        params.err_cb_arg     = conn;
        conn->status = axon_ep_create(ep->worker, &params, &conn->aep);
        if (conn->status != AXON_OK) {
            axon_fi_name_str(&peer->name, str, sizeof(str));
            AXON_FI_WARN(FI_LOG_EP_DATA, "axon_ep_create for %s failed: %s", str,
                         axon_status_string(conn->status));
            conn->aep = NULL;
        }
    }
    if (axon_fi_map_put(&ep->conn_by_peer, (uintptr_t)peer, (uintptr_t)conn) != 0) {
        if (conn->aep != NULL) {
            axon_ep_close_nb(conn->aep, AXON_EP_CLOSE_FORCE, NULL);
        }
        free(conn);
        return NULL;
    }
    return conn;
}

axon_status_t axon_fi_conn_make(axon_fi_ep_t *ep, fi_addr_t addr, axon_fi_conn_t **conn_p)
{
    axon_fi_peer_t *peer = (ep->av != NULL) ? axon_fi_av_peer(ep->av, addr) : NULL;
    axon_fi_conn_t *conn;
    uint64_t found;

    if (peer == NULL) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "fi_addr %llu is not in the AV", (unsigned long long)addr);
        return AXON_ERR_INVALID_ADDR;
    }
    conn = axon_fi_conn_find(ep, addr);
    if (conn == NULL) {
        if (axon_fi_map_get(&ep->conn_by_peer, (uintptr_t)peer, &found)) {
            conn = (axon_fi_conn_t *)(uintptr_t)found;   /* a duplicate's */
        } else if ((conn = axon_fi_conn_new(ep, peer)) == NULL) {
            return AXON_ERR_NO_MEMORY;
        }
        if (axon_fi_conn_slots(ep, addr) != 0) {
            return AXON_ERR_NO_MEMORY;   /* the connection stays in conn_by_peer */
        }
        ep->conns[addr] = conn;
        ++conn->refs;
    }
    *conn_p = conn;
    return (conn->aep != NULL) ? AXON_OK : conn->status;
}

/* Close a connection nobody uses any more; *req_p gets the flush, if one is due. */
static void axon_fi_conn_free(axon_fi_ep_t *ep, axon_fi_conn_t *conn, axon_request_h *req_p)
{
    axon_request_h req = NULL;

    axon_fi_map_del(&ep->conn_by_peer, (uintptr_t)conn->peer);
    axon_fi_rkey_destroy_all(conn);   /* Axon keys go before their endpoint */
    if ((conn->aep != NULL) &&
        (axon_ep_close_nb(conn->aep, (conn->status == AXON_OK) ? AXON_EP_CLOSE_FLUSH :
                                     AXON_EP_CLOSE_FORCE, &req) == AXON_INPROGRESS)) {
        if (req_p != NULL) {
            *req_p = req;
        } else {
            axon_request_free(req);   /* the flush still finishes in later progress */
        }
    }
    free(conn);
}

void axon_fi_conn_drop(axon_fi_ep_t *ep, fi_addr_t addr)
{
    axon_fi_conn_t *conn = axon_fi_conn_find(ep, addr);

    if (conn == NULL) {
        return;
    }
    ep->conns[addr] = NULL;
    if (--conn->refs == 0) {
        axon_fi_conn_free(ep, conn, NULL);
    }
}

void axon_fi_conn_close_all(axon_fi_ep_t *ep)
{
    axon_fi_map_t *map = &ep->conn_by_peer;
    axon_request_h *reqs;
    axon_fi_conn_t **conns;
    struct timespec start;
    size_t i, n = 0, nreqs = 0, pending;

    /* Taken out of the map first: freeing one edits the map. */
    conns = calloc(map->count + 1, sizeof(*conns));
    reqs  = calloc(map->count + 1, sizeof(*reqs));
    for (i = 0; (conns != NULL) && (i < map->cap); ++i) {
        if (map->keys[i] != 0) {
            conns[n++] = (axon_fi_conn_t *)(uintptr_t)map->vals[i];
        }
    }
    for (i = 0; i < n; ++i) {
        axon_request_h req = NULL;
        axon_fi_conn_free(ep, conns[i], (reqs != NULL) ? &req : NULL);
        if (req != NULL) {
            reqs[nreqs++] = req;
        }
    }
    /* Let queued sends leave before the worker goes; a dead peer does not hold us long. */
    clock_gettime(CLOCK_MONOTONIC, &start);
    do {
        axon_worker_progress(ep->worker);
        for (i = 0, pending = 0; i < nreqs; ++i) {
            pending += (axon_request_test(reqs[i], NULL) == AXON_INPROGRESS);
        }
    } while (pending && !axon_fi_expired(&start, AXON_FI_CONN_CLOSE_WAIT_MS));
    for (i = 0; i < nreqs; ++i) {
        axon_request_free(reqs[i]);
    }
    free(reqs);
    free(conns);
    free(ep->conns);
    ep->conns  = NULL;
    ep->nconns = 0;
    axon_fi_map_free(map);
}
