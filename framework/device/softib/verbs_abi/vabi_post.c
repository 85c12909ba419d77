/*
 * Posting work requests: the ops the inline ibv_post_send / ibv_post_recv /
 * ibv_post_srq_recv call. Receive WRs and SGEs have the device layer's
 * layout and pass through (asserted in dev_ibv_map.h); send WRs differ (the
 * device layer's carry more) and are converted in batches on the stack, no
 * allocation.
 */
#include <string.h>
#include "log.h"
#include "vabi.h"

#define VABI_POST_BATCH 16

/* Send flags softib implements (IP checksum offload it has not). */
#define VABI_SEND_FLAGS_KNOWN (IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | \
                               IBV_SEND_INLINE)

/*
 * One send WR without its link; EOPNOTSUPP for what softib lacks (logged).
 * The UD fields are read only on a UD QP: elsewhere that part of the union
 * is whatever the program left in it (UCX's RC sends leave an RDMA address,
 * ucmatose nothing).
 */
static int vabi_send_wr_from_ibv(const struct ibv_send_wr *in, int ud, axon_dev_send_wr_t *out)
{
    if ((unsigned)in->opcode > IBV_WR_ATOMIC_FETCH_AND_ADD) {
        axon_error("libibverbs on softib: post_send: opcode %d not supported (softib has "
                   "send, RDMA write/read and the two atomics)", (int)in->opcode);
        return EOPNOTSUPP;
    }
    if (in->send_flags & ~VABI_SEND_FLAGS_KNOWN) {
        axon_error("libibverbs on softib: post_send: send flags 0x%x not supported",
                   in->send_flags & ~VABI_SEND_FLAGS_KNOWN);
        return EOPNOTSUPP;
    }
    memset(out, 0, sizeof(*out));
    out->wr_id      = in->wr_id;
    out->sg_list    = (axon_dev_sge_t*)(void*)in->sg_list;
    out->num_sge    = in->num_sge;
    out->opcode     = (axon_dev_wr_opcode_t)in->opcode;
    out->send_flags = in->send_flags;
    out->imm_data   = in->imm_data;
    switch (in->opcode) {
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
        out->wr.atomic.remote_addr = in->wr.atomic.remote_addr;
        out->wr.atomic.compare_add = in->wr.atomic.compare_add;
        out->wr.atomic.swap        = in->wr.atomic.swap;
        out->wr.atomic.rkey        = in->wr.atomic.rkey;
        break;
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_RDMA_READ:
        out->wr.rdma.remote_addr = in->wr.rdma.remote_addr;
        out->wr.rdma.rkey        = in->wr.rdma.rkey;
        break;
    default:
        if (!ud) {
            break;
        }
        out->wr.ud.ah          = (in->wr.ud.ah != NULL) ? VABI(ah, in->wr.ud.ah)->dev : NULL;
        out->wr.ud.remote_qpn  = in->wr.ud.remote_qpn;
        out->wr.ud.remote_qkey = in->wr.ud.remote_qkey;
        break;
    }
    return 0;
}

int vabi_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)
{
    axon_dev_send_wr_t batch[VABI_POST_BATCH], *dbad;
    struct ibv_send_wr *from[VABI_POST_BATCH];
    axon_dev_qp_t *dqp = VABI(qp, qp)->dev;
    int ud = (qp->qp_type == IBV_QPT_UD);
    int n, ret;

    while (wr != NULL) {
        for (n = 0; (wr != NULL) && (n < VABI_POST_BATCH); wr = wr->next, n++) {
            if ((ret = vabi_send_wr_from_ibv(wr, ud, &batch[n])) != 0) {
                /* the WRs before the bad one are posted, as verbs promises */
                if ((n > 0) && ((ret = axon_dev_post_send(dqp, batch, &dbad)) != 0)) {
                    *bad_wr = from[dbad - batch];
                    return ret;
                }
                *bad_wr = wr;
                return EOPNOTSUPP;
            }
            from[n] = wr;
            batch[n].next = NULL;
            if (n > 0) {
                batch[n - 1].next = &batch[n];
            }
        }
        if ((ret = axon_dev_post_send(dqp, batch, &dbad)) != 0) {
            *bad_wr = from[dbad - batch];
            return ret;
        }
    }
    return 0;
}

int vabi_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
    return axon_dev_post_recv(VABI(qp, qp)->dev, (axon_dev_recv_wr_t*)(void*)wr,
                              (axon_dev_recv_wr_t**)(void*)bad_wr);
}

int vabi_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
                       struct ibv_recv_wr **bad_wr)
{
    return axon_dev_post_srq_recv(VABI(srq, srq)->dev, (axon_dev_recv_wr_t*)(void*)wr,
                                  (axon_dev_recv_wr_t**)(void*)bad_wr);
}
