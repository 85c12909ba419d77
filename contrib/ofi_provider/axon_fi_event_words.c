/*
 * FI_RMA_EVENT counted by words: the initiator, once its access is visible
 * at the target (where axon_fi_event.c would send a message), adds 1 to a
 * word of the target endpoint with a posted Axon atomic. Over shm the words
 * are allocated memory the initiator maps, so the add is a CPU atomic in
 * the initiator and costs the target nothing; elsewhere the target executes
 * it in its progress. Counters take in the words' growth when read.
 *
 *   domain    a slot per region with remote access (up to event_nslots,
 *             FI_AXON_RMA_EVENT_SLOTS), its bound counters in event_slots;
 *             freed slots are reused oldest first
 *   endpoint  (one that receives events and may be a target by its caps,
 *             the domain's word_eps) 2 words per slot, write and read,
 *             allocated through axon_mem_map(AXON_MEM_MAP_ALLOCATE); seen[]
 *             what the last harvest took of each. Peers fetch a region's
 *             key from the endpoint's address server, which names the
 *             endpoint: the key tells them the words of that endpoint, so
 *             its own FI_REMOTE_* counters stay exact with several
 *             endpoints per domain
 *   harvest   for each endpoint, each live slot, each kind: the growth
 *             since the last harvest goes to the slot's counter and the
 *             endpoint's; only live slots are walked (SOS reads its counter
 *             in a loop)
 *
 * A region without a slot (capacity exhausted), an endpoint without words
 * (allocation failed, capacity 0) and remote CQ data keep the message path.
 * A slot taken again starts from its words' current values: adds that
 * reached a released slot late (issued before its region closed) go to the
 * endpoint's counters then, not to the next region's. Freed slots are
 * reused oldest first, so an add still on its way when its slot is taken
 * again (possible only once every other slot has been taken since) is the
 * one case counted on the wrong region.
 */
#include <endian.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "axon_fi.h"

#define AXON_FI_EVENT_SLOTS_MAX  65536        /* 1 MiB of words per endpoint */
#define AXON_FI_EVENT_ADDS_WAIT_MS 2000       /* word adds in flight at close, at most */

/* ---------------------------------------------------------------- slots (domain) */

int axon_fi_event_slots_open(axon_fi_domain_t *domain)
{
    int slots = AXON_FI_EVENT_SLOTS;
    uint32_t i;

    if (!domain->rma_event) {
        return 0;
    }
    (void)fi_param_get_int(&axon_fi_prov, "rma_event_slots", &slots);
    if ((slots < 0) || (slots > AXON_FI_EVENT_SLOTS_MAX)) {
        AXON_FI_WARN(FI_LOG_DOMAIN, "FI_AXON_RMA_EVENT_SLOTS=%d: 0 to %d regions", slots,
                     AXON_FI_EVENT_SLOTS_MAX);
        return -FI_EINVAL;
    }
    if (slots == 0) {
        return 0;   /* every region counts by messages */
    }
    domain->event_slots = calloc((size_t)slots, sizeof(*domain->event_slots));
    domain->event_free  = calloc((size_t)slots, sizeof(*domain->event_free));
    domain->event_live  = calloc((size_t)slots, sizeof(*domain->event_live));
    if ((domain->event_slots == NULL) || (domain->event_free == NULL) ||
        (domain->event_live == NULL)) {
        axon_fi_event_slots_close(domain);
        return -FI_ENOMEM;
    }
    for (i = 0; i < (uint32_t)slots; ++i) {
        domain->event_free[i] = i;
    }
    domain->event_nslots     = (uint32_t)slots;
    domain->event_free_count = (uint32_t)slots;
    return 0;
}

void axon_fi_event_slots_close(axon_fi_domain_t *domain)
{
    free(domain->event_slots);
    free(domain->event_free);
    free(domain->event_live);
    domain->event_slots  = NULL;
    domain->event_free   = NULL;
    domain->event_live   = NULL;
    domain->event_nslots = 0;
}

int32_t axon_fi_event_slot_get(axon_fi_domain_t *domain)
{
    axon_fi_event_slot_t *slot;
    axon_fi_cntr_t *own[2];
    axon_fi_ep_t *ep;
    uint64_t now;
    uint32_t s, k;
    size_t i;

    if (domain->event_free_count == 0) {
        return -1;
    }
    s = domain->event_free[domain->event_free_head];
    domain->event_free_head = (domain->event_free_head + 1) % domain->event_nslots;
    --domain->event_free_count;
    slot = &domain->event_slots[s];
    slot->cntr[0]  = slot->cntr[1] = NULL;
    slot->used     = 1;
    slot->live_pos = domain->event_nlive;
    domain->event_live[domain->event_nlive++] = s;
    /* Adds that reached the slot after its last region closed (issued before): the
     * endpoint's accesses, not this region's. */
    for (i = 0; i < domain->word_eps.count; ++i) {
        ep = domain->word_eps.eps[i];
        own[0] = ep->rwr_cntr;
        own[1] = ep->rrd_cntr;
        for (k = 0; k < 2; ++k) {
            now = __atomic_load_n(&ep->words.base[2 * s + k], __ATOMIC_ACQUIRE);
            if (own[k] != NULL) {
                own[k]->value += now - ep->words.seen[2 * s + k];
            }
            ep->words.seen[2 * s + k] = now;
        }
    }
    return (int32_t)s;
}

