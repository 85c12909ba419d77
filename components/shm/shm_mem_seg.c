/*
 * Allocated segments: a memfd with a header (identity and atomic lock
 * table) before the user's memory. The owner keeps the fd open; a peer on
 * the same host reopens it through /proc/<owner pid>/fd/<fd>, maps it and
 * closes its fd again, after checking the header names the segment its key
 * does. The memfd's size is sealed, so no process can shrink a mapping
 * under another (which would turn accesses into SIGBUS). Slow path only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "log.h"
#include "topo.h"
#include "shm_mem_seg.h"

#define AXON_MEM_SEG_MAGIC   0x41584f4e4d454d31ull  /* "AXONMEM1" */
#define AXON_MEM_SEG_VERSION 1
#define AXON_MEM_SEG_NAME    "axon-mem"
#define AXON_MEM_SEG_SEALS   (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

/* The header page(s). Written once by the owner before any key exists. */
typedef struct axon_mem_seg_hdr {
    uint64_t              magic;
    uint32_t              version;
    uint32_t              hdr_size;   /* bytes before the user's memory */
    uint64_t              token;
    uint64_t              length;     /* the user's bytes, as asked */
    axon_proc_t           owner;
    axon_amo_lock_table_t locks __attribute__((aligned(64)));
} axon_mem_seg_hdr_t;

_Static_assert(sizeof(axon_mem_seg_hdr_t) <= AXON_MEM_SEG_HDR_SIZE,
               "the header outgrew AXON_MEM_SEG_HDR_SIZE");
_Static_assert(__builtin_offsetof(axon_mem_seg_hdr_t, locks) % 64 == 0,
               "lock table not cache-line aligned");

static size_t axon_mem_seg_page(void)
{
    long page = sysconf(_SC_PAGESIZE);

    return (page > 0) ? (size_t)page : 4096;
}

/* Header bytes: AXON_MEM_SEG_HDR_SIZE rounded up to pages, so user memory is page aligned. */
size_t axon_mem_seg_hdr_size(void)
{
    size_t page = axon_mem_seg_page();

    return (AXON_MEM_SEG_HDR_SIZE + page - 1) / page * page;
}

/* The mapping's total size for length user bytes; 0 if it does not fit an off_t. */
static size_t axon_mem_seg_map_size(size_t length)
{
    size_t page = axon_mem_seg_page();
    size_t hdr  = axon_mem_seg_hdr_size();

    if ((length == 0) || (length > (size_t)LLONG_MAX - hdr - page)) {
        return 0;
    }
    return hdr + (length + page - 1) / page * page;
}

static void axon_mem_seg_clear(axon_mem_seg_t *seg)
{
    memset(seg, 0, sizeof(*seg));
    seg->fd = -1;
}

/* Fill seg's view of a mapped segment. */
static void axon_mem_seg_set(axon_mem_seg_t *seg, void *base, size_t map_length, size_t length,
                             uint64_t token)
{
    axon_mem_seg_hdr_t *hdr = (axon_mem_seg_hdr_t*)base;

    seg->base       = base;
    seg->map_length = map_length;
    seg->address    = (uint8_t*)base + hdr->hdr_size;
    seg->length     = length;
    seg->token      = token;
    seg->locks      = &hdr->locks;
}

axon_status_t axon_mem_seg_create_fd(size_t length, int *fd_p, size_t *map_length_p)
{
    size_t        map_length = axon_mem_seg_map_size(length);
    axon_status_t status;
    int           fd;

    if (map_length == 0) {
        axon_error("cannot allocate a segment of %zu bytes", length);
        return AXON_ERR_INVALID_PARAM;
    }
    fd = memfd_create(AXON_MEM_SEG_NAME, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        status = ((errno == EMFILE) || (errno == ENFILE)) ? AXON_ERR_NO_RESOURCE :
                 (errno == ENOSYS) ? AXON_ERR_UNSUPPORTED : AXON_ERR_NO_MEMORY;
        axon_error("memfd_create for a %zu-byte segment failed: %s", length, strerror(errno));
        return status;
    }
    if (ftruncate(fd, (off_t)map_length) != 0) {
        axon_error("sizing a segment to %zu bytes failed: %s", map_length, strerror(errno));
        status = AXON_ERR_NO_MEMORY;
        goto err_close;
    }
    if (fcntl(fd, F_ADD_SEALS, AXON_MEM_SEG_SEALS) != 0) {
        axon_error("sealing the size of a segment failed: %s", strerror(errno));
        status = AXON_ERR_UNSUPPORTED;
        goto err_close;
    }
    *fd_p         = fd;
    *map_length_p = map_length;
    return AXON_OK;

err_close:
    close(fd);
    return status;
}

