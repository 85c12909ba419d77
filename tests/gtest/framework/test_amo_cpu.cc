/*
 * Atomics done by a CPU (framework/amo_cpu.h): the operations against a
 * bit-serial reference model of this file's own, op/size checking, exact
 * totals under threads and processes hammering one shm segment
 * (components/shm/shm_mem_seg.h, tested in components/shm/), and a lock
 * holder killed mid-operation. Every test bounds its time (alarm, peers' own
 * timeouts) and reaps its children.
 */
#include <gtest/gtest.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"
#include "log_capture.h"
extern "C" {
#include "amo_cpu.h"
#include "log.h"
#include "shm_mem_seg.h"
}

namespace {

const double   kChildTimeout = 60.0;
const unsigned kIters        = 10000;
const unsigned kWorkers      = 4;

double now_sec()
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------- reference model */

/*
 * The model works on the operand as a little-endian array of bits: bit k
 * is bit k % 64 of word k / 64 (§8.7.2.2: word i is bytes [8 i, 8 i + 8),
 * host order). Arithmetic is bit-serial with an explicit carry, fields end
 * where the boundary says: nothing shared with the library's word tricks.
 */
struct Bits {
    uint8_t byte[32];  /* byte j holds bits 8 j .. 8 j + 7 */
};

Bits bits_of(const uint64_t *word, unsigned size)
{
    Bits b;

    memset(&b, 0, sizeof(b));
    for (unsigned j = 0; j < size; ++j) {
        b.byte[j] = (uint8_t)(word[j / 8] >> (8 * (j % 8)));
    }
    return b;
}

void words_of(const Bits &b, unsigned size, uint64_t *word)
{
    unsigned nwords = (size + 7) / 8;

    for (unsigned i = 0; i < nwords; ++i) {
        word[i] = 0;
    }
    for (unsigned j = 0; j < size; ++j) {
        word[j / 8] |= (uint64_t)b.byte[j] << (8 * (j % 8));
    }
}

int bit(const Bits &b, unsigned k)
{
    return (b.byte[k / 8] >> (k % 8)) & 1;
}

void set_bit(Bits &b, unsigned k, int v)
{
    b.byte[k / 8] = (uint8_t)((b.byte[k / 8] & ~(1u << (k % 8))) | ((unsigned)v << (k % 8)));
}

/* Bit-serial addition; a carry stops after bit k when ends(k). */
template <typename Ends>
Bits serial_add(const Bits &a, const Bits &b, unsigned nbits, Ends ends)
{
    Bits out;
    int  carry = 0;

    memset(&out, 0, sizeof(out));
    for (unsigned k = 0; k < nbits; ++k) {
        int s = bit(a, k) + bit(b, k) + carry;
        set_bit(out, k, s & 1);
        carry = ends(k) ? 0 : (s >> 1);
    }
    return out;
}

void model(const axon_amo_args_t &args, const uint64_t *old_words, uint64_t *new_words)
{
    unsigned size  = args.size;
    unsigned nbits = 8 * size;
    Bits     old   = bits_of(old_words, size);
    Bits     val   = bits_of(args.value, size);
    Bits     cmp   = bits_of(args.compare, size);
    Bits     mask  = bits_of(args.mask, size);
    Bits     smask = bits_of(args.swap_mask, size);
    Bits     out   = old;
    bool     equal = true;

    switch (args.op) {
    case AXON_AMO_ADD:
        out = serial_add(old, val, nbits, [](unsigned) { return false; });
        break;
    case AXON_AMO_AND:
    case AXON_AMO_OR:
    case AXON_AMO_XOR:
        for (unsigned j = 0; j < size; ++j) {
            out.byte[j] = (args.op == AXON_AMO_AND) ? (old.byte[j] & val.byte[j]) :
                          (args.op == AXON_AMO_OR)  ? (old.byte[j] | val.byte[j]) :
                                                      (old.byte[j] ^ val.byte[j]);
        }
        break;
    case AXON_AMO_SWAP:
        out = val;
        break;
    case AXON_AMO_CSWAP:
        if (memcmp(old.byte, cmp.byte, size) == 0) {
            out = val;
        }
        break;
    case AXON_AMO_MASKED_CSWAP:
        for (unsigned j = 0; j < size; ++j) {
            equal = equal && (((old.byte[j] ^ cmp.byte[j]) & mask.byte[j]) == 0);
        }
        if (equal) {
            for (unsigned j = 0; j < size; ++j) {
                out.byte[j] = (uint8_t)((old.byte[j] & ~smask.byte[j]) |
                                        (val.byte[j] & smask.byte[j]));
            }
        }
        break;
    case AXON_AMO_MFADD:
        out = serial_add(old, val, nbits, [&mask](unsigned k) {
            return bit(mask, k) || (k % 64 == 63);
        });
        break;
    }
    words_of(out, size, new_words);
}

struct OpSize {
    axon_amo_op_t op;
    unsigned      size;
};

const OpSize kValid[] = {
    {AXON_AMO_ADD, 4},   {AXON_AMO_ADD, 8},   {AXON_AMO_AND, 4},   {AXON_AMO_AND, 8},
    {AXON_AMO_OR, 4},    {AXON_AMO_OR, 8},    {AXON_AMO_XOR, 4},   {AXON_AMO_XOR, 8},
    {AXON_AMO_SWAP, 4},  {AXON_AMO_SWAP, 8},  {AXON_AMO_CSWAP, 4}, {AXON_AMO_CSWAP, 8},
    {AXON_AMO_MASKED_CSWAP, 8}, {AXON_AMO_MASKED_CSWAP, 16}, {AXON_AMO_MASKED_CSWAP, 32},
    {AXON_AMO_MFADD, 8}, {AXON_AMO_MFADD, 16}, {AXON_AMO_MFADD, 32},
};

bool is_valid(unsigned op, unsigned size)
{
    for (const OpSize &v : kValid) {
        if (((unsigned)v.op == op) && (v.size == size)) {
            return true;
        }
    }
    return false;
}

/* Masks of every density and the usual field layouts. */
uint64_t random_mask(std::mt19937_64 &rng)
{
    uint64_t a = rng(), b = rng(), c = rng();

    switch (rng() % 10) {
    case 0:  return 0;
    case 1:  return ~0ull;
    case 2:  return a & b & c;                  /* sparse: long fields */
    case 3:  return a | b | c;                  /* dense: 1-bit fields */
    case 4:  return 1ull << (a % 64);
    case 5:  return 0x8080808080808080ull;      /* bytes */
    case 6:  return 0x8000800080008000ull;      /* 16-bit */
    case 7:  return 0x8000000080000000ull;      /* 32-bit */
    default: return a;
    }
}

/* Operands with the carries and equalities that matter more likely than chance. */
uint64_t random_operand(std::mt19937_64 &rng)
{
    switch (rng() % 6) {
    case 0:  return ~0ull;
    case 1:  return 0;
    case 2:  return rng() | 0x8080808080808080ull;
    default: return rng();
    }
}

axon_amo_args_t random_args(std::mt19937_64 &rng, const OpSize &os, const uint64_t *old)
{
    axon_amo_args_t args;
    unsigned        nwords = (os.size + 7) / 8;
    uint64_t        low    = (os.size == 4) ? 0xffffffffull : ~0ull;

    memset(&args, 0, sizeof(args));
    args.op    = (uint8_t)os.op;
    args.size  = (uint8_t)os.size;
    args.fetch = 1;
    for (unsigned i = 0; i < nwords; ++i) {
        args.value[i]     = random_operand(rng) & low;
        args.compare[i]   = rng() & low;
        args.mask[i]      = random_mask(rng);
        args.swap_mask[i] = random_mask(rng);
    }
    /* Half the compares succeed. */
    if (rng() % 2) {
        for (unsigned i = 0; i < nwords; ++i) {
            args.compare[i] = (os.op == AXON_AMO_MASKED_CSWAP) ?
                              ((old[i] & args.mask[i]) | (rng() & ~args.mask[i])) : old[i];
        }
    }
    return args;
}

/* An 8-byte ADD of value, not fetching: the operation most tests here run. */
axon_amo_args_t add8_args(uint64_t value)
{
    axon_amo_args_t args;

    memset(&args, 0, sizeof(args));
    args.op       = AXON_AMO_ADD;
    args.size     = 8;
    args.value[0] = value;
    return args;
}

/* ---------------------------------------------------------------- (a) apply vs model */

/* Known answers, so the model itself is anchored. */
TEST(AmoCpu, KnownAnswers)
{
    axon_amo_args_t args;
    uint64_t        old[4], out[4], ref[4];

    /* 16-bit fields: ffff+1, 0001+1, fffe+2, 0000+1 - no carry crosses a field. */
    memset(&args, 0, sizeof(args));
    args.op      = AXON_AMO_MFADD;
    args.size    = 8;
    args.value[0] = 0x0001000100020001ull;
    args.mask[0]  = 0x8000800080008000ull;
    old[0]        = 0xffff0001fffe0000ull;
    axon_amo_apply(&args, old, out);
    EXPECT_EQ(0x0000000200000001ull, out[0]);
    model(args, old, ref);
    EXPECT_EQ(0x0000000200000001ull, ref[0]);

    /* The manual's 4-bit fields: each nibble wraps on its own; word 1 is its own field. */
    args.size     = 16;
    args.value[0] = 0x1111111111111111ull;
    args.mask[0]  = 0x8888888888888888ull;
    args.value[1] = 1;
    args.mask[1]  = 0;
    old[0]        = 0xf0f0f0f0f0f0f0f0ull;
    old[1]        = 0xffffffffffffffffull;
    axon_amo_apply(&args, old, out);
    EXPECT_EQ(0x0101010101010101ull, out[0]);
    EXPECT_EQ(0ull, out[1]);  /* the carry out of bit 63 does not reach word 0 either */

    /* Masked compare-and-swap: compared bits equal, swap only the masked bits. */
    memset(&args, 0, sizeof(args));
    args.op           = AXON_AMO_MASKED_CSWAP;
    args.size         = 8;
    args.compare[0]   = 0x00ff;
    args.mask[0]      = 0x00ff;
    args.value[0]     = 0xabcd;
    args.swap_mask[0] = 0xff00;
    old[0]            = 0x12345600ffull;
    axon_amo_apply(&args, old, out);
    EXPECT_EQ(0x123456abffull, out[0]);
    old[0] = 0x12345600feull;  /* a compared bit differs: no change */
    axon_amo_apply(&args, old, out);
    EXPECT_EQ(0x12345600feull, out[0]);

    /* 4-byte add wraps at 32 bits; the high half stays 0. */
    memset(&args, 0, sizeof(args));
    args.op       = AXON_AMO_ADD;
    args.size     = 4;
    args.value[0] = 2;
    old[0]        = 0xffffffffull;
    axon_amo_apply(&args, old, out);
    EXPECT_EQ(1ull, out[0]);
}

TEST(AmoCpu, ApplyMatchesModel)
{
    Watchdog        dog(120);
    std::mt19937_64 rng(0x5eed);
    const unsigned  per_pair = 6000;  /* 18 pairs: ~108 000 operations */
    unsigned        bad      = 0;

    for (const OpSize &os : kValid) {
        unsigned nwords = (os.size + 7) / 8;
        uint64_t low    = (os.size == 4) ? 0xffffffffull : ~0ull;

        for (unsigned t = 0; t < per_pair; ++t) {
            uint64_t old[4] = {0, 0, 0, 0}, out[4], ref[4];

            for (unsigned i = 0; i < nwords; ++i) {
                old[i] = random_operand(rng) & low;
            }
            axon_amo_args_t args = random_args(rng, os, old);
            axon_amo_apply(&args, old, out);
            model(args, old, ref);
            for (unsigned i = 0; i < nwords; ++i) {
                if ((out[i] != ref[i]) && (++bad <= 10)) {
                    ADD_FAILURE() << "op " << (int)os.op << " size " << os.size << " word " << i
                                  << std::hex << ": old 0x" << old[i] << " value 0x"
                                  << args.value[i] << " mask 0x" << args.mask[i]
                                  << " -> 0x" << out[i] << ", model 0x" << ref[i];
                }
            }
        }
    }
    EXPECT_EQ(0u, bad);
}

/*
 * exec on real memory: the operand's bytes end up as the model says with
 * word i at bytes [8 i, 8 i + 8); the previous value comes back; the bytes
 * around the operand are untouched.
 */
TEST(AmoCpu, ExecLayoutAndNeighbours)
{
    Watchdog              dog(60);
    std::mt19937_64       rng(77);
    axon_amo_lock_table_t table;
    alignas(64) uint8_t   mem[128];
    alignas(64) uint8_t   expect[128];
    unsigned              bad = 0;

    axon_amo_lock_table_init(&table);
    for (const OpSize &os : kValid) {
        for (unsigned t = 0; t < 500; ++t) {
            uint64_t old[4] = {0, 0, 0, 0}, ref[4], result[4] = {~0ull, ~0ull, ~0ull, ~0ull};
            unsigned offset = 32 + (unsigned)(rng() % (64 / os.size)) * os.size;

            for (unsigned j = 0; j < sizeof(mem); ++j) {
                mem[j] = (uint8_t)rng();
            }
            memcpy(old, mem + offset, os.size);   /* host order: word i is bytes [8i, 8i+8) */
            axon_amo_args_t args = random_args(rng, os, old);
            model(args, old, ref);
            memcpy(expect, mem, sizeof(mem));
            memcpy(expect + offset, ref, os.size);

            axon_amo_cpu_exec(&table, offset, mem + offset, &args, result);
            if ((memcmp(mem, expect, sizeof(mem)) != 0) ||
                (memcmp(result, old, os.size) != 0) ||
                ((os.size == 4) && (result[0] >> 32) != 0)) {
                if (++bad <= 5) {
                    ADD_FAILURE() << "op " << (int)os.op << " size " << os.size << " offset "
                                  << offset;
                }
            }
        }
    }
    EXPECT_EQ(0u, bad);
    for (unsigned i = 0; i < AXON_AMO_LOCKS; ++i) {
        EXPECT_EQ(0u, table.lock[i].word);  /* every lock given back */
    }

    /* A post (result NULL) works the same. */
    uint64_t        word = 5;
    axon_amo_args_t args = add8_args(3);
    axon_amo_cpu_exec(&table, 0, &word, &args, NULL);
    EXPECT_EQ(8u, word);
}

/*
 * Every op waits for the stripe of its block, wherever in the block it sits
 * (what makes a word op atomic with a 32-byte one); a neighbouring block's
 * stripe does not stop it. Deterministic, unlike the races below.
 */
TEST(AmoCpu, EveryOpTakesItsBlockStripe)
{
    Watchdog              dog(60);
    axon_amo_lock_table_t table;
    alignas(64) uint64_t  mem[16];
    const size_t          region_skew = 8;   /* a region starting 8 bytes into a block */

    axon_amo_lock_table_init(&table);
    for (const OpSize &os : kValid) {
        size_t   addr_off = 64 - os.size;        /* the block's last slot for this size */
        uint8_t *addr     = (uint8_t*)mem + addr_off;
        uint8_t *region   = (uint8_t*)mem + region_skew;
        uint64_t offset   = (uint64_t)(addr - region);
        axon_amo_args_t args;
        memset(&args, 0, sizeof(args));
        args.op       = (uint8_t)os.op;
        args.size     = (uint8_t)os.size;
        args.value[0] = 1;
        memset(mem, 0, sizeof(mem));

        /* Held by hand on another address of the same block: exec must wait. */
        axon_amo_lock_t *lock = axon_amo_lock_acquire(&table, 32 - region_skew,
                                                      (uint8_t*)mem + 32);
        int              done = 0;
        std::thread      th([&]() {
            axon_amo_cpu_exec(&table, offset, addr, &args, NULL);
            __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
        });
        usleep(20000);
        EXPECT_EQ(0, __atomic_load_n(&done, __ATOMIC_ACQUIRE)) << "op " << (int)os.op
                                                               << " size " << os.size;
        axon_amo_lock_release(lock);
        th.join();
        EXPECT_EQ(1, done);

        /* The previous block's stripe held: no wait. */
        lock = axon_amo_lock_acquire(&table, 0, region);
        axon_amo_cpu_exec(&table, offset, addr, &args, NULL);
        axon_amo_lock_release(lock);
    }
}

/* ---------------------------------------------------------------- (b) args_check */

TEST(AmoCpu, ArgsCheckRejectsEveryInvalidPair)
{
    LogCapture      log;
    axon_amo_args_t args;
    unsigned        sizes[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 15, 16, 17, 24, 31, 32, 33,
                               48, 64, 128, 255};
    unsigned        ops[]   = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 100, 255};
    unsigned        rejected = 0;

