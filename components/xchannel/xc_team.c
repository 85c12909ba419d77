/*
 * A team's queues: an RC QP to every other member, the management QP, and
 * their CQs. Made when the team joins, connected with the
 * QP numbers the members exchanged, gone with the team.
 */
#include <stdlib.h>
#include <string.h>
#include "log.h"
#include "xchannel.h"

#define AXON_XC_CQES     AXON_XC_MQP_WRS   /* the MQP's CQ holds every task's error */
/* RNR timer code 1 (10 us, the shortest): a member that fell a ring behind
 * (AXON_XC_RING receives) gets the message again that soon. */
#define AXON_XC_MIN_RNR_TIMER 1

axon_status_t axon_xc_worker_open(const axon_resource_t *rsc, const void *config,
                                  axon_xc_worker_t **worker_p)
{
    const axon_xc_config_t *c = config;
    axon_xc_worker_t *w;
    axon_status_t status;

    w = calloc(1, sizeof(*w));
    if (w == NULL) {
        return AXON_ERR_NO_MEMORY;
    }
    w->config = c;
    status = axon_verbs_dev_open(&w->dev, rsc->dev_name, (int)c->gid_index);
    if ((status == AXON_OK) && !(w->dev.dev_attr.cap_flags & AXON_DEV_CAP_CROSS_CHANNEL)) {
        axon_error("xchannel: %s has no cross-channel support", rsc->dev_name);
        axon_verbs_dev_close(&w->dev);
        status = AXON_ERR_UNSUPPORTED;
    }
    if (status != AXON_OK) {
        free(w);
        return status;
    }
    *worker_p = w;
    return AXON_OK;
}

void axon_xc_worker_close(axon_xc_worker_t *w)
{
    axon_verbs_dev_close(&w->dev);
    free(w);
}

static size_t axon_xc_team_addr_len(uint32_t size)
{
    return AXON_VERBS_DEV_ADDR_LEN + sizeof(uint32_t) * size;
}

static axon_status_t axon_xc_cq(axon_xc_team_t *team, unsigned flags, axon_dev_cq_t **cq_p)
{
    int ret = axon_dev_create_cq_ex(team->worker->dev.ctx, AXON_XC_CQES, NULL, NULL, 0, flags,
                                    cq_p);

    if (ret != 0) {
        axon_error("xchannel: %s: create_cq (flags 0x%x): %s", team->worker->dev.name, flags,
                   strerror(ret));
        return AXON_ERR_NO_RESOURCE;
    }
    return AXON_OK;
}

static axon_status_t axon_xc_qp(axon_xc_team_t *team, axon_dev_cq_t *rcq, uint32_t flags,
                                uint32_t wrs, axon_dev_qp_t **qp_p)
{
    axon_verbs_qp_params_t params;
    axon_status_t status;

    memset(&params, 0, sizeof(params));
    params.type         = AXON_DEV_QPT_RC;
    params.send_cq      = (flags & AXON_DEV_QP_CREATE_MANAGED_SEND) ? team->scq : team->mcq;
    params.recv_cq      = rcq;
    params.max_send_wr  = wrs;
    params.max_recv_wr  = wrs;
    params.max_send_sge = team->max_sge;
    params.create_flags = flags;
    status = axon_verbs_qp_create(&team->worker->dev, &params, qp_p, NULL);
    if (status == AXON_OK) {
        status = axon_verbs_qp_rc_init(&team->worker->dev, *qp_p);
    }
    return status;
}

/* The slots every other member's messages land in, and the WRs that post them. */
static axon_status_t axon_xc_ring(axon_xc_team_t *team)
{
    const axon_dev_attr_t *a = &team->worker->dev.dev_attr;
    size_t len;
    int ret;

    team->slot_len = a->cross_channel.max_calc_vector * 8;
    team->slot_len = (team->slot_len > AXON_XC_MAX_SLOT) ? AXON_XC_MAX_SLOT :
                     (team->slot_len < 64) ? 64 : team->slot_len;
    len            = (size_t)(team->size - 1) * AXON_XC_RING * team->slot_len;
    team->ring       = calloc(1, len ? len : 1);
    team->ring_wrs   = calloc(AXON_XC_RING, sizeof(*team->ring_wrs));
    team->ring_sges  = calloc(AXON_XC_RING, sizeof(*team->ring_sges));
    team->done_from  = calloc(AXON_XC_LAG * team->size, sizeof(*team->done_from));
    team->done_count = calloc(AXON_XC_LAG * team->size, sizeof(*team->done_count));
    if ((team->ring == NULL) || (team->ring_wrs == NULL) || (team->ring_sges == NULL) ||
        (team->done_from == NULL) || (team->done_count == NULL)) {
        return AXON_ERR_NO_MEMORY;
    }
    ret = axon_dev_reg_mr(team->worker->dev.pd, team->ring, len ? len : 1,
                          AXON_DEV_ACCESS_LOCAL_WRITE, &team->ring_mr);
    if (ret != 0) {
        axon_error("xchannel: %s: cannot register a ring of %zu bytes: %s",
                   team->worker->dev.name, len, strerror(ret));
        return AXON_ERR_NO_RESOURCE;
    }
    return AXON_OK;
}

