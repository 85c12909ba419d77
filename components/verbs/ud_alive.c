/*
 * ud alive QP: answers liveness probes while the worker does not progress.
 *
 * ud acknowledges from progress only, so a worker that computes for longer
 * than AXON_UD_TIMEOUT between progress calls would look dead to peers
 * waiting for its acks. Each iface has a second UD QP served by a thread of
 * its own: a peer probes it when its packets go unacknowledged, and the
 * answer keeps the connection up while the worker is busy (ud_reliab.c).
 * A dead process answers nothing, so its peers still fail it in time.
 *
 * The thread owns the QP, its CQ, its buffers and address handles; of the
 * iface it reads only what open set and nothing changes (device, uuid,
 * name). The worker's fast path takes no lock for it. The thread sleeps on
 * the CQ's completion channel, or polls every AXON_UD_ALIVE_POLL_MS where
 * the device has none.
 */
#define _GNU_SOURCE  /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>
#include "ud.h"

/* Each buffer: the GRH area, a header and the larger payload; answers use the same size. */
#define AXON_UD_ALIVE_BUF_LEN \
    (AXON_UD_GRH_LEN + sizeof(axon_ud_hdr_t) + sizeof(axon_ud_probe_t))
/* wr_id of receives has this bit; answers are plain buffer addresses */
#define AXON_UD_ALIVE_WR_RECV 1ull

static void axon_ud_alive_post_recv(axon_ud_iface_t *iface, void *buf)
{
    axon_ud_alive_t *alive = &iface->alive;
    axon_dev_recv_wr_t wr, *bad;
    axon_dev_sge_t sge;
    int ret;

    sge.addr   = (uintptr_t)buf;
    sge.length = (uint32_t)AXON_UD_ALIVE_BUF_LEN;
    sge.lkey   = axon_verbs_bufpool_lkey(&alive->bufs);
    wr.wr_id   = (uintptr_t)buf | AXON_UD_ALIVE_WR_RECV;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.next    = NULL;
    ret = axon_dev_post_recv(alive->qp, &wr, &bad);
    if (ret != 0) {
        axon_error("%s: alive QP: post_recv: %s", iface->name, strerror(ret));
        axon_verbs_bufpool_put(&alive->bufs, buf);
    }
}

/* An address handle to the prober's port: kept for the next probes, the oldest replaced. */
static axon_dev_ah_t *axon_ud_alive_ah(axon_ud_iface_t *iface, const axon_verbs_dev_addr_t *addr)
{
    axon_ud_alive_t *alive = &iface->alive;
    unsigned i, slot;
    int ret;

    for (i = 0; i < AXON_UD_ALIVE_AHS; ++i) {
        if ((alive->ahs[i].ah != NULL) && (alive->ahs[i].addr.lid == addr->lid) &&
            !memcmp(alive->ahs[i].addr.gid, addr->gid, sizeof(addr->gid))) {
            return alive->ahs[i].ah;
        }
    }
    slot = alive->next_ah;
    alive->next_ah = (slot + 1) % AXON_UD_ALIVE_AHS;
    if (alive->ahs[slot].ah != NULL) {
        if ((ret = axon_dev_destroy_ah(alive->ahs[slot].ah)) != 0) {
            axon_warn("%s: alive QP: destroy_ah: %s", iface->name, strerror(ret));
        }
        alive->ahs[slot].ah = NULL;
    }
    if (axon_verbs_ah_create(&iface->dev, addr, &alive->ahs[slot].ah) != AXON_OK) {
        return NULL;
    }
    alive->ahs[slot].addr = *addr;
    return alive->ahs[slot].ah;
}

