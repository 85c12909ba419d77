/*
 * The device layer (framework/device): the device list across back ends,
 * opening by name, the enum strings, the configuration the tools see, and
 * the rdma-core back end on a host without RDMA hardware — plus that back
 * end's converters, which are all that can be checked without a NIC.
 */
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <utility>
#include <vector>

extern "C" {
#include "axon_config.h"
#include "axon.h"
#include "dev_backend.h"
#include "dev_cm_backend.h"
#include "log.h"
#ifdef HAVE_IBVERBS
#include "dev_rdmacore.h"
#endif
}

namespace {

struct LogLine {
    axon_log_level_t level;
    std::string      text;
};

void device_log_hook(axon_log_level_t level, const char *message, void *arg)
{
    static_cast<std::vector<LogLine>*>(arg)->push_back({level, message});
}

/* Each test starts from the default softib configuration and captures the log. */
class DeviceLayer : public ::testing::Test {
protected:
    void SetUp() override
    {
        save_env("AXON_SOFTIB_DEVICES");
        save_env("AXON_SOFTIB_BOGUS_KNOB");
        unsetenv("AXON_SOFTIB_DEVICES");
        saved_level_ = axon_log_level;
        axon_log_set_hook(device_log_hook, &logs_);
        ASSERT_EQ(0, axon_log_set_file("/dev/null"));
    }

    void TearDown() override
    {
        axon_log_set_hook(NULL, NULL);
        axon_log_set_file("stderr");
        axon_log_set_level(saved_level_);
        for (auto &it : saved_env_) {
            if (it.second.first) {
                setenv(it.first.c_str(), it.second.second.c_str(), 1);
            } else {
                unsetenv(it.first.c_str());
            }
        }
    }

    void save_env(const char *name)
    {
        const char *value = getenv(name);

        saved_env_.push_back({name, {value != NULL, (value != NULL) ? value : ""}});
    }

    /* Is there a line at this level (or more severe) containing every word? */
    bool logged(axon_log_level_t level, const std::vector<std::string> &words) const
    {
        for (const LogLine &line : logs_) {
            bool all = (line.level <= level);

            for (const std::string &word : words) {
                all = all && (line.text.find(word) != std::string::npos);
            }
            if (all) {
                return true;
            }
        }
        return false;
    }

    int count_errors() const
    {
        int n = 0;

        for (const LogLine &line : logs_) {
            n += (line.level == AXON_LOG_ERROR);
        }
        return n;
    }

    /* Names of the devices of one back end, in list order. */
    static std::vector<std::string> names_of(const char *backend)
    {
        std::vector<std::string> names;
        axon_dev_info_t *list;
        int count;

        EXPECT_EQ(AXON_OK, axon_dev_get_list(&list, &count));
        for (int i = 0; i < count; ++i) {
            if (strcmp(list[i].backend, backend) == 0) {
                names.push_back(list[i].name);
            }
        }
        axon_dev_free_list(list);
        return names;
    }

    std::vector<LogLine>                                          logs_;
    std::vector<std::pair<std::string, std::pair<bool, std::string>>> saved_env_;
    axon_log_level_t                                              saved_level_;
};

void report_collect(const char *backend, const char *summary, void *arg)
{
    static_cast<std::vector<std::pair<std::string, std::string>>*>(arg)->push_back(
        {backend, summary});
}

TEST_F(DeviceLayer, BackendsSoftibFirstThenRdmacoreWhenBuilt)
{
    ASSERT_NE(nullptr, axon_dev_backends[0]);
    EXPECT_STREQ("softib", axon_dev_backends[0]->name);
#ifdef HAVE_IBVERBS
    ASSERT_NE(nullptr, axon_dev_backends[1]);
    EXPECT_STREQ("rdma-core", axon_dev_backends[1]->name);
    EXPECT_EQ(nullptr, axon_dev_backends[2]);
#else
    EXPECT_EQ(nullptr, axon_dev_backends[1]);
#endif
}

/* The back ends as they were, put back at the end of a scope that registers fakes. */
struct BackendsRestore {
    const axon_dev_backend_t *dev[AXON_DEV_MAX_BACKENDS + 1];
    const axon_dev_cm_ops_t  *cm[AXON_DEV_CM_MAX_BACKENDS + 1];

