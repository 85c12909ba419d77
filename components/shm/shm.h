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
#include "shm_seg.h"

/* Largest am_short: four cache lines with the cell header, to keep latency flat. */
#define AXON_SHM_MAX_SHORT (4 * AXON_SHM_FIFO_ALIGN - sizeof(axon_shm_cell_t))

/* am_id of a cell a sender claimed but could not fill: the receiver skips it silently. */
#define AXON_SHM_AM_ID_VOID 0xff

/* Options, read from AXON_SHM_* (see the table in shm_component.c). */
typedef struct axon_shm_config {
    unsigned  fifo_size;   /* cells in the receive ring */
    size_t    cell_size;   /* bytes per cell, header included */
    unsigned  rx_burst;    /* messages handled per progress call */
    char     *prefix;      /* of segment names in /dev/shm */
} axon_shm_config_t;

/* Device address: the host and the user, which decide reachability. */
typedef struct axon_shm_dev_addr {
    uint64_t host_id;
    uint32_t uid;
} __attribute__((packed)) axon_shm_dev_addr_t;

/*
 * Iface address: the segment to map. The cell size lets is_reachable refuse
 * a peer whose cells cannot hold what this process sends.
 */
typedef struct axon_shm_iface_addr {
    char     seg_name[AXON_SHM_SEG_NAME_MAX];
    uint32_t cell_size;
} __attribute__((packed)) axon_shm_iface_addr_t;

typedef struct axon_shm_iface {
    axon_iface_t      super;
    /* Receive path, touched by every progress call */
    axon_shm_fifo_t   fifo;
    uint64_t          head;           /* next position to consume; private to us */
    unsigned          rx_burst;
    void             *am_arg;
    axon_am_handler_t am_handlers[AXON_AM_ID_MAX];
    /* Send path limits (our cells; a peer's are checked to be at least as large) */
    size_t            max_short;
    size_t            max_bcopy;
    /* Addresses */
    uint64_t          host_id;
    uint32_t          uid;
    axon_shm_seg_t    seg;
} axon_shm_iface_t;

typedef struct axon_shm_ep {
    axon_tl_ep_t      super;
    axon_shm_fifo_t   fifo;        /* the peer's ring, in our mapping of its segment */
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

/* shm_component.c: reject options the ring cannot work with (logs which). */
axon_status_t axon_shm_config_check(const axon_shm_config_t *config);

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

/* shm_ep.c */
axon_status_t axon_shm_ep_create(axon_iface_t *tl_iface, const void *dev_addr,
                                 const void *iface_addr, axon_tl_ep_t **ep_p);
void          axon_shm_ep_destroy(axon_tl_ep_t *tl_ep);
axon_status_t axon_shm_ep_am_short(axon_tl_ep_t *tl_ep, uint8_t am_id, const void *hdr,
                                   size_t hdr_len, const void *payload, size_t length);
ssize_t       axon_shm_ep_am_bcopy(axon_tl_ep_t *tl_ep, uint8_t am_id, axon_pack_cb_t pack,
                                   void *arg);
axon_status_t axon_shm_ep_flush(axon_tl_ep_t *tl_ep);

#endif
