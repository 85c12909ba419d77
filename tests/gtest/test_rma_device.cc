/*
 * Device atomic mode (AXON_ATOMIC_MODE=device) over rc on softib: every
 * atomic is executed by the device (rc's ep_atomic: standard verbs atomics
 * and §8.7 masked ones, XOR by a compare-and-swap loop), so they are atomic
 * with each other and complete while the target only sleeps (softib's
 * progress thread is the responder).
 *
 * The target is a forked process that maps two regions (allocated and user
 * memory), sends its address and keys over the harness socket and serves
 * commands: read, write, block (stop progressing until the next command),
 * quit. Between commands it progresses its worker (connection handshakes).
 */
#include <gtest/gtest.h>

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <random>
#include <string>
#include <vector>

#include "axon.h"
#include "axon_int.h"
#include "rma.h"
#include "harness.h"

namespace {

const double   kOpTimeout  = 20.0;
const double   kPeerTimeout = 90.0;
const size_t   kRegionLen  = 65536;
const uint32_t kFeatures   = AXON_FEATURE_TAG | AXON_FEATURE_RMA | AXON_FEATURE_AMO;
enum { kAlloc, kUser, kRegions };

/* The process environment for one test: restored at the end. */
class EnvSet {
public:
    void set(const char *name, const char *value)
    {
        const char *old = getenv(name);
        saved_.push_back({name, old ? old : "", old != nullptr});
        setenv(name, value, 1);
    }
    ~EnvSet()
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
    struct Saved { std::string name, value; bool had; };
    std::vector<Saved> saved_;
};

struct DevNode {
    axon_context_h context = nullptr;
    axon_worker_h  worker  = nullptr;
    void          *address = nullptr;
    size_t         address_length = 0;

