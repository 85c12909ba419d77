/*
 * Bad input gets a clear error and breaks nothing: wrong parameters,
 * configuration the library cannot use, and worker addresses that are
 * truncated, corrupted or plain garbage. Where the library should say which
 * value was wrong, the test reads the log (stderr) and looks for it.
 */
#include <gtest/gtest.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "axon.h"
#include "axon_introspect.h"
#include "harness.h"
#include "log_capture.h"

namespace {

const double kOpTimeout = 10.0;

/* init, then (if that worked) a worker: the first error, everything released. */
axon_status_t init_and_worker(const axon_context_params_t *params)
{
    axon_context_h ctx    = nullptr;
    axon_worker_h  worker = nullptr;
    axon_status_t  status = axon_init(params, &ctx);

    if (status == AXON_OK) {
        status = axon_worker_create(ctx, NULL, &worker);
        if (status == AXON_OK) {
            axon_worker_destroy(worker);
        }
        axon_cleanup(ctx);
    }
    return status;
}

bool is_address_error(axon_status_t status)
{
    return (status == AXON_ERR_INVALID_ADDR) || (status == AXON_ERR_IO_FORMAT);
}

/* ---------------------------------------------------------------- axon_init */

TEST(BadInit, NullParams)
{
    axon_context_h ctx = nullptr;
    std::string    log = capture_stderr([&] {
        EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_init(NULL, &ctx));
    });
    EXPECT_EQ(nullptr, ctx);
    EXPECT_NE(std::string::npos, log.find("params")) << log;
}

TEST(BadInit, NoFeatures)
{
    axon_context_params_t params = {0, NULL, 0};
    axon_context_h        ctx    = nullptr;

    capture_stderr([&] { EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_init(&params, &ctx)); });
    EXPECT_EQ(nullptr, ctx);
}

TEST(BadInit, UnknownFeatureBit)
{
    axon_context_params_t params = {AXON_FEATURE_TAG | (1u << 20), NULL, 0};
    axon_context_h        ctx    = nullptr;

    capture_stderr([&] { EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_init(&params, &ctx)); });
    EXPECT_EQ(nullptr, ctx);
}

TEST(BadInit, ConfigCountWithoutArray)
{
    axon_context_params_t params = {AXON_FEATURE_TAG, NULL, 3};
    axon_context_h        ctx    = nullptr;

    capture_stderr([&] { EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_init(&params, &ctx)); });
}

TEST(BadInit, NullOverrideNameOrValue)
{
    axon_config_kv_t      kv1[] = {{NULL, "self"}};
    axon_config_kv_t      kv2[] = {{"TLS", NULL}};
    axon_context_params_t p1    = {AXON_FEATURE_TAG, kv1, 1};
    axon_context_params_t p2    = {AXON_FEATURE_TAG, kv2, 1};
    axon_context_h        ctx   = nullptr;

    capture_stderr([&] {
        EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_init(&p1, &ctx));
        EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_init(&p2, &ctx));
    });
}

/* A configuration override the library must refuse, and what the log must name. */
struct BadKv {
    const char *label;
    const char *name;
    const char *value;
    const char *log_must_name;  /* the offending text */
};

std::ostream &operator<<(std::ostream &os, const BadKv &p)
{
    return os << p.name << "=" << p.value;
}

class BadConfig : public ::testing::TestWithParam<BadKv> {};

TEST_P(BadConfig, RejectedWithTheValueNamed)
{
    const BadKv          &bad  = GetParam();
    axon_config_kv_t      kv[] = {{bad.name, bad.value}};
    axon_context_params_t params = {AXON_FEATURE_TAG, kv, 1};
    axon_status_t         status = AXON_OK;

    std::string log = capture_stderr([&] { status = init_and_worker(&params); });
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, status) << bad.name << "=" << bad.value << ": "
                                              << axon_status_string(status);
    EXPECT_NE(std::string::npos, log.find(bad.log_must_name))
        << "the log should name '" << bad.log_must_name << "':\n" << log;
}

