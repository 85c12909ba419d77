/*
 * Rails: a rendezvous's data striped over several lanes to one peer, like
 * UCX's UCX_MAX_RNDV_RAILS. Two sockets (tcp over lo and eth0) or two RDMA
 * devices move more than one: the kernel or the devices work on both at
 * once. Only bulk data is striped; eager messages and the rendezvous's
 * control messages stay on the AM lane, which keeps their order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "log.h"
#include "rails.h"
#include "request.h"

/* What a rail must do like the bulk lane: move rendezvous data the same way. */
#define AXON_RAIL_CAPS (AXON_CAP_AM_ZCOPY | AXON_CAP_GET | AXON_CAP_NEED_MKEY)

/* May candidate rsc be a rail beside those chosen (chosen[0] the bulk lane's)? */
static int axon_rail_candidate_ok(const axon_resource_t *rsc,
                                  const axon_resource_t *const *chosen, unsigned count)
{
    unsigned i;

    if (strcmp(rsc->tl_name, chosen[0]->tl_name) ||
        ((rsc->cap_flags & AXON_RAIL_CAPS) != (chosen[0]->cap_flags & AXON_RAIL_CAPS)) ||
        !(rsc->cap_flags & (AXON_CAP_AM_ZCOPY | AXON_CAP_GET))) {
        return 0;
    }
    for (i = 0; i < count; ++i) {
        if ((rsc == chosen[i]) || !strcmp(rsc->dev_name, chosen[i]->dev_name)) {
            return 0;
        }
    }
    return 1;
}

/*
 * A rail's bandwidth to the peer: what its iface says of the path to the
 * peer's device (tcp: loopback to a peer in this network stack, whatever
 * the interface), else its resource's estimate.
 */
static double axon_rail_bandwidth(axon_worker_h worker, const axon_resource_t *rsc,
                                  unsigned iface_idx, const axon_address_entry_t *entry)
{
    axon_iface_t *iface = worker->ifaces[iface_idx].iface;
    double bw = (iface->ops->iface_peer_bandwidth != NULL) ?
                iface->ops->iface_peer_bandwidth(iface, entry->dev_addr) : 0;

    return (bw > 0) ? bw : rsc->bandwidth_MBps;
}

/* Cumulative shares of the rails' bandwidths, the last one whole. */
static void axon_rails_set_shares(axon_ep_rails_t *rails, const double *bandwidth)
{
    double total = 0, sum = 0;
    unsigned i;

    for (i = 0; i < rails->count; ++i) {
        total += bandwidth[i];
    }
    for (i = 0; i < rails->count; ++i) {
        sum += bandwidth[i];
        rails->share[i] = (total > 0) ?
                          (uint32_t)(sum / total * (1u << AXON_RAIL_SHARE_BITS)) :
                          (uint32_t)(((i + 1) << AXON_RAIL_SHARE_BITS) / rails->count);
    }
    rails->share[rails->count - 1] = 1u << AXON_RAIL_SHARE_BITS;
}

/* The rails' transport endpoints that are not also the AM or bulk lane's. */
static void axon_rails_destroy_lanes(axon_ep_h ep, const axon_ep_rails_t *rails)
{
    unsigned i;

    for (i = 1; i < rails->count; ++i) {
        if ((rails->lane[i].tl_ep != ep->am_lane.tl_ep) &&
            (rails->lane[i].tl_ep != ep->bulk_lane.tl_ep)) {
            rails->lane[i].ops->ep_destroy(rails->lane[i].tl_ep);
        }
    }
}

