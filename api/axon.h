/*
 * Axon — a transport framework for HPC communication libraries.
 *
 * This header is the whole public API. Objects, from the outside in:
 *
 *   context   one per library instance: reads AXON_* configuration, loads the
 *             transport components and records the features the caller needs.
 *   worker    a progress engine with its own transport interfaces, its own
 *             tag-matching queues and an address that peers connect to.
 *             A worker is not thread-safe: calls on one worker (and on its
 *             endpoints and requests) must be serialized by the caller.
 *   endpoint  a connection from a worker to a peer worker, created from the
 *             peer's worker address (an opaque blob the caller exchanges).
 *   request   an operation in flight.
 *
 * Completion rules (the same for every non-blocking call):
 *   AXON_OK           the operation finished inside the call; no request was
 *                     created and the callback will not be called.
 *   AXON_INPROGRESS   *req_p holds a request. It completes during
 *                     axon_worker_progress(); its callback (if any) runs from
 *                     there, never from inside the initiating call.
 *   < 0               an error; nothing was started, *req_p is untouched.
 * With AXON_REQ_FLAG_NO_IMM_CMPL a call never returns AXON_OK: an operation
 * that finished at once still returns a (completed) request.
 * Every request must be released with axon_request_free(), before or after it
 * completes; a request freed early still completes and still calls back.
 */
#ifndef AXON_H
#define AXON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AXON_VERSION_MAJOR 0
#define AXON_VERSION_MINOR 1
#define AXON_VERSION_PATCH 0

/* ---------------------------------------------------------------- status */

typedef enum {
    AXON_OK                   =   0,
    AXON_INPROGRESS           =   1,  /* not an error: operation in flight */
    AXON_ERR_NO_MESSAGE       =  -1,  /* probe found nothing */
    AXON_ERR_NO_RESOURCE      =  -2,  /* transport resources exhausted, retry later */
    AXON_ERR_IO_ERROR         =  -3,
    AXON_ERR_NO_MEMORY        =  -4,
    AXON_ERR_INVALID_PARAM    =  -5,
    AXON_ERR_UNREACHABLE      =  -6,  /* no transport reaches the peer */
    AXON_ERR_INVALID_ADDR     =  -7,
    AXON_ERR_UNSUPPORTED      =  -8,
    AXON_ERR_MSG_TRUNCATED    =  -9,  /* message longer than the receive buffer */
    AXON_ERR_NO_DEVICE        = -10,
    AXON_ERR_BUSY             = -11,
    AXON_ERR_CANCELED         = -12,
    AXON_ERR_CONNECTION_RESET = -13,
    AXON_ERR_ENDPOINT_TIMEOUT = -14,
    AXON_ERR_TIMED_OUT        = -15,
    AXON_ERR_NOT_FOUND        = -16,
    AXON_ERR_NO_ELEM          = -17,  /* no transport/component matches */
    AXON_ERR_IO_FORMAT        = -18,  /* malformed data from outside (address, packet) */
} axon_status_t;

/** Short, stable text for a status ("Message truncated"). */
const char *axon_status_string(axon_status_t status);

/* ---------------------------------------------------------------- handles */

typedef struct axon_context *axon_context_h;
typedef struct axon_worker  *axon_worker_h;
typedef struct axon_ep      *axon_ep_h;
typedef struct axon_request *axon_request_h;
typedef uint64_t             axon_tag_t;

/* ---------------------------------------------------------------- version */

void        axon_get_version(unsigned *major, unsigned *minor, unsigned *patch);
const char *axon_get_version_string(void);

/* ---------------------------------------------------------------- context */

/** Features the caller will use; transports that cannot serve them are not used. */
enum {
    AXON_FEATURE_TAG  = 1u << 0,  /* tag-matched messaging */
    AXON_FEATURE_RMA  = 1u << 1,  /* put/get */
    AXON_FEATURE_AMO  = 1u << 2,  /* atomics */
    AXON_FEATURE_COLL = 1u << 3,  /* collectives */
};

