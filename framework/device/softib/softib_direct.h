/*
 * Direct placement: an RC requester on this host moves the data of an RDMA
 * WRITE or READ itself, by cross-memory attach into (or out of) the
 * responder's process, as a NIC does without the responder's CPU. Without
 * it a write landed only when the responder's process next ran the engine,
 * so a consumer that waits for the data by reading memory (perftest's
 * ib_write_lat, SHMEM's wait_until) waited for softib's progress thread,
 * ~1 ms a write.
 *
 * Each slot publishes what a requester must check in a table beside its
 * receive ring: its RC QPs that accept requests (state, PD, access flags)
 * and its registered memory that allows remote access (key, PD, range,
 * rights). The requester checks there exactly what the responder would;
 * whatever it cannot decide (an indirect key, a QP or key not published, a
 * refused system call) goes by packets as before, which report errors as
 * the responder finds them.
 *
 * Ordering: a WQE is placed directly only when nothing before it on its QP
 * is unacknowledged, so the responder has executed everything sent before;
 * what is posted after it goes out after its data is in place. It takes no
 * PSN, so the responder's sequence is untouched.
 *
 * Deregistration: a requester counts itself into the region's users before
 * it checks the key and out after the copy; a region being deregistered
 * loses its key first, then its owner waits for the users to leave, so no
 * copy lands after dereg_mr returns.
 */
#ifndef SOFTIB_DIRECT_H
#define SOFTIB_DIRECT_H

#include <stdint.h>
#include "softib_wire.h"

#ifdef __cplusplus
extern "C" {
#else   /* the tables: C only (tests read the count below) */
#include <stdatomic.h>

/* MR table entries: as many as the device's key table (index = key >> 8). */
#define SOFTIB_DIRECT_MRS  16384
#define SOFTIB_DIRECT_QPS  (SOFTIB_QPN_MAX_INDEX + 1)
/* Silence this long says the responder does not run its engine (its progress thread
 * stands back 1 ms); then direct placement for this long. */
#define SOFTIB_DIRECT_SLOW_NS  500000ull
#define SOFTIB_DIRECT_HOLD_NS  50000000ull
/* Late answers in a row it takes: one alone is as likely a preempted process (either
 * side, on a busy host), and a responder that polls is cheaper to reach by packets. */
#define SOFTIB_DIRECT_LATE_ANSWERS 2

typedef struct softib_direct_mr {
    _Atomic uint32_t key;      /* its rkey; 0 while none is published here */
    _Atomic uint32_t users;    /* requesters inside a check or a copy */
    uint32_t         pd;       /* PD handle */
    uint32_t         access;   /* AXON_DEV_ACCESS_* */
    uint64_t         addr;
    uint64_t         length;
} softib_direct_mr_t;

typedef struct softib_direct_qp {
    _Atomic uint32_t qpn;      /* the QP's number while it accepts requests; 0 otherwise */
    uint32_t         pd;
    uint32_t         access;   /* qp_access_flags */
    uint32_t         peer_qpn; /* the requester it is connected to: no other is answered */
    uint32_t         max_dest_rd_atomic;   /* 0: reads are refused */
    uint32_t         reserved;
} softib_direct_qp_t;

/* Lives in the slot's ring segment (softib_wire_shm.c): zeros when created. */
struct softib_direct_table {
    softib_direct_qp_t qps[SOFTIB_DIRECT_QPS];
    softib_direct_mr_t mrs[SOFTIB_DIRECT_MRS];
};

#endif

struct softib_dev;
struct softib_mr;
struct softib_qp;
struct softib_send_wqe;

/* Registration: publish mr if it is plain memory with remote rights; dereg first unpublishes
 * (and waits for the requesters inside it). */
void softib_direct_mr_publish(struct softib_dev *dev, const struct softib_mr *mr);
void softib_direct_mr_unpublish(struct softib_dev *dev, const struct softib_mr *mr);
/* After every QP state change and at destroy: published while an RC QP accepts requests. */
void softib_direct_qp_update(struct softib_qp *qp, int destroyed);
/*
 * The responder answered qp at now (an ACK or a response that moved). A
 * polling responder answers within microseconds and its requester keeps
 * sending packets (cheaper than a system call each); one that stayed silent
 * for SOFTIB_DIRECT_SLOW_NS while something was outstanding, twice in a row
 * (it computes, sleeps, or waits on memory) gets the QP's eligible writes and reads placed
 * directly for SOFTIB_DIRECT_HOLD_NS, then packets are tried again. Silence,
 * not a WQE's age: a deep queue of large transfers to a prompt responder
 * keeps the answers coming.
 */
void softib_direct_note_answer(struct softib_qp *qp, uint64_t now);
/* Place wqe (next for the requester) directly and complete it: 1, or 0 to send packets. */
int  softib_direct_try(struct softib_qp *qp, struct softib_send_wqe *wqe);
/* WQEs placed directly by this process, all devices (for tests). */
uint64_t softib_direct_count(void);

#ifdef __cplusplus
}
#endif

#endif
