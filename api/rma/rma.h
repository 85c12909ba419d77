/*
 * Remote memory access inside the library: mapped memory (mem.c), keys
 * (rkey.c), put/get/flush/fence (rma.c), atomics (amo.c) and the active
 * message protocol that does all of them at the target when no lane reaches
 * the memory directly (rma_am.c, rma_proto.h).
 *
 * How an endpoint reaches a key's memory is decided once, at unpack:
 *
 *   LOCAL  the memory is in this process: memcpy, atomics by our CPU.
 *   SHM    an allocated segment of a process on this host, mapped here:
 *          memcpy, atomics by our CPU on the segment's lock table. The target
 *          never has to progress. Shared pages of the caller's memory
 *          (AXON_MEM_MAP_SHARED) are such a segment too; when they cover
 *          only part of the range (partial pages at its ends) that part is
 *          a window reached as SHM is, the rest by the key's path.
 *   ZCOPY  put/get through a lane's ep_put_zcopy/ep_get_zcopy (shm: cross
 *          memory attach into the caller's memory; rc: RDMA write/read with the
 *          lane's key); atomics by active message, executed at the target.
 *   AM     everything by active message, executed by the target's progress
 *          (tcp, ud, or when nothing else applies).
 *
 * Every atomic ends up executed by a CPU of the target's host under the
 * region's lock table (framework/amo_cpu.h), so all of them are atomic
 * with respect to each other. Except in device atomic mode
 * (AXON_ATOMIC_MODE=device, context->amo_device): there every atomic goes
 * through the device of the endpoint's amo lane (ep_atomic, request mode
 * DEVICE), whatever the path of put/get, and a key with no device path
 * refuses atomics (AXON_ERR_UNSUPPORTED): mixing the two executors would
 * break atomicity.
 */
#ifndef AXON_RMA_H
#define AXON_RMA_H

#include "mem.h"
#include "tag_proto.h"

typedef enum {
    AXON_RMA_PATH_LOCAL = 0,
    AXON_RMA_PATH_SHM,
    AXON_RMA_PATH_ZCOPY,
    AXON_RMA_PATH_AM,
    AXON_RMA_PATH_DEVICE,      /* atomics only: the amo lane's device executes them */
} axon_rma_path_t;

/* struct axon_rkey.amo: who executes atomics on the key's memory */
typedef enum {
    AXON_RKEY_AMO_CPU = 0,     /* CPU mode: by path (LOCAL/SHM here, else at the target) */
    AXON_RKEY_AMO_DEVICE,      /* the amo lane's device, with amo_tl_rkey */
    AXON_RKEY_AMO_NONE,        /* device mode, but no device reaches the memory: refused */
} axon_rkey_amo_t;

/* A key unpacked on one endpoint: valid until axon_rkey_destroy, which
 * must come before the endpoint is closed. */
struct axon_rkey {
    axon_ep_h              ep;
    axon_rma_path_t        path;
    uint64_t               remote_base;   /* the owner's address of the range */
    uint64_t               length;
    uint64_t               token;         /* names the mapping at its owner */
    /* LOCAL and SHM: where the range is in this process, and its locks */
    uint8_t               *local_base;
    axon_amo_lock_table_t *locks;
    void                  *locks_ref;     /* LOCAL user memory: keeps locks past an unmap */
    /* Where the range is mapped here: all of it (LOCAL, SHM) or the window of its
     * shared pages (any path): the owner's [map_lo, map_lo + map_len) at map_base */
    uint8_t               *map_base;
    uint64_t               map_lo;
    uint64_t               map_len;
    /* What a domain's rkey_unpack holds for the key (SHM, shm's ZCOPY), released at destroy */
    axon_md_t             *md;
    void                  *md_handle;
    /*
     * ZCOPY: the lane and its transport key (none: 0 bytes). The transport
     * checks the key before every op (shm: the owner's mapping table must
     * still hold the memory; rc: the target's device checks its own key).
     */
    const axon_lane_t     *zcopy_lane;
    uint32_t               tl_rkey_len;
    uint8_t                tl_rkey[AXON_MD_RKEY_MAX];
    /* ZCOPY on the bulk lane, the owner registered on several devices: each
     * device's key, for large put/get striped over the endpoint's rails */
    struct axon_rkey_dev_keys *dev_keys;
    /* Atomics (axon_rkey_amo_t); DEVICE: the lane's own key for the memory */
    uint8_t                amo;
    const axon_lane_t     *amo_lane;
    uint8_t                amo_tl_rkey[AXON_MD_RKEY_MAX];
};

/* The keys of one transport's domains on each of the owner's devices (rkey.c). */
typedef struct axon_rkey_dev_keys {
    unsigned count;
    struct {
        char    dev_name[AXON_DEV_NAME_MAX];
        uint8_t key[AXON_MD_RKEY_MAX];
    } dev[AXON_RNDV_RAILS_MAX];
} axon_rkey_dev_keys_t;

/* The key of the owner's device dev_name (a rail's peer device), or NULL. */
const void *axon_rkey_dev_key(const struct axon_rkey *rkey, const char *dev_name);

/* Is [addr, addr + length) inside the key's range? (0-length: addr inside or at end) */
static inline int axon_rkey_range_ok(const struct axon_rkey *rkey, uint64_t addr, size_t length)
{
    return (addr >= rkey->remote_base) && (length <= rkey->length) &&
           (addr - rkey->remote_base <= rkey->length - length);
}

/* Where [addr, addr + length) (length > 0) is mapped here, or NULL. */
static inline uint8_t *axon_rkey_mapped(const struct axon_rkey *rkey, uint64_t addr,
                                        size_t length)
{
    uint64_t off = addr - rkey->map_lo;

    return ((off < rkey->map_len) && (length <= rkey->map_len - off)) ? rkey->map_base + off :
                                                                         NULL;
}

/* rma_am.c: the target-side handlers and replies, the placements of PUT and GET_REPLY data */
axon_status_t axon_rma_worker_init(axon_worker_h worker);

#endif
