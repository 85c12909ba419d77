/*
 * What a device-layer back end provides to framework/device/dev.c. Each back
 * end defines one descriptor and registers it when libaxon loads
 * (AXON_DEV_BACKEND_REGISTER); the device layer names none of them.
 */
#ifndef AXON_DEV_BACKEND_H
#define AXON_DEV_BACKEND_H

#include "dev.h"
#include "config.h"

struct axon_dev_cm_ops;

typedef struct axon_dev_backend {
    const char *name;                     /* "softib", "rdma-core" */
    /*
     * Place in the lists, lowest first (equal: in registration order). The
     * software device takes 0: it is always there, so device 0 of a list is
     * predictable; hardware back ends come after it.
     */
    unsigned    order;
    /*
     * Fill up to max entries of list with this back end's devices; return
     * how many there are (may exceed max: the caller asks again), 0 when none
     * (after a debug line saying what was looked for), or -errno.
     */
    int         (*get_list)(axon_dev_info_t *list, int max);
    /* Open one of the devices get_list named; ENODEV if the name is not ours. */
    int         (*open)(const char *name, axon_dev_context_t **ctx_p);
    /* One line for axon_info: "2 devices", "no hardware devices found". */
    void        (*summary)(char *buf, size_t max);
    /* Configuration variables (AXON_<prefix><NAME>), printed by axon_info -c. */
    const axon_config_entry_t *config_table;
    const char                *config_prefix;
    /* Its connection manager (dev_cm_backend.h), or NULL. */
    const struct axon_dev_cm_ops *cm;
} axon_dev_backend_t;

#define AXON_DEV_MAX_BACKENDS 4

/* Add be to axon_dev_backends (and its cm to axon_dev_cm_backends), by order. */
void axon_dev_backend_register(const axon_dev_backend_t *be);

/* In the back end's file: register _be when the library loads, before any use. */
#define AXON_DEV_BACKEND_REGISTER(_be) \
    static void __attribute__((constructor)) _be##_register(void) \
    { \
        axon_dev_backend_register(&(_be)); \
    }

/* The registered back ends, in order; NULL-terminated. */
extern const axon_dev_backend_t *axon_dev_backends[];

#endif
