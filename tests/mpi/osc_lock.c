/*
 * MPI one-sided operations under passive target synchronisation, on windows
 * from MPI_Win_create, MPI_Win_allocate and MPI_Win_create_dynamic:
 *   - the checks of osc_ops.h under MPI_Win_lock(MPI_LOCK_SHARED) /
 *     MPI_Win_unlock per target (with the 1 MiB transfers), under
 *     MPI_LOCK_EXCLUSIVE, and under MPI_Win_lock_all + MPI_Win_flush;
 *   - contention: every rank MPI_Fetch_and_op(+1)s one counter on rank 0,
 *     300 times under lock_all + flush (long) and 100 times under a shared
 *     lock each (int): the values fetched are 0 .. n-1 exactly once, each
 *     rank's increasing, and the final count exact;
 *   - exclusive locks exclude: get, flush, put + 1 of a plain counter under
 *     MPI_LOCK_EXCLUSIVE, 50 times per rank, loses no update;
 *   - MPI_Win_flush_local (and _all): the origin buffer is reused at once
 *     and the target still gets what it held at the put;
 *   - request-based operations (MPI_Rput, MPI_Rget, MPI_Raccumulate,
 *     MPI_Rget_accumulate) completed by MPI_Wait, and MPI_Win_flush_all.
 *   osc_lock [-f create,allocate,dynamic]
 */
#include "osc_ops.h"

/* Local stores to the window before the round become visible to others. */
static void passive_open(MPI_Win win)
{
    MT_MPI(MPI_Win_lock_all(0, win));
    MT_MPI(MPI_Win_sync(win));
    MT_MPI(MPI_Win_unlock_all(win));
    MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

/* Everybody's accesses completed (unlocked or flushed); the window's memory
 * seen by local loads. */
static void passive_close(MPI_Win win)
{
    MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
    MT_MPI(MPI_Win_lock_all(0, win));
    MT_MPI(MPI_Win_sync(win));
    MT_MPI(MPI_Win_unlock_all(win));
}

static void lock_shared(MPI_Win win, int target)
{
    MT_MPI(MPI_Win_lock(MPI_LOCK_SHARED, target, 0, win));
}

static void lock_exclusive(MPI_Win win, int target)
{
    MT_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, target, 0, win));
}

static void unlock(MPI_Win win, int target)
{
    MT_MPI(MPI_Win_unlock(target, win));
}

static void lock_all_open(MPI_Win win)
{
    passive_open(win);
    MT_MPI(MPI_Win_lock_all(0, win));
}

static void flush(MPI_Win win, int target)
{
    MT_MPI(MPI_Win_flush(target, win));
}

static void lock_all_close(MPI_Win win)
{
    MT_MPI(MPI_Win_unlock_all(win));
    passive_close(win);
}

static const oo_sync_t syncs[] = {
    {"lock_shared", passive_open, lock_shared, unlock, passive_close},
    {"lock_exclusive", passive_open, lock_exclusive, unlock, passive_close},
    {"lock_all+flush", lock_all_open, oo_noop, flush, lock_all_close},
};

/* Checks that @n * mt_size values gathered on rank 0 are 0 .. n * mt_size - 1, once each. */
static void check_permutation(const char *what, const long *mine, int n, long final)
{
    long total = (long)n * mt_size, *all = mt_malloc(sizeof(long) * (size_t)total);
    unsigned char *seen = mt_malloc((size_t)total);
    long i;

    MPI_Gather(mine, n, MPI_LONG, all, n, MPI_LONG, 0, MPI_COMM_WORLD);
    if (mt_rank == 0) {
        memset(seen, 0, (size_t)total);
        for (i = 0; i < total; i++) {
            if (all[i] < 0 || all[i] >= total || seen[all[i]]) {
                mt_fail("%s: rank %ld's value %ld is %ld: out of 0..%ld or seen twice", what,
                        i / n, i % n, all[i], total - 1);
                break;
            }
            seen[all[i]] = 1;
        }
        MT_CHECK(final == total, "%s: the counter ends at %ld, expected %ld", what, final,
                 total);
    }
    free(all);
    free(seen);
}

static long local_long(ow_win_t *w, size_t off)
{
    long v;

    passive_close(w->win);      /* everybody done; loads see the window */
    memcpy(&v, w->base + off, sizeof(v));
    return v;
}

