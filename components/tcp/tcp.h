/*
 * tcp: active messages between any two hosts over kernel TCP sockets, all
 * non-blocking and driven by one epoll set per iface.
 *
 * One iface per IPv4 network interface, listening on that interface's
 * address. A connection (axon_tcp_conn_t) carries frames both ways: its
 * receive side delivers to the iface's handlers whoever connected, and its
 * send side is shared by every ep of ours to that peer worker. ep_create
 * sends on an open connection with the peer when there is one (it connected
 * to us, or an ep of ours connected earlier) and connects only otherwise;
 * simultaneous connects end on one connection (rules in tcp_wire.h). So a
 * pair of workers that talk both ways (every receiver gets an ep back for
 * replies) uses one socket, and replies carry the ACKs of requests.
 *
 * Closing is per direction: destroying the last ep on a connection sends a
 * goodbye and keeps reading until the peer's; the socket closes when both
 * sides said goodbye. An end of stream without a goodbye is a peer failure:
 * every ep on the connection fails and peer_failure names the peer.
 *
 * An iface with nothing but a listening socket says so (super.idle): the
 * worker calls its progress once in AXON_IFACE_IDLE_POLLS calls, and it looks
 * at the socket at most every AXON_TCP_IDLE_POLL_NS (a syscall per 64 calls
 * still doubled a busy shm ping-pong's latency when the application's
 * progress loop is tight). With exactly one connection, progress
 * reads it with recv() instead of waiting in epoll_wait first (which still
 * runs every AXON_TCP_EPOLL_INTERVAL calls), so noticing and reading a
 * message is one syscall.
 *
 * Files by stage: tcp_component.c (configuration, resources), tcp_iface.c
 * (listening, progress, the connections' table and their ends),
 * tcp_conn_hs.c (accepting and the HELLO handshake), tcp_conn_rx.c (the
 * receive path: framing, placing, delivery), tcp_ep.c (connecting, the send
 * path), tcp_sock.c (socket helpers), tcp_siblings.c (a peer's failure on
 * every tcp iface of the worker), tcp_wire.c (the wire's checks).
 */
#ifndef AXON_TCP_H
#define AXON_TCP_H

#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sys/uio.h>
#include "component.h"
#include "list.h"
#include "log.h"
#include "tcp_wire.h"

/* Bandwidth estimate of the kernel's loopback (MB/s: memory copies through the stack). */
#define AXON_TCP_BANDWIDTH_LO  4000.0
/* Largest am_short (header + payload) and zero-copy AM header. */
#define AXON_TCP_MAX_SHORT     ((size_t)8192)
/* Largest zero-copy payload: fits the 32-bit frame length with room to spare. */
#define AXON_TCP_MAX_ZCOPY     ((size_t)1 << 30)
/* Bounds of AXON_TCP_SEG_SIZE (= max_bcopy; each ep holds a buffer of it). */
#define AXON_TCP_SEG_SIZE_MIN  ((size_t)1024)
#define AXON_TCP_SEG_SIZE_MAX  ((size_t)64 << 20)
/* Bounds of AXON_TCP_IO_CHUNK (bytes per bulk sendmsg or recv); control frames
 * go in the smallest. */
#define AXON_TCP_IO_CHUNK_MIN  ((size_t)64 << 10)
#define AXON_TCP_IO_CHUNK_MAX  ((size_t)64 << 20)
/* A receive buffer reads at least this much per recv(), to batch small frames. */
#define AXON_TCP_RX_BUF_MIN    ((size_t)64 << 10)
/* A receive buffer grown for an unplaced zero-copy frame up to this size stays grown. */
#define AXON_TCP_RX_BUF_KEEP   ((size_t)4 << 20)
/* epoll events taken per progress call, and recv() rounds per ready connection. */
#define AXON_TCP_EVENTS_MAX    64
#define AXON_TCP_RX_ROUNDS     16
/* Connections accepted per progress call, so a connect storm cannot starve receives. */
#define AXON_TCP_ACCEPT_BURST  16
/* An iface with only its listening socket looks at the clock every this many
 * progress calls, and polls once this long has passed (a connecting peer waits
 * that much longer for its accept). */
