/*
 * Segments: create/unlink on the owner's side, attach/check on the peer's.
 * All of it is slow path (iface open/close, endpoint creation, exit).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "shm_seg.h"
#include "log.h"

/* Cells start after the control line and the tail line. */
#define AXON_SHM_SEG_CELLS_OFFSET (sizeof(axon_shm_seg_ctl_t) + sizeof(axon_shm_fifo_ctl_t))

/* Digits of "-<uid>-<pid>-<counter>" at most: three dashes, three 32-bit numbers. */
#define AXON_SHM_SEG_NAME_SUFFIX_MAX (3 + 3 * 10)

/* A name can be taken by a segment a crashed process left behind with our pid. */
#define AXON_SHM_SEG_CREATE_TRIES 16

/*
 * Segments this process created and has not unlinked, for the exit sweep.
 * The lock also guards the name counter and the one-time atexit registration.
 */
static pthread_mutex_t  axon_shm_seg_lock  = PTHREAD_MUTEX_INITIALIZER;
static axon_list_link_t axon_shm_seg_owned = {&axon_shm_seg_owned, &axon_shm_seg_owned};
static unsigned         axon_shm_seg_counter;
static int              axon_shm_seg_atexit_set;

/*
 * Unlink what ifaces never closed left behind. Runs at exit, or at dlclose
 * of this plugin (glibc ties atexit handlers of a shared object to it). A
 * forked child inherits the list but not the segments: it skips them.
 */
static void axon_shm_seg_atexit(void)
{
    axon_shm_seg_t *seg;
    pid_t           pid = getpid();

    pthread_mutex_lock(&axon_shm_seg_lock);
    axon_list_for_each(seg, &axon_shm_seg_owned, list) {
        if (seg->owner_pid == pid) {
            shm_unlink(seg->name);
            seg->owner_pid = 0;  /* a later destroy must not unlink a reused name */
        }
    }
    pthread_mutex_unlock(&axon_shm_seg_lock);
}

axon_status_t axon_shm_seg_check_prefix(const char *prefix, const char *var_name)
{
    size_t max = AXON_SHM_SEG_NAME_MAX - 2 - AXON_SHM_SEG_NAME_SUFFIX_MAX; /* '/' and NUL */

    if ((prefix == NULL) || (prefix[0] == '\0') || (strchr(prefix, '/') != NULL) ||
        (strlen(prefix) > max)) {
        axon_error("%s='%s' is invalid: segment names need 1 to %zu characters without '/'",
                   var_name, (prefix != NULL) ? prefix : "", max);
        return AXON_ERR_INVALID_PARAM;
    }
    return AXON_OK;
}

/* Take a fresh name and create the object; the lock is held. */
static int axon_shm_seg_open_new(const char *prefix, axon_shm_seg_t *seg)
{
    unsigned tries;
    int      fd = -1;

    for (tries = 0; tries < AXON_SHM_SEG_CREATE_TRIES; ++tries) {
        snprintf(seg->name, sizeof(seg->name), "/%s-%u-%u-%u", prefix, (unsigned)geteuid(),
                 (unsigned)getpid(), axon_shm_seg_counter++);
        fd = shm_open(seg->name, O_CREAT | O_EXCL | O_RDWR, 0600);
        if ((fd >= 0) || (errno != EEXIST)) {
            break;
        }
        axon_debug("shm segment %s exists (left by an earlier process?), trying the next name",
                   seg->name);
    }
    return fd;
}

axon_status_t axon_shm_seg_create(const char *prefix, unsigned fifo_size, size_t cell_size,
                                  axon_shm_seg_t *seg, axon_shm_fifo_t *fifo)
{
    axon_shm_seg_ctl_t *ctl;
    axon_status_t       status;
    size_t              length;
    void               *addr;
    int                 fd, ret;

    if ((fifo_size == 0) || (cell_size > (SIZE_MAX - AXON_SHM_SEG_CELLS_OFFSET) / fifo_size)) {
        axon_error("shm ring of %u cells of %zu bytes is too large", fifo_size, cell_size);
        return AXON_ERR_INVALID_PARAM;
    }
    length = AXON_SHM_SEG_CELLS_OFFSET + (size_t)fifo_size * cell_size;

    pthread_mutex_lock(&axon_shm_seg_lock);
    if (!axon_shm_seg_atexit_set && (atexit(axon_shm_seg_atexit) == 0)) {
        axon_shm_seg_atexit_set = 1;
    }
    fd = axon_shm_seg_open_new(prefix, seg);
    if (fd >= 0) {
        /* Listed from birth, so an exit at any later point unlinks it. */
        seg->owner_pid = getpid();
        axon_list_add_tail(&axon_shm_seg_owned, &seg->list);
    }
    pthread_mutex_unlock(&axon_shm_seg_lock);
    if (fd < 0) {
        axon_error("shm_open(%s) failed: %s", seg->name, strerror(errno));
        return AXON_ERR_IO_ERROR;
    }

    /* Reserve the pages now: a full /dev/shm would otherwise be a SIGBUS later. */
    ret = posix_fallocate(fd, 0, (off_t)length);
    if (ret != 0) {
        axon_error("cannot allocate %zu bytes for shm segment %s: %s (is /dev/shm full?)",
                   length, seg->name, strerror(ret));
        status = (ret == ENOSPC) ? AXON_ERR_NO_MEMORY : AXON_ERR_IO_ERROR;
        goto err_unlink;
    }

    addr = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (addr == MAP_FAILED) {
        axon_error("mmap of shm segment %s (%zu bytes) failed: %s", seg->name, length,
                   strerror(errno));
        status = AXON_ERR_NO_MEMORY;
        goto err_unlink;
    }
    close(fd);

    seg->addr   = addr;
    seg->length = length;

    ctl               = (axon_shm_seg_ctl_t*)addr;
    ctl->version      = AXON_SHM_SEG_VERSION;
    ctl->fifo_size    = fifo_size;
    ctl->cell_size    = (uint32_t)cell_size;
    ctl->cells_offset = (uint32_t)AXON_SHM_SEG_CELLS_OFFSET;
    ctl->owner_pid    = (int32_t)seg->owner_pid;
    ctl->owner_uid    = (uint32_t)geteuid();
    axon_shm_fifo_view(fifo, ctl + 1, (char*)addr + AXON_SHM_SEG_CELLS_OFFSET, fifo_size,
                       cell_size);
    axon_shm_fifo_init(fifo);
    atomic_store_explicit(&ctl->magic, AXON_SHM_SEG_MAGIC, memory_order_release);

    axon_debug("created shm segment %s: %u cells of %zu bytes", seg->name, fifo_size,
               cell_size);
    return AXON_OK;

err_unlink:
    pthread_mutex_lock(&axon_shm_seg_lock);
    axon_list_del(&seg->list);
    pthread_mutex_unlock(&axon_shm_seg_lock);
    shm_unlink(seg->name);
    close(fd);
    return status;
}

