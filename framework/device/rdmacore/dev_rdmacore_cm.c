/*
 * The librdmacm back end of the connection manager. Each id wraps an
 * rdma_cm_id whose context points back to it; events are read without
 * blocking from one rdma_event_channel per channel (its fd is watched by the
 * channel's fd) and converted.
 *
 * The QP lives on the device layer's own context of the device (opened by
 * name, shared by the CM's ids), not on librdmacm's, so it is never attached
 * to the rdma_cm_id: the CM passes its number in the conn param and drives
 * it with rdma_init_qp_attr, as librdmacm does for a QP it created itself.
 * A CONNECT_RESPONSE of an id with a QP is completed here (RTR, RTS,
 * rdma_establish) and given as ESTABLISHED, as librdmacm gives it.
 */
#include "axon_config.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "dev_cm_backend.h"
#include "dev_rdmacore.h"
#include "dev_rdmacore_cm.h"
#include "log.h"

/* Each AXON_DEV_CM_EVENT_<name> is RDMA_CM_EVENT_<name>, each AXON_DEV_CM_PS_<name> RDMA_PS_<name> */
#define AXON_DEV_CM_SAME_EVENTS(_) \
    _(ADDR_RESOLVED) _(ADDR_ERROR) _(ROUTE_RESOLVED) _(ROUTE_ERROR) _(CONNECT_REQUEST) \
    _(CONNECT_RESPONSE) _(CONNECT_ERROR) _(UNREACHABLE) _(REJECTED) _(ESTABLISHED) \
    _(DISCONNECTED) _(DEVICE_REMOVAL) _(MULTICAST_JOIN) _(MULTICAST_ERROR) _(ADDR_CHANGE) \
    _(TIMEWAIT_EXIT)
