/*
 * The component ABI: what a transport plugin (libaxon_<name>.so) exports and
 * the ops table the upper layer calls through.
 *
 * A plugin exports one symbol, AXON_COMPONENT_SYMBOL, of type axon_component_t.
 * The loader refuses a descriptor whose abi_version differs from
 * AXON_COMPONENT_ABI_VERSION. query() lists the resources (device + transport)
 * the component offers on this machine; iface_open() instantiates one on a
 * worker. Everything on the data path goes through axon_iface_ops_t, filled
 * once at open, so the upper layer never branches on the transport type.
 */
#ifndef AXON_COMPONENT_H
#define AXON_COMPONENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include "axon_status.h"
#include "config.h"
#include "amo_args.h"
#include "coll_offload.h"

#define AXON_COMPONENT_ABI_VERSION 18
/* Most local pieces one ep_get_zcopy_iov takes (the kernel's UIO_MAXIOV). */
#define AXON_TL_IOV_MAX 1024
/* Plugins build with -fvisibility=hidden; only the descriptor is exported. */
#define AXON_COMPONENT_EXPORT      __attribute__((visibility("default")))
#define AXON_COMPONENT_SYMBOL      axon_component
#define AXON_COMPONENT_SYMBOL_NAME "axon_component"

#define AXON_TL_NAME_MAX  16
#define AXON_DEV_NAME_MAX 32
#define AXON_LOCALITY_MAX 32   /* "pci:0000:03:00.0", "numa:1" (framework/topo/topo.h) */

/* Device kinds: AXON_NET_DEVICES filters only network devices. */
typedef enum {
    AXON_DEV_TYPE_SELF = 0,  /* loopback to the same worker */
    AXON_DEV_TYPE_SHM,       /* processes on one host */
    AXON_DEV_TYPE_NET,       /* a network device */
    AXON_DEV_TYPE_LAST
} axon_dev_type_t;

/* Capability flags of a resource */
#define AXON_CAP_AM_SHORT     (1ull << 0)  /* header + payload copied inline */
#define AXON_CAP_AM_BCOPY     (1ull << 1)  /* payload packed by a callback */
#define AXON_CAP_AM_ZCOPY     (1ull << 2)  /* payload sent from user memory */
#define AXON_CAP_PUT          (1ull << 3)
#define AXON_CAP_GET          (1ull << 4)
#define AXON_CAP_AMO32        (1ull << 5)
#define AXON_CAP_AMO64        (1ull << 6)
#define AXON_CAP_CONNECT_TO_IFACE (1ull << 7)  /* endpoints need only the peer's iface address */
#define AXON_CAP_AM_ORDERED   (1ull << 8)  /* AMs on one ep arrive in send order */
#define AXON_CAP_PEER_FAILURE (1ull << 9)  /* reports peers that die (peer_failure callback) */
#define AXON_CAP_NEED_MKEY    (1ull << 10) /* get/put reach peer memory only through a packed rkey */
#define AXON_CAP_EMULATED     (1ull << 11) /* a software device (softib): selected only when
                                            * AXON_TLS names the transport */
#define AXON_CAP_AMO_DEVICE   (1ull << 12) /* ep_atomic: the device executes atomics (the
                                            * ops and sizes in amo_device_ops) */

/*
 * amo_device_ops: one bit per (operation, operand size) the device executes
 * by itself through ep_atomic. op is an axon_amo_op_t, size 4, 8, 16 or 32.
 */
#define AXON_AMO_DEV_SIZE_INDEX(_size) (((_size) >= 16) ? (((_size) == 16) ? 2 : 3) : \
                                        ((_size) == 8) ? 1 : 0)
#define AXON_AMO_DEV_BIT(_op, _size)   (1u << ((_op) * 4 + AXON_AMO_DEV_SIZE_INDEX(_size)))

/* Names of the flags above, for axon_info; NULL-terminated, indexed by bit. */
extern const char *const axon_cap_names[];

