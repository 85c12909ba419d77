/* ofi ifaces: the fabric objects, progress, the receive path and peer failures. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ofi.h"
#include "sys.h"

/* ---------------------------------------------------------------- failures */

int axon_ofi_is_peer_error(ssize_t ret)
{
    switch (axon_ofi_status(ret)) {
    case AXON_ERR_CONNECTION_RESET:
    case AXON_ERR_UNREACHABLE:
    case AXON_ERR_ENDPOINT_TIMEOUT:
    case AXON_ERR_IO_ERROR:
        return 1;
    default:
        return 0;
    }
}

void axon_ofi_peer_fail(axon_ofi_iface_t *iface, axon_ofi_peer_t *peer, axon_status_t status,
                        int graceful)
{
    axon_ofi_ep_t *ep;

    if (peer->failed) {
        return;
    }
    axon_debug("%s: worker %016llx %s: %s", iface->name, (unsigned long long)peer->uuid,
               graceful ? "said goodbye" : "failed", axon_status_string(status));
    peer->failed = 1;
    peer->gone   = (uint8_t)(peer->gone || graceful);
    peer->status = status;
    axon_list_for_each(ep, &iface->eps, link) {
        if ((ep->peer == peer) && (ep->status == AXON_OK)) {
            ep->status = status;
        }
    }
    /* The rest from progress: we may be inside a send call. */
    peer->reported = 0;
    ++iface->pending_reports;
}

/*
 * Operations to a failed peer that the provider may never complete (it
 * queues them for a dead peer): they complete now with the peer's status,
 * and the provider's completion, if it comes, finds them detached.
 */
static void axon_ofi_peer_fail_ops(axon_ofi_iface_t *iface, axon_ofi_peer_t *peer)
{
    axon_tl_completion_t *comp;
    axon_ofi_op_t        *op;
    unsigned              i;

    for (i = 0; i < iface->num_tx + iface->num_rma; ++i) {
        op = &iface->tx_ops[i];   /* rma_ops follow tx_ops */
        if ((op->ep == NULL) || (op->ep->peer != peer)) {
            continue;
        }
        --op->ep->inflight;
        op->ep   = NULL;
        op->peer = peer;
        comp     = op->comp;
        if (comp != NULL) {
            comp->func(comp, peer->status);
        }
    }
}

/* Progress: finish what failed peers leave, tell the upper layer of the ungraceful ones. */
static void axon_ofi_iface_report(axon_ofi_iface_t *iface)
{
    axon_ofi_peer_t *peer;

    iface->pending_reports = 0;
    axon_list_for_each(peer, &iface->peers, link) {
        if (!peer->failed || peer->reported) {
            continue;
        }
        peer->reported = 1;
        axon_ofi_peer_fail_ops(iface, peer);
        if (!peer->gone && (iface->peer_failure != NULL)) {
            axon_debug("%s: reporting worker %016llx failed: %s", iface->name,
                       (unsigned long long)peer->uuid, axon_status_string(peer->status));
            iface->peer_failure(iface->am_arg, peer->uuid, peer->status);
        }
    }
}

axon_ofi_peer_t *axon_ofi_peer_find(axon_ofi_iface_t *iface, uint64_t uuid)
{
    axon_ofi_peer_t *peer;

    axon_list_for_each(peer, &iface->peers, link) {
        if (peer->uuid == uuid) {
            return peer;
        }
    }
    return NULL;
}

/* ---------------------------------------------------------------- receive path */

static void axon_ofi_rx_post(axon_ofi_iface_t *iface, axon_ofi_op_t *op)
{
    ssize_t ret;

    ret = fi_trecv(iface->ep, op->buf, iface->seg_size, iface->buf_desc, FI_ADDR_UNSPEC, 0,
                   ~0ull, &op->fi_ctx);
    if (ret == 0) {
        return;
    }
    if (ret != -FI_EAGAIN) {
        axon_error("%s: fi_trecv failed: %s", iface->name, fi_strerror((int)-ret));
    }
    axon_list_add_tail(&iface->rx_repost, &op->link);   /* tried again from progress */
}

