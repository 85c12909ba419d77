/*
 * User-mode memory registration (seed §8.8): indirect memory keys.
 *
 * An indirect key is an MR of the key table (softib_mr.c) with a layout
 * (umr): created empty with room for max_reg_descriptors entries, given a
 * layout by a UMR_FILL that the requester executes in queue order (so later
 * WRs of the QP may use it at once), made unusable by UMR_INVALIDATE. Both
 * forms are one: repeat_count repetitions of the entries in order, entry i
 * giving byte_count bytes at addr + r * stride in repetition r; a list is one
 * repetition. An access walks the entries and reaches each piece through
 * softib_mem_access again, so each entry's key is looked up, its rights and
 * bounds checked, and a nested indirect key walked in turn, at most
 * SOFTIB_UMR_MAX_DEPTH keys deep (a chain of refills can make a cycle: the
 * walk still ends).
 *
 * Post time refuses what the WR and the objects it names show (EINVAL);
 * execution finds what only the key's state at that time tells (the key
 * gone or still filled, nesting too deep): the UMR completes with
 * LOC_PROT_ERR. Accesses through the key fail as any bad key does: a remote
 * access error for the requester, a local protection error for an SGE.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "log.h"
#include "softib.h"

#define SOFTIB_UMR_MAX_KLMS        4096   /* entries of one fill */
#define SOFTIB_UMR_MAX_INLINE_KLMS 16     /* ... carried in the WQE */
#define SOFTIB_UMR_MAX_DEPTH       4      /* indirect keys stacked, the outer one counted */
#define SOFTIB_UMR_MAX_STRIDE_DIM  1      /* the manual's current limit */
#define SOFTIB_UMR_FAST_ENTRIES    8      /* repeated layouts walked with one check per entry */

/* An entry: as posted, then (at fill) where its bytes end in one repetition */
typedef struct softib_klm {
    uint64_t addr;
    uint64_t byte_count;
    uint64_t stride;
    uint64_t end;
    uint32_t key;
} softib_klm_t;

typedef struct softib_umr {
    uint32_t      max_entries;
    uint64_t      max_access;              /* create's access_flags */
    int           valid;                   /* filled, not invalidated since */
    int           access;                  /* the fill's exp_access */
    unsigned      depth;                   /* keys stacked, itself counted (1 when fresh) */
    uint64_t      base_addr;
    uint64_t      length;                  /* repeat * block */
    uint64_t      block;                   /* bytes of one repetition */
    uint64_t      repeat;
    uint32_t      num;
    softib_klm_t *klm;
} softib_umr_t;

/* A posted UMR's operands, read when it executes */
typedef struct softib_umr_wqe {
    uint32_t                 key;          /* modified_mr's */
    int                      access;
    uint64_t                 base_addr;
    uint64_t                 repeat;
    uint32_t                 num;
    softib_klm_t            *klm;          /* the QP's inline slots or the list's */
    struct softib_mkey_list *list;         /* without INLINE, until it executes */
} softib_umr_wqe_t;

typedef struct softib_mkey_list {
    axon_dev_mkey_list_t super;
    axon_list_link_t     link;             /* dev->mkey_lists */
    unsigned             busy;             /* posted fills it holds the entries of */
    softib_klm_t        *klm;
} softib_mkey_list_t;

/* This process's indirect keys created and fills executed (tests count them) */
static uint64_t softib_umr_keys, softib_umr_fills;

uint64_t softib_umr_key_count(void)
{
    return __atomic_load_n(&softib_umr_keys, __ATOMIC_RELAXED);
}

uint64_t softib_umr_fill_count(void)
{
    return __atomic_load_n(&softib_umr_fills, __ATOMIC_RELAXED);
}

void softib_umr_caps(axon_dev_attr_t *attr)
{
    attr->umr.max_klm_list_size        = SOFTIB_UMR_MAX_KLMS;
    attr->umr.max_send_wqe_inline_klms = SOFTIB_UMR_MAX_INLINE_KLMS;
    attr->umr.max_umr_recursion_depth  = SOFTIB_UMR_MAX_DEPTH;
    attr->umr.max_umr_stride_dimension = SOFTIB_UMR_MAX_STRIDE_DIM;
}

static int softib_umr_enabled(softib_dev_t *dev, const char *what)
{
    if (dev->attr.cap_flags & AXON_DEV_CAP_UMR) {
        return 1;
    }
    axon_error("softib: %s: UMR is masked off on %s", what, dev->super.name);
    return 0;
}

