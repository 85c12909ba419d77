/*
 * UD multicast (attach_mcast / detach_mcast, seed §4.6.13-14): a UD QP
 * joins a group named by a multicast GID (ff00::/8, or an IPv4-mapped
 * class D address as RoCE maps IPv4 multicast); a UD send whose AH has the
 * group's GID as dgid and remote_qpn 0xFFFFFF reaches every QP attached to
 * the group on this host, one copy each, the sender's own QP included if
 * it is attached. A receive completion carries the GRH flag, the sender's
 * QPN as src_qp and the GRH area holds the sender's GID and the group's
 * GID. What is checked:
 *   - only UD QPs attach, only multicast GIDs name a group, a detach of a
 *     QP that is not attached is refused (EINVAL); the LID is ignored;
 *   - fan-out to several QPs of one process, the sender's loopback copy, a
 *     double attach that still gives one copy, detach stopping delivery,
 *     a Q_Key mismatch or an empty receive queue dropping one member's
 *     copy only, a destroyed QP leaving the group;
 *   - the device's limits (max_mcast_qp_attach per group, max_mcast_grp
 *     groups), where reaching them is affordable;
 *   - members in forked processes (SoftibMcastXproc): a child's QP gets the
 *     parent's message byte for byte; a member process that exits or is
 *     killed while attached neither blocks nor breaks the sender, the
 *     remaining members keep receiving, and its place in the group is
 *     free again; the groups of a process killed while holding the whole
 *     table are free again for a process that was already running
 *     (SoftibMcastTableXproc).
 * The group table is host-wide (one per device): every group of a test has
 * a GID of its own process (its pid inside), so tests running in parallel
 * never share one; the tests that fill a table, or whose members die
 * attached, use a device of their own (softib2, softib3, softib4), so that
 * what they hold, or leave behind, is never softib0's.
 */
#include "softib_env.h"

#include <signal.h>

#include <algorithm>
#include <set>
#include <utility>

namespace {

const uint32_t kGrh           = 40;
const size_t   kGrhSgidOffset = 8;    /* struct ibv_grh: sgid */
const size_t   kGrhDgidOffset = 24;   /* struct ibv_grh: dgid */
const uint32_t kMcastQpn      = 0xFFFFFF;
const uint32_t kOtherQkey     = 0x22222222;
const uint32_t kMsgLen        = 200;
const uint32_t kSlot          = kGrh + 1024;   /* one receive: GRH + a path MTU */
const double   kQuiet         = 0.1;           /* "no (further) copy" is checked this long */
const int      kAffordableQps    = 256;        /* QPs a per-group limit test may create */
const int      kAffordableGroups = 4096;       /* groups a group limit test may create */
const unsigned kGroupLimitDev    = 3;          /* softib3: GroupLimitIsMaxMcastGrp's alone */
const unsigned kDeadGroupsDev    = 4;          /* softib4: DeadProcessesGroupsAreReclaimed's */
const unsigned kLeaveDev         = 2;          /* softib2: the tests whose members die attached */

/* ---------------------------------------------------------------- GIDs */

void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* An IB multicast GID (ff0e::/16, global scope) of this process: its pid and a counter. */
axon_dev_gid_t make_mgid()
{
    static uint32_t counter;
    axon_dev_gid_t  g;

    memset(&g, 0, sizeof(g));
    g.raw[0] = 0xff;
    g.raw[1] = 0x0e;
    g.raw[4] = 'a';
    g.raw[5] = 'x';
    g.raw[6] = 'm';
    g.raw[7] = 'c';
    put_be32(g.raw + 8, (uint32_t)getpid());
    put_be32(g.raw + 12, ++counter);
    return g;
}

/* ::ffff:a.b.c.d for addr (host order) */
axon_dev_gid_t v4_gid(uint32_t addr)
{
    axon_dev_gid_t g;

    memset(&g, 0, sizeof(g));
    g.raw[10] = 0xff;
    g.raw[11] = 0xff;
    put_be32(g.raw + 12, addr);
    return g;
}

/*
 * A class D address of this process in first octet 224 + octet_off (0..15):
 * the pid (< 2^22 as pid_max allows) in the low 22 bits, 2 counter bits.
 */
uint32_t v4_group(unsigned octet_off)
{
    static uint32_t counter;
    return ((224u + octet_off) << 24) | ((++counter & 3u) << 22) |
           ((uint32_t)getpid() & 0x3fffffu);
}

/* ---------------------------------------------------------------- one member's view */

/* What a message to the group must look like at a member. */
struct Expect {
    uint32_t       src_qp;
    axon_dev_gid_t sgid;
    axon_dev_gid_t mgid;
    uint32_t       len;
    uint64_t       seed;
};

/*
 * Check one receive completion of a multicast message whose receive buffer
 * is buf: "" if it is what e says, else what differs.
 */
std::string check_mcast_wc(const axon_dev_wc_t &wc, uint32_t qp_num, const uint8_t *buf,
                           const Expect &e)
{
    std::string err;
    if (wc.status != AXON_DEV_WC_SUCCESS) {
        return std::string("status ") + wc_status_name(wc.status);
    }
    if (wc.opcode != AXON_DEV_WC_RECV) {
        err += " opcode " + std::to_string((int)wc.opcode) + " (not RECV);";
    }
    if (!(wc.wc_flags & AXON_DEV_WC_GRH)) {
        err += " no GRH flag;";
    }
    if (wc.qp_num != qp_num) {
        err += " qp_num " + std::to_string(wc.qp_num) + " (not the member's " +
               std::to_string(qp_num) + ");";
    }
    if (wc.src_qp != e.src_qp) {
        err += " src_qp " + std::to_string(wc.src_qp) + " (not the sender's " +
               std::to_string(e.src_qp) + ");";
    }
    if (wc.byte_len != kGrh + e.len) {
        err += " byte_len " + std::to_string(wc.byte_len) + " (not 40 + " +
               std::to_string(e.len) + ");";
    }
    axon_dev_gid_t sgid, dgid;
    memcpy(sgid.raw, buf + kGrhSgidOffset, 16);
    memcpy(dgid.raw, buf + kGrhDgidOffset, 16);
    if (memcmp(sgid.raw, e.sgid.raw, 16) != 0) {
        err += " GRH sgid " + gid_str(sgid) + " (not the sender's " + gid_str(e.sgid) + ");";
    }
    if (memcmp(dgid.raw, e.mgid.raw, 16) != 0) {
        err += " GRH dgid " + gid_str(dgid) + " (not the group's " + gid_str(e.mgid) + ");";
    }
    ssize_t bad = axon_test_check(buf + kGrh, e.len, e.seed);
    if (bad != -1) {
        err += " payload differs at byte " + std::to_string(bad) + ";";
    }
    return err;
}

/* Bring a UD QP up to RTS with Q_Key qkey. */
int ud_up(SoftibDev &dev, const Qp &q, uint32_t qkey = kQkey)
{
    axon_dev_qp_attr_t a;
    int mask = SoftibDev::init_attrs(AXON_DEV_QPT_UD, AXON_DEV_ACCESS_REMOTE_WRITE |
                                     AXON_DEV_ACCESS_REMOTE_READ |
                                     AXON_DEV_ACCESS_REMOTE_ATOMIC, &a);
    a.qkey  = qkey;
    int ret = axon_dev_modify_qp(q.qp, &a, mask);
    if (ret == 0) ret = dev.to_rtr(q, 0, dev.gid, 0);
    if (ret == 0) ret = dev.to_rts(q, 0);
    return ret;
}

/* A UD send of len bytes from buf to the group of ah. */
int send_mcast(const Qp &from, axon_dev_ah_t *ah, uint64_t wr_id, void *buf, uint32_t len,
               uint32_t lkey, uint32_t qkey = kQkey)
{
    return post_ud_send(from.qp, wr_id, buf, len, lkey, ah, kMcastQpn, qkey);
}

/* ---------------------------------------------------------------- the fixture */

class SoftibMcast : public SoftibTest {
protected:
    /* The attachments this test holds, detached at the end (a failed test's too). */
    std::set<std::pair<axon_dev_qp_t *, std::string>> attached_;

