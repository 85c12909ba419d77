/*
 * Counters: bound to an endpoint with FI_SEND and/or FI_RECV, they count
 * its completed operations (errors apart), whether or not a CQ entry is
 * written. Reading or waiting drives the bound endpoints' workers
 * (FI_PROGRESS_MANUAL). FI_READ/FI_WRITE bindings count RMA initiated here;
 * FI_REMOTE_* bindings (to an endpoint or a region) count RMA events
 * (axon_fi_event.c): a counter bound to a region drives every endpoint of
 * the domain that receives them. Accesses counted by words
 * (axon_fi_event_words.c) are taken in by every read, wait, set and add of
 * such a counter.
 */
#include <stdlib.h>
#include <time.h>
#include "axon_fi.h"

unsigned axon_fi_cntr_progress(axon_fi_cntr_t *cntr)
{
    unsigned events = axon_fi_eps_progress(&cntr->eps);

    if (cntr->remote) {
        events += axon_fi_eps_progress(&cntr->domain->event_eps);   /* where region events
                                                                     * arrive */
    }
    if (cntr->harvest) {
        events += axon_fi_event_harvest(cntr->domain);   /* counted by words */
    }
    return events;
}

/*
 * Can the counter move only by operations still in flight, and are there
 * none? Then its value is final for now and needs neither the domain's lock
 * nor a progress pass: a SHMEM quiet after puts that completed in their
 * call reads it several times a put. Only where the domain's thread makes
 * progress for the peers (FI_PROGRESS_AUTO: with manual progress a read is
 * also how an application serves them) and the application serializes its
 * calls (FI_THREAD_DOMAIN: nothing rebinds or closes under the read); not
 * for counters of remote accesses (they move without any operation of
 * ours). The lists are read without the lock: a completion racing with the
 * read leaves a value the next read sees grown, as a read a moment earlier
 * would have.
 */
static int axon_fi_cntr_settled(const axon_fi_cntr_t *cntr)
{
    const axon_fi_domain_t *domain = cntr->domain;
    const axon_fi_ep_t *ep;
    size_t i;

    if (!domain->progress_running || cntr->remote || cntr->harvest ||
        ((domain->threading != FI_THREAD_DOMAIN) && (domain->threading != FI_THREAD_UNSPEC))) {
        return 0;
    }
    for (i = 0; i < cntr->eps.count; ++i) {
        ep = cntr->eps.eps[i];
        if (__atomic_load_n(&ep->inflight.next, __ATOMIC_ACQUIRE) != &ep->inflight) {
            return 0;
        }
    }
    return 1;
}

/* The value or the error count, after progress (none needed when settled). */
static uint64_t axon_fi_cntr_get(struct fid_cntr *cntr_fid, int errors)
{
    axon_fi_cntr_t *cntr = container_of(cntr_fid, axon_fi_cntr_t, cntr_fid);
    uint64_t value;

    if (axon_fi_cntr_settled(cntr)) {
        return __atomic_load_n(errors ? &cntr->errors : &cntr->value, __ATOMIC_ACQUIRE);
    }
    axon_fi_lock(cntr->domain);
    axon_fi_cntr_progress(cntr);
    value = errors ? cntr->errors : cntr->value;
    axon_fi_unlock(cntr->domain);
    return value;
}

static uint64_t axon_fi_cntr_read(struct fid_cntr *cntr)
{
    return axon_fi_cntr_get(cntr, 0);
}

static uint64_t axon_fi_cntr_readerr(struct fid_cntr *cntr)
{
    return axon_fi_cntr_get(cntr, 1);
}

/* Set or add to the value (errors != 0: the error count). */
static int axon_fi_cntr_change(struct fid_cntr *cntr_fid, uint64_t value, int add, int errors)
{
    axon_fi_cntr_t *cntr = container_of(cntr_fid, axon_fi_cntr_t, cntr_fid);
    uint64_t *field = errors ? &cntr->errors : &cntr->value;

    axon_fi_lock(cntr->domain);
    if (cntr->harvest) {
        axon_fi_event_harvest(cntr->domain);   /* what came before the call is in the old value */
    }
    *field = add ? *field + value : value;
    axon_fi_unlock(cntr->domain);
    return 0;
}

static int axon_fi_cntr_add(struct fid_cntr *cntr, uint64_t value)
{
    return axon_fi_cntr_change(cntr, value, 1, 0);
}

static int axon_fi_cntr_set(struct fid_cntr *cntr, uint64_t value)
{
    return axon_fi_cntr_change(cntr, value, 0, 0);
}

static int axon_fi_cntr_adderr(struct fid_cntr *cntr, uint64_t value)
{
    return axon_fi_cntr_change(cntr, value, 1, 1);
}

static int axon_fi_cntr_seterr(struct fid_cntr *cntr, uint64_t value)
{
    return axon_fi_cntr_change(cntr, value, 0, 1);
}

