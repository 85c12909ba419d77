/*
 * Layouts for the tests of non-contiguous data (tag and RMA suites): one of
 * every kind, small (eager) or large (rendezvous: at least 256 KiB), each
 * with the pieces it must have listed by a packer written here from
 * axon.h's description (plain loops, not the library's cursor), and a
 * page-aligned region to lay it over. The kinds between them have pieces
 * across page boundaries, zero-length pieces, negative strides and a list
 * not in address order.
 */
#ifndef AXON_TEST_LAYOUT_CASES_H
#define AXON_TEST_LAYOUT_CASES_H

#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "axon.h"
#include "harness.h"

namespace {

enum { kLayoutIov, kLayoutStrided, kLayoutStridedStrided, kLayoutStridedIov, kLayoutKinds };

inline const char *layout_kind_name(int kind)
{
    static const char *const names[] = {"iov", "strided", "strided of strided",
                                        "strided of iov"};
    return names[kind];
}

const size_t kLayoutSmall = 6000;        /* eager, several fragments on some lanes */
const size_t kLayoutLarge = 300 * 1024;  /* rendezvous on every lane */
const uint8_t kLayoutFill = 0xEE;         /* what a receiving region holds outside its pieces */

struct LayoutPiece {
    ptrdiff_t offset;
    size_t    length;
};

/* A layout with its storage; not copyable (the layout points into it). */
class LayoutCase {
public:
    LayoutCase(const LayoutCase &) = delete;
    LayoutCase &operator=(const LayoutCase &) = delete;

    /* A layout of kind whose size is at least want. */
    LayoutCase(int kind, size_t want) : kind_(kind)
    {
        memset(&layout, 0, sizeof(layout));
        memset(&inner_, 0, sizeof(inner_));
        switch (kind) {
        case kLayoutIov:
            build_iov(want);
            break;
        case kLayoutStrided: {
            /* 97-byte blocks going down in memory, 60 bytes apart. */
            size_t n = (want + 96) / 97;
            layout.kind                 = AXON_LAYOUT_STRIDED;
            layout.strided.count        = n;
            layout.strided.block_length = 97;
            layout.strided.stride       = -157;
            for (size_t i = 0; i < n; ++i) {
                expect.push_back({(ptrdiff_t)i * -157, 97});
            }
            break;
        }
        case kLayoutStridedStrided: {
            /* Outer blocks 200 bytes apart, each five 24-byte blocks going down by 40. */
            size_t n = (want + 119) / 120;
            inner_.kind                 = AXON_LAYOUT_STRIDED;
            inner_.strided.count        = 5;
            inner_.strided.block_length = 24;
            inner_.strided.stride       = -40;
            layout.kind                 = AXON_LAYOUT_STRIDED;
            layout.strided.count        = n;
            layout.strided.stride       = 200;
            layout.strided.block        = &inner_;
            for (size_t i = 0; i < n; ++i) {
                for (ptrdiff_t k = 0; k < 5; ++k) {
                    expect.push_back({(ptrdiff_t)i * 200 + k * -40, 24});
                }
            }
            break;
        }
        default: {
            /* Blocks going down by 96, each an unsorted list with a zero-length piece. */
            static const LayoutPiece kInner[] = {{0, 10}, {50, 0}, {30, 17}, {12, 5}, {60, 31}};
            size_t n = (want + 62) / 63;
            for (const LayoutPiece &p : kInner) {
                inner_pieces_.push_back({p.offset, p.length});
            }
            inner_.kind           = AXON_LAYOUT_IOV;
            inner_.iov.pieces     = inner_pieces_.data();
            inner_.iov.count      = inner_pieces_.size();
            layout.kind           = AXON_LAYOUT_STRIDED;
            layout.strided.count  = n;
            layout.strided.stride = -96;
            layout.strided.block  = &inner_;
            for (size_t i = 0; i < n; ++i) {
                for (const LayoutPiece &p : kInner) {
                    expect.push_back({(ptrdiff_t)i * -96 + p.offset, p.length});
                }
            }
            break;
        }
        }
        size = 0;
        lo_ = hi_ = 0;
        for (const LayoutPiece &p : expect) {
            size += p.length;
            if (p.length > 0) {
                lo_ = std::min(lo_, p.offset);
                hi_ = std::max(hi_, p.offset + (ptrdiff_t)p.length);
            }
        }
        /* The base is page aligned, with a page of margin on each side of the extent. */
        size_t below = ((size_t)-lo_ + 4095) & ~(size_t)4095;
        region_len_  = below + (((size_t)hi_ + 4095) & ~(size_t)4095) + 2 * 4096;
        region_      = static_cast<uint8_t *>(aligned_alloc(4096, region_len_));
        base         = region_ + 4096 + below;
    }
    ~LayoutCase() { free(region_); }

