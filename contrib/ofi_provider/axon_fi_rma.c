/*
 * RMA (fi_read*, fi_write*, fi_inject_write): each remote iovec is one
 * axon_get_nb / axon_put_nb on the destination's connection, with the
 * peer's key resolved once and cached (axon_fi_rkey.c); the message
 * completes (one CQ entry, one count on the FI_READ / FI_WRITE counter)
 * when all of them, and for a write its flush, are done.
 *
 * Completion of a write: Axon completes a put when its buffer may be
 * reused, which is only FI_INJECT_COMPLETE. Every other semantic (the
 * default, FI_TRANSMIT_COMPLETE, FI_DELIVERY_COMPLETE) waits for
 * axon_ep_flush_nb, so the data is visible at the target when the entry
 * (or count) appears; that is also what a SHMEM quiet counts on.
 * FI_RMA_EVENT: a write to a region that counts its accesses is flushed
 * even under FI_INJECT_COMPLETE; once done, the target is told
 * (axon_fi_event.c). Remote CQ data (fi_writedata, fi_inject_writedata,
 * fi_writemsg with FI_REMOTE_CQ_DATA) takes the same path: the write is
 * flushed, then the event message carries the data, and the target endpoint
 * writes the CQ entry; no receive of the target's is consumed. FI_FENCE:
 * axon_worker_fence first (what follows reaches the target after what came
 * before). FI_INJECT: the data is copied (AXON_FI_INJECT_SIZE at
 * most) into a buffer from the domain's free list. Descriptors and copies
 * come from free lists: nothing is allocated per operation.
 */
#include <string.h>
#include "axon_fi.h"

typedef struct {
    const struct iovec     *iov;
    size_t                  count;
    size_t                  len;
    const struct fi_rma_iov *rma_iov;
    size_t                  rma_count;
    fi_addr_t               dest;
    uint64_t                key;        /* rma_iov's (they share one in a message) */
    void                   *context;
    uint64_t                flags;      /* op_flags, or the msg call's */
    uint8_t                 write;
    uint8_t                 comp;
    uint64_t                data;       /* remote CQ data, with FI_REMOTE_CQ_DATA in flags */
} axon_fi_rma_t;

void axon_fi_rma_entry(axon_fi_ep_t *ep, const char *what, void *context, uint64_t cq_flags,
                       int comp, fi_addr_t dest, uint64_t key, axon_status_t status)
{
    axon_fi_cntr_count((cq_flags & FI_WRITE) ? ep->wr_cntr : ep->rd_cntr, status == AXON_OK);
    if (status != AXON_OK) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "%s at fi_addr %llu, key %llu failed: %s",
                     (what != NULL) ? what : (cq_flags & FI_WRITE) ? "RMA write" : "RMA read",
                     (unsigned long long)dest, (unsigned long long)key,
                     axon_status_string(status));
        if (status == AXON_ERR_REMOTE_ACCESS) {
            axon_fi_rkey_forget(ep, dest, key);   /* maybe stale: ask the target again */
        }
    }
    if (ep->tx_cq == NULL) {
        return;
    }
    if (status == AXON_OK) {
        if (comp) {
            axon_fi_cq_write(ep->tx_cq, context, cq_flags, 0, NULL, 0, 0, 0);
        }
    } else {
        axon_fi_cq_write_err(ep->tx_cq, context, cq_flags, 0, NULL, 0, 0, 0,
                             axon_fi_errno(status), status, 0);
    }
}

static void axon_fi_rma_op_free(axon_fi_domain_t *domain, axon_fi_op_t *op)
{
    if (op->bounce != NULL) {
        axon_fi_bounce_put(domain, op->bounce);
    }
    axon_fi_op_put(domain, op);
}

