/*
 * axon_perf -t put_lat | put_bw | get_lat | get_bw | amo_lat | amo_bw:
 * one-sided operations on the peer's memory, measured the way
 * ucx_perftest's ucp_put_lat, ucp_put_bw, ucp_get, ucp_fadd and ucp_add do.
 *
 * Each side maps one region with AXON_MEM_MAP_ALLOCATE (what ucx_perftest
 * does too: on one host the peer then reaches it directly), packs its key
 * and sends key and address over the control socket; each unpacks the
 * other's on its endpoint. The data part of the region is followed by one
 * cache line holding the word the atomics work on.
 *
 *   put_lat  ping-pong of puts: each side puts size bytes into the other's
 *            region, the last byte carrying the iteration, and polls the
 *            last byte of its own region (progressing) for the answer.
 *            latency = half round trip.
 *   put_bw   puts from one buffer to one remote place, at most -w in
 *            flight, one flush at the end (inside the time).
 *   get_lat  one get at a time; latency = the whole operation.
 *   get_bw   gets with at most -w in flight.
 *   amo_lat  one fetch-and-add at a time on the server's word (-s 8: 64 bits,
 *            -s 4: 32 bits); latency = the whole operation.
 *   amo_bw   posted adds (no result) on that word, at most -w in flight, one
 *            flush at the end: the atomic message rate.
 *
 * With -D the local buffer is a layout of the packed size (perf_layout.c):
 * puts gather from it, gets scatter into it.
 *
 * With -R the target's side is a layout too (perf_rlayout.c): puts and
 * gets name the target's layout key, or put_bw fills the layout without
 * one (--separate-puts, --pack-unpack).
 *
 * Only put_lat and --pack-unpack need the server to do more than progress;
 * in the other tests it just progresses until the client is done (lanes
 * that execute operations at the target need that).
 */
#define _GNU_SOURCE
#include <endian.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "axon.h"
#include "axon_perf.h"
#include "perf_rma.h"

/* Progress; every PERF_LIVENESS_SPINS calls make sure the peer still runs. */
static int perf_rma_progress(perf_rma_t *m, unsigned *spins, const char *what)
{
    axon_worker_progress(m->worker);
    if (((++*spins % PERF_LIVENESS_SPINS) == 0) && !perf_peer_alive(m->fd)) {
        fprintf(stderr, "axon_perf %s: peer exited while waiting for %s\n",
                perf_role_name(m->role), what);
        return -1;
    }
    return 0;
}

/* Complete one operation (req NULL: it completed at once) and free it. */
int perf_rma_wait(perf_rma_t *m, axon_request_h req, const char *what)
{
    axon_status_t status;
    unsigned      spins = 0;

    if (req == NULL) {
        return 0;
    }
    while ((status = axon_request_test(req, NULL)) == AXON_INPROGRESS) {
        if (perf_rma_progress(m, &spins, what) != 0) {
            axon_request_free(req);
            return -1;
        }
    }
    axon_request_free(req);
    return perf_check_status(m->role, status, what);
}

const char *const perf_rma_op_names[PERF_RMA_OP_LAST] = {
    [PERF_RMA_PUT] = "axon_put_nb", [PERF_RMA_GET] = "axon_get_nb",
    [PERF_RMA_PUT_PACKED] = "axon_put_nb (of packed bytes)",
    [PERF_RMA_FADD] = "axon_atomic_nb", [PERF_RMA_ADD] = "axon_atomic_nb (posted)",
    [PERF_RMA_FLUSH] = "axon_ep_flush_nb",
};

