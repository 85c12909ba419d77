/*
 * shm: active messages between processes on one host. Every iface owns a
 * receive ring in a shared-memory segment (shm_seg.h, shm_fifo.h); an
 * endpoint maps the peer's segment and writes each message into one cell of
 * the peer's ring, which the peer's progress hands to its AM handler.
 */
#ifndef AXON_SHM_H
#define AXON_SHM_H

#include <stddef.h>
#include <stdint.h>
#include "component.h"
#include "log.h"
#include "shm_fifo.h"
#include "shm_mem_table.h"
#include "shm_seg.h"

/* Largest am_short: four cache lines with the cell header, to keep latency flat. */
#define AXON_SHM_MAX_SHORT (4 * AXON_SHM_FIFO_ALIGN - sizeof(axon_shm_cell_t))

/* am_id of a cell a sender claimed but could not fill: the receiver skips it silently. */
#define AXON_SHM_AM_ID_VOID 0xff

/* Options, read from AXON_SHM_* (see the table in shm_component.c). */
typedef struct axon_shm_config {
    unsigned  fifo_size;          /* cells in the receive ring */
    unsigned  max_senders;        /* sender slots: endpoints that can send to our ring */
    size_t    cell_size;          /* bytes per cell, header included */
    unsigned  rx_burst;           /* messages handled per progress call */
    char     *prefix;             /* of segment names in /dev/shm */
    int       cma;                /* single-copy get with process_vm_readv */
    size_t    layout_cma_min;     /* a layout key's mean piece for single copy into it */
    double    liveness_interval;  /* seconds between checks that peers still live */
} axon_shm_config_t;

/* Device address: the host and the user, which decide reachability. */
typedef struct axon_shm_dev_addr {
    uint64_t host_id;
    uint32_t uid;
} __attribute__((packed)) axon_shm_dev_addr_t;

/*
 * Iface address: the segment to map, and the process owning it (for
 * single-copy reads and liveness checks). The cell size lets is_reachable
 * refuse a peer whose cells cannot hold what this process sends.
 */
typedef struct axon_shm_iface_addr {
    char            seg_name[AXON_SHM_SEG_NAME_MAX];
    uint32_t        cell_size;
    axon_proc_t owner;
} __attribute__((packed)) axon_shm_iface_addr_t;

/* Progress calls between two looks at the clock for liveness work. */
#define AXON_SHM_LIVENESS_TICK  256
/* Peers checked per tick (~10 us each, a /proc read): a sweep over many peers is
 * spread over several ticks rather than stalling one progress call. */
#define AXON_SHM_LIVENESS_BATCH 4
/* Seconds the head cell may stay claimed and unpublished before we look for a
 * dead sender holding it: far above any copy into a cell, and rechecked as
 * often while it stays stuck (a scan may read /proc). */
#define AXON_SHM_STUCK_GRACE    0.002
/* How often the tick looks for a claimed head: reading the ring's tail takes
 * its line from the senders, whose next claim then waits to get it back. */
#define AXON_SHM_HEAD_CHECK     0.0005

typedef struct axon_shm_iface {
    axon_iface_t      super;
    /* Receive path, touched by every progress call */
    axon_shm_fifo_t   fifo;
    uint64_t          head;           /* next position to consume; private to us */
    unsigned          rx_burst;
    unsigned          tick_countdown; /* progress calls until the liveness tick */
    void             *am_arg;
    axon_am_handler_t am_handlers[AXON_AM_ID_MAX];
    /* Send path limits (our cells; a peer's are checked to be at least as large) */
    size_t            max_short;
    size_t            max_bcopy;
    /* Peer liveness, slow path (shm_iface.c) */
    axon_list_link_t  eps;            /* every endpoint of this iface */
    axon_list_link_t *sweep_next;     /* next ep of the sweep under way, or &eps */
    double            next_sweep;     /* when the next sweep starts */
    double            liveness_interval;
    unsigned          failures_pending; /* eps failed but not yet reported */
    axon_peer_failure_cb_t peer_failure;
    /* A head cell claimed and never published (shm_iface.c), slow path */
    axon_shm_senders_t senders;       /* our segment's sender slots */
    uint64_t          stuck_head;     /* the head seen stuck since stuck_since */
    double            stuck_since;    /* < 0: head not seen stuck */
    double            next_head_check; /* when the tick looks at the head again */
    int               cma;            /* AXON_SHM_CMA */
    int               event_fd;       /* eventfd senders wake us by when armed, or -1 */
    int               wait_fd;        /* what a sleeping worker polls (shm_wake.c), or -1 */
    /* Addresses */
    uint64_t          host_id;
    uint32_t          uid;
    axon_proc_t   self;
    axon_shm_seg_t    seg;
} axon_shm_iface_t;

