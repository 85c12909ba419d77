/*
 * Remote keys: what a mapping's owner packs for its peers, and how a peer's
 * endpoint reaches the memory once it unpacks one (the path, api/rma/rma.h).
 *
 * The packed format and its parser are in rkey_format.{h,c}.
 *
 * The checksum makes a damaged key fail at unpack (AXON_ERR_IO_FORMAT)
 * rather than reach some other memory; tokens and the target's range check
 * do the rest, and for the paths the target never sees, the domain that
 * unpacks its entry (shm: the owner's mapping table, shm_md.c).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "byte_order.h"
#include "log.h"
#include "mem.h"
#include "proc.h"
#include "rkey_format.h"
#include "rma.h"
#include "sys.h"

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

/* ---------------------------------------------------------------- pack */

axon_status_t axon_rkey_pack(axon_context_h context, axon_mem_h memh, void **rkey_buffer_p,
                             size_t *size_p)
{
    struct axon_mem_ctx *mctx;
    axon_mem_reg_t *reg;
    axon_worker_h worker;
    size_t size, num_workers = 0, num_entries = 0, offset;
    uint64_t host_id;
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
        axon_le_put64(buf + offset, worker->uuid);
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
        axon_le_put16(e + 2, (uint16_t)len);
        /* NUL padded: the buffer is zeroed and the names shorter than their fields. */
        memcpy(e + 4, tl_name, strnlen(tl_name, AXON_TL_NAME_MAX - 1));
        memcpy(e + AXON_RKEY_ENTRY_DEV, reg->resource->dev_name,
               strnlen(reg->resource->dev_name, AXON_DEV_NAME_MAX - 1));
        offset += AXON_RKEY_ENTRY_HDR + len;
    }
    pthread_mutex_unlock(&mctx->lock);
    size = offset + AXON_RKEY_CSUM_SIZE;  /* transports may pack less than their maximum */

    axon_le_put32(buf + 0, AXON_RKEY_MAGIC);
    axon_le_put16(buf + 4, AXON_RKEY_VERSION);
    axon_le_put32(buf + 8, (uint32_t)size);
    axon_le_put16(buf + 12, (uint16_t)num_workers);
    axon_le_put16(buf + 14, (uint16_t)num_entries);
    axon_le_put64(buf + 16, (uintptr_t)memh->address);
    axon_le_put64(buf + 24, memh->length);
    axon_le_put64(buf + 32, memh->token);
    axon_le_put64(buf + 40, host_id);
    axon_le_put64(buf + 48, self.start_time);
    axon_le_put64(buf + 56, self.ns_id);
    axon_le_put32(buf + 64, (uint32_t)self.pid);
    axon_le_put64(buf + offset, axon_sys_hash64(buf, offset, 0));

    *rkey_buffer_p = buf;
    *size_p        = size;
    return AXON_OK;
}

