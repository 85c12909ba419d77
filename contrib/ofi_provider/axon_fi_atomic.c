/*
 * Atomics (FI_ATOMIC): fi_atomic*, fi_fetch_atomic*, fi_compare_atomic*
 * on Axon's atomics, element by element (count > 1 is that many element
 * atomics with one completion, as fi_atomic(3) allows). Each element is
 * one Axon operation on the smallest naturally aligned block of 4, 8, 16
 * or 32 bytes that holds it:
 *
 *   NATIVE  Axon has the operation on the element itself (4- or 8-byte
 *           integers: FI_SUM/BOR/BAND/BXOR = ADD/OR/AND/XOR, posted without
 *           a result unless fetched; FI_ATOMIC_WRITE = SWAP, integer FI_CSWAP
 *           = CSWAP; float/double FI_ATOMIC_WRITE = SWAP)
 *   READ    FI_ATOMIC_READ: fetch-add 0 on a 4/8-byte block, a masked
 *           compare-and-swap with empty masks on a 16/32-byte one
 *   LOOP    everything else: at the initiator, guess the block (first 0),
 *           compute the element's new value (axon_fi_atomic_calc.c) and
 *           compare-and-swap it in (plain CSWAP on 4/8 bytes, masked CSWAP
 *           restricted to the element on 16/32); the CAS returns what the
 *           block held, which is the next guess until the CAS holds.
 *
 * Every step is an Axon atomic, so the result is atomic with respect to
 * every other Axon atomic on the location (never a read-modify-write of
 * our own). A 1- or 2-byte element takes its whole 4-byte block into the
 * CAS: that block must lie in the registered region. An element that
 * crosses a 32-byte boundary cannot be done atomically: -FI_EINVAL.
 *
 * Completion: a fetching element is done when its result is in the
 * caller's buffer; a base atomic's message also waits for
 * axon_ep_flush_nb (visible at the target) unless only FI_INJECT_COMPLETE
 * is asked, as RMA writes do (a region counting accesses, FI_RMA_EVENT,
 * always waits for it, then is told: axon_fi_event.c). CQ flags FI_ATOMIC|FI_WRITE (base) or
 * FI_ATOMIC|FI_READ (fetch, compare), counted on the FI_WRITE / FI_READ
 * counter (fi_endpoint(3)). Operands are copied at the call (so
 * fi_inject_atomic costs nothing more); the elements' state lives in a
 * buffer of the domain's free list.
 */
#include <string.h>
#include "axon_fi.h"

typedef enum {
    AXON_FI_AMO_NATIVE,
    AXON_FI_AMO_READ,
    AXON_FI_AMO_LOOP
} axon_fi_amo_mode_t;

/* One element's state (an array of them in op->bounce). */
typedef struct {
    axon_fi_op_t *op;
    uint64_t      old[AXON_FI_AMO_MAX_SIZE / 8];    /* what the block held (Axon's result) */
    uint64_t      guess[AXON_FI_AMO_MAX_SIZE / 8];  /* LOOP: what the CAS expects */
    uint8_t       operand[AXON_FI_AMO_MAX_SIZE];
    uint8_t       compare[AXON_FI_AMO_MAX_SIZE];
    uint64_t      raddr;        /* the block's remote address */
    void         *result;       /* the caller's, for the previous value; NULL: none */
    uint8_t       offset;       /* of the element in the block */
    uint8_t       block;        /* 4, 8, 16 or 32 */
    uint8_t       mode;         /* axon_fi_amo_mode_t */
    uint8_t       native;       /* NATIVE: the axon_atomic_op_t */
} axon_fi_amo_elem_t;

_Static_assert(AXON_FI_ATOMIC_COUNT * sizeof(axon_fi_amo_elem_t) <= AXON_FI_INJECT_SIZE,
               "the elements' state fits one buffer of the free list");

/* A call, whichever form it came in. */
typedef struct {
    const struct fi_ioc     *iov;
    size_t                   iov_count;
    const struct fi_ioc     *cmp;        /* compare: its operands, else NULL */
    size_t                   cmp_count;
    const struct fi_ioc     *res;        /* fetch, compare: the results, else NULL */
    size_t                   res_count;
    const struct fi_rma_ioc *rma;
    size_t                   rma_count;
    fi_addr_t                dest;
    enum fi_datatype         datatype;
    enum fi_op               op;
    axon_fi_amo_family_t     family;
    void                    *context;
    uint64_t                 flags;
    int                      comp;
} axon_fi_amo_t;