    BackendsRestore()
    {
        memcpy(dev, axon_dev_backends, sizeof(dev));
        memcpy(cm, axon_dev_cm_backends, sizeof(cm));
    }
    ~BackendsRestore()
    {
        memcpy(axon_dev_backends, dev, sizeof(dev));
        memcpy(axon_dev_cm_backends, cm, sizeof(cm));
    }
};

/*
 * Back ends register themselves (constructors); the list keeps their order
 * whatever the registration order, ties after the earlier ones, and a full
 * list refuses more. The fakes (no ops) go at the end: tests that share the
 * process (valgrind's batches) would open devices through them.
 */
TEST(DeviceRegistry, BackendsListedByOrderWhoeverRegistersFirst)
{
    static const axon_dev_backend_t late = {"test-late", 9}, tie = {"test-tie", 0},
                                    extra = {"test-extra", 9};
    BackendsRestore          restore;
    std::vector<std::string> names;
    auto count = [] { int n = 0; while (axon_dev_backends[n] != NULL) ++n; return n; };

    axon_dev_backend_register(&late);
    axon_dev_backend_register(&tie);
    for (int i = 0; axon_dev_backends[i] != NULL; ++i) {
        names.push_back(axon_dev_backends[i]->name);
    }
#ifdef HAVE_IBVERBS
    EXPECT_EQ((std::vector<std::string>{"softib", "test-tie", "rdma-core", "test-late"}), names);
#else
    EXPECT_EQ((std::vector<std::string>{"softib", "test-tie", "test-late"}), names);
#endif
    while (count() < AXON_DEV_MAX_BACKENDS) {
        axon_dev_backend_register(&extra);
    }
    axon_dev_backend_register(&extra);   /* full: refused with an error line */
    EXPECT_EQ(AXON_DEV_MAX_BACKENDS, count());
    /* The connection managers follow the device back ends (these have none). */
    ASSERT_NE(nullptr, axon_dev_cm_backends[0]);
    EXPECT_STREQ("softib", axon_dev_cm_backends[0]->name);
}

TEST_F(DeviceLayer, GetListIncludesSoftib0First)
{
    axon_dev_info_t *list;
    int count;

    ASSERT_EQ(AXON_OK, axon_dev_get_list(&list, &count));
    ASSERT_GE(count, 1);
    EXPECT_STREQ("softib0", list[0].name);
    EXPECT_STREQ("softib", list[0].backend);
    axon_dev_free_list(list);
    EXPECT_EQ(0, count_errors());
}

TEST_F(DeviceLayer, SoftibCountFollowsConfig)
{
    setenv("AXON_SOFTIB_DEVICES", "3", 1);
    EXPECT_EQ((std::vector<std::string>{"softib0", "softib1", "softib2"}), names_of("softib"));

    /* More than the list's initial room: it grows. */
    setenv("AXON_SOFTIB_DEVICES", "20", 1);
    std::vector<std::string> many = names_of("softib");
    ASSERT_EQ(20u, many.size());
    EXPECT_EQ("softib19", many[19]);

    setenv("AXON_SOFTIB_DEVICES", "0", 1);
    EXPECT_TRUE(names_of("softib").empty());
    EXPECT_EQ(0, count_errors());
}

TEST_F(DeviceLayer, OpenSoftib0ByName)
{
    axon_dev_context_t *ctx = NULL;
    axon_dev_attr_t attr;
    axon_dev_port_attr_t port;

    ASSERT_EQ(0, axon_dev_open("softib0", &ctx));
    ASSERT_NE(nullptr, ctx);
    EXPECT_STREQ("softib0", ctx->name);
    EXPECT_STREQ("softib", ctx->backend);
    ASSERT_EQ(0, axon_dev_query_device(ctx, &attr));
    EXPECT_EQ(1, attr.phys_port_cnt);
    ASSERT_EQ(0, axon_dev_query_port(ctx, 1, &port));
    EXPECT_EQ(AXON_DEV_LINK_LAYER_ETHERNET, port.link_layer);
    axon_dev_close(ctx);
}

TEST_F(DeviceLayer, OpenBogusIsEnodevWithErrorNamingIt)
{
    axon_dev_context_t *ctx = NULL;

    EXPECT_EQ(ENODEV, axon_dev_open("bogus7", &ctx));
    EXPECT_EQ(nullptr, ctx);
    /* One error line naming the device asked for and the ones that exist. */
    EXPECT_TRUE(logged(AXON_LOG_ERROR, {"'bogus7'", "softib0"}));
}

TEST_F(DeviceLayer, OpenSoftibBeyondCountIsEnodev)
{
    axon_dev_context_t *ctx = NULL;

    setenv("AXON_SOFTIB_DEVICES", "2", 1);
    EXPECT_EQ(ENODEV, axon_dev_open("softib2", &ctx));
    EXPECT_TRUE(logged(AXON_LOG_ERROR, {"'softib2'", "softib0, softib1"}));
}

TEST_F(DeviceLayer, OpenAndListNullArgumentsAreEinval)
{
    axon_dev_context_t *ctx;
    axon_dev_info_t *list;
    int count;

    EXPECT_EQ(EINVAL, axon_dev_open(NULL, &ctx));
    EXPECT_EQ(EINVAL, axon_dev_open("softib0", NULL));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_dev_get_list(NULL, &count));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_dev_get_list(&list, NULL));
    EXPECT_EQ(4, count_errors());
}

