/*
 * What a connection-manager back end provides to framework/device/dev_cm.c,
 * and the front end's services it uses: ids it creates for incoming
 * requests, the event queue of a channel, fds the channel's fd must watch.
 *
 * The front end owns channels, ids and events and checks arguments that do
 * not depend on a back end (NULLs, address families, private data sizes);
 * a back end owns its per-channel and per-id state and the id's state
 * machine. Every call of a back end is made with the channel's lock held.
 */
#ifndef AXON_DEV_CM_BACKEND_H
#define AXON_DEV_CM_BACKEND_H

#include <pthread.h>
#include "dev_cm.h"
#include "list.h"
#include "config.h"

#define AXON_DEV_CM_MAX_BACKENDS 4

typedef struct axon_dev_cm_ops      axon_dev_cm_ops_t;
typedef struct axon_dev_cm_chan     axon_dev_cm_chan_t;
typedef struct axon_dev_cm_id_priv  axon_dev_cm_id_priv_t;
typedef struct axon_dev_cm_ev_priv  axon_dev_cm_ev_priv_t;

struct axon_dev_cm_chan {
    axon_dev_cm_channel_t super;       /* super.fd: an epoll fd over the fds below */
    pthread_mutex_t       lock;
    int                   queue_fd;    /* eventfd: readable while queue is not empty */
    axon_list_link_t      queue;       /* axon_dev_cm_ev_priv_t, oldest first */
    unsigned              num_ids;     /* live (not destroyed) ids */
    unsigned              getters;     /* threads inside a blocking get_event */
    int                   closing;     /* destroyed; the last getter frees it */
    void                 *be[AXON_DEV_CM_MAX_BACKENDS];  /* each back end's state, lazily */
};

/* What rdma_set_option set on an id (dev_cm.h); a request's id copies its listener's. */
typedef struct axon_dev_cm_options {
    uint8_t tos, ack_timeout;
    uint8_t has_tos, has_ack_timeout;
    int     reuseaddr, afonly;
} axon_dev_cm_options_t;

struct axon_dev_cm_id_priv {
    axon_dev_cm_id_t         super;
    axon_dev_cm_options_t    opts;
    axon_dev_cm_chan_t      *chan;
    const axon_dev_cm_ops_t *ops;      /* NULL until bound to a back end */
    void                    *be;       /* the back end's state of this id */
    int                      refcnt;   /* 1 until destroyed, + events that name it */
    int                      destroyed;
};

struct axon_dev_cm_ev_priv {
    axon_dev_cm_event_t super;
    axon_list_link_t    link;
    const axon_dev_cm_ops_t *ops;      /* back end that made it (release), or NULL */
    void               *be_event;      /* the back end's own event, if any */
    uint8_t             pdata[AXON_DEV_CM_PDATA_MAX];
};

struct axon_dev_cm_ops {
    const char *name;
    /* 1 if a device of this back end has addr (IPv4; INADDR_ANY: any device). */
    int  (*owns_addr)(const struct sockaddr_in *addr);
    /* 1 if this back end should resolve dst (src: NULL or an address it owns). */
    int  (*routes_to)(const struct sockaddr_in *dst);

    /* Per-channel state, made when the first id of the channel binds here. */
    int  (*chan_open)(axon_dev_cm_chan_t *chan, void **state_p);
    void (*chan_close)(void *state);
    /* Turn whatever arrived into events on chan's queue; never blocks. */
    void (*chan_progress)(axon_dev_cm_chan_t *chan, void *state);

