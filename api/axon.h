/*
 * Axon — a transport framework for HPC communication libraries.
 *
 * This header (with axon_status.h and axon_config_kv.h, which it includes)
 * is the whole public API. Objects, from the outside in:
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
#include "axon_config_kv.h"
#include "axon_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AXON_VERSION_MAJOR 0
#define AXON_VERSION_MINOR 1
#define AXON_VERSION_PATCH 0

/* ---------------------------------------------------------------- handles */

typedef struct axon_context *axon_context_h;
typedef struct axon_worker  *axon_worker_h;
typedef struct axon_ep      *axon_ep_h;
typedef struct axon_request *axon_request_h;
typedef uint64_t             axon_tag_t;
typedef struct axon_mem     *axon_mem_h;     /* memory mapped for remote access */
typedef struct axon_rkey    *axon_rkey_h;    /* a peer's mapped memory, as one endpoint reaches it */

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

/**
 * Waiting instead of polling (like ucp_worker_get_efd / ucp_worker_arm):
 * axon_worker_get_efd gives a descriptor to poll() or epoll for readability,
 * owned by the worker. AXON_ERR_UNSUPPORTED (logged at debug level, naming
 * the transport) when a transport of the worker can only be polled (rc, ud,
 * dc and ofi today). The usual loop: progress until it returns 0, then
 * axon_worker_arm: AXON_OK the worker is armed, sleep until the descriptor is
 * readable (then progress again); AXON_ERR_BUSY there is work already
 * (messages in, sends queued, callbacks due): progress and arm again;
 * AXON_ERR_UNSUPPORTED not now (a peer cannot wake us): poll instead. Wakeups
 * may be spurious. Over shm a peer's death wakes the sleeper (its process is
 * watched). Not thread-safe, like progress.
 */
axon_status_t axon_worker_get_efd(axon_worker_h worker, int *fd_p);
axon_status_t axon_worker_arm(axon_worker_h worker);

/** The worker's id (never AXON_SENDER_ANY): receivers see it as sender_id. */
uint64_t      axon_worker_id(axon_worker_h worker);

/** The worker's address: an opaque blob valid until released; give it to peers. */
axon_status_t axon_worker_get_address(axon_worker_h worker, void **address_p, size_t *length_p);
void          axon_worker_release_address(axon_worker_h worker, void *address);

/* ---------------------------------------------------------------- job bootstrap */

/** A job as its launcher started it: every process's worker address, by rank. */
typedef struct axon_job {
    uint32_t  rank;              /* this process */
    uint32_t  size;              /* processes in the job */
    void    **addresses;         /* size worker addresses; addresses[rank] is the caller's */
    size_t   *address_lengths;
} axon_job_t;

/**
 * Under a PMIx launcher (Open MPI's mpirun, prterun, srun --mpi=pmix): this
 * process's rank, the job's size and the address of one worker per process
 * (each calls this with its worker; a collective over the job).
 * AXON_ERR_UNREACHABLE when no launcher started the process,
 * AXON_ERR_UNSUPPORTED in a build without PMIx. Release with axon_job_release.
 */
axon_status_t axon_job_bootstrap(axon_worker_h worker, axon_job_t *job);
void          axon_job_release(axon_job_t *job);

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

/** The id of the worker an endpoint reaches (its axon_worker_id()). */
uint64_t      axon_ep_peer_id(axon_ep_h ep);

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
    uint64_t   sender_id;   /* the sending worker: its axon_worker_id(), axon_ep_peer_id() of
                             * an endpoint to it */
    uint32_t   imm_data;    /* sent with AXON_REQ_FLAG_IMM_DATA, else 0 */
    uint32_t   flags;       /* AXON_TAG_INFO_* */
} axon_tag_recv_info_t;

enum {
    AXON_TAG_INFO_IMM_DATA = 1u << 0,  /* the sender gave imm_data (libfabric's remote CQ data) */
};

typedef void (*axon_send_callback_t)(axon_request_h req, axon_status_t status, void *user_data);
typedef void (*axon_tag_recv_callback_t)(axon_request_h req, axon_status_t status,
                                         const axon_tag_recv_info_t *info, void *user_data);

