/* softib's opcode table and header (de)serialization, and the operand words of masked atomics. */
#include <endian.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include "log.h"
#include "softib_pkt.h"

#define REQ   SOFTIB_OPF_REQUEST
#define FIRST SOFTIB_OPF_FIRST
#define LAST  SOFTIB_OPF_LAST
#define PAY   SOFTIB_OPF_PAYLOAD
#define SEND  SOFTIB_OPF_SEND
#define WRITE SOFTIB_OPF_WRITE
#define READ  SOFTIB_OPF_READ
#define ATOM  SOFTIB_OPF_ATOMIC
#define RECV  SOFTIB_OPF_RECV
#define COMP  SOFTIB_OPF_COMP
#define RC    SOFTIB_QPT_RC
#define UC    SOFTIB_QPT_UC
#define UD    SOFTIB_QPT_UD

const softib_opcode_info_t softib_opcode_table[SOFTIB_OP_LAST] = {
    [SOFTIB_OP_SEND_FIRST]       = {"SEND_FIRST", 0,
                                    REQ | FIRST | PAY | SEND | RECV, RC | UC},
    [SOFTIB_OP_SEND_MIDDLE]      = {"SEND_MIDDLE", 0,
                                    REQ | PAY | SEND, RC | UC},
    [SOFTIB_OP_SEND_LAST]        = {"SEND_LAST", 0,
                                    REQ | LAST | PAY | SEND | COMP, RC | UC},
    [SOFTIB_OP_SEND_LAST_IMM]    = {"SEND_LAST_IMM", SOFTIB_HDR_IMM,
                                    REQ | LAST | PAY | SEND | COMP, RC | UC},
    [SOFTIB_OP_SEND_ONLY]        = {"SEND_ONLY", 0,
                                    REQ | FIRST | LAST | PAY | SEND | RECV | COMP, RC | UC},
    [SOFTIB_OP_SEND_ONLY_IMM]    = {"SEND_ONLY_IMM", SOFTIB_HDR_IMM,
                                    REQ | FIRST | LAST | PAY | SEND | RECV | COMP, RC | UC},
    [SOFTIB_OP_WRITE_FIRST]      = {"WRITE_FIRST", SOFTIB_HDR_RETH,
                                    REQ | FIRST | PAY | WRITE, RC | UC},
    [SOFTIB_OP_WRITE_MIDDLE]     = {"WRITE_MIDDLE", 0,
                                    REQ | PAY | WRITE, RC | UC},
    [SOFTIB_OP_WRITE_LAST]       = {"WRITE_LAST", 0,
                                    REQ | LAST | PAY | WRITE, RC | UC},
    [SOFTIB_OP_WRITE_LAST_IMM]   = {"WRITE_LAST_IMM", SOFTIB_HDR_IMM,
                                    REQ | LAST | PAY | WRITE | RECV | COMP, RC | UC},
    [SOFTIB_OP_WRITE_ONLY]       = {"WRITE_ONLY", SOFTIB_HDR_RETH,
                                    REQ | FIRST | LAST | PAY | WRITE, RC | UC},
    [SOFTIB_OP_WRITE_ONLY_IMM]   = {"WRITE_ONLY_IMM", SOFTIB_HDR_RETH | SOFTIB_HDR_IMM,
                                    REQ | FIRST | LAST | PAY | WRITE | RECV | COMP, RC | UC},
    [SOFTIB_OP_READ_REQ]         = {"READ_REQ", SOFTIB_HDR_RETH,
                                    REQ | FIRST | LAST | READ, RC},
    [SOFTIB_OP_READ_RESP_FIRST]  = {"READ_RESP_FIRST", SOFTIB_HDR_AETH,
                                    FIRST | PAY | READ, RC},
    [SOFTIB_OP_READ_RESP_MIDDLE] = {"READ_RESP_MIDDLE", 0,
                                    PAY | READ, RC},
    [SOFTIB_OP_READ_RESP_LAST]   = {"READ_RESP_LAST", SOFTIB_HDR_AETH,
                                    LAST | PAY | READ, RC},
    [SOFTIB_OP_READ_RESP_ONLY]   = {"READ_RESP_ONLY", SOFTIB_HDR_AETH,
                                    FIRST | LAST | PAY | READ, RC},
    [SOFTIB_OP_ACK]              = {"ACK", SOFTIB_HDR_AETH,
                                    FIRST | LAST, RC},
    [SOFTIB_OP_ATOMIC_ACK]       = {"ATOMIC_ACK", SOFTIB_HDR_AETH | SOFTIB_HDR_ATOMICACK,
                                    FIRST | LAST | ATOM, RC},
    [SOFTIB_OP_CMP_SWAP]         = {"CMP_SWAP", SOFTIB_HDR_ATOMIC,
                                    REQ | FIRST | LAST | ATOM, RC},
    [SOFTIB_OP_FETCH_ADD]        = {"FETCH_ADD", SOFTIB_HDR_ATOMIC,
                                    REQ | FIRST | LAST | ATOM, RC},
    [SOFTIB_OP_UD_SEND_ONLY]     = {"UD_SEND_ONLY", SOFTIB_HDR_DETH,
                                    REQ | FIRST | LAST | PAY | SEND | RECV | COMP, UD},
    [SOFTIB_OP_UD_SEND_ONLY_IMM] = {"UD_SEND_ONLY_IMM", SOFTIB_HDR_DETH | SOFTIB_HDR_IMM,
                                    REQ | FIRST | LAST | PAY | SEND | RECV | COMP, UD},
    [SOFTIB_OP_MASKED_CMP_SWAP]  = {"MASKED_CMP_SWAP", SOFTIB_HDR_EXTATOMIC,
                                    REQ | FIRST | LAST | PAY | ATOM, RC},
    [SOFTIB_OP_MASKED_FETCH_ADD] = {"MASKED_FETCH_ADD", SOFTIB_HDR_EXTATOMIC,
                                    REQ | FIRST | LAST | PAY | ATOM, RC},
    [SOFTIB_OP_MASKED_ATOMIC_ACK] = {"MASKED_ATOMIC_ACK", SOFTIB_HDR_AETH,
                                    FIRST | LAST | PAY | ATOM, RC},
    /* handled by softib_dc.c before any QP type's path */
    [SOFTIB_OP_DC_DISCONNECT]     = {"DC_DISCONNECT", 0, REQ | FIRST | LAST, 0},
    [SOFTIB_OP_DC_DISCONNECT_ACK] = {"DC_DISCONNECT_ACK", 0, FIRST | LAST, 0},
};

