/*
 * Memory mapped for remote access: the caller's range, or memory a domain
 * allocates so that processes on this host can map it (shm's memfd
 * segments; our own anonymous memory when no domain can). Each mapping
 * gets a random token that keys and remote-access messages name it by, a
 * lock-stripe table for the atomics executed on it (amo_cpu.h), and a
 * registration in every memory domain of the context (component.h), so a
 * peer reaches it through any worker's iface on that domain.
 *
 * Unmapping deregisters before the memory goes, so later accesses through
 * old keys fail on every path (AM: the token is gone here; rc: the
 * registration; shm: the slot in its mapping table, and an attached
 * segment stays mapped at the peer until its keys are destroyed).
 * Unmapping while a peer's access is under way is the user's error, as in
 * UCX and OpenSHMEM.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "log.h"
#include "mem.h"
#include "rma.h"
#include "sys.h"

const char *const axon_rma_path_mode_names[] = {"auto", "am", NULL};
const char *const axon_atomic_mode_names[]   = {"cpu", "device", "guess", NULL};

void axon_mem_atomic_mode_init(axon_context_h ctx)
{
    unsigned i, device = 0;

    for (i = 0; i < ctx->num_rscs; ++i) {
        device += !!(ctx->rscs[i].resource->cap_flags & AXON_CAP_AMO_DEVICE);
    }
    switch (ctx->opts.atomic_mode) {
    case AXON_ATOMIC_MODE_DEVICE:
        ctx->amo_device = 1;
        if (device == 0) {
            axon_warn("AXON_ATOMIC_MODE=device, but no transport admitted has device atomics: "
                      "every atomic will fail");
        }
        break;
    case AXON_ATOMIC_MODE_GUESS:
        /* only when nothing could reach a peer without the device (simple, predictable) */
        ctx->amo_device = (device > 0) && (device == ctx->num_rscs);
        break;
    default:
        ctx->amo_device = 0;
        break;
    }
    axon_debug("atomics executed by the %s", ctx->amo_device ? "device" : "CPU");
}

/* Every mapping of this process by token, for keys unpacked in the same
 * process (possibly another context): LOCAL needs the mapping's lock table. */
static pthread_mutex_t  axon_mem_proc_lock = PTHREAD_MUTEX_INITIALIZER;
static axon_list_link_t axon_mem_proc_hash[AXON_MEM_HASH_BUCKETS];
static int              axon_mem_proc_hash_ready;

/* axon_mem_own_locks_t (mem.h): a LOCAL key may outlive the mapping, so it
 * goes with its last user. */

static inline unsigned axon_mem_bucket(uint64_t token)
{
    return (unsigned)(token ^ (token >> 32)) % AXON_MEM_HASH_BUCKETS;
}

/* Caller holds axon_mem_proc_lock. */
static void axon_mem_proc_hash_init(void)
{
    unsigned i;

    if (!axon_mem_proc_hash_ready) {
        for (i = 0; i < AXON_MEM_HASH_BUCKETS; ++i) {
            axon_list_init(&axon_mem_proc_hash[i]);
        }
        axon_mem_proc_hash_ready = 1;
    }
}

axon_status_t axon_mem_context_init(axon_context_h ctx)
{
    struct axon_mem_ctx *mctx;
    unsigned i;

    mctx = calloc(1, sizeof(*mctx));
    if (mctx == NULL) {
        axon_error("axon_init: out of memory");
        return AXON_ERR_NO_MEMORY;
    }
    if (pthread_mutex_init(&mctx->lock, NULL) != 0) {
        axon_error("axon_init: cannot create the memory mapping lock");
        free(mctx);
        return AXON_ERR_NO_MEMORY;
    }
    axon_list_init(&mctx->maps);
    axon_list_init(&mctx->workers);
    for (i = 0; i < AXON_MEM_HASH_BUCKETS; ++i) {
        axon_list_init(&mctx->hash[i]);
    }
    ctx->mem = mctx;
    return AXON_OK;
}

/* ---------------------------------------------------------------- registrations */

