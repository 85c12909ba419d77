/*
 * tcp's wire data and the checks of what a peer sends (tcp_wire.h): its
 * HELLO and every frame header, before anything is read on their word.
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

const char *axon_tcp_frame_invalid(const axon_tcp_frame_t *frame, uint32_t max_body)
{
    if (frame->flags & ~AXON_TCP_FRAME_FLAGS) {
        return "unknown flags";
    }
    if (frame->flags & AXON_TCP_FRAME_CTRL) {
        if ((frame->am_id != AXON_TCP_CTRL_GOODBYE) || (frame->length != 0) ||
            (frame->hdr_len != 0) || (frame->flags & AXON_TCP_FRAME_ZCOPY)) {
            return "unknown control frame";
        }
        return NULL;
    }
    if (frame->am_id >= AXON_AM_ID_MAX) {
        return "invalid am_id";
    }
    if (frame->flags & AXON_TCP_FRAME_ZCOPY) {
        if ((frame->hdr_len > frame->length) || (frame->hdr_len > AXON_TCP_MAX_SHORT) ||
            (frame->length - frame->hdr_len > AXON_TCP_MAX_ZCOPY)) {
            return "zero-copy lengths out of bounds";
        }
        return NULL;
    }
    if ((frame->hdr_len != 0) || (frame->length > max_body)) {
        return "length larger than the peer's segment size";
    }
    return NULL;
}
