/*
 * The connection manager of the device layer over softib (framework/device/
 * dev_cm.h, framework/device/softib/softib_cm*.c):
 *   - in one process: the event order of seed §5 on each side (address,
 *     route, request, established, disconnected, timewait exit), with and
 *     without a QP on the id, private data both ways, reject with private
 *     data, no listener, an address no device has, a peer that never
 *     answers, the channel fd under epoll, destroy with connections open
 *     (no fd or thread left), destroy or cancel under a thread blocked in
 *     get_event (no freed memory touched, nothing leaked), bad inputs
 *     (EINVAL and a line naming them);
 *   - between two processes: RC send/recv and RDMA write over the QPs the
 *     CM connected, then disconnect from either side.
 * (The librdmacm back end's converters: framework/device/rdmacore/.)
 */
#include "log_capture.h"
#include "softib_env.h"

#include "axon_config.h"
#include "dev_cm.h"
#include "dev_cm_backend.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <deque>
#include <map>

namespace {

const double kEvTimeout   = 5.0;
const double kPeerTimeout = 30.0;

/* One event, copied out and acknowledged. */
struct Ev {
    int                      type   = -1;
    int                      status = 0;
    axon_dev_cm_id_t        *id        = nullptr;
    axon_dev_cm_id_t        *listen_id = nullptr;
    axon_dev_cm_conn_param_t conn;
    axon_dev_cm_ud_param_t   ud;      /* the same event seen as a UD one */
    std::string              pdata;
    const void              *join_context = nullptr;  /* MULTICAST_JOIN: ud.private_data */
};

inline const char *ev_name(int type)
{
    return (type < 0) ? "no event" : axon_dev_cm_event_str((axon_dev_cm_event_type_t)type);
}

/* The next event of ch within timeout (ch->fd non-blocking); false if none. */
bool get_ev(axon_dev_cm_channel_t *ch, Ev *out, double timeout = kEvTimeout)
{
    double deadline = axon_test_time() + timeout;

    for (;;) {
        axon_dev_cm_event_t *ev;
        int ret = axon_dev_cm_get_event(ch, &ev);
        if (ret == 0) {
            out->type      = ev->event;
            out->status    = ev->status;
            out->id        = ev->id;
            out->listen_id = ev->listen_id;
            out->conn      = ev->param.conn;
            out->ud        = ev->param.ud;
            if (ev->event == AXON_DEV_CM_EVENT_MULTICAST_JOIN) {
                out->join_context = ev->param.ud.private_data;
            }
            out->ud.private_data = nullptr;
            out->pdata.assign((const char *)ev->param.conn.private_data,
                              ev->param.conn.private_data ? ev->param.conn.private_data_len : 0);
            out->conn.private_data = nullptr;
            axon_dev_cm_ack_event(ev);
            return true;
        }
        if (ret != EAGAIN) {
            fprintf(stderr, "get_event returned %d\n", ret);
            return false;
        }
        double left = deadline - axon_test_time();
        if (left <= 0) {
            out->type = -1;
            return false;
        }
        fd_readable(ch->fd, std::min(left, 0.05));
    }
}

struct sockaddr_in inet(const char *ip, uint16_t port)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port   = htons(port);
    inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
}

const struct sockaddr *sa(const struct sockaddr_in &a)
{
    return (const struct sockaddr *)&a;
}

/* A TCP port nobody listens on (bound then released). */
uint16_t unused_port()
{
    struct sockaddr_in a = inet("127.0.0.1", 0);
    socklen_t          len = sizeof(a);
    int                fd  = socket(AF_INET, SOCK_STREAM, 0);
    bind(fd, sa(a), sizeof(a));
    getsockname(fd, (struct sockaddr *)&a, &len);
    close(fd);
    return ntohs(a.sin_port);
}

unsigned count_dir(const char *path)
{
    unsigned n = 0;
    DIR     *d = opendir(path);
    if (d == nullptr) {
        return 0;
    }
    while (readdir(d) != nullptr) {
        ++n;
    }
    closedir(d);
    return n;
}

/* The objects one side uses on the CM's device: PD, CQs, MRs, QPs on ids. */
struct Side {
    axon_dev_context_t *ctx = nullptr;
    axon_dev_pd_t      *pd  = nullptr;
    axon_dev_cq_t      *cq  = nullptr;   /* send and receive */
    std::vector<axon_dev_mr_t *>    mrs;
    std::vector<void *>             bufs;
    std::vector<axon_dev_cm_id_t *> qp_ids;

    /* PD and CQ on the id's device (once). */
    int setup(axon_dev_cm_id_t *id)
    {
        if (ctx != nullptr) {
            return 0;
        }
        ctx     = id->verbs;
        int ret = axon_dev_alloc_pd(ctx, &pd);
        if (ret == 0) {
            ret = axon_dev_create_cq(ctx, 256, nullptr, nullptr, 0, &cq);
        }
        return ret;
    }

    int qp(axon_dev_cm_id_t *id, axon_dev_qp_type_t type = AXON_DEV_QPT_RC)
    {
        int ret = setup(id);
        if (ret != 0) {
            return ret;
        }
        axon_dev_qp_init_attr_t init;
        memset(&init, 0, sizeof(init));
        init.send_cq          = cq;
        init.recv_cq          = cq;
        init.qp_type          = type;
        init.sq_sig_all       = 1;
        init.cap.max_send_wr  = 64;
        init.cap.max_recv_wr  = 64;
        init.cap.max_send_sge = 1;
        init.cap.max_recv_sge = 1;
        ret = axon_dev_cm_create_qp(id, pd, &init);
        if (ret == 0) {
            qp_ids.push_back(id);
        }
        return ret;
    }

    uint8_t *buf(size_t len, int access, axon_dev_mr_t **mr_p)
    {
        void *p = nullptr;
        if (posix_memalign(&p, 4096, len) != 0) {
            return nullptr;
        }
        memset(p, 0, len);
        bufs.push_back(p);
        if (axon_dev_reg_mr(pd, p, len, access, mr_p) != 0) {
            return nullptr;
        }
        mrs.push_back(*mr_p);
        return (uint8_t *)p;
    }

    /* Everything but the ids, in reverse order of creation. */
    void release()
    {
        for (auto *id : qp_ids) {
            if (id->qp != nullptr) {
                axon_dev_cm_destroy_qp(id);
            }
        }
        qp_ids.clear();
        for (auto *mr : mrs) {
            axon_dev_dereg_mr(mr);
        }
        mrs.clear();
        for (void *p : bufs) {
            free(p);
        }
        bufs.clear();
        if (cq != nullptr) {
            axon_dev_destroy_cq(cq);
            cq = nullptr;
        }
        if (pd != nullptr) {
            axon_dev_dealloc_pd(pd);
            pd = nullptr;
        }
        ctx = nullptr;
    }
};

/* ---------------------------------------------------------------- fixture */

/*
 * In one thread both sides' channels must progress (the passive CM answers
 * from its channel): waiting on one channel drains all of them, keeping each
 * one's events in order for later.
 */
class SoftibCm : public SoftibTest {
protected:
    std::vector<axon_dev_cm_channel_t *>                  chans_;
    std::vector<axon_dev_cm_id_t *>                       ids_;
    std::map<axon_dev_cm_channel_t *, std::deque<Ev>>     backlog_;
    Side                                                  a_, b_;   /* active, passive */

    bool next(axon_dev_cm_channel_t *ch, Ev *out, double timeout = kEvTimeout)
    {
        double deadline = axon_test_time() + timeout;
        for (;;) {
            for (auto *c : chans_) {
                Ev ev;
                while (get_ev(c, &ev, 0)) {
                    backlog_[c].push_back(ev);
                }
            }
            auto &q = backlog_[ch];
            if (!q.empty()) {
                *out = q.front();
                q.pop_front();
                return true;
            }
            double left = deadline - axon_test_time();
            if (left <= 0) {
                out->type = -1;
                return false;
            }
            std::vector<struct pollfd> pfds;
            for (auto *c : chans_) {
                pfds.push_back({c->fd, POLLIN, 0});
            }
            poll(pfds.data(), pfds.size(), (int)(std::min(left, 0.05) * 1000) + 1);
        }
    }

    void SetUp() override
    {
        SoftibTest::SetUp();
        env_.set("AXON_SOFTIB_CM_TIMEOUT", nullptr);
    }

    void TearDown() override
    {
        a_.release();
        b_.release();
        for (auto it = ids_.rbegin(); it != ids_.rend(); ++it) {
            EXPECT_EQ(0, axon_dev_cm_destroy_id(*it));
        }
        ids_.clear();
        for (auto *ch : chans_) {
            EXPECT_EQ(0, axon_dev_cm_destroy_event_channel(ch));
        }
        chans_.clear();
        SoftibTest::TearDown();
    }

    axon_dev_cm_channel_t *channel()
    {
        axon_dev_cm_channel_t *ch = nullptr;
        EXPECT_EQ(0, axon_dev_cm_create_event_channel(&ch));
        if (ch != nullptr) {
            set_nonblock(ch->fd);
            chans_.push_back(ch);
        }
        return ch;
    }

