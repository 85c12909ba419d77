/*
 * SHMEM latency and bandwidth from PE 0 to PE 1, for contrib/bench/shmem_compare.sh.
 * OpenSHMEM 1.4 calls only, so that both Sandia OpenSHMEM's and Open MPI's
 * oshcc build it:
 *
 *   shmem_lat [-t put_lat,get_lat,fadd_lat,put_bw] [-s 8,4k,64k,1m] [-n iters] [-W window]
 *
 *   put_lat   shmem_putmem, then shmem_quiet, one after the other: the time of
 *             a put until it is visible at the target (the streaming put
 *             latency of SOS's shmem_latency_put_perf)
 *   get_lat   shmem_getmem, one after the other
 *   fadd_lat  shmem_atomic_fetch_add of 1 on a long (8 B; other sizes ignored)
 *   put_bw    windows of -W shmem_putmem_nbi, each ended by shmem_quiet;
 *             MB/s = 1e6 bytes per second
 *
 * PE 0 runs every test while PE 1 waits in shmem_barrier_all (its memory is
 * the target). -n is the iteration count up to 4 KiB (default 100000),
 * proportionally fewer above (at least 20); a tenth of them, at least one,
 * warm up first. PE 0 prints one line per test and size:
 *
 *   RESULT test=put_lat size=8 iters=100000 latency_us=X bandwidth_MBps=Y
 *
 * Checked, failing the run (exit 1) with a line saying what differed: PE 1
 * holds the last put's bytes, PE 0 the last get's, and every fetch-add
 * returned the count of adds before it.
 */
#define _GNU_SOURCE
#include <shmem.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SHL_MAX_SIZES  32

typedef enum { SHL_PUT_LAT, SHL_GET_LAT, SHL_FADD_LAT, SHL_PUT_BW, SHL_TESTS } shl_test_t;

static const char *const shl_names[SHL_TESTS] = {"put_lat", "get_lat", "fadd_lat", "put_bw"};

static long shl_counter;    /* symmetric: the fetch-add target */
static int  shl_failed;     /* symmetric: PE 1's verdict on the put data */

static double shl_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void shl_usage_exit(const char *why, const char *what)
{
    if (shmem_my_pe() == 0) {
        fprintf(stderr, "shmem_lat: %s '%s'\n"
                "usage: shmem_lat [-t put_lat,get_lat,fadd_lat,put_bw] [-s 8,4k,64k,1m] "
                "[-n iters] [-W window]\n", why, what);
    }
    shmem_finalize();
    exit(2);
}

/* "8", "4k", "1m" -> bytes; 0 for anything else. */
static size_t shl_bytes(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);

    if (end == s) {
        return 0;
    }
    if ((*end == 'k') || (*end == 'K')) {
        v <<= 10;
        ++end;
    } else if ((*end == 'm') || (*end == 'M')) {
        v <<= 20;
        ++end;
    }
    return (*end == '\0') ? (size_t)v : 0;
}

/* The iteration count of a size: n up to 4 KiB, proportionally fewer above, at least 20. */
static long shl_iters(long n, size_t size)
{
    long it = (size <= 4096) ? n : (long)((double)n * 4096 / (double)size);

    return (it < 20) ? 20 : it;
}

/* The byte a put or get of this round carries at offset i. */
static unsigned char shl_pattern(size_t i, long round)
{
    return (unsigned char)((i * 7 + (size_t)round) & 0xff);
}

static void shl_fill(unsigned char *buf, size_t size, long round)
{
    size_t i;

    for (i = 0; i < size; ++i) {
        buf[i] = shl_pattern(i, round);
    }
}

/* The first offset where buf differs from the pattern, or -1. */
static long shl_mismatch(const unsigned char *buf, size_t size, long round)
{
    size_t i;

    for (i = 0; i < size; ++i) {
        if (buf[i] != shl_pattern(i, round)) {
            return (long)i;
        }
    }
    return -1;
}

/* Puts of size in windows of window, each ended by a quiet: count puts in all. */
static void shl_put_windows(unsigned char *src, unsigned char *dst, size_t size, long count,
                            long window)
{
    long i;

    for (i = 0; i < count; ++i) {
        shmem_putmem_nbi(dst, src, size, 1);
        if (((i + 1) % window == 0) || (i + 1 == count)) {
            shmem_quiet();
        }
    }
}

/* One test at one size on PE 0 (PE 1 waits in the barriers): seconds for the timed part;
 * *bad counts fetch-adds that returned a wrong count. */
static double shl_run(shl_test_t test, unsigned char *src, unsigned char *dst, size_t size,
                      long iters, long warmup, long window, int *bad)
{
    double start = 0;
    long i;

    *bad = 0;
    if (shmem_my_pe() != 0) {
        return 0;
    }
    if (test == SHL_PUT_BW) {
        shl_put_windows(src, dst, size, warmup, window);
        start = shl_now();
        shl_put_windows(src, dst, size, iters, window);
        return shl_now() - start;
    }
    for (i = -warmup; i < iters; ++i) {
        if (i == 0) {
            start = shl_now();
        }
        switch (test) {
        case SHL_PUT_LAT:
            shmem_putmem(dst, src, size, 1);
            shmem_quiet();
            break;
        case SHL_GET_LAT:
            shmem_getmem(dst, src, size, 1);
            break;
        default:
            if (shmem_atomic_fetch_add(&shl_counter, 1, 1) != i + warmup) {
                ++*bad;
            }
            break;
        }
    }
    return shl_now() - start;
}