static void axon_fi_rma_done(axon_request_h req, axon_status_t status, void *user_data)
{
    axon_fi_op_t *op = user_data;

    if ((status != AXON_OK) && (op->status == AXON_OK)) {
        op->status = status;
    }
    if (--op->pending > 0) {
        return;
    }
    axon_fi_inflight_del(op);
    if ((op->ep != NULL) && op->notify && (op->status == AXON_OK)) {
        axon_fi_event_notify(op);   /* the access is visible at the target now */
    }
    if (op->ep != NULL) {
        axon_fi_rma_entry(op->ep, NULL, op->context, op->flags, op->comp, op->addr, op->key,
                          op->status);
    }
    axon_fi_rma_op_free(op->domain, op);
}

/*
 * The local side of remote iovec [off, off + len) of the message: contiguous
 * (*buf_p) when it lies in one local iovec, else a layout of the pieces, taken
 * from op->pieces at *next.
 */
static const axon_layout_t *axon_fi_rma_local(axon_fi_op_t *op, const struct iovec *iov,
                                              size_t count, size_t off, size_t len,
                                              size_t slot, size_t *next, void **buf_p)
{
    axon_layout_t *layout = &op->rma_layouts[slot];
    size_t i = 0, first = *next, take;

    while ((i < count) && (off >= iov[i].iov_len)) {
        off -= iov[i++].iov_len;
    }
    if ((i == count) || (off + len <= iov[i].iov_len)) {
        *buf_p = (i == count) ? NULL : (uint8_t *)iov[i].iov_base + off;
        return NULL;
    }
    for (; (len > 0) && (i < count); ++i, off = 0) {
        take = iov[i].iov_len - off;
        take = (take < len) ? take : len;
        op->pieces[*next].offset = (ptrdiff_t)((uintptr_t)iov[i].iov_base + off);
        op->pieces[*next].length = take;
        ++*next;
        len -= take;
    }
    layout->kind       = AXON_LAYOUT_IOV;
    layout->iov.pieces = &op->pieces[first];
    layout->iov.count  = *next - first;
    *buf_p = NULL;
    return layout;
}

/* Post the message's Axon ops (and a write's flush) on conn; op->pending counts them. */
static axon_status_t axon_fi_rma_post(axon_fi_op_t *op, const axon_fi_rma_t *rma,
                                      axon_fi_conn_t *conn, axon_fi_rkey_t *rkey,
                                      const struct iovec *iov, size_t count)
{
    axon_request_param_t param = {0};
    axon_request_h req;
    axon_status_t status = AXON_OK;
    size_t i, off = 0, next = 0;
    void *buf;

    param.cb.send   = axon_fi_rma_done;
    param.user_data = op;
    for (i = 0; i < rma->rma_count; ++i) {
        size_t len = rma->rma_iov[i].len;
        uint64_t raddr = rma->rma_iov[i].addr + rkey->addend;

        param.layout = axon_fi_rma_local(op, iov, count, off, len, i, &next, &buf);
        param.flags  = (param.layout != NULL) ? AXON_REQ_FLAG_LAYOUT : 0;
        status = rma->write ?
                 axon_put_nb(conn->aep, buf, len, raddr, rkey->rkey, &param, &req) :
                 axon_get_nb(conn->aep, buf, len, raddr, rkey->rkey, &param, &req);
        if (status == AXON_INPROGRESS) {
            ++op->pending;
            axon_request_free(req);   /* the callback still comes */
            status = AXON_OK;
        } else if (status != AXON_OK) {
            return status;
        }
        off += len;
    }
    if (rma->write && (!(rma->flags & FI_INJECT_COMPLETE) || op->notify ||
                       (rma->flags & (FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE)))) {
        param.flags  = 0;
        param.layout = NULL;
        status = axon_ep_flush_nb(conn->aep, &param, &req);
        if (status == AXON_INPROGRESS) {
            ++op->pending;
            axon_request_free(req);
            status = AXON_OK;
        }
    }
    return status;
}

