/*
 * Completion queue: a ring of tagged entries (every format is a prefix of
 * the tagged one) and a ring of error entries. Reading drives the workers
 * of the endpoints bound to it (FI_PROGRESS_MANUAL); Axon's request
 * callbacks write the entries. The rings are sized at open and double when
 * full instead of dropping a completion (FI_RM_ENABLED): growth is the rare
 * slow path. fi_cq_sread progresses until an entry, its timeout or
 * fi_cq_signal (from any thread; a signal before the wait ends the next one).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "axon_fi.h"

static const size_t axon_fi_cq_entry_sizes[] = {
    [FI_CQ_FORMAT_UNSPEC]  = sizeof(struct fi_cq_tagged_entry),
    [FI_CQ_FORMAT_CONTEXT] = sizeof(struct fi_cq_entry),
    [FI_CQ_FORMAT_MSG]     = sizeof(struct fi_cq_msg_entry),
    [FI_CQ_FORMAT_DATA]    = sizeof(struct fi_cq_data_entry),
    [FI_CQ_FORMAT_TAGGED]  = sizeof(struct fi_cq_tagged_entry),
};

/* Double a ring of count entries of elem bytes starting at head; head becomes 0. */
static int axon_fi_ring_grow(void **ring, size_t elem, size_t *size, size_t *head, size_t count)
{
    size_t new_size = *size * 2, first = *size - *head;
    uint8_t *mem = malloc(new_size * elem);

    if (mem == NULL) {
        return -FI_ENOMEM;
    }
    if (first > count) {
        first = count;
    }
    memcpy(mem, (uint8_t *)*ring + *head * elem, first * elem);
    memcpy(mem + first * elem, *ring, (count - first) * elem);
    free(*ring);
    *ring = mem;
    *size = new_size;
    *head = 0;
    return 0;
}

void axon_fi_cq_write(axon_fi_cq_t *cq, void *context, uint64_t flags, size_t len, void *buf,
                      uint64_t data, uint64_t tag, uint64_t sender)
{
    axon_fi_cqe_t *cqe;

    if ((cq->count == cq->size) &&
        (axon_fi_ring_grow((void **)&cq->ring, sizeof(*cq->ring), &cq->size, &cq->head,
                           cq->count) != 0)) {
        AXON_FI_WARN(FI_LOG_CQ, "CQ of %zu entries is full and cannot grow: completion lost",
                     cq->size);
        return;
    }
    cqe = &cq->ring[(cq->head + cq->count) & (cq->size - 1)];
    cqe->e.op_context = context;
    cqe->e.flags      = flags;
    cqe->e.len        = len;
    cqe->e.buf        = buf;
    cqe->e.data       = data;
    cqe->e.tag        = tag;
    cqe->sender       = sender;
    ++cq->count;
}

void axon_fi_cq_write_err(axon_fi_cq_t *cq, void *context, uint64_t flags, size_t len,
                          void *buf, uint64_t data, uint64_t tag, size_t olen, int err,
                          int prov_errno, uint64_t sender)
{
    axon_fi_cq_err_t *ce;

    if ((cq->err_count == cq->err_size) &&
        (axon_fi_ring_grow((void **)&cq->err, sizeof(*cq->err), &cq->err_size, &cq->err_head,
                           cq->err_count) != 0)) {
        AXON_FI_WARN(FI_LOG_CQ, "CQ error ring is full and cannot grow: error %d lost", err);
        return;
    }
    ce = &cq->err[(cq->err_head + cq->err_count) & (cq->err_size - 1)];
    memset(&ce->e, 0, sizeof(ce->e));
    ce->e.op_context = context;
    ce->e.flags      = flags;
    ce->e.len        = len;
    ce->e.buf        = buf;
    ce->e.data       = data;
    ce->e.tag        = tag;
    ce->e.olen       = olen;
    ce->e.err        = err;
    ce->e.prov_errno = prov_errno;
    ce->sender       = sender;
    ++cq->err_count;
}

