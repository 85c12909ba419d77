/*
 * shm's memory domain: the processes of one host. It reaches a peer's
 * memory two ways without the peer's help, and keeps both safe from stale
 * and forged keys:
 *
 * - Memory it allocates (AXON_MEM_MAP_ALLOCATE) is a memfd segment
 *   (shm_mem_seg.h) that peers map: direct loads and stores, atomics under
 *   the lock table in the segment's header. The caller's memory shared
 *   (AXON_MEM_MAP_SHARED, shm_mem_share.h) is one too, for its whole pages
 *   (and partial end pages of program data); the partial pages that stay go
 *   by cross-memory attach.
 * - Every registration is published in the domain's mapping table
 *   (shm_mem_table.h), which a peer checks before it reads or writes by
 *   cross-memory attach (process_vm_readv/writev, shm_ep.c): at unpack the
 *   key's slot must name exactly its memory, before every operation it must
 *   still hold its id.
 *
 * The key entry (32 bytes, little-endian; the owner's process and host are
 * in the key's header, axon_md_key_info_t):
 *    0 u8 version (1)  1 u8 flags (ALLOCATED or SHARED [HEAD, TAIL], SLOT)  2 u16 slot
 *    4 i32 memfd at the owner (ALLOCATED, SHARED, else -1)   8 i32 table fd (SLOT, else -1)
 *   12 u32 0          16 u64 table id (SLOT, else 0)  24 u64 id of the memory
 * A SHARED segment holds the range's whole pages, with HEAD its partial
 * first page and with TAIL its partial last one too: a peer computes which
 * from the range, the flags and the page size (the same on one host). A layout key
 * (AXON_MEM_MAP_LAYOUT) is a SLOT key whose slot also names the pieces,
 * kept in the owner's memory while mapped (shm_md.h's
 * axon_shm_layout_desc_t): a peer reads them once, at unpack, and moves
 * packed bytes straight into the pieces (shm_cma.c).
 * A peer attaches a segment or table once per domain, shared by every key
 * naming it (refcounted under the domain's lock).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#include "byte_order.h"
#include "shm.h"
#include "shm_md.h"
#include "shm_mem_share.h"
#include "sys.h"


static uint64_t axon_shm_md_new_id(void)
{
    uint64_t id;

    do {
        id = axon_sys_generate_uuid();
    } while (id == 0);
    return id;
}

/* ---------------------------------------------------------------- owner side */

/* Publish memh in the table (created on first use); without a slot, no CMA reaches it. */
static void axon_shm_md_publish(axon_shm_md_t *md, axon_shm_memh_t *memh)
{
    memh->slot = -1;
    pthread_mutex_lock(&md->lock);
    if (md->table_state == 0) {
        md->table_state = (axon_mem_table_create(&md->table) == AXON_OK) ? 1 : -1;
        if (md->table_state < 0) {
            axon_warn("shm: no mapping table: peers on this host reach mapped memory by "
                      "active messages only");
        }
    }
    if (md->table_state > 0) {
        memh->slot = axon_mem_table_publish(&md->table, memh->id, memh->address, memh->length,
                                            (uintptr_t)memh->layout);
    }
    pthread_mutex_unlock(&md->lock);
}

static axon_status_t axon_shm_md_mem_reg(axon_md_t *tl_md, void *addr, size_t length,
                                         unsigned flags, void **memh_p)
{
    axon_shm_memh_t *memh = calloc(1, sizeof(*memh));

    (void)flags;
    if (memh == NULL) {
        axon_error("shm: out of memory registering %p", addr);
        return AXON_ERR_NO_MEMORY;
    }
    memh->seg.fd  = -1;
    memh->id      = axon_shm_md_new_id();
    memh->address = (uintptr_t)addr;
    memh->length  = length;
    axon_shm_md_publish((axon_shm_md_t *)tl_md, memh);
    *memh_p = memh;
    return AXON_OK;
}

