/*
 * Seeds: valid inputs for each harness, made by Axon's own pack and
 * serialise functions (ud and rc, which send only from a live iface: their
 * wire structs, below), so a fuzzer starts from what peers really send. The table of harnesses is here too: the seed
 * tool (fuzz_seeds_main.c) and the regression gtest walk it.
 */
#include "axon_config.h"
#include <arpa/inet.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include "axon.h"
#include "fuzz.h"
#include "sys.h"
#include "components/shm/shm_seg.h"
#include "components/tcp/tcp_wire.h"
#include "components/verbs/rc_wire.h"
#include "components/verbs/ud_wire.h"
#include "softib/softib_cm.h"
#include "softib/softib_pkt.h"
#include "softib/softib_ring.h"
#ifdef HAVE_LIBFABRIC
#include "contrib/ofi_provider/axon_fi.h"
#endif

/* Addresses of workers over each set of transports this host offers. */
static int axon_fuzz_seeds_worker_address(axon_fuzz_emit_t emit, void *arg)
{
    static const char *const tls[] = {"all", "self,shm", "tcp", "rc", "ud,dc"};
    axon_context_params_t params = {AXON_FEATURE_TAG | AXON_FEATURE_RMA, NULL, 1};
    axon_context_h context;
    axon_worker_h worker;
    axon_status_t status;
    axon_config_kv_t kv;
    size_t i, length;
    void *address;
    int stop = 0;

    params.config = &kv;
    for (i = 0; !stop && (i < sizeof(tls) / sizeof(tls[0])); ++i) {
        kv.name  = "TLS";
        kv.value = tls[i];
        status   = axon_init(&params, &context);
        if (status != AXON_OK) {
            fprintf(stderr, "fuzz seeds: axon_init with AXON_TLS=%s: %s\n", tls[i],
                    axon_status_string(status));
            return -1;
        }
        status = axon_worker_create(context, NULL, &worker);
        if (status == AXON_OK) {
            status = axon_worker_get_address(worker, &address, &length);
            if (status == AXON_OK) {
                stop = emit(address, length, arg);
                axon_worker_release_address(worker, address);
            }
            axon_worker_destroy(worker);
        }
        axon_cleanup(context);
        if (status != AXON_OK) {
            fprintf(stderr, "fuzz seeds: a worker address over AXON_TLS=%s: %s\n", tls[i],
                    axon_status_string(status));
            return -1;
        }
    }
    return 0;
}

/* Keys to memory mapped over each set of transports, with one worker and with two. */
static int axon_fuzz_seeds_rkey_unpack(axon_fuzz_emit_t emit, void *arg)
{
    static const char *const tls[] = {"all", "shm", "tcp", "rc", "dc"};
    axon_context_params_t params = {AXON_FEATURE_RMA | AXON_FEATURE_AMO, NULL, 1};
    axon_mem_map_params_t map = {NULL, 4096, AXON_MEM_MAP_ALLOCATE, NULL};
    axon_worker_h workers[2] = {NULL, NULL};
    axon_status_t status = AXON_OK;
    axon_context_h context;
    axon_config_kv_t kv;
    axon_mem_h memh;
    size_t i, w, length;
    void *key;
    int stop = 0;

    params.config = &kv;
    for (i = 0; !stop && (status == AXON_OK) && (i < sizeof(tls) / sizeof(tls[0])); ++i) {
        kv.name  = "TLS";
        kv.value = tls[i];
        status   = axon_init(&params, &context);
        if (status != AXON_OK) {
            break;
        }
        for (w = 0; !stop && (status == AXON_OK) && (w < 2); ++w) {
            status = axon_worker_create(context, NULL, &workers[w]);
            if (status == AXON_OK) {
                status = axon_mem_map(context, &map, &memh);
            }
            if (status == AXON_OK) {
                status = axon_rkey_pack(context, memh, &key, &length);
                if (status == AXON_OK) {
                    stop = emit(key, length, arg);
                    axon_rkey_buffer_release(key);
                }
                axon_mem_unmap(context, memh);
            }
        }
        for (w = 0; w < 2; ++w) {
            if (workers[w] != NULL) {
                axon_worker_destroy(workers[w]);
                workers[w] = NULL;
            }
        }
        axon_cleanup(context);
    }
    if (status != AXON_OK) {
        fprintf(stderr, "fuzz seeds: a key over AXON_TLS=%s: %s\n", tls[i - (i > 0)],
                axon_status_string(status));
        return -1;
    }
    return 0;
}

