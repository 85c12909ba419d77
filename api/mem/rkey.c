/*
 * Remote keys: what a mapping's owner packs for its peers, and how a peer's
 * endpoint reaches the memory once it unpacks one (the path, api/rma/rma.h).
 *
 * Packed key, version 3. Every field little-endian, fixed width, no
 * padding; offsets in bytes:
 *
 *   header (96)
 *     0  u32  magic "AXRK" (0x4b525841)
 *     4  u16  version (3); a reader refuses any other
 *     6  u16  flags: bit 0 ALLOCATED (a memfd segment peers on the host may map),
 *                    bit 1 SLOT (published in the owner's mapping table)
 *     8  u32  size of the whole key, checksum included
 *    12  u16  number of owner workers (W)
 *    14  u16  number of transport entries (E)
 *    16  u64  owner's address of the range
 *    24  u64  length of the range (> 0)
 *    32  u64  token (names the mapping at its owner)
 *    40  u64  owner's host id (axon_sys_host_id)
 *    48  u64  owner process start time  } the owner's axon_proc_t
 *    56  u64  owner process ns id       }
 *    64  i32  owner pid                 }
 *    68  i32  memfd number at the owner (ALLOCATED), else -1
 *    72  u64  id of the owner's mapping table (SLOT), else 0
 *    80  i32  the table's memfd number at the owner (SLOT), else -1
 *    84  u32  the mapping's slot in it (SLOT, < AXON_MEM_TABLE_SLOTS), else 0
 *    88  u64  reserved, 0
 *   workers: W x u64, the uuids of the owner's workers when packed
 *   entries: E x { u16 reserved (0), u16 key length L (<= AXON_RNDV_RKEY_MAX),
 *                  char[16] transport name (NUL padded), L bytes of the rkey_pack
 *                  output of that transport's memory domain, valid for every worker }
 *   u64 checksum: FNV-1a (axon_sys_hash64, seed 0) of every byte before it
 *
 * The checksum makes a damaged key fail at unpack (AXON_ERR_IO_FORMAT)
 * rather than reach some other memory; tokens and the target's range check
 * do the rest, and for cross-memory attach (which the target never sees)
 * the owner's mapping table: the key's slot must hold its token, address
 * and length at unpack, and its token before every operation (api/rma/rma.h).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "log.h"
#include "mem.h"
#include "rma.h"
#include "sys.h"

#define AXON_RKEY_MAGIC        0x4b525841u  /* "AXRK" read little-endian */
#define AXON_RKEY_VERSION      3
#define AXON_RKEY_FLAG_ALLOCATED 0x1u
#define AXON_RKEY_FLAG_SLOT    0x2u
#define AXON_RKEY_FLAGS        (AXON_RKEY_FLAG_ALLOCATED | AXON_RKEY_FLAG_SLOT)
#define AXON_RKEY_HDR_SIZE     96
#define AXON_RKEY_ENTRY_HDR    20
#define AXON_RKEY_CSUM_SIZE    8
#define AXON_RKEY_MAX_WORKERS  0xffffu

/* The header, decoded. */
typedef struct axon_rkey_hdr {
    uint16_t    flags;
    uint16_t    num_workers;
    uint16_t    num_entries;
    uint64_t    address;
    uint64_t    length;
    uint64_t    token;
    uint64_t    host_id;
    axon_proc_t owner;
    int32_t     memfd;
    uint64_t    table_id;
    int32_t     table_fd;
    uint32_t    slot;
} axon_rkey_hdr_t;

/* A peer's allocated segment attached here, shared by every key naming it. */
typedef struct axon_rkey_seg {
    axon_list_link_t link;      /* in the context's segs */
    axon_context_h   context;
    axon_proc_t      owner;
    int32_t          fd;
    uint64_t         token;
    uint64_t         length;
    unsigned         refcount;
    axon_mem_seg_t   seg;
} axon_rkey_seg_t;

/* A peer's mapping table attached here, shared by every key naming it. */
typedef struct axon_rkey_table {
    axon_list_link_t link;      /* in the context's tables */
    axon_context_h   context;
    axon_proc_t      owner;
    int32_t          fd;
    unsigned         refcount;
    axon_mem_table_t table;     /* table.id names it */
} axon_rkey_table_t;

/* ---------------------------------------------------------------- little-endian fields */

static inline void axon_rkey_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void axon_rkey_put32(uint8_t *p, uint32_t v)
{
    axon_rkey_put16(p, (uint16_t)v);
    axon_rkey_put16(p + 2, (uint16_t)(v >> 16));
}