    static std::string key(const axon_dev_gid_t &g)
    {
        return std::string((const char *)g.raw, 16);
    }

    void TearDown() override
    {
        for (auto &a : attached_) {
            axon_dev_gid_t g;
            memcpy(g.raw, a.second.data(), 16);
            EXPECT_EQ(0, axon_dev_detach_mcast(a.first, &g, 0))
                << "detach at the end of QP " << a.first->qp_num << " from " << gid_str(g);
        }
        attached_.clear();
        SoftibTest::TearDown();
    }

    int attach(const Qp &q, const axon_dev_gid_t &g, uint16_t lid = 0)
    {
        int ret = axon_dev_attach_mcast(q.qp, &g, lid);
        if (ret == 0) {
            attached_.insert(std::make_pair(q.qp, key(g)));
        }
        return ret;
    }

    int detach(const Qp &q, const axon_dev_gid_t &g, uint16_t lid = 0)
    {
        int ret = axon_dev_detach_mcast(q.qp, &g, lid);
        if (ret == 0) {
            attached_.erase(std::make_pair(q.qp, key(g)));
        }
        return ret;
    }

    /* Destroy q now: whatever it was attached to is no longer ours to detach. */
    void destroy(Qp *q)
    {
        for (auto it = attached_.begin(); it != attached_.end();) {
            it = (it->first == q->qp) ? attached_.erase(it) : std::next(it);
        }
        dev_.destroy_qp(q);
    }

    /* A UD QP in RTS with its own CQs and Q_Key qkey. */
    void ud_qp(Qp *q, uint32_t qkey = kQkey, uint32_t create_flags = 0)
    {
        ASSERT_EQ(0, dev_.qp(q, AXON_DEV_QPT_UD, 1, nullptr, 0, 64, nullptr, nullptr,
                             create_flags));
        ASSERT_EQ(0, ud_up(dev_, *q, qkey));
    }

    /* The device opened, the sending UD QP s in RTS and its kMsgLen buffer *sb. */
    void open_sender(Qp *s, Buf *sb)
    {
        open_dev();
        ASSERT_NO_FATAL_FAILURE(ud_qp(s));
        *sb = dev_.reg(kMsgLen, 0);
    }

    /* n receives of kSlot each in b (receive i: wr_id i, slot i). */
    void post_slots(const Qp &q, const Buf &b, int n)
    {
        for (int i = 0; i < n; ++i) {
            ASSERT_EQ(0, post_recv(q.qp, i, b.ptr + i * kSlot, kSlot, b.lkey()));
        }
    }

    /* A receiving member: its UD QP (a Qp itself) and its buffer of receive slots. */
    struct Member : Qp {
        Buf buf;
    };

    /*
     * m becomes a UD QP in RTS (Q_Key qkey, create_flags) with a buffer of
     * n slots, all n receives posted (post_slots), then attached to *g
     * unless g is null.
     */
    void member(Member *m, int n, const axon_dev_gid_t *g = nullptr, uint32_t qkey = kQkey,
                uint32_t create_flags = 0)
    {
        ASSERT_NO_FATAL_FAILURE(ud_qp(m, qkey, create_flags));
        m->buf = dev_.reg(n * kSlot, AXON_DEV_ACCESS_LOCAL_WRITE);
        ASSERT_NO_FATAL_FAILURE(post_slots(*m, m->buf, n));
        if (g) {
            ASSERT_EQ(0, attach(*m, *g));
        }
    }

    /* *ah: an address handle of group g (the test fails if there is none). */
    void group_ah(const axon_dev_gid_t &g, axon_dev_ah_t **ah)
    {
        *ah = dev_.ah(g);
        ASSERT_NE(nullptr, *ah);
    }

    Expect from(const Qp &sender, const axon_dev_gid_t &mgid, uint32_t len, uint64_t seed)
    {
        return {sender.qpn(), dev_.gid, mgid, len, seed};
    }

    /* The next receive completion of q is message e, in the slot of its wr_id in b. */
    void expect_copy(const Qp &q, const Buf &b, const Expect &e, const char *who)
    {
        axon_dev_wc_t wc;
        ASSERT_TRUE(poll_one(q.rcq, &wc)) << who << " got no copy (seed " << e.seed << ")";
        ASSERT_LT(wc.wr_id, b.len / kSlot) << who << ": wr_id " << wc.wr_id;
        EXPECT_EQ("", check_mcast_wc(wc, q.qpn(), b.ptr + wc.wr_id * kSlot, e))
            << who << ", message of seed " << e.seed;
    }

    void expect_copy(const Member &m, const Expect &e, const char *who)
    {
        expect_copy(m, m.buf, e, who);
    }

    /* No receive completion on q for kQuiet. */
    void expect_none(const Qp &q, const char *who)
    {
        axon_dev_wc_t wc;
        EXPECT_TRUE(no_wc(q.rcq, kQuiet, &wc))
            << who << " got a copy it should not have: wr_id " << wc.wr_id << ", status "
            << wc_status_name(wc.status) << ", " << wc.byte_len << " bytes";
    }

    /* Send the message of seed from s to the group of ah; its completion is success. */
    void send_ok(const Qp &s, axon_dev_ah_t *ah, const Buf &sb, uint64_t seed,
                 uint32_t len = kMsgLen, uint32_t qkey = kQkey)
    {
        axon_dev_wc_t wc;
        axon_test_fill(sb.ptr, len, seed);
        ASSERT_EQ(0, send_mcast(s, ah, seed, sb.ptr, len, sb.lkey(), qkey));
        ASSERT_TRUE(poll_one(s.scq, &wc)) << "no send completion (seed " << seed << ")";
        EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
        EXPECT_EQ(seed, wc.wr_id);
        EXPECT_EQ(AXON_DEV_WC_SEND, wc.opcode);
    }

    /*
     * Open softib<index> instead of softib0: its group table is its own, so
     * a test that fills the table leaves softib0's to the tests running
     * beside it (the limit tests only; indexes 5-7 are the wire suite's).
     */
    void open_dev_index(unsigned index)
    {
        std::string name = "softib" + std::to_string(index);
        env_.set("AXON_SOFTIB_DEVICES", "8");
        int ret = dev_.open(name.c_str());
        ASSERT_EQ(0, ret) << "cannot open " << name << ": " << strerror(ret);
        set_nonblock(dev_.ctx->async_fd);
    }

    uint32_t qkey_violations()
    {
        axon_dev_port_attr_t port;
        EXPECT_EQ(0, axon_dev_query_port(dev_.ctx, 1, &port));
        return port.qkey_viol_cntr;
    }

