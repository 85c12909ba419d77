/*
 * axon_perf -R LAYOUT (put_*, get_*): the target's side is a layout of the
 * packed size. Both processes are targets (put_lat puts both ways), each
 * building the size's layout over a buffer of its own.
 *
 *   key            (default) each side maps its buffer as the layout
 *                  (AXON_MEM_MAP_LAYOUT, one key per size) and swaps the
 *                  key with the peer: a put or get is one operation on the
 *                  packed range.
 *   separate_puts  put_bw --separate-puts: a put per piece into the
 *                  contiguous region (the layout at its start).
 *   pack_unpack    put_bw --pack-unpack: the packed bytes go into a bounce
 *                  slot of the region, a flush, a tag message; the target
 *                  scatters the slot into its layout and answers.
 *
 * The last two are what a layout key is measured against
 * (contrib/bench/layout_compare.sh).
 */
#define _GNU_SOURCE
#include <endian.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "axon.h"
#include "axon_perf.h"
#include "perf_rma.h"

/* ------------------------------------------------------------- the target's layout */

/* -R's buffers: the key method's layout buffer (page aligned: it is
 * registered), --pack-unpack's bounce (with -D) and message slots. */
int perf_rlayout_alloc(perf_rma_t *m)
{
    const perf_params_t *params = m->params;
    size_t               page   = 4096;

    if ((params->rlayout.kind != 0) && (params->rmethod == PERF_RMETHOD_KEY)) {
        m->rbuf = aligned_alloc(page, (m->rspan + page - 1) / page * page);
        if (m->rbuf == NULL) {
            return -1;
        }
        memset(m->rbuf, 0, m->rspan);
    }
    if (params->rmethod == PERF_RMETHOD_PACK_UNPACK) {
        m->bounce = malloc(m->max_size);
        m->sreqs  = calloc(params->window, sizeof(*m->sreqs));
        m->words  = calloc(2 * (size_t)params->window, sizeof(*m->words));
        if ((m->bounce == NULL) || (m->sreqs == NULL) || (m->words == NULL)) {
            return -1;
        }
    }
    return 0;
}

/* -R, key method: map this size's layout of rbuf (one key for its packed
 * bytes) and swap keys with the peer; puts and gets then name the peer's. */
static int perf_rlayout_key(perf_rma_t *m, size_t size)
{
    axon_mem_map_params_t mp = { .address = m->rbuf, .length = size,
                                 .flags = AXON_MEM_MAP_LAYOUT, .layout = &m->rlay.layout };
    char                  name[64], what[192];
    axon_status_t         status;

    status = axon_mem_map(m->context, &mp, &m->lay_memh);
    if (status < 0) {
        perf_layout_name(&m->params->rlayout, name, sizeof(name));
        snprintf(what, sizeof(what), "axon_mem_map of the -R layout %s (%zu bytes at %p, "
                 "AXON_MEM_MAP_LAYOUT)", name, size, (void *)m->rbuf);
        m->lay_memh = NULL;
        return perf_check_status(m->role, status, what);
    }
    if (perf_rma_swap_keys(m, m->lay_memh, m->rbuf, &m->lay_raddr, &m->lay_rkey) != 0) {
        return -1;
    }
    m->op_rkey  = m->lay_rkey;
    m->op_raddr = m->lay_raddr;
    return 0;
}

/* Keys go before their memory; the peer is done with ours (the size's last sync). */
void perf_rlayout_key_free(perf_rma_t *m)
{
    if (m->lay_rkey != NULL) {
        axon_rkey_destroy(m->lay_rkey);
        m->lay_rkey = NULL;
    }
    if (m->lay_memh != NULL) {
        axon_mem_unmap(m->context, m->lay_memh);
        m->lay_memh = NULL;
    }
    m->op_rkey  = m->rkey;
    m->op_raddr = m->raddr;
}

/* -R: this size's layout of the target's data, and with the key method its key. */
int perf_rlayout_size(perf_rma_t *m, size_t size)
{
    const perf_params_t *params = m->params;

    perf_layout_free(&m->rlay);
    if (perf_layout_build(&params->rlayout, size, &m->rlay) != 0) {
        return -1;
    }
    m->tdata = &m->rlay;
    memset(m->tmem, 0, m->rlay.span);  /* gaps that an earlier size's pieces wrote */
    return (params->rmethod == PERF_RMETHOD_KEY) ? perf_rlayout_key(m, size) : 0;
}

/* ------------------------------------------------------------- the baselines */

/* put_bw -R --separate-puts: an iteration is a put per piece of the target's
 * layout, from the packed bytes to the piece's place; -w puts in flight. */
int perf_rlayout_separate_puts(perf_rma_t *m, size_t size, double *elapsed)
{
    const perf_params_t *params = m->params;
    unsigned long        total  = params->warmup + params->iters;
    unsigned long        i, ops = 0;
    size_t               j, off, len, packed;
    unsigned             slot;
    double               t0     = perf_now();
    const char          *what   = perf_rma_op_names[PERF_RMA_PUT];

    if (params->check) {
        perf_fill(m->lbuf, size, size);
    }
    for (i = 0; i < total; ++i) {
        if (i == params->warmup) {
            if (perf_rma_flush(m, what) != 0) {
                return -1;
            }
            t0 = perf_now();
        }
        for (j = 0, packed = 0; j < perf_layout_count(&m->rlay); ++j, packed += len) {
            perf_layout_piece(&m->rlay, j, &off, &len);
            slot = (unsigned)(ops++ % params->window);
            if ((perf_rma_slot_free(m, slot, what) != 0) ||
                (perf_rma_start(m, PERF_RMA_PUT, m->lbuf + packed, len, m->op_raddr + off,
                                &m->reqs[slot]) != 0)) {
                goto err;
            }
        }
    }
    if (perf_rma_flush(m, what) != 0) {
        return -1;
    }
    *elapsed = perf_now() - t0;
    return 0;

err:
    perf_rma_drain(m, what);
    return -1;
}

