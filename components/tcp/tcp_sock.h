/*
 * tcp socket helpers: option setup, listening and connecting, epoll
 * registration, and send/recv wrappers that never block and never raise
 * SIGPIPE (MSG_NOSIGNAL on every send; nothing here calls write()).
 */
#ifndef AXON_TCP_SOCK_H
#define AXON_TCP_SOCK_H

#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sys/types.h>
#include <sys/uio.h>
#include "tcp.h"

/* "192.0.2.1:4000", for log lines */
#define AXON_TCP_SA_STR_MAX 32

/* A socket call's errno as the status of the connection it failed on. */
axon_status_t axon_tcp_sock_errno_status(int err);

const char   *axon_tcp_sock_sa_str(const struct sockaddr_in *sa, char *buf, size_t max);

/* Apply the configured options (no delay, buffers, keep-alive) to a data socket. */
void          axon_tcp_sock_set_options(int fd, const axon_tcp_config_t *config,
                                        const char *iface_name);

/* A non-blocking listening socket on ip, on a port of [port_lo, port_hi] (0 = any). */
axon_status_t axon_tcp_sock_listen(const struct in_addr *ip, uint16_t port_lo, uint16_t port_hi,
                                   const axon_tcp_config_t *config, const char *iface_name,
                                   int *fd_p, uint16_t *port_p);

/*
 * Start a non-blocking connect. Returns AXON_OK with *fd_p set (the connect
 * may still be in flight; *err_p then holds 0 or EINPROGRESS, or the error
 * that made it fail at once), or an error when no socket could be made.
 */
axon_status_t axon_tcp_sock_connect(const struct sockaddr_in *sa, const axon_tcp_config_t *config,
                                    const char *iface_name, int *fd_p, int *err_p);

/* Register sock with events, or change them (a no-op when they are the same). */
axon_status_t axon_tcp_sock_epoll_add(int epfd, axon_tcp_sock_t *sock, uint32_t events);
void          axon_tcp_sock_set_events(int epfd, axon_tcp_sock_t *sock, uint32_t events);
/* Leave the epoll set and close; sock->fd becomes -1. */
void          axon_tcp_sock_close(int epfd, axon_tcp_sock_t *sock);

/* iov entries per call (callers pass at most 4). */
#define AXON_TCP_SOCK_IOV_MAX 8

/*
 * sendmsg of iov, never blocking, in pieces of chunk bytes at most: bytes
 * sent (0 when the socket is full) or -errno (only when nothing was sent).
 */
ssize_t       axon_tcp_sock_sendv(int fd, const struct iovec *iov, size_t iovcnt, size_t chunk);
/* recv of chunk bytes at most, never blocking: bytes read, 0 at end of stream, -EAGAIN
 * when empty, or -errno. */
ssize_t       axon_tcp_sock_recv(int fd, void *buf, size_t length, size_t chunk);

/* Drop the first n bytes of iov[0..*iovcnt), moving the rest to the front. */
void          axon_tcp_iov_advance(struct iovec *iov, size_t *iovcnt, size_t n);

/* Inode of this process's network namespace (0 if /proc is not mounted). */
uint64_t      axon_tcp_sock_netns(void);

/*
 * First IPv4 address of interface name: AXON_ERR_NO_DEVICE if it has none
 * or is down.
 */
axon_status_t axon_tcp_sock_if_addr(const char *name, struct in_addr *ip, struct in_addr *netmask,
                                    int *is_loopback);

#endif
