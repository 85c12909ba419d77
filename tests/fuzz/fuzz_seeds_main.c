/*
 * fuzz_seeds DIR [HARNESS...]: writes each harness's seeds, made by Axon
 * itself (fuzz_seeds.c), to DIR/<harness>/seed-<n>; all harnesses without
 * names. tests/fuzz/run_fuzzers.sh starts every fuzzer from them.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include "fuzz.h"

typedef struct {
    char     dir[4096];
    unsigned count;
    int      failed;
} axon_fuzz_seed_dir_t;

static int axon_fuzz_seed_write(const void *data, size_t size, void *arg)
{
    axon_fuzz_seed_dir_t *out = arg;
    char path[4200];
    FILE *file;

    snprintf(path, sizeof(path), "%s/seed-%u", out->dir, out->count++);
    file = fopen(path, "wb");
    if ((file == NULL) || (fwrite(data, 1, size, file) != size) || (fclose(file) != 0)) {
        fprintf(stderr, "fuzz_seeds: cannot write %s: %s\n", path, strerror(errno));
        out->failed = 1;
        return 1;
    }
    return 0;
}

static int axon_fuzz_seeds_write(const char *top, const axon_fuzz_harness_t *h)
{
    axon_fuzz_seed_dir_t out = {.count = 0, .failed = 0};

    snprintf(out.dir, sizeof(out.dir), "%s/%s", top, h->name);
    if ((mkdir(out.dir, 0755) != 0) && (errno != EEXIST)) {
        fprintf(stderr, "fuzz_seeds: cannot create %s: %s\n", out.dir, strerror(errno));
        return 1;
    }
    if ((h->seeds(axon_fuzz_seed_write, &out) != 0) || out.failed || (out.count == 0)) {
        fprintf(stderr, "fuzz_seeds: %s: no seeds made\n", h->name);
        return 1;
    }
    printf("%s: %u seeds in %s\n", h->name, out.count, out.dir);
    return 0;
}

int main(int argc, char **argv)
{
    int failed = 0, i;
    unsigned k;

    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR [HARNESS...]\n", argv[0]);
        return 2;
    }
    if ((mkdir(argv[1], 0755) != 0) && (errno != EEXIST)) {
        fprintf(stderr, "fuzz_seeds: cannot create %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    for (k = 0; k < axon_fuzz_num_harnesses; ++k) {
        int wanted = (argc == 2);

        for (i = 2; i < argc; ++i) {
            wanted |= !strcmp(argv[i], axon_fuzz_harnesses[k].name);
        }
        if (wanted) {
            failed |= axon_fuzz_seeds_write(argv[1], &axon_fuzz_harnesses[k]);
        }
    }
    return failed;
}