    memset(&args, 0, sizeof(args));
    for (unsigned op : ops) {
        for (unsigned size : sizes) {
            args.op   = (uint8_t)op;
            args.size = (uint8_t)size;
            log.lines.clear();
            axon_status_t status = axon_amo_args_check(&args);
            if (is_valid(op, size)) {
                EXPECT_EQ(AXON_OK, status) << "op " << op << " size " << size;
                EXPECT_TRUE(log.lines.empty());
                continue;
            }
            ++rejected;
            EXPECT_EQ(AXON_ERR_INVALID_PARAM, status) << "op " << op << " size " << size;
            ASSERT_EQ(1u, log.lines.size()) << "op " << op << " size " << size;
            /* The line names the bad value: the op number, or the size. */
            std::string want = (op >= AXON_AMO_LAST) ? "op " + std::to_string(op)
                                                     : "on " + std::to_string(size) + " bytes";
            EXPECT_NE(std::string::npos, log.lines[0].find(want)) << log.lines[0];
        }
    }
    EXPECT_EQ(sizeof(ops) / sizeof(ops[0]) * (sizeof(sizes) / sizeof(sizes[0])) - 18, rejected);

    /* exec does nothing with a refused pair: no memory touched. */
    axon_amo_lock_table_t table;
    uint64_t              mem[4] = {1, 2, 3, 4}, result[4] = {9, 9, 9, 9};
    axon_amo_lock_table_init(&table);
    args.op       = AXON_AMO_ADD;
    args.size     = 32;
    args.value[0] = 1;
    axon_amo_cpu_exec(&table, 0, mem, &args, result);
    EXPECT_EQ(1u, mem[0]);
    EXPECT_EQ(4u, mem[3]);
    EXPECT_EQ(0u, result[0]);
}

