/*
 * Layout keys (AXON_MEM_MAP_LAYOUT) over every lane, written from axon.h:
 * the target maps a layout over part of its big user region and the
 * initiator addresses the layout's packed bytes as one range. Each kind of
 * layout (layout_cases.h), small and large, put and get, whole and in part,
 * from a contiguous buffer or through a local layout, checked byte by byte
 * against a model written here (the region's background with the data
 * placed piece by piece), so a byte written between the pieces or around
 * them shows; ranges outside the key, keys used after the unmap, atomics
 * inside one piece and across two; bad maps and the line naming their
 * value; axon_mem_query.
 *
 * The target maps the layout from words (rma_env.h's kCmdMapLayout) and
 * clobbers them once mapped, so the call must have copied the layout.
 */
#include <gtest/gtest.h>

#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <initializer_list>
#include <string>
#include <vector>

#include "rma_env.h"
#include "layout_cases.h"
#include "log_capture.h"

namespace {

const int      kHost   = kUserBig;  /* the target's region the layouts lie over */
const uint64_t kMargin = 4096;      /* background checked on each side of a layout */
const uint8_t  kSentinel = 0x5A;    /* around a get's buffer */
/* softib's max_klm_list (axon_info -d): a layout of at most this many pieces fits one
 * indirect key; a longer one is a key over the keys of its parts (two levels). */
const size_t   kUmrListMax = 4096;

/* A layout the target mapped, with its pieces as the reference has them. */
struct KeyedLayout {
    std::vector<LayoutPiece> pieces;     /* packed order, offsets from the base */
    size_t                   size = 0;
    uint64_t                 off  = 0;   /* the base's offset in kHost */
    uint64_t                 wbeg = 0;   /* the window checked: the extent and margins */
    uint64_t                 wlen = 0;
    size_t                   entries = 0;  /* a device key's entries at least (compact form) */
    int64_t                  slot = -1;
    LayoutKeyInfo            info = {};
    std::vector<uint8_t>     key;
    axon_rkey_h              rk   = nullptr;

    KeyedLayout() {}
    KeyedLayout(const KeyedLayout &) = delete;
    KeyedLayout &operator=(const KeyedLayout &) = delete;
    ~KeyedLayout() { drop_key(); }

    void drop_key()
    {
        if (rk != nullptr) {
            axon_rkey_destroy(rk);
            rk = nullptr;
        }
    }

    uint64_t addr(uint64_t k) const { return info.base + k; }

    /* Index in the window of the byte at offset o from the base. */
    size_t at(ptrdiff_t o) const { return (size_t)((ptrdiff_t)(off - wbeg) + o); }

    /* Copy between packed bytes [k, k + n) and a window image, piece by piece. */
    template <typename Fn>
    void each_run(size_t k, size_t n, Fn fn) const
    {
        size_t pos = 0;
        for (const LayoutPiece &p : pieces) {
            size_t from = std::max(pos, k), to = std::min(pos + p.length, k + n);
            if (from < to) {
                fn(at(p.offset + (ptrdiff_t)(from - pos)), from - k, to - from);
            }
            pos += p.length;
        }
    }
    void place(std::vector<uint8_t> &image, size_t k, const uint8_t *data, size_t n) const
    {
        each_run(k, n, [&](size_t w, size_t d, size_t len) { memcpy(&image[w], data + d, len); });
    }
    std::vector<uint8_t> gather(const std::vector<uint8_t> &image, size_t k, size_t n) const
    {
        std::vector<uint8_t> out(n);
        each_run(k, n, [&](size_t w, size_t d, size_t len) { memcpy(&out[d], &image[w], len); });
        return out;
    }

    /* The piece packed bytes [k, k + n) lie in, or -1 if not all in one. */
    int piece_of(size_t k, size_t n) const
    {
        size_t pos = 0;
        for (size_t j = 0; j < pieces.size(); ++j) {
            if ((k >= pos) && (k + n <= pos + pieces[j].length)) {
                return (int)j;
            }
            pos += pieces[j].length;
        }
        return -1;
    }

    /* Where window byte i is, in words. */
    std::string describe(size_t i) const
    {
        ptrdiff_t o   = (ptrdiff_t)(wbeg + i) - (ptrdiff_t)off;
        size_t    pos = 0;
        for (size_t j = 0; j < pieces.size(); ++j) {
            if ((o >= pieces[j].offset) && (o < pieces[j].offset + (ptrdiff_t)pieces[j].length)) {
                return "offset " + std::to_string(o) + " from the base (piece " +
                       std::to_string(j) + ", packed byte " +
                       std::to_string(pos + (size_t)(o - pieces[j].offset)) + ")";
            }
            pos += pieces[j].length;
        }
        return "offset " + std::to_string(o) + " from the base (outside every piece)";
    }
};

/* Index of the first byte where a and b differ (sizes too), or -1. */
inline int64_t first_diff(const std::vector<uint8_t> &a, const std::vector<uint8_t> &b)
{
    if (a.size() != b.size()) {
        return (int64_t)std::min(a.size(), b.size());
    }
    auto m = std::mismatch(a.begin(), a.end(), b.begin());
    return (m.first == a.end()) ? -1 : (int64_t)(m.first - a.begin());
}

/* Some line names the call and contains one of the words. */
inline bool logged(const LogCapture &log, std::initializer_list<const char *> words)
{
    for (const std::string &line : log.lines) {
        if (line.find("axon_mem_map") == std::string::npos) {
            continue;
        }
        for (const char *w : words) {
            if (line.find(w) != std::string::npos) {
                return true;
            }
        }
    }
    return false;
}

inline std::string lines_of(const LogCapture &log)
{
    std::string all;
    for (const std::string &line : log.lines) {
        all += "\n  " + line;
    }
    return all.empty() ? " (none)" : all;
}

/*
 * The entries a device key of a layout_cases.h kind needs at least: strided
 * of strided repeats its five inner blocks a forward stride apart; the
 * others go down in memory, so every piece is an entry.
 */
inline size_t kind_entries(int kind)
{
    return (kind == kLayoutStridedStrided) ? 5 : SIZE_MAX;
}

class RmaLayoutKey : public ::testing::TestWithParam<RmaParam> {
protected:
    /* shm_cma: single copy into pieces of any size (the default takes pieces of 2 KiB and
     * more on average: smaller ones go by messages). Set before the target forks. */
    EnvGuard cma_min_{"AXON_SHM_LAYOUT_CMA_MIN",
                      (std::string(GetParam().label) == "shm_cma") ? "0" : nullptr};
    Session  s_;

    /* rc, dc: RDMA through one indirect key; a refused access breaks the endpoint. */
    bool rdma() const
    {
        return ((GetParam().tl() == "rc") || (GetParam().tl() == "dc")) && !GetParam().force_am;
    }

    /* shm reaches the pieces by cross-memory attach (the owner's slot names them) */
    bool cma() const
    {
        return (GetParam().tl() == "shm") && !GetParam().force_am;
    }

    /* ... when they hold AXON_SHM_LAYOUT_CMA_MIN bytes on average (2 KiB; shm_cma: 0) */
    bool cma_for(const KeyedLayout &kl) const
    {
        size_t pieces = 0;

        for (const LayoutPiece &p : kl.pieces) {
            pieces += (p.length > 0);
        }
        return cma() && ((std::string(GetParam().label) == "shm_cma") ||
                         ((pieces > 0) && (kl.size / pieces >= 2048)));
    }

