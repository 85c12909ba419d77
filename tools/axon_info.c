/*
 * axon_info: what this Axon build can do on this host.
 *   -v  version, build options and plugin search path
 *   -d  components, their resources, capabilities and estimates; RDMA devices
 *       of every device-layer back end with their ports and capabilities
 *   -c  every configuration variable with its value, default and help
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "axon_config.h"
#include "axon_int.h"
#include "dev_backend.h"
#include "dev_cm_backend.h"
#include "loader.h"

static const char *const axon_info_dev_types[] = {"self", "shm", "net"};

static void axon_info_version(axon_context_h ctx)
{
    const axon_dev_backend_t *const *be;
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
    printf("# device back ends:");
    for (be = axon_dev_backends; *be != NULL; ++be) {
        printf(" %s", (*be)->name);
    }
    printf("\n");
    printf("# installed plugin directory: %s\n", AXON_PLUGIN_DIR);
    if (axon_loader_search_dirs(&ctx->opts.component_path, &dirs) == AXON_OK) {
        for (i = 0; i < dirs.count; ++i) {
            printf("# component search path [%u]: %s\n", i, dirs.names[i]);
        }
        axon_config_names_release(&dirs);
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

/* ------------------------------------------------------------ RDMA devices */

static const char *const axon_info_port_states[] = {
    "NOP", "DOWN", "INIT", "ARMED", "ACTIVE"
};
static const char *const axon_info_link_layers[] = {
    "unspecified", "InfiniBand", "Ethernet"
};
static const char *const axon_info_atomic_caps[] = {
    "NONE", "HCA", "GLOB"
};

#define AXON_INFO_NAME(_names, _value) \
    (((unsigned)(_value) < sizeof(_names) / sizeof((_names)[0])) ? (_names)[_value] : "?")

static void axon_info_dev_report(const char *backend, const char *summary, void *arg)
{
    printf("#   %s: %s\n", backend, summary);
}

static void axon_info_dev_port(axon_dev_context_t *dev, uint8_t port)
{
    axon_dev_port_attr_t pattr;
    axon_dev_gid_t gid;
    char gid_str[INET6_ADDRSTRLEN];
    int i;

    if (axon_dev_query_port(dev, port, &pattr) != 0) {
        printf("#     port %u: cannot query\n", port);
        return;
    }
    printf("#     port %u: %s, mtu %zu (max %zu), link layer %s, lid %u\n", port,
           AXON_INFO_NAME(axon_info_port_states, pattr.state),
           axon_dev_mtu_bytes(pattr.active_mtu), axon_dev_mtu_bytes(pattr.max_mtu),
           AXON_INFO_NAME(axon_info_link_layers, pattr.link_layer), pattr.lid);
    for (i = 0; i < pattr.gid_tbl_len; ++i) {
        if (axon_dev_query_gid(dev, port, i, &gid) != 0) {
            break;
        }
        if (inet_ntop(AF_INET6, gid.raw, gid_str, sizeof(gid_str)) != NULL) {
            printf("#       gid[%d]: %s\n", i, gid_str);
        }
    }
}

static void axon_info_dev_attr(const axon_dev_attr_t *attr)
{
    unsigned bit;

    printf("#     capabilities:");
    for (bit = 0; axon_dev_cap_names[bit] != NULL; ++bit) {
        if (attr->cap_flags & (1ull << bit)) {
            printf(" %s", axon_dev_cap_names[bit]);
        }
    }
    printf("\n");
    printf("#       atomic_cap: %s\n", AXON_INFO_NAME(axon_info_atomic_caps, attr->atomic_cap));
    printf("#       max_qp: %d\n#       max_qp_wr: %d\n#       max_sge: %d\n",
           attr->max_qp, attr->max_qp_wr, attr->max_sge);
    printf("#       max_cqe: %d\n#       max_srq: %d\n#       max_srq_wr: %d\n",
           attr->max_cqe, attr->max_srq, attr->max_srq_wr);
    printf("#       max_inline_data: %u\n", attr->max_inline_data);
    printf("#       max_mr_size: %llu\n", (unsigned long long)attr->max_mr_size);
    printf("#       max_qp_rd_atom: %d\n", attr->max_qp_rd_atom);
    /* The experimental blocks: zero where the device lacks the feature. */
    printf("#       dc: max_dci %u, max_dct %u\n", attr->dc.max_dci, attr->dc.max_dct);
    printf("#       ext_atomic: log_arg_sizes 0x%x, max_fa_bit_boundary %u, "
           "log_max_inline %u\n", attr->ext_atomic.log_atomic_arg_sizes,
           attr->ext_atomic.max_fa_bit_boundary, attr->ext_atomic.log_max_atomic_inline);
    printf("#       umr: max_klm_list %u, max_inline_klms %u, max_recursion %u, "
           "max_stride_dim %u\n", attr->umr.max_klm_list_size,
           attr->umr.max_send_wqe_inline_klms, attr->umr.max_umr_recursion_depth,
           attr->umr.max_umr_stride_dimension);
    printf("#       cross_channel: calc_ops 0x%x, calc_data_types 0x%x, max_calc_vector %u\n",
           attr->cross_channel.calc_ops, attr->cross_channel.calc_data_types,
           attr->cross_channel.max_calc_vector);
}

