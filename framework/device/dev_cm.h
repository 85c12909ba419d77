/*
 * The connection manager of the device layer: rdma_cm-shaped connection
 * set-up for RC QPs (seed §5 RDMA_CM, events §7.3), on softib and, through
 * librdmacm, on real NICs. An id is created on an event channel, bound to a
 * device when an address resolves (or is bound) to one, and its QP is driven
 * to RTR/RTS by the CM on connect/accept, as rdma_create_qp arranges.
 *
 * Active side:  create_id, resolve_addr -> ADDR_RESOLVED, resolve_route ->
 *               ROUTE_RESOLVED, create_qp, connect -> ESTABLISHED (or, with
 *               no QP on the id, CONNECT_RESPONSE then establish()),
 *               REJECTED, UNREACHABLE or CONNECT_ERROR.
 * Passive side: create_id, bind_addr, listen -> CONNECT_REQUEST (event->id is
 *               a new id, event->listen_id the listener), create_qp on the new
 *               id, accept -> ESTABLISHED, or reject.
 * Both:         disconnect -> DISCONNECTED on both sides (the QP goes to the
 *               error state and flushes), then TIMEWAIT_EXIT.
 * UD (RDMA_PS_UDP, softib only), the IB CM's SIDR exchange: create_qp makes
 *               a UD QP ready to send (RTS, qkey AXON_DEV_CM_UDP_QKEY);
 *               connect -> ESTABLISHED with param.ud (the peer's QPN, qkey
 *               and the AH attributes to reach it), or REJECTED/UNREACHABLE;
 *               the passive side sees CONNECT_REQUEST (param.ud) and accept
 *               answers with no event of its own. There is no connection to
 *               disconnect.
 *
 * Conventions are dev.h's: 0 or a positive errno, EINVAL plus a log line
 * naming the bad value, nothing changed on error. Values are librdmacm's
 * (event types, port spaces, reject reasons, private data sizes), so the
 * librdmacm back end converts by copy. Differences from librdmacm:
 *   - IPv4 only; port spaces TCP and (softib) UDP; a NULL channel
 *     (synchronous ids) is not supported;
 *   - destroy_id does not block on unacknowledged events: the id's memory
 *     stays until they are acknowledged (the id is unusable at once);
 *   - objects made on id->verbs (PD, CQ, MR) must be destroyed before the
 *     last id on that device: the CM closes a device with its last id.
 * One channel and its ids may be used by several threads; events of one
 * channel are delivered in the order they happened.
 */
#ifndef AXON_DEV_CM_H
#define AXON_DEV_CM_H

#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>
#include "dev.h"

