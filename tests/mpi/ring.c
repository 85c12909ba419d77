/*
 * Large messages around a ring (each rank MPI_Sendrecv's to its right while
 * receiving from its left), 64 KiB to 1 MiB, for the oversubscription check
 * of run_mpi_tests.sh: 4 ranks on 2 cores must not turn every rendezvous
 * handshake into a scheduler time slice.
 *   ring [-n rounds]      (default 100 per size)
 * Rank 0 prints
 *   RESULT test=mpi_ring ranks=N rounds=R seconds=X
 * (the exchanges only). Every message carries its round and sender in its
 * first and last bytes, checked on arrival; the whole pattern is checked in
 * the first and last round of each size.
 */
#include "mpi_check.h"

static const size_t ring_sizes[] = {64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20};

/* Round and sender at both ends of the message: a stale or misrouted one shows. */
static void ring_stamp(unsigned char *buf, size_t size, int round, int from)
{
    int stamp[2] = {round, from};

    memcpy(buf, stamp, sizeof(stamp));
    memcpy(buf + size - sizeof(stamp), stamp, sizeof(stamp));
}

static void ring_check_stamp(const unsigned char *buf, size_t size, int round, int from)
{
    int head[2], tail[2];

    memcpy(head, buf, sizeof(head));
    memcpy(tail, buf + size - sizeof(tail), sizeof(tail));
    MT_CHECK((head[0] == round) && (head[1] == from) && (tail[0] == round) && (tail[1] == from),
             "%zu B round %d from rank %d: got round %d/%d from rank %d/%d (head/tail)", size,
             round, from, head[0], tail[0], head[1], tail[1]);
}

/* The bytes between the stamps: the sender's pattern. */
static void ring_check_body(const unsigned char *buf, size_t size, int from, unsigned iter)
{
    size_t i;

    for (i = 2 * sizeof(int); i < size - 2 * sizeof(int); i++) {
        if (buf[i] != mt_pattern_byte((unsigned)from, size, iter, i)) {
            mt_fail("%zu B from rank %d: byte %zu is 0x%02x, expected 0x%02x", size, from, i,
                    buf[i], mt_pattern_byte((unsigned)from, size, iter, i));
            return;
        }
    }
}

int main(int argc, char **argv)
{
    int rounds = 100, right, left, r;
    unsigned char *sbuf, *rbuf;
    double elapsed = 0, start;
    size_t s, size;

    mt_init(&argc, &argv, "ring", 2, 120);
    if ((argc > 2) && (strcmp(argv[1], "-n") == 0)) {
        rounds = atoi(argv[2]);
        if ((rounds < 2) || (rounds > 1000000)) {
            if (mt_rank == 0) {
                fprintf(stderr, "ring: invalid -n '%s'\n", argv[2]);
            }
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    right = (mt_rank + 1) % mt_size;
    left  = (mt_rank + mt_size - 1) % mt_size;
    sbuf  = mt_malloc(1 << 20);
    rbuf  = mt_malloc(1 << 20);

    for (s = 0; s < sizeof(ring_sizes) / sizeof(ring_sizes[0]); s++) {
        size = ring_sizes[s];
        mt_fill(sbuf, size, (unsigned)mt_rank, (unsigned)s);
        mt_step("ring of %zu B", size);
        MPI_Barrier(MPI_COMM_WORLD);
        start = MPI_Wtime();
        for (r = 0; r < rounds; r++) {
            ring_stamp(sbuf, size, r, mt_rank);
            MT_MPI(MPI_Sendrecv(sbuf, (int)size, MPI_BYTE, right, (int)s, rbuf, (int)size,
                                MPI_BYTE, left, (int)s, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            ring_check_stamp(rbuf, size, r, left);
            if ((r == 0) || (r == rounds - 1)) {
                ring_check_body(rbuf, size, left, (unsigned)s);
            }
            mt_poll_deadline("the ring");
        }
        elapsed += MPI_Wtime() - start;
    }
    if (mt_rank == 0) {
        printf("RESULT test=mpi_ring ranks=%d rounds=%d seconds=%.6f\n", mt_size, rounds,
               elapsed);
    }
    free(sbuf);
    free(rbuf);
    return mt_finish();
}
