/*
 * Shared by the MPI test programs of tests/mpi: a time limit, checks that
 * print one line naming what differed, patterned buffers, and the exit
 * status that all ranks agree on.
 *
 * A program calls mt_init(), runs its checks with MT_CHECK() and returns
 * mt_finish(): 0 only when every rank verified everything. A rank that is
 * still running when its time is up says so and aborts the whole job
 * (MPI_Abort), so that a lost message never hangs the test suite.
 */
#ifndef AXON_TESTS_MPI_CHECK_H
#define AXON_TESTS_MPI_CHECK_H

#define _GNU_SOURCE
#include <mpi.h>

#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Lines printed per rank before the rest are only counted: a broken
 * transport fails thousands of checks the same way. */
#define MT_MAX_LINES 20

static int mt_rank, mt_size, mt_failures;
static volatile sig_atomic_t mt_initialized;   /* MPI_Init returned */
static const char *mt_prog = "mpi";
static double mt_deadline;
/* What the rank is doing, for the timeout message (set by mt_step). */
static char mt_where[160] = "MPI_Init";

static inline void mt_step(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void mt_step(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(mt_where, sizeof(mt_where), fmt, ap);
    va_end(ap);
}

static void mt_timeout_handler(int sig)
{
    static volatile sig_atomic_t again;
    char msg[320];
    int len;

    (void)sig;
    if (again) {
        _exit(3);               /* MPI_Abort itself hung */
    }
    again = 1;
    len = snprintf(msg, sizeof(msg), "%s: rank %d: FAIL timeout: still in '%s' "
                   "after its time limit, aborting\n", mt_prog, mt_rank, mt_where);
    if (write(2, msg, (size_t)len) < 0) {
        /* nothing more to say */
    }
    if (!mt_initialized) {
        _exit(3);               /* MPI_Abort is not allowed before MPI_Init */
    }
    alarm(5);
    MPI_Abort(MPI_COMM_WORLD, 3);
    _exit(3);
}

/* MPI_Init_thread asking for @required (or MPI_Init when @provided is NULL),
 * rank and size, and a time limit of @seconds for the whole run
 * (MPI_TEST_TIME_LIMIT=seconds in the environment replaces it). */
static inline void mt_init_thread(int *argc, char ***argv, const char *prog, int need_ranks,
                                  unsigned seconds, int required, int *provided)
{
    const char *limit = getenv("MPI_TEST_TIME_LIMIT");
    struct sigaction sa;

    if (limit != NULL && atoi(limit) > 0) {
        seconds = (unsigned)atoi(limit);
    }
    mt_prog = prog;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = mt_timeout_handler;
    sa.sa_flags = SA_NODEFER;   /* the second alarm must reach a hung handler */
    sigaction(SIGALRM, &sa, NULL);
    alarm(seconds);

    if (provided != NULL) {
        MPI_Init_thread(argc, argv, required, provided);
    } else {
        MPI_Init(argc, argv);
    }
    mt_initialized = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &mt_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mt_size);
    mt_step("%s", "the test");
    mt_deadline = MPI_Wtime() + seconds;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (mt_size < need_ranks) {
        if (mt_rank == 0) {
            fprintf(stderr, "%s: FAIL needs at least %d ranks, got %d\n", prog,
                    need_ranks, mt_size);
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

static inline void mt_init(int *argc, char ***argv, const char *prog, int need_ranks,
                           unsigned seconds)
{
    mt_init_thread(argc, argv, prog, need_ranks, seconds, MPI_THREAD_SINGLE, NULL);
}

/* For polling loops (MPI_Test, MPI_Iprobe): abort when the time is up. */
static inline void mt_poll_deadline(const char *what)
{
    if (MPI_Wtime() > mt_deadline) {
        fprintf(stderr, "%s: rank %d: FAIL timeout while %s\n", mt_prog, mt_rank, what);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
}

static inline void mt_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void mt_fail(const char *fmt, ...)
{
    va_list ap;

    /* atomic: threads.c fails checks from several threads */
    if (__atomic_add_fetch(&mt_failures, 1, __ATOMIC_RELAXED) > MT_MAX_LINES) {
        return;
    }
    fprintf(stderr, "%s: rank %d: FAIL ", mt_prog, mt_rank);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* MT_CHECK(cond, "what differed", args...): one line when cond is false. */
#define MT_CHECK(_cond, ...) \
    do { \
        if (!(_cond)) { \
            mt_fail(__VA_ARGS__); \
        } \
    } while (0)

/* An MPI call that must succeed (error handler MPI_ERRORS_RETURN or not). */
#define MT_MPI(_call) \
    do { \
        int _rc = (_call); \
        if (_rc != MPI_SUCCESS) { \
            char _s[MPI_MAX_ERROR_STRING]; \
            int _l = 0; \
            MPI_Error_string(_rc, _s, &_l); \
            mt_fail("%s returned %d (%s)", #_call, _rc, _s); \
        } \
    } while (0)

/* The byte at @offset of message (@seed, @size, @iter): every size, iteration
 * and direction gets a different pattern, so a stale or misrouted buffer
 * shows. */
static inline unsigned char mt_pattern_byte(unsigned seed, size_t size, unsigned iter,
                                            size_t offset)
{
    uint32_t x = (uint32_t)(offset * 2654435761u) ^ (seed * 40503u) ^
                 (uint32_t)(size * 97u) ^ (iter * 7919u);
    return (unsigned char)(x ^ (x >> 11) ^ (x >> 23));
}

static inline void mt_fill(void *buf, size_t size, unsigned seed, unsigned iter)
{
    unsigned char *p = buf;
    size_t i;

    for (i = 0; i < size; i++) {
        p[i] = mt_pattern_byte(seed, size, iter, i);
    }
}

/* Index of the first byte that differs from the pattern, or -1. */
static inline long mt_verify(const void *buf, size_t size, unsigned seed, unsigned iter)
{
    const unsigned char *p = buf;
    size_t i;

    for (i = 0; i < size; i++) {
        if (p[i] != mt_pattern_byte(seed, size, iter, i)) {
            return (long)i;
        }
    }
    return -1;
}

/* Checks @buf against the pattern; names the first differing byte. */
static inline void mt_check_pattern(const char *what, const void *buf, size_t size,
                                    unsigned seed, unsigned iter)
{
    long bad = mt_verify(buf, size, seed, iter);

    MT_CHECK(bad < 0, "%s: byte %ld of %zu is 0x%02x, expected 0x%02x", what, bad, size,
             bad < 0 ? 0 : ((const unsigned char *)buf)[bad],
             bad < 0 ? 0 : mt_pattern_byte(seed, size, iter, (size_t)bad));
}

/* Receive buffers are poisoned so that bytes never written show. */
#define MT_POISON 0xa5

static inline void mt_check_poison(const char *what, const void *buf, size_t from,
                                   size_t to)
{
    const unsigned char *p = buf;
    size_t i;

    for (i = from; i < to; i++) {
        if (p[i] != MT_POISON) {
            mt_fail("%s: byte %zu past the message end was overwritten (0x%02x)", what,
                    i, p[i]);
            return;
        }
    }
}

static inline void mt_check_status(const char *what, const MPI_Status *st,
                                   MPI_Datatype type, int source, int tag, int count)
{
    int got = -1;

    MPI_Get_count(st, type, &got);
    MT_CHECK(st->MPI_SOURCE == source, "%s: status.MPI_SOURCE %d, expected %d", what,
             st->MPI_SOURCE, source);
    MT_CHECK(st->MPI_TAG == tag, "%s: status.MPI_TAG %d, expected %d", what, st->MPI_TAG,
             tag);
    MT_CHECK(got == count, "%s: MPI_Get_count %d, expected %d", what, got, count);
}

static inline void mt_sleep_ms(unsigned ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

    while (nanosleep(&ts, &ts) != 0) {
    }
}

static inline void *mt_malloc(size_t size)
{
    void *p = malloc(size ? size : 1);

    if (p == NULL) {
        fprintf(stderr, "%s: rank %d: FAIL out of memory (%zu bytes)\n", mt_prog, mt_rank,
                size);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

/* The word after option @opt on the command line, @def without it. */
static inline const char *mt_arg_str(int argc, char **argv, const char *opt, const char *def)
{
    int i;

    for (i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], opt) == 0) {
            return argv[i + 1];
        }
    }
    return def;
}

/* The value after option @opt on the command line, @def without it; a value
 * that is not a number in 0 .. 2^30 ends the job (status 2), named. */
static inline int mt_arg_int(int argc, char **argv, const char *opt, int def)
{
    int i;

    for (i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], opt) == 0) {
            char *end;
            long v = strtol(argv[i + 1], &end, 10);

            if (*end != '\0' || v < 0 || v > 1 << 30) {
                if (mt_rank == 0) {
                    fprintf(stderr, "%s: invalid %s '%s'\n", mt_prog, opt, argv[i + 1]);
                }
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
            return (int)v;
        }
    }
    return def;
}

/* All ranks agree: 0 when nobody failed. Prints one summary line on rank 0. */
static inline int mt_finish(void)
{
    int total = 0;

    mt_step("%s", "the final MPI_Allreduce of the failure counts");
    MPI_Allreduce(&mt_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (mt_failures > MT_MAX_LINES) {
        fprintf(stderr, "%s: rank %d: %d more failures not shown\n", mt_prog, mt_rank,
                mt_failures - MT_MAX_LINES);
    }
    if (mt_rank == 0) {
        printf("%s: %s (%d ranks, %d failed checks)\n", mt_prog,
               total ? "FAILED" : "passed", mt_size, total);
    }
    mt_step("%s", "MPI_Finalize");
    MPI_Finalize();
    alarm(0);
    return total ? 1 : 0;
}

#endif
