/*
 * Ping-pong latency between ranks 0 and 1 (half the round trip), for
 * contrib/bench/mpi_compare.sh:
 *   lat [-s size] [-n iterations] [-w warmup]      (defaults 8, 10000, 1000)
 * Rank 0 prints
 *   RESULT test=mpi_lat size=8 iters=10000 latency_us=X
 * Every message carries its iteration number, checked on arrival.
 */
#include "mpi_check.h"

int main(int argc, char **argv)
{
    unsigned char *buf;
    int size, iters, warmup, i, peer, bad = 0;
    double start = 0, elapsed;

    mt_init(&argc, &argv, "lat", 2, 120);
    size = mt_arg_int(argc, argv, "-s", 8);
    iters = mt_arg_int(argc, argv, "-n", 10000);
    warmup = mt_arg_int(argc, argv, "-w", 1000);
    if (size < (int)sizeof(int)) {
        size = sizeof(int);
    }
    buf = mt_malloc((size_t)size);
    memset(buf, 0, (size_t)size);
    peer = 1 - mt_rank;
    mt_step("ping-pong of %d B, %d iterations", size, iters);
    MPI_Barrier(MPI_COMM_WORLD);
    if (mt_rank < 2) {
        for (i = -warmup; i < iters; i++) {
            if (i == 0) {
                start = MPI_Wtime();
            }
            if (mt_rank == 0) {
                memcpy(buf, &i, sizeof(i));
                MPI_Send(buf, size, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
                MPI_Recv(buf, size, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(buf, size, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, size, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
            }
            bad += memcmp(buf, &i, sizeof(i)) != 0;
        }
        elapsed = MPI_Wtime() - start;
        MT_CHECK(bad == 0, "%d of %d messages carried the wrong iteration number", bad,
                 iters + warmup);
        if (mt_rank == 0 && iters > 0) {
            printf("RESULT test=mpi_lat size=%d iters=%d latency_us=%.3f\n", size, iters,
                   elapsed * 1e6 / iters / 2);
        }
    }
    free(buf);
    return mt_finish();
}
