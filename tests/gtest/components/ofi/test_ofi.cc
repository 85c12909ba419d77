/*
 * ofi, Axon's transport over a libfabric provider: AXON_OFI_PROVIDER values
 * good and bad, tagged messages between two processes (eager and
 * rendezvous sizes, every byte checked), and a peer killed while a send
 * waits for it. Put and get are in test_ofi_rma.cc.
 *
 * Every test skips when libfabric offers no provider ofi can use.
 */
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "tag_env.h"

namespace {

const double kKillLimit = 5.0;   /* peer killed -> the survivor's send fails */

/* A context over ofi with overrides: its status, and what the library logged. */
axon_status_t ofi_node_status(const std::vector<axon_config_kv_t> &kv, std::string *log)
{
    axon_test_node_t node = {};

    EXPECT_EQ(0, axon_test_stderr_capture_begin());
    axon_status_t status = axon_test_node_create(&node, "ofi", kv.data(), kv.size());
    char *text = axon_test_stderr_capture_end();
    if (log != nullptr) {
        *log = text ? text : "";
    }
    free(text);
    if (status == AXON_OK) {
        axon_test_node_destroy(&node);
    }
    return status;
}

/* Skip unless ofi has a provider here. */
#define OFI_REQUIRE()                                                                   \
    do {                                                                                \
        if (ofi_node_status({}, nullptr) != AXON_OK) {                                  \
            GTEST_SKIP() << "no libfabric provider ofi can use here";                    \
        }                                                                               \
    } while (0)

/* ---------------------------------------------------------------- configuration */

TEST(OfiConfig, DefaultProviderWorks)
{
    OFI_REQUIRE();
    EXPECT_EQ(AXON_OK, ofi_node_status({{"OFI_PROVIDER", "tcp"}}, nullptr));
}

TEST(OfiConfig, UnknownProviderIsAnErrorNamingIt)
{
    std::string log;

    OFI_REQUIRE();
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, ofi_node_status({{"OFI_PROVIDER", "nosuchfabric"}}, &log));
    EXPECT_NE(std::string::npos, log.find("AXON_OFI_PROVIDER=nosuchfabric")) << log;
    EXPECT_NE(std::string::npos, log.find("tcp")) << "the error lists what exists: " << log;
}

TEST(OfiConfig, AxonsOwnProviderIsRefused)
{
    std::string log;

    /* Refused before libfabric is asked anything: no loop back into Axon. */
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, ofi_node_status({{"OFI_PROVIDER", "axon"}}, &log));
    EXPECT_NE(std::string::npos, log.find("AXON_OFI_PROVIDER=axon")) << log;
    EXPECT_EQ(AXON_ERR_INVALID_PARAM,
              ofi_node_status({{"OFI_PROVIDER", "axon;ofi_rxm"}}, &log));
    EXPECT_NE(std::string::npos, log.find("AXON_OFI_PROVIDER=axon;ofi_rxm")) << log;
}

/* libfabric's version from the library itself, 0 if it cannot be loaded. */
uint32_t libfabric_version()
{
    void *handle = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
    uint32_t (*version)(void);

    if (handle == nullptr) {
        return 0;
    }
    *(void **)&version = dlsym(handle, "fi_version");
    return (version != nullptr) ? version() : 0;   /* kept open: libfabric has exit hooks */
}

/*
 * libfabric 1.17's shm lost messages it had to hold unexpected: this storm
 * over AXON_OFI_PROVIDER=shm stopped at a message that never arrived in 11 of
 * 12 runs with 4 KiB buffers. Such a provider is refused, saying why.
 */
