/*
 * RDM endpoint: its own Axon worker (libfabric endpoints match separately,
 * and so do workers), its name published by an address server, bindings
 * (AV, CQs, counters, EQ), enable, options, cancel and close. The data path
 * is in axon_fi_xfer.c, reached through axon_fi_tagged.c and axon_fi_msg.c.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "axon_fi.h"
#include "axon_fi_ext.h"

#define AXON_FI_EP_CLOSE_WAIT_MS 2000   /* for operations in flight at close */

/* ---------------------------------------------------------------- bind / control */

static int axon_fi_ep_bind_cq(axon_fi_ep_t *ep, axon_fi_cq_t *cq, uint64_t flags)
{
    if (flags & ~(uint64_t)(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION)) {
        AXON_FI_WARN(FI_LOG_EP_CTRL, "CQ bind flags 0x%llx not supported",
                     (unsigned long long)flags);
        return -FI_EINVAL;
    }
    if (!(flags & (FI_TRANSMIT | FI_RECV))) {
        AXON_FI_WARN(FI_LOG_EP_CTRL, "CQ bind needs FI_TRANSMIT and/or FI_RECV");
        return -FI_EINVAL;
    }
    if (((flags & FI_TRANSMIT) && (ep->tx_cq != NULL)) ||
        ((flags & FI_RECV) && (ep->rx_cq != NULL))) {
        AXON_FI_WARN(FI_LOG_EP_CTRL, "endpoint already has a %s CQ",
                     (flags & FI_TRANSMIT) && ep->tx_cq ? "transmit" : "receive");
        return -FI_EINVAL;
    }
    if (axon_fi_eps_add(&cq->eps, ep) != 0) {
        return -FI_ENOMEM;
    }
    if (flags & FI_TRANSMIT) {
        ep->tx_cq        = cq;
        ep->tx_selective = (flags & FI_SELECTIVE_COMPLETION) != 0;
        ++cq->refs;
    }
    if (flags & FI_RECV) {
        ep->rx_cq        = cq;
        ep->rx_selective = (flags & FI_SELECTIVE_COMPLETION) != 0;
        ++cq->refs;
    }
    return 0;
}

/*
 * FI_SEND / FI_RECV / FI_WRITE / FI_READ: what the counter counts (RMA initiated
 * here for the last two). FI_REMOTE_WRITE / FI_REMOTE_READ: remote accesses to
 * this endpoint's domain's regions told to this endpoint (FI_RMA_EVENT only).
 */
static int axon_fi_ep_bind_cntr(axon_fi_ep_t *ep, axon_fi_cntr_t *cntr, uint64_t flags)
{
    static const struct {
        uint64_t    flag;
        size_t      slot;
        const char *what;
    } kinds[] = {
        {FI_SEND,  offsetof(axon_fi_ep_t, tx_cntr), "send"},
        {FI_RECV,  offsetof(axon_fi_ep_t, rx_cntr), "receive"},
        {FI_WRITE, offsetof(axon_fi_ep_t, wr_cntr), "write"},
        {FI_READ,  offsetof(axon_fi_ep_t, rd_cntr), "read"},
        {FI_REMOTE_WRITE, offsetof(axon_fi_ep_t, rwr_cntr), "remote write"},
        {FI_REMOTE_READ,  offsetof(axon_fi_ep_t, rrd_cntr), "remote read"},
    };
    const uint64_t remote = FI_REMOTE_WRITE | FI_REMOTE_READ;
    size_t i;

    if ((flags & ~(uint64_t)(FI_SEND | FI_RECV | FI_WRITE | FI_READ | remote)) ||
        ((flags & remote) && !ep->domain->rma_event)) {
        AXON_FI_WARN(FI_LOG_EP_CTRL, "counter bind flags 0x%llx not supported (FI_SEND, "
                     "FI_RECV, FI_WRITE, FI_READ; FI_REMOTE_WRITE, FI_REMOTE_READ with "
                     "FI_RMA_EVENT)", (unsigned long long)flags);
        return -FI_ENOSYS;
    }
    for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); ++i) {
        if ((flags & kinds[i].flag) &&
            (*(axon_fi_cntr_t **)((char *)ep + kinds[i].slot) != NULL)) {
            AXON_FI_WARN(FI_LOG_EP_CTRL, "endpoint already has a %s counter", kinds[i].what);
            return -FI_EINVAL;
        }
    }
    if (axon_fi_eps_add(&cntr->eps, ep) != 0) {
        return -FI_ENOMEM;
    }
    for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); ++i) {
        if (flags & kinds[i].flag) {
            *(axon_fi_cntr_t **)((char *)ep + kinds[i].slot) = cntr;
            ++cntr->refs;
        }
    }
    if (flags & remote) {
        cntr->harvest = 1;   /* accesses counted by words: taken in when read */
    }
    return 0;
}