/* Post count more receives from m, each into the next slot of its ring. */
static axon_status_t axon_xc_ring_post(axon_xc_team_t *team, uint32_t m, unsigned count)
{
    axon_xc_peer_t *peer = &team->peers[m];
    axon_dev_recv_wr_t *bad = NULL;
    unsigned i;
    int ret;

    for (i = 0; i < count; ++i) {
        team->ring_sges[i].addr   = (uintptr_t)axon_xc_slot(team, m, peer->posted + i);
        team->ring_sges[i].length = team->slot_len;
        team->ring_sges[i].lkey   = team->ring_mr->lkey;
        team->ring_wrs[i].sg_list = &team->ring_sges[i];
        team->ring_wrs[i].num_sge = 1;
        team->ring_wrs[i].next    = (i + 1 < count) ? &team->ring_wrs[i + 1] : NULL;
    }
    ret = axon_dev_post_recv(peer->qp, team->ring_wrs, &bad);
    if (ret != 0) {
        axon_error("xchannel: %s: posting %u receives from member %u: %s",
                   team->worker->dev.name, count, m, strerror(ret));
        team->failed = AXON_ERR_IO_ERROR;
        return AXON_ERR_IO_ERROR;
    }
    peer->posted += count;
    return AXON_OK;
}

void axon_xc_team_repost(axon_xc_team_t *team, unsigned d)
{
    unsigned i, at = d * team->size;

    for (i = 0; (i < team->num_done[d]) && (team->failed == AXON_OK); ++i) {
        (void)axon_xc_ring_post(team, team->done_from[at + i], (unsigned)team->done_count[at + i]);
    }
    team->num_done[d] = 0;
}

static void axon_xc_team_close(axon_xc_team_t *team)
{
    uint32_t m;

    if (team->mqp != NULL) {
        axon_verbs_qp_destroy(team->mqp);   /* first: its WAITs hold the CQs */
    }
    for (m = 0; m < team->size; ++m) {
        if (team->peers[m].qp != NULL) {
            axon_verbs_qp_destroy(team->peers[m].qp);
        }
        if (team->peers[m].rcq != NULL) {
            axon_dev_destroy_cq(team->peers[m].rcq);
        }
    }
    axon_xc_team_bury(team, 1);   /* no QP reads their buffers any more */
    if (team->ring_mr != NULL) {
        axon_dev_dereg_mr(team->ring_mr);
    }
    free(team->ring);
    free(team->ring_wrs);
    free(team->ring_sges);
    free(team->done_from);
    free(team->done_count);
    if (team->scq != NULL) {
        axon_dev_destroy_cq(team->scq);
    }
    if (team->mcq != NULL) {
        axon_dev_destroy_cq(team->mcq);
    }
    free(team->peers);
    free(team);
}

static axon_status_t axon_xc_team_open(axon_xc_worker_t *w, uint32_t rank, uint32_t size,
                                       axon_xc_team_t **team_p, void *addr)
{
    const unsigned counted = AXON_DEV_CQ_CREATE_CROSS_CHANNEL | AXON_DEV_CQ_IGNORE_OVERRUN;
    axon_xc_team_t *team;
    axon_status_t status;
    uint32_t m, qpn;

    team = calloc(1, sizeof(*team));
    if ((team == NULL) || ((team->peers = calloc(size, sizeof(*team->peers))) == NULL)) {
        free(team);
        return AXON_ERR_NO_MEMORY;
    }
    team->worker  = w;
    team->rank    = rank;
    team->size    = size;
    team->max_sge = (uint32_t)w->dev.dev_attr.max_sge;
    if (team->max_sge > AXON_XC_MAX_OPERANDS) {
        team->max_sge = AXON_XC_MAX_OPERANDS;
    }
    axon_list_init(&team->posted);
    axon_list_init(&team->waiting);
    axon_list_init(&team->graveyard);
    status = axon_xc_ring(team);
    if (status == AXON_OK) {
        status = axon_xc_cq(team, counted, &team->scq);
    }
    if (status == AXON_OK) {
        status = axon_xc_cq(team, 0, &team->mcq);
    }
    if (status == AXON_OK) {
        status = axon_xc_qp(team, team->mcq, AXON_DEV_QP_CREATE_CROSS_CHANNEL, AXON_XC_MQP_WRS,
                            &team->mqp);
    }
    for (m = 0; (m < size) && (status == AXON_OK); ++m) {
        if (m == rank) {
            continue;
        }
        status = axon_xc_cq(team, counted, &team->peers[m].rcq);
        if (status == AXON_OK) {
            status = axon_xc_qp(team, team->peers[m].rcq,
                                AXON_DEV_QP_CREATE_CROSS_CHANNEL | AXON_DEV_QP_CREATE_MANAGED_SEND,
                                AXON_XC_RING, &team->peers[m].qp);
        }
    }
    if (status != AXON_OK) {
        axon_xc_team_close(team);
        return status;
    }
    axon_verbs_dev_addr_pack(&w->dev, addr);
    for (m = 0; m < size; ++m) {
        qpn = (m == rank) ? 0 : team->peers[m].qp->qp_num;
        memcpy((uint8_t *)addr + AXON_VERBS_DEV_ADDR_LEN + m * sizeof(qpn), &qpn, sizeof(qpn));
    }
    *team_p = team;
    return AXON_OK;
}

