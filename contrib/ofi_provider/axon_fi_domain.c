/*
 * Domain: the free list of op descriptors that the data path takes from
 * (grown a chunk at a time, never per operation), and the lock wider
 * threading levels need; with FI_PROGRESS_AUTO, the progress thread
 * (axon_fi_progress.c). Workers belong to endpoints: each
 * endpoint has its own matching queues, so a domain may have several.
 */
#include <stdlib.h>
#include <string.h>
#include "axon_fi.h"

/* ---------------------------------------------------------------- free lists */

static int axon_fi_domain_grow(axon_fi_domain_t *domain, size_t ops)
{
    size_t bytes = sizeof(axon_fi_chunk_t) + ops * sizeof(axon_fi_op_t);
    axon_fi_chunk_t *chunk;
    axon_fi_op_t *op;
    size_t i;

    chunk = calloc(1, bytes);
    if (chunk == NULL) {
        return -FI_ENOMEM;
    }
    chunk->next    = domain->chunks;
    domain->chunks = chunk;
    op = (axon_fi_op_t *)(chunk + 1);
    for (i = 0; i < ops; ++i) {
        op[i].next       = domain->free_ops;
        domain->free_ops = &op[i];
    }
    return 0;
}

axon_fi_op_t *axon_fi_op_get(axon_fi_domain_t *domain)
{
    axon_fi_op_t *op = domain->free_ops;

    if ((op == NULL) && (axon_fi_domain_grow(domain, domain->op_chunk) == 0)) {
        op = domain->free_ops;
    }
    if (op != NULL) {
        domain->free_ops = op->next;
        op->req     = NULL;
        op->msg     = NULL;
        op->used    = 0;
        op->sender  = AXON_SENDER_ANY;
        op->discard = 0;
        op->posted  = 0;
        op->multi   = 0;
        op->layout  = NULL;
        op->bounce  = NULL;
    }
    return op;
}

/* RMA inject copies: a free list of AXON_FI_INJECT_SIZE buffers, grown one at a time. */
void *axon_fi_bounce_get(axon_fi_domain_t *domain)
{
    void *buf = domain->free_bounce;

    if (buf != NULL) {
        domain->free_bounce = *(void **)buf;
        return buf;
    }
    return malloc(AXON_FI_INJECT_SIZE);
}

void axon_fi_bounce_put(axon_fi_domain_t *domain, void *buf)
{
    *(void **)buf = domain->free_bounce;
    domain->free_bounce = buf;
}

void axon_fi_bounce_free_all(axon_fi_domain_t *domain)
{
    void *buf;

    while ((buf = domain->free_bounce) != NULL) {
        domain->free_bounce = *(void **)buf;
        free(buf);
    }
}

void axon_fi_op_put(axon_fi_domain_t *domain, axon_fi_op_t *op)
{
    op->next         = domain->free_ops;
    domain->free_ops = op;
}

/* ---------------------------------------------------------------- domain */

static int axon_fi_domain_close(struct fid *fid)
{
    axon_fi_domain_t *domain = container_of(fid, axon_fi_domain_t, domain_fid.fid);
    axon_fi_chunk_t *chunk;

    if (domain->refs > 0) {
        AXON_FI_WARN(FI_LOG_DOMAIN, "domain still has %d AVs/CQs/counters/endpoints/MRs open",
                     domain->refs);
        return -FI_EBUSY;
    }
    axon_fi_progress_stop(domain);
    while ((chunk = domain->chunks) != NULL) {
        domain->chunks = chunk->next;
        free(chunk);
    }
    axon_fi_bounce_free_all(domain);
    axon_fi_map_free(&domain->mr_by_key);
    axon_fi_event_slots_close(domain);
    axon_fi_eps_free(&domain->event_eps);
    axon_fi_eps_free(&domain->word_eps);
    axon_fi_eps_free(&domain->all_eps);
    pthread_mutex_destroy(&domain->mr_lock);
    pthread_mutex_lock(&domain->fabric->lock);
    --domain->fabric->refs;
    pthread_mutex_unlock(&domain->fabric->lock);
    free(domain);
    return 0;
}

static struct fi_ops axon_fi_domain_fi_ops = {
    .size     = sizeof(struct fi_ops),
    .close    = axon_fi_domain_close,
    .bind     = axon_fi_no_bind,
    .control  = axon_fi_no_control,
    .ops_open = axon_fi_no_ops_open,
};

static int axon_fi_no_scalable_ep(struct fid_domain *domain, struct fi_info *info,
                                  struct fid_ep **sep, void *context)
{
    return -FI_ENOSYS;
}

static int axon_fi_no_stx_ctx(struct fid_domain *domain, struct fi_tx_attr *attr,
                              struct fid_stx **stx, void *context)
{
    return -FI_ENOSYS;
}

static int axon_fi_no_srx_ctx(struct fid_domain *domain, struct fi_rx_attr *attr,
                              struct fid_ep **rx_ep, void *context)
{
    return -FI_ENOSYS;
}

