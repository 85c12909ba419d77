/*
 * A configuration override as the caller passes it (axon_context_params_t)
 * and the base configuration service reads it (config.h). Installed as
 * <axon/axon_config_kv.h> and included by <axon/axon.h>.
 */
#ifndef AXON_CONFIG_KV_H
#define AXON_CONFIG_KV_H

/** A configuration value set by the caller; overrides the AXON_<NAME> variable. */
typedef struct {
    const char *name;   /* without the AXON_ prefix: "TLS", "SHM_FIFO_SIZE" */
    const char *value;
} axon_config_kv_t;

#endif /* AXON_CONFIG_KV_H */