static void axon_ofi_rx_repost_all(axon_ofi_iface_t *iface)
{
    axon_list_link_t list;
    axon_ofi_op_t   *op, *tmp;

    if (axon_list_is_empty(&iface->rx_repost)) {
        return;
    }
    /* Take the list: a refused post goes back on it, for the next call. */
    list = iface->rx_repost;
    list.next->prev = &list;
    list.prev->next = &list;
    axon_list_init(&iface->rx_repost);
    axon_list_for_each_safe(op, tmp, &list, link) {
        axon_list_del(&op->link);
        axon_ofi_rx_post(iface, op);
    }
}

/* A ping: answer it, learning the pinger's address if it is new to us. */
static void axon_ofi_rx_ping(axon_ofi_iface_t *iface, const void *buf, size_t len)
{
    axon_ofi_ping_t  ping;
    axon_ofi_peer_t *peer;
    fi_addr_t        addr = FI_ADDR_NOTAVAIL;
    int              ret;

    memset(&ping, 0, sizeof(ping));
    memcpy(&ping, buf, (len < sizeof(ping)) ? len : sizeof(ping));
    if ((len < AXON_OFI_PING_LEN(0)) || (ping.len == 0) || (ping.len > AXON_OFI_NAME_MAX) ||
        (len != AXON_OFI_PING_LEN(ping.len))) {
        axon_warn("%s: dropping a ping of %zu bytes (address of %u)", iface->name, len,
                  ping.len);
        return;
    }
    peer = axon_ofi_peer_find(iface, ping.uuid);
    if (peer == NULL) {
        ret = fi_av_insert(iface->av, ping.name, 1, &addr, 0, NULL);
        if (ret != 1) {
            axon_error("%s: fi_av_insert of pinging worker %016llx failed: %s", iface->name,
                       (unsigned long long)ping.uuid, fi_strerror((ret < 0) ? -ret : FI_EINVAL));
            return;
        }
        peer = axon_ofi_peer_get(iface, ping.uuid, addr);
        if (peer == NULL) {
            axon_error("%s: cannot allocate a peer", iface->name);
            return;
        }
    }
    peer->last_heard   = axon_sys_time_sec();
    peer->pong_pending = 1;
    axon_ofi_pong(iface, peer);
}

static void axon_ofi_rx_ctrl(axon_ofi_iface_t *iface, unsigned kind, const void *buf, size_t len)
{
    axon_ofi_peer_t *peer;
    uint64_t         uuid;

    if (kind == AXON_OFI_KIND_PING) {
        axon_ofi_rx_ping(iface, buf, len);
        return;
    }
    if (((kind != AXON_OFI_KIND_BYE) && (kind != AXON_OFI_KIND_PONG)) || (len != sizeof(uuid))) {
        axon_warn("%s: dropping a message of kind %u and %zu bytes", iface->name, kind, len);
        return;
    }
    memcpy(&uuid, buf, sizeof(uuid));
    peer = axon_ofi_peer_find(iface, uuid);
    if (peer == NULL) {
        return;
    }
    if (kind == AXON_OFI_KIND_PONG) {
        peer->last_heard = axon_sys_time_sec();
    } else {
        axon_ofi_peer_fail(iface, peer, AXON_ERR_CONNECTION_RESET, 1);
    }
}

