/*
 * dc's DCI pool: which DCI an endpoint posts on (AXON_DC_POLICY), posting,
 * send completions, and the recovery of a DCI a failed WR broke.
 *
 * dcs policies: a DCI is held (out of the free stack) by an endpoint from
 * its first WR until every WR on the DCI completed; then it goes to the
 * first endpoint of the FIFO of waiters, or back to the stack. A grant
 * rides on a held DCI whose WRs all go to the grant's peer, else takes a
 * free (or new) DCI for itself: never one whose other WRs a grant to a dead
 * peer would flush. shared: each endpoint keeps the DCI it was given; a
 * full DCI serves its waiting endpoints in turn.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dc.h"

static inline int axon_dc_policy_dcs(const axon_dc_iface_t *iface)
{
    return iface->config.policy != AXON_DC_POLICY_SHARED;
}

static inline axon_dc_tx_desc_t *axon_dc_dci_desc(axon_dc_iface_t *iface, axon_dc_dci_t *dci,
                                                  uint64_t sn)
{
    return &iface->tx_desc[(size_t)dci->index * iface->tx_depth + (sn & (iface->tx_depth - 1))];
}

axon_dc_tx_desc_t *axon_dc_dci_last_desc(axon_dc_iface_t *iface, axon_dc_dci_t *dci)
{
    return axon_dc_dci_desc(iface, dci, dci->posted - 1);
}

static axon_status_t axon_dc_dci_up(axon_dc_iface_t *iface, axon_dc_dci_t *dci)
{
    return axon_verbs_qp_dci_up(&iface->dev, dci->qp, iface->dc_key, iface->timeout_exp,
                                (uint8_t)iface->config.retry_count, AXON_DC_RNR_RETRY,
                                AXON_DC_MAX_RD_ATOMIC);
}

/*
 * The next DCI of the pool, created when first needed: an iface that talks
 * to one peer at a time has one (a device may charge for every DCI it
 * polls: softib does). NULL when the pool is full or the device refuses
 * (logged once: the pool stays at what it has).
 */
static axon_dc_dci_t *axon_dc_dci_create(axon_dc_iface_t *iface)
{
    axon_dc_dci_t *dci = &iface->dcis[iface->num_created];
    axon_verbs_qp_params_t params;
    axon_dev_qp_cap_t cap;

    if (iface->num_created == iface->num_dci) {
        return NULL;
    }
    memset(&params, 0, sizeof(params));
    params.type         = AXON_DEV_QPT_DC_INI;
    params.send_cq      = iface->send_cq;
    params.recv_cq      = iface->send_cq;
    params.max_send_wr  = iface->tx_depth;
    params.max_inline   = iface->max_inline;
    params.max_send_sge = 3;
    params.qp_context   = iface;
    if (axon_verbs_qp_create(&iface->dev, &params, &dci->qp, &cap) != AXON_OK) {
        goto refused;
    }
    dci->index = (uint8_t)iface->num_created;
    axon_list_init(&dci->line);
    if (axon_dc_dci_up(iface, dci) != AXON_OK) {
        axon_verbs_qp_destroy(dci->qp);
        dci->qp = NULL;
        goto refused;
    }
    if (cap.max_inline_data < iface->max_inline) {
        /* never expected (the inline size was the device's): sends stop inlining */
        axon_warn("%s: DCI %u inlines %u bytes, not %u", iface->name, dci->index,
                  cap.max_inline_data, iface->max_inline);
        iface->max_inline = cap.max_inline_data;
    }
    ++iface->num_created;
    axon_debug("%s: DCI %u created (QP 0x%x)", iface->name, dci->index, dci->qp->qp_num);
    return dci;
refused:
    axon_warn("%s: the pool stays at %u DCIs (AXON_DC_NUM_DCI=%u)", iface->name,
              iface->num_created, iface->num_dci);
    iface->num_dci = (iface->num_created > 0) ? iface->num_created : 1;
    return NULL;
}

