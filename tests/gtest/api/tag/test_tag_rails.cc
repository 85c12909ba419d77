/*
 * Rendezvous striped over rails (api/core/rails.c, api/tag/rndv_rails.c):
 * an endpoint opens a lane per usable device of its bulk transport, large
 * messages move over all of them, byte-exact and in order with the eager
 * ones, and a rail killed mid-transfer ends the transfer cleanly.
 *
 * tcp's rails here are lo and the host's other IPv4 interface (eth0): what
 * one host gives UCX as tcp/lo and tcp/eth0. A host with no second IPv4
 * interface skips the tcp tests that need two rails. rc's are two softib
 * devices (AXON_SOFTIB_DEVICES=2).
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <linux/tcp.h>   /* tcp_info with tcpi_bytes_acked */
#include <netinet/in.h>
#include <sys/socket.h>

#include "env_guard.h"
#include "log_capture.h"
#include "tag_env.h"
#include "rails_rc_probe.h"
extern "C" {
#include "rails.h"
#include "request.h"
}

namespace {

/* The first IPv4 address of an interface that is up and not loopback, or "". */
std::string second_ipv4()
{
    struct ifaddrs *list, *ifa;
    char            text[INET_ADDRSTRLEN] = "";

    if (getifaddrs(&list) != 0) {
        return "";
    }
    for (ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
        if ((ifa->ifa_addr != nullptr) && (ifa->ifa_addr->sa_family == AF_INET) &&
            (ifa->ifa_flags & IFF_UP) && !(ifa->ifa_flags & IFF_LOOPBACK)) {
            inet_ntop(AF_INET, &((struct sockaddr_in *)ifa->ifa_addr)->sin_addr, text,
                      sizeof(text));
            break;
        }
    }
    freeifaddrs(list);
    return text;
}

#define SKIP_WITHOUT_SECOND_IPV4() \
    do { \
        if (second_ipv4().empty()) { \
            GTEST_SKIP() << "no IPv4 interface besides lo: tcp has one rail here"; \
        } \
    } while (0)

/* This process's connected TCP sockets whose peer is at ip. */
std::vector<int> sockets_to(const std::string &ip)
{
    std::vector<int> fds;
    char             text[INET_ADDRSTRLEN];

    for (int fd = 0; fd < 4096; ++fd) {
        struct sockaddr_in sa;
        socklen_t          len = sizeof(sa);
        if ((getpeername(fd, (struct sockaddr *)&sa, &len) == 0) && (sa.sin_family == AF_INET) &&
            inet_ntop(AF_INET, &sa.sin_addr, text, sizeof(text)) && (ip == text)) {
            fds.push_back(fd);
        }
    }
    return fds;
}

/* Bytes this process's sockets to ip have had acknowledged: what went over that rail. */
uint64_t bytes_sent_to(const std::string &ip)
{
    uint64_t total = 0;

    for (int fd : sockets_to(ip)) {
        struct tcp_info info;
        socklen_t       len = sizeof(info);
        if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) == 0) {
            total += info.tcpi_bytes_acked;
        }
    }
    return total;
}

/* Rendezvous sizes: at the split's edges, odd, several MiB. */
const size_t kSizes[] = {AXON_RNDV_RAIL_MIN * 2 - 1, AXON_RNDV_RAIL_MIN * 2,
                         AXON_RNDV_RAIL_MIN * 2 + 1, 1 << 20, (4 << 20) + 13, 3 << 20};

const size_t kEagerLen = 100;

/* ---------------------------------------------------------------- one process */

/* Two nodes of this process over one transport, A with an endpoint to B. */
struct Pair {
    const char *tls;
    NodeGuard   a, b;
    axon_ep_h   ep = nullptr;

    explicit Pair(const char *tls_) : tls(tls_) {}

    void create(std::vector<axon_config_kv_t> extra = {})
    {
        ASSERT_EQ(AXON_OK, axon_test_node_create(&a.node, tls, extra.data(), extra.size()));
        ASSERT_EQ(AXON_OK, axon_test_node_create(&b.node, tls, extra.data(), extra.size()));
        ASSERT_EQ(AXON_OK, axon_test_ep_create(a.node.worker, b.node.address,
                                               b.node.address_length, &ep));
    }

