/*
 * Mapped memory and remote keys: axon_mem_map/query/unmap, allocated
 * segments, the packed key (round trips, every truncation, byte flips,
 * other versions, structural fuzzing under a valid checksum), the path a
 * key takes on an endpoint (api/rma/rma.h: LOCAL in the same process, SHM for
 * allocated memory on the host over shm, ZCOPY through CMA or rc's keys, AM
 * otherwise or with AXON_RMA_PATH=am), the target-side lookup, the mapping
 * table that guards cross-memory attach (forged and stale keys over shm,
 * slot reuse, a full table, stale keys over rc), and bad parameters.
 * White box where the path is only visible inside (rma.h).
 */
#include <gtest/gtest.h>

#include <dirent.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "harness.h"
extern "C" {
#include "axon.h"
#include "log.h"
#include "mem.h"
#include "rma.h"
#include "shm_md.h"
}

namespace {

const double kPeerTimeout = 60.0;

const uint32_t kFeatures = AXON_FEATURE_TAG | AXON_FEATURE_RMA | AXON_FEATURE_AMO;

/* A context with the given features, TLS and extra overrides; NULL on failure. */
axon_context_h make_context(const char *tls, uint32_t features = kFeatures,
                            std::vector<axon_config_kv_t> extra = {})
{
    axon_context_params_t params;
    axon_context_h        ctx = nullptr;

    if (tls != nullptr) {
        extra.push_back({"TLS", tls});
    }
    memset(&params, 0, sizeof(params));
    params.features     = features;
    params.config       = extra.data();
    params.config_count = extra.size();
    return (axon_init(&params, &ctx) == AXON_OK) ? ctx : nullptr;
}

/* One context and its workers, torn down in the right order on every way out. */
struct Node {
    axon_context_h             ctx = nullptr;
    std::vector<axon_worker_h> workers;
    std::vector<axon_ep_h>     eps;

    bool init(const char *tls, std::vector<axon_config_kv_t> extra = {}, unsigned nworkers = 1)
    {
        ctx = make_context(tls, kFeatures, extra);
        if (ctx == nullptr) {
            return false;
        }
        for (unsigned i = 0; i < nworkers; ++i) {
            if (!add_worker()) {
                return false;
            }
        }
        return true;
    }
    axon_worker_h add_worker()
    {
        axon_worker_h w;
        if (axon_worker_create(ctx, nullptr, &w) != AXON_OK) {
            return nullptr;
        }
        workers.push_back(w);
        return w;
    }
    /* An endpoint from workers[from] to an address. */
    axon_ep_h connect(unsigned from, const void *addr, size_t len)
    {
        axon_ep_h ep;
        if (axon_test_ep_create(workers[from], addr, len, &ep) != AXON_OK) {
            return nullptr;
        }
        eps.push_back(ep);
        return ep;
    }
    axon_ep_h connect_to_worker(unsigned from, unsigned to)
    {
        void     *addr;
        size_t    len;
        axon_ep_h ep;
        if (axon_worker_get_address(workers[to], &addr, &len) != AXON_OK) {
            return nullptr;
        }
        ep = connect(from, addr, len);
        axon_worker_release_address(workers[to], addr);
        return ep;
    }
    ~Node()
    {
        for (axon_ep_h ep : eps) {
            axon_test_ep_close(ep->worker, ep, AXON_EP_CLOSE_FORCE, 5.0);
        }
        for (axon_worker_h w : workers) {
            axon_worker_destroy(w);
        }
        axon_cleanup(ctx);
    }
};

/* Packs a key; the buffer is released with the object. */
struct Key {
    void  *buf  = nullptr;
    size_t size = 0;
    ~Key() { axon_rkey_buffer_release(buf); }
    std::vector<uint8_t> bytes() const
    {
        return std::vector<uint8_t>((uint8_t *)buf, (uint8_t *)buf + size);
    }
};

/* Unpack a copy of exactly len bytes (so ASan sees any read past it). */
axon_status_t unpack_exact(axon_ep_h ep, const uint8_t *data, size_t len, axon_rkey_h *rkey)
{
    uint8_t      *copy = (uint8_t *)malloc(len ? len : 1);
    axon_status_t status;

    memcpy(copy, data, len);
    status = axon_ep_rkey_unpack(ep, copy, len, rkey);
    free(copy);
    return status;
}

/* FNV-1a of the key body, as rkey.c's format comment says: to forge keys. */
void fix_checksum(std::vector<uint8_t> &k)
{
    uint64_t h = 0xcbf29ce484222325ull;
    size_t   end = k.size() - 8;

    for (size_t i = 0; i < end; ++i) {
        h ^= k[i];
        h *= 0x100000001b3ull;
    }
    for (int i = 0; i < 8; ++i) {
        k[end + i] = (uint8_t)(h >> (8 * i));
    }
}

/* Counts the error lines of unpack and keeps them off the terminal for the scope. */
struct LogCapture {
    unsigned lines = 0;
    LogCapture()
    {
        axon_log_set_hook(hook, this);
        axon_log_set_file("/dev/null");
    }
    ~LogCapture()
    {
        axon_log_set_hook(nullptr, nullptr);
        axon_log_set_file("stderr");
    }
    static void hook(axon_log_level_t level, const char *msg, void *arg)
    {
        if ((level == AXON_LOG_ERROR) && strstr(msg, "axon_ep_rkey_unpack")) {
            ++static_cast<LogCapture *>(arg)->lines;
        }
    }
    /* Did the call since the last check log? */
    bool logged()
    {
        bool l = lines > 0;
        lines  = 0;
        return l;
    }
};

bool page_aligned(const void *p)
{
    return ((uintptr_t)p % (uintptr_t)sysconf(_SC_PAGESIZE)) == 0;
}

/* ---------------------------------------------------------------- mapping */

TEST(Mem, MapQueryUnmap)
{
    Node                 n;
    std::vector<uint8_t> buf(10000, 0x5a);
    axon_mem_h           memh;
    void                *addr;
    size_t               len;

    ASSERT_TRUE(n.init("self"));
    axon_mem_map_params_t mp = {buf.data() + 1, buf.size() - 1, 0};
    ASSERT_EQ(AXON_OK, axon_mem_map(n.ctx, &mp, &memh));
    ASSERT_EQ(AXON_OK, axon_mem_query(memh, &addr, &len));
    EXPECT_EQ(buf.data() + 1, addr);
    EXPECT_EQ(buf.size() - 1, len);
    EXPECT_NE(0u, memh->token);
    EXPECT_EQ(0x5a, buf[5]) << "mapping user memory must not change it";

    /* Tokens differ between mappings, even of the same memory. */
    axon_mem_h memh2;
    ASSERT_EQ(AXON_OK, axon_mem_map(n.ctx, &mp, &memh2));
    EXPECT_NE(memh->token, memh2->token);
    EXPECT_EQ(AXON_OK, axon_mem_unmap(n.ctx, memh2));

    EXPECT_EQ(AXON_OK, axon_mem_unmap(n.ctx, memh));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_mem_unmap(n.ctx, memh)) << "double unmap";
}

TEST(Mem, AllocateZeroedAndAligned)
{
    Node n;

    ASSERT_TRUE(n.init("self"));
    for (size_t len : {(size_t)1, (size_t)4096, (size_t)10001, (size_t)(1 << 20)}) {
        axon_mem_map_params_t mp = {nullptr, len, AXON_MEM_MAP_ALLOCATE};
        axon_mem_h            memh;
        void                 *addr;
        size_t                qlen;

        ASSERT_EQ(AXON_OK, axon_mem_map(n.ctx, &mp, &memh)) << len;
        ASSERT_EQ(AXON_OK, axon_mem_query(memh, &addr, &qlen));
        EXPECT_EQ(len, qlen);
        EXPECT_TRUE(page_aligned(addr)) << addr;
        const uint8_t *p = (const uint8_t *)addr;
        size_t         nonzero = 0;
        for (size_t i = 0; i < len; ++i) {
            nonzero += (p[i] != 0);
        }
        EXPECT_EQ(0u, nonzero) << "allocated memory is not zeroed";
        memset(addr, 0xab, len);  /* writable, whole length */
        EXPECT_EQ(AXON_OK, axon_mem_unmap(n.ctx, memh));
    }
    /* The address is ignored with ALLOCATE. */
    uint8_t               dummy;
    axon_mem_map_params_t mp = {&dummy, 64, AXON_MEM_MAP_ALLOCATE};
    axon_mem_h            memh;
    void                 *addr;
    size_t                qlen;
    ASSERT_EQ(AXON_OK, axon_mem_map(n.ctx, &mp, &memh));
    ASSERT_EQ(AXON_OK, axon_mem_query(memh, &addr, &qlen));
    EXPECT_NE((void *)&dummy, addr);
    EXPECT_EQ(AXON_OK, axon_mem_unmap(n.ctx, memh));
}

