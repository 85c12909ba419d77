/* rc's options (AXON_RC_*, also the rdmacm transport's data path) and resources. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rc.h"

/* Bounds the options are checked against */
#define AXON_RC_SEG_SIZE_MIN   ((size_t)256)
#define AXON_RC_SEG_SIZE_MAX   ((size_t)1 << 20)
#define AXON_RC_QUEUE_MAX      16384u
/* CPU cost of posting one send, an estimate for lane selection */
#define AXON_RC_OVERHEAD_NS    150.0
/* Bytes a QP's send queue costs per WR on a NIC (a WQE basic block), besides inline data */
#define AXON_RC_WQE_BYTES      64

const axon_config_entry_t axon_rc_config_table[] = {
    {"SEG_SIZE", "8k",
     "Largest bcopy message, and the size of each send and receive bounce buffer (256..1m)",
     offsetof(axon_rc_config_t, seg_size), AXON_CONFIG_TYPE_SIZE},

    {"TX_QUEUE_LEN", "256",
     "Send work requests in flight per connection (its QP's send queue; rounded up to a "
     "power of 2)",
     offsetof(axon_rc_config_t, tx_queue_len), AXON_CONFIG_TYPE_UINT},

    {"TX_BUFS", "256",
     "Registered send bounce buffers per interface (bcopy, and short sends too big to inline)",
     offsetof(axon_rc_config_t, tx_bufs), AXON_CONFIG_TYPE_UINT},

    {"RX_QUEUE_LEN", "1024",
     "Receive buffers in the shared receive queue of an interface, refilled from progress",
     offsetof(axon_rc_config_t, rx_queue_len), AXON_CONFIG_TYPE_UINT},

    {"TX_MODERATION", "32",
     "Request a completion for one send in this many; it releases the unsignaled ones before it",
     offsetof(axon_rc_config_t, tx_moderation), AXON_CONFIG_TYPE_UINT},

    {"FC_WINDOW", "64",
     "Active messages a peer may send before the receiver returns credits (flow control "
     "that keeps receivers from running out of buffers)",
     offsetof(axon_rc_config_t, fc_window), AXON_CONFIG_TYPE_UINT},

    {"MAX_INLINE", "128",
     "Send messages up to this many bytes (8-byte header included) inline in the work "
     "request, limited by the device",
     offsetof(axon_rc_config_t, max_inline), AXON_CONFIG_TYPE_UINT},

    {"TIMEOUT", "0.5s",
     "Transport acknowledgement timeout (rounded down to the IB 4.096us * 2^n scale)",
     offsetof(axon_rc_config_t, timeout), AXON_CONFIG_TYPE_TIME},

    {"RETRY_COUNT", "7",
     "Transport retries (0..7) before a peer that stopped answering is reported failed",
     offsetof(axon_rc_config_t, retry_count), AXON_CONFIG_TYPE_UINT},

    {"KEEPALIVE_INTERVAL", "1s",
     "A connection idle this long is probed with a zero-length RDMA write, so a receiver "
     "notices a sender that died",
     offsetof(axon_rc_config_t, keepalive_interval), AXON_CONFIG_TYPE_TIME},

    {"CONNECT_TIMEOUT", "5s",
     "Time a connection handshake may take before the peer is reported unreachable",
     offsetof(axon_rc_config_t, connect_timeout), AXON_CONFIG_TYPE_TIME},

    {"RCACHE_MAX", "256",
     "Registrations of user memory kept while unused, so zero-copy operations and "
     "rendezvous sends from the same buffers register once (0: register for each "
     "operation; keys from axon_mem_map always get their own). Memory the application "
     "unmaps leaves the cache at once",
     offsetof(axon_rc_config_t, rcache_max), AXON_CONFIG_TYPE_UINT},

    {"GID_INDEX", "0",
     "GID table index of the port's address (RoCE: the entry of the wanted RoCE version)",
     offsetof(axon_rc_config_t, gid_index), AXON_CONFIG_TYPE_UINT},

    AXON_CONFIG_END
};