/* ---------------------------------------------------------------- (c) concurrency */

/* Where each workload lives in the segment (its own 32-byte block each). */
const size_t kOffAdd     = 0;     /* 8-byte ADD */
const size_t kOffFields  = 32;    /* 32-byte MFADD, 16-bit fields */
const size_t kOffLock    = 64;    /* masked-CSWAP spin lock ... */
const size_t kOffCounter = 128;   /* ... and the plain counter it guards */
const size_t kOffMix     = 192;   /* 32-byte MFADD + 8-byte ADD on word 1 */
const size_t kOffArrived = 256;   /* start barrier: workers that arrived */
const uint64_t kMixAdd   = 1000;

uint64_t field_add_word(unsigned i)
{
    uint64_t w = 0;

    for (unsigned k = 0; k < 4; ++k) {
        w |= (uint64_t)(4 * i + k + 1) << (16 * k);  /* field k of word i adds 4i+k+1 */
    }
    return w;
}

struct Region {
    axon_amo_lock_table_t *locks;
    uint8_t               *base;

    void exec(size_t offset, const axon_amo_args_t &args, uint64_t *result) const
    {
        axon_amo_cpu_exec(locks, offset, base + offset, &args, result);
    }
};

/*
 * Every worker arrives before any starts phase n: otherwise, on a busy host,
 * one may be done before the next begins and nothing is ever contended.
 */
