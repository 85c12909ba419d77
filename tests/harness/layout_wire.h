/*
 * A layout (axon.h's axon_layout_t, two levels at most) as a flat list of
 * 64-bit words, so a test can send one over the harness socket and the
 * target process map the same layout (rma_env.h's kCmdMapLayout). Words:
 *   iov:     AXON_LAYOUT_IOV, count, then offset and length of each piece
 *   strided: AXON_LAYOUT_STRIDED, count, block_length, stride, has_block,
 *            then the block's own words when has_block is 1
 */
#ifndef AXON_TEST_LAYOUT_WIRE_H
#define AXON_TEST_LAYOUT_WIRE_H

#include <stdint.h>
#include <string.h>

#include <vector>

#include "axon.h"

namespace {

inline void layout_encode(const axon_layout_t &l, std::vector<int64_t> &out)
{
    out.push_back(l.kind);
    if (l.kind == AXON_LAYOUT_IOV) {
        out.push_back((int64_t)l.iov.count);
        for (size_t i = 0; i < l.iov.count; ++i) {
            out.push_back((int64_t)l.iov.pieces[i].offset);
            out.push_back((int64_t)l.iov.pieces[i].length);
        }
    } else {
        out.push_back((int64_t)l.strided.count);
        out.push_back((int64_t)l.strided.block_length);
        out.push_back((int64_t)l.strided.stride);
        out.push_back(l.strided.block != nullptr);
        if (l.strided.block != nullptr) {
            layout_encode(*l.strided.block, out);
        }
    }
}

/* A layout decoded from words, with its storage; not copyable (it points into itself). */
class WireLayout {
public:
    WireLayout() {}
    WireLayout(const WireLayout &) = delete;
    WireLayout &operator=(const WireLayout &) = delete;

    /* false: the words are not a layout of at most two levels */
    bool decode(const int64_t *w, size_t n)
    {
        size_t pos = 0;
        return level(w, n, pos, layout, pieces_[0], 0) && (pos == n);
    }

    /* Overwrite every field with garbage: a callee that kept a pointer would see it. */
    void clobber()
    {
        memset(&layout, 0xA5, sizeof(layout));
        memset(&inner_, 0xA5, sizeof(inner_));
        for (std::vector<axon_layout_piece_t> &p : pieces_) {
            if (!p.empty()) {
                memset(p.data(), 0xA5, p.size() * sizeof(p[0]));
            }
        }
    }

    axon_layout_t layout = {};

private:
    bool level(const int64_t *w, size_t n, size_t &pos, axon_layout_t &l,
               std::vector<axon_layout_piece_t> &pieces, int depth)
    {
        memset(&l, 0, sizeof(l));
        if (pos + 2 > n) {
            return false;
        }
        l.kind = (int)w[pos++];
        if (l.kind == AXON_LAYOUT_IOV) {
            size_t count = (size_t)w[pos++];
            if (count > (n - pos) / 2) {
                return false;
            }
            pieces.resize(count);
            for (axon_layout_piece_t &p : pieces) {
                p.offset = (ptrdiff_t)w[pos++];
                p.length = (size_t)w[pos++];
            }
            l.iov.pieces = pieces.data();
            l.iov.count  = count;
            return true;
        }
        if ((l.kind != AXON_LAYOUT_STRIDED) || (pos + 4 > n)) {
            return false;
        }
        l.strided.count        = (size_t)w[pos++];
        l.strided.block_length = (size_t)w[pos++];
        l.strided.stride       = (ptrdiff_t)w[pos++];
        if (w[pos++] == 0) {
            return true;
        }
        if (depth > 0) {
            return false;
        }
        l.strided.block = &inner_;
        return level(w, n, pos, inner_, pieces_[1], depth + 1);
    }

    axon_layout_t                    inner_ = {};
    std::vector<axon_layout_piece_t> pieces_[2];
};

}  // namespace

#endif
