/*
 * Process identities: who a process is, well enough for another process to
 * tell from shared memory whether it still lives, even after its pid was
 * reused. Used by shm (peers, segment reaping) and softib (slot owners).
 */
#ifndef AXON_PROC_H
#define AXON_PROC_H

#include <stdint.h>

/*
 * A process across pid reuse: its pid, its start time, and the namespaces
 * both are read in. Two identities are comparable only with equal, known
 * ns ids: a pid from another pid namespace names some other process here,
 * and start times shift with the time namespace of the reader. The layout
 * is part of shared-memory formats: do not reorder.
 */
typedef struct axon_proc {
    uint64_t start_time;  /* clock ticks after boot, /proc/<pid>/stat field 22; 0 = unknown */
    uint64_t ns_id;       /* hash of the pid and time namespaces; 0 = unknown */
    int32_t  pid;
    uint32_t reserved;
} axon_proc_t;

/* This process's identity; fields it cannot learn (no /proc) are 0. */
void axon_proc_self(axon_proc_t *proc);

/* Do a and b name the same process (pid, start time and namespaces)? */
static inline int axon_proc_equal(const axon_proc_t *a, const axon_proc_t *b)
{
    return (a->pid == b->pid) && (a->start_time == b->start_time) && (a->ns_id == b->ns_id);
}

/* Can self tell whether the process proc names is alive, and read its memory by pid? */
static inline int axon_proc_comparable(const axon_proc_t *proc, const axon_proc_t *self)
{
    return (proc->ns_id != 0) && (proc->ns_id == self->ns_id) && (proc->pid > 0);
}

/*
 * Is the process (comparable with ours) verifiably gone: no such pid, an
 * exited zombie, or the pid now held by a process started at another time?
 * Sets *why then. 0 when it lives or we cannot tell. Reads /proc: slow path.
 */
int  axon_proc_is_gone(const axon_proc_t *proc, const char **why);

#endif