static int axon_fi_ep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
    axon_fi_ep_t *ep = container_of(fid, axon_fi_ep_t, ep_fid.fid);
    axon_fi_av_t *av;
    int ret = 0;

    if (ep->enabled) {
        AXON_FI_WARN(FI_LOG_EP_CTRL, "bind after fi_enable");
        return -FI_EINVAL;
    }
    axon_fi_lock(ep->domain);
    switch (bfid->fclass) {
    case FI_CLASS_CQ:
        ret = axon_fi_ep_bind_cq(ep, container_of(bfid, axon_fi_cq_t, cq_fid.fid), flags);
        break;
    case FI_CLASS_CNTR:
        ret = axon_fi_ep_bind_cntr(ep, container_of(bfid, axon_fi_cntr_t, cntr_fid.fid),
                                   flags);
        break;
    case FI_CLASS_AV:
        av = container_of(bfid, axon_fi_av_t, av_fid.fid);
        if (ep->av != NULL) {
            AXON_FI_WARN(FI_LOG_EP_CTRL, "endpoint already has an AV");
            ret = -FI_EINVAL;
        } else if ((ret = axon_fi_eps_add(&av->eps, ep)) == 0) {
            ep->av = av;
        }
        break;
    case FI_CLASS_EQ:
        ep->eq = container_of(bfid, axon_fi_eq_t, eq_fid.fid);
        pthread_mutex_lock(&ep->eq->lock);
        ++ep->eq->refs;
        pthread_mutex_unlock(&ep->eq->lock);
        break;
    default:
        AXON_FI_WARN(FI_LOG_EP_CTRL, "cannot bind an object of class %zu", bfid->fclass);
        ret = -FI_ENOSYS;
        break;
    }
    axon_fi_unlock(ep->domain);
    return ret;
}

static void axon_fi_ep_update_comp(axon_fi_ep_t *ep)
{
    ep->tx_comp = !ep->tx_selective || (ep->tx_op_flags & FI_COMPLETION);
    ep->rx_comp = !ep->rx_selective || (ep->rx_op_flags & FI_COMPLETION);
}

static int axon_fi_ep_control(struct fid *fid, int command, void *arg)
{
    axon_fi_ep_t *ep = container_of(fid, axon_fi_ep_t, ep_fid.fid);
    uint64_t *flags = arg;
    int ret;

    switch (command) {
    case FI_ENABLE:
        if (ep->av == NULL) {
            AXON_FI_WARN(FI_LOG_EP_CTRL, "fi_enable: an RDM endpoint needs an AV bound");
            return -FI_ENOAV;
        }
        if ((ep->tx_cq == NULL) && (ep->rx_cq == NULL) && (ep->tx_cntr == NULL) &&
            (ep->rx_cntr == NULL) && (ep->wr_cntr == NULL) && (ep->rd_cntr == NULL) &&
            (ep->rwr_cntr == NULL) && (ep->rrd_cntr == NULL)) {
            AXON_FI_WARN(FI_LOG_EP_CTRL, "fi_enable: no CQ or counter bound");
            return -FI_ENOCQ;
        }
        if (axon_fi_event_listens(ep->domain, ep->caps) && !ep->enabled) {
            axon_fi_lock(ep->domain);
            ret = axon_fi_event_open(ep);
            axon_fi_unlock(ep->domain);
            if (ret != 0) {
                return ret;
            }
        }
        if (ep->rx_cq != NULL) {
            ep->rx_cq->av = ep->av;
        }
        axon_fi_ep_update_comp(ep);
        ep->enabled = 1;
        return 0;
    case FI_GETOPSFLAG:
        if (flags == NULL) {
            return -FI_EINVAL;
        }
        *flags = (*flags & FI_TRANSMIT) ? ep->tx_op_flags : ep->rx_op_flags;
        return 0;
    case FI_SETOPSFLAG:
        if (flags == NULL) {
            return -FI_EINVAL;
        }
        if (*flags & FI_TRANSMIT) {
            ep->tx_op_flags = *flags & ~(uint64_t)FI_TRANSMIT;
        } else {
            ep->rx_op_flags = *flags & ~(uint64_t)FI_RECV;
        }
        axon_fi_ep_update_comp(ep);
        return 0;
    case AXON_FI_EP_EVENTS_SENT:
        if (arg == NULL) {
            return -FI_EINVAL;
        }
        axon_fi_lock(ep->domain);
        *(uint64_t *)arg = ep->events_sent;
        axon_fi_unlock(ep->domain);
        return 0;
    default:
        AXON_FI_WARN(FI_LOG_EP_CTRL, "endpoint control command %d not supported", command);
        return -FI_ENOSYS;
    }
}

