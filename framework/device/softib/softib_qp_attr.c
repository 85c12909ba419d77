/*
 * The QP state machine as data: for each (current state, new state) and QP
 * type, the attributes modify_qp requires and the ones it allows.
 *
 * RESET->INIT, INIT->RTR and RTR->RTS are exactly seed §4.5 ("All QPs",
 * "Connected QPs only" = RC and UC, "Unconnected QPs only" = UD). The other
 * transitions (INIT->INIT, RTS->RTS, RTS->SQD, SQD->SQD, SQD->RTS, SQE->RTS,
 * any->RESET, any->ERR) follow the IB specification's table as libibverbs
 * drivers apply it. A DC initiator has exactly the transitions of seed
 * §8.6.1.7's table (its INIT->INIT attributes are required there), plus
 * any->RESET and any->ERR.
 */
#include <errno.h>
#include <string.h>
#include "log.h"
#include "softib.h"

#define S_STATE    AXON_DEV_QP_STATE
#define S_CUR      AXON_DEV_QP_CUR_STATE
#define S_SQD_NTF  AXON_DEV_QP_EN_SQD_ASYNC_NOTIFY
#define S_ACCESS   AXON_DEV_QP_ACCESS_FLAGS
#define S_PKEY     AXON_DEV_QP_PKEY_INDEX
#define S_PORT     AXON_DEV_QP_PORT
#define S_QKEY     AXON_DEV_QP_QKEY
#define S_AV       AXON_DEV_QP_AV
#define S_MTU      AXON_DEV_QP_PATH_MTU
#define S_TIMEOUT  AXON_DEV_QP_TIMEOUT
#define S_RETRY    AXON_DEV_QP_RETRY_CNT
#define S_RNR      AXON_DEV_QP_RNR_RETRY
#define S_RQ_PSN   AXON_DEV_QP_RQ_PSN
#define S_RD_ATOM  AXON_DEV_QP_MAX_QP_RD_ATOMIC
#define S_ALT      AXON_DEV_QP_ALT_PATH
#define S_MIN_RNR  AXON_DEV_QP_MIN_RNR_TIMER
#define S_SQ_PSN   AXON_DEV_QP_SQ_PSN
#define S_DEST_RD  AXON_DEV_QP_MAX_DEST_RD_ATOMIC
#define S_MIG      AXON_DEV_QP_PATH_MIG_STATE
#define S_DEST_QPN AXON_DEV_QP_DEST_QPN
#define S_DC_KEY   AXON_DEV_QP_DC_KEY

typedef struct {
    int      valid;
    uint32_t req;    /* besides STATE */
    uint32_t opt;
} softib_qp_rule_t;

/* Per type: index 0 = RC, 1 = UC, 2 = UD, 3 = DC initiator */
typedef struct {
    softib_qp_rule_t type[4];
} softib_qp_transition_t;

#define ALL4(_req, _opt) {{{1, (_req), (_opt)}, {1, (_req), (_opt)}, {1, (_req), (_opt)}, \
                           {1, (_req), (_opt)}}}

/* What RC and UC (connected) and UD (unconnected) add to the seed's "All QPs" */
#define R2I_REQ     (S_PKEY | S_PORT | S_ACCESS)
#define I2R_REQ     (S_MTU)
#define I2R_CONN    (S_AV | S_DEST_QPN | S_RQ_PSN | S_DEST_RD | S_MIN_RNR)
#define I2R_OPT     (S_ACCESS | S_PKEY)
#define R2S_REQ     (S_SQ_PSN)
#define R2S_CONN    (S_TIMEOUT | S_RETRY | S_RNR | S_RD_ATOM)
#define R2S_OPT     (S_ACCESS)
#define RTS_OPT_RC  (S_CUR | S_ACCESS | S_ALT | S_MIG | S_MIN_RNR)
#define RTS_OPT_UC  (S_CUR | S_ACCESS | S_ALT | S_MIG)
#define RTS_OPT_UD  (S_CUR | S_QKEY)

