/*
 * Rendezvous: large messages move only once the receiver has matched them.
 *
 *   sender                         receiver
 *   RTS (AM lane, in order) ──────▶ match
 *                                   get from the sender's memory (shm: CMA, self: memcpy)
 *        ◀────────────────────────  ATS             — single copy, sender idle
 *   or, when the lane cannot get or a get costs more (AXON_RNDV_SCHEME, axon_rndv_get_min):
 *        ◀────────────────────────  RTR (length wanted)
 *   DATA (zero-copy, or pipelined bcopy fragments) ──▶ written into the receive buffer
 *
 * Split, for large messages on a lane that can both get and put (shm CMA):
 * the receiver reads a first chunk (which proves it may), sends an RTR with
 * its buffer's address for the second half and reads the first half while
 * the sender writes the second; both cores copy at once, each byte once.
 *        ◀────────────────────────  RTR (offset, put_address)
 *   put [offset, length)            get [0, offset)
 *   PUT_DONE ──────────────────────▶
 *        ◀────────────────────────  ATS             — when both halves are in
 * A sender that may not put (ptrace rules are not symmetric) sends its half
 * as DATA instead; either way it completes on the ATS, since the receiver
 * reads its buffer until then.
 */
#include <stdlib.h>
#include <string.h>
#include "log.h"
#include "sys.h"
#include "request.h"
#include "tag_proto.h"

static void axon_rndv_recv_finish(axon_request_h req, axon_status_t status)
{
    if ((status == AXON_OK) && (req->recv.info.length > req->recv.length)) {
        status = AXON_ERR_MSG_TRUNCATED;
    }
    axon_request_complete(req, status);
}

static void axon_rndv_send_ats(axon_worker_h worker, axon_ep_h ep, uint64_t sreq_id,
                               axon_status_t status)
{
    axon_rndv_ats_hdr_t ats = {sreq_id, worker->uuid, status};

    if ((axon_ep_send_ctrl(ep, AXON_AM_RNDV_ATS, &ats, sizeof(ats)) != AXON_OK) &&
        (ep->status == AXON_OK)) {  /* a dead peer needs no answer */
        axon_warn("could not tell peer %016llx that rendezvous %llu is done",
                  (unsigned long long)ep->peer_uuid, (unsigned long long)sreq_id);
    }
}

void axon_rndv_recv_got(axon_request_h req, axon_status_t status)
{
    axon_worker_h worker = req->worker;
    axon_ep_h ep;

    ep = axon_peer_reply_ep(worker, req->peer_uuid);
    if (ep != NULL) {
        axon_rndv_send_ats(worker, ep, req->recv.sreq_id, status);
    }
    axon_rndv_recv_finish(req, status);
}

static void axon_rndv_get_done(axon_tl_completion_t *comp, axon_status_t status)
{
    axon_request_h req = axon_container_of(comp, struct axon_request, tl_comp);

    req->flags &= ~AXON_REQUEST_TL_BUSY;
    axon_rndv_recv_got(req, status);
}

/* Bytes the receiver itself reads first, to learn whether it may, before splitting. */
#define AXON_RNDV_SPLIT_PROBE 4096

/*
 * length more bytes of a rendezvous receive are in place (or failed). The
 * receive completes once every byte is accounted for, never earlier: a
 * failed half must not release a buffer the other half still writes.
 */
void axon_rndv_recv_part_done(axon_request_h req, size_t length, axon_status_t status)
{
    axon_ep_h ep;

    if ((status != AXON_OK) && (req->recv.rndv_status == AXON_OK)) {
        req->recv.rndv_status = status;
    }
    req->recv.received += length;
    if (req->recv.received < req->recv.expected) {
        return;
    }
    axon_request_id_del(req);
    if (req->recv.rndv_split) {
        ep = axon_peer_reply_ep(req->worker, req->peer_uuid);
        if (ep != NULL) {
            axon_rndv_send_ats(req->worker, ep, req->recv.sreq_id, req->recv.rndv_status);
        }
    }
    axon_rndv_recv_finish(req, req->recv.rndv_status);
}

