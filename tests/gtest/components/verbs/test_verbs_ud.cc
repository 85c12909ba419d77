/*
 * ud transport over softib: active messages of every size class through the
 * ops table (one packet, fragments, both directions), a full window that
 * says NO_RESOURCE and recovers, late packets for the former owner of a
 * reused QP number dropped, keepalives that keep an idle peer healthy,
 * the memory one peer costs, and bad addresses; then, through the axon API
 * with AXON_TLS=ud across processes, 10 000 tag messages of mixed sizes that
 * arrive exactly once, in order and intact over a wire that loses, reorders
 * or duplicates packets, and a peer killed mid-transfer that turns into an
 * endpoint error within the configured timeout while the survivor keeps
 * talking to another peer.
 *
 * softib reads AXON_SOFTIB_* when a device is opened, so a test sets them
 * before it opens an iface (or, for process tests, in each child).
 */
#include <gtest/gtest.h>

#include <malloc.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "axon.h"
#include "harness.h"
#include "log_capture.h"

extern "C" {
#include "component.h"
#include "loader.h"
#include "env_guard.h"
#include "framework/device/softib/softib_registry.h"
#include "framework/device/softib/softib_wire.h"
}

namespace {

const double     kOpTimeout   = 30.0;
const double     kPeerTimeout = 120.0;
const uint8_t    kAmId        = 3;

/* ---------------------------------------------------------------- ops-table level */

/* One ud iface opened straight through the component, as a worker would. */
struct UdIface {
    axon_component_set_t           set   = {NULL, 0};
    const axon_loaded_component_t *comp  = nullptr;
    const axon_resource_t         *rsc   = nullptr;
    axon_iface_t                  *iface = nullptr;
    axon_am_handler_t              handlers[AXON_AM_ID_MAX] = {};
    uint64_t                       uuid  = 0;
    std::vector<std::string>       got;
    std::vector<uint64_t>          failed;
    std::vector<uint8_t>           dev_addr, iface_addr;

    static void on_am(void *arg, const void *data, size_t length, unsigned)
    {
        UdIface *self = static_cast<UdIface *>(arg);
        EXPECT_EQ(0u, (uintptr_t)data % 8) << "AM data must be 8-byte aligned";
        self->got.emplace_back(static_cast<const char *>(data), length);
    }

    static void on_failure(void *arg, uint64_t peer_uuid, axon_status_t)
    {
        static_cast<UdIface *>(arg)->failed.push_back(peer_uuid);
    }

    /* Load the components (overrides in kv) and open ud on the first port. */
    bool open(const std::vector<axon_config_kv_t> &kv = {})
    {
        axon_config_names_t  path = {NULL, 0};
        axon_iface_params_t  params;

        if (axon_loader_load_all(&path, kv.data(), kv.size(), NULL, 0, &set) != AXON_OK) {
            return false;
        }
        for (unsigned i = 0; i < set.count; ++i) {
            if ((set.comps[i].component != NULL) && !strcmp(set.comps[i].name, "ud")) {
                comp = &set.comps[i];
            }
        }
        if ((comp == nullptr) || (comp->num_resources == 0)) {
            return false;
        }
        rsc = &comp->resources[0];
        handlers[kAmId]     = on_am;
        uuid                = 0x1000000000000000ull | ((uint64_t)getpid() << 16) | rand() % 65536;
        params.am_handlers  = handlers;
        params.am_arg       = this;
        params.worker_uuid  = uuid;
        params.am_rx_dest   = NULL;
        params.peer_failure = on_failure;
        if (comp->component->iface_open(rsc, comp->config, &params, &iface) != AXON_OK) {
            iface = nullptr;
            return false;
        }
        dev_addr.resize(iface->ops->dev_addr_len);
        iface_addr.resize(iface->ops->iface_addr_len);
        return iface->ops->iface_get_address(iface, dev_addr.data(), iface_addr.data()) ==
               AXON_OK;
    }

    ~UdIface()
    {
        if (iface != nullptr) {
            iface->ops->iface_close(iface);
        }
        axon_loader_unload_all(&set);
    }

    const axon_iface_ops_t *ops() const { return iface->ops; }
    void progress() { iface->ops->iface_progress(iface); }

    axon_tl_ep_t *connect(const UdIface &peer)
    {
        axon_tl_ep_t *ep = nullptr;
        EXPECT_EQ(AXON_OK, ops()->ep_create(iface, peer.uuid, peer.dev_addr.data(),
                                            peer.iface_addr.data(), &ep));
        if (ep != nullptr) {
            ep->iface = iface;
        }
        return ep;
    }
};

/* Progress both until cond() or timeout; returns cond(). */
template <typename F> bool progress_until(UdIface &a, UdIface &b, F cond, double timeout)
{
    double deadline = axon_test_time() + timeout;
    while (!cond()) {
        if (axon_test_time() > deadline) {
            return false;
        }
        a.progress();
        b.progress();
    }
    return true;
}

std::string pattern(size_t len, uint64_t seed)
{
    std::string s(len, '\0');
    axon_test_fill(&s[0], len, seed);
    return s;
}

struct PackArg {
    const std::string *data;
};

size_t pack_string(void *dest, void *arg)
{
    const std::string *s = static_cast<PackArg *>(arg)->data;
    memcpy(dest, s->data(), s->size());
    return s->size();
}

/* Send by bcopy, retrying through progress while the window is full. */
bool send_bcopy(UdIface &from, axon_tl_ep_t *ep, UdIface &to, const std::string &msg)
{
    PackArg arg = {&msg};
    double  deadline = axon_test_time() + kOpTimeout;
    for (;;) {
        ssize_t ret = from.ops()->ep_am_bcopy(ep, kAmId, pack_string, &arg);
        if (ret >= 0) {
            return (size_t)ret == msg.size();
        }
        if ((ret != AXON_ERR_NO_RESOURCE) || (axon_test_time() > deadline)) {
            ADD_FAILURE() << "am_bcopy of " << msg.size() << " bytes: " << ret;
            return false;
        }
        from.progress();
        to.progress();
    }
}

class VerbsUd : public ::testing::Test {
protected:
    EnvGuard env_;

