/*
 * What the provider "axon" offers beyond libfabric's API: fi_control
 * commands of its own, numbered far above libfabric's.
 */
#ifndef AXON_FI_EXT_H
#define AXON_FI_EXT_H

/* fi_control(&ep->fid, AXON_FI_EP_EVENTS_SENT, uint64_t *): RMA event messages the
 * endpoint has sent (as an initiator): how tests see which way counts travel. */
#define AXON_FI_EP_EVENTS_SENT 0x41580001

#endif /* AXON_FI_EXT_H */
