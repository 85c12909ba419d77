/*
 * What each (operation, datatype) of fi_atomic(3) computes, and which
 * pairs the provider offers. The initiator runs these on the value a
 * compare-and-swap read (axon_fi_atomic.c): the CAS then installs the
 * result only if the location still holds that value, so the operation
 * stays atomic with every other Axon atomic on it.
 *
 *   integers (8-128 bits)        every operation
 *   float, double, long double   all but the bitwise ones and FI_MSWAP
 *   the complex types            none: a complex is aligned to its parts only,
 *                                so one may straddle the 32 bytes that Axon's
 *                                widest atomic (a masked compare-and-swap)
 *                                covers, and could not be updated atomically
 *
 * Signed integer sums and products wrap (computed unsigned), as the
 * hardware's do. A long double's padding bytes come out zero.
 */
#include <string.h>
#include "axon_fi.h"

#define AXON_FI_OP_BIT(_op)      (1u << (_op))
#define AXON_FI_OPS_LOGICAL      (AXON_FI_OP_BIT(FI_LOR) | AXON_FI_OP_BIT(FI_LAND) | \
                                  AXON_FI_OP_BIT(FI_LXOR))
#define AXON_FI_OPS_BITWISE      (AXON_FI_OP_BIT(FI_BOR) | AXON_FI_OP_BIT(FI_BAND) | \
                                  AXON_FI_OP_BIT(FI_BXOR) | AXON_FI_OP_BIT(FI_MSWAP))
#define AXON_FI_OPS_ORDER        (AXON_FI_OP_BIT(FI_MIN) | AXON_FI_OP_BIT(FI_MAX) | \
                                  AXON_FI_OP_BIT(FI_CSWAP_LE) | AXON_FI_OP_BIT(FI_CSWAP_LT) | \
                                  AXON_FI_OP_BIT(FI_CSWAP_GE) | AXON_FI_OP_BIT(FI_CSWAP_GT))
#define AXON_FI_OPS_ALL          ((1u << FI_ATOMIC_OP_LAST) - 1)
#define AXON_FI_OPS_FLOAT        (AXON_FI_OPS_ALL & ~AXON_FI_OPS_BITWISE)

/* The operations of each call family (fi_atomic(3)). */
static const uint32_t axon_fi_family_ops[] = {
    [AXON_FI_AMO_BASE]    = ((1u << (FI_BXOR + 1)) - 1) | AXON_FI_OP_BIT(FI_ATOMIC_WRITE),
    [AXON_FI_AMO_FETCH]   = ((1u << (FI_BXOR + 1)) - 1) | AXON_FI_OP_BIT(FI_ATOMIC_READ) |
                            AXON_FI_OP_BIT(FI_ATOMIC_WRITE),
    [AXON_FI_AMO_COMPARE] = AXON_FI_OP_BIT(FI_CSWAP) | AXON_FI_OP_BIT(FI_CSWAP_NE) |
                            AXON_FI_OP_BIT(FI_CSWAP_LE) | AXON_FI_OP_BIT(FI_CSWAP_LT) |
                            AXON_FI_OP_BIT(FI_CSWAP_GE) | AXON_FI_OP_BIT(FI_CSWAP_GT) |
                            AXON_FI_OP_BIT(FI_MSWAP),
};

typedef void (*axon_fi_calc_fn_t)(enum fi_op op, const void *old, const void *val,
                                  const void *cmp, void *out);

