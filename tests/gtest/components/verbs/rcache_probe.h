/*
 * Can rc's registration cache keep registrations here? Not where memory
 * cannot be watched (valgrind): counts of registrations that rely on the
 * cache are then not asserted.
 */
#ifndef AXON_TEST_RCACHE_PROBE_H
#define AXON_TEST_RCACHE_PROBE_H

extern "C" {
#include "framework/memory/rcache.h"
}

inline bool cache_can_watch()
{
    static const axon_rcache_ops_t none = {nullptr, nullptr};
    axon_rcache_params_t params = {"probe", &none, nullptr, 1};
    axon_rcache_t *rcache;
    bool watches;

    if (axon_rcache_create(&params, &rcache) != AXON_OK) {
        return false;
    }
    watches = axon_rcache_is_caching(rcache);
    axon_rcache_destroy(rcache);
    return watches;
}

#endif
