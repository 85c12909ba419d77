/*
 * softib between processes: the test process and forked peers (harness
 * peers: socketpair, alarm-bounded, reaped) exchange QPN, GID, rkey and
 * address over the socket, then talk over the softib wire:
 *   - RC send/recv, RDMA write/read and atomics over the shm wire, the UDP
 *     wire forced on 127.0.0.1, and UDP between two addresses (127.0.0.2 /
 *     127.0.0.3, so the GIDs differ and auto mode picks UDP);
 *   - with 10% loss plus reordering (and a duplication variant) injected:
 *     10 000 RC messages arrive exactly once, in order, intact, and 1000
 *     fetch-adds from each of two requesters on one word count exactly;
 *   - RDMA write/read/atomics complete against a target that only sleeps
 *     (its progress thread serves them);
 *   - perftest's write latency pattern: each side waits for the other's
 *     write by reading memory, without calling in; after the first answer
 *     came late, the writes are placed directly (softib_direct.h).
 * A test forks its peers before it opens its own device.
 */
#include "softib_env.h"
#include "framework/device/softib/softib_direct.h"

#include <algorithm>

namespace {

const double kPeerTimeout = 60.0;

/* What a side tells the other to connect and to reach its memory. */
struct PeerInfo {
    uint32_t       qpn;
    uint32_t       rkey;
    uint64_t       addr;
    axon_dev_gid_t gid;
};

/* How a process configures its device (set before it opens it). */
struct WireCfg {
    const char *name;
    const char *wire;     /* AXON_SOFTIB_WIRE or nullptr */
    const char *addr[2];  /* AXON_SOFTIB_ADDR of the test process, of the peers */
    const char *loss;
    const char *reorder;
    const char *dup;
};

void PrintTo(const WireCfg &c, std::ostream *os)
{
    *os << c.name;
}

void apply_cfg(const WireCfg &c, int side, EnvGuard *env)
{
    env->set("AXON_SOFTIB_WIRE", c.wire);
    env->set("AXON_SOFTIB_ADDR", c.addr[side]);
    env->set("AXON_SOFTIB_LOSS", c.loss);
    env->set("AXON_SOFTIB_REORDER", c.reorder);
    env->set("AXON_SOFTIB_DUP", c.dup);
}


int send_info(int fd, const Qp &q, const SoftibDev &dev, const Buf *b)
{
    PeerInfo info;
    memset(&info, 0, sizeof(info));
    info.qpn  = q.qpn();
    info.gid  = dev.gid;
    info.rkey = b ? b->rkey() : 0;
    info.addr = b ? b->addr() : 0;
    return axon_test_send_blob(fd, &info, sizeof(info));
}

int recv_info(int fd, PeerInfo *info)
{
    return recv_struct(fd, info);
}

/* Bring q up to RTS towards info, with a short ACK timeout for lossy wires. */
int connect_to(SoftibDev &dev, const Qp &q, const PeerInfo &info, uint8_t timeout = kTimeout)
{
    /* both sides start at PSN 0x10: each one's sq_psn is the other's rq_psn */
    return dev.up(q, info.qpn, info.gid, 0x10, 0x10, timeout, 7, 7, kMinRnrTimer);
}

class SoftibXproc : public SoftibWithPeers<SoftibTest> {
protected:
    axon_test_peer_t *spawn(axon_test_peer_fn_t fn, void *arg)
    {
        return SoftibWithPeers::spawn(fn, arg, kPeerTimeout);
    }

