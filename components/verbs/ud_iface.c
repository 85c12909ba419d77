/*
 * ud iface: one UD QP with its CQs and buffer pools, progress (receive
 * dispatch, send completions, timers), addresses, and the connection table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ud.h"

static const axon_iface_ops_t axon_ud_iface_ops;

/* ---------------------------------------------------------------- clock */

uint64_t axon_ud_iface_vnow(axon_ud_iface_t *iface)
{
    uint64_t real = axon_sys_coarse_ns();

    /* Time nobody progressed is not counted against peers. */
    if (real - iface->last_real_ns > AXON_UD_PROGRESS_GAP_NS) {
        iface->skipped_ns += real - iface->last_real_ns - AXON_UD_PROGRESS_GAP_NS;
    }
    iface->last_real_ns = real;
    iface->now_ns       = real - iface->skipped_ns;
    return iface->now_ns;
}

/* ---------------------------------------------------------------- connections */

static inline axon_list_link_t *axon_ud_hash_bucket(axon_ud_iface_t *iface, uint64_t uuid)
{
    return &iface->hash[(uuid * 0x9E3779B97F4A7C15ull) >> 56 & (AXON_UD_HASH_SIZE - 1)];
}

/* A free slot of the id table (grows it when full); -1 if out of memory or ids. */
static int axon_ud_conn_slot(axon_ud_iface_t *iface, unsigned *index_p)
{
    axon_ud_conn_t **grown;
    unsigned i, size;

    for (i = 0; i < iface->conns_size; ++i) {
        unsigned index = (iface->next_index + i) % iface->conns_size;
        if (iface->conns[index] == NULL) {
            *index_p          = index;
            iface->next_index = index + 1;
            return 0;
        }
    }
    size = iface->conns_size ? iface->conns_size * 2 : 64;
    if (size > AXON_UD_ID_INDEX_MASK) {
        axon_error("%s: too many connections (%u)", iface->name, iface->conns_size);
        return -1;
    }
    grown = realloc(iface->conns, size * sizeof(*grown));
    if (grown == NULL) {
        axon_error("%s: cannot grow the connection table to %u", iface->name, size);
        return -1;
    }
    memset(grown + iface->conns_size, 0, (size - iface->conns_size) * sizeof(*grown));
    *index_p          = iface->conns_size;
    iface->next_index = iface->conns_size + 1;
    iface->conns      = grown;
    iface->conns_size = size;
    return 0;
}

axon_ud_conn_t *axon_ud_conn_new(axon_ud_iface_t *iface, uint64_t peer_uuid,
                                 const axon_verbs_dev_addr_t *addr, uint32_t qpn,
                                 uint32_t alive_qpn)
{
    axon_ud_conn_t *conn;
    unsigned index;
    size_t mtu;

    conn = calloc(1, sizeof(*conn));
    if (conn == NULL) {
        axon_error("%s: cannot allocate a connection", iface->name);
        return NULL;
    }
    if (axon_ud_conn_slot(iface, &index) != 0) {
        goto err_free;
    }
    conn->ah = axon_verbs_ah_cache_get(&iface->ahs, addr);
    if (conn->ah == NULL) {
        goto err_free;
    }
    mtu = axon_dev_mtu_bytes(axon_verbs_path_mtu(&iface->dev, addr));
    conn->super.iface = &iface->super;
    conn->id          = (iface->next_gen << AXON_UD_ID_INDEX_BITS) | index;
    iface->next_gen   = (iface->next_gen + 1) % (AXON_UD_ID_GEN_MAX + 1);
    conn->peer_id     = AXON_UD_ID_NONE;
    conn->dest_qpn    = qpn;
    conn->alive_qpn   = alive_qpn;
    conn->max_payload = (uint16_t)(mtu - sizeof(axon_ud_hdr_t));
    conn->state       = AXON_UD_CONN_CONNECTING;
    conn->status      = AXON_OK;
    conn->peer_uuid   = peer_uuid;
    conn->last_rx_ns  = iface->now_ns;
    conn->timer_ns    = iface->now_ns;
    axon_list_init(&conn->active_link);
    axon_list_init(&conn->work_link);
    axon_list_add_tail(axon_ud_hash_bucket(iface, peer_uuid), &conn->hash_link);
    iface->conns[index] = conn;
    ++iface->num_conns;
    return conn;

err_free:
    free(conn);
    return NULL;
}

