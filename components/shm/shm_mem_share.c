/*
 * The caller's own memory moved into a segment (AXON_MEM_MAP_SHARED): the
 * whole pages of a range are copied into a new memfd segment, which is then
 * mapped over them at the same address (one mremap, so no instant sees the
 * range unmapped). The caller keeps its memory, contents and address; peers
 * on the host map the same pages and put, get and do atomics with loads
 * and stores, as on allocated memory, instead of a system call each.
 *
 * Only private writable pages move: memory shared already (another
 * library's segment, ours), read-only, huge-page or special mappings stay
 * as they are (AXON_ERR_UNSUPPORTED: the caller registers them plainly).
 * Whole pages, and a partial page at either end only when it is program
 * data (a loaded object's writable segment by its program headers: .data
 * and .bss, SHMEM's symmetric variables): its other bytes are the program's
 * variables, written by the program's own code. A partial page of the heap
 * or any other memory stays (malloc's headers and neighbours, written by any
 * thread, our own included). A write into the moving pages during the move
 * could be lost: not writing them (nor, for program data, the variables
 * beside the range) meanwhile is the caller's part (docs: axon.h). Pages of
 * zeros are not copied, so an untouched heap of gigabytes costs no memory; in
 * anonymous memory, pages never touched are not even read (pagemap), so it
 * costs no page faults either.
 *
 * Unsharing moves the pages back into private anonymous memory, when the
 * caller still has our pages there (it may have unmapped them first), so a
 * peer still holding a key writes its orphaned mapping, never the caller's
 * memory. Slow path only (registration, /proc/self/maps). One move at a
 * time in the process: two registrations of overlapping ranges racing
 * would each copy and swap, and the loser's segment (which its peers
 * write) would no longer be the caller's memory; in turn, the second finds
 * the pages shared already and leaves them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "log.h"
#include "shm_mem_share.h"

static pthread_mutex_t axon_mem_share_lock = PTHREAD_MUTEX_INITIALIZER;

/* A line of /proc/self/maps, the fields we judge by. */
typedef struct {
    uintptr_t start, end;
    char      perms[5];
    uint64_t  offset;
    uint64_t  inode;
    char      path[256];
} axon_mem_share_vma_t;

static int axon_mem_share_vma_read(FILE *f, axon_mem_share_vma_t *v)
{
    char line[512];
    int  n = 0;

    if (fgets(line, sizeof(line), f) == NULL) {
        return 0;
    }
    v->path[0] = '\0';
    if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %4s %" SCNx64 " %*x:%*x %" SCNu64 " %n",
               &v->start, &v->end, v->perms, &v->offset, &v->inode, &n) < 5) {
        return -1;
    }
    sscanf(line + n, "%255[^\n]", v->path);
    return 1;
}

/* Memory whose pages may move: private, writable, of a kind mremap keeps whole. */
static int axon_mem_share_vma_movable(const axon_mem_share_vma_t *v)
{
    if (strcmp(v->perms, "rw-p") != 0) {
        return 0;
    }
    if ((v->path[0] == '\0') || (strcmp(v->path, "[heap]") == 0) ||
        (strcmp(v->path, "/dev/zero (deleted)") == 0) || (strcmp(v->path, "/dev/zero") == 0)) {
        return 1;
    }
    /* a private mapping of a regular file (a program's data); not huge pages, devices,
     * or the stack and the kernel's special mappings */
    return (v->path[0] == '/') && (strncmp(v->path, "/dev/", 5) != 0) &&
           (strncmp(v->path, "/anon_hugepage", 14) != 0);
}

/*
 * Does every byte of [lo, hi) lie in mappings that judge(vma, arg) accepts?
 * -1 when /proc/self/maps cannot be read.
 */
static int axon_mem_share_range_is(uintptr_t lo, uintptr_t hi,
                                   int (*judge)(const axon_mem_share_vma_t *, void *),
                                   void *arg)
{
    axon_mem_share_vma_t v;
    uintptr_t next = lo;
    FILE *f = fopen("/proc/self/maps", "r");
    int ret;

    if (f == NULL) {
        return -1;
    }
    while ((next < hi) && ((ret = axon_mem_share_vma_read(f, &v)) > 0)) {
        if (v.end <= next) {
            continue;
        }
        if ((v.start > next) || !judge(&v, arg)) {
            break;   /* a hole, or memory of another kind */
        }
        next = v.end;
    }
    fclose(f);
    return next >= hi;
}

/* Anonymous memory, whose pages never touched read as zeros (a file's do not). */
static int axon_mem_share_vma_anonymous(const axon_mem_share_vma_t *v)
{
    return (v->path[0] == '\0') || (strcmp(v->path, "[heap]") == 0);
}

/* Movable, and clears *arg (an int) at memory that is not anonymous: one walk for both */
static int axon_mem_share_judge_movable(const axon_mem_share_vma_t *v, void *arg)
{
    if (!axon_mem_share_vma_movable(v)) {
        return 0;
    }
    *(int *)arg &= axon_mem_share_vma_anonymous(v);
    return 1;
}