/* What the initiating calls have in common: retry while out of resources. */
int perf_rma_start(perf_rma_t *m, perf_rma_op_t op, void *buf, size_t size, uint64_t raddr,
                   axon_request_h *req_p)
{
    static const uint64_t one64 = 1;
    static const uint32_t one32 = 1;
    axon_request_param_t  param = { .flags = AXON_REQ_FLAG_LAYOUT, .layout = m->layout };
    const axon_request_param_t *lparam = m->layout ? &param : NULL;
    axon_request_h        req   = NULL;
    axon_status_t         status;
    unsigned              spins = 0;

    for (;;) {
        switch (op) {
        case PERF_RMA_PUT:
            status = axon_put_nb(m->ep, buf, size, raddr, m->op_rkey, lparam, &req);
            break;
        case PERF_RMA_PUT_PACKED:  /* no -D: buf holds the bytes in packed order */
            status = axon_put_nb(m->ep, buf, size, raddr, m->op_rkey, NULL, &req);
            break;
        case PERF_RMA_GET:
            status = axon_get_nb(m->ep, buf, size, raddr, m->op_rkey, lparam, &req);
            break;
        case PERF_RMA_FADD:
        case PERF_RMA_ADD:  /* buf NULL: posted */
            status = axon_atomic_nb(m->ep, AXON_ATOMIC_ADD, size,
                                    (size == 4) ? (const void *)&one32 : (const void *)&one64,
                                    NULL, buf, raddr, m->rkey, NULL, &req);
            break;
        default:
            status = axon_ep_flush_nb(m->ep, NULL, &req);
            break;
        }
        if (status != AXON_ERR_NO_RESOURCE) {
            break;
        }
        if (perf_rma_progress(m, &spins, perf_rma_op_names[op]) != 0) {
            return -1;
        }
    }
    if (perf_check_status(m->role, status, perf_rma_op_names[op]) != 0) {
        return -1;
    }
    *req_p = (status == AXON_INPROGRESS) ? req : NULL;
    return 0;
}

int perf_rma_do(perf_rma_t *m, perf_rma_op_t op, void *buf, size_t size, uint64_t raddr)
{
    axon_request_h req;

    if (perf_rma_start(m, op, buf, size, raddr, &req) != 0) {
        return -1;
    }
    return perf_rma_wait(m, req, perf_rma_op_names[op]);
}

/* ------------------------------------------------------------- data patterns */

/* Where the last byte of a put's data is in the local buffer. */
static size_t perf_rma_last(const perf_rma_t *m, size_t size)
{
    return (m->layout != NULL) ? perf_layout_last_offset(&m->lay) : size - 1;
}

/* The last byte of iteration i's put: never 0 (the region starts zeroed), never
 * the previous iteration's. */
static uint8_t perf_rma_mark(unsigned long i)
{
    return (uint8_t)(i % 255 + 1);
}

/* ------------------------------------------------------------- the tests */

/* Wait until the last byte of the peer's data here holds mark. */
static int perf_rma_wait_mark(perf_rma_t *m, size_t size, uint8_t mark)
{
    volatile uint8_t *last  = m->tmem + ((m->tdata != NULL) ? perf_layout_last_offset(m->tdata)
                                                             : size - 1);
    unsigned          spins = 0;

    while (*last != mark) {
        if (perf_rma_progress(m, &spins, "the peer's put") != 0) {
            return -1;
        }
    }
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return 0;
}

static int perf_rma_put_lat(perf_rma_t *m, size_t size, double *elapsed)
{
    const perf_params_t *params = m->params;
    unsigned long        total  = params->warmup + params->iters;
    unsigned long        i;
    double               t0     = perf_now();
    int                  client = (m->role == PERF_ROLE_CLIENT);

    for (i = 0; i < total; ++i) {
        if (i == params->warmup) {
            t0 = perf_now();
        }
        if (params->check) {
            perf_layout_fill(m->data, m->lbuf, size, i);  /* all but the last byte are checked */
        }
        m->lbuf[perf_rma_last(m, size)] = perf_rma_mark(i);
        if (!client && (perf_rma_wait_mark(m, size, perf_rma_mark(i)) != 0)) {
            return -1;
        }
        if (!client && params->check &&
            (perf_layout_verify(m->tdata, m->role, m->tmem, size - 1, i, "put_lat data") != 0)) {
            return -1;
        }
        if (perf_rma_do(m, PERF_RMA_PUT, m->lbuf, size, m->op_raddr) != 0) {
            return -1;
        }
        if (client && (perf_rma_wait_mark(m, size, perf_rma_mark(i)) != 0)) {
            return -1;
        }
        if (client && params->check &&
            (perf_layout_verify(m->tdata, m->role, m->tmem, size - 1, i, "put_lat data") != 0)) {
            return -1;
        }
    }
    *elapsed = perf_now() - t0;
    return 0;
}