    /*
     * Have the target map layout (pieces: the reference's list) over kHost,
     * its base shift bytes past a page with room for the extent below it,
     * and unpack its key. axon_mem_query must give the base and the size.
     * entries: what a device key needs at least (a repeated form needs fewer
     * than the pieces).
     */
    void map(KeyedLayout &kl, const axon_layout_t &layout, const std::vector<LayoutPiece> &pieces,
             uint64_t shift = 0, size_t entries = SIZE_MAX)
    {
        ptrdiff_t lo = 0, hi = 0;
        kl.pieces  = pieces;
        kl.size    = 0;
        kl.entries = 0;
        for (const LayoutPiece &p : pieces) {
            kl.size    += p.length;
            kl.entries += (p.length > 0);
            if (p.length > 0) {
                lo = std::min(lo, p.offset);
                hi = std::max(hi, p.offset + (ptrdiff_t)p.length);
            }
        }
        kl.entries = std::min(kl.entries, entries);
        kl.off  = kMargin + (((uint64_t)-lo + 4095) & ~(uint64_t)4095) + shift;
        kl.wbeg = kl.off + lo - kMargin;
        kl.wlen = (uint64_t)(hi - lo) + 2 * kMargin;
        ASSERT_LE(kl.wbeg + kl.wlen, kBigLen) << "the layout does not fit in the region";
        kl.slot = s_.target->map_layout(kHost, kl.off, layout, kl.size, &kl.info, &kl.key);
        ASSERT_GE(kl.slot, 0) << "mapping the layout: "
                              << axon_status_string((axon_status_t)kl.slot);
        EXPECT_EQ(s_.addr(kHost, kl.off), kl.info.base);
        EXPECT_EQ(kl.info.base, kl.info.query_address) << "axon_mem_query: the layout's base";
        EXPECT_EQ(kl.size, kl.info.query_length) << "axon_mem_query: the layout's size";
        ASSERT_NO_FATAL_FAILURE(unpack(kl));
    }

    /*
     * Unpack kl's key on the endpoint: never LOCAL; rc and dc: RDMA through
     * one indirect key (past the device's list, a key over keys of its
     * parts); shm: cross-memory attach into the pieces; else the target.
     */
    void unpack(KeyedLayout &kl)
    {
        ASSERT_EQ(AXON_OK, axon_ep_rkey_unpack(s_.ep, kl.key.data(), kl.key.size(), &kl.rk));
        if (rdma()) {
            EXPECT_EQ((int)AXON_RMA_PATH_ZCOPY, (int)kl.rk->path)
                << "one indirect key of " << kl.entries << " entries"
                << ((kl.entries > kUmrListMax) ? " (nested: past softib's list)" : "");
            if (GetParam().device_amo()) {
                EXPECT_EQ((int)AXON_RKEY_AMO_DEVICE, (int)kl.rk->amo) << "device atomics";
            }
        } else if (cma_for(kl)) {
            EXPECT_EQ((int)AXON_RMA_PATH_ZCOPY, (int)kl.rk->path)
                << "cross-memory attach into the " << kl.entries << " entries' pieces";
        } else {
            EXPECT_EQ((int)AXON_RMA_PATH_AM, (int)kl.rk->path) << "the target places the pieces";
        }
    }

    void unmap(KeyedLayout &kl)
    {
        kl.drop_key();
        EXPECT_EQ(AXON_OK, s_.target->unmap_layout((int)kl.slot));
    }

    /* The window as a pattern would fill it (the background: kHost's own). */
    std::vector<uint8_t> image(const KeyedLayout &kl, uint64_t seed) const
    {
        std::vector<uint8_t> img(kl.wlen);
        fill_pat(img.data(), img.size(), seed, kl.wbeg);
        return img;
    }
    std::vector<uint8_t> background(const KeyedLayout &kl) const
    {
        return image(kl, bg_seed(kHost));
    }

    /* "" if the target's window is want, else the first byte that is not. */
    std::string check_window(const KeyedLayout &kl, const std::vector<uint8_t> &want)
    {
        std::vector<uint8_t> got = s_.target->read(kHost, kl.wbeg, kl.wlen);
        int64_t              i   = first_diff(got, want);
        if (i < 0) {
            return "";
        }
        if ((size_t)i >= std::min(got.size(), want.size())) {
            return "read " + std::to_string(got.size()) + " bytes of the window";
        }
        return "target byte at " + kl.describe((size_t)i) + " is " + std::to_string(got[i]) +
               ", not " + std::to_string(want[i]);
    }

    void restore(const KeyedLayout &kl) { s_.target->restore(kHost, kl.wbeg, kl.wlen); }

    /* A put, flushed when it succeeded: a put's failure may show only there. */
    axon_status_t put_flushed(const void *buf, size_t len, uint64_t raddr, axon_rkey_h rk,
                              const axon_request_param_t *param = nullptr)
    {
        axon_status_t status = s_.run([&](axon_request_h *r) {
            return axon_put_nb(s_.ep, buf, len, raddr, rk, param, r);
        });
        return (status == AXON_OK) ? s_.flush() : status;
    }

    axon_status_t get(void *buf, size_t len, uint64_t raddr, axon_rkey_h rk,
                      const axon_request_param_t *param = nullptr)
    {
        return s_.run([&](axon_request_h *r) {
            return axon_get_nb(s_.ep, buf, len, raddr, rk, param, r);
        });
    }

    /* Put n pattern bytes at packed k from a contiguous buffer: all in their pieces. */
    void put_range(const KeyedLayout &kl, size_t k, size_t n, uint64_t seed,
                   const std::string &what)
    {
        std::vector<uint8_t> data(n);
        fill_pat(data.data(), n, seed, 0);
        ASSERT_EQ(AXON_OK, put_flushed(data.data(), n, kl.addr(k), kl.rk)) << "put, " << what;
        std::vector<uint8_t> want = background(kl);
        kl.place(want, k, data.data(), n);
        EXPECT_EQ("", check_window(kl, want)) << "put, " << what;
        restore(kl);
    }

