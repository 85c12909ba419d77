/*
 * softib's wire: moves whole packets (datagrams of at most
 * SOFTIB_WIRE_MAX_PKT bytes) between softib ports in different processes.
 * Unreliable by design — the RC engine above it supplies reliability — and,
 * for tests, lossy on purpose when configured (loss, duplication, reordering).
 *
 * Addressing. Every process that opens softib device N takes a slot on that
 * device from a host-wide registry (shared memory, reaped when a process
 * dies). A QP number carries its slot (SOFTIB_QPN_SLOT), so a packet is
 * routed by (destination GID, destination QPN):
 *   - GID index 0 of the port is the IPv4-mapped IPv6 address (::ffff:a.b.c.d)
 *     of the device's IP address (AXON_SOFTIB_ADDR, auto by default);
 *   - same GID as ours  -> shm wire: the slot's receive ring in shared memory;
 *   - another GID       -> UDP wire: to a.b.c.d, port AXON_SOFTIB_UDP_PORT + slot
 *                          (device N > 0: AXON_SOFTIB_UDP_PORT + N * 4096 + slot, so that
 *                          two devices of one process never share a port).
 * AXON_SOFTIB_WIRE=shm|udp forces one wire (udp: even for local peers).
 *
 * Threading: send may be called by the consumer and by the progress thread,
 * under the device lock of the caller; the wire itself is not locked.
 */
#ifndef SOFTIB_WIRE_H
#define SOFTIB_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "dev.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest packet: a 4096-byte MTU payload plus headers. */
#define SOFTIB_WIRE_MAX_PKT    (4096 + 128)

/* QP numbers: 24 bits = slot (12 bits, 1..4094 usable) | index (12 bits, 1..4095) */
#define SOFTIB_QPN_INDEX_BITS  12
#define SOFTIB_QPN_MAX_SLOTS   4095
#define SOFTIB_QPN_MAX_INDEX   ((1u << SOFTIB_QPN_INDEX_BITS) - 1)
#define SOFTIB_QPN_SLOT(_qpn)  (((_qpn) >> SOFTIB_QPN_INDEX_BITS) & 0xfffu)
#define SOFTIB_QPN_INDEX(_qpn) ((_qpn) & SOFTIB_QPN_MAX_INDEX)
#define SOFTIB_QPN_MAKE(_slot, _index) \
    ((((uint32_t)(_slot)) << SOFTIB_QPN_INDEX_BITS) | ((uint32_t)(_index)))

typedef enum {
    SOFTIB_WIRE_AUTO = 0,
    SOFTIB_WIRE_SHM,
    SOFTIB_WIRE_UDP,
} softib_wire_mode_t;

typedef struct softib_wire_params {
    unsigned           dev_index;      /* N of softibN: separate registry per device */
    softib_wire_mode_t mode;
    uint32_t           ipv4_addr;      /* network order (0: 127.0.0.1); the GID derives from it */
    unsigned           udp_port_base;  /* UDP port = base + slot */
    /* Fault injection, probabilities in [0,1] applied per packet sent */
    double             loss;
    double             dup;
    double             reorder;        /* packet held back and sent after later ones */
    unsigned           seed;           /* 0: seeded from pid and time */
} softib_wire_params_t;

typedef struct softib_wire softib_wire_t;

/* Take a slot and open both wires. Errors: errno values (EADDRINUSE, ENOSPC...). */
int      softib_wire_open(const softib_wire_params_t *params, softib_wire_t **wire_p);
void     softib_wire_close(softib_wire_t *wire);

/* This process's slot on the device (goes into every QP number it creates). */
unsigned softib_wire_slot(const softib_wire_t *wire);
/* Where this process numbers its next QP: its slot's former owners' next (registry). */
uint32_t softib_wire_next_qp_index(const softib_wire_t *wire);
void     softib_wire_set_next_qp_index(softib_wire_t *wire, uint32_t index);
/* GID index 0 of the port. */
void     softib_wire_gid(const softib_wire_t *wire, axon_dev_gid_t *gid);
/*
 * Which process holds the slot of qpn at gid now: its registry generation
 * when gid is this host's, else 0 (unknown). A dead process's slot goes to
 * the next one with its QP numbers, so a changed generation tells a QP
 * number's new owner from the old one.
 */
