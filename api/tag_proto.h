/*
 * Tag protocols on the wire: the active message ids and their headers.
 *   EAGER_ONLY    [tag][payload]                              whole message
 *   EAGER_FIRST   [tag, total, msg_id, sender][payload]       first fragment
 *   EAGER_MIDDLE  [msg_id, sender, offset][payload]           later fragments
 * A message is matched when its first (or only) fragment arrives, so order
 * per sender is the order of first fragments, which the AM lane preserves.
 */
#ifndef AXON_TAG_PROTO_H
#define AXON_TAG_PROTO_H

#include <stdint.h>
#include "axon_int.h"

enum {
    AXON_AM_TAG_EAGER_ONLY   = 1,
    AXON_AM_TAG_EAGER_FIRST  = 2,
    AXON_AM_TAG_EAGER_MIDDLE = 3,
};

typedef struct axon_eager_hdr {
    axon_tag_t tag;
} axon_eager_hdr_t;

typedef struct axon_eager_first_hdr {
    axon_tag_t tag;
    uint64_t   total_length;
    uint64_t   msg_id;
    uint64_t   sender_uuid;
} axon_eager_first_hdr_t;

typedef struct axon_eager_middle_hdr {
    uint64_t msg_id;
    uint64_t sender_uuid;
    uint64_t offset;
} axon_eager_middle_hdr_t;

/* Pools the tag layer needs on a worker (small unexpected buffers, reassembly). */
axon_status_t axon_tag_worker_init(axon_worker_h worker, size_t unexp_small_size);
/* Register the tag AM handlers in a worker's table. */
void          axon_tag_register_handlers(axon_worker_h worker);
/* Push a queued send as far as transport resources allow: OK, INPROGRESS or error. */
axon_status_t axon_tag_send_progress(axon_request_h req);
/* Release everything the tag layer holds at worker destruction. */
void          axon_tag_worker_cleanup(axon_worker_h worker);

#endif
