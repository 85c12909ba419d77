/*
 * ud reliability: posting sequenced packets and keeping them until acked,
 * acknowledgements (cumulative + selective), retransmission on timeout and
 * on a selective ack that shows a gap, in-order exactly-once delivery with
 * a short hold list beyond gaps, reassembly of fragments, keepalive pings,
 * goodbyes and peer failure.
 */
#include <stdlib.h>
#include <string.h>
#include "ud.h"

/* ---------------------------------------------------------------- posting */

/* Selective ack of what conn holds beyond rx_psn. */
static inline uint32_t axon_ud_rx_sack(const axon_ud_conn_t *conn)
{
    const axon_ud_desc_t *held;
    uint32_t sack = 0, off;

    for (held = conn->rx_held; held != NULL; held = held->next) {
        off = held->psn - conn->rx_psn - 1;
        if (off >= AXON_UD_SACK_BITS) {
            break;
        }
        sack |= 1u << off;
    }
    return sack;
}

/* Post one packet of desc to conn's peer; the ack fields are filled now. 0 or -1. */
static int axon_ud_post(axon_ud_conn_t *conn, axon_ud_desc_t *desc)
{
    axon_ud_iface_t *iface = axon_ud_conn_iface(conn);
    axon_ud_hdr_t *hdr     = axon_ud_desc_hdr(desc);
    int ret;

    hdr->dst_id    = conn->peer_id;
    hdr->src_id    = conn->id;
    hdr->ack       = conn->rx_psn;
    hdr->sack      = (conn->rx_held != NULL) ? axon_ud_rx_sack(conn) : 0;
    conn->ack_sent = conn->rx_psn;
    conn->flags   &= ~AXON_UD_CONN_ACK_NOW;

    ret = axon_ud_post_datagram(iface->qp, (uintptr_t)desc, hdr, desc->len,
                                axon_verbs_bufpool_lkey(&iface->tx_pool),
                                desc->len <= iface->max_inline, conn->ah->ah, conn->dest_qpn);
    if (__builtin_expect(ret != 0, 0)) {
        axon_error("%s: post_send to qpn 0x%x: %s", iface->name, conn->dest_qpn, strerror(ret));
        return -1;
    }
    ++desc->hw;
    ++iface->tx_posted;
    desc->sent_ns = iface->now_ns;
    return 0;
}

static inline int axon_ud_can_post(const axon_ud_iface_t *iface)
{
    return iface->tx_posted < iface->tx_queue_len;
}

axon_ud_desc_t *axon_ud_tx_desc_get(axon_ud_conn_t *conn)
{
    axon_ud_iface_t *iface = axon_ud_conn_iface(conn);
    axon_ud_desc_t *desc;

    desc = axon_verbs_bufpool_get(&iface->tx_pool);
    if (__builtin_expect(desc == NULL, 0)) {
        return NULL;
    }
    desc->next  = NULL;
    desc->conn  = conn;
    desc->psn   = conn->tx_psn++;
    desc->flags = AXON_UD_DESC_UNACKED;
    desc->hw    = 0;
    return desc;
}

/* Set up desc for a packet of type (len bytes with the header) owned by conn or, if NULL,
 * freed by its completion; the header is zero but its type. */
static axon_ud_hdr_t *axon_ud_tx_desc_init(axon_ud_desc_t *desc, axon_ud_conn_t *conn,
                                           uint8_t type, uint32_t len)
{
    axon_ud_hdr_t *hdr = axon_ud_desc_hdr(desc);

    desc->next  = NULL;
    desc->conn  = conn;
    desc->psn   = 0;
    desc->flags = (conn != NULL) ? AXON_UD_DESC_UNACKED : 0;
    desc->hw    = 0;
    desc->len   = len;
    memset(hdr, 0, sizeof(*hdr));
    hdr->type = type;
    return hdr;
}

/* Something became unacked: the failure clock starts now. */
static void axon_ud_tx_activate(axon_ud_conn_t *conn)
{
    axon_ud_iface_t *iface = axon_ud_conn_iface(conn);

    conn->ack_ns = axon_ud_iface_vnow(iface);
    if (!(conn->flags & AXON_UD_CONN_ON_ACTIVE)) {
        conn->flags |= AXON_UD_CONN_ON_ACTIVE;
        axon_list_add_tail(&iface->active, &conn->active_link);
    }
}

