/*
 * softib's connection-manager stream (framework/device/softib/softib_cm_msg.c):
 * whole messages, each checked before its fields are believed; what the
 * handlers then read of a good one is read here too.
 */
#include <arpa/inet.h>
#include <string.h>
#include "fuzz.h"
#include "softib/softib_cm.h"

int axon_fuzz_softib_cm(const uint8_t *data, size_t size)
{
    softib_cm_msg_t m;
    size_t off;

    if (size < sizeof(m)) {
        return 1;
    }
    for (off = 0; size - off >= sizeof(m); off += sizeof(m)) {
        memcpy(&m, data + off, sizeof(m));   /* as the socket fills sid->rx */
        if (softib_cm_msg_check(&m) != 0) {
            return 1;
        }
        axon_fuzz_touch(m.pdata, m.pdata_len);
        axon_fuzz_touch(m.gid, sizeof(m.gid));
        (void)ntohl(m.qpn);
        (void)ntohs(m.reason);
    }
    return 0;
}
