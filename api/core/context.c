/* Context: configuration, components, and the transports the job may use. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include "axon_int.h"
#include "dev_backend.h"
#include "dev_cm_backend.h"
#include "log.h"
#include "mem.h"
#include "topo.h"

const char *const axon_rndv_scheme_names[] = {"auto", "get", "stream", NULL};

#define AXON_GLOBAL_OPT(_field) offsetof(axon_global_opts_t, _field)

/* AXON_COLL_<NAME>_ALGO: the algorithms of api/coll/ by name, "auto" first. */
static const char *const axon_coll_barrier_algos[] = {"auto", "dissemination", NULL};
static const char *const axon_coll_bcast_algos[] = {"auto", "knomial", NULL};
static const char *const axon_coll_reduce_algos[] = {"auto", "knomial", NULL};
static const char *const axon_coll_allreduce_algos[] = {"auto", "recursive_doubling", "ring", NULL};
static const char *const axon_coll_allgather_algos[] = {"auto", "ring", "bruck", NULL};
static const char *const axon_coll_allgatherv_algos[] = {"auto", "ring", NULL};
static const char *const axon_coll_alltoall_algos[] = {"auto", "pairwise", NULL};
static const char *const axon_coll_alltoallv_algos[] = {"auto", "pairwise", NULL};
static const char *const axon_coll_reduce_scatter_algos[] = {"auto", "ring", NULL};
static const char *const axon_coll_gather_algos[] = {"auto", "linear", NULL};
static const char *const axon_coll_scatter_algos[] = {"auto", "linear", NULL};
static const char *const axon_coll_offload_names[] = {"auto", "y", "n", NULL};
const char *const *const axon_coll_algo_names[AXON_COLL_LAST] = {
    [AXON_COLL_BARRIER] = axon_coll_barrier_algos,
    [AXON_COLL_BCAST] = axon_coll_bcast_algos,
    [AXON_COLL_REDUCE] = axon_coll_reduce_algos,
    [AXON_COLL_ALLREDUCE] = axon_coll_allreduce_algos,
    [AXON_COLL_ALLGATHER] = axon_coll_allgather_algos,
    [AXON_COLL_ALLGATHERV] = axon_coll_allgatherv_algos,
    [AXON_COLL_ALLTOALL] = axon_coll_alltoall_algos,
    [AXON_COLL_ALLTOALLV] = axon_coll_alltoallv_algos,
    [AXON_COLL_REDUCE_SCATTER] = axon_coll_reduce_scatter_algos,
    [AXON_COLL_GATHER] = axon_coll_gather_algos,
    [AXON_COLL_SCATTER] = axon_coll_scatter_algos,
};

