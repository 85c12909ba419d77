/* dc's options (AXON_DC_*) and resources. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dc.h"

#define AXON_DC_SEG_SIZE_MIN   ((size_t)256)
#define AXON_DC_SEG_SIZE_MAX   ((size_t)1 << 20)
#define AXON_DC_QUEUE_MAX      16384u
#define AXON_DC_NUM_DCI_MAX    64u
/* Sender CPU per message: rc's, plus naming the target in the WR */
#define AXON_DC_OVERHEAD_NS    160.0

const char *const axon_dc_policy_names[] = {"dcs", "dcs_quota", "shared", NULL};

const axon_config_entry_t axon_dc_config_table[] = {
    {"SEG_SIZE", "8k",
     "Largest bcopy message, and the size of each send and receive bounce buffer (256..1m)",
     offsetof(axon_dc_config_t, seg_size), AXON_CONFIG_TYPE_SIZE},

    {"NUM_DCI", "8",
     "DC initiators of an interface (1..64, at most the device's max_dci): the send queues "
     "every endpoint borrows, whatever the number of peers",
     offsetof(axon_dc_config_t, num_dci), AXON_CONFIG_TYPE_UINT},

    {"POLICY", "dcs_quota",
     "How endpoints get a DCI: dcs (an endpoint holds one from its first send until its "
     "work completed; with none free it waits in line for the next one), dcs_quota (as dcs, "
     "but an endpoint that posted QUOTA sends while others wait takes no more until it "
     "drained, so the DCI moves on), shared (endpoints spread round-robin over the DCIs, "
     "each keeping its own)",
     offsetof(axon_dc_config_t, policy),
     AXON_CONFIG_TYPE_ENUM(axon_dc_policy_names, "dcs|dcs_quota|shared")},

    {"QUOTA", "32",
     "dcs_quota: work requests an endpoint may post on its DCI while others wait for one "
     "(1..TX_QUEUE_LEN)",
     offsetof(axon_dc_config_t, quota), AXON_CONFIG_TYPE_UINT},

    {"TX_QUEUE_LEN", "128",
     "Send work requests in flight per DCI (rounded up to a power of 2)",
     offsetof(axon_dc_config_t, tx_queue_len), AXON_CONFIG_TYPE_UINT},

    {"TX_BUFS", "256",
     "Registered send bounce buffers per interface (bcopy, and short sends too big to inline)",
     offsetof(axon_dc_config_t, tx_bufs), AXON_CONFIG_TYPE_UINT},

    {"RX_QUEUE_LEN", "2048",
     "Receive buffers in the shared receive queue of the interface's DCT, refilled from "
     "progress; RX_QUEUE_LEN / FC_WINDOW senders can have a full window in flight at once "
     "(more wait in the device's receiver-not-ready retries)",
     offsetof(axon_dc_config_t, rx_queue_len), AXON_CONFIG_TYPE_UINT},

    {"FC_WINDOW", "64",
     "Active messages an endpoint may send before the receiver grants more (2..RX_QUEUE_LEN, "
     "at most 32768): credits are asked for after half a window",
     offsetof(axon_dc_config_t, fc_window), AXON_CONFIG_TYPE_UINT},

    {"MAX_INLINE", "128",
     "Send messages up to this many bytes (8-byte header included) inline in the work "
     "request, limited by the device",
     offsetof(axon_dc_config_t, max_inline), AXON_CONFIG_TYPE_UINT},

    {"TIMEOUT", "0.5s",
     "Transport acknowledgement timeout of the DCIs (rounded down to the IB 4.096us * 2^n "
     "scale)",
     offsetof(axon_dc_config_t, timeout), AXON_CONFIG_TYPE_TIME},

    {"RETRY_COUNT", "7",
     "Transport retries (0..7) before a peer that stopped answering is reported failed",
     offsetof(axon_dc_config_t, retry_count), AXON_CONFIG_TYPE_UINT},

    {"KEEPALIVE_INTERVAL", "1s",
     "An endpoint that sent nothing for this long sends a small probe, so a receive-only "
     "peer notices a sender that died (within TIMEOUT and RETRY_COUNT)",
     offsetof(axon_dc_config_t, keepalive_interval), AXON_CONFIG_TYPE_TIME},

    {"RCACHE_MAX", "256",
     "Registrations of user memory kept while unused (as AXON_RC_RCACHE_MAX: dc shares rc's "
     "memory domain)",
     offsetof(axon_dc_config_t, rcache_max), AXON_CONFIG_TYPE_UINT},

    {"GID_INDEX", "0",
     "GID table index of the port's address (RoCE: the entry of the wanted RoCE version)",
     offsetof(axon_dc_config_t, gid_index), AXON_CONFIG_TYPE_UINT},

    AXON_CONFIG_END
};

