/*
 * Synchronous sends: MPI_Ssend (0 B, 8 B, 1 MiB) and MPI_Issend must not
 * complete before the matching receive is posted. The receiver sleeps before
 * posting it and notes the time it did; the sender notes when its send
 * completed, and the two times are compared on the host's monotonic clock
 * (both ranks on one host; across hosts the sender's elapsed time is
 * checked against the sleep instead). For MPI_Issend the time compared is
 * when MPI_Test first said complete; an MPI_Issend to a receive already
 * posted completes.
 */
#include "mpi_check.h"

#define SLEEP_MS 200
#define BIG      (1u << 20)

static int same_host;

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Rank 1's side of one round: sleep, post the receive, report when. */
static void late_receiver(unsigned char *buf, size_t size, int tag)
{
    MPI_Status st;
    double posted;

    mt_step("late receive of %zu B, tag %d", size, tag);
    MPI_Barrier(MPI_COMM_WORLD);
    mt_sleep_ms(SLEEP_MS);
    posted = now();
    MT_MPI(MPI_Recv(buf, (int)size, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &st));
    mt_check_status("synchronous send received", &st, MPI_BYTE, 0, tag, (int)size);
    mt_check_pattern("synchronous send received", buf, size, (unsigned)tag, 0);
    MT_MPI(MPI_Send(&posted, 1, MPI_DOUBLE, 0, tag, MPI_COMM_WORLD));
}

static void check_after_post(const char *what, double start, double done, int tag)
{
    double posted = 0;

    MT_MPI(MPI_Recv(&posted, 1, MPI_DOUBLE, 1, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    if (same_host) {
        MT_CHECK(done >= posted, "%s completed %.3f ms before the receive was posted", what,
                 (posted - done) * 1e3);
    } else {
        MT_CHECK(done - start >= SLEEP_MS * 0.5e-3, "%s completed after %.3f ms while the "
                 "receiver slept %d ms", what, (done - start) * 1e3, SLEEP_MS);
    }
}

static void ssend_round(unsigned char *buf, size_t size, int tag)
{
    char what[64];
    double start;

    if (mt_rank == 1) {
        late_receiver(buf, size, tag);
        return;
    }
    snprintf(what, sizeof(what), "MPI_Ssend of %zu B", size);
    mt_step("%s", what);
    mt_fill(buf, size, (unsigned)tag, 0);
    MPI_Barrier(MPI_COMM_WORLD);
    start = now();
    MT_MPI(MPI_Ssend(buf, (int)size, MPI_BYTE, 1, tag, MPI_COMM_WORLD));
    check_after_post(what, start, now(), tag);
}

static void issend_round(unsigned char *buf, size_t size, int tag)
{
    MPI_Request req;
    double start, done;
    char what[80];
    int flag = 0, polls = 0;

    if (mt_rank == 1) {
        late_receiver(buf, size, tag);
        return;
    }
    mt_step("MPI_Issend of %zu B", size);
    mt_fill(buf, size, (unsigned)tag, 0);
    MPI_Barrier(MPI_COMM_WORLD);
    start = now();
    MT_MPI(MPI_Issend(buf, (int)size, MPI_BYTE, 1, tag, MPI_COMM_WORLD, &req));
    /* MPI_Test until it says complete: that must not be before the receiver,
     * asleep meanwhile, posted its receive */
    while (!flag) {
        MT_MPI(MPI_Test(&req, &flag, MPI_STATUS_IGNORE));
        polls++;
        mt_poll_deadline("waiting for an MPI_Issend to complete");
    }
    done = now();
    snprintf(what, sizeof(what), "MPI_Issend of %zu B (MPI_Test true after %d polls)", size,
             polls);
    check_after_post(what, start, done, tag);
}

/* The receive is posted first: the MPI_Issend completes (by MPI_Test alone). */
static void issend_posted(unsigned char *buf)
{
    MPI_Request req;
    MPI_Status st;
    int flag = 0;

    mt_step("%s", "MPI_Issend to a posted receive");
    if (mt_rank == 1) {
        MT_MPI(MPI_Irecv(buf, 4096, MPI_BYTE, 0, 40, MPI_COMM_WORLD, &req));
        MPI_Barrier(MPI_COMM_WORLD);
        MT_MPI(MPI_Wait(&req, &st));
        mt_check_status("MPI_Issend to a posted receive", &st, MPI_BYTE, 0, 40, 4096);
        mt_check_pattern("MPI_Issend to a posted receive", buf, 4096, 40, 0);
        return;
    }
    mt_fill(buf, 4096, 40, 0);
    MPI_Barrier(MPI_COMM_WORLD);
    MT_MPI(MPI_Issend(buf, 4096, MPI_BYTE, 1, 40, MPI_COMM_WORLD, &req));
    while (!flag) {
        MT_MPI(MPI_Test(&req, &flag, MPI_STATUS_IGNORE));
        mt_poll_deadline("waiting for an MPI_Issend to a posted receive");
    }
}

int main(int argc, char **argv)
{
    char names[2][MPI_MAX_PROCESSOR_NAME] = { { 0 } };
    unsigned char *buf;
    int len;

    mt_init(&argc, &argv, "ssend", 2, 30);
    buf = mt_malloc(BIG);
    MPI_Get_processor_name(names[0], &len);
    if (mt_rank < 2) {
        /* rank 0 learns whether rank 1 shares its host (and its clock) */
        if (mt_rank == 1) {
            MPI_Send(names[0], MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, 2, MPI_COMM_WORLD);
        } else {
            MPI_Recv(names[1], MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 1, 2, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            same_host = strcmp(names[0], names[1]) == 0;
        }
    }
    /* ranks above 1 only join the barriers */
    if (mt_rank < 2) {
        ssend_round(buf, 0, 10);
        ssend_round(buf, 8, 11);
        ssend_round(buf, BIG, 12);
        issend_round(buf, 8, 20);
        issend_round(buf, BIG, 21);
        issend_posted(buf);
    } else {
        int i;

        for (i = 0; i < 6; i++) {
            MPI_Barrier(MPI_COMM_WORLD);
        }
    }
    free(buf);
    return mt_finish();
}
