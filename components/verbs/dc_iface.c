/* dc iface: open, close, progress, the receive path and the address-handle cache. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dc.h"

static void axon_dc_iface_close(axon_iface_t *tl_iface);
static unsigned axon_dc_iface_progress(axon_iface_t *tl_iface);

static axon_status_t axon_dc_iface_get_address(axon_iface_t *tl_iface, void *dev_addr,
                                               void *iface_addr)
{
    axon_dc_iface_t *iface = (axon_dc_iface_t *)tl_iface;
    axon_dc_iface_addr_t addr;

    axon_verbs_dev_addr_pack(&iface->dev, dev_addr);
    addr.dct_num = iface->dct->dct_num;
    addr.dc_key  = iface->dc_key;
    memcpy(iface_addr, &addr, sizeof(addr));
    return AXON_OK;
}

static int axon_dc_iface_is_reachable(axon_iface_t *tl_iface, const void *dev_addr,
                                      const void *iface_addr)
{
    axon_dc_iface_t *iface = (axon_dc_iface_t *)tl_iface;
    axon_verbs_dev_addr_t addr;

    if ((dev_addr == NULL) || (iface_addr == NULL)) {
        return 0;
    }
    axon_verbs_dev_addr_unpack(dev_addr, &addr);
    return axon_verbs_dev_addr_reachable(&iface->dev, &addr);
}

static const axon_iface_ops_t axon_dc_iface_ops = {
    .iface_close        = axon_dc_iface_close,
    .iface_progress     = axon_dc_iface_progress,
    .dev_addr_len       = AXON_VERBS_DEV_ADDR_LEN,
    .iface_addr_len     = sizeof(axon_dc_iface_addr_t),
    .iface_get_address  = axon_dc_iface_get_address,
    .iface_is_reachable = axon_dc_iface_is_reachable,
    .ep_create          = axon_dc_ep_create,
    .ep_destroy         = axon_dc_ep_destroy,
    .ep_am_short        = axon_dc_ep_am_short,
    .ep_am_bcopy        = axon_dc_ep_am_bcopy,
    .ep_am_zcopy        = NULL,
    .ep_get_zcopy       = axon_dc_ep_get_zcopy,
    .ep_put_zcopy       = axon_dc_ep_put_zcopy,
    .ep_get_zcopy_iov   = axon_dc_ep_get_zcopy_iov,
    .ep_put_zcopy_iov   = axon_dc_ep_put_zcopy_iov,
    .ep_flush           = axon_dc_ep_flush,
    .ep_check           = axon_dc_ep_check,
    .ep_atomic          = axon_dc_ep_atomic,
};

/* ------------------------------------------------------------ receive path */

static void axon_dc_iface_rx_completion(axon_dc_iface_t *iface, const axon_dev_wc_t *wc)
{
    void *buf                = (void *)(uintptr_t)wc->wr_id;
    const axon_dc_hdr_t *hdr = buf;
    axon_am_handler_t handler;

    if (__builtin_expect((wc->status != AXON_DEV_WC_SUCCESS) ||
                         (wc->byte_len < sizeof(*hdr)), 0)) {
        axon_debug("%s: receive completion: %s, %u bytes", iface->name,
                   axon_dev_wc_status_str(wc->status), wc->byte_len);
    } else if (__builtin_expect(hdr->type == AXON_DC_MSG_AM, 1)) {
        handler = (hdr->am_id < AXON_AM_ID_MAX) ? iface->am_handlers[hdr->am_id] : NULL;
        if (__builtin_expect(handler != NULL, 1)) {
            handler(iface->am_arg, (void *)(hdr + 1), wc->byte_len - sizeof(*hdr),
                    AXON_AM_FLAG_NONE);
        } else if (!iface->closing) {
            axon_warn("%s: no handler for AM id %u, message dropped", iface->name, hdr->am_id);
        }
    } else if ((hdr->type == AXON_DC_MSG_FC_REQ) || (hdr->type == AXON_DC_MSG_FC_GRANT)) {
        axon_dc_fc_rx(iface, hdr, wc->byte_len);
    } else if ((hdr->type == AXON_DC_MSG_HELLO) || (hdr->type == AXON_DC_MSG_BYE)) {
        axon_dc_bye_rx(iface, hdr, wc->byte_len);
    } else if (hdr->type != AXON_DC_MSG_KEEPALIVE) {
        axon_debug("%s: message of type %u, %u bytes, dropped", iface->name, hdr->type,
                   wc->byte_len);
    }
    axon_verbs_srq_ring_return(&iface->rx, buf);
}

/* ------------------------------------------------------------ progress */

static inline unsigned axon_dc_iface_poll_rx(axon_dc_iface_t *iface)
{
    axon_dev_wc_t wc[AXON_DC_POLL_BATCH];
    int n, i;

    n = axon_dev_poll_cq(iface->recv_cq, AXON_DC_POLL_BATCH, wc);
    for (i = 0; i < n; ++i) {
        axon_dc_iface_rx_completion(iface, &wc[i]);
    }
    axon_verbs_srq_ring_refill_batch(&iface->rx);
    return (n > 0) ? (unsigned)n : 0;
}