    void SetUp() override
    {
        /* A fresh, fault-free softib unless a test says otherwise. */
        env_.set("AXON_SOFTIB_LOSS", "0");
        env_.set("AXON_SOFTIB_DUP", "0");
        env_.set("AXON_SOFTIB_REORDER", "0");
    }

    void open_pair(UdIface &a, UdIface &b, const std::vector<axon_config_kv_t> &kv = {})
    {
        ASSERT_TRUE(a.open(kv)) << "cannot open a ud iface on softib";
        ASSERT_TRUE(b.open(kv));
    }
};

TEST_F(VerbsUd, ResourceAdvertisesUdCapabilities)
{
    UdIface a;
    ASSERT_TRUE(a.open());
    EXPECT_STREQ("ud", a.rsc->tl_name);
    EXPECT_NE(nullptr, strchr(a.rsc->dev_name, ':')) << a.rsc->dev_name;
    uint64_t want = AXON_CAP_AM_SHORT | AXON_CAP_AM_BCOPY | AXON_CAP_CONNECT_TO_IFACE |
                    AXON_CAP_AM_ORDERED | AXON_CAP_PEER_FAILURE;
    EXPECT_EQ(want, a.rsc->cap_flags & want);
    EXPECT_EQ(0u, a.rsc->cap_flags & (AXON_CAP_AM_ZCOPY | AXON_CAP_GET | AXON_CAP_PUT));
    EXPECT_EQ(8192u, a.rsc->max_bcopy);
    EXPECT_GT(a.rsc->max_short, 200u);
    EXPECT_GT(a.rsc->ep_memory, 0u);
    EXPECT_LE(a.rsc->ep_memory, 512u) << "a UD peer should cost a few hundred bytes";
    EXPECT_EQ(nullptr, a.ops()->ep_am_zcopy);
}

/* Sizes around the packet boundary, short and bcopy, both ways, in order. */
TEST_F(VerbsUd, AmSizesBothWays)
{
    UdIface a, b;
    open_pair(a, b);
    const size_t mtu  = a.rsc->max_short;  /* payload bytes of one packet */
    const size_t seg  = a.rsc->max_bcopy;
    std::vector<size_t> sizes = {0, 1, mtu - 1, mtu, mtu + 1, 2 * mtu + 3, seg - 1, seg};

    axon_tl_ep_t *ab = a.connect(b);
    axon_tl_ep_t *ba = b.connect(a);
    ASSERT_NE(nullptr, ab);
    ASSERT_NE(nullptr, ba);

    std::vector<std::string> sent_ab, sent_ba;
    uint64_t seed = 1;
    for (size_t len : {(size_t)0, (size_t)1, mtu - 1, mtu}) {
        std::string m = pattern(len, seed++);
        ASSERT_EQ(AXON_OK, a.ops()->ep_am_short(ab, kAmId, m.data(), len / 2,
                                                m.data() + len / 2, len - len / 2))
            << len;
        sent_ab.push_back(m);
    }
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, a.ops()->ep_am_short(ab, kAmId, "x", 1, "y", mtu))
        << "one byte over max_short";
    for (size_t len : sizes) {
        std::string m = pattern(len, seed++);
        ASSERT_TRUE(send_bcopy(a, ab, b, m));
        sent_ab.push_back(m);
        m = pattern(len, seed++);
        ASSERT_TRUE(send_bcopy(b, ba, a, m));
        sent_ba.push_back(m);
    }
    ASSERT_TRUE(progress_until(a, b, [&] {
        return (b.got.size() >= sent_ab.size()) && (a.got.size() >= sent_ba.size());
    }, kOpTimeout)) << "b got " << b.got.size() << "/" << sent_ab.size() << ", a got "
                    << a.got.size() << "/" << sent_ba.size();
    ASSERT_EQ(sent_ab.size(), b.got.size());
    ASSERT_EQ(sent_ba.size(), a.got.size());
    for (size_t i = 0; i < sent_ab.size(); ++i) {
        EXPECT_TRUE(sent_ab[i] == b.got[i]) << "a->b message " << i << " (" << sent_ab[i].size()
                                            << " bytes, got " << b.got[i].size() << ")";
    }
    for (size_t i = 0; i < sent_ba.size(); ++i) {
        EXPECT_TRUE(sent_ba[i] == a.got[i]) << "b->a message " << i;
    }
    /* Flushed means acknowledged. */
    ASSERT_TRUE(progress_until(a, b, [&] {
        return (a.ops()->ep_flush(ab) == AXON_OK) && (b.ops()->ep_flush(ba) == AXON_OK);
    }, kOpTimeout));
    a.ops()->ep_destroy(ab);
    b.ops()->ep_destroy(ba);
    progress_until(a, b, [] { return false; }, 0.05);
    EXPECT_TRUE(a.failed.empty() && b.failed.empty()) << "a goodbye is not a failure";
}

/* Both sides create their ep at once: one connection each, shared by further eps. */
TEST_F(VerbsUd, SimultaneousConnectSharesOneConnection)
{
    UdIface a, b;
    open_pair(a, b);
    axon_tl_ep_t *ab  = a.connect(b);
    axon_tl_ep_t *ba  = b.connect(a);
    axon_tl_ep_t *ab2 = a.connect(b);
    EXPECT_EQ(ab, ab2) << "a second ep to the same peer shares the connection";
    for (int i = 0; i < 10; ++i) {
        std::string m = pattern(40, 100 + i);
        ASSERT_EQ(AXON_OK, a.ops()->ep_am_short(i % 2 ? ab : ab2, kAmId, NULL, 0, m.data(), 40));
        ASSERT_EQ(AXON_OK, b.ops()->ep_am_short(ba, kAmId, NULL, 0, m.data(), 40));
    }
    ASSERT_TRUE(progress_until(a, b, [&] { return a.got.size() == 10 && b.got.size() == 10; },
                               kOpTimeout));
    for (int i = 0; i < 10; ++i) {
        EXPECT_EQ(pattern(40, 100 + i), a.got[i]);
        EXPECT_EQ(pattern(40, 100 + i), b.got[i]);
    }
    a.ops()->ep_destroy(ab2);
    EXPECT_EQ(AXON_OK, a.ops()->ep_check(ab)) << "the other ep still holds the connection";
    a.ops()->ep_destroy(ab);
    b.ops()->ep_destroy(ba);
}