enum {
    AXON_REQ_FLAG_NO_IMM_CMPL = 1u << 0,  /* always return a request */
    AXON_REQ_FLAG_IMM_DATA    = 1u << 1,  /* tag sends: deliver imm_data with the message */
    AXON_REQ_FLAG_SENDER      = 1u << 2,  /* tag receives: match only messages of sender_id */
    AXON_REQ_FLAG_INJECT      = 1u << 3,  /* tag sends: the buffer may be reused as soon as the
                                           * call returns (libfabric's inject); a send that
                                           * cannot leave inside the call moves to a copy */
    AXON_REQ_FLAG_LAYOUT      = 1u << 4,  /* the data is param->layout over the buffer (below) */
};

/* ---------------------------------------------------------------- layouts */

/*
 * Non-contiguous data, described as a value relative to a base address (the
 * buffer argument of the call that takes it), so layouts nest. The data of a
 * layout is its pieces' bytes in order (its packed order); its size is the
 * sum of the pieces' lengths. Zero-length pieces and empty layouts are
 * allowed. A layout (and what it points to) must stay valid, like the
 * buffer, until the operation completes.
 */
enum {
    AXON_LAYOUT_IOV     = 1,  /* a list of pieces (MPI_Type_create_hindexed in bytes) */
    AXON_LAYOUT_STRIDED = 2,  /* count blocks a stride apart (MPI_Type_vector, shmem_iput) */
};

/* One piece: length bytes at base + offset (base NULL: offset is an address). */
typedef struct {
    ptrdiff_t offset;
    size_t    length;
} axon_layout_piece_t;

typedef struct axon_layout {
    int kind;  /* AXON_LAYOUT_* */
    union {
        struct {
            const axon_layout_piece_t *pieces;
            size_t                     count;
        } iov;
        struct {
            size_t                     count;
            size_t                     block_length; /* bytes of a block when block is NULL */
            ptrdiff_t                  stride;       /* block i starts at base + i * stride;
                                                      * may be negative */
            /* NULL: each block is block_length contiguous bytes; else each block is this
             * layout, based at the block's start (one level: two in all). */
            const struct axon_layout  *block;
        } strided;
    };
} axon_layout_t;

/** No worker has this id: a sender_id that matches every sender. */
#define AXON_SENDER_ANY ((uint64_t)0)

