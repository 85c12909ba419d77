/*
 * Internals of the librdmacm back end of the connection manager, shared only
 * with its unit tests: the converters between librdmacm's types and the
 * device layer's. Event types and port spaces have the same values
 * (dev_rdmacore_cm.c asserts it); the conn param is converted field by field.
 */
#ifndef AXON_DEV_RDMACORE_CM_H
#define AXON_DEV_RDMACORE_CM_H

#include <rdma/rdma_cma.h>
#include "dev_cm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* private_data is shared, not copied. */
void axon_dev_rdmacore_cm_param_to_rdma(const axon_dev_cm_conn_param_t *in,
                                        struct rdma_conn_param *out);
void axon_dev_rdmacore_cm_param_from_rdma(const struct rdma_conn_param *in,
                                          axon_dev_cm_conn_param_t *out);
/* The event type, or -1 for one this layer does not know. */
int  axon_dev_rdmacore_cm_event_from_rdma(enum rdma_cm_event_type type);

#ifdef __cplusplus
}
#endif

#endif
