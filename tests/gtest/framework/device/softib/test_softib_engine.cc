/*
 * Smoke tests of softib's engine (the conformance suite is test_softib_*.cc):
 * two QPs of one process through the device's own slot, and two processes
 * over the shm and UDP wires.
 */
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "dev.h"

namespace {

double now_sec()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Set an AXON_* variable for the scope */
class EngEnv {
public:
    EngEnv(const char *name, const char *value) : name_(name)
    {
        const char *old = getenv(name);
        had_ = (old != nullptr);
        if (had_) old_ = old;
        setenv(name, value, 1);
    }
    ~EngEnv() { had_ ? setenv(name_.c_str(), old_.c_str(), 1) : unsetenv(name_.c_str()); }

private:
    std::string name_, old_;
    bool        had_;
};

/* What a peer needs to connect to a QP */
struct EngAddr {
    axon_dev_gid_t gid;
    uint32_t       qpn;
    uint64_t       addr;
    uint32_t       rkey;
};

/* One device, one PD, one buffer, and QPs with a CQ each */
class EngDev {
public:
    axon_dev_context_t *ctx = nullptr;
    axon_dev_pd_t      *pd  = nullptr;
    axon_dev_cq_t      *cq  = nullptr;
    axon_dev_mr_t      *mr  = nullptr;
    axon_dev_gid_t      gid;
    std::vector<uint8_t> mem;
    std::vector<axon_dev_qp_t *> qps;

    int open(size_t size = 1 << 20)
    {
        int ret;
        mem.assign(size, 0);
        if ((ret = axon_dev_open("softib0", &ctx)) ||
            (ret = axon_dev_query_gid(ctx, 1, 0, &gid)) ||
            (ret = axon_dev_alloc_pd(ctx, &pd)) ||
            (ret = axon_dev_create_cq(ctx, 4096, nullptr, nullptr, 0, &cq))) {
            return ret;
        }
        return axon_dev_reg_mr(pd, mem.data(), mem.size(),
                               AXON_DEV_ACCESS_LOCAL_WRITE | AXON_DEV_ACCESS_REMOTE_WRITE |
                               AXON_DEV_ACCESS_REMOTE_READ | AXON_DEV_ACCESS_REMOTE_ATOMIC, &mr);
    }

    ~EngDev()
    {
        for (auto qp : qps) EXPECT_EQ(0, axon_dev_destroy_qp(qp));
        if (mr) {
            EXPECT_EQ(0, axon_dev_dereg_mr(mr));
        }
        if (cq) {
            EXPECT_EQ(0, axon_dev_destroy_cq(cq));
        }
        if (pd) {
            EXPECT_EQ(0, axon_dev_dealloc_pd(pd));
        }
        if (ctx) axon_dev_close(ctx);
    }

    axon_dev_qp_t *qp(axon_dev_qp_type_t type)
    {
        axon_dev_qp_init_attr_t init;
        axon_dev_qp_t *qp = nullptr;
        memset(&init, 0, sizeof(init));
        init.send_cq = init.recv_cq = cq;
        init.qp_type = type;
        init.cap.max_send_wr  = 512;
        init.cap.max_recv_wr  = 512;
        init.cap.max_send_sge = init.cap.max_recv_sge = 2;
        init.cap.max_inline_data = 64;
        EXPECT_EQ(0, axon_dev_create_qp(pd, &init, &qp));
        if (qp) qps.push_back(qp);
        return qp;
    }

    EngAddr addr(axon_dev_qp_t *qp, size_t off = 0)
    {
        EngAddr a;
        memset(&a, 0, sizeof(a));   /* padding too: it is written to a socket */
        a.gid  = gid;
        a.qpn  = qp->qp_num;
        a.addr = (uint64_t)(uintptr_t)(mem.data() + off);
        a.rkey = mr->rkey;
        return a;
    }