/* Checks that fail the call (nothing started), each logged. */
static int axon_fi_rma_check(const axon_fi_rma_t *rma, size_t *len_p)
{
    size_t i, rlen = 0;
    int ret = axon_fi_iov_size(rma->iov, rma->count, len_p);

    if (ret != 0) {
        return ret;
    }
    if ((rma->rma_count == 0) || (rma->rma_count > AXON_FI_RMA_IOV_LIMIT)) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "rma_iov count %zu (rma_iov_limit %d)", rma->rma_count,
                     AXON_FI_RMA_IOV_LIMIT);
        return -FI_EINVAL;
    }
    for (i = 0; i < rma->rma_count; ++i) {
        if (rma->rma_iov[i].key != rma->key) {
            AXON_FI_WARN(FI_LOG_EP_DATA, "rma_iov %zu has key %llu, rma_iov 0 key %llu: one "
                         "key per message", i, (unsigned long long)rma->rma_iov[i].key,
                         (unsigned long long)rma->key);
            return -FI_EINVAL;
        }
        rlen += rma->rma_iov[i].len;
    }
    if (rlen != *len_p) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "RMA of %zu local bytes to %zu remote bytes", *len_p,
                     rlen);
        return -FI_EINVAL;
    }
    if ((rma->flags & FI_REMOTE_CQ_DATA) && !rma->write) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "RMA read with FI_REMOTE_CQ_DATA (remote CQ data goes "
                     "with writes only)");
        return -FI_EINVAL;
    }
    if ((rma->flags & FI_REMOTE_CQ_DATA) && (rma->data >> (8 * AXON_FI_CQ_DATA_SIZE))) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "remote CQ data 0x%llx does not fit cq_data_size %d",
                     (unsigned long long)rma->data, AXON_FI_CQ_DATA_SIZE);
        return -FI_EINVAL;
    }
    if (rma->write && (rma->flags & FI_INJECT) && (*len_p > AXON_FI_INJECT_SIZE)) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "inject write of %zu bytes exceeds inject_size %d",
                     *len_p, AXON_FI_INJECT_SIZE);
        return -FI_EMSGSIZE;
    }
    return 0;
}

/* An inject's data, gathered into a copy: the caller's buffers are free on return. */
static int axon_fi_rma_copy(axon_fi_op_t *op, const axon_fi_rma_t *rma, struct iovec *copy)
{
    size_t i, off = 0;

    op->bounce = axon_fi_bounce_get(op->domain);
    if (op->bounce == NULL) {
        return -FI_EAGAIN;
    }
    for (i = 0; i < rma->count; ++i) {
        memcpy((uint8_t *)op->bounce + off, rma->iov[i].iov_base, rma->iov[i].iov_len);
        off += rma->iov[i].iov_len;
    }
    copy->iov_base = op->bounce;
    copy->iov_len  = off;
    return 0;
}

/*
 * One contiguous access to memory mapped here (a peer's allocated memory or
 * shared pages on this host: axon_rkey_ptr), on a connection and key known
 * already, is a memmove in the call, its event count an add to the target's
 * mapped word: no Axon operation, flush or op to track, delivered and
 * complete on return. 0: not such an access (a fence, remote CQ data, events
 * counted by messages, a first use, a failed peer, anything to report): the
 * ops path, which checks and reports.
 */