axon_status_t axon_dc_dci_pool_init(axon_dc_iface_t *iface)
{
    iface->dcis      = calloc(iface->num_dci, sizeof(*iface->dcis));
    iface->tx_desc   = calloc((size_t)iface->num_dci * iface->tx_depth, sizeof(*iface->tx_desc));
    iface->free_dcis = calloc(iface->num_dci, sizeof(*iface->free_dcis));
    if ((iface->dcis == NULL) || (iface->tx_desc == NULL) || (iface->free_dcis == NULL)) {
        axon_error("%s: cannot allocate %u DCIs", iface->name, iface->num_dci);
        return AXON_ERR_NO_MEMORY;
    }
    if (axon_dc_replay_init(iface) != AXON_OK) {
        return AXON_ERR_NO_MEMORY;
    }
    /* the first now, so that a device without DCIs fails the open, not a send */
    if (axon_dc_dci_create(iface) == NULL) {
        return AXON_ERR_IO_ERROR;
    }
    iface->free_dcis[iface->num_free++] = 0;
    return AXON_OK;
}

axon_dc_dci_t *axon_dc_dci_of_new_ep(axon_dc_iface_t *iface)
{
    unsigned index = iface->next_ep_dci++ % iface->num_dci;

    if ((index >= iface->num_created) && (axon_dc_dci_create(iface) == NULL)) {
        index %= iface->num_created;
    }
    return &iface->dcis[index];
}

int axon_dc_dci_drain(axon_dc_iface_t *iface, double deadline)
{
    unsigned i, busy;

    for (;;) {
        for (busy = 0, i = 0; i < iface->num_created; ++i) {
            busy += (iface->dcis[i].qp != NULL) && !iface->dcis[i].bye_moot &&
                    (iface->dcis[i].posted != iface->dcis[i].completed);
        }
        if ((busy == 0) || (axon_sys_time_sec() >= deadline)) {
            break;
        }
        axon_dc_iface_poll(iface);
    }
    if (busy > 0) {
        axon_debug("%s: closing with %u DCIs still busy", iface->name, busy);
    }
    return busy == 0;
}

axon_dc_dci_t *axon_dc_dci_idle(axon_dc_iface_t *iface)
{
    axon_dc_dci_t *dci;
    unsigned i;

    for (i = 0; i < iface->num_created; ++i) {
        dci = &iface->dcis[i];
        if ((dci->qp != NULL) && !dci->broken && (dci->posted == dci->completed)) {
            return dci;
        }
    }
    return axon_dc_dci_create(iface);   /* NULL once the pool is full */
}

void axon_dc_dci_pool_cleanup(axon_dc_iface_t *iface)
{
    unsigned i;

    axon_dc_replay_cleanup(iface);
    if (iface->dcis != NULL) {
        for (i = 0; i < iface->num_created; ++i) {
            if (iface->dcis[i].qp != NULL) {
                axon_verbs_qp_destroy(iface->dcis[i].qp);
            }
        }
    }
    free(iface->dcis);
    free(iface->tx_desc);
    free(iface->free_dcis);
    iface->dcis = NULL;
}

/* ------------------------------------------------------------ holding and releasing */

static void axon_dc_dci_assign(axon_dc_iface_t *iface, axon_dc_dci_t *dci, axon_dc_ep_t *ep)
{
    dci->held         = 1;
    dci->owner        = ep;
    dci->grant_to.ah  = NULL;
    dci->quota_used   = 0;
    dci->handoff_tick = iface->tick;
    ep->dci           = dci;
}

static void axon_dc_dci_to_first_waiter(axon_dc_iface_t *iface, axon_dc_dci_t *dci)
{
    axon_dc_ep_t *next = axon_list_first(&iface->waiters, axon_dc_ep_t, wait_link);

    axon_list_del(&next->wait_link);
    next->flags &= ~AXON_DC_EP_F_WAITING;
    axon_dc_dci_assign(iface, dci, next);
}

/* dcs policies: dci drained (or its owner left it unused): grants waiting, the first
 * waiting endpoint, or the free stack. */
static void axon_dc_dci_release(axon_dc_iface_t *iface, axon_dc_dci_t *dci)
{
    if (dci->owner != NULL) {
        dci->owner->dci = NULL;
        dci->owner      = NULL;
    }
    if (!axon_list_is_empty(&iface->waiters) && (iface->grants_count == 0)) {
        axon_dc_dci_to_first_waiter(iface, dci);
        return;
    }
    dci->held = 0;
    iface->free_dcis[iface->num_free++] = dci->index;
    if (iface->grants_count > 0) {
        axon_dc_fc_progress(iface);   /* grants first: senders wait for them */
    }
}

