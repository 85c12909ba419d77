/*
 * The ibv_wr_* interface (ibv_wr_post(3)): between ibv_wr_start and
 * ibv_wr_complete the program builds send WRs one call at a time; they are
 * kept in the QP's builder, preallocated when the QP is made, and posted to
 * the device as one chain at complete (none if a call failed, and none
 * after abort). Inline data is copied into the builder, which softib copies
 * again at post, so the builder is free at the next start.
 */
#include <stdlib.h>
#include <string.h>
#include "log.h"
#include "vabi.h"

/* WRs one start..complete may hold: a program's batch, not its queue depth. */
#define VABI_WR_BATCH_MAX 256

struct vabi_wr_builder {
    unsigned            max_wr, max_sge, max_inline;
    unsigned            n;     /* WRs since wr_start */
    int                 err;   /* the first failure since wr_start (logged) */
    axon_dev_send_wr_t *wrs;   /* max_wr of them */
    axon_dev_sge_t     *sges;  /* max_sge per WR */
    uint8_t            *inl;   /* max_inline bytes per WR */
};

static vabi_wr_builder_t *vabi_wr(struct ibv_qp_ex *qpx)
{
    return ((vabi_qp_t*)(void*)qpx)->wr;
}

static void vabi_wr_fail(vabi_wr_builder_t *b, int err, const char *what)
{
    if (b->err == 0) {
        axon_error("libibverbs on softib: ibv_wr_*: %s", what);
        b->err = err;
    }
}

/* The WR the setters apply to: the last one begun, or NULL (and an error). */
static axon_dev_send_wr_t *vabi_wr_current(vabi_wr_builder_t *b)
{
    if (b->n == 0) {
        vabi_wr_fail(b, EINVAL, "a setter before any operation");
        return NULL;
    }
    return &b->wrs[b->n - 1];
}

/* Begin a WR of opcode with the QP's wr_id and wr_flags. */
static axon_dev_send_wr_t *vabi_wr_begin(struct ibv_qp_ex *qpx, axon_dev_wr_opcode_t opcode)
{
    vabi_wr_builder_t *b = vabi_wr(qpx);
    axon_dev_send_wr_t *wr;

    if (b->n == b->max_wr) {
        vabi_wr_fail(b, ENOMEM, "more WRs between start and complete than the builder holds");
        return NULL;
    }
    wr = &b->wrs[b->n];
    memset(wr, 0, sizeof(*wr));
    wr->wr_id      = qpx->wr_id;
    wr->send_flags = qpx->wr_flags;
    wr->opcode     = opcode;
    wr->sg_list    = &b->sges[b->n * b->max_sge];
    b->n++;
    return wr;
}

static void vabi_wr_send(struct ibv_qp_ex *qpx)
{
    vabi_wr_begin(qpx, AXON_DEV_WR_SEND);
}

static void vabi_wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm_data)
{
    axon_dev_send_wr_t *wr = vabi_wr_begin(qpx, AXON_DEV_WR_SEND_WITH_IMM);

    if (wr != NULL) {
        wr->imm_data = imm_data;
    }
}

static void vabi_wr_rdma(struct ibv_qp_ex *qpx, axon_dev_wr_opcode_t opcode, uint32_t rkey,
                         uint64_t remote_addr, __be32 imm_data)
{
    axon_dev_send_wr_t *wr = vabi_wr_begin(qpx, opcode);

    if (wr != NULL) {
        wr->wr.rdma.rkey        = rkey;
        wr->wr.rdma.remote_addr = remote_addr;
        wr->imm_data            = imm_data;
    }
}

static void vabi_wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr)
{
    vabi_wr_rdma(qpx, AXON_DEV_WR_RDMA_WRITE, rkey, remote_addr, 0);
}

static void vabi_wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr,
                                   __be32 imm_data)
{
    vabi_wr_rdma(qpx, AXON_DEV_WR_RDMA_WRITE_WITH_IMM, rkey, remote_addr, imm_data);
}

static void vabi_wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr)
{
    vabi_wr_rdma(qpx, AXON_DEV_WR_RDMA_READ, rkey, remote_addr, 0);
}