    /*
     * The port's Q_Key violations once they reach want (within kWcTimeout),
     * else the last seen; cq is called into meanwhile (progress only).
     */
    uint32_t wait_qkey_violations(uint32_t want, axon_dev_cq_t *cq)
    {
        double        deadline = axon_test_time() + kWcTimeout;
        axon_dev_wc_t wc;
        uint32_t      n;
        while (((n = qkey_violations()) < want) && (axon_test_time() < deadline)) {
            axon_dev_poll_cq(cq, 0, &wc);
            usleep(1000);
        }
        return n;
    }
};

/* ---------------------------------------------------------------- attach and detach */

TEST_F(SoftibMcast, DeviceReportsMulticastLimits)
{
    open_dev();
    std::cout << "[ info     ] max_mcast_grp " << dev_.attr.max_mcast_grp
              << ", max_mcast_qp_attach " << dev_.attr.max_mcast_qp_attach
              << ", max_total_mcast_qp_attach " << dev_.attr.max_total_mcast_qp_attach
              << std::endl;
    EXPECT_GT(dev_.attr.max_mcast_grp, 0);
    EXPECT_GT(dev_.attr.max_mcast_qp_attach, 0);
    EXPECT_GT(dev_.attr.max_total_mcast_qp_attach, 0);
    EXPECT_GE(dev_.attr.max_total_mcast_qp_attach, dev_.attr.max_mcast_qp_attach)
        << "one group could never be filled";
    EXPECT_TRUE(dev_.attr.cap_flags & AXON_DEV_CAP_MCAST);
}

/* Masked off, multicast is reported absent (limits 0) and attaching is refused. */
TEST_F(SoftibMcast, MaskedOffIsUnsupported)
{
    Qp q;
    axon_dev_gid_t g = make_mgid();

    env_.set("AXON_SOFTIB_CAP_MASK", "mcast");
    open_dev();
    EXPECT_FALSE(dev_.attr.cap_flags & AXON_DEV_CAP_MCAST);
    EXPECT_EQ(0, dev_.attr.max_mcast_grp);
    EXPECT_EQ(0, dev_.attr.max_mcast_qp_attach);
    EXPECT_EQ(0, dev_.attr.max_total_mcast_qp_attach);
    ASSERT_NO_FATAL_FAILURE(ud_qp(&q));
    EXPECT_EQ(EOPNOTSUPP, attach(q, g));
}

TEST_F(SoftibMcast, OnlyUdQpsAttach)
{
    Qp rc, uc, ud;
    axon_dev_gid_t g = make_mgid();

    open_dev();
    ASSERT_EQ(0, dev_.qp(&rc, AXON_DEV_QPT_RC));
    ASSERT_EQ(0, dev_.qp(&uc, AXON_DEV_QPT_UC));
    ASSERT_NO_FATAL_FAILURE(ud_qp(&ud));
    EXPECT_EQ(EINVAL, attach(rc, g)) << "RC QP (RESET)";
    EXPECT_EQ(EINVAL, attach(uc, g)) << "UC QP (RESET)";
    ASSERT_EQ(0, dev_.up(rc, rc.qpn(), dev_.gid, kPsnA, kPsnA));   /* in RTS: no better */
    EXPECT_EQ(EINVAL, attach(rc, g)) << "RC QP (RTS)";
    EXPECT_EQ(EINVAL, detach(rc, g)) << "detach of an RC QP";
    EXPECT_EQ(0, attach(ud, g)) << "the UD QP";
    EXPECT_EQ(EINVAL, detach(uc, g)) << "detach of a UC QP from a group that exists";
    EXPECT_EQ(0, detach(ud, g));
}

TEST_F(SoftibMcast, OnlyMulticastGidsNameAGroup)
{
    Qp ud;

    open_dev();
    ASSERT_NO_FATAL_FAILURE(ud_qp(&ud));

    struct Bad {
        const char    *what;
        axon_dev_gid_t gid;
    };
    axon_dev_gid_t zero, loop, linklocal, fe, mapped_d_not_v4, not_mapped, d_with_byte9;
    memset(&zero, 0, sizeof(zero));
    loop = zero;
    loop.raw[15] = 1;                                  /* ::1 */
    linklocal = zero;
    linklocal.raw[0] = 0xfe;
    linklocal.raw[1] = 0x80;
    linklocal.raw[15] = 1;                             /* fe80::1 */
    fe = make_mgid();
    fe.raw[0] = 0xfe;                                  /* one bit short of ff */
    mapped_d_not_v4 = v4_gid(0xE0000001);
    mapped_d_not_v4.raw[0] = 0x01;                     /* 100::ffff:224.0.0.1 */
    not_mapped = v4_gid(0xE0000001);
    not_mapped.raw[11] = 0xfe;                         /* ::fffe:224.0.0.1 */
    d_with_byte9 = v4_gid(0xE0000001);
    d_with_byte9.raw[9] = 0x01;                        /* ::1:ffff:224.0.0.1 */
    const Bad bad[] = {
        {"the device's own (unicast) GID", dev_.gid},
        {"::", zero},
        {"::1", loop},
        {"fe80::1", linklocal},
        {"first byte 0xfe", fe},
        {"::ffff:10.1.2.3 (unicast v4-mapped)", v4_gid(0x0A010203)},
        {"::ffff:127.0.0.1 (unicast v4-mapped)", v4_gid(0x7F000001)},
        {"::ffff:223.255.255.255 (class C, below class D)", v4_gid(0xDFFFFFFF)},
        {"::ffff:240.0.0.1 (class E, above class D)", v4_gid(0xF0000001)},
        {"::ffff:255.255.255.255 (broadcast)", v4_gid(0xFFFFFFFF)},
        {"100::ffff:224.0.0.1 (not v4-mapped: byte 0)", mapped_d_not_v4},
        {"::fffe:224.0.0.1 (not v4-mapped: byte 11)", not_mapped},
        {"::1:ffff:224.0.0.1 (not v4-mapped: byte 9)", d_with_byte9},
    };
    for (const Bad &b : bad) {
        EXPECT_EQ(EINVAL, attach(ud, b.gid)) << b.what << " " << gid_str(b.gid);
        EXPECT_EQ(EINVAL, detach(ud, b.gid)) << "detach: " << b.what;
    }

    /* every ff00::/8 GID and every class D address is a group (scope does not matter) */
    axon_dev_gid_t link_scope = make_mgid();
    link_scope.raw[1] = 0x02;                          /* ff02:: */
    axon_dev_gid_t flags_scope = make_mgid();
    flags_scope.raw[1] = 0x15;                         /* ff15:: (transient, site-local) */
    const Bad good[] = {
        {"ff0e:: (global scope)", make_mgid()},
        {"ff02:: (link-local scope)", link_scope},
        {"ff15::", flags_scope},
        {"::ffff:224.x.y.z (low end of class D)", v4_gid(v4_group(0))},
        {"::ffff:239.x.y.z (high end of class D)", v4_gid(v4_group(15))},
    };
    for (const Bad &g : good) {
        EXPECT_EQ(0, attach(ud, g.gid)) << g.what << " " << gid_str(g.gid);
    }
    for (const Bad &g : good) {
        EXPECT_EQ(0, detach(ud, g.gid)) << g.what << " " << gid_str(g.gid);
    }
}

TEST_F(SoftibMcast, LidIsIgnored)
{
    Qp ud;
    axon_dev_gid_t g = make_mgid();

    open_dev();
    ASSERT_NO_FATAL_FAILURE(ud_qp(&ud));
    EXPECT_EQ(0, attach(ud, g, 0xC001));
    EXPECT_EQ(0, attach(ud, g, 0x1234)) << "the same group under another LID";
    EXPECT_EQ(0, detach(ud, g, 0xFFFF)) << "detach under a third LID";
    EXPECT_EQ(EINVAL, detach(ud, g, 0xC001)) << "one detach removed the attachment";
}

TEST_F(SoftibMcast, DetachOfUnattachedQpRefused)
{
    Qp a, b;
    axon_dev_gid_t fresh = make_mgid(), g = make_mgid();

    open_dev();
    ASSERT_NO_FATAL_FAILURE(ud_qp(&a));
    ASSERT_NO_FATAL_FAILURE(ud_qp(&b));
    EXPECT_EQ(EINVAL, detach(a, fresh)) << "a group nobody joined";
    ASSERT_EQ(0, attach(b, g));
    EXPECT_EQ(EINVAL, detach(a, g)) << "a group with another member";
    EXPECT_EQ(0, detach(b, g));
    EXPECT_EQ(EINVAL, detach(b, g)) << "a second detach";
    EXPECT_EQ(EINVAL, detach(a, g)) << "the group, now empty";
}

/* ---------------------------------------------------------------- delivery in one process */

TEST_F(SoftibMcast, EveryMemberGetsOneCopyOthersNone)
{
    Qp s;
    Member r1, r2, outsider;
    axon_dev_ah_t *ah = nullptr;
    axon_dev_gid_t g = make_mgid();

    Buf sb;
    ASSERT_NO_FATAL_FAILURE(open_sender(&s, &sb));
    ASSERT_NO_FATAL_FAILURE(member(&r1, 4, &g));
    ASSERT_NO_FATAL_FAILURE(member(&r2, 4, &g));
    ASSERT_NO_FATAL_FAILURE(member(&outsider, 4));
    ASSERT_NO_FATAL_FAILURE(group_ah(g, &ah));

    for (uint64_t seed = 1; seed <= 2; ++seed) {
        send_ok(s, ah, sb, seed);
        expect_copy(r1, from(s, g, kMsgLen, seed), "first member");
        expect_copy(r2, from(s, g, kMsgLen, seed), "second member");
    }
    expect_none(r1, "first member (a third copy)");
    expect_none(r2, "second member (a third copy)");
    expect_none(outsider, "a QP not attached");
}

TEST_F(SoftibMcast, GrhHoldsSenderGidAndGroupGid)
{
    Qp s, r;
    axon_dev_wc_t wc;
    axon_dev_ah_t *ah = nullptr;
    axon_dev_gid_t g = make_mgid();
    const uint32_t mtu = (uint32_t)axon_dev_mtu_bytes(kPathMtu);

    open_dev();
    ASSERT_NO_FATAL_FAILURE(ud_qp(&s));
    ASSERT_NO_FATAL_FAILURE(ud_qp(&r));
    Buf sb = dev_.reg(mtu, 0);
    Buf rb = dev_.reg(kGrh + mtu + 64, AXON_DEV_ACCESS_LOCAL_WRITE);
    memset(rb.ptr, 0xcc, rb.len);
    ASSERT_EQ(0, post_recv(r.qp, 7, rb.ptr, kGrh + mtu + 64, rb.lkey()));
    ASSERT_EQ(0, attach(r, g));
    ASSERT_NO_FATAL_FAILURE(group_ah(g, &ah));
    send_ok(s, ah, sb, 11, mtu);   /* a whole path MTU */
    ASSERT_TRUE(poll_one(r.rcq, &wc));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    EXPECT_EQ(7u, wc.wr_id);
    EXPECT_EQ(AXON_DEV_WC_RECV, wc.opcode);
    EXPECT_TRUE(wc.wc_flags & AXON_DEV_WC_GRH) << "wc_flags GRH";
    EXPECT_EQ(s.qpn(), wc.src_qp) << "src_qp is the sender's QPN";
    EXPECT_NE(kMcastQpn, wc.src_qp);
    EXPECT_EQ(r.qpn(), wc.qp_num) << "qp_num is the member's";
    EXPECT_EQ(kGrh + mtu, wc.byte_len) << "byte_len counts the GRH area";
    EXPECT_EQ(0, memcmp(rb.ptr + kGrhSgidOffset, dev_.gid.raw, 16)) << "sender's GID in the GRH";
    EXPECT_EQ(0, memcmp(rb.ptr + kGrhDgidOffset, g.raw, 16))
        << "the GRH's dgid is the group's GID, not the receiver's "
        << (memcmp(rb.ptr + kGrhDgidOffset, dev_.gid.raw, 16) == 0 ? "(it is the receiver's)"
                                                                     : "");
    EXPECT_EQ(-1, axon_test_check(rb.ptr + kGrh, mtu, 11)) << "payload after the GRH";
    EXPECT_EQ(0xcc, rb.ptr[kGrh + mtu]) << "wrote past the message";
    expect_none(r, "the member (a second copy)");
}

TEST_F(SoftibMcast, Ipv4MappedGroupDelivers)
{
    Qp s;
    Member r;
    axon_dev_ah_t *ah = nullptr;
    axon_dev_gid_t g = v4_gid(v4_group(7));   /* ::ffff:231.x.y.z */

    Buf sb;
    ASSERT_NO_FATAL_FAILURE(open_sender(&s, &sb));
    ASSERT_NO_FATAL_FAILURE(member(&r, 2, &g));
    ASSERT_NO_FATAL_FAILURE(group_ah(g, &ah));
    send_ok(s, ah, sb, 21);
    expect_copy(r, from(s, g, kMsgLen, 21), "the member of the IPv4-mapped group");
    expect_none(r, "the member (a second copy)");
}

TEST_F(SoftibMcast, SendersOwnAttachedQpGetsACopy)
{
    Member s, r;
    axon_dev_ah_t *ah = nullptr;
    axon_dev_gid_t g = make_mgid();

    open_dev();
    ASSERT_NO_FATAL_FAILURE(member(&s, 2, &g));
    ASSERT_NO_FATAL_FAILURE(member(&r, 2, &g));
    Buf sb = dev_.reg(kMsgLen, 0);
    ASSERT_NO_FATAL_FAILURE(group_ah(g, &ah));
    send_ok(s, ah, sb, 31);
    expect_copy(s, from(s, g, kMsgLen, 31), "the sender's own QP (loopback)");
    expect_copy(r, from(s, g, kMsgLen, 31), "the other member");
    expect_none(s, "the sender (a second copy)");
    expect_none(r, "the other member (a second copy)");

    /* the sender alone in the group still gets its copy */
    ASSERT_EQ(0, detach(r, g));
    send_ok(s, ah, sb, 32);
    expect_copy(s, from(s, g, kMsgLen, 32), "the sender, alone in the group");
    expect_none(r, "the detached member");
}

/* IBV_QP_CREATE_BLOCK_SELF_MCAST_LB: the sender's own sends do not come back to it, while
 * another member's do and the other members still get the sender's. */
TEST_F(SoftibMcast, BlockSelfLoopbackKeepsOwnSendsAway)
{
    Member s, r;
    axon_dev_ah_t *ah = nullptr;
    axon_dev_gid_t g = make_mgid();

    open_dev();
    ASSERT_NO_FATAL_FAILURE(member(&s, 2, &g, kQkey, AXON_DEV_QP_CREATE_BLOCK_SELF_MCAST_LB));
    ASSERT_NO_FATAL_FAILURE(member(&r, 2, &g));
    Buf sb = dev_.reg(kMsgLen, 0);
    ASSERT_NO_FATAL_FAILURE(group_ah(g, &ah));
    send_ok(s, ah, sb, 41);
    expect_copy(r, from(s, g, kMsgLen, 41), "the other member");
    expect_none(s, "the blocking sender (its own send)");
    send_ok(r, ah, sb, 42);
    expect_copy(s, from(r, g, kMsgLen, 42), "the blocking QP (another member's send)");
    expect_copy(r, from(r, g, kMsgLen, 42), "the other member's own QP (loopback)");
}

TEST_F(SoftibMcast, DoubleAttachDeliversOneCopy)
{
    Qp s;
    Member r;
    axon_dev_ah_t *ah = nullptr;
    axon_dev_gid_t g = make_mgid();

    Buf sb;
    ASSERT_NO_FATAL_FAILURE(open_sender(&s, &sb));
    ASSERT_NO_FATAL_FAILURE(member(&r, 4, &g));
    EXPECT_EQ(0, attach(r, g)) << "attaching again succeeds";
    ASSERT_NO_FATAL_FAILURE(group_ah(g, &ah));
    send_ok(s, ah, sb, 41);
    expect_copy(r, from(s, g, kMsgLen, 41), "the twice attached member");
    expect_none(r, "the twice attached member (a second copy)");

    /* one detach removes the attachment whole */
    ASSERT_EQ(0, detach(r, g));
    send_ok(s, ah, sb, 42);
    expect_none(r, "the member after one detach of two attaches");
    EXPECT_EQ(EINVAL, detach(r, g)) << "a second detach after two attaches";
}

TEST_F(SoftibMcast, DetachStopsDelivery)
{
    Qp s;
    Member r1, r2;
    axon_dev_ah_t *ah = nullptr;
    axon_dev_gid_t g = make_mgid();

    Buf sb;
    ASSERT_NO_FATAL_FAILURE(open_sender(&s, &sb));
    ASSERT_NO_FATAL_FAILURE(member(&r1, 4, &g));
    ASSERT_NO_FATAL_FAILURE(member(&r2, 4, &g));
    ASSERT_NO_FATAL_FAILURE(group_ah(g, &ah));

    send_ok(s, ah, sb, 51);
    expect_copy(r1, from(s, g, kMsgLen, 51), "first member");
    expect_copy(r2, from(s, g, kMsgLen, 51), "second member");

    ASSERT_EQ(0, detach(r1, g));
    send_ok(s, ah, sb, 52);
    expect_copy(r2, from(s, g, kMsgLen, 52), "the member that stayed");
    expect_none(r1, "the detached member");

    /* attached again, it receives again (its receives were left alone) */
    ASSERT_EQ(0, attach(r1, g));
    send_ok(s, ah, sb, 53);
    expect_copy(r1, from(s, g, kMsgLen, 53), "the member attached again");
    expect_copy(r2, from(s, g, kMsgLen, 53), "the member that stayed");
    expect_none(r1, "the member attached again (a copy of the message sent meanwhile)");
}

TEST_F(SoftibMcast, QkeyMismatchDroppedMatchingMemberReceives)
{
    Qp s;
    Member same, other;
    axon_dev_ah_t *ah = nullptr;
    axon_dev_gid_t g = make_mgid();

    Buf sb;
    ASSERT_NO_FATAL_FAILURE(open_sender(&s, &sb));
    ASSERT_NO_FATAL_FAILURE(member(&same, 2, &g, kQkey));
    ASSERT_NO_FATAL_FAILURE(member(&other, 2, &g, kOtherQkey));
    ASSERT_NO_FATAL_FAILURE(group_ah(g, &ah));
    uint32_t before = qkey_violations();

    send_ok(s, ah, sb, 61, kMsgLen, kQkey);
    expect_copy(same, from(s, g, kMsgLen, 61), "the member of the sender's Q_Key");
    expect_none(other, "the member of another Q_Key");
    EXPECT_EQ(before + 1, wait_qkey_violations(before + 1, other.rcq))
        << "the dropped copy counts as a Q_Key violation";

    /* and the other way round: the receive left untouched takes the next copy */
    send_ok(s, ah, sb, 62, kMsgLen, kOtherQkey);
    expect_copy(other, from(s, g, kMsgLen, 62), "the member of the second Q_Key");
    expect_none(same, "the member of the first Q_Key");
    EXPECT_EQ(before + 2, wait_qkey_violations(before + 2, same.rcq));
    EXPECT_EQ(AXON_DEV_QPS_RTS, query_state(other.qp)) << "a Q_Key violation is no QP error";
    EXPECT_EQ(AXON_DEV_QPS_RTS, query_state(same.qp));
}

TEST_F(SoftibMcast, MemberWithoutReceiveDropsOnlyItsCopy)
{
    Qp s, empty;
    Member ready;
    axon_dev_ah_t *ah = nullptr;
    axon_dev_gid_t g = make_mgid();

    Buf sb;
    ASSERT_NO_FATAL_FAILURE(open_sender(&s, &sb));
    ASSERT_NO_FATAL_FAILURE(member(&ready, 2, &g));
    /* empty: attached, but its receives are posted only after the first message */
    ASSERT_NO_FATAL_FAILURE(ud_qp(&empty));
    Buf be = dev_.reg(2 * kSlot, AXON_DEV_ACCESS_LOCAL_WRITE);
    ASSERT_EQ(0, attach(empty, g));
    ASSERT_NO_FATAL_FAILURE(group_ah(g, &ah));

    send_ok(s, ah, sb, 71);
    expect_copy(ready, from(s, g, kMsgLen, 71), "the member with a receive");
    usleep(50000);   /* the other copy is handled (and dropped) by now */
    ASSERT_NO_FATAL_FAILURE(post_slots(empty, be, 2));
    expect_none(empty, "the member that had no receive (the copy was kept)");
    EXPECT_EQ(AXON_DEV_QPS_RTS, query_state(empty.qp)) << "no RNR error on UD";

    send_ok(s, ah, sb, 72);
    expect_copy(ready, from(s, g, kMsgLen, 72), "the member with a receive");
    expect_copy(empty, be, from(s, g, kMsgLen, 72), "the member that has a receive now");
}

TEST_F(SoftibMcast, SendToGroupWithoutMembersSucceeds)
{
    Member s, r;   /* with a receive each, not attached */
    axon_dev_ah_t *ah = nullptr;
    axon_dev_gid_t g = make_mgid();

    open_dev();
    ASSERT_NO_FATAL_FAILURE(member(&s, 1));
    ASSERT_NO_FATAL_FAILURE(member(&r, 1));
    Buf sb = dev_.reg(kMsgLen, 0);
    ASSERT_NO_FATAL_FAILURE(group_ah(g, &ah));
    send_ok(s, ah, sb, 81);
    expect_none(s, "the sender, not attached");
    expect_none(r, "a QP not attached");

    /* a group that had a member and has none now */
    ASSERT_EQ(0, attach(r, g));
    ASSERT_EQ(0, detach(r, g));
    send_ok(s, ah, sb, 82);
    expect_none(r, "the QP that left");
    EXPECT_EQ(AXON_DEV_QPS_RTS, query_state(s.qp));
}

TEST_F(SoftibMcast, DestroyedMemberLeavesTheGroup)
{
    Qp s;
    Member gone, stays, fresh;
    axon_dev_ah_t *ah = nullptr;
    axon_dev_gid_t g = make_mgid();

    Buf sb;
    ASSERT_NO_FATAL_FAILURE(open_sender(&s, &sb));
    ASSERT_NO_FATAL_FAILURE(member(&gone, 2, &g));
    ASSERT_NO_FATAL_FAILURE(member(&stays, 4, &g));
    ASSERT_NO_FATAL_FAILURE(group_ah(g, &ah));
    uint32_t gone_qpn = gone.qpn();

    destroy(&gone);   /* while attached (and with receives posted) */
    send_ok(s, ah, sb, 91);
    expect_copy(stays, from(s, g, kMsgLen, 91), "the member that stayed");
    expect_none(stays, "the member that stayed (a second copy)");

    /* a new QP (whatever its number) inherits nothing */
    ASSERT_NO_FATAL_FAILURE(member(&fresh, 2));   /* receives posted, not attached */
    std::cout << "[ info     ] destroyed QP 0x" << std::hex << gone_qpn << ", new QP 0x"
              << fresh.qpn() << std::dec << std::endl;
    send_ok(s, ah, sb, 92);
    expect_copy(stays, from(s, g, kMsgLen, 92), "the member that stayed");
    expect_none(fresh, "a new QP, never attached");
    EXPECT_EQ(EINVAL, detach(fresh, g)) << "the new QP is no member";
    ASSERT_EQ(0, attach(fresh, g));
    send_ok(s, ah, sb, 93);
    expect_copy(fresh, from(s, g, kMsgLen, 93), "the new QP, attached");
    expect_copy(stays, from(s, g, kMsgLen, 93), "the member that stayed");
    expect_none(fresh, "the new QP (a second copy)");
}

/* ---------------------------------------------------------------- limits */

/*
 * max_mcast_qp_attach QPs join one group, the next one is refused
 * (ENOMEM), one more attach of a member is no new member, a slot freed by
 * a detach or a destroy is taken again, and one message reaches them all.
 */
TEST_F(SoftibMcast, PerGroupLimitIsMaxMcastQpAttach)
{
    axon_dev_gid_t g = make_mgid();
    axon_dev_wc_t  wc;
    Qp             s;

    open_dev();
    const int n = dev_.attr.max_mcast_qp_attach;
    if (n > kAffordableQps) {
        GTEST_SKIP() << "max_mcast_qp_attach " << n << " QPs are too many to create here "
                     << "(GroupLimitIsMaxMcastGrp checks the limit of groups)";
    }
    ASSERT_GT(n, 0);
    ASSERT_GE(dev_.attr.max_qp, n + 3);
    ASSERT_LE(n, dev_.attr.max_cqe);
    axon_dev_cq_t *scq = dev_.cq(16);
    axon_dev_cq_t *rcq = dev_.cq(n + 16);
    ASSERT_NE(nullptr, scq);
    ASSERT_NE(nullptr, rcq);
    std::vector<Qp> q(n + 2);
    for (int i = 0; i < n + 2; ++i) {
        ASSERT_EQ(0, dev_.qp(&q[i], AXON_DEV_QPT_UD, 1, nullptr, 0, 2, scq, rcq)) << i;
        ASSERT_EQ(0, ud_up(dev_, q[i])) << i;
    }
    ASSERT_NO_FATAL_FAILURE(ud_qp(&s));
    for (int i = 0; i < n; ++i) {
        ASSERT_EQ(0, attach(q[i], g)) << "member " << i << " of " << n;
    }
    EXPECT_EQ(ENOMEM, attach(q[n], g)) << "member " << n + 1 << " of a group of at most " << n;
    EXPECT_EQ(0, attach(q[n - 1], g)) << "a member attaching again is no new member";

    /* one message, one copy per member */
    Buf sb = dev_.reg(kMsgLen, 0);
    Buf rb = dev_.reg((size_t)(n + 2) * kSlot, AXON_DEV_ACCESS_LOCAL_WRITE);
    for (int i = 0; i < n + 2; ++i) {
        ASSERT_EQ(0, post_recv(q[i].qp, i, rb.ptr + i * kSlot, kSlot, rb.lkey()));
    }
    axon_dev_ah_t *ah = nullptr;
    ASSERT_NO_FATAL_FAILURE(group_ah(g, &ah));
    send_ok(s, ah, sb, 101);
    std::vector<axon_dev_wc_t> wcs(n + 2);
    int got = poll_n(rcq, n, wcs.data());
    EXPECT_EQ(n, got) << "copies of one message to " << n << " members";
    std::set<uint64_t> seen;
    for (int k = 0; k < got; ++k) {
        const axon_dev_wc_t &w = wcs[k];
        ASSERT_LT(w.wr_id, (uint64_t)n) << "a copy for a QP that is no member";
        EXPECT_TRUE(seen.insert(w.wr_id).second) << "member " << w.wr_id << " got two copies";
        EXPECT_EQ("", check_mcast_wc(w, q[w.wr_id].qpn(), rb.ptr + w.wr_id * kSlot,
                                     from(s, g, kMsgLen, 101)))
            << "member " << w.wr_id;
    }
    EXPECT_TRUE(no_wc(rcq, kQuiet, &wc)) << "one copy too many, in receive " << wc.wr_id;

    /* a detach frees a place, and so does a destroy */
    ASSERT_EQ(0, detach(q[0], g));
    EXPECT_EQ(0, attach(q[n], g)) << "the place a detach freed";
    EXPECT_EQ(ENOMEM, attach(q[n + 1], g)) << "full again";
    destroy(&q[1]);
    EXPECT_EQ(0, attach(q[n + 1], g)) << "the place a destroy freed";
    EXPECT_EQ(ENOMEM, attach(q[0], g)) << "full again";
}

/*
 * max_mcast_grp groups, on one QP; the next group is refused (ENOMEM); a
 * group left by its last member is gone, so a new one fits again. The
 * table is host-wide, so this test fills the one of a device of its own.
 */
TEST_F(SoftibMcast, GroupLimitIsMaxMcastGrp)
{
    Qp a, b;

    ASSERT_NO_FATAL_FAILURE(open_dev_index(kGroupLimitDev));
    const int n = dev_.attr.max_mcast_grp;
    if (n > kAffordableGroups) {
        GTEST_SKIP() << "max_mcast_grp " << n << " groups are too many to create here";
    }
    ASSERT_GT(n, 0);
    ASSERT_NO_FATAL_FAILURE(ud_qp(&a));
    ASSERT_NO_FATAL_FAILURE(ud_qp(&b));
    std::vector<axon_dev_gid_t> groups;
    int ret = 0;
    while ((int)groups.size() <= n) {
        axon_dev_gid_t g = make_mgid();
        ret = attach(a, g);
        if (ret != 0) {
            break;
        }
        groups.push_back(g);
    }
    EXPECT_EQ(ENOMEM, ret) << "group " << groups.size() + 1 << " of at most " << n;
    EXPECT_EQ(n, (int)groups.size()) << "groups created on softib" << kGroupLimitDev
                                     << ", which no other test uses";
    ASSERT_GE(groups.size(), 2u);
    /* a second member of an existing group is no new group */
    EXPECT_EQ(0, attach(b, groups[0])) << "joining an existing group when the table is full";
    /* a group left by its every member is gone: one fits again */
    ASSERT_EQ(0, detach(a, groups.back()));
    EXPECT_EQ(0, attach(a, make_mgid())) << "a group in the place of one left";
    EXPECT_EQ(ENOMEM, attach(b, make_mgid())) << "full again";
    /* groups[0] keeps b: a leaving it frees nothing */
    ASSERT_EQ(0, detach(a, groups[0]));
    EXPECT_EQ(ENOMEM, attach(a, make_mgid())) << "groups[0] still has a member";
    /* the last member destroyed, the group is gone */
    destroy(&b);
    EXPECT_EQ(0, attach(a, make_mgid())) << "a group in the place of one whose QP was destroyed";
}

/* ---------------------------------------------------------------- members in other processes */

const double kPeerTimeout = 60.0;
const int    kAfterLeave  = 8;    /* messages sent after a member process left */

struct McastPeerInfo {
    uint32_t       qpn;
    axon_dev_gid_t gid;
};

/* How a member process ends while attached. */
enum Leave { kStays, kExits, kKilled };

struct MemberArg {
    SoftibWire     wire;
    axon_dev_gid_t mgid;
    Leave          leave;
    int            messages;   /* messages it receives before it is done (kStays) */
    unsigned       dev_index;  /* softib<dev_index> */
};

uint64_t xproc_seed(int i)
{
    return 7000 + (uint64_t)i;
}

uint32_t xproc_len(int i)
{
    return 1 + (uint32_t)((i * 331) % 1024);   /* 1 .. 1024 bytes: up to the path MTU */
}

/*
 * A member process: one UD QP attached to the group; tells the parent its
 * QPN, learns the sender's, then receives: every message (kStays), or the
 * first one and then waits to exit without cleaning up (kExits) or to be
 * killed (kKilled), still attached.
 */
int mcast_member(int fd, void *argp)
{
    const MemberArg &arg = *static_cast<MemberArg *>(argp);
    EnvGuard         env;
    SoftibDev        dev;
    Qp               q;
    McastPeerInfo    me, sender;
    axon_dev_wc_t    wc;

    softib_wire_env(arg.wire, 1, &env);
    env.set("AXON_SOFTIB_DEVICES", "8");
    std::string name = "softib" + std::to_string(arg.dev_index);
    PEER_CHECK(dev.open(name.c_str()) == 0, "open %s", name.c_str());
    Buf rb = dev.reg((size_t)(arg.messages + 2) * kSlot, AXON_DEV_ACCESS_LOCAL_WRITE);
    PEER_CHECK(dev.qp(&q, AXON_DEV_QPT_UD) == 0, "create_qp");
    PEER_CHECK(ud_up(dev, q) == 0, "bring-up");
    for (int i = 0; i < arg.messages + 2; ++i) {
        PEER_CHECK(post_recv(q.qp, i, rb.ptr + i * kSlot, kSlot, rb.lkey()) == 0, "recv %d", i);
    }
    PEER_CHECK(axon_dev_attach_mcast(q.qp, &arg.mgid, 0) == 0, "attach to %s",
               gid_str(arg.mgid).c_str());
    me.qpn = q.qpn();
    me.gid = dev.gid;
    PEER_CHECK(axon_test_send_blob(fd, &me, sizeof(me)) == 0, "send info");
    PEER_CHECK(recv_struct(fd, &sender) == 0, "recv info");
    PEER_CHECK(axon_test_sync(fd) == 0, "sync: attached");

    int count = (arg.leave == kStays) ? arg.messages : 1;
    for (int i = 0; i < count; ++i) {
        PEER_CHECK(poll_one(q.rcq, &wc, 20), "message %d did not arrive", i);
        PEER_CHECK(wc.wr_id == (uint64_t)i, "message %d in receive %llu", i,
                   (unsigned long long)wc.wr_id);
        Expect e = {sender.qpn, sender.gid, arg.mgid, xproc_len(i), xproc_seed(i)};
        std::string err = check_mcast_wc(wc, q.qpn(), rb.ptr + i * kSlot, e);
        PEER_CHECK(err.empty(), "message %d:%s", i, err.c_str());
        uint32_t n = (uint32_t)i;
        PEER_CHECK(axon_test_send_blob(fd, &n, sizeof(n)) == 0, "report message %d", i);
    }
    if (arg.leave != kStays) {
        PEER_CHECK(axon_test_sync(fd) == 0, "sync: about to leave");
        if (arg.leave == kExits) {
            _exit(0);   /* no detach, no destroy, no close */
        }
        for (;;) {
            pause();   /* killed here, attached (the peer's alarm bounds it) */
        }
    }
    PEER_CHECK(no_wc(q.rcq, kQuiet, &wc), "one message too many (receive %llu)",
               (unsigned long long)wc.wr_id);
    PEER_CHECK(axon_test_sync(fd) == 0, "sync: done");
    PEER_CHECK(axon_dev_detach_mcast(q.qp, &arg.mgid, 0) == 0, "detach");
    return 0;
}

class SoftibMcastXproc : public SoftibWithPeers<SoftibMcast>,
                         public ::testing::WithParamInterface<SoftibWire> {
protected:
    axon_test_peer_t *spawn(MemberArg *arg)
    {
        return SoftibWithPeers::spawn(mcast_member, arg, kPeerTimeout);
    }

    /* The member reports it got message i. */
    void expect_reported(axon_test_peer_t *p, int i, const char *who)
    {
        uint32_t n = ~0u;
        ASSERT_EQ(0, recv_struct(p->fd, &n)) << who << " did not report message " << i
                                             << " (see its stderr)";
        EXPECT_EQ((uint32_t)i, n) << who;
    }

    /* Send message i from s to the group; its completion is success. */
    void send_msg(const Qp &s, axon_dev_ah_t *ah, const Buf &sb, int i)
    {
        axon_dev_wc_t wc;
        axon_test_fill(sb.ptr, xproc_len(i), xproc_seed(i));
        ASSERT_EQ(0, send_mcast(s, ah, i, sb.ptr, xproc_len(i), sb.lkey()));
        ASSERT_TRUE(poll_one(s.scq, &wc)) << "no send completion for message " << i;
        EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status)
            << "message " << i << ": " << wc_status_name(wc.status);
    }