axon_ud_conn_t *axon_ud_conn_find(axon_ud_iface_t *iface, uint64_t peer_uuid,
                                  const axon_verbs_dev_addr_t *addr, uint32_t qpn,
                                  uint32_t peer_id)
{
    axon_ud_conn_t *conn, *found = NULL;

    axon_list_for_each(conn, axon_ud_hash_bucket(iface, peer_uuid), hash_link) {
        if ((conn->peer_uuid != peer_uuid) || (conn->dest_qpn != qpn) ||
            memcmp(conn->ah->addr.gid, addr->gid, sizeof(addr->gid)) ||
            (conn->ah->addr.lid != addr->lid) || (conn->state == AXON_UD_CONN_FAILED) ||
            (conn->flags & AXON_UD_CONN_LINGER)) {
            continue;
        }
        if (conn->peer_id == peer_id) {
            return conn;  /* exactly that connection */
        }
        if (peer_id == AXON_UD_ID_NONE) {
            found = conn;  /* ep_create: the newest live one */
        } else if ((conn->peer_id == AXON_UD_ID_NONE) && (found == NULL)) {
            found = conn;  /* a CREQ meets our own connect in flight */
        }
    }
    return found;
}

void axon_ud_conn_work(axon_ud_conn_t *conn)
{
    if (!(conn->flags & AXON_UD_CONN_ON_WORK)) {
        conn->flags |= AXON_UD_CONN_ON_WORK;
        axon_list_add_tail(&axon_ud_conn_iface(conn)->work, &conn->work_link);
    }
}

void axon_ud_conn_free(axon_ud_conn_t *conn)
{
    axon_ud_iface_t *iface = axon_ud_conn_iface(conn);

    axon_ud_conn_release_bufs(conn);
    if (conn->flags & AXON_UD_CONN_REPORT) {
        --iface->reports;
    }
    axon_list_del(&conn->hash_link);
    axon_list_del(&conn->active_link);
    axon_list_del(&conn->work_link);
    iface->conns[conn->id & AXON_UD_ID_INDEX_MASK] = NULL;
    --iface->num_conns;
    axon_verbs_ah_cache_put(&iface->ahs, conn->ah);
    free(conn);
}

void axon_ud_conn_bury(axon_ud_conn_t *conn)
{
    axon_ud_iface_t *iface = axon_ud_conn_iface(conn);

    if (!(conn->flags & AXON_UD_CONN_RESET_PEER)) {
        axon_ud_conn_free(conn);
    } else if (!(conn->flags & AXON_UD_CONN_TOMB)) {
        conn->flags   |= AXON_UD_CONN_TOMB;   /* freed by the scan */
        conn->timer_ns = iface->now_ns + iface->timeout_ns;
    }
}

/* ---------------------------------------------------------------- receive */

static void axon_ud_rx_post(axon_ud_iface_t *iface)
{
    axon_dev_recv_wr_t wrs[AXON_UD_RX_BATCH], *bad;
    axon_dev_sge_t sges[AXON_UD_RX_BATCH];
    axon_ud_desc_t *desc;
    unsigned n = 0;
    int ret;

    while ((n < AXON_UD_RX_BATCH) && (iface->rx_posted + n < iface->rx_queue_len)) {
        desc = axon_verbs_bufpool_get(&iface->rx_pool);
        if (desc == NULL) {
            break;
        }
        sges[n].addr    = (uintptr_t)desc + AXON_UD_DESC_LEN;
        sges[n].length  = (uint32_t)iface->rx_buf_len;
        sges[n].lkey    = axon_verbs_bufpool_lkey(&iface->rx_pool);
        wrs[n].wr_id    = (uintptr_t)desc;
        wrs[n].sg_list  = &sges[n];
        wrs[n].num_sge  = 1;
        wrs[n].next     = NULL;
        if (n > 0) {
            wrs[n - 1].next = &wrs[n];
        }
        ++n;
    }
    if (n == 0) {
        return;
    }
    ret = axon_dev_post_recv(iface->qp, wrs, &bad);
    if (ret != 0) {
        unsigned posted = (bad != NULL) ? (unsigned)(bad - wrs) : 0;
        axon_error("%s: post_recv: %s", iface->name, strerror(ret));
        for (unsigned i = posted; i < n; ++i) {
            axon_ud_rx_put(iface, (axon_ud_desc_t *)(uintptr_t)wrs[i].wr_id);
        }
        n = posted;
    }
    iface->rx_posted += n;
}

static __attribute__((noinline, cold))
void axon_ud_rx_drop(axon_ud_iface_t *iface, axon_ud_desc_t *desc, const char *why,
                     uint32_t value)
{
    axon_debug("%s: dropped a packet: %s (%u)", iface->name, why, value);
    axon_ud_rx_put(iface, desc);
}

