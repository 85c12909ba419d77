/*
 * Atomics done by a CPU: the operations' definitions (axon_amo_apply) and
 * their execution under a region's lock stripes. A lock word holds its
 * owner's pid; waiters spin (an owner is mid-operation for nanoseconds) and,
 * after a while, check whether the owner died holding it and take it over.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "amo_cpu.h"
#include "log.h"
#include "sys.h"

#define AXON_AMO_LIKELY(_x)   __builtin_expect(!!(_x), 1)
#define AXON_AMO_UNLIKELY(_x) __builtin_expect(!!(_x), 0)

/* Waiting for a lock: pure spinning first, then yields between rounds (on a
 * busy host the owner may be preempted); owner liveness checked this often. */
#define AXON_AMO_SPIN_ONLY        1024
#define AXON_AMO_SPIN_ROUND       64
#define AXON_AMO_CHECK_NSEC       100000ull       /* 100 us */
#define AXON_AMO_LIVE_WARN_NSEC   2000000000ull   /* a live owner this slow is worth a line */

/* Sizes each op accepts, as a bit per size (1 << size): the op/size table. */
#define AXON_AMO_SIZES_STD  ((1ull << 4) | (1ull << 8))
#define AXON_AMO_SIZES_EXT  ((1ull << 8) | (1ull << 16) | (1ull << 32))

static const struct {
    const char *name;
    uint64_t    sizes;
} axon_amo_op_table[AXON_AMO_LAST] = {
    [AXON_AMO_ADD]          = {"add",          AXON_AMO_SIZES_STD},
    [AXON_AMO_AND]          = {"and",          AXON_AMO_SIZES_STD},
    [AXON_AMO_OR]           = {"or",           AXON_AMO_SIZES_STD},
    [AXON_AMO_XOR]          = {"xor",          AXON_AMO_SIZES_STD},
    [AXON_AMO_SWAP]         = {"swap",         AXON_AMO_SIZES_STD},
    [AXON_AMO_CSWAP]        = {"cswap",        AXON_AMO_SIZES_STD},
    [AXON_AMO_MASKED_CSWAP] = {"masked_cswap", AXON_AMO_SIZES_EXT},
    [AXON_AMO_MFADD]        = {"mfadd",        AXON_AMO_SIZES_EXT},
};

static inline int axon_amo_valid(const axon_amo_args_t *args)
{
    return (args->op < AXON_AMO_LAST) && (args->size <= 32) &&
           (axon_amo_op_table[args->op].sizes & (1ull << args->size));
}

axon_status_t axon_amo_args_check(const axon_amo_args_t *args)
{
    if (args->op >= AXON_AMO_LAST) {
        axon_error("atomic op %u does not exist (0..%u)", args->op, AXON_AMO_LAST - 1);
        return AXON_ERR_INVALID_PARAM;
    }
    if (!axon_amo_valid(args)) {
        axon_error("atomic %s on %u bytes does not exist (%s)", axon_amo_op_table[args->op].name,
                   args->size, (args->op < AXON_AMO_MASKED_CSWAP) ? "4 or 8" : "8, 16 or 32");
        return AXON_ERR_INVALID_PARAM;
    }
    return AXON_OK;
}

/* 64-bit words the operand covers (a 4-byte one: the low half of word 0). */
static inline unsigned axon_amo_words(unsigned size)
{
    return (size <= 8) ? 1 : size / 8;
}

/*
 * Add field by field, a field's most significant bit being a 1 of
 * boundaries: with those bits cleared, a field's carry stops in its own top
 * bit; the top bits then take the sum of their operands' bits, carry dropped.
 */
static inline uint64_t axon_amo_field_add(uint64_t a, uint64_t b, uint64_t boundaries)
{
    uint64_t tops = boundaries | (1ull << 63);

    return ((a & ~tops) + (b & ~tops)) ^ ((a ^ b) & tops);
}

void axon_amo_apply(const axon_amo_args_t *args, const uint64_t *old, uint64_t *new_value)
{
    unsigned words = axon_amo_words(args->size);
    uint64_t low   = (args->size == 4) ? 0xffffffffull : ~0ull;
    unsigned i;
    int      equal;

    if (!axon_amo_valid(args)) {
        new_value[0] = old[0];  /* no such operation (args_check says so): no change */
        return;
    }
    for (i = 0; i < words; ++i) {
        new_value[i] = old[i];
    }
    new_value[0] &= low;

    switch (args->op) {
    case AXON_AMO_ADD:
        new_value[0] = (old[0] + args->value[0]) & low;
        break;
    case AXON_AMO_AND:
        new_value[0] = old[0] & args->value[0] & low;
        break;
    case AXON_AMO_OR:
        new_value[0] = (old[0] | args->value[0]) & low;
        break;
    case AXON_AMO_XOR:
        new_value[0] = (old[0] ^ args->value[0]) & low;
        break;
    case AXON_AMO_SWAP:
        new_value[0] = args->value[0] & low;
        break;
    case AXON_AMO_CSWAP:
        if (((old[0] ^ args->compare[0]) & low) == 0) {
            new_value[0] = args->value[0] & low;
        }
        break;
    case AXON_AMO_MASKED_CSWAP:
        equal = 1;
        for (i = 0; i < words; ++i) {
            equal &= ((old[i] ^ args->compare[i]) & args->mask[i]) == 0;
        }
        if (equal) {
            for (i = 0; i < words; ++i) {
                new_value[i] = (old[i] & ~args->swap_mask[i]) |
                               (args->value[i] & args->swap_mask[i]);
            }
        }
        break;
    case AXON_AMO_MFADD:
        for (i = 0; i < words; ++i) {
            new_value[i] = axon_amo_field_add(old[i], args->value[i], args->mask[i]);
        }
        break;
    default:
        break;
    }
}

