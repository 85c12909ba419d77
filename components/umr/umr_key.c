/*
 * Layout keys by user-mode memory registration (umr.h). A key is two
 * device objects: a registration of the span of the pieces (one MR, so the
 * entries need no registration each) and an indirect key filled with the
 * layout, in the device's repeat form when the layout is a forward stride
 * of blocks (one entry per run of a block), else a list of runs. A layout
 * of more entries than one key takes is split into parts, a key each, and
 * one outer key in the layout's form takes each part's bytes in turn (two
 * levels: up to max_klm_list_size squared entries). The fill runs on the
 * service's own RC QP, connected to itself, and is waited for: the key is
 * usable by any QP of the PD once its fill has completed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "log.h"
#include "sys.h"
#include "umr.h"

#define AXON_UMR_QP_WRS       4
#define AXON_UMR_FILL_TIMEOUT 10.0   /* seconds: a fill executes at the requester */

struct axon_umr {
    axon_verbs_dev_t     *dev;
    pthread_mutex_t       lock;       /* one fill at a time on qp */
    axon_dev_cq_t        *cq;
    axon_dev_qp_t        *qp;
    uint32_t              max_inline; /* entries a fill carries in its WR */
    axon_dev_mkey_list_t *list;       /* for longer fills: the longest so far */
};

/* RESET to RTS, connected to itself: UMRs execute at the requester, nothing travels. */
static axon_status_t axon_umr_qp_up(axon_umr_t *umr)
{
    uint8_t buf[AXON_VERBS_DEV_ADDR_LEN];
    axon_verbs_rc_peer_t self;
    axon_status_t status;

    status = axon_verbs_qp_rc_init(umr->dev, umr->qp);
    if (status != AXON_OK) {
        return status;
    }
    memset(&self, 0, sizeof(self));
    axon_verbs_dev_addr_pack(umr->dev, buf);
    axon_verbs_dev_addr_unpack(buf, &self.addr);
    self.qpn           = umr->qp->qp_num;
    self.path_mtu      = axon_verbs_path_mtu(umr->dev, &self.addr);
    self.timeout       = 14;
    self.retry_cnt     = 7;
    self.rnr_retry     = 7;
    self.min_rnr_timer = 12;
    self.max_rd_atomic = 1;
    return axon_verbs_qp_rc_connect(umr->dev, umr->qp, &self);
}

