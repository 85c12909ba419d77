/*
 * Introspection (axon_introspect.h): what this build and host offer, printed
 * the way axon_info shows it. Reads the context's loaded components and
 * selection, the device layer's back ends and every configuration table.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <unistd.h>
#include "axon_config.h"
#include "axon_int.h"
#include "axon_introspect.h"
#include "dev_backend.h"
#include "dev_cm_backend.h"
#include "log.h"
#include "select.h"
#include "sys.h"
#include "topo.h"

static const char *const axon_introspect_dev_types[] = {"self", "shm", "net"};

/* "yes" if configure defined _have (to 1), else "no": an undefined name stays a name. */
#define AXON_BUILT_STR(_have) #_have
#define AXON_BUILT(_have)     ((sizeof(AXON_BUILT_STR(_have)) == 2) ? "yes" : "no")

/*
 * Where softib's libibverbs.so.1 is (framework/device/softib/verbs_abi/): next
 * to the plugins of this libaxon (installed, or the build tree's mirror),
 * else where it installs. Not built without libibverbs' headers.
 */
static void axon_introspect_softib_verbs(FILE *stream)
{
#ifdef HAVE_IBVERBS
    char *lib_dir = axon_sys_dso_dir((const void *)axon_introspect_softib_verbs);
    char path[PATH_MAX], file[PATH_MAX + 32];

    snprintf(path, sizeof(path), "%s/axon/softib-verbs", (lib_dir != NULL) ? lib_dir : "");
    snprintf(file, sizeof(file), "%s/libibverbs.so.1", path);
    if ((lib_dir == NULL) || (access(file, R_OK) != 0)) {
        snprintf(path, sizeof(path), "%s/softib-verbs", AXON_PLUGIN_DIR);
    }
    free(lib_dir);
    fprintf(stream, "# softib's libibverbs.so.1, for verbs programs: LD_LIBRARY_PATH=%s\n", path);
#else
    fprintf(stream, "# softib's libibverbs.so.1: not built (no libibverbs headers)\n");
#endif
}

static void axon_introspect_version(axon_context_h ctx, FILE *stream)
{
    const axon_dev_backend_t *const *be;
    axon_config_names_t dirs;
    unsigned i;

    fprintf(stream, "# Axon version %s\n", axon_get_version_string());
    fprintf(stream, "# component ABI version %u\n", AXON_COMPONENT_ABI_VERSION);
    fprintf(stream, "# built with: rdma-core %s, librdmacm %s, mlx5dv %s, hwloc %s, "
                    "libfabric %s, PMIx %s\n", AXON_BUILT(HAVE_IBVERBS), AXON_BUILT(HAVE_RDMACM),
            AXON_BUILT(HAVE_MLX5DV), AXON_BUILT(HAVE_HWLOC), AXON_BUILT(HAVE_LIBFABRIC),
            AXON_BUILT(HAVE_PMIX));
    fprintf(stream, "# device back ends:");
    for (be = axon_dev_backends; *be != NULL; ++be) {
        fprintf(stream, " %s", (*be)->name);
    }
    fprintf(stream, "\n");
    fprintf(stream, "# installed plugin directory: %s\n", AXON_PLUGIN_DIR);
    axon_introspect_softib_verbs(stream);
    if (axon_loader_search_dirs(&ctx->opts.component_path, &dirs) == AXON_OK) {
        for (i = 0; i < dirs.count; ++i) {
            fprintf(stream, "# component search path [%u]: %s\n", i, dirs.names[i]);
        }
        axon_config_names_release(&dirs);
    }
}

static int axon_introspect_selected(axon_context_h ctx, const axon_resource_t *rsc)
{
    unsigned i;

    for (i = 0; i < ctx->num_rscs; ++i) {
        if (ctx->rscs[i].resource == rsc) {
            return 1;
        }
    }
    return 0;
}