/* ---------------------------------------------------------------- close */

/* Receive a claimed message into nothing, so Axon releases it. */
static void axon_fi_ep_drop_claimed(axon_fi_ep_t *ep)
{
    axon_request_h req;
    axon_fi_op_t *op;

    while (ep->claimed.next != &ep->claimed) {
        op = ep->claimed.next;
        axon_fi_list_del(op);
        if (axon_tag_msg_recv_nb(ep->worker, NULL, 0, op->msg, NULL, &req) == AXON_INPROGRESS) {
            axon_request_free(req);
        }
        axon_fi_op_put(ep->domain, op);
    }
}

/* Operations in flight end now: receives canceled, sends given a moment to leave. */
static void axon_fi_ep_drain(axon_fi_ep_t *ep)
{
    struct timespec start;
    axon_fi_op_t *op;

    axon_fi_mrecv_close(ep);
    axon_fi_ep_drop_claimed(ep);
    for (op = ep->inflight.next; op != &ep->inflight; op = op->next) {
        if (op->req != NULL) {
            axon_request_cancel(ep->worker, op->req);
        }
    }
    /* Let callbacks due (sends leaving, canceled receives) run while the CQs exist. */
    clock_gettime(CLOCK_MONOTONIC, &start);
    while ((ep->inflight.next != &ep->inflight) &&
           !axon_fi_expired(&start, AXON_FI_EP_CLOSE_WAIT_MS)) {
        axon_worker_progress(ep->worker);
    }
    /* What is still due completes into nothing. */
    for (op = ep->inflight.next; op != &ep->inflight; op = op->next) {
        op->ep = NULL;
    }
}

/* Unbind from CQs, counters and the AV (lock held). */
static void axon_fi_ep_unbind(axon_fi_ep_t *ep)
{
    axon_fi_cq_t *cqs[2]     = {ep->tx_cq, ep->rx_cq};
    axon_fi_cntr_t *cntrs[6] = {ep->tx_cntr, ep->rx_cntr, ep->wr_cntr, ep->rd_cntr,
                                ep->rwr_cntr, ep->rrd_cntr};
    int i;

    for (i = 0; i < 2; ++i) {
        if (cqs[i] != NULL) {
            --cqs[i]->refs;
            axon_fi_eps_del(&cqs[i]->eps, ep);
        }
    }
    for (i = 0; i < 6; ++i) {
        if (cntrs[i] != NULL) {
            --cntrs[i]->refs;
            axon_fi_eps_del(&cntrs[i]->eps, ep);
        }
    }
    if ((ep->rx_cq != NULL) && (ep->rx_cq->av == ep->av)) {
        ep->rx_cq->av = NULL;
    }
    if (ep->av != NULL) {
        axon_fi_eps_del(&ep->av->eps, ep);
    }
}

