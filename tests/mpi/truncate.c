/*
 * Truncation with MPI_ERRORS_RETURN: a receive shorter than its message
 * fails with an error of class MPI_ERR_TRUNCATE (MPI_Recv and MPI_Irecv +
 * MPI_Wait; eager and rendezvous sizes; received unexpectedly or posted
 * first; 0-byte receive of a 1-byte message), and the next message, from the
 * same sender, is received intact: a truncation breaks nothing.
 */
#include "mpi_check.h"

#define BIG    (1u << 20)
#define GO_TAG 99

typedef struct {
    int tag;
    size_t size;
} msg_t;

static const msg_t msgs[] = {
    { 1, 100 }, { 2, 100 }, { 3, BIG }, { 4, BIG }, { 5, 1 }, { 6, 8 },
};
/* sent after the go: their receives are posted first */
static const msg_t late[] = { { 7, 1000 }, { 8, 1000 }, { 9, BIG }, { 10, 64 } };

#define N(a) (int)(sizeof(a) / sizeof((a)[0]))

static void sender(void)
{
    unsigned char *buf = mt_malloc(BIG);
    int i, go;

    for (i = 0; i < N(msgs); i++) {
        mt_step("sending tag %d", msgs[i].tag);
        mt_fill(buf, msgs[i].size, (unsigned)msgs[i].tag, 0);
        MT_MPI(MPI_Send(buf, (int)msgs[i].size, MPI_BYTE, 0, msgs[i].tag, MPI_COMM_WORLD));
    }
    MT_MPI(MPI_Recv(&go, 1, MPI_INT, 0, GO_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    for (i = 0; i < N(late); i++) {
        mt_step("sending tag %d", late[i].tag);
        mt_fill(buf, late[i].size, (unsigned)late[i].tag, 0);
        MT_MPI(MPI_Send(buf, (int)late[i].size, MPI_BYTE, 0, late[i].tag, MPI_COMM_WORLD));
    }
    free(buf);
}

static void check_truncated(const char *what, int rc)
{
    int cls = -1;

    if (rc != MPI_SUCCESS) {
        MPI_Error_class(rc, &cls);
    }
    MT_CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_TRUNCATE, "%s: error class %d (code %d), "
             "expected MPI_ERR_TRUNCATE (%d)", what, cls, rc, MPI_ERR_TRUNCATE);
}

static void check_received(const char *what, int rc, const MPI_Status *st,
                           const unsigned char *buf, const msg_t *m)
{
    MT_CHECK(rc == MPI_SUCCESS, "%s: receive failed with error %d", what, rc);
    mt_check_status(what, st, MPI_BYTE, 1, m->tag, (int)m->size);
    mt_check_pattern(what, buf, m->size, (unsigned)m->tag, 0);
}

static void receiver(void)
{
    unsigned char *buf = mt_malloc(BIG);
    MPI_Request req;
    MPI_Status st;
    int rc, go = 1;

    mt_step("%s", "MPI_Recv of 100 B into 50");
    rc = MPI_Recv(buf, 50, MPI_BYTE, 1, 1, MPI_COMM_WORLD, &st);
    check_truncated("MPI_Recv of 100 B into 50", rc);
    mt_step("%s", "100 B after a truncated receive");
    rc = MPI_Recv(buf, 100, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &st);
    check_received("100 B after a truncated receive", rc, &st, buf, &msgs[1]);

    mt_step("%s", "MPI_Irecv of 1 MiB into 512 KiB");
    MT_MPI(MPI_Irecv(buf, BIG / 2, MPI_BYTE, 1, 3, MPI_COMM_WORLD, &req));
    rc = MPI_Wait(&req, &st);
    check_truncated("MPI_Irecv of 1 MiB into 512 KiB", rc);
    mt_step("%s", "1 MiB after a truncated receive");
    rc = MPI_Recv(buf, BIG, MPI_BYTE, 1, 4, MPI_COMM_WORLD, &st);
    check_received("1 MiB after a truncated receive", rc, &st, buf, &msgs[3]);

    mt_step("%s", "MPI_Recv of 1 B into 0");
    rc = MPI_Recv(buf, 0, MPI_BYTE, MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, &st);
    check_truncated("MPI_Recv of 1 B into 0", rc);
    mt_step("%s", "8 B after a truncated receive");
    rc = MPI_Recv(buf, 8, MPI_BYTE, 1, 6, MPI_COMM_WORLD, &st);
    check_received("8 B after a truncated receive", rc, &st, buf, &msgs[5]);

    /* posted before the messages are sent */
    mt_step("%s", "posted MPI_Irecv of 1000 B into 999");
    MT_MPI(MPI_Irecv(buf, 999, MPI_BYTE, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &req));
    MT_MPI(MPI_Send(&go, 1, MPI_INT, 1, GO_TAG, MPI_COMM_WORLD));
    rc = MPI_Wait(&req, &st);
    check_truncated("posted MPI_Irecv of 1000 B into 999", rc);
    mt_step("%s", "1000 B after a truncated posted receive");
    rc = MPI_Recv(buf, 1000, MPI_BYTE, 1, 8, MPI_COMM_WORLD, &st);
    check_received("1000 B after a truncated posted receive", rc, &st, buf, &late[1]);
    mt_step("%s", "MPI_Recv of 1 MiB into 1 MiB - 1");
    rc = MPI_Recv(buf, BIG - 1, MPI_BYTE, 1, 9, MPI_COMM_WORLD, &st);
    check_truncated("MPI_Recv of 1 MiB into 1 MiB - 1", rc);
    mt_step("%s", "64 B after a truncated 1 MiB receive");
    rc = MPI_Recv(buf, 64, MPI_BYTE, 1, 10, MPI_COMM_WORLD, &st);
    check_received("64 B after a truncated 1 MiB receive", rc, &st, buf, &late[3]);
    free(buf);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "truncate", 2, 30);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (mt_rank == 0) {
        receiver();
    } else if (mt_rank == 1) {
        sender();
    }
    return mt_finish();
}
