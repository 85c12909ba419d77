/*
 * What MPI applications do beyond plain send and receive, on 4 ranks:
 * communicators keep their messages apart (MPI_Comm_dup with the same source
 * and tag, received in the other order; MPI_Comm_split with renumbered
 * ranks), MPI_Sendrecv_replace around a ring, non-contiguous datatypes
 * (a strided vector sent and received as contiguous, and the reverse),
 * persistent requests started again and again (MPI_Send_init, MPI_Recv_init,
 * MPI_Startall), MPI_Waitany and MPI_Testsome over receives from everyone,
 * MPI_Improbe with MPI_Imrecv, and a zero-byte message matched by
 * MPI_ANY_TAG. Eager and rendezvous sizes each.
 */
#include "mpi_check.h"

#define SMALL 8
#define LARGE (256u * 1024)

/* Same source, same tag, two communicators: the receives are posted in the
 * other order, so a message matched by tag alone lands in the wrong one. */
static void dup_isolation(size_t size)
{
    unsigned char *a = mt_malloc(size), *b = mt_malloc(size);
    MPI_Request req[2];
    MPI_Status st[2];
    MPI_Comm dup;
    char what[80];

    mt_step("MPI_Comm_dup isolation, %zu B", size);
    MT_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    if (mt_rank == 0) {
        mt_fill(a, size, 11, 0);
        mt_fill(b, size, 22, 0);
        MT_MPI(MPI_Send(a, (int)size, MPI_BYTE, 1, 5, MPI_COMM_WORLD));
        MT_MPI(MPI_Send(b, (int)size, MPI_BYTE, 1, 5, dup));
    } else if (mt_rank == 1) {
        memset(a, MT_POISON, size);
        memset(b, MT_POISON, size);
        MT_MPI(MPI_Irecv(b, (int)size, MPI_BYTE, 0, 5, dup, &req[1]));
        MT_MPI(MPI_Irecv(a, (int)size, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD,
                         &req[0]));
        MT_MPI(MPI_Waitall(2, req, st));
        snprintf(what, sizeof(what), "%zu B on MPI_COMM_WORLD", size);
        mt_check_status(what, &st[0], MPI_BYTE, 0, 5, (int)size);
        mt_check_pattern(what, a, size, 11, 0);
        snprintf(what, sizeof(what), "%zu B on the duplicate", size);
        mt_check_status(what, &st[1], MPI_BYTE, 0, 5, (int)size);
        mt_check_pattern(what, b, size, 22, 0);
    }
    MT_MPI(MPI_Comm_free(&dup));
    free(a);
    free(b);
}

/* Even and odd ranks in two communicators: ranks renumbered, sums per half. */
static void split_ring(void)
{
    int color = mt_rank % 2, sub_rank, sub_size, sum = -1, want = 0, i;
    int token, got = -1;
    MPI_Comm sub;
    MPI_Status st;

    mt_step("%s", "MPI_Comm_split");
    MT_MPI(MPI_Comm_split(MPI_COMM_WORLD, color, -mt_rank, &sub));  /* reversed order */
    MPI_Comm_rank(sub, &sub_rank);
    MPI_Comm_size(sub, &sub_size);
    MT_CHECK(sub_size == (mt_size + 1 - color) / 2, "MPI_Comm_split: size %d of half %d",
             sub_size, color);
    for (i = color; i < mt_size; i += 2) {
        want += i;
    }
    MT_MPI(MPI_Allreduce(&mt_rank, &sum, 1, MPI_INT, MPI_SUM, sub));
    MT_CHECK(sum == want, "MPI_Allreduce on half %d: %d, expected %d", color, sum, want);
    /* a ring in the new numbering: the token is the world rank of the sender */
    token = mt_rank;
    MT_MPI(MPI_Sendrecv(&token, 1, MPI_INT, (sub_rank + 1) % sub_size, 9, &got, 1, MPI_INT,
                        (sub_rank + sub_size - 1) % sub_size, 9, sub, &st));
    {
        /* the left neighbour in the reversed numbering has the next world rank of this half */
        int left_world = (sub_rank == 0) ? color : mt_rank + 2;

        MT_CHECK(got == left_world, "MPI_Sendrecv in half %d (rank %d of %d): token %d, "
                 "expected %d", color, sub_rank, sub_size, got, left_world);
        MT_CHECK(st.MPI_SOURCE == (sub_rank + sub_size - 1) % sub_size,
                 "MPI_Sendrecv in half %d: status.MPI_SOURCE %d", color, st.MPI_SOURCE);
    }
    MT_MPI(MPI_Comm_free(&sub));
}

static void ring_replace(size_t size)
{
    unsigned char *buf = mt_malloc(size);
    int right = (mt_rank + 1) % mt_size, left = (mt_rank + mt_size - 1) % mt_size;
    MPI_Status st;
    char what[80];

    mt_step("MPI_Sendrecv_replace of %zu B", size);
    mt_fill(buf, size, (unsigned)mt_rank, 1);
    MT_MPI(MPI_Sendrecv_replace(buf, (int)size, MPI_BYTE, right, 3, left, 3, MPI_COMM_WORLD,
                                &st));
    snprintf(what, sizeof(what), "MPI_Sendrecv_replace of %zu B", size);
    mt_check_status(what, &st, MPI_BYTE, left, 3, (int)size);
    mt_check_pattern(what, buf, size, (unsigned)left, 1);
    free(buf);
}

