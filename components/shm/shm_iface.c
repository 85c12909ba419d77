/* shm iface: owns a receive ring, hands its messages to the AM handlers. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "idle.h"
#include "shm.h"
#include "sys.h"
#include "log.h"

static const axon_iface_ops_t axon_shm_iface_ops;

axon_status_t axon_shm_iface_open(const axon_resource_t *resource, const void *config_v,
                                  const axon_iface_params_t *params, axon_iface_t **iface_p)
{
    const axon_shm_config_t *config = config_v;
    axon_shm_iface_t        *iface;
    axon_status_t            status;

    status = axon_shm_config_check(config);
    if (status != AXON_OK) {
        return status;
    }
    if (params == NULL) {
        axon_error("shm: iface_open needs parameters");
        return AXON_ERR_INVALID_PARAM;
    }

    iface = calloc(1, sizeof(*iface));
    if (iface == NULL) {
        axon_error("shm: cannot allocate an iface");
        return AXON_ERR_NO_MEMORY;
    }

    iface->host_id = axon_sys_host_id();
    iface->uid     = (uint32_t)geteuid();
    axon_proc_self(&iface->self);

    iface->event_fd = axon_shm_wake_fd_open(config->prefix);
    status = axon_shm_seg_create(config->prefix, config->fifo_size, config->cell_size,
                                 config->max_senders, iface->host_id, &iface->self,
                                 iface->event_fd, &iface->seg, &iface->fifo, &iface->senders);
    if (status != AXON_OK) {
        goto err_free;
    }
    axon_shm_wake_wait_open(iface);
    axon_idle_set_host_procs(axon_shm_seg_count_procs(iface->seg.name));

    iface->super.ops         = &axon_shm_iface_ops;
    iface->super.resource    = resource;
    iface->head              = 0;
    iface->rx_burst          = config->rx_burst;
    iface->tick_countdown    = AXON_SHM_LIVENESS_TICK;
    iface->am_arg            = params->am_arg;
    /* A copy: the handler table is read on every message, keep it next to the ring. */
    if (params->am_handlers != NULL) {
        memcpy(iface->am_handlers, params->am_handlers, sizeof(iface->am_handlers));
    }
    iface->max_short         = axon_shm_max_short(config->cell_size);
    iface->max_bcopy         = axon_shm_max_bcopy(config->cell_size);
    axon_list_init(&iface->eps);
    iface->sweep_next        = &iface->eps;
    iface->liveness_interval = config->liveness_interval;
    iface->next_sweep        = axon_sys_time_sec() + config->liveness_interval;
    iface->failures_pending  = 0;
    iface->peer_failure      = params->peer_failure;
    iface->stuck_since       = -1;
    iface->next_head_check   = 0;
    iface->cma               = config->cma && (resource->cap_flags & AXON_CAP_GET);

    *iface_p = &iface->super;
    return AXON_OK;

err_free:
    if (iface->event_fd >= 0) {
        close(iface->event_fd);
    }
    free(iface);
    return status;
}

static void axon_shm_iface_close(axon_iface_t *tl_iface)
{
    axon_shm_iface_t *iface = (axon_shm_iface_t*)tl_iface;
    axon_shm_ep_t    *ep, *tmp;

    /* Endpoints should go first; unlinked, a later ep_destroy leaves the iface alone. */
    axon_list_for_each_safe(ep, tmp, &iface->eps, list) {
        axon_warn("shm %s: closing with endpoint %p still open", iface->seg.name, (void*)ep);
        axon_shm_wake_unwatch(ep);
        axon_list_del(&ep->list);
    }
    axon_shm_seg_destroy(&iface->seg, &iface->senders);
    axon_shm_wake_wait_close(iface);
    if (iface->event_fd >= 0) {
        close(iface->event_fd);
    }
    free(iface);
}

/* ---------------------------------------------------------------- peer liveness */

static void axon_shm_iface_mark_failed(axon_shm_iface_t *iface, axon_shm_ep_t *ep,
                                       axon_status_t status)
{
    ep->status  = status;
    ep->flags  |= AXON_SHM_EP_FLAG_REPORT;
    ++iface->failures_pending;
    axon_shm_wake_unwatch(ep);   /* its death wakes a sleeping worker once */
}

