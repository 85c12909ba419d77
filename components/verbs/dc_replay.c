/*
 * shared policy: a DCI carries the work of several endpoints, so a WR to a
 * peer that is gone breaks it under the others' WRs, which the device
 * flushes. Those endpoints are alive and their work never left (a DCI sends
 * to one target at a time, in order): it goes out again once the DCI is
 * back, in the order it was posted, before anything newer (a broken DCI
 * takes no new work). A copy of each WR is kept from its post to its
 * completion for that, inline data included (the caller's bytes are gone
 * once the post returned); bounce buffers, registrations and completions
 * stay with the kept WR until it completes for good.
 *
 * The dcs policies never need it: a DCI holds one endpoint's work (and
 * grants to that endpoint's peer) at a time.
 */
#include <stdlib.h>
#include <string.h>
#include "dc.h"

/* SGEs a copy of a WR that is not inline holds: dc's have one */
#define AXON_DC_COPY_SGE 2

typedef struct axon_dc_tx_copy {
    axon_dev_send_wr_t wr;
    axon_dev_sge_t     sge[AXON_DC_COPY_SGE];
    uint32_t           inline_len;   /* bytes of inl; wr.num_sge < 0: no copy */
    uint8_t            inl[];        /* up to iface->max_inline */
} axon_dc_tx_copy_t;

/* A flushed WR kept: what its descriptor held, then its copy */
typedef struct axon_dc_kept {
    axon_dc_tx_desc_t desc;
    axon_dc_tx_copy_t copy;
} axon_dc_kept_t;

static inline size_t axon_dc_kept_size(const axon_dc_iface_t *iface)
{
    return (offsetof(axon_dc_kept_t, copy) + iface->copy_size + 7) & ~(size_t)7;
}

static inline axon_dc_kept_t *axon_dc_kept(const axon_dc_iface_t *iface, axon_dc_dci_t *dci,
                                           uint32_t i)
{
    return (axon_dc_kept_t *)(dci->replay + i * axon_dc_kept_size(iface));
}

static inline axon_dc_tx_copy_t *axon_dc_copy_of(const axon_dc_iface_t *iface,
                                                 const axon_dc_tx_desc_t *d)
{
    return (axon_dc_tx_copy_t *)(iface->tx_copy +
                                 (size_t)(d - iface->tx_desc) * iface->copy_size);
}

axon_status_t axon_dc_replay_init(axon_dc_iface_t *iface)
{
    if (iface->config.policy != AXON_DC_POLICY_SHARED) {
        return AXON_OK;
    }
    iface->copy_size = (sizeof(axon_dc_tx_copy_t) + iface->max_inline + 7) & ~(size_t)7;
    iface->tx_copy   = calloc((size_t)iface->num_dci * iface->tx_depth, iface->copy_size);
    if (iface->tx_copy == NULL) {
        axon_error("%s: cannot allocate the copies of %u x %u WRs", iface->name,
                   iface->num_dci, iface->tx_depth);
        return AXON_ERR_NO_MEMORY;
    }
    return AXON_OK;
}

void axon_dc_replay_save(axon_dc_iface_t *iface, const axon_dc_tx_desc_t *d,
                         const axon_dev_send_wr_t *wr)
{
    axon_dc_tx_copy_t *copy = axon_dc_copy_of(iface, d);
    uint32_t len = 0;
    int i;

    copy->wr      = *wr;
    copy->wr.next = NULL;
    if (!(wr->send_flags & AXON_DEV_SEND_INLINE)) {
        if (wr->num_sge > AXON_DC_COPY_SGE) {
            copy->wr.num_sge = -1;   /* none of ours: failed as without copies */
            return;
        }
        memcpy(copy->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(copy->sge[0]));
        return;
    }
    for (i = 0; i < wr->num_sge; ++i) {   /* am_short: header, AM header, payload */
        if (wr->sg_list[i].length > iface->max_inline - len) {
            copy->wr.num_sge = -1;
            return;
        }
        memcpy(copy->inl + len, (const void *)(uintptr_t)wr->sg_list[i].addr,
               wr->sg_list[i].length);
        len += wr->sg_list[i].length;
    }
    copy->inline_len = len;
}