TEST(Mem, BadParams)
{
    Node                  n;
    uint8_t               buf[64];
    axon_mem_h            memh;
    axon_mem_map_params_t ok = {buf, sizeof(buf), 0};
    void                 *addr;
    size_t                len;

    ASSERT_TRUE(n.init("self"));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_mem_map(nullptr, &ok, &memh));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_mem_map(n.ctx, nullptr, &memh));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_mem_map(n.ctx, &ok, nullptr));

    axon_mem_map_params_t zero = {buf, 0, 0};
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_mem_map(n.ctx, &zero, &memh));
    axon_mem_map_params_t zero_alloc = {nullptr, 0, AXON_MEM_MAP_ALLOCATE};
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_mem_map(n.ctx, &zero_alloc, &memh));
    axon_mem_map_params_t null_addr = {nullptr, 64, 0};
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_mem_map(n.ctx, &null_addr, &memh));
    axon_mem_map_params_t flags = {buf, sizeof(buf), 0x80};
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_mem_map(n.ctx, &flags, &memh));
    axon_mem_map_params_t wrap = {(void *)(uintptr_t)-16, 64, 0};
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_mem_map(n.ctx, &wrap, &memh));

    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_mem_query(nullptr, &addr, &len));

    /* A handle that was never a mapping, one of another context. */
    struct axon_mem fake;
    memset(&fake, 0, sizeof(fake));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_mem_unmap(n.ctx, &fake));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_mem_unmap(n.ctx, nullptr));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_mem_unmap(nullptr, &fake));

    Node other;
    ASSERT_TRUE(other.init("self"));
    ASSERT_EQ(AXON_OK, axon_mem_map(other.ctx, &ok, &memh));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_mem_unmap(n.ctx, memh));
    Key key;
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_rkey_pack(n.ctx, memh, &key.buf, &key.size));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_rkey_pack(n.ctx, &fake, &key.buf, &key.size));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_rkey_pack(other.ctx, memh, nullptr, &key.size));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_rkey_pack(other.ctx, memh, &key.buf, nullptr));
    ASSERT_EQ(AXON_OK, axon_rkey_pack(other.ctx, memh, &key.buf, &key.size));
    EXPECT_EQ(AXON_OK, axon_mem_unmap(other.ctx, memh));

    axon_ep_h   ep = n.connect_to_worker(0, 0);
    axon_rkey_h rkey;
    ASSERT_NE(nullptr, ep);
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_ep_rkey_unpack(nullptr, key.buf, key.size, &rkey));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_ep_rkey_unpack(ep, nullptr, key.size, &rkey));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_ep_rkey_unpack(ep, key.buf, key.size, nullptr));
    axon_rkey_destroy(nullptr);  /* no-op */
    axon_rkey_buffer_release(nullptr);
}

TEST(Mem, ContextWithoutRmaFeatures)
{
    axon_context_h ctx = make_context("self", AXON_FEATURE_TAG);
    uint8_t        buf[64];
    axon_mem_h     memh;

    ASSERT_NE(nullptr, ctx);
    axon_mem_map_params_t mp = {buf, sizeof(buf), 0};
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_mem_map(ctx, &mp, &memh));
    axon_cleanup(ctx);

    /* RMA alone and AMO alone are enough. */
    for (uint32_t f : {(uint32_t)AXON_FEATURE_RMA, (uint32_t)AXON_FEATURE_AMO}) {
        ctx = make_context("self", f);
        ASSERT_NE(nullptr, ctx) << f;
        EXPECT_EQ(AXON_OK, axon_mem_map(ctx, &mp, &memh));
        EXPECT_EQ(AXON_OK, axon_mem_unmap(ctx, memh));
        axon_cleanup(ctx);
    }
}

/* Mappings and attached segments the user forgot are freed by axon_cleanup (ASan checks). */
TEST(Mem, CleanupFreesForgottenMappings)
{
    std::vector<uint8_t> buf(4096);
    axon_context_h       ctx = make_context("self");
    axon_worker_h        w;
    axon_mem_h           memh;

    ASSERT_NE(nullptr, ctx);
    ASSERT_EQ(AXON_OK, axon_worker_create(ctx, nullptr, &w));
    axon_mem_map_params_t mp = {buf.data(), buf.size(), 0};
    axon_mem_map_params_t ma = {nullptr, 3 * 4096, AXON_MEM_MAP_ALLOCATE};
    ASSERT_EQ(AXON_OK, axon_mem_map(ctx, &mp, &memh));
    ASSERT_EQ(AXON_OK, axon_mem_map(ctx, &ma, &memh));
    ASSERT_EQ(AXON_OK, axon_mem_map(ctx, &ma, &memh));
    axon_worker_destroy(w);
    axon_cleanup(ctx);
}

/* ---------------------------------------------------------------- target-side lookup */

TEST(Mem, Lookup)
{
    Node                   n;
    std::vector<uint8_t>   buf(1000);
    axon_mem_h             memh;
    axon_amo_lock_table_t *locks = nullptr;
    uint64_t               off   = 99;
    axon_status_t          st;
    uint64_t               base  = (uintptr_t)buf.data();

    ASSERT_TRUE(n.init("self"));
    axon_mem_map_params_t mp = {buf.data(), buf.size(), 0};
    ASSERT_EQ(AXON_OK, axon_mem_map(n.ctx, &mp, &memh));
    uint64_t token = memh->token;

    EXPECT_EQ(buf.data() + 10,
              axon_mem_lookup(n.ctx, token, base + 10, 100, nullptr, &locks, &off, &st));
    EXPECT_EQ(AXON_OK, st);
    EXPECT_EQ(10u, off);
    EXPECT_EQ(memh->locks, locks);
    EXPECT_NE(nullptr, locks);
    /* The whole range, and zero bytes at its end. */
    EXPECT_NE(nullptr, axon_mem_lookup(n.ctx, token, base, 1000, nullptr, &locks, &off, &st));
    EXPECT_NE(nullptr, axon_mem_lookup(n.ctx, token, base + 1000, 0, nullptr, &locks, &off, &st));

    struct {
        uint64_t addr;
        size_t   len;
    } bad[] = {
        {base + 1, 1000},           /* one byte past the end */
        {base - 1, 1},              /* before the start */
        {base + 1000, 1},           /* starts at the end */
        {base, (size_t)-1},         /* huge */
        {base + 10, (size_t)-8},    /* addr + length wraps */
        {(uint64_t)-4, 8},          /* near the top of the address space */
    };
    for (auto &b : bad) {
        st = AXON_OK;
        EXPECT_EQ(nullptr,
                  axon_mem_lookup(n.ctx, token, b.addr, b.len, nullptr, &locks, &off, &st))
            << std::hex << b.addr << " + " << std::dec << b.len;
        EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, st);
    }
    st = AXON_OK;
    EXPECT_EQ(nullptr, axon_mem_lookup(n.ctx, token ^ 1, base, 8, nullptr, &locks, &off, &st));
    EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, st);

    ASSERT_EQ(AXON_OK, axon_mem_unmap(n.ctx, memh));
    st = AXON_OK;
    EXPECT_EQ(nullptr, axon_mem_lookup(n.ctx, token, base, 8, nullptr, &locks, &off, &st))
        << "an unmapped token must not be found";
    EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, st);
}

/* A layout mapping: addresses are packed offsets from the base, each lookup one run. */
TEST(Mem, LookupGivesALayoutsRuns)
{
    Node                   n;
    std::vector<uint8_t>   buf(4096);
    axon_mem_h             memh;
    axon_amo_lock_table_t *locks = nullptr;
    uint64_t               off   = 0;
    axon_status_t          st;
    size_t                 run   = 0;
    uint64_t               base  = (uintptr_t)buf.data();
    axon_layout_t          lay;

    ASSERT_TRUE(n.init("self"));
    lay.kind                 = AXON_LAYOUT_STRIDED;   /* 10 blocks of 24 bytes, 100 apart */
    lay.strided.count        = 10;
    lay.strided.block_length = 24;
    lay.strided.stride       = 100;
    lay.strided.block        = nullptr;
    axon_mem_map_params_t mp = {buf.data(), 240, AXON_MEM_MAP_LAYOUT, &lay};
    ASSERT_EQ(AXON_OK, axon_mem_map(n.ctx, &mp, &memh));
    uint64_t token = memh->token;

    /* packed byte 50 is block 2's byte 2: 22 bytes of the run, of the 30 asked */
    EXPECT_EQ(buf.data() + 202, axon_mem_lookup(n.ctx, token, base + 50, 30, &run, &locks, &off,
                                                &st));
    EXPECT_EQ(22u, run);
    EXPECT_EQ(202u, off) << "the lock stripe follows the byte's own address";
    EXPECT_EQ(buf.data() + 300, axon_mem_lookup(n.ctx, token, base + 72, 8, nullptr, &locks,
                                                &off, &st));
    /* without run_p the range must be one run: an operand across two blocks is refused */
    st = AXON_OK;
    EXPECT_EQ(nullptr, axon_mem_lookup(n.ctx, token, base + 44, 8, nullptr, &locks, &off, &st));
    EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, st);
    /* the range is the packed size, not the span */
    st = AXON_OK;
    EXPECT_EQ(nullptr, axon_mem_lookup(n.ctx, token, base + 236, 8, &run, &locks, &off, &st));
    EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, st);
    ASSERT_EQ(AXON_OK, axon_mem_unmap(n.ctx, memh));
}

/* ---------------------------------------------------------------- keys in one process */

/* Same process: LOCAL on every lane (self, or shm/tcp between two workers). */
class MemLocal : public ::testing::TestWithParam<const char *> {
protected:
    Node      n;
    axon_ep_h ep = nullptr;

    /* The node (one worker over self, else two) and ep from its first worker to its last. */
    void start(std::vector<axon_config_kv_t> extra = {})
    {
        bool self = !strcmp(GetParam(), "self");

        ASSERT_TRUE(n.init(GetParam(), extra, self ? 1 : 2));
        ep = n.connect_to_worker(0, self ? 0 : 1);
        ASSERT_NE(nullptr, ep);
    }

    /* Map [addr, +length) of user memory and pack its key. */
    void map_and_pack(void *addr, size_t length, axon_mem_h *memh, Key *key)
    {
        axon_mem_map_params_t mp = {addr, length, 0};

        ASSERT_EQ(AXON_OK, axon_mem_map(n.ctx, &mp, memh));
        ASSERT_EQ(AXON_OK, axon_rkey_pack(n.ctx, *memh, &key->buf, &key->size));
    }
};