static const char *const axon_fi_amo_op_names[FI_ATOMIC_OP_LAST] = {
    "FI_MIN", "FI_MAX", "FI_SUM", "FI_PROD", "FI_LOR", "FI_LAND", "FI_BOR", "FI_BAND",
    "FI_LXOR", "FI_BXOR", "FI_ATOMIC_READ", "FI_ATOMIC_WRITE", "FI_CSWAP", "FI_CSWAP_NE",
    "FI_CSWAP_LE", "FI_CSWAP_LT", "FI_CSWAP_GE", "FI_CSWAP_GT", "FI_MSWAP"};
static const char *const axon_fi_amo_family_names[] = {"fi_atomic", "fi_fetch_atomic",
                                                       "fi_compare_atomic"};

/* ---------------------------------------------------------------- completion */

static void axon_fi_amo_fail(axon_fi_op_t *op, axon_status_t status)
{
    if ((status != AXON_OK) && (op->status == AXON_OK)) {
        op->status = status;
    }
}

/* One of the message's holds is gone: the element ops, the flush, the posting call's. */
static void axon_fi_amo_release(axon_fi_op_t *op)
{
    if (--op->pending > 0) {
        return;
    }
    axon_fi_inflight_del(op);
    if ((op->ep != NULL) && op->notify && (op->status == AXON_OK)) {
        axon_fi_event_notify(op);   /* every element is done and visible at the target */
    }
    if (op->ep != NULL) {
        axon_fi_rma_entry(op->ep, "atomic", op->context, op->flags, op->comp, op->addr, op->key,
                          op->status);
    }
    axon_fi_bounce_put(op->domain, op->bounce);
    axon_fi_op_put(op->domain, op);
}

static void axon_fi_amo_flushed(axon_request_h req, axon_status_t status, void *user_data)
{
    axon_fi_op_t *op = user_data;

    axon_fi_amo_fail(op, status);
    axon_fi_amo_release(op);
}

/* ---------------------------------------------------------------- elements */

/* Where the element's block is now: the connection may have gone under a loop. */
static axon_status_t axon_fi_amo_target(axon_fi_op_t *op, axon_ep_h *aep_p, axon_rkey_h *rkey_p)
{
    axon_fi_ep_t *ep = op->ep;
    axon_fi_conn_t *conn;
    axon_fi_rkey_t *rkey;

    if (ep == NULL) {
        return AXON_ERR_CANCELED;   /* the endpoint closed */
    }
    conn = axon_fi_conn_find(ep, op->addr);
    if ((conn == NULL) || (conn->aep == NULL)) {
        return (conn != NULL) ? conn->status : AXON_ERR_CANCELED;
    }
    if ((rkey = axon_fi_rkey_find(conn, op->key)) == NULL) {
        return AXON_ERR_REMOTE_ACCESS;   /* forgotten as stale meanwhile */
    }
    *aep_p  = conn->aep;
    *rkey_p = rkey->rkey;
    return AXON_OK;
}

/* The element's bytes in a block of words. */
static inline uint8_t *axon_fi_amo_bytes(uint64_t *words, const axon_fi_amo_elem_t *e)
{
    return (uint8_t *)words + e->offset;
}

static void axon_fi_amo_done(axon_request_h req, axon_status_t status, void *user_data);

