/*
 * Broadcast down a k-nomial tree rooted at root, as the software algorithm
 * (api/coll/coll_bcast.c) does: a member waits for its parent's message in
 * dst, then the device releases its sends of dst to its children, the
 * largest subtree first.
 */
#include "xchannel.h"

axon_status_t axon_xc_bcast_compile(axon_xc_coll_t *coll)
{
    axon_xc_team_t *team = coll->team;
    axon_xc_chain_t *ch  = &coll->chain;
    uint32_t n = team->size, k = coll->args.radix, root = coll->args.root;
    uint32_t v = (team->rank + n - root) % n, mask = 1, digit, j, c;
    void *buf = coll->args.dst;
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
                               coll->mr->lkey);
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
                               coll->mr->lkey);
            axon_xc_chain_enable(ch, team, (c + root) % n);
        }
    }
    return axon_xc_chain_finish(ch, team, 1);
}