    void expect_peer_ok(axon_test_peer_t *p, const char *what)
    {
        EXPECT_EQ(0, axon_test_peer_wait(p, kPeerTimeout)) << what << " failed (see its stderr)";
    }
};

/* ---------------------------------------------------------------- basic operations */

const size_t   kRegion   = 64 * 1024;
const size_t   kWordOff  = 60 * 1024;
const int      kMessages = 16;
const uint32_t kRecvSize = 4096;

uint32_t basic_msg_len(int i)
{
    return 100 + (uint32_t)i * 250;   /* 100 .. 3850: up to four packets at MTU 1024 */
}

struct BasicArg {
    WireCfg cfg;
};

/* Target: receives kMessages, exposes its region, checks what was done to it. */
int basic_target(int fd, void *arg)
{
    const WireCfg &cfg = static_cast<BasicArg *>(arg)->cfg;
    EnvGuard       env;
    SoftibDev      dev;
    Qp             q;
    PeerInfo       peer;
    axon_dev_wc_t  wc;

    apply_cfg(cfg, 1, &env);
    PEER_CHECK(dev.open() == 0, "open");
    Buf region = dev.reg(kRegion, AXON_DEV_ACCESS_LOCAL_WRITE | AXON_DEV_ACCESS_REMOTE_WRITE |
                                      AXON_DEV_ACCESS_REMOTE_READ |
                                      AXON_DEV_ACCESS_REMOTE_ATOMIC);
    Buf rb     = dev.reg(kMessages * kRecvSize, AXON_DEV_ACCESS_LOCAL_WRITE);
    axon_test_fill(region.ptr + kRegion / 2, kRegion / 2 - 8192, 78);
    *(uint64_t *)(region.ptr + kWordOff) = 1000;
    PEER_CHECK(dev.qp(&q, AXON_DEV_QPT_RC) == 0, "create_qp");
    PEER_CHECK(send_info(fd, q, dev, &region) == 0, "send info");
    PEER_CHECK(recv_info(fd, &peer) == 0, "recv info");
    PEER_CHECK(connect_to(dev, q, peer) == 0, "connect");
    for (int i = 0; i < kMessages; ++i) {
        PEER_CHECK(post_recv(q.qp, i, rb.ptr + i * kRecvSize, kRecvSize, rb.lkey()) == 0, "recv");
    }
    PEER_CHECK(axon_test_sync(fd) == 0, "sync up");
    for (int i = 0; i < kMessages; ++i) {
        PEER_CHECK(poll_one(q.rcq, &wc, 20), "message %d did not arrive", i);
        PEER_CHECK(wc.status == AXON_DEV_WC_SUCCESS, "message %d: %s", i,
                   wc_status_name(wc.status));
        PEER_CHECK(wc.wr_id == (uint64_t)i, "message %d in receive %llu", i,
                   (unsigned long long)wc.wr_id);
        PEER_CHECK(wc.byte_len == basic_msg_len(i), "message %d: %u bytes", i, wc.byte_len);
        PEER_CHECK(axon_test_check(rb.ptr + i * kRecvSize, wc.byte_len, 1000 + i) == -1,
                   "message %d corrupt", i);
    }
    PEER_CHECK(axon_test_sync(fd) == 0, "sync done");
    PEER_CHECK(axon_test_check(region.ptr, kRegion / 2, 77) == -1, "RDMA write data");
    PEER_CHECK(*(uint64_t *)(region.ptr + kWordOff) == 5, "atomic word %llu",
               (unsigned long long)*(uint64_t *)(region.ptr + kWordOff));
    return 0;
}

class SoftibRcXproc : public SoftibXproc, public ::testing::WithParamInterface<WireCfg> {};

TEST_P(SoftibRcXproc, RcSendRecvWriteReadAtomics)
{
    BasicArg      arg = {GetParam()};
    PeerInfo      peer;
    Qp            q;
    axon_dev_wc_t wc;

    apply_cfg(arg.cfg, 0, &env_);
    axon_test_peer_t *target = spawn(basic_target, &arg);
    open_dev();
    Buf sb  = dev_.reg(kRegion, AXON_DEV_ACCESS_LOCAL_WRITE);
    ASSERT_EQ(0, dev_.qp(&q, AXON_DEV_QPT_RC));
    ASSERT_EQ(0, recv_info(target->fd, &peer));
    ASSERT_EQ(0, send_info(target->fd, q, dev_, nullptr));
    ASSERT_EQ(0, connect_to(dev_, q, peer));
    ASSERT_EQ(0, axon_test_sync(target->fd));
    if (arg.cfg.addr[0]) {
        /* different GIDs: the auto wire goes over UDP */
        EXPECT_NE(gid_str(dev_.gid), gid_str(peer.gid));
        EXPECT_EQ(std::string("::ffff:") + arg.cfg.addr[1], gid_str(peer.gid));
    }

    for (int i = 0; i < kMessages; ++i) {
        axon_test_fill(sb.ptr, basic_msg_len(i), 1000 + i);
        ASSERT_EQ(0, post_send_op(q.qp, i, AXON_DEV_WR_SEND, sb.ptr, basic_msg_len(i),
                                  sb.lkey()));
        ASSERT_TRUE(poll_one(q.scq, &wc, 20)) << "send " << i;
        ASSERT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    }

    axon_test_fill(sb.ptr, kRegion / 2, 77);
    ASSERT_EQ(0, post_rdma(q.qp, 100, AXON_DEV_WR_RDMA_WRITE, sb.ptr, kRegion / 2, sb.lkey(),
                           peer.addr, peer.rkey));
    ASSERT_TRUE(poll_one(q.scq, &wc, 20));
    ASSERT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << "write: " << wc_status_name(wc.status);

    memset(sb.ptr, 0, kRegion);
    const uint32_t rlen = kRegion / 2 - 8192;
    ASSERT_EQ(0, post_rdma(q.qp, 101, AXON_DEV_WR_RDMA_READ, sb.ptr, rlen, sb.lkey(),
                           peer.addr + kRegion / 2, peer.rkey));
    ASSERT_TRUE(poll_one(q.scq, &wc, 20));
    ASSERT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << "read: " << wc_status_name(wc.status);
    EXPECT_EQ(rlen, wc.byte_len);
    EXPECT_EQ(-1, axon_test_check(sb.ptr, rlen, 78)) << "read data";

    uint64_t *res = (uint64_t *)sb.ptr;
    for (int i = 0; i < 10; ++i) {
        ASSERT_EQ(0, post_atomic(q.qp, 200 + i, AXON_DEV_WR_ATOMIC_FETCH_AND_ADD, res,
                                 sb.lkey(), peer.addr + kWordOff, peer.rkey, 3));
        ASSERT_TRUE(poll_one(q.scq, &wc, 20));
        ASSERT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
        EXPECT_EQ(1000u + 3u * i, *res);
    }
    ASSERT_EQ(0, post_atomic(q.qp, 300, AXON_DEV_WR_ATOMIC_CMP_AND_SWP, res, sb.lkey(),
                             peer.addr + kWordOff, peer.rkey, 1030, 5));
    ASSERT_TRUE(poll_one(q.scq, &wc, 20));
    ASSERT_EQ(AXON_DEV_WC_SUCCESS, wc.status);
    EXPECT_EQ(1030u, *res);

    ASSERT_EQ(0, axon_test_sync(target->fd));
    expect_peer_ok(target, "target");
}

const WireCfg kWires[] = {
    {"Shm", nullptr, {nullptr, nullptr}, nullptr, nullptr, nullptr},
    {"UdpForced", "udp", {nullptr, nullptr}, nullptr, nullptr, nullptr},
    {"UdpTwoAddresses", nullptr, {"127.0.0.3", "127.0.0.2"}, nullptr, nullptr, nullptr},
};

INSTANTIATE_TEST_SUITE_P(Wire, SoftibRcXproc, ::testing::ValuesIn(kWires),
                         [](const ::testing::TestParamInfo<WireCfg> &info) {
                             return std::string(info.param.name);
                         });

/* ---------------------------------------------------------------- sleeping target */

const size_t kSleepLen = 16 * 1024;

/* Target that never calls into softib after connecting: it blocks on the socket. */
int sleeping_target(int fd, void *arg)
{
    const WireCfg &cfg = static_cast<BasicArg *>(arg)->cfg;
    EnvGuard       env;
    SoftibDev      dev;
    Qp             q;
    PeerInfo       peer;
    void          *blob = nullptr;
    size_t         len  = 0;

    apply_cfg(cfg, 1, &env);
    env.set("AXON_SOFTIB_PROGRESS_THREAD", "y");
    PEER_CHECK(dev.open() == 0, "open");
    Buf region = dev.reg(3 * kSleepLen, AXON_DEV_ACCESS_LOCAL_WRITE |
                                             AXON_DEV_ACCESS_REMOTE_WRITE |
                                             AXON_DEV_ACCESS_REMOTE_READ |
                                             AXON_DEV_ACCESS_REMOTE_ATOMIC);
    axon_test_fill(region.ptr + kSleepLen, kSleepLen, 88);
    uint64_t *word = (uint64_t *)(region.ptr + 2 * kSleepLen);
    *word = 7;
    PEER_CHECK(dev.qp(&q, AXON_DEV_QPT_RC) == 0, "create_qp");
    PEER_CHECK(send_info(fd, q, dev, &region) == 0, "send info");
    PEER_CHECK(recv_info(fd, &peer) == 0, "recv info");
    PEER_CHECK(connect_to(dev, q, peer) == 0, "connect");
    PEER_CHECK(axon_test_sync(fd) == 0, "sync up");
    /* sleep: no softib call until the requester says it is done */
    PEER_CHECK(axon_test_recv_blob(fd, &blob, &len) == 0, "done message");
    free(blob);
    PEER_CHECK(axon_test_check(region.ptr, kSleepLen, 99) == -1, "written data");
    PEER_CHECK(*word == 1, "atomic word %llu", (unsigned long long)*word);
    return 0;
}

TEST_P(SoftibRcXproc, SleepingTargetServesWriteReadAtomics)
{
    BasicArg      arg = {GetParam()};
    PeerInfo      peer;
    Qp            q;
    axon_dev_wc_t wc;

    apply_cfg(arg.cfg, 0, &env_);
    axon_test_peer_t *target = spawn(sleeping_target, &arg);
    open_dev();
    Buf sb = dev_.reg(kSleepLen, AXON_DEV_ACCESS_LOCAL_WRITE);
    ASSERT_EQ(0, dev_.qp(&q, AXON_DEV_QPT_RC));
    ASSERT_EQ(0, recv_info(target->fd, &peer));
    ASSERT_EQ(0, send_info(target->fd, q, dev_, nullptr));
    ASSERT_EQ(0, connect_to(dev_, q, peer));
    ASSERT_EQ(0, axon_test_sync(target->fd));
    usleep(50000);   /* the target is asleep by now */

    axon_test_fill(sb.ptr, kSleepLen, 99);
    ASSERT_EQ(0, post_rdma(q.qp, 1, AXON_DEV_WR_RDMA_WRITE, sb.ptr, kSleepLen, sb.lkey(),
                           peer.addr, peer.rkey));
    ASSERT_TRUE(poll_one(q.scq, &wc, 20)) << "write against a sleeping target";
    ASSERT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);