/*
 * A send failed: read what the receive queue holds first (bounded: what it
 * can hold). A peer's goodbye came before its DCT went, so it is there if
 * the error is that peer's close, and the error is then no failure.
 */
static void axon_dc_iface_rx_before_error(axon_dc_iface_t *iface)
{
    unsigned rounds = 2 * iface->config.rx_queue_len / AXON_DC_POLL_BATCH + 1;

    while ((rounds-- > 0) && (axon_dc_iface_poll_rx(iface) == AXON_DC_POLL_BATCH)) {
    }
}

unsigned axon_dc_iface_poll(axon_dc_iface_t *iface)
{
    axon_dev_wc_t wc[AXON_DC_POLL_BATCH];
    unsigned events;
    int n, i, rx_read = 0;

    events = axon_dc_iface_poll_rx(iface);
    n = axon_verbs_tx_poll_skip(&iface->tx_poll_due, events > 0) ? 0 :
        axon_dev_poll_cq(iface->send_cq, AXON_DC_POLL_BATCH, wc);
    for (i = 0; i < n; ++i) {
        if (__builtin_expect((wc[i].status != AXON_DEV_WC_SUCCESS) && !rx_read, 0)) {
            axon_dc_iface_rx_before_error(iface);
            rx_read = 1;
        }
        axon_dc_dci_tx_completion(iface, &wc[i]);
    }
    events += (n > 0) ? (unsigned)n : 0;
    if (__builtin_expect(iface->grants_count > 0, 0)) {
        axon_dc_fc_progress(iface);
    }
    return events;
}

static unsigned axon_dc_iface_progress(axon_iface_t *tl_iface)
{
    axon_dc_iface_t *iface = (axon_dc_iface_t *)tl_iface;
    unsigned events        = axon_dc_iface_poll(iface);

    if (--iface->timer_skip == 0) {
        iface->timer_skip = AXON_DC_TIMER_INTERVAL;
        iface->now_ns     = axon_dc_now_ns();
        ++iface->tick;
        axon_dc_dci_timers(iface);
        axon_dc_ep_keepalive(iface);
        axon_rcache_collect(iface->rcache);   /* unpin what the application unmapped */
    }
    return events;
}

/* ------------------------------------------------------------ open / close */

static axon_status_t axon_dc_iface_rx_init(axon_dc_iface_t *iface)
{
    const axon_dc_config_t *c = &iface->config;
    axon_dev_dct_init_attr_t dct_attr;
    axon_status_t status;
    int ret;

    status = axon_verbs_srq_ring_init(&iface->rx, &iface->dev, &iface->rx_pool, c->rx_queue_len,
                                      c->fc_window,
                                      (uint32_t)(sizeof(axon_dc_hdr_t) + iface->seg_size),
                                      iface->name);
    if (status != AXON_OK) {
        return status;
    }

    memset(&dct_attr, 0, sizeof(dct_attr));
    dct_attr.dct_context   = iface;
    dct_attr.pd            = iface->dev.pd;
    dct_attr.cq            = iface->recv_cq;
    dct_attr.srq           = iface->rx.srq;
    dct_attr.dc_key        = iface->dc_key;
    dct_attr.port          = iface->dev.port_num;
    dct_attr.access_flags  = AXON_DEV_ACCESS_REMOTE_WRITE | AXON_DEV_ACCESS_REMOTE_READ |
                             AXON_DEV_ACCESS_REMOTE_ATOMIC;
    dct_attr.min_rnr_timer = AXON_DC_MIN_RNR_TIMER;
    dct_attr.mtu           = iface->dev.port_attr.active_mtu;
    dct_attr.gid_index     = (uint8_t)iface->dev.gid_index;
    dct_attr.hop_limit     = 64;
    ret = axon_dev_create_dct(iface->dev.ctx, &dct_attr, &iface->dct);
    if (ret != 0) {
        axon_error("%s: create_dct: %d", iface->name, ret);
        return AXON_ERR_IO_ERROR;
    }
    return AXON_OK;
}

