/*
 * The entry points softib's CM cannot serve, each failing the way librdmacm
 * reports failure (-1 or NULL with errno ENOSYS) after one log line naming
 * it: XRC SRQs, ECE, migrating ids, and rsockets.
 */
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>
#include "rcm.h"

int rcm_unsupported(const char *call)
{
    rcm_bridge()->log_error("%s is not supported", call);
    errno = ENOSYS;
    return -1;
}

#define RCM_NO(_call) rcm_unsupported(_call)

int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{ (void)id; (void)private_data; (void)private_data_len; return RCM_NO("rdma_reject_ece"); }
int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{ (void)id; (void)ece; return RCM_NO("rdma_set_local_ece"); }
int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{ (void)id; (void)ece; return RCM_NO("rdma_get_remote_ece"); }
int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{ (void)id; (void)event; return RCM_NO("rdma_notify"); }
int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{ (void)id; (void)channel; return RCM_NO("rdma_migrate_id"); }

/* ------------------------------------------------------------ rsockets */

int rsocket(int domain, int type, int protocol)
{ (void)domain; (void)type; (void)protocol; return RCM_NO("rsocket"); }
int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{ (void)socket; (void)addr; (void)addrlen; return RCM_NO("rbind"); }
int rlisten(int socket, int backlog) { (void)socket; (void)backlog; return RCM_NO("rlisten"); }
int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{ (void)socket; (void)addr; (void)addrlen; return RCM_NO("raccept"); }
int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen)
{ (void)socket; (void)addr; (void)addrlen; return RCM_NO("rconnect"); }
int rshutdown(int socket, int how) { (void)socket; (void)how; return RCM_NO("rshutdown"); }
int rclose(int socket) { (void)socket; return RCM_NO("rclose"); }
ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{ (void)socket; (void)buf; (void)len; (void)flags; return RCM_NO("rrecv"); }
ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags, struct sockaddr *src_addr,
                  socklen_t *addrlen)
{ (void)socket; (void)buf; (void)len; (void)flags; (void)src_addr; (void)addrlen;
  return RCM_NO("rrecvfrom"); }
ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{ (void)socket; (void)msg; (void)flags; return RCM_NO("rrecvmsg"); }
ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{ (void)socket; (void)buf; (void)len; (void)flags; return RCM_NO("rsend"); }
ssize_t rsendto(int socket, const void *buf, size_t len, int flags,
                const struct sockaddr *dest_addr, socklen_t addrlen)
{ (void)socket; (void)buf; (void)len; (void)flags; (void)dest_addr; (void)addrlen;
  return RCM_NO("rsendto"); }
ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{ (void)socket; (void)msg; (void)flags; return RCM_NO("rsendmsg"); }
ssize_t rread(int socket, void *buf, size_t count)
{ (void)socket; (void)buf; (void)count; return RCM_NO("rread"); }
ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)
{ (void)socket; (void)iov; (void)iovcnt; return RCM_NO("rreadv"); }
ssize_t rwrite(int socket, const void *buf, size_t count)
{ (void)socket; (void)buf; (void)count; return RCM_NO("rwrite"); }
ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)
{ (void)socket; (void)iov; (void)iovcnt; return RCM_NO("rwritev"); }
int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{ (void)fds; (void)nfds; (void)timeout; return RCM_NO("rpoll"); }
int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds,
            struct timeval *timeout)
{ (void)nfds; (void)readfds; (void)writefds; (void)exceptfds; (void)timeout;
  return RCM_NO("rselect"); }
int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen)
{ (void)socket; (void)addr; (void)addrlen; return RCM_NO("rgetpeername"); }
int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen)
{ (void)socket; (void)addr; (void)addrlen; return RCM_NO("rgetsockname"); }
int rsetsockopt(int socket, int level, int optname, const void *optval, socklen_t optlen)
{ (void)socket; (void)level; (void)optname; (void)optval; (void)optlen;
  return RCM_NO("rsetsockopt"); }
int rgetsockopt(int socket, int level, int optname, void *optval, socklen_t *optlen)
{ (void)socket; (void)level; (void)optname; (void)optval; (void)optlen;
  return RCM_NO("rgetsockopt"); }
int rfcntl(int socket, int cmd, ...) { (void)socket; (void)cmd; return RCM_NO("rfcntl"); }
off_t riomap(int socket, void *buf, size_t len, int prot, int flags, off_t offset)
{ (void)socket; (void)buf; (void)len; (void)prot; (void)flags; (void)offset;
  return RCM_NO("riomap"); }
int riounmap(int socket, void *buf, size_t len)
{ (void)socket; (void)buf; (void)len; return RCM_NO("riounmap"); }
size_t riowrite(int socket, const void *buf, size_t count, off_t offset, int flags)
{ (void)socket; (void)buf; (void)count; (void)offset; (void)flags;
  RCM_NO("riowrite"); return 0; }
