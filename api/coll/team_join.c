/*
 * A team's join: it is ready once every member made it and the members
 * agree on collective offload. Round 1 allgathers one word per member: can
 * it offload over this team (coll_offload.c), or why not. If all can,
 * round 2 allgathers the offload queues' addresses and each member connects
 * its queues; round 3 (a word each again) says whether all did, since a
 * device chain may send only to queues that are ready. A team of one is
 * ready at once.
 */
#include <stdlib.h>
#include <string.h>
#include "coll.h"
#include "log.h"

enum {
    AXON_TEAM_JOIN_WORDS,
    AXON_TEAM_JOIN_ADDRS,
    AXON_TEAM_JOIN_CONNECTED,
};

typedef struct axon_team_join {
    int       round;
    uint64_t  mine;
    uint64_t *words;      /* every member's word (rounds 1 and 3) */
    uint8_t  *addrs;      /* round 2: a status word then the address, per member */
    uint8_t  *my_addr;
    size_t    addr_len;
} axon_team_join_t;

static void axon_team_join_done(axon_coll_h coll);

static axon_status_t axon_team_join_round(axon_team_h team, int round, const void *src,
                                          void *dst, size_t bytes)
{
    axon_coll_args_t args;
    axon_status_t status;

    memset(&args, 0, sizeof(args));
    args.coll  = AXON_COLL_ALLGATHER;
    args.src   = src;
    args.dst   = dst;
    args.count = bytes;
    args.dt    = AXON_DT_UINT8;
    team->joining->round = round;
    status = axon_coll_init_internal(team, &args, &team->join);
    if (status != AXON_OK) {
        return status;
    }
    team->join->done = axon_team_join_done;
    status = axon_coll_post(team->join);   /* may end (and call back) inside */
    return (status == AXON_OK) ? AXON_INPROGRESS : status;
}

/* Index of the first member whose word lacks bit 0, or size. */
static uint32_t axon_team_join_refuser(const axon_team_h team, const uint64_t *words)
{
    uint32_t i;

    for (i = 0; (i < team->size) && (words[i] & 1); ++i) {
    }
    return i;
}

static void axon_team_join_close_xc(axon_team_h team)
{
    if (team->xc != NULL) {
        axon_coll_offload_ops(team->worker)->team_close(team->xc);
        team->xc = NULL;
    }
}

/* Round 1 ended: open the queues if all can offload. AXON_INPROGRESS: round 2
 * is posted; AXON_OK: ready without offload. */
static axon_status_t axon_team_join_open(axon_team_h team)
{
    axon_team_join_t *j = team->joining;
    const axon_coll_offload_ops_t *ops = axon_coll_offload_ops(team->worker);
    uint32_t refuser = axon_team_join_refuser(team, j->words);
    uint64_t ok;

    if (refuser < team->size) {
        team->xc_refusal = j->words[refuser] | ((uint64_t)refuser << 16);
        return AXON_OK;
    }
    j->addr_len = sizeof(uint64_t) + ops->team_addr_len(team->size);
    j->addrs    = calloc(team->size, j->addr_len);
    j->my_addr  = calloc(1, j->addr_len);
    if ((j->addrs == NULL) || (j->my_addr == NULL)) {
        return AXON_ERR_NO_MEMORY;
    }
    ok = (ops->team_open(axon_coll_offload_worker(team->worker), team->rank, team->size,
                         &team->xc, j->my_addr + sizeof(uint64_t)) == AXON_OK);
    memcpy(j->my_addr, &ok, sizeof(ok));
    return axon_team_join_round(team, AXON_TEAM_JOIN_ADDRS, j->my_addr, j->addrs, j->addr_len);
}