void axon_amo_lock_table_init(axon_amo_lock_table_t *table)
{
    unsigned i;

    for (i = 0; i < AXON_AMO_LOCKS; ++i) {
        __atomic_store_n(&table->lock[i].word, 0, __ATOMIC_RELAXED);
    }
    __atomic_thread_fence(__ATOMIC_RELEASE);
}

/* ---------------------------------------------------------------- locks */

/* Our pid, cached: getpid() is a system call. A forked child clears it. */
static uint32_t       axon_amo_pid;
static pthread_once_t axon_amo_pid_once = PTHREAD_ONCE_INIT;

static void axon_amo_pid_forget(void)
{
    __atomic_store_n(&axon_amo_pid, 0, __ATOMIC_RELAXED);
}

static void axon_amo_pid_atfork(void)
{
    pthread_atfork(NULL, NULL, axon_amo_pid_forget);
}

static uint32_t axon_amo_pid_read(void)
{
    uint32_t pid;

    pthread_once(&axon_amo_pid_once, axon_amo_pid_atfork);
    pid = (uint32_t)getpid();
    __atomic_store_n(&axon_amo_pid, pid, __ATOMIC_RELAXED);
    return pid;
}

static inline uint32_t axon_amo_self(void)
{
    uint32_t pid = __atomic_load_n(&axon_amo_pid, __ATOMIC_RELAXED);

    return AXON_AMO_LIKELY(pid != 0) ? pid : axon_amo_pid_read();
}

static inline void axon_amo_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#else
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
#endif
}

/*
 * Has the process pid died? No such pid, or a zombie (killed, not yet reaped
 * by its parent: kill() still finds it). The lock word carries only a pid,
 * so a pid reused meanwhile looks alive: we then keep waiting (and say so).
 */
static int axon_amo_owner_dead(uint32_t pid)
{
    char    path[40], buf[512];
    char   *p;
    ssize_t n;
    int     fd, field;

    if ((kill((pid_t)pid, 0) != 0) && (errno == ESRCH)) {
        return 1;
    }
    snprintf(path, sizeof(path), "/proc/%u/stat", pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return (errno == ENOENT) && (kill((pid_t)pid, 0) != 0) && (errno == ESRCH);
    }
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) {
        return 0;
    }
    buf[n] = '\0';
    p = strrchr(buf, ')');  /* the command name (field 2) may hold anything */
    if ((p == NULL) || (p[1] != ' ') || ((p[2] != 'Z') && (p[2] != 'X'))) {
        return 0;
    }
    /* A zombie leader whose other threads live (it called pthread_exit) lives on. */
    for (field = 3; (field <= 20) && (p != NULL); ++field) {
        p = strchr(p + 1, ' ');
    }
    return (p != NULL) && (strtoul(p + 1, NULL, 10) <= 1);
}

/* The contended path: spin, yield, and take over from a dead owner. */
static void __attribute__((noinline))
axon_amo_lock_wait(axon_amo_lock_t *lock, uint32_t self)
{
    uint64_t start = 0, last_check = 0, now;
    unsigned spins = 0, i;
    uint32_t owner;
    int      warned = 0;

    for (;;) {
        owner = __atomic_load_n(&lock->word, __ATOMIC_RELAXED);
        if ((owner == 0) &&
            __atomic_compare_exchange_n(&lock->word, &owner, self, 0, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED)) {
            return;
        }

        if (spins < AXON_AMO_SPIN_ONLY) {
            ++spins;
            axon_amo_cpu_relax();
            continue;
        }
        for (i = 0; i < AXON_AMO_SPIN_ROUND; ++i) {
            axon_amo_cpu_relax();
        }
        sched_yield();

        now = axon_sys_time_ns();
        if (start == 0) {
            start = last_check = now;
            continue;
        }
        if ((now - last_check < AXON_AMO_CHECK_NSEC) || (owner == 0) || (owner == self)) {
            continue;  /* our own thread holds it: it is alive */
        }
        last_check = now;
        if (axon_amo_owner_dead(owner)) {
            if (__atomic_compare_exchange_n(&lock->word, &owner, self, 0, __ATOMIC_ACQUIRE,
                                            __ATOMIC_RELAXED)) {
                axon_warn("atomic lock %p: took it over from pid %u, which died holding it "
                          "(an atomic it was doing may be half done)", (void *)lock, owner);
                return;
            }
        } else if (!warned && (now - start > AXON_AMO_LIVE_WARN_NSEC)) {
            axon_warn("atomic lock %p: pid %u has held it for %.1f s (stopped, or a reused pid)",
                      (void *)lock, owner, (double)(now - start) * 1e-9);
            warned = 1;
        }
    }
}