typedef struct axon_resource {
    char            tl_name[AXON_TL_NAME_MAX];    /* "shm" — what AXON_TLS names */
    char            dev_name[AXON_DEV_NAME_MAX];  /* "memory", "softib0:1" */
    axon_dev_type_t dev_type;
    uint64_t        cap_flags;                    /* AXON_CAP_* */
    /* Performance estimates used by lane selection */
    double          latency_ns;                   /* one-way, small message */
    double          bandwidth_MBps;               /* large messages, 10^6 bytes/s */
    double          overhead_ns;                  /* CPU cost per message at the sender */
    /*
     * Costs of moving a large message, for the rendezvous choice (0 = not
     * measured; the estimates above are used): a bcopy AM is copied into the
     * transport and out of it at copy_MBps each (copy_cached_MBps while it
     * fits a core's cache, up to the rendezvous cap); a get (AXON_CAP_GET)
     * costs get_overhead_ns + length / get_MBps. shm measures them at query.
     */
    double          copy_MBps;
    double          copy_cached_MBps;
    double          get_overhead_ns;
    double          get_MBps;
    size_t          max_short;                    /* header + payload of am_short */
    size_t          max_bcopy;                    /* bytes a pack callback may write */
    size_t          max_zcopy;                    /* 0 if no zcopy */
    /* Memory one endpoint costs (for the cost model past many peers) */
    size_t          ep_memory;
    /* AXON_CAP_AMO_DEVICE: AXON_AMO_DEV_BIT of every (op, size) ep_atomic takes */
    uint32_t        amo_device_ops;
    /* Where a network device sits (topo.h's forms), "" unknown: lane choice prefers
     * the device nearest the worker's thread among those of one transport */
    char            locality[AXON_LOCALITY_MAX];
} axon_resource_t;

/* Active message ids (the upper layer's protocols); transports carry them opaquely. */
#define AXON_AM_ID_MAX 32

/* Flags passed to an AM handler */
#define AXON_AM_FLAG_NONE   0
/* A zero-copy AM whose payload the transport already wrote where
 * am_rx_dest said; data/length are then the header only. */
#define AXON_AM_FLAG_PLACED 1

/*
 * Called by a transport for every active message it receives, from inside the
 * iface's progress (or, for self, from inside the send). data is valid only
 * during the call and is 8-byte aligned, so handlers read headers in place.
 */
typedef void (*axon_am_handler_t)(void *arg, const void *data, size_t length, unsigned flags);

/* Fills dest (at most max_bcopy bytes); returns the number of bytes written. */
typedef size_t (*axon_pack_cb_t)(void *dest, void *arg);

/*
 * Zero-copy receive: for an AM sent with ep_am_zcopy, the receiving transport
 * asks where the payload goes once it has the header. Returning a pointer to
 * data_length writable bytes makes the transport write the payload there and
 * then call the handler with AXON_AM_FLAG_PLACED; returning NULL makes it
 * deliver header and payload contiguous, as for any other AM.
 */
typedef void *(*axon_am_rx_dest_t)(void *arg, uint8_t am_id, const void *hdr, size_t hdr_len,
                                   size_t data_length);

/*
 * A transport found a peer worker gone (connection reset without goodbye,
 * process exited). Called from iface progress; the upper layer fails every
 * operation that depends on that peer.
 */
typedef void (*axon_peer_failure_cb_t)(void *arg, uint64_t peer_uuid, axon_status_t status);

/* mem_reg flags */
#define AXON_MEM_REG_TRANSIENT (1u << 0)  /* for one transfer the peer reads: may be cached */

/* Completion of a transport operation that did not finish inside its call. */
typedef struct axon_tl_completion axon_tl_completion_t;
struct axon_tl_completion {
    void (*func)(axon_tl_completion_t *comp, axon_status_t status);
};

typedef struct axon_iface axon_iface_t;
typedef struct axon_tl_ep axon_tl_ep_t;
typedef struct axon_md axon_md_t;

struct axon_amo_lock_table;
struct axon_proc;

/* Longest key a domain packs (rkey_max_len), and the most a peer's unpack gives ep ops. */
#define AXON_MD_RKEY_MAX 32

/* What a key says about its memory, besides the domain's own bytes. */
typedef struct axon_md_key_info {
    uint64_t                address;    /* the owner's address of the range */
    uint64_t                length;
    const struct axon_proc *owner;      /* the owner process, on host host_id */
    uint64_t                host_id;
} axon_md_key_info_t;

