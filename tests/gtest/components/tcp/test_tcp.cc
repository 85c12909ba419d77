/*
 * tcp connection sharing: two workers that send to each other use one TCP
 * connection, whichever connected first or both at once; a goodbye ends
 * only the direction of the ep that was destroyed; a peer killed on a
 * shared connection fails the ep that uses it.
 *
 * Connections are counted from outside the transport: our descriptors'
 * ESTABLISHED TCP sockets whose other end (a sock_diag lookup) is
 * established and held by the peer.
 */
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <set>
#include <string>
#include <vector>

#include "axon.h"
#include "harness.h"

namespace {

const double     kOpTimeout   = 30.0;
const double     kPeerTimeout = 60.0;
const axon_tag_t kTagData     = 0x7001;
const axon_tag_t kTagReply    = 0x7002;
const int        kMessages    = 200;

/* Inodes of the sockets process pid holds. */
std::set<unsigned long> socket_inodes(pid_t pid)
{
    std::set<unsigned long> inodes;
    char                    dir_path[64], path[330], link[64];
    struct dirent          *de;
    DIR                    *dir;

    snprintf(dir_path, sizeof(dir_path), "/proc/%d/fd", (int)pid);
    dir = opendir(dir_path);
    if (dir == NULL) {
        return inodes;
    }
    while ((de = readdir(dir)) != NULL) {
        unsigned long ino;
        ssize_t       n;

        snprintf(path, sizeof(path), "%s/%s", dir_path, de->d_name);
        n = readlink(path, link, sizeof(link) - 1);
        if (n <= 0) {
            continue;
        }
        link[n] = '\0';
        if (sscanf(link, "socket:[%lu]", &ino) == 1) {
            inodes.insert(ino);
        }
    }
    closedir(dir);
    return inodes;
}

/* One end of a TCP connection: its addresses, TCP state and, when it is held, its inode. */
struct TcpEnd {
    struct sockaddr_in local  = {};
    struct sockaddr_in remote = {};
    int                state  = -1;   /* TCP_ESTABLISHED, ...; -1: no such socket */
    unsigned long      ino    = 0;    /* 0: held by no descriptor (not accepted yet) */
};

/*
 * The IPv4 TCP sockets of this process, asked of each descriptor: exact. A
 * scan of /proc/net/tcp is not: its reads resume by position, so a socket
 * shows twice, or not at all, when other sockets come and go meanwhile
 * (other tests of the run, TIME_WAIT entries leaving).
 */
std::vector<TcpEnd> my_tcp_sockets()
{
    std::vector<TcpEnd> ends;
    struct dirent      *de;
    DIR                *dir = opendir("/proc/self/fd");

    if (dir == NULL) {
        return ends;
    }
    while ((de = readdir(dir)) != NULL) {
        TcpEnd          end;
        struct tcp_info info   = {};
        struct stat     st;
        socklen_t       len;
        int             fd     = atoi(de->d_name), domain = 0, proto = 0;

        len = sizeof(domain);
        if ((de->d_name[0] == '.') || (fd == dirfd(dir)) || (fstat(fd, &st) != 0) ||
            !S_ISSOCK(st.st_mode) ||
            (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0) || (domain != AF_INET)) {
            continue;
        }
        len = sizeof(proto);
        if ((getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len) != 0) ||
            (proto != IPPROTO_TCP)) {
            continue;
        }
        len = sizeof(info);
        if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) {
            continue;
        }
        end.state = info.tcpi_state;
        end.ino   = st.st_ino;
        len       = sizeof(end.local);
        getsockname(fd, (struct sockaddr *)&end.local, &len);
        len = sizeof(end.remote);
        getpeername(fd, (struct sockaddr *)&end.remote, &len);   /* none for a listener */
        ends.push_back(end);
    }
    closedir(dir);
    return ends;
}

/*
 * The other end of mine (on this host), looked up by its addresses with
 * sock_diag: one socket, answered at once. No such socket: state -1; the
 * lookup falls back on a listener of that port, which says TCP_LISTEN.
 */
