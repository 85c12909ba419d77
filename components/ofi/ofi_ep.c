/* ofi endpoints: creation, the send path, completions of sends, keep-alives. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include "ofi.h"
#include "sys.h"

/* Bytes of an AM built on the stack for fi_tinject. */
#define AXON_OFI_INJECT_MAX 256

/* ---------------------------------------------------------------- operations */

static inline axon_ofi_op_t *axon_ofi_tx_get(axon_ofi_iface_t *iface)
{
    axon_ofi_op_t *op;

    if (axon_list_is_empty(&iface->tx_free)) {
        return NULL;
    }
    op = axon_list_first(&iface->tx_free, axon_ofi_op_t, link);
    axon_list_del(&op->link);
    return op;
}

static inline void axon_ofi_tx_put(axon_ofi_iface_t *iface, axon_ofi_op_t *op)
{
    op->kind = AXON_OFI_OP_FREE;
    op->ep   = NULL;
    op->peer = NULL;
    axon_list_add_head(&iface->tx_free, &op->link);
}

void axon_ofi_op_done(axon_ofi_iface_t *iface, axon_ofi_op_t *op, axon_status_t status)
{
    axon_ofi_peer_t      *peer = (op->ep != NULL) ? op->ep->peer : op->peer;
    axon_tl_completion_t *comp = op->comp;
    axon_ofi_ep_t        *ep   = op->ep;
    uint8_t               kind = op->kind;

    if (ep != NULL) {
        --ep->inflight;
    }
    if (kind == AXON_OFI_OP_CTRL) {
        peer->ka_pending = 0;
    }
    if ((kind == AXON_OFI_OP_GET) || (kind == AXON_OFI_OP_PUT)) {
        if (op->local_mr != NULL) {
            fi_close(&op->local_mr->fid);
            op->local_mr = NULL;
        }
        op->kind = AXON_OFI_OP_FREE;
        op->ep   = NULL;
        op->comp = NULL;
        axon_list_add_head(&iface->rma_free, &op->link);
    } else {
        axon_ofi_tx_put(iface, op);
    }

    if ((status != AXON_OK) && (peer != NULL) &&
        ((status == AXON_ERR_CONNECTION_RESET) || (status == AXON_ERR_UNREACHABLE) ||
         (status == AXON_ERR_ENDPOINT_TIMEOUT) || (status == AXON_ERR_IO_ERROR))) {
        axon_ofi_peer_fail(iface, peer, status, peer->gone);
        if (peer->failed) {
            status = peer->status;
        }
    }
    /* An ep destroyed meanwhile completed its get/put with CANCELED already. */
    if ((comp != NULL) && (ep != NULL)) {
        comp->func(comp, status);
    }
}

/* ---------------------------------------------------------------- endpoints */

axon_ofi_peer_t *axon_ofi_peer_get(axon_ofi_iface_t *iface, uint64_t uuid, fi_addr_t addr)
{
    axon_ofi_peer_t *peer = axon_ofi_peer_find(iface, uuid);

    if (peer != NULL) {
        return peer;
    }
    peer = calloc(1, sizeof(*peer));
    if (peer == NULL) {
        return NULL;
    }
    peer->uuid       = uuid;
    peer->addr       = addr;
    peer->last_heard = axon_sys_time_sec();
    axon_list_add_tail(&iface->peers, &peer->link);
    return peer;
}