/* The peer's atomic words: 64 bits, then 32 bits, on a cache line of their own. */
static uint64_t perf_rma_amo_addr(const perf_rma_t *m, size_t size)
{
    return m->raddr + m->amo_offset + ((size == 4) ? 8 : 0);
}

/* Complete the operation in a window slot, if any; the slot is free then. */
int perf_rma_slot_free(perf_rma_t *m, unsigned slot, const char *what)
{
    axon_request_h req = m->reqs[slot];

    m->reqs[slot] = NULL;
    return perf_rma_wait(m, req, what);
}

/* Drain every slot of the window. */
int perf_rma_drain(perf_rma_t *m, const char *what)
{
    unsigned k;
    int      ret = 0;

    for (k = 0; k < m->params->window; ++k) {
        if ((m->reqs[k] != NULL) && (perf_rma_wait(m, m->reqs[k], what) != 0)) {
            ret = -1;
        }
        m->reqs[k] = NULL;
    }
    return ret;
}

/* Flush, as the window is drained (the time then covers every put landing). */
int perf_rma_flush(perf_rma_t *m, const char *what)
{
    return ((perf_rma_drain(m, what) == 0) &&
            (perf_rma_do(m, PERF_RMA_FLUSH, NULL, 0, 0) == 0)) ? 0 : -1;
}

/* put_bw, get_bw, amo_bw: at most a window in flight; puts and adds flush at the end. */
static int perf_rma_stream(perf_rma_t *m, perf_rma_op_t op, size_t size, double *elapsed)
{
    const perf_params_t *params = m->params;
    unsigned long        total  = params->warmup + params->iters;
    unsigned long        i;
    unsigned             slot;
    double               t0     = perf_now();
    const char          *what   = perf_rma_op_names[op];
    int                  flush  = (op != PERF_RMA_GET);
    void                *buf    = (op == PERF_RMA_ADD) ? NULL : m->lbuf;
    uint64_t             raddr  = (op == PERF_RMA_ADD) ? perf_rma_amo_addr(m, size) : m->op_raddr;

    if (params->check && (op == PERF_RMA_PUT)) {
        perf_layout_fill(m->data, m->lbuf, size, size);
    }
    for (i = 0; i < total; ++i) {
        if (i == params->warmup) {
            if ((flush ? perf_rma_flush(m, what) : perf_rma_drain(m, what)) != 0) {
                return -1;
            }
            t0 = perf_now();
        }
        slot = (unsigned)(i % params->window);
        if ((perf_rma_slot_free(m, slot, what) != 0) ||
            (perf_rma_start(m, op, buf, size, raddr, &m->reqs[slot]) != 0)) {
            goto err;
        }
    }
    if ((flush ? perf_rma_flush(m, what) : perf_rma_drain(m, what)) != 0) {
        return -1;
    }
    *elapsed = perf_now() - t0;
    if (params->check && (op == PERF_RMA_GET)) {
        return perf_layout_verify(m->data, m->role, m->lbuf, size, size, "get_bw data");
    }
    return 0;

err:
    perf_rma_drain(m, what);
    return -1;
}