static void axon_introspect_devices(axon_context_h ctx, FILE *stream)
{
    const axon_loaded_component_t *lc;
    const axon_resource_t *rsc;
    unsigned i, j, bit;

    for (i = 0; i < ctx->comps.count; ++i) {
        lc = &ctx->comps.comps[i];
        fprintf(stream, "#\n# component: %s\n#   path: %s\n", lc->name, lc->path);
        if (lc->component == NULL) {
            fprintf(stream, "#   status: not loaded: %s\n", lc->error);
            continue;
        }
        fprintf(stream, "#   description: %s\n", lc->component->description);
        if (lc->num_resources == 0) {
            fprintf(stream, "#   no device on this host\n");
        }
        for (j = 0; j < lc->num_resources; ++j) {
            rsc = &lc->resources[j];
            if (lc->component->coll_offload != NULL) {
                fprintf(stream, "#\n#   collective offload on %s (AXON_COLL_OFFLOAD; used by "
                        "teams whose members all reach each other over it)\n", rsc->dev_name);
                continue;
            }
            fprintf(stream, "#\n#   transport: %s\n", rsc->tl_name);
            fprintf(stream, "#      device: %s (%s)%s\n", rsc->dev_name,
                            axon_introspect_dev_types[rsc->dev_type],
                            axon_introspect_selected(ctx, rsc) ? "" : "  [not selected]");
            fprintf(stream, "#    capabilities:");
            for (bit = 0; axon_cap_names[bit] != NULL; ++bit) {
                if (rsc->cap_flags & (1ull << bit)) {
                    fprintf(stream, " %s", axon_cap_names[bit]);
                }
            }
            fprintf(stream, "\n");
            fprintf(stream, "#     latency: %.0f ns\n", rsc->latency_ns);
            fprintf(stream, "#   bandwidth: %.0f MB/s\n", rsc->bandwidth_MBps);
            fprintf(stream, "#    overhead: %.0f ns\n", rsc->overhead_ns);
            fprintf(stream, "#   max_short: %zu\n#   max_bcopy: %zu\n#   max_zcopy: %zu\n",
                            rsc->max_short, rsc->max_bcopy, rsc->max_zcopy);
            fprintf(stream, "#   ep memory: %zu bytes\n", rsc->ep_memory);
        }
    }
}

/* ------------------------------------------------------------ RDMA devices */

static const char *const axon_introspect_port_states[] = {
    "NOP", "DOWN", "INIT", "ARMED", "ACTIVE"
};
static const char *const axon_introspect_link_layers[] = {
    "unspecified", "InfiniBand", "Ethernet"
};
static const char *const axon_introspect_atomic_caps[] = {
    "NONE", "HCA", "GLOB"
};

#define AXON_INTROSPECT_NAME(_names, _value) \
    (((unsigned)(_value) < sizeof(_names) / sizeof((_names)[0])) ? (_names)[_value] : "?")

static void axon_introspect_dev_report(const char *backend, const char *summary, void *arg)
{
    fprintf(arg, "#   %s: %s\n", backend, summary);
}

static void axon_introspect_dev_port(axon_dev_context_t *dev, uint8_t port, FILE *stream)
{
    axon_dev_port_attr_t pattr;
    axon_dev_gid_t gid;
    char gid_str[INET6_ADDRSTRLEN];
    int i;

    if (axon_dev_query_port(dev, port, &pattr) != 0) {
        fprintf(stream, "#     port %u: cannot query\n", port);
        return;
    }
    fprintf(stream, "#     port %u: %s, mtu %zu (max %zu), link layer %s, lid %u\n", port,
                    AXON_INTROSPECT_NAME(axon_introspect_port_states, pattr.state),
                    axon_dev_mtu_bytes(pattr.active_mtu), axon_dev_mtu_bytes(pattr.max_mtu),
                    AXON_INTROSPECT_NAME(axon_introspect_link_layers, pattr.link_layer), pattr.lid);
    for (i = 0; i < pattr.gid_tbl_len; ++i) {
        if (axon_dev_query_gid(dev, port, i, &gid) != 0) {
            break;
        }
        if (inet_ntop(AF_INET6, gid.raw, gid_str, sizeof(gid_str)) != NULL) {
            fprintf(stream, "#       gid[%d]: %s\n", i, gid_str);
        }
    }
}