    void leave_test(Leave how);
};

TEST_P(SoftibMcastXproc, ChildMemberGetsTheParentsMessage)
{
    MemberArg     arg = {GetParam(), make_mgid(), kStays, 3, 0};
    McastPeerInfo child, me;
    Qp            s;
    Member        local;
    axon_dev_ah_t *ah = nullptr;

    softib_wire_env(arg.wire, 0, &env_);
    axon_test_peer_t *peer = spawn(&arg);
    open_dev();
    ASSERT_NO_FATAL_FAILURE(ud_qp(&s));
    Buf sb = dev_.reg(1024, 0);
    ASSERT_NO_FATAL_FAILURE(member(&local, 4, &arg.mgid));
    ASSERT_EQ(0, recv_struct(peer->fd, &child));
    me.qpn = s.qpn();
    me.gid = dev_.gid;
    ASSERT_EQ(0, axon_test_send_blob(peer->fd, &me, sizeof(me)));
    ASSERT_EQ(0, axon_test_sync(peer->fd));   /* the child is attached */
    ASSERT_NO_FATAL_FAILURE(group_ah(arg.mgid, &ah));

    for (int i = 0; i < arg.messages; ++i) {
        send_msg(s, ah, sb, i);
        expect_reported(peer, i, "the child member");
        /* the local member gets its copy as well */
        Expect e = {s.qpn(), dev_.gid, arg.mgid, xproc_len(i), xproc_seed(i)};
        expect_copy(local, e, "the parent's member");
    }
    expect_none(local, "the parent's member (one copy too many)");
    ASSERT_EQ(0, axon_test_sync(peer->fd));
    EXPECT_EQ(0, axon_test_peer_wait(peer, kPeerTimeout)) << "the child failed (see its stderr)";
}