/* ------------------------------------------------------------ objects */

int softib_create_mr(axon_dev_pd_t *pd, axon_dev_mr_init_attr_t *attr, axon_dev_mr_t **mr_p)
{
    softib_dev_t *dev = softib_dev(pd->context);
    softib_mr_t *mr;
    softib_umr_t *umr;
    int ret;

    if (!softib_umr_enabled(dev, "create_mr")) {
        return EOPNOTSUPP;
    }
    if ((attr == NULL) || (attr->create_flags != AXON_DEV_MR_INDIRECT_KLMS) ||
        (attr->comp_mask != 0)) {
        axon_error("softib: create_mr: create_flags 0x%x, comp_mask 0x%x (an indirect key: "
                   "AXON_DEV_MR_INDIRECT_KLMS, 0)", attr ? attr->create_flags : 0,
                   attr ? attr->comp_mask : 0);
        return EINVAL;
    }
    if ((attr->max_reg_descriptors == 0) ||
        (attr->max_reg_descriptors > dev->attr.umr.max_klm_list_size)) {
        axon_error("softib: create_mr: max_reg_descriptors %llu (1..max_klm_list_size %u)",
                   (unsigned long long)attr->max_reg_descriptors,
                   dev->attr.umr.max_klm_list_size);
        return EINVAL;
    }
    if ((ret = softib_mr_access_check(attr->access_flags, "create_mr")) != 0) {
        return ret;
    }
    mr  = calloc(1, sizeof(*mr));
    umr = calloc(1, sizeof(*umr));
    if ((mr == NULL) || (umr == NULL) ||
        ((umr->klm = calloc(attr->max_reg_descriptors, sizeof(*umr->klm))) == NULL)) {
        axon_error("softib: no memory for an indirect key of %llu entries",
                   (unsigned long long)attr->max_reg_descriptors);
        free(umr);
        free(mr);
        return ENOMEM;
    }
    umr->max_entries = (uint32_t)attr->max_reg_descriptors;
    umr->max_access  = attr->access_flags;
    umr->depth       = 1;
    mr->umr          = umr;
    mr->super.access = (int)attr->access_flags;
    if ((ret = softib_mr_add(dev, pd, mr, "create_mr")) != 0) {
        softib_umr_free(mr);
        free(mr);
        return ret;
    }
    __atomic_add_fetch(&softib_umr_keys, 1, __ATOMIC_RELAXED);
    *mr_p = &mr->super;
    return 0;
}

void softib_umr_free(softib_mr_t *mr)
{
    if (mr->umr != NULL) {
        free(mr->umr->klm);
        free(mr->umr);
        mr->umr = NULL;
    }
}

int softib_query_mkey(axon_dev_mr_t *amr, axon_dev_mkey_attr_t *attr)
{
    softib_mr_t *mr = (softib_mr_t *)amr;

    if (mr->umr == NULL) {
        axon_error("softib: query_mkey: key 0x%x is registered memory, not an indirect key",
                   amr->lkey);
        return EINVAL;
    }
    memset(attr, 0, sizeof(*attr));
    attr->n_mkey_entries = (int)mr->umr->max_entries;
    return 0;
}

int softib_alloc_mkey_list(axon_dev_pd_t *pd, uint32_t max_klm_list_size,
                           axon_dev_mkey_list_t **list_p)
{
    softib_dev_t *dev = softib_dev(pd->context);
    softib_mkey_list_t *list;

    if (!softib_umr_enabled(dev, "alloc_mkey_list")) {
        return EOPNOTSUPP;
    }
    if ((max_klm_list_size == 0) || (max_klm_list_size > dev->attr.umr.max_klm_list_size)) {
        axon_error("softib: alloc_mkey_list: max_klm_list_size %u (1..%u)", max_klm_list_size,
                   dev->attr.umr.max_klm_list_size);
        return EINVAL;
    }
    list = calloc(1, sizeof(*list));
    if ((list == NULL) || ((list->klm = calloc(max_klm_list_size, sizeof(*list->klm))) == NULL)) {
        axon_error("softib: no memory for a list of %u UMR entries", max_klm_list_size);
        free(list);
        return ENOMEM;
    }
    list->super.max_klm_list_size = max_klm_list_size;
    list->super.context           = pd->context;
    pthread_mutex_lock(&dev->lock);
    axon_list_add_tail(&dev->mkey_lists, &list->link);
    pthread_mutex_unlock(&dev->lock);
    *list_p = &list->super;
    return 0;
}