/* The segment whose pages unsharing looks for, and its memfd's inode. */
typedef struct {
    const axon_mem_seg_t *seg;
    uint64_t              inode;
} axon_mem_share_ours_t;

/* Still our segment's pages, each at its own offset? (arg: axon_mem_share_ours_t) */
static int axon_mem_share_judge_ours(const axon_mem_share_vma_t *v, void *arg)
{
    const axon_mem_share_ours_t *ours = arg;

    return (strcmp(v->perms, "rw-s") == 0) && (v->inode == ours->inode) &&
           (v->offset == axon_mem_seg_hdr_size() + (v->start - (uintptr_t)ours->seg->address));
}

static int axon_mem_share_page_is_zero(const uint8_t *p, size_t page)
{
    uint64_t first;

    memcpy(&first, p, sizeof(first));
    return (first == 0) && (memcmp(p, p + sizeof(first), page - sizeof(first)) == 0);
}

/* Copy the pages of src that hold anything but zeros to dst (which reads as zeros). */
static void axon_mem_share_copy(uint8_t *dst, const uint8_t *src, size_t length, size_t page)
{
    size_t off;

    for (off = 0; off < length; off += page) {
        if (!axon_mem_share_page_is_zero(src + off, page)) {
            memcpy(dst + off, src + off, page);
        }
    }
}

/*
 * axon_mem_share_copy for anonymous memory, without reading the pages that
 * were never touched: neither in memory nor in swap (/proc/self/pagemap's
 * bits 63 and 62), they hold zeros, and reading each would fault it in (an
 * untouched SHMEM heap of 512 MiB: 131 072 faults at registration). -1 if
 * pagemap cannot be read; the caller then copies as axon_mem_share_copy does
 * (copying a page twice is harmless).
 */
static int axon_mem_share_copy_touched(uint8_t *dst, const uint8_t *src, size_t length,
                                       size_t page)
{
    uint64_t entry[512];
    size_t npages = length / page, i = 0, j, k;
    int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    off_t at;

    if (fd < 0) {
        return -1;
    }
    while (i < npages) {
        k  = (npages - i < 512) ? npages - i : 512;
        at = (off_t)(((uintptr_t)src / page + i) * sizeof(entry[0]));
        if (pread(fd, entry, k * sizeof(entry[0]), at) != (ssize_t)(k * sizeof(entry[0]))) {
            close(fd);
            return -1;
        }
        for (j = 0; j < k; ++j, ++i) {
            if ((entry[j] >> 62) && !axon_mem_share_page_is_zero(src + i * page, page)) {
                memcpy(dst + i * page, src + i * page, page);
            }
        }
    }
    close(fd);
    return 0;
}

/*
 * Unsharing: copy the segment's pages that hold data (its memfd's data
 * extents; reading a hole through the mapping would allocate it) to dst.
 */
static void axon_mem_share_copy_back(uint8_t *dst, const axon_mem_seg_t *seg, size_t page)
{
    off_t hdr = (off_t)axon_mem_seg_hdr_size(), end = hdr + (off_t)seg->length;
    off_t data = hdr, hole;

    while ((data < end) && ((data = lseek(seg->fd, data, SEEK_DATA)) >= 0) && (data < end)) {
        hole = lseek(seg->fd, data, SEEK_HOLE);
        if ((hole < 0) || (hole > end)) {
            hole = end;
        }
        axon_mem_share_copy(dst + (data - hdr), (const uint8_t *)seg->address + (data - hdr),
                            (size_t)(hole - data), page);
        data = hole;
    }
    if ((data < 0) && (errno != ENXIO)) {   /* no SEEK_DATA here: every page */
        axon_mem_share_copy(dst, seg->address, seg->length, page);
    }
}

/* Put to's pages (a fresh mapping of length bytes) in place of those at at, in one step. */
static int axon_mem_share_swap(void *to, void *at, size_t length, const char *what)
{
    if (mremap(to, length, length, MREMAP_MAYMOVE | MREMAP_FIXED, at) != MAP_FAILED) {
        return 0;
    }
    axon_warn("%s %p (%zu bytes): mremap failed: %s", what, at, length, strerror(errno));
    munmap(to, length);
    return -1;
}

/* The page [at, at + page) and whether a loaded object's writable segment holds it. */
typedef struct {
    uintptr_t at;
    size_t    page;
    int       found;
} axon_mem_share_data_t;

static int axon_mem_share_data_find(struct dl_phdr_info *info, size_t size, void *arg)
{
    axon_mem_share_data_t *d = arg;
    const ElfW(Phdr) *ph;
    uintptr_t lo, hi;
    int i;

    (void)size;
    for (i = 0; i < info->dlpi_phnum; ++i) {
        ph = &info->dlpi_phdr[i];
        if ((ph->p_type != PT_LOAD) || !(ph->p_flags & PF_W)) {
            continue;
        }
        lo = (info->dlpi_addr + ph->p_vaddr) / d->page * d->page;
        hi = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz + d->page - 1) / d->page * d->page;
        if ((d->at >= lo) && (d->at + d->page <= hi)) {
            d->found = 1;
            return 1;
        }
    }
    return 0;
}