    void progress()
    {
        axon_worker_progress(a.node.worker);
        axon_worker_progress(b.node.worker);
    }

    /* Progress both until req (or a completed-at-once status) is done. */
    axon_status_t wait(axon_status_t status, axon_request_h req, axon_tag_recv_info_t *info)
    {
        double end = axon_test_time() + kOpTimeout;

        if (status != AXON_INPROGRESS) {
            return status;
        }
        while ((status = axon_request_test(req, info)) == AXON_INPROGRESS) {
            if (axon_test_time() > end) {
                return AXON_ERR_TIMED_OUT;   /* left to the test's teardown */
            }
            progress();
        }
        axon_request_free(req);
        return status;
    }

    /* One message of len bytes from A to B, checked. */
    void move_one(size_t len, axon_tag_t tag = 99)
    {
        std::vector<uint8_t> tx(len);
        GuardedBuf           rx(len);
        axon_tag_recv_info_t info;
        axon_request_param_t rp = {};
        axon_request_h       sreq, rreq;

        fill_msg(tx.data(), len, tag);
        axon_status_t rst = axon_tag_recv_nb(b.node.worker, rx.data(), len, tag, ~0ull, &rp,
                                             &rreq);
        axon_status_t sst = axon_tag_send_nb(ep, tx.data(), len, tag, &rp, &sreq);
        EXPECT_EQ(AXON_OK, wait(sst, sreq, nullptr));
        EXPECT_EQ(AXON_OK, wait(rst, rreq, &info));
        EXPECT_EQ("", check_msg(rx.data(), len, tag));
    }

    /* B's endpoint to A: the one its replies (and rc's reads) go through. */
    axon_ep_h reply_ep()
    {
        axon_ep_h rep;
        axon_list_for_each(rep, &b.node.worker->eps, link) {
            return rep;
        }
        return nullptr;
    }

    /* rc: a first striped message opens both sides' rails; progress until the
     * receiver's second rail is connected, so the next messages read on it. */
    void rc_rails_up()
    {
        move_one(1 << 20);
        axon_ep_h rep = reply_ep();
        ASSERT_NE(nullptr, ep->rails);
        ASSERT_NE(nullptr, rep);
        ASSERT_NE(nullptr, rep->rails);
        double end = axon_test_time() + kOpTimeout;
        while (!axon_test_rc_ep_connected(rep->rails->lane[1].tl_ep) &&
               (axon_test_time() < end)) {
            progress();
        }
        ASSERT_TRUE(axon_test_rc_ep_connected(rep->rails->lane[1].tl_ep));
    }

    ~Pair()
    {
        if (ep != nullptr) {
            axon_ep_close_nb(ep, AXON_EP_CLOSE_FORCE, nullptr);
        }
    }
};

TEST(TagRails, BadMaxRndvRailsIsRejectedNamingIt)
{
    for (const char *value : {"0", "5", "-1", "two"}) {
        axon_config_kv_t      kv[]   = {{"MAX_RNDV_RAILS", value}};
        axon_context_params_t params = {AXON_FEATURE_TAG, kv, 1};
        axon_context_h        ctx    = nullptr;
        std::string           log    = capture_stderr([&] {
            EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_init(&params, &ctx)) << value;
        });
        EXPECT_EQ(nullptr, ctx);
        EXPECT_NE(std::string::npos, log.find(value)) << log;
        EXPECT_NE(std::string::npos, log.find("MAX_RNDV_RAILS")) << log;
    }
}

TEST(TagRails, TcpOpensARailPerInterface)
{
    SKIP_WITHOUT_SECOND_IPV4();
    Pair pair("tcp");
    pair.create();
    pair.move_one(1 << 10);
    EXPECT_EQ(nullptr, pair.ep->rails) << "rails before any message needs them";
    pair.move_one(1 << 20);
    ASSERT_NE(nullptr, pair.ep->rails);
    ASSERT_EQ(2u, pair.ep->rails->count);
    EXPECT_EQ(pair.ep->bulk_lane.tl_ep, pair.ep->rails->lane[0].tl_ep);
    EXPECT_STRNE(pair.ep->rails->lane[0].resource->dev_name,
                 pair.ep->rails->lane[1].resource->dev_name);
    EXPECT_STREQ("tcp", pair.ep->rails->lane[1].resource->tl_name);
    EXPECT_EQ(1u << AXON_RAIL_SHARE_BITS, pair.ep->rails->share[1]);
    EXPECT_GT(pair.ep->rails->share[0], 0u);
}

