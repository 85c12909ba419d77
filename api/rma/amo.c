/*
 * Atomics: the public calls build an axon_amo_args_t; a key mapped in this
 * process (LOCAL/SHM) has it executed by our CPU under the region's lock
 * stripe at once, any other one sends it to the target as an AMO active
 * message (rma_am.c), where a CPU of the target's host executes it the same
 * way. Either way every Axon atomic on a location is atomic with respect
 * to every other one.
 *
 * Device atomic mode (AXON_ATOMIC_MODE=device): every atomic goes to the
 * device of the endpoint's amo lane (rma.c's DEVICE mode), even on memory
 * of this process; an operation the device does not do, or a key no device
 * reaches, is refused (never done by a CPU: it would not be atomic with the
 * device's). XOR, which no single work request does, loops on CSWAP.
 */
#include <string.h>
#include "log.h"
#include "rma_proto.h"

/* The public operations travel down as they are (amo_args.h). */
#define AXON_AMO_SAME(_amo, _public) ((int)AXON_AMO_##_amo == (int)AXON_ATOMIC_##_public)
_Static_assert(AXON_AMO_SAME(ADD, ADD) && AXON_AMO_SAME(AND, AND) && AXON_AMO_SAME(OR, OR) &&
               AXON_AMO_SAME(XOR, XOR) && AXON_AMO_SAME(SWAP, SWAP) &&
               AXON_AMO_SAME(CSWAP, CSWAP) && AXON_AMO_SAME(MASKED_CSWAP, LAST),
               "axon_amo_op_t extends axon_atomic_op_t");

void axon_amo_result_store(void *result, unsigned size, const uint64_t *words)
{
    uint32_t v32;

    if (size == 4) {
        v32 = (uint32_t)words[0];
        memcpy(result, &v32, sizeof(v32));
    } else {
        memcpy(result, words, size);
    }
}

void axon_amo_local_exec(const struct axon_rkey *rkey, uint64_t remote_addr,
                         const axon_amo_args_t *args, void *result)
{
    uint64_t words[AXON_AMO_MAX_WORDS];

    /* the lock stripe by the offset in the range, as the owner's own executor chooses it */
    axon_amo_cpu_exec(rkey->locks, remote_addr - rkey->remote_base,
                      axon_rkey_mapped(rkey, remote_addr, args->size), args,
                      (result != NULL) ? words : NULL);
    if (result != NULL) {
        axon_amo_result_store(result, args->size, words);
    }
}

/* Checks every atomic shares; logs what is wrong. */
static axon_status_t axon_amo_check(axon_ep_h ep, axon_rkey_h rkey, size_t size,
                                    uint64_t remote_addr, const void *req_p, const char *func)
{
    axon_status_t status = axon_rma_check(ep, rkey, AXON_FEATURE_AMO, req_p, func);

    if (__builtin_expect(status != AXON_OK, 0)) {
        return status;
    }
    if (__builtin_expect(remote_addr & (size - 1), 0)) {
        axon_error("%s: remote address 0x%llx is not aligned to the operand's %zu bytes", func,
                   (unsigned long long)remote_addr, size);
        return AXON_ERR_INVALID_PARAM;
    }
    if (__builtin_expect(!axon_rkey_range_ok(rkey, remote_addr, size), 0)) {
        return axon_rma_range_error(rkey, remote_addr, size, func);
    }
    return AXON_OK;
}

/* Device mode: may the amo lane's device do args? Converts XOR to its CSWAP loop. */
static axon_status_t axon_amo_device_prepare(axon_rkey_h rkey, axon_amo_args_t *args,
                                             axon_request_h req)
{
    uint8_t op = (args->op == AXON_AMO_XOR) ? AXON_AMO_CSWAP : args->op;

    if (rkey->amo != AXON_RKEY_AMO_DEVICE) {
        axon_error("atomic on 0x%llx: AXON_ATOMIC_MODE=device, but no device reaches this "
                   "key's memory from endpoint %p", (unsigned long long)rkey->remote_base,
                   (void *)rkey->ep);
        return AXON_ERR_UNSUPPORTED;
    }
    if (!(rkey->amo_lane->resource->amo_device_ops & AXON_AMO_DEV_BIT(op, args->size))) {
        axon_error("atomic operation %u on %u bytes: %s/%s does not execute it (device "
                   "atomic mode)", args->op, args->size, rkey->amo_lane->resource->tl_name,
                   rkey->amo_lane->resource->dev_name);
        return AXON_ERR_UNSUPPORTED;
    }
    req->rma.amo.xor_loop = (args->op == AXON_AMO_XOR);
    if (req->rma.amo.xor_loop) {
        /* first guess 0: the device returns the real value when it differs */
        req->rma.amo.xor_value = args->value[0];
        args->op               = AXON_AMO_CSWAP;
        args->compare[0]       = 0;
    }
    return AXON_OK;
}

