/*
 * axon_perf -t tag_fanin / tag_fanout: message rate between one worker and
 * many peers (--peers, one worker each in the server process), so the hub's
 * transport serves that many endpoints at once, the load that tells apart
 * transports with per-peer queues (rc), none (ud) and a shared pool of
 * initiators (dc, whose DCIs must change targets):
 *
 *   tag_fanin   many-to-one: every peer streams to the client's worker;
 *   tag_fanout  one-to-many: the client's worker streams to every peer,
 *               one message to each in turn.
 *
 * In windows, as tag_bw: each sender has WINDOW messages in flight to each
 * receiver, then waits for every receiver's 0-byte ack. The hub's receives
 * all take one tag under a mask that leaves the sender's index visible in
 * sender_tag, so none searches past the first posted receive and the hub
 * still knows each message's origin (with -c each carries the pattern of its
 * sender and sequence number, checked in each sender's order). The client
 * prints the aggregate: messages of all peers per second.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "axon.h"
#include "perf_peers.h"

/* Data tags: the test's tag above, the peer's index below (sender's or receiver's). */
#define PERF_FAN_PEER_BITS  32
#define PERF_FAN_DATA_TAG   ((axon_tag_t)PERF_TAG_DATA << PERF_FAN_PEER_BITS)
#define PERF_FAN_DATA_MASK  (~(axon_tag_t)0 << PERF_FAN_PEER_BITS)
#define PERF_FAN_PEER_OF(_tag) ((unsigned)((_tag) & ~PERF_FAN_DATA_MASK))

typedef struct {
    perf_peers_t          peers;
    const perf_params_t  *params;
    int                   fanin;     /* tag_fanin: the peers send, the hub receives */
    size_t                size;      /* of the messages of the round in progress */
    size_t                slot_size; /* -c: a buffer per message of a window; else one */
    uint8_t              *buf;       /* what this side sends or receives into */
    axon_request_h       *reqs;      /* one per message of a window, then one per ack */
    axon_tag_recv_info_t *infos;     /* hub receiving: where each message came from */
    unsigned long        *next_seq;  /* hub receiving: each peer's next message */
    unsigned long         total;     /* messages per peer per size, warm-up included */
} perf_fan_t;

static inline int perf_fan_hub(const perf_fan_t *f)
{
    return f->peers.role == PERF_ROLE_CLIENT;
}

/* The pattern a message carries: its sender and its number in the sender's stream. */
static inline uint64_t perf_fan_seed(const perf_fan_t *f, unsigned peer, unsigned long seq)
{
    return (uint64_t)peer * f->total + seq;
}

static inline uint8_t *perf_fan_slot(const perf_fan_t *f, unsigned slot)
{
    return f->buf + (f->params->check ? (size_t)slot * f->slot_size : 0);
}

/*
 * Wait for the first count requests of reqs (NULL ones are done), peer of
 * each: slot % peers; infos: the receives' infos, one per request, or NULL.
 */
static int perf_fan_wait_infos(perf_fan_t *f, unsigned count, axon_tag_recv_info_t *infos,
                               const char *what)
{
    unsigned i;
    int      ret = 0;

    for (i = 0; i < count; ++i) {
        if ((ret == 0) && (perf_peers_wait(&f->peers, f->reqs[i], infos ? &infos[i] : NULL, what,
                                           i % f->peers.num_peers) != 0)) {
            ret = -1;
        } else if (ret != 0) {
            /* the run is failing: drop our hold on the rest */
            if (f->reqs[i] != NULL) {
                axon_request_free(f->reqs[i]);
            }
        }
        f->reqs[i] = NULL;
    }
    return ret;
}

static int perf_fan_wait_all(perf_fan_t *f, unsigned count, const char *what)
{
    return perf_fan_wait_infos(f, count, NULL, what);
}

/*
 * Send message k of the window on every hub-peer pair in turn, k = 0..w-1:
 * the hub to each peer (tag_fanout), or each peer's worker to the hub.
 */
