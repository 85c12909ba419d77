/*
 * Synchronous rdma_cm ids on softib (rdma_create_ep, rdma_get_request, ids
 * without an event channel), beyond what rdma_server/rdma_client drive:
 *   - one listener takes two requests before accepting either, then serves
 *     both with their events interleaved (the ids of one listener share its
 *     private channel: each call must get its own id's event);
 *   - each call leaves its event in id->event (ADDR_RESOLVED after
 *     rdma_resolve_addr, the request after rdma_get_request, ESTABLISHED
 *     after rdma_connect/rdma_accept, DISCONNECTED after rdma_disconnect);
 *   - a request given an SRQ (rdma_create_srq) before its QP; rdma_create_qp_ex's
 *     ibv_wr_* interface;
 *   - errors: a connect to a port nobody listens on fails with ECONNREFUSED,
 *     rdma_get_request on an id with a channel of the program's with EINVAL,
 *     rdma_create_ep without an addrinfo with EINVAL; a listener destroyed
 *     with a request it never took refuses that connect (no hang).
 * Built and run by tests/softib_verbs_test.sh against the librdmacm.so.1
 * LD_LIBRARY_PATH names; prints what failed and exits 1; alarm(60) bounds it.
 *   rdmacm_sync_check
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#define CHECK(_cond, ...) \
    do { \
        if (!(_cond)) { \
            fprintf(stderr, "rdmacm_sync_check:%d: ", __LINE__); \
            fprintf(stderr, __VA_ARGS__); \
            fprintf(stderr, " (errno %d: %s)\n", errno, strerror(errno)); \
            exit(1); \
        } \
    } while (0)

#define MSG 16

static char port[16];

static struct rdma_addrinfo *addrinfo(int passive, const char *service)
{
    struct rdma_addrinfo hints, *res;

    memset(&hints, 0, sizeof(hints));
    hints.ai_flags      = passive ? RAI_PASSIVE : 0;
    hints.ai_port_space = RDMA_PS_TCP;
    CHECK(rdma_getaddrinfo("127.0.0.1", service, &hints, &res) == 0, "rdma_getaddrinfo %s",
          service);
    return res;
}

static void qp_attr(struct ibv_qp_init_attr *attr)
{
    memset(attr, 0, sizeof(*attr));
    attr->cap.max_send_wr = attr->cap.max_recv_wr = 2;
    attr->cap.max_send_sge = attr->cap.max_recv_sge = 1;
    attr->sq_sig_all = 1;
}

static void expect_event(struct rdma_cm_id *id, enum rdma_cm_event_type type, const char *after)
{
    CHECK((id->event != NULL) && (id->event->event == type), "after %s: id->event %s, not %s",
          after, id->event ? rdma_event_str(id->event->event) : "NULL", rdma_event_str(type));
}

/* A connection's buffers; the receive is posted before connect or accept. */
typedef struct {
    uint8_t        send_buf[MSG], recv_buf[MSG];
    struct ibv_mr *smr, *rmr;
} conn_t;

static void conn_prepare(struct rdma_cm_id *id, conn_t *c)
{
    CHECK((c->rmr = rdma_reg_msgs(id, c->recv_buf, MSG)) != NULL, "reg recv");
    CHECK((c->smr = rdma_reg_msgs(id, c->send_buf, MSG)) != NULL, "reg send");
    CHECK(rdma_post_recv(id, NULL, c->recv_buf, MSG, c->rmr) == 0, "post_recv");
}

static void conn_send(struct rdma_cm_id *id, conn_t *c, uint8_t value)
{
    struct ibv_wc wc;
    int ret;

    memset(c->send_buf, value, MSG);
    CHECK(rdma_post_send(id, NULL, c->send_buf, MSG, c->smr, 0) == 0, "post_send");
    while ((ret = rdma_get_send_comp(id, &wc)) == 0) {
    }
    CHECK((ret > 0) && (wc.status == IBV_WC_SUCCESS), "send completion");
}

