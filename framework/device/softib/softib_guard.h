/*
 * Guarded access to registered memory.
 *
 * A NIC reaches registered memory through pinned pages: an application may
 * unmap a buffer while it is still registered (a registration cache keeps
 * it so until it notices), and a late request for it (a read re-executed
 * for a requester that asked again, a write retried) reads or writes the
 * old pages, invisible to everyone, without harm. softib reaches the same
 * memory through the process's own mapping, where that access would be a
 * SIGSEGV or SIGBUS. So every access softib makes on a request's behalf
 * runs guarded: a fault jumps back to the guard, which reports EFAULT, and
 * the caller does what the pinned pages would have (a read sees zeros, a
 * write is lost). A fault anywhere else goes on to the handler that was
 * there before (or the default action), as if softib's were not installed.
 */
#ifndef SOFTIB_GUARD_H
#define SOFTIB_GUARD_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Install the handlers (once per process); errno value, 0 on success. */
int softib_guard_init(void);

/* fn(arg) with faults on memory caught: 0, or EFAULT when it faulted (fn stopped there). */
int softib_guard_call(void (*fn)(void *arg), void *arg);

/* memcpy(dst, src, len) guarded; after a fault dst holds zeros when zero_on_fault. */
int softib_guard_copy(void *dst, const void *src, size_t len, int zero_on_fault);

/* Faults the guards caught in this process (tests, debugging). */
unsigned long softib_guard_faults(void);

#ifdef __cplusplus
}
#endif

#endif