/* One body per class of type; T the type, UT what its sums and products wrap in. */
#define AXON_FI_CALC_INT(_name, T, UT) \
    static void _name(enum fi_op op, const void *old_p, const void *val_p, const void *cmp_p, \
                      void *out) \
    { \
        T o, v = 0, c = 0, r; \
        memcpy(&o, old_p, sizeof(T)); \
        if (val_p != NULL) memcpy(&v, val_p, sizeof(T)); \
        if (cmp_p != NULL) memcpy(&c, cmp_p, sizeof(T)); \
        switch (op) { \
        case FI_MIN:          r = (v < o) ? v : o; break; \
        case FI_MAX:          r = (v > o) ? v : o; break; \
        case FI_SUM:          r = (T)((UT)o + (UT)v); break; \
        case FI_PROD:         r = (T)((UT)o * (UT)v); break; \
        case FI_LOR:          r = (T)(o || v); break; \
        case FI_LAND:         r = (T)(o && v); break; \
        case FI_BOR:          r = o | v; break; \
        case FI_BAND:         r = o & v; break; \
        case FI_LXOR:         r = (T)(!o != !v); break; \
        case FI_BXOR:         r = o ^ v; break; \
        case FI_ATOMIC_WRITE: r = v; break; \
        case FI_CSWAP:        r = (c == o) ? v : o; break; \
        case FI_CSWAP_NE:     r = (c != o) ? v : o; break; \
        case FI_CSWAP_LE:     r = (c <= o) ? v : o; break; \
        case FI_CSWAP_LT:     r = (c < o) ? v : o; break; \
        case FI_CSWAP_GE:     r = (c >= o) ? v : o; break; \
        case FI_CSWAP_GT:     r = (c > o) ? v : o; break; \
        case FI_MSWAP:        r = (v & c) | (o & ~c); break; \
        default:              r = o; break; \
        } \
        memcpy(out, &r, sizeof(T)); \
    }

/* Through a zeroed union: a long double's padding stays zero, and out needs no alignment. */
#define AXON_FI_CALC_STORE(_name, T) \
    static inline void axon_fi_calc_store_##_name(void *out, T r) \
    { \
        union { T v; uint8_t b[sizeof(T)]; } u; \
        memset(&u, 0, sizeof(u)); \
        u.v = r; \
        memcpy(out, u.b, sizeof(T)); \
    }

#define AXON_FI_CALC_FLOAT(_name, T) \
    AXON_FI_CALC_STORE(_name, T) \
    static void _name(enum fi_op op, const void *old_p, const void *val_p, const void *cmp_p, \
                      void *out) \
    { \
        T o, v = 0, c = 0, r; \
        memcpy(&o, old_p, sizeof(T)); \
        if (val_p != NULL) memcpy(&v, val_p, sizeof(T)); \
        if (cmp_p != NULL) memcpy(&c, cmp_p, sizeof(T)); \
        switch (op) { \
        case FI_MIN:          r = (v < o) ? v : o; break; \
        case FI_MAX:          r = (v > o) ? v : o; break; \
        case FI_SUM:          r = o + v; break; \
        case FI_PROD:         r = o * v; break; \
        case FI_LOR:          r = (T)(o || v); break; \
        case FI_LAND:         r = (T)(o && v); break; \
        case FI_LXOR:         r = (T)(!o != !v); break; \
        case FI_ATOMIC_WRITE: r = v; break; \
        case FI_CSWAP:        r = (c == o) ? v : o; break; \
        case FI_CSWAP_NE:     r = (c != o) ? v : o; break; \
        case FI_CSWAP_LE:     r = (c <= o) ? v : o; break; \
        case FI_CSWAP_LT:     r = (c < o) ? v : o; break; \
        case FI_CSWAP_GE:     r = (c >= o) ? v : o; break; \
        case FI_CSWAP_GT:     r = (c > o) ? v : o; break; \
        default:              r = o; break; \
        } \
        axon_fi_calc_store_##_name(out, r); \
    }

AXON_FI_CALC_INT(axon_fi_calc_i8, int8_t, uint8_t)
AXON_FI_CALC_INT(axon_fi_calc_u8, uint8_t, uint8_t)
AXON_FI_CALC_INT(axon_fi_calc_i16, int16_t, uint16_t)
AXON_FI_CALC_INT(axon_fi_calc_u16, uint16_t, uint16_t)
AXON_FI_CALC_INT(axon_fi_calc_i32, int32_t, uint32_t)
AXON_FI_CALC_INT(axon_fi_calc_u32, uint32_t, uint32_t)
AXON_FI_CALC_INT(axon_fi_calc_i64, int64_t, uint64_t)
AXON_FI_CALC_INT(axon_fi_calc_u64, uint64_t, uint64_t)
AXON_FI_CALC_INT(axon_fi_calc_i128, __int128, unsigned __int128)
AXON_FI_CALC_INT(axon_fi_calc_u128, unsigned __int128, unsigned __int128)
AXON_FI_CALC_FLOAT(axon_fi_calc_f, float)
AXON_FI_CALC_FLOAT(axon_fi_calc_d, double)
AXON_FI_CALC_FLOAT(axon_fi_calc_ld, long double)