TEST(OfiConfig, ShmProviderThatLosesMessagesIsRefused)
{
    const uint32_t kFixed = (1u << 16) | 19u;   /* FI_VERSION(1, 19) */
    std::string    log;

    OFI_REQUIRE();
    axon_status_t status = ofi_node_status({{"OFI_PROVIDER", "shm"}}, &log);
    if (log.find("names no libfabric provider") != std::string::npos) {
        GTEST_SKIP() << "this libfabric has no shm provider";
    }
    uint32_t version = libfabric_version();
    ASSERT_NE(0u, version);
    if (version >= kFixed) {
        EXPECT_EQ(std::string::npos, log.find("loses messages")) << log;
        return;
    }
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, status);
    EXPECT_NE(std::string::npos, log.find("AXON_OFI_PROVIDER=shm")) << log;
    EXPECT_NE(std::string::npos, log.find("AXON_TLS=shm")) << "the error says what to use: " << log;
}

TEST(OfiConfig, BadSizesAreErrors)
{
    std::string log;

    EXPECT_EQ(AXON_ERR_INVALID_PARAM, ofi_node_status({{"OFI_SEG_SIZE", "16"}}, &log));
    EXPECT_NE(std::string::npos, log.find("AXON_OFI_SEG_SIZE")) << log;
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, ofi_node_status({{"OFI_TX_QUEUE_LEN", "1"}}, &log));
    EXPECT_NE(std::string::npos, log.find("AXON_OFI_TX_QUEUE_LEN=1")) << log;
}

TEST(OfiConfig, KeepaliveTimeoutShorterThanTwoIntervalsIsAnError)
{
    std::string log;

    EXPECT_EQ(AXON_ERR_INVALID_PARAM,
              ofi_node_status({{"OFI_KEEPALIVE_INTERVAL", "1s"},
                               {"OFI_KEEPALIVE_TIMEOUT", "1500ms"}}, &log));
    EXPECT_NE(std::string::npos, log.find("AXON_OFI_KEEPALIVE_TIMEOUT=1.5")) << log;
}

TEST(OfiConfig, NoneOffersNothing)
{
    /* AXON_TLS=ofi with no provider: nothing is left to use. */
    EXPECT_EQ(AXON_ERR_NO_ELEM, ofi_node_status({{"OFI_PROVIDER", "none"}}, nullptr));
}

TEST(OfiConfig, NotSelectedByDefault)
{
    axon_test_node_t node = {};
    axon_ep_h        ep   = nullptr;
    axon_ep_attr_t   attr;

    OFI_REQUIRE();
    /* shm and tcp reach every peer a software provider does, for less. */
    ASSERT_EQ(AXON_OK, axon_test_node_create(&node, "shm,tcp,ofi", nullptr, 0));
    ASSERT_EQ(AXON_OK, axon_test_ep_create(node.worker, node.address, node.address_length, &ep));
    EXPECT_EQ(AXON_OK, axon_ep_query(ep, &attr));
    EXPECT_STRNE("ofi", attr.small_tl);
    EXPECT_STRNE("ofi", attr.bulk_tl);
    EXPECT_EQ(AXON_OK, axon_test_ep_close(node.worker, ep, AXON_EP_CLOSE_FLUSH, 10.0));
    axon_test_node_destroy(&node);
}

/* ---------------------------------------------------------------- tag messages */

class OfiTag : public ::testing::TestWithParam<TransportParam> {
};

