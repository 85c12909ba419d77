/*
 * Windows of the one-sided programs of tests/mpi (osc_*.c), in the three
 * ways MPI makes them: MPI_Win_create over memory of ours, MPI_Win_allocate
 * (memory of the MPI library's) and MPI_Win_create_dynamic + MPI_Win_attach
 * (targets addressed by absolute address). Every window has a displacement
 * unit of 1; ow_disp() turns a byte offset into a target's memory into the
 * displacement to name it by, whatever the flavor.
 */
#ifndef AXON_TESTS_MPI_OSC_WIN_H
#define AXON_TESTS_MPI_OSC_WIN_H

#include "mpi_check.h"

typedef enum {
    OW_CREATE,
    OW_ALLOCATE,
    OW_DYNAMIC,
    OW_FLAVORS
} ow_flavor_t;

static const char *const ow_flavor_names[OW_FLAVORS] = {"MPI_Win_create", "MPI_Win_allocate",
                                                        "MPI_Win_create_dynamic"};

typedef struct {
    MPI_Win        win;
    ow_flavor_t    flavor;
    unsigned char *base;        /* this rank's memory in the window */
    size_t         size;
    MPI_Aint      *disp0;       /* per rank: the displacement of its byte 0 */
    int            ok;          /* the window exists (creation may fail, checked) */
} ow_win_t;

/* A window of @size bytes per rank, of @flavor, on MPI_COMM_WORLD. Creation
 * errors are returned (MPI_ERRORS_RETURN on the communicator) and failed as
 * a check naming the call; w->ok says whether the window exists. */
static inline void ow_open(ow_win_t *w, ow_flavor_t flavor, size_t size)
{
    MPI_Aint mine = 0;
    int rc = MPI_SUCCESS;

    memset(w, 0, sizeof(*w));
    w->flavor = flavor;
    w->size   = size;
    w->win    = MPI_WIN_NULL;
    w->disp0  = mt_malloc(sizeof(MPI_Aint) * (size_t)mt_size);
    mt_step("%s of %zu B", ow_flavor_names[flavor], size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    switch (flavor) {
    case OW_CREATE:
        if (posix_memalign((void **)&w->base, 4096, size) != 0) {
            w->base = NULL;
        }
        if (w->base == NULL) {
            mt_fail("no memory for a window of %zu B", size);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        rc = MPI_Win_create(w->base, (MPI_Aint)size, 1, MPI_INFO_NULL, MPI_COMM_WORLD,
                            &w->win);
        break;
    case OW_ALLOCATE:
        rc = MPI_Win_allocate((MPI_Aint)size, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &w->base,
                              &w->win);
        break;
    default:
        w->base = mt_malloc(size);
        rc = MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &w->win);
        if (rc == MPI_SUCCESS) {
            rc = MPI_Win_attach(w->win, w->base, (MPI_Aint)size);
        }
        MPI_Get_address(w->base, &mine);
        break;
    }
    if (rc != MPI_SUCCESS) {
        char s[MPI_MAX_ERROR_STRING];
        int l = 0;

        MPI_Error_string(rc, s, &l);
        mt_fail("%s of %zu B returned %d (%s)", ow_flavor_names[flavor], size, rc, s);
    }
    w->ok = (rc == MPI_SUCCESS);
    /* every rank learns whether all windows exist: one failure skips the tests everywhere */
    MPI_Allreduce(MPI_IN_PLACE, &w->ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    MPI_Allgather(&mine, 1, MPI_AINT, w->disp0, 1, MPI_AINT, MPI_COMM_WORLD);
    if (w->ok) {
        MPI_Win_set_errhandler(w->win, MPI_ERRORS_RETURN);
    }
}

static inline MPI_Aint ow_disp(const ow_win_t *w, int rank, size_t offset)
{
    return w->disp0[rank] + (MPI_Aint)offset;
}

static inline void ow_close(ow_win_t *w)
{
    mt_step("freeing the %s window", ow_flavor_names[w->flavor]);
    if (w->win != MPI_WIN_NULL) {
        if (w->flavor == OW_DYNAMIC) {
            MT_MPI(MPI_Win_detach(w->win, w->base));
        }
        MT_MPI(MPI_Win_free(&w->win));
    }
    if (w->flavor != OW_ALLOCATE) {
        free(w->base);
    }
    free(w->disp0);
    w->base = NULL;
}

/* The window flavors named on the command line (-f create,allocate,dynamic), all by default. */
static inline int ow_flavor_wanted(int argc, char **argv, ow_flavor_t flavor)
{
    static const char *const short_names[OW_FLAVORS] = {"create", "allocate", "dynamic"};

    return strstr(mt_arg_str(argc, argv, "-f", "create,allocate,dynamic"),
                  short_names[flavor]) != NULL;
}

/* @run on a window of @size of every flavor asked for (-f, all by default)
 * that could be made; each window is freed after. */
static inline void ow_for_each_flavor(int argc, char **argv, size_t size,
                                      void (*run)(ow_win_t *w))
{
    ow_flavor_t f;
    ow_win_t w;

    for (f = 0; f < OW_FLAVORS; f++) {
        if (!ow_flavor_wanted(argc, argv, f)) {
            continue;
        }
        ow_open(&w, f, size);
        if (w.ok) {
            run(&w);
        }
        ow_close(&w);
    }
}

#endif
