/*
 * shm rendezvous on a crowded host (api/tag/rndv.c, axon_rndv_get_pays):
 * with more processes of Axon than cores, all runnable, the receiver
 * reads a large message by one get, which needs no time slice of the
 * sender's, whatever the copy-cost model says (on a machine where two
 * memcpys beat process_vm_readv it streams otherwise), and does not split
 * it with the sender either.
 */
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <unistd.h>

#include <poll.h>

#include <string>
#include <vector>

#include "axon.h"
#include "harness.h"

extern "C" {
#include "idle.h"
#include "sys.h"
}

namespace {

const double kOpTimeout   = 30.0;
const double kPeerTimeout = 60.0;
/* Past the split threshold (256 KiB) and the eager bound. */
const size_t kBig         = 1024 * 1024 + 13;
/* How long the sender stays away from progress once its RTS is out. */
const double kSenderAway  = 3.0;
const axon_tag_t kTag     = 0x51;
/* Crowds of more processes than this are not started. */
const long kCrowdMax      = 16;

/*
 * A crowd of Axon processes that oversubscribes the host: as many as it has
 * cores (with the test's two, more than cores), each with an shm ring under
 * the test's prefix (what shm counts) and always runnable (what
 * /proc/loadavg counts), but at nice 19, so the test's own two processes, and
 * tests beside it, still get nearly all the CPU they ask for.
 */
int crowd_member_main(int fd, void *arg)
{
    const char      *prefix = static_cast<const char *>(arg);
    axon_config_kv_t kv[]   = {{"SHM_PREFIX", prefix}};
    axon_test_node_t node   = {};
    struct pollfd    pfd    = {fd, POLLIN, 0};
    char             go     = 'g';

    setpriority(PRIO_PROCESS, 0, 19);
    if ((axon_test_node_create(&node, "shm", kv, 1) != AXON_OK) || (write(fd, &go, 1) != 1)) {
        return 2;
    }
    /* Spin until the test says stop (a byte, or its end of the socket closed). */
    while (poll(&pfd, 1, 0) == 0) {
        for (volatile unsigned spin = 0; spin < 100000; ++spin) {
        }
    }
    axon_test_node_destroy(&node);
    return 0;
}

class Crowd {
  public:
    explicit Crowd(const char *prefix)
    {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);

        for (long i = 0; i < cores; ++i) {
            axon_test_peer_t member = {-1, -1};
            char             go;

            if ((axon_test_peer_spawn(&member, crowd_member_main, const_cast<char *>(prefix),
                                      kPeerTimeout) != 0)) {
                break;
            }
            members_.push_back(member);
            if (read(member.fd, &go, 1) != 1) {
                break;
            }
            ++ready_;
        }
    }
    ~Crowd()
    {
        char stop = 's';

        for (auto &m : members_) {
            if (write(m.fd, &stop, 1) != 1) {
                /* its end is gone: peer_wait reaps it either way */
            }
        }
        for (auto &m : members_) {
            axon_test_peer_wait(&m, kOpTimeout);
        }
    }
    bool ready() const { return ready_ == sysconf(_SC_NPROCESSORS_ONLN); }

  private:
    std::vector<axon_test_peer_t> members_;
    long                          ready_ = 0;
};

/* Kills a peer an assertion left running, destroys a node it left built. */
struct Cleanup {
    axon_test_peer_t peer = {-1, -1};
    axon_test_node_t node = {};
    ~Cleanup()
    {
        axon_test_peer_kill(&peer);
        if (node.context != nullptr) {
            axon_test_node_destroy(&node);
        }
    }
};

/* In a child: destroys the node on every way out (a child ends in _exit, not atexit). */
struct NodeGuard {
    axon_test_node_t node = {};
    ~NodeGuard()
    {
        if (node.context != nullptr) {
            axon_test_node_destroy(&node);
        }
    }
};