/* Rank 0 sends every size, rank 1 echoes each back; both check every byte. */
TEST_P(OfiTag, EchoEverySize)
{
    static const size_t kSizes[] = {0, 1, 8, 63, 64, 65, 1000, 8000, 8192, 8193, 65536,
                                    100000, 1u << 20, 4u << 20};
    const int kCount = sizeof(kSizes) / sizeof(kSizes[0]);

    OFI_REQUIRE();
    run_roles(GetParam(),
        [&](Env &env) {
            for (int i = 0; i < kCount; ++i) {
                size_t               len = kSizes[i];
                std::vector<uint8_t> out(len + 1), in(len + 1);
                axon_tag_recv_info_t info;

                fill_msg(out.data(), len, i);
                ASSERT_EQ(AXON_OK, env.send(out.data(), len, 0x100 + i)) << len;
                ASSERT_EQ(AXON_OK, env.recv(in.data(), len, 0x200 + i, ~0ull, &info)) << len;
                EXPECT_EQ(len, info.length);
                EXPECT_EQ("", check_msg(in.data(), len, i + 1000));
            }
        },
        [&](Env &env) {
            for (int i = 0; i < kCount; ++i) {
                size_t               len = kSizes[i];
                GuardedBuf           in(len);
                std::vector<uint8_t> out(len + 1);
                axon_tag_recv_info_t info;

                ASSERT_EQ(AXON_OK, env.recv(in.data(), len, 0x100 + i, ~0ull, &info)) << len;
                EXPECT_EQ(len, info.length);
                EXPECT_EQ("", check_msg(in.data(), len, i));
                EXPECT_TRUE(in.guard_intact()) << "received past the buffer, " << len;
                fill_msg(out.data(), len, i + 1000);
                ASSERT_EQ(AXON_OK, env.send(out.data(), len, 0x200 + i)) << len;
            }
        });
}

/* A window of sends of mixed sizes, received out of posting order by tag. */
TEST_P(OfiTag, StormOfMixedSizes)
{
    const int kCount = 300;
    auto size = [](int i) { return (size_t)((i % 7 == 0) ? 70000 : (i * 37) % 9000); };

    OFI_REQUIRE();
    run_roles(GetParam(),
        [&](Env &env) {
            send_all(env, kCount, size, [](int i) { return (axon_tag_t)i; });
        },
        [&](Env &env) {
            std::vector<GuardedBuf>     bufs;
            std::vector<axon_request_h> reqs(kCount);
            std::vector<axon_status_t>  st(kCount);

            bufs.reserve(kCount);
            for (int i = kCount - 1; i >= 0; --i) {
                bufs.emplace_back(size(i));
                st[i] = axon_tag_recv_nb(env.worker, bufs.back().data(), size(i), i, ~0ull,
                                         nullptr, &reqs[i]);
            }
            for (int i = 0; i < kCount; ++i) {
                axon_tag_recv_info_t info;
                GuardedBuf          &b = bufs[kCount - 1 - i];

                EXPECT_EQ(AXON_OK, env.wait(st[i], reqs[i], &info)) << i;
                EXPECT_EQ("", check_msg(b.data(), size(i), i));
                EXPECT_TRUE(b.guard_intact()) << i;
            }
        });
}

const TransportParam kOfiLanes[] = {
    {"ofi", "ofi", 1},
    {"ofi_rev", "ofi", 0},
    /* Rendezvous data by fi_read (AXON_OFI_RMA=y), or streamed in bcopy messages. */
    {"ofi_tcp_rndv", "ofi", 1, false, {{"OFI_PROVIDER", "tcp"}, {"OFI_RMA", "y"},
                                       {"RNDV_THRESH", "16K"}}},
    {"ofi_tcp_norma", "ofi", 1, false, {{"OFI_PROVIDER", "tcp"}, {"OFI_RMA", "n"},
                                        {"RNDV_THRESH", "16K"}}},
    /* Small buffers: the storm outruns the 128 posted receives, so the
     * provider holds messages as unexpected (what libfabric 1.17's shm loses). */
    {"ofi_tcp_4k", "ofi", 1, false, {{"OFI_PROVIDER", "tcp"}, {"OFI_SEG_SIZE", "4k"}}},
};

INSTANTIATE_TEST_SUITE_P(Lanes, OfiTag, ::testing::ValuesIn(kOfiLanes),
                         transport_name);

/* ---------------------------------------------------------------- peer failure */

