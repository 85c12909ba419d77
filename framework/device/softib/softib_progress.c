/*
 * Engine progress: packets from the wire to the responder and completer,
 * then, for each QP on the active list (softib.h), its timers, read
 * responses and requests; a QP left waiting for a timer only waits on the
 * timed list, one with nothing to do leaves.
 *
 * It runs from the consumer's calls (poll_cq, posts, modify_qp, waits for
 * events) and, with AXON_SOFTIB_PROGRESS_THREAD, from a thread per device
 * that sleeps on the wire's fd until a packet or the nearest timer, so
 * one-sided operations against a process that never calls in complete.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include "log.h"
#include "softib_pkt.h"

#define SOFTIB_RX_BUDGET     256
/* Sleep at most this long when work waits on something without a timer */
#define SOFTIB_RETRY_NS      50000ull     /* a full wire */
/* The progress thread leaves the engine to a consumer that called in within this */
#define SOFTIB_CONSUMER_IDLE_NS 1000000ull
/* Reruns of the requesters per pass for cross-channel chains; more wait a pass */
#define SOFTIB_XCHAN_ROUNDS  8

static void softib_dispatch(softib_dev_t *dev, const uint8_t *buf, size_t len,
                            const axon_dev_gid_t *src_gid)
{
    softib_pkt_t pkt;
    softib_qp_t *qp;

    if (softib_pkt_parse(buf, len, &pkt)) {
        return;
    }
    qp = softib_qp_lookup(dev, pkt.dest_qpn);
    if (qp == NULL) {
        axon_trace("softib: %s packet for unknown QPN 0x%x dropped", pkt.info->name,
                   pkt.dest_qpn);
        return;
    }
    if (qp->dct != NULL) {
        softib_dc_rx(dev, qp->dct, &pkt, src_gid);   /* activates the responder context */
        return;
    }
    /* an answer may open the window or finish a drain; a request may leave responses due */
    softib_qp_activate(qp);
    if (pkt.info->flags & SOFTIB_OPF_REQUEST) {
        softib_resp_rx(dev, qp, &pkt, src_gid);
    } else {
        softib_comp_rx(dev, qp, &pkt);
    }
}

/* The requester would take a WQE (or learn it must wait for an answer) */
static int softib_req_pending(const softib_qp_t *qp)
{
    if (!softib_qp_can_send(qp) || ((int)(softib_sq_limit(qp) - qp->sq_req) <= 0) ||
        qp->comp.rnr_deadline) {
        return 0;
    }
    return (qp->super.state != AXON_DEV_QPS_SQD) || ((int)(qp->sq_req - qp->sqd_tail) < 0);
}

/* Work for the next pass, timers aside */
static int softib_qp_busy_now(const softib_qp_t *qp)
{
    /* a drained, connected DCI arms its idle timer in its next pass */
    int dci_idle_due = (qp->super.qp_type == AXON_DEV_QPT_DC_INI) && qp->dc.connected &&
                       !qp->dc.idle_deadline && (qp->sq_head == qp->sq_tail) &&
                       softib_qp_can_send(qp);
    /* SQD reached: the requester reports SQ_DRAINED */
    int drained_due  = qp->sq_draining && (qp->super.state == AXON_DEV_QPS_SQD) &&
                       ((int)(qp->sq_head - qp->sqd_tail) >= 0);

    return softib_req_pending(qp) || qp->req.blocked || softib_resp_busy(qp) ||
           dci_idle_due || drained_due;
}

/* The earliest timer armed on qp (ns), 0 none */
static uint64_t softib_qp_deadline(const softib_qp_t *qp)
{
    const uint64_t t[] = {qp->comp.rto_deadline, qp->comp.rnr_deadline, qp->dc.idle_deadline,
                          qp->dc.disc_deadline};
    uint64_t first = 0;
    unsigned i;

    for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        if (t[i] && (!first || (t[i] < first))) {
            first = t[i];
        }
    }
    return first;
}

/* Nothing for a pass to do, now or on a timer: a scheduled QP is one that is not idle */
int softib_qp_idle(const softib_qp_t *qp)
{
    return !softib_qp_busy_now(qp) && !softib_qp_deadline(qp);
}