axon_status_t axon_umr_open(axon_verbs_dev_t *dev, axon_umr_t **umr_p)
{
    axon_verbs_qp_params_t params;
    axon_dev_qp_cap_t cap;
    axon_umr_t *umr;
    axon_status_t status;

    if (!(dev->dev_attr.cap_flags & AXON_DEV_CAP_UMR)) {
        axon_debug("umr: %s has no user-mode memory registration: no layout keys", dev->name);
        return AXON_ERR_UNSUPPORTED;
    }
    umr = calloc(1, sizeof(*umr));
    if (umr == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    umr->dev = dev;
    pthread_mutex_init(&umr->lock, NULL);
    status = axon_verbs_cq_create(dev, AXON_UMR_QP_WRS, &umr->cq);
    if (status != AXON_OK) {
        goto err;
    }
    memset(&params, 0, sizeof(params));
    params.type         = AXON_DEV_QPT_RC;
    params.send_cq      = umr->cq;
    params.recv_cq      = umr->cq;
    params.max_send_wr  = AXON_UMR_QP_WRS;
    params.max_recv_wr  = 1;
    params.create_flags = AXON_DEV_QP_CREATE_UMR;
    params.max_inl_klms = dev->dev_attr.umr.max_send_wqe_inline_klms;
    status = axon_verbs_qp_create(dev, &params, &umr->qp, &cap);
    if (status != AXON_OK) {
        goto err;
    }
    umr->max_inline = params.max_inl_klms;
    status = axon_umr_qp_up(umr);
    if (status != AXON_OK) {
        goto err;
    }
    *umr_p = umr;
    return AXON_OK;

err:
    axon_umr_close(umr);
    return status;
}

void axon_umr_close(axon_umr_t *umr)
{
    if (umr->qp != NULL) {
        axon_verbs_qp_destroy(umr->qp);
    }
    if (umr->list != NULL) {
        (void)axon_dev_dealloc_mkey_list(umr->list);
    }
    if (umr->cq != NULL) {
        (void)axon_dev_destroy_cq(umr->cq);
    }
    pthread_mutex_destroy(&umr->lock);
    free(umr);
}

/* Post wr (signaled) and wait for its completion; caller holds umr->lock. */
static axon_status_t axon_umr_exec(axon_umr_t *umr, axon_dev_send_wr_t *wr, const char *what)
{
    double deadline = axon_sys_time_sec() + AXON_UMR_FILL_TIMEOUT;
    axon_dev_send_wr_t *bad;
    axon_dev_wc_t wc;
    int ret;

    ret = axon_dev_post_send(umr->qp, wr, &bad);
    if (ret != 0) {
        axon_error("umr: %s: %s of key 0x%x: post_send: %s", umr->dev->name, what,
                   wr->wr.umr.modified_mr->lkey, strerror(ret));
        return (ret == ENOMEM) ? AXON_ERR_NO_RESOURCE : AXON_ERR_INVALID_PARAM;
    }
    while ((ret = axon_dev_poll_cq(umr->cq, 1, &wc)) == 0) {
        if (axon_sys_time_sec() > deadline) {
            axon_error("umr: %s: %s of key 0x%x: no completion in %.0f s", umr->dev->name, what,
                       wr->wr.umr.modified_mr->lkey, AXON_UMR_FILL_TIMEOUT);
            return AXON_ERR_TIMED_OUT;
        }
    }
    if ((ret < 0) || (wc.status != AXON_DEV_WC_SUCCESS)) {
        axon_error("umr: %s: %s of key 0x%x: %s", umr->dev->name, what,
                   wr->wr.umr.modified_mr->lkey,
                   (ret < 0) ? "poll_cq failed" : axon_dev_wc_status_str(wc.status));
        return AXON_ERR_IO_ERROR;
    }
    return AXON_OK;
}

/* A list to carry n entries (fills of more than fit inline); caller holds umr->lock. */
static axon_status_t axon_umr_list(axon_umr_t *umr, uint32_t n)
{
    int ret;

    if ((umr->list != NULL) && (umr->list->max_klm_list_size >= n)) {
        return AXON_OK;
    }
    if (umr->list != NULL) {
        (void)axon_dev_dealloc_mkey_list(umr->list);
        umr->list = NULL;
    }
    ret = axon_dev_alloc_mkey_list(umr->dev->pd, n, &umr->list);
    if (ret != 0) {
        axon_error("umr: %s: a list of %u entries: %s", umr->dev->name, n, strerror(ret));
        return AXON_ERR_NO_MEMORY;
    }
    return AXON_OK;
}

/* Fill mkey with layout: entry i in parts[i]'s range, or span's memory (parts NULL) */
static axon_status_t axon_umr_fill(axon_umr_t *umr, const axon_md_layout_t *layout, int access,
                                   axon_dev_mr_t *mkey, axon_dev_mr_t *span,
                                   axon_dev_mr_t *const *parts)
{
    uint32_t i, n = layout->num_entries;
    axon_dev_mem_repeat_block_t *blocks = NULL;
    axon_dev_mem_region_t *regs = NULL;
    size_t *counts = NULL, repeat = layout->repeat;
    axon_dev_send_wr_t wr;
    axon_status_t status;

    memset(&wr, 0, sizeof(wr));
    wr.opcode                 = AXON_DEV_WR_UMR_FILL;
    wr.send_flags             = AXON_DEV_SEND_SIGNALED;
    wr.wr.umr.exp_access      = (uint64_t)access;
    wr.wr.umr.modified_mr     = mkey;
    wr.wr.umr.base_addr       = layout->base;
    wr.wr.umr.num_mrs         = n;
    if (layout->repeat > 1) {
        blocks = calloc(n, sizeof(*blocks));
        counts = calloc(2 * (size_t)n, sizeof(*counts));   /* byte_count, stride of each */
        if ((blocks == NULL) || (counts == NULL)) {
            status = AXON_ERR_NO_MEMORY;
            goto out;
        }
        for (i = 0; i < n; ++i) {
            counts[2 * i]        = layout->entries[i].length;
            counts[2 * i + 1]    = layout->entries[i].stride;
            blocks[i].base_addr  = layout->entries[i].addr;
            blocks[i].mr         = (parts != NULL) ? parts[i] : span;
            blocks[i].byte_count = &counts[2 * i];
            blocks[i].stride     = &counts[2 * i + 1];
        }
        wr.wr.umr.umr_type                          = AXON_DEV_UMR_REPEAT;
        wr.wr.umr.mem_list.rb.mem_repeat_block_list = blocks;
        wr.wr.umr.mem_list.rb.repeat_count          = &repeat;
        wr.wr.umr.mem_list.rb.stride_dim            = 1;
    } else {
        regs = calloc(n, sizeof(*regs));
        if (regs == NULL) {
            status = AXON_ERR_NO_MEMORY;
            goto out;
        }
        for (i = 0; i < n; ++i) {
            regs[i].base_addr = layout->entries[i].addr;
            regs[i].mr        = (parts != NULL) ? parts[i] : span;
            regs[i].length    = layout->entries[i].length;
        }
        wr.wr.umr.umr_type               = AXON_DEV_UMR_MR_LIST;
        wr.wr.umr.mem_list.mem_reg_list  = regs;
    }
    pthread_mutex_lock(&umr->lock);
    status = AXON_OK;
    if (n <= umr->max_inline) {
        wr.send_flags |= AXON_DEV_SEND_INLINE;
    } else if ((status = axon_umr_list(umr, n)) == AXON_OK) {
        wr.wr.umr.memory_objects = umr->list;
    }
    if (status == AXON_OK) {
        status = axon_umr_exec(umr, &wr, "fill");
    }
    pthread_mutex_unlock(&umr->lock);
out:
    free(blocks);
    free(counts);
    free(regs);
    return status;
}

static void axon_umr_mr_release(axon_umr_t *umr, axon_dev_mr_t *mr)
{
    /* Releasing the key is what stops it: an access after it fails at the device. */
    if (axon_dev_dereg_mr(mr) != 0) {
        axon_warn("umr: %s: releasing indirect key 0x%x failed", umr->dev->name, mr->lkey);
    }
}

void axon_umr_mkey_release(axon_umr_t *umr, axon_umr_mkey_t *mkey)
{
    uint32_t j;

    /* the outer key first: it names the parts */
    if (mkey->mr != NULL) {
        axon_umr_mr_release(umr, mkey->mr);
    }
    for (j = 0; j < mkey->num_parts; ++j) {
        axon_umr_mr_release(umr, mkey->parts[j]);
    }
    free(mkey->parts);
    memset(mkey, 0, sizeof(*mkey));
}

/* Entries one key takes; two levels where the device nests keys. */
static uint64_t axon_umr_max_entries(const axon_umr_t *umr)
{
    uint64_t one = umr->dev->dev_attr.umr.max_klm_list_size;

    return (umr->dev->dev_attr.umr.max_umr_recursion_depth >= 2) ? one * one : one;
}

int axon_umr_layout_fits(const axon_umr_t *umr, const axon_md_layout_t *layout)
{
    if (layout->num_entries > axon_umr_max_entries(umr)) {
        axon_debug("umr: %s: a layout of %u entries (the device takes %llu in %s): no key",
                   umr->dev->name, layout->num_entries,
                   (unsigned long long)axon_umr_max_entries(umr),
                   (umr->dev->dev_attr.umr.max_umr_recursion_depth >= 2) ? "two levels" :
                                                                           "one key");
        return 0;
    }
    return 1;
}

/* An indirect key of layout's entries, filled over span or parts */
static axon_status_t axon_umr_mkey_one(axon_umr_t *umr, const axon_md_layout_t *layout,
                                       int access, axon_dev_mr_t *span,
                                       axon_dev_mr_t *const *parts, axon_dev_mr_t **mkey_p)
{
    axon_dev_mr_init_attr_t attr;
    axon_status_t status;
    int ret;

    memset(&attr, 0, sizeof(attr));
    attr.max_reg_descriptors = layout->num_entries;
    attr.create_flags        = AXON_DEV_MR_INDIRECT_KLMS;
    attr.access_flags        = (uint64_t)access;
    ret = axon_dev_create_mr(umr->dev->pd, &attr, mkey_p);
    if (ret != 0) {
        axon_error("umr: %s: an indirect key of %u entries: %s", umr->dev->name,
                   layout->num_entries, strerror(ret));
        return (ret == ENOMEM) ? AXON_ERR_NO_MEMORY : AXON_ERR_IO_ERROR;
    }
    status = axon_umr_fill(umr, layout, access, *mkey_p, span, parts);
    if (status != AXON_OK) {
        axon_umr_mr_release(umr, *mkey_p);
        *mkey_p = NULL;
    }
    return status;
}

/*
 * A layout longer than one key: part j is entries [j * per, (j + 1) * per)
 * in the layout's own form (same repeat and strides), its key's range
 * [base, base + repeat * part bytes). The outer key's entry j takes part j's
 * bytes of one repetition at a time (byte count = stride = its bytes of one
 * repetition), repeat times: the packed order of the whole layout.
 */
static axon_status_t axon_umr_mkey_nested(axon_umr_t *umr, const axon_md_layout_t *layout,
                                          int access, axon_dev_mr_t *span,
                                          axon_umr_mkey_t *mkey)
{
    uint32_t per = umr->dev->dev_attr.umr.max_klm_list_size;
    uint32_t j, i, num_parts = (layout->num_entries + per - 1) / per;
    axon_md_layout_entry_t *outer_entries;
    axon_md_layout_t part, outer;
    axon_status_t status = AXON_OK;
    uint64_t bytes;

    outer_entries = calloc(num_parts, sizeof(*outer_entries));
    mkey->parts   = calloc(num_parts, sizeof(*mkey->parts));
    if ((outer_entries == NULL) || (mkey->parts == NULL)) {
        status = AXON_ERR_NO_MEMORY;
        goto out;
    }
    for (j = 0; (j < num_parts) && (status == AXON_OK); ++j) {
        part             = *layout;
        part.entries     = layout->entries + (size_t)j * per;
        part.num_entries = (j + 1 < num_parts) ? per : layout->num_entries - j * per;
        for (bytes = 0, i = 0; i < part.num_entries; ++i) {
            bytes += part.entries[i].length;
        }
        part.size               = bytes * layout->repeat;
        outer_entries[j].addr   = layout->base;
        outer_entries[j].length = bytes;
        outer_entries[j].stride = (layout->repeat > 1) ? bytes : 0;
        status = axon_umr_mkey_one(umr, &part, access, span, NULL, &mkey->parts[j]);
        mkey->num_parts += (status == AXON_OK);
    }
    if (status == AXON_OK) {
        outer             = *layout;
        outer.entries     = outer_entries;
        outer.num_entries = num_parts;
        status = axon_umr_mkey_one(umr, &outer, access, NULL, mkey->parts, &mkey->mr);
    }
out:
    free(outer_entries);
    if (status != AXON_OK) {
        axon_umr_mkey_release(umr, mkey);
    }
    return status;
}

axon_status_t axon_umr_mkey_make(axon_umr_t *umr, const axon_md_layout_t *layout, int access,
                                 axon_dev_mr_t *span, axon_umr_mkey_t *mkey)
{
    memset(mkey, 0, sizeof(*mkey));
    if (layout->num_entries > umr->dev->dev_attr.umr.max_klm_list_size) {
        return axon_umr_mkey_nested(umr, layout, access, span, mkey);
    }
    return axon_umr_mkey_one(umr, layout, access, span, NULL, &mkey->mr);
}

axon_status_t axon_umr_key_create(axon_umr_t *umr, const axon_md_layout_t *layout, int access,
                                  axon_umr_key_t *key)
{
    axon_status_t status;
    int ret;

    if (!axon_umr_layout_fits(umr, layout)) {
        return AXON_ERR_UNSUPPORTED;
    }
    memset(key, 0, sizeof(*key));
    ret = axon_dev_reg_mr(umr->dev->pd, (void *)(uintptr_t)layout->span_addr,
                          layout->span_length, access, &key->span);
    if (ret != 0) {
        axon_error("umr: %s: registering the layout's span 0x%llx, %llu bytes: %s",
                   umr->dev->name, (unsigned long long)layout->span_addr,
                   (unsigned long long)layout->span_length, strerror(ret));
        return (ret == ENOMEM) ? AXON_ERR_NO_MEMORY : AXON_ERR_IO_ERROR;
    }
    status = axon_umr_mkey_make(umr, layout, access, key->span, &key->mkey);
    if (status != AXON_OK) {
        axon_umr_key_destroy(umr, key);
    }
    return status;
}

void axon_umr_key_destroy(axon_umr_t *umr, axon_umr_key_t *key)
{
    axon_umr_mkey_release(umr, &key->mkey);
    if ((key->span != NULL) && (axon_dev_dereg_mr(key->span) != 0)) {
        axon_warn("umr: %s: releasing the span registration failed", umr->dev->name);
    }
    key->span = NULL;
}