/* The victim: connects, says hello, then progresses until killed. */
int victim_main(int fd, void *)
{
    axon_test_node_t node = {};
    axon_ep_h        ep   = nullptr;
    void            *peer;
    size_t           len;
    uint64_t         hello = 42;

    if ((axon_test_node_create(&node, "ofi", nullptr, 0) != AXON_OK) ||
        (axon_test_exchange_address(fd, node.address, node.address_length, &peer, &len) != 0)) {
        return 1;
    }
    if ((axon_test_ep_create(node.worker, peer, len, &ep) != AXON_OK) ||
        (axon_test_send(node.worker, ep, &hello, sizeof(hello), 1, 30.0) != AXON_OK)) {
        return 1;
    }
    free(peer);
    for (;;) {
        axon_worker_progress(node.worker);
    }
}

/* The echo: connects, then answers every message of tag 3 with tag 4, until killed. */
int echo_main(int fd, void *)
{
    axon_test_node_t     node = {};
    axon_ep_h            ep   = nullptr;
    axon_tag_recv_info_t info;
    void                *peer;
    size_t               len;
    uint64_t             value = 0;

    if ((axon_test_node_create(&node, "ofi", nullptr, 0) != AXON_OK) ||
        (axon_test_exchange_address(fd, node.address, node.address_length, &peer, &len) != 0) ||
        (axon_test_ep_create(node.worker, peer, len, &ep) != AXON_OK)) {
        return 1;
    }
    free(peer);
    for (;;) {
        if ((axon_test_recv(node.worker, &value, sizeof(value), 3, ~0ull, &info, 60.0) != AXON_OK) ||
            (axon_test_send(node.worker, ep, &value, sizeof(value), 4, 30.0) != AXON_OK)) {
            return 1;
        }
    }
}

/* The survivor's keep-alive timeout in these tests (the default is 30 s). */
const axon_config_kv_t kFastFail[] = {{"OFI_KEEPALIVE_TIMEOUT", "3s"}};

/* The streamer: connects, then sends kStreams messages at once and progresses until killed. */
const int    kStreams   = 8;
const size_t kStreamLen = (size_t)8 << 20;
const axon_tag_t kTagStream = 5;

int streamer_main(int fd, void *)
{
    axon_test_node_t     node = {};
    axon_ep_h            ep   = nullptr;
    std::vector<uint8_t> buf(kStreamLen, 0x6B);  /* touched before we connect */
    void                *peer;
    size_t               len;

    if ((axon_test_node_create(&node, "ofi", nullptr, 0) != AXON_OK) ||
        (axon_test_exchange_address(fd, node.address, node.address_length, &peer, &len) != 0) ||
        (axon_test_ep_create(node.worker, peer, len, &ep) != AXON_OK)) {
        return 1;
    }
    free(peer);
    if (axon_test_sync(fd) != 0) {   /* the survivor has posted its receives */
        return 2;
    }
    for (int i = 0; i < kStreams; ++i) {
        axon_request_h req = nullptr;
        axon_status_t  st  = axon_tag_send_nb(ep, buf.data(), buf.size(), kTagStream, nullptr,
                                              &req);
        if ((st != AXON_OK) && (st != AXON_INPROGRESS)) {
            return 3;
        }
    }
    for (;;) {
        axon_worker_progress(node.worker);
    }
}

/*
 * A sender killed mid-stream: the receives whose data was still coming fail
 * within the limit, with a peer-failure status. Two ways get there: when
 * libfabric's tcp fails a receive still arriving on the broken connection
 * (it does not say whose), ofi pings every peer at once and the dead one's
 * ping fails (tens of ms, "Connection reset"); when nothing was arriving,
 * the keep-alive timeout (3 s here, "Endpoint timeout").
 */