static int perf_fan_send(perf_fan_t *f, unsigned long done, unsigned w)
{
    unsigned peers = f->peers.num_peers, k, p, slot;

    for (k = 0; k < w; ++k) {
        for (p = 0; p < peers; ++p) {
            slot = k * peers + p;
            if (f->params->check) {
                perf_fill(perf_fan_slot(f, slot), f->size, perf_fan_seed(f, p, done + k));
            }
            if (perf_peers_send(&f->peers, p, perf_fan_slot(f, slot), f->size,
                                PERF_FAN_DATA_TAG | p, &f->reqs[slot]) != 0) {
                perf_fan_wait_all(f, slot, "a send");
                return -1;
            }
        }
    }
    return perf_fan_wait_all(f, w * peers, "a send");
}

/* Hub receiving (tag_fanin): w messages of every peer, in arrival order. */
static int perf_fan_hub_recv(perf_fan_t *f, unsigned w)
{
    unsigned  count = w * f->peers.num_peers, i, p;
    uint8_t  *slot;

    for (i = 0; i < count; ++i) {
        if (perf_peers_recv(&f->peers, 0, i % f->peers.num_peers, perf_fan_slot(f, i), f->size,
                            PERF_FAN_DATA_TAG, PERF_FAN_DATA_MASK, &f->infos[i],
                            &f->reqs[i]) != 0) {
            perf_fan_wait_all(f, i, "a receive");
            return -1;
        }
    }
    if (perf_fan_wait_infos(f, count, f->infos, "a receive") != 0) {
        return -1;
    }
    /* Receives match in post order and each sender's messages in send order. */
    for (i = 0; i < count; ++i) {
        p    = PERF_FAN_PEER_OF(f->infos[i].sender_tag);
        slot = perf_fan_slot(f, i);
        if ((p >= f->peers.num_peers) || (f->infos[i].length != f->size)) {
            fprintf(stderr, "axon_perf %s client: message %u of the window: %zu bytes from "
                    "peer %u, expected %zu bytes from one of %u peers\n", f->peers.test, i,
                    f->infos[i].length, p, f->size, f->peers.num_peers);
            return -1;
        }
        if (f->params->check &&
            (perf_verify(f->peers.role, slot, f->size, perf_fan_seed(f, p, f->next_seq[p]),
                         "message (peer * messages per peer + sequence)") != 0)) {
            return -1;
        }
        ++f->next_seq[p];
    }
    return 0;
}

/* Peers receiving (tag_fanout): w messages on each peer's worker. */
static int perf_fan_peers_recv(perf_fan_t *f, unsigned long done, unsigned w)
{
    unsigned peers = f->peers.num_peers, k, p, slot;

    for (k = 0; k < w; ++k) {
        for (p = 0; p < peers; ++p) {
            slot = k * peers + p;
            if (perf_peers_recv(&f->peers, p, p, perf_fan_slot(f, slot), f->size,
                                PERF_FAN_DATA_TAG | p, AXON_TAG_MASK_FULL, NULL,
                                &f->reqs[slot]) != 0) {
                perf_fan_wait_all(f, slot, "a receive");
                return -1;
            }
        }
    }
    if (perf_fan_wait_all(f, w * peers, "a receive") != 0) {
        return -1;
    }
    for (k = 0; f->params->check && (k < w); ++k) {
        for (p = 0; p < peers; ++p) {
            if (perf_verify(f->peers.role, perf_fan_slot(f, k * peers + p), f->size,
                            perf_fan_seed(f, p, done + k), "message") != 0) {
                return -1;
            }
        }
    }
    return 0;
}

/*
 * The end of a window, over each of the hub-peer pairs: the receiving side
 * sends a 0-byte ack on endpoint p, the sending side takes it on the hub's
 * worker or on peer p's.
 */