axon_status_t axon_ofi_ep_create(axon_iface_t *tl_iface, uint64_t peer_uuid,
                                 const void *dev_addr, const void *iface_addr,
                                 axon_tl_ep_t **ep_p)
{
    axon_ofi_iface_t     *iface = (axon_ofi_iface_t*)tl_iface;
    axon_ofi_iface_addr_t addr;
    axon_ofi_ep_t        *ep;
    fi_addr_t             fi_addr = FI_ADDR_NOTAVAIL;
    int                   ret;

    if (!tl_iface->ops->iface_is_reachable(tl_iface, dev_addr, iface_addr)) {
        axon_error("%s: worker %016llx is on another fabric or host: unreachable", iface->name,
                   (unsigned long long)peer_uuid);
        return AXON_ERR_UNREACHABLE;
    }
    memcpy(&addr, iface_addr, sizeof(addr));
    /* The AV holds one entry per address (util AVs count references). */
    ret = fi_av_insert(iface->av, addr.name, 1, &fi_addr, 0, NULL);
    if (ret != 1) {
        axon_error("%s: fi_av_insert of worker %016llx's address failed: %s", iface->name,
                   (unsigned long long)peer_uuid, fi_strerror((ret < 0) ? -ret : FI_EINVAL));
        return AXON_ERR_INVALID_ADDR;
    }

    ep = calloc(1, sizeof(*ep));
    if (ep == NULL) {
        axon_error("%s: cannot allocate an endpoint", iface->name);
        return AXON_ERR_NO_MEMORY;
    }
    ep->super.iface = tl_iface;
    ep->addr        = fi_addr;
    ep->peer        = axon_ofi_peer_get(iface, peer_uuid, fi_addr);
    if (ep->peer == NULL) {
        free(ep);
        axon_error("%s: cannot allocate a peer", iface->name);
        return AXON_ERR_NO_MEMORY;
    }
    /* A worker known to be gone stays gone. */
    ep->status = ep->peer->failed ? ep->peer->status : AXON_OK;
    if (ep->peer->neps++ == 0) {
        ep->peer->last_heard = axon_sys_time_sec();   /* its silence counts from now */
    }
    axon_list_add_tail(&iface->eps, &ep->link);
    *ep_p = &ep->super;
    return AXON_OK;
}

void axon_ofi_ep_destroy(axon_tl_ep_t *tl_ep)
{
    axon_ofi_ep_t        *ep    = (axon_ofi_ep_t*)tl_ep;
    axon_ofi_iface_t     *iface = axon_ofi_ep_iface(ep);
    axon_tl_completion_t *comp;
    unsigned              i;

    /* Operations still with the provider complete without us. */
    for (i = 0; (ep->inflight > 0) && (i < iface->num_tx + iface->num_rma); ++i) {
        axon_ofi_op_t *op = &iface->tx_ops[i];   /* rma_ops follow tx_ops */

        if (op->ep != ep) {
            continue;
        }
        --ep->inflight;
        op->ep   = NULL;
        op->peer = ep->peer;
        comp     = op->comp;
        if (comp != NULL) {
            comp->func(comp, AXON_ERR_CANCELED);
        }
    }
    --ep->peer->neps;
    axon_list_del(&ep->link);
    free(ep);
}

/* ---------------------------------------------------------------- sends */

static __attribute__((noinline, cold))
axon_status_t axon_ofi_ep_am_invalid(const axon_ofi_iface_t *iface, const char *op,
                                     uint8_t am_id, size_t length)
{
    if (am_id >= AXON_AM_ID_MAX) {
        axon_error("%s: %s with invalid am_id %u (max %d)", iface->name, op, am_id,
                   AXON_AM_ID_MAX - 1);
    } else {
        axon_error("%s: %s of %zu bytes exceeds its limit %zu", iface->name, op, length,
                   iface->seg_size);
    }
    return AXON_ERR_INVALID_PARAM;
}

/* A post failed with ret: NO_RESOURCE to retry, or the peer is gone. */
static __attribute__((noinline, cold))
axon_status_t axon_ofi_ep_post_failed(axon_ofi_ep_t *ep, ssize_t ret, const char *what)
{
    axon_ofi_iface_t *iface  = axon_ofi_ep_iface(ep);
    axon_status_t     status = axon_ofi_status(ret);

    if (ret == -FI_EAGAIN) {
        axon_trace("%s: %s: EAGAIN", iface->name, what);
        return AXON_ERR_NO_RESOURCE;
    }
    axon_debug("%s: %s to worker %016llx failed: %s", iface->name, what,
               (unsigned long long)ep->peer->uuid, fi_strerror((int)-ret));
    if (axon_ofi_is_peer_error(ret)) {
        axon_ofi_peer_fail(iface, ep->peer, status, ep->peer->gone);
        return ep->status;
    }
    return status;
}

