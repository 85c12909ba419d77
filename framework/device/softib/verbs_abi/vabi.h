/*
 * vabi: the libibverbs ABI (rdma-core 44) over the device layer, built as a
 * libibverbs.so.1 of its own so that unmodified verbs programs run on
 * softib when LD_LIBRARY_PATH points at it (docs/design.md, "softib behind
 * the libibverbs ABI").
 *
 * Every ibv_* object the program sees is the first member of a vabi wrapper
 * that holds the device-layer object; the device-layer object's user
 * context (cq_context, qp_context, srq_context) points back at the wrapper,
 * so completion and async events lead to the ibv object. The context is a
 * struct verbs_context, so the inline wrappers of <infiniband/verbs.h> find
 * the extended ops; an op softib lacks stays NULL and the inline wrapper
 * reports EOPNOTSUPP itself.
 */
#ifndef AXON_VABI_H
#define AXON_VABI_H

#include <errno.h>
#include <pthread.h>
#include <infiniband/verbs.h>
#include "dev.h"
#include "dev_ibv_map.h"


/*
 * A device. provider_ops sits where rdma-core's struct verbs_device keeps
 * its provider's ops, just before the ibv_device: a provider library asking
 * whether a device is its own reads that word (libmlx5's
 * mlx5dv_is_supported, which UCX calls for each device), and finds NULL.
 */
typedef struct vabi_device {
    const void         *provider_ops;
    struct ibv_device   ibv;
    uint64_t            node_guid;    /* host order */
    struct vabi_device *next;         /* in the process-wide list of devices seen */
} vabi_device_t;

typedef struct vabi_context {
    struct verbs_context vctx;        /* vctx.context is what the program holds */
    axon_dev_context_t  *dev;
} vabi_context_t;

typedef struct { struct ibv_pd ibv;           axon_dev_pd_t *dev; }           vabi_pd_t;
typedef struct { struct ibv_mr ibv;           axon_dev_mr_t *dev; }           vabi_mr_t;
typedef struct { struct ibv_ah ibv;           axon_dev_ah_t *dev; }           vabi_ah_t;
typedef struct { struct ibv_comp_channel ibv; axon_dev_comp_channel_t *dev; } vabi_channel_t;

/* Completions an extended CQ reads from the device at a time (vabi_cq.c). */
#define VABI_CQ_BATCH 16

/* A CQ: ex's first fields are the program's ibv_cq; the batch serves the
 * extended polling interface (start_poll/next_poll/end_poll). */
typedef struct {
    struct ibv_cq_ex ex;
    axon_dev_cq_t   *dev;
    unsigned         head, count;   /* the batch's entries not yet consumed */
    int              current;       /* batch[head] is the entry being read */
    axon_dev_wc_t    batch[VABI_CQ_BATCH];
} vabi_cq_t;
typedef struct {
    struct ibv_srq ibv;
    axon_dev_srq_t *dev;
} vabi_srq_t;

/* A QP: ex.qp_base is the program's ibv_qp; wr is the ibv_wr_* interface's
 * state, only for a QP created with send ops flags (vabi_wr.c). */
typedef struct vabi_wr_builder vabi_wr_builder_t;
typedef struct {
    struct ibv_qp_ex   ex;
    axon_dev_qp_t     *dev;
    vabi_wr_builder_t *wr;
    struct axon_dev_cm_id *cm_id;   /* librdmacm's QP: its id in the CM, or NULL */
} vabi_qp_t;

/* The wrapper of an ibv object (the ibv struct is its first member). */
#define VABI(_type, _obj) ((vabi_##_type##_t*)(void*)(_obj))

static inline vabi_context_t *vabi_context(struct ibv_context *ctx)
{
    return (vabi_context_t*)(void*)((char*)ctx - offsetof(struct verbs_context, context));
}

static inline axon_dev_context_t *vabi_dev(struct ibv_context *ctx)
{
    return vabi_context(ctx)->dev;
}

/* A verb that returns an object failed with err: set errno, return NULL. */
static inline void *vabi_fail_null(int err)
{
    errno = err;
    return NULL;
}

/* A verb that softib or this library lacks: one log line naming it, then errno. */
int   vabi_unsupported(const char *verb);
void *vabi_unsupported_null(const char *verb);

vabi_context_t *vabi_context_new(struct ibv_device *device, axon_dev_context_t *dev);

/* ibv_create_qp with the device-layer QP made by create (librdmacm's QPs by the CM),
 * with create_flags (IBV_QP_CREATE_*, of ibv_qp_init_attr_ex). */
typedef int (*vabi_qp_create_fn_t)(void *arg, axon_dev_pd_t *pd, axon_dev_qp_init_attr_t *attr,
                                   axon_dev_qp_t **qp_p);
struct ibv_qp *vabi_create_qp_by(struct ibv_pd *pd, struct ibv_qp_init_attr *attr,
                                 uint32_t create_flags, vabi_qp_create_fn_t create, void *arg);
/* The ibv_qp_init_attr_ex fields beyond ibv_qp_init_attr softib takes (comp_mask:
 * PD, send ops flags, create flags BLOCK_SELF_MCAST_LB); 0 or EOPNOTSUPP, logged. */
int vabi_qp_ex_check(const struct ibv_qp_init_attr_ex *attr, const char *what);

/* Ops of the context (vabi_device.c fills the tables). */
int  vabi_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
int  vabi_req_notify_cq(struct ibv_cq *cq, int solicited_only);
int  vabi_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);
int  vabi_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);
int  vabi_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
                        struct ibv_recv_wr **bad_wr);
/* The ibv_wr_* interface of qp for the send ops flags ops (vabi_wr.c); 0 or an errno. */
int  vabi_wr_init(vabi_qp_t *qp, uint64_t ops);
void vabi_wr_cleanup(vabi_qp_t *qp);
struct ibv_qp *vabi_create_qp_ex(struct ibv_context *context,
                                 struct ibv_qp_init_attr_ex *attr);
struct ibv_cq_ex *vabi_create_cq_ex(struct ibv_context *context,
                                    struct ibv_cq_init_attr_ex *attr);
struct ibv_srq *vabi_create_srq_ex(struct ibv_context *context,
                                   struct ibv_srq_init_attr_ex *attr);

#endif