/* Round 2 ended: connect if every member opened its queues. */
static axon_status_t axon_team_join_connect(axon_team_h team)
{
    axon_team_join_t *j = team->joining;
    uint64_t ok = 1;
    uint32_t i, bad = 0;

    for (i = 0; (i < team->size) && ok; ++i) {
        memcpy(&ok, j->addrs + i * j->addr_len, sizeof(ok));
        bad = i;    /* the member whose queues could not be opened, if !ok */
    }
    if (ok) {
        /* the addresses without their status words, as the component wants them */
        free(j->my_addr);
        j->my_addr = malloc(team->size * (j->addr_len - sizeof(uint64_t)));
        if (j->my_addr == NULL) {
            return AXON_ERR_NO_MEMORY;
        }
        for (i = 0; i < team->size; ++i) {
            memcpy(j->my_addr + i * (j->addr_len - sizeof(uint64_t)),
                   j->addrs + i * j->addr_len + sizeof(uint64_t), j->addr_len - sizeof(uint64_t));
        }
        ok  = (axon_coll_offload_ops(team->worker)->team_connect(team->xc, j->my_addr) == AXON_OK);
        bad = team->rank;
    }
    j->mine = ok ? AXON_COLL_XC_OK : axon_coll_xc_word(AXON_COLL_XC_OPEN, bad);
    return axon_team_join_round(team, AXON_TEAM_JOIN_CONNECTED, &j->mine, j->words,
                                sizeof(j->mine));
}

static void axon_team_join_end(axon_team_h team, axon_status_t status)
{
    uint32_t refuser;

    if ((status == AXON_OK) && (team->joining->round == AXON_TEAM_JOIN_CONNECTED)) {
        refuser = axon_team_join_refuser(team, team->joining->words);
        if (refuser < team->size) {
            team->xc_refusal = team->joining->words[refuser] | ((uint64_t)refuser << 16);
            axon_team_join_close_xc(team);
        }
    }
    axon_team_join_cleanup(team);
    if (status != AXON_OK) {
        axon_team_join_close_xc(team);
        axon_error("team 0x%x: rank %u of %u could not join: %s", team->id, team->rank,
                   team->size, axon_status_string(status));
    } else if (team->xc != NULL) {
        axon_debug("team 0x%x: collectives offloaded", team->id);
    }
    if (team->status == AXON_INPROGRESS) {
        team->status = status;
    }
}

static void axon_team_join_done(axon_coll_h coll)
{
    axon_team_h team = coll->team;
    axon_status_t status = coll->status;

    team->join = NULL;
    axon_coll_free(coll);    /* nothing touches it after this callback */
    if ((status == AXON_OK) && (team->joining->round == AXON_TEAM_JOIN_WORDS)) {
        status = axon_team_join_open(team);
    } else if ((status == AXON_OK) && (team->joining->round == AXON_TEAM_JOIN_ADDRS)) {
        status = axon_team_join_connect(team);
    }
    if (status != AXON_INPROGRESS) {
        axon_team_join_end(team, status);   /* else the next round is posted */
    }
}

axon_status_t axon_team_join_start(axon_team_h team)
{
    axon_team_join_t *j;
    axon_status_t status;

    team->status = AXON_INPROGRESS;
    if (team->size == 1) {
        team->status = AXON_OK;
        return AXON_OK;
    }
    j = calloc(1, sizeof(*j));
    if ((j == NULL) || ((j->words = calloc(team->size, sizeof(uint64_t))) == NULL)) {
        free(j);
        return AXON_ERR_NO_MEMORY;
    }
    team->joining = j;
    j->mine       = axon_coll_offload_word(team);
    status = axon_team_join_round(team, AXON_TEAM_JOIN_WORDS, &j->mine, j->words,
                                  sizeof(j->mine));
    return (status == AXON_INPROGRESS) ? AXON_OK : status;
}

void axon_team_join_cleanup(axon_team_h team)
{
    axon_team_join_t *j = team->joining;

    if (j == NULL) {
        return;
    }

    free(j->words);
    free(j->addrs);
    free(j->my_addr);
    free(j);
    team->joining = NULL;
}

void axon_team_offload_close(axon_team_h team)
{
    axon_team_join_cleanup(team);
    axon_team_join_close_xc(team);
}
