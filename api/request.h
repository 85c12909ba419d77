/* Requests: state of one operation in flight, from the worker's pool. */
#ifndef AXON_REQUEST_H
#define AXON_REQUEST_H

#include "axon_int.h"

enum {
    AXON_REQUEST_COMPLETED = 1u << 0,
    AXON_REQUEST_RELEASED  = 1u << 1,  /* the user called axon_request_free */
    AXON_REQUEST_RECV      = 1u << 2,  /* a receive: the recv callback type applies */
    AXON_REQUEST_IN_CALLBACK = 1u << 3, /* free() inside the callback only marks it */
};

/* Eager send protocols, chosen from the message size at post time */
typedef enum {
    AXON_SEND_PROTO_SHORT,   /* one short AM */
    AXON_SEND_PROTO_BCOPY,   /* one bcopy AM */
    AXON_SEND_PROTO_MULTI,   /* first + middle bcopy fragments */
    AXON_SEND_PROTO_CLOSE,   /* not a send: an endpoint close waiting for the flush */
} axon_send_proto_t;

struct axon_request {
    uint32_t          flags;
    axon_status_t     status;
    axon_worker_h     worker;
    void             *user_data;
    union {
        axon_send_callback_t     send;
        axon_tag_recv_callback_t recv;
    } cb;
    axon_list_link_t  list;   /* ep pending queue or worker deferred list */
    union {
        struct {
            axon_ep_h          ep;
            const uint8_t     *buffer;
            size_t             length;
            axon_tag_t         tag;
            size_t             offset;    /* bytes already sent */
            uint64_t           msg_id;
            axon_send_proto_t  proto;
        } send;
        struct {
            axon_tm_recv_t       tm;
            uint8_t             *buffer;
            size_t               length;
            size_t               received;  /* bytes of the message arrived so far */
            axon_tag_recv_info_t info;
        } recv;
    };
};

axon_request_h axon_request_get(axon_worker_h worker, const axon_request_param_t *param,
                                uint32_t flags);
/* Mark complete; the callback runs now inside progress, else at the next progress. */
void           axon_request_complete(axon_request_h req, axon_status_t status);
/* Run callbacks of requests completed outside progress. */
unsigned       axon_request_dispatch_deferred(axon_worker_h worker);
/* Return a request that never left the library (completed at once, no NO_IMM_CMPL). */
void           axon_request_put(axon_request_h req);

#endif