static void vabi_wr_atomic(struct ibv_qp_ex *qpx, axon_dev_wr_opcode_t opcode, uint32_t rkey,
                           uint64_t remote_addr, uint64_t compare_add, uint64_t swap)
{
    axon_dev_send_wr_t *wr = vabi_wr_begin(qpx, opcode);

    if (wr != NULL) {
        wr->wr.atomic.rkey        = rkey;
        wr->wr.atomic.remote_addr = remote_addr;
        wr->wr.atomic.compare_add = compare_add;
        wr->wr.atomic.swap        = swap;
    }
}

static void vabi_wr_atomic_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr,
                                   uint64_t compare, uint64_t swap)
{
    vabi_wr_atomic(qpx, AXON_DEV_WR_ATOMIC_CMP_AND_SWP, rkey, remote_addr, compare, swap);
}

static void vabi_wr_atomic_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr,
                                     uint64_t add)
{
    vabi_wr_atomic(qpx, AXON_DEV_WR_ATOMIC_FETCH_AND_ADD, rkey, remote_addr, add, 0);
}

static void vabi_wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah, uint32_t remote_qpn,
                                uint32_t remote_qkey)
{
    axon_dev_send_wr_t *wr = vabi_wr_current(vabi_wr(qpx));

    if (wr != NULL) {
        wr->wr.ud.ah          = VABI(ah, ah)->dev;
        wr->wr.ud.remote_qpn  = remote_qpn;
        wr->wr.ud.remote_qkey = remote_qkey;
    }
}

static void vabi_wr_set_sge_list(struct ibv_qp_ex *qpx, size_t num_sge,
                                 const struct ibv_sge *sg_list)
{
    vabi_wr_builder_t *b = vabi_wr(qpx);
    axon_dev_send_wr_t *wr = vabi_wr_current(b);

    if (wr == NULL) {
        return;
    }
    if (num_sge > b->max_sge) {
        vabi_wr_fail(b, EINVAL, "more SGEs than the QP's max_send_sge");
        return;
    }
    memcpy(wr->sg_list, sg_list, num_sge * sizeof(*sg_list));   /* same layout */
    wr->num_sge = (int)num_sge;
}

static void vabi_wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr, uint32_t length)
{
    struct ibv_sge sge = {.addr = addr, .length = length, .lkey = lkey};

    vabi_wr_set_sge_list(qpx, 1, &sge);
}

static void vabi_wr_set_inline_data_list(struct ibv_qp_ex *qpx, size_t num_buf,
                                         const struct ibv_data_buf *buf_list)
{
    vabi_wr_builder_t *b = vabi_wr(qpx);
    axon_dev_send_wr_t *wr = vabi_wr_current(b);
    uint8_t *data;
    size_t i, len = 0;

    if (wr == NULL) {
        return;
    }
    data = &b->inl[(size_t)(wr - b->wrs) * b->max_inline];
    for (i = 0; i < num_buf; i++) {
        if (buf_list[i].length > b->max_inline - len) {
            vabi_wr_fail(b, EINVAL, "inline data over the QP's max_inline_data");
            return;
        }
        memcpy(data + len, buf_list[i].addr, buf_list[i].length);
        len += buf_list[i].length;
    }
    wr->sg_list[0].addr   = (uintptr_t)data;
    wr->sg_list[0].length = (uint32_t)len;
    wr->sg_list[0].lkey   = 0;
    wr->num_sge           = 1;
    wr->send_flags       |= AXON_DEV_SEND_INLINE;
}

static void vabi_wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr, size_t length)
{
    struct ibv_data_buf buf = {.addr = addr, .length = length};

    vabi_wr_set_inline_data_list(qpx, 1, &buf);
}

static void vabi_wr_start(struct ibv_qp_ex *qpx)
{
    vabi_wr_builder_t *b = vabi_wr(qpx);

    b->n   = 0;
    b->err = 0;
}

static void vabi_wr_abort(struct ibv_qp_ex *qpx)
{
    vabi_wr_start(qpx);
}