    axon_dev_cm_id_t *id(axon_dev_cm_channel_t *ch, void *context = nullptr,
                         axon_dev_cm_port_space_t ps = AXON_DEV_CM_PS_TCP)
    {
        axon_dev_cm_id_t *i = nullptr;
        EXPECT_EQ(0, axon_dev_cm_create_id(ch, context, ps, &i));
        if (i != nullptr) {
            ids_.push_back(i);
        }
        return i;
    }

    /* An id we got from a CONNECT_REQUEST: ours to destroy. */
    void adopt(axon_dev_cm_id_t *i) { ids_.push_back(i); }

    void destroy(axon_dev_cm_id_t *i)
    {
        ids_.erase(std::remove(ids_.begin(), ids_.end(), i), ids_.end());
        EXPECT_EQ(0, axon_dev_cm_destroy_id(i));
    }

    /* A listener on 127.0.0.1, port chosen; returns it and its port. */
    axon_dev_cm_id_t *listener(axon_dev_cm_channel_t *ch, uint16_t *port, void *ctx = nullptr,
                               axon_dev_cm_port_space_t ps = AXON_DEV_CM_PS_TCP)
    {
        axon_dev_cm_id_t  *l = id(ch, ctx, ps);
        struct sockaddr_in a = inet("127.0.0.1", 0);
        EXPECT_EQ(0, axon_dev_cm_bind_addr(l, sa(a)));
        EXPECT_EQ(0, axon_dev_cm_listen(l, 8));
        *port = ntohs(axon_dev_cm_src_port(l));
        EXPECT_NE(0, *port);
        return l;
    }

    /* An active id through ADDR_RESOLVED and ROUTE_RESOLVED towards ip:port. */
    axon_dev_cm_id_t *resolved(axon_dev_cm_channel_t *ch, const char *ip, uint16_t port,
                               axon_dev_cm_port_space_t ps = AXON_DEV_CM_PS_TCP)
    {
        axon_dev_cm_id_t  *c   = id(ch, nullptr, ps);
        struct sockaddr_in dst = inet(ip, port);
        Ev                 ev;
        EXPECT_EQ(0, axon_dev_cm_resolve_addr(c, nullptr, sa(dst), 1000));
        EXPECT_TRUE(next(ch, &ev));
        EXPECT_EQ(AXON_DEV_CM_EVENT_ADDR_RESOLVED, ev.type) << ev_name(ev.type);
        EXPECT_EQ(c, ev.id);
        EXPECT_EQ(0, ev.status);
        EXPECT_NE(nullptr, c->verbs);
        EXPECT_EQ(0, axon_dev_cm_resolve_route(c, 1000));
        EXPECT_TRUE(next(ch, &ev));
        EXPECT_EQ(AXON_DEV_CM_EVENT_ROUTE_RESOLVED, ev.type) << ev_name(ev.type);
        return c;
    }

    void expect_ev(axon_dev_cm_channel_t *ch, int type, axon_dev_cm_id_t *on, Ev *out = nullptr,
                   double timeout = kEvTimeout)
    {
        Ev ev;
        next(ch, &ev, timeout);
        EXPECT_EQ(type, ev.type) << "expected " << ev_name(type) << ", got " << ev_name(ev.type)
                                 << " status " << ev.status;
        if (on != nullptr && ev.type >= 0) {
            EXPECT_EQ(on, ev.id) << ev_name(ev.type);
        }
        if (out != nullptr) {
            *out = ev;
        }
    }

    void expect_no_ev(axon_dev_cm_channel_t *ch, double seconds = 0.1)
    {
        Ev ev;
        EXPECT_FALSE(next(ch, &ev, seconds)) << "unexpected " << ev_name(ev.type);
    }

    /* conn_param retrying as rdma_cm's default, with rd reads each way and qp_num */
    static axon_dev_cm_conn_param_t retrying(uint8_t rd = 0, uint32_t qp_num = 0)
    {
        axon_dev_cm_conn_param_t p;
        memset(&p, 0, sizeof(p));
        p.responder_resources = rd;
        p.initiator_depth     = rd;
        p.retry_count         = 7;
        p.rnr_retry_count     = 7;
        p.qp_num              = qp_num;
        return p;
    }

    /* c connects with p; the request's id on ch (adopted by the test) */
    axon_dev_cm_id_t *request_of(axon_dev_cm_channel_t *ch, axon_dev_cm_id_t *c,
                                 const axon_dev_cm_conn_param_t &p)
    {
        Ev ev;
        EXPECT_EQ(0, axon_dev_cm_connect(c, &p));
        expect_ev(ch, AXON_DEV_CM_EVENT_CONNECT_REQUEST, nullptr, &ev);
        if (ev.id != nullptr) {
            adopt(ev.id);
        }
        return ev.id;
    }

    /*
     * A connection with QPs on both ids and private data both ways; *c the
     * active id, *s the passive one.
     */
    void connect_pair(axon_dev_cm_channel_t *cch, axon_dev_cm_channel_t *sch,
                      axon_dev_cm_id_t **c, axon_dev_cm_id_t **s, axon_dev_cm_id_t **l = nullptr)
    {
        uint16_t          port;
        axon_dev_cm_id_t *lis = listener(sch, &port, (void *)0x1234);
        const char        req[] = "connect private data";
        const char        rep[] = "accept private data";
        Ev                ev;

        *c = resolved(cch, "127.0.0.1", port);
        ASSERT_EQ(0, a_.qp(*c));
        axon_dev_cm_conn_param_t p;
        memset(&p, 0, sizeof(p));
        p.private_data        = req;
        p.private_data_len    = sizeof(req);
        p.responder_resources = 4;
        p.initiator_depth     = 2;
        p.retry_count         = 7;
        p.rnr_retry_count     = 7;
        ASSERT_EQ(0, axon_dev_cm_connect(*c, &p));

        expect_ev(sch, AXON_DEV_CM_EVENT_CONNECT_REQUEST, nullptr, &ev);
        ASSERT_EQ(AXON_DEV_CM_EVENT_CONNECT_REQUEST, ev.type);
        EXPECT_EQ(lis, ev.listen_id);
        EXPECT_NE(lis, ev.id);
        EXPECT_EQ(std::string(req, sizeof(req)), ev.pdata);
        EXPECT_EQ(2, ev.conn.responder_resources);   /* the requester's initiator depth */
        EXPECT_EQ(4, ev.conn.initiator_depth);       /* the requester's responder resources */
        EXPECT_EQ((*c)->qp->qp_num, ev.conn.qp_num);
        EXPECT_EQ((void *)0x1234, ev.id->context) << "a new id inherits the listener's context";
        EXPECT_EQ(sch, ev.id->channel);
        *s = ev.id;
        adopt(*s);
        ASSERT_EQ(0, b_.qp(*s));
        memset(&p, 0, sizeof(p));
        p.private_data        = rep;
        p.private_data_len    = sizeof(rep);
        p.responder_resources = 2;
        p.initiator_depth     = 4;
        p.rnr_retry_count     = 7;
        ASSERT_EQ(0, axon_dev_cm_accept(*s, &p));
        EXPECT_EQ(AXON_DEV_QPS_RTS, query_state((*s)->qp));

        expect_ev(cch, AXON_DEV_CM_EVENT_ESTABLISHED, *c, &ev);
        EXPECT_EQ(std::string(rep, sizeof(rep)), ev.pdata);
        EXPECT_EQ((*s)->qp->qp_num, ev.conn.qp_num);
        EXPECT_EQ(AXON_DEV_QPS_RTS, query_state((*c)->qp));
        expect_ev(sch, AXON_DEV_CM_EVENT_ESTABLISHED, *s);
        if (l != nullptr) {
            *l = lis;
        }
    }
};

/* ---------------------------------------------------------------- in one process */

TEST_F(SoftibCm, EventOrderActiveDisconnects)
{
    axon_dev_cm_channel_t *cch = channel(), *sch = channel();
    axon_dev_cm_id_t      *c, *s;

    ASSERT_NO_FATAL_FAILURE(connect_pair(cch, sch, &c, &s));
    /* addresses: the active side sees the listener's port, the passive the active's */
    EXPECT_EQ(c->dst_addr.sin_port, s->src_addr.sin_port);
    EXPECT_EQ(s->dst_addr.sin_port, c->src_addr.sin_port);
    EXPECT_NE(0, c->src_addr.sin_port);

    ASSERT_EQ(0, axon_dev_cm_disconnect(c));
    EXPECT_EQ(AXON_DEV_QPS_ERR, query_state(c->qp));
    expect_ev(cch, AXON_DEV_CM_EVENT_DISCONNECTED, c);
    expect_ev(cch, AXON_DEV_CM_EVENT_TIMEWAIT_EXIT, c);
    expect_ev(sch, AXON_DEV_CM_EVENT_DISCONNECTED, s);
    expect_no_ev(sch);   /* TIMEWAIT_EXIT waits for the passive side's disconnect */
    ASSERT_EQ(0, axon_dev_cm_disconnect(s));
    EXPECT_EQ(AXON_DEV_QPS_ERR, query_state(s->qp));
    expect_ev(sch, AXON_DEV_CM_EVENT_TIMEWAIT_EXIT, s);
    expect_no_ev(cch);
    EXPECT_EQ(0, axon_dev_cm_disconnect(c)) << "a second disconnect is harmless";
}

