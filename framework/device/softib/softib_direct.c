/*
 * Direct placement of RDMA WRITE and READ data on one host (softib_direct.h):
 * the tables a slot publishes, and the requester's side, which checks them
 * as the responder would and moves the data with process_vm_writev/readv.
 */
#define _GNU_SOURCE
#include "axon_config.h"
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/uio.h>
#ifdef HAVE_VALGRIND_H
#include <valgrind/valgrind.h>
#endif
#include "log.h"
#include "softib.h"
#include "softib_direct.h"

_Static_assert(SOFTIB_DIRECT_MRS == SOFTIB_MR_TABLE_SIZE, "one entry per key index");

/* Users leave a region within one copy; one still inside after this died there. */
#define SOFTIB_DIRECT_LEAVE_NS 2000000000ull

/*
 * Our table, NULL when we publish nothing: direct placement off, or memcheck
 * running us (it cannot see another process write our memory, and would call
 * what lands there undefined; our own engine's copies it follows).
 */
static softib_direct_table_t *softib_direct_local(softib_dev_t *dev)
{
#ifdef HAVE_VALGRIND_H
    if (RUNNING_ON_VALGRIND) {
        return NULL;
    }
#endif
    return (dev->opts.direct && (dev->wire != NULL)) ? softib_wire_direct_table(dev->wire) : NULL;
}

/* ---------------------------------------------------------------- the responder's side */

void softib_direct_mr_publish(softib_dev_t *dev, const softib_mr_t *mr)
{
    softib_direct_table_t *table = softib_direct_local(dev);
    softib_direct_mr_t *entry;

    if ((table == NULL) || (mr->umr != NULL) || (mr->index >= SOFTIB_DIRECT_MRS) ||
        !(mr->super.access & (AXON_DEV_ACCESS_REMOTE_WRITE | AXON_DEV_ACCESS_REMOTE_READ))) {
        return;   /* nothing a requester may reach by itself: its packets go as before */
    }
    entry         = &table->mrs[mr->index];
    entry->pd     = mr->super.pd->handle;
    entry->access = (uint32_t)mr->super.access;
    entry->addr   = (uintptr_t)mr->super.addr;
    entry->length = mr->super.length;
    atomic_store_explicit(&entry->key, mr->super.rkey, memory_order_release);
}

void softib_direct_mr_unpublish(softib_dev_t *dev, const softib_mr_t *mr)
{
    softib_direct_table_t *table = softib_direct_local(dev);
    softib_direct_mr_t *entry;
    uint64_t start;

    if ((table == NULL) || (mr->index >= SOFTIB_DIRECT_MRS) ||
        (atomic_load(&table->mrs[mr->index].key) != mr->super.rkey)) {
        return;
    }
    entry = &table->mrs[mr->index];
    /* Key first: a requester counted in after this finds no key; then the ones inside leave. */
    atomic_store(&entry->key, 0);
    start = axon_sys_time_ns();
    while (atomic_load(&entry->users) != 0) {
        if (axon_sys_time_ns() - start > SOFTIB_DIRECT_LEAVE_NS) {
            axon_warn("softib: MR 0x%x: a requester entered it %.0f s ago and never left "
                      "(died inside a copy): deregistered without it", mr->super.rkey,
                      SOFTIB_DIRECT_LEAVE_NS * 1e-9);
            atomic_store(&entry->users, 0);
            break;
        }
        sched_yield();
    }
}

void softib_direct_qp_update(softib_qp_t *qp, int destroyed)
{
    softib_direct_table_t *table = softib_direct_local(softib_qp_dev(qp));
    softib_direct_qp_t *entry;

    if ((table == NULL) || (qp->super.qp_type != AXON_DEV_QPT_RC)) {
        return;
    }
    entry = &table->qps[SOFTIB_QPN_INDEX(qp->super.qp_num)];
    /* Unpublished while it changes: a requester never reads half an update. */
    atomic_store(&entry->qpn, 0);
    if (destroyed || !softib_qp_can_recv(qp)) {
        return;
    }
    entry->pd       = qp->super.pd->handle;
    entry->access   = (uint32_t)qp->attr.qp_access_flags;
    entry->peer_qpn = qp->attr.dest_qp_num;
    entry->max_dest_rd_atomic = qp->attr.max_dest_rd_atomic;
    atomic_store_explicit(&entry->qpn, qp->super.qp_num, memory_order_release);
}