    axon_status_t create(const char *mode, const char *tls = "rc")
    {
        axon_config_kv_t      kv[2]  = {{"TLS", tls}, {"ATOMIC_MODE", mode}};
        axon_context_params_t params = {};
        params.features     = kFeatures;
        params.config       = kv;
        params.config_count = 2;
        axon_status_t status = axon_init(&params, &context);
        if (status != AXON_OK) {
            context = nullptr;
            return status;
        }
        status = axon_worker_create(context, NULL, &worker);
        if (status == AXON_OK) {
            status = axon_worker_get_address(worker, &address, &address_length);
        }
        if (status != AXON_OK) {
            destroy();
        }
        return status;
    }
    void destroy()
    {
        if (address != nullptr) {
            axon_worker_release_address(worker, address);
        }
        if (worker != nullptr) {
            axon_worker_destroy(worker);
        }
        if (context != nullptr) {
            axon_cleanup(context);
        }
        context = nullptr;
        worker  = nullptr;
        address = nullptr;
    }
    ~DevNode() { destroy(); }
};

/* ---------------------------------------------------------------- target */

struct Cmd {
    char     op;      /* 'R' read, 'W' write (data follows), 'B' block, 'Q' quit */
    uint8_t  region;
    uint8_t  pad[6];
    uint64_t off;
    uint64_t len;
};

struct TargetArgs {
    const char *mode;
    const char *tls;
};

/* Wait for the next command blob, progressing the worker unless blocked. */
bool target_next(int fd, axon_worker_h worker, bool blocked, std::vector<uint8_t> &msg)
{
    if (!blocked) {
        for (;;) {
            struct pollfd pfd = {fd, POLLIN, 0};
            if (poll(&pfd, 1, 0) > 0) {
                break;
            }
            axon_worker_progress(worker);
        }
    }
    void  *buf = nullptr;
    size_t len = 0;
    if (axon_test_recv_blob(fd, &buf, &len) != 0) {
        return false;
    }
    msg.assign((uint8_t *)buf, (uint8_t *)buf + len);
    free(buf);
    return msg.size() >= sizeof(Cmd);
}

int target_main(int fd, void *arg)
{
    const TargetArgs *ta = (const TargetArgs *)arg;
    DevNode node;
    if (node.create(ta->mode, ta->tls) != AXON_OK) {
        return 2;
    }
    axon_mem_h memh[kRegions] = {};
    uint8_t   *base[kRegions] = {};
    void      *user = nullptr;
    if (posix_memalign(&user, 4096, kRegionLen) != 0) {
        return 3;
    }
    memset(user, 0, kRegionLen);
    for (int r = 0; r < kRegions; ++r) {
        axon_mem_map_params_t mp = {};
        mp.address = (r == kUser) ? user : nullptr;
        mp.length  = kRegionLen;
        mp.flags   = (r == kAlloc) ? AXON_MEM_MAP_ALLOCATE : 0;
        void  *a = nullptr;
        size_t l = 0;
        if ((axon_mem_map(node.context, &mp, &memh[r]) != AXON_OK) ||
            (axon_mem_query(memh[r], &a, &l) != AXON_OK)) {
            return 4;
        }
        base[r] = (uint8_t *)a;
        void  *key = nullptr;
        size_t key_len = 0;
        if (axon_rkey_pack(node.context, memh[r], &key, &key_len) != AXON_OK) {
            return 5;
        }
        uint64_t b = (uintptr_t)base[r];
        int ret = axon_test_send_blob(fd, key, key_len) | axon_test_send_blob(fd, &b, sizeof(b));
        axon_rkey_buffer_release(key);
        if (ret != 0) {
            return 6;
        }
    }
    if (axon_test_send_blob(fd, node.address, node.address_length) != 0) {
        return 7;
    }
    std::vector<uint8_t> msg;
    bool blocked = false;
    int  rc      = 0;
    while (target_next(fd, node.worker, blocked, msg)) {
        Cmd c;
        memcpy(&c, msg.data(), sizeof(c));
        blocked = false;
        if ((c.region >= kRegions) || (c.off > kRegionLen) || (c.len > kRegionLen - c.off)) {
            rc = 8;
            break;
        }
        if (c.op == 'Q') {
            break;
        } else if (c.op == 'B') {
            blocked = true;   /* only sleep in a blocking read until the next command */
        } else if (c.op == 'R') {
            if (axon_test_send_blob(fd, base[c.region] + c.off, c.len) != 0) {
                rc = 9;
                break;
            }
        } else if (c.op == 'W') {
            if (msg.size() != sizeof(c) + c.len) {
                rc = 10;
                break;
            }
            memcpy(base[c.region] + c.off, msg.data() + sizeof(c), c.len);
            axon_test_send_blob(fd, "", 0);
        }
    }
    /* Let peers' endpoints close before the worker goes. */
    axon_test_progress_for(node.worker, 0.2);
    for (int r = 0; r < kRegions; ++r) {
        axon_mem_unmap(node.context, memh[r]);
    }
    node.destroy();
    free(user);
    return rc;
}

/* What a client gets from the target: its address, keys and region bases. */
struct TargetInfo {
    std::vector<uint8_t> address;
    std::vector<uint8_t> key[kRegions];
    uint64_t             base[kRegions] = {};
};

bool recv_vec(int fd, std::vector<uint8_t> &v)
{
    void  *buf = nullptr;
    size_t len = 0;
    if (axon_test_recv_blob(fd, &buf, &len) != 0) {
        return false;
    }
    v.assign((uint8_t *)buf, (uint8_t *)buf + len);
    free(buf);
    return true;
}

/* ---------------------------------------------------------------- a client */

struct Client {
    DevNode     node;
    axon_ep_h   ep = nullptr;
    axon_rkey_h rkey[kRegions] = {};

    axon_status_t start(const TargetInfo &ti, const char *mode, const char *tls)
    {
        axon_status_t status = node.create(mode, tls);
        if (status != AXON_OK) {
            return status;
        }
        status = axon_test_ep_create(node.worker, ti.address.data(), ti.address.size(), &ep);
        if (status != AXON_OK) {
            return status;
        }
        for (int r = 0; r < kRegions; ++r) {
            status = axon_ep_rkey_unpack(ep, ti.key[r].data(), ti.key[r].size(), &rkey[r]);
            if (status != AXON_OK) {
                return status;
            }
        }
        return AXON_OK;
    }