static int perf_rma_get_lat(perf_rma_t *m, size_t size, double *elapsed)
{
    const perf_params_t *params = m->params;
    unsigned long        total  = params->warmup + params->iters;
    unsigned long        i;
    double               t0     = perf_now();

    for (i = 0; i < total; ++i) {
        if (i == params->warmup) {
            t0 = perf_now();
        }
        if (perf_rma_do(m, PERF_RMA_GET, m->lbuf, size, m->op_raddr) != 0) {
            return -1;
        }
    }
    *elapsed = perf_now() - t0;
    return params->check ?
           perf_layout_verify(m->data, m->role, m->lbuf, size, size, "get_lat data") : 0;
}

static int perf_rma_amo_lat(perf_rma_t *m, size_t size, double *elapsed)
{
    const perf_params_t *params = m->params;
    unsigned long        total  = params->warmup + params->iters;
    unsigned long        i;
    double               t0     = perf_now();
    uint64_t             result = 0;
    uint64_t             got, *expect;
    uint32_t             r32;

    for (i = 0; i < total; ++i) {
        if (i == params->warmup) {
            t0 = perf_now();
        }
        if (perf_rma_do(m, PERF_RMA_FADD, &result, size, perf_rma_amo_addr(m, size)) != 0) {
            return -1;
        }
        if (params->check) {
            memcpy(&r32, &result, sizeof(r32));
            got    = (size == 4) ? r32 : result;
            expect = &m->amo_expect[size == 8];
            if (got != ((size == 4) ? (uint32_t)*expect : *expect)) {
                fprintf(stderr, "axon_perf client: fetch-and-add %lu returned %" PRIu64
                        ", expected %" PRIu64 "\n", i, got, *expect);
                return -1;
            }
            ++*expect;
        }
    }
    *elapsed = perf_now() - t0;
    return 0;
}

static void perf_rma_print(const perf_rma_t *m, const char *name, size_t size, double elapsed)
{
    const perf_params_t *params = m->params;
    double               iters  = (double)params->iters;
    double               latency_us;
    const char          *tl;

    if (elapsed <= 0) {
        elapsed = 1e-9;
    }
    tl = (size <= m->attr.eager_short_max) ? m->attr.small_tl : m->attr.bulk_tl;
    latency_us = elapsed / iters * 1e6;
    if (params->test == PERF_TEST_PUT_LAT) {
        latency_us /= 2;  /* half round trip */
    }
    printf("RESULT test=%s tl=%s size=%zu iters=%lu latency_us=%.3f bandwidth_MBps=%.3f "
           "msgrate_Mps=%.3f", name, tl, size, params->iters, latency_us,
           (double)size * iters / elapsed / 1e6, iters / elapsed / 1e6);
    perf_print_layout(params);
}

/* One size: the client measures, the server takes part (put_lat, --pack-unpack)
 * or progresses. */
