/* Packed remote keys: what axon_ep_rkey_unpack reads from a peer (api/mem/rkey_format.c). */
#include <stdlib.h>
#include <string.h>
#include "byte_order.h"
#include "fuzz.h"
#include "rkey_format.h"
#include "sys.h"

/* Every transport name a key's entries may carry, and one no domain has. */
static const char *const axon_fuzz_rkey_tls[] = {"self", "shm", "tcp", "rc", "ud", "dc",
                                                  "rdmacm", "ofi", "nosuch"};

/* Parse; on success walk the workers and entries as unpack does. */
static int axon_fuzz_rkey_parse_walk(const uint8_t *buf, size_t size)
{
    axon_rkey_hdr_t hdr;
    const uint8_t *e;
    unsigned i;

    if (axon_rkey_parse(buf, size, &hdr) != AXON_OK) {
        return 1;
    }
    axon_rkey_has_worker(buf, &hdr, 0);
    for (i = 0; i < sizeof(axon_fuzz_rkey_tls) / sizeof(axon_fuzz_rkey_tls[0]); ++i) {
        e = axon_rkey_find_entry(buf, &hdr, axon_fuzz_rkey_tls[i], NULL);
        if (e != NULL) {
            axon_fuzz_touch(e, AXON_RKEY_ENTRY_HDR + axon_le_get16(e + 2));
            axon_rkey_find_entry(buf, &hdr, axon_fuzz_rkey_tls[i],
                                 (const char *)e + AXON_RKEY_ENTRY_DEV);
        }
        axon_rkey_count_entries(buf, &hdr, axon_fuzz_rkey_tls[i]);
    }
    return 0;
}

int axon_fuzz_rkey_unpack(const uint8_t *data, size_t size)
{
    int verdict = axon_fuzz_rkey_parse_walk(data, size);
    uint8_t *fixed;

    /*
     * The stated size and the checksum stop nearly every mutation at the
     * door: parse again with both made right, so the fields behind them
     * are fuzzed too (as from a peer that packs wrong keys correctly).
     */
    if ((verdict != 0) && (size >= AXON_RKEY_HDR_SIZE + AXON_RKEY_CSUM_SIZE) &&
        (size <= UINT32_MAX) && ((fixed = malloc(size)) != NULL)) {
        memcpy(fixed, data, size);
        axon_le_put32(fixed + 8, (uint32_t)size);
        axon_le_put64(fixed + size - AXON_RKEY_CSUM_SIZE,
                      axon_sys_hash64(fixed, size - AXON_RKEY_CSUM_SIZE, 0));
        axon_fuzz_rkey_parse_walk(fixed, size);
        free(fixed);
    }
    return verdict;
}