const BadKv kBadKvs[] = {
    {"tls_bogus",        "TLS",            "bogus",       "bogus"},
    {"tls_list_bogus",   "TLS",            "self,bogus",  "bogus"},
    {"tls_deny_bogus",   "TLS",            "^nosuchtl",   "nosuchtl"},
    {"log_level_loud",   "LOG_LEVEL",      "loud",        "loud"},
    {"unknown_name",     "NO_SUCH_VARIABLE", "1",         "NO_SUCH_VARIABLE"},
    {"typo_name",        "TSL",            "self",        "TSL"},
    {"bool_maybe",       "WARN_UNUSED_ENV", "maybe",      "maybe"},
    {"size_suffix",      "BCOPY_THRESH",   "12q",         "12q"},
    {"uint_negative",    "TAG_HASH_BITS",  "-3",          "-3"},
    {"hash_bits_range",  "TAG_HASH_BITS",  "99",          "99"},
    {"uint_text",        "UNEXP_POOL_MAX", "lots",        "lots"},
    {"log_file_nodir",   "LOG_FILE",       "/nonexistent-axon-dir/x.log", "/nonexistent-axon-dir"},
    {"shm_fifo_text",    "SHM_FIFO_SIZE",  "big",         "big"},
    {"tcp_chunk_small",  "TCP_IO_CHUNK",   "100",         "AXON_TCP_IO_CHUNK=100"},
    {"tcp_chunk_big",    "TCP_IO_CHUNK",   "1g",          "AXON_TCP_IO_CHUNK=1G"},
};

INSTANTIATE_TEST_SUITE_P(Values, BadConfig, ::testing::ValuesIn(kBadKvs),
                         [](const ::testing::TestParamInfo<BadKv> &info) {
                             return std::string(info.param.label);
                         });

/* The environment is read like the overrides. */
TEST(BadInit, BadEnvironmentVariable)
{
    axon_context_params_t params = {AXON_FEATURE_TAG, NULL, 0};
    axon_status_t         status = AXON_OK;

    setenv("AXON_TLS", "bogus_from_env", 1);
    std::string log = capture_stderr([&] { status = init_and_worker(&params); });
    unsetenv("AXON_TLS");
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, status);
    EXPECT_NE(std::string::npos, log.find("bogus_from_env")) << log;

    setenv("AXON_LOG_LEVEL", "shouting", 1);
    log = capture_stderr([&] { status = init_and_worker(&params); });
    unsetenv("AXON_LOG_LEVEL");
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, status);
    EXPECT_NE(std::string::npos, log.find("shouting")) << log;
}

/* With LOG_FILE set, the error about another value lands in that file. */
TEST(BadInit, ErrorGoesToLogFile)
{
    char path[] = "/tmp/axon-test-log-XXXXXX";
    int  fd     = mkstemp(path);
    ASSERT_GE(fd, 0);
    close(fd);

    axon_config_kv_t      kv[]   = {{"LOG_FILE", path}, {"TLS", "no_such_transport"}};
    axon_context_params_t params = {AXON_FEATURE_TAG, kv, 2};
    axon_status_t         status = AXON_OK;
    std::string log = capture_stderr([&] { status = init_and_worker(&params); });
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, status);

    /* Back to stderr for whoever logs next. */
    axon_config_kv_t      kv_reset[] = {{"TLS", "self"}};
    axon_context_params_t reset      = {AXON_FEATURE_TAG, kv_reset, 1};
    EXPECT_EQ(AXON_OK, init_and_worker(&reset));

    FILE       *f = fopen(path, "r");
    std::string text;
    ASSERT_NE(nullptr, f);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
        text.append(buf, n);
    }
    fclose(f);
    unlink(path);
    EXPECT_NE(std::string::npos, text.find("no_such_transport"))
        << "log file:\n" << text << "\nstderr:\n" << log;
    EXPECT_EQ(std::string::npos, log.find("no_such_transport")) << "went to stderr instead";
}

