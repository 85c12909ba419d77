/*
 * Building a chain: the WRs of one collective, written once at init. Counts
 * in WAIT and ENABLE tasks are cumulative within the task list (seed §8.9.3):
 * the n-th WAIT on a CQ waits for n completions past the CQ's base, and the
 * last task on each CQ or QP carries WAIT_EN_LAST, which moves the base for
 * the next post. So every receive of a post is waited for within the same
 * post, and every send by the start of the next one (a chain ends when its
 * result is in, not when its last send was acknowledged): the counts stay
 * right post after post. Receives are the team's ring's (xchannel.h): the
 * chain names them by member and number, and each post patches in the slots.
 */
#include <stdlib.h>
#include <string.h>
#include "log.h"
#include "xchannel.h"

const axon_dev_calc_data_type_t axon_xc_calc_types[] = {
    [AXON_XC_INT64]  = AXON_DEV_CALC_DATA_TYPE_INT,
    [AXON_XC_UINT64] = AXON_DEV_CALC_DATA_TYPE_UINT,
    [AXON_XC_DOUBLE] = AXON_DEV_CALC_DATA_TYPE_FLOAT,
};

const axon_dev_calc_op_t axon_xc_calc_ops[] = {
    [AXON_XC_SUM]  = AXON_DEV_CALC_OP_ADD,
    [AXON_XC_BAND] = AXON_DEV_CALC_OP_BAND,
    [AXON_XC_BXOR] = AXON_DEV_CALC_OP_BXOR,
    [AXON_XC_BOR]  = AXON_DEV_CALC_OP_BOR,
    [AXON_XC_MAX]  = AXON_DEV_CALC_OP_MAX,
    [AXON_XC_MIN]  = AXON_DEV_CALC_OP_MIN,
};

static axon_dev_send_wr_t *axon_xc_chain_wr(axon_xc_chain_t *ch, axon_dev_wr_opcode_t opcode);
static void axon_xc_chain_task(axon_xc_chain_t *ch, axon_dev_send_wr_t *wr);

axon_status_t axon_xc_chain_init(axon_xc_chain_t *ch, const axon_xc_team_t *team,
                                 unsigned max_wrs, unsigned max_sges, unsigned max_patches)
{
    size_t n = team->size;

    memset(ch, 0, sizeof(*ch));
    ch->n         = team->size;
    ch->wrs       = calloc(max_wrs, sizeof(*ch->wrs));
    ch->sges      = calloc(max_sges ? max_sges : 1, sizeof(*ch->sges));
    ch->patches   = calloc(max_patches ? max_patches : 1, sizeof(*ch->patches));
    ch->tasks     = calloc(AXON_XC_MAX_ITEMS * n, sizeof(*ch->tasks));
    ch->rcq_waits = calloc(4 * n, sizeof(int32_t));
    ch->from      = calloc(n, sizeof(*ch->from));
    ch->send_tail = calloc(2 * n, sizeof(*ch->send_tail));
    if ((ch->wrs == NULL) || (ch->sges == NULL) || (ch->patches == NULL) || (ch->tasks == NULL) ||
        (ch->rcq_waits == NULL) || (ch->from == NULL) || (ch->send_tail == NULL)) {
        axon_xc_chain_cleanup(ch);
        return AXON_ERR_NO_MEMORY;
    }
    ch->enables      = ch->rcq_waits + n;
    ch->posted_sends = ch->rcq_waits + 2 * n;
    ch->recvs        = ch->rcq_waits + 3 * n;
    /* First, the sends of the chains before: their buffers are this one's too */
    ch->scq_first = axon_xc_chain_wr(ch, AXON_DEV_WR_CQE_WAIT);
    ch->scq_first->wr.cqe_wait.cq = team->scq;
    axon_xc_chain_task(ch, ch->scq_first);
    return AXON_OK;
}

void axon_xc_chain_cleanup(axon_xc_chain_t *ch)
{
    free(ch->wrs);
    free(ch->sges);
    free(ch->patches);
    free(ch->tasks);
    free(ch->rcq_waits);
    free(ch->from);
    free(ch->send_tail);
    memset(ch, 0, sizeof(*ch));
}

uint32_t axon_xc_chain_recv(axon_xc_chain_t *ch, uint32_t m)
{
    if (ch->recvs[m] == 0) {
        ch->from[ch->num_from++] = m;
    }
    return (uint32_t)ch->recvs[m]++;
}

axon_xc_opnd_t axon_xc_opnd_chunk(const axon_xc_opnd_t *v, unsigned c, size_t chunk)
{
    axon_xc_opnd_t op = *v;

    if (op.addr != NULL) {
        op.addr = (uint8_t *)op.addr + c * chunk;
    } else {
        op.idx += c;   /* every chunk is a message of its own */
    }
    return op;
}

void axon_xc_chain_place(axon_xc_chain_t *ch, uint64_t *field, const axon_xc_opnd_t *op)
{
    axon_xc_patch_t *p;

    if (op->addr != NULL) {
        *field = (uintptr_t)op->addr;
        return;
    }
    p        = &ch->patches[ch->num_patches++];
    p->field = field;
    p->m     = op->m;
    p->idx   = op->idx;
}

static axon_dev_send_wr_t *axon_xc_chain_wr(axon_xc_chain_t *ch, axon_dev_wr_opcode_t opcode)
{
    axon_dev_send_wr_t *wr = &ch->wrs[ch->num_wrs++];

    wr->opcode = opcode;
    return wr;
}

