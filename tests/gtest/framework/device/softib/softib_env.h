/*
 * What the softib conformance suites share: a device opened fresh for each
 * test (configuration is read at open time, so a test sets AXON_SOFTIB_*
 * first), QPs with their own CQs, the standard bring-up RESET -> INIT ->
 * RTR -> RTS, registered buffers, and waits with deadlines for completions,
 * completion-channel events and async events.
 *
 * Everything is in an unnamed namespace: each suite that includes this gets
 * its own copy, so the header needs no source file of its own.
 */
#ifndef AXON_TEST_SOFTIB_ENV_H
#define AXON_TEST_SOFTIB_ENV_H

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <map>

#include "env_guard.h"
#include <string>
#include <vector>

#include "dev.h"
#include "harness.h"

namespace {

const double kWcTimeout = 5.0;  /* one completion or event */

/* Default connection attributes of the suites. */
const axon_dev_mtu_t kPathMtu     = AXON_DEV_MTU_1024;
const uint8_t        kTimeout     = 14;  /* 4.096 us * 2^14 = 67 ms */
const uint8_t        kRetryCnt    = 7;
const uint8_t        kRnrRetry    = 7;
const uint8_t        kMinRnrTimer = 1;   /* 0.01 ms */
const uint8_t        kRdAtomic    = 4;
const uint32_t       kQkey        = 0x11111111;
const uint32_t       kPsnA        = 0x100;  /* sq_psn of the first QP = rq_psn of the second */
const uint32_t       kPsnB        = 0x200;

/* ---------------------------------------------------------------- environment */


/* ---------------------------------------------------------------- small helpers */

inline const char *wc_status_name(int status)
{
    return axon_dev_wc_status_str((axon_dev_wc_status_t)status);
}

inline std::string gid_str(const axon_dev_gid_t &gid)
{
    char text[INET6_ADDRSTRLEN];
    inet_ntop(AF_INET6, gid.raw, text, sizeof(text));
    return text;
}

inline void fill_ah_attr(axon_dev_ah_attr_t *ah, const axon_dev_gid_t &dgid)
{
    memset(ah, 0, sizeof(*ah));
    ah->is_global      = 1;
    ah->grh.dgid       = dgid;
    ah->grh.sgid_index = 0;
    ah->grh.hop_limit  = 64;
    ah->port_num       = 1;
}

/* A send WR over one SGE (sge is filled; pass len 0 for no SGE). */
inline void make_wr(axon_dev_send_wr_t *wr, axon_dev_sge_t *sge, uint64_t wr_id,
                    axon_dev_wr_opcode_t opcode, void *addr, uint32_t len, uint32_t lkey,
                    unsigned flags = AXON_DEV_SEND_SIGNALED)
{
    memset(wr, 0, sizeof(*wr));
    sge->addr       = (uintptr_t)addr;
    sge->length     = len;
    sge->lkey       = lkey;
    wr->wr_id       = wr_id;
    wr->sg_list     = sge;
    wr->num_sge     = (len > 0) ? 1 : 0;
    wr->opcode      = opcode;
    wr->send_flags  = flags;
}

/* ---------------------------------------------------------------- a device */

/* One QP with its own send and receive CQs (or a shared SRQ). */
struct Qp {
    axon_dev_qp_t     *qp  = nullptr;
    axon_dev_cq_t     *scq = nullptr;
    axon_dev_cq_t     *rcq = nullptr;
    axon_dev_qp_type_t type = AXON_DEV_QPT_RC;
    uint32_t           qpn() const { return qp->qp_num; }
};

/* A registered, page-aligned buffer. */
struct Buf {
    uint8_t       *ptr = nullptr;
    size_t         len = 0;
    axon_dev_mr_t *mr  = nullptr;
    uint32_t       lkey() const { return mr->lkey; }
    uint32_t       rkey() const { return mr->rkey; }
    uint64_t       addr(size_t off = 0) const { return (uintptr_t)(ptr + off); }
};

/*
 * The device of one test (or one child process): context, PD, and every
 * object created through it, destroyed in reverse order at the end.
 */
class SoftibDev {
public:
    axon_dev_context_t  *ctx = nullptr;
    axon_dev_pd_t       *pd  = nullptr;
    axon_dev_attr_t      attr;
    axon_dev_port_attr_t port;
    axon_dev_gid_t       gid;