/* A peer beside us is reached through the kernel's loopback on either interface (lo's
 * estimate 4000 MB/s, eth0's link speed or 1250): its rails share the data evenly. */
TEST(TagRails, TcpRailsToAPeerInThisStackShareEvenly)
{
    SKIP_WITHOUT_SECOND_IPV4();
    Pair pair("tcp");
    pair.create();
    pair.move_one(1 << 20);
    ASSERT_NE(nullptr, pair.ep->rails);
    ASSERT_EQ(2u, pair.ep->rails->count);
    if (pair.ep->rails->lane[0].resource->bandwidth_MBps ==
        pair.ep->rails->lane[1].resource->bandwidth_MBps) {
        GTEST_SKIP() << "both interfaces have the same estimate here: an even split says nothing";
    }
    EXPECT_EQ(1u << (AXON_RAIL_SHARE_BITS - 1), pair.ep->rails->share[0]);
}

TEST(TagRails, OneRailWhenConfiguredOrDevicesRestricted)
{
    SKIP_WITHOUT_SECOND_IPV4();
    {
        Pair pair("tcp");
        pair.create({{"MAX_RNDV_RAILS", "1"}});
        pair.move_one(1 << 20);
        EXPECT_EQ(nullptr, pair.ep->rails);
    }
    {
        Pair pair("tcp");
        pair.create({{"NET_DEVICES", "lo"}});
        pair.move_one(1 << 20);
        EXPECT_EQ(nullptr, pair.ep->rails);
    }
}

/* Each striped message, then an eager one on the same tag: received in that order,
 * exact, whether the receives were posted before or after the messages came. */
void check_stripes(Pair &pair)
{
    uint64_t seq = 0;

    for (size_t len : kSizes) {
        for (int posted_first = 0; posted_first < 2; ++posted_first) {
            std::vector<uint8_t> big(len), small(kEagerLen);
            GuardedBuf           big_rx(len), small_rx(kEagerLen);
            axon_request_param_t rp = {};
            axon_request_h       sreq[2], rreq[2] = {nullptr, nullptr};
            axon_status_t        sst[2], rst[2];
            axon_tag_recv_info_t info[2];

            fill_msg(big.data(), len, seq);
            fill_msg(small.data(), kEagerLen, seq + 1);
            if (posted_first) {
                rst[0] = axon_tag_recv_nb(pair.b.node.worker, big_rx.data(), len, 7, ~0ull,
                                          &rp, &rreq[0]);
                rst[1] = axon_tag_recv_nb(pair.b.node.worker, small_rx.data(), kEagerLen, 7,
                                          ~0ull, &rp, &rreq[1]);
            }
            sst[0] = axon_tag_send_nb(pair.ep, big.data(), len, 7, &rp, &sreq[0]);
            sst[1] = axon_tag_send_nb(pair.ep, small.data(), kEagerLen, 7, &rp, &sreq[1]);
            if (!posted_first) {
                for (int i = 0; i < 50; ++i) {
                    pair.progress();   /* both arrive unexpected, in send order */
                }
                rst[0] = axon_tag_recv_nb(pair.b.node.worker, big_rx.data(), len, 7, ~0ull,
                                          &rp, &rreq[0]);
                rst[1] = axon_tag_recv_nb(pair.b.node.worker, small_rx.data(), kEagerLen, 7,
                                          ~0ull, &rp, &rreq[1]);
            }
            for (int i = 0; i < 2; ++i) {
                EXPECT_EQ(AXON_OK, pair.wait(sst[i], sreq[i], nullptr)) << len;
                EXPECT_EQ(AXON_OK, pair.wait(rst[i], rreq[i], &info[i])) << len;
            }
            EXPECT_EQ(len, info[0].length);
            EXPECT_EQ("", check_msg(big_rx.data(), len, seq)) << "posted first: " << posted_first;
            EXPECT_EQ("", check_msg(small_rx.data(), kEagerLen, seq + 1));
            EXPECT_TRUE(big_rx.guard_intact()) << len;
            EXPECT_TRUE(small_rx.guard_intact());
            seq += 2;
        }
    }
}