/* Post now, or mark unsent for progress to post later. */
static void axon_ud_tx_post_or_defer(axon_ud_conn_t *conn, axon_ud_desc_t *desc, int may_post)
{
    axon_ud_iface_t *iface = axon_ud_conn_iface(conn);

    if (may_post && axon_ud_can_post(iface) && (axon_ud_post(conn, desc) == 0)) {
        return;
    }
    desc->flags |= AXON_UD_DESC_UNSENT;
    ++conn->unsent;
    if (conn->peer_id != AXON_UD_ID_NONE) {
        axon_ud_conn_work(conn);
    }
}

void axon_ud_tx_send(axon_ud_conn_t *conn, axon_ud_desc_t *desc, uint8_t type, uint8_t flags,
                     uint8_t am_id, uint32_t len)
{
    axon_ud_hdr_t *hdr = axon_ud_desc_hdr(desc);

    hdr->psn      = desc->psn;
    hdr->type     = type;
    hdr->flags    = flags;
    hdr->am_id    = am_id;
    hdr->reserved = 0;
    desc->len     = len;
    if (conn->tx_head == NULL) {
        conn->tx_head = desc;
        axon_ud_tx_activate(conn);
    } else {
        conn->tx_tail->next = desc;
    }
    conn->tx_tail = desc;
    /* Behind unsent packets, or before the peer's id is known, it waits its turn. */
    axon_ud_tx_post_or_defer(conn, desc,
                             (conn->peer_id != AXON_UD_ID_NONE) && (conn->unsent == 0));
}

int axon_ud_tx_creq(axon_ud_conn_t *conn)
{
    axon_ud_iface_t *iface = axon_ud_conn_iface(conn);
    axon_ud_desc_t *desc;
    axon_ud_hdr_t *hdr;
    axon_ud_creq_t creq;

    desc = axon_verbs_bufpool_get(&iface->tx_pool);
    if (desc == NULL) {
        return -1;
    }
    /* PSN 0: reserved for it when the connection was made */
    hdr = axon_ud_tx_desc_init(desc, conn, AXON_UD_PKT_CREQ, sizeof(*hdr) + sizeof(creq));
    creq.src_uuid = iface->worker_uuid;
    creq.dst_uuid = conn->peer_uuid;
    creq.src_qpn  = iface->qp->qp_num;
    axon_verbs_dev_addr_pack(&iface->dev, creq.dev_addr);
    creq.src_alive_qpn = axon_ud_alive_qpn(iface);
    memcpy(hdr + 1, &creq, sizeof(creq));
    /* First in PSN order, even if data was queued while no buffer was free. */
    desc->next    = conn->tx_head;
    conn->tx_head = desc;
    if (conn->tx_tail == NULL) {
        conn->tx_tail = desc;
    }
    axon_ud_tx_activate(conn);
    axon_ud_tx_post_or_defer(conn, desc, 1);
    if (desc->flags & AXON_UD_DESC_UNSENT) {
        axon_ud_conn_work(conn);  /* the peer's id is unknown, but CREQ needs none */
    }
    return 0;
}

/* An unsequenced packet of type to conn's peer (it carries our receive state); 0 or -1. */
static int axon_ud_tx_unseq(axon_ud_conn_t *conn, uint8_t type)
{
    axon_ud_iface_t *iface = axon_ud_conn_iface(conn);
    axon_ud_desc_t *desc;

    if (!axon_ud_can_post(iface)) {
        return -1;
    }
    desc = axon_verbs_bufpool_get(&iface->tx_pool);
    if (desc == NULL) {
        return -1;
    }
    axon_ud_tx_desc_init(desc, NULL, type, sizeof(axon_ud_hdr_t));
    if (axon_ud_post(conn, desc) != 0) {
        axon_verbs_bufpool_put(&iface->tx_pool, desc);
        return -1;
    }
    return 0;
}

/* An ACK; 0 or -1 (try again later). */
static int axon_ud_tx_ack(axon_ud_conn_t *conn)
{
    return axon_ud_tx_unseq(conn, AXON_UD_PKT_ACK);
}

