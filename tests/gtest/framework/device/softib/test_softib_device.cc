/*
 * softib as a device: the list (AXON_SOFTIB_DEVICES), opening by name, the
 * port (Ethernet link layer, GID from AXON_SOFTIB_ADDR, MTU from
 * AXON_SOFTIB_MTU, one pkey 0xffff), the device attributes and the
 * capability mask (AXON_SOFTIB_CAP_MASK removes what the device offers,
 * so both sides of every capability check can be exercised), objects that
 * are in use refusing destruction, and the engine without its progress
 * thread.
 */
#include "softib_env.h"
#include "framework/device/softib/softib_wire.h"

#include <set>

namespace {

std::set<std::string> softib_names()
{
    axon_dev_info_t      *list  = nullptr;
    int                   count = -1;
    std::set<std::string> names;

    EXPECT_EQ(AXON_OK, axon_dev_get_list(&list, &count));
    EXPECT_GE(count, 0);
    for (int i = 0; i < count; ++i) {
        if (strcmp(list[i].backend, "softib") == 0) {
            names.insert(list[i].name);
        }
    }
    axon_dev_free_list(list);
    return names;
}

class SoftibDevice : public SoftibTest {};

TEST_F(SoftibDevice, ListHasSoftib0ByDefault)
{
    std::set<std::string> names = softib_names();
    EXPECT_EQ(1u, names.size());
    EXPECT_EQ(1u, names.count("softib0"));
}

TEST_F(SoftibDevice, DevicesTwoListsSoftib0AndSoftib1)
{
    SoftibDev second;

    env_.set("AXON_SOFTIB_DEVICES", "2");
    std::set<std::string> names = softib_names();
    EXPECT_EQ(2u, names.size());
    EXPECT_EQ(1u, names.count("softib0"));
    EXPECT_EQ(1u, names.count("softib1"));
    open_dev();
    ASSERT_EQ(0, second.open("softib1"));
    EXPECT_STREQ("softib1", second.ctx->name);
    EXPECT_STREQ("softib", second.ctx->backend);
    EXPECT_NE(dev_.attr.node_guid, second.attr.node_guid);
}

TEST_F(SoftibDevice, DevicesZeroListsNone)
{
    axon_dev_context_t *ctx = nullptr;

    env_.set("AXON_SOFTIB_DEVICES", "0");
    EXPECT_TRUE(softib_names().empty());
    EXPECT_EQ(ENODEV, axon_dev_open("softib0", &ctx));
}

TEST_F(SoftibDevice, OpenBogusNameEnodev)
{
    axon_dev_context_t *ctx = nullptr;

    EXPECT_EQ(ENODEV, axon_dev_open("bogus", &ctx));
    EXPECT_EQ(ENODEV, axon_dev_open("softib7", &ctx)) << "beyond AXON_SOFTIB_DEVICES";
}

TEST_F(SoftibDevice, PortIsActiveEthernetWithGidAndPkey)
{
    uint16_t       pkey = 0;
    axon_dev_gid_t gid;

    open_dev();
    const axon_dev_port_attr_t &p = dev_.port;
    EXPECT_EQ(AXON_DEV_PORT_ACTIVE, p.state);
    EXPECT_EQ(AXON_DEV_LINK_LAYER_ETHERNET, p.link_layer);
    EXPECT_EQ(0, p.lid);
    EXPECT_EQ(AXON_DEV_MTU_4096, p.max_mtu);
    EXPECT_EQ(AXON_DEV_MTU_4096, p.active_mtu);
    EXPECT_GE(p.gid_tbl_len, 1);
    EXPECT_EQ(1, p.pkey_tbl_len);
    EXPECT_EQ("::ffff:127.0.0.1", gid_str(dev_.gid));
    ASSERT_EQ(0, axon_dev_query_pkey(dev_.ctx, 1, 0, &pkey));
    EXPECT_EQ(0xffff, pkey);
    EXPECT_EQ(EINVAL, axon_dev_query_pkey(dev_.ctx, 1, 1, &pkey));
    EXPECT_EQ(EINVAL, axon_dev_query_gid(dev_.ctx, 1, 1, &gid));
    axon_dev_port_attr_t p2;
    EXPECT_EQ(EINVAL, axon_dev_query_port(dev_.ctx, 2, &p2));
    EXPECT_EQ(EINVAL, axon_dev_query_port(dev_.ctx, 0, &p2));
}

TEST_F(SoftibDevice, AddrSetsGid)
{
    env_.set("AXON_SOFTIB_ADDR", "127.0.0.2");
    open_dev();
    EXPECT_EQ("::ffff:127.0.0.2", gid_str(dev_.gid));
}

TEST_F(SoftibDevice, MtuConfigSetsPortMtuAndLimitsPathMtu)
{
    Qp                 q;
    axon_dev_qp_attr_t a;

    env_.set("AXON_SOFTIB_MTU", "1024");
    open_dev();
    EXPECT_EQ(AXON_DEV_MTU_1024, dev_.port.active_mtu);
    ASSERT_EQ(0, dev_.qp(&q, AXON_DEV_QPT_RC));
    ASSERT_EQ(0, dev_.to_init(q));
    int mask = SoftibDev::rtr_attrs(AXON_DEV_QPT_RC, q.qpn(), dev_.gid, 0, kMinRnrTimer,
                                    AXON_DEV_MTU_2048, &a);
    EXPECT_EQ(EINVAL, axon_dev_modify_qp(q.qp, &a, mask)) << "path MTU over the port MTU";
    EXPECT_EQ(0, dev_.to_rtr(q, q.qpn(), dev_.gid, 0, kMinRnrTimer, AXON_DEV_MTU_1024));
}

TEST_F(SoftibDevice, AttributesAndCapabilities)
{
    open_dev();
    const axon_dev_attr_t &a = dev_.attr;
    const uint64_t want = AXON_DEV_CAP_RC | AXON_DEV_CAP_UC | AXON_DEV_CAP_UD |
                          AXON_DEV_CAP_SRQ | AXON_DEV_CAP_ATOMIC | AXON_DEV_CAP_INLINE |
                          AXON_DEV_CAP_COMP_CHANNEL;
    EXPECT_EQ(want, a.cap_flags & want);
    EXPECT_EQ(AXON_DEV_ATOMIC_GLOB, a.atomic_cap);
    EXPECT_EQ(256u, a.max_inline_data);
    EXPECT_EQ(1, a.phys_port_cnt);
    EXPECT_GT(a.max_qp, 0);
    EXPECT_GT(a.max_qp_wr, 0);
    EXPECT_GT(a.max_sge, 0);
    EXPECT_GT(a.max_cqe, 0);
    EXPECT_GT(a.max_srq_wr, 0);
    EXPECT_GT(a.max_qp_rd_atom, 0);
    EXPECT_GT(a.max_qp_init_rd_atom, 0);
    EXPECT_NE(0u, a.node_guid);
    EXPECT_STREQ("softib", dev_.ctx->backend);
    EXPECT_STREQ("softib0", dev_.ctx->name);
    /* every flag has a name */
    for (int bit = 0; bit < AXON_DEV_CAP_LAST_BIT; ++bit) {
        EXPECT_NE(nullptr, axon_dev_cap_names[bit]) << bit;
    }
}

/* AXON_SOFTIB_ATOMIC_CAP=hca reports the weaker level (UCX 1.13 wants it);
 * the atomics are the same; a value outside glob|hca fails the open. */
TEST_F(SoftibDevice, AtomicCapConfig)
{
    env_.set("AXON_SOFTIB_ATOMIC_CAP", "hca");
    open_dev();
    EXPECT_EQ(AXON_DEV_ATOMIC_HCA, dev_.attr.atomic_cap);
    EXPECT_NE(0u, dev_.attr.cap_flags & AXON_DEV_CAP_ATOMIC);
    dev_.close();
    env_.set("AXON_SOFTIB_ATOMIC_CAP", "pci");
    axon_dev_context_t *ctx = nullptr;
    EXPECT_NE(0, axon_dev_open("softib0", &ctx));
    EXPECT_EQ(nullptr, ctx);
}

TEST_F(SoftibDevice, MaxInlineConfig)
{
    Qp q;

    env_.set("AXON_SOFTIB_MAX_INLINE", "64");
    open_dev();
    EXPECT_EQ(64u, dev_.attr.max_inline_data);
    EXPECT_EQ(EINVAL, dev_.qp(&q, AXON_DEV_QPT_RC, 1, nullptr, 65));
    EXPECT_EQ(0, dev_.qp(&q, AXON_DEV_QPT_RC, 1, nullptr, 64));
}

TEST_F(SoftibDevice, ObjectsInUseRefuseDestruction)
{
    Qp q;

    open_dev();
    ASSERT_EQ(0, dev_.qp(&q, AXON_DEV_QPT_RC));
    EXPECT_EQ(EBUSY, axon_dev_dealloc_pd(dev_.pd)) << "PD with a QP";
    EXPECT_EQ(EBUSY, axon_dev_destroy_cq(q.scq)) << "CQ with a QP";
    axon_dev_srq_t *srq = nullptr;
    ASSERT_EQ(0, dev_.srq(8, 1, &srq));
    Qp r;
    ASSERT_EQ(0, dev_.qp(&r, AXON_DEV_QPT_RC, 1, srq));
    EXPECT_EQ(EBUSY, axon_dev_destroy_srq(srq)) << "SRQ with a QP";
}

TEST_F(SoftibDevice, RegMrRejectsBadAccessAndNullAddress)
{
    axon_dev_mr_t *mr = nullptr;
    Buf            b  = dev_.reg(64, -1);

    open_dev();
    /* remote write without local write is invalid (as in verbs) */
    EXPECT_EQ(EINVAL, axon_dev_reg_mr(dev_.pd, b.ptr, 64, AXON_DEV_ACCESS_REMOTE_WRITE, &mr));
    EXPECT_EQ(EINVAL, axon_dev_reg_mr(dev_.pd, b.ptr, 64, AXON_DEV_ACCESS_REMOTE_ATOMIC, &mr));
    EXPECT_EQ(EINVAL, axon_dev_reg_mr(dev_.pd, b.ptr, 64, 1 << 20, &mr)) << "unknown flag";
    /* NULL..64 is never mapped (the kernel says EFAULT): a remote write would crash us */
    int ret = axon_dev_reg_mr(dev_.pd, nullptr, 64, 0, &mr);
    EXPECT_NE(0, ret) << "NULL address registered";
    if (ret == 0) {
        EXPECT_EQ(0, axon_dev_dereg_mr(mr));
    }
}

/*
 * A QP number carries its process's slot, and a process that opens the
 * device after another closed (or died) takes the lowest free slot: the
 * slot's QP numbers go on from where its former owner stopped, so packets
 * still on their way to the former owner's QPs find no QP of the new one.
 */
TEST_F(SoftibDevice, NextOwnerOfASlotDoesNotReuseItsQpNumbers)
{
    for (int attempt = 0; attempt < 5; ++attempt) {
        Qp first, second;

        open_dev();
        ASSERT_EQ(0, dev_.qp(&first, AXON_DEV_QPT_UD));
        uint32_t old_qpn = first.qp->qp_num;
        dev_.close();
        open_dev();
        ASSERT_EQ(0, dev_.qp(&second, AXON_DEV_QPT_UD));
        uint32_t new_qpn = second.qp->qp_num;
        dev_.close();
        if (SOFTIB_QPN_SLOT(new_qpn) != SOFTIB_QPN_SLOT(old_qpn)) {
            continue;   /* another process took our slot in between */
        }
        EXPECT_NE(old_qpn, new_qpn) << "slot " << SOFTIB_QPN_SLOT(old_qpn);
        return;
    }
    GTEST_SKIP() << "other processes took the slot each time";
}

/* Without the progress thread the consumer's calls drive the engine. */
TEST_F(SoftibDevice, WorksWithoutProgressThread)
{
    Qp            a, b;
    axon_dev_wc_t wc;

    env_.set("AXON_SOFTIB_PROGRESS_THREAD", "n");
    open_dev();
    make_pair(AXON_DEV_QPT_RC, &a, &b);
    Buf sb = dev_.reg(5000, AXON_DEV_ACCESS_LOCAL_WRITE | AXON_DEV_ACCESS_REMOTE_READ);
    Buf rb = dev_.reg(5000, AXON_DEV_ACCESS_LOCAL_WRITE);
    axon_test_fill(sb.ptr, 5000, 3);
    ASSERT_EQ(0, post_recv(b.qp, 1, rb.ptr, 5000, rb.lkey()));
    ASSERT_EQ(0, post_send_op(a.qp, 2, AXON_DEV_WR_SEND, sb.ptr, 5000, sb.lkey()));
    /* poll both sides alternately, as a single-threaded consumer would */
    bool got_send = false, got_recv = false;
    double deadline = axon_test_time() + kWcTimeout;
    while ((!got_send || !got_recv) && (axon_test_time() < deadline)) {
        if (!got_send && (axon_dev_poll_cq(a.scq, 1, &wc) == 1)) {
            EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status);
            got_send = true;
        }
        if (!got_recv && (axon_dev_poll_cq(b.rcq, 1, &wc) == 1)) {
            EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status);
            EXPECT_EQ(5000u, wc.byte_len);
            got_recv = true;
        }
        usleep(50);
    }
    EXPECT_TRUE(got_send);
    EXPECT_TRUE(got_recv);
    EXPECT_EQ(-1, axon_test_check(rb.ptr, 5000, 3));
}