#define AXON_TCP_IDLE_POLL_NS       1000000ull
/* With one connection, progress reads it directly and calls epoll_wait this often. */
#define AXON_TCP_EPOLL_INTERVAL     64
/*
 * Keep-alive probing with AXON_TCP_KEEPALIVE=y: an idle connection to a host
 * that vanished (power loss, cable) is dropped after about
 * IDLE + INTVL * CNT seconds instead of the kernel's two hours.
 */
#define AXON_TCP_KEEPIDLE      5
#define AXON_TCP_KEEPINTVL     2
#define AXON_TCP_KEEPCNT       3

/* Options, read from AXON_TCP_* (see the table in tcp_component.c). */
typedef struct axon_tcp_config {
    axon_config_allow_list_t ifaces;           /* network interfaces to use */
    size_t                   seg_size;         /* max_bcopy, and each ep's send buffer */
    int                      nodelay;          /* TCP_NODELAY */
    size_t                   sndbuf;           /* SO_SNDBUF, 0 = kernel default */
    size_t                   rcvbuf;           /* SO_RCVBUF, 0 = kernel default */
    double                   connect_timeout;  /* seconds, connect + handshake */
    char                    *port_range;       /* "0" or "lo-hi" */
    int                      keepalive;        /* SO_KEEPALIVE with short probes */
    size_t                   io_chunk;         /* bytes per sendmsg / recv of bulk data */
} axon_tcp_config_t;

/*
 * Device address: where the interface is. Loopback addresses are compared
 * with the host and network namespace, since every host and container has
 * its own 127.0.0.1.
 */
typedef struct axon_tcp_dev_addr {
    uint32_t ip;         /* IPv4, network byte order */
    uint32_t netmask;    /* network byte order */
    uint64_t host_id;    /* axon_sys_host_id() */
    uint64_t netns;      /* inode of /proc/self/ns/net */
} __attribute__((packed)) axon_tcp_dev_addr_t;

/* Iface address: the listening port. */
typedef struct axon_tcp_iface_addr {
    uint16_t port;       /* network byte order */
} __attribute__((packed)) axon_tcp_iface_addr_t;

/* What an epoll event points to */
typedef enum {
    AXON_TCP_SOCK_LISTEN = 0,
    AXON_TCP_SOCK_CONN,    /* a connection, either role: axon_tcp_conn_t */
} axon_tcp_sock_kind_t;

/* Socket flags: the two halves of a graceful close (tcp_wire.h) */
#define AXON_TCP_SOCK_FLAG_GOODBYE  0x1  /* the peer said goodbye: it sends nothing more, and
                                          * its EOF is not a failure */
#define AXON_TCP_SOCK_FLAG_TX_DONE  0x2  /* we said goodbye: nothing more goes out */

/* What the listening socket and connections share: a socket in the epoll set. */
typedef struct axon_tcp_sock {
    int                  fd;        /* -1 once closed */
    uint32_t             events;    /* registered with epoll */
    uint8_t              kind;      /* axon_tcp_sock_kind_t */
    uint8_t              flags;     /* AXON_TCP_SOCK_FLAG_* */
    axon_status_t        status;    /* why the socket was closed, when it was */
    uint64_t             peer_uuid; /* connector: from ep_create; acceptor: from HELLO */
    struct sockaddr_in   peer_sa;   /* for log lines */
    axon_list_link_t     link;      /* iface->conns */
    axon_list_link_t     pend;      /* iface->reports or ->garbage */
} axon_tcp_sock_t;

typedef struct axon_tcp_ep   axon_tcp_ep_t;

/* Connection states */
typedef enum {
    AXON_TCP_CONN_CONNECTING = 0,  /* connector: connect() in flight */
    AXON_TCP_CONN_HANDSHAKE,       /* connector: HELLO queued or sent, reading the answer;
                                    * acceptor: reading HELLO */
    AXON_TCP_CONN_OPEN,            /* frames flow, both ways */
} axon_tcp_conn_state_t;