static int perf_rma_size(perf_rma_t *m, const char *name, size_t size)
{
    const perf_params_t *params  = m->params;
    double               elapsed = 0;
    int                  ret     = 0;
    int                  client  = (m->role == PERF_ROLE_CLIENT);

    if ((params->rlayout.kind != 0) && (perf_rlayout_size(m, size) != 0)) {
        return -1;
    }
    if (params->check && (params->test == PERF_TEST_GET_LAT ||
                          params->test == PERF_TEST_GET_BW)) {
        perf_layout_fill(m->tdata, m->tmem, size, size);  /* what the peer's gets must read */
    }
    if ((params->test == PERF_TEST_PUT_LAT) && (m->tdata == NULL)) {
        memset(m->tmem, 0, size);  /* no mark of an earlier size where this one looks */
    }
    /* no mark, nor a gap that an earlier size's layout wrote */
    memset(m->lbuf, 0, m->lspan);
    if (params->layout.kind != 0) {
        perf_layout_free(&m->lay);
        if (perf_layout_build(&params->layout, size, &m->lay) != 0) {
            return -1;
        }
        m->data   = &m->lay;
        m->layout = &m->lay.layout;
    }
    if (perf_sync(m->fd, &m->worker, 1) != 0) {
        return -1;
    }
    switch (params->test) {
    case PERF_TEST_PUT_LAT:
        ret = perf_rma_put_lat(m, size, &elapsed);
        break;
    case PERF_TEST_PUT_BW:
        if (params->rmethod == PERF_RMETHOD_PACK_UNPACK) {
            ret = client ? perf_rlayout_pack_unpack(m, size, &elapsed)
                         : perf_rlayout_unpack(m, size);
        } else if (params->rmethod == PERF_RMETHOD_SEPARATE_PUTS) {
            ret = client ? perf_rlayout_separate_puts(m, size, &elapsed) : 0;
        } else {
            ret = client ? perf_rma_stream(m, PERF_RMA_PUT, size, &elapsed) : 0;
        }
        break;
    case PERF_TEST_GET_BW:
        ret = client ? perf_rma_stream(m, PERF_RMA_GET, size, &elapsed) : 0;
        break;
    case PERF_TEST_GET_LAT:
        ret = client ? perf_rma_get_lat(m, size, &elapsed) : 0;
        break;
    case PERF_TEST_AMO_BW:
        ret = client ? perf_rma_stream(m, PERF_RMA_ADD, size, &elapsed) : 0;
        break;
    default:
        ret = client ? perf_rma_amo_lat(m, size, &elapsed) : 0;
        break;
    }
    if (ret != 0) {
        return -1;
    }
    /* The server progresses here until the client is done with this size. */
    if (perf_sync(m->fd, &m->worker, 1) != 0) {
        return -1;
    }
    if ((params->test == PERF_TEST_PUT_BW) && params->check && !client &&
        (perf_layout_verify(m->tdata, m->role, m->tmem, size, size, "put_bw data") != 0)) {
        return -1;
    }
    perf_rlayout_key_free(m);
    if (client) {
        perf_rma_print(m, name, size, elapsed);
    }
    return 0;
}

/* ------------------------------------------------------------- setup */

/* Send the key of memh and the address peers put to, read and unpack the peer's. */
int perf_rma_swap_keys(perf_rma_t *m, axon_mem_h memh, const void *address,
                       uint64_t *raddr_p, axon_rkey_h *rkey_p)
{
    void     *key = NULL, *peer_key = NULL;
    size_t    key_len, peer_key_len;
    uint64_t  word = htobe64((uint64_t)(uintptr_t)address);
    int       ret  = -1;

    if (perf_check_status(m->role, axon_rkey_pack(m->context, memh, &key, &key_len),
                          "axon_rkey_pack") != 0) {
        return -1;
    }
    if ((perf_exchange_address(m->fd, key, key_len, &peer_key, &peer_key_len) != 0) ||
        (perf_sock_write(m->fd, &word, sizeof(word)) != 0) ||
        (perf_sock_read(m->fd, &word, sizeof(word)) != 0)) {
        goto out;
    }
    if (peer_key_len > PERF_RMA_KEY_MAX) {
        fprintf(stderr, "axon_perf %s: the peer's key is %zu bytes long\n", perf_role_name(m->role),
                peer_key_len);
        goto out;
    }
    *raddr_p = be64toh(word);
    if (perf_check_status(m->role, axon_ep_rkey_unpack(m->ep, peer_key, peer_key_len, rkey_p),
                       "axon_ep_rkey_unpack") == 0) {
        ret = 0;
    }
out:
    free(peer_key);
    axon_rkey_buffer_release(key);
    return ret;
}

/* Map our region, swap its key and address with the peer's. The region holds
 * the data peers put and get (with --separate-puts and --pack-unpack the
 * target's layout; with --pack-unpack then the bounce slots), then the
 * atomic words. */
