/*
 * Rendezvous of layouts by lent runs, over lanes that move data between
 * pieces on both sides at once (ep_get_zcopy_riov: shm's cross-memory
 * attach takes a list of local and a list of remote iovecs per call).
 *
 *   sender (layout)                 receiver (layout or not)
 *   its runs as iovecs, lent ─ RTS (RUNS, address, count) ─▶ read the runs,
 *                                   read the data: its runs into ours, one call
 *        ◀──────────────────────────────────── ATS
 *   large messages split as contiguous ones do (rndv.c): the receiver reads
 *   [0, offset) and lends its runs for the rest; the sender reads those and
 *   writes [offset, length) into them:
 *        ◀─────────────── RTR (offset, put_address = runs, put_runs = count)
 *   read runs, write ──────────────── PUT_DONE ──▶ ATS when both are in
 *
 * A layout on one side only is the same with one run on the other. No byte
 * is copied twice and no side packs; a run list is read once per message.
 */
#include <stdlib.h>
#include <string.h>
#include "log.h"
#include "request.h"
#include "tag_proto.h"

/* Most runs lent for one message (16 bytes each): larger layouts are streamed. */
#define AXON_RNDV_RUNS_MAX (64 * 1024)

/* Bytes the receiver reads of a contiguous sender's buffer to learn whether it may. */
#define AXON_RNDV_RUNS_PROBE 8

/* Can lane move a layout's data by lent runs? */
static inline int axon_rndv_runs_lane(const axon_lane_t *lane)
{
    return !(lane->resource->cap_flags & AXON_CAP_NEED_MKEY) &&
           (lane->resource->cap_flags & AXON_CAP_GET) && (lane->ops->ep_get_zcopy_riov != NULL);
}

/* Runs of cursor's packed [from, to) (non-empty ones): how many, and into runs when not NULL. */
static size_t axon_rndv_runs_walk(axon_layout_cursor_t *cursor, size_t from, size_t to,
                                  struct iovec *runs)
{
    size_t pos, len, n = 0;
    uint8_t *p;

    for (pos = from; pos < to; pos += len, ++n) {
        p   = axon_layout_cursor_run(cursor, pos, &len);
        len = (len < to - pos) ? len : to - pos;
        if (runs != NULL) {
            runs[n].iov_base = p;
            runs[n].iov_len  = len;
        }
    }
    return n;
}

/* The data [from, to) of a request's buffer as runs: its layout's, or one. */
static size_t axon_rndv_runs_count(axon_layout_cursor_t *cursor, int layout, size_t from,
                                   size_t to)
{
    return !layout ? (to > from) : axon_rndv_runs_walk(cursor, from, to, NULL);
}

static void axon_rndv_runs_fill(axon_layout_cursor_t *cursor, int layout, uint8_t *buffer,
                                size_t from, size_t to, struct iovec *runs)
{
    if (layout) {
        axon_rndv_runs_walk(cursor, from, to, runs);
    } else if (to > from) {
        runs->iov_base = buffer + from;
        runs->iov_len  = to - from;
    }
}

void axon_rndv_runs_lend(axon_request_h req)
{
    const axon_ep_h ep = req->send.ep;
    struct iovec *runs;
    size_t count;

    /* Whether a get pays is the receiver's choice (its rndv_get_min): lend anyway. */
    if (!(req->flags & AXON_REQUEST_LAYOUT) || !axon_rndv_runs_lane(&ep->bulk_lane)) {
        return;
    }
    count = axon_rndv_runs_walk(&req->send.cursor, 0, req->send.length, NULL);
    if ((count == 0) || (count > AXON_RNDV_RUNS_MAX)) {
        return;  /* streamed */
    }
    runs = axon_request_runs_get(req->worker, count);
    if (runs == NULL) {
        axon_debug("no memory for the %zu runs of a rendezvous send: it streams", count);
        return;
    }
    axon_rndv_runs_walk(&req->send.cursor, 0, req->send.length, runs);
    req->send.rndv_runs       = runs;
    req->send.rndv_runs_count = count;
    req->flags               |= AXON_REQUEST_RNDV_RUNS;
}

/*
 * count runs the peer lent at address, read into runs: AXON_OK when they
 * hold exactly length bytes; AXON_ERR_UNSUPPORTED when the lane may not
 * read the peer's memory.
 */
