/*
 * Component loader: finds libaxon_<name>.so plugins, dlopens them, checks the
 * ABI version and reads each one's configuration.
 * Search order: AXON_COMPONENT_PATH (colon-separated), then <dir of
 * libaxon.so>/axon, then the configured plugin directory. The first plugin
 * of a name wins.
 */
#ifndef AXON_LOADER_H
#define AXON_LOADER_H

#include "component.h"

typedef struct axon_loaded_component {
    char                   *name;       /* from the file name libaxon_<name>.so */
    char                   *path;
    void                   *dl_handle;  /* NULL if loading failed */
    const axon_component_t *component;  /* NULL if loading failed */
    char                   *error;      /* why loading failed (dlerror or ABI) */
    void                   *config;     /* parsed component options */
    axon_resource_t        *resources;  /* from query() */
    unsigned                num_resources;
} axon_loaded_component_t;

typedef struct axon_component_set {
    axon_loaded_component_t *comps;
    unsigned                 count;
} axon_component_set_t;

/*
 * Load every plugin found on the search path (path_list may be empty), parse
 * each component's configuration (overrides in kv) and query its resources.
 * A plugin that fails to load is recorded with its error and skipped (debug
 * line); a bad configuration value fails the whole load with
 * AXON_ERR_INVALID_PARAM.
 *
 * Components flagged AXON_COMPONENT_FLAG_ON_REQUEST are queried only when
 * tls (AXON_TLS) names them; tls NULL queries every component. With
 * AXON_LOADER_NO_COLL_OFFLOAD in flags a collective offload component is
 * loaded but not queried (a context without collectives, or with offload
 * off): its query opens every device.
 */
#define AXON_LOADER_NO_COLL_OFFLOAD (1u << 0)

axon_status_t axon_loader_load_all(const axon_config_names_t *path_list,
                                   const axon_config_kv_t *kv, size_t kv_count,
                                   const axon_config_allow_list_t *tls, unsigned flags,
                                   axon_component_set_t *set);
void          axon_loader_unload_all(axon_component_set_t *set);

/* The directories that will be searched, in order (for axon_info -v); free them with
 * axon_config_names_release. */
axon_status_t axon_loader_search_dirs(const axon_config_names_t *path_list,
                                      axon_config_names_t *dirs);

#endif