TEST(BadWorker, ReservedFieldSet)
{
    axon_config_kv_t      kv[]   = {{"TLS", "self"}};
    axon_context_params_t params = {AXON_FEATURE_TAG, kv, 1};
    axon_context_h        ctx;
    axon_worker_h         worker = nullptr;
    axon_worker_params_t  wp     = {1};

    ASSERT_EQ(AXON_OK, axon_init(&params, &ctx));
    capture_stderr([&] {
        EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_worker_create(ctx, &wp, &worker));
        EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_worker_create(NULL, NULL, &worker));
    });
    EXPECT_EQ(nullptr, worker);
    axon_cleanup(ctx);
}

/* ---------------------------------------------------------------- addresses */

/* A worker on every transport, and a valid address (its own) to spoil. */
class BadAddress : public ::testing::Test {
protected:
    void SetUp() override
    {
        ASSERT_EQ(AXON_OK, axon_test_node_create(&node_, NULL, NULL, 0));
        addr_.assign(static_cast<uint8_t *>(node_.address),
                     static_cast<uint8_t *>(node_.address) + node_.address_length);
    }

    void TearDown() override { axon_test_node_destroy(&node_); }

    /* Try an endpoint; close it if one was made. Returns the status; logs captured. */
    axon_status_t try_ep(const void *addr, size_t len, std::string *log = nullptr)
    {
        axon_ep_h     ep     = nullptr;
        axon_status_t status = AXON_OK;
        std::string   text   = capture_stderr([&] {
            status = axon_test_ep_create(node_.worker, addr, len, &ep);
        });
        if (status == AXON_OK) {
            EXPECT_NE(nullptr, ep);
            EXPECT_EQ(AXON_OK, axon_test_ep_close(node_.worker, ep, AXON_EP_CLOSE_FORCE,
                                                  kOpTimeout));
        } else {
            EXPECT_EQ(nullptr, ep) << "ep_p written on failure";
        }
        if (log != nullptr) {
            *log = text;
        }
        return status;
    }

    axon_test_node_t     node_;
    std::vector<uint8_t> addr_;
};

TEST_F(BadAddress, ValidAddressWorks)
{
    EXPECT_EQ(AXON_OK, try_ep(addr_.data(), addr_.size()));
}

TEST_F(BadAddress, NullAddress)
{
    axon_status_t status = try_ep(NULL, addr_.size());
    EXPECT_TRUE(is_address_error(status) || (status == AXON_ERR_INVALID_PARAM))
        << axon_status_string(status);
    axon_ep_h ep = nullptr;
    capture_stderr([&] {
        EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_ep_create(node_.worker, NULL, &ep));
    });
}

TEST_F(BadAddress, ZeroLength)
{
    axon_status_t status = try_ep(addr_.data(), 0);
    EXPECT_TRUE(is_address_error(status) || (status == AXON_ERR_INVALID_PARAM))
        << axon_status_string(status);
}

TEST_F(BadAddress, EveryTruncation)
{
    for (size_t len = 1; len < addr_.size(); ++len) {
        std::vector<uint8_t> cut(addr_.begin(), addr_.begin() + len);  /* exact allocation */
        axon_status_t        status = try_ep(cut.data(), len);
        ASSERT_TRUE(is_address_error(status))
            << "address cut to " << len << " of " << addr_.size() << " bytes: "
            << axon_status_string(status);
    }
}

TEST_F(BadAddress, CorruptedMagic)
{
    for (size_t i = 0; i < 4; ++i) {
        std::vector<uint8_t> bad = addr_;
        std::string          log;
        bad[i] ^= 0x5A;
        axon_status_t status = try_ep(bad.data(), bad.size(), &log);
        EXPECT_TRUE(is_address_error(status)) << "byte " << i << ": "
                                              << axon_status_string(status);
        EXPECT_NE(std::string::npos, log.find("magic")) << log;
    }
}

TEST_F(BadAddress, EveryByteFlipped)
{
    /* Some flips land in bytes nobody checks; none may crash or leave a mess. */
    int accepted = 0;
    for (size_t i = 0; i < addr_.size(); ++i) {
        for (uint8_t mask : {0x01, 0x80, 0xFF}) {
            std::vector<uint8_t> bad = addr_;
            bad[i] ^= mask;
            axon_status_t status = try_ep(bad.data(), bad.size());
            EXPECT_LE(status, AXON_OK) << "byte " << i;
            accepted += (status == AXON_OK);
        }
    }
    RecordProperty("flips_accepted", accepted);
}

