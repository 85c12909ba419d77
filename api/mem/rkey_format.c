/* The packed remote key's parser (the format: rkey_format.h). */
#include <string.h>
#include "byte_order.h"
#include "log.h"
#include "rkey_format.h"
#include "sys.h"

#define axon_rkey_bad(_fmt, ...) \
    ({ axon_error("axon_ep_rkey_unpack: not a key: " _fmt, ## __VA_ARGS__); AXON_ERR_IO_FORMAT; })

axon_status_t axon_rkey_parse(const uint8_t *buf, size_t size, axon_rkey_hdr_t *hdr)
{
    size_t offset, end, i;
    uint32_t magic, stated;
    uint16_t version, reserved, len;
    const uint8_t *e;

    if (size < 8) {
        return axon_rkey_bad("%zu bytes", size);
    }
    magic   = axon_le_get32(buf);
    version = axon_le_get16(buf + 4);
    if (magic != AXON_RKEY_MAGIC) {
        return axon_rkey_bad("magic 0x%08x, expected 0x%08x", magic, AXON_RKEY_MAGIC);
    }
    if (version != AXON_RKEY_VERSION) {
        return axon_rkey_bad("version %u, this library reads version %u", version,
                             AXON_RKEY_VERSION);
    }
    if (size < AXON_RKEY_HDR_SIZE + AXON_RKEY_CSUM_SIZE) {
        return axon_rkey_bad("%zu bytes, shorter than a header", size);
    }
    stated = axon_le_get32(buf + 8);
    if (stated != size) {
        return axon_rkey_bad("it says %u bytes, %zu given", stated, size);
    }
    end = size - AXON_RKEY_CSUM_SIZE;
    if (axon_le_get64(buf + end) != axon_sys_hash64(buf, end, 0)) {
        return axon_rkey_bad("checksum mismatch (damaged)");
    }

    hdr->num_workers      = axon_le_get16(buf + 12);
    hdr->num_entries      = axon_le_get16(buf + 14);
    hdr->address          = axon_le_get64(buf + 16);
    hdr->length           = axon_le_get64(buf + 24);
    hdr->token            = axon_le_get64(buf + 32);
    hdr->host_id          = axon_le_get64(buf + 40);
    hdr->owner.start_time = axon_le_get64(buf + 48);
    hdr->owner.ns_id      = axon_le_get64(buf + 56);
    hdr->owner.pid        = (int32_t)axon_le_get32(buf + 64);
    hdr->owner.reserved   = 0;

    if (axon_le_get16(buf + 6) != 0) {
        return axon_rkey_bad("unknown flags 0x%x", axon_le_get16(buf + 6));
    }
    if (axon_le_get32(buf + 68) != 0) {
        return axon_rkey_bad("reserved field is not 0");
    }
    if ((hdr->length == 0) || (hdr->address + hdr->length < hdr->address)) {
        return axon_rkey_bad("range 0x%llx + %llu", (unsigned long long)hdr->address,
                             (unsigned long long)hdr->length);
    }
    if (hdr->owner.pid <= 0) {
        return axon_rkey_bad("owner pid %d", hdr->owner.pid);
    }

    offset = AXON_RKEY_HDR_SIZE + (size_t)hdr->num_workers * 8;
    if (offset > end) {
        return axon_rkey_bad("%u workers in %zu bytes", hdr->num_workers, size);
    }
    for (i = 0; i < hdr->num_entries; ++i) {
        if (end - offset < AXON_RKEY_ENTRY_HDR) {
            return axon_rkey_bad("entry %zu cut short", i);
        }
        e    = buf + offset;
        reserved = axon_le_get16(e);
        len      = axon_le_get16(e + 2);
        if (reserved != 0) {
            return axon_rkey_bad("entry %zu has reserved field 0x%x", i, reserved);
        }
        if ((len == 0) || (len > AXON_MD_RKEY_MAX) ||
            (end - offset - AXON_RKEY_ENTRY_HDR < len)) {
            return axon_rkey_bad("entry %zu holds a %u-byte key", i, len);
        }
        if ((e[4] == '\0') || (memchr(e + 4, '\0', AXON_TL_NAME_MAX) == NULL)) {
            return axon_rkey_bad("entry %zu has no transport name", i);
        }
        if (memchr(e + AXON_RKEY_ENTRY_DEV, '\0', AXON_DEV_NAME_MAX) == NULL) {
            return axon_rkey_bad("entry %zu has an unterminated device name", i);
        }
        offset += AXON_RKEY_ENTRY_HDR + len;
    }
    if (offset != end) {
        return axon_rkey_bad("%zu bytes left after the last entry", end - offset);
    }
    return AXON_OK;
}

int axon_rkey_has_worker(const uint8_t *buf, const axon_rkey_hdr_t *hdr, uint64_t uuid)
{
    unsigned i;

    for (i = 0; i < hdr->num_workers; ++i) {
        if (axon_le_get64(buf + AXON_RKEY_HDR_SIZE + 8 * i) == uuid) {
            return 1;
        }
    }
    return 0;
}

void axon_rkey_entry_iter_init(const axon_rkey_hdr_t *hdr, axon_rkey_entry_iter_t *iter)
{
    iter->offset = AXON_RKEY_HDR_SIZE + (size_t)hdr->num_workers * 8;
    iter->index  = 0;
}

const uint8_t *axon_rkey_entry_next(const uint8_t *buf, const axon_rkey_hdr_t *hdr,
                                    const char *tl_name, axon_rkey_entry_iter_t *iter)
{
    const uint8_t *e;

    while (iter->index < hdr->num_entries) {
        e             = buf + iter->offset;
        iter->offset += AXON_RKEY_ENTRY_HDR + axon_le_get16(e + 2);
        ++iter->index;
        if (strncmp((const char *)e + 4, tl_name, AXON_TL_NAME_MAX) == 0) {
            return e;
        }
    }
    return NULL;
}

const uint8_t *axon_rkey_find_entry(const uint8_t *buf, const axon_rkey_hdr_t *hdr,
                                    const char *tl_name, const char *dev_name)
{
    axon_rkey_entry_iter_t iter;
    const uint8_t *e;

    axon_rkey_entry_iter_init(hdr, &iter);
    while ((e = axon_rkey_entry_next(buf, hdr, tl_name, &iter)) != NULL) {
        if ((dev_name == NULL) ||
            (strncmp((const char *)e + AXON_RKEY_ENTRY_DEV, dev_name, AXON_DEV_NAME_MAX) == 0)) {
            return e;
        }
    }
    return NULL;
}

unsigned axon_rkey_count_entries(const uint8_t *buf, const axon_rkey_hdr_t *hdr,
                                 const char *tl_name)
{
    axon_rkey_entry_iter_t iter;
    unsigned count = 0;

    axon_rkey_entry_iter_init(hdr, &iter);
    while (axon_rkey_entry_next(buf, hdr, tl_name, &iter) != NULL) {
        ++count;
    }
    return count;
}
