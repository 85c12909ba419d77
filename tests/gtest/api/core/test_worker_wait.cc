/*
 * Waiting for a worker instead of polling it (axon_worker_get_efd,
 * axon_worker_arm): an armed worker's descriptor stays quiet until a
 * message comes, then becomes readable; arming with a message already in
 * is refused (AXON_ERR_BUSY); transports that can only be polled say so.
 * Over shm the sender wakes the armed receiver through its eventfd, in
 * this process and from another one; over tcp the sockets' epoll set does.
 */
#include <gtest/gtest.h>

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>

#include "axon.h"
#include "harness.h"
#include "log_capture.h"

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif

namespace {

const double     kOpTimeout = 10.0;
const axon_tag_t kTag       = 0x5a17;

/* Is fd readable within timeout_ms? */
bool readable(int fd, int timeout_ms)
{
    struct pollfd pfd = {fd, POLLIN, 0};

    return (poll(&pfd, 1, timeout_ms) == 1) && (pfd.revents & POLLIN);
}

/* Progress until nothing more happens (a few empty passes in a row). */
void drain(axon_worker_h worker)
{
    int empty = 0;

    while (empty < 8) {
        empty = (axon_worker_progress(worker) == 0) ? empty + 1 : 0;
    }
}

/* Progress and arm until the worker is armed (AXON_OK), or the first other error. */
axon_status_t arm_after_progress(axon_worker_h worker)
{
    axon_status_t status = AXON_ERR_BUSY;
    double        start  = axon_test_time();

    while ((status == AXON_ERR_BUSY) && (axon_test_time() - start < kOpTimeout)) {
        drain(worker);
        status = axon_worker_arm(worker);
    }
    return status;
}

/* Under valgrind shm's senders cannot take the wakeup descriptor (no pidfd_open there):
 * its workers are polled, never waited for. */
bool shm_waits(const char *tls)
{
#if __has_include(<valgrind/valgrind.h>)
    return (strcmp(tls, "shm") != 0) || !RUNNING_ON_VALGRIND;
#else
    return true;
#endif
}

/* Two nodes over tls, b with an endpoint to a. */
struct Pair {
    axon_test_node_t a = {}, b = {};
    axon_ep_h        ep = nullptr;

    axon_status_t open(const char *tls)
    {
        axon_status_t status = axon_test_node_create(&a, tls, NULL, 0);

        if (status == AXON_OK) {
            status = axon_test_node_create(&b, tls, NULL, 0);
        }
        if (status == AXON_OK) {
            status = axon_test_ep_create(b.worker, a.address, a.address_length, &ep);
        }
        return status;
    }