TcpEnd other_end(const TcpEnd &mine)
{
    struct {
        struct nlmsghdr         nlh;
        struct inet_diag_req_v2 req;
    } msg;
    union {
        struct nlmsghdr nlh;
        char            bytes[8192];
    } answer;
    TcpEnd  end;
    ssize_t n;
    int     fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);

    end.local  = mine.remote;
    end.remote = mine.local;
    if (fd < 0) {
        ADD_FAILURE() << "no sock_diag socket: " << strerror(errno);
        return end;
    }
    memset(&msg, 0, sizeof(msg));
    msg.nlh.nlmsg_len          = sizeof(msg);
    msg.nlh.nlmsg_type         = SOCK_DIAG_BY_FAMILY;
    msg.nlh.nlmsg_flags        = NLM_F_REQUEST;
    msg.req.sdiag_family       = AF_INET;
    msg.req.sdiag_protocol     = IPPROTO_TCP;
    msg.req.idiag_states       = ~0u;
    msg.req.id.idiag_sport     = end.local.sin_port;
    msg.req.id.idiag_dport     = end.remote.sin_port;
    msg.req.id.idiag_src[0]    = end.local.sin_addr.s_addr;
    msg.req.id.idiag_dst[0]    = end.remote.sin_addr.s_addr;
    msg.req.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
    msg.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    if ((send(fd, &msg, sizeof(msg), 0) == (ssize_t)sizeof(msg)) &&
        ((n = recv(fd, &answer, sizeof(answer), 0)) > 0) && NLMSG_OK(&answer.nlh, (size_t)n)) {
        if (answer.nlh.nlmsg_type == SOCK_DIAG_BY_FAMILY) {
            const auto *diag = (const struct inet_diag_msg *)NLMSG_DATA(&answer.nlh);
            end.state = diag->idiag_state;
            end.ino   = diag->idiag_inode;
        } else if ((answer.nlh.nlmsg_type != NLMSG_ERROR) ||
                   (((const struct nlmsgerr *)NLMSG_DATA(&answer.nlh))->error != -ENOENT)) {
            ADD_FAILURE() << "unexpected sock_diag answer, type " << answer.nlh.nlmsg_type;
        }
    } else {
        ADD_FAILURE() << "sock_diag lookup failed: " << strerror(errno);
    }
    close(fd);
    return end;
}

/*
 * ESTABLISHED IPv4 TCP connections between this process and process other:
 * both ends established, ours held by us, theirs by other. Only those: another
 * test of the same run may connect to our listener (a stale address whose
 * port we reuse), and that is not ours.
 */
int established_tcp(pid_t other)
{
    std::set<unsigned long> theirs = socket_inodes(other);
    int                     count  = 0;

    for (const TcpEnd &mine : my_tcp_sockets()) {
        if (mine.state != TCP_ESTABLISHED) {
            continue;
        }
        TcpEnd end = other_end(mine);
        count += ((end.state == TCP_ESTABLISHED) && theirs.count(end.ino)) ? 1 : 0;
    }
    return count;
}

const char *tcp_state_name(int state)
{
    static const char *const names[] = {"?", "ESTABLISHED", "SYN_SENT", "SYN_RECV", "FIN_WAIT1",
                                        "FIN_WAIT2", "TIME_WAIT", "CLOSE", "CLOSE_WAIT",
                                        "LAST_ACK", "LISTEN", "CLOSING"};
    return ((state > 0) && (state < (int)(sizeof(names) / sizeof(names[0])))) ? names[state] :
                                                                                "none";
}

std::string sa_str(const struct sockaddr_in &sa)
{
    char ip[INET_ADDRSTRLEN] = "?";

    inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof(ip));
    return std::string(ip) + ":" + std::to_string(ntohs(sa.sin_port));
}

/* Our TCP sockets and their other ends, for a failure's message. */
std::string tcp_sockets(pid_t other)
{
    std::set<unsigned long> theirs = socket_inodes(other);
    std::string             out;

    for (const TcpEnd &mine : my_tcp_sockets()) {
        out += "\n  " + sa_str(mine.local) + " " + tcp_state_name(mine.state);
        if (mine.state == TCP_LISTEN) {
            continue;
        }
        TcpEnd end = other_end(mine);
        out += " -> " + sa_str(end.local) + " " + tcp_state_name(end.state) +
               (theirs.count(end.ino) ? " (the peer's)" : end.ino ? " (someone else's)" :
                                                                  " (no descriptor)");
    }
    return out;
}

struct ErrCount {
    int           calls  = 0;
    axon_status_t status = AXON_OK;
};

void err_cb(void *arg, axon_ep_h, axon_status_t status)
{
    ErrCount *e = static_cast<ErrCount *>(arg);
    e->calls++;
    e->status = status;
}

