/*
 * Passive target while the target computes: rank 1 spins for 2 s without
 * any MPI call while rank 0 takes an exclusive lock on its window (memory
 * of rank 1's, MPI_Win_create), puts 8 B, gets 4 KiB, fetch_and_ops a long
 * and unlocks. Afterwards rank 1 checks what arrived and rank 0 what it
 * read and fetched.
 *   osc_busy [-p]
 * -p: the target's progress must not be needed (a provider progress
 * thread, --mca btl_ofi_progress_mode auto): everything completes within
 * 1 s, while the target still computes. Without -p waiting for the
 * target is allowed (Axon's atomics on user memory over shm, and all of
 * tcp, are executed by the target's progress, as btl vader's are).
 */
#include "mpi_check.h"

#define BUSY_S 2.0
#define GET_SZ 4096

int main(int argc, char **argv)
{
    int need_progress = 0, i;
    unsigned char *base, *dst = NULL;
    long one = 5, old = -1, word = 0x1122334455667788L;
    double t0, took = 0;
    MPI_Win win;

    for (i = 1; i < argc; i++) {
        need_progress |= (strcmp(argv[i], "-p") == 0);
    }
    mt_init(&argc, &argv, "osc_busy", 2, 30);
    base = mt_malloc(2 * GET_SZ);
    memset(base, 0, GET_SZ);
    mt_fill(base + GET_SZ, GET_SZ, 77, 7);
    memcpy(base + 64, &word, sizeof(word));   /* the counter starts here */
    MT_MPI(MPI_Win_create(base, 2 * GET_SZ, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    MPI_Barrier(MPI_COMM_WORLD);
    if (mt_rank == 1) {
        mt_step("%s", "computing without MPI calls");
        t0 = MPI_Wtime();
        while (MPI_Wtime() - t0 < BUSY_S) {
        }
    } else if (mt_rank == 0) {
        dst = mt_malloc(GET_SZ);
        memset(dst, MT_POISON, GET_SZ);
        mt_step("%s", "lock, put, get, fetch_and_op, unlock at a computing target");
        t0 = MPI_Wtime();
        MT_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win));
        MT_MPI(MPI_Put(&word, 1, MPI_LONG, 1, 0, 1, MPI_LONG, win));
        MT_MPI(MPI_Win_flush(1, win));
        MT_MPI(MPI_Get(dst, GET_SZ, MPI_BYTE, 1, GET_SZ, GET_SZ, MPI_BYTE, win));
        MT_MPI(MPI_Win_flush(1, win));
        MT_MPI(MPI_Fetch_and_op(&one, &old, MPI_LONG, 1, 64, MPI_SUM, win));
        MT_MPI(MPI_Win_unlock(1, win));
        took = MPI_Wtime() - t0;
        mt_check_pattern("MPI_Get from the computing target", dst, GET_SZ, 77, 7);
        MT_CHECK(old == word, "MPI_Fetch_and_op fetched %#lx, expected %#lx",
                 (unsigned long)old, (unsigned long)word);
        printf("osc_busy: the epoch took %.3f s; the target computed %.1f s\n", took, BUSY_S);
        MT_CHECK(!need_progress || took < 1.0, "the epoch took %.3f s at a target computing "
                 "%.1f s: it waited for the target's progress (-p: it must not)", took, BUSY_S);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (mt_rank == 1) {
        long got;

        MT_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win));   /* local loads see the window */
        memcpy(&got, base, sizeof(got));
        MT_CHECK(got == word, "MPI_Put: %#lx arrived, expected %#lx", (unsigned long)got,
                 (unsigned long)word);
        memcpy(&got, base + 64, sizeof(got));
        MT_CHECK(got == word + one, "MPI_Fetch_and_op: the counter is %#lx, expected %#lx",
                 (unsigned long)got, (unsigned long)(word + one));
        MT_MPI(MPI_Win_unlock(1, win));
    }
    MT_MPI(MPI_Win_free(&win));
    free(base);
    free(dst);
    return mt_finish();
}