int axon_ud_tx_leave(axon_ud_conn_t *conn)
{
    return axon_ud_tx_unseq(conn, AXON_UD_PKT_LEAVE);
}

void axon_ud_tx_reset(axon_ud_conn_t *conn)
{
    axon_ud_iface_t *iface = axon_ud_conn_iface(conn);

    /* last_rx_ns is free once failed: when the last RESET went */
    if (!(conn->flags & AXON_UD_CONN_RESET_PEER) ||
        (iface->now_ns - conn->last_rx_ns < iface->retx_ns) ||
        (axon_ud_tx_unseq(conn, AXON_UD_PKT_RESET) != 0)) {
        return;
    }
    conn->last_rx_ns = iface->now_ns;
    axon_debug("%s: told peer %016llx (qpn 0x%x) its connection is failed here", iface->name,
               (unsigned long long)conn->peer_uuid, conn->dest_qpn);
}

/* Post conn's unsent packets in order while the send queue has room. */
static unsigned axon_ud_tx_post_unsent(axon_ud_conn_t *conn)
{
    axon_ud_iface_t *iface = axon_ud_conn_iface(conn);
    axon_ud_desc_t *desc;
    unsigned count = 0;

    for (desc = conn->tx_head; (desc != NULL) && (conn->unsent > 0); desc = desc->next) {
        if (!(desc->flags & AXON_UD_DESC_UNSENT)) {
            continue;
        }
        if ((conn->peer_id == AXON_UD_ID_NONE) &&
            (axon_ud_desc_hdr(desc)->type != AXON_UD_PKT_CREQ)) {
            break;
        }
        if (!axon_ud_can_post(iface) || (axon_ud_post(conn, desc) != 0)) {
            break;
        }
        desc->flags &= ~AXON_UD_DESC_UNSENT;
        --conn->unsent;
        ++count;
    }
    return count;
}

static void axon_ud_conn_linger(axon_ud_conn_t *conn)
{
    axon_ud_iface_t *iface = axon_ud_conn_iface(conn);

    if ((conn->refcnt == 0) && (conn->flags & AXON_UD_CONN_BYE_SENT) &&
        (conn->flags & AXON_UD_CONN_PEER_BYE) && (conn->tx_head == NULL) &&
        !(conn->flags & AXON_UD_CONN_LINGER)) {
        /* Both sides are done: keep answering retransmissions for a while, then free. */
        conn->flags   |= AXON_UD_CONN_LINGER;
        conn->timer_ns = iface->now_ns + iface->timeout_ns;
    }
}

unsigned axon_ud_tx_resume(axon_ud_conn_t *conn)
{
    axon_ud_desc_t *desc;
    unsigned count = 0;
    int again = 0;

    if (conn->state == AXON_UD_CONN_FAILED) {
        return 0;
    }
    if ((conn->flags & AXON_UD_CONN_NEED_CREQ) && (axon_ud_tx_creq(conn) == 0)) {
        conn->flags &= ~AXON_UD_CONN_NEED_CREQ;
    }
    if (conn->flags & AXON_UD_CONN_WANT_BYE) {
        if (conn->refcnt > 0) {
            conn->flags &= ~AXON_UD_CONN_WANT_BYE;  /* an ep came back before it went */
        } else if ((desc = axon_ud_tx_desc_get(conn)) != NULL) {
            conn->flags = (conn->flags & ~AXON_UD_CONN_WANT_BYE) | AXON_UD_CONN_BYE_SENT;
            axon_ud_tx_send(conn, desc, AXON_UD_PKT_BYE, 0, 0, sizeof(axon_ud_hdr_t));
        } else {
            again = 1;
        }
    }
    if (conn->unsent > 0) {
        count += axon_ud_tx_post_unsent(conn);
    }
    if ((conn->peer_id != AXON_UD_ID_NONE) &&
        ((conn->rx_psn != conn->ack_sent) || (conn->flags & AXON_UD_CONN_ACK_NOW))) {
        if (axon_ud_tx_ack(conn) == 0) {
            ++count;
        } else {
            again = 1;
        }
    }
    if (again || (conn->flags & AXON_UD_CONN_NEED_CREQ) ||
        ((conn->unsent > 0) && (conn->peer_id != AXON_UD_ID_NONE))) {
        axon_ud_conn_work(conn);
    }
    return count;
}