const axon_config_entry_t axon_global_config_table[] = {
    {"LOG_LEVEL", "warn",
     "Messages at this level and more severe are printed",
     AXON_GLOBAL_OPT(log_level),
     AXON_CONFIG_TYPE_ENUM(axon_log_level_names, "error|warn|info|debug|trace")},

    {"LOG_FILE", "stderr",
     "Where log lines go: stderr, stdout or a file path (%p is replaced by the pid)",
     AXON_GLOBAL_OPT(log_file), AXON_CONFIG_TYPE_STRING},

    {"TLS", "all",
     "Transports to use: a list (shm,self), ^list to exclude, aliases sm=shm,self, "
     "ib=rc,ud,dc and all",
     AXON_GLOBAL_OPT(tls), AXON_CONFIG_TYPE_ALLOW_LIST},

    {"NET_DEVICES", "all",
     "Network devices to use (name:port), ^list to exclude, or all; shm and self are not affected",
     AXON_GLOBAL_OPT(net_devices), AXON_CONFIG_TYPE_ALLOW_LIST},

    {"COMPONENT_PATH", "",
     "Colon-separated directories searched for libaxon_<name>.so before the installed ones",
     AXON_GLOBAL_OPT(component_path), AXON_CONFIG_TYPE_PATH_LIST},

    {"WARN_UNUSED_ENV", "y",
     "Warn about AXON_* environment variables that no component knows (catches typos)",
     AXON_GLOBAL_OPT(warn_unused_env), AXON_CONFIG_TYPE_BOOL},

    {"BCOPY_THRESH", "0",
     "Messages of at least this size are copied by a pack callback instead of sent short",
     AXON_GLOBAL_OPT(bcopy_thresh), AXON_CONFIG_TYPE_SIZE},

    {"RNDV_THRESH", "auto",
     "Messages of at least this size use rendezvous (auto: from the costs the bulk lane measured, "
     "else from its estimates)",
     AXON_GLOBAL_OPT(rndv_thresh), AXON_CONFIG_TYPE_SIZE_AUTO},

    {"RNDV_SPLIT_THRESH", "256k",
     "Rendezvous messages of at least this size, on a lane that can both get and put, are "
     "copied half by the receiver and half by the sender at once (inf: receiver copies all)",
     AXON_GLOBAL_OPT(rndv_split_thresh), AXON_CONFIG_TYPE_SIZE},

    {"RNDV_RUNS_MIN", "1k",
     "A non-contiguous rendezvous over shm reads and writes the runs of both sides by single "
     "copy only when they hold at least this many bytes on average on each side (the kernel "
     "pins pages once per remote run); smaller runs are streamed through the ring",
     AXON_GLOBAL_OPT(rndv_runs_min), AXON_CONFIG_TYPE_SIZE},

    {"RNDV_SCHEME", "auto",
     "How a rendezvous receiver takes the data: get (reads the sender's memory where the "
     "lane can: shm cross-memory attach, RDMA read), stream (the sender sends it after a "
     "request) or auto (get from the size where the costs the transport measured at start "
     "make it cheaper than streaming)",
     AXON_GLOBAL_OPT(rndv_scheme), AXON_CONFIG_TYPE_ENUM(axon_rndv_scheme_names, "auto|get|stream")},

    {"TOPOLOGY", "",
     "Host topology for device choice and NUMA placement: empty (this host, through hwloc), "
     "xml:PATH (an hwloc XML file) or synthetic:DESCRIPTION (hwloc's synthetic syntax); "
     "memory is bound to NUMA nodes only with this host's",
     AXON_GLOBAL_OPT(topology), AXON_CONFIG_TYPE_STRING},

    {"MAX_RNDV_RAILS", "2",
     "Most lanes to one peer a rendezvous stripes its data over, split by their bandwidth "
     "estimates: the bulk lane and lanes of its transport on other devices (1: the bulk "
     "lane alone; at most 4)",
     AXON_GLOBAL_OPT(max_rndv_rails), AXON_CONFIG_TYPE_UINT},

    {"RC_MAX_PEERS", "256",
     "Past this many peers a worker prefers transports with smaller per-endpoint memory "
     "(dc where the device has DC, else ud, over rc)",
     AXON_GLOBAL_OPT(rc_max_peers), AXON_CONFIG_TYPE_UINT},

    {"TAG_HASH_BITS", "10",
     "log2 of the number of buckets of the tag matching hash (1..20)",
     AXON_GLOBAL_OPT(tag_hash_bits), AXON_CONFIG_TYPE_UINT},

    {"UNEXP_POOL_MAX", "0",
     "Most small unexpected-message buffers kept per worker pool (0 = no limit)",
     AXON_GLOBAL_OPT(max_unexp_pool), AXON_CONFIG_TYPE_UINT},

    {"RMA_PATH", "auto",
     "How put/get/atomics reach a peer's memory: auto (directly where the lane allows) or am "
     "(always executed by the target's progress, for testing the emulation)",
     AXON_GLOBAL_OPT(rma_path), AXON_CONFIG_TYPE_ENUM(axon_rma_path_mode_names, "auto|am")},

    {"ATOMIC_MODE", "cpu",
     "Who executes atomics on remote memory: cpu (a CPU of the target's host, under the "
     "region's locks), device (the network device, on every peer including this process: "
     "needs an rc lane with device atomics to each; other keys refuse atomics), or guess "
     "(device when every transport AXON_TLS admits has device atomics, else cpu)",
     AXON_GLOBAL_OPT(atomic_mode),
     AXON_CONFIG_TYPE_ENUM(axon_atomic_mode_names, "cpu|device|guess")},

    {"YIELD", "auto",
     "When a worker whose progress finds nothing gives its core away (sched_yield on each "
     "further empty call): auto (after YIELD_SPIN of idleness, or after a short spin when "
     "more threads are runnable than the host has cores), always (after the short spin) or "
     "never (busy-poll)",
     AXON_GLOBAL_OPT(yield), AXON_CONFIG_TYPE_ENUM(axon_idle_yield_names, "auto|always|never")},

    {"YIELD_SPIN", "50us",
     "With YIELD=auto on a host that is not oversubscribed: how long progress busy-polls "
     "without finding anything before it starts yielding the core",
     AXON_GLOBAL_OPT(yield_spin), AXON_CONFIG_TYPE_TIME},

    {"COLL_BARRIER_ALGO", "auto",
     "Algorithm of barrier: auto (by team size and message size) or dissemination",
     AXON_GLOBAL_OPT(coll_algo[AXON_COLL_BARRIER]),
     AXON_CONFIG_TYPE_ENUM(axon_coll_barrier_algos, "auto|dissemination")},

    {"COLL_BCAST_ALGO", "auto",
     "Algorithm of bcast: auto (by team size and message size) or knomial",
     AXON_GLOBAL_OPT(coll_algo[AXON_COLL_BCAST]),
     AXON_CONFIG_TYPE_ENUM(axon_coll_bcast_algos, "auto|knomial")},

    {"COLL_REDUCE_ALGO", "auto",
     "Algorithm of reduce: auto (by team size and message size) or knomial",
     AXON_GLOBAL_OPT(coll_algo[AXON_COLL_REDUCE]),
     AXON_CONFIG_TYPE_ENUM(axon_coll_reduce_algos, "auto|knomial")},

    {"COLL_KNOMIAL_RADIX", "2",
     "Radix of the k-nomial trees of bcast and reduce (2..16; 2 is the binomial tree): a "
     "larger one makes fewer rounds, each parent sending or receiving radix - 1 at a time",
     AXON_GLOBAL_OPT(coll_knomial_radix), AXON_CONFIG_TYPE_UINT},

    {"COLL_ALLREDUCE_ALGO", "auto",
     "Algorithm of allreduce: auto (by team size and message size), recursive_doubling or ring",
     AXON_GLOBAL_OPT(coll_algo[AXON_COLL_ALLREDUCE]),
     AXON_CONFIG_TYPE_ENUM(axon_coll_allreduce_algos, "auto|recursive_doubling|ring")},

    {"COLL_ALLGATHER_ALGO", "auto",
     "Algorithm of allgather: auto (by team size and message size), ring or bruck",
     AXON_GLOBAL_OPT(coll_algo[AXON_COLL_ALLGATHER]),
     AXON_CONFIG_TYPE_ENUM(axon_coll_allgather_algos, "auto|ring|bruck")},

    {"COLL_ALLGATHERV_ALGO", "auto",
     "Algorithm of allgatherv: auto (by team size and message size) or ring",
     AXON_GLOBAL_OPT(coll_algo[AXON_COLL_ALLGATHERV]),
     AXON_CONFIG_TYPE_ENUM(axon_coll_allgatherv_algos, "auto|ring")},

    {"COLL_ALLTOALL_ALGO", "auto",
     "Algorithm of alltoall: auto (by team size and message size) or pairwise",
     AXON_GLOBAL_OPT(coll_algo[AXON_COLL_ALLTOALL]),
     AXON_CONFIG_TYPE_ENUM(axon_coll_alltoall_algos, "auto|pairwise")},

    {"COLL_ALLTOALLV_ALGO", "auto",
     "Algorithm of alltoallv: auto (by team size and message size) or pairwise",
     AXON_GLOBAL_OPT(coll_algo[AXON_COLL_ALLTOALLV]),
     AXON_CONFIG_TYPE_ENUM(axon_coll_alltoallv_algos, "auto|pairwise")},

    {"COLL_REDUCE_SCATTER_ALGO", "auto",
     "Algorithm of reduce_scatter: auto (by team size and message size) or ring",
     AXON_GLOBAL_OPT(coll_algo[AXON_COLL_REDUCE_SCATTER]),
     AXON_CONFIG_TYPE_ENUM(axon_coll_reduce_scatter_algos, "auto|ring")},

    {"COLL_GATHER_ALGO", "auto",
     "Algorithm of gather: auto (by team size and message size) or linear",
     AXON_GLOBAL_OPT(coll_algo[AXON_COLL_GATHER]),
     AXON_CONFIG_TYPE_ENUM(axon_coll_gather_algos, "auto|linear")},

    {"COLL_OFFLOAD", "auto",
     "Collectives run by the device (barrier, bcast, allreduce the device computes) on teams "
     "whose members all reach each other over a cross-channel device: auto, y (a member that "
     "cannot is an error at axon_coll_init, naming it) or n",
     AXON_GLOBAL_OPT(coll_offload), AXON_CONFIG_TYPE_ENUM(axon_coll_offload_names, "auto|y|n")},

    {"COLL_SCATTER_ALGO", "auto",
     "Algorithm of scatter: auto (by team size and message size) or linear",
     AXON_GLOBAL_OPT(coll_algo[AXON_COLL_SCATTER]),
     AXON_CONFIG_TYPE_ENUM(axon_coll_scatter_algos, "auto|linear")},

    AXON_CONFIG_END
};