static int axon_fi_rma_direct(axon_fi_ep_t *ep, void *buf, size_t len, fi_addr_t dest,
                              uint64_t addr, uint64_t key, void *context, int write,
                              uint64_t flags, int comp)
{
    axon_fi_conn_t *conn;
    axon_fi_rkey_t *rkey = NULL;
    void *mapped;
    uint64_t off;
    int done = 0;

    if ((len == 0) || (buf == NULL) || (flags & (FI_FENCE | FI_REMOTE_CQ_DATA)) ||
        ((flags & FI_INJECT) && (len > AXON_FI_INJECT_SIZE))) {
        return 0;
    }
    axon_fi_lock(ep->domain);
    conn = axon_fi_conn_find(ep, dest);
    /* A failed peer's memory may stay mapped here: its operations fail on the ops path. */
    if ((conn != NULL) && (conn->aep != NULL) && (conn->status == AXON_OK) &&
        ((rkey = axon_fi_rkey_find(conn, key)) != NULL) &&
        (!rkey->events || (rkey->word_ptr != NULL))) {
        off = addr - rkey->win_lo;
        if ((off < rkey->win_len) && (len <= rkey->win_len - off)) {
            mapped = rkey->win_ptr + off;   /* a peer's memory, mapped for the key's life */
            done   = 1;
        } else {
            done = (axon_rkey_ptr(rkey->rkey, addr + rkey->addend, len, 0, &mapped) == AXON_OK);
        }
    }
    if (!done) {
        axon_fi_unlock(ep->domain);
        return 0;
    }
    /* A large copy leaves the lock to the progress thread meanwhile (which would block
     * on it, and cost the unlock a wake-up); the key lives until the endpoint closes. */
    if (len > AXON_FI_INJECT_SIZE) {
        axon_fi_unlock(ep->domain);
    }
    if (write) {
        memmove(mapped, buf, len);
    } else {
        memmove(buf, mapped, len);
    }
    if (rkey->events) {
        axon_fi_event_word_add(rkey, !write);
    }
    if (len > AXON_FI_INJECT_SIZE) {
        axon_fi_lock(ep->domain);
    }
    axon_fi_rma_entry(ep, NULL, context, FI_RMA | (write ? FI_WRITE : FI_READ), comp, dest, key,
                      AXON_OK);
    axon_fi_unlock(ep->domain);
    return 1;
}