/* Send len bytes from op's buffer: inline when they fit, else with a completion. */
static inline axon_status_t axon_ofi_ep_send_op(axon_ofi_ep_t *ep, axon_ofi_op_t *op,
                                                uint8_t am_id, size_t len)
{
    axon_ofi_iface_t *iface = axon_ofi_ep_iface(ep);
    uint64_t          tag   = axon_ofi_tag(AXON_OFI_KIND_AM, am_id);
    ssize_t           ret;

    if (len <= iface->inject_size) {
        ret = fi_tinject(iface->ep, op->buf, len, ep->addr, tag);
        axon_ofi_tx_put(iface, op);
    } else {
        op->kind = AXON_OFI_OP_SEND;
        op->ep   = ep;
        ret = fi_tsend(iface->ep, op->buf, len, iface->buf_desc, ep->addr, tag, &op->fi_ctx);
        if (__builtin_expect(ret == 0, 1)) {
            ++ep->inflight;
        } else {
            axon_ofi_tx_put(iface, op);
        }
    }
    if (__builtin_expect(ret != 0, 0)) {
        return axon_ofi_ep_post_failed(ep, ret, "send");
    }
    return AXON_OK;
}

axon_status_t axon_ofi_ep_am_short(axon_tl_ep_t *tl_ep, uint8_t am_id, const void *hdr,
                                   size_t hdr_len, const void *payload, size_t length)
{
    axon_ofi_ep_t    *ep    = (axon_ofi_ep_t*)tl_ep;
    axon_ofi_iface_t *iface = axon_ofi_ep_iface(ep);
    size_t            total = hdr_len + length;
    uint64_t          buf[AXON_OFI_INJECT_MAX / sizeof(uint64_t)];
    axon_ofi_op_t    *op;
    ssize_t           ret;

    if (__builtin_expect((am_id >= AXON_AM_ID_MAX) || (total > iface->seg_size), 0)) {
        return axon_ofi_ep_am_invalid(iface, "am_short", am_id, total);
    }
    if (__builtin_expect(ep->status != AXON_OK, 0)) {
        return ep->status;
    }
    if ((total <= iface->inject_size) && (total <= sizeof(buf))) {
        /* Latency path: no buffer to take, no completion to reap. */
        memcpy(buf, hdr, hdr_len);
        if (length > 0) {
            memcpy((char*)buf + hdr_len, payload, length);
        }
        ret = fi_tinject(iface->ep, buf, total, ep->addr, axon_ofi_tag(AXON_OFI_KIND_AM, am_id));
        if (__builtin_expect(ret != 0, 0)) {
            return axon_ofi_ep_post_failed(ep, ret, "inject");
        }
        return AXON_OK;
    }
    op = axon_ofi_tx_get(iface);
    if (op == NULL) {
        return AXON_ERR_NO_RESOURCE;
    }
    memcpy(op->buf, hdr, hdr_len);
    if (length > 0) {
        memcpy((char*)op->buf + hdr_len, payload, length);
    }
    return axon_ofi_ep_send_op(ep, op, am_id, total);
}

ssize_t axon_ofi_ep_am_bcopy(axon_tl_ep_t *tl_ep, uint8_t am_id, axon_pack_cb_t pack, void *arg)
{
    axon_ofi_ep_t    *ep    = (axon_ofi_ep_t*)tl_ep;
    axon_ofi_iface_t *iface = axon_ofi_ep_iface(ep);
    axon_ofi_op_t    *op;
    axon_status_t     status;
    size_t            len;

    if (__builtin_expect(am_id >= AXON_AM_ID_MAX, 0)) {
        return axon_ofi_ep_am_invalid(iface, "am_bcopy", am_id, 0);
    }
    if (__builtin_expect(ep->status != AXON_OK, 0)) {
        return ep->status;
    }
    op = axon_ofi_tx_get(iface);
    if (op == NULL) {
        return AXON_ERR_NO_RESOURCE;
    }
    len = pack(op->buf, arg);
    if (__builtin_expect(len > iface->seg_size, 0)) {
        axon_ofi_tx_put(iface, op);
        return axon_ofi_ep_am_invalid(iface, "am_bcopy", am_id, len);
    }
    status = axon_ofi_ep_send_op(ep, op, am_id, len);
    return (status == AXON_OK) ? (ssize_t)len : status;
}

axon_status_t axon_ofi_ep_flush(axon_tl_ep_t *tl_ep)
{
    const axon_ofi_ep_t *ep = (const axon_ofi_ep_t*)tl_ep;

    if (ep->status != AXON_OK) {
        return ep->status;
    }
    return (ep->inflight > 0) ? AXON_INPROGRESS : AXON_OK;
}

axon_status_t axon_ofi_ep_check(axon_tl_ep_t *tl_ep)
{
    return ((const axon_ofi_ep_t*)tl_ep)->status;
}

/* ---------------------------------------------------------------- control messages */