TEST(OfiPeerFailureFault, KilledSenderFailsTheReceivesInFlight)
{
    axon_test_peer_t                  streamer;
    axon_test_node_t                  node = {};
    axon_ep_h                         ep   = nullptr;
    std::vector<std::vector<uint8_t>> bufs(kStreams, std::vector<uint8_t>(kStreamLen, 0));
    std::vector<axon_request_h>       reqs(kStreams, nullptr);
    void                             *peer;
    size_t                            len;

    OFI_REQUIRE();
    ASSERT_EQ(0, axon_test_peer_spawn(&streamer, streamer_main, nullptr, 60.0));
    ASSERT_EQ(AXON_OK, axon_test_node_create(&node, "ofi", kFastFail, 1));
    ASSERT_EQ(0, axon_test_exchange_address(streamer.fd, node.address, node.address_length,
                                            &peer, &len));
    ASSERT_EQ(AXON_OK, axon_test_ep_create(node.worker, peer, len, &ep));
    free(peer);
    for (int i = 0; i < kStreams; ++i) {
        ASSERT_EQ(AXON_INPROGRESS, axon_tag_recv_nb(node.worker, bufs[i].data(), kStreamLen,
                                                    kTagStream, AXON_TAG_MASK_FULL, nullptr,
                                                    &reqs[i]));
    }
    ASSERT_EQ(0, axon_test_sync(streamer.fd));

    double end = axon_test_time() + 30.0;
    while ((axon_request_test(reqs[0], nullptr) == AXON_INPROGRESS) &&
           (axon_test_time() < end)) {
        axon_test_progress(node.worker);
    }
    ASSERT_EQ(AXON_OK, axon_request_test(reqs[0], nullptr)) << "the first message never came";
    EXPECT_EQ(0x6B, bufs[0][kStreamLen - 1]);

    double t0 = axon_test_time();
    kill(streamer.pid, SIGKILL);
    /* The messages whose data was still coming fail; any not yet matched stays posted. */
    int           failed = 0;
    axon_status_t st     = AXON_OK;
    while ((failed == 0) && (axon_test_time() - t0 < 2 * kKillLimit)) {
        axon_test_progress(node.worker);
        for (int i = 1; i < kStreams; ++i) {
            st = axon_request_test(reqs[i], nullptr);
            if ((st != AXON_INPROGRESS) && (st != AXON_OK)) {
                ++failed;
                break;
            }
        }
    }
    double took = axon_test_time() - t0;
    EXPECT_GT(failed, 0) << "no receive failed " << took << " s after the kill";
    EXPECT_LT(took, kKillLimit) << axon_status_string(st);
    EXPECT_TRUE((st == AXON_ERR_CONNECTION_RESET) || (st == AXON_ERR_ENDPOINT_TIMEOUT))
        << axon_status_string(st);
    fprintf(stderr, "[ofi] a receive failed %.3f s after the kill: %s\n", took,
            axon_status_string(st));

    for (auto req : reqs) {
        if (axon_request_test(req, nullptr) == AXON_INPROGRESS) {
            EXPECT_EQ(AXON_OK, axon_request_cancel(node.worker, req));
        }
        axon_request_free(req);
    }
    axon_test_ep_close(node.worker, ep, AXON_EP_CLOSE_FORCE, 10.0);
    axon_test_node_destroy(&node);
    axon_test_peer_wait(&streamer, 1.0);
    axon_test_peer_kill(&streamer);
}


/*
 * Pings keep a silent but progressing peer alive past the keep-alive
 * timeout (3 s here); once it is killed, sends to it fail in time.
 */