int softib_dealloc_mkey_list(axon_dev_mkey_list_t *alist)
{
    softib_dev_t *dev        = softib_dev(alist->context);
    softib_mkey_list_t *list = (softib_mkey_list_t *)alist;

    pthread_mutex_lock(&dev->lock);
    if (list->busy) {
        pthread_mutex_unlock(&dev->lock);
        axon_debug("softib: dealloc_mkey_list: %u posted fills still read it", list->busy);
        return EBUSY;
    }
    axon_list_del(&list->link);
    pthread_mutex_unlock(&dev->lock);
    free(list->klm);
    free(list);
    return 0;
}

void softib_mkey_lists_free(softib_dev_t *dev)
{
    softib_mkey_list_t *list, *next;

    axon_list_for_each_safe(list, next, &dev->mkey_lists, link) {
        free(list->klm);
        free(list);
    }
}

int softib_umr_qp_init(softib_qp_t *qp, uint32_t max_inl_klms)
{
    unsigned i;

    qp->sq_umr = calloc(qp->sq_size, sizeof(*qp->sq_umr));
    qp->sq_klm = max_inl_klms ? calloc((size_t)qp->sq_size * max_inl_klms, sizeof(*qp->sq_klm))
                              : NULL;
    if ((qp->sq_umr == NULL) || (max_inl_klms && (qp->sq_klm == NULL))) {
        return ENOMEM;
    }
    qp->max_inl_klms = max_inl_klms;
    for (i = 0; i < qp->sq_size; i++) {
        qp->sq[i].umr = &qp->sq_umr[i];
    }
    return 0;
}

void softib_umr_qp_free(softib_qp_t *qp)
{
    free(qp->sq_klm);
    free(qp->sq_umr);
}

/* ------------------------------------------------------------ post time */

/* Entry i of a fill as the manual gives it; 0 or EINVAL if a repeat block lacks its arrays */
static int softib_umr_entry(const axon_dev_send_wr_t *wr, uint32_t i, softib_klm_t *klm,
                            axon_dev_mr_t **mr_p)
{
    const axon_dev_mem_repeat_block_t *rb;

    if (wr->wr.umr.umr_type == AXON_DEV_UMR_MR_LIST) {
        klm->addr       = wr->wr.umr.mem_list.mem_reg_list[i].base_addr;
        klm->byte_count = wr->wr.umr.mem_list.mem_reg_list[i].length;
        klm->stride     = 0;
        *mr_p           = wr->wr.umr.mem_list.mem_reg_list[i].mr;
        return 0;
    }
    rb = &wr->wr.umr.mem_list.rb.mem_repeat_block_list[i];
    if ((rb->byte_count == NULL) || (rb->stride == NULL)) {
        axon_error("softib: post_send: UMR_FILL repeat entry %u without byte_count or stride", i);
        return EINVAL;
    }
    klm->addr       = rb->base_addr;
    klm->byte_count = rb->byte_count[0];
    klm->stride     = rb->stride[0];
    *mr_p           = rb->mr;
    return 0;
}

/*
 * An entry of a fill of key, repeated repeat times: it names memory of the
 * key's PD other than the key, its repetitions do not overlap, and in
 * registered memory every repetition lies inside the region.
 */
