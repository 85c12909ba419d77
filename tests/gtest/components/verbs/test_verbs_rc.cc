/*
 * The rc transport through its ops table, on softib: the component is loaded
 * with the loader, an iface opened on rc/softib0:1, and a forked peer (harness
 * peer: socketpair, alarm-bounded, reaped) does the same; the two exchange
 * worker uuid, device and iface address over the socket.
 *   - handshake and AMs both ways; short and bcopy at their limits, around
 *     the inline boundary;
 *   - credits: a receiver that sleeps 1 s gets 10 000 messages, the sender
 *     sees NO_RESOURCE after exactly one window and nothing fails;
 *   - RDMA get/put with mem_reg/rkey_pack, and bad keys refused before the
 *     wire (memory untouched, connection intact);
 *   - the handshake under 20% loss; a connect to a worker that does not
 *     exist fails within the timeout; a peer killed is reported within 5 s;
 *   - AXON_SOFTIB_CAP_MASK=srq or rc: no rc resource, a debug line says why;
 *   - tag messages of every protocol through the API with AXON_TLS=rc.
 * Each test forks its peers before it opens its own device.
 */
#include <gtest/gtest.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

extern "C" {
#include "axon.h"
#include "component.h"
#include "harness.h"
#include "loader.h"
#include "log.h"
#include "components/verbs/rc.h"   /* a peer that forges its header's credits */
}

namespace {

const double kPeerTimeout = 60.0;
const double kOpTimeout   = 20.0;
const uint8_t kAmData     = 3;
const uint8_t kAmCtl      = 4;

/* Sets variables for the scope and restores what was there. */
class Env {
public:
    void set(const char *name, const char *value)
    {
        const char *old = getenv(name);
        saved_.push_back({name, old ? old : "", old != nullptr});
        if (value != nullptr) {
            setenv(name, value, 1);
        } else {
            unsetenv(name);
        }
    }
    ~Env()
    {
        for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
            if (it->had) {
                setenv(it->name.c_str(), it->value.c_str(), 1);
            } else {
                unsetenv(it->name.c_str());
            }
        }
    }

private:
    struct Saved {
        std::string name, value;
        bool        had;
    };
    std::vector<Saved> saved_;
};

struct LogCapture {
    std::vector<std::string> lines;

    static void hook(axon_log_level_t, const char *msg, void *arg)
    {
        static_cast<LogCapture *>(arg)->lines.emplace_back(msg);
    }
    LogCapture() { axon_log_set_hook(hook, this); }
    ~LogCapture() { axon_log_set_hook(NULL, NULL); }
    bool has(const std::string &a, const std::string &b = "") const
    {
        for (const auto &l : lines) {
            if ((l.find(a) != std::string::npos) && (l.find(b) != std::string::npos)) {
                return true;
            }
        }
        return false;
    }
};

/* One rc iface in this process, with what it received. */
struct Rc {
    axon_component_set_t          set = {NULL, 0};
    const axon_loaded_component_t *lc = nullptr;
    const axon_resource_t         *res = nullptr;
    axon_iface_t                  *iface = nullptr;
    axon_md_t                     *md    = nullptr;
    axon_am_handler_t              handlers[AXON_AM_ID_MAX] = {};
    uint64_t                       uuid = 0;
    std::vector<std::vector<uint8_t>> msgs;     /* kAmData payloads, in order */
    std::vector<uint64_t>          failed;      /* peer_failure uuids */
    axon_status_t                  fail_status = AXON_OK;
    bool                           misaligned = false;

    static void on_data(void *arg, const void *data, size_t length, unsigned)
    {
        Rc *rc = static_cast<Rc *>(arg);
        if (((uintptr_t)data & 7) != 0) {
            rc->misaligned = true;
        }
        rc->msgs.emplace_back((const uint8_t *)data, (const uint8_t *)data + length);
    }
    static void on_failure(void *arg, uint64_t uuid, axon_status_t status)
    {
        Rc *rc = static_cast<Rc *>(arg);
        rc->failed.push_back(uuid);
        rc->fail_status = status;
    }

    /* Load the components and find rc's resources; false if rc has none. */
    bool load()
    {
        axon_config_names_t path = {NULL, 0};
        if (axon_loader_load_all(&path, NULL, 0, NULL, 0, &set) != AXON_OK) {
            return false;
        }
        for (unsigned i = 0; i < set.count; ++i) {
            if ((set.comps[i].component != nullptr) && !strcmp(set.comps[i].name, "rc")) {
                lc = &set.comps[i];
            }
        }
        return (lc != nullptr) && (lc->num_resources > 0);
    }

    bool open()
    {
        axon_iface_params_t params = {};

        if (!load()) {
            return false;
        }
        res                    = &lc->resources[0];
        handlers[kAmData]      = on_data;
        uuid                   = ((uint64_t)getpid() << 20) | 0x5a5;
        params.am_handlers     = handlers;
        params.am_arg          = this;
        params.worker_uuid     = uuid;
        params.peer_failure    = on_failure;
        /* The iface opens on its memory domain, as a context's workers do. */
        if (lc->component->md_open(res, lc->config, &md) != AXON_OK) {
            md = nullptr;
            return false;
        }
        params.md = md;
        return lc->component->iface_open(res, lc->config, &params, &iface) == AXON_OK;
    }