typedef struct {
    uint32_t flags;                     /* AXON_REQ_FLAG_* */
    uint32_t imm_data;                  /* with AXON_REQ_FLAG_IMM_DATA */
    union {
        axon_send_callback_t     send;
        axon_tag_recv_callback_t recv;
    } cb;                               /* optional */
    void                 *user_data;
    axon_tag_recv_info_t *recv_info;    /* receives: filled when completed at once */
    uint64_t              sender_id;    /* with AXON_REQ_FLAG_SENDER (MPI source, libfabric's
                                         * FI_DIRECTED_RECV) */
    /* With AXON_REQ_FLAG_LAYOUT (tag sends and receives, put and get on the local side):
     * the buffer argument is the layout's base and the length argument must be its size.
     * A receiving layout (receive, get) must not have overlapping pieces. A bad layout
     * fails with AXON_ERR_INVALID_PARAM and a log line naming the bad value. */
    const axon_layout_t  *layout;
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
 * from any endpoint of the worker, or with AXON_REQ_FLAG_SENDER only from the
 * worker param->sender_id. A message longer than the buffer completes
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

/** axon_tag_probe_nb for messages of one sender (AXON_SENDER_ANY: of any). */
axon_status_t axon_tag_probe_from_nb(axon_worker_h worker, uint64_t sender_id, axon_tag_t tag,
                                     axon_tag_t tag_mask, int remove,
                                     axon_tag_recv_info_t *info, axon_tag_message_h *msg_p);

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

/* ---------------------------------------------------------------- memory */

enum {
    /* Allocate the memory (page aligned, zeroed) instead of mapping the
     * caller's: allocated memory is shared with peers on the same host, which
     * then put, get and do atomics on it directly (no target progress). */
    AXON_MEM_MAP_ALLOCATE = 1u << 0,
    /* Map the pieces of params->layout based at address (a layout key): peers
     * address the layout's packed bytes as one range [address, address +
     * length), length being the layout's size, so a put of n bytes at
     * address + k lands in packed bytes k .. k + n - 1, wherever the pieces
     * are. Pieces must not overlap. Not with AXON_MEM_MAP_ALLOCATE. Where
     * the device has user-mode memory registration (rc, dc on softib) the
     * key is one indirect memory key and a put or get is one RDMA
     * operation; elsewhere the target places the pieces. An atomic must lie
     * within one piece (else AXON_ERR_REMOTE_ACCESS; executed by the device,
     * AXON_ATOMIC_MODE=device, that also breaks the endpoint, as any remote
     * access error of RDMA does) and be aligned where it lands in it (else
     * AXON_ERR_INVALID_PARAM, or the device's remote access error). The
     * base must not be NULL. */
    AXON_MEM_MAP_LAYOUT   = 1u << 1,
    /* Share the caller's memory with peers on this host: its whole pages
     * move into shared memory, at the same address with the same contents
     * (and back at axon_mem_unmap), so those peers put, get and do atomics
     * on them with loads and stores instead of a system call each (as on
     * AXON_MEM_MAP_ALLOCATE memory). A partial page at either end moves
     * too when it is program data (a loaded object's .data or .bss, where
     * SHMEM's global symmetric variables live); elsewhere (heap, mmap'd
     * memory) bytes on partial pages go as without the flag. Only private
     * writable memory moves (not memory shared already, read-only or huge
     * pages), and not when the context has a hardware RDMA device (its
     * registrations would keep the old pages): otherwise the flag is ignored
     * (debug line). The caller's part: no other thread writes the range, nor
     * program variables on its end pages, during axon_mem_map and
     * axon_mem_unmap (a write while the pages move could be lost), and a
     * fork()ed child shares the pages with its parent instead of getting a
     * copy. Not with AXON_MEM_MAP_ALLOCATE or AXON_MEM_MAP_LAYOUT. */
    AXON_MEM_MAP_SHARED   = 1u << 2,
};

typedef struct {
    void                *address;   /* memory to map (a layout's base); ignored with
                                     * AXON_MEM_MAP_ALLOCATE */
    size_t               length;    /* bytes, > 0 (a layout's size) */
    uint32_t             flags;     /* AXON_MEM_MAP_* */
    const axon_layout_t *layout;    /* with AXON_MEM_MAP_LAYOUT; copied by the call */
} axon_mem_map_params_t;

/**
 * Make memory reachable by peers' put/get/atomics (context needs
 * AXON_FEATURE_RMA or AXON_FEATURE_AMO). Peers reach it through a key packed
 * by axon_rkey_pack. Remote access outside [address, address + length) fails
 * with AXON_ERR_REMOTE_ACCESS and never touches memory.
 */
axon_status_t axon_mem_map(axon_context_h context, const axon_mem_map_params_t *params,
                           axon_mem_h *memh_p);
/** Where the mapped (or allocated) memory is. */
axon_status_t axon_mem_query(axon_mem_h memh, void **address_p, size_t *length_p);
/**
 * Unmap; keys packed from memh stop working (allocated memory is freed).
 * Later accesses fail with AXON_ERR_REMOTE_ACCESS whatever the lane: the
 * target checks those it executes, cross-memory attach checks the owner's
 * published table before every operation, RDMA finds the registration
 * gone. Two cases are the caller's to avoid: an operation already under
 * way when the owner unmaps, and a peer on the host that still holds a key
 * to allocated memory, which keeps reaching its own (now orphaned) mapping
 * of the segment until it destroys the key.
 */
axon_status_t axon_mem_unmap(axon_context_h context, axon_mem_h memh);

/**
 * Pack a key for memh: an opaque, versioned buffer of *size_p bytes the
 * caller sends to peers. Release it with axon_rkey_buffer_release.
 */
axon_status_t axon_rkey_pack(axon_context_h context, axon_mem_h memh, void **rkey_buffer_p,
                             size_t *size_p);
void          axon_rkey_buffer_release(void *rkey_buffer);

/**
 * A peer's packed key, unpacked for use on ep (destroy it before closing
 * ep). AXON_ERR_IO_FORMAT for a buffer that is not a key (or of an unknown
 * version); AXON_ERR_REMOTE_ACCESS when the key's memory is known here not
 * to be mapped (this process's, or an allocated segment that is gone);
 * the ep's status if it failed. Accesses through a key unpacked on an
 * endpoint to some other context than the key's owner fail at the target.
 */
axon_status_t axon_ep_rkey_unpack(axon_ep_h ep, const void *rkey_buffer, size_t size,
                                  axon_rkey_h *rkey_p);
void          axon_rkey_destroy(axon_rkey_h rkey);

/* axon_rkey_ptr flags */
enum {
    /* The caller also does CPU atomics through the pointer: only where Axon
     * executes this key's atomics on a CPU too (not AXON_ATOMIC_MODE=device). */
    AXON_RKEY_PTR_ATOMICS = 1u << 0,
};

/**
 * A pointer through which this process reaches [remote_addr, remote_addr +
 * length) of a key's memory with its own loads and stores (as UCX's
 * ucp_rkey_ptr): memory of this process, a peer's AXON_MEM_MAP_ALLOCATE
 * memory or its shared pages (AXON_MEM_MAP_SHARED) on this host. Valid until
 * axon_rkey_destroy, and only while the owner keeps the memory mapped.
 * With AXON_RKEY_PTR_ATOMICS, a 4- or 8-byte CPU atomic through it is
 * atomic against Axon's atomics on the same word (not against 16- or
 * 32-byte ones). AXON_ERR_UNSUPPORTED (no log) when the range is not mapped
 * here (or, with AXON_RKEY_PTR_ATOMICS, a device executes the key's
 * atomics): the caller uses axon_put_nb and the rest; AXON_ERR_REMOTE_ACCESS
 * (logged) outside the key's range, or when its memory (this process's) is
 * unmapped; AXON_ERR_INVALID_PARAM (logged) for a NULL argument, length 0
 * or an unknown flag.
 */
axon_status_t axon_rkey_ptr(axon_rkey_h rkey, uint64_t remote_addr, size_t length,
                            unsigned flags, void **ptr_p);

/**
 * The widest range of a key's memory that is mapped here for as long as the
 * key lives, so that a caller may keep the pointer instead of asking
 * axon_rkey_ptr per access: [*remote_addr_p, + *length_p) at *ptr_p, a
 * peer's memory on this host (what axon_rkey_ptr reaches, the same
 * conditions). A store after the owner unmapped it reaches no one and
 * faults nothing. AXON_ERR_UNSUPPORTED (no log) when nothing is mapped, and
 * for memory of this process, which may be unmapped under the key (ask
 * axon_rkey_ptr per access there); AXON_ERR_INVALID_PARAM (logged) for a
 * NULL argument.
 */
axon_status_t axon_rkey_map_window(axon_rkey_h rkey, uint64_t *remote_addr_p, size_t *length_p,
                                   void **ptr_p);

/* ---------------------------------------------------------------- RMA */

/*
 * One-sided operations on a peer's mapped memory, addressed by the peer's
 * virtual address and the key unpacked on the same endpoint. Completion
 * (AXON_OK at once or the request's callback) means the local buffer may be
 * reused (put) or holds the data (get); a put is remotely visible only after
 * a flush. Whether the target must call axon_worker_progress for an
 * operation to complete depends on the lane: see docs/design.md "RMA".
 * The key (and an iov array) must stay valid until the operation completes.
 * A put or posted atomic that returned AXON_OK and then failed at the
 * target reports the failure through the next flush.
 */

typedef struct {
    void   *buffer;
    size_t  length;
} axon_iov_t;

axon_status_t axon_put_nb(axon_ep_h ep, const void *buffer, size_t length, uint64_t remote_addr,
                          axon_rkey_h rkey, const axon_request_param_t *param,
                          axon_request_h *req_p);
axon_status_t axon_get_nb(axon_ep_h ep, void *buffer, size_t length, uint64_t remote_addr,
                          axon_rkey_h rkey, const axon_request_param_t *param,
                          axon_request_h *req_p);
/** Gather local pieces into (put) or scatter from (get) one contiguous remote range. */
axon_status_t axon_put_iov_nb(axon_ep_h ep, const axon_iov_t *iov, size_t iov_count,
                              uint64_t remote_addr, axon_rkey_h rkey,
                              const axon_request_param_t *param, axon_request_h *req_p);
axon_status_t axon_get_iov_nb(axon_ep_h ep, const axon_iov_t *iov, size_t iov_count,
                              uint64_t remote_addr, axon_rkey_h rkey,
                              const axon_request_param_t *param, axon_request_h *req_p);

/**
 * Completes once every put and atomic issued on ep (or on every endpoint of
 * the worker) before the call is complete at the target: its data is
 * visible there (OpenSHMEM quiet).
 */
axon_status_t axon_ep_flush_nb(axon_ep_h ep, const axon_request_param_t *param,
                               axon_request_h *req_p);
axon_status_t axon_worker_flush_nb(axon_worker_h worker, const axon_request_param_t *param,
                                   axon_request_h *req_p);
/**
 * Operations issued after the fence on any endpoint of the worker reach
 * their target after the ones issued before it (OpenSHMEM fence); it
 * does not wait.
 */
axon_status_t axon_worker_fence(axon_worker_h worker);

/* ---------------------------------------------------------------- atomics */

typedef enum {
    AXON_ATOMIC_ADD   = 0,
    AXON_ATOMIC_AND   = 1,
    AXON_ATOMIC_OR    = 2,
    AXON_ATOMIC_XOR   = 3,
    AXON_ATOMIC_SWAP  = 4,  /* fetching only */
    AXON_ATOMIC_CSWAP = 5,  /* fetching only: swap if equal to *compare */
    AXON_ATOMIC_LAST
} axon_atomic_op_t;

/**
 * An atomic on size (4 or 8) naturally aligned bytes at remote_addr.
 * value (and compare for CSWAP) point to size bytes. With result == NULL
 * the operation does not fetch (post); otherwise result receives the
 * previous value when the operation completes. Every Axon atomic on a
 * location is atomic with respect to every other one, whatever the lane.
 */
axon_status_t axon_atomic_nb(axon_ep_h ep, axon_atomic_op_t op, size_t size, const void *value,
                             const void *compare, void *result, uint64_t remote_addr,
                             axon_rkey_h rkey, const axon_request_param_t *param,
                             axon_request_h *req_p);

/*
 * Extended atomics (RDMA Aware Networks Programming User Manual §8.7) on
 * size = 8, 16 or 32 naturally aligned bytes. Operands and results are
 * arrays of size / 8 64-bit words in host byte order, word i covering bytes
 * [8 i, 8 i + 8) of the target location (§8.7.2.2: results come in units of
 * the host word, whatever the field layout). result may be NULL.
 *
 * Masked compare-and-swap: if ((old ^ compare) & compare_mask) == 0 for
 * every word, the location becomes (old & ~swap_mask) | (swap & swap_mask).
 * The previous value is returned either way.
 */
axon_status_t axon_atomic_masked_cswap_nb(axon_ep_h ep, size_t size, const uint64_t *compare,
                                          const uint64_t *compare_mask, const uint64_t *swap,
                                          const uint64_t *swap_mask, uint64_t *result,
                                          uint64_t remote_addr, axon_rkey_h rkey,
                                          const axon_request_param_t *param,
                                          axon_request_h *req_p);
/*
 * Multi-field fetch-and-add: the location is split into fields, a 1 bit in
 * field_boundary marking the most significant bit of a field (bit 63 of every
 * word is one implicitly: fields never span words, as on ConnectX); each field
 * adds the matching field of add modulo its width, carries never cross a
 * boundary. The previous value is returned.
 */
axon_status_t axon_atomic_mfadd_nb(axon_ep_h ep, size_t size, const uint64_t *add,
                                   const uint64_t *field_boundary, uint64_t *result,
                                   uint64_t remote_addr, axon_rkey_h rkey,
                                   const axon_request_param_t *param, axon_request_h *req_p);


#ifdef __cplusplus
}
#endif

#include "axon_coll.h"

#endif /* AXON_H */