/* Endpoint flags */
#define AXON_SHM_EP_FLAG_CMA         (1u << 0)  /* get_zcopy may read the peer's memory */
#define AXON_SHM_EP_FLAG_CHECKABLE   (1u << 1)  /* the peer's pid means something here */
#define AXON_SHM_EP_FLAG_REPORT      (1u << 2)  /* failed, peer_failure not yet called */
#define AXON_SHM_EP_FLAG_DEAF        (1u << 3)  /* could not take the peer's wakeup fd */

typedef struct axon_shm_ep {
    axon_tl_ep_t      super;
    axon_shm_fifo_t   fifo;        /* the peer's ring, in our mapping of its segment */
    _Atomic uint64_t *claim;       /* our sender slot's claim word, in the same mapping */
    axon_status_t     status;      /* AXON_OK, or why the peer is gone: every send checks */
    unsigned          flags;       /* AXON_SHM_EP_FLAG_* */
    /* Cold: our sender slot, who the peer is, when it was last seen alive */
    axon_shm_sender_t *slot;
    uint64_t          slot_word;   /* its owner word while we hold it */
    axon_proc_t   peer;
    axon_shm_senders_ctl_t *peer_ctl;  /* the peer's segment: closed = its goodbye */
    int               wake_fd;     /* our copy of the peer's eventfd, or -1 */
    int               pid_fd;      /* the peer's pidfd in iface->wait_fd (one ep of a peer
                                    * process watches it), or -1 */
    int               pid_watched; /* pid_fd is in iface->wait_fd */
    uint64_t          peer_uuid;
    double            last_check;
    axon_list_link_t  list;        /* in iface->eps; unlinked if the iface closed first */
    void             *seg_addr;
    size_t            seg_length;
} axon_shm_ep_t;

/* Largest am_bcopy for cells of cell_size bytes. */
static inline size_t axon_shm_max_bcopy(size_t cell_size)
{
    return axon_shm_cell_payload_max(cell_size);
}

static inline size_t axon_shm_max_short(size_t cell_size)
{
    size_t max_bcopy = axon_shm_max_bcopy(cell_size);

    return (max_bcopy < AXON_SHM_MAX_SHORT) ? max_bcopy : AXON_SHM_MAX_SHORT;
}

/*
 * Set resource's measured costs (copy_MBps: memcpy of a large buffer;
 * get_overhead_ns, get_MBps: process_vm_readv per call and per byte; 0 where
 * not measured). Measured on the first call in this process (shm_calib.c).
 */
void axon_shm_costs_fill(axon_resource_t *resource);

/* shm_component.c: reject options the ring cannot work with (logs which). */
axon_status_t axon_shm_config_check(const axon_shm_config_t *config);

/* shm_md.c: the memory domain (mapped memory, keys, peers' segments and tables). */
axon_status_t axon_shm_md_open(const axon_resource_t *resource, const void *config,
                               axon_md_t **md_p);
/* What get/put take for a key of mapped memory: the owner's slot that must still hold id. */
typedef struct axon_shm_rkey {
    const axon_mem_table_slot_t *slot;
    uint64_t                     id;
    const struct axon_shm_layout *layout;  /* a layout key: its pieces (shm_md.h), else NULL */
} axon_shm_rkey_t;

/* shm_iface.c */
axon_status_t axon_shm_iface_open(const axon_resource_t *resource, const void *config,
                                  const axon_iface_params_t *params, axon_iface_t **iface_p);
/*
 * Check a peer's addresses before connecting; logs why not at log_level.
 * AXON_ERR_INVALID_ADDR for a malformed address, AXON_ERR_UNREACHABLE for
 * a peer on another host, of another user, or with smaller cells.
 */