/* Every override must name a variable of some table: a typo is an error. */
static axon_status_t axon_context_check_overrides(axon_context_h ctx,
                                                  const axon_context_params_t *params)
{
    const axon_loaded_component_t *lc;
    size_t i;
    unsigned j;
    int known;

    for (i = 0; i < params->config_count; ++i) {
        const char *name = params->config[i].name;

        if ((name == NULL) || (params->config[i].value == NULL)) {
            axon_error("configuration override %zu has a NULL name or value", i);
            return AXON_ERR_INVALID_PARAM;
        }
        known = axon_config_table_has(axon_global_config_table, "", name);
        for (j = 0; !known && (j < ctx->comps.count); ++j) {
            lc = &ctx->comps.comps[j];
            known = (lc->component != NULL) && (lc->component->config_table != NULL) &&
                    axon_config_table_has(lc->component->config_table,
                                          lc->component->config_prefix, name);
        }
        if (!known) {
            axon_error("unknown configuration variable '%s' (value '%s'); axon_info -c lists them",
                       name, params->config[i].value);
            return AXON_ERR_INVALID_PARAM;
        }
    }
    return AXON_OK;
}

/* Is AXON_<name> a variable of a device-layer back end (AXON_SOFTIB_*, AXON_SOFTIB_CM_*)? */
static int axon_context_dev_var_known(const char *name)
{
    const axon_dev_backend_t *const *be;
    const axon_dev_cm_ops_t *const *cm;

    for (cm = axon_dev_cm_backends; *cm != NULL; ++cm) {
        if (((*cm)->config_table != NULL) &&
            axon_config_table_has((*cm)->config_table, (*cm)->config_prefix, name)) {
            return 1;
        }
    }

    for (be = axon_dev_backends; *be != NULL; ++be) {
        if (((*be)->config_table != NULL) &&
            axon_config_table_has((*be)->config_table, (*be)->config_prefix, name)) {
            return 1;
        }
    }
    return 0;
}

