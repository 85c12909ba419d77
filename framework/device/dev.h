/*
 * The device layer: one verbs-shaped interface to RDMA devices, with two back
 * ends — rdma-core (libibverbs, real NICs) and softib (the software device).
 * RDMA components (verbs, rdmacm, dc, umr, xchannel) and the softib
 * conformance suite use only this header.
 *
 * Semantics are those of libibverbs (the RDMA Aware Networks Programming User
 * Manual and the ibv_* man pages): every type below mirrors its ibv_*
 * counterpart field for field, and every enum has the numeric values of
 * libibverbs, so the rdma-core back end converts by copy.
 *
 * Conventions:
 *   - Calls return 0 or a positive errno (EINVAL for a bad argument, ENOMEM,
 *     ENOSYS for what a back end does not implement, EOPNOTSUPP for what the
 *     device lacks); a bad argument also logs a line naming it. Object
 *     creation returns the object through a pointer argument.
 *   - On EINVAL nothing changed: a QP whose modify failed keeps its state and
 *     attributes.
 *   - poll_cq returns the number of completions (>= 0) or a negative errno.
 *   - Objects are not thread-safe except where noted; a CQ may be polled by
 *     one thread while another posts to a QP (as with verbs).
 */
#ifndef AXON_DEV_H
#define AXON_DEV_H

#include <stddef.h>
#include <stdint.h>
#include "axon_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AXON_DEV_NAME_LEN 64

/* ------------------------------------------------------------ enums */

typedef enum {
    AXON_DEV_NODE_CA = 1,
} axon_dev_node_type_t;

typedef enum {
    AXON_DEV_LINK_LAYER_UNSPECIFIED = 0,
    AXON_DEV_LINK_LAYER_INFINIBAND  = 1,
    AXON_DEV_LINK_LAYER_ETHERNET    = 2,  /* RoCE-like: addressing needs a GRH */
} axon_dev_link_layer_t;

typedef enum {
    AXON_DEV_MTU_256  = 1,
    AXON_DEV_MTU_512  = 2,
    AXON_DEV_MTU_1024 = 3,
    AXON_DEV_MTU_2048 = 4,
    AXON_DEV_MTU_4096 = 5,
} axon_dev_mtu_t;

static inline size_t axon_dev_mtu_bytes(axon_dev_mtu_t mtu)
{
    return ((mtu >= AXON_DEV_MTU_256) && (mtu <= AXON_DEV_MTU_4096)) ? (128u << mtu) : 0;
}

typedef enum {
    AXON_DEV_PORT_NOP    = 0,
    AXON_DEV_PORT_DOWN   = 1,
    AXON_DEV_PORT_INIT   = 2,
    AXON_DEV_PORT_ARMED  = 3,
    AXON_DEV_PORT_ACTIVE = 4,
} axon_dev_port_state_t;

typedef enum {
    AXON_DEV_ATOMIC_NONE = 0,
    AXON_DEV_ATOMIC_HCA  = 1,  /* atomic among operations of this device */
    AXON_DEV_ATOMIC_GLOB = 2,  /* atomic with the CPU too */
} axon_dev_atomic_cap_t;

/* Memory access flags (ibv_access_flags) */
#define AXON_DEV_ACCESS_LOCAL_WRITE   (1 << 0)
#define AXON_DEV_ACCESS_REMOTE_WRITE  (1 << 1)
#define AXON_DEV_ACCESS_REMOTE_READ   (1 << 2)
#define AXON_DEV_ACCESS_REMOTE_ATOMIC (1 << 3)
#define AXON_DEV_ACCESS_MW_BIND       (1 << 4)

typedef enum {
    AXON_DEV_QPT_RC = 2,
    AXON_DEV_QPT_UC = 3,
    AXON_DEV_QPT_UD = 4,
    /* DC initiator (seed §8.6.1.7, AXON_DEV_CAP_DC): send-only, each send WR
     * names its target in wr->dc; the exp verbs' IBV_EXP_QPT_DC_INI */
    AXON_DEV_QPT_DC_INI = 32,
} axon_dev_qp_type_t;

typedef enum {
    AXON_DEV_QPS_RESET = 0,
    AXON_DEV_QPS_INIT  = 1,
    AXON_DEV_QPS_RTR   = 2,
    AXON_DEV_QPS_RTS   = 3,
    AXON_DEV_QPS_SQD   = 4,
    AXON_DEV_QPS_SQE   = 5,
    AXON_DEV_QPS_ERR   = 6,
} axon_dev_qp_state_t;

typedef enum {
    AXON_DEV_MIG_MIGRATED = 0,
    AXON_DEV_MIG_REARM    = 1,
    AXON_DEV_MIG_ARMED    = 2,
} axon_dev_mig_state_t;

/* modify_qp / query_qp attribute mask (ibv_qp_attr_mask) */
#define AXON_DEV_QP_STATE              (1 << 0)
#define AXON_DEV_QP_CUR_STATE          (1 << 1)
#define AXON_DEV_QP_EN_SQD_ASYNC_NOTIFY (1 << 2)
#define AXON_DEV_QP_ACCESS_FLAGS       (1 << 3)
#define AXON_DEV_QP_PKEY_INDEX         (1 << 4)
#define AXON_DEV_QP_PORT               (1 << 5)
#define AXON_DEV_QP_QKEY               (1 << 6)
#define AXON_DEV_QP_AV                 (1 << 7)
#define AXON_DEV_QP_PATH_MTU           (1 << 8)
#define AXON_DEV_QP_TIMEOUT            (1 << 9)
#define AXON_DEV_QP_RETRY_CNT          (1 << 10)
#define AXON_DEV_QP_RNR_RETRY          (1 << 11)
#define AXON_DEV_QP_RQ_PSN             (1 << 12)
#define AXON_DEV_QP_MAX_QP_RD_ATOMIC   (1 << 13)
#define AXON_DEV_QP_ALT_PATH           (1 << 14)
#define AXON_DEV_QP_MIN_RNR_TIMER      (1 << 15)
#define AXON_DEV_QP_SQ_PSN             (1 << 16)
#define AXON_DEV_QP_MAX_DEST_RD_ATOMIC (1 << 17)
#define AXON_DEV_QP_PATH_MIG_STATE     (1 << 18)
#define AXON_DEV_QP_CAP                (1 << 19)
#define AXON_DEV_QP_DEST_QPN           (1 << 20)
#define AXON_DEV_QP_DC_KEY             (1 << 21)   /* DCI: dct_key (seed §8.6.1.7), Axon's value */

