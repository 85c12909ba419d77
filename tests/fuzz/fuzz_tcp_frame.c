/*
 * tcp's stream from a peer that connected to us (components/tcp/tcp_wire.c, tcp.h):
 * its HELLO, then frames, read as the receive loop reads them: a header is
 * checked before its lengths are believed, then its body and padding skipped.
 */
#include <string.h>
#include "components/tcp/tcp.h"
#include "fuzz.h"

int axon_fuzz_tcp_frame(const uint8_t *data, size_t size)
{
    const uint8_t *p = data, *end = data + size;
    axon_tcp_frame_t frame;
    axon_tcp_hs_t hello;

    if (size < sizeof(hello)) {
        return 1;
    }
    memcpy(&hello, p, sizeof(hello));
    p += sizeof(hello);
    if (axon_tcp_hello_check(&hello, AXON_FUZZ_TCP_UUID) != AXON_TCP_REJECT_NONE) {
        return 1;
    }
    while ((size_t)(end - p) >= sizeof(frame)) {
        memcpy(&frame, p, sizeof(frame));
        if (axon_tcp_frame_invalid(&frame, hello.max_body) != NULL) {
            return 1;
        }
        p += sizeof(frame);
        if (frame.flags & AXON_TCP_FRAME_CTRL) {
            return (p == end) ? 0 : 1;   /* goodbye is the last frame */
        }
        if ((size_t)(end - p) < frame.length + axon_tcp_pad(frame.length)) {
            return 0;   /* the rest is still on its way */
        }
        axon_fuzz_touch(p, frame.length);
        p += frame.length + axon_tcp_pad(frame.length);
    }
    return 0;
}