TEST_F(SoftibCm, EventOrderPassiveDisconnectsOneChannel)
{
    axon_dev_cm_channel_t *ch = channel();
    axon_dev_cm_id_t      *c, *s;

    ASSERT_NO_FATAL_FAILURE(connect_pair(ch, ch, &c, &s));
    ASSERT_EQ(0, axon_dev_cm_disconnect(s));
    expect_ev(ch, AXON_DEV_CM_EVENT_DISCONNECTED, c);   /* the DREQ reaches c first */
    Ev ev;
    ASSERT_TRUE(next(ch, &ev));
    EXPECT_EQ(AXON_DEV_CM_EVENT_DISCONNECTED, ev.type) << ev_name(ev.type);
    EXPECT_EQ(s, ev.id);
    expect_ev(ch, AXON_DEV_CM_EVENT_TIMEWAIT_EXIT, s);
    ASSERT_EQ(0, axon_dev_cm_disconnect(c));
    expect_ev(ch, AXON_DEV_CM_EVENT_TIMEWAIT_EXIT, c);
}

TEST_F(SoftibCm, SendRecvAndWriteOverCmQp)
{
    axon_dev_cm_channel_t *ch = channel();
    axon_dev_cm_id_t      *c, *s;
    axon_dev_mr_t         *smr, *rmr, *wmr;
    axon_dev_wc_t          wc;

    ASSERT_NO_FATAL_FAILURE(connect_pair(ch, ch, &c, &s));
    uint8_t *sbuf = a_.buf(8192, AXON_DEV_ACCESS_LOCAL_WRITE, &smr);
    uint8_t *rbuf = b_.buf(8192, AXON_DEV_ACCESS_LOCAL_WRITE, &rmr);
    uint8_t *wbuf = b_.buf(8192, AXON_DEV_ACCESS_LOCAL_WRITE | AXON_DEV_ACCESS_REMOTE_WRITE, &wmr);
    ASSERT_TRUE(sbuf && rbuf && wbuf);

    axon_test_fill(sbuf, 3000, 11);
    ASSERT_EQ(0, post_recv(s->qp, 7, rbuf, 8192, rmr->lkey));
    ASSERT_EQ(0, post_send_op(c->qp, 1, AXON_DEV_WR_SEND, sbuf, 3000, smr->lkey));
    ASSERT_TRUE(poll_one(a_.cq, &wc)) << "send completion";
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    ASSERT_TRUE(poll_one(b_.cq, &wc)) << "receive completion";
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    EXPECT_EQ(7u, wc.wr_id);
    EXPECT_EQ(3000u, wc.byte_len);
    EXPECT_EQ(-1, axon_test_check(rbuf, 3000, 11));

    axon_test_fill(sbuf, 8192, 12);
    ASSERT_EQ(0, post_rdma(c->qp, 2, AXON_DEV_WR_RDMA_WRITE, sbuf, 8192, smr->lkey,
                           (uintptr_t)wbuf, wmr->rkey));
    ASSERT_TRUE(poll_one(a_.cq, &wc));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    EXPECT_EQ(-1, axon_test_check(wbuf, 8192, 12));

    /* disconnect flushes what is posted */
    ASSERT_EQ(0, post_recv(s->qp, 8, rbuf, 8192, rmr->lkey));
    ASSERT_EQ(0, axon_dev_cm_disconnect(s));
    ASSERT_TRUE(poll_one(b_.cq, &wc));
    EXPECT_EQ(AXON_DEV_WC_WR_FLUSH_ERR, wc.status) << wc_status_name(wc.status);
    EXPECT_EQ(8u, wc.wr_id);
}

/*
 * RDMA_PS_UDP (SIDR): UD QPs ready at creation; the requester learns the
 * server's QPN, qkey and address, the server only the request; a datagram
 * sent with what the event gave arrives.
 */
TEST_F(SoftibCm, UdIdsResolveThePeersQpAndAddress)
{
    axon_dev_cm_channel_t *ch = channel();
    uint16_t               port;
    axon_dev_mr_t         *smr, *rmr;
    axon_dev_ah_t         *ah = nullptr;
    axon_dev_gid_t         gid;
    axon_dev_wc_t          wc;
    const char             req[] = "ud request";
    Ev                     ev;

    listener(ch, &port, nullptr, AXON_DEV_CM_PS_UDP);
    axon_dev_cm_id_t *c = resolved(ch, "127.0.0.1", port, AXON_DEV_CM_PS_UDP);
    EXPECT_EQ(EINVAL, a_.qp(c, AXON_DEV_QPT_RC)) << "a UDP id carries a UD QP";
    ASSERT_EQ(0, a_.qp(c, AXON_DEV_QPT_UD));
    EXPECT_EQ(AXON_DEV_QPS_RTS, query_state(c->qp));
    axon_dev_cm_conn_param_t p;
    memset(&p, 0, sizeof(p));
    p.private_data     = req;
    p.private_data_len = sizeof(req);
    ASSERT_EQ(0, axon_dev_cm_connect(c, &p));

    expect_ev(ch, AXON_DEV_CM_EVENT_CONNECT_REQUEST, nullptr, &ev);
    ASSERT_EQ(AXON_DEV_CM_EVENT_CONNECT_REQUEST, ev.type);
    EXPECT_EQ(std::string(req, sizeof(req)), ev.pdata);
    EXPECT_EQ(c->qp->qp_num, ev.ud.qp_num);
    axon_dev_cm_id_t *s = ev.id;
    adopt(s);
    ASSERT_EQ(0, b_.qp(s, AXON_DEV_QPT_UD));
    uint8_t *sbuf = a_.buf(4096, AXON_DEV_ACCESS_LOCAL_WRITE, &smr);
    uint8_t *rbuf = b_.buf(4096, AXON_DEV_ACCESS_LOCAL_WRITE, &rmr);
    ASSERT_TRUE(sbuf && rbuf);
    ASSERT_EQ(0, post_recv(s->qp, 5, rbuf, 4096, rmr->lkey));
    ASSERT_EQ(0, axon_dev_cm_accept(s, nullptr));

    expect_ev(ch, AXON_DEV_CM_EVENT_ESTABLISHED, c, &ev);
    EXPECT_EQ(s->qp->qp_num, ev.ud.qp_num);
    EXPECT_EQ(AXON_DEV_CM_UDP_QKEY, ev.ud.qkey);
    EXPECT_EQ(1, ev.ud.ah_attr.is_global);
    ASSERT_EQ(0, axon_dev_query_gid(s->verbs, s->port_num ? s->port_num : 1, 0, &gid));
    EXPECT_EQ(0, memcmp(gid.raw, ev.ud.ah_attr.grh.dgid.raw, sizeof(gid.raw)));
    expect_no_ev(ch);   /* the passive side of SIDR gets no ESTABLISHED */

    ASSERT_EQ(0, axon_dev_create_ah(a_.pd, &ev.ud.ah_attr, &ah));
    axon_test_fill(sbuf, 1000, 21);
    ASSERT_EQ(0, post_ud_send(c->qp, 9, sbuf, 1000, smr->lkey, ah, ev.ud.qp_num, ev.ud.qkey));
    ASSERT_TRUE(poll_one(a_.cq, &wc)) << "send completion";
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    ASSERT_TRUE(poll_one(b_.cq, &wc)) << "receive completion";
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    EXPECT_EQ(5u, wc.wr_id);
    EXPECT_EQ(1000u + 40u, wc.byte_len) << "a UD receive starts with the 40-byte GRH";
    EXPECT_EQ(-1, axon_test_check(rbuf + 40, 1000, 21));
    EXPECT_EQ(0, axon_dev_destroy_ah(ah));
}

/*
 * Multicast through the CM (seed §5.2.27-28): an RDMA_PS_UDP id resolved to
 * a group joins it (its QP attached, MULTICAST_JOIN with the group's AH, QPN
 * 0xffffff, the UDP qkey and the join's context); a send-only member sends
 * to it without receiving; leave detaches. Bad joins are refused.
 */
