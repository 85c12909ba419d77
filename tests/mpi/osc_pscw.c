/*
 * MPI one-sided operations under generalized active target synchronisation
 * (MPI_Win_post / MPI_Win_start / MPI_Win_complete / MPI_Win_wait), on
 * windows from MPI_Win_create, MPI_Win_allocate and MPI_Win_create_dynamic:
 *   - the checks of osc_ops.h with every rank exposing its window to all
 *     and accessing all (1 MiB transfers included);
 *   - neighbour groups: each rank exposes to its left neighbour only and
 *     accesses its right one (put, get, accumulate in one epoch), once with
 *     MPI_MODE_NOCHECK after a barrier that orders post before start;
 *   - the exposure epoch ends only when the origin completed: MPI_Win_test
 *     is false while the origin holds its epoch open (it waits for a message
 *     from the target), and true afterwards with the origin's data in place.
 *   osc_pscw [-f create,allocate,dynamic]
 */
#include "osc_ops.h"

static MPI_Group world_group;

static void pscw_open(MPI_Win win)
{
    MT_MPI(MPI_Win_post(world_group, 0, win));
    MT_MPI(MPI_Win_start(world_group, 0, win));
}

static void pscw_close(MPI_Win win)
{
    MT_MPI(MPI_Win_complete(win));
    MT_MPI(MPI_Win_wait(win));
}

static const oo_sync_t pscw_sync = {"pscw", pscw_open, oo_noop, oo_noop, pscw_close};

static MPI_Group group_of(int rank)
{
    MPI_Group g;

    MPI_Group_incl(world_group, 1, &rank, &g);
    return g;
}

/* Expose to the left neighbour, access the right one. */
static void neighbours(ow_win_t *w, int nocheck)
{
    enum { SZ = 8192 };
    int right = (mt_rank + 1) % mt_size, left = (mt_rank + mt_size - 1) % mt_size;
    MPI_Group from = group_of(left), to = group_of(right);
    unsigned char *src = mt_malloc(SZ), *dst = mt_malloc(SZ);
    long add = 3L << 33, sum;
    char what[160];

    mt_step("%s: PSCW with neighbour groups%s", ow_flavor_names[w->flavor],
            nocheck ? ", MPI_MODE_NOCHECK" : "");
    mt_fill(src, SZ, 800u + (unsigned)mt_rank, 8);
    mt_fill(w->base + SZ, SZ, 900u + (unsigned)mt_rank, 9);
    memset(w->base, MT_POISON, SZ);
    memset(dst, MT_POISON, SZ);
    sum = 7;
    memcpy(w->base + 2 * SZ, &sum, sizeof(sum));
    MT_MPI(MPI_Win_post(from, nocheck ? MPI_MODE_NOCHECK : 0, w->win));
    if (nocheck) {
        MT_MPI(MPI_Barrier(MPI_COMM_WORLD));   /* every post before any start */
    }
    MT_MPI(MPI_Win_start(to, nocheck ? MPI_MODE_NOCHECK : 0, w->win));
    MT_MPI(MPI_Put(src, SZ, MPI_BYTE, right, ow_disp(w, right, 0), SZ, MPI_BYTE, w->win));
    MT_MPI(MPI_Get(dst, SZ, MPI_BYTE, right, ow_disp(w, right, SZ), SZ, MPI_BYTE, w->win));
    MT_MPI(MPI_Accumulate(&add, 1, MPI_LONG, right, ow_disp(w, right, 2 * SZ), 1, MPI_LONG,
                          MPI_SUM, w->win));
    MT_MPI(MPI_Win_complete(w->win));
    MT_MPI(MPI_Win_wait(w->win));
    snprintf(what, sizeof(what), "pscw/%s: MPI_Put from the left neighbour (%d)%s",
             ow_flavor_names[w->flavor], left, nocheck ? " with MPI_MODE_NOCHECK" : "");
    mt_check_pattern(what, w->base, SZ, 800u + (unsigned)left, 8);
    snprintf(what, sizeof(what), "pscw/%s: MPI_Get from the right neighbour (%d)%s",
             ow_flavor_names[w->flavor], right, nocheck ? " with MPI_MODE_NOCHECK" : "");
    mt_check_pattern(what, dst, SZ, 900u + (unsigned)right, 9);
    memcpy(&sum, w->base + 2 * SZ, sizeof(sum));
    MT_CHECK(sum == 7 + add, "pscw/%s: MPI_Accumulate from the left neighbour: %#lx, "
             "expected %#lx", ow_flavor_names[w->flavor], (unsigned long)sum,
             (unsigned long)(7 + add));
    MPI_Group_free(&from);
    MPI_Group_free(&to);
    free(src);
    free(dst);
}

/* Pairs (even origin, odd target): the target's MPI_Win_test stays false
 * until the origin, which waits for the target's go, completes. */
static void wait_for_complete(ow_win_t *w)
{
    enum { SZ = 65536 };
    int peer = mt_rank ^ 1, flag = 1, go = 1, tests = 0;
    unsigned char *src = mt_malloc(SZ);
    MPI_Group g;
    char what[160];

    if (peer >= mt_size) {      /* odd size: the last rank sits out */
        free(src);
        return;
    }
    g = group_of(peer);
    mt_step("%s: MPI_Win_test before and after the origin's complete",
            ow_flavor_names[w->flavor]);
    if (mt_rank % 2 == 0) {
        mt_fill(src, SZ, 1000u + (unsigned)mt_rank, 10);
        MT_MPI(MPI_Win_start(g, 0, w->win));
        MT_MPI(MPI_Put(src, SZ, MPI_BYTE, peer, ow_disp(w, peer, 0), SZ, MPI_BYTE, w->win));
        MT_MPI(MPI_Recv(&go, 1, MPI_INT, peer, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        MT_MPI(MPI_Win_complete(w->win));
    } else {
        memset(w->base, MT_POISON, SZ);
        MT_MPI(MPI_Win_post(g, 0, w->win));
        MT_MPI(MPI_Win_test(w->win, &flag));
        MT_CHECK(!flag, "pscw/%s: MPI_Win_test true before the origin (rank %d) completed",
                 ow_flavor_names[w->flavor], peer);
        MT_MPI(MPI_Send(&go, 1, MPI_INT, peer, 77, MPI_COMM_WORLD));
        while (!flag) {
            MT_MPI(MPI_Win_test(w->win, &flag));
            mt_poll_deadline("MPI_Win_test after the origin's go");
            tests++;
        }
        snprintf(what, sizeof(what), "pscw/%s: MPI_Put of rank %d seen after MPI_Win_test "
                 "(%d calls)", ow_flavor_names[w->flavor], peer, tests);
        mt_check_pattern(what, w->base, SZ, 1000u + (unsigned)peer, 10);
    }
    MPI_Group_free(&g);
    free(src);
}

/* Everything, on one window. */
static void run(ow_win_t *w)
{
    oo_ctx_t c;

    oo_ctx_init(&c, w, &pscw_sync);
    oo_run_all(&c, 1);
    neighbours(w, 0);
    neighbours(w, 1);
    wait_for_complete(w);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "osc_pscw", 2, 30);
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    ow_for_each_flavor(argc, argv, OO_WIN_SIZE, run);
    MPI_Group_free(&world_group);
    return mt_finish();
}
