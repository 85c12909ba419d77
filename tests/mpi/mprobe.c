/*
 * Matched probes: MPI_Mprobe / MPI_Improbe claim a message, which no other
 * probe or receive can see afterwards, and MPI_Mrecv / MPI_Imrecv receive
 * exactly that message: 0 B, 4 MiB (rendezvous), two messages of one tag
 * claimed in order and received in reverse, an MPI_Improbe loop for a
 * message not sent yet, and MPI_PROC_NULL.
 */
#include "mpi_check.h"

#define BIG   (4u << 20)
#define GUARD 64
#define GO_TAG 1

static void sender(void)
{
    unsigned char *buf = mt_malloc(BIG);
    int go;

    mt_step("%s", "sending tags 20 to 23");
    MT_MPI(MPI_Send(buf, 0, MPI_BYTE, 0, 20, MPI_COMM_WORLD));
    mt_fill(buf, BIG, 21, 0);
    MT_MPI(MPI_Send(buf, BIG, MPI_BYTE, 0, 21, MPI_COMM_WORLD));
    mt_fill(buf, 100, 22, 0);
    MT_MPI(MPI_Send(buf, 100, MPI_BYTE, 0, 22, MPI_COMM_WORLD));
    mt_fill(buf, 200, 22, 1);
    MT_MPI(MPI_Send(buf, 200, MPI_BYTE, 0, 22, MPI_COMM_WORLD));
    mt_fill(buf, 65536, 23, 0);
    MT_MPI(MPI_Send(buf, 65536, MPI_BYTE, 0, 23, MPI_COMM_WORLD));
    MT_MPI(MPI_Recv(&go, 1, MPI_INT, 0, GO_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    mt_step("%s", "sending tag 24 after the go");
    mt_fill(buf, 8, 24, 0);
    MT_MPI(MPI_Send(buf, 8, MPI_BYTE, 0, 24, MPI_COMM_WORLD));
    free(buf);
}

/* Receives the claimed message @msg of @size bytes into a poisoned buffer and checks it. */
static void mrecv_check(const char *what, MPI_Message *msg, unsigned char *buf, int tag,
                        size_t size, unsigned iter)
{
    MPI_Status st;

    mt_step("%s", what);
    memset(buf, MT_POISON, size + GUARD);
    MT_MPI(MPI_Mrecv(buf, (int)size, MPI_BYTE, msg, &st));
    mt_check_status(what, &st, MPI_BYTE, 1, tag, (int)size);
    mt_check_pattern(what, buf, size, (unsigned)tag, iter);
    mt_check_poison(what, buf, size, size + GUARD);
    MT_CHECK(*msg == MPI_MESSAGE_NULL, "%s: the message handle is not MPI_MESSAGE_NULL after "
             "MPI_Mrecv", what);
}

static void receiver(void)
{
    unsigned char *buf = mt_malloc(BIG + GUARD);
    MPI_Message m, m1, m2;
    MPI_Request req;
    MPI_Status st;
    int flag, polls, go = 1;

    /* the 4 MiB message first, while the 0 B one before it waits */
    mt_step("%s", "MPI_Mprobe of the 4 MiB message");
    MT_MPI(MPI_Mprobe(1, 21, MPI_COMM_WORLD, &m, &st));
    mt_check_status("MPI_Mprobe of 4 MiB", &st, MPI_BYTE, 1, 21, BIG);
    MT_MPI(MPI_Iprobe(1, 21, MPI_COMM_WORLD, &flag, &st));
    MT_CHECK(!flag, "MPI_Iprobe still sees the 4 MiB message claimed by MPI_Mprobe");
    mrecv_check("MPI_Mrecv of 4 MiB", &m, buf, 21, BIG, 0);

    mt_step("%s", "MPI_Mprobe of the 0 B message");
    MT_MPI(MPI_Mprobe(MPI_ANY_SOURCE, 20, MPI_COMM_WORLD, &m, &st));
    mt_check_status("MPI_Mprobe of 0 B", &st, MPI_BYTE, 1, 20, 0);
    mrecv_check("MPI_Mrecv of 0 B", &m, buf, 20, 0, 0);

    /* one tag, two messages: claimed in order, received in reverse */
    mt_step("%s", "MPI_Mprobe of two tag 22 messages");
    MT_MPI(MPI_Mprobe(1, 22, MPI_COMM_WORLD, &m1, &st));
    mt_check_status("first MPI_Mprobe of tag 22", &st, MPI_BYTE, 1, 22, 100);
    MT_MPI(MPI_Mprobe(1, 22, MPI_COMM_WORLD, &m2, &st));
    mt_check_status("second MPI_Mprobe of tag 22", &st, MPI_BYTE, 1, 22, 200);
    mrecv_check("MPI_Mrecv of the second tag 22 message", &m2, buf, 22, 200, 1);
    mrecv_check("MPI_Mrecv of the first tag 22 message", &m1, buf, 22, 100, 0);

    for (flag = 0; !flag;) {
        MT_MPI(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &m, &st));
        mt_poll_deadline("waiting for MPI_Improbe to find tag 23");
    }
    mt_check_status("MPI_Improbe(any, any)", &st, MPI_BYTE, 1, 23, 65536);
    mrecv_check("MPI_Mrecv after MPI_Improbe", &m, buf, 23, 65536, 0);

    for (polls = 0; polls < 100; polls++) {
        MT_MPI(MPI_Improbe(1, 24, MPI_COMM_WORLD, &flag, &m, &st));
        if (flag) {
            mt_fail("MPI_Improbe found tag 24 before it was sent");
            MT_MPI(MPI_Mrecv(buf, 8, MPI_BYTE, &m, &st));
            break;
        }
    }
    MT_MPI(MPI_Send(&go, 1, MPI_INT, 1, GO_TAG, MPI_COMM_WORLD));
    for (flag = 0; !flag;) {
        MT_MPI(MPI_Improbe(1, 24, MPI_COMM_WORLD, &flag, &m, &st));
        mt_poll_deadline("waiting for MPI_Improbe to find tag 24");
    }
    mt_check_status("MPI_Improbe loop", &st, MPI_BYTE, 1, 24, 8);
    mt_step("%s", "MPI_Imrecv + MPI_Wait of tag 24");
    memset(buf, MT_POISON, 8 + GUARD);
    MT_MPI(MPI_Imrecv(buf, 8, MPI_BYTE, &m, &req));
    MT_MPI(MPI_Wait(&req, &st));
    mt_check_status("MPI_Imrecv", &st, MPI_BYTE, 1, 24, 8);
    mt_check_pattern("MPI_Imrecv", buf, 8, 24, 0);
    mt_check_poison("MPI_Imrecv", buf, 8, 8 + GUARD);

    MT_MPI(MPI_Mprobe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &m, &st));
    MT_CHECK(m == MPI_MESSAGE_NO_PROC, "MPI_Mprobe(MPI_PROC_NULL) did not give "
             "MPI_MESSAGE_NO_PROC");
    MT_MPI(MPI_Mrecv(buf, 8, MPI_BYTE, &m, &st));
    mt_check_status("MPI_Mrecv(MPI_MESSAGE_NO_PROC)", &st, MPI_BYTE, MPI_PROC_NULL,
                    MPI_ANY_TAG, 0);

    MT_MPI(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &m, &st));
    MT_CHECK(!flag, "MPI_Improbe(any, any) finds a message (tag %d) when none is left",
             st.MPI_TAG);
    free(buf);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "mprobe", 2, 30);
    if (mt_rank == 0) {
        receiver();
    } else if (mt_rank == 1) {
        sender();
    }
    return mt_finish();
}
