/*
 * Segments: create/unlink on the owner's side, attach/check on the peer's,
 * reaping of dead processes' segments; process identities read from /proc;
 * and the sender slots, with which a ring's owner gets past a cell that a
 * dead sender claimed and never published. All of it is slow path (iface
 * open/close, endpoint creation, exit, liveness checks, a stuck ring).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "shm_seg.h"
#include "sys.h"
#include "log.h"
#include "topo.h"

/* Fixed lines first: control, tail, sender slots' control; then the slots, then cells. */

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
static pid_t            axon_shm_seg_reaped_by;  /* the process that swept /dev/shm */


/* ---------------------------------------------------------------- segments */

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

/*
 * Is the segment dir_fd/name, of the pid its name gives, one a dead process
 * of our user left on this host? Only what we can prove: the control line
 * must be a current one (a half-built segment has no magic yet), and its
 * creator must be comparable with us and verifiably gone.
 */
static int axon_shm_seg_is_stale(int dir_fd, const char *name, pid_t name_pid,
                                 uint64_t host_id, const axon_proc_t *self,
                                 const char **why)
{
    axon_shm_seg_ctl_t ctl;
    struct stat        st;
    ssize_t            n;
    int                fd;

    /* O_NONBLOCK: another user may have planted a FIFO under this name. */
    fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    n = -1;
    if ((fstat(fd, &st) == 0) && S_ISREG(st.st_mode) && (st.st_uid == geteuid()) &&
        (st.st_size >= (off_t)sizeof(ctl))) {
        n = pread(fd, &ctl, sizeof(ctl), 0);
    }
    close(fd);
    if (n != (ssize_t)sizeof(ctl)) {
        return 0;
    }

    /* The control line is the same in every version from AXON_SHM_SEG_VERSION_REAP on. */
    return (ctl.magic == AXON_SHM_SEG_MAGIC) && (ctl.version >= AXON_SHM_SEG_VERSION_REAP) &&
           (ctl.version <= AXON_SHM_SEG_VERSION) &&
           (ctl.owner_uid == (uint32_t)geteuid()) && (ctl.host_id == host_id) &&
           (ctl.owner.pid == name_pid) && axon_proc_comparable(&ctl.owner, self) &&
           axon_proc_is_gone(&ctl.owner, why);
}

/* The pid of a segment name "<lead><pid>-<n>" (lead: "<prefix>-<uid>-"); 0: not one. */
static pid_t axon_shm_seg_name_pid(const char *name, const char *lead, size_t lead_len)
{
    unsigned long pid;
    char         *end;

    if (strncmp(name, lead, lead_len) != 0) {
        return 0;
    }
    /* "<pid>-<counter>", both decimal */
    errno = 0;
    pid   = strtoul(name + lead_len, &end, 10);
    if ((errno != 0) || (end == name + lead_len) || (*end != '-') || (pid == 0) ||
        (pid > INT32_MAX)) {
        return 0;
    }
    return (pid_t)pid;
}

/*
 * Unlink the segments "<prefix>-<uid>-<pid>-<n>" of our user whose creator
 * died without unlinking them (SIGKILL, crash). Reapers hold an exclusive
 * flock on the directory from check to unlink, so two cannot interleave:
 * else one could unlink a name another had just freed and a new process,
 * reusing the dead pid, had just taken again. Creators need no lock: the
 * name of a dead process's segment cannot be taken until a reaper frees it,
 * and a segment being built has a live creator.
 */