TEST_F(BadAddress, TrailingBytes)
{
    std::vector<uint8_t> longer = addr_;
    longer.resize(addr_.size() + 100, 0xCC);
    axon_status_t status = try_ep(longer.data(), longer.size());
    EXPECT_TRUE((status == AXON_OK) || is_address_error(status)) << axon_status_string(status);
}

class GarbageAddress : public BadAddress, public ::testing::WithParamInterface<int> {};

TEST_P(GarbageAddress, RandomBytes)
{
    std::mt19937 rng(GetParam());
    for (int round = 0; round < 50; ++round) {
        size_t               len = 1 + rng() % 600;
        std::vector<uint8_t> junk(len);
        for (auto &b : junk) {
            b = (uint8_t)rng();
        }
        axon_status_t status = try_ep(junk.data(), len);
        ASSERT_TRUE(is_address_error(status)) << "seed " << GetParam() << " round " << round
                                              << ": " << axon_status_string(status);
    }
}

TEST_P(GarbageAddress, ValidHeaderRandomBody)
{
    /* Past the magic check: the parser must still bound every length it reads. */
    std::mt19937 rng(GetParam());
    const size_t keep = 8;
    ASSERT_GT(addr_.size(), keep);
    for (int round = 0; round < 50; ++round) {
        std::vector<uint8_t> bad = addr_;
        bad.resize(keep + rng() % (2 * addr_.size()));
        for (size_t i = keep; i < bad.size(); ++i) {
            bad[i] = (uint8_t)rng();
        }
        axon_status_t status = try_ep(bad.data(), bad.size());
        ASSERT_LT(status, AXON_OK) << "seed " << GetParam() << " round " << round;
    }
}

INSTANTIATE_TEST_SUITE_P(Seeds, GarbageAddress, ::testing::Values(1, 2, 3, 42, 1234, 99991));

/* ---------------------------------------------------------------- send / receive */

class BadCall : public ::testing::Test {
protected:
    void SetUp() override
    {
        ASSERT_EQ(AXON_OK, axon_test_node_create(&node_, "self", NULL, 0));
        ASSERT_EQ(AXON_OK, axon_test_ep_create(node_.worker, node_.address,
                                               node_.address_length, &ep_));
    }

    void TearDown() override
    {
        if (ep_ != nullptr) {
            EXPECT_EQ(AXON_OK, axon_test_ep_close(node_.worker, ep_, AXON_EP_CLOSE_FLUSH,
                                                  kOpTimeout));
        }
        axon_test_node_destroy(&node_);
    }

    axon_test_node_t node_;
    axon_ep_h        ep_ = nullptr;
};

axon_request_h const kSentinel = reinterpret_cast<axon_request_h>(0x1234);

TEST_F(BadCall, SendNullBufferWithLength)
{
    axon_request_h req = kSentinel;
    std::string    log = capture_stderr([&] {
        EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_tag_send_nb(ep_, NULL, 10, 1, NULL, &req));
    });
    EXPECT_EQ(kSentinel, req) << "req_p written on error";
    EXPECT_NE(std::string::npos, log.find("buffer")) << log;
    /* Nothing was sent. */
    uint8_t              byte;
    axon_tag_recv_info_t info;
    axon_request_param_t param = {};
    param.recv_info = &info;
    axon_status_t status = axon_tag_recv_nb(node_.worker, &byte, 1, 0, 0, &param, &req);
    axon_test_progress_for(node_.worker, 0.01);
    EXPECT_EQ(AXON_INPROGRESS, status);
    if (status == AXON_INPROGRESS) {
        EXPECT_EQ(AXON_INPROGRESS, axon_request_test(req, NULL)) << "a message was sent";
        axon_request_free(req);
    }
}

