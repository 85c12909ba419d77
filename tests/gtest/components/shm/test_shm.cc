/*
 * shm transport: its segments in /dev/shm (permissions, lifetime, cleanup at
 * exit, the count of processes by them), its configuration checks, the
 * receive ring under back-pressure, and rendezvous on a crowded host.
 * Each test uses a segment prefix of its own, so it sees only its segments.
 */
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "axon.h"
#include "harness.h"

extern "C" {
#include "idle.h"
#include "sys.h"
}

/* shm_seg.h (C11 atomics, not for C++): shm's count of the processes on the host. */
extern "C" unsigned axon_shm_seg_count_procs(const char *name);

namespace {

const double kOpTimeout   = 30.0;
const double kPeerTimeout = 60.0;

/* A prefix unique to this process and test, e.g. "axt1234seg". */
std::string test_prefix(const char *what)
{
    return "axt" + std::to_string(getpid()) + what;
}

/* Names in /dev/shm that start with prefix + "-". */
std::vector<std::string> segments(const std::string &prefix)
{
    std::vector<std::string> out;
    unsigned                 count;
    std::string              needle = prefix + "-";
    char                   **names  = axon_test_list_shm(needle.c_str(), &count);

    for (unsigned i = 0; i < count; ++i) {
        if (strncmp(names[i], needle.c_str(), needle.size()) == 0) {
            out.push_back(names[i]);
        }
    }
    axon_test_names_free(names, count);
    return out;
}

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

/* ---------------------------------------------------------------- segments */

TEST(Shm, SegmentIsPrivateAndNamed)
{
    std::string      prefix = test_prefix("mode");
    axon_config_kv_t kv[]   = {{"SHM_PREFIX", prefix.c_str()}};
    Cleanup          c;

    ASSERT_EQ(AXON_OK, axon_test_node_create(&c.node, "shm", kv, 1));
    std::vector<std::string> segs = segments(prefix);
    ASSERT_EQ(1u, segs.size());
    /* <prefix>-<uid>-<pid>-<n>: the pid tells whose it is. */
    std::string pid_part = "-" + std::to_string(geteuid()) + "-" + std::to_string(getpid()) + "-";
    EXPECT_NE(std::string::npos, segs[0].find(pid_part)) << segs[0];

    struct stat st;
    ASSERT_EQ(0, stat(("/dev/shm/" + segs[0]).c_str(), &st));
    EXPECT_EQ(0600u, st.st_mode & 07777) << "segment " << segs[0] << " is not private";
    EXPECT_EQ(geteuid(), st.st_uid);
    EXPECT_GT(st.st_size, 0);
}

TEST(Shm, DefaultPrefixNamesContainPid)
{
    Cleanup c;

    ASSERT_EQ(AXON_OK, axon_test_node_create(&c.node, "shm", NULL, 0));
    std::string mine = "axon-" + std::to_string(geteuid()) + "-" + std::to_string(getpid()) + "-";
    std::vector<std::string> segs = segments("axon-" + std::to_string(geteuid()) + "-" +
                                             std::to_string(getpid()));
    ASSERT_EQ(1u, segs.size()) << "expected one /dev/shm/" << mine << "*";
    struct stat st;
    ASSERT_EQ(0, stat(("/dev/shm/" + segs[0]).c_str(), &st));
    EXPECT_EQ(0600u, st.st_mode & 07777);
    axon_test_node_destroy(&c.node);
    EXPECT_EQ(0u, segments("axon-" + std::to_string(geteuid()) + "-" +
                           std::to_string(getpid())).size());
}

TEST(Shm, SegmentRemovedAtWorkerDestroy)
{
    std::string           prefix = test_prefix("life");
    axon_config_kv_t      kv[]   = {{"TLS", "shm"}, {"SHM_PREFIX", prefix.c_str()}};
    axon_context_params_t params = {AXON_FEATURE_TAG, kv, 2};
    axon_context_h        ctx;
    axon_worker_h         w1, w2;

    ASSERT_EQ(AXON_OK, axon_init(&params, &ctx));
    EXPECT_EQ(0u, segments(prefix).size()) << "a context alone needs no segment";
    ASSERT_EQ(AXON_OK, axon_worker_create(ctx, NULL, &w1));
    ASSERT_EQ(AXON_OK, axon_worker_create(ctx, NULL, &w2));
    std::vector<std::string> both = segments(prefix);
    EXPECT_EQ(2u, both.size()) << "one segment per worker";

    axon_worker_destroy(w1);
    std::vector<std::string> left = segments(prefix);
    EXPECT_EQ(1u, left.size());
    axon_worker_destroy(w2);
    EXPECT_EQ(0u, segments(prefix).size()) << "segments outlived their workers";
    axon_cleanup(ctx);
}

/* Child: build a worker, report, wait, then leave through exit(0) without cleanup. */
int exit_without_cleanup_main(int fd, void *arg)
{
    const char      *prefix = static_cast<const char *>(arg);
    axon_config_kv_t kv[]   = {{"SHM_PREFIX", prefix}};
    axon_test_node_t node;
    int              ok = 1;

    if (axon_test_node_create(&node, "shm", kv, 1) != AXON_OK) {
        return 2;
    }
    if ((axon_test_send_blob(fd, &ok, sizeof(ok)) != 0) || (axon_test_sync(fd) != 0)) {
        axon_test_node_destroy(&node);
        return 3;
    }
    fflush(NULL);
    exit(0);  /* atexit handlers run; the worker is never destroyed */
}

TEST(ShmXproc, ExitWithoutDestroyLeavesNoSegment)
{
    std::string prefix = test_prefix("exit");
    Cleanup     c;
    void       *blob;
    size_t      len;

    ASSERT_EQ(0, axon_test_peer_spawn(&c.peer, exit_without_cleanup_main,
                                      const_cast<char *>(prefix.c_str()), kPeerTimeout));
    ASSERT_EQ(0, axon_test_recv_blob(c.peer.fd, &blob, &len));
    free(blob);
    std::vector<std::string> segs = segments(prefix);
    ASSERT_EQ(1u, segs.size()) << "the child's worker has no segment";
    EXPECT_NE(std::string::npos, segs[0].find("-" + std::to_string(c.peer.pid) + "-"))
        << segs[0] << " does not name the child's pid " << c.peer.pid;
    ASSERT_EQ(0, axon_test_sync(c.peer.fd));
    EXPECT_EQ(0, axon_test_peer_wait(&c.peer, kPeerTimeout));
    EXPECT_EQ(0u, segments(prefix).size()) << "exit(0) left " << segs[0] << " behind";
}

int fork_child_exits_main(int fd, void *arg);

/* A child with two workers (two rings) under the test's prefix, until told to go. */
int two_rings_main(int fd, void *arg)
{
    axon_config_kv_t kv[] = {{"SHM_PREFIX", static_cast<const char *>(arg)}};
    NodeGuard        a, b;

    if ((axon_test_node_create(&a.node, "shm", kv, 1) != AXON_OK) ||
        (axon_test_node_create(&b.node, "shm", kv, 1) != AXON_OK)) {
        return 2;
    }
    return (axon_test_sync(fd) == 0) && (axon_test_sync(fd) == 0) ? 0 : 3;
}

/*
 * shm counts the processes of Axon on the host by the living owners of ring
 * segments under its prefix (the idle policy's crowded host): a process with
 * two rings once, a dead process's leftover segment and another prefix's
 * segments not at all.
 */
TEST(ShmXproc, ProcessesAreCountedByTheirRings)
{
    std::string      prefix = test_prefix("count");
    std::string      other  = test_prefix("other");
    axon_config_kv_t kv[]   = {{"SHM_PREFIX", prefix.c_str()}};
    axon_config_kv_t kv2[]  = {{"SHM_PREFIX", other.c_str()}};
    axon_test_node_t mine2  = {};
    Cleanup          c;

    ASSERT_EQ(AXON_OK, axon_test_node_create(&c.node, "shm", kv, 1));
    std::vector<std::string> segs = segments(prefix);
    ASSERT_EQ(1u, segs.size());
    std::string name = "/" + segs[0];
    EXPECT_EQ(1u, axon_shm_seg_count_procs(name.c_str()));

    /* A segment named for a process that is gone (a reaped child's pid). */
    axon_test_peer_t gone = {-1, -1};
    ASSERT_EQ(0, axon_test_peer_spawn(&gone, fork_child_exits_main, nullptr, kPeerTimeout));
    pid_t gone_pid = gone.pid;
    EXPECT_EQ(0, axon_test_peer_wait(&gone, kPeerTimeout));
    std::string leftover = "/dev/shm/" + prefix + "-" + std::to_string(geteuid()) + "-" +
                           std::to_string(gone_pid) + "-0";
    int fd = open(leftover.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);
    ASSERT_GE(fd, 0) << leftover;
    close(fd);
    /* And a second process under another prefix. */
    ASSERT_EQ(AXON_OK, axon_test_node_create(&mine2, "shm", kv2, 1));

    ASSERT_EQ(0, axon_test_peer_spawn(&c.peer, two_rings_main,
                                      const_cast<char *>(prefix.c_str()), kPeerTimeout));
    ASSERT_EQ(0, axon_test_sync(c.peer.fd));
    EXPECT_EQ(2u, axon_shm_seg_count_procs(name.c_str()))
        << "this process and the child with two rings";
    ASSERT_EQ(0, axon_test_sync(c.peer.fd));
    EXPECT_EQ(0, axon_test_peer_wait(&c.peer, kPeerTimeout));
    EXPECT_EQ(1u, axon_shm_seg_count_procs(name.c_str())) << "the child is gone";

    unlink(leftover.c_str());
    axon_test_node_destroy(&mine2);
}

/* A forked child of a process with a worker must not unlink the parent's segment. */
int fork_child_exits_main(int fd, void *arg)
{
    exit(0);
}

TEST(ShmXproc, ForkedChildKeepsParentSegment)
{
    std::string      prefix = test_prefix("fork");
    axon_config_kv_t kv[]   = {{"SHM_PREFIX", prefix.c_str()}};
    Cleanup          c;

    ASSERT_EQ(AXON_OK, axon_test_node_create(&c.node, "shm", kv, 1));
    ASSERT_EQ(1u, segments(prefix).size());
    ASSERT_EQ(0, axon_test_peer_spawn(&c.peer, fork_child_exits_main, NULL, kPeerTimeout));
    EXPECT_EQ(0, axon_test_peer_wait(&c.peer, kPeerTimeout));
    EXPECT_EQ(1u, segments(prefix).size()) << "the child's exit unlinked our segment";
    axon_test_node_destroy(&c.node);
    EXPECT_EQ(0u, segments(prefix).size());
}

/* ---------------------------------------------------------------- bad configuration */

struct BadShmConfig {
    const char *label;
    const char *name;
    const char *value;
};

std::ostream &operator<<(std::ostream &os, const BadShmConfig &p)
{
    return os << p.name << "=" << p.value;
}

class ShmBadConfig : public ::testing::TestWithParam<BadShmConfig> {};

TEST_P(ShmBadConfig, FailsCleanly)
{
    const BadShmConfig   &bad = GetParam();
    std::string           before_pid = "-" + std::to_string(getpid()) + "-";
    unsigned              before, after;
    axon_config_kv_t      kv[]   = {{"TLS", "shm"}, {bad.name, bad.value}};
    axon_context_params_t params = {AXON_FEATURE_TAG, kv, 2};
    axon_context_h        ctx    = nullptr;
    axon_worker_h         worker = nullptr;
    axon_status_t         status;

    char **names = axon_test_list_shm(before_pid.c_str(), &before);
    axon_test_names_free(names, before);
    ASSERT_EQ(0, axon_test_stderr_capture_begin());
    status = axon_init(&params, &ctx);
    if (status == AXON_OK) {
        status = axon_worker_create(ctx, NULL, &worker);
    }
    char *text = axon_test_stderr_capture_end();
    ASSERT_NE(nullptr, text);
    std::string log(text);
    free(text);

    EXPECT_EQ(AXON_ERR_INVALID_PARAM, status) << axon_status_string(status);
    /* The error says which variable and which value. */
    EXPECT_NE(std::string::npos, log.find(bad.name)) << log;
    EXPECT_NE(std::string::npos, log.find(bad.value)) << log;
    if (worker != nullptr) {
        axon_worker_destroy(worker);
    }
    if (ctx != nullptr) {
        axon_cleanup(ctx);
    }
    names = axon_test_list_shm(before_pid.c_str(), &after);
    axon_test_names_free(names, after);
    EXPECT_EQ(before, after) << "a failed set-up left a segment behind";
}

const BadShmConfig kBadShmConfigs[] = {
    {"fifo_3",        "SHM_FIFO_SIZE", "3"},
    {"fifo_0",        "SHM_FIFO_SIZE", "0"},
    {"fifo_1",        "SHM_FIFO_SIZE", "1"},
    {"fifo_text",     "SHM_FIFO_SIZE", "many"},
    {"cell_100",      "SHM_CELL_SIZE", "100"},
    {"cell_64",       "SHM_CELL_SIZE", "64"},
    {"cell_text",     "SHM_CELL_SIZE", "banana"},
    {"burst_0",       "SHM_RX_BURST",  "0"},
    {"prefix_slash",  "SHM_PREFIX",    "a/b"},
    {"prefix_long",   "SHM_PREFIX",    "a_prefix_far_too_long_for_a_segment_name_0123456789"},
};

INSTANTIATE_TEST_SUITE_P(Values, ShmBadConfig, ::testing::ValuesIn(kBadShmConfigs),
                         [](const ::testing::TestParamInfo<BadShmConfig> &info) {
                             return std::string(info.param.label);
                         });

/* ---------------------------------------------------------------- back-pressure */

const unsigned kSmallFifo = 16;

struct PressureArgs {
    int    count;
    size_t size;  /* of every message */
};

/* Sender: post everything at once into a ring nobody drains. */
int pressure_sender_main(int fd, void *arg)
{
    const PressureArgs *pa   = static_cast<const PressureArgs *>(arg);
    axon_config_kv_t    kv[] = {{"SHM_FIFO_SIZE", "16"}};
    NodeGuard           ng;
    axon_test_node_t   &node = ng.node;
    axon_ep_h           ep;
    void               *peer_addr;
    size_t              peer_len;
    int                 pending = 0, done_early = 0;

    if (axon_test_node_create(&node, "shm", kv, 1) != AXON_OK) {
        return 2;
    }
    if ((axon_test_exchange_address(fd, node.address, node.address_length, &peer_addr,
                                    &peer_len) != 0) ||
        (axon_test_ep_create(node.worker, peer_addr, peer_len, &ep) != AXON_OK)) {
        return 3;
    }
    free(peer_addr);

    std::vector<std::vector<uint8_t>> bufs(pa->count, std::vector<uint8_t>(pa->size));
    std::vector<axon_request_h>       reqs(pa->count, nullptr);
    std::vector<axon_status_t>        st(pa->count);
    for (int i = 0; i < pa->count; ++i) {
        axon_test_fill(bufs[i].data(), pa->size, i);
        st[i] = axon_tag_send_nb(ep, bufs[i].data(), pa->size, 5, NULL, &reqs[i]);
        if ((st[i] != AXON_OK) && (st[i] != AXON_INPROGRESS)) {
            fprintf(stderr, "send %d: %s\n", i, axon_status_string(st[i]));
            return 4;
        }
        pending += (st[i] == AXON_INPROGRESS);
    }
    /* Our own progress cannot drain the peer's ring: pending sends stay pending. */
    axon_test_progress_for(node.worker, 0.05);
    for (int i = 0; i < pa->count; ++i) {
        if ((st[i] == AXON_INPROGRESS) && (axon_request_test(reqs[i], NULL) != AXON_INPROGRESS)) {
            ++done_early;
        }
    }
    int report[2] = {pending, done_early};
    if (axon_test_send_blob(fd, report, sizeof(report)) != 0) {
        return 5;
    }
    for (int i = 0; i < pa->count; ++i) {
        axon_status_t status = axon_test_wait_req(node.worker, st[i], reqs[i], NULL, kOpTimeout);
        if (status != AXON_OK) {
            fprintf(stderr, "send %d completed with %s\n", i, axon_status_string(status));
            return 6;
        }
    }
    if ((axon_test_ep_close(node.worker, ep, AXON_EP_CLOSE_FLUSH, kOpTimeout) != AXON_OK) ||
        (axon_test_sync_progress(fd, node.worker, kOpTimeout) != 0)) {
        return 7;
    }
    return 0;
}

class ShmBackPressureXproc : public ::testing::TestWithParam<PressureArgs> {};

TEST_P(ShmBackPressureXproc, SendsWaitThenArriveInOrder)
{
    PressureArgs     pa   = GetParam();
    axon_config_kv_t kv[] = {{"SHM_FIFO_SIZE", "16"}};
    Cleanup          c;
    void            *blob;
    size_t           len;

    ASSERT_EQ(0, axon_test_peer_spawn(&c.peer, pressure_sender_main, &pa, kPeerTimeout));
    ASSERT_EQ(AXON_OK, axon_test_node_create(&c.node, "shm", kv, 1));
    ASSERT_EQ(0, axon_test_exchange_address(c.peer.fd, c.node.address, c.node.address_length,
                                            &blob, &len));
    free(blob);

    /* Not progressing: the sender fills our ring and must hold the rest. */
    ASSERT_EQ(0, axon_test_recv_blob(c.peer.fd, &blob, &len));
    ASSERT_EQ(2 * sizeof(int), len);
    int report[2];
    memcpy(report, blob, sizeof(report));
    free(blob);
    EXPECT_GE(report[0], pa.count - (int)kSmallFifo) << "sends that had to wait";
    EXPECT_EQ(0, report[1]) << "sends completed while the ring was full";

    std::vector<uint8_t> buf(pa.size + 64), expect(pa.size);
    for (int i = 0; i < pa.count; ++i) {
        axon_tag_recv_info_t info;
        ASSERT_EQ(AXON_OK, axon_test_recv(c.node.worker, buf.data(), buf.size(), 5,
                                          AXON_TAG_MASK_FULL, &info, kOpTimeout)) << i;
        ASSERT_EQ(pa.size, info.length);
        axon_test_fill(expect.data(), pa.size, i);
        ASSERT_EQ(0, memcmp(expect.data(), buf.data(), pa.size)) << "message " << i;
    }
    EXPECT_EQ(0, axon_test_sync_progress(c.peer.fd, c.node.worker, kOpTimeout));
    EXPECT_EQ(0, axon_test_peer_wait(&c.peer, kPeerTimeout));
}

const PressureArgs kPressure[] = {
    {200, 64},      /* short messages, one cell each */
    {100, 3000},    /* bcopy, one cell each */
    {40, 40000},    /* several cells each: a message stalls half-way */
};

INSTANTIATE_TEST_SUITE_P(Sizes, ShmBackPressureXproc, ::testing::ValuesIn(kPressure),
                         [](const ::testing::TestParamInfo<PressureArgs> &info) {
                             return "size_" + std::to_string(info.param.size);
                         });

/* ---------------------------------------------------------------- peers' addresses */

/* Child: a worker with the cell size given, which sends its address and echoes. */
int cell_peer_main(int fd, void *arg)
{
    const char       *cell = static_cast<const char *>(arg);
    /* Eager only: a rendezvous needs our peer's answer, which its cells cannot
     * carry to us, and "auto" would pick one below 20000 bytes on a loaded host. */
    axon_config_kv_t  kv[] = {{"SHM_CELL_SIZE", cell}, {"RNDV_THRESH", "1M"}};
    NodeGuard         ng;
    axon_test_node_t &node = ng.node;
    axon_ep_h         ep;
    void            *peer_addr;
    size_t           peer_len;
    std::vector<uint8_t> buf(20000);

    if (axon_test_node_create(&node, "shm", kv, 2) != AXON_OK) {
        return 2;
    }
    if ((axon_test_exchange_address(fd, node.address, node.address_length, &peer_addr,
                                    &peer_len) != 0) ||
        (axon_test_ep_create(node.worker, peer_addr, peer_len, &ep) != AXON_OK)) {
        return 3;
    }
    free(peer_addr);
    /* Small cells reach big cells: our messages fit theirs. */
    axon_test_fill(buf.data(), buf.size(), 77);
    if (axon_test_send(node.worker, ep, buf.data(), buf.size(), 1, kOpTimeout) != AXON_OK) {
        return 4;
    }
    if ((axon_test_ep_close(node.worker, ep, AXON_EP_CLOSE_FLUSH, kOpTimeout) != AXON_OK) ||
        (axon_test_sync_progress(fd, node.worker, kOpTimeout) != 0)) {
        return 5;
    }
    return 0;
}

TEST(ShmXproc, SmallerPeerCellsAreUnreachable)
{
    Cleanup c;
    void   *addr;
    size_t  len;

    ASSERT_EQ(0, axon_test_peer_spawn(&c.peer, cell_peer_main, (void *)"1k", kPeerTimeout));
    ASSERT_EQ(AXON_OK, axon_test_node_create(&c.node, "shm", NULL, 0));  /* 8k cells */
    ASSERT_EQ(0, axon_test_exchange_address(c.peer.fd, c.node.address, c.node.address_length,
                                            &addr, &len));
    axon_ep_h ep = nullptr;
    ASSERT_EQ(0, axon_test_stderr_capture_begin());
    axon_status_t status = axon_test_ep_create(c.node.worker, addr, len, &ep);
    char *text = axon_test_stderr_capture_end();
    free(addr);
    EXPECT_EQ(AXON_ERR_UNREACHABLE, status) << "our 8k cells do not fit the peer's 1k cells";
    if (status == AXON_OK) {
        axon_test_ep_close(c.node.worker, ep, AXON_EP_CLOSE_FORCE, kOpTimeout);
    }
    free(text);

    std::vector<uint8_t>  buf(20000), expect(20000);
    axon_tag_recv_info_t  info;
    ASSERT_EQ(AXON_OK, axon_test_recv(c.node.worker, buf.data(), buf.size(), 1,
                                      AXON_TAG_MASK_FULL, &info, kOpTimeout));
    EXPECT_EQ(20000u, info.length);
    axon_test_fill(expect.data(), expect.size(), 77);
    EXPECT_EQ(0, memcmp(expect.data(), buf.data(), buf.size()));
    EXPECT_EQ(0, axon_test_sync_progress(c.peer.fd, c.node.worker, kOpTimeout));
    EXPECT_EQ(0, axon_test_peer_wait(&c.peer, kPeerTimeout));
}

/* Tag and length of the message a vanishing peer may send before it goes. */
const axon_tag_t kLastWordTag = 5;
const size_t     kLastWordLen = 64;

/*
 * Child: a worker that gives out its address and is gone before anyone
 * connects; with a non-NULL arg it first sends one message to the test
 * process (and closes its endpoint).
 */
int vanishing_peer_main(int fd, void *arg)
{
    axon_test_node_t node;
    void            *peer_addr;
    size_t           peer_len;
    axon_ep_h        ep = nullptr;
    uint8_t          msg[kLastWordLen];
    int              ret = 0;

    if (axon_test_node_create(&node, "shm", NULL, 0) != AXON_OK) {
        return 2;
    }
    if (axon_test_exchange_address(fd, node.address, node.address_length, &peer_addr,
                                   &peer_len) != 0) {
        axon_test_node_destroy(&node);
        return 3;
    }
    axon_test_fill(msg, sizeof(msg), 91);
    if ((arg != NULL) &&
        ((axon_test_ep_create(node.worker, peer_addr, peer_len, &ep) != AXON_OK) ||
         (axon_test_send(node.worker, ep, msg, sizeof(msg), kLastWordTag, kOpTimeout) != AXON_OK) ||
         (axon_test_ep_close(node.worker, ep, AXON_EP_CLOSE_FLUSH, kOpTimeout) != AXON_OK))) {
        ret = 4;
    }
    free(peer_addr);
    axon_test_node_destroy(&node);
    return ((axon_test_sync(fd) == 0) && (ret == 0)) ? 0 : 5;
}

/* Our node, and the address of a vanishing peer that has exited by the time this returns. */
void start_with_vanished_peer(Cleanup &c, bool last_word, void **addr, size_t *len)
{
    ASSERT_EQ(0, axon_test_peer_spawn(&c.peer, vanishing_peer_main,
                                      last_word ? &c : NULL, kPeerTimeout));
    ASSERT_EQ(AXON_OK, axon_test_node_create(&c.node, "shm", NULL, 0));
    ASSERT_EQ(0, axon_test_exchange_address(c.peer.fd, c.node.address, c.node.address_length,
                                            addr, len));
    ASSERT_EQ(0, axon_test_sync(c.peer.fd));  /* its worker is destroyed by now */
    ASSERT_EQ(0, axon_test_peer_wait(&c.peer, kPeerTimeout));
}

TEST(ShmXproc, PeerGoneBeforeConnect)
{
    Cleanup c;
    void   *addr = nullptr;
    size_t  len;

    start_with_vanished_peer(c, false, &addr, &len);
    if (HasFatalFailure()) {
        free(addr);
        return;
    }

    axon_ep_h ep = nullptr;
    ASSERT_EQ(0, axon_test_stderr_capture_begin());
    axon_status_t status = axon_test_ep_create(c.node.worker, addr, len, &ep);
    char *text = axon_test_stderr_capture_end();
    free(addr);
    EXPECT_EQ(AXON_ERR_UNREACHABLE, status) << axon_status_string(status);
    EXPECT_NE(nullptr, strstr(text, "axon-")) << "the error should name the segment: " << text;
    free(text);
    if (status == AXON_OK) {
        axon_test_ep_close(c.node.worker, ep, AXON_EP_CLOSE_FORCE, kOpTimeout);
    }
}

/*
 * A message from a worker that exited before it was read is delivered, and
 * the receiver's attempt to reach back (the endpoint it makes to answer and
 * to watch the sender) is no error: MPI jobs end this way all the time.
 */
TEST(ShmXproc, MessageFromExitedPeerIsReceivedQuietly)
{
    Cleanup c;
    void   *addr = nullptr;
    size_t  len;

    start_with_vanished_peer(c, true, &addr, &len);
    free(addr);
    ASSERT_FALSE(HasFatalFailure());

    uint8_t              buf[kLastWordLen], expect[kLastWordLen];
    axon_tag_recv_info_t info;
    ASSERT_EQ(0, axon_test_stderr_capture_begin());
    axon_status_t status = axon_test_recv(c.node.worker, buf, sizeof(buf), kLastWordTag,
                                          AXON_TAG_MASK_FULL, &info, kOpTimeout);
    axon_test_progress_for(c.node.worker, 0.05);
    char *text = axon_test_stderr_capture_end();
    ASSERT_NE(nullptr, text);
    std::string log(text);
    free(text);
    ASSERT_EQ(AXON_OK, status) << axon_status_string(status);
    axon_test_fill(expect, sizeof(expect), 91);
    EXPECT_EQ(sizeof(buf), info.length);
    EXPECT_EQ(0, memcmp(expect, buf, sizeof(buf)));
    EXPECT_EQ(std::string::npos, log.find(" ERROR ")) << log;
    EXPECT_EQ(std::string::npos, log.find(" WARN ")) << log;
}

}  // namespace