static void axon_ofi_rx_done(axon_ofi_iface_t *iface, axon_ofi_op_t *op,
                             const struct fi_cq_tagged_entry *entry)
{
    unsigned          kind  = (unsigned)((entry->tag >> AXON_OFI_TAG_KIND_SHIFT) &
                                         AXON_OFI_TAG_KIND_MASK);
    unsigned          am_id = (unsigned)(entry->tag & AXON_OFI_TAG_AM_MASK);
    axon_am_handler_t handler;

    if (kind != AXON_OFI_KIND_AM) {
        axon_ofi_rx_ctrl(iface, kind, op->buf, entry->len);
    } else if ((am_id < AXON_AM_ID_MAX) &&
               ((handler = iface->am_handlers[am_id]) != NULL)) {
        handler(iface->am_arg, op->buf, entry->len, AXON_AM_FLAG_NONE);
    } else {
        axon_warn("%s: dropping active message %u of %zu bytes: no handler", iface->name,
                  am_id, entry->len);
    }
    axon_ofi_rx_post(iface, op);
}

/* ---------------------------------------------------------------- progress */

static void axon_ofi_cq_error(axon_ofi_iface_t *iface)
{
    struct fi_cq_err_entry err;
    axon_ofi_op_t         *op;
    ssize_t                ret;

    memset(&err, 0, sizeof(err));
    ret = fi_cq_readerr(iface->cq, &err, 0);
    if (ret < 0) {
        if (ret != -FI_EAGAIN) {
            axon_error("%s: fi_cq_readerr failed: %s", iface->name, fi_strerror((int)-ret));
        }
        return;
    }
    op = err.op_context;
    if (op == NULL) {
        axon_debug("%s: error completion without context: %s", iface->name,
                   fi_strerror(err.err));
        return;
    }
    if (op->kind == AXON_OFI_OP_RX) {
        if (axon_ofi_is_peer_error(-err.err)) {
            /*
             * Some peer's connection broke; the receive does not say whose.
             * Ask everyone now, each ping with a completion: the dead
             * peer's fails at once instead of after the keep-alive timeout.
             */
            axon_debug("%s: a connection broke (%s): probing every peer", iface->name,
                       fi_strerror(err.err));
            iface->probe    = 1;
            iface->ka_calls = AXON_OFI_KEEPALIVE_CHECK_CALLS;
            axon_ofi_rx_post(iface, op);
        } else if (err.err != FI_ECANCELED) {
            axon_error("%s: receive of %zu bytes failed: %s (%s)", iface->name, err.len,
                       fi_strerror(err.err),
                       fi_cq_strerror(iface->cq, err.prov_errno, err.err_data, NULL, 0));
            axon_ofi_rx_post(iface, op);
        }
        return;
    }
    axon_debug("%s: operation %d failed: %s (%s)", iface->name, op->kind, fi_strerror(err.err),
               fi_cq_strerror(iface->cq, err.prov_errno, err.err_data, NULL, 0));
    axon_ofi_op_done(iface, op, axon_ofi_status(-err.err));
}

static unsigned axon_ofi_iface_progress(axon_iface_t *tl_iface)
{
    axon_ofi_iface_t         *iface = (axon_ofi_iface_t*)tl_iface;
    struct fi_cq_tagged_entry entries[AXON_OFI_CQ_BATCH];
    axon_ofi_op_t            *op;
    ssize_t                   n, i;
    unsigned                  count = 0;

    n = fi_cq_read(iface->cq, entries, AXON_OFI_CQ_BATCH);
    if (n > 0) {
        for (i = 0; i < n; ++i) {
            op = entries[i].op_context;
            if (op->kind == AXON_OFI_OP_RX) {
                axon_ofi_rx_done(iface, op, &entries[i]);
            } else {
                axon_ofi_op_done(iface, op, AXON_OK);
            }
        }
        count = (unsigned)n;
    } else if (n == -FI_EAVAIL) {
        axon_ofi_cq_error(iface);
        ++count;
    } else if (n != -FI_EAGAIN) {
        axon_error("%s: fi_cq_read failed: %s", iface->name, fi_strerror((int)-n));
    }

    if (__builtin_expect(++iface->ka_calls >= AXON_OFI_KEEPALIVE_CHECK_CALLS, 0)) {
        iface->ka_calls = 0;
        axon_ofi_rx_repost_all(iface);
        if ((iface->config->keepalive_interval > 0) || iface->probe) {
            axon_ofi_ep_keepalive(iface, axon_sys_time_sec());
        }
    }
    if (__builtin_expect(iface->pending_reports > 0, 0)) {
        axon_ofi_iface_report(iface);
        ++count;
    }
    return count;
}