typedef enum {
    AXON_DEV_WR_RDMA_WRITE          = 0,
    AXON_DEV_WR_RDMA_WRITE_WITH_IMM = 1,
    AXON_DEV_WR_SEND                = 2,
    AXON_DEV_WR_SEND_WITH_IMM       = 3,
    AXON_DEV_WR_RDMA_READ           = 4,
    AXON_DEV_WR_ATOMIC_CMP_AND_SWP  = 5,
    AXON_DEV_WR_ATOMIC_FETCH_AND_ADD = 6,
    /*
     * Extended atomics (seed §8.7, AXON_DEV_CAP_EXT_ATOMIC), operands in
     * wr.masked_atomic. libibverbs has no such opcodes (rdma-core refuses
     * them); these values would be IBV_WR_LOCAL_INV / BIND_MW there, so a
     * back end never hands them to libibverbs as they are.
     */
    AXON_DEV_WR_EXT_MASKED_ATOMIC_CMP_AND_SWP   = 7,
    AXON_DEV_WR_EXT_MASKED_ATOMIC_FETCH_AND_ADD = 8,
    /*
     * Cross-channel tasks (seed §8.9, AXON_DEV_CAP_CROSS_CHANNEL), executed
     * by the device on the QP they are posted to, which must have been
     * created with AXON_DEV_QP_CREATE_CROSS_CHANNEL; operands in wr.cqe_wait
     * and wr.wqe_enable. Not libibverbs values either.
     */
    AXON_DEV_WR_SEND_ENABLE = 9,   /* the managed send queue of wr.wqe_enable.qp */
    AXON_DEV_WR_RECV_ENABLE = 10,  /* its managed receive queue */
    AXON_DEV_WR_CQE_WAIT    = 11,  /* wait for completions of wr.cqe_wait.cq */
    /*
     * User-mode memory registration (seed §8.8.1.5, AXON_DEV_CAP_UMR), on a
     * QP created with AXON_DEV_QP_CREATE_UMR; operands in wr.umr. Executed
     * by the device in queue order: later WRs of the same QP may use the key
     * before the UMR's completion. With AXON_DEV_SEND_FENCE a UMR waits until
     * every WR before it completed (a retransmission reads its keys again).
     * Not libibverbs values either.
     */
    AXON_DEV_WR_UMR_FILL       = 12,  /* define wr.umr.modified_mr's layout */
    AXON_DEV_WR_UMR_INVALIDATE = 13,  /* ... make it unusable until the next fill */
} axon_dev_wr_opcode_t;

/* Send flags (ibv_send_flags) */
#define AXON_DEV_SEND_FENCE     (1 << 0)
#define AXON_DEV_SEND_SIGNALED  (1 << 1)
#define AXON_DEV_SEND_SOLICITED (1 << 2)
#define AXON_DEV_SEND_INLINE    (1 << 3)
/* The manual's exp_send_flags for cross-channel (seed §8.9.3), Axon's values */
#define AXON_DEV_SEND_WITH_CALC    (1 << 16)  /* a SEND whose payload is wr->calc's reduction */
#define AXON_DEV_SEND_WAIT_EN_LAST (1 << 17)  /* last WAIT/ENABLE of a task list on its CQ/queue */

typedef enum {
    AXON_DEV_WC_SUCCESS            = 0,
    AXON_DEV_WC_LOC_LEN_ERR        = 1,
    AXON_DEV_WC_LOC_QP_OP_ERR      = 2,
    AXON_DEV_WC_LOC_EEC_OP_ERR     = 3,
    AXON_DEV_WC_LOC_PROT_ERR       = 4,
    AXON_DEV_WC_WR_FLUSH_ERR       = 5,
    AXON_DEV_WC_MW_BIND_ERR        = 6,
    AXON_DEV_WC_BAD_RESP_ERR       = 7,
    AXON_DEV_WC_LOC_ACCESS_ERR     = 8,
    AXON_DEV_WC_REM_INV_REQ_ERR    = 9,
    AXON_DEV_WC_REM_ACCESS_ERR     = 10,
    AXON_DEV_WC_REM_OP_ERR         = 11,
    AXON_DEV_WC_RETRY_EXC_ERR      = 12,
    AXON_DEV_WC_RNR_RETRY_EXC_ERR  = 13,
    AXON_DEV_WC_LOC_RDD_VIOL_ERR   = 14,
    AXON_DEV_WC_REM_INV_RD_REQ_ERR = 15,
    AXON_DEV_WC_REM_ABORT_ERR      = 16,
    AXON_DEV_WC_INV_EECN_ERR       = 17,
    AXON_DEV_WC_INV_EEC_STATE_ERR  = 18,
    AXON_DEV_WC_FATAL_ERR          = 19,
    AXON_DEV_WC_RESP_TIMEOUT_ERR   = 20,
    AXON_DEV_WC_GENERAL_ERR        = 21,
} axon_dev_wc_status_t;

/* "local length error", ... (ibv_wc_status_str) */
const char *axon_dev_wc_status_str(axon_dev_wc_status_t status);

typedef enum {
    AXON_DEV_WC_SEND               = 0,
    AXON_DEV_WC_RDMA_WRITE         = 1,
    AXON_DEV_WC_RDMA_READ          = 2,
    AXON_DEV_WC_COMP_SWAP          = 3,
    AXON_DEV_WC_FETCH_ADD          = 4,
    AXON_DEV_WC_BIND_MW            = 5,
    AXON_DEV_WC_MASKED_COMP_SWAP   = 9,    /* IBV_EXP_WC_MASKED_COMP_SWAP */
    AXON_DEV_WC_MASKED_FETCH_ADD   = 10,   /* IBV_EXP_WC_MASKED_FETCH_ADD */
    AXON_DEV_WC_SEND_ENABLE        = 32,   /* cross-channel tasks: Axon's values */
    AXON_DEV_WC_RECV_ENABLE        = 33,
    AXON_DEV_WC_CQE_WAIT           = 34,
    AXON_DEV_WC_UMR                = 35,   /* UMR_FILL and UMR_INVALIDATE: Axon's value */
    AXON_DEV_WC_RECV               = 128,
    AXON_DEV_WC_RECV_RDMA_WITH_IMM = 129,
} axon_dev_wc_opcode_t;

/* Work completion flags (ibv_wc_flags) */
#define AXON_DEV_WC_GRH      (1 << 0)
#define AXON_DEV_WC_WITH_IMM (1 << 1)

typedef enum {
    AXON_DEV_EVENT_CQ_ERR              = 0,
    AXON_DEV_EVENT_QP_FATAL            = 1,
    AXON_DEV_EVENT_QP_REQ_ERR          = 2,
    AXON_DEV_EVENT_QP_ACCESS_ERR       = 3,
    AXON_DEV_EVENT_COMM_EST            = 4,
    AXON_DEV_EVENT_SQ_DRAINED          = 5,
    AXON_DEV_EVENT_PATH_MIG            = 6,
    AXON_DEV_EVENT_PATH_MIG_ERR        = 7,
    AXON_DEV_EVENT_DEVICE_FATAL        = 8,
    AXON_DEV_EVENT_PORT_ACTIVE         = 9,
    AXON_DEV_EVENT_PORT_ERR            = 10,
    AXON_DEV_EVENT_LID_CHANGE          = 11,
    AXON_DEV_EVENT_PKEY_CHANGE         = 12,
    AXON_DEV_EVENT_SM_CHANGE           = 13,
    AXON_DEV_EVENT_SRQ_ERR             = 14,
    AXON_DEV_EVENT_SRQ_LIMIT_REACHED   = 15,
    AXON_DEV_EVENT_QP_LAST_WQE_REACHED = 16,
    AXON_DEV_EVENT_CLIENT_REREGISTER   = 17,
    AXON_DEV_EVENT_GID_CHANGE          = 18,
    /* DC targets (seed §8.6.1.6), element.dct; the exp verbs' values */
    AXON_DEV_EVENT_DCT_KEY_VIOLATION   = 32,   /* wrong DC key while armed */
    AXON_DEV_EVENT_DCT_ACCESS_ERR      = 33,   /* a request the DCT refused: remote access */
    AXON_DEV_EVENT_DCT_REQ_ERR         = 34,   /* ... or an invalid request */
} axon_dev_event_type_t;

const char *axon_dev_event_type_str(axon_dev_event_type_t type);

/* modify_srq mask (ibv_srq_attr_mask) */
#define AXON_DEV_SRQ_MAX_WR (1 << 0)
#define AXON_DEV_SRQ_LIMIT  (1 << 1)

/* ------------------------------------------------------------ capabilities */