size_t softib_pkt_build(void *buf, const softib_pkt_t *pkt)
{
    const softib_opcode_info_t *info = &softib_opcode_table[pkt->opcode];
    uint8_t *p = buf;
    softib_bth_t bth = {
        .opcode   = (uint8_t)pkt->opcode,
        .flags    = pkt->flags,
        .reserved = 0,
        .dest_qpn = htobe32(pkt->dest_qpn),
        .src_qpn  = htobe32(pkt->src_qpn),
        .psn      = htobe32(pkt->psn & SOFTIB_PSN_MASK),
    };

    memcpy(p, &bth, sizeof(bth));
    p += sizeof(bth);
    if (pkt->flags & SOFTIB_BTH_DC) {
        softib_dceth_t h = {htobe64(pkt->dceth.key), htobe32(pkt->dceth.conn_psn),
                            pkt->dceth.mtu, {0, 0, 0}};
        memcpy(p, &h, sizeof(h));
        p += sizeof(h);
    }
    if (pkt->flags & SOFTIB_BTH_MCAST) {
        memcpy(p, pkt->mgid.raw, sizeof(pkt->mgid.raw));
        p += sizeof(pkt->mgid.raw);
    }
    if (info->hdrs & SOFTIB_HDR_RETH) {
        softib_reth_t h = {htobe64(pkt->reth.va), htobe32(pkt->reth.rkey),
                           htobe32(pkt->reth.len)};
        memcpy(p, &h, sizeof(h));
        p += sizeof(h);
    }
    if (info->hdrs & SOFTIB_HDR_AETH) {
        softib_aeth_t h = {pkt->aeth.code, pkt->aeth.rnr_timer, 0, htobe32(pkt->aeth.msn)};
        memcpy(p, &h, sizeof(h));
        p += sizeof(h);
    }
    if (info->hdrs & SOFTIB_HDR_ATOMIC) {
        softib_atomic_eth_t h = {htobe64(pkt->atomic.va), htobe64(pkt->atomic.swap_add),
                                 htobe64(pkt->atomic.compare), htobe32(pkt->atomic.rkey), 0};
        memcpy(p, &h, sizeof(h));
        p += sizeof(h);
    }
    if (info->hdrs & SOFTIB_HDR_EXTATOMIC) {
        softib_ext_atomic_eth_t h = {htobe64(pkt->ext_atomic.va), htobe32(pkt->ext_atomic.rkey),
                                     pkt->ext_atomic.log_sz, {0, 0, 0}};
        memcpy(p, &h, sizeof(h));
        p += sizeof(h);
    }
    if (info->hdrs & SOFTIB_HDR_ATOMICACK) {
        softib_atomic_ack_eth_t h = {htobe64(pkt->atomic_orig)};
        memcpy(p, &h, sizeof(h));
        p += sizeof(h);
    }
    if (info->hdrs & SOFTIB_HDR_DETH) {
        softib_deth_t h = {htobe32(pkt->deth.qkey), htobe32(pkt->deth.src_qpn)};
        memcpy(p, &h, sizeof(h));
        p += sizeof(h);
    }
    if (info->hdrs & SOFTIB_HDR_IMM) {
        memcpy(p, &pkt->imm, sizeof(pkt->imm));
        p += sizeof(pkt->imm);
    }
    return (size_t)(p - (uint8_t *)buf);
}

