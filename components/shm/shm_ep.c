/*
 * shm endpoint: writes messages straight into a cell of the peer's ring,
 * and fails once the peer's process is known gone (shm_iface.c finds out);
 * single-copy gets and puts with the peer's memory are in shm_cma.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#include "idle.h"
#include "shm.h"
#include "sys.h"
#include "log.h"

axon_status_t axon_shm_ep_create(axon_iface_t *tl_iface, uint64_t peer_uuid,
                                 const void *dev_addr, const void *iface_addr,
                                 axon_tl_ep_t **ep_p)
{
    axon_shm_iface_t      *iface = (axon_shm_iface_t*)tl_iface;
    axon_shm_iface_addr_t  addr;
    axon_shm_senders_t     senders;
    axon_proc_t        self;
    axon_shm_ep_t         *ep;
    axon_status_t          status;

    if ((dev_addr == NULL) || (iface_addr == NULL)) {
        axon_error("shm: ep_create needs the peer's device and iface addresses");
        return AXON_ERR_INVALID_ADDR;
    }
    status = axon_shm_iface_check_peer(iface, dev_addr, iface_addr, AXON_LOG_ERROR, &addr);
    if (status != AXON_OK) {
        return status;
    }

    ep = calloc(1, sizeof(*ep));
    if (ep == NULL) {
        axon_error("shm: cannot allocate an endpoint");
        return AXON_ERR_NO_MEMORY;
    }

    /* Our cell size, not the peer's: a pack callback may fill all of our max_bcopy. */
    status = axon_shm_seg_attach(addr.seg_name, iface->fifo.cell_size, &ep->seg_addr,
                                 &ep->seg_length, &ep->fifo, &senders);
    if (status != AXON_OK) {
        goto err_free;
    }
    /* Our slot in the peer's segment says who claims which of its cells. It must
     * name the process that sends: a child forked after iface_open is not us. */
    self = iface->self;
    if (self.pid != (int32_t)getpid()) {
        axon_proc_self(&self);
    }
    status = axon_shm_sender_acquire(&senders, &ep->fifo, &self, addr.seg_name, &ep->slot,
                                     &ep->slot_word);
    if (status != AXON_OK) {
        goto err_detach;
    }
    ep->claim    = &ep->slot->claim;
    ep->peer_ctl = senders.ctl;

    ep->super.iface = tl_iface;
    ep->status      = AXON_OK;
    ep->peer        = addr.owner;
    ep->peer_uuid   = peer_uuid;
    ep->last_check  = axon_sys_time_sec();
    if (axon_proc_comparable(&ep->peer, &iface->self)) {
        ep->flags = AXON_SHM_EP_FLAG_CHECKABLE | (iface->cma ? AXON_SHM_EP_FLAG_CMA : 0);
    } else {
        axon_debug("shm: the owner of %s (pid %d) is in other namespaces or has no /proc: "
                   "no get from it and no liveness checks", addr.seg_name, ep->peer.pid);
    }
    axon_shm_wake_take(ep, addr.seg_name);
    axon_list_add_tail(&iface->eps, &ep->list);
    /* A new peer on this host: the idle policy's count of them again. */
    axon_idle_set_host_procs(axon_shm_seg_count_procs(addr.seg_name));

    *ep_p = &ep->super;
    return AXON_OK;

err_detach:
    axon_shm_seg_detach(ep->seg_addr, ep->seg_length);
err_free:
    free(ep);
    return status;
}

void axon_shm_ep_destroy(axon_tl_ep_t *tl_ep)
{
    axon_shm_ep_t    *ep    = (axon_shm_ep_t*)tl_ep;
    axon_shm_iface_t *iface = (axon_shm_iface_t*)tl_ep->iface;

    /* Unlinked: the iface closed first and must not be touched. */
    if (!axon_list_is_empty(&ep->list)) {
        if (iface->sweep_next == &ep->list) {
            iface->sweep_next = ep->list.next;
        }
        if (ep->flags & AXON_SHM_EP_FLAG_REPORT) {
            --iface->failures_pending;
        }
        axon_list_del(&ep->list);
    }
    axon_shm_wake_drop(ep);
    axon_shm_sender_release(ep->slot, ep->slot_word);
    axon_shm_seg_detach(ep->seg_addr, ep->seg_length);
    free(ep);
}

/*
 * The peer's ring is full. A live peer drains it eventually, a dead one
 * never: look at the peer's process, at most once per liveness interval,
 * so a sender retrying on a dead peer's ring fails instead of spinning.
 */
static __attribute__((noinline, cold))
axon_status_t axon_shm_ep_full(axon_shm_ep_t *ep)
{
    axon_shm_iface_t *iface = (axon_shm_iface_t*)ep->super.iface;
    double            now   = axon_sys_time_sec();

    if (now - ep->last_check >= iface->liveness_interval) {
        axon_shm_iface_check_ep(iface, ep, now);
    }
    return (ep->status != AXON_OK) ? ep->status : AXON_ERR_NO_RESOURCE;
}