/* A domain's key entry made usable at a peer: direct access, or a key for the lanes. */
typedef struct axon_md_rkey {
    void                       *handle;       /* for rkey_release; NULL: nothing to release */
    uint8_t                    *direct;       /* the range's first byte, mapped here; or NULL */
    struct axon_amo_lock_table *locks;        /* direct: the atomics' locks, the owner's own */
    /* With direct_length > 0 only part of the range is mapped here (ABI 14, shared
     * pages): direct is its first byte, at direct_offset in the range; the rest
     * goes by tl_rkey (when tl_rkey_len > 0) or active messages. */
    uint64_t                    direct_offset;
    uint64_t                    direct_length;
    size_t                      tl_rkey_len;  /* else: what ep_get_zcopy / ep_put_zcopy take */
    uint8_t                     tl_rkey[AXON_MD_RKEY_MAX];
} axon_md_rkey_t;

/*
 * Non-contiguous memory for a key (mem_reg_layout): the pieces of a layout,
 * in packed order, as the device's user-mode memory registration takes them
 * (seed §8.8): the entries in order, repeat times; entry i of repetition r
 * is length bytes at addr + r * stride. Packed byte k of the layout is
 * reached at base + k (a key's range is [base, base + size)); every byte of
 * every piece lies in [span_addr, span_addr + span_length).
 */
typedef struct axon_md_layout_entry {
    uint64_t addr;
    uint64_t length;     /* > 0 */
    uint64_t stride;     /* between repetitions (0 with repeat 1) */
} axon_md_layout_entry_t;

typedef struct axon_md_layout {
    uint64_t                      base;
    uint64_t                      size;
    uint64_t                      repeat;        /* >= 1 */
    uint32_t                      num_entries;   /* >= 1 */
    const axon_md_layout_entry_t *entries;
    uint64_t                      span_addr;
    uint64_t                      span_length;
} axon_md_layout_t;

/*
 * A memory domain: what memory registrations and keys belong to (a verbs
 * protection domain, a libfabric domain, the processes of a host for shm).
 * A context opens one per resource whose component has md_open and
 * registers memory on it once; every worker's iface of that resource is
 * opened on it (iface params), so a key packed once serves the peers of
 * every worker. The ops may be called from any thread: a domain
 * serializes what needs it.
 */
typedef struct axon_md_ops {
    void          (*md_close)(axon_md_t *md);
    /*
     * mem_reg makes length bytes at addr reachable by peers' get/put
     * until mem_dereg; rkey_pack writes at most rkey_max_len bytes that a
     * peer passes to ep_get_zcopy / ep_put_zcopy, and returns how many it
     * wrote. With AXON_MEM_REG_TRANSIENT (a rendezvous buffer, read by the
     * peer) the domain may serve the registration from a cache: the key
     * then may stay usable after mem_dereg, until the memory is unmapped.
     * Without it (keys the application hands out) the key dies at mem_dereg.
     * A domain without rkey_unpack packs exactly rkey_max_len bytes: a
     * peer's entry of any other length is refused before an op reads it.
     */
    size_t        rkey_max_len;
    axon_status_t (*mem_reg)(axon_md_t *md, void *addr, size_t length, unsigned flags,
                             void **memh_p);
    void          (*mem_dereg)(axon_md_t *md, void *memh);
    size_t        (*rkey_pack)(axon_md_t *md, const void *memh, void *rkey_buf);
    /*
     * Optional (ABI 12): register the pieces of layout as one key whose
     * range is [layout->base, + layout->size), the layout's packed bytes
     * (AXON_MEM_MAP_LAYOUT); mem_dereg and rkey_pack as for mem_reg.
     * AXON_ERR_UNSUPPORTED: not this domain or not this layout (too many
     * entries for the device): peers then reach the memory another way.
     */
    axon_status_t (*mem_reg_layout)(axon_md_t *md, const axon_md_layout_t *layout,
                                    unsigned flags, void **memh_p);
    /*
     * Optional: length zeroed bytes that peers on the host can map
     * (AXON_MEM_MAP_ALLOCATE), at *address_p, with the lock table their
     * atomics share at *locks_p. The memh is a registration like mem_reg's;
     * mem_dereg frees the memory.
     */
    axon_status_t (*mem_alloc)(axon_md_t *md, size_t length, void **address_p,
                               struct axon_amo_lock_table **locks_p, void **memh_p);
    /*
     * Optional (ABI 14): register the caller's memory as mem_reg does and
     * move its whole pages into memory peers on the host map, at the same
     * address with the same contents (AXON_MEM_MAP_SHARED), with the lock
     * table their atomics and the owner's share at *locks_p. mem_dereg
     * moves them back. AXON_ERR_UNSUPPORTED: nothing done (no whole page,
     * or memory that must not move); the caller registers it plainly.
     */
    axon_status_t (*mem_share)(axon_md_t *md, void *addr, size_t length,
                               struct axon_amo_lock_table **locks_p, void **memh_p);
    /*
     * Optional, at a peer: make entry (what the owner's rkey_pack wrote) usable
     * here, in rkey. Without it the entry itself is the lanes' key.
     * AXON_ERR_UNSUPPORTED: not through this domain here (the caller tries
     * other lanes, then active messages); AXON_ERR_REMOTE_ACCESS (logged):
     * the memory is not mapped at the owner (stale or forged key).
     */
    axon_status_t (*rkey_unpack)(axon_md_t *md, const void *entry, size_t entry_len,
                                 const axon_md_key_info_t *info, axon_md_rkey_t *rkey);
    void          (*rkey_release)(axon_md_t *md, void *handle);
} axon_md_ops_t;