static axon_status_t axon_rndv_runs_borrow(const axon_lane_t *lane, uint64_t address,
                                           size_t count, size_t length, struct iovec *runs,
                                           uint64_t peer_uuid)
{
    axon_status_t status;
    size_t i, total = 0;

    status = lane->ops->ep_get_zcopy(lane->tl_ep, runs, count * sizeof(*runs), address, NULL,
                                     NULL);
    if (status != AXON_OK) {
        return status;
    }
    /* No sum of the peer's lengths may wrap: each run must fit what is left. */
    for (i = 0; (i < count) && (runs[i].iov_len <= length - total); ++i) {
        total += runs[i].iov_len;
    }
    if ((i < count) || (total != length)) {
        axon_error("peer %016llx lent %zu runs whose lengths do not add up to %zu bytes "
                   "(run %zu of %zu bytes after %zu)", (unsigned long long)peer_uuid, count,
                   length, i, (i < count) ? runs[i].iov_len : 0, total);
        return AXON_ERR_IO_FORMAT;
    }
    return AXON_OK;
}

/* The first runs holding length bytes (cut inside one if need be): how many. */
static size_t axon_rndv_runs_trim(struct iovec *runs, size_t count, size_t length)
{
    size_t i;

    for (i = 0; (i < count) && (length > 0); ++i) {
        if (runs[i].iov_len >= length) {
            runs[i].iov_len = length;
            return i + 1;
        }
        length -= runs[i].iov_len;
    }
    return i;
}

/*
 * Receiver: the sender's runs (lent, or its contiguous buffer as one) into
 * ours, split with the sender when large and the lane can put. Runs of
 * less than AXON_RNDV_RUNS_MIN bytes on average on either side: the sender
 * streams instead (the kernel pins the pages of each remote run of a single
 * copy separately, ~0.5 us a run: 64-byte runs went 11x, 512-byte runs
 * 3.6x slower than streaming; docs/performance.md, "shm layout keys").
 */
axon_status_t axon_rndv_runs_recv(axon_request_h req, axon_ep_h ep,
                                  const axon_rndv_rts_hdr_t *rts, size_t want)
{
    const axon_lane_t *lane = &ep->bulk_lane;
    int layout = !!(req->flags & AXON_REQUEST_LAYOUT);
    size_t nremote = (rts->flags & AXON_RNDV_RTS_RUNS) ? rts->runs_count : 1;
    size_t offset = want, nlocal, nlent = 0;
    struct iovec *remote, *local, *lent;
    axon_status_t status;
    uint64_t probe;

    if (!(layout || (rts->flags & AXON_RNDV_RTS_RUNS)) || !axon_rndv_runs_lane(lane) ||
        (rts->flags & AXON_RNDV_RTS_KEY_ONLY) || !axon_rndv_get_pays(ep, want) ||
        (nremote == 0) || (nremote > AXON_RNDV_RUNS_MAX)) {
        return AXON_ERR_UNSUPPORTED;
    }
    if (want / nremote < req->worker->context->opts.rndv_runs_min) {
        return AXON_ERR_UNSUPPORTED;
    }
    if (axon_rndv_split_pays(req->worker, want) &&
        (lane->resource->cap_flags & AXON_CAP_PUT) && (lane->ops->ep_put_zcopy_riov != NULL)) {
        offset = axon_rndv_split_offset(want);
        nlent  = axon_rndv_runs_count(&req->recv.cursor, layout, offset, want);
    }
    nlocal = axon_rndv_runs_count(&req->recv.cursor, layout, 0, offset);
    if (want / (nlocal + nlent) < req->worker->context->opts.rndv_runs_min) {
        return AXON_ERR_UNSUPPORTED;
    }
    remote = axon_request_runs_get(req->worker, nremote + nlocal + nlent);
    if (remote == NULL) {
        axon_debug("no memory for %zu runs of a rendezvous receive: it streams",
                   nremote + nlocal + nlent);
        return AXON_ERR_UNSUPPORTED;
    }
    local = remote + nremote;
    lent  = local + nlocal;
    axon_rndv_runs_fill(&req->recv.cursor, layout, req->recv.buffer, 0, offset, local);
    axon_rndv_runs_fill(&req->recv.cursor, layout, req->recv.buffer, offset, want, lent);

    /* Reading the sender's runs (or a few of its bytes) proves we may read it. */
    if (rts->flags & AXON_RNDV_RTS_RUNS) {
        status = axon_rndv_runs_borrow(lane, rts->address, nremote, rts->length, remote,
                                       rts->m.sender_uuid);
    } else {
        remote->iov_base = (void*)(uintptr_t)rts->address;
        remote->iov_len  = rts->length;
        status = lane->ops->ep_get_zcopy(lane->tl_ep, &probe, AXON_RNDV_RUNS_PROBE,
                                         rts->address, NULL, NULL);
    }
    if (status == AXON_ERR_UNSUPPORTED) {
        axon_request_runs_put(req->worker, remote);
        return status;   /* streamed */
    }
    req->recv.rndv_runs = remote;
    req->flags         |= AXON_REQUEST_RNDV_RUNS;
    nremote = axon_rndv_runs_trim(remote, nremote, offset);

    if ((status == AXON_OK) && (offset < want)) {
        req->recv.rndv_split = AXON_RNDV_SPLIT_HALF;
        status = axon_rndv_send_rtr(req, ep, want, offset,
                                    layout ? (uint64_t)(uintptr_t)lent :
                                             (uint64_t)(uintptr_t)req->recv.buffer,
                                    layout ? nlent : 0);
        if (status != AXON_OK) {
            axon_request_complete(req, status);
            return AXON_OK;
        }
        status = lane->ops->ep_get_zcopy_riov(lane->tl_ep, local, nlocal, remote, nremote, NULL);
        axon_rndv_recv_part_done(req, offset, status);
        return AXON_OK;
    }
    if (status == AXON_OK) {
        status = lane->ops->ep_get_zcopy_riov(lane->tl_ep, local, nlocal, remote, nremote, NULL);
        if (status == AXON_ERR_UNSUPPORTED) {
            return status;   /* streamed; the runs go with the request */
        }
    }
    axon_rndv_recv_got(req, status);
    return AXON_OK;
}

