/* The ud component: its descriptor, configuration table and resource query. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ud.h"

/* Sender CPU per message: header, copy, post, and the reliability rc's device does for it
 * (sequence numbers, acks, retransmission): more than rc's. */
#define AXON_UD_OVERHEAD_NS 400.0

static const axon_config_entry_t axon_ud_config_table[] = {
    {"SEG_SIZE", "8k",
     "Largest bcopy message (256..1m); above the path MTU it travels in fragments that the "
     "receiver reassembles",
     offsetof(axon_ud_config_t, seg_size), AXON_CONFIG_TYPE_SIZE},

    {"TX_WINDOW", "256",
     "Packets sent to one peer and not yet acknowledged (1..32768); a full window makes "
     "sends return NO_RESOURCE until acks come",
     offsetof(axon_ud_config_t, tx_window), AXON_CONFIG_TYPE_UINT},

    {"TX_BUFS", "1024",
     "Send buffers of an iface (one packet each, registered, kept until acknowledged)",
     offsetof(axon_ud_config_t, tx_bufs), AXON_CONFIG_TYPE_UINT},

    {"TX_QUEUE_LEN", "256",
     "Send work requests on the UD QP; packets beyond wait in their buffers",
     offsetof(axon_ud_config_t, tx_queue_len), AXON_CONFIG_TYPE_UINT},

    {"RX_QUEUE_LEN", "512",
     "Receive buffers posted on the UD QP (each holds the GRH area and one MTU)",
     offsetof(axon_ud_config_t, rx_queue_len), AXON_CONFIG_TYPE_UINT},

    {"REASM_BUFS", "32",
     "Fragmented messages being reassembled at once, over all peers (SEG_SIZE bytes each); "
     "a fragment finding none is dropped and sent again",
     offsetof(axon_ud_config_t, reasm_bufs), AXON_CONFIG_TYPE_UINT},

    {"RETX_TIMEOUT", "20ms",
     "Time before an unacknowledged packet is sent again (doubling while unanswered)",
     offsetof(axon_ud_config_t, retx_timeout), AXON_CONFIG_TYPE_TIME},

    {"TIMEOUT", "30s",
     "Time without an acknowledgement or an answer to a probe, while something waits for an "
     "ack, before the peer is reported failed (acks come from the peer's progress calls, "
     "answers from its alive thread: see ALIVE)",
     offsetof(axon_ud_config_t, timeout), AXON_CONFIG_TYPE_TIME},

    {"ALIVE", "y",
     "Answer peers' liveness probes from a thread with a QP of its own, so that a worker "
     "computing without progress for longer than TIMEOUT is not taken for dead (n: no "
     "thread; such a worker's peers fail it)",
     offsetof(axon_ud_config_t, alive), AXON_CONFIG_TYPE_BOOL},

    {"KEEPALIVE_INTERVAL", "1s",
     "Silence from a peer after which a ping is sent, so a peer that only receives notices "
     "a dead one within TIMEOUT",
     offsetof(axon_ud_config_t, keepalive_interval), AXON_CONFIG_TYPE_TIME},

    {"GID_INDEX", "0",
     "GID table index of the port's address (RoCE: pick the RoCE v2 / IPv4 entry)",
     offsetof(axon_ud_config_t, gid_index), AXON_CONFIG_TYPE_UINT},

    AXON_CONFIG_END
};

axon_status_t axon_ud_config_check(const axon_ud_config_t *config)
{
    if (!axon_config_in_range("UD_SEG_SIZE", config->seg_size, AXON_UD_SEG_SIZE_MIN,
                              AXON_UD_SEG_SIZE_MAX) ||
        !axon_config_in_range("UD_TX_WINDOW", config->tx_window, 1, AXON_UD_WINDOW_MAX)) {
        return AXON_ERR_INVALID_PARAM;
    }
    if ((config->tx_bufs < 16) || (config->tx_queue_len < 8) ||
        (config->rx_queue_len < 2 * AXON_UD_RX_BATCH)) {
        axon_error("AXON_UD_TX_BUFS=%u, AXON_UD_TX_QUEUE_LEN=%u or AXON_UD_RX_QUEUE_LEN=%u is "
                   "invalid: need at least 16, 8 and %u", config->tx_bufs,
                   config->tx_queue_len, config->rx_queue_len, 2 * AXON_UD_RX_BATCH);
        return AXON_ERR_INVALID_PARAM;
    }
    if (config->reasm_bufs == 0) {
        axon_error("AXON_UD_REASM_BUFS=0 is invalid: must be >= 1");
        return AXON_ERR_INVALID_PARAM;
    }
    if (!(config->retx_timeout > 0) || !(config->timeout > config->retx_timeout) ||
        !(config->keepalive_interval > 0)) {
        axon_error("AXON_UD_RETX_TIMEOUT=%gs, AXON_UD_TIMEOUT=%gs or "
                   "AXON_UD_KEEPALIVE_INTERVAL=%gs is invalid: all > 0, TIMEOUT > RETX_TIMEOUT",
                   config->retx_timeout, config->timeout, config->keepalive_interval);
        return AXON_ERR_INVALID_PARAM;
    }
    if (config->gid_index > 255) {
        axon_error("AXON_UD_GID_INDEX=%u is invalid: must be < 256", config->gid_index);
        return AXON_ERR_INVALID_PARAM;
    }
    return AXON_OK;
}

static int axon_ud_fill(const axon_verbs_port_info_t *info, axon_resource_t *res, void *arg)
{
    const axon_ud_config_t *config = arg;
    size_t mtu = axon_dev_mtu_bytes(info->port_attr.active_mtu);

    if (mtu <= sizeof(axon_ud_hdr_t)) {
        axon_debug("ud: %s:%u: MTU code %d unusable, skipped", info->dev_name, info->port_num,
                   info->port_attr.active_mtu);
        return -1;
    }
    res->cap_flags   = AXON_CAP_AM_SHORT | AXON_CAP_AM_BCOPY | AXON_CAP_CONNECT_TO_IFACE |
                       AXON_CAP_AM_ORDERED | AXON_CAP_PEER_FAILURE;
    res->overhead_ns = AXON_UD_OVERHEAD_NS;
    /* A peer of a smaller MTU lowers the packet size per connection, never this. */
    res->max_short   = mtu - sizeof(axon_ud_hdr_t);
    res->max_bcopy   = config->seg_size;
    res->max_zcopy   = 0;
    res->ep_memory   = axon_ud_ep_memory();
    return 0;
}

static axon_status_t axon_ud_query(const void *config_v, axon_resource_t **resources_p,
                                   unsigned *count_p)
{
    const axon_ud_config_t *config = config_v;
    axon_status_t status;

    status = axon_ud_config_check(config);
    if (status != AXON_OK) {
        return status;
    }
    return axon_verbs_query_resources("ud", AXON_DEV_CAP_UD, axon_ud_fill, (void *)config,
                                      resources_p, count_p);
}

AXON_COMPONENT_EXPORT const axon_component_t AXON_COMPONENT_SYMBOL = {
    .abi_version   = AXON_COMPONENT_ABI_VERSION,
    .name          = "ud",
    .description   = "RDMA unreliable datagrams, one QP per worker, with Axon's own reliability",
    .config_prefix = "UD_",
    .config_table  = axon_ud_config_table,
    .config_size   = sizeof(axon_ud_config_t),
    .query         = axon_ud_query,
    .iface_open    = axon_ud_iface_open,
};