/* device_cap_flags a device may report (ibv_device_cap_flags' values). */
#define AXON_DEV_DEVICE_SYS_IMAGE_GUID (1 << 11)   /* sys_image_guid is set */
#define AXON_DEV_DEVICE_RC_RNR_NAK_GEN (1 << 12)   /* RC receivers send RNR NAKs */
#define AXON_DEV_DEVICE_SRQ_RESIZE     (1 << 13)   /* modify_srq may change max_wr */

/*
 * Device capability flags beyond struct ibv_device_attr. The experimental
 * ones (seed §8) are reported whether or not a component uses them yet; a
 * device that lacks a feature leaves its flag clear and its limits zero.
 */
#define AXON_DEV_CAP_RC              (1ull << 0)
#define AXON_DEV_CAP_UC              (1ull << 1)
#define AXON_DEV_CAP_UD              (1ull << 2)
#define AXON_DEV_CAP_SRQ             (1ull << 3)
#define AXON_DEV_CAP_ATOMIC          (1ull << 4)   /* CMP_AND_SWP / FETCH_AND_ADD, 64 bit */
#define AXON_DEV_CAP_INLINE          (1ull << 5)
#define AXON_DEV_CAP_COMP_CHANNEL    (1ull << 6)
#define AXON_DEV_CAP_DC              (1ull << 7)   /* Dynamically Connected (DCI/DCT) */
#define AXON_DEV_CAP_EXT_ATOMIC      (1ull << 8)   /* masked / multi-field atomics */
#define AXON_DEV_CAP_UMR             (1ull << 9)   /* user-mode memory registration */
#define AXON_DEV_CAP_CROSS_CHANNEL   (1ull << 10)  /* WAIT / SEND_EN / RECV_EN / CALC */
#define AXON_DEV_CAP_MCAST           (1ull << 11)  /* UD multicast groups (attach_mcast) */
#define AXON_DEV_CAP_LAST_BIT        12

/* Names of the flags above, indexed by bit ("rc", "srq", "ext_atomic"...). */
extern const char *const axon_dev_cap_names[];

/*
 * Cross-channel reductions (seed §8.9.2.1, §8.9.3): the manual's four
 * operations, then MAX and MIN; its three data types; its one size. The
 * capability masks have bit (1 << value) per supported value.
 */
typedef enum {
    AXON_DEV_CALC_OP_ADD  = 0,
    AXON_DEV_CALC_OP_BAND = 1,
    AXON_DEV_CALC_OP_BXOR = 2,
    AXON_DEV_CALC_OP_BOR  = 3,
    AXON_DEV_CALC_OP_MAX  = 4,
    AXON_DEV_CALC_OP_MIN  = 5,
    AXON_DEV_CALC_OP_LAST = AXON_DEV_CALC_OP_MIN,
} axon_dev_calc_op_t;

typedef enum {
    AXON_DEV_CALC_DATA_TYPE_INT   = 0,
    AXON_DEV_CALC_DATA_TYPE_UINT  = 1,
    AXON_DEV_CALC_DATA_TYPE_FLOAT = 2,
} axon_dev_calc_data_type_t;

typedef enum {
    AXON_DEV_CALC_DATA_SIZE_64_BIT = 0,
} axon_dev_calc_data_size_t;

typedef struct axon_dev_attr {
    char     fw_ver[64];
    uint64_t node_guid;
    uint64_t sys_image_guid;
    uint64_t max_mr_size;
    uint64_t page_size_cap;
    uint32_t vendor_id;
    uint32_t vendor_part_id;
    uint32_t hw_ver;
    int      max_qp;
    int      max_qp_wr;
    unsigned device_cap_flags;   /* AXON_DEV_DEVICE_* (ibv_device_cap_flags), informational */
    int      max_sge;
    int      max_sge_rd;
    int      max_cq;
    int      max_cqe;
    int      max_mr;
    int      max_pd;
    int      max_qp_rd_atom;
    int      max_ee_rd_atom;
    int      max_res_rd_atom;
    int      max_qp_init_rd_atom;
    int      max_ee_init_rd_atom;
    axon_dev_atomic_cap_t atomic_cap;
    int      max_ee;
    int      max_rdd;
    int      max_mw;
    int      max_raw_ipv6_qp;
    int      max_raw_ethy_qp;
    int      max_mcast_grp;
    int      max_mcast_qp_attach;
    int      max_total_mcast_qp_attach;
    int      max_ah;
    int      max_fmr;
    int      max_map_per_fmr;
    int      max_srq;
    int      max_srq_wr;
    int      max_srq_sge;
    uint16_t max_pkeys;
    uint8_t  local_ca_ack_delay;
    uint8_t  phys_port_cnt;
    /* Axon additions */
    uint64_t cap_flags;          /* AXON_DEV_CAP_* after masking */
    uint32_t max_inline_data;    /* largest INLINE send */
    /* Experimental capabilities (seed §8) */
    struct {
        uint32_t max_dct;            /* DC targets */
        uint32_t max_dci;            /* DC initiators */
        int      max_dc_req_rd_atom; /* reads/atomics a DCI has outstanding (seed §8.6.1.2) */
        int      max_dc_res_rd_atom; /* ... a DCT answers per initiator */
        uint32_t max_dcr;            /* initiators a DCT serves at once (Axon addition) */
    } dc;
    struct {
        uint32_t log_atomic_arg_sizes;       /* bit n: 2^n-byte masked atomics */
        uint32_t max_fa_bit_boundary;        /* log2 of the largest fetch-add field, bytes */
        uint32_t log_max_atomic_inline;      /* log2 of the largest operand passed by value */
        /* Bit n: 2^n-byte masked atomics are atomic with the CPU too
         * (AXON_DEV_ATOMIC_GLOB); the other sizes only among the device's own
         * atomics (AXON_DEV_ATOMIC_HCA). An Axon addition. */
        uint32_t log_glob_arg_sizes;
    } ext_atomic;
    struct {                                 /* the manual's umr_caps (seed §8.8.1.1) */
        uint32_t max_klm_list_size;          /* entries one fill may give a key */
        uint32_t max_send_wqe_inline_klms;   /* ... inline in the WR (more: a mkey list) */
        /* Levels of indirect keys a key may stack, itself counted: 1 = its
         * entries name registered memory only, 2 = keys of depth 1 too, ... */
        uint32_t max_umr_recursion_depth;
        uint32_t max_umr_stride_dimension;   /* stride_dim of a REPEAT fill (the manual: 1) */
    } umr;
    struct {                                 /* the manual's calc_cap, then Axon's limit */
        uint64_t data_types;                 /* bit per axon_dev_calc_data_type_t */
        uint64_t data_sizes;                 /* bit per axon_dev_calc_data_size_t */
        uint64_t int_ops;                    /* bit per axon_dev_calc_op_t, per type */
        uint64_t uint_ops;
        uint64_t fp_ops;
        uint32_t max_calc_vector;            /* elements per operand of a CALC send */
    } cross_channel;
} axon_dev_attr_t;

typedef union axon_dev_gid {
    uint8_t raw[16];
    struct {
        uint64_t subnet_prefix;
        uint64_t interface_id;
    } global;
} axon_dev_gid_t;

typedef struct axon_dev_port_attr {
    axon_dev_port_state_t state;
    axon_dev_mtu_t        max_mtu;
    axon_dev_mtu_t        active_mtu;
    int                   gid_tbl_len;
    uint32_t              port_cap_flags;
    uint32_t              max_msg_sz;
    uint32_t              bad_pkey_cntr;
    uint32_t              qkey_viol_cntr;
    uint16_t              pkey_tbl_len;
    uint16_t              lid;
    uint16_t              sm_lid;
    uint8_t               lmc;
    uint8_t               max_vl_num;
    uint8_t               sm_sl;
    uint8_t               subnet_timeout;
    uint8_t               init_type_reply;
    uint8_t               active_width;
    uint8_t               active_speed;
    uint8_t               phys_state;
    uint8_t               link_layer;      /* axon_dev_link_layer_t */
} axon_dev_port_attr_t;