/* Drop mem's registrations, the allocating domain's last (it frees the memory). */
static void axon_mem_dereg_all(struct axon_mem *mem)
{
    axon_mem_reg_t *reg, *tmp;

    axon_list_for_each_safe(reg, tmp, &mem->regs, link) {
        if (reg != mem->alloc_reg) {
            reg->md->ops->mem_dereg(reg->md, reg->tl_memh);
            axon_list_del(&reg->link);
            free(reg);
        }
    }
    if (mem->alloc_reg != NULL) {
        mem->alloc_reg->md->ops->mem_dereg(mem->alloc_reg->md, mem->alloc_reg->tl_memh);
        axon_list_del(&mem->alloc_reg->link);
        free(mem->alloc_reg);
        mem->alloc_reg = NULL;
    }
}

/*
 * The first domain that can hold mem's memory: allocate it (shm: a segment
 * peers on the host map) or, with share, move the caller's pages into such
 * memory. Its registration comes with it, and the lock table peers' atomics
 * use. AXON_ERR_UNSUPPORTED: none can (or the one that could declined).
 */
static axon_status_t axon_mem_hold(axon_context_h ctx, struct axon_mem *mem, int share)
{
    struct axon_amo_lock_table *locks;
    axon_mem_reg_t *reg;
    axon_status_t status;
    unsigned i;

    for (i = 0; i < ctx->num_rscs; ++i) {
        axon_md_t *md = ctx->rscs[i].md;

        if ((md == NULL) || ((share ? (void *)md->ops->mem_share :
                                      (void *)md->ops->mem_alloc) == NULL)) {
            continue;
        }
        reg = calloc(1, sizeof(*reg));
        if (reg == NULL) {
            return AXON_ERR_NO_MEMORY;
        }
        status = share ? md->ops->mem_share(md, mem->address, mem->length, &locks,
                                            &reg->tl_memh) :
                         md->ops->mem_alloc(md, mem->length, (void **)&mem->address, &locks,
                                            &reg->tl_memh);
        if (status != AXON_OK) {
            free(reg);
            return status;
        }
        reg->resource  = ctx->rscs[i].resource;
        reg->md        = md;
        mem->alloc_reg = reg;
        mem->locks     = locks;
        axon_list_add_tail(&mem->regs, &reg->link);
        return AXON_OK;
    }
    return AXON_ERR_UNSUPPORTED;
}

/*
 * AXON_MEM_MAP_ALLOCATE: a domain's memory peers can map (shm); with none
 * (shm not admitted), anonymous memory of our own, which peers reach as
 * they reach the caller's.
 */
static axon_status_t axon_mem_alloc(axon_context_h ctx, struct axon_mem *mem)
{
    axon_status_t status = axon_mem_hold(ctx, mem, 0);

    if (status != AXON_ERR_UNSUPPORTED) {
        return status;
    }
    mem->address = mmap(NULL, mem->length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                        -1, 0);
    if (mem->address == MAP_FAILED) {
        mem->address = NULL;
        axon_error("axon_mem_map: cannot allocate %zu bytes: %s", mem->length, strerror(errno));
        return AXON_ERR_NO_MEMORY;
    }
    mem->anon_length = mem->length;
    return AXON_OK;
}

/*
 * AXON_MEM_MAP_SHARED: where it cannot be done, plainly. Not beside a
 * hardware RDMA device, whose registrations pin the pages that would move
 * away (another library's registrations of the same memory too).
 */
static axon_status_t axon_mem_share(axon_context_h ctx, struct axon_mem *mem)
{
    const axon_resource_t *r;
    axon_status_t status;
    unsigned i;

    for (i = 0; i < ctx->num_rscs; ++i) {
        r = ctx->rscs[i].resource;
        if ((r->cap_flags & AXON_CAP_NEED_MKEY) && !(r->cap_flags & AXON_CAP_EMULATED)) {
            axon_debug("axon_mem_map: %p not shared: %s/%s pins registered pages",
                       (void *)mem->address, r->tl_name, r->dev_name);
            return AXON_OK;
        }
    }
    status = axon_mem_hold(ctx, mem, 1);
    return (status == AXON_ERR_UNSUPPORTED) ? AXON_OK : status;
}