TEST_P(MemLocal, PackUnpack)
{
    std::vector<uint8_t> buf(8192);
    axon_mem_h           user, alloc;

    ASSERT_NO_FATAL_FAILURE(start());
    axon_mem_map_params_t mp = {buf.data() + 3, 5000, 0};
    axon_mem_map_params_t ma = {nullptr, 12345, AXON_MEM_MAP_ALLOCATE};
    ASSERT_EQ(AXON_OK, axon_mem_map(n.ctx, &mp, &user));
    ASSERT_EQ(AXON_OK, axon_mem_map(n.ctx, &ma, &alloc));

    for (axon_mem_h memh : {user, alloc}) {
        Key         key;
        axon_rkey_h rkey;

        ASSERT_EQ(AXON_OK, axon_rkey_pack(n.ctx, memh, &key.buf, &key.size));
        ASSERT_EQ(AXON_OK, axon_ep_rkey_unpack(ep, key.buf, key.size, &rkey));
        EXPECT_EQ(ep, rkey->ep);
        EXPECT_EQ(AXON_RMA_PATH_LOCAL, rkey->path);
        EXPECT_EQ((uintptr_t)memh->address, rkey->remote_base);
        EXPECT_EQ(memh->length, rkey->length);
        EXPECT_EQ(memh->token, rkey->token);
        EXPECT_EQ(memh->address, rkey->local_base);
        EXPECT_EQ(memh->locks, rkey->locks);
        EXPECT_TRUE(axon_rkey_range_ok(rkey, rkey->remote_base, memh->length));
        EXPECT_FALSE(axon_rkey_range_ok(rkey, rkey->remote_base + 1, memh->length));
        axon_rkey_destroy(rkey);
    }

    /* A key of memory unmapped since: LOCAL cannot be made, the user hears so. */
    Key         stale;
    axon_rkey_h rkey;
    ASSERT_EQ(AXON_OK, axon_rkey_pack(n.ctx, user, &stale.buf, &stale.size));
    ASSERT_EQ(AXON_OK, axon_mem_unmap(n.ctx, user));
    EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, axon_ep_rkey_unpack(ep, stale.buf, stale.size, &rkey));
    EXPECT_EQ(AXON_OK, axon_mem_unmap(n.ctx, alloc));
}

/*
 * A LOCAL key may outlive its mapping, but not its use: once the memory is
 * unmapped, put, get and atomics through the key fail with
 * AXON_ERR_REMOTE_ACCESS (as the target says over every other lane) and
 * touch nothing: user memory keeps its bytes, allocated memory (freed at
 * unmap) is not reached at all. The key itself stays safe to destroy (ASan
 * sees a use after free otherwise).
 */
TEST_P(MemLocal, KeyOfUnmappedMemoryFails)
{
    std::vector<uint64_t> buf(16, 5);
    axon_mem_map_params_t ma = {nullptr, 4096, AXON_MEM_MAP_ALLOCATE};
    axon_mem_h            user, alloc;
    Key                   ukey, akey;
    axon_rkey_h           rkeys[2];

    ASSERT_NO_FATAL_FAILURE(start());
    ASSERT_NO_FATAL_FAILURE(map_and_pack(buf.data(), buf.size() * 8, &user, &ukey));
    ASSERT_EQ(AXON_OK, axon_mem_map(n.ctx, &ma, &alloc));
    ASSERT_EQ(AXON_OK, axon_rkey_pack(n.ctx, alloc, &akey.buf, &akey.size));
    ASSERT_EQ(AXON_OK, axon_ep_rkey_unpack(ep, ukey.buf, ukey.size, &rkeys[0]));
    ASSERT_EQ(AXON_OK, axon_ep_rkey_unpack(ep, akey.buf, akey.size, &rkeys[1]));
    uint64_t addrs[2] = {(uintptr_t)&buf[3], (uintptr_t)alloc->address + 24};
    for (axon_rkey_h rkey : rkeys) {
        ASSERT_EQ(AXON_RMA_PATH_LOCAL, rkey->path);
    }
    ASSERT_EQ(AXON_OK, axon_mem_unmap(n.ctx, user));
    ASSERT_EQ(AXON_OK, axon_mem_unmap(n.ctx, alloc));

    for (int k = 0; k < 2; ++k) {
        uint64_t       one = 1, old = 77, word = 9;
        axon_request_h req = nullptr;
        const char    *what = k ? "allocated" : "user";

        EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, axon_atomic_nb(ep, AXON_ATOMIC_ADD, 8, &one, nullptr,
                                                         &old, addrs[k], rkeys[k], nullptr,
                                                         &req)) << what;
        EXPECT_EQ(77u, old) << what;
        EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, axon_put_nb(ep, &word, 8, addrs[k], rkeys[k], nullptr,
                                                      &req)) << what;
        EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, axon_get_nb(ep, &word, 8, addrs[k], rkeys[k], nullptr,
                                                      &req)) << what;
        EXPECT_EQ(9u, word) << what;
    }
    EXPECT_EQ(5u, buf[3]) << "an access through the stale key wrote user memory";
    for (axon_rkey_h rkey : rkeys) {
        axon_rkey_destroy(rkey);
    }
}

/* AXON_RMA_PATH=am: every key goes the active-message way, even in one process. */
TEST_P(MemLocal, ForcedAm)
{
    std::vector<uint8_t> buf(100);
    axon_mem_h           memh;
    Key                  key;
    axon_rkey_h          rkey;

    ASSERT_NO_FATAL_FAILURE(start({{"RMA_PATH", "am"}}));
    ASSERT_NO_FATAL_FAILURE(map_and_pack(buf.data(), buf.size(), &memh, &key));
    ASSERT_EQ(AXON_OK, axon_ep_rkey_unpack(ep, key.buf, key.size, &rkey));
    EXPECT_EQ(AXON_RMA_PATH_AM, rkey->path);
    EXPECT_EQ(memh->token, rkey->token);
    axon_rkey_destroy(rkey);
    EXPECT_EQ(AXON_OK, axon_mem_unmap(n.ctx, memh));
}

/* A key is not usable on an endpoint that failed: unpack returns its status. */
TEST_P(MemLocal, FailedEndpoint)
{
    std::vector<uint8_t> buf(100);
    axon_mem_h           memh;
    Key                  key;
    axon_rkey_h          rkey;

    ASSERT_NO_FATAL_FAILURE(start());
    ASSERT_NO_FATAL_FAILURE(map_and_pack(buf.data(), buf.size(), &memh, &key));
    ep->status = AXON_ERR_CONNECTION_RESET;  /* as the failure sweep leaves it */
    EXPECT_EQ(AXON_ERR_CONNECTION_RESET, axon_ep_rkey_unpack(ep, key.buf, key.size, &rkey));
    ep->status = AXON_OK;
    EXPECT_EQ(AXON_OK, axon_mem_unmap(n.ctx, memh));
}

INSTANTIATE_TEST_SUITE_P(Lanes, MemLocal, ::testing::Values("self", "shm", "tcp"),
                         [](const ::testing::TestParamInfo<const char *> &i) {
                             return std::string(i.param);
                         });

/* ---------------------------------------------------------------- the packed format */

/* A good key to damage: 256 bytes of user memory, unpacked on an endpoint to the same worker. */
class MemKey : public ::testing::Test {
protected:
    Node                 n;
    std::vector<uint8_t> buf = std::vector<uint8_t>(256);
    axon_mem_h           memh = nullptr;
    Key                  key;
    axon_ep_h            ep = nullptr;
    std::vector<uint8_t> good;  /* the packed key */

    void start()
    {
        /* rc registers mappings, so the key has transport entries to damage too. */
        if (!n.init("rc,self")) {
            ASSERT_TRUE(n.init("self"));
        }
        ep = n.connect_to_worker(0, 0);
        ASSERT_NE(nullptr, ep);
        axon_mem_map_params_t mp = {buf.data(), buf.size(), 0};
        ASSERT_EQ(AXON_OK, axon_mem_map(n.ctx, &mp, &memh));
        ASSERT_EQ(AXON_OK, axon_rkey_pack(n.ctx, memh, &key.buf, &key.size));
        good = key.bytes();
    }
};

/* Every prefix, every single-byte change, other versions, trailing bytes: IO_FORMAT. */
TEST_F(MemKey, CorruptKeysAreRefused)
{
    axon_rkey_h     rkey;
    std::mt19937_64 rng(12345);

    ASSERT_NO_FATAL_FAILURE(start());
    ASSERT_EQ(AXON_OK, unpack_exact(ep, good.data(), good.size(), &rkey));
    axon_rkey_destroy(rkey);

    LogCapture log;
    for (size_t len = 0; len < good.size(); ++len) {
        EXPECT_EQ(AXON_ERR_IO_FORMAT, unpack_exact(ep, good.data(), len, &rkey))
            << "prefix of " << len << " bytes of " << good.size();
        EXPECT_TRUE(log.logged()) << "no log line for a " << len << "-byte prefix";
    }
    std::vector<uint8_t> longer = good;
    longer.push_back(0);
    EXPECT_EQ(AXON_ERR_IO_FORMAT, unpack_exact(ep, longer.data(), longer.size(), &rkey));

    for (size_t i = 0; i < good.size(); ++i) {
        for (int rep = 0; rep < 4; ++rep) {
            std::vector<uint8_t> bad = good;
            bad[i] ^= (uint8_t)(1 + rng() % 255);
            EXPECT_EQ(AXON_ERR_IO_FORMAT, unpack_exact(ep, bad.data(), bad.size(), &rkey))
                << "byte " << i << " changed";
            EXPECT_TRUE(log.logged());
        }
    }

    /* Another version (this library writes 4), with or without a matching checksum. */
    for (uint16_t v : {0, 1, 3, 5, 0xffff}) {
        std::vector<uint8_t> bad = good;
        bad[4] = (uint8_t)v;
        bad[5] = (uint8_t)(v >> 8);
        EXPECT_EQ(AXON_ERR_IO_FORMAT, unpack_exact(ep, bad.data(), bad.size(), &rkey)) << v;
        fix_checksum(bad);
        EXPECT_EQ(AXON_ERR_IO_FORMAT, unpack_exact(ep, bad.data(), bad.size(), &rkey)) << v;
    }

    /* Random garbage of every small size. */
    for (size_t len = 0; len < 300; ++len) {
        std::vector<uint8_t> junk(len);
        for (auto &b : junk) {
            b = (uint8_t)rng();
        }
        EXPECT_EQ(AXON_ERR_IO_FORMAT, unpack_exact(ep, junk.data(), len, &rkey)) << len;
    }
    EXPECT_EQ(AXON_OK, axon_mem_unmap(n.ctx, memh));
}