void softib_qp_timer(softib_qp_t *qp, uint64_t deadline)
{
    softib_qp_activate(qp);
    softib_timer_changed(softib_qp_dev(qp), deadline);
}

uint64_t softib_qp_visits(axon_dev_context_t *ctx)
{
    softib_dev_t *dev = softib_dev(ctx);
    uint64_t visits;

    pthread_mutex_lock(&dev->lock);
    visits = dev->qp_visits;
    pthread_mutex_unlock(&dev->lock);
    return visits;
}

/* Timed QPs whose timer is due join the active ones; timed_due moves to the next timer */
static void softib_progress_timed(softib_dev_t *dev, uint64_t now)
{
    axon_list_link_t *link = dev->timed_list.next;
    softib_qp_t *qp;
    uint64_t due;

    if (now < dev->timed_due) {
        return;
    }
    dev->timed_due = UINT64_MAX;
    while (link != &dev->timed_list) {
        qp   = axon_container_of(link, softib_qp_t, sched_link);
        link = link->next;
        dev->qp_visits++;
        due  = softib_qp_deadline(qp);
        if ((due == 0) || (due <= now)) {
            softib_qp_activate(qp);   /* due, or its timers went (a reset): a pass sorts it */
        } else if (due < dev->timed_due) {
            dev->timed_due = due;
        }
    }
}

/*
 * The active QPs, and those that become active meanwhile (appended behind:
 * an ENABLE's target runs in the same pass). A visited QP left waiting for
 * a timer only moves to the timed list, one with nothing left goes; only
 * this loop and destroy take QPs off the active list.
 */
static void softib_progress_active(softib_dev_t *dev, uint64_t now)
{
    axon_list_link_t *link;
    softib_qp_t *qp;
    uint64_t due;

    softib_progress_timed(dev, now);
    link = dev->active_list.next;
    while (link != &dev->active_list) {
        qp = axon_container_of(link, softib_qp_t, sched_link);
        dev->qp_visits++;
        softib_comp_timers(qp, now);
        softib_resp_progress(qp);
        softib_req_progress(qp);
        link = link->next;
        if (softib_qp_busy_now(qp)) {
            continue;
        }
        softib_qp_deactivate(qp);
        if ((due = softib_qp_deadline(qp)) != 0) {
            qp->sched = SOFTIB_QP_TIMED;
            axon_list_add_tail(&dev->timed_list, &qp->sched_link);
            if (due < dev->timed_due) {
                dev->timed_due = due;
            }
        }
    }
}

static void softib_progress_pass(softib_dev_t *dev, uint64_t now)
{
    axon_dev_gid_t src_gid;
    const uint8_t *buf;
    softib_qp_t *qp;
    ssize_t len;
    int i;

    dev->pass_ns = now;
    softib_wire_progress(dev->wire, now);
    for (i = 0; i < SOFTIB_RX_BUDGET; i++) {
        len = softib_wire_recv(dev->wire, dev->rx_buf, &buf, &src_gid);
        if (len <= 0) {
            break;
        }
        softib_dispatch(dev, buf, (size_t)len, &src_gid);   /* in place when on the ring */
        softib_wire_recv_done(dev->wire);
    }
    softib_progress_active(dev, now);
    /* cross-channel: a WAIT's CQ grew or a queue was enabled during the pass (a WAIT
     * holds an unsent WQE, an ENABLE activates its target: both are on the list) */
    for (i = 0; dev->xchan_kick && (i < SOFTIB_XCHAN_ROUNDS); i++) {
        dev->xchan_kick = 0;
        axon_list_for_each(qp, &dev->active_list, sched_link) {
            dev->qp_visits++;
            softib_req_progress(qp);
        }
    }
    /* one coalesced ACK per QP and pass, behind the read responses just sent */
    softib_resp_flush_acks(dev);
    if (dev->cq_overrun) {
        softib_qp_cq_overrun(dev);
    }
}

void softib_progress(softib_dev_t *dev)
{
    /* The consumer calls in: the progress thread stays away while it keeps doing so */
    dev->consumer_ns = axon_sys_time_ns();
    softib_progress_pass(dev, dev->consumer_ns);
}

