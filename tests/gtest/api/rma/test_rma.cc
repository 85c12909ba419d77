/*
 * One-sided memory access and atomics over every lane that offers them,
 * written from api/axon.h alone: put/get integrity, flush and fence,
 * every atomic against a model written here from the header's comments,
 * concurrent atomics from several processes, bad keys and bad addresses,
 * a shm target that only sleeps, and a target killed mid-operation.
 *
 * The lanes, the target process and its regions, and the initiator's
 * Session are in rma_env.h. Lanes *_am force active messages for put and
 * get (AXON_RMA_PATH=am); lanes *_devamo run every atomic on the device of
 * an rc lane (AXON_ATOMIC_MODE=device, test_rma_device.cc has what is
 * particular to that mode), so every test here also checks device atomics.
 */
#include <gtest/gtest.h>

#include <poll.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "rma_env.h"

namespace {

const double kRunTimeout      = 50.0;  /* the multi-process test, within kPeerTimeout */
const double kDetectLimit     = 5.0;   /* target killed -> its requests complete */
const double kNoProgressLimit = 5.0;   /* shm: one operation on a target that only sleeps */


class Rma : public ::testing::TestWithParam<RmaParam> {
protected:
    Session s_;
};

const int kBigRegions[] = {kUserBig, kAllocBig};

/* ---------------------------------------------------------------- put / get */

TEST_P(Rma, PutGetIntegrity)
{
    const size_t kSizes[] = {1, 7, 8, 64, 4095, 4096, 65537, 1u << 20, 4u << 20};
    const size_t kLocalGuard = 64;

    ASSERT_NO_FATAL_FAILURE(s_.start(GetParam()));
    for (int r : kBigRegions) {
        for (size_t i = 0; i < sizeof(kSizes) / sizeof(kSizes[0]); ++i) {
            size_t   len  = kSizes[i];
            uint64_t off  = 2 * ((i * 37) % 97) + 1;  /* odd, below 200 */
            uint64_t seed = 100 * r + i + 1;
            std::string what = std::string(region_name(r)) + " region, " +
                               std::to_string(len) + " B at offset " + std::to_string(off);

            std::vector<uint8_t> out(len);
            fill_pat(out.data(), len, seed, 0);
            ASSERT_EQ(AXON_OK, s_.put(out.data(), len, s_.addr(r, off), s_.rkey[r])) << what;
            ASSERT_EQ(AXON_OK, s_.flush()) << what;
            EXPECT_EQ(-1, s_.target->check(r, off, len, seed, 0)) << "put, " << what;
            EXPECT_EQ(-1, s_.target->check_bg(r, off - 1, 1)) << "byte before, " << what;
            EXPECT_EQ(-1, s_.target->check_bg(r, off + len, 1)) << "byte after, " << what;

            s_.target->fill(r, off, len, seed + 7777, 0);
            std::vector<uint8_t> in(len + 2 * kLocalGuard, kGuardByte);
            ASSERT_EQ(AXON_OK, s_.get(in.data() + kLocalGuard, len, s_.addr(r, off),
                                      s_.rkey[r])) << what;
            EXPECT_EQ(-1, check_pat(in.data() + kLocalGuard, len, seed + 7777, 0))
                << "get, " << what;
            EXPECT_TRUE(std::all_of(in.begin(), in.begin() + kLocalGuard,
                                    [](uint8_t c) { return c == kGuardByte; }) &&
                        std::all_of(in.end() - kLocalGuard, in.end(),
                                    [](uint8_t c) { return c == kGuardByte; }))
                << "get wrote outside its buffer, " << what;
            s_.target->restore(r, off, len);
        }
        /* Zero bytes: nothing happens, successfully. */
        uint8_t byte = 0x5A;
        EXPECT_EQ(AXON_OK, s_.put(&byte, 0, s_.addr(r, 5), s_.rkey[r]));
        EXPECT_EQ(AXON_OK, s_.get(&byte, 0, s_.addr(r, 5), s_.rkey[r]));
        EXPECT_EQ(0x5A, byte);
        EXPECT_EQ(AXON_OK, s_.flush());
        EXPECT_EQ(-1, s_.target->check_bg(r, 0, 4096)) << region_name(r);
        EXPECT_EQ(-1, s_.target->guards(r)) << region_name(r);
    }
    s_.finish();
}

/* Gather into / scatter from one contiguous remote range. */
TEST_P(Rma, IovPutGet)
{
    const std::vector<std::vector<size_t>> kLists = {
        {1}, {3, 4096, 1}, {7, 0, 65537, 100}, {4095, 4097}, {262144, 262143, 1, 524289},
    };

    ASSERT_NO_FATAL_FAILURE(s_.start(GetParam()));
    for (int r : kBigRegions) {
        for (size_t k = 0; k < kLists.size(); ++k) {
            const std::vector<size_t> &lens  = kLists[k];
            uint64_t                   off   = 2 * k + 3;
            uint64_t                   seed  = 500 + 10 * r + k;
            size_t                     total = 0;
            std::vector<std::vector<uint8_t>> pieces;
            std::vector<axon_iov_t>           iov;
            std::string what = std::string(region_name(r)) + " region, list " +
                               std::to_string(k);

            for (size_t len : lens) {
                pieces.emplace_back(len + 1, kGuardByte);  /* +1: a guard, and never empty */
                fill_pat(pieces.back().data(), len, seed, total);
                total += len;
            }
            for (size_t j = 0; j < lens.size(); ++j) {
                iov.push_back({pieces[j].data(), lens[j]});
            }
            ASSERT_EQ(AXON_OK, s_.run([&](axon_request_h *rq) {
                return axon_put_iov_nb(s_.ep, iov.data(), iov.size(), s_.addr(r, off),
                                       s_.rkey[r], NULL, rq);
            })) << "put, " << what;
            ASSERT_EQ(AXON_OK, s_.flush());
            EXPECT_EQ(-1, s_.target->check(r, off, total, seed, 0)) << "put, " << what;
            EXPECT_EQ(-1, s_.target->check_bg(r, off + total, 1)) << "byte after, " << what;

            s_.target->fill(r, off, total, seed + 99, 0);
            for (auto &p : pieces) {
                std::fill(p.begin(), p.end(), kGuardByte);
            }
            ASSERT_EQ(AXON_OK, s_.run([&](axon_request_h *rq) {
                return axon_get_iov_nb(s_.ep, iov.data(), iov.size(), s_.addr(r, off),
                                       s_.rkey[r], NULL, rq);
            })) << "get, " << what;
            size_t start = 0;
            for (size_t j = 0; j < lens.size(); ++j) {
                EXPECT_EQ(-1, check_pat(pieces[j].data(), lens[j], seed + 99, start))
                    << "get, piece " << j << ", " << what;
                EXPECT_EQ(kGuardByte, pieces[j][lens[j]]) << "get overran piece " << j << ", "
                                                          << what;
                start += lens[j];
            }
            s_.target->restore(r, off, total);
        }
        EXPECT_EQ(-1, s_.target->guards(r));
    }
    s_.finish();
}

/* ---------------------------------------------------------------- flush and fence */

/*
 * Many puts and posted adds in flight, then one flush: once it completes,
 * every earlier operation has completed and the target (told only by a
 * command sent after the flush) sees every byte.
 */
TEST_P(Rma, FlushMakesEverythingVisible)
{
    const int      kPuts     = 48;
    const int      kCounters = 16;
    const uint64_t kCtrOff   = kBigLen - 4096;

    ASSERT_NO_FATAL_FAILURE(s_.start(GetParam()));
    for (int worker_flush = 0; worker_flush < 2; ++worker_flush) {
        for (int r : kBigRegions) {
            std::string what = std::string(worker_flush ? "worker" : "endpoint") +
                               " flush, " + region_name(r) + " region";
            std::vector<uint8_t> zeros(kCounters * 8, 0);
            s_.target->write(r, kCtrOff, zeros.data(), zeros.size());

            std::vector<std::vector<uint8_t>> bufs;
            std::vector<uint64_t>             offs, seeds, adds(kPuts);
            std::vector<axon_request_h>       reqs;
            std::vector<axon_status_t>        status;
            uint64_t                          sums[kCounters] = {0};
            uint64_t                          off = 11;
            bufs.reserve(kPuts);
            for (int i = 0; i < kPuts; ++i) {
                size_t len = ((size_t)i * 977 * 31) % 70000 + 1;
                bufs.emplace_back(len);
                seeds.push_back(9000 + 100 * worker_flush + 10 * r + i);
                offs.push_back(off);
                fill_pat(bufs.back().data(), len, seeds.back(), 0);
                axon_request_h req = nullptr;
                status.push_back(s_.start_op([&](axon_request_h *rq) {
                    return axon_put_nb(s_.ep, bufs.back().data(), len, s_.addr(r, off),
                                       s_.rkey[r], NULL, rq);
                }, &req));
                reqs.push_back(req);
                ASSERT_TRUE((status.back() == AXON_OK) || (status.back() == AXON_INPROGRESS))
                    << "put " << i << ": " << axon_status_string(status.back());
                off += len + 5;
                if (i % 3 == 0) {
                    adds[i]  = i + 1;
                    sums[i % kCounters] += adds[i];
                    status.push_back(s_.start_op([&](axon_request_h *rq) {
                        return axon_atomic_nb(s_.ep, AXON_ATOMIC_ADD, 8, &adds[i], NULL, NULL,
                                              s_.addr(r, kCtrOff + 8 * (i % kCounters)),
                                              s_.rkey[r], NULL, rq);
                    }, &req));
                    reqs.push_back(req);
                    ASSERT_TRUE((status.back() == AXON_OK) ||
                                (status.back() == AXON_INPROGRESS))
                        << "add " << i << ": " << axon_status_string(status.back());
                }
            }
            ASSERT_LT(off, kCtrOff);

            ASSERT_EQ(AXON_OK, s_.run([&](axon_request_h *rq) {
                return worker_flush ? axon_worker_flush_nb(s_.node.worker, NULL, rq)
                                    : axon_ep_flush_nb(s_.ep, NULL, rq);
            })) << what;
            /* No progress since the flush completed: what it covered is complete. */
            for (size_t j = 0; j < reqs.size(); ++j) {
                if (status[j] == AXON_INPROGRESS) {
                    EXPECT_NE(AXON_INPROGRESS, axon_request_test(reqs[j], NULL))
                        << "operation " << j << " still in flight after the flush, " << what;
                }
            }
            for (int i = 0; i < kPuts; ++i) {
                EXPECT_EQ(-1, s_.target->check(r, offs[i], bufs[i].size(), seeds[i], 0))
                    << "put " << i << " of " << bufs[i].size() << " B, " << what;
            }
            std::vector<uint8_t> ctr = s_.target->read(r, kCtrOff, kCounters * 8);
            ASSERT_EQ(kCounters * 8u, ctr.size());
            for (int c = 0; c < kCounters; ++c) {
                uint64_t v;
                memcpy(&v, ctr.data() + 8 * c, 8);
                EXPECT_EQ(sums[c], v) << "counter " << c << ", " << what;
            }
            for (size_t j = 0; j < reqs.size(); ++j) {
                EXPECT_EQ(AXON_OK, s_.wait(status[j], reqs[j])) << "operation " << j;
            }
            s_.target->restore(r, 0, kBigLen);
        }
    }
    s_.finish();
}

/*
 * A put of data, a fence, a put of a flag: a target that sees the flag
 * sees the data.
 */
TEST_P(Rma, FenceOrdersPuts)
{
    const int kRounds = 4;

    ASSERT_NO_FATAL_FAILURE(s_.start(GetParam()));
    for (int r : kBigRegions) {
        for (int round = 0; round < kRounds; ++round) {
            size_t   len      = 65537 + 4096 * round;
            uint64_t off      = 4096 + 100000 * round + 1;
            uint64_t flag_off = 3 * 1048576 + 64 * round;
            uint64_t flag     = 0xF1A6000000000000ull + 16 * r + round;
            uint64_t seed     = 7000 + 10 * r + round;
            std::vector<uint8_t> data(len);
            fill_pat(data.data(), len, seed, 0);

            s_.target->wait_flag_begin(r, flag_off, flag, off, len, seed);
            axon_request_h dreq = nullptr, freq = nullptr;
            axon_status_t  dst  = s_.start_op([&](axon_request_h *rq) {
                return axon_put_nb(s_.ep, data.data(), len, s_.addr(r, off), s_.rkey[r], NULL,
                                   rq);
            }, &dreq);
            EXPECT_EQ(AXON_OK, axon_worker_fence(s_.node.worker));
            axon_status_t fst = s_.start_op([&](axon_request_h *rq) {
                return axon_put_nb(s_.ep, &flag, sizeof(flag), s_.addr(r, flag_off), s_.rkey[r],
                                   NULL, rq);
            }, &freq);
            EXPECT_EQ(AXON_OK, s_.wait(dst, dreq)) << "data put";
            EXPECT_EQ(AXON_OK, s_.wait(fst, freq)) << "flag put";
            /* The target needs our progress for nothing more, but keep it going. */
            EXPECT_EQ(-1, s_.target->wait_flag_end())
                << region_name(r) << " region, round " << round
                << " (-2: the flag never arrived; else the first byte missing)";
            s_.target->restore(r, off, len);
            s_.target->restore(r, flag_off, 8);
        }
    }
    EXPECT_EQ(AXON_OK, s_.flush());
    s_.finish();
}

/*
 * Posted atomics that turn 32 zero bytes into a pattern (add, xor, a
 * two-field multi-field add), a fence, a put of a flag: a target that sees
 * the flag sees the pattern. In device mode the atomics travel the rc
 * lane and the flag may not (shm, self): the fence orders the lanes.
 */
TEST_P(Rma, FenceOrdersAtomics)
{
    const int      kRounds      = 4;
    const uint64_t kBoundary[2] = {0, 0};  /* 16 bytes, two 64-bit fields */

    ASSERT_NO_FATAL_FAILURE(s_.start(GetParam()));
    for (int r : kBigRegions) {
        for (int round = 0; round < kRounds; ++round) {
            uint64_t off      = 8192 + 64 * round;
            uint64_t flag_off = 3 * 1048576 + 4096 + 64 * round;
            uint64_t flag     = 0xF1A6100000000000ull + 16 * r + round;
            uint64_t seed     = 7500 + 10 * r + round;
            uint64_t v[4], zeros[4] = {0, 0, 0, 0};
            fill_pat(reinterpret_cast<uint8_t *>(v), sizeof(v), seed, 0);
            s_.target->write(r, off, zeros, sizeof(zeros));

            s_.target->wait_flag_begin(r, flag_off, flag, off, sizeof(v), seed);
            std::vector<axon_request_h> reqs(4, nullptr);
            std::vector<axon_status_t>  st(4);
            st[0] = s_.start_op([&](axon_request_h *rq) {
                return axon_atomic_nb(s_.ep, AXON_ATOMIC_ADD, 8, &v[0], NULL, NULL,
                                      s_.addr(r, off), s_.rkey[r], NULL, rq);
            }, &reqs[0]);
            st[1] = s_.start_op([&](axon_request_h *rq) {
                return axon_atomic_nb(s_.ep, AXON_ATOMIC_XOR, 8, &v[1], NULL, NULL,
                                      s_.addr(r, off + 8), s_.rkey[r], NULL, rq);
            }, &reqs[1]);
            st[2] = s_.start_op([&](axon_request_h *rq) {
                return axon_atomic_mfadd_nb(s_.ep, 16, &v[2], kBoundary, NULL,
                                            s_.addr(r, off + 16), s_.rkey[r], NULL, rq);
            }, &reqs[2]);
            EXPECT_EQ(AXON_OK, axon_worker_fence(s_.node.worker));
            st[3] = s_.start_op([&](axon_request_h *rq) {
                return axon_put_nb(s_.ep, &flag, sizeof(flag), s_.addr(r, flag_off), s_.rkey[r],
                                   NULL, rq);
            }, &reqs[3]);
            for (int k = 0; k < 4; ++k) {
                EXPECT_EQ(AXON_OK, s_.wait(st[k], reqs[k])) << "operation " << k;
            }
            EXPECT_EQ(-1, s_.target->wait_flag_end())
                << region_name(r) << " region, round " << round
                << " (-2: the flag never arrived; else the first byte the atomics missed)";
            s_.target->restore(r, off, sizeof(v));
            s_.target->restore(r, flag_off, 8);
        }
    }
    EXPECT_EQ(AXON_OK, s_.flush());
    s_.finish();
}

/* ---------------------------------------------------------------- atomics */

/* Every public atomic, 4 and 8 bytes, post and fetch forms, in both halves of a word. */
TEST_P(Rma, AtomicsMatchModel)
{
    const axon_atomic_op_t kOps[] = {AXON_ATOMIC_ADD, AXON_ATOMIC_AND, AXON_ATOMIC_OR,
                                     AXON_ATOMIC_XOR, AXON_ATOMIC_SWAP, AXON_ATOMIC_CSWAP};
    std::mt19937_64 rng(0xA70);
    int             slot = 0;

    ASSERT_NO_FATAL_FAILURE(s_.start(GetParam()));
    for (int r : kBigRegions) {
        for (size_t size : {4, 8}) {
            for (unsigned half : {0u, 4u}) {
                if ((size == 8) && (half != 0)) {
                    continue;
                }
                for (axon_atomic_op_t op : kOps) {
                    for (int fetch = 0; fetch < 2; ++fetch) {
                        bool fetching_only = (op == AXON_ATOMIC_SWAP) ||
                                             (op == AXON_ATOMIC_CSWAP);
                        if (fetching_only && !fetch) {
                            continue;
                        }
                        for (int equal = 0; equal < ((op == AXON_ATOMIC_CSWAP) ? 2 : 1);
                             ++equal) {
                            uint64_t off = 16384 + 32 * slot++;
                            uint64_t loc = off + 8 + half;
                            uint8_t  init[32];
                            for (uint8_t &b : init) {
                                b = (uint8_t)rng();
                            }
                            s_.target->write(r, off, init, sizeof(init));

                            uint64_t mask = (size == 4) ? 0xffffffffull : ~0ull;
                            uint64_t old = 0, value = rng() & mask, compare;
                            memcpy(&old, init + 8 + half, size);
                            compare = equal ? old : (old ^ (1ull << (rng() % (size * 8))));
                            if (op == AXON_ATOMIC_ADD) {
                                value &= 0xffffff;  /* carries across bytes, not always out */
                            }
                            uint32_t v32 = (uint32_t)value, c32 = (uint32_t)compare;
                            uint32_t r32 = 0xdeadbeef;
                            uint64_t r64 = 0xdeadbeefdeadbeefull;
                            void    *result = fetch ? ((size == 4) ? (void *)&r32 : (void *)&r64)
                                                    : nullptr;
                            std::string what = std::string(region_name(r)) + " region, op " +
                                               std::to_string(op) + ", " +
                                               std::to_string(size) + " B at +" +
                                               std::to_string(8 + half) +
                                               (fetch ? ", fetching" : ", posted") +
                                               ((op == AXON_ATOMIC_CSWAP) ?
                                                (equal ? ", equal" : ", not equal") : "");
                            ASSERT_EQ(AXON_OK, s_.atomic(op, size,
                                                         (size == 4) ? (void *)&v32 : &value,
                                                         (size == 4) ? (void *)&c32 : &compare,
                                                         result, s_.addr(r, loc), s_.rkey[r]))
                                << what;
                            if (!fetch) {
                                ASSERT_EQ(AXON_OK, s_.flush());
                            } else {
                                EXPECT_EQ(old, (size == 4) ? (uint64_t)r32 : r64) << what;
                            }
                            uint64_t nv = model_atomic(op, size, old, value, compare);
                            uint8_t  expect[32];
                            memcpy(expect, init, sizeof(expect));
                            memcpy(expect + 8 + half, &nv, size);
                            std::vector<uint8_t> got = s_.target->read(r, off, 32);
                            ASSERT_EQ(32u, got.size());
                            EXPECT_EQ(0, memcmp(expect, got.data(), 32))
                                << what << ": old 0x" << std::hex << old << " operand 0x"
                                << value << " expected 0x" << nv;
                        }
                    }
                }
            }
        }
    }
    s_.finish();
}

uint64_t random_mask(std::mt19937_64 &rng)
{
    switch (rng() % 5) {
    case 0:  return 0;
    case 1:  return ~0ull;
    case 2:  return rng() & rng() & rng();  /* sparse */
    case 3:  return rng() | rng();          /* dense */
    default: return rng();
    }
}

/*
 * Masked compare-and-swap and multi-field fetch-and-add on 8, 16 and 32
 * bytes with random operands, masks and field boundaries, against the
 * model: every fetched value, and the memory at the end.
 */
TEST_P(Rma, ExtendedAtomicsMatchModel)
{
    const int kLocs      = 16;    /* one operation in flight on each */
    const int kOpsPerSize = 2000;

    ASSERT_NO_FATAL_FAILURE(s_.start(GetParam()));
    std::mt19937_64 rng(0xE87);
    for (int r : kBigRegions) {
        for (size_t size : {8, 16, 32}) {
            const int words = (int)size / 8;
            uint64_t  area  = 65536 + 8192 * words;
            std::vector<uint8_t> init(kLocs * 64);
            for (uint8_t &b : init) {
                b = (uint8_t)rng();
            }
            s_.target->write(r, area, init.data(), init.size());
            std::vector<std::array<uint64_t, 4>> model(kLocs);
            for (int l = 0; l < kLocs; ++l) {
                memcpy(model[l].data(), init.data() + 64 * l, size);
            }

            struct Op {
                bool           mfadd;
                uint64_t       a[4], b[4], c[4], d[4];
                uint64_t       result[4];
                axon_request_h req;
                axon_status_t  status;
            };
            std::vector<Op> ops(kLocs);
            int swapped = 0, kept = 0;
            for (int done = 0; done < kOpsPerSize; done += kLocs) {
                for (int l = 0; l < kLocs; ++l) {
                    Op &o   = ops[l];
                    o.mfadd = (rng() % 2) != 0;
                    for (int w = 0; w < 4; ++w) {
                        o.result[w] = 0x5555555555555555ull;
                    }
                    uint64_t raddr = s_.addr(r, area + 64 * l);
                    if (o.mfadd) {
                        for (int w = 0; w < words; ++w) {
                            o.a[w] = rng();             /* add */
                            o.b[w] = random_mask(rng);  /* boundaries */
                        }
                        o.status = s_.start_op([&](axon_request_h *rq) {
                            return axon_atomic_mfadd_nb(s_.ep, size, o.a, o.b, o.result, raddr,
                                                        s_.rkey[r], NULL, rq);
                        }, &o.req);
                    } else {
                        bool want_equal = (rng() % 2) != 0;
                        for (int w = 0; w < words; ++w) {
                            o.b[w] = random_mask(rng);              /* compare mask */
                            o.a[w] = model[l][w] ^ (rng() & ~o.b[w]);  /* compare */
                            o.c[w] = rng();                         /* swap */
                            o.d[w] = random_mask(rng);              /* swap mask */
                        }
                        if (!want_equal) {
                            int w = (int)(rng() % words);
                            if (o.b[w] != 0) {
                                uint64_t bits = o.b[w];
                                for (unsigned skip = rng() % 64; skip > 0 && (bits & (bits - 1));
                                     --skip) {
                                    bits &= bits - 1;
                                }
                                o.a[w] ^= bits & -bits;  /* one bit that is compared */
                            }
                        }
                        o.status = s_.start_op([&](axon_request_h *rq) {
                            return axon_atomic_masked_cswap_nb(s_.ep, size, o.a, o.b, o.c, o.d,
                                                               o.result, raddr, s_.rkey[r],
                                                               NULL, rq);
                        }, &o.req);
                    }
                    ASSERT_TRUE((o.status == AXON_OK) || (o.status == AXON_INPROGRESS))
                        << axon_status_string(o.status);
                }
                for (int l = 0; l < kLocs; ++l) {
                    Op &o = ops[l];
                    ASSERT_EQ(AXON_OK, s_.wait(o.status, o.req));
                    std::string what = std::string(region_name(r)) + " region, " +
                                       std::to_string(size) + " B " +
                                       (o.mfadd ? "mfadd" : "masked cswap") + ", location " +
                                       std::to_string(l) + ", op " + std::to_string(done + l);
                    for (int w = 0; w < words; ++w) {
                        ASSERT_EQ(model[l][w], o.result[w]) << "fetched word " << w << ", "
                                                            << what;
                    }
                    for (int w = words; w < 4; ++w) {
                        ASSERT_EQ(0x5555555555555555ull, o.result[w])
                            << "result written past " << size << " B, " << what;
                    }
                    uint64_t next[4];
                    if (o.mfadd) {
                        model_mfadd(words, model[l].data(), o.a, o.b, next);
                    } else {
                        model_masked_cswap(words, model[l].data(), o.a, o.b, o.c, o.d, next);
                        bool eq = true;
                        for (int w = 0; w < words; ++w) {
                            eq = eq && !((model[l][w] ^ o.a[w]) & o.b[w]);
                        }
                        (eq ? swapped : kept)++;
                    }
                    memcpy(model[l].data(), next, size);
                }
            }
            EXPECT_GT(swapped, kOpsPerSize / 8) << "too few masked swaps took place";
            EXPECT_GT(kept, kOpsPerSize / 8) << "too few masked swaps were refused";
            std::vector<uint8_t> got = s_.target->read(r, area, init.size());
            ASSERT_EQ(init.size(), got.size());
            for (int l = 0; l < kLocs; ++l) {
                EXPECT_EQ(0, memcmp(model[l].data(), got.data() + 64 * l, size))
                    << "final memory, " << size << " B, location " << l;
                EXPECT_EQ(0, memcmp(init.data() + 64 * l + size, got.data() + 64 * l + size,
                                    64 - size))
                    << "bytes after the operand changed, " << size << " B, location " << l;
            }
        }
    }
    s_.finish();
}

/* ---------------------------------------------------------------- bad addresses and arguments */

/*
 * Ranges outside the key's (past the end, before the start, across either
 * edge, too long, wrapping around): AXON_ERR_REMOTE_ACCESS, at once or on
 * completion, and not a byte written on either side.
 */
TEST_P(Rma, OutOfRangeTouchesNothing)
{
    ASSERT_NO_FATAL_FAILURE(s_.start(GetParam()));
    for (int r : kBigRegions) {
        const uint64_t B = s_.info[r].base, L = s_.info[r].length;
        std::vector<uint8_t> buf(L + 1, 0x5A);
        for (const OutsideRange &c : outside_ranges(B, L)) {
            std::string what = std::string(region_name(r)) + " region, " + c.what;
            EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, s_.put(buf.data(), c.len, c.addr, s_.rkey[r]))
                << "put, " << what;
            EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, s_.get(buf.data(), c.len, c.addr, s_.rkey[r]))
                << "get, " << what;
            EXPECT_TRUE(all_bytes_are(buf.data(), buf.size(), 0x5A))
                << "a failed get wrote the local buffer, " << what;
        }
        /* iov: the pieces together cross the end */
        axon_iov_t iov[2] = {{buf.data(), 2}, {buf.data() + 2, 3}};
        EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, s_.run([&](axon_request_h *rq) {
            return axon_put_iov_nb(s_.ep, iov, 2, B + L - 4, s_.rkey[r], NULL, rq);
        })) << "put_iov across the end";
        EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, s_.run([&](axon_request_h *rq) {
            return axon_get_iov_nb(s_.ep, iov, 2, B + L - 4, s_.rkey[r], NULL, rq);
        })) << "get_iov across the end";

        /* atomics outside */
        uint64_t v[4] = {1, 1, 1, 1}, res[4];
        uint64_t ones[4] = {~0ull, ~0ull, ~0ull, ~0ull};
        EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, fetch_add8(s_, B + L, s_.rkey[r], res)) << "past end";
        EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, fetch_add8(s_, B - 8, s_.rkey[r], res)) << "before";
        EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, s_.atomic(AXON_ATOMIC_ADD, 4, v, NULL, NULL, B + L,
                                                    s_.rkey[r])) << "posted add past the end";
        EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, s_.masked_cswap(32, v, ones, v, ones, res, B + L,
                                                          s_.rkey[r])) << "masked cswap";
        EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, s_.mfadd(16, v, v, res, B - 16, s_.rkey[r]))
            << "mfadd before the start";
        EXPECT_EQ(AXON_OK, s_.flush());

        EXPECT_EQ(-1, s_.target->check_bg(r, 0, 64)) << region_name(r) << ": first bytes";
        EXPECT_EQ(-1, s_.target->check_bg(r, L - 64, 64)) << region_name(r) << ": last bytes";
        EXPECT_EQ(-1, s_.target->guards(r)) << region_name(r) << ": guards";
    }
    s_.finish();
}