static void axon_shm_seg_reap(const char *prefix, uint64_t host_id,
                              const axon_proc_t *self)
{
    char           lead[AXON_SHM_SEG_NAME_MAX];
    struct dirent *entry;
    const char    *why;
    size_t         lead_len;
    pid_t          pid;
    DIR           *dir;

    if (!axon_proc_comparable(self, self)) {
        return;  /* without /proc no owner can be proven dead */
    }
    snprintf(lead, sizeof(lead), "%s-%u-", prefix, (unsigned)geteuid());
    lead_len = strlen(lead);

    dir = opendir(AXON_SHM_DIR);
    if (dir == NULL) {
        return;
    }
    if (flock(dirfd(dir), LOCK_EX | LOCK_NB) != 0) {
        /* Another process is sweeping right now: it does the job. */
        axon_debug("shm: %s is locked, not reaping stale segments", AXON_SHM_DIR);
        closedir(dir);
        return;
    }
    while ((entry = readdir(dir)) != NULL) {
        if ((entry->d_type != DT_REG) && (entry->d_type != DT_UNKNOWN)) {
            continue;
        }
        pid = axon_shm_seg_name_pid(entry->d_name, lead, lead_len);
        if ((pid == 0) || (pid == self->pid)) {
            continue;
        }
        if (axon_shm_seg_is_stale(dirfd(dir), entry->d_name, pid, host_id, self, &why) &&
            (unlinkat(dirfd(dir), entry->d_name, 0) == 0)) {
            axon_debug("shm: removed stale segment %s/%s: its process %d is gone (%s)",
                       AXON_SHM_DIR, entry->d_name, (int)pid, why);
        }
    }
    flock(dirfd(dir), LOCK_UN);
    closedir(dir);
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23   /* Linux 5.14; older kernels refuse it and the pages fault in use */
#endif

/*
 * Map every page of a ring and touch it now, outside the messages. A sender
 * writes each of its cells for the first time, and the receiver reads them,
 * through a page fault per page; on a virtual machine whose hypervisor
 * shadows the page tables the first access costs again after that (here
 * 12 us a page unmapped, 6 us mapped, 0.02 us after). Left to the messages,
 * a 2 MiB ring cost the first 50 rounds of 64 KiB messages around 4 ranks
 * ~20 ms, three times what the rounds cost after. Reads alone: a sender's
 * mapping is of cells other senders may be writing.
 */
static void axon_shm_seg_populate(void *addr, size_t length)
{
    const volatile char *page;
    long page_size = sysconf(_SC_PAGESIZE);

    (void)madvise(addr, length, MADV_POPULATE_WRITE);
    for (page = addr; page < (const char *)addr + length; page += page_size) {
        (void)*page;
    }
}

axon_status_t axon_shm_seg_create(const char *prefix, unsigned fifo_size, size_t cell_size,
                                  unsigned nsenders, uint64_t host_id,
                                  const axon_proc_t *owner, int event_fd, axon_shm_seg_t *seg,
                                  axon_shm_fifo_t *fifo, axon_shm_senders_t *senders)
{
    axon_shm_seg_ctl_t *ctl;
    axon_status_t       status;
    size_t              cells_offset, length;
    unsigned            i;
    void               *addr;
    int                 fd, ret;

    /* Offsets travel as 32 bits in the control line. */
    if ((fifo_size == 0) || (nsenders == 0) ||
        (nsenders > (UINT32_MAX - AXON_SHM_SEG_SLOTS_OFFSET) / sizeof(axon_shm_sender_t)) ||
        (cell_size > (SIZE_MAX - UINT32_MAX) / fifo_size)) {
        axon_error("shm ring of %u cells of %zu bytes with %u sender slots is too large",
                   fifo_size, cell_size, nsenders);
        return AXON_ERR_INVALID_PARAM;
    }
    cells_offset = AXON_SHM_SEG_SLOTS_OFFSET + (size_t)nsenders * sizeof(axon_shm_sender_t);
    length       = cells_offset + (size_t)fifo_size * cell_size;

    pthread_mutex_lock(&axon_shm_seg_lock);
    if (!axon_shm_seg_atexit_set && (atexit(axon_shm_seg_atexit) == 0)) {
        axon_shm_seg_atexit_set = 1;
    }
    if (axon_shm_seg_reaped_by != getpid()) {
        axon_shm_seg_reaped_by = getpid();
        axon_shm_seg_reap(prefix, host_id, owner);
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

    if (ftruncate(fd, (off_t)length) != 0) {
        axon_error("cannot size shm segment %s to %zu bytes: %s", seg->name, length,
                   strerror(errno));
        status = AXON_ERR_IO_ERROR;
        goto err_unlink;
    }
    addr = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (addr == MAP_FAILED) {
        axon_error("mmap of shm segment %s (%zu bytes) failed: %s", seg->name, length,
                   strerror(errno));
        status = AXON_ERR_NO_MEMORY;
        goto err_unlink;
    }
    /* The ring is read by this (the receiving) thread: its pages on its NUMA node.
     * The policy is the file's, so the allocation below already follows it. */
    seg->numa_node = axon_topo_mem_bind_local(addr, length);
    /* Reserve the pages now: a full /dev/shm would otherwise be a SIGBUS later. */
    ret = posix_fallocate(fd, 0, (off_t)length);
    if (ret != 0) {
        axon_error("cannot allocate %zu bytes for shm segment %s: %s (is /dev/shm full?)",
                   length, seg->name, strerror(ret));
        status = (ret == ENOSPC) ? AXON_ERR_NO_MEMORY : AXON_ERR_IO_ERROR;
        goto err_unmap;
    }
    close(fd);
    axon_shm_seg_populate(addr, length);

    seg->addr   = addr;
    seg->length = length;

    ctl               = (axon_shm_seg_ctl_t*)addr;
    ctl->version      = AXON_SHM_SEG_VERSION;
    ctl->fifo_size    = fifo_size;
    ctl->cell_size    = (uint32_t)cell_size;
    ctl->cells_offset = (uint32_t)cells_offset;
    ctl->owner_uid    = (uint32_t)geteuid();
    ctl->senders      = nsenders;
    ctl->host_id      = host_id;
    ctl->owner        = *owner;
    axon_shm_fifo_view(fifo, ctl + 1, (char*)addr + cells_offset, fifo_size, cell_size);
    axon_shm_fifo_init(fifo);
    axon_shm_senders_view(senders, addr, nsenders);
    atomic_init(&senders->ctl->hwm, 0);
    senders->ctl->event_fd = event_fd;
    atomic_init(&senders->ctl->deaf_senders, 0);
    for (i = 0; i < nsenders; ++i) {
        atomic_init(&senders->slots[i].claim, AXON_SHM_FIFO_CLAIM_NONE);
        atomic_init(&senders->slots[i].owner, 0);
    }
    atomic_store_explicit(&ctl->magic, AXON_SHM_SEG_MAGIC, memory_order_release);

    axon_debug("created shm segment %s: %u cells of %zu bytes, %u sender slots, NUMA node %d",
               seg->name, fifo_size, cell_size, nsenders, seg->numa_node);
    return AXON_OK;

err_unmap:
    munmap(addr, length);
err_unlink:
    pthread_mutex_lock(&axon_shm_seg_lock);
    axon_list_del(&seg->list);
    pthread_mutex_unlock(&axon_shm_seg_lock);
    shm_unlink(seg->name);
    close(fd);
    return status;
}

void axon_shm_seg_destroy(axon_shm_seg_t *seg, axon_shm_senders_t *senders)
{
    pthread_mutex_lock(&axon_shm_seg_lock);
    axon_list_del(&seg->list);
    if (seg->owner_pid == getpid()) {
        atomic_store_explicit(&senders->ctl->closed, 1, memory_order_release);
        shm_unlink(seg->name);
    }
    pthread_mutex_unlock(&axon_shm_seg_lock);
    munmap(seg->addr, seg->length);
}

int axon_shm_seg_check(const char *name, const void *addr, size_t length,
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
    copy->senders      = ctl->senders;
    if (copy->version != AXON_SHM_SEG_VERSION) {
        axon_error("shm segment %s has layout version %u, this library speaks %u", name,
                   copy->version, AXON_SHM_SEG_VERSION);
        return 0;
    }
    if ((copy->fifo_size < 2) || (copy->fifo_size & (copy->fifo_size - 1)) ||
        (copy->cell_size < 2 * AXON_SHM_FIFO_ALIGN) || (copy->cell_size % AXON_SHM_FIFO_ALIGN) ||
        (copy->senders == 0) ||
        (copy->cells_offset < AXON_SHM_SEG_SLOTS_OFFSET +
                              (uint64_t)copy->senders * sizeof(axon_shm_sender_t)) ||
        (copy->cells_offset % AXON_SHM_FIFO_ALIGN) ||
        ((uint64_t)copy->cells_offset + (uint64_t)copy->fifo_size * copy->cell_size > length)) {
        axon_error("shm segment %s has a corrupt layout: %u sender slots, %u cells of %u bytes "
                   "at offset %u in %zu bytes", name, copy->senders, copy->fifo_size,
                   copy->cell_size, copy->cells_offset, length);
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
                                  size_t *length_p, axon_shm_fifo_t *fifo,
                                  axon_shm_senders_t *senders)
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
    if ((st.st_size < (off_t)AXON_SHM_SEG_SLOTS_OFFSET) || ((uintmax_t)st.st_size > SIZE_MAX)) {
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
    axon_shm_seg_populate(addr, length);

    axon_shm_fifo_view(fifo, (axon_shm_seg_ctl_t*)addr + 1, (char*)addr + ctl.cells_offset,
                       ctl.fifo_size, ctl.cell_size);
    axon_shm_senders_view(senders, addr, ctl.senders);
    *addr_p   = addr;
    *length_p = length;
    return AXON_OK;

err_close:
    close(fd);
    return AXON_ERR_UNREACHABLE;
}

static int axon_shm_pid_order(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

    return (x > y) - (x < y);
}

unsigned axon_shm_seg_count_procs(const char *name)
{
    const char    *lead = (name[0] == '/') ? name + 1 : name;
    const char    *cut;
    pid_t         *pids = NULL, *grown;
    size_t         lead_len, count = 0, room = 0, i;
    unsigned       procs = 0;
    struct dirent *entry;
    pid_t          pid;
    DIR           *dir;

    /* The lead "<prefix>-<uid>-": name without its last two fields. */
    cut = strrchr(lead, '-');
    while ((cut != NULL) && (cut > lead) && (cut[-1] != '-')) {
        --cut;
    }
    if ((cut == NULL) || (cut == lead)) {
        return 1;
    }
    lead_len = (size_t)(cut - lead);
    dir      = opendir(AXON_SHM_DIR);
    if (dir == NULL) {
        return 1;
    }
    while ((entry = readdir(dir)) != NULL) {
        pid = axon_shm_seg_name_pid(entry->d_name, lead, lead_len);
        if ((pid == 0) || ((kill(pid, 0) != 0) && (errno != EPERM))) {
            continue;   /* not a segment name, or its process is gone */
        }
        if (count == room) {
            room  = room ? 2 * room : 64;
            grown = realloc(pids, room * sizeof(*pids));
            if (grown == NULL) {
                break;
            }
            pids = grown;
        }
        pids[count++] = pid;
    }
    closedir(dir);
    /* A process has a segment per worker: count each once. */
    if (count > 0) {
        qsort(pids, count, sizeof(*pids), axon_shm_pid_order);
    }
    for (i = 0; i < count; ++i) {
        procs += (i == 0) || (pids[i] != pids[i - 1]);
    }
    free(pids);
    return (procs > 0) ? procs : 1;
}

void axon_shm_seg_detach(void *addr, size_t length)
{
    munmap(addr, length);
}

/* ---------------------------------------------------------------- sender slots */

static inline int32_t axon_shm_sender_pid(uint64_t word)
{
    return (int32_t)(word & AXON_SHM_SENDER_PID_MASK);
}

/* The owner word once the slot went to pid (0: freed): next generation, not ready. */
static inline uint64_t axon_shm_sender_next(uint64_t word, int32_t pid)
{
    return ((word & ~(AXON_SHM_SENDER_PID_MASK | AXON_SHM_SENDER_READY)) +
            AXON_SHM_SENDER_GEN_ONE) | (uint32_t)pid;
}

/*
 * Is the owner of slot, whose owner word was word, verifiably dead? The
 * identity is read seqlock-style: a slot that changed hands meanwhile is not
 * judged. A slot not yet ready is never judged: its pid alone could be one of
 * another pid namespace. Its owner cannot have sent anything yet, so at worst
 * the slot leaks (an owner killed within a few instructions of taking it).
 */
static int axon_shm_sender_is_dead(axon_shm_sender_t *slot, uint64_t word,
                                   const axon_proc_t *self, const char **why)
{
    axon_proc_t proc;

    if (!(word & AXON_SHM_SENDER_READY)) {
        return 0;
    }
    memset(&proc, 0, sizeof(proc));
    proc.pid        = axon_shm_sender_pid(word);
    proc.start_time = atomic_load_explicit(&slot->start_time, memory_order_relaxed);
    proc.ns_id      = atomic_load_explicit(&slot->ns_id, memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&slot->owner, memory_order_relaxed) != word) {
        return 0;
    }
    return axon_proc_comparable(&proc, self) && axon_proc_is_gone(&proc, why);
}

/*
 * Does the slot hold no cell of the ring? True when it announces nothing, or
 * when the position it announces was published since (a cell's sequence
 * number only grows, and passes pos only by the publication of pos).
 */
static int axon_shm_sender_is_settled(axon_shm_sender_t *slot, const axon_shm_fifo_t *fifo)
{
    uint64_t claim = atomic_load_explicit(&slot->claim, memory_order_acquire);
    uint64_t seq;

    if (claim == AXON_SHM_FIFO_CLAIM_NONE) {
        return 1;
    }
    seq = atomic_load_explicit(&axon_shm_fifo_cell(fifo, claim)->seq, memory_order_acquire);
    return (int64_t)(seq - claim) > 0;
}

axon_status_t axon_shm_sender_acquire(const axon_shm_senders_t *senders,
                                      const axon_shm_fifo_t *fifo, const axon_proc_t *self,
                                      const char *seg_name, axon_shm_sender_t **slot_p,
                                      uint64_t *word_p)
{
    axon_shm_sender_t *slot;
    const char        *why = "";
    uint64_t           word, next;
    uint32_t           i, hwm;
    int                reclaim;

    /* First a free slot; only when there is none, one of a dead process (reads /proc). */
    for (reclaim = 0; reclaim <= 1; ++reclaim) {
        for (i = 0; i < senders->count; ++i) {
            slot = &senders->slots[i];
            word = atomic_load_explicit(&slot->owner, memory_order_acquire);
            if (axon_shm_sender_pid(word) == 0) {
                if (reclaim) {
                    continue;
                }
            } else if (!reclaim || !axon_shm_sender_is_dead(slot, word, self, &why) ||
                       !axon_shm_sender_is_settled(slot, fifo)) {
                continue;
            }
            next = axon_shm_sender_next(word, self->pid);
            if (atomic_compare_exchange_strong_explicit(&slot->owner, &word, next,
                                                        memory_order_acq_rel,
                                                        memory_order_relaxed)) {
                goto taken;
            }
        }
    }
    axon_error("shm segment %s: all %u sender slots are taken (raise AXON_SHM_MAX_SENDERS "
               "in the receiving process)", seg_name, senders->count);
    return AXON_ERR_NO_RESOURCE;

taken:
    if (reclaim) {
        axon_debug("shm segment %s: took sender slot %u of process %d (%s)", seg_name, i,
                   axon_shm_sender_pid(word), why);
    }
    /* No one judges a slot that is not ready: plain stores, then release the identity. */
    atomic_store_explicit(&slot->start_time, self->start_time, memory_order_relaxed);
    atomic_store_explicit(&slot->ns_id, self->ns_id, memory_order_relaxed);
    next |= AXON_SHM_SENDER_READY;
    atomic_store_explicit(&slot->owner, next, memory_order_release);
    /* Before our first claim: whoever sees our claims scans far enough (see below). */
    hwm = atomic_load_explicit(&senders->ctl->hwm, memory_order_relaxed);
    while ((hwm <= i) &&
           !atomic_compare_exchange_weak_explicit(&senders->ctl->hwm, &hwm, i + 1,
                                                  memory_order_release, memory_order_relaxed)) {
    }
    *slot_p = slot;
    *word_p = next;
    return AXON_OK;
}

void axon_shm_sender_release(axon_shm_sender_t *slot, uint64_t word)
{
    /* Fails only if someone judged us dead: the slot is no longer ours then. */
    atomic_compare_exchange_strong_explicit(&slot->owner, &word, axon_shm_sender_next(word, 0),
                                            memory_order_release, memory_order_relaxed);
}

/* Dead slots one unstick frees at once; any more are reclaimed by a later acquire. */
#define AXON_SHM_UNSTICK_FREE_MAX 8

/*
 * Why dropping the stuck cell at head is safe. Let C be the producer whose
 * tail CAS took head.
 * 1. C stored claim = head (release) before that CAS (release), and every
 *    later change of the tail is a CAS too: our acquire load of the tail
 *    (axon_shm_fifo_is_claimed) synchronizes with C's CAS. So C's slot reads
 *    head, or a later value, which C stores only after publishing head, with
 *    release: then the publication is visible and the drop's CAS fails.
 *    The hwm C raised before its first claim is visible the same way.
 * 2. C's slot changes hands only after C published head (ep_destroy), or if C
 *    is dead and head settled: while head is stuck, C's slot announces it.
 * 3. Other slots may announce head too: a producer whose CAS lost, or one
 *    killed before its CAS. We drop head only if every slot announcing it is
 *    verifiably dead, so C is; a process leaves /proc only after the kernel
 *    ran its exit, so none of its stores are still to come.
 * 4. The drop is a CAS on the cell's seq from head: a publication we did not
 *    see is never overwritten.
 * A live producer that lost the race announces its next try, or NONE on a
 * full ring, so it delays a drop by one retry; a stopped one (SIGSTOP, a
 * debugger) delays it until it runs again.
 */
int axon_shm_senders_unstick(const axon_shm_senders_t *senders, const axon_shm_fifo_t *fifo,
                             uint64_t head, const axon_proc_t *self, const char *seg_name)
{
    uint64_t           words[AXON_SHM_UNSTICK_FREE_MAX];
    uint32_t           idx[AXON_SHM_UNSTICK_FREE_MAX];
    axon_shm_sender_t *slot;
    const char        *why = "";
    uint64_t           word;
    uint32_t           i, hwm, found = 0;

    if (!axon_shm_fifo_is_claimed(fifo, head)) {
        return 0;
    }
    hwm = atomic_load_explicit(&senders->ctl->hwm, memory_order_acquire);
    if (hwm > senders->count) {
        hwm = senders->count;
    }
    for (i = 0; i < hwm; ++i) {
        slot = &senders->slots[i];
        word = atomic_load_explicit(&slot->owner, memory_order_acquire);
        if ((axon_shm_sender_pid(word) == 0) ||
            (atomic_load_explicit(&slot->claim, memory_order_acquire) != head)) {
            continue;
        }
        if (!axon_shm_sender_is_dead(slot, word, self, &why)) {
            return 0;  /* may be the one filling it */
        }
        if (found < AXON_SHM_UNSTICK_FREE_MAX) {
            idx[found]   = i;
            words[found] = word;
        }
        ++found;
    }
    /* None: its producer published and moved on since (or holds no slot: wait). */
    if ((found == 0) || !axon_shm_fifo_drop_claimed(fifo, head)) {
        return 0;
    }

    axon_warn("shm %s: dropped ring position %llu, claimed by a sender that died before "
              "publishing it (process %d: %s%s)", seg_name, (unsigned long long)head,
              axon_shm_sender_pid(words[0]), why, (found > 1) ? "; and others" : "");
    for (i = 0; (i < found) && (i < AXON_SHM_UNSTICK_FREE_MAX); ++i) {
        word = words[i];
        atomic_compare_exchange_strong_explicit(&senders->slots[idx[i]].owner, &word,
                                                axon_shm_sender_next(word, 0),
                                                memory_order_release, memory_order_relaxed);
    }
    return 1;
}