/*
 * A layout key (AXON_MEM_MAP_LAYOUT): the pieces, kept here while mapped,
 * are named by the key's slot, so peers put and get the packed bytes by
 * cross-memory attach straight into the pieces (shm_cma.c), without this
 * process. No slot (a full table): active messages, as for any mapping.
 */
static axon_status_t axon_shm_md_mem_reg_layout(axon_md_t *tl_md, const axon_md_layout_t *layout,
                                                unsigned flags, void **memh_p)
{
    axon_shm_memh_t *memh;
    size_t bytes = layout->num_entries * sizeof(layout->entries[0]);

    (void)flags;
    if ((layout->num_entries == 0) || (layout->num_entries > AXON_SHM_LAYOUT_MAX_ENTRIES)) {
        axon_debug("shm: a layout of %u entries (1 to %u): no key of shm's",
                   layout->num_entries, AXON_SHM_LAYOUT_MAX_ENTRIES);
        return AXON_ERR_UNSUPPORTED;
    }
    memh = calloc(1, sizeof(*memh));
    if (memh != NULL) {
        memh->layout = malloc(sizeof(*memh->layout) + bytes);
    }
    if ((memh == NULL) || (memh->layout == NULL)) {
        free(memh);
        axon_error("shm: out of memory registering a layout of %u entries", layout->num_entries);
        return AXON_ERR_NO_MEMORY;
    }
    memh->layout->base        = layout->base;
    memh->layout->size        = layout->size;
    memh->layout->repeat      = layout->repeat;
    memh->layout->num_entries = layout->num_entries;
    memcpy(memh->layout->entries, layout->entries, bytes);
    memh->seg.fd  = -1;
    memh->id      = axon_shm_md_new_id();
    memh->address = layout->base;
    memh->length  = layout->size;
    axon_shm_md_publish((axon_shm_md_t *)tl_md, memh);
    *memh_p = memh;
    return AXON_OK;
}

static axon_status_t axon_shm_md_mem_alloc(axon_md_t *tl_md, size_t length, void **address_p,
                                           struct axon_amo_lock_table **locks_p, void **memh_p)
{
    axon_shm_memh_t *memh = calloc(1, sizeof(*memh));
    axon_status_t status;

    if (memh == NULL) {
        axon_error("shm: out of memory allocating %zu bytes", length);
        return AXON_ERR_NO_MEMORY;
    }
    memh->id = axon_shm_md_new_id();
    status   = axon_mem_seg_alloc(length, memh->id, &memh->seg);
    if (status != AXON_OK) {
        free(memh);
        return status;
    }
    memh->address = (uintptr_t)memh->seg.address;
    memh->length  = length;
    axon_shm_md_publish((axon_shm_md_t *)tl_md, memh);
    *address_p = memh->seg.address;
    *locks_p   = memh->seg.locks;
    *memh_p    = memh;
    return AXON_OK;
}

static axon_status_t axon_shm_md_mem_share(axon_md_t *tl_md, void *addr, size_t length,
                                           struct axon_amo_lock_table **locks_p, void **memh_p)
{
    axon_shm_memh_t *memh = calloc(1, sizeof(*memh));
    axon_status_t status;

    if (memh == NULL) {
        axon_error("shm: out of memory sharing %p", addr);
        return AXON_ERR_NO_MEMORY;
    }
    memh->id = axon_shm_md_new_id();
    status   = axon_mem_share(addr, length, memh->id, &memh->seg);
    if (status != AXON_OK) {
        free(memh);
        return status;
    }
    memh->shared  = 1;
    memh->address = (uintptr_t)addr;
    memh->length  = length;
    axon_shm_md_publish((axon_shm_md_t *)tl_md, memh);   /* the partial pages: CMA */
    *locks_p = memh->seg.locks;
    *memh_p  = memh;
    return AXON_OK;
}