static int axon_fi_ep_close(struct fid *fid)
{
    axon_fi_ep_t *ep = container_of(fid, axon_fi_ep_t, ep_fid.fid);
    axon_fi_domain_t *domain = ep->domain;

    axon_fi_lock(domain);
    axon_fi_eps_del(&domain->all_eps, ep);   /* the progress thread lets it go */
    axon_fi_progress_posted(domain);         /* and stops waiting on its worker */
    axon_fi_event_close(ep);
    axon_fi_ep_drain(ep);
    axon_fi_event_adds_drain(ep);   /* counts told by word adds reach their targets */
    axon_fi_conn_close_all(ep);
    axon_fi_ep_unbind(ep);
    axon_fi_addr_withdraw(ep->pub);
    axon_worker_release_address(ep->worker, ep->worker_addr);
    axon_worker_destroy(ep->worker);
    --domain->refs;
    axon_fi_unlock(domain);
    if (ep->eq != NULL) {
        pthread_mutex_lock(&ep->eq->lock);
        --ep->eq->refs;
        pthread_mutex_unlock(&ep->eq->lock);
    }
    free(ep);
    return 0;
}

static struct fi_ops axon_fi_ep_fi_ops = {
    .size     = sizeof(struct fi_ops),
    .close    = axon_fi_ep_close,
    .bind     = axon_fi_ep_bind,
    .control  = axon_fi_ep_control,
    .ops_open = axon_fi_no_ops_open,
};

/* ---------------------------------------------------------------- ep ops */

static ssize_t axon_fi_ep_cancel(fid_t fid, void *context)
{
    axon_fi_ep_t *ep = container_of(fid, axon_fi_ep_t, ep_fid.fid);
    axon_fi_op_t *op;
    ssize_t ret = -FI_ENOENT;

    axon_fi_lock(ep->domain);
    for (op = ep->inflight.next; op != &ep->inflight; op = op->next) {
        if ((op->context == context) && (op->req != NULL)) {
            /* Not yet matched: it completes with FI_ECANCELED; else it completes normally. */
            axon_request_cancel(ep->worker, op->req);
            ret = 0;
            break;
        }
    }
    if ((ret != 0) && axon_fi_mrecv_cancel(ep, context)) {
        ret = 0;
    }
    axon_fi_unlock(ep->domain);
    return ret;
}

static int axon_fi_ep_getopt(fid_t fid, int level, int optname, void *optval, size_t *optlen)
{
    axon_fi_ep_t *ep = container_of(fid, axon_fi_ep_t, ep_fid.fid);

    if ((level != FI_OPT_ENDPOINT) || (optname != FI_OPT_MIN_MULTI_RECV)) {
        return -FI_ENOPROTOOPT;
    }
    if ((optval == NULL) || (optlen == NULL) || (*optlen < sizeof(size_t))) {
        return -FI_ETOOSMALL;
    }
    *(size_t *)optval = ep->min_multi_recv;
    *optlen = sizeof(size_t);
    return 0;
}

static int axon_fi_ep_setopt(fid_t fid, int level, int optname, const void *optval,
                             size_t optlen)
{
    axon_fi_ep_t *ep = container_of(fid, axon_fi_ep_t, ep_fid.fid);

    if ((level != FI_OPT_ENDPOINT) || (optname != FI_OPT_MIN_MULTI_RECV)) {
        AXON_FI_WARN(FI_LOG_EP_CTRL, "endpoint option %d/%d not supported "
                     "(FI_OPT_MIN_MULTI_RECV only)", level, optname);
        return -FI_ENOPROTOOPT;
    }
    if ((optval == NULL) || (optlen != sizeof(size_t))) {
        AXON_FI_WARN(FI_LOG_EP_CTRL, "FI_OPT_MIN_MULTI_RECV takes a size_t, not %zu bytes",
                     optlen);
        return -FI_EINVAL;
    }
    ep->min_multi_recv = *(const size_t *)optval;
    return 0;
}

static int axon_fi_ep_no_ctx(struct fid_ep *sep, int index, void *attr, struct fid_ep **ep,
                             void *context)
{
    return -FI_ENOSYS;
}

static ssize_t axon_fi_ep_size_left(struct fid_ep *ep)
{
    return AXON_FI_TX_SIZE;  /* descriptors grow on demand */
}

