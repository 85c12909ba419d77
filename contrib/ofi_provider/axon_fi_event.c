/*
 * FI_RMA_EVENT: counters of remote accesses at the target. Axon's RMA and
 * atomics complete at the target without it knowing, so the initiator,
 * once its access is visible there (the write's flush, the read's or
 * fetching atomic's completion), sends the target a small tag message of
 * the reserved tag AXON_FI_EVENT_TAG: payload the key, imm_data the kind
 * and, above it, how many accesses it tells of. While a notification of the
 * endpoint waits queued in Axon (the target's ring is full: it drains
 * slower than the initiator writes), later ones are added up per (peer,
 * key, kind) and go as one message each once the queue is empty, so a
 * slow target costs neither unbounded memory nor a message per access.
 * The target's endpoint keeps AXON_FI_EVENT_RECVS receives posted for them;
 * each one received adds its count to the region's counter (fi_mr_bind) and
 * to the endpoint's FI_REMOTE_WRITE / FI_REMOTE_READ counter, then is posted
 * again. Unexpected notifications wait in Axon's queue: none is lost, none
 * counted twice. Only regions of a domain opened with FI_RMA_EVENT ask for
 * notifications (their key says so, axon_fi_mr_export), so plain RMA sends
 * nothing more. Where the key gives the region's words at the target
 * endpoint, a plain count is an atomic add there instead
 * (axon_fi_event_words.c): messages remain for regions without words and
 * for remote CQ data.
 *
 * Remote CQ data (fi_writedata) rides the same message: kind
 * AXON_FI_EVENT_WRITE | AXON_FI_EVENT_DATA, the data after the key. The
 * target endpoint (any that may be written to, axon_fi_caps_rma_target,
 * listens) writes an FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA entry to
 * its receive CQ, whatever its selective completion, and consumes none of
 * its receives (the provider asks no FI_RX_CQ_DATA mode).
 */
#include <stdlib.h>
#include "axon_fi.h"

/* An event's payload: the key, then the remote CQ data when the kind says so. */
typedef struct {
    uint64_t key;
    uint64_t data;
} axon_fi_event_msg_t;

#define AXON_FI_EVENT_KIND(_imm)    ((_imm) & (AXON_FI_EVENT_WRITE | AXON_FI_EVENT_READ))
#define AXON_FI_EVENT_LENGTH(_imm)  (((_imm) & AXON_FI_EVENT_DATA) ? \
                                     sizeof(axon_fi_event_msg_t) : sizeof(uint64_t))

struct axon_fi_event_recv {
    axon_fi_ep_t        *ep;
    axon_request_h       req;
    axon_fi_event_msg_t  msg;
};

static void axon_fi_event_received(axon_request_h req, axon_status_t status,
                                   const axon_tag_recv_info_t *info, void *user_data);

static axon_status_t axon_fi_event_post(struct axon_fi_event_recv *recv)
{
    axon_request_param_t param = {0};
    axon_status_t status;

    param.cb.recv   = axon_fi_event_received;
    param.user_data = recv;
    param.flags     = AXON_REQ_FLAG_NO_IMM_CMPL;
    status = axon_tag_recv_nb(recv->ep->worker, &recv->msg, sizeof(recv->msg),
                              AXON_FI_EVENT_TAG, AXON_TAG_MASK_FULL, &param, &recv->req);
    if (status == AXON_INPROGRESS) {
        ++recv->ep->events_posted;
        return AXON_OK;
    }
    AXON_FI_WARN(FI_LOG_EP_DATA, "posting an RMA event receive failed: %s",
                 axon_status_string(status));
    recv->req = NULL;
    return status;
}

/* count remote accesses told at once: counted (FI_RMA_EVENT's counters), the CQ data
 * of one with AXON_FI_EVENT_DATA entered. */