static void axon_ep_add_rails(axon_ep_h ep, const axon_resource_t *const *rscs, unsigned n,
                              const unsigned *iface_idx,
                              const axon_address_entry_t *const *entries, unsigned bulk)
{
    unsigned max = ep->worker->context->opts.max_rndv_rails;
    const axon_resource_t *chosen[AXON_RNDV_RAILS_MAX];
    double bandwidth[AXON_RNDV_RAILS_MAX];
    axon_ep_rails_t rails;
    unsigned count = 1, i;
    int best;

    chosen[0] = ep->bulk_lane.resource;
    rails.lane[0] = ep->bulk_lane;
    bandwidth[0] = axon_rail_bandwidth(ep->worker, rscs[bulk], iface_idx[bulk], entries[bulk]);
    while (count < max) {
        best = -1;
        for (i = 0; i < n; ++i) {
            if (axon_rail_candidate_ok(rscs[i], chosen, count) &&
                ((best < 0) || (rscs[i]->bandwidth_MBps > rscs[best]->bandwidth_MBps))) {
                best = (int)i;
            }
        }
        if (best < 0) {
            break;
        }
        chosen[count] = rscs[best];
        if (rscs[best] == ep->am_lane.resource) {
            rails.lane[count] = ep->am_lane;
        } else if (axon_ep_open_lane(ep->worker, iface_idx[best], ep->peer_uuid, entries[best],
                                     &rails.lane[count]) != AXON_OK) {
            axon_debug("endpoint %p to %016llx: no rail on %s/%s", (void *)ep,
                       (unsigned long long)ep->peer_uuid, rscs[best]->tl_name,
                       rscs[best]->dev_name);
            break;   /* the rails so far are still good */
        }
        bandwidth[count] = axon_rail_bandwidth(ep->worker, rscs[best], iface_idx[best],
                                               entries[best]);
        ++count;
    }
    if (count == 1) {
        return;
    }
    ep->rails = malloc(sizeof(*ep->rails));
    if (ep->rails == NULL) {
        axon_warn("endpoint %p: no memory for its %u rails, rendezvous uses one",
                  (void *)ep, count);
        rails.count = count;
        axon_rails_destroy_lanes(ep, &rails);
        return;
    }
    rails.count = count;
    axon_rails_set_shares(&rails, bandwidth);
    *ep->rails = rails;
    for (i = 0; i < count; ++i) {
        axon_debug("endpoint %p to %016llx: rail %u %s/%s to its %s, %.1f%% of each rendezvous",
                   (void *)ep, (unsigned long long)ep->peer_uuid, i,
                   rails.lane[i].resource->tl_name, rails.lane[i].resource->dev_name,
                   rails.lane[i].peer_dev,
                   100.0 * (rails.share[i] - ((i > 0) ? rails.share[i - 1] : 0)) /
                   (1u << AXON_RAIL_SHARE_BITS));
    }
}

axon_ep_rails_t *axon_ep_open_rails(axon_ep_h ep)
{
    const axon_address_entry_t *entries[AXON_ADDRESS_MAX_TLS];
    const axon_resource_t *rscs[AXON_ADDRESS_MAX_TLS];
    unsigned iface_idx[AXON_ADDRESS_MAX_TLS];
    axon_address_t *addr;
    unsigned n, bulk;

    ep->rails_known = 1;
    if ((ep->worker->context->opts.max_rndv_rails < 2) || (ep->status != AXON_OK) ||
        (ep->peer == NULL) || (ep->peer->address == NULL)) {
        return NULL;
    }
    addr = malloc(sizeof(*addr));
    if (addr == NULL) {
        return NULL;   /* one lane then, as without rails */
    }
    if (axon_address_unpack(ep->peer->address, ep->peer->address_length, addr) == AXON_OK) {
        n = axon_ep_find_candidates(ep->worker, addr, entries, iface_idx, rscs, NULL);
        for (bulk = 0; (bulk < n) && (rscs[bulk] != ep->bulk_lane.resource); ++bulk) {
        }
        if (bulk < n) {
            axon_ep_add_rails(ep, rscs, n, iface_idx, entries, bulk);
        }
    }
    free(addr);
    return ep->rails;
}

void axon_ep_close_rails(axon_ep_h ep)
{
    if (ep->rails != NULL) {
        axon_rails_destroy_lanes(ep, ep->rails);
        free(ep->rails);
        ep->rails = NULL;
    }
}

void axon_request_release_rails(axon_request_h req)
{
    unsigned i;

    req->flags &= ~AXON_REQUEST_RAIL_MEMH;
    for (i = 1; i < req->rails.count; ++i) {
        if (req->rails.send.memh[i] != NULL) {
            req->rails.send.md[i]->ops->mem_dereg(req->rails.send.md[i], req->rails.send.memh[i]);
            req->rails.send.memh[i] = NULL;
        }
    }
}