void axon_shm_iface_fail_ep(axon_shm_iface_t *iface, axon_shm_ep_t *ep, axon_status_t status,
                            const char *why)
{
    axon_shm_ep_t *other;

    if (ep->status != AXON_OK) {
        return;
    }
    axon_warn("shm %s: peer %016llx (pid %d) is gone: %s", iface->seg.name,
              (unsigned long long)ep->peer_uuid, ep->peer.pid, why);
    axon_shm_iface_mark_failed(iface, ep, status);
    /* Its other endpoints here (the user's and the one answering it) fail with it:
     * one line per death, not one per endpoint. */
    axon_list_for_each(other, &iface->eps, list) {
        if ((other->peer_uuid == ep->peer_uuid) && (other->status == AXON_OK)) {
            axon_shm_iface_mark_failed(iface, other, status);
        }
    }
    /* Report from the very next progress call. */
    iface->tick_countdown = 1;
}

void axon_shm_iface_check_ep(axon_shm_iface_t *iface, axon_shm_ep_t *ep, double now)
{
    const char *why;

    ep->last_check = now;
    if (ep->status != AXON_OK) {
        return;
    }
    if (atomic_load_explicit(&ep->peer_ctl->closed, memory_order_acquire)) {
        /* The peer closed its iface: it left, it did not fail. Sends end with an
         * error from now on (its ring has no reader); nobody is told of a failure. */
        axon_debug("shm %s: peer %016llx (pid %d) closed its ring", iface->seg.name,
                   (unsigned long long)ep->peer_uuid, ep->peer.pid);
        ep->status = AXON_ERR_CONNECTION_RESET;
        return;
    }
    if ((ep->flags & AXON_SHM_EP_FLAG_CHECKABLE) && axon_proc_is_gone(&ep->peer, &why)) {
        axon_shm_iface_fail_ep(iface, ep, AXON_ERR_CONNECTION_RESET, why);
    }
}

/*
 * Call peer_failure for each failed, unreported ep. The callback may destroy
 * endpoints (any of them) or progress this iface again, so every report
 * restarts from the list head instead of keeping a cursor. It must not
 * close the iface.
 */
static unsigned axon_shm_iface_report_failures(axon_shm_iface_t *iface)
{
    axon_shm_ep_t *ep;
    unsigned       count = 0;
    int            found;

    while (iface->failures_pending > 0) {
        found = 0;
        axon_list_for_each(ep, &iface->eps, list) {
            if (ep->flags & AXON_SHM_EP_FLAG_REPORT) {
                found = 1;
                break;
            }
        }
        if (!found) {
            iface->failures_pending = 0;  /* cannot happen: ep_destroy keeps the count */
            break;
        }
        ep->flags &= ~AXON_SHM_EP_FLAG_REPORT;
        --iface->failures_pending;
        ++count;
        if (iface->peer_failure != NULL) {
            iface->peer_failure(iface->am_arg, ep->peer_uuid, ep->status);
        }
    }
    return count;
}

/*
 * The head cell is claimed but not published: normal for the moment a sender
 * copies into it, fatal if that sender died. Once it stays so for the grace,
 * find out (every grace) whether a dead sender holds it, and then skip it.
 */
static void axon_shm_iface_watch_head(axon_shm_iface_t *iface, double now)
{
    uint64_t head = iface->head;

    if (!axon_shm_fifo_is_claimed(&iface->fifo, head)) {
        iface->stuck_since = -1;
        return;
    }
    if ((iface->stuck_since < 0) || (iface->stuck_head != head)) {
        iface->stuck_head  = head;
        iface->stuck_since = now;
        return;
    }
    if (now - iface->stuck_since < AXON_SHM_STUCK_GRACE) {
        return;
    }
    iface->stuck_since = now;
    if (axon_shm_senders_unstick(&iface->senders, &iface->fifo, head, &iface->self,
                                 iface->seg.name)) {
        iface->head        = head + 1;
        iface->stuck_since = -1;
    }
}

/*
 * Every AXON_SHM_LIVENESS_TICK progress calls: watch for a stuck head; start
 * a sweep over the eps once per interval, check a few eps of it per tick
 * (each check reads /proc, so a sweep over many peers must not stall one
 * progress call), then report what failed.
 */