/*
 * Sender, asked by an RTR to write [offset, length) where a layout is on
 * either side: our runs (or buffer) into the receiver's lent runs (or
 * buffer). AXON_OK when tried (*status_p: how it went); AXON_ERR_UNSUPPORTED
 * when this lane cannot, nothing written (the caller streams).
 */
axon_status_t axon_rndv_runs_put(axon_request_h req, const axon_rndv_rtr_hdr_t *rtr,
                                 axon_status_t *status_p)
{
    const axon_lane_t *lane = &req->send.ep->bulk_lane;
    int layout = !!(req->flags & AXON_REQUEST_LAYOUT);
    size_t nremote = (rtr->put_runs > 0) ? rtr->put_runs : 1, nlocal;
    size_t length = rtr->length - rtr->offset;
    struct iovec *remote, *local;
    axon_status_t status;

    if (!(layout || (rtr->put_runs > 0)) || !axon_rndv_runs_lane(lane) ||
        !(lane->resource->cap_flags & AXON_CAP_PUT) || (lane->ops->ep_put_zcopy_riov == NULL)) {
        return AXON_ERR_UNSUPPORTED;
    }
    if (nremote > AXON_RNDV_RUNS_MAX) {
        axon_error("peer %016llx lends %llu runs, at most %d are taken",
                   (unsigned long long)rtr->from_uuid, (unsigned long long)rtr->put_runs,
                   AXON_RNDV_RUNS_MAX);
        *status_p = AXON_ERR_IO_FORMAT;
        return AXON_OK;
    }
    nlocal = axon_rndv_runs_count(&req->send.cursor, layout, rtr->offset, rtr->length);
    remote = axon_request_runs_get(req->worker, nremote + nlocal);
    if (remote == NULL) {
        return AXON_ERR_UNSUPPORTED;
    }
    local = remote + nremote;
    axon_rndv_runs_fill(&req->send.cursor, layout, (uint8_t*)req->send.buffer, rtr->offset,
                        rtr->length, local);
    if (rtr->put_runs > 0) {
        status = axon_rndv_runs_borrow(lane, rtr->put_address, nremote, length, remote,
                                       rtr->from_uuid);
    } else {
        remote->iov_base = (void*)(uintptr_t)(rtr->put_address + rtr->offset);
        remote->iov_len  = length;
        status = AXON_OK;
    }
    if (status == AXON_OK) {
        status = lane->ops->ep_put_zcopy_riov(lane->tl_ep, local, nlocal, remote, nremote, NULL);
    }
    axon_request_runs_put(req->worker, remote);
    if (status == AXON_ERR_UNSUPPORTED) {
        return status;
    }
    *status_p = status;
    return AXON_OK;
}