    /* RESET -> INIT -> RTR -> RTS towards peer (UD: peer unused) */
    int connect(axon_dev_qp_t *qp, const EngAddr &peer)
    {
        axon_dev_qp_attr_t a;
        int ud = (qp->qp_type == AXON_DEV_QPT_UD), rc = (qp->qp_type == AXON_DEV_QPT_RC);
        int ret, mask;

        memset(&a, 0, sizeof(a));
        a.qp_state        = AXON_DEV_QPS_INIT;
        a.port_num        = 1;
        a.qkey            = 0x1234;
        a.qp_access_flags = AXON_DEV_ACCESS_REMOTE_WRITE | AXON_DEV_ACCESS_REMOTE_READ |
                            AXON_DEV_ACCESS_REMOTE_ATOMIC;
        mask = AXON_DEV_QP_STATE | AXON_DEV_QP_PKEY_INDEX | AXON_DEV_QP_PORT |
               AXON_DEV_QP_ACCESS_FLAGS | (ud ? AXON_DEV_QP_QKEY : 0);
        if ((ret = axon_dev_modify_qp(qp, &a, mask))) return ret;

        a.qp_state = AXON_DEV_QPS_RTR;
        a.path_mtu = AXON_DEV_MTU_1024;
        mask = AXON_DEV_QP_STATE | AXON_DEV_QP_PATH_MTU;
        if (!ud) {
            a.ah_attr.is_global = 1;
            a.ah_attr.port_num  = 1;
            a.ah_attr.grh.dgid  = peer.gid;
            a.dest_qp_num       = peer.qpn;
            a.rq_psn            = 0x10;
            a.max_dest_rd_atomic = 4;
            a.min_rnr_timer     = 1;
            mask |= AXON_DEV_QP_AV | AXON_DEV_QP_DEST_QPN | AXON_DEV_QP_RQ_PSN |
                    AXON_DEV_QP_MAX_DEST_RD_ATOMIC | AXON_DEV_QP_MIN_RNR_TIMER;
        }
        if ((ret = axon_dev_modify_qp(qp, &a, mask))) return ret;

        a.qp_state = AXON_DEV_QPS_RTS;
        a.sq_psn   = 0x10;
        mask = AXON_DEV_QP_STATE | AXON_DEV_QP_SQ_PSN;
        if (!ud) {
            a.timeout = 10; a.retry_cnt = 7; a.rnr_retry = 7; a.max_rd_atomic = 4;
            mask |= AXON_DEV_QP_TIMEOUT | AXON_DEV_QP_RETRY_CNT | AXON_DEV_QP_RNR_RETRY |
                    AXON_DEV_QP_MAX_QP_RD_ATOMIC;
        }
        (void)rc;
        return axon_dev_modify_qp(qp, &a, mask);
    }

    int post_recv(axon_dev_qp_t *qp, uint64_t wr_id, size_t off, uint32_t len)
    {
        axon_dev_sge_t sge = {(uint64_t)(uintptr_t)(mem.data() + off), len, mr->lkey};
        axon_dev_recv_wr_t wr, *bad;
        memset(&wr, 0, sizeof(wr));
        wr.wr_id = wr_id; wr.sg_list = &sge; wr.num_sge = 1;
        return axon_dev_post_recv(qp, &wr, &bad);
    }

    /* Post one WR; its local data is mem[off, off + len) */
    int post(axon_dev_qp_t *qp, axon_dev_wr_opcode_t op, uint64_t wr_id, size_t off,
             uint32_t len, uint64_t raddr = 0, uint32_t rkey = 0, uint64_t cmp_add = 0,
             uint64_t swap = 0, uint32_t imm = 0)
    {
        axon_dev_sge_t sge = {(uint64_t)(uintptr_t)(mem.data() + off), len, mr->lkey};
        axon_dev_send_wr_t wr, *bad;
        memset(&wr, 0, sizeof(wr));
        wr.wr_id = wr_id; wr.sg_list = &sge; wr.num_sge = len ? 1 : 0;
        wr.opcode = op; wr.send_flags = AXON_DEV_SEND_SIGNALED; wr.imm_data = imm;
        if (op == AXON_DEV_WR_ATOMIC_CMP_AND_SWP || op == AXON_DEV_WR_ATOMIC_FETCH_AND_ADD) {
            wr.wr.atomic.remote_addr = raddr; wr.wr.atomic.rkey = rkey;
            wr.wr.atomic.compare_add = cmp_add; wr.wr.atomic.swap = swap;
        } else {
            wr.wr.rdma.remote_addr = raddr; wr.wr.rdma.rkey = rkey;
        }
        return axon_dev_post_send(qp, &wr, &bad);
    }