static void axon_introspect_dev_attr(const axon_dev_attr_t *attr, FILE *stream)
{
    unsigned bit;

    fprintf(stream, "#     capabilities:");
    for (bit = 0; axon_dev_cap_names[bit] != NULL; ++bit) {
        if (attr->cap_flags & (1ull << bit)) {
            fprintf(stream, " %s", axon_dev_cap_names[bit]);
        }
    }
    fprintf(stream, "\n");
    fprintf(stream, "#       atomic_cap: %s\n",
            AXON_INTROSPECT_NAME(axon_introspect_atomic_caps, attr->atomic_cap));
    fprintf(stream, "#       max_qp: %d\n#       max_qp_wr: %d\n#       max_sge: %d\n",
                    attr->max_qp, attr->max_qp_wr, attr->max_sge);
    fprintf(stream, "#       max_cqe: %d\n#       max_srq: %d\n#       max_srq_wr: %d\n",
                    attr->max_cqe, attr->max_srq, attr->max_srq_wr);
    fprintf(stream, "#       max_inline_data: %u\n", attr->max_inline_data);
    fprintf(stream, "#       max_mr_size: %llu\n", (unsigned long long)attr->max_mr_size);
    fprintf(stream, "#       max_qp_rd_atom: %d\n", attr->max_qp_rd_atom);
    fprintf(stream, "#       mcast: max_groups %d, max_qp_attach %d, max_total_qp_attach %d\n",
                    attr->max_mcast_grp, attr->max_mcast_qp_attach,
                    attr->max_total_mcast_qp_attach);
    /* The experimental blocks: zero where the device lacks the feature. */
    fprintf(stream, "#       dc: max_dci %u, max_dct %u, max_dc_req_rd_atom %d, "
                    "max_dc_res_rd_atom %d, max_dcr %u\n", attr->dc.max_dci, attr->dc.max_dct,
                    attr->dc.max_dc_req_rd_atom, attr->dc.max_dc_res_rd_atom, attr->dc.max_dcr);
    fprintf(stream, "#       ext_atomic: log_arg_sizes 0x%x, max_fa_bit_boundary %u, "
                    "log_max_inline %u\n", attr->ext_atomic.log_atomic_arg_sizes,
                    attr->ext_atomic.max_fa_bit_boundary, attr->ext_atomic.log_max_atomic_inline);
    fprintf(stream, "#       umr: max_klm_list %u, max_inline_klms %u, max_recursion %u, "
                    "max_stride_dim %u\n", attr->umr.max_klm_list_size,
                    attr->umr.max_send_wqe_inline_klms, attr->umr.max_umr_recursion_depth,
                    attr->umr.max_umr_stride_dimension);
    fprintf(stream, "#       cross_channel: data_types 0x%llx, data_sizes 0x%llx, int_ops 0x%llx, "
                    "uint_ops 0x%llx, fp_ops 0x%llx, max_calc_vector %u\n",
                    (unsigned long long)attr->cross_channel.data_types,
                    (unsigned long long)attr->cross_channel.data_sizes,
                    (unsigned long long)attr->cross_channel.int_ops,
                    (unsigned long long)attr->cross_channel.uint_ops,
                    (unsigned long long)attr->cross_channel.fp_ops,
                    attr->cross_channel.max_calc_vector);
}

/* ------------------------------------------------ lanes past many peers */

/*
 * Resources on device:port (dev_name), the context's selected ones, or with
 * selected 0 every loaded one; a malloc'd array in *out, their number returned.
 */
static unsigned axon_introspect_port_rscs(axon_context_h ctx, const char *dev_name, int selected,
                                          const axon_resource_t ***out)
{
    const axon_loaded_component_t *lc;
    const axon_resource_t **rscs;
    unsigned i, j, n = 0, max = ctx->num_rscs;

    for (i = 0; i < ctx->comps.count; ++i) {
        max += ctx->comps.comps[i].num_resources;
    }
    rscs = calloc(max + 1, sizeof(*rscs));
    if (rscs == NULL) {
        *out = NULL;
        return 0;
    }
    for (i = 0; selected && (i < ctx->num_rscs); ++i) {
        if ((ctx->rscs[i].resource->dev_type == AXON_DEV_TYPE_NET) &&
            !strcmp(ctx->rscs[i].resource->dev_name, dev_name)) {
            rscs[n++] = ctx->rscs[i].resource;
        }
    }
    for (i = 0; !selected && (i < ctx->comps.count); ++i) {
        lc = &ctx->comps.comps[i];
        if ((lc->component == NULL) || (lc->component->coll_offload != NULL)) {
            continue;
        }
        for (j = 0; j < lc->num_resources; ++j) {
            if ((lc->resources[j].dev_type == AXON_DEV_TYPE_NET) &&
                !strcmp(lc->resources[j].dev_name, dev_name)) {
                rscs[n++] = &lc->resources[j];
            }
        }
    }
    *out = rscs;
    return n;
}