/* Misaligned atomics, sizes that do not exist, missing operands: refused at once. */
TEST_P(Rma, BadAtomicArgumentsAreRefused)
{
    ASSERT_NO_FATAL_FAILURE(s_.start(GetParam()));
    const uint64_t B = s_.info[kUserBig].base, inside = B + 64;
    axon_rkey_h    rk = s_.rkey[kUserBig];
    uint64_t       v[4] = {1, 2, 3, 4}, res[4];

    /* s_'s calls wait out an operation that is not refused, so it cannot outlive the test. */
    auto refused = [&](axon_status_t status, const std::string &what) {
        EXPECT_EQ(AXON_ERR_INVALID_PARAM, status) << what;
    };
    refused(s_.atomic(AXON_ATOMIC_ADD, 4, v, NULL, res, B + 2, rk), "4 B at +2");
    refused(s_.atomic(AXON_ATOMIC_ADD, 8, v, NULL, res, B + 4, rk), "8 B at +4");
    refused(s_.masked_cswap(16, v, v, v, v, res, B + 8, rk), "16 B masked cswap at +8");
    refused(s_.mfadd(32, v, v, res, B + 16, rk), "32 B mfadd at +16");
    for (size_t size : {0, 1, 2, 3, 5, 16, 32}) {
        refused(s_.atomic(AXON_ATOMIC_ADD, size, v, NULL, res, inside, rk),
                "atomic of " + std::to_string(size) + " B");
    }
    for (size_t size : {0, 4, 24, 48, 64}) {
        std::string what = "extended atomic of " + std::to_string(size) + " B";
        refused(s_.masked_cswap(size, v, v, v, v, res, inside, rk), what);
        refused(s_.mfadd(size, v, v, res, inside, rk), what);
    }
    refused(s_.atomic(AXON_ATOMIC_LAST, 8, v, NULL, res, inside, rk), "op AXON_ATOMIC_LAST");
    refused(s_.atomic((axon_atomic_op_t)99, 8, v, NULL, res, inside, rk), "op 99");
    refused(s_.atomic(AXON_ATOMIC_SWAP, 8, v, NULL, NULL, inside, rk), "swap without a result");
    refused(s_.atomic(AXON_ATOMIC_CSWAP, 8, v, v, NULL, inside, rk), "cswap without a result");
    refused(s_.atomic(AXON_ATOMIC_CSWAP, 8, v, NULL, res, inside, rk), "cswap without compare");
    refused(s_.atomic(AXON_ATOMIC_ADD, 8, NULL, NULL, res, inside, rk), "add without a value");
    refused(s_.masked_cswap(8, NULL, v, v, v, res, inside, rk), "masked cswap without compare");
    refused(s_.masked_cswap(8, v, NULL, v, v, res, inside, rk),
            "masked cswap without compare mask");
    refused(s_.masked_cswap(8, v, v, NULL, v, res, inside, rk), "masked cswap without swap");
    refused(s_.masked_cswap(8, v, v, v, NULL, res, inside, rk), "masked cswap without swap mask");
    refused(s_.mfadd(8, NULL, v, res, inside, rk), "mfadd without add");
    refused(s_.mfadd(8, v, NULL, res, inside, rk), "mfadd without boundaries");
    refused(s_.atomic(AXON_ATOMIC_ADD, 8, v, NULL, res, inside, NULL), "atomic without a key");
    refused(s_.put(v, 8, inside, NULL), "put without a key");
    refused(s_.get(v, 8, inside, NULL), "get without a key");

    EXPECT_EQ(AXON_OK, s_.flush());
    EXPECT_EQ(-1, s_.target->check_bg(kUserBig, 0, 256)) << "a refused operation wrote";
    s_.finish();
}

