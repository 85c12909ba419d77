/*
 * Non-blocking storms: every rank exchanges PER_PEER messages of mixed sizes
 * (0 B to rendezvous sizes) with every other rank at once, MPI_Waitall, and
 * verifies every payload and status. Three rounds:
 *   posted      all receives posted (and a barrier passed) before any send;
 *   unexpected  all sends started before any receive is posted;
 *   ordered     one tag for everything, half the receives posted before and
 *               half after the sends: each receive must get the next message
 *               of its sender (non-overtaking), which its size and pattern
 *               show (errors are returned, so a truncation is reported).
 */
#include "mpi_check.h"

#define PER_PEER 120

static const size_t sizes[] = { 0, 8, 64, 1000, 4096, 8193, 65541, 262151 };
#define NSIZES   (int)(sizeof(sizes) / sizeof(sizes[0]))
#define GUARD    64

enum { POSTED, UNEXPECTED, ORDERED };
static const char *round_names[] = { "posted", "unexpected", "ordered" };

static size_t size_of(int src, int i)
{
    return sizes[(i + src) % NSIZES];
}

static unsigned seed_of(int src, int dst, int round)
{
    return (unsigned)(src * 256 + dst * 4 + round);
}

typedef struct {
    int npeers;
    int *peers;                 /* rank of each peer */
    unsigned char **sbuf;       /* [peer * PER_PEER + i] */
    unsigned char **rbuf;
    MPI_Request *reqs;          /* receives, then sends */
    MPI_Status *st;
} storm_t;

static void post_recvs(storm_t *s, int round, int from, int to)
{
    int p, i;

    for (p = 0; p < s->npeers; p++) {
        for (i = from; i < to; i++) {
            int k = p * PER_PEER + i, src = s->peers[p];
            size_t size = size_of(src, i);
            int tag = round == ORDERED ? 7 : i;

            memset(s->rbuf[k], MT_POISON, size + GUARD);
            MT_MPI(MPI_Irecv(s->rbuf[k], (int)size, MPI_BYTE, src, tag, MPI_COMM_WORLD,
                             &s->reqs[k]));
        }
    }
}

static void post_sends(storm_t *s, int round)
{
    int n = s->npeers * PER_PEER, p, i;

    for (p = 0; p < s->npeers; p++) {
        for (i = 0; i < PER_PEER; i++) {
            int k = p * PER_PEER + i;
            size_t size = size_of(mt_rank, i);

            mt_fill(s->sbuf[k], size, seed_of(mt_rank, s->peers[p], round), (unsigned)i);
            MT_MPI(MPI_Isend(s->sbuf[k], (int)size, MPI_BYTE, s->peers[p],
                             round == ORDERED ? 7 : i, MPI_COMM_WORLD, &s->reqs[n + k]));
        }
    }
}

static void verify(storm_t *s, int round)
{
    char what[96];
    int p, i;

    for (p = 0; p < s->npeers; p++) {
        for (i = 0; i < PER_PEER; i++) {
            int k = p * PER_PEER + i, src = s->peers[p];
            size_t size = size_of(src, i);

            snprintf(what, sizeof(what), "%s round: message %d from rank %d (%zu B)",
                     round_names[round], i, src, size);
            mt_check_status(what, &s->st[k], MPI_BYTE, src, round == ORDERED ? 7 : i,
                            (int)size);
            mt_check_pattern(what, s->rbuf[k], size, seed_of(src, mt_rank, round),
                             (unsigned)i);
            mt_check_poison(what, s->rbuf[k], size, size + GUARD);
        }
    }
}

static void storm_round(storm_t *s, int round)
{
    int n = s->npeers * PER_PEER;

    mt_step("the %s round", round_names[round]);
    switch (round) {
    case POSTED:
        post_recvs(s, round, 0, PER_PEER);
        MPI_Barrier(MPI_COMM_WORLD);
        post_sends(s, round);
        break;
    case UNEXPECTED:
        post_sends(s, round);
        MPI_Barrier(MPI_COMM_WORLD);
        post_recvs(s, round, 0, PER_PEER);
        break;
    default:
        post_recvs(s, round, 0, PER_PEER / 2);
        MPI_Barrier(MPI_COMM_WORLD);
        post_sends(s, round);
        post_recvs(s, round, PER_PEER / 2, PER_PEER);
        break;
    }
    if (MPI_Waitall(2 * n, s->reqs, s->st) != MPI_SUCCESS) {
        int k;

        for (k = 0; k < 2 * n; k++) {
            MT_CHECK(s->st[k].MPI_ERROR == MPI_SUCCESS, "%s round: MPI_Waitall: the %s of "
                     "message %d to/from peer %d failed with error %d", round_names[round],
                     k < n ? "receive" : "send", k % PER_PEER,
                     s->peers[(k % n) / PER_PEER], s->st[k].MPI_ERROR);
        }
    }
    verify(s, round);
    MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    storm_t s;
    int n, k, p, round;

    mt_init(&argc, &argv, "storm", 2, 30);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    s.npeers = mt_size - 1;
    n = s.npeers * PER_PEER;
    s.peers = mt_malloc(sizeof(int) * (size_t)s.npeers);
    s.sbuf = mt_malloc(sizeof(void *) * (size_t)n);
    s.rbuf = mt_malloc(sizeof(void *) * (size_t)n);
    s.reqs = mt_malloc(sizeof(MPI_Request) * 2 * (size_t)n);
    s.st = mt_malloc(sizeof(MPI_Status) * 2 * (size_t)n);
    for (p = 0; p < s.npeers; p++) {
        s.peers[p] = p < mt_rank ? p : p + 1;
    }
    for (k = 0; k < n; k++) {
        s.sbuf[k] = mt_malloc(size_of(mt_rank, k % PER_PEER));
        s.rbuf[k] = mt_malloc(size_of(s.peers[k / PER_PEER], k % PER_PEER) + GUARD);
    }
    for (round = POSTED; round <= ORDERED; round++) {
        storm_round(&s, round);
    }
    for (k = 0; k < n; k++) {
        free(s.sbuf[k]);
        free(s.rbuf[k]);
    }
    free(s.peers);
    free(s.sbuf);
    free(s.rbuf);
    free(s.reqs);
    free(s.st);
    return mt_finish();
}