/* A CREQ with dst_id NONE: find the connection it means or accept a new one. */
static axon_ud_conn_t *axon_ud_rx_creq(axon_ud_iface_t *iface, const axon_ud_hdr_t *hdr,
                                       uint32_t src_qpn)
{
    axon_verbs_dev_addr_t addr;
    axon_ud_creq_t creq;
    axon_ud_conn_t *conn;

    memcpy(&creq, hdr + 1, sizeof(creq));   /* it fits: axon_ud_pkt_payload */
    if (creq.dst_uuid != iface->worker_uuid) {
        /* A stale address: the QP number now belongs to another worker. */
        axon_debug("%s: connect request for worker %016llx, we are %016llx", iface->name,
                   (unsigned long long)creq.dst_uuid, (unsigned long long)iface->worker_uuid);
        return NULL;
    }
    axon_verbs_dev_addr_unpack(creq.dev_addr, &addr);
    if (!axon_verbs_dev_addr_reachable(&iface->dev, &addr) || (creq.src_qpn == 0) ||
        (creq.src_qpn != src_qpn)) {
        axon_debug("%s: connect request from an address we cannot answer", iface->name);
        return NULL;
    }
    conn = axon_ud_conn_find(iface, creq.src_uuid, &addr, creq.src_qpn, hdr->src_id);
    if (conn == NULL) {
        conn = axon_ud_conn_new(iface, creq.src_uuid, &addr, creq.src_qpn,
                                (creq.src_alive_qpn <= AXON_VERBS_PSN_MASK) ?
                                creq.src_alive_qpn : 0);
        if (conn == NULL) {
            return NULL;
        }
        /* Accepted: our own stream starts at PSN 0 with data, no CREQ of ours. */
        conn->state = AXON_UD_CONN_CONNECTED;
        axon_debug("%s: accepted peer %016llx (qpn 0x%x, id 0x%x -> 0x%x)", iface->name,
                   (unsigned long long)creq.src_uuid, creq.src_qpn, hdr->src_id, conn->id);
    }
    return conn;
}

/* The connection a packet names; NULL (packet dropped) if none. */
static inline axon_ud_conn_t *axon_ud_rx_conn(axon_ud_iface_t *iface, const axon_ud_hdr_t *hdr,
                                              uint32_t src_qpn)
{
    axon_ud_conn_t *conn;
    uint32_t index = hdr->dst_id & AXON_UD_ID_INDEX_MASK;

    if (__builtin_expect(hdr->dst_id == AXON_UD_ID_NONE, 0)) {
        if (hdr->type != AXON_UD_PKT_CREQ) {
            return NULL;
        }
        conn = axon_ud_rx_creq(iface, hdr, src_qpn);
    } else {
        if (index >= iface->conns_size) {
            return NULL;
        }
        conn = iface->conns[index];
        /* Ids repeat between processes and QP numbers are reused: a packet another QP
         * sends is for the former owner of ours, though its ids may match one of ours. */
        if ((conn == NULL) || (conn->id != hdr->dst_id) || (conn->dest_qpn != src_qpn)) {
            return NULL;
        }
    }
    if (conn == NULL) {
        return NULL;
    }
    if (__builtin_expect(conn->peer_id != hdr->src_id, 0)) {
        if (conn->peer_id != AXON_UD_ID_NONE) {
            return NULL;  /* a former connection of that peer */
        }
        /* An answer acknowledges our CREQ (PSN 0) and no more than we sent; a packet
         * meant for our QP number's former owner seldom does. (A CREQ crossing ours
         * names us by uuid.) */
        if ((conn->state == AXON_UD_CONN_CONNECTING) && (hdr->type != AXON_UD_PKT_CREQ) &&
            ((axon_ud_psn_diff(hdr->ack, 0) < 1) ||
             (axon_ud_psn_diff(hdr->ack, conn->tx_psn) > 0))) {
            return NULL;
        }
        /* The peer answered (or connected at once): its id, then what waited for it. */
        conn->peer_id = hdr->src_id;
        if (conn->state == AXON_UD_CONN_CONNECTING) {
            conn->state = AXON_UD_CONN_CONNECTED;
        }
        if (conn->unsent > 0) {
            axon_ud_conn_work(conn);
        }
    }
    if (__builtin_expect(conn->state == AXON_UD_CONN_FAILED, 0)) {
        if (hdr->type < AXON_UD_PKT_ACK) {
            axon_ud_tx_reset(conn);   /* the peer still sends: it does not know */
        }
        return NULL;
    }
    return conn;
}