static void contention(ow_win_t *w)
{
    enum { N_FLUSH = 300, N_LOCK = 100 };
    long fetched[N_FLUSH], one = 1, got;
    int one_int = 1, got_int, i, increasing = 1;
    char what[128];

    mt_step("%s: %d MPI_Fetch_and_op(+1) per rank on one counter, lock_all + flush",
            ow_flavor_names[w->flavor], N_FLUSH);
    memset(w->base, 0, 64);
    passive_open(w->win);
    MT_MPI(MPI_Win_lock_all(0, w->win));
    for (i = 0; i < N_FLUSH; i++) {
        MT_MPI(MPI_Fetch_and_op(&one, &fetched[i], MPI_LONG, 0, ow_disp(w, 0, 0), MPI_SUM,
                                w->win));
        MT_MPI(MPI_Win_flush(0, w->win));
        increasing &= (i == 0) || (fetched[i] > fetched[i - 1]);
    }
    MT_MPI(MPI_Win_unlock_all(w->win));
    MT_CHECK(increasing, "%s: the values one rank fetched from the counter do not increase",
             ow_flavor_names[w->flavor]);
    got = local_long(w, 0);
    snprintf(what, sizeof(what), "lock_all+flush/%s: MPI_Fetch_and_op(+1) on one long by all",
             ow_flavor_names[w->flavor]);
    check_permutation(what, fetched, N_FLUSH, got);

    mt_step("%s: %d MPI_Fetch_and_op(+1) on an int per rank, a shared lock each",
            ow_flavor_names[w->flavor], N_LOCK);
    passive_open(w->win);
    for (i = 0; i < N_LOCK; i++) {
        MT_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, w->win));
        MT_MPI(MPI_Fetch_and_op(&one_int, &got_int, MPI_INT, 0, ow_disp(w, 0, 8), MPI_SUM,
                                w->win));
        MT_MPI(MPI_Win_unlock(0, w->win));
        fetched[i] = got_int;
    }
    passive_close(w->win);
    memcpy(&got_int, w->base + 8, sizeof(got_int));
    snprintf(what, sizeof(what), "lock_shared/%s: MPI_Fetch_and_op(+1) on one int by all",
             ow_flavor_names[w->flavor]);
    check_permutation(what, fetched, N_LOCK, got_int);
}

/* Read, then write + 1, a counter under an exclusive lock: no update lost. */
static void exclusion(ow_win_t *w)
{
    enum { K = 50 };
    long seen[K], v = -1, next;
    char what[128];
    int i;

    mt_step("%s: get + put of a counter under MPI_LOCK_EXCLUSIVE", ow_flavor_names[w->flavor]);
    memset(w->base, 0, 64);
    passive_open(w->win);
    for (i = 0; i < K; i++) {
        MT_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, w->win));
        MT_MPI(MPI_Get(&v, 1, MPI_LONG, 0, ow_disp(w, 0, 16), 1, MPI_LONG, w->win));
        MT_MPI(MPI_Win_flush(0, w->win));
        seen[i] = v;
        next = v + 1;
        MT_MPI(MPI_Put(&next, 1, MPI_LONG, 0, ow_disp(w, 0, 16), 1, MPI_LONG, w->win));
        MT_MPI(MPI_Win_unlock(0, w->win));
    }
    snprintf(what, sizeof(what), "lock_exclusive/%s: get + put + 1 by all",
             ow_flavor_names[w->flavor]);
    check_permutation(what, seen, K, local_long(w, 16));
}

/* The origin buffer is overwritten right after MPI_Win_flush_local. */
static void flush_local(ow_win_t *w)
{
    enum { SZ = 65536, PUTS = 4 };
    int right = (mt_rank + 1) % mt_size, left = (mt_rank + mt_size - 1) % mt_size, i;
    unsigned char *buf = mt_malloc(SZ);
    char what[160];

    mt_step("%s: MPI_Win_flush_local, buffer reused", ow_flavor_names[w->flavor]);
    memset(w->base, MT_POISON, (size_t)SZ * PUTS);
    passive_open(w->win);
    MT_MPI(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, w->win));
    for (i = 0; i < PUTS; i++) {
        mt_fill(buf, SZ, 500u + (unsigned)mt_rank, (unsigned)i);
        MT_MPI(MPI_Put(buf, SZ, MPI_BYTE, right, ow_disp(w, right, (size_t)SZ * (size_t)i), SZ,
                       MPI_BYTE, w->win));
        if (i % 2 == 0) {
            MT_MPI(MPI_Win_flush_local(right, w->win));
        } else {
            MT_MPI(MPI_Win_flush_local_all(w->win));
        }
        memset(buf, 0x11, SZ);      /* must not reach the target */
    }
    MT_MPI(MPI_Win_unlock(right, w->win));
    passive_close(w->win);
    for (i = 0; i < PUTS; i++) {
        snprintf(what, sizeof(what), "%s: put %d of rank %d with MPI_Win_flush_local%s",
                 ow_flavor_names[w->flavor], i, left, (i % 2) ? "_all" : "");
        mt_check_pattern(what, w->base + (size_t)SZ * (size_t)i, SZ, 500u + (unsigned)left,
                         (unsigned)i);
    }
    free(buf);
}

