/*
 * The rdmacm transport (rc's data path on QPs the connection manager
 * connects) on softib:
 *   - through the API, two processes, AXON_TLS=rdmacm: tag messages of
 *     0 B .. 1 MiB both ways, then a clean close on both sides;
 *   - through the ops table, two ifaces in this process: AMs both ways on
 *     one connection, a second ep reuses it, simultaneous connects end on
 *     one connection, a close is not a peer failure;
 *   - a port nobody listens on, a worker that is not at the address and an
 *     address no softib device reaches: the ep fails within the timeout with
 *     one log line naming the address and the reason.
 */
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

extern "C" {
#include "component.h"
#include "loader.h"
#include "log.h"
}

#include "tag_env.h"


namespace {

const double  kCmTimeout = 10.0;
const uint8_t kAmId      = 5;

/* ---------------------------------------------------------------- through the API */

const TransportParam kRdmacm = {"rdmacm", "rdmacm", 1, false, {}};

TEST(RdmacmXproc, TagMessagesBothWaysThroughApi)
{
    const std::vector<size_t> sizes = {0, 1, 8, 100, 2040, 4096, 8192, 65536, 300000, 1 << 20};

    auto exchange = [&](Env &env, int sender) {
        for (size_t i = 0; i < sizes.size(); ++i) {
            if (env.rank == sender) {
                std::vector<uint8_t> buf(sizes[i]);
                fill_msg(buf.data(), buf.size(), i);
                ASSERT_EQ(AXON_OK, env.send(buf.data(), buf.size(), (axon_tag_t)i)) << sizes[i];
            } else {
                GuardedBuf buf(sizes[i]);
                axon_tag_recv_info_t info;
                ASSERT_EQ(AXON_OK, env.recv(buf.data(), sizes[i], (axon_tag_t)i, ~0ull, &info))
                    << sizes[i];
                ASSERT_EQ(sizes[i], info.length);
                ASSERT_EQ("", check_msg(buf.data(), info.length, i));
                ASSERT_TRUE(buf.intact_from(info.length));
            }
        }
    };
    auto role = [&](Env &env) {
        exchange(env, 0);
        ASSERT_TRUE(env.barrier());
        exchange(env, 1);
    };
    run_roles(kRdmacm, role, role);
}

/* ---------------------------------------------------------------- through the ops */

struct LogCapture {
    std::vector<std::string> lines;

    static void hook(axon_log_level_t, const char *msg, void *arg)
    {
        static_cast<LogCapture *>(arg)->lines.emplace_back(msg);
    }
    LogCapture() { axon_log_set_hook(hook, this); }
    ~LogCapture() { axon_log_set_hook(NULL, NULL); }
    int count(const std::string &a, const std::string &b = "") const
    {
        int n = 0;
        for (const auto &l : lines) {
            n += (l.find(a) != std::string::npos) && (l.find(b) != std::string::npos);
        }
        return n;
    }
    std::string all() const
    {
        std::string s;
        for (const auto &l : lines) {
            s += l + "\n";
        }
        return s;
    }
};

/* One rdmacm iface with what it received and which peers it saw fail. */
struct Iface {
    axon_iface_t              *iface = nullptr;
    axon_md_t                 *md    = nullptr;
    uint64_t                   uuid  = 0;
    axon_am_handler_t          handlers[AXON_AM_ID_MAX] = {};
    std::vector<std::string>   msgs;
    std::vector<uint64_t>      failed;

    static void on_am(void *arg, const void *data, size_t length, unsigned)
    {
        static_cast<Iface *>(arg)->msgs.emplace_back((const char *)data, length);
    }
    static void on_failure(void *arg, uint64_t uuid, axon_status_t)
    {
        static_cast<Iface *>(arg)->failed.push_back(uuid);
    }

