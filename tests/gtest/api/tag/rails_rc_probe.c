/* White box of rc connections for the rails tests (rails_rc_probe.h). */
#include <errno.h>
#include <stdlib.h>
#include "rails_rc_probe.h"
#include "components/verbs/rc.h"

uint64_t axon_test_rc_ep_posted(const void *tl_ep)
{
    const axon_rc_ep_t *ep = tl_ep;

    return (ep->conn != NULL) ? ep->conn->tx_posted : 0;
}

int axon_test_rc_ep_connected(const void *tl_ep)
{
    const axon_rc_ep_t *ep = tl_ep;

    return (ep->conn != NULL) && (ep->conn->state == AXON_RC_CONN_OPEN) &&
           !(ep->conn->flags & AXON_RC_CONN_F_RTU_PENDING);
}

int axon_test_rc_ep_break(void *tl_ep)
{
    axon_rc_ep_t *ep = tl_ep;
    axon_dev_qp_attr_t attr = {0};

    if (ep->conn == NULL) {
        return ENOTCONN;
    }
    attr.qp_state = AXON_DEV_QPS_ERR;
    return axon_dev_modify_qp(ep->conn->qp, &attr, AXON_DEV_QP_STATE);
}

/* The registrations a fill holds (each of the same small buffer). */
typedef struct rc_mr_fill {
    size_t         count;
    axon_dev_mr_t *mrs[];
} rc_mr_fill_t;

/* More than any device's table holds: a fill that never hits the limit fails. */
#define RC_MR_FILL_MAX (1u << 16)

void *axon_test_rc_ep_fill_mrs(void *tl_ep, unsigned leave)
{
    static char buf[64];
    axon_rc_iface_t *iface = (axon_rc_iface_t *)((axon_rc_ep_t *)tl_ep)->super.iface;
    rc_mr_fill_t *fill;

    fill = calloc(1, sizeof(*fill) + RC_MR_FILL_MAX * sizeof(fill->mrs[0]));
    if (fill == NULL) {
        return NULL;
    }
    /* regions of memory already unmapped would give their keys back at the next use */
    axon_rcache_collect(iface->rcache);
    while ((fill->count < RC_MR_FILL_MAX) &&
           (axon_dev_reg_mr(iface->md->dev.pd, buf, sizeof(buf), AXON_DEV_ACCESS_LOCAL_WRITE,
                            &fill->mrs[fill->count]) == 0)) {
        ++fill->count;
    }
    if ((fill->count == RC_MR_FILL_MAX) || (fill->count < leave)) {
        axon_test_rc_mrs_release(fill);
        return NULL;
    }
    while (leave-- > 0) {
        axon_dev_dereg_mr(fill->mrs[--fill->count]);
    }
    return fill;
}

void axon_test_rc_mrs_release(void *arg)
{
    rc_mr_fill_t *fill = arg;

    while (fill->count > 0) {
        axon_dev_dereg_mr(fill->mrs[--fill->count]);
    }
    free(fill);
}