/*
 * QP numbers come back (softib gives a closed context's slot to the next one
 * opened), and connection ids repeat between workers: a peer of a closed
 * worker, sending on, reaches whoever has its QP number now, with ids that
 * may name one of its connections. Only the source QP tells the packet is
 * not from that connection's peer. Taken, it would use up the PSN of the
 * real peer's next message, which would then be dropped as a duplicate and
 * acknowledged: a stall nothing retransmits (collectives over ud_n6 hung so).
 */
TEST_F(VerbsUd, PacketsForTheFormerOwnerOfAQpNumberAreDropped)
{
    std::unique_ptr<UdIface> a(new UdIface);
    UdIface b, c;
    ASSERT_TRUE(a->open());
    open_pair(b, c);
    bool b_hears = true;
    auto progress_all = [&](UdIface &x, const std::function<bool()> &cond, double timeout) {
        double deadline = axon_test_time() + timeout;
        while (!cond() && (axon_test_time() < deadline)) {
            x.progress();
            if (b_hears) {
                b.progress();
            }
            c.progress();
        }
        return cond();
    };
    uint64_t v = 1;

    /* a connects to b (ids: each side's first connection), then is closed. */
    axon_tl_ep_t *ab = a->connect(b);
    ASSERT_EQ(AXON_OK, a->ops()->ep_am_short(ab, kAmId, NULL, 0, &v, sizeof(v)));
    ASSERT_TRUE(progress_all(*a, [&] {
        return (b.got.size() == 1) && (a->ops()->ep_flush(ab) == AXON_OK);
    }, kOpTimeout));
    axon_tl_ep_t *ba = b.connect(*a);
    std::vector<uint8_t> a_qp = a->iface_addr;
    a->ops()->ep_destroy(ab);
    a.reset();
    b_hears = false;   /* a's LEAVE stays unread, as if lost: b is not told */

    /* a2 takes a's QP number (softib hands a slot's numbers on from where its last owner
     * stopped: rewound here, as after their wrap); its first connection, to c, may have
     * the ids a's had. */
    uint32_t a_qpn;
    memcpy(&a_qpn, a_qp.data(), sizeof(a_qpn));
    softib_registry_t *reg = nullptr;
    ASSERT_EQ(0, softib_registry_open(0, &reg));
    softib_registry_set_next_qp_index(reg, SOFTIB_QPN_SLOT(a_qpn), SOFTIB_QPN_INDEX(a_qpn));
    softib_registry_close(reg);
    UdIface a2;
    ASSERT_TRUE(a2.open());
    if (a2.iface_addr != a_qp) {
        GTEST_SKIP() << "another process took the softib slot of the closed iface";
    }
    axon_tl_ep_t *a2c = a2.connect(c);
    ASSERT_EQ(AXON_OK, a2.ops()->ep_am_short(a2c, kAmId, NULL, 0, &v, sizeof(v)));
    ASSERT_TRUE(progress_all(a2, [&] {
        return (c.got.size() == 1) && (a2.ops()->ep_flush(a2c) == AXON_OK);
    }, kOpTimeout));
    axon_tl_ep_t *ca = c.connect(a2);

    /* b, not told, sends to a; then c sends to a2: a2 gets c's message only. */
    ASSERT_EQ(AXON_OK, b.ops()->ep_am_short(ba, kAmId, NULL, 0, "stray", 5));
    b_hears = true;
    progress_all(a2, [] { return false; }, 0.05);
    ASSERT_EQ(AXON_OK, c.ops()->ep_am_short(ca, kAmId, NULL, 0, "real", 4));
    progress_all(a2, [&] { return !a2.got.empty(); }, 5.0);
    progress_all(a2, [] { return false; }, 0.1);
    ASSERT_EQ(1u, a2.got.size()) << "first: " << (a2.got.empty() ? "" : a2.got[0]);
    EXPECT_EQ("real", a2.got[0]);
    b.ops()->ep_destroy(ba);
    c.ops()->ep_destroy(ca);
    a2.ops()->ep_destroy(a2c);
}

/* A full window is NO_RESOURCE; once the peer acknowledges, sending goes on. */
TEST_F(VerbsUd, WindowExhaustionRecovers)
{
    UdIface a, b;
    open_pair(a, b, {{"UD_TX_WINDOW", "8"}});
    axon_tl_ep_t *ab = a.connect(b);
    ASSERT_NE(nullptr, ab);

    int sent = 0;
    axon_status_t st = AXON_OK;
    while (sent < 100) {
        uint64_t v = sent;
        st = a.ops()->ep_am_short(ab, kAmId, NULL, 0, &v, sizeof(v));
        if (st != AXON_OK) {
            break;
        }
        ++sent;
    }
    EXPECT_EQ(AXON_ERR_NO_RESOURCE, st);
    EXPECT_GE(sent, 1);
    EXPECT_LT(sent, 8) << "the window is 8 packets, the connect request included";
    EXPECT_EQ(AXON_INPROGRESS, a.ops()->ep_flush(ab));

    /* The rest goes as the receiver acknowledges. */
    int total = 200;
    double deadline = axon_test_time() + kOpTimeout;
    while ((sent < total) && (axon_test_time() < deadline)) {
        uint64_t v = sent;
        st = a.ops()->ep_am_short(ab, kAmId, NULL, 0, &v, sizeof(v));
        if (st == AXON_OK) {
            ++sent;
        } else {
            ASSERT_EQ(AXON_ERR_NO_RESOURCE, st);
            a.progress();
            b.progress();
        }
    }
    ASSERT_EQ(total, sent);
    ASSERT_TRUE(progress_until(a, b, [&] { return (int)b.got.size() == total; }, kOpTimeout));
    for (int i = 0; i < total; ++i) {
        uint64_t v;
        ASSERT_EQ(sizeof(v), b.got[i].size());
        memcpy(&v, b.got[i].data(), sizeof(v));
        ASSERT_EQ((uint64_t)i, v) << "in order, exactly once";
    }
    a.ops()->ep_destroy(ab);
}

