/*
 * shm single-copy transfers with a peer's memory (cross-memory attach):
 * process_vm_readv for gets, process_vm_writev for puts, from and to lists
 * of pieces on both sides (the kernel walks both in one call), so a
 * non-contiguous message moves in one system call per IOV_MAX pieces.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/uio.h>
#include "shm.h"
#include "shm_md.h"
#include "log.h"

/*
 * Bytes one call is asked for from a lone piece: the kernel clamps a call
 * to MAX_RW_COUNT (2 GiB - 4 KiB), a chunk below that always goes whole
 * unless it faults.
 */
#define AXON_SHM_CMA_CHUNK ((size_t)1 << 30)

/* Direction of a single-copy transfer with the peer's memory */
typedef enum {
    AXON_SHM_CMA_GET = 0,  /* process_vm_readv: peer -> us */
    AXON_SHM_CMA_PUT = 1,  /* process_vm_writev: us -> peer */
} axon_shm_cma_dir_t;

static const char *const axon_shm_cma_op[] = {"get", "put"};
static const char *const axon_shm_cma_call[] = {"process_vm_readv", "process_vm_writev"};

/* Where a transfer is in one side's pieces: the piece, and its bytes already moved. */
typedef struct axon_shm_cma_pos {
    const struct iovec *iov;
    size_t              count;
    size_t              i;
    size_t              skip;
} axon_shm_cma_pos_t;

/* Past moved and zero-length pieces: at the next byte to move. */
static inline void axon_shm_cma_pos_settle(axon_shm_cma_pos_t *pos)
{
    while ((pos->i < pos->count) && (pos->skip == pos->iov[pos->i].iov_len)) {
        ++pos->i;
        pos->skip = 0;
    }
}

static void axon_shm_cma_pos_advance(axon_shm_cma_pos_t *pos, size_t n)
{
    size_t left;

    while (n > 0) {
        left       = pos->iov[pos->i].iov_len - pos->skip;
        left       = (left < n) ? left : n;
        pos->skip += left;
        n         -= left;
        axon_shm_cma_pos_settle(pos);
    }
}

/*
 * The pieces from pos as one call takes them: as they are (at most IOV_MAX)
 * when pos is at a piece's start, else the rest of that piece (after a short
 * transfer, which stops at a page it could not access), at most a chunk.
 */
static const struct iovec *axon_shm_cma_view(const axon_shm_cma_pos_t *pos, struct iovec *part,
                                             unsigned long *count_p)
{
    size_t left = pos->count - pos->i;

    if ((pos->skip == 0) && (left > 1)) {
        *count_p = (left < AXON_TL_IOV_MAX) ? left : AXON_TL_IOV_MAX;
        return pos->iov + pos->i;
    }
    part->iov_base = (char*)pos->iov[pos->i].iov_base + pos->skip;
    part->iov_len  = pos->iov[pos->i].iov_len - pos->skip;
    if (part->iov_len > AXON_SHM_CMA_CHUNK) {
        part->iov_len = AXON_SHM_CMA_CHUNK;
    }
    *count_p = 1;
    return part;
}

/* A transfer failed with errno err after done of length bytes; says what it means for ep. */
static __attribute__((noinline, cold))
axon_status_t axon_shm_cma_failed(axon_shm_ep_t *ep, axon_shm_cma_dir_t dir, int err,
                                  const void *buffer, size_t length, const void *remote,
                                  size_t done)
{
    axon_shm_iface_t *iface = (axon_shm_iface_t*)ep->super.iface;

    switch (err) {
    case EPERM:
    case ENOSYS:
        /* Policy (ptrace rules, Yama, no CMA in the kernel): no use asking again. */
        ep->flags &= ~AXON_SHM_EP_FLAG_CMA;
        axon_debug("shm: cannot access the memory of peer process %d: %s; gets and puts "
                   "with it fall back", ep->peer.pid, strerror(err));
        return AXON_ERR_UNSUPPORTED;
    case ESRCH:
        axon_shm_iface_fail_ep(iface, ep, AXON_ERR_CONNECTION_RESET,
                               (dir == AXON_SHM_CMA_GET) ? "no such process (process_vm_readv)"
                                                         : "no such process (process_vm_writev)");
        return AXON_ERR_CONNECTION_RESET;
    case EFAULT:
        axon_error("shm: %s of %zu bytes at %p of peer process %d, local buffer %p: bad "
                   "address (%zu bytes moved before)", axon_shm_cma_op[dir], length, remote,
                   ep->peer.pid, buffer, done);
        return AXON_ERR_INVALID_PARAM;
    case ENOMEM:
        axon_error("shm: %s of %zu bytes with peer process %d: %s", axon_shm_cma_op[dir], length,
                   ep->peer.pid, strerror(err));
        return AXON_ERR_NO_MEMORY;
    default:
        axon_error("shm: %s of %zu bytes at %p of peer process %d: %s (%s)",
                   axon_shm_cma_op[dir], length, remote, ep->peer.pid, strerror(err),
                   axon_shm_cma_call[dir]);
        return AXON_ERR_IO_ERROR;
    }
}