bool barrier(const Region &r, unsigned phase)
{
    uint64_t *arrived = (uint64_t*)(r.base + kOffArrived);
    double    limit   = now_sec() + 30;

    __atomic_fetch_add(arrived, 1, __ATOMIC_ACQ_REL);
    while (__atomic_load_n(arrived, __ATOMIC_ACQUIRE) < (uint64_t)kWorkers * phase) {
        if (now_sec() > limit) {
            return false;
        }
        sched_yield();
    }
    return true;
}

/* One worker's share: kIters of each workload, one after the other. 0 on success. */
int run_workload(const Region &r, unsigned id)
{
    axon_amo_args_t add = add8_args(1), fields, lock, unlock, mix, mix_add;
    uint64_t        old[4];

    memset(&fields, 0, sizeof(fields));
    fields.op   = AXON_AMO_MFADD;
    fields.size = 32;
    for (unsigned i = 0; i < 4; ++i) {
        fields.value[i] = field_add_word(i);
        fields.mask[i]  = 0x8000800080008000ull;
    }

    memset(&lock, 0, sizeof(lock));
    lock.op           = AXON_AMO_MASKED_CSWAP;
    lock.size         = 8;
    lock.fetch        = 1;
    lock.compare[0]   = 0;
    lock.mask[0]      = 1;
    lock.value[0]     = 1;
    lock.swap_mask[0] = 1;
    unlock            = lock;
    unlock.mask[0]    = 0;     /* unconditional */
    unlock.value[0]   = 0;

    memset(&mix, 0, sizeof(mix));
    mix.op   = AXON_AMO_MFADD;
    mix.size = 32;
    for (unsigned i = 0; i < 4; ++i) {
        mix.value[i] = 2 * i + 1;  /* one 64-bit field per word */
    }
    mix_add          = add;
    mix_add.value[0] = kMixAdd;

    volatile uint64_t *counter = (volatile uint64_t*)(r.base + kOffCounter);
    unsigned           phase   = 0;

    /* Workload by workload, all workers on one location at a time. */
    if (!barrier(r, ++phase)) {
        return 9;
    }
    for (unsigned n = 0; n < kIters; ++n) {
        r.exec(kOffAdd, add, NULL);
    }

    if (!barrier(r, ++phase)) {
        return 9;
    }
    for (unsigned n = 0; n < kIters; ++n) {
        r.exec(kOffFields, fields, NULL);
    }

    if (!barrier(r, ++phase)) {
        return 9;
    }
    for (unsigned n = 0; n < kIters; ++n) {
        for (unsigned tries = 0;; ++tries) {
            r.exec(kOffLock, lock, old);
            if ((old[0] & 1) == 0) {
                break;
            }
            if (tries > 16) {
                sched_yield();  /* the holder may be off-CPU */
            }
        }
        *counter = *counter + 1;
        r.exec(kOffLock, unlock, NULL);
    }

    if (!barrier(r, ++phase)) {
        return 9;
    }
    /* Half the workers add to word 1 while the others do the 32-byte op: a
     * word add that skipped the stripe would be lost inside the other's update. */
    for (unsigned half = 0; half < 2; ++half) {
        bool wide = ((id + half) % 2) == 0;
        for (unsigned n = 0; n < kIters; ++n) {
            if (wide) {
                r.exec(kOffMix, mix, NULL);
            } else {
                r.exec(kOffMix + 8, mix_add, NULL);
            }
        }
    }
    return 0;
}