/* A probe in buf (len bytes with the GRH area): answer it if it means us. */
static void axon_ud_alive_answer(axon_ud_iface_t *iface, const uint8_t *buf, uint32_t len)
{
    axon_ud_alive_t *alive   = &iface->alive;
    const axon_ud_hdr_t *hdr = (const axon_ud_hdr_t *)(buf + AXON_UD_GRH_LEN);
    axon_verbs_dev_addr_t addr;
    axon_ud_alive_msg_t msg;
    axon_ud_probe_t probe;
    axon_ud_hdr_t *out;
    axon_dev_ah_t *ah;
    uint8_t *obuf;
    int ret;

    if ((axon_ud_pkt_payload(len, hdr) < 0) || (hdr->type != AXON_UD_PKT_PROBE)) {
        axon_debug("%s: alive QP: dropped a packet (type %u, %u bytes)", iface->name,
                   (len >= AXON_UD_GRH_LEN + sizeof(*hdr)) ? hdr->type : 0u, len);
        return;
    }
    memcpy(&probe, hdr + 1, sizeof(probe));
    if (probe.dst_uuid != iface->worker_uuid) {
        return;   /* meant for a worker that had this QP number before */
    }
    axon_verbs_dev_addr_unpack(probe.dev_addr, &addr);
    if ((probe.src_qpn == 0) || (probe.src_qpn > AXON_VERBS_PSN_MASK) ||
        !axon_verbs_dev_addr_reachable(&iface->dev, &addr)) {
        axon_debug("%s: alive QP: a probe we cannot answer (qpn 0x%x)", iface->name,
                   probe.src_qpn);
        return;
    }
    if ((alive->tx_posted >= AXON_UD_ALIVE_TX) ||
        ((obuf = axon_verbs_bufpool_get(&alive->bufs)) == NULL)) {
        return;   /* answers in flight already: the prober asks again */
    }
    ah = axon_ud_alive_ah(iface, &addr);
    if (ah == NULL) {
        axon_verbs_bufpool_put(&alive->bufs, obuf);
        return;
    }
    out = (axon_ud_hdr_t *)obuf;
    memset(out, 0, sizeof(*out));
    out->dst_id  = hdr->src_id;
    out->src_id  = hdr->dst_id;
    out->type    = AXON_UD_PKT_ALIVE;
    msg.src_uuid = iface->worker_uuid;
    memcpy(out + 1, &msg, sizeof(msg));

    ret = axon_ud_post_datagram(alive->qp, (uintptr_t)obuf, obuf,
                                (uint32_t)(sizeof(*out) + sizeof(msg)),
                                axon_verbs_bufpool_lkey(&alive->bufs), 0, ah, probe.src_qpn);
    if (ret != 0) {
        axon_error("%s: alive QP: post_send to qpn 0x%x: %s", iface->name, probe.src_qpn,
                   strerror(ret));
        axon_verbs_bufpool_put(&alive->bufs, obuf);
        return;
    }
    ++alive->tx_posted;
    ++alive->answered;
}

/* Every completion waiting: probes answered and their buffers posted again. */
static void axon_ud_alive_drain(axon_ud_iface_t *iface)
{
    axon_ud_alive_t *alive = &iface->alive;
    axon_dev_wc_t wcs[AXON_UD_ALIVE_RX];
    uint8_t *buf;
    int n, i;

    while ((n = axon_dev_poll_cq(alive->cq, AXON_UD_ALIVE_RX, wcs)) > 0) {
        for (i = 0; i < n; ++i) {
            if (!(wcs[i].wr_id & AXON_UD_ALIVE_WR_RECV)) {
                --alive->tx_posted;
                axon_verbs_bufpool_put(&alive->bufs, (void *)(uintptr_t)wcs[i].wr_id);
                continue;
            }
            buf = (uint8_t *)(uintptr_t)(wcs[i].wr_id & ~AXON_UD_ALIVE_WR_RECV);
            if (wcs[i].status == AXON_DEV_WC_SUCCESS) {
                axon_ud_alive_answer(iface, buf, wcs[i].byte_len);
            } else if (wcs[i].status == AXON_DEV_WC_WR_FLUSH_ERR) {
                axon_verbs_bufpool_put(&alive->bufs, buf);
                continue;
            }
            axon_ud_alive_post_recv(iface, buf);
        }
    }
    if (n < 0) {
        axon_error("%s: alive QP: poll_cq: %s", iface->name, strerror(-n));
    }
}

static void *axon_ud_alive_thread(void *arg)
{
    axon_ud_iface_t *iface = arg;
    axon_ud_alive_t *alive = &iface->alive;
    struct pollfd fds[2];
    axon_dev_cq_t *cq;
    void *cq_ctx;

    fds[0].fd     = alive->wake[0];
    fds[0].events = POLLIN;
    fds[1].fd     = (alive->channel != NULL) ? alive->channel->fd : -1;
    fds[1].events = POLLIN;
    for (;;) {
        /* Armed before draining: a completion after the drain still wakes us. */
        if ((fds[1].fd >= 0) && (axon_dev_req_notify_cq(alive->cq, 0) != 0)) {
            axon_error("%s: alive QP: req_notify_cq failed: polling instead", iface->name);
            fds[1].fd = -1;
        }
        axon_ud_alive_drain(iface);
        fds[0].revents = fds[1].revents = 0;
        if ((poll(fds, 2, (fds[1].fd >= 0) ? -1 : AXON_UD_ALIVE_POLL_MS) < 0) &&
            (errno != EINTR)) {
            axon_error("%s: alive QP: poll: %s", iface->name, strerror(errno));
            break;
        }
        if (fds[0].revents) {
            break;   /* the iface closes */
        }
        if ((fds[1].fd >= 0) && fds[1].revents &&
            (axon_dev_get_cq_event(alive->channel, &cq, &cq_ctx) == 0)) {
            axon_dev_ack_cq_events(cq, 1);
        }
    }
    return NULL;
}