/* The same DCT: a restarted peer may get a dead one's DCT number, not its key. */
static inline int axon_dc_target_same(const axon_dc_target_t *a, const axon_dc_target_t *b)
{
    return (a->dct_num == b->dct_num) && (a->ah == b->ah) && (a->dc_key == b->dc_key);
}

/* dcs: a held DCI whose WRs all go to target (its owner's, or its grants') */
static axon_dc_dci_t *axon_dc_dci_held_to(axon_dc_iface_t *iface, const axon_dc_target_t *target)
{
    axon_dc_dci_t *dci;
    unsigned i;

    for (i = 0; i < iface->num_created; ++i) {
        dci = &iface->dcis[i];
        if (dci->held && !dci->broken &&
            axon_dc_target_same((dci->owner != NULL) ? &dci->owner->target : &dci->grant_to,
                                target)) {
            return dci;
        }
    }
    return NULL;
}

/* shared: a full DCI serves the endpoints that found it full in turn, one WR each */
static axon_dc_dci_t *axon_dc_dci_shared_turn(axon_dc_iface_t *iface, axon_dc_dci_t *dci,
                                              axon_dc_ep_t *ep)
{
    int room = axon_dc_dci_has_room(iface, dci);

    if (!(ep->flags & AXON_DC_EP_F_WAITING)) {
        if (room && axon_list_is_empty(&dci->line)) {
            return dci;
        }
        if (axon_list_is_empty(&dci->line)) {
            dci->handoff_tick = iface->tick;
        }
        ep->flags |= AXON_DC_EP_F_WAITING;
        axon_list_add_tail(&dci->line, &ep->wait_link);
        return NULL;
    }
    if (room && (axon_list_first(&dci->line, axon_dc_ep_t, wait_link) == ep)) {
        axon_list_del(&ep->wait_link);
        ep->flags        &= ~AXON_DC_EP_F_WAITING;
        dci->handoff_tick = iface->tick;
        return dci;
    }
    return NULL;
}

axon_dc_dci_t *axon_dc_dci_for_ep(axon_dc_iface_t *iface, axon_dc_ep_t *ep)
{
    axon_dc_dci_t *dci = ep->dci;

    if (__builtin_expect(iface->config.policy == AXON_DC_POLICY_SHARED, 0)) {
        return axon_dc_dci_shared_turn(iface, dci, ep);
    }
    if (__builtin_expect(dci != NULL, 1)) {
        if (__builtin_expect(!axon_dc_dci_has_room(iface, dci), 0)) {
            return NULL;
        }
        /* dcs_quota: past its quota while others wait, the ep lets the DCI drain and go */
        if (__builtin_expect((iface->config.policy == AXON_DC_POLICY_DCS_QUOTA) &&
                             (dci->quota_used >= iface->config.quota) &&
                             !axon_list_is_empty(&iface->waiters), 0)) {
            return NULL;
        }
        return dci;
    }
    /* dcs policies without a DCI: a free one, unless others wait first; one carrying
     * grants to the same peer; or a new one. Else the line. */
    if (!(ep->flags & AXON_DC_EP_F_WAITING)) {
        dci = (iface->num_free > 0) ? &iface->dcis[iface->free_dcis[--iface->num_free]] : NULL;
        if ((dci == NULL) && axon_list_is_empty(&iface->waiters)) {
            dci = axon_dc_dci_held_to(iface, &ep->target);
            if ((dci != NULL) && ((dci->owner != NULL) || !axon_dc_dci_has_room(iface, dci))) {
                dci = NULL;   /* another endpoint's to the same peer, or full */
            }
            if (dci == NULL) {
                dci = axon_dc_dci_create(iface);
            }
        }
        if (dci != NULL) {
            axon_dc_dci_assign(iface, dci, ep);
            return dci;
        }
    }
    if (!(ep->flags & AXON_DC_EP_F_WAITING)) {
        ep->flags |= AXON_DC_EP_F_WAITING;
        axon_list_add_tail(&iface->waiters, &ep->wait_link);
    }
    return NULL;
}

