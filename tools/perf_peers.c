/*
 * axon_perf's many-peer setup (perf_peers.h): a hub worker in the client, a
 * worker per peer in the server, their addresses swapped over the control
 * socket, and the waits that progress every worker of the process.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "axon.h"
#include "perf_peers.h"

int perf_peers_check(const perf_peers_t *m, axon_status_t status, const char *what,
                     unsigned peer)
{
    if (status < 0) {
        fprintf(stderr, "axon_perf %s %s: %s (peer %u) failed: %s\n", m->test,
                perf_role_name(m->role), what, peer, axon_status_string(status));
        return -1;
    }
    return 0;
}

void perf_peers_progress(perf_peers_t *m)
{
    unsigned i;

    for (i = 0; i < m->num_workers; ++i) {
        axon_worker_progress(m->workers[i]);
    }
}

/* One spin of a wait for peer's operation (focus: mostly its worker alone). */
static void perf_peers_progress_for(perf_peers_t *m, unsigned peer, unsigned *spins)
{
    if (m->focus && (m->num_workers > 1) && ((++*spins % PERF_PEERS_ALL_EVERY) != 0)) {
        axon_worker_progress(m->workers[peer]);
    } else {
        perf_peers_progress(m);
    }
}

int perf_peers_wait(perf_peers_t *m, axon_request_h req, axon_tag_recv_info_t *info,
                    const char *what, unsigned peer)
{
    double        end   = perf_now() + PERF_PEERS_WAIT_SEC;
    unsigned      spins = 0;
    axon_status_t status;

    if (req == NULL) {
        return 0;
    }
    while ((status = axon_request_test(req, info)) == AXON_INPROGRESS) {
        perf_peers_progress_for(m, peer, &spins);
        if (perf_now() > end) {
            fprintf(stderr, "axon_perf %s %s: %s (peer %u) did not complete in %d s\n",
                    m->test, perf_role_name(m->role), what, peer, PERF_PEERS_WAIT_SEC);
            return -1;  /* the request stays with its worker, reclaimed at destroy */
        }
    }
    axon_request_free(req);
    return perf_peers_check(m, status, what, peer);
}

int perf_peers_connect(perf_peers_t *m, unsigned i)
{
    axon_ep_params_t params;
    unsigned         w = (m->role == PERF_ROLE_CLIENT) ? 0 : i;

    params.address        = (m->role == PERF_ROLE_CLIENT) ? m->addrs[i] : m->peer_addr;
    params.address_length = (m->role == PERF_ROLE_CLIENT) ? m->addr_lens[i] : m->peer_len;
    return perf_peers_check(m, axon_ep_create(m->workers[w], &params, &m->eps[i]),
                            "axon_ep_create", i);
}

int perf_peers_send(perf_peers_t *m, unsigned i, const void *buf, size_t length,
                    axon_tag_t tag, axon_request_h *req_p)
{
    axon_request_h req   = NULL;
    axon_status_t  status;
    double         end   = perf_now() + PERF_PEERS_WAIT_SEC;
    unsigned       spins = 0;

    while ((status = axon_tag_send_nb(m->eps[i], buf, length, tag, NULL, &req)) ==
           AXON_ERR_NO_RESOURCE) {
        perf_peers_progress_for(m, i, &spins);  /* not connected yet, or queues full */
        if (perf_now() > end) {
            return perf_peers_check(m, status, "axon_tag_send_nb", i);
        }
    }
    if (perf_peers_check(m, status, "axon_tag_send_nb", i) != 0) {
        return -1;
    }
    *req_p = (status == AXON_INPROGRESS) ? req : NULL;
    return 0;
}

int perf_peers_recv(perf_peers_t *m, unsigned w, unsigned i, void *buf, size_t length,
                    axon_tag_t tag, axon_tag_t mask, axon_tag_recv_info_t *info,
                    axon_request_h *req_p)
{
    axon_request_param_t param = { .recv_info = info };
    axon_request_h       req   = NULL;
    axon_status_t        status;

    status = axon_tag_recv_nb(m->workers[w], buf, length, tag, mask,
                              (info != NULL) ? &param : NULL, &req);
    if (perf_peers_check(m, status, "axon_tag_recv_nb", i) != 0) {
        return -1;
    }
    *req_p = (status == AXON_INPROGRESS) ? req : NULL;
    return 0;
}