/*
 * Two member processes and one of the parent's own; one member process
 * leaves while attached (how), and the sender goes on: every message
 * completes, and the other members get each one. On softib2: should the
 * dead member's place stay taken, the group left behind is not softib0's.
 */
void SoftibMcastXproc::leave_test(Leave how)
{
    MemberArg     stays_arg = {GetParam(), make_mgid(), kStays, 1 + kAfterLeave, kLeaveDev};
    MemberArg     leaves_arg = stays_arg;
    McastPeerInfo info, me;
    Qp            s;
    Member        local;
    axon_dev_ah_t *ah = nullptr;

    leaves_arg.leave = how;
    softib_wire_env(stays_arg.wire, 0, &env_);
    env_.set("AXON_SOFTIB_DEVICES", "8");
    axon_test_peer_t *stays  = spawn(&stays_arg);
    axon_test_peer_t *leaves = spawn(&leaves_arg);
    ASSERT_NO_FATAL_FAILURE(open_dev_index(kLeaveDev));
    ASSERT_NO_FATAL_FAILURE(ud_qp(&s));
    Buf sb = dev_.reg(1024, 0);
    ASSERT_NO_FATAL_FAILURE(member(&local, 2 + kAfterLeave, &stays_arg.mgid));
    ASSERT_EQ(0, recv_struct(stays->fd, &info));
    ASSERT_EQ(0, recv_struct(leaves->fd, &info));
    me.qpn = s.qpn();
    me.gid = dev_.gid;
    ASSERT_EQ(0, axon_test_send_blob(stays->fd, &me, sizeof(me)));
    ASSERT_EQ(0, axon_test_send_blob(leaves->fd, &me, sizeof(me)));
    ASSERT_EQ(0, axon_test_sync(stays->fd));
    ASSERT_EQ(0, axon_test_sync(leaves->fd));
    ASSERT_NO_FATAL_FAILURE(group_ah(stays_arg.mgid, &ah));

    /* message 0 reaches all three members */
    send_msg(s, ah, sb, 0);
    expect_reported(stays, 0, "the member process that stays");
    expect_reported(leaves, 0, "the member process that leaves");
    expect_copy(local, {s.qpn(), dev_.gid, stays_arg.mgid, xproc_len(0), xproc_seed(0)},
                "the parent's member");

    /* the member process goes, still attached */
    ASSERT_EQ(0, axon_test_sync(leaves->fd));
    pid_t pid = leaves->pid;
    if (how == kKilled) {
        ASSERT_GT(axon_test_peer_crash(leaves), 0);
    } else {
        EXPECT_EQ(0, axon_test_peer_wait(leaves, kPeerTimeout)) << "the member that exits";
    }

    double start = axon_test_time();
    for (int i = 1; i <= kAfterLeave; ++i) {
        send_msg(s, ah, sb, i);
        expect_reported(stays, i, "the member process that stays");
        expect_copy(local, {s.qpn(), dev_.gid, stays_arg.mgid, xproc_len(i), xproc_seed(i)},
                    "the parent's member");
    }
    std::cout << "[ info     ] " << kAfterLeave << " messages after the member left, in "
              << axon_test_time() - start << " s" << std::endl;
    expect_none(local, "the parent's member (one copy too many)");
    ASSERT_EQ(0, axon_test_sync(stays->fd));
    EXPECT_EQ(0, axon_test_peer_wait(stays, kPeerTimeout)) << "the member that stayed failed";

    /*
     * Its membership is dropped: where the per-group limit is small enough,
     * the group (the parent's member now alone in it) takes
     * max_mcast_qp_attach - 1 more QPs of the parent.
     */
    const int n = dev_.attr.max_mcast_qp_attach;
    if (n <= kAffordableQps) {
        axon_dev_cq_t *cq = dev_.cq(16);
        ASSERT_NE(nullptr, cq);
        std::vector<Qp> q(n);
        for (int i = 0; i < n; ++i) {
            ASSERT_EQ(0, dev_.qp(&q[i], AXON_DEV_QPT_UD, 1, nullptr, 0, 2, cq, cq)) << i;
            ASSERT_EQ(0, ud_up(dev_, q[i])) << i;
        }
        for (int i = 0; i < n - 1; ++i) {
            ASSERT_EQ(0, attach(q[i], stays_arg.mgid))
                << "member " << i + 2 << " of " << n << ": the one that left still counts?";
        }
        EXPECT_EQ(ENOMEM, attach(q[n - 1], stays_arg.mgid)) << "the group is full";
    }
    if (how == kKilled) {
        axon_test_remove_shm_of(pid);
    }
}

