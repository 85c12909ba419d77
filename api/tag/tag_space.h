/*
 * The tag protocol's service to the collectives (api/coll/): sends and
 * receives in a tag space of their own (AXON_TAG_SPACE_*), with the same
 * protocols, ordering and completion rules as axon_tag_send_nb and
 * axon_tag_recv_nb, whose spaces are AXON_TAG_SPACE_APP.
 */
#ifndef AXON_TAG_SPACE_H
#define AXON_TAG_SPACE_H

#include "axon_int.h"

axon_status_t axon_tag_space_send_nb(axon_ep_h ep, unsigned space, const void *buffer,
                                     size_t length, axon_tag_t tag,
                                     const axon_request_param_t *param, axon_request_h *req_p);
axon_status_t axon_tag_space_recv_nb(axon_worker_h worker, unsigned space, void *buffer,
                                     size_t length, axon_tag_t tag, axon_tag_t tag_mask,
                                     const axon_request_param_t *param, axon_request_h *req_p);

#endif