static int vabi_wr_complete(struct ibv_qp_ex *qpx)
{
    vabi_wr_builder_t *b = vabi_wr(qpx);
    axon_dev_send_wr_t *bad;
    unsigned i, n = b->n;
    int err = b->err;

    vabi_wr_start(qpx);
    if (err || (n == 0)) {
        return err;
    }
    for (i = 0; i + 1 < n; i++) {
        b->wrs[i].next = &b->wrs[i + 1];
    }
    b->wrs[n - 1].next = NULL;
    return axon_dev_post_send(((vabi_qp_t*)(void*)qpx)->dev, b->wrs, &bad);
}

/* Which ops each send ops flag brings; the others softib lacks. */
#define VABI_WR_OPS (IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | \
                     IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | \
                     IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | \
                     IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)

int vabi_wr_init(vabi_qp_t *qp, uint64_t ops)
{
    struct ibv_qp_ex *qpx = &qp->ex;
    axon_dev_qp_attr_t attr;
    axon_dev_qp_init_attr_t init;
    vabi_wr_builder_t *b;
    size_t max_wr, max_sge, max_inline;
    int ret;

    if (ops & ~(uint64_t)VABI_WR_OPS) {
        axon_error("libibverbs on softib: create_qp_ex: send ops flags 0x%llx not supported "
                   "(local invalidate, memory windows, TSO, atomic write)",
                   (unsigned long long)(ops & ~(uint64_t)VABI_WR_OPS));
        return EOPNOTSUPP;
    }
    if ((ret = axon_dev_query_qp(qp->dev, &attr, AXON_DEV_QP_CAP, &init)) != 0) {
        return ret;
    }
    max_wr     = (init.cap.max_send_wr < VABI_WR_BATCH_MAX) ? init.cap.max_send_wr :
                                                              VABI_WR_BATCH_MAX;
    max_sge    = (init.cap.max_send_sge > 0) ? init.cap.max_send_sge : 1;
    max_inline = init.cap.max_inline_data;
    b = calloc(1, sizeof(*b) + max_wr * (sizeof(*b->wrs) + max_sge * sizeof(*b->sges) +
                                         max_inline));
    if (b == NULL) {
        return ENOMEM;
    }
    b->max_wr     = (unsigned)max_wr;
    b->max_sge    = (unsigned)max_sge;
    b->max_inline = (unsigned)max_inline;
    b->wrs        = (axon_dev_send_wr_t*)(void*)(b + 1);
    b->sges       = (axon_dev_sge_t*)(void*)(b->wrs + max_wr);
    b->inl        = (uint8_t*)(void*)(b->sges + max_wr * max_sge);
    qp->wr        = b;

    /* only the operations asked for: the others stay NULL, as with rdma-core */
    qpx->wr_rdma_write       = (ops & IBV_QP_EX_WITH_RDMA_WRITE) ? vabi_wr_rdma_write : NULL;
    qpx->wr_rdma_write_imm   = (ops & IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM) ?
                               vabi_wr_rdma_write_imm : NULL;
    qpx->wr_send             = (ops & IBV_QP_EX_WITH_SEND) ? vabi_wr_send : NULL;
    qpx->wr_send_imm         = (ops & IBV_QP_EX_WITH_SEND_WITH_IMM) ? vabi_wr_send_imm : NULL;
    qpx->wr_rdma_read        = (ops & IBV_QP_EX_WITH_RDMA_READ) ? vabi_wr_rdma_read : NULL;
    qpx->wr_atomic_cmp_swp   = (ops & IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP) ?
                               vabi_wr_atomic_cmp_swp : NULL;
    qpx->wr_atomic_fetch_add = (ops & IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD) ?
                               vabi_wr_atomic_fetch_add : NULL;
    if (qp->ex.qp_base.qp_type == IBV_QPT_UD) {
        qpx->wr_set_ud_addr = vabi_wr_set_ud_addr;
    }
    qpx->wr_set_sge              = vabi_wr_set_sge;
    qpx->wr_set_sge_list         = vabi_wr_set_sge_list;
    qpx->wr_set_inline_data      = vabi_wr_set_inline_data;
    qpx->wr_set_inline_data_list = vabi_wr_set_inline_data_list;
    qpx->wr_start                = vabi_wr_start;
    qpx->wr_complete             = vabi_wr_complete;
    qpx->wr_abort                = vabi_wr_abort;
    return 0;
}

void vabi_wr_cleanup(vabi_qp_t *qp)
{
    free(qp->wr);
    qp->wr = NULL;
}