static void axon_context_warn_unused_env(axon_context_h ctx)
{
    extern char **environ;
    const axon_loaded_component_t *lc;
    char name[128];
    const char *eq;
    char **env;
    unsigned j;
    int known;

    for (env = environ; *env != NULL; ++env) {
        if (strncmp(*env, "AXON_", 5) != 0) {
            continue;
        }
        eq = strchr(*env, '=');
        if ((eq == NULL) || ((size_t)(eq - *env - 5) >= sizeof(name))) {
            continue;
        }
        memcpy(name, *env + 5, (size_t)(eq - *env - 5));
        name[eq - *env - 5] = '\0';
        known = axon_config_table_has(axon_global_config_table, "", name) ||
                axon_context_dev_var_known(name);
        for (j = 0; !known && (j < ctx->comps.count); ++j) {
            lc = &ctx->comps.comps[j];
            /* A failed plugin's variables cannot be checked; do not flag them. */
            known = (lc->component == NULL) ||
                    ((lc->component->config_table != NULL) &&
                     axon_config_table_has(lc->component->config_table,
                                           lc->component->config_prefix, name));
        }
        if (!known) {
            axon_warn("AXON_%s is set but no component uses it (axon_info -c lists variables)",
                      name);
        }
    }
}

static void axon_context_close_mds(axon_context_h ctx)
{
    unsigned i;

    for (i = 0; i < ctx->num_rscs; ++i) {
        if (ctx->rscs[i].md != NULL) {
            ctx->rscs[i].md->ops->md_close(ctx->rscs[i].md);
            ctx->rscs[i].md = NULL;
        }
    }
}