    ~Rc()
    {
        if (iface != nullptr) {
            iface->ops->iface_close(iface);
        }
        if (md != nullptr) {
            md->ops->md_close(md);
        }
        axon_loader_unload_all(&set);
    }

    unsigned progress() { return iface->ops->iface_progress(iface); }

    void progress_for(double sec)
    {
        double end = axon_test_time() + sec;
        while (axon_test_time() < end) {
            progress();
        }
    }

    /* uuid, device address, iface address */
    std::vector<uint8_t> address()
    {
        const axon_iface_ops_t *ops = iface->ops;
        std::vector<uint8_t> a(8 + ops->dev_addr_len + ops->iface_addr_len);
        memcpy(a.data(), &uuid, 8);
        ops->iface_get_address(iface, a.data() + 8, a.data() + 8 + ops->dev_addr_len);
        return a;
    }

    axon_status_t connect(const std::vector<uint8_t> &peer, axon_tl_ep_t **ep_p)
    {
        uint64_t peer_uuid;
        memcpy(&peer_uuid, peer.data(), 8);
        return iface->ops->ep_create(iface, peer_uuid, peer.data() + 8,
                                     peer.data() + 8 + iface->ops->dev_addr_len, ep_p);
    }

    /* Retry on NO_RESOURCE while progressing */
    axon_status_t send_short(axon_tl_ep_t *ep, const void *hdr, size_t hlen, const void *p,
                             size_t len, unsigned *busy = nullptr)
    {
        double end = axon_test_time() + kOpTimeout;
        axon_status_t st;
        while ((st = iface->ops->ep_am_short(ep, kAmData, hdr, hlen, p, len)) ==
               AXON_ERR_NO_RESOURCE) {
            if (busy != nullptr) {
                ++*busy;
            }
            progress();
            if (axon_test_time() > end) {
                break;
            }
        }
        return st;
    }

    bool wait_msgs(size_t n, double timeout = kOpTimeout)
    {
        double end = axon_test_time() + timeout;
        while ((msgs.size() < n) && (axon_test_time() < end)) {
            progress();
        }
        return msgs.size() >= n;
    }

    axon_status_t flush(axon_tl_ep_t *ep)
    {
        double end = axon_test_time() + kOpTimeout;
        axon_status_t st;
        while (((st = iface->ops->ep_flush(ep)) == AXON_INPROGRESS) &&
               (axon_test_time() < end)) {
            progress();
        }
        return st;
    }
};

struct BcopyArg {
    const uint8_t *data;
    size_t         len;
};

size_t pack_cb(void *dest, void *arg)
{
    BcopyArg *a = static_cast<BcopyArg *>(arg);
    if (a->len > 0) {
        memcpy(dest, a->data, a->len);   /* data may be NULL for 0 bytes */
    }
    return a->len;
}

/* Claims a->len bytes without writing any: a callback that lies about its length */
size_t pack_claims(void *, void *arg)
{
    return static_cast<BcopyArg *>(arg)->len;
}

/* Open, exchange addresses, connect: the common start of both sides. */
bool rc_start(Rc &rc, int fd, std::vector<uint8_t> *peer, axon_tl_ep_t **ep)
{
    void  *blob;
    size_t len;

    if (!rc.open()) {
        return false;
    }
    std::vector<uint8_t> mine = rc.address();
    if (axon_test_exchange_address(fd, mine.data(), mine.size(), &blob, &len) != 0) {
        return false;
    }
    peer->assign((uint8_t *)blob, (uint8_t *)blob + len);
    free(blob);
    return rc.connect(*peer, ep) == AXON_OK;
}

std::vector<uint8_t> pattern(size_t len, unsigned seed)
{
    std::vector<uint8_t> v(len);
    for (size_t i = 0; i < len; ++i) {
        v[i] = (uint8_t)(i * 31 + seed * 7 + (i >> 8));
    }
    return v;
}

/* The sizes every side sends: around the inline boundary, short and bcopy limits. */
std::vector<size_t> sizes_for(const Rc &rc, uint32_t max_inline)
{
    std::vector<size_t> s = {0, 1, 7, 8, 9, 63, 64};
    for (long d = -2; d <= 2; ++d) {
        long v = (long)max_inline - 8 + d;   /* 8-byte rc header inside the inline bytes */
        if ((v >= 0) && ((size_t)v <= rc.res->max_short)) {
            s.push_back((size_t)v);
        }
    }
    s.push_back(rc.res->max_short - 1);
    s.push_back(rc.res->max_short);
    return s;
}

/* Send every size as short (payload split over hdr and payload) and bcopy up to max_bcopy. */
bool send_all_sizes(Rc &rc, axon_tl_ep_t *ep, unsigned seed)
{
    std::vector<size_t> sizes = sizes_for(rc, 128);
    unsigned i = 0;

    for (size_t s : sizes) {
        std::vector<uint8_t> p = pattern(s, seed + i++);
        size_t h = (s >= 8) ? 8 : s;
        if (rc.send_short(ep, p.data(), h, p.data() + h, s - h) != AXON_OK) {
            return false;
        }
    }
    for (size_t s : {(size_t)0, (size_t)1, (size_t)4096, rc.res->max_bcopy - 1,
                     rc.res->max_bcopy}) {
        std::vector<uint8_t> p = pattern(s, seed + i++);
        BcopyArg a = {p.data(), s};
        ssize_t  r;
        double   end = axon_test_time() + kOpTimeout;
        while ((r = rc.iface->ops->ep_am_bcopy(ep, kAmData, pack_cb, &a)) ==
               AXON_ERR_NO_RESOURCE && (axon_test_time() < end)) {
            rc.progress();
        }
        if (r != (ssize_t)s) {
            return false;
        }
    }
    return true;
}

