/*
 * What the one-sided suites (test_rma.cc, test_rma_device.cc) share: the
 * lanes, the memory a target maps, the target process and the commands it
 * serves, the initiator's Session, and the models of every atomic.
 *
 * A test plays the initiator; the memory belongs to a target:
 *   self        the test process itself (one worker, an endpoint to its own
 *               address; the memory is ours, so it is checked in place);
 *   shm, tcp,   a forked target process that maps the memory, sends its keys
 *   rc, ud      over the harness socket and then serves commands on it (fill,
 *               check, read, write, guard check, stop progressing, unmap...)
 *               while progressing its worker between them: the initiator
 *               checks the target's memory through it, never through Axon.
 *               rc and ud run over softib (its shm wire between processes).
 * A lane may add configuration, the same in every process of a test:
 * AXON_RMA_PATH=am (every put and get becomes an active message executed by
 * the target, the emulation tcp and ud always use) and AXON_ATOMIC_MODE
 * (device: the rc lane's device executes every atomic; AXON_TLS then names
 * rc after the transport that carries the rest, e.g. "shm,rc").
 *
 * Every target maps four regions: user memory (mmap'd by the test, guard
 * pages filled with kGuardByte around it) and AXON_MEM_MAP_ALLOCATE memory,
 * one big (4 MiB + 8 KiB) and one small (64 KiB) of each. A lane with
 * `shared` maps its user regions with AXON_MEM_MAP_SHARED, both kSharedSkew
 * bytes into their first page: the big one in mmap'd memory, whose partial
 * pages at both ends stay the owner's private memory (peers reach only its
 * whole pages directly), the small one in program data (this program's
 * .bss), whose partial pages move too (peers reach all of it directly).
 * Each region starts
 * filled with a background pattern of its own, so a test knows every byte it
 * did not write.
 *
 * On command, a target also maps a layout over part of its big user region
 * (AXON_MEM_MAP_LAYOUT, test_rma_layout_key.cc): the layout travels as words
 * (layout_wire.h), its key comes back.
 *
 * Everything is in an unnamed namespace: each suite that includes this gets
 * its own copy, so the header needs no source file of its own.
 */
#ifndef AXON_TEST_RMA_ENV_H
#define AXON_TEST_RMA_ENV_H

#include <gtest/gtest.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "axon.h"
#include "axon_int.h"  /* request pool counters: what a test leaves behind */
#include "rma.h"       /* the path a key was unpacked to, for checks that depend on it */
#include "harness.h"
#include "env_guard.h"
#include "layout_wire.h"