unsigned axon_ud_tx_poll(axon_ud_iface_t *iface)
{
    axon_dev_wc_t wcs[AXON_UD_TX_POLL];
    axon_ud_desc_t *desc;
    int n, i;

    n = axon_dev_poll_cq(iface->send_cq, AXON_UD_TX_POLL, wcs);
    if (n <= 0) {
        if (n < 0) {
            axon_error("%s: poll_cq (send): %s", iface->name, strerror(-n));
        }
        return 0;
    }
    for (i = 0; i < n; ++i) {
        desc = (axon_ud_desc_t *)(uintptr_t)wcs[i].wr_id;
        --iface->tx_posted;
        --desc->hw;
        if (__builtin_expect(wcs[i].status != AXON_DEV_WC_SUCCESS, 0) &&
            (wcs[i].status != AXON_DEV_WC_WR_FLUSH_ERR)) {
            /* Retransmission covers a lost send; the log says the device is unwell. */
            axon_error("%s: send completion: %s", iface->name,
                       axon_dev_wc_status_str(wcs[i].status));
        }
        if (!(desc->flags & AXON_UD_DESC_UNACKED) && (desc->hw == 0)) {
            axon_verbs_bufpool_put(&iface->tx_pool, desc);
        }
    }
    return (unsigned)n;
}

/* ---------------------------------------------------------------- acks */

static inline void axon_ud_tx_release(axon_ud_iface_t *iface, axon_ud_desc_t *desc)
{
    desc->flags &= ~AXON_UD_DESC_UNACKED;
    desc->conn   = NULL;
    if (desc->hw == 0) {
        axon_verbs_bufpool_put(&iface->tx_pool, desc);
    }
}

/* Retransmit what a selective ack shows missing below its highest bit. */
static void axon_ud_tx_fast_retx(axon_ud_conn_t *conn, uint32_t ack, uint32_t sack)
{
    axon_ud_iface_t *iface = axon_ud_conn_iface(conn);
    uint32_t highest       = 31 - (uint32_t)__builtin_clz(sack);
    uint64_t min_age       = iface->retx_ns / 4;
    axon_ud_desc_t *desc;
    uint32_t off;

    for (desc = conn->tx_head; desc != NULL; desc = desc->next) {
        off = desc->psn - ack - 1;
        if ((int32_t)off < 0) {
            continue;  /* the packet at ack itself: missing too */
        }
        if (off >= AXON_UD_SACK_BITS) {
            break;
        }
        if (sack & (1u << off)) {
            desc->flags |= AXON_UD_DESC_SACKED;
        }
    }
    for (desc = conn->tx_head; desc != NULL; desc = desc->next) {
        off = desc->psn - ack;  /* 0 = the first missing */
        if (off > highest) {
            break;
        }
        if ((desc->flags & (AXON_UD_DESC_SACKED | AXON_UD_DESC_UNSENT)) || (desc->hw > 0) ||
            (iface->now_ns - desc->sent_ns < min_age)) {
            continue;
        }
        if (!axon_ud_can_post(iface) || (axon_ud_post(conn, desc) != 0)) {
            break;
        }
    }
}

void axon_ud_tx_acked(axon_ud_conn_t *conn, uint32_t ack, uint32_t sack)
{
    axon_ud_iface_t *iface = axon_ud_conn_iface(conn);
    axon_ud_desc_t *desc;

    if (__builtin_expect(axon_ud_psn_diff(ack, conn->tx_acked) > 0, 0)) {
        if (axon_ud_psn_diff(ack, conn->tx_psn) > 0) {
            axon_debug("%s: ack %u beyond what was sent (%u)", iface->name, ack, conn->tx_psn);
            return;
        }
        while (((desc = conn->tx_head) != NULL) && (axon_ud_psn_diff(ack, desc->psn) > 0)) {
            conn->tx_head = desc->next;
            if (desc->flags & AXON_UD_DESC_UNSENT) {
                --conn->unsent;  /* a copy of it went before: nothing to post */
            }
            axon_ud_tx_release(iface, desc);
        }
        conn->tx_acked  = ack;
        conn->rto_shift = 0;
        conn->ack_ns    = iface->now_ns;
        if (conn->tx_head == NULL) {
            conn->tx_tail = NULL;
            conn->flags  &= ~AXON_UD_CONN_ON_ACTIVE;
            axon_list_del(&conn->active_link);
            axon_ud_conn_linger(conn);
        }
    }
    if (__builtin_expect(sack != 0, 0) && (conn->tx_head != NULL) && (ack == conn->tx_acked)) {
        axon_ud_tx_fast_retx(conn, ack, sack);
    }
}

