/* A plugin that cannot be loaded: it needs a symbol no library provides,
 * as a plugin built against a missing dependency would. */
#include "component.h"

extern int axon_test_symbol_that_does_not_exist(void);

static axon_status_t broken_query(const void *config, axon_resource_t **r, unsigned *n)
{
    return axon_test_symbol_that_does_not_exist() ? AXON_ERR_NO_DEVICE : AXON_OK;
}

AXON_COMPONENT_EXPORT const axon_component_t AXON_COMPONENT_SYMBOL = {
    .abi_version = AXON_COMPONENT_ABI_VERSION,
    .name        = "broken",
    .description = "test plugin with an unresolved symbol",
    .query       = broken_query,
};