void axon_mem_seg_hdr_init(void *hdr_v, size_t length, uint64_t token)
{
    axon_mem_seg_hdr_t *hdr = hdr_v;   /* zeroed by ftruncate */

    hdr->version  = AXON_MEM_SEG_VERSION;
    hdr->hdr_size = (uint32_t)axon_mem_seg_hdr_size();
    hdr->token    = token;
    hdr->length   = length;
    axon_proc_self(&hdr->owner);
    axon_amo_lock_table_init(&hdr->locks);
    __atomic_store_n(&hdr->magic, AXON_MEM_SEG_MAGIC, __ATOMIC_RELEASE);
}

axon_amo_lock_table_t *axon_mem_seg_hdr_locks(void *hdr)
{
    return &((axon_mem_seg_hdr_t *)hdr)->locks;
}

axon_status_t axon_mem_seg_alloc(size_t length, uint64_t token, axon_mem_seg_t *seg)
{
    axon_status_t status;
    size_t        map_length;
    void         *base;
    int           fd, node;

    axon_mem_seg_clear(seg);
    status = axon_mem_seg_create_fd(length, &fd, &map_length);
    if (status != AXON_OK) {
        return status;
    }
    base = mmap(NULL, map_length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        axon_error("mapping a %zu-byte segment failed: %s", map_length, strerror(errno));
        close(fd);
        return AXON_ERR_NO_MEMORY;
    }
    /* Peers write into it (puts, atomics) but its owner reads it: its node, before any touch. */
    node = axon_topo_mem_bind_local(base, map_length);
    axon_mem_seg_hdr_init(base, length, token);
    axon_mem_seg_set(seg, base, map_length, length, token);
    seg->fd = fd;
    axon_debug("allocated segment fd %d: %zu bytes at %p, token 0x%llx, NUMA node %d", fd,
               length, seg->address, (unsigned long long)token, node);
    return AXON_OK;
}

void axon_mem_seg_free(axon_mem_seg_t *seg)
{
    if (seg->base != NULL) {
        munmap(seg->base, seg->map_length);
    }
    if (seg->fd >= 0) {
        close(seg->fd);
    }
    axon_mem_seg_clear(seg);
}

/* Same process? pids must match; start times and namespaces where both know them. */
static int axon_mem_seg_owner_matches(const axon_proc_t *key, const axon_proc_t *hdr)
{
    return (key->pid == hdr->pid) &&
           ((key->start_time == 0) || (hdr->start_time == 0) ||
            (key->start_time == hdr->start_time)) &&
           ((key->ns_id == 0) || (hdr->ns_id == 0) || (key->ns_id == hdr->ns_id));
}

/* Check a mapped header against the key: the reason it is not that segment, or NULL. */
static const char *axon_mem_seg_hdr_mismatch(const axon_mem_seg_hdr_t *hdr,
                                             const axon_proc_t *owner, size_t length,
                                             uint64_t token, size_t map_length)
{
    if (__atomic_load_n(&hdr->magic, __ATOMIC_ACQUIRE) != AXON_MEM_SEG_MAGIC) {
        return "not an Axon segment";
    }
    if (hdr->version != AXON_MEM_SEG_VERSION) {
        return "another segment version";
    }
    if (hdr->hdr_size != axon_mem_seg_hdr_size()) {
        return "another header size";
    }
    if (hdr->token != token) {
        return "another token";
    }
    if ((hdr->length != length) || (axon_mem_seg_map_size(length) != map_length)) {
        return "another length";
    }
    if (!axon_mem_seg_owner_matches(owner, &hdr->owner)) {
        return "another owner";
    }
    return NULL;
}

/*
 * Open the owner's fd through /proc: our fd, or -1 with *status set. Only a
 * memfd of ours is opened: the link is read first, so a stale fd number
 * naming a device or a pipe is never opened (opening some devices acts).
 */