/* ---------------------------------------------------------------- timers */

/* Resend conn's unacked packets older than the retransmission timeout. */
static unsigned axon_ud_tx_retransmit(axon_ud_conn_t *conn)
{
    axon_ud_iface_t *iface = axon_ud_conn_iface(conn);
    uint64_t rto           = iface->retx_ns << conn->rto_shift;
    axon_ud_desc_t *desc;
    unsigned count = 0;

    desc = conn->tx_head;
    if ((desc == NULL) || (desc->flags & AXON_UD_DESC_UNSENT) ||
        (iface->now_ns - desc->sent_ns < rto)) {
        return 0;
    }
    for (; desc != NULL; desc = desc->next) {
        if (desc->flags & AXON_UD_DESC_UNSENT) {
            break;
        }
        if ((desc->flags & AXON_UD_DESC_SACKED) || (desc->hw > 0) ||
            (iface->now_ns - desc->sent_ns < rto)) {
            continue;
        }
        if (!axon_ud_can_post(iface) || (axon_ud_post(conn, desc) != 0)) {
            break;
        }
        ++count;
    }
    if (conn->rto_shift < AXON_UD_RTO_SHIFT_MAX) {
        ++conn->rto_shift;
    }
    return count;
}

/*
 * Ask the peer's alive QP whether its process lives (ud_alive.c answers):
 * unlike an ack, the answer needs no progress of the peer's worker. The
 * header carries no receive state: the peer's worker never sees it.
 */
static unsigned axon_ud_tx_probe(axon_ud_conn_t *conn)
{
    axon_ud_iface_t *iface = axon_ud_conn_iface(conn);
    axon_ud_probe_t probe;
    axon_ud_desc_t *desc;
    axon_ud_hdr_t *hdr;
    int ret;

    if (!axon_ud_can_post(iface) || ((desc = axon_verbs_bufpool_get(&iface->tx_pool)) == NULL)) {
        return 0;   /* the next timer tries again */
    }
    hdr = axon_ud_tx_desc_init(desc, NULL, AXON_UD_PKT_PROBE, sizeof(*hdr) + sizeof(probe));
    hdr->dst_id = conn->peer_id;
    hdr->src_id = conn->id;
    probe.dst_uuid = conn->peer_uuid;
    probe.src_qpn  = iface->qp->qp_num;
    axon_verbs_dev_addr_pack(&iface->dev, probe.dev_addr);
    memcpy(hdr + 1, &probe, sizeof(probe));

    ret = axon_ud_post_datagram(iface->qp, (uintptr_t)desc, hdr, desc->len,
                                axon_verbs_bufpool_lkey(&iface->tx_pool),
                                desc->len <= iface->max_inline, conn->ah->ah, conn->alive_qpn);
    if (ret != 0) {
        axon_error("%s: post_send of a probe to qpn 0x%x: %s", iface->name, conn->alive_qpn,
                   strerror(ret));
        axon_verbs_bufpool_put(&iface->tx_pool, desc);
        return 0;
    }
    ++desc->hw;
    ++iface->tx_posted;
    conn->probe_ns = iface->now_ns;
    return 1;
}

