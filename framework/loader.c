/* Component loader: search path → dlopen → ABI check → config → query. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "axon_config.h"
#include "loader.h"
#include "log.h"
#include "select.h"
#include "sys.h"

#define AXON_PLUGIN_PREFIX "libaxon_"
#define AXON_PLUGIN_SUFFIX ".so"

#ifndef AXON_PLUGIN_DIR
#define AXON_PLUGIN_DIR "/usr/local/lib/axon"
#endif

/* A directory is searched once, at its first place in the order. */
static axon_status_t axon_loader_dir_add(axon_config_names_t *dirs, const char *dir)
{
    return (axon_config_names_contain(dirs, dir) ||
            (axon_config_names_append(dirs, dir, strlen(dir)) == 0)) ? AXON_OK :
                                                                        AXON_ERR_NO_MEMORY;
}

axon_status_t axon_loader_search_dirs(const axon_config_names_t *path_list,
                                      axon_config_names_t *dirs)
{
    axon_status_t status = AXON_OK;
    char path[PATH_MAX];
    char *lib_dir;
    unsigned i;

    dirs->names = NULL;
    dirs->count = 0;
    for (i = 0; (status == AXON_OK) && (i < path_list->count); ++i) {
        status = axon_loader_dir_add(dirs, path_list->names[i]);
    }

    /* Plugins live next to libaxon.so, in axon/: true when installed, and in
     * the build tree, where `make` mirrors the layout under .libs/. */
    lib_dir = axon_sys_dso_dir((const void *)axon_loader_search_dirs);
    if ((status == AXON_OK) && (lib_dir != NULL)) {
        snprintf(path, sizeof(path), "%s/axon", lib_dir);
        status = axon_loader_dir_add(dirs, path);
    }
    free(lib_dir);

    if (status == AXON_OK) {
        status = axon_loader_dir_add(dirs, AXON_PLUGIN_DIR);
    }
    if (status != AXON_OK) {
        axon_config_names_release(dirs);
        axon_error("out of memory building the component search path");
    }
    return status;
}

/* Component name from libaxon_<name>.so, or 0 if the file is not a plugin. */
static int axon_loader_plugin_name(const char *file, char *name, size_t max)
{
    size_t len = strlen(file);
    size_t plen = strlen(AXON_PLUGIN_PREFIX), slen = strlen(AXON_PLUGIN_SUFFIX);

    if ((len <= plen + slen) || strncmp(file, AXON_PLUGIN_PREFIX, plen) ||
        strcmp(file + len - slen, AXON_PLUGIN_SUFFIX)) {
        return 0;
    }
    len -= plen + slen;
    if (len >= max) {
        return 0;
    }
    memcpy(name, file + plen, len);
    name[len] = '\0';
    return 1;
}

static int axon_loader_has(const axon_component_set_t *set, const char *name)
{
    unsigned i;

    for (i = 0; i < set->count; ++i) {
        if (strcmp(set->comps[i].name, name) == 0) {
            return 1;
        }
    }
    return 0;
}

