/*
 * MPI one-sided operations under active target synchronisation with
 * MPI_Win_fence, on windows from MPI_Win_create, MPI_Win_allocate and
 * MPI_Win_create_dynamic + MPI_Win_attach (osc_ops.h lists the checks: put
 * and get of 1 B to 1 MiB, vectors, accumulate, get_accumulate,
 * fetch_and_op, compare_and_swap, each against a reference). Also: fence
 * assertions (MPI_MODE_NOPRECEDE, MPI_MODE_NOSTORE, MPI_MODE_NOSUCCEED)
 * around a put and, in the next epoch, a get of the same bytes back.
 *   osc_fence [-f create,allocate,dynamic]
 */
#include "osc_ops.h"

static void fence_open(MPI_Win win)
{
    MT_MPI(MPI_Win_fence(0, win));
}

static void fence_close(MPI_Win win)
{
    MT_MPI(MPI_Win_fence(0, win));
}

static const oo_sync_t fence_sync = {"fence", fence_open, oo_noop, oo_noop, fence_close};

/* A put into the right neighbour and, in the next epoch, a get of it back,
 * with the assertions each fence may make. */
static void fence_assertions(ow_win_t *w)
{
    int right = (mt_rank + 1) % mt_size;
    unsigned char src[256], dst[256];
    char what[160];

    mt_step("%s: fence assertions", ow_flavor_names[w->flavor]);
    mt_fill(src, sizeof(src), 400u + (unsigned)mt_rank, 4);
    memset(w->base, MT_POISON, sizeof(src));
    memset(dst, MT_POISON, sizeof(dst));
    MT_MPI(MPI_Win_fence(MPI_MODE_NOPRECEDE, w->win));
    MT_MPI(MPI_Put(src, (int)sizeof(src), MPI_BYTE, right, ow_disp(w, right, 0),
                   (int)sizeof(src), MPI_BYTE, w->win));
    MT_MPI(MPI_Win_fence(MPI_MODE_NOSTORE, w->win));
    MT_MPI(MPI_Get(dst, (int)sizeof(dst), MPI_BYTE, right, ow_disp(w, right, 0),
                   (int)sizeof(dst), MPI_BYTE, w->win));
    MT_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED | MPI_MODE_NOPUT, w->win));
    snprintf(what, sizeof(what), "fence/%s: MPI_Get of what rank %d put into rank %d",
             ow_flavor_names[w->flavor], mt_rank, right);
    mt_check_pattern(what, dst, sizeof(dst), 400u + (unsigned)mt_rank, 4);
}

/* Everything, on one window. */
static void run(ow_win_t *w)
{
    oo_ctx_t c;

    oo_ctx_init(&c, w, &fence_sync);
    oo_run_all(&c, 1);
    fence_assertions(w);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "osc_fence", 2, 30);
    ow_for_each_flavor(argc, argv, OO_WIN_SIZE, run);
    return mt_finish();
}