void axon_shm_seg_destroy(axon_shm_seg_t *seg)
{
    pthread_mutex_lock(&axon_shm_seg_lock);
    axon_list_del(&seg->list);
    if (seg->owner_pid == getpid()) {
        shm_unlink(seg->name);
    }
    pthread_mutex_unlock(&axon_shm_seg_lock);
    munmap(seg->addr, seg->length);
}

/* Is the layout of a mapped peer segment one we can send into? Logs why not. */
static int axon_shm_seg_check(const char *name, const void *addr, size_t length,
                              size_t min_cell_size, axon_shm_seg_ctl_t *copy)
{
    const axon_shm_seg_ctl_t *ctl = (const axon_shm_seg_ctl_t*)addr;
    uint64_t                  magic;

    magic = atomic_load_explicit(&((axon_shm_seg_ctl_t*)addr)->magic, memory_order_acquire);
    if (magic != AXON_SHM_SEG_MAGIC) {
        axon_error("shm segment %s is not an Axon shm segment (magic 0x%016llx)", name,
                   (unsigned long long)magic);
        return 0;
    }
    /* Check a private copy: the peer could rewrite its control line after. */
    copy->version      = ctl->version;
    copy->fifo_size    = ctl->fifo_size;
    copy->cell_size    = ctl->cell_size;
    copy->cells_offset = ctl->cells_offset;
    if (copy->version != AXON_SHM_SEG_VERSION) {
        axon_error("shm segment %s has layout version %u, this library speaks %u", name,
                   copy->version, AXON_SHM_SEG_VERSION);
        return 0;
    }
    if ((copy->fifo_size < 2) || (copy->fifo_size & (copy->fifo_size - 1)) ||
        (copy->cell_size < 2 * AXON_SHM_FIFO_ALIGN) || (copy->cell_size % AXON_SHM_FIFO_ALIGN) ||
        (copy->cells_offset < AXON_SHM_SEG_CELLS_OFFSET) ||
        (copy->cells_offset % AXON_SHM_FIFO_ALIGN) ||
        ((uint64_t)copy->cells_offset + (uint64_t)copy->fifo_size * copy->cell_size > length)) {
        axon_error("shm segment %s has a corrupt layout: %u cells of %u bytes at offset %u "
                   "in %zu bytes", name, copy->fifo_size, copy->cell_size, copy->cells_offset,
                   length);
        return 0;
    }
    if (copy->cell_size < min_cell_size) {
        axon_error("shm segment %s has %u-byte cells, this process sends up to %zu "
                   "(is AXON_SHM_CELL_SIZE set differently in the two processes?)", name,
                   copy->cell_size, min_cell_size);
        return 0;
    }
    return 1;
}

axon_status_t axon_shm_seg_attach(const char *name, size_t min_cell_size, void **addr_p,
                                  size_t *length_p, axon_shm_fifo_t *fifo)
{
    axon_shm_seg_ctl_t ctl;
    struct stat        st;
    size_t             length;
    void              *addr;
    int                fd;

    fd = shm_open(name, O_RDWR, 0);
    if (fd < 0) {
        axon_error("cannot open shm segment %s: %s", name, strerror(errno));
        return AXON_ERR_UNREACHABLE;
    }
    if (fstat(fd, &st) != 0) {
        axon_error("cannot stat shm segment %s: %s", name, strerror(errno));
        goto err_close;
    }
    if ((st.st_size < (off_t)AXON_SHM_SEG_CELLS_OFFSET) || ((uintmax_t)st.st_size > SIZE_MAX)) {
        axon_error("shm segment %s has %jd bytes: not an Axon shm segment", name,
                   (intmax_t)st.st_size);
        goto err_close;
    }
    length = (size_t)st.st_size;

    addr = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (addr == MAP_FAILED) {
        axon_error("mmap of shm segment %s (%zu bytes) failed: %s", name, length,
                   strerror(errno));
        goto err_close;
    }
    close(fd);

    if (!axon_shm_seg_check(name, addr, length, min_cell_size, &ctl)) {
        munmap(addr, length);
        return AXON_ERR_UNREACHABLE;
    }

    axon_shm_fifo_view(fifo, (axon_shm_seg_ctl_t*)addr + 1, (char*)addr + ctl.cells_offset,
                       ctl.fifo_size, ctl.cell_size);
    *addr_p   = addr;
    *length_p = length;
    return AXON_OK;

err_close:
    close(fd);
    return AXON_ERR_UNREACHABLE;
}

void axon_shm_seg_detach(void *addr, size_t length)
{
    munmap(addr, length);
}