static inline void axon_rkey_put64(uint8_t *p, uint64_t v)
{
    axon_rkey_put32(p, (uint32_t)v);
    axon_rkey_put32(p + 4, (uint32_t)(v >> 32));
}

static inline uint16_t axon_rkey_get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t axon_rkey_get32(const uint8_t *p)
{
    return (uint32_t)axon_rkey_get16(p) | ((uint32_t)axon_rkey_get16(p + 2) << 16);
}

static inline uint64_t axon_rkey_get64(const uint8_t *p)
{
    return (uint64_t)axon_rkey_get32(p) | ((uint64_t)axon_rkey_get32(p + 4) << 32);
}

/* ---------------------------------------------------------------- who we are */

/* This process's identity; recomputed after a fork (the pid changes). */
static void axon_rkey_self(uint64_t *host_id_p, axon_proc_t *proc_p)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static pid_t           cached_pid;
    static uint64_t        host_id;
    static axon_proc_t     proc;

    pthread_mutex_lock(&lock);
    if (cached_pid != getpid()) {
        host_id = axon_sys_host_id();
        axon_proc_self(&proc);
        proc.pid   = (int32_t)getpid();
        cached_pid = getpid();
    }
    *host_id_p = host_id;
    *proc_p    = proc;
    pthread_mutex_unlock(&lock);
}

static int axon_rkey_proc_equal(const axon_proc_t *a, const axon_proc_t *b)
{
    return (a->pid == b->pid) && (a->start_time == b->start_time) && (a->ns_id == b->ns_id);
}

/* ---------------------------------------------------------------- pack */

axon_status_t axon_rkey_pack(axon_context_h context, axon_mem_h memh, void **rkey_buffer_p,
                             size_t *size_p)
{
    struct axon_mem_ctx *mctx;
    axon_mem_reg_t *reg;
    axon_worker_h worker;
    size_t size, num_workers = 0, num_entries = 0, offset;
    uint64_t host_id, table_id = 0;
    int32_t slot, table_fd = -1;
    axon_proc_t self;
    uint8_t *buf, *e;

    if ((context == NULL) || (memh == NULL) || (rkey_buffer_p == NULL) || (size_p == NULL)) {
        axon_error("axon_rkey_pack: NULL %s", !context ? "context" : !memh ? "memh" :
                                              !rkey_buffer_p ? "rkey_buffer_p" : "size_p");
        return AXON_ERR_INVALID_PARAM;
    }
    axon_rkey_self(&host_id, &self);
    mctx = context->mem;
    pthread_mutex_lock(&mctx->lock);
    if (!axon_mem_is_mapped(context, memh)) {
        pthread_mutex_unlock(&mctx->lock);
        axon_error("axon_rkey_pack: %p is not a mapping of context %p", (void *)memh,
                   (void *)context);
        return AXON_ERR_INVALID_PARAM;
    }

    size = AXON_RKEY_HDR_SIZE + AXON_RKEY_CSUM_SIZE;
    axon_list_for_each(worker, &mctx->workers, mem_link) {
        ++num_workers;
    }
    axon_list_for_each(reg, &memh->regs, link) {
        ++num_entries;
        size += AXON_RKEY_ENTRY_HDR + reg->md->ops->rkey_max_len;
    }
    if ((num_workers > AXON_RKEY_MAX_WORKERS) || (num_entries > AXON_RKEY_MAX_WORKERS)) {
        pthread_mutex_unlock(&mctx->lock);
        axon_error("axon_rkey_pack: %zu workers, %zu registrations: more than a key holds",
                   num_workers, num_entries);
        return AXON_ERR_UNSUPPORTED;
    }
    size += num_workers * 8;
    buf = calloc(1, size);
    if (buf == NULL) {
        pthread_mutex_unlock(&mctx->lock);
        axon_error("axon_rkey_pack: out of memory");
        return AXON_ERR_NO_MEMORY;
    }

    offset = AXON_RKEY_HDR_SIZE;
    axon_list_for_each(worker, &mctx->workers, mem_link) {
        axon_rkey_put64(buf + offset, worker->uuid);
        offset += 8;
    }
    axon_list_for_each(reg, &memh->regs, link) {
        const char *tl_name = reg->resource->tl_name;
        size_t len;

        e   = buf + offset;
        len = reg->md->ops->rkey_pack(reg->md, reg->tl_memh, e + AXON_RKEY_ENTRY_HDR);
        if ((len == 0) || (len > reg->md->ops->rkey_max_len)) {
            axon_warn("%s: packed a %zu-byte key (at most %zu): left out of the key", tl_name,
                      len, reg->md->ops->rkey_max_len);
            memset(e, 0, AXON_RKEY_ENTRY_HDR + reg->md->ops->rkey_max_len);
            --num_entries;
            continue;
        }
        axon_rkey_put16(e + 2, (uint16_t)len);
        /* NUL padded: the buffer is zeroed and the name shorter than the field. */
        memcpy(e + 4, tl_name, strnlen(tl_name, AXON_TL_NAME_MAX - 1));
        offset += AXON_RKEY_ENTRY_HDR + len;
    }
    slot = memh->slot;
    if (slot >= 0) {
        table_id = mctx->table.id;
        table_fd = mctx->table.seg.fd;
    }
    pthread_mutex_unlock(&mctx->lock);
    size = offset + AXON_RKEY_CSUM_SIZE;  /* transports may pack less than their maximum */

    axon_rkey_put32(buf + 0, AXON_RKEY_MAGIC);
    axon_rkey_put16(buf + 4, AXON_RKEY_VERSION);
    axon_rkey_put16(buf + 6, (memh->flags & AXON_MEM_MAP_ALLOCATE) ? AXON_RKEY_FLAG_ALLOCATED : 0);
    axon_rkey_put32(buf + 8, (uint32_t)size);
    axon_rkey_put16(buf + 12, (uint16_t)num_workers);
    axon_rkey_put16(buf + 14, (uint16_t)num_entries);
    axon_rkey_put64(buf + 16, (uintptr_t)memh->address);
    axon_rkey_put64(buf + 24, memh->length);
    axon_rkey_put64(buf + 32, memh->token);
    axon_rkey_put64(buf + 40, host_id);
    axon_rkey_put64(buf + 48, self.start_time);
    axon_rkey_put64(buf + 56, self.ns_id);
    axon_rkey_put32(buf + 64, (uint32_t)self.pid);
    axon_rkey_put32(buf + 68, (uint32_t)((memh->flags & AXON_MEM_MAP_ALLOCATE) ? memh->seg.fd :
                                                                                 -1));
    if (slot >= 0) {
        axon_rkey_put16(buf + 6, axon_rkey_get16(buf + 6) | AXON_RKEY_FLAG_SLOT);
        axon_rkey_put64(buf + 72, table_id);
        axon_rkey_put32(buf + 80, (uint32_t)table_fd);
        axon_rkey_put32(buf + 84, (uint32_t)slot);
    } else {
        axon_rkey_put64(buf + 72, 0);
        axon_rkey_put32(buf + 80, (uint32_t)-1);
        axon_rkey_put32(buf + 84, 0);
    }
    axon_rkey_put64(buf + 88, 0);
    axon_rkey_put64(buf + offset, axon_sys_hash64(buf, offset, 0));

    *rkey_buffer_p = buf;
    *size_p        = size;
    return AXON_OK;
}