/* A tcp node and an endpoint to the other side, created right after the address exchange. */
struct Side {
    axon_test_node_t node = {};
    axon_ep_h        ep   = nullptr;
    ErrCount         err;
    void            *peer_addr = nullptr;
    size_t           peer_len  = 0;
    pid_t            other     = getppid();   /* the test sets its peer's pid */

    ~Side()
    {
        if (ep != nullptr) {
            axon_test_ep_close(node.worker, ep, AXON_EP_CLOSE_FORCE, kOpTimeout);
        }
        free(peer_addr);
        if (node.context != nullptr) {
            axon_test_node_destroy(&node);
        }
    }

    /* Small socket buffers (small_buffers) make large sends queue in the transport. One
     * rail: these tests count connections per peer, and a rail is one more per interface. */
    bool init(int fd, bool small_buffers = false)
    {
        static const axon_config_kv_t small[] = {{"MAX_RNDV_RAILS", "1"}, {"TCP_SNDBUF", "16K"},
                                                 {"TCP_RCVBUF", "16K"}};

        return (axon_test_node_create(&node, "tcp", small, small_buffers ? 3 : 1) == AXON_OK) &&
               (axon_test_exchange_address(fd, node.address, node.address_length, &peer_addr,
                                           &peer_len) == 0);
    }

    bool connect()
    {
        axon_ep_params_t params = {};

        params.address        = peer_addr;
        params.address_length = peer_len;
        params.err_cb         = err_cb;
        params.err_cb_arg     = &err;
        return axon_ep_create(node.worker, &params, &ep) == AXON_OK;
    }
};

/* Progress until s has want connections with the other process (a loser of a race closes late). */
int wait_connections(Side &s, int want, double timeout_sec)
{
    double deadline = axon_test_time() + timeout_sec;
    int    n        = established_tcp(s.other);

    while ((n != want) && (axon_test_time() < deadline)) {
        axon_test_progress_for(s.node.worker, 0.01);
        n = established_tcp(s.other);
    }
    return n;
}

/* Send seq numbers first..first+count-1, all posted before waiting for any. */
bool send_seqs(Side &s, axon_tag_t tag, uint64_t first, int count)
{
    std::vector<uint64_t>       bufs(count);
    std::vector<axon_request_h> reqs(count, nullptr);
    std::vector<axon_status_t>  sts(count);
    bool                        ok = true;

    for (int i = 0; i < count; ++i) {
        bufs[i] = first + i;
        sts[i]  = axon_tag_send_nb(s.ep, &bufs[i], sizeof(bufs[i]), tag, NULL, &reqs[i]);
    }
    for (int i = 0; i < count; ++i) {
        ok &= axon_test_wait_req(s.node.worker, sts[i], reqs[i], NULL, kOpTimeout) == AXON_OK;
    }
    return ok;
}

/* Receive count seq numbers in order, from first. */
bool recv_seqs(Side &s, axon_tag_t tag, uint64_t first, int count)
{
    for (int i = 0; i < count; ++i) {
        uint64_t v = ~0ull;
        if ((axon_test_recv(s.node.worker, &v, sizeof(v), tag, AXON_TAG_MASK_FULL, NULL,
                            kOpTimeout) != AXON_OK) || (v != first + i)) {
            fprintf(stderr, "message %d: got %llu, expected %llu\n", i, (unsigned long long)v,
                    (unsigned long long)(first + i));
            return false;
        }
    }
    return true;
}

/* Both directions with messages in flight, then a ping-pong; one connection at the end. */
bool exchange_both_ways(Side &s, int fd, bool first)
{
    if (!send_seqs(s, kTagData, 1000, kMessages) || !recv_seqs(s, kTagData, 1000, kMessages)) {
        return false;
    }
    for (int i = 0; i < 50; ++i) {
        uint64_t v = i;
        if (first) {
            if ((axon_test_send(s.node.worker, s.ep, &v, sizeof(v), kTagReply, kOpTimeout) !=
                 AXON_OK) || !recv_seqs(s, kTagReply, i, 1)) {
                return false;
            }
        } else if (!recv_seqs(s, kTagReply, i, 1) ||
                   (axon_test_send(s.node.worker, s.ep, &v, sizeof(v), kTagReply, kOpTimeout) !=
                    AXON_OK)) {
            return false;
        }
    }
    int n = wait_connections(s, 1, 5.0);
    if (n != 1) {
        fprintf(stderr, "%s: %d established connections, expected 1:%s\n",
                first ? "test" : "peer", n, tcp_sockets(s.other).c_str());
        return false;
    }
    /* Both are done counting before either closes. */
    return (axon_test_sync_progress(fd, s.node.worker, kOpTimeout) == 0) && (s.err.calls == 0);
}