/* ------------------------------------------------------------ objects */

typedef struct axon_dev_context      axon_dev_context_t;
typedef struct axon_dev_pd           axon_dev_pd_t;
typedef struct axon_dev_mr           axon_dev_mr_t;
typedef struct axon_dev_cq           axon_dev_cq_t;
typedef struct axon_dev_comp_channel axon_dev_comp_channel_t;
typedef struct axon_dev_srq          axon_dev_srq_t;
typedef struct axon_dev_qp           axon_dev_qp_t;
typedef struct axon_dev_ah           axon_dev_ah_t;
typedef struct axon_dev_dct          axon_dev_dct_t;
typedef struct axon_dev_ops          axon_dev_ops_t;

/*
 * Every object starts with these public fields; a back end embeds the
 * struct first in its own object.
 */
struct axon_dev_context {
    const axon_dev_ops_t *ops;
    char                  name[AXON_DEV_NAME_LEN];  /* "softib0", "mlx5_0" */
    const char           *backend;                  /* "softib", "rdma-core" */
    int                   async_fd;                 /* readable when an async event waits */
};

struct axon_dev_pd {
    axon_dev_context_t *context;
    uint32_t            handle;
};

struct axon_dev_mr {
    axon_dev_context_t *context;
    axon_dev_pd_t      *pd;
    void               *addr;
    size_t              length;
    uint32_t            lkey;
    uint32_t            rkey;
    int                 access;
};

struct axon_dev_comp_channel {
    axon_dev_context_t *context;
    int                 fd;    /* readable (epoll/poll) when a CQ event waits */
};

struct axon_dev_cq {
    axon_dev_context_t      *context;
    axon_dev_comp_channel_t *channel;
    void                    *cq_context;
    int                      cqe;     /* actual capacity, >= requested */
    unsigned                 async_held;   /* device's: events got, not yet acked */
};

struct axon_dev_srq {
    axon_dev_context_t *context;
    axon_dev_pd_t      *pd;
    void               *srq_context;
    unsigned            async_held;   /* device's: events got, not yet acked */
};

struct axon_dev_qp {
    axon_dev_context_t *context;
    axon_dev_pd_t      *pd;
    axon_dev_cq_t      *send_cq;
    axon_dev_cq_t      *recv_cq;
    axon_dev_srq_t     *srq;
    void               *qp_context;
    uint32_t            qp_num;
    axon_dev_qp_type_t  qp_type;
    axon_dev_qp_state_t state;   /* as last set by modify_qp or by an error */
    unsigned            async_held;   /* device's: events got, not yet acked */
};

struct axon_dev_ah {
    axon_dev_context_t *context;
    axon_dev_pd_t      *pd;
};

/* A DC target (seed §8.6.1.3, ibv_exp_dct): receives through its SRQ into its CQ */
struct axon_dev_dct {
    axon_dev_context_t *context;
    axon_dev_pd_t      *pd;
    axon_dev_srq_t     *srq;
    axon_dev_cq_t      *cq;
    void               *dct_context;
    uint32_t            dct_num;   /* what a DCI's WR names, with the key */
    unsigned            async_held;   /* device's: events got, not yet acked */
};

/*
 * Indirect memory keys (seed §8.8.1.3, ibv_exp_create_mr): created empty on a
 * PD, given a layout by UMR_FILL, released with dereg_mr. Their addr and
 * length stay NULL and 0: the layout's base_addr and size are the fill's.
 */
#define AXON_DEV_MR_INDIRECT_KLMS (1u << 0)   /* create_flags: the only kind */

typedef struct axon_dev_mr_init_attr {
    uint64_t max_reg_descriptors;   /* entries it can hold */
    uint32_t create_flags;          /* AXON_DEV_MR_INDIRECT_KLMS */
    uint64_t access_flags;          /* the most a fill may grant (AXON_DEV_ACCESS_*) */
    uint32_t comp_mask;             /* reserved: 0 */
} axon_dev_mr_init_attr_t;

typedef struct axon_dev_mkey_attr {
    int      n_mkey_entries;        /* max_reg_descriptors */
    uint32_t comp_mask;
} axon_dev_mkey_attr_t;

/*
 * Where a fill without AXON_DEV_SEND_INLINE takes its entries (seed §8.8.1.4,
 * ibv_exp_mkey_list_container): post_send copies the WR's list into it and
 * the device reads it when the fill executes, so one list serves one fill
 * at a time.
 */
typedef struct axon_dev_mkey_list {
    uint32_t            max_klm_list_size;
    axon_dev_context_t *context;
} axon_dev_mkey_list_t;

typedef enum {   /* ibv_exp_umr_wr_type */
    AXON_DEV_UMR_MR_LIST = 0,   /* wr.umr.mem_list.mem_reg_list */
    AXON_DEV_UMR_REPEAT  = 1,   /* wr.umr.mem_list.rb */
} axon_dev_umr_wr_type_t;

/* A list entry: length bytes at base_addr of mr's memory */
typedef struct axon_dev_mem_region {
    uint64_t       base_addr;
    axon_dev_mr_t *mr;
    size_t         length;
} axon_dev_mem_region_t;

/*
 * A repeat entry: byte_count[d] bytes at base_addr, the next repetition
 * stride[d] further (d < stride_dim). One repetition of the layout is every
 * entry's bytes in list order; repeat_count[d] of them follow each other.
 */
typedef struct axon_dev_mem_repeat_block {
    uint64_t       base_addr;
    axon_dev_mr_t *mr;
    size_t        *byte_count;
    size_t        *stride;
} axon_dev_mem_repeat_block_t;

/* ------------------------------------------------------------ attributes */

typedef struct axon_dev_global_route {
    axon_dev_gid_t dgid;
    uint32_t       flow_label;
    uint8_t        sgid_index;
    uint8_t        hop_limit;
    uint8_t        traffic_class;
} axon_dev_global_route_t;

typedef struct axon_dev_ah_attr {
    axon_dev_global_route_t grh;
    uint16_t                dlid;
    uint8_t                 sl;
    uint8_t                 src_path_bits;
    uint8_t                 static_rate;
    uint8_t                 is_global;
    uint8_t                 port_num;
} axon_dev_ah_attr_t;

typedef struct axon_dev_qp_cap {
    uint32_t max_send_wr;
    uint32_t max_recv_wr;
    uint32_t max_send_sge;
    uint32_t max_recv_sge;
    uint32_t max_inline_data;
} axon_dev_qp_cap_t;

typedef struct axon_dev_qp_init_attr {
    void              *qp_context;
    axon_dev_cq_t     *send_cq;
    axon_dev_cq_t     *recv_cq;
    axon_dev_srq_t    *srq;
    axon_dev_qp_cap_t  cap;        /* create_qp writes back the actual values */
    axon_dev_qp_type_t qp_type;
    int                sq_sig_all;
    uint32_t           create_flags;  /* AXON_DEV_QP_CREATE_* (the manual's exp_create_flags) */
    /* CREATE_UMR: entries a UMR_FILL may carry inline (seed §8.8.1.2), at most
     * the device's max_send_wqe_inline_klms; create_qp writes back the value */
    uint32_t           max_inl_send_klms;
} axon_dev_qp_init_attr_t;

