/*
 * What the FI_RMA_EVENT suites share: the capabilities of an initiator and a
 * target, a region registered with counters bound to it, and how many event
 * messages an endpoint has sent (the provider's fi_control extension).
 */
#ifndef AXON_TEST_OFI_EVENT_ENV_H
#define AXON_TEST_OFI_EVENT_ENV_H

#include "ofi_test_node.h"

#include "contrib/ofi_provider/axon_fi_ext.h"

namespace {

const uint64_t kInitiatorCaps = FI_TAGGED | FI_RMA | FI_ATOMIC;
const uint64_t kTargetCaps    = FI_TAGGED | FI_RMA | FI_ATOMIC | FI_RMA_EVENT;
const uint64_t kKey = 3;
const size_t kRegionSize = 4096;
const int kWaitMs = 20000;

/* A region of a node, registered for remote access with counters bound to it. */
struct EventRegion {
    std::vector<uint64_t> mem = std::vector<uint64_t>(kRegionSize / 8);
    struct fid_mr *mr = NULL;
    struct fid_cntr *writes = NULL, *reads = NULL;

    int reg(Node &n, uint64_t key = kKey)
    {
        struct fi_cntr_attr attr = {};
        int ret;

        attr.events = FI_CNTR_EVENTS_COMP;
        attr.wait_obj = FI_WAIT_UNSPEC;   /* what SOS opens its target counter with */
        if ((ret = fi_mr_reg(n.domain, mem.data(), kRegionSize, FI_REMOTE_READ | FI_REMOTE_WRITE,
                             0, key, 0, &mr, NULL)) != 0) return ret;
        if ((ret = fi_cntr_open(n.domain, &attr, &writes, NULL)) != 0) return ret;
        if ((ret = fi_cntr_open(n.domain, &attr, &reads, NULL)) != 0) return ret;
        if ((ret = fi_mr_bind(mr, &writes->fid, FI_REMOTE_WRITE)) != 0) return ret;
        return fi_mr_bind(mr, &reads->fid, FI_REMOTE_READ);
    }

    ~EventRegion()
    {
        for (struct fid *f : {mr ? &mr->fid : NULL, writes ? &writes->fid : NULL,
                              reads ? &reads->fid : NULL}) {
            if (f != NULL) {
                EXPECT_EQ(0, fi_close(f));
            }
        }
    }
};

inline void open_target(Node &n)
{
    n.caps = kTargetCaps;
    n.mr_mode = FI_MR_LOCAL;   /* scalable: offsets and requested keys, as SOS */
    n.remote_counters = true;
    ASSERT_EQ(0, n.open());
}

inline void open_initiator(Node &n)
{
    n.caps = kInitiatorCaps;
    n.mr_mode = FI_MR_LOCAL;
    ASSERT_EQ(0, n.open());
}

/* RMA event messages n's endpoint has sent as an initiator. */
inline uint64_t events_sent(struct fid_ep *ep)
{
    uint64_t sent = UINT64_MAX;
    EXPECT_EQ(0, fi_control(&ep->fid, AXON_FI_EP_EVENTS_SENT, &sent));
    return sent;
}

}  // namespace

#endif
