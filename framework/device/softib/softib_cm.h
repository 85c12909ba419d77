/*
 * softib's connection manager: the IB CM exchange (REQ, REP, RTU, REJ, DREQ,
 * DREP) carried over a TCP connection to AXON_SOFTIB_ADDR:<port>, as iWARP
 * carries its MPA exchange. softib_cm.c holds the calls of the device
 * layer's CM up to a connection (dev_cm_backend.h), softib_cm_conn.c the
 * connection and its messages, softib_cm_progress.c the socket side:
 * accepting, reading messages, timers, and the events they produce.
 */
#ifndef SOFTIB_CM_H
#define SOFTIB_CM_H

#include <stdint.h>
#include "dev_cm_backend.h"

#define SOFTIB_CM_MAGIC   0x5342434du   /* "SBCM" */
#define SOFTIB_CM_VERSION 1
/* Hop limit of the GRHs the CM hands out (UD peers, multicast groups) */
#define SOFTIB_CM_HOP_LIMIT 64

typedef enum {
    SOFTIB_CM_MSG_REQ = 1,
    SOFTIB_CM_MSG_REP,
    SOFTIB_CM_MSG_RTU,
    SOFTIB_CM_MSG_REJ,
    SOFTIB_CM_MSG_DREQ,
    SOFTIB_CM_MSG_DREP,
} softib_cm_msg_type_t;

/* One CM message, always sent whole; integers in network order. */
typedef struct softib_cm_msg {
    uint32_t magic;
    uint8_t  version;
    uint8_t  type;                 /* softib_cm_msg_type_t */
    uint8_t  pdata_len;
    uint8_t  mtu;                  /* axon_dev_mtu_t of the sender's port */
    uint32_t qpn;                  /* REQ, REP */
    uint32_t psn;                  /* REQ, REP: the sender's starting send PSN */
    uint8_t  gid[16];
    uint8_t  responder_resources;
    uint8_t  initiator_depth;
    uint8_t  retry_count;
    uint8_t  rnr_retry_count;
    uint8_t  srq;
    uint8_t  flow_control;
    uint16_t reason;               /* REJ: AXON_DEV_CM_REJ_* */
    uint8_t  pdata[AXON_DEV_CM_PDATA_MAX];
} softib_cm_msg_t;

_Static_assert(sizeof(softib_cm_msg_t) == 40 + AXON_DEV_CM_PDATA_MAX,
               "CM message has no padding");

typedef enum {
    SOFTIB_CM_IDLE,            /* created; maybe bound */
    SOFTIB_CM_ADDR_RESOLVED,
    SOFTIB_CM_ROUTE_RESOLVED,
    SOFTIB_CM_LISTEN,
    SOFTIB_CM_CONNECTING,      /* active: TCP connect in progress */
    SOFTIB_CM_REQ_SENT,        /* active: waiting for REP or REJ */
    SOFTIB_CM_REP_RCVD,        /* active, no QP: CONNECT_RESPONSE given, waiting for establish */
    SOFTIB_CM_REQ_WAIT,        /* passive: accepted socket, REQ not in yet (no id) */
    SOFTIB_CM_REQ_RCVD,        /* passive: CONNECT_REQUEST given, waiting for accept/reject */
    SOFTIB_CM_REP_SENT,        /* passive: waiting for RTU */
    SOFTIB_CM_ESTABLISHED,
    SOFTIB_CM_DREQ_SENT,       /* we disconnected first: waiting for DREP */
    SOFTIB_CM_DISCONNECTED,    /* the peer disconnected first: waiting for our disconnect */
    SOFTIB_CM_CLOSED,          /* both sides done (TIMEWAIT_EXIT given) */
    SOFTIB_CM_FAILED,          /* rejected, unreachable, error */
} softib_cm_state_t;

typedef struct softib_cm_chan {
    axon_dev_cm_chan_t *chan;
    int                 epfd;       /* the sockets and timer_fd; watched by chan's fd */
    int                 timer_fd;   /* fires at the earliest deadline */
    uint64_t            timeout_ns; /* AXON_SOFTIB_CM_TIMEOUT */
    axon_list_link_t    ids;        /* softib_cm_id_t */
} softib_cm_chan_t;