bool check_all_sizes(Rc &rc, unsigned seed, size_t first)
{
    std::vector<size_t> sizes = sizes_for(rc, 128);
    unsigned i = 0;
    size_t   m = first;

    for (size_t s : sizes) {
        if ((m >= rc.msgs.size()) || (rc.msgs[m++] != pattern(s, seed + i++))) {
            fprintf(stderr, "short message %zu (size %zu) differs\n", m - 1, s);
            return false;
        }
    }
    for (size_t s : {(size_t)0, (size_t)1, (size_t)4096, rc.res->max_bcopy - 1,
                     rc.res->max_bcopy}) {
        if ((m >= rc.msgs.size()) || (rc.msgs[m++] != pattern(s, seed + i++))) {
            fprintf(stderr, "bcopy message %zu (size %zu) differs\n", m - 1, s);
            return false;
        }
    }
    return true;
}

size_t count_all_sizes(Rc &rc)
{
    return sizes_for(rc, 128).size() + 5;
}

/* ---------------------------------------------------------------- tests */

class VerbsRc : public ::testing::Test {
protected:
    axon_test_peer_t peer = {-1, -1};
    Env              env;

    void SetUp() override
    {
        env.set("AXON_RC_MAX_INLINE", "128");
    }
    void TearDown() override
    {
        if (peer.pid > 0) {
            axon_test_peer_kill(&peer);
        }
    }
};

TEST_F(VerbsRc, ResourceAndCaps)
{
    Rc rc;
    ASSERT_TRUE(rc.load());
    const axon_resource_t &r = rc.lc->resources[0];
    EXPECT_STREQ("rc", r.tl_name);
    EXPECT_STREQ("softib0:1", r.dev_name);
    uint64_t want = AXON_CAP_AM_SHORT | AXON_CAP_AM_BCOPY | AXON_CAP_GET | AXON_CAP_PUT |
                    AXON_CAP_CONNECT_TO_IFACE | AXON_CAP_AM_ORDERED | AXON_CAP_PEER_FAILURE |
                    AXON_CAP_NEED_MKEY;
    EXPECT_EQ(want, r.cap_flags & want);
    /* softib is an emulation: never preferred over shm/tcp by the estimates */
    EXPECT_GE(r.latency_ns, 20000.0);
    EXPECT_LE(r.bandwidth_MBps, 1000.0);
    EXPECT_EQ((size_t)8192, r.max_bcopy);
    EXPECT_GT(r.ep_memory, (size_t)16384);
}

TEST_F(VerbsRc, CapabilityMaskSkipsRc)
{
    for (const char *mask : {"srq", "rc"}) {
        Env e;
        e.set("AXON_SOFTIB_CAP_MASK", mask);
        LogCapture log;
        Rc rc;
        EXPECT_FALSE(rc.load()) << mask;
        EXPECT_TRUE(log.has(std::string("no ") + mask, "rc skipped")) << mask;
    }
}

/* Received buffers go back to the SRQ in batches (a post is a device call on the
 * receive path), never so many held back that one peer's full window finds it short. */
TEST_F(VerbsRc, ReceiveBuffersReturnInBatchesThatLeaveAWindowPosted)
{
    struct {
        const char *len, *window;
        unsigned    batch;
    } cases[] = {{"1024", "64", 32}, {"16", "16", 1}, {"64", "60", 4}, {"40", "32", 2},
                 {"4096", "4090", 7}, {"16", "2", 1}};
    for (const auto &c : cases) {
        Env e;
        e.set("AXON_RC_RX_QUEUE_LEN", c.len);
        e.set("AXON_RC_FC_WINDOW", c.window);
        Rc rc;
        ASSERT_TRUE(rc.open()) << c.len << "/" << c.window;
        const axon_verbs_srq_ring_t &rx = ((axon_rc_iface_t *)rc.iface)->rx;
        EXPECT_EQ(c.batch, rx.batch) << c.len << "/" << c.window;
        EXPECT_LE(rx.batch, (unsigned)atoi(c.len) - (unsigned)atoi(c.window) + 1);
        EXPECT_EQ(0u, rx.refill) << "every buffer posted at open";
    }
}

int peer_am(int fd, void *)
{
    Rc rc;
    std::vector<uint8_t> peer;
    axon_tl_ep_t *ep;

    PEER_CHECK(rc_start(rc, fd, &peer, &ep));
    PEER_CHECK(send_all_sizes(rc, ep, 100));
    PEER_CHECK(rc.wait_msgs(count_all_sizes(rc)));
    PEER_CHECK(check_all_sizes(rc, 200, 0));
    PEER_CHECK(!rc.misaligned);
    PEER_CHECK(rc.flush(ep) == AXON_OK);
    rc.iface->ops->ep_destroy(ep);
    rc.progress_for(0.3);
    PEER_CHECK(rc.failed.empty());
    return 0;
}