static axon_status_t axon_mem_reg_one(axon_md_t *md, struct axon_mem *mem,
                                      const axon_md_layout_t *md_layout, void **memh_p)
{
    if (md_layout == NULL) {
        return md->ops->mem_reg(md, mem->address, mem->length, 0, memh_p);
    }
    if (md->ops->mem_reg_layout == NULL) {
        return AXON_ERR_UNSUPPORTED;
    }
    return md->ops->mem_reg_layout(md, md_layout, 0, memh_p);
}

/* Register mem in every domain of the context; one that refuses just has no entry. */
static axon_status_t axon_mem_reg_all(axon_context_h ctx, struct axon_mem *mem,
                                      const axon_md_layout_t *md_layout)
{
    const axon_select_resource_t *rsc;
    axon_mem_reg_t *reg;
    axon_status_t status;
    unsigned i;

    for (i = 0; i < ctx->num_rscs; ++i) {
        rsc = &ctx->rscs[i];
        if ((rsc->md == NULL) || ((mem->alloc_reg != NULL) && (mem->alloc_reg->md == rsc->md))) {
            continue;
        }
        if (rsc->md->ops->rkey_max_len > AXON_MD_RKEY_MAX) {
            axon_debug("%s: keys of %zu bytes do not fit a packed key (%d): not registered",
                       rsc->resource->tl_name, rsc->md->ops->rkey_max_len, AXON_MD_RKEY_MAX);
            continue;
        }
        reg = calloc(1, sizeof(*reg));
        if (reg == NULL) {
            axon_error("axon_mem_map: out of memory");
            return AXON_ERR_NO_MEMORY;
        }
        status = axon_mem_reg_one(rsc->md, mem, md_layout, &reg->tl_memh);
        if ((status == AXON_ERR_UNSUPPORTED) && (md_layout != NULL)) {
            axon_debug("%s/%s: no layout keys: peers reach mapping %016llx by active messages",
                       rsc->resource->tl_name, rsc->resource->dev_name,
                       (unsigned long long)mem->token);
            free(reg);
            continue;
        }
        if (status != AXON_OK) {
            /* Peers then reach this memory over another path on that lane. */
            axon_warn("%s/%s: registering %p (%zu bytes) for remote access failed: %s",
                      rsc->resource->tl_name, rsc->resource->dev_name, (void *)mem->address,
                      mem->length, axon_status_string(status));
            free(reg);
            continue;
        }
        reg->resource = rsc->resource;
        reg->md       = rsc->md;
        axon_list_add_tail(&mem->regs, &reg->link);
    }
    return AXON_OK;
}

void axon_mem_worker_attach(axon_worker_h worker)
{
    struct axon_mem_ctx *mctx = worker->context->mem;

    pthread_mutex_lock(&mctx->lock);
    axon_list_add_tail(&mctx->workers, &worker->mem_link);
    pthread_mutex_unlock(&mctx->lock);
}

void axon_mem_worker_detach(axon_worker_h worker)
{
    struct axon_mem_ctx *mctx = worker->context->mem;

    pthread_mutex_lock(&mctx->lock);
    axon_list_del(&worker->mem_link);
    pthread_mutex_unlock(&mctx->lock);
}

/* ---------------------------------------------------------------- mappings */

/* Caller holds mctx->lock. */
static struct axon_mem *axon_mem_find_token(struct axon_mem_ctx *mctx, uint64_t token)
{
    struct axon_mem *mem;

    axon_list_for_each(mem, &mctx->hash[axon_mem_bucket(token)], hash_link) {
        if (mem->token == token) {
            return mem;
        }
    }
    return NULL;
}

/* Caller holds axon_mem_proc_lock. */
static struct axon_mem *axon_mem_proc_find(uint64_t token)
{
    struct axon_mem *mem;

    axon_mem_proc_hash_init();
    axon_list_for_each(mem, &axon_mem_proc_hash[axon_mem_bucket(token)], proc_link) {
        if (mem->token == token) {
            return mem;
        }
    }
    return NULL;
}

int axon_mem_is_mapped(axon_context_h ctx, axon_mem_h memh)
{
    struct axon_mem *mem;

    axon_list_for_each(mem, &ctx->mem->maps, link) {
        if (mem == memh) {
            return 1;
        }
    }
    return 0;
}