static int axon_mem_seg_open(const axon_proc_t *owner, int32_t fd, axon_status_t *status)
{
    char    path[64], link[128];
    ssize_t n;
    int     ret;

    snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)owner->pid, (int)fd);
    n = readlink(path, link, sizeof(link) - 1);
    if (n >= 0) {
        link[n] = '\0';
        if (strncmp(link, "/memfd:" AXON_MEM_SEG_NAME " ", 7 + sizeof(AXON_MEM_SEG_NAME)) != 0) {
            axon_error("segment %s is not an Axon segment (%s)", path, link);
            *status = AXON_ERR_REMOTE_ACCESS;
            return -1;
        }
        ret = open(path, O_RDWR | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    } else {
        ret = -1;
    }
    if (ret >= 0) {
        return ret;
    }

    switch (errno) {
    case EACCES:
    case EPERM:
        axon_debug("cannot open segment %s: %s (the system forbids it)", path, strerror(errno));
        *status = AXON_ERR_UNSUPPORTED;
        break;
    case EMFILE:
    case ENFILE:
        axon_error("cannot open segment %s: %s", path, strerror(errno));
        *status = AXON_ERR_NO_RESOURCE;
        break;
    default:   /* ENOENT: the owner is gone, or has no such fd */
        axon_debug("cannot open segment %s: %s", path, strerror(errno));
        *status = AXON_ERR_REMOTE_ACCESS;
        break;
    }
    return -1;
}

axon_status_t axon_mem_seg_attach(const axon_proc_t *owner, int32_t fd, size_t length,
                                  uint64_t token, axon_mem_seg_t *seg)
{
    size_t        map_length = axon_mem_seg_map_size(length);
    axon_proc_t   self;
    axon_status_t status;
    const char   *why;
    struct stat   st;
    void         *base;
    int           seals, my_fd;

    axon_mem_seg_clear(seg);
    if ((map_length == 0) || (fd < 0) || (owner->pid <= 0)) {
        axon_error("segment key names fd %d of pid %d with %zu bytes: invalid", (int)fd,
                   (int)owner->pid, length);
        return AXON_ERR_REMOTE_ACCESS;
    }
    axon_proc_self(&self);
    if (axon_proc_comparable(owner, &self) && axon_proc_is_gone(owner, &why)) {
        axon_debug("segment owner pid %d is gone (%s)", (int)owner->pid, why);
        return AXON_ERR_REMOTE_ACCESS;
    }

    my_fd = axon_mem_seg_open(owner, fd, &status);
    if (my_fd < 0) {
        return status;
    }
    memset(&st, 0, sizeof(st));
    if ((fstat(my_fd, &st) != 0) || !S_ISREG(st.st_mode) || (st.st_size < 0) ||
        ((size_t)st.st_size != map_length)) {
        axon_error("segment fd %d of pid %d: %lld bytes, not the %zu its key says",
                   (int)fd, (int)owner->pid, (long long)st.st_size, map_length);
        status = AXON_ERR_REMOTE_ACCESS;
        goto out_close;
    }
    seals = fcntl(my_fd, F_GET_SEALS);
    if ((seals < 0) || ((seals & (F_SEAL_SHRINK | F_SEAL_SEAL)) !=
                        (F_SEAL_SHRINK | F_SEAL_SEAL))) {
        axon_error("segment fd %d of pid %d: its size is not sealed", (int)fd, (int)owner->pid);
        status = AXON_ERR_REMOTE_ACCESS;
        goto out_close;
    }
    base = mmap(NULL, map_length, PROT_READ | PROT_WRITE, MAP_SHARED, my_fd, 0);
    if (base == MAP_FAILED) {
        axon_error("mapping segment fd %d of pid %d (%zu bytes) failed: %s", (int)fd,
                   (int)owner->pid, map_length, strerror(errno));
        status = AXON_ERR_NO_MEMORY;
        goto out_close;
    }
    why = axon_mem_seg_hdr_mismatch((const axon_mem_seg_hdr_t*)base, owner, length, token,
                                    map_length);
    if (why != NULL) {
        axon_error("segment fd %d of pid %d is not the key's (token 0x%llx, %zu bytes): %s",
                   (int)fd, (int)owner->pid, (unsigned long long)token, length, why);
        munmap(base, map_length);
        status = AXON_ERR_REMOTE_ACCESS;
        goto out_close;
    }

    axon_mem_seg_set(seg, base, map_length, length, token);
    status = AXON_OK;
    axon_debug("attached segment fd %d of pid %d: %zu bytes at %p", (int)fd, (int)owner->pid,
               length, seg->address);

out_close:
    close(my_fd);   /* the mapping keeps the memfd alive */
    return status;
}

void axon_mem_seg_detach(axon_mem_seg_t *seg)
{
    if (seg->base != NULL) {
        munmap(seg->base, seg->map_length);
    }
    axon_mem_seg_clear(seg);
}