/* Loss, reordering and duplication on the wire: every AM once, in order, intact. */
class VerbsUdWireTimed : public VerbsUd,
                      public ::testing::WithParamInterface<std::pair<const char *, const char *>> {
};

TEST_P(VerbsUdWireTimed, MixedSizesExactlyOnceInOrder)
{
    env_.set(GetParam().first, GetParam().second);
    env_.set("AXON_SOFTIB_REORDER", "0.1");
    env_.set("AXON_SOFTIB_SEED", "12345");
    UdIface a, b;
    open_pair(a, b, {{"UD_RETX_TIMEOUT", "5ms"}});
    axon_tl_ep_t *ab = a.connect(b);
    axon_tl_ep_t *ba = b.connect(a);
    const size_t sizes[] = {0, 8, 100, 1000, 4000, 4100, 8192, 3, 64, 2000};
    const int    count   = 2000;

    for (int i = 0; i < count; ++i) {
        std::string m = pattern(sizes[i % 10], 7000 + i);
        ASSERT_TRUE(send_bcopy(a, ab, b, m)) << i;
        if (i % 4 == 0) {
            ASSERT_TRUE(send_bcopy(b, ba, a, m)) << i;
        }
    }
    ASSERT_TRUE(progress_until(a, b, [&] {
        return ((int)b.got.size() >= count) && ((int)a.got.size() >= count / 4);
    }, 60.0)) << "b got " << b.got.size() << ", a got " << a.got.size();
    progress_until(a, b, [] { return false; }, 0.1);  /* late duplicates must not show */
    ASSERT_EQ((size_t)count, b.got.size());
    ASSERT_EQ((size_t)count / 4, a.got.size());
    for (int i = 0; i < count; ++i) {
        ASSERT_TRUE(pattern(sizes[i % 10], 7000 + i) == b.got[i]) << "message " << i;
    }
    for (int i = 0; i < count / 4; ++i) {
        ASSERT_TRUE(pattern(sizes[(4 * i) % 10], 7000 + 4 * i) == a.got[i]) << "reply " << i;
    }
    EXPECT_TRUE(a.failed.empty() && b.failed.empty());
    a.ops()->ep_destroy(ab);
    b.ops()->ep_destroy(ba);
}

INSTANTIATE_TEST_SUITE_P(Wire, VerbsUdWireTimed,
                         ::testing::Values(std::make_pair("AXON_SOFTIB_LOSS", "0.1"),
                                           std::make_pair("AXON_SOFTIB_DUP", "0.1")),
                         [](const ::testing::TestParamInfo<std::pair<const char *, const char *>>
                                &info) { return std::string(info.param.first + 12); });

/* An idle live peer is kept by keepalives, never failed. */
/*
 * Timed: these wait on ud's failure timer, shortened to fit the test; a peer
 * starved of CPU would look dead, so they run alone (tests/README.md).
 */
class VerbsUdTimed : public VerbsUd {};

TEST_F(VerbsUdTimed, IdlePeerStaysHealthy)
{
    UdIface a, b;
    open_pair(a, b, {{"UD_KEEPALIVE_INTERVAL", "100ms"}, {"UD_TIMEOUT", "500ms"}});
    axon_tl_ep_t *ab = a.connect(b);
    uint64_t v = 1;
    ASSERT_EQ(AXON_OK, a.ops()->ep_am_short(ab, kAmId, NULL, 0, &v, sizeof(v)));
    ASSERT_TRUE(progress_until(a, b, [&] { return b.got.size() == 1; }, kOpTimeout));
    double until = axon_test_time() + 3.0;
    while (axon_test_time() < until) {
        a.progress();
        b.progress();
        usleep(200);
    }
    EXPECT_EQ(AXON_OK, a.ops()->ep_check(ab));
    EXPECT_TRUE(a.failed.empty()) << "a failed its live peer";
    EXPECT_TRUE(b.failed.empty()) << "b failed its live peer";
    ASSERT_EQ(AXON_OK, a.ops()->ep_am_short(ab, kAmId, NULL, 0, &v, sizeof(v)));
    ASSERT_TRUE(progress_until(a, b, [&] { return b.got.size() == 2; }, kOpTimeout));
    a.ops()->ep_destroy(ab);
}

/* A peer that never answers (no progress, no alive thread) turns into an ep
 * error and one peer_failure. */
TEST_F(VerbsUdTimed, SilentPeerFailsWithinTimeout)
{
    UdIface a, b;
    ASSERT_TRUE(a.open({{"UD_TIMEOUT", "300ms"}}));
    ASSERT_TRUE(b.open({{"UD_TIMEOUT", "300ms"}, {"UD_ALIVE", "n"}}));
    axon_tl_ep_t *ab = a.connect(b);
    uint64_t v = 1;
    ASSERT_EQ(AXON_OK, a.ops()->ep_am_short(ab, kAmId, NULL, 0, &v, sizeof(v)));
    /* b never progresses: nothing is acknowledged, and nothing answers probes. */
    double start = axon_test_time();
    while ((a.failed.empty()) && (axon_test_time() < start + 5.0)) {
        a.progress();
    }
    double took = axon_test_time() - start;
    ASSERT_EQ(1u, a.failed.size());
    EXPECT_EQ(b.uuid, a.failed[0]);
    EXPECT_LT(took, 1.0) << "AXON_UD_TIMEOUT=300ms";
    EXPECT_EQ(AXON_ERR_ENDPOINT_TIMEOUT, a.ops()->ep_check(ab));
    EXPECT_EQ(AXON_ERR_ENDPOINT_TIMEOUT, a.ops()->ep_am_short(ab, kAmId, NULL, 0, &v, 8));
    EXPECT_EQ(AXON_ERR_ENDPOINT_TIMEOUT, a.ops()->ep_flush(ab));
    for (int i = 0; i < 100; ++i) {
        a.progress();
    }
    EXPECT_EQ(1u, a.failed.size()) << "reported once";
    a.ops()->ep_destroy(ab);
}

