/*
 * Poll sets: fi_poll drives the workers behind its CQs and counters, then
 * reports the context of each CQ holding an entry (or an error) and of each
 * counter that moved since the last fi_poll. Members are held (a CQ or
 * counter in a set cannot be closed) until fi_poll_del or the set's close.
 */
#include <stdlib.h>
#include "axon_fi.h"

typedef struct {
    struct fid_poll    poll_fid;
    axon_fi_domain_t  *domain;
    struct fid       **fids;
    size_t             count, cap;
} axon_fi_poll_t;

static int *axon_fi_poll_refs(struct fid *fid)
{
    return (fid->fclass == FI_CLASS_CQ) ?
           &container_of(fid, axon_fi_cq_t, cq_fid.fid)->refs :
           &container_of(fid, axon_fi_cntr_t, cntr_fid.fid)->refs;
}

static int axon_fi_poll_poll(struct fid_poll *poll_fid, void **context, int count)
{
    axon_fi_poll_t *set = container_of(poll_fid, axon_fi_poll_t, poll_fid);
    axon_fi_cntr_t *cntr;
    axon_fi_cq_t *cq;
    size_t i;
    int n = 0;

    axon_fi_lock(set->domain);
    for (i = 0; i < set->count; ++i) {
        if (set->fids[i]->fclass == FI_CLASS_CQ) {
            axon_fi_eps_progress(&container_of(set->fids[i], axon_fi_cq_t, cq_fid.fid)->eps);
        } else {
            axon_fi_cntr_progress(container_of(set->fids[i], axon_fi_cntr_t, cntr_fid.fid));
        }
    }
    for (i = 0; (i < set->count) && (n < count); ++i) {
        if (set->fids[i]->fclass == FI_CLASS_CQ) {
            cq = container_of(set->fids[i], axon_fi_cq_t, cq_fid.fid);
            if ((cq->count == 0) && (cq->err_count == 0)) {
                continue;
            }
        } else {
            cntr = container_of(set->fids[i], axon_fi_cntr_t, cntr_fid.fid);
            if (cntr->value + cntr->errors == cntr->polled) {
                continue;
            }
            cntr->polled = cntr->value + cntr->errors;
        }
        context[n++] = set->fids[i]->context;
    }
    axon_fi_unlock(set->domain);
    return n;
}

static int axon_fi_poll_add(struct fid_poll *poll_fid, struct fid *event_fid, uint64_t flags)
{
    axon_fi_poll_t *set = container_of(poll_fid, axon_fi_poll_t, poll_fid);
    struct fid **fids;
    size_t cap;

    if ((event_fid->fclass != FI_CLASS_CQ) && (event_fid->fclass != FI_CLASS_CNTR)) {
        AXON_FI_WARN(FI_LOG_DOMAIN, "fi_poll_add: class %zu is neither a CQ nor a counter",
                     event_fid->fclass);
        return -FI_EINVAL;
    }
    axon_fi_lock(set->domain);
    if (set->count == set->cap) {
        cap  = set->cap ? set->cap * 2 : 4;
        fids = realloc(set->fids, cap * sizeof(*fids));
        if (fids == NULL) {
            axon_fi_unlock(set->domain);
            return -FI_ENOMEM;
        }
        set->fids = fids;
        set->cap  = cap;
    }
    set->fids[set->count++] = event_fid;
    ++*axon_fi_poll_refs(event_fid);
    axon_fi_unlock(set->domain);
    return 0;
}

static int axon_fi_poll_del(struct fid_poll *poll_fid, struct fid *event_fid, uint64_t flags)
{
    axon_fi_poll_t *set = container_of(poll_fid, axon_fi_poll_t, poll_fid);
    size_t i;

    axon_fi_lock(set->domain);
    for (i = 0; i < set->count; ++i) {
        if (set->fids[i] == event_fid) {
            set->fids[i] = set->fids[--set->count];
            --*axon_fi_poll_refs(event_fid);
            axon_fi_unlock(set->domain);
            return 0;
        }
    }
    axon_fi_unlock(set->domain);
    AXON_FI_WARN(FI_LOG_DOMAIN, "fi_poll_del: %p is not in the poll set", (void *)event_fid);
    return -FI_ENOENT;
}

static struct fi_ops_poll axon_fi_poll_ops = {
    .size     = sizeof(struct fi_ops_poll),
    .poll     = axon_fi_poll_poll,
    .poll_add = axon_fi_poll_add,
    .poll_del = axon_fi_poll_del,
};

static int axon_fi_poll_close(struct fid *fid)
{
    axon_fi_poll_t *set = container_of(fid, axon_fi_poll_t, poll_fid.fid);
    axon_fi_domain_t *domain = set->domain;
    size_t i;

    axon_fi_lock(domain);
    for (i = 0; i < set->count; ++i) {
        --*axon_fi_poll_refs(set->fids[i]);
    }
    --domain->refs;
    axon_fi_unlock(domain);
    free(set->fids);
    free(set);
    return 0;
}

static struct fi_ops axon_fi_poll_fi_ops = {
    .size     = sizeof(struct fi_ops),
    .close    = axon_fi_poll_close,
    .bind     = axon_fi_no_bind,
    .control  = axon_fi_no_control,
    .ops_open = axon_fi_no_ops_open,
};

int axon_fi_poll_open(struct fid_domain *domain_fid, struct fi_poll_attr *attr,
                      struct fid_poll **poll_p)
{
    axon_fi_domain_t *domain = container_of(domain_fid, axon_fi_domain_t, domain_fid);
    axon_fi_poll_t *set;

    if ((attr != NULL) && (attr->flags != 0)) {
        AXON_FI_WARN(FI_LOG_DOMAIN, "poll set flags 0x%llx not supported",
                     (unsigned long long)attr->flags);
        return -FI_EINVAL;
    }
    set = calloc(1, sizeof(*set));
    if (set == NULL) {
        return -FI_ENOMEM;
    }
    set->domain               = domain;
    set->poll_fid.fid.fclass  = FI_CLASS_POLL;
    set->poll_fid.fid.ops     = &axon_fi_poll_fi_ops;
    set->poll_fid.ops         = &axon_fi_poll_ops;
    axon_fi_lock(domain);
    ++domain->refs;
    axon_fi_unlock(domain);
    *poll_p = &set->poll_fid;
    return 0;
}