axon_dc_dci_t *axon_dc_dci_for_probe(axon_dc_iface_t *iface, axon_dc_ep_t *ep)
{
    axon_dc_dci_t *dci = ep->dci;

    if (ep->flags & AXON_DC_EP_F_WAITING) {
        return NULL;
    }
    if (dci != NULL) {   /* held, or shared: with room and nobody in line */
        return (axon_dc_dci_has_room(iface, dci) &&
                ((iface->config.policy != AXON_DC_POLICY_SHARED) ||
                 axon_list_is_empty(&dci->line))) ? dci : NULL;
    }
    if (iface->num_free == 0) {
        return NULL;
    }
    dci = &iface->dcis[iface->free_dcis[--iface->num_free]];
    axon_dc_dci_assign(iface, dci, ep);
    return dci;
}

axon_dc_dci_t *axon_dc_dci_for_grant(axon_dc_iface_t *iface, const axon_dc_target_t *target)
{
    axon_dc_dci_t *dci;
    unsigned i;

    if (axon_dc_policy_dcs(iface)) {
        /* with other WRs only to the same target (that peer dead, the grant's too):
         * a grant to a dead peer must not break an endpoint's DCI to a live one */
        dci = axon_dc_dci_held_to(iface, target);
        if (dci != NULL) {
            return axon_dc_dci_has_ctrl_room(iface, dci) ? dci : NULL;
        }
        dci = (iface->num_free > 0) ? &iface->dcis[iface->free_dcis[--iface->num_free]] :
              axon_dc_dci_create(iface);
        if (dci == NULL) {
            return NULL;   /* the next release serves the grants first */
        }
        dci->held         = 1;    /* no owner: released when it drains */
        dci->owner        = NULL;
        dci->grant_to     = *target;
        dci->handoff_tick = iface->tick;
        return dci;
    }
    for (i = 0; i < iface->num_created; ++i) {
        dci = &iface->dcis[iface->next_grant_dci++ % iface->num_created];
        if (axon_dc_dci_has_ctrl_room(iface, dci)) {
            return dci;
        }
    }
    return NULL;
}

void axon_dc_dci_timers(axon_dc_iface_t *iface)
{
    axon_dc_dci_t *dci;
    axon_dc_ep_t *head;
    unsigned i;

    if (!axon_dc_policy_dcs(iface)) {
        /* a head of line that stopped asking (nothing left to send) steps out */
        for (i = 0; i < iface->num_created; ++i) {
            dci = &iface->dcis[i];
            if (!axon_list_is_empty(&dci->line) && axon_dc_dci_has_room(iface, dci) &&
                (iface->tick - dci->handoff_tick >= AXON_DC_HANDOFF_TICKS)) {
                head = axon_list_first(&dci->line, axon_dc_ep_t, wait_link);
                axon_list_del(&head->wait_link);
                head->flags      &= ~AXON_DC_EP_F_WAITING;
                dci->handoff_tick = iface->tick;
            }
        }
        return;
    }
    for (i = 0; i < iface->num_created; ++i) {
        dci = &iface->dcis[i];
        if (dci->held && !dci->broken && (dci->posted == dci->completed) &&
            (iface->tick - dci->handoff_tick >= AXON_DC_HANDOFF_TICKS)) {
            axon_dc_dci_release(iface, dci);   /* handed over, never used */
        }
    }
    /* free DCIs kept for grants that could not go (no buffer) serve the line */
    while ((iface->num_free > 0) && !axon_list_is_empty(&iface->waiters)) {
        axon_dc_dci_to_first_waiter(iface, &iface->dcis[iface->free_dcis[--iface->num_free]]);
    }
}

void axon_dc_dci_ep_detach(axon_dc_iface_t *iface, axon_dc_ep_t *ep)
{
    axon_dc_dci_t *dci = ep->dci;
    uint64_t sn;

    if (ep->flags & AXON_DC_EP_F_WAITING) {
        axon_list_del(&ep->wait_link);
        ep->flags &= ~AXON_DC_EP_F_WAITING;
    }
    if (dci == NULL) {
        return;
    }
    for (sn = dci->completed; sn != dci->posted; ++sn) {
        axon_dc_tx_desc_t *d = axon_dc_dci_desc(iface, dci, sn);
        if (d->ep == ep) {
            d->ep = NULL;   /* completes as nobody's */
        }
    }
    axon_dc_replay_ep_detach(iface, dci, ep);
    ep->dci = NULL;
    if (axon_dc_policy_dcs(iface)) {
        dci->owner    = NULL;   /* its WRs go where grants may not follow */
        dci->grant_to.ah = NULL;
        if (!dci->broken && (dci->posted == dci->completed)) {
            axon_dc_dci_release(iface, dci);
        }
    }
}