/* Tag messages of --pack-unpack: a slot number, 64 bits big-endian. */
static int perf_rlayout_msg(perf_rma_t *m, int send, uint64_t *word, axon_tag_t tag,
                        axon_request_h *req_p)
{
    axon_request_h req = NULL;
    axon_status_t  status;

    status = send ? axon_tag_send_nb(m->ep, word, sizeof(*word), tag, NULL, &req)
                  : axon_tag_recv_nb(m->worker, word, sizeof(*word), tag, AXON_TAG_MASK_FULL,
                                     NULL, &req);
    if (perf_check_status(m->role, status, send ? "axon_tag_send_nb" : "axon_tag_recv_nb") != 0) {
        return -1;
    }
    *req_p = (status == AXON_INPROGRESS) ? req : NULL;
    return 0;
}

/* Wait for slot's answer and its message to complete. */
static int perf_rlayout_slot_wait(perf_rma_t *m, unsigned slot)
{
    int ret = 0;

    if ((m->reqs[slot] != NULL) &&
        (perf_rma_wait(m, m->reqs[slot], "the target's answer (--pack-unpack)") != 0)) {
        ret = -1;
    }
    if ((m->sreqs[slot] != NULL) &&
        (perf_rma_wait(m, m->sreqs[slot], "the message to the target (--pack-unpack)") != 0)) {
        ret = -1;
    }
    m->reqs[slot]  = NULL;
    m->sreqs[slot] = NULL;
    return ret;
}

static int perf_rlayout_slots_drain(perf_rma_t *m)
{
    unsigned k;
    int      ret = 0;

    for (k = 0; k < m->params->window; ++k) {
        ret |= perf_rlayout_slot_wait(m, k);
    }
    return ret;
}

/*
 * put_bw -R --pack-unpack, the initiator: gather (with -D), put the packed
 * bytes into bounce slot i % window of the target, flush (they must have
 * landed before the target hears of them), tell the target; an iteration
 * ends with the target's answer, the window's worth in flight.
 */
int perf_rlayout_pack_unpack(perf_rma_t *m, size_t size, double *elapsed)
{
    const perf_params_t *params = m->params;
    unsigned long        total  = params->warmup + params->iters;
    unsigned long        i;
    unsigned             slot;
    double               t0     = perf_now();
    uint8_t             *src    = (m->layout != NULL) ? m->bounce : m->lbuf;
    axon_request_h       req;

    if (params->check) {
        perf_layout_fill(m->data, m->lbuf, size, size);
    }
    for (i = 0; i < total; ++i) {
        if (i == params->warmup) {
            if (perf_rlayout_slots_drain(m) != 0) {
                return -1;
            }
            t0 = perf_now();
        }
        slot = (unsigned)(i % params->window);
        if (perf_rlayout_slot_wait(m, slot) != 0) {
            goto err;
        }
        if (m->layout != NULL) {
            perf_layout_gather(&m->lay, m->lbuf, m->bounce);
        }
        m->words[slot] = htobe64(slot);
        if ((perf_rma_start(m, PERF_RMA_PUT_PACKED, src, size,
                            m->op_raddr + m->bounce_offset + slot * size, &req) != 0) ||
            (perf_rma_do(m, PERF_RMA_FLUSH, NULL, 0, 0) != 0) ||
            (perf_rma_wait(m, req, perf_rma_op_names[PERF_RMA_PUT_PACKED]) != 0) ||
            (perf_rlayout_msg(m, 0, &m->words[params->window + slot], PERF_TAG_ACK,
                          &m->reqs[slot]) != 0) ||
            (perf_rlayout_msg(m, 1, &m->words[slot], PERF_TAG_DATA, &m->sreqs[slot]) != 0)) {
            goto err;
        }
    }
    if (perf_rlayout_slots_drain(m) != 0) {
        return -1;
    }
    *elapsed = perf_now() - t0;
    return 0;

err:
    perf_rlayout_slots_drain(m);
    return -1;
}

/* put_bw -R --pack-unpack, the target: scatter each slot it is told of into
 * its layout and answer. */
int perf_rlayout_unpack(perf_rma_t *m, size_t size)
{
    const perf_params_t *params = m->params;
    unsigned long        total  = params->warmup + params->iters;
    unsigned long        i;
    uint64_t             word, slot;
    axon_request_h       req;

    for (i = 0; i < total; ++i) {
        if ((perf_rlayout_msg(m, 0, &word, PERF_TAG_DATA, &req) != 0) ||
            (perf_rma_wait(m, req, "the initiator's message (--pack-unpack)") != 0)) {
            return -1;
        }
        slot = be64toh(word);
        if (slot >= params->window) {
            fprintf(stderr, "axon_perf server: --pack-unpack message %lu names slot %" PRIu64
                    " of %u\n", i, slot, params->window);
            return -1;
        }
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        perf_layout_scatter(m->tdata, m->mem + m->bounce_offset + slot * size, m->tmem);
        if ((perf_rlayout_msg(m, 1, &word, PERF_TAG_ACK, &req) != 0) ||
            (perf_rma_wait(m, req, "the answer (--pack-unpack)") != 0)) {
            return -1;
        }
    }
    return 0;
}
