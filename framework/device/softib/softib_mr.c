/*
 * Protection domains, memory regions and the access path (indirect keys:
 * softib_umr.c, reached through one branch).
 *
 * Keys index a per-device table (key = index << 8 | generation), and every
 * access looks its key up again: a WQE holds keys, never MR pointers, so a
 * region deregistered while WQEs still name it fails with a protection error
 * instead of being used after free.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "log.h"
#include "softib.h"
#include "softib_direct.h"
#include "softib_guard.h"

#define SOFTIB_MR_ACCESS_ALL (AXON_DEV_ACCESS_LOCAL_WRITE | AXON_DEV_ACCESS_REMOTE_WRITE | \
                              AXON_DEV_ACCESS_REMOTE_READ | AXON_DEV_ACCESS_REMOTE_ATOMIC | \
                              AXON_DEV_ACCESS_MW_BIND)

int softib_alloc_pd(axon_dev_context_t *ctx, axon_dev_pd_t **pd_p)
{
    softib_dev_t *dev = softib_dev(ctx);
    softib_pd_t *pd   = calloc(1, sizeof(*pd));

    if (pd == NULL) {
        axon_error("softib: no memory for a PD");
        return ENOMEM;
    }
    pd->super.context = ctx;
    pthread_mutex_lock(&dev->lock);
    pd->super.handle = dev->next_pd_handle++;
    pthread_mutex_unlock(&dev->lock);
    *pd_p = &pd->super;
    return 0;
}

int softib_dealloc_pd(axon_dev_pd_t *pd)
{
    softib_dev_t *dev = softib_dev(pd->context);
    int refcnt;

    pthread_mutex_lock(&dev->lock);
    refcnt = softib_pd(pd)->refcnt;
    pthread_mutex_unlock(&dev->lock);
    if (refcnt) {
        axon_debug("softib: dealloc_pd: PD %u still has %d objects", pd->handle, refcnt);
        return EBUSY;
    }
    free(pd);
    return 0;
}

/* Is [addr, addr + length) mapped? (verbs pin the pages and fail with EFAULT otherwise) */
static int softib_mr_mapped(void *addr, size_t length)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)addr & ~(page - 1), end = (uintptr_t)addr + length, chunk;
    unsigned char vec[256];

    if (addr == NULL) {
        return 0;
    }
    for (; start < end; start += chunk) {
        chunk = (end - start + page - 1) / page;
        chunk = ((chunk > sizeof(vec)) ? sizeof(vec) : chunk) * page;
        if (mincore((void *)start, chunk, vec) && (errno == ENOMEM)) {
            return 0;
        }
    }
    return 1;
}

/* Registrations made in this process, all devices: what tests of caches count. */
static uint64_t softib_mr_regs;

uint64_t softib_mr_reg_count(void)
{
    return __atomic_load_n(&softib_mr_regs, __ATOMIC_RELAXED);
}

int softib_mr_access_check(uint64_t access, const char *what)
{
    if (access & ~(uint64_t)SOFTIB_MR_ACCESS_ALL) {
        axon_error("softib: %s: unknown access flags 0x%llx", what, (unsigned long long)access);
        return EINVAL;
    }
    /* As with verbs: remote write/atomic need local write */
    if ((access & (AXON_DEV_ACCESS_REMOTE_WRITE | AXON_DEV_ACCESS_REMOTE_ATOMIC)) &&
        !(access & AXON_DEV_ACCESS_LOCAL_WRITE)) {
        axon_error("softib: %s: access 0x%llx has remote write/atomic without local write",
                   what, (unsigned long long)access);
        return EINVAL;
    }
    return 0;
}