    /* Wait for n completions (any QP), appended to out; false on timeout */
    bool wait(size_t n, std::vector<axon_dev_wc_t> *out, double timeout = 10.0)
    {
        double deadline = now_sec() + timeout;
        axon_dev_wc_t wc[16];
        while (out->size() < n) {
            int got = axon_dev_poll_cq(cq, 16, wc);
            if (got < 0) return false;
            out->insert(out->end(), wc, wc + got);
            if (got == 0 && now_sec() > deadline) return false;
        }
        return true;
    }

    /* The completion with this wr_id */
    axon_dev_wc_t wc1(uint64_t wr_id)
    {
        std::vector<axon_dev_wc_t> wcs;
        EXPECT_TRUE(wait(1, &wcs));
        axon_dev_wc_t wc;
        memset(&wc, 0xff, sizeof(wc));
        if (!wcs.empty()) wc = wcs[0];
        EXPECT_EQ(wr_id, wc.wr_id);
        return wc;
    }
};

class SoftibEngine : public ::testing::Test {
protected:
    void SetUp() override
    {
        env_.emplace_back(new EngEnv("AXON_SOFTIB_DEVICES", "1"));
        env_.emplace_back(new EngEnv("AXON_SOFTIB_WIRE", "auto"));
    }
    std::vector<std::unique_ptr<EngEnv>> env_;
};

void fill(uint8_t *p, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++) p[i] = (uint8_t)(seed + i * 7 + (i >> 8));
}

} // namespace

TEST_F(SoftibEngine, RcSendRecvMultiPacketAndImmediate)
{
    EngDev d;
    ASSERT_EQ(0, d.open());
    axon_dev_qp_t *a = d.qp(AXON_DEV_QPT_RC), *b = d.qp(AXON_DEV_QPT_RC);
    ASSERT_EQ(0, d.connect(a, d.addr(b)));
    ASSERT_EQ(0, d.connect(b, d.addr(a)));

    const uint32_t len = 10000;   /* 10 packets at MTU 1024 */
    fill(&d.mem[0], len, 3);
    ASSERT_EQ(0, d.post_recv(b, 100, 65536, 16384));
    ASSERT_EQ(0, d.post_recv(b, 101, 98304, 64));
    ASSERT_EQ(0, d.post(a, AXON_DEV_WR_SEND, 1, 0, len));
    ASSERT_EQ(0, d.post(a, AXON_DEV_WR_SEND_WITH_IMM, 2, 0, 10, 0, 0, 0, 0, htonl(0xabcd)));

    std::vector<axon_dev_wc_t> wcs;
    ASSERT_TRUE(d.wait(4, &wcs));
    int recvs = 0, sends = 0;
    for (auto &wc : wcs) {
        EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << axon_dev_wc_status_str(wc.status);
        if (wc.opcode == AXON_DEV_WC_RECV) {
            recvs++;
            EXPECT_EQ(b->qp_num, wc.qp_num);
            EXPECT_EQ(a->qp_num, wc.src_qp);
            if (wc.wr_id == 100) {
                EXPECT_EQ(len, wc.byte_len);
                EXPECT_FALSE(wc.wc_flags & AXON_DEV_WC_WITH_IMM);
            } else {
                EXPECT_EQ(101u, wc.wr_id);
                EXPECT_EQ(10u, wc.byte_len);
                EXPECT_TRUE(wc.wc_flags & AXON_DEV_WC_WITH_IMM);
                EXPECT_EQ(htonl(0xabcd), wc.imm_data);
            }
        } else {
            sends++;
            EXPECT_EQ(AXON_DEV_WC_SEND, wc.opcode);
        }
    }
    EXPECT_EQ(2, recvs);
    EXPECT_EQ(2, sends);
    EXPECT_EQ(0, memcmp(&d.mem[0], &d.mem[65536], len));
    EXPECT_EQ(0, memcmp(&d.mem[0], &d.mem[98304], 10));
}

