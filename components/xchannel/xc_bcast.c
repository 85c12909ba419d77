/*
 * Broadcast down a k-nomial tree rooted at root, as the software algorithm
 * (api/coll/coll_bcast.c) does: a member waits for its parent's message,
 * then the device releases its sends of it to its children, the largest
 * subtree first. Up to AXON_XC_BCAST_STAGE bytes travel through a buffer of
 * the collective's own (the root copies dst in at post, the others out at
 * completion), so the chain ends without waiting for its sends' acks.
 */
#include "xchannel.h"

axon_status_t axon_xc_bcast_compile(axon_xc_coll_t *coll, unsigned set)
{
    axon_xc_team_t *team = coll->team;
    axon_xc_chain_t *ch  = &coll->chains[set];
    uint32_t n = team->size, k = coll->args.radix, root = coll->args.root;
    uint32_t v = (team->rank + n - root) % n, mask = 1, digit, j, c;
    void *buf = coll->stage[set] ? (void *)coll->stage[set] : coll->args.dst;
    uint32_t lkey = coll->stage[set] ? coll->scratch_mr->lkey : coll->mr->lkey;
    axon_status_t status;

    status = axon_xc_chain_init(ch, team, 3 * n + 2, n + 1);
    if (status != AXON_OK) {
        return status;
    }
    /* the parent: v with its lowest non-zero base-k digit cleared */
    for (; mask < n; mask *= k) {
        digit = (v / mask) % k;
        if (digit != 0) {
            axon_xc_chain_recv(ch, (v - digit * mask + root) % n, buf, coll->args.count,
                               lkey);
            axon_xc_chain_wait_recv(ch, team, (v - digit * mask + root) % n);
            break;
        }
    }
    /* children: v + j * m for every digit position m below the parent's */
    for (mask /= k; mask >= 1; mask /= k) {
        for (j = 1; j < k; ++j) {
            c = v + j * mask;
            if (c >= n) {
                break;
            }
            axon_xc_chain_send(ch, coll, (c + root) % n, &buf, 1, coll->args.count,
                               lkey);
            axon_xc_chain_enable(ch, team, (c + root) % n);
        }
    }
    /* from the user's buffer: done once its sends are; from ours: the next chain waits */
    return axon_xc_chain_finish(ch, team, coll->stage[set] == NULL);
}