/* ---------------------------------------------------------------- capability mask */

class SoftibCaps : public SoftibTest {};

TEST_F(SoftibCaps, MaskAtomicClearsAtomicCapAndRefusesAtomicWr)
{
    Qp                  a, b;
    axon_dev_send_wr_t  wr;
    axon_dev_sge_t      sge;
    axon_dev_send_wr_t *bad = nullptr;

    env_.set("AXON_SOFTIB_CAP_MASK", "atomic");
    open_dev();
    EXPECT_EQ(AXON_DEV_ATOMIC_NONE, dev_.attr.atomic_cap);
    EXPECT_EQ(0u, dev_.attr.cap_flags & AXON_DEV_CAP_ATOMIC);
    EXPECT_NE(0u, dev_.attr.cap_flags & AXON_DEV_CAP_RC) << "only atomics removed";
    make_pair(AXON_DEV_QPT_RC, &a, &b);
    Buf local  = dev_.reg(64, AXON_DEV_ACCESS_LOCAL_WRITE);
    Buf remote = dev_.reg(64, AXON_DEV_ACCESS_LOCAL_WRITE | AXON_DEV_ACCESS_REMOTE_WRITE |
                                  AXON_DEV_ACCESS_REMOTE_READ);
    for (axon_dev_wr_opcode_t op : {AXON_DEV_WR_ATOMIC_FETCH_AND_ADD,
                                    AXON_DEV_WR_ATOMIC_CMP_AND_SWP}) {
        make_wr(&wr, &sge, 1, op, local.ptr, 8, local.lkey());
        wr.wr.atomic.remote_addr = remote.addr();
        wr.wr.atomic.rkey        = remote.rkey();
        EXPECT_EQ(EINVAL, axon_dev_post_send(a.qp, &wr, &bad));
        EXPECT_EQ(&wr, bad);
    }
    /* other operations still work */
    axon_dev_wc_t wc;
    ASSERT_EQ(0, post_rdma(a.qp, 2, AXON_DEV_WR_RDMA_READ, local.ptr, 8, local.lkey(),
                           remote.addr(), remote.rkey()));
    ASSERT_TRUE(poll_one(a.scq, &wc));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status);
}