/* ---------------------------------------------------------------- bad keys */

/* Buffers that are not keys are refused at unpack; no flipped byte crashes it. */
TEST_P(Rma, CorruptKeysAreRefused)
{
    ASSERT_NO_FATAL_FAILURE(s_.start(GetParam()));
    const std::vector<uint8_t> &key = s_.keys[kUserBig];
    axon_rkey_h                 rk  = nullptr;
    std::vector<uint8_t>        bad;

    EXPECT_EQ(AXON_ERR_IO_FORMAT, axon_ep_rkey_unpack(s_.ep, key.data(), 0, &rk)) << "0 bytes";
    for (size_t n : {(size_t)1, (size_t)4, (size_t)8, (size_t)16, key.size() / 2,
                     key.size() - 1}) {
        if (n >= key.size()) {
            continue;
        }
        EXPECT_EQ(AXON_ERR_IO_FORMAT, axon_ep_rkey_unpack(s_.ep, key.data(), n, &rk))
            << "truncated to " << n << " of " << key.size() << " bytes";
    }
    for (size_t i = 0; i < 4 && i < key.size(); ++i) {
        bad = key;
        bad[i] ^= 0x40;
        EXPECT_EQ(AXON_ERR_IO_FORMAT, axon_ep_rkey_unpack(s_.ep, bad.data(), bad.size(), &rk))
            << "byte " << i << " of the magic flipped";
    }
    std::mt19937_64 rng(0x6E7);
    bad.assign(key.size(), 0);
    EXPECT_EQ(AXON_ERR_IO_FORMAT, axon_ep_rkey_unpack(s_.ep, bad.data(), bad.size(), &rk))
        << "zeros";
    for (uint8_t &b : bad) {
        b = (uint8_t)rng();
    }
    EXPECT_EQ(AXON_ERR_IO_FORMAT, axon_ep_rkey_unpack(s_.ep, bad.data(), bad.size(), &rk))
        << "random bytes";

    /* Any one byte changed: refused or accepted, never a crash (no operation here). */
    int accepted = 0;
    for (size_t i = 0; i < key.size(); ++i) {
        bad = key;
        bad[i] ^= 0xFF;
        rk = nullptr;
        axon_status_t status = axon_ep_rkey_unpack(s_.ep, bad.data(), bad.size(), &rk);
        EXPECT_TRUE((status == AXON_OK) || (status < 0)) << "byte " << i;
        if (status == AXON_OK) {
            ++accepted;
            axon_rkey_destroy(rk);
        }
    }
    printf("[rma] %s: %d of %zu one-byte corruptions of a %zu-byte key unpack\n",
           GetParam().label, accepted, key.size(), key.size());

    /* The real key still works. */
    uint64_t old = 0;
    EXPECT_EQ(AXON_OK, fetch_add8(s_, s_.addr(kUserBig, 0), s_.rkey[kUserBig], &old));
    EXPECT_EQ(bg_value(kUserBig, 0, 8), old);
    s_.finish();
}