::testing::AssertionResult check_totals(const uint8_t *base, unsigned workers)
{
    uint64_t n = (uint64_t)workers * kIters;
    uint64_t w[4];

    memcpy(w, base + kOffAdd, 8);
    if (w[0] != n) {
        return ::testing::AssertionFailure() << "8-byte add: " << w[0] << " != " << n;
    }
    memcpy(w, base + kOffFields, 32);
    for (unsigned i = 0; i < 4; ++i) {
        for (unsigned k = 0; k < 4; ++k) {
            uint64_t got  = (w[i] >> (16 * k)) & 0xffff;
            uint64_t want = (n * (4 * i + k + 1)) & 0xffff;
            if (got != want) {
                return ::testing::AssertionFailure() << "mfadd word " << i << " field " << k
                                                     << ": " << got << " != " << want;
            }
        }
    }
    memcpy(w, base + kOffLock, 8);
    if (w[0] != 0) {
        return ::testing::AssertionFailure() << "spin lock left held: " << w[0];
    }
    memcpy(w, base + kOffCounter, 8);
    if (w[0] != n) {
        return ::testing::AssertionFailure() << "locked counter: " << w[0] << " != " << n;
    }
    memcpy(w, base + kOffMix, 32);
    for (unsigned i = 0; i < 4; ++i) {
        uint64_t want = n * (2 * i + 1) + ((i == 1) ? n * kMixAdd : 0);
        if (w[i] != want) {
            return ::testing::AssertionFailure() << "mix word " << i << ": " << w[i]
                                                 << " != " << want;
        }
    }
    return ::testing::AssertionSuccess();
}