namespace {

const double kOpTimeout   = 30.0;  /* one operation, one command */
const double kPeerTimeout = 60.0;  /* a whole peer process */

const uint32_t kFeatures = AXON_FEATURE_TAG | AXON_FEATURE_RMA | AXON_FEATURE_AMO;

/* ---------------------------------------------------------------- regions */

enum { kUserBig, kAllocBig, kUserSmall, kAllocSmall, kRegions };

const size_t   kBigLen    = (4u << 20) + 8192;
const size_t   kSmallLen  = 65536;
const size_t   kGuard     = 4096;   /* before and after user regions */
const uint8_t  kGuardByte = 0xEE;
const uint64_t kBgSeed    = 0xB6000;
const size_t   kSharedSkew = 64;     /* a shared user region's start in its page (atomics
                                      * at the region's start stay aligned) */

/* Program data for the small user region of one shared owner at a time (the others, and
 * every other user region, are mmap'd): the region and its guards in this program's .bss. */
alignas(4096) uint8_t g_program_data[kSmallLen + 2 * kGuard + 4096];
bool                  g_program_data_taken = false;

inline bool region_allocated(int r)
{
    return (r == kAllocBig) || (r == kAllocSmall);
}

inline size_t region_length(int r)
{
    return ((r == kUserBig) || (r == kAllocBig)) ? kBigLen : kSmallLen;
}

inline uint64_t bg_seed(int r)
{
    return kBgSeed + r;
}

inline const char *region_name(int r)
{
    static const char *const names[] = {"user", "allocated", "small user", "small allocated"};
    return names[r];
}

/* Every byte of [p, p + len) is c: memcmp against itself one byte on, which
 * runs at libc's speed whatever the test code is built with. */
inline bool all_bytes_are(const uint8_t *p, size_t len, uint8_t c)
{
    return (len == 0) || ((p[0] == c) && (memcmp(p, p + 1, len - 1) == 0));
}

/* Byte i of a pattern is axon_test_pattern_byte(seed, base + i): the
 * background uses base = offset in the region, data base = 0. */
inline void fill_pat(uint8_t *p, size_t len, uint64_t seed, uint64_t base)
{
    axon_test_fill_at(p, len, seed, (size_t)base);
}

inline int64_t check_pat(const uint8_t *p, size_t len, uint64_t seed, uint64_t base)
{
    return (int64_t)axon_test_check_at(p, len, seed, (size_t)base);
}

/* The background value of size bytes at off of region r (host order). */
inline uint64_t bg_value(int r, uint64_t off, size_t size)
{
    uint8_t  bytes[8];
    uint64_t v = 0;
    fill_pat(bytes, size, bg_seed(r), off);
    memcpy(&v, bytes, size);
    return v;
}

/* ---------------------------------------------------------------- models */

/* The public atomics, as axon.h defines them. */
inline uint64_t model_atomic(axon_atomic_op_t op, size_t size, uint64_t old, uint64_t value,
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

/* Masked compare-and-swap: swaps only if every word matches under its compare mask. */
inline void model_masked_cswap(int words, const uint64_t *old, const uint64_t *compare,
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

/* Multi-field add: a boundary bit is the top bit of a field; bit 63 always is one. */
inline void model_mfadd(int words, const uint64_t *old, const uint64_t *add,
                        const uint64_t *boundary, uint64_t *out)
{
    for (int w = 0; w < words; ++w) {
        uint64_t b   = boundary[w] | (1ull << 63);
        uint64_t res = 0;
        int      lo  = 0;
        for (int bit = 0; bit < 64; ++bit) {
            if (!((b >> bit) & 1)) {
                continue;
            }
            int      width = bit - lo + 1;
            uint64_t fmask = (width == 64) ? ~0ull : (((1ull << width) - 1) << lo);
            uint64_t sum   = ((old[w] & fmask) >> lo) + ((add[w] & fmask) >> lo);
            res |= (sum << lo) & fmask;
            lo   = bit + 1;
        }
        out[w] = res;
    }
}

/* ---------------------------------------------------------------- lanes */

struct RmaParam {
    const char *label;
    const char *tls;          /* AXON_TLS; its first transport carries the lane's messages */
    bool        force_am;     /* AXON_RMA_PATH=am */
    const char *atomic_mode;  /* AXON_ATOMIC_MODE, nullptr: the default (cpu) */
    bool        shared;       /* user regions mapped with AXON_MEM_MAP_SHARED */

    /* The transport the endpoint's messages take: AXON_TLS's first. */
    std::string tl() const
    {
        const char *comma = strchr(tls, ',');
        return comma ? std::string(tls, comma - tls) : std::string(tls);
    }
    bool self() const { return tl() == "self"; }
    /* Atomics executed by the device (of the lane's rc endpoint). */
    bool device_amo() const { return (atomic_mode != nullptr) && !strcmp(atomic_mode, "device"); }
};

inline std::ostream &operator<<(std::ostream &os, const RmaParam &p)
{
    return os << p.label;
}

inline std::string rma_name(const ::testing::TestParamInfo<RmaParam> &info)
{
    return info.param.label;
}

/* A context (the features, TLS, RMA_PATH, ATOMIC_MODE) and one worker with its address. */
struct Node {
    axon_context_h context        = nullptr;
    axon_worker_h  worker         = nullptr;
    void          *address        = nullptr;
    size_t         address_length = 0;

    axon_status_t create(const char *tls, bool force_am = false,
                         const char *atomic_mode = nullptr, uint32_t features = kFeatures)
    {
        axon_config_kv_t      kv[3]  = {{"TLS", tls}};
        axon_context_params_t params = {};
        unsigned              n      = 1;

        if (force_am) {
            kv[n++] = {"RMA_PATH", "am"};
        }
        if (atomic_mode != nullptr) {
            kv[n++] = {"ATOMIC_MODE", atomic_mode};
        }
        params.features     = features;
        params.config       = kv;
        params.config_count = n;
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

    axon_status_t create(const RmaParam &p, uint32_t features = kFeatures)
    {
        return create(p.tls, p.force_am, p.atomic_mode, features);
    }

    /* The worker replaced by a new one of the same context. */
    axon_status_t renew_worker()
    {
        if (address != nullptr) {
            axon_worker_release_address(worker, address);
            address = nullptr;
        }
        axon_worker_destroy(worker);
        worker = nullptr;
        axon_status_t status = axon_worker_create(context, NULL, &worker);
        if (status != AXON_OK) {
            worker = nullptr;
            return status;
        }
        return axon_worker_get_address(worker, &address, &address_length);
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

    ~Node() { destroy(); }
};

/* ---------------------------------------------------------------- the memory owner */

struct Region {
    axon_mem_h           memh       = nullptr;
    uint8_t             *base       = nullptr;  /* what the key covers */
    size_t               length     = 0;
    uint8_t             *raw        = nullptr;  /* user regions: our mapping, guards included */
    size_t               raw_length = 0;
    bool                 program    = false;    /* raw is g_program_data, not mmap'd */
    size_t               skew       = 0;        /* base - (raw + kGuard) */
    std::vector<uint8_t> key;
};

/* What the initiator is told about a region besides its key. */
struct RegionInfo {
    uint64_t base;
    uint64_t length;
};

/* ... and about a layout key: where it was mapped and what axon_mem_query said. */
struct LayoutKeyInfo {
    uint64_t base;
    uint64_t length;
    uint64_t query_address;
    uint64_t query_length;
};

const int64_t kReplyBadMap = -101;  /* a layout key command the owner cannot do (a test bug) */

/* A packed key of memh into key. */
inline axon_status_t pack_key(axon_context_h context, axon_mem_h memh, std::vector<uint8_t> &key)
{
    void  *kbuf  = nullptr;
    size_t ksize = 0;

    axon_status_t status = axon_rkey_pack(context, memh, &kbuf, &ksize);
    if (status != AXON_OK) {
        return status;
    }
    EXPECT_GT(ksize, 0u);
    key.assign(static_cast<uint8_t *>(kbuf), static_cast<uint8_t *>(kbuf) + ksize);
    axon_rkey_buffer_release(kbuf);
    return AXON_OK;
}

/* Maps the regions of one process and does to them what commands ask. */
class Owner {
public:
    Region         region[kRegions];
    axon_context_h context = nullptr;
    bool           shared  = false;   /* user regions: AXON_MEM_MAP_SHARED */

    ~Owner() { unmap_all(); }

    axon_status_t map_all(axon_context_h ctx)
    {
        context = ctx;
        for (int r = 0; r < kRegions; ++r) {
            axon_status_t status = map(r);
            if (status != AXON_OK) {
                ADD_FAILURE() << "mapping the " << region_name(r) << " region: "
                              << axon_status_string(status);
                return status;
            }
        }
        return AXON_OK;
    }

    /* Map region r (again, at the same address for user memory), background-filled. */
    axon_status_t map(int r)
    {
        Region               &g   = region[r];
        size_t                len = region_length(r);
        axon_mem_map_params_t p   = {};

        p.length = len;
        if (region_allocated(r)) {
            p.flags = AXON_MEM_MAP_ALLOCATE;
        } else {
            if (g.raw == nullptr) {
                g.raw_length = len + 2 * kGuard;
                g.program    = shared && (r == kUserSmall) && !g_program_data_taken;
                void *m = g.program ? g_program_data :
                                      mmap(NULL, g.raw_length, PROT_READ | PROT_WRITE,
                                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (m == MAP_FAILED) {
                    g.raw = nullptr;
                    return AXON_ERR_NO_MEMORY;
                }
                g_program_data_taken |= g.program;
                g.raw = static_cast<uint8_t *>(m);
                memset(g.raw, kGuardByte, g.raw_length);
            }
            if (shared) {
                p.flags = AXON_MEM_MAP_SHARED;
                g.skew  = kSharedSkew;
            }
            p.address = g.raw + kGuard + g.skew;
        }
        axon_status_t status = axon_mem_map(context, &p, &g.memh);
        if (status != AXON_OK) {
            g.memh = nullptr;
            return status;
        }
        void  *addr = nullptr;
        size_t qlen = 0;
        status = axon_mem_query(g.memh, &addr, &qlen);
        if (status != AXON_OK) {
            return status;
        }
        EXPECT_GE(qlen, len) << region_name(r);
        if (!region_allocated(r)) {
            EXPECT_EQ(p.address, addr) << "axon_mem_query of mapped user memory";
            EXPECT_EQ(len, qlen);
        } else {
            EXPECT_EQ(0u, (uintptr_t)addr % 4096) << "allocated memory is page aligned";
            const uint8_t *b = static_cast<const uint8_t *>(addr);
            EXPECT_TRUE(all_bytes_are(b, len, 0))
                << "allocated memory is zeroed";
        }
        g.base   = static_cast<uint8_t *>(addr);
        g.length = len;
        fill_pat(g.base, g.length, bg_seed(r), 0);
        return pack(r);
    }

    /* Region r's key (again: the context's workers now). */
    axon_status_t pack(int r)
    {
        return pack_key(context, region[r].memh, region[r].key);
    }

    axon_status_t unmap(int r)
    {
        Region       &g      = region[r];
        axon_status_t status = AXON_OK;
        if (g.memh != nullptr) {
            status = axon_mem_unmap(context, g.memh);
            g.memh = nullptr;
        }
        if (region_allocated(r)) {
            g.base = nullptr;  /* freed with the mapping */
        }
        return status;
    }

    /* Unmap, then map the same user memory again: old keys name a dead token. */
    axon_status_t remap(int r)
    {
        axon_status_t status = unmap(r);
        return (status == AXON_OK) ? map(r) : status;
    }

    void unmap_all()
    {
        for (size_t k = 0; k < layout_keys.size(); ++k) {
            unmap_layout((int)k);
        }
        layout_keys.clear();
        for (int r = 0; r < kRegions; ++r) {
            unmap(r);
            if (region[r].program) {
                g_program_data_taken = false;
                region[r].program    = false;
            } else if (region[r].raw != nullptr) {
                munmap(region[r].raw, region[r].raw_length);
            }
            region[r].raw = nullptr;
        }
    }

    /* ---- layout keys: kCmdMapLayout, kCmdUnmapLayout */

    /* Layout keys mapped so far, by slot (unmapped ones keep their slot, memh NULL). */
    std::vector<Region> layout_keys;

    /*
     * Map layout based at off in user region r, length bytes: its slot (>= 0)
     * with info and key, or a negative axon_status_t.
     */
    int64_t map_layout(int r, uint64_t off, const axon_layout_t &layout, size_t length,
                       LayoutKeyInfo *info)
    {
        if (region_allocated(r) || !in_range(r, off, 0)) {
            return kReplyBadMap;
        }
        axon_mem_map_params_t p = {};
        Region                g;
        p.address = region[r].base + off;
        p.length  = length;
        p.flags   = AXON_MEM_MAP_LAYOUT;
        p.layout  = &layout;
        axon_status_t status = axon_mem_map(context, &p, &g.memh);
        if (status != AXON_OK) {
            return status;
        }
        void  *qaddr = nullptr;
        size_t qlen  = 0;
        status = axon_mem_query(g.memh, &qaddr, &qlen);
        if (status == AXON_OK) {
            status = pack_key(context, g.memh, g.key);
        }
        if (status != AXON_OK) {
            axon_mem_unmap(context, g.memh);
            return status;
        }
        g.base   = static_cast<uint8_t *>(p.address);
        g.length = length;
        *info    = {(uint64_t)(uintptr_t)g.base, length, (uint64_t)(uintptr_t)qaddr, qlen};
        layout_keys.push_back(g);
        return (int64_t)layout_keys.size() - 1;
    }

    int64_t unmap_layout(int slot)
    {
        if ((slot < 0) || ((size_t)slot >= layout_keys.size()) ||
            (layout_keys[slot].memh == nullptr)) {
            return kReplyBadMap;
        }
        axon_status_t status = axon_mem_unmap(context, layout_keys[slot].memh);
        layout_keys[slot].memh = nullptr;
        return status;
    }

    bool in_range(int r, uint64_t off, uint64_t len) const
    {
        return (r >= 0) && (r < kRegions) && (region[r].base != nullptr) &&
               (off <= region[r].length) && (len <= region[r].length - off);
    }

    /* Index of the first guard byte that changed, or -1 (allocated regions have none). */
    int64_t guards(int r) const
    {
        const Region &g = region[r];
        if (g.raw == nullptr) {
            return -1;
        }
        for (size_t i = 0; i < g.raw_length; ++i) {
            if ((i < kGuard + g.skew || i >= kGuard + g.skew + g.length) &&
                (g.raw[i] != kGuardByte)) {
                return (int64_t)i;
            }
        }
        return -1;
    }
};

/* ---------------------------------------------------------------- commands */

enum : uint32_t {
    kCmdFill = 1,   /* pattern (seed, base) into [offset, offset + length) */
    kCmdCheck,      /* reply: first byte that is not the pattern, or -1 */
    kCmdRead,       /* reply: the bytes */
    kCmdWrite,      /* a blob with the bytes follows */
    kCmdGuards,     /* reply: Owner::guards */
    kCmdBlock,      /* reply, then stop progressing until the next command */
    kCmdUnmap,
    kCmdRemap,
    kCmdWaitFlag,   /* progress until the 8 bytes at flag_offset hold flag_value, then check */
    kCmdQuit,
    kCmdMapLayout,    /* the layout's words follow (layout_wire.h); reply: slot or status,
                       * then with a slot the LayoutKeyInfo and the key */
    kCmdUnmapLayout,  /* region: the slot */
};

struct Cmd {
    uint32_t op;
    uint32_t region;
    uint64_t offset;
    uint64_t length;
    uint64_t seed;
    uint64_t base;
    uint64_t flag_offset;
    uint64_t flag_value;
};

const int64_t kReplyBad     = -100;  /* a command the owner cannot do (a test bug) */
const int64_t kReplyNoFlag  = -2;    /* kCmdWaitFlag: the flag never came */
const double  kFlagTimeout  = 10.0;

/* Progress (when given a worker) until the flag shows, then check the data. */
inline int64_t wait_flag(Owner &o, axon_worker_h worker, const Cmd &c)
{
    if (!o.in_range(c.region, c.flag_offset, 8) || (c.flag_offset % 8) ||
        !o.in_range(c.region, c.offset, c.length)) {
        return kReplyBad;
    }
    volatile uint64_t *flag = reinterpret_cast<volatile uint64_t *>(o.region[c.region].base +
                                                                     c.flag_offset);
    double end = axon_test_time() + kFlagTimeout;
    while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) != c.flag_value) {
        if (axon_test_time() > end) {
            return kReplyNoFlag;
        }
        axon_test_progress(worker);
    }
    return check_pat(o.region[c.region].base + c.offset, c.length, c.seed, c.base);
}

/* Commands that need no socket: fill, check, guards, unmap, remap. */
inline int64_t exec_simple(Owner &o, const Cmd &c)
{
    switch (c.op) {
    case kCmdFill:
        if (!o.in_range(c.region, c.offset, c.length)) {
            return kReplyBad;
        }
        fill_pat(o.region[c.region].base + c.offset, c.length, c.seed, c.base);
        return 0;
    case kCmdCheck:
        if (!o.in_range(c.region, c.offset, c.length)) {
            return kReplyBad;
        }
        return check_pat(o.region[c.region].base + c.offset, c.length, c.seed, c.base);
    case kCmdGuards:
        return (c.region < kRegions) ? o.guards(c.region) : kReplyBad;
    case kCmdUnmap:
        return (c.region < kRegions) ? o.unmap(c.region) : kReplyBad;
    case kCmdRemap:
        return (c.region < kRegions) ? o.remap(c.region) : kReplyBad;
    case kCmdUnmapLayout:
        return o.unmap_layout((int)c.region);
    default:
        return kReplyBad;
    }
}

inline int send_reply(int fd, int64_t value)
{
    return axon_test_send_blob(fd, &value, sizeof(value));
}

inline int recv_exact(int fd, void *buf, size_t len)
{
    void  *blob = nullptr;
    size_t got  = 0;
    if (axon_test_recv_blob(fd, &blob, &got) != 0) {
        return -1;
    }
    int ret = (got == len) ? 0 : -1;
    if (ret == 0) {
        memcpy(buf, blob, len);
    }
    free(blob);
    return ret;
}

/* Map the layout the words describe, as c says, then clobber it (the call must copy it). */
inline int64_t map_layout_words(Owner &o, const Cmd &c, const int64_t *words, size_t n,
                                LayoutKeyInfo *info)
{
    WireLayout wl;
    if ((c.region >= kRegions) || !wl.decode(words, n)) {
        return kReplyBadMap;
    }
    int64_t slot = o.map_layout((int)c.region, c.offset, wl.layout, c.length, info);
    wl.clobber();
    return slot;
}

/* kCmdMapLayout in the target: 0, or -1 when the socket failed. */
inline int serve_map_layout(Owner &o, int fd, const Cmd &c)
{
    void         *blob = nullptr;
    size_t        len  = 0;
    LayoutKeyInfo info = {};

    if (axon_test_recv_blob(fd, &blob, &len) != 0) {
        return -1;
    }
    int64_t slot = (len % sizeof(int64_t)) ? kReplyBadMap :
                   map_layout_words(o, c, static_cast<const int64_t *>(blob),
                                    len / sizeof(int64_t), &info);
    free(blob);
    if (send_reply(fd, slot) != 0) {
        return -1;
    }
    if (slot < 0) {
        return 0;
    }
    const std::vector<uint8_t> &key = o.layout_keys[slot].key;
    return ((axon_test_send_blob(fd, &info, sizeof(info)) != 0) ||
            (axon_test_send_blob(fd, key.data(), key.size()) != 0)) ? -1 : 0;
}

/*
 * The target process's loop: progress, and serve each command as it comes.
 * 0 after kCmdQuit, else the step that failed.
 */
inline int serve(Owner &o, int fd, axon_worker_h worker)
{
    bool blocked = false;

    for (;;) {
        struct pollfd pfd = {fd, POLLIN, 0};
        int n = poll(&pfd, 1, blocked ? (int)(kOpTimeout * 1000) : 0);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n == 0) {
            if (blocked) {
                return 10;  /* nobody woke us up */
            }
            axon_test_progress(worker);
            continue;
        }
        blocked = false;
        Cmd c;
        if (recv_exact(fd, &c, sizeof(c)) != 0) {
            return 11;  /* the initiator is gone */
        }
        int ret = 0;
        switch (c.op) {
        case kCmdQuit:
            return send_reply(fd, 0) ? 12 : 0;
        case kCmdRead:
            if (!o.in_range(c.region, c.offset, c.length)) {
                ret = axon_test_send_blob(fd, "", 0);
            } else {
                ret = axon_test_send_blob(fd, o.region[c.region].base + c.offset, c.length);
            }
            break;
        case kCmdWrite: {
            void  *blob = nullptr;
            size_t len  = 0;
            if (axon_test_recv_blob(fd, &blob, &len) != 0) {
                return 13;
            }
            int64_t reply = kReplyBad;
            if (o.in_range(c.region, c.offset, len)) {
                memcpy(o.region[c.region].base + c.offset, blob, len);
                reply = 0;
            }
            free(blob);
            ret = send_reply(fd, reply);
            break;
        }
        case kCmdBlock:
            ret     = send_reply(fd, 0);
            blocked = true;
            break;
        case kCmdWaitFlag:
            ret = send_reply(fd, wait_flag(o, worker, c));
            break;
        case kCmdMapLayout:
            ret = serve_map_layout(o, fd, c);
            break;
        default:
            ret = send_reply(fd, exec_simple(o, c));
            break;
        }
        if (ret != 0) {
            return 14;
        }
    }
}

inline int send_regions(int fd, const Owner &o)
{
    for (int r = 0; r < kRegions; ++r) {
        RegionInfo info = {(uint64_t)(uintptr_t)o.region[r].base, o.region[r].length};
        if ((axon_test_send_blob(fd, &info, sizeof(info)) != 0) ||
            (axon_test_send_blob(fd, o.region[r].key.data(), o.region[r].key.size()) != 0)) {
            return -1;
        }
    }
    return 0;
}

inline int recv_regions(int fd, RegionInfo *info, std::vector<uint8_t> *keys)
{
    for (int r = 0; r < kRegions; ++r) {
        void  *blob = nullptr;
        size_t len  = 0;
        if ((recv_exact(fd, &info[r], sizeof(info[r])) != 0) ||
            (axon_test_recv_blob(fd, &blob, &len) != 0)) {
            return -1;
        }
        keys[r].assign(static_cast<uint8_t *>(blob), static_cast<uint8_t *>(blob) + len);
        free(blob);
    }
    return 0;
}

struct TargetArgs {
    const RmaParam *param;
    uint32_t        features;
};

/* The forked target: a node, the regions, their keys to the initiator, then serve. */
inline int target_main(int fd, void *arg)
{
    const TargetArgs *a = static_cast<const TargetArgs *>(arg);
    Node              node;
    Owner             owner;
    void             *peer_addr;
    size_t            peer_len;

    if (node.create(*a->param, a->features) != AXON_OK) {
        return 2;
    }
    owner.shared = a->param->shared;
    if (axon_test_exchange_address(fd, node.address, node.address_length, &peer_addr,
                                   &peer_len) != 0) {
        return 3;
    }
    free(peer_addr);  /* a passive target: no endpoint of its own */
    if ((owner.map_all(node.context) != AXON_OK) || (send_regions(fd, owner) != 0)) {
        return 4;
    }
    int ret = serve(owner, fd, node.worker);
    owner.unmap_all();
    node.destroy();
    if (ret != 0) {
        fprintf(stderr, "rma target: serve loop ended with %d\n", ret);
        return ret;
    }
    return ::testing::Test::HasFailure() ? 1 : 0;
}

/* What the initiator asks of the memory's owner. */
class TargetApi {
public:
    virtual ~TargetApi() {}
    virtual void                 fill(int r, uint64_t off, uint64_t len, uint64_t seed,
                                      uint64_t base) = 0;
    virtual int64_t              check(int r, uint64_t off, uint64_t len, uint64_t seed,
                                       uint64_t base) = 0;
    virtual std::vector<uint8_t> read(int r, uint64_t off, uint64_t len) = 0;
    virtual void                 write(int r, uint64_t off, const void *data, size_t len) = 0;
    virtual int64_t              guards(int r) = 0;
    /* Stop progressing until the next command (nothing in self mode). */
    virtual void                 block() = 0;
    virtual int64_t              unmap(int r) = 0;
    virtual int64_t              remap(int r) = 0;
    /* Start waiting for a flag (progressing), then the data check's result. */
    virtual void                 wait_flag_begin(int r, uint64_t flag_off, uint64_t flag_value,
                                                 uint64_t off, uint64_t len, uint64_t seed) = 0;
    virtual int64_t              wait_flag_end() = 0;
    virtual void                 quit() = 0;
    /* Map layout based at off in user region r, length its size: a slot (>= 0) with
     * info and key, or a negative axon_status_t. */
    virtual int64_t              map_layout(int r, uint64_t off, const axon_layout_t &layout,
                                            size_t length, LayoutKeyInfo *info,
                                            std::vector<uint8_t> *key) = 0;
    virtual int64_t              unmap_layout(int slot) = 0;

    /* Background-fill again (after a test wrote there). */
    void restore(int r, uint64_t off, uint64_t len) { fill(r, off, len, bg_seed(r), off); }
    /* Does [off, off + len) still hold the background? -1 if so. */
    int64_t check_bg(int r, uint64_t off, uint64_t len)
    {
        return check(r, off, len, bg_seed(r), off);
    }
};

inline Cmd make_cmd(uint32_t op, int r, uint64_t off = 0, uint64_t len = 0, uint64_t seed = 0,
                    uint64_t base = 0)
{
    Cmd c = {};
    c.op     = op;
    c.region = (uint32_t)r;
    c.offset = off;
    c.length = len;
    c.seed   = seed;
    c.base   = base;
    return c;
}

/* self: the memory is ours. */
class LocalTarget : public TargetApi {
public:
    LocalTarget(Owner &o, axon_worker_h w) : o_(o), worker_(w) {}

    void fill(int r, uint64_t off, uint64_t len, uint64_t seed, uint64_t base) override
    {
        EXPECT_EQ(0, exec_simple(o_, make_cmd(kCmdFill, r, off, len, seed, base)));
    }
    int64_t check(int r, uint64_t off, uint64_t len, uint64_t seed, uint64_t base) override
    {
        return exec_simple(o_, make_cmd(kCmdCheck, r, off, len, seed, base));
    }
    std::vector<uint8_t> read(int r, uint64_t off, uint64_t len) override
    {
        if (!o_.in_range(r, off, len)) {
            ADD_FAILURE() << "read out of the region";
            return {};
        }
        return std::vector<uint8_t>(o_.region[r].base + off, o_.region[r].base + off + len);
    }
    void write(int r, uint64_t off, const void *data, size_t len) override
    {
        ASSERT_TRUE(o_.in_range(r, off, len));
        memcpy(o_.region[r].base + off, data, len);
    }
    int64_t guards(int r) override { return o_.guards(r); }
    void    block() override {}
    int64_t unmap(int r) override { return o_.unmap(r); }
    int64_t remap(int r) override { return o_.remap(r); }
    void    wait_flag_begin(int r, uint64_t flag_off, uint64_t flag_value, uint64_t off,
                            uint64_t len, uint64_t seed) override
    {
        flag_cmd_             = make_cmd(kCmdWaitFlag, r, off, len, seed, 0);
        flag_cmd_.flag_offset = flag_off;
        flag_cmd_.flag_value  = flag_value;
    }
    int64_t wait_flag_end() override { return wait_flag(o_, worker_, flag_cmd_); }
    void    quit() override {}
    /* Through the words as well, so the layout the call sees is gone after it. */
    int64_t map_layout(int r, uint64_t off, const axon_layout_t &layout, size_t length,
                       LayoutKeyInfo *info, std::vector<uint8_t> *key) override
    {
        std::vector<int64_t> words;
        layout_encode(layout, words);
        int64_t slot = map_layout_words(o_, make_cmd(kCmdMapLayout, r, off, length),
                                        words.data(), words.size(), info);
        if (slot >= 0) {
            *key = o_.layout_keys[slot].key;
        }
        return slot;
    }
    int64_t unmap_layout(int slot) override { return o_.unmap_layout(slot); }

private:
    Owner        &o_;
    axon_worker_h worker_;
    Cmd           flag_cmd_ = {};
};

/* A forked target, driven over the harness socket. */
class RemoteTarget : public TargetApi {
public:
    RemoteTarget(int fd, axon_worker_h worker) : fd_(fd), worker_(worker) {}

    void fill(int r, uint64_t off, uint64_t len, uint64_t seed, uint64_t base) override
    {
        EXPECT_EQ(0, call(make_cmd(kCmdFill, r, off, len, seed, base)));
    }
    int64_t check(int r, uint64_t off, uint64_t len, uint64_t seed, uint64_t base) override
    {
        return call(make_cmd(kCmdCheck, r, off, len, seed, base));
    }
    std::vector<uint8_t> read(int r, uint64_t off, uint64_t len) override
    {
        Cmd                  c = make_cmd(kCmdRead, r, off, len);
        void                *blob = nullptr;
        size_t               got  = 0;
        std::vector<uint8_t> out;
        if ((axon_test_send_blob(fd_, &c, sizeof(c)) != 0) ||
            (axon_test_recv_blob(fd_, &blob, &got) != 0)) {
            ADD_FAILURE() << "the target does not answer";
            return out;
        }
        EXPECT_EQ(len, got) << "read out of the region";
        out.assign(static_cast<uint8_t *>(blob), static_cast<uint8_t *>(blob) + got);
        free(blob);
        return out;
    }
    void write(int r, uint64_t off, const void *data, size_t len) override
    {
        Cmd     c     = make_cmd(kCmdWrite, r, off, len);
        int64_t reply = kReplyBad;
        if ((axon_test_send_blob(fd_, &c, sizeof(c)) != 0) ||
            (axon_test_send_blob(fd_, data, len) != 0) ||
            (recv_exact(fd_, &reply, sizeof(reply)) != 0)) {
            ADD_FAILURE() << "the target does not answer";
            return;
        }
        EXPECT_EQ(0, reply) << "write out of the region";
    }
    int64_t guards(int r) override { return call(make_cmd(kCmdGuards, r)); }
    void    block() override { EXPECT_EQ(0, call(make_cmd(kCmdBlock, 0))); }
    int64_t unmap(int r) override { return call(make_cmd(kCmdUnmap, r)); }
    int64_t remap(int r) override { return call(make_cmd(kCmdRemap, r)); }
    void    wait_flag_begin(int r, uint64_t flag_off, uint64_t flag_value, uint64_t off,
                            uint64_t len, uint64_t seed) override
    {
        Cmd c         = make_cmd(kCmdWaitFlag, r, off, len, seed, 0);
        c.flag_offset = flag_off;
        c.flag_value  = flag_value;
        EXPECT_EQ(0, axon_test_send_blob(fd_, &c, sizeof(c)));
    }
    /* A put not flushed yet may need our progress to leave (ud's window). */
    int64_t wait_flag_end() override
    {
        int64_t       reply = kReplyBad;
        struct pollfd pfd   = {fd_, POLLIN, 0};
        double        end   = axon_test_time() + kOpTimeout;
        while ((poll(&pfd, 1, 0) == 0) && (axon_test_time() < end)) {
            axon_test_progress(worker_);
        }
        EXPECT_EQ(0, recv_exact(fd_, &reply, sizeof(reply)));
        return reply;
    }
    void quit() override { EXPECT_EQ(0, call(make_cmd(kCmdQuit, 0))); }
    int64_t map_layout(int r, uint64_t off, const axon_layout_t &layout, size_t length,
                       LayoutKeyInfo *info, std::vector<uint8_t> *key) override
    {
        Cmd                  c     = make_cmd(kCmdMapLayout, r, off, length);
        int64_t              slot  = kReplyBad;
        void                *blob  = nullptr;
        size_t               got   = 0;
        std::vector<int64_t> words;
        layout_encode(layout, words);
        if ((axon_test_send_blob(fd_, &c, sizeof(c)) != 0) ||
            (axon_test_send_blob(fd_, words.data(), words.size() * sizeof(words[0])) != 0) ||
            (recv_exact(fd_, &slot, sizeof(slot)) != 0) ||
            ((slot >= 0) && ((recv_exact(fd_, info, sizeof(*info)) != 0) ||
                             (axon_test_recv_blob(fd_, &blob, &got) != 0)))) {
            ADD_FAILURE() << "the target does not answer kCmdMapLayout";
            return kReplyBad;
        }
        if (slot >= 0) {
            key->assign(static_cast<uint8_t *>(blob), static_cast<uint8_t *>(blob) + got);
            free(blob);
        }
        return slot;
    }
    int64_t unmap_layout(int slot) override { return call(make_cmd(kCmdUnmapLayout, slot)); }

private:
    int64_t call(const Cmd &c)
    {
        int64_t reply = kReplyBad;
        if ((axon_test_send_blob(fd_, &c, sizeof(c)) != 0) ||
            (recv_exact(fd_, &reply, sizeof(reply)) != 0)) {
            ADD_FAILURE() << "the target does not answer command " << c.op;
        }
        return reply;
    }

    int           fd_;
    axon_worker_h worker_;
};

/* ---------------------------------------------------------------- the initiator */

/* Final status of an operation whose initiating call returned status. */
inline axon_status_t finish_op(axon_worker_h worker, axon_status_t status, axon_request_h req,
                               double timeout = kOpTimeout)
{
    return axon_test_wait_req(worker, status, req, NULL, timeout);
}

/*
 * One test's initiator: its node, an endpoint to the target, the target's
 * regions and their keys unpacked on the endpoint, and the operations.
 */
class Session {
public:
    RmaParam                   param    = {};
    Node                       node;
    axon_ep_h                  ep       = nullptr;
    axon_test_peer_t           peer     = {-1, -1};
    bool                       self     = false;
    Owner                      local;            /* self: the memory */
    std::unique_ptr<TargetApi> target;
    RegionInfo                 info[kRegions] = {};
    std::vector<uint8_t>       keys[kRegions];
    axon_rkey_h                rkey[kRegions] = {};
    TargetArgs                 targs = {};
    std::vector<uint8_t>       peer_address;     /* what ep was created from */

    ~Session() { abort(); }

    /* Fork the target (before any Axon object here), connect, unpack its keys. */
    void start(const RmaParam &p, uint32_t features = kFeatures)
    {
        ASSERT_NO_FATAL_FAILURE(spawn_target(p, features));
        ASSERT_NO_FATAL_FAILURE(connect(p, features));
    }

    /* start's halves: the target forked (its environment is ours now), ... */
    void spawn_target(const RmaParam &p, uint32_t features = kFeatures)
    {
        param = p;
        self  = p.self();
        targs = {&param, features};
        if (!self) {
            ASSERT_EQ(0, axon_test_peer_spawn(&peer, target_main, &targs, kPeerTimeout));
        }
    }

    /* ... then our node, the endpoint and the keys. */
    void connect(const RmaParam &p, uint32_t features = kFeatures)
    {
        ASSERT_EQ(AXON_OK, node.create(p, features));
        if (self) {
            local.shared = p.shared;
            ASSERT_EQ(AXON_OK, local.map_all(node.context));
            for (int r = 0; r < kRegions; ++r) {
                info[r] = {(uint64_t)(uintptr_t)local.region[r].base, local.region[r].length};
                keys[r] = local.region[r].key;
            }
            const uint8_t *a = static_cast<const uint8_t *>(node.address);
            peer_address.assign(a, a + node.address_length);
            target.reset(new LocalTarget(local, node.worker));
        } else {
            void  *addr;
            size_t len;
            ASSERT_EQ(0, axon_test_exchange_address(peer.fd, node.address, node.address_length,
                                                    &addr, &len));
            peer_address.assign(static_cast<uint8_t *>(addr), static_cast<uint8_t *>(addr) + len);
            free(addr);
            ASSERT_EQ(0, recv_regions(peer.fd, info, keys)) << "the target's keys";
            target.reset(new RemoteTarget(peer.fd, node.worker));
        }
        ASSERT_EQ(AXON_OK, axon_test_ep_create(node.worker, peer_address.data(),
                                               peer_address.size(), &ep));
        axon_ep_attr_t attr;
        ASSERT_EQ(AXON_OK, axon_ep_query(ep, &attr));
        EXPECT_EQ(p.tl(), attr.small_tl);
        ASSERT_NO_FATAL_FAILURE(unpack_keys());
    }

    /* The target's keys on ep; device mode: atomics go by the device of an rc lane. */
    void unpack_keys()
    {
        for (int r = 0; r < kRegions; ++r) {
            ASSERT_EQ(AXON_OK, axon_ep_rkey_unpack(ep, keys[r].data(), keys[r].size(),
                                                   &rkey[r])) << region_name(r);
            if (param.device_amo()) {
                EXPECT_EQ((int)AXON_RKEY_AMO_DEVICE, (int)rkey[r]->amo) << region_name(r);
            } else {
                EXPECT_EQ((int)AXON_RKEY_AMO_CPU, (int)rkey[r]->amo) << region_name(r);
            }
        }
        if (param.device_amo()) {
            ASSERT_NE(nullptr, ep->amo_lane.tl_ep) << "no lane with device atomics";
            /* the RDMA transport named in AXON_TLS: rc, rc connected by rdmacm, or dc */
            EXPECT_STREQ(strstr(param.tls, "rdmacm") ? "rdmacm" :
                         strstr(param.tls, "dc") ? "dc" : "rc",
                         ep->amo_lane.resource->tl_name);
        } else {
            EXPECT_EQ(nullptr, ep->amo_lane.tl_ep) << "cpu mode: no amo lane";
        }
    }

    /*
     * A new worker (same context) with an endpoint to the target and the
     * keys unpacked again: after an operation broke the endpoint (rc: a
     * remote access error leaves the QP in error). A worker keeps a peer
     * that failed failed, so a new endpoint from the same worker would not
     * do. Self: the keys are packed again for the new worker.
     */
    void reconnect()
    {
        for (axon_rkey_h &k : rkey) {
            axon_rkey_destroy(k);
            k = nullptr;
        }
        if (ep != nullptr) {
            axon_test_ep_close(node.worker, ep, AXON_EP_CLOSE_FORCE, kOpTimeout);
            ep = nullptr;
        }
        ASSERT_EQ(AXON_OK, node.renew_worker());
        if (self) {
            const uint8_t *a = static_cast<const uint8_t *>(node.address);
            peer_address.assign(a, a + node.address_length);
            for (int r = 0; r < kRegions; ++r) {
                if (local.region[r].memh != nullptr) {
                    ASSERT_EQ(AXON_OK, local.pack(r));
                    keys[r] = local.region[r].key;
                }
            }
            target.reset(new LocalTarget(local, node.worker));
        } else {
            target.reset(new RemoteTarget(peer.fd, node.worker));
        }
        ASSERT_EQ(AXON_OK, axon_test_ep_create(node.worker, peer_address.data(),
                                               peer_address.size(), &ep));
        ASSERT_NO_FATAL_FAILURE(unpack_keys());
    }

    /* The orderly end: keys, endpoint (flushed), target, node; nothing left behind. */
    void finish(bool ep_may_fail = false)
    {
        for (axon_rkey_h &k : rkey) {
            if (k != nullptr) {
                axon_rkey_destroy(k);
                k = nullptr;
            }
        }
        if (ep != nullptr) {
            axon_status_t status = axon_test_ep_close(node.worker, ep, AXON_EP_CLOSE_FLUSH,
                                                      kOpTimeout);
            if (!ep_may_fail) {
                EXPECT_EQ(AXON_OK, status) << "closing the endpoint";
            }
            ep = nullptr;
        }
        if (target) {
            target->quit();
        }
        if (!self && (peer.pid > 0)) {
            EXPECT_EQ(0, axon_test_peer_wait(&peer, kPeerTimeout)) << "the target failed";
        }
        local.unmap_all();
        if (node.worker != nullptr) {
            axon_worker_h w = node.worker;
            axon_test_progress_for(w, 0.005);
            EXPECT_EQ(0u, w->req_mp.num_elems - w->req_mp.num_free)
                << "requests not returned to the pool";
        }
        node.destroy();
        target.reset();
    }

    /* Whatever is left after a failure: no waiting on the target. */
    void abort()
    {
        for (axon_rkey_h &k : rkey) {
            if (k != nullptr) {
                axon_rkey_destroy(k);
                k = nullptr;
            }
        }
        if (ep != nullptr) {
            axon_test_ep_close(node.worker, ep, AXON_EP_CLOSE_FORCE, 1.0);
            ep = nullptr;
        }
        axon_test_peer_kill(&peer);
        local.unmap_all();
        node.destroy();
        target.reset();
    }

    uint64_t addr(int r, uint64_t off) const { return info[r].base + off; }
    axon_rma_path_t path(int r) const { return rkey[r]->path; }

    axon_status_t wait(axon_status_t status, axon_request_h req, double timeout = kOpTimeout)
    {
        return finish_op(node.worker, status, req, timeout);
    }

    /* Start an operation, retrying while the transport is out of resources. */
    axon_status_t start_op(std::function<axon_status_t(axon_request_h *)> fn,
                           axon_request_h *req_p)
    {
        double end = axon_test_time() + kOpTimeout;
        for (;;) {
            *req_p = nullptr;
            axon_status_t status = fn(req_p);
            if ((status != AXON_ERR_NO_RESOURCE) || (axon_test_time() > end)) {
                return status;
            }
            axon_test_progress(node.worker);
        }
    }

    axon_status_t run(std::function<axon_status_t(axon_request_h *)> fn,
                      double timeout = kOpTimeout)
    {
        axon_request_h req    = nullptr;
        axon_status_t  status = start_op(fn, &req);
        return wait(status, req, timeout);
    }

    axon_status_t put(const void *buf, size_t len, uint64_t raddr, axon_rkey_h rk,
                      double timeout = kOpTimeout)
    {
        return run([&](axon_request_h *r) {
            return axon_put_nb(ep, buf, len, raddr, rk, NULL, r);
        }, timeout);
    }

    axon_status_t get(void *buf, size_t len, uint64_t raddr, axon_rkey_h rk,
                      double timeout = kOpTimeout)
    {
        return run([&](axon_request_h *r) {
            return axon_get_nb(ep, buf, len, raddr, rk, NULL, r);
        }, timeout);
    }

    axon_status_t flush(double timeout = kOpTimeout)
    {
        return run([&](axon_request_h *r) { return axon_ep_flush_nb(ep, NULL, r); }, timeout);
    }

    axon_status_t atomic(axon_atomic_op_t op, size_t size, const void *value,
                         const void *compare, void *result, uint64_t raddr, axon_rkey_h rk,
                         double timeout = kOpTimeout)
    {
        return run([&](axon_request_h *r) {
            return axon_atomic_nb(ep, op, size, value, compare, result, raddr, rk, NULL, r);
        }, timeout);
    }

    axon_status_t masked_cswap(size_t size, const uint64_t *cmp, const uint64_t *cmask,
                               const uint64_t *swap, const uint64_t *smask, uint64_t *result,
                               uint64_t raddr, axon_rkey_h rk, double timeout = kOpTimeout)
    {
        return run([&](axon_request_h *r) {
            return axon_atomic_masked_cswap_nb(ep, size, cmp, cmask, swap, smask, result, raddr,
                                               rk, NULL, r);
        }, timeout);
    }

    axon_status_t mfadd(size_t size, const uint64_t *add, const uint64_t *boundary,
                        uint64_t *result, uint64_t raddr, axon_rkey_h rk,
                        double timeout = kOpTimeout)
    {
        return run([&](axon_request_h *r) {
            return axon_atomic_mfadd_nb(ep, size, add, boundary, result, raddr, rk, NULL, r);
        }, timeout);
    }
};

/* Ranges outside a key's [B, B + L): each side, across each edge, too long, wrapping. */
struct OutsideRange {
    uint64_t    addr;
    size_t      len;
    const char *what;
};

inline std::vector<OutsideRange> outside_ranges(uint64_t B, uint64_t L)
{
    return {
        {B + L, 1, "one byte past the end"},
        {B - 1, 1, "one byte before the start"},
        {B + L - 3, 4, "across the end"},
        {B - 2, 4, "across the start"},
        {B, (size_t)L + 1, "one byte longer than the region"},
        {B + 8, SIZE_MAX / 2, "a huge length"},
        {UINT64_MAX - 3, 8, "an address that wraps"},
        {B + 8, (size_t)(UINT64_MAX - 7), "address + length wraps"},
    };
}

/* Fetch-add of 8 bytes, the operation several tests use to see a key work. */
inline axon_status_t fetch_add8(Session &s, uint64_t raddr, axon_rkey_h rk, uint64_t *result)
{
    uint64_t one = 1;
    return s.atomic(AXON_ATOMIC_ADD, 8, &one, NULL, result, raddr, rk);
}

}  // namespace

#endif