uint64_t softib_next_deadline(softib_dev_t *dev)
{
    uint64_t deadline = UINT64_MAX, now = 0;
    softib_qp_t *qp;

#define EARLIER(_t) if ((_t) && ((_t) < deadline)) { deadline = (_t); }
    if (dev->xchan_kick || dev->cq_overrun) {
        now = axon_sys_time_ns();
        EARLIER(now);
    }
    /* a timed QP's timers are due at timed_due at the earliest */
    EARLIER(dev->timed_due);
    axon_list_for_each(qp, &dev->active_list, sched_link) {
        EARLIER(softib_qp_deadline(qp));
        if (qp->req.blocked || softib_resp_busy(qp)) {
            now = now ? now : axon_sys_time_ns();
            EARLIER(now + SOFTIB_RETRY_NS);
        }
    }
    EARLIER(softib_wire_next_due_ns(dev->wire));
#undef EARLIER
    return deadline;
}

void softib_timer_changed(softib_dev_t *dev, uint64_t deadline)
{
    uint64_t one = 1;

    /* The sleeping thread's timeout is stale only if the new deadline is earlier */
    if (dev->thread_started && (deadline < dev->thread_deadline)) {
        dev->thread_deadline = deadline;
        if (write(dev->wake_fd, &one, sizeof(one)) < 0) {
            axon_debug("softib: waking the progress thread: %s", strerror(errno));
        }
    }
}

/* Sleep on fds until readable or the deadline (ns, UINT64_MAX = none) */
static void softib_sleep(struct pollfd *fds, nfds_t nfds, uint64_t deadline)
{
    struct timespec ts, *tsp = NULL;
    uint64_t now, ns;

    if (deadline != UINT64_MAX) {
        now      = axon_sys_time_ns();
        ns       = (deadline > now) ? deadline - now : 0;
        ts.tv_sec  = (time_t)(ns / 1000000000ull);
        ts.tv_nsec = (long)(ns % 1000000000ull);
        tsp      = &ts;
    }
    ppoll(fds, nfds, tsp, NULL);
}

static void softib_thread_drain(softib_dev_t *dev)
{
    uint64_t value;

    if (read(dev->wake_fd, &value, sizeof(value)) < 0) {
        /* nothing to drain: woken by the wire or the timeout */
    }
}

/*
 * The thread progresses the engine only while the consumer does not: a
 * consumer that polls sees every packet at once, and a thread woken by the
 * doorbell per packet would cost a system call on the sender's side and a
 * context switch (and the lock) on ours. So while the consumer called in
 * within SOFTIB_CONSUMER_IDLE_NS the thread sleeps, doorbell unarmed, until
 * that much time passed since the last call; then it takes over and sleeps
 * on the wire's fd until a packet or the nearest timer.
 */
static void *softib_thread_main(void *arg)
{
    softib_dev_t *dev = arg;
    struct pollfd fds[2];
    uint64_t deadline, now;

    fds[0].fd     = dev->wake_fd;
    fds[0].events = POLLIN;
    fds[1].fd     = softib_wire_fd(dev->wire);
    fds[1].events = POLLIN;
    pthread_mutex_lock(&dev->lock);
    while (!dev->stop) {
        now = axon_sys_time_ns();
        if (dev->consumer_ns && ((now - dev->consumer_ns) < SOFTIB_CONSUMER_IDLE_NS)) {
            deadline             = dev->consumer_ns + SOFTIB_CONSUMER_IDLE_NS;
            dev->thread_deadline = 0;   /* timers: the consumer's calls look at them */
            pthread_mutex_unlock(&dev->lock);
            softib_sleep(fds, 1, deadline);
            pthread_mutex_lock(&dev->lock);
            softib_thread_drain(dev);
            continue;
        }
        dev->consumer_ns = 0;
        softib_progress_pass(dev, now);
        deadline = softib_next_deadline(dev);
        if (softib_wire_arm(dev->wire)) {
            /* packets already waiting: go again, but let the consumer have the lock */
            pthread_mutex_unlock(&dev->lock);
            sched_yield();
            pthread_mutex_lock(&dev->lock);
            softib_wire_disarm(dev->wire);
            continue;
        }
        dev->thread_deadline = deadline;
        pthread_mutex_unlock(&dev->lock);
        softib_sleep(fds, 2, deadline);
        pthread_mutex_lock(&dev->lock);
        dev->thread_deadline = 0;
        softib_wire_disarm(dev->wire);
        softib_thread_drain(dev);
    }
    pthread_mutex_unlock(&dev->lock);
    return NULL;
}

