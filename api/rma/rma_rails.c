/*
 * A large put or get striped over the endpoint's rails (api/core/rails.c),
 * as a rendezvous is: two RDMA devices move more than one. Each rail
 * writes or reads its stripe of the range (by the rails' bandwidth shares)
 * with the key the owner's device on its far end registered, one transport
 * operation at a time per rail, every rail at once. The operation is
 * complete at the target when every stripe is; flush and fence see one
 * operation as before.
 *
 * Only a contiguous range on the bulk lane by RDMA (ZCOPY, a key with an
 * entry per device: rkey.c) is striped; layouts, atomics and active
 * messages keep one lane.
 */
#include "log.h"
#include "rails.h"
#include "rma_proto.h"

static void axon_rma_rail_done(axon_tl_completion_t *comp, axon_status_t status);

/*
 * Stripe req over its endpoint's rails if it is worth it and every rail
 * has a key: 1 striped (AXON_REQUEST_RMA_RAILS set), 0 one lane.
 */
int axon_rma_rails_start(axon_request_h req)
{
    const struct axon_rkey *rkey = req->rma.rkey;
    axon_ep_h ep = req->rma.ep;
    axon_ep_rails_t *rails;
    const void *key;
    unsigned count, i;

    if ((req->flags & AXON_REQUEST_LAYOUT) || (req->rma.offset != 0) ||
        (rkey->zcopy_lane != &ep->bulk_lane) || !axon_rails_worth(req->rma.length)) {
        return 0;
    }
    rails = axon_ep_rails(ep);
    count = axon_rails_for(rails, req->rma.length);
    if (count < 2) {
        return 0;
    }
    for (i = 0; i < count; ++i) {
        key = (i == 0) ? rkey->tl_rkey : axon_rkey_dev_key(rkey, rails->lane[i].peer_dev);
        if (key == NULL) {
            axon_debug("endpoint %p: the key to 0x%llx has none for the peer's %s: one lane",
                       (void *)ep, (unsigned long long)rkey->remote_base,
                       rails->lane[i].peer_dev);
            return 0;
        }
        req->rails.comp[i].super.func = axon_rma_rail_done;
        req->rails.comp[i].req        = req;
        req->rails.comp[i].offset     = axon_rail_bound(rails, i, 0, req->rma.length);
        req->rails.comp[i].end        = axon_rail_bound(rails, i + 1, 0, req->rma.length);
        req->rails.comp[i].length     = 0;
        req->rails.comp[i].key        = key;
    }
    req->rails.count = (uint8_t)count;
    req->rails.busy  = 0;
    req->rails.moved = 0;
    req->flags      |= AXON_REQUEST_RMA_RAILS;
    return 1;
}

/*
 * A rail that refused its stripe for good hands the rest of it to rail 0,
 * which takes it once its own stripe is all out: a range at a time.
 */
static void axon_rma_rails_take_moved(axon_request_h req)
{
    axon_rail_comp_t *first = &req->rails.comp[0], *from;
    unsigned i;

    for (i = 1; (i < req->rails.count) && (first->offset == first->end); ++i) {
        from = &req->rails.comp[i];
        if ((req->rails.moved & (1u << i)) && (from->offset < from->end) &&
            !(req->rails.busy & (1u << i))) {
            first->offset = from->offset;
            first->end    = from->end;
            from->offset  = from->end;
        }
    }
}

/* Post rail i's next piece: AXON_OK (done at once or in flight) or why not. */
static axon_status_t axon_rma_rail_post(axon_request_h req, unsigned i)
{
    const axon_lane_t *lane = &req->rma.ep->rails->lane[i];
    axon_rail_comp_t *rc    = &req->rails.comp[i];
    size_t len              = rc->end - rc->offset, max = lane->resource->max_zcopy;
    uint8_t *local          = req->rma.data.buffer + rc->offset;
    uint64_t remote         = req->rma.remote_addr + rc->offset;
    axon_status_t status;

    if ((max != 0) && (len > max)) {
        len = max;
    }
    status = (req->rma.kind == AXON_RMA_KIND_PUT) ?
             lane->ops->ep_put_zcopy(lane->tl_ep, local, len, remote, rc->key, &rc->super) :
             lane->ops->ep_get_zcopy(lane->tl_ep, local, len, remote, rc->key, &rc->super);
    if ((status != AXON_OK) && (status != AXON_INPROGRESS)) {
        return status;
    }
    rc->offset      += len;
    req->rma.offset += len;
    if (status == AXON_OK) {
        req->rma.done += len;
    } else {
        rc->length       = len;
        req->rails.busy |= (uint8_t)(1u << i);
        req->flags      |= AXON_REQUEST_TL_BUSY;
    }
    return AXON_OK;
}

