/*
 * What the device layer's types share with libibverbs', for the two back
 * ends that cross between them: rdmacore/ (axon over ibv) and
 * softib/verbs_abi/ (ibv over axon). Values are asserted equal here once;
 * structs of different layout are converted field by field from one field
 * list each (AXON_DEV_IBV_CONVERT), the hot-path ones (SGE, receive WR, work
 * completion) have the same layout and pass through.
 */
#ifndef AXON_DEV_IBV_MAP_H
#define AXON_DEV_IBV_MAP_H

#include <stddef.h>
#include <string.h>
#include <infiniband/verbs.h>
#include "dev.h"

/* Included by C++ tests too (rdmacore's converters). */
#ifdef __cplusplus
#define AXON_DEV_IBV_STATIC_ASSERT static_assert
#else
#define AXON_DEV_IBV_STATIC_ASSERT _Static_assert
#endif

/*
 * dev.h promises the numeric values of libibverbs; these checks make that a
 * build failure instead of a silent mistranslation on some future rdma-core.
 * Each AXON_DEV_<name> below is checked against IBV_<name>.
 */
#define AXON_DEV_IBV_SAME_VALUES(_) \
    _(NODE_CA) _(LINK_LAYER_UNSPECIFIED) _(LINK_LAYER_INFINIBAND) _(LINK_LAYER_ETHERNET) \
    _(MTU_256) _(MTU_512) _(MTU_1024) _(MTU_2048) _(MTU_4096) _(PORT_NOP) _(PORT_DOWN) \
    _(PORT_INIT) _(PORT_ARMED) _(PORT_ACTIVE) _(ATOMIC_NONE) _(ATOMIC_HCA) _(ATOMIC_GLOB) \
    _(ACCESS_LOCAL_WRITE) _(ACCESS_REMOTE_WRITE) _(ACCESS_REMOTE_READ) _(ACCESS_REMOTE_ATOMIC) \
    _(ACCESS_MW_BIND) _(QPT_RC) _(QPT_UC) _(QPT_UD) _(QPS_RESET) _(QPS_INIT) _(QPS_RTR) \
    _(QPS_RTS) _(QPS_SQD) _(QPS_SQE) _(QPS_ERR) _(MIG_MIGRATED) _(MIG_REARM) _(MIG_ARMED) \
    _(QP_STATE) _(QP_CUR_STATE) _(QP_EN_SQD_ASYNC_NOTIFY) _(QP_ACCESS_FLAGS) _(QP_PKEY_INDEX) \
    _(QP_PORT) _(QP_QKEY) _(QP_AV) _(QP_PATH_MTU) _(QP_TIMEOUT) _(QP_RETRY_CNT) \
    _(QP_RNR_RETRY) _(QP_RQ_PSN) _(QP_MAX_QP_RD_ATOMIC) _(QP_ALT_PATH) _(QP_MIN_RNR_TIMER) \
    _(QP_SQ_PSN) _(QP_MAX_DEST_RD_ATOMIC) _(QP_PATH_MIG_STATE) _(QP_CAP) _(QP_DEST_QPN) \
    _(WR_RDMA_WRITE) _(WR_RDMA_WRITE_WITH_IMM) _(WR_SEND) _(WR_SEND_WITH_IMM) _(WR_RDMA_READ) \
    _(WR_ATOMIC_CMP_AND_SWP) _(WR_ATOMIC_FETCH_AND_ADD) _(SEND_FENCE) _(SEND_SIGNALED) \
    _(SEND_SOLICITED) _(SEND_INLINE) _(WC_SUCCESS) _(WC_LOC_LEN_ERR) _(WC_LOC_QP_OP_ERR) \
    _(WC_LOC_EEC_OP_ERR) _(WC_LOC_PROT_ERR) _(WC_WR_FLUSH_ERR) _(WC_MW_BIND_ERR) \
    _(WC_BAD_RESP_ERR) _(WC_LOC_ACCESS_ERR) _(WC_REM_INV_REQ_ERR) _(WC_REM_ACCESS_ERR) \
    _(WC_REM_OP_ERR) _(WC_RETRY_EXC_ERR) _(WC_RNR_RETRY_EXC_ERR) _(WC_LOC_RDD_VIOL_ERR) \
    _(WC_REM_INV_RD_REQ_ERR) _(WC_REM_ABORT_ERR) _(WC_INV_EECN_ERR) _(WC_INV_EEC_STATE_ERR) \
    _(WC_FATAL_ERR) _(WC_RESP_TIMEOUT_ERR) _(WC_GENERAL_ERR) _(WC_SEND) _(WC_RDMA_WRITE) \
    _(WC_RDMA_READ) _(WC_COMP_SWAP) _(WC_FETCH_ADD) _(WC_BIND_MW) _(WC_RECV) \
    _(WC_RECV_RDMA_WITH_IMM) _(WC_GRH) _(WC_WITH_IMM) _(EVENT_CQ_ERR) _(EVENT_QP_FATAL) \
    _(EVENT_QP_REQ_ERR) _(EVENT_QP_ACCESS_ERR) _(EVENT_COMM_EST) _(EVENT_SQ_DRAINED) \
    _(EVENT_PATH_MIG) _(EVENT_PATH_MIG_ERR) _(EVENT_DEVICE_FATAL) _(EVENT_PORT_ACTIVE) \
    _(EVENT_PORT_ERR) _(EVENT_LID_CHANGE) _(EVENT_PKEY_CHANGE) _(EVENT_SM_CHANGE) \
    _(EVENT_SRQ_ERR) _(EVENT_SRQ_LIMIT_REACHED) _(EVENT_QP_LAST_WQE_REACHED) \
    _(EVENT_CLIENT_REREGISTER) _(EVENT_GID_CHANGE) _(SRQ_MAX_WR) _(SRQ_LIMIT) \
    _(DEVICE_SYS_IMAGE_GUID) _(DEVICE_RC_RNR_NAK_GEN) _(DEVICE_SRQ_RESIZE)