TEST_F(BadCall, SendNullRequestPointer)
{
    capture_stderr([&] {
        EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_tag_send_nb(ep_, "x", 1, 1, NULL, NULL));
        EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_tag_send_nb(NULL, "x", 1, 1, NULL, NULL));
    });
}

TEST_F(BadCall, RecvNullBufferWithLength)
{
    axon_request_h req = kSentinel;
    std::string    log = capture_stderr([&] {
        EXPECT_EQ(AXON_ERR_INVALID_PARAM,
                  axon_tag_recv_nb(node_.worker, NULL, 10, 1, AXON_TAG_MASK_FULL, NULL, &req));
        EXPECT_EQ(AXON_ERR_INVALID_PARAM,
                  axon_tag_recv_nb(NULL, &req, 1, 1, AXON_TAG_MASK_FULL, NULL, &req));
    });
    EXPECT_EQ(kSentinel, req);
    EXPECT_NE(std::string::npos, log.find("buffer")) << log;
    /* The failed receive took nothing: a message still goes to the next one. */
    ASSERT_EQ(AXON_OK, axon_test_send(node_.worker, ep_, "abc", 3, 1, kOpTimeout));
    char                 buf[8];
    axon_tag_recv_info_t info;
    ASSERT_EQ(AXON_OK, axon_test_recv(node_.worker, buf, sizeof(buf), 1, AXON_TAG_MASK_FULL,
                                      &info, kOpTimeout));
    EXPECT_EQ(3u, info.length);
}

TEST_F(BadCall, CloseWithBadMode)
{
    axon_request_h req = kSentinel;
    capture_stderr([&] {
        EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_ep_close_nb(ep_, 7, &req));
        EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_ep_close_nb(NULL, AXON_EP_CLOSE_FLUSH, &req));
    });
    EXPECT_EQ(kSentinel, req);
    /* The endpoint still works. */
    EXPECT_EQ(AXON_OK, axon_test_send(node_.worker, ep_, "x", 1, 2, kOpTimeout));
    char buf[1];
    EXPECT_EQ(AXON_OK, axon_test_recv(node_.worker, buf, 1, 2, AXON_TAG_MASK_FULL, NULL,
                                      kOpTimeout));
}

TEST_F(BadCall, RequestTestKeepsFinalStatus)
{
    /* A send that finished at once, as a request. */
    axon_request_param_t param = {};
    axon_request_h       sreq  = nullptr;
    param.flags = AXON_REQ_FLAG_NO_IMM_CMPL;
    ASSERT_EQ(AXON_INPROGRESS, axon_tag_send_nb(ep_, "0123456789", 10, 3, &param, &sreq));
    for (int i = 0; i < 3; ++i) {
        axon_test_progress(node_.worker);
        EXPECT_EQ(AXON_OK, axon_request_test(sreq, NULL)) << i;
    }
    axon_request_free(sreq);

    /* A receive that failed: the status stays, the info too. */
    char                 small[4];
    axon_tag_recv_info_t info  = {0, 0};
    axon_request_h       rreq  = nullptr;
    axon_status_t        status = axon_tag_recv_nb(node_.worker, small, sizeof(small), 3,
                                                   AXON_TAG_MASK_FULL, &param, &rreq);
    ASSERT_EQ(AXON_INPROGRESS, status);
    for (int i = 0; i < 3; ++i) {
        axon_test_progress(node_.worker);
        info = {0, 0};
        EXPECT_EQ(AXON_ERR_MSG_TRUNCATED, axon_request_test(rreq, &info)) << i;
        EXPECT_EQ(10u, info.length);
        EXPECT_EQ(3u, info.sender_tag);
    }
    EXPECT_EQ(0, memcmp(small, "0123", 4));
    axon_request_free(rreq);

    /* A receive in flight reports so, and then its result. */
    rreq = nullptr;
    ASSERT_EQ(AXON_INPROGRESS, axon_tag_recv_nb(node_.worker, small, sizeof(small), 4,
                                                AXON_TAG_MASK_FULL, &param, &rreq));
    axon_test_progress(node_.worker);
    EXPECT_EQ(AXON_INPROGRESS, axon_request_test(rreq, &info));
    ASSERT_EQ(AXON_OK, axon_test_send(node_.worker, ep_, "ab", 2, 4, kOpTimeout));
    EXPECT_EQ(AXON_OK, axon_request_wait(node_.worker, rreq, &info));
    EXPECT_EQ(2u, info.length);
    EXPECT_EQ(AXON_OK, axon_request_test(rreq, &info));
    axon_request_free(rreq);

    capture_stderr([&] { EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_request_test(NULL, NULL)); });
}