/* Post the element's next Axon operation. */
static axon_status_t axon_fi_amo_post(axon_fi_amo_elem_t *e, axon_request_h *req_p)
{
    static const uint64_t zero[AXON_FI_AMO_MAX_SIZE / 8];
    axon_fi_op_t *op = e->op;
    uint64_t swap[AXON_FI_AMO_MAX_SIZE / 8], mask[AXON_FI_AMO_MAX_SIZE / 8];
    axon_request_param_t param = {0};
    axon_ep_h aep;
    axon_rkey_h rkey;
    axon_status_t status = axon_fi_amo_target(op, &aep, &rkey);

    if (status != AXON_OK) {
        return status;
    }
    param.cb.send   = axon_fi_amo_done;
    param.user_data = e;
    switch (e->mode) {
    case AXON_FI_AMO_NATIVE:
        /* SWAP and CSWAP always fetch (into e->old); the others only for a result. */
        return axon_atomic_nb(aep, (axon_atomic_op_t)e->native, e->block, e->operand,
                              e->compare, ((e->result != NULL) ||
                                           (e->native >= AXON_ATOMIC_SWAP)) ? e->old : NULL,
                              e->raddr, rkey, &param, req_p);
    case AXON_FI_AMO_READ:
        if (e->block <= 8) {
            return axon_atomic_nb(aep, AXON_ATOMIC_ADD, e->block, zero, NULL, e->old, e->raddr,
                                  rkey, &param, req_p);
        }
        return axon_atomic_masked_cswap_nb(aep, e->block, zero, zero, zero, zero, e->old,
                                           e->raddr, rkey, &param, req_p);
    default:
        memcpy(swap, e->guess, sizeof(swap));
        axon_fi_amo_calc((enum fi_datatype)op->amo_datatype, (enum fi_op)op->amo_op,
                         axon_fi_amo_bytes(e->guess, e), e->operand, e->compare,
                         axon_fi_amo_bytes(swap, e));
        if (e->block <= 8) {
            return axon_atomic_nb(aep, AXON_ATOMIC_CSWAP, e->block, swap, e->guess, e->old,
                                  e->raddr, rkey, &param, req_p);
        }
        memset(mask, 0, sizeof(mask));
        memset(axon_fi_amo_bytes(mask, e), 0xff, op->amo_size);
        return axon_atomic_masked_cswap_nb(aep, e->block, e->guess, mask, swap, mask, e->old,
                                           e->raddr, rkey, &param, req_p);
    }
}

/*
 * The element's operation came back with the block's old value: done (its
 * previous value to the caller), or a CAS that missed, whose old value is
 * the next guess. Returns 1 when done.
 */
static int axon_fi_amo_settle(axon_fi_amo_elem_t *e)
{
    size_t size = e->op->amo_size;

    if ((e->mode == AXON_FI_AMO_LOOP) &&
        ((e->block <= 8) ? memcmp(e->old, e->guess, e->block) :
                           memcmp(axon_fi_amo_bytes(e->old, e), axon_fi_amo_bytes(e->guess, e),
                                  size))) {
        memcpy(e->guess, e->old, sizeof(e->guess));
        return 0;
    }
    if (e->result != NULL) {
        memcpy(e->result, axon_fi_amo_bytes(e->old, e), size);
    }
    return 1;
}

/* Run the element until it waits for Axon (one more hold on the message) or is done. */
static void axon_fi_amo_run(axon_fi_amo_elem_t *e)
{
    axon_request_h req;
    axon_status_t status;

    do {
        status = axon_fi_amo_post(e, &req);
        if (status == AXON_INPROGRESS) {
            ++e->op->pending;
            axon_request_free(req);   /* the callback still comes */
            return;
        }
        if (status != AXON_OK) {
            axon_fi_amo_fail(e->op, status);
            return;
        }
    } while (!axon_fi_amo_settle(e));
}

static void axon_fi_amo_done(axon_request_h req, axon_status_t status, void *user_data)
{
    axon_fi_amo_elem_t *e = user_data;
    axon_fi_op_t *op = e->op;

    if (status != AXON_OK) {
        axon_fi_amo_fail(op, status);
    } else if (!axon_fi_amo_settle(e)) {
        axon_fi_amo_run(e);   /* the CAS missed: again, with what the block held */
    }
    axon_fi_amo_release(op);
}

/* ---------------------------------------------------------------- the call */