/* A token no mapping of this process has (0 never: it reads as "none" in dumps). */
static uint64_t axon_mem_new_token(void)
{
    uint64_t token;

    do {
        token = axon_sys_generate_uuid();
    } while ((token == 0) || (axon_mem_proc_find(token) != NULL));
    return token;
}

/* AXON_MEM_MAP_LAYOUT: a layout peers may write into, of length bytes, of the caller's memory. */
static axon_status_t axon_mem_map_layout_check(const axon_mem_map_params_t *params)
{
    uintptr_t base = (uintptr_t)params->address;
    axon_status_t status;
    ptrdiff_t lo, hi;
    size_t size;

    if (params->flags & AXON_MEM_MAP_ALLOCATE) {
        axon_error("axon_mem_map: AXON_MEM_MAP_LAYOUT with AXON_MEM_MAP_ALLOCATE (a layout "
                   "maps the caller's memory)");
        return AXON_ERR_INVALID_PARAM;
    }
    status = axon_layout_check_extent(params->layout, 1, &size, &lo, &hi, "axon_mem_map");
    if (status != AXON_OK) {
        return status;
    }
    /* the pieces' real addresses, as a plain range's: no wrap either way */
    if (((lo < 0) && ((uintptr_t)0 - (uintptr_t)lo > base)) ||
        ((hi > 0) && ((uintptr_t)hi > UINTPTR_MAX - base))) {
        axon_error("axon_mem_map: the layout's extent [%p%+td, %p%+td) wraps around the "
                   "address space", params->address, lo, params->address, hi);
        return AXON_ERR_INVALID_PARAM;
    }
    if ((size != params->length) || (size == 0)) {
        axon_error("axon_mem_map: length %zu is not the layout's size %zu (which must be > 0)",
                   params->length, size);
        return AXON_ERR_INVALID_PARAM;
    }
    return AXON_OK;
}

static axon_status_t axon_mem_map_check(axon_context_h context,
                                        const axon_mem_map_params_t *params, axon_mem_h *memh_p)
{
    if ((context == NULL) || (params == NULL) || (memh_p == NULL)) {
        axon_error("axon_mem_map: NULL %s", !context ? "context" : !params ? "params" : "memh_p");
        return AXON_ERR_INVALID_PARAM;
    }
    if (!(context->features & (AXON_FEATURE_RMA | AXON_FEATURE_AMO))) {
        axon_error("axon_mem_map: context features 0x%x lack AXON_FEATURE_RMA and "
                   "AXON_FEATURE_AMO", context->features);
        return AXON_ERR_INVALID_PARAM;
    }
    if (params->flags & ~(uint32_t)(AXON_MEM_MAP_ALLOCATE | AXON_MEM_MAP_LAYOUT |
                                    AXON_MEM_MAP_SHARED)) {
        axon_error("axon_mem_map: unknown flags 0x%x", params->flags);
        return AXON_ERR_INVALID_PARAM;
    }
    if ((params->flags & AXON_MEM_MAP_SHARED) &&
        (params->flags & (AXON_MEM_MAP_ALLOCATE | AXON_MEM_MAP_LAYOUT))) {
        axon_error("axon_mem_map: AXON_MEM_MAP_SHARED with AXON_MEM_MAP_%s (flags 0x%x)",
                   (params->flags & AXON_MEM_MAP_ALLOCATE) ? "ALLOCATE" : "LAYOUT",
                   params->flags);
        return AXON_ERR_INVALID_PARAM;
    }
    if (params->length == 0) {
        axon_error("axon_mem_map: length is 0");
        return AXON_ERR_INVALID_PARAM;
    }
    if (!(params->flags & AXON_MEM_MAP_ALLOCATE)) {
        if (params->address == NULL) {
            axon_error("axon_mem_map: address is NULL (and AXON_MEM_MAP_ALLOCATE not given)");
            return AXON_ERR_INVALID_PARAM;
        }
        if ((uintptr_t)params->address + params->length < (uintptr_t)params->address) {
            axon_error("axon_mem_map: range %p + %zu wraps around the address space",
                       params->address, params->length);
            return AXON_ERR_INVALID_PARAM;
        }
    }
    return (params->flags & AXON_MEM_MAP_LAYOUT) ? axon_mem_map_layout_check(params) : AXON_OK;
}

