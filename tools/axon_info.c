/*
 * axon_info: what this Axon build can do on this host.
 *   -v  version, build options and plugin search path
 *   -d  components, their resources, capabilities and estimates; RDMA devices
 *       of every device-layer back end with their locality, ports,
 *       capabilities and limits, and per port the transport preferred past
 *       AXON_RC_MAX_PEERS; network devices nearest this thread first
 *   -c  every configuration variable with its value, default and help
 * A client of the public headers only: the library prints (axon_introspect.h).
 */
#include <getopt.h>
#include <stdio.h>
#include "axon.h"
#include "axon_introspect.h"

static void axon_info_usage(const char *prog)
{
    printf("Usage: %s [-v] [-d] [-c]\n"
           "  -v  version, build options, plugin search path\n"
           "  -d  components, devices, capabilities and estimates; RDMA devices,\n"
           "      their locality, limits and the transport preferred past\n"
           "      AXON_RC_MAX_PEERS; network devices nearest this thread first\n"
           "  -c  configuration variables: value, default and help\n"
           "Environment: AXON_TLS, AXON_NET_DEVICES, AXON_COMPONENT_PATH, ... (see -c)\n",
           prog);
}

int main(int argc, char **argv)
{
    axon_context_params_t params = {.features = AXON_FEATURE_TAG | AXON_FEATURE_COLL};
    unsigned what = 0;
    int c;
    axon_context_h ctx;
    axon_status_t status;

    while ((c = getopt(argc, argv, "vdch")) != -1) {
        switch (c) {
        case 'v': what |= AXON_INTROSPECT_BUILD;   break;
        case 'd': what |= AXON_INTROSPECT_DEVICES; break;
        case 'c': what |= AXON_INTROSPECT_CONFIG;  break;
        case 'h': axon_info_usage(argv[0]); return 0;
        default:  axon_info_usage(argv[0]); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "axon_info: unexpected argument '%s'\n", argv[optind]);
        axon_info_usage(argv[0]);
        return 2;
    }
    if (what == 0) {
        what = AXON_INTROSPECT_BUILD | AXON_INTROSPECT_DEVICES;
    }

    status = axon_init(&params, &ctx);
    if (status != AXON_OK) {
        fprintf(stderr, "axon_info: initialization failed: %s\n", axon_status_string(status));
        return 1;
    }
    status = axon_introspect_print(ctx, what, stdout);
    axon_cleanup(ctx);
    return (status == AXON_OK) ? 0 : 1;
}