TEST_F(SoftibEngine, RcWriteReadAndWriteWithImm)
{
    EngDev d;
    ASSERT_EQ(0, d.open());
    axon_dev_qp_t *a = d.qp(AXON_DEV_QPT_RC), *b = d.qp(AXON_DEV_QPT_RC);
    ASSERT_EQ(0, d.connect(a, d.addr(b)));
    ASSERT_EQ(0, d.connect(b, d.addr(a)));

    const uint32_t len = 9000;
    fill(&d.mem[0], len, 11);
    ASSERT_EQ(0, d.post(a, AXON_DEV_WR_RDMA_WRITE, 1, 0, len, d.addr(b, 200000).addr,
                        d.mr->rkey));
    EXPECT_EQ(AXON_DEV_WC_RDMA_WRITE, d.wc1(1).opcode);
    EXPECT_EQ(0, memcmp(&d.mem[0], &d.mem[200000], len));

    ASSERT_EQ(0, d.post(a, AXON_DEV_WR_RDMA_READ, 2, 400000, len, d.addr(b, 200000).addr,
                        d.mr->rkey));
    axon_dev_wc_t wc = d.wc1(2);
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status);
    EXPECT_EQ(AXON_DEV_WC_RDMA_READ, wc.opcode);
    EXPECT_EQ(len, wc.byte_len);
    EXPECT_EQ(0, memcmp(&d.mem[0], &d.mem[400000], len));

    /* with immediate: the data lands and a receive completes at the target */
    ASSERT_EQ(0, d.post_recv(b, 50, 0, 0));
    ASSERT_EQ(0, d.post(a, AXON_DEV_WR_RDMA_WRITE_WITH_IMM, 3, 0, 100,
                        d.addr(b, 300000).addr, d.mr->rkey, 0, 0, htonl(7)));
    std::vector<axon_dev_wc_t> wcs;
    ASSERT_TRUE(d.wait(2, &wcs));
    for (auto &w : wcs) {
        EXPECT_EQ(AXON_DEV_WC_SUCCESS, w.status);
        if (w.wr_id == 50) {
            EXPECT_EQ(AXON_DEV_WC_RECV_RDMA_WITH_IMM, w.opcode);
            EXPECT_EQ(htonl(7), w.imm_data);
            EXPECT_EQ(100u, w.byte_len);
        } else {
            EXPECT_EQ(3u, w.wr_id);
        }
    }
    EXPECT_EQ(0, memcmp(&d.mem[0], &d.mem[300000], 100));
}

TEST_F(SoftibEngine, RcAtomics)
{
    EngDev d;
    ASSERT_EQ(0, d.open());
    axon_dev_qp_t *a = d.qp(AXON_DEV_QPT_RC), *b = d.qp(AXON_DEV_QPT_RC);
    ASSERT_EQ(0, d.connect(a, d.addr(b)));
    ASSERT_EQ(0, d.connect(b, d.addr(a)));

    uint64_t *target = (uint64_t *)&d.mem[4096], *result = (uint64_t *)&d.mem[8192];
    *target = 40;
    ASSERT_EQ(0, d.post(a, AXON_DEV_WR_ATOMIC_FETCH_AND_ADD, 1, 8192, 8, d.addr(b, 4096).addr,
                        d.mr->rkey, 2));
    EXPECT_EQ(AXON_DEV_WC_FETCH_ADD, d.wc1(1).opcode);
    EXPECT_EQ(40u, *result);
    EXPECT_EQ(42u, *target);

    ASSERT_EQ(0, d.post(a, AXON_DEV_WR_ATOMIC_CMP_AND_SWP, 2, 8192, 8, d.addr(b, 4096).addr,
                        d.mr->rkey, 42, 99));
    EXPECT_EQ(AXON_DEV_WC_COMP_SWAP, d.wc1(2).opcode);
    EXPECT_EQ(42u, *result);
    EXPECT_EQ(99u, *target);

    /* compare fails: nothing swapped, the value found comes back */
    ASSERT_EQ(0, d.post(a, AXON_DEV_WR_ATOMIC_CMP_AND_SWP, 3, 8192, 8, d.addr(b, 4096).addr,
                        d.mr->rkey, 1, 5));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, d.wc1(3).status);
    EXPECT_EQ(99u, *result);
    EXPECT_EQ(99u, *target);
}