axon_status_t axon_rndv_send_rtr(axon_request_h req, axon_ep_h ep, size_t length, size_t offset,
                                 uint64_t put_address, uint64_t put_runs)
{
    axon_rndv_rtr_hdr_t rtr;
    axon_status_t status;

    axon_request_id_add(req, req->peer_uuid);
    rtr.sreq_id     = req->recv.sreq_id;
    rtr.from_uuid   = req->worker->uuid;
    rtr.rreq_id     = req->id;
    rtr.length      = length;
    rtr.offset      = offset;
    rtr.put_address = put_address;
    rtr.put_runs    = put_runs;
    status = axon_ep_send_ctrl(ep, AXON_AM_RNDV_RTR, &rtr, sizeof(rtr));
    if (status != AXON_OK) {
        axon_request_id_del(req);
    }
    return status;
}

static void axon_rndv_split_get_done(axon_tl_completion_t *comp, axon_status_t status)
{
    axon_request_h req = axon_container_of(comp, struct axon_request, tl_comp);

    req->flags &= ~AXON_REQUEST_TL_BUSY;
    axon_rndv_recv_part_done(req, axon_rndv_split_offset(req->recv.expected) -
                                  AXON_RNDV_SPLIT_PROBE, status);
}

/*
 * Try the split protocol: AXON_OK when started (or failed and completed),
 * AXON_ERR_UNSUPPORTED when the caller should use another protocol.
 */
static axon_status_t axon_rndv_recv_split(axon_request_h req, axon_ep_h ep,
                                          const axon_rndv_rts_hdr_t *rts, size_t want)
{
    axon_worker_h worker = req->worker;
    axon_lane_t *lane = &ep->bulk_lane;
    size_t offset = axon_rndv_split_offset(want);
    axon_status_t status;

    if (!axon_rndv_split_pays(worker, want) || (offset <= AXON_RNDV_SPLIT_PROBE) ||
        !(lane->resource->cap_flags & AXON_CAP_PUT) || (lane->ops->ep_put_zcopy == NULL)) {
        return AXON_ERR_UNSUPPORTED;
    }
    status = lane->ops->ep_get_zcopy(lane->tl_ep, req->recv.buffer, AXON_RNDV_SPLIT_PROBE,
                                     rts->address, NULL, NULL);
    if (status == AXON_ERR_UNSUPPORTED) {
        return status;
    }
    if (status != AXON_OK) {
        /* Nothing asked of the sender yet: answer as a failed get. */
        axon_rndv_get_done(&req->tl_comp, status);
        return AXON_OK;
    }

    req->recv.rndv_split = AXON_RNDV_SPLIT_HALF;
    req->recv.received   = AXON_RNDV_SPLIT_PROBE;
    status = axon_rndv_send_rtr(req, ep, want, offset, (uint64_t)(uintptr_t)req->recv.buffer, 0);
    if (status != AXON_OK) {
        axon_request_complete(req, status);
        return AXON_OK;
    }

    req->tl_comp.func = axon_rndv_split_get_done;
    req->flags       |= AXON_REQUEST_TL_BUSY;
    status = lane->ops->ep_get_zcopy(lane->tl_ep, req->recv.buffer + AXON_RNDV_SPLIT_PROBE,
                                     offset - AXON_RNDV_SPLIT_PROBE,
                                     rts->address + AXON_RNDV_SPLIT_PROBE, NULL, &req->tl_comp);
    if (status != AXON_INPROGRESS) {
        axon_rndv_split_get_done(&req->tl_comp, status);
    }
    return AXON_OK;
}

/*
 * More runs than one batch: all of them in one operation, where the lane
 * takes a list that long (rc, dc: one read through the domain's cached key
 * over the list). The list is the request's until it completes
 * (AXON_REQUEST_RNDV_RUNS). AXON_ERR_UNSUPPORTED: the lane did not take it.
 */