/* "dc (48 bytes per endpoint)", or each lane's when they differ. */
static void axon_introspect_print_lanes(const axon_resource_t *const *rscs,
                                        const axon_lane_choice_t *choice, FILE *stream)
{
    const axon_resource_t *small = rscs[choice->small], *bulk = rscs[choice->bulk];

    if (small == bulk) {
        fprintf(stream, "%s (%zu bytes per endpoint)", small->tl_name, small->ep_memory);
    } else {
        fprintf(stream, "small lane %s (%zu bytes per endpoint), bulk lane %s (%zu)",
                small->tl_name, small->ep_memory, bulk->tl_name, bulk->ep_memory);
    }
}

/* Why a device with DC does not get dc lanes: the dc component's state. */
static const char *axon_introspect_dc_missing(axon_context_h ctx, const char *dev_name)
{
    const axon_resource_t **loaded;
    unsigned i, n;
    int on_port = 0;

    n = axon_introspect_port_rscs(ctx, dev_name, 0, &loaded);
    for (i = 0; i < n; ++i) {
        on_port = on_port || !strcmp(loaded[i]->tl_name, "dc");
    }
    free(loaded);
    if (on_port) {
        return "AXON_TLS leaves dc out";
    }
    for (i = 0; i < ctx->comps.count; ++i) {
        if (!strcmp(ctx->comps.comps[i].name, "dc")) {
            return (ctx->comps.comps[i].component == NULL) ? ctx->comps.comps[i].error :
                   "the dc component found no usable port here";
        }
    }
    return "libaxon_dc.so is not built";
}

/*
 * Which transport selection moves a port's lanes to once a worker has
 * AXON_RC_MAX_PEERS endpoints (axon_select_lanes itself decides, so this
 * cannot drift from it): among the selected resources of the port, or all
 * loaded ones, marked, when AXON_TLS selects none (a software device).
 */
static void axon_introspect_dev_many_peers(axon_context_h ctx, const char *dev, uint8_t port,
                                           const axon_dev_attr_t *attr, FILE *stream)
{
    axon_lane_select_params_t few  = {0, ctx->opts.rc_max_peers};
    axon_lane_select_params_t many = {ctx->opts.rc_max_peers, ctx->opts.rc_max_peers};
    axon_lane_choice_t few_choice, many_choice;
    const axon_resource_t **rscs;
    char dev_name[128];  /* "<device>:<port>", as resources name it */
    unsigned n;
    int selected = 1;

    snprintf(dev_name, sizeof(dev_name), "%s:%u", dev, port);
    n = axon_introspect_port_rscs(ctx, dev_name, selected, &rscs);
    if (n == 0) {
        free(rscs);
        selected = 0;
        n = axon_introspect_port_rscs(ctx, dev_name, selected, &rscs);
    }
    fprintf(stream, "#     port %u past AXON_RC_MAX_PEERS=%u endpoints: ", port,
            ctx->opts.rc_max_peers);
    if (n == 0) {
        fprintf(stream, "no transport uses this port\n");
        free(rscs);
        return;
    }
    if ((axon_select_lanes(rscs, n, &few, &few_choice) != AXON_OK) ||
        (axon_select_lanes(rscs, n, &many, &many_choice) != AXON_OK)) {
        fprintf(stream, "no transport on this port carries messages\n");
        free(rscs);
        return;
    }
    axon_introspect_print_lanes(rscs, &many_choice, stream);
    fprintf(stream, ", before: ");
    axon_introspect_print_lanes(rscs, &few_choice, stream);
    if (strcmp(rscs[many_choice.small]->tl_name, "dc") != 0) {
        fprintf(stream, "; %s", !(attr->cap_flags & AXON_DEV_CAP_DC) ? "no DC on this device" :
                                axon_introspect_dc_missing(ctx, dev_name));
    }
    fprintf(stream, "%s\n", selected ? "" : "  [not selected]");
    free(rscs);
}

