/*
 * Guarded access to registered memory (softib_guard.h says why).
 *
 * A guard is a sigsetjmp point in the calling thread; the handler jumps to
 * the innermost one. sigsetjmp(.., 0) does not save the signal mask: the
 * handler runs with SA_NODEFER, so nothing is left blocked after the jump.
 * Nothing a guarded function does may hold a lock or own memory at the
 * fault: the jump leaves the frame without unwinding it.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include "log.h"
#include "softib_guard.h"

static __thread sigjmp_buf   *softib_guard_jmp;   /* innermost guard of this thread */
static struct sigaction       softib_guard_prev_segv, softib_guard_prev_bus;
static pthread_once_t         softib_guard_once = PTHREAD_ONCE_INIT;
static int                    softib_guard_status;
static atomic_ulong           softib_guard_nfaults;

static void softib_guard_handler(int sig, siginfo_t *info, void *uctx)
{
    sigjmp_buf             *jmp  = softib_guard_jmp;
    const struct sigaction *prev = (sig == SIGBUS) ? &softib_guard_prev_bus :
                                                     &softib_guard_prev_segv;

    if ((jmp != NULL) && (info->si_code > 0)) {   /* a real fault, not a kill(2) */
        softib_guard_jmp = NULL;
        siglongjmp(*jmp, 1);
    }
    if (prev->sa_flags & SA_SIGINFO) {
        prev->sa_sigaction(sig, info, uctx);
    } else if ((prev->sa_handler != SIG_DFL) && (prev->sa_handler != SIG_IGN)) {
        prev->sa_handler(sig);
    } else {
        /* The default action: a fault repeats when we return, a signal sent is sent again. */
        signal(sig, SIG_DFL);
        if (info->si_code <= 0) {
            raise(sig);
        }
    }
}

static void softib_guard_install(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = softib_guard_handler;
    sa.sa_flags     = SA_SIGINFO | SA_NODEFER | SA_RESTART | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if ((sigaction(SIGSEGV, &sa, &softib_guard_prev_segv) != 0) ||
        (sigaction(SIGBUS, &sa, &softib_guard_prev_bus) != 0)) {
        softib_guard_status = errno;
        axon_error("softib: cannot install the memory guard's handlers: %s",
                   strerror(softib_guard_status));
    }
}

int softib_guard_init(void)
{
    pthread_once(&softib_guard_once, softib_guard_install);
    return softib_guard_status;
}

int softib_guard_call(void (*fn)(void *arg), void *arg)
{
    sigjmp_buf  jmp;
    sigjmp_buf *volatile outer = softib_guard_jmp;

    if (sigsetjmp(jmp, 0) != 0) {
        softib_guard_jmp = outer;
        atomic_fetch_add_explicit(&softib_guard_nfaults, 1, memory_order_relaxed);
        return EFAULT;
    }
    softib_guard_jmp = &jmp;
    fn(arg);
    softib_guard_jmp = outer;
    return 0;
}

typedef struct {
    void       *dst;
    const void *src;
    size_t      len;
} softib_guard_copy_args_t;

static void softib_guard_copy_fn(void *arg)
{
    softib_guard_copy_args_t *c = arg;

    memcpy(c->dst, c->src, c->len);
}

int softib_guard_copy(void *dst, const void *src, size_t len, int zero_on_fault)
{
    softib_guard_copy_args_t c = {dst, src, len};

    if (softib_guard_call(softib_guard_copy_fn, &c) == 0) {
        return 0;
    }
    if (zero_on_fault) {
        memset(dst, 0, len);
    }
    return EFAULT;
}

unsigned long softib_guard_faults(void)
{
    return atomic_load_explicit(&softib_guard_nfaults, memory_order_relaxed);
}