static ssize_t axon_fi_rma(axon_fi_ep_t *ep, const axon_fi_rma_t *rma)
{
    axon_fi_domain_t *domain = ep->domain;
    uint64_t cq_flags = FI_RMA | (rma->write ? FI_WRITE : FI_READ);
    const struct iovec *iov = rma->iov;
    size_t count = rma->count, len;
    struct iovec copy;
    axon_fi_conn_t *conn;
    axon_fi_rkey_t *rkey;
    axon_status_t status;
    axon_fi_op_t *op;
    ssize_t ret = axon_fi_rma_check(rma, &len);

    if (ret != 0) {
        return ret;
    }
    axon_fi_lock(domain);
    status = axon_fi_conn_get(ep, rma->dest, &conn);
    if (status == AXON_OK) {
        status = axon_fi_rkey_get(conn, rma->key, &rkey);
    }
    if (AXON_FI_UNLIKELY(status != AXON_OK)) {
        if (status == AXON_ERR_INVALID_ADDR) {
            ret = -FI_EINVAL;   /* not in the AV: logged */
        } else if (status == AXON_ERR_NO_MEMORY) {
            ret = -FI_ENOMEM;
        } else {
            /* Unreachable peer, unknown key: the operation completes, in error. */
            axon_fi_rma_entry(ep, NULL, rma->context, cq_flags, rma->comp, rma->dest, rma->key,
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
    op->domain  = domain;
    op->ep      = ep;
    op->context = rma->context;
    op->flags   = cq_flags;
    op->comp    = rma->comp;
    op->addr    = rma->dest;
    op->key     = rma->key;
    op->notify  = !rkey->events ? 0 : rma->write ? AXON_FI_EVENT_WRITE : AXON_FI_EVENT_READ;
    if (rma->flags & FI_REMOTE_CQ_DATA) {
        op->notify |= AXON_FI_EVENT_WRITE | AXON_FI_EVENT_DATA;
        op->cq_data = rma->data;
    }
    op->pending = 1;   /* held by this call until everything is posted */
    op->status  = AXON_OK;
    if (rma->write && (rma->flags & FI_INJECT) && (len > 0)) {   /* reads have no inject */
        if ((ret = axon_fi_rma_copy(op, rma, &copy)) != 0) {
            axon_fi_op_put(domain, op);
            goto out;
        }
        iov   = &copy;
        count = 1;
    }
    if (rma->flags & FI_FENCE) {
        axon_worker_fence(ep->worker);
    }
    status = axon_fi_rma_post(op, rma, conn, rkey, iov, count);
    if ((status == AXON_ERR_NO_RESOURCE) && (op->pending == 1)) {
        /* Nothing started: the caller retries after progress. */
        axon_worker_progress(ep->worker);
        axon_fi_rma_op_free(domain, op);
        ret = -FI_EAGAIN;
        goto out;
    }
    if (status != AXON_OK) {
        op->status = status;   /* what was posted still completes; the message fails */
    }
    if (op->pending > 1) {
        axon_fi_inflight_add(ep, op);
    }
    axon_fi_rma_done(NULL, AXON_OK, op);   /* drops the call's hold */
out:
    axon_fi_unlock(domain);
    return ret;
}

/* ---------------------------------------------------------------- the ops table */

/* The operation's description built only off the direct path (a put on mapped memory
 * never needs it: building it first cost a SHMEM put 40 instructions). */
static __attribute__((noinline))
ssize_t axon_fi_rma_posted(axon_fi_ep_t *ep, const struct iovec *iov, size_t count,
                           fi_addr_t dest, uint64_t addr, uint64_t key, void *context, int write,
                           uint64_t flags, int comp, uint64_t data)
{
    struct fi_rma_iov rma_iov = {addr, 0, key};
    axon_fi_rma_t rma = {iov, count, 0, &rma_iov, 1, dest, key, context, flags,
                         (uint8_t)write, (uint8_t)comp, data};
    size_t i;

    for (i = 0; i < count; ++i) {
        rma_iov.len += iov[i].iov_len;
    }
    return axon_fi_rma(ep, &rma);
}

static ssize_t axon_fi_rma_common(struct fid_ep *ep_fid, const struct iovec *iov, size_t count,
                                  fi_addr_t dest, uint64_t addr, uint64_t key, void *context,
                                  int write, uint64_t flags, int comp, uint64_t data)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);

    if ((count == 1) && axon_fi_rma_direct(ep, iov[0].iov_base, iov[0].iov_len, dest, addr, key,
                                           context, write, flags, comp)) {
        return 0;
    }
    return axon_fi_rma_posted(ep, iov, count, dest, addr, key, context, write, flags, comp,
                              data);
}

static ssize_t axon_fi_rma_msg(struct fid_ep *ep_fid, const struct fi_msg_rma *msg,
                               uint64_t flags, int write)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);
    axon_fi_rma_t rma = {msg->msg_iov, msg->iov_count, 0, msg->rma_iov, msg->rma_iov_count,
                         msg->addr, msg->rma_iov_count ? msg->rma_iov[0].key : 0,
                         msg->context, flags, (uint8_t)write,
                         (uint8_t)(!ep->tx_selective || (flags & FI_COMPLETION)), msg->data};

    if ((msg->iov_count == 1) && (msg->rma_iov_count == 1) &&
        (msg->rma_iov[0].len == msg->msg_iov[0].iov_len) &&
        axon_fi_rma_direct(ep, msg->msg_iov[0].iov_base, msg->msg_iov[0].iov_len, msg->addr,
                           msg->rma_iov[0].addr, msg->rma_iov[0].key, msg->context, write, flags,
                           rma.comp)) {
        return 0;
    }
    return axon_fi_rma(ep, &rma);
}

static ssize_t axon_fi_read(struct fid_ep *ep_fid, void *buf, size_t len, void *desc,
                            fi_addr_t src, uint64_t addr, uint64_t key, void *context)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);
    struct iovec iov = {buf, len};

    return axon_fi_rma_common(ep_fid, &iov, 1, src, addr, key, context, 0, ep->tx_op_flags,
                              ep->tx_comp, 0);
}