    void stop()
    {
        for (int r = 0; r < kRegions; ++r) {
            axon_rkey_destroy(rkey[r]);
            rkey[r] = nullptr;
        }
        if (ep != nullptr) {
            axon_test_ep_close(node.worker, ep, AXON_EP_CLOSE_FLUSH, kOpTimeout);
            ep = nullptr;
        }
        node.destroy();
    }

    ~Client() { stop(); }

    axon_status_t atomic(axon_atomic_op_t op, size_t size, const void *value, const void *compare,
                         void *result, uint64_t raddr, int r)
    {
        axon_request_h req = nullptr;
        axon_status_t  st  = axon_atomic_nb(ep, op, size, value, compare, result, raddr, rkey[r],
                                            NULL, &req);
        return axon_test_wait_req(node.worker, st, req, NULL, kOpTimeout);
    }

    axon_status_t masked_cswap(size_t size, const uint64_t *cmp, const uint64_t *cmask,
                               const uint64_t *swap, const uint64_t *smask, uint64_t *result,
                               uint64_t raddr, int r)
    {
        axon_request_h req = nullptr;
        axon_status_t  st  = axon_atomic_masked_cswap_nb(ep, size, cmp, cmask, swap, smask,
                                                         result, raddr, rkey[r], NULL, &req);
        return axon_test_wait_req(node.worker, st, req, NULL, kOpTimeout);
    }

    axon_status_t mfadd(size_t size, const uint64_t *add, const uint64_t *boundary,
                        uint64_t *result, uint64_t raddr, int r)
    {
        axon_request_h req = nullptr;
        axon_status_t  st  = axon_atomic_mfadd_nb(ep, size, add, boundary, result, raddr,
                                                  rkey[r], NULL, &req);
        return axon_test_wait_req(node.worker, st, req, NULL, kOpTimeout);
    }

    axon_status_t flush()
    {
        axon_request_h req = nullptr;
        axon_status_t  st  = axon_ep_flush_nb(ep, NULL, &req);
        return axon_test_wait_req(node.worker, st, req, NULL, kOpTimeout);
    }
};

/* ---------------------------------------------------------------- the test's view */

/* Parameter: AXON_TLS of every process (rc alone, or shm carrying the rest). */
class DeviceAmo : public ::testing::TestWithParam<const char *> {
protected:
    EnvSet           env;
    axon_test_peer_t target = {-1, -1};
    TargetArgs       targs  = {"device", "rc"};
    TargetInfo       ti;
    bool             started = false;

    void TearDown() override
    {
        if (target.pid > 0) {
            if (started) {
                send_cmd('Q', 0, 0, 0);
            }
            EXPECT_EQ(0, axon_test_peer_wait(&target, kOpTimeout)) << "target exit code";
        }
    }

    void spawn(const char *mode = "device")
    {
        targs.mode = mode;
        targs.tls  = GetParam();
        ASSERT_EQ(0, axon_test_peer_spawn(&target, target_main, &targs, kPeerTimeout));
        for (int r = 0; r < kRegions; ++r) {
            std::vector<uint8_t> b;
            ASSERT_TRUE(recv_vec(target.fd, ti.key[r])) << "key " << r;
            ASSERT_TRUE(recv_vec(target.fd, b));
            ASSERT_EQ(8u, b.size());
            memcpy(&ti.base[r], b.data(), 8);
        }
        ASSERT_TRUE(recv_vec(target.fd, ti.address));
        started = true;
    }

    void send_cmd(char op, int r, uint64_t off, uint64_t len, const void *data = nullptr)
    {
        std::vector<uint8_t> msg(sizeof(Cmd) + ((op == 'W') ? len : 0));
        Cmd c = {};
        c.op     = op;
        c.region = (uint8_t)r;
        c.off    = off;
        c.len    = len;
        memcpy(msg.data(), &c, sizeof(c));
        if (op == 'W') {
            memcpy(msg.data() + sizeof(c), data, len);
        }
        ASSERT_EQ(0, axon_test_send_blob(target.fd, msg.data(), msg.size()));
    }

