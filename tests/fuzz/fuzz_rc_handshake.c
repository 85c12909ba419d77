/*
 * rc's connection handshake as an iface's UD QP receives it
 * (components/verbs/rc_wire.h): the GRH area, then the peer's message.
 */
#include <stdlib.h>
#include <string.h>
#include "components/verbs/rc_wire.h"
#include "fuzz.h"

int axon_fuzz_rc_handshake(const uint8_t *data, size_t size)
{
    axon_rc_hs_t msg;
    const char *why;
    uint8_t *buf;

    if (size > UINT32_MAX - AXON_RC_HS_MSG_OFFSET) {
        return 1;
    }
    buf = malloc(AXON_RC_HS_MSG_OFFSET + size);   /* exactly what arrived */
    if (buf == NULL) {
        return 1;
    }
    memset(buf, 0, AXON_RC_HS_MSG_OFFSET);
    memcpy(buf + AXON_RC_HS_MSG_OFFSET, data, size);
    why = axon_rc_hs_read(buf, (uint32_t)(AXON_RC_HS_MSG_OFFSET + size), &msg);
    free(buf);
    return (why == NULL) ? 0 : 1;
}