/* The element's block and how it is done; -FI_EINVAL (logged) when it crosses 32 bytes. */
static int axon_fi_amo_place(axon_fi_amo_elem_t *e, const axon_fi_amo_t *amo, size_t size,
                             uint64_t raddr)
{
    size_t block;
    int is_int = (amo->datatype <= FI_UINT64);

    for (block = 4; block <= AXON_FI_AMO_MAX_SIZE; block *= 2) {
        if ((block >= size) && ((raddr & ~(uint64_t)(block - 1)) ==
                                ((raddr + size - 1) & ~(uint64_t)(block - 1)))) {
            break;
        }
    }
    if (block > AXON_FI_AMO_MAX_SIZE) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "atomic on %s at remote address 0x%llx: the element "
                     "crosses a 32-byte boundary", axon_fi_amo_type_name(amo->datatype),
                     (unsigned long long)raddr);
        return -FI_EINVAL;
    }
    e->block  = (uint8_t)block;
    e->raddr  = raddr & ~(uint64_t)(block - 1);
    e->offset = (uint8_t)(raddr - e->raddr);
    e->mode   = AXON_FI_AMO_LOOP;
    memset(e->guess, 0, sizeof(e->guess));
    if (amo->op == FI_ATOMIC_READ) {
        e->mode = AXON_FI_AMO_READ;
    } else if ((block == size) && (block <= 8)) {
        e->mode = AXON_FI_AMO_NATIVE;
        switch (amo->op) {
        case FI_SUM:          e->native = AXON_ATOMIC_ADD;   break;
        case FI_BOR:          e->native = AXON_ATOMIC_OR;    break;
        case FI_BAND:         e->native = AXON_ATOMIC_AND;   break;
        case FI_BXOR:         e->native = AXON_ATOMIC_XOR;   break;
        case FI_ATOMIC_WRITE: e->native = AXON_ATOMIC_SWAP;  break;   /* any 4/8-byte type */
        case FI_CSWAP:        e->native = AXON_ATOMIC_CSWAP; break;
        default:              e->mode   = AXON_FI_AMO_LOOP;  break;
        }
        /* Float sums and compares are arithmetic, not bits: those loop. */
        if (!is_int && (amo->op != FI_ATOMIC_WRITE)) {
            e->mode = AXON_FI_AMO_LOOP;
        }
    }
    return 0;
}

/* Checks that fail the call (nothing started), each logged; the element count. */
static int axon_fi_amo_check(const axon_fi_amo_t *amo, size_t *count_p, size_t *size_p)
{
    const char *call = axon_fi_amo_family_names[amo->family];
    size_t i, n = 0, rn = 0, cn = 0, resn = 0;
    size_t size = axon_fi_amo_size(amo->datatype, amo->op, amo->family);

    if (size == 0) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "%s: %s on %s is not supported (see %svalid)", call,
                     ((unsigned)amo->op < FI_ATOMIC_OP_LAST) ? axon_fi_amo_op_names[amo->op] :
                     "an unknown operation", axon_fi_amo_type_name(amo->datatype), call);
        return -FI_EOPNOTSUPP;
    }
    if (amo->flags & (FI_REMOTE_CQ_DATA | FI_TAGGED)) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "%s: %s is not supported", call,
                     (amo->flags & FI_TAGGED) ? "FI_TAGGED" : "FI_REMOTE_CQ_DATA");
        return -FI_ENOSYS;
    }
    for (i = 0; i < amo->iov_count; ++i) {
        n += amo->iov[i].count;
    }
    for (i = 0; i < amo->rma_count; ++i) {
        rn += amo->rma[i].count;
        if (amo->rma[i].key != amo->rma[0].key) {
            AXON_FI_WARN(FI_LOG_EP_DATA, "%s: rma_iov %zu has key %llu, rma_iov 0 key %llu: "
                         "one key per message", call, i, (unsigned long long)amo->rma[i].key,
                         (unsigned long long)amo->rma[0].key);
            return -FI_EINVAL;
        }
    }
    for (i = 0; (amo->cmp != NULL) && (i < amo->cmp_count); ++i) {
        cn += amo->cmp[i].count;
    }
    for (i = 0; (amo->res != NULL) && (i < amo->res_count); ++i) {
        resn += amo->res[i].count;
    }
    if (amo->op == FI_ATOMIC_READ) {
        n = rn;   /* no operands: the count is the target's */
    }
    if ((rn != n) || ((amo->cmp != NULL) && (cn != n)) || ((amo->res != NULL) && (resn != n))) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "%s: %zu operands, %zu targets, %zu compares, %zu results "
                     "do not match", call, n, rn, cn, resn);
        return -FI_EINVAL;
    }
    if ((n == 0) || (n > AXON_FI_ATOMIC_COUNT)) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "%s: %zu elements (1 to %d per call)", call, n,
                     AXON_FI_ATOMIC_COUNT);
        return (n == 0) ? -FI_EINVAL : -FI_EMSGSIZE;
    }
    *count_p = n;
    *size_p  = size;
    return 0;
}

