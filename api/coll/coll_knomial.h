/*
 * k-nomial trees rooted at rank 0 of root-relative ranks (radix k >= 2; 2 is
 * the binomial tree). A member's parent is its rank without its lowest
 * nonzero base-k digit; its children add one digit d * k^j (d = 1..k-1) at
 * every position j below that digit. Fewer rounds than binomial for a
 * larger k, at the price of k - 1 sends per round from each parent.
 */
#ifndef AXON_COLL_KNOMIAL_H
#define AXON_COLL_KNOMIAL_H

#include "coll_algo.h"

/* Room for the children of any member: 32 levels of radix 2, 8 of radix 16. */
#define AXON_COLL_KNOMIAL_MAX_CHILDREN 128
#define AXON_COLL_KNOMIAL_MAX_RADIX    16

/* The radix the context's AXON_COLL_KNOMIAL_RADIX gives (checked when read). */
static inline uint32_t axon_coll_radix(axon_coll_h coll)
{
    return coll->team->worker->context->opts.coll_knomial_radix;
}

typedef struct {
    uint32_t k;         /* radix */
    uint32_t level;     /* k^j of the lowest nonzero digit (for the root: >= n) */
    uint32_t parent;    /* root-relative; meaningless for the root */
} axon_coll_knomial_t;

static inline void axon_coll_knomial(uint32_t vr, uint32_t n, uint32_t k,
                                     axon_coll_knomial_t *t)
{
    uint32_t mask = 1, digit;

    t->k = k;
    for (; mask < n; mask *= k) {
        digit = (vr / mask) % k;
        if (digit != 0) {
            t->level  = mask;
            t->parent = vr - digit * mask;
            return;
        }
    }
    t->level  = mask;
    t->parent = 0;
}

/* Children of vr, nearest first (mask 1, digit 1, 2, ...), written to out; their count. */
static inline unsigned axon_coll_knomial_children(uint32_t vr, uint32_t n,
                                                  const axon_coll_knomial_t *t, uint32_t *out)
{
    unsigned count = 0;
    uint32_t mask, d;

    for (mask = 1; mask < t->level; mask *= t->k) {
        for (d = 1; (d < t->k) && (vr + d * mask < n); ++d) {
            out[count++] = vr + d * mask;
        }
    }
    return count;
}

/* Most children a member can have in a team of n with radix k. */
static inline unsigned axon_coll_knomial_max_children(uint32_t n, uint32_t k)
{
    unsigned levels = 0;
    uint32_t mask;

    for (mask = 1; mask < n; mask *= k) {
        ++levels;
    }
    return levels * (k - 1);
}

#endif