/*
 * The memory domain of every resource whose component has one: memory is
 * registered there once for the context, and each worker's iface of the
 * resource is opened on it.
 */
static axon_status_t axon_context_open_mds(axon_context_h ctx)
{
    axon_select_resource_t *rsc;
    axon_status_t status;
    unsigned i;

    for (i = 0; i < ctx->num_rscs; ++i) {
        ctx->rscs[i].md = NULL;
    }
    for (i = 0; i < ctx->num_rscs; ++i) {
        rsc = &ctx->rscs[i];
        if (rsc->owner->component->md_open == NULL) {
            continue;
        }
        status = rsc->owner->component->md_open(rsc->resource, rsc->owner->config, &rsc->md);
        if (status != AXON_OK) {
            axon_error("failed to open the memory domain of %s/%s: %s", rsc->resource->tl_name,
                       rsc->resource->dev_name, axon_status_string(status));
            rsc->md = NULL;
            axon_context_close_mds(ctx);
            return status;
        }
    }
    return AXON_OK;
}

axon_status_t axon_init(const axon_context_params_t *params, axon_context_h *context_p)
{
    axon_context_h ctx;
    axon_status_t status;
    int coll_offload;

    if ((params == NULL) || (context_p == NULL)) {
        axon_error("axon_init: NULL %s", params ? "context_p" : "params");
        return AXON_ERR_INVALID_PARAM;
    }
    if ((params->features == 0) || (params->features & ~(uint32_t)0xf)) {
        axon_error("axon_init: invalid features 0x%x (use AXON_FEATURE_TAG|RMA|AMO|COLL)",
                   params->features);
        return AXON_ERR_INVALID_PARAM;
    }
    if ((params->config_count > 0) && (params->config == NULL)) {
        axon_error("axon_init: config_count %zu with a NULL config array", params->config_count);
        return AXON_ERR_INVALID_PARAM;
    }

    ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL) {
        axon_error("axon_init: out of memory");
        return AXON_ERR_NO_MEMORY;
    }
    ctx->features = params->features;

    status = axon_config_parse(axon_global_config_table, "", &ctx->opts, params->config,
                               params->config_count);
    if (status != AXON_OK) {
        goto err_free;
    }
    axon_log_set_level((axon_log_level_t)ctx->opts.log_level);
    if (axon_log_set_file(ctx->opts.log_file) != 0) {
        status = AXON_ERR_INVALID_PARAM;
        goto err_release;
    }
    if ((ctx->opts.coll_knomial_radix < 2) || (ctx->opts.coll_knomial_radix > 16)) {
        axon_error("AXON_COLL_KNOMIAL_RADIX=%u is invalid: must be between 2 and 16",
                   ctx->opts.coll_knomial_radix);
        status = AXON_ERR_INVALID_PARAM;
        goto err_release;
    }

    if ((ctx->opts.max_rndv_rails < 1) || (ctx->opts.max_rndv_rails > AXON_RNDV_RAILS_MAX)) {
        axon_error("AXON_MAX_RNDV_RAILS=%u is invalid: must be between 1 and %u",
                   ctx->opts.max_rndv_rails, AXON_RNDV_RAILS_MAX);
        status = AXON_ERR_INVALID_PARAM;
        goto err_release;
    }
    /* Before any iface: shm binds its ring to the worker's node, lanes rank devices. */
    status = axon_topo_get(ctx->opts.topology);
    if (status != AXON_OK) {
        goto err_release;
    }
    coll_offload = (ctx->features & AXON_FEATURE_COLL) &&
                   (ctx->opts.coll_offload != AXON_COLL_OFFLOAD_NEVER);
    status = axon_loader_load_all(&ctx->opts.component_path, params->config,
                                  params->config_count, &ctx->opts.tls,
                                  coll_offload ? 0 : AXON_LOADER_NO_COLL_OFFLOAD, &ctx->comps);
    if (status != AXON_OK) {
        goto err_topo;
    }

    status = axon_context_check_overrides(ctx, params);
    if (status != AXON_OK) {
        goto err_unload;
    }
    if (ctx->opts.warn_unused_env) {
        axon_context_warn_unused_env(ctx);
    }

    /* Tag matching (collectives run on it) needs active messages of both kinds. */
    status = axon_select_filter(&ctx->comps, &ctx->opts.tls, &ctx->opts.net_devices,
                                (ctx->features & (AXON_FEATURE_TAG | AXON_FEATURE_COLL)) ?
                                (AXON_CAP_AM_SHORT | AXON_CAP_AM_BCOPY) : 0,
                                &ctx->rscs, &ctx->num_rscs);
    if (status != AXON_OK) {
        goto err_unload;
    }
    if (ctx->num_rscs == 0) {
        axon_error("no transport is left to use (AXON_TLS, AXON_NET_DEVICES, or no component "
                   "found; axon_info -d lists them)");
        status = AXON_ERR_NO_ELEM;
        goto err_free_rscs;
    }
    axon_mem_atomic_mode_init(ctx);
    status = axon_context_open_mds(ctx);
    if (status != AXON_OK) {
        goto err_free_rscs;
    }
    status = axon_mem_context_init(ctx);
    if (status != AXON_OK) {
        goto err_close_mds;
    }

    *context_p = ctx;
    return AXON_OK;