TEST_P(SoftibMcastXproc, ExitedMemberLeavesTheGroupWorking)
{
    leave_test(kExits);
}

TEST_P(SoftibMcastXproc, KilledMemberLeavesTheGroupWorking)
{
    leave_test(kKilled);
}

INSTANTIATE_TEST_SUITE_P(Wire, SoftibMcastXproc, ::testing::ValuesIn(kSoftibPeerWires),
                         softib_wire_name);

/* ---------------------------------------------------------------- groups of dead processes */

enum TableStep { kFill, kRefill };

/*
 * On softib4 (kDeadGroupsDev): kFill creates as many groups as the table
 * takes on one QP, reports how many and waits to be killed with them;
 * kRefill opens its device first, waits for the word, then does the same
 * and reports how many it got (and that the next one was refused).
 */
int table_member(int fd, void *argp)
{
    TableStep step = *static_cast<TableStep *>(argp);
    EnvGuard  env;
    SoftibDev dev;
    Qp        q;

    env.set("AXON_SOFTIB_DEVICES", "8");
    std::string name = "softib" + std::to_string(kDeadGroupsDev);
    PEER_CHECK(dev.open(name.c_str()) == 0, "open %s", name.c_str());
    PEER_CHECK(dev.qp(&q, AXON_DEV_QPT_UD) == 0, "create_qp");
    PEER_CHECK(ud_up(dev, q) == 0, "bring-up");
    PEER_CHECK(axon_test_sync(fd) == 0, "sync: open");
    if (step == kRefill) {
        PEER_CHECK(axon_test_sync(fd) == 0, "sync: go");
    }
    std::vector<axon_dev_gid_t> groups;
    int ret = 0;
    while ((int)groups.size() <= dev.attr.max_mcast_grp) {
        axon_dev_gid_t g = make_mgid();
        if ((ret = axon_dev_attach_mcast(q.qp, &g, 0)) != 0) {
            break;
        }
        groups.push_back(g);
    }
    int32_t report[2] = {(int32_t)groups.size(), ret};
    PEER_CHECK(axon_test_send_blob(fd, report, sizeof(report)) == 0, "report");
    if (step == kFill) {
        for (;;) {
            pause();   /* killed here, with its groups (the peer's alarm bounds it) */
        }
    }
    PEER_CHECK(axon_test_sync(fd) == 0, "sync: done");
    for (const axon_dev_gid_t &g : groups) {
        PEER_CHECK(axon_dev_detach_mcast(q.qp, &g, 0) == 0, "detach");
    }
    return 0;
}