/*
 * One side fails a connection whose peer lives on (the peer neither
 * progressed nor answered probes for a timeout). When the peer sends
 * again, it is told (RESET) and fails its side too: before, its own probes
 * answered by the live process, it waited for acks forever (a soak's
 * restarted rank, starved for seconds, lost its requests so).
 */
TEST_F(VerbsUdTimed, PeerThatFailedUsSaysSoWhenWeSendAgain)
{
    UdIface a, b;
    ASSERT_TRUE(a.open({{"UD_TIMEOUT", "300ms"}}));
    ASSERT_TRUE(b.open({{"UD_TIMEOUT", "300ms"}, {"UD_ALIVE", "n"}}));
    axon_tl_ep_t *ab = a.connect(b);
    uint64_t v = 1;
    ASSERT_EQ(AXON_OK, a.ops()->ep_am_short(ab, kAmId, NULL, 0, &v, sizeof(v)));
    ASSERT_TRUE(progress_until(a, b, [&] {
        return (b.got.size() == 1) && (a.ops()->ep_flush(ab) == AXON_OK);
    }, kOpTimeout));
    axon_tl_ep_t *ba = b.connect(a);

    /* b stops progressing: a fails it, b still holds its side */
    ASSERT_EQ(AXON_OK, a.ops()->ep_am_short(ab, kAmId, NULL, 0, &v, sizeof(v)));
    double start = axon_test_time();
    while (a.failed.empty() && (axon_test_time() < start + 5.0)) {
        a.progress();
    }
    ASSERT_EQ(1u, a.failed.size());
    a.ops()->ep_destroy(ab);   /* as the upper layer does after the failure */
    EXPECT_EQ(AXON_OK, b.ops()->ep_check(ba));

    /* b comes back and sends: it learns, and its sends end with an error */
    EXPECT_EQ(AXON_OK, b.ops()->ep_am_short(ba, kAmId, NULL, 0, &v, sizeof(v)));
    EXPECT_TRUE(progress_until(a, b, [&] { return !b.failed.empty(); }, 3.0))
        << "b kept its side of a connection a failed";
    ASSERT_EQ(1u, b.failed.size());
    EXPECT_EQ(a.uuid, b.failed[0]);
    EXPECT_EQ(AXON_ERR_CONNECTION_RESET, b.ops()->ep_am_short(ba, kAmId, NULL, 0, &v, 8));
    EXPECT_EQ(1u, a.failed.size()) << "a reported b once";
    b.ops()->ep_destroy(ba);
}

/* Progress only a, for seconds: its peer computes. */
void progress_alone(UdIface &a, double seconds)
{
    double until = axon_test_time() + seconds;
    while (axon_test_time() < until) {
        a.progress();
    }
}

/* A peer that computes without progressing, for 3 timeouts, is kept: its
 * alive thread answers the probes. Once it progresses, the message arrives. */
void check_busy_peer_kept()
{
    UdIface a, b;
    ASSERT_TRUE(a.open({{"UD_TIMEOUT", "500ms"}})) << "cannot open a ud iface on softib";
    ASSERT_TRUE(b.open({{"UD_TIMEOUT", "500ms"}}));
    axon_tl_ep_t *ab = a.connect(b);
    uint64_t v = 7;
    ASSERT_EQ(AXON_OK, a.ops()->ep_am_short(ab, kAmId, NULL, 0, &v, sizeof(v)));
    progress_alone(a, 1.5);
    EXPECT_TRUE(a.failed.empty()) << "a busy peer was taken for dead";
    EXPECT_EQ(AXON_OK, a.ops()->ep_check(ab));
    ASSERT_TRUE(progress_until(a, b, [&] { return b.got.size() == 1; }, kOpTimeout));
    EXPECT_EQ(std::string((const char *)&v, sizeof(v)), b.got[0]);
    EXPECT_TRUE(progress_until(a, b, [&] { return a.ops()->ep_flush(ab) == AXON_OK; },
                               kOpTimeout)) << "the message was never acknowledged";
    EXPECT_TRUE(a.failed.empty());
    a.ops()->ep_destroy(ab);
}

TEST_F(VerbsUdTimed, BusyPeerIsKeptByItsAliveThread)
{
    check_busy_peer_kept();
}

/* The same where the device has no completion channels: the alive thread polls. */
TEST_F(VerbsUdTimed, BusyPeerIsKeptWithoutCompletionChannels)
{
    env_.set("AXON_SOFTIB_CAP_MASK", "comp_channel");
    check_busy_peer_kept();
}

/* Once the busy peer's iface closes (its alive thread with it), it fails in time. */
TEST_F(VerbsUdTimed, ClosedBusyPeerFailsWithinTimeout)
{
    UdIface a;
    auto   *b = new UdIface;
    ASSERT_TRUE(a.open({{"UD_TIMEOUT", "300ms"}}));
    ASSERT_TRUE(b->open({{"UD_TIMEOUT", "300ms"}}));
    axon_tl_ep_t *ab = a.connect(*b);
    uint64_t v = 1;
    ASSERT_EQ(AXON_OK, a.ops()->ep_am_short(ab, kAmId, NULL, 0, &v, sizeof(v)));
    progress_alone(a, 0.6);
    ASSERT_TRUE(a.failed.empty()) << "a busy peer was taken for dead";
    uint64_t b_uuid = b->uuid;
    delete b;  /* no goodbye: it never progresses again */
    double start = axon_test_time();
    while (a.failed.empty() && (axon_test_time() < start + 5.0)) {
        a.progress();
    }
    ASSERT_EQ(1u, a.failed.size());
    EXPECT_EQ(b_uuid, a.failed[0]);
    EXPECT_LT(axon_test_time() - start, 1.0) << "AXON_UD_TIMEOUT=300ms";
    EXPECT_EQ(AXON_ERR_ENDPOINT_TIMEOUT, a.ops()->ep_check(ab));
    a.ops()->ep_destroy(ab);
}

/* ep_memory is what an endpoint to a new peer really allocates. */
/* Heap: measures malloc, which the sanitizers replace (tests/README.md). */
class VerbsUdHeap : public VerbsUd {};