    SoftibDev() { memset(&attr, 0, sizeof(attr)); memset(&port, 0, sizeof(port)); }
    ~SoftibDev() { close(); }

    /* 0 or the errno of the first call that failed. */
    int open(const char *name = "softib0")
    {
        int ret = axon_dev_open(name, &ctx);
        if (ret != 0) {
            ctx = nullptr;
            return ret;
        }
        if ((ret = axon_dev_query_device(ctx, &attr)) != 0) return ret;
        if ((ret = axon_dev_query_port(ctx, 1, &port)) != 0) return ret;
        if ((ret = axon_dev_query_gid(ctx, 1, 0, &gid)) != 0) return ret;
        return axon_dev_alloc_pd(ctx, &pd);
    }

    void close()
    {
        for (auto it = qps_.rbegin(); it != qps_.rend(); ++it) {
            EXPECT_EQ(0, axon_dev_destroy_qp(*it));
        }
        qps_.clear();
        for (auto it = ahs_.rbegin(); it != ahs_.rend(); ++it) {
            EXPECT_EQ(0, axon_dev_destroy_ah(*it));
        }
        ahs_.clear();
        for (auto it = srqs_.rbegin(); it != srqs_.rend(); ++it) {
            EXPECT_EQ(0, axon_dev_destroy_srq(*it));
        }
        srqs_.clear();
        for (auto it = cqs_.rbegin(); it != cqs_.rend(); ++it) {
            EXPECT_EQ(0, axon_dev_destroy_cq(*it));
        }
        cqs_.clear();
        for (auto it = channels_.rbegin(); it != channels_.rend(); ++it) {
            EXPECT_EQ(0, axon_dev_destroy_comp_channel(*it));
        }
        channels_.clear();
        for (auto &b : bufs_) {
            if (b.mr) {
                EXPECT_EQ(0, axon_dev_dereg_mr(b.mr));
            }
            free(b.ptr);
        }
        bufs_.clear();
        if (pd) {
            EXPECT_EQ(0, axon_dev_dealloc_pd(pd));
            pd = nullptr;
        }
        if (ctx) {
            axon_dev_close(ctx);
            ctx = nullptr;
        }
    }

    /* A zeroed buffer registered with access (no MR if access < 0). */
    Buf reg(size_t len, int access, axon_dev_pd_t *on_pd = nullptr)
    {
        Buf b;
        b.len = len;
        if (posix_memalign((void **)&b.ptr, 4096, len ? len : 1) != 0) {
            ADD_FAILURE() << "posix_memalign " << len;
            return b;
        }
        memset(b.ptr, 0, len);
        if (access >= 0) {
            int ret = axon_dev_reg_mr(on_pd ? on_pd : pd, b.ptr, len, access, &b.mr);
            EXPECT_EQ(0, ret) << "reg_mr len " << len << " access " << access;
            if (ret != 0) {
                b.mr = nullptr;
            }
        }
        bufs_.push_back(b);
        return b;
    }

    /* Deregister now (the buffer stays until the end). */
    void dereg(Buf &b)
    {
        for (auto &own : bufs_) {
            if (own.mr == b.mr) {
                own.mr = nullptr;
            }
        }
        EXPECT_EQ(0, axon_dev_dereg_mr(b.mr));
        b.mr = nullptr;
    }

    /* flags: AXON_DEV_CQ_* (create_cq_ex) */
    axon_dev_cq_t *cq(int cqe = 256, axon_dev_comp_channel_t *channel = nullptr,
                      uint32_t flags = 0)
    {
        axon_dev_cq_t *c = nullptr;
        int ret = flags ? axon_dev_create_cq_ex(ctx, cqe, nullptr, channel, 0, flags, &c)
                        : axon_dev_create_cq(ctx, cqe, nullptr, channel, 0, &c);
        EXPECT_EQ(0, ret) << "create_cq " << cqe << " flags " << flags;
        if (ret == 0) {
            cqs_.push_back(c);
        }
        return (ret == 0) ? c : nullptr;
    }