static uint8_t conn_recv(struct rdma_cm_id *id, conn_t *c)
{
    struct ibv_wc wc;
    int ret;

    while ((ret = rdma_get_recv_comp(id, &wc)) == 0) {
    }
    CHECK((ret > 0) && (wc.status == IBV_WC_SUCCESS) && (wc.byte_len == MSG), "receive");
    CHECK(c->recv_buf[MSG - 1] == c->recv_buf[0], "a whole message");
    return c->recv_buf[0];
}

static void conn_release(conn_t *c)
{
    rdma_dereg_mr(c->smr);
    rdma_dereg_mr(c->rmr);
}

static void *client(void *arg)
{
    uint8_t first = (uint8_t)(uintptr_t)arg;
    struct rdma_addrinfo *res = addrinfo(0, port);
    struct ibv_qp_init_attr attr;
    struct rdma_cm_id *id;
    conn_t c;

    qp_attr(&attr);
    CHECK(rdma_create_ep(&id, res, NULL, &attr) == 0, "client rdma_create_ep");
    rdma_freeaddrinfo(res);
    CHECK((id->qp != NULL) && (id->pd != NULL) && (id->send_cq_channel != NULL),
          "rdma_create_ep made a QP, PD and CQ channels");
    expect_event(id, RDMA_CM_EVENT_ROUTE_RESOLVED, "rdma_create_ep");
    conn_prepare(id, &c);
    CHECK(rdma_connect(id, NULL) == 0, "client %u connect", first);
    expect_event(id, RDMA_CM_EVENT_ESTABLISHED, "rdma_connect");
    conn_send(id, &c, first);   /* the server answers with first + 1 */
    CHECK(conn_recv(id, &c) == (uint8_t)(first + 1), "client %u: the server's answer", first);
    conn_release(&c);
    CHECK(rdma_disconnect(id) == 0, "client disconnect");
    expect_event(id, RDMA_CM_EVENT_DISCONNECTED, "rdma_disconnect");
    rdma_destroy_ep(id);
    return NULL;
}

static void two_requests_interleaved(void)
{
    struct rdma_addrinfo *res = addrinfo(1, "0");
    struct rdma_cm_id *listen_id, *req[2];
    struct ibv_qp_init_attr attr;
    pthread_t cli[2];
    conn_t c[2];
    int i;

    qp_attr(&attr);
    CHECK(rdma_create_ep(&listen_id, res, NULL, &attr) == 0, "passive rdma_create_ep");
    rdma_freeaddrinfo(res);
    CHECK(listen_id->qp == NULL, "a passive endpoint has no QP of its own");
    CHECK(rdma_listen(listen_id, 4) == 0, "listen");
    snprintf(port, sizeof(port), "%u", ntohs(rdma_get_src_port(listen_id)));
    for (i = 0; i < 2; i++) {
        CHECK(pthread_create(&cli[i], NULL, client, (void *)(uintptr_t)(10 * (i + 1))) == 0,
              "thread");
    }
    for (i = 0; i < 2; i++) {
        CHECK(rdma_get_request(listen_id, &req[i]) == 0, "get_request %d", i);
        expect_event(req[i], RDMA_CM_EVENT_CONNECT_REQUEST, "rdma_get_request");
        CHECK((req[i]->qp != NULL) && (req[i]->qp->state == IBV_QPS_INIT),
              "the request got the listener's QP attributes");
        conn_prepare(req[i], &c[i]);
    }
    /* accept the second first: each accept must wait for its own id's ESTABLISHED */
    for (i = 1; i >= 0; i--) {
        CHECK(rdma_accept(req[i], NULL) == 0, "accept %d", i);
        expect_event(req[i], RDMA_CM_EVENT_ESTABLISHED, "rdma_accept");
    }
    for (i = 0; i < 2; i++) {
        conn_send(req[i], &c[i], conn_recv(req[i], &c[i]) + 1);
        conn_release(&c[i]);
    }
    for (i = 0; i < 2; i++) {
        CHECK(pthread_join(cli[i], NULL) == 0, "join");
        CHECK(rdma_disconnect(req[i]) == 0, "server disconnect %d", i);
        expect_event(req[i], RDMA_CM_EVENT_DISCONNECTED, "rdma_disconnect");
        rdma_destroy_ep(req[i]);
    }
    rdma_destroy_ep(listen_id);
}

