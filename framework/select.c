/* Transport selection: filters (AXON_TLS, AXON_NET_DEVICES) and lane choice. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "log.h"
#include "select.h"
#include "topo.h"

const char *const axon_select_tl_aliases[][2] = {
    {"sm",  "shm,self"},
    {"ib",  "rc,ud,dc"},  /* UCX's meaning: the RDMA transports of an InfiniBand-like device */
    {"all", "*"},
    {NULL,  NULL}
};

static const char *axon_select_alias(const char *name)
{
    unsigned i;

    for (i = 0; axon_select_tl_aliases[i][0] != NULL; ++i) {
        if (strcmp(axon_select_tl_aliases[i][0], name) == 0) {
            return axon_select_tl_aliases[i][1];
        }
    }
    return NULL;
}

/* Is name one of alias's comma-separated names? */
static int axon_select_alias_has(const char *alias, const char *name)
{
    size_t len = strlen(name);
    const char *p;

    for (p = alias; p != NULL; p = strchr(p, ',')) {
        p += (*p == ',');
        if ((strncmp(p, name, len) == 0) && ((p[len] == ',') || (p[len] == '\0'))) {
            return 1;
        }
    }
    return 0;
}

int axon_select_tls_lists(const axon_config_allow_list_t *tls, const char *name)
{
    const char *alias;
    unsigned i;

    for (i = 0; i < tls->list.count; ++i) {
        alias = axon_select_alias(tls->list.names[i]);
        if ((alias == NULL) ? (strcmp(tls->list.names[i], name) == 0) :
                              ((strcmp(alias, "*") == 0) || axon_select_alias_has(alias, name))) {
            return 1;
        }
    }
    return 0;
}

/* Is name a transport some resource offers, or a component's name? */
static const axon_loaded_component_t *
axon_select_find_tl(const axon_component_set_t *set, const char *name)
{
    const axon_loaded_component_t *lc;
    unsigned i, j;

    for (i = 0; i < set->count; ++i) {
        lc = &set->comps[i];
        if (strcmp(lc->name, name) == 0) {
            return lc;
        }
        for (j = 0; j < lc->num_resources; ++j) {
            if (strcmp(lc->resources[j].tl_name, name) == 0) {
                return lc;
            }
        }
    }
    return NULL;
}

/* Append "a, b, c" of every known transport and alias to buf, for errors. */
static void axon_select_known_tls(const axon_component_set_t *set, char *buf, size_t max)
{
    size_t len = 0;
    unsigned i, j;

#define AXON_APPEND(...) \
    len += (size_t)snprintf(buf + len, (len < max) ? max - len : 0, __VA_ARGS__)
    buf[0] = '\0';
    for (i = 0; i < set->count; ++i) {
        const axon_loaded_component_t *lc = &set->comps[i];
        if (lc->num_resources == 0) {
            AXON_APPEND("%s%s%s", len ? ", " : "", lc->name,
                        lc->component ? " (no device)" : " (failed to load)");
            continue;
        }
        for (j = 0; j < lc->num_resources; ++j) {
            if ((j == 0) || strcmp(lc->resources[j].tl_name, lc->resources[j - 1].tl_name)) {
                AXON_APPEND("%s%s", len ? ", " : "", lc->resources[j].tl_name);
            }
        }
    }
    for (i = 0; axon_select_tl_aliases[i][0] != NULL; ++i) {
        AXON_APPEND("%s%s (alias)", len ? ", " : "", axon_select_tl_aliases[i][0]);
    }
#undef AXON_APPEND
}

/*
 * Check every name of AXON_TLS and expand aliases into want. Names of
 * components that failed to load are accepted with a warning saying why.
 */
static axon_status_t axon_select_check_tls(const axon_component_set_t *set,
                                           const axon_config_allow_list_t *tls,
                                           axon_config_names_t *want, int *want_all)
{
    const axon_loaded_component_t *lc;
    char known[1024], item[64];
    const char *alias, *p, *comma;
    size_t len;
    unsigned i;

    *want_all = 0;
    for (i = 0; i < tls->list.count; ++i) {
        const char *name = tls->list.names[i];

        alias = axon_select_alias(name);
        if (alias != NULL) {
            if (strcmp(alias, "*") == 0) {
                *want_all = 1;
                continue;
            }
            for (p = alias; *p != '\0'; p = (*comma != '\0') ? comma + 1 : comma) {
                comma = strchr(p, ',');
                if (comma == NULL) {
                    comma = p + strlen(p);
                }
                len = (size_t)(comma - p);
                memcpy(item, p, len);
                item[len] = '\0';
                want->names[want->count++] = strdup(item);
            }
            continue;
        }

        lc = axon_select_find_tl(set, name);
        if (lc == NULL) {
            axon_select_known_tls(set, known, sizeof(known));
            axon_error("AXON_TLS: unknown transport '%s'; known transports: %s", name, known);
            return AXON_ERR_INVALID_PARAM;
        }
        if ((lc->component == NULL) && (tls->mode == AXON_CONFIG_ALLOW_LISTED)) {
            axon_warn("AXON_TLS names '%s', but its component %s could not be loaded: %s",
                      name, lc->path, lc->error);
        } else if ((lc->num_resources == 0) && (tls->mode == AXON_CONFIG_ALLOW_LISTED)) {
            axon_warn("AXON_TLS names '%s', but it has no usable device on this host", name);
        }
        want->names[want->count++] = strdup(name);
    }
    return AXON_OK;
}

