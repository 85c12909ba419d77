/*
 * MPI's collectives timed the way axon_perf -t coll_* times Axon's, for
 * contrib/bench/coll_compare.sh: per size WARMUP calls, a barrier, ITERS
 * timed calls; rank 0 prints the largest of the ranks' averages in
 * axon_perf's line format. int64 sums, root 0; sizes are bytes per rank
 * (the block of allgather and alltoall).
 *   mpirun -np N coll_mpi -t barrier|bcast|reduce|allreduce|allgather|alltoall
 *          -s SIZE[,SIZE..] [-n ITERS] [-W WARMUP]
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *names[] = { "barrier", "bcast", "reduce", "allreduce", "allgather",
                               "alltoall" };

static void run(int test, void *src, void *dst, int count)
{
    switch (test) {
    case 0: MPI_Barrier(MPI_COMM_WORLD); break;
    case 1: MPI_Bcast(dst, count, MPI_INT64_T, 0, MPI_COMM_WORLD); break;
    case 2: MPI_Reduce(src, dst, count, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD); break;
    case 3: MPI_Allreduce(src, dst, count, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD); break;
    case 4: MPI_Allgather(src, count, MPI_INT64_T, dst, count, MPI_INT64_T, MPI_COMM_WORLD); break;
    default: MPI_Alltoall(src, count, MPI_INT64_T, dst, count, MPI_INT64_T, MPI_COMM_WORLD); break;
    }
}

int main(int argc, char **argv)
{
    long   iters = 1000, warmup = -1, i, size;
    int    test = -1, rank, nranks, opt, count;
    char  *sizes = NULL, *tok, *save = NULL;
    double t0, avg, worst;
    void  *src, *dst;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    while ((opt = getopt(argc, argv, "t:s:n:W:")) != -1) {
        switch (opt) {
        case 't':
            for (test = 5; (test >= 0) && (strcmp(optarg, names[test]) != 0); --test) {
            }
            break;
        case 's': sizes = optarg; break;
        case 'n': iters = atol(optarg); break;
        case 'W': warmup = atol(optarg); break;
        default: test = -1; break;
        }
    }
    if ((test < 0) || (sizes == NULL) || (iters <= 0)) {
        fprintf(stderr, "coll_mpi: usage: -t barrier|bcast|reduce|allreduce|allgather|alltoall "
                "-s SIZE[,SIZE..] [-n ITERS] [-W WARMUP]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (warmup < 0) {
        warmup = (iters / 10 < 1000) ? iters / 10 : 1000;
    }
    for (tok = strtok_r(sizes, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        size  = strtol(tok, NULL, 10);
        count = (int)(size / 8);
        src   = calloc((size_t)(count ? count : 1) * nranks, 8);
        dst   = calloc((size_t)(count ? count : 1) * nranks, 8);
        if ((src == NULL) || (dst == NULL)) {
            fprintf(stderr, "coll_mpi: out of memory for size %ld\n", size);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        for (i = 0; i < warmup; ++i) {
            run(test, src, dst, count);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (i = 0; i < iters; ++i) {
            run(test, src, dst, count);
        }
        avg = (MPI_Wtime() - t0) / (double)iters;
        MPI_Reduce(&avg, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            printf("RESULT test=coll_%s tl=mpi size=%ld iters=%ld latency_us=%.3f "
                   "bandwidth_MBps=%.3f msgrate_Mps=%.3f ranks=%d\n", names[test], size, iters,
                   worst * 1e6, (double)size / worst / 1e6, 1 / worst / 1e6, nranks);
            fflush(stdout);
        }
        free(src);
        free(dst);
    }
    MPI_Finalize();
    return 0;
}
