/*
 * axon_soak's traffic with one peer: tag messages of mixed sizes (eager and
 * rendezvous, some sent from a strided layout, some synchronous), each
 * carrying its sender, incarnations, sequence number and checksum; an RMA
 * chain (put, flush, get back, fetch-and-add); and the receives, which
 * complete in the order they were posted, so each sender's messages are
 * checked in the order it sent them.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "soak_rank.h"

#define SOAK_MAGIC 0x4b414f53u  /* "SOAK" */

enum {
    SOAK_MSG_LAYOUT = 1u << 0,
    SOAK_MSG_SYNC   = 1u << 1,
};

typedef struct {
    uint32_t magic;
    uint16_t sender;
    uint16_t flags;       /* SOAK_MSG_* */
    uint32_t sender_inc;
    uint32_t dest_inc;
    uint64_t seq;
    uint32_t length;
    uint32_t checksum;    /* of the bytes after the header */
} soak_msg_hdr_t;

_Static_assert(sizeof(soak_msg_hdr_t) == SOAK_MSG_HDR, "header size");

static const size_t soak_msg_sizes[] = {
    SOAK_MSG_HDR, 64, 200, 1024, 4096, 8192, 16384, 65536, 131072, SOAK_MSG_MAX,
};

static char *soak_scratch;  /* a layout send's packed bytes, before they are spread */

static uint32_t soak_checksum(const unsigned char *p, size_t length)
{
    uint32_t h = 2166136261u;
    size_t   i;

    for (i = 0; i < length; ++i) {
        h = (h ^ p[i]) * 16777619u;
    }
    return h;
}

static uint64_t soak_msg_seed(unsigned sender, unsigned sender_inc, unsigned dest_inc,
                              uint64_t seq)
{
    return ((uint64_t)sender << 48) ^ ((uint64_t)sender_inc << 32) ^ ((uint64_t)dest_inc << 20) ^
           (seq * 0x9e3779b97f4a7c15ull);
}

int soak_traffic_init(soak_rank_t *r)
{
    size_t   layout_bytes = SOAK_MSG_MAX / SOAK_LAYOUT_BLOCK * SOAK_LAYOUT_STRIDE;
    unsigned i, j;

    soak_scratch = malloc(SOAK_MSG_MAX);
    if (soak_scratch == NULL) {
        return -1;
    }
    for (i = 0; i < r->nranks; ++i) {
        soak_peer_t *peer = &r->peers[i];

        if (i == r->me) {
            continue;
        }
        for (j = 0; j < SOAK_SEND_DEPTH; ++j) {
            peer->sends[j].req.rank = r;
            peer->sends[j].buffer   = malloc(layout_bytes);
            if (peer->sends[j].buffer == NULL) {
                return -1;
            }
        }
        peer->rma.req.rank = r;
        peer->rma.local    = malloc(SOAK_RMA_BLOCK);
        peer->rma.back     = malloc(SOAK_RMA_BLOCK);
        if (peer->rma.local == NULL || peer->rma.back == NULL) {
            return -1;
        }
    }
    for (i = 0; i < SOAK_RECVS; ++i) {
        r->recvs[i].req.rank = r;
        r->recvs[i].buffer   = malloc(SOAK_MSG_MAX);
        if (r->recvs[i].buffer == NULL) {
            return -1;
        }
    }
    return 0;
}

void soak_traffic_cleanup(soak_rank_t *r)
{
    unsigned i, j;

    for (i = 0; i < r->nranks; ++i) {
        for (j = 0; j < SOAK_SEND_DEPTH; ++j) {
            free(r->peers[i].sends[j].buffer);
        }
        free(r->peers[i].rma.local);
        free(r->peers[i].rma.back);
    }
    for (i = 0; i < SOAK_RECVS; ++i) {
        free(r->recvs[i].buffer);
    }
    free(soak_scratch);
}

int soak_peer_busy(const soak_peer_t *peer)
{
    unsigned j;

    for (j = 0; j < SOAK_SEND_DEPTH; ++j) {
        if (peer->sends[j].req.busy) {
            return 1;
        }
    }
    return peer->rma.req.busy;
}