static int perf_rma_keys(perf_rma_t *m)
{
    const perf_params_t  *params = m->params;
    axon_mem_map_params_t mp     = { .flags = AXON_MEM_MAP_ALLOCATE };
    size_t                data   = m->max_size, len;
    void                 *addr;

    if (params->rmethod != PERF_RMETHOD_KEY) {
        data = m->rspan;
    }
    if (params->rmethod == PERF_RMETHOD_PACK_UNPACK) {
        m->bounce_offset = (m->rspan + PERF_RMA_AMO_ALIGN - 1) / PERF_RMA_AMO_ALIGN *
                           PERF_RMA_AMO_ALIGN;
        data             = m->bounce_offset + (size_t)params->window * m->max_size;
    }
    m->amo_offset = (data + PERF_RMA_AMO_ALIGN - 1) / PERF_RMA_AMO_ALIGN * PERF_RMA_AMO_ALIGN;
    mp.length     = m->amo_offset + PERF_RMA_AMO_ALIGN;
    if ((perf_check_status(m->role, axon_mem_map(m->context, &mp, &m->memh),
                           "axon_mem_map") != 0) ||
        (perf_check_status(m->role, axon_mem_query(m->memh, &addr, &len),
                           "axon_mem_query") != 0)) {
        return -1;
    }
    m->mem = addr;
    memset(m->mem, 0, mp.length);
    if (perf_rma_swap_keys(m, m->memh, m->mem, &m->raddr, &m->rkey) != 0) {
        return -1;
    }
    m->tmem     = (params->rmethod == PERF_RMETHOD_KEY) && (params->rlayout.kind != 0) ?
                  m->rbuf : m->mem;
    m->op_rkey  = m->rkey;
    m->op_raddr = m->raddr;
    return 0;
}

static int perf_rma_connect(perf_rma_t *m)
{
    axon_ep_params_t ep_params = { 0 };
    void            *address, *peer_address = NULL;
    size_t           length, peer_length;
    int              ret;

    if (perf_check_status(m->role, axon_worker_get_address(m->worker, &address, &length),
                       "axon_worker_get_address") != 0) {
        return -1;
    }
    ret = perf_exchange_address(m->fd, address, length, &peer_address, &peer_length);
    axon_worker_release_address(m->worker, address);
    if (ret != 0) {
        return -1;
    }
    ep_params.address        = peer_address;
    ep_params.address_length = peer_length;
    ret = perf_check_status(m->role, axon_ep_create(m->worker, &ep_params, &m->ep),
                            "axon_ep_create");
    free(peer_address);
    if (ret == 0) {
        ret = perf_check_status(m->role, axon_ep_query(m->ep, &m->attr), "axon_ep_query");
    }
    return ret;
}

static void perf_rma_close_ep(perf_rma_t *m, int force)
{
    axon_request_h req = NULL;
    axon_status_t  status;

    if (m->ep == NULL) {
        return;
    }
    status = axon_ep_close_nb(m->ep, force ? AXON_EP_CLOSE_FORCE : AXON_EP_CLOSE_FLUSH, &req);
    m->ep  = NULL;
    if (status == AXON_INPROGRESS) {
        if (force) {
            axon_request_free(req);  /* do not wait on a peer that may be gone */
        } else {
            perf_rma_wait(m, req, "the endpoint to close");
        }
    }
}

int perf_rma_check_params(const perf_params_t *params)
{
    unsigned i;

    for (i = 0; i < params->num_sizes; ++i) {
        if (((params->test == PERF_TEST_AMO_LAT) || (params->test == PERF_TEST_AMO_BW)) &&
            (params->sizes[i] != 4) && (params->sizes[i] != 8)) {
            fprintf(stderr, "axon_perf: %s works on 4 or 8 bytes, not %zu\n",
                    (params->test == PERF_TEST_AMO_LAT) ? "amo_lat" : "amo_bw",
                    params->sizes[i]);
            return -1;
        }
        if ((params->test == PERF_TEST_PUT_LAT) && (params->sizes[i] == 0)) {
            fprintf(stderr, "axon_perf: put_lat needs at least 1 byte (the last one "
                    "carries the iteration)\n");
            return -1;
        }
    }
    return 0;
}

