/*
 * The RMA engine and its active-message protocol, in one process: two
 * workers of one context, the initiator's endpoint to the target over a
 * transport (self, shm, tcp), keys unpacked on the LOCAL path (the default
 * in one process) or forced onto active messages (AXON_RMA_PATH=am), and
 * malformed RMA messages handed straight to the handlers. The suites over
 * every lane between processes are in test_rma.cc.
 */
#include <gtest/gtest.h>

#include <string.h>
#include <time.h>

#include <functional>
#include <string>
#include <vector>

#include "axon.h"
#include "harness.h"
extern "C" {
#include "log.h"
#include "rma_proto.h"
}

namespace {

const double kTimeout = 20.0;

double now_sec()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct RmaParam {
    const char *tls;
    const char *path;  /* AXON_RMA_PATH */
};

std::string param_name(const testing::TestParamInfo<RmaParam> &info)
{
    return std::string(info.param.tls) + "_" + info.param.path;
}

class RmaProto : public testing::TestWithParam<RmaParam> {
protected:
    static const size_t kMapLen = (4u << 20) + 8192;

    void SetUp() override
    {
        axon_config_kv_t kv[] = {{"TLS", GetParam().tls}, {"RMA_PATH", GetParam().path}};
        axon_context_params_t params = {AXON_FEATURE_TAG | AXON_FEATURE_RMA | AXON_FEATURE_AMO,
                                        kv, 2};
        void *addr;
        size_t addr_len;

        ASSERT_EQ(AXON_OK, axon_init(&params, &ctx_));
        ASSERT_EQ(AXON_OK, axon_worker_create(ctx_, NULL, &w_[0]));
        if (strcmp(GetParam().tls, "self") == 0) {
            w_[1] = w_[0];
        } else {
            ASSERT_EQ(AXON_OK, axon_worker_create(ctx_, NULL, &w_[1]));
        }
        ASSERT_EQ(AXON_OK, axon_worker_get_address(w_[1], &addr, &addr_len));
        axon_ep_params_t ep_params = {addr, addr_len, NULL, NULL};
        ASSERT_EQ(AXON_OK, axon_ep_create(w_[0], &ep_params, &ep_));
        axon_worker_release_address(w_[1], addr);

        axon_mem_map_params_t mp = {NULL, kMapLen, AXON_MEM_MAP_ALLOCATE};
        ASSERT_EQ(AXON_OK, axon_mem_map(ctx_, &mp, &memh_));
        ASSERT_EQ(AXON_OK, axon_mem_query(memh_, &base_, &len_));
        ASSERT_EQ(AXON_OK, axon_rkey_pack(ctx_, memh_, &rkey_buf_, &rkey_len_));
        ASSERT_EQ(AXON_OK, axon_ep_rkey_unpack(ep_, rkey_buf_, rkey_len_, &rkey_));
        raddr_ = (uint64_t)(uintptr_t)base_;
    }

    void TearDown() override
    {
        if (rkey_ != nullptr) {
            axon_rkey_destroy(rkey_);
        }
        if (rkey_buf_ != nullptr) {
            axon_rkey_buffer_release(rkey_buf_);
        }
        if (ep_ != nullptr) {
            axon_request_h req = nullptr;
            if (axon_ep_close_nb(ep_, AXON_EP_CLOSE_FLUSH, &req) == AXON_INPROGRESS) {
                wait(req);
            }
        }
        if (memh_ != nullptr) {
            axon_mem_unmap(ctx_, memh_);
        }
        if ((w_[1] != nullptr) && (w_[1] != w_[0])) {
            axon_worker_destroy(w_[1]);
        }
        if (w_[0] != nullptr) {
            axon_worker_destroy(w_[0]);
        }
        if (ctx_ != nullptr) {
            axon_cleanup(ctx_);
        }
    }

    void progress()
    {
        axon_worker_progress(w_[0]);
        if (w_[1] != w_[0]) {
            axon_worker_progress(w_[1]);
        }
    }

