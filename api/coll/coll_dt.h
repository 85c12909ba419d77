/*
 * The collectives' data types and operations (axon_dt_t, axon_op_t of
 * axon_coll.h): names for log lines, which operation applies to which type,
 * and the local reduction kernels the algorithms combine buffers with.
 */
#ifndef AXON_COLL_DT_H
#define AXON_COLL_DT_H

#include "axon.h"

/** "int32", "float_int32", ...; "unknown" for a value that is not a type. */
const char *axon_dt_name(axon_dt_t dt);
/** "sum", "minloc", ...; "unknown" for a value that is not an operation. */
const char *axon_op_name(axon_op_t op);

/**
 * 1 if op is defined on dt: SUM, PROD, MIN, MAX on the scalar types; BAND,
 * BOR, BXOR, LAND, LOR on the integer types; MINLOC, MAXLOC on the pair
 * types. 0 for anything else, values out of range included.
 */
int axon_coll_op_applies(axon_dt_t dt, axon_op_t op);

/**
 * inout[i] = inout[i] OP in[i] for count elements; the buffers do not
 * overlap. Integer SUM and PROD wrap around (two's complement); LAND and
 * LOR give 0 or 1. MIN and MAX on floats are plain comparisons: when either
 * element is a NaN the result is in's, so a NaN survives only where it is
 * the incoming element (MPI leaves NaN undefined; do not rely on it).
 * MINLOC/MAXLOC as MPI: the smaller/larger value with its index, on equal
 * values the smaller index (a NaN value keeps inout's pair).
 */
typedef void (*axon_coll_reduce_fn_t)(void *inout, const void *in, size_t count);

/** The kernel for op on dt, or NULL if !axon_coll_op_applies(dt, op). */
axon_coll_reduce_fn_t axon_coll_reduce_fn(axon_dt_t dt, axon_op_t op);

#endif
