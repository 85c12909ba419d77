/*
 * Process identities from /proc: enough for one process to tell, from shared
 * memory, whether another still lives (shm peers, softib slot owners) even
 * after its pid was reused. Slow path only (open, liveness checks, reaping).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "log.h"
#include "proc.h"
#include "sys.h"

/* /proc/<pid>/stat fields we use (1-based numbers as in proc(5)). */
typedef struct axon_proc_stat {
    pid_t    pid;          /* 1 */
    char     state;        /* 3: R, S, D, T, Z (zombie), X (dead)... */
    uint64_t num_threads;  /* 20 */
    uint64_t start_time;   /* 22 */
} axon_proc_stat_t;

/* Parse a stat file; 0, or -errno (-ENOENT: no such process, -EIO: unparsable). */
static int axon_proc_read_stat(const char *path, axon_proc_stat_t *st)
{
    char     buf[1024];
    char    *p, *end;
    uint64_t value;
    ssize_t  n;
    int      fd, field, err;

    memset(st, 0, sizeof(*st));
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    n   = read(fd, buf, sizeof(buf) - 1);
    err = errno;
    close(fd);
    if (n <= 0) {
        return (n < 0) ? -err : -EIO;
    }
    buf[n] = '\0';

    st->pid = (pid_t)strtol(buf, NULL, 10);
    /* The command name (field 2) may hold spaces and parentheses: skip to its last ')'. */
    p = strrchr(buf, ')');
    if ((p == NULL) || (p[1] != ' ') || (p[2] == '\0')) {
        return -EIO;
    }
    p        += 2;
    st->state = *p;
    for (field = 3; field < 22; ++field) {
        p = strchr(p, ' ');
        if (p == NULL) {
            return -EIO;
        }
        ++p;
        if (field + 1 == 20) {
            st->num_threads = strtoull(p, NULL, 10);
        }
    }
    value = strtoull(p, &end, 10);
    if (end == p) {
        return -EIO;
    }
    st->start_time = value;
    return 0;
}

/* Identifies the namespaces pids and start times are read in; 0 if unknown. */
static uint64_t axon_proc_ns_id_read(void)
{
    struct stat st;
    uint64_t    ids[3] = {0, 0, 0};
    uint64_t    hash;

    if (stat("/proc/self/ns/pid", &st) != 0) {
        return 0;
    }
    ids[0] = st.st_dev;
    ids[1] = st.st_ino;
    /* /proc/<pid>/stat start times are shifted by the reader's time namespace (Linux >= 5.6). */
    if (stat("/proc/self/ns/time", &st) == 0) {
        ids[2] = st.st_ino;
    }
    hash = axon_sys_hash64(ids, sizeof(ids), 0);
    return (hash != 0) ? hash : 1;
}

void axon_proc_self(axon_proc_t *proc)
{
    axon_proc_stat_t st;

    memset(proc, 0, sizeof(*proc));
    proc->pid = (int32_t)getpid();
    /* A /proc mounted for another pid namespace would describe some other process. */
    if ((axon_proc_read_stat("/proc/self/stat", &st) != 0) || (st.pid != getpid())) {
        axon_debug("/proc/self/stat does not describe pid %d: peers cannot check "
                   "that this process lives, nor read its memory", proc->pid);
        return;
    }
    proc->start_time = st.start_time;
    proc->ns_id      = axon_proc_ns_id_read();
}

/* kill(pid, 0) says no such process (it says nothing of zombies). */
static int axon_proc_no_pid(pid_t pid)
{
    return (kill(pid, 0) != 0) && (errno == ESRCH);
}

int axon_proc_is_gone(const axon_proc_t *proc, const char **why)
{
    axon_proc_stat_t st;
    char                 path[32];
    int                  ret;

    if (axon_proc_no_pid(proc->pid)) {
        *why = "no such process";
        return 1;
    }
    if (proc->start_time == 0) {
        return 0;  /* nothing to compare with: alive as far as we can tell */
    }

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)proc->pid);
    ret = axon_proc_read_stat(path, &st);
    if (ret != 0) {
        /* Reaped since kill()? Anything else (hidepid, no /proc) proves nothing. */
        if (axon_proc_no_pid(proc->pid)) {
            *why = "no such process";
            return 1;
        }
        return 0;
    }
    if (st.start_time != proc->start_time) {
        *why = "its pid belongs to a newer process";
        return 1;
    }
    /* A zombie leader with live threads (it called pthread_exit) still counts them. */
    if (((st.state == 'Z') || (st.state == 'X')) && (st.num_threads <= 1)) {
        *why = "exited, not yet reaped by its parent";
        return 1;
    }
    return 0;
}