static int softib_umr_entry_check(softib_dev_t *dev, const softib_mr_t *key, uint32_t i,
                                  const softib_klm_t *klm, const axon_dev_mr_t *amr,
                                  uint64_t repeat)
{
    const softib_mr_t *mr = (const softib_mr_t *)amr;
    uint64_t span = klm->byte_count, start, end;

    if ((amr == NULL) || (amr->context != key->super.context) || (amr == &key->super)) {
        axon_error("softib: post_send: UMR_FILL entry %u names %s", i,
                   (amr == NULL) ? "no MR" : (amr == &key->super) ? "the key it fills"
                                                                  : "an MR of another device");
        return EINVAL;
    }
    if (amr->pd != key->super.pd) {
        axon_error("softib: post_send: UMR_FILL entry %u: key 0x%x is of PD %u, the indirect "
                   "key 0x%x of PD %u", i, amr->lkey, amr->pd->handle, key->super.lkey,
                   key->super.pd->handle);
        return EINVAL;
    }
    if (repeat > 1) {
        if (klm->byte_count > klm->stride) {
            axon_error("softib: post_send: UMR_FILL entry %u: byte_count %llu over its stride "
                       "%llu (its repetitions would overlap)", i,
                       (unsigned long long)klm->byte_count, (unsigned long long)klm->stride);
            return EINVAL;
        }
        if (klm->stride > (UINT64_MAX - klm->byte_count) / (repeat - 1)) {
            axon_error("softib: post_send: UMR_FILL entry %u: stride %llu x %llu repetitions "
                       "overflows", i, (unsigned long long)klm->stride,
                       (unsigned long long)repeat);
            return EINVAL;
        }
        span = (repeat - 1) * klm->stride + klm->byte_count;
    }
    if (mr->umr != NULL) {
        if (mr->umr->valid && (mr->umr->depth >= dev->attr.umr.max_umr_recursion_depth)) {
            axon_error("softib: post_send: UMR_FILL entry %u: key 0x%x stacks %u keys, "
                       "max_umr_recursion_depth %u", i, amr->lkey, mr->umr->depth + 1,
                       dev->attr.umr.max_umr_recursion_depth);
            return EINVAL;
        }
        return 0;   /* its bounds are its layout's when the access comes */
    }
    start = (uintptr_t)amr->addr;
    end   = start + amr->length;
    if (klm->byte_count && ((klm->addr < start) || (klm->addr > end) || (span > end - klm->addr))) {
        axon_error("softib: post_send: UMR_FILL entry %u: 0x%llx..+%llu is outside its MR "
                   "0x%llx..+%zu", i, (unsigned long long)klm->addr, (unsigned long long)span,
                   (unsigned long long)start, amr->length);
        return EINVAL;
    }
    return 0;
}

/* Where a fill's entries come from: inline (the QP's room) or the WR's list (free, large enough) */
static int softib_umr_source_check(softib_qp_t *qp, const axon_dev_send_wr_t *wr)
{
    const softib_mkey_list_t *list = (const softib_mkey_list_t *)wr->wr.umr.memory_objects;
    uint32_t num = wr->wr.umr.num_mrs;

    if (wr->send_flags & AXON_DEV_SEND_INLINE) {
        if (num > qp->max_inl_klms) {
            axon_error("softib: post_send: UMR_FILL of %u entries inline, QP 0x%x takes %u "
                       "(max_inl_send_klms)", num, qp->super.qp_num, qp->max_inl_klms);
            return EINVAL;
        }
        return 0;
    }
    if ((list == NULL) || (list->super.context != qp->super.context) ||
        (list->super.max_klm_list_size < num)) {
        axon_error("softib: post_send: UMR_FILL of %u entries without INLINE needs "
                   "memory_objects of this device holding that many (%p, %u)", num,
                   (const void *)list, list ? list->super.max_klm_list_size : 0);
        return EINVAL;
    }
    if (list->busy) {
        axon_error("softib: post_send: UMR_FILL: memory_objects still holds the entries of a "
                   "fill not executed yet");
        return EINVAL;
    }
    return 0;
}