/* Keepalive, and freeing connections whose linger ended; a slow scan of all. */
static unsigned axon_ud_scan(axon_ud_iface_t *iface)
{
    axon_ud_conn_t *conn;
    axon_ud_desc_t *desc;
    unsigned i, count = 0;

    for (i = 0; i < iface->conns_size; ++i) {
        conn = iface->conns[i];
        if ((conn == NULL) || (conn->state == AXON_UD_CONN_FAILED)) {
            if ((conn != NULL) && (conn->flags & AXON_UD_CONN_TOMB) &&
                (iface->now_ns >= conn->timer_ns)) {
                axon_ud_conn_free(conn);
            }
            continue;
        }
        if (conn->flags & AXON_UD_CONN_LINGER) {
            if (iface->now_ns >= conn->timer_ns) {
                axon_ud_conn_free(conn);
            }
            continue;
        }
        /* A peer whose goodbye was the last thing it sent has no endpoint to us:
         * nothing to keep alive (it may have exited; that is no failure). */
        if ((conn->tx_head != NULL) || (conn->peer_id == AXON_UD_ID_NONE) ||
            (conn->flags & AXON_UD_CONN_PEER_BYE) ||
            (iface->now_ns - conn->last_rx_ns < iface->keepalive_ns) ||
            (iface->now_ns - conn->timer_ns < iface->keepalive_ns)) {
            continue;
        }
        desc = axon_ud_tx_desc_get(conn);
        if (desc != NULL) {
            conn->timer_ns = iface->now_ns;
            axon_ud_tx_send(conn, desc, AXON_UD_PKT_PING, 0, 0, sizeof(axon_ud_hdr_t));
            ++count;
        }
    }
    return count;
}

unsigned axon_ud_timers(axon_ud_iface_t *iface)
{
    uint64_t now  = iface->now_ns;
    uint64_t tick = iface->retx_ns / 4;
    axon_ud_conn_t *conn, *tmp;
    unsigned count = 0;

    iface->next_timer_ns = now + ((tick > 1000000) ? tick : 1000000);
    axon_list_for_each_safe(conn, tmp, &iface->active, active_link) {
        /* Acks need the peer's progress; answers to probes only its process. */
        uint64_t heard = (conn->alive_ns > conn->ack_ns) ? conn->alive_ns : conn->ack_ns;

        if (now - heard > iface->timeout_ns) {
            axon_ud_conn_fail(conn, AXON_ERR_ENDPOINT_TIMEOUT, conn->alive_qpn ?
                              "no acknowledgement and no answer to probes in time" :
                              "no acknowledgement in time");
            ++count;
            continue;
        }
        if ((conn->alive_qpn != 0) && (now - heard >= iface->probe_ns) &&
            (now - conn->probe_ns >= iface->probe_ns)) {
            count += axon_ud_tx_probe(conn);
        }
        count += axon_ud_tx_retransmit(conn);
    }
    if (now >= iface->next_scan_ns) {
        iface->next_scan_ns = now + iface->keepalive_ns / 4;
        count += axon_ud_scan(iface);
    }
    return count;
}

/* ---------------------------------------------------------------- failure */

void axon_ud_conn_release_bufs(axon_ud_conn_t *conn)
{
    axon_ud_iface_t *iface = axon_ud_conn_iface(conn);
    axon_ud_desc_t *desc;

    while ((desc = conn->tx_head) != NULL) {
        conn->tx_head = desc->next;
        axon_ud_tx_release(iface, desc);
    }
    conn->tx_tail = NULL;
    conn->unsent  = 0;
    while ((desc = conn->rx_held) != NULL) {
        conn->rx_held = desc->next;
        --iface->rx_held;
        axon_ud_rx_put(iface, desc);
    }
    if (conn->reasm != NULL) {
        iface->reasm_free[iface->reasm_nfree++] = conn->reasm;
        conn->reasm = NULL;
    }
    if (conn->flags & AXON_UD_CONN_ON_ACTIVE) {
        conn->flags &= ~AXON_UD_CONN_ON_ACTIVE;
        axon_list_del(&conn->active_link);
    }
}