    std::vector<uint8_t> read(int r, uint64_t off, uint64_t len)
    {
        std::vector<uint8_t> v;
        send_cmd('R', r, off, len);
        EXPECT_TRUE(recv_vec(target.fd, v));
        return v;
    }

    void write(int r, uint64_t off, const void *data, uint64_t len)
    {
        std::vector<uint8_t> ack;
        send_cmd('W', r, off, len, data);
        EXPECT_TRUE(recv_vec(target.fd, ack));
    }

    uint64_t read64(int r, uint64_t off, size_t size)
    {
        std::vector<uint8_t> v = read(r, off, size);
        uint64_t x = 0;
        if (v.size() == size) {
            memcpy(&x, v.data(), size);
        }
        return x;
    }
};

uint64_t model_atomic(axon_atomic_op_t op, size_t size, uint64_t old, uint64_t value,
                      uint64_t compare)
{
    uint64_t mask = (size == 4) ? 0xffffffffull : ~0ull;
    uint64_t n    = old;

    switch (op) {
    case AXON_ATOMIC_ADD:   n = old + value; break;
    case AXON_ATOMIC_AND:   n = old & value; break;
    case AXON_ATOMIC_OR:    n = old | value; break;
    case AXON_ATOMIC_XOR:   n = old ^ value; break;
    case AXON_ATOMIC_SWAP:  n = value; break;
    case AXON_ATOMIC_CSWAP: n = ((old & mask) == (compare & mask)) ? value : old; break;
    default: break;
    }
    return n & mask;
}

void model_masked_cswap(int words, const uint64_t *old, const uint64_t *compare,
                        const uint64_t *compare_mask, const uint64_t *swap,
                        const uint64_t *swap_mask, uint64_t *out)
{
    bool equal = true;
    for (int w = 0; w < words; ++w) {
        equal = equal && (((old[w] ^ compare[w]) & compare_mask[w]) == 0);
    }
    for (int w = 0; w < words; ++w) {
        out[w] = equal ? ((old[w] & ~swap_mask[w]) | (swap[w] & swap_mask[w])) : old[w];
    }
}

void model_mfadd(int words, const uint64_t *old, const uint64_t *add, const uint64_t *boundary,
                 uint64_t *out)
{
    for (int w = 0; w < words; ++w) {
        uint64_t b = boundary[w] | (1ull << 63), res = 0;
        int      lo = 0;
        for (int bit = 0; bit < 64; ++bit) {
            if (!((b >> bit) & 1)) {
                continue;
            }
            int      width = bit - lo + 1;
            uint64_t fmask = (width == 64) ? ~0ull : (((1ull << width) - 1) << lo);
            uint64_t sum   = ((old[w] & fmask) >> lo) + ((add[w] & fmask) >> lo);
            res |= (sum << lo) & fmask;
            lo = bit + 1;
        }
        out[w] = res;
    }
}

/* ---------------------------------------------------------------- tests */

TEST_P(DeviceAmo, KeysTakeTheDevicePath)
{
    ASSERT_NO_FATAL_FAILURE(spawn());
    Client c;
    ASSERT_EQ(AXON_OK, c.start(ti, "device", GetParam()));
    ASSERT_NE(nullptr, c.ep->amo_lane.tl_ep) << "the endpoint has an rc lane for atomics";
    EXPECT_STREQ("rc", c.ep->amo_lane.resource->tl_name);
    if (strncmp(GetParam(), "shm", 3) == 0) {
        /* put/get keep their own path: shm carries them, not the amo lane */
        EXPECT_STREQ("shm", c.ep->am_lane.resource->tl_name);
        EXPECT_EQ((int)AXON_RMA_PATH_SHM, (int)c.rkey[kAlloc]->path);
    }
    for (int r = 0; r < kRegions; ++r) {
        EXPECT_EQ((int)AXON_RKEY_AMO_DEVICE, (int)c.rkey[r]->amo) << "region " << r;
    }
}

TEST_P(DeviceAmo, EveryOpMatchesModel)
{
    ASSERT_NO_FATAL_FAILURE(spawn());
    Client c;
    ASSERT_EQ(AXON_OK, c.start(ti, "device", GetParam()));
    std::mt19937_64 rng(42);
    for (int r = 0; r < kRegions; ++r) {
        for (size_t size : {4u, 8u}) {
            for (int op = 0; op < AXON_ATOMIC_LAST; ++op) {
                for (int iter = 0; iter < 8; ++iter) {
                    uint64_t off  = 8 * (uint64_t)(1 + op * 64 + iter * 4) + ((size == 4) ? 4 : 0);
                    uint64_t init = rng(), value = rng(), compare = rng();
                    uint64_t mask = (size == 4) ? 0xffffffffull : ~0ull;
                    init &= mask;
                    if (iter & 1) {
                        compare = init;  /* half the CSWAPs succeed */
                    }
                    write(r, off, &init, size);
                    uint64_t result = 0;
                    bool fetch = (op == AXON_ATOMIC_SWAP) || (op == AXON_ATOMIC_CSWAP) ||
                                 (iter & 2);
                    ASSERT_EQ(AXON_OK, c.atomic((axon_atomic_op_t)op, size, &value, &compare,
                                                fetch ? &result : nullptr, ti.base[r] + off, r))
                        << "op " << op << " size " << size;
                    if (fetch) {
                        EXPECT_EQ(init, result & mask) << "op " << op << " size " << size;
                    }
                    EXPECT_EQ(model_atomic((axon_atomic_op_t)op, size, init, value, compare),
                              read64(r, off, size)) << "op " << op << " size " << size;
                    /* the neighbouring word is untouched */
                    if (size == 4) {
                        EXPECT_EQ(0u, read64(r, off - 4, 4));
                    }
                }
            }
        }
    }
}

TEST_P(DeviceAmo, ExtendedOpsMatchModel)
{
    ASSERT_NO_FATAL_FAILURE(spawn());
    Client c;
    ASSERT_EQ(AXON_OK, c.start(ti, "device", GetParam()));
    std::mt19937_64 rng(7);
    for (int r = 0; r < kRegions; ++r) {
        for (size_t size : {8u, 16u, 32u}) {
            int words = (int)(size / 8);
            for (int iter = 0; iter < 16; ++iter) {
                uint64_t off = 4096 + 64 * (uint64_t)iter;
                uint64_t init[4], cmp[4], cmask[4], swap[4], smask[4], res[4] = {}, expect[4];
                uint64_t got[4];
                for (int w = 0; w < 4; ++w) {
                    init[w]  = rng();
                    cmask[w] = rng();
                    cmp[w]   = (iter & 1) ? init[w] : (init[w] ^ (rng() & cmask[w]));
                    swap[w]  = rng();
                    smask[w] = rng();
                }
                write(r, off, init, size);
                ASSERT_EQ(AXON_OK, c.masked_cswap(size, cmp, cmask, swap, smask, res,
                                                  ti.base[r] + off, r)) << size;
                EXPECT_EQ(0, memcmp(init, res, size)) << "masked cswap result, " << size;
                model_masked_cswap(words, init, cmp, cmask, swap, smask, expect);
                std::vector<uint8_t> v = read(r, off, size);
                ASSERT_EQ(size, v.size());
                memcpy(got, v.data(), size);
                EXPECT_EQ(0, memcmp(expect, got, size)) << "masked cswap, " << size;

                /* multi-field fetch-and-add on the same location */
                uint64_t add[4], bnd[4];
                for (int w = 0; w < 4; ++w) {
                    add[w] = rng();
                    bnd[w] = rng() & rng();
                }
                memcpy(init, got, size);
                ASSERT_EQ(AXON_OK, c.mfadd(size, add, bnd, res, ti.base[r] + off, r)) << size;
                EXPECT_EQ(0, memcmp(init, res, size)) << "mfadd result, " << size;
                model_mfadd(words, init, add, bnd, expect);
                v = read(r, off, size);
                ASSERT_EQ(size, v.size());
                EXPECT_EQ(0, memcmp(expect, v.data(), size)) << "mfadd, " << size;
            }
        }
    }
}

/* The target sleeps in a blocking read: softib's progress thread answers. */
TEST_P(DeviceAmo, TargetThatOnlySleeps)
{
    ASSERT_NO_FATAL_FAILURE(spawn());
    Client c;
    ASSERT_EQ(AXON_OK, c.start(ti, "device", GetParam()));
    uint64_t one = 1, old = 0;
    /* connected first: the handshake needs the target's progress */
    ASSERT_EQ(AXON_OK, c.atomic(AXON_ATOMIC_ADD, 8, &one, NULL, &old, ti.base[kAlloc], kAlloc));
    send_cmd('B', 0, 0, 0);
    usleep(100000);
    double t0 = axon_test_time();
    for (int i = 0; i < 100; ++i) {
        ASSERT_EQ(AXON_OK, c.atomic(AXON_ATOMIC_ADD, 8, &one, NULL, &old, ti.base[kAlloc],
                                    kAlloc));
        EXPECT_EQ((uint64_t)(i + 1), old);
    }
    uint64_t x = 0x5a5a, cmp[4] = {}, cm[4] = {}, sw[4] = {~0ull, ~0ull, ~0ull, ~0ull};
    uint64_t sm[4] = {1, 2, 3, 4}, res[4];
    ASSERT_EQ(AXON_OK, c.atomic(AXON_ATOMIC_XOR, 4, &x, NULL, &old, ti.base[kUser] + 64, kUser));
    ASSERT_EQ(AXON_OK, c.masked_cswap(32, cmp, cm, sw, sm, res, ti.base[kUser] + 128, kUser));
    EXPECT_EQ(AXON_OK, c.flush());
    printf("[rma_device] 103 atomics in %.3f s while the target slept\n",
           axon_test_time() - t0);
    EXPECT_EQ(101u, read64(kAlloc, 0, 8));
    EXPECT_EQ(0x5a5au, read64(kUser, 64, 4));
    std::vector<uint8_t> v = read(kUser, 128, 32);
    ASSERT_EQ(32u, v.size());
    EXPECT_EQ(0, memcmp(sm, v.data(), 32));
}

struct CounterArgs {
    const TargetInfo *ti;
    int               iters;
    const char       *tls;
};

int counter_main(int fd, void *arg)
{
    const CounterArgs *ca = (const CounterArgs *)arg;
    Client c;
    (void)fd;
    if (c.start(*ca->ti, "device", ca->tls) != AXON_OK) {
        return 2;
    }
    uint64_t one = 1, old = 0;
    uint32_t one32 = 1;
    for (int i = 0; i < ca->iters; ++i) {
        /* 64-bit standard fetch-add on one counter, 32-bit masked add on another */
        if (c.atomic(AXON_ATOMIC_ADD, 8, &one, NULL, &old, ca->ti->base[kAlloc], kAlloc) !=
            AXON_OK) {
            return 3;
        }
        if ((i % 10 == 0) && (c.atomic(AXON_ATOMIC_ADD, 4, &one32, NULL, NULL,
                                       ca->ti->base[kUser] + 4, kUser) != AXON_OK)) {
            return 4;
        }
    }
    if (c.flush() != AXON_OK) {
        return 5;
    }
    c.stop();
    return 0;
}

TEST_P(DeviceAmo, ConcurrentFetchAddsAreExact)
{
    const int kProcs = 4, kIters = 10000;
    ASSERT_NO_FATAL_FAILURE(spawn());
    CounterArgs ca = {&ti, kIters, GetParam()};
    axon_test_peer_t peers[kProcs];
    for (int i = 0; i < kProcs; ++i) {
        ASSERT_EQ(0, axon_test_peer_spawn(&peers[i], counter_main, &ca, kPeerTimeout));
    }
    int failed = 0;
    for (int i = 0; i < kProcs; ++i) {
        int rc = axon_test_peer_wait(&peers[i], kPeerTimeout);
        EXPECT_EQ(0, rc) << "counter process " << i;
        failed += (rc != 0);
    }
    if (failed == 0) {
        EXPECT_EQ((uint64_t)kProcs * kIters, read64(kAlloc, 0, 8));
        EXPECT_EQ((uint64_t)kProcs * (kIters / 10), read64(kUser, 4, 4));
    }
}

/* Without extended atomics only 64-bit ADD and CSWAP are native: the rest is refused. */
TEST_P(DeviceAmo, NoExtAtomicIsUnsupported)
{
    env.set("AXON_SOFTIB_CAP_MASK", "ext_atomic");
    ASSERT_NO_FATAL_FAILURE(spawn());
    Client c;
    ASSERT_EQ(AXON_OK, c.start(ti, "device", GetParam()));
    uint64_t v = 3, old = 0, cmp = 0;
    uint32_t v32 = 3;
    EXPECT_EQ(AXON_OK, c.atomic(AXON_ATOMIC_ADD, 8, &v, NULL, &old, ti.base[kAlloc], kAlloc));
    EXPECT_EQ(AXON_OK, c.atomic(AXON_ATOMIC_CSWAP, 8, &v, &cmp, &old, ti.base[kAlloc] + 8,
                                kAlloc));
    EXPECT_EQ(AXON_OK, c.atomic(AXON_ATOMIC_XOR, 8, &v, NULL, &old, ti.base[kAlloc] + 16,
                                kAlloc)) << "XOR loops on the native 64-bit CSWAP";
    EXPECT_EQ(AXON_ERR_UNSUPPORTED, c.atomic(AXON_ATOMIC_AND, 8, &v, NULL, &old,
                                             ti.base[kAlloc] + 24, kAlloc));
    EXPECT_EQ(AXON_ERR_UNSUPPORTED, c.atomic(AXON_ATOMIC_ADD, 4, &v32, NULL, NULL,
                                             ti.base[kAlloc] + 32, kAlloc));
    uint64_t w[4] = {};
    EXPECT_EQ(AXON_ERR_UNSUPPORTED, c.masked_cswap(16, w, w, w, w, w, ti.base[kAlloc] + 64,
                                                   kAlloc));
    EXPECT_EQ(AXON_ERR_UNSUPPORTED, c.mfadd(8, w, w, w, ti.base[kAlloc] + 64, kAlloc));
    EXPECT_EQ(3u, read64(kAlloc, 0, 8));
    EXPECT_EQ(3u, read64(kAlloc, 8, 8));
    EXPECT_EQ(3u, read64(kAlloc, 16, 8));
    EXPECT_EQ(0u, read64(kAlloc, 24, 8));
}

/* Out of range: refused before the wire, nothing touched. */
TEST_P(DeviceAmo, OutOfRangeFails)
{
    ASSERT_NO_FATAL_FAILURE(spawn());
    Client c;
    ASSERT_EQ(AXON_OK, c.start(ti, "device", GetParam()));
    uint64_t v = 1, old = 0;
    EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, c.atomic(AXON_ATOMIC_ADD, 8, &v, NULL, &old,
                                               ti.base[kAlloc] + kRegionLen, kAlloc));
    EXPECT_EQ(AXON_OK, c.atomic(AXON_ATOMIC_ADD, 8, &v, NULL, &old,
                                ti.base[kAlloc] + kRegionLen - 8, kAlloc));
    EXPECT_EQ(1u, read64(kAlloc, kRegionLen - 8, 8));
}