void softib_pkt_set_dest_qpn(void *buf, uint32_t dest_qpn)
{
    uint32_t be = htobe32(dest_qpn);

    memcpy((uint8_t *)buf + offsetof(softib_bth_t, dest_qpn), &be, sizeof(be));
}

/* Take sizeof(*dst) bytes at *pp if they are there. */
static int pkt_take(const uint8_t **pp, const uint8_t *end, void *dst, size_t size)
{
    if ((size_t)(end - *pp) < size) {
        return 0;
    }
    memcpy(dst, *pp, size);
    *pp += size;
    return 1;
}

int softib_pkt_parse(const void *buf, size_t len, softib_pkt_t *pkt)
{
    const uint8_t *p = buf, *end = p + len;
    const softib_opcode_info_t *info;
    softib_bth_t bth;

    if (!pkt_take(&p, end, &bth, sizeof(bth)) || (bth.opcode >= SOFTIB_OP_LAST)) {
        axon_debug("softib: malformed packet (%zu bytes, opcode %u)", len,
                   len ? ((const uint8_t *)buf)[0] : 0);
        return EINVAL;
    }
    info          = &softib_opcode_table[bth.opcode];
    pkt->opcode   = (softib_opcode_t)bth.opcode;
    pkt->info     = info;
    pkt->flags    = bth.flags;
    pkt->dest_qpn = be32toh(bth.dest_qpn);
    pkt->src_qpn  = be32toh(bth.src_qpn);
    pkt->psn      = be32toh(bth.psn) & SOFTIB_PSN_MASK;
    if (bth.flags & SOFTIB_BTH_DC) {
        if (!pkt_take(&p, end, &pkt->dceth, sizeof(pkt->dceth))) {
            goto short_pkt;
        }
        pkt->dceth.key      = be64toh(pkt->dceth.key);
        pkt->dceth.conn_psn = be32toh(pkt->dceth.conn_psn) & SOFTIB_PSN_MASK;
    }
    if ((bth.flags & SOFTIB_BTH_MCAST) &&
        !pkt_take(&p, end, pkt->mgid.raw, sizeof(pkt->mgid.raw))) {
        goto short_pkt;
    }
    if (info->hdrs & SOFTIB_HDR_RETH) {
        if (!pkt_take(&p, end, &pkt->reth, sizeof(pkt->reth))) {
            goto short_pkt;
        }
        pkt->reth.va   = be64toh(pkt->reth.va);
        pkt->reth.rkey = be32toh(pkt->reth.rkey);
        pkt->reth.len  = be32toh(pkt->reth.len);
    }
    if (info->hdrs & SOFTIB_HDR_AETH) {
        if (!pkt_take(&p, end, &pkt->aeth, sizeof(pkt->aeth))) {
            goto short_pkt;
        }
        pkt->aeth.msn = be32toh(pkt->aeth.msn);
    }
    if (info->hdrs & SOFTIB_HDR_ATOMIC) {
        if (!pkt_take(&p, end, &pkt->atomic, sizeof(pkt->atomic))) {
            goto short_pkt;
        }
        pkt->atomic.va       = be64toh(pkt->atomic.va);
        pkt->atomic.swap_add = be64toh(pkt->atomic.swap_add);
        pkt->atomic.compare  = be64toh(pkt->atomic.compare);
        pkt->atomic.rkey     = be32toh(pkt->atomic.rkey);
    }
    if (info->hdrs & SOFTIB_HDR_EXTATOMIC) {
        if (!pkt_take(&p, end, &pkt->ext_atomic, sizeof(pkt->ext_atomic))) {
            goto short_pkt;
        }
        pkt->ext_atomic.va   = be64toh(pkt->ext_atomic.va);
        pkt->ext_atomic.rkey = be32toh(pkt->ext_atomic.rkey);
    }
    if (info->hdrs & SOFTIB_HDR_ATOMICACK) {
        if (!pkt_take(&p, end, &pkt->atomic_orig, sizeof(pkt->atomic_orig))) {
            goto short_pkt;
        }
        pkt->atomic_orig = be64toh(pkt->atomic_orig);
    }
    if (info->hdrs & SOFTIB_HDR_DETH) {
        if (!pkt_take(&p, end, &pkt->deth, sizeof(pkt->deth))) {
            goto short_pkt;
        }
        pkt->deth.qkey    = be32toh(pkt->deth.qkey);
        pkt->deth.src_qpn = be32toh(pkt->deth.src_qpn);
    }
    if (info->hdrs & SOFTIB_HDR_IMM) {
        if (!pkt_take(&p, end, &pkt->imm, sizeof(pkt->imm))) {
            goto short_pkt;
        }
    }
    pkt->payload = p;
    pkt->paylen  = (uint32_t)(end - p);
    if (!(info->flags & SOFTIB_OPF_PAYLOAD) && pkt->paylen) {
        goto short_pkt;
    }
    return 0;

short_pkt:
    axon_debug("softib: malformed %s packet (%zu bytes)", info->name, len);
    return EINVAL;
}

void softib_pkt_put_words(uint8_t *buf, const uint64_t *words, unsigned n)
{
    uint64_t be;
    unsigned i;

    for (i = 0; i < n; i++) {
        be = htobe64(words[i]);
        memcpy(buf + 8 * i, &be, sizeof(be));
    }
}

void softib_pkt_get_words(const uint8_t *buf, uint64_t *words, unsigned n)
{
    uint64_t be;
    unsigned i;

    for (i = 0; i < n; i++) {
        memcpy(&be, buf + 8 * i, sizeof(be));
        words[i] = be64toh(be);
    }
}
