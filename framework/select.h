/*
 * Transport selection: which resources a context may use (AXON_TLS,
 * AXON_NET_DEVICES), and which lanes an endpoint uses among the resources
 * that reach its peer.
 */
#ifndef AXON_SELECT_H
#define AXON_SELECT_H

#include "component.h"
#include "loader.h"

/* A resource admitted by the filters, and the component that offers it. */
typedef struct axon_select_resource {
    const axon_loaded_component_t *owner;
    const axon_resource_t         *resource;
    axon_md_t                     *md;        /* its memory domain, once the context opened it */
} axon_select_resource_t;

/*
 * Apply AXON_TLS (tls) and AXON_NET_DEVICES (net_devices) to the loaded set.
 * Names are transport names ("shm"), component names of plugins that failed
 * to load (a warning then says why), or aliases ("sm" = shm,self; "ib" = rc,ud,dc; "all").
 * An unknown name fails with AXON_ERR_INVALID_PARAM and an error line naming
 * it and listing what exists. Resources that lack a capability of required
 * (AXON_CAP_*) are left out. On success *out is a malloc'd array.
 */
axon_status_t axon_select_filter(const axon_component_set_t *set,
                                 const axon_config_allow_list_t *tls,
                                 const axon_config_allow_list_t *net_devices,
                                 uint64_t required,
                                 axon_select_resource_t **out, unsigned *count);

/*
 * Does AXON_TLS's list name the transport (or component) name, itself or
 * through an alias ("all" names everything)? Whether that admits or denies
 * it is tls->mode's to say.
 */
int axon_select_tls_lists(const axon_config_allow_list_t *tls, const char *name);

/* Aliases understood in AXON_TLS: NULL-terminated pairs {alias, "a,b"}. */
extern const char *const axon_select_tl_aliases[][2];

/* Lanes of one endpoint: indices into the candidate array given to axon_select_lanes. */
typedef struct axon_lane_choice {
    int small;  /* lowest latency + overhead, needs AM_SHORT */
    int bulk;   /* highest bandwidth, needs AM_BCOPY */
} axon_lane_choice_t;

/* What lane choice knows of the worker the endpoint belongs to. */
typedef struct axon_lane_select_params {
    unsigned num_eps;    /* endpoints the worker has before this one */
    unsigned max_peers;  /* AXON_RC_MAX_PEERS: from this many on, memory per endpoint decides */
    /* Per candidate: its device's distance from the worker's thread
     * (axon_topo_device_distance, measured when the worker opened it); NULL: none known */
    const unsigned *distances;
} axon_lane_select_params_t;

/*
 * Is device a (distance da) ranked before b (db)? Nearer first, then the
 * higher bandwidth (the bulk lane's order; the small lane breaks ties by
 * latency); an unknown distance ranks after every known one. Equal:
 * neither, so the order the components listed devices in stays.
 */
int axon_select_nearer(const axon_resource_t *a, unsigned da, const axon_resource_t *b,
                       unsigned db);

/*
 * Pick lanes among candidates (resources that reach the peer). While the
 * worker has fewer than max_peers endpoints, latency (small lane) and
 * bandwidth (bulk lane) choose the transport, and among that transport's
 * devices the nearest one (by params->distances; equally near ones by the
 * same estimates; when any of them has an unknown distance, the first
 * listed, with a debug line); from then on each lane moves to the
 * resource of the same device with the smallest ep_memory that can carry it
 * (dc where the device has DC, else ud, rather than rc), so memory grows
 * slowly with the number of peers.
 * Candidates without the capability a lane needs are skipped with a debug
 * line. Returns AXON_ERR_UNREACHABLE if none can carry messages.
 */
axon_status_t axon_select_lanes(const axon_resource_t *const *candidates, unsigned count,
                                const axon_lane_select_params_t *params,
                                axon_lane_choice_t *choice);

/*
 * Smallest rendezvous message that rsc's get (AXON_CAP_GET) moves more
 * cheaply than streaming it through bcopy messages (a copy in and a copy out),
 * from the costs the resource measured, with a margin for what the model
 * leaves out; at most cap (also when a get pays only on messages too large
 * for a core's cache). 0 when nothing was measured (a get is then taken
 * wherever the lane can), SIZE_MAX when a get never pays.
 */
size_t axon_select_get_min(const axon_resource_t *rsc, size_t cap);

#endif