static axon_status_t axon_rndv_recv_get_long(axon_request_h req, const axon_lane_t *lane,
                                             const axon_rndv_rts_hdr_t *rts, const void *rkey,
                                             size_t want)
{
    struct iovec *iov;
    size_t pos, len, n = 0;
    axon_status_t status;

    if (req->flags & AXON_REQUEST_RNDV_RUNS) {
        return AXON_ERR_UNSUPPORTED;
    }
    for (pos = 0; pos < want; pos += len, ++n) {
        (void)axon_layout_cursor_run(&req->recv.cursor, pos, &len);
        len = (len < want - pos) ? len : want - pos;
    }
    iov = axon_request_runs_get(req->worker, n);
    if (iov == NULL) {
        return AXON_ERR_UNSUPPORTED;
    }
    for (pos = 0, n = 0; pos < want; pos += len, ++n) {
        iov[n].iov_base = axon_layout_cursor_run(&req->recv.cursor, pos, &len);
        len             = (len < want - pos) ? len : want - pos;
        iov[n].iov_len  = len;
    }
    req->tl_comp.func = axon_rndv_get_done;
    req->flags       |= AXON_REQUEST_TL_BUSY;
    status = lane->ops->ep_get_zcopy_iov(lane->tl_ep, iov, n, rts->address, rkey,
                                         &req->tl_comp);
    if (status == AXON_INPROGRESS) {
        req->recv.rndv_runs = iov;
        req->flags         |= AXON_REQUEST_RNDV_RUNS;
        return AXON_OK;
    }
    req->flags &= ~AXON_REQUEST_TL_BUSY;
    axon_request_runs_put(req->worker, iov);
    if ((status == AXON_ERR_UNSUPPORTED) || (status == AXON_ERR_NO_RESOURCE)) {
        return AXON_ERR_UNSUPPORTED;
    }
    axon_rndv_get_done(&req->tl_comp, status);
    return AXON_OK;
}

/*
 * A receiving layout reads the sender's data (through its key: rc) into its
 * runs, AXON_TL_IOV_MAX runs per operation in the worker's array (the
 * transport takes the list at the call, as rma.c's ops do): rc reads up to
 * that many runs in one RDMA read through a local UMR key, more in one read
 * through a cached key over the whole list (axon_rndv_recv_get_long). AXON_OK
 * when the receive is done or failed; AXON_ERR_UNSUPPORTED when nothing was
 * read and the sender should stream instead.
 */
static axon_status_t axon_rndv_recv_get_layout(axon_request_h req, const axon_lane_t *lane,
                                               const axon_rndv_rts_hdr_t *rts, const void *rkey,
                                               size_t want)
{
    struct iovec *iov = req->worker->zcopy_iov;
    size_t pos = 0, start, len, n;
    axon_status_t status = AXON_OK;

    while ((pos < want) && (status == AXON_OK)) {
        for (start = pos, n = 0; (n < AXON_TL_IOV_MAX) && (pos < want); ++n, pos += len) {
            iov[n].iov_base = axon_layout_cursor_run(&req->recv.cursor, pos, &len);
            len             = (len < want - pos) ? len : want - pos;
            iov[n].iov_len  = len;
        }
        if ((start == 0) && (pos == want)) {
            /* all in one operation: it may complete later (rc's UMR key) */
            req->tl_comp.func = axon_rndv_get_done;
            req->flags       |= AXON_REQUEST_TL_BUSY;
            status = lane->ops->ep_get_zcopy_iov(lane->tl_ep, iov, n, rts->address, rkey,
                                                 &req->tl_comp);
            if (status == AXON_INPROGRESS) {
                return AXON_OK;
            }
            req->flags &= ~AXON_REQUEST_TL_BUSY;
        } else if ((start == 0) &&
                   (axon_rndv_recv_get_long(req, lane, rts, rkey, want) == AXON_OK)) {
            return AXON_OK;
        } else {
            status = lane->ops->ep_get_zcopy_iov(lane->tl_ep, iov, n, rts->address + start,
                                                 rkey, NULL);
        }
        if (((status == AXON_ERR_UNSUPPORTED) || (status == AXON_ERR_NO_RESOURCE)) &&
            (start == 0)) {
            return AXON_ERR_UNSUPPORTED;   /* streamed instead */
        }
    }
    axon_rndv_get_done(&req->tl_comp, status);
    return AXON_OK;
}

/* Entries of a sending layout's key kept on the stack (more: allocated for the message). */
#define AXON_RNDV_LAYOUT_ENTRIES 16

/*
 * A sending layout as one key, where the lane's domain makes layout keys
 * (rc's UMR): the receiver then reads the packed data in one operation.
 */
static axon_status_t axon_rndv_send_reg_layout(axon_request_h req, axon_md_t *md, void **memh_p)
{
    axon_md_layout_entry_t room[AXON_RNDV_LAYOUT_ENTRIES], *entries;
    axon_md_layout_t md_layout;
    axon_status_t status;

    if (md->ops->mem_reg_layout == NULL) {
        return AXON_ERR_UNSUPPORTED;
    }
    status = axon_layout_md_make(req->send.cursor.layout, req->send.buffer, req->send.length,
                                 room, AXON_RNDV_LAYOUT_ENTRIES, &md_layout, &entries);
    if (status == AXON_OK) {
        status = md->ops->mem_reg_layout(md, &md_layout, AXON_MEM_REG_TRANSIENT, memh_p);
        free(entries);
    }
    return status;
}