axon_status_t axon_dc_config_check(const axon_dc_config_t *c)
{
    if (!axon_config_in_range("DC_SEG_SIZE", c->seg_size, AXON_DC_SEG_SIZE_MIN,
                              AXON_DC_SEG_SIZE_MAX) ||
        !axon_config_in_range("DC_NUM_DCI", c->num_dci, 1, AXON_DC_NUM_DCI_MAX) ||
        !axon_config_in_range("DC_TX_QUEUE_LEN", c->tx_queue_len, 8, AXON_DC_QUEUE_MAX) ||
        !axon_config_in_range("DC_TX_BUFS", c->tx_bufs, 8, AXON_DC_QUEUE_MAX) ||
        !axon_config_in_range("DC_RX_QUEUE_LEN", c->rx_queue_len, 16, AXON_DC_QUEUE_MAX) ||
        !axon_config_in_range("DC_RETRY_COUNT", c->retry_count, 0, 7)) {
        return AXON_ERR_INVALID_PARAM;
    }
    if (c->policy >= AXON_DC_POLICY_LAST) {
        axon_error("AXON_DC_POLICY=%u is invalid: must be dcs, dcs_quota or shared", c->policy);
        return AXON_ERR_INVALID_PARAM;
    }
    if ((c->quota < 1) || (c->quota > c->tx_queue_len)) {
        axon_error("AXON_DC_QUOTA=%u is invalid: must be between 1 and AXON_DC_TX_QUEUE_LEN "
                   "(%u)", c->quota, c->tx_queue_len);
        return AXON_ERR_INVALID_PARAM;
    }
    if ((c->fc_window < 2) || (c->fc_window > c->rx_queue_len) || (c->fc_window > 32768)) {
        axon_error("AXON_DC_FC_WINDOW=%u is invalid: must be between 2 and "
                   "AXON_DC_RX_QUEUE_LEN (%u), at most 32768", c->fc_window, c->rx_queue_len);
        return AXON_ERR_INVALID_PARAM;
    }
    if (!(c->timeout > 0) || (c->timeout > 3600)) {
        axon_error("AXON_DC_TIMEOUT=%g is invalid: must be more than 0 (and at most 1h)",
                   c->timeout);
        return AXON_ERR_INVALID_PARAM;
    }
    if (!(c->keepalive_interval > 0)) {
        axon_error("AXON_DC_KEEPALIVE_INTERVAL=%g is invalid: must be more than 0",
                   c->keepalive_interval);
        return AXON_ERR_INVALID_PARAM;
    }
    if (c->gid_index > 255) {
        axon_error("AXON_DC_GID_INDEX=%u is invalid: must be at most 255", c->gid_index);
        return AXON_ERR_INVALID_PARAM;
    }
    return AXON_OK;
}

int axon_dc_fill_resource(const axon_verbs_port_info_t *info, axon_resource_t *res, void *arg)
{
    const axon_dc_config_t *c = arg;
    size_t max_msg = info->port_attr.max_msg_sz ? info->port_attr.max_msg_sz : (1u << 30);

    if (info->dev_attr.dc.max_dci == 0) {
        axon_debug("%s:%u: the device has no DC initiators, dc skipped", info->dev_name,
                   info->port_num);
        return -1;
    }
    res->cap_flags   = AXON_CAP_AM_SHORT | AXON_CAP_AM_BCOPY | AXON_CAP_GET | AXON_CAP_PUT |
                       AXON_CAP_CONNECT_TO_IFACE | AXON_CAP_AM_ORDERED |
                       AXON_CAP_PEER_FAILURE | AXON_CAP_NEED_MKEY;
    res->overhead_ns = AXON_DC_OVERHEAD_NS;
    res->max_short   = (c->seg_size < AXON_DC_MAX_SHORT) ? c->seg_size : AXON_DC_MAX_SHORT;
    res->max_bcopy   = c->seg_size;
    res->max_zcopy   = max_msg;
    /* the endpoint and its slot in the id table; DCIs, buffers and address handles are
     * the iface's, whatever the number of peers */
    res->ep_memory   = sizeof(axon_dc_ep_t) + sizeof(axon_dc_ep_t *);
    res->amo_device_ops = axon_rc_amo_device_ops(&info->dev_attr);
    if (res->amo_device_ops != 0) {
        res->cap_flags |= AXON_CAP_AMO_DEVICE;
    }
    return 0;
}