TEST_F(DeviceLayer, WcStatusStringsReadLikeIbvWcStatusStr)
{
    EXPECT_STREQ("success", axon_dev_wc_status_str(AXON_DEV_WC_SUCCESS));
    EXPECT_STREQ("local length error", axon_dev_wc_status_str(AXON_DEV_WC_LOC_LEN_ERR));
    EXPECT_STREQ("local protection error", axon_dev_wc_status_str(AXON_DEV_WC_LOC_PROT_ERR));
    EXPECT_STREQ("Work Request Flushed Error", axon_dev_wc_status_str(AXON_DEV_WC_WR_FLUSH_ERR));
    EXPECT_STREQ("remote invalid request error",
                 axon_dev_wc_status_str(AXON_DEV_WC_REM_INV_REQ_ERR));
    EXPECT_STREQ("remote access error", axon_dev_wc_status_str(AXON_DEV_WC_REM_ACCESS_ERR));
    EXPECT_STREQ("remote operation error", axon_dev_wc_status_str(AXON_DEV_WC_REM_OP_ERR));
    EXPECT_STREQ("transport retry counter exceeded",
                 axon_dev_wc_status_str(AXON_DEV_WC_RETRY_EXC_ERR));
    EXPECT_STREQ("RNR retry counter exceeded",
                 axon_dev_wc_status_str(AXON_DEV_WC_RNR_RETRY_EXC_ERR));
    EXPECT_STREQ("general error", axon_dev_wc_status_str(AXON_DEV_WC_GENERAL_ERR));
    EXPECT_STREQ("unknown", axon_dev_wc_status_str((axon_dev_wc_status_t)22));
    EXPECT_STREQ("unknown", axon_dev_wc_status_str((axon_dev_wc_status_t)-1));
#ifdef HAVE_IBVERBS
    /* Every value, word for word, against libibverbs itself. */
    for (int s = AXON_DEV_WC_SUCCESS; s <= AXON_DEV_WC_GENERAL_ERR; ++s) {
        EXPECT_STREQ(ibv_wc_status_str((enum ibv_wc_status)s),
                     axon_dev_wc_status_str((axon_dev_wc_status_t)s)) << "status " << s;
    }
#endif
}