/* A request taken without a QP, given an SRQ and then a QP on it (rdma_create_srq): the
 * receive goes to the SRQ (rdma_post_recv picks it), the exchange as above. */
static void request_through_an_srq(void)
{
    struct rdma_addrinfo *res = addrinfo(1, "0");
    struct ibv_srq_init_attr sattr;
    struct ibv_qp_init_attr attr;
    struct rdma_cm_id *listen_id, *req;
    pthread_t cli;
    conn_t c;

    CHECK(rdma_create_ep(&listen_id, res, NULL, NULL) == 0, "passive create_ep without a QP");
    rdma_freeaddrinfo(res);
    CHECK(rdma_listen(listen_id, 4) == 0, "listen");
    snprintf(port, sizeof(port), "%u", ntohs(rdma_get_src_port(listen_id)));
    CHECK(pthread_create(&cli, NULL, client, (void *)(uintptr_t)50) == 0, "thread");
    CHECK(rdma_get_request(listen_id, &req) == 0, "get_request");
    CHECK(req->qp == NULL, "no QP: the listener was given no attributes");
    memset(&sattr, 0, sizeof(sattr));
    sattr.attr.max_wr  = 4;
    sattr.attr.max_sge = 1;
    CHECK(rdma_create_srq(req, NULL, &sattr) == 0, "rdma_create_srq");
    CHECK((req->srq != NULL) && (req->pd != NULL), "the id's SRQ, on a PD of its own");
    CHECK((rdma_create_srq(req, NULL, &sattr) == -1) && (errno == EINVAL),
          "a second SRQ on the id: EINVAL");
    qp_attr(&attr);
    attr.qp_type = IBV_QPT_RC;
    CHECK(rdma_create_qp(req, NULL, &attr) == 0, "rdma_create_qp");
    CHECK(req->qp->srq == req->srq, "the QP takes the id's SRQ");
    conn_prepare(req, &c);   /* rdma_post_recv: to the SRQ */
    CHECK(rdma_accept(req, NULL) == 0, "accept");
    conn_send(req, &c, conn_recv(req, &c) + 1);
    conn_release(&c);
    CHECK(pthread_join(cli, NULL) == 0, "join");
    CHECK(rdma_disconnect(req) == 0, "disconnect");
    rdma_destroy_ep(req);   /* its QP, SRQ and PD */
    rdma_destroy_ep(listen_id);
}

