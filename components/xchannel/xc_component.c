/* The xchannel component: collective offload on devices with cross-channel support. */
#include <stddef.h>
#include "log.h"
#include "xchannel.h"

static const axon_config_entry_t axon_xc_config_table[] = {
    {"TIMEOUT", "1s",
     "Acknowledgement timeout of the offload QPs (IB 4.096us * 2^n scale); with RETRY_COUNT "
     "it bounds how long a chain's send to a dead member lasts",
     offsetof(axon_xc_config_t, timeout), AXON_CONFIG_TYPE_TIME},

    {"RETRY_COUNT", "7", "Retransmissions before a chain's send fails (0..7)",
     offsetof(axon_xc_config_t, retry_count), AXON_CONFIG_TYPE_UINT},

    {"GID_INDEX", "0", "GID table index of the port (RoCE)",
     offsetof(axon_xc_config_t, gid_index), AXON_CONFIG_TYPE_UINT},

    AXON_CONFIG_END
};

static int axon_xc_fill(const axon_verbs_port_info_t *info, axon_resource_t *res, void *arg)
{
    (void)info;
    (void)arg;
    res->cap_flags = 0;   /* not a transport: the collectives layer uses it */
    return 0;
}

static axon_status_t axon_xc_query(const void *config_v, axon_resource_t **resources_p,
                                   unsigned *count_p)
{
    const axon_xc_config_t *c = config_v;

    if ((c->retry_count > 7) || !(c->timeout > 0) || (c->gid_index > 255)) {
        axon_error("AXON_XCHANNEL_RETRY_COUNT=%u, AXON_XCHANNEL_TIMEOUT=%gs or "
                   "AXON_XCHANNEL_GID_INDEX=%u is invalid (0..7, > 0, < 256)", c->retry_count,
                   c->timeout, c->gid_index);
        return AXON_ERR_INVALID_PARAM;
    }
    return axon_verbs_query_resources("xchannel", AXON_DEV_CAP_CROSS_CHANNEL, axon_xc_fill,
                                      NULL, resources_p, count_p);
}

AXON_COMPONENT_EXPORT const axon_component_t AXON_COMPONENT_SYMBOL = {
    .abi_version   = AXON_COMPONENT_ABI_VERSION,
    .name          = "xchannel",
    .description   = "collectives offloaded to the device as cross-channel chains (CORE-Direct)",
    .config_prefix = "XCHANNEL_",
    .config_table  = axon_xc_config_table,
    .config_size   = sizeof(axon_xc_config_t),
    .query         = axon_xc_query,
    .coll_offload  = &axon_xc_ops,
};
