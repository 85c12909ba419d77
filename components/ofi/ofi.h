/*
 * ofi: active messages and RMA over a libfabric provider, for fabrics Axon
 * has no native component for and as the comparison backend.
 *
 * One resource: the provider AXON_OFI_PROVIDER picks (tl "ofi", device the
 * provider's name, e.g. "tcp"). The context's memory domain (ofi_md.c)
 * holds the fabric and domain; each iface opens in it its own
 * address vector (FI_AV_TABLE), completion queue and one reliable
 * datagram endpoint (FI_EP_RDM); its iface address is the endpoint's
 * fi_getname blob, and ep_create only inserts the peer's blob into the AV,
 * so the peer learns of us from the first message (CONNECT_TO_IFACE).
 *
 * Every message is a tagged send whose tag carries the AM id and a kind
 * (ofi_wire.h); its body is the AM's bytes, nothing more, so the receiver
 * hands the buffer it landed in straight to the handler. Sends go with
 * fi_tinject when they fit the provider's inject size, else from one of
 * TX_QUEUE_LEN preallocated bounce buffers (none free: NO_RESOURCE);
 * receives land in RX_QUEUE_LEN preposted buffers, each reposted after its
 * handler. Get and put are fi_read / fi_write through memory keys when the
 * provider has FI_RMA (ofi_rma.c).
 *
 * Liveness: an error completion of one of our operations fails its ep and
 * every ep to the same worker, and reports the peer. Software providers
 * (libfabric 1.17's tcp) report nothing for a killed peer: they queue sends
 * to it for ever. So every KEEPALIVE_INTERVAL an iface pings each worker it
 * has eps to, the worker answers from its progress, and one silent for
 * KEEPALIVE_TIMEOUT (30 s: a worker computing that long without progress
 * looks dead; ud answers from a thread, ofi does not yet) is declared
 * failed (ENDPOINT_TIMEOUT): its eps fail,
 * get/put in flight to it complete with that error, peer_failure reports it.
 * A closing iface says goodbye to every peer it knows, so they do not
 * mistake its leaving for a failure.
 *
 * Files by stage: ofi_component.c (configuration, provider choice,
 * resources), ofi_iface.c (fabric objects, progress, the receive path,
 * failures), ofi_ep.c (endpoints, the send path, keep-alives), ofi_md.c
 * (the domain, memory keys), ofi_rma.c (get and put).
 */
#ifndef AXON_OFI_H
#define AXON_OFI_H

#include <stddef.h>
#include <stdint.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_errno.h>
#include "component.h"
#include "ofi_lib.h"
#include "list.h"
#include "log.h"
#include "ofi_wire.h"

/* The libfabric API version Axon is written against (Debian 12 ships 1.17). */
#define AXON_OFI_FI_VERSION     FI_VERSION(1, 17)
/* Largest fi_getname blob an iface address carries. */
#define AXON_OFI_NAME_MAX       56
/* Completions taken per fi_cq_read. */
#define AXON_OFI_CQ_BATCH       16
/* Progress calls between two looks at the clock for keep-alives: few enough
 * that slow calls on a crowded host never add up to an interval, which the
 * keep-alive would take for a pause in progress. */
#define AXON_OFI_KEEPALIVE_CHECK_CALLS 64
/* Bounds of AXON_OFI_KEEPALIVE_TIMEOUT: at least this many intervals. */
#define AXON_OFI_KEEPALIVE_MIN_INTERVALS 2
/* How long a closing iface waits for its goodbyes to leave. */
#define AXON_OFI_BYE_TIMEOUT    0.2
/* Bounds of AXON_OFI_SEG_SIZE and the queue lengths. */
#define AXON_OFI_SEG_SIZE_MIN   ((size_t)256)
#define AXON_OFI_SEG_SIZE_MAX   ((size_t)1 << 20)
#define AXON_OFI_QUEUE_LEN_MIN  4
#define AXON_OFI_QUEUE_LEN_MAX  16384

/* Options, read from AXON_OFI_* (see the table in ofi_component.c). */
typedef struct axon_ofi_config {
    char     *provider;            /* "auto", "none" or a provider name */
    size_t    seg_size;            /* max_bcopy, and each bounce buffer */
    unsigned  tx_queue_len;        /* bounce buffers (and RMA operations) in flight */
    unsigned  rx_queue_len;        /* receive buffers posted */
    double    keepalive_interval;  /* seconds between pings; 0 = none */
    double    keepalive_timeout;   /* seconds without a pong = failed; 0 = never */
    int       rma;                 /* use FI_RMA when the provider has it */
} axon_ofi_config_t;

/*
 * Device address: which fabric the iface is on. Providers that reach only
 * their own host (shm, loopback domains) add the host, compared too.
 */
typedef struct axon_ofi_dev_addr {
    uint64_t fabric_hash;   /* hash of "<provider>/<fabric name>" */
    uint64_t host_id;       /* axon_sys_host_id() */
    uint8_t  local_only;
} __attribute__((packed)) axon_ofi_dev_addr_t;

