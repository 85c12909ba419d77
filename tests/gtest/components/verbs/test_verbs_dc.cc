/*
 * The dc transport through its ops table, on softib, all in this process:
 * the components are loaded once, one memory domain opened, and as many
 * ifaces as a test needs ("workers"), each with its own DCT and DCIs.
 *   - the resource: capabilities, an endpoint of tens of bytes; no DC on
 *     the device (AXON_SOFTIB_CAP_MASK=dc): no resource, a debug line why;
 *   - bad AXON_DC_* values: INVALID_PARAM and a line naming the value;
 *   - 64 target workers, 4 DCIs, every endpoint sending at once, under each
 *     policy: every endpoint makes progress while all compete (none
 *     starves), and every message arrives once, in order;
 *   - dcs_quota: an endpoint with endless work lets a waiting one have
 *     the DCI after QUOTA WRs;
 *   - a target that goes away: the endpoint whose WR broke a DCI fails and
 *     is reported, the DCI is recovered, the other endpoints carry on
 *     (under shared, the work of other endpoints the failure flushed is
 *     posted again: it arrives once, in order, and they carry on);
 *   - 32 senders to one receiver that does not poll: each stops after
 *     exactly one window, so the SRQ never runs dry; then all arrive;
 *   - a grant flushed by another endpoint's failure is sent again;
 *   - goodbye: ifaces closing in any order neither wait for a goodbye to
 *     a DCT that is gone nor report one another; a goodbye queued behind
 *     other messages is read before a send error toward its sender;
 *   - keep-alive (a forked peer): a receive-only survivor notices its
 *     killed peer, an idle live one is left alone; a peer that closes
 *     normally says goodbye: not reported, sends to it fail at once.
 */
#include <gtest/gtest.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "env_guard.h"
#include "log_capture.h"

extern "C" {
#include "axon.h"
#include "component.h"
#include "harness.h"
#include "loader.h"
#include "log.h"
}

namespace {

const uint8_t kAmData   = 5;
const double  kTimeout  = 30.0;

/* What a message carries: which sender endpoint, which of its messages */
struct Msg {
    uint32_t sender;
    uint32_t seq;
};

/* One dc iface ("worker") of this process, and what it received. */
struct DcWorker {
    axon_iface_t         *iface = nullptr;
    uint64_t              uuid  = 0;
    axon_am_handler_t     handlers[AXON_AM_ID_MAX] = {};
    std::vector<uint32_t> next_seq;     /* per sender: the seq expected next */
    uint64_t              received  = 0;
    uint64_t              out_of_order = 0;
    std::vector<uint64_t> failed;       /* peer_failure uuids */

    static void on_data(void *arg, const void *data, size_t length, unsigned)
    {
        DcWorker *w = static_cast<DcWorker *>(arg);
        Msg m;
        if (length != sizeof(m)) {
            ++w->out_of_order;
            return;
        }
        memcpy(&m, data, sizeof(m));
        if (m.sender >= w->next_seq.size()) {
            w->next_seq.resize(m.sender + 1, 0);
        }
        w->out_of_order += (m.seq != w->next_seq[m.sender]);
        w->next_seq[m.sender] = m.seq + 1;
        ++w->received;
    }
    static void on_failure(void *arg, uint64_t uuid, axon_status_t)
    {
        static_cast<DcWorker *>(arg)->failed.push_back(uuid);
    }
    ~DcWorker()
    {
        if (iface != nullptr) {
            iface->ops->iface_close(iface);
        }
    }
    unsigned progress() { return iface->ops->iface_progress(iface); }
    std::vector<uint8_t> address() const
    {
        const axon_iface_ops_t *ops = iface->ops;
        std::vector<uint8_t>    a(ops->dev_addr_len + ops->iface_addr_len);
        ops->iface_get_address(iface, a.data(), a.data() + ops->dev_addr_len);
        return a;
    }
    axon_tl_ep_t *connect(const DcWorker &peer)
    {
        std::vector<uint8_t> a = peer.address();
        axon_tl_ep_t *ep = nullptr;
        EXPECT_EQ(AXON_OK, iface->ops->ep_create(iface, peer.uuid, a.data(),
                                                 a.data() + iface->ops->dev_addr_len, &ep));
        return ep;
    }
    axon_status_t send(axon_tl_ep_t *ep, uint32_t sender, uint32_t seq)
    {
        Msg m = {sender, seq};
        return iface->ops->ep_am_short(ep, kAmData, &m, sizeof(m), nullptr, 0);
    }
    /* The same message as an AM header and a payload (the receiver sees them joined). */
    axon_status_t send_split(axon_tl_ep_t *ep, uint32_t sender, uint32_t seq)
    {
        Msg m = {sender, seq};
        return iface->ops->ep_am_short(ep, kAmData, &m, sizeof(m) / 2,
                                       reinterpret_cast<uint8_t *>(&m) + sizeof(m) / 2,
                                       sizeof(m) - sizeof(m) / 2);
    }
};

/* The dc component loaded (with the environment of the moment), its domain and workers. */
struct DcWorld {
    axon_component_set_t                   set = {NULL, 0};
    const axon_loaded_component_t         *lc  = nullptr;
    axon_md_t                             *md  = nullptr;
    std::vector<std::unique_ptr<DcWorker>> workers;

