/*
 * Rails: the lanes of one endpoint a rendezvous stripes its data over, one
 * per device of the bulk lane's transport that reaches the peer (rails.c).
 */
#ifndef AXON_RAILS_H
#define AXON_RAILS_H

#include "address.h"
#include "axon_int.h"

/* A stripe smaller than this per rail is not worth a second transport operation. */
#define AXON_RNDV_RAIL_MIN (64 * 1024)

/* Shares are fixed point: the whole is 1 << AXON_RAIL_SHARE_BITS. */
#define AXON_RAIL_SHARE_BITS 16

/* A lane to the peer through the worker's iface idx, to its address entry (endpoint.c). */
axon_status_t axon_ep_open_lane(axon_worker_h worker, unsigned idx, uint64_t uuid,
                                const axon_address_entry_t *entry, axon_lane_t *lane);
/* For each worker iface, the entry of addr it reaches, as lane choice sees them, and its
 * device's distance (distances may be NULL) (endpoint.c). */
unsigned      axon_ep_find_candidates(axon_worker_h worker, const axon_address_t *addr,
                                      const axon_address_entry_t **entries, unsigned *iface_idx,
                                      const axon_resource_t **rscs, unsigned *distances);

/*
 * Open the endpoint's extra rails: lanes of the bulk lane's transport on
 * the worker's other devices that reach the peer (its address as the peer
 * record keeps it), fastest first, up to AXON_MAX_RNDV_RAILS in all. Done
 * once, at the first rendezvous long enough to stripe: an endpoint that
 * only ever carries small messages keeps one connection, and its worker
 * polls no more sockets than before. None found: ep->rails stays NULL.
 */
axon_ep_rails_t *axon_ep_open_rails(axon_ep_h ep);
void axon_ep_close_rails(axon_ep_h ep);

/* The endpoint's rails, opened at the first call. */
static inline axon_ep_rails_t *axon_ep_rails(axon_ep_h ep)
{
    return ep->rails_known ? ep->rails : axon_ep_open_rails(ep);
}

/* Could length bytes be striped over two rails at all? */
static inline int axon_rails_worth(size_t length)
{
    return length >= 2 * (size_t)AXON_RNDV_RAIL_MIN;
}

/* How many rails a range of length bytes is striped over: one if it is too short to split. */
static inline unsigned axon_rails_for(const axon_ep_rails_t *rails, size_t length)
{
    return ((rails != NULL) && (length >= rails->count * (size_t)AXON_RNDV_RAIL_MIN)) ?
           rails->count : 1;
}

/* Where rail i's stripe of [begin, end) starts (i == rails->count: end); cache-line aligned. */
static inline size_t axon_rail_bound(const axon_ep_rails_t *rails, unsigned i, size_t begin,
                                     size_t end)
{
    size_t length = end - begin, cut;

    if (i == 0) {
        return begin;
    }
    if (i >= rails->count) {
        return end;
    }
    cut = (length >> AXON_RAIL_SHARE_BITS) * rails->share[i - 1] +
          (((length & ((1u << AXON_RAIL_SHARE_BITS) - 1)) * rails->share[i - 1]) >>
           AXON_RAIL_SHARE_BITS);
    return begin + (cut & ~(size_t)63);
}

#endif
