/*
 * dc goodbyes (dc_wire.h). A peer whose endpoint to us watches our DCT
 * (keep-alive, sends) would take our iface's close for its failure. A
 * receive completion does not name its sender, so each endpoint's first WR
 * is a hello naming its DCT: we keep the DCTs that a hello came from or went
 * to, and when our iface closes each gets a goodbye naming ours. A goodbye received fails our
 * endpoints to that DCT at once, quietly: later sends return
 * CONNECTION_RESET and nothing is reported (rc's PEER_BYE: errors after a
 * goodbye are not failures).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dc.h"

/* ------------------------------------------------------------ whom a hello came from or went to */

static axon_dc_hello_peer_t **axon_dc_bye_bucket(axon_dc_iface_t *iface,
                                                 const axon_dc_target_t *target)
{
    uint64_t h = ((uintptr_t)target->ah ^ ((uint64_t)target->dct_num << 32)) *
                 0x9E3779B97F4A7C15ull;

    return &iface->hello_peers[(h >> 40) & (AXON_DC_HELLO_HASH - 1)];
}

/* The same DCT: address handle and number (a new key is a new iface on it) */
static int axon_dc_bye_same_dct(const axon_dc_target_t *a, const axon_dc_target_t *b)
{
    return (a->dct_num == b->dct_num) && (a->ah == b->ah);
}

/* Where target's entry is linked, or where a new one goes (*pp == NULL) */
static axon_dc_hello_peer_t **axon_dc_bye_find(axon_dc_iface_t *iface,
                                               const axon_dc_target_t *target)
{
    axon_dc_hello_peer_t **pp = axon_dc_bye_bucket(iface, target);

    while ((*pp != NULL) && !axon_dc_bye_same_dct(&(*pp)->target, target)) {
        pp = &(*pp)->next;
    }
    return pp;
}

static void axon_dc_bye_remember(axon_dc_iface_t *iface, const axon_dc_target_t *target)
{
    axon_dc_hello_peer_t **pp = axon_dc_bye_find(iface, target);
    axon_dc_hello_peer_t *peer = *pp;

    if (peer == NULL) {
        peer = calloc(1, sizeof(*peer));
        if (peer == NULL) {
            axon_error("%s: no memory to record DCT 0x%x: it gets no goodbye from us",
                       iface->name, target->dct_num);
            return;
        }
        *pp = peer;
        ++iface->num_hello_peers;
    }
    peer->target = *target;   /* a new key: a new iface on the same DCT number */
}

void axon_dc_bye_forget(axon_dc_iface_t *iface, const axon_dc_target_t *target)
{
    axon_dc_hello_peer_t **pp = axon_dc_bye_find(iface, target);
    axon_dc_hello_peer_t *peer = *pp;

    if ((peer != NULL) && (peer->target.dc_key == target->dc_key)) {
        *pp = peer->next;
        free(peer);
        --iface->num_hello_peers;
    }
}

void axon_dc_bye_cleanup(axon_dc_iface_t *iface)
{
    axon_dc_hello_peer_t *peer;
    unsigned i;

    for (i = 0; i < AXON_DC_HELLO_HASH; ++i) {
        while ((peer = iface->hello_peers[i]) != NULL) {
            iface->hello_peers[i] = peer->next;
            free(peer);
        }
    }
    iface->num_hello_peers = 0;
}

/* ------------------------------------------------------------ hello */

axon_status_t axon_dc_bye_hello(axon_dc_iface_t *iface, axon_dc_dci_t *dci, axon_dc_ep_t *ep)
{
    axon_status_t status;

    ep->flags &= ~AXON_DC_EP_F_HELLO_DUE;
    status = axon_dc_post_signed(iface, dci, ep, &ep->target, AXON_DC_MSG_HELLO, 0, ep->id);
    if (status != AXON_OK) {
        ep->flags |= AXON_DC_EP_F_HELLO_DUE;
        return status;
    }
    /* it gets our goodbye too: it forgets us then, and does not say goodbye to a DCT
     * that is gone (which would hold its close for the retries) */
    axon_dc_bye_remember(iface, &ep->target);
    return AXON_OK;
}