/* May the partial page at at move with the range: program data, and movable? */
static int axon_mem_share_edge_movable(uintptr_t at, size_t page)
{
    axon_mem_share_data_t d = {at, page, 0};
    int anonymous = 1;

    dl_iterate_phdr(axon_mem_share_data_find, &d);
    return d.found &&
           (axon_mem_share_range_is(at, at + page, axon_mem_share_judge_movable, &anonymous) == 1);
}

static axon_status_t axon_mem_share_locked(void *addr, size_t length, uint64_t token,
                                           axon_mem_seg_t *seg)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)addr, end = start + length;
    uintptr_t lo = (start + page - 1) / page * page, hi = end / page * page;
    size_t hdr_size = axon_mem_seg_hdr_size(), map_length, n;
    axon_status_t status;
    void *hdr, *tmp;
    int movable, anonymous = 1, fd;

    memset(seg, 0, sizeof(*seg));
    seg->fd = -1;
    if ((start % page) && axon_mem_share_edge_movable(start / page * page, page)) {
        lo = start / page * page;
    }
    if ((end % page) && axon_mem_share_edge_movable(hi, page)) {
        hi += page;
    }
    if (lo >= hi) {
        axon_debug("sharing %p (%zu bytes): no whole page in it", addr, length);
        return AXON_ERR_UNSUPPORTED;
    }
    n       = hi - lo;
    movable = axon_mem_share_range_is(lo, hi, axon_mem_share_judge_movable, &anonymous);
    if (movable <= 0) {
        axon_debug("sharing %p (%zu bytes): %s", addr, length, (movable < 0) ?
                   "/proc/self/maps cannot be read" :
                   "not all private writable memory (shared, read-only or special)");
        return AXON_ERR_UNSUPPORTED;
    }
    status = axon_mem_seg_create_fd(n, &fd, &map_length);
    if (status != AXON_OK) {
        return status;
    }
    hdr = mmap(NULL, hdr_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    tmp = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)hdr_size);
    if ((hdr == MAP_FAILED) || (tmp == MAP_FAILED)) {
        axon_error("sharing %p (%zu bytes): mapping its segment failed: %s", addr, length,
                   strerror(errno));
        status = AXON_ERR_NO_MEMORY;
        goto err;
    }
    axon_mem_seg_hdr_init(hdr, n, token);
    if (!anonymous || (axon_mem_share_copy_touched(tmp, (const uint8_t *)lo, n, page) != 0)) {
        axon_mem_share_copy(tmp, (const uint8_t *)lo, n, page);
    }
    if (axon_mem_share_swap(tmp, (void *)lo, n, "sharing") != 0) {
        tmp    = MAP_FAILED;
        status = AXON_ERR_UNSUPPORTED;
        goto err;
    }
    seg->fd         = fd;
    seg->base       = hdr;
    seg->map_length = hdr_size;
    seg->address    = (void *)lo;
    seg->length     = n;
    seg->token      = token;
    seg->locks      = axon_mem_seg_hdr_locks(hdr);
    axon_debug("shared pages %p..%p of %p (%zu bytes): segment fd %d", (void *)lo, (void *)hi,
               addr, length, fd);
    return AXON_OK;

err:
    if (tmp != MAP_FAILED) {
        munmap(tmp, n);
    }
    if (hdr != MAP_FAILED) {
        munmap(hdr, hdr_size);
    }
    close(fd);
    return status;
}

axon_status_t axon_mem_share(void *addr, size_t length, uint64_t token, axon_mem_seg_t *seg)
{
    axon_status_t status;

    pthread_mutex_lock(&axon_mem_share_lock);
    status = axon_mem_share_locked(addr, length, token, seg);
    pthread_mutex_unlock(&axon_mem_share_lock);
    return status;
}

void axon_mem_unshare(axon_mem_seg_t *seg)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    axon_mem_share_ours_t ours = {seg, 0};
    struct stat st;
    void *tmp;

    pthread_mutex_lock(&axon_mem_share_lock);
    if (fstat(seg->fd, &st) == 0) {
        ours.inode = (uint64_t)st.st_ino;
    }
    if ((ours.inode == 0) ||
        (axon_mem_share_range_is((uintptr_t)seg->address, (uintptr_t)seg->address + seg->length,
                                 axon_mem_share_judge_ours, &ours) != 1)) {
        axon_debug("unsharing %p (%zu bytes): the pages are no longer ours there: left alone",
                   seg->address, seg->length);
    } else {
        tmp = mmap(NULL, seg->length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                   0);
        if (tmp == MAP_FAILED) {
            axon_warn("unsharing %p (%zu bytes): no memory to move it back: %s", seg->address,
                      seg->length, strerror(errno));
        } else {
            axon_mem_share_copy_back(tmp, seg, page);
            axon_mem_share_swap(tmp, seg->address, seg->length, "unsharing");
        }
    }
    pthread_mutex_unlock(&axon_mem_share_lock);
    munmap(seg->base, seg->map_length);
    close(seg->fd);
    memset(seg, 0, sizeof(*seg));
    seg->fd = -1;
}
