/*
 * Internals of the rdma-core back end, shared only with its unit tests:
 * the wrapper objects (each an axon_dev_* object around its ibv_* one) and
 * the converters between the two families of types. Enum and flag values
 * are identical (dev_rdmacore.c asserts it); structs are converted field by
 * field because their layouts differ, each converter generated from its
 * struct's field list (dev_rdmacore.c, dev_rdmacore_cm.c).
 */
#ifndef AXON_DEV_RDMACORE_H
#define AXON_DEV_RDMACORE_H

#include "dev_backend.h"
#include "dev_ibv_map.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const axon_dev_backend_t axon_dev_rdmacore_backend;
#ifdef HAVE_RDMACM
extern const struct axon_dev_cm_ops axon_dev_rdmacore_cm_ops;
#endif

typedef struct axon_dev_rdmacore_context {
    axon_dev_context_t  super;
    struct ibv_context *ibv;
    int                 max_inline;   /* probed once (-1: not yet) */
} axon_dev_rdmacore_context_t;

typedef struct { axon_dev_pd_t super;           struct ibv_pd *ibv; }           axon_dev_rdmacore_pd_t;
typedef struct { axon_dev_mr_t super;           struct ibv_mr *ibv; }           axon_dev_rdmacore_mr_t;
typedef struct { axon_dev_cq_t super;           struct ibv_cq *ibv; }           axon_dev_rdmacore_cq_t;
typedef struct { axon_dev_srq_t super;          struct ibv_srq *ibv; }          axon_dev_rdmacore_srq_t;
typedef struct { axon_dev_qp_t super;           struct ibv_qp *ibv; }           axon_dev_rdmacore_qp_t;
typedef struct { axon_dev_ah_t super;           struct ibv_ah *ibv; }           axon_dev_rdmacore_ah_t;
typedef struct { axon_dev_comp_channel_t super; struct ibv_comp_channel *ibv; } axon_dev_rdmacore_channel_t;

/* The wrapper of an axon object (the axon struct is its first member). */
#define AXON_DEV_RDMACORE(_type, _obj) ((axon_dev_rdmacore_##_type##_t*)(void*)(_obj))

/* Attributes, ibv -> axon */
void axon_dev_rdmacore_device_attr_from_ibv(const struct ibv_device_attr *in,
                                            axon_dev_attr_t *out);
void axon_dev_rdmacore_port_attr_from_ibv(const struct ibv_port_attr *in,
                                          axon_dev_port_attr_t *out);
void axon_dev_rdmacore_ah_attr_from_ibv(const struct ibv_ah_attr *in, axon_dev_ah_attr_t *out);
void axon_dev_rdmacore_qp_attr_from_ibv(const struct ibv_qp_attr *in, axon_dev_qp_attr_t *out);
void axon_dev_rdmacore_qp_cap_from_ibv(const struct ibv_qp_cap *in, axon_dev_qp_cap_t *out);
void axon_dev_rdmacore_srq_attr_from_ibv(const struct ibv_srq_attr *in, axon_dev_srq_attr_t *out);

/* Attributes, axon -> ibv (out is zeroed first: ibv-only fields stay 0) */
void axon_dev_rdmacore_ah_attr_to_ibv(const axon_dev_ah_attr_t *in, struct ibv_ah_attr *out);
void axon_dev_rdmacore_qp_attr_to_ibv(const axon_dev_qp_attr_t *in, struct ibv_qp_attr *out);
void axon_dev_rdmacore_qp_cap_to_ibv(const axon_dev_qp_cap_t *in, struct ibv_qp_cap *out);
void axon_dev_rdmacore_srq_attr_to_ibv(const axon_dev_srq_attr_t *in, struct ibv_srq_attr *out);

/*
 * One send WR without its next link; a UD WR's ah must be an rdma-core AH.
 * The scatter list is shared, not copied (the SGE layouts are asserted equal).
 */
void axon_dev_rdmacore_send_wr_to_ibv(const axon_dev_send_wr_t *in, struct ibv_send_wr *out);

/*
 * Async events. from_ibv finds the wrapper through the ibv object's context
 * pointer (which the back end sets to the wrapper); to_ibv rebuilds the event
 * ibv_ack_async_event needs. Both return EINVAL for an unknown event type.
 */
int  axon_dev_rdmacore_event_from_ibv(const struct ibv_async_event *in,
                                      axon_dev_async_event_t *out);
int  axon_dev_rdmacore_event_to_ibv(const axon_dev_async_event_t *in,
                                    struct ibv_async_event *out);

#ifdef __cplusplus
}
#endif

#endif