    std::string name() const { return layout_kind_name(kind_); }

    /* The region: fill it all with a pattern (a sender), or with kLayoutFill (a receiver). */
    void fill_pattern(uint64_t seed) { axon_test_fill(region_, region_len_, seed); }
    void fill_blank() { memset(region_, kLayoutFill, region_len_); }

    /* Write data (packed order) into the pieces, as a receive would. */
    void place(const std::vector<uint8_t> &data)
    {
        size_t pos = 0;
        for (const LayoutPiece &p : expect) {
            memcpy(base + p.offset, data.data() + pos, p.length);
            pos += p.length;
        }
    }

    /* The layout's data in packed order, from the region. */
    std::vector<uint8_t> pack() const
    {
        std::vector<uint8_t> out;
        for (const LayoutPiece &p : expect) {
            out.insert(out.end(), base + p.offset, base + p.offset + p.length);
        }
        return out;
    }

    /*
     * Empty if the region holds data (its first size bytes, or all of it)
     * in its pieces and kLayoutFill everywhere else; else what is wrong.
     */
    std::string check_received(const std::vector<uint8_t> &data) const
    {
        std::vector<uint8_t> want(region_len_, kLayoutFill);
        uint8_t             *wbase = want.data() + (base - region_);
        size_t               pos   = 0;

        for (const LayoutPiece &p : expect) {
            size_t n = std::min(p.length, data.size() - std::min(pos, data.size()));
            memcpy(wbase + p.offset, data.data() + pos, n);
            pos += p.length;
        }
        for (size_t i = 0; i < region_len_; ++i) {
            if (region_[i] != want[i]) {
                return name() + ": byte at offset " +
                       std::to_string((ptrdiff_t)i - (base - region_)) + " from the base is " +
                       std::to_string(region_[i]) + ", not " + std::to_string(want[i]);
            }
        }
        return "";
    }

    axon_layout_t            layout;
    std::vector<LayoutPiece> expect;  /* the pieces in packed order, from the base */
    size_t                   size;    /* packed bytes */
    uint8_t                 *base;

private:
    /* Pieces of 50 to 299 bytes (every seventh empty) 13 bytes apart, crossing page
     * boundaries all along; listed in pairs swapped, so not in address order. */
    void build_iov(size_t want)
    {
        std::vector<LayoutPiece> placed;
        ptrdiff_t                pos   = 0;
        size_t                   total = 0;

        for (size_t j = 0; (total < want) || (placed.size() % 2 != 0); ++j) {
            size_t len = (j % 7 == 3) ? 0 : 50 + (j * 37) % 250;
            placed.push_back({pos, len});
            pos   += (ptrdiff_t)len + 13;
            total += len;
        }
        for (size_t j = 0; j < placed.size(); j += 2) {
            expect.push_back(placed[j + 1]);
            expect.push_back(placed[j]);
        }
        for (const LayoutPiece &p : expect) {
            pieces_.push_back({p.offset, p.length});
        }
        layout.kind       = AXON_LAYOUT_IOV;
        layout.iov.pieces = pieces_.data();
        layout.iov.count  = pieces_.size();
    }

    int                              kind_;
    std::vector<axon_layout_piece_t> pieces_, inner_pieces_;
    axon_layout_t                    inner_;
    ptrdiff_t                        lo_, hi_;
    uint8_t                         *region_;
    size_t                           region_len_;
};

inline std::unique_ptr<LayoutCase> make_layout(int kind, size_t want)
{
    return std::unique_ptr<LayoutCase>(new LayoutCase(kind, want));
}

/* Request parameters that give the call a layout. */
inline axon_request_param_t layout_param(const LayoutCase &lc)
{
    axon_request_param_t param = {};
    param.flags  = AXON_REQ_FLAG_LAYOUT;
    param.layout = &lc.layout;
    return param;
}

}  // namespace

#endif