/*
 * Rail 0, the bulk lane, refuses with no rail busy: still connecting, a full
 * send queue, or a registration the device refused, which no wait cures.
 * As an unstriped operation does, the rest goes by messages (rma.c), from
 * the first byte not moved: with nothing in flight every byte below it is
 * at the target (a rail moves its stripe in order), and what lies above it
 * and was moved goes again, the same bytes to the same place.
 */
static axon_status_t axon_rma_rails_refused(axon_request_h req)
{
    size_t first = req->rma.length;
    const axon_rail_comp_t *rc;
    unsigned i;

    for (i = 0; i < req->rails.count; ++i) {
        rc = &req->rails.comp[i];
        if ((rc->offset < rc->end) && (rc->offset < first)) {
            first = rc->offset;
        }
    }
    if (first != 0) {
        axon_debug("endpoint %p: rail 0 refused the striped operation's rest at byte %zu "
                   "of %zu: by messages from there", (void *)req->rma.ep, first,
                   req->rma.length);
    }
    req->rma.offset = first;
    req->rma.done   = first;
    req->flags     &= ~AXON_REQUEST_RMA_RAILS;
    return AXON_ERR_UNSUPPORTED;
}

/*
 * Post on every idle rail with bytes left. AXON_INPROGRESS while a rail
 * works; AXON_ERR_NO_RESOURCE when a full rail holds bytes and none works
 * (the endpoint's queue tries again); AXON_ERR_UNSUPPORTED when rail 0
 * refuses and none works (the rest by messages); else the operation's end
 * status.
 */
axon_status_t axon_rma_rails_push(axon_request_h req)
{
    axon_rail_comp_t *rc;
    axon_status_t status;
    int full = 0;
    unsigned i;

    for (i = 0; (i < req->rails.count) && (req->rma.status == AXON_OK); ++i) {
        rc = &req->rails.comp[i];
        if (i == 0) {
            axon_rma_rails_take_moved(req);
        }
        while (!(req->rails.busy & (1u << i)) && (rc->offset < rc->end) &&
               !(req->rails.moved & (1u << i))) {
            status = axon_rma_rail_post(req, i);
            if (status == AXON_OK) {
                continue;
            }
            if ((i == 0) && (status == AXON_ERR_UNSUPPORTED) && (req->rails.busy == 0)) {
                return axon_rma_rails_refused(req);
            }
            if ((status == AXON_ERR_NO_RESOURCE) ||
                ((i == 0) && (status == AXON_ERR_UNSUPPORTED))) {
                full = 1;   /* a rail's completion brings the operation back here */
            } else if (status == AXON_ERR_UNSUPPORTED) {
                axon_debug("endpoint %p: rail %u refused its stripe: rail 0 moves it",
                           (void *)req->rma.ep, i);
                req->rails.moved |= (uint8_t)(1u << i);
            } else {
                axon_rma_op_fail(req, status);
            }
            break;
        }
    }
    if (full && (req->rails.busy == 0)) {
        return AXON_ERR_NO_RESOURCE;
    }
    if ((req->rails.moved != 0) && (req->rails.busy == 0) && (req->rma.status == AXON_OK) &&
        (req->rma.offset < req->rma.length)) {
        return axon_rma_rails_push(req);   /* rail 0 is idle: it takes a moved stripe */
    }
    return axon_rma_op_state(req);
}

/* One rail's piece completed: it is at the target (or failed); more, or the end. */
static void axon_rma_rail_done(axon_tl_completion_t *comp, axon_status_t status)
{
    axon_rail_comp_t *rc = axon_container_of(comp, axon_rail_comp_t, super);
    axon_request_h req   = rc->req;

    req->rails.busy &= (uint8_t)~(1u << (rc - req->rails.comp));
    req->rma.done   += rc->length;
    rc->length       = 0;
    if (req->rails.busy == 0) {
        req->flags &= ~AXON_REQUEST_TL_BUSY;
    }
    if (status != AXON_OK) {
        axon_rma_op_fail(req, status);
    }
    axon_rma_tl_done(req);
}
