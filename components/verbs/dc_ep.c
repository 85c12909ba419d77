/* dc endpoints: creation, active messages, flush, failure and keep-alive. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dc.h"

/* ------------------------------------------------------------ id table */

static axon_status_t axon_dc_ep_id_alloc(axon_dc_iface_t *iface, axon_dc_ep_t *ep)
{
    axon_dc_ep_t **grown;
    unsigned i, size;

    for (i = iface->eps_free_hint; i < iface->eps_size; ++i) {
        if (iface->eps[i] == NULL) {
            goto found;
        }
    }
    size = (iface->eps_size == 0) ? 64 : iface->eps_size * 2;
    if (size > AXON_DC_EP_SLOT_MASK + 1) {
        axon_error("%s: more than %u endpoints", iface->name, AXON_DC_EP_SLOT_MASK + 1);
        return AXON_ERR_NO_RESOURCE;
    }
    grown = realloc(iface->eps, size * sizeof(*grown));
    if (grown == NULL) {
        axon_error("%s: cannot grow the endpoint table to %u", iface->name, size);
        return AXON_ERR_NO_MEMORY;
    }
    memset(grown + iface->eps_size, 0, (size - iface->eps_size) * sizeof(*grown));
    i              = iface->eps_size;
    iface->eps     = grown;
    iface->eps_size = size;
found:
    iface->eps[i]        = ep;
    iface->eps_free_hint = i + 1;
    ep->id = i | ((++iface->ep_gen << AXON_DC_EP_SLOT_BITS) & ~AXON_DC_EP_SLOT_MASK);
    return AXON_OK;
}

axon_dc_ep_t *axon_dc_ep_by_id(axon_dc_iface_t *iface, uint32_t id)
{
    unsigned slot = id & AXON_DC_EP_SLOT_MASK;
    axon_dc_ep_t *ep = (slot < iface->eps_size) ? iface->eps[slot] : NULL;

    return ((ep != NULL) && (ep->id == id)) ? ep : NULL;
}

void axon_dc_ep_table_cleanup(axon_dc_iface_t *iface)
{
    unsigned i, left = 0;

    for (i = 0; i < iface->eps_size; ++i) {
        left += (iface->eps[i] != NULL);
    }
    if (left > 0) {
        axon_warn("%s: closed with %u endpoints not destroyed", iface->name, left);
    }
    free(iface->eps);
    iface->eps = NULL;
}

/* ------------------------------------------------------------ life */

