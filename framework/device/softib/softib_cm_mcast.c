/*
 * Multicast groups through softib's CM (seed §5.2.27-28, dev_cm.h): an
 * RDMA_PS_UDP id joins the group of an IPv4 multicast address. There is no
 * subnet administrator to ask: the join attaches the id's QP to the MGID
 * RoCE derives from the address (::ffff:a.b.c.d, softib_mcast.c) and
 * answers at once with MULTICAST_JOIN, whose UD parameters address the
 * group. An id remembers its joins, to leave them by address, and to
 * detach its QP when the QP or the id goes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "softib.h"
#include "softib_cm.h"
#include "log.h"

struct softib_cm_join {
    struct in_addr addr;
    axon_dev_gid_t mgid;
    void          *context;
    int            send_only;   /* joined to send: the QP is not attached */
};

static void softib_cm_mgid(struct in_addr addr, axon_dev_gid_t *mgid)
{
    memset(mgid, 0, sizeof(*mgid));
    mgid->raw[10] = 0xff;
    mgid->raw[11] = 0xff;
    memcpy(&mgid->raw[12], &addr.s_addr, 4);
}

static int softib_cm_join_find(const softib_cm_id_t *sid, struct in_addr addr)
{
    unsigned i;

    for (i = 0; i < sid->njoins; i++) {
        if (sid->joins[i].addr.s_addr == addr.s_addr) {
            return (int)i;
        }
    }
    return -1;
}

static void softib_cm_join_event(softib_cm_id_t *sid, const struct softib_cm_join *join)
{
    axon_dev_cm_ev_priv_t *ev = axon_dev_cm_event_new(sid->id, AXON_DEV_CM_EVENT_MULTICAST_JOIN,
                                                      0);

    if (ev == NULL) {
        return;
    }
    softib_cm_ud_route(&ev->super.param.ud, SOFTIB_MCAST_QPN, join->mgid.raw,
                       sid->id->opts.tos);
    ev->super.param.ud.private_data = join->context;   /* the join's context, as librdmacm */
    axon_dev_cm_event_queue(sid->sc->chan, ev);
}

int softib_cm_join_multicast(axon_dev_cm_id_priv_t *id, const struct sockaddr_in *addr,
                             int send_only, void *context)
{
    softib_cm_id_t *sid = softib_cm_sid(id);
    struct softib_cm_join *joins, *join;
    char buf[32];
    int ret;

    if ((sid == NULL) || (id->super.verbs == NULL)) {
        axon_error("softib cm: join_multicast: the id has no device yet (bind_addr or "
                   "resolve_addr first)");
        return EINVAL;
    }
    if (id->super.ps != AXON_DEV_CM_PS_UDP) {
        axon_error("softib cm: join_multicast: port space 0x%x: groups are for RDMA_PS_UDP ids",
                   (unsigned)id->super.ps);
        return EINVAL;
    }
    if (softib_cm_join_find(sid, addr->sin_addr) >= 0) {
        axon_error("softib cm: join_multicast: the id joined %s already",
                   axon_dev_cm_addr_str(addr, buf, sizeof(buf)));
        return EADDRINUSE;
    }
    joins = realloc(sid->joins, (sid->njoins + 1) * sizeof(*joins));
    if (joins == NULL) {
        return ENOMEM;
    }
    sid->joins = joins;
    join       = &joins[sid->njoins];
    join->addr      = addr->sin_addr;
    join->context   = context;
    join->send_only = send_only;
    softib_cm_mgid(addr->sin_addr, &join->mgid);
    if (!send_only && (id->super.qp != NULL) &&
        ((ret = axon_dev_attach_mcast(id->super.qp, &join->mgid, 0)) != 0)) {
        return ret;
    }
    sid->njoins++;
    softib_cm_join_event(sid, join);
    return 0;
}

int softib_cm_leave_multicast(axon_dev_cm_id_priv_t *id, const struct sockaddr_in *addr)
{
    softib_cm_id_t *sid = softib_cm_sid(id);
    char buf[32];
    int i;

    if ((sid == NULL) || ((i = softib_cm_join_find(sid, addr->sin_addr)) < 0)) {
        axon_error("softib cm: leave_multicast: the id did not join %s",
                   axon_dev_cm_addr_str(addr, buf, sizeof(buf)));
        return EADDRNOTAVAIL;
    }
    if ((id->super.qp != NULL) && !sid->joins[i].send_only) {
        (void)axon_dev_detach_mcast(id->super.qp, &sid->joins[i].mgid, 0);
    }
    sid->joins[i] = sid->joins[--sid->njoins];
    return 0;
}

/* The id's QP goes (or the id with it): out of the groups (softib_mcast.c would
 * drop it at destroy_qp too; a QP the program keeps must not stay joined). */
void softib_cm_mcast_detach_all(softib_cm_id_t *sid)
{
    unsigned i;

    if ((sid->id == NULL) || (sid->id->super.qp == NULL)) {
        return;
    }
    for (i = 0; i < sid->njoins; i++) {
        if (!sid->joins[i].send_only) {
            (void)axon_dev_detach_mcast(sid->id->super.qp, &sid->joins[i].mgid, 0);
        }
    }
}

void softib_cm_mcast_free(softib_cm_id_t *sid)
{
    free(sid->joins);
    sid->joins  = NULL;
    sid->njoins = 0;
}