TEST_F(VerbsUdHeap, EpMemoryMatchesAllocation)
{
    UdIface a, b;
    open_pair(a, b);
    const int n = 256;
    std::vector<axon_tl_ep_t *> eps;

    /* Warm up: the address handle and the first table slots. */
    eps.push_back(a.connect(b));
    struct mallinfo2 before = mallinfo2();
    for (int i = 1; i <= n; ++i) {
        axon_tl_ep_t *ep = nullptr;
        /* Distinct peer ids: a connection each (b drops the requests: wrong worker). */
        ASSERT_EQ(AXON_OK, a.ops()->ep_create(a.iface, b.uuid + i, b.dev_addr.data(),
                                              b.iface_addr.data(), &ep));
        eps.push_back(ep);
    }
    struct mallinfo2 after = mallinfo2();
    double per_ep = (double)(after.uordblks - before.uordblks) / n;
    if (after.uordblks == before.uordblks) {
        for (axon_tl_ep_t *ep : eps) {
            a.ops()->ep_destroy(ep);
        }
        GTEST_SKIP() << "malloc is not glibc's here (valgrind?): mallinfo2 counts nothing";
    }
    printf("ud: ep_memory %zu bytes, measured %.0f bytes per peer\n", a.rsc->ep_memory, per_ep);
    EXPECT_GE(per_ep, 0.7 * (double)a.rsc->ep_memory);
    EXPECT_LE(per_ep, 1.5 * (double)a.rsc->ep_memory + 32);
    for (axon_tl_ep_t *ep : eps) {
        a.ops()->ep_destroy(ep);
    }
}

/* Garbage addresses: a clean error, never a crash. */
TEST_F(VerbsUd, BadAddressesAreRefused)
{
    UdIface a, b;
    open_pair(a, b);
    axon_tl_ep_t *ep = nullptr;
    std::vector<uint8_t> dev(b.dev_addr), ifa(b.iface_addr);

    std::vector<uint8_t> junk(dev.size(), 0xff);
    EXPECT_FALSE(a.ops()->iface_is_reachable(a.iface, junk.data(), ifa.data()));
    EXPECT_NE(AXON_OK, a.ops()->ep_create(a.iface, b.uuid, junk.data(), ifa.data(), &ep));
    std::vector<uint8_t> zero_qpn(ifa.size(), 0);
    EXPECT_FALSE(a.ops()->iface_is_reachable(a.iface, dev.data(), zero_qpn.data()));
    EXPECT_EQ(AXON_ERR_INVALID_ADDR,
              a.ops()->ep_create(a.iface, b.uuid, dev.data(), zero_qpn.data(), &ep));
    std::vector<uint8_t> big_qpn(ifa.size(), 0xff);
    EXPECT_EQ(AXON_ERR_INVALID_ADDR,
              a.ops()->ep_create(a.iface, b.uuid, dev.data(), big_qpn.data(), &ep));
    EXPECT_EQ(AXON_ERR_INVALID_ADDR, a.ops()->ep_create(a.iface, b.uuid, NULL, NULL, &ep));
    EXPECT_TRUE(a.ops()->iface_is_reachable(a.iface, dev.data(), ifa.data()));
}

/* ---------------------------------------------------------------- axon API, processes */

const axon_tag_t kTagData  = 0x100000;
const axon_tag_t kTagReady = 0x200000;

/* Mixed sizes, from one packet to eager fragments of several segments. */
size_t msg_size(int i)
{
    static const size_t sizes[] = {0, 1, 7, 64, 500, 1500, 4000, 4100, 9000, 20000};
    return sizes[i % 10];
}

std::vector<axon_config_kv_t> ud_config()
{
    return {{"UD_TIMEOUT", "1s"}, {"UD_KEEPALIVE_INTERVAL", "250ms"},
            {"UD_RETX_TIMEOUT", "5ms"}};
}

struct Node {
    axon_test_node_t node = {};
    bool             patient = false;  /* a long UD_TIMEOUT: never the one to detect */
    void            *peer_addr = nullptr;
    size_t           peer_len  = 0;
    ~Node()
    {
        free(peer_addr);
        if (node.context != nullptr) {
            axon_test_node_destroy(&node);
        }
    }
    bool init(int fd)
    {
        std::vector<axon_config_kv_t> kv = ud_config();
        if (patient) {
            kv[0].value = "10s";
        }
        return (axon_test_node_create(&node, "ud", kv.data(), kv.size()) == AXON_OK) &&
               (axon_test_exchange_address(fd, node.address, node.address_length, &peer_addr,
                                           &peer_len) == 0);
    }
};

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

axon_ep_h make_ep(Node &n, ErrCount *err)
{
    axon_ep_params_t params = {};
    axon_ep_h        ep     = nullptr;
    params.address        = n.peer_addr;
    params.address_length = n.peer_len;
    params.err_cb         = err_cb;
    params.err_cb_arg     = err;
    return (axon_ep_create(n.node.worker, &params, &ep) == AXON_OK) ? ep : nullptr;
}

/* Sender: count messages of mixed sizes, at most 32 in flight. */
int send_stream(Node &n, axon_ep_h ep, int count)
{
    const int                    inflight = 32;
    std::vector<std::string>     bufs(inflight);
    std::vector<axon_request_h>  reqs(inflight, nullptr);
    for (int i = 0; i < count + inflight; ++i) {
        int slot = i % inflight;
        if (reqs[slot] != nullptr) {
            if (axon_test_wait_req(n.node.worker, AXON_INPROGRESS, reqs[slot], NULL,
                                   kOpTimeout) != AXON_OK) {
                fprintf(stderr, "send %d failed\n", i - inflight);
                return 1;
            }
            reqs[slot] = nullptr;
        }
        if (i >= count) {
            continue;
        }
        bufs[slot] = pattern(msg_size(i), 50000 + i);
        axon_status_t st = axon_tag_send_nb(ep, bufs[slot].data(), bufs[slot].size(),
                                            kTagData + i, NULL, &reqs[slot]);
        if (st == AXON_OK) {
            reqs[slot] = nullptr;
        } else if (st != AXON_INPROGRESS) {
            fprintf(stderr, "send %d: %s\n", i, axon_status_string(st));
            return 1;
        }
    }
    return 0;
}

