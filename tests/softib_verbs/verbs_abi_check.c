/*
 * What no ibverbs-utils program drives on softib: ibv_create_cq_ex with its
 * polling interface, the ibv_wr_* interface with every operation it offers
 * (between two RC QPs of one process), and an asynchronous event (an SRQ's
 * limit) through ibv_get_async_event, whose SRQ's destroy waits for its ack. Built and run by
 * tests/softib_verbs_test.sh against the libibverbs.so.1 LD_LIBRARY_PATH
 * names; prints what failed and exits 1.
 *   verbs_abi_check
 */
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#define N_SEND 20
#define BUF    4096

#define CHECK(_cond, ...) \
    do { \
        if (!(_cond)) { \
            fprintf(stderr, "verbs_abi_check:%d: ", __LINE__); \
            fprintf(stderr, __VA_ARGS__); \
            fprintf(stderr, "\n"); \
            exit(1); \
        } \
    } while (0)

static struct ibv_context *ctx;
static struct ibv_pd      *pd;
static union ibv_gid       gid;

static struct ibv_qp *make_qp(struct ibv_cq *cq)
{
    struct ibv_qp_init_attr_ex attr;
    struct ibv_qp *qp;

    memset(&attr, 0, sizeof(attr));
    attr.send_cq = attr.recv_cq = cq;
    attr.qp_type = IBV_QPT_RC;
    attr.cap.max_send_wr = attr.cap.max_recv_wr = 64;
    attr.cap.max_send_sge = attr.cap.max_recv_sge = 2;
    attr.cap.max_inline_data = 64;
    attr.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    attr.pd = pd;
    attr.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
                          IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ |
                          IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
    qp = ibv_create_qp_ex(ctx, &attr);
    CHECK(qp != NULL, "create_qp_ex with send ops: %s", strerror(errno));
    return qp;
}

static void connect_qp(struct ibv_qp *qp, uint32_t dest)
{
    struct ibv_qp_attr a;

    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                        IBV_ACCESS_REMOTE_ATOMIC;
    CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                         IBV_QP_ACCESS_FLAGS), "to INIT");
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = dest;
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = gid;
    a.ah_attr.grh.hop_limit = 1;
    a.ah_attr.port_num = 1;
    CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                         IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
          "to RTR");
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 4;
    CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                         IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC), "to RTS");
}

/* Poll the extended CQ until n completions came, each checked by the caller's array. */
static int poll_ex(struct ibv_cq_ex *cq, struct ibv_wc *out, int n)
{
    struct ibv_poll_cq_attr attr = {0};
    int got = 0, ret, spins = 0;

    while (got < n) {
        ret = ibv_start_poll(cq, &attr);
        if (ret == ENOENT) {
            CHECK(++spins < 50000000, "only %d of %d completions", got, n);
            continue;
        }
        CHECK(ret == 0, "start_poll: %d", ret);
        do {
            out[got].wr_id    = cq->wr_id;
            out[got].status   = cq->status;
            out[got].opcode   = ibv_wc_read_opcode(cq);
            out[got].byte_len = ibv_wc_read_byte_len(cq);
            out[got].wc_flags = ibv_wc_read_wc_flags(cq);
            out[got].imm_data = ibv_wc_read_imm_data(cq);
            out[got].qp_num   = ibv_wc_read_qp_num(cq);
            got++;
            /* stop early sometimes: what is left must come at the next start */
            if (got % 3 == 0) {
                break;
            }
        } while ((got < n) && ((ret = ibv_next_poll(cq)) == 0));
        ibv_end_poll(cq);
    }
    return got;
}

struct destroy_srq_arg {
    struct ibv_srq *srq;
    int             ret;
    int             done;
};

