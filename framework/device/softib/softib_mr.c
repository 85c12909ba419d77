/*
 * Protection domains, memory regions and the access check.
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

int softib_reg_mr(axon_dev_pd_t *pd, void *addr, size_t length, int access,
                  axon_dev_mr_t **mr_p)
{
    softib_dev_t *dev = softib_dev(pd->context);
    softib_mr_t *mr;
    unsigned i, index;

    if (access & ~SOFTIB_MR_ACCESS_ALL) {
        axon_error("softib: reg_mr: unknown access flags 0x%x", access);
        return EINVAL;
    }
    /* As with verbs: remote write/atomic need local write */
    if ((access & (AXON_DEV_ACCESS_REMOTE_WRITE | AXON_DEV_ACCESS_REMOTE_ATOMIC)) &&
        !(access & AXON_DEV_ACCESS_LOCAL_WRITE)) {
        axon_error("softib: reg_mr: access 0x%x has remote write/atomic without local write",
                   access);
        return EINVAL;
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
    mr = calloc(1, sizeof(*mr));
    if (mr == NULL) {
        axon_error("softib: no memory for an MR");
        return ENOMEM;
    }

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
        free(mr);
        axon_error("softib: reg_mr: all %d MRs of %s are in use", SOFTIB_MR_TABLE_SIZE - 1,
                   dev->super.name);
        return ENOMEM;
    }
    /* Keys change on reuse of an index, so a stale key does not find the new region */
    dev->next_mr_index = index + 1;
    dev->mr_gen++;
    mr->index          = index;
    mr->super.context  = pd->context;
    mr->super.pd       = pd;
    mr->super.addr     = addr;
    mr->super.length   = length;
    mr->super.access   = access;
    mr->super.lkey     = (index << 8) | dev->mr_gen;
    mr->super.rkey     = mr->super.lkey;
    dev->mrs[index]    = mr;
    dev->num_mrs++;
    softib_pd(pd)->refcnt++;
    pthread_mutex_unlock(&dev->lock);
    __atomic_add_fetch(&softib_mr_regs, 1, __ATOMIC_RELAXED);
    *mr_p = &mr->super;
    return 0;
}

int softib_dereg_mr(axon_dev_mr_t *amr)
{
    softib_dev_t *dev = softib_dev(amr->context);
    softib_mr_t *mr   = (softib_mr_t *)amr;

    pthread_mutex_lock(&dev->lock);
    dev->mrs[mr->index] = NULL;
    dev->num_mrs--;
    softib_pd(amr->pd)->refcnt--;
    pthread_mutex_unlock(&dev->lock);
    free(mr);
    return 0;
}

void softib_mr_table_free(softib_dev_t *dev)
{
    unsigned i;

    for (i = 0; i < SOFTIB_MR_TABLE_SIZE; i++) {
        free(dev->mrs[i]);
    }
    free(dev->mrs);
}

softib_access_t softib_mr_check(softib_dev_t *dev, axon_dev_pd_t *pd, uint32_t key,
                                uint64_t addr, uint64_t len, int access)
{
    unsigned index = key >> 8;
    softib_mr_t *mr;
    uint64_t start, end;

    if ((index == 0) || (index >= SOFTIB_MR_TABLE_SIZE) ||
        ((mr = dev->mrs[index]) == NULL) || (mr->super.lkey != key) || (mr->super.pd != pd)) {
        return SOFTIB_ACCESS_BAD_KEY;
    }
    start = (uintptr_t)mr->super.addr;
    end   = start + mr->super.length;
    if ((addr < start) || (addr > end) || (len > end - addr)) {
        return SOFTIB_ACCESS_BAD_RANGE;
    }
    if ((mr->super.access & access) != access) {
        return SOFTIB_ACCESS_BAD_RIGHTS;
    }
    return SOFTIB_ACCESS_OK;
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
    uint64_t addr;
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
        addr = sge[i].addr + off;
        ret  = softib_mr_check(dev, pd, sge[i].lkey, addr, chunk,
                               to_sge ? AXON_DEV_ACCESS_LOCAL_WRITE : 0);
        if (ret != SOFTIB_ACCESS_OK) {
            return ret;
        }
        if (to_sge) {
            memcpy((void *)(uintptr_t)addr, buf, chunk);
        } else {
            memcpy(buf, (const void *)(uintptr_t)addr, chunk);
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
