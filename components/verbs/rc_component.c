/* The rc component: its descriptor (the code is the rc library: rc.h). */
#include "rc.h"

static axon_status_t axon_rc_query(const void *config, axon_resource_t **resources_p,
                                   unsigned *count_p)
{
    axon_status_t status = axon_rc_config_check(config);

    if (status != AXON_OK) {
        return status;
    }
    return axon_verbs_query_resources("rc", AXON_DEV_CAP_RC | AXON_DEV_CAP_SRQ | AXON_DEV_CAP_UD,
                                      axon_rc_fill_resource, (void *)config, resources_p,
                                      count_p);
}

static axon_status_t axon_rc_md_open_cb(const axon_resource_t *resource, const void *config,
                                        axon_md_t **md_p)
{
    const axon_rc_config_t *c = config;
    axon_status_t status      = axon_rc_config_check(c);

    if (status != AXON_OK) {
        return status;
    }
    return axon_rc_md_open(resource, c->gid_index, c->rcache_max, &axon_rc_hs_cm, md_p);
}

static axon_status_t axon_rc_open(const axon_resource_t *resource, const void *config,
                                  const axon_iface_params_t *params, axon_iface_t **iface_p)
{
    axon_status_t status = axon_rc_config_check(config);

    if (status != AXON_OK) {
        return status;
    }
    return axon_rc_iface_open(resource, config, params, &axon_rc_hs_cm, NULL, iface_p);
}

AXON_COMPONENT_EXPORT const axon_component_t AXON_COMPONENT_SYMBOL = {
    .abi_version   = AXON_COMPONENT_ABI_VERSION,
    .name          = "rc",
    .description   = "RDMA reliable connected: a QP per peer worker, SRQ, credits, RDMA get/put",
    .config_prefix = "RC_",
    .config_table  = axon_rc_config_table,
    .config_size   = sizeof(axon_rc_config_t),
    .query         = axon_rc_query,
    .md_open       = axon_rc_md_open_cb,
    .iface_open    = axon_rc_open,
};