/* Bytes check_stripes moves in rendezvous messages. */
size_t striped_bytes()
{
    size_t total = 0;

    for (size_t len : kSizes) {
        total += 2 * len;
    }
    return total;
}

TEST(TagRails, TcpStripesAreByteExactAndKeepOrder)
{
    SKIP_WITHOUT_SECOND_IPV4();
    const std::string ip = second_ipv4();
    Pair              pair("tcp");

    pair.create();
    uint64_t before = bytes_sent_to(ip);
    check_stripes(pair);
    ASSERT_NE(nullptr, pair.ep->rails);
    /* The second rail carried its share: at least a tenth of what was striped. */
    EXPECT_GT(bytes_sent_to(ip) - before, striped_bytes() / 10) << "the rail over " << ip;
}


TEST(TagRails, RcOpensARailPerSoftibDevicePairedByName)
{
    EnvGuard env("AXON_SOFTIB_DEVICES", "2");
    Pair     pair("rc");

    pair.create();
    pair.move_one(1 << 20);
    ASSERT_NE(nullptr, pair.ep->rails);
    ASSERT_EQ(2u, pair.ep->rails->count);
    for (unsigned i = 0; i < 2; ++i) {
        const char *dev = pair.ep->rails->lane[i].resource->dev_name;
        EXPECT_STREQ(dev, pair.ep->rails->lane[i].peer_dev) << "rail " << i;
    }
    EXPECT_STRNE(pair.ep->rails->lane[0].resource->dev_name,
                 pair.ep->rails->lane[1].resource->dev_name);
}

TEST(TagRails, RcStripesOverTwoDevicesAreByteExactAndKeepOrder)
{
    EnvGuard env("AXON_SOFTIB_DEVICES", "2");
    Pair     pair("rc");

    pair.create();
    ASSERT_NO_FATAL_FAILURE(pair.rc_rails_up());
    axon_ep_h rep = pair.reply_ep();
    uint64_t posted = axon_test_rc_ep_posted(rep->rails->lane[1].tl_ep);
    check_stripes(pair);
    /* rail 1 read: its connection posted one read per message long enough to stripe */
    uint64_t striped = 0;
    for (size_t len : kSizes) {
        striped += (axon_rails_for(rep->rails, len) > 1) ? 2 : 0;
    }
    EXPECT_EQ(10u, striped);
    EXPECT_GE(axon_test_rc_ep_posted(rep->rails->lane[1].tl_ep) - posted, striped);
}

/*
 * A rail breaks under a 16 MiB rc read: the receiver's QP on rail 1 goes to
 * the error state once the stripes are posted. Both sides end in time (an
 * error, or the whole message exact), nothing lands outside the buffer.
 */