    axon_dev_comp_channel_t *channel()
    {
        axon_dev_comp_channel_t *ch = nullptr;
        int ret = axon_dev_create_comp_channel(ctx, &ch);
        EXPECT_EQ(0, ret);
        if (ret == 0) {
            channels_.push_back(ch);
        }
        return (ret == 0) ? ch : nullptr;
    }

    /* Returns create_srq's result; *srq_p set on success. */
    int srq(uint32_t max_wr, uint32_t max_sge, axon_dev_srq_t **srq_p)
    {
        axon_dev_srq_init_attr_t init;
        memset(&init, 0, sizeof(init));
        init.attr.max_wr  = max_wr;
        init.attr.max_sge = max_sge;
        int ret = axon_dev_create_srq(pd, &init, srq_p);
        if (ret == 0) {
            srqs_.push_back(*srq_p);
        }
        return ret;
    }

    /* Returns create_qp's result; q is usable on success. */
    int qp(Qp *q, axon_dev_qp_type_t type, int sq_sig_all = 1, axon_dev_srq_t *srq = nullptr,
           uint32_t max_inline = 0, uint32_t max_wr = 64, axon_dev_cq_t *scq = nullptr,
           axon_dev_cq_t *rcq = nullptr, uint32_t create_flags = 0,
           uint32_t max_inl_send_klms = 0)
    {
        axon_dev_qp_init_attr_t init;

        q->type = type;
        q->scq  = scq ? scq : cq();
        q->rcq  = rcq ? rcq : cq();
        memset(&init, 0, sizeof(init));
        init.send_cq             = q->scq;
        init.recv_cq             = q->rcq;
        init.srq                 = srq;
        init.qp_type             = type;
        init.sq_sig_all          = sq_sig_all;
        init.cap.max_send_wr     = max_wr;
        init.cap.max_recv_wr     = srq ? 0 : max_wr;
        init.cap.max_send_sge    = 4;
        init.cap.max_recv_sge    = 4;
        init.cap.max_inline_data = max_inline;
        init.create_flags        = create_flags;
        init.max_inl_send_klms   = max_inl_send_klms;
        int ret = axon_dev_create_qp(pd, &init, &q->qp);
        if (ret == 0) {
            qps_.push_back(q->qp);
        } else {
            q->qp = nullptr;
        }
        return ret;
    }

    /* Destroy one CQ before the end (its QPs first). */
    void destroy_cq(axon_dev_cq_t *cq)
    {
        for (auto it = cqs_.begin(); it != cqs_.end(); ++it) {
            if (*it == cq) {
                cqs_.erase(it);
                break;
            }
        }
        EXPECT_EQ(0, axon_dev_destroy_cq(cq));
    }

    /* Destroy one QP before the end (e.g. to make its peer retry). */
    void destroy_qp(Qp *q)
    {
        for (auto it = qps_.begin(); it != qps_.end(); ++it) {
            if (*it == q->qp) {
                qps_.erase(it);
                break;
            }
        }
        EXPECT_EQ(0, axon_dev_destroy_qp(q->qp));
        q->qp = nullptr;
    }

    axon_dev_ah_t *ah(const axon_dev_gid_t &dgid)
    {
        axon_dev_ah_attr_t a;
        axon_dev_ah_t     *h = nullptr;
        fill_ah_attr(&a, dgid);
        int ret = axon_dev_create_ah(pd, &a, &h);
        EXPECT_EQ(0, ret) << "create_ah";
        if (ret == 0) {
            ahs_.push_back(h);
        }
        return (ret == 0) ? h : nullptr;
    }

    /* ------------------------------------------------ bring-up */

    /* RESET -> INIT with exactly the required attributes of the QP's type. */
    int to_init(const Qp &q, unsigned access = AXON_DEV_ACCESS_REMOTE_WRITE |
                                               AXON_DEV_ACCESS_REMOTE_READ |
                                               AXON_DEV_ACCESS_REMOTE_ATOMIC)
    {
        axon_dev_qp_attr_t a;
        int                mask = init_attrs(q.type, access, &a);
        return axon_dev_modify_qp(q.qp, &a, mask);
    }