    /* The status an operation ends with: at once, or after its request completes. */
    axon_status_t wait(axon_request_h req)
    {
        double end = now_sec() + kTimeout;
        axon_status_t status;

        while ((status = axon_request_test(req, NULL)) == AXON_INPROGRESS) {
            if (now_sec() > end) {
                ADD_FAILURE() << "request timed out";
                return AXON_ERR_TIMED_OUT;
            }
            progress();
        }
        axon_request_free(req);
        return status;
    }

    /* req is read after the call that fills it (argument order is unspecified). */
    axon_status_t finish(axon_status_t status, axon_request_h *req)
    {
        return (status == AXON_INPROGRESS) ? wait(*req) : status;
    }

    axon_status_t flush()
    {
        axon_request_h req = nullptr;
        return finish(axon_ep_flush_nb(ep_, NULL, &req), &req);
    }

    axon_status_t put(const void *buf, size_t len, uint64_t addr)
    {
        axon_request_h req = nullptr;
        return finish(axon_put_nb(ep_, buf, len, addr, rkey_, NULL, &req), &req);
    }

    axon_status_t get(void *buf, size_t len, uint64_t addr)
    {
        axon_request_h req = nullptr;
        return finish(axon_get_nb(ep_, buf, len, addr, rkey_, NULL, &req), &req);
    }

    uint64_t atomic(axon_atomic_op_t op, size_t size, uint64_t value, uint64_t compare,
                    uint64_t addr, axon_status_t *status_p = nullptr)
    {
        axon_request_h req = nullptr;
        uint64_t result = 0;
        bool fetch = (op == AXON_ATOMIC_SWAP) || (op == AXON_ATOMIC_CSWAP) ||
                     (compare == ~0ull);
        axon_status_t status;

        status = finish(axon_atomic_nb(ep_, op, size, &value, &compare,
                                       fetch ? &result : NULL, addr, rkey_, NULL, &req), &req);
        if (status_p != nullptr) {
            *status_p = status;
        } else {
            EXPECT_EQ(AXON_OK, status);
        }
        return result;
    }

