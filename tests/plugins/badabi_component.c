/* A plugin built for another ABI version: the loader must refuse it. */
#include "component.h"

static axon_status_t badabi_query(const void *config, axon_resource_t **r, unsigned *n)
{
    *n = 0;
    return AXON_OK;
}

AXON_COMPONENT_EXPORT const axon_component_t AXON_COMPONENT_SYMBOL = {
    .abi_version = AXON_COMPONENT_ABI_VERSION + 100,
    .name        = "badabi",
    .description = "test plugin with a wrong ABI version",
    .query       = badabi_query,
};