#ifdef __cplusplus
extern "C" {
#endif

/* enum rdma_cm_event_type */
typedef enum {
    AXON_DEV_CM_EVENT_ADDR_RESOLVED    = 0,
    AXON_DEV_CM_EVENT_ADDR_ERROR       = 1,
    AXON_DEV_CM_EVENT_ROUTE_RESOLVED   = 2,
    AXON_DEV_CM_EVENT_ROUTE_ERROR      = 3,
    AXON_DEV_CM_EVENT_CONNECT_REQUEST  = 4,
    AXON_DEV_CM_EVENT_CONNECT_RESPONSE = 5,
    AXON_DEV_CM_EVENT_CONNECT_ERROR    = 6,
    AXON_DEV_CM_EVENT_UNREACHABLE      = 7,
    AXON_DEV_CM_EVENT_REJECTED         = 8,
    AXON_DEV_CM_EVENT_ESTABLISHED      = 9,
    AXON_DEV_CM_EVENT_DISCONNECTED     = 10,
    AXON_DEV_CM_EVENT_DEVICE_REMOVAL   = 11,
    AXON_DEV_CM_EVENT_MULTICAST_JOIN   = 12,
    AXON_DEV_CM_EVENT_MULTICAST_ERROR  = 13,
    AXON_DEV_CM_EVENT_ADDR_CHANGE      = 14,
    AXON_DEV_CM_EVENT_TIMEWAIT_EXIT    = 15,
} axon_dev_cm_event_type_t;

/* "RDMA_CM_EVENT_ADDR_RESOLVED", ... (rdma_event_str) */
const char *axon_dev_cm_event_str(axon_dev_cm_event_type_t event);

/* enum rdma_port_space; the CM implements TCP (RC) and, on softib, UDP (UD). */
typedef enum {
    AXON_DEV_CM_PS_IPOIB = 0x0002,
    AXON_DEV_CM_PS_TCP   = 0x0106,
    AXON_DEV_CM_PS_UDP   = 0x0111,
    AXON_DEV_CM_PS_IB    = 0x013F,
} axon_dev_cm_port_space_t;

/*
 * REJECTED event status: the IB CM reject reason (positive), or a negative
 * errno on iWARP. softib models a RoCE port, so it reports these.
 */
#define AXON_DEV_CM_REJ_TIMEOUT            4   /* the requester gave up */
#define AXON_DEV_CM_REJ_INVALID_SERVICE_ID 8   /* nobody listens on that port */
#define AXON_DEV_CM_REJ_CONSUMER_DEFINED   28  /* the passive side called reject */

/* Private data limits of the IB CM messages, as librdmacm enforces them. */
#define AXON_DEV_CM_CONNECT_PDATA_MAX 56
#define AXON_DEV_CM_ACCEPT_PDATA_MAX  196
#define AXON_DEV_CM_REJECT_PDATA_MAX  148
#define AXON_DEV_CM_PDATA_MAX         196   /* the largest of the three */

/* RDMA_UDP_QKEY: the qkey of every UD QP of an RDMA_PS_UDP id. */
#define AXON_DEV_CM_UDP_QKEY 0x01234567u

/* struct rdma_conn_param */
typedef struct axon_dev_cm_conn_param {
    const void *private_data;
    uint8_t     private_data_len;
    uint8_t     responder_resources;  /* RDMA read/atomic the peer may have in flight to us */
    uint8_t     initiator_depth;      /* RDMA read/atomic we may have in flight */
    uint8_t     flow_control;
    uint8_t     retry_count;          /* ignored when accepting */
    uint8_t     rnr_retry_count;
    /* Ignored if a QP is created on the id. */
    uint8_t     srq;
    uint32_t    qp_num;
} axon_dev_cm_conn_param_t;

/* struct rdma_ud_param (private data first, as in conn) */
typedef struct axon_dev_cm_ud_param {
    const void        *private_data;
    uint8_t            private_data_len;
    axon_dev_ah_attr_t ah_attr;    /* to reach the peer's QP */
    uint32_t           qp_num;
    uint32_t           qkey;
} axon_dev_cm_ud_param_t;

typedef struct axon_dev_cm_channel axon_dev_cm_channel_t;
typedef struct axon_dev_cm_id      axon_dev_cm_id_t;

/* struct rdma_event_channel */
struct axon_dev_cm_channel {
    int fd;   /* readable (poll/epoll) while an event may wait; O_NONBLOCK makes get EAGAIN */
};

/* struct rdma_cm_id (the public part) */
struct axon_dev_cm_id {
    axon_dev_context_t      *verbs;      /* device it is bound to; NULL before */
    axon_dev_cm_channel_t   *channel;
    void                    *context;    /* the user's */
    axon_dev_qp_t           *qp;         /* from create_qp, or NULL */
    axon_dev_cm_port_space_t ps;
    uint8_t                  port_num;   /* of verbs, once bound */
    struct sockaddr_in       src_addr;   /* local address (port once bound) */
    struct sockaddr_in       dst_addr;   /* peer address (once resolved or connected) */
};

/* struct rdma_cm_event: valid until ack_event. */
typedef struct axon_dev_cm_event {
    axon_dev_cm_id_t        *id;         /* CONNECT_REQUEST: the new id */
    axon_dev_cm_id_t        *listen_id;  /* CONNECT_REQUEST: the listener */
    axon_dev_cm_event_type_t event;
    int                      status;     /* 0, -errno, or a reject reason (REJECTED) */
    union {
        /* CONNECT_REQUEST, CONNECT_RESPONSE, ESTABLISHED, REJECTED: the peer's
         * private data and its resources seen from this side */
        axon_dev_cm_conn_param_t conn;
        /* RDMA_PS_UDP ids: CONNECT_REQUEST, ESTABLISHED */
        axon_dev_cm_ud_param_t   ud;
    } param;
} axon_dev_cm_event_t;

/* ------------------------------------------------------------ channel */

int  axon_dev_cm_create_event_channel(axon_dev_cm_channel_t **channel_p);
/* EBUSY while ids live on it. */
int  axon_dev_cm_destroy_event_channel(axon_dev_cm_channel_t *channel);
/*
 * The next event, in order. Blocks unless channel->fd is O_NONBLOCK (then
 * EAGAIN). Every event must be acknowledged.
 */
int  axon_dev_cm_get_event(axon_dev_cm_channel_t *channel, axon_dev_cm_event_t **event_p);
int  axon_dev_cm_ack_event(axon_dev_cm_event_t *event);

/* ------------------------------------------------------------ ids */

int  axon_dev_cm_create_id(axon_dev_cm_channel_t *channel, void *context,
                           axon_dev_cm_port_space_t ps, axon_dev_cm_id_t **id_p);
/* Closes what the id holds: a connection is disconnected, a listener stops. */
int  axon_dev_cm_destroy_id(axon_dev_cm_id_t *id);

/* A local IPv4 address (INADDR_ANY: any device) and port (0: one is chosen). */
int  axon_dev_cm_bind_addr(axon_dev_cm_id_t *id, const struct sockaddr *addr);
/* backlog 0: the system's default. */
int  axon_dev_cm_listen(axon_dev_cm_id_t *id, int backlog);
/* src may be NULL; dst carries the port to connect to. -> ADDR_RESOLVED/ERROR */
int  axon_dev_cm_resolve_addr(axon_dev_cm_id_t *id, const struct sockaddr *src,
                              const struct sockaddr *dst, int timeout_ms);
/* -> ROUTE_RESOLVED/ERROR */
int  axon_dev_cm_resolve_route(axon_dev_cm_id_t *id, int timeout_ms);

/*
 * An RC QP on the id's device (pd must belong to id->verbs), taken to INIT;
 * connect/accept take it to RTR and RTS, disconnect to the error state.
 * On an RDMA_PS_UDP id a UD QP, taken to RTS at once.
 * init_attr's caps are written back. destroy_qp destroys it.
 */
int  axon_dev_cm_create_qp(axon_dev_cm_id_t *id, axon_dev_pd_t *pd,
                           axon_dev_qp_init_attr_t *init_attr);
int  axon_dev_cm_destroy_qp(axon_dev_cm_id_t *id);

/* Private data up to AXON_DEV_CM_CONNECT_PDATA_MAX bytes. */
int  axon_dev_cm_connect(axon_dev_cm_id_t *id, const axon_dev_cm_conn_param_t *param);
/* On a CONNECT_REQUEST's id; param may be NULL (the request's resources). */
int  axon_dev_cm_accept(axon_dev_cm_id_t *id, const axon_dev_cm_conn_param_t *param);
int  axon_dev_cm_reject(axon_dev_cm_id_t *id, const void *private_data,
                        uint8_t private_data_len);
/*
 * rdma_set_option (librdmacm's levels, names and value types). Level
 * AXON_DEV_CM_OPTION_ID: TOS (uint8_t, the traffic class of the id's
 * connection: its QP's GRH, and a UD peer's address handle), ACK_TIMEOUT
 * (uint8_t up to 31: the QP's local ACK timeout, 4.096 us * 2^value),
 * REUSEADDR and AFONLY (int; softib's CM binds with SO_REUSEADDR and speaks
 * IPv4 only, so both are taken and change nothing). Set before connect or
 * accept; a request's id starts with its listener's. Level
 * AXON_DEV_CM_OPTION_IB (an InfiniBand path record): ENOSYS. A wrong optlen
 * or value: EINVAL, each with a log line.
 */
#define AXON_DEV_CM_OPTION_ID              0
#define AXON_DEV_CM_OPTION_ID_TOS          0
#define AXON_DEV_CM_OPTION_ID_REUSEADDR    1
#define AXON_DEV_CM_OPTION_ID_AFONLY       2
#define AXON_DEV_CM_OPTION_ID_ACK_TIMEOUT  3
#define AXON_DEV_CM_OPTION_IB              1
#define AXON_DEV_CM_OPTION_IB_PATH         1

int  axon_dev_cm_set_option(axon_dev_cm_id_t *id, int level, int optname, const void *optval,
                            size_t optlen);

/*
 * rdma_init_qp_attr: the attributes and mask that take a QP the program made
 * itself (connect/accept with conn_param's qp_num, no QP on the id) to
 * attr->qp_state (INIT, RTR or RTS), as the CM takes its own: INIT once the
 * id has a device, RTR and RTS once the peer is known (a CONNECT_REQUEST's
 * id, or the requester after CONNECT_RESPONSE). RTS's sq_psn is the PSN the
 * id announces. EINVAL with a line before that.
 */
int  axon_dev_cm_init_qp_attr(axon_dev_cm_id_t *id, axon_dev_qp_attr_t *attr, int *mask_p);

/*
 * rdma_join_multicast / rdma_leave_multicast (seed §5.2.27-28) on an
 * RDMA_PS_UDP id bound to a device (bind_addr or resolve_addr first): addr
 * is an IPv4 multicast address (224.0.0.0/4), its group the MGID RoCE maps
 * it to (::ffff:a.b.c.d). join attaches the id's QP, if it has one, and
 * gives MULTICAST_JOIN with param.ud: the AH attributes of the group, QP
 * number 0xffffff, the qkey of RDMA_PS_UDP QPs, and private_data = context.
 * A second join of the same address on the id: EADDRINUSE. leave detaches
 * the QP (EADDRNOTAVAIL if the id did not join addr); destroy_id and
 * destroy_qp leave or detach by themselves. send_only (librdmacm's
 * RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER): the id may send to the group, its
 * QP is not attached. Not a multicast address, or another port space:
 * EINVAL; a back end without multicast: EOPNOTSUPP.
 */
int  axon_dev_cm_join_multicast(axon_dev_cm_id_t *id, const struct sockaddr *addr,
                                int send_only, void *context);
int  axon_dev_cm_leave_multicast(axon_dev_cm_id_t *id, const struct sockaddr *addr);

/* Active side of an id without a QP, after CONNECT_RESPONSE: send the RTU. */
int  axon_dev_cm_establish(axon_dev_cm_id_t *id);
int  axon_dev_cm_disconnect(axon_dev_cm_id_t *id);

/*
 * The device contexts the CM binds ids to are shared: every id on a device
 * gets the same context (so QPs of several ids can share a PD, CQs and an
 * SRQ), opened with the first id and closed with the last. A transport that
 * wants its queues on that context before any id exists opens the device
 * through here (a reference like an id's) and closes it after its ids.
 */
int  axon_dev_cm_open_device(const char *name, axon_dev_context_t **ctx_p);
void axon_dev_cm_close_device(axon_dev_context_t *ctx);

/* rdma_get_local_addr / rdma_get_peer_addr / rdma_get_src_port / _dst_port */
static inline const struct sockaddr *axon_dev_cm_local_addr(const axon_dev_cm_id_t *id)
{ return (const struct sockaddr *)&id->src_addr; }
static inline const struct sockaddr *axon_dev_cm_peer_addr(const axon_dev_cm_id_t *id)
{ return (const struct sockaddr *)&id->dst_addr; }
static inline uint16_t axon_dev_cm_src_port(const axon_dev_cm_id_t *id)
{ return id->src_addr.sin_port; }   /* network order, as rdma_get_src_port */
static inline uint16_t axon_dev_cm_dst_port(const axon_dev_cm_id_t *id)
{ return id->dst_addr.sin_port; }

#ifdef __cplusplus
}
#endif

#endif