TEST_F(DeviceLayer, EventTypeStringsReadLikeIbvEventTypeStr)
{
    EXPECT_STREQ("CQ error", axon_dev_event_type_str(AXON_DEV_EVENT_CQ_ERR));
    EXPECT_STREQ("invalid request local work queue error",
                 axon_dev_event_type_str(AXON_DEV_EVENT_QP_REQ_ERR));
    EXPECT_STREQ("local access violation work queue error",
                 axon_dev_event_type_str(AXON_DEV_EVENT_QP_ACCESS_ERR));
    EXPECT_STREQ("communication established", axon_dev_event_type_str(AXON_DEV_EVENT_COMM_EST));
    EXPECT_STREQ("SRQ limit reached",
                 axon_dev_event_type_str(AXON_DEV_EVENT_SRQ_LIMIT_REACHED));
    EXPECT_STREQ("last WQE reached",
                 axon_dev_event_type_str(AXON_DEV_EVENT_QP_LAST_WQE_REACHED));
    EXPECT_STREQ("unknown", axon_dev_event_type_str((axon_dev_event_type_t)19));
    EXPECT_STREQ("unknown", axon_dev_event_type_str((axon_dev_event_type_t)-1));
#ifdef HAVE_IBVERBS
    for (int e = AXON_DEV_EVENT_CQ_ERR; e <= AXON_DEV_EVENT_GID_CHANGE; ++e) {
        EXPECT_STREQ(ibv_event_type_str((enum ibv_event_type)e),
                     axon_dev_event_type_str((axon_dev_event_type_t)e)) << "event " << e;
    }
#endif
}

TEST_F(DeviceLayer, CapNamesOnePerBit)
{
    int n = 0;

    while (axon_dev_cap_names[n] != NULL) {
        ++n;
    }
    EXPECT_EQ(AXON_DEV_CAP_LAST_BIT, n);
    EXPECT_STREQ("rc", axon_dev_cap_names[0]);
    EXPECT_STREQ("srq", axon_dev_cap_names[3]);
    EXPECT_STREQ("atomic", axon_dev_cap_names[4]);
    EXPECT_STREQ("inline", axon_dev_cap_names[5]);
    EXPECT_STREQ("comp_channel", axon_dev_cap_names[6]);
    EXPECT_STREQ("ext_atomic", axon_dev_cap_names[8]);
    EXPECT_STREQ("cross_channel", axon_dev_cap_names[10]);
    EXPECT_STREQ("mcast", axon_dev_cap_names[AXON_DEV_CAP_LAST_BIT - 1]);
}

TEST_F(DeviceLayer, ReportOneLinePerBackend)
{
    std::vector<std::pair<std::string, std::string>> lines;

    setenv("AXON_SOFTIB_DEVICES", "2", 1);
    axon_dev_report_backends(report_collect, &lines);
    ASSERT_GE(lines.size(), 1u);
    EXPECT_EQ("softib", lines[0].first);
    EXPECT_NE(std::string::npos, lines[0].second.find('2')) << lines[0].second;
#ifdef HAVE_IBVERBS
    ASSERT_EQ(2u, lines.size());
    EXPECT_EQ("rdma-core", lines[1].first);
#else
    EXPECT_EQ(1u, lines.size());
#endif
}

TEST_F(DeviceLayer, SoftibVariablesDoNotWarnAsUnknown)
{
    axon_config_kv_t kv[] = {{"TLS", "self"}, {"LOG_FILE", "/dev/null"}};
    axon_context_params_t params = {AXON_FEATURE_TAG, kv, 2};
    axon_context_h ctx;

    setenv("AXON_SOFTIB_DEVICES", "2", 1);
    setenv("AXON_SOFTIB_BOGUS_KNOB", "1", 1);
    ASSERT_EQ(AXON_OK, axon_init(&params, &ctx));
    axon_cleanup(ctx);
    EXPECT_FALSE(logged(AXON_LOG_WARN, {"AXON_SOFTIB_DEVICES"}));
    EXPECT_TRUE(logged(AXON_LOG_WARN, {"AXON_SOFTIB_BOGUS_KNOB"}));
}

#ifdef HAVE_IBVERBS

/* These hosts have no RDMA NIC; where one exists the zero-device checks do not apply. */
bool host_has_rdma_hardware()
{
    int num = 0;
    struct ibv_device **devs = ibv_get_device_list(&num);

    if (devs != NULL) {
        ibv_free_device_list(devs);
    }
    return num > 0;
}

