/*
 * Worker address: what a peer needs to build an endpoint. Layout (host byte
 * order; peers on one cluster share it):
 *   header  magic, version, number of entries, worker uuid
 *   entry   tl name, device name, device address, iface address — one per iface
 */
#ifndef AXON_ADDRESS_H
#define AXON_ADDRESS_H

#include "axon_int.h"

#define AXON_ADDRESS_MAGIC   0x41584e31u  /* "AXN1" */
#define AXON_ADDRESS_VERSION 1
#define AXON_ADDRESS_MAX_TLS 32

typedef struct axon_address_entry {
    char        tl_name[AXON_TL_NAME_MAX];
    char        dev_name[AXON_DEV_NAME_MAX];
    const void *dev_addr;
    size_t      dev_addr_len;
    const void *iface_addr;
    size_t      iface_addr_len;
} axon_address_entry_t;

typedef struct axon_address {
    uint64_t             uuid;
    unsigned             num_entries;
    axon_address_entry_t entries[AXON_ADDRESS_MAX_TLS];
} axon_address_t;

axon_status_t axon_address_pack(axon_worker_h worker, void **buffer_p, size_t *length_p);
/* Validate and parse; entry pointers point into buffer. */
axon_status_t axon_address_unpack(const void *buffer, size_t length, axon_address_t *addr);

#endif