/*
 * One TCP connection, whichever side connected: the receive side parses
 * frames from it for the whole iface; the send side is shared by the eps
 * attached to it (tx_eps). Each ep queues what the socket did not take in
 * its own buffer, and only one ep has a queue at a time (tx_owner): the
 * others get AXON_ERR_NO_RESOURCE until it drained, so frames never
 * interleave.
 */
typedef struct axon_tcp_conn {
    axon_tcp_sock_t   sock;
    uint8_t           state;        /* axon_tcp_conn_state_t */
    uint8_t           connector;    /* we connected: our HELLO opened it */
    uint32_t          max_body;     /* largest plain frame body the peer announced */
    uint8_t           hs_sent;      /* connector: some of HELLO went out */
    unsigned          tx_count;     /* eps in tx_eps */
    axon_list_link_t  tx_eps;       /* eps sending on it, by axon_tcp_ep_t.conn_link */
    axon_tcp_ep_t    *tx_owner;     /* the ep whose queued bytes go out first, or NULL */
    double            deadline;     /* of connect(), while on iface->connecting */
    axon_list_link_t  connecting;   /* iface->connecting */
    axon_tcp_hs_t     hs;           /* HELLO (acceptor) or the answer (connector) */
    size_t            hs_got;
    /* Frames are parsed in place from [rx_head, rx_tail) of rx_buf. */
    char             *rx_buf;
    size_t            rx_cap;
    size_t            rx_base_cap;  /* rx_cap outside an oversized zero-copy frame */
    size_t            rx_head;
    size_t            rx_tail;
    size_t            rx_skip;      /* padding of a placed frame still to discard */
    int               rx_unplaced;  /* am_rx_dest declined the zero-copy frame at rx_head */
    /* Zero-copy placement in flight: frame header and AM header wait in rx_buf */
    char             *place_dest;
    size_t            place_len;
    size_t            place_done;
} axon_tcp_conn_t;

typedef struct axon_tcp_iface {
    axon_iface_t           super;
    int                    epfd;
    axon_tcp_sock_t        listen;
    unsigned               in_progress;  /* frees wait while events may point to sockets */
    unsigned               nconns;       /* connections in the epoll set */
    uint64_t               idle_next_ns; /* an idle iface looks at its socket from then */
    unsigned               epoll_skip;   /* empty recv() polls left before an epoll_wait */
    /* Receive side */
    void                  *am_arg;
    axon_am_handler_t      am_handlers[AXON_AM_ID_MAX];
    axon_am_rx_dest_t      am_rx_dest;
    axon_peer_failure_cb_t peer_failure;
    uint64_t               worker_uuid;
    axon_list_link_t       sibling_link; /* among all tcp ifaces (tcp_siblings.c) */
    /* Options */
    const axon_tcp_config_t *config;
    size_t                 max_short;
    size_t                 max_bcopy;
    /* Addresses */
    struct in_addr         ip;
    struct in_addr         netmask;
    uint16_t               port;         /* host byte order */
    int                    is_loopback;
    uint64_t               host_id;
    uint64_t               netns;
    char                   name[AXON_DEV_NAME_MAX + 8];  /* "tcp/eth0", for log lines */
    /* Endpoints, by axon_tcp_ep_t.link and .report */
    axon_list_link_t       eps;          /* live endpoints */
    axon_list_link_t       closing;      /* destroyed endpoints still sending */
    axon_list_link_t       ep_reports;   /* zero-copy sends of failed eps to complete */
    /* Connections, by the lists in axon_tcp_conn_t */
    axon_list_link_t       conns;        /* every open connection, both roles */
    axon_list_link_t       connecting;   /* connect() in flight (deadline) */
    axon_list_link_t       reports;      /* peer failures to deliver from progress */
    axon_list_link_t       garbage;
} axon_tcp_iface_t;