    axon_status_t load()
    {
        axon_config_names_t path = {NULL, 0};
        axon_status_t status = axon_loader_load_all(&path, NULL, 0, NULL, 0, &set);
        if (status != AXON_OK) {
            return status;
        }
        for (unsigned i = 0; i < set.count; ++i) {
            if ((set.comps[i].component != nullptr) && !strcmp(set.comps[i].name, "dc")) {
                lc = &set.comps[i];
            }
        }
        return ((lc != nullptr) && (lc->num_resources > 0)) ? AXON_OK : AXON_ERR_UNSUPPORTED;
    }
    DcWorker *open()
    {
        if ((md == nullptr) &&
            (lc->component->md_open(&lc->resources[0], lc->config, &md) != AXON_OK)) {
            md = nullptr;
            return nullptr;
        }
        std::unique_ptr<DcWorker> w(new DcWorker);
        axon_iface_params_t params = {};
        w->uuid                 = ((uint64_t)getpid() << 24) | (workers.size() + 1);
        w->handlers[kAmData]    = DcWorker::on_data;
        params.am_handlers      = w->handlers;
        params.am_arg           = w.get();
        params.worker_uuid      = w->uuid;
        params.peer_failure     = DcWorker::on_failure;
        params.md               = md;
        if (lc->component->iface_open(&lc->resources[0], lc->config, &params, &w->iface) !=
            AXON_OK) {
            return nullptr;
        }
        workers.push_back(std::move(w));
        return workers.back().get();
    }
    void progress_all()
    {
        for (auto &w : workers) {
            if (w->iface != nullptr) {   /* not closed by the test */
                w->progress();
            }
        }
    }
    ~DcWorld()
    {
        workers.clear();
        if (md != nullptr) {
            md->ops->md_close(md);
        }
        axon_loader_unload_all(&set);
    }
};

/* Small ifaces, so that many fit in one process. */
void small_ifaces(EnvGuard *env)
{
    env->set("AXON_DC_SEG_SIZE", "256");
    env->set("AXON_DC_TX_BUFS", "64");
    env->set("AXON_DC_RX_QUEUE_LEN", "512");
    env->set("AXON_DC_FC_WINDOW", "8");
}

/* Small ifaces whose WRs to a target that is gone fail within tens of milliseconds. */
void short_retries(EnvGuard *env)
{
    small_ifaces(env);
    env->set("AXON_DC_TIMEOUT", "10ms");
    env->set("AXON_DC_RETRY_COUNT", "2");
}

/* ---------------------------------------------------------------- resource */

TEST(VerbsDc, ResourceAndCaps)
{
    DcWorld world;
    ASSERT_EQ(AXON_OK, world.load());
    const axon_resource_t &r = world.lc->resources[0];
    EXPECT_STREQ("dc", r.tl_name);
    EXPECT_STREQ("softib0:1", r.dev_name);
    uint64_t want = AXON_CAP_AM_SHORT | AXON_CAP_AM_BCOPY | AXON_CAP_GET | AXON_CAP_PUT |
                    AXON_CAP_CONNECT_TO_IFACE | AXON_CAP_AM_ORDERED | AXON_CAP_PEER_FAILURE |
                    AXON_CAP_NEED_MKEY | AXON_CAP_EMULATED | AXON_CAP_AMO_DEVICE;
    EXPECT_EQ(want, r.cap_flags & want);
    /* tens of bytes: a DCT number, a key, a shared address handle, credits */
    EXPECT_LT(r.ep_memory, (size_t)128);
    EXPECT_GT(r.ep_memory, (size_t)32);
}

struct DebugLines {
    std::vector<std::string> lines;
    axon_log_level_t         saved = axon_log_level;
    static void hook(axon_log_level_t, const char *msg, void *arg)
    {
        static_cast<DebugLines *>(arg)->lines.emplace_back(msg);
    }
    DebugLines()
    {
        axon_log_set_level(AXON_LOG_DEBUG);
        axon_log_set_hook(hook, this);
        axon_log_set_file("/dev/null");
    }
    ~DebugLines()
    {
        axon_log_set_hook(NULL, NULL);
        axon_log_set_file("stderr");
        axon_log_set_level(saved);
    }
    bool has(const std::string &a, const std::string &b) const
    {
        for (const auto &l : lines) {
            if ((l.find(a) != std::string::npos) && (l.find(b) != std::string::npos)) {
                return true;
            }
        }
        return false;
    }
};

/* A pack callback that claims more than it may write (it writes nothing). */
size_t pack_claims_too_much(void *, void *arg)
{
    return *static_cast<size_t *>(arg);
}

TEST(VerbsDc, BcopyPackedBeyondTheSegmentIsRefusedAndKeepsItsBuffer)
{
    EnvGuard env;
    small_ifaces(&env);   /* 64 send buffers */
    DcWorld world;
    ASSERT_EQ(AXON_OK, world.load());
    DcWorker *a = world.open(), *b = world.open();
    ASSERT_TRUE((a != nullptr) && (b != nullptr));
    axon_tl_ep_t *ep = a->connect(*b);
    ASSERT_NE(nullptr, ep);
    size_t too_much = world.lc->resources[0].max_bcopy + 1;
    {
        DebugLines log;
        /* More refusals than buffers: each refused one must go back to the pool */
        for (int i = 0; i < 200; ++i) {
            ASSERT_EQ((ssize_t)AXON_ERR_INVALID_PARAM,
                      a->iface->ops->ep_am_bcopy(ep, kAmData, pack_claims_too_much,
                                                 &too_much)) << "refusal " << i;
        }
        EXPECT_TRUE(log.has("am_bcopy pack callback wrote", std::to_string(too_much) + " bytes"));
    }
    /* Nothing was sent, and the endpoint still works */
    for (uint32_t seq = 0; seq < 100; ++seq) {
        axon_status_t st;
        double end = axon_test_time() + 10.0;
        while (((st = a->send(ep, 0, seq)) == AXON_ERR_NO_RESOURCE) &&
               (axon_test_time() < end)) {
            world.progress_all();
        }
        ASSERT_EQ(AXON_OK, st) << "message " << seq;
    }
    double end = axon_test_time() + 10.0;
    while ((b->received < 100) && (axon_test_time() < end)) {
        world.progress_all();
    }
    EXPECT_EQ(100u, b->received);
    EXPECT_EQ(0u, b->out_of_order);
    a->iface->ops->ep_destroy(ep);
}

TEST(VerbsDc, DeviceWithoutDcHasNoResource)
{
    EnvGuard env("AXON_SOFTIB_CAP_MASK", "dc");
    DebugLines log;
    DcWorld world;
    EXPECT_EQ(AXON_ERR_UNSUPPORTED, world.load());
    EXPECT_TRUE(log.has("softib0:1", "dc skipped"));
}

TEST(VerbsDc, BadConfigValuesAreRefused)
{
    struct Bad {
        const char *name, *value;
    } const bad[] = {
        {"AXON_DC_NUM_DCI", "0"},       {"AXON_DC_NUM_DCI", "65"},
        {"AXON_DC_POLICY", "greedy"},   {"AXON_DC_QUOTA", "0"},
        {"AXON_DC_QUOTA", "1000"},      {"AXON_DC_FC_WINDOW", "1"},
        {"AXON_DC_FC_WINDOW", "4096"},  {"AXON_DC_RETRY_COUNT", "8"},
        {"AXON_DC_TIMEOUT", "0"},       {"AXON_DC_KEEPALIVE_INTERVAL", "0"},
        {"AXON_DC_SEG_SIZE", "100"},
    };
    for (const Bad &b : bad) {
        EnvGuard env(b.name, b.value);
        axon_status_t status = AXON_OK;
        std::string   text   = capture_stderr([&] {
            DcWorld world;
            status = world.load();
        });
        EXPECT_EQ(AXON_ERR_INVALID_PARAM, status) << b.name << "=" << b.value;
        EXPECT_NE(std::string::npos, text.find(b.name + 5)) << b.name << ": " << text;
        EXPECT_NE(std::string::npos, text.find(b.value)) << b.name << ": " << text;
    }
}

/* ---------------------------------------------------------------- policies */

class VerbsDcSlow : public ::testing::TestWithParam<const char *> {};

/*
 * One sender worker, an endpoint to each of 64 target workers, 4 DCIs: every
 * endpoint tries one message per sweep, so what a DCI freed goes to whoever
 * the transport gives it to (the lowest index asks first in every sweep). By
 * the time half the messages were sent, every endpoint must have sent at least
 * half its share (none starved, none far behind), and all must finish.
 */
TEST_P(VerbsDcSlow, SixtyFourTargetsOnFourDcisAllProgress)
{
    const unsigned kTargets = 64, kPerEp = 200;
    EnvGuard env;
    small_ifaces(&env);
    env.set("AXON_DC_NUM_DCI", "4");
    env.set("AXON_DC_POLICY", GetParam());
    env.set("AXON_DC_QUOTA", "4");
    DcWorld world;
    ASSERT_EQ(AXON_OK, world.load());
    DcWorker *sender = world.open();
    ASSERT_NE(nullptr, sender);
    std::vector<axon_tl_ep_t *> eps;
    for (unsigned i = 0; i < kTargets; ++i) {
        DcWorker *t = world.open();
        ASSERT_NE(nullptr, t) << "target " << i;
        eps.push_back(sender->connect(*t));
        ASSERT_NE(nullptr, eps.back());
    }
    std::vector<uint32_t> sent(kTargets, 0);
    std::vector<uint32_t> at_half;
    uint64_t total = 0, busy = 0;
    double   end   = axon_test_time() + kTimeout;
    while ((total < (uint64_t)kTargets * kPerEp) && (axon_test_time() < end)) {
        for (unsigned i = 0; i < kTargets; ++i) {
            if (sent[i] == kPerEp) {
                continue;
            }
            axon_status_t st = sender->send(eps[i], i, sent[i]);
            if (st == AXON_OK) {
                ++sent[i];
                ++total;
            } else {
                ASSERT_EQ(AXON_ERR_NO_RESOURCE, st) << "ep " << i;
                ++busy;
            }
        }
        if (at_half.empty() && (total >= (uint64_t)kTargets * kPerEp / 2)) {
            at_half = sent;
        }
        world.progress_all();
    }
    ASSERT_FALSE(at_half.empty()) << "not even half were sent in " << kTimeout << " s";
    uint32_t lo = *std::min_element(at_half.begin(), at_half.end());
    uint32_t hi = *std::max_element(at_half.begin(), at_half.end());
    printf("[ dc       ] %s: at half time every endpoint had sent %u..%u messages (%llu "
           "NO_RESOURCE)\n", GetParam(), lo, hi, (unsigned long long)busy);
    /* each had its turns: none far behind the mean (kPerEp / 2), none starved */
    EXPECT_GE(lo, kPerEp / 4) << "an endpoint fell behind while the others sent";
    EXPECT_EQ((uint64_t)kTargets * kPerEp, total);
    end = axon_test_time() + kTimeout;
    uint64_t got = 0;
    while (axon_test_time() < end) {
        world.progress_all();
        got = 0;
        for (unsigned i = 1; i <= kTargets; ++i) {
            got += world.workers[i]->received;
        }
        if (got == total) {
            break;
        }
    }
    EXPECT_EQ(total, got);
    for (unsigned i = 1; i <= kTargets; ++i) {
        EXPECT_EQ(0u, world.workers[i]->out_of_order) << "target " << i;
        EXPECT_TRUE(world.workers[i]->failed.empty());
    }
    EXPECT_TRUE(sender->failed.empty());
    for (axon_tl_ep_t *ep : eps) {
        sender->iface->ops->ep_destroy(ep);
    }
}

/*
 * 32 senders, one receiver that does not poll: each sender stops after
 * exactly its window (8), 256 messages in a 512-buffer SRQ (so it never runs
 * dry and nothing waits in RNR retries); once the receiver polls, the grants
 * let the rest through: 32 x 300 messages, each once, in order per sender.
 */
TEST_P(VerbsDcSlow, ManySendersStopAtTheirWindowAndLoseNothing)
{
    const unsigned kSenders = 32, kPerSender = 300, kWindow = 8;
    EnvGuard env;
    small_ifaces(&env);
    env.set("AXON_DC_POLICY", GetParam());
    DcWorld world;
    ASSERT_EQ(AXON_OK, world.load());
    DcWorker *receiver = world.open();
    ASSERT_NE(nullptr, receiver);
    std::vector<DcWorker *>     senders;
    std::vector<axon_tl_ep_t *> eps;
    for (unsigned i = 0; i < kSenders; ++i) {
        senders.push_back(world.open());
        ASSERT_NE(nullptr, senders.back());
        eps.push_back(senders.back()->connect(*receiver));
    }
    std::vector<uint32_t> sent(kSenders, 0);
    /* the receiver sleeps: every sender gets exactly its window out */
    for (unsigned i = 0; i < kSenders; ++i) {
        double end = axon_test_time() + 2.0;
        while (axon_test_time() < end) {
            axon_status_t st = senders[i]->send(eps[i], i, sent[i]);
            if (st == AXON_OK) {
                ++sent[i];
            } else {
                ASSERT_EQ(AXON_ERR_NO_RESOURCE, st);
                senders[i]->progress();
                if (sent[i] >= kWindow) {
                    break;
                }
            }
        }
        EXPECT_EQ(kWindow, sent[i]) << "sender " << i;
    }
    for (int k = 0; k < 200; ++k) {  /* time for the device; still no grant */
        for (unsigned i = 0; i < kSenders; ++i) {
            senders[i]->progress();
            EXPECT_EQ(AXON_ERR_NO_RESOURCE, senders[i]->send(eps[i], i, sent[i]));
        }
    }
    /* the receiver wakes up */
    uint64_t total = (uint64_t)kSenders * kPerSender;
    double   end   = axon_test_time() + kTimeout;
    while ((receiver->received < total) && (axon_test_time() < end)) {
        for (unsigned i = 0; i < kSenders; ++i) {
            while ((sent[i] < kPerSender) && (senders[i]->send(eps[i], i, sent[i]) == AXON_OK)) {
                ++sent[i];
            }
        }
        world.progress_all();
    }
    EXPECT_EQ(total, receiver->received);
    EXPECT_EQ(0u, receiver->out_of_order);
    for (unsigned i = 0; i < kSenders; ++i) {
        EXPECT_TRUE(senders[i]->failed.empty());
        senders[i]->iface->ops->ep_destroy(eps[i]);
    }
}

/*
 * dcs_quota, one DCI of 32 WRs: A always has more to send (it posts until
 * refused), B one message at a time. Once B waits, A, past its QUOTA, takes
 * nothing more: its DCI drains and goes to B. So B sends at least once per
 * burst of A's (at most the DCI's 32 WRs); under plain dcs A, never
 * drained, keeps the DCI (B sent nothing while A sent 2000).
 */
TEST(VerbsDcQuotaSlow, QuotaMovesTheDciToAWaitingEndpoint)
{
    const uint32_t kA = 2000, kDepth = 32;
    EnvGuard env;
    small_ifaces(&env);
    env.set("AXON_DC_NUM_DCI", "1");
    env.set("AXON_DC_POLICY", "dcs_quota");
    env.set("AXON_DC_QUOTA", "4");
    env.set("AXON_DC_TX_QUEUE_LEN", "32");
    env.set("AXON_DC_FC_WINDOW", "256");
    LogCapture quiet;
    DcWorld world;
    ASSERT_EQ(AXON_OK, world.load());
    DcWorker *s = world.open(), *a = world.open(), *b = world.open();
    ASSERT_TRUE(s && a && b);
    axon_tl_ep_t *ea = s->connect(*a), *eb = s->connect(*b);
    uint32_t sa = 0, sb = 0;
    double   end = axon_test_time() + kTimeout;
    while ((sa < kA) && (axon_test_time() < end)) {
        while ((sa < kA) && (s->send(ea, 0, sa) == AXON_OK)) {
            ++sa;
        }
        if (s->send(eb, 1, sb) == AXON_OK) {
            ++sb;
        }
        world.progress_all();
    }
    printf("[ dc       ] while A sent %u, B sent %u\n", sa, sb);
    EXPECT_EQ(kA, sa);
    EXPECT_GE(sb, sa / kDepth - 1) << "B did not get the DCI after each of A's bursts";
    end = axon_test_time() + kTimeout;
    while (((a->received < sa) || (b->received < sb)) && (axon_test_time() < end)) {
        world.progress_all();
    }
    EXPECT_EQ(sa, a->received);
    EXPECT_EQ(sb, b->received);
    EXPECT_EQ(0u, a->out_of_order + b->out_of_order);
    s->iface->ops->ep_destroy(ea);
    s->iface->ops->ep_destroy(eb);
}

INSTANTIATE_TEST_SUITE_P(Policies, VerbsDcSlow,
                         ::testing::Values("dcs", "dcs_quota", "shared"),
                         [](const ::testing::TestParamInfo<const char *> &info) {
                             return std::string(info.param);
                         });

/* ---------------------------------------------------------------- failures */

class VerbsDcTimed : public ::testing::TestWithParam<const char *> {};

/*
 * 2 DCIs; endpoints to targets A, B and C (under shared, A and C share DCI 0).
 * A goes away (its iface closed: its DCT is gone) while messages to it are in
 * flight: the DCI's retries run out, the endpoint to A fails and A is reported;
 * the DCI comes back for the others: B and C receive everything sent after,
 * on the DCI A broke too.
 */
TEST_P(VerbsDcTimed, DciErrorFailsOnlyItsEndpoint)
{
    EnvGuard env;
    short_retries(&env);
    env.set("AXON_DC_NUM_DCI", "2");
    env.set("AXON_DC_POLICY", GetParam());
    LogCapture quiet;
    DcWorld world;
    ASSERT_EQ(AXON_OK, world.load());
    DcWorker *sender = world.open();
    DcWorker *a = world.open(), *b = world.open(), *c = world.open();
    ASSERT_TRUE(sender && a && b && c);
    axon_tl_ep_t *ea = sender->connect(*a), *eb = sender->connect(*b), *ec = sender->connect(*c);
    const axon_iface_ops_t *ops = sender->iface->ops;
    uint64_t a_uuid = a->uuid;

    /* A leaves: its DCT is destroyed with its iface */
    world.workers[1]->iface->ops->iface_close(world.workers[1]->iface);
    world.workers[1]->iface = nullptr;
    for (uint32_t s = 0; s < 4; ++s) {
        EXPECT_EQ(AXON_OK, sender->send(ea, 0, s));
    }
    double end = axon_test_time() + kTimeout;
    while ((ops->ep_check(ea) == AXON_OK) && (axon_test_time() < end)) {
        sender->progress();
    }
    EXPECT_NE(AXON_OK, ops->ep_check(ea)) << "the endpoint to the vanished target";
    ASSERT_EQ(1u, sender->failed.size());
    EXPECT_EQ(a_uuid, sender->failed[0]);
    EXPECT_NE(AXON_OK, sender->send(ea, 0, 4)) << "a failed endpoint takes nothing";

    /* the others carry on, through both DCIs (the broken one recovered) */
    uint32_t sb = 0, sc = 0;
    end = axon_test_time() + kTimeout;
    while (((sb < 100) || (sc < 100)) && (axon_test_time() < end)) {
        if ((sb < 100) && (sender->send(eb, 1, sb) == AXON_OK)) {
            ++sb;
        }
        if ((sc < 100) && (sender->send(ec, 2, sc) == AXON_OK)) {
            ++sc;
        }
        world.progress_all();
    }
    end = axon_test_time() + kTimeout;
    while (((b->received < sb) || (c->received < sc)) && (axon_test_time() < end)) {
        world.progress_all();
    }
    EXPECT_EQ(100u, b->received);
    EXPECT_EQ(100u, c->received);
    EXPECT_EQ(0u, b->out_of_order + c->out_of_order);
    EXPECT_EQ(AXON_OK, ops->ep_check(eb));
    EXPECT_EQ(AXON_OK, ops->ep_check(ec));
    EXPECT_EQ(1u, sender->failed.size()) << "only A is reported";
    for (axon_tl_ep_t *ep : {ea, eb, ec}) {
        ops->ep_destroy(ep);
    }
}

/*
 * shared: C's messages are on A's DCI when A's failure breaks it. C's
 * flushed work is posted again once the DCI is back: all of it arrives, in
 * order, before what C sends after, and C is neither failed nor reported;
 * B, on the other DCI, is untouched.
 */
TEST(VerbsDcSharedTimed, FlushedWorkOfASharingEndpointIsPostedAgain)
{
    EnvGuard env;
    short_retries(&env);
    env.set("AXON_DC_NUM_DCI", "2");
    env.set("AXON_DC_POLICY", "shared");
    LogCapture quiet;
    DcWorld world;
    ASSERT_EQ(AXON_OK, world.load());
    DcWorker *sender = world.open();
    DcWorker *a = world.open(), *b = world.open(), *c = world.open();
    ASSERT_TRUE(sender && a && b && c);
    axon_tl_ep_t *ea = sender->connect(*a), *eb = sender->connect(*b), *ec = sender->connect(*c);
    const axon_iface_ops_t *ops = sender->iface->ops;

    world.workers[1]->iface->ops->iface_close(world.workers[1]->iface);
    world.workers[1]->iface = nullptr;
    ASSERT_EQ(AXON_OK, sender->send(ea, 0, 0));
    uint32_t sc = 0, sb = 0;
    for (; sc < 6; ++sc) {
        ASSERT_EQ(AXON_OK, sender->send(ec, 2, sc));   /* behind A's, on DCI 0 */
    }
    for (; sb < 6; ++sb) {
        ASSERT_EQ(AXON_OK, sender->send(eb, 1, sb));
    }
    double end = axon_test_time() + kTimeout;
    while ((ops->ep_check(ea) == AXON_OK) && (axon_test_time() < end)) {
        world.progress_all();
    }
    for (int k = 0; k < 1000; ++k) {
        world.progress_all();
    }
    EXPECT_NE(AXON_OK, ops->ep_check(ea));
    EXPECT_EQ(AXON_OK, ops->ep_check(ec)) << "C's work was flushed, not C";
    EXPECT_TRUE(std::find(sender->failed.begin(), sender->failed.end(), c->uuid) ==
                sender->failed.end()) << "C reported failed";
    /* more from C, on the recovered DCI: behind the flushed ones */
    end = axon_test_time() + kTimeout;
    while ((sc < 40) && (axon_test_time() < end)) {
        if (sender->send(ec, 2, sc) == AXON_OK) {
            ++sc;
        }
        world.progress_all();
    }
    end = axon_test_time() + kTimeout;
    while (((c->received < sc) || (b->received < sb)) && (axon_test_time() < end)) {
        world.progress_all();
    }
    EXPECT_EQ(40u, sc);
    EXPECT_EQ(sc, c->received) << "each of C's messages once";
    EXPECT_EQ(0u, c->out_of_order);
    EXPECT_EQ(sb, b->received);
    EXPECT_EQ(0u, b->out_of_order);
    EXPECT_EQ(AXON_OK, ops->ep_check(eb));
    EXPECT_EQ(AXON_OK, ops->ep_check(ec));
    EXPECT_EQ(1u, sender->failed.size()) << "only A is reported";
    for (axon_tl_ep_t *ep : {ea, eb, ec}) {
        ops->ep_destroy(ep);
    }
}

/* A transport completion that counts its calls. */
struct CountedComp {
    axon_tl_completion_t super;
    int                  calls  = 0;
    axon_status_t        status = AXON_INPROGRESS;