/*
 * Keys of memory the target unmapped: the small allocated region freed, the
 * small user region mapped again at the same address (so with a new token).
 * Operations that go through the target (active messages) fail with
 * AXON_ERR_REMOTE_ACCESS: fetching ones at once, a put at the latest at the
 * next flush. Where the initiator reaches the memory itself, two cases may
 * still work and are only reported: user memory mapped again (self, shm
 * single copy: it is legitimately mapped) and a segment this process had
 * attached before the unmap (SHM, allocated or shared pages: it lives on,
 * orphaned, and the owner's memory is private again); a key unpacked
 * after the unmap must fail there too. rc's RDMA on a dead registration
 * breaks the connection (a verbs remote access error), so on rc every
 * failure counts, whatever its status. Device atomic mode: the device
 * refuses every stale key (its registration is gone, remapped or not); as
 * that breaks the endpoint, the atomics come last, after every put and get
 * was checked, and every failure counts.
 */
TEST_P(Rma, StaleKeysFail)
{
    ASSERT_NO_FATAL_FAILURE(s_.start(GetParam()));
    EXPECT_EQ(0, s_.target->unmap(kAllocSmall));
    EXPECT_EQ(0, s_.target->remap(kUserSmall));
    const bool rc  = (GetParam().tl() == "rc") || (GetParam().tl() == "rdmacm") ||
                     (GetParam().tl() == "dc");  /* RDMA: a refused key breaks the endpoint */
    const bool dev = GetParam().device_amo();    /* atomics by RDMA */
    struct AmoCase {
        std::string what;
        axon_rkey_h rk;
        bool        fresh;
        uint64_t    raddr;
    };
    std::vector<AmoCase> amo_cases;

    for (int r : {kUserSmall, kAllocSmall}) {
        for (int fresh = 0; fresh < 2; ++fresh) {
            if (!fresh && s_.self && (r == kAllocSmall)) {
                continue;  /* a local key to freed memory: using it is the caller's bug */
            }
            std::string what = std::string(region_name(r)) + " region, key unpacked " +
                               (fresh ? "after" : "before") + " the unmap";
            axon_rkey_h rk = s_.rkey[r];
            if (fresh) {
                axon_status_t status = axon_ep_rkey_unpack(s_.ep, s_.keys[r].data(),
                                                           s_.keys[r].size(), &rk);
                printf("[rma] %s: %s: unpack: %s\n", GetParam().label, what.c_str(),
                       axon_status_string(status));
                if (status != AXON_OK) {
                    if (!rc) {  /* rc: the connection may be gone already */
                        EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, status) << what;
                    }
                    continue;
                }
            }
            axon_rma_path_t path = rk->path;
            bool lenient = ((r == kUserSmall) &&
                            ((path == AXON_RMA_PATH_LOCAL) ||
                             ((path == AXON_RMA_PATH_ZCOPY) && !rc))) ||
                           (!fresh && (path == AXON_RMA_PATH_SHM));  /* allocated or shared */

            uint64_t      old = 0, word = 0x1122334455667788ull;
            axon_status_t st[3];
            st[0] = s_.get(&word, 8, s_.addr(r, 192), rk);
            st[1] = s_.put(&word, 8, s_.addr(r, 128), rk);
            if (st[1] == AXON_OK) {
                st[1] = s_.flush();  /* a put's failure shows at the next flush */
            }
            if (!dev) {
                st[2] = fetch_add8(s_, s_.addr(r, 64), rk, &old);
            }
            const char *names[3] = {"get", "put (+ flush)", "fetch-add"};
            for (int k = 0; k < (dev ? 2 : 3); ++k) {
                printf("[rma] %s: %s (path %d), %s: %s\n", GetParam().label, what.c_str(),
                       (int)path, names[k], axon_status_string(st[k]));
                if (lenient) {
                    continue;
                }
                if (rc) {
                    EXPECT_LT(st[k], 0) << names[k] << ", " << what;
                } else {
                    EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, st[k]) << names[k] << ", " << what;
                }
            }
            if (dev) {
                amo_cases.push_back({what, rk, fresh != 0, s_.addr(r, 64)});
            } else if (fresh) {
                axon_rkey_destroy(rk);
            }
        }
    }
    for (const AmoCase &c : amo_cases) {
        uint64_t      old = 0;
        axon_status_t st  = fetch_add8(s_, c.raddr, c.rk, &old);
        printf("[rma] %s: %s, device fetch-add: %s\n", GetParam().label, c.what.c_str(),
               axon_status_string(st));
        EXPECT_LT(st, 0) << "device fetch-add, " << c.what;
        if (c.fresh) {
            axon_rkey_destroy(c.rk);
        }
    }
    EXPECT_EQ(-1, s_.target->guards(kUserSmall));
    if (!s_.self && (s_.path(kUserSmall) == AXON_RMA_PATH_AM)) {
        EXPECT_EQ(-1, s_.target->check_bg(kUserSmall, 0, kSmallLen))
            << "an operation with a dead token changed the memory mapped again";
    }
    EXPECT_EQ(-1, s_.target->check_bg(kUserBig, 0, 4096)) << "another region changed";
    s_.finish(rc || dev);
}

/* FNV-1a of a key's body into its last 8 bytes (rkey.c's format): to forge keys. */
void key_fix_checksum(std::vector<uint8_t> &k)
{
    uint64_t h   = 0xcbf29ce484222325ull;
    size_t   end = k.size() - 8;

    for (size_t i = 0; i < end; ++i) {
        h ^= k[i];
        h *= 0x100000001b3ull;
    }
    for (int i = 0; i < 8; ++i) {
        k[end + i] = (uint8_t)(h >> (8 * i));
    }
}

/* The key with every domain entry's key cut to its first half (rkey_format.h). */
std::vector<uint8_t> key_cut_entries(const std::vector<uint8_t> &k)
{
    const size_t kHdr = 72, kEntryHdr = 52;   /* key format 4 */
    unsigned workers = k[12] | (k[13] << 8), entries = k[14] | (k[15] << 8);
    size_t   pos     = kHdr + 8 * (size_t)workers;
    std::vector<uint8_t> out(k.begin(), k.begin() + pos);

    for (unsigned e = 0; e < entries; ++e) {
        unsigned len = k[pos + 2] | (k[pos + 3] << 8), half = (len + 1) / 2;
        out.insert(out.end(), k.begin() + pos, k.begin() + pos + kEntryHdr + half);
        out[out.size() - (kEntryHdr + half) + 2] = (uint8_t)half;
        out[out.size() - (kEntryHdr + half) + 3] = (uint8_t)(half >> 8);
        pos += kEntryHdr + len;
    }
    out.insert(out.end(), 8, 0);   /* the checksum */
    for (int i = 0; i < 4; ++i) {
        out[8 + i] = (uint8_t)(out.size() >> (8 * i));
    }
    key_fix_checksum(out);
    return out;
}

/*
 * Domain entries half their domain's key, checksum right: refused at
 * unpack, or (a path that reads no entry) every operation still exact. rc
 * read its 21-byte key whatever the entry held, and took what followed.
 */
TEST_P(Rma, ShortDomainEntriesAreRefused)
{
    ASSERT_NO_FATAL_FAILURE(s_.start(GetParam()));
    std::vector<uint8_t> cut = key_cut_entries(s_.keys[kUserBig]);
    axon_rkey_h          rk  = nullptr;

    axon_status_t status = axon_ep_rkey_unpack(s_.ep, cut.data(), cut.size(), &rk);
    if (status == AXON_OK) {
        uint64_t word = 0x5A5A5A5A12345678ull, back = 0, old = 0;
        EXPECT_EQ(AXON_OK, s_.put(&word, 8, s_.addr(kUserBig, 64), rk));
        EXPECT_EQ(AXON_OK, s_.flush());
        EXPECT_EQ(AXON_OK, s_.get(&back, 8, s_.addr(kUserBig, 64), rk));
        EXPECT_EQ(word, back);
        EXPECT_EQ(AXON_OK, fetch_add8(s_, s_.addr(kUserBig, 128), rk, &old));
        EXPECT_EQ(bg_value(kUserBig, 128, 8), old);
        axon_rkey_destroy(rk);
    } else {
        EXPECT_EQ(AXON_ERR_IO_FORMAT, status);
    }
    printf("[rma] %s: a key with its domain entries cut to half: %s\n", GetParam().label,
           (status == AXON_OK) ? "unpacked, its path reads no entry" : "refused at unpack");
    s_.finish();
}