void axon_rndv_send_register(axon_request_h req)
{
    const axon_lane_t *lane = &req->send.ep->bulk_lane;
    axon_md_t *md = lane->md;
    axon_status_t status;
    void *memh;

    if (!(lane->resource->cap_flags & AXON_CAP_NEED_MKEY)) {
        axon_rndv_runs_lend(req);   /* a layout's runs, for lanes that read them */
        return;
    }
    if (!(lane->resource->cap_flags & AXON_CAP_GET) || (md == NULL) ||
        (md->ops->rkey_max_len > AXON_RNDV_RKEY_MAX)) {
        return;
    }
    status = (req->flags & AXON_REQUEST_LAYOUT) ?
             axon_rndv_send_reg_layout(req, md, &memh) :
             md->ops->mem_reg(md, (void *)(uintptr_t)req->send.buffer, req->send.length,
                              AXON_MEM_REG_TRANSIENT, &memh);
    if (status != AXON_OK) {
        /* The receiver then asks for the data with an RTR. */
        axon_debug("%s: rendezvous buffer %p of %zu bytes not registered: %s",
                   lane->resource->tl_name, (const void *)req->send.buffer, req->send.length,
                   axon_status_string(status));
        return;
    }
    req->send.rndv_memh       = memh;
    req->send.rndv_memh_md    = md;
    req->flags               |= AXON_REQUEST_RNDV_MEMH;
    axon_rndv_rails_register(req);
}

void axon_rndv_rts_pack(axon_request_h req, axon_rndv_rts_hdr_t *rts)
{
    const axon_lane_t *lane = &req->send.ep->bulk_lane;

    memset(rts, 0, sizeof(*rts));
    axon_tag_match_hdr_pack(&rts->m, req);
    rts->length      = req->send.length;
    rts->sreq_id     = req->id;
    rts->address     = (uint64_t)(uintptr_t)req->send.buffer;
    /* a layout is read only through a key of its own or its lent runs (else the
     * sender streams it) */
    rts->flags       = !(req->flags & AXON_REQUEST_LAYOUT) ? 0 :
                       (req->flags & AXON_REQUEST_RNDV_MEMH) ? AXON_RNDV_RTS_KEY_ONLY :
                                                               AXON_RNDV_RTS_NO_GET;
    if (req->flags & AXON_REQUEST_RNDV_RUNS) {
        rts->flags      |= AXON_RNDV_RTS_RUNS;
        rts->address     = (uint64_t)(uintptr_t)req->send.rndv_runs;
        rts->runs_count  = req->send.rndv_runs_count;
    }
    if (req->flags & AXON_REQUEST_RNDV_MEMH) {
        memcpy(rts->rkey_tl, lane->resource->tl_name, sizeof(rts->rkey_tl));
        rts->rkey_len = (uint32_t)lane->md->ops->rkey_pack(lane->md, req->send.rndv_memh,
                                                           rts->rkey);
    }
}

/*
 * The key to get the sender's buffer with over lane: NULL for lanes that need
 * none; else the RTS's key if it was packed by the same transport. *usable
 * says whether a get may be tried at all.
 */
static const void *axon_rndv_rts_rkey(const axon_lane_t *lane, const axon_rndv_rts_hdr_t *rts,
                                      int *usable)
{
    *usable = 1;
    if (!(lane->resource->cap_flags & AXON_CAP_NEED_MKEY)) {
        *usable = !(rts->flags & AXON_RNDV_RTS_KEY_ONLY);
        return NULL;
    }
    if ((rts->rkey_len == 0) || (rts->rkey_len > AXON_RNDV_RKEY_MAX) ||
        (strncmp(rts->rkey_tl, lane->resource->tl_name, sizeof(rts->rkey_tl)) != 0)) {
        *usable = 0;
    }
    return rts->rkey;
}