struct SegKey {
    axon_proc_t owner;
    int32_t     fd;
    uint64_t    length;
    uint64_t    token;
};

SegKey key_of(const axon_mem_seg_t &seg)
{
    SegKey key;

    memset(&key, 0, sizeof(key));
    axon_proc_self(&key.owner);
    key.fd     = seg.fd;
    key.length = seg.length;
    key.token  = seg.token;
    return key;
}

TEST(AmoCpu, ThreadsExactTotals)
{
    Watchdog       dog(120);
    axon_mem_seg_t seg;

    ASSERT_EQ(AXON_OK, axon_mem_seg_alloc(4096, 0x1234, &seg));
    SegKey           key = key_of(seg);
    std::vector<int> rc(kWorkers, -1);
    std::vector<std::thread> threads;
    double           start = now_sec();

    for (unsigned t = 0; t < kWorkers; ++t) {
        threads.emplace_back([&key, &rc, t]() {
            axon_mem_seg_t mine;   /* a mapping of its own: another address, same offsets */
            if (axon_mem_seg_attach(&key.owner, key.fd, key.length, key.token, &mine) !=
                AXON_OK) {
                rc[t] = 1;
                return;
            }
            rc[t] = run_workload(Region{mine.locks, (uint8_t*)mine.address}, t);
            axon_mem_seg_detach(&mine);
        });
    }
    for (std::thread &th : threads) {
        th.join();
    }
    for (unsigned t = 0; t < kWorkers; ++t) {
        EXPECT_EQ(0, rc[t]) << "thread " << t;
    }
    EXPECT_TRUE(check_totals((const uint8_t*)seg.address, kWorkers));
    printf("[          ] %u threads x %u x 4 workloads: %.2f s\n", kWorkers, kIters,
           now_sec() - start);
    axon_mem_seg_free(&seg);
}

/*
 * A 4- or 8-byte operation under the stripe is atomic against a CPU atomic
 * on the same word that takes no stripe (a peer's through axon_rkey_ptr):
 * threads adding with axon_amo_cpu_exec and threads adding with a plain
 * locked instruction lose no count, on an 8-byte and a 4-byte word; a
 * compare-and-swap that fails writes nothing (an increment racing it stays).
 */