/*
 * Structural fuzzing: damage fields and lengths, then forge a valid checksum
 * so the parser itself must catch it. Whatever the verdict, no crash and no
 * read past the buffer (ASan); a key that passes must name a sane range.
 */
TEST_F(MemKey, ForgedChecksumFuzz)
{
    axon_rkey_h     rkey;
    std::mt19937_64 rng(777);
    unsigned        accepted = 0, refused = 0;

    ASSERT_NO_FATAL_FAILURE(start());
    LogCapture log;
    for (int iter = 0; iter < 20000; ++iter) {
        std::vector<uint8_t> bad = good;
        int                  flips = 1 + (int)(rng() % 4);

        for (int f = 0; f < flips; ++f) {
            size_t pos = 4 + rng() % (bad.size() - 4);  /* keep the magic: reach deeper */
            bad[pos] = (rng() % 3 == 0) ? (uint8_t)rng()
                                        : (uint8_t)(bad[pos] ^ (1u << (rng() % 8)));
        }
        if (rng() % 4 == 0) {  /* resize, and say so in the size field */
            size_t sz = 8 + rng() % (good.size() + 64);
            bad.resize(sz, (uint8_t)rng());
            if (sz >= 12) {
                bad[8] = (uint8_t)sz;
                bad[9] = (uint8_t)(sz >> 8);
                bad[10] = bad[11] = 0;
            }
        }
        if (bad.size() >= 16) {
            fix_checksum(bad);
        }
        axon_status_t st = unpack_exact(ep, bad.data(), bad.size(), &rkey);
        if (st == AXON_OK) {
            ++accepted;
            log.logged();
            EXPECT_GT(rkey->length, 0u);
            EXPECT_GE(rkey->remote_base + rkey->length, rkey->remote_base);
            EXPECT_LE(rkey->tl_rkey_len, (uint32_t)AXON_RNDV_RKEY_MAX);
            axon_rkey_destroy(rkey);
        } else {
            ++refused;
            EXPECT_TRUE((st == AXON_ERR_IO_FORMAT) || (st == AXON_ERR_REMOTE_ACCESS))
                << axon_status_string(st);
            EXPECT_TRUE(log.logged()) << "refused without a log line";
        }
    }
    EXPECT_GT(refused, 0u);
    log.logged();
    (void)accepted;
    EXPECT_EQ(AXON_OK, axon_mem_unmap(n.ctx, memh));
}

/* ---------------------------------------------------------------- registrations */

unsigned num_regs(axon_mem_h memh)
{
    unsigned        count = 0;
    axon_mem_reg_t *reg;
    axon_list_for_each(reg, &memh->regs, link) {
        ++count;
    }
    return count;
}

/* shm's domain in a context, and its registration of a mapping. */
axon_shm_md_t *shm_md_of(axon_context_h ctx)
{
    for (unsigned i = 0; i < ctx->num_rscs; ++i) {
        if (!strcmp(ctx->rscs[i].resource->tl_name, "shm")) {
            return (axon_shm_md_t *)ctx->rscs[i].md;
        }
    }
    return nullptr;
}

axon_shm_memh_t *shm_memh_of(axon_mem_h memh)
{
    axon_mem_reg_t *reg;
    axon_list_for_each(reg, &memh->regs, link) {
        if (!strcmp(reg->resource->tl_name, "shm")) {
            return (axon_shm_memh_t *)reg->tl_memh;
        }
    }
    return nullptr;
}

/* Mappings the context still holds (each with its registrations). */
unsigned num_regs_of_ctx(axon_context_h ctx)
{
    unsigned         count = 0;
    struct axon_mem *mem;
    axon_list_for_each(mem, &ctx->mem->maps, link) {
        count += num_regs(mem);
    }
    return count;
}

/*
 * A mapping is registered once in each key-needing memory domain (rc),
 * whatever the number of workers: workers created later use it, the key
 * holds one entry for all of them, and a destroyed worker takes nothing.
 */
TEST(Mem, RegisteredOncePerDomain)
{
    Node                 n;
    std::vector<uint8_t> buf(4096);
    axon_mem_h           memh;

    if (!n.init("rc,self")) {
        GTEST_SKIP() << "no rc transport (softib)";
    }
    axon_mem_map_params_t mp = {buf.data(), buf.size(), 0};
    ASSERT_EQ(AXON_OK, axon_mem_map(n.ctx, &mp, &memh));
    EXPECT_EQ(1u, num_regs(memh));
    ASSERT_NE(nullptr, n.add_worker());
    ASSERT_NE(nullptr, n.add_worker());
    EXPECT_EQ(1u, num_regs(memh)) << "workers created later share the domain's registration";

    Key key;
    ASSERT_EQ(AXON_OK, axon_rkey_pack(n.ctx, memh, &key.buf, &key.size));
    const uint8_t *k = static_cast<const uint8_t *>(key.buf);
    EXPECT_EQ(3, k[12] | (k[13] << 8)) << "three workers";
    EXPECT_EQ(1, k[14] | (k[15] << 8)) << "one entry, not one per worker";

    axon_worker_destroy(n.workers[0]);
    n.workers.erase(n.workers.begin());
    EXPECT_EQ(1u, num_regs(memh)) << "the registration is the domain's, not the worker's";
    EXPECT_EQ(AXON_OK, axon_mem_unmap(n.ctx, memh));
    EXPECT_EQ(0u, num_regs_of_ctx(n.ctx));
}

/* ---------------------------------------------------------------- keys between processes */

struct XprocCase {
    const char *name;
    const char *tls;
    bool        forced_am;
};

/* The owner: maps user memory and an allocated segment, sends its address and both keys,
 * then checks what the test wrote into the segment through an SHM key. */
int owner_main(int fd, void *arg)
{
    const XprocCase     *c = static_cast<const XprocCase *>(arg);
    Node                 n;
    std::vector<uint8_t> buf(64 * 1024, 0x11);
    axon_mem_h           user, alloc;
    Key                  kuser, kalloc;
    void                *addr;
    size_t               len;
    void                *blob;
    size_t               blob_len;

    if (!n.init(c->tls)) {
        return 10;
    }
    axon_mem_map_params_t mp = {buf.data(), buf.size(), 0};
    axon_mem_map_params_t ma = {nullptr, 64 * 1024, AXON_MEM_MAP_ALLOCATE};
    if ((axon_mem_map(n.ctx, &mp, &user) != AXON_OK) ||
        (axon_mem_map(n.ctx, &ma, &alloc) != AXON_OK) ||
        (axon_rkey_pack(n.ctx, user, &kuser.buf, &kuser.size) != AXON_OK) ||
        (axon_rkey_pack(n.ctx, alloc, &kalloc.buf, &kalloc.size) != AXON_OK) ||
        (axon_worker_get_address(n.workers[0], &addr, &len) != AXON_OK)) {
        return 11;
    }
    int ok = (axon_test_send_blob(fd, addr, len) == 0) &&
             (axon_test_send_blob(fd, kuser.buf, kuser.size) == 0) &&
             (axon_test_send_blob(fd, kalloc.buf, kalloc.size) == 0);
    axon_worker_release_address(n.workers[0], addr);
    if (!ok) {
        return 12;
    }
    /* The test unpacks and, on an SHM key, writes; we progress meanwhile. */
    if ((axon_test_sync_progress(fd, n.workers[0], 30.0) != 0) ||
        (axon_test_recv_blob(fd, &blob, &blob_len) != 0)) {
        return 13;
    }
    int rc = 0;
    if ((blob_len == 8) && (memcmp(blob, "shmwrote", 8) == 0)) {
        const uint8_t *p = alloc->address;
        rc = ((p[0] == 0xc3) && (p[65535] == 0x3c)) ? 0 : 14;
    }
    free(blob);
    if (axon_test_sync_progress(fd, n.workers[0], 30.0) != 0) {
        return 15;
    }
    axon_mem_unmap(n.ctx, user);
    axon_mem_unmap(n.ctx, alloc);
    return rc;
}

class MemXproc : public ::testing::TestWithParam<XprocCase> {};

