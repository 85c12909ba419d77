/*
 * softib's slot registry (see softib_registry.h). All of it is slow path:
 * device open and close, and a sender's first contact with a slot.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "softib_registry.h"
#include "sys.h"
#include "log.h"

#define SOFTIB_REGISTRY_MAGIC    0x5342524547303032ull   /* "SBREG002" */
#define SOFTIB_REGISTRY_NSLOTS   (SOFTIB_REGISTRY_SLOT_MAX + 1)

_Static_assert(__atomic_always_lock_free(sizeof(uint64_t), 0),
               "softib registry needs lock-free 64-bit atomics");

/* One entry; two cache lines so that neighbours' publishing does not disturb lookups. */
typedef struct softib_registry_slot {
    _Atomic uint64_t gen;        /* odd while owned; bumped at every claim and release */
    int32_t          pid;
    _Atomic uint32_t next_qp_index; /* where the slot's next owner numbers its QPs from */
    uint64_t         start_time;
    uint64_t         ns_id;
    char             ring[SOFTIB_REGISTRY_NAME_LEN];
    char             pad[128 - 32 - SOFTIB_REGISTRY_NAME_LEN];
} softib_registry_slot_t;

_Static_assert(sizeof(softib_registry_slot_t) == 128, "registry slot size");

typedef struct softib_registry_hdr {
    _Atomic uint64_t magic;      /* written last by the initializer */
    uint32_t         nslots;
    uint32_t         slot_size;
    pthread_mutex_t  lock;       /* robust, process-shared: writers only */
    /* 1 + the highest slot ever published (0: none yet). The reaper looks no
     * further: its pass is every open's, and all 4094 entries are 128 pages,
     * each a fault on first touch in a process (dear on a virtual machine). */
    _Atomic uint32_t slots_used;
    char             pad[4096 - 16 - sizeof(pthread_mutex_t) - sizeof(uint32_t)];
} softib_registry_hdr_t;

_Static_assert(sizeof(softib_registry_hdr_t) == 4096, "registry header size");

typedef struct softib_registry_seg {
    softib_registry_hdr_t  hdr;
    softib_registry_slot_t slots[SOFTIB_REGISTRY_NSLOTS];
} softib_registry_seg_t;

struct softib_registry {
    softib_registry_seg_t *seg;
    unsigned               dev_index;
    char                   name[32];
};

/* ---------------------------------------------------------------- processes */

void softib_registry_owner_self(softib_registry_owner_t *owner)
{
    axon_proc_self(owner);
}

int softib_registry_owner_gone(const softib_registry_owner_t *owner, const char **why)
{
    axon_proc_t self;

    /* Pids of another namespace mean nothing here: assume alive. */
    axon_proc_self(&self);
    return axon_proc_comparable(owner, &self) && axon_proc_is_gone(owner, why);
}

/* ---------------------------------------------------------------- segment */

int softib_shared_lock_init(pthread_mutex_t *lock)
{
    pthread_mutexattr_t attr;
    int                 ret;

    pthread_mutexattr_init(&attr);
    ret = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    if (ret == 0) {
        ret = pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    }
    if (ret == 0) {
        ret = pthread_mutex_init(lock, &attr);
    }
    pthread_mutexattr_destroy(&attr);
    return ret;
}

int softib_shared_lock(pthread_mutex_t *lock, const char *name)
{
    int ret = pthread_mutex_lock(lock);

    if (ret == EOWNERDEAD) {
        /* The segments publish entries by a word written last: all consistent. */
        axon_debug("softib: %s: the previous lock holder died; recovering", name);
        ret = pthread_mutex_consistent(lock);
    }
    if (ret != 0) {
        axon_error("softib: cannot lock %s: %s", name, strerror(ret));
    }
    return ret;
}

int softib_shared_seg_open(const char *name, size_t size,
                           int (*init)(void *seg, const char *name), void **seg_p)
{
    struct stat st;
    void       *addr;
    int         fd, ret;

    fd = shm_open(name, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        ret = errno;
        axon_error("softib: cannot open %s: %s", name, strerror(ret));
        return ret;
    }
    /* init runs under the flock (the kernel drops it if we die): a segment
     * without its magic is new, or its initializer died half way */
    if (flock(fd, LOCK_EX) != 0) {
        ret = errno;
        axon_error("softib: cannot lock %s: %s", name, strerror(ret));
        goto out_close;
    }
    if (fstat(fd, &st) != 0) {
        ret = errno;
        goto out_unlock;
    }
    if (((size_t)st.st_size < size) && (ftruncate(fd, (off_t)size) != 0)) {
        ret = errno;
        axon_error("softib: cannot size %s: %s", name, strerror(ret));
        goto out_unlock;
    }
    addr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (addr == MAP_FAILED) {
        ret = errno;
        axon_error("softib: cannot map %s: %s", name, strerror(ret));
        goto out_unlock;
    }
    ret = init(addr, name);
    if (ret != 0) {
        munmap(addr, size);
    } else {
        *seg_p = addr;
    }
out_unlock:
    flock(fd, LOCK_UN);
out_close:
    close(fd);
    return ret;
}