    /* Get n bytes at packed k into a contiguous buffer: the pieces' bytes, nothing else. */
    void get_range(const KeyedLayout &kl, size_t k, size_t n, uint64_t seed,
                   const std::string &what)
    {
        s_.target->fill(kHost, kl.wbeg, kl.wlen, seed, kl.wbeg);
        std::vector<uint8_t> want = kl.gather(image(kl, seed), k, n);
        std::vector<uint8_t> buf(n + 16, kSentinel);
        ASSERT_EQ(AXON_OK, get(buf.data() + 8, n, kl.addr(k), kl.rk)) << "get, " << what;
        std::vector<uint8_t> got(buf.begin() + 8, buf.begin() + 8 + n);
        int64_t              i = first_diff(got, want);
        EXPECT_EQ(-1, i) << "get, " << what << ": byte " << i << " is "
                         << (i >= 0 ? (int)got[i] : 0) << ", not " << (i >= 0 ? (int)want[i] : 0);
        EXPECT_TRUE(all_bytes_are(buf.data(), 8, kSentinel) &&
                    all_bytes_are(buf.data() + 8 + n, 8, kSentinel))
            << "get wrote around its buffer, " << what;
        EXPECT_EQ(-1, s_.target->check(kHost, kl.wbeg, kl.wlen, seed, kl.wbeg))
            << "get changed the target, " << what;
        restore(kl);
    }
};

/* ---------------------------------------------------------------- put / get */

/* The whole layout, every kind, small and large (past every lane's zero-copy threshold). */
TEST_P(RmaLayoutKey, PutGetEveryKindByteExact)
{
    ASSERT_NO_FATAL_FAILURE(s_.start(GetParam()));
    for (int kind = 0; kind < kLayoutKinds; ++kind) {
        for (size_t want : {kLayoutSmall, kLayoutLarge}) {
            std::unique_ptr<LayoutCase> lc = make_layout(kind, want);
            KeyedLayout                 kl;
            ASSERT_NO_FATAL_FAILURE(map(kl, lc->layout, lc->expect, 3 * kind,
                                        kind_entries(kind)));
            std::string what = lc->name() + ", " + std::to_string(kl.size) + " bytes";
            uint64_t    seed = 9100 + 10 * kind + (want == kLayoutLarge);

            ASSERT_NO_FATAL_FAILURE(put_range(kl, 0, kl.size, seed, what));
            ASSERT_NO_FATAL_FAILURE(get_range(kl, 0, kl.size, seed + 5, what));
            unmap(kl);
        }
    }
    EXPECT_EQ(-1, s_.target->guards(kHost));
    s_.finish();
}

/* A layout built here, with the pieces it must have. */
struct ShapedLayout {
    std::string                      name;
    size_t                           entries = SIZE_MAX;  /* of a device key: see map */
    axon_layout_t                    layout = {};
    axon_layout_t                    inner  = {};
    std::vector<axon_layout_piece_t> list;
    std::vector<LayoutPiece>         expect;
};

/* count blocks a stride apart, each block_length bytes or inner's pieces (at most one level). */
std::unique_ptr<ShapedLayout> shaped_strided(const std::string &name, size_t count,
                                             ptrdiff_t stride, size_t block_length,
                                             const ShapedLayout *inner = nullptr)
{
    std::unique_ptr<ShapedLayout> l(new ShapedLayout);
    l->name                   = name;
    l->layout.kind            = AXON_LAYOUT_STRIDED;
    l->layout.strided.count   = count;
    l->layout.strided.stride  = stride;
    if (inner != nullptr) {
        l->inner                = inner->layout;
        l->layout.strided.block = &l->inner;
    } else {
        l->layout.strided.block_length = block_length;
    }
    for (size_t i = 0; i < count; ++i) {
        if (inner == nullptr) {
            l->expect.push_back({(ptrdiff_t)i * stride, block_length});
            continue;
        }
        for (const LayoutPiece &p : inner->expect) {
            l->expect.push_back({(ptrdiff_t)i * stride + p.offset, p.length});
        }
    }
    return l;
}

/* count pieces of length bytes, gap bytes apart, in address order. */
std::unique_ptr<ShapedLayout> shaped_iov(const std::string &name, size_t count, size_t length,
                                         size_t gap)
{
    std::unique_ptr<ShapedLayout> l(new ShapedLayout);
    l->name = name;
    for (size_t i = 0; i < count; ++i) {
        l->list.push_back({(ptrdiff_t)(i * (length + gap)), length});
        l->expect.push_back({(ptrdiff_t)(i * (length + gap)), length});
    }
    l->layout.kind       = AXON_LAYOUT_IOV;
    l->layout.iov.pieces = l->list.data();
    l->layout.iov.count  = count;
    return l;
}

/*
 * Shapes a device key takes in other forms than the kinds above: a forward
 * stride (one repeated entry), forward of forward, one piece, pieces that
 * touch, lists of exactly the device's list size (one key on rc and dc),
 * one more and two and a half lists (a key over keys of the parts), and a
 * forward stride of a list longer than the device's (the repeat form over
 * keys of the parts, each repeated).
 */
TEST_P(RmaLayoutKey, PutGetDeviceShapes)
{
    ASSERT_NO_FATAL_FAILURE(s_.start(GetParam()));
    std::unique_ptr<ShapedLayout> inner = shaped_strided("", 8, 40, 24);
    std::vector<std::unique_ptr<ShapedLayout>> shapes;
    shapes.push_back(shaped_strided("forward strided", 5000, 128, 64));
    shapes.back()->entries = 1;  /* one entry repeated (softib §8.8's repeat form) */
    shapes.push_back(shaped_strided("forward strided of forward strided", 1500, 400, 0,
                                    inner.get()));
    shapes.back()->entries = 8;  /* the inner eight, repeated */
    shapes.push_back(shaped_iov("one piece", 1, 300000, 0));
    shapes.push_back(shaped_iov("pieces that touch", 3000, 100, 0));
    shapes.push_back(shaped_iov("the device's list size", kUmrListMax, 8, 8));
    shapes.push_back(shaped_iov("one past the device's list size", kUmrListMax + 1, 8, 8));
    shapes.push_back(shaped_iov("two and a half device lists", kUmrListMax * 5 / 2, 6, 10));
    std::unique_ptr<ShapedLayout> long_inner = shaped_iov("", kUmrListMax + 100, 4, 4);
    shapes.push_back(shaped_strided("forward strided of a list past the device's", 3, 40000, 0,
                                    long_inner.get()));
    shapes.back()->entries = kUmrListMax + 100;
    for (size_t i = 0; i < shapes.size(); ++i) {
        const ShapedLayout &sl = *shapes[i];
        KeyedLayout         kl;
        ASSERT_NO_FATAL_FAILURE(map(kl, sl.layout, sl.expect, 5, sl.entries));
        std::string what = sl.name + ", " + std::to_string(kl.size) + " bytes";
        uint64_t    seed = 9600 + 10 * i;
        ASSERT_NO_FATAL_FAILURE(put_range(kl, 0, kl.size, seed, what));
        ASSERT_NO_FATAL_FAILURE(get_range(kl, 0, kl.size, seed + 1, what));
        ASSERT_NO_FATAL_FAILURE(put_range(kl, kl.size / 3 + 1, kl.size / 3, seed + 2, what));
        ASSERT_NO_FATAL_FAILURE(get_range(kl, kl.size / 4 + 3, kl.size / 2, seed + 3, what));
        unmap(kl);
    }
    EXPECT_EQ(-1, s_.target->guards(kHost));
    s_.finish();
}

/*
 * One-sided for real: where the initiator reaches the pieces itself (rc and
 * dc through the indirect key, shm by cross-memory attach into them), a put
 * and a get through a layout key complete while the target process sleeps,
 * and it finds the put's bytes in its pieces when it wakes. A strided
 * layout of 3000 blocks and an iov of 200 pieces. (A first put while the
 * target is awake: rc connects on first use, which takes the target's
 * progress, as UCX's wireup does.)
 */
TEST_P(RmaLayoutKey, OneSidedWhileTheTargetSleeps)
{
    if (!rdma() && !cma()) {
        GTEST_SKIP() << "the target places the pieces over " << GetParam().label;
    }
    ASSERT_NO_FATAL_FAILURE(s_.start(GetParam()));
    if (s_.self) {
        GTEST_SKIP() << "no target process to put to sleep";
    }
    std::vector<std::unique_ptr<ShapedLayout>> shapes;
    shapes.push_back(shaped_strided("strided", 3000, 96, 40));
    shapes.push_back(shaped_iov("iov", 200, 700, 300));
    shapes.push_back(shaped_strided("strided of 4 KiB blocks", 40, 6000, 4096));
    int one_sided = 0;
    for (size_t i = 0; i < shapes.size(); ++i) {
        const ShapedLayout &sl = *shapes[i];
        KeyedLayout         kl;
        ASSERT_NO_FATAL_FAILURE(map(kl, sl.layout, sl.expect, 3, sl.entries));
        if (kl.rk->path != AXON_RMA_PATH_ZCOPY) {
            unmap(kl);   /* small pieces over shm: messages the target places */
            continue;
        }
        ++one_sided;
        std::vector<uint8_t> data(kl.size), back(kl.size);
        fill_pat(data.data(), data.size(), 4400 + i, 0);
        ASSERT_EQ(AXON_OK, put_flushed(back.data(), back.size(), kl.addr(0), kl.rk))
            << sl.name << ": a put while the target is awake";
        std::vector<uint8_t> want = background(kl);
        kl.place(want, 0, data.data(), data.size());
        s_.target->block();
        EXPECT_EQ(AXON_OK, s_.put(data.data(), data.size(), kl.addr(0), kl.rk, 5.0))
            << sl.name << ": a put that needs the sleeping target";
        EXPECT_EQ(AXON_OK, s_.get(back.data(), back.size(), kl.addr(0), kl.rk, 5.0))
            << sl.name << ": a get that needs the sleeping target";
        EXPECT_EQ(AXON_OK, s_.flush(5.0)) << sl.name << ": flush";
        EXPECT_EQ(data, back) << sl.name << ": the get read what the put wrote";
        EXPECT_EQ("", check_window(kl, want)) << sl.name << ": the target's pieces (wakes it)";
        restore(kl);
        unmap(kl);
    }
    EXPECT_EQ(rdma() || (std::string(GetParam().label) == "shm_cma") ? 3 : 1, one_sided)
        << "layout keys the initiator reaches by itself";
    s_.finish();
}

/*
 * Ranges inside the layout: the first and last byte, one piece exactly, two
 * bytes across a piece boundary and across a zero-length piece, a third in
 * the middle, the second half; and a large range in the middle of a large
 * layout.
 */
TEST_P(RmaLayoutKey, PartialRangesLandInTheirPieces)
{
    ASSERT_NO_FATAL_FAILURE(s_.start(GetParam()));
    for (int kind = 0; kind < kLayoutKinds; ++kind) {
        for (size_t want : {kLayoutSmall, kLayoutLarge}) {
            std::unique_ptr<LayoutCase> lc = make_layout(kind, want);
            KeyedLayout                 kl;
            ASSERT_NO_FATAL_FAILURE(map(kl, lc->layout, lc->expect, 7, kind_entries(kind)));
            const size_t S = kl.size;
            std::vector<std::pair<size_t, size_t>> ranges;

            if (want == kLayoutLarge) {
                ranges.push_back({S / 2 - 100000, 200000});
            } else {
                size_t pos = 0, nonempty = 0;
                bool   zero_seen = false;
                ranges.push_back({0, 1});
                ranges.push_back({S - 1, 1});
                for (const LayoutPiece &p : kl.pieces) {
                    if ((p.length > 0) && (++nonempty == 2)) {
                        ranges.push_back({pos, p.length});  /* one piece exactly */
                        ranges.push_back({pos - 1, 2});     /* across its first boundary */
                    }
                    if ((p.length == 0) && (pos > 0) && !zero_seen) {
                        ranges.push_back({pos - 1, 2});     /* across a zero-length piece */
                        zero_seen = true;
                    }
                    pos += p.length;
                }
                ranges.push_back({S / 3, S / 3});
                ranges.push_back({S / 2, S - S / 2});
            }
            for (size_t i = 0; i < ranges.size(); ++i) {
                size_t      k = ranges[i].first, n = ranges[i].second;
                std::string what = lc->name() + " of " + std::to_string(S) + " bytes, " +
                                   std::to_string(n) + " bytes at packed " + std::to_string(k);
                uint64_t    seed = 9300 + 100 * kind + 2 * i + (want == kLayoutLarge) * 50;
                ASSERT_NO_FATAL_FAILURE(put_range(kl, k, n, seed, what));
                ASSERT_NO_FATAL_FAILURE(get_range(kl, k, n, seed + 1, what));
            }
            unmap(kl);
        }
    }
    EXPECT_EQ(-1, s_.target->guards(kHost));
    s_.finish();
}

/*
 * A local layout of another kind against a layout key, at an offset into
 * it: put from the local pieces into the remote ones and get back, small
 * and large.
 */
TEST_P(RmaLayoutKey, LocalLayoutToLayoutKey)
{
    ASSERT_NO_FATAL_FAILURE(s_.start(GetParam()));
    const size_t k = 333;
    for (int kind = 0; kind < kLayoutKinds; ++kind) {
        for (size_t want : {kLayoutSmall, kLayoutLarge}) {
            std::unique_ptr<LayoutCase> local  = make_layout((kind + 1) % kLayoutKinds, want);
            std::unique_ptr<LayoutCase> remote = make_layout(kind, local->size + 2 * k);
            axon_request_param_t        param  = layout_param(*local);
            const size_t                n      = local->size;
            KeyedLayout                 kl;
            ASSERT_NO_FATAL_FAILURE(map(kl, remote->layout, remote->expect, 1));
            std::string what = "local " + local->name() + " of " + std::to_string(n) +
                               " bytes into remote " + remote->name() + " of " +
                               std::to_string(kl.size) + " at packed " + std::to_string(k);
            uint64_t    seed = 9500 + 10 * kind + (want == kLayoutLarge);

            std::vector<uint8_t> data(n);
            fill_pat(data.data(), n, seed, 0);
            local->fill_blank();
            local->place(data);
            ASSERT_EQ(AXON_OK, put_flushed(local->base, n, kl.addr(k), kl.rk, &param))
                << "put, " << what;
            std::vector<uint8_t> img = background(kl);
            kl.place(img, k, data.data(), n);
            EXPECT_EQ("", check_window(kl, img)) << "put, " << what;
            EXPECT_EQ("", local->check_received(data)) << "put changed its source, " << what;
            restore(kl);

            s_.target->fill(kHost, kl.wbeg, kl.wlen, seed + 3, kl.wbeg);
            std::vector<uint8_t> expect = kl.gather(image(kl, seed + 3), k, n);
            local->fill_blank();
            ASSERT_EQ(AXON_OK, get(local->base, n, kl.addr(k), kl.rk, &param)) << "get, " << what;
            EXPECT_EQ("", local->check_received(expect)) << "get, " << what;
            restore(kl);
            unmap(kl);
        }
    }
    s_.finish();
}

/*
 * Many puts, then many gets, in flight at once through one key (chunks of
 * a large layout, each across many pieces, completed in any order): each
 * lands in its own pieces.
 */
TEST_P(RmaLayoutKey, ManyOperationsInFlight)
{
    ASSERT_NO_FATAL_FAILURE(s_.start(GetParam()));
    const size_t chunk = 4099;
    for (int kind : {kLayoutIov, kLayoutStridedStrided}) {
        std::unique_ptr<LayoutCase> lc = make_layout(kind, kLayoutLarge);
        KeyedLayout                 kl;
        ASSERT_NO_FATAL_FAILURE(map(kl, lc->layout, lc->expect, 11, kind_entries(kind)));
        const size_t S = kl.size;
        std::vector<uint8_t>        data(S), back(S, kSentinel);
        std::vector<axon_request_h> reqs;
        std::vector<axon_status_t>  starts;
        fill_pat(data.data(), S, 9900 + kind, 0);

        auto wait_all = [&](const char *what) {
            for (size_t i = 0; i < reqs.size(); ++i) {
                EXPECT_EQ(AXON_OK, s_.wait(starts[i], reqs[i]))
                    << lc->name() << ", " << what << " " << i;
            }
            reqs.clear();
            starts.clear();
        };
        for (size_t k = 0; k < S; k += chunk) {
            axon_request_h req = nullptr;
            starts.push_back(s_.start_op([&](axon_request_h *r) {
                return axon_put_nb(s_.ep, data.data() + k, std::min(chunk, S - k), kl.addr(k),
                                   kl.rk, NULL, r);
            }, &req));
            reqs.push_back(req);
        }
        wait_all("put");
        ASSERT_EQ(AXON_OK, s_.flush());
        std::vector<uint8_t> img = background(kl);
        kl.place(img, 0, data.data(), S);
        EXPECT_EQ("", check_window(kl, img)) << lc->name() << ", puts in flight";

        for (size_t k = 0; k < S; k += chunk) {
            axon_request_h req = nullptr;
            starts.push_back(s_.start_op([&](axon_request_h *r) {
                return axon_get_nb(s_.ep, back.data() + k, std::min(chunk, S - k), kl.addr(k),
                                   kl.rk, NULL, r);
            }, &req));
            reqs.push_back(req);
        }
        wait_all("get");
        EXPECT_EQ(-1, first_diff(back, data)) << lc->name() << ", gets in flight";
        restore(kl);
        unmap(kl);
    }
    s_.finish();
}

/*
 * Keys of the same memory at once: the same layout mapped twice at the same
 * place (two keys), and another layout over the same bytes. Each works;
 * unmapping one leaves the others working.
 */
TEST_P(RmaLayoutKey, KeysOverTheSameMemoryAreIndependent)
{
    ASSERT_NO_FATAL_FAILURE(s_.start(GetParam()));
    std::unique_ptr<LayoutCase> lc = make_layout(kLayoutStrided, kLayoutSmall);
    /* the same blocks listed one by one: another layout, the same bytes */
    std::vector<axon_layout_piece_t> listed;
    for (const LayoutPiece &p : lc->expect) {
        listed.push_back({p.offset, p.length});
    }
    axon_layout_t iov = {};
    iov.kind       = AXON_LAYOUT_IOV;
    iov.iov.pieces = listed.data();
    iov.iov.count  = listed.size();

    KeyedLayout a, b, c;
    ASSERT_NO_FATAL_FAILURE(map(a, lc->layout, lc->expect));
    ASSERT_NO_FATAL_FAILURE(map(b, lc->layout, lc->expect));
    ASSERT_NO_FATAL_FAILURE(map(c, iov, lc->expect));
    ASSERT_EQ(a.off, b.off);
    ASSERT_EQ(a.off, c.off);
    EXPECT_NE(a.key, b.key) << "two mappings, two keys";
    ASSERT_NO_FATAL_FAILURE(put_range(a, 0, a.size, 9950, "first key"));
    ASSERT_NO_FATAL_FAILURE(put_range(b, 10, b.size - 20, 9951, "second key"));
    ASSERT_NO_FATAL_FAILURE(get_range(c, 3, c.size - 3, 9952, "the listed layout's key"));

    EXPECT_EQ(AXON_OK, s_.target->unmap_layout((int)a.slot));
    uint64_t word = 0x1234;
    axon_status_t st = put_flushed(&word, 8, a.addr(0), a.rk);
    if (rdma()) {
        EXPECT_LT(st, 0) << "the unmapped key";
    } else {
        EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, st) << "the unmapped key";
    }
    a.drop_key();
    if (s_.ep->status != AXON_OK) {
        ASSERT_TRUE(rdma()) << "the endpoint broke";
        b.drop_key();
        c.drop_key();
        ASSERT_NO_FATAL_FAILURE(s_.reconnect());
        ASSERT_NO_FATAL_FAILURE(unpack(b));
        ASSERT_NO_FATAL_FAILURE(unpack(c));
    }
    EXPECT_EQ("", check_window(b, background(b))) << "the unmapped key wrote";
    ASSERT_NO_FATAL_FAILURE(put_range(b, 0, b.size, 9953, "second key after the first's unmap"));
    ASSERT_NO_FATAL_FAILURE(get_range(c, 0, c.size, 9954, "listed key after the first's unmap"));
    unmap(b);
    ASSERT_NO_FATAL_FAILURE(put_range(c, 1, c.size - 1, 9955, "listed key, alone"));
    unmap(c);
    s_.finish(rdma());
}

