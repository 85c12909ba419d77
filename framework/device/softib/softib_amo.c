/*
 * Atomics at the responder (what and why: softib_amo.h). The new value is
 * always axon_amo_apply()'s; this file only makes the read-modify-write
 * atomic, with the instruction the operand size allows.
 */
#include <string.h>
#include "log.h"
#include "softib_amo.h"
#include "softib_guard.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

/* One table for every softib device of the process: zero = all free. */
static axon_amo_lock_table_t softib_amo_locks;

/* -1 unknown, else whether 16-byte compare-and-swap exists (CPUID once). */
static int softib_amo_cx16 = -1;

static int softib_amo_have_cas16(void)
{
    int have = __atomic_load_n(&softib_amo_cx16, __ATOMIC_RELAXED);

    if (have < 0) {
#if defined(__x86_64__)
        unsigned a, b, c, d;

        have = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_CMPXCHG16B);
#else
        have = 0;
#endif
        __atomic_store_n(&softib_amo_cx16, have, __ATOMIC_RELAXED);
    }
    return have;
}

uint32_t softib_amo_glob_sizes(void)
{
    return (1u << 2) | (1u << 3) | (softib_amo_have_cas16() ? (1u << 4) : 0);
}

#if defined(__x86_64__)
/* lock cmpxchg16b: on failure expected takes the value found. addr 16-byte aligned. */
static inline int softib_amo_cas16(uint64_t *addr, uint64_t *expected, const uint64_t *desired)
{
    typedef struct { uint64_t w[2]; } pair_t;
    uint8_t ok;

    __asm__ __volatile__("lock cmpxchg16b %1\n\tsetz %0"
                         : "=q"(ok), "+m"(*(volatile pair_t *)addr),
                           "+a"(expected[0]), "+d"(expected[1])
                         : "b"(desired[0]), "c"(desired[1])
                         : "memory", "cc");
    return ok;
}
#endif

/*
 * A 4-byte masked operation as an 8-byte one on the low half: operands
 * trimmed to 32 bits, bit 31 an implicit field boundary (the operand's top).
 * The high half stays 0 in and out, so nothing crosses into it.
 */
static void softib_amo_args_widen(const axon_amo_args_t *args, axon_amo_args_t *wide)
{
    memset(wide, 0, sizeof(*wide));
    wide->op           = args->op;
    wide->size         = 8;
    wide->value[0]     = args->value[0] & 0xffffffffull;
    wide->compare[0]   = args->compare[0] & 0xffffffffull;
    wide->mask[0]      = args->mask[0] & 0xffffffffull;
    wide->swap_mask[0] = args->swap_mask[0] & 0xffffffffull;
    if (args->op == AXON_AMO_MFADD) {
        wide->mask[0] |= 1ull << 31;
    }
}

static void softib_amo_exec4(const axon_amo_args_t *args, uint32_t *addr, uint64_t *prev)
{
    axon_amo_args_t wide;
    uint32_t expected = __atomic_load_n(addr, __ATOMIC_RELAXED);
    uint64_t old, new_value;

    softib_amo_args_widen(args, &wide);
    do {
        old = expected;
        axon_amo_apply(&wide, &old, &new_value);
    } while (!__atomic_compare_exchange_n(addr, &expected, (uint32_t)new_value, 0,
                                          __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
    prev[0] = old;
}

static void softib_amo_exec8(const axon_amo_args_t *args, uint64_t *addr, uint64_t *prev)
{
    uint64_t expected = __atomic_load_n(addr, __ATOMIC_RELAXED);
    uint64_t old, new_value;

    do {
        old = expected;
        axon_amo_apply(args, &old, &new_value);
    } while (!__atomic_compare_exchange_n(addr, &expected, new_value, 0, __ATOMIC_SEQ_CST,
                                          __ATOMIC_RELAXED));
    prev[0] = old;
}

/* Under the stripe lock, a word at a time (each word written atomically). */
static void softib_amo_exec_locked(const axon_amo_args_t *args, uint64_t *addr,
                                   uint64_t *prev)
{
    uint64_t new_value[SOFTIB_AMO_MAX_WORDS];
    unsigned words = softib_amo_words(args->size), i;

    for (i = 0; i < words; i++) {
        prev[i] = __atomic_load_n(&addr[i], __ATOMIC_RELAXED);
    }
    axon_amo_apply(args, prev, new_value);
    for (i = 0; i < words; i++) {
        if (new_value[i] != prev[i]) {
            __atomic_store_n(&addr[i], new_value[i], __ATOMIC_RELEASE);
        }
    }
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

static void softib_amo_exec16(const axon_amo_args_t *args, uint64_t *addr, uint64_t *prev)
{
#if defined(__x86_64__)
    uint64_t expected[2], new_value[2];

    if (softib_amo_have_cas16()) {
        /* a torn first guess only costs a retry: the CAS reads the real value */
        expected[0] = __atomic_load_n(&addr[0], __ATOMIC_RELAXED);
        expected[1] = __atomic_load_n(&addr[1], __ATOMIC_RELAXED);
        do {
            prev[0] = expected[0];
            prev[1] = expected[1];
            axon_amo_apply(args, prev, new_value);
        } while (!softib_amo_cas16(addr, expected, new_value));
        return;
    }
#endif
    softib_amo_exec_locked(args, addr, prev);
}

typedef struct {
    const axon_amo_args_t *args;
    void                  *addr;
    uint64_t              *prev;
} softib_amo_job_t;

static void softib_amo_exec_sized(void *arg)
{
    const softib_amo_job_t *j = arg;

    switch (j->args->size) {
    case 4:
        softib_amo_exec4(j->args, j->addr, j->prev);
        break;
    case 8:
        softib_amo_exec8(j->args, j->addr, j->prev);
        break;
    case 16:
        softib_amo_exec16(j->args, j->addr, j->prev);
        break;
    default:
        softib_amo_exec_locked(j->args, j->addr, j->prev);
        break;
    }
}

void softib_amo_exec(const axon_amo_args_t *args, void *addr, uint64_t *prev)
{
    axon_amo_lock_t *lock = axon_amo_lock_acquire(&softib_amo_locks, (uintptr_t)addr, addr);
    softib_amo_job_t job  = {args, addr, prev};

    /* Guarded inside the lock, so a fault never leaves it held (softib_guard.h):
     * a target unmapped meanwhile reads as zeros and keeps no result. */
    if (softib_guard_call(softib_amo_exec_sized, &job) != 0) {
        memset(prev, 0, 8 * softib_amo_words(args->size));
        axon_debug("softib: atomic at %p: no longer mapped, the result dropped", addr);
    }
    axon_amo_lock_release(lock);
}