    axon_context_h ctx_      = nullptr;
    axon_worker_h  w_[2]     = {nullptr, nullptr};
    axon_ep_h      ep_       = nullptr;
    axon_mem_h     memh_     = nullptr;
    void          *base_     = nullptr;
    size_t         len_      = 0;
    void          *rkey_buf_ = nullptr;
    size_t         rkey_len_ = 0;
    axon_rkey_h    rkey_     = nullptr;
    uint64_t       raddr_    = 0;
};

TEST_P(RmaProto, PutGetSizes)
{
    const size_t sizes[] = {1, 7, 8, 100, 4096, 65539, 1u << 20, 4u << 20};
    uint8_t *target = static_cast<uint8_t *>(base_);

    for (size_t len : sizes) {
        std::vector<uint8_t> src(len), dst(len + 64, 0xEE);
        axon_test_fill(src.data(), len, len);
        memset(target, 0x55, len_);

        ASSERT_EQ(AXON_OK, put(src.data(), len, raddr_ + 8)) << len;
        ASSERT_EQ(AXON_OK, flush()) << len;
        ASSERT_EQ(0, memcmp(target + 8, src.data(), len)) << len;
        ASSERT_EQ(0x55, target[7]);
        ASSERT_EQ(0x55, target[8 + len]);

        ASSERT_EQ(AXON_OK, get(dst.data(), len, raddr_ + 8)) << len;
        ASSERT_EQ(0, memcmp(dst.data(), src.data(), len)) << len;
        ASSERT_EQ(0xEE, dst[len]);
    }
}

TEST_P(RmaProto, ManyPutsThenFlush)
{
    const size_t n = 500;
    uint64_t *target = static_cast<uint64_t *>(base_);
    std::vector<uint64_t> values(n);
    std::vector<axon_request_h> reqs;
    axon_request_h req;

    for (uint64_t i = 0; i < n; ++i) {
        values[i] = i * 3 + 1;
        axon_status_t status = axon_put_nb(ep_, &values[i], 8, raddr_ + i * 8, rkey_, NULL,
                                           &req);
        ASSERT_TRUE((status == AXON_OK) || (status == AXON_INPROGRESS)) << status;
        if (status == AXON_INPROGRESS) {
            reqs.push_back(req);
        }
    }
    ASSERT_EQ(AXON_OK, flush());  /* before the requests: flush covers them */
    for (uint64_t i = 0; i < n; ++i) {
        ASSERT_EQ(i * 3 + 1, target[i]) << i;
    }
    for (axon_request_h r : reqs) {
        EXPECT_EQ(AXON_OK, wait(r));
    }
}

TEST_P(RmaProto, Iov)
{
    std::vector<uint8_t> a(3000), b(70000), c(17), back(a.size() + b.size() + c.size());
    axon_test_fill(a.data(), a.size(), 1);
    axon_test_fill(b.data(), b.size(), 2);
    axon_test_fill(c.data(), c.size(), 3);
    axon_iov_t iov[] = {{a.data(), a.size()}, {nullptr, 0}, {b.data(), b.size()},
                        {c.data(), c.size()}};
    axon_request_h req = nullptr;
    uint8_t *target = static_cast<uint8_t *>(base_) + 64;

    ASSERT_EQ(AXON_OK, finish(axon_put_iov_nb(ep_, iov, 4, raddr_ + 64, rkey_, NULL, &req), &req));
    ASSERT_EQ(AXON_OK, flush());
    ASSERT_EQ(0, memcmp(target, a.data(), a.size()));
    ASSERT_EQ(0, memcmp(target + a.size(), b.data(), b.size()));
    ASSERT_EQ(0, memcmp(target + a.size() + b.size(), c.data(), c.size()));

    std::vector<uint8_t> a2(a.size()), b2(b.size()), c2(c.size());
    axon_iov_t iov2[] = {{a2.data(), a2.size()}, {b2.data(), b2.size()}, {c2.data(), c2.size()}};
    ASSERT_EQ(AXON_OK, finish(axon_get_iov_nb(ep_, iov2, 3, raddr_ + 64, rkey_, NULL, &req), &req));
    EXPECT_TRUE(a2 == a);
    EXPECT_TRUE(b2 == b);
    EXPECT_TRUE(c2 == c);
}

TEST_P(RmaProto, Atomics)
{
    uint64_t *t64 = static_cast<uint64_t *>(base_);
    uint32_t *t32 = static_cast<uint32_t *>(base_);

    t64[0] = 10;
    EXPECT_EQ(10u, atomic(AXON_ATOMIC_ADD, 8, 5, ~0ull, raddr_));   /* fetch-add */
    atomic(AXON_ATOMIC_ADD, 8, 5, 0, raddr_);                      /* post add */
    ASSERT_EQ(AXON_OK, flush());
    EXPECT_EQ(20u, t64[0]);
    EXPECT_EQ(20u, atomic(AXON_ATOMIC_SWAP, 8, 7, 0, raddr_));
    EXPECT_EQ(7u, atomic(AXON_ATOMIC_CSWAP, 8, 9, 7, raddr_));
    EXPECT_EQ(9u, atomic(AXON_ATOMIC_CSWAP, 8, 1, 7, raddr_));    /* no swap */
    EXPECT_EQ(9u, t64[0]);
    EXPECT_EQ(9u, atomic(AXON_ATOMIC_XOR, 8, 0xF0, ~0ull, raddr_));
    EXPECT_EQ(0xF9u, t64[0]);

    t32[4] = 0xFFFFFFFFu;
    t32[5] = 0x12345678u;
    EXPECT_EQ(0xFFFFFFFFu, atomic(AXON_ATOMIC_ADD, 4, 2, ~0ull, raddr_ + 16));
    EXPECT_EQ(1u, t32[4]);
    EXPECT_EQ(0x12345678u, t32[5]);  /* no carry into the neighbour */
    atomic(AXON_ATOMIC_OR, 4, 0x80000000u, 0, raddr_ + 16);
    ASSERT_EQ(AXON_OK, flush());
    EXPECT_EQ(0x80000001u, t32[4]);

    /* masked compare-and-swap on 32 bytes: swap only the masked bits */
    uint64_t *t = t64 + 8;
    uint64_t cmp[4] = {1, 2, 3, 4}, cmask[4] = {~0ull, ~0ull, 0, ~0ull};
    uint64_t swp[4] = {0xAA, 0xBB, 0xCC, 0xDD}, smask[4] = {0xF, 0xF0, ~0ull, 0};
    uint64_t res[4] = {0, 0, 0, 0};
    axon_request_h req = nullptr;
    t[0] = 1; t[1] = 2; t[2] = 99; t[3] = 4;
    ASSERT_EQ(AXON_OK, finish(axon_atomic_masked_cswap_nb(ep_, 32, cmp, cmask, swp, smask, res,
                                                          raddr_ + 64, rkey_, NULL, &req), &req));
    EXPECT_EQ(1u, res[0]);
    EXPECT_EQ(99u, res[2]);
    EXPECT_EQ(0xAu, t[0]);
    EXPECT_EQ(0xB2u, t[1]);
    EXPECT_EQ(0xCCu, t[2]);
    EXPECT_EQ(4u, t[3]);

    /* multi-field fetch-add: two 32-bit fields per word, no carry across */
    uint64_t add[2] = {1, 1}, bound[2] = {1ull << 31, 1ull << 31}, old[2];
    t[0] = 0xFFFFFFFFull; t[1] = 5;
    ASSERT_EQ(AXON_OK, finish(axon_atomic_mfadd_nb(ep_, 16, add, bound, old, raddr_ + 64, rkey_,
                                                   NULL, &req), &req));
    EXPECT_EQ(0xFFFFFFFFull, old[0]);
    EXPECT_EQ(0u, t[0]);
    EXPECT_EQ(6u, t[1]);
}

TEST_P(RmaProto, FenceKeepsOrder)
{
    std::vector<uint8_t> big(1u << 20, 0x11);
    uint8_t small = 0x22;
    uint8_t *target = static_cast<uint8_t *>(base_);
    axon_request_h r1 = nullptr, r2 = nullptr;
    axon_status_t s1, s2;

    for (int round = 0; round < 5; ++round) {
        memset(target, 0, big.size());
        s1 = axon_put_nb(ep_, big.data(), big.size(), raddr_, rkey_, NULL, &r1);
        ASSERT_EQ(AXON_OK, axon_worker_fence(w_[0]));
        s2 = axon_put_nb(ep_, &small, 1, raddr_ + big.size() - 1, rkey_, NULL, &r2);
        ASSERT_EQ(AXON_OK, finish(s1, &r1));
        ASSERT_EQ(AXON_OK, finish(s2, &r2));
        ASSERT_EQ(AXON_OK, flush());
        ASSERT_EQ(0x22, target[big.size() - 1]) << round;
        ASSERT_EQ(0x11, target[big.size() - 2]) << round;
    }
}

TEST_P(RmaProto, WorkerFlush)
{
    uint64_t v = 42;
    axon_request_h req = nullptr;

    ASSERT_EQ(AXON_OK, finish(axon_worker_flush_nb(w_[0], NULL, &req), &req));
    ASSERT_EQ(AXON_OK, put(&v, 8, raddr_ + 128));
    ASSERT_EQ(AXON_OK, finish(axon_worker_flush_nb(w_[0], NULL, &req), &req));
    EXPECT_EQ(42u, static_cast<uint64_t *>(base_)[16]);
}

TEST_P(RmaProto, OutOfRangeTouchesNothing)
{
    uint8_t buf[64];
    uint8_t *target = static_cast<uint8_t *>(base_);
    uint64_t v = 1;
    axon_request_h req = nullptr;

    memset(buf, 0x77, sizeof(buf));
    memset(target, 0, len_);
    EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, axon_put_nb(ep_, buf, sizeof(buf), raddr_ + len_ - 32,
                                                  rkey_, NULL, &req));
    EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, axon_get_nb(ep_, buf, 1, raddr_ - 1, rkey_, NULL, &req));
    EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, axon_atomic_nb(ep_, AXON_ATOMIC_ADD, 8, &v, NULL, NULL,
                                                     raddr_ + len_, rkey_, NULL, &req));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_atomic_nb(ep_, AXON_ATOMIC_ADD, 8, &v, NULL, NULL,
                                                     raddr_ + 4, rkey_, NULL, &req));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_put_nb(ep_, buf, 1, raddr_, NULL, NULL, &req));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_atomic_nb(ep_, AXON_ATOMIC_SWAP, 8, &v, NULL, NULL,
                                                     raddr_, rkey_, NULL, &req));
    ASSERT_EQ(AXON_OK, flush());
    for (size_t i = 0; i < len_; ++i) {
        ASSERT_EQ(0, target[i]) << i;
    }
}