void axon_ud_conn_fail(axon_ud_conn_t *conn, axon_status_t status, const char *why)
{
    axon_ud_iface_t *iface = axon_ud_conn_iface(conn);

    if (conn->state == AXON_UD_CONN_FAILED) {
        return;
    }
    if (conn->flags & AXON_UD_CONN_PEER_BYE) {
        /* The peer said goodbye and sent nothing since: it left (and may have
         * exited), it did not fail. What we sent it after ends with an error;
         * nobody is told of a failure. */
        axon_debug("%s: peer %016llx (qpn 0x%x) left after its goodbye: %s", iface->name,
                   (unsigned long long)conn->peer_uuid, conn->dest_qpn, why);
        conn->state  = AXON_UD_CONN_FAILED;
        conn->status = AXON_ERR_CONNECTION_RESET;
        axon_ud_conn_release_bufs(conn);
        axon_ud_conn_work(conn);   /* freed there if no endpoint holds it */
        return;
    }
    axon_warn("%s: peer %016llx (qpn 0x%x) failed: %s", iface->name,
              (unsigned long long)conn->peer_uuid, conn->dest_qpn, why);
    conn->state  = AXON_UD_CONN_FAILED;
    conn->status = status;
    axon_ud_conn_release_bufs(conn);
    conn->flags |= AXON_UD_CONN_REPORT;
    if ((status != AXON_ERR_CONNECTION_RESET) && (conn->peer_id != AXON_UD_ID_NONE)) {
        conn->flags     |= AXON_UD_CONN_RESET_PEER;   /* it may live: see axon_ud_tx_reset */
        conn->last_rx_ns = iface->now_ns - iface->retx_ns;
    }
    ++iface->reports;
    axon_ud_conn_work(conn);
}

/* ---------------------------------------------------------------- receive */

static __attribute__((noinline, cold))
void axon_ud_rx_no_handler(axon_ud_iface_t *iface, uint8_t am_id, uint32_t length)
{
    axon_warn("%s: dropped am_id %u (%u bytes): %s", iface->name, am_id, length,
              (am_id >= AXON_AM_ID_MAX) ? "invalid am_id" : "no handler");
}

static inline void axon_ud_rx_am(axon_ud_iface_t *iface, uint8_t am_id, const void *data,
                                 uint32_t length)
{
    axon_am_handler_t handler = (am_id < AXON_AM_ID_MAX) ? iface->am_handlers[am_id] : NULL;

    if (__builtin_expect(handler != NULL, 1)) {
        handler(iface->am_arg, data, length, AXON_AM_FLAG_NONE);
    } else {
        axon_ud_rx_no_handler(iface, am_id, length);
    }
}

/* A fragment of a message longer than one packet; -1 if no reassembly buffer is free. */
static int axon_ud_rx_fragment(axon_ud_conn_t *conn, axon_ud_desc_t *desc,
                               const axon_ud_hdr_t *hdr)
{
    axon_ud_iface_t *iface = axon_ud_conn_iface(conn);
    char *buf;
    uint32_t len;

    if (hdr->flags & AXON_UD_FLAG_FIRST) {
        if (conn->reasm == NULL) {
            if (iface->reasm_nfree == 0) {
                return -1;  /* not taken: the sender sends it again */
            }
            conn->reasm = iface->reasm_free[--iface->reasm_nfree];
        }
        conn->reasm_len   = 0;
        conn->reasm_am_id = hdr->am_id;
        conn->flags      &= ~AXON_UD_CONN_REASM_BAD;
    } else if (conn->reasm == NULL) {
        axon_debug("%s: fragment without a first one from %016llx, dropped", iface->name,
                   (unsigned long long)conn->peer_uuid);
        ++conn->rx_psn;
        axon_ud_rx_put(iface, desc);
        return 0;
    }
    ++conn->rx_psn;
    if (conn->reasm_len + desc->len > iface->reasm_size) {
        if (!(conn->flags & AXON_UD_CONN_REASM_BAD)) {
            axon_warn("%s: message from %016llx longer than AXON_UD_SEG_SIZE=%zu, dropped",
                      iface->name, (unsigned long long)conn->peer_uuid, iface->seg_size);
        }
        conn->flags |= AXON_UD_CONN_REASM_BAD;
    } else {
        memcpy(conn->reasm + conn->reasm_len, hdr + 1, desc->len);
        conn->reasm_len += desc->len;
    }
    axon_ud_rx_put(iface, desc);
    if (hdr->flags & AXON_UD_FLAG_LAST) {
        buf         = conn->reasm;
        len         = conn->reasm_len;
        conn->reasm = NULL;
        if (!(conn->flags & AXON_UD_CONN_REASM_BAD)) {
            axon_ud_rx_am(iface, conn->reasm_am_id, buf, len);
        }
        iface->reasm_free[iface->reasm_nfree++] = buf;
    }
    return 0;
}