/* Iface address: the endpoint's fi_getname blob. */
typedef struct axon_ofi_iface_addr {
    uint8_t  len;
    uint8_t  name[AXON_OFI_NAME_MAX];
} __attribute__((packed)) axon_ofi_iface_addr_t;

typedef struct axon_ofi_iface axon_ofi_iface_t;
typedef struct axon_ofi_ep    axon_ofi_ep_t;

/* What an operation context is for */
typedef enum {
    AXON_OFI_OP_FREE = 0,
    AXON_OFI_OP_RX,          /* a posted receive buffer */
    AXON_OFI_OP_SEND,        /* an AM from a bounce buffer */
    AXON_OFI_OP_CTRL,        /* ping, pong or goodbye too long to inject */
    AXON_OFI_OP_GET,
    AXON_OFI_OP_PUT,
} axon_ofi_op_kind_t;

/*
 * One operation the provider holds: the op_context of its call. Send and
 * receive operations own a buffer of seg_size bytes, for good.
 */
typedef struct axon_ofi_op {
    struct fi_context2    fi_ctx;   /* the provider's scratch space (FI_CONTEXT2) */
    uint8_t               kind;     /* axon_ofi_op_kind_t */
    axon_ofi_ep_t        *ep;       /* SEND, GET, PUT; NULL once the ep is gone */
    struct axon_ofi_peer *peer;     /* CTRL: the worker it goes to */
    axon_tl_completion_t *comp;     /* GET, PUT */
    struct fid_mr        *local_mr; /* GET, PUT under FI_MR_LOCAL: the caller's buffer */
    void                 *buf;      /* SEND, CTRL, RX */
    axon_list_link_t      link;     /* iface->tx_free, ->rma_free or ->rx_repost */
} axon_ofi_op_t;

/* A worker this iface has eps to or was pinged by: told goodbye when the iface closes. */
typedef struct axon_ofi_peer {
    uint64_t         uuid;
    fi_addr_t        addr;
    uint8_t          gone;        /* it said goodbye: its errors are not failures */
    uint8_t          failed;      /* its eps failed */
    uint8_t          reported;    /* progress handled the failure (ops, peer_failure) */
    uint8_t          ka_pending;  /* a control message with a completion is in flight */
    uint8_t          pong_pending; /* it pinged us, the answer could not go yet */
    unsigned         neps;        /* live eps to it: pinged and timed out only then */
    double           last_heard;  /* when it last answered (or an ep to it was made) */
    axon_status_t    status;      /* why it failed */
    axon_list_link_t link;        /* iface->peers */
} axon_ofi_peer_t;

/* The memory domain: what every iface of a context shares (ofi_md.c). */
typedef struct axon_ofi_md {
    axon_md_t              super;
    struct fi_info        *info;         /* the provider entry the ifaces open */
    struct fid_fabric     *fabric;
    struct fid_domain     *domain;
    uint64_t               mr_mode;
    uint64_t               next_key;     /* for keys we choose (no FI_MR_PROV_KEY) */
    char                   name[AXON_DEV_NAME_MAX + 8];  /* "ofi/tcp", for log lines */
} axon_ofi_md_t;

struct axon_ofi_iface {
    axon_iface_t           super;
    /* libfabric objects: the domain's, then the iface's own */
    axon_ofi_md_t         *md;
    const struct fi_info  *info;
    struct fid_domain     *domain;
    struct fid_av         *av;
    struct fid_cq         *cq;
    struct fid_ep         *ep;
    struct fid_mr         *buf_mr;       /* FI_MR_LOCAL: the bounce buffers */
    void                  *buf_desc;
    /* Receive side */
    void                  *am_arg;
    axon_am_handler_t      am_handlers[AXON_AM_ID_MAX];
    axon_peer_failure_cb_t peer_failure;
    uint64_t               worker_uuid;
    /* Limits */
    const axon_ofi_config_t *config;
    size_t                 seg_size;
    size_t                 inject_size;
    size_t                 max_msg_size;
    uint64_t               mr_mode;
    /* Operations: rx_ops posted, the others on their free lists when idle */
    char                  *bufs;
    axon_ofi_op_t         *rx_ops;
    axon_ofi_op_t         *tx_ops;
    axon_ofi_op_t         *rma_ops;
    unsigned               num_rx;
    unsigned               num_tx;
    unsigned               num_rma;
    axon_list_link_t       tx_free;
    axon_list_link_t       rma_free;
    axon_list_link_t       rx_repost;    /* receive buffers the provider refused for now */
    /* Endpoints and peers */
    axon_list_link_t       eps;
    axon_list_link_t       peers;
    unsigned               pending_reports;  /* peers failed, peer_failure not called yet */
    /* Keep-alives */
    unsigned               ka_calls;
    uint8_t                probe;         /* a connection broke: ping everyone, signaled */
    double                 ka_next;       /* when to ping next */
    double                 ka_checked;    /* the last look at the clock */
    /* Addresses */
    axon_ofi_dev_addr_t    dev_addr;
    axon_ofi_iface_addr_t  iface_addr;
    char                   name[AXON_DEV_NAME_MAX + 8];  /* "ofi/tcp", for log lines */
};

