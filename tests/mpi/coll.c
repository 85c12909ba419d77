/*
 * Collectives through Open MPI's own coll components (over whatever point
 * to point layer runs below), on 4 ranks: MPI_Allreduce of ints (sum, max;
 * 1000 elements and 1 MiB) and doubles (values whose sums are exact) against
 * known results, MPI_Bcast of 1 MiB and of 3 B from each root, MPI_Barrier
 * (nobody leaves before the last one entered: staggered arrivals, times on
 * the host's monotonic clock), and MPI_Alltoall of ints and of 64 KiB blocks.
 */
#include "mpi_check.h"

#define NINT  1000
#define NBIG  (256 * 1024)      /* ints: 1 MiB */
#define BCAST (1u << 20)
#define BLOCK 65536

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void allreduce_ints(int n)
{
    int *in = mt_malloc(sizeof(int) * (size_t)n), *out = mt_malloc(sizeof(int) * (size_t)n);
    int p = mt_size, s1 = p * (p - 1) / 2, i;

    mt_step("MPI_Allreduce of %d ints", n);
    for (i = 0; i < n; i++) {
        in[i] = mt_rank * (i % 1000) + mt_rank + 1;
        out[i] = -1;
    }
    MT_MPI(MPI_Allreduce(in, out, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    for (i = 0; i < n; i++) {
        int want = s1 * (i % 1000) + s1 + p;

        if (out[i] != want) {
            mt_fail("MPI_Allreduce(MPI_SUM) of %d ints: element %d is %d, expected %d", n, i,
                    out[i], want);
            break;
        }
    }
    MT_MPI(MPI_Allreduce(in, out, n, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    for (i = 0; i < n; i++) {
        int want = (p - 1) * (i % 1000) + p;

        if (out[i] != want) {
            mt_fail("MPI_Allreduce(MPI_MAX) of %d ints: element %d is %d, expected %d", n, i,
                    out[i], want);
            break;
        }
    }
    free(in);
    free(out);
}

static void allreduce_doubles(void)
{
    double in[NINT], out[NINT];
    int p = mt_size, i;

    mt_step("%s", "MPI_Allreduce of doubles");
    for (i = 0; i < NINT; i++) {
        in[i] = (mt_rank + 1) * 0.5 + i * 0.25;     /* binary fractions: exact sums */
    }
    MT_MPI(MPI_Allreduce(in, out, NINT, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    for (i = 0; i < NINT; i++) {
        double want = 0.5 * p * (p + 1) / 2 + p * i * 0.25;

        if (out[i] != want) {
            mt_fail("MPI_Allreduce of doubles: element %d is %.17g, expected %.17g", i, out[i],
                    want);
            break;
        }
    }
}

static void bcast_from_each(size_t size)
{
    unsigned char *buf = mt_malloc(size);
    char what[64];
    int root;

    for (root = 0; root < mt_size; root++) {
        mt_step("MPI_Bcast of %zu B from rank %d", size, root);
        if (mt_rank == root) {
            mt_fill(buf, size, (unsigned)root, 7);
        } else {
            memset(buf, MT_POISON, size);
        }
        MT_MPI(MPI_Bcast(buf, (int)size, MPI_BYTE, root, MPI_COMM_WORLD));
        snprintf(what, sizeof(what), "MPI_Bcast of %zu B from rank %d", size, root);
        mt_check_pattern(what, buf, size, (unsigned)root, 7);
    }
    free(buf);
}

static void barrier_order(void)
{
    double mine[2], *all = mt_malloc(sizeof(double) * 2 * (size_t)mt_size);
    int round, i;

    for (round = 0; round < 3; round++) {
        double last_in = 0, first_out = 1e300;
        int last = 0, first = 0;

        /* arrive one after the other, a different rank last each round */
        mt_sleep_ms((unsigned)(((mt_rank + round) % mt_size) * 30));
        mt_step("MPI_Barrier round %d", round);
        mine[0] = now();
        MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
        mine[1] = now();
        MT_MPI(MPI_Allgather(mine, 2, MPI_DOUBLE, all, 2, MPI_DOUBLE, MPI_COMM_WORLD));
        for (i = 0; i < mt_size; i++) {
            if (all[2 * i] > last_in) {
                last_in = all[2 * i];
                last = i;
            }
            if (all[2 * i + 1] < first_out) {
                first_out = all[2 * i + 1];
                first = i;
            }
        }
        MT_CHECK(mt_rank != 0 || first_out >= last_in, "MPI_Barrier round %d: rank %d left "
                 "%.3f ms before rank %d entered", round, first, (last_in - first_out) * 1e3,
                 last);
    }
    free(all);
}

static void alltoall(void)
{
    int *in = mt_malloc(sizeof(int) * (size_t)mt_size);
    int *out = mt_malloc(sizeof(int) * (size_t)mt_size);
    unsigned char *bin = mt_malloc((size_t)BLOCK * (size_t)mt_size);
    unsigned char *bout = mt_malloc((size_t)BLOCK * (size_t)mt_size);
    char what[64];
    int j;

    for (j = 0; j < mt_size; j++) {
        in[j] = mt_rank * 1000 + j;
        out[j] = -1;
        mt_fill(bin + (size_t)j * BLOCK, BLOCK, (unsigned)(mt_rank * 64 + j), 3);
    }
    memset(bout, MT_POISON, (size_t)BLOCK * (size_t)mt_size);
    mt_step("%s", "MPI_Alltoall");
    MT_MPI(MPI_Alltoall(in, 1, MPI_INT, out, 1, MPI_INT, MPI_COMM_WORLD));
    MT_MPI(MPI_Alltoall(bin, BLOCK, MPI_BYTE, bout, BLOCK, MPI_BYTE, MPI_COMM_WORLD));
    for (j = 0; j < mt_size; j++) {
        MT_CHECK(out[j] == j * 1000 + mt_rank, "MPI_Alltoall of ints: element %d is %d, "
                 "expected %d", j, out[j], j * 1000 + mt_rank);
        snprintf(what, sizeof(what), "MPI_Alltoall of 64 KiB: block from rank %d", j);
        mt_check_pattern(what, bout + (size_t)j * BLOCK, BLOCK, (unsigned)(j * 64 + mt_rank),
                         3);
    }
    free(in);
    free(out);
    free(bin);
    free(bout);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "coll", 2, 30);
    allreduce_ints(NINT);
    allreduce_ints(NBIG);
    allreduce_doubles();
    bcast_from_each(BCAST);
    bcast_from_each(3);
    barrier_order();
    alltoall();
    return mt_finish();
}
