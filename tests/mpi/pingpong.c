/*
 * Ping-pong between ranks 0 and 1 from 0 B to 16 MiB (every power of two
 * and odd sizes around the protocol thresholds). Each message has a pattern
 * of its own size, iteration and direction; both sides verify it, the
 * status, and that no byte past the message end was written.
 */
#include "mpi_check.h"

#define MAX_SIZE (16u << 20)
#define GUARD    64     /* poisoned bytes past the message end */

static void one_size(size_t size, int iters, unsigned char *sbuf, unsigned char *rbuf)
{
    int peer = 1 - mt_rank;
    char what[96];
    MPI_Status st;
    int it;

    for (it = 0; it < iters; it++) {
        /* rank 0 sends pattern 0, rank 1 answers with pattern 1 */
        unsigned mine = (unsigned)mt_rank, theirs = (unsigned)peer;
        int tag = (int)(size % 30000) + it;

        mt_step("ping-pong of %zu B, iteration %d", size, it);
        memset(rbuf, MT_POISON, size + GUARD);
        mt_fill(sbuf, size, mine, (unsigned)it);
        if (mt_rank == 0) {
            MT_MPI(MPI_Send(sbuf, (int)size, MPI_BYTE, peer, tag, MPI_COMM_WORLD));
            MT_MPI(MPI_Recv(rbuf, (int)size, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st));
        } else {
            MT_MPI(MPI_Recv(rbuf, (int)size, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st));
            MT_MPI(MPI_Send(sbuf, (int)size, MPI_BYTE, peer, tag, MPI_COMM_WORLD));
        }
        snprintf(what, sizeof(what), "size %zu iteration %d from rank %d", size, it, peer);
        mt_check_status(what, &st, MPI_BYTE, peer, tag, (int)size);
        mt_check_pattern(what, rbuf, size, theirs, (unsigned)it);
        mt_check_poison(what, rbuf, size, size + GUARD);
    }
}

int main(int argc, char **argv)
{
    static const size_t odd[] = { 7, 4097, 65537, (1u << 20) + 3 };
    unsigned char *sbuf, *rbuf;
    size_t size, i;

    mt_init(&argc, &argv, "pingpong", 2, 30);
    sbuf = mt_malloc(MAX_SIZE);
    rbuf = mt_malloc(MAX_SIZE + GUARD);
    if (mt_rank < 2) {
        one_size(0, 5, sbuf, rbuf);
        for (size = 1; size <= MAX_SIZE; size *= 2) {
            one_size(size, size >= (1u << 20) ? 2 : size >= 65536 ? 4 : 10, sbuf, rbuf);
        }
        for (i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
            one_size(odd[i], 3, sbuf, rbuf);
        }
    }
    free(sbuf);
    free(rbuf);
    return mt_finish();
}