/* ALIVE from a peer's alive QP: its worker's process lives, though it may not progress. */
static __attribute__((noinline))
void axon_ud_rx_alive(axon_ud_iface_t *iface, const axon_ud_hdr_t *hdr)
{
    uint32_t index = hdr->dst_id & AXON_UD_ID_INDEX_MASK;
    axon_ud_alive_msg_t msg;
    axon_ud_conn_t *conn;

    if ((hdr->type != AXON_UD_PKT_ALIVE) || (index >= iface->conns_size)) {
        return;
    }
    conn = iface->conns[index];
    memcpy(&msg, hdr + 1, sizeof(msg));
    if ((conn != NULL) && (conn->id == hdr->dst_id) && (msg.src_uuid == conn->peer_uuid)) {
        axon_ud_conn_alive(conn);
    }
}

static void axon_ud_rx_packet(axon_ud_iface_t *iface, const axon_dev_wc_t *wc)
{
    axon_ud_desc_t *desc = (axon_ud_desc_t *)(uintptr_t)wc->wr_id;
    axon_ud_hdr_t *hdr   = (axon_ud_hdr_t *)((char *)desc + AXON_UD_RX_HDR_OFF);
    axon_ud_conn_t *conn;
    int64_t payload;

    --iface->rx_posted;
    if (__builtin_expect(wc->status != AXON_DEV_WC_SUCCESS, 0)) {
        if (wc->status != AXON_DEV_WC_WR_FLUSH_ERR) {
            axon_error("%s: receive completion: %s", iface->name,
                       axon_dev_wc_status_str(wc->status));
        }
        axon_ud_rx_put(iface, desc);
        return;
    }
    payload = axon_ud_pkt_payload(wc->byte_len, hdr);
    if (__builtin_expect(payload < 0, 0)) {
        axon_ud_rx_drop(iface, desc, "malformed, length", wc->byte_len);
        return;
    }
    if (__builtin_expect((hdr->type == AXON_UD_PKT_PROBE) || (hdr->type == AXON_UD_PKT_ALIVE),
                         0)) {
        axon_ud_rx_alive(iface, hdr);  /* a PROBE here is misaddressed: dropped */
        axon_ud_rx_put(iface, desc);
        return;
    }
    conn   = axon_ud_rx_conn(iface, hdr, wc->src_qp);
    if (__builtin_expect(conn == NULL, 0)) {
        axon_ud_rx_drop(iface, desc, "unknown connection", hdr->dst_id);
        return;
    }
    if (__builtin_expect(hdr->type == AXON_UD_PKT_RESET, 0)) {
        axon_ud_conn_fail(conn, AXON_ERR_CONNECTION_RESET,
                          "it failed the connection (it lives, but heard nothing from us in "
                          "time)");
        axon_ud_rx_put(iface, desc);
        return;
    }
    if (__builtin_expect(hdr->type == AXON_UD_PKT_LEAVE, 0)) {
        conn->flags |= AXON_UD_CONN_PEER_BYE;   /* a goodbye: its leaving is no failure */
        axon_ud_conn_fail(conn, AXON_ERR_CONNECTION_RESET, "its worker closed");
        axon_ud_rx_put(iface, desc);
        return;
    }
    conn->last_rx_ns = iface->now_ns;
    axon_ud_tx_acked(conn, hdr->ack, hdr->sack);
    if (hdr->type == AXON_UD_PKT_ACK) {
        axon_ud_rx_put(iface, desc);
        return;
    }
    desc->psn = hdr->psn;
    desc->len = (uint32_t)payload;
    axon_ud_rx_seq(conn, desc);
}

static unsigned axon_ud_rx_progress(axon_ud_iface_t *iface)
{
    axon_dev_wc_t wcs[AXON_UD_RX_BATCH];
    unsigned count = 0;
    int n, i;

    while (count < AXON_UD_RX_BURST) {
        n = axon_dev_poll_cq(iface->recv_cq, AXON_UD_RX_BATCH, wcs);
        if (n <= 0) {
            if (n < 0) {
                axon_error("%s: poll_cq (receive): %s", iface->name, strerror(-n));
            }
            break;
        }
        for (i = 0; i < n; ++i) {
            axon_ud_rx_packet(iface, &wcs[i]);
        }
        count += (unsigned)n;
        if (iface->rx_posted + AXON_UD_RX_BATCH <= iface->rx_queue_len) {
            axon_ud_rx_post(iface);
        }
        if (n < AXON_UD_RX_BATCH) {
            break;   /* drained: another poll would be a device pass before the caller sees these */
        }
    }
    if (iface->rx_posted + AXON_UD_RX_BATCH <= iface->rx_queue_len) {
        axon_ud_rx_post(iface);
    }
    return count;
}