/*
 * Cross-channel QPs (seed §8.9.2.3). A managed queue holds what is posted to
 * it until a SEND_ENABLE / RECV_ENABLE task of some cross-channel QP
 * releases it; a managed receive queue cannot be an SRQ.
 */
#define AXON_DEV_QP_CREATE_CROSS_CHANNEL (1u << 2)  /* may post WAIT, ENABLE and CALC */
#define AXON_DEV_QP_CREATE_MANAGED_SEND  (1u << 3)
#define AXON_DEV_QP_CREATE_MANAGED_RECV  (1u << 4)
/* May post UMR_FILL / UMR_INVALIDATE (seed §8.8.1.2, IBV_EXP_QP_CREATE_UMR) */
#define AXON_DEV_QP_CREATE_UMR           (1u << 5)
/* A UD QP's sends to a multicast group it is attached to do not come back to
 * it (IBV_QP_CREATE_BLOCK_SELF_MCAST_LB) */
#define AXON_DEV_QP_CREATE_BLOCK_SELF_MCAST_LB (1u << 6)

/*
 * CQ creation flags (seed §8.9.2.2): CROSS_CHANNEL marks a CQ that WAIT
 * tasks may watch; IGNORE_OVERRUN (the manual sets it with modify_cq, Axon
 * at creation too) keeps a CQ nobody polls usable when it fills: the oldest
 * completion is dropped instead of the CQ failing.
 */
#define AXON_DEV_CQ_CREATE_CROSS_CHANNEL (1u << 0)
#define AXON_DEV_CQ_IGNORE_OVERRUN       (1u << 1)
#define AXON_DEV_CQ_ATTR_CAP_FLAGS       (1 << 0)   /* modify_cq: cq_cap_flags is set */

typedef struct axon_dev_qp_attr {
    axon_dev_qp_state_t  qp_state;
    axon_dev_qp_state_t  cur_qp_state;
    axon_dev_mtu_t       path_mtu;
    axon_dev_mig_state_t path_mig_state;
    uint32_t             qkey;
    uint32_t             rq_psn;
    uint32_t             sq_psn;
    uint32_t             dest_qp_num;
    unsigned int         qp_access_flags;
    axon_dev_qp_cap_t    cap;
    axon_dev_ah_attr_t   ah_attr;
    axon_dev_ah_attr_t   alt_ah_attr;
    uint16_t             pkey_index;
    uint16_t             alt_pkey_index;
    uint8_t              en_sqd_async_notify;
    uint8_t              sq_draining;
    uint8_t              max_rd_atomic;
    uint8_t              max_dest_rd_atomic;
    uint8_t              min_rnr_timer;
    uint8_t              port_num;
    uint8_t              timeout;
    uint8_t              retry_cnt;
    uint8_t              rnr_retry;
    uint8_t              alt_port_num;
    uint8_t              alt_timeout;
    uint64_t             dct_key;      /* DCI: AXON_DEV_QP_DC_KEY */
} axon_dev_qp_attr_t;

/*
 * DC targets (seed §8.6.1.3-6). A DCT is ready once created (no modify):
 * it executes what DCIs send it with the key dc_key, RC semantics per
 * initiator, access as an RC QP's qp_access_flags, receives from srq into cq.
 */
typedef enum {   /* the exp verbs' values */
    AXON_DEV_DCT_STATE_ACTIVE   = 0,   /* what an RTR QP is: it receives */
    AXON_DEV_DCT_STATE_DRAINING = 1,   /* being destroyed: initiators still disconnecting */
    AXON_DEV_DCT_STATE_DRAINED  = 2,
} axon_dev_dct_state_t;

typedef struct axon_dev_dct_init_attr {
    void           *dct_context;
    axon_dev_pd_t  *pd;
    axon_dev_cq_t  *cq;
    axon_dev_srq_t *srq;
    uint64_t        dc_key;
    uint8_t         port;
    uint32_t        access_flags;    /* AXON_DEV_ACCESS_REMOTE_* */
    uint8_t         min_rnr_timer;
    uint8_t         tclass;
    uint32_t        flow_label;
    axon_dev_mtu_t  mtu;
    uint16_t        pkey_index;
    uint8_t         gid_index;
    uint8_t         hop_limit;
    uint32_t        create_flags;    /* none defined: 0 */
} axon_dev_dct_init_attr_t;

typedef struct axon_dev_dct_attr {
    axon_dev_dct_state_t state;
    axon_dev_pd_t       *pd;
    axon_dev_cq_t       *cq;
    axon_dev_srq_t      *srq;
    uint64_t             dc_key;
    uint8_t              port;
    uint32_t             access_flags;
    uint8_t              min_rnr_timer;
    uint8_t              tclass;
    uint32_t             flow_label;
    axon_dev_mtu_t       mtu;
    uint16_t             pkey_index;
    uint8_t              gid_index;
    uint8_t              hop_limit;
    uint32_t             key_violations;  /* requests refused for a wrong DC key */
} axon_dev_dct_attr_t;

typedef struct axon_dev_srq_attr {
    uint32_t max_wr;
    uint32_t max_sge;
    uint32_t srq_limit;
} axon_dev_srq_attr_t;

typedef struct axon_dev_srq_init_attr {
    void               *srq_context;
    axon_dev_srq_attr_t attr;
} axon_dev_srq_init_attr_t;

/* ------------------------------------------------------------ work requests */

typedef struct axon_dev_sge {
    uint64_t addr;
    uint32_t length;
    uint32_t lkey;
} axon_dev_sge_t;