static int softib_registry_init_seg(void *addr, const char *name)
{
    softib_registry_seg_t *seg = addr;
    int                    ret;

    if (atomic_load_explicit(&seg->hdr.magic, memory_order_acquire) == SOFTIB_REGISTRY_MAGIC) {
        if ((seg->hdr.nslots != SOFTIB_REGISTRY_NSLOTS) ||
            (seg->hdr.slot_size != sizeof(softib_registry_slot_t))) {
            axon_error("softib: registry %s has another layout (%u slots of %u bytes): "
                       "left by another version of axon?", name, seg->hdr.nslots,
                       seg->hdr.slot_size);
            return EPROTO;
        }
        return 0;
    }

    memset(seg, 0, sizeof(*seg));
    ret = softib_shared_lock_init(&seg->hdr.lock);
    if (ret != 0) {
        axon_error("softib: cannot initialize the lock of registry %s: %s", name,
                   strerror(ret));
        return ret;
    }
    seg->hdr.nslots    = SOFTIB_REGISTRY_NSLOTS;
    seg->hdr.slot_size = sizeof(softib_registry_slot_t);
    atomic_store_explicit(&seg->hdr.magic, SOFTIB_REGISTRY_MAGIC, memory_order_release);
    return 0;
}

int softib_registry_open(unsigned dev_index, softib_registry_t **reg_p)
{
    softib_registry_t *reg;
    void              *seg;
    int                ret;

    reg = calloc(1, sizeof(*reg));
    if (reg == NULL) {
        return ENOMEM;
    }
    reg->dev_index = dev_index;
    snprintf(reg->name, sizeof(reg->name), "/axon-softib%u.reg", dev_index);
    ret = softib_shared_seg_open(reg->name, sizeof(softib_registry_seg_t),
                                 softib_registry_init_seg, &seg);
    if (ret != 0) {
        free(reg);
        return ret;
    }
    reg->seg = seg;
    *reg_p   = reg;
    return 0;
}

void softib_registry_close(softib_registry_t *reg)
{
    if (reg == NULL) {
        return;
    }
    munmap(reg->seg, sizeof(softib_registry_seg_t));
    free(reg);
}

int softib_registry_lock(softib_registry_t *reg)
{
    return softib_shared_lock(&reg->seg->hdr.lock, reg->name);
}

void softib_registry_unlock(softib_registry_t *reg)
{
    pthread_mutex_unlock(&reg->seg->hdr.lock);
}

/* ---------------------------------------------------------------- slots */

static softib_registry_slot_t *softib_registry_slot(const softib_registry_t *reg, unsigned slot)
{
    return &reg->seg->slots[slot];
}

static void softib_registry_read_owner(const softib_registry_slot_t *entry,
                                       softib_registry_owner_t *owner)
{
    owner->pid        = entry->pid;
    owner->start_time = entry->start_time;
    owner->ns_id      = entry->ns_id;
}

void softib_registry_reap(softib_registry_t *reg, void (*unlink_ring)(const char *name))
{
    softib_registry_slot_t *entry;
    softib_registry_owner_t owner;
    const char             *why;
    uint64_t                gen;
    unsigned                slot, end;

    end = atomic_load_explicit(&reg->seg->hdr.slots_used, memory_order_relaxed);
    if (end > SOFTIB_REGISTRY_SLOT_MAX + 1) {
        end = SOFTIB_REGISTRY_SLOT_MAX + 1;
    }
    for (slot = SOFTIB_REGISTRY_SLOT_MIN; slot < end; ++slot) {
        entry = softib_registry_slot(reg, slot);
        gen   = atomic_load_explicit(&entry->gen, memory_order_relaxed);
        if (!(gen & 1)) {
            continue;
        }
        softib_registry_read_owner(entry, &owner);
        if (!softib_registry_owner_gone(&owner, &why)) {
            continue;
        }
        axon_debug("softib: %s slot %u: owner pid %d is gone (%s): reaping it", reg->name,
                   slot, (int)owner.pid, why);
        entry->ring[SOFTIB_REGISTRY_NAME_LEN - 1] = '\0';
        if (unlink_ring != NULL) {
            unlink_ring(entry->ring);
        }
        atomic_store_explicit(&entry->gen, gen + 1, memory_order_release);
    }
}

