/* Worker address packing and (defensive) unpacking. */
#include <stdlib.h>
#include <string.h>
#include "address.h"
#include "log.h"

typedef struct __attribute__((packed)) axon_address_hdr {
    uint32_t magic;
    uint8_t  version;
    uint8_t  num_entries;
    uint16_t reserved;
    uint64_t uuid;
} axon_address_hdr_t;

static size_t axon_address_entry_size(const axon_worker_iface_t *wi)
{
    const axon_resource_t *rsc = wi->rsc->resource;

    return 1 + strlen(rsc->tl_name) + 1 + strlen(rsc->dev_name) +
           2 + wi->iface->ops->dev_addr_len + 2 + wi->iface->ops->iface_addr_len;
}

static uint8_t *axon_address_put_str(uint8_t *p, const char *str)
{
    size_t len = strlen(str);

    *p++ = (uint8_t)len;
    memcpy(p, str, len);
    return p + len;
}

static uint8_t *axon_address_put_len(uint8_t *p, size_t len)
{
    uint16_t len16 = (uint16_t)len;

    memcpy(p, &len16, sizeof(len16));
    return p + sizeof(len16);
}

axon_status_t axon_address_pack(axon_worker_h worker, void **buffer_p, size_t *length_p)
{
    axon_address_hdr_t hdr;
    axon_status_t status;
    size_t length = sizeof(hdr);
    uint8_t *buffer, *p, *dev_addr;
    unsigned i;

    for (i = 0; i < worker->num_ifaces; ++i) {
        length += axon_address_entry_size(&worker->ifaces[i]);
    }
    buffer = malloc(length);
    if (buffer == NULL) {
        axon_error("failed to allocate a worker address of %zu bytes", length);
        return AXON_ERR_NO_MEMORY;
    }

    hdr.magic       = AXON_ADDRESS_MAGIC;
    hdr.version     = AXON_ADDRESS_VERSION;
    hdr.num_entries = (uint8_t)worker->num_ifaces;
    hdr.reserved    = 0;
    hdr.uuid        = worker->uuid;
    memcpy(buffer, &hdr, sizeof(hdr));
    p = buffer + sizeof(hdr);

    for (i = 0; i < worker->num_ifaces; ++i) {
        axon_iface_t *iface = worker->ifaces[i].iface;
        const axon_resource_t *rsc = worker->ifaces[i].rsc->resource;

        p = axon_address_put_str(p, rsc->tl_name);
        p = axon_address_put_str(p, rsc->dev_name);
        p = axon_address_put_len(p, iface->ops->dev_addr_len);
        dev_addr = p;
        p += iface->ops->dev_addr_len;
        p = axon_address_put_len(p, iface->ops->iface_addr_len);
        status = iface->ops->iface_get_address(iface, dev_addr, p);
        if (status != AXON_OK) {
            free(buffer);
            return status;
        }
        p += iface->ops->iface_addr_len;
    }

    *buffer_p = buffer;
    *length_p = length;
    return AXON_OK;
}

/* Bounds-checked reader over the address buffer. */
typedef struct {
    const uint8_t *p, *end;
} axon_address_reader_t;

static int axon_address_get_str(axon_address_reader_t *r, char *dest, size_t max)
{
    size_t len;

    if (r->p >= r->end) {
        return -1;
    }
    len = *r->p++;
    if ((len == 0) || (len >= max) || ((size_t)(r->end - r->p) < len)) {
        return -1;
    }
    memcpy(dest, r->p, len);
    dest[len] = '\0';
    if (strlen(dest) != len) {
        return -1;  /* embedded NUL */
    }
    r->p += len;
    return 0;
}

static int axon_address_get_blob(axon_address_reader_t *r, const void **blob, size_t *len)
{
    uint16_t len16;

    if ((size_t)(r->end - r->p) < sizeof(len16)) {
        return -1;
    }
    memcpy(&len16, r->p, sizeof(len16));
    r->p += sizeof(len16);
    if ((size_t)(r->end - r->p) < len16) {
        return -1;
    }
    *blob = r->p;
    *len  = len16;
    r->p += len16;
    return 0;
}

axon_status_t axon_address_unpack(const void *buffer, size_t length, axon_address_t *addr)
{
    axon_address_reader_t r;
    axon_address_hdr_t hdr;
    unsigned i;

    if ((buffer == NULL) || (length < sizeof(hdr))) {
        axon_error("worker address %p of %zu bytes is too short (header is %zu bytes)",
                   buffer, length, sizeof(hdr));
        return AXON_ERR_INVALID_ADDR;
    }
    memcpy(&hdr, buffer, sizeof(hdr));
    if (hdr.magic != AXON_ADDRESS_MAGIC) {
        axon_error("worker address has magic 0x%08x, expected 0x%08x: not an Axon address",
                   hdr.magic, AXON_ADDRESS_MAGIC);
        return AXON_ERR_INVALID_ADDR;
    }
    if (hdr.version != AXON_ADDRESS_VERSION) {
        axon_error("worker address version %u, this library reads version %u", hdr.version,
                   AXON_ADDRESS_VERSION);
        return AXON_ERR_INVALID_ADDR;
    }
    if (hdr.num_entries > AXON_ADDRESS_MAX_TLS) {
        axon_error("worker address lists %u transports, at most %u allowed", hdr.num_entries,
                   AXON_ADDRESS_MAX_TLS);
        return AXON_ERR_INVALID_ADDR;
    }

    addr->uuid        = hdr.uuid;
    addr->num_entries = hdr.num_entries;
    r.p   = (const uint8_t *)buffer + sizeof(hdr);
    r.end = (const uint8_t *)buffer + length;
    for (i = 0; i < hdr.num_entries; ++i) {
        axon_address_entry_t *e = &addr->entries[i];
        if (axon_address_get_str(&r, e->tl_name, sizeof(e->tl_name)) ||
            axon_address_get_str(&r, e->dev_name, sizeof(e->dev_name)) ||
            axon_address_get_blob(&r, &e->dev_addr, &e->dev_addr_len) ||
            axon_address_get_blob(&r, &e->iface_addr, &e->iface_addr_len)) {
            axon_error("worker address of %zu bytes is malformed in entry %u of %u", length,
                       i, hdr.num_entries);
            return AXON_ERR_INVALID_ADDR;
        }
    }
    if (r.p != r.end) {
        axon_error("worker address has %zu trailing bytes after %u entries",
                   (size_t)(r.end - r.p), hdr.num_entries);
        return AXON_ERR_INVALID_ADDR;
    }
    return AXON_OK;
}
