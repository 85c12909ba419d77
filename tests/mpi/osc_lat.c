/*
 * One-sided latency from rank 0 to rank 1 under passive target
 * synchronisation (MPI_Win_lock_all held throughout), for
 * contrib/bench/osc_compare.sh:
 *   osc_lat [-t put,get,fop] [-s 8,4096,...] [-n iterations] [-w warmup]
 * put: MPI_Put of size bytes + MPI_Win_flush; get: MPI_Get + MPI_Win_flush;
 * fop: MPI_Fetch_and_op(MPI_SUM) of a long + MPI_Win_flush (size ignored).
 * The window is made by MPI_Win_create (MPI_Win_allocate would let Open
 * MPI's osc rdma copy through shared memory itself, bypassing its BTL).
 * Rank 0 prints one line per test and size:
 *   RESULT test=osc_put size=8 iters=10000 latency_us=X
 * Checked: every put's iteration number and the last put's bytes at the
 * target, every get's first word and the last get's bytes, every value
 * fetch_and_op returns (the count so far).
 */
#include "osc_win.h"

#define MAX_LIST 16

/* "8,4096,1048576" -> sizes (at least 8: a put carries its iteration number) */
static int parse_sizes(const char *list, size_t *sizes)
{
    char *copy = strdup(list), *tok, *save = NULL, *end;
    int n = 0;

    for (tok = strtok_r(copy, ",", &save); tok != NULL && n < MAX_LIST;
         tok = strtok_r(NULL, ",", &save)) {
        long v = strtol(tok, &end, 10);

        if (*end != '\0' || v < 0 || v > 1 << 28) {
            if (mt_rank == 0) {
                fprintf(stderr, "osc_lat: invalid size '%s'\n", tok);
            }
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        sizes[n++] = (v < 8) ? 8 : (size_t)v;
    }
    free(copy);
    return n;
}

typedef enum { T_PUT, T_GET, T_FOP } test_t;

/* Bytes 8.. of a transfer: the pattern both ranks filled in (the first 8 vary). */
static void check_tail(const char *what, const unsigned char *p, size_t size)
{
    size_t j;

    for (j = 8; j < size; j++) {
        if (p[j] != mt_pattern_byte(11, size, (unsigned)size, j)) {
            mt_fail("%s: byte %zu is 0x%02x, expected 0x%02x", what, j, p[j],
                    mt_pattern_byte(11, size, (unsigned)size, j));
            return;
        }
    }
}

static const char *const test_names[] = {"put", "get", "fop"};

/* One test at one size: rank 0 times it, both ranks check. */
static void run(ow_win_t *w, test_t test, size_t size, int iters, int warmup)
{
    unsigned char *buf = mt_malloc(size);
    long first = 0, one = 1, got = -1, bad = 0;
    double start = 0;
    char what[96];
    int i;

    mt_step("osc_lat %s of %zu B, %d iterations", test_names[test], size, iters);
    if (mt_rank == 1) {
        mt_fill(w->base, size, 11, (unsigned)size);
        if (test == T_GET) {
            memcpy(w->base, &size, sizeof(size));   /* the first word every get checks */
        } else if (test == T_FOP) {
            memset(w->base, 0, sizeof(long));
        }
    }
    if (test == T_GET) {
        memset(buf, MT_POISON, size);   /* what the gets bring is checked at the end */
    } else {
        mt_fill(buf, size, 11, (unsigned)size);
    }
    MT_MPI(MPI_Win_sync(w->win));
    MPI_Barrier(MPI_COMM_WORLD);
    if (mt_rank == 0) {
        for (i = -warmup; i < iters; i++) {
            if (i == 0) {
                start = MPI_Wtime();
            }
            switch (test) {
            case T_PUT:
                memcpy(buf, &i, sizeof(i));
                MPI_Put(buf, (int)size, MPI_BYTE, 1, 0, (int)size, MPI_BYTE, w->win);
                MPI_Win_flush(1, w->win);
                break;
            case T_GET:
                memset(buf, 0, sizeof(size_t));
                MPI_Get(buf, (int)size, MPI_BYTE, 1, 0, (int)size, MPI_BYTE, w->win);
                MPI_Win_flush(1, w->win);
                memcpy(&first, buf, sizeof(first));
                bad += (first != (long)size);
                break;
            case T_FOP:
                MPI_Fetch_and_op(&one, &got, MPI_LONG, 1, 0, MPI_SUM, w->win);
                MPI_Win_flush(1, w->win);
                bad += (got != i + warmup);
                break;
            }
        }
        if (iters > 0) {
            printf("RESULT test=osc_%s size=%zu iters=%d latency_us=%.3f\n", test_names[test],
                   (test == T_FOP) ? sizeof(long) : size, iters,
                   (MPI_Wtime() - start) * 1e6 / iters);
        }
        MT_CHECK(bad == 0, "osc_lat %s of %zu B: %ld of %d results wrong", test_names[test],
                 size, bad, iters + warmup);
        if (test == T_GET) {
            snprintf(what, sizeof(what), "osc_lat: the last MPI_Get of %zu B", size);
            check_tail(what, buf, size);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MT_MPI(MPI_Win_sync(w->win));
    if (mt_rank == 1 && test == T_PUT) {
        int last = iters - 1;

        snprintf(what, sizeof(what), "osc_lat: the last MPI_Put of %zu B", size);
        MT_CHECK(memcmp(w->base, &last, sizeof(last)) == 0, "%s: iteration number %d, "
                 "expected %d", what, *(int *)w->base, last);
        check_tail(what, w->base, size);
    }
    if (mt_rank == 1 && test == T_FOP) {
        long count;

        memcpy(&count, w->base, sizeof(count));
        MT_CHECK(count == iters + warmup, "osc_lat fop: the counter is %ld, expected %d", count,
                 iters + warmup);
    }
    free(buf);
}

int main(int argc, char **argv)
{
    size_t sizes[MAX_LIST], max = 8;
    const char *tests;
    int nsizes, iters, warmup, t, s;
    ow_win_t w;

    mt_init(&argc, &argv, "osc_lat", 2, 120);
    iters = mt_arg_int(argc, argv, "-n", 10000);
    warmup = mt_arg_int(argc, argv, "-w", 1000);
    nsizes = parse_sizes(mt_arg_str(argc, argv, "-s", "8"), sizes);
    tests = mt_arg_str(argc, argv, "-t", "put,get,fop");
    for (s = 0; s < nsizes; s++) {
        max = (sizes[s] > max) ? sizes[s] : max;
    }
    ow_open(&w, OW_CREATE, max);
    if (w.ok) {
        MT_MPI(MPI_Win_lock_all(0, w.win));
        for (t = T_PUT; t <= T_FOP; t++) {
            if (strstr(tests, test_names[t]) == NULL) {
                continue;
            }
            for (s = 0; s < nsizes; s++) {
                if (t != T_FOP || s == 0) {
                    run(&w, (test_t)t, sizes[s], iters, warmup);
                }
            }
        }
        MT_MPI(MPI_Win_unlock_all(w.win));
    }
    ow_close(&w);
    return mt_finish();
}