void soak_peer_reset_traffic(soak_peer_t *peer)
{
    peer->send_seq = 0;
    peer->sent_ok  = 0;
    peer->rma.step = SOAK_RMA_IDLE;
    peer->rma.seq  = 0;
    peer->rma.adds = 0;
    peer->rma.counter_reset = 0;
}

/* ---------------------------------------------------------------- tag sends */

/* Build message seq for the peer in slot s: packed, or spread over a strided layout. */
static void soak_send_build(soak_rank_t *r, soak_peer_t *peer, soak_send_t *s, size_t length,
                            int layout, int sync)
{
    char           *packed = layout ? soak_scratch : s->buffer;
    soak_msg_hdr_t *hdr    = (soak_msg_hdr_t *)packed;
    size_t          i;

    soak_fill(packed + SOAK_MSG_HDR, length - SOAK_MSG_HDR,
              soak_msg_seed(r->me, r->inc, peer->inc, peer->send_seq));
    hdr->magic      = SOAK_MAGIC;
    hdr->sender     = (uint16_t)r->me;
    hdr->flags      = (uint16_t)((layout ? SOAK_MSG_LAYOUT : 0) | (sync ? SOAK_MSG_SYNC : 0));
    hdr->sender_inc = r->inc;
    hdr->dest_inc   = peer->inc;
    hdr->seq        = peer->send_seq;
    hdr->length     = (uint32_t)length;
    hdr->checksum   = soak_checksum((unsigned char *)packed + SOAK_MSG_HDR,
                                    length - SOAK_MSG_HDR);
    s->length   = length;
    s->dest_inc = peer->inc;
    if (layout) {
        for (i = 0; i < length / SOAK_LAYOUT_BLOCK; ++i) {
            memcpy(s->buffer + i * SOAK_LAYOUT_STRIDE, packed + i * SOAK_LAYOUT_BLOCK,
                   SOAK_LAYOUT_BLOCK);
        }
        s->layout.kind                  = AXON_LAYOUT_STRIDED;
        s->layout.strided.count         = length / SOAK_LAYOUT_BLOCK;
        s->layout.strided.block_length  = SOAK_LAYOUT_BLOCK;
        s->layout.strided.stride        = SOAK_LAYOUT_STRIDE;
        s->layout.strided.block         = NULL;
    }
}

/* 1 started, 0 not now, -1 failed. */
static int soak_send_start(soak_rank_t *r, soak_peer_t *peer, soak_send_t *s)
{
    unsigned             pick   = (unsigned)rand_r(&r->rand_state);
    size_t               length = soak_msg_sizes[pick % (sizeof(soak_msg_sizes) /
                                                         sizeof(soak_msg_sizes[0]))];
    int                  layout = (length % SOAK_LAYOUT_BLOCK == 0) && ((pick >> 8) % 3 == 0);
    int                  sync   = ((pick >> 12) % 8 == 0);
    axon_request_param_t param  = {
        .flags     = AXON_REQ_FLAG_NO_IMM_CMPL | (layout ? AXON_REQ_FLAG_LAYOUT : 0),
        .cb.send   = soak_send_cb,
        .user_data = &s->req,
        .layout    = layout ? &s->layout : NULL,
    };
    axon_request_h       req;
    axon_status_t        status;
    int                  ret;

    soak_send_build(r, peer, s, length, layout, sync);
    soak_req_issue(&s->req);
    status = sync ? axon_tag_send_sync_nb(peer->ep, s->buffer, length, SOAK_TAG, &param, &req)
                  : axon_tag_send_nb(peer->ep, s->buffer, length, SOAK_TAG, &param, &req);
    ret = soak_req_started(&s->req, peer, status);
    if (ret == 1) {
        ++peer->send_seq;
    }
    return ret;
}