/* The target unmapped: AM operations fail at the target with AXON_ERR_REMOTE_ACCESS. */
TEST_P(RmaProto, TargetUnmapped)
{
    uint64_t v = 5, r = 0;
    axon_request_h req = nullptr;
    uint8_t buf[16];

    if (strcmp(GetParam().path, "am") != 0) {
        GTEST_SKIP() << "only the target's handlers see the mapping go";
    }
    ASSERT_EQ(AXON_OK, axon_mem_unmap(ctx_, memh_));
    memh_ = nullptr;
    EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, get(buf, sizeof(buf), raddr_));
    EXPECT_EQ(AXON_ERR_REMOTE_ACCESS,
              finish(axon_atomic_nb(ep_, AXON_ATOMIC_ADD, 8, &v, NULL, &r, raddr_, rkey_, NULL,
                                    &req), &req));
    axon_status_t status = put(&v, 8, raddr_);  /* done for the caller once sent */
    EXPECT_TRUE((status == AXON_OK) || (status == AXON_ERR_REMOTE_ACCESS));
    if (status == AXON_OK) {
        EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, flush());  /* the flush reports it */
    }
    EXPECT_EQ(AXON_OK, flush());
}

INSTANTIATE_TEST_SUITE_P(Lanes, RmaProto,
                         testing::Values(RmaParam{"self", "auto"}, RmaParam{"self", "am"},
                                         RmaParam{"tcp", "am"}, RmaParam{"shm", "am"}),
                         param_name);

