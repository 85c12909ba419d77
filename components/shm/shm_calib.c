/*
 * What moving a large message costs on this machine, measured once per
 * process. The rendezvous choice (api/core/endpoint.c) weighs copying a message
 * through the ring (a copy on each side) against one process_vm_readv, and
 * the answer depends on the machine more than on the size: the kernel pins
 * every page it reads, which on some virtual machines runs at a fifth of
 * memcpy's speed, so a fixed estimate chose the slower protocol there.
 * memcpy is timed twice: a 1 MiB copy runs from the cache the cores (and on
 * a shared host, other machines) share, a 64 KiB one from the core's own;
 * the threshold is chosen among messages of the second kind, and judged by
 * the first it put 64 KiB messages on the get, 3x slower, on a busy host.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#include "shm.h"
#include "sys.h"

/* Large enough to leave the per-call cost behind, small enough to stay cheap (~0.5 ms in all). */
#define AXON_SHM_CALIB_LARGE  (1024 * 1024)
#define AXON_SHM_CALIB_SMALL  4096
/* A message the rendezvous threshold is chosen for: its copies stay in a core's own cache. */
#define AXON_SHM_CALIB_CACHED (64 * 1024)
#define AXON_SHM_CALIB_REPS   5

/* What this process measured; 0 where nothing was. */
static struct {
    double copy_MBps;         /* memcpy of a large buffer */
    double copy_cached_MBps;  /* and of one that stays in cache */
    double get_overhead_ns;   /* process_vm_readv: per call */
    double get_MBps;          /* and per byte */
} axon_shm_costs;
static pthread_once_t   axon_shm_costs_once = PTHREAD_ONCE_INIT;

/* Best of a few runs: a run the scheduler interrupted says nothing about the machine. */
static double axon_shm_calib_copy(void *dst, const void *src, size_t length)
{
    double best = 0, t;
    int i;

    for (i = 0; i < AXON_SHM_CALIB_REPS; ++i) {
        t = axon_sys_time_sec();
        memcpy(dst, src, length);
        __asm__ __volatile__("" ::: "memory");  /* keep the copy */
        t = axon_sys_time_sec() - t;
        best = ((i == 0) || (t < best)) ? t : best;
    }
    return best;
}

/* process_vm_readv of our own memory: the kernel path a peer's get takes. <0 if refused. */
static double axon_shm_calib_get(void *dst, void *src, size_t length)
{
    struct iovec local = {dst, length}, remote = {src, length};
    pid_t self = getpid();
    double best = 0, t;
    int i;

    for (i = 0; i < AXON_SHM_CALIB_REPS; ++i) {
        t = axon_sys_time_sec();
        if (process_vm_readv(self, &local, 1, &remote, 1, 0) != (ssize_t)length) {
            return -1;
        }
        t = axon_sys_time_sec() - t;
        best = ((i == 0) || (t < best)) ? t : best;
    }
    return best;
}

static void axon_shm_calibrate_once(void)
{
    const size_t large = AXON_SHM_CALIB_LARGE, small = AXON_SHM_CALIB_SMALL;
    double copy, get_large, get_small;
    uint8_t *src, *dst;

    src = aligned_alloc(4096, 2 * large);
    if (src == NULL) {
        return;  /* nothing measured: the static estimates stand */
    }
    dst = src + large;
    memset(src, 0x5a, 2 * large);  /* fault every page in before timing */

    copy = axon_shm_calib_copy(dst, src, large);
    if (copy > 0) {
        axon_shm_costs.copy_MBps = (double)large / copy * 1e-6;
    }
    copy = axon_shm_calib_copy(dst, src, AXON_SHM_CALIB_CACHED);
    if (copy > 0) {
        axon_shm_costs.copy_cached_MBps = (double)AXON_SHM_CALIB_CACHED / copy * 1e-6;
    }
    get_large = axon_shm_calib_get(dst, src, large);
    get_small = axon_shm_calib_get(dst, src, small);
    if ((get_large > get_small) && (get_small > 0)) {
        axon_shm_costs.get_MBps        = (double)(large - small) / (get_large - get_small) * 1e-6;
        axon_shm_costs.get_overhead_ns = get_small * 1e9 -
                                         (double)small / (axon_shm_costs.get_MBps * 1e-3);
        if (axon_shm_costs.get_overhead_ns < 0) {
            axon_shm_costs.get_overhead_ns = 0;
        }
    }
    free(src);
    axon_debug("shm: copy %.0f MB/s (%.0f MB/s in cache); process_vm_readv %.0f ns + %.0f MB/s",
               axon_shm_costs.copy_MBps, axon_shm_costs.copy_cached_MBps,
               axon_shm_costs.get_overhead_ns, axon_shm_costs.get_MBps);
}

void axon_shm_costs_fill(axon_resource_t *resource)
{
    pthread_once(&axon_shm_costs_once, axon_shm_calibrate_once);
    resource->copy_MBps        = axon_shm_costs.copy_MBps;
    resource->copy_cached_MBps = axon_shm_costs.copy_cached_MBps;
    resource->get_overhead_ns  = axon_shm_costs.get_overhead_ns;
    resource->get_MBps         = axon_shm_costs.get_MBps;
}
