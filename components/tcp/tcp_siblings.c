/*
 * A worker's tcp ifaces, one per interface, learn each other's peer
 * failures. With rails (api/core/rails.c) one message streams over several
 * of them at once, each placing its stripe straight into the receive
 * buffer; when one connection to a peer dies the worker fails the peer and
 * the receive, and the user may free the buffer at once. The peer's other
 * connections must stop placing before that: the iface that saw the
 * failure closes them too, here, before it reports it.
 *
 * A process-wide list under a lock: ifaces of other workers (other threads)
 * come and go while one looks; the siblings it touches are its own
 * worker's, used by the same thread.
 */
#include <pthread.h>
#include "tcp.h"

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

void axon_tcp_siblings_fail_peer(axon_tcp_iface_t *iface, uint64_t peer_uuid,
                                 axon_status_t status)
{
    axon_tcp_iface_t *sibling;

    pthread_mutex_lock(&axon_tcp_all_lock);
    axon_list_for_each(sibling, &axon_tcp_all_ifaces, sibling_link) {
        if ((sibling != iface) && (sibling->worker_uuid == iface->worker_uuid)) {
            axon_tcp_iface_close_peer(sibling, peer_uuid, status);
        }
    }
    pthread_mutex_unlock(&axon_tcp_all_lock);
}