static const softib_qp_transition_t softib_qp_table[7][7] = {
    [AXON_DEV_QPS_RESET] = {
        [AXON_DEV_QPS_RESET] = ALL4(0, 0),
        [AXON_DEV_QPS_INIT]  = {{{1, R2I_REQ, 0},
                                 {1, R2I_REQ, 0},
                                 {1, R2I_REQ | S_QKEY, 0},
                                 {1, S_PKEY | S_PORT | S_DC_KEY, 0}}},
        [AXON_DEV_QPS_ERR]   = ALL4(0, 0),
    },
    [AXON_DEV_QPS_INIT] = {
        [AXON_DEV_QPS_RESET] = ALL4(0, 0),
        [AXON_DEV_QPS_INIT]  = {{{1, 0, S_PKEY | S_PORT | S_ACCESS},
                                 {1, 0, S_PKEY | S_PORT | S_ACCESS},
                                 {1, 0, S_PKEY | S_PORT | S_ACCESS | S_QKEY},
                                 {1, S_PKEY | S_PORT | S_ACCESS, 0}}},
        [AXON_DEV_QPS_RTR]   = {{{1, I2R_REQ | I2R_CONN, I2R_OPT | S_ALT},
                                 {1, I2R_REQ | I2R_CONN, I2R_OPT | S_ALT},
                                 {1, I2R_REQ, I2R_OPT | S_QKEY},
                                 {1, S_AV | S_MTU, S_PKEY | S_DC_KEY}}},
        [AXON_DEV_QPS_ERR]   = ALL4(0, 0),
    },
    [AXON_DEV_QPS_RTR] = {
        [AXON_DEV_QPS_RESET] = ALL4(0, 0),
        [AXON_DEV_QPS_RTS]   = {{{1, R2S_REQ | R2S_CONN, R2S_OPT | S_ALT | S_MIN_RNR},
                                 {1, R2S_REQ | R2S_CONN, R2S_OPT | S_ALT | S_MIN_RNR},
                                 {1, R2S_REQ, R2S_OPT | S_QKEY},
                                 {1, R2S_CONN, S_ALT | S_MIN_RNR | S_MIG}}},
        [AXON_DEV_QPS_ERR]   = ALL4(0, 0),
    },
    [AXON_DEV_QPS_RTS] = {
        [AXON_DEV_QPS_RESET] = ALL4(0, 0),
        [AXON_DEV_QPS_RTS]   = {{{1, 0, RTS_OPT_RC}, {1, 0, RTS_OPT_UC}, {1, 0, RTS_OPT_UD},
                                 {1, 0, S_ALT | S_MIG | S_MIN_RNR}}},
        [AXON_DEV_QPS_SQD]   = {{{1, 0, S_SQD_NTF}, {1, 0, S_SQD_NTF}, {1, 0, S_SQD_NTF}}},
        [AXON_DEV_QPS_ERR]   = ALL4(0, 0),
    },
    [AXON_DEV_QPS_SQD] = {
        [AXON_DEV_QPS_RESET] = ALL4(0, 0),
        [AXON_DEV_QPS_RTS]   = {{{1, 0, RTS_OPT_RC}, {1, 0, RTS_OPT_UC}, {1, 0, RTS_OPT_UD}}},
        [AXON_DEV_QPS_SQD]   = {{{1, 0, S_PORT | S_AV | S_TIMEOUT | S_RETRY | S_RNR | S_RD_ATOM |
                                        S_DEST_RD | S_ALT | S_ACCESS | S_PKEY | S_MIN_RNR |
                                        S_MIG},
                                 {1, 0, S_AV | S_ALT | S_ACCESS | S_PKEY | S_MIG},
                                 {1, 0, S_PKEY | S_QKEY}}},
        [AXON_DEV_QPS_ERR]   = ALL4(0, 0),
    },
    [AXON_DEV_QPS_SQE] = {
        [AXON_DEV_QPS_RESET] = ALL4(0, 0),
        [AXON_DEV_QPS_RTS]   = {{{0, 0, 0},
                                 {1, 0, S_CUR | S_ACCESS},
                                 {1, 0, S_CUR | S_QKEY}}},
        [AXON_DEV_QPS_ERR]   = ALL4(0, 0),
    },
    [AXON_DEV_QPS_ERR] = {
        [AXON_DEV_QPS_RESET] = ALL4(0, 0),
        [AXON_DEV_QPS_ERR]   = ALL4(0, 0),
    },
};