axon_status_t axon_shm_iface_check_peer(const axon_shm_iface_t *iface, const void *dev_addr,
                                        const void *iface_addr, axon_log_level_t log_level,
                                        axon_shm_iface_addr_t *addr);
/*
 * Is ep's peer process gone? If so, fail ep with AXON_ERR_CONNECTION_RESET
 * (reported through peer_failure from the next progress). Reads /proc.
 */
void          axon_shm_iface_check_ep(axon_shm_iface_t *iface, axon_shm_ep_t *ep, double now);
/* Fail ep with status, once; peer_failure is called from the next progress. */
void          axon_shm_iface_fail_ep(axon_shm_iface_t *iface, axon_shm_ep_t *ep,
                                     axon_status_t status, const char *why);

/* shm_ep.c */
axon_status_t axon_shm_ep_create(axon_iface_t *tl_iface, uint64_t peer_uuid,
                                 const void *dev_addr, const void *iface_addr,
                                 axon_tl_ep_t **ep_p);
void          axon_shm_ep_destroy(axon_tl_ep_t *tl_ep);
axon_status_t axon_shm_ep_am_short(axon_tl_ep_t *tl_ep, uint8_t am_id, const void *hdr,
                                   size_t hdr_len, const void *payload, size_t length);
ssize_t       axon_shm_ep_am_bcopy(axon_tl_ep_t *tl_ep, uint8_t am_id, axon_pack_cb_t pack,
                                   void *arg);
axon_status_t axon_shm_ep_flush(axon_tl_ep_t *tl_ep);
/* Wakeups (shm_wake.c): the owner's eventfd (-1: none, logged with prefix) and
 * the descriptor its worker sleeps on; an endpoint's copy of its peer's
 * eventfd and the watch of the peer's process, taken at ep_create and
 * dropped at ep_destroy (unwatch: a failed peer no longer wakes us); the
 * write that wakes the peer; the iface's event ops. */
int           axon_shm_wake_fd_open(const char *prefix);
void          axon_shm_wake_wait_open(axon_shm_iface_t *iface);
void          axon_shm_wake_wait_close(axon_shm_iface_t *iface);
void          axon_shm_wake_take(axon_shm_ep_t *ep, const char *seg_name);
void          axon_shm_wake_unwatch(axon_shm_ep_t *ep);
void          axon_shm_wake_drop(axon_shm_ep_t *ep);
void          axon_shm_wake_peer(const axon_shm_ep_t *ep);
axon_status_t axon_shm_iface_event_fd(axon_iface_t *tl_iface, int *fd_p);
axon_status_t axon_shm_iface_event_arm(axon_iface_t *tl_iface);
axon_status_t axon_shm_ep_check(axon_tl_ep_t *tl_ep);

/* shm_cma.c */
axon_status_t axon_shm_ep_get_zcopy(axon_tl_ep_t *tl_ep, void *buffer, size_t length,
                                    uint64_t remote_addr, const void *rkey,
                                    axon_tl_completion_t *comp);
axon_status_t axon_shm_ep_get_zcopy_iov(axon_tl_ep_t *tl_ep, const struct iovec *iov,
                                        size_t iov_count, uint64_t remote_addr,
                                        const void *rkey, axon_tl_completion_t *comp);
axon_status_t axon_shm_ep_put_zcopy_iov(axon_tl_ep_t *tl_ep, const struct iovec *iov,
                                        size_t iov_count, uint64_t remote_addr,
                                        const void *rkey, axon_tl_completion_t *comp);
axon_status_t axon_shm_ep_put_zcopy(axon_tl_ep_t *tl_ep, const void *buffer, size_t length,
                                    uint64_t remote_addr, const void *rkey,
                                    axon_tl_completion_t *comp);
axon_status_t axon_shm_ep_get_zcopy_riov(axon_tl_ep_t *tl_ep, const struct iovec *iov,
                                         size_t iov_count, const struct iovec *remote,
                                         size_t remote_count, axon_tl_completion_t *comp);
axon_status_t axon_shm_ep_put_zcopy_riov(axon_tl_ep_t *tl_ep, const struct iovec *iov,
                                         size_t iov_count, const struct iovec *remote,
                                         size_t remote_count, axon_tl_completion_t *comp);

#endif