    memset(sb.ptr, 0, kSleepLen);
    ASSERT_EQ(0, post_rdma(q.qp, 2, AXON_DEV_WR_RDMA_READ, sb.ptr, kSleepLen, sb.lkey(),
                           peer.addr + kSleepLen, peer.rkey));
    ASSERT_TRUE(poll_one(q.scq, &wc, 20)) << "read from a sleeping target";
    ASSERT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    EXPECT_EQ(-1, axon_test_check(sb.ptr, kSleepLen, 88));

    uint64_t *res  = (uint64_t *)sb.ptr;
    uint64_t  addr = peer.addr + 2 * kSleepLen;
    for (int i = 0; i < 5; ++i) {
        ASSERT_EQ(0, post_atomic(q.qp, 3, AXON_DEV_WR_ATOMIC_FETCH_AND_ADD, res, sb.lkey(),
                                 addr, peer.rkey, 2));
        ASSERT_TRUE(poll_one(q.scq, &wc, 20)) << "fetch-add on a sleeping target";
        ASSERT_EQ(AXON_DEV_WC_SUCCESS, wc.status);
        EXPECT_EQ(7u + 2u * i, *res);
    }
    ASSERT_EQ(0, post_atomic(q.qp, 4, AXON_DEV_WR_ATOMIC_CMP_AND_SWP, res, sb.lkey(), addr,
                             peer.rkey, 17, 1));
    ASSERT_TRUE(poll_one(q.scq, &wc, 20));
    ASSERT_EQ(AXON_DEV_WC_SUCCESS, wc.status);
    EXPECT_EQ(17u, *res);