/* Endpoint states */
typedef enum {
    AXON_TCP_EP_CONNECTING = 0,  /* its connection is not open yet */
    AXON_TCP_EP_CONNECTED,
    AXON_TCP_EP_FAILED,          /* status says why; sends return it */
    AXON_TCP_EP_CLOSED,          /* the peer closed the connection on purpose */
    AXON_TCP_EP_CLOSING,         /* destroyed, flushing its last bytes and goodbye */
    AXON_TCP_EP_STATE_LAST
} axon_tcp_ep_state_t;

extern const char *const axon_tcp_ep_state_names[];

struct axon_tcp_ep {
    axon_tl_ep_t          super;
    axon_tcp_conn_t      *conn;         /* where it sends; NULL once failed or closed */
    uint64_t              peer_uuid;
    struct sockaddr_in    peer_sa;      /* the peer's listening address */
    axon_status_t         status;       /* FAILED, CLOSED: what sends return */
    uint8_t               state;        /* axon_tcp_ep_state_t */
    uint8_t               zc_active;    /* a zero-copy send is in flight */
    uint8_t               bye_queued;   /* CLOSING: the connection's goodbye is in its queue */
    axon_list_link_t      link;         /* iface->eps or ->closing */
    axon_list_link_t      conn_link;    /* conn->tx_eps */
    axon_list_link_t      report;       /* iface->ep_reports */
    /* Send queue: bytes [tx_off, tx_len) of tx_buf, then the zero-copy pieces. */
    size_t                tx_off;
    size_t                tx_len;
    size_t                tx_cap;       /* for messages; a goodbye may use 8 more */
    struct iovec          zc_iov[2];    /* unsent payload and padding ... */
    size_t                zc_iovcnt;    /* ... in zc_iov[0 .. zc_iovcnt) */
    axon_tl_completion_t *zc_comp;
    char                  tx_buf[] __attribute__((aligned(AXON_TCP_ALIGN)));
};

/* The ep that created a connector's connection (its only one until the connection opens). */
static inline axon_tcp_ep_t *axon_tcp_conn_first_ep(const axon_tcp_conn_t *conn)
{
    return axon_container_of(conn->tx_eps.next, axon_tcp_ep_t, conn_link);
}

/* Bytes an endpoint allocates (struct and send buffer). */
static inline size_t axon_tcp_ep_alloc_size(size_t seg_size)
{
    /* A frame of seg_size bytes, its header and padding, and room for a goodbye. */
    return sizeof(axon_tcp_ep_t) + axon_tcp_frame_wire_len(seg_size) + sizeof(axon_tcp_frame_t);
}

static inline size_t axon_tcp_max_short(size_t seg_size)
{
    return (seg_size < AXON_TCP_MAX_SHORT) ? seg_size : AXON_TCP_MAX_SHORT;
}

/*
 * A frame header from a peer whose plain bodies are at most max_body: NULL,
 * or why the stream is malformed. Inline: the receive loop runs it per frame.
 */
static inline const char *axon_tcp_frame_invalid(const axon_tcp_frame_t *frame,
                                                 uint32_t max_body)
{
    if (frame->flags & ~AXON_TCP_FRAME_FLAGS) {
        return "unknown flags";
    }
    if (frame->flags & AXON_TCP_FRAME_CTRL) {
        if ((frame->am_id != AXON_TCP_CTRL_GOODBYE) || (frame->length != 0) ||
            (frame->hdr_len != 0) || (frame->flags & AXON_TCP_FRAME_ZCOPY)) {
            return "unknown control frame";
        }
        return NULL;
    }
    if (frame->am_id >= AXON_AM_ID_MAX) {
        return "invalid am_id";
    }
    if (frame->flags & AXON_TCP_FRAME_ZCOPY) {
        if ((frame->hdr_len > frame->length) || (frame->hdr_len > AXON_TCP_MAX_SHORT) ||
            (frame->length - frame->hdr_len > AXON_TCP_MAX_ZCOPY)) {
            return "zero-copy lengths out of bounds";
        }
        return NULL;
    }
    if ((frame->hdr_len != 0) || (frame->length > max_body)) {
        return "length larger than the peer's segment size";
    }
    return NULL;
}

