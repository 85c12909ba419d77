/*
 * The libfabric provider's inputs from peers (contrib/ofi_provider/axon_fi_wire.c):
 * the first bytes as a name given to fi_av_insert, the whole as a memory key
 * blob fetched from a peer's address server, split and its Axon keys checked
 * as axon_ep_rkey_unpack checks them.
 */
#include <string.h>
#include "contrib/ofi_provider/axon_fi.h"
#include "fuzz.h"
#include "rkey_format.h"

int axon_fuzz_ofi_key_blob(const uint8_t *data, size_t size)
{
    axon_fi_mr_blob_t blob;
    axon_fi_name_t name;
    axon_rkey_hdr_t hdr;

    if ((size >= sizeof(name)) && (axon_fi_name_invalid(data, &name) == NULL)) {
        (void)axon_fi_name_id(&name);
    }
    if (axon_fi_mr_blob_parse(data, size, &blob) != 0) {
        return 1;
    }
    if (blob.flags & AXON_FI_MR_BLOB_WORDS) {
        axon_fuzz_touch(blob.words_key, blob.words_key_len);
        (void)axon_rkey_parse(blob.words_key, blob.words_key_len, &hdr);
    }
    axon_fuzz_touch(blob.key, blob.key_len);
    return (axon_rkey_parse(blob.key, blob.key_len, &hdr) == AXON_OK) ? 0 : 1;
}