/* Walks an fi_ioc list element by element. */
typedef struct {
    const struct fi_ioc *ioc;
    size_t               i, j;
} axon_fi_ioc_walk_t;

static uint8_t *axon_fi_ioc_next(axon_fi_ioc_walk_t *w, size_t size)
{
    uint8_t *p;

    if (w->ioc == NULL) {
        return NULL;
    }
    while (w->j >= w->ioc[w->i].count) {
        ++w->i;
        w->j = 0;
    }
    p = (uint8_t *)w->ioc[w->i].addr + w->j * size;
    ++w->j;
    return p;
}

/* The elements' state from the call's lists: operands copied, blocks placed. */
static int axon_fi_amo_fill(axon_fi_op_t *op, const axon_fi_amo_t *amo, uint64_t addend)
{
    axon_fi_amo_elem_t *elems = op->bounce;
    axon_fi_ioc_walk_t val = {(amo->op == FI_ATOMIC_READ) ? NULL : amo->iov, 0, 0};
    axon_fi_ioc_walk_t cmp = {amo->cmp, 0, 0}, res = {amo->res, 0, 0};
    size_t i, r = 0, rj = 0, size = op->amo_size;
    uint8_t *p;
    int ret;

    for (i = 0; i < op->amo_count; ++i) {
        axon_fi_amo_elem_t *e = &elems[i];

        memset(e->operand, 0, sizeof(e->operand));
        memset(e->compare, 0, sizeof(e->compare));
        if ((p = axon_fi_ioc_next(&val, size)) != NULL) {
            memcpy(e->operand, p, size);
        }
        if ((p = axon_fi_ioc_next(&cmp, size)) != NULL) {
            memcpy(e->compare, p, size);
        }
        e->op     = op;
        e->result = axon_fi_ioc_next(&res, size);
        while (rj >= amo->rma[r].count) {
            ++r;
            rj = 0;
        }
        ret = axon_fi_amo_place(e, amo, size, amo->rma[r].addr + addend + rj * size);
        if (ret != 0) {
            return ret;
        }
        ++rj;
    }
    return 0;
}

static ssize_t axon_fi_amo(axon_fi_ep_t *ep, const axon_fi_amo_t *amo)
{
    axon_fi_domain_t *domain = ep->domain;
    uint64_t cq_flags = FI_ATOMIC | ((amo->family == AXON_FI_AMO_BASE) ? FI_WRITE : FI_READ);
    uint64_t key = amo->rma_count ? amo->rma[0].key : 0;
    axon_request_param_t param = {0};
    axon_fi_conn_t *conn;
    axon_fi_rkey_t *rkey;
    axon_request_h req;
    axon_status_t status;
    axon_fi_op_t *op;
    size_t count = 0, size = 0, i;
    ssize_t ret = axon_fi_amo_check(amo, &count, &size);

    if (ret != 0) {
        return ret;
    }
    axon_fi_lock(domain);
    status = axon_fi_conn_get(ep, amo->dest, &conn);
    if (status == AXON_OK) {
        status = axon_fi_rkey_get(conn, key, &rkey);
    }
    if (AXON_FI_UNLIKELY(status != AXON_OK)) {
        if (status == AXON_ERR_INVALID_ADDR) {
            ret = -FI_EINVAL;   /* not in the AV: logged */
        } else if (status == AXON_ERR_NO_MEMORY) {
            ret = -FI_ENOMEM;
        } else {
            /* Unreachable peer, unknown key: the operation completes, in error. */
            axon_fi_rma_entry(ep, "atomic", amo->context, cq_flags, amo->comp, amo->dest, key,
                              status);
        }
        goto out;
    }
    op = (rkey->events && !rkey->word && axon_fi_event_backlog(ep)) ? NULL :
         axon_fi_op_get(domain);
    if (op == NULL) {
        ret = -FI_EAGAIN;
        goto out;
    }
    op->bounce = axon_fi_bounce_get(domain);
    if (op->bounce == NULL) {
        axon_fi_op_put(domain, op);
        ret = -FI_EAGAIN;
        goto out;
    }
    op->domain       = domain;
    op->ep           = ep;
    op->context      = amo->context;
    op->flags        = cq_flags;
    op->comp         = (uint8_t)amo->comp;
    op->addr         = amo->dest;
    op->key          = key;
    op->notify       = !rkey->events ? 0 :
                       (amo->op == FI_ATOMIC_READ) ? AXON_FI_EVENT_READ : AXON_FI_EVENT_WRITE;
    op->pending      = 1;   /* held by this call until everything is posted */
    op->status       = AXON_OK;
    op->amo_datatype = (uint8_t)amo->datatype;
    op->amo_op       = (uint8_t)amo->op;
    op->amo_size     = (uint8_t)size;
    op->amo_count    = (uint8_t)count;
    ret = axon_fi_amo_fill(op, amo, rkey->addend);
    if (ret != 0) {
        axon_fi_bounce_put(domain, op->bounce);
        axon_fi_op_put(domain, op);
        goto out;
    }
    if (amo->flags & FI_FENCE) {
        axon_worker_fence(ep->worker);
    }
    for (i = 0; i < count; ++i) {
        axon_fi_amo_run(&((axon_fi_amo_elem_t *)op->bounce)[i]);
    }
    if ((amo->family == AXON_FI_AMO_BASE) &&
        (!(amo->flags & FI_INJECT_COMPLETE) || op->notify ||
         (amo->flags & (FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE)))) {
        param.cb.send   = axon_fi_amo_flushed;
        param.user_data = op;
        status = axon_ep_flush_nb(conn->aep, &param, &req);
        if (status == AXON_INPROGRESS) {
            ++op->pending;
            axon_request_free(req);
        } else {
            axon_fi_amo_fail(op, status);
        }
    }
    if (op->pending > 1) {
        axon_fi_inflight_add(ep, op);
    }
    axon_fi_amo_release(op);   /* drops the call's hold */
out:
    axon_fi_unlock(domain);
    return ret;
}