axon_status_t axon_ofi_ctrl_send(axon_ofi_iface_t *iface, axon_ofi_peer_t *peer, unsigned kind,
                                 const void *body, size_t len)
{
    uint64_t       tag = axon_ofi_tag(kind, 0);
    axon_ofi_op_t *op;
    ssize_t        ret;

    /* A goodbye wants a completion (the iface closes once it left), and so
     * does a probe's ping (an injected send that fails is never reported). */
    if ((kind != AXON_OFI_KIND_BYE) && !iface->probe && (len <= iface->inject_size)) {
        ret = fi_tinject(iface->ep, body, len, peer->addr, tag);
    } else if (peer->ka_pending || ((op = axon_ofi_tx_get(iface)) == NULL)) {
        return AXON_ERR_NO_RESOURCE;
    } else {
        memcpy(op->buf, body, len);
        op->kind = AXON_OFI_OP_CTRL;
        op->peer = peer;
        ret = fi_tsend(iface->ep, op->buf, len, iface->buf_desc, peer->addr, tag, &op->fi_ctx);
        if (ret == 0) {
            peer->ka_pending = 1;
        } else {
            axon_ofi_tx_put(iface, op);
        }
    }
    if ((ret != 0) && (ret != -FI_EAGAIN)) {
        axon_debug("%s: control message %u to worker %016llx failed: %s", iface->name, kind,
                   (unsigned long long)peer->uuid, fi_strerror((int)-ret));
        if (axon_ofi_is_peer_error(ret)) {
            axon_ofi_peer_fail(iface, peer, axon_ofi_status(ret), peer->gone);
        }
    }
    return axon_ofi_status(ret);
}

void axon_ofi_pong(axon_ofi_iface_t *iface, axon_ofi_peer_t *peer)
{
    if (axon_ofi_ctrl_send(iface, peer, AXON_OFI_KIND_PONG, &iface->worker_uuid,
                           sizeof(iface->worker_uuid)) != AXON_ERR_NO_RESOURCE) {
        peer->pong_pending = 0;
    }
}

static void axon_ofi_ping(axon_ofi_iface_t *iface, axon_ofi_peer_t *peer)
{
    axon_ofi_ping_t ping;

    ping.uuid = iface->worker_uuid;
    ping.len  = iface->iface_addr.len;
    memcpy(ping.name, iface->iface_addr.name, ping.len);
    /* Not sent now (the provider is busy): the next interval pings again. */
    (void)axon_ofi_ctrl_send(iface, peer, AXON_OFI_KIND_PING, &ping,
                             AXON_OFI_PING_LEN(ping.len));
}

void axon_ofi_ep_keepalive(axon_ofi_iface_t *iface, double now)
{
    const axon_ofi_config_t *config = iface->config;
    double                   pause  = now - iface->ka_checked - config->keepalive_interval;
    axon_ofi_peer_t         *peer;
    int                      ping;

    /*
     * Silence counts only while we look. Checks come every so many progress
     * calls; more than an interval between two is time we did not progress
     * (the application computed, or the host descheduled us), and answers
     * sent meanwhile wait unread in the provider. Only that pause is forgiven:
     * forgiving the whole wait would let slow progress on a crowded host hide
     * a dead peer for ever.
     */
    if (pause > 0) {
        axon_list_for_each(peer, &iface->peers, link) {
            peer->last_heard = (peer->last_heard + pause < now) ? peer->last_heard + pause : now;
        }
    }
    iface->ka_checked = now;
    ping = iface->probe || ((config->keepalive_interval > 0) && (now >= iface->ka_next));
    if (ping) {
        iface->ka_next = now + config->keepalive_interval;
    }

    axon_list_for_each(peer, &iface->peers, link) {
        if (peer->pong_pending) {
            axon_ofi_pong(iface, peer);
        }
        if (peer->failed || (peer->neps == 0)) {
            continue;
        }
        if ((config->keepalive_timeout > 0) &&
            (now - peer->last_heard > config->keepalive_timeout)) {
            axon_debug("%s: worker %016llx answered no ping for %.1f s", iface->name,
                       (unsigned long long)peer->uuid, now - peer->last_heard);
            axon_ofi_peer_fail(iface, peer, AXON_ERR_ENDPOINT_TIMEOUT, 0);
        } else if (ping) {
            axon_ofi_ping(iface, peer);
        }
    }
    iface->probe = 0;
}