TEST(OfiPeerFailureFault, IdlePeerStaysAliveKilledPeerTimesOut)
{
    axon_test_peer_t     echo;
    axon_test_node_t     node = {};
    axon_ep_h            ep   = nullptr;
    axon_tag_recv_info_t info;
    void                *peer;
    size_t               len;
    uint64_t             value = 7, back = 0;

    OFI_REQUIRE();
    ASSERT_EQ(0, axon_test_peer_spawn(&echo, echo_main, nullptr, 60.0));
    ASSERT_EQ(AXON_OK, axon_test_node_create(&node, "ofi", kFastFail, 1));
    ASSERT_EQ(0, axon_test_exchange_address(echo.fd, node.address, node.address_length, &peer,
                                            &len));
    ASSERT_EQ(AXON_OK, axon_test_ep_create(node.worker, peer, len, &ep));
    free(peer);
    ASSERT_EQ(AXON_OK, axon_test_send(node.worker, ep, &value, sizeof(value), 3, 30.0));
    ASSERT_EQ(AXON_OK, axon_test_recv(node.worker, &back, sizeof(back), 4, ~0ull, &info, 30.0));
    EXPECT_EQ(7u, back);

    /* Nothing but pings for longer than the timeout: still alive. */
    axon_test_progress_for(node.worker, 4.5);
    value = 8;
    ASSERT_EQ(AXON_OK, axon_test_send(node.worker, ep, &value, sizeof(value), 3, 30.0));
    ASSERT_EQ(AXON_OK, axon_test_recv(node.worker, &back, sizeof(back), 4, ~0ull, &info, 30.0));
    EXPECT_EQ(8u, back);

    double t0 = axon_test_time();
    kill(echo.pid, SIGKILL);
    /* Eager sends succeed until the ep knows the peer is gone: within the limit. */
    value = 9;
    axon_status_t st = axon_test_send(node.worker, ep, &value, sizeof(value), 3, kKillLimit);
    while ((st == AXON_OK) && (axon_test_time() - t0 < kKillLimit)) {
        axon_test_progress_for(node.worker, 0.1);
        st = axon_test_send(node.worker, ep, &value, sizeof(value), 3, kKillLimit);
    }
    EXPECT_NE(AXON_OK, st);
    EXPECT_LT(axon_test_time() - t0, kKillLimit + 0.5) << axon_status_string(st);

    axon_test_ep_close(node.worker, ep, AXON_EP_CLOSE_FORCE, 10.0);
    axon_test_node_destroy(&node);
    axon_test_peer_wait(&echo, 1.0);
    axon_test_peer_kill(&echo);
}

TEST(OfiPeerFailureFault, SendToKilledPeerFails)
{
    axon_test_peer_t     victim;
    axon_test_node_t     node = {};
    axon_ep_h            ep   = nullptr;
    axon_request_h       req  = nullptr;
    axon_tag_recv_info_t info;
    void                *peer;
    size_t               len;
    uint64_t             hello = 0;
    std::vector<uint8_t> big(4u << 20, 0x5A);

    OFI_REQUIRE();
    ASSERT_EQ(0, axon_test_peer_spawn(&victim, victim_main, nullptr, 60.0));
    ASSERT_EQ(AXON_OK, axon_test_node_create(&node, "ofi", kFastFail, 1));
    ASSERT_EQ(0, axon_test_exchange_address(victim.fd, node.address, node.address_length, &peer,
                                            &len));
    ASSERT_EQ(AXON_OK, axon_test_ep_create(node.worker, peer, len, &ep));
    free(peer);
    ASSERT_EQ(AXON_OK, axon_test_recv(node.worker, &hello, sizeof(hello), 1, ~0ull, &info, 30.0));
    EXPECT_EQ(42u, hello);

    /* Rendezvous: the send waits for a receive the victim never posts. */
    axon_status_t st = axon_tag_send_nb(ep, big.data(), big.size(), 2, nullptr, &req);
    ASSERT_EQ(AXON_INPROGRESS, st);
    axon_test_progress_for(node.worker, 0.2);
    double t0 = axon_test_time();
    kill(victim.pid, SIGKILL);
    st = axon_test_wait_req(node.worker, st, req, nullptr, 3 * kKillLimit);
    double took = axon_test_time() - t0;
    EXPECT_NE(AXON_OK, st);
    EXPECT_NE(AXON_ERR_TIMED_OUT, st) << "the survivor never noticed";
    EXPECT_LT(took, kKillLimit) << axon_status_string(st);
    fprintf(stderr, "[ofi] send failed %.3f s after the kill: %s\n", took,
            axon_status_string(st));

    axon_test_ep_close(node.worker, ep, AXON_EP_CLOSE_FORCE, 10.0);
    axon_test_node_destroy(&node);
    axon_test_peer_wait(&victim, 1.0);
    axon_test_peer_kill(&victim);
}

}  // namespace