    axon_status_t open(const axon_loaded_component_t *lc, uint64_t id)
    {
        axon_iface_params_t params = {};
        uuid                = id;
        handlers[kAmId]     = on_am;
        params.am_handlers  = handlers;
        params.am_arg       = this;
        params.worker_uuid  = uuid;
        params.peer_failure = on_failure;
        axon_status_t status = lc->component->md_open(&lc->resources[0], lc->config, &md);
        if (status != AXON_OK) {
            md = nullptr;
            return status;
        }
        params.md = md;
        return lc->component->iface_open(&lc->resources[0], lc->config, &params, &iface);
    }
    ~Iface()
    {
        if (iface != nullptr) {
            iface->ops->iface_close(iface);
        }
        if (md != nullptr) {
            md->ops->md_close(md);
        }
    }
    unsigned progress() { return iface->ops->iface_progress(iface); }
    void addresses(std::vector<uint8_t> *dev, std::vector<uint8_t> *ifa)
    {
        dev->resize(iface->ops->dev_addr_len);
        ifa->resize(iface->ops->iface_addr_len);
        ASSERT_EQ(AXON_OK, iface->ops->iface_get_address(iface, dev->data(), ifa->data()));
    }
    axon_status_t connect(Iface &peer, axon_tl_ep_t **ep)
    {
        std::vector<uint8_t> dev, ifa;
        peer.addresses(&dev, &ifa);
        return iface->ops->ep_create(iface, peer.uuid, dev.data(), ifa.data(), ep);
    }
};

class RdmacmOps : public ::testing::Test {
protected:
    axon_component_set_t           set_ = {NULL, 0};
    const axon_loaded_component_t *lc_  = nullptr;
    Iface                          a_, b_;

    void SetUp() override
    {
        axon_config_names_t path = {NULL, 0};
        ASSERT_EQ(AXON_OK, axon_loader_load_all(&path, NULL, 0, NULL, 0, &set_));
        for (unsigned i = 0; i < set_.count; ++i) {
            if ((set_.comps[i].component != nullptr) && !strcmp(set_.comps[i].name, "rdmacm")) {
                lc_ = &set_.comps[i];
            }
        }
        ASSERT_NE(nullptr, lc_) << "no rdmacm component";
        ASSERT_GT(lc_->num_resources, 0u) << "rdmacm has no resource on softib";
        ASSERT_EQ(AXON_OK, a_.open(lc_, 0x1000));
        ASSERT_EQ(AXON_OK, b_.open(lc_, 0x2000));
    }
    void TearDown() override
    {
        if (a_.iface != nullptr) {
            a_.iface->ops->iface_close(a_.iface);
            a_.iface = nullptr;
        }
        if (b_.iface != nullptr) {
            b_.iface->ops->iface_close(b_.iface);
            b_.iface = nullptr;
        }
        axon_loader_unload_all(&set_);
    }

    /* Progress both until pred holds; false on timeout. */
    template <typename P> bool until(P pred, double timeout = kCmTimeout)
    {
        double end = axon_test_time() + timeout;
        while (!pred()) {
            if (axon_test_time() > end) {
                return false;
            }
            a_.progress();
            b_.progress();
        }
        return true;
    }

    axon_status_t send(Iface &from, axon_tl_ep_t *ep, const std::string &s)
    {
        axon_status_t st = AXON_ERR_NO_RESOURCE;
        until([&] {
            st = from.iface->ops->ep_am_short(ep, kAmId, NULL, 0, s.data(), s.size());
            return st != AXON_ERR_NO_RESOURCE;
        });
        return st;
    }

    axon_status_t flush(Iface &from, axon_tl_ep_t *ep)
    {
        axon_status_t st = AXON_INPROGRESS;
        until([&] { return (st = from.iface->ops->ep_flush(ep)) != AXON_INPROGRESS; });
        return st;
    }