/** A configuration value set by the caller; overrides the AXON_<NAME> variable. */
typedef struct {
    const char *name;   /* without the AXON_ prefix: "TLS", "SHM_FIFO_SIZE" */
    const char *value;
} axon_config_kv_t;

typedef struct {
    uint32_t                features;      /* AXON_FEATURE_* (at least one) */
    const axon_config_kv_t *config;        /* optional overrides */
    size_t                  config_count;
} axon_context_params_t;

/**
 * Read configuration, load components and pick the transports allowed by
 * AXON_TLS / AXON_NET_DEVICES. Fails with AXON_ERR_INVALID_PARAM on a bad
 * configuration value or an unknown transport/device name (the log says which).
 */
axon_status_t axon_init(const axon_context_params_t *params, axon_context_h *context_p);
void          axon_cleanup(axon_context_h context);

/** Print the context's configuration and the transports it may use. */
void          axon_context_print_info(axon_context_h context, FILE *stream);

/* ---------------------------------------------------------------- worker */

typedef struct {
    uint32_t reserved;  /* must be 0; room for thread mode and events */
} axon_worker_params_t;

/** params may be NULL. */
axon_status_t axon_worker_create(axon_context_h context, const axon_worker_params_t *params,
                                 axon_worker_h *worker_p);
/** Closes any endpoint still open (force) and releases everything. */
void          axon_worker_destroy(axon_worker_h worker);

/** Drive communication; returns the number of events handled (0: nothing happened). */
unsigned      axon_worker_progress(axon_worker_h worker);

/** The worker's address: an opaque blob valid until released; give it to peers. */
axon_status_t axon_worker_get_address(axon_worker_h worker, void **address_p, size_t *length_p);
void          axon_worker_release_address(axon_worker_h worker, void *address);

/* ---------------------------------------------------------------- endpoint */

/**
 * Called (from axon_worker_progress) when the peer of an endpoint fails:
 * its process died or its connection was reset. By then every request that
 * depended on the peer has completed with status; later operations on the
 * endpoint fail with it at once. The endpoint must still be closed.
 */
typedef void (*axon_ep_error_callback_t)(void *arg, axon_ep_h ep, axon_status_t status);

typedef struct {
    const void              *address;         /* the peer's worker address */
    size_t                   address_length;
    axon_ep_error_callback_t err_cb;          /* optional */
    void                    *err_cb_arg;
} axon_ep_params_t;

axon_status_t axon_ep_create(axon_worker_h worker, const axon_ep_params_t *params, axon_ep_h *ep_p);

enum {
    AXON_EP_CLOSE_FLUSH = 0,  /* complete queued sends first */
    AXON_EP_CLOSE_FORCE = 1,  /* drop queued sends: they complete with AXON_ERR_CANCELED */
};

/**
 * Close an endpoint. Returns AXON_OK when closed at once, or AXON_INPROGRESS
 * with a request that completes when the flush is done. The endpoint handle
 * must not be used after this call.
 */
axon_status_t axon_ep_close_nb(axon_ep_h ep, unsigned mode, axon_request_h *req_p);

/** What an endpoint runs on: the transport lanes chosen for it. */
typedef struct {
    char     small_tl[16];   /* lane for small messages, e.g. "shm" */
    char     small_dev[32];
    char     bulk_tl[16];    /* lane for large messages */
    char     bulk_dev[32];
    size_t   eager_short_max; /* largest message sent as a single short active message */
} axon_ep_attr_t;

axon_status_t axon_ep_query(axon_ep_h ep, axon_ep_attr_t *attr);

/* ---------------------------------------------------------------- requests */

typedef struct {
    axon_tag_t sender_tag;  /* tag the message was sent with */
    size_t     length;      /* length the sender sent (may exceed the buffer if truncated) */
} axon_tag_recv_info_t;

typedef void (*axon_send_callback_t)(axon_request_h req, axon_status_t status, void *user_data);
typedef void (*axon_tag_recv_callback_t)(axon_request_h req, axon_status_t status,
                                         const axon_tag_recv_info_t *info, void *user_data);