TEST(AmoCpu, StripeOpsAreAtomicAgainstPlainCpuAtomics)
{
    Watchdog       dog(120);
    axon_mem_seg_t seg;
    const unsigned kIter = 100000;

    ASSERT_EQ(AXON_OK, axon_mem_seg_alloc(4096, 0x4321, &seg));
    uint64_t *word = reinterpret_cast<uint64_t *>(seg.address);
    uint32_t *half = reinterpret_cast<uint32_t *>(static_cast<uint8_t *>(seg.address) + 64);
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < 4; ++t) {
        threads.emplace_back([&, t]() {
            axon_amo_args_t add8 = {}, add4 = {}, cas8 = {};
            uint64_t        old;
            add8.op = AXON_AMO_ADD, add8.size = 8, add8.value[0] = 1;
            add4.op = AXON_AMO_ADD, add4.size = 4, add4.value[0] = 1;
            cas8.op = AXON_AMO_CSWAP, cas8.size = 8, cas8.compare[0] = ~0ull;
            for (unsigned i = 0; i < kIter; ++i) {
                if (t % 2 == 0) {   /* Axon's executor */
                    axon_amo_cpu_exec(seg.locks, 0, word, &add8, &old);
                    axon_amo_cpu_exec(seg.locks, 64, half, &add4, &old);
                    axon_amo_cpu_exec(seg.locks, 0, word, &cas8, &old);   /* never matches */
                } else {            /* a CPU atomic through a direct pointer */
                    __atomic_fetch_add(word, 1, __ATOMIC_RELAXED);
                    __atomic_fetch_add(half, 1, __ATOMIC_RELAXED);
                }
            }
        });
    }
    for (std::thread &th : threads) {
        th.join();
    }
    EXPECT_EQ(4ull * kIter, *word) << "counts lost between the stripe and plain atomics";
    EXPECT_EQ(4u * kIter, *half) << "counts lost on a 4-byte word";
    axon_mem_seg_free(&seg);
}

struct WorkerArg {
    SegKey   key;
    unsigned id;
};

int workload_child(int fd, void *arg)
{
    const WorkerArg *w   = (const WorkerArg*)arg;
    const SegKey    *key = &w->key;
    axon_mem_seg_t seg;

    if (axon_mem_seg_attach(&key->owner, key->fd, key->length, key->token, &seg) != AXON_OK) {
        return 2;
    }
    if (axon_test_sync(fd) != 0) {  /* everyone attached: start together */
        return 3;
    }
    int ret = run_workload(Region{seg.locks, (uint8_t*)seg.address}, w->id);
    axon_mem_seg_detach(&seg);
    return ret;
}

TEST(AmoCpuSlow, ProcessesExactTotals)
{
    Watchdog         dog(150);
    axon_mem_seg_t   seg;
    axon_test_peer_t peer[kWorkers];

    ASSERT_EQ(AXON_OK, axon_mem_seg_alloc(4096, 0xabcdef, &seg));
    WorkerArg arg[kWorkers];
    double    start = now_sec();

    for (unsigned p = 0; p < kWorkers; ++p) {
        arg[p].key = key_of(seg);
        arg[p].id  = p;
        ASSERT_EQ(0, axon_test_peer_spawn(&peer[p], workload_child, &arg[p], kChildTimeout));
    }
    for (unsigned p = 0; p < kWorkers; ++p) {
        EXPECT_EQ(0, axon_test_sync(peer[p].fd)) << "child " << p;
    }
    for (unsigned p = 0; p < kWorkers; ++p) {
        EXPECT_EQ(0, axon_test_peer_wait(&peer[p], kChildTimeout)) << "child " << p;
    }
    EXPECT_TRUE(check_totals((const uint8_t*)seg.address, kWorkers));
    printf("[          ] %u processes x %u x 4 workloads: %.2f s\n", kWorkers, kIters,
           now_sec() - start);
    axon_mem_seg_free(&seg);
}

/* ---------------------------------------------------------------- (d) dead lock holder */

struct HolderArg {
    SegKey key;
    size_t offset;
    double hold_sec;  /* < 0: hold until killed */
};

/* Take the stripe lock of offset, tell the parent, then hold it (and maybe give it back). */
int holder_child(int fd, void *arg)
{
    const HolderArg *h = (const HolderArg*)arg;
    axon_mem_seg_t   seg;
    char             c = 'l';

    if (axon_mem_seg_attach(&h->key.owner, h->key.fd, h->key.length, h->key.token, &seg) !=
        AXON_OK) {
        return 2;
    }
    axon_amo_lock_t *lock = axon_amo_lock_acquire(seg.locks, h->offset,
                                                  (uint8_t*)seg.address + h->offset);
    if (__atomic_load_n(&lock->word, __ATOMIC_RELAXED) != (uint32_t)getpid()) {
        return 4;   /* the word must name us, not a pid cached before fork */
    }
    if (write(fd, &c, 1) != 1) {
        return 3;
    }
    if (h->hold_sec < 0) {
        for (;;) {
            pause();
        }
    }
    usleep((useconds_t)(h->hold_sec * 1e6));
    /* A live holder is waited for, never robbed. */
    int robbed = __atomic_load_n(&lock->word, __ATOMIC_RELAXED) != (uint32_t)getpid();
    axon_amo_lock_release(lock);
    axon_mem_seg_detach(&seg);
    return robbed ? 5 : 0;
}

bool wait_byte(int fd, double timeout_sec)
{
    struct pollfd pfd = {fd, POLLIN, 0};
    char          c;

    return (poll(&pfd, 1, (int)(timeout_sec * 1000)) == 1) && (read(fd, &c, 1) == 1);
}