/* ---------------------------------------------------------------- addresses */

static axon_status_t axon_ofi_iface_get_address(axon_iface_t *tl_iface, void *dev_addr,
                                                void *iface_addr)
{
    axon_ofi_iface_t *iface = (axon_ofi_iface_t*)tl_iface;

    memcpy(dev_addr, &iface->dev_addr, sizeof(iface->dev_addr));
    memcpy(iface_addr, &iface->iface_addr, sizeof(iface->iface_addr));
    return AXON_OK;
}

static int axon_ofi_iface_is_reachable(axon_iface_t *tl_iface, const void *dev_addr_p,
                                       const void *iface_addr_p)
{
    axon_ofi_iface_t   *iface = (axon_ofi_iface_t*)tl_iface;
    axon_ofi_dev_addr_t dev_addr;
    uint8_t             len;

    memcpy(&dev_addr, dev_addr_p, sizeof(dev_addr));
    memcpy(&len, iface_addr_p, sizeof(len));
    if ((len == 0) || (len > AXON_OFI_NAME_MAX) ||
        (dev_addr.fabric_hash != iface->dev_addr.fabric_hash)) {
        return 0;
    }
    return !(dev_addr.local_only || iface->dev_addr.local_only) ||
           (dev_addr.host_id == iface->dev_addr.host_id);
}

/* ---------------------------------------------------------------- open and close */

/* Give the receive buffers to the provider and the send buffers to the free lists. */
static axon_status_t axon_ofi_iface_init_ops(axon_ofi_iface_t *iface)
{
    const axon_ofi_config_t *config = iface->config;
    size_t                   total;
    unsigned                 i;
    int                      ret;

    iface->num_rx  = config->rx_queue_len;
    iface->num_tx  = config->tx_queue_len;
    iface->num_rma = (iface->super.resource->cap_flags & AXON_CAP_GET) ? config->tx_queue_len : 0;
    total          = (size_t)(iface->num_rx + iface->num_tx) * iface->seg_size;
    if (posix_memalign((void**)&iface->bufs, 64, total) != 0) {
        iface->bufs = NULL;
        axon_error("%s: cannot allocate %zu bytes of buffers", iface->name, total);
        return AXON_ERR_NO_MEMORY;
    }
    iface->rx_ops  = calloc(iface->num_rx + iface->num_tx + iface->num_rma,
                            sizeof(*iface->rx_ops));
    if (iface->rx_ops == NULL) {
        axon_error("%s: cannot allocate operation contexts", iface->name);
        return AXON_ERR_NO_MEMORY;
    }
    iface->tx_ops  = iface->rx_ops + iface->num_rx;
    iface->rma_ops = iface->tx_ops + iface->num_tx;

    if (iface->mr_mode & FI_MR_LOCAL) {
        ret = axon_ofi_mr_reg(iface->md, iface->bufs, total, FI_SEND | FI_RECV, &iface->buf_mr);
        if (ret != 0) {
            axon_error("%s: cannot register the bounce buffers: %s", iface->name,
                       fi_strerror(-ret));
            return axon_ofi_status(ret);
        }
        iface->buf_desc = fi_mr_desc(iface->buf_mr);
    }

    for (i = 0; i < iface->num_tx; ++i) {
        iface->tx_ops[i].kind = AXON_OFI_OP_FREE;
        iface->tx_ops[i].buf  = iface->bufs + (size_t)(iface->num_rx + i) * iface->seg_size;
        axon_list_add_tail(&iface->tx_free, &iface->tx_ops[i].link);
    }
    for (i = 0; i < iface->num_rma; ++i) {
        iface->rma_ops[i].kind = AXON_OFI_OP_FREE;
        axon_list_add_tail(&iface->rma_free, &iface->rma_ops[i].link);
    }
    for (i = 0; i < iface->num_rx; ++i) {
        iface->rx_ops[i].kind = AXON_OFI_OP_RX;
        iface->rx_ops[i].buf  = iface->bufs + (size_t)i * iface->seg_size;
        axon_ofi_rx_post(iface, &iface->rx_ops[i]);
    }
    return AXON_OK;
}

