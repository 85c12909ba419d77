/*
 * Fuzz harnesses for every parser of bytes Axon did not write (tests/fuzz/).
 *
 * A harness body is a plain function, linked both into its libFuzzer binary
 * (fuzz_main.c, a thin wrapper, built by `make fuzz` with clang) and into
 * the gtest binary, whose FuzzRegressions suite feeds it Axon's own seeds
 * and every input kept under tests/fuzz/regressions/<harness>/.
 */
#ifndef AXON_FUZZ_H
#define AXON_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A harness body: 0 when the parser accepted the input, 1 when it refused it. */
typedef int (*axon_fuzz_entry_t)(const uint8_t *data, size_t size);

int axon_fuzz_worker_address(const uint8_t *data, size_t size);
int axon_fuzz_rkey_unpack(const uint8_t *data, size_t size);
/* The worker a tcp stream's HELLO must name (seeds are made for it). */
#define AXON_FUZZ_TCP_UUID 0x5eed0000000000a1ull
int axon_fuzz_tcp_frame(const uint8_t *data, size_t size);
int axon_fuzz_config_value(const uint8_t *data, size_t size);
int axon_fuzz_softib_pkt(const uint8_t *data, size_t size);
int axon_fuzz_softib_cm(const uint8_t *data, size_t size);
int axon_fuzz_ud_packet(const uint8_t *data, size_t size);
int axon_fuzz_rc_handshake(const uint8_t *data, size_t size);
int axon_fuzz_shm_segment(const uint8_t *data, size_t size);
int axon_fuzz_softib_ring(const uint8_t *data, size_t size);
/* Only with libfabric (HAVE_LIBFABRIC): the provider's headers need it. */
int axon_fuzz_ofi_key_blob(const uint8_t *data, size_t size);

/* Reads every byte of [p, p + len): the sanitizers see a range that is not the input's. */
static inline unsigned axon_fuzz_touch(const void *p, size_t len)
{
    const volatile uint8_t *b = (const volatile uint8_t *)p;
    unsigned sum = 0;
    size_t i;

    for (i = 0; i < len; ++i) {
        sum += b[i];
    }
    return sum;
}

/* ---- seeds: valid inputs made by Axon's own pack and serialise functions */

/* Called once per seed; returns nonzero to stop. */
typedef int (*axon_fuzz_emit_t)(const void *data, size_t size, void *arg);

typedef struct axon_fuzz_harness {
    const char        *name;    /* fuzz_<name>, tests/fuzz/regressions/<name>/ */
    axon_fuzz_entry_t  entry;
    /* Emits the seeds; 0 when every one was made, else what failed is logged. */
    int              (*seeds)(axon_fuzz_emit_t emit, void *arg);
} axon_fuzz_harness_t;

/* Seeds a harness makes itself, from what its parser prints. */
int axon_fuzz_seeds_config_value(axon_fuzz_emit_t emit, void *arg);

extern const axon_fuzz_harness_t axon_fuzz_harnesses[];
extern const unsigned            axon_fuzz_num_harnesses;

#ifdef __cplusplus
}
#endif

#endif
