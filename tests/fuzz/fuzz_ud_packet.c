/*
 * ud datagrams as a ud iface receives them (components/verbs/ud_wire.h): the
 * GRH area verbs fills, then what the peer sent. What the receive path reads
 * of a packet axon_ud_pkt_payload let through is read here too.
 */
#include <stdlib.h>
#include <string.h>
#include "components/verbs/ud_wire.h"
#include "fuzz.h"

int axon_fuzz_ud_packet(const uint8_t *data, size_t size)
{
    const axon_ud_hdr_t *hdr;
    axon_ud_creq_t creq;
    axon_ud_probe_t probe;
    axon_ud_alive_msg_t alive;
    int64_t payload;
    uint8_t *buf;

    if (size > UINT32_MAX - AXON_UD_GRH_LEN) {
        return 1;
    }
    buf = malloc(AXON_UD_GRH_LEN + size + 1);   /* exactly what arrived (+1: malloc(0)) */
    if (buf == NULL) {
        return 1;
    }
    memset(buf, 0, AXON_UD_GRH_LEN);
    memcpy(buf + AXON_UD_GRH_LEN, data, size);
    hdr     = (const axon_ud_hdr_t *)(buf + AXON_UD_GRH_LEN);
    payload = axon_ud_pkt_payload((uint32_t)(AXON_UD_GRH_LEN + size), hdr);
    if (payload >= 0) {
        switch (hdr->type) {
        case AXON_UD_PKT_CREQ:
            memcpy(&creq, hdr + 1, sizeof(creq));
            break;
        case AXON_UD_PKT_PROBE:
            memcpy(&probe, hdr + 1, sizeof(probe));
            break;
        case AXON_UD_PKT_ALIVE:
            memcpy(&alive, hdr + 1, sizeof(alive));
            break;
        default:   /* DATA (an AM or a fragment), PING, BYE, ACK */
            axon_fuzz_touch(hdr + 1, (size_t)payload);
            break;
        }
    }
    free(buf);
    return (payload >= 0) ? 0 : 1;
}
