/*
 * A worker's tcp ifaces, one per interface, learn each other's peer
 * failures. With rails (api/core/rails.c) one message streams over several
 * of them at once, each placing its stripe straight into the receive
 * buffer; when one connection to a peer dies the worker fails the peer and
 * the receive, and the user may free the buffer at once. The peer's other
 * connections must stop placing before that: the iface that saw the
 * failure closes them too, here, and before it reports the failure it
 * completes their zero-copy sends that the close failed (the worker tells
 * the user of a failed peer last, once its requests are done).
 *
 * A process-wide list under a lock: ifaces of other workers (other threads)
 * come and go while one looks; the siblings it touches are its own
 * worker's, used by the same thread.
 */
#include <pthread.h>
#include "tcp.h"

/* More interfaces than any host here has; past it, the rest learn from their own sockets. */
#define AXON_TCP_SIBLINGS_MAX 64

static axon_list_link_t axon_tcp_all_ifaces = {&axon_tcp_all_ifaces, &axon_tcp_all_ifaces};
static pthread_mutex_t  axon_tcp_all_lock   = PTHREAD_MUTEX_INITIALIZER;

void axon_tcp_siblings_add(axon_tcp_iface_t *iface)
{
    pthread_mutex_lock(&axon_tcp_all_lock);
    axon_list_add_tail(&axon_tcp_all_ifaces, &iface->sibling_link);
    pthread_mutex_unlock(&axon_tcp_all_lock);
}

void axon_tcp_siblings_del(axon_tcp_iface_t *iface)
{
    pthread_mutex_lock(&axon_tcp_all_lock);
    axon_list_del(&iface->sibling_link);
    pthread_mutex_unlock(&axon_tcp_all_lock);
}

/*
 * The other tcp ifaces of iface's worker, at most max. They are the same
 * thread's, so they stay while it uses them: the lock covers the list only,
 * and is not held while they run (what they call may come back here).
 */
static unsigned axon_tcp_siblings_of(const axon_tcp_iface_t *iface, axon_tcp_iface_t **out,
                                     unsigned max)
{
    axon_tcp_iface_t *sibling;
    unsigned          n = 0;

    pthread_mutex_lock(&axon_tcp_all_lock);
    axon_list_for_each(sibling, &axon_tcp_all_ifaces, sibling_link) {
        if ((sibling != iface) && (sibling->worker_uuid == iface->worker_uuid) && (n < max)) {
            out[n++] = sibling;
        }
    }
    pthread_mutex_unlock(&axon_tcp_all_lock);
    return n;
}

void axon_tcp_siblings_fail_peer(axon_tcp_iface_t *iface, uint64_t peer_uuid,
                                 axon_status_t status)
{
    axon_tcp_iface_t *siblings[AXON_TCP_SIBLINGS_MAX];
    unsigned          n, i;

    n = axon_tcp_siblings_of(iface, siblings, AXON_TCP_SIBLINGS_MAX);
    for (i = 0; i < n; ++i) {
        axon_tcp_iface_close_peer(siblings[i], peer_uuid, status);
    }
}

unsigned axon_tcp_siblings_dispatch_ep_reports(axon_tcp_iface_t *iface)
{
    axon_tcp_iface_t *siblings[AXON_TCP_SIBLINGS_MAX];
    unsigned          n, i, count = 0;

    n = axon_tcp_siblings_of(iface, siblings, AXON_TCP_SIBLINGS_MAX);
    for (i = 0; i < n; ++i) {
        count += axon_tcp_iface_dispatch_ep_reports(siblings[i]);
    }
    return count;
}
