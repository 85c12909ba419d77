/*
 * rc atomics executed by the device (AXON_ATOMIC_MODE=device, api/rma/amo.c).
 *
 * Standard verbs atomics are 64-bit FETCH_AND_ADD and CMP_AND_SWP; with the
 * extended atomics (seed §8.7, AXON_DEV_CAP_EXT_ATOMIC) every other Axon
 * operation maps onto one masked work request, so the device executes all of
 * them and they are atomic with respect to each other:
 *   AND v   masked CSWAP, compare mask 0, swap mask ~v, swap 0
 *   OR v    masked CSWAP, compare mask 0, swap mask v, swap ~0
 *   SWAP v  masked CSWAP, compare mask 0, swap mask ~0, swap v
 *   CSWAP   4 bytes: masked CSWAP with full masks
 *   ADD     4 bytes: masked FETCH_AND_ADD, no field boundary
 * XOR has no single request: the upper layer loops on CSWAP.
 *
 * The device writes the previous value into a result slot of the iface's
 * registered pool (registered once, at the first atomic); the completion
 * copies it to the caller's words and gives the slot back.
 */
#include <string.h>
#include "rc.h"

/* Atomics in flight per iface; one more waits (NO_RESOURCE) for a slot. */
#define AXON_RC_AMO_SLOTS 256

typedef struct axon_rc_amo_slot {
    uint64_t              words[AXON_AMO_MAX_WORDS]; /* the device's result: first, aligned */
    uint64_t             *result;                     /* the caller's words */
    unsigned              size;
    axon_verbs_bufpool_t *pool;                       /* the slot's */
    axon_tl_completion_t *user_comp;
    axon_tl_completion_t  comp;
} axon_rc_amo_slot_t;

static void axon_rc_amo_done(axon_tl_completion_t *comp, axon_status_t status)
{
    axon_rc_amo_slot_t *slot = axon_container_of(comp, axon_rc_amo_slot_t, comp);
    axon_tl_completion_t *user_comp = slot->user_comp;

    if (status == AXON_OK) {
        memcpy(slot->result, slot->words, (slot->size < 8) ? 8 : slot->size);
    }
    axon_verbs_bufpool_put(slot->pool, slot);
    user_comp->func(user_comp, status);
}

static axon_rc_amo_slot_t *axon_rc_amo_slot_get(axon_verbs_bufpool_t *pool,
                                                axon_verbs_dev_t *dev)
{
    axon_status_t status;

    if (__builtin_expect(pool->base == NULL, 0)) {
        status = axon_verbs_bufpool_init(pool, dev, "atomic results",
                                         sizeof(axon_rc_amo_slot_t), AXON_RC_AMO_SLOTS);
        if (status != AXON_OK) {
            return NULL;
        }
    }
    return axon_verbs_bufpool_get(pool);
}

#define AXON_RC_AMO_ALL_OPS(_size) \
    (AXON_AMO_DEV_BIT(AXON_AMO_ADD, _size) | AXON_AMO_DEV_BIT(AXON_AMO_AND, _size) | \
     AXON_AMO_DEV_BIT(AXON_AMO_OR, _size) | AXON_AMO_DEV_BIT(AXON_AMO_SWAP, _size) | \
     AXON_AMO_DEV_BIT(AXON_AMO_CSWAP, _size))

/* Does the device do masked atomics of size bytes? */
static int axon_rc_amo_ext_size(const axon_dev_attr_t *attr, unsigned size)
{
    return (attr->cap_flags & AXON_DEV_CAP_EXT_ATOMIC) &&
           (attr->ext_atomic.log_atomic_arg_sizes & size);  /* bit n == 2^n bytes */
}

uint32_t axon_rc_amo_device_ops(const axon_dev_attr_t *attr)
{
    uint32_t ops = 0;
    unsigned size;

    if (attr->cap_flags & AXON_DEV_CAP_ATOMIC) {
        ops |= AXON_AMO_DEV_BIT(AXON_AMO_ADD, 8) | AXON_AMO_DEV_BIT(AXON_AMO_CSWAP, 8);
    }
    if (axon_rc_amo_ext_size(attr, 4)) {
        ops |= AXON_RC_AMO_ALL_OPS(4);
    }
    if (axon_rc_amo_ext_size(attr, 8)) {
        ops |= AXON_RC_AMO_ALL_OPS(8);
    }
    for (size = 8; size <= 32; size *= 2) {
        if (axon_rc_amo_ext_size(attr, size)) {
            ops |= AXON_AMO_DEV_BIT(AXON_AMO_MASKED_CSWAP, size) |
                   AXON_AMO_DEV_BIT(AXON_AMO_MFADD, size);
        }
    }
    return ops;
}

static inline uint32_t axon_rc_amo_log(unsigned size)
{
    return (size == 4) ? 2 : (size == 8) ? 3 : (size == 16) ? 4 : 5;
}