uint64_t softib_wire_owner_gen(const softib_wire_t *wire, const axon_dev_gid_t *gid,
                               uint32_t qpn);
/* Does the process that held slot at registry generation gen still hold it? (of
 * whichever host shares this /dev/shm: multicast members of other network
 * namespaces). The generation only, or (check_owner) whether its owner lives too:
 * a killed process keeps its slot until the next device open reaps it. */
int      softib_wire_slot_held(const softib_wire_t *wire, unsigned slot, uint64_t gen,
                               int check_owner);

/*
 * Send one packet to the port that owns dest_qpn at dgid. Returns 0 when the
 * packet left (or was dropped on purpose by injection, or the destination
 * does not exist — the wire is unreliable), EAGAIN when the destination ring
 * is full (retry later; nothing sent), EINVAL for len > SOFTIB_WIRE_MAX_PKT
 * (or 0) or an unroutable address (logged). The UDP wire never says EAGAIN:
 * a full socket buffer is a lost packet.
 */
int      softib_wire_send(softib_wire_t *wire, const axon_dev_gid_t *dgid, uint32_t dest_qpn,
                          const void *pkt, size_t len);

/* A packet in two pieces: its headers, then a payload read where it lies (the shm wire
 * copies it once, into the ring, instead of through a staging buffer). */
typedef struct softib_wire_pkt {
    const void *hdr;
    size_t      hlen;
    const void *pay;       /* NULL when paylen is 0 */
    size_t      paylen;
} softib_wire_pkt_t;

/* softib_wire_send of the packet hdr + pay. */
int      softib_wire_sendv(softib_wire_t *wire, const axon_dev_gid_t *dgid, uint32_t dest_qpn,
                           const softib_wire_pkt_t *pkt);

/*
 * Direct placement (softib_direct.h). This port's table, NULL off the shm
 * wire. The table and process of whoever owns dest_qpn's slot at dgid: 0, or
 * ENOENT when direct placement cannot reach it (another host or the UDP
 * wire, fault injection on, no such slot, a process whose memory we cannot
 * name by pid).
 */
typedef struct softib_direct_table softib_direct_table_t;
softib_direct_table_t *softib_wire_direct_table(softib_wire_t *wire);
int      softib_wire_direct_peer(softib_wire_t *wire, const axon_dev_gid_t *dgid,
                                 uint32_t dest_qpn, softib_direct_table_t **table_p,
                                 pid_t *pid_p);

/*
 * Receive one packet; returns its length, 0 when none is waiting, or
 * -errno. *pkt_p is where it is: in place on the shared-memory ring (no
 * copy), or in buf (SOFTIB_WIRE_MAX_PKT bytes) from UDP; valid until
 * softib_wire_recv_done, which must come before the next receive.
 * src_gid is where it came from.
 */
ssize_t  softib_wire_recv(softib_wire_t *wire, void *buf, const uint8_t **pkt_p,
                          axon_dev_gid_t *src_gid);
void     softib_wire_recv_done(softib_wire_t *wire);

/*
 * Release packets held back by reorder injection that are due, and (once a
 * second) let go of the rings of peers that are gone; cheap.
 */
void     softib_wire_progress(softib_wire_t *wire, uint64_t now_ns);
/*
 * When softib_wire_progress next has work (CLOCK_MONOTONIC, ns), or 0 when
 * nothing is held: a sleeping progress thread bounds its sleep by it.
 */
uint64_t softib_wire_next_due_ns(const softib_wire_t *wire);

/*
 * For a thread that sleeps until packets arrive: a pollable fd that becomes
 * readable when a packet may be waiting on either wire. Before sleeping call
 * softib_wire_arm(): it returns nonzero if packets are already waiting (do
 * not sleep). After waking call softib_wire_disarm() (drains the doorbell).
 */
int      softib_wire_fd(const softib_wire_t *wire);
int      softib_wire_arm(softib_wire_t *wire);
void     softib_wire_disarm(softib_wire_t *wire);

#ifdef __cplusplus
}
#endif

#endif