/*
 * Forged keys: each byte of a big region's key changed in turn, the
 * checksum made right again, so only the real checks stand between the key
 * and the memory: the target's token and range check (active messages),
 * the owner's mapping table (shm single copy and attached segments, at
 * unpack), the token and exact range of our own mapping (self), the
 * registration at the device (rc's RDMA and device atomics). A forgery is
 * refused at unpack, or its operations (put + flush, get, fetch-add, on 16
 * bytes the real key names) fail or reach exactly those bytes; nothing
 * else changes. Where a failure breaks the endpoint (rc: a remote access
 * error leaves the QP in error) the next forgery gets a new one.
 */
TEST_P(Rma, ForgedKeysTouchNothing)
{
    ASSERT_NO_FATAL_FAILURE(s_.start(GetParam()));
    const uint64_t off = 4096;
    int            reconnects = 0;

    for (int r : kBigRegions) {
        const std::vector<uint8_t> key = s_.keys[r];
        int worked = 0, refused = 0, failed = 0;

        ASSERT_GT(key.size(), 8u);
        for (size_t i = 0; i + 8 < key.size(); ++i) {
            std::vector<uint8_t> bad = key;
            bad[i] ^= 0xFF;
            key_fix_checksum(bad);
            std::string   what   = std::string(region_name(r)) + " key, byte " +
                                   std::to_string(i) + " forged";
            axon_rkey_h   rk     = nullptr;
            axon_status_t status = axon_ep_rkey_unpack(s_.ep, bad.data(), bad.size(), &rk);
            if (status != AXON_OK) {
                EXPECT_LT(status, 0) << what;
                ++refused;
                continue;
            }
            uint64_t      word = 0xA5A5A5A5A5A5A5A5ull ^ i, old;
            axon_status_t st[3];
            st[0] = s_.put(&word, 8, s_.addr(r, off), rk);
            if (st[0] == AXON_OK) {
                st[0] = s_.flush();  /* a put's failure shows at the next flush */
            }
            st[1] = s_.get(&word, 8, s_.addr(r, off), rk);
            st[2] = fetch_add8(s_, s_.addr(r, off + 8), rk, &old);
            bool all_ok = true;
            for (int k = 0; k < 3; ++k) {
                /* never a hang; no device reaching the key's memory: UNSUPPORTED */
                EXPECT_TRUE((st[k] == AXON_OK) || (st[k] < 0)) << what << ", operation " << k;
                EXPECT_NE(AXON_ERR_TIMED_OUT, st[k]) << what << ", operation " << k;
                all_ok = all_ok && (st[k] == AXON_OK);
            }
            all_ok ? ++worked : ++failed;
            axon_rkey_destroy(rk);
            if (s_.ep->status != AXON_OK) {
                ++reconnects;
                ASSERT_NO_FATAL_FAILURE(s_.reconnect()) << "after " << what;
            }
        }
        printf("[rma] %s: %s key: of %zu forged bytes %d refused at unpack, %d failed, "
               "%d still name the memory\n", GetParam().label, region_name(r), key.size() - 8,
               refused, failed, worked);
        EXPECT_GT(refused + failed, 0) << region_name(r);
    }
    if (reconnects > 0) {
        printf("[rma] %s: %d new endpoints after broken ones\n", GetParam().label, reconnects);
    }
    EXPECT_EQ(AXON_OK, s_.flush());
    for (int r : kBigRegions) {
        EXPECT_EQ(-1, s_.target->check_bg(r, 0, off)) << region_name(r);
        EXPECT_EQ(-1, s_.target->check_bg(r, off + 16, kBigLen - off - 16)) << region_name(r);
        EXPECT_EQ(-1, s_.target->guards(r)) << region_name(r);
    }
    for (int r : {kUserSmall, kAllocSmall}) {
        EXPECT_EQ(-1, s_.target->check_bg(r, 0, region_length(r))) << region_name(r);
    }
    s_.finish();
}

/* A context with only RMA and AMO features (no tag matching) does one-sided work. */
TEST_P(Rma, RmaOnlyContext)
{
    ASSERT_NO_FATAL_FAILURE(s_.start(GetParam(), AXON_FEATURE_RMA | AXON_FEATURE_AMO));
    for (int r : kBigRegions) {
        uint8_t out[100], in[100];
        fill_pat(out, sizeof(out), 42 + r, 0);
        EXPECT_EQ(AXON_OK, s_.put(out, sizeof(out), s_.addr(r, 1001), s_.rkey[r]));
        EXPECT_EQ(AXON_OK, s_.get(in, sizeof(in), s_.addr(r, 1001), s_.rkey[r]));
        EXPECT_EQ(0, memcmp(out, in, sizeof(in)));
        uint64_t old = 0;
        EXPECT_EQ(AXON_OK, fetch_add8(s_, s_.addr(r, 2048), s_.rkey[r], &old));
        EXPECT_EQ(bg_value(r, 2048, 8), old);
    }
    s_.finish();
}

/*
 * axon_rkey_ptr gives a pointer exactly where the key's memory is mapped here
 * (this process's memory, a peer's allocated memory or shared pages on this
 * host): stores through it reach the owner, loads see the owner's bytes, a
 * CPU add through it and Axon's fetch-add count together (CPU atomics).
 * Elsewhere (another host's or private memory, active messages forced) it
 * says unsupported; a range outside the key and bad arguments are refused.
 */
TEST_P(Rma, RkeyPtrReachesWhatIsMappedHere)
{
    const RmaParam &p = GetParam();
    ASSERT_NO_FATAL_FAILURE(s_.start(p));
    const bool here = (p.tl() == "self") || ((p.tl() == "shm") && !p.force_am);
    EXPECT_EQ(here, s_.rkey[kAllocBig]->map_len > 0)
        << "allocated memory is mapped here over self and shm, and only there";
    for (int r = 0; r < kRegions; ++r) {
        const uint64_t len  = region_length(r);
        const bool     all  = (s_.path(r) == AXON_RMA_PATH_LOCAL) ||
                              (s_.path(r) == AXON_RMA_PATH_SHM);
        const uint64_t lo   = all ? s_.addr(r, 0) : s_.rkey[r]->map_lo;  /* the window */
        const uint64_t span = all ? len : s_.rkey[r]->map_len;
        void          *ptr  = nullptr;

        SCOPED_TRACE(region_name(r));
        if (span == 0) {
            EXPECT_EQ(AXON_ERR_UNSUPPORTED,
                      axon_rkey_ptr(s_.rkey[r], s_.addr(r, 0), 8, 0, &ptr));
            continue;
        }
        if (!all) {
            EXPECT_EQ(AXON_ERR_UNSUPPORTED,
                      axon_rkey_ptr(s_.rkey[r], s_.addr(r, 0), len, 0, &ptr))
                << "a pointer past the shared pages";
        }
        ASSERT_EQ(AXON_OK, axon_rkey_ptr(s_.rkey[r], lo, span, 0, &ptr));
        uint8_t       *base = static_cast<uint8_t *>(ptr);
        const uint64_t off  = lo - s_.addr(r, 0);   /* of base in the region */

        uint64_t seen;
        memcpy(&seen, base + 2048, 8);
        EXPECT_EQ(bg_value(r, off + 2048, 8), seen) << "a load sees the owner's bytes";
        uint8_t out[100];
        fill_pat(out, sizeof(out), 90 + r, 0);
        memcpy(base + 1001, out, sizeof(out));
        EXPECT_EQ(-1, s_.target->check(r, off + 1001, sizeof(out), 90 + r, 0))
            << "a store did not reach the owner";

        void *aptr = nullptr;
        axon_status_t ast  = axon_rkey_ptr(s_.rkey[r], lo, span, AXON_RKEY_PTR_ATOMICS, &aptr);
        if (p.atomic_mode != nullptr) {
            EXPECT_EQ(AXON_ERR_UNSUPPORTED, ast) << "a device's atomics and the CPU's do not mix";
        } else {   /* CPU atomics: the pointer's and Axon's agree */
            ASSERT_EQ(AXON_OK, ast);
            EXPECT_EQ(ptr, aptr);
            uint64_t *word = reinterpret_cast<uint64_t *>(base + 4096);
            uint64_t  old  = 0;
            __atomic_fetch_add(word, 5, __ATOMIC_SEQ_CST);
            EXPECT_EQ(AXON_OK, fetch_add8(s_, lo + 4096, s_.rkey[r], &old));
            EXPECT_EQ(bg_value(r, off + 4096, 8) + 5, old);
            EXPECT_EQ(bg_value(r, off + 4096, 8) + 6, __atomic_load_n(word, __ATOMIC_SEQ_CST));
        }
        EXPECT_EQ(AXON_ERR_REMOTE_ACCESS,
                  axon_rkey_ptr(s_.rkey[r], s_.addr(r, len - 4), 8, 0, &ptr))
            << "past the key's end";
    }
    void *ptr = nullptr;
    const uint64_t a = s_.addr(kAllocBig, 0);
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_rkey_ptr(s_.rkey[kAllocBig], a, 0, 0, &ptr))
        << "length 0";
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_rkey_ptr(s_.rkey[kAllocBig], a, 8, 0, nullptr));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_rkey_ptr(s_.rkey[kAllocBig], a, 8, 0x80, &ptr))
        << "unknown flag";
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_rkey_ptr(nullptr, 0, 8, 0, &ptr));
    s_.finish();
}

/* The window a caller may keep: a peer's mapped memory only (this process's may be unmapped
 * under the key), the same bytes axon_rkey_ptr gives, all of them reached by stores. */
TEST_P(Rma, RkeyMapWindowIsWhatStaysMapped)
{
    const RmaParam &p = GetParam();
    ASSERT_NO_FATAL_FAILURE(s_.start(p));
    for (int r = 0; r < kRegions; ++r) {
        uint64_t lo  = 0;
        size_t   len = 0;
        void    *win = nullptr, *ptr = nullptr;

        SCOPED_TRACE(region_name(r));
        axon_status_t status = axon_rkey_map_window(s_.rkey[r], &lo, &len, &win);
        if ((s_.path(r) == AXON_RMA_PATH_LOCAL) || (s_.rkey[r]->map_len == 0)) {
            EXPECT_EQ(AXON_ERR_UNSUPPORTED, status) << "nothing a caller may keep";
            continue;
        }
        ASSERT_EQ(AXON_OK, status);
        ASSERT_GT(len, 16u);
        ASSERT_EQ(AXON_OK, axon_rkey_ptr(s_.rkey[r], lo, len, 0, &ptr));
        EXPECT_EQ(win, ptr) << "the window is where axon_rkey_ptr points";
        const uint64_t off = lo - s_.addr(r, 0);
        if (off + len < region_length(r)) {   /* a partial window: shared pages */
            EXPECT_EQ(AXON_ERR_UNSUPPORTED, axon_rkey_ptr(s_.rkey[r], lo + len - 8, 16, 0, &ptr))
                << "the window is the widest: past its end nothing is mapped here";
        }
        uint8_t out[64];
        fill_pat(out, sizeof(out), 70 + r, 0);
        memcpy(static_cast<uint8_t *>(win) + len - sizeof(out), out, sizeof(out));
        EXPECT_EQ(-1, s_.target->check(r, off + len - sizeof(out), sizeof(out), 70 + r, 0))
            << "a store at the window's end did not reach the owner";
    }
    uint64_t lo;
    size_t   len;
    void    *win;
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_rkey_map_window(nullptr, &lo, &len, &win));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_rkey_map_window(s_.rkey[0], &lo, nullptr, &win));
    s_.finish();
}

