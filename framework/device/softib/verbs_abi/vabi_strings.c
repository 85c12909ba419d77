/*
 * The pure functions of libibverbs: enum strings and rate conversions.
 */
#include "vabi.h"

const char *ibv_wc_status_str(enum ibv_wc_status status)
{
    return axon_dev_wc_status_str((axon_dev_wc_status_t)status);
}

const char *ibv_event_type_str(enum ibv_event_type event)
{
    return axon_dev_event_type_str((axon_dev_event_type_t)event);
}

const char *ibv_node_type_str(enum ibv_node_type node_type)
{
    static const char *const names[] = {
        [IBV_NODE_CA] = "InfiniBand channel adapter", [IBV_NODE_SWITCH] = "InfiniBand switch",
        [IBV_NODE_ROUTER] = "InfiniBand router",      [IBV_NODE_RNIC] = "iWARP NIC",
        [IBV_NODE_USNIC] = "usNIC",                   [IBV_NODE_USNIC_UDP] = "usNIC UDP",
        [IBV_NODE_UNSPECIFIED] = "unspecified",
    };
    unsigned n = (unsigned)node_type;

    return ((n < sizeof(names) / sizeof(names[0])) && names[n]) ? names[n] : "unknown";
}

const char *ibv_port_state_str(enum ibv_port_state port_state)
{
    static const char *const names[] = {
        [IBV_PORT_NOP] = "PORT_NOP",     [IBV_PORT_DOWN] = "PORT_DOWN",
        [IBV_PORT_INIT] = "PORT_INIT",   [IBV_PORT_ARMED] = "PORT_ARMED",
        [IBV_PORT_ACTIVE] = "PORT_ACTIVE", [IBV_PORT_ACTIVE_DEFER] = "PORT_ACTIVE_DEFER",
    };
    unsigned n = (unsigned)port_state;

    return ((n < sizeof(names) / sizeof(names[0])) && names[n]) ? names[n] : "unknown";
}

/* Each static rate: its multiple of 2.5 Gb/s (0: not a multiple) and its Mb/s. */
static const struct {
    enum ibv_rate rate;
    int           mult;
    int           mbps;
} vabi_rates[] = {
    {IBV_RATE_2_5_GBPS, 1, 2500},    {IBV_RATE_5_GBPS, 2, 5000},
    {IBV_RATE_10_GBPS, 4, 10000},    {IBV_RATE_20_GBPS, 8, 20000},
    {IBV_RATE_30_GBPS, 12, 30000},   {IBV_RATE_40_GBPS, 16, 40000},
    {IBV_RATE_60_GBPS, 24, 60000},   {IBV_RATE_80_GBPS, 32, 80000},
    {IBV_RATE_120_GBPS, 48, 120000}, {IBV_RATE_14_GBPS, 0, 14062},
    {IBV_RATE_56_GBPS, 0, 56250},    {IBV_RATE_112_GBPS, 0, 112500},
    {IBV_RATE_168_GBPS, 0, 168750},  {IBV_RATE_25_GBPS, 10, 25781},
    {IBV_RATE_100_GBPS, 40, 103125}, {IBV_RATE_200_GBPS, 80, 206250},
    {IBV_RATE_300_GBPS, 120, 309375}, {IBV_RATE_28_GBPS, 11, 28125},
    {IBV_RATE_50_GBPS, 20, 53125},   {IBV_RATE_400_GBPS, 160, 425000},
    {IBV_RATE_600_GBPS, 240, 637500}, {IBV_RATE_800_GBPS, 320, 850000},
    {IBV_RATE_1200_GBPS, 480, 1275000},
};
#define VABI_NRATES (sizeof(vabi_rates) / sizeof(vabi_rates[0]))

int ibv_rate_to_mult(enum ibv_rate rate)
{
    unsigned i;

    for (i = 0; i < VABI_NRATES; i++) {
        if (vabi_rates[i].rate == rate) {
            return (vabi_rates[i].mult > 0) ? vabi_rates[i].mult : -1;
        }
    }
    return -1;
}

enum ibv_rate mult_to_ibv_rate(int mult)
{
    unsigned i;

    for (i = 0; i < VABI_NRATES; i++) {
        if ((mult > 0) && (vabi_rates[i].mult == mult)) {
            return vabi_rates[i].rate;
        }
    }
    return IBV_RATE_MAX;
}

int ibv_rate_to_mbps(enum ibv_rate rate)
{
    unsigned i;

    for (i = 0; i < VABI_NRATES; i++) {
        if (vabi_rates[i].rate == rate) {
            return vabi_rates[i].mbps;
        }
    }
    return -1;
}

enum ibv_rate mbps_to_ibv_rate(int mbps)
{
    unsigned i;

    for (i = 0; i < VABI_NRATES; i++) {
        if (vabi_rates[i].mbps == mbps) {
            return vabi_rates[i].rate;
        }
    }
    return IBV_RATE_MAX;
}
