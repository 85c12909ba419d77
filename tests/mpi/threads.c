/*
 * MPI_THREAD_MULTIPLE, as hybrid MPI + threads codes ask for it: 2 ranks,
 * 4 threads each; thread t of one rank ping-pongs with thread t of the
 * other on tag t (8 B and 64 KiB, 100 round trips each, every message
 * checked), all threads at once, then MPI_ANY_TAG receives shared by the
 * threads. Open MPI's ofi MTL asks the provider for FI_THREAD_SAFE when the
 * application gets MPI_THREAD_MULTIPLE.
 */
#include "mpi_check.h"

#include <pthread.h>

#define NTHREADS 4
#define ROUNDS   100
#define BIG      (64u * 1024)

static void *pingpong_thread(void *arg)
{
    int t = (int)(intptr_t)arg, peer = 1 - mt_rank, round;
    unsigned char *buf = mt_malloc(BIG);
    size_t sizes[2] = {8, BIG}, s;
    char what[80];
    MPI_Status st;

    for (s = 0; s < 2; s++) {
        size_t size = sizes[s];

        for (round = 0; round < ROUNDS; round++) {
            unsigned iter = (unsigned)(round * 2);

            if (mt_rank == 0) {
                mt_fill(buf, size, (unsigned)t, iter);
                MT_MPI(MPI_Send(buf, (int)size, MPI_BYTE, peer, t, MPI_COMM_WORLD));
                memset(buf, MT_POISON, size);
                MT_MPI(MPI_Recv(buf, (int)size, MPI_BYTE, peer, t, MPI_COMM_WORLD, &st));
                iter++;
            } else {
                memset(buf, MT_POISON, size);
                MT_MPI(MPI_Recv(buf, (int)size, MPI_BYTE, peer, t, MPI_COMM_WORLD, &st));
            }
            snprintf(what, sizeof(what), "thread %d, %zu B, round %d", t, size, round);
            mt_check_status(what, &st, MPI_BYTE, peer, t, (int)size);
            mt_check_pattern(what, buf, size, (unsigned)t, iter);
            if (mt_rank == 1) {
                mt_fill(buf, size, (unsigned)t, iter + 1);
                MT_MPI(MPI_Send(buf, (int)size, MPI_BYTE, peer, t, MPI_COMM_WORLD));
            }
        }
    }
    free(buf);
    return NULL;
}

/* Rank 0's threads each send ROUNDS messages tagged with their number; rank
 * 1's threads receive with MPI_ANY_TAG, any of them any message: every
 * message arrives exactly once. */
static int any_tag_seen[NTHREADS][ROUNDS];
static pthread_mutex_t any_tag_lock = PTHREAD_MUTEX_INITIALIZER;

static void *any_tag_thread(void *arg)
{
    int t = (int)(intptr_t)arg, i;
    int msg[2];
    MPI_Status st;

    for (i = 0; i < ROUNDS; i++) {
        if (mt_rank == 0) {
            msg[0] = t;
            msg[1] = i;
            MT_MPI(MPI_Send(msg, 2, MPI_INT, 1, t, MPI_COMM_WORLD));
            continue;
        }
        msg[0] = msg[1] = -1;
        MT_MPI(MPI_Recv(msg, 2, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        if (msg[0] != st.MPI_TAG || msg[0] < 0 || msg[0] >= NTHREADS || msg[1] < 0 ||
            msg[1] >= ROUNDS) {
            mt_fail("MPI_ANY_TAG: message (%d, %d) with tag %d", msg[0], msg[1], st.MPI_TAG);
            continue;
        }
        pthread_mutex_lock(&any_tag_lock);
        any_tag_seen[msg[0]][msg[1]]++;
        pthread_mutex_unlock(&any_tag_lock);
    }
    return NULL;
}

static void run_threads(void *(*fn)(void *), const char *what)
{
    pthread_t th[NTHREADS];
    int t;

    mt_step("%s", what);
    for (t = 0; t < NTHREADS; t++) {
        if (pthread_create(&th[t], NULL, fn, (void *)(intptr_t)t) != 0) {
            mt_fail("pthread_create for %s", what);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    for (t = 0; t < NTHREADS; t++) {
        pthread_join(th[t], NULL);
    }
    MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

int main(int argc, char **argv)
{
    int provided = -1, t, i;

    mt_init_thread(&argc, &argv, "threads", 2, 30, MPI_THREAD_MULTIPLE, &provided);
    if (provided < MPI_THREAD_MULTIPLE) {
        mt_fail("MPI_Init_thread(MPI_THREAD_MULTIPLE) provided level %d", provided);
        return mt_finish();
    }
    if (mt_rank < 2) {
        run_threads(pingpong_thread, "threaded ping-pong");
    } else {
        MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
    if (mt_rank < 2) {
        run_threads(any_tag_thread, "MPI_ANY_TAG receives from several threads");
    } else {
        MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
    if (mt_rank == 1) {
        for (t = 0; t < NTHREADS; t++) {
            for (i = 0; i < ROUNDS; i++) {
                MT_CHECK(any_tag_seen[t][i] == 1, "MPI_ANY_TAG: message %d of tag %d "
                         "received %d times", i, t, any_tag_seen[t][i]);
            }
        }
    }
    return mt_finish();
}