/* Exchange addresses: the server sends each of its workers', the client its own each time. */
static int perf_peers_addresses(perf_peers_t *m)
{
    void    *addr, *peer;
    size_t   len, peer_len;
    unsigned i;
    int      ret;

    for (i = 0; i < m->num_peers; ++i) {
        axon_worker_h w = m->workers[(m->role == PERF_ROLE_CLIENT) ? 0 : i];

        if (perf_peers_check(m, axon_worker_get_address(w, &addr, &len),
                             "axon_worker_get_address", i) != 0) {
            return -1;
        }
        ret = perf_exchange_address(m->fd, addr, len, &peer, &peer_len);
        axon_worker_release_address(w, addr);
        if (ret != 0) {
            return -1;
        }
        if (m->role == PERF_ROLE_CLIENT) {
            m->addrs[i]     = peer;
            m->addr_lens[i] = peer_len;
        } else if (m->peer_addr == NULL) {
            m->peer_addr = peer;
            m->peer_len  = peer_len;
        } else {
            free(peer);
        }
    }
    return 0;
}

int perf_peers_open(perf_peers_t *m, const char *test, perf_role_t role, int fd,
                    unsigned num_peers)
{
    axon_context_params_t ctx_params = { .features = AXON_FEATURE_TAG };
    unsigned              i;

    memset(m, 0, sizeof(*m));
    m->role        = role;
    m->fd          = fd;
    m->test        = test;
    m->num_peers   = num_peers;
    m->num_workers = (role == PERF_ROLE_CLIENT) ? 1 : num_peers;
    m->workers     = calloc(m->num_workers, sizeof(*m->workers));
    m->eps         = calloc(num_peers, sizeof(*m->eps));
    m->addrs       = calloc(num_peers, sizeof(*m->addrs));
    m->addr_lens   = calloc(num_peers, sizeof(*m->addr_lens));
    if (!m->workers || !m->eps || !m->addrs || !m->addr_lens) {
        fprintf(stderr, "axon_perf %s: out of memory for %u peers\n", test, num_peers);
        return -1;
    }
    if (perf_peers_check(m, axon_init(&ctx_params, &m->context), "axon_init", 0) != 0) {
        return -1;
    }
    for (i = 0; i < m->num_workers; ++i) {
        if (perf_peers_check(m, axon_worker_create(m->context, NULL, &m->workers[i]),
                             "axon_worker_create", i) != 0) {
            return -1;
        }
    }
    return perf_peers_addresses(m);
}

/* Close every endpoint, flushing (after a failure: at once). */
static void perf_peers_close_eps(perf_peers_t *m, int force)
{
    axon_request_h req;
    axon_status_t  status;
    unsigned       i;

    for (i = 0; (m->eps != NULL) && (i < m->num_peers); ++i) {
        if (m->eps[i] == NULL) {
            continue;
        }
        req    = NULL;
        status = axon_ep_close_nb(m->eps[i], force ? AXON_EP_CLOSE_FORCE : AXON_EP_CLOSE_FLUSH,
                                  &req);
        m->eps[i] = NULL;
        if (status == AXON_INPROGRESS) {
            perf_peers_wait(m, req, NULL, "closing an endpoint", i);
        }
    }
}

int perf_peers_finish(perf_peers_t *m)
{
    if (perf_sync(m->fd, m->workers, m->num_workers) != 0) {
        return -1;
    }
    perf_peers_close_eps(m, 0);
    return perf_sync(m->fd, m->workers, m->num_workers);
}

void perf_peers_close(perf_peers_t *m)
{
    unsigned i;

    perf_peers_close_eps(m, 1);
    for (i = 0; (m->workers != NULL) && (i < m->num_workers); ++i) {
        axon_worker_destroy(m->workers[i]);  /* NULL is fine */
    }
    axon_cleanup(m->context);
    for (i = 0; (m->addrs != NULL) && (i < m->num_peers); ++i) {
        free(m->addrs[i]);
    }
    free(m->peer_addr);
    free(m->addr_lens);
    free(m->addrs);
    free(m->eps);
    free(m->workers);
}