static void axon_introspect_dev_locality(const char *locality, FILE *stream)
{
    char where[192];

    axon_topo_locality_describe(locality, where, sizeof(where));
    fprintf(stream, "#     locality: %s%s%s\n", locality, locality[0] ? ", " : "", where);
}

/* ------------------------------------------------ device ranking */

/* Every loaded network resource (lane choice ranks the selected ones). */
static unsigned axon_introspect_net_rscs(axon_context_h ctx, const axon_resource_t **rscs,
                                         unsigned max)
{
    const axon_loaded_component_t *lc;
    unsigned i, j, n = 0;

    for (i = 0; i < ctx->comps.count; ++i) {
        lc = &ctx->comps.comps[i];
        if ((lc->component == NULL) || (lc->component->coll_offload != NULL)) {
            continue;
        }
        for (j = 0; (j < lc->num_resources) && (n < max); ++j) {
            if (lc->resources[j].dev_type == AXON_DEV_TYPE_NET) {
                rscs[n++] = &lc->resources[j];
            }
        }
    }
    return n;
}

/*
 * Per transport, its devices in the order lane choice prefers them for this
 * thread's binding (axon_select_nearer, as a worker made here would rank).
 */
static void axon_introspect_ranking(axon_context_h ctx, FILE *stream)
{
    const axon_resource_t *rscs[64], *rsc;
    unsigned dist[64], order[64], n, i, j, k, tmp;
    char binding[192], how_far[16];
    int first;

    axon_topo_binding_describe(binding, sizeof(binding));
    fprintf(stream, "#\n# network devices nearest first, for this thread (%s):\n", binding);
    n = axon_introspect_net_rscs(ctx, rscs, 64);
    if (n == 0) {
        fprintf(stream, "#   no network device\n");
        return;
    }
    for (i = 0; i < n; ++i) {
        dist[i]  = axon_topo_device_distance(rscs[i]->locality, NULL, 0);
        order[i] = i;
        for (j = i; (j > 0) && axon_select_nearer(rscs[order[j]], dist[order[j]],
                                                  rscs[order[j - 1]], dist[order[j - 1]]); --j) {
            tmp = order[j]; order[j] = order[j - 1]; order[j - 1] = tmp;
        }
    }
    for (i = 0; i < n; ++i) {
        rsc = rscs[i];
        for (k = 0; (k < i) && strcmp(rscs[k]->tl_name, rsc->tl_name); ++k) {
        }
        if (k < i) {
            continue;   /* transport already printed */
        }
        fprintf(stream, "#   %s:", rsc->tl_name);
        for (first = 1, j = 0; j < n; ++j) {
            if (strcmp(rscs[order[j]]->tl_name, rsc->tl_name) == 0) {
                snprintf(how_far, sizeof(how_far), "%u", dist[order[j]]);
                fprintf(stream, "%s %s (distance %s%s)", first ? "" : ",",
                        rscs[order[j]]->dev_name,
                        (dist[order[j]] == AXON_TOPO_DISTANCE_UNKNOWN) ? "unknown" : how_far,
                        axon_introspect_selected(ctx, rscs[order[j]]) ? "" : ", not selected");
                first = 0;
            }
        }
        fprintf(stream, "\n");
    }
}