/* ---------------------------------------------------------------- the requester's side */

static uint64_t softib_direct_placed;

uint64_t softib_direct_count(void)
{
    return __atomic_load_n(&softib_direct_placed, __ATOMIC_RELAXED);
}

void softib_direct_note_answer(softib_qp_t *qp, uint64_t now)
{
    const softib_dev_t *dev = softib_qp_dev(qp);

    if (qp->comp.wait_ns == 0) {
        /* nothing was outstanding: says nothing of the responder */
    } else if ((int64_t)(now - qp->comp.wait_ns) <= (int64_t)SOFTIB_DIRECT_SLOW_NS) {
        qp->direct_late = 0;
    } else if ((++qp->direct_late >= SOFTIB_DIRECT_LATE_ANSWERS) &&
               (qp->super.qp_type == AXON_DEV_QPT_RC) && dev->opts.direct && !qp->direct_off) {
        if (qp->direct_until < now) {
            axon_debug("softib: QP 0x%x: its responder was silent %.0f us: writes and reads "
                       "placed directly for %.0f ms", qp->super.qp_num,
                       (now - qp->comp.wait_ns) * 1e-3, SOFTIB_DIRECT_HOLD_NS * 1e-6);
        }
        qp->direct_until = now + SOFTIB_DIRECT_HOLD_NS;
    }
    qp->comp.wait_ns = (qp->sq_head == qp->sq_started) ? 0 : now;
}

/* Nothing of qp's before wqe is unacknowledged: the responder executed all it was sent. */
static int softib_direct_qp_idle(const softib_qp_t *qp)
{
    return (qp->sq_head == qp->sq_req) && (qp->sq_req == qp->sq_started) &&
           (qp->req.pkt == 0) && (qp->comp.psn == qp->req.psn) && !qp->comp.rnr_deadline;
}

/*
 * wqe's local side as iovecs, each piece checked as the packets' would be;
 * count, or -1: a bad key (the packets' path reports it) or an indirect one
 * (its addresses are not the process's).
 */
static int softib_direct_local_iov(softib_qp_t *qp, softib_send_wqe_t *wqe, int write,
                                   struct iovec *iov)
{
    int access = write ? 0 : AXON_DEV_ACCESS_LOCAL_WRITE;
    const axon_dev_sge_t *sge;
    softib_mr_t *mr;
    int i, n = 0;

    if (wqe->flags & AXON_DEV_SEND_INLINE) {
        iov[0].iov_base = wqe->inline_data;
        iov[0].iov_len  = wqe->length;
        return 1;
    }
    for (i = 0; i < wqe->num_sge; i++) {
        sge = &wqe->sge[i];
        if (sge->length == 0) {
            continue;
        }
        mr = softib_mr_lookup(softib_qp_dev(qp), qp->super.pd, sge->lkey);
        if ((mr == NULL) || (mr->umr != NULL) ||
            (softib_mr_range(mr, sge->addr, sge->length, access) != SOFTIB_ACCESS_OK)) {
            return -1;
        }
        iov[n].iov_base = (void *)(uintptr_t)sge->addr;
        iov[n].iov_len  = sge->length;
        n++;
    }
    return n;
}

/* The region's entry allows [va, va + len) with need, for a QP of PD pd. */
static int softib_direct_mr_allows(const softib_direct_mr_t *entry, uint32_t pd, uint64_t va,
                                   uint64_t len, uint32_t need)
{
    uint64_t end = entry->addr + entry->length;

    return (entry->pd == pd) && ((entry->access & need) == need) && (va >= entry->addr) &&
           (va <= end) && (len <= end - va);
}

