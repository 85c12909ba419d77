/*
 * Mapped memory inside the library (mem.c) and what a context keeps for
 * remote memory access: its mappings, each registered once in every memory
 * domain of the context (rc's MRs, shm's mapping table; allocated memory
 * comes from a domain that can allocate, shm's memfd segments), and its
 * workers, whose ids keys carry. All of it under one mutex, taken on slow
 * paths only, and by axon_mem_lookup for operations executed at the target.
 */
#ifndef AXON_MEM_H
#define AXON_MEM_H

#include <pthread.h>
#include "axon_int.h"
#include "amo_cpu.h"
#include "layout.h"

/* AXON_RMA_PATH: how keys are unpacked (context.c's table names them). */
typedef enum {
    AXON_RMA_PATH_MODE_AUTO = 0,  /* the most direct path the lanes allow */
    AXON_RMA_PATH_MODE_AM,        /* always active messages (tests the emulation) */
} axon_rma_path_mode_t;

extern const char *const axon_rma_path_mode_names[];

/* AXON_ATOMIC_MODE (context.c's table names them; see docs/design.md "Device atomics"). */
typedef enum {
    AXON_ATOMIC_MODE_CPU = 0,     /* a CPU of the target's host, under the region's locks */
    AXON_ATOMIC_MODE_DEVICE,      /* every atomic through a lane's device (ep_atomic) */
    AXON_ATOMIC_MODE_GUESS,       /* device when every admitted resource has device atomics */
} axon_atomic_mode_t;

extern const char *const axon_atomic_mode_names[];

/* Resolve AXON_ATOMIC_MODE into context->amo_device (after resource selection). */
void axon_mem_atomic_mode_init(axon_context_h context);

#define AXON_MEM_HASH_BUCKETS 64

/* A mapping registered in one memory domain of the context. */
typedef struct axon_mem_reg {
    axon_list_link_t       link;       /* in mem->regs */
    const axon_resource_t *resource;   /* whose domain: its transport names the key entry */
    axon_md_t             *md;
    void                  *tl_memh;    /* what the domain's mem_reg returned */
} axon_mem_reg_t;

struct axon_mem {
    axon_context_h         context;
    axon_list_link_t       link;       /* in the context's maps */
    axon_list_link_t       hash_link;  /* in the context's token hash */
    axon_list_link_t       proc_link;  /* in the process-wide token hash (same-process keys) */
    uint64_t               token;      /* random, names the mapping in keys and messages */
    uint8_t               *address;
    size_t                 length;
    uint32_t               flags;      /* AXON_MEM_MAP_* */
    axon_amo_lock_table_t *locks;      /* the allocating domain's, or own_locks */
    axon_amo_lock_table_t *own_locks;  /* other memory: a table of its own (refcounted) */
    axon_mem_reg_t        *alloc_reg;  /* the domain that allocated the memory, or shares
                                        * its pages (AXON_MEM_MAP_ALLOCATE, _SHARED) */
    size_t                 anon_length;/* ... or, with none that can, our own mmap */
    axon_list_link_t       regs;       /* axon_mem_reg_t */
    /* AXON_MEM_MAP_LAYOUT: a copy of the layout (address its base, length its
     * size) and a cursor over it, used under the context's mem lock. */
    axon_layout_t         *layout;
    axon_layout_cursor_t   cursor;
};

struct axon_mem_ctx {
    pthread_mutex_t  lock;
    axon_list_link_t maps;                          /* struct axon_mem */
    axon_list_link_t hash[AXON_MEM_HASH_BUCKETS];   /* struct axon_mem by token */
    axon_list_link_t workers;                       /* axon_worker.mem_link */
};

/* Context lifetime (context.c): cleanup unmaps what the user forgot, with a warning. */
axon_status_t axon_mem_context_init(axon_context_h ctx);
void          axon_mem_context_cleanup(axon_context_h ctx);

/* Is memh a live mapping of ctx? (caller holds ctx->mem->lock) */
int           axon_mem_is_mapped(axon_context_h ctx, axon_mem_h memh);

/*
 * A mapping of this process (any context) for a key of this process: token
 * and range must name it exactly. Its address and lock table, or
 * AXON_ERR_REMOTE_ACCESS when it is not (or no longer) mapped, or
 * AXON_ERR_UNSUPPORTED for a layout mapping (reached over a lane). *ref_p
 * holds a reference (axon_mem_own_locks_t) that says whether the mapping is
 * still there and keeps user memory's lock table after an unmap; drop it
 * with axon_mem_locks_put.
 */
axon_status_t axon_mem_find_local(uint64_t token, uint64_t address, uint64_t length,
                                  uint8_t **base_p, axon_amo_lock_table_t **locks_p,
                                  void **ref_p);
void          axon_mem_locks_put(void *ref);

/*
 * What a LOCAL key holds of its mapping (every mapping has one): the lock
 * table of user memory, and whether the mapping is still there, so an
 * access through a key of an unmapped region fails instead of touching
 * memory the caller gave back (or a freed segment). refcount under the
 * process's mapping lock; mapped is cleared at unmap, first.
 */
typedef struct axon_mem_own_locks {
    axon_amo_lock_table_t table;      /* first: own_locks points here (user memory) */
    unsigned              refcount;
    int                   mapped;
} axon_mem_own_locks_t;

/* Is the mapping a LOCAL key's ref names still there? */
static inline int axon_mem_ref_live(const void *ref)
{
    return __atomic_load_n(&((const axon_mem_own_locks_t *)ref)->mapped, __ATOMIC_ACQUIRE);
}


/*
 * Target side (mem.c): the mapping a token names, with [addr, addr + length)
 * checked against it. Returns where addr is in this process and the
 * mapping's lock table, or NULL with *status = AXON_ERR_REMOTE_ACCESS
 * (logged at debug: the initiator gets the status). Safe to call from any
 * worker's progress of the context. A layout mapping's addresses are
 * packed offsets from its base: the bytes at addr are one run of it, and
 * *run_p says how many of length it holds (== length for other memory);
 * with run_p NULL the whole range must be one run (an atomic's operand).
 */
uint8_t *axon_mem_lookup(axon_context_h context, uint64_t token, uint64_t addr, size_t length,
                         size_t *run_p, axon_amo_lock_table_t **locks_p,
                         uint64_t *region_offset_p, axon_status_t *status);

/*
 * Copy length bytes at addr of the mapping token names into dest, through
 * its layout (a get reply gathering several runs). AXON_ERR_REMOTE_ACCESS
 * when the range is not (or no longer) mapped: dest is then zeroed.
 */
axon_status_t axon_mem_gather(axon_context_h context, uint64_t token, uint64_t addr, void *dest,
                              size_t length);

/* Worker lifetime hooks (mem.c): keys packed from now on name the worker, or no longer. */
void          axon_mem_worker_attach(axon_worker_h worker);
void          axon_mem_worker_detach(axon_worker_h worker);

#endif