/* Receiver: every message once, in order (any tag accepted), data intact. */
int recv_stream(Node &n, int count)
{
    std::vector<char> buf(64 * 1024);
    for (int i = 0; i < count; ++i) {
        axon_tag_recv_info_t info;
        if (axon_test_recv(n.node.worker, buf.data(), buf.size(), 0, 0, &info, kOpTimeout) !=
            AXON_OK) {
            fprintf(stderr, "receive %d timed out\n", i);
            return 1;
        }
        if ((info.sender_tag != kTagData + (axon_tag_t)i) || (info.length != msg_size(i)) ||
            (axon_test_check(buf.data(), info.length, 50000 + i) != -1)) {
            fprintf(stderr, "receive %d: tag 0x%llx length %zu, or data wrong\n", i,
                    (unsigned long long)info.sender_tag, info.length);
            return 1;
        }
    }
    /* Nothing more may show up: no duplicates. */
    axon_test_progress_for(n.node.worker, 0.2);
    axon_tag_recv_info_t info;
    axon_tag_message_h   msg;
    if (axon_tag_probe_nb(n.node.worker, 0, 0, 0, &info, &msg) != AXON_ERR_NO_MESSAGE) {
        fprintf(stderr, "an extra message arrived (tag 0x%llx)\n",
                (unsigned long long)info.sender_tag);
        return 1;
    }
    return 0;
}

struct StreamArg {
    const char *fault;
    int         count;
    bool        sender;
};

int stream_peer(int fd, void *arg_v)
{
    StreamArg *arg = static_cast<StreamArg *>(arg_v);
    setenv(arg->fault, "0.1", 1);
    setenv("AXON_SOFTIB_REORDER", "0.1", 1);
    Node n;
    if (!n.init(fd)) {
        return 10;
    }
    ErrCount  err;
    int       ret;
    if (arg->sender) {
        axon_ep_h ep = make_ep(n, &err);
        if (ep == nullptr) {
            return 11;
        }
        ret = send_stream(n, ep, arg->count);
        /* The receiver checks everything before either side leaves. */
        if ((ret == 0) && (axon_test_sync_progress(fd, n.node.worker, kOpTimeout) != 0)) {
            ret = 12;
        }
        axon_test_ep_close(n.node.worker, ep, AXON_EP_CLOSE_FLUSH, kOpTimeout);
    } else {
        ret = recv_stream(n, arg->count);
        if ((axon_test_sync_progress(fd, n.node.worker, kOpTimeout) != 0) && (ret == 0)) {
            ret = 13;
        }
    }
    return (ret == 0 && err.calls != 0) ? 14 : ret;
}

class VerbsUdApiSlow : public ::testing::TestWithParam<const char *> {
};

TEST_P(VerbsUdApiSlow, TenThousandTagMessagesExactlyOnceInOrder)
{
    StreamArg        send_arg = {GetParam(), 10000, true};
    StreamArg        recv_arg = {GetParam(), 10000, false};
    axon_test_peer_t sender, receiver;
    int              fds[2];

    /* The two children talk to each other; the test relays their addresses. */
    ASSERT_EQ(0, axon_test_peer_spawn(&sender, stream_peer, &send_arg, kPeerTimeout));
    ASSERT_EQ(0, axon_test_peer_spawn(&receiver, stream_peer, &recv_arg, kPeerTimeout));
    fds[0] = sender.fd;
    fds[1] = receiver.fd;
    /* Address exchange: one blob each way. */
    void  *blob[2];
    size_t len[2];
    ASSERT_EQ(0, axon_test_recv_blob(fds[0], &blob[0], &len[0]));
    ASSERT_EQ(0, axon_test_recv_blob(fds[1], &blob[1], &len[1]));
    ASSERT_EQ(0, axon_test_send_blob(fds[0], blob[1], len[1]));
    ASSERT_EQ(0, axon_test_send_blob(fds[1], blob[0], len[0]));
    free(blob[0]);
    free(blob[1]);
    /* The final barrier: one byte each way, once both arrived. */
    char c[2];
    EXPECT_EQ(1, read(fds[1], &c[1], 1)) << "receiver did not finish";
    EXPECT_EQ(1, read(fds[0], &c[0], 1)) << "sender did not finish";
    EXPECT_EQ(1, write(fds[0], &c[1], 1));
    EXPECT_EQ(1, write(fds[1], &c[0], 1));
    EXPECT_EQ(0, axon_test_peer_wait(&receiver, kPeerTimeout)) << "receiver";
    EXPECT_EQ(0, axon_test_peer_wait(&sender, kPeerTimeout)) << "sender";
}

INSTANTIATE_TEST_SUITE_P(Wire, VerbsUdApiSlow,
                         ::testing::Values("AXON_SOFTIB_LOSS", "AXON_SOFTIB_DUP"),
                         [](const ::testing::TestParamInfo<const char *> &info) {
                             return std::string(info.param + 12);
                         });

/* A peer that streams to the test until it is killed. */
int victim_peer(int fd, void *)
{
    Node n;
    ErrCount err;
    n.patient = true;
    if (!n.init(fd)) {
        return 10;
    }
    axon_ep_h ep = make_ep(n, &err);
    if (ep == nullptr) {
        return 11;
    }
    std::string m = pattern(3000, 1);
    for (;;) {
        axon_request_h req = nullptr;
        axon_status_t st = axon_tag_send_nb(ep, m.data(), m.size(), kTagData, NULL, &req);
        if (st == AXON_INPROGRESS) {
            st = axon_test_wait_req(n.node.worker, st, req, NULL, kOpTimeout);
        }
        if (st != AXON_OK) {
            return 12;
        }
    }
}