/* ---------------------------------------------------------------- outside the key */

/*
 * Ranges outside [base, base + size) fail with AXON_ERR_REMOTE_ACCESS,
 * including bytes of the layout's own pieces that lie below its base
 * (negative stride) and a key of another layout's range; not a byte
 * written; the endpoint still works after.
 */
TEST_P(RmaLayoutKey, OutOfRangeIsRemoteAccess)
{
    ASSERT_NO_FATAL_FAILURE(s_.start(GetParam()));
    for (int kind : {kLayoutStrided, kLayoutIov}) {
        std::unique_ptr<LayoutCase> lc = make_layout(kind, kLayoutSmall);
        KeyedLayout                 kl;
        ASSERT_NO_FATAL_FAILURE(map(kl, lc->layout, lc->expect));
        const uint64_t B = kl.info.base, L = kl.size;
        std::vector<uint8_t> buf(L + 1, kSentinel);
        std::vector<OutsideRange> cases = outside_ranges(B, L);
        cases.push_back({B - 200, 50, "below the base, where pieces of a negative stride are"});
        for (const OutsideRange &c : cases) {
            std::string what = lc->name() + ", " + c.what;
            EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, put_flushed(buf.data(), c.len, c.addr, kl.rk))
                << "put, " << what;
            EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, get(buf.data(), c.len, c.addr, kl.rk))
                << "get, " << what;
            EXPECT_TRUE(all_bytes_are(buf.data(), buf.size(), kSentinel))
                << "a failed get wrote the local buffer, " << what;
            ASSERT_EQ(AXON_OK, s_.ep->status) << "the endpoint broke, " << what;
        }
        uint64_t res = 0;
        EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, fetch_add8(s_, (B + L + 7) & ~7ull, kl.rk, &res))
            << lc->name() << ", fetch-add past the end";
        EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, fetch_add8(s_, (B - 8) & ~7ull, kl.rk, &res))
            << lc->name() << ", fetch-add before the base";
        EXPECT_EQ("", check_window(kl, background(kl))) << lc->name() << ": a failed access wrote";
        /* the key still works */
        ASSERT_NO_FATAL_FAILURE(put_range(kl, 0, L, 9700 + kind, lc->name() + ", after"));
        unmap(kl);
    }
    EXPECT_EQ(-1, s_.target->guards(kHost));
    s_.finish();
}