/* ---------------------------------------------------------------- the ops table */

static ssize_t axon_fi_amo_call(struct fid_ep *ep_fid, axon_fi_amo_t *amo,
                                const struct fi_rma_ioc *rma)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);

    amo->rma       = rma;
    amo->rma_count = 1;
    amo->flags     = ep->tx_op_flags;
    amo->comp      = ep->tx_comp;
    return axon_fi_amo(ep, amo);
}

static ssize_t axon_fi_amo_msg(struct fid_ep *ep_fid, axon_fi_amo_t *amo,
                               const struct fi_msg_atomic *msg, uint64_t flags)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);

    amo->iov       = msg->msg_iov;
    amo->iov_count = msg->iov_count;
    amo->rma       = msg->rma_iov;
    amo->rma_count = msg->rma_iov_count;
    amo->dest      = msg->addr;
    amo->datatype  = msg->datatype;
    amo->op        = msg->op;
    amo->context   = msg->context;
    amo->flags     = flags;
    amo->comp      = !ep->tx_selective || (flags & FI_COMPLETION);
    if (msg->rma_iov_count == 0) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "%s: no rma_iov", axon_fi_amo_family_names[amo->family]);
        return -FI_EINVAL;
    }
    return axon_fi_amo(ep, amo);
}

static ssize_t axon_fi_atomic_write(struct fid_ep *ep, const void *buf, size_t count,
                                    void *desc, fi_addr_t dest, uint64_t addr, uint64_t key,
                                    enum fi_datatype datatype, enum fi_op op, void *context)
{
    struct fi_ioc iov = {(void *)buf, count};
    struct fi_rma_ioc rma = {addr, count, key};
    axon_fi_amo_t amo = {&iov, 1, NULL, 0, NULL, 0, NULL, 0, dest, datatype, op,
                         AXON_FI_AMO_BASE, context, 0, 0};

    return axon_fi_amo_call(ep, &amo, &rma);
}

static ssize_t axon_fi_atomic_writev(struct fid_ep *ep, const struct fi_ioc *iov, void **desc,
                                     size_t count, fi_addr_t dest, uint64_t addr, uint64_t key,
                                     enum fi_datatype datatype, enum fi_op op, void *context)
{
    struct fi_rma_ioc rma = {addr, 0, key};
    axon_fi_amo_t amo = {iov, count, NULL, 0, NULL, 0, NULL, 0, dest, datatype, op,
                         AXON_FI_AMO_BASE, context, 0, 0};
    size_t i;