/*
 * May ep move data with its peer's memory (and is the peer's memory behind
 * rkey still there)? *layout_p: the key's layout, NULL for a plain key.
 */
static axon_status_t axon_shm_cma_check(const axon_shm_ep_t *ep, const void *rkey,
                                        uint64_t remote_addr,
                                        const axon_shm_layout_t **layout_p)
{
    axon_shm_rkey_t key;

    *layout_p = NULL;
    if (ep->status != AXON_OK) {
        return ep->status;
    }
    if (!(ep->flags & AXON_SHM_EP_FLAG_CMA)) {
        return AXON_ERR_UNSUPPORTED;
    }
    if (rkey != NULL) {
        memcpy(&key, rkey, sizeof(key));
        if (__builtin_expect(!axon_mem_table_slot_live(key.slot, key.id), 0)) {
            axon_error("shm: memory 0x%llx of process %d (id %016llx) was unmapped by its owner",
                       (unsigned long long)remote_addr, ep->peer.pid,
                       (unsigned long long)key.id);
            return AXON_ERR_REMOTE_ACCESS;
        }
        *layout_p = key.layout;
    }
    return AXON_OK;
}

/*
 * Move length bytes between the local pieces and the peer's pieces from
 * where lpos and rpos are, both in order (each holds length more bytes at
 * least). A call moves what both views hold, or stops short at a page it
 * cannot access; the next call then says why.
 */
static axon_status_t axon_shm_cma_move_pos(axon_shm_ep_t *ep, axon_shm_cma_dir_t dir,
                                           axon_shm_cma_pos_t *lpos_p, axon_shm_cma_pos_t *rpos_p,
                                           size_t length)
{
    axon_shm_cma_pos_t lpos = *lpos_p, rpos = *rpos_p;
    const struct iovec *lview, *rview;
    struct iovec  lpart, rpart;
    unsigned long lcount, rcount;
    size_t        done = 0;
    ssize_t       ret;

    while (done < length) {
        axon_shm_cma_pos_settle(&lpos);
        axon_shm_cma_pos_settle(&rpos);
        lview = axon_shm_cma_view(&lpos, &lpart, &lcount);
        rview = axon_shm_cma_view(&rpos, &rpart, &rcount);
        ret = (dir == AXON_SHM_CMA_GET) ?
              process_vm_readv(ep->peer.pid, lview, lcount, rview, rcount, 0) :
              process_vm_writev(ep->peer.pid, lview, lcount, rview, rcount, 0);
        if (__builtin_expect(ret > 0, 1)) {
            done += (size_t)ret;
            axon_shm_cma_pos_advance(&lpos, (size_t)ret);
            axon_shm_cma_pos_advance(&rpos, (size_t)ret);
        } else if ((ret < 0) && (errno == EINTR)) {
            continue;
        } else {
            /* 0 bytes without an error would loop forever: call it a fault. */
            return axon_shm_cma_failed(ep, dir, (ret < 0) ? errno : EFAULT, lview->iov_base,
                                       length, rview->iov_base, done);
        }
    }
    *lpos_p = lpos;
    *rpos_p = rpos;
    return AXON_OK;
}