static ssize_t axon_fi_readv(struct fid_ep *ep_fid, const struct iovec *iov, void **desc,
                             size_t count, fi_addr_t src, uint64_t addr, uint64_t key,
                             void *context)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);

    return axon_fi_rma_common(ep_fid, iov, count, src, addr, key, context, 0, ep->tx_op_flags,
                              ep->tx_comp, 0);
}

static ssize_t axon_fi_readmsg(struct fid_ep *ep_fid, const struct fi_msg_rma *msg,
                               uint64_t flags)
{
    return axon_fi_rma_msg(ep_fid, msg, flags, 0);
}

static ssize_t axon_fi_write(struct fid_ep *ep_fid, const void *buf, size_t len, void *desc,
                             fi_addr_t dest, uint64_t addr, uint64_t key, void *context)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);
    struct iovec iov = {(void *)buf, len};

    return axon_fi_rma_common(ep_fid, &iov, 1, dest, addr, key, context, 1, ep->tx_op_flags,
                              ep->tx_comp, 0);
}

static ssize_t axon_fi_writev(struct fid_ep *ep_fid, const struct iovec *iov, void **desc,
                              size_t count, fi_addr_t dest, uint64_t addr, uint64_t key,
                              void *context)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);

    return axon_fi_rma_common(ep_fid, iov, count, dest, addr, key, context, 1, ep->tx_op_flags,
                              ep->tx_comp, 0);
}

static ssize_t axon_fi_writemsg(struct fid_ep *ep_fid, const struct fi_msg_rma *msg,
                                uint64_t flags)
{
    return axon_fi_rma_msg(ep_fid, msg, flags, 1);
}

static ssize_t axon_fi_inject_write(struct fid_ep *ep_fid, const void *buf, size_t len,
                                    fi_addr_t dest, uint64_t addr, uint64_t key)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);
    struct iovec iov = {(void *)buf, len};

    return axon_fi_rma_common(ep_fid, &iov, 1, dest, addr, key, NULL, 1,
                              ep->tx_op_flags | FI_INJECT, 0, 0);
}

static ssize_t axon_fi_writedata(struct fid_ep *ep_fid, const void *buf, size_t len, void *desc,
                                 uint64_t data, fi_addr_t dest, uint64_t addr, uint64_t key,
                                 void *context)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);
    struct iovec iov = {(void *)buf, len};

    return axon_fi_rma_common(ep_fid, &iov, 1, dest, addr, key, context, 1,
                              ep->tx_op_flags | FI_REMOTE_CQ_DATA, ep->tx_comp, data);
}

static ssize_t axon_fi_inject_writedata(struct fid_ep *ep_fid, const void *buf, size_t len,
                                        uint64_t data, fi_addr_t dest, uint64_t addr,
                                        uint64_t key)
{
    axon_fi_ep_t *ep = container_of(ep_fid, axon_fi_ep_t, ep_fid);
    struct iovec iov = {(void *)buf, len};

    return axon_fi_rma_common(ep_fid, &iov, 1, dest, addr, key, NULL, 1,
                              ep->tx_op_flags | FI_INJECT | FI_REMOTE_CQ_DATA, 0, data);
}

struct fi_ops_rma axon_fi_rma_ops = {
    .size       = sizeof(struct fi_ops_rma),
    .read       = axon_fi_read,
    .readv      = axon_fi_readv,
    .readmsg    = axon_fi_readmsg,
    .write      = axon_fi_write,
    .writev     = axon_fi_writev,
    .writemsg   = axon_fi_writemsg,
    .inject     = axon_fi_inject_write,
    .writedata  = axon_fi_writedata,
    .injectdata = axon_fi_inject_writedata,
};
