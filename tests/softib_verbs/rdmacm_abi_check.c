/*
 * What no rdmacm-utils program drives on softib: rdma_get_devices gives the
 * contexts ids get (a PD made before any id serves an id's QP), rdma_getaddrinfo's
 * passive and active answers, the ports of a bound id, and an unsupported
 * call failing with ENOSYS. Built and run by tests/softib_verbs_test.sh
 * against the librdmacm.so.1 LD_LIBRARY_PATH names; prints what failed and
 * exits 1.
 *   rdmacm_abi_check
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_cma.h>

#define CHECK(_cond, ...) \
    do { \
        if (!(_cond)) { \
            fprintf(stderr, "rdmacm_abi_check:%d: ", __LINE__); \
            fprintf(stderr, __VA_ARGS__); \
            fprintf(stderr, "\n"); \
            exit(1); \
        } \
    } while (0)

static void check_addrinfo(void)
{
    struct rdma_addrinfo hints, *res;
    struct sockaddr_in *in;

    memset(&hints, 0, sizeof(hints));
    hints.ai_flags = RAI_PASSIVE;
    CHECK(rdma_getaddrinfo("127.0.0.1", "7471", &hints, &res) == 0, "passive getaddrinfo");
    in = (struct sockaddr_in *)res->ai_src_addr;
    CHECK((in != NULL) && (res->ai_dst_addr == NULL), "passive: a source address only");
    CHECK((ntohs(in->sin_port) == 7471) && (in->sin_addr.s_addr == htonl(INADDR_LOOPBACK)),
          "passive: 127.0.0.1:7471");
    CHECK((res->ai_port_space == RDMA_PS_TCP) && (res->ai_qp_type == IBV_QPT_RC),
          "default port space TCP, QP type RC");
    rdma_freeaddrinfo(res);
    hints.ai_flags       = 0;
    hints.ai_port_space  = RDMA_PS_UDP;
    CHECK(rdma_getaddrinfo("127.0.0.1", "7174", &hints, &res) == 0, "active getaddrinfo");
    CHECK((res->ai_dst_addr != NULL) && (res->ai_src_addr == NULL), "active: a destination");
    CHECK(res->ai_port_space == RDMA_PS_UDP, "the port space asked for");
    rdma_freeaddrinfo(res);
    hints.ai_family = AF_INET6;
    CHECK(rdma_getaddrinfo("::1", "7174", &hints, &res) != 0, "IPv6 refused");
}

int main(void)
{
    struct rdma_event_channel *ch;
    struct ibv_context **devs;
    struct rdma_cm_id *id;
    struct sockaddr_in a;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_qp_init_attr qa;
    int n = 0;

    devs = rdma_get_devices(&n);
    CHECK((devs != NULL) && (n >= 1) && (devs[n] == NULL), "rdma_get_devices: %d", n);
    CHECK(!strcmp(ibv_get_device_name(devs[0]->device), "softib0"), "softib0 first");
    pd = ibv_alloc_pd(devs[0]);   /* before any id, as programs that pool PDs do */
    cq = ibv_create_cq(devs[0], 16, NULL, NULL, 0);
    CHECK((pd != NULL) && (cq != NULL), "PD and CQ on the listed context");

    CHECK((ch = rdma_create_event_channel()) != NULL, "event channel");
    CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0, "create_id");
    memset(&a, 0, sizeof(a));
    a.sin_family      = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(rdma_bind_addr(id, (struct sockaddr *)&a) == 0, "bind 127.0.0.1:0");
    CHECK(id->verbs == devs[0], "a bound id's context is the listed one");
    CHECK(rdma_get_src_port(id) != 0, "a port was chosen");
    CHECK(rdma_get_src_port(id) == ((struct sockaddr_in *)rdma_get_local_addr(id))->sin_port,
          "src port = the local address's");
    memset(&qa, 0, sizeof(qa));
    qa.qp_type          = IBV_QPT_RC;
    qa.send_cq          = cq;
    qa.recv_cq          = cq;
    qa.cap.max_send_wr  = 4;
    qa.cap.max_recv_wr  = 4;
    qa.cap.max_send_sge = 1;
    qa.cap.max_recv_sge = 1;
    CHECK(rdma_create_qp(id, pd, &qa) == 0, "rdma_create_qp on the PD made first: %s",
          strerror(errno));
    CHECK((id->qp != NULL) && (id->qp->pd == pd) && (id->qp->state == IBV_QPS_INIT),
          "the id's QP, in INIT");
    CHECK((rdma_migrate_id(id, ch) == -1) && (errno == ENOSYS), "rdma_migrate_id: ENOSYS");
    CHECK(!strcmp(rdma_event_str(RDMA_CM_EVENT_ESTABLISHED), "RDMA_CM_EVENT_ESTABLISHED"),
          "rdma_event_str");
    check_addrinfo();

    rdma_destroy_qp(id);
    CHECK(id->qp == NULL, "destroy_qp");
    CHECK(rdma_destroy_id(id) == 0, "destroy_id");
    rdma_destroy_event_channel(ch);
    CHECK(ibv_destroy_cq(cq) == 0 && ibv_dealloc_pd(pd) == 0, "CQ and PD after the id");
    rdma_free_devices(devs);
    printf("rdmacm_abi_check: all checks passed\n");
    return 0;
}