/* ---------------------------------------------------------------- concurrent atomics */

const int kProcs      = 4;
const int kCount      = 10000;  /* per process and counter */
const int kMfaddCount = 1000;   /* per process and region */
const int kWindow     = 16;     /* operations in flight per process */

/* Where the counters are, in each big region. */
const uint64_t kCtr64Off  = 0;
const uint64_t kCtr32Off  = 64;   /* + 4 * region: low half in one, high half in the other */
const uint64_t kMfaddOff  = 128;
const uint64_t kMfBoundary[4] = {0x8080808080808080ull, 0x8000800080008000ull,
                                 0x0000000480000010ull, 0};

inline uint64_t ctr32_off(int r)
{
    return kCtr32Off + 4 * r;
}

void mfadd_operand(int proc, uint64_t *add)
{
    for (int w = 0; w < 4; ++w) {
        add[w] = 0x0101010101010101ull * (uint64_t)(proc + 1) * (uint64_t)(w + 3) + 0x70 * w;
    }
}

struct CounterArgs {
    const RmaParam *param;
    int             proc;
    bool            force_am;
};

/* One initiator of the concurrent test; sends back every value it fetched. */
int counter_main(int fd, void *arg)
{
    const CounterArgs   *a = static_cast<const CounterArgs *>(arg);
    Node                 node;
    axon_ep_h            ep = nullptr;
    RegionInfo           info[kRegions];
    std::vector<uint8_t> keys[kRegions];
    axon_rkey_h          rk[2] = {nullptr, nullptr};
    void                *addr;
    size_t               len;

    if (node.create(a->param->tls, a->force_am, a->param->atomic_mode) != AXON_OK) {
        return 2;
    }
    if (axon_test_exchange_address(fd, node.address, node.address_length, &addr, &len) != 0) {
        return 3;
    }
    axon_status_t status = axon_test_ep_create(node.worker, addr, len, &ep);
    free(addr);
    if ((status != AXON_OK) || (recv_regions(fd, info, keys) != 0)) {
        return 4;
    }
    for (int r = 0; r < 2; ++r) {
        if (axon_ep_rkey_unpack(ep, keys[r].data(), keys[r].size(), &rk[r]) != AXON_OK) {
            return 5;
        }
    }
    if (axon_test_sync_progress(fd, node.worker, kOpTimeout) != 0) {
        return 6;  /* everybody starts together */
    }

    /* A window of operations; slot i % kWindow is reused once its last one completed. */
    struct Slot {
        axon_request_h req    = nullptr;
        axon_status_t  status = AXON_OK;
        uint64_t       result[4];
        int            kind   = -1;  /* which fetched list, -1: none */
    } slots[kWindow];
    std::vector<uint64_t> fetched[4];  /* 64-bit r0, r1; 32-bit r0, r1 */
    unsigned              n = 0;
    int                   failed = 0;
    auto retire = [&](Slot &s) {
        axon_status_t st = finish_op(node.worker, s.status, s.req, kOpTimeout);
        s.req = nullptr;
        if (st != AXON_OK) {
            if (failed++ < 3) {
                fprintf(stderr, "counter process %d: an atomic failed: %s\n", a->proc,
                        axon_status_string(st));
            }
        } else if (s.kind >= 0) {
            fetched[s.kind].push_back((s.kind < 2) ? s.result[0] : (uint32_t)s.result[0]);
        }
        s.kind = -1;
    };
    auto issue = [&](int kind, std::function<axon_status_t(Slot &, axon_request_h *)> fn) {
        Slot &s = slots[n++ % kWindow];
        if (s.req != nullptr || s.kind >= 0) {
            retire(s);
        }
        s.kind     = kind;
        double end = axon_test_time() + kOpTimeout;
        for (;;) {
            s.req    = nullptr;
            s.status = fn(s, &s.req);
            if ((s.status != AXON_ERR_NO_RESOURCE) || (axon_test_time() > end)) {
                break;
            }
            axon_test_progress(node.worker);
        }
        if ((s.status != AXON_OK) && (s.status != AXON_INPROGRESS)) {
            if (failed++ < 3) {
                fprintf(stderr, "counter process %d: could not start an atomic: %s\n",
                        a->proc, axon_status_string(s.status));
            }
            s.req  = nullptr;
            s.kind = -1;
        }
    };

    const uint64_t one64 = 1;
    const uint32_t one32 = 1;
    for (int j = 0; j < 2 * kCount; ++j) {
        int  r     = j % 2;
        bool fetch = (j / 2) % 2 == 0;
        issue(fetch ? r : -1, [&](Slot &s, axon_request_h *rq) {
            return axon_atomic_nb(ep, AXON_ATOMIC_ADD, 8, &one64, NULL,
                                  fetch ? s.result : NULL, info[r].base + kCtr64Off, rk[r], NULL,
                                  rq);
        });
    }
    for (int j = 0; j < 2 * kCount; ++j) {
        int  r     = j % 2;
        bool fetch = (j / 2) % 2 == 1;
        issue(fetch ? 2 + r : -1, [&](Slot &s, axon_request_h *rq) {
            s.result[0] = 0;
            return axon_atomic_nb(ep, AXON_ATOMIC_ADD, 4, &one32, NULL,
                                  fetch ? (void *)s.result : NULL, info[r].base + ctr32_off(r),
                                  rk[r], NULL, rq);
        });
    }
    uint64_t add[4];
    mfadd_operand(a->proc, add);
    for (int j = 0; j < 2 * kMfaddCount; ++j) {
        int  r     = j % 2;
        bool fetch = (j / 2) % 2 == 0;
        issue(-1, [&](Slot &s, axon_request_h *rq) {
            return axon_atomic_mfadd_nb(ep, 32, add, kMfBoundary, fetch ? s.result : NULL,
                                        info[r].base + kMfaddOff, rk[r], NULL, rq);
        });
    }
    for (Slot &s : slots) {
        if (s.req != nullptr || s.kind >= 0) {
            retire(s);
        }
    }
    axon_request_h freq = nullptr;
    axon_status_t  fst  = axon_worker_flush_nb(node.worker, NULL, &freq);
    fst = finish_op(node.worker, fst, freq);
    if (fst != AXON_OK) {
        fprintf(stderr, "counter process %d: the final flush failed: %s\n", a->proc,
                axon_status_string(fst));
        ++failed;
    }
    for (auto &f : fetched) {
        if (axon_test_send_blob(fd, f.data(), f.size() * sizeof(uint64_t)) != 0) {
            return 7;
        }
    }
    for (axon_rkey_h k : rk) {
        axon_rkey_destroy(k);
    }
    if (axon_test_ep_close(node.worker, ep, AXON_EP_CLOSE_FLUSH, kOpTimeout) != AXON_OK) {
        return 8;
    }
    if (axon_test_sync_progress(fd, node.worker, kOpTimeout) != 0) {
        return 9;
    }
    return failed ? 10 : 0;
}

/* Kills and reaps children a failed assertion left behind. */
struct PeerGuard {
    axon_test_peer_t *peers;
    int               count;
    ~PeerGuard()
    {
        for (int i = 0; i < count; ++i) {
            axon_test_peer_kill(&peers[i]);
        }
    }
};

/*
 * kProcs processes, each doing kCount fetching-and-posted adds on a 64-bit
 * and on a 32-bit counter of each big region of this process (the owner,
 * which only progresses), then multi-field adds on a 32-byte location:
 * every count exact, every fetched value seen once, neighbours untouched.
 * Over shm half the processes force active messages, so the owner's CPU
 * and theirs update the allocated region at the same time (device mode:
 * the device does every atomic whatever the path, and alone).
 */
/* Slow: counters across processes, not for the sanitizer passes (tests/README.md). */
class RmaSlow : public Rma {};

TEST_P(RmaSlow, ConcurrentAtomicsAreExact)
{
    const RmaParam &p = GetParam();
    if (p.self()) {
        GTEST_SKIP() << "one process";
    }
    axon_test_peer_t peers[kProcs];
    CounterArgs      args[kProcs];
    PeerGuard        guard = {peers, 0};
    Node             node;
    Owner            owner;

    for (int i = 0; i < kProcs; ++i) {
        args[i] = {&p, i, p.force_am || ((p.tl() == "shm") && (i % 2))};
        ASSERT_EQ(0, axon_test_peer_spawn(&peers[i], counter_main, &args[i], kPeerTimeout));
        guard.count = i + 1;
    }
    ASSERT_EQ(AXON_OK, node.create(p));
    ASSERT_EQ(AXON_OK, owner.map_all(node.context));
    uint64_t mf_init[2][4];
    for (int r = 0; r < 2; ++r) {
        uint8_t *b = owner.region[r].base;
        memset(b + kCtr64Off, 0, 8);
        memset(b + ctr32_off(r), 0, 4);
        memcpy(mf_init[r], b + kMfaddOff, 32);
    }
    for (int i = 0; i < kProcs; ++i) {
        void  *addr;
        size_t len;
        ASSERT_EQ(0, axon_test_exchange_address(peers[i].fd, node.address, node.address_length,
                                                &addr, &len));
        free(addr);  /* the owner needs no endpoints */
        ASSERT_EQ(0, send_regions(peers[i].fd, owner));
    }
    double t0 = axon_test_time();
    for (int i = 0; i < kProcs; ++i) {
        ASSERT_EQ(0, axon_test_sync_progress(peers[i].fd, node.worker, kOpTimeout));
    }

    /* Progress until every process sent its fetched values. */
    std::vector<uint64_t> fetched[4];
    bool                  done[kProcs] = {false};
    int                   remaining    = kProcs;
    double                deadline     = t0 + kRunTimeout;
    while (remaining > 0) {
        ASSERT_LT(axon_test_time(), deadline) << remaining << " processes still running";
        for (int i = 0; i < kProcs; ++i) {
            struct pollfd pfd = {peers[i].fd, POLLIN, 0};
            if (done[i] || (poll(&pfd, 1, 0) <= 0)) {
                continue;
            }
            for (auto &f : fetched) {
                void  *blob = nullptr;
                size_t len  = 0;
                ASSERT_EQ(0, axon_test_recv_blob(peers[i].fd, &blob, &len))
                    << "process " << i << " ended early";
                const uint64_t *v = static_cast<const uint64_t *>(blob);
                f.insert(f.end(), v, v + len / sizeof(uint64_t));
                free(blob);
            }
            done[i] = true;
            --remaining;
        }
        axon_test_progress(node.worker);
    }
    double elapsed = axon_test_time() - t0;
    for (int i = 0; i < kProcs; ++i) {
        EXPECT_EQ(0, axon_test_sync_progress(peers[i].fd, node.worker, kOpTimeout));
    }
    for (int i = 0; i < kProcs; ++i) {
        EXPECT_EQ(0, axon_test_peer_wait(&peers[i], kPeerTimeout)) << "process " << i;
    }
    printf("[rma] %s: %d processes x %d atomics in %.2f s\n", p.label, kProcs,
           4 * kCount + 2 * kMfaddCount, elapsed);

    const uint64_t total = (uint64_t)kProcs * kCount;
    for (int r = 0; r < 2; ++r) {
        const uint8_t *b = owner.region[r].base;
        uint64_t       c64;
        uint32_t       c32;
        memcpy(&c64, b + kCtr64Off, 8);
        memcpy(&c32, b + ctr32_off(r), 4);
        EXPECT_EQ(total, c64) << "64-bit counter, " << region_name(r) << " region";
        EXPECT_EQ(total, c32) << "32-bit counter, " << region_name(r) << " region";
        uint64_t other = kCtr32Off + 4 * (1 - r);
        EXPECT_EQ(-1, check_pat(b + other, 4, bg_seed(r), other))
            << "the other half of the 32-bit counter's word, " << region_name(r) << " region";
        EXPECT_EQ(-1, check_pat(b + 8, kCtr32Off - 8, bg_seed(r), 8)) << "after the counter";

        uint64_t model[4], next[4], add[4];
        memcpy(model, mf_init[r], 32);
        for (int proc = 0; proc < kProcs; ++proc) {
            mfadd_operand(proc, add);
            for (int j = 0; j < kMfaddCount; ++j) {
                model_mfadd(4, model, add, kMfBoundary, next);
                memcpy(model, next, 32);
            }
        }
        EXPECT_EQ(0, memcmp(model, b + kMfaddOff, 32)) << "multi-field adds, "
                                                        << region_name(r) << " region";
        EXPECT_EQ(-1, check_pat(b + kMfaddOff + 32, 64, bg_seed(r), kMfaddOff + 32));
        EXPECT_EQ(-1, owner.guards(r));
    }
    for (int k = 0; k < 4; ++k) {
        std::vector<uint64_t> &f = fetched[k];
        EXPECT_EQ(total / 2, f.size()) << "fetched values, list " << k;
        std::sort(f.begin(), f.end());
        EXPECT_TRUE(std::adjacent_find(f.begin(), f.end()) == f.end())
            << "two fetch-adds saw the same value: not atomic (list " << k << ")";
        EXPECT_TRUE(f.empty() || (f.back() < total)) << "list " << k;
    }
    owner.unmap_all();
    node.destroy();
}