/* ---------------------------------------------------------------- malformed input */

struct LogLines {
    std::vector<std::string> lines;
    static void hook(axon_log_level_t level, const char *message, void *arg)
    {
        static_cast<LogLines *>(arg)->lines.push_back(message);
    }
    bool has(const char *text) const
    {
        for (const std::string &l : lines) {
            if (l.find(text) != std::string::npos) {
                return true;
            }
        }
        return false;
    }
};

class RmaHandlers : public testing::Test {
protected:
    void SetUp() override
    {
        axon_config_kv_t kv[] = {{"TLS", "self"}};
        axon_context_params_t params = {AXON_FEATURE_RMA | AXON_FEATURE_AMO, kv, 1};

        ASSERT_EQ(AXON_OK, axon_init(&params, &ctx_));
        ASSERT_EQ(AXON_OK, axon_worker_create(ctx_, NULL, &w_));
        axon_log_set_hook(LogLines::hook, &log_);
    }
    void TearDown() override
    {
        axon_log_set_hook(NULL, NULL);
        axon_worker_destroy(w_);
        axon_cleanup(ctx_);
    }
    void deliver(uint8_t id, const void *data, size_t len)
    {
        w_->am_handlers[id](w_, data, len, AXON_AM_FLAG_NONE);
        for (int i = 0; i < 10; ++i) {
            axon_worker_progress(w_);
        }
    }

    axon_context_h ctx_ = nullptr;
    axon_worker_h  w_   = nullptr;
    LogLines       log_;
};