/* Move the data; 0, or an errno (nothing may be assumed about the target then). */
static int softib_direct_copy(softib_qp_t *qp, softib_send_wqe_t *wqe, int write,
                              uint32_t need, softib_direct_table_t *table, pid_t pid,
                              uint32_t pd)
{
    unsigned index = wqe->rkey >> 8;
    struct iovec local[SOFTIB_MAX_SGE], remote;
    softib_direct_mr_t *entry;
    ssize_t moved = -1;
    int n, err = EACCES;

    if ((index == 0) || (index >= SOFTIB_DIRECT_MRS) ||
        ((n = softib_direct_local_iov(qp, wqe, write, local)) < 0)) {
        return EINVAL;
    }
    remote.iov_base = (void *)(uintptr_t)wqe->remote_addr;
    remote.iov_len  = wqe->length;
    entry           = &table->mrs[index];
    atomic_fetch_add(&entry->users, 1);
    if ((atomic_load(&entry->key) == wqe->rkey) &&
        softib_direct_mr_allows(entry, pd, wqe->remote_addr, wqe->length, need)) {
        moved = write ? process_vm_writev(pid, local, (unsigned long)n, &remote, 1, 0)
                      : process_vm_readv(pid, local, (unsigned long)n, &remote, 1, 0);
        err   = (moved < 0) ? errno : 0;
    }
    atomic_fetch_sub(&entry->users, 1);
    if (moved == (ssize_t)wqe->length) {
        return 0;
    }
    return (err != 0) ? err : EFAULT;
}

int softib_direct_try(softib_qp_t *qp, softib_send_wqe_t *wqe)
{
    softib_dev_t *dev = softib_qp_dev(qp);
    int write = (wqe->opcode == AXON_DEV_WR_RDMA_WRITE);
    uint32_t need = write ? AXON_DEV_ACCESS_REMOTE_WRITE : AXON_DEV_ACCESS_REMOTE_READ;
    uint32_t dest = qp->attr.dest_qp_num;
    softib_direct_table_t *table;
    softib_direct_qp_t *target;
    pid_t pid;
    int err;

    if ((!write && (wqe->opcode != AXON_DEV_WR_RDMA_READ)) || (qp->direct_until == 0) ||
        qp->direct_off || (qp->super.qp_type != AXON_DEV_QPT_RC) || (wqe->length == 0) ||
        (wqe->status >= 0) || !softib_direct_qp_idle(qp) ||
        (axon_sys_time_ns() > qp->direct_until) ||
        (softib_wire_direct_peer(dev->wire, &qp->attr.ah_attr.grh.dgid, dest, &table,
                                 &pid) != 0)) {
        return 0;
    }
    /* The responder's QP: accepting requests, from us, with the right wanted. */
    target = &table->qps[SOFTIB_QPN_INDEX(dest)];
    if ((atomic_load_explicit(&target->qpn, memory_order_acquire) != dest) ||
        (target->peer_qpn != qp->super.qp_num) || ((target->access & need) != need) ||
        (!write && ((qp->attr.max_rd_atomic == 0) ||
                    (qp->attr.max_rd_atomic > target->max_dest_rd_atomic)))) {
        /* refused, or reads past the responder's resources: the packets tell how */
        return 0;
    }
    err = softib_direct_copy(qp, wqe, write, need, table, pid, target->pd);
    if (err != 0) {
        if ((err == EPERM) || (err == ENOSYS)) {
            /* Not ours to attach to (ptrace rules): this QP stops asking. */
            axon_debug("softib: QP 0x%x: no direct placement into process %d: %s",
                       qp->super.qp_num, (int)pid, strerror(err));
            qp->direct_off = 1;
        }
        return 0;   /* the packets go, and find what the responder finds */
    }
    qp->sq_started++;
    qp->sq_req++;
    softib_qp_complete_send(qp, wqe, AXON_DEV_WC_SUCCESS);
    __atomic_add_fetch(&softib_direct_placed, 1, __ATOMIC_RELAXED);
    qp->sq_head++;
    return 1;
}