/* A consumer about to block: the thread takes over now, not when the idle time ran out */
static void softib_thread_takeover(softib_dev_t *dev)
{
    uint64_t one = 1;
    int wake;

    pthread_mutex_lock(&dev->lock);
    wake             = (dev->consumer_ns != 0);
    dev->consumer_ns = 0;
    pthread_mutex_unlock(&dev->lock);
    if (wake && (write(dev->wake_fd, &one, sizeof(one)) < 0)) {
        axon_debug("softib: waking the progress thread: %s", strerror(errno));
    }
}

int softib_thread_start(softib_dev_t *dev)
{
    int ret;

    dev->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (dev->wake_fd < 0) {
        ret = errno;
        axon_error("softib: eventfd for the progress thread of %s: %s", dev->super.name,
                   strerror(ret));
        return ret;
    }
    dev->stop           = 0;
    dev->thread_started = 1;
    ret = pthread_create(&dev->thread, NULL, softib_thread_main, dev);
    if (ret) {
        axon_error("softib: cannot start the progress thread of %s: %s", dev->super.name,
                   strerror(ret));
        dev->thread_started = 0;
        close(dev->wake_fd);
        dev->wake_fd = -1;
        return ret;
    }
    return 0;
}

void softib_thread_stop(softib_dev_t *dev)
{
    uint64_t one = 1;

    if (!dev->thread_started) {
        return;
    }
    pthread_mutex_lock(&dev->lock);
    dev->stop = 1;
    pthread_mutex_unlock(&dev->lock);
    if (write(dev->wake_fd, &one, sizeof(one)) < 0) {
        axon_debug("softib: waking the progress thread: %s", strerror(errno));
    }
    pthread_join(dev->thread, NULL);
    dev->thread_started = 0;
    close(dev->wake_fd);
    dev->wake_fd = -1;
}

static int softib_fd_ready(int fd)
{
    struct pollfd p = {fd, POLLIN, 0};

    return poll(&p, 1, 0) > 0;
}

int softib_wait_fd(softib_dev_t *dev, int fd)
{
    int nonblock = fcntl(fd, F_GETFL) & O_NONBLOCK;
    struct pollfd fds[2];
    uint64_t deadline;
    int armed;

    for (;;) {
        if (softib_fd_ready(fd)) {
            return 0;
        }
        if (dev->thread_started) {
            if (nonblock) {
                return EAGAIN;
            }
            softib_thread_takeover(dev);
            fds[0].fd     = fd;
            fds[0].events = POLLIN;
            softib_sleep(fds, 1, UINT64_MAX);   /* the thread does the progress */
            continue;
        }
        /* No thread: this caller progresses the engine while it waits */
        pthread_mutex_lock(&dev->lock);
        softib_progress(dev);
        pthread_mutex_unlock(&dev->lock);
        if (softib_fd_ready(fd)) {
            return 0;
        }
        if (nonblock) {
            return EAGAIN;
        }
        pthread_mutex_lock(&dev->lock);
        deadline = softib_next_deadline(dev);
        armed    = softib_wire_arm(dev->wire);
        pthread_mutex_unlock(&dev->lock);
        if (!armed) {
            fds[0].fd     = fd;
            fds[0].events = POLLIN;
            fds[1].fd     = softib_wire_fd(dev->wire);
            fds[1].events = POLLIN;
            softib_sleep(fds, 2, deadline);
        }
        pthread_mutex_lock(&dev->lock);
        softib_wire_disarm(dev->wire);
        pthread_mutex_unlock(&dev->lock);
    }
}
