/*
 * What the tag-messaging suites share: two roles, rank 0 and rank 1, played
 * over one transport, and the message helpers they check data with.
 *
 *   self  one process, one worker, an endpoint to its own address. The two
 *         roles run as coroutines on the test thread and switch after every
 *         progress call, so the same role code serves every transport while
 *         the worker is still used by one thread only.
 *   shm, tcp, rc, ud
 *         two processes: the test process and a forked peer, each with its
 *         own worker; "_rev" variants swap which process plays which rank.
 *         rc and ud run over softib (its shm wire between processes).
 *   netns two processes in two network namespaces joined by a veth pair;
 *         both ranks run in forked children (a namespace is entered once,
 *         for good) and the test process only waits for them.
 *
 * A variant may add configuration (a rendezvous threshold, CMA off). A role
 * reaches the other through Env: its worker, an endpoint to the other rank,
 * a barrier and a broadcast of one value.
 *
 * Everything is in an unnamed namespace: each suite that includes this gets
 * its own copy, so the header needs no source file of its own.
 */
#ifndef AXON_TEST_TAG_ENV_H
#define AXON_TEST_TAG_ENV_H

#include <gtest/gtest.h>

#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "axon.h"
#include "axon_int.h"  /* pool and queue counters: what a test leaves behind */
#include "harness.h"

namespace {

const double kOpTimeout   = 30.0;  /* one operation, or one barrier */
const double kPeerTimeout = 60.0;  /* a whole peer process */
const double kRunTimeout  = 50.0;  /* the roles of one test, within kPeerTimeout */

/* ---------------------------------------------------------------- messages */

/* Payload: [seq (8 bytes, if it fits)][pattern seeded by seq and length]. */
inline uint64_t msg_seed(uint64_t seq, size_t len)
{
    return seq * 1000003ull + len;
}

inline void fill_msg(void *buf, size_t len, uint64_t seq)
{
    uint8_t *p = static_cast<uint8_t *>(buf);

    axon_test_fill(p, len, msg_seed(seq, len));
    if (len >= sizeof(seq)) {
        memcpy(p, &seq, sizeof(seq));
    }
}

/* Empty string if buf holds message seq of len bytes, else what is wrong. */
inline std::string check_msg(const void *buf, size_t len, uint64_t seq)
{
    const uint8_t *p = static_cast<const uint8_t *>(buf);
    char           text[160];
    size_t         start = 0;

    if (len >= sizeof(seq)) {
        uint64_t got;
        memcpy(&got, p, sizeof(got));
        if (got != seq) {
            snprintf(text, sizeof(text), "sequence %llu where %llu was expected (len %zu)",
                     (unsigned long long)got, (unsigned long long)seq, len);
            return text;
        }
        start = sizeof(seq);
    }
    ssize_t bad = axon_test_check_at(p + start, len - start, msg_seed(seq, len), start);
    if (bad >= 0) {
        size_t i = start + (size_t)bad;
        snprintf(text, sizeof(text), "message %llu (len %zu): byte %zu is 0x%02x, not 0x%02x",
                 (unsigned long long)seq, len, i, p[i],
                 axon_test_pattern_byte(msg_seed(seq, len), i));
        return text;
    }
    return "";
}

/* A receive buffer with guard bytes after it, to catch overruns. */
class GuardedBuf {
public:
    static constexpr size_t  kGuard = 64;
    static constexpr uint8_t kFill  = 0xEE;

    explicit GuardedBuf(size_t len) : len_(len), mem_(len + kGuard, kFill) {}

    uint8_t *data() { return mem_.data(); }
    size_t   size() const { return len_; }
    void     reset() { std::fill(mem_.begin(), mem_.end(), kFill); }

    bool guard_intact() const { return intact_from(len_); }

    /* Nothing written at offset or after it (a message shorter than the buffer). */
    bool intact_from(size_t offset) const
    {
        for (size_t i = offset; i < mem_.size(); ++i) {
            if (mem_[i] != kFill) {
                return false;
            }
        }
        return true;
    }

private:
    size_t               len_;
    std::vector<uint8_t> mem_;
};

constexpr size_t  GuardedBuf::kGuard;
constexpr uint8_t GuardedBuf::kFill;

/* ---------------------------------------------------------------- coroutines */

/* Two roles on one thread; a role gives way from inside the progress hook. */
class CoSched {
public:
    static const size_t kStack = 1 << 20;