void axon_fi_event_slot_put(axon_fi_domain_t *domain, int32_t s)
{
    axon_fi_event_slot_t *slot;
    uint32_t last;

    if (s < 0) {
        return;
    }
    axon_fi_event_harvest(domain);   /* what reached the region so far counts */
    slot = &domain->event_slots[s];
    last = domain->event_live[--domain->event_nlive];
    domain->event_live[slot->live_pos] = last;
    domain->event_slots[last].live_pos = slot->live_pos;
    slot->used    = 0;
    slot->cntr[0] = slot->cntr[1] = NULL;
    domain->event_free[(domain->event_free_head + domain->event_free_count) %
                       domain->event_nslots] = (uint32_t)s;
    ++domain->event_free_count;
}

/* ---------------------------------------------------------------- words (target endpoint) */

void axon_fi_event_words_open(axon_fi_ep_t *ep)
{
    axon_fi_domain_t *domain = ep->domain;
    axon_context_h context = domain->fabric->context;
    axon_mem_map_params_t params = {NULL, 0, AXON_MEM_MAP_ALLOCATE, NULL};
    axon_fi_event_words_t *words = &ep->words;
    axon_status_t status;
    void *packed = NULL, *base = NULL;
    size_t packed_len = 0, length;

    if (!domain->rma_event || (domain->event_nslots == 0) ||
        !axon_fi_caps_remote_target(ep->caps)) {
        return;
    }
    params.length = (size_t)domain->event_nslots * 2 * sizeof(uint64_t);
    words->seen   = calloc((size_t)domain->event_nslots * 2, sizeof(uint64_t));
    status = ((words->seen == NULL) || (axon_fi_eps_add(&domain->word_eps, ep) != 0)) ?
             AXON_ERR_NO_MEMORY : axon_mem_map(context, &params, &words->memh);
    if (status == AXON_OK) {
        status = axon_mem_query(words->memh, &base, &length);
        if (status == AXON_OK) {
            status = axon_rkey_pack(context, words->memh, &packed, &packed_len);
        }
        if (status != AXON_OK) {
            axon_mem_unmap(context, words->memh);
        }
    }
    if (status != AXON_OK) {
        AXON_FI_WARN(FI_LOG_EP_CTRL, "RMA event words of %zu bytes: %s; the endpoint counts "
                     "by messages", params.length, axon_status_string(status));
        axon_fi_eps_del(&domain->word_eps, ep);
        free(words->seen);
        words->seen = NULL;
        words->memh = NULL;
        return;
    }
    words->base = base;   /* zeroed: seen[] matches */
    pthread_mutex_lock(&domain->mr_lock);
    words->packed     = packed;
    words->packed_len = packed_len;
    pthread_mutex_unlock(&domain->mr_lock);
}

void axon_fi_event_words_close(axon_fi_ep_t *ep)
{
    axon_fi_domain_t *domain = ep->domain;
    axon_fi_event_words_t *words = &ep->words;
    void *packed;

    if (words->memh == NULL) {
        return;
    }
    axon_fi_event_harvest(domain);   /* counted so far: into the regions' counters */
    pthread_mutex_lock(&domain->mr_lock);   /* no peer fetches them from here on */
    packed        = words->packed;
    words->packed = NULL;
    pthread_mutex_unlock(&domain->mr_lock);
    axon_rkey_buffer_release(packed);
    axon_mem_unmap(domain->fabric->context, words->memh);
    axon_fi_eps_del(&domain->word_eps, ep);
    free(words->seen);
    words->memh = NULL;
    words->base = NULL;
    words->seen = NULL;
}

unsigned axon_fi_event_harvest(axon_fi_domain_t *domain)
{
    const axon_fi_event_slot_t *slot;
    axon_fi_cntr_t *own[2];
    uint64_t now, grown;
    unsigned found = 0;
    uint32_t i, s, k;
    axon_fi_ep_t *ep;
    size_t e;

    for (e = 0; e < domain->word_eps.count; ++e) {
        ep = domain->word_eps.eps[e];
        own[0] = ep->rwr_cntr;
        own[1] = ep->rrd_cntr;
        for (i = 0; i < domain->event_nlive; ++i) {
            s    = domain->event_live[i];
            slot = &domain->event_slots[s];
            for (k = 0; k < 2; ++k) {
                /* acquire: the access the add tells of was visible before the add */
                now   = __atomic_load_n(&ep->words.base[2 * s + k], __ATOMIC_ACQUIRE);
                grown = now - ep->words.seen[2 * s + k];
                if (grown == 0) {
                    continue;
                }
                ep->words.seen[2 * s + k] = now;
                if (slot->cntr[k] != NULL) {
                    slot->cntr[k]->value += grown;
                }
                if (own[k] != NULL) {
                    own[k]->value += grown;
                }
                found += (unsigned)grown;
            }
        }
    }
    return found;
}

