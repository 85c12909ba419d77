/* The rdmacm component: rc (the rc library) with the RDMA CM as its connection manager. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rdmacm.h"

static const axon_config_entry_t axon_rdmacm_config_table[] = {
    {"ADDR", "auto",
     "IPv4 address an interface listens on; auto = the IPv4 address in the port's GID "
     "table (RoCE, softib). The data path is rc's: tune it with AXON_RC_*",
     offsetof(axon_rdmacm_config_t, addr), AXON_CONFIG_TYPE_STRING},

    {"PORT", "0",
     "Listening port of the first interface (0 = one the system picks)",
     offsetof(axon_rdmacm_config_t, port), AXON_CONFIG_TYPE_UINT},

    {"RESOLVE_TIMEOUT", "2s",
     "Time address and route resolution may take before a connection fails unreachable",
     offsetof(axon_rdmacm_config_t, resolve_timeout), AXON_CONFIG_TYPE_TIME},

    AXON_CONFIG_END
};

/* The data path's options (AXON_RC_*), checked as rc checks them */
static axon_status_t axon_rdmacm_rc_config(axon_rc_config_t *rc)
{
    axon_status_t status = axon_config_parse(axon_rc_config_table, "RC_", rc, NULL, 0);

    return (status == AXON_OK) ? axon_rc_config_check(rc) : status;
}

static axon_status_t axon_rdmacm_config_check(const axon_rdmacm_config_t *c)
{
    if (c->port > 65535) {
        axon_error("AXON_RDMACM_PORT=%u is invalid: must be at most 65535", c->port);
        return AXON_ERR_INVALID_PARAM;
    }
    if (!(c->resolve_timeout > 0) || (c->resolve_timeout > 600)) {
        axon_error("AXON_RDMACM_RESOLVE_TIMEOUT=%g is invalid: must be more than 0 (and at "
                   "most 10 minutes)", c->resolve_timeout);
        return AXON_ERR_INVALID_PARAM;
    }
    return AXON_OK;
}

static axon_status_t axon_rdmacm_query(const void *config, axon_resource_t **resources_p,
                                       unsigned *count_p)
{
    axon_rc_config_t rc;
    axon_status_t status;

    if (((status = axon_rdmacm_config_check(config)) != AXON_OK) ||
        ((status = axon_rdmacm_rc_config(&rc)) != AXON_OK)) {
        return status;
    }
    status = axon_verbs_query_resources("rdmacm",
                                        AXON_DEV_CAP_RC | AXON_DEV_CAP_SRQ | AXON_DEV_CAP_UD,
                                        axon_rc_fill_resource, &rc, resources_p, count_p);
    axon_config_release(axon_rc_config_table, &rc);
    return status;
}

static axon_status_t axon_rdmacm_md_open(const axon_resource_t *resource, const void *config,
                                         axon_md_t **md_p)
{
    axon_rc_config_t rc;
    axon_status_t status;

    if (((status = axon_rdmacm_config_check(config)) != AXON_OK) ||
        ((status = axon_rdmacm_rc_config(&rc)) != AXON_OK)) {
        return status;
    }
    return axon_rc_md_open(resource, rc.gid_index, rc.rcache_max, &axon_rdmacm_cm, md_p);
}

static axon_status_t axon_rdmacm_open(const axon_resource_t *resource, const void *config,
                                      const axon_iface_params_t *params, axon_iface_t **iface_p)
{
    axon_rc_config_t rc;
    axon_status_t status;

    if (((status = axon_rdmacm_config_check(config)) != AXON_OK) ||
        ((status = axon_rdmacm_rc_config(&rc)) != AXON_OK)) {
        return status;
    }
    return axon_rc_iface_open(resource, &rc, params, &axon_rdmacm_cm, config, iface_p);
}

AXON_COMPONENT_EXPORT const axon_component_t AXON_COMPONENT_SYMBOL = {
    .abi_version   = AXON_COMPONENT_ABI_VERSION,
    .name          = "rdmacm",
    .description   = "RDMA reliable connected set up by the RDMA connection manager "
                     "(librdmacm, softib): rc's data path, IP addresses",
    .config_prefix = "RDMACM_",
    .config_table  = axon_rdmacm_config_table,
    .config_size   = sizeof(axon_rdmacm_config_t),
    .query         = axon_rdmacm_query,
    .md_open       = axon_rdmacm_md_open,
    .iface_open    = axon_rdmacm_open,
};