TEST_F(SoftibCm, MulticastJoinAttachesTheIdsQp)
{
    axon_dev_cm_channel_t *ch = channel();
    struct sockaddr_in src = inet("127.0.0.1", 0), grp = inet("239.7.7.7", 0);
    axon_dev_mr_t *smr, *rmr, *omr;
    axon_dev_ah_t *ah = nullptr;
    axon_dev_wc_t wc;
    Ev ev;

    grp.sin_addr.s_addr = htonl(0xef070000u | ((uint32_t)getpid() & 0xffffu));  /* ours */
    axon_dev_cm_id_t *r = id(ch, nullptr, AXON_DEV_CM_PS_UDP);
    axon_dev_cm_id_t *s = id(ch, nullptr, AXON_DEV_CM_PS_UDP);
    axon_dev_cm_id_t *t = id(ch, nullptr, AXON_DEV_CM_PS_TCP);
    EXPECT_EQ(EINVAL, axon_dev_cm_join_multicast(r, sa(grp), 0, nullptr)) << "no device yet";
    for (axon_dev_cm_id_t *i : {r, s}) {
        ASSERT_EQ(0, axon_dev_cm_resolve_addr(i, sa(src), sa(grp), 1000)) << "port 0: a group";
        expect_ev(ch, AXON_DEV_CM_EVENT_ADDR_RESOLVED, i);
    }
    ASSERT_EQ(0, axon_dev_cm_bind_addr(t, sa(src)));
    EXPECT_EQ(EINVAL, axon_dev_cm_join_multicast(t, sa(grp), 0, nullptr)) << "a TCP id";
    EXPECT_EQ(EINVAL, axon_dev_cm_join_multicast(r, sa(src), 0, nullptr)) << "not a group";
    ASSERT_EQ(0, a_.qp(r, AXON_DEV_QPT_UD));
    ASSERT_EQ(0, b_.qp(s, AXON_DEV_QPT_UD));

    ASSERT_EQ(0, axon_dev_cm_join_multicast(r, sa(grp), 0, (void *)0x77));
    expect_ev(ch, AXON_DEV_CM_EVENT_MULTICAST_JOIN, r, &ev);
    EXPECT_EQ((const void *)0x77, ev.join_context) << "the join's context is the event's data";
    EXPECT_EQ(0xffffffu, ev.ud.qp_num);
    EXPECT_EQ(AXON_DEV_CM_UDP_QKEY, ev.ud.qkey);
    EXPECT_EQ(1, ev.ud.ah_attr.is_global);
    const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    EXPECT_EQ(0, memcmp(ev.ud.ah_attr.grh.dgid.raw, mapped, 12));
    EXPECT_EQ(0, memcmp(&ev.ud.ah_attr.grh.dgid.raw[12], &grp.sin_addr.s_addr, 4));
    EXPECT_EQ(EADDRINUSE, axon_dev_cm_join_multicast(r, sa(grp), 0, nullptr));
    ASSERT_EQ(0, axon_dev_cm_join_multicast(s, sa(grp), 1, nullptr)) << "send-only";
    expect_ev(ch, AXON_DEV_CM_EVENT_MULTICAST_JOIN, s);

    uint8_t *sbuf = b_.buf(4096, AXON_DEV_ACCESS_LOCAL_WRITE, &smr);
    uint8_t *rbuf = a_.buf(4096, AXON_DEV_ACCESS_LOCAL_WRITE, &rmr);
    uint8_t *obuf = b_.buf(4096, AXON_DEV_ACCESS_LOCAL_WRITE, &omr);
    ASSERT_TRUE(sbuf && rbuf && obuf);
    ASSERT_EQ(0, post_recv(r->qp, 1, rbuf, 2048, rmr->lkey));
    ASSERT_EQ(0, post_recv(r->qp, 2, rbuf + 2048, 2048, rmr->lkey));
    ASSERT_EQ(0, post_recv(s->qp, 3, obuf, 4096, omr->lkey));
    ASSERT_EQ(0, axon_dev_create_ah(b_.pd, &ev.ud.ah_attr, &ah));
    for (int round = 0; round < 2; round++) {
        axon_test_fill(sbuf, 500, 30 + round);
        ASSERT_EQ(0, post_ud_send(s->qp, 9, sbuf, 500, smr->lkey, ah, ev.ud.qp_num, ev.ud.qkey));
        ASSERT_TRUE(poll_one(b_.cq, &wc)) << "send completion";
        EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
        EXPECT_EQ(AXON_DEV_WC_SEND, wc.opcode);
        if (round == 0) {
            ASSERT_TRUE(poll_one(a_.cq, &wc)) << "the member's copy";
            EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
            EXPECT_EQ(500u + 40u, wc.byte_len);
            EXPECT_EQ(-1, axon_test_check(rbuf + 40, 500, 30));
            ASSERT_EQ(0, axon_dev_cm_leave_multicast(r, sa(grp)));
            EXPECT_EQ(EADDRNOTAVAIL, axon_dev_cm_leave_multicast(r, sa(grp)));
        } else {
            EXPECT_TRUE(no_wc(a_.cq, 0.1)) << "a member that left got a copy";
        }
        EXPECT_TRUE(no_wc(b_.cq, 0.1)) << "the send-only member got a copy";
    }
    EXPECT_EQ(0, axon_dev_destroy_ah(ah));
}

TEST_F(SoftibCm, NoQpConnectResponseThenEstablish)
{
    axon_dev_cm_channel_t *ch = channel();
    uint16_t               port;
    axon_dev_cm_id_t      *l = listener(ch, &port);
    axon_dev_cm_id_t      *c = resolved(ch, "127.0.0.1", port);
    axon_dev_cm_conn_param_t p;
    Ev                       ev;

    memset(&p, 0, sizeof(p));
    p.qp_num = 0x123;
    ASSERT_EQ(0, axon_dev_cm_connect(c, &p));
    expect_ev(ch, AXON_DEV_CM_EVENT_CONNECT_REQUEST, nullptr, &ev);
    ASSERT_NE(nullptr, ev.id);
    EXPECT_EQ(l, ev.listen_id);
    EXPECT_EQ(0x123u, ev.conn.qp_num);
    axon_dev_cm_id_t *s = ev.id;
    adopt(s);
    memset(&p, 0, sizeof(p));
    p.qp_num = 0x456;
    ASSERT_EQ(0, axon_dev_cm_accept(s, &p));
    expect_ev(ch, AXON_DEV_CM_EVENT_CONNECT_RESPONSE, c, &ev);
    EXPECT_EQ(0x456u, ev.conn.qp_num);
    expect_no_ev(ch);   /* the passive side waits for the RTU */
    ASSERT_EQ(0, axon_dev_cm_establish(c));
    expect_ev(ch, AXON_DEV_CM_EVENT_ESTABLISHED, s);
    EXPECT_EQ(EINVAL, axon_dev_cm_establish(c)) << "only once";
}

TEST_F(SoftibCm, RejectWithPrivateData)
{
    axon_dev_cm_channel_t *cch = channel(), *sch = channel();
    uint16_t               port;
    listener(sch, &port);
    axon_dev_cm_id_t      *c = resolved(cch, "127.0.0.1", port);
    axon_dev_cm_conn_param_t p;
    const char             why[] = "go away";
    Ev                     ev;

    ASSERT_EQ(0, a_.qp(c));
    memset(&p, 0, sizeof(p));
    ASSERT_EQ(0, axon_dev_cm_connect(c, &p));
    expect_ev(sch, AXON_DEV_CM_EVENT_CONNECT_REQUEST, nullptr, &ev);
    ASSERT_NE(nullptr, ev.id);
    adopt(ev.id);
    ASSERT_EQ(0, axon_dev_cm_reject(ev.id, why, sizeof(why)));
    expect_ev(cch, AXON_DEV_CM_EVENT_REJECTED, c, &ev);
    EXPECT_EQ(AXON_DEV_CM_REJ_CONSUMER_DEFINED, ev.status);
    EXPECT_EQ(std::string(why, sizeof(why)), ev.pdata);
    EXPECT_EQ(AXON_DEV_QPS_ERR, query_state(c->qp));
    expect_no_ev(sch);
}

TEST_F(SoftibCm, NoListenerIsRejected)
{
    axon_dev_cm_channel_t *ch = channel();
    axon_dev_cm_id_t      *c  = resolved(ch, "127.0.0.1", unused_port());
    axon_dev_cm_conn_param_t p;
    Ev                     ev;

    memset(&p, 0, sizeof(p));
    ASSERT_EQ(0, axon_dev_cm_connect(c, &p));
    expect_ev(ch, AXON_DEV_CM_EVENT_REJECTED, c, &ev);
    EXPECT_EQ(AXON_DEV_CM_REJ_INVALID_SERVICE_ID, ev.status);
}

TEST_F(SoftibCm, AddressNoDeviceHas)
{
    axon_dev_cm_channel_t *ch = channel();
    axon_dev_cm_id_t      *c  = id(ch);
    struct sockaddr_in     dst = inet("10.255.255.1", 7471);
    struct sockaddr_in     src = inet("192.0.2.1", 0);
    Ev                     ev;

    ASSERT_EQ(0, axon_dev_cm_resolve_addr(c, nullptr, sa(dst), 500));
    expect_ev(ch, AXON_DEV_CM_EVENT_ADDR_ERROR, c, &ev);
    EXPECT_EQ(-EHOSTUNREACH, ev.status);
    EXPECT_EQ(nullptr, c->verbs);
    EXPECT_EQ(EINVAL, axon_dev_cm_resolve_route(c, 500)) << "not resolved";

    axon_dev_cm_id_t *c2 = id(ch);
    dst = inet("127.0.0.1", 7471);
    ASSERT_EQ(0, axon_dev_cm_resolve_addr(c2, sa(src), sa(dst), 500));
    expect_ev(ch, AXON_DEV_CM_EVENT_ADDR_ERROR, c2, &ev);
    EXPECT_EQ(-EADDRNOTAVAIL, ev.status);

    axon_dev_cm_id_t *c3 = id(ch);
    EXPECT_EQ(EADDRNOTAVAIL, axon_dev_cm_bind_addr(c3, sa(src)));
}

