/* Small operating-system helpers shared by the library and components. */
#ifndef AXON_SYS_H
#define AXON_SYS_H

#include <stdint.h>
#include <stddef.h>
#include <time.h>

#define AXON_CACHE_LINE 64

/* Identifies this host's running kernel (boot id + hostname), for shm reachability. */
uint64_t axon_sys_host_id(void);
/* A 64-bit value unique across processes and hosts, for worker ids. */
uint64_t axon_sys_generate_uuid(void);
/* Monotonic time in seconds. */
double   axon_sys_time_sec(void);

static inline uint64_t axon_sys_clock_ns(clockid_t clock)
{
    struct timespec ts;

    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Monotonic time in nanoseconds; the coarse one: read by the vDSO without a syscall, ms grain. */
#define axon_sys_time_ns()   axon_sys_clock_ns(CLOCK_MONOTONIC)
#define axon_sys_coarse_ns() axon_sys_clock_ns(CLOCK_MONOTONIC_COARSE)
/* 64-bit FNV-1a hash of a buffer. */
uint64_t axon_sys_hash64(const void *buf, size_t len, uint64_t seed);
/* Directory holding the shared object that contains addr (malloc'd), or NULL. */
char    *axon_sys_dso_dir(const void *addr);

#endif