static void soak_peer_sends(soak_rank_t *r, soak_peer_t *peer)
{
    unsigned j;

    for (j = 0; j < SOAK_SEND_DEPTH; ++j) {
        soak_send_t *s = &peer->sends[j];

        if (s->req.busy && s->req.done) {
            s->req.busy = 0;
            if (s->req.status != AXON_OK) {
                soak_req_error(peer, s->dest_inc, s->req.status);
            } else if (peer->state == SOAK_PEER_LIVE && s->dest_inc == peer->inc) {
                ++peer->sent_ok;
            }
        }
    }
    for (j = 0; j < SOAK_SEND_DEPTH && r->phase == SOAK_RUN && peer->state == SOAK_PEER_LIVE;
         ++j) {
        if (!peer->sends[j].req.busy && soak_send_start(r, peer, &peer->sends[j]) != 1) {
            break;
        }
    }
}

/* ---------------------------------------------------------------- RMA */

static int soak_rma_issue(soak_rank_t *r, soak_peer_t *peer)
{
    soak_rma_t          *rma  = &peer->rma;
    uint64_t             data = peer->window + (uint64_t)r->me * SOAK_RMA_BLOCK;
    uint64_t             counter = peer->window + (uint64_t)r->nranks * SOAK_RMA_BLOCK +
                                   (uint64_t)r->me * sizeof(uint64_t);
    int                  use_iov = (rma->seq % 4 == 3);
    axon_request_param_t param = {
        .flags = AXON_REQ_FLAG_NO_IMM_CMPL, .cb.send = soak_send_cb, .user_data = &rma->req,
    };
    axon_request_h       req;
    axon_status_t        status = AXON_ERR_INVALID_PARAM;

    soak_req_issue(&rma->req);
    switch (rma->step) {
    case SOAK_RMA_PUT:
        rma->iov[0] = (axon_iov_t){rma->local, rma->length / 2};
        rma->iov[1] = (axon_iov_t){rma->local + rma->length / 2, rma->length - rma->length / 2};
        status = use_iov ? axon_put_iov_nb(peer->ep, rma->iov, 2, data, peer->rkey, &param, &req)
                         : axon_put_nb(peer->ep, rma->local, rma->length, data, peer->rkey,
                                       &param, &req);
        break;
    case SOAK_RMA_FLUSH:
        status = axon_ep_flush_nb(peer->ep, &param, &req);
        break;
    case SOAK_RMA_GET:
        memset(rma->back, 0, rma->length);
        rma->iov[0] = (axon_iov_t){rma->back, rma->length / 2};
        rma->iov[1] = (axon_iov_t){rma->back + rma->length / 2, rma->length - rma->length / 2};
        status = use_iov ? axon_get_iov_nb(peer->ep, rma->iov, 2, data, peer->rkey, &param, &req)
                         : axon_get_nb(peer->ep, rma->back, rma->length, data, peer->rkey,
                                       &param, &req);
        break;
    case SOAK_RMA_RESET:
        rma->one     = 0;
        status = axon_atomic_nb(peer->ep, AXON_ATOMIC_SWAP, sizeof(uint64_t), &rma->one, NULL,
                                &rma->fetched, counter, peer->rkey, &param, &req);
        break;
    case SOAK_RMA_ATOMIC:
        rma->one     = 1;
        rma->fetched = ~0ull;
        status = axon_atomic_nb(peer->ep, AXON_ATOMIC_ADD, sizeof(uint64_t), &rma->one, NULL,
                                &rma->fetched, counter, peer->rkey, &param, &req);
        break;
    default:
        break;
    }
    return soak_req_started(&rma->req, peer, status);
}