    ASSERT_EQ(0, axon_test_send_blob(target->fd, "done", 4));
    expect_peer_ok(target, "sleeping target");
}

/* ---------------------------------------------------------------- waiting on memory */

const int    kPingPongs   = 200;
const double kCallPeriod  = 0.002;   /* a waiting side calls into softib this often */

/*
 * Direct placement's contract: two answers in a row that came 0.5 ms or
 * more after the request place the QP's writes directly for the next 50 ms,
 * then packets are tried again. The peers below run no progress thread and,
 * while they wait on memory, call in only every kCallPeriod, so a write by
 * packets is answered after 0-2 ms: three in four late. A side may thus
 * send a few writes by packets per 50 ms window, however long a loaded
 * host makes the rounds; without direct placement every write would go so.
 */
struct PingPongStats {
    int    packet_writes = 0;
    double elapsed       = 0;
};

std::string check_ping_pong(const PingPongStats &st)
{
    int allowed = 6 * (2 + (int)(st.elapsed / 0.050));

    if (st.packet_writes > allowed) {
        return std::to_string(st.packet_writes) + " of " + std::to_string(kPingPongs) +
               " writes went by packets in " + std::to_string(st.elapsed) + " s (at most " +
               std::to_string(allowed) + ": a few per 50 ms of direct placement)";
    }
    return "";
}

/* Read our flag until it holds round, calling into softib every kCallPeriod. */
bool wait_flag(volatile uint64_t *mine, uint64_t round, axon_dev_cq_t *cq)
{
    double until = axon_test_time() + 10.0, next = axon_test_time() + kCallPeriod;
    axon_dev_wc_t wc;

    while (*mine != round) {
        double now = axon_test_time();
        if (now > until) {
            return false;
        }
        if (now >= next) {
            axon_dev_poll_cq(cq, 0, &wc);   /* progress only: the CQ keeps its entries */
            next = now + kCallPeriod;
        }
    }
    return true;
}

/*
 * One side of perftest's ib_write_lat: write the round's number into the
 * peer's flag, wait for the peer's number in our own flag by reading memory
 * (wait_flag; the initiator writes first), then take the write's
 * completion. Returns "" or what went wrong.
 */