static void *destroy_srq_thread(void *arg)
{
    struct destroy_srq_arg *d = arg;

    d->ret = ibv_destroy_srq(d->srq);
    __atomic_store_n(&d->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/*
 * An SRQ armed at a limit raises SRQ_LIMIT_REACHED, about that SRQ, once its
 * posted receives fall below it (here: a QP of its own sends into it).
 */
static void check_srq_limit_event(struct ibv_mr *mr)
{
    struct ibv_srq_init_attr sattr;
    struct ibv_qp_init_attr qattr;
    struct ibv_async_event ev;
    struct ibv_srq_attr limit;
    struct ibv_recv_wr rwr, *bad;
    struct ibv_send_wr swr, *sbad;
    struct ibv_sge sge;
    struct ibv_wc wc;
    struct ibv_srq *srq;
    struct ibv_cq *cq;
    struct ibv_qp *s, *r;
    struct destroy_srq_arg d;
    pthread_t t;
    int i, n;

    memset(&sattr, 0, sizeof(sattr));
    sattr.attr.max_wr  = 16;
    sattr.attr.max_sge = 1;
    srq = ibv_create_srq(pd, &sattr);
    cq  = ibv_create_cq(ctx, 64, NULL, NULL, 0);
    CHECK((srq != NULL) && (cq != NULL), "create_srq, create_cq");
    memset(&qattr, 0, sizeof(qattr));
    qattr.send_cq = qattr.recv_cq = cq;
    qattr.qp_type = IBV_QPT_RC;
    qattr.cap.max_send_wr = qattr.cap.max_send_sge = 4;
    s = ibv_create_qp(pd, &qattr);
    qattr.srq = srq;
    r = ibv_create_qp(pd, &qattr);
    CHECK((s != NULL) && (r != NULL), "create_qp");
    connect_qp(s, r->qp_num);
    connect_qp(r, s->qp_num);
    sge.addr   = (uintptr_t)mr->addr;
    sge.length = 64;
    sge.lkey   = mr->lkey;
    memset(&rwr, 0, sizeof(rwr));
    rwr.sg_list = &sge;
    rwr.num_sge = 1;
    for (i = 0; i < 10; i++) {
        CHECK(!ibv_post_srq_recv(srq, &rwr, &bad), "post_srq_recv");
    }
    limit.srq_limit = 8;
    CHECK(!ibv_modify_srq(srq, &limit, IBV_SRQ_LIMIT), "arm the SRQ limit");
    CHECK(!ibv_query_srq(srq, &limit) && (limit.srq_limit == 8), "query_srq: limit %u",
          limit.srq_limit);
    memset(&swr, 0, sizeof(swr));
    swr.sg_list    = &sge;
    swr.num_sge    = 1;
    swr.opcode     = IBV_WR_SEND;
    swr.send_flags = IBV_SEND_SIGNALED;
    for (i = 0; i < 3; i++) {   /* 10 -> 7 posted: below the limit */
        CHECK(!ibv_post_send(s, &swr, &sbad), "post_send");
    }
    for (n = 0, i = 0; (n < 6) && (i < 50000000); i++) {
        int got = ibv_poll_cq(cq, 1, &wc);
        CHECK((got >= 0) && ((got == 0) || (wc.status == IBV_WC_SUCCESS)), "completion: %s",
              ibv_wc_status_str(wc.status));
        n += got;
    }
    CHECK(n == 6, "%d of 6 completions", n);
    CHECK(!ibv_get_async_event(ctx, &ev), "get_async_event: %s", strerror(errno));
    CHECK((ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED) && (ev.element.srq == srq),
          "event %s about %p, not SRQ %p", ibv_event_type_str(ev.event_type),
          (void *)ev.element.srq, (void *)srq);
    CHECK(!ibv_query_srq(srq, &limit) && (limit.srq_limit == 0), "the limit is disarmed by its event");
    CHECK(!ibv_destroy_qp(s) && !ibv_destroy_qp(r), "destroy the QPs");
    /* destroying the SRQ waits until its event is acknowledged (the ack may touch it) */
    d.srq = srq;
    d.ret = -1;
    __atomic_store_n(&d.done, 0, __ATOMIC_SEQ_CST);
    CHECK(!pthread_create(&t, NULL, destroy_srq_thread, &d), "pthread_create");
    usleep(100000);
    CHECK(!__atomic_load_n(&d.done, __ATOMIC_SEQ_CST),
          "destroy_srq returned before the SRQ's event was acknowledged");
    ibv_ack_async_event(&ev);
    pthread_join(t, NULL);
    CHECK(d.ret == 0, "destroy_srq after the ack: %d", d.ret);
    CHECK(!ibv_destroy_cq(cq), "destroy_cq");
}

int main(void)
{
    struct ibv_device **list;
    struct ibv_cq_init_attr_ex cattr;
    struct ibv_cq_ex *cq;
    struct ibv_qp *a, *b;
    struct ibv_qp_ex *ax;
    struct ibv_mr *mr;
    struct ibv_sge sge;
    struct ibv_recv_wr rwr, *bad;
    struct ibv_wc wc[2 * N_SEND + 8];
    char *buf;
    int i, n, sends = 0, recvs = 0;
    uint64_t *counter;

    list = ibv_get_device_list(&n);
    CHECK((list != NULL) && (n > 0), "no device");
    ctx = ibv_open_device(list[0]);
    CHECK(ctx != NULL, "open %s", ibv_get_device_name(list[0]));
    ibv_free_device_list(list);
    CHECK(!ibv_query_gid(ctx, 1, 0, &gid), "query_gid");
    pd = ibv_alloc_pd(ctx);
    CHECK(pd != NULL, "alloc_pd");

    /* what softib lacks is refused, not faked */
    memset(&cattr, 0, sizeof(cattr));
    cattr.cqe = 128;
    cattr.wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
    CHECK((ibv_create_cq_ex(ctx, &cattr) == NULL) && (errno == EOPNOTSUPP),
          "a CQ with timestamps was made");

    cattr.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM;
    cq = ibv_create_cq_ex(ctx, &cattr);
    CHECK(cq != NULL, "create_cq_ex: %s", strerror(errno));
    a = make_qp(ibv_cq_ex_to_cq(cq));
    b = make_qp(ibv_cq_ex_to_cq(cq));
    connect_qp(a, b->qp_num);
    connect_qp(b, a->qp_num);

    buf = aligned_alloc(4096, 4 * BUF);
    CHECK(buf != NULL, "no memory");
    memset(buf, 0, 4 * BUF);
    mr = ibv_reg_mr(pd, buf, 4 * BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
    CHECK(mr != NULL, "reg_mr");

    /* receives on b, into its half of the buffer */
    for (i = 0; i < N_SEND; i++) {
        sge.addr = (uintptr_t)buf + 2 * BUF + i * 64;
        sge.length = 64;
        sge.lkey = mr->lkey;
        rwr.wr_id = 1000 + i;
        rwr.next = NULL;
        rwr.sg_list = &sge;
        rwr.num_sge = 1;
        CHECK(!ibv_post_recv(b, &rwr, &bad), "post_recv");
    }

    /* sends from a: inline and SGE, with and without immediate, in one chain */
    ax = ibv_qp_to_qp_ex(a);
    CHECK(ax != NULL, "qp_to_qp_ex");
    for (i = 0; i < BUF; i++) {
        buf[i] = (char)i;
    }
    ibv_wr_start(ax);
    for (i = 0; i < N_SEND; i++) {
        ax->wr_id = i;
        ax->wr_flags = IBV_SEND_SIGNALED;
        if (i % 2) {
            ibv_wr_send_imm(ax, htobe32(0xabc000 + i));
        } else {
            ibv_wr_send(ax);
        }
        if (i % 4 < 2) {
            ibv_wr_set_inline_data(ax, buf + i, 32);
        } else {
            ibv_wr_set_sge(ax, mr->lkey, (uintptr_t)buf + i, 32);
        }
    }
    CHECK(!ibv_wr_complete(ax), "wr_complete");

    n = poll_ex(cq, wc, 2 * N_SEND);
    for (i = 0; i < n; i++) {
        CHECK(wc[i].status == IBV_WC_SUCCESS, "completion %d: %s", i,
              ibv_wc_status_str(wc[i].status));
        if (wc[i].opcode == IBV_WC_SEND) {
            CHECK(wc[i].qp_num == a->qp_num, "send on QP 0x%x", wc[i].qp_num);
            sends++;
            continue;
        }
        CHECK(wc[i].opcode == IBV_WC_RECV, "opcode %d", wc[i].opcode);
        CHECK(wc[i].qp_num == b->qp_num && wc[i].byte_len == 32, "receive of %u bytes",
              wc[i].byte_len);
        int k = (int)(wc[i].wr_id - 1000);
        CHECK(k == recvs, "receive %d completes as %d", recvs, k);
        CHECK(!!(k % 2) == !!(wc[i].wc_flags & IBV_WC_WITH_IMM), "immediate flag of %d", k);
        CHECK(!(k % 2) || (be32toh(wc[i].imm_data) == 0xabc000u + k), "immediate of %d", k);
        CHECK(!memcmp(buf + 2 * BUF + k * 64, buf + k, 32), "data of receive %d", k);
        recvs++;
    }
    CHECK(sends == N_SEND && recvs == N_SEND, "%d sends, %d receives", sends, recvs);

    /* RDMA write (inline), read back, fetch-add: one chain, then ibv_poll_cq on the same CQ */
    counter = (uint64_t*)(void*)(buf + 3 * BUF);
    *counter = 40;
    ibv_wr_start(ax);
    ax->wr_id = 500;
    ax->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write(ax, mr->rkey, (uintptr_t)buf + 2 * BUF + 3000);
    ibv_wr_set_inline_data(ax, (void *)"written by ibv_wr", 18);
    ax->wr_id = 501;
    ibv_wr_rdma_read(ax, mr->rkey, (uintptr_t)buf + 2 * BUF + 3000);
    ibv_wr_set_sge(ax, mr->lkey, (uintptr_t)buf + BUF, 18);
    ax->wr_id = 502;
    ibv_wr_atomic_fetch_add(ax, mr->rkey, (uintptr_t)counter, 2);
    ibv_wr_set_sge(ax, mr->lkey, (uintptr_t)buf + BUF + 64, 8);
    CHECK(!ibv_wr_complete(ax), "wr_complete");
    for (n = 0, i = 0; (n < 3) && (i < 50000000); i++) {
        int got = ibv_poll_cq(ibv_cq_ex_to_cq(cq), 3 - n, wc + n);
        CHECK(got >= 0, "poll_cq: %d", got);
        n += got;
    }
    CHECK(n == 3, "%d of 3 completions", n);
    for (i = 0; i < 3; i++) {
        CHECK(wc[i].status == IBV_WC_SUCCESS && wc[i].wr_id == 500u + i, "WR %llu: %s",
              (unsigned long long)wc[i].wr_id, ibv_wc_status_str(wc[i].status));
    }
    CHECK(!strcmp(buf + BUF, "written by ibv_wr"), "read back '%.18s'", buf + BUF);
    CHECK(*counter == 42 && *(uint64_t*)(void*)(buf + BUF + 64) == 40, "fetch-add: %llu",
          (unsigned long long)*counter);

    /* an aborted chain posts nothing: only the next one's send arrives */
    rwr.wr_id = 700;
    sge.addr = (uintptr_t)buf + 2 * BUF;
    CHECK(!ibv_post_recv(b, &rwr, &bad), "post_recv");
    ibv_wr_start(ax);
    ax->wr_id = 600;
    ibv_wr_send(ax);
    ibv_wr_set_sge(ax, mr->lkey, (uintptr_t)buf, 8);
    ibv_wr_abort(ax);
    ibv_wr_start(ax);
    ax->wr_id = 601;
    ibv_wr_send_imm(ax, htobe32(601));
    ibv_wr_set_sge(ax, mr->lkey, (uintptr_t)buf, 8);
    CHECK(!ibv_wr_complete(ax), "wr_complete");
    n = poll_ex(cq, wc, 2);
    for (i = 0; i < n; i++) {
        CHECK((wc[i].wr_id == 601) || ((wc[i].wr_id == 700) &&
                                       (be32toh(wc[i].imm_data) == 601)),
              "after an abort: WR %llu", (unsigned long long)wc[i].wr_id);
    }

    /* an opcode softib lacks: refused at post, the WR named, nothing sent */
    {
        struct ibv_send_wr inv, *ibad = NULL;

        memset(&inv, 0, sizeof(inv));
        inv.opcode = IBV_WR_LOCAL_INV;
        inv.invalidate_rkey = mr->rkey;
        CHECK((ibv_post_send(a, &inv, &ibad) == EOPNOTSUPP) && (ibad == &inv),
              "local invalidate was posted");
    }

    check_srq_limit_event(mr);

    CHECK(!ibv_destroy_qp(a) && !ibv_destroy_qp(b), "destroy_qp");
    CHECK(!ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), "destroy_cq");
    CHECK(!ibv_dereg_mr(mr) && !ibv_dealloc_pd(pd), "dereg_mr, dealloc_pd");
    CHECK(!ibv_close_device(ctx), "close_device");
    free(buf);
    printf("verbs_abi_check: %d sends and receives, write, read, fetch-add over ibv_wr_* and "
           "an extended CQ; an SRQ limit event\n", 2 * N_SEND);
    return 0;
}
