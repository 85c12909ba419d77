/*
 * ud endpoints: an ep is its peer's connection (shared by every ep to that
 * peer, counted), so ep_create finds or makes the connection and the send
 * calls turn a message into one packet, or fragments of the path MTU.
 */
#include <stdlib.h>
#include <string.h>
#include "ud.h"

axon_status_t axon_ud_ep_create(axon_iface_t *tl_iface, uint64_t peer_uuid, const void *dev_addr,
                                const void *iface_addr, axon_tl_ep_t **ep_p)
{
    axon_ud_iface_t *iface = (axon_ud_iface_t *)tl_iface;
    axon_verbs_dev_addr_t addr;
    axon_ud_iface_addr_t iaddr;
    axon_ud_conn_t *conn;
    axon_status_t status;
    uint32_t qpn;

    if ((dev_addr == NULL) || (iface_addr == NULL) || (ep_p == NULL)) {
        axon_error("%s: ep_create needs the peer's device and iface addresses", iface->name);
        return AXON_ERR_INVALID_ADDR;
    }
    status = axon_ud_iface_check_peer(iface, dev_addr, iface_addr, AXON_LOG_ERROR, &addr,
                                      &iaddr);
    if (status != AXON_OK) {
        return status;
    }
    qpn = iaddr.qpn;
    axon_ud_iface_vnow(iface);

    /* One connection per pair of workers: whoever made it, an ep shares it. */
    conn = axon_ud_conn_find(iface, peer_uuid, &addr, qpn, AXON_UD_ID_NONE);
    if (conn != NULL) {
        ++conn->refcnt;
        if (conn->flags & AXON_UD_CONN_BYE_SENT) {
            /* We said goodbye: a ping tells the peer we are back before it lets go. */
            axon_ud_desc_t *desc = axon_ud_tx_desc_get(conn);
            conn->flags &= ~AXON_UD_CONN_BYE_SENT;
            if (desc != NULL) {
                axon_ud_tx_send(conn, desc, AXON_UD_PKT_PING, 0, 0, sizeof(axon_ud_hdr_t));
            }
        }
        *ep_p = &conn->super;
        return AXON_OK;
    }

    conn = axon_ud_conn_new(iface, peer_uuid, &addr, qpn, iaddr.alive_qpn);
    if (conn == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    conn->refcnt = 1;
    conn->tx_psn = 1;  /* 0 is the CREQ's */
    if (axon_ud_tx_creq(conn) != 0) {
        conn->flags |= AXON_UD_CONN_NEED_CREQ;
        axon_ud_conn_work(conn);
    }
    axon_debug("%s: connecting to %016llx (qpn 0x%x) as id 0x%x", iface->name,
               (unsigned long long)peer_uuid, qpn, conn->id);
    *ep_p = &conn->super;
    return AXON_OK;
}

void axon_ud_ep_destroy(axon_tl_ep_t *tl_ep)
{
    axon_ud_conn_t *conn = (axon_ud_conn_t *)tl_ep;

    if (conn->refcnt == 0) {
        axon_error("%s: ep_destroy of %p, which has no endpoint left",
                   axon_ud_conn_iface(conn)->name, (void *)conn);
        return;
    }
    if (--conn->refcnt > 0) {
        return;
    }
    /* What was sent still arrives; then a goodbye (progress frees a failed one). */
    if (conn->state != AXON_UD_CONN_FAILED) {
        conn->flags |= AXON_UD_CONN_WANT_BYE;
    }
    axon_ud_conn_work(conn);
}

/* Window room and send buffers for npkts more packets? */
static inline int axon_ud_ep_has_room(const axon_ud_conn_t *conn, unsigned npkts)
{
    const axon_ud_iface_t *iface = axon_ud_conn_iface(conn);

    return ((uint32_t)(conn->tx_psn - conn->tx_acked) + npkts <= iface->tx_window) &&
           (iface->tx_pool.num_free >= npkts);
}

/* Send length bytes at data as fragments of the connection's packet size. */
static void axon_ud_ep_send_frags(axon_ud_conn_t *conn, uint8_t am_id, const char *data,
                                  size_t length)
{
    size_t off = 0, chunk;
    axon_ud_desc_t *desc;
    uint8_t flags = AXON_UD_FLAG_FIRST;

    do {
        chunk = length - off;
        if (chunk > conn->max_payload) {
            chunk = conn->max_payload;
        }
        if (off + chunk == length) {
            flags |= AXON_UD_FLAG_LAST;
        }
        desc = axon_ud_tx_desc_get(conn);  /* room was checked for all of them */
        memcpy(axon_ud_desc_hdr(desc) + 1, data + off, chunk);
        axon_ud_tx_send(conn, desc, AXON_UD_PKT_DATA, flags, am_id,
                        (uint32_t)(sizeof(axon_ud_hdr_t) + chunk));
        off  += chunk;
        flags = 0;
    } while (off < length);
}

static inline unsigned axon_ud_ep_npkts(const axon_ud_conn_t *conn, size_t length)
{
    return (length <= conn->max_payload) ? 1 :
           (unsigned)((length + conn->max_payload - 1) / conn->max_payload);
}

static __attribute__((noinline, cold))
axon_status_t axon_ud_ep_am_short_invalid(const axon_ud_conn_t *conn, uint8_t am_id,
                                          size_t hdr_len, size_t length)
{
    const axon_ud_iface_t *iface = axon_ud_conn_iface(conn);

    if (conn->status != AXON_OK) {
        return conn->status;
    }
    if (am_id >= AXON_AM_ID_MAX) {
        axon_error("%s: am_short with invalid am_id %u (max %d)", iface->name, am_id,
                   AXON_AM_ID_MAX - 1);
    } else {
        axon_error("%s: am_short of %zu + %zu bytes exceeds max_short %zu", iface->name,
                   hdr_len, length, iface->max_short);
    }
    return AXON_ERR_INVALID_PARAM;
}

axon_status_t axon_ud_ep_am_short(axon_tl_ep_t *tl_ep, uint8_t am_id, const void *hdr,
                                  size_t hdr_len, const void *payload, size_t length)
{
    axon_ud_conn_t *conn   = (axon_ud_conn_t *)tl_ep;
    axon_ud_iface_t *iface = axon_ud_conn_iface(conn);
    axon_ud_desc_t *desc;
    char *dest;
    size_t total;

    if (__builtin_expect((conn->status != AXON_OK) || (am_id >= AXON_AM_ID_MAX) ||
                         (length > iface->max_short) || (hdr_len > iface->max_short - length),
                         0)) {
        return axon_ud_ep_am_short_invalid(conn, am_id, hdr_len, length);
    }
    total = hdr_len + length;
    if (__builtin_expect(total > conn->max_payload, 0)) {
        /* The peer's MTU is smaller than ours: fragments. */
        if (!axon_ud_ep_has_room(conn, axon_ud_ep_npkts(conn, total))) {
            return AXON_ERR_NO_RESOURCE;
        }
        if (hdr_len != 0) {
            memcpy(iface->bcopy_buf, hdr, hdr_len);
        }
        if (length != 0) {
            memcpy(iface->bcopy_buf + hdr_len, payload, length);
        }
        axon_ud_ep_send_frags(conn, am_id, iface->bcopy_buf, total);
        return AXON_OK;
    }
    if (__builtin_expect(!axon_ud_ep_has_room(conn, 1), 0)) {
        return AXON_ERR_NO_RESOURCE;
    }
    desc = axon_ud_tx_desc_get(conn);
    dest = (char *)(axon_ud_desc_hdr(desc) + 1);
    /* Skip empty copies: memcpy's pointers must be valid even for 0 bytes. */
    if (hdr_len != 0) {
        memcpy(dest, hdr, hdr_len);
    }
    if (length != 0) {
        memcpy(dest + hdr_len, payload, length);
    }
    axon_ud_tx_send(conn, desc, AXON_UD_PKT_DATA, AXON_UD_FLAG_FIRST | AXON_UD_FLAG_LAST, am_id,
                    (uint32_t)(sizeof(axon_ud_hdr_t) + total));
    return AXON_OK;
}

ssize_t axon_ud_ep_am_bcopy(axon_tl_ep_t *tl_ep, uint8_t am_id, axon_pack_cb_t pack, void *arg)
{
    axon_ud_conn_t *conn   = (axon_ud_conn_t *)tl_ep;
    axon_ud_iface_t *iface = axon_ud_conn_iface(conn);
    axon_ud_desc_t *desc;
    size_t length;

    if (__builtin_expect((conn->status != AXON_OK) || (am_id >= AXON_AM_ID_MAX), 0)) {
        if (conn->status != AXON_OK) {
            return conn->status;
        }
        axon_error("%s: am_bcopy with invalid am_id %u (max %d)", iface->name, am_id,
                   AXON_AM_ID_MAX - 1);
        return AXON_ERR_INVALID_PARAM;
    }
    /* Room for the largest message pack may write: it is asked only once. */
    if (!axon_ud_ep_has_room(conn, axon_ud_ep_npkts(conn, iface->seg_size))) {
        return AXON_ERR_NO_RESOURCE;
    }
    if (iface->seg_size <= conn->max_payload) {
        desc   = axon_ud_tx_desc_get(conn);
        length = pack(axon_ud_desc_hdr(desc) + 1, arg);
        if (length > iface->seg_size) {
            goto err_too_long;
        }
        axon_ud_tx_send(conn, desc, AXON_UD_PKT_DATA, AXON_UD_FLAG_FIRST | AXON_UD_FLAG_LAST,
                        am_id, (uint32_t)(sizeof(axon_ud_hdr_t) + length));
        return (ssize_t)length;
    }
    length = pack(iface->bcopy_buf, arg);
    if (length > iface->seg_size) {
        desc = NULL;
        goto err_too_long;
    }
    axon_ud_ep_send_frags(conn, am_id, iface->bcopy_buf, length);
    return (ssize_t)length;

err_too_long:
    axon_error("%s: am_bcopy pack wrote %zu bytes, max_bcopy is %zu", iface->name, length,
               iface->seg_size);
    if (desc != NULL) {
        /* Give the PSN back: nothing was queued. */
        --conn->tx_psn;
        axon_verbs_bufpool_put(&iface->tx_pool, desc);
    }
    return AXON_ERR_INVALID_PARAM;
}

axon_status_t axon_ud_ep_flush(axon_tl_ep_t *tl_ep)
{
    const axon_ud_conn_t *conn = (const axon_ud_conn_t *)tl_ep;

    if (conn->status != AXON_OK) {
        return conn->status;
    }
    /* Flushed means arrived: every packet acknowledged. */
    return (conn->tx_head == NULL) ? AXON_OK : AXON_INPROGRESS;
}

axon_status_t axon_ud_ep_check(axon_tl_ep_t *tl_ep)
{
    return ((const axon_ud_conn_t *)tl_ep)->status;
}