/* ---------------------------------------------------------------- adds (initiator) */

static void axon_fi_event_added(axon_request_h req, axon_status_t status, void *user_data)
{
    axon_fi_ep_t *ep = user_data;

    (void)req;
    --ep->word_adds;
    if (status == AXON_ERR_REMOTE_ACCESS) {
        /* The target endpoint closed its words (its accesses seen, it went on to close):
         * nobody is left to read the count. */
        AXON_FI_INFO(FI_LOG_EP_DATA, "RMA event word add after its target closed: %s",
                     axon_status_string(status));
    } else if (status != AXON_OK) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "RMA event word add failed: %s",
                     axon_status_string(status));
    }
}

int axon_fi_event_add(axon_fi_op_t *op)
{
    static const uint64_t one = 1;
    axon_fi_ep_t *ep = op->ep;
    axon_fi_conn_t *conn = axon_fi_conn_find(ep, op->addr);
    axon_request_param_t param = {0};
    axon_fi_rkey_t *rkey;
    axon_status_t status;
    axon_request_h req;

    /* The key as the access used it; forgotten since (stale): the message says it. */
    if ((conn == NULL) || (conn->aep == NULL) || (conn->words == NULL) ||
        ((rkey = axon_fi_rkey_find(conn, op->key)) == NULL)) {
        return 0;
    }
    if (rkey->word == 0) {
        return 0;
    }
    if (rkey->word_ptr != NULL) {
        axon_fi_event_word_add(rkey, (op->notify & AXON_FI_EVENT_READ) != 0);
        return 1;
    }
    /* Always a request of ours, held until the target has the add: the endpoint's close
     * waits for it, and an add failing there (the target closed meanwhile) is ours to
     * judge, not an error Axon keeps for the application's next flush. */
    param.flags     = AXON_REQ_FLAG_NO_IMM_CMPL;
    param.cb.send   = axon_fi_event_added;
    param.user_data = ep;
    status = axon_atomic_nb(conn->aep, AXON_ATOMIC_ADD, sizeof(one), &one, NULL, NULL,
                            rkey->word + ((op->notify & AXON_FI_EVENT_READ) ? 8 : 0),
                            conn->words, &param, &req);
    if (status == AXON_INPROGRESS) {
        ++ep->word_adds;   /* its callback takes it back */
        axon_request_free(req);
        return 1;
    }
    if ((status != AXON_OK) && (status != AXON_ERR_NO_RESOURCE)) {
        /* The words are gone (the target endpoint closed them): messages from now on. */
        AXON_FI_INFO(FI_LOG_EP_DATA, "RMA event word of key %llu at fi_addr %llu: %s",
                     (unsigned long long)op->key, (unsigned long long)op->addr,
                     axon_status_string(status));
        rkey->word = 0;
    }
    return status == AXON_OK;
}

void axon_fi_event_adds_drain(axon_fi_ep_t *ep)
{
    struct timespec start;

    clock_gettime(CLOCK_MONOTONIC, &start);
    while ((ep->word_adds > 0) && !axon_fi_expired(&start, AXON_FI_EVENT_ADDS_WAIT_MS)) {
        axon_worker_progress(ep->worker);
    }
}

void axon_fi_event_words_unpack(axon_fi_conn_t *conn, const axon_fi_mr_blob_t *blob,
                                axon_fi_rkey_t *rkey)
{
    axon_status_t status = AXON_OK;
    void *ptr;

    if (conn->words == NULL) {   /* the same for every key of the endpoint */
        status = axon_ep_rkey_unpack(conn->aep, blob->words_key, blob->words_key_len,
                                     &conn->words);
        if (status != AXON_OK) {
            AXON_FI_WARN(FI_LOG_EP_DATA, "RMA event words key: axon_ep_rkey_unpack failed: "
                         "%s; counting by messages", axon_status_string(status));
            conn->words = NULL;
        }
    }
    rkey->word = (status == AXON_OK) ? blob->word : 0;
    /* Words mapped here (the target on this host): a CPU add of ours, which Axon's own
     * executor of the adds that come by message stays atomic against (axon_rkey_ptr). */
    rkey->word_ptr = NULL;
    if ((rkey->word != 0) &&
        (axon_rkey_ptr(conn->words, rkey->word, 2 * sizeof(uint64_t), AXON_RKEY_PTR_ATOMICS,
                       &ptr) == AXON_OK) &&
        ((uintptr_t)ptr % sizeof(uint64_t) == 0)) {
        rkey->word_ptr = ptr;
    }
}