static ssize_t axon_fi_cq_readfrom(struct fid_cq *cq_fid, void *buf, size_t count,
                                   fi_addr_t *src_addr)
{
    axon_fi_cq_t *cq = container_of(cq_fid, axon_fi_cq_t, cq_fid);
    axon_fi_domain_t *domain = cq->domain;
    uint8_t *out = buf;
    axon_fi_cqe_t *cqe;
    ssize_t n = 0;

    axon_fi_lock(domain);
    axon_fi_eps_progress(&cq->eps);
    if (cq->err_count > 0) {
        n = -FI_EAVAIL;
        goto out;
    }
    if (cq->count == 0) {
        n = -FI_EAGAIN;
        goto out;
    }
    while ((cq->count > 0) && ((size_t)n < count)) {
        cqe = &cq->ring[cq->head];
        memcpy(out, &cqe->e, cq->entry_size);
        out += cq->entry_size;
        if (src_addr != NULL) {
            src_addr[n] = (cq->av != NULL) ? axon_fi_av_sender_addr(cq->av, cqe->sender) :
                                             FI_ADDR_NOTAVAIL;
        }
        cq->head = (cq->head + 1) & (cq->size - 1);
        --cq->count;
        ++n;
    }
out:
    axon_fi_unlock(domain);
    return n;
}

static ssize_t axon_fi_cq_read(struct fid_cq *cq_fid, void *buf, size_t count)
{
    return axon_fi_cq_readfrom(cq_fid, buf, count, NULL);
}

static ssize_t axon_fi_cq_readerr(struct fid_cq *cq_fid, struct fi_cq_err_entry *buf,
                                  uint64_t flags)
{
    axon_fi_cq_t *cq = container_of(cq_fid, axon_fi_cq_t, cq_fid);
    axon_fi_domain_t *domain = cq->domain;
    size_t err_data_size = 0;
    axon_fi_cq_err_t *ce;
    ssize_t ret = 1;

    axon_fi_lock(domain);
    if (cq->err_count == 0) {
        ret = -FI_EAGAIN;
        goto out;
    }
    ce = &cq->err[cq->err_head];
    if (FI_VERSION_GE(domain->fabric->fabric_fid.api_version, FI_VERSION(1, 5))) {
        err_data_size = buf->err_data_size;  /* in: the user's buffer; we have none */
        *buf = ce->e;
        buf->err_data_size = 0;
        (void)err_data_size;
    } else {
        /* Before 1.5 the entry ends before err_data_size. */
        memcpy(buf, &ce->e, offsetof(struct fi_cq_err_entry, err_data_size));
    }
    if (!(flags & FI_PEEK)) {
        cq->err_head = (cq->err_head + 1) & (cq->err_size - 1);
        --cq->err_count;
    }
out:
    axon_fi_unlock(domain);
    return ret;
}

static ssize_t axon_fi_cq_sreadfrom(struct fid_cq *cq_fid, void *buf, size_t count,
                                    fi_addr_t *src_addr, const void *cond, int timeout)
{
    axon_fi_cq_t *cq = container_of(cq_fid, axon_fi_cq_t, cq_fid);
    struct timespec start;
    unsigned empty = 0;
    ssize_t ret;

    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        ret = axon_fi_cq_readfrom(cq_fid, buf, count, src_addr);
        if (ret != -FI_EAGAIN) {
            return ret;
        }
        if (__atomic_exchange_n(&cq->signaled, 0, __ATOMIC_ACQ_REL)) {
            return -FI_EAGAIN;   /* woken by fi_cq_signal */
        }
        if (axon_fi_expired(&start, timeout)) {
            return -FI_EAGAIN;
        }
        axon_fi_wait_idle(&empty);
    }
}

static ssize_t axon_fi_cq_sread(struct fid_cq *cq_fid, void *buf, size_t count, const void *cond,
                                int timeout)
{
    return axon_fi_cq_sreadfrom(cq_fid, buf, count, NULL, cond, timeout);
}

static int axon_fi_cq_signal(struct fid_cq *cq_fid)
{
    axon_fi_cq_t *cq = container_of(cq_fid, axon_fi_cq_t, cq_fid);

    __atomic_store_n(&cq->signaled, 1, __ATOMIC_RELEASE);
    return 0;
}

/* prov_errno of CQ and EQ error entries is an axon_status_t. */
const char *axon_fi_strerror(int prov_errno, char *buf, size_t len)
{
    const char *str = axon_status_string((axon_status_t)prov_errno);

    if ((buf != NULL) && (len > 0)) {
        strncpy(buf, str, len - 1);
        buf[len - 1] = '\0';
        return buf;
    }
    return str;
}

static const char *axon_fi_cq_strerror(struct fid_cq *cq, int prov_errno, const void *err_data,
                                       char *buf, size_t len)
{
    return axon_fi_strerror(prov_errno, buf, len);
}

