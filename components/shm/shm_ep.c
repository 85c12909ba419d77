/* shm endpoint: writes messages straight into a cell of the peer's ring. */
#include <stdlib.h>
#include <string.h>
#include "shm.h"
#include "log.h"

axon_status_t axon_shm_ep_create(axon_iface_t *tl_iface, const void *dev_addr,
                                 const void *iface_addr, axon_tl_ep_t **ep_p)
{
    axon_shm_iface_t      *iface = (axon_shm_iface_t*)tl_iface;
    axon_shm_iface_addr_t  addr;
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
                                 &ep->seg_length, &ep->fifo);
    if (status != AXON_OK) {
        free(ep);
        return status;
    }

    ep->super.iface = tl_iface;
    *ep_p = &ep->super;
    return AXON_OK;
}

void axon_shm_ep_destroy(axon_tl_ep_t *tl_ep)
{
    axon_shm_ep_t *ep = (axon_shm_ep_t*)tl_ep;

    axon_shm_seg_detach(ep->seg_addr, ep->seg_length);
    free(ep);
}

static __attribute__((noinline, cold))
axon_status_t axon_shm_ep_am_short_invalid(const axon_shm_iface_t *iface, uint8_t am_id,
                                           size_t hdr_len, size_t length)
{
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

    /* Written so that hdr_len + length cannot wrap around. */
    if (__builtin_expect((am_id >= AXON_AM_ID_MAX) || (length > iface->max_short) ||
                         (hdr_len > iface->max_short - length), 0)) {
        return axon_shm_ep_am_short_invalid(iface, am_id, hdr_len, length);
    }

    status = axon_shm_fifo_claim(&ep->fifo, &cell, &pos);
    if (__builtin_expect(status != AXON_OK, 0)) {
        return status;
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
    return AXON_OK;
}

ssize_t axon_shm_ep_am_bcopy(axon_tl_ep_t *tl_ep, uint8_t am_id, axon_pack_cb_t pack, void *arg)
{
    axon_shm_ep_t          *ep    = (axon_shm_ep_t*)tl_ep;
    const axon_shm_iface_t *iface = (const axon_shm_iface_t*)tl_ep->iface;
    axon_shm_cell_t        *cell;
    axon_status_t           status;
    uint64_t                pos;
    size_t                  length;

    if (__builtin_expect(am_id >= AXON_AM_ID_MAX, 0)) {
        axon_error("shm: am_bcopy with invalid am_id %u (max %d)", am_id, AXON_AM_ID_MAX - 1);
        return AXON_ERR_INVALID_PARAM;
    }

    status = axon_shm_fifo_claim(&ep->fifo, &cell, &pos);
    if (__builtin_expect(status != AXON_OK, 0)) {
        return status;
    }

    length = pack(axon_shm_cell_payload(cell), arg);
    if (__builtin_expect(length > iface->max_bcopy, 0)) {
        /* The cell is claimed and the receiver waits for it in order: publish it empty. */
        axon_shm_fifo_publish(cell, pos, AXON_SHM_AM_ID_VOID, 0);
        axon_error("shm: am_bcopy pack callback wrote %zu bytes, max_bcopy is %zu "
                   "(the peer's ring may be corrupt)", length, iface->max_bcopy);
        return AXON_ERR_INVALID_PARAM;
    }
    axon_shm_fifo_publish(cell, pos, am_id, (uint32_t)length);
    return (ssize_t)length;
}

axon_status_t axon_shm_ep_flush(axon_tl_ep_t *tl_ep)
{
    /* A message is in the peer's memory once published: nothing is ever in flight. */
    return AXON_OK;
}