/* ------------------------------------------------------------ goodbye received */

/*
 * Goodbyes crossed: the peer closes too, and its DCT may be gone before ours
 * reaches it; waiting for that completion would hold our close up to
 * AXON_DC_CLOSE_WAIT_SEC (both sides of an MPI_Finalize close at once).
 */
static void axon_dc_bye_crossed(axon_dc_iface_t *iface, const axon_dc_target_t *target)
{
    axon_dc_dci_t *dci;
    unsigned i;

    for (i = 0; i < iface->num_created; ++i) {
        dci = &iface->dcis[i];
        if (axon_dc_bye_same_dct(&dci->bye_to, target)) {
            dci->bye_moot = 1;
        }
    }
}

static void axon_dc_bye_peer_closed(axon_dc_iface_t *iface, const axon_dc_target_t *target)
{
    axon_dc_ep_t *ep;
    unsigned i, closed = 0;

    for (i = 0; i < iface->eps_size; ++i) {
        ep = iface->eps[i];
        if ((ep != NULL) && (ep->target.ah == target->ah) &&
            (ep->target.dct_num == target->dct_num) && (ep->target.dc_key == target->dc_key)) {
            ep->flags |= AXON_DC_EP_F_PEER_BYE;
            axon_dc_ep_fail(iface, ep, AXON_ERR_CONNECTION_RESET, "the peer closed");
            ++closed;
        }
    }
    axon_debug("%s: goodbye from DCT 0x%x: %u endpoints to it closed", iface->name,
               target->dct_num, closed);
}

void axon_dc_bye_rx(axon_dc_iface_t *iface, const axon_dc_hdr_t *hdr, uint32_t length)
{
    axon_dc_target_t target;

    if (!axon_dc_sender_target(iface, hdr, length, &target)) {
        return;
    }
    if (hdr->type == AXON_DC_MSG_HELLO) {
        axon_dc_bye_remember(iface, &target);
    } else {
        axon_dc_bye_forget(iface, &target);
        axon_dc_bye_peer_closed(iface, &target);
        axon_dc_bye_crossed(iface, &target);
    }
}

/* ------------------------------------------------------------ goodbye sent */

/*
 * One goodbye per idle DCI at a time: a goodbye to a peer that died breaks
 * its DCI (retries run out), and must not flush those to live peers.
 */
void axon_dc_bye_send_all(axon_dc_iface_t *iface, double deadline)
{
    axon_dc_hello_peer_t *peer;
    axon_dc_dci_t *dci;
    unsigned bucket, sent = 0, total;

    /* hellos (and goodbyes) still in the receive queue count: a peer that is not
     * progressing may have said hello long ago */
    while ((axon_dc_iface_poll(iface) > 0) && (axon_sys_time_sec() < deadline)) {
    }
    total = iface->num_hello_peers;
    for (bucket = 0; bucket < AXON_DC_HELLO_HASH; ++bucket) {
        while (iface->hello_peers[bucket] != NULL) {
            while (((dci = axon_dc_dci_idle(iface)) == NULL) &&
                   (axon_sys_time_sec() < deadline)) {
                axon_dc_iface_poll(iface);
            }
            /* the polls may have taken that peer's own goodbye, which forgot it */
            peer = iface->hello_peers[bucket];
            if (peer == NULL) {
                break;
            }
            if ((dci == NULL) ||
                (axon_dc_post_signed(iface, dci, NULL, &peer->target, AXON_DC_MSG_BYE, 0,
                                     0) != AXON_OK)) {
                goto out;
            }
            ++sent;
            dci->bye_to = peer->target;   /* its only WR: the DCI was idle */
            iface->hello_peers[bucket] = peer->next;
            free(peer);
            --iface->num_hello_peers;
        }
    }
out:
    if (sent < total) {
        axon_debug("%s: closing: %u of %u peers got no goodbye (no idle DCI or buffer "
                   "within %gs)", iface->name, total - sent, total, AXON_DC_CLOSE_WAIT_SEC);
    }
    (void)axon_dc_dci_drain(iface, deadline);   /* the goodbyes through */
}