TEST_F(SoftibCaps, MaskUdCreateQpUdEopnotsupp)
{
    Qp q;

    env_.set("AXON_SOFTIB_CAP_MASK", "ud");
    open_dev();
    EXPECT_EQ(0u, dev_.attr.cap_flags & AXON_DEV_CAP_UD);
    EXPECT_EQ(EOPNOTSUPP, dev_.qp(&q, AXON_DEV_QPT_UD));
    EXPECT_EQ(0, dev_.qp(&q, AXON_DEV_QPT_RC));
}

TEST_F(SoftibCaps, MaskRcAndUcCreateQpEopnotsupp)
{
    Qp q;

    env_.set("AXON_SOFTIB_CAP_MASK", "rc,uc");
    open_dev();
    EXPECT_EQ(0u, dev_.attr.cap_flags & (AXON_DEV_CAP_RC | AXON_DEV_CAP_UC));
    EXPECT_EQ(EOPNOTSUPP, dev_.qp(&q, AXON_DEV_QPT_RC));
    EXPECT_EQ(EOPNOTSUPP, dev_.qp(&q, AXON_DEV_QPT_UC));
    EXPECT_EQ(0, dev_.qp(&q, AXON_DEV_QPT_UD));
}

TEST_F(SoftibCaps, MaskSrqCreateSrqEopnotsupp)
{
    axon_dev_srq_t *srq = nullptr;

    env_.set("AXON_SOFTIB_CAP_MASK", "srq");
    open_dev();
    EXPECT_EQ(0u, dev_.attr.cap_flags & AXON_DEV_CAP_SRQ);
    EXPECT_EQ(EOPNOTSUPP, dev_.srq(8, 1, &srq));
}