/* A masked compare-and-swap of a 4- or 8-byte operand, masks and values by value. */
static void axon_rc_amo_masked_cswap(axon_dev_send_wr_t *wr, unsigned size, uint64_t compare_mask,
                                     uint64_t compare, uint64_t swap_mask, uint64_t swap)
{
    uint64_t all = (size == 4) ? 0xffffffffull : ~0ull;

    wr->opcode                                     = AXON_DEV_WR_EXT_MASKED_ATOMIC_CMP_AND_SWP;
    wr->wr.masked_atomic.log_arg_sz                = axon_rc_amo_log(size);
    wr->wr.masked_atomic.op.cmp_swap.compare_mask  = compare_mask & all;
    wr->wr.masked_atomic.op.cmp_swap.compare_val   = compare & all;
    wr->wr.masked_atomic.op.cmp_swap.swap_mask     = swap_mask & all;
    wr->wr.masked_atomic.op.cmp_swap.swap_val      = swap & all;
}

/* Fill wr's opcode and operands for args; 0, or -1 if no request does it. */
static int axon_rc_amo_wr(axon_dev_send_wr_t *wr, const axon_amo_args_t *args)
{
    unsigned size = args->size;
    uint64_t v    = args->value[0];

    if ((size == 8) && (args->op == AXON_AMO_ADD)) {
        wr->opcode                = AXON_DEV_WR_ATOMIC_FETCH_AND_ADD;
        wr->wr.atomic.compare_add = v;
        return 0;
    }
    if ((size == 8) && (args->op == AXON_AMO_CSWAP)) {
        wr->opcode                = AXON_DEV_WR_ATOMIC_CMP_AND_SWP;
        wr->wr.atomic.compare_add = args->compare[0];
        wr->wr.atomic.swap        = v;
        return 0;
    }
    switch (args->op) {
    case AXON_AMO_ADD:  /* 4 bytes: one field */
        wr->opcode                                     = AXON_DEV_WR_EXT_MASKED_ATOMIC_FETCH_AND_ADD;
        wr->wr.masked_atomic.log_arg_sz                = 2;
        wr->wr.masked_atomic.op.fetch_add.add_val      = v & 0xffffffffull;
        wr->wr.masked_atomic.op.fetch_add.field_boundary = 0;
        return 0;
    case AXON_AMO_CSWAP:  /* 4 bytes */
        axon_rc_amo_masked_cswap(wr, size, ~0ull, args->compare[0], ~0ull, v);
        return 0;
    case AXON_AMO_AND:
        axon_rc_amo_masked_cswap(wr, size, 0, 0, ~v, 0);
        return 0;
    case AXON_AMO_OR:
        axon_rc_amo_masked_cswap(wr, size, 0, 0, v, ~0ull);
        return 0;
    case AXON_AMO_SWAP:
        axon_rc_amo_masked_cswap(wr, size, 0, 0, ~0ull, v);
        return 0;
    case AXON_AMO_MASKED_CSWAP:
        wr->opcode                      = AXON_DEV_WR_EXT_MASKED_ATOMIC_CMP_AND_SWP;
        wr->wr.masked_atomic.log_arg_sz = axon_rc_amo_log(size);
        if (size <= 8) {
            axon_rc_amo_masked_cswap(wr, size, args->mask[0], args->compare[0],
                                     args->swap_mask[0], v);
        } else {
            /* larger operands by address, read by the device at post time */
            wr->wr.masked_atomic.op.cmp_swap.compare_mask = (uintptr_t)args->mask;
            wr->wr.masked_atomic.op.cmp_swap.compare_val  = (uintptr_t)args->compare;
            wr->wr.masked_atomic.op.cmp_swap.swap_mask    = (uintptr_t)args->swap_mask;
            wr->wr.masked_atomic.op.cmp_swap.swap_val     = (uintptr_t)args->value;
        }
        return 0;
    case AXON_AMO_MFADD:
        wr->opcode                      = AXON_DEV_WR_EXT_MASKED_ATOMIC_FETCH_AND_ADD;
        wr->wr.masked_atomic.log_arg_sz = axon_rc_amo_log(size);
        wr->wr.masked_atomic.op.fetch_add.add_val =
            (size <= 8) ? v : (uintptr_t)args->value;
        wr->wr.masked_atomic.op.fetch_add.field_boundary =
            (size <= 8) ? args->mask[0] : (uintptr_t)args->mask;
        return 0;
    default:
        return -1;
    }
}