static axon_status_t axon_select_check_devices(const axon_component_set_t *set,
                                               const axon_config_allow_list_t *net_devices)
{
    char known[1024];
    size_t len;
    unsigned i, j, k;
    int found;

    for (k = 0; k < net_devices->list.count; ++k) {
        found = 0;
        known[0] = '\0';
        len = 0;
        for (i = 0; i < set->count; ++i) {
            for (j = 0; j < set->comps[i].num_resources; ++j) {
                const axon_resource_t *rsc = &set->comps[i].resources[j];
                if (rsc->dev_type != AXON_DEV_TYPE_NET) {
                    continue;
                }
                if (strcmp(rsc->dev_name, net_devices->list.names[k]) == 0) {
                    found = 1;
                }
                len += (size_t)snprintf(known + len, len < sizeof(known) ? sizeof(known) - len : 0,
                                        "%s%s", len ? ", " : "", rsc->dev_name);
            }
        }
        if (!found) {
            axon_error("AXON_NET_DEVICES: unknown device '%s'; network devices on this host: %s",
                       net_devices->list.names[k], len ? known : "none");
            return AXON_ERR_INVALID_PARAM;
        }
    }
    return AXON_OK;
}

axon_status_t axon_select_filter(const axon_component_set_t *set,
                                 const axon_config_allow_list_t *tls,
                                 const axon_config_allow_list_t *net_devices,
                                 uint64_t required,
                                 axon_select_resource_t **out, unsigned *count)
{
    axon_config_allow_list_t want = {tls->mode, {NULL, 0}};
    axon_select_resource_t *result = NULL;
    axon_status_t status;
    unsigned i, j, total = 0, n = 0;
    int want_all;

    /* Each alias expands to at most a few names. */
    want.list.names = calloc(tls->list.count * 4 + 1, sizeof(char *));
    if (want.list.names == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    status = axon_select_check_tls(set, tls, &want.list, &want_all);
    if (status != AXON_OK) {
        goto out;
    }
    if (want_all) {
        /* "all" in an allow list admits everything; in a deny list, nothing. */
        want.mode = (tls->mode == AXON_CONFIG_DENY_LISTED) ? AXON_CONFIG_ALLOW_LISTED :
                                                             AXON_CONFIG_ALLOW_ALL;
        if (want.mode == AXON_CONFIG_ALLOW_LISTED) {
            for (i = 0; i < want.list.count; ++i) {
                free(want.list.names[i]);
            }
            want.list.count = 0;
        }
    }

    status = axon_select_check_devices(set, net_devices);
    if (status != AXON_OK) {
        goto out;
    }

    for (i = 0; i < set->count; ++i) {
        total += set->comps[i].num_resources;
    }
    result = calloc(total + 1, sizeof(*result));
    if (result == NULL) {
        status = AXON_ERR_NO_MEMORY;
        goto out;
    }

    for (i = 0; i < set->count; ++i) {
        const axon_loaded_component_t *lc = &set->comps[i];
        if ((lc->component != NULL) && (lc->component->coll_offload != NULL)) {
            continue;   /* offload devices are for the collectives layer, not lanes */
        }
        for (j = 0; j < lc->num_resources; ++j) {
            const axon_resource_t *rsc = &lc->resources[j];
            int listed   = axon_config_names_contain(&want.list, rsc->tl_name) ||
                           axon_config_names_contain(&want.list, lc->name);
            int admitted = (want.mode == AXON_CONFIG_ALLOW_ALL) ||
                           ((want.mode == AXON_CONFIG_ALLOW_LISTED) && listed) ||
                           ((want.mode == AXON_CONFIG_DENY_LISTED) && !listed);
            if (!admitted) {
                axon_debug("%s/%s: excluded by AXON_TLS", rsc->tl_name, rsc->dev_name);
                continue;
            }
            /* A software device costs every worker memory and a thread: only on request. */
            if ((rsc->cap_flags & AXON_CAP_EMULATED) &&
                !((want.mode == AXON_CONFIG_ALLOW_LISTED) && listed)) {
                axon_debug("%s/%s: software device, used only when AXON_TLS names %s",
                           rsc->tl_name, rsc->dev_name, rsc->tl_name);
                continue;
            }
            if ((rsc->dev_type == AXON_DEV_TYPE_NET) &&
                !axon_config_allows(net_devices, rsc->dev_name)) {
                axon_debug("%s/%s: excluded by AXON_NET_DEVICES", rsc->tl_name, rsc->dev_name);
                continue;
            }
            if ((rsc->cap_flags & required) != required) {
                axon_debug("%s/%s: lacks capabilities 0x%llx needed by the requested features",
                           rsc->tl_name, rsc->dev_name,
                           (unsigned long long)(required & ~rsc->cap_flags));
                continue;
            }
            result[n].owner    = lc;
            result[n].resource = rsc;
            ++n;
        }
    }

    *out   = result;
    *count = n;
    result = NULL;

out:
    free(result);
    for (i = 0; i < want.list.count; ++i) {
        free(want.list.names[i]);
    }
    free(want.list.names);
    return status;
}

/* Cost of a small message: what the small lane minimizes. */
static inline double axon_select_small_cost(const axon_resource_t *rsc)
{
    return rsc->latency_ns + rsc->overhead_ns;
}

/* Is a better than b for the lane? Bulk ties in bandwidth go to the lower latency. */
static int axon_select_better(const axon_resource_t *a, const axon_resource_t *b, int bulk)
{
    if (bulk && (a->bandwidth_MBps != b->bandwidth_MBps)) {
        return a->bandwidth_MBps > b->bandwidth_MBps;
    }
    return axon_select_small_cost(a) < axon_select_small_cost(b);
}

/* What each lane needs, in the order of axon_lane_choice_t's fields. */
static const struct {
    const char *name;
    uint64_t    cap;
    const char *cap_name;
} axon_select_lane_needs[] = {
    {"small", AXON_CAP_AM_SHORT, "am_short"},
    {"bulk",  AXON_CAP_AM_BCOPY, "am_bcopy"},
};

/* The best candidate for lane (0 small, 1 bulk) by the estimates, or -1. */
static int axon_select_by_estimates(const axon_resource_t *const *candidates, unsigned count,
                                    int lane)
{
    int best = -1;
    unsigned i;

    for (i = 0; i < count; ++i) {
        const axon_resource_t *rsc = candidates[i];

        if (!(rsc->cap_flags & axon_select_lane_needs[lane].cap)) {
            axon_debug("%s/%s: no %s, not a %s lane", rsc->tl_name, rsc->dev_name,
                       axon_select_lane_needs[lane].cap_name, axon_select_lane_needs[lane].name);
            continue;
        }
        if ((best < 0) || axon_select_better(rsc, candidates[best], lane)) {
            best = (int)i;
        }
    }
    return best;
}

int axon_select_nearer(const axon_resource_t *a, unsigned da, const axon_resource_t *b,
                       unsigned db)
{
    if (da != db) {
        return da < db;   /* AXON_TOPO_DISTANCE_UNKNOWN is the largest */
    }
    return a->bandwidth_MBps > b->bandwidth_MBps;
}

/*
 * Among the resources of best's transport that can carry the lane, one on
 * the device nearest the worker's thread: best if it is that near, else the
 * best of the nearest by the lane's estimates. best itself when any of them
 * has an unknown distance, so devices keep the order they were listed in.
 */
static int axon_select_by_locality(const axon_resource_t *const *candidates, unsigned count,
                                   int lane, int best, const unsigned *distances)
{
    const axon_resource_t *kind = candidates[best];
    unsigned i, devices = 0, nearest = AXON_TOPO_DISTANCE_UNKNOWN;
    int pick = -1, unknown = -1;

    for (i = 0; i < count; ++i) {
        const axon_resource_t *rsc = candidates[i];

        if (!(rsc->cap_flags & axon_select_lane_needs[lane].cap) ||
            (rsc->dev_type != kind->dev_type) || strcmp(rsc->tl_name, kind->tl_name)) {
            continue;
        }
        ++devices;
        if ((distances == NULL) || (distances[i] == AXON_TOPO_DISTANCE_UNKNOWN)) {
            unknown = (int)i;
        } else if ((pick < 0) || (distances[i] < nearest) ||
                   ((distances[i] == nearest) && axon_select_better(rsc, candidates[pick], lane))) {
            pick    = (int)i;
            nearest = distances[i];
        }
    }
    if (devices < 2) {
        return best;
    }
    if (unknown >= 0) {
        axon_debug("%s lane: %s/%s has no known distance from this thread, so the %s devices "
                   "keep their listed order (%s first)", axon_select_lane_needs[lane].name,
                   kind->tl_name, candidates[unknown]->dev_name, kind->tl_name, kind->dev_name);
        return best;
    }
    if (distances[best] == nearest) {
        return best;
    }
    axon_debug("%s lane: %s/%s at distance %u from this thread rather than %s at %u",
               axon_select_lane_needs[lane].name, kind->tl_name, candidates[pick]->dev_name,
               nearest, kind->dev_name, distances[best]);
    return pick;
}

/*
 * Past the peer threshold: the resource of best's device with the smallest
 * memory per endpoint that can carry the lane; equal memory keeps best.
 */
static int axon_select_by_memory(const axon_resource_t *const *candidates, unsigned count,
                                 int lane, int best)
{
    const axon_resource_t *dev = candidates[best];
    int pick = best;
    unsigned i;

    for (i = 0; i < count; ++i) {
        const axon_resource_t *rsc = candidates[i];

        if ((rsc->cap_flags & axon_select_lane_needs[lane].cap) &&
            (rsc->dev_type == dev->dev_type) && !strcmp(rsc->dev_name, dev->dev_name) &&
            (rsc->ep_memory < candidates[pick]->ep_memory)) {
            pick = (int)i;
        }
    }
    return pick;
}

axon_status_t axon_select_lanes(const axon_resource_t *const *candidates, unsigned count,
                                const axon_lane_select_params_t *params,
                                axon_lane_choice_t *choice)
{
    int picks[2], lane, best;

    for (lane = 0; lane < 2; ++lane) {
        best = axon_select_by_estimates(candidates, count, lane);
        if (best >= 0) {
            best = axon_select_by_locality(candidates, count, lane, best, params->distances);
        }
        if ((best >= 0) && (params->num_eps >= params->max_peers)) {
            picks[lane] = axon_select_by_memory(candidates, count, lane, best);
            if (picks[lane] != best) {
                axon_debug("%u endpoints (AXON_RC_MAX_PEERS=%u): %s lane %s/%s (%zu bytes per "
                           "endpoint) instead of %s (%zu)", params->num_eps, params->max_peers,
                           axon_select_lane_needs[lane].name, candidates[picks[lane]]->tl_name,
                           candidates[picks[lane]]->dev_name, candidates[picks[lane]]->ep_memory,
                           candidates[best]->tl_name, candidates[best]->ep_memory);
            }
        } else {
            picks[lane] = best;
        }
    }

    choice->small = picks[0];
    choice->bulk  = picks[1];
    if ((choice->small < 0) || (choice->bulk < 0)) {
        return AXON_ERR_UNREACHABLE;
    }
    return AXON_OK;
}

/*
 * The model prices a get by the call alone; the whole protocol also matches
 * an RTS, sends an ATS back and pins the sender's pages. Measured over shm
 * at 64 KiB it took 1.3x what the model said, so a get is chosen only
 * where it still wins with a quarter added.
 */
#define AXON_SELECT_GET_MARGIN 1.25

size_t axon_select_get_min(const axon_resource_t *rsc, size_t cap)
{
    double stream_ns_per_byte, cached_ns_per_byte, get_ns_per_byte, cached_MBps, get_min;

    if (!(rsc->cap_flags & AXON_CAP_GET) || (rsc->copy_MBps <= 0) || (rsc->get_MBps <= 0)) {
        return 0;
    }
    stream_ns_per_byte = 2.0 / (rsc->copy_MBps * 1e-3);
    get_ns_per_byte    = AXON_SELECT_GET_MARGIN / (rsc->get_MBps * 1e-3);
    if (get_ns_per_byte >= stream_ns_per_byte) {
        return SIZE_MAX;
    }
    /* Up to the cap the copies stay in cache; one measured slower than a large copy was noise. */
    cached_MBps        = (rsc->copy_cached_MBps > rsc->copy_MBps) ? rsc->copy_cached_MBps :
                                                                    rsc->copy_MBps;
    cached_ns_per_byte = 2.0 / (cached_MBps * 1e-3);
    if (get_ns_per_byte >= cached_ns_per_byte) {
        return cap;  /* a get pays only for messages past the cap */
    }
    /* The get's own cost, and the ATS a streamed message does not need. */
    get_min = AXON_SELECT_GET_MARGIN * (rsc->get_overhead_ns + rsc->latency_ns) /
              (cached_ns_per_byte - get_ns_per_byte);
    return (get_min < (double)cap) ? (size_t)get_min : cap;
}