static void axon_fi_event_deliver(axon_fi_ep_t *ep, const axon_fi_event_msg_t *msg,
                                  unsigned imm, uint64_t sender)
{
    unsigned kind  = AXON_FI_EVENT_KIND(imm);
    uint32_t count = imm >> AXON_FI_EVENT_KIND_BITS;
    axon_fi_cntr_t *region, *own;

    if (ep->domain->rma_event) {   /* counters bind to regions and remote kinds only then */
        region = axon_fi_mr_event_cntr(ep->domain, msg->key, kind);
        own    = (kind == AXON_FI_EVENT_WRITE) ? ep->rwr_cntr : ep->rrd_cntr;
        if (region != NULL) {
            region->value += count;
        }
        if (own != NULL) {
            own->value += count;
        }
    }
    if ((imm & AXON_FI_EVENT_DATA) && (ep->rx_cq != NULL)) {
        axon_fi_cq_write(ep->rx_cq, NULL, FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA, 0,
                         NULL, msg->data, 0, sender);
    }
}

/* Runs from the endpoint's progress (domain lock held). */
static void axon_fi_event_received(axon_request_h req, axon_status_t status,
                                   const axon_tag_recv_info_t *info, void *user_data)
{
    struct axon_fi_event_recv *recv = user_data;
    axon_fi_ep_t *ep = recv->ep;

    axon_request_free(req);
    recv->req = NULL;
    --ep->events_posted;
    if (status == AXON_ERR_CANCELED) {
        return;
    }
    if ((status != AXON_OK) || (info->length != AXON_FI_EVENT_LENGTH(info->imm_data)) ||
        (AXON_FI_EVENT_KIND(info->imm_data) == 0)) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "RMA event of %zu bytes, kind %u dropped: %s",
                     (status == AXON_OK) ? info->length : 0,
                     (status == AXON_OK) ? info->imm_data : 0, axon_status_string(status));
    } else {
        axon_fi_event_deliver(ep, &recv->msg, info->imm_data, info->sender_id);
    }
    if (!ep->events_closing) {
        axon_fi_event_post(recv);
    }
}

int axon_fi_event_open(axon_fi_ep_t *ep)
{
    size_t i;

    ep->events = calloc(AXON_FI_EVENT_RECVS, sizeof(*ep->events));
    if (ep->events == NULL) {
        return -FI_ENOMEM;
    }
    if (axon_fi_eps_add(&ep->domain->event_eps, ep) != 0) {
        free(ep->events);
        ep->events = NULL;
        return -FI_ENOMEM;
    }
    for (i = 0; i < AXON_FI_EVENT_RECVS; ++i) {
        ep->events[i].ep = ep;
        if (axon_fi_event_post(&ep->events[i]) != AXON_OK) {
            axon_fi_event_close(ep);
            return -FI_EIO;
        }
    }
    axon_fi_event_words_open(ep);   /* counting by words where it can */
    return 0;
}

void axon_fi_event_close(axon_fi_ep_t *ep)
{
    size_t i;

    if (ep->events == NULL) {
        return;
    }
    axon_fi_event_words_close(ep);
    ep->events_closing = 1;
    for (i = 0; i < AXON_FI_EVENT_RECVS; ++i) {
        if (ep->events[i].req != NULL) {
            axon_request_cancel(ep->worker, ep->events[i].req);
        }
    }
    /* A canceled receive still calls back: the descriptors live until every one has. */
    while (ep->events_posted > 0) {
        axon_worker_progress(ep->worker);
    }
    axon_fi_eps_del(&ep->domain->event_eps, ep);
    free(ep->events);
    ep->events = NULL;
}

static void axon_fi_event_send(axon_fi_ep_t *ep, fi_addr_t addr, uint64_t key, unsigned kind,
                               uint32_t count, uint64_t data);

/* A notification that was queued has left (or was canceled with its endpoint). Nothing is
 * sent from here: this runs inside Axon's progress, maybe while the endpoint closes; the
 * counts held back go from the provider's own calls (axon_fi_event_flush). */