typedef struct axon_dev_send_wr axon_dev_send_wr_t;
struct axon_dev_send_wr {
    uint64_t             wr_id;
    axon_dev_send_wr_t  *next;
    axon_dev_sge_t      *sg_list;
    int                  num_sge;
    axon_dev_wr_opcode_t opcode;
    unsigned int         send_flags;
    uint32_t             imm_data;    /* network byte order, as with verbs */
    union {
        struct {
            uint64_t remote_addr;
            uint32_t rkey;
        } rdma;
        struct {
            uint64_t remote_addr;
            uint64_t compare_add;
            uint64_t swap;
            uint32_t rkey;
        } atomic;
        struct {
            axon_dev_ah_t *ah;
            uint32_t       remote_qpn;
            uint32_t       remote_qkey;
        } ud;
        /*
         * EXT_MASKED_ATOMIC_* (seed §8.7.2.4): an operand of 2^log_arg_sz
         * bytes (2..5: 4..32), naturally aligned at remote_addr. Each operand
         * field below holds the value itself when the operand is at most 8
         * bytes (a 4-byte one in the low 32 bits), else the address of
         * 2^log_arg_sz bytes holding it, read at post time. Operands and the
         * result are 64-bit words in host byte order, word i being bytes
         * [8i, 8i + 8) of the target (§8.7.2.2); the previous value goes to
         * sg_list (one SGE of 2^log_arg_sz bytes), as with standard atomics.
         *   CMP_AND_SWP: if ((old ^ compare_val) & compare_mask) == 0 in every
         *     word, new = (old & ~swap_mask) | (swap_val & swap_mask).
         *   FETCH_AND_ADD: a 1 bit of field_boundary marks the most
         *     significant bit of a field; the top bit of each 64-bit word
         *     (of a 4-byte operand: bit 31) always ends one. Fields add
         *     separately, their carries dropped.
         */
        struct {
            uint32_t log_arg_sz;
            uint64_t remote_addr;
            uint32_t rkey;
            union {
                struct {
                    uint64_t compare_mask;
                    uint64_t compare_val;
                    uint64_t swap_val;
                    uint64_t swap_mask;
                } cmp_swap;
                struct {
                    uint64_t add_val;
                    uint64_t field_boundary;
                } fetch_add;
            } op;
        } masked_atomic;
        /*
         * CQE_WAIT (seed §8.9.3): wait until cq (a CROSS_CHANNEL CQ of this
         * context) has received base + cq_count completions since it was
         * created, base being the sum of the largest counts of earlier task
         * lists: WAIT_EN_LAST ends a list and moves base. Successes and
         * errors count alike; an error among them fails the WAIT.
         */
        struct {
            axon_dev_cq_t *cq;
            int32_t        cq_count;
        } cqe_wait;
        /*
         * SEND_ENABLE / RECV_ENABLE: release the managed queue of qp (this
         * context) up to base + wqe_count of its WRs, counted from its
         * creation as base is for WAITs; 0 releases all posted so far. The
         * WRs must have been posted before the enable (EINVAL otherwise).
         */
        struct {
            axon_dev_qp_t *qp;
            int32_t        wqe_count;
        } wqe_enable;
        /*
         * UMR_FILL / UMR_INVALIDATE (seed §8.8.1.5, the manual's ext_op.umr):
         * modified_mr is an indirect key of the QP's PD. A fill gives it
         * num_mrs entries (inline with AXON_DEV_SEND_INLINE, else through
         * memory_objects), the rights exp_access (within the key's
         * access_flags) and the addresses [base_addr, base_addr + size of
         * the layout). An entry names a registered region or an indirect
         * key of the same PD (up to max_umr_recursion_depth levels).
         */
        struct {
            uint32_t              umr_type;         /* axon_dev_umr_wr_type_t */
            axon_dev_mkey_list_t *memory_objects;   /* without AXON_DEV_SEND_INLINE */
            uint64_t              exp_access;       /* AXON_DEV_ACCESS_* */
            axon_dev_mr_t        *modified_mr;
            uint64_t              base_addr;
            uint32_t              num_mrs;
            union {
                axon_dev_mem_region_t *mem_reg_list;
                struct {
                    axon_dev_mem_repeat_block_t *mem_repeat_block_list;
                    size_t                      *repeat_count;   /* stride_dim of them */
                    uint32_t                     stride_dim;
                } rb;
            } mem_list;
        } umr;
    } wr;
    /*
     * A DCI's target (seed §8.6.1.7, the exp verbs' wr.dc): every WR posted to
     * a DCI names one, whatever its opcode (RDMA and atomics take their
     * remote address from wr above, as on RC).
     */
    struct {
        axon_dev_ah_t *ah;
        uint64_t       dct_access_key;
        uint32_t       dct_number;
    } dc;
    /*
     * SEND with AXON_DEV_SEND_WITH_CALC: the sending device reduces the SGEs
     * element-wise (each SGE one operand vector of the same length, a
     * multiple of 8 bytes, at most max_calc_vector elements) and sends the
     * result vector. Operands and result are in network byte order (seed
     * §8.9.3.1), as the receiver finds it.
     */
    struct {
        axon_dev_calc_op_t        calc_op;
        axon_dev_calc_data_type_t data_type;
        axon_dev_calc_data_size_t data_size;
    } calc;
};

typedef struct axon_dev_recv_wr axon_dev_recv_wr_t;
struct axon_dev_recv_wr {
    uint64_t            wr_id;
    axon_dev_recv_wr_t *next;
    axon_dev_sge_t     *sg_list;
    int                 num_sge;
};

typedef struct axon_dev_wc {
    uint64_t             wr_id;
    axon_dev_wc_status_t status;
    axon_dev_wc_opcode_t opcode;
    uint32_t             vendor_err;
    uint32_t             byte_len;
    uint32_t             imm_data;    /* network byte order */
    uint32_t             qp_num;
    uint32_t             src_qp;
    unsigned int         wc_flags;
    uint16_t             pkey_index;
    uint16_t             slid;
    uint8_t              sl;
    uint8_t              dlid_path_bits;
} axon_dev_wc_t;

/* A task list (seed §8.9.3, ibv_exp_post_task): WRs for several QPs in one call */
typedef enum {
    AXON_DEV_TASK_SEND = 0,
    AXON_DEV_TASK_RECV = 1,
} axon_dev_task_type_t;

typedef struct axon_dev_task axon_dev_task_t;
struct axon_dev_task {
    axon_dev_task_type_t task_type;
    struct {
        axon_dev_qp_t *qp;
        union {
            axon_dev_send_wr_t *send_wr;
            axon_dev_recv_wr_t *recv_wr;
        };
    } item;
    axon_dev_task_t *next;
    uint32_t         comp_mask;   /* reserved: must be 0 */
};

typedef struct axon_dev_async_event {
    union {
        axon_dev_cq_t  *cq;
        axon_dev_qp_t  *qp;
        axon_dev_srq_t *srq;
        axon_dev_dct_t *dct;
        int             port_num;
    } element;
    axon_dev_event_type_t event_type;
} axon_dev_async_event_t;

/* ------------------------------------------------------------ ops table */

/*
 * What a back end implements. Every entry is mandatory (a back end returns
 * ENOSYS/EOPNOTSUPP itself); the axon_dev_* wrappers below call through it.
 */
struct axon_dev_ops {
    void (*close)(axon_dev_context_t *ctx);
    int  (*query_device)(axon_dev_context_t *ctx, axon_dev_attr_t *attr);
    int  (*query_port)(axon_dev_context_t *ctx, uint8_t port_num, axon_dev_port_attr_t *attr);
    int  (*query_gid)(axon_dev_context_t *ctx, uint8_t port_num, int index, axon_dev_gid_t *gid);
    int  (*query_pkey)(axon_dev_context_t *ctx, uint8_t port_num, int index, uint16_t *pkey);

    int  (*alloc_pd)(axon_dev_context_t *ctx, axon_dev_pd_t **pd_p);
    int  (*dealloc_pd)(axon_dev_pd_t *pd);          /* EBUSY while objects use it */

    int  (*reg_mr)(axon_dev_pd_t *pd, void *addr, size_t length, int access,
                   axon_dev_mr_t **mr_p);
    int  (*dereg_mr)(axon_dev_mr_t *mr);

    int  (*create_comp_channel)(axon_dev_context_t *ctx, axon_dev_comp_channel_t **ch_p);
    int  (*destroy_comp_channel)(axon_dev_comp_channel_t *ch);  /* EBUSY while CQs use it */
    /* Blocks (unless the fd is non-blocking: then EAGAIN) until a CQ event. */
    int  (*get_cq_event)(axon_dev_comp_channel_t *ch, axon_dev_cq_t **cq_p, void **cq_context_p);
    void (*ack_cq_events)(axon_dev_cq_t *cq, unsigned int nevents);

    int  (*create_cq)(axon_dev_context_t *ctx, int cqe, void *cq_context,
                      axon_dev_comp_channel_t *channel, int comp_vector, axon_dev_cq_t **cq_p);
    /* create_cq with AXON_DEV_CQ_* flags (create_cq is this with 0) */
    int  (*create_cq_ex)(axon_dev_context_t *ctx, int cqe, void *cq_context,
                         axon_dev_comp_channel_t *channel, int comp_vector, uint32_t flags,
                         axon_dev_cq_t **cq_p);
    /* ibv_exp_modify_cq's cap flags (seed §8.9.2.2): with AXON_DEV_CQ_ATTR_CAP_FLAGS
     * in attr_mask, cq_cap_flags (AXON_DEV_CQ_IGNORE_OVERRUN or 0) replaces the CQ's */
    int  (*modify_cq)(axon_dev_cq_t *cq, uint32_t cq_cap_flags, int attr_mask);
    int  (*destroy_cq)(axon_dev_cq_t *cq);          /* EBUSY while QPs or WAITs use it */
    int  (*poll_cq)(axon_dev_cq_t *cq, int num_entries, axon_dev_wc_t *wc);
    int  (*req_notify_cq)(axon_dev_cq_t *cq, int solicited_only);

