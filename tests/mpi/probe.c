/*
 * MPI_Probe and MPI_Iprobe: rank 1 sends messages of several sizes and tags;
 * rank 0 probes them out of order (by tag, with and without MPI_ANY_SOURCE),
 * checks that probing does not consume (probe twice, same answer), that the
 * status count is the message size, receives and verifies; then Iprobe of a
 * message not sent yet is false until the sender is told to send, and an
 * Iprobe loop sees it arrive.
 */
#include "mpi_check.h"

#define GUARD 64
#define LATE_TAG 999
#define GO_TAG 1

static const size_t sizes[] = { 0, 1, 100, 4096, 65537, 1u << 20 };
#define NSIZES (int)(sizeof(sizes) / sizeof(sizes[0]))

static void sender(void)
{
    unsigned char *buf[NSIZES], late[8];
    MPI_Request reqs[NSIZES];
    int k, go;

    /* non-blocking: the receiver takes them in reverse order, and a blocking
     * send of a rendezvous size would wait for its receive */
    mt_step("%s", "sending the messages to probe");
    for (k = 0; k < NSIZES; k++) {
        buf[k] = mt_malloc(sizes[k]);
        mt_fill(buf[k], sizes[k], 1, (unsigned)k);
        MT_MPI(MPI_Isend(buf[k], (int)sizes[k], MPI_BYTE, 0, 10 + k, MPI_COMM_WORLD, &reqs[k]));
    }
    MT_MPI(MPI_Waitall(NSIZES, reqs, MPI_STATUSES_IGNORE));
    mt_step("%s", "waiting for the go, sending the late message");
    MT_MPI(MPI_Recv(&go, 1, MPI_INT, 0, GO_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    mt_fill(late, 8, 2, 0);
    MT_MPI(MPI_Send(late, 8, MPI_BYTE, 0, LATE_TAG, MPI_COMM_WORLD));
    for (k = 0; k < NSIZES; k++) {
        free(buf[k]);
    }
}

static void receive_probed(int k, unsigned char *buf)
{
    char what[64];
    MPI_Status st;
    int flag = 0;

    snprintf(what, sizeof(what), "probe of tag %d (%zu B)", 10 + k, sizes[k]);
    mt_step("%s", what);
    MT_MPI(MPI_Probe(1, 10 + k, MPI_COMM_WORLD, &st));
    mt_check_status(what, &st, MPI_BYTE, 1, 10 + k, (int)sizes[k]);
    /* not consumed: the same message again, with a wildcard source */
    MT_MPI(MPI_Probe(MPI_ANY_SOURCE, 10 + k, MPI_COMM_WORLD, &st));
    mt_check_status(what, &st, MPI_BYTE, 1, 10 + k, (int)sizes[k]);
    MT_MPI(MPI_Iprobe(1, 10 + k, MPI_COMM_WORLD, &flag, &st));
    MT_CHECK(flag, "%s: MPI_Iprobe after MPI_Probe found nothing", what);
    if (flag) {
        mt_check_status(what, &st, MPI_BYTE, 1, 10 + k, (int)sizes[k]);
    }

    memset(buf, MT_POISON, sizes[k] + GUARD);
    MT_MPI(MPI_Recv(buf, (int)sizes[k], MPI_BYTE, 1, 10 + k, MPI_COMM_WORLD, &st));
    mt_check_status(what, &st, MPI_BYTE, 1, 10 + k, (int)sizes[k]);
    mt_check_pattern(what, buf, sizes[k], 1, (unsigned)k);
    mt_check_poison(what, buf, sizes[k], sizes[k] + GUARD);

    MT_MPI(MPI_Iprobe(1, 10 + k, MPI_COMM_WORLD, &flag, &st));
    MT_CHECK(!flag, "%s: MPI_Iprobe still finds the message after MPI_Recv", what);
}

static void receiver(void)
{
    unsigned char *buf = mt_malloc((1u << 20) + GUARD);
    MPI_Status st;
    int k, flag, polls, go = 1;

    /* the largest first: the others wait as unexpected messages */
    for (k = NSIZES - 1; k >= 0; k--) {
        receive_probed(k, buf);
    }

    for (polls = 0; polls < 100; polls++) {
        MT_MPI(MPI_Iprobe(1, LATE_TAG, MPI_COMM_WORLD, &flag, &st));
        if (flag) {
            mt_fail("MPI_Iprobe found tag %d before it was sent", LATE_TAG);
            break;
        }
    }
    mt_step("%s", "MPI_Iprobe loop for the late message");
    MT_MPI(MPI_Send(&go, 1, MPI_INT, 1, GO_TAG, MPI_COMM_WORLD));
    for (polls = 0, flag = 0; !flag; polls++) {
        MT_MPI(MPI_Iprobe(1, LATE_TAG, MPI_COMM_WORLD, &flag, &st));
        mt_poll_deadline("waiting for MPI_Iprobe to find the late message");
    }
    mt_check_status("MPI_Iprobe loop", &st, MPI_BYTE, 1, LATE_TAG, 8);
    /* the only message left: found by a probe with both wildcards */
    mt_step("%s", "MPI_Probe(any, any) and MPI_Recv of the late message");
    MT_MPI(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
    mt_check_status("MPI_Probe(any, any)", &st, MPI_BYTE, 1, LATE_TAG, 8);
    MT_MPI(MPI_Recv(buf, 8, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
    mt_check_status("late message", &st, MPI_BYTE, 1, LATE_TAG, 8);
    mt_check_pattern("late message", buf, 8, 2, 0);

    MT_MPI(MPI_Probe(MPI_PROC_NULL, 5, MPI_COMM_WORLD, &st));
    mt_check_status("MPI_Probe(MPI_PROC_NULL)", &st, MPI_BYTE, MPI_PROC_NULL, MPI_ANY_TAG, 0);
    MT_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
    MT_CHECK(!flag, "MPI_Iprobe(any, any) finds a message (tag %d) when none is left",
             st.MPI_TAG);
    free(buf);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "probe", 2, 30);
    if (mt_rank == 0) {
        receiver();
    } else if (mt_rank == 1) {
        sender();
    }
    return mt_finish();
}