/* Xproc: forks a peer process, too slow under valgrind (tests/README.md). */
class VerbsRcXproc : public VerbsRc {};

TEST_F(VerbsRcXproc, AmBothWaysAtTheLimits)
{
    ASSERT_EQ(0, axon_test_peer_spawn(&peer, peer_am, nullptr, kPeerTimeout));
    Rc rc;
    std::vector<uint8_t> addr;
    axon_tl_ep_t *ep;
    ASSERT_TRUE(rc_start(rc, peer.fd, &addr, &ep));
    ASSERT_TRUE(send_all_sizes(rc, ep, 200));
    ASSERT_TRUE(rc.wait_msgs(count_all_sizes(rc)));
    EXPECT_TRUE(check_all_sizes(rc, 100, 0));
    EXPECT_FALSE(rc.misaligned);
    EXPECT_EQ(AXON_OK, rc.flush(ep));
    /* too long: refused with a status, nothing sent */
    std::vector<uint8_t> big(rc.res->max_short + 1);
    EXPECT_EQ(AXON_ERR_INVALID_PARAM,
              rc.iface->ops->ep_am_short(ep, kAmData, big.data(), 8, big.data() + 8,
                                         big.size() - 8));
    /* a pack callback claiming more than max_bcopy: refused, its buffer back in the
     * pool (more refusals than the pool has buffers), nothing sent */
    {
        LogCapture log;
        BcopyArg   lie = {nullptr, rc.res->max_bcopy + 1};
        for (int i = 0; i < 2000; ++i) {
            ASSERT_EQ((ssize_t)AXON_ERR_INVALID_PARAM,
                      rc.iface->ops->ep_am_bcopy(ep, kAmData, pack_claims, &lie))
                << "refusal " << i;
        }
        EXPECT_TRUE(log.has("am_bcopy pack callback wrote",
                            std::to_string(lie.len) + " bytes"));
    }
    rc.iface->ops->ep_destroy(ep);
    rc.progress_for(0.3);
    EXPECT_EQ(0, axon_test_peer_wait(&peer, kPeerTimeout));
    EXPECT_TRUE(rc.failed.empty()) << "a goodbye is not a failure";
}

const int kCreditMsgs = 10000;

int peer_sleepy(int fd, void *)
{
    Rc rc;
    std::vector<uint8_t> peer;
    axon_tl_ep_t *ep;
    uint32_t pong = 0;

    PEER_CHECK(rc_start(rc, fd, &peer, &ep));
    PEER_CHECK(rc.wait_msgs(1));   /* the ping: connected */
    PEER_CHECK(rc.send_short(ep, &pong, sizeof(pong), nullptr, 0) == AXON_OK);
    PEER_CHECK(axon_test_sync(fd) == 0);
    sleep(1);   /* messages pile up: credits must stop the sender */
    PEER_CHECK(rc.wait_msgs(kCreditMsgs, 60.0));
    for (int i = 0; i < kCreditMsgs; ++i) {
        uint32_t v;
        PEER_CHECK(rc.msgs[i].size() == sizeof(v));
        memcpy(&v, rc.msgs[i].data(), sizeof(v));
        PEER_CHECK(v == (uint32_t)i);
    }
    PEER_CHECK(axon_test_sync(fd) == 0);
    rc.iface->ops->ep_destroy(ep);
    rc.progress_for(0.3);
    PEER_CHECK(rc.failed.empty());
    return 0;
}

TEST_F(VerbsRcXproc, CreditsStopSenderWhileReceiverSleeps)
{
    env.set("AXON_RC_FC_WINDOW", "32");
    ASSERT_EQ(0, axon_test_peer_spawn(&peer, peer_sleepy, nullptr, kPeerTimeout));
    Rc rc;
    std::vector<uint8_t> addr;
    axon_tl_ep_t *ep;
    ASSERT_TRUE(rc_start(rc, peer.fd, &addr, &ep));
    /* ping, pong: connected, and the pong returned the ping's credit */
    unsigned busy = 0;
    uint32_t v = 0;
    ASSERT_EQ(AXON_OK, rc.send_short(ep, &v, sizeof(v), nullptr, 0, &busy));
    ASSERT_TRUE(rc.wait_msgs(1));
    ASSERT_EQ(0, axon_test_sync(peer.fd));
    /* the receiver sleeps: exactly one window goes out */
    int sent = 0;
    for (v = 1; v < 1000; ++v) {
        if (rc.iface->ops->ep_am_short(ep, kAmData, &v, sizeof(v), nullptr, 0) != AXON_OK) {
            break;
        }
        ++sent;
    }
    EXPECT_EQ(32, sent) << "the window is 32 messages";
    for (; v < (uint32_t)kCreditMsgs; ++v) {
        ASSERT_EQ(AXON_OK, rc.send_short(ep, &v, sizeof(v), nullptr, 0, &busy)) << v;
    }
    EXPECT_GT(busy, 0u);
    EXPECT_EQ(AXON_OK, rc.flush(ep));
    EXPECT_EQ(AXON_OK, rc.iface->ops->ep_check(ep));
    ASSERT_EQ(0, axon_test_sync(peer.fd));
    rc.iface->ops->ep_destroy(ep);
    rc.progress_for(0.3);
    EXPECT_EQ(0, axon_test_peer_wait(&peer, kPeerTimeout));
    EXPECT_TRUE(rc.failed.empty());
}