std::string write_ping_pong(const Qp &q, const Buf &flags, const PeerInfo &peer, bool first,
                            PingPongStats *st)
{
    volatile uint64_t *mine = (volatile uint64_t *)flags.ptr;
    uint64_t          *out  = (uint64_t *)(flags.ptr + 64);
    axon_dev_wc_t      wc;
    double             start = axon_test_time();

    for (uint64_t round = 1; round <= (uint64_t)kPingPongs; ++round) {
        if (!first && !wait_flag(mine, round, q.scq)) {
            return "round " + std::to_string(round) + ": the peer's write never landed";
        }
        *out = round;
        uint64_t direct = softib_direct_count();
        if (post_rdma(q.qp, round, AXON_DEV_WR_RDMA_WRITE, out, 8, flags.lkey(), peer.addr,
                      peer.rkey) != 0) {
            return "round " + std::to_string(round) + ": post_send failed";
        }
        st->packet_writes += (softib_direct_count() == direct);
        if (first && !wait_flag(mine, round, q.scq)) {
            return "round " + std::to_string(round) + ": the peer's write never landed";
        }
        if (!poll_one(q.scq, &wc, 10.0) || (wc.status != AXON_DEV_WC_SUCCESS)) {
            return "round " + std::to_string(round) + ": our write failed";
        }
    }
    st->elapsed = axon_test_time() - start;
    return "";
}

int waiting_writer(int fd, void *)
{
    SoftibDev     dev;
    Qp            q;
    PeerInfo      peer;
    PingPongStats st;
    axon_dev_wc_t wc;
    char          c;

    PEER_CHECK(dev.open() == 0, "open");
    Buf flags = dev.reg(4096, AXON_DEV_ACCESS_LOCAL_WRITE | AXON_DEV_ACCESS_REMOTE_WRITE);
    PEER_CHECK(dev.qp(&q, AXON_DEV_QPT_RC) == 0, "create_qp");
    PEER_CHECK(send_info(fd, q, dev, &flags) == 0, "send info");
    PEER_CHECK(recv_info(fd, &peer) == 0, "recv info");
    PEER_CHECK(connect_to(dev, q, peer) == 0, "connect");
    PEER_CHECK(axon_test_sync(fd) == 0, "sync up");
    std::string err = write_ping_pong(q, flags, peer, false, &st);
    PEER_CHECK(err.empty(), "%s", err.c_str());
    err = check_ping_pong(st);
    PEER_CHECK(err.empty(), "%s", err.c_str());
    /* answer what comes by packets (no progress thread) until the test is done */
    double until = axon_test_time() + 20.0;
    while ((recv(fd, &c, 1, MSG_DONTWAIT) != 1) && (axon_test_time() < until)) {
        axon_dev_poll_cq(q.scq, 0, &wc);
        usleep(100);
    }
    PEER_CHECK(axon_test_sync(fd) == 0, "sync down");
    return 0;
}

/*
 * A target that reads memory instead of calling in answers a write by
 * packets only when it next calls in (perftest's ib_write_lat; with the
 * progress thread, 1 ms after its last call). Once an answer came that
 * late, the QP's writes are placed from this side.
 */
TEST_F(SoftibXproc, WritesLandInATargetWaitingOnMemory)
{
    PeerInfo      peer;
    Qp            q;
    PingPongStats st;
    char          c = 'd';

    env_.set("AXON_SOFTIB_PROGRESS_THREAD", "n");   /* the peer's too: each waits as above */
    axon_test_peer_t *target = spawn(waiting_writer, nullptr);
    open_dev();
    Buf flags = dev_.reg(4096, AXON_DEV_ACCESS_LOCAL_WRITE | AXON_DEV_ACCESS_REMOTE_WRITE);
    ASSERT_EQ(0, dev_.qp(&q, AXON_DEV_QPT_RC));
    ASSERT_EQ(0, recv_info(target->fd, &peer));
    ASSERT_EQ(0, send_info(target->fd, q, dev_, &flags));
    ASSERT_EQ(0, connect_to(dev_, q, peer));
    ASSERT_EQ(0, axon_test_sync(target->fd));

    uint64_t before = softib_direct_count();
    ASSERT_EQ("", write_ping_pong(q, flags, peer, true, &st));
    EXPECT_EQ("", check_ping_pong(st));
    std::cout << "[ info     ] " << softib_direct_count() - before << " of " << kPingPongs
              << " writes placed directly, in " << st.elapsed << " s" << std::endl;

    /* Placed or not, a write past the region is the responder's access error. */
    axon_dev_wc_t wc;
    before = softib_direct_count();
    ASSERT_EQ(0, post_rdma(q.qp, 999, AXON_DEV_WR_RDMA_WRITE, flags.ptr, 16, flags.lkey(),
                           peer.addr + 4096 - 8, peer.rkey));
    ASSERT_TRUE(poll_one(q.scq, &wc, 10.0));
    EXPECT_EQ(AXON_DEV_WC_REM_ACCESS_ERR, wc.status) << wc_status_name(wc.status);
    EXPECT_EQ(before, softib_direct_count());
    ASSERT_EQ(1, write(target->fd, &c, 1));   /* done: the peer stops answering */
    ASSERT_EQ(0, axon_test_sync(target->fd));
    expect_peer_ok(target, "target");
}