static struct fi_ops_ep axon_fi_ep_ops = {
    .size         = sizeof(struct fi_ops_ep),
    .cancel       = axon_fi_ep_cancel,
    .getopt       = axon_fi_ep_getopt,
    .setopt       = axon_fi_ep_setopt,
    .tx_ctx       = (int (*)(struct fid_ep *, int, struct fi_tx_attr *, struct fid_ep **,
                             void *))axon_fi_ep_no_ctx,
    .rx_ctx       = (int (*)(struct fid_ep *, int, struct fi_rx_attr *, struct fid_ep **,
                             void *))axon_fi_ep_no_ctx,
    .rx_size_left = axon_fi_ep_size_left,
    .tx_size_left = axon_fi_ep_size_left,
};

/* ---------------------------------------------------------------- cm: names only */

static int axon_fi_ep_getname(fid_t fid, void *addr, size_t *addrlen)
{
    axon_fi_ep_t *ep = container_of(fid, axon_fi_ep_t, ep_fid.fid);
    size_t len = sizeof(ep->name);

    if (addrlen == NULL) {
        return -FI_EINVAL;
    }
    if ((*addrlen < len) || (addr == NULL)) {
        *addrlen = len;
        return -FI_ETOOSMALL;
    }
    memcpy(addr, &ep->name, len);
    *addrlen = len;
    return 0;
}

static int axon_fi_ep_setname(fid_t fid, void *addr, size_t addrlen)
{
    AXON_FI_WARN(FI_LOG_EP_CTRL, "fi_setname: axon names are assigned by the provider");
    return -FI_ENOSYS;
}

static int axon_fi_ep_no_getpeer(struct fid_ep *ep, void *addr, size_t *addrlen)
{
    return -FI_ENOSYS;
}

static int axon_fi_ep_no_connect(struct fid_ep *ep, const void *addr, const void *param,
                                 size_t paramlen)
{
    return -FI_ENOSYS;
}

static int axon_fi_ep_no_listen(struct fid_pep *pep)
{
    return -FI_ENOSYS;
}

static int axon_fi_ep_no_accept(struct fid_ep *ep, const void *param, size_t paramlen)
{
    return -FI_ENOSYS;
}

static int axon_fi_ep_no_reject(struct fid_pep *pep, fid_t handle, const void *param,
                                size_t paramlen)
{
    return -FI_ENOSYS;
}

static int axon_fi_ep_no_shutdown(struct fid_ep *ep, uint64_t flags)
{
    return -FI_ENOSYS;
}

static int axon_fi_ep_no_join(struct fid_ep *ep, const void *addr, uint64_t flags,
                              struct fid_mc **mc, void *context)
{
    return -FI_ENOSYS;
}

static struct fi_ops_cm axon_fi_ep_cm_ops = {
    .size     = sizeof(struct fi_ops_cm),
    .setname  = axon_fi_ep_setname,
    .getname  = axon_fi_ep_getname,
    .getpeer  = axon_fi_ep_no_getpeer,
    .connect  = axon_fi_ep_no_connect,
    .listen   = axon_fi_ep_no_listen,
    .accept   = axon_fi_ep_no_accept,
    .reject   = axon_fi_ep_no_reject,
    .shutdown = axon_fi_ep_no_shutdown,
    .join     = axon_fi_ep_no_join,
};

/* ---------------------------------------------------------------- open */

/* The worker, and its address published where info's src_addr says (lock not needed: new). */
static int axon_fi_ep_open_worker(axon_fi_ep_t *ep, const struct fi_info *info)
{
    axon_fi_name_t src, *srcp = NULL;
    axon_status_t status;
    int ret;

    if ((info->src_addr != NULL) && (info->src_addrlen > 0)) {
        if ((info->src_addrlen != sizeof(src)) ||
            (((const axon_fi_name_t *)info->src_addr)->sin_family != AF_INET)) {
            AXON_FI_WARN(FI_LOG_EP_CTRL, "src_addr of %zu bytes is not an FI_SOCKADDR_IN name",
                         info->src_addrlen);
            return -FI_EINVAL;
        }
        memcpy(&src, info->src_addr, sizeof(src));
        srcp = &src;
    }
    status = axon_worker_create(ep->domain->fabric->context, NULL, &ep->worker);
    if (status != AXON_OK) {
        AXON_FI_WARN(FI_LOG_EP_CTRL, "axon_worker_create failed: %s", axon_status_string(status));
        return -axon_fi_errno(status);
    }
    status = axon_worker_get_address(ep->worker, &ep->worker_addr, &ep->worker_addr_len);
    if (status != AXON_OK) {
        axon_worker_destroy(ep->worker);
        return -axon_fi_errno(status);
    }
    ret = axon_fi_addr_publish(srcp, axon_worker_id(ep->worker), ep->worker_addr,
                               ep->worker_addr_len, ep->domain, &ep->words, &ep->name,
                               &ep->pub);
    if (ret != 0) {
        axon_worker_release_address(ep->worker, ep->worker_addr);
        axon_worker_destroy(ep->worker);
    }
    return ret;
}