/* A peer whose pong returns 60 000 credits where it owes one (a forged header). */
int peer_forged_credits(int fd, void *)
{
    Rc rc;
    std::vector<uint8_t> peer;
    axon_tl_ep_t *ep;
    uint32_t pong = 0;

    PEER_CHECK(rc_start(rc, fd, &peer, &ep));
    PEER_CHECK(rc.wait_msgs(1));   /* the ping: connected */
    ((axon_rc_ep_t *)ep)->conn->rx_credits = 60000;
    PEER_CHECK(rc.send_short(ep, &pong, sizeof(pong), nullptr, 0) == AXON_OK);
    PEER_CHECK(axon_test_sync(fd) == 0);
    sleep(1);   /* the sender may send its window, no more */
    PEER_CHECK(axon_test_sync(fd) == 0);
    rc.iface->ops->ep_destroy(ep);
    rc.progress_for(0.3);
    return 0;
}

/* Credits beyond the window the peer granted are capped, said so: the counter would
 * overflow, and the sender overrun the peer's receive queue. */
TEST_F(VerbsRcXproc, ForgedCreditsAreCappedAtTheWindow)
{
    env.set("AXON_RC_FC_WINDOW", "32");
    ASSERT_EQ(0, axon_test_peer_spawn(&peer, peer_forged_credits, nullptr, kPeerTimeout));
    LogCapture log;
    Rc rc;
    std::vector<uint8_t> addr;
    axon_tl_ep_t *ep;
    ASSERT_TRUE(rc_start(rc, peer.fd, &addr, &ep));
    uint32_t v = 0;
    ASSERT_EQ(AXON_OK, rc.send_short(ep, &v, sizeof(v), nullptr, 0));
    ASSERT_TRUE(rc.wait_msgs(1));
    ASSERT_EQ(0, axon_test_sync(peer.fd));
    int sent = 0;
    for (v = 1; v < 1000; ++v) {
        if (rc.iface->ops->ep_am_short(ep, kAmData, &v, sizeof(v), nullptr, 0) != AXON_OK) {
            break;
        }
        ++sent;
    }
    EXPECT_EQ(32, sent) << "the window is 32 messages, whatever the peer returned";
    EXPECT_TRUE(log.has("60000 credits", "beyond its window of 32"));
    ASSERT_EQ(0, axon_test_sync(peer.fd));
    rc.iface->ops->ep_destroy(ep);
    rc.progress_for(0.3);
    EXPECT_EQ(0, axon_test_peer_wait(&peer, kPeerTimeout));
}

const size_t kRdmaLen = 256 * 1024 + 13;

struct Completion {
    axon_tl_completion_t super;
    int                  done = 0;
    axon_status_t        status = AXON_OK;
    static void func(axon_tl_completion_t *c, axon_status_t st)
    {
        Completion *self = reinterpret_cast<Completion *>(c);
        self->done++;
        self->status = st;
    }
    Completion() { super.func = func; }
};

int peer_rdma(int fd, void *)
{
    Rc rc;
    std::vector<uint8_t> peer;
    axon_tl_ep_t *ep;
    void *memh;

    PEER_CHECK(rc_start(rc, fd, &peer, &ep));
    std::vector<uint8_t> buf = pattern(kRdmaLen, 5);
    PEER_CHECK(rc.md->ops->mem_reg(rc.md, buf.data(), buf.size(), 0, &memh) == AXON_OK);
    std::vector<uint8_t> key(rc.md->ops->rkey_max_len + 8);
    uint64_t addr = (uintptr_t)buf.data();
    memcpy(key.data(), &addr, 8);
    size_t klen = rc.md->ops->rkey_pack(rc.md, memh, key.data() + 8);
    PEER_CHECK(klen <= rc.md->ops->rkey_max_len);
    PEER_CHECK(axon_test_send_blob(fd, key.data(), 8 + klen) == 0);
    /* the test gets, puts the second half, then refuses bad keys */
    double end = axon_test_time() + kOpTimeout;
    char c;
    while ((recv(fd, &c, 1, MSG_DONTWAIT) != 1) && (axon_test_time() < end)) {
        rc.progress();
    }
    std::vector<uint8_t> want = pattern(kRdmaLen, 5);
    std::vector<uint8_t> put  = pattern(kRdmaLen / 2, 9);
    memcpy(want.data() + kRdmaLen / 2, put.data(), put.size());
    PEER_CHECK(buf == want);
    PEER_CHECK(send(fd, &c, 1, 0) == 1);
    while ((recv(fd, &c, 1, MSG_DONTWAIT) != 1) && (axon_test_time() < end)) {
        rc.progress();
    }
    PEER_CHECK(buf == want);   /* bad keys touched nothing */
    rc.md->ops->mem_dereg(rc.md, memh);
    rc.iface->ops->ep_destroy(ep);
    rc.progress_for(0.3);
    PEER_CHECK(rc.failed.empty());
    return 0;
}