/* ---------------------------------------------------------------- lossy wire: messages */

const int      kLossyMessages = 10000;
const int      kRing          = 256;    /* receives posted / sends outstanding */
const uint32_t kSlot          = 2048;
const uint8_t  kLossyTimeout  = 10;     /* 4 ms: losses are recovered quickly */

/* Message seq: [seq (8 bytes)][pattern of seed seq]; 64..1563 bytes (1 or 2 packets). */
uint32_t lossy_len(int seq)
{
    return 64 + (uint32_t)((seq * 37) % 1500);
}

void lossy_fill(uint8_t *p, int seq)
{
    uint64_t s = (uint64_t)seq;
    axon_test_fill(p, lossy_len(seq), 5000 + s);
    memcpy(p, &s, sizeof(s));
}

int lossy_receiver(int fd, void *arg)
{
    const WireCfg &cfg = *static_cast<WireCfg *>(arg);
    EnvGuard       env;
    SoftibDev      dev;
    Qp             q;
    PeerInfo       peer;
    axon_dev_wc_t  wc[16];

    apply_cfg(cfg, 1, &env);
    PEER_CHECK(dev.open() == 0, "open");
    Buf rb = dev.reg(kRing * kSlot, AXON_DEV_ACCESS_LOCAL_WRITE);
    PEER_CHECK(dev.qp(&q, AXON_DEV_QPT_RC, 1, nullptr, 0, kRing) == 0, "create_qp");
    PEER_CHECK(send_info(fd, q, dev, nullptr) == 0, "send info");
    PEER_CHECK(recv_info(fd, &peer) == 0, "recv info");
    PEER_CHECK(connect_to(dev, q, peer, kLossyTimeout) == 0, "connect");
    for (int i = 0; i < kRing; ++i) {
        PEER_CHECK(post_recv(q.qp, i, rb.ptr + i * kSlot, kSlot, rb.lkey()) == 0, "recv");
    }
    PEER_CHECK(axon_test_sync(fd) == 0, "sync up");

    double deadline = axon_test_time() + 45;
    int    next     = 0;
    while (next < kLossyMessages) {
        int n = axon_dev_poll_cq(q.rcq, 16, wc);
        PEER_CHECK(n >= 0, "poll_cq %d", n);
        PEER_CHECK(axon_test_time() < deadline, "only %d of %d messages arrived", next,
                   kLossyMessages);
        if (n == 0) {
            usleep(20);
        }
        for (int k = 0; k < n; ++k, ++next) {
            uint8_t *p = rb.ptr + (wc[k].wr_id % kRing) * kSlot;
            uint64_t seq;
            PEER_CHECK(wc[k].status == AXON_DEV_WC_SUCCESS, "message %d: %s", next,
                       wc_status_name(wc[k].status));
            PEER_CHECK(wc[k].wr_id == (uint64_t)next, "message %d in receive %llu", next,
                       (unsigned long long)wc[k].wr_id);
            memcpy(&seq, p, sizeof(seq));
            PEER_CHECK(seq == (uint64_t)next, "message %llu where %d was expected",
                       (unsigned long long)seq, next);
            PEER_CHECK(wc[k].byte_len == lossy_len(next), "message %d: %u bytes", next,
                       wc[k].byte_len);
            /* the pattern was written over the whole message, then the seq on top */
            uint8_t ref[kSlot];
            lossy_fill(ref, next);
            PEER_CHECK(memcmp(ref, p, lossy_len(next)) == 0, "message %d corrupt", next);
            if (next + kRing < kLossyMessages) {
                PEER_CHECK(post_recv(q.qp, next + kRing, p, kSlot, rb.lkey()) == 0, "repost");
            }
        }
    }
    /* nothing more (no duplicate delivered) */
    PEER_CHECK(axon_test_sync(fd) == 0, "sync done");
    PEER_CHECK(axon_dev_poll_cq(q.rcq, 16, wc) == 0, "a message arrived twice");
    return 0;
}

class SoftibLossySlow : public SoftibXproc, public ::testing::WithParamInterface<WireCfg> {};