TEST_F(DeviceLayer, RdmacoreZeroDevicesWithoutError)
{
    std::vector<std::pair<std::string, std::string>> lines;
    axon_dev_info_t entry;
    axon_dev_context_t *ctx = NULL;

    if (host_has_rdma_hardware()) {
        GTEST_SKIP() << "this host has RDMA devices";
    }
    EXPECT_TRUE(names_of("rdma-core").empty());
    EXPECT_EQ(0, axon_dev_rdmacore_backend.get_list(&entry, 1));
    EXPECT_TRUE(logged(AXON_LOG_DEBUG, {"rdma-core: no hardware devices found"}));
    axon_dev_report_backends(report_collect, &lines);
    ASSERT_EQ(2u, lines.size());
    EXPECT_EQ("no hardware devices found; no cross_channel: upstream rdma-core has no "
              "cross-channel verbs; no dc: the rdma-core back end does not drive mlx5dv "
              "DCI/DCT QPs; no umr: the rdma-core back end does not drive mlx5dv_create_mkey",
              lines[1].second);
    /* Not ours, silently: dev.c speaks for the whole layer. */
    EXPECT_EQ(ENODEV, axon_dev_rdmacore_backend.open("mlx5_0", &ctx));
    EXPECT_EQ(0, count_errors());
}

TEST_F(DeviceLayer, RdmacoreDeviceAttrFromIbv)
{
    struct ibv_device_attr in;
    axon_dev_attr_t out;

    memset(&in, 0, sizeof(in));
    strcpy(in.fw_ver, "16.35.2000");
    in.node_guid           = htobe64(0x0102030405060708ull);
    in.max_mr_size         = 1ull << 40;
    in.max_qp              = 131072;
    in.max_qp_wr           = 32768;
    in.max_sge             = 30;
    in.max_cqe             = 4194303;
    in.max_srq             = 8388608;
    in.max_srq_wr          = 32767;
    in.max_qp_rd_atom      = 16;
    in.max_qp_init_rd_atom = 16;
    in.atomic_cap          = IBV_ATOMIC_HCA;
    in.max_pkeys           = 128;
    in.local_ca_ack_delay  = 16;
    in.phys_port_cnt       = 2;
    memset(&out, 0xa5, sizeof(out));
    axon_dev_rdmacore_device_attr_from_ibv(&in, &out);
    EXPECT_STREQ("16.35.2000", out.fw_ver);
    EXPECT_EQ(0x0102030405060708ull, out.node_guid);   /* host order */
    EXPECT_EQ(1ull << 40, out.max_mr_size);
    EXPECT_EQ(131072, out.max_qp);
    EXPECT_EQ(32768, out.max_qp_wr);
    EXPECT_EQ(30, out.max_sge);
    EXPECT_EQ(4194303, out.max_cqe);
    EXPECT_EQ(8388608, out.max_srq);
    EXPECT_EQ(32767, out.max_srq_wr);
    EXPECT_EQ(16, out.max_qp_rd_atom);
    EXPECT_EQ(16, out.max_qp_init_rd_atom);
    EXPECT_EQ(AXON_DEV_ATOMIC_HCA, out.atomic_cap);
    EXPECT_EQ(128, out.max_pkeys);
    EXPECT_EQ(16, out.local_ca_ack_delay);
    EXPECT_EQ(2, out.phys_port_cnt);
    /* Axon additions are the back end's to fill, not left as garbage. */
    EXPECT_EQ(0u, out.cap_flags);
    EXPECT_EQ(0u, out.max_inline_data);
    EXPECT_EQ(0u, out.dc.max_dci);
}

TEST_F(DeviceLayer, RdmacorePortAttrFromIbv)
{
    struct ibv_port_attr in;
    axon_dev_port_attr_t out;

    memset(&in, 0, sizeof(in));
    in.state          = IBV_PORT_ACTIVE;
    in.max_mtu        = IBV_MTU_4096;
    in.active_mtu     = IBV_MTU_1024;
    in.gid_tbl_len    = 255;
    in.max_msg_sz     = 1u << 30;
    in.qkey_viol_cntr = 3;
    in.pkey_tbl_len   = 128;
    in.lid            = 0x1234;
    in.sm_lid         = 1;
    in.link_layer     = IBV_LINK_LAYER_ETHERNET;
    in.active_width   = 2;
    in.active_speed   = 32;
    axon_dev_rdmacore_port_attr_from_ibv(&in, &out);
    EXPECT_EQ(AXON_DEV_PORT_ACTIVE, out.state);
    EXPECT_EQ(AXON_DEV_MTU_4096, out.max_mtu);
    EXPECT_EQ(AXON_DEV_MTU_1024, out.active_mtu);
    EXPECT_EQ(255, out.gid_tbl_len);
    EXPECT_EQ(1u << 30, out.max_msg_sz);
    EXPECT_EQ(3u, out.qkey_viol_cntr);
    EXPECT_EQ(128, out.pkey_tbl_len);
    EXPECT_EQ(0x1234, out.lid);
    EXPECT_EQ(1, out.sm_lid);
    EXPECT_EQ(AXON_DEV_LINK_LAYER_ETHERNET, out.link_layer);
    EXPECT_EQ(2, out.active_width);
    EXPECT_EQ(32, out.active_speed);
}