/* Wait for a get/put that returned INPROGRESS */
axon_status_t wait_comp(Rc &rc, axon_status_t st, Completion &c)
{
    double end = axon_test_time() + kOpTimeout;
    if (st != AXON_INPROGRESS) {
        return st;
    }
    while (!c.done && (axon_test_time() < end)) {
        rc.progress();
    }
    return c.done ? c.status : AXON_ERR_TIMED_OUT;
}

TEST_F(VerbsRcXproc, RdmaGetPutWithRkey)
{
    ASSERT_EQ(0, axon_test_peer_spawn(&peer, peer_rdma, nullptr, kPeerTimeout));
    Rc rc;
    std::vector<uint8_t> addr;
    axon_tl_ep_t *ep;
    ASSERT_TRUE(rc_start(rc, peer.fd, &addr, &ep));
    void  *blob;
    size_t blen;
    ASSERT_EQ(0, axon_test_recv_blob(peer.fd, &blob, &blen));
    std::vector<uint8_t> key((uint8_t *)blob, (uint8_t *)blob + blen);
    free(blob);
    uint64_t raddr;
    memcpy(&raddr, key.data(), 8);
    const uint8_t *rkey = key.data() + 8;
    /* wait until connected: a 1-byte get is refused (UNSUPPORTED) while connecting */
    std::vector<uint8_t> local(kRdmaLen, 0);
    axon_status_t st;
    double end = axon_test_time() + kOpTimeout;
    Completion c0;
    while (((st = rc.iface->ops->ep_get_zcopy(ep, local.data(), 1, raddr, rkey, &c0.super)) ==
            AXON_ERR_UNSUPPORTED) && (axon_test_time() < end)) {
        rc.progress();
    }
    ASSERT_EQ(AXON_OK, wait_comp(rc, st, c0));

    Completion c1;
    st = rc.iface->ops->ep_get_zcopy(ep, local.data(), kRdmaLen, raddr, rkey, &c1.super);
    ASSERT_EQ(AXON_OK, wait_comp(rc, st, c1));
    EXPECT_EQ(pattern(kRdmaLen, 5), local);

    std::vector<uint8_t> put = pattern(kRdmaLen / 2, 9);
    Completion c2;
    st = rc.iface->ops->ep_put_zcopy(ep, put.data(), put.size(), raddr + kRdmaLen / 2, rkey,
                                     &c2.super);
    ASSERT_EQ(AXON_OK, wait_comp(rc, st, c2));
    char c = 1;
    ASSERT_EQ(1, send(peer.fd, &c, 1, 0));
    ASSERT_EQ(1, recv(peer.fd, &c, 1, 0));

    /* bad keys: refused at once with a status and a log line, nothing moves */
    {
        LogCapture log;
        std::vector<uint8_t> bad(rkey, rkey + blen - 8);
        bad[0] ^= 0xff;   /* version */
        Completion c3;
        EXPECT_EQ(AXON_ERR_INVALID_PARAM,
                  rc.iface->ops->ep_put_zcopy(ep, put.data(), 16, raddr, bad.data(), &c3.super));
        EXPECT_EQ(AXON_ERR_INVALID_PARAM,
                  rc.iface->ops->ep_put_zcopy(ep, put.data(), 16, raddr + kRdmaLen - 8, rkey,
                                              &c3.super));
        EXPECT_EQ(AXON_ERR_INVALID_PARAM,
                  rc.iface->ops->ep_get_zcopy(ep, local.data(), 16, raddr - 16, rkey,
                                              &c3.super));
        EXPECT_EQ(0, c3.done);
        EXPECT_TRUE(log.has("outside the key"));
        EXPECT_TRUE(log.has("rkey of version"));
    }
    EXPECT_EQ(AXON_OK, rc.iface->ops->ep_check(ep));
    ASSERT_EQ(1, send(peer.fd, &c, 1, 0));
    rc.iface->ops->ep_destroy(ep);
    rc.progress_for(0.3);
    EXPECT_EQ(0, axon_test_peer_wait(&peer, kPeerTimeout));
    EXPECT_TRUE(rc.failed.empty());
}

int peer_lossy(int fd, void *)
{
    Rc rc;
    std::vector<uint8_t> peer;
    axon_tl_ep_t *ep;

    PEER_CHECK(rc_start(rc, fd, &peer, &ep));
    for (uint32_t i = 0; i < 200; ++i) {
        PEER_CHECK(rc.send_short(ep, &i, sizeof(i), nullptr, 0) == AXON_OK);
    }
    PEER_CHECK(rc.wait_msgs(200));
    for (uint32_t i = 0; i < 200; ++i) {
        uint32_t v;
        memcpy(&v, rc.msgs[i].data(), 4);
        PEER_CHECK(v == i);
    }
    PEER_CHECK(rc.flush(ep) == AXON_OK);
    PEER_CHECK(axon_test_sync(fd) == 0);
    rc.iface->ops->ep_destroy(ep);
    rc.progress_for(0.5);
    return 0;
}

