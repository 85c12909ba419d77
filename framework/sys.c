/* Operating-system helpers: host identity, unique ids, time, hashing. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "sys.h"

uint64_t axon_sys_hash64(const void *buf, size_t len, uint64_t seed)
{
    const unsigned char *p = buf;
    uint64_t h = 0xcbf29ce484222325ull ^ seed;
    size_t i;

    for (i = 0; i < len; ++i) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static size_t axon_sys_read_file(const char *path, char *buf, size_t max)
{
    ssize_t n;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0) {
        return 0;
    }
    n = read(fd, buf, max);
    close(fd);
    return (n > 0) ? (size_t)n : 0;
}

uint64_t axon_sys_host_id(void)
{
    /* The boot id changes on every boot, so two hosts cloned from one image
     * (same hostname) still differ; the hostname separates containers that
     * share a kernel but not /dev/shm only when their hostnames differ. */
    char buf[256];
    size_t n;
    uint64_t h;

    n = axon_sys_read_file("/proc/sys/kernel/random/boot_id", buf, sizeof(buf));
    h = axon_sys_hash64(buf, n, 0);
    if (gethostname(buf, sizeof(buf)) == 0) {
        buf[sizeof(buf) - 1] = '\0';
        h = axon_sys_hash64(buf, strlen(buf), h);
    }
    return h;
}

double axon_sys_time_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t axon_sys_generate_uuid(void)
{
    static uint64_t counter;
    struct timespec ts;
    uint64_t seed[4];
    unsigned char rnd[8] = {0};

    axon_sys_read_file("/dev/urandom", (char *)rnd, sizeof(rnd));
    clock_gettime(CLOCK_REALTIME, &ts);
    seed[0] = axon_sys_host_id();
    seed[1] = ((uint64_t)getpid() << 32) ^ (uint64_t)__atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    seed[2] = ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)ts.tv_nsec;
    memcpy(&seed[3], rnd, sizeof(seed[3]));
    return axon_sys_hash64(seed, sizeof(seed), 0x5bd1e995ull);
}

char *axon_sys_dso_dir(const void *addr)
{
    Dl_info info;
    char *dir, *slash;

    if ((dladdr(addr, &info) == 0) || (info.dli_fname == NULL)) {
        return NULL;
    }
    dir = strdup(info.dli_fname);
    if (dir == NULL) {
        return NULL;
    }
    slash = strrchr(dir, '/');
    if (slash == NULL) {
        free(dir);
        return NULL;
    }
    *slash = '\0';
    return dir;
}