    ~Pair()
    {
        if (ep != nullptr) {
            axon_test_ep_close(b.worker, ep, AXON_EP_CLOSE_FORCE, kOpTimeout);
        }
        if (b.worker != nullptr) {
            axon_test_node_destroy(&b);
        }
        if (a.worker != nullptr) {
            axon_test_node_destroy(&a);
        }
    }
};

/* While one worker of the pair waits, the other is driven too (tcp's handshake). */
void progress_other(void *arg)
{
    axon_worker_progress((axon_worker_h)arg);
}

/* A first message from b to a, received: the connection is up. */
void first_message(Pair &p)
{
    uint64_t value = 7, got = 0;

    axon_test_set_progress_hook(progress_other, p.a.worker);
    ASSERT_EQ(AXON_OK, axon_test_send(p.b.worker, p.ep, &value, sizeof(value), kTag, kOpTimeout));
    axon_test_set_progress_hook(progress_other, p.b.worker);
    ASSERT_EQ(AXON_OK, axon_test_recv(p.a.worker, &got, sizeof(got), kTag, ~0ull, NULL,
                                      kOpTimeout));
    axon_test_set_progress_hook(NULL, NULL);
    EXPECT_EQ(value, got);
}

/* The receiver arms and sleeps; the sender's message wakes it, and arrives. */
void wakes_on_a_message(const char *tls)
{
    Pair     p;
    int      fd = -1;
    uint64_t value = 0x1122334455667788ull, got = 0;

    ASSERT_EQ(AXON_OK, p.open(tls));
    ASSERT_EQ(AXON_OK, axon_worker_get_efd(p.a.worker, &fd));
    ASSERT_GE(fd, 0);
    first_message(p);
    if (!shm_waits(tls)) {
        EXPECT_EQ(AXON_ERR_UNSUPPORTED, axon_worker_arm(p.a.worker));
        GTEST_SKIP() << "under valgrind shm is polled";
    }

    for (int round = 0; round < 3; ++round) {
        ASSERT_EQ(AXON_OK, arm_after_progress(p.a.worker)) << tls << " round " << round;
        EXPECT_FALSE(readable(fd, 50)) << tls << ": armed with nothing sent, yet readable";
        value += round;
        ASSERT_EQ(AXON_OK, axon_test_send(p.b.worker, p.ep, &value, sizeof(value), kTag,
                                          kOpTimeout));
        EXPECT_TRUE(readable(fd, (int)(kOpTimeout * 1000))) << tls << ": no wake-up";
        got = 0;
        ASSERT_EQ(AXON_OK, axon_test_recv(p.a.worker, &got, sizeof(got), kTag, ~0ull, NULL,
                                          kOpTimeout));
        EXPECT_EQ(value, got);
    }
}

/* A message in before the arm: the worker must be progressed first. */
void busy_with_a_message_in(const char *tls)
{
    Pair     p;
    int      fd = -1;
    uint64_t value = 42, got = 0;

    ASSERT_EQ(AXON_OK, p.open(tls));
    ASSERT_EQ(AXON_OK, axon_worker_get_efd(p.a.worker, &fd));
    first_message(p);
    if (!shm_waits(tls)) {
        EXPECT_EQ(AXON_ERR_UNSUPPORTED, axon_worker_arm(p.a.worker));
        GTEST_SKIP() << "under valgrind shm is polled";
    }
    ASSERT_EQ(AXON_OK, arm_after_progress(p.a.worker));

    /* Sent while armed, not yet received: arming again is refused until it is. */
    ASSERT_EQ(AXON_OK, axon_test_send(p.b.worker, p.ep, &value, sizeof(value), kTag, kOpTimeout));
    EXPECT_TRUE(readable(fd, (int)(kOpTimeout * 1000)));
    EXPECT_EQ(AXON_ERR_BUSY, axon_worker_arm(p.a.worker)) << tls;
    got = 0;
    ASSERT_EQ(AXON_OK, axon_test_recv(p.a.worker, &got, sizeof(got), kTag, ~0ull, NULL,
                                      kOpTimeout));
    EXPECT_EQ(value, got);
    EXPECT_EQ(AXON_OK, arm_after_progress(p.a.worker)) << tls;
}

TEST(WorkerWait, ShmWakesOnAMessage)
{
    wakes_on_a_message("shm");
}

TEST(WorkerWait, TcpWakesOnAMessage)
{
    wakes_on_a_message("tcp");
}

TEST(WorkerWait, ShmIsBusyWithAMessageIn)
{
    busy_with_a_message_in("shm");
}

TEST(WorkerWait, TcpIsBusyWithAMessageIn)
{
    busy_with_a_message_in("tcp");
}

/* A worker whose transports are all self (one worker, nothing to wait for) arms at once. */
TEST(WorkerWait, SelfOnlyArmsAtOnce)
{
    axon_test_node_t node = {};
    int              fd   = -1;

    ASSERT_EQ(AXON_OK, axon_test_node_create(&node, "self", NULL, 0));
    EXPECT_EQ(AXON_OK, axon_worker_get_efd(node.worker, &fd));
    EXPECT_EQ(AXON_OK, arm_after_progress(node.worker));
    EXPECT_FALSE(readable(fd, 20));
    axon_test_node_destroy(&node);
}

/* rc on softib is a polled device: no descriptor, and the log says which transport. */
TEST(WorkerWait, PolledTransportIsUnsupported)
{
    axon_test_node_t node = {};
    int              fd   = -1;

    if (axon_test_node_create(&node, "rc", NULL, 0) != AXON_OK) {
        GTEST_SKIP() << "no rc resource (softib)";
    }
    EXPECT_EQ(AXON_ERR_UNSUPPORTED, axon_worker_get_efd(node.worker, &fd));
    EXPECT_EQ(-1, fd);
    EXPECT_EQ(AXON_ERR_UNSUPPORTED, axon_worker_arm(node.worker));
    axon_test_node_destroy(&node);
}

TEST(WorkerWait, NullArgumentsAreRefused)
{
    axon_test_node_t node = {};
    int              fd;
    std::string      log;

    ASSERT_EQ(AXON_OK, axon_test_node_create(&node, "self", NULL, 0));
    log = capture_stderr([&] {
        EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_worker_get_efd(NULL, &fd));
        EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_worker_get_efd(node.worker, NULL));
        EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_worker_arm(NULL));
    });
    EXPECT_NE(std::string::npos, log.find("fd_p")) << log;
    EXPECT_NE(std::string::npos, log.find("axon_worker_arm")) << log;
    axon_test_node_destroy(&node);
}