/* ---------------------------------------------------------------- peers */

/*
 * Connects at the same time as the test (both create endpoints at once).
 * With a barrier before any progress both connections exist before either
 * HELLO leaves, so both HELLOs are out when each side reads the other's
 * (the lower worker id keeps its connection); without one, an ep whose
 * HELLO has not left moves onto the peer's connection.
 */
int both_at_once_main(int fd, void *arg)
{
    bool barrier = arg != NULL;
    Side s;

    if (!s.init(fd) || !s.connect() || (barrier && (axon_test_sync(fd) != 0))) {
        return 2;
    }
    return exchange_both_ways(s, fd, false) ? 0 : 3;
}

/* Waits for the test's connection to carry a message, then creates its endpoint. */
int second_main(int fd, void *)
{
    Side s;
    uint64_t v;

    if (!s.init(fd)) {
        return 2;
    }
    if ((axon_test_recv(s.node.worker, &v, sizeof(v), kTagReply, AXON_TAG_MASK_FULL, NULL,
                        kOpTimeout) != AXON_OK) || !s.connect()) {
        return 3;
    }
    return exchange_both_ways(s, fd, false) ? 0 : 4;
}

/*
 * Closes its endpoint (a goodbye on the shared connection) while the test
 * keeps sending on its own endpoint, then receives everything.
 */
int goodbye_main(int fd, void *)
{
    Side s;

    if (!s.init(fd) || !s.connect()) {
        return 2;
    }
    if (!send_seqs(s, kTagData, 0, 10) || !recv_seqs(s, kTagData, 0, 10) ||
        (wait_connections(s, 1, 5.0) != 1)) {
        return 3;
    }
    if (axon_test_sync_progress(fd, s.node.worker, kOpTimeout) != 0) {
        return 4;
    }
    /* The test starts streaming now; our half of the connection ends under it. */
    if (axon_test_ep_close(s.node.worker, s.ep, AXON_EP_CLOSE_FLUSH, kOpTimeout) != AXON_OK) {
        return 5;
    }
    s.ep = nullptr;
    if (!recv_seqs(s, kTagReply, 0, 5 * kMessages)) {
        return 6;
    }
    /* The test counts connections between the two barriers. */
    if ((axon_test_sync_progress(fd, s.node.worker, kOpTimeout) != 0) ||
        (axon_test_sync_progress(fd, s.node.worker, kOpTimeout) != 0)) {
        return 7;
    }
    return 0;
}

/* Streams to the test on the shared connection until it is killed. */
int stream_until_killed_main(int fd, void *)
{
    Side s;
    static char big[256 << 10];

    if (!s.init(fd) || !s.connect()) {
        return 2;
    }
    if (!send_seqs(s, kTagData, 0, 10) || !recv_seqs(s, kTagData, 0, 10) ||
        (wait_connections(s, 1, 5.0) != 1) ||
        (axon_test_sync_progress(fd, s.node.worker, kOpTimeout) != 0)) {
        return 3;
    }
    for (;;) {
        (void)axon_test_send(s.node.worker, s.ep, big, sizeof(big), kTagReply, kOpTimeout);
    }
}

/* Sizes that cover short, bcopy, and rendezvous (zero-copy) sends that fill the socket. */
size_t two_ep_size(int i)
{
    static const size_t sizes[] = {8, 4096, 100000, 300000, 64};
    return sizes[i % 5];
}

const int kTwoEpMessages = 20;

/*
 * Two eps on one connection stream at once (one's queued frame makes the
 * other wait): every message arrives whole and in order per ep.
 */