/*
 * A layout key the target unmapped: put (+ flush), get and fetch-add
 * through it fail with AXON_ERR_REMOTE_ACCESS (rc, dc: the indirect key is
 * gone, the access fails and may break the endpoint, which then gets a new
 * one); so does a key unpacked after the unmap, and the old key after the
 * same layout was mapped again at the same place, while the new key works.
 * The memory's own key (the big user region) works throughout and nothing
 * under the layout changes.
 */
TEST_P(RmaLayoutKey, UnmappedKeyIsRemoteAccess)
{
    ASSERT_NO_FATAL_FAILURE(s_.start(GetParam()));
    std::unique_ptr<LayoutCase> lc = make_layout(kLayoutStridedIov, kLayoutSmall);
    KeyedLayout                 kl;
    int                         reconnects = 0;
    ASSERT_NO_FATAL_FAILURE(map(kl, lc->layout, lc->expect));
    ASSERT_NO_FATAL_FAILURE(put_range(kl, 0, kl.size, 9800, "before the unmap"));
    const std::vector<uint8_t> old_key = kl.key;
    EXPECT_EQ(AXON_OK, s_.target->unmap_layout((int)kl.slot));

    /* Every access through rk fails; a broken endpoint is replaced. */
    auto expect_refused = [&](axon_rkey_h rk, const std::string &what) {
        uint64_t      word = 0x0123456789ABCDEFull, old = 0;
        axon_status_t st[3];
        st[0] = put_flushed(&word, 8, kl.addr(16), rk);
        st[1] = get(&word, 8, kl.addr(24), rk);
        st[2] = fetch_add8(s_, kl.addr(0), rk, &old);
        const char *names[3] = {"put (+ flush)", "get", "fetch-add"};
        for (int i = 0; i < 3; ++i) {
            if (rdma()) {
                EXPECT_LT(st[i], 0) << names[i] << ", " << what;
            } else {
                EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, st[i]) << names[i] << ", " << what;
            }
        }
        EXPECT_EQ(0x0123456789ABCDEFull, word) << "a failed get wrote, " << what;
    };
    auto renew_if_broken = [&]() {
        if (s_.ep->status != AXON_OK) {
            ASSERT_TRUE(rdma()) << "the endpoint broke: " << axon_status_string(s_.ep->status);
            kl.drop_key();
            ++reconnects;
            ASSERT_NO_FATAL_FAILURE(s_.reconnect());
        }
    };

    expect_refused(kl.rk, "key unpacked before the unmap");
    ASSERT_NO_FATAL_FAILURE(renew_if_broken());
    kl.drop_key();

    axon_rkey_h   fresh  = nullptr;
    axon_status_t status = axon_ep_rkey_unpack(s_.ep, old_key.data(), old_key.size(), &fresh);
    if (status == AXON_OK) {
        expect_refused(fresh, "key unpacked after the unmap");
        axon_rkey_destroy(fresh);
        ASSERT_NO_FATAL_FAILURE(renew_if_broken());
    } else if (!rdma()) {
        EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, status) << "unpacking a key after the unmap";
    }
    EXPECT_EQ("", check_window(kl, background(kl))) << "a refused access changed the memory";

    /* The same layout mapped again at the same place: a new key; the old one stays dead. */
    KeyedLayout again;
    ASSERT_NO_FATAL_FAILURE(map(again, lc->layout, lc->expect));
    ASSERT_EQ(kl.off, again.off);
    status = axon_ep_rkey_unpack(s_.ep, old_key.data(), old_key.size(), &fresh);
    if (status == AXON_OK) {
        expect_refused(fresh, "old key after the layout was mapped again");
        axon_rkey_destroy(fresh);
    } else if (!rdma()) {
        EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, status) << "unpacking the old key after the remap";
    }
    if (s_.ep->status != AXON_OK) {
        again.drop_key();
        ASSERT_NO_FATAL_FAILURE(renew_if_broken());
        ASSERT_NO_FATAL_FAILURE(unpack(again));
    }
    EXPECT_EQ("", check_window(again, background(again)))
        << "the old key reached the memory mapped again";
    ASSERT_NO_FATAL_FAILURE(put_range(again, 0, again.size, 9810, "the new key"));
    ASSERT_NO_FATAL_FAILURE(get_range(again, 5, again.size - 10, 9811, "the new key"));

    /* The region's own key was never touched by the layout key's life. */
    uint64_t old = 0;
    EXPECT_EQ(AXON_OK, fetch_add8(s_, s_.addr(kHost, kBigLen - 64), s_.rkey[kHost], &old));
    EXPECT_EQ(bg_value(kHost, kBigLen - 64, 8), old) << "the region's key after the layout's";
    s_.target->restore(kHost, kBigLen - 64, 8);
    unmap(again);
    if (reconnects > 0) {
        printf("[rma] %s: %d new endpoints after broken ones\n", GetParam().label, reconnects);
    }
    EXPECT_EQ(-1, s_.target->guards(kHost));
    s_.finish(rdma());
}

