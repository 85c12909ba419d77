/*
 * axon_info: what this Axon build can do on this host.
 *   -v  version, build options and plugin search path
 *   -d  components, their resources, capabilities and estimates
 *   -c  every configuration variable with its value, default and help
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "axon_config.h"
#include "axon_int.h"
#include "loader.h"

static const char *const axon_info_dev_types[] = {"self", "shm", "net"};

static void axon_info_version(axon_context_h ctx)
{
    axon_config_names_t dirs;
    unsigned i;

    printf("# Axon version %s\n", axon_get_version_string());
    printf("# component ABI version %u\n", AXON_COMPONENT_ABI_VERSION);
    printf("# built with: rdma-core %s, librdmacm %s, mlx5dv %s, hwloc %s, libfabric %s, PMIx %s\n",
#ifdef HAVE_IBVERBS
           "yes",
#else
           "no",
#endif
#ifdef HAVE_RDMACM
           "yes",
#else
           "no",
#endif
#ifdef HAVE_MLX5DV
           "yes",
#else
           "no",
#endif
#ifdef HAVE_HWLOC
           "yes",
#else
           "no",
#endif
#ifdef HAVE_LIBFABRIC
           "yes",
#else
           "no",
#endif
#ifdef HAVE_PMIX
           "yes"
#else
           "no"
#endif
           );
    printf("# installed plugin directory: %s\n", AXON_PLUGIN_DIR);
    if (axon_loader_search_dirs(&ctx->opts.component_path, &dirs) == AXON_OK) {
        for (i = 0; i < dirs.count; ++i) {
            printf("# component search path [%u]: %s\n", i, dirs.names[i]);
        }
        axon_loader_names_free(&dirs);
    }
}

static int axon_info_selected(axon_context_h ctx, const axon_resource_t *rsc)
{
    unsigned i;

    for (i = 0; i < ctx->num_rscs; ++i) {
        if (ctx->rscs[i].resource == rsc) {
            return 1;
        }
    }
    return 0;
}

static void axon_info_devices(axon_context_h ctx)
{
    const axon_loaded_component_t *lc;
    const axon_resource_t *rsc;
    unsigned i, j, bit;

    for (i = 0; i < ctx->comps.count; ++i) {
        lc = &ctx->comps.comps[i];
        printf("#\n# component: %s\n#   path: %s\n", lc->name, lc->path);
        if (lc->component == NULL) {
            printf("#   status: not loaded: %s\n", lc->error);
            continue;
        }
        printf("#   description: %s\n", lc->component->description);
        if (lc->num_resources == 0) {
            printf("#   no device on this host\n");
        }
        for (j = 0; j < lc->num_resources; ++j) {
            rsc = &lc->resources[j];
            printf("#\n#   transport: %s\n", rsc->tl_name);
            printf("#      device: %s (%s)%s\n", rsc->dev_name,
                   axon_info_dev_types[rsc->dev_type],
                   axon_info_selected(ctx, rsc) ? "" : "  [not selected]");
            printf("#    capabilities:");
            for (bit = 0; axon_cap_names[bit] != NULL; ++bit) {
                if (rsc->cap_flags & (1ull << bit)) {
                    printf(" %s", axon_cap_names[bit]);
                }
            }
            printf("\n");
            printf("#     latency: %.0f ns\n", rsc->latency_ns);
            printf("#   bandwidth: %.0f MB/s\n", rsc->bandwidth_MBps);
            printf("#    overhead: %.0f ns\n", rsc->overhead_ns);
            printf("#   max_short: %zu\n#   max_bcopy: %zu\n#   max_zcopy: %zu\n",
                   rsc->max_short, rsc->max_bcopy, rsc->max_zcopy);
            printf("#   ep memory: %zu bytes\n", rsc->ep_memory);
        }
    }
}

static void axon_info_config(axon_context_h ctx)
{
    const axon_loaded_component_t *lc;
    unsigned i;

    printf("# global configuration\n");
    axon_config_print(axon_global_config_table, "", &ctx->opts, stdout);
    for (i = 0; i < ctx->comps.count; ++i) {
        lc = &ctx->comps.comps[i];
        if ((lc->component == NULL) || (lc->component->config_table == NULL)) {
            continue;
        }
        printf("# component %s\n", lc->name);
        axon_config_print(lc->component->config_table, lc->component->config_prefix,
                          lc->config, stdout);
    }
}

static void axon_info_usage(const char *prog)
{
    printf("Usage: %s [-v] [-d] [-c]\n"
           "  -v  version, build options, plugin search path\n"
           "  -d  components, devices, capabilities and estimates\n"
           "  -c  configuration variables: value, default and help\n"
           "Environment: AXON_TLS, AXON_NET_DEVICES, AXON_COMPONENT_PATH, ... (see -c)\n",
           prog);
}

int main(int argc, char **argv)
{
    axon_context_params_t params = {.features = AXON_FEATURE_TAG};
    int show_version = 0, show_devices = 0, show_config = 0, c;
    axon_context_h ctx;
    axon_status_t status;

    while ((c = getopt(argc, argv, "vdch")) != -1) {
        switch (c) {
        case 'v': show_version = 1; break;
        case 'd': show_devices = 1; break;
        case 'c': show_config  = 1; break;
        case 'h': axon_info_usage(argv[0]); return 0;
        default:  axon_info_usage(argv[0]); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "axon_info: unexpected argument '%s'\n", argv[optind]);
        axon_info_usage(argv[0]);
        return 2;
    }
    if (!show_version && !show_devices && !show_config) {
        show_version = show_devices = 1;
    }

    status = axon_init(&params, &ctx);
    if (status != AXON_OK) {
        fprintf(stderr, "axon_info: initialization failed: %s\n", axon_status_string(status));
        return 1;
    }
    if (show_version) {
        axon_info_version(ctx);
    }
    if (show_devices) {
        axon_info_devices(ctx);
    }
    if (show_config) {
        axon_info_config(ctx);
    }
    axon_cleanup(ctx);
    return 0;
}