/* A peer that answers pings until told to stop. */
int echo_peer(int fd, void *)
{
    Node n;
    ErrCount err;
    n.patient = true;
    if (!n.init(fd)) {
        return 10;
    }
    axon_ep_h ep = make_ep(n, &err);
    if (ep == nullptr) {
        return 11;
    }
    for (;;) {
        uint64_t v = 0;
        if (axon_test_recv(n.node.worker, &v, sizeof(v), kTagReady, AXON_TAG_MASK_FULL, NULL,
                           kOpTimeout) != AXON_OK) {
            return 12;
        }
        if (axon_test_send(n.node.worker, ep, &v, sizeof(v), kTagReady, kOpTimeout) != AXON_OK) {
            return 13;
        }
        if (v == 0) {
            break;
        }
    }
    axon_test_sync_progress(fd, n.node.worker, kOpTimeout);
    axon_test_ep_close(n.node.worker, ep, AXON_EP_CLOSE_FLUSH, kOpTimeout);
    return 0;
}

TEST(VerbsUdPeersTimed, KilledPeerBecomesEpErrorOthersGoOn)
{
    axon_test_peer_t victim, other;
    ASSERT_EQ(0, axon_test_peer_spawn(&victim, victim_peer, NULL, kPeerTimeout));
    ASSERT_EQ(0, axon_test_peer_spawn(&other, echo_peer, NULL, kPeerTimeout));

    std::vector<axon_config_kv_t> kv = ud_config();
    axon_test_node_t self = {};
    ASSERT_EQ(AXON_OK, axon_test_node_create(&self, "ud", kv.data(), kv.size()));
    void *va, *oa;
    size_t vl, ol;
    ASSERT_EQ(0, axon_test_exchange_address(victim.fd, self.address, self.address_length, &va,
                                            &vl));
    ASSERT_EQ(0, axon_test_exchange_address(other.fd, self.address, self.address_length, &oa,
                                            &ol));
    ErrCount verr, oerr;
    axon_ep_params_t params = {};
    axon_ep_h vep = nullptr, oep = nullptr;
    params.address = va; params.address_length = vl; params.err_cb = err_cb;
    params.err_cb_arg = &verr;
    ASSERT_EQ(AXON_OK, axon_ep_create(self.worker, &params, &vep));
    params.address = oa; params.address_length = ol; params.err_cb_arg = &oerr;
    ASSERT_EQ(AXON_OK, axon_ep_create(self.worker, &params, &oep));

    /* The victim is mid-stream: a few messages in, then a receive waits for more. */
    std::vector<char> buf(4096);
    for (int i = 0; i < 20; ++i) {
        ASSERT_EQ(AXON_OK, axon_test_recv(self.worker, buf.data(), buf.size(), kTagData,
                                          AXON_TAG_MASK_FULL, NULL, kOpTimeout));
    }
    axon_test_peer_crash(&victim);
    double killed = axon_test_time();
    while ((verr.calls == 0) && (axon_test_time() < killed + 10.0)) {
        axon_test_progress(self.worker);
    }
    double took = axon_test_time() - killed;
    EXPECT_EQ(1, verr.calls) << "error callback of the killed peer's ep";
    EXPECT_LT(took, 3.0) << "AXON_UD_TIMEOUT=1s + keepalive 250ms";
    EXPECT_EQ(0, oerr.calls);

    /* The survivor still talks to the other peer. */
    for (uint64_t v = 5; v != (uint64_t)-1; v = (v == 0) ? (uint64_t)-1 : v - 1) {
        uint64_t back = ~0ull;
        ASSERT_EQ(AXON_OK, axon_test_send(self.worker, oep, &v, sizeof(v), kTagReady,
                                          kOpTimeout));
        ASSERT_EQ(AXON_OK, axon_test_recv(self.worker, &back, sizeof(back), kTagReady,
                                          AXON_TAG_MASK_FULL, NULL, kOpTimeout));
        ASSERT_EQ(v, back);
    }
    ASSERT_EQ(0, axon_test_sync_progress(other.fd, self.worker, kOpTimeout));
    axon_test_progress_for(self.worker, 0.1);
    axon_test_ep_close(self.worker, vep, AXON_EP_CLOSE_FORCE, kOpTimeout);
    axon_test_ep_close(self.worker, oep, AXON_EP_CLOSE_FLUSH, kOpTimeout);
    EXPECT_EQ(0, axon_test_peer_wait(&other, kPeerTimeout));
    free(va);
    free(oa);
    axon_test_node_destroy(&self);
}

/*
 * A worker that closes after its peer left, with an endpoint to it still
 * open, owes it a goodbye nobody is left to acknowledge: the peer's LEAVE
 * says not to wait for one (MPI_Finalize closes every rank at once; a
 * worker destroys its endpoints just before its ifaces, as here).
 */
TEST_F(VerbsUd, CloseAfterThePeerLeftDoesNotWaitForIt)
{
    std::unique_ptr<UdIface> a(new UdIface), b(new UdIface);
    uint64_t v = 1;

    open_pair(*a, *b);
    axon_tl_ep_t *ab = a->connect(*b);
    ASSERT_EQ(AXON_OK, a->ops()->ep_am_short(ab, kAmId, NULL, 0, &v, sizeof(v)));
    ASSERT_TRUE(progress_until(*a, *b, [&] {
        return (b->got.size() == 1) && (a->ops()->ep_flush(ab) == AXON_OK);
    }, kOpTimeout));
    axon_tl_ep_t *ba = b->connect(*a);
    ASSERT_EQ(AXON_OK, b->ops()->ep_am_short(ba, kAmId, NULL, 0, &v, sizeof(v)));
    ASSERT_TRUE(progress_until(*a, *b, [&] {
        return (a->got.size() == 1) && (b->ops()->ep_flush(ba) == AXON_OK);
    }, kOpTimeout));
    a->ops()->ep_destroy(ab);
    progress_until(*a, *b, [] { return false; }, 0.1);   /* a's goodbye goes and is acked */

    LogCapture log(AXON_LOG_DEBUG);
    a.reset();
    b->ops()->ep_destroy(ba);
    b.reset();
    EXPECT_FALSE(log.any_contains("unacknowledged")) << "b waited for a peer that left";
    EXPECT_FALSE(log.any_contains("peer ", "failed: ")) << "a peer that left reported failed";
    EXPECT_TRUE(log.any_contains("left after its goodbye")) << "b never heard a leave";
}

}  // namespace
