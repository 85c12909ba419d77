/*
 * Allreduce by recursive doubling with the reduction done by the device: in
 * round k a member sends its partner (rank ^ 2^k) the CALC of its input and
 * what it received in rounds before k, each an operand SGE, so the operands
 * grow by one per round. The last reduction, of the input and everything
 * received, is the CPU's at completion (it converts the result from network
 * order anyway): a CALC to itself would cost the chain another pass through
 * the device and an acknowledgement. Of n = 2^L + e members, the first 2e
 * pair up: the even one gives its input to the odd one, which takes part for
 * both and sends it the last reduction as a CALC.
 *
 * CALC operands and results are in network byte order (seed §8.9.3.1): the
 * input is converted into x_be at each post, the result out of the operands
 * at completion. A vector longer than the device's max_calc_vector travels in
 * chunks of that many elements, a CALC send each.
 */
#include <endian.h>
#include <stdlib.h>
#include <string.h>
#include "dev_calc.h"
#include "log.h"
#include "xchannel.h"

static uint32_t axon_xc_pow2_floor(uint32_t n)
{
    uint32_t p = 1;

    while (p * 2 <= n) {
        p *= 2;
    }
    return p;
}

axon_status_t axon_xc_allreduce_check(const axon_xc_team_t *team, const axon_xc_args_t *args)
{
    const axon_dev_attr_t *a = &team->worker->dev.dev_attr;
    uint32_t rounds = axon_xc_log2_ceil(axon_xc_pow2_floor(team->size));
    uint64_t ops;

    ops = (args->type == AXON_XC_DOUBLE) ? a->cross_channel.fp_ops :
          (args->type == AXON_XC_INT64)  ? a->cross_channel.int_ops : a->cross_channel.uint_ops;
    if ((args->count == 0) ||
        (args->count > (size_t)a->cross_channel.max_calc_vector * AXON_XC_MAX_CHUNKS)) {
        axon_debug("xchannel: allreduce of %zu elements: offloaded are 1..%u (%u chunks of the "
                   "device's %u)", args->count, a->cross_channel.max_calc_vector *
                   AXON_XC_MAX_CHUNKS, AXON_XC_MAX_CHUNKS, a->cross_channel.max_calc_vector);
        return AXON_ERR_UNSUPPORTED;
    }
    if (!(ops & (1ull << axon_xc_calc_ops[args->op]))) {
        axon_debug("xchannel: the device does not compute op %d on type %d", (int)args->op,
                   (int)args->type);
        return AXON_ERR_UNSUPPORTED;
    }
    if (rounds + 2 > team->max_sge) {
        axon_debug("xchannel: allreduce over %u members needs %u operands, the QPs take %u",
                   team->size, rounds + 2, team->max_sge);
        return AXON_ERR_UNSUPPORTED;
    }
    return AXON_OK;
}

/* Real rank of participant v (the odd member of a pair stands for both). */
static uint32_t axon_xc_participant_rank(uint32_t v, uint32_t extra)
{
    return (v < extra) ? (2 * v + 1) : (v + extra);
}

/* CALC sends to m of the operands ops[0..n_ops), one per chunk of the vector. */
static void axon_xc_allreduce_sends(axon_xc_coll_t *coll, axon_xc_chain_t *ch, uint32_t m,
                                    uint64_t *const *ops, unsigned n_ops)
{
    uint32_t chunk = coll->chunk;
    void *sges[AXON_XC_MAX_OPERANDS];
    size_t off, len;
    unsigned i;

    for (off = 0; off < coll->args.count; off += chunk) {
        len = ((coll->args.count - off < chunk) ? coll->args.count - off : chunk) * 8;
        for (i = 0; i < n_ops; ++i) {
            sges[i] = ops[i] + off;
        }
        axon_xc_chain_send(ch, coll, m, sges, n_ops, len, coll->scratch_mr->lkey);
    }
    axon_xc_chain_enable(ch, coll->team, m);
}