enum {
    AXON_REQ_FLAG_NO_IMM_CMPL = 1u << 0,  /* always return a request */
};

typedef struct {
    uint32_t flags;                     /* AXON_REQ_FLAG_* */
    union {
        axon_send_callback_t     send;
        axon_tag_recv_callback_t recv;
    } cb;                               /* optional */
    void                 *user_data;
    axon_tag_recv_info_t *recv_info;    /* receives: filled when completed at once */
} axon_request_param_t;

/** AXON_INPROGRESS while in flight, then the final status (info filled for receives). */
axon_status_t axon_request_test(axon_request_h req, axon_tag_recv_info_t *info);
/** Progress the worker until req completes; returns its final status. */
axon_status_t axon_request_wait(axon_worker_h worker, axon_request_h req, axon_tag_recv_info_t *info);
/** Release a request (completed or not). */
void          axon_request_free(axon_request_h req);

/* ---------------------------------------------------------------- tag messaging */

/** All 64 bits must match. */
#define AXON_TAG_MASK_FULL ((axon_tag_t)-1)

/**
 * Send len bytes with a tag. The buffer may be reused once the send completes.
 * Messages from one sender to one receiver match in the order they were sent.
 * param may be NULL.
 */
axon_status_t axon_tag_send_nb(axon_ep_h ep, const void *buffer, size_t length, axon_tag_t tag,
                               const axon_request_param_t *param, axon_request_h *req_p);

/**
 * Synchronous send (MPI_Ssend): like axon_tag_send_nb, but completes only
 * once the receiver has matched the message to a receive.
 */
axon_status_t axon_tag_send_sync_nb(axon_ep_h ep, const void *buffer, size_t length,
                                    axon_tag_t tag, const axon_request_param_t *param,
                                    axon_request_h *req_p);

/**
 * Receive a message whose tag satisfies (msg_tag & tag_mask) == (tag & tag_mask),
 * from any endpoint of the worker. A message longer than the buffer completes
 * with AXON_ERR_MSG_TRUNCATED after writing only the first length bytes.
 */
axon_status_t axon_tag_recv_nb(axon_worker_h worker, void *buffer, size_t length,
                               axon_tag_t tag, axon_tag_t tag_mask,
                               const axon_request_param_t *param, axon_request_h *req_p);

/** A message taken out of the unexpected queue by a probe, for axon_tag_msg_recv_nb. */
typedef struct axon_tag_message *axon_tag_message_h;

/**
 * Look for an arrived message matching (tag, tag_mask) without receiving it
 * (MPI_Iprobe). Returns AXON_OK and fills info when one is there, else
 * AXON_ERR_NO_MESSAGE. With remove != 0 (MPI_Improbe) the message leaves the
 * matching queues and *msg_p must be passed to axon_tag_msg_recv_nb; no other
 * receive can match it any more. Does not progress the worker.
 */
axon_status_t axon_tag_probe_nb(axon_worker_h worker, axon_tag_t tag, axon_tag_t tag_mask,
                                int remove, axon_tag_recv_info_t *info,
                                axon_tag_message_h *msg_p);

/** Receive a message returned by axon_tag_probe_nb (MPI_Mrecv); same completion rules. */
axon_status_t axon_tag_msg_recv_nb(axon_worker_h worker, void *buffer, size_t length,
                                   axon_tag_message_h message,
                                   const axon_request_param_t *param, axon_request_h *req_p);

/**
 * Cancel a posted receive that has not matched a message yet (MPI_Cancel):
 * it completes with AXON_ERR_CANCELED (its callback runs from progress).
 * Returns AXON_OK if canceled, AXON_ERR_BUSY if it already matched (it then
 * completes normally), AXON_ERR_UNSUPPORTED for other requests.
 */
axon_status_t axon_request_cancel(axon_worker_h worker, axon_request_h req);

#ifdef __cplusplus
}
#endif

#endif /* AXON_H */