TEST_F(RmaHandlers, ShortMessagesAreDropped)
{
    uint64_t junk[2] = {1, 2};
    const uint8_t ids[] = {AXON_AM_RMA_PUT, AXON_AM_RMA_PUT_ACK, AXON_AM_RMA_GET_REQ,
                           AXON_AM_RMA_GET_REPLY, AXON_AM_RMA_AMO, AXON_AM_RMA_AMO_REPLY};

    for (uint8_t id : ids) {
        log_.lines.clear();
        deliver(id, junk, 3);
        EXPECT_TRUE(log_.has("dropping")) << "am id " << (int)id;
    }
}

TEST_F(RmaHandlers, RepliesForUnknownOperationsAreDropped)
{
    axon_rma_put_ack_hdr_t ack = {12345, 678, 8, AXON_OK};
    axon_rma_amo_reply_hdr_t amo = {12345, 678, AXON_OK, {0, 0, 0, 0}};
    axon_rma_get_reply_hdr_t get = {12345, 678, 0, 0, AXON_OK};

    deliver(AXON_AM_RMA_PUT_ACK, &ack, sizeof(ack));
    EXPECT_TRUE(log_.has("unknown operation")) << "PUT_ACK";
    log_.lines.clear();
    deliver(AXON_AM_RMA_AMO_REPLY, &amo, axon_rma_amo_reply_len(8));
    EXPECT_TRUE(log_.has("unknown operation")) << "AMO_REPLY";
    log_.lines.clear();
    deliver(AXON_AM_RMA_GET_REPLY, &get, sizeof(get));
    EXPECT_TRUE(log_.has("unknown operation")) << "GET_REPLY";
}

/* Bad keys and ranges are refused at the target without touching memory. */
TEST_F(RmaHandlers, BadTokenTouchesNothing)
{
    axon_mem_map_params_t mp = {NULL, 4096, AXON_MEM_MAP_ALLOCATE};
    axon_mem_h memh;
    void *base;
    size_t len;

    ASSERT_EQ(AXON_OK, axon_mem_map(ctx_, &mp, &memh));
    ASSERT_EQ(AXON_OK, axon_mem_query(memh, &base, &len));
    memset(base, 0, len);

    struct {
        axon_rma_put_hdr_t hdr;
        uint64_t           data;
    } put = {{0xBAD, (uint64_t)(uintptr_t)base, 8, 1, 999}, 0x1111111111111111ull};
    deliver(AXON_AM_RMA_PUT, &put, sizeof(put));  /* unknown token, and unknown sender */
    axon_rma_amo_hdr_t amo;
    memset(&amo, 0, sizeof(amo));
    amo.args.op   = AXON_AMO_ADD;
    amo.args.size = 8;
    amo.args.value[0] = 1;
    amo.token  = 0xBAD;
    amo.addr   = (uint64_t)(uintptr_t)base;
    amo.req_id = 1;
    amo.sender_uuid = 999;
    deliver(AXON_AM_RMA_AMO, &amo, sizeof(amo));
    amo.args.op = 200;  /* no such operation */
    deliver(AXON_AM_RMA_AMO, &amo, sizeof(amo));

    for (size_t i = 0; i < len; ++i) {
        ASSERT_EQ(0, static_cast<uint8_t *>(base)[i]) << i;
    }
    EXPECT_EQ(AXON_OK, axon_mem_unmap(ctx_, memh));
}

TEST(RmaContext, NoRmaFeature)
{
    axon_config_kv_t kv[] = {{"TLS", "self"}};
    axon_context_params_t params = {AXON_FEATURE_TAG, kv, 1};
    axon_context_h ctx;
    axon_worker_h w;
    axon_request_h req = nullptr;

    ASSERT_EQ(AXON_OK, axon_init(&params, &ctx));
    ASSERT_EQ(AXON_OK, axon_worker_create(ctx, NULL, &w));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_worker_flush_nb(w, NULL, &req));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_worker_fence(w));
    axon_worker_destroy(w);
    axon_cleanup(ctx);
}

}  // namespace