#define AXON_DEV_CM_SAME_PS(_) _(IPOIB) _(TCP) _(UDP) _(IB)
#define AXON_DEV_CM_SAME_EVENT(_n) \
    _Static_assert((int)AXON_DEV_CM_EVENT_##_n == (int)RDMA_CM_EVENT_##_n, #_n " event");
#define AXON_DEV_CM_SAME_PORT_SPACE(_n) \
    _Static_assert((int)AXON_DEV_CM_PS_##_n == (int)RDMA_PS_##_n, #_n " port space");
AXON_DEV_CM_SAME_EVENTS(AXON_DEV_CM_SAME_EVENT)
AXON_DEV_CM_SAME_PS(AXON_DEV_CM_SAME_PORT_SPACE)
_Static_assert(sizeof(((struct rdma_conn_param *)0)->private_data_len) ==
               sizeof(((axon_dev_cm_conn_param_t *)0)->private_data_len),
               "private_data_len of the same width");
_Static_assert(sizeof(((struct rdma_conn_param *)0)->qp_num) ==
               sizeof(((axon_dev_cm_conn_param_t *)0)->qp_num), "qp_num of the same width");

/* ------------------------------------------------------------ converters */

/* The conn param's fields (a list as dev_rdmacore.c's); private_data is shared, not copied */
#define AXON_DEV_RDMACORE_CM_PARAM(_, _a, p) \
    _(p private_data) _(p private_data_len) _(p responder_resources) _(p initiator_depth) \
    _(p flow_control) _(p retry_count) _(p rnr_retry_count) _(p srq) _(p qp_num)

void axon_dev_rdmacore_cm_param_to_rdma(const axon_dev_cm_conn_param_t *in,
                                        struct rdma_conn_param *out)
{
    AXON_DEV_IBV_CONVERT(AXON_DEV_RDMACORE_CM_PARAM);
}

void axon_dev_rdmacore_cm_param_from_rdma(const struct rdma_conn_param *in,
                                          axon_dev_cm_conn_param_t *out)
{
    AXON_DEV_IBV_CONVERT(AXON_DEV_RDMACORE_CM_PARAM);
}

int axon_dev_rdmacore_cm_event_from_rdma(enum rdma_cm_event_type type)
{
    return ((int)type >= (int)RDMA_CM_EVENT_ADDR_RESOLVED) &&
           ((int)type <= (int)RDMA_CM_EVENT_TIMEWAIT_EXIT) ? (int)type : -1;
}

/* ------------------------------------------------------------ state */

typedef struct {
    struct rdma_event_channel *ech;
} axon_dev_rdmacore_cm_chan_t;

typedef struct {
    struct rdma_cm_id *cmid;
    uint8_t            req_resp_res;   /* what a CONNECT_REQUEST asked for */
    uint8_t            req_init_depth;
} axon_dev_rdmacore_cm_id_t;

static pthread_once_t axon_dev_rdmacore_cm_once = PTHREAD_ONCE_INIT;
static int            axon_dev_rdmacore_cm_ndevs;

static void axon_dev_rdmacore_cm_count(void)
{
    struct ibv_device **devs = ibv_get_device_list(&axon_dev_rdmacore_cm_ndevs);

    if (devs != NULL) {
        ibv_free_device_list(devs);
    } else {
        axon_dev_rdmacore_cm_ndevs = 0;
    }
}

/* Without a device librdmacm cannot help; with one, it decides about addresses. */
static int axon_dev_rdmacore_cm_has_devices(void)
{
    pthread_once(&axon_dev_rdmacore_cm_once, axon_dev_rdmacore_cm_count);
    return axon_dev_rdmacore_cm_ndevs > 0;
}

static int axon_dev_rdmacore_cm_owns_addr(const struct sockaddr_in *addr)
{
    return axon_dev_rdmacore_cm_has_devices();
}

static int axon_dev_rdmacore_cm_routes_to(const struct sockaddr_in *dst)
{
    return axon_dev_rdmacore_cm_has_devices();
}

static int axon_dev_rdmacore_cm_chan_open(axon_dev_cm_chan_t *chan, void **state_p)
{
    axon_dev_rdmacore_cm_chan_t *rc = calloc(1, sizeof(*rc));
    int ret, flags;

    if (rc == NULL) {
        axon_error("rdma-core cm: no memory for channel state");
        return ENOMEM;
    }
    rc->ech = rdma_create_event_channel();
    if (rc->ech == NULL) {
        ret = errno ? errno : ENODEV;
        axon_error("rdma-core cm: rdma_create_event_channel: %s", strerror(ret));
        free(rc);
        return ret;
    }
    flags = fcntl(rc->ech->fd, F_GETFL);
    fcntl(rc->ech->fd, F_SETFL, flags | O_NONBLOCK);
    if ((ret = axon_dev_cm_chan_watch(chan, rc->ech->fd)) != 0) {
        rdma_destroy_event_channel(rc->ech);
        free(rc);
        return ret;
    }
    *state_p = rc;
    return 0;
}

static void axon_dev_rdmacore_cm_chan_close(void *state)
{
    axon_dev_rdmacore_cm_chan_t *rc = state;

    rdma_destroy_event_channel(rc->ech);
    free(rc);
}

static axon_dev_rdmacore_cm_id_t *axon_dev_rdmacore_cm_rid(axon_dev_cm_id_priv_t *id)
{
    return id->be;
}

/* The options the front end holds (rdma_set_option), given to librdmacm's id. */
static int axon_dev_rdmacore_cm_options(axon_dev_cm_id_priv_t *id, struct rdma_cm_id *cmid)
{
    axon_dev_cm_options_t *o = &id->opts;

    if ((o->has_tos && rdma_set_option(cmid, RDMA_OPTION_ID, AXON_DEV_CM_OPTION_ID_TOS,
                                       &o->tos, sizeof(o->tos))) ||
        (o->has_ack_timeout && rdma_set_option(cmid, RDMA_OPTION_ID,
                                               AXON_DEV_CM_OPTION_ID_ACK_TIMEOUT,
                                               &o->ack_timeout, sizeof(o->ack_timeout))) ||
        (o->reuseaddr && rdma_set_option(cmid, RDMA_OPTION_ID, AXON_DEV_CM_OPTION_ID_REUSEADDR,
                                         &o->reuseaddr, sizeof(o->reuseaddr))) ||
        (o->afonly && rdma_set_option(cmid, RDMA_OPTION_ID, AXON_DEV_CM_OPTION_ID_AFONLY,
                                      &o->afonly, sizeof(o->afonly)))) {
        axon_error("rdma-core cm: rdma_set_option: %s", strerror(errno));
        return errno;
    }
    return 0;
}

/* An id not made yet takes them when it is. */
static int axon_dev_rdmacore_cm_set_option(axon_dev_cm_id_priv_t *id)
{
    axon_dev_rdmacore_cm_id_t *rid = id->be;

    return (rid != NULL) ? axon_dev_rdmacore_cm_options(id, rid->cmid) : 0;
}

/* The id's rdma_cm_id, made on first use. */
static int axon_dev_rdmacore_cm_cmid(axon_dev_cm_id_priv_t *id, struct rdma_cm_id **cmid_p)
{
    axon_dev_rdmacore_cm_chan_t *rc = axon_dev_cm_chan_state(id->chan,
                                                             &axon_dev_rdmacore_cm_ops);
    axon_dev_rdmacore_cm_id_t *rid = id->be;
    int ret;

    if (rid == NULL) {
        if (id->super.ps != AXON_DEV_CM_PS_TCP) {   /* UD ids: softib's CM only */
            axon_error("rdma-core cm: port space 0x%x: this back end has RDMA_PS_TCP only",
                       (unsigned)id->super.ps);
            return EOPNOTSUPP;
        }
        rid = calloc(1, sizeof(*rid));
        if (rid == NULL) {
            axon_error("rdma-core cm: no memory for an id");
            return ENOMEM;
        }
        if (rdma_create_id(rc->ech, &rid->cmid, id, RDMA_PS_TCP) != 0) {
            axon_error("rdma-core cm: rdma_create_id: %s", strerror(errno));
            free(rid);
            return errno;
        }
        id->be = rid;
        if ((ret = axon_dev_rdmacore_cm_options(id, rid->cmid)) != 0) {
            return ret;   /* the id keeps its rdma_cm_id: destroy releases it */
        }
    }
    *cmid_p = rid->cmid;
    return 0;
}

/* Once librdmacm bound the id to a device: ours of the same name. */
static int axon_dev_rdmacore_cm_device(axon_dev_cm_id_priv_t *id, struct rdma_cm_id *cmid)
{
    int ret;

    memcpy(&id->super.src_addr, rdma_get_local_addr(cmid), sizeof(id->super.src_addr));
    if ((id->super.verbs != NULL) || (cmid->verbs == NULL)) {
        return 0;
    }
    ret = axon_dev_cm_open_device(ibv_get_device_name(cmid->verbs->device), &id->super.verbs);
    id->super.port_num = cmid->port_num;
    return ret;
}

/* The attributes librdmacm knows for taking a QP of the id to attr->qp_state. */
static int axon_dev_rdmacore_cm_init_qp_attr(axon_dev_cm_id_priv_t *id,
                                             axon_dev_qp_attr_t *attr, int *mask_p)
{
    struct ibv_qp_attr ibv_attr;

    memset(&ibv_attr, 0, sizeof(ibv_attr));
    ibv_attr.qp_state = (enum ibv_qp_state)attr->qp_state;
    if (rdma_init_qp_attr(axon_dev_rdmacore_cm_rid(id)->cmid, &ibv_attr, mask_p) != 0) {
        axon_error("rdma-core cm: rdma_init_qp_attr(state %d): %s", ibv_attr.qp_state,
                   strerror(errno));
        return errno;
    }
    axon_dev_rdmacore_qp_attr_from_ibv(&ibv_attr, attr);
    return 0;
}

/* Move the id's QP to state with the attributes the CM knows. */
static int axon_dev_rdmacore_cm_qp_to(axon_dev_cm_id_priv_t *id, enum ibv_qp_state state)
{
    axon_dev_qp_attr_t attr;
    int mask, ret;

    attr.qp_state = (axon_dev_qp_state_t)state;
    if ((ret = axon_dev_rdmacore_cm_init_qp_attr(id, &attr, &mask)) != 0) {
        return ret;
    }
    return axon_dev_modify_qp(id->super.qp, &attr, mask);
}

static void axon_dev_rdmacore_cm_qp_error(axon_dev_cm_id_priv_t *id)
{
    axon_dev_qp_attr_t attr;

    if (id->super.qp != NULL) {
        memset(&attr, 0, sizeof(attr));
        attr.qp_state = AXON_DEV_QPS_ERR;
        axon_dev_modify_qp(id->super.qp, &attr, AXON_DEV_QP_STATE);
    }
}

/* ------------------------------------------------------------ calls */

static int axon_dev_rdmacore_cm_bind_addr(axon_dev_cm_id_priv_t *id,
                                          const struct sockaddr_in *addr)
{
    struct rdma_cm_id *cmid;
    int ret;

    if ((ret = axon_dev_rdmacore_cm_cmid(id, &cmid)) != 0) {
        return ret;
    }
    if (rdma_bind_addr(cmid, (struct sockaddr *)addr) != 0) {
        axon_error("rdma-core cm: rdma_bind_addr: %s", strerror(errno));
        return errno;
    }
    return axon_dev_rdmacore_cm_device(id, cmid);
}

static int axon_dev_rdmacore_cm_resolve_addr(axon_dev_cm_id_priv_t *id,
                                             const struct sockaddr_in *src,
                                             const struct sockaddr_in *dst, int timeout_ms)
{
    struct rdma_cm_id *cmid;
    int ret;

    if ((ret = axon_dev_rdmacore_cm_cmid(id, &cmid)) != 0) {
        return ret;
    }
    if (rdma_resolve_addr(cmid, (struct sockaddr *)src, (struct sockaddr *)dst,
                          timeout_ms) != 0) {
        axon_error("rdma-core cm: rdma_resolve_addr: %s", strerror(errno));
        return errno;
    }
    id->super.dst_addr = *dst;
    return 0;
}

static int axon_dev_rdmacore_cm_resolve_route(axon_dev_cm_id_priv_t *id, int timeout_ms)
{
    struct rdma_cm_id *cmid;
    int ret;

    if ((ret = axon_dev_rdmacore_cm_cmid(id, &cmid)) != 0) {
        return ret;
    }
    return (rdma_resolve_route(cmid, timeout_ms) == 0) ? 0 : errno;
}

static int axon_dev_rdmacore_cm_listen(axon_dev_cm_id_priv_t *id, int backlog)
{
    struct rdma_cm_id *cmid;
    int ret;

    if ((ret = axon_dev_rdmacore_cm_cmid(id, &cmid)) != 0) {
        return ret;
    }
    return (rdma_listen(cmid, backlog) == 0) ? 0 : errno;
}

static int axon_dev_rdmacore_cm_create_qp(axon_dev_cm_id_priv_t *id, axon_dev_pd_t *pd,
                                          axon_dev_qp_init_attr_t *init_attr)
{
    int ret;

    if ((ret = axon_dev_create_qp(pd, init_attr, &id->super.qp)) != 0) {
        id->super.qp = NULL;
        return ret;
    }
    if ((ret = axon_dev_rdmacore_cm_qp_to(id, IBV_QPS_INIT)) != 0) {
        axon_dev_destroy_qp(id->super.qp);
        id->super.qp = NULL;
    }
    return ret;
}

static void axon_dev_rdmacore_cm_param(axon_dev_cm_id_priv_t *id,
                                       const axon_dev_cm_conn_param_t *param,
                                       struct rdma_conn_param *p)
{
    axon_dev_rdmacore_cm_id_t *rid = axon_dev_rdmacore_cm_rid(id);

    if (param != NULL) {
        axon_dev_rdmacore_cm_param_to_rdma(param, p);
    } else {
        memset(p, 0, sizeof(*p));
        p->responder_resources = rid->req_resp_res;
        p->initiator_depth     = rid->req_init_depth;
        p->rnr_retry_count     = 7;
    }
    if (id->super.qp != NULL) {
        p->qp_num = id->super.qp->qp_num;
        p->srq    = (id->super.qp->srq != NULL);
    }
}

static int axon_dev_rdmacore_cm_connect(axon_dev_cm_id_priv_t *id,
                                        const axon_dev_cm_conn_param_t *param)
{
    struct rdma_conn_param p;

    axon_dev_rdmacore_cm_param(id, param, &p);
    return (rdma_connect(axon_dev_rdmacore_cm_rid(id)->cmid, &p) == 0) ? 0 : errno;
}

static int axon_dev_rdmacore_cm_accept(axon_dev_cm_id_priv_t *id,
                                       const axon_dev_cm_conn_param_t *param)
{
    struct rdma_conn_param p;
    int ret;

    if ((id->super.qp != NULL) &&
        (((ret = axon_dev_rdmacore_cm_qp_to(id, IBV_QPS_RTR)) != 0) ||
         ((ret = axon_dev_rdmacore_cm_qp_to(id, IBV_QPS_RTS)) != 0))) {
        return ret;
    }
    axon_dev_rdmacore_cm_param(id, param, &p);
    return (rdma_accept(axon_dev_rdmacore_cm_rid(id)->cmid, &p) == 0) ? 0 : errno;
}

static int axon_dev_rdmacore_cm_reject(axon_dev_cm_id_priv_t *id, const void *pdata,
                                       uint8_t len)
{
    return (rdma_reject(axon_dev_rdmacore_cm_rid(id)->cmid, pdata, len) == 0) ? 0 : errno;
}

static int axon_dev_rdmacore_cm_establish(axon_dev_cm_id_priv_t *id)
{
    return (rdma_establish(axon_dev_rdmacore_cm_rid(id)->cmid) == 0) ? 0 : errno;
}

static int axon_dev_rdmacore_cm_disconnect(axon_dev_cm_id_priv_t *id)
{
    axon_dev_rdmacore_cm_qp_error(id);   /* librdmacm does it only for its own QPs */
    return (rdma_disconnect(axon_dev_rdmacore_cm_rid(id)->cmid) == 0) ? 0 : errno;
}

static void axon_dev_rdmacore_cm_qp_gone(axon_dev_cm_id_priv_t *id)
{
    (void)id;
}

static void axon_dev_rdmacore_cm_destroy(axon_dev_cm_id_priv_t *id)
{
    /* rdma_destroy_id waits for this id's events: it runs once they are acknowledged. */
    (void)id;
}

static void axon_dev_rdmacore_cm_release(axon_dev_cm_id_priv_t *id)
{
    axon_dev_rdmacore_cm_id_t *rid = id->be;

    if (rid != NULL) {
        rdma_destroy_id(rid->cmid);
        free(rid);
        id->be = NULL;
    }
    if (id->super.verbs != NULL) {
        axon_dev_cm_close_device(id->super.verbs);
        id->super.verbs = NULL;
    }
}

static void axon_dev_rdmacore_cm_event_release(axon_dev_cm_ev_priv_t *ev)
{
    if (ev->be_event != NULL) {
        rdma_ack_cm_event(ev->be_event);
        ev->be_event = NULL;
    }
}

/* ------------------------------------------------------------ events */

/* The id of a CONNECT_REQUEST: a new one around the new rdma_cm_id. */
static axon_dev_cm_id_priv_t *axon_dev_rdmacore_cm_child(axon_dev_cm_chan_t *chan,
                                                         struct rdma_cm_event *e)
{
    axon_dev_cm_id_priv_t *lid = e->listen_id->context, *id;
    axon_dev_rdmacore_cm_id_t *rid;

    id  = axon_dev_cm_id_new(chan, lid->super.context, lid->super.ps,
                             &axon_dev_rdmacore_cm_ops);
    rid = calloc(1, sizeof(*rid));
    if ((id == NULL) || (rid == NULL)) {
        free(rid);
        if (id != NULL) {
            axon_dev_cm_id_drop(id);
        }
        return NULL;
    }
    id->opts            = lid->opts;   /* the kernel's child takes the listener's too */
    rid->cmid           = e->id;
    rid->req_resp_res   = e->param.conn.responder_resources;
    rid->req_init_depth = e->param.conn.initiator_depth;
    id->be              = rid;
    e->id->context      = id;
    memcpy(&id->super.dst_addr, rdma_get_peer_addr(e->id), sizeof(id->super.dst_addr));
    axon_dev_rdmacore_cm_device(id, e->id);
    return id;
}

/* With a QP on the id, the response is completed here and given as ESTABLISHED. */
static int axon_dev_rdmacore_cm_response(axon_dev_cm_id_priv_t *id, int *status_p)
{
    int ret;

    if (id->super.qp == NULL) {
        return AXON_DEV_CM_EVENT_CONNECT_RESPONSE;
    }
    if (((ret = axon_dev_rdmacore_cm_qp_to(id, IBV_QPS_RTR)) != 0) ||
        ((ret = axon_dev_rdmacore_cm_qp_to(id, IBV_QPS_RTS)) != 0) ||
        ((ret = (rdma_establish(axon_dev_rdmacore_cm_rid(id)->cmid) == 0) ? 0 : errno))) {
        rdma_reject(axon_dev_rdmacore_cm_rid(id)->cmid, NULL, 0);
        *status_p = -ret;
        return AXON_DEV_CM_EVENT_CONNECT_ERROR;
    }
    return AXON_DEV_CM_EVENT_ESTABLISHED;
}

static void axon_dev_rdmacore_cm_chan_progress(axon_dev_cm_chan_t *chan, void *state)
{
    axon_dev_rdmacore_cm_chan_t *rc = state;
    axon_dev_cm_id_priv_t *id;
    axon_dev_cm_ev_priv_t *ev;
    struct rdma_cm_event *e;
    int type, status;

    while (rdma_get_cm_event(rc->ech, &e) == 0) {
        type   = axon_dev_rdmacore_cm_event_from_rdma(e->event);
        status = e->status;
        if (type < 0) {
            axon_debug("rdma-core cm: event %d ignored", e->event);
            rdma_ack_cm_event(e);
            continue;
        }
        if (type == AXON_DEV_CM_EVENT_CONNECT_REQUEST) {
            id = axon_dev_rdmacore_cm_child(chan, e);
            if (id == NULL) {
                rdma_reject(e->id, NULL, 0);
                rdma_ack_cm_event(e);
                continue;
            }
        } else {
            id = e->id->context;
        }
        if (type == AXON_DEV_CM_EVENT_ADDR_RESOLVED) {
            axon_dev_rdmacore_cm_device(id, e->id);
        } else if (type == AXON_DEV_CM_EVENT_CONNECT_RESPONSE) {
            type = axon_dev_rdmacore_cm_response(id, &status);
        } else if ((type == AXON_DEV_CM_EVENT_DISCONNECTED) ||
                   (type == AXON_DEV_CM_EVENT_REJECTED)) {
            axon_dev_rdmacore_cm_qp_error(id);
        }
        ev = axon_dev_cm_event_new(id, (axon_dev_cm_event_type_t)type, status);
        if (ev == NULL) {
            rdma_ack_cm_event(e);
            continue;
        }
        ev->ops      = &axon_dev_rdmacore_cm_ops;
        ev->be_event = e;
        axon_dev_rdmacore_cm_param_from_rdma(&e->param.conn, &ev->super.param.conn);
        axon_dev_cm_event_set_pdata(ev, e->param.conn.private_data,
                                    e->param.conn.private_data ? e->param.conn.private_data_len : 0);
        if (type == AXON_DEV_CM_EVENT_CONNECT_REQUEST) {
            axon_dev_cm_event_set_listen_id(ev, e->listen_id->context);
        }
        axon_dev_cm_event_queue(chan, ev);
    }
}

const axon_dev_cm_ops_t axon_dev_rdmacore_cm_ops = {
    .name          = "rdma-core",
    .owns_addr     = axon_dev_rdmacore_cm_owns_addr,
    .routes_to     = axon_dev_rdmacore_cm_routes_to,
    .chan_open     = axon_dev_rdmacore_cm_chan_open,
    .chan_close    = axon_dev_rdmacore_cm_chan_close,
    .chan_progress = axon_dev_rdmacore_cm_chan_progress,
    .bind_addr     = axon_dev_rdmacore_cm_bind_addr,
    .resolve_addr  = axon_dev_rdmacore_cm_resolve_addr,
    .resolve_route = axon_dev_rdmacore_cm_resolve_route,
    .listen        = axon_dev_rdmacore_cm_listen,
    .create_qp     = axon_dev_rdmacore_cm_create_qp,
    .connect       = axon_dev_rdmacore_cm_connect,
    .accept        = axon_dev_rdmacore_cm_accept,
    .reject        = axon_dev_rdmacore_cm_reject,
    .establish     = axon_dev_rdmacore_cm_establish,
    .disconnect    = axon_dev_rdmacore_cm_disconnect,
    .set_option    = axon_dev_rdmacore_cm_set_option,
    .init_qp_attr  = axon_dev_rdmacore_cm_init_qp_attr,
    .qp_gone       = axon_dev_rdmacore_cm_qp_gone,
    .destroy       = axon_dev_rdmacore_cm_destroy,
    .release       = axon_dev_rdmacore_cm_release,
    .event_release = axon_dev_rdmacore_cm_event_release,
};