/*
 * The stripe of an operand: its 32-byte block, counted in a way every
 * process agrees on even when the region does not start 32-byte aligned
 * (the region's start is equally misaligned in every mapping: page offsets
 * match). An aligned operand never straddles two blocks.
 */
static inline axon_amo_lock_t *axon_amo_lock_of(axon_amo_lock_table_t *table,
                                                uint64_t region_offset, const void *addr)
{
    uint64_t misalign = ((uint64_t)(uintptr_t)addr - region_offset) &
                        ((1u << AXON_AMO_BLOCK_SHIFT) - 1);

    return &table->lock[((region_offset + misalign) >> AXON_AMO_BLOCK_SHIFT) % AXON_AMO_LOCKS];
}

static inline void axon_amo_lock_take(axon_amo_lock_t *lock)
{
    uint32_t self     = axon_amo_self();
    uint32_t expected = 0;

    if (AXON_AMO_UNLIKELY(!__atomic_compare_exchange_n(&lock->word, &expected, self, 0,
                                                       __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))) {
        axon_amo_lock_wait(lock, self);
    }
}

static inline void axon_amo_lock_give(axon_amo_lock_t *lock)
{
    __atomic_store_n(&lock->word, 0, __ATOMIC_RELEASE);
}

axon_amo_lock_t *axon_amo_lock_acquire(axon_amo_lock_table_t *table, uint64_t region_offset,
                                       const void *addr)
{
    axon_amo_lock_t *lock = axon_amo_lock_of(table, region_offset, addr);

    axon_amo_lock_take(lock);
    return lock;
}

void axon_amo_lock_release(axon_amo_lock_t *lock)
{
    axon_amo_lock_give(lock);
}

/* ---------------------------------------------------------------- execution */

/*
 * A 4- or 8-byte operand changes by compare-and-swap, under the stripe all
 * the same: atomic against a CPU atomic that does not take the stripe (a
 * peer's own instruction through axon_rkey_ptr, the libfabric provider's
 * event words) as well as against Axon's wider operations, which the stripe
 * serialises. A failed compare (new == old) writes nothing.
 */
static inline void axon_amo_cpu_exec_word(uint64_t *word, const axon_amo_args_t *args,
                                          uint64_t *old)
{
    uint64_t new_value[AXON_AMO_MAX_WORDS];

    old[0] = __atomic_load_n(word, __ATOMIC_RELAXED);
    do {
        axon_amo_apply(args, old, new_value);
    } while ((new_value[0] != old[0]) &&
             !__atomic_compare_exchange_n(word, &old[0], new_value[0], 0, __ATOMIC_ACQ_REL,
                                          __ATOMIC_RELAXED));
}

static inline void axon_amo_cpu_exec_half(uint32_t *half, const axon_amo_args_t *args,
                                          uint64_t *old)
{
    uint64_t new_value[AXON_AMO_MAX_WORDS];
    uint32_t seen = __atomic_load_n(half, __ATOMIC_RELAXED);

    for (;;) {
        old[0] = seen;
        axon_amo_apply(args, old, new_value);
        if ((new_value[0] == old[0]) ||
            __atomic_compare_exchange_n(half, &seen, (uint32_t)new_value[0], 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            return;
        }
    }
}

void axon_amo_cpu_exec(axon_amo_lock_table_t *table, uint64_t region_offset, void *addr,
                       const axon_amo_args_t *args, uint64_t *result)
{
    uint64_t         old[AXON_AMO_MAX_WORDS], new_value[AXON_AMO_MAX_WORDS];
    uint64_t        *word = (uint64_t *)addr;
    uint32_t        *half = (uint32_t *)addr;
    unsigned         words = axon_amo_words(args->size);
    axon_amo_lock_t *lock;
    unsigned         i;

    if (AXON_AMO_UNLIKELY(!axon_amo_valid(args))) {
        if (result != NULL) {
            result[0] = 0;  /* args_check refuses it: never touch memory for it */
        }
        return;
    }

    lock = axon_amo_lock_of(table, region_offset, addr);
    axon_amo_lock_take(lock);

    if (args->size == 4) {
        axon_amo_cpu_exec_half(half, args, old);
    } else if (words == 1) {
        axon_amo_cpu_exec_word(word, args, old);
    } else {
        /* Word by word, atomically each: plain readers never see a torn word. */
        for (i = 0; i < words; ++i) {
            old[i] = __atomic_load_n(&word[i], __ATOMIC_RELAXED);
        }
        axon_amo_apply(args, old, new_value);
        for (i = 0; i < words; ++i) {
            if (new_value[i] != old[i]) {  /* a failed compare dirties nothing */
                __atomic_store_n(&word[i], new_value[i], __ATOMIC_RELEASE);
            }
        }
    }

    axon_amo_lock_give(lock);

    if (result != NULL) {
        for (i = 0; i < words; ++i) {
            result[i] = old[i];
        }
    }
}