    int  (*create_srq)(axon_dev_pd_t *pd, axon_dev_srq_init_attr_t *init_attr,
                       axon_dev_srq_t **srq_p);
    int  (*modify_srq)(axon_dev_srq_t *srq, axon_dev_srq_attr_t *attr, int attr_mask);
    int  (*query_srq)(axon_dev_srq_t *srq, axon_dev_srq_attr_t *attr);
    int  (*destroy_srq)(axon_dev_srq_t *srq);
    int  (*post_srq_recv)(axon_dev_srq_t *srq, axon_dev_recv_wr_t *wr,
                          axon_dev_recv_wr_t **bad_wr);

    int  (*create_qp)(axon_dev_pd_t *pd, axon_dev_qp_init_attr_t *init_attr,
                      axon_dev_qp_t **qp_p);
    int  (*modify_qp)(axon_dev_qp_t *qp, axon_dev_qp_attr_t *attr, int attr_mask);
    int  (*query_qp)(axon_dev_qp_t *qp, axon_dev_qp_attr_t *attr, int attr_mask,
                     axon_dev_qp_init_attr_t *init_attr);
    int  (*destroy_qp)(axon_dev_qp_t *qp);
    int  (*post_send)(axon_dev_qp_t *qp, axon_dev_send_wr_t *wr, axon_dev_send_wr_t **bad_wr);
    int  (*post_recv)(axon_dev_qp_t *qp, axon_dev_recv_wr_t *wr, axon_dev_recv_wr_t **bad_wr);
    /* Every task's WRs, in list order, as one post: the device starts none
     * before all are queued. A task that fails is *bad_task (those before it
     * stay posted, as do its WRs before the bad one). */
    int  (*post_task)(axon_dev_context_t *ctx, axon_dev_task_t *task,
                      axon_dev_task_t **bad_task);

    int  (*create_ah)(axon_dev_pd_t *pd, axon_dev_ah_attr_t *attr, axon_dev_ah_t **ah_p);
    int  (*destroy_ah)(axon_dev_ah_t *ah);

    /* UD multicast (seed §4.6.13-14): a UD QP joins or leaves the group of a
     * multicast GID (lid as libibverbs takes it). Not UD, or not a multicast
     * GID: EINVAL; a full table: ENOMEM; detach of a QP not attached: EINVAL;
     * a device without AXON_DEV_CAP_MCAST: EOPNOTSUPP. */
    int  (*attach_mcast)(axon_dev_qp_t *qp, const axon_dev_gid_t *gid, uint16_t lid);
    int  (*detach_mcast)(axon_dev_qp_t *qp, const axon_dev_gid_t *gid, uint16_t lid);

    /* DC targets (seed §8.6.1.3-6). destroy_dct waits (boundedly) for the
     * initiators connected to it; arm_dct requests one KEY_VIOLATION event
     * (comp_mask must be 0). */
    int  (*create_dct)(axon_dev_context_t *ctx, axon_dev_dct_init_attr_t *attr,
                       axon_dev_dct_t **dct_p);
    int  (*destroy_dct)(axon_dev_dct_t *dct);
    int  (*query_dct)(axon_dev_dct_t *dct, axon_dev_dct_attr_t *attr);
    int  (*arm_dct)(axon_dev_dct_t *dct, uint32_t comp_mask);

    /* Indirect memory keys and their entry lists (seed §8.8.1.3-4); an
     * indirect key is released with dereg_mr, a list only while no posted
     * fill still reads it (EBUSY). */
    int  (*create_mr)(axon_dev_pd_t *pd, axon_dev_mr_init_attr_t *attr, axon_dev_mr_t **mr_p);
    int  (*query_mkey)(axon_dev_mr_t *mr, axon_dev_mkey_attr_t *attr);
    int  (*alloc_mkey_list)(axon_dev_pd_t *pd, uint32_t max_klm_list_size,
                            axon_dev_mkey_list_t **list_p);
    int  (*dealloc_mkey_list)(axon_dev_mkey_list_t *list);

    /* Blocks (unless async_fd is non-blocking: then EAGAIN) until an event.
     * As in libibverbs, destroying the object an event names waits until that
     * event is acked, so a reader may use the element until it acks. */
    int  (*get_async_event)(axon_dev_context_t *ctx, axon_dev_async_event_t *event);
    void (*ack_async_event)(axon_dev_context_t *ctx, axon_dev_async_event_t *event);
};

/* ------------------------------------------------------------ device list */

#define AXON_DEV_LOCALITY_LEN 32

typedef struct axon_dev_info {
    char        name[AXON_DEV_NAME_LEN];
    const char *backend;             /* "softib" or "rdma-core" */
    uint64_t    node_guid;
    char        locality[AXON_DEV_LOCALITY_LEN];  /* "pci:<bus id>", "numa:N" (topo.h), "" unknown */
} axon_dev_info_t;

/*
 * Every device of every back end, softib's first. *count_p may be 0. The
 * array is malloc'd (free with axon_dev_free_list). Back ends that found no
 * device add nothing and log at debug level what they looked for.
 */
axon_status_t axon_dev_get_list(axon_dev_info_t **list_p, int *count_p);
void          axon_dev_free_list(axon_dev_info_t *list);

/* One line per back end: "softib: 2 devices", "rdma-core: no hardware devices found". */
typedef void (*axon_dev_report_cb_t)(const char *backend, const char *summary, void *arg);
void          axon_dev_report_backends(axon_dev_report_cb_t cb, void *arg);

/* Open a device by name; ENODEV (and an error line listing the names) if none matches. */
int           axon_dev_open(const char *name, axon_dev_context_t **ctx_p);

/* ------------------------------------------------------------ calls */