static int perf_fan_ack(perf_fan_t *f, int receiver)
{
    unsigned peers = f->peers.num_peers, p;
    int      ret   = 0;

    for (p = 0; (ret == 0) && (p < peers); ++p) {
        if (receiver) {
            ret = perf_peers_send(&f->peers, p, f->buf, 0, PERF_TAG_ACK, &f->reqs[p]);
        } else {
            ret = perf_peers_recv(&f->peers, perf_fan_hub(f) ? 0 : p, p, f->buf, 0, PERF_TAG_ACK,
                                  AXON_TAG_MASK_FULL, NULL, &f->reqs[p]);
        }
    }
    if (ret != 0) {
        perf_fan_wait_all(f, p - 1, "an ack");
        return -1;
    }
    return perf_fan_wait_all(f, peers, "an ack");
}

/* count messages per peer from sequence number done on, in windows. */
static int perf_fan_windows(perf_fan_t *f, unsigned long done, unsigned long count)
{
    int           receiver = (f->fanin == perf_fan_hub(f));
    unsigned long end      = done + count;
    unsigned      w;
    int           ret;

    for (; done < end; done += w) {
        w = ((end - done) < f->params->window) ? (unsigned)(end - done) : f->params->window;
        if (!receiver) {
            ret = perf_fan_send(f, done, w);
        } else {
            ret = perf_fan_hub(f) ? perf_fan_hub_recv(f, w) : perf_fan_peers_recv(f, done, w);
        }
        if ((ret != 0) || (perf_fan_ack(f, receiver) != 0)) {
            return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------- driver */

static void perf_fan_lanes(const perf_fan_t *f, axon_ep_attr_t *attr)
{
    axon_ep_attr_t last;
    unsigned       n = f->peers.num_peers;

    if (axon_ep_query(f->peers.eps[0], attr) != AXON_OK) {
        memset(attr, 0, sizeof(*attr));
    }
    printf("# axon_perf %s: test=%s peers=%u iters=%lu (per peer) warmup=%lu window=%u "
           "check=%s\n", axon_get_version_string(), f->peers.test, n, f->params->iters,
           f->params->warmup, f->params->window, f->params->check ? "yes" : "no");
    printf("# lanes: small=%s/%s bulk=%s/%s eager_short_max=%zu\n", attr->small_tl,
           attr->small_dev, attr->bulk_tl, attr->bulk_dev, attr->eager_short_max);
    if ((axon_ep_query(f->peers.eps[n - 1], &last) == AXON_OK) &&
        (strcmp(last.small_tl, attr->small_tl) || strcmp(last.bulk_tl, attr->bulk_tl))) {
        printf("# lanes of peer %u: small=%s/%s bulk=%s/%s (AXON_RC_MAX_PEERS)\n", n - 1,
               last.small_tl, last.small_dev, last.bulk_tl, last.bulk_dev);
    }
    fflush(stdout);
}

static void perf_fan_result(const perf_fan_t *f, const axon_ep_attr_t *attr, double elapsed)
{
    double      msgs = (double)f->params->iters * f->peers.num_peers;
    const char *tl   = (f->size <= attr->eager_short_max) ? attr->small_tl : attr->bulk_tl;

    elapsed = (elapsed > 0) ? elapsed : 1e-9;
    printf("RESULT test=%s tl=%s size=%zu iters=%lu latency_us=%.3f bandwidth_MBps=%.3f "
           "msgrate_Mps=%.3f peers=%u\n", f->peers.test, tl, f->size, f->params->iters,
           elapsed / msgs * 1e6, (double)f->size * msgs / elapsed / 1e6, msgs / elapsed / 1e6,
           f->peers.num_peers);
    fflush(stdout);
}

static int perf_fan_alloc(perf_fan_t *f)
{
    const perf_params_t *params = f->params;
    unsigned             inflight = params->window * params->peers, i;

    f->slot_size = 1;  /* never 0: a distinct non-NULL buffer */
    for (i = 0; i < params->num_sizes; ++i) {
        if (params->sizes[i] > f->slot_size) {
            f->slot_size = params->sizes[i];
        }
    }
    f->buf      = calloc(params->check ? inflight : 1, f->slot_size);
    f->reqs     = calloc(inflight, sizeof(*f->reqs));
    f->infos    = calloc(inflight, sizeof(*f->infos));
    f->next_seq = calloc(params->peers, sizeof(*f->next_seq));
    if (!f->buf || !f->reqs || !f->infos || !f->next_seq) {
        fprintf(stderr, "axon_perf %s: out of memory for %u messages in flight\n",
                f->peers.test, inflight);
        return -1;
    }
    return 0;
}

/* One size: the warm-up windows, then the timed ones. */
static int perf_fan_size(perf_fan_t *f, size_t size, double *elapsed)
{
    double t0;

    f->size  = size;
    f->total = f->params->warmup + f->params->iters;
    memset(f->next_seq, 0, f->params->peers * sizeof(*f->next_seq));
    if (perf_fan_windows(f, 0, f->params->warmup) != 0) {
        return -1;
    }
    t0 = perf_now();
    if (perf_fan_windows(f, f->params->warmup, f->params->iters) != 0) {
        return -1;
    }
    *elapsed = perf_now() - t0;
    return 0;
}

int perf_fan_run(const perf_params_t *params, int fd, perf_role_t role, const char *name)
{
    perf_fan_t     f = { .params = params, .fanin = (params->test == PERF_TEST_TAG_FANIN) };
    axon_ep_attr_t attr;
    double         elapsed;
    unsigned       i;
    int            ret = -1;

    if (perf_peers_open(&f.peers, name, role, fd, params->peers) != 0) {
        goto out;
    }
    for (i = 0; i < params->peers; ++i) {
        if (perf_peers_connect(&f.peers, i) != 0) {
            goto out;
        }
    }
    /* Every endpoint exists on both sides before any message flows. */
    if ((perf_fan_alloc(&f) != 0) || (perf_sync(fd, f.peers.workers, f.peers.num_workers) != 0)) {
        goto out;
    }
    if (role == PERF_ROLE_CLIENT) {
        perf_fan_lanes(&f, &attr);
    }
    for (i = 0; i < params->num_sizes; ++i) {
        alarm(PERF_TIMEOUT_SEC);
        if (perf_fan_size(&f, params->sizes[i], &elapsed) != 0) {
            goto out;
        }
        if (role == PERF_ROLE_CLIENT) {
            perf_fan_result(&f, &attr, elapsed);
        }
    }
    ret = perf_peers_finish(&f.peers);
out:
    perf_peers_close(&f.peers);
    free(f.next_seq);
    free(f.infos);
    free(f.reqs);
    free(f.buf);
    return ret;
}

int perf_fan_check_params(const perf_params_t *params)
{
    size_t max_size = 0;
    unsigned i;

    if ((params->peers == 0) || (params->peers > PERF_FAN_MAX_PEERS)) {
        fprintf(stderr, "axon_perf: invalid --peers %u (1..%d)\n", params->peers,
                PERF_FAN_MAX_PEERS);
        return -1;
    }
    if ((unsigned long)params->window * params->peers > PERF_FAN_MAX_INFLIGHT) {
        fprintf(stderr, "axon_perf: %s: window %u x %u peers is more than %d messages in "
                "flight\n", perf_test_names[params->test], params->window, params->peers,
                PERF_FAN_MAX_INFLIGHT);
        return -1;
    }
    for (i = 0; i < params->num_sizes; ++i) {
        max_size = (params->sizes[i] > max_size) ? params->sizes[i] : max_size;
    }
    if (params->check &&
        ((double)max_size * params->window * params->peers > PERF_FAN_MAX_CHECK_BYTES)) {
        fprintf(stderr, "axon_perf: %s -c keeps a buffer per message in flight: %zu bytes x "
                "window %u x %u peers is more than %.0f MiB; lower -w or --peers\n",
                perf_test_names[params->test], max_size, params->window, params->peers,
                (double)PERF_FAN_MAX_CHECK_BYTES / (1 << 20));
        return -1;
    }
    return 0;
}