TEST_F(SoftibEngine, UcWriteAndUdSendWithGrh)
{
    EngDev d;
    ASSERT_EQ(0, d.open());
    axon_dev_qp_t *a = d.qp(AXON_DEV_QPT_UC), *b = d.qp(AXON_DEV_QPT_UC);
    ASSERT_EQ(0, d.connect(a, d.addr(b)));
    ASSERT_EQ(0, d.connect(b, d.addr(a)));
    fill(&d.mem[0], 3000, 5);
    ASSERT_EQ(0, d.post(a, AXON_DEV_WR_RDMA_WRITE, 1, 0, 3000, d.addr(b, 100000).addr,
                        d.mr->rkey));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, d.wc1(1).status);
    /* UC completes when sent: the target's memory follows once the engine ran */
    std::vector<axon_dev_wc_t> none;
    d.wait(1, &none, 0.05);
    EXPECT_EQ(0, memcmp(&d.mem[0], &d.mem[100000], 3000));

    axon_dev_qp_t *u = d.qp(AXON_DEV_QPT_UD), *v = d.qp(AXON_DEV_QPT_UD);
    EngAddr none_addr;
    memset(&none_addr, 0, sizeof(none_addr));
    ASSERT_EQ(0, d.connect(u, none_addr));
    ASSERT_EQ(0, d.connect(v, none_addr));
    axon_dev_ah_attr_t ah_attr;
    memset(&ah_attr, 0, sizeof(ah_attr));
    ah_attr.is_global = 1; ah_attr.port_num = 1; ah_attr.grh.dgid = d.gid;
    axon_dev_ah_t *ah = nullptr;
    ASSERT_EQ(0, axon_dev_create_ah(d.pd, &ah_attr, &ah));

    ASSERT_EQ(0, d.post_recv(v, 9, 500000, 40 + 512));
    axon_dev_sge_t sge = {(uint64_t)(uintptr_t)&d.mem[0], 512, d.mr->lkey};
    axon_dev_send_wr_t wr, *bad;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = 8; wr.sg_list = &sge; wr.num_sge = 1; wr.opcode = AXON_DEV_WR_SEND;
    wr.send_flags = AXON_DEV_SEND_SIGNALED;
    wr.wr.ud.ah = ah; wr.wr.ud.remote_qpn = v->qp_num; wr.wr.ud.remote_qkey = 0x1234;
    ASSERT_EQ(0, axon_dev_post_send(u, &wr, &bad));
    std::vector<axon_dev_wc_t> wcs;
    ASSERT_TRUE(d.wait(2, &wcs));
    for (auto &w : wcs) {
        EXPECT_EQ(AXON_DEV_WC_SUCCESS, w.status);
        if (w.wr_id == 9) {
            EXPECT_EQ(40u + 512u, w.byte_len);
            EXPECT_TRUE(w.wc_flags & AXON_DEV_WC_GRH);
            EXPECT_EQ(u->qp_num, w.src_qp);
            EXPECT_EQ(0, memcmp(&d.mem[500000 + 8], d.gid.raw, 16)) << "source GID in the GRH";
        }
    }
    EXPECT_EQ(0, memcmp(&d.mem[0], &d.mem[500000 + 40], 512));
    EXPECT_EQ(0, axon_dev_destroy_ah(ah));
}