static inline void axon_dev_close(axon_dev_context_t *ctx) { ctx->ops->close(ctx); }
static inline int axon_dev_query_device(axon_dev_context_t *ctx, axon_dev_attr_t *attr)
{ return ctx->ops->query_device(ctx, attr); }
static inline int axon_dev_query_port(axon_dev_context_t *ctx, uint8_t port,
                                      axon_dev_port_attr_t *attr)
{ return ctx->ops->query_port(ctx, port, attr); }
static inline int axon_dev_query_gid(axon_dev_context_t *ctx, uint8_t port, int index,
                                     axon_dev_gid_t *gid)
{ return ctx->ops->query_gid(ctx, port, index, gid); }
static inline int axon_dev_query_pkey(axon_dev_context_t *ctx, uint8_t port, int index,
                                      uint16_t *pkey)
{ return ctx->ops->query_pkey(ctx, port, index, pkey); }
static inline int axon_dev_alloc_pd(axon_dev_context_t *ctx, axon_dev_pd_t **pd_p)
{ return ctx->ops->alloc_pd(ctx, pd_p); }
static inline int axon_dev_dealloc_pd(axon_dev_pd_t *pd)
{ return pd->context->ops->dealloc_pd(pd); }
static inline int axon_dev_reg_mr(axon_dev_pd_t *pd, void *addr, size_t length, int access,
                                  axon_dev_mr_t **mr_p)
{ return pd->context->ops->reg_mr(pd, addr, length, access, mr_p); }
static inline int axon_dev_dereg_mr(axon_dev_mr_t *mr)
{ return mr->context->ops->dereg_mr(mr); }
static inline int axon_dev_create_comp_channel(axon_dev_context_t *ctx,
                                               axon_dev_comp_channel_t **ch_p)
{ return ctx->ops->create_comp_channel(ctx, ch_p); }
static inline int axon_dev_destroy_comp_channel(axon_dev_comp_channel_t *ch)
{ return ch->context->ops->destroy_comp_channel(ch); }
static inline int axon_dev_get_cq_event(axon_dev_comp_channel_t *ch, axon_dev_cq_t **cq_p,
                                        void **cq_context_p)
{ return ch->context->ops->get_cq_event(ch, cq_p, cq_context_p); }
static inline void axon_dev_ack_cq_events(axon_dev_cq_t *cq, unsigned int nevents)
{ cq->context->ops->ack_cq_events(cq, nevents); }
static inline int axon_dev_create_cq(axon_dev_context_t *ctx, int cqe, void *cq_context,
                                     axon_dev_comp_channel_t *channel, int comp_vector,
                                     axon_dev_cq_t **cq_p)
{ return ctx->ops->create_cq(ctx, cqe, cq_context, channel, comp_vector, cq_p); }
static inline int axon_dev_create_cq_ex(axon_dev_context_t *ctx, int cqe, void *cq_context,
                                        axon_dev_comp_channel_t *channel, int comp_vector,
                                        uint32_t flags, axon_dev_cq_t **cq_p)
{ return ctx->ops->create_cq_ex(ctx, cqe, cq_context, channel, comp_vector, flags, cq_p); }
static inline int axon_dev_modify_cq(axon_dev_cq_t *cq, uint32_t cq_cap_flags, int attr_mask)
{ return cq->context->ops->modify_cq(cq, cq_cap_flags, attr_mask); }
static inline int axon_dev_destroy_cq(axon_dev_cq_t *cq)
{ return cq->context->ops->destroy_cq(cq); }
static inline int axon_dev_poll_cq(axon_dev_cq_t *cq, int num_entries, axon_dev_wc_t *wc)
{ return cq->context->ops->poll_cq(cq, num_entries, wc); }
static inline int axon_dev_req_notify_cq(axon_dev_cq_t *cq, int solicited_only)
{ return cq->context->ops->req_notify_cq(cq, solicited_only); }
static inline int axon_dev_create_srq(axon_dev_pd_t *pd, axon_dev_srq_init_attr_t *init_attr,
                                      axon_dev_srq_t **srq_p)
{ return pd->context->ops->create_srq(pd, init_attr, srq_p); }
static inline int axon_dev_modify_srq(axon_dev_srq_t *srq, axon_dev_srq_attr_t *attr,
                                      int attr_mask)
{ return srq->context->ops->modify_srq(srq, attr, attr_mask); }
static inline int axon_dev_query_srq(axon_dev_srq_t *srq, axon_dev_srq_attr_t *attr)
{ return srq->context->ops->query_srq(srq, attr); }
static inline int axon_dev_destroy_srq(axon_dev_srq_t *srq)
{ return srq->context->ops->destroy_srq(srq); }
static inline int axon_dev_post_srq_recv(axon_dev_srq_t *srq, axon_dev_recv_wr_t *wr,
                                         axon_dev_recv_wr_t **bad_wr)
{ return srq->context->ops->post_srq_recv(srq, wr, bad_wr); }
static inline int axon_dev_create_qp(axon_dev_pd_t *pd, axon_dev_qp_init_attr_t *init_attr,
                                     axon_dev_qp_t **qp_p)
{ return pd->context->ops->create_qp(pd, init_attr, qp_p); }
static inline int axon_dev_modify_qp(axon_dev_qp_t *qp, axon_dev_qp_attr_t *attr, int attr_mask)
{ return qp->context->ops->modify_qp(qp, attr, attr_mask); }
static inline int axon_dev_query_qp(axon_dev_qp_t *qp, axon_dev_qp_attr_t *attr, int attr_mask,
                                    axon_dev_qp_init_attr_t *init_attr)
{ return qp->context->ops->query_qp(qp, attr, attr_mask, init_attr); }
static inline int axon_dev_destroy_qp(axon_dev_qp_t *qp)
{ return qp->context->ops->destroy_qp(qp); }
static inline int axon_dev_post_send(axon_dev_qp_t *qp, axon_dev_send_wr_t *wr,
                                     axon_dev_send_wr_t **bad_wr)
{ return qp->context->ops->post_send(qp, wr, bad_wr); }
static inline int axon_dev_post_recv(axon_dev_qp_t *qp, axon_dev_recv_wr_t *wr,
                                     axon_dev_recv_wr_t **bad_wr)
{ return qp->context->ops->post_recv(qp, wr, bad_wr); }
static inline int axon_dev_post_task(axon_dev_context_t *ctx, axon_dev_task_t *task,
                                     axon_dev_task_t **bad_task)
{ return ctx->ops->post_task(ctx, task, bad_task); }
static inline int axon_dev_create_ah(axon_dev_pd_t *pd, axon_dev_ah_attr_t *attr,
                                     axon_dev_ah_t **ah_p)
{ return pd->context->ops->create_ah(pd, attr, ah_p); }
static inline int axon_dev_destroy_ah(axon_dev_ah_t *ah)
{ return ah->context->ops->destroy_ah(ah); }
static inline int axon_dev_attach_mcast(axon_dev_qp_t *qp, const axon_dev_gid_t *gid,
                                        uint16_t lid)
{ return qp->context->ops->attach_mcast(qp, gid, lid); }
static inline int axon_dev_detach_mcast(axon_dev_qp_t *qp, const axon_dev_gid_t *gid,
                                        uint16_t lid)
{ return qp->context->ops->detach_mcast(qp, gid, lid); }
static inline int axon_dev_create_dct(axon_dev_context_t *ctx, axon_dev_dct_init_attr_t *attr,
                                      axon_dev_dct_t **dct_p)
{ return ctx->ops->create_dct(ctx, attr, dct_p); }
static inline int axon_dev_destroy_dct(axon_dev_dct_t *dct)
{ return dct->context->ops->destroy_dct(dct); }
static inline int axon_dev_query_dct(axon_dev_dct_t *dct, axon_dev_dct_attr_t *attr)
{ return dct->context->ops->query_dct(dct, attr); }
static inline int axon_dev_arm_dct(axon_dev_dct_t *dct, uint32_t comp_mask)
{ return dct->context->ops->arm_dct(dct, comp_mask); }
static inline int axon_dev_create_mr(axon_dev_pd_t *pd, axon_dev_mr_init_attr_t *attr,
                                     axon_dev_mr_t **mr_p)
{ return pd->context->ops->create_mr(pd, attr, mr_p); }
static inline int axon_dev_query_mkey(axon_dev_mr_t *mr, axon_dev_mkey_attr_t *attr)
{ return mr->context->ops->query_mkey(mr, attr); }
static inline int axon_dev_alloc_mkey_list(axon_dev_pd_t *pd, uint32_t max_klm_list_size,
                                           axon_dev_mkey_list_t **list_p)
{ return pd->context->ops->alloc_mkey_list(pd, max_klm_list_size, list_p); }
static inline int axon_dev_dealloc_mkey_list(axon_dev_mkey_list_t *list)
{ return list->context->ops->dealloc_mkey_list(list); }
static inline int axon_dev_get_async_event(axon_dev_context_t *ctx, axon_dev_async_event_t *ev)
{ return ctx->ops->get_async_event(ctx, ev); }
static inline void axon_dev_ack_async_event(axon_dev_context_t *ctx, axon_dev_async_event_t *ev)
{ ctx->ops->ack_async_event(ctx, ev); }

#ifdef __cplusplus
}
#endif

#endif