err_close_mds:
    axon_context_close_mds(ctx);
err_free_rscs:
    free(ctx->rscs);
err_unload:
    axon_loader_unload_all(&ctx->comps);
err_topo:
    axon_topo_put();
err_release:
    axon_config_release(axon_global_config_table, &ctx->opts);
err_free:
    free(ctx);
    return status;
}

void axon_cleanup(axon_context_h ctx)
{
    if (ctx == NULL) {
        return;
    }
    axon_mem_context_cleanup(ctx);
    axon_context_close_mds(ctx);
    free(ctx->rscs);
    axon_loader_unload_all(&ctx->comps);
    axon_topo_put();
    axon_config_release(axon_global_config_table, &ctx->opts);
    free(ctx);
}

void axon_context_print_info(axon_context_h ctx, FILE *stream)
{
    const axon_resource_t *rsc;
    unsigned i;

    fprintf(stream, "# Axon %s context, features 0x%x\n", axon_get_version_string(),
            ctx->features);
    axon_config_print(axon_global_config_table, "", &ctx->opts, stream);
    for (i = 0; i < ctx->num_rscs; ++i) {
        rsc = ctx->rscs[i].resource;
        fprintf(stream, "# transport %-8s device %-12s latency %.0f ns  bandwidth %.0f MB/s\n",
                rsc->tl_name, rsc->dev_name, rsc->latency_ns, rsc->bandwidth_MBps);
    }
}