static void axon_shm_md_mem_dereg(axon_md_t *tl_md, void *memh_v)
{
    axon_shm_md_t *md = (axon_shm_md_t *)tl_md;
    axon_shm_memh_t *memh = memh_v;

    if (memh->slot >= 0) {
        pthread_mutex_lock(&md->lock);
        axon_mem_table_clear(&md->table, (uint32_t)memh->slot);   /* first: peers' CMA stops */
        pthread_mutex_unlock(&md->lock);
    }
    if (memh->shared) {
        axon_mem_unshare(&memh->seg);
    } else if (memh->seg.base != NULL) {
        axon_mem_seg_free(&memh->seg);
    }
    free(memh->layout);   /* after the slot is clear: peers read it only at unpack */
    free(memh);
}

static size_t axon_shm_md_rkey_pack(axon_md_t *tl_md, const void *memh_v, void *rkey_buf)
{
    axon_shm_md_t *md = (axon_shm_md_t *)tl_md;
    const axon_shm_memh_t *memh = memh_v;
    uint8_t *e = rkey_buf;
    int seg = (memh->seg.base != NULL), slot = (memh->slot >= 0);

    memset(e, 0, AXON_SHM_KEY_SIZE);
    e[0] = AXON_SHM_KEY_VERSION;
    e[1] = (uint8_t)((!seg ? 0 : memh->shared ? AXON_SHM_KEY_FLAG_SHARED :
                      AXON_SHM_KEY_FLAG_ALLOCATED) | (slot ? AXON_SHM_KEY_FLAG_SLOT : 0));
    if (seg && memh->shared) {
        e[1] |= (uint8_t)((((uintptr_t)memh->seg.address < memh->address) ?
                           AXON_SHM_KEY_FLAG_HEAD : 0) |
                          (((uintptr_t)memh->seg.address + memh->seg.length >
                            memh->address + memh->length) ? AXON_SHM_KEY_FLAG_TAIL : 0));
    }
    axon_le_put16(e + 2, (uint16_t)(slot ? memh->slot : 0));
    axon_le_put32(e + 4, (uint32_t)(seg ? memh->seg.fd : -1));
    axon_le_put32(e + 8, (uint32_t)(slot ? md->table.seg.fd : -1));
    axon_le_put64(e + 16, slot ? md->table.id : 0);
    axon_le_put64(e + 24, memh->id);
    return AXON_SHM_KEY_SIZE;
}

/* ---------------------------------------------------------------- peer side */

static axon_status_t axon_shm_key_parse(const uint8_t *e, size_t len, axon_shm_key_t *key)
{
    if ((len != AXON_SHM_KEY_SIZE) || (e[0] != AXON_SHM_KEY_VERSION)) {
        axon_error("shm: not a key of this version: %zu bytes, version %u", len,
                   (len > 0) ? e[0] : 0);
        return AXON_ERR_IO_FORMAT;
    }
    key->flags    = e[1];
    key->slot     = axon_le_get16(e + 2);
    key->memfd    = (int32_t)axon_le_get32(e + 4);
    key->table_fd = (int32_t)axon_le_get32(e + 8);
    key->table_id = axon_le_get64(e + 16);
    key->id       = axon_le_get64(e + 24);
    if ((key->flags & ~(AXON_SHM_KEY_FLAG_ALLOCATED | AXON_SHM_KEY_FLAG_SHARED |
                        AXON_SHM_KEY_FLAG_SLOT | AXON_SHM_KEY_FLAG_HEAD |
                        AXON_SHM_KEY_FLAG_TAIL)) ||
        ((key->flags & (AXON_SHM_KEY_FLAG_HEAD | AXON_SHM_KEY_FLAG_TAIL)) &&
         !(key->flags & AXON_SHM_KEY_FLAG_SHARED)) ||
        ((key->flags & AXON_SHM_KEY_FLAG_ALLOCATED) && (key->flags & AXON_SHM_KEY_FLAG_SHARED)) ||
        ((key->flags & (AXON_SHM_KEY_FLAG_ALLOCATED | AXON_SHM_KEY_FLAG_SHARED)) ?
         (key->memfd < 0) : (key->memfd != -1)) ||
        ((key->flags & AXON_SHM_KEY_FLAG_SLOT) ?
         ((key->table_id == 0) || (key->table_fd < 0) || (key->slot >= AXON_MEM_TABLE_SLOTS)) :
         ((key->table_id != 0) || (key->table_fd != -1) || (key->slot != 0))) ||
        (axon_le_get32(e + 12) != 0) || (key->id == 0)) {
        axon_error("shm: malformed key: flags 0x%x memfd %d table %016llx fd %d slot %u",
                   key->flags, key->memfd, (unsigned long long)key->table_id, key->table_fd,
                   key->slot);
        return AXON_ERR_IO_FORMAT;
    }
    return AXON_OK;
}