int axon_fi_ep_open(struct fid_domain *domain_fid, struct fi_info *info, struct fid_ep **ep_p,
                    void *context)
{
    axon_fi_domain_t *domain = container_of(domain_fid, axon_fi_domain_t, domain_fid);
    axon_fi_ep_t *ep;
    int ret;

    if ((info == NULL) || (info->ep_attr == NULL)) {
        AXON_FI_WARN(FI_LOG_EP_CTRL, "fi_endpoint needs an fi_info with ep_attr");
        return -FI_EINVAL;
    }
    if ((info->ep_attr->type != FI_EP_RDM) && (info->ep_attr->type != FI_EP_UNSPEC)) {
        AXON_FI_WARN(FI_LOG_EP_CTRL, "endpoint type %d not supported (FI_EP_RDM only)",
                     (int)info->ep_attr->type);
        return -FI_ENOSYS;
    }
    ep = calloc(1, sizeof(*ep));
    if (ep == NULL) {
        return -FI_ENOMEM;
    }
    ep->domain = domain;
    ret = axon_fi_ep_open_worker(ep, info);
    if (ret != 0) {
        free(ep);
        return ret;
    }
    ep->caps           = info->caps ? info->caps : (FI_TAGGED | FI_DIRECTED_RECV);
    /* Untagged messages and RMA events (remote CQ data too) take the reserved bit's space. */
    ep->tag_reserved   = ((ep->caps & FI_MSG) || axon_fi_event_listens(domain, ep->caps)) ?
                         AXON_FI_MSG_TAG : 0;
    ep->tx_op_flags    = (info->tx_attr != NULL) ? info->tx_attr->op_flags : 0;
    ep->rx_op_flags    = (info->rx_attr != NULL) ? info->rx_attr->op_flags : 0;
    ep->min_multi_recv = AXON_FI_MIN_MULTI_RECV;
    axon_fi_list_init(&ep->inflight);
    axon_fi_list_init(&ep->claimed);
    axon_fi_list_init(&ep->held);
    axon_fi_ep_update_comp(ep);

    ep->ep_fid.fid.fclass  = FI_CLASS_EP;
    ep->ep_fid.fid.context = context;
    ep->ep_fid.fid.ops     = &axon_fi_ep_fi_ops;
    ep->ep_fid.ops         = &axon_fi_ep_ops;
    ep->ep_fid.cm          = &axon_fi_ep_cm_ops;
    ep->ep_fid.msg         = (ep->caps & FI_MSG) ? &axon_fi_msg_ops : &axon_fi_no_msg_ops;
    ep->ep_fid.rma         = (ep->caps & FI_RMA) ? &axon_fi_rma_ops : &axon_fi_no_rma_ops;
    ep->ep_fid.tagged      = &axon_fi_tagged_ops;
    ep->ep_fid.atomic      = (ep->caps & FI_ATOMIC) ? &axon_fi_atomic_ops :
                                                  &axon_fi_no_atomic_ops;
    axon_fi_lock(domain);
    if (domain->progress_running && (axon_fi_eps_add(&domain->all_eps, ep) != 0)) {
        axon_fi_unlock(domain);
        axon_fi_addr_withdraw(ep->pub);
        axon_worker_release_address(ep->worker, ep->worker_addr);
        axon_worker_destroy(ep->worker);
        free(ep);
        return -FI_ENOMEM;
    }
    axon_fi_progress_posted(domain);   /* a sleeping thread waits on this worker too */
    ++domain->refs;
    axon_fi_unlock(domain);
    *ep_p = &ep->ep_fid;
    return 0;
}