static axon_status_t axon_ofi_iface_open_fabric(axon_ofi_iface_t *iface)
{
    struct fi_av_attr av_attr;
    struct fi_cq_attr cq_attr;
    size_t            len;
    int               ret;
    const char       *what;

    memset(&av_attr, 0, sizeof(av_attr));
    av_attr.type = FI_AV_TABLE;
    what = "fi_av_open";
    ret  = fi_av_open(iface->domain, &av_attr, &iface->av, NULL);
    if (ret == 0) {
        memset(&cq_attr, 0, sizeof(cq_attr));
        cq_attr.format   = FI_CQ_FORMAT_TAGGED;
        cq_attr.wait_obj = FI_WAIT_NONE;
        cq_attr.size     = iface->config->rx_queue_len + 2 * iface->config->tx_queue_len + 64;
        what = "fi_cq_open";
        ret  = fi_cq_open(iface->domain, &cq_attr, &iface->cq, NULL);
    }
    if (ret == 0) {
        what = "fi_endpoint";
        ret  = fi_endpoint(iface->domain, (struct fi_info *)iface->info, &iface->ep, NULL);
    }
    if (ret == 0) {
        what = "fi_ep_bind(av)";
        ret  = fi_ep_bind(iface->ep, &iface->av->fid, 0);
    }
    if (ret == 0) {
        what = "fi_ep_bind(cq)";
        ret  = fi_ep_bind(iface->ep, &iface->cq->fid, FI_TRANSMIT | FI_RECV);
    }
    if (ret == 0) {
        what = "fi_enable";
        ret  = fi_enable(iface->ep);
    }
    if (ret == 0) {
        what = "fi_getname";
        len  = sizeof(iface->iface_addr.name);
        ret  = fi_getname(&iface->ep->fid, iface->iface_addr.name, &len);
        if ((ret == 0) && ((len == 0) || (len > AXON_OFI_NAME_MAX))) {
            ret = -FI_ETOOSMALL;
        }
        iface->iface_addr.len = (uint8_t)len;
    }
    if (ret != 0) {
        axon_error("%s: %s failed: %s", iface->name, what, fi_strerror(-ret));
        return axon_ofi_status(ret);
    }
    return AXON_OK;
}