    /* An ep to a made-up peer; waits for it to fail and returns its status. */
    axon_status_t failed_connect(uint32_t ip, uint16_t port, uint64_t uuid)
    {
        std::vector<uint8_t> dev, ifa;
        a_.addresses(&dev, &ifa);
        memcpy(dev.data(), &ip, 4);       /* the IPv4 leads the device address */
        memcpy(ifa.data(), &port, 2);
        axon_tl_ep_t *ep = nullptr;
        axon_status_t st = a_.iface->ops->ep_create(a_.iface, uuid, dev.data(), ifa.data(), &ep);
        if (st != AXON_OK) {
            return st;
        }
        until([&] { return (st = a_.iface->ops->ep_check(ep)) != AXON_OK; });
        a_.iface->ops->ep_destroy(ep);
        return st;
    }
};

TEST_F(RdmacmOps, AmsBothWaysAndSecondEpReusesTheConnection)
{
    axon_tl_ep_t *ab = nullptr, *ab2 = nullptr, *ba = nullptr;

    ASSERT_EQ(AXON_OK, a_.connect(b_, &ab));
    ASSERT_EQ(AXON_OK, send(a_, ab, "hello b"));
    ASSERT_TRUE(until([&] { return b_.msgs.size() == 1; }));
    /* b's ep to a finds the connection a made: no second CM exchange */
    ASSERT_EQ(AXON_OK, b_.connect(a_, &ba));
    ASSERT_EQ(AXON_OK, send(b_, ba, "hello a"));
    ASSERT_EQ(AXON_OK, a_.connect(b_, &ab2));
    ASSERT_EQ(AXON_OK, send(a_, ab2, "again"));
    ASSERT_TRUE(until([&] { return (a_.msgs.size() == 1) && (b_.msgs.size() == 2); }));
    EXPECT_EQ("hello b", b_.msgs[0]);
    EXPECT_EQ("again", b_.msgs[1]);
    EXPECT_EQ("hello a", a_.msgs[0]);
    EXPECT_EQ(AXON_OK, flush(a_, ab));
    EXPECT_EQ(AXON_OK, flush(b_, ba));

    LogCapture log;
    a_.iface->ops->ep_destroy(ab);
    a_.iface->ops->ep_destroy(ab2);
    b_.iface->ops->ep_destroy(ba);
    until([] { return false; }, 0.5);   /* goodbyes, then the CM disconnects */
    EXPECT_TRUE(a_.failed.empty()) << log.all();
    EXPECT_TRUE(b_.failed.empty()) << log.all();
    EXPECT_EQ(0, log.count("failed")) << log.all();
}

TEST_F(RdmacmOps, SimultaneousConnectsEndOnOneConnection)
{
    axon_tl_ep_t *ab = nullptr, *ba = nullptr;

    ASSERT_EQ(AXON_OK, a_.connect(b_, &ab));
    ASSERT_EQ(AXON_OK, b_.connect(a_, &ba));
    ASSERT_EQ(AXON_OK, send(a_, ab, "from a"));
    ASSERT_EQ(AXON_OK, send(b_, ba, "from b"));
    ASSERT_TRUE(until([&] { return (a_.msgs.size() == 1) && (b_.msgs.size() == 1); }));
    EXPECT_EQ("from b", a_.msgs[0]);
    EXPECT_EQ("from a", b_.msgs[0]);
    EXPECT_TRUE(a_.failed.empty());
    EXPECT_TRUE(b_.failed.empty());
    a_.iface->ops->ep_destroy(ab);
    b_.iface->ops->ep_destroy(ba);
}

TEST_F(RdmacmOps, PortNobodyListensOnFailsWithClearError)
{
    /* a bound socket that does not listen: its port refuses connections */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    struct sockaddr_in sa = {};
    socklen_t len = sizeof(sa);
    sa.sin_family      = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(0, bind(fd, (struct sockaddr *)&sa, sizeof(sa)));
    ASSERT_EQ(0, getsockname(fd, (struct sockaddr *)&sa, &len));

    LogCapture log;
    double t0 = axon_test_time();
    EXPECT_EQ(AXON_ERR_UNREACHABLE, failed_connect(sa.sin_addr.s_addr, sa.sin_port, b_.uuid));
    EXPECT_LT(axon_test_time() - t0, kCmTimeout);
    std::string where = "127.0.0.1:" + std::to_string(ntohs(sa.sin_port));
    EXPECT_EQ(1, log.count(where, "nobody listens there")) << log.all();
    close(fd);
}

TEST_F(RdmacmOps, WrongWorkerIsRejected)
{
    std::vector<uint8_t> dev, ifa;
    b_.addresses(&dev, &ifa);
    uint32_t ip;
    uint16_t port;
    memcpy(&ip, dev.data(), 4);
    memcpy(&port, ifa.data(), 2);

    LogCapture log;
    EXPECT_EQ(AXON_ERR_UNREACHABLE, failed_connect(ip, port, 0x3000));   /* b is 0x2000 */
    EXPECT_EQ(1, log.count("rejected the connection", "another worker")) << log.all();
    EXPECT_TRUE(b_.failed.empty());
}

TEST_F(RdmacmOps, UnreachableAddressFailsWithClearError)
{
    LogCapture log;
    double t0 = axon_test_time();
    /* no softib device reaches it (a loopback softib reaches loopback only): no packet leaves */
    EXPECT_EQ(AXON_ERR_UNREACHABLE, failed_connect(inet_addr("10.255.255.1"), htons(4791),
                                                   b_.uuid));
    EXPECT_LT(axon_test_time() - t0, kCmTimeout);
    EXPECT_EQ(1, log.count("no route to 10.255.255.1:4791")) << log.all();
}

TEST_F(RdmacmOps, MalformedAddressIsRefusedAtOnce)
{
    LogCapture log;
    EXPECT_EQ(AXON_ERR_INVALID_ADDR, failed_connect(htonl(INADDR_ANY), htons(1), b_.uuid));
    EXPECT_EQ(1, log.count("malformed peer address 0.0.0.0")) << log.all();
}

}  // namespace