void axon_rndv_recv_start(axon_request_h req, const axon_rndv_rts_hdr_t *rts)
{
    axon_worker_h worker = req->worker;
    size_t want = (rts->length < req->recv.length) ? rts->length : req->recv.length;
    axon_status_t status;
    axon_lane_t *lane;
    const void *rkey;
    axon_ep_h ep;
    int get_ok;

    axon_tag_info_set(&req->recv.info, &rts->m, rts->length);
    req->recv.sreq_id         = rts->sreq_id;
    req->recv.received        = 0;
    req->recv.expected        = want;
    req->recv.rndv_status     = AXON_OK;
    req->recv.rndv_split      = AXON_RNDV_SPLIT_NONE;
    req->peer_uuid            = rts->m.sender_uuid;

    ep = axon_peer_reply_ep(worker, rts->m.sender_uuid);
    if (ep == NULL) {
        axon_request_complete(req, axon_peer_gone_status(worker, rts->m.sender_uuid));
        return;
    }
    if (ep->status != AXON_OK) {
        axon_request_complete(req, ep->status);
        return;
    }
    if (want == 0) {
        axon_rndv_send_ats(worker, ep, rts->sreq_id, AXON_OK);
        axon_rndv_recv_finish(req, AXON_OK);
        return;
    }

    if (axon_rndv_runs_recv(req, ep, rts, want) == AXON_OK) {
        return;   /* a layout on either side, over a lane that reads runs */
    }
    lane = &ep->bulk_lane;
    rkey = axon_rndv_rts_rkey(lane, rts, &get_ok);
    /* A sender's layout is read through its layout key (rc's UMR) or else streamed
     * (gathered there); a receiving layout gets where the lane reads into several
     * pieces at once, else is streamed too (scattered here). */
    get_ok = get_ok && !(rts->flags & AXON_RNDV_RTS_NO_GET) &&
             (lane->resource->cap_flags & AXON_CAP_GET) && axon_rndv_get_pays(ep, want);
    if (req->flags & AXON_REQUEST_LAYOUT) {
        if (get_ok && (lane->ops->ep_get_zcopy_iov != NULL) &&
            (axon_rndv_recv_get_layout(req, lane, rts, rkey, want) == AXON_OK)) {
            return;
        }
    } else if (get_ok && (lane->ops->ep_get_zcopy != NULL)) {
        if ((rkey == NULL) && (axon_rndv_recv_split(req, ep, rts, want) == AXON_OK)) {
            return;
        }
        if ((rts->rail_keys > 0) && (axon_rndv_rails_get(req, ep, rts, want) == AXON_OK)) {
            return;
        }
        req->tl_comp.func = axon_rndv_get_done;
        req->flags       |= AXON_REQUEST_TL_BUSY;
        status = lane->ops->ep_get_zcopy(lane->tl_ep, req->recv.buffer, want, rts->address,
                                         rkey, &req->tl_comp);
        if (status == AXON_INPROGRESS) {
            return;
        }
        if (status != AXON_ERR_UNSUPPORTED) {
            axon_rndv_get_done(&req->tl_comp, status);
            return;
        }
        req->flags &= ~AXON_REQUEST_TL_BUSY;
        /* Not allowed for this peer (e.g. ptrace policy): the sender sends. */
    }

    status = axon_rndv_send_rtr(req, ep, want, 0, 0, 0);
    if (status != AXON_OK) {
        axon_request_complete(req, status);
    }
}

/* Messages at least this large always use rendezvous: eager ones are buffered whole
 * when unexpected, and a large one fills the receiver's ring for every other sender. */
#define AXON_RNDV_BUFFER_MAX (256 * 1024)

/* How the receiver of a rendezvous from this endpoint's peer takes the data (AXON_RNDV_SCHEME). */
static size_t axon_rndv_get_min(const axon_ep_h ep)
{
    switch (ep->worker->context->opts.rndv_scheme) {
    case AXON_RNDV_SCHEME_GET:
        return 0;
    case AXON_RNDV_SCHEME_STREAM:
        return SIZE_MAX;
    default:
        return axon_select_get_min(ep->bulk_lane.resource, AXON_RNDV_BUFFER_MAX);
    }
}

/*
 * Streaming a message and splitting a get with the sender both count on
 * the sender's core while the receiver copies: the model behind rndv_get_min
 * (axon_select_get_min) prices a streamed message by two copies that
 * overlap, the sender filling cells as the receiver drains them. On a
 * crowded host (more processes of Axon than cores, all runnable:
 * axon_idle_crowded) the two take turns, each ring's worth of cells or the
 * sender's half waiting for a time slice, while a whole get needs the
 * receiver alone. So there the receiver gets every rendezvous the lane can,
 * whole (with the scheme left to Axon): 4 ranks passing 64 KiB-1 MiB around
 * a ring on 2 cores took 1.2x Open MPI's ob1 instead of 1.9x
 * (docs/performance.md). The clock is read only for the messages that need
 * the answer; the host's load every 50 ms.
 */