static axon_status_t axon_shm_cma_move(axon_shm_ep_t *ep, axon_shm_cma_dir_t dir,
                                       const struct iovec *local, size_t local_count,
                                       const struct iovec *remote, size_t remote_count,
                                       size_t length)
{
    axon_shm_cma_pos_t lpos = {local, local_count, 0, 0}, rpos = {remote, remote_count, 0, 0};

    return axon_shm_cma_move_pos(ep, dir, &lpos, &rpos, length);
}

/* The peer's pieces of a layout key found a batch at a time, on the stack. */
#define AXON_SHM_CMA_LAYOUT_BATCH 64

/*
 * The local pieces and a layout key's packed bytes [remote_addr, + their
 * total): the peer's pieces that hold them (shm_md.h's axon_shm_layout_t),
 * found from the entry the first byte falls in, moved a batch at a time.
 */
static axon_status_t axon_shm_cma_layout(axon_shm_ep_t *ep, axon_shm_cma_dir_t dir,
                                         const struct iovec *iov, size_t iov_count,
                                         uint64_t remote_addr, const axon_shm_layout_t *layout,
                                         size_t length)
{
    struct iovec batch[AXON_SHM_CMA_LAYOUT_BATCH];
    axon_shm_cma_pos_t lpos = {iov, iov_count, 0, 0}, rpos;
    uint64_t off = remote_addr - layout->base, rep, inner, take;
    uint32_t lo = 0, hi = layout->num, mid, i;
    const axon_md_layout_entry_t *e;
    axon_status_t status;
    size_t n, bytes;

    if ((remote_addr < layout->base) || (off > layout->size) || (length > layout->size - off)) {
        axon_error("shm: %s of %zu bytes at 0x%llx: outside the layout key's 0x%llx (%llu bytes)",
                   axon_shm_cma_op[dir], length, (unsigned long long)remote_addr,
                   (unsigned long long)layout->base, (unsigned long long)layout->size);
        return AXON_ERR_INVALID_PARAM;
    }
    rep   = off / layout->block;
    inner = off % layout->block;
    while (hi - lo > 1) {   /* the last entry starting at or before inner */
        mid = lo + (hi - lo) / 2;
        if (layout->starts[mid] <= inner) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    i      = lo;
    inner -= layout->starts[i];
    while (length > 0) {
        for (n = 0, bytes = 0; (n < AXON_SHM_CMA_LAYOUT_BATCH) && (bytes < length); ++n) {
            e    = &layout->entries[i];
            take = e->length - inner;
            take = (take < length - bytes) ? take : length - bytes;
            batch[n].iov_base = (void *)(uintptr_t)(e->addr + rep * e->stride + inner);
            batch[n].iov_len  = take;
            bytes += take;
            inner += take;
            if (inner == e->length) {
                inner = 0;
                if (++i == layout->num) {
                    i = 0;
                    ++rep;
                }
            }
        }
        rpos.iov   = batch;
        rpos.count = n;
        rpos.i     = 0;
        rpos.skip  = 0;
        status = axon_shm_cma_move_pos(ep, dir, &lpos, &rpos, bytes);
        if (status != AXON_OK) {
            return status;
        }
        length -= bytes;
    }
    return AXON_OK;
}

static size_t axon_shm_cma_total(const struct iovec *iov, size_t count)
{
    size_t total = 0, i;

    for (i = 0; i < count; ++i) {
        total += iov[i].iov_len;
    }
    return total;
}

/*
 * The local pieces and the peer's [remote_addr, + their total). rkey: NULL
 * for a buffer the peer lends for the transfer (rendezvous), else a key our
 * domain unpacked (shm_md.c): the peer's mapping table must still hold the
 * memory's id, or the memory may be someone else's by now.
 */
static axon_status_t axon_shm_cma_range(axon_tl_ep_t *tl_ep, axon_shm_cma_dir_t dir,
                                        const struct iovec *iov, size_t iov_count,
                                        uint64_t remote_addr, const void *rkey)
{
    axon_shm_ep_t *ep = (axon_shm_ep_t*)tl_ep;
    const axon_shm_layout_t *layout;
    struct iovec   remote;
    axon_status_t  status;

    status = axon_shm_cma_check(ep, rkey, remote_addr, &layout);
    if (__builtin_expect(status != AXON_OK, 0)) {
        return status;
    }
    remote.iov_base = (void*)(uintptr_t)remote_addr;
    remote.iov_len  = axon_shm_cma_total(iov, iov_count);
    if (layout != NULL) {
        return axon_shm_cma_layout(ep, dir, iov, iov_count, remote_addr, layout, remote.iov_len);
    }
    return axon_shm_cma_move(ep, dir, iov, iov_count, &remote, 1, remote.iov_len);
}

/* The local pieces and the peer's pieces (lent for a rendezvous: no key). */
static axon_status_t axon_shm_cma_pieces(axon_tl_ep_t *tl_ep, axon_shm_cma_dir_t dir,
                                         const struct iovec *iov, size_t iov_count,
                                         const struct iovec *remote, size_t remote_count)
{
    axon_shm_ep_t *ep = (axon_shm_ep_t*)tl_ep;
    const axon_shm_layout_t *layout;   /* none: lent pieces have no key */
    size_t         length, remote_length;
    axon_status_t  status;

    status = axon_shm_cma_check(ep, NULL, 0, &layout);
    if (__builtin_expect(status != AXON_OK, 0)) {
        return status;
    }
    length        = axon_shm_cma_total(iov, iov_count);
    remote_length = axon_shm_cma_total(remote, remote_count);
    if (length != remote_length) {
        axon_error("shm: %s of %zu local bytes from %zu remote bytes: the pieces must match",
                   axon_shm_cma_op[dir], length, remote_length);
        return AXON_ERR_INVALID_PARAM;
    }
    return axon_shm_cma_move(ep, dir, iov, iov_count, remote, remote_count, length);
}

axon_status_t axon_shm_ep_get_zcopy(axon_tl_ep_t *tl_ep, void *buffer, size_t length,
                                    uint64_t remote_addr, const void *rkey,
                                    axon_tl_completion_t *comp)
{
    struct iovec local = {buffer, length};

    return axon_shm_cma_range(tl_ep, AXON_SHM_CMA_GET, &local, 1, remote_addr, rkey);
}

axon_status_t axon_shm_ep_get_zcopy_iov(axon_tl_ep_t *tl_ep, const struct iovec *iov,
                                        size_t iov_count, uint64_t remote_addr,
                                        const void *rkey, axon_tl_completion_t *comp)
{
    return axon_shm_cma_range(tl_ep, AXON_SHM_CMA_GET, iov, iov_count, remote_addr, rkey);
}

axon_status_t axon_shm_ep_put_zcopy(axon_tl_ep_t *tl_ep, const void *buffer, size_t length,
                                    uint64_t remote_addr, const void *rkey,
                                    axon_tl_completion_t *comp)
{
    /* process_vm_writev only reads the local buffer. */
    struct iovec local = {(void*)(uintptr_t)buffer, length};

    return axon_shm_cma_range(tl_ep, AXON_SHM_CMA_PUT, &local, 1, remote_addr, rkey);
}

axon_status_t axon_shm_ep_put_zcopy_iov(axon_tl_ep_t *tl_ep, const struct iovec *iov,
                                        size_t iov_count, uint64_t remote_addr,
                                        const void *rkey, axon_tl_completion_t *comp)
{
    return axon_shm_cma_range(tl_ep, AXON_SHM_CMA_PUT, iov, iov_count, remote_addr, rkey);
}

axon_status_t axon_shm_ep_get_zcopy_riov(axon_tl_ep_t *tl_ep, const struct iovec *iov,
                                         size_t iov_count, const struct iovec *remote,
                                         size_t remote_count, axon_tl_completion_t *comp)
{
    return axon_shm_cma_pieces(tl_ep, AXON_SHM_CMA_GET, iov, iov_count, remote, remote_count);
}

axon_status_t axon_shm_ep_put_zcopy_riov(axon_tl_ep_t *tl_ep, const struct iovec *iov,
                                         size_t iov_count, const struct iovec *remote,
                                         size_t remote_count, axon_tl_completion_t *comp)
{
    return axon_shm_cma_pieces(tl_ep, AXON_SHM_CMA_PUT, iov, iov_count, remote, remote_count);
}
