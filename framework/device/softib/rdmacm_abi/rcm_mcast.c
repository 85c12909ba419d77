/*
 * Multicast groups (seed §5.2.27-28) on softib's CM (dev_cm.h): a join
 * attaches the id's QP to the group of an IPv4 multicast address and gives
 * RDMA_CM_EVENT_MULTICAST_JOIN at once (no subnet administrator to ask); a
 * synchronous id's call waits for that event, as librdmacm's does.
 */
#include "rcm.h"

static int rcm_join(struct rdma_cm_id *cm_id, struct sockaddr *addr, int send_only,
                    void *context)
{
    int ret = rcm_bridge()->join_multicast(RCM(id, cm_id)->dev, addr, send_only, context);

    return ret ? rcm_ret(ret) : rcm_sync_complete(RCM(id, cm_id));
}

int rdma_join_multicast(struct rdma_cm_id *cm_id, struct sockaddr *addr, void *context)
{
    return rcm_join(cm_id, addr, 0, context);
}

/* Full members receive; send-only full members (RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
 * may send to the group without their QP being attached. */
int rdma_join_multicast_ex(struct rdma_cm_id *cm_id, struct rdma_cm_join_mc_attr_ex *attr,
                           void *context)
{
    const uint32_t need = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;

    if ((attr == NULL) || ((attr->comp_mask & need) != need)) {
        rcm_bridge()->log_error("rdma_join_multicast_ex: %s", (attr == NULL) ? "NULL attributes" :
                                "comp_mask lacks the address or the join flags");
        return rcm_ret(EINVAL);
    }
    if (attr->join_flags >= RDMA_MC_JOIN_FLAG_RESERVED) {
        rcm_bridge()->log_error("rdma_join_multicast_ex: join flags %u unknown",
                                attr->join_flags);
        return rcm_ret(EINVAL);
    }
    return rcm_join(cm_id, attr->addr,
                    attr->join_flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER, context);
}

int rdma_leave_multicast(struct rdma_cm_id *cm_id, struct sockaddr *addr)
{
    return rcm_ret(rcm_bridge()->leave_multicast(RCM(id, cm_id)->dev, addr));
}