/* A QP attribute set with a distinct value in every field survives the round trip. */
TEST_F(DeviceLayer, RdmacoreQpAttrRoundTrip)
{
    axon_dev_qp_attr_t in, back;
    struct ibv_qp_attr mid;

    memset(&in, 0, sizeof(in));
    in.qp_state                   = AXON_DEV_QPS_RTS;
    in.cur_qp_state               = AXON_DEV_QPS_RTR;
    in.path_mtu                   = AXON_DEV_MTU_2048;
    in.path_mig_state             = AXON_DEV_MIG_ARMED;
    in.qkey                       = 0x11111111;
    in.rq_psn                     = 0x123456;
    in.sq_psn                     = 0x654321;
    in.dest_qp_num                = 0xabcdef;
    in.qp_access_flags            = AXON_DEV_ACCESS_REMOTE_WRITE | AXON_DEV_ACCESS_REMOTE_ATOMIC;
    in.cap                        = {11, 12, 3, 4, 64};
    in.ah_attr.grh.dgid.raw[0]    = 0xfe;
    in.ah_attr.grh.dgid.raw[15]   = 0x01;
    in.ah_attr.grh.flow_label     = 0x12345;
    in.ah_attr.grh.sgid_index     = 2;
    in.ah_attr.grh.hop_limit      = 64;
    in.ah_attr.grh.traffic_class  = 7;
    in.ah_attr.dlid               = 0x22;
    in.ah_attr.sl                 = 3;
    in.ah_attr.src_path_bits      = 1;
    in.ah_attr.static_rate        = 2;
    in.ah_attr.is_global          = 1;
    in.ah_attr.port_num           = 1;
    in.alt_ah_attr.dlid           = 0x33;
    in.alt_ah_attr.port_num       = 2;
    in.pkey_index                 = 5;
    in.alt_pkey_index             = 6;
    in.en_sqd_async_notify        = 1;
    in.sq_draining                = 1;
    in.max_rd_atomic              = 8;
    in.max_dest_rd_atomic         = 9;
    in.min_rnr_timer              = 12;
    in.port_num                   = 1;
    in.timeout                    = 14;
    in.retry_cnt                  = 7;
    in.rnr_retry                  = 6;
    in.alt_port_num               = 2;
    in.alt_timeout                = 18;

    axon_dev_rdmacore_qp_attr_to_ibv(&in, &mid);
    EXPECT_EQ(IBV_QPS_RTS, mid.qp_state);
    EXPECT_EQ(IBV_MTU_2048, mid.path_mtu);
    EXPECT_EQ(0x654321u, mid.sq_psn);
    EXPECT_EQ(0xabcdefu, mid.dest_qp_num);
    EXPECT_EQ(64u, mid.cap.max_inline_data);
    EXPECT_EQ(0x12345u, mid.ah_attr.grh.flow_label);
    EXPECT_EQ(0xfe, mid.ah_attr.grh.dgid.raw[0]);
    EXPECT_EQ(1, mid.ah_attr.is_global);
    EXPECT_EQ(0x33, mid.alt_ah_attr.dlid);
    EXPECT_EQ(14, mid.timeout);
    EXPECT_EQ(0u, mid.rate_limit);   /* ibv-only field: zero */

    axon_dev_rdmacore_qp_attr_from_ibv(&mid, &back);
    EXPECT_EQ(0, memcmp(&in, &back, sizeof(in)));
}

