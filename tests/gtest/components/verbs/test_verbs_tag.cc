/*
 * Tag messaging over softib's RDMA transports under stress, and what an
 * endpoint of each costs:
 *
 *   - 10 000 tag messages of mixed sizes (0 B .. 64 KiB, the largest by
 *     rendezvous) over rc and over ud while softib's wire drops 10% of the
 *     packets and holds back 10%: each arrives once, in order, intact;
 *   - the same over dc (10 000 messages, 10% loss and reordering);
 *   - axon_perf -t ep_mem: memory per ud endpoint is less than a tenth of
 *     memory per rc endpoint, per dc endpoint less than a twentieth.
 *
 * softib reads its fault injection from the environment only, so the lossy
 * runs set AXON_SOFTIB_LOSS / _REORDER before the peer is forked.
 */
#include "tag_env.h"

#include <stdio.h>
#include <stdlib.h>

#include <map>

namespace {

const int    kLossyCount  = 10000;
const int    kLossyWindow = 64;        /* messages in flight: sends posted, receives posted */
const size_t kLossyMax    = 64 << 10;
const double kLossyBudget = 40.0;      /* seconds for the whole exchange */

/*
 * Size of message i: 5% empty, 75% of one packet, 18% of a few, 2% by
 * rendezvous (the variants set a 16 KiB threshold): 1.5% of 16..24 KiB,
 * 0.5% of 64 KiB. Over rc, where every lost packet may cost a
 * retransmission timeout and a rendezvous is an RDMA read of many packets,
 * this mix keeps the run well within a minute on a busy 2-core machine.
 */
size_t lossy_size(int i)
{
    uint32_t h = (uint32_t)i * 2654435761u;
    uint32_t r = (h >> 8) % 200;

    if (r < 10) {
        return 0;
    }
    if (r < 160) {
        return 1 + (h >> 16) % 256;                  /* one packet, often inline */
    }
    if (r < 196) {
        return 257 + (h >> 12) % (8 << 10);          /* up to three packets, eager */
    }
    if (r < 199) {
        return (16 << 10) + (h >> 12) % (8 << 10);   /* rendezvous */
    }
    return kLossyMax;
}

/* Sets environment variables for the life of the object (softib reads them at open). */
class EnvVars {
public:
    explicit EnvVars(std::map<std::string, std::string> vars)
    {
        for (const auto &kv : vars) {
            const char *old = getenv(kv.first.c_str());
            saved_.push_back({kv.first, old != nullptr, old ? old : ""});
            setenv(kv.first.c_str(), kv.second.c_str(), 1);
        }
    }
    ~EnvVars()
    {
        for (const auto &s : saved_) {
            if (s.had) {
                setenv(s.name.c_str(), s.value.c_str(), 1);
            } else {
                unsetenv(s.name.c_str());
            }
        }
    }

private:
    struct Saved {
        std::string name;
        bool        had;
        std::string value;
    };
    std::vector<Saved> saved_;
};

class VerbsLossyTagSlow : public ::testing::TestWithParam<TransportParam> {};

/*
 * Rank 0 sends message i with tag i; rank 1 receives with a wildcard, so
 * the k-th receive gets the k-th message to arrive: its tag, length and
 * payload say whether anything was lost, duplicated or reordered.
 */
TEST_P(VerbsLossyTagSlow, TenThousandMixedMessagesArriveOnceInOrder)
{
    EnvVars lossy({{"AXON_SOFTIB_LOSS", "0.1"}, {"AXON_SOFTIB_REORDER", "0.1"}});
    double  t0 = axon_test_time();

    auto sender = [&](Env &env) {
        for (int base = 0; base < kLossyCount; base += kLossyWindow) {
            SendBatch batch;
            for (int i = base; (i < base + kLossyWindow) && (i < kLossyCount); ++i) {
                batch.post(env, lossy_size(i), i, (axon_tag_t)i);
                ASSERT_FALSE(::testing::Test::HasFatalFailure()) << "message " << i;
            }
            batch.wait(env);
            ASSERT_FALSE(::testing::Test::HasFailure()) << "batch from " << base;
            ASSERT_LT(axon_test_time() - t0, kLossyBudget) << "at message " << base;
        }
    };

    auto receiver = [&](Env &env) {
        std::vector<GuardedBuf>           bufs(kLossyWindow, GuardedBuf(kLossyMax));
        std::vector<axon_request_h>       reqs(kLossyWindow);
        std::vector<axon_status_t>        status(kLossyWindow);
        std::vector<axon_tag_recv_info_t> infos(kLossyWindow);

        for (int base = 0; base < kLossyCount; base += kLossyWindow) {
            int n = std::min(kLossyWindow, kLossyCount - base);
            for (int k = 0; k < n; ++k) {
                axon_request_param_t param = {};
                param.recv_info = &infos[k];
                bufs[k].reset();
                reqs[k]   = nullptr;
                status[k] = axon_tag_recv_nb(env.worker, bufs[k].data(), kLossyMax, 0, 0,
                                             &param, &reqs[k]);
                ASSERT_TRUE((status[k] == AXON_OK) || (status[k] == AXON_INPROGRESS))
                    << axon_status_string(status[k]);
            }
            for (int k = 0; k < n; ++k) {
                int i = base + k;
                ASSERT_EQ(AXON_OK, env.wait(status[k], reqs[k], &infos[k])) << "receive " << i;
                ASSERT_EQ((axon_tag_t)i, infos[k].sender_tag)
                    << "receive " << i << " got another message: lost, duplicated or reordered";
                ASSERT_EQ(lossy_size(i), infos[k].length) << "message " << i;
                ASSERT_EQ("", check_msg(bufs[k].data(), infos[k].length, i));
                ASSERT_TRUE(bufs[k].intact_from(infos[k].length)) << "message " << i;
            }
        }
        /* Nothing more arrives: a late duplicate would sit in the unexpected queue. */
        axon_test_progress_for(env.worker, 0.2);
    };

    run_roles(GetParam(), sender, receiver);
    printf("[ lossy    ] %d messages over %s in %.1f s\n", kLossyCount, GetParam().tls,
           axon_test_time() - t0);
}

/*
 * rc recovers a lost packet that nothing follows (the last of a burst, a
 * lost NAK or ACK, a retransmission lost again) only when its transport
 * timeout expires: the default (0.5 s, sized for real fabrics) would make
 * this test take minutes, so it runs with 35 ms (33.5 ms on the IB scale;
 * 7 retries still ride out 0.2 s without progress on a loaded machine).
 * rc moves the rendezvous-sized messages by RDMA read, ud streams them.
 */
const TransportParam kLossyTransports[] = {
    {"rc", "rc", 1, false, {{"RNDV_THRESH", "16K"}, {"RC_TIMEOUT", "35ms"}}},
    {"ud", "ud", 1, false, {{"RNDV_THRESH", "16K"}}},
    {"dc", "dc", 1, false, {{"RNDV_THRESH", "16K"}, {"DC_TIMEOUT", "35ms"}}},
};

INSTANTIATE_TEST_SUITE_P(Lanes, VerbsLossyTagSlow, ::testing::ValuesIn(kLossyTransports),
                         transport_name);

/* ---------------------------------------------------------------- memory per endpoint */

/* bytes_per_ep of `AXON_TLS=tls axon_perf --local -t ep_mem`, or -1 (output in *out). */
long long ep_mem_of(const char *tls, unsigned peers, std::string *out)
{
    char cmd[512];
    char line[512];

    snprintf(cmd, sizeof(cmd), "env AXON_TLS=%s timeout -k 5 60 %s/tools/axon_perf --local "
             "-t ep_mem -n %u 2>&1", tls, AXON_TEST_BUILDDIR, peers);
    FILE *f = popen(cmd, "r");
    if (f == nullptr) {
        *out = std::string("popen failed: ") + strerror(errno);
        return -1;
    }
    long long bytes = -1;
    while (fgets(line, sizeof(line), f) != nullptr) {
        *out += line;
        const char *p = strstr(line, "bytes_per_ep=");
        if ((strncmp(line, "RESULT test=ep_mem", 18) == 0) && (p != nullptr)) {
            bytes = atoll(p + strlen("bytes_per_ep="));
        }
    }
    int status = pclose(f);
    return (status == 0) ? bytes : -1;
}

TEST(VerbsEpMemoryHeap, UdEndpointIsTenTimesSmallerThanRc)
{
    std::string rc_out, ud_out;
    long long   rc = ep_mem_of("rc", 8, &rc_out);
    long long   ud = ep_mem_of("ud", 8, &ud_out);

    ASSERT_GT(rc, 0) << rc_out;
    ASSERT_GT(ud, 0) << ud_out;
    printf("[ ep_mem   ] rc %lld bytes per endpoint, ud %lld (%.1fx)\n", rc, ud,
           (double)rc / (double)ud);
    EXPECT_LT(ud * 10, rc) << rc_out << ud_out;
}

/* dc: the endpoint is a DCT number, a key and a shared address handle; the DCIs and
 * buffers are the iface's. The goal: at most 0.05x rc's. */
TEST(VerbsEpMemoryHeap, DcEndpointIsTwentyTimesSmallerThanRc)
{
    std::string rc_out, dc_out;
    long long   rc = ep_mem_of("rc", 16, &rc_out);   /* dc's iface-wide DCIs count here */
    long long   dc = ep_mem_of("dc", 16, &dc_out);

    ASSERT_GT(rc, 0) << rc_out;
    ASSERT_GT(dc, 0) << dc_out;
    printf("[ ep_mem   ] rc %lld bytes per endpoint, dc %lld (%.3fx)\n", rc, dc,
           (double)dc / (double)rc);
    EXPECT_LT(dc * 20, rc) << rc_out << dc_out;
}

}  // namespace
