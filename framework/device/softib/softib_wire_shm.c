/*
 * softib's shm wire: every slot owns a receive ring in its own POSIX shm
 * segment ("/axon-softib<N>.<slot>.<gen>") and a doorbell FIFO next to it in
 * /dev/shm (a FIFO is pollable and, unlike an abstract unix socket, shared
 * by processes in different network namespaces).
 *
 * The ring is a bounded multi-producer single-consumer queue of fixed cells
 * in the manner of D. Vyukov's: a cell's 64-bit word says for which lap of
 * the ring it is FREE, CLAIMED or PUBLISHED. Unlike the classic scheme a
 * producer claims the cell itself, by a compare-and-swap that writes its
 * identity (slot and generation) into the word, and only then moves the
 * tail (anyone may move it past a claimed cell). So a producer killed
 * between claim and publish leaves a cell that names it: the consumer,
 * finding the head cell claimed for more than SOFTIB_RING_STUCK_NS, asks the
 * registry whether that producer still lives and, if not, skips the cell
 * (and if it died before moving the tail, the next producer moves it).
 * A live producer is never skipped, so a cell is never written by two
 * producers at once. A publish that finds its cell skipped (the registry
 * thought us dead) is a lost packet.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "softib_guard.h"
#include "softib_direct.h"
#include "softib_ring.h"
#include "softib_wire_priv.h"
#include "log.h"

#define SOFTIB_RING_MAGIC     0x5342524e47303032ull   /* "SBRNG002" */
#define SOFTIB_RING_STUCK_NS  10000000ull             /* 10 ms: check a claimer's life */
#define SOFTIB_RING_FULL_NS   100000000ull            /* 100 ms: check a full ring's owner */

struct softib_ring {
    /* Written once by the owner before its slot is published. */
    struct {
        uint64_t magic;
        uint64_t gen;
        uint32_t dev_index;
        uint32_t slot;
        uint32_t ncells;
        uint32_t cell_size;
    } __attribute__((aligned(SOFTIB_RING_ALIGN))) id;
    /* Set by a consumer about to sleep; whoever publishes next rings the bell. */
    _Atomic uint32_t   armed __attribute__((aligned(SOFTIB_RING_ALIGN)));
    _Atomic uint64_t   tail  __attribute__((aligned(SOFTIB_RING_ALIGN)));
    softib_ring_cell_t cells[SOFTIB_WIRE_RING_CELLS];
    /* What requesters on this host check to place data directly (softib_direct.h). */
    softib_direct_table_t direct __attribute__((aligned(SOFTIB_RING_ALIGN)));
};

static inline uint32_t softib_ring_lap(uint64_t pos)
{
    return (uint32_t)(pos >> SOFTIB_WIRE_RING_SHIFT);
}

static inline softib_ring_cell_t *softib_ring_cell(softib_ring_t *ring, uint64_t pos)
{
    return &ring->cells[pos & (SOFTIB_WIRE_RING_CELLS - 1)];
}

/* ---------------------------------------------------------------- names */

void softib_wire_shm_names(unsigned dev_index, unsigned slot, uint64_t gen, char *ring, size_t max)
{
    snprintf(ring, max, "/axon-softib%u.%u.%llu", dev_index, slot, (unsigned long long)gen);
}

static int softib_wire_shm_bell_path(const char *ring_name, char *path, size_t max)
{
    int n = snprintf(path, max, "/dev/shm%s.bell", ring_name);

    return ((n > 0) && ((size_t)n < max)) ? 0 : ENAMETOOLONG;
}

void softib_wire_shm_unlink(const char *ring_name)
{
    char bell[SOFTIB_REGISTRY_NAME_LEN + 16];

    /* The name comes from shared memory: unlink only what is ours to unlink. */
    if (strncmp(ring_name, "/axon-softib", 12) != 0 || strchr(ring_name + 1, '/') != NULL) {
        return;
    }
    shm_unlink(ring_name);
    if (softib_wire_shm_bell_path(ring_name, bell, sizeof(bell)) == 0) {
        unlink(bell);
    }
}

/* ---------------------------------------------------------------- receiver */