/* dlopen one plugin; on failure the entry keeps the reason and no handle. */
static void axon_loader_open(axon_loaded_component_t *lc)
{
    const axon_component_t *comp;
    char reason[512];
    void *handle;

    /* NODELETE: a component may register atexit handlers (shm unlinks its
     * segments), which must stay mapped until the process ends. */
    handle = dlopen(lc->path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (handle == NULL) {
        snprintf(reason, sizeof(reason), "%s", dlerror());
        goto failed;
    }

    comp = dlsym(handle, AXON_COMPONENT_SYMBOL_NAME);
    if (comp == NULL) {
        snprintf(reason, sizeof(reason), "no symbol '%s': %s", AXON_COMPONENT_SYMBOL_NAME,
                 dlerror());
        goto failed_close;
    }
    if (comp->abi_version != AXON_COMPONENT_ABI_VERSION) {
        snprintf(reason, sizeof(reason), "component ABI version %u, this library needs %u",
                 comp->abi_version, AXON_COMPONENT_ABI_VERSION);
        goto failed_close;
    }
    if ((comp->name == NULL) || strcmp(comp->name, lc->name) ||
        (comp->query == NULL) || ((comp->iface_open == NULL) == (comp->coll_offload == NULL))) {
        snprintf(reason, sizeof(reason), "malformed descriptor (name '%s')",
                 comp->name ? comp->name : "(null)");
        goto failed_close;
    }

    lc->dl_handle = handle;
    lc->component = comp;
    axon_debug("loaded component '%s' from %s", lc->name, lc->path);
    return;

failed_close:
    dlclose(handle);
failed:
    lc->error = strdup(reason);
    axon_debug("skipping component '%s' (%s): %s", lc->name, lc->path, reason);
}

/* Does AXON_TLS name the component itself (not through "all" or an alias)? */
static int axon_loader_tls_names(const axon_config_allow_list_t *tls, const char *name)
{
    unsigned i;

    if ((tls == NULL) || (tls->mode != AXON_CONFIG_ALLOW_LISTED)) {
        return tls == NULL;
    }
    for (i = 0; i < tls->list.count; ++i) {
        if (strcmp(tls->list.names[i], name) == 0) {
            return 1;
        }
    }
    return 0;
}

/*
 * Could AXON_TLS admit a resource of the component? Transports' names are
 * their components' (rc offers "rc"); collective offload devices are not
 * transports, and AXON_COLL_OFFLOAD rules them instead.
 */
static int axon_loader_tls_admits(const axon_config_allow_list_t *tls,
                                  const axon_loaded_component_t *lc)
{
    if ((tls == NULL) || (lc->component->coll_offload != NULL)) {
        return 1;
    }
    switch (tls->mode) {
    case AXON_CONFIG_ALLOW_LISTED:
        return axon_select_tls_lists(tls, lc->name);
    case AXON_CONFIG_DENY_LISTED:
        return !axon_select_tls_lists(tls, lc->name);
    default:
        return 1;
    }
}

/* Parse the component's configuration and list its resources. */
static axon_status_t axon_loader_init_component(axon_loaded_component_t *lc,
                                                const axon_config_kv_t *kv, size_t kv_count,
                                                const axon_config_allow_list_t *tls,
                                                unsigned flags)
{
    const axon_component_t *comp = lc->component;
    axon_status_t status;

    lc->config = calloc(1, comp->config_size ? comp->config_size : 1);
    if (lc->config == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    if (comp->config_table != NULL) {
        status = axon_config_parse(comp->config_table, comp->config_prefix, lc->config, kv,
                                   kv_count);
        if (status != AXON_OK) {
            free(lc->config);
            lc->config = NULL;
            return status;
        }
    }

    lc->resources     = NULL;
    lc->num_resources = 0;
    if ((comp->flags & AXON_COMPONENT_FLAG_ON_REQUEST) && !axon_loader_tls_names(tls, lc->name)) {
        /* Costly to ask, never chosen by default: not even queried. */
        axon_debug("component '%s' is used only when AXON_TLS names it", lc->name);
        return AXON_OK;
    }
    if ((comp->coll_offload != NULL) && (flags & AXON_LOADER_NO_COLL_OFFLOAD)) {
        axon_debug("component '%s' not queried: no collective offload in this context", lc->name);
        return AXON_OK;
    }
    if (!axon_loader_tls_admits(tls, lc)) {
        /* Its resources would all be filtered out: do not open its devices to list them. */
        axon_debug("component '%s' not queried: excluded by AXON_TLS", lc->name);
        return AXON_OK;
    }
    status = comp->query(lc->config, &lc->resources, &lc->num_resources);
    if (status == AXON_ERR_INVALID_PARAM) {
        /* The component rejected its configuration (and logged which value). */
        return status;
    } else if (status != AXON_OK) {
        /* A component without a usable device is not an error for the job. */
        axon_debug("component '%s' query failed: %s; it offers nothing", lc->name,
                   axon_status_string(status));
        lc->resources     = NULL;
        lc->num_resources = 0;
    }
    return AXON_OK;
}

static axon_status_t axon_loader_scan_dir(const char *dir, axon_component_set_t *set)
{
    axon_loaded_component_t *grown, *lc;
    struct dirent **entries;
    char name[64];
    int i, n;

    n = scandir(dir, &entries, NULL, alphasort);
    if (n < 0) {
        axon_trace("component directory %s not readable", dir);
        return AXON_OK;
    }

    for (i = 0; i < n; ++i) {
        if (!axon_loader_plugin_name(entries[i]->d_name, name, sizeof(name)) ||
            axon_loader_has(set, name)) {
            continue;
        }
        grown = realloc(set->comps, sizeof(*grown) * (set->count + 1));
        if (grown == NULL) {
            goto err_nomem;
        }
        set->comps = grown;
        lc = &set->comps[set->count];
        memset(lc, 0, sizeof(*lc));
        lc->name = strdup(name);
        if ((lc->name == NULL) ||
            (asprintf(&lc->path, "%s/%s", dir, entries[i]->d_name) < 0)) {
            free(lc->name);
            goto err_nomem;
        }
        ++set->count;
        axon_loader_open(lc);
    }

    for (i = 0; i < n; ++i) {
        free(entries[i]);
    }
    free(entries);
    return AXON_OK;

err_nomem:
    for (i = 0; i < n; ++i) {
        free(entries[i]);
    }
    free(entries);
    axon_error("out of memory loading components from %s", dir);
    return AXON_ERR_NO_MEMORY;
}

axon_status_t axon_loader_load_all(const axon_config_names_t *path_list,
                                   const axon_config_kv_t *kv, size_t kv_count,
                                   const axon_config_allow_list_t *tls, unsigned flags,
                                   axon_component_set_t *set)
{
    axon_config_names_t dirs;
    axon_status_t status;
    unsigned i;

    set->comps = NULL;
    set->count = 0;

    status = axon_loader_search_dirs(path_list, &dirs);
    if (status != AXON_OK) {
        return status;
    }
    for (i = 0; (status == AXON_OK) && (i < dirs.count); ++i) {
        status = axon_loader_scan_dir(dirs.names[i], set);
    }
    axon_config_names_release(&dirs);

    for (i = 0; (status == AXON_OK) && (i < set->count); ++i) {
        if (set->comps[i].component != NULL) {
            status = axon_loader_init_component(&set->comps[i], kv, kv_count, tls, flags);
        }
    }

    if (status != AXON_OK) {
        axon_loader_unload_all(set);
    }
    return status;
}

void axon_loader_unload_all(axon_component_set_t *set)
{
    axon_loaded_component_t *lc;
    unsigned i;

    for (i = 0; i < set->count; ++i) {
        lc = &set->comps[i];
        free(lc->resources);
        if (lc->config != NULL) {
            if (lc->component->config_table != NULL) {
                axon_config_release(lc->component->config_table, lc->config);
            }
            free(lc->config);
        }
        if (lc->dl_handle != NULL) {
            dlclose(lc->dl_handle);
        }
        free(lc->name);
        free(lc->path);
        free(lc->error);
    }
    free(set->comps);
    set->comps = NULL;
    set->count = 0;
}

const char *const axon_cap_names[] = {
    "am_short", "am_bcopy", "am_zcopy", "put", "get", "amo32", "amo64",
    "connect_to_iface", "am_ordered", "peer_failure", "need_mkey", "emulated",
    "amo_device", NULL
};