void axon_rkey_buffer_release(void *rkey_buffer)
{
    free(rkey_buffer);
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

/* An entry the lane's transport takes as its key (its domain has no unpack) must
 * be what the domain packs: the transport reads its whole key, whatever the entry held. */
static axon_status_t axon_rkey_entry_check(const axon_lane_t *lane, uint16_t len)
{
    if ((lane->md == NULL) || (len == lane->md->ops->rkey_max_len)) {
        return AXON_OK;
    }
    axon_error("axon_ep_rkey_unpack: the %s entry holds a %u-byte key, its domain packs %zu",
               lane->resource->tl_name, len, lane->md->ops->rkey_max_len);
    return AXON_ERR_IO_FORMAT;
}

/*
 * The entry of lane's transport for the owner's device the lane reaches: a
 * context with several devices of one transport packs one entry each, and
 * one device's key means nothing to another (softib: another memory region
 * by the same number). With one entry, that one.
 */
static const uint8_t *axon_rkey_lane_entry(const axon_lane_t *lane, const uint8_t *buf,
                                           const axon_rkey_hdr_t *hdr)
{
    const char *tl_name = lane->resource->tl_name;

    if (axon_rkey_count_entries(buf, hdr, tl_name) < 2) {
        return axon_rkey_find_entry(buf, hdr, tl_name, NULL);
    }
    return axon_rkey_find_entry(buf, hdr, tl_name, lane->peer_dev);
}

/*
 * The bulk lane reaches the key's memory by RDMA and the owner registered
 * it on several devices: keep each device's key, for rails (rails.c) that
 * reach the owner's other devices. Best effort: without them, one lane.
 */
static void axon_rkey_keep_dev_keys(axon_rkey_h rkey, const axon_lane_t *lane,
                                    const uint8_t *buf, const axon_rkey_hdr_t *hdr)
{
    const char *tl_name = lane->resource->tl_name;
    axon_rkey_dev_keys_t *keys;
    axon_rkey_entry_iter_t iter;
    const uint8_t *e;
    uint16_t len;

    if ((lane != &rkey->ep->bulk_lane) || (lane->md->ops->rkey_unpack != NULL) ||
        (rkey->ep->worker->context->opts.max_rndv_rails < 2) ||
        (axon_rkey_count_entries(buf, hdr, tl_name) < 2) ||
        ((keys = calloc(1, sizeof(*keys))) == NULL)) {
        return;
    }
    axon_rkey_entry_iter_init(hdr, &iter);
    while (((e = axon_rkey_entry_next(buf, hdr, tl_name, &iter)) != NULL) &&
           (keys->count < AXON_RNDV_RAILS_MAX)) {
        len = axon_le_get16(e + 2);
        if (len != lane->md->ops->rkey_max_len) {
            continue;   /* refused for the lane itself, the same for a rail */
        }
        memcpy(keys->dev[keys->count].dev_name, e + AXON_RKEY_ENTRY_DEV, AXON_DEV_NAME_MAX);
        memcpy(keys->dev[keys->count].key, e + AXON_RKEY_ENTRY_HDR, len);
        ++keys->count;
    }
    rkey->dev_keys = keys;
}

const void *axon_rkey_dev_key(const struct axon_rkey *rkey, const char *dev_name)
{
    unsigned i;

    for (i = 0; (rkey->dev_keys != NULL) && (i < rkey->dev_keys->count); ++i) {
        if (!strncmp(rkey->dev_keys->dev[i].dev_name, dev_name, AXON_DEV_NAME_MAX)) {
            return rkey->dev_keys->dev[i].key;
        }
    }
    return NULL;
}

/*
 * Through lane, if its domain has an entry in the key: the domain's unpack
 * gives direct access (SHM: shm's attached segment) or a key for the lane's
 * get/put (ZCOPY: shm's cross-memory attach); without an unpack the entry
 * is the lane's key (rc). 1: a path; 0: not on this lane; -1: *status says
 * why the key is refused.
 */
static int axon_rkey_try_lane(axon_rkey_h rkey, const axon_lane_t *lane, const uint8_t *buf,
                              const axon_rkey_hdr_t *hdr, axon_status_t *status)
{
    axon_md_key_info_t info = {hdr->address, hdr->length, &hdr->owner, hdr->host_id};
    axon_md_rkey_t md_rkey;
    const uint8_t *e;
    uint16_t len;

    e = (lane->md != NULL) ? axon_rkey_lane_entry(lane, buf, hdr) : NULL;
    if (e == NULL) {
        return 0;
    }
    len = axon_le_get16(e + 2);
    if (lane->md->ops->rkey_unpack == NULL) {
        if (!axon_rkey_lane_zcopy(lane)) {
            return 0;
        }
        *status = axon_rkey_entry_check(lane, len);
        if (*status != AXON_OK) {
            return -1;
        }
        rkey->tl_rkey_len = len;
        memcpy(rkey->tl_rkey, e + AXON_RKEY_ENTRY_HDR, len);
        axon_rkey_keep_dev_keys(rkey, lane, buf, hdr);
    } else {
        memset(&md_rkey, 0, sizeof(md_rkey));
        *status = lane->md->ops->rkey_unpack(lane->md, e + AXON_RKEY_ENTRY_HDR, len, &info,
                                             &md_rkey);
        if (*status == AXON_ERR_UNSUPPORTED) {
            *status = AXON_OK;
            return 0;
        }
        if (*status != AXON_OK) {
            return -1;
        }
        rkey->md        = lane->md;
        rkey->md_handle = md_rkey.handle;
        if (md_rkey.direct != NULL) {
            rkey->locks    = (axon_amo_lock_table_t *)md_rkey.locks;
            rkey->map_base = md_rkey.direct;
            rkey->map_lo   = hdr->address + md_rkey.direct_offset;
            rkey->map_len  = md_rkey.direct_length;
            if (md_rkey.direct_length == 0) {   /* all of the range */
                rkey->path       = AXON_RMA_PATH_SHM;
                rkey->local_base = md_rkey.direct;
                rkey->map_len    = hdr->length;
                return 1;
            }
            if (md_rkey.tl_rkey_len == 0) {   /* the window; the rest by messages */
                return 1;
            }
        }
        if (!axon_rkey_lane_zcopy(lane) || (md_rkey.tl_rkey_len > sizeof(rkey->tl_rkey))) {
            return (md_rkey.direct != NULL) ? 1 : 0;
        }
        rkey->tl_rkey_len = (uint32_t)md_rkey.tl_rkey_len;
        memcpy(rkey->tl_rkey, md_rkey.tl_rkey, md_rkey.tl_rkey_len);
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
    axon_status_t status;
    uint64_t host_id;
    axon_proc_t self;
    unsigned i;

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
    if ((hdr->host_id == host_id) && axon_proc_equal(&hdr->owner, &self)) {
        status = axon_mem_find_local(hdr->token, hdr->address, hdr->length, &rkey->local_base,
                                     &rkey->locks, &rkey->locks_ref);
        if (status == AXON_OK) {
            rkey->path     = AXON_RMA_PATH_LOCAL;
            rkey->map_base = rkey->local_base;
            rkey->map_lo   = hdr->address;
            rkey->map_len  = hdr->length;
            return AXON_OK;
        }
        if (status != AXON_ERR_UNSUPPORTED) {   /* unsupported: a layout, placed by a lane */
            axon_error("axon_ep_rkey_unpack: memory 0x%llx (%llu bytes, token %016llx) of this "
                       "process is not mapped", (unsigned long long)hdr->address,
                       (unsigned long long)hdr->length, (unsigned long long)hdr->token);
            return status;
        }
    }

    for (i = 0; i < num_lanes; ++i) {
        status = AXON_OK;
        if (axon_rkey_try_lane(rkey, lanes[i], buf, hdr, &status) != 0) {
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
static axon_status_t axon_rkey_choose_amo(axon_rkey_h rkey, const uint8_t *buf,
                                          const axon_rkey_hdr_t *hdr)
{
    const axon_lane_t *lane = &rkey->ep->amo_lane;
    axon_status_t status;
    const uint8_t *e;
    uint16_t len;

    rkey->amo = AXON_RKEY_AMO_CPU;
    if (!rkey->ep->worker->context->amo_device) {
        return AXON_OK;
    }
    rkey->amo = AXON_RKEY_AMO_NONE;
    if (lane->tl_ep == NULL) {
        axon_debug("key to 0x%llx of process %d: the endpoint has no lane with device atomics",
                   (unsigned long long)hdr->address, hdr->owner.pid);
        return AXON_OK;
    }
    e = axon_rkey_lane_entry(lane, buf, hdr);
    if ((e == NULL) || !axon_rkey_has_worker(buf, hdr, rkey->ep->peer_uuid)) {
        axon_debug("key to 0x%llx of process %d has no %s entry for worker %016llx: no device "
                   "atomics", (unsigned long long)hdr->address, hdr->owner.pid,
                   lane->resource->tl_name, (unsigned long long)rkey->ep->peer_uuid);
        return AXON_OK;
    }
    len = axon_le_get16(e + 2);
    if (len > sizeof(rkey->amo_tl_rkey)) {
        return AXON_OK;
    }
    if ((lane->md != NULL) && (lane->md->ops->rkey_unpack == NULL) &&
        ((status = axon_rkey_entry_check(lane, len)) != AXON_OK)) {
        return status;
    }
    memcpy(rkey->amo_tl_rkey, e + AXON_RKEY_ENTRY_HDR, len);
    rkey->amo_lane = lane;
    rkey->amo      = AXON_RKEY_AMO_DEVICE;
    return AXON_OK;
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
    if (status == AXON_OK) {
        status = axon_rkey_choose_amo(rkey, rkey_buffer, &hdr);
    }
    if (status != AXON_OK) {
        axon_rkey_destroy(rkey);
        return status;
    }
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
    if (rkey->md_handle != NULL) {
        rkey->md->ops->rkey_release(rkey->md, rkey->md_handle);
    }
    if (rkey->locks_ref != NULL) {
        axon_mem_locks_put(rkey->locks_ref);
    }
    free(rkey->dev_keys);
    free(rkey);
}