/*
 * Until the value reaches threshold: -FI_EAVAIL if an error is counted
 * meanwhile. The errors are taken before any progress, so one that the
 * first pass completes is news too.
 */
static int axon_fi_cntr_wait(struct fid_cntr *cntr_fid, uint64_t threshold, int timeout)
{
    axon_fi_cntr_t *cntr = container_of(cntr_fid, axon_fi_cntr_t, cntr_fid);
    uint64_t errors, value, now_errors;
    struct timespec start;
    unsigned events, empty = 0;

    /* Reached already (a SHMEM quiet after operations that completed in their call):
     * no progress pass, which would count as an idle poll and may yield the core. The
     * value only grows between sets, so a value read unlocked that is there is there. */
    if (__atomic_load_n(&cntr->value, __ATOMIC_ACQUIRE) >= threshold) {
        return 0;
    }
    if (axon_fi_cntr_settled(cntr)) {
        value  = __atomic_load_n(&cntr->value, __ATOMIC_ACQUIRE);
        errors = __atomic_load_n(&cntr->errors, __ATOMIC_ACQUIRE);
    } else {
        axon_fi_lock(cntr->domain);
        if (cntr->harvest) {
            axon_fi_event_harvest(cntr->domain);   /* words: no progress needed to see them */
        }
        value  = cntr->value;
        errors = cntr->errors;
        axon_fi_unlock(cntr->domain);
    }
    if (value >= threshold) {
        return 0;
    }
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        axon_fi_lock(cntr->domain);
        events     = axon_fi_cntr_progress(cntr);
        value      = cntr->value;
        now_errors = cntr->errors;
        axon_fi_unlock(cntr->domain);
        if (value >= threshold) {
            return 0;
        }
        if (now_errors != errors) {
            return -FI_EAVAIL;
        }
        if (axon_fi_expired(&start, timeout)) {
            return -FI_ETIMEDOUT;
        }
        if (events == 0) {
            axon_fi_wait_idle(&empty);
        }
    }
}

static struct fi_ops_cntr axon_fi_cntr_ops = {
    .size    = sizeof(struct fi_ops_cntr),
    .read    = axon_fi_cntr_read,
    .readerr = axon_fi_cntr_readerr,
    .add     = axon_fi_cntr_add,
    .set     = axon_fi_cntr_set,
    .wait    = axon_fi_cntr_wait,
    .adderr  = axon_fi_cntr_adderr,
    .seterr  = axon_fi_cntr_seterr,
};

static int axon_fi_cntr_close(struct fid *fid)
{
    axon_fi_cntr_t *cntr = container_of(fid, axon_fi_cntr_t, cntr_fid.fid);
    axon_fi_domain_t *domain = cntr->domain;

    if (cntr->refs > 0) {
        AXON_FI_WARN(FI_LOG_CNTR, "counter still bound to %d endpoints or poll sets",
                     cntr->refs);
        return -FI_EBUSY;
    }
    axon_fi_lock(domain);
    --domain->refs;
    axon_fi_unlock(domain);
    axon_fi_eps_free(&cntr->eps);
    free(cntr);
    return 0;
}

static struct fi_ops axon_fi_cntr_fi_ops = {
    .size     = sizeof(struct fi_ops),
    .close    = axon_fi_cntr_close,
    .bind     = axon_fi_no_bind,
    .control  = axon_fi_no_control,
    .ops_open = axon_fi_no_ops_open,
};

int axon_fi_cntr_open(struct fid_domain *domain_fid, struct fi_cntr_attr *attr,
                      struct fid_cntr **cntr_p, void *context)
{
    axon_fi_domain_t *domain = container_of(domain_fid, axon_fi_domain_t, domain_fid);
    axon_fi_cntr_t *cntr;

    if (attr != NULL) {
        if (attr->events != FI_CNTR_EVENTS_COMP) {
            AXON_FI_WARN(FI_LOG_CNTR, "counter events %d not supported (FI_CNTR_EVENTS_COMP)",
                         (int)attr->events);
            return -FI_ENOSYS;
        }
        if (axon_fi_wait_obj_check(attr->wait_obj, "counter") != 0) {
            return -FI_ENOSYS;
        }
        if (attr->flags != 0) {
            AXON_FI_WARN(FI_LOG_CNTR, "counter flags 0x%llx not supported",
                         (unsigned long long)attr->flags);
            return -FI_EINVAL;
        }
    }
    cntr = calloc(1, sizeof(*cntr));
    if (cntr == NULL) {
        return -FI_ENOMEM;
    }
    cntr->domain                 = domain;
    cntr->cntr_fid.fid.fclass    = FI_CLASS_CNTR;
    cntr->cntr_fid.fid.context   = context;
    cntr->cntr_fid.fid.ops       = &axon_fi_cntr_fi_ops;
    cntr->cntr_fid.ops           = &axon_fi_cntr_ops;
    axon_fi_lock(domain);
    ++domain->refs;
    axon_fi_unlock(domain);
    *cntr_p = &cntr->cntr_fid;
    return 0;
}