/* Attach the segment or table (table: length 0) a key names, or take one more reference. */
static axon_status_t axon_shm_attach_get(axon_shm_md_t *md, int is_table,
                                         const axon_proc_t *owner, int32_t fd, uint64_t id,
                                         uint64_t length, axon_shm_attach_t **att_p)
{
    axon_list_link_t *list = is_table ? &md->tables : &md->segs;
    axon_shm_attach_t *att;
    axon_status_t status;

    pthread_mutex_lock(&md->lock);
    axon_list_for_each(att, list, link) {
        if (axon_proc_equal(&att->owner, owner) && (att->fd == fd) && (att->id == id) &&
            (att->length == length)) {
            ++att->refcount;
            pthread_mutex_unlock(&md->lock);
            *att_p = att;
            return AXON_OK;
        }
    }
    att = calloc(1, sizeof(*att));
    if (att == NULL) {
        pthread_mutex_unlock(&md->lock);
        axon_error("axon_ep_rkey_unpack: out of memory");
        return AXON_ERR_NO_MEMORY;
    }
    status = is_table ? axon_mem_table_attach(owner, fd, id, &att->table) :
                        axon_mem_seg_attach(owner, fd, length, id, &att->seg);
    if (status != AXON_OK) {
        pthread_mutex_unlock(&md->lock);
        free(att);
        return status;
    }
    att->owner    = *owner;
    att->fd       = fd;
    att->id       = id;
    att->length   = length;
    att->refcount = 1;
    axon_list_add_tail(list, &att->link);
    pthread_mutex_unlock(&md->lock);
    *att_p = att;
    return AXON_OK;
}

/* Detach; the caller holds the domain's lock. */
static void axon_shm_attach_free(axon_shm_attach_t *att, int is_table)
{
    axon_list_del(&att->link);
    if (is_table) {
        axon_mem_table_detach(&att->table);
    } else {
        axon_mem_seg_detach(&att->seg);
    }
    free(att);
}

static void axon_shm_attach_put(axon_shm_md_t *md, axon_shm_attach_t *att, int is_table)
{
    pthread_mutex_lock(&md->lock);
    if (--att->refcount == 0) {
        axon_shm_attach_free(att, is_table);
    }
    pthread_mutex_unlock(&md->lock);
}

static void axon_shm_md_rkey_release(axon_md_t *tl_md, void *handle)
{
    axon_shm_md_t *md = (axon_shm_md_t *)tl_md;
    axon_shm_rkey_handle_t *h = handle;

    if (h->seg != NULL) {
        axon_shm_attach_put(md, h->seg, 0);
    }
    if (h->table != NULL) {
        axon_shm_attach_put(md, h->table, 1);
    }
    free(h->layout);
    free(h);
}

/*
 * Check the key against the owner's mapping table: its slot must name
 * exactly the key's memory now. The table stays attached in h.
 */