/* ------------------------------------------------------------ posting */

axon_status_t axon_dc_dci_post(axon_dc_iface_t *iface, axon_dc_dci_t *dci, axon_dc_ep_t *ep,
                               const axon_dc_target_t *target, axon_dev_send_wr_t *wr,
                               void *buf, axon_tl_completion_t *comp,
                               axon_rcache_region_t *region)
{
    uint64_t sn          = dci->posted;
    axon_dc_tx_desc_t *d = axon_dc_dci_desc(iface, dci, sn);
    axon_dev_send_wr_t *bad;
    axon_status_t status;
    int ret;

    if (__builtin_expect((ep != NULL) && (ep->flags & AXON_DC_EP_F_HELLO_DUE), 0)) {
        status = axon_dc_bye_hello(iface, dci, ep);   /* takes the slot at sn */
        if (status != AXON_OK) {
            return status;
        }
        sn = dci->posted;
        d  = axon_dc_dci_desc(iface, dci, sn);
    }
    wr->wr_id             = (uintptr_t)d;
    wr->next              = NULL;
    wr->send_flags       |= AXON_DEV_SEND_SIGNALED;  /* its completion releases the DCI */
    wr->dc.ah             = target->ah->ah;
    wr->dc.dct_number     = target->dct_num;
    wr->dc.dct_access_key = target->dc_key;
    ret = axon_dev_post_send(dci->qp, wr, &bad);
    if (__builtin_expect(ret != 0, 0)) {
        axon_error("%s: post_send on DCI %u to DCT 0x%x (opcode %d): error %d", iface->name,
                   dci->index, target->dct_num, wr->opcode, ret);
        return AXON_ERR_IO_ERROR;
    }
    d->ep      = ep;
    /* grants carry their grant behind the header (to queue it again); goodbyes do not */
    d->grant   = (ep == NULL) && (buf != NULL) &&
                 (((const axon_dc_hdr_t *)buf)->type == AXON_DC_MSG_FC_GRANT);
    d->buf     = buf;
    d->comp    = comp;
    d->region  = region;
    if (iface->tx_copy != NULL) {
        axon_dc_replay_save(iface, d, wr);   /* shared: in case another peer breaks the DCI */
    }
    dci->posted = sn + 1;
    if (ep != NULL) {
        ++dci->quota_used;
        ++ep->outstanding;
        ep->last_tx_ns = iface->now_ns;
    }
    return AXON_OK;
}

/* ------------------------------------------------------------ completions */

static axon_status_t axon_dc_wc_status(axon_dev_wc_status_t status)
{
    return (status == AXON_DEV_WC_RETRY_EXC_ERR) ? AXON_ERR_ENDPOINT_TIMEOUT :
           (status == AXON_DEV_WC_WR_FLUSH_ERR) ? AXON_ERR_CANCELED :
           (status == AXON_DEV_WC_REM_ACCESS_ERR) ? AXON_ERR_REMOTE_ACCESS :
           AXON_ERR_CONNECTION_RESET;
}

/* Every WR of a broken DCI completed: back to RESET and up, then to whoever waits. */
static void axon_dc_dci_recover(axon_dc_iface_t *iface, axon_dc_dci_t *dci)
{
    if ((axon_verbs_qp_reset(&iface->dev, dci->qp) != AXON_OK) ||
        (axon_dc_dci_up(iface, dci) != AXON_OK)) {
        axon_error("%s: DCI %u could not be recovered: it stays out of use", iface->name,
                   dci->index);
        axon_dc_replay_post(iface, dci, 0);
        return;
    }
    dci->broken = 0;
    axon_debug("%s: DCI %u recovered", iface->name, dci->index);
    axon_dc_replay_post(iface, dci, 1);   /* shared: flushed work first, in order */
    if (axon_dc_policy_dcs(iface) && dci->held &&
        ((dci->owner == NULL) || (dci->owner->status != AXON_OK))) {
        axon_dc_dci_release(iface, dci);
    }
}

