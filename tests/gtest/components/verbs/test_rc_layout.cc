/*
 * rc's layouts through user-mode memory registration, counted at the device
 * (softib counts the indirect keys a process creates and the UMR fills its
 * QPs execute), two workers of one process over rc:
 *   - a rendezvous from one sending layout, sent again and again, makes one
 *     key (components/umr's cache); the buffer given back to the system and
 *     mapped again at the same address gets a new key and its new contents
 *     arrive;
 *   - a receiving layout reads the sender's data with one fill per message
 *     (rc_layout.c's pooled local keys: the pool is made once); one of more
 *     runs than a pooled key takes, through one key over the whole list
 *     (the domain's cache: made at the first message, then reused; past
 *     softib's list of 4096, a key over keys of the list's parts);
 *   - a put and a get from a local layout to a layout key (a key of this
 *     process's own layout goes over rc, as a peer's would) move their
 *     pieces through one fill each.
 * Everything byte-exact. Run under valgrind, where the registration cache
 * cannot watch memory, the counts that depend on it are not asserted.
 */
#include <gtest/gtest.h>

#include <string.h>
#include <sys/mman.h>

#include <vector>

extern "C" {
#include "axon.h"
#include "harness.h"
#include "framework/device/softib/softib.h"
#include "framework/memory/rcache.h"
}

#include "env_guard.h"
#include "rcache_probe.h"

namespace {

const double kTimeout = 30.0;
const size_t kBlock   = 64;
const size_t kBlocks  = 1024;               /* 64 KiB packed: a rendezvous (threshold below) */
const size_t kStride  = 2 * kBlock;
const size_t kSpan    = kBlocks * kStride;

axon_layout_t strided(size_t count, size_t block, ptrdiff_t stride)
{
    axon_layout_t l;

    memset(&l, 0, sizeof(l));
    l.kind                 = AXON_LAYOUT_STRIDED;
    l.strided.count        = count;
    l.strided.block_length = block;
    l.strided.stride       = stride;
    return l;
}

/* The layout's bytes of span (strided blocks at base) in packed order */
std::vector<uint8_t> packed(const uint8_t *base, size_t count, size_t block, size_t stride)
{
    std::vector<uint8_t> out;

    for (size_t i = 0; i < count; ++i) {
        out.insert(out.end(), base + i * stride, base + i * stride + block);
    }
    return out;
}

class RcLayoutKey : public ::testing::Test {
public:
    EnvGuard       tls_{"AXON_TLS", "rc"};
    EnvGuard       rndv_{"AXON_RNDV_THRESH", "8192"};
    axon_context_h ctx_ = nullptr;
    axon_worker_h  a_ = nullptr, b_ = nullptr;
    axon_ep_h      ab_ = nullptr;

    void ReceiveInOneFillPerMessage(size_t count, size_t block);

    void SetUp() override
    {
        axon_context_params_t cp = {AXON_FEATURE_TAG | AXON_FEATURE_RMA, nullptr, 0};
        void *addr;
        size_t len;

        ASSERT_EQ(AXON_OK, axon_init(&cp, &ctx_));
        ASSERT_EQ(AXON_OK, axon_worker_create(ctx_, nullptr, &a_));
        ASSERT_EQ(AXON_OK, axon_worker_create(ctx_, nullptr, &b_));
        ASSERT_EQ(AXON_OK, axon_worker_get_address(b_, &addr, &len));
        axon_ep_params_t ep = {addr, len, nullptr, nullptr};
        ASSERT_EQ(AXON_OK, axon_ep_create(a_, &ep, &ab_));
        axon_worker_release_address(b_, addr);
    }

    void TearDown() override
    {
        if (a_ != nullptr) {
            axon_worker_destroy(a_);
        }
        if (b_ != nullptr) {
            axon_worker_destroy(b_);
        }
        if (ctx_ != nullptr) {
            axon_cleanup(ctx_);
        }
    }

    /* Both workers progress until req is done; its status */
    axon_status_t wait(axon_status_t status, axon_request_h req)
    {
        double end = axon_test_time() + kTimeout;

        if (status != AXON_INPROGRESS) {
            return status;
        }
        while ((axon_request_test(req, nullptr) == AXON_INPROGRESS) && (axon_test_time() < end)) {
            axon_worker_progress(a_);
            axon_worker_progress(b_);
        }
        status = axon_request_test(req, nullptr);
        axon_request_free(req);
        return status;
    }