/* Appends a tcp frame as tcp_ep.c sends it: header, body, padding. */
static size_t axon_fuzz_tcp_put(uint8_t *buf, size_t off, uint8_t am_id, uint8_t flags,
                                uint16_t hdr_len, uint32_t length)
{
    axon_tcp_frame_t frame = axon_tcp_frame_make(length, am_id, flags, hdr_len);

    memcpy(buf + off, &frame, sizeof(frame));
    memset(buf + off + sizeof(frame), 0xa5, length);
    memset(buf + off + sizeof(frame) + length, 0, axon_tcp_pad(length));
    return off + axon_tcp_frame_wire_len(length);
}

/* A peer's HELLO (64 KiB segments, tcp's default), then short, bcopy and zero-copy AMs, goodbye. */
static int axon_fuzz_seeds_tcp_frame(axon_fuzz_emit_t emit, void *arg)
{
    static uint8_t buf[sizeof(axon_tcp_hs_t) + 4 * sizeof(axon_tcp_frame_t) + 8192];
    axon_tcp_hs_t hello = axon_tcp_hs_make(AXON_TCP_HS_HELLO, AXON_TCP_REJECT_NONE, 42,
                                           AXON_FUZZ_TCP_UUID, 64 << 10, 0);
    size_t len = sizeof(hello);

    memcpy(buf, &hello, sizeof(hello));
    if (emit(buf, len, arg)) {
        return 0;
    }
    len = axon_fuzz_tcp_put(buf, len, 3, 0, 0, 13);
    len = axon_fuzz_tcp_put(buf, len, 4, 0, 0, 1000);
    if (emit(buf, len, arg)) {
        return 0;
    }
    len = axon_fuzz_tcp_put(buf, len, 5, AXON_TCP_FRAME_ZCOPY, 24, 4096);
    len = axon_fuzz_tcp_put(buf, len, AXON_TCP_CTRL_GOODBYE, AXON_TCP_FRAME_CTRL, 0, 0);
    emit(buf, len, arg);
    return 0;
}

/* One packet of each header combination softib sends, built by softib_pkt_build. */
static int axon_fuzz_seeds_softib_pkt(axon_fuzz_emit_t emit, void *arg)
{
    static const struct {
        softib_opcode_t opcode;
        uint8_t         flags;
        uint32_t        paylen;
    } kinds[] = {
        {SOFTIB_OP_SEND_ONLY, SOFTIB_BTH_ACKREQ, 64},
        {SOFTIB_OP_SEND_FIRST, 0, 256},
        {SOFTIB_OP_SEND_LAST_IMM, SOFTIB_BTH_SE, 8},
        {SOFTIB_OP_WRITE_ONLY_IMM, 0, 32},
        {SOFTIB_OP_READ_REQ, SOFTIB_BTH_DC, 0},
        {SOFTIB_OP_READ_RESP_ONLY, 0, 128},
        {SOFTIB_OP_ACK, 0, 0},
        {SOFTIB_OP_CMP_SWAP, 0, 0},
        {SOFTIB_OP_ATOMIC_ACK, 0, 0},
        {SOFTIB_OP_MASKED_CMP_SWAP, 0, 8 * SOFTIB_EXT_CMP_SWAP_FIELDS},
        {SOFTIB_OP_MASKED_ATOMIC_ACK, 0, 8},
        {SOFTIB_OP_UD_SEND_ONLY_IMM, 0, 16},
        {SOFTIB_OP_DC_DISCONNECT, SOFTIB_BTH_DC, 0},
    };
    uint8_t buf[512];
    uint64_t words[SOFTIB_EXT_CMP_SWAP_FIELDS] = {1, 2, ~0ull, ~0ull};
    softib_pkt_t pkt;
    size_t i, hlen;

    for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); ++i) {
        memset(&pkt, 0, sizeof(pkt));
        pkt.opcode         = kinds[i].opcode;
        pkt.flags          = kinds[i].flags;
        pkt.dest_qpn       = 0x11 + (uint32_t)i;
        pkt.src_qpn        = 0x22;
        pkt.psn            = 1000 + (uint32_t)i;
        pkt.dceth.key      = 0xdc;
        pkt.dceth.conn_psn = 1000;
        pkt.dceth.mtu      = 3;
        pkt.reth.va        = 0x10000;
        pkt.reth.rkey      = 0x33;
        pkt.reth.len       = kinds[i].paylen ? kinds[i].paylen : 4096;
        pkt.atomic.va      = 0x10008;
        pkt.atomic.rkey    = 0x33;
        pkt.ext_atomic.va  = 0x10008;
        pkt.ext_atomic.rkey   = 0x33;
        pkt.ext_atomic.log_sz = 3;
        pkt.deth.qkey      = 0x1111;
        pkt.deth.src_qpn   = 0x22;
        hlen = softib_pkt_build(buf, &pkt);
        memset(buf + hlen, 0x5a, kinds[i].paylen);
        if (kinds[i].opcode == SOFTIB_OP_MASKED_CMP_SWAP) {
            softib_pkt_put_words(buf + hlen, words, SOFTIB_EXT_CMP_SWAP_FIELDS);
        }
        if (emit(buf, hlen + kinds[i].paylen, arg)) {
            break;
        }
    }
    return 0;
}