/* Base of every memory domain; a component embeds it first. */
struct axon_md {
    const axon_md_ops_t *ops;
};

/* Copied by iface_open: the handler table it points to must outlive the iface. */
typedef struct axon_iface_params {
    const axon_am_handler_t *am_handlers;  /* AXON_AM_ID_MAX entries, NULL = drop with a warning */
    void                    *am_arg;       /* first argument of every callback below */
    uint64_t                 worker_uuid;  /* unique id of the owning worker */
    axon_am_rx_dest_t        am_rx_dest;   /* zero-copy receive placement (may be NULL) */
    axon_peer_failure_cb_t   peer_failure; /* peer worker gone (may be NULL) */
    axon_md_t               *md;           /* the resource's domain (md_open), or NULL */
} axon_iface_params_t;

typedef struct axon_iface_ops {
    void          (*iface_close)(axon_iface_t *iface);
    /* Poll for incoming messages and completions; returns the events handled. */
    unsigned      (*iface_progress)(axon_iface_t *iface);
    /*
     * Addresses: the device address says where the device is (host,
     * fabric) and decides reachability; the iface address says how to reach
     * this iface on it. Sizes are fixed per iface. Blobs handed to
     * is_reachable and ep_create come from the wire: they may be unaligned,
     * so read them with memcpy.
     */
    size_t        dev_addr_len;
    size_t        iface_addr_len;
    axon_status_t (*iface_get_address)(axon_iface_t *iface, void *dev_addr, void *iface_addr);
    int           (*iface_is_reachable)(axon_iface_t *iface, const void *dev_addr,
                                        const void *iface_addr);
    /*
     * Optional (ABI 16): the bandwidth (MB/s) of this iface's path to the
     * peer device at dev_addr where it is not the resource's estimate (tcp:
     * a peer in this network stack is reached through the kernel's loopback,
     * whichever interface is named); 0: the resource's. Weighs the
     * rendezvous stripes of the rails to that peer.
     */
    double        (*iface_peer_bandwidth)(axon_iface_t *iface, const void *dev_addr);
    /*
     * Optional (ABI 18), both or neither: waiting for the iface instead of
     * polling it (axon_worker_arm). iface_event_fd gives a descriptor that
     * becomes readable once something arrived for iface_progress after an
     * iface_event_arm that returned AXON_OK; -1 for an iface that never has
     * events of its own (self delivers inside the send). iface_event_arm:
     * AXON_OK armed; AXON_ERR_BUSY progress has work now (messages in, or
     * work only polling finds, such as a connect's deadline): progress, then
     * arm again; AXON_ERR_UNSUPPORTED this iface cannot be waited for now
     * (shm: a sender could not take its wakeup descriptor). Waking may be
     * spurious. An iface without them is never waited for: the worker is
     * polled.
     */
    axon_status_t (*iface_event_fd)(axon_iface_t *iface, int *fd_p);
    axon_status_t (*iface_event_arm)(axon_iface_t *iface);

    /* peer_uuid: the peer worker's id, for handshakes and failure reports. */
    axon_status_t (*ep_create)(axon_iface_t *iface, uint64_t peer_uuid, const void *dev_addr,
                               const void *iface_addr, axon_tl_ep_t **ep_p);
    void          (*ep_destroy)(axon_tl_ep_t *ep);

    /*
     * Send an active message of hdr_len + length bytes (<= max_short); the
     * receiver sees them contiguous. AXON_ERR_NO_RESOURCE: nothing was sent,
     * retry after progress.
     */
    axon_status_t (*ep_am_short)(axon_tl_ep_t *ep, uint8_t am_id, const void *hdr, size_t hdr_len,
                                 const void *payload, size_t length);
    /* Same, with the payload written by pack(); returns bytes sent,
     * AXON_ERR_NO_RESOURCE, or another error (e.g. pack wrote too much). */
    ssize_t       (*ep_am_bcopy)(axon_tl_ep_t *ep, uint8_t am_id, axon_pack_cb_t pack, void *arg);
    /*
     * Optional (AXON_CAP_AM_ZCOPY): an AM of hdr_len (<= max_short) header
     * bytes followed by length bytes sent straight from buffer, which stays
     * in use until completion. AXON_OK: sent at once; AXON_INPROGRESS:
     * comp->func is called from progress when the buffer is free again (or
     * with an error status); AXON_ERR_NO_RESOURCE: nothing sent, retry.
     * Zero-copy AMs on one ep keep their order with the other AMs on it.
     */
    axon_status_t (*ep_am_zcopy)(axon_tl_ep_t *ep, uint8_t am_id, const void *hdr,
                                 size_t hdr_len, const void *buffer, size_t length,
                                 axon_tl_completion_t *comp);
    /*
     * Optional (AXON_CAP_GET): copy length bytes at the peer's virtual
     * address remote_addr into buffer, without the peer's help. rkey is what
     * the peer's rkey_pack wrote for the memory holding remote_addr (may be
     * unaligned), or NULL for a transport without AXON_CAP_NEED_MKEY.
     * AXON_OK when done at once; AXON_INPROGRESS with comp as above;
     * AXON_ERR_UNSUPPORTED when the system forbids it for this peer (the
     * caller falls back).
     */
    axon_status_t (*ep_get_zcopy)(axon_tl_ep_t *ep, void *buffer, size_t length,
                                  uint64_t remote_addr, const void *rkey,
                                  axon_tl_completion_t *comp);
    /*
     * Optional (AXON_CAP_PUT): copy length bytes from buffer to the peer's
     * virtual address remote_addr, without the peer's help. Same arguments
     * and returns as ep_get_zcopy; the peer learns of it only through a
     * later AM.
     */
    axon_status_t (*ep_put_zcopy)(axon_tl_ep_t *ep, const void *buffer, size_t length,
                                  uint64_t remote_addr, const void *rkey,
                                  axon_tl_completion_t *comp);
    /*
     * Optional (ABI 11): ep_get_zcopy into iov_count local pieces, filled in
     * order from the peer's [remote_addr, + their total) in one operation
     * (shm: one process_vm_readv; rc: one RDMA read through a local UMR
     * key, ABI 12). Same returns, except that with comp NULL it is done at
     * once or not at all (AXON_ERR_UNSUPPORTED: the caller falls back, rc
     * always), and AXON_ERR_NO_RESOURCE: nothing done, resources busy, try
     * again after progress. More than AXON_TL_IOV_MAX pieces only where the
     * transport takes them (shm in batches; rc and dc with a completion, one
     * operation through a cached key over the list), else
     * AXON_ERR_UNSUPPORTED.
     */
    axon_status_t (*ep_get_zcopy_iov)(axon_tl_ep_t *ep, const struct iovec *iov,
                                      size_t iov_count, uint64_t remote_addr, const void *rkey,
                                      axon_tl_completion_t *comp);
    /* Optional (ABI 11): ep_put_zcopy from several local pieces, as ep_get_zcopy_iov. */
    axon_status_t (*ep_put_zcopy_iov)(axon_tl_ep_t *ep, const struct iovec *iov,
                                      size_t iov_count, uint64_t remote_addr, const void *rkey,
                                      axon_tl_completion_t *comp);
    /*
     * Optional (ABI 13; transports that reach a peer's memory by address,
     * without keys: shm's cross-memory attach): ep_get_zcopy_iov whose peer
     * side is remote_count pieces at the peer's virtual addresses, lent for
     * a transfer (rendezvous), both lists in order and of the same total.
     * Any counts (the transport splits them as its calls need); done at once
     * or not at all (AXON_ERR_UNSUPPORTED: the caller falls back).
     */
    axon_status_t (*ep_get_zcopy_riov)(axon_tl_ep_t *ep, const struct iovec *iov,
                                       size_t iov_count, const struct iovec *remote,
                                       size_t remote_count, axon_tl_completion_t *comp);
    /* Optional (ABI 13): the same, from the local pieces to the peer's. */
    axon_status_t (*ep_put_zcopy_riov)(axon_tl_ep_t *ep, const struct iovec *iov,
                                       size_t iov_count, const struct iovec *remote,
                                       size_t remote_count, axon_tl_completion_t *comp);
    /* AXON_OK when every message posted on ep has left the sender's buffers,
     * AXON_INPROGRESS while some have not (call again after progress). */
    axon_status_t (*ep_flush)(axon_tl_ep_t *ep);
    /* Optional: is the peer this ep reaches known to be gone? AXON_OK if
     * alive as far as the transport knows, else the failure status. */
    axon_status_t (*ep_check)(axon_tl_ep_t *ep);

    /*
     * Optional (AXON_CAP_AMO_DEVICE): have the device execute one atomic on
     * the peer's memory at remote_addr (rkey as for ep_get_zcopy), for an
     * (op, size) of the resource's amo_device_ops; others give
     * AXON_ERR_UNSUPPORTED (logged). Device atomics are atomic only with
     * respect to other atomics of the same device: the upper layer sends
     * all atomics on a memory through it or none (AXON_ATOMIC_MODE).
     * result: args->size / 8 words (at least one) that the previous value
     * is written to; it must stay valid until completion, fetching or not.
     * AXON_INPROGRESS: comp->func runs from progress once the atomic is
     * done at the target; AXON_ERR_NO_RESOURCE: nothing posted, retry.
     */
    axon_status_t (*ep_atomic)(axon_tl_ep_t *ep, const axon_amo_args_t *args,
                               uint64_t remote_addr, const void *rkey, uint64_t *result,
                               axon_tl_completion_t *comp);
} axon_iface_ops_t;