/* Every 5th double block of 3 (a matrix column band): sent strided, received
 * contiguous, sent back contiguous and received strided. */
static void vector_type(int count)
{
    const int blk = 3, stride = 5;
    double *strided = mt_malloc(sizeof(double) * (size_t)(count * stride));
    double *packed = mt_malloc(sizeof(double) * (size_t)(count * blk));
    MPI_Datatype vec;
    MPI_Status st;
    int i, j, n = -1;

    mt_step("MPI_Type_vector of %d blocks", count);
    MT_MPI(MPI_Type_vector(count, blk, stride, MPI_DOUBLE, &vec));
    MT_MPI(MPI_Type_commit(&vec));
    if (mt_rank == 0) {
        for (i = 0; i < count * stride; i++) {
            strided[i] = (i % stride < blk) ? i * 0.5 : -1.0;
        }
        MT_MPI(MPI_Send(strided, 1, vec, 1, 4, MPI_COMM_WORLD));
        for (i = 0; i < count * stride; i++) {
            strided[i] = -2.0;
        }
        MT_MPI(MPI_Recv(strided, 1, vec, 1, 4, MPI_COMM_WORLD, &st));
        for (i = 0; i < count; i++) {
            for (j = 0; j < stride; j++) {
                double v = strided[i * stride + j];
                double want = (j < blk) ? (i * stride + j) * 0.5 + 1.0 : -2.0;

                if (v != want) {
                    mt_fail("vector received back: element %d is %g, expected %g",
                            i * stride + j, v, want);
                    i = count;
                    break;
                }
            }
        }
    } else if (mt_rank == 1) {
        for (i = 0; i < count * blk; i++) {
            packed[i] = -3.0;
        }
        MT_MPI(MPI_Recv(packed, count * blk, MPI_DOUBLE, 0, 4, MPI_COMM_WORLD, &st));
        MPI_Get_count(&st, MPI_DOUBLE, &n);
        MT_CHECK(n == count * blk, "vector received contiguous: %d doubles, expected %d", n,
                 count * blk);
        for (i = 0; i < count * blk; i++) {
            double want = ((i / blk) * stride + i % blk) * 0.5;

            if (packed[i] != want) {
                mt_fail("vector received contiguous: element %d is %g, expected %g", i,
                        packed[i], want);
                break;
            }
            packed[i] += 1.0;
        }
        MT_MPI(MPI_Send(packed, count * blk, MPI_DOUBLE, 0, 4, MPI_COMM_WORLD));
    }
    MT_MPI(MPI_Type_free(&vec));
    free(strided);
    free(packed);
}

/* A ring of persistent requests, started 20 times, new data each time. */
static void persistent(size_t size)
{
    unsigned char *out = mt_malloc(size), *in = mt_malloc(size);
    int right = (mt_rank + 1) % mt_size, left = (mt_rank + mt_size - 1) % mt_size;
    MPI_Request req[2];
    MPI_Status st[2];
    char what[80];
    unsigned it;

    MT_MPI(MPI_Recv_init(in, (int)size, MPI_BYTE, left, 6, MPI_COMM_WORLD, &req[0]));
    MT_MPI(MPI_Send_init(out, (int)size, MPI_BYTE, right, 6, MPI_COMM_WORLD, &req[1]));
    for (it = 0; it < 20; it++) {
        mt_step("persistent requests of %zu B, round %u", size, it);
        mt_fill(out, size, (unsigned)mt_rank, it);
        memset(in, MT_POISON, size);
        MT_MPI(MPI_Startall(2, req));
        MT_MPI(MPI_Waitall(2, req, st));
        snprintf(what, sizeof(what), "persistent receive of %zu B, round %u", size, it);
        mt_check_status(what, &st[0], MPI_BYTE, left, 6, (int)size);
        mt_check_pattern(what, in, size, (unsigned)left, it);
    }
    MT_MPI(MPI_Request_free(&req[0]));
    MT_MPI(MPI_Request_free(&req[1]));
    free(out);
    free(in);
}

/* A receive from every other rank, finished with MPI_Waitany on even ranks
 * and MPI_Testsome on odd ones; each source exactly once. */
