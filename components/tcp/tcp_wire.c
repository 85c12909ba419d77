/*
 * tcp's wire data and the check of a peer's HELLO (tcp_wire.h); its frame
 * headers are checked inline, once per frame (axon_tcp_frame_invalid, tcp.h).
 */
#include "tcp.h"

const uint8_t axon_tcp_zero_pad[AXON_TCP_ALIGN] = {0};

const char *const axon_tcp_reject_names[AXON_TCP_REJECT_LAST] = {
    [AXON_TCP_REJECT_NONE]       = "no reason",
    [AXON_TCP_REJECT_MAGIC]      = "not an Axon tcp peer, or of the other byte order",
    [AXON_TCP_REJECT_VERSION]    = "another protocol version",
    [AXON_TCP_REJECT_WRONG_PEER] = "another worker listens there (stale address?)",
    [AXON_TCP_REJECT_FRAME_SIZE] = "segment size too large",
};

uint8_t axon_tcp_hello_check(const axon_tcp_hs_t *hs, uint64_t worker_uuid)
{
    if ((hs->magic != AXON_TCP_MAGIC) || (hs->op != AXON_TCP_HS_HELLO)) {
        return AXON_TCP_REJECT_MAGIC;
    }
    if (hs->version != AXON_TCP_VERSION) {
        return AXON_TCP_REJECT_VERSION;
    }
    if (hs->dst_uuid != worker_uuid) {
        return AXON_TCP_REJECT_WRONG_PEER;
    }
    if (hs->max_body > AXON_TCP_SEG_SIZE_MAX) {
        return AXON_TCP_REJECT_FRAME_SIZE;
    }
    return AXON_TCP_REJECT_NONE;
}
