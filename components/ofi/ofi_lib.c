/* libfabric opened on demand: see ofi_lib.h for why it is not linked. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include "ofi_lib.h"
#include "log.h"

#define AXON_OFI_LIB_NAME "libfabric.so.1"

axon_ofi_lib_t axon_ofi_lib;

static pthread_once_t axon_ofi_lib_once = PTHREAD_ONCE_INIT;
static axon_status_t  axon_ofi_lib_status = AXON_ERR_UNSUPPORTED;

static void *axon_ofi_lib_sym(void *handle, const char *name, int *missing)
{
    void *sym = dlsym(handle, name);

    if (sym == NULL) {
        axon_error("ofi: %s has no %s: %s", AXON_OFI_LIB_NAME, name, dlerror());
        *missing = 1;
    }
    return sym;
}

static void axon_ofi_lib_open(void)
{
    axon_ofi_lib_t lib;
    int missing = 0;
    void *handle;

    /* Kept for the life of the process: libfabric registers exit handlers. */
    handle = dlopen(AXON_OFI_LIB_NAME, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        axon_error("ofi: cannot load %s: %s", AXON_OFI_LIB_NAME, dlerror());
        return;
    }
    *(void **)&lib.getinfo  = axon_ofi_lib_sym(handle, "fi_getinfo", &missing);
    *(void **)&lib.freeinfo = axon_ofi_lib_sym(handle, "fi_freeinfo", &missing);
    *(void **)&lib.dupinfo  = axon_ofi_lib_sym(handle, "fi_dupinfo", &missing);
    *(void **)&lib.fabric   = axon_ofi_lib_sym(handle, "fi_fabric", &missing);
    *(void **)&lib.strerror = axon_ofi_lib_sym(handle, "fi_strerror", &missing);
    *(void **)&lib.version  = axon_ofi_lib_sym(handle, "fi_version", &missing);
    if (missing) {
        dlclose(handle);
        return;
    }
    axon_ofi_lib        = lib;
    axon_ofi_lib_status = AXON_OK;
}

axon_status_t axon_ofi_lib_load(void)
{
    pthread_once(&axon_ofi_lib_once, axon_ofi_lib_open);
    return axon_ofi_lib_status;
}