/* ---------------------------------------------------------------- atomics */

struct AmoCase {
    size_t           k;       /* packed offset */
    size_t           size;
    axon_atomic_op_t op;
    bool             fetch;   /* with a result */
    bool             inside;  /* in one piece (else across two: refused) */
    bool             match;   /* cswap: compare with the current value */
};

struct AmoLayout {
    const char              *name;
    axon_layout_t            layout;
    std::vector<LayoutPiece> pieces;
    std::vector<AmoCase>     cases;
};

/*
 * Layouts whose pieces do not end on 8 bytes, so aligned operands can
 * straddle two pieces: an iov not in address order, a strided vector and a
 * strided one going down.
 */
std::vector<AmoLayout> amo_layouts()
{
    static const axon_layout_piece_t kIov[] = {{128, 20}, {4, 44}, {64, 16}};
    std::vector<AmoLayout> out(3);
    const axon_atomic_op_t ADD = AXON_ATOMIC_ADD, XOR = AXON_ATOMIC_XOR, OR = AXON_ATOMIC_OR,
                           AND = AXON_ATOMIC_AND, SWAP = AXON_ATOMIC_SWAP,
                           CSWAP = AXON_ATOMIC_CSWAP;

    out[0].name = "iov";
    memset(&out[0].layout, 0, sizeof(out[0].layout));
    out[0].layout.kind       = AXON_LAYOUT_IOV;
    out[0].layout.iov.pieces = kIov;
    out[0].layout.iov.count  = 3;
    for (const axon_layout_piece_t &p : kIov) {
        out[0].pieces.push_back({p.offset, p.length});
    }
    /* packed [0,20) at 128, [20,64) at 4, [64,80) at 64 */
    out[0].cases = {
        {0, 8, ADD, true, true, false},     {8, 8, XOR, true, true, false},
        {16, 4, ADD, false, true, false},   {20, 4, SWAP, true, true, false},
        {24, 8, CSWAP, true, true, true},   {32, 8, CSWAP, true, true, false},
        {56, 8, ADD, true, true, false},    {60, 4, OR, true, true, false},
        {64, 8, AND, true, true, false},    {72, 8, ADD, true, true, false},
        {16, 8, ADD, true, false, false},   {16, 8, CSWAP, true, false, true},
        {16, 8, ADD, false, false, false},  {16, 8, SWAP, true, false, false},
    };

    out[1].name = "strided";
    memset(&out[1].layout, 0, sizeof(out[1].layout));
    out[1].layout.kind                 = AXON_LAYOUT_STRIDED;
    out[1].layout.strided.count        = 4;
    out[1].layout.strided.block_length = 20;
    out[1].layout.strided.stride       = 32;
    for (ptrdiff_t i = 0; i < 4; ++i) {
        out[1].pieces.push_back({32 * i, 20});
    }
    out[1].cases = {
        {0, 8, ADD, true, true, false},     {8, 8, SWAP, true, true, false},
        {16, 4, ADD, true, true, false},    {20, 4, XOR, false, true, false},
        {36, 4, ADD, true, true, false},    {40, 8, ADD, true, true, false},
        {48, 8, CSWAP, true, true, true},   {76, 4, ADD, true, true, false},
        {16, 8, ADD, true, false, false},   {56, 8, ADD, true, false, false},
        {56, 8, XOR, false, false, false},
    };

    out[2].name = "strided down";
    memset(&out[2].layout, 0, sizeof(out[2].layout));
    out[2].layout.kind                 = AXON_LAYOUT_STRIDED;
    out[2].layout.strided.count        = 3;
    out[2].layout.strided.block_length = 12;
    out[2].layout.strided.stride       = -16;
    for (ptrdiff_t i = 0; i < 3; ++i) {
        out[2].pieces.push_back({-16 * i, 12});
    }
    /* packed [0,12) at 0, [12,24) at -16, [24,36) at -32 */
    out[2].cases = {
        {0, 8, ADD, true, true, false},     {8, 4, ADD, true, true, false},
        {12, 4, SWAP, true, true, false},   {20, 4, ADD, true, true, false},
        {24, 8, ADD, true, true, false},    {24, 8, CSWAP, true, true, true},
        {8, 8, ADD, true, false, false},    {8, 8, CSWAP, true, false, true},
        /* in one piece, but at base - 12: refused, nothing changed */
        {16, 8, ADD, true, true, false},
    };
    return out;
}