    int to_rtr(const Qp &q, uint32_t dest_qpn, const axon_dev_gid_t &dgid, uint32_t rq_psn,
               uint8_t min_rnr_timer = kMinRnrTimer, axon_dev_mtu_t mtu = kPathMtu)
    {
        axon_dev_qp_attr_t a;
        int mask = rtr_attrs(q.type, dest_qpn, dgid, rq_psn, min_rnr_timer, mtu, &a);
        return axon_dev_modify_qp(q.qp, &a, mask);
    }

    int to_rts(const Qp &q, uint32_t sq_psn, uint8_t timeout = kTimeout,
               uint8_t retry_cnt = kRetryCnt, uint8_t rnr_retry = kRnrRetry)
    {
        axon_dev_qp_attr_t a;
        int mask = rts_attrs(q.type, sq_psn, timeout, retry_cnt, rnr_retry, &a);
        return axon_dev_modify_qp(q.qp, &a, mask);
    }

    /* Bring one QP up to RTS towards (dest_qpn, dgid). */
    int up(const Qp &q, uint32_t dest_qpn, const axon_dev_gid_t &dgid, uint32_t rq_psn,
           uint32_t sq_psn, uint8_t timeout = kTimeout, uint8_t retry_cnt = kRetryCnt,
           uint8_t rnr_retry = kRnrRetry, uint8_t min_rnr_timer = kMinRnrTimer)
    {
        int ret = to_init(q);
        if (ret == 0) ret = to_rtr(q, dest_qpn, dgid, rq_psn, min_rnr_timer);
        if (ret == 0) ret = to_rts(q, sq_psn, timeout, retry_cnt, rnr_retry);
        return ret;
    }

    /* Connect a and b (both on this device) and bring both to RTS. */
    int connect(const Qp &a, const Qp &b)
    {
        int ret = up(a, b.qpn(), gid, kPsnB, kPsnA);
        if (ret == 0) ret = up(b, a.qpn(), gid, kPsnA, kPsnB);
        return ret;
    }

    /* ------------------------------------------------ attribute sets (data for the state suite too) */

    static int init_attrs(axon_dev_qp_type_t type, unsigned access, axon_dev_qp_attr_t *a)
    {
        memset(a, 0, sizeof(*a));
        a->qp_state        = AXON_DEV_QPS_INIT;
        a->pkey_index      = 0;
        a->port_num        = 1;
        a->qp_access_flags = access;
        a->qkey            = kQkey;
        return init_required(type);
    }

    static int rtr_attrs(axon_dev_qp_type_t type, uint32_t dest_qpn, const axon_dev_gid_t &dgid,
                         uint32_t rq_psn, uint8_t min_rnr_timer, axon_dev_mtu_t mtu,
                         axon_dev_qp_attr_t *a)
    {
        memset(a, 0, sizeof(*a));
        a->qp_state           = AXON_DEV_QPS_RTR;
        a->path_mtu           = mtu;
        a->dest_qp_num        = dest_qpn;
        a->rq_psn             = rq_psn;
        a->max_dest_rd_atomic = kRdAtomic;
        a->min_rnr_timer      = min_rnr_timer;
        fill_ah_attr(&a->ah_attr, dgid);
        return rtr_required(type);
    }

    static int rts_attrs(axon_dev_qp_type_t type, uint32_t sq_psn, uint8_t timeout,
                         uint8_t retry_cnt, uint8_t rnr_retry, axon_dev_qp_attr_t *a)
    {
        memset(a, 0, sizeof(*a));
        a->qp_state      = AXON_DEV_QPS_RTS;
        a->sq_psn        = sq_psn;
        a->timeout       = timeout;
        a->retry_cnt     = retry_cnt;
        a->rnr_retry     = rnr_retry;
        a->max_rd_atomic = kRdAtomic;
        return rts_required(type);
    }