TEST_F(SoftibCm, NoAnswerIsUnreachable)
{
    env_.set("AXON_SOFTIB_CM_TIMEOUT", "300ms");
    axon_dev_cm_channel_t *cch = channel(), *sch = channel();
    uint16_t               port;
    listener(sch, &port);
    axon_dev_cm_id_t      *c = resolved(cch, "127.0.0.1", port);
    axon_dev_cm_conn_param_t p;
    Ev                     ev;

    memset(&p, 0, sizeof(p));
    ASSERT_EQ(0, axon_dev_cm_connect(c, &p));
    expect_ev(sch, AXON_DEV_CM_EVENT_CONNECT_REQUEST, nullptr, &ev);
    ASSERT_NE(nullptr, ev.id);
    axon_dev_cm_id_t *s = ev.id;
    adopt(s);
    /* the passive side never answers */
    double t0 = axon_test_time();
    expect_ev(cch, AXON_DEV_CM_EVENT_UNREACHABLE, c, &ev, 3.0);
    EXPECT_EQ(-ETIMEDOUT, ev.status);
    EXPECT_GE(axon_test_time() - t0, 0.2);
    /* and learns the requester gave up */
    expect_ev(sch, AXON_DEV_CM_EVENT_REJECTED, s, &ev);
    EXPECT_EQ(AXON_DEV_CM_REJ_TIMEOUT, ev.status);
    EXPECT_EQ(EINVAL, axon_dev_cm_accept(s, nullptr)) << "too late";
}

TEST_F(SoftibCm, ChannelFdWorksWithEpoll)
{
    axon_dev_cm_channel_t *ch = channel();
    axon_dev_cm_event_t   *e;
    struct epoll_event     ee = {}, out;
    int                    ep = epoll_create1(EPOLL_CLOEXEC);

    ASSERT_GE(ep, 0);
    ee.events = EPOLLIN;
    ASSERT_EQ(0, epoll_ctl(ep, EPOLL_CTL_ADD, ch->fd, &ee));
    EXPECT_EQ(0, epoll_wait(ep, &out, 1, 50)) << "nothing yet";
    EXPECT_EQ(EAGAIN, axon_dev_cm_get_event(ch, &e));

    uint16_t          port;
    axon_dev_cm_id_t *l = listener(ch, &port);
    axon_dev_cm_id_t *c = id(ch);
    struct sockaddr_in dst = inet("127.0.0.1", port);
    ASSERT_EQ(0, axon_dev_cm_resolve_addr(c, nullptr, sa(dst), 500));
    ASSERT_EQ(1, epoll_wait(ep, &out, 1, 1000)) << "ADDR_RESOLVED makes the fd readable";
    ASSERT_EQ(0, axon_dev_cm_get_event(ch, &e));
    EXPECT_EQ(AXON_DEV_CM_EVENT_ADDR_RESOLVED, e->event);
    EXPECT_EQ(0, axon_dev_cm_ack_event(e));
    EXPECT_EQ(0, epoll_wait(ep, &out, 1, 50)) << "drained";

    ASSERT_EQ(0, axon_dev_cm_resolve_route(c, 500));
    ASSERT_EQ(0, axon_dev_cm_get_event(ch, &e));
    EXPECT_EQ(0, axon_dev_cm_ack_event(e));
    axon_dev_cm_conn_param_t p;
    memset(&p, 0, sizeof(p));
    ASSERT_EQ(0, axon_dev_cm_connect(c, &p));
    /* the request arrives on a socket: the fd turns readable without any call */
    ASSERT_EQ(1, epoll_wait(ep, &out, 1, 2000));
    Ev ev;
    expect_ev(ch, AXON_DEV_CM_EVENT_CONNECT_REQUEST, nullptr, &ev);
    EXPECT_EQ(l, ev.listen_id);
    if (ev.id) {
        adopt(ev.id);
    }
    close(ep);

    /* a blocking get waits for the event */
    int flags = fcntl(ch->fd, F_GETFL);
    ASSERT_EQ(0, fcntl(ch->fd, F_SETFL, flags & ~O_NONBLOCK));
    ASSERT_EQ(0, axon_dev_cm_reject(ev.id, nullptr, 0));
    ASSERT_EQ(0, axon_dev_cm_get_event(ch, &e));
    EXPECT_EQ(AXON_DEV_CM_EVENT_REJECTED, e->event);
    EXPECT_EQ(0, axon_dev_cm_ack_event(e));
    fcntl(ch->fd, F_SETFL, flags);
}

TEST_F(SoftibCm, DestroyWithConnectionsOpenCleansUp)
{
    unsigned fds0 = count_dir("/proc/self/fd"), threads0 = count_dir("/proc/self/task");
    {
        axon_dev_cm_channel_t *cch = channel(), *sch = channel();
        axon_dev_cm_id_t      *c, *s, *l;
        ASSERT_NO_FATAL_FAILURE(connect_pair(cch, sch, &c, &s, &l));

        /* destroying the passive id disconnects the active side */
        b_.release();
        destroy(s);
        expect_ev(cch, AXON_DEV_CM_EVENT_DISCONNECTED, c);
        EXPECT_EQ(0, axon_dev_cm_disconnect(c));
        expect_ev(cch, AXON_DEV_CM_EVENT_TIMEWAIT_EXIT, c);

        /* a request nobody looked at goes with its listener */
        uint16_t          port = ntohs(axon_dev_cm_src_port(l));
        axon_dev_cm_id_t *c2   = resolved(cch, "127.0.0.1", port);
        axon_dev_cm_conn_param_t p;
        memset(&p, 0, sizeof(p));
        ASSERT_EQ(0, axon_dev_cm_connect(c2, &p));
        usleep(50000);   /* let the request reach the listener's socket */
        EXPECT_EQ(EBUSY, axon_dev_cm_destroy_event_channel(sch));
        destroy(l);
        Ev ev;
        next(cch, &ev, 3.0);
        EXPECT_TRUE(ev.type == AXON_DEV_CM_EVENT_REJECTED || ev.type == AXON_DEV_CM_EVENT_UNREACHABLE)
            << ev_name(ev.type);

        /* an id with an unacknowledged event goes too */
        a_.release();
        axon_dev_cm_event_t *held;
        axon_dev_cm_id_t    *c3 = id(cch);
        struct sockaddr_in   dst = inet("127.0.0.1", port);
        ASSERT_EQ(0, axon_dev_cm_resolve_addr(c3, nullptr, sa(dst), 500));
        ASSERT_EQ(0, axon_dev_cm_get_event(cch, &held));
        destroy(c3);
        EXPECT_EQ(0, axon_dev_cm_ack_event(held)) << "acknowledged after its id is gone";
        TearDown();   /* destroys the rest */
    }
    EXPECT_EQ(fds0, count_dir("/proc/self/fd")) << "fds left behind";
    double deadline = axon_test_time() + 2;
    while (count_dir("/proc/self/task") != threads0 && axon_test_time() < deadline) {
        usleep(10000);
    }
    EXPECT_EQ(threads0, count_dir("/proc/self/task")) << "threads left behind";
}

/* A thread blocked in axon_dev_cm_get_event on a channel of its own. */
struct BlockedGetter {
    axon_dev_cm_channel_t *ch = nullptr;
    pthread_t              thread;
    volatile int           returned = 0;

    static void *run(void *arg)
    {
        auto                *g = static_cast<BlockedGetter *>(arg);
        axon_dev_cm_event_t *e = nullptr;
        axon_dev_cm_get_event(g->ch, &e);
        g->returned = 1;
        return nullptr;
    }

    /* Start it and wait until it is inside the blocking wait. */
    bool start()
    {
        if ((axon_dev_cm_create_event_channel(&ch) != 0) ||
            (pthread_create(&thread, nullptr, run, this) != 0)) {
            return false;
        }
        auto  *chan     = reinterpret_cast<axon_dev_cm_chan_t *>(ch);
        double deadline = axon_test_time() + kEvTimeout;
        for (;;) {
            pthread_mutex_lock(&chan->lock);
            unsigned n = chan->getters;
            pthread_mutex_unlock(&chan->lock);
            if (n == 1) {
                return true;
            }
            if (axon_test_time() > deadline) {
                return false;
            }
            usleep(1000);
        }
    }

    bool still_blocked()
    {
        return pthread_tryjoin_np(thread, nullptr) == EBUSY;
    }

    void cancel()
    {
        pthread_cancel(thread);
        pthread_join(thread, nullptr);
    }
};

void wake_only(int) {}

/* rping destroys the channel while its CM thread waits in get_event. Like
 * librdmacm's getter (blocked in read() on the closed fd), ours stays
 * blocked even when woken, and the channel's memory lives until it leaves
 * (ASan and valgrind would see the freed lock taken otherwise). */
TEST_F(SoftibCm, DestroyUnderABlockedGetterLeavesItBlocked)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = wake_only;   /* no SA_RESTART: epoll_wait returns EINTR */
    ASSERT_EQ(0, sigaction(SIGUSR1, &sa, &old));

    BlockedGetter g;
    ASSERT_TRUE(g.start()) << "the getter never reached its wait";
    EXPECT_EQ(0, axon_dev_cm_destroy_event_channel(g.ch));
    pthread_kill(g.thread, SIGUSR1);   /* wakes it on a destroyed channel */
    usleep(100000);
    EXPECT_TRUE(g.still_blocked()) << "get_event returned from a destroyed channel";
    EXPECT_EQ(0, g.returned);
    /* It sleeps until the process ends, as librdmacm's getter would (cancelling it
     * here would work too, but ASan misreads a thread cancelled after a signal). */
    pthread_detach(g.thread);
    sigaction(SIGUSR1, &old, nullptr);
}