class AmoCpuDeadOwnerXproc : public ::testing::TestWithParam<bool> {};

/* Param: reap the killed holder first (gone) or not (a zombie: kill(pid, 0) still works). */
TEST_P(AmoCpuDeadOwnerXproc, NextExecTakesOver)
{
    Watchdog         dog(60);
    LogCapture       log;
    axon_mem_seg_t   seg;
    axon_test_peer_t peer;
    HolderArg        h;
    const size_t     offset = 96 + 8;

    ASSERT_EQ(AXON_OK, axon_mem_seg_alloc(4096, 42, &seg));
    h.key      = key_of(seg);
    h.offset   = offset;
    h.hold_sec = -1;

    /* Cache our pid in the library first: the child must not inherit it. */
    axon_amo_args_t args = add8_args(1);
    axon_amo_cpu_exec(seg.locks, offset, (uint8_t*)seg.address + offset, &args, NULL);

    ASSERT_EQ(0, axon_test_peer_spawn(&peer, holder_child, &h, kChildTimeout));
    ASSERT_TRUE(wait_byte(peer.fd, 20)) << "the child did not take the lock";
    pid_t pid = peer.pid;
    if (GetParam()) {
        ASSERT_EQ(pid, axon_test_peer_crash(&peer));
    } else {
        ASSERT_EQ(0, kill(pid, SIGKILL));
        usleep(10000);   /* let it die: a zombie until we reap it below */
    }

    /* Another block of the same stripe (64 blocks later) waits for the same lock. */
    size_t   other = offset + 32 * AXON_AMO_LOCKS;
    uint64_t result[1];
    double   t0 = now_sec();
    axon_amo_cpu_exec(seg.locks, other, (uint8_t*)seg.address + other, &args, result);
    double   took = now_sec() - t0;
    EXPECT_LT(took, 1.0);
    EXPECT_EQ(0u, result[0]);
    EXPECT_EQ(1u, *(uint64_t*)((uint8_t*)seg.address + other));
    EXPECT_TRUE(log.any_contains("died holding it")) << "no warning about the takeover";
    for (unsigned i = 0; i < AXON_AMO_LOCKS; ++i) {
        EXPECT_EQ(0u, seg.locks->lock[i].word) << "lock " << i;
    }
    printf("[          ] took over in %.1f ms\n", took * 1e3);

    if (!GetParam()) {
        EXPECT_EQ(-1, axon_test_peer_wait(&peer, 10));   /* died by a signal */
    }
    axon_mem_seg_free(&seg);
}

INSTANTIATE_TEST_SUITE_P(Reaped, AmoCpuDeadOwnerXproc, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool> &info) {
                             return std::string(info.param ? "reaped" : "zombie");
                         });

/* The holder is a thread of a process whose main thread has exited (a zombie leader). */
int zombie_leader_child(int fd, void *arg)
{
    static int       sock;
    static HolderArg h;

    sock = fd;
    h    = *(const HolderArg*)arg;
    std::thread([]() { _exit(holder_child(sock, &h)); }).detach();
    /* End this thread only (pthread_exit would unwind into the test framework). */
    for (;;) {
        syscall(SYS_exit, 0);
    }
}

/*
 * A holder alive longer than a liveness check period: exec waits for it,
 * never robs it (the child returns 5 if it was robbed).
 */
void expect_live_holder_waited_for(int (*child)(int, void *), uint64_t token)
{
    Watchdog         dog(60);
    axon_mem_seg_t   seg;
    axon_test_peer_t peer;
    HolderArg        h;

    ASSERT_EQ(AXON_OK, axon_mem_seg_alloc(4096, token, &seg));
    h.key      = key_of(seg);
    h.offset   = 0;
    h.hold_sec = 0.3;
    ASSERT_EQ(0, axon_test_peer_spawn(&peer, child, &h, kChildTimeout));
    ASSERT_TRUE(wait_byte(peer.fd, 20));

    axon_amo_args_t args = add8_args(7);
    double          t0   = now_sec();
    axon_amo_cpu_exec(seg.locks, 0, seg.address, &args, NULL);
    EXPECT_GT(now_sec() - t0, 0.2);
    EXPECT_EQ(7u, *(uint64_t*)seg.address);
    EXPECT_EQ(0, axon_test_peer_wait(&peer, kChildTimeout));
    axon_mem_seg_free(&seg);
}

TEST(AmoCpuXproc, LiveHolderIsWaitedFor)
{
    expect_live_holder_waited_for(holder_child, 43);
}

TEST(AmoCpuXproc, ZombieLeaderWithLiveHolderIsWaitedFor)
{
    expect_live_holder_waited_for(zombie_leader_child, 44);
}

}  // namespace