int axon_dc_replay_keep(axon_dc_iface_t *iface, axon_dc_dci_t *dci, axon_dc_tx_desc_t *d)
{
    size_t size = axon_dc_kept_size(iface);
    axon_dc_kept_t *k;

    if ((iface->tx_copy == NULL) || (axon_dc_copy_of(iface, d)->wr.num_sge < 0)) {
        return 0;
    }
    if ((dci->replay == NULL) && ((dci->replay = malloc(iface->tx_depth * size)) == NULL)) {
        axon_error("%s: no memory to keep DCI %u's flushed work", iface->name, dci->index);
        return 0;
    }
    k = axon_dc_kept(iface, dci, dci->replay_count++);   /* < tx_depth: the DCI's WRs */
    memcpy(&k->copy, axon_dc_copy_of(iface, d), iface->copy_size);
    k->desc    = *d;
    d->ep      = NULL;   /* its completion is the kept one's: nothing to release now */
    d->buf     = NULL;
    d->comp    = NULL;
    d->region  = NULL;
    d->iov_key = NULL;
    return 1;
}

/* A kept WR that does not go again: what it held goes back, its completion runs. */
static void axon_dc_replay_drop(axon_dc_iface_t *iface, axon_dc_tx_desc_t *d,
                                axon_status_t status)
{
    axon_tl_completion_t *comp = d->comp;

    axon_dc_dci_desc_release(iface, d);
    if (d->ep != NULL) {
        --d->ep->outstanding;
    }
    if (comp != NULL) {
        comp->func(comp, status);
    }
}

/* Post kept WR k again on dci: AXON_OK, or why not (logged by the post). */
static axon_status_t axon_dc_replay_one(axon_dc_iface_t *iface, axon_dc_dci_t *dci,
                                        axon_dc_kept_t *k)
{
    axon_dc_ep_t *ep = k->desc.ep;
    axon_dev_send_wr_t wr = k->copy.wr;
    axon_status_t status;

    wr.sg_list = k->copy.sge;
    if (wr.send_flags & AXON_DEV_SEND_INLINE) {
        k->copy.sge[0].addr   = (uintptr_t)k->copy.inl;
        k->copy.sge[0].length = k->copy.inline_len;
        k->copy.sge[0].lkey   = 0;
        wr.num_sge            = 1;
    }
    status = axon_dc_dci_post(iface, dci, ep, &ep->target, &wr, k->desc.buf, k->desc.comp,
                              k->desc.region);
    if (status != AXON_OK) {
        return status;
    }
    axon_dc_dci_last_desc(iface, dci)->iov_key = k->desc.iov_key;
    --ep->outstanding;   /* counted at its first post, still outstanding */
    return AXON_OK;
}

void axon_dc_replay_post(axon_dc_iface_t *iface, axon_dc_dci_t *dci, int up)
{
    uint32_t count = dci->replay_count, i, again = 0;
    axon_dc_kept_t *k;
    axon_dc_ep_t *ep;

    dci->replay_count = 0;   /* what is posted now is in the ring again */
    for (i = 0; i < count; ++i) {
        k  = axon_dc_kept(iface, dci, i);
        ep = k->desc.ep;
        if ((ep == NULL) || (ep->status != AXON_OK)) {
            axon_dc_replay_drop(iface, &k->desc, (ep == NULL) ? AXON_ERR_CANCELED :
                                                                (axon_status_t)ep->status);
        } else if (!up || (axon_dc_replay_one(iface, dci, k) != AXON_OK)) {
            axon_dc_ep_fail(iface, ep, AXON_ERR_CONNECTION_RESET,
                            "its work was flushed by another peer's failure and the DCI "
                            "could not take it again");
            axon_dc_replay_drop(iface, &k->desc, (axon_status_t)ep->status);
        } else {
            ++again;
        }
    }
    if (again > 0) {
        axon_debug("%s: DCI %u: %u WRs another peer's failure flushed posted again",
                   iface->name, dci->index, again);
    }
}

void axon_dc_replay_ep_detach(axon_dc_iface_t *iface, axon_dc_dci_t *dci, axon_dc_ep_t *ep)
{
    uint32_t i;

    for (i = 0; i < dci->replay_count; ++i) {
        if (axon_dc_kept(iface, dci, i)->desc.ep == ep) {
            axon_dc_kept(iface, dci, i)->desc.ep = NULL;   /* canceled when the DCI is back */
        }
    }
}

void axon_dc_replay_cleanup(axon_dc_iface_t *iface)
{
    axon_dc_dci_t *dci;
    uint32_t i, n;

    for (n = 0; (iface->dcis != NULL) && (n < iface->num_created); ++n) {
        dci = &iface->dcis[n];
        for (i = 0; i < dci->replay_count; ++i) {
            axon_dc_kept(iface, dci, i)->desc.ep   = NULL;
            axon_dc_kept(iface, dci, i)->desc.comp = NULL;   /* the worker is going away */
            axon_dc_replay_drop(iface, &axon_dc_kept(iface, dci, i)->desc, AXON_ERR_CANCELED);
        }
        free(dci->replay);
        dci->replay       = NULL;
        dci->replay_count = 0;
    }
    free(iface->tx_copy);
    iface->tx_copy = NULL;
}