typedef struct softib_cm_id {
    axon_list_link_t       link;       /* sc->ids */
    softib_cm_chan_t      *sc;
    axon_dev_cm_id_priv_t *id;         /* NULL while REQ_WAIT */
    struct softib_cm_id   *listener;   /* REQ_WAIT, REQ_RCVD: whose request it is */
    softib_cm_state_t      state;
    int                    fd;         /* listening or connected socket, or -1 */
    uint32_t               ep_events;  /* what epoll watches on fd */
    uint64_t               deadline;   /* ns (axon_sys_time_ns), 0 = none */
    int                    dead;       /* REQ_WAIT that failed: freed by progress */
    int                    local_disc; /* disconnect was called (QP in error) */
    int                    max_rd;     /* device's max_qp_rd_atom */
    /* ours: from connect or accept */
    uint32_t               psn;
    int                    psn_chosen; /* psn is fixed (softib_cm_psn) */
    uint8_t                resp_res, init_depth, retry, rnr_retry;
    softib_cm_msg_t        out;        /* REQ to send once the socket connects */
    softib_cm_msg_t        peer;       /* the peer's REQ or REP */
    size_t                 rx_len;
    softib_cm_msg_t        rx;
    struct softib_cm_join *joins;      /* multicast groups joined (softib_cm_mcast.c) */
    unsigned               njoins;
} softib_cm_id_t;

extern const axon_config_entry_t softib_cm_config_table[];
extern const axon_dev_cm_ops_t softib_cm_ops;

static inline softib_cm_id_t *softib_cm_sid(axon_dev_cm_id_priv_t *id)
{
    return (softib_cm_id_t *)id->be;
}

/* softib_cm.c */
const char *softib_cm_state_str(softib_cm_state_t state);
int  softib_cm_bad_state(softib_cm_id_t *sid, const char *what);
void softib_cm_free(softib_cm_id_t *sid);
int  softib_cm_watch(softib_cm_id_t *sid, uint32_t events);
void softib_cm_close(softib_cm_id_t *sid);
softib_cm_id_t *softib_cm_id_alloc(softib_cm_chan_t *sc, axon_dev_cm_id_priv_t *id);
void softib_cm_timer_update(softib_cm_chan_t *sc);

/* softib_cm_conn.c: the calls of the ops table, and what progress needs */
int  softib_cm_create_qp(axon_dev_cm_id_priv_t *id, axon_dev_pd_t *pd,
                         axon_dev_qp_init_attr_t *init_attr);
void softib_cm_qp_gone(axon_dev_cm_id_priv_t *id);
int  softib_cm_connect(axon_dev_cm_id_priv_t *id, const axon_dev_cm_conn_param_t *param);
int  softib_cm_accept(axon_dev_cm_id_priv_t *id, const axon_dev_cm_conn_param_t *param);
int  softib_cm_reject(axon_dev_cm_id_priv_t *id, const void *pdata, uint8_t len);
int  softib_cm_establish(axon_dev_cm_id_priv_t *id);
int  softib_cm_init_qp_attr(axon_dev_cm_id_priv_t *id, axon_dev_qp_attr_t *attr, int *mask_p);
int  softib_cm_disconnect(axon_dev_cm_id_priv_t *id);
void softib_cm_destroy(axon_dev_cm_id_priv_t *id);
int  softib_cm_send(softib_cm_id_t *sid, softib_cm_msg_type_t type, uint16_t reason,
                    const void *pdata, size_t len);
void softib_cm_event(softib_cm_id_t *sid, axon_dev_cm_event_type_t type, int status,
                     const softib_cm_msg_t *msg);
/* An RDMA_PS_UDP event's QP, qkey and AH attributes towards dgid (16 bytes). */
void softib_cm_ud_route(axon_dev_cm_ud_param_t *ud, uint32_t qp_num, const uint8_t *dgid,
                        uint8_t tos);
void softib_cm_qp_error(softib_cm_id_t *sid);
/* softib_cm_mcast.c */
int  softib_cm_join_multicast(axon_dev_cm_id_priv_t *id, const struct sockaddr_in *addr,
                              int send_only, void *context);
int  softib_cm_leave_multicast(axon_dev_cm_id_priv_t *id, const struct sockaddr_in *addr);
void softib_cm_mcast_detach_all(softib_cm_id_t *sid);
void softib_cm_mcast_free(softib_cm_id_t *sid);
int  softib_cm_qp_connect(softib_cm_id_t *sid);

/* softib_cm_msg.c: a message of type with only the header set; is a peer's well formed (0, or EPROTO)? */
void softib_cm_msg_init(softib_cm_msg_t *m, softib_cm_msg_type_t type);
int  softib_cm_msg_check(const softib_cm_msg_t *m);

/* softib_cm_progress.c */
void softib_cm_chan_progress(axon_dev_cm_chan_t *chan, void *state);
void softib_cm_finish_disconnect(softib_cm_id_t *sid);
void softib_cm_connect_done(softib_cm_id_t *sid, int err);

#endif