/*
 * A WR completed in error. The first error of a DCI names the WR that broke
 * it: its endpoint fails (a grant's target is dead: the grant is dropped).
 * Those after it are flushed: an endpoint that failed already gets its
 * status; another endpoint's (shared) work is kept and posted again once
 * the DCI is back (dc_replay.c; failed, said so, where it cannot be); a
 * flushed grant is queued again.
 */
static axon_status_t axon_dc_dci_tx_error(axon_dc_iface_t *iface, axon_dc_dci_t *dci,
                                          axon_dc_tx_desc_t *d, const axon_dev_wc_t *wc)
{
    axon_status_t status = axon_dc_wc_status(wc->status);
    axon_dc_ep_t *ep     = d->ep;

    if ((wc->status != AXON_DEV_WC_WR_FLUSH_ERR) && !dci->broken) {
        dci->broken = 1;
        if (ep != NULL) {
            axon_dc_ep_fail(iface, ep, (status == AXON_ERR_REMOTE_ACCESS) ?
                            AXON_ERR_CONNECTION_RESET : status,
                            axon_dev_wc_status_str(wc->status));
        } else {
            axon_debug("%s: a %s failed on DCI %u (%s)", iface->name,
                       d->grant ? "grant (its requester is gone)" :
                                  "goodbye or WR of a destroyed endpoint",
                       dci->index, axon_dev_wc_status_str(wc->status));
        }
        return status;
    }
    dci->broken = 1;
    if (ep == NULL) {
        if (d->grant) {
            axon_dc_fc_grant_requeue(iface, d->buf);
        }
        return AXON_ERR_CANCELED;
    }
    if ((ep->status == AXON_OK) && axon_dc_replay_keep(iface, dci, d)) {
        return AXON_OK;   /* d holds nothing now: it completes when posted again */
    }
    if (ep->status == AXON_OK) {
        axon_dc_ep_fail(iface, ep, AXON_ERR_CONNECTION_RESET,
                        "its work was flushed when another peer's failure broke the shared DCI");
    }
    return (axon_status_t)ep->status;
}

void axon_dc_dci_desc_release(axon_dc_iface_t *iface, axon_dc_tx_desc_t *d)
{
    if (d->buf != NULL) {
        axon_verbs_bufpool_put(&iface->tx_pool, d->buf);
        d->buf = NULL;
    }
    if (d->region != NULL) {
        axon_rcache_put(iface->rcache, d->region);
        d->region = NULL;
    }
    if (d->iov_key != NULL) {
        axon_rc_md_iov_key_put(iface->md, d->iov_key);
        d->iov_key = NULL;
    }
}

void axon_dc_dci_tx_completion(axon_dc_iface_t *iface, const axon_dev_wc_t *wc)
{
    axon_dc_tx_desc_t *d = (axon_dc_tx_desc_t *)(uintptr_t)wc->wr_id;
    size_t slot          = (size_t)(d - iface->tx_desc);
    axon_dc_dci_t *dci   = &iface->dcis[slot / iface->tx_depth];
    axon_status_t status = AXON_OK;
    axon_tl_completion_t *comp;
    axon_dc_ep_t *ep;

    if (__builtin_expect(wc->status != AXON_DEV_WC_SUCCESS, 0)) {
        status = axon_dc_dci_tx_error(iface, dci, d, wc);
    }
    ++dci->completed;   /* every WR is signaled and a DCI completes in order */
    ep = d->ep;
    axon_dc_dci_desc_release(iface, d);
    if (ep != NULL) {
        --ep->outstanding;
        d->ep = NULL;
    }
    comp    = d->comp;   /* before a recovery: its WRs posted again may take d's slot */
    d->comp = NULL;
    if (dci->posted == dci->completed) {
        if (__builtin_expect(dci->broken, 0)) {
            axon_dc_dci_recover(iface, dci);
        } else if (axon_dc_policy_dcs(iface) && dci->held) {
            axon_dc_dci_release(iface, dci);
        }
    }
    if (comp != NULL) {
        comp->func(comp, status);
    }
}