/* A CM thread cancelled in its wait, then the channel destroyed: the
 * getter's count goes with it (valgrind and LeakSanitizer see the channel
 * leak otherwise). */
TEST_F(SoftibCm, CancelledGetterThenDestroyFreesTheChannel)
{
    BlockedGetter g;
    ASSERT_TRUE(g.start()) << "the getter never reached its wait";
    g.cancel();
    auto *chan = reinterpret_cast<axon_dev_cm_chan_t *>(g.ch);
    pthread_mutex_lock(&chan->lock);
    EXPECT_EQ(0u, chan->getters) << "a cancelled getter still counted";
    pthread_mutex_unlock(&chan->lock);
    EXPECT_EQ(0, axon_dev_cm_destroy_event_channel(g.ch));
}

/* ---------------------------------------------------------------- bad input */

TEST_F(SoftibCm, BadInputIsEinvalWithALogLine)
{
    axon_dev_cm_channel_t *ch = channel();
    axon_dev_cm_id_t      *i  = id(ch), *out = nullptr;
    axon_dev_cm_event_t   *e;
    struct sockaddr_in     good = inet("127.0.0.1", 7471), zero = inet("127.0.0.1", 0);
    struct sockaddr_in6    v6;
    char                   big[256] = {0};
    axon_dev_cm_conn_param_t p;

    memset(&v6, 0, sizeof(v6));
    v6.sin6_family = AF_INET6;
    memset(&p, 0, sizeof(p));

    EXPECT_EINVAL_LOGS(axon_dev_cm_create_event_channel(nullptr), "NULL channel_p");
    EXPECT_EINVAL_LOGS(axon_dev_cm_create_id(nullptr, nullptr, AXON_DEV_CM_PS_TCP, &out),
                       "NULL channel");
    EXPECT_EINVAL_LOGS(axon_dev_cm_create_id(ch, nullptr, AXON_DEV_CM_PS_IB, &out),
                       "port space 0x13f");
    EXPECT_EINVAL_LOGS(axon_dev_cm_get_event(nullptr, &e), "NULL channel");
    EXPECT_EINVAL_LOGS(axon_dev_cm_ack_event(nullptr), "NULL event");
    EXPECT_EINVAL_LOGS(axon_dev_cm_destroy_id(nullptr), "NULL id");
    EXPECT_EINVAL_LOGS(axon_dev_cm_bind_addr(i, nullptr), "NULL local address");
    EXPECT_EINVAL_LOGS(axon_dev_cm_bind_addr(i, (struct sockaddr *)&v6), "family");
    EXPECT_EINVAL_LOGS(axon_dev_cm_resolve_addr(i, nullptr, nullptr, 100), "NULL destination");
    EXPECT_EINVAL_LOGS(axon_dev_cm_resolve_addr(i, nullptr, sa(zero), 100), "port 0");
    EXPECT_EINVAL_LOGS(axon_dev_cm_resolve_addr(i, nullptr, sa(good), -1), "timeout -1");
    EXPECT_EINVAL_LOGS(axon_dev_cm_listen(i, 4), "not bound");
    EXPECT_EINVAL_LOGS(axon_dev_cm_resolve_route(i, 100), "not bound");
    EXPECT_EINVAL_LOGS(axon_dev_cm_connect(i, nullptr), "NULL conn_param");
    p.private_data     = big;
    p.private_data_len = AXON_DEV_CM_CONNECT_PDATA_MAX + 1;
    EXPECT_EINVAL_LOGS(axon_dev_cm_connect(i, &p), "57 bytes");
    p.private_data_len = AXON_DEV_CM_ACCEPT_PDATA_MAX + 1;
    EXPECT_EINVAL_LOGS(axon_dev_cm_accept(i, &p), "197 bytes");
    EXPECT_EINVAL_LOGS(axon_dev_cm_reject(i, big, AXON_DEV_CM_REJECT_PDATA_MAX + 1), "149 bytes");
    EXPECT_EINVAL_LOGS(axon_dev_cm_reject(i, nullptr, 4), "NULL private data");
    EXPECT_EINVAL_LOGS(axon_dev_cm_destroy_qp(i), "no QP");

    /* on a bound id: calls out of order */
    ASSERT_EQ(0, axon_dev_cm_bind_addr(i, sa(zero)));
    EXPECT_EINVAL_LOGS(axon_dev_cm_bind_addr(i, sa(zero)), "already bound");
    EXPECT_EINVAL_LOGS(axon_dev_cm_resolve_route(i, 100), "resolve_addr first");
    memset(&p, 0, sizeof(p));
    EXPECT_EINVAL_LOGS(axon_dev_cm_connect(i, &p), "resolve_route first");
    EXPECT_EINVAL_LOGS(axon_dev_cm_accept(i, &p), "CONNECT_REQUEST");
    EXPECT_EINVAL_LOGS(axon_dev_cm_disconnect(i), "not connected");
    EXPECT_EINVAL_LOGS(axon_dev_cm_create_qp(i, nullptr, nullptr), "NULL pd");

    /* a PD of another device context, and a QP type the CM does not carry */
    SoftibDev other;
    ASSERT_EQ(0, other.open());
    axon_dev_qp_init_attr_t init;
    memset(&init, 0, sizeof(init));
    init.qp_type = AXON_DEV_QPT_RC;
    EXPECT_EINVAL_LOGS(axon_dev_cm_create_qp(i, other.pd, &init), "pd of device");
    ASSERT_EQ(0, b_.setup(i));
    init.qp_type = AXON_DEV_QPT_UD;
    EXPECT_EINVAL_LOGS(axon_dev_cm_create_qp(i, b_.pd, &init), "QP type 4");
    other.close();

    /* nothing changed: the id still listens */
    EXPECT_EQ(0, axon_dev_cm_listen(i, 0));
}

/*
 * rdma_set_option's TOS and ACK_TIMEOUT reach the QPs: the active id's its
 * own, the listener's the request's id (taken at the request); bad values,
 * lengths and levels are refused with a line naming them, the id unchanged.
 */
TEST_F(SoftibCm, OptionsTosAndAckTimeoutReachTheQps)
{
    axon_dev_cm_channel_t  *ch = channel();
    axon_dev_qp_attr_t      qa;
    axon_dev_qp_init_attr_t qi;
    axon_dev_cm_conn_param_t p;
    uint16_t                port;
    uint8_t                 tos = 96, lis_tos = 32, ack = 12, big_ack = 32;
    int                     yes = 1;
    Ev                      ev;

    axon_dev_cm_id_t *l = listener(ch, &port);
    ASSERT_EQ(0, axon_dev_cm_set_option(l, AXON_DEV_CM_OPTION_ID, AXON_DEV_CM_OPTION_ID_TOS,
                                        &lis_tos, sizeof(lis_tos)));
    axon_dev_cm_id_t *c = resolved(ch, "127.0.0.1", port);
    ASSERT_EQ(0, axon_dev_cm_set_option(c, AXON_DEV_CM_OPTION_ID, AXON_DEV_CM_OPTION_ID_TOS,
                                        &tos, sizeof(tos)));
    ASSERT_EQ(0, axon_dev_cm_set_option(c, AXON_DEV_CM_OPTION_ID,
                                        AXON_DEV_CM_OPTION_ID_ACK_TIMEOUT, &ack, sizeof(ack)));
    ASSERT_EQ(0, axon_dev_cm_set_option(c, AXON_DEV_CM_OPTION_ID,
                                        AXON_DEV_CM_OPTION_ID_REUSEADDR, &yes, sizeof(yes)));
    ASSERT_EQ(0, axon_dev_cm_set_option(c, AXON_DEV_CM_OPTION_ID, AXON_DEV_CM_OPTION_ID_AFONLY,
                                        &yes, sizeof(yes)));

    EXPECT_EINVAL_LOGS(axon_dev_cm_set_option(c, AXON_DEV_CM_OPTION_ID,
                                              AXON_DEV_CM_OPTION_ID_ACK_TIMEOUT, &big_ack, 1),
                       "ACK_TIMEOUT 32 is over 31");
    EXPECT_EINVAL_LOGS(axon_dev_cm_set_option(c, AXON_DEV_CM_OPTION_ID,
                                              AXON_DEV_CM_OPTION_ID_TOS, &yes, sizeof(yes)),
                       "TOS takes 1 bytes, not 4");
    EXPECT_EINVAL_LOGS(axon_dev_cm_set_option(c, AXON_DEV_CM_OPTION_ID, 9, &yes, sizeof(yes)),
                       "option 9");
    EXPECT_EINVAL_LOGS(axon_dev_cm_set_option(c, 7, 0, &yes, sizeof(yes)), "unknown level");
    std::string log = capture_stderr([&] {
        EXPECT_EQ(ENOSYS, axon_dev_cm_set_option(c, AXON_DEV_CM_OPTION_IB,
                                                 AXON_DEV_CM_OPTION_IB_PATH, &yes, sizeof(yes)));
    });
    EXPECT_NE(std::string::npos, log.find("path records are not supported")) << log;

    ASSERT_EQ(0, a_.qp(c));
    p = retrying();
    axon_dev_cm_id_t *s = request_of(ch, c, p);
    ASSERT_NE(nullptr, s);
    ASSERT_EQ(0, b_.qp(s));
    ASSERT_EQ(0, axon_dev_cm_accept(s, &p));
    expect_ev(ch, AXON_DEV_CM_EVENT_ESTABLISHED, c);
    expect_ev(ch, AXON_DEV_CM_EVENT_ESTABLISHED, s);

    ASSERT_EQ(0, axon_dev_query_qp(c->qp, &qa, AXON_DEV_QP_AV | AXON_DEV_QP_TIMEOUT, &qi));
    EXPECT_EQ(tos, qa.ah_attr.grh.traffic_class);
    EXPECT_EQ(ack, qa.timeout) << "the bad ACK_TIMEOUT after it changed nothing";
    ASSERT_EQ(0, axon_dev_query_qp(s->qp, &qa, AXON_DEV_QP_AV | AXON_DEV_QP_TIMEOUT, &qi));
    EXPECT_EQ(lis_tos, qa.ah_attr.grh.traffic_class) << "the request's id takes the listener's";
    EXPECT_NE(ack, qa.timeout) << "ACK_TIMEOUT was set on the active id only";
}