/* ---------------------------------------------------------------- progress */

/*
 * Connections with something due: acks, posts that waited, goodbyes,
 * failure reports. The peer_failure callback may destroy endpoints: each
 * report restarts from the list head.
 */
static unsigned axon_ud_iface_work(axon_ud_iface_t *iface)
{
    axon_list_link_t pending;
    axon_ud_conn_t *conn;
    unsigned count = 0;

    /* One pass over what is due now; what stays due is put back. */
    axon_list_init(&pending);
    if (!axon_list_is_empty(&iface->work)) {
        pending.next       = iface->work.next;
        pending.prev       = iface->work.prev;
        pending.next->prev = &pending;
        pending.prev->next = &pending;
        axon_list_init(&iface->work);
    }
    while (!axon_list_is_empty(&pending)) {
        conn = axon_list_first(&pending, axon_ud_conn_t, work_link);
        axon_list_del(&conn->work_link);
        conn->flags &= ~AXON_UD_CONN_ON_WORK;
        if (conn->flags & AXON_UD_CONN_REPORT) {
            uint64_t uuid = conn->peer_uuid;
            axon_status_t status = conn->status;

            conn->flags &= ~AXON_UD_CONN_REPORT;
            --iface->reports;
            ++count;
            if (conn->refcnt == 0) {
                axon_ud_conn_bury(conn);
            }
            /* Last: the callback may destroy or create endpoints. */
            if (iface->peer_failure != NULL) {
                iface->peer_failure(iface->am_arg, uuid, status);
            }
            continue;
        }
        if ((conn->state == AXON_UD_CONN_FAILED) && (conn->refcnt == 0)) {
            axon_ud_conn_bury(conn);
            continue;
        }
        count += axon_ud_tx_resume(conn);
    }
    return count;
}

static unsigned axon_ud_iface_progress(axon_iface_t *tl_iface)
{
    axon_ud_iface_t *iface = (axon_ud_iface_t *)tl_iface;
    unsigned count;

    if (iface->in_progress) {
        return 0;  /* called from a handler: the outer call goes on */
    }
    ++iface->in_progress;
    axon_ud_iface_vnow(iface);
    count  = axon_ud_rx_progress(iface);
    count += axon_ud_tx_poll(iface);
    if (iface->now_ns >= iface->next_timer_ns) {
        count += axon_ud_timers(iface);
    }
    if (!axon_list_is_empty(&iface->work)) {
        count += axon_ud_iface_work(iface);
    }
    --iface->in_progress;
    return count;
}

/* ---------------------------------------------------------------- addresses */

static axon_status_t axon_ud_iface_get_address(axon_iface_t *tl_iface, void *dev_addr,
                                               void *iface_addr)
{
    axon_ud_iface_t *iface = (axon_ud_iface_t *)tl_iface;
    axon_ud_iface_addr_t addr;

    axon_verbs_dev_addr_pack(&iface->dev, dev_addr);
    addr.qpn       = iface->qp->qp_num;
    addr.alive_qpn = axon_ud_alive_qpn(iface);
    memcpy(iface_addr, &addr, sizeof(addr));
    return AXON_OK;
}

axon_status_t axon_ud_iface_check_peer(const axon_ud_iface_t *iface, const void *dev_addr,
                                       const void *iface_addr, axon_log_level_t log_level,
                                       axon_verbs_dev_addr_t *addr,
                                       axon_ud_iface_addr_t *iaddr)
{
    if (dev_addr == NULL) {
        axon_log(log_level, "%s: no peer device address", iface->name);
        return AXON_ERR_INVALID_ADDR;
    }
    axon_verbs_dev_addr_unpack(dev_addr, addr);
    if (!axon_verbs_dev_addr_reachable(&iface->dev, addr)) {
        axon_log(log_level, "%s: peer device address (link layer %u, mtu code %u) is not "
                 "reachable from here", iface->name, addr->link_layer, addr->mtu);
        return AXON_ERR_UNREACHABLE;
    }
    if (iface_addr == NULL) {
        return AXON_OK;
    }
    memcpy(iaddr, iface_addr, sizeof(*iaddr));
    if ((iaddr->qpn == 0) || (iaddr->qpn > AXON_VERBS_PSN_MASK) ||
        (iaddr->alive_qpn > AXON_VERBS_PSN_MASK)) {
        axon_log(log_level, "%s: malformed peer address (qpn 0x%x, alive qpn 0x%x)",
                 iface->name, iaddr->qpn, iaddr->alive_qpn);
        return AXON_ERR_INVALID_ADDR;
    }
    return AXON_OK;
}