/* What a fill says of its layout: the rights, the form, the entries, the size */
static int softib_umr_fill_check(softib_qp_t *qp, const axon_dev_send_wr_t *wr,
                                 const softib_mr_t *key)
{
    softib_dev_t *dev = softib_qp_dev(qp);
    uint64_t repeat = 1, block = 0, max = dev->attr.max_mr_size;
    uint32_t num = wr->wr.umr.num_mrs, i;
    axon_dev_mr_t *amr;
    softib_klm_t klm;
    int ret;

    if ((ret = softib_mr_access_check(wr->wr.umr.exp_access, "post_send: UMR_FILL")) != 0) {
        return ret;
    }
    if (wr->wr.umr.exp_access & ~key->umr->max_access) {
        axon_error("softib: post_send: UMR_FILL: exp_access 0x%llx beyond the key's "
                   "access_flags 0x%llx", (unsigned long long)wr->wr.umr.exp_access,
                   (unsigned long long)key->umr->max_access);
        return EINVAL;
    }
    if ((num == 0) || (num > key->umr->max_entries)) {
        axon_error("softib: post_send: UMR_FILL: num_mrs %u (key 0x%x holds 1..%u)", num,
                   key->super.lkey, key->umr->max_entries);
        return EINVAL;
    }
    if ((ret = softib_umr_source_check(qp, wr)) != 0) {
        return ret;
    }
    if (wr->wr.umr.umr_type == AXON_DEV_UMR_REPEAT) {
        if ((wr->wr.umr.mem_list.rb.stride_dim == 0) ||
            (wr->wr.umr.mem_list.rb.stride_dim > dev->attr.umr.max_umr_stride_dimension) ||
            (wr->wr.umr.mem_list.rb.repeat_count == NULL) ||
            (wr->wr.umr.mem_list.rb.mem_repeat_block_list == NULL) ||
            (wr->wr.umr.mem_list.rb.repeat_count[0] == 0)) {
            axon_error("softib: post_send: UMR_FILL repeat: stride_dim %u (1..%u), "
                       "repeat_count %p (>= 1), entries %p",
                       wr->wr.umr.mem_list.rb.stride_dim,
                       dev->attr.umr.max_umr_stride_dimension,
                       (void *)wr->wr.umr.mem_list.rb.repeat_count,
                       (void *)wr->wr.umr.mem_list.rb.mem_repeat_block_list);
            return EINVAL;
        }
        repeat = wr->wr.umr.mem_list.rb.repeat_count[0];
    } else if ((wr->wr.umr.umr_type != AXON_DEV_UMR_MR_LIST) ||
               (wr->wr.umr.mem_list.mem_reg_list == NULL)) {
        axon_error("softib: post_send: UMR_FILL of type %u with entries %p (MR_LIST or REPEAT)",
                   wr->wr.umr.umr_type, (void *)wr->wr.umr.mem_list.mem_reg_list);
        return EINVAL;
    }
    for (i = 0; i < num; i++) {
        if ((ret = softib_umr_entry(wr, i, &klm, &amr)) != 0) {
            return ret;
        }
        if ((ret = softib_umr_entry_check(dev, key, i, &klm, amr, repeat)) != 0) {
            return ret;
        }
        if (klm.byte_count > max - block) {
            block = max + 1;
            break;
        }
        block += klm.byte_count;
    }
    if ((block > max / repeat) || (wr->wr.umr.base_addr + block * repeat < wr->wr.umr.base_addr)) {
        axon_error("softib: post_send: UMR_FILL: %llu repetitions of %s%llu bytes at 0x%llx "
                   "(max_mr_size %llu, the address space)", (unsigned long long)repeat,
                   (block > max) ? "over " : "", (unsigned long long)((block > max) ? max : block),
                   (unsigned long long)wr->wr.umr.base_addr, (unsigned long long)max);
        return EINVAL;
    }
    return 0;
}

int softib_umr_check(softib_qp_t *qp, const axon_dev_send_wr_t *wr)
{
    const softib_mr_t *key = (const softib_mr_t *)wr->wr.umr.modified_mr;

    if (!(qp->create_flags & AXON_DEV_QP_CREATE_UMR)) {
        axon_error("softib: post_send: UMR on QP 0x%x, created without AXON_DEV_QP_CREATE_UMR",
                   qp->super.qp_num);
        return EINVAL;
    }
    if ((key == NULL) || (key->super.context != qp->super.context) || (key->umr == NULL) ||
        (key->super.pd != qp->super.pd)) {
        axon_error("softib: post_send: UMR: modified_mr %p is not an indirect key of QP "
                   "0x%x's PD", (const void *)key, qp->super.qp_num);
        return EINVAL;
    }
    return (wr->opcode == AXON_DEV_WR_UMR_FILL) ? softib_umr_fill_check(qp, wr, key) : 0;
}

void softib_umr_copy(softib_qp_t *qp, softib_send_wqe_t *wqe, const axon_dev_send_wr_t *wr)
{
    softib_umr_wqe_t *uw = wqe->umr;
    softib_mkey_list_t *list;
    axon_dev_mr_t *amr = NULL;
    uint32_t i;

    uw->key  = wr->wr.umr.modified_mr->lkey;
    uw->list = NULL;
    uw->num  = 0;
    if (wr->opcode != AXON_DEV_WR_UMR_FILL) {
        return;
    }
    uw->access    = (int)wr->wr.umr.exp_access;
    uw->base_addr = wr->wr.umr.base_addr;
    uw->num       = wr->wr.umr.num_mrs;
    uw->repeat    = (wr->wr.umr.umr_type == AXON_DEV_UMR_REPEAT) ?
                    wr->wr.umr.mem_list.rb.repeat_count[0] : 1;
    if (wr->send_flags & AXON_DEV_SEND_INLINE) {
        uw->klm = &qp->sq_klm[(size_t)(wqe - qp->sq) * qp->max_inl_klms];
    } else {
        list     = (softib_mkey_list_t *)wr->wr.umr.memory_objects;
        uw->klm  = list->klm;
        uw->list = list;
        list->busy++;
    }
    for (i = 0; i < uw->num; i++) {
        softib_umr_entry(wr, i, &uw->klm[i], &amr);   /* checked: cannot fail */
        uw->klm[i].key = amr->lkey;
    }
}