    void run(std::function<void()> fn0, std::function<void()> fn1)
    {
        fns_[0]  = fn0;
        fns_[1]  = fn1;
        done_[0] = done_[1] = false;
        for (int i = 0; i < 2; ++i) {
            stacks_[i].resize(kStack);
            getcontext(&ctx_[i]);
            ctx_[i].uc_stack.ss_sp   = stacks_[i].data();
            ctx_[i].uc_stack.ss_size = stacks_[i].size();
            ctx_[i].uc_link          = &main_;
            makecontext(&ctx_[i], reinterpret_cast<void (*)()>(&CoSched::trampoline), 0);
        }
        current_ = this;
        while (!done_[0] || !done_[1]) {
            for (int i = 0; i < 2; ++i) {
                if (!done_[i]) {
                    running_ = i;
                    swapcontext(&main_, &ctx_[i]);
                    running_ = -1;
                }
            }
        }
        current_ = nullptr;
    }

    /* Called between two library calls: let the other role run. */
    void yield()
    {
        if (running_ >= 0) {
            swapcontext(&ctx_[running_], &main_);
        }
    }

    bool done(int i) const { return done_[i]; }

    static void hook(void *arg) { static_cast<CoSched *>(arg)->yield(); }

private:
    static void trampoline()
    {
        CoSched *s = current_;
        int      i = s->running_;
        s->fns_[i]();
        s->done_[i] = true;
        /* returning resumes main_ through uc_link */
    }

    static CoSched       *current_;
    ucontext_t            main_;
    ucontext_t            ctx_[2];
    std::vector<char>     stacks_[2];
    std::function<void()> fns_[2];
    volatile bool         done_[2];
    volatile int          running_ = -1;
};

CoSched *CoSched::current_ = nullptr;

/* ---------------------------------------------------------------- environment */

/* State the two roles of one self-mode run share. */
struct SelfShared {
    CoSched  sched;
    unsigned barriers[2] = {0, 0};
    uint64_t bcast_value = 0;
};

class Env {
public:
    int            rank;
    axon_worker_h  worker;
    axon_ep_h     *ep_slot;  /* shared by both roles in self mode */
    int            fd;       /* socket to the other rank (processes); -1 in self mode */
    SelfShared    *shared;   /* self mode only */
    bool           is_shm;
    double         deadline; /* of the whole run: later waits give up at once */
    const char    *tls;      /* "self", "shm", "tcp", "rc" or "ud" */

    /* Time an operation may take: kOpTimeout, within the run's deadline. */
    double timeout() const
    {
        double left = deadline - axon_test_time();
        return (left < 0.001) ? 0.001 : (left < kOpTimeout ? left : kOpTimeout);
    }

    axon_ep_h ep() const { return *ep_slot; }

    unsigned progress() { return axon_test_progress(worker); }

    /* Both ranks wait for each other, progressing meanwhile. */
    bool barrier()
    {
        if (shared == nullptr) {
            return axon_test_sync_progress(fd, worker, timeout()) == 0;
        }
        unsigned target = ++shared->barriers[rank];
        double   end    = axon_test_time() + timeout();
        while (shared->barriers[1 - rank] < target) {
            if (shared->sched.done(1 - rank) || (axon_test_time() > end)) {
                return false;
            }
            progress();
        }
        return true;
    }

    /* A barrier that does not progress this worker (for back-pressure tests). */
    bool barrier_no_progress()
    {
        if (shared == nullptr) {
            return axon_test_sync(fd) == 0;
        }
        return barrier();  /* one worker: waiting without progress would deadlock */
    }

    /* Rank root's value, on both ranks. */
    uint64_t bcast(uint64_t value, int root)
    {
        if (shared == nullptr) {
            if (rank == root) {
                EXPECT_EQ(0, axon_test_send_blob(fd, &value, sizeof(value)));
                return value;
            }
            void  *blob = nullptr;
            size_t len  = 0;
            EXPECT_EQ(0, axon_test_recv_blob(fd, &blob, &len));
            if ((blob == nullptr) || (len != sizeof(value))) {
                free(blob);
                return 0;
            }
            memcpy(&value, blob, sizeof(value));
            free(blob);
            return value;
        }
        if (rank == root) {
            shared->bcast_value = value;
        }
        barrier();
        value = shared->bcast_value;
        barrier();  /* the slot may be reused after both have read it */
        return value;
    }

    axon_status_t send(const void *buf, size_t len, axon_tag_t tag)
    {
        return axon_test_send(worker, ep(), buf, len, tag, timeout());
    }

    axon_status_t recv(void *buf, size_t len, axon_tag_t tag, axon_tag_t mask,
                       axon_tag_recv_info_t *info)
    {
        return axon_test_recv(worker, buf, len, tag, mask, info, timeout());
    }

