/*
 * Broadcast down a k-nomial tree rooted at root, as the software algorithm
 * (api/coll/coll_bcast.c) does: a member waits for its parent's message,
 * then the device releases its sends of it to its children, the largest
 * subtree first. The message travels in chunks of a ring slot each, up to
 * AXON_XC_MAX_CHUNKS: the root copies dst into the chain's own buffer at
 * post, the others forward from the slots it landed in and copy it out at
 * completion, so the chain ends without waiting for its sends' acks.
 */
#include "xchannel.h"

axon_status_t axon_xc_bcast_compile(axon_xc_coll_t *coll, unsigned set)
{
    axon_xc_team_t *team = coll->team;
    axon_xc_chain_t *ch  = &coll->chains[set];
    uint32_t n = team->size, k = coll->args.radix, root = coll->args.root;
    uint32_t v = (team->rank + n - root) % n, mask = 1, digit, j, c, parent;
    unsigned chunks = (unsigned)((coll->args.count + coll->chunk - 1) / coll->chunk), i;
    axon_xc_opnd_t data = { .addr = coll->input[set] }, op;
    axon_status_t status;
    size_t len;

    status = axon_xc_chain_init(ch, team, (chunks + 1) * (n + 2) + 2, chunks * n,
                                chunks * (n + 1));
    if (status != AXON_OK) {
        return status;
    }
    /* the parent: v with its lowest non-zero base-k digit cleared */
    for (; mask < n; mask *= k) {
        digit = (v / mask) % k;
        if (digit != 0) {
            parent   = (v - digit * mask + root) % n;
            data.m   = parent;
            data.idx = axon_xc_chain_recv(ch, parent);
            for (i = 1; i < chunks; ++i) {
                (void)axon_xc_chain_recv(ch, parent);
            }
            for (i = 0; i < chunks; ++i) {
                op = axon_xc_opnd_chunk(&data, i, coll->chunk);
                axon_xc_chain_place(ch, &coll->pieces[set][i], &op);
                axon_xc_chain_wait_recv(ch, team, parent);
            }
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
            for (i = 0; i < chunks; ++i) {
                op  = axon_xc_opnd_chunk(&data, i, coll->chunk);
                len = coll->args.count - i * coll->chunk;
                axon_xc_chain_send(ch, coll, (c + root) % n, &op, 1,
                                   (len < coll->chunk) ? len : coll->chunk);
            }
            axon_xc_chain_enable(ch, team, (c + root) % n);
        }
    }
    return axon_xc_chain_finish(ch, team);
}