int main(int argc, char **argv)
{
    size_t sizes[SHL_MAX_SIZES], max_size = 8, size;
    int tests[SHL_TESTS] = {1, 1, 1, 1}, nsizes = 0, opt, t, s, bad, failures = 0;
    long n = 100000, window = 64, iters, warmup, round = 0, at;
    unsigned char *src, *dst;
    char name[SHMEM_MAX_NAME_LEN], *list, *tok;
    int major, minor;
    double secs;

    shmem_init();
    while ((opt = getopt(argc, argv, "t:s:n:W:")) != -1) {
        switch (opt) {
        case 't':
            memset(tests, 0, sizeof(tests));
            for (list = optarg; (tok = strsep(&list, ",")) != NULL;) {
                for (t = 0; (t < SHL_TESTS) && strcmp(tok, shl_names[t]); ++t) {
                }
                if (t == SHL_TESTS) {
                    shl_usage_exit("unknown test", tok);
                }
                tests[t] = 1;
            }
            break;
        case 's':
            for (list = optarg; (tok = strsep(&list, ",")) != NULL;) {
                size = shl_bytes(tok);
                if ((size == 0) || (nsizes == SHL_MAX_SIZES)) {
                    shl_usage_exit((size == 0) ? "invalid size" : "too many sizes", tok);
                }
                sizes[nsizes++] = size;
                max_size = (size > max_size) ? size : max_size;
            }
            break;
        case 'n':
            n = strtol(optarg, &tok, 10);
            if ((*tok != '\0') || (n < 1)) {
                shl_usage_exit("invalid iteration count", optarg);
            }
            break;
        case 'W':
            window = strtol(optarg, &tok, 10);
            if ((*tok != '\0') || (window < 1)) {
                shl_usage_exit("invalid window", optarg);
            }
            break;
        default:
            shl_usage_exit("invalid option", argv[optind - 1]);
        }
    }
    if (nsizes == 0) {
        const size_t def[] = {8, 4096, 65536, 1048576};

        for (nsizes = 0; nsizes < 4; ++nsizes) {
            sizes[nsizes] = def[nsizes];
        }
        max_size = 1048576;
    }
    if (shmem_n_pes() != 2) {
        if (shmem_my_pe() == 0) {
            fprintf(stderr, "shmem_lat: runs on 2 PEs, not %d\n", shmem_n_pes());
        }
        shmem_finalize();
        return 2;
    }
    src = shmem_malloc(max_size);
    dst = shmem_malloc(max_size);
    if ((src == NULL) || (dst == NULL)) {
        fprintf(stderr, "shmem_lat: PE %d: shmem_malloc of %zu bytes failed\n", shmem_my_pe(),
                max_size);
        shmem_global_exit(1);
    }
    if (shmem_my_pe() == 0) {
        shmem_info_get_name(name);
        shmem_info_get_version(&major, &minor);
        printf("# shmem_lat: %s (OpenSHMEM %d.%d), window %ld\n", name, major, minor, window);
    }
    for (t = 0; t < SHL_TESTS; ++t) {
        for (s = 0; tests[t] && (s < nsizes); ++s) {
            size = (t == SHL_FADD_LAT) ? sizeof(long) : sizes[s];
            if ((t == SHL_FADD_LAT) && (s > 0)) {
                break;
            }
            iters  = shl_iters(n, size);
            warmup = iters / 10 + 1;
            ++round;
            /* The source of a put is PE 0's src, of a get PE 1's src: both carry the round. */
            shl_fill(src, size, round);
            memset(dst, 0, size);
            shl_counter = 0;
            shl_failed  = 0;
            shmem_barrier_all();
            secs = shl_run((shl_test_t)t, src, dst, size, iters, warmup, window, &bad);
            shmem_barrier_all();
            if (shmem_my_pe() == 1) {
                if ((t == SHL_PUT_LAT) || (t == SHL_PUT_BW)) {
                    at = shl_mismatch(dst, size, round);
                    if (at >= 0) {
                        fprintf(stderr, "shmem_lat: %s of %zu B: PE 1 holds 0x%02x at offset "
                                "%ld, the put wrote 0x%02x\n", shl_names[t], size, dst[at], at,
                                shl_pattern((size_t)at, round));
                        shl_failed = 1;
                    }
                }
            } else {
                if (t == SHL_GET_LAT) {
                    at = shl_mismatch(dst, size, round);
                    if (at >= 0) {
                        fprintf(stderr, "shmem_lat: get_lat of %zu B: got 0x%02x at offset %ld, "
                                "PE 1 holds 0x%02x\n", size, dst[at], at,
                                shl_pattern((size_t)at, round));
                        ++failures;
                    }
                }
                if (bad > 0) {
                    fprintf(stderr, "shmem_lat: fadd_lat: %d of %ld fetch-adds returned a count "
                            "other than the adds before them\n", bad, iters + warmup);
                    ++failures;
                }
                printf("RESULT test=%s size=%zu iters=%ld latency_us=%.3f bandwidth_MBps=%.1f\n",
                       shl_names[t], size, iters, secs * 1e6 / (double)iters,
                       (double)size * (double)iters / secs / 1e6);
                fflush(stdout);
            }
            shmem_barrier_all();
            if (shmem_my_pe() == 0) {
                shmem_getmem(&bad, &shl_failed, sizeof(bad), 1);
                failures += bad;
            }
        }
    }
    shmem_barrier_all();
    shmem_free(dst);
    shmem_free(src);
    shmem_finalize();
    return (failures > 0) ? 1 : 0;
}