static int axon_ud_iface_is_reachable(axon_iface_t *tl_iface, const void *dev_addr,
                                      const void *iface_addr)
{
    axon_verbs_dev_addr_t addr;
    axon_ud_iface_addr_t iaddr;

    return axon_ud_iface_check_peer((const axon_ud_iface_t *)tl_iface, dev_addr, iface_addr,
                                    AXON_LOG_DEBUG, &addr, &iaddr) == AXON_OK;
}

/* ---------------------------------------------------------------- open / close */

static void axon_ud_iface_cleanup(axon_ud_iface_t *iface)
{
    axon_ud_conn_t *conn;
    unsigned i;

    for (i = 0; i < iface->conns_size; ++i) {
        conn = iface->conns[i];
        if (conn == NULL) {
            continue;
        }
        if (conn->refcnt > 0) {
            axon_warn("%s: closing with an endpoint to %016llx still open", iface->name,
                      (unsigned long long)conn->peer_uuid);
        }
        axon_ud_conn_release_bufs(conn);
        /* Descriptors still owned by the device point to nothing from now on. */
        axon_ud_conn_free(conn);
    }
    free(iface->conns);
    axon_ud_alive_stop(iface);
    if (iface->qp != NULL) {
        axon_verbs_qp_destroy(iface->qp);
    }
    axon_verbs_cq_destroy(iface->name, iface->send_cq);
    axon_verbs_cq_destroy(iface->name, iface->recv_cq);
    /* The QP is gone with whatever it held: every buffer is ours again. */
    iface->tx_pool.num_free = iface->tx_pool.count;
    iface->rx_pool.num_free = iface->rx_pool.count;
    axon_verbs_bufpool_cleanup(&iface->tx_pool);
    axon_verbs_bufpool_cleanup(&iface->rx_pool);
    free(iface->reasm_mem);
    free(iface->reasm_free);
    free(iface->bcopy_buf);
    axon_verbs_ah_cache_cleanup(&iface->ahs);   /* empty unless a connection leaked */
    axon_verbs_dev_close(&iface->dev);
    free(iface);
}

/* How long a closing iface lets its last goodbyes be acknowledged. */
#define AXON_UD_BYE_LINGER 0.05

/*
 * Goodbyes still due (a worker destroys its endpoints just before its
 * ifaces) go out before the QP does, so peers see a close and not a
 * failure: progress until every send is acknowledged or the linger ends.
 */
static void axon_ud_iface_say_goodbyes(axon_ud_iface_t *iface)
{
    double end = axon_sys_time_sec() + AXON_UD_BYE_LINGER;

    if (axon_list_is_empty(&iface->work)) {
        return;
    }
    do {
        axon_ud_iface_progress(&iface->super);
        if (axon_list_is_empty(&iface->work) &&
            (iface->tx_pool.num_free == iface->tx_pool.count)) {
            return;
        }
    } while (axon_sys_time_sec() < end);
    axon_debug("%s: closing with %u send(s) unacknowledged after %.0f ms", iface->name,
               iface->tx_pool.count - iface->tx_pool.num_free, AXON_UD_BYE_LINGER * 1e3);
}

/*
 * Then LEAVE to every peer still connected: one that says goodbye after we
 * closed would wait for our ack until its linger ends. Sent while the send
 * queue and buffers allow within the same linger; a peer left out only waits.
 */
static void axon_ud_iface_say_leave(axon_ud_iface_t *iface)
{
    double end = axon_sys_time_sec() + AXON_UD_BYE_LINGER;
    axon_ud_conn_t *conn;
    unsigned i = 0;

    while (i < iface->conns_size) {
        conn = iface->conns[i];
        if ((conn == NULL) || (conn->state != AXON_UD_CONN_CONNECTED) ||
            (conn->peer_id == AXON_UD_ID_NONE) || (axon_ud_tx_leave(conn) == 0)) {
            ++i;
            continue;
        }
        if (axon_sys_time_sec() >= end) {
            break;
        }
        axon_ud_iface_progress(&iface->super);   /* sends completed free room */
    }
    while ((iface->tx_posted > 0) && (axon_sys_time_sec() < end)) {
        axon_ud_iface_progress(&iface->super);   /* out before the QP goes (no ack awaited) */
    }
}