static axon_status_t axon_shm_md_check_slot(axon_shm_md_t *md, const axon_shm_key_t *key,
                                            const axon_md_key_info_t *info,
                                            axon_shm_rkey_handle_t *h,
                                            const axon_mem_table_slot_t **slot_p)
{
    axon_status_t status;

    status = axon_shm_attach_get(md, 1, info->owner, key->table_fd, key->table_id, 0,
                                 &h->table);
    if (status == AXON_ERR_REMOTE_ACCESS) {
        axon_error("axon_ep_rkey_unpack: mapping table %016llx (fd %d) of process %d is gone: "
                   "memory 0x%llx (%llu bytes) is not mapped", (unsigned long long)key->table_id,
                   key->table_fd, info->owner->pid, (unsigned long long)info->address,
                   (unsigned long long)info->length);
        return status;
    }
    if (status != AXON_OK) {
        axon_debug("mapping table of process %d not attached: %s", info->owner->pid,
                   axon_status_string(status));
        return AXON_ERR_UNSUPPORTED;
    }
    *slot_p = axon_mem_table_check(&h->table->table, key->slot, key->id, info->address,
                                   info->length);
    if (*slot_p == NULL) {
        axon_error("axon_ep_rkey_unpack: process %d has no mapping 0x%llx (%llu bytes) with "
                   "id %016llx in slot %u (unmapped, or not its key)", info->owner->pid,
                   (unsigned long long)info->address, (unsigned long long)info->length,
                   (unsigned long long)key->id, key->slot);
        return AXON_ERR_REMOTE_ACCESS;
    }
    return AXON_OK;
}

/* n bytes at the owner's address into buf: 0, or the errno of process_vm_readv. */
static int axon_shm_md_read_owner(const axon_md_key_info_t *info, uint64_t addr, void *buf,
                                  size_t n)
{
    struct iovec local = {buf, n}, remote = {(void *)(uintptr_t)addr, n};
    ssize_t ret;

    do {
        ret = process_vm_readv(info->owner->pid, &local, 1, &remote, 1, 0);
    } while ((ret < 0) && (errno == EINTR));
    return (ret == (ssize_t)n) ? 0 : (ret < 0) ? errno : EFAULT;
}

/*
 * A layout key's pieces, read from the owner (its slot names them) and
 * checked: they must make exactly the key's range, each repetition inside
 * the address space. The slot is checked again after the read: an owner
 * that unmapped meanwhile may have freed what was read.
 */
