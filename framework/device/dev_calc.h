/*
 * One element of a cross-channel CALC (seed §8.9.3) in host byte order: what
 * a device computes, for the device's own engine (softib) and for consumers
 * that finish a reduction on the CPU the same way (xchannel's last step), so
 * both give bit-identical results. a is the accumulated value, b the next
 * operand; floats are IEEE doubles carried in the 64 bits.
 */
#ifndef AXON_DEV_CALC_H
#define AXON_DEV_CALC_H

#include <string.h>
#include "dev.h"

static inline uint64_t axon_dev_calc_apply(axon_dev_calc_op_t op, axon_dev_calc_data_type_t type,
                                           uint64_t a, uint64_t b)
{
    int    sgn = (type == AXON_DEV_CALC_DATA_TYPE_INT);
    double x, y;

    if (type == AXON_DEV_CALC_DATA_TYPE_FLOAT) {
        memcpy(&x, &a, sizeof(x));
        memcpy(&y, &b, sizeof(y));
        x = (op == AXON_DEV_CALC_OP_ADD) ? x + y :
            (op == AXON_DEV_CALC_OP_MAX) ? ((y > x) ? y : x) : ((y < x) ? y : x);
        memcpy(&a, &x, sizeof(a));
        return a;
    }
    switch (op) {
    case AXON_DEV_CALC_OP_ADD:  return a + b;
    case AXON_DEV_CALC_OP_BAND: return a & b;
    case AXON_DEV_CALC_OP_BXOR: return a ^ b;
    case AXON_DEV_CALC_OP_BOR:  return a | b;
    case AXON_DEV_CALC_OP_MAX:  return (sgn ? ((int64_t)b > (int64_t)a) : (b > a)) ? b : a;
    default:                    return (sgn ? ((int64_t)b < (int64_t)a) : (b < a)) ? b : a;
    }
}

#endif