axon_status_t axon_rc_config_check(const axon_rc_config_t *c)
{
    if (!axon_config_in_range("RC_SEG_SIZE", c->seg_size, AXON_RC_SEG_SIZE_MIN,
                              AXON_RC_SEG_SIZE_MAX) ||
        !axon_config_in_range("RC_TX_QUEUE_LEN", c->tx_queue_len, 8, AXON_RC_QUEUE_MAX) ||
        !axon_config_in_range("RC_TX_BUFS", c->tx_bufs, 8, AXON_RC_QUEUE_MAX) ||
        !axon_config_in_range("RC_RX_QUEUE_LEN", c->rx_queue_len, 16, AXON_RC_QUEUE_MAX)) {
        return AXON_ERR_INVALID_PARAM;
    }
    if ((c->tx_moderation < 1) || (c->tx_moderation > c->tx_queue_len / 2)) {
        axon_error("AXON_RC_TX_MODERATION=%u is invalid: must be between 1 and half of "
                   "AXON_RC_TX_QUEUE_LEN (%u)", c->tx_moderation, c->tx_queue_len / 2);
        return AXON_ERR_INVALID_PARAM;
    }
    if ((c->fc_window < 2) || (c->fc_window > c->rx_queue_len) || (c->fc_window > 32768)) {
        axon_error("AXON_RC_FC_WINDOW=%u is invalid: must be between 2 and "
                   "AXON_RC_RX_QUEUE_LEN (%u)", c->fc_window, c->rx_queue_len);
        return AXON_ERR_INVALID_PARAM;
    }
    if (!axon_config_in_range("RC_RETRY_COUNT", c->retry_count, 0, 7)) {
        return AXON_ERR_INVALID_PARAM;
    }
    if (!(c->timeout > 0) || (c->timeout > 3600)) {
        axon_error("AXON_RC_TIMEOUT=%g is invalid: must be more than 0 (and at most 1h)",
                   c->timeout);
        return AXON_ERR_INVALID_PARAM;
    }
    if (!(c->keepalive_interval > 0)) {
        axon_error("AXON_RC_KEEPALIVE_INTERVAL=%g is invalid: must be more than 0",
                   c->keepalive_interval);
        return AXON_ERR_INVALID_PARAM;
    }
    if (!(c->connect_timeout > 0)) {
        axon_error("AXON_RC_CONNECT_TIMEOUT=%g is invalid: must be more than 0",
                   c->connect_timeout);
        return AXON_ERR_INVALID_PARAM;
    }
    if (c->gid_index > 255) {
        axon_error("AXON_RC_GID_INDEX=%u is invalid: must be at most 255", c->gid_index);
        return AXON_ERR_INVALID_PARAM;
    }
    return AXON_OK;
}

static uint32_t axon_rc_pow2(uint32_t v)
{
    uint32_t p = 1;

    while (p < v) {
        p <<= 1;
    }
    return p;
}

/* The memory one ep costs: ep and connection structs, descriptor ring, send queue. */
static size_t axon_rc_ep_memory(const axon_rc_config_t *c, uint32_t max_inline)
{
    uint32_t depth = axon_rc_pow2(c->tx_queue_len);

    return sizeof(axon_rc_ep_t) + sizeof(axon_rc_conn_t) +
           depth * (sizeof(axon_rc_tx_desc_t) + AXON_RC_WQE_BYTES + max_inline);
}

int axon_rc_fill_resource(const axon_verbs_port_info_t *info, axon_resource_t *res, void *arg)
{
    const axon_rc_config_t *c = arg;
    uint32_t inl = (c->max_inline < info->dev_attr.max_inline_data) ?
                   c->max_inline : info->dev_attr.max_inline_data;
    size_t max_msg = info->port_attr.max_msg_sz ? info->port_attr.max_msg_sz : (1u << 30);

    res->cap_flags   = AXON_CAP_AM_SHORT | AXON_CAP_AM_BCOPY | AXON_CAP_GET | AXON_CAP_PUT |
                       AXON_CAP_CONNECT_TO_IFACE | AXON_CAP_AM_ORDERED |
                       AXON_CAP_PEER_FAILURE | AXON_CAP_NEED_MKEY;
    res->overhead_ns = AXON_RC_OVERHEAD_NS;
    res->max_short   = ((c->seg_size < AXON_RC_MAX_SHORT) ? c->seg_size : AXON_RC_MAX_SHORT);
    res->max_bcopy   = c->seg_size;
    res->max_zcopy   = max_msg;
    res->ep_memory   = axon_rc_ep_memory(c, inl);
    res->amo_device_ops = axon_rc_amo_device_ops(&info->dev_attr);
    if (res->amo_device_ops != 0) {
        res->cap_flags |= AXON_CAP_AMO_DEVICE;
    }
    return 0;
}
