/*
 * Little-endian fields of wire formats (packed keys, key entries): written
 * and read byte by byte, so a format means the same on every host and a
 * field may sit at any offset.
 */
#ifndef AXON_BYTE_ORDER_H
#define AXON_BYTE_ORDER_H

#include <stdint.h>

static inline void axon_le_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void axon_le_put32(uint8_t *p, uint32_t v)
{
    axon_le_put16(p, (uint16_t)v);
    axon_le_put16(p + 2, (uint16_t)(v >> 16));
}

static inline void axon_le_put64(uint8_t *p, uint64_t v)
{
    axon_le_put32(p, (uint32_t)v);
    axon_le_put32(p + 4, (uint32_t)(v >> 32));
}

static inline uint16_t axon_le_get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t axon_le_get32(const uint8_t *p)
{
    return (uint32_t)axon_le_get16(p) | ((uint32_t)axon_le_get16(p + 2) << 16);
}

static inline uint64_t axon_le_get64(const uint8_t *p)
{
    return (uint64_t)axon_le_get32(p) | ((uint64_t)axon_le_get32(p + 4) << 32);
}

#endif