/* ------------------------------------------------------------ execution */

/* Give the key its layout: it must be free, its entries not stack it too deep */
static axon_dev_wc_status_t softib_umr_fill(softib_dev_t *dev, softib_mr_t *key,
                                            const softib_umr_wqe_t *uw)
{
    softib_umr_t *umr = key->umr;
    unsigned depth = 1;
    softib_mr_t *nested;
    uint64_t block = 0;
    uint32_t i;

    if (umr->valid) {
        axon_debug("softib: UMR_FILL of key 0x%x, which is filled: invalidate it first",
                   key->super.lkey);
        return AXON_DEV_WC_LOC_PROT_ERR;
    }
    for (i = 0; i < uw->num; i++) {
        nested = softib_mr_lookup(dev, key->super.pd, uw->klm[i].key);
        if ((nested != NULL) && (nested->umr != NULL) && (nested->umr->depth >= depth)) {
            depth = nested->umr->depth + 1;
        }
    }
    if (depth > dev->attr.umr.max_umr_recursion_depth) {
        axon_debug("softib: UMR_FILL of key 0x%x would stack %u keys (max %u)", key->super.lkey,
                   depth, dev->attr.umr.max_umr_recursion_depth);
        return AXON_DEV_WC_LOC_PROT_ERR;
    }
    for (i = 0; i < uw->num; i++) {
        umr->klm[i]     = uw->klm[i];
        block          += uw->klm[i].byte_count;
        umr->klm[i].end = block;
    }
    umr->num       = uw->num;
    umr->repeat    = uw->repeat;
    umr->block     = block;
    umr->length    = block * uw->repeat;
    umr->base_addr = uw->base_addr;
    umr->access    = uw->access;
    umr->depth     = depth;
    umr->valid     = 1;
    __atomic_add_fetch(&softib_umr_fills, 1, __ATOMIC_RELAXED);
    return AXON_DEV_WC_SUCCESS;
}

static axon_dev_wc_status_t softib_umr_exec(softib_qp_t *qp, softib_send_wqe_t *wqe)
{
    softib_dev_t *dev    = softib_qp_dev(qp);
    softib_umr_wqe_t *uw = wqe->umr;
    softib_mr_t *key     = softib_mr_lookup(dev, qp->super.pd, uw->key);

    if (uw->list != NULL) {
        uw->list->busy--;   /* its entries are read now (below) or never */
        uw->list = NULL;
    }
    if ((key == NULL) || (key->umr == NULL)) {
        axon_debug("softib: QP 0x%x: UMR of key 0x%x, deregistered meanwhile", qp->super.qp_num,
                   uw->key);
        return AXON_DEV_WC_LOC_PROT_ERR;
    }
    if (wqe->opcode == AXON_DEV_WR_UMR_INVALIDATE) {
        key->umr->valid = 0;
        return AXON_DEV_WC_SUCCESS;
    }
    return softib_umr_fill(dev, key, uw);
}

int softib_umr_req(softib_qp_t *qp, softib_send_wqe_t *wqe)
{
    if (qp->sq_req != qp->sq_started) {
        qp->sq_req++;   /* executed before the requester went back: no packet to resend */
        return 1;
    }
    /* FENCE: the key's earlier users are done (their retransmissions would read it again) */
    if ((wqe->flags & AXON_DEV_SEND_FENCE) && (qp->sq_head != qp->sq_req)) {
        return 0;
    }
    if (wqe->status < 0) {
        wqe->status = softib_umr_exec(qp, wqe);
    }
    if (wqe->status != AXON_DEV_WC_SUCCESS) {
        if (qp->sq_head == qp->sq_req) {   /* an error completes after everything before it */
            softib_qp_complete_send(qp, wqe, (axon_dev_wc_status_t)wqe->status);
            qp->sq_head++;
            softib_qp_error(qp);
        }
        return 0;
    }
    /* No PSN of its own: it completes when everything before it has */
    wqe->first_psn = qp->req.psn;
    wqe->npkts     = 0;
    wqe->rcvd      = 0;
    qp->sq_started++;
    if (qp->sq_head == qp->sq_req) {
        softib_qp_complete_send(qp, wqe, AXON_DEV_WC_SUCCESS);
        qp->sq_head++;
    }
    qp->sq_req++;
    return 1;
}