static const struct {
    axon_fi_calc_fn_t calc;
    uint8_t           size;
    uint32_t          ops;
    const char       *name;
} axon_fi_types[] = {
    [FI_INT8]                = {axon_fi_calc_i8, 1, AXON_FI_OPS_ALL, "FI_INT8"},
    [FI_UINT8]               = {axon_fi_calc_u8, 1, AXON_FI_OPS_ALL, "FI_UINT8"},
    [FI_INT16]               = {axon_fi_calc_i16, 2, AXON_FI_OPS_ALL, "FI_INT16"},
    [FI_UINT16]              = {axon_fi_calc_u16, 2, AXON_FI_OPS_ALL, "FI_UINT16"},
    [FI_INT32]               = {axon_fi_calc_i32, 4, AXON_FI_OPS_ALL, "FI_INT32"},
    [FI_UINT32]              = {axon_fi_calc_u32, 4, AXON_FI_OPS_ALL, "FI_UINT32"},
    [FI_INT64]               = {axon_fi_calc_i64, 8, AXON_FI_OPS_ALL, "FI_INT64"},
    [FI_UINT64]              = {axon_fi_calc_u64, 8, AXON_FI_OPS_ALL, "FI_UINT64"},
    [FI_FLOAT]               = {axon_fi_calc_f, sizeof(float), AXON_FI_OPS_FLOAT, "FI_FLOAT"},
    [FI_DOUBLE]              = {axon_fi_calc_d, sizeof(double), AXON_FI_OPS_FLOAT,
                                "FI_DOUBLE"},
    [FI_LONG_DOUBLE]         = {axon_fi_calc_ld, sizeof(long double), AXON_FI_OPS_FLOAT,
                                "FI_LONG_DOUBLE"},
    [FI_FLOAT_COMPLEX]       = {NULL, 0, 0, "FI_FLOAT_COMPLEX"},
    [FI_DOUBLE_COMPLEX]      = {NULL, 0, 0, "FI_DOUBLE_COMPLEX"},
    [FI_LONG_DOUBLE_COMPLEX] = {NULL, 0, 0, "FI_LONG_DOUBLE_COMPLEX"},
    [FI_INT128]              = {axon_fi_calc_i128, 16, AXON_FI_OPS_ALL, "FI_INT128"},
    [FI_UINT128]             = {axon_fi_calc_u128, 16, AXON_FI_OPS_ALL, "FI_UINT128"},
};

_Static_assert(sizeof(long double) <= AXON_FI_AMO_MAX_SIZE, "elements fit a block");

#define AXON_FI_NTYPES (sizeof(axon_fi_types) / sizeof(axon_fi_types[0]))

size_t axon_fi_amo_size(enum fi_datatype datatype, enum fi_op op, axon_fi_amo_family_t family)
{
    if (((unsigned)datatype >= AXON_FI_NTYPES) || ((unsigned)op >= FI_ATOMIC_OP_LAST) ||
        (axon_fi_types[datatype].calc == NULL)) {
        return 0;
    }
    if (!(axon_fi_types[datatype].ops & axon_fi_family_ops[family] & AXON_FI_OP_BIT(op))) {
        return 0;
    }
    return axon_fi_types[datatype].size;
}

void axon_fi_amo_calc(enum fi_datatype datatype, enum fi_op op, const void *old,
                      const void *val, const void *cmp, void *out)
{
    axon_fi_types[datatype].calc(op, old, val, cmp, out);
}

const char *axon_fi_amo_type_name(enum fi_datatype datatype)
{
    return (((unsigned)datatype < AXON_FI_NTYPES) && (axon_fi_types[datatype].name != NULL)) ?
           axon_fi_types[datatype].name : "an unknown datatype";
}