static axon_status_t axon_shm_md_read_layout(const axon_shm_md_t *md, const axon_shm_key_t *key,
                                             const axon_md_key_info_t *info,
                                             const axon_mem_table_slot_t *slot,
                                             axon_shm_layout_t **layout_p)
{
    uint64_t addr = __atomic_load_n(&slot->layout, __ATOMIC_RELAXED), block = 0, i;
    axon_shm_layout_desc_t desc;
    axon_md_layout_entry_t *entries;
    axon_shm_layout_t *layout;
    uint64_t *starts;
    int err;

    if ((err = axon_shm_md_read_owner(info, addr, &desc, sizeof(desc))) != 0) {
        axon_debug("layout key of process %d: its pieces cannot be read: %s", info->owner->pid,
                   strerror(err));
        return AXON_ERR_UNSUPPORTED;   /* active messages */
    }
    if ((desc.base != info->address) || (desc.size != info->length) || (desc.repeat == 0) ||
        (desc.num_entries == 0) || (desc.num_entries > AXON_SHM_LAYOUT_MAX_ENTRIES)) {
        axon_error("axon_ep_rkey_unpack: layout key of process %d: pieces of 0x%llx (%llu bytes, "
                   "%llu entries x %llu) for a key of 0x%llx (%llu bytes)", info->owner->pid,
                   (unsigned long long)desc.base, (unsigned long long)desc.size,
                   (unsigned long long)desc.num_entries, (unsigned long long)desc.repeat,
                   (unsigned long long)info->address, (unsigned long long)info->length);
        return AXON_ERR_REMOTE_ACCESS;
    }
    if (desc.size / desc.repeat / desc.num_entries < md->layout_cma_min) {
        axon_debug("layout key of process %d: pieces of %llu bytes on average (below "
                   "AXON_SHM_LAYOUT_CMA_MIN=%zu): messages, not single copy", info->owner->pid,
                   (unsigned long long)(desc.size / desc.repeat / desc.num_entries),
                   md->layout_cma_min);
        return AXON_ERR_UNSUPPORTED;
    }
    layout = malloc(sizeof(*layout) + desc.num_entries * sizeof(*entries) +
                    (desc.num_entries + 1) * sizeof(*starts));
    if (layout == NULL) {
        axon_error("axon_ep_rkey_unpack: out of memory for a layout of %llu entries",
                   (unsigned long long)desc.num_entries);
        return AXON_ERR_NO_MEMORY;
    }
    entries = (axon_md_layout_entry_t *)(layout + 1);
    starts  = (uint64_t *)(entries + desc.num_entries);
    err = axon_shm_md_read_owner(info, addr + sizeof(desc), entries,
                                 desc.num_entries * sizeof(*entries));
    for (i = 0; (err == 0) && (i < desc.num_entries); ++i) {
        starts[i] = block;
        block    += entries[i].length;
        /* every repetition of the entry inside the address space, no sum wrapping */
        if ((entries[i].length == 0) || (block < entries[i].length) ||
            ((desc.repeat > 1) &&
             (entries[i].stride > (UINT64_MAX - entries[i].addr - entries[i].length) /
                                  (desc.repeat - 1))) ||
            (entries[i].addr + entries[i].length < entries[i].addr)) {
            err = EINVAL;
        }
    }
    starts[desc.num_entries] = block;
    if ((err == 0) && ((block == 0) || (desc.size / desc.repeat != block) ||
                       (desc.size % desc.repeat != 0))) {
        err = EINVAL;
    }
    if ((err == 0) && !axon_mem_table_slot_live(slot, key->id)) {
        err = ESTALE;
    }
    if (err != 0) {
        axon_error("axon_ep_rkey_unpack: layout key of process %d (0x%llx, %llu bytes): its "
                   "pieces are %s", info->owner->pid, (unsigned long long)info->address,
                   (unsigned long long)info->length,
                   (err == ESTALE) ? "gone (unmapped)" : (err == EINVAL) ? "inconsistent" :
                                                                          "unreadable");
        free(layout);
        return AXON_ERR_REMOTE_ACCESS;
    }
    layout->base    = desc.base;
    layout->size    = desc.size;
    layout->repeat  = desc.repeat;
    layout->block   = block;
    layout->num     = (uint32_t)desc.num_entries;
    layout->entries = entries;
    layout->starts  = starts;
    *layout_p       = layout;
    return AXON_OK;
}

/* Cross-memory attach to the key's memory, checked against the owner's table
 * (tl_rkey: the slot to check before every operation, axon_shm_rkey_t). */
static axon_status_t axon_shm_md_unpack_cma(axon_shm_md_t *md, const axon_shm_key_t *key,
                                            const axon_md_key_info_t *info,
                                            axon_shm_rkey_handle_t *h, axon_md_rkey_t *rkey)
{
    const axon_mem_table_slot_t *slot;
    axon_shm_rkey_t tl;
    axon_status_t status;

    if (!md->cma || !(key->flags & AXON_SHM_KEY_FLAG_SLOT)) {
        axon_debug("key to 0x%llx of process %d: no cross-memory attach (%s)",
                   (unsigned long long)info->address, info->owner->pid,
                   md->cma ? "no mapping table slot" : "AXON_SHM_CMA=n");
        return AXON_ERR_UNSUPPORTED;
    }
    status = axon_shm_md_check_slot(md, key, info, h, &slot);
    if (status != AXON_OK) {
        return status;
    }
    tl.slot   = slot;
    tl.id     = key->id;
    tl.layout = NULL;
    if (__atomic_load_n(&slot->layout, __ATOMIC_RELAXED) != 0) {
        status = axon_shm_md_read_layout(md, key, info, slot, &h->layout);
        if (status != AXON_OK) {
            return status;
        }
        tl.layout = h->layout;
    }
    memcpy(rkey->tl_rkey, &tl, sizeof(tl));
    rkey->tl_rkey_len = sizeof(tl);
    return AXON_OK;
}