TEST_F(DeviceLayer, RdmacoreSrqAndCapRoundTrip)
{
    axon_dev_srq_attr_t srq = {1024, 4, 16}, srq_back;
    axon_dev_qp_cap_t cap = {100, 200, 3, 5, 220}, cap_back;
    struct ibv_srq_attr ibv_srq;
    struct ibv_qp_cap ibv_cap;

    axon_dev_rdmacore_srq_attr_to_ibv(&srq, &ibv_srq);
    EXPECT_EQ(16u, ibv_srq.srq_limit);
    axon_dev_rdmacore_srq_attr_from_ibv(&ibv_srq, &srq_back);
    EXPECT_EQ(0, memcmp(&srq, &srq_back, sizeof(srq)));
    axon_dev_rdmacore_qp_cap_to_ibv(&cap, &ibv_cap);
    EXPECT_EQ(220u, ibv_cap.max_inline_data);
    axon_dev_rdmacore_qp_cap_from_ibv(&ibv_cap, &cap_back);
    EXPECT_EQ(0, memcmp(&cap, &cap_back, sizeof(cap)));
}

TEST_F(DeviceLayer, RdmacoreAhAttrRoundTrip)
{
    axon_dev_ah_attr_t in, back;
    struct ibv_ah_attr mid;

    memset(&in, 0, sizeof(in));
    for (int i = 0; i < 16; ++i) {
        in.grh.dgid.raw[i] = (uint8_t)(i + 1);
    }
    in.grh.hop_limit = 1;
    in.is_global     = 1;
    in.port_num      = 1;
    in.sl            = 5;
    axon_dev_rdmacore_ah_attr_to_ibv(&in, &mid);
    EXPECT_EQ(16, mid.grh.dgid.raw[15]);
    axon_dev_rdmacore_ah_attr_from_ibv(&mid, &back);
    EXPECT_EQ(0, memcmp(&in, &back, sizeof(in)));
}

TEST_F(DeviceLayer, RdmacoreSendWrToIbv)
{
    axon_dev_sge_t sge = {0x1000, 64, 0x77};
    axon_dev_send_wr_t wr;
    struct ibv_send_wr out;
    axon_dev_rdmacore_ah_t ah;

    memset(&wr, 0, sizeof(wr));
    wr.wr_id      = 42;
    wr.sg_list    = &sge;
    wr.num_sge    = 1;
    wr.opcode     = AXON_DEV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = AXON_DEV_SEND_SIGNALED | AXON_DEV_SEND_FENCE;
    wr.imm_data   = htonl(0xdeadbeef);
    wr.wr.rdma.remote_addr = 0x2000;
    wr.wr.rdma.rkey        = 0x99;
    axon_dev_rdmacore_send_wr_to_ibv(&wr, &out);
    EXPECT_EQ(42u, out.wr_id);
    EXPECT_EQ(nullptr, out.next);
    EXPECT_EQ((void*)&sge, (void*)out.sg_list);   /* shared, same layout */
    EXPECT_EQ(0x77u, out.sg_list[0].lkey);
    EXPECT_EQ(IBV_WR_RDMA_WRITE_WITH_IMM, out.opcode);
    EXPECT_EQ((unsigned)(IBV_SEND_SIGNALED | IBV_SEND_FENCE), out.send_flags);
    EXPECT_EQ(htonl(0xdeadbeef), out.imm_data);
    EXPECT_EQ(0x2000u, out.wr.rdma.remote_addr);
    EXPECT_EQ(0x99u, out.wr.rdma.rkey);

    wr.opcode = AXON_DEV_WR_ATOMIC_CMP_AND_SWP;
    wr.wr.atomic.remote_addr = 0x3000;
    wr.wr.atomic.compare_add = 5;
    wr.wr.atomic.swap        = 6;
    wr.wr.atomic.rkey        = 0x55;
    axon_dev_rdmacore_send_wr_to_ibv(&wr, &out);
    EXPECT_EQ(IBV_WR_ATOMIC_CMP_AND_SWP, out.opcode);
    EXPECT_EQ(0x3000u, out.wr.atomic.remote_addr);
    EXPECT_EQ(5u, out.wr.atomic.compare_add);
    EXPECT_EQ(6u, out.wr.atomic.swap);
    EXPECT_EQ(0x55u, out.wr.atomic.rkey);

    /* UD: the axon AH becomes the ibv AH it wraps. */
    memset(&ah, 0, sizeof(ah));
    ah.ibv = (struct ibv_ah*)(uintptr_t)0x4242;
    memset(&wr, 0, sizeof(wr));
    wr.opcode            = AXON_DEV_WR_SEND;
    wr.wr.ud.ah          = &ah.super;
    wr.wr.ud.remote_qpn  = 0x1001;
    wr.wr.ud.remote_qkey = 0x11111111;
    axon_dev_rdmacore_send_wr_to_ibv(&wr, &out);
    EXPECT_EQ(IBV_WR_SEND, out.opcode);
    EXPECT_EQ(ah.ibv, out.wr.ud.ah);
    EXPECT_EQ(0x1001u, out.wr.ud.remote_qpn);
    EXPECT_EQ(0x11111111u, out.wr.ud.remote_qkey);
}

