/* The library version. */
#include "axon.h"
#include "axon_config.h"

void axon_get_version(unsigned *major, unsigned *minor, unsigned *patch)
{
    *major = AXON_VERSION_MAJOR;
    *minor = AXON_VERSION_MINOR;
    *patch = AXON_VERSION_PATCH;
}

const char *axon_get_version_string(void)
{
    return PACKAGE_VERSION;
}