static int axon_rndv_host_busy(void)
{
    return axon_idle_crowded(axon_sys_time_sec());
}

int axon_rndv_get_pays(axon_ep_h ep, size_t want)
{
    if (want >= ep->rndv_get_min) {
        return 1;
    }
    return (ep->worker->context->opts.rndv_scheme == AXON_RNDV_SCHEME_AUTO) &&
           axon_rndv_host_busy();
}

int axon_rndv_split_pays(axon_worker_h worker, size_t want)
{
    return (want >= worker->context->opts.rndv_split_thresh) && !axon_rndv_host_busy();
}

/*
 * Rendezvous threshold: where a get is measured to pay, from there; from the
 * bulk lane's estimates when nothing was measured (worth it once moving the
 * data twice costs more than one extra round trip plus a get); without a
 * cheaper way than the ring, only past the buffering bound.
 */
static size_t axon_rndv_thresh(axon_ep_h ep)
{
    const axon_resource_t *rsc = ep->bulk_lane.resource;
    size_t configured = ep->worker->context->opts.rndv_thresh;
    double bytes_per_ns, thresh;

    if (configured != AXON_CONFIG_SIZE_AUTO) {
        return configured;
    }
    if (ep->rndv_get_min == SIZE_MAX) {
        if (!(rsc->cap_flags & AXON_CAP_AM_ZCOPY)) {
            return AXON_RNDV_BUFFER_MAX;
        }
    } else if (ep->rndv_get_min > 0) {
        return (ep->rndv_get_min > ep->am_lane.max_bcopy) ? ep->rndv_get_min :
                                                           ep->am_lane.max_bcopy;
    }
    if (!(rsc->cap_flags & (AXON_CAP_GET | AXON_CAP_AM_ZCOPY))) {
        return AXON_RNDV_BUFFER_MAX;
    }
    bytes_per_ns = rsc->bandwidth_MBps * 1e-3;
    thresh       = bytes_per_ns * (2.0 * rsc->latency_ns + rsc->overhead_ns + 2000.0);
    return (thresh > (double)ep->am_lane.max_bcopy) ? (size_t)thresh : ep->am_lane.max_bcopy;
}

void axon_rndv_ep_init(axon_ep_h ep)
{
    ep->rndv_get_min = axon_rndv_get_min(ep);
    ep->rndv_thresh  = axon_rndv_thresh(ep);
}

/* Is req a rendezvous send, in any of its stages? */
static inline int axon_rndv_is_send(axon_request_h req)
{
    return (req->step == axon_tag_step_rndv_rts) || (req->step == axon_tag_step_rndv_bcopy) ||
           (req->step == axon_tag_step_rndv_zcopy) || (req->step == axon_tag_step_rndv_rails);
}

void axon_rndv_send_part_done(axon_request_h req, axon_status_t status)
{
    if ((status != AXON_OK) && (req->send.rndv_status == AXON_OK)) {
        req->send.rndv_status = status;
    }
    if (--req->send.rndv_parts == 0) {
        axon_send_remote_done(req, req->send.rndv_status);
    }
}

/* The sender's half of a split is in the receiver's buffer (or failed): say so. */
static void axon_rndv_put_finish(axon_request_h req, axon_status_t status)
{
    axon_rndv_put_done_hdr_t done;
    axon_status_t send_status;

    done.rreq_id   = req->send.rreq_id;
    done.from_uuid = req->worker->uuid;
    done.offset    = req->send.offset;
    done.length    = req->send.rndv_length - req->send.offset;
    done.status    = status;
    send_status = axon_ep_send_ctrl(req->send.ep, AXON_AM_RNDV_PUT_DONE, &done, sizeof(done));
    axon_rndv_send_part_done(req, (status != AXON_OK) ? status : send_status);
}

static void axon_rndv_put_done(axon_tl_completion_t *comp, axon_status_t status)
{
    axon_request_h req = axon_container_of(comp, struct axon_request, tl_comp);

    req->flags &= ~AXON_REQUEST_TL_BUSY;
    axon_rndv_put_finish(req, status);
}