static const char *const softib_qp_state_names[] = {
    "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"
};
static const char *const softib_qp_type_names[] = {"RC", "UC", "UD", "DCI"};

/* Names of the attribute bits, for the error line */
static const char *const softib_qp_attr_names[] = {
    "STATE", "CUR_STATE", "EN_SQD_ASYNC_NOTIFY", "ACCESS_FLAGS", "PKEY_INDEX", "PORT",
    "QKEY", "AV", "PATH_MTU", "TIMEOUT", "RETRY_CNT", "RNR_RETRY", "RQ_PSN",
    "MAX_QP_RD_ATOMIC", "ALT_PATH", "MIN_RNR_TIMER", "SQ_PSN", "MAX_DEST_RD_ATOMIC",
    "PATH_MIG_STATE", "CAP", "DEST_QPN", "DC_KEY"
};

static void softib_mask_str(uint32_t mask, char *buf, size_t max)
{
    size_t len = 0;
    unsigned bit;

    buf[0] = '\0';
    for (bit = 0; bit < sizeof(softib_qp_attr_names) / sizeof(softib_qp_attr_names[0]); bit++) {
        if ((mask & (1u << bit)) && (len < max)) {
            len += (size_t)snprintf(buf + len, max - len, "%s%s", len ? "|" : "",
                                    softib_qp_attr_names[bit]);
        }
    }
    if ((mask >> bit) && (len < max)) {
        snprintf(buf + len, max - len, "%s0x%x", len ? "|" : "", mask >> bit << bit);
    }
}

static int softib_qp_attr_values(softib_qp_t *qp, const axon_dev_qp_attr_t *attr, int mask)
{
    softib_dev_t *dev = softib_qp_dev(qp);
    const unsigned access_all = AXON_DEV_ACCESS_LOCAL_WRITE | AXON_DEV_ACCESS_REMOTE_WRITE |
                                AXON_DEV_ACCESS_REMOTE_READ | AXON_DEV_ACCESS_REMOTE_ATOMIC |
                                AXON_DEV_ACCESS_MW_BIND;

#define CHECK(_bit, _cond, ...)                    \
    if ((mask & (_bit)) && !(_cond)) {             \
        axon_error("softib: modify_qp: " __VA_ARGS__); \
        return EINVAL;                             \
    }
    CHECK(S_PKEY, attr->pkey_index == 0, "pkey_index %u (the table has entry 0 only)",
          attr->pkey_index);
    CHECK(S_PORT, attr->port_num == SOFTIB_PORT_NUM, "port_num %u (softib has port 1 only)",
          attr->port_num);
    CHECK(S_ACCESS, !(attr->qp_access_flags & ~access_all), "qp_access_flags 0x%x",
          attr->qp_access_flags);
    CHECK(S_MTU, (attr->path_mtu >= AXON_DEV_MTU_256) && (attr->path_mtu <= dev->mtu),
          "path_mtu %d (port MTU is %d)", (int)attr->path_mtu, (int)dev->mtu);
    CHECK(S_TIMEOUT, attr->timeout <= 31, "timeout %u (0..31)", attr->timeout);
    CHECK(S_RETRY, attr->retry_cnt <= 7, "retry_cnt %u (0..7)", attr->retry_cnt);
    CHECK(S_RNR, attr->rnr_retry <= 7, "rnr_retry %u (0..7)", attr->rnr_retry);
    CHECK(S_MIN_RNR, attr->min_rnr_timer <= 31, "min_rnr_timer %u (0..31)",
          attr->min_rnr_timer);
    CHECK(S_RD_ATOM, attr->max_rd_atomic <= dev->attr.max_qp_init_rd_atom,
          "max_rd_atomic %u (max %d)", attr->max_rd_atomic, dev->attr.max_qp_init_rd_atom);
    CHECK(S_DEST_RD, attr->max_dest_rd_atomic <= dev->attr.max_qp_rd_atom,
          "max_dest_rd_atomic %u (max %d)", attr->max_dest_rd_atomic, dev->attr.max_qp_rd_atom);
    CHECK(S_RQ_PSN, attr->rq_psn <= SOFTIB_PSN_MASK, "rq_psn 0x%x (24 bits)", attr->rq_psn);
    CHECK(S_SQ_PSN, attr->sq_psn <= SOFTIB_PSN_MASK, "sq_psn 0x%x (24 bits)", attr->sq_psn);
    CHECK(S_DEST_QPN, attr->dest_qp_num <= SOFTIB_PSN_MASK, "dest_qp_num 0x%x (24 bits)",
          attr->dest_qp_num);
    CHECK(S_MIG, attr->path_mig_state <= AXON_DEV_MIG_ARMED, "path_mig_state %d",
          (int)attr->path_mig_state);
    CHECK(S_ALT, (attr->alt_port_num == SOFTIB_PORT_NUM) && (attr->alt_pkey_index == 0) &&
          (attr->alt_timeout <= 31), "alt path: port %u, pkey_index %u, timeout %u",
          attr->alt_port_num, attr->alt_pkey_index, attr->alt_timeout);
#undef CHECK
    if ((mask & S_AV) && softib_ah_attr_check("modify_qp ah_attr", &attr->ah_attr)) {
        return EINVAL;
    }
    if ((mask & S_ALT) && softib_ah_attr_check("modify_qp alt_ah_attr", &attr->alt_ah_attr)) {
        return EINVAL;
    }
    return 0;
}