/* The sender: a warm-up message, then kBig sent and left alone for kSenderAway. */
int away_sender_main(int fd, void *arg)
{
    axon_config_kv_t  kv[] = {{"SHM_PREFIX", static_cast<const char *>(arg)}};
    NodeGuard         ng;
    axon_test_node_t &node = ng.node;
    axon_request_h    req  = nullptr;
    axon_ep_h         ep;
    void             *peer_addr;
    size_t            peer_len;
    char              hello = 'h';

    if (axon_test_node_create(&node, "shm", kv, 1) != AXON_OK) {
        return 2;
    }
    if ((axon_test_exchange_address(fd, node.address, node.address_length, &peer_addr,
                                    &peer_len) != 0) ||
        (axon_test_ep_create(node.worker, peer_addr, peer_len, &ep) != AXON_OK)) {
        return 3;
    }
    free(peer_addr);
    /* Wired up both ways before the message that counts. */
    if ((axon_test_send(node.worker, ep, &hello, 1, kTag, kOpTimeout) != AXON_OK) ||
        (axon_test_sync_progress(fd, node.worker, kOpTimeout) != 0)) {
        return 4;
    }
    std::vector<uint8_t> buf(kBig);
    axon_test_fill(buf.data(), kBig, 7);
    axon_status_t status = axon_tag_send_nb(ep, buf.data(), kBig, kTag, nullptr, &req);
    if (status != AXON_INPROGRESS) {
        fprintf(stderr, "a %zu-byte send returned %s, not in progress\n", kBig,
                axon_status_string(status));
        return 5;
    }
    usleep((useconds_t)(kSenderAway * 1e6));   /* no progress: only a get moves the data */
    if (axon_test_wait_req(node.worker, status, req, nullptr, kOpTimeout) != AXON_OK) {
        return 6;
    }
    if ((axon_test_ep_close(node.worker, ep, AXON_EP_CLOSE_FLUSH, kOpTimeout) != AXON_OK) ||
        (axon_test_sync_progress(fd, node.worker, kOpTimeout) != 0)) {
        return 7;
    }
    return 0;
}

}  // namespace

TEST(ShmRndvXproc, CrowdedHostReadsWhileTheSenderIsAway)
{
    Cleanup              c;
    axon_tag_recv_info_t info;
    std::vector<uint8_t> buf(kBig + 64, 0x5a);
    void                *blob;
    size_t               len;
    char                 hello;

    std::string      prefix = "axt" + std::to_string(getpid()) + "crowd";
    axon_config_kv_t kv[]   = {{"SHM_PREFIX", prefix.c_str()}};

    if (sysconf(_SC_NPROCESSORS_ONLN) > kCrowdMax) {
        GTEST_SKIP() << "a crowd for " << sysconf(_SC_NPROCESSORS_ONLN) << " cores is too large";
    }
    Crowd crowd(prefix.c_str());
    ASSERT_TRUE(crowd.ready()) << "the crowd did not start";
    ASSERT_EQ(0, axon_test_peer_spawn(&c.peer, away_sender_main,
                                      const_cast<char *>(prefix.c_str()), kPeerTimeout));
    ASSERT_EQ(AXON_OK, axon_test_node_create(&c.node, "shm", kv, 1));
    ASSERT_EQ(0, axon_test_exchange_address(c.peer.fd, c.node.address, c.node.address_length,
                                            &blob, &len));
    free(blob);
    ASSERT_EQ(AXON_OK, axon_test_recv(c.node.worker, &hello, 1, kTag, AXON_TAG_MASK_FULL, &info,
                                      kOpTimeout));
    /* Axon sees the host crowded (its load is read every 50 ms) before the send. */
    double start = axon_test_time();
    while (!axon_idle_crowded(axon_sys_time_sec()) && (axon_test_time() - start < 2.0)) {
        usleep(10 * 1000);
    }
    ASSERT_TRUE(axon_idle_crowded(axon_sys_time_sec()))
        << "the host is not crowded with " << sysconf(_SC_NPROCESSORS_ONLN) + 2
        << " processes of Axon on " << sysconf(_SC_NPROCESSORS_ONLN) << " cores";
    ASSERT_EQ(0, axon_test_sync_progress(c.peer.fd, c.node.worker, kOpTimeout));

    start = axon_test_time();
    ASSERT_EQ(AXON_OK, axon_test_recv(c.node.worker, buf.data(), kBig, kTag, AXON_TAG_MASK_FULL,
                                      &info, kOpTimeout));
    double took = axon_test_time() - start;
    EXPECT_LT(took, kSenderAway / 2) << "the receive waited for the sender to come back";
    EXPECT_EQ(kBig, info.length);
    EXPECT_EQ(-1, axon_test_check(buf.data(), kBig, 7));
    for (size_t b = kBig; b < buf.size(); ++b) {
        ASSERT_EQ(0x5a, buf[b]) << "written past the receive buffer";
    }

    EXPECT_EQ(0, axon_test_sync_progress(c.peer.fd, c.node.worker, kOpTimeout));
    EXPECT_EQ(0, axon_test_peer_wait(&c.peer, kPeerTimeout));
}
