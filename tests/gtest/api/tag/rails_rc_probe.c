/* White box of rc connections for the rails tests (rails_rc_probe.h). */
#include <errno.h>
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