/* Events lead from the ibv object back to its wrapper and the other way round. */
TEST_F(DeviceLayer, RdmacoreAsyncEventConversion)
{
    axon_dev_rdmacore_qp_t qp;
    axon_dev_rdmacore_cq_t cq;
    axon_dev_rdmacore_srq_t srq;
    struct ibv_qp ibv_qp;
    struct ibv_cq ibv_cq;
    struct ibv_srq ibv_srq;
    struct ibv_async_event ev, back;
    axon_dev_async_event_t out;

    memset(&qp, 0, sizeof(qp));
    memset(&cq, 0, sizeof(cq));
    memset(&srq, 0, sizeof(srq));
    memset(&ibv_qp, 0, sizeof(ibv_qp));
    memset(&ibv_cq, 0, sizeof(ibv_cq));
    memset(&ibv_srq, 0, sizeof(ibv_srq));
    qp.ibv = &ibv_qp;   ibv_qp.qp_context   = &qp;
    cq.ibv = &ibv_cq;   ibv_cq.cq_context   = &cq;
    srq.ibv = &ibv_srq; ibv_srq.srq_context = &srq;

    ev.event_type = IBV_EVENT_QP_ACCESS_ERR;
    ev.element.qp = &ibv_qp;
    ASSERT_EQ(0, axon_dev_rdmacore_event_from_ibv(&ev, &out));
    EXPECT_EQ(AXON_DEV_EVENT_QP_ACCESS_ERR, out.event_type);
    EXPECT_EQ(&qp.super, out.element.qp);
    ASSERT_EQ(0, axon_dev_rdmacore_event_to_ibv(&out, &back));
    EXPECT_EQ(&ibv_qp, back.element.qp);

    ev.event_type = IBV_EVENT_CQ_ERR;
    ev.element.cq = &ibv_cq;
    ASSERT_EQ(0, axon_dev_rdmacore_event_from_ibv(&ev, &out));
    EXPECT_EQ(&cq.super, out.element.cq);
    ASSERT_EQ(0, axon_dev_rdmacore_event_to_ibv(&out, &back));
    EXPECT_EQ(&ibv_cq, back.element.cq);

    ev.event_type  = IBV_EVENT_SRQ_LIMIT_REACHED;
    ev.element.srq = &ibv_srq;
    ASSERT_EQ(0, axon_dev_rdmacore_event_from_ibv(&ev, &out));
    EXPECT_EQ(&srq.super, out.element.srq);
    ASSERT_EQ(0, axon_dev_rdmacore_event_to_ibv(&out, &back));
    EXPECT_EQ(&ibv_srq, back.element.srq);

    ev.event_type       = IBV_EVENT_PORT_ACTIVE;
    ev.element.port_num = 1;
    ASSERT_EQ(0, axon_dev_rdmacore_event_from_ibv(&ev, &out));
    EXPECT_EQ(1, out.element.port_num);

    ev.event_type = IBV_EVENT_QP_LAST_WQE_REACHED;
    ev.element.qp = &ibv_qp;
    ASSERT_EQ(0, axon_dev_rdmacore_event_from_ibv(&ev, &out));
    EXPECT_EQ(&qp.super, out.element.qp);

    /* A type newer than dev.h knows is refused, not misread. */
    ev.event_type = (enum ibv_event_type)(IBV_EVENT_GID_CHANGE + 1);
    EXPECT_EQ(EINVAL, axon_dev_rdmacore_event_from_ibv(&ev, &out));
}

#endif /* HAVE_IBVERBS */

} // namespace