/* The step that just completed well: check it, count it, go on. */
static void soak_rma_advance(soak_rank_t *r, soak_peer_t *peer)
{
    soak_rma_t *rma = &peer->rma;
    size_t      bad;

    switch (rma->step) {
    case SOAK_RMA_PUT:
        ++r->stats.rma_puts;
        r->stats.rma_bytes += rma->length;
        rma->step = SOAK_RMA_FLUSH;
        break;
    case SOAK_RMA_FLUSH:
        rma->step = SOAK_RMA_GET;
        break;
    case SOAK_RMA_GET:
        if (memcmp(rma->back, rma->local, rma->length) != 0) {
            for (bad = 0; rma->back[bad] == rma->local[bad]; ++bad) {
            }
            soak_rank_fail(r, "get of %zu bytes from rank %u.%u after a flushed put differs "
                           "at byte %zu", rma->length, peer->index, peer->inc, bad);
        }
        ++r->stats.rma_gets;
        r->stats.rma_bytes += rma->length;
        rma->step = rma->counter_reset ? SOAK_RMA_ATOMIC : SOAK_RMA_RESET;
        break;
    case SOAK_RMA_RESET:
        ++r->stats.atomics;
        rma->counter_reset = 1;
        rma->step          = SOAK_RMA_ATOMIC;
        break;
    case SOAK_RMA_ATOMIC:
        if (rma->fetched != rma->adds) {
            soak_rank_fail(r, "fetch-and-add on rank %u.%u fetched %llu, expected %llu",
                           peer->index, peer->inc, (unsigned long long)rma->fetched,
                           (unsigned long long)rma->adds);
            rma->adds = rma->fetched;  /* report once, not on every later add */
        }
        ++rma->adds;
        ++r->stats.atomics;
        ++rma->seq;
        rma->step = SOAK_RMA_IDLE;
        break;
    default:
        break;
    }
}

static void soak_peer_rma(soak_rank_t *r, soak_peer_t *peer)
{
    soak_rma_t *rma = &peer->rma;

    if (rma->req.busy) {
        if (!rma->req.done) {
            return;
        }
        rma->req.busy = 0;
        if (rma->req.status != AXON_OK) {
            soak_req_error(peer, peer->inc, rma->req.status);
            rma->step = SOAK_RMA_IDLE;
            return;
        }
        soak_rma_advance(r, peer);
    }
    if (peer->state != SOAK_PEER_LIVE || peer->rkey == NULL) {
        /* a chain cut by a failure starts over on the new peer; no key: failed already */
        rma->step = SOAK_RMA_IDLE;
        return;
    }
    if (rma->step == SOAK_RMA_IDLE) {
        if (r->phase != SOAK_RUN) {
            return;
        }
        rma->length = 8 + (size_t)rand_r(&r->rand_state) % (SOAK_RMA_BLOCK - 8);
        soak_fill(rma->local, rma->length,
                  soak_msg_seed(r->me, r->inc, peer->inc, rma->seq) ^ 0x5a5a5a5aull);
        rma->step = SOAK_RMA_PUT;
    }
    if (soak_rma_issue(r, peer) < 0) {
        rma->step = SOAK_RMA_IDLE;
    }
}

void soak_peer_traffic(soak_rank_t *r, soak_peer_t *peer)
{
    soak_peer_sends(r, peer);
    soak_peer_rma(r, peer);
}

/* ---------------------------------------------------------------- receives */

static void soak_recv_post(soak_rank_t *r, soak_recv_t *rv)
{
    axon_request_param_t param = {
        .flags = AXON_REQ_FLAG_NO_IMM_CMPL, .cb.recv = soak_recv_cb, .user_data = &rv->req,
    };
    axon_status_t        status;

    soak_req_issue(&rv->req);
    status = axon_tag_recv_nb(r->worker, rv->buffer, SOAK_MSG_MAX, SOAK_TAG, AXON_TAG_MASK_FULL,
                              &param, &rv->handle);
    if (status != AXON_INPROGRESS) {
        rv->req.busy = 0;
        soak_rank_fail(r, "posting a receive failed: %s", axon_status_string(status));
    }
}

void soak_recvs_post(soak_rank_t *r)
{
    unsigned i;

    for (i = 0; i < SOAK_RECVS; ++i) {
        soak_recv_post(r, &r->recvs[(r->recv_head + i) % SOAK_RECVS]);
    }
}