TEST(TagRails, RcRailInErrorEndsTheTransferCleanly)
{
    EnvGuard             env("AXON_SOFTIB_DEVICES", "2");
    Pair                 pair("rc");
    const size_t         len = 16 << 20;
    std::vector<uint8_t> buf(len);
    GuardedBuf           rx(len);
    axon_request_param_t rp = {};
    axon_request_h       sreq, rreq;
    axon_tag_recv_info_t info;

    pair.create();
    ASSERT_NO_FATAL_FAILURE(pair.rc_rails_up());
    fill_msg(buf.data(), len, 5);
    axon_status_t rst = axon_tag_recv_nb(pair.b.node.worker, rx.data(), len, 9, ~0ull, &rp, &rreq);
    axon_status_t sst = axon_tag_send_nb(pair.ep, buf.data(), len, 9, &rp, &sreq);
    ASSERT_EQ(AXON_INPROGRESS, rst);
    ASSERT_EQ(AXON_INPROGRESS, sst);
    double end = axon_test_time() + kOpTimeout;
    while ((rreq->rails.busy == 0) && !(rreq->flags & AXON_REQUEST_COMPLETED) &&
           (axon_test_time() < end)) {
        pair.progress();
    }
    ASSERT_GT(rreq->rails.busy, 0) << "the receive never read on its rails";
    ASSERT_EQ(0, axon_test_rc_ep_break(pair.reply_ep()->rails->lane[1].tl_ep));

    axon_status_t rdone = pair.wait(rst, rreq, &info);
    axon_status_t sdone = pair.wait(sst, sreq, nullptr);
    EXPECT_NE(AXON_ERR_TIMED_OUT, rdone);
    EXPECT_NE(AXON_ERR_TIMED_OUT, sdone);
    if (rdone == AXON_OK) {
        EXPECT_EQ("", check_msg(rx.data(), len, 5));
    }
    EXPECT_TRUE(rx.guard_intact());
    /* The buffer is the user's again: no rail may still write into it. */
    rx.reset();
    for (double stop = axon_test_time() + 0.3; axon_test_time() < stop;) {
        pair.progress();
    }
    EXPECT_TRUE(rx.intact_from(0)) << "written after the receive ended";
}

/*
 * The receiver's rail 0 can register nothing more: rail 1 reads its stripe,
 * rail 0 refuses its own, and once rail 1's is in nothing is in flight that
 * could make room. The receiver asks the sender to send instead (it waited
 * for ever before): the message arrives whole, in order with the next one.
 */
TEST(TagRails, RcRailZeroRefusingItsStripeFallsBackToTheSender)
{
    EnvGuard             env("AXON_SOFTIB_DEVICES", "2");
    Pair                 pair("rc");
    const size_t         len = 4 << 20;
    std::vector<uint8_t> buf(len);
    GuardedBuf           rx(len);
    axon_request_param_t rp = {};
    axon_request_h       sreq, rreq;
    axon_tag_recv_info_t info;

    pair.create();
    ASSERT_NO_FATAL_FAILURE(pair.rc_rails_up());
    axon_ep_h rep  = pair.reply_ep();
    void     *fill = axon_test_rc_ep_fill_mrs(rep->rails->lane[0].tl_ep, 0);
    ASSERT_NE(nullptr, fill) << "the device never refused a registration";
    uint64_t posted = axon_test_rc_ep_posted(rep->rails->lane[1].tl_ep);
    fill_msg(buf.data(), len, 6);
    axon_status_t rst = axon_tag_recv_nb(pair.b.node.worker, rx.data(), len, 6, ~0ull, &rp, &rreq);
    axon_status_t sst = axon_tag_send_nb(pair.ep, buf.data(), len, 6, &rp, &sreq);
    axon_status_t rdone = pair.wait(rst, rreq, &info);
    axon_status_t sdone = pair.wait(sst, sreq, nullptr);
    axon_test_rc_mrs_release(fill);
    ASSERT_EQ(AXON_OK, rdone);
    ASSERT_EQ(AXON_OK, sdone);
    EXPECT_EQ(len, info.length);
    EXPECT_EQ("", check_msg(rx.data(), len, 6));
    EXPECT_TRUE(rx.guard_intact());
    EXPECT_GT(axon_test_rc_ep_posted(rep->rails->lane[1].tl_ep), posted)
        << "rail 1 read its stripe";
    pair.move_one(len, 7);   /* the rails work as before */
}

/* ---------------------------------------------------------------- two processes */

class TagRailsXproc : public ::testing::Test {};

const TransportParam kTcp = {"tcp", "tcp", 1, false, {}};
const TransportParam kRc  = {"rc", "rc", 1, false, {}};
const int            kRounds = 3;