    /*
     * The required masks of seed §4.5 per QP type (kResetToInit... below:
     * RC and UC are the connected types, UD the unconnected one).
     */
    static int init_required(axon_dev_qp_type_t type);
    static int rtr_required(axon_dev_qp_type_t type);
    static int rts_required(axon_dev_qp_type_t type);

private:
    std::vector<axon_dev_qp_t *>           qps_;
    std::vector<axon_dev_ah_t *>           ahs_;
    std::vector<axon_dev_srq_t *>          srqs_;
    std::vector<axon_dev_cq_t *>           cqs_;
    std::vector<axon_dev_comp_channel_t *> channels_;
    std::vector<Buf>                       bufs_;
};

/* ---------------------------------------------------------------- the §4.5 masks */

/*
 * Required and optional attributes of each seed §4.5 transition, per type,
 * read literally from the seed's groups: "All QPs", "Connected QPs only"
 * (RC and UC: both are connected services) and "Unconnected QPs only"
 * (UD). So UC takes the RC-only looking attributes too (responder
 * resources, RNR timer, retry counts), and UD takes qp_access_flags at
 * RESET->INIT and path_mtu at INIT->RTR, where the kernel's per-type table
 * differs; softib follows the seed.
 */
struct TransitionMasks {
    int required;
    int optional;
};

const int kStateBit = AXON_DEV_QP_STATE;

struct SeedGroups {
    TransitionMasks all, connected, unconnected;
};

const SeedGroups kResetToInit = {
    {kStateBit | AXON_DEV_QP_PKEY_INDEX | AXON_DEV_QP_PORT | AXON_DEV_QP_ACCESS_FLAGS, 0},
    {0, 0},
    {AXON_DEV_QP_QKEY, 0},
};

const SeedGroups kInitToRtr = {
    {kStateBit | AXON_DEV_QP_PATH_MTU, AXON_DEV_QP_ACCESS_FLAGS | AXON_DEV_QP_PKEY_INDEX},
    {AXON_DEV_QP_AV | AXON_DEV_QP_DEST_QPN | AXON_DEV_QP_RQ_PSN |
     AXON_DEV_QP_MAX_DEST_RD_ATOMIC | AXON_DEV_QP_MIN_RNR_TIMER, AXON_DEV_QP_ALT_PATH},
    {0, AXON_DEV_QP_QKEY},
};

const SeedGroups kRtrToRts = {
    {kStateBit | AXON_DEV_QP_SQ_PSN, AXON_DEV_QP_ACCESS_FLAGS},
    {AXON_DEV_QP_TIMEOUT | AXON_DEV_QP_RETRY_CNT | AXON_DEV_QP_RNR_RETRY |
     AXON_DEV_QP_MAX_QP_RD_ATOMIC, AXON_DEV_QP_ALT_PATH | AXON_DEV_QP_MIN_RNR_TIMER},
    {0, AXON_DEV_QP_QKEY},
};

inline TransitionMasks seed_masks(const SeedGroups &g, axon_dev_qp_type_t type)
{
    const TransitionMasks &own = (type == AXON_DEV_QPT_UD) ? g.unconnected : g.connected;
    return {g.all.required | own.required, g.all.optional | own.optional};
}

inline TransitionMasks reset_to_init_masks(axon_dev_qp_type_t type)
{
    return seed_masks(kResetToInit, type);
}

inline TransitionMasks init_to_rtr_masks(axon_dev_qp_type_t type)
{
    return seed_masks(kInitToRtr, type);
}

inline TransitionMasks rtr_to_rts_masks(axon_dev_qp_type_t type)
{
    return seed_masks(kRtrToRts, type);
}

inline int SoftibDev::init_required(axon_dev_qp_type_t type)
{
    return reset_to_init_masks(type).required;
}

inline int SoftibDev::rtr_required(axon_dev_qp_type_t type)
{
    return init_to_rtr_masks(type).required;
}

inline int SoftibDev::rts_required(axon_dev_qp_type_t type)
{
    return rtr_to_rts_masks(type).required;
}

/* ---------------------------------------------------------------- waiting */

/*
 * Poll until n completions arrived or timeout; returns how many. A negative
 * poll_cq result fails the test and stops.
 */
inline int poll_n(axon_dev_cq_t *cq, int n, axon_dev_wc_t *wc, double timeout = kWcTimeout)
{
    double deadline = axon_test_time() + timeout;
    int    got      = 0;

    while (got < n) {
        int ret = axon_dev_poll_cq(cq, n - got, wc + got);
        if (ret < 0) {
            ADD_FAILURE() << "poll_cq returned " << ret;
            break;
        }
        got += ret;
        if (got >= n) {
            break;
        }
        if (axon_test_time() > deadline) {
            break;
        }
        if (ret == 0) {
            usleep(50);
        }
    }
    return got;
}

inline bool poll_one(axon_dev_cq_t *cq, axon_dev_wc_t *wc, double timeout = kWcTimeout)
{
    return poll_n(cq, 1, wc, timeout) == 1;
}

/* True if no completion shows up within seconds (what arrived goes to *wc). */
inline bool no_wc(axon_dev_cq_t *cq, double seconds, axon_dev_wc_t *wc = nullptr)
{
    axon_dev_wc_t tmp;
    return poll_n(cq, 1, wc ? wc : &tmp, seconds) == 0;
}

/*
 * Wait until buf holds the pattern of seed (for writes whose requester
 * completion does not wait for the target: UC), polling cq meanwhile so a
 * device without a progress thread still progresses; cq must be one that
 * has no completion to deliver (what it returns is dropped).
 */
inline bool wait_data(const void *buf, size_t len, uint64_t seed, axon_dev_cq_t *cq,
                      double timeout = kWcTimeout)
{
    double deadline = axon_test_time() + timeout;
    while (axon_test_check(buf, len, seed) != -1) {
        axon_dev_wc_t wc;
        if (axon_test_time() > deadline) {
            return false;
        }
        /* cq must have nothing else to deliver: what it returns is dropped */
        if (axon_dev_poll_cq(cq, 1, &wc) < 0) {
            return false;
        }
        usleep(100);
    }
    return true;
}

/* Wait for the fd to become readable; true if it did within timeout. */
inline bool fd_readable(int fd, double timeout)
{
    struct pollfd pfd = {fd, POLLIN, 0};
    return poll(&pfd, 1, (int)(timeout * 1000)) == 1;
}

inline void set_nonblock(int fd)
{
    int flags = fcntl(fd, F_GETFL);
    ASSERT_GE(flags, 0);
    ASSERT_EQ(0, fcntl(fd, F_SETFL, flags | O_NONBLOCK));
}

/*
 * Wait up to timeout for an async event of type; other events are
 * acknowledged and recorded in *others (if given). The async fd must be
 * non-blocking. True if found (the event is acknowledged, copied to *ev).
 */
inline bool wait_async(axon_dev_context_t *ctx, axon_dev_event_type_t type,
                       axon_dev_async_event_t *ev, double timeout = kWcTimeout,
                       std::vector<axon_dev_event_type_t> *others = nullptr)
{
    double deadline = axon_test_time() + timeout;

    for (;;) {
        axon_dev_async_event_t e;
        int ret = axon_dev_get_async_event(ctx, &e);
        if (ret == 0) {
            axon_dev_ack_async_event(ctx, &e);
            if (e.event_type == type) {
                *ev = e;
                return true;
            }
            if (others) {
                others->push_back(e.event_type);
            }
            continue;
        }
        if (ret != EAGAIN) {
            ADD_FAILURE() << "get_async_event returned " << ret;
            return false;
        }
        double left = deadline - axon_test_time();
        if (left <= 0) {
            return false;
        }
        fd_readable(ctx->async_fd, left < 0.05 ? left : 0.05);
    }
}

/* Post one receive of len bytes at addr. */
inline int post_recv(axon_dev_qp_t *qp, uint64_t wr_id, void *addr, uint32_t len, uint32_t lkey)
{
    axon_dev_sge_t      sge = {(uintptr_t)addr, len, lkey};
    axon_dev_recv_wr_t  wr;
    axon_dev_recv_wr_t *bad = nullptr;

    memset(&wr, 0, sizeof(wr));
    wr.wr_id   = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = (len > 0) ? 1 : 0;
    return axon_dev_post_recv(qp, &wr, &bad);
}

inline int post_srq_recv(axon_dev_srq_t *srq, uint64_t wr_id, void *addr, uint32_t len,
                         uint32_t lkey)
{
    axon_dev_sge_t      sge = {(uintptr_t)addr, len, lkey};
    axon_dev_recv_wr_t  wr;
    axon_dev_recv_wr_t *bad = nullptr;

    memset(&wr, 0, sizeof(wr));
    wr.wr_id   = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    return axon_dev_post_srq_recv(srq, &wr, &bad);
}

/* Post one send WR (see make_wr); returns post_send's result. */
inline int post_one(axon_dev_qp_t *qp, axon_dev_send_wr_t *wr)
{
    axon_dev_send_wr_t *bad = nullptr;
    return axon_dev_post_send(qp, wr, &bad);
}

inline int post_send_op(axon_dev_qp_t *qp, uint64_t wr_id, axon_dev_wr_opcode_t opcode,
                        void *addr, uint32_t len, uint32_t lkey,
                        unsigned flags = AXON_DEV_SEND_SIGNALED)
{
    axon_dev_send_wr_t wr;
    axon_dev_sge_t     sge;
    make_wr(&wr, &sge, wr_id, opcode, addr, len, lkey, flags);
    return post_one(qp, &wr);
}

/* A UD send of len bytes at addr to remote_qpn (0xffffff: ah's group) through ah. */
inline int post_ud_send(axon_dev_qp_t *qp, uint64_t wr_id, void *addr, uint32_t len,
                        uint32_t lkey, axon_dev_ah_t *ah, uint32_t remote_qpn, uint32_t qkey,
                        unsigned flags = AXON_DEV_SEND_SIGNALED)
{
    axon_dev_send_wr_t wr;
    axon_dev_sge_t     sge;
    make_wr(&wr, &sge, wr_id, AXON_DEV_WR_SEND, addr, len, lkey, flags);
    wr.wr.ud.ah          = ah;
    wr.wr.ud.remote_qpn  = remote_qpn;
    wr.wr.ud.remote_qkey = qkey;
    return post_one(qp, &wr);
}

inline int post_rdma(axon_dev_qp_t *qp, uint64_t wr_id, axon_dev_wr_opcode_t opcode,
                     void *addr, uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey,
                     unsigned flags = AXON_DEV_SEND_SIGNALED)
{
    axon_dev_send_wr_t wr;
    axon_dev_sge_t     sge;
    make_wr(&wr, &sge, wr_id, opcode, addr, len, lkey, flags);
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey        = rkey;
    return post_one(qp, &wr);
}

inline int post_atomic(axon_dev_qp_t *qp, uint64_t wr_id, axon_dev_wr_opcode_t opcode,
                       void *result, uint32_t lkey, uint64_t raddr, uint32_t rkey,
                       uint64_t compare_add, uint64_t swap = 0,
                       unsigned flags = AXON_DEV_SEND_SIGNALED, uint32_t len = 8)
{
    axon_dev_send_wr_t wr;
    axon_dev_sge_t     sge;
    make_wr(&wr, &sge, wr_id, opcode, result, len, lkey, flags);
    wr.wr.atomic.remote_addr = raddr;
    wr.wr.atomic.rkey        = rkey;
    wr.wr.atomic.compare_add = compare_add;
    wr.wr.atomic.swap        = swap;
    return post_one(qp, &wr);
}

/* qp's state as query_qp reports it (-1 if query_qp failed). */
inline int query_state(axon_dev_qp_t *qp)
{
    axon_dev_qp_attr_t      a;
    axon_dev_qp_init_attr_t init;
    memset(&a, 0, sizeof(a));
    if (axon_dev_query_qp(qp, &a, AXON_DEV_QP_STATE, &init) != 0) {
        return -1;
    }
    return a.qp_state;
}

/*
 * Fixture: one softib device per test with the default configuration
 * (AXON_SOFTIB_* cleared first, then whatever the test sets in env_ before
 * calling open_dev()).
 */
class SoftibTest : public ::testing::Test {
protected:
    EnvGuard  env_;
    SoftibDev dev_;