/* MPI_Rput / MPI_Rget / MPI_Raccumulate / MPI_Rget_accumulate under lock_all. */
static void request_ops(ow_win_t *w)
{
    enum { SZ = 4096 };
    int right = (mt_rank + 1) % mt_size, left = (mt_rank + mt_size - 1) % mt_size;
    unsigned char *src = mt_malloc(SZ), *dst = mt_malloc(SZ);
    long add = 1L << (40 + mt_rank), old = -1, want = 0;
    MPI_Request req[2];
    char what[160];
    int r;

    mt_step("%s: request-based operations", ow_flavor_names[w->flavor]);
    mt_fill(w->base + SZ, SZ, 600u + (unsigned)mt_rank, 6);   /* for MPI_Rget */
    memset(w->base, MT_POISON, SZ);
    memset(w->base + 2 * SZ, 0, sizeof(long) * 2);
    mt_fill(src, SZ, 700u + (unsigned)mt_rank, 7);
    memset(dst, MT_POISON, SZ);
    passive_open(w->win);
    MT_MPI(MPI_Win_lock_all(0, w->win));
    MT_MPI(MPI_Rput(src, SZ, MPI_BYTE, right, ow_disp(w, right, 0), SZ, MPI_BYTE, w->win,
                    &req[0]));
    MT_MPI(MPI_Rget(dst, SZ, MPI_BYTE, right, ow_disp(w, right, SZ), SZ, MPI_BYTE, w->win,
                    &req[1]));
    MT_MPI(MPI_Waitall(2, req, MPI_STATUSES_IGNORE));
    /* MPI_Rget's completion means the data is here, with no flush */
    snprintf(what, sizeof(what), "%s: MPI_Rget of rank %d", ow_flavor_names[w->flavor], right);
    mt_check_pattern(what, dst, SZ, 600u + (unsigned)right, 6);
    memset(src, 0x22, SZ);          /* MPI_Rput completed locally: the buffer is free */
    MT_MPI(MPI_Raccumulate(&add, 1, MPI_LONG, 0, ow_disp(w, 0, 2 * SZ), 1, MPI_LONG, MPI_SUM,
                           w->win, &req[0]));
    MT_MPI(MPI_Rget_accumulate(&add, 1, MPI_LONG, &old, 1, MPI_LONG, 0,
                               ow_disp(w, 0, 2 * SZ + sizeof(long)), 1, MPI_LONG, MPI_SUM,
                               w->win, &req[1]));
    MT_MPI(MPI_Waitall(2, req, MPI_STATUSES_IGNORE));
    MT_CHECK(old >= 0 && (old & add) == 0 && (old & ((1L << 40) - 1)) == 0,
             "%s: MPI_Rget_accumulate fetched %#lx: not a sum of other ranks' addends",
             ow_flavor_names[w->flavor], (unsigned long)old);
    MT_MPI(MPI_Win_flush_all(w->win));
    MT_MPI(MPI_Win_unlock_all(w->win));
    passive_close(w->win);
    snprintf(what, sizeof(what), "%s: MPI_Rput of rank %d", ow_flavor_names[w->flavor], left);
    mt_check_pattern(what, w->base, SZ, 700u + (unsigned)left, 7);
    if (mt_rank == 0) {
        long sums[2];

        for (r = 0; r < mt_size; r++) {
            want += 1L << (40 + r);
        }
        memcpy(sums, w->base + 2 * SZ, sizeof(sums));
        MT_CHECK(sums[0] == want && sums[1] == want, "%s: MPI_Raccumulate / "
                 "MPI_Rget_accumulate sums %#lx %#lx, expected %#lx",
                 ow_flavor_names[w->flavor], (unsigned long)sums[0], (unsigned long)sums[1],
                 (unsigned long)want);
    }
    free(src);
    free(dst);
}

/* Everything, on one window: the 1 MiB transfers under the first mode. */
static void run(ow_win_t *w)
{
    oo_ctx_t c;
    size_t s;

    for (s = 0; s < sizeof(syncs) / sizeof(syncs[0]); s++) {
        oo_ctx_init(&c, w, &syncs[s]);
        oo_run_all(&c, s == 0);
    }
    contention(w);
    exclusion(w);
    flush_local(w);
    request_ops(w);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "osc_lock", 2, 30);
    ow_for_each_flavor(argc, argv, OO_WIN_SIZE, run);
    return mt_finish();
}