int softib_reg_mr(axon_dev_pd_t *pd, void *addr, size_t length, int access,
                  axon_dev_mr_t **mr_p)
{
    softib_dev_t *dev = softib_dev(pd->context);
    softib_mr_t *mr;
    int ret;

    if ((ret = softib_mr_access_check(access, "reg_mr")) != 0) {
        return ret;
    }
    if ((uint64_t)length > dev->attr.max_mr_size ||
        ((uintptr_t)addr + length < (uintptr_t)addr)) {
        axon_error("softib: reg_mr: length %zu at %p is too large", length, addr);
        return EINVAL;
    }
    if (length && !softib_mr_mapped(addr, length)) {
        axon_error("softib: reg_mr: %p..+%zu is not mapped memory", addr, length);
        return EFAULT;
    }
    if ((ret = softib_guard_init()) != 0) {   /* before any access through a key */
        return ret;
    }
    mr = calloc(1, sizeof(*mr));
    if (mr == NULL) {
        axon_error("softib: no memory for an MR");
        return ENOMEM;
    }
    mr->super.addr   = addr;
    mr->super.length = length;
    mr->super.access = access;
    if ((ret = softib_mr_add(dev, pd, mr, "reg_mr")) != 0) {
        free(mr);
        return ret;
    }
    softib_direct_mr_publish(dev, mr);
    __atomic_add_fetch(&softib_mr_regs, 1, __ATOMIC_RELAXED);
    *mr_p = &mr->super;
    return 0;
}

/* Give mr a key of dev's table (and count it on pd); 0 or ENOMEM (logged) */
int softib_mr_add(softib_dev_t *dev, axon_dev_pd_t *pd, softib_mr_t *mr, const char *what)
{
    unsigned i, index;

    pthread_mutex_lock(&dev->lock);
    index = 0;
    for (i = 0; i < SOFTIB_MR_TABLE_SIZE - 1; i++) {
        unsigned candidate = 1 + (dev->next_mr_index - 1 + i) % (SOFTIB_MR_TABLE_SIZE - 1);
        if (dev->mrs[candidate] == NULL) {
            index = candidate;
            break;
        }
    }
    if (index == 0) {
        pthread_mutex_unlock(&dev->lock);
        axon_error("softib: %s: all %d MRs of %s are in use", what, SOFTIB_MR_TABLE_SIZE - 1,
                   dev->super.name);
        return ENOMEM;
    }
    /* Keys change on reuse of an index, so a stale key does not find the new region */
    dev->next_mr_index = index + 1;
    dev->mr_gen++;
    mr->index          = index;
    mr->super.context  = pd->context;
    mr->super.pd       = pd;
    mr->super.lkey     = (index << 8) | dev->mr_gen;
    mr->super.rkey     = mr->super.lkey;
    dev->mrs[index]    = mr;
    dev->num_mrs++;
    softib_pd(pd)->refcnt++;
    pthread_mutex_unlock(&dev->lock);
    return 0;
}

int softib_dereg_mr(axon_dev_mr_t *amr)
{
    softib_dev_t *dev = softib_dev(amr->context);
    softib_mr_t *mr   = (softib_mr_t *)amr;

    softib_direct_mr_unpublish(dev, mr);   /* no requester's copy lands after we return */
    pthread_mutex_lock(&dev->lock);
    dev->mrs[mr->index] = NULL;
    dev->num_mrs--;
    softib_pd(amr->pd)->refcnt--;
    pthread_mutex_unlock(&dev->lock);
    softib_umr_free(mr);
    free(mr);
    return 0;
}

void softib_mr_table_free(softib_dev_t *dev)
{
    unsigned i;

    for (i = 0; i < SOFTIB_MR_TABLE_SIZE; i++) {
        if (dev->mrs[i] != NULL) {
            softib_direct_mr_unpublish(dev, dev->mrs[i]);
            softib_umr_free(dev->mrs[i]);
        }
        free(dev->mrs[i]);
    }
    free(dev->mrs);
}

softib_mr_t *softib_mr_lookup(softib_dev_t *dev, axon_dev_pd_t *pd, uint32_t key)
{
    unsigned index = key >> 8;
    softib_mr_t *mr;

    if ((index == 0) || (index >= SOFTIB_MR_TABLE_SIZE) ||
        ((mr = dev->mrs[index]) == NULL) || (mr->super.lkey != key) || (mr->super.pd != pd)) {
        return NULL;
    }
    return mr;
}