static __attribute__((noinline, cold))
axon_status_t axon_shm_ep_am_short_invalid(const axon_shm_ep_t *ep, uint8_t am_id,
                                           size_t hdr_len, size_t length)
{
    const axon_shm_iface_t *iface = (const axon_shm_iface_t*)ep->super.iface;

    if (ep->status != AXON_OK) {
        return ep->status;
    }
    if (am_id >= AXON_AM_ID_MAX) {
        axon_error("shm: am_short with invalid am_id %u (max %d)", am_id, AXON_AM_ID_MAX - 1);
    } else {
        axon_error("shm: am_short of %zu + %zu bytes exceeds max_short %zu", hdr_len, length,
                   iface->max_short);
    }
    return AXON_ERR_INVALID_PARAM;
}

axon_status_t axon_shm_ep_am_short(axon_tl_ep_t *tl_ep, uint8_t am_id, const void *hdr,
                                   size_t hdr_len, const void *payload, size_t length)
{
    axon_shm_ep_t          *ep    = (axon_shm_ep_t*)tl_ep;
    const axon_shm_iface_t *iface = (const axon_shm_iface_t*)tl_ep->iface;
    axon_shm_cell_t        *cell;
    axon_status_t           status;
    uint64_t                pos;
    char                   *dest;
    int                     wake;

    /* A failed ep joins the argument checks: one branch, not taken. hdr_len +
     * length is written so that it cannot wrap around. */
    if (__builtin_expect((ep->status != AXON_OK) || (am_id >= AXON_AM_ID_MAX) ||
                         (length > iface->max_short) || (hdr_len > iface->max_short - length),
                         0)) {
        return axon_shm_ep_am_short_invalid(ep, am_id, hdr_len, length);
    }

    status = axon_shm_fifo_claim(&ep->fifo, ep->claim, &cell, &pos, &wake);
    if (__builtin_expect(status != AXON_OK, 0)) {
        return axon_shm_ep_full(ep);
    }

    /* Skip empty copies: memcpy's pointers must be valid even for 0 bytes. */
    dest = axon_shm_cell_payload(cell);
    if (hdr_len != 0) {
        memcpy(dest, hdr, hdr_len);
    }
    if (length != 0) {
        memcpy(dest + hdr_len, payload, length);
    }
    axon_shm_fifo_publish(cell, pos, am_id, (uint32_t)(hdr_len + length));
    if (__builtin_expect(wake, 0)) {
        axon_shm_wake_peer(ep);
    }
    return AXON_OK;
}

static __attribute__((noinline, cold))
ssize_t axon_shm_ep_am_bcopy_invalid(const axon_shm_ep_t *ep, uint8_t am_id)
{
    if (ep->status != AXON_OK) {
        return ep->status;
    }
    axon_error("shm: am_bcopy with invalid am_id %u (max %d)", am_id, AXON_AM_ID_MAX - 1);
    return AXON_ERR_INVALID_PARAM;
}

ssize_t axon_shm_ep_am_bcopy(axon_tl_ep_t *tl_ep, uint8_t am_id, axon_pack_cb_t pack, void *arg)
{
    axon_shm_ep_t          *ep    = (axon_shm_ep_t*)tl_ep;
    const axon_shm_iface_t *iface = (const axon_shm_iface_t*)tl_ep->iface;
    axon_shm_cell_t        *cell;
    axon_status_t           status;
    uint64_t                pos;
    size_t                  length;
    int                     wake;

    if (__builtin_expect((ep->status != AXON_OK) || (am_id >= AXON_AM_ID_MAX), 0)) {
        return axon_shm_ep_am_bcopy_invalid(ep, am_id);
    }

    status = axon_shm_fifo_claim(&ep->fifo, ep->claim, &cell, &pos, &wake);
    if (__builtin_expect(status != AXON_OK, 0)) {
        return axon_shm_ep_full(ep);
    }

    length = pack(axon_shm_cell_payload(cell), arg);
    if (__builtin_expect(length > iface->max_bcopy, 0)) {
        /* The cell is claimed and the receiver waits for it in order: publish it empty. */
        axon_shm_fifo_publish(cell, pos, AXON_SHM_AM_ID_VOID, 0);
        if (wake) {
            axon_shm_wake_peer(ep);
        }
        axon_error("shm: am_bcopy pack callback wrote %zu bytes, max_bcopy is %zu "
                   "(the peer's ring may be corrupt)", length, iface->max_bcopy);
        return AXON_ERR_INVALID_PARAM;
    }
    axon_shm_fifo_publish(cell, pos, am_id, (uint32_t)length);
    if (__builtin_expect(wake, 0)) {
        axon_shm_wake_peer(ep);
    }
    return (ssize_t)length;
}

axon_status_t axon_shm_ep_flush(axon_tl_ep_t *tl_ep)
{
    /* A message is in the peer's memory once published: nothing is ever in flight. */
    return AXON_OK;
}

axon_status_t axon_shm_ep_check(axon_tl_ep_t *tl_ep)
{
    return ((const axon_shm_ep_t*)tl_ep)->status;
}