int softib_registry_find_free(softib_registry_t *reg, unsigned *slot_p, uint64_t *gen_p)
{
    uint64_t gen;
    unsigned slot;

    for (slot = SOFTIB_REGISTRY_SLOT_MIN; slot <= SOFTIB_REGISTRY_SLOT_MAX; ++slot) {
        gen = atomic_load_explicit(&softib_registry_slot(reg, slot)->gen, memory_order_relaxed);
        if (!(gen & 1)) {
            *slot_p = slot;
            *gen_p  = gen + 1;
            return 0;
        }
    }
    axon_error("softib: %s: all %u slots are taken by live processes", reg->name,
               SOFTIB_REGISTRY_SLOT_MAX);
    return ENOSPC;
}

void softib_registry_publish(softib_registry_t *reg, unsigned slot, uint64_t gen,
                             const char *ring)
{
    softib_registry_slot_t *entry = softib_registry_slot(reg, slot);
    softib_registry_owner_t self;

    softib_registry_owner_self(&self);
    entry->pid        = self.pid;
    entry->start_time = self.start_time;
    entry->ns_id      = self.ns_id;
    snprintf(entry->ring, sizeof(entry->ring), "%s", ring);
    if (slot >= atomic_load_explicit(&reg->seg->hdr.slots_used, memory_order_relaxed)) {
        atomic_store_explicit(&reg->seg->hdr.slots_used, slot + 1, memory_order_relaxed);
    }
    /* Release: a reader that sees the odd generation sees the entry. */
    atomic_store_explicit(&entry->gen, gen, memory_order_release);
}

uint32_t softib_registry_next_qp_index(const softib_registry_t *reg, unsigned slot)
{
    return atomic_load_explicit(&softib_registry_slot(reg, slot)->next_qp_index,
                               memory_order_relaxed);
}

void softib_registry_set_next_qp_index(softib_registry_t *reg, unsigned slot, uint32_t index)
{
    atomic_store_explicit(&softib_registry_slot(reg, slot)->next_qp_index, index,
                          memory_order_relaxed);
}

void softib_registry_release(softib_registry_t *reg, unsigned slot, uint64_t gen)
{
    softib_registry_slot_t *entry = softib_registry_slot(reg, slot);

    /* Someone reaped it already if our pid looked dead (another pid namespace...). */
    if (atomic_load_explicit(&entry->gen, memory_order_relaxed) == gen) {
        atomic_store_explicit(&entry->gen, gen + 1, memory_order_release);
    }
}

uint64_t softib_registry_gen(const softib_registry_t *reg, unsigned slot)
{
    if ((slot < SOFTIB_REGISTRY_SLOT_MIN) || (slot > SOFTIB_REGISTRY_SLOT_MAX)) {
        return 0;
    }
    return atomic_load_explicit(&softib_registry_slot(reg, slot)->gen, memory_order_acquire);
}

int softib_registry_lookup(const softib_registry_t *reg, unsigned slot, uint64_t *gen_p,
                           char *ring, size_t max, softib_registry_owner_t *owner)
{
    const softib_registry_slot_t *entry;
    uint64_t                      gen, again;

    if ((slot < SOFTIB_REGISTRY_SLOT_MIN) || (slot > SOFTIB_REGISTRY_SLOT_MAX)) {
        return EINVAL;
    }
    entry = softib_registry_slot(reg, slot);
    do {
        gen    = atomic_load_explicit(&entry->gen, memory_order_acquire);
        *gen_p = gen;
        if (!(gen & 1)) {
            return ENOENT;
        }
        if ((ring != NULL) && (max > 0)) {
            snprintf(ring, max, "%.*s", SOFTIB_REGISTRY_NAME_LEN - 1, entry->ring);
        }
        if (owner != NULL) {
            softib_registry_read_owner(entry, owner);
        }
        /* Acquire fence: the copies above happen before the second look. */
        atomic_thread_fence(memory_order_acquire);
        again = atomic_load_explicit(&entry->gen, memory_order_relaxed);
    } while (again != gen);
    return 0;
}
