/*
 * A rank that computes without calling MPI is not a dead one: rank 0 sends
 * rank 1 an eager (8 B) and a rendezvous (1 MiB) message and posts a receive
 * from it, then waits, while rank 1 computes for BUSY seconds (no MPI call at
 * all) before it receives and answers. Everything arrives intact, nothing
 * fails. run_mpi_tests.sh also runs it over ud with AXON_UD_TIMEOUT shorter
 * than the busy time: ud's acks need the peer's progress, so it is the
 * peer's alive thread that keeps the connection up.
 *
 *   busy [-t SECONDS]   (default 3)
 */
#include "mpi_check.h"

#define SMALL 8
#define BIG   (1u << 20)

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Work the CPU for seconds, no MPI call (a volatile sum: not optimized away). */
static void compute(double seconds)
{
    volatile uint64_t sum = 0;
    double end = now() + seconds;
    uint64_t i;

    while (now() < end) {
        for (i = 0; i < 100000; i++) {
            sum += i * i;
        }
    }
}

int main(int argc, char **argv)
{
    unsigned char *small = NULL, *big = NULL, *back = NULL;
    double busy = 3.0, start;
    MPI_Request req[3];
    MPI_Status st[3];
    int opt;

    mt_init(&argc, &argv, "busy", 2, 30);
    while ((opt = getopt(argc, argv, "t:")) != -1) {
        if (opt == 't') {
            busy = atof(optarg);
        }
    }
    small = mt_malloc(SMALL);
    big   = mt_malloc(BIG);
    back  = mt_malloc(BIG);
    if (mt_rank == 0) {
        mt_fill(small, SMALL, 1, 0);
        mt_fill(big, BIG, 2, 0);
        memset(back, MT_POISON, BIG);
        mt_step("waiting for rank 1, busy for %.1f s", busy);
        MT_MPI(MPI_Isend(small, SMALL, MPI_BYTE, 1, 1, MPI_COMM_WORLD, &req[0]));
        MT_MPI(MPI_Isend(big, BIG, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &req[1]));
        MT_MPI(MPI_Irecv(back, BIG, MPI_BYTE, 1, 3, MPI_COMM_WORLD, &req[2]));
        start = now();
        MT_MPI(MPI_Waitall(3, req, st));
        MT_CHECK(now() - start >= busy * 0.9, "rank 0's waits ended after %.2f s, before rank "
                 "1 was done computing (%.1f s)", now() - start, busy);
        mt_check_status("the answer", &st[2], MPI_BYTE, 1, 3, BIG);
        mt_check_pattern("the answer", back, BIG, 3, 0);
    } else if (mt_rank == 1) {
        mt_step("computing for %.1f s", busy);
        compute(busy);
        mt_step("%s", "receiving after the computation");
        memset(small, MT_POISON, SMALL);
        memset(big, MT_POISON, BIG);
        MT_MPI(MPI_Recv(small, SMALL, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &st[0]));
        MT_MPI(MPI_Recv(big, BIG, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &st[1]));
        mt_check_pattern("the eager message", small, SMALL, 1, 0);
        mt_check_pattern("the rendezvous message", big, BIG, 2, 0);
        mt_fill(back, BIG, 3, 0);
        MT_MPI(MPI_Send(back, BIG, MPI_BYTE, 0, 3, MPI_COMM_WORLD));
    }
    free(small);
    free(big);
    free(back);
    return mt_finish();
}
