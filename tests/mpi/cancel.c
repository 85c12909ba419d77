/*
 * MPI_Cancel of receives. Rank 0 posts receives nothing matches yet (a given
 * source, MPI_ANY_SOURCE, 1 MiB, and a hundred at once) and cancels them:
 * MPI_Test_cancelled is true, and messages sent afterwards with those tags
 * are still received by new receives (a cancelled receive consumed nothing).
 * Then receives that did match (8 B and 1 MiB) are cancelled after
 * completing: MPI_Test_cancelled is false and the data is intact.
 */
#include "mpi_check.h"

#define GO_TAG 1
#define MANY   100
#define BIG    (1u << 20)

static void sender(void)
{
    unsigned char *buf = mt_malloc(BIG);
    int go;

    MT_MPI(MPI_Recv(&go, 1, MPI_INT, 0, GO_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    mt_step("%s", "sending tags 77 to 82 after the go");
    mt_fill(buf, 16, 77, 0);
    MT_MPI(MPI_Send(buf, 16, MPI_BYTE, 0, 77, MPI_COMM_WORLD));
    mt_fill(buf, 16, 78, 0);
    MT_MPI(MPI_Send(buf, 16, MPI_BYTE, 0, 78, MPI_COMM_WORLD));
    mt_fill(buf, 64, 79, 0);
    MT_MPI(MPI_Send(buf, 64, MPI_BYTE, 0, 79, MPI_COMM_WORLD));
    mt_fill(buf, BIG, 81, 0);
    MT_MPI(MPI_Send(buf, BIG, MPI_BYTE, 0, 81, MPI_COMM_WORLD));
    mt_fill(buf, 8, 80, 0);
    MT_MPI(MPI_Send(buf, 8, MPI_BYTE, 0, 80, MPI_COMM_WORLD));
    mt_fill(buf, BIG, 82, 0);
    MT_MPI(MPI_Send(buf, BIG, MPI_BYTE, 0, 82, MPI_COMM_WORLD));
    free(buf);
}

static void cancel_unmatched(const char *what, MPI_Request *req)
{
    MPI_Status st;
    int cancelled = 0;

    mt_step("MPI_Cancel + MPI_Wait of a %s", what);
    MT_MPI(MPI_Cancel(req));
    MT_MPI(MPI_Wait(req, &st));
    MT_MPI(MPI_Test_cancelled(&st, &cancelled));
    MT_CHECK(cancelled, "%s: MPI_Test_cancelled is false for a receive nothing matched", what);
}

/* Waits (without completing it) until the receive matched and finished, cancels it. */
static void cancel_matched(const char *what, MPI_Request *req, const unsigned char *buf,
                           int tag, size_t size)
{
    MPI_Status st;
    int flag = 0, cancelled = 1;

    mt_step("%s", what);
    while (!flag) {
        MT_MPI(MPI_Request_get_status(*req, &flag, &st));
        mt_poll_deadline("waiting for a receive to match");
    }
    MT_MPI(MPI_Cancel(req));
    MT_MPI(MPI_Wait(req, &st));
    MT_MPI(MPI_Test_cancelled(&st, &cancelled));
    MT_CHECK(!cancelled, "%s: MPI_Test_cancelled is true for a receive that completed", what);
    mt_check_status(what, &st, MPI_BYTE, 1, tag, (int)size);
    mt_check_pattern(what, buf, size, (unsigned)tag, 0);
}

static void receive_check(const char *what, unsigned char *buf, int tag, size_t size)
{
    MPI_Status st;

    mt_step("%s", what);
    memset(buf, MT_POISON, size);
    MT_MPI(MPI_Recv(buf, (int)size, MPI_BYTE, 1, tag, MPI_COMM_WORLD, &st));
    mt_check_status(what, &st, MPI_BYTE, 1, tag, (int)size);
    mt_check_pattern(what, buf, size, (unsigned)tag, 0);
}

static void receiver(void)
{
    unsigned char *small = mt_malloc(64), *big = mt_malloc(BIG), *b79 = mt_malloc(64);
    unsigned char *b81 = mt_malloc(BIG);
    MPI_Request req, many[MANY], r79, r81;
    MPI_Status st[MANY];
    int i, n = 0, go = 1;

    MT_MPI(MPI_Irecv(small, 16, MPI_BYTE, 1, 77, MPI_COMM_WORLD, &req));
    cancel_unmatched("receive from rank 1", &req);
    MT_MPI(MPI_Irecv(small, 16, MPI_BYTE, MPI_ANY_SOURCE, 78, MPI_COMM_WORLD, &req));
    cancel_unmatched("receive from MPI_ANY_SOURCE", &req);
    MT_MPI(MPI_Irecv(big, BIG, MPI_BYTE, 1, 82, MPI_COMM_WORLD, &req));
    cancel_unmatched("receive of 1 MiB", &req);
    for (i = 0; i < MANY; i++) {
        MT_MPI(MPI_Irecv(small, 8, MPI_BYTE, 1, 80, MPI_COMM_WORLD, &many[i]));
    }
    for (i = MANY - 1; i >= 0; i--) {
        MT_MPI(MPI_Cancel(&many[i]));
    }
    MT_MPI(MPI_Waitall(MANY, many, st));
    for (i = 0; i < MANY; i++) {
        int c = 0;

        MPI_Test_cancelled(&st[i], &c);
        n += c;
    }
    mt_step("%s", "cancelling 100 receives");
    MT_CHECK(n == MANY, "%d of %d cancelled receives say MPI_Test_cancelled", n, MANY);

    /* posted before the messages exist: they will match */
    memset(b79, MT_POISON, 64);
    memset(b81, MT_POISON, BIG);
    MT_MPI(MPI_Irecv(b79, 64, MPI_BYTE, 1, 79, MPI_COMM_WORLD, &r79));
    MT_MPI(MPI_Irecv(b81, BIG, MPI_BYTE, MPI_ANY_SOURCE, 81, MPI_COMM_WORLD, &r81));

    MT_MPI(MPI_Send(&go, 1, MPI_INT, 1, GO_TAG, MPI_COMM_WORLD));
    receive_check("tag 77 after its receive was cancelled", small, 77, 16);
    receive_check("tag 78 after its receive was cancelled", small, 78, 16);
    cancel_matched("cancel of a matched 64 B receive", &r79, b79, 79, 64);
    cancel_matched("cancel of a matched 1 MiB receive", &r81, b81, 81, BIG);
    receive_check("tag 80 after 100 receives were cancelled", small, 80, 8);
    receive_check("tag 82 (1 MiB) after its receive was cancelled", big, 82, BIG);
    free(small);
    free(big);
    free(b79);
    free(b81);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "cancel", 2, 30);
    if (mt_rank == 0) {
        receiver();
    } else if (mt_rank == 1) {
        sender();
    }
    return mt_finish();
}