static void soak_recv_check(soak_rank_t *r, soak_recv_t *rv)
{
    const soak_msg_hdr_t *hdr    = (const soak_msg_hdr_t *)rv->buffer;
    size_t                length = rv->req.info.length;
    soak_peer_t          *peer;
    size_t                bad;

    if (length < SOAK_MSG_HDR || hdr->magic != SOAK_MAGIC || hdr->length != length ||
        hdr->sender >= r->nranks || hdr->sender == r->me) {
        soak_rank_fail(r, "a message of %zu bytes has a bad header (magic %x, sender %u, "
                       "length %u)", length, hdr->magic, hdr->sender, hdr->length);
        return;
    }
    peer = &r->peers[hdr->sender];
    if (hdr->dest_inc != r->inc) {
        soak_rank_fail(r, "message %llu from rank %u.%u was for incarnation %u",
                       (unsigned long long)hdr->seq, hdr->sender, hdr->sender_inc,
                       hdr->dest_inc);
    }
    if (soak_checksum((const unsigned char *)rv->buffer + SOAK_MSG_HDR,
                      length - SOAK_MSG_HDR) != hdr->checksum ||
        !soak_check(rv->buffer + SOAK_MSG_HDR, length - SOAK_MSG_HDR,
                    soak_msg_seed(hdr->sender, hdr->sender_inc, hdr->dest_inc, hdr->seq),
                    &bad)) {
        soak_rank_fail(r, "message %llu (%zu bytes) from rank %u.%u is corrupt at byte %zu",
                       (unsigned long long)hdr->seq, length, hdr->sender, hdr->sender_inc,
                       bad + SOAK_MSG_HDR);
    }
    if ((int)hdr->sender_inc > peer->rx_inc) {
        peer->rx_inc             = (int)hdr->sender_inc;
        peer->rx_next_seq        = 0;
        r->rx_count[hdr->sender] = 0;
    }
    if ((int)hdr->sender_inc == peer->rx_inc) {
        if (hdr->seq < peer->rx_next_seq) {
            soak_rank_fail(r, "from rank %u.%u came message %llu after %llu (duplicated or "
                           "reordered)", hdr->sender, hdr->sender_inc,
                           (unsigned long long)hdr->seq,
                           (unsigned long long)peer->rx_next_seq - 1);
        } else if (hdr->seq > peer->rx_next_seq) {
            peer->gap_inc_max = (int)hdr->sender_inc;  /* checked at the end */
            if (r->params->verbose) {
                printf("axon_soak rank %u.%u: messages %llu..%llu from rank %u.%u missing\n",
                       r->me, r->inc, (unsigned long long)peer->rx_next_seq,
                       (unsigned long long)hdr->seq - 1, hdr->sender, hdr->sender_inc);
            }
        }
        peer->rx_next_seq = hdr->seq + 1;
        ++r->rx_count[hdr->sender];
    } else {
        ++r->stats.stale_msgs;
    }
    ++r->stats.msgs;
    r->stats.bytes += length;
    r->stats.layout_msgs += !!(hdr->flags & SOAK_MSG_LAYOUT);
    r->stats.sync_msgs += !!(hdr->flags & SOAK_MSG_SYNC);
}

/* Check what arrived, in the order posted, and post again (until the end). */
void soak_recvs_handle(soak_rank_t *r)
{
    soak_recv_t *rv;

    for (;;) {
        rv = &r->recvs[r->recv_head];
        if (!rv->req.busy || !rv->req.done) {
            return;
        }
        rv->req.busy = 0;
        if (rv->req.status == AXON_OK) {
            soak_recv_check(r, rv);
        } else if (r->phase != SOAK_EXIT || rv->req.status != AXON_ERR_CANCELED) {
            /* a message from a killed sender, cut short */
            ++r->stats.req_errors;
            if (r->recv_err_count < sizeof(r->recv_err_ids) / sizeof(r->recv_err_ids[0])) {
                r->recv_err_ids[r->recv_err_count++] = rv->req.info.sender_id;
            }
        }
        r->recv_head = (r->recv_head + 1) % SOAK_RECVS;
        if (r->phase != SOAK_EXIT) {
            soak_recv_post(r, rv);
        }
    }
}