/* Execute here when the memory is mapped here, else send it. */
static axon_status_t axon_amo_start(axon_ep_h ep, axon_rkey_h rkey, uint64_t remote_addr,
                                    const axon_amo_args_t *args, void *result,
                                    const axon_request_param_t *param, axon_request_h *req_p)
{
    axon_request_h req;
    axon_status_t status;

    if (rkey->amo != AXON_RKEY_AMO_CPU) {
        req = axon_rma_request_get(ep, param, AXON_RMA_KIND_AMO);
        if (req == NULL) {
            return AXON_ERR_NO_MEMORY;
        }
        req->rma.amo.args = *args;
        status = axon_amo_device_prepare(rkey, &req->rma.amo.args, req);
        if (status != AXON_OK) {
            axon_request_put(req);
            return status;
        }
        req->rma.rkey        = rkey;
        req->rma.mode        = AXON_RMA_PATH_DEVICE;
        req->rma.token       = rkey->token;
        req->rma.remote_addr = remote_addr;
        req->rma.length      = 1;
        req->rma.amo.result  = result;
        return axon_rma_start(req, param, req_p);
    }
    if ((axon_rkey_mapped(rkey, remote_addr, args->size) != NULL) && axon_rma_unfenced(ep)) {
        axon_amo_local_exec(rkey, remote_addr, args, result);
        return axon_rma_done_now(ep->worker, AXON_OK, param, req_p);
    }
    req = axon_rma_request_get(ep, param, AXON_RMA_KIND_AMO);
    if (req == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    req->rma.rkey        = rkey;
    /* ZCOPY lanes move bytes only: the target's CPU does the atomic. */
    req->rma.mode        = (rkey->path <= AXON_RMA_PATH_SHM) ? rkey->path : AXON_RMA_PATH_AM;
    req->rma.token       = rkey->token;
    req->rma.remote_addr = remote_addr;
    req->rma.length      = 1;
    req->rma.amo.args    = *args;
    req->rma.amo.result  = result;
    req->rma.amo.xor_loop = 0;
    return axon_rma_start(req, param, req_p);
}

/* The operand block's common fields; the caller fills the operands. */
static inline void axon_amo_args_init(axon_amo_args_t *args, uint8_t op, size_t size,
                                      const void *result)
{
    memset(args, 0, sizeof(*args));
    args->op    = op;
    args->size  = (uint8_t)size;
    args->fetch = (result != NULL);
}

static inline uint64_t axon_amo_load(const void *p, size_t size)
{
    uint32_t v32;
    uint64_t v64;

    if (size == 4) {
        memcpy(&v32, p, sizeof(v32));
        return v32;
    }
    memcpy(&v64, p, sizeof(v64));
    return v64;
}

axon_status_t axon_atomic_nb(axon_ep_h ep, axon_atomic_op_t op, size_t size, const void *value,
                             const void *compare, void *result, uint64_t remote_addr,
                             axon_rkey_h rkey, const axon_request_param_t *param,
                             axon_request_h *req_p)
{
    axon_amo_args_t args;
    axon_status_t status;

    if (__builtin_expect(((unsigned)op >= AXON_ATOMIC_LAST) || ((size != 4) && (size != 8)) ||
                         (value == NULL), 0)) {
        axon_error("axon_atomic_nb: %s", ((unsigned)op >= AXON_ATOMIC_LAST) ? "no such operation" :
                   (value == NULL) ? "NULL value" : "size must be 4 or 8");
        return AXON_ERR_INVALID_PARAM;
    }
    if (__builtin_expect((result == NULL) && ((op == AXON_ATOMIC_SWAP) ||
                                              (op == AXON_ATOMIC_CSWAP)), 0)) {
        axon_error("axon_atomic_nb: %s needs a result buffer",
                   (op == AXON_ATOMIC_SWAP) ? "swap" : "compare-and-swap");
        return AXON_ERR_INVALID_PARAM;
    }
    if (__builtin_expect((op == AXON_ATOMIC_CSWAP) && (compare == NULL), 0)) {
        axon_error("axon_atomic_nb: compare-and-swap with a NULL compare value");
        return AXON_ERR_INVALID_PARAM;
    }
    status = axon_amo_check(ep, rkey, size, remote_addr, req_p, "axon_atomic_nb");
    if (__builtin_expect(status != AXON_OK, 0)) {
        return status;
    }

    axon_amo_args_init(&args, (uint8_t)op, size, result);
    args.value[0] = axon_amo_load(value, size);
    if (op == AXON_ATOMIC_CSWAP) {
        args.compare[0] = axon_amo_load(compare, size);
    }
    return axon_amo_start(ep, rkey, remote_addr, &args, result, param, req_p);
}

/*
 * Checks of the extended atomics (operands_ok: no operand is NULL), then the
 * operand block's common fields.
 */
static axon_status_t axon_amo_ext_begin(axon_ep_h ep, axon_rkey_h rkey, uint8_t op, size_t size,
                                        int operands_ok, const void *result,
                                        uint64_t remote_addr, const void *req_p,
                                        const char *func, axon_amo_args_t *args)
{
    axon_status_t status;

    if ((size != 8) && (size != 16) && (size != 32)) {
        axon_error("%s: size %zu, must be 8, 16 or 32", func, size);
        return AXON_ERR_INVALID_PARAM;
    }
    if (!operands_ok) {
        axon_error("%s: NULL operand", func);
        return AXON_ERR_INVALID_PARAM;
    }
    status = axon_amo_check(ep, rkey, size, remote_addr, req_p, func);
    if (status != AXON_OK) {
        return status;
    }
    axon_amo_args_init(args, op, size, result);
    return AXON_OK;
}

axon_status_t axon_atomic_masked_cswap_nb(axon_ep_h ep, size_t size, const uint64_t *compare,
                                          const uint64_t *compare_mask, const uint64_t *swap,
                                          const uint64_t *swap_mask, uint64_t *result,
                                          uint64_t remote_addr, axon_rkey_h rkey,
                                          const axon_request_param_t *param,
                                          axon_request_h *req_p)
{
    axon_amo_args_t args;
    axon_status_t status;

    status = axon_amo_ext_begin(ep, rkey, AXON_AMO_MASKED_CSWAP, size,
                                (compare != NULL) && (compare_mask != NULL) && (swap != NULL) &&
                                (swap_mask != NULL), result, remote_addr, req_p,
                                "axon_atomic_masked_cswap_nb", &args);
    if (status != AXON_OK) {
        return status;
    }
    memcpy(args.compare, compare, size);
    memcpy(args.mask, compare_mask, size);
    memcpy(args.value, swap, size);
    memcpy(args.swap_mask, swap_mask, size);
    return axon_amo_start(ep, rkey, remote_addr, &args, result, param, req_p);
}

axon_status_t axon_atomic_mfadd_nb(axon_ep_h ep, size_t size, const uint64_t *add,
                                   const uint64_t *field_boundary, uint64_t *result,
                                   uint64_t remote_addr, axon_rkey_h rkey,
                                   const axon_request_param_t *param, axon_request_h *req_p)
{
    axon_amo_args_t args;
    axon_status_t status;

    status = axon_amo_ext_begin(ep, rkey, AXON_AMO_MFADD, size,
                                (add != NULL) && (field_boundary != NULL), result, remote_addr,
                                req_p, "axon_atomic_mfadd_nb", &args);
    if (status != AXON_OK) {
        return status;
    }
    memcpy(args.value, add, size);
    memcpy(args.mask, field_boundary, size);
    return axon_amo_start(ep, rkey, remote_addr, &args, result, param, req_p);
}