TEST_F(SoftibCaps, MaskInlineMaxInlineZero)
{
    Qp a, b;

    env_.set("AXON_SOFTIB_CAP_MASK", "inline");
    open_dev();
    EXPECT_EQ(0u, dev_.attr.cap_flags & AXON_DEV_CAP_INLINE);
    EXPECT_EQ(0u, dev_.attr.max_inline_data);
    make_pair(AXON_DEV_QPT_RC, &a, &b);
    uint8_t src[8] = {0};
    EXPECT_EQ(EINVAL, post_send_op(a.qp, 1, AXON_DEV_WR_SEND, src, sizeof(src), 0,
                                   AXON_DEV_SEND_SIGNALED | AXON_DEV_SEND_INLINE));
}

TEST_F(SoftibCaps, MaskSeveralAtOnce)
{
    axon_dev_srq_t *srq = nullptr;

    env_.set("AXON_SOFTIB_CAP_MASK", "atomic,srq");
    open_dev();
    EXPECT_EQ(0u, dev_.attr.cap_flags & (AXON_DEV_CAP_ATOMIC | AXON_DEV_CAP_SRQ));
    EXPECT_EQ(AXON_DEV_ATOMIC_NONE, dev_.attr.atomic_cap);
    EXPECT_EQ(EOPNOTSUPP, dev_.srq(8, 1, &srq));
}

}  // namespace