/* ---------------------------------------------------------------- instances */

const RmaParam kLanes[] = {
    {"self", "self", false},
    {"shm", "shm", false},      /* allocated: direct; user memory: single copy (CMA) */
    {"tcp", "tcp", false},      /* active messages anyway */
    {"rc", "rc", false},        /* RDMA read/write over softib */
    {"ud", "ud", false},        /* active messages */
    {"dc", "dc", false},        /* RDMA read/write through a DCI */
    {"ofi", "ofi", false},      /* over libfabric's tcp; AXON_OFI_RMA=n: active messages */
    /*
     * AXON_ATOMIC_MODE=device: put/get take the paths above (self: LOCAL; shm:
     * SHM for allocated memory, ZCOPY by single copy for user memory; rc:
     * ZCOPY by RDMA), every atomic the DEVICE path through the endpoint's rc
     * lane (an rc endpoint of its own beside self or shm; to this process
     * through rc's loopback), never a CPU, whoever owns the memory.
     */
    {"self_devamo", "self,rc", false, "device"},
    {"shm_devamo", "shm,rc", false, "device"},
    {"rc_devamo", "rc", false, "device"},
    {"dc_devamo", "dc", false, "device"},  /* extended atomics on DCIs */
};
/* Active messages forced where the memory could be reached directly, shared user memory,
 * and rc connected by the CM (the same operations as rc_devamo). */
const RmaParam kVariants[] = {
    {"shm_am", "shm", true},
    {"tcp_am", "tcp", true},
    /* user memory shared (AXON_MEM_MAP_SHARED): over shm its whole pages are reached
     * directly (SHM; the big region's partial end pages by single copy); shared_self: LOCAL on
     * shared pages */
    {"shm_shared", "shm", false, nullptr, true},
    {"shared_self", "self", false, nullptr, true},   /* not self*: valgrind has ShmMemShare */
    {"rdmacm_devamo", "rdmacm", false, "device"},
};

INSTANTIATE_TEST_SUITE_P(Lanes, Rma, ::testing::ValuesIn(kLanes), rma_name);
INSTANTIATE_TEST_SUITE_P(Variants, Rma, ::testing::ValuesIn(kVariants), rma_name);
INSTANTIATE_TEST_SUITE_P(Lanes, RmaSlow, ::testing::ValuesIn(kLanes), rma_name);
INSTANTIATE_TEST_SUITE_P(Variants, RmaSlow, ::testing::ValuesIn(kVariants), rma_name);

/* ---------------------------------------------------------------- shm: a target that sleeps */

/*
 * The target stops calling into Axon (it blocks on the harness socket)
 * while the initiator puts, gets, fetch-adds and masked-swaps allocated
 * memory: each completes within kNoProgressLimit; the target, woken up by
 * the next command, sees the results.
 */
TEST(RmaShmXproc, TargetThatOnlySleeps)
{
    const RmaParam p = {"shm", "shm", false};
    Session        s;
    ASSERT_NO_FATAL_FAILURE(s.start(p));
    EXPECT_EQ(AXON_RMA_PATH_SHM, s.path(kAllocBig)) << "allocated memory over shm";

    const int r = kAllocBig;
    std::vector<uint8_t> out(65537), in(4099);
    fill_pat(out.data(), out.size(), 77, 0);
    s.target->block();
    double t0 = axon_test_time();
    EXPECT_EQ(AXON_OK, s.put(out.data(), out.size(), s.addr(r, 1001), s.rkey[r],
                             kNoProgressLimit)) << "put";
    EXPECT_EQ(AXON_OK, s.get(in.data(), in.size(), s.addr(r, 300001), s.rkey[r],
                             kNoProgressLimit)) << "get";
    EXPECT_EQ(-1, check_pat(in.data(), in.size(), bg_seed(r), 300001));
    const uint64_t kFaddOff = 8192 * 16, kMcsOff = 8192 * 17;  /* past the put */
    uint64_t five = 5, old = 0;
    EXPECT_EQ(AXON_OK, s.atomic(AXON_ATOMIC_ADD, 8, &five, NULL, &old, s.addr(r, kFaddOff),
                                s.rkey[r], kNoProgressLimit)) << "fetch-add";
    EXPECT_EQ(bg_value(r, kFaddOff, 8), old);
    uint64_t cmp[4], cmask[4] = {~0ull, ~0ull, ~0ull, ~0ull}, swap[4], smask[4], res[4], expect[4];
    for (int w = 0; w < 4; ++w) {
        cmp[w]   = bg_value(r, kMcsOff + 8 * w, 8);
        swap[w]  = 0x0123456789abcdefull * (w + 1);
        smask[w] = 0x00ff00ff00ff00ffull << w;
    }
    EXPECT_EQ(AXON_OK, s.masked_cswap(32, cmp, cmask, swap, smask, res, s.addr(r, kMcsOff),
                                      s.rkey[r], kNoProgressLimit)) << "masked cswap";
    EXPECT_EQ(0, memcmp(cmp, res, 32));
    model_masked_cswap(4, cmp, cmp, cmask, swap, smask, expect);
    EXPECT_EQ(AXON_OK, s.flush(kNoProgressLimit)) << "flush";
    /* User memory over shm is read and written by single copy: no target either. */
    if (s.path(kUserBig) == AXON_RMA_PATH_ZCOPY) {
        EXPECT_EQ(AXON_OK, s.put(out.data(), out.size(), s.addr(kUserBig, 3), s.rkey[kUserBig],
                                 kNoProgressLimit)) << "put to user memory";
        EXPECT_EQ(AXON_OK, s.get(in.data(), in.size(), s.addr(kUserBig, 3), s.rkey[kUserBig],
                                 kNoProgressLimit)) << "get from user memory";
        EXPECT_EQ(-1, check_pat(in.data(), in.size(), 77, 0));
    }
    printf("[rma] shm: everything done in %.3f s while the target slept\n",
           axon_test_time() - t0);

    /* Wake the target: it sees all of it. */
    EXPECT_EQ(-1, s.target->check(r, 1001, out.size(), 77, 0));
    std::vector<uint8_t> got = s.target->read(r, kFaddOff, 8);
    uint64_t v = 0;
    ASSERT_EQ(8u, got.size());
    memcpy(&v, got.data(), 8);
    EXPECT_EQ(bg_value(r, kFaddOff, 8) + 5, v);
    got = s.target->read(r, kMcsOff, 32);
    ASSERT_EQ(32u, got.size());
    EXPECT_EQ(0, memcmp(expect, got.data(), 32));
    if (s.path(kUserBig) == AXON_RMA_PATH_ZCOPY) {
        EXPECT_EQ(-1, s.target->check(kUserBig, 3, out.size(), 77, 0));
    }
    s.finish();
}

/*
 * User memory shared (AXON_MEM_MAP_SHARED) with single copy off
 * (AXON_SHM_CMA=n): the target stops progressing; puts, gets and atomics on
 * the whole pages, and on all of the small region (program data, partial
 * pages included), complete at once (they are plain loads and stores here),
 * while a put into the big region's first, partial page goes by message and
 * its flush waits for the target. Once the target unmaps, its memory holds
 * everything written and is private again: a put through the old key lands
 * in the orphaned segment, never in the target's memory.
 */