static void axon_ud_iface_close(axon_iface_t *tl_iface)
{
    axon_ud_iface_t *iface = (axon_ud_iface_t *)tl_iface;

    axon_ud_iface_say_goodbyes(iface);
    axon_ud_iface_say_leave(iface);
    axon_ud_iface_cleanup(iface);
}

static axon_status_t axon_ud_iface_init_bufs(axon_ud_iface_t *iface,
                                             const axon_ud_config_t *config)
{
    size_t mtu = axon_dev_mtu_bytes(iface->dev.port_attr.active_mtu);
    axon_status_t status;
    size_t stride;
    unsigned i;

    iface->max_payload = (uint16_t)(mtu - sizeof(axon_ud_hdr_t));
    iface->rx_buf_len  = AXON_UD_GRH_LEN + mtu;
    iface->rx_hold_max = config->rx_queue_len / 2;
    status = axon_verbs_bufpool_init(&iface->tx_pool, &iface->dev, "ud send",
                                     AXON_UD_DESC_LEN + mtu, config->tx_bufs);
    if (status != AXON_OK) {
        return status;
    }
    status = axon_verbs_bufpool_init(&iface->rx_pool, &iface->dev, "ud receive",
                                     AXON_UD_DESC_LEN + iface->rx_buf_len,
                                     config->rx_queue_len + iface->rx_hold_max);
    if (status != AXON_OK) {
        return status;
    }
    /* Reassembly buffers: 8-byte aligned starts for the AM handlers. They also take
     * an am_short that a peer of a larger MTU than its path to us fragmented. */
    iface->seg_size   = config->seg_size;
    iface->reasm_size = (config->seg_size > AXON_UD_MTU_MAX) ? config->seg_size : AXON_UD_MTU_MAX;
    stride            = (iface->reasm_size + 63) & ~(size_t)63;
    iface->reasm_mem  = aligned_alloc(64, stride * config->reasm_bufs);
    iface->reasm_free = calloc(config->reasm_bufs, sizeof(*iface->reasm_free));
    iface->bcopy_buf  = aligned_alloc(64, stride);
    if ((iface->reasm_mem == NULL) || (iface->reasm_free == NULL) ||
        (iface->bcopy_buf == NULL)) {
        axon_error("%s: cannot allocate %u reassembly buffers of %zu bytes", iface->name,
                   config->reasm_bufs, iface->reasm_size);
        return AXON_ERR_NO_MEMORY;
    }
    for (i = 0; i < config->reasm_bufs; ++i) {
        iface->reasm_free[i] = iface->reasm_mem + i * stride;
    }
    iface->reasm_nfree = config->reasm_bufs;
    return AXON_OK;
}