static int axon_fi_no_query_collective(struct fid_domain *domain, enum fi_collective_op coll,
                                       struct fi_collective_attr *attr, uint64_t flags)
{
    return -FI_ENOSYS;
}

static int axon_fi_endpoint2(struct fid_domain *domain, struct fi_info *info,
                             struct fid_ep **ep, uint64_t flags, void *context)
{
    if (flags != 0) {
        AXON_FI_WARN(FI_LOG_EP_CTRL, "fi_endpoint2 flags 0x%llx not supported",
                     (unsigned long long)flags);
        return -FI_EINVAL;
    }
    return axon_fi_ep_open(domain, info, ep, context);
}

static struct fi_ops_domain axon_fi_domain_ops = {
    .size             = sizeof(struct fi_ops_domain),
    .av_open          = axon_fi_av_open,
    .cq_open          = axon_fi_cq_open,
    .endpoint         = axon_fi_ep_open,
    .scalable_ep      = axon_fi_no_scalable_ep,
    .cntr_open        = axon_fi_cntr_open,
    .poll_open        = axon_fi_poll_open,
    .stx_ctx          = axon_fi_no_stx_ctx,
    .srx_ctx          = axon_fi_no_srx_ctx,
    .query_atomic     = axon_fi_query_atomic,
    .query_collective = axon_fi_no_query_collective,
    .endpoint2        = axon_fi_endpoint2,
};

int axon_fi_domain_open(struct fid_fabric *fabric_fid, struct fi_info *info,
                        struct fid_domain **domain_p, void *context)
{
    axon_fi_fabric_t *fabric = container_of(fabric_fid, axon_fi_fabric_t, fabric_fid);
    const struct fi_domain_attr *attr = (info != NULL) ? info->domain_attr : NULL;
    axon_fi_domain_t *domain;
    size_t ops;
    int ret;

    if ((attr != NULL) && (attr->name != NULL) && strcmp(attr->name, AXON_FI_DOMAIN_NAME)) {
        AXON_FI_WARN(FI_LOG_DOMAIN, "unknown domain name '%s'", attr->name);
        return -FI_EINVAL;
    }
    domain = calloc(1, sizeof(*domain));
    if (domain == NULL) {
        return -FI_ENOMEM;
    }
    domain->fabric    = fabric;
    domain->threading = (attr != NULL) ? attr->threading : FI_THREAD_DOMAIN;
    /* A worker is not thread-safe: anything wider than one thread per domain takes a lock,
     * and so does a domain whose progress thread shares the workers (FI_PROGRESS_AUTO). */
    domain->locked    = ((domain->threading != FI_THREAD_UNSPEC) &&
                         (domain->threading != FI_THREAD_DOMAIN)) ||
                        ((attr != NULL) && (attr->data_progress == FI_PROGRESS_AUTO));
    domain->mr_mode   = axon_fi_mr_mode_bits((attr != NULL) ? (uint64_t)attr->mr_mode : 0);
    domain->next_prov_key = 1;
    domain->rma_event = (info != NULL) && (info->caps & FI_RMA_EVENT);
    domain->mr_share  = axon_fi_mr_share_wanted(domain->mr_mode);
    /* Biased where the application's calls never overlap and only the progress thread
     * shares the lock. */
    axon_fi_dlock_init(&domain->lock, domain->locked &&
                                      ((domain->threading == FI_THREAD_UNSPEC) ||
                                       (domain->threading == FI_THREAD_DOMAIN)));
    pthread_mutex_init(&domain->mr_lock, NULL);

    ops = ((info != NULL) && (info->tx_attr != NULL) && info->tx_attr->size) ?
          info->tx_attr->size : AXON_FI_TX_SIZE;
    ops += ((info != NULL) && (info->rx_attr != NULL) && info->rx_attr->size) ?
           info->rx_attr->size : AXON_FI_RX_SIZE;
    domain->op_chunk = ops;
    ret = axon_fi_domain_grow(domain, ops);
    if (ret != 0) {
        goto err_free;
    }
    ret = axon_fi_event_slots_open(domain);
    if (ret != 0) {
        goto err_free;
    }
    if ((attr != NULL) && (attr->data_progress == FI_PROGRESS_AUTO)) {
        ret = axon_fi_progress_start(domain);
        if (ret != 0) {
            goto err_free;
        }
    }

    domain->domain_fid.fid.fclass  = FI_CLASS_DOMAIN;
    domain->domain_fid.fid.context = context;
    domain->domain_fid.fid.ops     = &axon_fi_domain_fi_ops;
    domain->domain_fid.ops         = &axon_fi_domain_ops;
    domain->domain_fid.mr          = &axon_fi_mr_ops;
    pthread_mutex_lock(&fabric->lock);
    ++fabric->refs;
    pthread_mutex_unlock(&fabric->lock);
    *domain_p = &domain->domain_fid;
    return 0;

err_free:
    axon_fi_event_slots_close(domain);
    while (domain->chunks != NULL) {
        axon_fi_chunk_t *chunk = domain->chunks;
        domain->chunks = chunk->next;
        free(chunk);
    }
    pthread_mutex_destroy(&domain->mr_lock);
    free(domain);
    return ret;
}