/* Registered memory: [addr, addr + len) inside the region, with the rights asked */
softib_access_t softib_mr_range(const softib_mr_t *mr, uint64_t addr, uint64_t len,
                                       int access)
{
    uint64_t start = (uintptr_t)mr->super.addr, end = start + mr->super.length;

    if ((addr < start) || (addr > end) || (len > end - addr)) {
        return SOFTIB_ACCESS_BAD_RANGE;
    }
    if ((mr->super.access & access) != access) {
        return SOFTIB_ACCESS_BAD_RIGHTS;
    }
    return SOFTIB_ACCESS_OK;
}

/*
 * Registered memory the application unmapped (softib_guard.h): what pinned
 * pages would do. A read sees zeros, a write is lost; the request succeeds.
 */
static void softib_mem_fault(const softib_mr_t *mr, uint64_t addr, uint64_t len,
                             softib_mem_op_t op)
{
    axon_debug("softib: %s of %llu bytes at 0x%llx (key 0x%x): no longer mapped, %s",
               (op == SOFTIB_MEM_READ) ? "read" : "write", (unsigned long long)len,
               (unsigned long long)addr, mr->super.lkey,
               (op == SOFTIB_MEM_READ) ? "read as zeros" : "dropped");
}

typedef struct {
    softib_dev_t    *dev;
    softib_mr_t     *mr;
    uint64_t         addr;
    void            *buf;
    uint64_t         len;
    int              access;
    softib_mem_op_t  op;
    unsigned         level;
    softib_access_t  ret;
} softib_mem_umr_job_t;

static void softib_mem_umr_job(void *arg)
{
    softib_mem_umr_job_t *j = arg;

    j->ret = softib_umr_access(j->dev, j->mr, j->addr, j->buf, j->len, j->access, j->op,
                               j->level);
}

/* An indirect key's access, guarded as a whole (its leaves are guarded on their own too). */
static softib_access_t softib_mem_access_umr(softib_dev_t *dev, softib_mr_t *mr, uint64_t addr,
                                             void *buf, uint64_t len, int access,
                                             softib_mem_op_t op, unsigned level)
{
    softib_mem_umr_job_t job = {dev, mr, addr, buf, len, access, op, level, SOFTIB_ACCESS_OK};

    if (softib_guard_call(softib_mem_umr_job, &job) == 0) {
        return job.ret;
    }
    if ((op == SOFTIB_MEM_READ) && (buf != NULL)) {
        memset(buf, 0, len);
    }
    softib_mem_fault(mr, addr, len, op);
    return SOFTIB_ACCESS_OK;
}

softib_access_t softib_mem_access(softib_dev_t *dev, axon_dev_pd_t *pd, uint32_t key,
                                  uint64_t addr, void *buf, uint64_t len, int access,
                                  softib_mem_op_t op, unsigned level)
{
    softib_mr_t *mr = softib_mr_lookup(dev, pd, key);
    softib_access_t ret;

    if (mr == NULL) {
        return SOFTIB_ACCESS_BAD_KEY;
    }
    if (mr->umr != NULL) {   /* the one branch indirect keys cost registered memory */
        return softib_mem_access_umr(dev, mr, addr, buf, len, access, op, level);
    }
    if ((ret = softib_mr_range(mr, addr, len, access)) != SOFTIB_ACCESS_OK) {
        return ret;
    }
    if ((op == SOFTIB_MEM_READ) &&
        softib_guard_copy(buf, (const void *)(uintptr_t)addr, len, 1)) {
        softib_mem_fault(mr, addr, len, op);
    } else if ((op == SOFTIB_MEM_WRITE) &&
               softib_guard_copy((void *)(uintptr_t)addr, buf, len, 0)) {
        softib_mem_fault(mr, addr, len, op);
    }
    return SOFTIB_ACCESS_OK;
}

softib_access_t softib_mem_resolve(softib_dev_t *dev, axon_dev_pd_t *pd, uint32_t key,
                                   uint64_t addr, uint64_t len, int access, unsigned level,
                                   void **ptr_p)
{
    softib_mr_t *mr = softib_mr_lookup(dev, pd, key);
    softib_access_t ret;

    if (mr == NULL) {
        return SOFTIB_ACCESS_BAD_KEY;
    }
    if (mr->umr != NULL) {
        return softib_umr_resolve(dev, mr, addr, len, access, level, ptr_p);
    }
    if ((ret = softib_mr_range(mr, addr, len, access)) != SOFTIB_ACCESS_OK) {
        return ret;
    }
    *ptr_p = (void *)(uintptr_t)addr;
    return SOFTIB_ACCESS_OK;
}