/*
 * The pages a SHARED key's segment holds, [*lo, *hi): the range's whole
 * ones, and its partial first (HEAD) and last (TAIL) pages when they moved.
 */
static axon_status_t axon_shm_md_shared_pages(const axon_shm_key_t *key,
                                              const axon_md_key_info_t *info, uint64_t *lo,
                                              uint64_t *hi)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), end = info->address + info->length;

    *lo = (key->flags & AXON_SHM_KEY_FLAG_HEAD) ? info->address / page * page :
                                                   (info->address + page - 1) / page * page;
    *hi = (key->flags & AXON_SHM_KEY_FLAG_TAIL) ? (end + page - 1) / page * page :
                                                   end / page * page;
    if ((end < info->address) || (end > UINT64_MAX - page) || (*lo >= *hi)) {
        axon_error("axon_ep_rkey_unpack: shared key to 0x%llx (%llu bytes, flags 0x%x): "
                   "no page in it", (unsigned long long)info->address,
                   (unsigned long long)info->length, key->flags);
        return AXON_ERR_IO_FORMAT;
    }
    return AXON_OK;
}

/*
 * The owner's segment mapped here: direct access to all of the range
 * (allocated, or shared pages covering it) or to the pages that moved
 * (shared), the partial ones that stayed by cross-memory attach where it
 * can, else by messages. UNSUPPORTED: the segment cannot be mapped here.
 */
static axon_status_t axon_shm_md_unpack_seg(axon_shm_md_t *md, const axon_shm_key_t *key,
                                            const axon_md_key_info_t *info,
                                            axon_shm_rkey_handle_t *h, axon_md_rkey_t *rkey)
{
    uint64_t lo = info->address, hi = info->address + info->length, win_lo, win_hi;
    const axon_mem_table_slot_t *slot;
    axon_status_t status;

    if ((key->flags & AXON_SHM_KEY_FLAG_SHARED) &&
        ((status = axon_shm_md_shared_pages(key, info, &lo, &hi)) != AXON_OK)) {
        return status;
    }
    status = axon_shm_attach_get(md, 0, info->owner, key->memfd, key->id, hi - lo, &h->seg);
    if (status != AXON_OK) {
        return status;
    }
    win_lo       = (lo > info->address) ? lo : info->address;
    win_hi       = (hi < info->address + info->length) ? hi : info->address + info->length;
    rkey->direct = (uint8_t *)h->seg->seg.address + (win_lo - lo);
    rkey->locks  = h->seg->seg.locks;
    if (win_hi - win_lo < info->length) {
        rkey->direct_offset = win_lo - info->address;
        rkey->direct_length = win_hi - win_lo;
        status = axon_shm_md_unpack_cma(md, key, info, h, rkey);
        return (status == AXON_ERR_UNSUPPORTED) ? AXON_OK : status;
    }
    /* An attachment cached for an earlier key outlives the owner's unmap: its table
     * tells whether the segment is still mapped. */
    if ((key->flags & AXON_SHM_KEY_FLAG_SLOT) &&
        ((status = axon_shm_md_check_slot(md, key, info, h, &slot)) == AXON_ERR_REMOTE_ACCESS)) {
        return status;
    }
    return AXON_OK;
}

