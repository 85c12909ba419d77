/*
 * The librdmacm back end of the device layer's connection manager
 * (framework/device/rdmacore/dev_rdmacore_cm.c): its converters, field by
 * field, and librdmacm's event types and strings. (No RDMA device is needed:
 * the converters are pure; the CM itself is tested over softib.)
 */
#include <gtest/gtest.h>

#include <stddef.h>
#include <string.h>

#include "axon_config.h"
#include "dev_cm.h"
#if defined(HAVE_RDMACM) && defined(HAVE_IBVERBS)
#include "dev_rdmacore_cm.h"
#endif

namespace {

#if defined(HAVE_RDMACM) && defined(HAVE_IBVERBS)
TEST(RdmacoreCm, ConnParamConvertsFieldByField)
{
    const char               pd[] = "pdata";
    axon_dev_cm_conn_param_t in, back;
    struct rdma_conn_param   r;

    memset(&in, 0, sizeof(in));
    in.private_data        = pd;
    in.private_data_len    = sizeof(pd);
    in.responder_resources = 3;
    in.initiator_depth     = 5;
    in.flow_control        = 1;
    in.retry_count         = 6;
    in.rnr_retry_count     = 7;
    in.srq                 = 1;
    in.qp_num              = 0xabcdef;
    axon_dev_rdmacore_cm_param_to_rdma(&in, &r);
    EXPECT_EQ(pd, r.private_data);
    EXPECT_EQ(sizeof(pd), r.private_data_len);
    EXPECT_EQ(3, r.responder_resources);
    EXPECT_EQ(5, r.initiator_depth);
    EXPECT_EQ(1, r.flow_control);
    EXPECT_EQ(6, r.retry_count);
    EXPECT_EQ(7, r.rnr_retry_count);
    EXPECT_EQ(1, r.srq);
    EXPECT_EQ(0xabcdefu, r.qp_num);
    axon_dev_rdmacore_cm_param_from_rdma(&r, &back);
    EXPECT_EQ(0, memcmp(&in, &back, offsetof(axon_dev_cm_conn_param_t, qp_num)));
    EXPECT_EQ(in.qp_num, back.qp_num);
}

TEST(RdmacoreCm, EventTypesAndStrings)
{
    for (int t = RDMA_CM_EVENT_ADDR_RESOLVED; t <= RDMA_CM_EVENT_TIMEWAIT_EXIT; ++t) {
        EXPECT_EQ(t, axon_dev_rdmacore_cm_event_from_rdma((enum rdma_cm_event_type)t));
    }
    /* rdma_event_str's wording */
    EXPECT_STREQ("RDMA_CM_EVENT_ADDR_RESOLVED",
                 axon_dev_cm_event_str((axon_dev_cm_event_type_t)RDMA_CM_EVENT_ADDR_RESOLVED));
    EXPECT_STREQ("RDMA_CM_EVENT_TIMEWAIT_EXIT",
                 axon_dev_cm_event_str((axon_dev_cm_event_type_t)RDMA_CM_EVENT_TIMEWAIT_EXIT));
    EXPECT_EQ(-1, axon_dev_rdmacore_cm_event_from_rdma((enum rdma_cm_event_type)99));
}
#endif

}  // namespace
