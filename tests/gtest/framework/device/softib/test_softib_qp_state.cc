/*
 * The QP state machine of seed §4.5 (masks: softib_env.h), per QP type:
 *   - each bring-up transition (RESET->INIT, INIT->RTR, RTR->RTS) succeeds
 *     with exactly its required attributes, fails with EINVAL for each
 *     required attribute left out and for each attribute it does not allow,
 *     leaving the QP unchanged, and accepts each optional attribute;
 *   - query_qp returns what the transitions set;
 *   - the other legal transitions of the IB spec (any -> RESET, any -> ERR,
 *     INIT -> INIT, RTS -> RTS, RTS <-> SQD, SQD -> SQD) succeed, and every
 *     other (from, to) pair fails with EINVAL. SQE is not reachable through
 *     modify_qp (softib moves a QP in error to ERR), so it is only checked
 *     as a target, which is always illegal.
 */
#include "softib_env.h"

#include <sstream>

namespace {

struct BitName {
    int         bit;
    const char *name;
};

/* Every attribute bit but STATE, with the name the test names use. */
const BitName kAttrBits[] = {
    {AXON_DEV_QP_CUR_STATE, "CurState"},
    {AXON_DEV_QP_EN_SQD_ASYNC_NOTIFY, "EnSqdAsyncNotify"},
    {AXON_DEV_QP_ACCESS_FLAGS, "AccessFlags"},
    {AXON_DEV_QP_PKEY_INDEX, "PkeyIndex"},
    {AXON_DEV_QP_PORT, "Port"},
    {AXON_DEV_QP_QKEY, "Qkey"},
    {AXON_DEV_QP_AV, "Av"},
    {AXON_DEV_QP_PATH_MTU, "PathMtu"},
    {AXON_DEV_QP_TIMEOUT, "Timeout"},
    {AXON_DEV_QP_RETRY_CNT, "RetryCnt"},
    {AXON_DEV_QP_RNR_RETRY, "RnrRetry"},
    {AXON_DEV_QP_RQ_PSN, "RqPsn"},
    {AXON_DEV_QP_MAX_QP_RD_ATOMIC, "MaxQpRdAtomic"},
    {AXON_DEV_QP_ALT_PATH, "AltPath"},
    {AXON_DEV_QP_MIN_RNR_TIMER, "MinRnrTimer"},
    {AXON_DEV_QP_SQ_PSN, "SqPsn"},
    {AXON_DEV_QP_MAX_DEST_RD_ATOMIC, "MaxDestRdAtomic"},
    {AXON_DEV_QP_PATH_MIG_STATE, "PathMigState"},
    {AXON_DEV_QP_CAP, "Cap"},
    {AXON_DEV_QP_DEST_QPN, "DestQpn"},
};

const char *const kStateNames[] = {"Reset", "Init", "Rtr", "Rts", "Sqd", "Sqe", "Err"};

const char *type_name(axon_dev_qp_type_t type)
{
    switch (type) {
    case AXON_DEV_QPT_RC: return "Rc";
    case AXON_DEV_QPT_UC: return "Uc";
    default:              return "Ud";
    }
}

const axon_dev_qp_type_t kTypes[] = {AXON_DEV_QPT_RC, AXON_DEV_QPT_UC, AXON_DEV_QPT_UD};

/* ---------------------------------------------------------------- the table */

/* Masks of a (from, to) pair for a type; valid = 0 for an illegal pair. */
struct Transition {
    bool valid;
    int  required;
    int  optional;
};

Transition transition(axon_dev_qp_type_t type, int from, int to)
{
    TransitionMasks m;

    if ((to == AXON_DEV_QPS_RESET) || (to == AXON_DEV_QPS_ERR)) {
        return {true, kStateBit, 0};
    }
    switch (from) {
    case AXON_DEV_QPS_RESET:
        if (to == AXON_DEV_QPS_INIT) {
            m = reset_to_init_masks(type);
            return {true, m.required, m.optional};
        }
        break;
    case AXON_DEV_QPS_INIT:
        if (to == AXON_DEV_QPS_INIT) {
            /* what RESET->INIT sets may be changed */
            m = reset_to_init_masks(type);
            return {true, kStateBit, m.required & ~kStateBit};
        }
        if (to == AXON_DEV_QPS_RTR) {
            m = init_to_rtr_masks(type);
            return {true, m.required, m.optional};
        }
        break;
    case AXON_DEV_QPS_RTR:
        if (to == AXON_DEV_QPS_RTS) {
            m = rtr_to_rts_masks(type);
            return {true, m.required, m.optional};
        }
        break;
    case AXON_DEV_QPS_RTS:
        if (to == AXON_DEV_QPS_RTS) {
            return {true, kStateBit, rtr_to_rts_masks(type).optional};
        }
        if (to == AXON_DEV_QPS_SQD) {
            return {true, kStateBit, AXON_DEV_QP_EN_SQD_ASYNC_NOTIFY};
        }
        break;
    case AXON_DEV_QPS_SQD:
        if (to == AXON_DEV_QPS_RTS) {
            return {true, kStateBit, rtr_to_rts_masks(type).optional};
        }
        if (to == AXON_DEV_QPS_SQD) {
            return {true, kStateBit, 0};
        }
        break;
    }
    return {false, 0, 0};
}

bool is_bringup(int from, int to)
{
    return ((from == AXON_DEV_QPS_RESET) && (to == AXON_DEV_QPS_INIT)) ||
           ((from == AXON_DEV_QPS_INIT) && (to == AXON_DEV_QPS_RTR)) ||
           ((from == AXON_DEV_QPS_RTR) && (to == AXON_DEV_QPS_RTS));
}

/* ---------------------------------------------------------------- cases */

typedef enum {
    CASE_EXACT,      /* exactly the required mask: succeeds */
    CASE_MISSING,    /* one required bit removed: EINVAL, unchanged */
    CASE_OPTIONAL,   /* required + one optional bit: succeeds */
    CASE_DISALLOWED, /* required + one bit neither required nor optional: EINVAL */
    CASE_QUERY,      /* required + all optional: query_qp returns the values */
    CASE_LEGAL,      /* a transition outside bring-up: succeeds with STATE */
    CASE_ILLEGAL,    /* a pair that is not a transition: EINVAL */
} case_kind_t;

struct StateCase {
    axon_dev_qp_type_t type;
    int                from;
    int                to;
    case_kind_t        kind;
    int                bit;   /* MISSING / OPTIONAL / DISALLOWED */
    std::string        name;
};

/*
 * A rule is one gtest case: a set of checks, each on a fresh QP. Rules are
 * grouped so that the suite stays quick when every test runs in its own
 * process: per type and bring-up transition, "Requires<the required
 * attributes>" (exactly them succeeds, query_qp returns them, each one left
 * out fails), "Accepts<the optional ones>" and "RejectsOtherAttributes";
 * per type and source state, "LegalFrom<state>" and "IllegalFrom<state>".
 * A failing check names itself, e.g. "RcInitToRtrRejectsSqPsn".
 */
struct StateRule {
    std::string            name;
    std::vector<StateCase> checks;
};

void PrintTo(const StateRule &r, std::ostream *os)
{
    *os << r.name << " (" << r.checks.size() << " checks)";
}

std::string bit_names(int mask)
{
    std::string names;
    for (const BitName &b : kAttrBits) {
        if (mask & b.bit) {
            names += b.name;
        }
    }
    return names;
}

std::vector<StateRule> make_rules()
{
    std::vector<StateRule> rules;

    for (axon_dev_qp_type_t type : kTypes) {
        std::string t = type_name(type);
        /* SQE cannot be reached through modify_qp; it is a target only. */
        for (int from = AXON_DEV_QPS_RESET; from <= AXON_DEV_QPS_ERR; ++from) {
            if (from == AXON_DEV_QPS_SQE) {
                continue;
            }
            StateRule legal   = {t + "LegalFrom" + kStateNames[from], {}};
            StateRule illegal = {t + "IllegalFrom" + kStateNames[from], {}};
            for (int to = AXON_DEV_QPS_RESET; to <= AXON_DEV_QPS_ERR; ++to) {
                std::string pair = t + kStateNames[from] + "To" + kStateNames[to];
                Transition  tr   = transition(type, from, to);
                if (!tr.valid) {
                    illegal.checks.push_back({type, from, to, CASE_ILLEGAL, 0,
                                              "Illegal" + pair});
                    continue;
                }
                if (!is_bringup(from, to)) {
                    legal.checks.push_back({type, from, to, CASE_LEGAL, 0, pair});
                    /* a bit no transition outside INIT->RTR takes */
                    legal.checks.push_back({type, from, to, CASE_DISALLOWED,
                                            AXON_DEV_QP_DEST_QPN, pair + "RejectsDestQpn"});
                    continue;
                }
                StateRule req = {pair + "Requires" + bit_names(tr.required), {}};
                StateRule opt = {pair + "Accepts" + bit_names(tr.optional), {}};
                StateRule rej = {pair + "RejectsOtherAttributes", {}};
                req.checks.push_back({type, from, to, CASE_EXACT, 0, pair + "WithRequiredMask"});
                req.checks.push_back({type, from, to, CASE_QUERY, 0,
                                      pair + "QueryReturnsValuesSet"});
                for (const BitName &b : kAttrBits) {
                    if (tr.required & b.bit) {
                        req.checks.push_back({type, from, to, CASE_MISSING, b.bit,
                                              pair + "Requires" + b.name});
                    } else if (tr.optional & b.bit) {
                        opt.checks.push_back({type, from, to, CASE_OPTIONAL, b.bit,
                                              pair + "Accepts" + b.name});
                    } else {
                        rej.checks.push_back({type, from, to, CASE_DISALLOWED, b.bit,
                                              pair + "Rejects" + b.name});
                    }
                }
                rules.push_back(req);
                if (!opt.checks.empty()) {
                    rules.push_back(opt);
                }
                rules.push_back(rej);
            }
            rules.push_back(legal);
            rules.push_back(illegal);
        }
    }
    return rules;
}

/* ---------------------------------------------------------------- the fixture */

class SoftibQpState : public SoftibTest,
                      public ::testing::WithParamInterface<StateRule> {
protected:
    Qp qp_;

    void run_check(const StateCase &c);

    /* Valid values for every attribute of a modify to `to` from `from`. */
    void fill_all(int from, int to, axon_dev_qp_attr_t *a)
    {
        memset(a, 0, sizeof(*a));
        a->qp_state            = (axon_dev_qp_state_t)to;
        a->cur_qp_state        = (axon_dev_qp_state_t)from;
        a->en_sqd_async_notify = 1;
        a->qp_access_flags     = AXON_DEV_ACCESS_REMOTE_WRITE | AXON_DEV_ACCESS_REMOTE_READ;
        a->pkey_index          = 0;
        a->port_num            = 1;
        a->qkey                = 0x12345678;
        fill_ah_attr(&a->ah_attr, dev_.gid);
        a->path_mtu            = AXON_DEV_MTU_2048;
        a->timeout             = 17;
        a->retry_cnt           = 5;
        a->rnr_retry           = 6;
        a->rq_psn              = 0x1234;
        a->max_rd_atomic       = 2;
        fill_ah_attr(&a->alt_ah_attr, dev_.gid);
        a->alt_port_num        = 1;
        a->alt_pkey_index      = 0;
        a->alt_timeout         = 16;
        a->min_rnr_timer       = 12;
        a->sq_psn              = 0x5678;
        a->max_dest_rd_atomic  = 3;
        a->path_mig_state      = AXON_DEV_MIG_MIGRATED;
        a->cap.max_send_wr     = 64;
        a->cap.max_recv_wr     = 64;
        a->cap.max_send_sge    = 4;
        a->cap.max_recv_sge    = 4;
        a->dest_qp_num         = qp_.qpn();
    }

    /* Drive the new QP to state through the standard bring-up. */
    void reach(int state)
    {
        const axon_dev_qp_type_t type = qp_.type;
        axon_dev_qp_attr_t       a;

        if (state == AXON_DEV_QPS_RESET) {
            return;
        }
        if (state == AXON_DEV_QPS_ERR) {
            memset(&a, 0, sizeof(a));
            a.qp_state = AXON_DEV_QPS_ERR;
            ASSERT_EQ(0, axon_dev_modify_qp(qp_.qp, &a, AXON_DEV_QP_STATE));
            return;
        }
        ASSERT_EQ(0, dev_.to_init(qp_)) << type_name(type) << " RESET->INIT";
        if (state == AXON_DEV_QPS_INIT) {
            return;
        }
        ASSERT_EQ(0, dev_.to_rtr(qp_, qp_.qpn(), dev_.gid, kPsnA)) << "INIT->RTR";
        if (state == AXON_DEV_QPS_RTR) {
            return;
        }
        ASSERT_EQ(0, dev_.to_rts(qp_, kPsnA)) << "RTR->RTS";
        if (state == AXON_DEV_QPS_RTS) {
            return;
        }
        memset(&a, 0, sizeof(a));
        a.qp_state = AXON_DEV_QPS_SQD;
        ASSERT_EQ(0, axon_dev_modify_qp(qp_.qp, &a, AXON_DEV_QP_STATE)) << "RTS->SQD";
    }

    void expect_state(int state, const char *what)
    {
        EXPECT_EQ(state, query_state(qp_.qp)) << what << ": query_qp state";
        EXPECT_EQ(state, (int)qp_.qp->state) << what << ": qp->state";
    }

    /* query_qp after a transition with required + optional: each value set is back. */
    void check_query(const Transition &tr, const axon_dev_qp_attr_t &set)
    {
        axon_dev_qp_attr_t      q;
        axon_dev_qp_init_attr_t init;
        int                     mask = tr.required | tr.optional;

        memset(&q, 0, sizeof(q));
        ASSERT_EQ(0, axon_dev_query_qp(qp_.qp, &q, -1 & ~AXON_DEV_QP_CUR_STATE, &init));
        EXPECT_EQ(set.qp_state, q.qp_state);
#define EXPECT_FIELD(_bit, _field)                              \
    do {                                                        \
        if (mask & (_bit)) {                                    \
            EXPECT_EQ(set._field, q._field) << #_field;         \
        }                                                       \
    } while (0)
        EXPECT_FIELD(AXON_DEV_QP_ACCESS_FLAGS, qp_access_flags);
        EXPECT_FIELD(AXON_DEV_QP_PKEY_INDEX, pkey_index);
        EXPECT_FIELD(AXON_DEV_QP_PORT, port_num);
        EXPECT_FIELD(AXON_DEV_QP_QKEY, qkey);
        EXPECT_FIELD(AXON_DEV_QP_PATH_MTU, path_mtu);
        EXPECT_FIELD(AXON_DEV_QP_DEST_QPN, dest_qp_num);
        EXPECT_FIELD(AXON_DEV_QP_RQ_PSN, rq_psn);
        EXPECT_FIELD(AXON_DEV_QP_SQ_PSN, sq_psn);
        EXPECT_FIELD(AXON_DEV_QP_TIMEOUT, timeout);
        EXPECT_FIELD(AXON_DEV_QP_RETRY_CNT, retry_cnt);
        EXPECT_FIELD(AXON_DEV_QP_RNR_RETRY, rnr_retry);
        EXPECT_FIELD(AXON_DEV_QP_MIN_RNR_TIMER, min_rnr_timer);
        EXPECT_FIELD(AXON_DEV_QP_MAX_QP_RD_ATOMIC, max_rd_atomic);
        EXPECT_FIELD(AXON_DEV_QP_MAX_DEST_RD_ATOMIC, max_dest_rd_atomic);
#undef EXPECT_FIELD
        if (mask & AXON_DEV_QP_AV) {
            EXPECT_EQ(1, q.ah_attr.is_global);
            EXPECT_EQ(0, memcmp(set.ah_attr.grh.dgid.raw, q.ah_attr.grh.dgid.raw, 16))
                << "dgid " << gid_str(q.ah_attr.grh.dgid);
            EXPECT_EQ(set.ah_attr.port_num, q.ah_attr.port_num);
        }
        if (mask & AXON_DEV_QP_ALT_PATH) {
            EXPECT_EQ(set.alt_port_num, q.alt_port_num);
            EXPECT_EQ(set.alt_timeout, q.alt_timeout);
            EXPECT_EQ(0, memcmp(set.alt_ah_attr.grh.dgid.raw, q.alt_ah_attr.grh.dgid.raw, 16));
        }
        /* the init attributes come back too */
        EXPECT_EQ(qp_.type, init.qp_type);
        EXPECT_EQ(qp_.scq, init.send_cq);
        EXPECT_EQ(qp_.rcq, init.recv_cq);
        EXPECT_GE(init.cap.max_send_wr, 64u);
        EXPECT_GE(init.cap.max_recv_wr, 64u);
    }
};

/* One check on a fresh QP, destroyed at the end. */
void SoftibQpState::run_check(const StateCase &c)
{
    Transition       tr = transition(c.type, c.from, c.to);
    axon_dev_qp_attr_t a;
    int                mask = 0;
    int                ret;

    ASSERT_EQ(0, dev_.qp(&qp_, c.type)) << type_name(c.type);
    reach(c.from);
    if (HasFatalFailure()) {
        return;
    }
    expect_state(c.from, "before");
    fill_all(c.from, c.to, &a);

    switch (c.kind) {
    case CASE_EXACT:
    case CASE_LEGAL:
        mask = tr.required;
        break;
    case CASE_MISSING:
        mask = tr.required & ~c.bit;
        break;
    case CASE_OPTIONAL:
    case CASE_DISALLOWED:
        mask = tr.required | c.bit;
        break;
    case CASE_QUERY:
        mask = tr.required | tr.optional;
        break;
    case CASE_ILLEGAL:
        /* a full set of attributes does not make an illegal pair legal */
        mask = kStateBit;
        break;
    }

    ret = axon_dev_modify_qp(qp_.qp, &a, mask);
    std::ostringstream what;
    what << c.name << " (mask 0x" << std::hex << mask << ")";
    switch (c.kind) {
    case CASE_EXACT:
    case CASE_LEGAL:
    case CASE_OPTIONAL:
        ASSERT_EQ(0, ret) << what.str();
        expect_state(c.to, what.str().c_str());
        break;
    case CASE_QUERY:
        ASSERT_EQ(0, ret) << what.str();
        check_query(tr, a);
        break;
    case CASE_MISSING:
    case CASE_DISALLOWED:
    case CASE_ILLEGAL:
        EXPECT_EQ(EINVAL, ret) << what.str();
        expect_state(c.from, what.str().c_str());
        break;
    }
}

TEST_P(SoftibQpState, Rule)
{
    open_dev();
    for (const StateCase &c : GetParam().checks) {
        SCOPED_TRACE(c.name);
        run_check(c);
        if (qp_.qp) {
            dev_.destroy_qp(&qp_);
        }
        if (HasFatalFailure()) {
            return;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Seed, SoftibQpState, ::testing::ValuesIn(make_rules()),
                         [](const ::testing::TestParamInfo<StateRule> &info) {
                             return info.param.name;
                         });

/* ---------------------------------------------------------------- values */

class SoftibQpValues : public SoftibTest {};

/* A failed modify leaves the attributes of the last successful one. */
TEST_F(SoftibQpValues, FailedModifyKeepsAttributes)
{
    Qp                      q;
    axon_dev_qp_attr_t      a, got;
    axon_dev_qp_init_attr_t init;

    open_dev();
    ASSERT_EQ(0, dev_.qp(&q, AXON_DEV_QPT_RC));
    ASSERT_EQ(0, dev_.to_init(q));
    ASSERT_EQ(0, dev_.to_rtr(q, 0x4242, dev_.gid, 0x777));
    /* RTR->RTS with a bad value as well as a missing attribute */
    SoftibDev::rts_attrs(AXON_DEV_QPT_RC, 0x999, kTimeout, kRetryCnt, kRnrRetry, &a);
    EXPECT_EQ(EINVAL, axon_dev_modify_qp(q.qp, &a, AXON_DEV_QP_STATE | AXON_DEV_QP_SQ_PSN));
    memset(&got, 0, sizeof(got));
    ASSERT_EQ(0, axon_dev_query_qp(q.qp, &got, -1, &init));
    EXPECT_EQ(AXON_DEV_QPS_RTR, got.qp_state);
    EXPECT_EQ(0x4242u, got.dest_qp_num);
    EXPECT_EQ(0x777u, got.rq_psn);
}

/* Values outside what the port and device allow are refused (EINVAL). */
TEST_F(SoftibQpValues, RejectsBadPortPkeyMtuAndRdAtomic)
{
    Qp                 q;
    axon_dev_qp_attr_t a;
    int                mask;

    open_dev();
    ASSERT_EQ(0, dev_.qp(&q, AXON_DEV_QPT_RC));
    mask = SoftibDev::init_attrs(AXON_DEV_QPT_RC, 0, &a);
    a.port_num = 2;
    EXPECT_EQ(EINVAL, axon_dev_modify_qp(q.qp, &a, mask)) << "port 2";
    mask = SoftibDev::init_attrs(AXON_DEV_QPT_RC, 0, &a);
    a.pkey_index = 1;
    EXPECT_EQ(EINVAL, axon_dev_modify_qp(q.qp, &a, mask)) << "pkey_index 1";
    EXPECT_EQ(AXON_DEV_QPS_RESET, query_state(q.qp));
    ASSERT_EQ(0, dev_.to_init(q));

    mask = SoftibDev::rtr_attrs(AXON_DEV_QPT_RC, q.qpn(), dev_.gid, 0, kMinRnrTimer,
                                (axon_dev_mtu_t)7, &a);
    EXPECT_EQ(EINVAL, axon_dev_modify_qp(q.qp, &a, mask)) << "path_mtu 7";
    mask = SoftibDev::rtr_attrs(AXON_DEV_QPT_RC, q.qpn(), dev_.gid, 0, kMinRnrTimer, kPathMtu,
                                &a);
    a.ah_attr.is_global = 0;
    EXPECT_EQ(EINVAL, axon_dev_modify_qp(q.qp, &a, mask)) << "AV without GRH (RoCE)";
    mask = SoftibDev::rtr_attrs(AXON_DEV_QPT_RC, q.qpn(), dev_.gid, 0, kMinRnrTimer, kPathMtu,
                                &a);
    a.max_dest_rd_atomic = (uint8_t)(dev_.attr.max_qp_rd_atom + 1);
    EXPECT_EQ(EINVAL, axon_dev_modify_qp(q.qp, &a, mask)) << "max_dest_rd_atomic";
    EXPECT_EQ(AXON_DEV_QPS_INIT, query_state(q.qp));
    ASSERT_EQ(0, dev_.to_rtr(q, q.qpn(), dev_.gid, 0));

    mask = SoftibDev::rts_attrs(AXON_DEV_QPT_RC, 0, kTimeout, kRetryCnt, kRnrRetry, &a);
    a.max_rd_atomic = (uint8_t)(dev_.attr.max_qp_init_rd_atom + 1);
    EXPECT_EQ(EINVAL, axon_dev_modify_qp(q.qp, &a, mask)) << "max_rd_atomic";
    EXPECT_EQ(AXON_DEV_QPS_RTR, query_state(q.qp));
    EXPECT_EQ(0, dev_.to_rts(q, 0));
}

/* A QP whose type the device lacks cannot be created; a bad type is EINVAL. */
TEST_F(SoftibQpValues, CreateQpRejectsBadTypeAndCaps)
{
    Qp q;

    open_dev();
    EXPECT_EQ(EINVAL, dev_.qp(&q, (axon_dev_qp_type_t)9));
    EXPECT_EQ(EINVAL, dev_.qp(&q, AXON_DEV_QPT_RC, 1, nullptr, 0,
                              (uint32_t)dev_.attr.max_qp_wr + 1));
    EXPECT_EQ(EINVAL, dev_.qp(&q, AXON_DEV_QPT_RC, 1, nullptr,
                              dev_.attr.max_inline_data + 1));
    ASSERT_EQ(0, dev_.qp(&q, AXON_DEV_QPT_RC));
    EXPECT_EQ(AXON_DEV_QPS_RESET, q.qp->state);
    EXPECT_NE(0u, q.qpn());
}

/* ->RESET empties the queues: nothing posted before comes back. */
TEST_F(SoftibQpValues, ResetDiscardsPostedReceives)
{
    Qp            q;
    axon_dev_wc_t wc;

    open_dev();
    ASSERT_EQ(0, dev_.qp(&q, AXON_DEV_QPT_RC));
    Buf b = dev_.reg(64, AXON_DEV_ACCESS_LOCAL_WRITE);
    ASSERT_EQ(0, dev_.to_init(q));
    ASSERT_EQ(0, post_recv(q.qp, 1, b.ptr, 64, b.lkey()));
    axon_dev_qp_attr_t a;
    memset(&a, 0, sizeof(a));
    a.qp_state = AXON_DEV_QPS_RESET;
    ASSERT_EQ(0, axon_dev_modify_qp(q.qp, &a, AXON_DEV_QP_STATE));
    EXPECT_TRUE(no_wc(q.rcq, 0.05, &wc)) << "wr_id " << wc.wr_id << " "
                                         << wc_status_name(wc.status);
    /* and the QP can be brought up again */
    EXPECT_EQ(0, dev_.to_init(q));
}

/* Receives may be posted from INIT on, but not in RESET. */
TEST_F(SoftibQpValues, PostRecvInResetRefused)
{
    Qp q;

    open_dev();
    ASSERT_EQ(0, dev_.qp(&q, AXON_DEV_QPT_RC));
    Buf b = dev_.reg(64, AXON_DEV_ACCESS_LOCAL_WRITE);
    EXPECT_EQ(EINVAL, post_recv(q.qp, 1, b.ptr, 64, b.lkey()));
    ASSERT_EQ(0, dev_.to_init(q));
    EXPECT_EQ(0, post_recv(q.qp, 2, b.ptr, 64, b.lkey()));
}

/* Sends are refused before RTS. */
TEST_F(SoftibQpValues, PostSendBeforeRtsRefused)
{
    Qp q;

    open_dev();
    ASSERT_EQ(0, dev_.qp(&q, AXON_DEV_QPT_RC));
    Buf b = dev_.reg(64, AXON_DEV_ACCESS_LOCAL_WRITE);
    EXPECT_EQ(EINVAL, post_send_op(q.qp, 1, AXON_DEV_WR_SEND, b.ptr, 8, b.lkey()));
    ASSERT_EQ(0, dev_.to_init(q));
    EXPECT_EQ(EINVAL, post_send_op(q.qp, 2, AXON_DEV_WR_SEND, b.ptr, 8, b.lkey()));
    ASSERT_EQ(0, dev_.to_rtr(q, q.qpn(), dev_.gid, 0));
    EXPECT_EQ(EINVAL, post_send_op(q.qp, 3, AXON_DEV_WR_SEND, b.ptr, 8, b.lkey()));
}

}  // namespace
