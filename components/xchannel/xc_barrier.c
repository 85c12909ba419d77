/*
 * Barrier by dissemination: in round k a member sends an empty message to
 * rank + 2^k and waits for one from rank - 2^k (mod n), so after
 * ceil(log2 n) rounds each has heard, directly or not, from everyone.
 * The device releases round k + 1's send when round k's message came.
 */
#include "xchannel.h"

axon_status_t axon_xc_barrier_compile(axon_xc_coll_t *coll, unsigned set)
{
    axon_xc_team_t *team = coll->team;
    axon_xc_chain_t *ch  = &coll->chains[set];
    uint32_t n = team->size, r = team->rank, rounds = axon_xc_log2_ceil(n), k, dist;
    axon_status_t status;

    status = axon_xc_chain_init(ch, team, 3 * rounds + 2, 0, 0);
    if (status != AXON_OK) {
        return status;
    }
    for (k = 0; k < rounds; ++k) {
        dist = 1u << k;
        (void)axon_xc_chain_recv(ch, (r + n - dist) % n);
        axon_xc_chain_send(ch, coll, (r + dist) % n, NULL, 0, 0);
        axon_xc_chain_enable(ch, team, (r + dist) % n);
        axon_xc_chain_wait_recv(ch, team, (r + n - dist) % n);
    }
    return axon_xc_chain_finish(ch, team);
}