/* Each CM message alone as softib_cm_msg_init starts it, then a REQ, RTU pair on one stream. */
static int axon_fuzz_seeds_softib_cm(axon_fuzz_emit_t emit, void *arg)
{
    static const softib_cm_msg_type_t types[] = {SOFTIB_CM_MSG_REQ, SOFTIB_CM_MSG_REP,
                                                 SOFTIB_CM_MSG_RTU, SOFTIB_CM_MSG_REJ,
                                                 SOFTIB_CM_MSG_DREQ, SOFTIB_CM_MSG_DREP};
    softib_cm_msg_t stream[2];
    size_t i;

    for (i = 0; i < sizeof(types) / sizeof(types[0]); ++i) {
        softib_cm_msg_init(&stream[0], types[i]);
        if ((types[i] == SOFTIB_CM_MSG_REQ) || (types[i] == SOFTIB_CM_MSG_REP)) {
            stream[0].qpn                 = htonl(0x100 + (uint32_t)i);
            stream[0].psn                 = htonl(0x1234);
            stream[0].mtu                 = 3;
            stream[0].responder_resources = 4;
            stream[0].initiator_depth     = 4;
            stream[0].retry_count         = 7;
            stream[0].rnr_retry_count     = 7;
            memset(stream[0].gid, 0xfe, sizeof(stream[0].gid));
            stream[0].pdata_len = 56;   /* what librdmacm's users send */
        } else if (types[i] == SOFTIB_CM_MSG_REJ) {
            stream[0].reason    = htons(28);
            stream[0].pdata_len = 8;
        }
        memset(stream[0].pdata, 0x42, stream[0].pdata_len);
        if (emit(&stream[0], sizeof(stream[0]), arg)) {
            return 0;
        }
    }
    softib_cm_msg_init(&stream[0], SOFTIB_CM_MSG_REQ);
    softib_cm_msg_init(&stream[1], SOFTIB_CM_MSG_RTU);
    emit(stream, sizeof(stream), arg);
    return 0;
}

/* Segments as shm_iface.c creates them, small: a ring of 2 and of 4 cells. */
static int axon_fuzz_seeds_shm_segment(axon_fuzz_emit_t emit, void *arg)
{
    static const unsigned rings[][3] = {{2, 128, 1}, {4, 256, 3}};  /* cells, bytes, senders */
    axon_shm_senders_t senders;
    axon_shm_fifo_t fifo;
    axon_shm_seg_t seg;
    axon_status_t status;
    axon_proc_t self;
    size_t i;
    int stop = 0;

    axon_proc_self(&self);
    for (i = 0; !stop && (i < sizeof(rings) / sizeof(rings[0])); ++i) {
        memset(&seg, 0, sizeof(seg));
        status = axon_shm_seg_create("axon-fuzz-seed", rings[i][0], rings[i][1], rings[i][2],
                                     axon_sys_host_id(), &self, -1, &seg, &fifo, &senders);
        if (status != AXON_OK) {
            fprintf(stderr, "fuzz seeds: a shm segment: %s\n", axon_status_string(status));
            return -1;
        }
        stop = emit(seg.addr, seg.length, arg);
        axon_shm_seg_destroy(&seg, &senders);
    }
    return 0;
}