/* tcp_component.c: reject options we cannot work with (logs which); port range out. */
axon_status_t axon_tcp_config_check(const axon_tcp_config_t *config, uint16_t *port_lo,
                                    uint16_t *port_hi);

#define axon_tcp_conn_of(_sock) axon_container_of(_sock, axon_tcp_conn_t, sock)

/* Events a connection waits for: data, goodbye or death, and room while its ep has a queue. */
#define AXON_TCP_CONN_EVENTS_RX (EPOLLIN | EPOLLRDHUP)

/* tcp_iface.c */
axon_status_t axon_tcp_iface_open(const axon_resource_t *resource, const void *config,
                                  const axon_iface_params_t *params, axon_iface_t **iface_p);
/*
 * Check a peer's addresses; logs why not at log_level. AXON_ERR_INVALID_ADDR
 * for a malformed address, AXON_ERR_UNREACHABLE for one we cannot route to.
 */
axon_status_t axon_tcp_iface_check_peer(const axon_tcp_iface_t *iface, const void *dev_addr,
                                        const void *iface_addr, axon_log_level_t log_level,
                                        struct sockaddr_in *sa);
/* Free a closed connection now, or after progress if events may still point to it. */
void          axon_tcp_iface_release(axon_tcp_iface_t *iface, axon_tcp_sock_t *sock);
/*
 * Connections (tcp_iface.c). A connection to peer_uuid a new ep can send
 * on: open, and nobody said goodbye on it; NULL if none (exclude: skip it).
 */
axon_tcp_conn_t *axon_tcp_conn_find_open(axon_tcp_iface_t *iface, uint64_t peer_uuid,
                                         const axon_tcp_conn_t *exclude);
/* A connector's connection, already connecting (fd and state set by the caller). */
axon_status_t axon_tcp_conn_add(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn,
                                uint32_t events);
/* The connection is over: close it, fail its eps, report the peer unless graceful. */
void          axon_tcp_conn_fail(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn,
                                 axon_status_t status, int graceful);
/* Close a connection that never carried anything of ours: nothing to report. */
void          axon_tcp_conn_drop(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn);
/*
 * Our last sender on conn is done (its goodbye is out, or it never had one
 * to send): the connection closes if the peer is done too.
 */
void          axon_tcp_conn_tx_done(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn);
/* Write a goodbye straight to a socket with nothing of ours queued; 0 if it went out. */
int           axon_tcp_conn_say_goodbye(axon_tcp_conn_t *conn);
/*
 * A connection with peer_uuid failed: fail our other connections with it
 * too, on every tcp iface of the worker, so they do not wait for their own
 * sockets to notice (keep-alive may take seconds), nor place more of a
 * message into a receive buffer the failure releases.
 */
void          axon_tcp_iface_fail_peer(axon_tcp_iface_t *iface, uint64_t peer_uuid,
                                       axon_status_t status);
/* Close this iface's connections to the peer (fail_peer does that on every iface of
 * the worker, tcp_siblings.c). */
void          axon_tcp_iface_close_peer(axon_tcp_iface_t *iface, uint64_t peer_uuid,
                                        axon_status_t status);
/* The worker's tcp ifaces (tcp_siblings.c): a peer's failure closes its connections on all. */
void          axon_tcp_siblings_add(axon_tcp_iface_t *iface);
void          axon_tcp_siblings_del(axon_tcp_iface_t *iface);
void          axon_tcp_siblings_fail_peer(axon_tcp_iface_t *iface, uint64_t peer_uuid,
                                          axon_status_t status);
/* Complete the failed zero-copy sends of the worker's other tcp ifaces; how many. */
unsigned      axon_tcp_siblings_dispatch_ep_reports(axon_tcp_iface_t *iface);
/* Complete this iface's failed zero-copy sends (before any peer failure is reported). */
unsigned      axon_tcp_iface_dispatch_ep_reports(axon_tcp_iface_t *iface);
/* Put a connection in the iface's table and epoll set, waiting for events. */
axon_status_t axon_tcp_conn_register(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn,
                                     uint32_t events);