static void axon_fi_event_sent(axon_request_h req, axon_status_t status, void *user_data)
{
    axon_fi_ep_t *ep = user_data;

    (void)req;
    (void)status;
    --ep->events_queued;
}

void axon_fi_event_flush(axon_fi_ep_t *ep)
{
    axon_fi_event_held_t held;

    while ((ep->events_nheld > 0) && (ep->events_queued == 0)) {
        held = ep->events_held[--ep->events_nheld];
        axon_fi_event_send(ep, held.addr, held.key, held.kind, held.count, 0);
    }
}

/* count accesses of kind to (addr, key): one message, imm_data = kind | count above it,
 * the payload the key and, with AXON_FI_EVENT_DATA, the remote CQ data. */
static void axon_fi_event_send(axon_fi_ep_t *ep, fi_addr_t addr, uint64_t key, unsigned kind,
                               uint32_t count, uint64_t data)
{
    axon_request_param_t param = {0};
    axon_fi_event_msg_t msg = {key, data};
    axon_fi_conn_t *conn;
    axon_request_h req;
    axon_status_t status;

    status = axon_fi_conn_get(ep, addr, &conn);
    if (status == AXON_OK) {
        param.flags     = AXON_REQ_FLAG_INJECT | AXON_REQ_FLAG_IMM_DATA;
        param.imm_data  = kind | (count << AXON_FI_EVENT_KIND_BITS);
        param.cb.send   = axon_fi_event_sent;
        param.user_data = ep;
        status = axon_tag_send_nb(conn->aep, &msg, AXON_FI_EVENT_LENGTH(kind),
                                  AXON_FI_EVENT_TAG, &param, &req);
        if (status == AXON_INPROGRESS) {
            ++ep->events_queued;   /* the callback takes it back: until then, a backlog */
            axon_request_free(req);   /* injected: nothing refers to msg any more */
            axon_fi_progress_posted(ep->domain);
            status = AXON_OK;
        }
        ep->events_sent += (status == AXON_OK);
    }
    if (status != AXON_OK) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "RMA event for key %llu at fi_addr %llu not sent: %s",
                     (unsigned long long)key, (unsigned long long)addr,
                     axon_status_string(status));
    }
}

/* Held back behind a queued notification: added to the count of its (peer, key, kind)
 * when there is one and it has room, else a new count; 0 when the table is full. */
static int axon_fi_event_hold(axon_fi_ep_t *ep, fi_addr_t addr, uint64_t key, unsigned kind)
{
    axon_fi_event_held_t *h;
    unsigned i;

    for (i = 0; i < ep->events_nheld; ++i) {
        h = &ep->events_held[i];
        if ((h->addr == addr) && (h->key == key) && (h->kind == kind) &&
            (h->count < (UINT32_MAX >> AXON_FI_EVENT_KIND_BITS))) {
            ++h->count;
            return 1;
        }
    }
    if (ep->events_nheld == AXON_FI_EVENT_HELD) {
        return 0;
    }
    h = &ep->events_held[ep->events_nheld++];
    h->addr  = addr;
    h->key   = key;
    h->kind  = (uint8_t)kind;
    h->count = 1;
    return 1;
}

void axon_fi_event_notify(axon_fi_op_t *op)
{
    axon_fi_ep_t *ep = op->ep;

    /* A count alone: an add to the target's word, where the key has one. */
    if (!(op->notify & AXON_FI_EVENT_DATA) && axon_fi_event_add(op)) {
        return;
    }
    /* The way to a target is backed up: one message for many accesses, later (never
     * remote CQ data: each write's data is an entry of its own). */
    if ((ep->events_queued > 0) && !(op->notify & AXON_FI_EVENT_DATA) &&
        axon_fi_event_hold(ep, op->addr, op->key, op->notify)) {
        return;
    }
    axon_fi_event_flush_due(ep);   /* earlier ones first */
    axon_fi_event_send(ep, op->addr, op->key, op->notify, 1, op->cq_data);
}