TEST_F(VerbsRcXproc, HandshakeAndDataUnderLoss)
{
    env.set("AXON_SOFTIB_LOSS", "0.2");
    env.set("AXON_SOFTIB_REORDER", "0.1");
    env.set("AXON_RC_TIMEOUT", "50ms");   /* lost packets are resent sooner */
    ASSERT_EQ(0, axon_test_peer_spawn(&peer, peer_lossy, nullptr, kPeerTimeout));
    Rc rc;
    std::vector<uint8_t> addr;
    axon_tl_ep_t *ep;
    ASSERT_TRUE(rc_start(rc, peer.fd, &addr, &ep));
    for (uint32_t i = 0; i < 200; ++i) {
        ASSERT_EQ(AXON_OK, rc.send_short(ep, &i, sizeof(i), nullptr, 0));
    }
    ASSERT_TRUE(rc.wait_msgs(200));
    for (uint32_t i = 0; i < 200; ++i) {
        uint32_t v;
        memcpy(&v, rc.msgs[i].data(), 4);
        ASSERT_EQ(i, v);
    }
    EXPECT_EQ(AXON_OK, rc.flush(ep));
    ASSERT_EQ(0, axon_test_sync(peer.fd));
    rc.iface->ops->ep_destroy(ep);
    rc.progress_for(0.5);
    EXPECT_EQ(0, axon_test_peer_wait(&peer, kPeerTimeout));
}

TEST_F(VerbsRc, ConnectToMissingWorkerFailsInTime)
{
    env.set("AXON_RC_CONNECT_TIMEOUT", "1s");
    LogCapture log;
    Rc rc;
    ASSERT_TRUE(rc.open());
    std::vector<uint8_t> a = rc.address();
    /* a handshake QP number nobody has */
    uint32_t qpn = 0xabcde;
    memcpy(a.data() + 8 + rc.iface->ops->dev_addr_len, &qpn, 4);
    uint64_t ghost = 0x600d;
    memcpy(a.data(), &ghost, 8);
    axon_tl_ep_t *ep;
    ASSERT_EQ(AXON_OK, rc.connect(a, &ep));
    uint32_t v = 1;
    EXPECT_EQ(AXON_ERR_NO_RESOURCE, rc.iface->ops->ep_am_short(ep, kAmData, &v, 4, nullptr, 0));
    double start = axon_test_time();
    while ((rc.iface->ops->ep_check(ep) == AXON_OK) && (axon_test_time() < start + 5)) {
        rc.progress();
    }
    double took = axon_test_time() - start;
    EXPECT_EQ(AXON_ERR_ENDPOINT_TIMEOUT, rc.iface->ops->ep_check(ep));
    EXPECT_LT(took, 2.0);
    EXPECT_GT(took, 0.8);
    EXPECT_EQ(AXON_ERR_ENDPOINT_TIMEOUT,
              rc.iface->ops->ep_am_short(ep, kAmData, &v, 4, nullptr, 0));
    ASSERT_EQ(1u, rc.failed.size());
    EXPECT_EQ(ghost, rc.failed[0]);
    EXPECT_TRUE(log.has("no answer to the connection request"));
    rc.iface->ops->ep_destroy(ep);

    /* the right QP but another worker's uuid: rejected at once */
    std::vector<uint8_t> b = rc.address();
    uint64_t other = 0x0dd;
    memcpy(b.data(), &other, 8);
    ASSERT_EQ(AXON_OK, rc.connect(b, &ep));
    start = axon_test_time();
    while ((rc.iface->ops->ep_check(ep) == AXON_OK) && (axon_test_time() < start + 5)) {
        rc.progress();
    }
    EXPECT_EQ(AXON_ERR_UNREACHABLE, rc.iface->ops->ep_check(ep));
    EXPECT_LT(axon_test_time() - start, 0.9);
    EXPECT_TRUE(log.has("request rejected"));
    rc.iface->ops->ep_destroy(ep);
}

int peer_victim(int fd, void *)
{
    Rc rc;
    std::vector<uint8_t> peer;
    axon_tl_ep_t *ep;

    PEER_CHECK(rc_start(rc, fd, &peer, &ep));
    uint32_t v = 7;
    PEER_CHECK(rc.send_short(ep, &v, 4, nullptr, 0) == AXON_OK);
    PEER_CHECK(rc.flush(ep) == AXON_OK);
    PEER_CHECK(axon_test_sync(fd) == 0);
    for (;;) {
        rc.progress();   /* until killed */
    }
    return 0;
}

TEST_F(VerbsRcXproc, KilledPeerIsReportedWithin5s)
{
    /* No SIGPIPE handling here on purpose: ringing a dead peer's doorbell must not raise it. */
    ASSERT_EQ(0, axon_test_peer_spawn(&peer, peer_victim, nullptr, kPeerTimeout));
    Rc rc;
    std::vector<uint8_t> addr;
    axon_tl_ep_t *ep;
    ASSERT_TRUE(rc_start(rc, peer.fd, &addr, &ep));
    ASSERT_TRUE(rc.wait_msgs(1));
    ASSERT_EQ(0, axon_test_sync(peer.fd));
    axon_test_peer_crash(&peer);
    /* the survivor only receives: keep-alive writes find the peer gone */
    double start = axon_test_time();
    while (rc.failed.empty() && (axon_test_time() < start + 10)) {
        rc.progress();
    }
    double took = axon_test_time() - start;
    ASSERT_EQ(1u, rc.failed.size());
    uint64_t peer_uuid;
    memcpy(&peer_uuid, addr.data(), 8);
    EXPECT_EQ(peer_uuid, rc.failed[0]);
    EXPECT_LT(took, 5.0);
    EXPECT_NE(AXON_OK, rc.iface->ops->ep_check(ep));
    uint32_t v = 1;
    EXPECT_NE(AXON_OK, rc.iface->ops->ep_am_short(ep, kAmData, &v, 4, nullptr, 0));
    rc.iface->ops->ep_destroy(ep);
}