#define AXON_DEV_IBV_SAME(_name) \
    AXON_DEV_IBV_STATIC_ASSERT((int)AXON_DEV_##_name == (int)IBV_##_name, \
                               "AXON_DEV_" #_name " != IBV_" #_name);
AXON_DEV_IBV_SAME_VALUES(AXON_DEV_IBV_SAME)
AXON_DEV_IBV_STATIC_ASSERT(sizeof(axon_dev_gid_t) == sizeof(union ibv_gid), "GID size");

/*
 * The hot-path structs (SGE, receive WR, work completion) have the same
 * layout on both sides; posting and polling pass them through without a copy,
 * and these checks keep that honest.
 */
#define AXON_DEV_IBV_SAME_FIELD(_axon, _ibv, _field) \
    AXON_DEV_IBV_STATIC_ASSERT(offsetof(_axon, _field) == offsetof(_ibv, _field) && \
                   sizeof(((_axon*)0)->_field) == sizeof(((_ibv*)0)->_field), \
                   #_axon "." #_field " layout");
#define AXON_DEV_IBV_SGE(_, a, i) _(a, i, addr) _(a, i, length) _(a, i, lkey)
#define AXON_DEV_IBV_RECV_WR(_, a, i) _(a, i, wr_id) _(a, i, next) _(a, i, sg_list) \
    _(a, i, num_sge)
#define AXON_DEV_IBV_WC(_, a, i) _(a, i, wr_id) _(a, i, status) _(a, i, opcode) \
    _(a, i, vendor_err) _(a, i, byte_len) _(a, i, imm_data) _(a, i, qp_num) _(a, i, src_qp) \
    _(a, i, wc_flags) _(a, i, pkey_index) _(a, i, slid) _(a, i, sl) _(a, i, dlid_path_bits)

AXON_DEV_IBV_SGE(AXON_DEV_IBV_SAME_FIELD, axon_dev_sge_t, struct ibv_sge)
AXON_DEV_IBV_STATIC_ASSERT(sizeof(axon_dev_sge_t) == sizeof(struct ibv_sge), "SGE size");
AXON_DEV_IBV_RECV_WR(AXON_DEV_IBV_SAME_FIELD, axon_dev_recv_wr_t, struct ibv_recv_wr)
AXON_DEV_IBV_STATIC_ASSERT(sizeof(axon_dev_recv_wr_t) == sizeof(struct ibv_recv_wr),
                           "recv WR size");
AXON_DEV_IBV_WC(AXON_DEV_IBV_SAME_FIELD, axon_dev_wc_t, struct ibv_wc)
AXON_DEV_IBV_STATIC_ASSERT(sizeof(axon_dev_wc_t) == sizeof(struct ibv_wc), "WC size");

/* ------------------------------------------------------------ converters */

/*
 * Field lists, one per struct: _(field) names a field of the same name and
 * meaning on both sides, _a(field) an array of the same size; p prefixes
 * them when a list is nested in another. Each converter is one expansion.
 */
#define AXON_DEV_IBV_DEVICE_ATTR(_, _a, p) \
    _a(p fw_ver) _(p max_mr_size) _(p page_size_cap) _(p vendor_id) _(p vendor_part_id) \
    _(p hw_ver) _(p max_qp) _(p max_qp_wr) _(p device_cap_flags) _(p max_sge) _(p max_sge_rd) \
    _(p max_cq) _(p max_cqe) _(p max_mr) _(p max_pd) _(p max_qp_rd_atom) _(p max_ee_rd_atom) \
    _(p max_res_rd_atom) _(p max_qp_init_rd_atom) _(p max_ee_init_rd_atom) _(p atomic_cap) \
    _(p max_ee) _(p max_rdd) _(p max_mw) _(p max_raw_ipv6_qp) _(p max_raw_ethy_qp) \
    _(p max_mcast_grp) _(p max_mcast_qp_attach) _(p max_total_mcast_qp_attach) _(p max_ah) \
    _(p max_fmr) _(p max_map_per_fmr) _(p max_srq) _(p max_srq_wr) _(p max_srq_sge) \
    _(p max_pkeys) _(p local_ca_ack_delay) _(p phys_port_cnt)
#define AXON_DEV_IBV_PORT_ATTR(_, _a, p) \
    _(p state) _(p max_mtu) _(p active_mtu) _(p gid_tbl_len) _(p port_cap_flags) _(p max_msg_sz) \
    _(p bad_pkey_cntr) _(p qkey_viol_cntr) _(p pkey_tbl_len) _(p lid) _(p sm_lid) _(p lmc) \
    _(p max_vl_num) _(p sm_sl) _(p subnet_timeout) _(p init_type_reply) _(p active_width) \
    _(p active_speed) _(p phys_state) _(p link_layer)
#define AXON_DEV_IBV_AH_ATTR(_, _a, p) \
    _a(p grh.dgid.raw) _(p grh.flow_label) _(p grh.sgid_index) _(p grh.hop_limit) \
    _(p grh.traffic_class) _(p dlid) _(p sl) _(p src_path_bits) _(p static_rate) _(p is_global) \
    _(p port_num)
#define AXON_DEV_IBV_QP_CAP(_, _a, p) \
    _(p max_send_wr) _(p max_recv_wr) _(p max_send_sge) _(p max_recv_sge) _(p max_inline_data)
#define AXON_DEV_IBV_QP_ATTR(_, _a, p) \
    _(p qp_state) _(p cur_qp_state) _(p path_mtu) _(p path_mig_state) _(p qkey) _(p rq_psn) \
    _(p sq_psn) _(p dest_qp_num) _(p qp_access_flags) _(p pkey_index) _(p alt_pkey_index) \
    _(p en_sqd_async_notify) _(p sq_draining) _(p max_rd_atomic) _(p max_dest_rd_atomic) \
    _(p min_rnr_timer) _(p port_num) _(p timeout) _(p retry_cnt) _(p rnr_retry) \
    _(p alt_port_num) _(p alt_timeout) AXON_DEV_IBV_QP_CAP(_, _a, p cap.) \
    AXON_DEV_IBV_AH_ATTR(_, _a, p ah_attr.) AXON_DEV_IBV_AH_ATTR(_, _a, p alt_ah_attr.)
#define AXON_DEV_IBV_SRQ_ATTR(_, _a, p) \
    _(p max_wr) _(p max_sge) _(p srq_limit)

/*
 * The body of a converter from in to out: zero out, then copy every field of
 * the list (a field with a cast to out's type, an array with memcpy).
 */
#define AXON_DEV_IBV_COPY(_f)       out->_f = (__typeof__(out->_f))in->_f;
#define AXON_DEV_IBV_COPY_ARRAY(_f) memcpy(out->_f, in->_f, sizeof(out->_f));
#define AXON_DEV_IBV_CONVERT(_list) \
    do { \
        memset(out, 0, sizeof(*out)); \
        _list(AXON_DEV_IBV_COPY, AXON_DEV_IBV_COPY_ARRAY, ) \
    } while (0)

#ifndef __cplusplus   /* a designated table: C only; the C++ tests do not use it */
/* Which object an async event is about (ibv_get_async_event(3)). */
typedef enum {
    AXON_DEV_IBV_EV_NONE = 0,   /* unknown type */
    AXON_DEV_IBV_EV_CQ,
    AXON_DEV_IBV_EV_QP,
    AXON_DEV_IBV_EV_SRQ,
    AXON_DEV_IBV_EV_PORT,
    AXON_DEV_IBV_EV_DEVICE,
} axon_dev_ibv_ev_elem_t;

static const axon_dev_ibv_ev_elem_t axon_dev_ibv_ev_elems[] = {
    [AXON_DEV_EVENT_CQ_ERR]              = AXON_DEV_IBV_EV_CQ,
    [AXON_DEV_EVENT_QP_FATAL]            = AXON_DEV_IBV_EV_QP,
    [AXON_DEV_EVENT_QP_REQ_ERR]          = AXON_DEV_IBV_EV_QP,
    [AXON_DEV_EVENT_QP_ACCESS_ERR]       = AXON_DEV_IBV_EV_QP,
    [AXON_DEV_EVENT_COMM_EST]            = AXON_DEV_IBV_EV_QP,
    [AXON_DEV_EVENT_SQ_DRAINED]          = AXON_DEV_IBV_EV_QP,
    [AXON_DEV_EVENT_PATH_MIG]            = AXON_DEV_IBV_EV_QP,
    [AXON_DEV_EVENT_PATH_MIG_ERR]        = AXON_DEV_IBV_EV_QP,
    [AXON_DEV_EVENT_DEVICE_FATAL]        = AXON_DEV_IBV_EV_DEVICE,
    [AXON_DEV_EVENT_PORT_ACTIVE]         = AXON_DEV_IBV_EV_PORT,
    [AXON_DEV_EVENT_PORT_ERR]            = AXON_DEV_IBV_EV_PORT,
    [AXON_DEV_EVENT_LID_CHANGE]          = AXON_DEV_IBV_EV_PORT,
    [AXON_DEV_EVENT_PKEY_CHANGE]         = AXON_DEV_IBV_EV_PORT,
    [AXON_DEV_EVENT_SM_CHANGE]           = AXON_DEV_IBV_EV_PORT,
    [AXON_DEV_EVENT_SRQ_ERR]             = AXON_DEV_IBV_EV_SRQ,
    [AXON_DEV_EVENT_SRQ_LIMIT_REACHED]   = AXON_DEV_IBV_EV_SRQ,
    [AXON_DEV_EVENT_QP_LAST_WQE_REACHED] = AXON_DEV_IBV_EV_QP,
    [AXON_DEV_EVENT_CLIENT_REREGISTER]   = AXON_DEV_IBV_EV_PORT,
    [AXON_DEV_EVENT_GID_CHANGE]          = AXON_DEV_IBV_EV_PORT,
};

static inline axon_dev_ibv_ev_elem_t axon_dev_ibv_ev_elem(unsigned type)
{
    return (type < sizeof(axon_dev_ibv_ev_elems) / sizeof(axon_dev_ibv_ev_elems[0])) ?
           axon_dev_ibv_ev_elems[type] : AXON_DEV_IBV_EV_NONE;
}
#endif

#endif