    /* Wait a request from a send/recv that returned status; frees it. */
    axon_status_t wait(axon_status_t status, axon_request_h req, axon_tag_recv_info_t *info)
    {
        return axon_test_wait_req(worker, status, req, info, timeout());
    }

    /* Progress until pred() holds; false on timeout. */
    bool progress_until(std::function<bool()> pred)
    {
        double end = axon_test_time() + timeout();
        while (!pred()) {
            if (axon_test_time() > end) {
                return false;
            }
            progress();
        }
        return true;
    }
};

typedef std::function<void(Env &)> Role;

/* The most configuration overrides a variant adds. */
#define AXON_TEST_VARIANT_KV_MAX 3

struct TransportParam {
    const char      *label;
    const char      *tls;         /* "self", "shm", "tcp", "rc" or "ud" */
    int              child_rank;  /* two processes: the rank the forked peer plays */
    bool             netns;       /* each process in a network namespace of its own */
    axon_config_kv_t config[AXON_TEST_VARIANT_KV_MAX];  /* overrides; name NULL ends */
};

inline std::ostream &operator<<(std::ostream &os, const TransportParam &p)
{
    return os << p.label;
}

/* The gtest name of a parameter: its label. */
inline std::string transport_name(const ::testing::TestParamInfo<TransportParam> &info)
{
    return std::string(info.param.label);
}

/* The variant's overrides, then the test's (a test's value for a name wins). */
inline std::vector<axon_config_kv_t> merge_config(const TransportParam                &param,
                                                  const std::vector<axon_config_kv_t> &test)
{
    std::vector<axon_config_kv_t> out;

    for (int i = 0; (i < AXON_TEST_VARIANT_KV_MAX) && (param.config[i].name != NULL); ++i) {
        bool overridden = false;
        for (const axon_config_kv_t &kv : test) {
            overridden = overridden || !strcmp(kv.name, param.config[i].name);
        }
        if (!overridden) {
            out.push_back(param.config[i]);
        }
    }
    out.insert(out.end(), test.begin(), test.end());
    return out;
}

/* What a forked process needs to play its rank. */
struct ChildArgs {
    const TransportParam          *param;
    const Role                    *roles;
    std::vector<axon_config_kv_t>  config;
    int                            rank;
    int                            fd;     /* socket to the other rank; -1: the harness's */
    const axon_test_netns_t       *netns;  /* if set, enter its namespace side first */
    int                            side;
};

/* Destroys a node an assertion left built (its segment must not outlive the test). */
struct NodeGuard {
    axon_test_node_t node = {};
    ~NodeGuard()
    {
        if (node.context != nullptr) {
            axon_test_node_destroy(&node);
        }
    }
};

/* Teardown that every run checks: nothing leaked, the endpoint closed. */
inline void destroy_node_checked(axon_test_node_t *node)
{
    axon_worker_h w = node->worker;

    /* Deferred callbacks release requests freed early. */
    axon_test_progress_for(w, 0.005);
    EXPECT_EQ(0u, w->req_mp.num_elems - w->req_mp.num_free)
        << "requests not returned to the pool after every one was freed and completed";
    for (const axon_tag_match_t &tm : w->tm) {
        EXPECT_EQ(0u, tm.num_unexpected) << "messages nobody received";
        EXPECT_EQ(0u, tm.num_expected) << "receives that never matched";
    }

    ASSERT_EQ(0, axon_test_stderr_capture_begin());
    axon_test_node_destroy(node);
    char *text = axon_test_stderr_capture_end();
    ASSERT_NE(nullptr, text);
    std::string log(text);
    free(text);
    /* Pools warn about elements still out at destruction: leaked requests. */
    EXPECT_EQ(std::string::npos, log.find("not returned")) << log;
    /* Let anything else the library said reach the real stderr. */
    if (!log.empty()) {
        fputs(log.c_str(), stderr);
    }
}

inline void close_ep_checked(Env &env)
{
    if (env.ep() != nullptr) {
        EXPECT_EQ(AXON_OK, axon_test_ep_close(env.worker, env.ep(), AXON_EP_CLOSE_FLUSH,
                                              env.timeout()));
        *env.ep_slot = nullptr;
    }
}

/*
 * Connect to the other process, play the rank, tear down. dev, if set, is
 * the device both lanes must use (in a namespace, lo reaches nobody).
 */
inline void play_rank(int fd, int rank, const TransportParam &param,
                      const std::vector<axon_config_kv_t> &config, const Role &role,
                      const char *dev = nullptr)
{
    NodeGuard         ng;
    axon_test_node_t &node = ng.node;
    axon_ep_h         ep   = nullptr;
    void             *peer_addr;
    size_t            peer_len;

    ASSERT_EQ(AXON_OK, axon_test_node_create(&node, param.tls, config.data(), config.size()));
    ASSERT_EQ(0, axon_test_exchange_address(fd, node.address, node.address_length,
                                            &peer_addr, &peer_len));
    axon_status_t status = axon_test_ep_create(node.worker, peer_addr, peer_len, &ep);
    free(peer_addr);
    EXPECT_EQ(AXON_OK, status);
    if (status == AXON_OK) {
        Env env = {rank, node.worker, &ep, fd, nullptr, !strcmp(param.tls, "shm"),
                   axon_test_time() + kRunTimeout, param.tls};
        axon_ep_attr_t attr;
        EXPECT_EQ(AXON_OK, axon_ep_query(ep, &attr));
        EXPECT_STREQ(param.tls, attr.small_tl);
        if (dev != nullptr) {
            EXPECT_STREQ(dev, attr.small_dev);
            EXPECT_STREQ(dev, attr.bulk_dev);
        }
        role(env);
        /* Neither side tears down while the other still needs its worker. */
        EXPECT_TRUE(env.barrier()) << "final barrier, rank " << rank;
        close_ep_checked(env);
        EXPECT_TRUE(env.barrier()) << "after close, rank " << rank;
    }
    destroy_node_checked(&node);
}

inline int child_main(int fd, void *arg)
{
    ChildArgs *args = static_cast<ChildArgs *>(arg);

    if ((args->netns != nullptr) && (axon_test_netns_enter(args->netns, args->side) != 0)) {
        fprintf(stderr, "rank %d: cannot enter %s: %s\n", args->rank,
                args->netns->name[args->side], strerror(errno));
        return 2;
    }
    play_rank(args->fd >= 0 ? args->fd : fd, args->rank, *args->param, args->config,
              args->roles[args->rank], args->netns ? args->netns->ifname : nullptr);
    return ::testing::Test::HasFailure() ? 1 : 0;
}

/* Deletes the namespaces of a run on every way out. */
struct NetnsGuard {
    axon_test_netns_t ns = {};
    ~NetnsGuard() { axon_test_netns_destroy(&ns); }
};

inline void run_self(const Role *roles, const std::vector<axon_config_kv_t> &config)
{
    NodeGuard         ng;
    axon_test_node_t &node = ng.node;
    axon_ep_h         ep   = nullptr;
    SelfShared        shared;

    ASSERT_EQ(AXON_OK, axon_test_node_create(&node, "self", config.data(), config.size()));
    ASSERT_EQ(AXON_OK, axon_test_ep_create(node.worker, node.address, node.address_length,
                                           &ep));
    axon_ep_attr_t attr;
    EXPECT_EQ(AXON_OK, axon_ep_query(ep, &attr));
    EXPECT_STREQ("self", attr.small_tl);

    double deadline = axon_test_time() + kRunTimeout;
    Env    env0     = {0, node.worker, &ep, -1, &shared, false, deadline, "self"};
    Env    env1     = {1, node.worker, &ep, -1, &shared, false, deadline, "self"};
    axon_test_set_progress_hook(CoSched::hook, &shared.sched);
    shared.sched.run([&] { roles[0](env0); }, [&] { roles[1](env1); });
    axon_test_set_progress_hook(nullptr, nullptr);

    close_ep_checked(env0);
    destroy_node_checked(&node);
}

inline void run_processes(const TransportParam &param, const Role *roles,
                          const std::vector<axon_config_kv_t> &config)
{
    int              my_rank = 1 - param.child_rank;
    ChildArgs        args    = {&param, roles, config, param.child_rank, -1, nullptr, 1};
    axon_test_peer_t peer;

    /* Fork before this process creates any Axon object. */
    ASSERT_EQ(0, axon_test_peer_spawn(&peer, child_main, &args, kPeerTimeout));
    play_rank(peer.fd, my_rank, param, config, roles[my_rank]);
    EXPECT_EQ(0, axon_test_peer_wait(&peer, kPeerTimeout)) << "the peer process failed";
    axon_test_peer_kill(&peer);
}

inline void run_netns(const TransportParam &param, const Role *roles,
                      const std::vector<axon_config_kv_t> &config)
{
    NetnsGuard       guard;
    int              my_rank = 1 - param.child_rank;
    axon_test_peer_t peer, helper;

    int ret = axon_test_netns_create(&guard.ns);
    if (ret > 0) {
        GTEST_SKIP() << "cannot create network namespaces here (needs root and ip(8))";
    }
    ASSERT_EQ(0, ret) << "creating the network namespaces failed";

    ChildArgs peer_args   = {&param, roles, config, param.child_rank, -1, &guard.ns, 1};
    ASSERT_EQ(0, axon_test_peer_spawn(&peer, child_main, &peer_args, kPeerTimeout));
    /* Our rank runs in a helper that talks to the peer on the socket we got for it. */
    ChildArgs helper_args = {&param, roles, config, my_rank, peer.fd, &guard.ns, 0};
    if (axon_test_peer_spawn(&helper, child_main, &helper_args, kPeerTimeout) != 0) {
        axon_test_peer_kill(&peer);
        FAIL() << "fork failed";
    }
    EXPECT_EQ(0, axon_test_peer_wait(&helper, kPeerTimeout)) << "rank " << my_rank << " failed";
    EXPECT_EQ(0, axon_test_peer_wait(&peer, kPeerTimeout)) << "rank " << param.child_rank
                                                           << " failed";
    axon_test_peer_kill(&helper);
    axon_test_peer_kill(&peer);
}

/* Run role0 as rank 0 and role1 as rank 1 over the transport of param. */
inline void run_roles(const TransportParam &param, Role role0, Role role1,
                      const std::vector<axon_config_kv_t> &test_config = {})
{
    Role                          roles[2] = {role0, role1};
    std::vector<axon_config_kv_t> config   = merge_config(param, test_config);

    if (!strcmp(param.tls, "self")) {
        run_self(roles, config);
    } else if (param.netns) {
        run_netns(param, roles, config);
    } else {
        run_processes(param, roles, config);
    }
}

/* ---------------------------------------------------------------- callbacks */

/* Set while the test is inside an initiating call: callbacks must not see it. */
volatile int g_in_call = 0;

struct CbRecord {
    int           calls      = 0;
    int           in_call    = 0;   /* calls made from inside an initiating call */
    axon_status_t status     = AXON_INPROGRESS;
    size_t        length     = 0;
    axon_tag_t    tag        = 0;
    void         *user_data  = nullptr;
};

inline void send_cb(axon_request_h, axon_status_t status, void *arg)
{
    CbRecord *rec = static_cast<CbRecord *>(arg);
    rec->calls++;
    rec->in_call += g_in_call;
    rec->status    = status;
    rec->user_data = arg;
}

inline void recv_cb(axon_request_h, axon_status_t status, const axon_tag_recv_info_t *info,
                    void *arg)
{
    CbRecord *rec = static_cast<CbRecord *>(arg);
    rec->calls++;
    rec->in_call += g_in_call;
    rec->status    = status;
    rec->length    = info->length;
    rec->tag       = info->sender_tag;
    rec->user_data = arg;
}

/*
 * Sends posted and not yet waited for, with their buffers. A rendezvous send
 * need not complete before the receiver posts a matching receive, so a role
 * that makes the receiver wait (a barrier) posts first and waits after.
 */
class SendBatch {
public:
    /* Post message seq of len bytes with tag (payload as fill_msg); ASSERTs it started. */
    void post(Env &env, size_t len, uint64_t seq, axon_tag_t tag,
              const axon_request_param_t *param = NULL)
    {
        bufs_.emplace_back(len);
        fill_msg(bufs_.back().data(), len, seq);
        reqs_.push_back(nullptr);
        status_.push_back(axon_tag_send_nb(env.ep(), bufs_.back().data(), len, tag, param,
                                           &reqs_.back()));
        ASSERT_TRUE((status_.back() == AXON_OK) || (status_.back() == AXON_INPROGRESS))
            << "send " << seq << ": " << axon_status_string(status_.back());
    }

    /* Wait for every send posted (each must succeed) and forget them. */
    void wait(Env &env)
    {
        for (size_t i = 0; i < reqs_.size(); ++i) {
            EXPECT_EQ(AXON_OK, env.wait(status_[i], reqs_[i], NULL)) << "send " << i;
        }
        bufs_.clear();
        reqs_.clear();
        status_.clear();
    }

    size_t size() const { return reqs_.size(); }

private:
    std::vector<std::vector<uint8_t>> bufs_;  /* moved on growth: data() stays put */
    std::vector<axon_request_h>       reqs_;
    std::vector<axon_status_t>        status_;
};

/* Send count messages of sizes size(i) with tag(i), non-blocking, then wait all. */
inline void send_all(Env &env, int count, std::function<size_t(int)> size,
                     std::function<axon_tag_t(int)> tag)
{
    SendBatch batch;

    for (int i = 0; i < count; ++i) {
        batch.post(env, size(i), i, tag(i));
        if (::testing::Test::HasFatalFailure()) {
            break;
        }
    }
    batch.wait(env);
}

}  // namespace

#endif