/* Base of every transport iface; a transport embeds it first. */
/* An idle iface's progress is called once in this many worker progress calls. */
#define AXON_IFACE_IDLE_POLLS 64

struct axon_iface {
    const axon_iface_ops_t *ops;
    const axon_resource_t  *resource;
    /*
     * Set by the transport while nothing it could find needs looking at on
     * every progress call (tcp with only a listening socket; self, which
     * delivers inside the send): the worker then calls iface_progress once
     * in AXON_IFACE_IDLE_POLLS calls instead of paying an indirect call
     * per poll. Cleared by the transport (or stays 0) otherwise.
     */
    int                     idle;
};

/* Base of every transport endpoint. */
struct axon_tl_ep {
    axon_iface_t *iface;
};

typedef struct axon_component {
    uint32_t                   abi_version;     /* AXON_COMPONENT_ABI_VERSION */
    const char                *name;            /* "shm": also the plugin file's suffix */
    const char                *description;     /* one line for axon_info */
    /* Configuration: read from AXON_<config_prefix><NAME> into config_size bytes */
    const char                *config_prefix;   /* "SHM_" */
    const axon_config_entry_t *config_table;
    size_t                     config_size;
    /*
     * List the resources usable on this machine into a malloc'd array. A
     * component whose device is absent returns AXON_OK with count 0; one
     * whose configuration is invalid logs the value and returns
     * AXON_ERR_INVALID_PARAM, which fails context creation.
     */
    axon_status_t (*query)(const void *config, axon_resource_t **resources_p, unsigned *count_p);
    /*
     * Optional: open the memory domain of a resource (transports with
     * AXON_CAP_NEED_MKEY have one); it outlives every iface opened on it.
     */
    axon_status_t (*md_open)(const axon_resource_t *resource, const void *config,
                             axon_md_t **md_p);
    /* resource and config stay valid until the iface is closed. */
    axon_status_t (*iface_open)(const axon_resource_t *resource, const void *config,
                                const axon_iface_params_t *params, axon_iface_t **iface_p);
    /* A collective offload component instead of a transport (no iface_open):
     * its resources are the devices it offloads to, never lanes. */
    const axon_coll_offload_ops_t *coll_offload;
    uint32_t                   flags;           /* AXON_COMPONENT_FLAG_* */
} axon_component_t;

/* Queried (and used) only when AXON_TLS names the component: its query is
 * dear (ofi: libfabric's provider scan) and it never wins by default. */
#define AXON_COMPONENT_FLAG_ON_REQUEST (1u << 0)

#endif
