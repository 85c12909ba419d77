/*
 * What a device-layer back end provides to framework/device/dev.c. Each back
 * end (softib, rdma-core) defines one descriptor; dev.c lists them in order.
 */
#ifndef AXON_DEV_BACKEND_H
#define AXON_DEV_BACKEND_H

#include "dev.h"
#include "config.h"

typedef struct axon_dev_backend {
    const char *name;                     /* "softib", "rdma-core" */
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
} axon_dev_backend_t;

extern const axon_dev_backend_t softib_dev_backend;
#ifdef HAVE_IBVERBS
extern const axon_dev_backend_t axon_dev_rdmacore_backend;
#endif

/* NULL-terminated list of the back ends built into this library. */
extern const axon_dev_backend_t *const axon_dev_backends[];

#endif