/* Rank 0 streams messages of every size, each followed by an eager one on its tag. */
void stripes_sender(Env &env)
{
    uint64_t seq = 0;
    for (int r = 0; r < kRounds; ++r) {
        for (size_t len : kSizes) {
            std::vector<uint8_t> big(len), small(kEagerLen);
            fill_msg(big.data(), len, seq);
            fill_msg(small.data(), kEagerLen, seq + 1);
            ASSERT_EQ(AXON_OK, env.send(big.data(), len, r));
            ASSERT_EQ(AXON_OK, env.send(small.data(), kEagerLen, r));
            seq += 2;
        }
    }
    EXPECT_NE(nullptr, env.ep()->rails) << "the sender's endpoint never opened its rails";
}

void stripes_receiver(Env &env)
{
    uint64_t seq = 0;
    for (int r = 0; r < kRounds; ++r) {
        for (size_t len : kSizes) {
            GuardedBuf           big(len), small(kEagerLen);
            axon_tag_recv_info_t info;
            ASSERT_EQ(AXON_OK, env.recv(big.data(), len, r, ~0ull, &info));
            EXPECT_EQ(len, info.length);
            ASSERT_EQ(AXON_OK, env.recv(small.data(), kEagerLen, r, ~0ull, &info));
            EXPECT_EQ("", check_msg(big.data(), len, seq));
            EXPECT_EQ("", check_msg(small.data(), kEagerLen, seq + 1));
            EXPECT_TRUE(big.guard_intact());
            seq += 2;
        }
    }
}

TEST_F(TagRailsXproc, TcpStripesBetweenProcesses)
{
    SKIP_WITHOUT_SECOND_IPV4();
    run_roles(kTcp, stripes_sender, stripes_receiver);
}

TEST_F(TagRailsXproc, RcStripesBetweenProcessesOverTwoDevices)
{
    EnvGuard env("AXON_SOFTIB_DEVICES", "2");
    run_roles(kRc, stripes_sender, stripes_receiver);
}

/*
 * The sender shuts its sockets over the second rail while a 16 MiB message
 * is on the way: both sides end (an error, or the whole message exact) in
 * time, and nothing lands outside the receive buffer.
 */
TEST_F(TagRailsXproc, KilledRailEndsTheTransferCleanly)
{
    SKIP_WITHOUT_SECOND_IPV4();
    const std::string ip  = second_ipv4();
    const size_t      len = 16 << 20;

    run_roles(kTcp,
              [&](Env &env) {
                  std::vector<uint8_t> buf(len);
                  axon_request_param_t rp = {};
                  axon_request_h       req;
                  fill_msg(buf.data(), len, 1);
                  uint64_t before = bytes_sent_to(ip);
                  axon_status_t st = axon_tag_send_nb(env.ep(), buf.data(), len, 3, &rp, &req);
                  /* Kill the rail once it carries data, or give up when it is done. */
                  bool   killed = false;
                  double end    = axon_test_time() + env.timeout();
                  if (st == AXON_INPROGRESS) {
                      while (((st = axon_request_test(req, nullptr)) == AXON_INPROGRESS) &&
                             (axon_test_time() < end)) {
                          env.progress();
                          if (!killed && (bytes_sent_to(ip) - before > (1u << 20))) {
                              for (int fd : sockets_to(ip)) {
                                  shutdown(fd, SHUT_RDWR);
                              }
                              killed = true;
                          }
                      }
                      EXPECT_NE(AXON_INPROGRESS, st) << "the send hangs";
                      if (st != AXON_INPROGRESS) {
                          axon_request_free(req);
                      }
                  }
                  EXPECT_TRUE(killed) << "the message was sent before the rail carried 1 MiB";
              },
              [&](Env &env) {
                  GuardedBuf           buf(len);
                  axon_tag_recv_info_t info;
                  axon_status_t st = env.recv(buf.data(), len, 3, ~0ull, &info);
                  EXPECT_NE(AXON_ERR_TIMED_OUT, st);
                  if (st == AXON_OK) {
                      EXPECT_EQ("", check_msg(buf.data(), len, 1));
                  }
                  EXPECT_TRUE(buf.guard_intact());
                  /* The buffer is the user's again: no rail may still write into it. */
                  buf.reset();
                  axon_test_progress_for(env.worker, 0.3);
                  EXPECT_TRUE(buf.intact_from(0)) << "written after the receive ended";
              });
}

}  // namespace