void axon_rkey_buffer_release(void *rkey_buffer)
{
    free(rkey_buffer);
}

/* ---------------------------------------------------------------- parse */

#define axon_rkey_bad(_fmt, ...) \
    ({ axon_error("axon_ep_rkey_unpack: not a key: " _fmt, ## __VA_ARGS__); AXON_ERR_IO_FORMAT; })

/* Check every length and field of a packed key; decode its header. */
static axon_status_t axon_rkey_parse(const uint8_t *buf, size_t size, axon_rkey_hdr_t *hdr)
{
    size_t offset, end, i;
    uint32_t magic, stated;
    uint16_t version, reserved, len;
    const uint8_t *e;

    if (size < 8) {
        return axon_rkey_bad("%zu bytes", size);
    }
    magic   = axon_rkey_get32(buf);
    version = axon_rkey_get16(buf + 4);
    if (magic != AXON_RKEY_MAGIC) {
        return axon_rkey_bad("magic 0x%08x, expected 0x%08x", magic, AXON_RKEY_MAGIC);
    }
    if (version != AXON_RKEY_VERSION) {
        return axon_rkey_bad("version %u, this library reads version %u", version,
                             AXON_RKEY_VERSION);
    }
    if (size < AXON_RKEY_HDR_SIZE + AXON_RKEY_CSUM_SIZE) {
        return axon_rkey_bad("%zu bytes, shorter than a header", size);
    }
    stated = axon_rkey_get32(buf + 8);
    if (stated != size) {
        return axon_rkey_bad("it says %u bytes, %zu given", stated, size);
    }
    end = size - AXON_RKEY_CSUM_SIZE;
    if (axon_rkey_get64(buf + end) != axon_sys_hash64(buf, end, 0)) {
        return axon_rkey_bad("checksum mismatch (damaged)");
    }

    hdr->flags            = axon_rkey_get16(buf + 6);
    hdr->num_workers      = axon_rkey_get16(buf + 12);
    hdr->num_entries      = axon_rkey_get16(buf + 14);
    hdr->address          = axon_rkey_get64(buf + 16);
    hdr->length           = axon_rkey_get64(buf + 24);
    hdr->token            = axon_rkey_get64(buf + 32);
    hdr->host_id          = axon_rkey_get64(buf + 40);
    hdr->owner.start_time = axon_rkey_get64(buf + 48);
    hdr->owner.ns_id      = axon_rkey_get64(buf + 56);
    hdr->owner.pid        = (int32_t)axon_rkey_get32(buf + 64);
    hdr->owner.reserved   = 0;
    hdr->memfd            = (int32_t)axon_rkey_get32(buf + 68);
    hdr->table_id         = axon_rkey_get64(buf + 72);
    hdr->table_fd         = (int32_t)axon_rkey_get32(buf + 80);
    hdr->slot             = axon_rkey_get32(buf + 84);

    if (hdr->flags & ~AXON_RKEY_FLAGS) {
        return axon_rkey_bad("unknown flags 0x%x", hdr->flags);
    }
    if (axon_rkey_get64(buf + 88) != 0) {
        return axon_rkey_bad("reserved field is not 0");
    }
    if ((hdr->flags & AXON_RKEY_FLAG_SLOT) ?
        ((hdr->table_id == 0) || (hdr->table_fd < 0) || (hdr->slot >= AXON_MEM_TABLE_SLOTS)) :
        ((hdr->table_id != 0) || (hdr->table_fd != -1) || (hdr->slot != 0))) {
        return axon_rkey_bad("table %016llx fd %d slot %u with flags 0x%x",
                             (unsigned long long)hdr->table_id, hdr->table_fd, hdr->slot,
                             hdr->flags);
    }
    if ((hdr->length == 0) || (hdr->address + hdr->length < hdr->address)) {
        return axon_rkey_bad("range 0x%llx + %llu", (unsigned long long)hdr->address,
                             (unsigned long long)hdr->length);
    }
    if ((hdr->flags & AXON_RKEY_FLAG_ALLOCATED) ? (hdr->memfd < 0) : (hdr->memfd != -1)) {
        return axon_rkey_bad("memfd %d with flags 0x%x", hdr->memfd, hdr->flags);
    }
    if (hdr->owner.pid <= 0) {
        return axon_rkey_bad("owner pid %d", hdr->owner.pid);
    }

    offset = AXON_RKEY_HDR_SIZE + (size_t)hdr->num_workers * 8;
    if (offset > end) {
        return axon_rkey_bad("%u workers in %zu bytes", hdr->num_workers, size);
    }
    for (i = 0; i < hdr->num_entries; ++i) {
        if (end - offset < AXON_RKEY_ENTRY_HDR) {
            return axon_rkey_bad("entry %zu cut short", i);
        }
        e    = buf + offset;
        reserved = axon_rkey_get16(e);
        len      = axon_rkey_get16(e + 2);
        if (reserved != 0) {
            return axon_rkey_bad("entry %zu has reserved field 0x%x", i, reserved);
        }
        if ((len == 0) || (len > AXON_RNDV_RKEY_MAX) ||
            (end - offset - AXON_RKEY_ENTRY_HDR < len)) {
            return axon_rkey_bad("entry %zu holds a %u-byte key", i, len);
        }
        if ((e[4] == '\0') || (memchr(e + 4, '\0', AXON_TL_NAME_MAX) == NULL)) {
            return axon_rkey_bad("entry %zu has no transport name", i);
        }
        offset += AXON_RKEY_ENTRY_HDR + len;
    }
    if (offset != end) {
        return axon_rkey_bad("%zu bytes left after the last entry", end - offset);
    }
    return AXON_OK;
}

static int axon_rkey_has_worker(const uint8_t *buf, const axon_rkey_hdr_t *hdr, uint64_t uuid)
{
    unsigned i;

    for (i = 0; i < hdr->num_workers; ++i) {
        if (axon_rkey_get64(buf + AXON_RKEY_HDR_SIZE + 8 * i) == uuid) {
            return 1;
        }
    }
    return 0;
}

/*
 * The entry packed by transport tl_name's domain, or NULL; it serves the
 * owner's every worker (the caller checked the ep's peer is one).
 */
static const uint8_t *axon_rkey_find_entry(const uint8_t *buf, const axon_rkey_hdr_t *hdr,
                                           const char *tl_name)
{
    size_t offset = AXON_RKEY_HDR_SIZE + (size_t)hdr->num_workers * 8;
    const uint8_t *e;
    unsigned i;

    for (i = 0; i < hdr->num_entries; ++i) {
        e = buf + offset;
        if (strncmp((const char *)e + 4, tl_name, AXON_TL_NAME_MAX) == 0) {
            return e;
        }
        offset += AXON_RKEY_ENTRY_HDR + axon_rkey_get16(e + 2);
    }
    return NULL;
}

/* ---------------------------------------------------------------- shared segments */

/* Attach the owner's segment, or take one more reference to it. */
static axon_status_t axon_rkey_seg_get(axon_context_h ctx, const axon_rkey_hdr_t *hdr,
                                       axon_rkey_seg_t **seg_p)
{
    struct axon_mem_ctx *mctx = ctx->mem;
    axon_rkey_seg_t *rs;
    axon_status_t status;

    pthread_mutex_lock(&mctx->lock);
    axon_list_for_each(rs, &mctx->segs, link) {
        if (axon_rkey_proc_equal(&rs->owner, &hdr->owner) && (rs->fd == hdr->memfd) &&
            (rs->token == hdr->token) && (rs->length == hdr->length)) {
            ++rs->refcount;
            pthread_mutex_unlock(&mctx->lock);
            *seg_p = rs;
            return AXON_OK;
        }
    }
    rs = calloc(1, sizeof(*rs));
    if (rs == NULL) {
        pthread_mutex_unlock(&mctx->lock);
        axon_error("axon_ep_rkey_unpack: out of memory");
        return AXON_ERR_NO_MEMORY;
    }
    status = axon_mem_seg_attach(&hdr->owner, hdr->memfd, hdr->length, hdr->token, &rs->seg);
    if (status != AXON_OK) {
        pthread_mutex_unlock(&mctx->lock);
        free(rs);
        return status;
    }
    rs->context  = ctx;
    rs->owner    = hdr->owner;
    rs->fd       = hdr->memfd;
    rs->token    = hdr->token;
    rs->length   = hdr->length;
    rs->refcount = 1;
    axon_list_add_tail(&mctx->segs, &rs->link);
    pthread_mutex_unlock(&mctx->lock);
    *seg_p = rs;
    return AXON_OK;
}

static void axon_rkey_seg_put(axon_rkey_seg_t *rs)
{
    struct axon_mem_ctx *mctx = rs->context->mem;

    pthread_mutex_lock(&mctx->lock);
    if (--rs->refcount == 0) {
        axon_list_del(&rs->link);
        axon_mem_seg_detach(&rs->seg);
        free(rs);
    }
    pthread_mutex_unlock(&mctx->lock);
}

/* ---------------------------------------------------------------- peers' mapping tables */

/* Attach the owner's mapping table, or take one more reference to it. */
static axon_status_t axon_rkey_table_get(axon_context_h ctx, const axon_rkey_hdr_t *hdr,
                                         axon_rkey_table_t **table_p)
{
    struct axon_mem_ctx *mctx = ctx->mem;
    axon_rkey_table_t *rt;
    axon_status_t status;

    pthread_mutex_lock(&mctx->lock);
    axon_list_for_each(rt, &mctx->tables, link) {
        if (axon_rkey_proc_equal(&rt->owner, &hdr->owner) && (rt->fd == hdr->table_fd) &&
            (rt->table.id == hdr->table_id)) {
            ++rt->refcount;
            pthread_mutex_unlock(&mctx->lock);
            *table_p = rt;
            return AXON_OK;
        }
    }
    rt = calloc(1, sizeof(*rt));
    if (rt == NULL) {
        pthread_mutex_unlock(&mctx->lock);
        axon_error("axon_ep_rkey_unpack: out of memory");
        return AXON_ERR_NO_MEMORY;
    }
    status = axon_mem_table_attach(&hdr->owner, hdr->table_fd, hdr->table_id, &rt->table);
    if (status != AXON_OK) {
        pthread_mutex_unlock(&mctx->lock);
        free(rt);
        return status;
    }
    rt->context  = ctx;
    rt->owner    = hdr->owner;
    rt->fd       = hdr->table_fd;
    rt->refcount = 1;
    axon_list_add_tail(&mctx->tables, &rt->link);
    pthread_mutex_unlock(&mctx->lock);
    *table_p = rt;
    return AXON_OK;
}

static void axon_rkey_table_put(axon_rkey_table_t *rt)
{
    struct axon_mem_ctx *mctx = rt->context->mem;

    pthread_mutex_lock(&mctx->lock);
    if (--rt->refcount == 0) {
        axon_list_del(&rt->link);
        axon_mem_table_detach(&rt->table);
        free(rt);
    }
    pthread_mutex_unlock(&mctx->lock);
}

void axon_rkey_segs_cleanup(axon_context_h ctx)
{
    struct axon_mem_ctx *mctx = ctx->mem;
    axon_rkey_seg_t *rs, *tmp;
    axon_rkey_table_t *rt, *rtmp;

    pthread_mutex_lock(&mctx->lock);
    axon_list_for_each_safe(rs, tmp, &mctx->segs, link) {
        axon_warn("axon_cleanup: %u key(s) to the memory of process %d were not destroyed",
                  rs->refcount, rs->owner.pid);
        axon_list_del(&rs->link);
        axon_mem_seg_detach(&rs->seg);
        free(rs);
    }
    axon_list_for_each_safe(rt, rtmp, &mctx->tables, link) {
        axon_warn("axon_cleanup: %u key(s) to the memory of process %d were not destroyed",
                  rt->refcount, rt->owner.pid);
        axon_list_del(&rt->link);
        axon_mem_table_detach(&rt->table);
        free(rt);
    }
    pthread_mutex_unlock(&mctx->lock);
}

/* ---------------------------------------------------------------- unpack */

/* A lane that moves data to and from the peer's memory by itself. */
static int axon_rkey_lane_zcopy(const axon_lane_t *lane)
{
    return (lane->tl_ep != NULL) &&
           ((lane->resource->cap_flags & (AXON_CAP_GET | AXON_CAP_PUT)) ==
            (AXON_CAP_GET | AXON_CAP_PUT)) &&
           (lane->ops->ep_get_zcopy != NULL) && (lane->ops->ep_put_zcopy != NULL);
}

/*
 * Direct paths reach the owner's memory unseen by the owner: check the key
 * against the slot of the owner's mapping table it names, which must name
 * exactly the key's mapping now. 1: rkey holds the slot (and a reference
 * to the table); 0: no check possible (no slot, or the table cannot be
 * attached here): cross-memory attach must not be used; -1 with
 * *status = AXON_ERR_REMOTE_ACCESS (logged): the mapping is not there
 * (forged or stale key, the owner's context is gone).
 */
static int axon_rkey_claim_slot(axon_rkey_h rkey, const axon_rkey_hdr_t *hdr,
                                axon_status_t *status)
{
    axon_rkey_table_t *rt;

    if (!(hdr->flags & AXON_RKEY_FLAG_SLOT)) {
        axon_debug("key to 0x%llx of process %d has no mapping table slot",
                   (unsigned long long)hdr->address, hdr->owner.pid);
        return 0;
    }
    if (rkey->table_ref == NULL) {
        *status = axon_rkey_table_get(rkey->ep->worker->context, hdr, &rt);
        if (*status == AXON_ERR_REMOTE_ACCESS) {
            axon_error("axon_ep_rkey_unpack: mapping table %016llx (fd %d) of process %d is "
                       "gone: memory 0x%llx (%llu bytes) is not mapped",
                       (unsigned long long)hdr->table_id, hdr->table_fd, hdr->owner.pid,
                       (unsigned long long)hdr->address, (unsigned long long)hdr->length);
            return -1;
        }
        if (*status != AXON_OK) {
            axon_debug("mapping table of process %d not attached: %s", hdr->owner.pid,
                       axon_status_string(*status));
            *status = AXON_OK;
            return 0;
        }
        rkey->table_ref = rt;
    }
    rt               = rkey->table_ref;
    rkey->zcopy_slot = axon_mem_table_check(&rt->table, hdr->slot, hdr->token, hdr->address,
                                            hdr->length);
    if (rkey->zcopy_slot == NULL) {
        axon_error("axon_ep_rkey_unpack: process %d has no mapping 0x%llx (%llu bytes) with "
                   "token %016llx in slot %u (unmapped, or not its key)", hdr->owner.pid,
                   (unsigned long long)hdr->address, (unsigned long long)hdr->length,
                   (unsigned long long)hdr->token, hdr->slot);
        *status = AXON_ERR_REMOTE_ACCESS;
        return -1;
    }
    return 1;
}

/*
 * ZCOPY if a lane reaches the memory: shm by cross-memory attach at the
 * owner's address (checked against its mapping table), a key-needing lane
 * with the owner worker's entry for it. 1: ZCOPY; 0: not on this lane;
 * -1: *status says why the key is refused.
 */
static int axon_rkey_try_zcopy(axon_rkey_h rkey, const axon_lane_t *lane, const uint8_t *buf,
                               const axon_rkey_hdr_t *hdr, axon_status_t *status)
{
    const uint8_t *e;
    int ret;

    if (!axon_rkey_lane_zcopy(lane)) {
        return 0;
    }
    if (!(lane->resource->cap_flags & AXON_CAP_NEED_MKEY)) {
        if (lane->resource->dev_type != AXON_DEV_TYPE_SHM) {
            return 0;
        }
        ret = axon_rkey_claim_slot(rkey, hdr, status);
        if (ret <= 0) {
            return ret;
        }
        rkey->tl_rkey_len = 0;
    } else {
        e = axon_rkey_find_entry(buf, hdr, lane->resource->tl_name);
        if (e == NULL) {
            return 0;
        }
        rkey->tl_rkey_len = axon_rkey_get16(e + 2);
        memcpy(rkey->tl_rkey, e + AXON_RKEY_ENTRY_HDR, rkey->tl_rkey_len);
    }
    rkey->path       = AXON_RMA_PATH_ZCOPY;
    rkey->zcopy_lane = lane;
    return 1;
}

/* Decide how ep reaches the key's memory (api/rma/rma.h); fills rkey. */
static axon_status_t axon_rkey_choose_path(axon_rkey_h rkey, const uint8_t *buf,
                                           const axon_rkey_hdr_t *hdr)
{
    axon_ep_h ep = rkey->ep;
    const axon_lane_t *lanes[2] = {&ep->bulk_lane, &ep->am_lane};
    unsigned num_lanes = (ep->am_lane.tl_ep == ep->bulk_lane.tl_ep) ? 1 : 2;
    axon_rkey_seg_t *rs;
    axon_status_t status;
    uint64_t host_id;
    axon_proc_t self;
    unsigned i;
    int shm_lane = 0, ret;

    rkey->path = AXON_RMA_PATH_AM;
    if (ep->worker->context->opts.rma_path == AXON_RMA_PATH_MODE_AM) {
        return AXON_OK;
    }
    /* A key of some other process than the ep's peer: the target refuses it. */
    if (!axon_rkey_has_worker(buf, hdr, ep->peer_uuid)) {
        axon_debug("key of process %d's memory unpacked on an endpoint to another worker "
                   "(%016llx): active messages", hdr->owner.pid,
                   (unsigned long long)ep->peer_uuid);
        return AXON_OK;
    }

    axon_rkey_self(&host_id, &self);
    if ((hdr->host_id == host_id) && axon_rkey_proc_equal(&hdr->owner, &self)) {
        status = axon_mem_find_local(hdr->token, hdr->address, hdr->length, &rkey->local_base,
                                     &rkey->locks, &rkey->locks_ref);
        if (status != AXON_OK) {
            axon_error("axon_ep_rkey_unpack: memory 0x%llx (%llu bytes, token %016llx) of this "
                       "process is not mapped", (unsigned long long)hdr->address,
                       (unsigned long long)hdr->length, (unsigned long long)hdr->token);
            return status;
        }
        rkey->path = AXON_RMA_PATH_LOCAL;
        return AXON_OK;
    }

    for (i = 0; i < num_lanes; ++i) {
        shm_lane |= (lanes[i]->resource->dev_type == AXON_DEV_TYPE_SHM);
    }
    if ((hdr->host_id == host_id) && shm_lane && (hdr->flags & AXON_RKEY_FLAG_ALLOCATED)) {
        status = axon_rkey_seg_get(ep->worker->context, hdr, &rs);
        if (status == AXON_OK) {
            rkey->seg_ref = rs;
            /* An attachment cached for an earlier key outlives the owner's unmap:
             * its mapping table tells whether the segment is still mapped. */
            if (axon_rkey_claim_slot(rkey, hdr, &status) < 0) {
                return status;
            }
            rkey->zcopy_slot = NULL;   /* memcpy into a live attachment: no per-op check */
            rkey->path       = AXON_RMA_PATH_SHM;
            rkey->local_base = rs->seg.address;
            rkey->locks      = rs->seg.locks;
            return AXON_OK;
        }
        if (status != AXON_ERR_UNSUPPORTED) {
            return status;
        }
        axon_debug("segment of process %d cannot be mapped here: trying cross-memory attach",
                   hdr->owner.pid);
    }

    for (i = 0; i < num_lanes; ++i) {
        status = AXON_OK;
        ret    = axon_rkey_try_zcopy(rkey, lanes[i], buf, hdr, &status);
        if (ret != 0) {
            return status;
        }
    }
    return AXON_OK;
}

/*
 * Device atomic mode: atomics go through the amo lane's device when the key
 * holds that lane's entry for the endpoint's peer (any host, this process
 * too), else they are refused; put/get keep the path chosen above.
 */
static void axon_rkey_choose_amo(axon_rkey_h rkey, const uint8_t *buf, const axon_rkey_hdr_t *hdr)
{
    const axon_lane_t *lane = &rkey->ep->amo_lane;
    const uint8_t *e;
    uint16_t len;

    rkey->amo = AXON_RKEY_AMO_CPU;
    if (!rkey->ep->worker->context->amo_device) {
        return;
    }
    rkey->amo = AXON_RKEY_AMO_NONE;
    if (lane->tl_ep == NULL) {
        axon_debug("key to 0x%llx of process %d: the endpoint has no lane with device atomics",
                   (unsigned long long)hdr->address, hdr->owner.pid);
        return;
    }
    e = axon_rkey_find_entry(buf, hdr, lane->resource->tl_name);
    if ((e == NULL) || !axon_rkey_has_worker(buf, hdr, rkey->ep->peer_uuid)) {
        axon_debug("key to 0x%llx of process %d has no %s entry for worker %016llx: no device "
                   "atomics", (unsigned long long)hdr->address, hdr->owner.pid,
                   lane->resource->tl_name, (unsigned long long)rkey->ep->peer_uuid);
        return;
    }
    len = axon_rkey_get16(e + 2);
    if (len > sizeof(rkey->amo_tl_rkey)) {
        return;
    }
    memcpy(rkey->amo_tl_rkey, e + AXON_RKEY_ENTRY_HDR, len);
    rkey->amo_lane = lane;
    rkey->amo      = AXON_RKEY_AMO_DEVICE;
}

axon_status_t axon_ep_rkey_unpack(axon_ep_h ep, const void *rkey_buffer, size_t size,
                                  axon_rkey_h *rkey_p)
{
    axon_rkey_hdr_t hdr;
    axon_status_t status;
    axon_rkey_h rkey;

    if ((ep == NULL) || (rkey_buffer == NULL) || (rkey_p == NULL)) {
        axon_error("axon_ep_rkey_unpack: NULL %s", !ep ? "ep" : !rkey_buffer ? "rkey_buffer" :
                                                                                "rkey_p");
        return AXON_ERR_INVALID_PARAM;
    }
    if (!(ep->worker->context->features & (AXON_FEATURE_RMA | AXON_FEATURE_AMO))) {
        axon_error("axon_ep_rkey_unpack: context features 0x%x lack AXON_FEATURE_RMA and "
                   "AXON_FEATURE_AMO", ep->worker->context->features);
        return AXON_ERR_INVALID_PARAM;
    }
    if (ep->status != AXON_OK) {
        axon_debug("axon_ep_rkey_unpack: endpoint %p failed: %s", (void *)ep,
                   axon_status_string(ep->status));
        return ep->status;
    }
    status = axon_rkey_parse(rkey_buffer, size, &hdr);
    if (status != AXON_OK) {
        return status;
    }

    rkey = calloc(1, sizeof(*rkey));
    if (rkey == NULL) {
        axon_error("axon_ep_rkey_unpack: out of memory");
        return AXON_ERR_NO_MEMORY;
    }
    rkey->ep          = ep;
    rkey->remote_base = hdr.address;
    rkey->length      = hdr.length;
    rkey->token       = hdr.token;
    status = axon_rkey_choose_path(rkey, rkey_buffer, &hdr);
    if (status != AXON_OK) {
        axon_rkey_destroy(rkey);
        return status;
    }
    axon_rkey_choose_amo(rkey, rkey_buffer, &hdr);
    axon_debug("key to 0x%llx (%llu bytes) of process %d on endpoint %p: path %d",
               (unsigned long long)hdr.address, (unsigned long long)hdr.length, hdr.owner.pid,
               (void *)ep, rkey->path);
    *rkey_p = rkey;
    return AXON_OK;
}

void axon_rkey_destroy(axon_rkey_h rkey)
{
    if (rkey == NULL) {
        return;
    }
    if (rkey->seg_ref != NULL) {
        axon_rkey_seg_put(rkey->seg_ref);
    }
    if (rkey->table_ref != NULL) {
        axon_rkey_table_put(rkey->table_ref);
    }
    if (rkey->locks_ref != NULL) {
        axon_mem_locks_put(rkey->locks_ref);
    }
    free(rkey);
}