static void axon_rndv_am_ats(void *arg, const void *data, size_t length, unsigned flags)
{
    const axon_rndv_ats_hdr_t *ats = data;
    axon_request_h req;

    if (length != sizeof(*ats)) {
        axon_error("dropping rendezvous ATS of %zu bytes", length);
        return;
    }
    req = axon_request_id_find(arg, ats->sreq_id, ats->from_uuid);
    if ((req == NULL) || !axon_rndv_is_send(req)) {
        axon_debug("ATS for unknown rendezvous send %llu", (unsigned long long)ats->sreq_id);
        return;
    }
    axon_rndv_send_part_done(req, (axon_status_t)ats->status);
}

static void axon_rndv_am_rtr(void *arg, const void *data, size_t length, unsigned flags)
{
    const axon_rndv_rtr_hdr_t *rtr = data;
    axon_status_t status;
    axon_request_h req;
    axon_lane_t *lane;
    axon_ep_h ep;

    if (length != sizeof(*rtr)) {
        axon_error("dropping rendezvous RTR of %zu bytes", length);
        return;
    }
    req = axon_request_id_find(arg, rtr->sreq_id, rtr->from_uuid);
    if ((req == NULL) || (req->step != axon_tag_step_rndv_rts)) {
        axon_debug("RTR for unknown rendezvous send %llu", (unsigned long long)rtr->sreq_id);
        return;
    }
    if (rtr->length > req->send.length) {
        axon_error("peer %016llx asks for %llu bytes of a %zu-byte message",
                   (unsigned long long)rtr->from_uuid, (unsigned long long)rtr->length,
                   req->send.length);
        axon_send_remote_done(req, AXON_ERR_IO_FORMAT);
        return;
    }
    if (rtr->length == 0) {
        axon_send_remote_done(req, AXON_OK);
        return;
    }

    if ((rtr->offset >= rtr->length) ||
        ((rtr->put_address == 0) && ((rtr->offset != 0) || (rtr->put_runs != 0)))) {
        axon_error("peer %016llx sent an RTR for bytes [%llu, %llu)",
                   (unsigned long long)rtr->from_uuid, (unsigned long long)rtr->offset,
                   (unsigned long long)rtr->length);
        axon_send_remote_done(req, AXON_ERR_IO_FORMAT);
        return;
    }

    ep = req->send.ep;
    req->send.rndv_length = rtr->length;
    req->send.rreq_id     = rtr->rreq_id;
    req->send.offset      = rtr->offset;
    lane = &ep->bulk_lane;
    if (rtr->put_address != 0) {
        /* Split: this side's half, and the ATS for the half the receiver reads. */
        req->send.rndv_parts = 2;
        if (axon_rndv_runs_put(req, rtr, &status) == AXON_OK) {
            axon_rndv_put_finish(req, status);
            return;
        }
        if ((lane->resource->cap_flags & AXON_CAP_PUT) && (lane->ops->ep_put_zcopy != NULL) &&
            !(req->flags & AXON_REQUEST_LAYOUT) && (rtr->put_runs == 0)) {
            req->tl_comp.func = axon_rndv_put_done;
            req->flags       |= AXON_REQUEST_TL_BUSY;
            status = lane->ops->ep_put_zcopy(lane->tl_ep, req->send.buffer + rtr->offset,
                                             rtr->length - rtr->offset,
                                             rtr->put_address + rtr->offset, NULL,
                                             &req->tl_comp);
            if (status == AXON_INPROGRESS) {
                return;
            }
            req->flags &= ~AXON_REQUEST_TL_BUSY;
            if (status != AXON_ERR_UNSUPPORTED) {
                axon_rndv_put_finish(req, status);
                return;
            }
        }
        /* May not write the receiver's memory: send the half as data. */
    }
    if (!axon_rndv_rails_start(req)) {
        req->step = ((lane->resource->cap_flags & AXON_CAP_AM_ZCOPY) &&
                     (lane->ops->ep_am_zcopy != NULL) && !(req->flags & AXON_REQUEST_LAYOUT)) ?
                    axon_tag_step_rndv_zcopy : axon_tag_step_rndv_bcopy;
    }
    /* Data goes behind whatever the endpoint already queued. */
    axon_ep_pending_push(ep, req);
    axon_ep_progress_pending(ep);
}