void softib_umr_drop(softib_qp_t *qp, unsigned from)
{
    softib_send_wqe_t *wqe;
    unsigned n;

    if (qp->sq_umr == NULL) {
        return;
    }
    for (n = from; n != qp->sq_tail; n++) {
        wqe = softib_sq_wqe(qp, n);
        if (softib_wr_is_umr(wqe->opcode) && (wqe->umr->list != NULL)) {
            wqe->umr->list->busy--;
            wqe->umr->list = NULL;
        }
    }
}

/* ------------------------------------------------------------ access */

/*
 * Where [addr, addr + len) starts in key mr's layout (repetition, byte of
 * it), once the key is usable at this depth with the rights asked.
 */
static softib_access_t softib_umr_locate(const softib_mr_t *mr, uint64_t addr, uint64_t len,
                                         int access, unsigned level, uint64_t *rep_p,
                                         uint64_t *in_p)
{
    const softib_umr_t *umr = mr->umr;
    uint64_t off;

    if (!umr->valid || (level >= SOFTIB_UMR_MAX_DEPTH)) {
        return SOFTIB_ACCESS_BAD_KEY;
    }
    if ((umr->access & access) != access) {
        return SOFTIB_ACCESS_BAD_RIGHTS;
    }
    off = addr - umr->base_addr;
    if ((addr < umr->base_addr) || (off > umr->length) || (len > umr->length - off)) {
        return SOFTIB_ACCESS_BAD_RANGE;
    }
    *rep_p = umr->block ? off / umr->block : 0;
    *in_p  = umr->block ? off % umr->block : 0;
    return SOFTIB_ACCESS_OK;
}