axon_status_t axon_dc_iface_open(const axon_resource_t *resource, const axon_dc_config_t *c,
                                 const axon_iface_params_t *params, axon_iface_t **iface_p)
{
    const axon_rc_md_t *md = (const axon_rc_md_t *)params->md;
    axon_dc_iface_t *iface;
    axon_status_t status;
    unsigned max_dci;

    iface = calloc(1, sizeof(*iface));
    if (iface == NULL) {
        axon_error("dc/%s: cannot allocate the interface", resource->dev_name);
        return AXON_ERR_NO_MEMORY;
    }
    iface->super.ops      = &axon_dc_iface_ops;
    iface->super.resource = resource;
    iface->config         = *c;
    snprintf(iface->name, sizeof(iface->name), "dc/%s", resource->dev_name);
    iface->am_arg       = params->am_arg;
    iface->peer_failure = params->peer_failure;
    if (params->am_handlers != NULL) {
        memcpy(iface->am_handlers, params->am_handlers, sizeof(iface->am_handlers));
    }
    iface->dev          = md->dev;
    axon_verbs_ah_cache_init(&iface->ahs, &iface->dev, iface->name);
    iface->md           = (axon_rc_md_t *)md;
    iface->rcache       = md->rcache;
    iface->seg_size     = c->seg_size;
    iface->max_short    = resource->max_short;
    iface->window       = c->fc_window;
    iface->tx_depth     = 1;
    while (iface->tx_depth < c->tx_queue_len) {
        iface->tx_depth <<= 1;
    }
    iface->tx_data_depth = iface->tx_depth - ((iface->tx_depth >= 16) ? iface->tx_depth / 8 : 1);
    iface->max_inline   = (c->max_inline < iface->dev.dev_attr.max_inline_data) ?
                          c->max_inline : iface->dev.dev_attr.max_inline_data;
    iface->timeout_exp  = axon_verbs_timeout_exp(c->timeout);
    iface->keepalive_ns = (uint64_t)(c->keepalive_interval * 1e9);
    iface->timer_skip   = AXON_DC_TIMER_INTERVAL;
    iface->now_ns       = axon_dc_now_ns();
    iface->next_ka_ns   = iface->now_ns + iface->keepalive_ns / 2;
    iface->dc_key       = axon_sys_generate_uuid();
    max_dci             = iface->dev.dev_attr.dc.max_dci;
    iface->num_dci      = (c->num_dci < max_dci) ? c->num_dci : max_dci;
    if (iface->num_dci < c->num_dci) {
        axon_debug("%s: AXON_DC_NUM_DCI=%u, the device has %u: using %u", iface->name,
                   c->num_dci, max_dci, iface->num_dci);
    }
    axon_list_init(&iface->waiters);
    if (((status = axon_verbs_cq_create(&iface->dev,
                                        (int)(iface->num_dci * iface->tx_depth + 64),
                                        &iface->send_cq)) != AXON_OK) ||
        ((status = axon_verbs_cq_create(&iface->dev, (int)c->rx_queue_len * 2,
                                        &iface->recv_cq)) != AXON_OK) ||
        ((status = axon_verbs_bufpool_init(&iface->tx_pool, &iface->dev, "dc send",
                                           sizeof(axon_dc_hdr_t) + c->seg_size,
                                           c->tx_bufs)) != AXON_OK) ||
        ((status = axon_verbs_bufpool_init(&iface->rx_pool, &iface->dev, "dc receive",
                                           sizeof(axon_dc_hdr_t) + c->seg_size,
                                           c->rx_queue_len)) != AXON_OK) ||
        ((status = axon_dc_iface_rx_init(iface)) != AXON_OK) ||
        ((status = axon_dc_dci_pool_init(iface)) != AXON_OK)) {
        axon_dc_iface_close(&iface->super);
        return status;
    }
    axon_debug("%s: open (DCT 0x%x, %u DCIs, policy %s, inline %u, window %u)", iface->name,
               iface->dct->dct_num, iface->num_dci, axon_dc_policy_names[c->policy],
               iface->max_inline, iface->window);
    *iface_p = &iface->super;
    return AXON_OK;
}

static void axon_dc_iface_close(axon_iface_t *tl_iface)
{
    axon_dc_iface_t *iface = (axon_dc_iface_t *)tl_iface;
    double deadline        = axon_sys_time_sec() + AXON_DC_CLOSE_WAIT_SEC;
    int ret;

    /* our work through, then goodbyes after it (peers that said hello take our close for
     * a close, not a failure), all bounded; then the initiators, the target, its queues */
    iface->peer_failure = NULL;   /* the worker is going away: nobody to tell */
    /* close reads the receive queue for goodbyes and hellos; what else arrives
     * is dropped: the worker's endpoints are gone, and a peer's hello handed up
     * now would open one nobody destroys */
    iface->closing = 1;
    memset(iface->am_handlers, 0, sizeof(iface->am_handlers));
    if ((iface->dcis != NULL) && (iface->dct != NULL) &&
        axon_dc_dci_drain(iface, deadline)) {
        axon_dc_bye_send_all(iface, deadline);
    }
    axon_dc_dci_pool_cleanup(iface);
    if ((iface->dct != NULL) && ((ret = axon_dev_destroy_dct(iface->dct)) != 0)) {
        axon_warn("%s: destroy_dct: %d", iface->name, ret);
    }
    axon_verbs_srq_ring_cleanup(&iface->rx);   /* after the DCT that used it */
    axon_dc_fc_cleanup(iface);
    axon_dc_bye_cleanup(iface);
    axon_dc_ep_table_cleanup(iface);
    axon_verbs_ah_cache_cleanup(&iface->ahs);
    axon_verbs_bufpool_cleanup(&iface->rx_pool);
    axon_verbs_bufpool_cleanup(&iface->tx_pool);
    axon_verbs_bufpool_cleanup(&iface->amo_pool);
    axon_verbs_cq_destroy(iface->name, iface->recv_cq);
    axon_verbs_cq_destroy(iface->name, iface->send_cq);
    free(iface);
}