int perf_rma_run(const perf_params_t *params, int fd, perf_role_t role, const char *name)
{
    axon_context_params_t ctx_params = { .features = AXON_FEATURE_RMA | AXON_FEATURE_AMO };
    perf_rma_t            m          = { .params = params, .role = role, .fd = fd };
    unsigned              i;
    int                   ret        = -1;

    if (perf_rma_check_params(params) != 0) {
        return -1;
    }
    m.max_size = 8;
    m.lspan    = 8;
    for (i = 0; i < params->num_sizes; ++i) {
        if (params->sizes[i] > m.max_size) {
            m.max_size = params->sizes[i];
        }
        if (perf_layout_span(&params->layout, params->sizes[i]) > m.lspan) {
            m.lspan = perf_layout_span(&params->layout, params->sizes[i]);
        }
        if (perf_layout_span(&params->rlayout, params->sizes[i]) > m.rspan) {
            m.rspan = perf_layout_span(&params->rlayout, params->sizes[i]);
        }
    }
    m.lbuf = calloc(1, m.lspan);
    m.reqs = calloc(params->window, sizeof(*m.reqs));
    if ((m.lbuf == NULL) || (m.reqs == NULL) || (perf_rlayout_alloc(&m) != 0)) {
        fprintf(stderr, "axon_perf: out of memory for %zu-byte buffers\n", m.max_size);
        goto out_free;
    }
    if (params->rmethod == PERF_RMETHOD_PACK_UNPACK) {
        ctx_params.features |= AXON_FEATURE_TAG;  /* its messages */
    }
    if (perf_check_status(m.role, axon_init(&ctx_params, &m.context), "axon_init") != 0) {
        goto out_free;
    }
    if ((perf_check_status(m.role, axon_worker_create(m.context, NULL, &m.worker),
                        "axon_worker_create") != 0) ||
        (perf_rma_connect(&m) != 0) || (perf_rma_keys(&m) != 0)) {
        goto out_destroy;
    }

    if (role == PERF_ROLE_CLIENT) {
        printf("# axon_perf %s: test=%s iters=%lu warmup=%lu window=%u check=%s memory=allocated\n",
               axon_get_version_string(), name, params->iters, params->warmup, params->window,
               params->check ? "yes" : "no");
        printf("# lanes: small=%s/%s bulk=%s/%s eager_short_max=%zu\n",
               m.attr.small_tl, m.attr.small_dev, m.attr.bulk_tl, m.attr.bulk_dev,
               m.attr.eager_short_max);
        fflush(stdout);
    }
    for (i = 0; i < params->num_sizes; ++i) {
        alarm(PERF_TIMEOUT_SEC);
        if (perf_rma_size(&m, name, params->sizes[i]) != 0) {
            goto out_destroy;
        }
    }

    /* Keys go before their endpoint; both sides are done before either closes. */
    perf_rlayout_key_free(&m);
    axon_rkey_destroy(m.rkey);
    m.rkey = NULL;
    if (perf_sync(m.fd, &m.worker, 1) != 0) {
        goto out_destroy;
    }
    perf_rma_close_ep(&m, 0);
    ret = perf_sync(m.fd, &m.worker, 1);

out_destroy:
    perf_rlayout_key_free(&m);
    if (m.rkey != NULL) {
        axon_rkey_destroy(m.rkey);
    }
    perf_rma_close_ep(&m, 1);
    if (m.memh != NULL) {
        axon_mem_unmap(m.context, m.memh);
    }
    axon_worker_destroy(m.worker);  /* NULL is fine */
    axon_cleanup(m.context);
out_free:
    perf_layout_free(&m.lay);
    perf_layout_free(&m.rlay);
    free(m.reqs);
    free(m.lbuf);
    free(m.rbuf);
    free(m.bounce);
    free(m.sreqs);
    free(m.words);
    return ret;
}
