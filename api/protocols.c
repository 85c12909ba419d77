/*
 * The protocols a worker runs, in the order their hooks are called. The core
 * reaches them only through this table (axon_proto_ops_t, axon_int.h); a new
 * protocol adds its ops here.
 */
#include "coll.h"
#include "rma_proto.h"
#include "tag_proto.h"

const axon_proto_ops_t *const axon_protocols[] = {
    &axon_tag_proto,
    &axon_rma_proto,
    &axon_coll_proto,
    NULL,
};