int softib_wire_shm_create(softib_wire_t *wire)
{
    char           bell[SOFTIB_REGISTRY_NAME_LEN + 16];
    softib_ring_t *ring;
    int            fd, ret;

    softib_wire_shm_names(wire->params.dev_index, wire->slot, wire->gen, wire->ring_name,
                          sizeof(wire->ring_name));
    ret = softib_wire_shm_bell_path(wire->ring_name, bell, sizeof(bell));
    if (ret != 0) {
        return ret;
    }
    /* A claimer that died before publishing may have left these names behind. */
    softib_wire_shm_unlink(wire->ring_name);

    fd = shm_open(wire->ring_name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        ret = errno;
        axon_error("softib: cannot create ring %s: %s", wire->ring_name, strerror(ret));
        return ret;
    }
    /* A fresh segment reads as zeros: every cell FREE for lap 0, tail 0. */
    if (ftruncate(fd, sizeof(softib_ring_t)) != 0) {
        ret = errno;
        axon_error("softib: cannot size ring %s to %zu bytes: %s", wire->ring_name,
                   sizeof(softib_ring_t), strerror(ret));
        goto err_unlink;
    }
    ring = mmap(NULL, sizeof(softib_ring_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (ring == MAP_FAILED) {
        ret = errno;
        axon_error("softib: cannot map ring %s: %s", wire->ring_name, strerror(ret));
        goto err_unlink;
    }
    close(fd);
    fd = -1;
    ring->id.magic     = SOFTIB_RING_MAGIC;
    ring->id.gen       = wire->gen;
    ring->id.dev_index = wire->params.dev_index;
    ring->id.slot      = wire->slot;
    ring->id.ncells    = SOFTIB_WIRE_RING_CELLS;
    ring->id.cell_size = sizeof(softib_ring_cell_t);
    wire->ring         = ring;
    wire->head         = 0;
    axon_proc_self(&wire->self);
    wire->claim_tag    = (uint32_t)(((wire->gen & SOFTIB_CELL_GEN_MASK) << 12) | wire->slot);

    if (mkfifo(bell, 0600) != 0) {
        ret = errno;
        axon_error("softib: cannot create doorbell %s: %s", bell, strerror(ret));
        goto err_unmap;
    }
    /* Read-write: the FIFO always has a writer, so it never reports hang-up. */
    wire->bell_fd = open(bell, O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (wire->bell_fd < 0) {
        ret = errno;
        axon_error("softib: cannot open doorbell %s: %s", bell, strerror(ret));
        goto err_unmap;
    }
    return 0;

err_unmap:
    munmap(ring, sizeof(softib_ring_t));
    wire->ring = NULL;
err_unlink:
    if (fd >= 0) {
        close(fd);
    }
    softib_wire_shm_unlink(wire->ring_name);
    return ret;
}

void softib_wire_shm_destroy(softib_wire_t *wire)
{
    if (wire->ring != NULL) {
        softib_wire_shm_unlink(wire->ring_name);
    }
    softib_wire_shm_forget_ring(wire);
}

void softib_wire_shm_forget_ring(softib_wire_t *wire)
{
    if (wire->ring == NULL) {
        return;
    }
    if (wire->bell_fd >= 0) {
        close(wire->bell_fd);
        wire->bell_fd = -1;
    }
    munmap(wire->ring, sizeof(softib_ring_t));
    wire->ring = NULL;
}

/* Does the producer a claimed cell names still live? */
static int softib_wire_shm_claimer_alive(softib_wire_t *wire, uint32_t tag)
{
    softib_registry_owner_t owner;
    unsigned                slot = tag & 0xfffu;
    uint64_t                gen;
    const char             *why  = "its slot was released";

    if (softib_registry_lookup(wire->reg, slot, &gen, NULL, 0, &owner) == 0) {
        if (((gen & SOFTIB_CELL_GEN_MASK) == (tag >> 12)) &&
            !softib_registry_owner_gone(&owner, &why)) {
            return 1;
        }
        if ((gen & SOFTIB_CELL_GEN_MASK) != (tag >> 12)) {
            why = "its slot changed owner";
        }
    }
    axon_debug("softib: ring %s: skipping a cell claimed by the process of slot %u, which "
               "never published it (%s)", wire->ring_name, slot, why);
    return 0;
}

/*
 * The head cell is claimed, not yet published: a producer is copying, or
 * died doing so. Once it has stayed so for SOFTIB_RING_STUCK_NS and its
 * producer is gone, free the cell and move the head past it (returns 1).
 */
static int softib_wire_shm_skip_stuck(softib_wire_t *wire, softib_ring_cell_t *cell,
                                      uint64_t word)
{
    uint64_t now = axon_sys_time_ns();
    uint32_t lap = softib_ring_lap(wire->head);

    if ((wire->stuck_ns == 0) || (wire->stuck_pos != wire->head)) {
        wire->stuck_pos = wire->head;
        wire->stuck_ns  = now;
        return 0;
    }
    if ((now - wire->stuck_ns) < SOFTIB_RING_STUCK_NS) {
        return 0;
    }
    if (softib_wire_shm_claimer_alive(wire, softib_cell_tag(word))) {
        wire->stuck_ns = now;
        return 0;
    }
    /* If this fails the producer published after all: the caller takes the cell. */
    if (atomic_compare_exchange_strong_explicit(&cell->seq, &word,
                                                softib_cell_word(lap + 1, SOFTIB_CELL_FREE, 0),
                                                memory_order_acq_rel, memory_order_acquire)) {
        ++wire->head;
    }
    wire->stuck_ns = 0;
    return 1;
}

ssize_t softib_wire_shm_peek(softib_wire_t *wire, const uint8_t **pkt_p, axon_dev_gid_t *src_gid)
{
    softib_ring_cell_t *cell;
    uint64_t            word;
    uint32_t            lap, len;

    for (;;) {
        cell = softib_ring_cell(wire->ring, wire->head);
        lap  = softib_ring_lap(wire->head);
        /* Acquire pairs with the producer's release: the payload is complete. */
        word = atomic_load_explicit(&cell->seq, memory_order_acquire);
        if ((softib_cell_lap(word) != lap) || (softib_cell_state(word) == SOFTIB_CELL_FREE)) {
            return 0;
        }
        if (softib_cell_state(word) == SOFTIB_CELL_CLAIMED) {
            if (!softib_wire_shm_skip_stuck(wire, cell, word)) {
                return 0;
            }
            continue;
        }

        wire->stuck_ns = 0;
        len            = cell->len;
        if ((len > 0) && (len <= SOFTIB_WIRE_MAX_PKT)) {
            /* read in place: the cell stays ours until softib_wire_shm_release */
            *pkt_p        = cell->data;
            *src_gid      = cell->src_gid;
            wire->holding = 1;
            return (ssize_t)len;
        }
        softib_wire_shm_release(wire);
        axon_debug("softib: ring %s: dropping a cell claiming %u bytes", wire->ring_name, len);
    }
}

void softib_wire_shm_release(softib_wire_t *wire)
{
    softib_ring_cell_t *cell = softib_ring_cell(wire->ring, wire->head);

    /* Release: we are done reading before producers of the next lap may write. */
    atomic_store_explicit(&cell->seq,
                          softib_cell_word(softib_ring_lap(wire->head) + 1, SOFTIB_CELL_FREE, 0),
                          memory_order_release);
    ++wire->head;
    wire->holding = 0;
}

int softib_wire_shm_pending(softib_wire_t *wire)
{
    softib_ring_cell_t *cell = softib_ring_cell(wire->ring, wire->head);
    uint64_t            word = atomic_load_explicit(&cell->seq, memory_order_acquire);

    /* A claimed head is pending too: being filled, or stuck until recv skips it. */
    return (softib_cell_lap(word) == softib_ring_lap(wire->head)) &&
           (softib_cell_state(word) != SOFTIB_CELL_FREE);
}

void softib_wire_shm_arm(softib_wire_t *wire)
{
    atomic_store_explicit(&wire->ring->armed, 1, memory_order_relaxed);
    /* Pairs with the producer's fence: it sees armed, or we see its cell. */
    atomic_thread_fence(memory_order_seq_cst);
}

void softib_wire_shm_disarm(softib_wire_t *wire)
{
    char    drain[64];
    ssize_t n;

    atomic_store_explicit(&wire->ring->armed, 0, memory_order_relaxed);
    do {
        n = read(wire->bell_fd, drain, sizeof(drain));
    } while ((n > 0) || ((n < 0) && (errno == EINTR)));
}

/* ---------------------------------------------------------------- senders */

static void softib_wire_shm_peer_unmap(softib_wire_t *wire, softib_wire_peer_t *peer)
{
    if (peer->ring != NULL) {
        munmap(peer->ring, sizeof(softib_ring_t));
        peer->ring = NULL;
        --wire->num_mapped;
        if (peer->bell_fd >= 0) {
            close(peer->bell_fd);
        }
    }
    peer->bell_fd = -1;
    peer->gen  = 0;
    peer->gone = 0;
    peer->pid  = 0;
}

void softib_wire_shm_forget_peers(softib_wire_t *wire)
{
    unsigned slot;

    if (wire->peers == NULL) {
        return;
    }
    for (slot = 0; slot < wire->peers_end; ++slot) {
        softib_wire_shm_peer_unmap(wire, &wire->peers[slot]);
    }
}

/*
 * Unmap the rings of slots whose owner is gone (reaped, or dead and not yet
 * reaped): each mapping keeps a dead owner's ring (~1 MiB, the pages we
 * wrote resident) and its doorbell open, and a long job outlives many
 * peers. At most once per SOFTIB_WIRE_SWEEP_NS: a load per slot, and for
 * a mapped one a look at its owner in /proc.
 */
void softib_wire_shm_sweep(softib_wire_t *wire, uint64_t now_ns)
{
    softib_registry_owner_t owner;
    softib_wire_peer_t     *peer;
    const char             *why;
    uint64_t                gen;
    unsigned                slot;

    if ((wire->num_mapped == 0) || ((now_ns - wire->sweep_ns) < SOFTIB_WIRE_SWEEP_NS)) {
        return;   /* nothing mapped (peers may be NULL), or looked lately */
    }
    wire->sweep_ns = now_ns;
    for (slot = SOFTIB_REGISTRY_SLOT_MIN; slot < wire->peers_end; ++slot) {
        peer = &wire->peers[slot];
        if (peer->gen == 0) {
            continue;
        }
        if ((softib_registry_lookup(wire->reg, slot, &gen, NULL, 0, &owner) != 0) ||
            (gen != peer->gen) || softib_registry_owner_gone(&owner, &why)) {
            axon_debug("softib: slot %u's owner is gone: its ring unmapped", slot);
            softib_wire_shm_peer_unmap(wire, peer);
        }
    }
}

/* Slow path: map the ring of the slot's current owner (generation gen). */
static int softib_wire_shm_peer_map(softib_wire_t *wire, unsigned slot,
                                    softib_wire_peer_t *peer)
{
    char           name[SOFTIB_REGISTRY_NAME_LEN];
    softib_registry_owner_t owner;
    struct stat    st;
    softib_ring_t *ring;
    uint64_t       now_gen;
    int            fd;

    softib_wire_shm_peer_unmap(wire, peer);
    if (softib_registry_lookup(wire->reg, slot, &now_gen, name, sizeof(name), &owner) != 0) {
        return ENOENT;
    }
    fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) {
        axon_debug("softib: cannot open ring %s of slot %u: %m", name, slot);
        return ENOENT;
    }
    if ((fstat(fd, &st) != 0) || ((size_t)st.st_size < sizeof(softib_ring_t))) {
        axon_debug("softib: ring %s of slot %u is too small", name, slot);
        close(fd);
        return ENOENT;
    }
    ring = mmap(NULL, sizeof(softib_ring_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (ring == MAP_FAILED) {
        axon_debug("softib: cannot map ring %s of slot %u: %m", name, slot);
        return ENOENT;
    }
    if ((ring->id.magic != SOFTIB_RING_MAGIC) || (ring->id.gen != now_gen) ||
        (ring->id.slot != slot) || (ring->id.ncells != SOFTIB_WIRE_RING_CELLS) ||
        (ring->id.cell_size != sizeof(softib_ring_cell_t))) {
        axon_debug("softib: ring %s does not belong to slot %u generation %llu", name, slot,
                   (unsigned long long)now_gen);
        munmap(ring, sizeof(softib_ring_t));
        return ENOENT;
    }
    peer->ring    = ring;
    peer->bell_fd = -1;
    peer->gen     = now_gen;
    peer->pid     = axon_proc_comparable(&owner, &wire->self) ? owner.pid : 0;
    ++wire->num_mapped;
    if (slot >= wire->peers_end) {
        wire->peers_end = slot + 1;
    }
    return 0;
}

static void softib_wire_shm_ring_bell(softib_wire_peer_t *peer)
{
    char    bell[SOFTIB_REGISTRY_NAME_LEN + 16];
    char    name[SOFTIB_REGISTRY_NAME_LEN];
    char    byte = 1;
    ssize_t n;

    if (peer->bell_fd < 0) {
        softib_wire_shm_names(peer->ring->id.dev_index, peer->ring->id.slot, peer->ring->id.gen,
                              name, sizeof(name));
        if (softib_wire_shm_bell_path(name, bell, sizeof(bell)) != 0) {
            return;
        }
        /* Read-write (Linux semantics for a FIFO): we count as a reader, so
         * ringing the bell of a peer that died is no EPIPE and no SIGPIPE. */
        peer->bell_fd = open(bell, O_RDWR | O_NONBLOCK | O_CLOEXEC);
        if (peer->bell_fd < 0) {
            axon_debug("softib: cannot open doorbell %s: %m", bell);
            return;
        }
    }
    /* EAGAIN: the FIFO is full, so it is readable already. */
    do {
        n = write(peer->bell_fd, &byte, 1);
    } while ((n < 0) && (errno == EINTR));
}

/*
 * A full ring: EAGAIN, unless its owner died without anybody reaping its slot
 * yet (then the packet is lost, as to any dead port). Checked at most every
 * SOFTIB_RING_FULL_NS per destination: it reads /proc.
 */
static int softib_wire_shm_full(softib_wire_t *wire, unsigned slot, softib_wire_peer_t *peer)
{
    softib_registry_owner_t owner;
    uint64_t                now = axon_sys_time_ns();
    uint64_t                gen;
    const char             *why;

    if (peer->gone) {
        return 0;
    }
    if ((now - peer->full_ns) < SOFTIB_RING_FULL_NS) {
        return EAGAIN;
    }
    peer->full_ns = now;
    if ((softib_registry_lookup(wire->reg, slot, &gen, NULL, 0, &owner) == 0) &&
        (gen == peer->gen) && !softib_registry_owner_gone(&owner, &why)) {
        return EAGAIN;
    }
    /* Every later packet to it is lost at once, not only one per check */
    axon_debug("softib: ring of slot %u is full and its owner is gone: dropping", slot);
    peer->gone = 1;
    return 0;
}

int softib_wire_shm_send(softib_wire_t *wire, unsigned slot, const softib_wire_pkt_t *pkt)
{
    softib_wire_peer_t *peer = &wire->peers[slot];
    softib_ring_cell_t *cell;
    softib_ring_t      *ring;
    uint64_t            gen, word, claimed;
    uint32_t            lap;

    /* One shared load per packet tells whether our mapping is still the slot's owner. */
    gen = softib_registry_gen(wire->reg, slot);
    if (!(gen & 1)) {
        if (peer->gen != 0) {
            softib_wire_shm_peer_unmap(wire, peer);
        }
        return 0;  /* nobody there: lost, as on a real fabric */
    }
    if ((gen != peer->gen) && (softib_wire_shm_peer_map(wire, slot, peer) != 0)) {
        return 0;
    }
    ring    = peer->ring;
    claimed = softib_cell_word(0, SOFTIB_CELL_CLAIMED, wire->claim_tag);
    if (softib_ring_claim(&ring->tail, ring->cells, SOFTIB_WIRE_RING_SHIFT, wire->claim_tag,
                          &cell, &lap) != 0) {
        return softib_wire_shm_full(wire, slot, peer);
    }

    memcpy(cell->data, pkt->hdr, pkt->hlen);
    if (pkt->paylen != 0) {
        /* registered memory read in place: unmapped meanwhile, it goes as zeros */
        (void)softib_guard_copy(cell->data + pkt->hlen, pkt->pay, pkt->paylen, 1);
    }
    cell->len     = (uint32_t)(pkt->hlen + pkt->paylen);
    cell->src_gid = wire->gid;
    word          = claimed | ((uint64_t)lap << 32);
    /* Release: the payload before the cell. Fails only if the consumer thought us dead. */
    if (!atomic_compare_exchange_strong_explicit(&cell->seq, &word,
                                                 softib_cell_word(lap, SOFTIB_CELL_PUBLISHED,
                                                                  wire->claim_tag),
                                                 memory_order_release, memory_order_relaxed)) {
        return 0;
    }
    /* Pairs with softib_wire_shm_arm(): we see armed, or the consumer sees our cell. */
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&ring->armed, memory_order_relaxed) &&
        atomic_exchange_explicit(&ring->armed, 0, memory_order_relaxed)) {
        softib_wire_shm_ring_bell(peer);
    }
    return 0;
}

/* ---------------------------------------------------------------- direct placement */

softib_direct_table_t *softib_wire_shm_direct_table(softib_wire_t *wire)
{
    return (wire->ring != NULL) ? &wire->ring->direct : NULL;
}

int softib_wire_shm_direct_peer(softib_wire_t *wire, unsigned slot,
                                softib_direct_table_t **table_p, pid_t *pid_p)
{
    softib_wire_peer_t *peer = &wire->peers[slot];
    uint64_t            gen  = softib_registry_gen(wire->reg, slot);

    if (!(gen & 1) ||
        ((gen != peer->gen) && (softib_wire_shm_peer_map(wire, slot, peer) != 0)) ||
        peer->gone || (peer->pid == 0)) {
        return ENOENT;
    }
    *table_p = &peer->ring->direct;
    *pid_p   = peer->pid;
    return 0;
}