/* Tell every live peer we are leaving, and give the goodbyes a moment to go out. */
static void axon_ofi_iface_say_goodbye(axon_ofi_iface_t *iface)
{
    struct fi_cq_tagged_entry entries[AXON_OFI_CQ_BATCH];
    struct fi_cq_err_entry    err;
    axon_ofi_peer_t          *peer;
    axon_ofi_op_t            *op;
    double                    deadline;
    unsigned                  sent = 0, pending;
    ssize_t                   n, i;

    axon_list_for_each(peer, &iface->peers, link) {
        if (!peer->failed &&
            (axon_ofi_ctrl_send(iface, peer, AXON_OFI_KIND_BYE, &iface->worker_uuid,
                                sizeof(iface->worker_uuid)) == AXON_OK)) {
            ++sent;
        }
    }
    if (sent == 0) {
        return;
    }
    /* Nothing goes to the handlers any more: completions only return buffers. */
    memset(iface->am_handlers, 0, sizeof(iface->am_handlers));
    deadline = axon_sys_time_sec() + AXON_OFI_BYE_TIMEOUT;
    do {
        n = fi_cq_read(iface->cq, entries, AXON_OFI_CQ_BATCH);
        for (i = 0; i < n; ++i) {
            op = entries[i].op_context;
            if (op->kind != AXON_OFI_OP_RX) {
                axon_ofi_op_done(iface, op, AXON_OK);
            }
        }
        if (n == -FI_EAVAIL) {
            memset(&err, 0, sizeof(err));
            if ((fi_cq_readerr(iface->cq, &err, 0) > 0) && (err.op_context != NULL) &&
                (((axon_ofi_op_t*)err.op_context)->kind != AXON_OFI_OP_RX)) {
                axon_ofi_op_done(iface, err.op_context, AXON_ERR_CANCELED);
            }
        }
        pending = 0;
        axon_list_for_each(peer, &iface->peers, link) {
            pending += peer->ka_pending;
        }
    } while ((pending > 0) && (axon_sys_time_sec() < deadline));
}

static void axon_ofi_iface_close(axon_iface_t *tl_iface)
{
    axon_ofi_iface_t *iface = (axon_ofi_iface_t*)tl_iface;
    axon_ofi_peer_t  *peer, *ptmp;
    axon_ofi_ep_t    *ep, *etmp;

    if ((iface->ep != NULL) && (iface->tx_ops != NULL)) {
        axon_ofi_iface_say_goodbye(iface);
    }
    axon_list_for_each_safe(ep, etmp, &iface->eps, link) {
        axon_ofi_ep_destroy(&ep->super);
    }
    if (iface->ep != NULL) {
        fi_close(&iface->ep->fid);
    }
    if (iface->buf_mr != NULL) {
        fi_close(&iface->buf_mr->fid);
    }
    if (iface->cq != NULL) {
        fi_close(&iface->cq->fid);
    }
    if (iface->av != NULL) {
        fi_close(&iface->av->fid);
    }
    axon_list_for_each_safe(peer, ptmp, &iface->peers, link) {
        free(peer);
    }
    free(iface->rx_ops);
    free(iface->bufs);
    free(iface);
}

static const axon_iface_ops_t axon_ofi_iface_ops = {
    .iface_close        = axon_ofi_iface_close,
    .iface_progress     = axon_ofi_iface_progress,
    .dev_addr_len       = sizeof(axon_ofi_dev_addr_t),
    .iface_addr_len     = sizeof(axon_ofi_iface_addr_t),
    .iface_get_address  = axon_ofi_iface_get_address,
    .iface_is_reachable = axon_ofi_iface_is_reachable,
    .ep_create          = axon_ofi_ep_create,
    .ep_destroy         = axon_ofi_ep_destroy,
    .ep_am_short        = axon_ofi_ep_am_short,
    .ep_am_bcopy        = axon_ofi_ep_am_bcopy,
    .ep_flush           = axon_ofi_ep_flush,
    .ep_check           = axon_ofi_ep_check,
};

/* The same, with get/put through memory keys (the provider has FI_RMA). */
static const axon_iface_ops_t axon_ofi_iface_rma_ops = {
    .iface_close        = axon_ofi_iface_close,
    .iface_progress     = axon_ofi_iface_progress,
    .dev_addr_len       = sizeof(axon_ofi_dev_addr_t),
    .iface_addr_len     = sizeof(axon_ofi_iface_addr_t),
    .iface_get_address  = axon_ofi_iface_get_address,
    .iface_is_reachable = axon_ofi_iface_is_reachable,
    .ep_create          = axon_ofi_ep_create,
    .ep_destroy         = axon_ofi_ep_destroy,
    .ep_am_short        = axon_ofi_ep_am_short,
    .ep_am_bcopy        = axon_ofi_ep_am_bcopy,
    .ep_get_zcopy       = axon_ofi_ep_get_zcopy,
    .ep_put_zcopy       = axon_ofi_ep_put_zcopy,
    .ep_flush           = axon_ofi_ep_flush,
    .ep_check           = axon_ofi_ep_check,
};