struct axon_ofi_ep {
    axon_tl_ep_t       super;
    fi_addr_t          addr;
    axon_ofi_peer_t   *peer;
    axon_status_t      status;       /* AXON_OK, or what sends return */
    unsigned           inflight;     /* sends and RMA the provider holds for us */
    axon_list_link_t   link;         /* iface->eps */
};

static inline axon_ofi_iface_t *axon_ofi_ep_iface(const axon_ofi_ep_t *ep)
{
    return (axon_ofi_iface_t*)ep->super.iface;
}

/* A libfabric return code as an Axon status. */
axon_status_t axon_ofi_status(ssize_t ret);

/* ofi_component.c */
/*
 * The fi_info list of provider prov (a name, e.g. "tcp") with the
 * capabilities Axon needs, FI_RMA too when want_rma and the provider has
 * it. -FI_ENODATA when it has no such endpoint.
 */
int           axon_ofi_getinfo(const char *prov, int want_rma, struct fi_info **info_p);
/* Is prov a provider that emulates a fabric in software (tcp, udp, shm, ...)? */
int           axon_ofi_prov_is_software(const char *prov);
/* The entry of a getinfo list an iface opens: the first that reaches past this host. */
const struct fi_info *axon_ofi_info_pick(const struct fi_info *list);
/* Does info's domain reach only the host it runs on? */
int           axon_ofi_info_is_local(const struct fi_info *info);

/* ofi_iface.c */
axon_status_t axon_ofi_iface_open(const axon_resource_t *resource, const void *config,
                                  const axon_iface_params_t *params, axon_iface_t **iface_p);
/*
 * An operation to peer failed at the provider with status: the peer is
 * gone. Its eps fail; peer_failure is called from progress, unless the peer
 * said goodbye first (graceful).
 */
void          axon_ofi_peer_fail(axon_ofi_iface_t *iface, axon_ofi_peer_t *peer,
                                 axon_status_t status, int graceful);
/* Does ret (a libfabric error) say the peer cannot be reached any more? */
int           axon_ofi_is_peer_error(ssize_t ret);

/* ofi_ep.c */
axon_status_t axon_ofi_ep_create(axon_iface_t *tl_iface, uint64_t peer_uuid,
                                 const void *dev_addr, const void *iface_addr,
                                 axon_tl_ep_t **ep_p);
void          axon_ofi_ep_destroy(axon_tl_ep_t *tl_ep);
axon_status_t axon_ofi_ep_am_short(axon_tl_ep_t *tl_ep, uint8_t am_id, const void *hdr,
                                   size_t hdr_len, const void *payload, size_t length);
ssize_t       axon_ofi_ep_am_bcopy(axon_tl_ep_t *tl_ep, uint8_t am_id, axon_pack_cb_t pack,
                                   void *arg);
axon_status_t axon_ofi_ep_flush(axon_tl_ep_t *tl_ep);
axon_status_t axon_ofi_ep_check(axon_tl_ep_t *tl_ep);
/* A send-side operation completed (status AXON_OK or the error). */
void          axon_ofi_op_done(axon_ofi_iface_t *iface, axon_ofi_op_t *op, axon_status_t status);
/* Progress, now and then: pings, pongs owed, peers silent too long. */
void          axon_ofi_ep_keepalive(axon_ofi_iface_t *iface, double now);
/* Answer peer's ping, unless the provider cannot take it now (then from progress). */
void          axon_ofi_pong(axon_ofi_iface_t *iface, axon_ofi_peer_t *peer);
/* Post a control message (kind, its body) to peer; AXON_OK when posted. */
axon_status_t axon_ofi_ctrl_send(axon_ofi_iface_t *iface, axon_ofi_peer_t *peer,
                                 unsigned kind, const void *body, size_t len);
/* The peer of uuid, or NULL. */
axon_ofi_peer_t *axon_ofi_peer_find(axon_ofi_iface_t *iface, uint64_t uuid);
/* The peer of uuid, made with address addr when new; NULL when out of memory. */
axon_ofi_peer_t *axon_ofi_peer_get(axon_ofi_iface_t *iface, uint64_t uuid, fi_addr_t addr);

/* ofi_md.c */
axon_status_t axon_ofi_md_open(const axon_resource_t *resource, const void *config,
                               axon_md_t **md_p);
/* Register [addr, addr + length) with access in md's domain (a libfabric return code). */
int           axon_ofi_mr_reg(axon_ofi_md_t *md, const void *addr, size_t length,
                              uint64_t access, struct fid_mr **mr_p);

/* ofi_rma.c */
axon_status_t axon_ofi_ep_get_zcopy(axon_tl_ep_t *tl_ep, void *buffer, size_t length,
                                    uint64_t remote_addr, const void *rkey,
                                    axon_tl_completion_t *comp);
axon_status_t axon_ofi_ep_put_zcopy(axon_tl_ep_t *tl_ep, const void *buffer, size_t length,
                                    uint64_t remote_addr, const void *rkey,
                                    axon_tl_completion_t *comp);

#endif
