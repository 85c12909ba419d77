/*
 * Introspection: what this Axon build and this host offer, as text (what
 * axon_info prints; also for bug reports). Not for the data path. Installed
 * as <axon/axon_introspect.h>.
 */
#ifndef AXON_INTROSPECT_H
#define AXON_INTROSPECT_H

#include "axon.h"

#ifdef __cplusplus
extern "C" {
#endif

/** What axon_introspect_print shows. */
enum {
    AXON_INTROSPECT_BUILD   = 1u << 0,  /* version, build options, back ends, search path */
    AXON_INTROSPECT_DEVICES = 1u << 1,  /* components, resources (those AXON_TLS or
                                         * AXON_NET_DEVICES leave out marked), RDMA devices
                                         * with their locality and limits (DC's among
                                         * them) and, per port, the transport lanes move
                                         * to past AXON_RC_MAX_PEERS endpoints; network
                                         * devices per transport, nearest the calling
                                         * thread first */
    AXON_INTROSPECT_CONFIG  = 1u << 2,  /* every variable: value, default and help */
    AXON_INTROSPECT_ALL     = (1u << 3) - 1,
};

/**
 * Print what `what` selects about context and the host to stream: comment
 * lines starting with "#", variables as NAME=value. AXON_ERR_INVALID_PARAM
 * (logged) for a NULL context or stream or an unknown bit in what.
 */
axon_status_t axon_introspect_print(axon_context_h context, unsigned what, FILE *stream);

#ifdef __cplusplus
}
#endif

#endif /* AXON_INTROSPECT_H */