using SoftibMcastTableXproc = SoftibWithPeers<SoftibMcast>;

/*
 * A process killed while it holds every group of the table: a process
 * that had its device open before (so no later open reaps the dead one's
 * slot on the way) gets every group back.
 */
TEST_F(SoftibMcastTableXproc, DeadProcessesGroupsAreReclaimed)
{
    TableStep fill = kFill, refill = kRefill;
    int32_t   filled[2], refilled[2];

    ASSERT_EQ(0, axon_test_peer_spawn(&peers_[0], table_member, &refill, kPeerTimeout));
    npeers_ = 1;
    ASSERT_EQ(0, axon_test_sync(peers_[0].fd));   /* the refiller has its device open */
    ASSERT_EQ(0, axon_test_peer_spawn(&peers_[1], table_member, &fill, kPeerTimeout));
    npeers_ = 2;
    ASSERT_EQ(0, axon_test_sync(peers_[1].fd));
    ASSERT_EQ(0, recv_struct(peers_[1].fd, &filled)) << "the filler failed (see its stderr)";
    std::cout << "[ info     ] the filler created " << filled[0] << " groups, then "
              << strerror(filled[1]) << std::endl;
    EXPECT_EQ(ENOMEM, filled[1]) << "the filler's last attach";
    pid_t pid = axon_test_peer_crash(&peers_[1]);
    ASSERT_GT(pid, 0);

    ASSERT_EQ(0, axon_test_sync(peers_[0].fd));   /* go */
    ASSERT_EQ(0, recv_struct(peers_[0].fd, &refilled)) << "the refiller failed";
    EXPECT_EQ(ENOMEM, refilled[1]) << "the refiller's last attach";
    EXPECT_GE(refilled[0], filled[0]) << "groups of the killed process were not reclaimed";
    ASSERT_EQ(0, axon_test_sync(peers_[0].fd));   /* done */
    EXPECT_EQ(0, axon_test_peer_wait(&peers_[0], kPeerTimeout)) << "the refiller failed";
    axon_test_remove_shm_of(pid);

    /* and every group of the table is free (none left by earlier runs either) */
    ASSERT_NO_FATAL_FAILURE(open_dev_index(kDeadGroupsDev));
    EXPECT_EQ(dev_.attr.max_mcast_grp, refilled[0])
        << "groups the refiller could create, all others' gone";
}

}  // namespace