/* The peer closed or the socket failed: ret is recv()'s 0 or -errno. */
void          axon_tcp_conn_lost(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn, ssize_t ret);
/* The peer said goodbye and sent its last byte: close once ours are done too. */
void          axon_tcp_conn_peer_done(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn);

/* tcp_conn_hs.c: set-up. Accept what the listening socket holds; how many events. */
unsigned      axon_tcp_iface_accept(axon_tcp_iface_t *iface);
/* A connection still in its handshake is readable or writable: the next step. */
void          axon_tcp_conn_handshake(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn);

/* tcp_conn_rx.c: read what the connection holds, deliver it; returns completions. */
unsigned      axon_tcp_conn_rx(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn);
/* Progress: the connection's events. Returns completions. */
unsigned      axon_tcp_conn_handle_events(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn,
                                          uint32_t events);

/* tcp_ep.c */
axon_status_t axon_tcp_ep_create(axon_iface_t *tl_iface, uint64_t peer_uuid,
                                 const void *dev_addr, const void *iface_addr,
                                 axon_tl_ep_t **ep_p);
/*
 * Queued bytes still go out (from progress) before the goodbye. A zero-copy
 * send in flight cannot be finished without its buffer: it completes with
 * AXON_ERR_CANCELED inside this call and the connection is reset, so the
 * peer reports this worker failed, and this worker the peer.
 */
void          axon_tcp_ep_destroy(axon_tl_ep_t *tl_ep);
axon_status_t axon_tcp_ep_am_short(axon_tl_ep_t *tl_ep, uint8_t am_id, const void *hdr,
                                   size_t hdr_len, const void *payload, size_t length);
ssize_t       axon_tcp_ep_am_bcopy(axon_tl_ep_t *tl_ep, uint8_t am_id, axon_pack_cb_t pack,
                                   void *arg);
axon_status_t axon_tcp_ep_am_zcopy(axon_tl_ep_t *tl_ep, uint8_t am_id, const void *hdr,
                                   size_t hdr_len, const void *buffer, size_t length,
                                   axon_tl_completion_t *comp);
axon_status_t axon_tcp_ep_flush(axon_tl_ep_t *tl_ep);
axon_status_t axon_tcp_ep_check(axon_tl_ep_t *tl_ep);
/* Progress: room to send on the ep's connection; returns operations completed. */
unsigned      axon_tcp_ep_tx_progress(axon_tcp_ep_t *ep);
/* The ep's connection finished connect(): HELLO goes out. */
unsigned      axon_tcp_ep_connected(axon_tcp_ep_t *ep);
/* The connection accepted our HELLO: data may flow. */
void          axon_tcp_ep_open(axon_tcp_ep_t *ep);
/*
 * Move an ep whose own connection carried nothing but HELLO onto conn (an
 * open connection with the same peer). The old connection says goodbye if
 * HELLO went out, or is dropped if not a byte did.
 */
void          axon_tcp_ep_move(axon_tcp_ep_t *ep, axon_tcp_conn_t *conn);
/* An ep of ours to peer_uuid whose connection carried nothing yet, or NULL. */
axon_tcp_ep_t *axon_tcp_ep_find_unsent(axon_tcp_iface_t *iface, uint64_t peer_uuid);
/* The ep's connection is gone (ep already off it): graceful = the peer closed it on purpose. */
void          axon_tcp_ep_conn_lost(axon_tcp_ep_t *ep, axon_status_t status, int graceful);
/* Fail a connection whose connect() outlived AXON_TCP_CONNECT_TIMEOUT. */
void          axon_tcp_conn_check_timeout(axon_tcp_iface_t *iface, axon_tcp_conn_t *conn,
                                          double now);
/* iface_close: one last push of a CLOSING ep's queue, then free it. */
void          axon_tcp_ep_close_now(axon_tcp_ep_t *ep);

#endif