/* ---------------------------------------------------------------- another process */

/* The child: connect, wait for "go", send one message, wait for the end. */
int peer_send_later(int fd, void *)
{
    axon_test_node_t node = {};
    axon_ep_h        ep;
    uint64_t         value = 0xfeedull;

    PEER_CHECK(axon_test_node_create(&node, "shm", NULL, 0) == AXON_OK);
    PEER_CHECK(axon_test_connect_peer(fd, &node, &ep) == 0);
    PEER_CHECK(axon_test_send(node.worker, ep, &value, sizeof(value), kTag, kOpTimeout) ==
               AXON_OK);
    PEER_CHECK(axon_test_sync_progress(fd, node.worker, kOpTimeout) == 0);   /* parent armed */
    usleep(100000);   /* the parent is asleep by now */
    ++value;
    PEER_CHECK(axon_test_send(node.worker, ep, &value, sizeof(value), kTag, kOpTimeout) ==
               AXON_OK);
    PEER_CHECK(axon_test_sync_progress(fd, node.worker, kOpTimeout) == 0);
    PEER_CHECK(axon_test_ep_close(node.worker, ep, 0, kOpTimeout) == AXON_OK);
    axon_test_node_destroy(&node);
    return 0;
}

/* The parent sleeps on its descriptor; the child's message, sent 100 ms later, wakes it. */
TEST(WorkerWaitXproc, AnotherProcessWakesTheSleeper)
{
    axon_test_node_t node = {};
    axon_test_peer_t peer;
    void            *addr;
    size_t           len;
    uint64_t         got = 0;
    int              fd  = -1;

    ASSERT_EQ(AXON_OK, axon_test_node_create(&node, "shm", NULL, 0));
    ASSERT_EQ(0, axon_test_peer_spawn(&peer, peer_send_later, NULL, 60.0));
    ASSERT_EQ(0, axon_test_exchange_address(peer.fd, node.address, node.address_length, &addr,
                                            &len));
    free(addr);
    ASSERT_EQ(AXON_OK, axon_worker_get_efd(node.worker, &fd));
    ASSERT_EQ(AXON_OK, axon_test_recv(node.worker, &got, sizeof(got), kTag, ~0ull, NULL,
                                      kOpTimeout));
    EXPECT_EQ(0xfeedull, got);
    ASSERT_EQ(AXON_OK, arm_after_progress(node.worker));
    ASSERT_EQ(0, axon_test_sync(peer.fd));

    EXPECT_TRUE(readable(fd, (int)(kOpTimeout * 1000))) << "the child's message did not wake us";
    got = 0;
    ASSERT_EQ(AXON_OK, axon_test_recv(node.worker, &got, sizeof(got), kTag, ~0ull, NULL,
                                      kOpTimeout));
    EXPECT_EQ(0xfeedull + 1, got);
    ASSERT_EQ(0, axon_test_sync_progress(peer.fd, node.worker, kOpTimeout));
    EXPECT_EQ(0, axon_test_peer_wait(&peer, 60.0));
    axon_test_node_destroy(&node);
}

/* The child: connect over shm, say so, then wait to be killed. */
int peer_connect_and_wait(int fd, void *)
{
    axon_test_node_t node = {};
    axon_ep_h        ep;

    PEER_CHECK(axon_test_node_create(&node, "shm", NULL, 0) == AXON_OK);
    PEER_CHECK(axon_test_connect_peer(fd, &node, &ep) == 0);
    PEER_CHECK(axon_test_sync_progress(fd, node.worker, kOpTimeout) == 0);
    for (;;) {
        pause();
    }
    return 0;
}

void count_failure(void *arg, axon_ep_h, axon_status_t)
{
    ++*static_cast<int *>(arg);
}

/* A child (peer_connect_and_wait) to kill, and its address; node made here too. */
void spawn_victim(axon_test_node_t *node, axon_test_peer_t *peer, void **addr, size_t *len)
{
    ASSERT_EQ(AXON_OK, axon_test_node_create(node, "shm", NULL, 0));
    ASSERT_EQ(0, axon_test_peer_spawn(peer, peer_connect_and_wait, NULL, 60.0));
    ASSERT_EQ(0, axon_test_exchange_address(peer->fd, node->address, node->address_length, addr,
                                            len));
}