/* ---------------------------------------------------------------- through the API */

int peer_tag(int fd, void *)
{
    axon_test_node_t node = {};
    axon_ep_h ep;

    PEER_CHECK(axon_test_node_create(&node, "rc", NULL, 0) == AXON_OK);
    PEER_CHECK(axon_test_connect_peer(fd, &node, &ep) == 0);
    for (size_t s : {(size_t)0, (size_t)8, (size_t)3000, (size_t)100000, (size_t)1 << 20}) {
        std::vector<uint8_t> buf(s + 1);
        axon_test_fill(buf.data(), s, s);
        PEER_CHECK(axon_test_send(node.worker, ep, buf.data(), s, 0x100 + s, kOpTimeout) ==
                   AXON_OK);
    }
    PEER_CHECK(axon_test_sync_progress(fd, node.worker, kOpTimeout) == 0);
    PEER_CHECK(axon_test_ep_close(node.worker, ep, 0, kOpTimeout) == AXON_OK);
    axon_test_node_destroy(&node);
    return 0;
}

TEST_F(VerbsRcXproc, TagMessagesThroughApi)
{
    ASSERT_EQ(0, axon_test_peer_spawn(&peer, peer_tag, nullptr, kPeerTimeout));
    axon_test_node_t node = {};
    void  *addr;
    size_t len;
    ASSERT_EQ(AXON_OK, axon_test_node_create(&node, "rc", NULL, 0));
    ASSERT_EQ(0, axon_test_exchange_address(peer.fd, node.address, node.address_length, &addr,
                                            &len));
    free(addr);
    for (size_t s : {(size_t)0, (size_t)8, (size_t)3000, (size_t)100000, (size_t)1 << 20}) {
        std::vector<uint8_t> buf(s + 1);
        ASSERT_EQ(AXON_OK, axon_test_recv(node.worker, buf.data(), s, 0x100 + s,
                                          AXON_TAG_MASK_FULL, NULL, kOpTimeout)) << s;
        EXPECT_EQ(-1, axon_test_check(buf.data(), s, s)) << s;
    }
    ASSERT_EQ(0, axon_test_sync_progress(peer.fd, node.worker, kOpTimeout));
    EXPECT_EQ(0, axon_test_peer_wait(&peer, kPeerTimeout));
    axon_test_node_destroy(&node);
}

/*
 * A worker that closes after its peer left, with an endpoint to it still
 * open, owes it a goodbye the peer's QP is gone to take: the peer's LEAVE
 * says not to wait for it (up to AXON_RC_CLOSE_WAIT_SEC, 0.5 s, a worker;
 * MPI_Finalize closes every rank at once). Timed: it measures that wait.
 */
TEST(VerbsRcTimed, CloseAfterThePeerLeftDoesNotWaitForIt)
{
    axon_test_node_t a = {}, b = {};
    axon_ep_h        ab, ba;
    char             out = 7, in = 0;

    ASSERT_EQ(AXON_OK, axon_test_node_create(&a, "rc", NULL, 0));
    ASSERT_EQ(AXON_OK, axon_test_node_create(&b, "rc", NULL, 0));
    axon_worker_h both[2] = {a.worker, b.worker};   /* one thread serves both */
    struct HookGuard {
        ~HookGuard() { axon_test_set_progress_hook(NULL, NULL); }
    } unhook;
    axon_test_set_progress_hook([](void *arg) {
        axon_worker_progress(static_cast<axon_worker_h *>(arg)[0]);
        axon_worker_progress(static_cast<axon_worker_h *>(arg)[1]);
    }, both);
    ASSERT_EQ(AXON_OK, axon_test_ep_create(a.worker, b.address, b.address_length, &ab));
    ASSERT_EQ(AXON_OK, axon_test_ep_create(b.worker, a.address, a.address_length, &ba));
    ASSERT_EQ(AXON_OK, axon_test_send(a.worker, ab, &out, 1, 1, kOpTimeout));
    ASSERT_EQ(AXON_OK, axon_test_recv(b.worker, &in, 1, 1, AXON_TAG_MASK_FULL, NULL, kOpTimeout));
    ASSERT_EQ(AXON_OK, axon_test_send(b.worker, ba, &out, 1, 2, kOpTimeout));
    ASSERT_EQ(AXON_OK, axon_test_recv(a.worker, &in, 1, 2, AXON_TAG_MASK_FULL, NULL, kOpTimeout));
    ASSERT_EQ(AXON_OK, axon_test_ep_close(a.worker, ab, AXON_EP_CLOSE_FLUSH, kOpTimeout));
    axon_test_set_progress_hook(NULL, NULL);
    axon_test_node_destroy(&a);

    LogCapture log;
    double     start = axon_test_time();
    axon_test_node_destroy(&b);
    double took = axon_test_time() - start;
    EXPECT_LT(took, 0.25) << "waited for a goodbye to a peer that left";
    EXPECT_FALSE(log.has("failed")) << "a peer that left reported as failed";
}

} // namespace