/*
 * An atomic whose operand lies in one piece acts on exactly its bytes
 * (fetched value and memory against the model); one across two pieces
 * fails with AXON_ERR_REMOTE_ACCESS, one in a piece but unaligned where it
 * lands with AXON_ERR_INVALID_PARAM, and neither changes anything (device
 * atomics: the device refuses both with a remote access error, which
 * breaks the endpoint; a new one follows).
 */
TEST_P(RmaLayoutKey, AtomicsInsideAPieceWorkAcrossPiecesFail)
{
    ASSERT_NO_FATAL_FAILURE(s_.start(GetParam()));
    std::vector<AmoLayout> layouts = amo_layouts();
    for (const AmoLayout &al : layouts) {
        KeyedLayout kl;
        ASSERT_NO_FATAL_FAILURE(map(kl, al.layout, al.pieces));
        ASSERT_EQ(0u, kl.info.base % 16) << "the cases assume an aligned base";
        std::vector<uint8_t> model = background(kl);
        uint64_t             value = 0x0F1E2D3C4B5A6978ull;

        for (size_t i = 0; i < al.cases.size(); ++i) {
            const AmoCase &c = al.cases[i];
            std::string what = std::string(al.name) + ", case " + std::to_string(i) + ": " +
                               std::to_string(c.size) + " bytes at packed " +
                               std::to_string(c.k);
            int piece = kl.piece_of(c.k, c.size);
            ASSERT_EQ(c.inside, piece >= 0) << "the case is not what it says, " << what;
            uint64_t old = 0, result = 0xDEADBEEFDEADBEEFull, compare = 0;
            size_t   w   = 0;
            if (c.inside) {
                size_t pos = 0;
                for (int j = 0; j < piece; ++j) {
                    pos += kl.pieces[j].length;
                }
                w = kl.at(kl.pieces[piece].offset + (ptrdiff_t)(c.k - pos));
                memcpy(&old, &model[w], c.size);
            }
            compare = c.match ? old : ~old;
            value  += 0x1111111111111111ull;
            axon_status_t status = s_.atomic(c.op, c.size, &value, &compare,
                                             c.fetch ? &result : nullptr, kl.addr(c.k), kl.rk);
            if (!c.fetch && (status == AXON_OK)) {
                status = s_.flush();  /* a posted atomic's failure may show there */
            }
            bool unaligned = c.inside && ((kl.wbeg + w) % c.size != 0);
            if (!c.inside) {
                EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, status) << what;
            } else if (unaligned) {
                EXPECT_EQ(GetParam().device_amo() ? AXON_ERR_REMOTE_ACCESS :
                          AXON_ERR_INVALID_PARAM, status) << what << ", landing unaligned";
            }
            if (s_.ep->status != AXON_OK) {
                /* the device refused it: as rc's RDMA, that breaks the endpoint */
                ASSERT_TRUE(GetParam().device_amo()) << "the endpoint broke, " << what;
                kl.drop_key();
                ASSERT_NO_FATAL_FAILURE(s_.reconnect());
                ASSERT_NO_FATAL_FAILURE(unpack(kl));
            }
            if (!c.inside || unaligned) {
                continue;  /* nothing changed: the window check below sees to it */
            }
            ASSERT_EQ(AXON_OK, status) << what;
            uint64_t mask = (c.size == 4) ? 0xffffffffull : ~0ull;
            if (c.fetch) {
                EXPECT_EQ(old, result & mask) << "fetched value, " << what;
            }
            uint64_t n = model_atomic(c.op, c.size, old, value, compare);
            memcpy(&model[w], &n, c.size);
        }
        EXPECT_EQ(AXON_OK, s_.flush());
        EXPECT_EQ("", check_window(kl, model)) << al.name;
        restore(kl);
        unmap(kl);
    }
    EXPECT_EQ(-1, s_.target->guards(kHost));
    s_.finish();
}

/* ---------------------------------------------------------------- the map call */

uint8_t bad_map_memory[4096];  /* what the bad maps name */