/* The entry holding byte in of a repetition (in < block): the first ending past it */
static uint32_t softib_umr_find(const softib_umr_t *umr, uint64_t in)
{
    uint32_t lo = 0, hi = umr->num - 1, mid;

    while (lo < hi) {
        mid = lo + (hi - lo) / 2;
        if (umr->klm[mid].end > in) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    return lo;
}

/*
 * One piece of a layout: a strided vector's block is often a few dozen
 * bytes, moved inline (two overlapping loads and stores) rather than by a
 * call each; the packet and the memory never overlap.
 */
static inline void softib_umr_piece(uint8_t *d, const uint8_t *s, uint64_t n)
{
    uint64_t a[4], b[4];

    if ((n < 16) || (n > 64)) {
        memcpy(d, s, n);
    } else if (n <= 32) {
        __builtin_memcpy(a, s, 16);
        __builtin_memcpy(b, s + n - 16, 16);
        __builtin_memcpy(d, a, 16);
        __builtin_memcpy(d + n - 16, b, 16);
    } else {
        __builtin_memcpy(a, s, 32);
        __builtin_memcpy(b, s + n - 32, 32);
        __builtin_memcpy(d, a, 32);
        __builtin_memcpy(d + n - 32, b, 32);
    }
}

/*
 * A strided vector (one entry) from the start of a repetition, whole
 * repetitions: block after block, no entry bookkeeping between them.
 */
static void softib_umr_strided(const softib_klm_t *klm, uint64_t rep, uint8_t *p, uint64_t len,
                               softib_mem_op_t op)
{
    uint8_t *at = (uint8_t *)(uintptr_t)(klm->addr + rep * klm->stride);
    uint64_t n  = len / klm->byte_count;

    if (op == SOFTIB_MEM_READ) {
        for (; n > 0; n--, p += klm->byte_count, at += klm->stride) {
            softib_umr_piece(p, at, klm->byte_count);
        }
    } else {
        for (; n > 0; n--, p += klm->byte_count, at += klm->stride) {
            softib_umr_piece(at, p, klm->byte_count);
        }
    }
}

/*
 * A repeated layout of few entries naming registered memory (a strided
 * vector, its blocks' pieces): each entry's region is looked up and checked
 * once over every repetition [rep, last] the access reaches, then the
 * pieces are copied without a lookup each. 0 when the fast walk does not
 * apply or a check fails (the entry-by-entry walk then finds and reports it).
 */
static int softib_umr_access_repeat(softib_dev_t *dev, const softib_mr_t *mr, uint64_t rep,
                                    uint64_t in, uint8_t *p, uint64_t len, int access,
                                    softib_mem_op_t op)
{
    const softib_umr_t *umr = mr->umr;
    uint64_t last = rep + (in + len - 1) / umr->block, chunk, at;
    const softib_klm_t *klm;
    const softib_mr_t *e;
    uint32_t i;

    if ((umr->num > SOFTIB_UMR_FAST_ENTRIES) || (umr->repeat == 1)) {
        return 0;
    }
    for (i = 0; i < umr->num; i++) {
        klm = &umr->klm[i];
        e   = softib_mr_lookup(dev, mr->super.pd, klm->key);
        if ((e == NULL) || (e->umr != NULL) ||
            (softib_mr_range(e, klm->addr + rep * klm->stride,
                             (last - rep) * klm->stride + klm->byte_count, access) !=
             SOFTIB_ACCESS_OK)) {
            return 0;
        }
    }
    if (op == SOFTIB_MEM_CHECK) {
        return 1;
    }
    if ((umr->num == 1) && (in == 0) && (umr->klm[0].byte_count != 0) &&
        (len % umr->klm[0].byte_count == 0)) {
        softib_umr_strided(&umr->klm[0], rep, p, len, op);
        return 1;
    }
    for (i = softib_umr_find(umr, in); len > 0;) {
        klm   = &umr->klm[i];
        chunk = klm->end - in;
        chunk = (chunk > len) ? len : chunk;
        at    = klm->addr + rep * klm->stride + (in - (klm->end - klm->byte_count));
        if (op == SOFTIB_MEM_READ) {
            softib_umr_piece(p, (const uint8_t *)(uintptr_t)at, chunk);
        } else {
            softib_umr_piece((uint8_t *)(uintptr_t)at, p, chunk);
        }
        p   += chunk;
        len -= chunk;
        in  += chunk;
        if (++i == umr->num) {
            i  = 0;
            in = 0;
            rep++;
        }
    }
    return 1;
}

softib_access_t softib_umr_access(softib_dev_t *dev, softib_mr_t *mr, uint64_t addr,
                                  void *buf, uint64_t len, int access, softib_mem_op_t op,
                                  unsigned level)
{
    const softib_umr_t *umr = mr->umr;
    const softib_klm_t *klm;
    uint8_t *p = buf;
    uint64_t rep, in, chunk;
    softib_access_t ret;
    uint32_t i;

    if (((ret = softib_umr_locate(mr, addr, len, access, level, &rep, &in)) != SOFTIB_ACCESS_OK) ||
        (len == 0)) {
        return ret;
    }
    if (((p != NULL) || (op == SOFTIB_MEM_CHECK)) &&
        softib_umr_access_repeat(dev, mr, rep, in, p, len, access, op)) {
        return SOFTIB_ACCESS_OK;
    }
    for (i = softib_umr_find(umr, in); len > 0;) {
        klm   = &umr->klm[i];
        chunk = klm->end - in;
        if (chunk > len) {
            chunk = len;
        }
        if (chunk > 0) {
            ret = softib_mem_access(dev, mr->super.pd, klm->key,
                                    klm->addr + rep * klm->stride + (in - (klm->end -
                                                                           klm->byte_count)),
                                    p, chunk, access, op, level + 1);
            if (ret != SOFTIB_ACCESS_OK) {
                return ret;
            }
            p    = p ? p + chunk : NULL;
            len -= chunk;
            in  += chunk;
        }
        if (++i == umr->num) {
            i  = 0;
            in = 0;
            rep++;
        }
    }
    return SOFTIB_ACCESS_OK;
}

softib_access_t softib_umr_resolve(softib_dev_t *dev, softib_mr_t *mr, uint64_t addr,
                                   uint64_t len, int access, unsigned level, void **ptr_p)
{
    const softib_klm_t *klm;
    uint64_t rep, in;
    softib_access_t ret;

    if ((ret = softib_umr_locate(mr, addr, len, access, level, &rep, &in)) != SOFTIB_ACCESS_OK) {
        return ret;
    }
    if (len == 0) {
        return SOFTIB_ACCESS_BAD_RANGE;
    }
    klm = &mr->umr->klm[softib_umr_find(mr->umr, in)];
    if (in + len > klm->end) {
        return SOFTIB_ACCESS_BAD_RANGE;   /* the operand spans two entries: not one location */
    }
    ret = softib_mem_resolve(dev, mr->super.pd, klm->key,
                             klm->addr + rep * klm->stride + (in - (klm->end - klm->byte_count)),
                             len, access, level + 1, ptr_p);
    /* atomic where it lands too: aligned in the key's addresses is not enough */
    if ((ret == SOFTIB_ACCESS_OK) && ((uintptr_t)*ptr_p & (len - 1))) {
        return SOFTIB_ACCESS_BAD_RANGE;
    }
    return ret;
}
