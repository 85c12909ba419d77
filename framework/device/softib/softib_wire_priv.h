/*
 * Inside softib's wire: the state shared by its files — softib_wire.c
 * (open/close, routing), softib_wire_shm.c (rings and doorbells),
 * softib_wire_udp.c (sockets), softib_wire_inject.c (loss, dup, reorder).
 */
#ifndef SOFTIB_WIRE_PRIV_H
#define SOFTIB_WIRE_PRIV_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>
#include "softib_wire.h"
#include "softib_registry.h"
#include "list.h"
#include "sys.h"

/* Cells per receive ring (power of two): ~1 MiB of shared memory per slot. */
#define SOFTIB_WIRE_RING_SHIFT     8
#define SOFTIB_WIRE_RING_CELLS     (1u << SOFTIB_WIRE_RING_SHIFT)
#define SOFTIB_WIRE_SWEEP_NS       1000000000ull  /* 1 s: look for mapped rings of gone owners */

/* Packets reorder injection may hold back at once, and for how long at most. */
#define SOFTIB_WIRE_HOLD_MAX       4
#define SOFTIB_WIRE_HOLD_NS        200000ull

/* UDP ports of device N start at base + N * this (device 0: base + slot, as documented). */
#define SOFTIB_WIRE_PORTS_PER_DEV  4096u

#define SOFTIB_WIRE_SOCKBUF        (4u << 20)

/* An idle UDP socket is read every this many receives; after a datagram, on
 * every receive until this many found it empty. */
#define SOFTIB_WIRE_UDP_COLD       64u
#define SOFTIB_WIRE_UDP_HOT        4096u

typedef struct softib_ring softib_ring_t;   /* a receive ring in shared memory */

/* A destination slot's ring as a sender maps it (one per slot, filled lazily). */
typedef struct softib_wire_peer {
    uint64_t       gen;      /* registry generation mapped; 0 = nothing mapped */
    softib_ring_t *ring;
    int            bell_fd;  /* while ring is mapped: its doorbell's write end, -1 until first rung */
    uint64_t       full_ns;  /* when its ring was last checked for a dead owner */
    int            gone;     /* its ring was full and its owner found dead: drop */
    pid_t          pid;      /* its owner, when our pid namespace names it; else 0 */
} softib_wire_peer_t;

/* A packet held back by reorder injection. */
typedef struct softib_wire_held {
    uint64_t       due_ns;
    axon_dev_gid_t dgid;
    uint32_t       dest_qpn;
    uint32_t       len;
    uint8_t       *data;     /* SOFTIB_WIRE_MAX_PKT bytes, preallocated */
} softib_wire_held_t;

typedef struct softib_wire_inject {
    int                enabled;
    uint64_t           rng;
    uint64_t           loss, dup, reorder;  /* thresholds on a 64-bit random number */
    unsigned           nheld;
    softib_wire_held_t held[SOFTIB_WIRE_HOLD_MAX];
    uint8_t           *buffers;
} softib_wire_inject_t;

struct softib_wire {
    softib_wire_params_t params;
    axon_dev_gid_t       gid;
    softib_registry_t   *reg;
    unsigned             slot;
    uint64_t             gen;             /* our registry generation */

    /* shm, receive side */
    softib_ring_t       *ring;
    char                 ring_name[SOFTIB_REGISTRY_NAME_LEN];
    int                  bell_fd;         /* our doorbell, read end (opened O_RDWR) */
    uint64_t             head;            /* next position to consume */
    uint64_t             stuck_ns;        /* when the head cell was first seen claimed */
    int                  holding;         /* the head cell is being read in place */
    uint64_t             stuck_pos;

    /* shm, send side */
    softib_wire_peer_t  *peers;           /* indexed by slot; zeros until mapped */
    unsigned             peers_end;       /* 1 + the highest slot ever mapped: scans stop there */
    uint64_t             claim_tag;       /* our (generation, slot) as claimed cells show it */
    uint64_t             sweep_ns;        /* when mapped rings were last checked for owners */
    unsigned             num_mapped;      /* peers whose ring we map */

    int                  udp_fd;          /* -1 in shm mode */
    unsigned             udp_hot;         /* receives left that read the socket each time */
    unsigned             udp_skip;        /* receives since the socket was last read (cold) */
    int                  epoll_fd;
    softib_wire_inject_t inject;

    axon_list_link_t     list;            /* in the exit sweep's list */
    axon_proc_t          self;            /* this process, to compare ring owners with */
    pid_t                owner_pid;       /* 0 once the exit sweep unlinked our segments */
    pid_t                creator_pid;     /* a forked child's close must not free our slot */
};

/* shm wire (softib_wire_shm.c) */
void     softib_wire_shm_names(unsigned dev_index, unsigned slot, uint64_t gen,
                               char *ring, size_t max);
void     softib_wire_shm_unlink(const char *ring_name);
int      softib_wire_shm_create(softib_wire_t *wire);
void     softib_wire_shm_destroy(softib_wire_t *wire);
void     softib_wire_shm_forget_ring(softib_wire_t *wire);   /* unmap, keep the names */
void     softib_wire_shm_forget_peers(softib_wire_t *wire);
void     softib_wire_shm_sweep(softib_wire_t *wire, uint64_t now_ns);
int      softib_wire_shm_send(softib_wire_t *wire, unsigned slot, const softib_wire_pkt_t *pkt);
softib_direct_table_t *softib_wire_shm_direct_table(softib_wire_t *wire);
int      softib_wire_shm_direct_peer(softib_wire_t *wire, unsigned slot,
                                     softib_direct_table_t **table_p, pid_t *pid_p);
/* The head packet, read in place in its cell (*pkt_p), which stays ours until released */
ssize_t  softib_wire_shm_peek(softib_wire_t *wire, const uint8_t **pkt_p,
                              axon_dev_gid_t *src_gid);
void     softib_wire_shm_release(softib_wire_t *wire);
int      softib_wire_shm_pending(softib_wire_t *wire);
void     softib_wire_shm_arm(softib_wire_t *wire);
void     softib_wire_shm_disarm(softib_wire_t *wire);

/* UDP wire (softib_wire_udp.c) */
int      softib_wire_udp_open(softib_wire_t *wire);
void     softib_wire_udp_close(softib_wire_t *wire);
int      softib_wire_udp_send(softib_wire_t *wire, uint32_t ipv4_addr, unsigned slot,
                              const softib_wire_pkt_t *pkt);
ssize_t  softib_wire_udp_recv(softib_wire_t *wire, void *buf, axon_dev_gid_t *src_gid);

/* Routing and the actual send, past injection (softib_wire.c) */
int      softib_wire_send_now(softib_wire_t *wire, const axon_dev_gid_t *dgid,
                              uint32_t dest_qpn, const softib_wire_pkt_t *pkt);

/* Fault injection (softib_wire_inject.c) */
int      softib_wire_inject_init(softib_wire_inject_t *inject, const softib_wire_params_t *params);
void     softib_wire_inject_cleanup(softib_wire_inject_t *inject);
int      softib_wire_inject_send(softib_wire_t *wire, const axon_dev_gid_t *dgid,
                                 uint32_t dest_qpn, const softib_wire_pkt_t *pkt);
void     softib_wire_inject_progress(softib_wire_t *wire, int force);

/* GID helpers */
void     softib_wire_gid_from_ipv4(uint32_t ipv4_addr, axon_dev_gid_t *gid);
int      softib_wire_gid_to_ipv4(const axon_dev_gid_t *gid, uint32_t *ipv4_addr);

#endif