/* A QP the program made itself (no QP on the ids, its number in conn_param),
 * taken to INIT, RTR and RTS with init_qp_attr's attributes on both sides
 * (rping -q's way): the connection carries a send, and each QP's sq_psn is
 * the one its peer's QP expects. Before the peer is known RTR is refused. */
TEST_F(SoftibCm, InitQpAttrDrivesQpsOfTheProgramsOwn)
{
    axon_dev_cm_channel_t   *ch = channel();
    axon_dev_cm_conn_param_t p;
    axon_dev_qp_attr_t       qa, ca, sa_;
    axon_dev_qp_init_attr_t  qi;
    axon_dev_qp_t           *cqp = nullptr, *sqp = nullptr;
    axon_dev_mr_t           *smr, *rmr;
    axon_dev_wc_t            wc;
    uint16_t                 port;
    int                      mask;
    Ev                       ev;

    axon_dev_cm_id_t *l = listener(ch, &port);
    (void)l;
    axon_dev_cm_id_t *c = resolved(ch, "127.0.0.1", port);
    auto own_qp = [&](Side *side, axon_dev_cm_id_t *id, axon_dev_qp_t **qp) {
        ASSERT_EQ(0, side->setup(id));
        memset(&qi, 0, sizeof(qi));
        qi.send_cq = qi.recv_cq = side->cq;
        qi.qp_type          = AXON_DEV_QPT_RC;
        qi.sq_sig_all       = 1;
        qi.cap.max_send_wr  = qi.cap.max_recv_wr  = 8;
        qi.cap.max_send_sge = qi.cap.max_recv_sge = 1;
        ASSERT_EQ(0, axon_dev_create_qp(side->pd, &qi, qp));
        memset(&qa, 0, sizeof(qa));
        qa.qp_state = AXON_DEV_QPS_INIT;
        ASSERT_EQ(0, axon_dev_cm_init_qp_attr(id, &qa, &mask));
        EXPECT_EQ(AXON_DEV_QP_STATE | AXON_DEV_QP_PKEY_INDEX | AXON_DEV_QP_PORT |
                  AXON_DEV_QP_ACCESS_FLAGS, mask);
        ASSERT_EQ(0, axon_dev_modify_qp(*qp, &qa, mask));
    };
    auto to_rts = [&](axon_dev_cm_id_t *id, axon_dev_qp_t *qp, axon_dev_qp_attr_t *rts) {
        memset(&qa, 0, sizeof(qa));
        qa.qp_state = AXON_DEV_QPS_RTR;
        ASSERT_EQ(0, axon_dev_cm_init_qp_attr(id, &qa, &mask));
        ASSERT_EQ(0, axon_dev_modify_qp(qp, &qa, mask));
        memset(rts, 0, sizeof(*rts));
        rts->qp_state = AXON_DEV_QPS_RTS;
        ASSERT_EQ(0, axon_dev_cm_init_qp_attr(id, rts, &mask));
        ASSERT_EQ(0, axon_dev_modify_qp(qp, rts, mask));
    };

    ASSERT_NO_FATAL_FAILURE(own_qp(&a_, c, &cqp));
    memset(&qa, 0, sizeof(qa));
    qa.qp_state = AXON_DEV_QPS_RTR;
    EXPECT_EINVAL_LOGS(axon_dev_cm_init_qp_attr(c, &qa, &mask), "CONNECT_RESPONSE first");
    p = retrying(1, cqp->qp_num);
    axon_dev_cm_id_t *s = request_of(ch, c, p);
    ASSERT_NE(nullptr, s);
    ASSERT_NO_FATAL_FAILURE(own_qp(&b_, s, &sqp));
    ASSERT_NO_FATAL_FAILURE(to_rts(s, sqp, &sa_));
    EXPECT_EQ(cqp->qp_num, qa.dest_qp_num) << "the responder's RTR points at the requester's QP";
    uint8_t *rbuf = b_.buf(64, AXON_DEV_ACCESS_LOCAL_WRITE, &rmr);
    ASSERT_EQ(0, post_recv(sqp, 5, rbuf, 64, rmr->lkey));
    p.qp_num = sqp->qp_num;
    ASSERT_EQ(0, axon_dev_cm_accept(s, &p));

    expect_ev(ch, AXON_DEV_CM_EVENT_CONNECT_RESPONSE, c);
    ASSERT_NO_FATAL_FAILURE(to_rts(c, cqp, &ca));
    EXPECT_EQ(sqp->qp_num, qa.dest_qp_num);
    ASSERT_EQ(0, axon_dev_cm_establish(c));   /* the RTU: ESTABLISHED for the responder */
    expect_ev(ch, AXON_DEV_CM_EVENT_ESTABLISHED, s);

    /* each side's RTR expects the PSN the other's RTS starts from */
    ASSERT_EQ(0, axon_dev_query_qp(sqp, &qa, AXON_DEV_QP_RQ_PSN, &qi));
    EXPECT_EQ(ca.sq_psn, qa.rq_psn);
    ASSERT_EQ(0, axon_dev_query_qp(cqp, &qa, AXON_DEV_QP_RQ_PSN, &qi));
    EXPECT_EQ(sa_.sq_psn, qa.rq_psn);

    uint8_t *sbuf = a_.buf(64, AXON_DEV_ACCESS_LOCAL_WRITE, &smr);
    axon_test_fill(sbuf, 64, 21);
    ASSERT_EQ(0, post_send_op(cqp, 1, AXON_DEV_WR_SEND, sbuf, 64, smr->lkey));
    ASSERT_TRUE(poll_one(b_.cq, &wc));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    EXPECT_EQ(-1, axon_test_check(rbuf, 64, 21));
    ASSERT_TRUE(poll_one(a_.cq, &wc));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);

    ASSERT_EQ(0, axon_dev_cm_disconnect(c));
    EXPECT_EQ(0, axon_dev_destroy_qp(cqp));
    EXPECT_EQ(0, axon_dev_destroy_qp(sqp));
}

TEST_F(SoftibCm, TwoConnectionsShareTheDevice)
{
    axon_dev_cm_channel_t *ch = channel();
    axon_dev_cm_id_t      *c1, *s1, *l1, *c2, *s2;

    ASSERT_NO_FATAL_FAILURE(connect_pair(ch, ch, &c1, &s1, &l1));
    uint16_t port = ntohs(axon_dev_cm_src_port(l1));
    c2 = resolved(ch, "127.0.0.1", port);
    EXPECT_EQ(c1->verbs, c2->verbs) << "ids on one device share its context";
    axon_dev_context_t *ctx = nullptr;
    ASSERT_EQ(0, axon_dev_cm_open_device("softib0", &ctx));
    EXPECT_EQ(c1->verbs, ctx) << "a transport gets the ids' context too";
    axon_dev_cm_close_device(ctx);
    EXPECT_EQ(ENODEV, axon_dev_cm_open_device("nosuchdev0", &ctx));
    ASSERT_EQ(0, a_.qp(c2));
    axon_dev_cm_conn_param_t p;
    memset(&p, 0, sizeof(p));
    ASSERT_EQ(0, axon_dev_cm_connect(c2, &p));
    Ev ev;
    expect_ev(ch, AXON_DEV_CM_EVENT_CONNECT_REQUEST, nullptr, &ev);
    ASSERT_NE(nullptr, ev.id);
    s2 = ev.id;
    adopt(s2);
    ASSERT_EQ(0, b_.qp(s2));
    ASSERT_EQ(0, axon_dev_cm_accept(s2, nullptr));
    expect_ev(ch, AXON_DEV_CM_EVENT_ESTABLISHED, c2);
    expect_ev(ch, AXON_DEV_CM_EVENT_ESTABLISHED, s2);
    EXPECT_NE(s1->qp->qp_num, s2->qp->qp_num);
}