TEST_P(MemXproc, PathChoice)
{
    const XprocCase  &c = GetParam();
    axon_test_peer_t  peer;
    void             *addr, *kuser, *kalloc;
    size_t            addr_len, kuser_len, kalloc_len;

    ASSERT_EQ(0, axon_test_peer_spawn(&peer, owner_main, (void *)&c, kPeerTimeout));
    ASSERT_EQ(0, axon_test_recv_blob(peer.fd, &addr, &addr_len));
    ASSERT_EQ(0, axon_test_recv_blob(peer.fd, &kuser, &kuser_len));
    ASSERT_EQ(0, axon_test_recv_blob(peer.fd, &kalloc, &kalloc_len));
    std::vector<uint8_t> vaddr((uint8_t *)addr, (uint8_t *)addr + addr_len);
    std::vector<uint8_t> vuser((uint8_t *)kuser, (uint8_t *)kuser + kuser_len);
    std::vector<uint8_t> valloc((uint8_t *)kalloc, (uint8_t *)kalloc + kalloc_len);
    free(addr);
    free(kuser);
    free(kalloc);

    bool wrote = false;
    {
        Node n;
        std::vector<axon_config_kv_t> extra;
        if (c.forced_am) {
            extra.push_back({"RMA_PATH", "am"});
        }
        ASSERT_TRUE(n.init(c.tls, extra));
        axon_ep_h ep = n.connect(0, vaddr.data(), vaddr.size());
        ASSERT_NE(nullptr, ep);
        const axon_lane_t *lane = &ep->bulk_lane;
        bool cma = !strcmp(c.tls, "shm") && (lane->resource->cap_flags & AXON_CAP_GET);

        axon_rkey_h ru, ra, ra2;
        ASSERT_EQ(AXON_OK, axon_ep_rkey_unpack(ep, vuser.data(), vuser.size(), &ru));
        ASSERT_EQ(AXON_OK, axon_ep_rkey_unpack(ep, valloc.data(), valloc.size(), &ra));
        ASSERT_EQ(AXON_OK, axon_ep_rkey_unpack(ep, valloc.data(), valloc.size(), &ra2));
        EXPECT_EQ(64u * 1024, ru->length);
        EXPECT_NE(ru->token, ra->token);

        axon_rma_path_t want_user, want_alloc;
        if (c.forced_am || !strcmp(c.tls, "tcp")) {
            want_user = want_alloc = AXON_RMA_PATH_AM;
        } else if (!strcmp(c.tls, "shm")) {
            want_user  = cma ? AXON_RMA_PATH_ZCOPY : AXON_RMA_PATH_AM;
            want_alloc = AXON_RMA_PATH_SHM;
        } else {  /* rc: RDMA with the owner's key, allocated or not */
            want_user = want_alloc = AXON_RMA_PATH_ZCOPY;
        }
        EXPECT_EQ(want_user, ru->path);
        EXPECT_EQ(want_alloc, ra->path);
        EXPECT_EQ(ra->path, ra2->path);

        if (ru->path == AXON_RMA_PATH_ZCOPY) {
            EXPECT_NE(nullptr, ru->zcopy_lane);
            EXPECT_STREQ(c.tls, ru->zcopy_lane->resource->tl_name);
            EXPECT_GT(ru->tl_rkey_len, 0u) << "the lane's key: rc's, or the slot shm checks";
        }
        if (ra->path == AXON_RMA_PATH_SHM) {
            /* One attachment shared by both keys; writes reach the owner. */
            EXPECT_EQ(ra->local_base, ra2->local_base);
            ASSERT_NE(nullptr, ra->local_base);
            EXPECT_NE(nullptr, ra->locks);
            EXPECT_EQ(0, ra->local_base[100]) << "allocated memory starts zeroed";
            ra->local_base[0] = 0xc3;
            axon_rkey_destroy(ra2);
            ra->local_base[65535] = 0x3c;  /* still mapped after one key is gone */
            wrote = true;
            axon_rkey_destroy(ra);
            EXPECT_TRUE(axon_list_is_empty(&shm_md_of(n.ctx)->segs)) << "last key detaches";
        } else {
            axon_rkey_destroy(ra2);
            axon_rkey_destroy(ra);
        }
        axon_rkey_destroy(ru);

        /* A key of the owner's memory on an endpoint to someone else goes the AM way,
         * where the target refuses it: here, an endpoint to ourselves. */
        if (!c.forced_am && strcmp(c.tls, "tcp")) {
            Node self;
            if (self.init("self")) {
                axon_ep_h sep = self.connect_to_worker(0, 0);
                axon_rkey_h rk;
                ASSERT_NE(nullptr, sep);
                ASSERT_EQ(AXON_OK, axon_ep_rkey_unpack(sep, valloc.data(), valloc.size(), &rk));
                EXPECT_EQ(AXON_RMA_PATH_AM, rk->path);
                axon_rkey_destroy(rk);
            }
        }

        ASSERT_EQ(0, axon_test_sync_progress(peer.fd, n.workers[0], 30.0));
        const char *msg = wrote ? "shmwrote" : "nothing";
        ASSERT_EQ(0, axon_test_send_blob(peer.fd, msg, strlen(msg)));
        ASSERT_EQ(0, axon_test_sync_progress(peer.fd, n.workers[0], 30.0));
    }
    EXPECT_EQ(0, axon_test_peer_wait(&peer, 30.0));
}

const XprocCase kXprocCases[] = {
    {"shm", "shm", false},
    {"shm_am", "shm", true},
    {"tcp", "tcp", false},
    {"rc", "rc", false},
};

INSTANTIATE_TEST_SUITE_P(Lanes, MemXproc, ::testing::ValuesIn(kXprocCases),
                         [](const ::testing::TestParamInfo<XprocCase> &i) {
                             return std::string(i.param.name);
                         });

/* ---------------------------------------------------------------- one domain, many workers */

/* Progress every worker of n until the test sends a blob; 0 when it came. */
int progress_all_until_blob(Node &n, int fd, void **blob, size_t *len)
{
    double deadline = axon_test_time() + 30.0;

    while (axon_test_time() < deadline) {
        struct pollfd pfd = {fd, POLLIN, 0};
        for (axon_worker_h w : n.workers) {
            axon_worker_progress(w);
        }
        if (poll(&pfd, 1, 0) > 0) {
            return axon_test_recv_blob(fd, blob, len);
        }
    }
    return -1;
}

/*
 * The owner: two workers, memory mapped once, one key for both. The test
 * writes half of it through each worker's rc connection; we check both.
 */
int owner_two_workers_main(int fd, void *)
{
    Node                 n;
    std::vector<uint8_t> buf(64 * 1024, 0);
    axon_mem_h           memh;
    Key                  key;
    void                *addr, *blob = nullptr;
    size_t               len, blob_len;
    int                  ok = 1;

    if (!n.init("rc", {}, 2)) {
        return 10;
    }
    axon_mem_map_params_t mp = {buf.data(), buf.size(), 0};
    if ((axon_mem_map(n.ctx, &mp, &memh) != AXON_OK) || (num_regs(memh) != 1) ||
        (axon_rkey_pack(n.ctx, memh, &key.buf, &key.size) != AXON_OK)) {
        return 11;
    }
    for (axon_worker_h w : n.workers) {
        ok &= (axon_worker_get_address(w, &addr, &len) == AXON_OK) &&
              (axon_test_send_blob(fd, addr, len) == 0);
        axon_worker_release_address(w, addr);
    }
    if (!ok || (axon_test_send_blob(fd, key.buf, key.size) != 0) ||
        (progress_all_until_blob(n, fd, &blob, &blob_len) != 0)) {
        return 12;
    }
    free(blob);
    int rc = (axon_test_check(buf.data(), buf.size() / 2, 21) == -1) &&
             (axon_test_check(buf.data() + buf.size() / 2, buf.size() / 2, 22) == -1) ? 0 : 13;
    axon_mem_unmap(n.ctx, memh);
    return (axon_test_sync_progress(fd, n.workers[0], 30.0) == 0) ? rc : 14;
}

/*
 * rc: the owner's workers share one protection domain, so the one
 * registration its key names is reachable through the connection to
 * either worker (a per-worker domain would refuse the key on the second).
 */
TEST(MemDomainXproc, RcKeyServesEveryWorkerOfTheOwner)
{
    axon_test_peer_t     peer;
    Node                 t;
    void                *addr[2], *kbuf;
    size_t               addr_len[2], klen;
    std::vector<uint8_t> half(32 * 1024);

    if (!t.init("rc")) {
        GTEST_SKIP() << "no rc transport (softib)";
    }
    ASSERT_EQ(0, axon_test_peer_spawn(&peer, owner_two_workers_main, nullptr, kPeerTimeout));
    ASSERT_EQ(0, axon_test_recv_blob(peer.fd, &addr[0], &addr_len[0]));
    ASSERT_EQ(0, axon_test_recv_blob(peer.fd, &addr[1], &addr_len[1]));
    ASSERT_EQ(0, axon_test_recv_blob(peer.fd, &kbuf, &klen));
    uint64_t base;   /* the owner's address of its range: the key's header, offset 16 */
    memcpy(&base, static_cast<uint8_t *>(kbuf) + 16, sizeof(base));
    for (int w = 0; w < 2; ++w) {
        axon_ep_h      ep = t.connect(0, addr[w], addr_len[w]);
        axon_rkey_h    rk;
        axon_request_h req = nullptr;
        ASSERT_NE(nullptr, ep);
        ASSERT_EQ(AXON_OK, axon_ep_rkey_unpack(ep, kbuf, klen, &rk)) << "worker " << w;
        EXPECT_EQ(AXON_RMA_PATH_ZCOPY, rk->path) << "worker " << w;
        /* The first put may go by active messages while rc connects; the last by RDMA. */
        axon_test_fill(half.data(), half.size(), 21 + w);
        for (int round = 0; round < 3; ++round) {
            axon_status_t st = axon_put_nb(ep, half.data(), half.size(),
                                           base + w * half.size(), rk, nullptr, &req);
            EXPECT_EQ(AXON_OK, axon_test_wait_req(t.workers[0], st, req, nullptr, 30.0)) << w;
            req = nullptr;
            st  = axon_ep_flush_nb(ep, nullptr, &req);
            EXPECT_EQ(AXON_OK, axon_test_wait_req(t.workers[0], st, req, nullptr, 30.0)) << w;
            req = nullptr;
        }
        axon_rkey_destroy(rk);
        free(addr[w]);
    }
    free(kbuf);
    ASSERT_EQ(0, axon_test_send_blob(peer.fd, "done", 4));
    ASSERT_EQ(0, axon_test_sync_progress(peer.fd, t.workers[0], 30.0));
    EXPECT_EQ(0, axon_test_peer_wait(&peer, kPeerTimeout)) << "the owner found a half missing";
}

/* ---------------------------------------------------------------- the mapping table */

/* Key header fields (rkey.c's format comment), to read and forge keys. */
const size_t kKeyAddr = 16, kKeyLen = 24, kKeyToken = 32, kKeyHdr = 72, kKeyEntryHdr = 52;

uint64_t key_get(const std::vector<uint8_t> &k, size_t off, unsigned bytes)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < bytes; ++i) {
        v |= (uint64_t)k[off + i] << (8 * i);
    }
    return v;
}

/* Offset of the shm domain's entry bytes in a key (shm_md.c's layout), 0 if none. */
size_t shm_entry(const std::vector<uint8_t> &k)
{
    size_t off = kKeyHdr + 8 * key_get(k, 12, 2);

    for (uint64_t i = 0; i < key_get(k, 14, 2); ++i) {
        if (!strcmp((const char *)&k[off + 4], "shm")) {
            return off + kKeyEntryHdr;
        }
        off += kKeyEntryHdr + key_get(k, off + 2, 2);
    }
    return 0;
}

