/*
 * rdmacm: rc with the RDMA connection manager as its connection manager
 * (axon_rc_cm_t in components/verbs/rc.h): RC QPs connected through the
 * device layer's CM (dev_cm.h), librdmacm on a real NIC, softib's CM on
 * softib. Everything else is the rc library's code (tuned with AXON_RC_*);
 * this folder holds the component's descriptor and the manager.
 *
 * Iface: rc's queues on the CM's shared device context, plus an event
 * channel and a listening id bound to the device's IPv4 address. Device
 * address: that IPv4 (with the host and network namespace, as tcp's, since
 * every host has its own 127.0.0.1); iface address: the listening port.
 *
 * Connection (one RC QP per pair of workers, used both ways):
 *   active:  ep_create -> resolve_addr (src = our address) -> ADDR_RESOLVED
 *            -> resolve_route -> ROUTE_RESOLVED -> connect with a HELLO in
 *            the private data -> ESTABLISHED (the peer's HELLO) -> sends go;
 *   passive: CONNECT_REQUEST (HELLO) -> QP on the new id -> accept with our
 *            HELLO -> ESTABLISHED.
 *   A HELLO names both workers, the sender's receive window and keep-alive
 *   target. Simultaneous connects: the connection of the worker with the
 *   lower uuid stays; the other side's request is rejected (RACE) and its
 *   eps move to the connection it accepts.
 *   Errors: REJECTED, ADDR_ERROR, ROUTE_ERROR -> AXON_ERR_UNREACHABLE;
 *   UNREACHABLE, CONNECT_ERROR -> AXON_ERR_ENDPOINT_TIMEOUT; each with one
 *   line naming the address and the reason. DISCONNECTED after the peer's
 *   goodbye (rc's BYE) is a close, before it a peer failure.
 * The event channel is read from rc's timer pass, non-blocking: every
 * progress call while a connection is coming up, else now and then.
 */
#ifndef AXON_RDMACM_H
#define AXON_RDMACM_H

#include <netinet/in.h>
#include <stdint.h>
#include "dev_cm.h"
#include "rc.h"

#define AXON_RDMACM_EVENTS_MAX    16     /* events handled per progress call */
#define AXON_RDMACM_WIRE_VERSION  0xa1

/* conn->cm_flags */
#define AXON_RDMACM_F_ESTABLISHED 0x01   /* the CM said ESTABLISHED: disconnect on teardown */
#define AXON_RDMACM_F_LOST_RACE   0x02   /* the peer connects to us instead (simultaneous) */

/* Private data of connect, accept and reject */
typedef enum {
    AXON_RDMACM_REJ_NONE = 0,
    AXON_RDMACM_REJ_RACE,           /* simultaneous connect: the lower uuid's stays */
    AXON_RDMACM_REJ_WRONG_WORKER,   /* the address is another worker's now */
    AXON_RDMACM_REJ_VERSION,
    AXON_RDMACM_REJ_NO_RESOURCE,
    AXON_RDMACM_REJ_LAST
} axon_rdmacm_rej_t;

typedef struct __attribute__((packed)) axon_rdmacm_hello {
    uint8_t  version;    /* AXON_RDMACM_WIRE_VERSION */
    uint8_t  reason;     /* reject: axon_rdmacm_rej_t */
    uint16_t window;     /* credits the sender grants */
    uint32_t ka_rkey;
    uint64_t src_uuid;
    uint64_t dst_uuid;
    uint64_t ka_addr;    /* sender's keep-alive target */
} axon_rdmacm_hello_t;

_Static_assert(sizeof(axon_rdmacm_hello_t) <= AXON_DEV_CM_CONNECT_PDATA_MAX,
               "a HELLO fits the private data of a connect");

typedef struct __attribute__((packed)) axon_rdmacm_dev_addr {
    uint32_t ip;         /* IPv4, network order */
    uint64_t host_id;    /* axon_sys_host_id() */
    uint64_t netns;      /* inode of /proc/self/ns/net */
} axon_rdmacm_dev_addr_t;

typedef struct __attribute__((packed)) axon_rdmacm_iface_addr {
    uint16_t port;       /* network order */
} axon_rdmacm_iface_addr_t;

/* Options, read from AXON_RDMACM_* (rdmacm_component.c) */
typedef struct axon_rdmacm_config {
    char     *addr;      /* "auto": the IPv4 of the port's GID table */
    unsigned  port;
    double    resolve_timeout;
} axon_rdmacm_config_t;

typedef struct axon_rdmacm_iface {
    axon_rc_iface_t          rc;          /* first: rc's calls take the iface */
    axon_dev_cm_channel_t   *channel;
    axon_dev_cm_id_t        *listen_id;
    struct sockaddr_in       addr;        /* ours: IPv4 and listening port */
    uint64_t                 host_id;
    uint64_t                 netns;
    int                      timeout_ms;  /* address and route resolution */
    char                     addr_str[32];
} axon_rdmacm_iface_t;

/* rdmacm_iface.c: the manager rc calls */
extern const axon_rc_cm_t axon_rdmacm_cm;

/* rdmacm_cm.c */
unsigned      axon_rdmacm_cm_progress(axon_rc_iface_t *iface);
/* Active side: a connection to peer_uuid at dst, waiting for the CM. */
axon_status_t axon_rdmacm_cm_connect(axon_rdmacm_iface_t *iface, uint64_t peer_uuid,
                                     const struct sockaddr_in *dst, axon_rc_conn_t **conn_p);
/* The iface's device through the CM's shared context. */
axon_status_t axon_rdmacm_dev_open(axon_verbs_dev_t *dev, const char *dev_name, int gid_index);
void          axon_rdmacm_dev_close(axon_verbs_dev_t *dev);
/* Disconnect (if it was up), destroy the QP and the id. */
void          axon_rdmacm_conn_destroy(axon_rc_conn_t *conn);

#endif