namespace {

/*
 * A forked child opens its own device, connects an RC QP to the parent's
 * (addresses exchanged over a socketpair), receives n messages, checks them,
 * and sends one back; exit code 0 on success.
 */
int eng_child(int sock, int n)
{
    alarm(20);
    EngDev d;
    if (d.open()) return 2;
    axon_dev_qp_t *qp = d.qp(AXON_DEV_QPT_RC);
    EngAddr mine = d.addr(qp), peer;
    memset(&peer, 0, sizeof(peer));
    if (write(sock, &mine, sizeof(mine)) != sizeof(mine)) return 3;
    if (read(sock, &peer, sizeof(peer)) != sizeof(peer)) return 4;
    if (d.connect(qp, peer)) return 6;
    for (int i = 0; i < n; i++) {
        if (d.post_recv(qp, i, (size_t)i * 256, 256)) return 5;
    }
    char go = 1;
    if (write(sock, &go, 1) != 1) return 7;
    std::vector<axon_dev_wc_t> wcs;
    if (!d.wait(n, &wcs, 15)) return 8;
    for (int i = 0; i < n; i++) {
        if (wcs[i].status != AXON_DEV_WC_SUCCESS || wcs[i].wr_id != (uint64_t)i ||
            wcs[i].byte_len != 200) return 9;
        for (int j = 0; j < 200; j++) {
            if (d.mem[(size_t)i * 256 + j] != (uint8_t)(i + j)) return 10;
        }
    }
    memset(&d.mem[500000], 0x5a, 64);
    if (d.post(qp, AXON_DEV_WR_SEND, 77, 500000, 64)) return 11;
    wcs.clear();
    if (!d.wait(1, &wcs, 15) || wcs[0].status != AXON_DEV_WC_SUCCESS) return 12;
    /* stay until the parent has its message */
    if (read(sock, &go, 1) != 1) return 13;
    return 0;
}

void eng_two_process(int n)
{
    int sv[2];
    ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        close(sv[0]);
        _exit(eng_child(sv[1], n));
    }
    close(sv[1]);
    {
        EngDev d;
        ASSERT_EQ(0, d.open());
        axon_dev_qp_t *qp = d.qp(AXON_DEV_QPT_RC);
        EngAddr mine = d.addr(qp), peer;
        ASSERT_EQ((ssize_t)sizeof(peer), read(sv[0], &peer, sizeof(peer)));
        ASSERT_EQ((ssize_t)sizeof(mine), write(sv[0], &mine, sizeof(mine)));
        ASSERT_EQ(0, d.connect(qp, peer));
        ASSERT_EQ(0, d.post_recv(qp, 1000, 600000, 256));
        char go;
        ASSERT_EQ(1, read(sv[0], &go, 1));
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < 200; j++) d.mem[(size_t)i * 256 + j] = (uint8_t)(i + j);
            ASSERT_EQ(0, d.post(qp, AXON_DEV_WR_SEND, i, (size_t)i * 256, 200));
        }
        std::vector<axon_dev_wc_t> wcs;
        ASSERT_TRUE(d.wait(n + 1, &wcs, 15));
        for (auto &wc : wcs) {
            EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << axon_dev_wc_status_str(wc.status);
            if (wc.wr_id == 1000) {
                EXPECT_EQ(AXON_DEV_WC_RECV, wc.opcode);
                EXPECT_EQ(64u, wc.byte_len);
                EXPECT_EQ(0x5a, d.mem[600000]);
            }
        }
        ASSERT_EQ(1, write(sv[0], &go, 1));
    }
    int status = -1;
    ASSERT_EQ(pid, waitpid(pid, &status, 0));
    close(sv[0]);
    EXPECT_TRUE(WIFEXITED(status)) << "child signal " << WTERMSIG(status);
    EXPECT_EQ(0, WEXITSTATUS(status)) << "child failed at step " << WEXITSTATUS(status);
}

} // namespace

/* Xproc: forks a peer process, too slow under valgrind (tests/README.md). */
class SoftibEngineXproc : public SoftibEngine {};

TEST_F(SoftibEngineXproc, TwoProcessSendRecvShm)
{
    EngEnv wire("AXON_SOFTIB_WIRE", "shm");
    eng_two_process(100);
}

TEST_F(SoftibEngineXproc, TwoProcessSendRecvUdp)
{
    EngEnv wire("AXON_SOFTIB_WIRE", "udp");
    eng_two_process(100);
}
