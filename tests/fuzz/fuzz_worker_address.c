/* Worker addresses: what axon_ep_create reads from a peer (api/core/address.c). */
#include <string.h>
#include "core/address.h"
#include "fuzz.h"

int axon_fuzz_worker_address(const uint8_t *data, size_t size)
{
    axon_address_t addr;
    unsigned i;

    if (axon_address_unpack(data, size, &addr) != AXON_OK) {
        return 1;
    }
    /* What endpoint creation relies on: names terminated, blobs inside the buffer. */
    for (i = 0; i < addr.num_entries; ++i) {
        const axon_address_entry_t *e = &addr.entries[i];

        axon_fuzz_touch(e->tl_name, strlen(e->tl_name) + 1);
        axon_fuzz_touch(e->dev_name, strlen(e->dev_name) + 1);
        axon_fuzz_touch(e->dev_addr, e->dev_addr_len);
        axon_fuzz_touch(e->iface_addr, e->iface_addr_len);
    }
    return 0;
}
