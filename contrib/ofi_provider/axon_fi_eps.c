/*
 * Sets of endpoints: those bound to a CQ or counter (reading it progresses
 * their workers: FI_PROGRESS_MANUAL) or to an AV (a removal drops their
 * connections). Usually one endpoint; grown at bind time only.
 */
#include <stdlib.h>
#include "axon_fi.h"

int axon_fi_eps_add(axon_fi_eps_t *set, axon_fi_ep_t *ep)
{
    axon_fi_ep_t **eps;
    size_t i, cap;

    for (i = 0; i < set->count; ++i) {
        if (set->eps[i] == ep) {
            return 0;   /* bound for both directions: progressed once */
        }
    }
    if (set->count == set->cap) {
        cap = set->cap ? set->cap * 2 : 2;
        eps = realloc(set->eps, cap * sizeof(*eps));
        if (eps == NULL) {
            return -FI_ENOMEM;
        }
        set->eps = eps;
        set->cap = cap;
    }
    set->eps[set->count++] = ep;
    return 0;
}

void axon_fi_eps_del(axon_fi_eps_t *set, axon_fi_ep_t *ep)
{
    size_t i;

    for (i = 0; i < set->count; ++i) {
        if (set->eps[i] == ep) {
            set->eps[i] = set->eps[--set->count];
            return;
        }
    }
}

void axon_fi_eps_free(axon_fi_eps_t *set)
{
    free(set->eps);
    set->eps   = NULL;
    set->count = set->cap = 0;
}

unsigned axon_fi_eps_progress(const axon_fi_eps_t *set)
{
    unsigned events = 0;
    size_t i;

    for (i = 0; i < set->count; ++i) {
        ++set->eps[i]->app_passes;
        events += axon_fi_ep_progress(set->eps[i]);
    }
    return events;
}

unsigned axon_fi_ep_progress(axon_fi_ep_t *ep)
{
    unsigned events = axon_worker_progress(ep->worker);

    axon_fi_event_flush_due(ep);   /* RMA event counts held back, if any */
    return events;
}