TEST_F(BadCall, SendOnClosingEndpoint)
{
    /* A flushing close with nothing queued finishes at once; then the handle is gone. */
    axon_request_h req    = nullptr;
    axon_status_t  status = axon_ep_close_nb(ep_, AXON_EP_CLOSE_FLUSH, &req);
    ASSERT_TRUE((status == AXON_OK) || (status == AXON_INPROGRESS));
    EXPECT_EQ(AXON_OK, axon_test_wait_req(node_.worker, status, req, NULL, kOpTimeout));
    ep_ = nullptr;
}

/* ---------------------------------------------------------------- status text */

TEST(StatusString, EveryStatusHasDistinctText)
{
    std::set<std::string> seen;
    for (int s = AXON_ERR_IO_FORMAT; s <= AXON_INPROGRESS; ++s) {
        const char *text = axon_status_string((axon_status_t)s);
        ASSERT_NE(nullptr, text) << s;
        EXPECT_GT(strlen(text), 0u) << s;
        EXPECT_TRUE(seen.insert(text).second) << "status " << s << " repeats '" << text << "'";
    }
    /* Values outside the enum still give text. */
    for (int s : {-19, -1000, 2, 1000}) {
        const char *text = axon_status_string((axon_status_t)s);
        ASSERT_NE(nullptr, text) << s;
        EXPECT_EQ(0u, seen.count(text)) << s << " looks like a real status";
    }
    EXPECT_STREQ("Message truncated", axon_status_string(AXON_ERR_MSG_TRUNCATED));
}

/* ---------------------------------------------------------------- introspection */

TEST(Introspect, PrintsWhatIsAskedRefusesBadInput)
{
    axon_config_kv_t      kv     = {"TLS", "self"};
    axon_context_params_t params = {};
    axon_context_h        ctx;
    char                 *text = NULL;
    size_t                size = 0;
    FILE                 *out;

    params.features     = AXON_FEATURE_TAG;
    params.config       = &kv;
    params.config_count = 1;
    ASSERT_EQ(AXON_OK, axon_init(&params, &ctx));
    out = open_memstream(&text, &size);
    ASSERT_NE(nullptr, out);
    EXPECT_EQ(AXON_OK, axon_introspect_print(ctx, AXON_INTROSPECT_BUILD, out));
    fclose(out);
    EXPECT_NE(nullptr, strstr(text, "# Axon version ")) << text;
    EXPECT_EQ(nullptr, strstr(text, "AXON_TLS=")) << "configuration printed unasked";
    free(text);
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_introspect_print(ctx, AXON_INTROSPECT_ALL + 1, stdout));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_introspect_print(ctx, AXON_INTROSPECT_BUILD, NULL));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_introspect_print(NULL, AXON_INTROSPECT_BUILD, stdout));
    axon_cleanup(ctx);
}

TEST(Version, MatchesHeader)
{
    unsigned major = 99, minor = 99, patch = 99;
    axon_get_version(&major, &minor, &patch);
    EXPECT_EQ((unsigned)AXON_VERSION_MAJOR, major);
    EXPECT_EQ((unsigned)AXON_VERSION_MINOR, minor);
    EXPECT_EQ((unsigned)AXON_VERSION_PATCH, patch);
    std::string expect = std::to_string(major) + "." + std::to_string(minor) + "." +
                         std::to_string(patch);
    ASSERT_NE(nullptr, axon_get_version_string());
    EXPECT_EQ(expect, axon_get_version_string());
}

}  // namespace