void *axon_rndv_rx_dest(void *arg, uint8_t am_id, const void *hdr_p, size_t hdr_len,
                        size_t data_length)
{
    axon_worker_h worker = arg;
    axon_rndv_data_hdr_t hdr;
    axon_request_h req;

    if (hdr_len != sizeof(hdr)) {
        return NULL;
    }
    memcpy(&hdr, hdr_p, sizeof(hdr));
    req = axon_request_id_find(worker, hdr.rreq_id, hdr.from_uuid);
    if ((req == NULL) || !(req->flags & AXON_REQUEST_RECV) || (data_length != hdr.length) ||
        (hdr.offset > req->recv.expected) ||
        (data_length > req->recv.expected - hdr.offset)) {
        return NULL;  /* the handler reports it */
    }
    if (req->flags & AXON_REQUEST_LAYOUT) {
        /* In place only within one run of the layout; else the handler scatters it. */
        uint8_t *run = axon_layout_cursor_run(&req->recv.cursor, hdr.offset, &hdr.length);
        return (hdr.length >= data_length) ? run : NULL;
    }
    return req->recv.buffer + hdr.offset;
}

static void axon_rndv_am_data(void *arg, const void *data, size_t length, unsigned flags)
{
    const axon_rndv_data_hdr_t *hdr = data;
    axon_request_h req;
    size_t len;

    if (length < sizeof(*hdr)) {
        axon_error("dropping rendezvous data of %zu bytes", length);
        return;
    }
    req = axon_request_id_find(arg, hdr->rreq_id, hdr->from_uuid);
    if ((req == NULL) || !(req->flags & AXON_REQUEST_RECV)) {
        axon_log(axon_peer_stray_level(arg, hdr->from_uuid, AXON_LOG_WARN),
                 "dropping rendezvous data for unknown receive %llu from %016llx",
                 (unsigned long long)hdr->rreq_id, (unsigned long long)hdr->from_uuid);
        return;
    }

    if (flags & AXON_AM_FLAG_PLACED) {
        len = hdr->length;  /* rx_dest checked it against the frame */
    } else {
        len = length - sizeof(*hdr);
        if ((len != hdr->length) || (hdr->offset > req->recv.expected) ||
            (len > req->recv.expected - hdr->offset)) {
            axon_error("dropping rendezvous data at %llu + %zu beyond %zu bytes expected",
                       (unsigned long long)hdr->offset, len, req->recv.expected);
            return;
        }
        if (req->flags & AXON_REQUEST_LAYOUT) {
            axon_layout_scatter(&req->recv.cursor, hdr->offset, hdr + 1, len);
        } else {
            memcpy(req->recv.buffer + hdr->offset, hdr + 1, len);
        }
    }
    axon_rndv_recv_part_done(req, len, AXON_OK);
}

static void axon_rndv_am_put_done(void *arg, const void *data, size_t length, unsigned flags)
{
    const axon_rndv_put_done_hdr_t *done = data;
    axon_request_h req;

    if (length != sizeof(*done)) {
        axon_error("dropping rendezvous PUT_DONE of %zu bytes", length);
        return;
    }
    req = axon_request_id_find(arg, done->rreq_id, done->from_uuid);
    if ((req == NULL) || !(req->flags & AXON_REQUEST_RECV) ||
        (req->recv.rndv_split != AXON_RNDV_SPLIT_HALF) ||
        (done->offset != axon_rndv_split_offset(req->recv.expected)) ||
        (done->length != req->recv.expected - done->offset)) {
        axon_log(axon_peer_stray_level(arg, done->from_uuid, AXON_LOG_ERROR),
                 "dropping PUT_DONE [%llu +%llu) from %016llx: no split receive %llu expects it",
                 (unsigned long long)done->offset, (unsigned long long)done->length,
                 (unsigned long long)done->from_uuid, (unsigned long long)done->rreq_id);
        return;
    }
    axon_rndv_recv_part_done(req, done->length, (axon_status_t)done->status);
}

void axon_rndv_register_handlers(axon_worker_h worker)
{
    worker->am_handlers[AXON_AM_RNDV_ATS]  = axon_rndv_am_ats;
    worker->am_handlers[AXON_AM_RNDV_RTR]  = axon_rndv_am_rtr;
    worker->am_handlers[AXON_AM_RNDV_DATA] = axon_rndv_am_data;
    worker->am_handlers[AXON_AM_RNDV_PUT_DONE] = axon_rndv_am_put_done;
    worker->am_rx_dest[AXON_AM_RNDV_DATA]      = axon_rndv_rx_dest;
}