static axon_status_t axon_xc_qp_connect(axon_xc_team_t *team, axon_dev_qp_t *qp,
                                        const axon_verbs_dev_addr_t *addr, uint32_t qpn)
{
    const axon_xc_config_t *c = team->worker->config;
    axon_verbs_rc_peer_t peer;

    memset(&peer, 0, sizeof(peer));
    peer.addr          = *addr;
    peer.qpn           = qpn;
    peer.path_mtu      = axon_verbs_path_mtu(&team->worker->dev, addr);
    peer.timeout       = axon_verbs_timeout_exp(c->timeout);
    peer.retry_cnt     = (uint8_t)c->retry_count;
    peer.rnr_retry     = 7;    /* a receiver a ring behind catches up when it gets there */
    peer.min_rnr_timer = AXON_XC_MIN_RNR_TIMER;
    peer.max_rd_atomic = 1;
    return axon_verbs_qp_rc_connect(&team->worker->dev, qp, &peer);
}

static axon_status_t axon_xc_team_connect(axon_xc_team_t *team, const void *addrs)
{
    size_t len = axon_xc_team_addr_len(team->size);
    const uint8_t *mine = (const uint8_t *)addrs + team->rank * len, *a;
    axon_verbs_dev_addr_t addr;
    axon_status_t status;
    uint32_t m, qpn;

    axon_verbs_dev_addr_unpack(mine, &addr);
    status = axon_xc_qp_connect(team, team->mqp, &addr, team->mqp->qp_num);
    for (m = 0; (m < team->size) && (status == AXON_OK); ++m) {
        if (m == team->rank) {
            continue;
        }
        a = (const uint8_t *)addrs + m * len;
        axon_verbs_dev_addr_unpack(a, &addr);
        if (!axon_verbs_dev_addr_reachable(&team->worker->dev, &addr)) {
            axon_error("xchannel: %s cannot reach member %u's device", team->worker->dev.name,
                       m);
            return AXON_ERR_UNREACHABLE;
        }
        /* member m's QP to us is the rank-th of its list */
        memcpy(&qpn, a + AXON_VERBS_DEV_ADDR_LEN + team->rank * sizeof(qpn), sizeof(qpn));
        status = axon_xc_qp_connect(team, team->peers[m].qp, &addr, qpn);
        if (status == AXON_OK) {
            status = axon_xc_ring_post(team, m, AXON_XC_RING);
        }
    }
    return status;
}

static void axon_xc_team_fail(axon_xc_team_t *team)
{
    uint32_t m;

    if (team->failed == AXON_OK) {
        team->failed = AXON_ERR_CONNECTION_RESET;
    }
    /* ERR flushes every WR: the chains' tasks complete in error, nothing is
     * written into the collectives' buffers any more */
    (void)axon_verbs_qp_to_err(team->mqp);
    for (m = 0; m < team->size; ++m) {
        if (m != team->rank) {
            (void)axon_verbs_qp_to_err(team->peers[m].qp);
        }
    }
}

const axon_coll_offload_ops_t axon_xc_ops = {
    .worker_open   = axon_xc_worker_open,
    .worker_close  = axon_xc_worker_close,
    .team_addr_len = axon_xc_team_addr_len,
    .team_open     = axon_xc_team_open,
    .team_connect  = axon_xc_team_connect,
    .team_fail     = axon_xc_team_fail,
    .team_close    = axon_xc_team_close,
    .coll_applies  = axon_xc_coll_applies,
    .coll_init     = axon_xc_coll_init,
    .coll_post     = axon_xc_coll_post,
    .coll_test     = axon_xc_coll_test,
    .coll_free     = axon_xc_coll_free,
};