TEST(RmaShmXproc, SharedPagesWithoutTheTarget)
{
    EnvGuard       cma("AXON_SHM_CMA", "n");
    const RmaParam p = {"shm_shared", "shm", false, nullptr, true};
    Session        s;
    ASSERT_NO_FATAL_FAILURE(s.start(p));
    const int      r = kUserBig;
    const uint64_t win = 4096 - kSharedSkew;   /* the first whole page's offset */
    EXPECT_EQ(AXON_RMA_PATH_SHM, s.path(kUserSmall))
        << "program data: its partial pages shared too, all of it reached directly";
    EXPECT_EQ(AXON_RMA_PATH_AM, s.path(r)) << "partial end pages, no single copy: messages";
    EXPECT_EQ(s.addr(r, win), s.rkey[r]->map_lo);
    EXPECT_EQ(kBigLen - 4096, s.rkey[r]->map_len) << "the big region's whole pages";

    std::vector<uint8_t> out(65536), in(4099), edge(64);
    fill_pat(out.data(), out.size(), 78, 0);
    fill_pat(edge.data(), edge.size(), 79, 0);
    s.target->block();
    double t0 = axon_test_time();
    EXPECT_EQ(AXON_OK, s.put(out.data(), out.size(), s.addr(r, win + 100), s.rkey[r],
                             kNoProgressLimit)) << "put";
    EXPECT_EQ(AXON_OK, s.get(in.data(), in.size(), s.addr(r, win + 300001), s.rkey[r],
                             kNoProgressLimit)) << "get";
    EXPECT_EQ(-1, check_pat(in.data(), in.size(), bg_seed(r), win + 300001));
    const uint64_t kFaddOff = win + 8192 * 16;
    uint64_t five = 5, old = 0;
    EXPECT_EQ(AXON_OK, s.atomic(AXON_ATOMIC_ADD, 8, &five, NULL, &old, s.addr(r, kFaddOff),
                                s.rkey[r], kNoProgressLimit)) << "fetch-add";
    EXPECT_EQ(bg_value(r, kFaddOff, 8), old);
    EXPECT_EQ(AXON_OK, s.put(out.data(), 4096, s.addr(kUserSmall, 0), s.rkey[kUserSmall],
                             kNoProgressLimit)) << "put, small region";
    const uint64_t kLastOff = kSmallLen - 8;   /* in the small region's partial last page */
    EXPECT_EQ(AXON_OK, s.atomic(AXON_ATOMIC_ADD, 8, &five, NULL, &old, s.addr(kUserSmall, kLastOff),
                                s.rkey[kUserSmall], kNoProgressLimit)) << "fetch-add, small region";
    EXPECT_EQ(bg_value(kUserSmall, kLastOff, 8), old);
    printf("[rma] shm_shared: whole pages done in %.3f s while the target slept\n",
           axon_test_time() - t0);

    /* The partial first page: a message the sleeping target must execute. */
    EXPECT_EQ(AXON_OK, s.put(edge.data(), edge.size(), s.addr(r, 0), s.rkey[r]));
    axon_request_h flush = nullptr;
    axon_status_t  st = s.start_op([&](axon_request_h *rq) {
        return axon_ep_flush_nb(s.ep, NULL, rq);
    }, &flush);
    ASSERT_EQ(AXON_INPROGRESS, st) << "a flush after a message put is done without the target";
    double until = axon_test_time() + 0.3;
    while (axon_test_time() < until) {
        axon_test_progress(s.node.worker);
    }
    EXPECT_EQ(AXON_INPROGRESS, axon_request_test(flush, NULL)) << "the edge put went without it";

    EXPECT_EQ(-1, s.target->check(r, win + 100, out.size(), 78, 0));   /* wakes it */
    EXPECT_EQ(AXON_OK, s.wait(st, flush)) << "flush of the edge put";
    EXPECT_EQ(-1, s.target->check(r, 0, edge.size(), 79, 0));
    EXPECT_EQ(-1, s.target->check(kUserSmall, 0, 4096, 78, 0));
    std::vector<uint8_t> last = s.target->read(kUserSmall, kLastOff, 8);
    uint64_t             lv   = 0;
    ASSERT_EQ(8u, last.size());
    memcpy(&lv, last.data(), 8);
    EXPECT_EQ(bg_value(kUserSmall, kLastOff, 8) + 5, lv);
    std::vector<uint8_t> got = s.target->read(r, kFaddOff, 8);
    uint64_t v = 0;
    ASSERT_EQ(8u, got.size());
    memcpy(&v, got.data(), 8);
    EXPECT_EQ(bg_value(r, kFaddOff, 8) + 5, v);

    /* Unmapped: the memory keeps its bytes and no longer sees the old key's writes. */
    EXPECT_EQ(0, s.target->unmap(r));
    EXPECT_EQ(-1, s.target->check(r, win + 100, out.size(), 78, 0)) << "lost at unmap";
    EXPECT_EQ(-1, s.target->check(r, 0, edge.size(), 79, 0)) << "lost at unmap";
    EXPECT_EQ(-1, s.target->check(r, win + 300001, 4096, bg_seed(r), win + 300001));
    fill_pat(out.data(), 4096, 80, 0);
    EXPECT_EQ(AXON_OK, s.put(out.data(), 4096, s.addr(r, win + 100), s.rkey[r]))
        << "through the attached segment it still has";
    EXPECT_EQ(-1, s.target->check(r, win + 100, 4096, 78, 0))
        << "a put through an old key reached the target's memory after the unmap";
    s.finish();
}

/* ---------------------------------------------------------------- target killed */

class RmaKill : public ::testing::TestWithParam<RmaParam> {};

/*
 * The target stops progressing, the initiator starts gets, puts, atomics
 * and a flush that all need it, and the target is killed: every request
 * completes within kDetectLimit, those that needed an answer with an
 * error; later operations fail too, and the endpoint closes. Device atomic
 * lanes: softib's progress thread would answer a target that only stops
 * calling Axon, so the target is stopped whole (SIGSTOP) before the kill.
 */
TEST_P(RmaKill, RequestsFailWhenTargetDies)
{
    const size_t kLen = 256 * 1024;
    const int    kEach = 8;
    Session      s;
    ASSERT_NO_FATAL_FAILURE(s.start(GetParam()));
    /* Connected first (rc's handshake needs the target's progress): the kill is what fails. */
    uint64_t warm = 0;
    ASSERT_EQ(AXON_OK, s.get(&warm, 8, s.addr(kUserBig, 0), s.rkey[kUserBig]));
    ASSERT_EQ(AXON_OK, fetch_add8(s, s.addr(kAllocBig, 0), s.rkey[kAllocBig], &warm));
    if (GetParam().device_amo()) {
        ASSERT_EQ(0, axon_test_peer_stop(&s.peer));
    } else {
        ASSERT_EQ(AXON_RMA_PATH_AM, s.path(kUserBig));
        s.target->block();
    }

    std::vector<std::vector<uint8_t>> bufs;
    std::vector<axon_request_h>       reqs;
    std::vector<axon_status_t>        status;
    std::vector<bool>                 needs_answer;
    std::vector<std::array<uint64_t, 4>> results(2 * kEach);
    uint64_t one[4] = {1, 1, 1, 1}, ones[4] = {~0ull, ~0ull, ~0ull, ~0ull};
    bufs.reserve(2 * kEach);
    auto add = [&](bool answer, std::function<axon_status_t(axon_request_h *)> fn) {
        axon_request_h req = nullptr;
        axon_status_t  st = s.start_op(fn, &req);
        ASSERT_TRUE((st == AXON_OK) || (st == AXON_INPROGRESS)) << axon_status_string(st);
        reqs.push_back(req);
        status.push_back(st);
        needs_answer.push_back(answer);
    };
    for (int i = 0; i < kEach; ++i) {
        int r = i % 2;
        bufs.emplace_back(kLen);
        uint8_t *b = bufs.back().data();
        ASSERT_NO_FATAL_FAILURE(add(true, [&](axon_request_h *rq) {
            return axon_get_nb(s.ep, b, kLen, s.addr(r, 4096 + i * kLen), s.rkey[r], NULL, rq);
        }));
        bufs.emplace_back(kLen);
        uint8_t *pb = bufs.back().data();
        ASSERT_NO_FATAL_FAILURE(add(false, [&](axon_request_h *rq) {
            return axon_put_nb(s.ep, pb, kLen, s.addr(r, 4096 + i * kLen), s.rkey[r], NULL, rq);
        }));
        uint64_t *res = results[2 * i].data();
        ASSERT_NO_FATAL_FAILURE(add(true, [&](axon_request_h *rq) {
            return axon_atomic_nb(s.ep, AXON_ATOMIC_ADD, 8, one, NULL, res, s.addr(r, 8 * i),
                                  s.rkey[r], NULL, rq);
        }));
        uint64_t *res2 = results[2 * i + 1].data();
        ASSERT_NO_FATAL_FAILURE(add(true, [&](axon_request_h *rq) {
            return axon_atomic_masked_cswap_nb(s.ep, 32, one, ones, one, ones, res2,
                                               s.addr(r, 1024 + 32 * i), s.rkey[r], NULL, rq);
        }));
    }
    ASSERT_NO_FATAL_FAILURE(add(true, [&](axon_request_h *rq) {
        return axon_ep_flush_nb(s.ep, NULL, rq);
    }));
    axon_test_progress_for(s.node.worker, 0.1);
    /* A stopped target's device still serves reads and writes (softib places them from
     * this side, as a NIC would: softib_direct.h); its atomics wait for its responder.
     * What is in flight at the kill must fail. */
    std::vector<bool> in_flight(reqs.size(), false);
    int pending = 0;
    for (size_t j = 0; j < reqs.size(); ++j) {
        in_flight[j] = (status[j] == AXON_INPROGRESS) &&
                       (axon_request_test(reqs[j], NULL) == AXON_INPROGRESS);
        pending += in_flight[j];
    }
    EXPECT_GE(pending, (GetParam().device_amo() ? 2 : 3) * kEach)
        << "operations completed with the target not progressing";

    double t0   = axon_test_time();
    pid_t  dead = axon_test_peer_crash(&s.peer);
    EXPECT_GT(dead, 0);
    s.target.reset();  /* nobody to talk to */
    double last = t0;
    for (size_t j = 0; j < reqs.size(); ++j) {
        if (status[j] != AXON_INPROGRESS) {
            continue;
        }
        double        left = t0 + kDetectLimit + 1 - axon_test_time();
        axon_status_t st   = s.wait(status[j], reqs[j], left > 0.01 ? left : 0.01);
        last = std::max(last, axon_test_time());
        EXPECT_NE(AXON_ERR_TIMED_OUT, st) << "request " << j << " still in flight";
        if (needs_answer[j] && in_flight[j]) {
            EXPECT_LT(st, 0) << "request " << j << " completed without its target";
        }
    }
    EXPECT_LE(last - t0, kDetectLimit) << "requests completed late";
    printf("[rma] %s: every request done %.3f s after the kill\n", GetParam().label, last - t0);

    /* The endpoint is dead: new operations fail at once or soon. */
    uint64_t word = 0;
    double   t1   = axon_test_time();
    EXPECT_LT(s.get(&word, 8, s.addr(kUserBig, 0), s.rkey[kUserBig], kDetectLimit), 0);
    EXPECT_LT(fetch_add8(s, s.addr(kUserBig, 0), s.rkey[kUserBig], &word), 0);
    EXPECT_LE(axon_test_time() - t1, kDetectLimit);

    for (axon_rkey_h &k : s.rkey) {
        axon_rkey_destroy(k);
        k = nullptr;
    }
    double        t2 = axon_test_time();
    axon_status_t st = axon_test_ep_close(s.node.worker, s.ep, AXON_EP_CLOSE_FORCE, kDetectLimit);
    s.ep = nullptr;
    EXPECT_NE(AXON_ERR_TIMED_OUT, st);
    EXPECT_LE(axon_test_time() - t2, kDetectLimit);
    axon_worker_h w = s.node.worker;
    axon_test_progress_for(w, 0.01);
    EXPECT_EQ(0u, w->req_mp.num_elems - w->req_mp.num_free) << "requests not returned";
    s.node.destroy();
    if (dead > 0) {
        axon_test_remove_shm_of(dead);
    }
}

const RmaParam kKillLanes[] = {
    {"tcp", "tcp", false},
    {"shm_am", "shm", true},
    {"shm_am_devamo", "shm,rc", true, "device"},  /* put/get by messages, atomics by rc */
    {"rc_devamo", "rc", false, "device"},         /* everything by RDMA */
    {"dc_devamo", "dc", false, "device"},         /* ... through DCIs */
};

INSTANTIATE_TEST_SUITE_P(Lanes, RmaKill, ::testing::ValuesIn(kKillLanes), rma_name);

}  // namespace