static void axon_info_rdma_devices(void)
{
    axon_dev_info_t *list;
    axon_dev_context_t *dev;
    axon_dev_attr_t attr;
    int count, i, port;

    printf("#\n# RDMA devices (device layer back ends):\n");
    axon_dev_report_backends(axon_info_dev_report, NULL);
    if (axon_dev_get_list(&list, &count) != AXON_OK) {
        printf("#   cannot list devices\n");
        return;
    }
    for (i = 0; i < count; ++i) {
        printf("#\n#   device: %s (%s)\n", list[i].name, list[i].backend);
        if (axon_dev_open(list[i].name, &dev) != 0) {
            printf("#     cannot open\n");
            continue;
        }
        if (axon_dev_query_device(dev, &attr) != 0) {
            printf("#     cannot query\n");
            axon_dev_close(dev);
            continue;
        }
        printf("#     node_guid: 0x%016llx\n#     fw_ver: %s\n",
               (unsigned long long)attr.node_guid, attr.fw_ver);
        for (port = 1; port <= attr.phys_port_cnt; ++port) {
            axon_info_dev_port(dev, (uint8_t)port);
        }
        axon_info_dev_attr(&attr);
        axon_dev_close(dev);
    }
    axon_dev_free_list(list);
}

/*
 * A back end's options struct is private to it: parse into a zeroed buffer
 * that covers every entry's offset plus the largest value type.
 */
static void axon_info_config_backend(const char *kind, const char *name,
                                     const axon_config_entry_t *table, const char *prefix)
{
    const axon_config_entry_t *entry;
    size_t size = 0;
    void *opts;

    for (entry = table; entry->name != NULL; ++entry) {
        if (entry->offset > size) {
            size = entry->offset;
        }
    }
    size += sizeof(axon_config_allow_list_t) + sizeof(double);
    opts = calloc(1, size);
    if (opts == NULL) {
        return;
    }
    printf("# %s %s\n", kind, name);
    if (axon_config_parse(table, prefix, opts, NULL, 0) == AXON_OK) {
        axon_config_print(table, prefix, opts, stdout);
        axon_config_release(table, opts);
    } else {
        printf("# (a value does not parse: see the error above)\n");
    }
    free(opts);
}

static void axon_info_config(axon_context_h ctx)
{
    const axon_dev_backend_t *const *be;
    const axon_dev_cm_ops_t *const *cm;
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
    for (be = axon_dev_backends; *be != NULL; ++be) {
        if ((*be)->config_table != NULL) {
            axon_info_config_backend("device back end", (*be)->name, (*be)->config_table,
                                     (*be)->config_prefix);
        }
    }
    for (cm = axon_dev_cm_backends; *cm != NULL; ++cm) {
        if ((*cm)->config_table != NULL) {
            axon_info_config_backend("connection manager", (*cm)->name, (*cm)->config_table,
                                     (*cm)->config_prefix);
        }
    }
}

static void axon_info_usage(const char *prog)
{
    printf("Usage: %s [-v] [-d] [-c]\n"
           "  -v  version, build options, plugin search path\n"
           "  -d  components, devices, capabilities and estimates; RDMA devices\n"
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
        axon_info_rdma_devices();
    }
    if (show_config) {
        axon_info_config(ctx);
    }
    axon_cleanup(ctx);
    return 0;
}