const void *softib_mem_ptr(softib_dev_t *dev, axon_dev_pd_t *pd, uint32_t key, uint64_t addr,
                          uint64_t len, int access)
{
    softib_mr_t *mr = softib_mr_lookup(dev, pd, key);

    if ((mr == NULL) || (mr->umr != NULL) ||
        (softib_mr_range(mr, addr, len, access) != SOFTIB_ACCESS_OK)) {
        return NULL;
    }
    return (const void *)(uintptr_t)addr;
}

const void *softib_sge_ptr(softib_dev_t *dev, axon_dev_pd_t *pd, const axon_dev_sge_t *sge,
                           int num_sge, uint32_t off, uint32_t len)
{
    int i;

    for (i = 0; i < num_sge; i++) {
        if (off < sge[i].length) {
            return (len <= sge[i].length - off) ?
                   softib_mem_ptr(dev, pd, sge[i].lkey, sge[i].addr + off, len, 0) : NULL;
        }
        off -= sge[i].length;
    }
    return NULL;
}

softib_access_t softib_sge_check(softib_dev_t *dev, axon_dev_pd_t *pd,
                                 const axon_dev_sge_t *sge, int num_sge, int access)
{
    softib_access_t ret;
    int i;

    for (i = 0; i < num_sge; i++) {
        if (sge[i].length == 0) {
            continue;
        }
        ret = softib_mr_check(dev, pd, sge[i].lkey, sge[i].addr, sge[i].length, access);
        if (ret != SOFTIB_ACCESS_OK) {
            axon_debug("softib: SGE %d (addr 0x%llx len %u lkey 0x%x) fails the access check (%d)",
                       i, (unsigned long long)sge[i].addr, sge[i].length, sge[i].lkey, ret);
            return ret;
        }
    }
    return SOFTIB_ACCESS_OK;
}

/* Walk the SGE list from byte off for len bytes; copy each checked piece. */
static softib_access_t softib_sge_copy(softib_dev_t *dev, axon_dev_pd_t *pd,
                                       const axon_dev_sge_t *sge, int num_sge, uint32_t off,
                                       uint8_t *buf, uint32_t len, int to_sge)
{
    softib_access_t ret;
    uint32_t chunk;
    int i;

    for (i = 0; (i < num_sge) && (len > 0); i++) {
        if (off >= sge[i].length) {
            off -= sge[i].length;
            continue;
        }
        chunk = sge[i].length - off;
        if (chunk > len) {
            chunk = len;
        }
        ret = softib_mem_access(dev, pd, sge[i].lkey, sge[i].addr + off, buf, chunk,
                                to_sge ? AXON_DEV_ACCESS_LOCAL_WRITE : 0,
                                to_sge ? SOFTIB_MEM_WRITE : SOFTIB_MEM_READ, 0);
        if (ret != SOFTIB_ACCESS_OK) {
            return ret;
        }
        buf += chunk;
        len -= chunk;
        off  = 0;
    }
    return (len > 0) ? SOFTIB_ACCESS_BAD_RANGE : SOFTIB_ACCESS_OK;
}

softib_access_t softib_sge_copy_from(softib_dev_t *dev, axon_dev_pd_t *pd,
                                     const axon_dev_sge_t *sge, int num_sge, uint32_t off,
                                     void *dst, uint32_t len)
{
    return softib_sge_copy(dev, pd, sge, num_sge, off, dst, len, 0);
}

softib_access_t softib_sge_copy_to(softib_dev_t *dev, axon_dev_pd_t *pd,
                                   const axon_dev_sge_t *sge, int num_sge, uint32_t off,
                                   const void *src, uint32_t len)
{
    return softib_sge_copy(dev, pd, sge, num_sge, off, (uint8_t *)(uintptr_t)src, len, 1);
}