    CountedComp() { super.func = done; }
    static void done(axon_tl_completion_t *c, axon_status_t st)
    {
        CountedComp *cc = reinterpret_cast<CountedComp *>(c);
        ++cc->calls;
        cc->status = st;
    }
};

/*
 * shared, one DCI, with messages inline and not (AXON_DC_MAX_INLINE=0): a
 * message to A, who is gone, then C's work of every kind behind it: AMs
 * (with and without a payload beside the AM header), a put, a get and a
 * fetch-and-add. A's failure flushes C's work; it goes
 * again once the DCI is back: each message arrives once and in order, the
 * put lands, the get reads, the add is applied once, and each operation
 * completes once, with success.
 */
class VerbsDcSharedReplayTimed : public ::testing::TestWithParam<const char *> {};

TEST_P(VerbsDcSharedReplayTimed, EveryKindOfFlushedWorkGoesAgain)
{
    EnvGuard env;
    short_retries(&env);
    env.set("AXON_DC_NUM_DCI", "1");
    env.set("AXON_DC_POLICY", "shared");
    env.set("AXON_DC_MAX_INLINE", GetParam());
    LogCapture quiet;
    DcWorld world;
    ASSERT_EQ(AXON_OK, world.load());
    DcWorker *sender = world.open();
    DcWorker *a = world.open(), *c = world.open();
    ASSERT_TRUE(sender && a && c);
    axon_tl_ep_t *ea = sender->connect(*a), *ec = sender->connect(*c);
    const axon_iface_ops_t *ops = sender->iface->ops;

    /* C's memory: a region the put writes and the get reads, and a counter */
    const size_t kLen = 4096;
    std::vector<uint8_t> region(3 * kLen, 0), local_put(kLen), local_get(kLen, 0);
    for (size_t i = 0; i < kLen; ++i) {
        region[kLen + i] = (uint8_t)(i * 7 + 3);   /* what the get reads */
        local_put[i]     = (uint8_t)(i * 13 + 1);
    }
    uint64_t *counter = reinterpret_cast<uint64_t *>(&region[2 * kLen]);
    *counter = 1000;
    void *memh = nullptr;
    ASSERT_EQ(AXON_OK, world.md->ops->mem_reg(world.md, region.data(), region.size(), 0, &memh));
    std::vector<uint8_t> rkey(world.md->ops->rkey_max_len);
    world.md->ops->rkey_pack(world.md, memh, rkey.data());
    uint64_t base = (uintptr_t)region.data();

    a->iface->ops->iface_close(a->iface);
    a->iface = nullptr;
    ASSERT_EQ(AXON_OK, sender->send(ea, 0, 0));   /* the DCI is stuck on A now */
    uint32_t sc = 0;
    for (; sc < 3; ++sc) {
        ASSERT_EQ(AXON_OK, sender->send(ec, 2, sc));
    }
    CountedComp put, get, amo;
    uint64_t old = 0;
    axon_amo_args_t args = {};
    args.op       = AXON_AMO_ADD;
    args.size     = 8;
    args.fetch    = 1;
    args.value[0] = 5;
    EXPECT_EQ(AXON_INPROGRESS, ops->ep_put_zcopy(ec, local_put.data(), kLen, base, rkey.data(),
                                                 &put.super));
    EXPECT_EQ(AXON_INPROGRESS, ops->ep_get_zcopy(ec, local_get.data(), kLen, base + kLen,
                                                 rkey.data(), &get.super));
    EXPECT_EQ(AXON_INPROGRESS, ops->ep_atomic(ec, &args, base + 2 * kLen, rkey.data(), &old,
                                              &amo.super));
    for (; sc < 6; ++sc) {
        ASSERT_EQ(AXON_OK, sender->send_split(ec, 2, sc));
    }

    double end = axon_test_time() + kTimeout;
    while (((ops->ep_check(ea) == AXON_OK) || (c->received < sc) || !put.calls || !get.calls ||
            !amo.calls) && (axon_test_time() < end)) {
        world.progress_all();
    }
    EXPECT_NE(AXON_OK, ops->ep_check(ea));
    EXPECT_EQ(AXON_OK, ops->ep_check(ec)) << "C's work was flushed, not C";
    EXPECT_EQ(1u, sender->failed.size()) << "only A is reported";
    EXPECT_EQ(sc, c->received);
    EXPECT_EQ(0u, c->out_of_order);
    EXPECT_EQ(1, put.calls);
    EXPECT_EQ(AXON_OK, put.status);
    EXPECT_EQ(0, memcmp(region.data(), local_put.data(), kLen)) << "the put landed";
    EXPECT_EQ(1, get.calls);
    EXPECT_EQ(AXON_OK, get.status);
    EXPECT_EQ(0, memcmp(local_get.data(), region.data() + kLen, kLen)) << "the get read";
    EXPECT_EQ(1, amo.calls);
    EXPECT_EQ(AXON_OK, amo.status);
    EXPECT_EQ(1000u, old);
    EXPECT_EQ(1005u, *counter) << "the add applied once";
    EXPECT_EQ(AXON_OK, ops->ep_flush(ec)) << "nothing of C's left outstanding";
    for (axon_tl_ep_t *ep : {ea, ec}) {
        ops->ep_destroy(ep);
    }
    world.md->ops->mem_dereg(world.md, memh);
}

INSTANTIATE_TEST_SUITE_P(Inline, VerbsDcSharedReplayTimed, ::testing::Values("128", "0"),
                         [](const ::testing::TestParamInfo<const char *> &info) {
                             return std::string(strcmp(info.param, "0") ? "inline" : "no_inline");
                         });

/*
 * shared, one DCI: W's grant for S waits on the DCI behind a message to A,
 * who is gone; A's failure flushes it. The grant is sent again once the DCI
 * is back, so S, out of credits, goes on: all its messages arrive.
 */
TEST(VerbsDcSharedTimed, FlushedGrantIsSentAgain)
{
    EnvGuard env;
    short_retries(&env);
    env.set("AXON_DC_NUM_DCI", "1");
    env.set("AXON_DC_POLICY", "shared");
    LogCapture quiet;
    DcWorld world;
    ASSERT_EQ(AXON_OK, world.load());
    DcWorker *w = world.open(), *a = world.open(), *s = world.open();
    ASSERT_TRUE(w && a && s);
    axon_tl_ep_t *wa = w->connect(*a), *sw = s->connect(*w);
    const axon_iface_ops_t *ops = w->iface->ops;

    a->iface->ops->iface_close(a->iface);
    a->iface = nullptr;
    ASSERT_EQ(AXON_OK, w->send(wa, 0, 0));   /* W's only DCI is now stuck on A */
    uint32_t sent = 0;
    while (s->send(sw, 1, sent) == AXON_OK) {
        ++sent;   /* a window, and the credit request after half of it */
    }
    EXPECT_EQ(8u, sent);
    double end = axon_test_time() + kTimeout;
    while ((sent < 200) && (axon_test_time() < end)) {
        w->progress();   /* the request arrives: the grant queues behind A's message */
        s->progress();
        if (s->send(sw, 1, sent) == AXON_OK) {
            ++sent;
        }
    }
    end = axon_test_time() + kTimeout;
    while ((w->received < sent) && (axon_test_time() < end)) {
        world.progress_all();
    }
    EXPECT_NE(AXON_OK, ops->ep_check(wa));
    EXPECT_EQ(200u, sent) << "S never got its credits back";
    EXPECT_EQ(sent, w->received);
    EXPECT_EQ(0u, w->out_of_order);
    EXPECT_TRUE(s->failed.empty());
    ops->ep_destroy(wa);
    s->iface->ops->ep_destroy(sw);
}

INSTANTIATE_TEST_SUITE_P(Policies, VerbsDcTimed,
                         ::testing::Values("dcs", "dcs_quota", "shared"),
                         [](const ::testing::TestParamInfo<const char *> &info) {
                             return std::string(info.param);
                         });

/* ---------------------------------------------------------------- goodbye */

/* Close w's iface; how long it took */
double close_timed(DcWorker *w)
{
    double t0 = axon_test_time();
    w->iface->ops->iface_close(w->iface);
    w->iface = nullptr;
    return axon_test_time() - t0;
}

/*
 * A sends to B and C, B to A (the hellos go both ways), then they close in
 * turn. B's goodbye closes A's endpoint to B quietly; A's goodbye makes C
 * forget A. So no close waits for the retries of a goodbye to a DCT that is
 * gone (with the default timeout, until the 0.5 s close deadline), and
 * nothing is reported anywhere.
 */
TEST(VerbsDcByeTimed, PeersCloseInAnyOrderWithoutWaitsOrFailures)
{
    EnvGuard env;
    small_ifaces(&env);
    DcWorld world;
    ASSERT_EQ(AXON_OK, world.load());
    DcWorker *a = world.open(), *b = world.open(), *c = world.open();
    ASSERT_TRUE(a && b && c);
    axon_tl_ep_t *ab = a->connect(*b), *ac = a->connect(*c), *ba = b->connect(*a);
    const axon_iface_ops_t *ops = a->iface->ops;
    ASSERT_EQ(AXON_OK, a->send(ab, 0, 0));
    ASSERT_EQ(AXON_OK, a->send(ac, 0, 0));
    ASSERT_EQ(AXON_OK, b->send(ba, 1, 0));
    double end = axon_test_time() + kTimeout;
    while (((a->received < 1) || (b->received < 1) || (c->received < 1)) &&
           (axon_test_time() < end)) {
        world.progress_all();
    }
    ASSERT_EQ(1u, a->received);
    ASSERT_EQ(1u, b->received);
    ASSERT_EQ(1u, c->received);

    ops->ep_destroy(ba);
    double b_close = close_timed(b);
    end = axon_test_time() + kTimeout;
    while ((ops->ep_check(ab) == AXON_OK) && (axon_test_time() < end)) {
        world.progress_all();
    }
    EXPECT_EQ(AXON_ERR_CONNECTION_RESET, ops->ep_check(ab)) << "B's goodbye";
    EXPECT_EQ(AXON_ERR_CONNECTION_RESET, a->send(ab, 0, 1));
    EXPECT_EQ(AXON_OK, ops->ep_check(ac));
    ops->ep_destroy(ab);
    ops->ep_destroy(ac);
    double a_close = close_timed(a);
    for (int k = 0; k < 100; ++k) {
        world.progress_all();   /* C reads A's goodbye */
    }
    double c_close = close_timed(c);
    printf("[ dc       ] closes: B %.3f s, A %.3f s, C %.3f s\n", b_close, a_close, c_close);
    EXPECT_LT(b_close, 0.25);
    EXPECT_LT(a_close, 0.25) << "A said goodbye to B, who was gone";
    EXPECT_LT(c_close, 0.25) << "C said goodbye to A, who was gone";
    EXPECT_TRUE(a->failed.empty() && b->failed.empty() && c->failed.empty());
}

/*
 * R has not progressed: 40 of T's messages, then S's goodbye, wait in its
 * receive queue when its send to S (gone) fails. The goodbye is read before
 * the error is taken for a failure: S is not reported, T's messages all
 * arrive.
 */
TEST(VerbsDcByeTimed, GoodbyeBehindOtherMessagesIsReadBeforeASendError)
{
    EnvGuard env;
    short_retries(&env);
    env.set("AXON_DC_FC_WINDOW", "64");
    LogCapture quiet;
    DcWorld world;
    ASSERT_EQ(AXON_OK, world.load());
    DcWorker *r = world.open(), *s = world.open(), *t = world.open();
    ASSERT_TRUE(r && s && t);
    axon_tl_ep_t *rs = r->connect(*s), *tr = t->connect(*r);
    const axon_iface_ops_t *ops = r->iface->ops;
    ASSERT_EQ(AXON_OK, r->send(rs, 0, 0));   /* the hello: S knows R */
    double end = axon_test_time() + kTimeout;
    while (((s->received < 1) || (ops->ep_flush(rs) != AXON_OK)) && (axon_test_time() < end)) {
        r->progress();
        s->progress();
    }
    ASSERT_EQ(1u, s->received);
    for (uint32_t k = 0; k < 40; ++k) {
        ASSERT_EQ(AXON_OK, t->send(tr, 1, k));
    }
    end = axon_test_time() + kTimeout;
    while ((ops->ep_flush(tr) != AXON_OK) && (axon_test_time() < end)) {
        t->progress();   /* acknowledged: in R's receive queue */
    }
    s->iface->ops->iface_close(s->iface);   /* the goodbye, behind T's messages */
    s->iface = nullptr;
    ASSERT_EQ(AXON_OK, r->send(rs, 0, 1));  /* R has not read it: to a DCT that is gone */
    double wait = axon_test_time() + 0.3;   /* the retries run out meanwhile */
    while (axon_test_time() < wait) {
        t->progress();
    }
    end = axon_test_time() + kTimeout;
    while ((ops->ep_check(rs) == AXON_OK) && (axon_test_time() < end)) {
        r->progress();
    }
    for (int k = 0; k < 100; ++k) {
        r->progress();
    }
    EXPECT_EQ(AXON_ERR_CONNECTION_RESET, ops->ep_check(rs));
    EXPECT_TRUE(r->failed.empty()) << "S said goodbye before its DCT went";
    EXPECT_EQ(40u, r->received);
    EXPECT_EQ(0u, r->out_of_order);
    ops->ep_destroy(rs);
    t->iface->ops->ep_destroy(tr);
}

/* ---------------------------------------------------------------- keep-alive, goodbye */

const double kPeerTimeout = 60.0;

/* The dc environment both processes use: short timers, so a dead peer is seen at once */
void keepalive_env(EnvGuard *env)
{
    short_retries(env);
    env->set("AXON_DC_KEEPALIVE_INTERVAL", "0.1s");
}

/* An address blob: the worker's uuid, then its device and iface addresses */
std::vector<uint8_t> uuid_and_address(const DcWorker &w)
{
    std::vector<uint8_t> a = w.address(), blob(sizeof(w.uuid));
    memcpy(blob.data(), &w.uuid, sizeof(w.uuid));
    blob.insert(blob.end(), a.begin(), a.end());
    return blob;
}

/* Exchange uuid and address with the other process; an endpoint to it */
axon_tl_ep_t *connect_over(int fd, DcWorker *w, uint64_t *peer_uuid)
{
    std::vector<uint8_t> mine = uuid_and_address(*w);
    axon_tl_ep_t *ep = nullptr;
    void  *blob;
    size_t len;
    if (axon_test_exchange_address(fd, mine.data(), mine.size(), &blob, &len) != 0) {
        return nullptr;
    }
    const uint8_t *b = static_cast<const uint8_t *>(blob);
    memcpy(peer_uuid, b, sizeof(*peer_uuid));
    axon_status_t st = w->iface->ops->ep_create(w->iface, *peer_uuid, b + sizeof(*peer_uuid),
                                                b + sizeof(*peer_uuid) +
                                                w->iface->ops->dev_addr_len, &ep);
    free(blob);
    return (st == AXON_OK) ? ep : nullptr;
}

enum PeerEnd { kPeerCloses, kPeerIsKilled };

/*
 * S: an endpoint to R, 10 messages, a barrier; then closes its iface
 * normally (kPeerCloses), or stops there until killed.
 */
int sender_main(int fd, void *arg)
{
    PeerEnd end = *static_cast<PeerEnd *>(arg);
    EnvGuard env;
    keepalive_env(&env);
    LogCapture quiet;
    DcWorld world;
    PEER_CHECK(world.load() == AXON_OK);
    DcWorker *s = world.open();
    PEER_CHECK(s != nullptr);
    uint64_t r_uuid;
    axon_tl_ep_t *to_r = connect_over(fd, s, &r_uuid);
    PEER_CHECK(to_r != nullptr);
    const axon_iface_ops_t *ops = s->iface->ops;
    double deadline = axon_test_time() + kTimeout;
    for (uint32_t k = 0; k < 10;) {
        axon_status_t st = s->send(to_r, 0, k);
        PEER_CHECK((st == AXON_OK) || (st == AXON_ERR_NO_RESOURCE), "%d", st);
        k += (st == AXON_OK);
        s->progress();
        PEER_CHECK(axon_test_time() < deadline);
    }
    while (ops->ep_flush(to_r) == AXON_INPROGRESS) {
        s->progress();
        PEER_CHECK(axon_test_time() < deadline);
    }
    PEER_CHECK(axon_test_sync(fd) == 0);   /* R has seen everything and probed us */
    if (end == kPeerIsKilled) {
        for (;;) {
            pause();
        }
    }
    PEER_CHECK(s->failed.empty());
    ops->ep_destroy(to_r);
    ops->iface_close(s->iface);   /* the goodbye */
    s->iface = nullptr;
    return 0;
}

/*
 * R only ever receives from S, but holds an endpoint to it; while S is alive
 * R's probes are answered and nothing fails. Returns R, its endpoint and S's uuid.
 */
struct ReceiveOnly {
    axon_test_peer_t peer = {-1, -1};
    PeerEnd          end;
    EnvGuard         env;
    DcWorld          world;
    DcWorker        *r    = nullptr;
    axon_tl_ep_t    *to_s = nullptr;
    uint64_t         s_uuid = 0;