/* ---------------------------------------------------------------- split rendezvous */

namespace {

/*
 * Large messages over shm are copied half by the receiver (CMA get) and half
 * by the sender (CMA put). A side whose transport may not use CMA makes the
 * other fall back: a sender without put sends its half as data, a receiver
 * without get asks for everything. Every byte must arrive either way.
 */
struct SplitArgs {
    const char *sender_cma;    /* AXON_SHM_CMA of the sending child */
    const char *receiver_cma;  /* and of the receiving test process */
};

const size_t kSplitSizes[] = {256 * 1024, 1024 * 1024 + 13, 3 * 1024 * 1024 + 1,
                              600 * 1024 + 7 /* received into a 300 KiB buffer */};
const size_t kSplitShortRecv = 300 * 1024;

int split_sender_main(int fd, void *arg)
{
    const SplitArgs  *sa   = static_cast<const SplitArgs *>(arg);
    axon_config_kv_t  kv[] = {{"SHM_CMA", sa->sender_cma}, {"RNDV_SCHEME", "get"}};
    NodeGuard         ng;
    axon_test_node_t &node = ng.node;
    axon_ep_h         ep;
    void             *peer_addr;
    size_t            peer_len;

    if (axon_test_node_create(&node, "shm", kv, 2) != AXON_OK) {
        return 2;
    }
    if ((axon_test_exchange_address(fd, node.address, node.address_length, &peer_addr,
                                    &peer_len) != 0) ||
        (axon_test_ep_create(node.worker, peer_addr, peer_len, &ep) != AXON_OK)) {
        return 3;
    }
    free(peer_addr);
    for (size_t i = 0; i < sizeof(kSplitSizes) / sizeof(kSplitSizes[0]); ++i) {
        std::vector<uint8_t> buf(kSplitSizes[i]);
        axon_test_fill(buf.data(), buf.size(), 100 + i);
        if (axon_test_send(node.worker, ep, buf.data(), buf.size(), 9, kOpTimeout) != AXON_OK) {
            fprintf(stderr, "split send of %zu bytes failed\n", buf.size());
            return 4;
        }
        /* The send completed: the receiver no longer reads this buffer. */
        memset(buf.data(), 0xee, buf.size());
    }
    if ((axon_test_ep_close(node.worker, ep, AXON_EP_CLOSE_FLUSH, kOpTimeout) != AXON_OK) ||
        (axon_test_sync_progress(fd, node.worker, kOpTimeout) != 0)) {
        return 5;
    }
    return 0;
}

class ShmSplitRndvXproc : public ::testing::TestWithParam<SplitArgs> {};

TEST_P(ShmSplitRndvXproc, EveryByteArrives)
{
    SplitArgs        sa   = GetParam();
    axon_config_kv_t kv[] = {{"SHM_CMA", sa.receiver_cma}, {"RNDV_SCHEME", "get"}};
    Cleanup          c;
    void            *blob;
    size_t           len;
    const size_t     count = sizeof(kSplitSizes) / sizeof(kSplitSizes[0]);

    ASSERT_EQ(0, axon_test_peer_spawn(&c.peer, split_sender_main, &sa, kPeerTimeout));
    ASSERT_EQ(AXON_OK, axon_test_node_create(&c.node, "shm", kv, 2));
    ASSERT_EQ(0, axon_test_exchange_address(c.peer.fd, c.node.address, c.node.address_length,
                                            &blob, &len));
    free(blob);

    for (size_t i = 0; i < count; ++i) {
        size_t size = kSplitSizes[i];
        size_t room = (i == count - 1) ? kSplitShortRecv : size;
        std::vector<uint8_t> buf(room + 64, 0x5a), expect(size);
        axon_tag_recv_info_t info;

        axon_test_fill(expect.data(), size, 100 + i);
        axon_status_t status = axon_test_recv(c.node.worker, buf.data(), room, 9,
                                              AXON_TAG_MASK_FULL, &info, kOpTimeout);
        EXPECT_EQ(size, info.length) << "message " << i;
        if (room < size) {
            EXPECT_EQ(AXON_ERR_MSG_TRUNCATED, status);
        } else {
            EXPECT_EQ(AXON_OK, status);
        }
        EXPECT_EQ(0, memcmp(expect.data(), buf.data(), room)) << "message " << i;
        for (size_t b = room; b < room + 64; ++b) {
            ASSERT_EQ(0x5a, buf[b]) << "written past the receive buffer, message " << i;
        }
    }
    EXPECT_EQ(0, axon_test_sync_progress(c.peer.fd, c.node.worker, kOpTimeout));
    EXPECT_EQ(0, axon_test_peer_wait(&c.peer, kPeerTimeout));
}

const SplitArgs kSplit[] = {
    {"y", "y"},  /* split: both copy */
    {"n", "y"},  /* sender may not put: its half comes as data */
    {"y", "n"},  /* receiver may not get: the whole message comes as data */
};

INSTANTIATE_TEST_SUITE_P(Cma, ShmSplitRndvXproc, ::testing::ValuesIn(kSplit),
                         [](const ::testing::TestParamInfo<SplitArgs> &info) {
                             return std::string("sender_") +
                                    (info.param.sender_cma[0] == 'y' ? "cma" : "nocma") +
                                    "_receiver_" +
                                    (info.param.receiver_cma[0] == 'y' ? "cma" : "nocma");
                         });

} // namespace

/* ---------------------------------------------------------------- crowded host */

/*
 * Rendezvous on a crowded host (api/tag/rndv.c, axon_rndv_get_pays):
 * with more processes of Axon than cores, all runnable, the receiver
 * reads a large message by one get, which needs no time slice of the
 * sender's, whatever the copy-cost model says (on a machine where two
 * memcpys beat process_vm_readv it streams otherwise), and does not split
 * it with the sender either.
 */

namespace {

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

/* The sender: a warm-up message, then kBig sent and left alone for kSenderAway. */
int away_sender_main(int fd, void *arg)
{
    axon_config_kv_t  kv[] = {{"SHM_PREFIX", static_cast<const char *>(arg)}};
    NodeGuard         ng;
    axon_test_node_t &node = ng.node;
    axon_request_h    req  = nullptr;
    axon_ep_h         ep;
    char              hello = 'h';

    if (axon_test_node_create(&node, "shm", kv, 1) != AXON_OK) {
        return 2;
    }
    if (axon_test_connect_peer(fd, &node, &ep) != 0) {
        return 3;
    }
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