TEST_P(SoftibLossySlow, TenThousandRcSendsExactlyOnceInOrder)
{
    WireCfg       cfg = GetParam();
    PeerInfo      peer;
    Qp            q;
    axon_dev_wc_t wc[16];

    apply_cfg(cfg, 0, &env_);
    env_.set("AXON_SOFTIB_SEED", "4242");
    axon_test_peer_t *rx = spawn(lossy_receiver, &cfg);
    open_dev();
    Buf sb = dev_.reg(kRing * kSlot, 0);
    ASSERT_EQ(0, dev_.qp(&q, AXON_DEV_QPT_RC, 1, nullptr, 0, kRing));
    ASSERT_EQ(0, recv_info(rx->fd, &peer));
    ASSERT_EQ(0, send_info(rx->fd, q, dev_, nullptr));
    ASSERT_EQ(0, connect_to(dev_, q, peer, kLossyTimeout));
    ASSERT_EQ(0, axon_test_sync(rx->fd));

    double start = axon_test_time(), deadline = start + 45;
    int    posted = 0, done = 0;
    while (done < kLossyMessages) {
        while ((posted < kLossyMessages) && (posted - done < kRing)) {
            uint8_t *p = sb.ptr + (posted % kRing) * kSlot;
            lossy_fill(p, posted);
            ASSERT_EQ(0, post_send_op(q.qp, posted, AXON_DEV_WR_SEND, p, lossy_len(posted),
                                      sb.lkey()));
            ++posted;
        }
        int n = axon_dev_poll_cq(q.scq, 16, wc);
        ASSERT_GE(n, 0);
        for (int k = 0; k < n; ++k, ++done) {
            ASSERT_EQ(AXON_DEV_WC_SUCCESS, wc[k].status)
                << "send " << done << ": " << wc_status_name(wc[k].status);
            ASSERT_EQ((uint64_t)done, wc[k].wr_id) << "completions out of order";
        }
        ASSERT_LT(axon_test_time(), deadline) << done << " of " << kLossyMessages << " sent";
        if (n == 0) {
            usleep(20);
        }
    }
    ASSERT_EQ(0, axon_test_sync(rx->fd));
    expect_peer_ok(rx, "receiver");
    printf("[ info     ] %d messages in %.2f s\n", kLossyMessages, axon_test_time() - start);
}

/* ---------------------------------------------------------------- lossy wire: atomics */

const int kAddsEach = 1000;

/* The target: one QP per requester, one word; sleeps until told, then reports the word. */
int atomic_target(int fd, void *arg)
{
    const WireCfg &cfg = *static_cast<WireCfg *>(arg);
    EnvGuard       env;
    SoftibDev      dev;
    Qp             q[2];
    PeerInfo       peer[2];
    void          *blob = nullptr;
    size_t         len  = 0;

    apply_cfg(cfg, 1, &env);
    PEER_CHECK(dev.open() == 0, "open");
    Buf word = dev.reg(64, AXON_DEV_ACCESS_LOCAL_WRITE | AXON_DEV_ACCESS_REMOTE_ATOMIC);
    for (int i = 0; i < 2; ++i) {
        PEER_CHECK(dev.qp(&q[i], AXON_DEV_QPT_RC) == 0, "create_qp");
        PEER_CHECK(send_info(fd, q[i], dev, &word) == 0, "send info");
    }
    for (int i = 0; i < 2; ++i) {
        PEER_CHECK(recv_info(fd, &peer[i]) == 0, "recv info");
        PEER_CHECK(connect_to(dev, q[i], peer[i], kLossyTimeout) == 0, "connect");
    }
    PEER_CHECK(axon_test_sync(fd) == 0, "sync up");
    PEER_CHECK(axon_test_recv_blob(fd, &blob, &len) == 0, "done message");
    free(blob);
    uint64_t value = *(volatile uint64_t *)word.ptr;
    PEER_CHECK(axon_test_send_blob(fd, &value, sizeof(value)) == 0, "send value");
    return 0;
}

/* kAddsEach fetch-adds of 1, up to 8 outstanding; the fetched values go to *out. */
int fetch_adds(SoftibDev &dev, const Qp &q, const PeerInfo &target, std::vector<uint64_t> *out)
{
    const int window = 8;
    Buf       res    = dev.reg(window * 8, AXON_DEV_ACCESS_LOCAL_WRITE);
    int       posted = 0, done = 0;
    double    deadline = axon_test_time() + 45;
    axon_dev_wc_t wc[8];

    while (done < kAddsEach) {
        while ((posted < kAddsEach) && (posted - done < window)) {
            if (post_atomic(q.qp, posted, AXON_DEV_WR_ATOMIC_FETCH_AND_ADD,
                            res.ptr + (posted % window) * 8, res.lkey(), target.addr,
                            target.rkey, 1) != 0) {
                fprintf(stderr, "[%d] post_atomic %d failed\n", (int)getpid(), posted);
                return 1;
            }
            ++posted;
        }
        int n = axon_dev_poll_cq(q.scq, 8, wc);
        if (n < 0) {
            return 1;
        }
        for (int k = 0; k < n; ++k, ++done) {
            if ((wc[k].status != AXON_DEV_WC_SUCCESS) || (wc[k].wr_id != (uint64_t)done)) {
                fprintf(stderr, "[%d] fetch-add %d: %s, wr_id %llu\n", (int)getpid(), done,
                        wc_status_name(wc[k].status), (unsigned long long)wc[k].wr_id);
                return 1;
            }
            out->push_back(*(uint64_t *)(res.ptr + (done % window) * 8));
        }
        if (axon_test_time() > deadline) {
            fprintf(stderr, "[%d] only %d fetch-adds done\n", (int)getpid(), done);
            return 1;
        }
        if (n == 0) {
            usleep(20);
        }
    }
    return 0;
}