axon_status_t axon_ofi_iface_open(const axon_resource_t *resource, const void *config_v,
                                  const axon_iface_params_t *params, axon_iface_t **iface_p)
{
    const axon_ofi_config_t *config  = config_v;
    int                      use_rma = !!(resource->cap_flags & AXON_CAP_GET);
    axon_ofi_iface_t        *iface;
    axon_status_t            status;
    char                     key[AXON_DEV_NAME_MAX + 256];

    if (params->md == NULL) {
        axon_error("ofi/%s: opened without its memory domain", resource->dev_name);
        return AXON_ERR_INVALID_PARAM;
    }
    iface = calloc(1, sizeof(*iface));
    if (iface == NULL) {
        axon_error("ofi/%s: cannot allocate an iface", resource->dev_name);
        return AXON_ERR_NO_MEMORY;
    }
    iface->super.ops      = use_rma ? &axon_ofi_iface_rma_ops : &axon_ofi_iface_ops;
    iface->super.resource = resource;
    iface->config         = config;
    iface->seg_size       = config->seg_size;
    iface->am_arg         = params->am_arg;
    iface->peer_failure   = params->peer_failure;
    iface->worker_uuid    = params->worker_uuid;
    iface->md             = (axon_ofi_md_t*)params->md;
    iface->info           = iface->md->info;
    iface->domain         = iface->md->domain;
    iface->ka_checked     = axon_sys_time_sec();
    iface->ka_next        = iface->ka_checked + config->keepalive_interval;
    if (params->am_handlers != NULL) {
        memcpy(iface->am_handlers, params->am_handlers, sizeof(iface->am_handlers));
    }
    axon_list_init(&iface->tx_free);
    axon_list_init(&iface->rma_free);
    axon_list_init(&iface->rx_repost);
    axon_list_init(&iface->eps);
    axon_list_init(&iface->peers);
    snprintf(iface->name, sizeof(iface->name), "ofi/%s", resource->dev_name);

    iface->inject_size  = iface->info->tx_attr->inject_size;
    iface->max_msg_size = iface->info->ep_attr->max_msg_size;
    iface->mr_mode      = iface->info->domain_attr->mr_mode;
    if (iface->max_msg_size < iface->seg_size) {
        axon_error("%s: AXON_OFI_SEG_SIZE=%zu exceeds the provider's largest message (%zu)",
                   iface->name, iface->seg_size, iface->max_msg_size);
        status = AXON_ERR_INVALID_PARAM;
        goto err;
    }

    status = axon_ofi_iface_open_fabric(iface);
    if (status != AXON_OK) {
        goto err;
    }
    snprintf(key, sizeof(key), "%s/%s", iface->info->fabric_attr->prov_name,
             iface->info->fabric_attr->name ? iface->info->fabric_attr->name : "");
    iface->dev_addr.fabric_hash = axon_sys_hash64(key, strlen(key), 0);
    iface->dev_addr.host_id     = axon_sys_host_id();
    iface->dev_addr.local_only  = (uint8_t)axon_ofi_info_is_local(iface->info);

    status = axon_ofi_iface_init_ops(iface);
    if (status != AXON_OK) {
        goto err;
    }
    axon_debug("%s: opened %s on fabric %s, domain %s (inject %zu, mr_mode 0x%llx%s)",
               iface->name, iface->info->fabric_attr->prov_name, iface->info->fabric_attr->name,
               iface->info->domain_attr->name, iface->inject_size,
               (unsigned long long)iface->mr_mode, use_rma ? ", rma" : "");
    *iface_p = &iface->super;
    return AXON_OK;

err:
    axon_ofi_iface_close(&iface->super);
    return status;
}