/*
 * softib rings as senders find them, their words made by softib_cell_word:
 * fresh (tail 0, every cell FREE for lap 0), and half a lap on, with the cells
 * behind the tail published, one claimed by a sender that died before moving
 * the tail, and the rest free.
 */
static int axon_fuzz_seeds_softib_ring(axon_fuzz_emit_t emit, void *arg)
{
    uint8_t seed[1 + 9 * sizeof(uint64_t)];
    uint64_t word;
    unsigned i;

    memset(seed, 0, sizeof(seed));
    seed[0] = 2;   /* 8 cells */
    if (emit(seed, sizeof(seed), arg)) {
        return 0;
    }
    word = 4;      /* the tail */
    memcpy(seed + 1, &word, sizeof(word));
    for (i = 0; i < 8; ++i) {
        word = (i < 4) ? softib_cell_word(0, SOFTIB_CELL_PUBLISHED, 7) :
               (i == 4) ? softib_cell_word(0, SOFTIB_CELL_CLAIMED, 9) :
                          softib_cell_word(0, SOFTIB_CELL_FREE, 0);
        memcpy(seed + 1 + (i + 1) * sizeof(word), &word, sizeof(word));
    }
    emit(seed, sizeof(seed), arg);
    return 0;
}

/*
 * ud and rc send from descriptors of a live iface, so their seeds are the
 * wire structs filled as ud_reliab.c, ud_alive.c and rc_hs.c fill them.
 */
static int axon_fuzz_seeds_ud_packet(axon_fuzz_emit_t emit, void *arg)
{
    uint8_t buf[sizeof(axon_ud_hdr_t) + 64];
    axon_ud_hdr_t hdr = {AXON_UD_ID_NONE, 0x10001, 0, 0, 0, AXON_UD_PKT_CREQ, 0, 0, 0};
    axon_ud_creq_t creq = {7, 8, 0x123, {0}, 0x124};
    axon_ud_probe_t probe = {8, 0x123, {0}};
    axon_ud_alive_msg_t alive = {8};

    memcpy(buf, &hdr, sizeof(hdr));
    memcpy(buf + sizeof(hdr), &creq, sizeof(creq));
    if (emit(buf, sizeof(hdr) + sizeof(creq), arg)) {
        return 0;
    }
    hdr.dst_id = 0x20002;
    hdr.psn    = 1;
    hdr.ack    = 1;
    hdr.type   = AXON_UD_PKT_DATA;
    hdr.flags  = AXON_UD_FLAG_FIRST | AXON_UD_FLAG_LAST;
    hdr.am_id  = 3;
    memcpy(buf, &hdr, sizeof(hdr));
    memset(buf + sizeof(hdr), 0x5a, 64);
    if (emit(buf, sizeof(buf), arg)) {
        return 0;
    }
    hdr.type = AXON_UD_PKT_ACK;
    hdr.sack = 0x5;
    memcpy(buf, &hdr, sizeof(hdr));
    if (emit(buf, sizeof(hdr), arg)) {
        return 0;
    }
    hdr.type = AXON_UD_PKT_PROBE;
    memcpy(buf, &hdr, sizeof(hdr));
    memcpy(buf + sizeof(hdr), &probe, sizeof(probe));
    if (emit(buf, sizeof(hdr) + sizeof(probe), arg)) {
        return 0;
    }
    hdr.type = AXON_UD_PKT_ALIVE;
    memcpy(buf, &hdr, sizeof(hdr));
    memcpy(buf + sizeof(hdr), &alive, sizeof(alive));
    emit(buf, sizeof(hdr) + sizeof(alive), arg);
    return 0;
}