axon_status_t axon_rc_amo_check(const char *name, const axon_resource_t *res,
                                const axon_amo_args_t *args, uint64_t remote_addr,
                                const void *rkey_buf, const uint64_t *result,
                                const axon_tl_completion_t *comp, axon_rc_rkey_t *rkey)
{
    unsigned size;

    if ((args == NULL) || (rkey_buf == NULL) || (result == NULL) || (comp == NULL)) {
        axon_error("%s: ep_atomic: NULL %s", name, (args == NULL) ? "args" :
                   (rkey_buf == NULL) ? "rkey" : (result == NULL) ? "result" : "completion");
        return AXON_ERR_INVALID_PARAM;
    }
    size = args->size;
    if ((args->op >= AXON_AMO_LAST) || ((size != 4) && (size != 8) && (size != 16) &&
                                        (size != 32)) ||
        !(res->amo_device_ops & AXON_AMO_DEV_BIT(args->op, size))) {
        axon_error("%s: ep_atomic: operation %u on %u bytes is not done by the device "
                   "(ops 0x%x)", name, args->op, size, res->amo_device_ops);
        return AXON_ERR_UNSUPPORTED;
    }
    if (axon_rc_rkey_unpack(name, "ep_atomic", rkey_buf, remote_addr, size, rkey) != AXON_OK) {
        return AXON_ERR_INVALID_PARAM;
    }
    if (remote_addr & (size - 1)) {
        axon_error("%s: ep_atomic: operand 0x%llx of %u bytes is misaligned", name,
                   (unsigned long long)remote_addr, size);
        return AXON_ERR_INVALID_PARAM;
    }
    return AXON_OK;
}

axon_status_t axon_rc_amo_prepare(axon_verbs_bufpool_t *pool, axon_verbs_dev_t *dev,
                                  const char *name, const axon_amo_args_t *args,
                                  uint64_t remote_addr, uint32_t rkey, uint64_t *result,
                                  axon_tl_completion_t *comp, axon_dev_send_wr_t *wr,
                                  axon_dev_sge_t *sge, axon_tl_completion_t **slot_comp_p)
{
    axon_rc_amo_slot_t *slot;

    memset(wr, 0, sizeof(*wr));
    if (axon_rc_amo_wr(wr, args) != 0) {
        axon_error("%s: ep_atomic: no work request for operation %u", name, args->op);
        return AXON_ERR_UNSUPPORTED;
    }
    slot = axon_rc_amo_slot_get(pool, dev);
    if (slot == NULL) {
        return AXON_ERR_NO_RESOURCE;  /* every slot in flight: retried from progress */
    }
    slot->words[0]  = 0;  /* a 4-byte result fills its low half only */
    slot->result    = result;
    slot->size      = args->size;
    slot->pool      = pool;
    slot->user_comp = comp;
    slot->comp.func = axon_rc_amo_done;
    sge->addr   = (uintptr_t)slot->words;
    sge->length = args->size;
    sge->lkey   = axon_verbs_bufpool_lkey(pool);
    wr->sg_list = sge;
    wr->num_sge = 1;
    if ((wr->opcode == AXON_DEV_WR_ATOMIC_FETCH_AND_ADD) ||
        (wr->opcode == AXON_DEV_WR_ATOMIC_CMP_AND_SWP)) {
        wr->wr.atomic.remote_addr = remote_addr;
        wr->wr.atomic.rkey        = rkey;
    } else {
        wr->wr.masked_atomic.remote_addr = remote_addr;
        wr->wr.masked_atomic.rkey        = rkey;
    }
    *slot_comp_p = &slot->comp;
    return AXON_OK;
}

void axon_rc_amo_unprepare(axon_tl_completion_t *slot_comp)
{
    axon_rc_amo_slot_t *slot = axon_container_of(slot_comp, axon_rc_amo_slot_t, comp);

    axon_verbs_bufpool_put(slot->pool, slot);
}

axon_status_t axon_rc_ep_atomic(axon_tl_ep_t *tl_ep, const axon_amo_args_t *args,
                                uint64_t remote_addr, const void *rkey_buf, uint64_t *result,
                                axon_tl_completion_t *comp)
{
    axon_rc_ep_t *ep       = (axon_rc_ep_t *)tl_ep;
    axon_rc_iface_t *iface = (axon_rc_iface_t *)tl_ep->iface;
    axon_rc_conn_t *conn   = ep->conn;
    axon_tl_completion_t *slot_comp;
    axon_dev_send_wr_t wr;
    axon_status_t status;
    axon_dev_sge_t sge;
    axon_rc_rkey_t rkey;

    if (conn == NULL) {
        return ep->status;
    }
    status = axon_rc_amo_check(iface->name, iface->super.resource, args, remote_addr,
                               rkey_buf, result, comp, &rkey);
    if (status != AXON_OK) {
        return status;
    }
    if ((conn->state != AXON_RC_CONN_OPEN) || (conn->flags & AXON_RC_CONN_F_RTU_PENDING) ||
        !axon_rc_conn_can_post(conn)) {
        return AXON_ERR_NO_RESOURCE;  /* not connected yet, or the queue is full */
    }
    status = axon_rc_amo_prepare(&iface->amo_pool, &iface->dev, iface->name, args, remote_addr,
                                 rkey.rkey, result, comp, &wr, &sge, &slot_comp);
    if (status != AXON_OK) {
        return status;
    }
    status = axon_rc_conn_post(conn, &wr, NULL, slot_comp, NULL, 1);
    if (status != AXON_OK) {
        axon_rc_amo_unprepare(slot_comp);
        return status;
    }
    return AXON_INPROGRESS;
}