/* Each bad map: AXON_ERR_INVALID_PARAM and a line naming the call and the value. */
TEST_P(RmaLayoutKey, BadMapsNameTheirValue)
{
    ASSERT_NO_FATAL_FAILURE(s_.start(GetParam()));
    uint8_t *const buf = bad_map_memory;
    axon_context_h ctx = s_.node.context;

    auto rejected = [&](const axon_layout_t *layout, size_t length, uint32_t flags,
                        std::initializer_list<const char *> words, const std::string &what,
                        void *base = bad_map_memory + 1024) {
        axon_mem_map_params_t p    = {};
        axon_mem_h            memh = nullptr;
        p.address = base;
        p.length  = length;
        p.flags   = flags;
        p.layout  = layout;
        LogCapture    log;
        axon_status_t status = axon_mem_map(ctx, &p, &memh);
        EXPECT_EQ(AXON_ERR_INVALID_PARAM, status) << what;
        EXPECT_TRUE(logged(log, words)) << what << ": no line naming the value; lines:"
                                        << lines_of(log);
        if (status == AXON_OK) {
            axon_mem_unmap(ctx, memh);
        }
    };

    axon_layout_piece_t overlap[2] = {{0, 10}, {5, 10}};
    axon_layout_t       iov = {};
    iov.kind       = AXON_LAYOUT_IOV;
    iov.iov.pieces = overlap;
    iov.iov.count  = 2;
    rejected(&iov, 20, AXON_MEM_MAP_LAYOUT,
             {"overlap: offset 0 (10 bytes) and offset 5 (10 bytes)"}, "overlapping iov");

    axon_layout_t strided = {};
    strided.kind                 = AXON_LAYOUT_STRIDED;
    strided.strided.count        = 3;
    strided.strided.block_length = 8;
    strided.strided.stride       = -6;
    rejected(&strided, 24, AXON_MEM_MAP_LAYOUT, {"overlap"}, "overlapping strided blocks");

    axon_layout_t good = {};
    good.kind                 = AXON_LAYOUT_STRIDED;
    good.strided.count        = 2;
    good.strided.block_length = 2;
    good.strided.stride       = 4;
    rejected(&good, 5, AXON_MEM_MAP_LAYOUT, {"length 5"}, "length 5 of a 4-byte layout");
    rejected(&good, 3, AXON_MEM_MAP_LAYOUT, {"length 3"}, "length 3 of a 4-byte layout");
    rejected(&good, 4, AXON_MEM_MAP_LAYOUT | AXON_MEM_MAP_ALLOCATE,
             {"AXON_MEM_MAP_ALLOCATE", "flags 0x3", "flags 3"}, "a layout with ALLOCATE");
    rejected(&good, 4, AXON_MEM_MAP_LAYOUT | AXON_MEM_MAP_SHARED,
             {"AXON_MEM_MAP_SHARED with AXON_MEM_MAP_LAYOUT (flags 0x6)"}, "a layout, shared");
    rejected(nullptr, 4, AXON_MEM_MAP_ALLOCATE | AXON_MEM_MAP_SHARED,
             {"AXON_MEM_MAP_SHARED with AXON_MEM_MAP_ALLOCATE (flags 0x5)"}, "allocated, shared");
    rejected(nullptr, 4, AXON_MEM_MAP_LAYOUT, {"NULL layout", "without a layout", "no layout"},
             "AXON_MEM_MAP_LAYOUT without a layout");

    axon_layout_t inner = good;
    axon_layout_t middle = good;
    middle.strided.block = &inner;
    axon_layout_t outer = middle;
    outer.strided.stride = 16;
    outer.strided.block  = &middle;
    rejected(&outer, 16, AXON_MEM_MAP_LAYOUT, {"nested 3 levels deep"}, "three levels");

    axon_layout_t huge = {};
    huge.kind                 = AXON_LAYOUT_STRIDED;
    huge.strided.count        = SIZE_MAX / 2;
    huge.strided.block_length = 4;
    huge.strided.stride       = 4;
    rejected(&huge, 4, AXON_MEM_MAP_LAYOUT,
             {"count 9223372036854775807 x 4-byte blocks overflows size_t"}, "count overflow");
    huge.strided.count        = (size_t)1 << 40;
    huge.strided.block_length = 1;
    huge.strided.stride       = (ptrdiff_t)1 << 40;
    rejected(&huge, (size_t)1 << 40, AXON_MEM_MAP_LAYOUT,
             {"count 1099511627776 x stride 1099511627776"}, "extent overflow");

    rejected(&good, 4, AXON_MEM_MAP_LAYOUT, {"address is NULL"}, "a NULL base", nullptr);

    /* A piece below address 0: base + offset wraps around, as a plain map's range may not
     * (past the top cannot happen: a base is below 2^63 and an offset at most 2^63 - 1). */
    axon_layout_piece_t below[1] = {{-(ptrdiff_t)(uintptr_t)(buf + 1024) - 4096, 16}};
    iov.iov.pieces = below;
    iov.iov.count  = 1;
    rejected(&iov, 16, AXON_MEM_MAP_LAYOUT, {"wraps"}, "a piece below address 0");

    axon_layout_t bad_kind = {};
    bad_kind.kind = 7;
    rejected(&bad_kind, 4, AXON_MEM_MAP_LAYOUT, {"layout kind 7"}, "kind 7");

    /* After all that, the good layout maps. */
    axon_mem_map_params_t p    = {};
    axon_mem_h            memh = nullptr;
    p.address = buf + 1024;
    p.length  = 4;
    p.flags   = AXON_MEM_MAP_LAYOUT;
    p.layout  = &good;
    ASSERT_EQ(AXON_OK, axon_mem_map(ctx, &p, &memh));
    EXPECT_EQ(AXON_OK, axon_mem_unmap(ctx, memh));
    s_.finish();
}

/* axon_mem_query of a layout mapping: its base and its size (the target's, in map, too). */
TEST_P(RmaLayoutKey, QueryGivesBaseAndLayoutSize)
{
    ASSERT_NO_FATAL_FAILURE(s_.start(GetParam()));
    for (int kind = 0; kind < kLayoutKinds; ++kind) {
        for (size_t want : {kLayoutSmall, kLayoutLarge}) {
            std::unique_ptr<LayoutCase> lc = make_layout(kind, want);
            axon_mem_map_params_t       p  = {};
            axon_mem_h                  memh = nullptr;
            p.address = lc->base;
            p.length  = lc->size;
            p.flags   = AXON_MEM_MAP_LAYOUT;
            p.layout  = &lc->layout;
            ASSERT_EQ(AXON_OK, axon_mem_map(s_.node.context, &p, &memh)) << lc->name();
            void  *addr = nullptr;
            size_t len  = 0;
            EXPECT_EQ(AXON_OK, axon_mem_query(memh, &addr, &len)) << lc->name();
            EXPECT_EQ((void *)lc->base, addr) << lc->name();
            EXPECT_EQ(lc->size, len) << lc->name();
            std::vector<uint8_t> key;
            EXPECT_EQ(AXON_OK, pack_key(s_.node.context, memh, key)) << lc->name();
            EXPECT_EQ(AXON_OK, axon_mem_unmap(s_.node.context, memh)) << lc->name();
        }
    }
    s_.finish();
}

/* ---------------------------------------------------------------- instances */

const RmaParam kKeyLanes[] = {
    {"self", "self", false},  /* the same process: through the lane, not LOCAL */
    {"shm", "shm", false},    /* cross-memory attach into the pieces */
    {"tcp", "tcp", false},
    {"rc", "rc", false},      /* one indirect (UMR) key on softib */
    {"ud", "ud", false},
    {"dc", "dc", false},
};
/* Active messages where RDMA could reach the pieces. */
const RmaParam kKeyVariants[] = {
    {"shm_am", "shm", true},
    {"shm_cma", "shm", false},   /* single copy into pieces of any size */
    {"rc_am", "rc", true},
    {"rc_devamo", "rc", false, "device"},
};

INSTANTIATE_TEST_SUITE_P(Lanes, RmaLayoutKey, ::testing::ValuesIn(kKeyLanes), rma_name);
INSTANTIATE_TEST_SUITE_P(Variants, RmaLayoutKey, ::testing::ValuesIn(kKeyVariants), rma_name);

}  // namespace