/* The second requester: reports its fetched values to the test process. */
int atomic_requester(int fd, void *arg)
{
    const WireCfg        &cfg = *static_cast<WireCfg *>(arg);
    EnvGuard              env;
    SoftibDev             dev;
    Qp                    q;
    PeerInfo              target;
    std::vector<uint64_t> got;

    apply_cfg(cfg, 1, &env);
    PEER_CHECK(dev.open() == 0, "open");
    PEER_CHECK(dev.qp(&q, AXON_DEV_QPT_RC) == 0, "create_qp");
    PEER_CHECK(send_info(fd, q, dev, nullptr) == 0, "send info");
    PEER_CHECK(recv_info(fd, &target) == 0, "recv info");
    PEER_CHECK(connect_to(dev, q, target, kLossyTimeout) == 0, "connect");
    PEER_CHECK(axon_test_sync(fd) == 0, "go");
    PEER_CHECK(fetch_adds(dev, q, target, &got) == 0, "fetch-adds");
    PEER_CHECK(axon_test_send_blob(fd, got.data(), got.size() * 8) == 0, "send values");
    return 0;
}

TEST_P(SoftibLossySlow, TwoRequestersFetchAddCountExactly)
{
    WireCfg               cfg = GetParam();
    PeerInfo              t[2], r;
    Qp                    q;
    std::vector<uint64_t> mine;

    apply_cfg(cfg, 0, &env_);
    axon_test_peer_t *target = spawn(atomic_target, &cfg);
    axon_test_peer_t *other  = spawn(atomic_requester, &cfg);
    open_dev();
    ASSERT_EQ(0, dev_.qp(&q, AXON_DEV_QPT_RC));
    ASSERT_EQ(0, recv_info(target->fd, &t[0]));
    ASSERT_EQ(0, recv_info(target->fd, &t[1]));
    ASSERT_EQ(0, recv_info(other->fd, &r));
    /* relay: the target's first QP is ours, its second the other requester's */
    ASSERT_EQ(0, send_info(target->fd, q, dev_, nullptr));
    ASSERT_EQ(0, axon_test_send_blob(target->fd, &r, sizeof(r)));
    ASSERT_EQ(0, axon_test_send_blob(other->fd, &t[1], sizeof(t[1])));
    ASSERT_EQ(0, connect_to(dev_, q, t[0], kLossyTimeout));
    ASSERT_EQ(0, axon_test_sync(target->fd));   /* target up */
    ASSERT_EQ(0, axon_test_sync(other->fd));    /* other requester goes */

    ASSERT_EQ(0, fetch_adds(dev_, q, t[0], &mine));
    void  *blob = nullptr;
    size_t len  = 0;
    ASSERT_EQ(0, axon_test_recv_blob(other->fd, &blob, &len));
    ASSERT_EQ(kAddsEach * 8u, len);
    std::vector<uint64_t> all(mine);
    all.insert(all.end(), (uint64_t *)blob, (uint64_t *)blob + kAddsEach);
    free(blob);
    expect_peer_ok(other, "second requester");

    /* each requester saw increasing values; together every value once */
    EXPECT_TRUE(std::is_sorted(mine.begin(), mine.end()));
    std::sort(all.begin(), all.end());
    ASSERT_EQ(2u * kAddsEach, all.size());
    for (size_t i = 0; i < all.size(); ++i) {
        ASSERT_EQ(i, all[i]) << "fetched values are not 0.." << all.size() - 1
                             << " each once";
    }

    ASSERT_EQ(0, axon_test_send_blob(target->fd, "done", 4));
    ASSERT_EQ(0, axon_test_recv_blob(target->fd, &blob, &len));
    ASSERT_EQ(8u, len);
    EXPECT_EQ(2u * kAddsEach, *(uint64_t *)blob) << "final value of the word";
    free(blob);
    expect_peer_ok(target, "target");
}

const WireCfg kLossy[] = {
    {"ShmLoss10Reorder10", nullptr, {nullptr, nullptr}, "0.1", "0.1", nullptr},
    {"ShmLoss10Reorder10Dup10", nullptr, {nullptr, nullptr}, "0.1", "0.1", "0.1"},
    {"UdpLoss10Reorder10", "udp", {nullptr, nullptr}, "0.1", "0.1", nullptr},
};

INSTANTIATE_TEST_SUITE_P(Wire, SoftibLossySlow, ::testing::ValuesIn(kLossy),
                         [](const ::testing::TestParamInfo<WireCfg> &info) {
                             return std::string(info.param.name);
                         });

}  // namespace
