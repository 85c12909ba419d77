/*
 * softib packets as they come off its UDP or shared-memory wire
 * (framework/device/softib/softib_pkt.c). A packet that parses must also
 * rebuild into one that parses to the same fields: the requester and the
 * responder then agree on what went over the wire.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fuzz.h"
#include "softib/softib_pkt.h"

/* Longest header softib_pkt_build writes: every extension header at once. */
#define AXON_FUZZ_SOFTIB_HDR_MAX \
    (sizeof(softib_bth_t) + sizeof(softib_dceth_t) + sizeof(softib_reth_t) + \
     sizeof(softib_aeth_t) + sizeof(softib_atomic_eth_t) + sizeof(softib_ext_atomic_eth_t) + \
     sizeof(softib_atomic_ack_eth_t) + sizeof(softib_deth_t) + sizeof(softib_immdt_t))

static int axon_fuzz_softib_same(const softib_pkt_t *a, const softib_pkt_t *b)
{
    return (a->opcode == b->opcode) && (a->flags == b->flags) &&
           (a->dest_qpn == b->dest_qpn) && (a->src_qpn == b->src_qpn) && (a->psn == b->psn) &&
           (a->paylen == b->paylen) &&
           (!(a->flags & SOFTIB_BTH_DC) ||
            ((a->dceth.key == b->dceth.key) && (a->dceth.conn_psn == b->dceth.conn_psn) &&
             (a->dceth.mtu == b->dceth.mtu))) &&
           (!(a->info->hdrs & SOFTIB_HDR_RETH) || !memcmp(&a->reth, &b->reth, sizeof(a->reth))) &&
           (!(a->info->hdrs & SOFTIB_HDR_AETH) ||
            ((a->aeth.code == b->aeth.code) && (a->aeth.rnr_timer == b->aeth.rnr_timer) &&
             (a->aeth.msn == b->aeth.msn))) &&
           (!(a->info->hdrs & SOFTIB_HDR_ATOMIC) ||
            ((a->atomic.va == b->atomic.va) && (a->atomic.swap_add == b->atomic.swap_add) &&
             (a->atomic.compare == b->atomic.compare) && (a->atomic.rkey == b->atomic.rkey))) &&
           (!(a->info->hdrs & SOFTIB_HDR_EXTATOMIC) ||
            ((a->ext_atomic.va == b->ext_atomic.va) &&
             (a->ext_atomic.rkey == b->ext_atomic.rkey) &&
             (a->ext_atomic.log_sz == b->ext_atomic.log_sz))) &&
           (!(a->info->hdrs & SOFTIB_HDR_ATOMICACK) || (a->atomic_orig == b->atomic_orig)) &&
           (!(a->info->hdrs & SOFTIB_HDR_DETH) ||
            ((a->deth.qkey == b->deth.qkey) && (a->deth.src_qpn == b->deth.src_qpn))) &&
           (!(a->info->hdrs & SOFTIB_HDR_IMM) || (a->imm == b->imm));
}

int axon_fuzz_softib_pkt(const uint8_t *data, size_t size)
{
    softib_pkt_t pkt, again;
    uint8_t *rebuilt;
    size_t hlen;

    if (softib_pkt_parse(data, size, &pkt) != 0) {
        return 1;
    }
    axon_fuzz_touch(pkt.payload, pkt.paylen);
    rebuilt = malloc(AXON_FUZZ_SOFTIB_HDR_MAX + pkt.paylen);
    if (rebuilt == NULL) {
        return 0;
    }
    hlen = softib_pkt_build(rebuilt, &pkt);
    memcpy(rebuilt + hlen, pkt.payload, pkt.paylen);
    if ((hlen > AXON_FUZZ_SOFTIB_HDR_MAX) ||
        (softib_pkt_parse(rebuilt, hlen + pkt.paylen, &again) != 0) ||
        !axon_fuzz_softib_same(&pkt, &again)) {
        fprintf(stderr, "softib: a %s packet of %zu bytes does not survive a rebuild\n",
                pkt.info->name, size);
        abort();
    }
    free(rebuilt);
    return 0;
}