    for (i = 0; i < count; ++i) {
        rma.count += iov[i].count;
    }
    return axon_fi_amo_call(ep, &amo, &rma);
}

static ssize_t axon_fi_atomic_writemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
                                       uint64_t flags)
{
    axon_fi_amo_t amo = {0};

    amo.family = AXON_FI_AMO_BASE;
    return axon_fi_amo_msg(ep, &amo, msg, flags);
}

static ssize_t axon_fi_atomic_inject(struct fid_ep *ep_fid, const void *buf, size_t count,
                                     fi_addr_t dest, uint64_t addr, uint64_t key,
                                     enum fi_datatype datatype, enum fi_op op)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);
    struct fi_ioc iov = {(void *)buf, count};
    struct fi_rma_ioc rma = {addr, count, key};
    axon_fi_amo_t amo = {&iov, 1, NULL, 0, NULL, 0, &rma, 1, dest, datatype, op,
                         AXON_FI_AMO_BASE, NULL, ep->tx_op_flags | FI_INJECT, 0};

    return axon_fi_amo(ep, &amo);
}

static ssize_t axon_fi_atomic_readwrite(struct fid_ep *ep, const void *buf, size_t count,
                                        void *desc, void *result, void *result_desc,
                                        fi_addr_t dest, uint64_t addr, uint64_t key,
                                        enum fi_datatype datatype, enum fi_op op,
                                        void *context)
{
    struct fi_ioc iov = {(void *)buf, count}, res = {result, count};
    struct fi_rma_ioc rma = {addr, count, key};
    axon_fi_amo_t amo = {&iov, 1, NULL, 0, &res, 1, NULL, 0, dest, datatype, op,
                         AXON_FI_AMO_FETCH, context, 0, 0};

    return axon_fi_amo_call(ep, &amo, &rma);
}

static ssize_t axon_fi_atomic_readwritev(struct fid_ep *ep, const struct fi_ioc *iov,
                                         void **desc, size_t count, struct fi_ioc *resultv,
                                         void **result_desc, size_t result_count,
                                         fi_addr_t dest, uint64_t addr, uint64_t key,
                                         enum fi_datatype datatype, enum fi_op op,
                                         void *context)
{
    struct fi_rma_ioc rma = {addr, 0, key};
    axon_fi_amo_t amo = {iov, count, NULL, 0, resultv, result_count, NULL, 0, dest, datatype,
                         op, AXON_FI_AMO_FETCH, context, 0, 0};
    size_t i;

    for (i = 0; i < result_count; ++i) {
        rma.count += resultv[i].count;   /* FI_ATOMIC_READ may come without operands */
    }
    return axon_fi_amo_call(ep, &amo, &rma);
}

static ssize_t axon_fi_atomic_readwritemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
                                           struct fi_ioc *resultv, void **result_desc,
                                           size_t result_count, uint64_t flags)
{
    axon_fi_amo_t amo = {0};

    amo.family    = AXON_FI_AMO_FETCH;
    amo.res       = resultv;
    amo.res_count = result_count;
    return axon_fi_amo_msg(ep, &amo, msg, flags);
}

static ssize_t axon_fi_atomic_compwrite(struct fid_ep *ep, const void *buf, size_t count,
                                        void *desc, const void *compare, void *compare_desc,
                                        void *result, void *result_desc, fi_addr_t dest,
                                        uint64_t addr, uint64_t key, enum fi_datatype datatype,
                                        enum fi_op op, void *context)
{
    struct fi_ioc iov = {(void *)buf, count}, cmp = {(void *)compare, count};
    struct fi_ioc res = {result, count};
    struct fi_rma_ioc rma = {addr, count, key};
    axon_fi_amo_t amo = {&iov, 1, &cmp, 1, &res, 1, NULL, 0, dest, datatype, op,
                         AXON_FI_AMO_COMPARE, context, 0, 0};

    return axon_fi_amo_call(ep, &amo, &rma);
}