/* Progress until a failure is counted, at most kOpTimeout */
void progress_until_failure(axon_worker_h worker, const int *failures)
{
    double start = axon_test_time();

    while ((*failures == 0) && (axon_test_time() - start < kOpTimeout)) {
        axon_worker_progress(worker);
    }
}

bool pidfd_runs()
{
#if defined(RUNNING_ON_VALGRIND)
    return !RUNNING_ON_VALGRIND;
#else
    return true;
#endif
}

/*
 * A peer that dies wakes the worker sleeping on its descriptor (over shm its
 * pidfd is in the set); the next progress reports the failure, and the
 * descriptor is quiet again: the dead peer wakes it once. Without the watch
 * the sleeper would see the death only when something else woke it.
 */
TEST(WorkerWaitXproc, KilledPeerWakesTheSleeperOverShm)
{
    axon_test_node_t node = {};
    axon_test_peer_t peer;
    axon_ep_h        ep = nullptr;
    void            *addr;
    size_t           len;
    int              failures = 0;
    int              fd = -1;

    if (!pidfd_runs()) {
        GTEST_SKIP() << "valgrind does not run pidfd_open";
    }
    spawn_victim(&node, &peer, &addr, &len);
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_EQ(AXON_OK,
              axon_test_ep_create_err(node.worker, addr, len, count_failure, &failures, &ep));
    free(addr);
    ASSERT_EQ(0, axon_test_sync_progress(peer.fd, node.worker, kOpTimeout));
    ASSERT_EQ(AXON_OK, axon_worker_get_efd(node.worker, &fd));
    ASSERT_EQ(AXON_OK, arm_after_progress(node.worker));
    EXPECT_FALSE(readable(fd, 300)) << "woken with the peer alive";

    axon_test_peer_kill(&peer);
    EXPECT_TRUE(readable(fd, 5000)) << "the peer's death did not wake us";
    progress_until_failure(node.worker, &failures);
    EXPECT_EQ(1, failures) << "the failure was not reported";
    EXPECT_EQ(AXON_OK, arm_after_progress(node.worker));
    EXPECT_FALSE(readable(fd, 300)) << "the dead peer keeps waking us";
    EXPECT_EQ(AXON_OK, axon_test_ep_close(node.worker, ep, AXON_EP_CLOSE_FORCE, kOpTimeout));
    axon_test_node_destroy(&node);
}

/*
 * Two endpoints to one peer process share one watch of it (shm): the first
 * holds it; closed, it hands the watch to the second, whose peer's death
 * still wakes the sleeper.
 */
TEST(WorkerWaitXproc, WatchOfAPeerOutlivesTheEndpointThatHeldIt)
{
    axon_test_node_t node = {};
    axon_test_peer_t peer;
    axon_ep_h        first = nullptr, second = nullptr;
    void            *addr;
    size_t           len;
    int              failures = 0;
    int              fd = -1;

    if (!pidfd_runs()) {
        GTEST_SKIP() << "valgrind does not run pidfd_open";
    }
    spawn_victim(&node, &peer, &addr, &len);
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_EQ(AXON_OK, axon_test_ep_create(node.worker, addr, len, &first));
    ASSERT_EQ(AXON_OK, axon_test_ep_create_err(node.worker, addr, len, count_failure, &failures,
                                               &second));
    free(addr);
    ASSERT_EQ(0, axon_test_sync_progress(peer.fd, node.worker, kOpTimeout));
    EXPECT_EQ(AXON_OK, axon_test_ep_close(node.worker, first, AXON_EP_CLOSE_FLUSH, kOpTimeout));
    ASSERT_EQ(AXON_OK, axon_worker_get_efd(node.worker, &fd));
    ASSERT_EQ(AXON_OK, arm_after_progress(node.worker));

    axon_test_peer_kill(&peer);
    EXPECT_TRUE(readable(fd, 5000)) << "the watch did not pass to the second endpoint";
    progress_until_failure(node.worker, &failures);
    EXPECT_EQ(1, failures);
    EXPECT_EQ(AXON_OK, axon_test_ep_close(node.worker, second, AXON_EP_CLOSE_FORCE, kOpTimeout));
    axon_test_node_destroy(&node);
}

}  // namespace