void axon_mem_locks_put(void *ref)
{
    axon_mem_own_locks_t *ol = ref;
    unsigned left;

    pthread_mutex_lock(&axon_mem_proc_lock);
    left = --ol->refcount;
    pthread_mutex_unlock(&axon_mem_proc_lock);
    if (left == 0) {
        free(ol);
    }
}

/* Deregister and free; the domain that allocated the memory frees it last. */
static void axon_mem_free(struct axon_mem *mem)
{
    axon_mem_dereg_all(mem);
    if (mem->anon_length != 0) {
        munmap(mem->address, mem->anon_length);
    }
    if (mem->own_locks != NULL) {
        axon_mem_locks_put(mem->own_locks);
    }
    free(mem->layout);
    free(mem);
}

/* The LOCAL keys' view of mem; for memory no domain allocated, its lock table too. */
static axon_status_t axon_mem_own_locks_create(struct axon_mem *mem)
{
    axon_mem_own_locks_t *ol;

    /* A cache line per stripe, as in a segment's header. */
    if (posix_memalign((void **)&ol, AXON_CACHE_LINE, sizeof(*ol)) != 0) {
        axon_error("axon_mem_map: out of memory");
        return AXON_ERR_NO_MEMORY;
    }
    axon_amo_lock_table_init(&ol->table);
    ol->refcount   = 1;
    ol->mapped     = 1;
    mem->own_locks = &ol->table;
    if (mem->alloc_reg == NULL) {
        mem->locks = mem->own_locks;   /* allocated memory: the segment's own */
    }
    return AXON_OK;
}

/* Keep a copy of the layout, and describe it for the domains in *md (entries: the caller's). */
static axon_status_t axon_mem_layout_init(struct axon_mem *mem, const axon_layout_t *layout,
                                          axon_md_layout_t *md, axon_md_layout_entry_t **entries)
{
    axon_status_t status;

    mem->layout = axon_layout_dup(layout);
    if (mem->layout == NULL) {
        axon_error("axon_mem_map: out of memory");
        return AXON_ERR_NO_MEMORY;
    }
    axon_layout_cursor_init(&mem->cursor, mem->layout, mem->address);
    status = axon_layout_md_make(mem->layout, mem->address, mem->length, NULL, 0, md, entries);
    if (status != AXON_OK) {
        axon_error("axon_mem_map: out of memory for the layout's pieces");
    }
    return status;
}

axon_status_t axon_mem_map(axon_context_h context, const axon_mem_map_params_t *params,
                           axon_mem_h *memh_p)
{
    axon_md_layout_entry_t *entries = NULL;
    axon_md_layout_t md_layout;
    struct axon_mem_ctx *mctx;
    struct axon_mem *mem;
    axon_status_t status;

    status = axon_mem_map_check(context, params, memh_p);
    if (status != AXON_OK) {
        return status;
    }
    mctx = context->mem;

    mem = calloc(1, sizeof(*mem));
    if (mem == NULL) {
        axon_error("axon_mem_map: out of memory");
        return AXON_ERR_NO_MEMORY;
    }
    mem->context = context;
    mem->flags   = params->flags;
    mem->length  = params->length;
    mem->address = params->address;
    axon_list_init(&mem->regs);

    pthread_mutex_lock(&axon_mem_proc_lock);
    mem->token = axon_mem_new_token();
    pthread_mutex_unlock(&axon_mem_proc_lock);

    status = (params->flags & AXON_MEM_MAP_ALLOCATE) ? axon_mem_alloc(context, mem) :
             (params->flags & AXON_MEM_MAP_SHARED) ? axon_mem_share(context, mem) : AXON_OK;
    if (status == AXON_OK) {
        status = axon_mem_own_locks_create(mem);
    }
    if ((status == AXON_OK) && (params->flags & AXON_MEM_MAP_LAYOUT)) {
        status = axon_mem_layout_init(mem, params->layout, &md_layout, &entries);
    }
    if (status == AXON_OK) {
        status = axon_mem_reg_all(context, mem, entries ? &md_layout : NULL);
    }
    free(entries);
    if (status != AXON_OK) {
        axon_mem_free(mem);
        return status;
    }
    pthread_mutex_lock(&mctx->lock);
    axon_list_add_tail(&mctx->maps, &mem->link);
    axon_list_add_tail(&mctx->hash[axon_mem_bucket(mem->token)], &mem->hash_link);
    pthread_mutex_unlock(&mctx->lock);

    pthread_mutex_lock(&axon_mem_proc_lock);
    axon_mem_proc_hash_init();
    axon_list_add_tail(&axon_mem_proc_hash[axon_mem_bucket(mem->token)], &mem->proc_link);
    pthread_mutex_unlock(&axon_mem_proc_lock);

    axon_debug("mapped %p, %zu bytes%s, token %016llx", (void *)mem->address, mem->length,
               (mem->flags & AXON_MEM_MAP_ALLOCATE) ? " (allocated)" :
               (mem->alloc_reg != NULL) ? " (shared pages)" :
               (mem->layout != NULL) ? " (a layout)" : "",
               (unsigned long long)mem->token);
    *memh_p = mem;
    return AXON_OK;
}