static ssize_t axon_fi_atomic_compwritev(struct fid_ep *ep, const struct fi_ioc *iov,
                                         void **desc, size_t count,
                                         const struct fi_ioc *comparev, void **compare_desc,
                                         size_t compare_count, struct fi_ioc *resultv,
                                         void **result_desc, size_t result_count,
                                         fi_addr_t dest, uint64_t addr, uint64_t key,
                                         enum fi_datatype datatype, enum fi_op op,
                                         void *context)
{
    struct fi_rma_ioc rma = {addr, 0, key};
    axon_fi_amo_t amo = {iov, count, comparev, compare_count, resultv, result_count, NULL, 0,
                         dest, datatype, op, AXON_FI_AMO_COMPARE, context, 0, 0};
    size_t i;

    for (i = 0; i < count; ++i) {
        rma.count += iov[i].count;
    }
    return axon_fi_amo_call(ep, &amo, &rma);
}

static ssize_t axon_fi_atomic_compwritemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
                                           const struct fi_ioc *comparev, void **compare_desc,
                                           size_t compare_count, struct fi_ioc *resultv,
                                           void **result_desc, size_t result_count,
                                           uint64_t flags)
{
    axon_fi_amo_t amo = {0};

    amo.family    = AXON_FI_AMO_COMPARE;
    amo.cmp       = comparev;
    amo.cmp_count = compare_count;
    amo.res       = resultv;
    amo.res_count = result_count;
    return axon_fi_amo_msg(ep, &amo, msg, flags);
}

/* ---------------------------------------------------------------- valid, query */

static int axon_fi_amo_valid(enum fi_datatype datatype, enum fi_op op,
                             axon_fi_amo_family_t family, size_t *count)
{
    if (axon_fi_amo_size(datatype, op, family) == 0) {
        return -FI_EOPNOTSUPP;
    }
    *count = AXON_FI_ATOMIC_COUNT;
    return 0;
}

static int axon_fi_atomic_writevalid(struct fid_ep *ep, enum fi_datatype datatype,
                                     enum fi_op op, size_t *count)
{
    return axon_fi_amo_valid(datatype, op, AXON_FI_AMO_BASE, count);
}

static int axon_fi_atomic_readwritevalid(struct fid_ep *ep, enum fi_datatype datatype,
                                         enum fi_op op, size_t *count)
{
    return axon_fi_amo_valid(datatype, op, AXON_FI_AMO_FETCH, count);
}

static int axon_fi_atomic_compwritevalid(struct fid_ep *ep, enum fi_datatype datatype,
                                         enum fi_op op, size_t *count)
{
    return axon_fi_amo_valid(datatype, op, AXON_FI_AMO_COMPARE, count);
}

int axon_fi_query_atomic(struct fid_domain *domain, enum fi_datatype datatype, enum fi_op op,
                         struct fi_atomic_attr *attr, uint64_t flags)
{
    axon_fi_amo_family_t family = (flags & FI_FETCH_ATOMIC) ? AXON_FI_AMO_FETCH :
                                  (flags & FI_COMPARE_ATOMIC) ? AXON_FI_AMO_COMPARE :
                                  AXON_FI_AMO_BASE;
    size_t size;

    if ((flags & FI_FETCH_ATOMIC) && (flags & FI_COMPARE_ATOMIC)) {
        return -FI_EINVAL;
    }
    if (flags & FI_TAGGED) {
        return -FI_EOPNOTSUPP;   /* atomics on tagged receive buffers */
    }
    size = axon_fi_amo_size(datatype, op, family);
    if (size == 0) {
        return -FI_EOPNOTSUPP;
    }
    attr->count = AXON_FI_ATOMIC_COUNT;
    attr->size  = size;
    return 0;
}

struct fi_ops_atomic axon_fi_atomic_ops = {
    .size           = sizeof(struct fi_ops_atomic),
    .write          = axon_fi_atomic_write,
    .writev         = axon_fi_atomic_writev,
    .writemsg       = axon_fi_atomic_writemsg,
    .inject         = axon_fi_atomic_inject,
    .readwrite      = axon_fi_atomic_readwrite,
    .readwritev     = axon_fi_atomic_readwritev,
    .readwritemsg   = axon_fi_atomic_readwritemsg,
    .compwrite      = axon_fi_atomic_compwrite,
    .compwritev     = axon_fi_atomic_compwritev,
    .compwritemsg   = axon_fi_atomic_compwritemsg,
    .writevalid     = axon_fi_atomic_writevalid,
    .readwritevalid = axon_fi_atomic_readwritevalid,
    .compwritevalid = axon_fi_atomic_compwritevalid,
};