static struct fi_ops_cq axon_fi_cq_ops = {
    .size      = sizeof(struct fi_ops_cq),
    .read      = axon_fi_cq_read,
    .readfrom  = axon_fi_cq_readfrom,
    .readerr   = axon_fi_cq_readerr,
    .sread     = axon_fi_cq_sread,
    .sreadfrom = axon_fi_cq_sreadfrom,
    .signal    = axon_fi_cq_signal,
    .strerror  = axon_fi_cq_strerror,
};

static int axon_fi_cq_close(struct fid *fid)
{
    axon_fi_cq_t *cq = container_of(fid, axon_fi_cq_t, cq_fid.fid);
    axon_fi_domain_t *domain = cq->domain;

    if (cq->refs > 0) {
        AXON_FI_WARN(FI_LOG_CQ, "CQ still bound to %d endpoints or poll sets", cq->refs);
        return -FI_EBUSY;
    }
    axon_fi_lock(domain);
    --domain->refs;
    axon_fi_unlock(domain);
    axon_fi_eps_free(&cq->eps);
    free(cq->ring);
    free(cq->err);
    free(cq);
    return 0;
}

static int axon_fi_cq_control(struct fid *fid, int command, void *arg)
{
    AXON_FI_WARN(FI_LOG_CQ, "CQ control command %d not supported (no wait object to hand out)",
                 command);
    return -FI_ENOSYS;
}

static struct fi_ops axon_fi_cq_fi_ops = {
    .size     = sizeof(struct fi_ops),
    .close    = axon_fi_cq_close,
    .bind     = axon_fi_no_bind,
    .control  = axon_fi_cq_control,
    .ops_open = axon_fi_no_ops_open,
};

static size_t axon_fi_pow2(size_t n)
{
    size_t p = 16;

    while (p < n) {
        p <<= 1;
    }
    return p;
}

int axon_fi_cq_open(struct fid_domain *domain_fid, struct fi_cq_attr *attr, struct fid_cq **cq_p,
                    void *context)
{
    axon_fi_domain_t *domain = container_of(domain_fid, axon_fi_domain_t, domain_fid);
    axon_fi_cq_t *cq;

    if (attr == NULL) {
        AXON_FI_WARN(FI_LOG_CQ, "fi_cq_open without attributes");
        return -FI_EINVAL;
    }
    if ((unsigned)attr->format > FI_CQ_FORMAT_TAGGED) {
        AXON_FI_WARN(FI_LOG_CQ, "CQ format %d not supported", (int)attr->format);
        return -FI_ENOSYS;
    }
    if (axon_fi_wait_obj_check(attr->wait_obj, "CQ") != 0) {
        return -FI_ENOSYS;
    }
    if (attr->flags & ~(uint64_t)FI_AFFINITY) {
        AXON_FI_WARN(FI_LOG_CQ, "CQ flags 0x%llx not supported", (unsigned long long)attr->flags);
        return -FI_ENOSYS;
    }
    cq = calloc(1, sizeof(*cq));
    if (cq == NULL) {
        return -FI_ENOMEM;
    }
    cq->format     = (attr->format == FI_CQ_FORMAT_UNSPEC) ? FI_CQ_FORMAT_TAGGED : attr->format;
    cq->entry_size = axon_fi_cq_entry_sizes[cq->format];
    cq->size       = axon_fi_pow2(attr->size ? attr->size : AXON_FI_CQ_SIZE);
    cq->err_size   = 16;
    cq->ring       = malloc(cq->size * sizeof(*cq->ring));
    cq->err        = malloc(cq->err_size * sizeof(*cq->err));
    if ((cq->ring == NULL) || (cq->err == NULL)) {
        free(cq->ring);
        free(cq->err);
        free(cq);
        return -FI_ENOMEM;
    }
    cq->domain             = domain;
    cq->cq_fid.fid.fclass  = FI_CLASS_CQ;
    cq->cq_fid.fid.context = context;
    cq->cq_fid.fid.ops     = &axon_fi_cq_fi_ops;
    cq->cq_fid.ops         = &axon_fi_cq_ops;
    attr->format = cq->format;
    axon_fi_lock(domain);
    ++domain->refs;
    axon_fi_unlock(domain);
    *cq_p = &cq->cq_fid;
    return 0;
}