static __attribute__((noinline, cold))
unsigned axon_shm_iface_tick(axon_shm_iface_t *iface)
{
    double   now = axon_sys_time_sec();
    unsigned batch;

    iface->tick_countdown = AXON_SHM_LIVENESS_TICK;
    if (now >= iface->next_head_check) {
        iface->next_head_check = now + AXON_SHM_HEAD_CHECK;
        axon_shm_iface_watch_head(iface, now);
    }
    if ((iface->sweep_next == &iface->eps) && (now >= iface->next_sweep)) {
        iface->sweep_next = iface->eps.next;
        iface->next_sweep = now + iface->liveness_interval;
    }
    for (batch = 0; (batch < AXON_SHM_LIVENESS_BATCH) && (iface->sweep_next != &iface->eps);
         ++batch) {
        axon_shm_ep_t *ep = axon_container_of(iface->sweep_next, axon_shm_ep_t, list);

        iface->sweep_next = ep->list.next;
        axon_shm_iface_check_ep(iface, ep, now);
    }
    return axon_shm_iface_report_failures(iface);
}

/* Out of line: a message no handler wants is a bug somewhere, not a fast path. */
static __attribute__((noinline, cold))
void axon_shm_iface_drop(const axon_shm_iface_t *iface, uint8_t am_id, uint32_t length)
{
    if (am_id == AXON_SHM_AM_ID_VOID) {
        return;  /* the sender already reported it */
    }
    if (am_id >= AXON_AM_ID_MAX) {
        axon_warn("shm %s: dropped a message with invalid am_id %u", iface->seg.name, am_id);
    } else if (length > iface->max_bcopy) {
        axon_warn("shm %s: dropped am_id %u with invalid length %u (cells hold %zu)",
                  iface->seg.name, am_id, length, iface->max_bcopy);
    } else {
        axon_warn("shm %s: dropped am_id %u (%u bytes): no handler", iface->seg.name, am_id,
                  length);
    }
}

/* The liveness tick, every AXON_SHM_LIVENESS_TICK progress calls. */
static inline unsigned axon_shm_iface_count_tick(axon_shm_iface_t *iface)
{
    return __builtin_expect(--iface->tick_countdown == 0, 0) ? axon_shm_iface_tick(iface) : 0;
}

/* Out of line: the empty poll then saves no registers and calls nothing. */
static __attribute__((noinline)) unsigned axon_shm_iface_receive(axon_shm_iface_t *iface)
{
    axon_am_handler_t  handler;
    axon_shm_cell_t   *cell;
    uint64_t           pos;
    uint32_t           length;
    uint8_t            am_id;
    unsigned           count;

    for (count = 0; count < iface->rx_burst; ++count) {
        pos  = iface->head;
        cell = axon_shm_fifo_peek(&iface->fifo, pos);
        if (cell == NULL) {
            break;
        }
        /* Advance first: a handler that progresses this iface again takes the next cell. */
        iface->head = pos + 1;
        /* Read the header once: the cell is in memory other processes can write. */
        length = cell->length;
        am_id  = cell->am_id;
        handler = (am_id < AXON_AM_ID_MAX) ? iface->am_handlers[am_id] : NULL;
        if (__builtin_expect((handler != NULL) && (length <= iface->max_bcopy), 1)) {
            handler(iface->am_arg, axon_shm_cell_payload(cell), length, AXON_AM_FLAG_NONE);
        } else {
            axon_shm_iface_drop(iface, am_id, length);
        }
        /* Only now may a sender overwrite the cell: data was valid during the handler. */
        axon_shm_fifo_release(&iface->fifo, cell, pos);
    }
    return count + axon_shm_iface_count_tick(iface);
}

static unsigned axon_shm_iface_progress(axon_iface_t *tl_iface)
{
    axon_shm_iface_t *iface = (axon_shm_iface_t*)tl_iface;

    /* Most polls find the ring empty: one load of the head cell decides. */
    if (axon_shm_fifo_peek(&iface->fifo, iface->head) != NULL) {
        return axon_shm_iface_receive(iface);
    }
    return axon_shm_iface_count_tick(iface);
}