axon_status_t axon_dc_ep_create(axon_iface_t *tl_iface, uint64_t peer_uuid, const void *dev_addr,
                                const void *iface_addr, axon_tl_ep_t **ep_p)
{
    axon_dc_iface_t *iface = (axon_dc_iface_t *)tl_iface;
    axon_verbs_dev_addr_t addr;
    axon_dc_iface_addr_t ia;
    axon_dc_ep_t *ep;
    axon_status_t status;

    if ((dev_addr == NULL) || (iface_addr == NULL)) {
        axon_error("%s: ep_create to worker 0x%llx without a %s address", iface->name,
                   (unsigned long long)peer_uuid, (dev_addr == NULL) ? "device" : "iface");
        return AXON_ERR_INVALID_PARAM;
    }
    axon_verbs_dev_addr_unpack(dev_addr, &addr);
    memcpy(&ia, iface_addr, sizeof(ia));
    if (!axon_verbs_dev_addr_reachable(&iface->dev, &addr)) {
        axon_error("%s: worker 0x%llx is not reachable from this port", iface->name,
                   (unsigned long long)peer_uuid);
        return AXON_ERR_UNREACHABLE;
    }
    if ((ia.dct_num == 0) || (ia.dct_num > 0xffffff)) {
        axon_error("%s: ep_create to worker 0x%llx: DCT number 0x%x is invalid", iface->name,
                   (unsigned long long)peer_uuid, ia.dct_num);
        return AXON_ERR_INVALID_PARAM;
    }
    ep = calloc(1, sizeof(*ep));
    if (ep == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    ep->super.iface     = tl_iface;
    ep->peer_uuid       = peer_uuid;
    ep->target.dct_num  = ia.dct_num;
    ep->target.dc_key   = ia.dc_key;
    ep->target.ah       = axon_verbs_ah_cache_get(&iface->ahs, &addr);
    ep->tx_credits      = (int32_t)iface->window;
    ep->last_tx_ns      = iface->now_ns;
    ep->flags           = AXON_DC_EP_F_HELLO_DUE;
    if (ep->target.ah == NULL) {
        free(ep);
        return AXON_ERR_UNREACHABLE;
    }
    status = axon_dc_ep_id_alloc(iface, ep);
    if (status != AXON_OK) {
        free(ep);
        return status;
    }
    if (iface->config.policy == AXON_DC_POLICY_SHARED) {
        ep->dci = axon_dc_dci_of_new_ep(iface);
    }
    *ep_p = &ep->super;
    return AXON_OK;
}

void axon_dc_ep_destroy(axon_tl_ep_t *tl_ep)
{
    axon_dc_ep_t *ep       = (axon_dc_ep_t *)tl_ep;
    axon_dc_iface_t *iface = (axon_dc_iface_t *)tl_ep->iface;
    unsigned slot          = ep->id & AXON_DC_EP_SLOT_MASK;

    axon_dc_dci_ep_detach(iface, ep);
    iface->eps[slot] = NULL;
    if (slot < iface->eps_free_hint) {
        iface->eps_free_hint = slot;
    }
    free(ep);
}

void axon_dc_ep_fail(axon_dc_iface_t *iface, axon_dc_ep_t *ep, axon_status_t status,
                     const char *why)
{
    if (ep->status != AXON_OK) {
        return;
    }
    ep->status = (int8_t)status;
    if (ep->flags & AXON_DC_EP_F_WAITING) {
        axon_list_del(&ep->wait_link);
        ep->flags &= ~AXON_DC_EP_F_WAITING;
    }
    if (ep->flags & AXON_DC_EP_F_PEER_BYE) {
        axon_debug("%s: endpoint to worker 0x%llx (DCT 0x%x) closed after its goodbye (%s)",
                   iface->name, (unsigned long long)ep->peer_uuid, ep->target.dct_num, why);
        return;
    }
    axon_error("%s: endpoint to worker 0x%llx (DCT 0x%x) failed: %s (%s)", iface->name,
               (unsigned long long)ep->peer_uuid, ep->target.dct_num, why,
               axon_status_string(status));
    axon_dc_bye_forget(iface, &ep->target);
    if (!(ep->flags & AXON_DC_EP_F_REPORTED)) {
        ep->flags |= AXON_DC_EP_F_REPORTED;
        if (iface->peer_failure != NULL) {
            iface->peer_failure(iface->am_arg, ep->peer_uuid, status);
        }
    }
}

/* ------------------------------------------------------------ active messages */

/* The DCI an AM goes on, if the ep may send one now (a credit, a DCI with room). */
static inline axon_status_t axon_dc_ep_am_dci(axon_dc_iface_t *iface, axon_dc_ep_t *ep,
                                              axon_dc_dci_t **dci_p)
{
    if (__builtin_expect(ep->status != AXON_OK, 0)) {
        return (axon_status_t)ep->status;
    }
    if (__builtin_expect(ep->flags & AXON_DC_EP_F_FC_DUE, 0)) {
        axon_dc_fc_post_due(iface, ep);
    }
    if (__builtin_expect(ep->tx_credits <= 0, 0)) {
        return AXON_ERR_NO_RESOURCE;   /* the receiver's grant is on its way */
    }
    *dci_p = axon_dc_dci_for_ep(iface, ep);
    return (*dci_p != NULL) ? AXON_OK : AXON_ERR_NO_RESOURCE;
}

static inline void axon_dc_hdr_init(axon_dc_hdr_t *hdr, uint8_t am_id, uint8_t type)
{
    hdr->am_id   = am_id;
    hdr->type    = type;
    hdr->credits = 0;
    hdr->ep_id   = 0;
}

axon_status_t axon_dc_ep_am_short(axon_tl_ep_t *tl_ep, uint8_t am_id, const void *hdr,
                                  size_t hdr_len, const void *payload, size_t length)
{
    axon_dc_ep_t *ep       = (axon_dc_ep_t *)tl_ep;
    axon_dc_iface_t *iface = (axon_dc_iface_t *)tl_ep->iface;
    axon_dc_dci_t *dci     = NULL;
    axon_dev_send_wr_t wr;
    axon_dev_sge_t sge[3];
    axon_dc_hdr_t h, *bh;
    axon_status_t status;
    uint8_t *buf = NULL;

    if (__builtin_expect((hdr_len + length > iface->max_short) || (am_id >= AXON_AM_ID_MAX), 0)) {
        axon_error("%s: am_short of %zu bytes with AM id %u (max %zu bytes, id < %u)",
                   iface->name, hdr_len + length, am_id, iface->max_short, AXON_AM_ID_MAX);
        return AXON_ERR_INVALID_PARAM;
    }
    status = axon_dc_ep_am_dci(iface, ep, &dci);
    if (status != AXON_OK) {
        return status;
    }
    bh = axon_verbs_am_short_wr(&iface->tx_pool, iface->max_inline, &h, sizeof(h), hdr,
                                hdr_len, payload, length, &wr, sge, &buf);
    if (bh == NULL) {
        return AXON_ERR_NO_RESOURCE;
    }
    axon_dc_hdr_init(bh, am_id, AXON_DC_MSG_AM);
    status = axon_dc_dci_post(iface, dci, ep, &ep->target, &wr, buf, NULL, NULL);
    if (__builtin_expect(status != AXON_OK, 0)) {
        if (buf != NULL) {
            axon_verbs_bufpool_put(&iface->tx_pool, buf);
        }
        return status;
    }
    axon_dc_fc_sent(iface, ep, dci);
    return AXON_OK;
}

ssize_t axon_dc_ep_am_bcopy(axon_tl_ep_t *tl_ep, uint8_t am_id, axon_pack_cb_t pack, void *arg)
{
    axon_dc_ep_t *ep       = (axon_dc_ep_t *)tl_ep;
    axon_dc_iface_t *iface = (axon_dc_iface_t *)tl_ep->iface;
    axon_dc_dci_t *dci     = NULL;
    axon_dev_send_wr_t wr;
    axon_dev_sge_t sge;
    axon_status_t status;
    uint8_t *buf;
    size_t len;

    if (__builtin_expect(am_id >= AXON_AM_ID_MAX, 0)) {
        axon_error("%s: am_bcopy with AM id %u (must be < %u)", iface->name, am_id,
                   AXON_AM_ID_MAX);
        return AXON_ERR_INVALID_PARAM;
    }
    status = axon_dc_ep_am_dci(iface, ep, &dci);
    if (status != AXON_OK) {
        return status;
    }
    buf = axon_verbs_am_bcopy_pack(&iface->tx_pool, iface->name, sizeof(axon_dc_hdr_t),
                                   iface->seg_size, pack, arg, &len, &status);
    if (buf == NULL) {
        return status;
    }
    axon_dc_hdr_init((axon_dc_hdr_t *)buf, am_id, AXON_DC_MSG_AM);
    axon_verbs_send_wr(&wr, &sge, buf, sizeof(axon_dc_hdr_t) + len, &iface->tx_pool,
                       iface->max_inline);
    status = axon_dc_dci_post(iface, dci, ep, &ep->target, &wr,
                              (wr.send_flags & AXON_DEV_SEND_INLINE) ? NULL : buf, NULL, NULL);
    if (__builtin_expect(status != AXON_OK, 0)) {
        axon_verbs_bufpool_put(&iface->tx_pool, buf);
        return status;
    }
    if (wr.send_flags & AXON_DEV_SEND_INLINE) {
        axon_verbs_bufpool_put(&iface->tx_pool, buf);   /* copied at post */
    }
    axon_dc_fc_sent(iface, ep, dci);
    return (ssize_t)len;
}

axon_status_t axon_dc_ep_flush(axon_tl_ep_t *tl_ep)
{
    axon_dc_ep_t *ep = (axon_dc_ep_t *)tl_ep;

    if (ep->status != AXON_OK) {
        return (axon_status_t)ep->status;
    }
    return (ep->outstanding == 0) ? AXON_OK : AXON_INPROGRESS;
}

axon_status_t axon_dc_ep_check(axon_tl_ep_t *tl_ep)
{
    return (axon_status_t)((axon_dc_ep_t *)tl_ep)->status;
}

/* ------------------------------------------------------------ keep-alive */

/* A header-only message the receiver drops: its transport ack says the peer is there. */
static void axon_dc_ep_send_keepalive(axon_dc_iface_t *iface, axon_dc_ep_t *ep)
{
    axon_dc_hdr_t h, *bh = &h;
    axon_dev_send_wr_t wr;
    axon_dc_dci_t *dci;
    axon_dev_sge_t sge;
    uint8_t *buf = NULL;

    wr.send_flags = AXON_DEV_SEND_INLINE;
    sge.lkey      = 0;
    if (sizeof(h) > iface->max_inline) {
        if ((buf = axon_verbs_bufpool_get(&iface->tx_pool)) == NULL) {
            return;   /* the next pass */
        }
        bh            = (axon_dc_hdr_t *)buf;
        sge.lkey      = axon_verbs_bufpool_lkey(&iface->tx_pool);
        wr.send_flags = 0;
    }
    dci = axon_dc_dci_for_probe(iface, ep);
    axon_dc_hdr_init(bh, 0, AXON_DC_MSG_KEEPALIVE);
    sge.addr   = (uintptr_t)bh;
    sge.length = sizeof(h);
    wr.opcode  = AXON_DEV_WR_SEND;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    if ((dci == NULL) ||
        (axon_dc_dci_post(iface, dci, ep, &ep->target, &wr, buf, NULL, NULL) != AXON_OK)) {
        if (buf != NULL) {
            axon_verbs_bufpool_put(&iface->tx_pool, buf);   /* busy DCIs: the next pass */
        }
    }
}

void axon_dc_ep_keepalive(axon_dc_iface_t *iface)
{
    axon_dc_ep_t *ep;
    unsigned i;

    if (iface->now_ns < iface->next_ka_ns) {
        return;
    }
    iface->next_ka_ns = iface->now_ns + iface->keepalive_ns / 2;
    for (i = 0; i < iface->eps_size; ++i) {
        ep = iface->eps[i];
        if ((ep != NULL) && (ep->status == AXON_OK) && (ep->outstanding == 0) &&
            (iface->now_ns - ep->last_tx_ns >= iface->keepalive_ns)) {
            axon_dc_ep_send_keepalive(iface, ep);
        }
    }
}