/* Fields of shm's entry, from its start. */
const size_t kShmFlags = 1, kShmSlot = 2, kShmTableFd = 8, kShmTableId = 16, kShmId = 24;
const uint16_t kKeyFlagSlot = AXON_SHM_KEY_FLAG_SLOT;


void key_set(std::vector<uint8_t> &k, size_t off, unsigned bytes, uint64_t v)
{
    for (unsigned i = 0; i < bytes; ++i) {
        k[off + i] = (uint8_t)(v >> (8 * i));
    }
}

/* Open fds of this process, and mappings of Axon memfds (segments, tables). */
unsigned count_fds()
{
    unsigned n = 0;
    DIR     *d = opendir("/proc/self/fd");
    if (d == nullptr) {
        return 0;
    }
    while (struct dirent *e = readdir(d)) {
        n += (e->d_name[0] != '.');
    }
    closedir(d);
    return n;
}

unsigned count_axon_maps()
{
    unsigned n = 0;
    char     line[512];
    FILE    *f = fopen("/proc/self/maps", "r");
    if (f == nullptr) {
        return 0;
    }
    while (fgets(line, sizeof(line), f) != nullptr) {
        n += (strstr(line, "memfd:axon-mem") != nullptr);
    }
    fclose(f);
    return n;
}

/* One owner of a context and its mappings, per process. */
TEST(MemTable, SlotsPublishedClearedReusedAndFull)
{
    Node                 n;
    std::vector<uint8_t> buf(4096);
    std::vector<axon_mem_h> maps;

    ASSERT_TRUE(n.init("shm,self"));
    ASSERT_NE(nullptr, shm_md_of(n.ctx));
    for (unsigned i = 0; i <= AXON_MEM_TABLE_SLOTS; ++i) {
        axon_mem_map_params_t mp = {buf.data() + (i % 4000), 1 + i % 64, 0};
        axon_mem_h            memh;
        ASSERT_EQ(AXON_OK, axon_mem_map(n.ctx, &mp, &memh)) << i;
        maps.push_back(memh);
        EXPECT_EQ((i < AXON_MEM_TABLE_SLOTS) ? (int32_t)i : -1, shm_memh_of(memh)->slot) << i;
    }
    axon_mem_table_t *table = &shm_md_of(n.ctx)->table;
    ASSERT_EQ(1, shm_md_of(n.ctx)->table_state);

    /* The slot names exactly the mapping: its id, address and length. */
    axon_mem_h m5 = maps[5];
    uint64_t   tok5 = shm_memh_of(m5)->id, base5 = (uintptr_t)m5->address, len5 = m5->length;
    EXPECT_NE(nullptr, axon_mem_table_check(table, 5, tok5, base5, len5));
    EXPECT_EQ(nullptr, axon_mem_table_check(table, 5, tok5 ^ 1, base5, len5));
    EXPECT_EQ(nullptr, axon_mem_table_check(table, 5, tok5, base5 - 1, len5));
    EXPECT_EQ(nullptr, axon_mem_table_check(table, 5, tok5, base5, len5 + 1));
    EXPECT_EQ(nullptr, axon_mem_table_check(table, 6, tok5, base5, len5));
    EXPECT_EQ(nullptr, axon_mem_table_check(table, AXON_MEM_TABLE_SLOTS, tok5, base5, len5));
    EXPECT_EQ(nullptr, axon_mem_table_check(table, 5, 0, base5, len5));

    /* A key of a mapping without a slot says so; one with a slot names it. */
    Key kfull, k5;
    ASSERT_EQ(AXON_OK, axon_rkey_pack(n.ctx, maps.back(), &kfull.buf, &kfull.size));
    ASSERT_EQ(AXON_OK, axon_rkey_pack(n.ctx, m5, &k5.buf, &k5.size));
    const std::vector<uint8_t> full = kfull.bytes(), five = k5.bytes();
    const size_t ef = shm_entry(full), e5 = shm_entry(five);
    ASSERT_NE(0u, ef);
    ASSERT_NE(0u, e5);
    EXPECT_EQ(0u, key_get(full, ef + kShmFlags, 1) & kKeyFlagSlot);
    EXPECT_EQ(0u, key_get(full, ef + kShmTableId, 8));
    EXPECT_EQ(0xffffffffu, key_get(full, ef + kShmTableFd, 4));
    EXPECT_EQ(kKeyFlagSlot, key_get(five, e5 + kShmFlags, 1) & kKeyFlagSlot);
    EXPECT_EQ(5u, key_get(five, e5 + kShmSlot, 2));
    EXPECT_EQ(table->id, key_get(five, e5 + kShmTableId, 8));
    EXPECT_EQ((uint64_t)table->seg.fd, key_get(five, e5 + kShmTableFd, 4));

    /* Unmap clears the slot; the next mapping takes it with another token. */
    const axon_mem_table_slot_t *s5 = &table->slots[5];
    EXPECT_TRUE(axon_mem_table_slot_live(s5, tok5));
    ASSERT_EQ(AXON_OK, axon_mem_unmap(n.ctx, m5));
    EXPECT_FALSE(axon_mem_table_slot_live(s5, tok5));
    axon_mem_map_params_t mp = {(void *)(uintptr_t)base5, len5, 0};
    ASSERT_EQ(AXON_OK, axon_mem_map(n.ctx, &mp, &maps[5]));
    EXPECT_EQ(5, shm_memh_of(maps[5])->slot);
    EXPECT_FALSE(axon_mem_table_slot_live(s5, tok5)) << "the reused slot validates an old key";
    EXPECT_EQ(nullptr, axon_mem_table_check(table, 5, tok5, base5, len5));
    EXPECT_NE(nullptr, axon_mem_table_check(table, 5, shm_memh_of(maps[5])->id, base5, len5));

    for (axon_mem_h m : maps) {
        EXPECT_EQ(AXON_OK, axon_mem_unmap(n.ctx, m));
    }
    for (unsigned i = 0; i < AXON_MEM_TABLE_SLOTS; ++i) {
        EXPECT_EQ(0u, table->slots[i].token) << "slot " << i << " not cleared";
    }
}

/*
 * An owner process for the cross-process table tests, driven by commands
 * over the socket; it progresses its worker between them. Its memory: a
 * guard page, two pages of region (what it maps), a guard page, all filled
 * with pattern 1; "remap" gives the region fresh pages at the same place,
 * filled with pattern 2. It checks at the end that its fds and Axon memfd
 * mappings are back where they were before its context existed.
 */
