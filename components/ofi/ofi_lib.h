/*
 * libfabric, opened when ofi is first asked for (axon_ofi_lib_load), not
 * linked: Debian's libfabric pulls in PSM libraries whose constructors
 * install SIGSEGV/SIGBUS handlers, and every Axon process loads every
 * component plugin. The few exported libfabric functions the component
 * calls go through this table (the rest of the API is inline calls through
 * the objects' ops tables, which need no symbol).
 */
#ifndef AXON_OFI_LIB_H
#define AXON_OFI_LIB_H

#include <rdma/fabric.h>
#include "axon_status.h"

typedef struct axon_ofi_lib {
    int             (*getinfo)(uint32_t version, const char *node, const char *service,
                               uint64_t flags, const struct fi_info *hints,
                               struct fi_info **info);
    void            (*freeinfo)(struct fi_info *info);
    struct fi_info *(*dupinfo)(const struct fi_info *info);
    int             (*fabric)(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
                              void *context);
    const char     *(*strerror)(int errnum);
    uint32_t        (*version)(void);
} axon_ofi_lib_t;

extern axon_ofi_lib_t axon_ofi_lib;

/* dlopen libfabric once per process; AXON_ERR_UNSUPPORTED (logged) if absent. */
axon_status_t axon_ofi_lib_load(void);

/* The component's calls of libfabric's exported functions land in the table.
 * fi_allocinfo() is an inline calling fi_dupinfo: use fi_dupinfo(NULL). */
#define fi_getinfo  axon_ofi_lib.getinfo
#define fi_freeinfo axon_ofi_lib.freeinfo
#define fi_dupinfo  axon_ofi_lib.dupinfo
#define fi_fabric   axon_ofi_lib.fabric
#define fi_strerror axon_ofi_lib.strerror
#define fi_version  axon_ofi_lib.version

#endif