axon_status_t axon_ud_alive_start(axon_ud_iface_t *iface)
{
    axon_ud_alive_t *alive = &iface->alive;
    axon_verbs_qp_params_t qp_params;
    axon_dev_qp_cap_t cap;
    axon_status_t status;
    unsigned i;
    int ret;

    if (pipe2(alive->wake, O_CLOEXEC) != 0) {
        axon_error("%s: alive QP: pipe: %s", iface->name, strerror(errno));
        alive->wake[0] = alive->wake[1] = -1;
        return AXON_ERR_IO_ERROR;
    }
    /* A device without completion channels is polled instead. */
    if (axon_dev_create_comp_channel(iface->dev.ctx, &alive->channel) != 0) {
        axon_debug("%s: alive QP: no completion channel: the thread polls every %d ms",
                   iface->name, AXON_UD_ALIVE_POLL_MS);
        alive->channel = NULL;
    }
    ret = axon_dev_create_cq(iface->dev.ctx, AXON_UD_ALIVE_RX + AXON_UD_ALIVE_TX, NULL,
                             alive->channel, 0, &alive->cq);
    if (ret != 0) {
        axon_error("%s: alive QP: create_cq: %s", iface->name, strerror(ret));
        alive->cq = NULL;
        return AXON_ERR_IO_ERROR;
    }
    status = axon_verbs_bufpool_init(&alive->bufs, &iface->dev, "ud alive",
                                     AXON_UD_ALIVE_BUF_LEN, AXON_UD_ALIVE_RX + AXON_UD_ALIVE_TX);
    if (status != AXON_OK) {
        return status;
    }
    memset(&qp_params, 0, sizeof(qp_params));
    qp_params.type        = AXON_DEV_QPT_UD;
    qp_params.send_cq     = alive->cq;
    qp_params.recv_cq     = alive->cq;
    qp_params.max_send_wr = AXON_UD_ALIVE_TX;
    qp_params.max_recv_wr = AXON_UD_ALIVE_RX;
    qp_params.qp_context  = iface;
    status = axon_verbs_qp_create(&iface->dev, &qp_params, &alive->qp, &cap);
    if (status != AXON_OK) {
        return status;
    }
    status = axon_verbs_qp_ud_up(&iface->dev, alive->qp, AXON_UD_QKEY, 0);
    if (status != AXON_OK) {
        return status;
    }
    for (i = 0; i < AXON_UD_ALIVE_RX; ++i) {
        axon_ud_alive_post_recv(iface, axon_verbs_bufpool_get(&alive->bufs));
    }
    ret = pthread_create(&alive->thread, NULL, axon_ud_alive_thread, iface);
    if (ret != 0) {
        axon_error("%s: alive QP: cannot start its thread: %s", iface->name, strerror(ret));
        return AXON_ERR_NO_RESOURCE;
    }
    alive->started = 1;
    return AXON_OK;
}

/* Stops the thread and frees what start made (also after a failed start, or none:
 * the iface sets wake[] to -1 at open). */
void axon_ud_alive_stop(axon_ud_iface_t *iface)
{
    axon_ud_alive_t *alive = &iface->alive;
    unsigned i;
    int ret;

    if (alive->started) {
        if (write(alive->wake[1], "x", 1) != 1) {
            axon_warn("%s: alive QP: cannot wake its thread: %s", iface->name,
                      strerror(errno));
        }
        pthread_join(alive->thread, NULL);
        alive->started = 0;
        axon_debug("%s: alive QP answered %llu probes", iface->name,
                   (unsigned long long)alive->answered);
    }
    if (alive->qp != NULL) {
        axon_verbs_qp_destroy(alive->qp);
        alive->qp = NULL;
    }
    for (i = 0; i < AXON_UD_ALIVE_AHS; ++i) {
        if ((alive->ahs[i].ah != NULL) && ((ret = axon_dev_destroy_ah(alive->ahs[i].ah)) != 0)) {
            axon_warn("%s: alive QP: destroy_ah: %s", iface->name, strerror(ret));
        }
        alive->ahs[i].ah = NULL;
    }
    if ((alive->cq != NULL) && ((ret = axon_dev_destroy_cq(alive->cq)) != 0)) {
        axon_warn("%s: alive QP: destroy_cq: %s", iface->name, strerror(ret));
    }
    alive->cq = NULL;
    if ((alive->channel != NULL) && ((ret = axon_dev_destroy_comp_channel(alive->channel)) != 0)) {
        axon_warn("%s: alive QP: destroy_comp_channel: %s", iface->name, strerror(ret));
    }
    alive->channel = NULL;
    if (alive->bufs.base != NULL) {
        /* The QP is gone with what it held: every buffer is free. */
        alive->bufs.num_free = alive->bufs.count;
        axon_verbs_bufpool_cleanup(&alive->bufs);
    }
    for (i = 0; i < 2; ++i) {
        if (alive->wake[i] >= 0) {
            close(alive->wake[i]);
            alive->wake[i] = -1;
        }
    }
}