static void axon_introspect_rdma_devices(axon_context_h ctx, FILE *stream)
{
    axon_dev_info_t *list;
    axon_dev_context_t *dev;
    axon_dev_attr_t attr;
    int count, i, port;

    fprintf(stream, "#\n# RDMA devices (device layer back ends):\n");
    axon_dev_report_backends(axon_introspect_dev_report, stream);
    if (axon_dev_get_list(&list, &count) != AXON_OK) {
        fprintf(stream, "#   cannot list devices\n");
        return;
    }
    for (i = 0; i < count; ++i) {
        fprintf(stream, "#\n#   device: %s (%s)\n", list[i].name, list[i].backend);
        axon_introspect_dev_locality(list[i].locality, stream);
        if (axon_dev_open(list[i].name, &dev) != 0) {
            fprintf(stream, "#     cannot open\n");
            continue;
        }
        if (axon_dev_query_device(dev, &attr) != 0) {
            fprintf(stream, "#     cannot query\n");
            axon_dev_close(dev);
            continue;
        }
        fprintf(stream, "#     node_guid: 0x%016llx\n#     fw_ver: %s\n",
                        (unsigned long long)attr.node_guid, attr.fw_ver);
        for (port = 1; port <= attr.phys_port_cnt; ++port) {
            axon_introspect_dev_port(dev, (uint8_t)port, stream);
        }
        axon_introspect_dev_attr(&attr, stream);
        for (port = 1; port <= attr.phys_port_cnt; ++port) {
            axon_introspect_dev_many_peers(ctx, list[i].name, (uint8_t)port, &attr, stream);
        }
        axon_dev_close(dev);
    }
    axon_dev_free_list(list);
}

/*
 * A back end's options struct is private to it: parse into a zeroed buffer
 * that covers every entry's offset plus the largest value type. NULL table:
 * the back end has no options.
 */
static void axon_introspect_config_backend(const char *kind, const char *name,
                                           const axon_config_entry_t *table, const char *prefix,
                                           FILE *stream)
{
    const axon_config_entry_t *entry;
    size_t size = 0;
    void *opts;

    if (table == NULL) {
        return;
    }
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
    fprintf(stream, "# %s %s\n", kind, name);
    if (axon_config_parse(table, prefix, opts, NULL, 0) == AXON_OK) {
        axon_config_print(table, prefix, opts, stream);
        axon_config_release(table, opts);
    } else {
        fprintf(stream, "# (a value does not parse: see the error above)\n");
    }
    free(opts);
}

static void axon_introspect_config(axon_context_h ctx, FILE *stream)
{
    const axon_dev_backend_t *const *be;
    const axon_loaded_component_t *lc;
    unsigned i;

    fprintf(stream, "# global configuration\n");
    axon_config_print(axon_global_config_table, "", &ctx->opts, stream);
    for (i = 0; i < ctx->comps.count; ++i) {
        lc = &ctx->comps.comps[i];
        if ((lc->component == NULL) || (lc->component->config_table == NULL)) {
            continue;
        }
        fprintf(stream, "# component %s\n", lc->name);
        axon_config_print(lc->component->config_table, lc->component->config_prefix,
                          lc->config, stream);
    }
    for (be = axon_dev_backends; *be != NULL; ++be) {
        axon_introspect_config_backend("device back end", (*be)->name, (*be)->config_table,
                                       (*be)->config_prefix, stream);
        if ((*be)->cm != NULL) {
            axon_introspect_config_backend("connection manager", (*be)->cm->name,
                                           (*be)->cm->config_table, (*be)->cm->config_prefix,
                                           stream);
        }
    }
}

axon_status_t axon_introspect_print(axon_context_h ctx, unsigned what, FILE *stream)
{
    if ((ctx == NULL) || (stream == NULL) || (what & ~AXON_INTROSPECT_ALL)) {
        axon_error("axon_introspect_print: %s", (ctx == NULL) ? "NULL context" :
                   (stream == NULL) ? "NULL stream" : "unknown bits in what");
        return AXON_ERR_INVALID_PARAM;
    }
    if (what & AXON_INTROSPECT_BUILD) {
        axon_introspect_version(ctx, stream);
    }
    if (what & AXON_INTROSPECT_DEVICES) {
        axon_introspect_devices(ctx, stream);
        axon_introspect_rdma_devices(ctx, stream);
        axon_introspect_ranking(ctx, stream);
    }
    if (what & AXON_INTROSPECT_CONFIG) {
        axon_introspect_config(ctx, stream);
    }
    return AXON_OK;
}