/* Receives from m into into[0..count), one per chunk; wait_recv: the tasks waiting for them. */
static void axon_xc_allreduce_recvs(axon_xc_coll_t *coll, axon_xc_chain_t *ch, uint32_t m,
                                    uint64_t *into, int wait_recv)
{
    size_t off, len;

    for (off = 0; off < coll->args.count; off += coll->chunk) {
        len = ((coll->args.count - off < coll->chunk) ? coll->args.count - off : coll->chunk) * 8;
        if (wait_recv) {
            axon_xc_chain_wait_recv(ch, coll->team, m);
        } else {
            axon_xc_chain_recv(ch, m, into + off, len, coll->scratch_mr->lkey);
        }
    }
}

/* One exchange: m gets the reduction of ops (chunk by chunk), we get m's into recv_into. */
static void axon_xc_allreduce_round(axon_xc_coll_t *coll, axon_xc_chain_t *ch, uint32_t m,
                                    uint64_t *const *ops, unsigned n_ops, uint64_t *recv_into)
{
    axon_xc_allreduce_recvs(coll, ch, m, recv_into, 0);
    axon_xc_allreduce_sends(coll, ch, m, ops, n_ops);
    axon_xc_allreduce_recvs(coll, ch, m, recv_into, 1);
}

axon_status_t axon_xc_allreduce_compile(axon_xc_coll_t *coll, unsigned set)
{
    axon_xc_team_t *team = coll->team;
    axon_xc_chain_t *ch  = &coll->chains[set];
    uint64_t *x_be = coll->x_be[set], *res_be = coll->res_be[set];
    uint32_t n = team->size, r = team->rank, p = axon_xc_pow2_floor(n), extra = n - p;
    uint32_t rounds = axon_xc_log2_ceil(p), k, v;
    unsigned chunks = (unsigned)((coll->args.count + coll->chunk - 1) / coll->chunk);
    uint64_t *ops[AXON_XC_MAX_OPERANDS];
    unsigned n_ops = 0;
    axon_status_t status;

    status = axon_xc_chain_init(ch, team, (3 * rounds + 3) * chunks + 8,
                                (rounds + 3) * (rounds + 3) * chunks + 4);
    if (status != AXON_OK) {
        return status;
    }
    if ((r < 2 * extra) && !(r & 1)) {
        /* give the input to the odd neighbour, receive the result from it */
        ops[0] = x_be;
        axon_xc_allreduce_round(coll, ch, r + 1, ops, 1, res_be);
        coll->res_ops[set][0] = res_be;
        coll->num_res_ops     = 1;
        return axon_xc_chain_finish(ch, team, 0);
    }
    ops[n_ops++] = x_be;
    if (r < 2 * extra) {
        ops[n_ops] = x_be + coll->args.count;   /* the even neighbour's input */
        axon_xc_allreduce_recvs(coll, ch, r - 1, ops[n_ops], 0);
        axon_xc_allreduce_recvs(coll, ch, r - 1, ops[n_ops++], 1);
        v = r / 2;
    } else {
        v = r - extra;
    }
    for (k = 0; k < rounds; ++k) {
        ops[n_ops] = x_be + (2 + k) * coll->args.count;
        axon_xc_allreduce_round(coll, ch, axon_xc_participant_rank(v ^ (1u << k), extra), ops,
                                n_ops, ops[n_ops]);
        ++n_ops;
    }
    if (r < 2 * extra) {
        axon_xc_allreduce_sends(coll, ch, r - 1, ops, n_ops);   /* the neighbour's result */
    }
    memcpy(coll->res_ops[set], ops, n_ops * sizeof(ops[0]));
    coll->num_res_ops = n_ops;
    return axon_xc_chain_finish(ch, team, 0);
}

/* At completion: the user's result, the operands reduced in the device's order. */
void axon_xc_allreduce_result(axon_xc_coll_t *coll)
{
    uint64_t *const *ops = coll->res_ops[coll->set];
    axon_dev_calc_op_t op = axon_xc_calc_ops[coll->args.op];
    axon_dev_calc_data_type_t type = axon_xc_calc_types[coll->args.type];
    uint64_t *dst = coll->args.dst, acc;
    size_t i;
    unsigned k;

    for (i = 0; i < coll->args.count; ++i) {
        acc = be64toh(ops[0][i]);
        for (k = 1; k < coll->num_res_ops; ++k) {
            acc = axon_dev_calc_apply(op, type, acc, be64toh(ops[k][i]));
        }
        dst[i] = acc;
    }
}
