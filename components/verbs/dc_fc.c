/*
 * dc flow control (dc_wire.h): credit requests and grants. A grant goes
 * through the receiver's own DCIs; one that finds no DCI or buffer, or was
 * flushed by another WR's failure, waits in a ring sent from progress.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dc.h"

/* ------------------------------------------------------------ sender */

axon_status_t axon_dc_post_signed(axon_dc_iface_t *iface, axon_dc_dci_t *dci, axon_dc_ep_t *ep,
                                  const axon_dc_target_t *target, uint8_t type,
                                  uint16_t credits, uint32_t ep_id)
{
    struct __attribute__((packed)) {
        axon_dc_hdr_t    hdr;
        axon_dc_sender_t sender;
    } msg;
    axon_dev_send_wr_t wr;
    axon_dev_sge_t sge;
    axon_status_t status;
    uint8_t *buf = NULL;

    msg.hdr.am_id   = 0;
    msg.hdr.type    = type;
    msg.hdr.credits = credits;
    msg.hdr.ep_id   = ep_id;
    axon_verbs_dev_addr_pack(&iface->dev, &msg.sender.dev_addr);
    msg.sender.dct_num = iface->dct->dct_num;
    msg.sender.dc_key  = iface->dc_key;
    sge.addr   = (uintptr_t)&msg;
    sge.length = sizeof(msg);
    sge.lkey   = 0;
    wr.send_flags = AXON_DEV_SEND_INLINE;
    if (sizeof(msg) > iface->max_inline) {
        buf = axon_verbs_bufpool_get(&iface->tx_pool);
        if (buf == NULL) {
            return AXON_ERR_NO_RESOURCE;
        }
        memcpy(buf, &msg, sizeof(msg));
        sge.addr      = (uintptr_t)buf;
        sge.lkey      = axon_verbs_bufpool_lkey(&iface->tx_pool);
        wr.send_flags = 0;
    }
    wr.opcode  = AXON_DEV_WR_SEND;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    status = axon_dc_dci_post(iface, dci, ep, target, &wr, buf, NULL, NULL);
    if ((status != AXON_OK) && (buf != NULL)) {
        axon_verbs_bufpool_put(&iface->tx_pool, buf);
    }
    return status;
}

int axon_dc_sender_target(axon_dc_iface_t *iface, const axon_dc_hdr_t *hdr, uint32_t length,
                          axon_dc_target_t *target)
{
    axon_verbs_dev_addr_t addr;
    axon_dc_sender_t sender;

    if (length < sizeof(*hdr) + sizeof(sender)) {
        axon_debug("%s: message of type %u, %u bytes: too short, dropped", iface->name,
                   hdr->type, length);
        return 0;
    }
    memcpy(&sender, hdr + 1, sizeof(sender));
    axon_verbs_dev_addr_unpack(&sender.dev_addr, &addr);
    target->ah      = axon_verbs_ah_cache_get(&iface->ahs, &addr);
    target->dct_num = sender.dct_num;
    target->dc_key  = sender.dc_key;
    return target->ah != NULL;   /* else logged */
}

static axon_status_t axon_dc_fc_post_req(axon_dc_iface_t *iface, axon_dc_ep_t *ep,
                                         axon_dc_dci_t *dci)
{
    axon_status_t status;

    status = axon_dc_post_signed(iface, dci, ep, &ep->target, AXON_DC_MSG_FC_REQ,
                                 ep->fc_unrequested, ep->id);
    if (status != AXON_OK) {
        return status;
    }
    ep->fc_unrequested = 0;
    ep->flags          = (uint8_t)((ep->flags | AXON_DC_EP_F_FC_OUT) & ~AXON_DC_EP_F_FC_DUE);
    return AXON_OK;
}

void axon_dc_fc_sent(axon_dc_iface_t *iface, axon_dc_ep_t *ep, axon_dc_dci_t *dci)
{
    --ep->tx_credits;
    if (__builtin_expect((++ep->fc_unrequested >= iface->window / 2) &&
                         !(ep->flags & AXON_DC_EP_F_FC_OUT), 0)) {
        /* after the AMs it covers, on their DCI: the receiver reads it after them */
        if (!axon_dc_dci_has_ctrl_room(iface, dci) ||
            (axon_dc_fc_post_req(iface, ep, dci) != AXON_OK)) {
            ep->flags |= AXON_DC_EP_F_FC_DUE;
        }
    }
}

void axon_dc_fc_post_due(axon_dc_iface_t *iface, axon_dc_ep_t *ep)
{
    axon_dc_dci_t *dci = ep->dci;

    /* the DCI the AMs went on, if the ep still holds it; else the one it may take */
    if (dci == NULL) {
        dci = axon_dc_dci_for_ep(iface, ep);
    }
    if ((dci != NULL) && axon_dc_dci_has_ctrl_room(iface, dci)) {
        (void)axon_dc_fc_post_req(iface, ep, dci);
    }
}