int two_eps_main(int fd, void *)
{
    Side                                 s;
    axon_ep_h                            ep2 = nullptr;
    axon_ep_params_t                     params = {};
    std::vector<std::vector<uint8_t>>    bufs;
    std::vector<axon_request_h>          reqs;
    std::vector<axon_status_t>           sts;
    bool                                 ok = true;

    if (!s.init(fd, true) || !s.connect() || !send_seqs(s, kTagData, 0, 1)) {
        return 2;
    }
    params.address        = s.peer_addr;
    params.address_length = s.peer_len;
    if (axon_ep_create(s.node.worker, &params, &ep2) != AXON_OK) {
        return 3;
    }
    for (int i = 0; i < kTwoEpMessages; ++i) {
        for (int e = 0; e < 2; ++e) {
            axon_request_h req = nullptr;
            bufs.emplace_back(two_ep_size(i + e));
            axon_test_fill(bufs.back().data(), bufs.back().size(), (uint64_t)(i * 2 + e));
            sts.push_back(axon_tag_send_nb(e ? ep2 : s.ep, bufs.back().data(),
                                           bufs.back().size(), kTagReply + e, NULL, &req));
            reqs.push_back(req);
        }
    }
    for (size_t i = 0; i < reqs.size(); ++i) {
        ok &= axon_test_wait_req(s.node.worker, sts[i], reqs[i], NULL, kOpTimeout) == AXON_OK;
    }
    ok &= wait_connections(s, 1, 5.0) == 1;
    ok &= axon_test_sync_progress(fd, s.node.worker, kOpTimeout) == 0;
    axon_test_ep_close(s.node.worker, ep2, AXON_EP_CLOSE_FLUSH, kOpTimeout);
    return ok ? 0 : 4;
}

class TcpConnXproc : public ::testing::Test {
protected:
    void TearDown() override
    {
        axon_test_peer_kill(&peer_);
    }

    void spawn(axon_test_peer_fn_t fn, void *arg = NULL)
    {
        ASSERT_EQ(0, axon_test_peer_spawn(&peer_, fn, arg, kPeerTimeout));
    }

    axon_test_peer_t peer_ = {-1, -1};
};

/* Both workers create their endpoints at once, several times: one connection each time. */
TEST_F(TcpConnXproc, SimultaneousConnectUsesOneConnection)
{
    static int with_barrier;

    for (int round = 0; round < 6; ++round) {
        bool barrier = (round % 2) != 0;
        spawn(both_at_once_main, barrier ? &with_barrier : NULL);
        {
            Side s;
            s.other = peer_.pid;
            ASSERT_TRUE(s.init(peer_.fd));
            ASSERT_TRUE(s.connect());
            if (barrier) {
                ASSERT_EQ(0, axon_test_sync(peer_.fd));
            }
            EXPECT_TRUE(exchange_both_ways(s, peer_.fd, true)) << "round " << round;
        }
        EXPECT_EQ(0, axon_test_peer_wait(&peer_, kPeerTimeout)) << "round " << round;
    }
}

/* The second endpoint sends on the connection the first one opened. */
TEST_F(TcpConnXproc, SecondEndpointAttachesToOpenConnection)
{
    spawn(second_main);
    Side     s;
    uint64_t v = 0;
    s.other = peer_.pid;

    ASSERT_TRUE(s.init(peer_.fd));
    ASSERT_TRUE(s.connect());
    ASSERT_EQ(AXON_OK, axon_test_send(s.node.worker, s.ep, &v, sizeof(v), kTagReply,
                                      kOpTimeout));
    EXPECT_TRUE(exchange_both_ways(s, peer_.fd, true));
    EXPECT_EQ(0, axon_test_peer_wait(&peer_, kPeerTimeout));
}

/* A goodbye ends the peer's direction only: ours keeps working, nothing is lost. */
TEST_F(TcpConnXproc, GoodbyeFromOneSideWhileOtherSends)
{
    spawn(goodbye_main);
    Side s;
    s.other = peer_.pid;

    ASSERT_TRUE(s.init(peer_.fd));
    ASSERT_TRUE(s.connect());
    ASSERT_TRUE(send_seqs(s, kTagData, 0, 10));
    ASSERT_TRUE(recv_seqs(s, kTagData, 0, 10));
    ASSERT_EQ(1, wait_connections(s, 1, 5.0)) << tcp_sockets(s.other);
    ASSERT_EQ(0, axon_test_sync_progress(peer_.fd, s.node.worker, kOpTimeout));
    for (int i = 0; i < 5; ++i) {
        ASSERT_TRUE(send_seqs(s, kTagReply, (uint64_t)i * kMessages, kMessages)) << i;
        axon_test_progress_for(s.node.worker, 0.002);
    }
    ASSERT_EQ(0, axon_test_sync_progress(peer_.fd, s.node.worker, kOpTimeout));
    /* Still one connection, and nobody failed. */
    EXPECT_EQ(1, established_tcp(s.other)) << tcp_sockets(s.other);
    EXPECT_EQ(0, s.err.calls);
    ASSERT_EQ(0, axon_test_sync_progress(peer_.fd, s.node.worker, kOpTimeout));
    EXPECT_EQ(0, axon_test_peer_wait(&peer_, kPeerTimeout));
}