static void errors(void)
{
    struct rdma_addrinfo *res;
    struct rdma_event_channel *ch;
    struct rdma_cm_id *id, *async_id;
    struct sockaddr_in a;

    CHECK((rdma_create_ep(&id, NULL, NULL, NULL) == -1) && (errno == EINVAL),
          "rdma_create_ep without an addrinfo: EINVAL");

    /* a port nobody listens on: the connect is refused */
    res = addrinfo(0, port);   /* the listener of the test above is gone */
    CHECK(rdma_create_ep(&id, res, NULL, NULL) == 0, "create_ep to a closed port");
    rdma_freeaddrinfo(res);
    CHECK((rdma_connect(id, NULL) == -1) && (errno == ECONNREFUSED),
          "connect to a closed port: ECONNREFUSED");
    expect_event(id, RDMA_CM_EVENT_REJECTED, "a refused rdma_connect");
    rdma_destroy_ep(id);

    /* a synchronous id made by rdma_create_id: resolve waits for its event */
    CHECK(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id(NULL channel)");
    CHECK(id->channel != NULL, "a synchronous id has a channel of its own");
    memset(&a, 0, sizeof(a));
    a.sin_family      = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port        = htons(1);
    CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&a, 2000) == 0, "sync resolve_addr");
    expect_event(id, RDMA_CM_EVENT_ADDR_RESOLVED, "rdma_resolve_addr");
    CHECK(id->verbs != NULL, "resolved: the id has its device");

    /* rdma_create_qp_ex: the ibv_wr_* interface on the CM's QP; a create flag other
     * than BLOCK_SELF_MCAST_LB is refused with ENOSYS */
    {
        struct ibv_qp_init_attr_ex ax;
        struct ibv_qp_ex *qpx;

        memset(&ax, 0, sizeof(ax));
        qp_attr((struct ibv_qp_init_attr *)&ax);
        ax.qp_type        = IBV_QPT_RC;
        ax.comp_mask      = IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_CREATE_FLAGS;
        ax.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE;
        ax.create_flags   = IBV_QP_CREATE_SCATTER_FCS;
        CHECK((rdma_create_qp_ex(id, &ax) == -1) && (errno == ENOSYS) && (id->qp == NULL),
              "rdma_create_qp_ex with create flag SCATTER_FCS: ENOSYS, no QP");
        ax.comp_mask    = IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
        ax.create_flags = 0;
        CHECK(rdma_create_qp_ex(id, &ax) == 0, "rdma_create_qp_ex with send ops");
        qpx = ibv_qp_to_qp_ex(id->qp);
        CHECK((qpx != NULL) && (qpx->wr_start != NULL) && (qpx->wr_send != NULL) &&
              (id->pd != NULL), "the QP has the ibv_wr_* interface, the id a PD");
        rdma_destroy_qp(id);
        CHECK(id->qp == NULL, "rdma_destroy_qp");
    }
    CHECK(rdma_destroy_id(id) == 0, "destroy a sync id holding its event");

    /* rdma_get_request needs a synchronous listener */
    CHECK((ch = rdma_create_event_channel()) != NULL, "channel");
    CHECK(rdma_create_id(ch, &async_id, NULL, RDMA_PS_TCP) == 0, "async id");
    CHECK(rdma_bind_addr(async_id, (struct sockaddr *)&a) == 0, "bind");
    CHECK((rdma_get_request(async_id, &id) == -1) && (errno == EINVAL),
          "get_request on an id with the program's channel: EINVAL");
    CHECK(rdma_destroy_id(async_id) == 0, "destroy async id");
    rdma_destroy_event_channel(ch);
}

/* A listener destroyed with a request it never took: that connect fails. */
static void *connect_refused(void *arg)
{
    struct rdma_addrinfo *res = addrinfo(0, port);
    struct rdma_cm_id *id;
    int ret;

    (void)arg;
    CHECK(rdma_create_ep(&id, res, NULL, NULL) == 0, "create_ep");
    rdma_freeaddrinfo(res);
    ret = rdma_connect(id, NULL);
    CHECK(ret == -1, "a connect the listener never took must fail");
    rdma_destroy_ep(id);
    return NULL;
}

static void listener_gone_with_a_request(void)
{
    struct rdma_addrinfo *res = addrinfo(1, "0");
    struct rdma_cm_id *listen_id;
    pthread_t cli;

    CHECK(rdma_create_ep(&listen_id, res, NULL, NULL) == 0, "passive create_ep");
    rdma_freeaddrinfo(res);
    CHECK(rdma_listen(listen_id, 4) == 0, "listen");
    snprintf(port, sizeof(port), "%u", ntohs(rdma_get_src_port(listen_id)));
    CHECK(pthread_create(&cli, NULL, connect_refused, NULL) == 0, "thread");
    usleep(200000);   /* the request arrives; nobody takes it */
    rdma_destroy_ep(listen_id);
    CHECK(pthread_join(cli, NULL) == 0, "join");
}

int main(void)
{
    alarm(60);
    two_requests_interleaved();
    request_through_an_srq();
    errors();
    listener_gone_with_a_request();
    printf("rdmacm_sync_check: all checks passed\n");
    return 0;
}