/* ------------------------------------------------------------ receiver */

static axon_status_t axon_dc_fc_post_grant(axon_dc_iface_t *iface, const axon_dc_grant_t *g)
{
    axon_dc_dci_t *dci;
    axon_dev_send_wr_t wr;
    axon_dev_sge_t sge;
    axon_dc_hdr_t *hdr;
    uint8_t *buf;

    dci = axon_dc_dci_for_grant(iface, &g->target);
    if (dci == NULL) {
        return AXON_ERR_NO_RESOURCE;
    }
    buf = axon_verbs_bufpool_get(&iface->tx_pool);
    if (buf == NULL) {
        return AXON_ERR_NO_RESOURCE;   /* a DCI taken from the stack is released by timers */
    }
    /* the message, and behind it (not sent) the grant, to queue it again if flushed */
    hdr          = (axon_dc_hdr_t *)buf;
    hdr->am_id   = 0;
    hdr->type    = AXON_DC_MSG_FC_GRANT;
    hdr->credits = g->credits;
    hdr->ep_id   = g->ep_id;
    memcpy(buf + sizeof(*hdr), g, sizeof(*g));
    axon_verbs_send_wr(&wr, &sge, buf, sizeof(*hdr), &iface->tx_pool, 0);   /* kept: see above */
    if (axon_dc_dci_post(iface, dci, NULL, &g->target, &wr, buf, NULL, NULL) != AXON_OK) {
        axon_verbs_bufpool_put(&iface->tx_pool, buf);
        return AXON_ERR_NO_RESOURCE;
    }
    return AXON_OK;
}

static void axon_dc_fc_queue(axon_dc_iface_t *iface, const axon_dc_grant_t *g)
{
    axon_dc_grant_t *grown;
    unsigned size, i;

    if (iface->grants_count == iface->grants_size) {
        size  = (iface->grants_size == 0) ? 16 : iface->grants_size * 2;
        grown = malloc(size * sizeof(*grown));
        if (grown == NULL) {
            axon_error("%s: cannot queue a credit grant to DCT 0x%x: its sender stalls",
                       iface->name, g->target.dct_num);
            return;
        }
        for (i = 0; i < iface->grants_count; ++i) {
            grown[i] = iface->grants[(iface->grants_head + i) % iface->grants_size];
        }
        free(iface->grants);
        iface->grants      = grown;
        iface->grants_size = size;
        iface->grants_head = 0;
    }
    iface->grants[(iface->grants_head + iface->grants_count++) % iface->grants_size] = *g;
}

void axon_dc_fc_progress(axon_dc_iface_t *iface)
{
    while (iface->grants_count > 0) {
        if (axon_dc_fc_post_grant(iface, &iface->grants[iface->grants_head]) != AXON_OK) {
            return;
        }
        iface->grants_head = (iface->grants_head + 1) % iface->grants_size;
        --iface->grants_count;
    }
}

void axon_dc_fc_grant_requeue(axon_dc_iface_t *iface, const void *buf)
{
    axon_dc_grant_t g;

    memcpy(&g, (const uint8_t *)buf + sizeof(axon_dc_hdr_t), sizeof(g));
    axon_dc_fc_queue(iface, &g);
}

void axon_dc_fc_rx(axon_dc_iface_t *iface, const axon_dc_hdr_t *hdr, uint32_t length)
{
    axon_dc_grant_t g;
    axon_dc_ep_t *ep;

    if (hdr->type == AXON_DC_MSG_FC_GRANT) {
        ep = axon_dc_ep_by_id(iface, hdr->ep_id);
        if (ep == NULL) {
            return;   /* the endpoint is gone */
        }
        ep->tx_credits += hdr->credits;
        ep->flags      &= ~AXON_DC_EP_F_FC_OUT;
        if (ep->fc_unrequested >= iface->window / 2) {
            ep->flags |= AXON_DC_EP_F_FC_DUE;   /* sent with its next message */
        }
        return;
    }
    if (!axon_dc_sender_target(iface, hdr, length, &g.target)) {
        return;
    }
    g.ep_id   = hdr->ep_id;
    g.credits = hdr->credits;
    if ((iface->grants_count > 0) || (axon_dc_fc_post_grant(iface, &g) != AXON_OK)) {
        axon_dc_fc_queue(iface, &g);   /* behind the others: in order */
    }
}

void axon_dc_fc_cleanup(axon_dc_iface_t *iface)
{
    free(iface->grants);
    iface->grants       = NULL;
    iface->grants_count = 0;
}