/*
 * Deliver the in-order packet in desc (rx_psn is its PSN). Consumes desc and
 * returns 0, or returns -1 leaving it (nothing changed) when it cannot be
 * taken now. rx_psn moves on before a handler runs, so a reply sent from the
 * handler carries the ack.
 */
static int axon_ud_rx_deliver(axon_ud_conn_t *conn, axon_ud_desc_t *desc)
{
    axon_ud_iface_t *iface   = axon_ud_conn_iface(conn);
    const axon_ud_hdr_t *hdr = (const axon_ud_hdr_t *)((char *)desc + AXON_UD_RX_HDR_OFF);

    switch (hdr->type) {
    case AXON_UD_PKT_DATA:
        conn->flags &= ~(AXON_UD_CONN_PEER_BYE | AXON_UD_CONN_LINGER);
        if (__builtin_expect((hdr->flags & (AXON_UD_FLAG_FIRST | AXON_UD_FLAG_LAST)) ==
                             (AXON_UD_FLAG_FIRST | AXON_UD_FLAG_LAST), 1) &&
            (conn->reasm == NULL)) {
            ++conn->rx_psn;
            axon_ud_rx_am(iface, hdr->am_id, hdr + 1, desc->len);
            axon_ud_rx_put(iface, desc);
            return 0;
        }
        return axon_ud_rx_fragment(conn, desc, hdr);
    case AXON_UD_PKT_PING:
        conn->flags &= ~(AXON_UD_CONN_PEER_BYE | AXON_UD_CONN_LINGER);
        break;
    case AXON_UD_PKT_BYE:
        conn->flags |= AXON_UD_CONN_PEER_BYE;
        axon_ud_conn_linger(conn);
        break;
    default:  /* CREQ: the connection was set up when it arrived */
        break;
    }
    ++conn->rx_psn;
    axon_ud_rx_put(iface, desc);
    return 0;
}

/* Keep desc beyond a gap (sorted by PSN); drops it if it is there already or no room. */
static void axon_ud_rx_hold(axon_ud_conn_t *conn, axon_ud_desc_t *desc, int32_t dist)
{
    axon_ud_iface_t *iface = axon_ud_conn_iface(conn);
    axon_ud_desc_t **pos;

    if ((dist > AXON_UD_SACK_BITS) || (iface->rx_held >= iface->rx_hold_max)) {
        axon_ud_rx_put(iface, desc);
        return;
    }
    for (pos = &conn->rx_held; *pos != NULL; pos = &(*pos)->next) {
        int32_t d = axon_ud_psn_diff(desc->psn, (*pos)->psn);
        if (d == 0) {
            axon_ud_rx_put(iface, desc);  /* a duplicate of one held */
            return;
        }
        if (d < 0) {
            break;
        }
    }
    desc->next = *pos;
    *pos       = desc;
    ++iface->rx_held;
}

void axon_ud_rx_seq(axon_ud_conn_t *conn, axon_ud_desc_t *desc)
{
    axon_ud_iface_t *iface = axon_ud_conn_iface(conn);
    int32_t dist           = axon_ud_psn_diff(desc->psn, conn->rx_psn);
    axon_ud_desc_t *held;

    axon_ud_conn_work(conn);  /* an ack is due, unless a reply carries it first */
    if (__builtin_expect(dist != 0, 0)) {
        /* A duplicate (the ack was lost) or a gap: tell the sender at once. */
        conn->flags |= AXON_UD_CONN_ACK_NOW;
        if (dist < 0) {
            axon_ud_rx_put(iface, desc);
        } else {
            axon_ud_rx_hold(conn, desc, dist);
        }
        return;
    }
    if (axon_ud_rx_deliver(conn, desc) != 0) {
        axon_ud_rx_put(iface, desc);
        return;
    }
    /* What waited beyond the gap may follow now. */
    while (((held = conn->rx_held) != NULL) && (held->psn == conn->rx_psn) &&
           (conn->state != AXON_UD_CONN_FAILED)) {
        conn->rx_held = held->next;
        --iface->rx_held;
        if (axon_ud_rx_deliver(conn, held) != 0) {
            conn->rx_held = held;  /* back in front: later */
            ++iface->rx_held;
            break;
        }
    }
    if (conn->rx_held != NULL) {
        conn->flags |= AXON_UD_CONN_ACK_NOW;
    }
}