/* cpu mode: keys keep the CPU executor (no amo lane), atomics as before. */
TEST_P(DeviceAmo, CpuModeUnchanged)
{
    ASSERT_NO_FATAL_FAILURE(spawn("cpu"));
    Client c;
    ASSERT_EQ(AXON_OK, c.start(ti, "cpu", GetParam()));
    EXPECT_EQ(nullptr, c.ep->amo_lane.tl_ep);
    EXPECT_EQ((int)AXON_RKEY_AMO_CPU, (int)c.rkey[kAlloc]->amo);
    uint64_t v = 9, old = 1;
    EXPECT_EQ(AXON_OK, c.atomic(AXON_ATOMIC_ADD, 8, &v, NULL, &old, ti.base[kAlloc], kAlloc));
    EXPECT_EQ(0u, old);
    EXPECT_EQ(9u, read64(kAlloc, 0, 8));
}

}  // namespace

namespace {

INSTANTIATE_TEST_SUITE_P(Tls, DeviceAmo, ::testing::Values("rc", "shm,rc"),
                         [](const ::testing::TestParamInfo<const char *> &info) {
                             return std::string(strchr(info.param, ',') ? "shm_rc" : "rc");
                         });

/*
 * The same process: the atomic loops back through the device (rc to our own
 * worker), also when self carries the rest (the endpoint opens an rc lane
 * for atomics alone).
 */
class DeviceAmoLocal : public ::testing::TestWithParam<const char *> {};

TEST_P(DeviceAmoLocal, SameProcessLoopsThroughDevice)
{
    DevNode node;
    ASSERT_EQ(AXON_OK, node.create("device", GetParam()));
    axon_mem_map_params_t mp = {};
    mp.length = kRegionLen;
    mp.flags  = AXON_MEM_MAP_ALLOCATE;
    axon_mem_h memh = nullptr;
    void      *base = nullptr;
    size_t     len  = 0;
    ASSERT_EQ(AXON_OK, axon_mem_map(node.context, &mp, &memh));
    ASSERT_EQ(AXON_OK, axon_mem_query(memh, &base, &len));
    void  *key = nullptr;
    size_t key_len = 0;
    ASSERT_EQ(AXON_OK, axon_rkey_pack(node.context, memh, &key, &key_len));
    axon_ep_h ep = nullptr;
    ASSERT_EQ(AXON_OK, axon_test_ep_create(node.worker, node.address, node.address_length, &ep));
    ASSERT_NE(nullptr, ep->amo_lane.tl_ep);
    EXPECT_STREQ("rc", ep->amo_lane.resource->tl_name);
    axon_rkey_h rkey = nullptr;
    ASSERT_EQ(AXON_OK, axon_ep_rkey_unpack(ep, key, key_len, &rkey));
    axon_rkey_buffer_release(key);
    EXPECT_EQ((int)AXON_RKEY_AMO_DEVICE, (int)rkey->amo);
    uint64_t one = 1, old = 7;
    for (int i = 0; i < 10; ++i) {
        axon_request_h req = nullptr;
        axon_status_t  st  = axon_atomic_nb(ep, AXON_ATOMIC_ADD, 8, &one, NULL, &old,
                                            (uintptr_t)base, rkey, NULL, &req);
        ASSERT_EQ(AXON_OK, axon_test_wait_req(node.worker, st, req, NULL, kOpTimeout));
        EXPECT_EQ((uint64_t)i, old);
    }
    EXPECT_EQ(10u, *(volatile uint64_t *)base);
    axon_rkey_destroy(rkey);
    axon_test_ep_close(node.worker, ep, AXON_EP_CLOSE_FLUSH, kOpTimeout);
    axon_mem_unmap(node.context, memh);
}

INSTANTIATE_TEST_SUITE_P(Tls, DeviceAmoLocal, ::testing::Values("rc", "self,rc"),
                         [](const ::testing::TestParamInfo<const char *> &info) {
                             return std::string(strchr(info.param, ',') ? "self_rc" : "rc");
                         });

}  // namespace

namespace {

/* guess: device only when every transport AXON_TLS admits has device atomics. */
TEST(DeviceAmoMode, GuessFollowsTheTransports)
{
    DevNode rc_only, mixed, cpu;
    ASSERT_EQ(AXON_OK, rc_only.create("guess", "rc"));
    EXPECT_EQ(1, rc_only.context->amo_device);
    ASSERT_EQ(AXON_OK, mixed.create("guess", "shm,rc"));
    EXPECT_EQ(0, mixed.context->amo_device);
    ASSERT_EQ(AXON_OK, cpu.create("cpu", "rc"));
    EXPECT_EQ(0, cpu.context->amo_device);
}

}  // namespace