int table_owner_main(int fd, void *arg)
{
    const char *tls   = static_cast<const char *>(arg);
    size_t      page  = (size_t)sysconf(_SC_PAGESIZE);
    size_t      total = 4 * page, rlen = 2 * page;

    {   /* the first context of a process may load things that stay */
        Node warm;
        if (!warm.init(tls)) {
            return 10;
        }
    }
    unsigned fds0 = count_fds(), maps0 = count_axon_maps();
    uint8_t *area = (uint8_t *)mmap(nullptr, total, PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED) {
        return 11;
    }
    uint8_t *region = area + page;
    axon_test_fill(area, total, 1);

    int rc = 0;
    std::vector<uint8_t> small(64);
    std::vector<axon_mem_h> maps;
    {
        Node   n;
        void  *addr;
        size_t len;
        if (!n.init(tls) || (axon_worker_get_address(n.workers[0], &addr, &len) != AXON_OK)) {
            return 12;
        }
        uint64_t raddr = (uintptr_t)region;
        int ok = (axon_test_send_blob(fd, addr, len) == 0) &&
                 (axon_test_send_blob(fd, &raddr, sizeof(raddr)) == 0);
        axon_worker_release_address(n.workers[0], addr);
        if (!ok) {
            return 13;
        }
        for (;;) {
            void  *cmd_buf;
            size_t cmd_len;
            if ((axon_test_sync_progress(fd, n.workers[0], 30.0) != 0) ||
                (axon_test_recv_blob(fd, &cmd_buf, &cmd_len) != 0)) {
                rc = 14;
                break;
            }
            std::string          cmd((char *)cmd_buf, cmd_len);
            std::vector<uint8_t> out = {'o', 'k'};
            unsigned             count;
            free(cmd_buf);
            if (cmd == "quit") {
                break;
            } else if ((cmd == "map") || (cmd == "amap")) {  /* amap: allocate rlen bytes */
                axon_mem_map_params_t mp = {region, rlen, 0};
                axon_mem_h            memh;
                Key                   key;
                if (cmd == "amap") {
                    mp = {nullptr, rlen, AXON_MEM_MAP_ALLOCATE};
                }
                if ((axon_mem_map(n.ctx, &mp, &memh) != AXON_OK) ||
                    (axon_rkey_pack(n.ctx, memh, &key.buf, &key.size) != AXON_OK)) {
                    rc = 15;
                    break;
                }
                maps.push_back(memh);
                out = key.bytes();
            } else if ((cmd == "unmap") || (cmd == "aunmap")) {
                /* the first mapping of the region still mapped; aunmap: the first segment */
                bool allocated = (cmd == "aunmap");
                for (size_t i = 0; i < maps.size(); ++i) {
                    if (allocated ? (maps[i]->flags & AXON_MEM_MAP_ALLOCATE)
                                  : (maps[i]->address == region)) {
                        axon_mem_unmap(n.ctx, maps[i]);
                        maps.erase(maps.begin() + i);
                        break;
                    }
                }
            } else if (cmd == "remap") {
                munmap(region, rlen);
                if (mmap(region, rlen, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != region) {
                    rc = 16;
                    break;
                }
                axon_test_fill(region, rlen, 2);
            } else if (sscanf(cmd.c_str(), "fill %u", &count) == 1) {
                for (unsigned i = 0; i < count; ++i) {
                    axon_mem_map_params_t mp = {small.data() + i % 64, 1, 0};
                    axon_mem_h            memh;
                    if (axon_mem_map(n.ctx, &mp, &memh) != AXON_OK) {
                        rc = 17;
                        break;
                    }
                    maps.push_back(memh);
                }
            } else if (cmd == "dump") {
                out.assign(area, area + total);
            } else {
                rc = 18;
                break;
            }
            if (axon_test_send_blob(fd, out.data(), out.size()) != 0) {
                rc = 19;
                break;
            }
        }
        for (axon_mem_h m : maps) {
            axon_mem_unmap(n.ctx, m);
        }
    }
    munmap(area, total);
    char verdict[128];
    snprintf(verdict, sizeof(verdict), "fds %u -> %u, axon memfd mappings %u -> %u", fds0,
             count_fds(), maps0, count_axon_maps());
    if ((rc == 0) && ((count_fds() != fds0) || (count_axon_maps() != maps0))) {
        rc = 20;
    }
    axon_test_send_blob(fd, verdict, strlen(verdict));
    return rc;
}

/* The test's side of a table owner: its node, endpoint and what it expects the owner holds. */
class MemTableXproc : public ::testing::Test {
protected:
    axon_test_peer_t     peer_ = {-1, -1};
    std::unique_ptr<Node> n_;
    axon_ep_h            ep_ = nullptr;
    uint64_t             region_ = 0;
    size_t               page_ = (size_t)sysconf(_SC_PAGESIZE);
    std::vector<uint8_t> model_;     /* the owner's four pages as they should be */
    unsigned             fds0_ = 0, maps0_ = 0;
    bool                 quit_ = false;

    /* Spawn the owner, connect to it over tls. */
    void start(const char *tls)
    {
        void  *addr, *raddr;
        size_t addr_len, raddr_len;

        ASSERT_EQ(0, axon_test_peer_spawn(&peer_, table_owner_main, (void *)tls, kPeerTimeout));
        ASSERT_EQ(0, axon_test_recv_blob(peer_.fd, &addr, &addr_len));
        ASSERT_EQ(0, axon_test_recv_blob(peer_.fd, &raddr, &raddr_len));
        std::vector<uint8_t> vaddr((uint8_t *)addr, (uint8_t *)addr + addr_len);
        ASSERT_EQ(8u, raddr_len);
        memcpy(&region_, raddr, 8);
        free(addr);
        free(raddr);
        {
            Node warm;
            ASSERT_TRUE(warm.init(tls));
        }
        fds0_  = count_fds();
        maps0_ = count_axon_maps();
        n_.reset(new Node);
        ASSERT_TRUE(n_->init(tls));
        ep_ = n_->connect(0, vaddr.data(), vaddr.size());
        ASSERT_NE(nullptr, ep_);
        model_.resize(4 * page_);
        axon_test_fill(model_.data(), model_.size(), 1);
    }
    /* Send a command, progressing meanwhile; the owner's answer. */
    std::vector<uint8_t> cmd(const std::string &c)
    {
        void  *buf;
        size_t len;
        if ((axon_test_sync_progress(peer_.fd, n_->workers[0], 30.0) != 0) ||
            (axon_test_send_blob(peer_.fd, c.data(), c.size()) != 0) ||
            (axon_test_recv_blob(peer_.fd, &buf, &len) != 0)) {
            ADD_FAILURE() << "owner did not answer " << c;
            return {};
        }
        std::vector<uint8_t> out((uint8_t *)buf, (uint8_t *)buf + len);
        free(buf);
        return out;
    }
    void remap()
    {
        EXPECT_EQ("ok", as_string(cmd("remap")));
        axon_test_fill(model_.data() + page_, 2 * page_, 2);
    }
    static std::string as_string(const std::vector<uint8_t> &v)
    {
        return std::string(v.begin(), v.end());
    }
    /* Does the owner hold exactly the model? */
    void expect_owner_memory(const char *when)
    {
        std::vector<uint8_t> now = cmd("dump");
        ASSERT_EQ(model_.size(), now.size()) << when;
        size_t diff = 0, first = 0;
        for (size_t i = 0; i < now.size(); ++i) {
            if ((now[i] != model_[i]) && (diff++ == 0)) {
                first = i;
            }
        }
        EXPECT_EQ(0u, diff) << when << ": " << diff << " bytes differ, the first at page "
                            << first / page_ << " + " << first % page_;
    }
    axon_status_t put(const void *buf, size_t len, uint64_t addr, axon_rkey_h rk)
    {
        axon_request_h req = nullptr;
        axon_status_t  st  = axon_put_nb(ep_, buf, len, addr, rk, nullptr, &req);
        st = axon_test_wait_req(n_->workers[0], st, req, nullptr, 30.0);
        if (st != AXON_OK) {
            return st;
        }
        req = nullptr;
        st  = axon_ep_flush_nb(ep_, nullptr, &req);
        return axon_test_wait_req(n_->workers[0], st, req, nullptr, 30.0);
    }
    axon_status_t get(void *buf, size_t len, uint64_t addr, axon_rkey_h rk)
    {
        axon_request_h req = nullptr;
        axon_status_t  st  = axon_get_nb(ep_, buf, len, addr, rk, nullptr, &req);
        return axon_test_wait_req(n_->workers[0], st, req, nullptr, 30.0);
    }
    bool cma() const
    {
        return (ep_->bulk_lane.resource->dev_type == AXON_DEV_TYPE_SHM) &&
               (ep_->bulk_lane.resource->cap_flags & AXON_CAP_GET);
    }
    /* Stop the owner (it checks its own counts), tear down, check ours. */
    void finish()
    {
        if (peer_.pid <= 0) {
            return;
        }
        if (n_) {
            std::string verdict = as_string(cmd("quit"));
            printf("[mem] owner: %s\n", verdict.c_str());
            axon_shm_md_t *md = shm_md_of(n_->ctx);
            EXPECT_TRUE((md == nullptr) || axon_list_is_empty(&md->tables))
                << "destroyed keys left a peer's table attached";
            n_.reset();
            EXPECT_EQ(fds0_, count_fds()) << "fds not back to baseline";
            EXPECT_EQ(maps0_, count_axon_maps()) << "Axon memfd mappings not back to baseline";
        }
        EXPECT_EQ(0, axon_test_peer_wait(&peer_, 30.0)) << "owner failed or leaked";
    }
    void TearDown() override
    {
        if (peer_.pid > 0) {
            n_.reset();
            axon_test_peer_kill(&peer_);
        }
    }
};

/*
 * Over shm with cross-memory attach: a key whose token, slot, range or
 * table is forged is refused at unpack, before anything moves; a key
 * without a slot goes by active messages; the real key writes where it
 * should and nowhere else.
 */
TEST_F(MemTableXproc, ForgedKeysRefusedAtUnpack)
{
    ASSERT_NO_FATAL_FAILURE(start("shm"));
    if (!cma()) {
        finish();
        GTEST_SKIP() << "no cross-memory attach here (ptrace policy)";
    }
    std::vector<uint8_t> k1 = cmd("map"), k2 = cmd("map");
    ASSERT_GT(k1.size(), kKeyHdr);
    ASSERT_GT(k2.size(), kKeyHdr);
    const size_t e1 = shm_entry(k1), e2 = shm_entry(k2);
    ASSERT_NE(0u, e1);
    ASSERT_NE(0u, e2);
    EXPECT_EQ(kKeyFlagSlot, key_get(k1, e1 + kShmFlags, 1) & kKeyFlagSlot);
    EXPECT_NE(key_get(k1, e1 + kShmSlot, 2), key_get(k2, e2 + kShmSlot, 2));
    EXPECT_EQ(key_get(k1, e1 + kShmTableId, 8), key_get(k2, e2 + kShmTableId, 8))
        << "one table per context";

    axon_rkey_h r1;
    ASSERT_EQ(AXON_OK, axon_ep_rkey_unpack(ep_, k1.data(), k1.size(), &r1));
    EXPECT_EQ(AXON_RMA_PATH_ZCOPY, r1->path);
    EXPECT_NE(nullptr, r1->md_handle) << "shm holds the owner's table for the key";
    EXPECT_NE(0u, r1->tl_rkey_len);

    struct Forgery {
        const char *what;
        size_t      off;
        unsigned    bytes;
        uint64_t    value;
    };
    const uint64_t addr = key_get(k1, kKeyAddr, 8), len = key_get(k1, kKeyLen, 8);
    const Forgery  forged[] = {
        {"id changed", e1 + kShmId, 8, key_get(k1, e1 + kShmId, 8) ^ 1},
        {"another mapping's id", e1 + kShmId, 8, key_get(k2, e2 + kShmId, 8)},
        {"another mapping's slot", e1 + kShmSlot, 2, key_get(k2, e2 + kShmSlot, 2)},
        {"a free slot", e1 + kShmSlot, 2, AXON_MEM_TABLE_SLOTS - 1},
        {"longer range", kKeyLen, 8, len + page_},
        {"shorter range", kKeyLen, 8, len - 1},
        {"range moved back", kKeyAddr, 8, addr - page_},
        {"range moved on", kKeyAddr, 8, addr + 8},
        {"table id changed", e1 + kShmTableId, 8, key_get(k1, e1 + kShmTableId, 8) ^ 0x100},
        {"table fd changed", e1 + kShmTableFd, 4, key_get(k1, e1 + kShmTableFd, 4) + 57},
    };
    {
        LogCapture log;   /* (holds an fd: gone before finish counts them) */
        for (const Forgery &f : forged) {
            std::vector<uint8_t> bad = k1;
            axon_rkey_h          rk  = nullptr;
            key_set(bad, f.off, f.bytes, f.value);
            fix_checksum(bad);
            EXPECT_EQ(AXON_ERR_REMOTE_ACCESS,
                      axon_ep_rkey_unpack(ep_, bad.data(), bad.size(), &rk)) << f.what;
            EXPECT_TRUE(log.logged()) << f.what << ": refused without a log line";
        }
    }

    /* No slot: the owner checks every access (active messages). */
    std::vector<uint8_t> noslot = k1;
    key_set(noslot, e1 + kShmFlags, 1, key_get(k1, e1 + kShmFlags, 1) & ~kKeyFlagSlot);
    key_set(noslot, e1 + kShmTableId, 8, 0);
    key_set(noslot, e1 + kShmTableFd, 4, 0xffffffffu);
    key_set(noslot, e1 + kShmSlot, 2, 0);
    fix_checksum(noslot);
    axon_rkey_h rn;
    ASSERT_EQ(AXON_OK, axon_ep_rkey_unpack(ep_, noslot.data(), noslot.size(), &rn));
    EXPECT_EQ(AXON_RMA_PATH_AM, rn->path);
    EXPECT_EQ(nullptr, rn->md_handle);

    /* The real key and the slot-less one both reach exactly their bytes. */
    uint64_t w1 = 0x0123456789abcdefull, w2 = 0xfedcba9876543210ull;
    EXPECT_EQ(AXON_OK, put(&w1, 8, region_ + 16, r1));
    EXPECT_EQ(AXON_OK, put(&w2, 8, region_ + 2 * page_ - 8, rn));
    memcpy(model_.data() + page_ + 16, &w1, 8);
    memcpy(model_.data() + 3 * page_ - 8, &w2, 8);
    expect_owner_memory("after two puts");
    axon_rkey_destroy(rn);

    /* A full table: the next mapping has no slot and is reached by active messages. */
    EXPECT_EQ("ok", as_string(cmd("fill " + std::to_string(AXON_MEM_TABLE_SLOTS))));
    std::vector<uint8_t> k3 = cmd("map");
    ASSERT_NE(0u, shm_entry(k3));
    EXPECT_EQ(0u, key_get(k3, shm_entry(k3) + kShmFlags, 1) & kKeyFlagSlot);
    axon_rkey_h r3;
    ASSERT_EQ(AXON_OK, axon_ep_rkey_unpack(ep_, k3.data(), k3.size(), &r3));
    EXPECT_EQ(AXON_RMA_PATH_AM, r3->path);
    uint8_t got[64];
    EXPECT_EQ(AXON_OK, get(got, sizeof(got), region_ + 16, r3));
    EXPECT_EQ(0, memcmp(got, model_.data() + page_ + 16, sizeof(got)));
    axon_rkey_destroy(r3);
    axon_rkey_destroy(r1);
    finish();
}

/*
 * Over shm with cross-memory attach: after the owner unmaps (and gives the
 * address fresh memory, then maps that again into the same table slot),
 * put and get through the old key fail with AXON_ERR_REMOTE_ACCESS and
 * touch nothing; unpacking the old key fails; the new key works.
 */
TEST_F(MemTableXproc, StaleKeysFailAfterUnmap)
{
    ASSERT_NO_FATAL_FAILURE(start("shm"));
    if (!cma()) {
        finish();
        GTEST_SKIP() << "no cross-memory attach here (ptrace policy)";
    }
    std::vector<uint8_t> k1 = cmd("map");
    axon_rkey_h          r1;
    ASSERT_NE(0u, shm_entry(k1));
    ASSERT_EQ(AXON_OK, axon_ep_rkey_unpack(ep_, k1.data(), k1.size(), &r1));
    ASSERT_EQ(AXON_RMA_PATH_ZCOPY, r1->path);

    uint64_t w = 0x5555aaaa5555aaaaull, back = 0;
    ASSERT_EQ(AXON_OK, put(&w, 8, region_, r1));
    ASSERT_EQ(AXON_OK, get(&back, 8, region_, r1));
    EXPECT_EQ(w, back);

    EXPECT_EQ("ok", as_string(cmd("unmap")));
    remap();   /* fresh pages at the same address: the old key must not reach them */

    std::unique_ptr<LogCapture> log(new LogCapture);  /* quiet: the errors are expected */
    std::vector<uint8_t>        big(2 * page_, 0xee), before = big;
    EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, put(big.data(), big.size(), region_, r1)) << "put";
    EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, put(&w, 8, region_ + 100, r1)) << "small put";
    EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, get(big.data(), big.size(), region_, r1)) << "get";
    EXPECT_EQ(before, big) << "a refused get wrote our buffer";
    axon_rkey_h rs = nullptr;
    EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, axon_ep_rkey_unpack(ep_, k1.data(), k1.size(), &rs))
        << "a key of unmapped memory unpacks";
    expect_owner_memory("after the old key's accesses");

    /* The same memory mapped again takes the same slot: the old key still fails. */
    std::vector<uint8_t> k2 = cmd("map");
    ASSERT_NE(0u, shm_entry(k2));
    EXPECT_EQ(key_get(k1, shm_entry(k1) + kShmSlot, 2), key_get(k2, shm_entry(k2) + kShmSlot, 2))
        << "slot not reused";
    EXPECT_NE(key_get(k1, kKeyToken, 8), key_get(k2, kKeyToken, 8));
    EXPECT_NE(key_get(k1, shm_entry(k1) + kShmId, 8), key_get(k2, shm_entry(k2) + kShmId, 8));
    EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, put(&w, 8, region_ + 8, r1)) << "put after the reuse";
    EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, get(&back, 8, region_ + 8, r1)) << "get after the reuse";
    EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, axon_ep_rkey_unpack(ep_, k1.data(), k1.size(), &rs));
    log.reset();

    axon_rkey_h r2;
    ASSERT_EQ(AXON_OK, axon_ep_rkey_unpack(ep_, k2.data(), k2.size(), &r2));
    EXPECT_EQ(AXON_RMA_PATH_ZCOPY, r2->path);
    std::vector<uint8_t> now(2 * page_);
    EXPECT_EQ(AXON_OK, get(now.data(), now.size(), region_, r2));
    EXPECT_EQ(0, memcmp(now.data(), model_.data() + page_, now.size()))
        << "the new key does not read the fresh memory";
    expect_owner_memory("at the end");
    axon_rkey_destroy(r2);
    axon_rkey_destroy(r1);
    finish();
}

