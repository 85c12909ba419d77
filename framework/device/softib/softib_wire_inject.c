/*
 * Fault injection on send, for tests of the engine's reliability: each packet
 * is lost with probability loss; else held back with probability reorder
 * (into one of a few preallocated buffers) and sent after the next packet
 * that leaves, or after SOFTIB_WIRE_HOLD_NS by softib_wire_progress; else
 * sent, and with probability dup sent twice. The RNG is private (xorshift64*)
 * so a seed replays the same pattern of faults.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "softib_wire_priv.h"
#include "softib_guard.h"
#include "log.h"

static uint64_t softib_wire_inject_next(softib_wire_inject_t *inject)
{
    uint64_t x = inject->rng;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    inject->rng = x;
    return x * 0x2545f4914f6cdd1dull;
}

/* A probability in [0,1] as a threshold on a uniform 64-bit number. */
static uint64_t softib_wire_inject_threshold(double p)
{
    if (!(p > 0.0)) {
        return 0;
    }
    if (p >= 1.0) {
        return UINT64_MAX;
    }
    return (uint64_t)(p * 18446744073709551616.0);
}

/* True with the probability threshold stands for (never for 0, always for 1). */
static int softib_wire_inject_chance(softib_wire_inject_t *inject, uint64_t threshold)
{
    if (threshold == 0) {
        return 0;
    }
    return (threshold == UINT64_MAX) || (softib_wire_inject_next(inject) < threshold);
}

static int softib_wire_inject_valid(double p)
{
    return (p >= 0.0) && (p <= 1.0);   /* false for NaN too */
}

int softib_wire_inject_init(softib_wire_inject_t *inject, const softib_wire_params_t *params)
{
    struct timespec ts;
    uint64_t        seed;
    unsigned        i;

    memset(inject, 0, sizeof(*inject));
    if (!softib_wire_inject_valid(params->loss) || !softib_wire_inject_valid(params->dup) ||
        !softib_wire_inject_valid(params->reorder)) {
        axon_error("softib: fault probabilities must be in [0,1]: loss %g dup %g reorder %g",
                   params->loss, params->dup, params->reorder);
        return EINVAL;
    }
    inject->loss    = softib_wire_inject_threshold(params->loss);
    inject->dup     = softib_wire_inject_threshold(params->dup);
    inject->reorder = softib_wire_inject_threshold(params->reorder);
    inject->enabled = (inject->loss | inject->dup | inject->reorder) != 0;
    if (!inject->enabled) {
        return 0;
    }

    seed = params->seed;
    if (seed == 0) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        seed = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec;
    }
    /* Spread small seeds over the state; xorshift must never hold 0. */
    inject->rng = (seed * 0x9e3779b97f4a7c15ull) ^ 0xd1b54a32d192ed03ull;
    if (inject->rng == 0) {
        inject->rng = 1;
    }

    if (inject->reorder != 0) {
        inject->buffers = malloc((size_t)SOFTIB_WIRE_HOLD_MAX * SOFTIB_WIRE_MAX_PKT);
        if (inject->buffers == NULL) {
            return ENOMEM;
        }
        for (i = 0; i < SOFTIB_WIRE_HOLD_MAX; ++i) {
            inject->held[i].data = inject->buffers + (size_t)i * SOFTIB_WIRE_MAX_PKT;
        }
    }
    axon_debug("softib: injecting faults: loss %g dup %g reorder %g, seed %llu", params->loss,
               params->dup, params->reorder, (unsigned long long)seed);
    return 0;
}

void softib_wire_inject_cleanup(softib_wire_inject_t *inject)
{
    free(inject->buffers);
    inject->buffers = NULL;
    inject->nheld   = 0;
}

/*
 * Send held packets: all of them (force: a later packet just left), or those
 * due. One the destination cannot take yet (EAGAIN) stays for the next call.
 */
void softib_wire_inject_progress(softib_wire_t *wire, int force)
{
    softib_wire_inject_t *inject = &wire->inject;
    softib_wire_held_t   *held, tmp;
    uint64_t              now    = force ? 0 : axon_sys_time_ns();
    unsigned              i      = 0;

    while (i < inject->nheld) {
        softib_wire_pkt_t pkt;

        held = &inject->held[i];
        pkt  = (softib_wire_pkt_t){held->data, held->len, NULL, 0};
        if ((!force && (held->due_ns > now)) ||
            (softib_wire_send_now(wire, &held->dgid, held->dest_qpn, &pkt) == EAGAIN)) {
            ++i;
            continue;
        }
        /* Sent: keep the held ones packed at the front, buffers and all. */
        tmp                          = *held;
        *held                        = inject->held[inject->nheld - 1];
        inject->held[inject->nheld - 1] = tmp;
        --inject->nheld;
    }
}

int softib_wire_inject_send(softib_wire_t *wire, const axon_dev_gid_t *dgid, uint32_t dest_qpn,
                            const softib_wire_pkt_t *pkt)
{
    softib_wire_inject_t *inject = &wire->inject;
    softib_wire_held_t   *held;
    int                   ret;

    if (softib_wire_inject_chance(inject, inject->loss)) {
        return 0;
    }
    if ((inject->nheld < SOFTIB_WIRE_HOLD_MAX) &&
        softib_wire_inject_chance(inject, inject->reorder)) {
        held           = &inject->held[inject->nheld++];
        held->due_ns   = axon_sys_time_ns() + SOFTIB_WIRE_HOLD_NS;
        held->dgid     = *dgid;
        held->dest_qpn = dest_qpn;
        held->len      = (uint32_t)(pkt->hlen + pkt->paylen);
        memcpy(held->data, pkt->hdr, pkt->hlen);
        if (pkt->paylen != 0) {
            (void)softib_guard_copy(held->data + pkt->hlen, pkt->pay, pkt->paylen, 1);
        }
        return 0;
    }
    ret = softib_wire_send_now(wire, dgid, dest_qpn, pkt);
    if (ret != 0) {
        return ret;
    }
    if (softib_wire_inject_chance(inject, inject->dup)) {
        softib_wire_send_now(wire, dgid, dest_qpn, pkt);
    }
    if (inject->nheld > 0) {
        softib_wire_inject_progress(wire, 1);
    }
    return 0;
}