    explicit ReceiveOnly(PeerEnd e) : end(e) { keepalive_env(&env); }
    ~ReceiveOnly()
    {
        if (to_s != nullptr) {
            r->iface->ops->ep_destroy(to_s);
        }
        axon_test_peer_kill(&peer);
    }
    void start()
    {
        /* forked before this process loads anything */
        ASSERT_EQ(0, axon_test_peer_spawn(&peer, sender_main, &end, kPeerTimeout));
        ASSERT_EQ(AXON_OK, world.load());
        r = world.open();
        ASSERT_NE(nullptr, r);
        to_s = connect_over(peer.fd, r, &s_uuid);
        ASSERT_NE(nullptr, to_s);
        double deadline = axon_test_time() + kTimeout;
        while ((r->received < 10) && (axon_test_time() < deadline)) {
            r->progress();
        }
        ASSERT_EQ(10u, r->received);
        double end_idle = axon_test_time() + 0.6;   /* several intervals, both alive */
        while (axon_test_time() < end_idle) {
            r->progress();
        }
        EXPECT_EQ(AXON_OK, r->iface->ops->ep_check(to_s)) << "an idle live peer was failed";
        EXPECT_TRUE(r->failed.empty());
        ASSERT_EQ(0, axon_test_sync(peer.fd));
    }
};

/* Once S is killed, R's next probe runs out of retries and S is reported. */
TEST(VerbsDcKeepaliveTimed, ReceiveOnlySurvivorNoticesDeadPeer)
{
    LogCapture quiet;
    ReceiveOnly t(kPeerIsKilled);
    t.start();
    ASSERT_FALSE(HasFatalFailure());
    double t0 = axon_test_time();
    ASSERT_GT(axon_test_peer_crash(&t.peer), 0);
    double end = t0 + kTimeout;
    while (t.r->failed.empty() && (axon_test_time() < end)) {
        t.r->progress();
    }
    printf("[ dc       ] the dead peer was reported after %.2f s\n", axon_test_time() - t0);
    ASSERT_EQ(1u, t.r->failed.size());
    EXPECT_EQ(t.s_uuid, t.r->failed[0]);
    EXPECT_NE(AXON_OK, t.r->iface->ops->ep_check(t.to_s));
    EXPECT_LT(axon_test_time() - t0, 2.0);
}

/*
 * S closes its iface normally while R keeps its endpoint: S's goodbye closes
 * R's endpoint quietly. Over many keep-alive intervals nothing is reported,
 * and a send to S fails at once with CONNECTION_RESET.
 */
TEST(VerbsDcKeepaliveTimed, PeerThatClosesIsNotReportedAndSendsFailAtOnce)
{
    LogCapture quiet;
    ReceiveOnly t(kPeerCloses);
    t.start();
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_EQ(0, axon_test_peer_wait(&t.peer, kPeerTimeout)) << "S failed or did not close";
    double end = axon_test_time() + 1.0;   /* 10 intervals: a probe would long have failed */
    while (axon_test_time() < end) {
        t.r->progress();
    }
    EXPECT_TRUE(t.r->failed.empty()) << "a goodbye is not a failure";
    EXPECT_EQ(AXON_ERR_CONNECTION_RESET, t.r->iface->ops->ep_check(t.to_s));
    double t0 = axon_test_time();
    EXPECT_EQ(AXON_ERR_CONNECTION_RESET, t.r->send(t.to_s, 0, 10));
    EXPECT_LT(axon_test_time() - t0, 0.1);
    EXPECT_TRUE(t.r->failed.empty());
}

}  // namespace