/*
 * Over shm, allocated memory: this process keeps its attachment of the
 * segment while a key to it lives, even after the owner unmapped it. A key
 * unpacked after the unmap must still fail (the owner's table says the
 * mapping is gone), although the attachment it would share is still here.
 */
TEST_F(MemTableXproc, AllocatedKeyUnpackedAfterUnmapFails)
{
    ASSERT_NO_FATAL_FAILURE(start("shm"));
    std::vector<uint8_t> k = cmd("amap");
    axon_rkey_h          r1, r2 = nullptr;
    ASSERT_NE(0u, shm_entry(k));
    ASSERT_EQ(AXON_OK, axon_ep_rkey_unpack(ep_, k.data(), k.size(), &r1));
    if (r1->path != AXON_RMA_PATH_SHM) {
        axon_rkey_destroy(r1);
        finish();
        GTEST_SKIP() << "segments cannot be mapped here";
    }
    const axon_shm_rkey_handle_t *h1 = (const axon_shm_rkey_handle_t *)r1->md_handle;
    ASSERT_NE(nullptr, h1);
    EXPECT_NE(nullptr, h1->table) << "checked against the owner's table";
    ASSERT_EQ(AXON_OK, axon_ep_rkey_unpack(ep_, k.data(), k.size(), &r2));
    EXPECT_EQ(h1->seg, ((const axon_shm_rkey_handle_t *)r2->md_handle)->seg);
    axon_rkey_destroy(r2);

    EXPECT_EQ("ok", as_string(cmd("aunmap")));
    {
        LogCapture log;
        r2 = nullptr;
        EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, axon_ep_rkey_unpack(ep_, k.data(), k.size(), &r2))
            << "a key of a segment its owner unmapped unpacks (cached attachment)";
        EXPECT_TRUE(log.logged());
    }
    axon_rkey_destroy(r1);
    EXPECT_TRUE(axon_list_is_empty(&shm_md_of(n_->ctx)->segs)) << "last key detaches";
    finish();
}

/*
 * rc: unmapping drops the memory's registration, so the target's device
 * refuses RDMA with the old key (a remote access error); the operation
 * fails and the owner's memory is untouched.
 */
TEST_F(MemTableXproc, RcStaleKeyRefusedByDevice)
{
    ASSERT_NO_FATAL_FAILURE(start("rc"));
    std::vector<uint8_t> k1 = cmd("map");
    axon_rkey_h          r1;
    ASSERT_GT(k1.size(), kKeyHdr);
    ASSERT_EQ(AXON_OK, axon_ep_rkey_unpack(ep_, k1.data(), k1.size(), &r1));
    ASSERT_EQ(AXON_RMA_PATH_ZCOPY, r1->path);
    EXPECT_EQ(nullptr, r1->md_handle) << "rc's device checks its own key";

    uint64_t w = 0x1111222233334444ull, back = 0;
    ASSERT_EQ(AXON_OK, put(&w, 8, region_ + 64, r1));
    ASSERT_EQ(AXON_OK, get(&back, 8, region_ + 64, r1));
    EXPECT_EQ(w, back);
    memcpy(model_.data() + page_ + 64, &w, 8);

    EXPECT_EQ("ok", as_string(cmd("unmap")));
    uint64_t      w2 = ~w;
    axon_status_t sp = put(&w2, 8, region_ + 64, r1);
    axon_status_t sg = get(&back, 8, region_ + 64, r1);
    printf("[mem] rc, key of unmapped memory: put %s, get %s\n", axon_status_string(sp),
           axon_status_string(sg));
    EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, sp) << "put: " << axon_status_string(sp);
    EXPECT_LT(sg, 0) << "get: " << axon_status_string(sg);
    EXPECT_EQ(w, back) << "a refused get wrote our buffer";
    expect_owner_memory("after the old key's accesses");
    axon_rkey_destroy(r1);
    finish();
}

}  // namespace