axon_status_t axon_mem_query(axon_mem_h memh, void **address_p, size_t *length_p)
{
    if ((memh == NULL) || (address_p == NULL) || (length_p == NULL)) {
        axon_error("axon_mem_query: NULL %s", !memh ? "memh" : !address_p ? "address_p" :
                                                                           "length_p");
        return AXON_ERR_INVALID_PARAM;
    }
    *address_p = memh->address;
    *length_p  = memh->length;
    return AXON_OK;
}

/* Unlink from both hashes, deregister and free; caller holds mctx->lock. */
static void axon_mem_destroy(struct axon_mem *mem)
{
    axon_list_del(&mem->link);
    axon_list_del(&mem->hash_link);
    pthread_mutex_lock(&axon_mem_proc_lock);
    axon_list_del(&mem->proc_link);
    if (mem->own_locks != NULL) {   /* LOCAL keys fail from now on */
        __atomic_store_n(&((axon_mem_own_locks_t *)mem->own_locks)->mapped, 0,
                         __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&axon_mem_proc_lock);
    axon_debug("unmapped %p, %zu bytes, token %016llx", (void *)mem->address, mem->length,
               (unsigned long long)mem->token);
    axon_mem_free(mem);
}

axon_status_t axon_mem_unmap(axon_context_h context, axon_mem_h memh)
{
    struct axon_mem_ctx *mctx;

    if ((context == NULL) || (memh == NULL)) {
        axon_error("axon_mem_unmap: NULL %s", !context ? "context" : "memh");
        return AXON_ERR_INVALID_PARAM;
    }
    mctx = context->mem;
    pthread_mutex_lock(&mctx->lock);
    /* Compared by pointer only: a stale handle is never dereferenced. */
    if (!axon_mem_is_mapped(context, memh)) {
        pthread_mutex_unlock(&mctx->lock);
        axon_error("axon_mem_unmap: %p is not a mapping of context %p", (void *)memh,
                   (void *)context);
        return AXON_ERR_INVALID_PARAM;
    }
    axon_mem_destroy(memh);
    pthread_mutex_unlock(&mctx->lock);
    return AXON_OK;
}

void axon_mem_context_cleanup(axon_context_h ctx)
{
    struct axon_mem_ctx *mctx = ctx->mem;
    struct axon_mem *mem, *tmp;

    if (mctx == NULL) {
        return;
    }
    pthread_mutex_lock(&mctx->lock);
    axon_list_for_each_safe(mem, tmp, &mctx->maps, link) {
        axon_warn("axon_cleanup: memory %p (%zu bytes) is still mapped; unmapping it",
                  (void *)mem->address, mem->length);
        axon_mem_destroy(mem);
    }
    pthread_mutex_unlock(&mctx->lock);
    pthread_mutex_destroy(&mctx->lock);
    free(mctx);
    ctx->mem = NULL;
}

/* ---------------------------------------------------------------- lookups */

/* A layout mapping's run at packed offset pos, at most length bytes; caller holds the lock. */
static uint8_t *axon_mem_layout_run(struct axon_mem *mem, uint64_t pos, size_t length,
                                    size_t *run_p)
{
    uint8_t *p = axon_layout_cursor_run(&mem->cursor, pos, run_p);

    if (*run_p > length) {
        *run_p = length;
    }
    return p;
}

uint8_t *axon_mem_lookup(axon_context_h context, uint64_t token, uint64_t addr, size_t length,
                         size_t *run_p, axon_amo_lock_table_t **locks_p,
                         uint64_t *region_offset_p, axon_status_t *status)
{
    struct axon_mem_ctx *mctx = context->mem;
    struct axon_mem *mem;
    uint64_t base, offset;
    uint8_t *p = (uint8_t *)(uintptr_t)addr;
    size_t run = length;

    pthread_mutex_lock(&mctx->lock);
    mem = axon_mem_find_token(mctx, token);
    if (mem == NULL) {
        pthread_mutex_unlock(&mctx->lock);
        axon_debug("remote access with token %016llx: no such mapping (unmapped?)",
                   (unsigned long long)token);
        *status = AXON_ERR_REMOTE_ACCESS;
        return NULL;
    }
    base = (uintptr_t)mem->address;
    if ((addr < base) || (length > mem->length) || (addr - base > mem->length - length)) {
        pthread_mutex_unlock(&mctx->lock);
        axon_debug("remote access to [0x%llx, +%zu) outside mapping [%p, +%zu)",
                   (unsigned long long)addr, length, (void *)mem->address, mem->length);
        *status = AXON_ERR_REMOTE_ACCESS;
        return NULL;
    }
    if ((mem->layout != NULL) && (length > 0)) {
        p = axon_mem_layout_run(mem, addr - base, length, &run);
        if ((run_p == NULL) && (run < length)) {
            pthread_mutex_unlock(&mctx->lock);
            axon_debug("remote access to [0x%llx, +%zu) of a layout mapping spans two pieces",
                       (unsigned long long)addr, length);
            *status = AXON_ERR_REMOTE_ACCESS;
            return NULL;
        }
    }
    /* the stripe of a location is a function of its address, whatever the mapping's form */
    offset = (uintptr_t)p - base;
    if (locks_p != NULL) {
        *locks_p = mem->locks;
    }
    pthread_mutex_unlock(&mctx->lock);
    if (region_offset_p != NULL) {
        *region_offset_p = offset;
    }
    if (run_p != NULL) {
        *run_p = run;
    }
    *status = AXON_OK;
    return p;
}

axon_status_t axon_mem_gather(axon_context_h context, uint64_t token, uint64_t addr, void *dest,
                              size_t length)
{
    struct axon_mem_ctx *mctx = context->mem;
    struct axon_mem *mem;
    uint64_t base;

    pthread_mutex_lock(&mctx->lock);
    mem  = axon_mem_find_token(mctx, token);
    base = (mem != NULL) ? (uintptr_t)mem->address : 0;
    if ((mem == NULL) || (addr < base) || (length > mem->length) ||
        (addr - base > mem->length - length)) {
        pthread_mutex_unlock(&mctx->lock);
        memset(dest, 0, length);
        return AXON_ERR_REMOTE_ACCESS;
    }
    if (mem->layout != NULL) {
        axon_layout_gather(&mem->cursor, addr - base, dest, length);
    } else {
        memcpy(dest, (const void *)(uintptr_t)addr, length);
    }
    pthread_mutex_unlock(&mctx->lock);
    return AXON_OK;
}

axon_status_t axon_mem_find_local(uint64_t token, uint64_t address, uint64_t length,
                                  uint8_t **base_p, axon_amo_lock_table_t **locks_p,
                                  void **ref_p)
{
    struct axon_mem *mem;
    axon_status_t status = AXON_ERR_REMOTE_ACCESS;

    pthread_mutex_lock(&axon_mem_proc_lock);
    mem = axon_mem_proc_find(token);
    if ((mem != NULL) && (mem->layout != NULL)) {
        status = AXON_ERR_UNSUPPORTED;
    } else if ((mem != NULL) && ((uintptr_t)mem->address == address) &&
               (mem->length == length)) {
        *base_p  = mem->address;
        *locks_p = mem->locks;
        ++((axon_mem_own_locks_t *)mem->own_locks)->refcount;
        *ref_p   = mem->own_locks;
        status   = AXON_OK;
    }
    pthread_mutex_unlock(&axon_mem_proc_lock);
    return status;
}