void axon_xc_chain_send(axon_xc_chain_t *ch, const axon_xc_coll_t *coll, uint32_t m,
                        const axon_xc_opnd_t *ops, unsigned n_ops, size_t len)
{
    axon_dev_send_wr_t *wr = axon_xc_chain_wr(ch, AXON_DEV_WR_SEND);
    axon_dev_sge_t *sge;
    uint32_t n = ch->n;
    unsigned i;

    wr->send_flags = AXON_DEV_SEND_SIGNALED;
    if (len > 0) {
        wr->sg_list = &ch->sges[ch->num_sges];
        wr->num_sge = (int)n_ops;
        for (i = 0; i < n_ops; ++i) {
            sge         = &ch->sges[ch->num_sges++];
            sge->length = (uint32_t)len;
            sge->lkey   = ops[i].addr ? coll->scratch_mr->lkey : coll->team->ring_mr->lkey;
            axon_xc_chain_place(ch, &sge->addr, &ops[i]);
        }
    }
    if (n_ops > 1) {   /* the device sends the reduction of the operands */
        wr->send_flags     |= AXON_DEV_SEND_WITH_CALC;
        wr->calc.calc_op    = axon_xc_calc_ops[coll->args.op];
        wr->calc.data_type  = axon_xc_calc_types[coll->args.type];
        wr->calc.data_size  = AXON_DEV_CALC_DATA_SIZE_64_BIT;
    }
    if (ch->send_tail[m] != NULL) {
        ch->send_tail[m]->next = wr;
    } else {
        ch->send_tail[n + m] = wr;
    }
    ch->send_tail[m] = wr;
    ++ch->posted_sends[m];
    ++ch->num_sends;
}

static void axon_xc_chain_task(axon_xc_chain_t *ch, axon_dev_send_wr_t *wr)
{
    if (ch->task_tail != NULL) {
        ch->task_tail->next = wr;
    } else {
        ch->task_head = wr;
    }
    ch->task_tail = wr;
}

void axon_xc_chain_enable(axon_xc_chain_t *ch, const axon_xc_team_t *team, uint32_t m)
{
    axon_dev_send_wr_t *wr = axon_xc_chain_wr(ch, AXON_DEV_WR_SEND_ENABLE);

    ch->enables[m]            = ch->posted_sends[m];
    wr->wr.wqe_enable.qp        = team->peers[m].qp;
    wr->wr.wqe_enable.wqe_count = ch->enables[m];
    axon_xc_chain_task(ch, wr);
}

void axon_xc_chain_wait_recv(axon_xc_chain_t *ch, const axon_xc_team_t *team, uint32_t m)
{
    axon_dev_send_wr_t *wr = axon_xc_chain_wr(ch, AXON_DEV_WR_CQE_WAIT);

    wr->wr.cqe_wait.cq       = team->peers[m].rcq;
    wr->wr.cqe_wait.cq_count = ++ch->rcq_waits[m];
    axon_xc_chain_task(ch, wr);
}

/* The last WAIT on each CQ and the last ENABLE of each QP end their count. */
static void axon_xc_chain_mark_last(axon_xc_chain_t *ch)
{
    axon_dev_send_wr_t *wr, *other;
    int last;

    for (wr = ch->task_head; wr != NULL; wr = wr->next) {
        last = 1;
        for (other = wr->next; (other != NULL) && last; other = other->next) {
            if (other->opcode != wr->opcode) {
                continue;
            }
            last = (wr->opcode == AXON_DEV_WR_CQE_WAIT) ?
                   (other->wr.cqe_wait.cq != wr->wr.cqe_wait.cq) :
                   (other->wr.wqe_enable.qp != wr->wr.wqe_enable.qp);
        }
        if (last) {
            wr->send_flags |= AXON_DEV_SEND_WAIT_EN_LAST;
        }
    }
}

axon_status_t axon_xc_chain_finish(axon_xc_chain_t *ch, axon_xc_team_t *team)
{
    uint32_t n = team->size, m;
    axon_dev_task_t *t;

    ch->task_tail->send_flags |= AXON_DEV_SEND_SIGNALED;   /* what the CPU finds */
    axon_xc_chain_mark_last(ch);
    for (m = 0; m < n; ++m) {
        if ((ch->enables[m] != ch->posted_sends[m]) || (ch->rcq_waits[m] != ch->recvs[m])) {
            axon_error("xchannel: chain releases %d of the %d sends to member %u and waits for "
                       "%d of its %d messages", ch->enables[m], ch->posted_sends[m], m,
                       ch->rcq_waits[m], ch->recvs[m]);
            return AXON_ERR_INVALID_PARAM;
        }
    }
    /* Room it takes: the fullest member queue or ring, or its share of the MQP's. */
    ch->slots = (ch->num_wrs - ch->num_sends) * AXON_XC_RING / AXON_XC_MQP_WRS + 1;
    for (m = 0; m < n; ++m) {
        if ((unsigned)ch->posted_sends[m] > ch->slots) {
            ch->slots = (unsigned)ch->posted_sends[m];
        }
        if ((unsigned)ch->recvs[m] > ch->slots) {
            ch->slots = (unsigned)ch->recvs[m];
        }
    }
    /* The held sends, then the tasks that release them (the receives are the ring's). */
    for (m = 0; m < n; ++m) {
        if (ch->send_tail[n + m] != NULL) {
            t = &ch->tasks[ch->num_tasks++];
            t->task_type    = AXON_DEV_TASK_SEND;
            t->item.qp      = team->peers[m].qp;
            t->item.send_wr = ch->send_tail[n + m];
        }
    }
    t = &ch->tasks[ch->num_tasks++];
    t->task_type    = AXON_DEV_TASK_SEND;
    t->item.qp      = team->mqp;
    t->item.send_wr = ch->task_head;
    for (m = 1; m < ch->num_tasks; ++m) {
        ch->tasks[m - 1].next = &ch->tasks[m];
    }
    return AXON_OK;
}