/* The owner's segment mapped here, else its memory by cross-memory attach. */
static axon_status_t axon_shm_md_unpack_into(axon_shm_md_t *md, const axon_shm_key_t *key,
                                             const axon_md_key_info_t *info,
                                             axon_shm_rkey_handle_t *h, axon_md_rkey_t *rkey)
{
    axon_status_t status;

    if (key->flags & (AXON_SHM_KEY_FLAG_ALLOCATED | AXON_SHM_KEY_FLAG_SHARED)) {
        status = axon_shm_md_unpack_seg(md, key, info, h, rkey);
        if (status != AXON_ERR_UNSUPPORTED) {
            return status;
        }
        axon_debug("segment of process %d cannot be mapped here: trying cross-memory attach",
                   info->owner->pid);
    }
    return axon_shm_md_unpack_cma(md, key, info, h, rkey);
}

static axon_status_t axon_shm_md_rkey_unpack(axon_md_t *tl_md, const void *entry,
                                             size_t entry_len, const axon_md_key_info_t *info,
                                             axon_md_rkey_t *rkey)
{
    axon_shm_md_t *md = (axon_shm_md_t *)tl_md;
    axon_shm_rkey_handle_t *h;
    axon_shm_key_t key;
    axon_status_t status;

    status = axon_shm_key_parse(entry, entry_len, &key);
    if (status != AXON_OK) {
        return status;
    }
    if (info->host_id != axon_sys_host_id()) {
        return AXON_ERR_UNSUPPORTED;
    }
    h = calloc(1, sizeof(*h));
    if (h == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    status = axon_shm_md_unpack_into(md, &key, info, h, rkey);
    if (status != AXON_OK) {
        axon_shm_md_rkey_release(tl_md, h);
        return status;
    }
    rkey->handle = h;
    return AXON_OK;
}

/* ---------------------------------------------------------------- the domain */

static void axon_shm_md_close(axon_md_t *tl_md)
{
    axon_shm_md_t *md = (axon_shm_md_t *)tl_md;
    axon_list_link_t *lists[2] = {&md->segs, &md->tables};
    axon_shm_attach_t *att, *tmp;
    int i;

    pthread_mutex_lock(&md->lock);
    for (i = 0; i < 2; ++i) {
        axon_list_for_each_safe(att, tmp, lists[i], link) {
            axon_warn("axon_cleanup: %u key(s) to the memory of process %d were not destroyed",
                      att->refcount, att->owner.pid);
            axon_shm_attach_free(att, i);
        }
    }
    if (md->table_state > 0) {
        axon_mem_table_destroy(&md->table);
    }
    pthread_mutex_unlock(&md->lock);
    pthread_mutex_destroy(&md->lock);
    free(md);
}

static const axon_md_ops_t axon_shm_md_ops = {
    .md_close     = axon_shm_md_close,
    .rkey_max_len = AXON_SHM_KEY_SIZE,
    .mem_reg      = axon_shm_md_mem_reg,
    .mem_dereg    = axon_shm_md_mem_dereg,
    .rkey_pack    = axon_shm_md_rkey_pack,
    .mem_reg_layout = axon_shm_md_mem_reg_layout,
    .mem_alloc    = axon_shm_md_mem_alloc,
    .mem_share    = axon_shm_md_mem_share,
    .rkey_unpack  = axon_shm_md_rkey_unpack,
    .rkey_release = axon_shm_md_rkey_release,
};

axon_status_t axon_shm_md_open(const axon_resource_t *resource, const void *config,
                               axon_md_t **md_p)
{
    const axon_shm_config_t *c = config;
    axon_shm_md_t *md = calloc(1, sizeof(*md));

    if ((md == NULL) || (pthread_mutex_init(&md->lock, NULL) != 0)) {
        free(md);
        axon_error("shm: cannot create the memory domain");
        return AXON_ERR_NO_MEMORY;
    }
    md->super.ops = &axon_shm_md_ops;
    md->cma       = c->cma && (resource->cap_flags & AXON_CAP_GET);
    md->layout_cma_min = c->layout_cma_min;
    axon_list_init(&md->segs);
    axon_list_init(&md->tables);
    *md_p = &md->super;
    return AXON_OK;
}