    void SetUp() override
    {
        static const char *const vars[] = {
            "AXON_SOFTIB_DEVICES", "AXON_SOFTIB_WIRE", "AXON_SOFTIB_ADDR",
            "AXON_SOFTIB_MTU", "AXON_SOFTIB_MAX_INLINE", "AXON_SOFTIB_LOSS",
            "AXON_SOFTIB_DUP", "AXON_SOFTIB_REORDER", "AXON_SOFTIB_SEED",
            "AXON_SOFTIB_PROGRESS_THREAD", "AXON_SOFTIB_CAP_MASK", "AXON_SOFTIB_DC_MAX_DCR",
            "AXON_SOFTIB_ATOMIC_CAP",
        };
        for (const char *v : vars) {
            env_.set(v, nullptr);
        }
    }

    /* Open softib0 (call after setting env_); fails the test if it cannot. */
    void open_dev()
    {
        int ret = dev_.open();
        ASSERT_EQ(0, ret) << "cannot open softib0: " << strerror(ret);
        set_nonblock(dev_.ctx->async_fd);
    }

    void TearDown() override { dev_.close(); }

    /* Two QPs of type on the device, connected to each other, in RTS. */
    void make_pair(axon_dev_qp_type_t type, Qp *a, Qp *b, int sq_sig_all = 1,
                   uint32_t max_inline = 0)
    {
        ASSERT_EQ(0, dev_.qp(a, type, sq_sig_all, nullptr, max_inline));
        ASSERT_EQ(0, dev_.qp(b, type, sq_sig_all, nullptr, max_inline));
        ASSERT_EQ(0, dev_.connect(*a, *b));
    }
};

/* Receive one struct the peer sent as a blob (axon_test_send_blob); 0 or -1 */
template <typename T>
int recv_struct(int fd, T *out)
{
    void  *blob = nullptr;
    size_t len  = 0;
    if (axon_test_recv_blob(fd, &blob, &len) != 0) {
        return -1;
    }
    int ret = (len == sizeof(*out)) ? 0 : -1;
    if (ret == 0) {
        memcpy(out, blob, sizeof(*out));
    }
    free(blob);
    return ret;
}

/* The wire of a test with a peer process: the test's own side and the peer's */
struct SoftibWire {
    const char *name;
    const char *wire;     /* AXON_SOFTIB_WIRE or nullptr */
    const char *addr[2];  /* AXON_SOFTIB_ADDR of the test process, of the peer */
};

inline void PrintTo(const SoftibWire &c, std::ostream *os)
{
    *os << c.name;
}

/* Shm (one address) and UDP between two addresses (different GIDs: auto mode picks UDP) */
const SoftibWire kSoftibPeerWires[] = {
    {"Shm", nullptr, {nullptr, nullptr}},
    {"UdpTwoAddresses", nullptr, {"127.0.0.3", "127.0.0.2"}},
};

/* Configure one side of w (0: the test process, 1: the peer) before it opens its device */
inline void softib_wire_env(const SoftibWire &w, int side, EnvGuard *env)
{
    env->set("AXON_SOFTIB_WIRE", w.wire);
    env->set("AXON_SOFTIB_ADDR", w.addr[side]);
}

inline std::string softib_wire_name(const ::testing::TestParamInfo<SoftibWire> &info)
{
    return info.param.name;
}

/* Base's tests, parameterized by Param, that spawn a peer process: killed at teardown. */
template <class Base, class Param>
class SoftibWithPeer : public Base, public ::testing::WithParamInterface<Param> {
protected:
    axon_test_peer_t peer_;
    bool             spawned_ = false;

    void TearDown() override
    {
        if (spawned_) {
            axon_test_peer_kill(&peer_);
        }
        Base::TearDown();
    }
};

/*
 * Base's tests with up to N peer processes: spawn() starts the next one
 * (a test may also spawn into peers_ itself and count it in npeers_); a
 * failed test may leave peers running, so teardown kills and reaps them.
 */
template <class Base, int N = 2>
class SoftibWithPeers : public Base {
protected:
    axon_test_peer_t peers_[N];
    int              npeers_ = 0;

    void TearDown() override
    {
        for (int i = 0; i < npeers_; ++i) {
            axon_test_peer_kill(&peers_[i]);
        }
        Base::TearDown();
    }

    axon_test_peer_t *spawn(axon_test_peer_fn_t fn, void *arg, double timeout)
    {
        axon_test_peer_t *p = &peers_[npeers_++];
        EXPECT_EQ(0, axon_test_peer_spawn(p, fn, arg, timeout));
        return p;
    }
};

}  // namespace

#endif