static int axon_fuzz_seeds_rc_handshake(axon_fuzz_emit_t emit, void *arg)
{
    static const uint8_t types[] = {AXON_RC_HS_REQ, AXON_RC_HS_REP, AXON_RC_HS_REJ};
    axon_rc_hs_t msg;
    size_t i;

    for (i = 0; i < sizeof(types); ++i) {
        memset(&msg, 0, sizeof(msg));
        msg.version      = AXON_RC_WIRE_VERSION;
        msg.type         = types[i];
        msg.window       = 64;
        msg.conn_id      = 1;
        msg.peer_conn_id = (types[i] == AXON_RC_HS_REQ) ? 0 : 2;
        msg.qpn          = 0x200;
        msg.psn          = 0x1234;
        msg.ud_qpn       = 0x201;
        msg.src_uuid     = 7;
        msg.dst_uuid     = 8;
        msg.dev_addr.mtu = 3;
        if (emit(&msg, sizeof(msg), arg)) {
            break;
        }
    }
    return 0;
}

#ifdef HAVE_LIBFABRIC
/* Key blobs as a peer's address server sends them, around keys Axon packed (rkey seeds). */
static int axon_fuzz_ofi_blob_emit(const void *key, size_t key_len, void *arg)
{
    axon_fuzz_emit_t *emit = ((void **)arg)[0];
    void *emit_arg         = ((void **)arg)[1];
    axon_fi_mr_blob_t b    = {0x1000, 0, 0, NULL, 0, key, key_len};
    uint8_t *blob          = malloc(AXON_FI_MR_BLOB_HEAD + AXON_FI_MR_BLOB_WORDS_HEAD +
                                    2 * key_len);
    int stop;

    if (blob == NULL) {
        return 1;
    }
    stop = (*emit)(blob, axon_fi_mr_blob_write(blob, &b), emit_arg);
    b.flags         = AXON_FI_MR_BLOB_EVENTS | AXON_FI_MR_BLOB_WORDS;
    b.word          = 0x7f0000001000ull;
    b.words_key     = key;
    b.words_key_len = key_len;
    stop = stop || (*emit)(blob, axon_fi_mr_blob_write(blob, &b), emit_arg);
    free(blob);
    return stop;
}

static int axon_fuzz_seeds_ofi_key_blob(axon_fuzz_emit_t emit, void *arg)
{
    void *pass[2] = {(void *)&emit, arg};

    return axon_fuzz_seeds_rkey_unpack(axon_fuzz_ofi_blob_emit, pass);
}
#endif

const axon_fuzz_harness_t axon_fuzz_harnesses[] = {
    {"worker_address", axon_fuzz_worker_address, axon_fuzz_seeds_worker_address},
    {"rkey_unpack",    axon_fuzz_rkey_unpack,    axon_fuzz_seeds_rkey_unpack},
    {"tcp_frame",      axon_fuzz_tcp_frame,      axon_fuzz_seeds_tcp_frame},
    {"config_value",   axon_fuzz_config_value,   axon_fuzz_seeds_config_value},
    {"softib_pkt",     axon_fuzz_softib_pkt,     axon_fuzz_seeds_softib_pkt},
    {"softib_cm",      axon_fuzz_softib_cm,      axon_fuzz_seeds_softib_cm},
    {"ud_packet",      axon_fuzz_ud_packet,      axon_fuzz_seeds_ud_packet},
    {"rc_handshake",   axon_fuzz_rc_handshake,   axon_fuzz_seeds_rc_handshake},
    {"shm_segment",    axon_fuzz_shm_segment,    axon_fuzz_seeds_shm_segment},
    {"softib_ring",    axon_fuzz_softib_ring,    axon_fuzz_seeds_softib_ring},
#ifdef HAVE_LIBFABRIC
    {"ofi_key_blob",   axon_fuzz_ofi_key_blob,   axon_fuzz_seeds_ofi_key_blob},
#endif
};
const unsigned axon_fuzz_num_harnesses = sizeof(axon_fuzz_harnesses) /
                                         sizeof(axon_fuzz_harnesses[0]);