axon_status_t axon_ud_iface_open(const axon_resource_t *resource, const void *config_v,
                                 const axon_iface_params_t *params, axon_iface_t **iface_p)
{
    const axon_ud_config_t *config = config_v;
    axon_verbs_qp_params_t qp_params;
    axon_dev_qp_cap_t cap;
    axon_ud_iface_t *iface;
    axon_status_t status;
    unsigned i;

    status = axon_ud_config_check(config);
    if (status != AXON_OK) {
        return status;
    }
    if (params == NULL) {
        axon_error("ud: iface_open needs parameters");
        return AXON_ERR_INVALID_PARAM;
    }
    iface = calloc(1, sizeof(*iface));
    if (iface == NULL) {
        axon_error("ud: cannot allocate an iface");
        return AXON_ERR_NO_MEMORY;
    }
    snprintf(iface->name, sizeof(iface->name), "ud/%s", resource->dev_name);
    iface->super.ops      = &axon_ud_iface_ops;
    iface->super.resource = resource;
    iface->config         = config;
    iface->alive.wake[0]  = iface->alive.wake[1] = -1;
    for (i = 0; i < AXON_UD_HASH_SIZE; ++i) {
        axon_list_init(&iface->hash[i]);
    }
    axon_list_init(&iface->active);
    axon_list_init(&iface->work);

    status = axon_verbs_dev_open(&iface->dev, resource->dev_name, (int)config->gid_index);
    if (status != AXON_OK) {
        free(iface);
        return status;
    }
    axon_verbs_ah_cache_init(&iface->ahs, &iface->dev, iface->name);
    if (axon_dev_mtu_bytes(iface->dev.port_attr.active_mtu) <= sizeof(axon_ud_hdr_t)) {
        axon_error("%s: port MTU code %d is unusable", iface->name,
                   iface->dev.port_attr.active_mtu);
        status = AXON_ERR_NO_DEVICE;
        goto err;
    }
    status = axon_ud_iface_init_bufs(iface, config);
    if (status != AXON_OK) {
        goto err;
    }
    status = axon_verbs_cq_create(&iface->dev, (int)config->tx_queue_len, &iface->send_cq);
    if (status != AXON_OK) {
        goto err;
    }
    status = axon_verbs_cq_create(&iface->dev, (int)config->rx_queue_len, &iface->recv_cq);
    if (status != AXON_OK) {
        goto err;
    }
    memset(&qp_params, 0, sizeof(qp_params));
    qp_params.type        = AXON_DEV_QPT_UD;
    qp_params.send_cq     = iface->send_cq;
    qp_params.recv_cq     = iface->recv_cq;
    qp_params.max_send_wr = config->tx_queue_len;
    qp_params.max_recv_wr = config->rx_queue_len;
    qp_params.max_inline  = 64;
    qp_params.qp_context  = iface;
    status = axon_verbs_qp_create(&iface->dev, &qp_params, &iface->qp, &cap);
    if (status != AXON_OK) {
        goto err;
    }
    iface->max_inline   = cap.max_inline_data;
    iface->tx_queue_len = (cap.max_send_wr < config->tx_queue_len) ? cap.max_send_wr :
                                                                     config->tx_queue_len;
    iface->rx_queue_len = (cap.max_recv_wr < config->rx_queue_len) ? cap.max_recv_wr :
                                                                     config->rx_queue_len;
    status = axon_verbs_qp_ud_up(&iface->dev, iface->qp, AXON_UD_QKEY, 0);
    if (status != AXON_OK) {
        goto err;
    }
    if (config->alive) {
        status = axon_ud_alive_start(iface);
        if (status != AXON_OK) {
            goto err;
        }
    }

    iface->am_arg       = params->am_arg;
    if (params->am_handlers != NULL) {
        memcpy(iface->am_handlers, params->am_handlers, sizeof(iface->am_handlers));
    }
    iface->peer_failure = params->peer_failure;
    iface->worker_uuid  = params->worker_uuid;
    /* Ids start at a generation of this worker's own: a process that takes over a
     * dead one's QP number must not hold the same ids, or the dead one's peers'
     * late packets would pass for its own. */
    iface->next_gen     = (unsigned)((iface->worker_uuid >> 7) % (AXON_UD_ID_GEN_MAX + 1));
    iface->retx_ns      = (uint64_t)(config->retx_timeout * 1e9);
    iface->timeout_ns   = (uint64_t)(config->timeout * 1e9);
    iface->keepalive_ns = (uint64_t)(config->keepalive_interval * 1e9);
    iface->probe_ns     = iface->timeout_ns / 8;
    iface->tx_window    = config->tx_window;
    iface->max_short    = resource->max_short;
    iface->last_real_ns = axon_sys_coarse_ns();
    iface->skipped_ns   = 0;
    iface->now_ns       = iface->last_real_ns;
    while (iface->rx_posted + AXON_UD_RX_BATCH <= iface->rx_queue_len) {
        unsigned before = iface->rx_posted;
        axon_ud_rx_post(iface);
        if (iface->rx_posted == before) {
            break;
        }
    }
    axon_debug("%s: qpn 0x%x (alive qpn 0x%x), mtu %u, %u receives posted", iface->name,
               iface->qp->qp_num, axon_ud_alive_qpn(iface),
               (unsigned)axon_dev_mtu_bytes(iface->dev.port_attr.active_mtu), iface->rx_posted);
    *iface_p = &iface->super;
    return AXON_OK;

err:
    axon_ud_iface_cleanup(iface);
    return status;
}

static const axon_iface_ops_t axon_ud_iface_ops = {
    .iface_close        = axon_ud_iface_close,
    .iface_progress     = axon_ud_iface_progress,
    .dev_addr_len       = AXON_VERBS_DEV_ADDR_LEN,
    .iface_addr_len     = sizeof(axon_ud_iface_addr_t),
    .iface_get_address  = axon_ud_iface_get_address,
    .iface_is_reachable = axon_ud_iface_is_reachable,
    .ep_create          = axon_ud_ep_create,
    .ep_destroy         = axon_ud_ep_destroy,
    .ep_am_short        = axon_ud_ep_am_short,
    .ep_am_bcopy        = axon_ud_ep_am_bcopy,
    .ep_am_zcopy        = NULL,  /* UD has no RDMA: bulk data goes as bcopy fragments */
    .ep_get_zcopy       = NULL,
    .ep_put_zcopy       = NULL,
    .ep_flush           = axon_ud_ep_flush,
    .ep_check           = axon_ud_ep_check,
};
