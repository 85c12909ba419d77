/* The dc component: its descriptor. */
#include "dc.h"

/* dc shares rc's memory domain: the device opened as rc's manager would */
static const axon_rc_cm_t axon_dc_md_cm = {
    .name      = "dc",
    .dev_open  = axon_verbs_dev_open,
    .dev_close = axon_verbs_dev_close,
};

static axon_status_t axon_dc_query(const void *config, axon_resource_t **resources_p,
                                   unsigned *count_p)
{
    axon_status_t status = axon_dc_config_check(config);

    if (status != AXON_OK) {
        return status;
    }
    return axon_verbs_query_resources("dc", AXON_DEV_CAP_DC | AXON_DEV_CAP_SRQ,
                                      axon_dc_fill_resource, (void *)config, resources_p,
                                      count_p);
}

static axon_status_t axon_dc_md_open(const axon_resource_t *resource, const void *config,
                                     axon_md_t **md_p)
{
    const axon_dc_config_t *c = config;
    axon_status_t status      = axon_dc_config_check(c);

    if (status != AXON_OK) {
        return status;
    }
    return axon_rc_md_open(resource, c->gid_index, c->rcache_max, &axon_dc_md_cm, md_p);
}

static axon_status_t axon_dc_open(const axon_resource_t *resource, const void *config,
                                  const axon_iface_params_t *params, axon_iface_t **iface_p)
{
    axon_status_t status = axon_dc_config_check(config);
    const axon_rc_md_t *md = (const axon_rc_md_t *)params->md;

    if (status != AXON_OK) {
        return status;
    }
    if ((md == NULL) || (md->cm != &axon_dc_md_cm)) {
        axon_error("dc/%s: opened without the memory domain of its device", resource->dev_name);
        return AXON_ERR_INVALID_PARAM;
    }
    return axon_dc_iface_open(resource, config, params, iface_p);
}

AXON_COMPONENT_EXPORT const axon_component_t AXON_COMPONENT_SYMBOL = {
    .abi_version   = AXON_COMPONENT_ABI_VERSION,
    .name          = "dc",
    .description   = "RDMA dynamically connected: a pool of DC initiators reaches every peer's "
                     "DC target, SRQ, credits, RDMA get/put, device atomics",
    .config_prefix = "DC_",
    .config_table  = axon_dc_config_table,
    .config_size   = sizeof(axon_dc_config_t),
    .query         = axon_dc_query,
    .md_open       = axon_dc_md_open,
    .iface_open    = axon_dc_open,
};