/* ---------------------------------------------------------------- two processes */


/* What the passive side tells the active one in its accept private data. */
struct WriteTarget {
    uint64_t addr;
    uint32_t rkey;
    uint32_t len;
};

const char kHello[] = "hello from the active side";

struct XprocArg {
    bool passive_disconnects;
};

bool peer_ev(axon_dev_cm_channel_t *ch, int type, Ev *ev)
{
    if (!get_ev(ch, ev, kEvTimeout)) {
        fprintf(stderr, "[peer] no event, wanted %s\n", ev_name(type));
        return false;
    }
    if (ev->type != type) {
        fprintf(stderr, "[peer] got %s status %d, wanted %s\n", ev_name(ev->type), ev->status,
                ev_name(type));
        return false;
    }
    return true;
}

/* The passive side: listen, accept with a write target, receive, disconnect. */
int cm_passive_peer(int fd, void *varg)
{
    XprocArg              *arg = (XprocArg *)varg;
    axon_dev_cm_channel_t *ch  = nullptr;
    axon_dev_cm_id_t      *l   = nullptr;
    struct sockaddr_in     a   = inet("127.0.0.1", 0);
    Side                   side;
    Ev                     ev;
    axon_dev_mr_t         *rmr, *wmr;
    axon_dev_wc_t          wc;

    PEER_CHECK(axon_dev_cm_create_event_channel(&ch) == 0, "channel");
    fcntl(ch->fd, F_SETFL, O_NONBLOCK);
    PEER_CHECK(axon_dev_cm_create_id(ch, nullptr, AXON_DEV_CM_PS_TCP, &l) == 0, "id");
    PEER_CHECK(axon_dev_cm_bind_addr(l, sa(a)) == 0, "bind");
    PEER_CHECK(axon_dev_cm_listen(l, 0) == 0, "listen");
    uint16_t port = axon_dev_cm_src_port(l);
    PEER_CHECK(axon_test_send_blob(fd, &port, sizeof(port)) == 0, "send port");

    PEER_CHECK(peer_ev(ch, AXON_DEV_CM_EVENT_CONNECT_REQUEST, &ev), "request");
    PEER_CHECK(ev.pdata == std::string(kHello, sizeof(kHello)), "private data '%s'",
               ev.pdata.c_str());
    axon_dev_cm_id_t *s = ev.id;
    PEER_CHECK(side.qp(s) == 0, "create_qp");
    uint8_t *rbuf = side.buf(4096, AXON_DEV_ACCESS_LOCAL_WRITE, &rmr);
    uint8_t *wbuf = side.buf(65536, AXON_DEV_ACCESS_LOCAL_WRITE | AXON_DEV_ACCESS_REMOTE_WRITE,
                             &wmr);
    PEER_CHECK(rbuf && wbuf, "buffers");
    PEER_CHECK(post_recv(s->qp, 1, rbuf, 4096, rmr->lkey) == 0, "post_recv");
    PEER_CHECK(post_recv(s->qp, 2, rbuf, 4096, rmr->lkey) == 0, "post_recv");

    WriteTarget t = {(uintptr_t)wbuf, wmr->rkey, 65536};
    axon_dev_cm_conn_param_t p;
    memset(&p, 0, sizeof(p));
    p.private_data     = &t;
    p.private_data_len = sizeof(t);
    p.rnr_retry_count  = 7;
    PEER_CHECK(axon_dev_cm_accept(s, &p) == 0, "accept");
    PEER_CHECK(peer_ev(ch, AXON_DEV_CM_EVENT_ESTABLISHED, &ev), "established");

    /* send, write, send: the second receive proves the write landed */
    PEER_CHECK(poll_one(side.cq, &wc) && wc.status == AXON_DEV_WC_SUCCESS && wc.wr_id == 1,
               "first receive: %s", wc_status_name(wc.status));
    PEER_CHECK(axon_test_check(rbuf, wc.byte_len, 21) == -1, "first message");
    PEER_CHECK(poll_one(side.cq, &wc) && wc.status == AXON_DEV_WC_SUCCESS && wc.wr_id == 2,
               "second receive: %s", wc_status_name(wc.status));
    PEER_CHECK(axon_test_check(wbuf, 65536, 22) == -1, "written data");

    if (arg->passive_disconnects) {
        PEER_CHECK(axon_dev_cm_disconnect(s) == 0, "disconnect");
        PEER_CHECK(peer_ev(ch, AXON_DEV_CM_EVENT_DISCONNECTED, &ev), "disconnected");
        PEER_CHECK(peer_ev(ch, AXON_DEV_CM_EVENT_TIMEWAIT_EXIT, &ev), "timewait");
    } else {
        PEER_CHECK(peer_ev(ch, AXON_DEV_CM_EVENT_DISCONNECTED, &ev), "disconnected");
        PEER_CHECK(axon_dev_cm_disconnect(s) == 0, "disconnect");
        PEER_CHECK(query_state(s->qp) == AXON_DEV_QPS_ERR, "QP in error");
        PEER_CHECK(peer_ev(ch, AXON_DEV_CM_EVENT_TIMEWAIT_EXIT, &ev), "timewait");
    }
    axon_test_sync(fd);
    side.release();
    PEER_CHECK(axon_dev_cm_destroy_id(s) == 0, "destroy");
    PEER_CHECK(axon_dev_cm_destroy_id(l) == 0, "destroy listener");
    PEER_CHECK(axon_dev_cm_destroy_event_channel(ch) == 0, "destroy channel");
    return 0;
}

using SoftibCmXproc = SoftibWithPeer<SoftibCm, bool>;

TEST_P(SoftibCmXproc, SendWriteDisconnect)
{
    XprocArg arg = {GetParam()};
    ASSERT_EQ(0, axon_test_peer_spawn(&peer_, cm_passive_peer, &arg, kPeerTimeout));
    spawned_ = true;

    void    *blob = nullptr;
    size_t   len  = 0;
    ASSERT_EQ(0, axon_test_recv_blob(peer_.fd, &blob, &len));
    uint16_t port;
    memcpy(&port, blob, sizeof(port));
    free(blob);

    axon_dev_cm_channel_t *ch = channel();
    axon_dev_cm_id_t      *c  = resolved(ch, "127.0.0.1", ntohs(port));
    ASSERT_EQ(0, a_.qp(c));
    axon_dev_cm_conn_param_t p;
    memset(&p, 0, sizeof(p));
    p.private_data     = kHello;
    p.private_data_len = sizeof(kHello);
    p.retry_count      = 7;
    p.rnr_retry_count  = 7;
    ASSERT_EQ(0, axon_dev_cm_connect(c, &p));
    Ev ev;
    expect_ev(ch, AXON_DEV_CM_EVENT_ESTABLISHED, c, &ev);
    ASSERT_EQ(sizeof(WriteTarget), ev.pdata.size());
    WriteTarget t;
    memcpy(&t, ev.pdata.data(), sizeof(t));

    axon_dev_mr_t *smr, *wmr;
    uint8_t       *sbuf = a_.buf(4096, AXON_DEV_ACCESS_LOCAL_WRITE, &smr);
    uint8_t       *wbuf = a_.buf(65536, AXON_DEV_ACCESS_LOCAL_WRITE, &wmr);
    axon_test_fill(sbuf, 1000, 21);
    axon_test_fill(wbuf, 65536, 22);
    axon_dev_wc_t wc;
    ASSERT_EQ(0, post_send_op(c->qp, 1, AXON_DEV_WR_SEND, sbuf, 1000, smr->lkey));
    ASSERT_EQ(0, post_rdma(c->qp, 2, AXON_DEV_WR_RDMA_WRITE, wbuf, 65536, wmr->lkey, t.addr,
                           t.rkey));
    ASSERT_EQ(0, post_send_op(c->qp, 3, AXON_DEV_WR_SEND, sbuf, 16, smr->lkey));
    for (int i = 1; i <= 3; ++i) {
        ASSERT_TRUE(poll_one(a_.cq, &wc)) << "completion " << i;
        EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
        EXPECT_EQ((uint64_t)i, wc.wr_id);
    }

    if (GetParam()) {
        expect_ev(ch, AXON_DEV_CM_EVENT_DISCONNECTED, c);
        ASSERT_EQ(0, axon_dev_cm_disconnect(c));
        expect_ev(ch, AXON_DEV_CM_EVENT_TIMEWAIT_EXIT, c);
    } else {
        ASSERT_EQ(0, axon_dev_cm_disconnect(c));
        expect_ev(ch, AXON_DEV_CM_EVENT_DISCONNECTED, c);
        expect_ev(ch, AXON_DEV_CM_EVENT_TIMEWAIT_EXIT, c);
    }
    EXPECT_EQ(AXON_DEV_QPS_ERR, query_state(c->qp));
    axon_test_sync(peer_.fd);
    EXPECT_EQ(0, axon_test_peer_wait(&peer_, kPeerTimeout)) << "passive peer failed";
    spawned_ = false;
}

INSTANTIATE_TEST_SUITE_P(SoftibCm, SoftibCmXproc, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool> &info) {
                             return std::string(info.param ? "PassiveDisconnects"
                                                           : "ActiveDisconnects");
                         });

}  // namespace