/* A peer killed while both directions share the connection: our ep fails, once. */
TEST_F(TcpConnXproc, PeerKilledMidTransferOnSharedConnection)
{
    spawn(stream_until_killed_main);
    Side     s;
    uint64_t v   = 0;
    static char buf[256 << 10];
    s.other = peer_.pid;

    ASSERT_TRUE(s.init(peer_.fd));
    ASSERT_TRUE(s.connect());
    ASSERT_TRUE(send_seqs(s, kTagData, 0, 10));
    ASSERT_TRUE(recv_seqs(s, kTagData, 0, 10));
    ASSERT_EQ(1, wait_connections(s, 1, 5.0)) << tcp_sockets(s.other);
    ASSERT_EQ(0, axon_test_sync_progress(peer_.fd, s.node.worker, kOpTimeout));
    /* Take a few of its messages, so it is mid-stream, then kill it. */
    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(AXON_OK, axon_test_recv(s.node.worker, buf, sizeof(buf), kTagReply,
                                          AXON_TAG_MASK_FULL, NULL, kOpTimeout));
    }
    axon_test_peer_crash(&peer_);

    double deadline = axon_test_time() + 5.0;
    while ((s.err.calls == 0) && (axon_test_time() < deadline)) {
        axon_test_progress(s.node.worker);
    }
    EXPECT_EQ(1, s.err.calls);
    EXPECT_EQ(AXON_ERR_CONNECTION_RESET, s.err.status);
    EXPECT_NE(AXON_OK, axon_test_send(s.node.worker, s.ep, &v, sizeof(v), kTagData, 1.0));
}

/* A second ep to a connected peer shares the connection, also under full sockets. */
TEST_F(TcpConnXproc, TwoEndpointsShareOneConnection)
{
    spawn(two_eps_main);
    Side                              s;
    std::vector<std::vector<uint8_t>> bufs;
    std::vector<axon_request_h>       reqs;
    std::vector<axon_status_t>        sts;
    std::vector<axon_tag_recv_info_t> infos(2 * kTwoEpMessages);
    s.other = peer_.pid;

    ASSERT_TRUE(s.init(peer_.fd, true));
    ASSERT_TRUE(recv_seqs(s, kTagData, 0, 1));
    /* All posted at once: the rendezvous of both eps stream together. */
    for (int i = 0; i < kTwoEpMessages; ++i) {
        for (int e = 0; e < 2; ++e) {
            axon_request_param_t param = {};
            axon_request_h       req   = nullptr;
            bufs.emplace_back(two_ep_size(i + e));
            param.recv_info = &infos[bufs.size() - 1];
            sts.push_back(axon_tag_recv_nb(s.node.worker, bufs.back().data(),
                                           bufs.back().size(), kTagReply + e,
                                           AXON_TAG_MASK_FULL, &param, &req));
            reqs.push_back(req);
        }
    }
    for (size_t k = 0; k < reqs.size(); ++k) {
        int i = (int)k / 2, e = (int)k % 2;
        ASSERT_EQ(AXON_OK, axon_test_wait_req(s.node.worker, sts[k], reqs[k], &infos[k],
                                              kOpTimeout)) << i << "/" << e;
        ASSERT_EQ(two_ep_size(i + e), infos[k].length) << i << "/" << e;
        ASSERT_LT(axon_test_check(bufs[k].data(), bufs[k].size(), (uint64_t)(i * 2 + e)), 0)
            << i << "/" << e;
    }
    EXPECT_EQ(1, wait_connections(s, 1, 5.0)) << tcp_sockets(s.other);
    ASSERT_EQ(0, axon_test_sync_progress(peer_.fd, s.node.worker, kOpTimeout));
    EXPECT_EQ(0, axon_test_peer_wait(&peer_, kPeerTimeout));
}

}  // namespace