static axon_status_t axon_shm_iface_get_address(axon_iface_t *tl_iface, void *dev_addr,
                                                void *iface_addr)
{
    const axon_shm_iface_t *iface = (const axon_shm_iface_t*)tl_iface;
    axon_shm_dev_addr_t     dev;
    axon_shm_iface_addr_t   addr;

    /* Addresses are blobs in a larger buffer: copy, never cast (alignment). */
    memset(&dev, 0, sizeof(dev));
    dev.host_id = iface->host_id;
    dev.uid     = iface->uid;
    memcpy(dev_addr, &dev, sizeof(dev));

    memset(&addr, 0, sizeof(addr));
    memcpy(addr.seg_name, iface->seg.name, sizeof(addr.seg_name));
    addr.cell_size = (uint32_t)iface->fifo.cell_size;
    addr.owner     = iface->self;
    memcpy(iface_addr, &addr, sizeof(addr));
    return AXON_OK;
}

axon_status_t axon_shm_iface_check_peer(const axon_shm_iface_t *iface, const void *dev_addr,
                                        const void *iface_addr, axon_log_level_t log_level,
                                        axon_shm_iface_addr_t *addr)
{
    axon_shm_dev_addr_t dev;

    memcpy(&dev, dev_addr, sizeof(dev));
    if (dev.host_id != iface->host_id) {
        axon_log(log_level, "shm: peer is on another host (host id 0x%016llx, ours 0x%016llx)",
                 (unsigned long long)dev.host_id, (unsigned long long)iface->host_id);
        return AXON_ERR_UNREACHABLE;
    }
    if (dev.uid != iface->uid) {
        /* Segments are created 0600: another user's cannot be opened. */
        axon_log(log_level, "shm: peer runs as uid %u, we as %u", dev.uid, iface->uid);
        return AXON_ERR_UNREACHABLE;
    }
    if (iface_addr == NULL) {
        return AXON_OK;  /* the device alone was asked about */
    }

    memcpy(addr, iface_addr, sizeof(*addr));
    if ((addr->seg_name[0] != '/') ||
        (memchr(addr->seg_name, '\0', sizeof(addr->seg_name)) == NULL) ||
        (strchr(addr->seg_name + 1, '/') != NULL)) {
        axon_log(log_level, "shm: malformed peer address (segment name '%.*s')",
                 (int)sizeof(addr->seg_name), addr->seg_name);
        return AXON_ERR_INVALID_ADDR;
    }
    if (addr->cell_size < iface->fifo.cell_size) {
        axon_log(log_level, "shm: peer segment %s has %u-byte cells, we send up to %zu "
                 "(is AXON_SHM_CELL_SIZE set differently in the two processes?)",
                 addr->seg_name, addr->cell_size, iface->fifo.cell_size);
        return AXON_ERR_UNREACHABLE;
    }
    return AXON_OK;
}

static int axon_shm_iface_is_reachable(axon_iface_t *tl_iface, const void *dev_addr,
                                       const void *iface_addr)
{
    axon_shm_iface_addr_t addr;

    return axon_shm_iface_check_peer((const axon_shm_iface_t*)tl_iface, dev_addr, iface_addr,
                                     AXON_LOG_DEBUG, &addr) == AXON_OK;
}

static const axon_iface_ops_t axon_shm_iface_ops = {
    .iface_close        = axon_shm_iface_close,
    .iface_progress     = axon_shm_iface_progress,
    .dev_addr_len       = sizeof(axon_shm_dev_addr_t),
    .iface_addr_len     = sizeof(axon_shm_iface_addr_t),
    .iface_get_address  = axon_shm_iface_get_address,
    .iface_is_reachable = axon_shm_iface_is_reachable,
    .iface_event_fd     = axon_shm_iface_event_fd,
    .iface_event_arm    = axon_shm_iface_event_arm,
    .ep_create          = axon_shm_ep_create,
    .ep_destroy         = axon_shm_ep_destroy,
    .ep_am_short        = axon_shm_ep_am_short,
    .ep_am_bcopy        = axon_shm_ep_am_bcopy,
    .ep_am_zcopy        = NULL,  /* not offered: AMs go through cells, bulk data by get */
    .ep_get_zcopy       = axon_shm_ep_get_zcopy,
    .ep_get_zcopy_iov   = axon_shm_ep_get_zcopy_iov,
    .ep_put_zcopy_iov   = axon_shm_ep_put_zcopy_iov,
    .ep_get_zcopy_riov  = axon_shm_ep_get_zcopy_riov,
    .ep_put_zcopy_riov  = axon_shm_ep_put_zcopy_riov,
    .ep_put_zcopy       = axon_shm_ep_put_zcopy,
    .ep_flush           = axon_shm_ep_flush,
    .ep_check           = axon_shm_ep_check,
};