    /* One message a -> b, either side through a layout (nullptr: contiguous) */
    void transfer(const void *sbuf, const axon_layout_t *slay, void *rbuf,
                  const axon_layout_t *rlay, size_t len)
    {
        axon_request_param_t sp, rp;
        axon_request_h sreq = nullptr, rreq = nullptr;

        memset(&sp, 0, sizeof(sp));
        memset(&rp, 0, sizeof(rp));
        sp.flags  = slay ? AXON_REQ_FLAG_LAYOUT : 0;
        sp.layout = slay;
        rp.flags  = rlay ? AXON_REQ_FLAG_LAYOUT : 0;
        rp.layout = rlay;
        axon_status_t rs = axon_tag_recv_nb(b_, rbuf, len, 9, AXON_TAG_MASK_FULL, &rp, &rreq);
        axon_status_t ss = axon_tag_send_nb(ab_, sbuf, len, 9, &sp, &sreq);
        ASSERT_EQ(AXON_OK, wait(ss, sreq));
        ASSERT_EQ(AXON_OK, wait(rs, rreq));
    }
};

TEST_F(RcLayoutKey, RendezvousOfOneLayoutMakesOneKey)
{
    const bool watches = cache_can_watch();
    axon_layout_t lay  = strided(kBlocks, kBlock, kStride);
    std::vector<uint8_t> in(kBlocks * kBlock);
    void *map = mmap(nullptr, kSpan, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(MAP_FAILED, map);
    uint8_t *buf = static_cast<uint8_t *>(map);

    axon_test_fill(buf, kSpan, 1);
    transfer(buf, &lay, in.data(), nullptr, in.size());   /* connects, makes the key */
    EXPECT_EQ(packed(buf, kBlocks, kBlock, kStride), in);
    uint64_t keys = softib_umr_key_count();
    for (int i = 0; i < 50; ++i) {
        axon_test_fill(buf, kSpan, 10 + i);
        memset(in.data(), 0, in.size());
        ASSERT_NO_FATAL_FAILURE(transfer(buf, &lay, in.data(), nullptr, in.size()));
        ASSERT_EQ(packed(buf, kBlocks, kBlock, kStride), in) << "message " << i;
    }
    if (watches) {
        EXPECT_EQ(0u, softib_umr_key_count() - keys) << "the layout's key was made again";
    }

    /* The memory goes back to the system and comes again at the same address. */
    ASSERT_EQ(0, munmap(map, kSpan));
    void *again = mmap(map, kSpan, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(MAP_FAILED, again);
    buf  = static_cast<uint8_t *>(again);
    keys = softib_umr_key_count();
    axon_test_fill(buf, kSpan, 99);
    ASSERT_NO_FATAL_FAILURE(transfer(buf, &lay, in.data(), nullptr, in.size()));
    EXPECT_EQ(packed(buf, kBlocks, kBlock, kStride), in) << "the new memory's contents";
    if (watches && (again == map)) {
        EXPECT_EQ(1u, softib_umr_key_count() - keys) << "a key over unmapped memory was reused";
    }
    munmap(again, kSpan);
}

/* count runs of block bytes received 20 times: each message one read through one fill. */
void RcLayoutKey::ReceiveInOneFillPerMessage(size_t count, size_t block)
{
    axon_layout_t lay  = strided(count, block, 2 * block);
    std::vector<uint8_t> out(count * block), in(2 * count * block);

    transfer(out.data(), nullptr, in.data(), &lay, out.size());   /* connects */
    uint64_t keys = softib_umr_key_count(), fills = softib_umr_fill_count();
    for (int i = 0; i < 20; ++i) {
        axon_test_fill(out.data(), out.size(), 200 + i);
        axon_test_fill(in.data(), in.size(), 500 + i);
        std::vector<uint8_t> gaps = in;
        ASSERT_NO_FATAL_FAILURE(transfer(out.data(), nullptr, in.data(), &lay, out.size()));
        ASSERT_EQ(out, packed(in.data(), count, block, 2 * block)) << "message " << i;
        for (size_t b = 0; b < count; ++b) {
            ASSERT_EQ(0, memcmp(&gaps[b * 2 * block + block], &in[b * 2 * block + block], block))
                << "message " << i << " wrote into the gap after block " << b;
        }
    }
    EXPECT_GE(softib_umr_fill_count() - fills, 20u) << "the receiver read its pieces one by one";
    EXPECT_EQ(0u, softib_umr_key_count() - keys) << "local keys are made once, then reused";
}

/* 200 KiB in 200 runs; and 900 runs, more than a batch on the stack used to hold (256). */
TEST_F(RcLayoutKey, ReceivingLayoutReadsInOneFillPerMessage)
{
    ReceiveInOneFillPerMessage(200, 1024);
}
TEST_F(RcLayoutKey, ReceivingLayoutOfNineHundredRunsReadsInOneFill)
{
    ReceiveInOneFillPerMessage(900, 512);
}

/*
 * count runs of block bytes, more than a pooled key's 1024, received 10
 * times: one read through one key over the list, made with the first
 * message (keys of keys past 4096 runs: parts + 1) and reused. Streamed
 * instead, no key would be made.
 */
void receive_through_one_cached_key(RcLayoutKey *t, size_t count, size_t block,
                                    uint64_t keys_made)
{
    const bool watches = cache_can_watch();
    axon_layout_t lay  = strided(count, block, 2 * block);
    std::vector<uint8_t> out(count * block), in(2 * count * block), small(8);

    t->transfer(small.data(), nullptr, small.data(), nullptr, small.size());   /* connects */
    uint64_t keys = softib_umr_key_count();
    for (int i = 0; i < 10; ++i) {
        axon_test_fill(out.data(), out.size(), 300 + i);
        axon_test_fill(in.data(), in.size(), 700 + i);
        std::vector<uint8_t> gaps = in;
        ASSERT_NO_FATAL_FAILURE(t->transfer(out.data(), nullptr, in.data(), &lay, out.size()));
        ASSERT_EQ(out, packed(in.data(), count, block, 2 * block)) << "message " << i;
        for (size_t b = 0; b < count; ++b) {
            ASSERT_EQ(0, memcmp(&gaps[b * 2 * block + block], &in[b * 2 * block + block], block))
                << "message " << i << " wrote into the gap after block " << b;
        }
        if (i == 0) {
            EXPECT_EQ(keys_made, softib_umr_key_count() - keys)
                << "the first message's read through a key over its " << count << " runs";
            keys = softib_umr_key_count();
        }
    }
    if (watches) {
        EXPECT_EQ(0u, softib_umr_key_count() - keys) << "the list's key was made again";
    }
}

TEST_F(RcLayoutKey, ReceivingLayoutPastOneBatchReadsThroughOneKey)
{
    receive_through_one_cached_key(this, 3000, 64, 1);
}
TEST_F(RcLayoutKey, ReceivingLayoutPastTheDevicesListReadsThroughKeysOfKeys)
{
    receive_through_one_cached_key(this, 9000, 16, 3 + 1);   /* 4096 + 4096 + 808, the outer */
}

TEST_F(RcLayoutKey, PutAndGetFromALocalLayoutFillAKey)
{
    const size_t count = 100, block = 96;
    axon_layout_t lay  = strided(count, block, 3 * block);
    axon_layout_t rlay = strided(count, block, 2 * block);
    std::vector<uint8_t> local(3 * count * block), remote(2 * count * block);
    axon_request_param_t param;
    axon_mem_map_params_t mp = {remote.data(), count * block, AXON_MEM_MAP_LAYOUT, &rlay};
    axon_mem_h memh;
    axon_rkey_h rkey;
    axon_request_h req = nullptr;
    void *packed_key;
    size_t key_len;

    memset(&param, 0, sizeof(param));
    param.flags  = AXON_REQ_FLAG_LAYOUT;
    param.layout = &lay;
    ASSERT_EQ(AXON_OK, axon_mem_map(ctx_, &mp, &memh));
    ASSERT_EQ(AXON_OK, axon_rkey_pack(ctx_, memh, &packed_key, &key_len));
    ASSERT_EQ(AXON_OK, axon_ep_rkey_unpack(ab_, packed_key, key_len, &rkey));
    axon_rkey_buffer_release(packed_key);

    transfer(local.data(), nullptr, remote.data(), nullptr, 8);   /* connects */
    axon_test_fill(local.data(), local.size(), 7);
    uint64_t fills = softib_umr_fill_count();
    axon_status_t st = axon_put_nb(ab_, local.data(), count * block, (uintptr_t)remote.data(),
                                   rkey, &param, &req);
    ASSERT_EQ(AXON_OK, wait(st, req));
    st = axon_ep_flush_nb(ab_, nullptr, &req);
    ASSERT_EQ(AXON_OK, wait(st, req));
    EXPECT_EQ(packed(local.data(), count, block, 3 * block),
              packed(remote.data(), count, block, 2 * block));

    axon_test_fill(remote.data(), remote.size(), 8);
    std::vector<uint8_t> before = local;
    st = axon_get_nb(ab_, local.data(), count * block, (uintptr_t)remote.data(), rkey, &param,
                     &req);
    ASSERT_EQ(AXON_OK, wait(st, req));
    EXPECT_EQ(packed(remote.data(), count, block, 2 * block),
              packed(local.data(), count, block, 3 * block));
    for (size_t b = 0; b < count; ++b) {
        ASSERT_EQ(0, memcmp(&before[b * 3 * block + block], &local[b * 3 * block + block],
                            2 * block)) << "get wrote into the gap after block " << b;
    }
    EXPECT_GE(softib_umr_fill_count() - fills, 2u) << "put and get moved run by run";
    axon_rkey_destroy(rkey);
    ASSERT_EQ(AXON_OK, axon_mem_unmap(ctx_, memh));
}

}  // namespace
