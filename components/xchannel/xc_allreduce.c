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
 * input is converted at each post, the result out of the operands at
 * completion. A vector travels in chunks of a ring slot (the device's
 * max_calc_vector elements), a CALC send each, and lands in slots.
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
    if ((args->count == 0) || (args->count > (size_t)team->slot_len / 8 * AXON_XC_MAX_CHUNKS)) {
        axon_debug("xchannel: allreduce of %zu elements: offloaded are 1..%u (%u chunks of %u)",
                   args->count, team->slot_len / 8 * AXON_XC_MAX_CHUNKS, AXON_XC_MAX_CHUNKS,
                   team->slot_len / 8);
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

static unsigned axon_xc_allreduce_chunks(const axon_xc_coll_t *coll)
{
    return (unsigned)((coll->args.count * 8 + coll->chunk - 1) / coll->chunk);
}

/* CALC sends to m of the vectors ops[0..n_ops), one per chunk. */
static void axon_xc_allreduce_sends(axon_xc_coll_t *coll, axon_xc_chain_t *ch, uint32_t m,
                                    const axon_xc_opnd_t *ops, unsigned n_ops)
{
    axon_xc_opnd_t sges[AXON_XC_MAX_OPERANDS];
    size_t len = coll->args.count * 8;
    unsigned c, i;

    for (c = 0; c < axon_xc_allreduce_chunks(coll); ++c) {
        for (i = 0; i < n_ops; ++i) {
            sges[i] = axon_xc_opnd_chunk(&ops[i], c, coll->chunk);
        }
        axon_xc_chain_send(ch, coll, m, sges, n_ops,
                           (len - c * coll->chunk < coll->chunk) ? len - c * coll->chunk :
                           coll->chunk);
    }
    axon_xc_chain_enable(ch, coll->team, m);
}

/* The chain's receives of one vector from m, chunk by chunk: the vector. */
static axon_xc_opnd_t axon_xc_allreduce_recv(axon_xc_coll_t *coll, axon_xc_chain_t *ch,
                                             uint32_t m)
{
    axon_xc_opnd_t got = { .addr = NULL, .m = m };
    unsigned c;

    got.idx = axon_xc_chain_recv(ch, m);
    for (c = 1; c < axon_xc_allreduce_chunks(coll); ++c) {
        (void)axon_xc_chain_recv(ch, m);
    }
    return got;
}

static void axon_xc_allreduce_wait(axon_xc_coll_t *coll, axon_xc_chain_t *ch, uint32_t m)
{
    unsigned c;

    for (c = 0; c < axon_xc_allreduce_chunks(coll); ++c) {
        axon_xc_chain_wait_recv(ch, coll->team, m);
    }
}

/* One exchange: m gets the reduction of ops (chunk by chunk), ours comes from m. */
static axon_xc_opnd_t axon_xc_allreduce_round(axon_xc_coll_t *coll, axon_xc_chain_t *ch,
                                              uint32_t m, const axon_xc_opnd_t *ops,
                                              unsigned n_ops)
{
    axon_xc_opnd_t got = axon_xc_allreduce_recv(coll, ch, m);

    axon_xc_allreduce_sends(coll, ch, m, ops, n_ops);
    axon_xc_allreduce_wait(coll, ch, m);
    return got;
}

/* The CPU reduces ops at completion: their chunks' addresses go to pieces[]. */
static axon_status_t axon_xc_allreduce_result(axon_xc_coll_t *coll, axon_xc_chain_t *ch,
                                              unsigned set, const axon_xc_opnd_t *ops,
                                              unsigned n_ops)
{
    unsigned c, k, chunks = axon_xc_allreduce_chunks(coll);
    axon_xc_opnd_t op;

    coll->num_pieces = n_ops * chunks;
    for (k = 0; k < n_ops; ++k) {
        for (c = 0; c < chunks; ++c) {
            op = axon_xc_opnd_chunk(&ops[k], c, coll->chunk);
            axon_xc_chain_place(ch, &coll->pieces[set][k * chunks + c], &op);
        }
    }
    return axon_xc_chain_finish(ch, coll->team);
}

axon_status_t axon_xc_allreduce_compile(axon_xc_coll_t *coll, unsigned set)
{
    axon_xc_team_t *team = coll->team;
    axon_xc_chain_t *ch  = &coll->chains[set];
    uint32_t n = team->size, r = team->rank, p = axon_xc_pow2_floor(n), extra = n - p;
    uint32_t rounds = axon_xc_log2_ceil(p), k, v;
    unsigned chunks = axon_xc_allreduce_chunks(coll);
    axon_xc_opnd_t ops[AXON_XC_MAX_OPERANDS] = { { .addr = coll->input[set] } };
    unsigned n_ops = 1;
    axon_status_t status;

    status = axon_xc_chain_init(ch, team, (3 * rounds + 3) * chunks + 8,
                                (rounds + 3) * (rounds + 3) * chunks,
                                (rounds + 3) * (rounds + 4) * chunks);
    if (status != AXON_OK) {
        return status;
    }
    if ((r < 2 * extra) && !(r & 1)) {
        /* give the input to the odd neighbour, receive the result from it */
        ops[0] = axon_xc_allreduce_round(coll, ch, r + 1, ops, 1);
        return axon_xc_allreduce_result(coll, ch, set, ops, 1);
    }
    if (r < 2 * extra) {
        ops[n_ops++] = axon_xc_allreduce_recv(coll, ch, r - 1);   /* the even one's input */
        axon_xc_allreduce_wait(coll, ch, r - 1);
        v = r / 2;
    } else {
        v = r - extra;
    }
    for (k = 0; k < rounds; ++k) {
        ops[n_ops] = axon_xc_allreduce_round(coll, ch,
                                             axon_xc_participant_rank(v ^ (1u << k), extra),
                                             ops, n_ops);
        ++n_ops;
    }
    if (r < 2 * extra) {
        axon_xc_allreduce_sends(coll, ch, r - 1, ops, n_ops);   /* the neighbour's result */
    }
    return axon_xc_allreduce_result(coll, ch, set, ops, n_ops);
}

/* At completion: the user's result, the operands reduced in the device's order. */
void axon_xc_allreduce_finish(axon_xc_coll_t *coll)
{
    const uint64_t *pieces = coll->pieces[coll->set];
    axon_dev_calc_op_t op = axon_xc_calc_ops[coll->args.op];
    axon_dev_calc_data_type_t type = axon_xc_calc_types[coll->args.type];
    unsigned chunks = axon_xc_allreduce_chunks(coll), n_ops = coll->num_pieces / chunks, k;
    size_t per = coll->chunk / 8, i, e;
    uint64_t *dst = coll->args.dst, acc;
    const uint64_t *x;

    for (i = 0; i < coll->args.count; ++i) {
        e   = i % per;
        x   = (const uint64_t *)(uintptr_t)pieces[i / per];
        acc = be64toh(x[e]);
        for (k = 1; k < n_ops; ++k) {
            x   = (const uint64_t *)(uintptr_t)pieces[k * chunks + i / per];
            acc = axon_dev_calc_apply(op, type, acc, be64toh(x[e]));
        }
        dst[i] = acc;
    }
}