int softib_qp_attr_check(softib_qp_t *qp, const axon_dev_qp_attr_t *attr, int mask,
                         axon_dev_qp_state_t *new_state_p)
{
    axon_dev_qp_state_t cur = qp->super.state, next;
    const softib_qp_rule_t *rule;
    unsigned type = (qp->super.qp_type == AXON_DEV_QPT_DC_INI) ? 3 :
                    (unsigned)qp->super.qp_type - AXON_DEV_QPT_RC;
    uint32_t umask = (uint32_t)mask, missing, extra;
    char buf[256];

    next = (umask & S_STATE) ? attr->qp_state : cur;
    if ((unsigned)next > AXON_DEV_QPS_ERR) {
        axon_error("softib: modify_qp: qp_state %d is not a state", (int)next);
        return EINVAL;
    }
    if ((umask & S_CUR) && (attr->cur_qp_state != cur)) {
        axon_error("softib: modify_qp: cur_qp_state %d but the QP is in %s",
                   (int)attr->cur_qp_state, softib_qp_state_names[cur]);
        return EINVAL;
    }
    rule = &softib_qp_table[cur][next].type[type];
    if (!rule->valid) {
        axon_error("softib: modify_qp: %s QP 0x%x cannot go from %s to %s",
                   softib_qp_type_names[type], qp->super.qp_num, softib_qp_state_names[cur],
                   softib_qp_state_names[next]);
        return EINVAL;
    }
    missing = rule->req & ~umask;
    extra   = umask & ~(rule->req | rule->opt | S_STATE);
    if (missing) {
        softib_mask_str(missing, buf, sizeof(buf));
        axon_error("softib: modify_qp: %s QP 0x%x %s->%s lacks required %s",
                   softib_qp_type_names[type], qp->super.qp_num, softib_qp_state_names[cur],
                   softib_qp_state_names[next], buf);
        return EINVAL;
    }
    if (extra) {
        softib_mask_str(extra, buf, sizeof(buf));
        axon_error("softib: modify_qp: %s QP 0x%x %s->%s does not allow %s",
                   softib_qp_type_names[type], qp->super.qp_num, softib_qp_state_names[cur],
                   softib_qp_state_names[next], buf);
        return EINVAL;
    }
    if (softib_qp_attr_values(qp, attr, mask)) {
        return EINVAL;
    }
    *new_state_p = next;
    return 0;
}