    int  (*bind_addr)(axon_dev_cm_id_priv_t *id, const struct sockaddr_in *addr);
    int  (*resolve_addr)(axon_dev_cm_id_priv_t *id, const struct sockaddr_in *src,
                         const struct sockaddr_in *dst, int timeout_ms);
    int  (*resolve_route)(axon_dev_cm_id_priv_t *id, int timeout_ms);
    int  (*listen)(axon_dev_cm_id_priv_t *id, int backlog);
    int  (*create_qp)(axon_dev_cm_id_priv_t *id, axon_dev_pd_t *pd,
                      axon_dev_qp_init_attr_t *init_attr);
    int  (*connect)(axon_dev_cm_id_priv_t *id, const axon_dev_cm_conn_param_t *param);
    int  (*accept)(axon_dev_cm_id_priv_t *id, const axon_dev_cm_conn_param_t *param);
    int  (*reject)(axon_dev_cm_id_priv_t *id, const void *pdata, uint8_t len);
    int  (*establish)(axon_dev_cm_id_priv_t *id);
    int  (*disconnect)(axon_dev_cm_id_priv_t *id);
    /* rdma_init_qp_attr (dev_cm.h); NULL: EOPNOTSUPP. */
    int  (*init_qp_attr)(axon_dev_cm_id_priv_t *id, axon_dev_qp_attr_t *attr, int *mask_p);
    /* id->opts changed (the back end applies them, or reads them when it needs
     * them: then NULL). */
    int  (*set_option)(axon_dev_cm_id_priv_t *id);
    /* Multicast groups (dev_cm.h; addr checked: IPv4 multicast). NULL: EOPNOTSUPP. */
    int  (*join_multicast)(axon_dev_cm_id_priv_t *id, const struct sockaddr_in *addr,
                           int send_only, void *context);
    int  (*leave_multicast)(axon_dev_cm_id_priv_t *id, const struct sockaddr_in *addr);
    /* The QP is about to be destroyed: forget it. */
    void (*qp_gone)(axon_dev_cm_id_priv_t *id);
    /* The user destroyed the id: close what it holds (the peer is told). */
    void (*destroy)(axon_dev_cm_id_priv_t *id);
    /* Last reference gone (events acknowledged): free what is left. May be NULL. */
    void (*release)(axon_dev_cm_id_priv_t *id);
    /* An event of this back end was acknowledged or purged. May be NULL. */
    void (*event_release)(axon_dev_cm_ev_priv_t *ev);
    /* Configuration variables (AXON_<prefix><NAME>), or NULL: for axon_info -c. */
    const axon_config_entry_t *config_table;
    const char                *config_prefix;
};

/* The connection managers of the registered device back ends (dev_backend.h),
 * in their order; NULL-terminated. */
extern const axon_dev_cm_ops_t *axon_dev_cm_backends[];

/* ---- front-end services (chan->lock held) */

/* A new id on chan, bound to ops (an incoming request); NULL if out of memory. */
axon_dev_cm_id_priv_t *axon_dev_cm_id_new(axon_dev_cm_chan_t *chan, void *context,
                                          axon_dev_cm_port_space_t ps,
                                          const axon_dev_cm_ops_t *ops);
/* Undo axon_dev_cm_id_new before anyone saw the id. */
void axon_dev_cm_id_drop(axon_dev_cm_id_priv_t *id);
/*
 * A zeroed event for id (which it references until acknowledged); the caller
 * fills param (pdata may be copied into ev->pdata) and queues it.
 */
axon_dev_cm_ev_priv_t *axon_dev_cm_event_new(axon_dev_cm_id_priv_t *id,
                                             axon_dev_cm_event_type_t type, int status);
void axon_dev_cm_event_set_listen_id(axon_dev_cm_ev_priv_t *ev, axon_dev_cm_id_priv_t *lid);
/* Copy private data into the event and point its conn param at it. */
void axon_dev_cm_event_set_pdata(axon_dev_cm_ev_priv_t *ev, const void *pdata, size_t len);
void axon_dev_cm_event_queue(axon_dev_cm_chan_t *chan, axon_dev_cm_ev_priv_t *ev);
/* ops' state in chan (NULL before its first id there). */
void *axon_dev_cm_chan_state(axon_dev_cm_chan_t *chan, const axon_dev_cm_ops_t *ops);
/* Make chan->super.fd watch fd (readable) too; 0 or errno. */
int  axon_dev_cm_chan_watch(axon_dev_cm_chan_t *chan, int fd);
void axon_dev_cm_chan_unwatch(axon_dev_cm_chan_t *chan, int fd);


/* "127.0.0.1:7471" into buf, for log lines. */
const char *axon_dev_cm_addr_str(const struct sockaddr_in *addr, char *buf, size_t max);

static inline axon_dev_cm_id_priv_t *axon_dev_cm_id_priv(axon_dev_cm_id_t *id)
{
    return (axon_dev_cm_id_priv_t *)id;
}

#endif