static void waitany_testsome(size_t size)
{
    int n = mt_size - 1, i, done = 0;
    unsigned char *in = mt_malloc(size * (size_t)n), *out = mt_malloc(size);
    MPI_Request *rreq = mt_malloc(sizeof(MPI_Request) * (size_t)n);
    MPI_Request *sreq = mt_malloc(sizeof(MPI_Request) * (size_t)n);
    int *seen = mt_malloc(sizeof(int) * (size_t)mt_size), *idx = mt_malloc(sizeof(int) * (size_t)n);
    MPI_Status *st = mt_malloc(sizeof(MPI_Status) * (size_t)n);
    int tag = (size > SMALL) ? 18 : 8;   /* ranks done with one size send the next already */
    char what[80];

    mt_step("MPI_Waitany / MPI_Testsome of %zu B", size);
    memset(seen, 0, sizeof(int) * (size_t)mt_size);
    memset(in, MT_POISON, size * (size_t)n);
    for (i = 0; i < n; i++) {
        MT_MPI(MPI_Irecv(in + (size_t)i * size, (int)size, MPI_BYTE, MPI_ANY_SOURCE, tag,
                         MPI_COMM_WORLD, &rreq[i]));
    }
    mt_fill(out, size, (unsigned)mt_rank, 2);
    for (i = 0; i < n; i++) {
        MT_MPI(MPI_Isend(out, (int)size, MPI_BYTE, (mt_rank + 1 + i) % mt_size, tag,
                         MPI_COMM_WORLD, &sreq[i]));
    }
    while (done < n) {
        int outcount = 0, k;

        if (mt_rank % 2 == 0) {
            MT_MPI(MPI_Waitany(n, rreq, &idx[0], &st[0]));
            outcount = 1;
        } else {
            MT_MPI(MPI_Testsome(n, rreq, &outcount, idx, st));
            mt_poll_deadline("MPI_Testsome");
        }
        for (k = 0; k < outcount; k++) {
            int src = st[k].MPI_SOURCE;

            if (src < 0 || src >= mt_size || src == mt_rank) {
                mt_fail("MPI_Waitany/MPI_Testsome: source %d", src);
                continue;
            }
            seen[src]++;
            snprintf(what, sizeof(what), "receive %d of %zu B from rank %d", idx[k], size, src);
            mt_check_status(what, &st[k], MPI_BYTE, src, tag, (int)size);
            mt_check_pattern(what, in + (size_t)idx[k] * size, size, (unsigned)src, 2);
        }
        done += outcount;
    }
    for (i = 0; i < mt_size; i++) {
        MT_CHECK(seen[i] == (i != mt_rank), "rank %d's message received %d times", i, seen[i]);
    }
    MT_MPI(MPI_Waitall(n, sreq, MPI_STATUSES_IGNORE));
    free(in);
    free(out);
    free(rreq);
    free(sreq);
    free(seen);
    free(idx);
    free(st);
}

/* MPI_Improbe polled until the message is there, then MPI_Imrecv. */
static void improbe(size_t size)
{
    unsigned char *buf = mt_malloc(size);
    MPI_Message msg;
    MPI_Request req;
    MPI_Status st;
    char what[80];
    int flag = 0, count = -1;

    mt_step("MPI_Improbe / MPI_Imrecv of %zu B", size);
    if (mt_rank == 0) {
        mt_fill(buf, size, 33, 0);
        MT_MPI(MPI_Send(buf, (int)size, MPI_BYTE, 1, 12, MPI_COMM_WORLD));
    } else if (mt_rank == 1) {
        while (!flag) {
            MT_MPI(MPI_Improbe(MPI_ANY_SOURCE, 12, MPI_COMM_WORLD, &flag, &msg, &st));
            mt_poll_deadline("MPI_Improbe");
        }
        MPI_Get_count(&st, MPI_BYTE, &count);
        MT_CHECK(count == (int)size && st.MPI_SOURCE == 0, "MPI_Improbe: %d B from rank %d, "
                 "expected %zu B from rank 0", count, st.MPI_SOURCE, size);
        memset(buf, MT_POISON, size);
        MT_MPI(MPI_Imrecv(buf, (int)size, MPI_BYTE, &msg, &req));
        MT_MPI(MPI_Wait(&req, &st));
        snprintf(what, sizeof(what), "MPI_Imrecv of %zu B", size);
        mt_check_status(what, &st, MPI_BYTE, 0, 12, (int)size);
        mt_check_pattern(what, buf, size, 33, 0);
    }
    free(buf);
}

static void zero_bytes_any_tag(void)
{
    MPI_Status st;
    char c = 'x';

    mt_step("%s", "a zero-byte message, MPI_ANY_TAG");
    if (mt_rank == 2) {
        MT_MPI(MPI_Send(&c, 0, MPI_BYTE, 3, 777, MPI_COMM_WORLD));
    } else if (mt_rank == 3) {
        MT_MPI(MPI_Recv(&c, 1, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        mt_check_status("a zero-byte message", &st, MPI_BYTE, 2, 777, 0);
        MT_CHECK(c == 'x', "a zero-byte message wrote the buffer (0x%02x)", (unsigned char)c);
    }
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "comm", 4, 30);
    dup_isolation(SMALL);
    dup_isolation(LARGE);
    split_ring();
    ring_replace(SMALL);
    ring_replace(LARGE);
    vector_type(10);
    vector_type(100000);       /* 2.4 MB packed */
    persistent(SMALL);
    persistent(LARGE);
    waitany_testsome(SMALL);
    waitany_testsome(LARGE);
    improbe(SMALL);
    improbe(LARGE);
    zero_bytes_any_tag();
    return mt_finish();
}
