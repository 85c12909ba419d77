/* softib's configuration: AXON_SOFTIB_*, read each time a device is listed or opened. */
#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "log.h"
#include "softib.h"
#include "topo.h"

static const char *const softib_wire_names[] = {"auto", "shm", "udp", NULL};
static const char *const softib_atomic_cap_names[] = {"glob", "hca", NULL};

/* An AXON_SOFTIB_LOCALITY entry for a device placed nowhere (a list has no empty items). */
#define SOFTIB_LOCALITY_NONE "none"

#define OPT(_f) offsetof(softib_opts_t, _f)

const axon_config_entry_t softib_config_table[] = {
    {"DEVICES", "1", "number of softib devices, softib0..N-1 (0 = none)",
     OPT(devices), AXON_CONFIG_TYPE_UINT},
    {"WIRE", "auto", "wire between ports: auto (shm on one host, udp to others), shm or udp",
     OPT(wire), AXON_CONFIG_TYPE_ENUM(softib_wire_names, "auto|shm|udp")},
    {"ADDR", "auto", "IPv4 address the port's GID derives from (auto = 127.0.0.1)",
     OPT(addr), AXON_CONFIG_TYPE_STRING},
    {"UDP_PORT", "17000", "UDP port base of the udp wire (port = base + slot)",
     OPT(udp_port), AXON_CONFIG_TYPE_UINT},
    {"MTU", "4096", "port MTU in bytes: 256, 512, 1024, 2048 or 4096",
     OPT(mtu), AXON_CONFIG_TYPE_UINT},
    {"MAX_INLINE", "256", "largest INLINE send (max_inline_data) in bytes",
     OPT(max_inline), AXON_CONFIG_TYPE_UINT},
    {"DC_MAX_DCR", "256", "responder contexts of a DC target: initiators it serves at once "
     "(others get RNR NAKs until one disconnects); 1..65536", OPT(dc_max_dcr), AXON_CONFIG_TYPE_UINT},
    {"LOSS", "0", "probability (0..1) that the wire drops a packet, for tests",
     OPT(loss), AXON_CONFIG_TYPE_STRING},
    {"DUP", "0", "probability (0..1) that the wire duplicates a packet, for tests",
     OPT(dup), AXON_CONFIG_TYPE_STRING},
    {"REORDER", "0", "probability (0..1) that the wire holds a packet back, for tests",
     OPT(reorder), AXON_CONFIG_TYPE_STRING},
    {"SEED", "0", "seed of the fault-injection random numbers (0 = from pid and time)",
     OPT(seed), AXON_CONFIG_TYPE_UINT},
    {"PROGRESS_THREAD", "y", "a thread per open device progresses the engine while the "
     "process does not call in", OPT(progress_thread), AXON_CONFIG_TYPE_BOOL},
    {"DIRECT", "y", "an RC requester on this host moves RDMA WRITE and READ data into or out "
     "of the responder's process itself (cross-memory attach), as a NIC does without the "
     "responder's CPU; n: every byte goes by packets", OPT(direct), AXON_CONFIG_TYPE_BOOL},
    {"ATOMIC_CAP", "glob", "atomic_cap query_device reports: glob (what softib gives: its "
     "4/8/16-byte atomics are CPU instructions, atomic with the CPU too) or hca (atomic among "
     "the device's operations: a weaker promise, the level NICs and rxe report; UCX 1.13's "
     "rc_verbs uses device atomics only then)",
     OPT(atomic_cap), AXON_CONFIG_TYPE_ENUM(softib_atomic_cap_names, "glob|hca")},
    {"CAP_MASK", "", "capabilities to remove, comma-separated (rc,uc,ud,srq,atomic,inline,"
     "comp_channel,ext_atomic,cross_channel,mcast,...)", OPT(cap_mask),
     AXON_CONFIG_TYPE_STRING_LIST},
    {"LOCALITY", "", "where each device pretends to sit, in device order: pci:DDDD:BB:DD.F (a "
     "PCI bus id of the topology), numa:N or none; devices not listed have no locality",
     OPT(locality), AXON_CONFIG_TYPE_STRING_LIST},
    AXON_CONFIG_END
};

int softib_config_read(softib_opts_t *opts)
{
    memset(opts, 0, sizeof(*opts));
    if (axon_config_parse(softib_config_table, "SOFTIB_", opts, NULL, 0) != AXON_OK) {
        return EINVAL;   /* logged by the parser */
    }
    return 0;
}

void softib_config_release(softib_opts_t *opts)
{
    axon_config_release(softib_config_table, opts);
}

static int config_probability(const char *name, const char *str, double *value)
{
    char *end;
    double v = strtod(str, &end);

    if ((end == str) || (*end != '\0') || !(v >= 0.0) || (v > 1.0)) {
        axon_error("softib: AXON_SOFTIB_%s='%s' is not a probability in [0,1]", name, str);
        return EINVAL;
    }
    *value = v;
    return 0;
}

static int config_mtu(unsigned bytes, axon_dev_mtu_t *mtu)
{
    axon_dev_mtu_t m;

    for (m = AXON_DEV_MTU_256; m <= AXON_DEV_MTU_4096; m++) {
        if (axon_dev_mtu_bytes(m) == bytes) {
            *mtu = m;
            return 0;
        }
    }
    axon_error("softib: AXON_SOFTIB_MTU=%u is not one of 256, 512, 1024, 2048, 4096", bytes);
    return EINVAL;
}

int softib_config_params(const softib_opts_t *opts, unsigned dev_index,
                         softib_wire_params_t *params, uint64_t *cap_remove,
                         axon_dev_mtu_t *mtu)
{
    struct in_addr in;
    unsigned i, bit;
    int ret;

    memset(params, 0, sizeof(*params));
    params->dev_index     = dev_index;
    params->mode          = (softib_wire_mode_t)opts->wire;
    params->udp_port_base = opts->udp_port;
    params->seed          = opts->seed;
    if (!strcmp(opts->addr, "auto") || !opts->addr[0]) {
        params->ipv4_addr = htonl(INADDR_LOOPBACK);
    } else if (inet_pton(AF_INET, opts->addr, &in) == 1) {
        params->ipv4_addr = in.s_addr;
    } else {
        axon_error("softib: AXON_SOFTIB_ADDR='%s' is not an IPv4 address or auto", opts->addr);
        return EINVAL;
    }
    if ((opts->udp_port == 0) || (opts->udp_port + SOFTIB_QPN_MAX_SLOTS > 65535)) {
        axon_error("softib: AXON_SOFTIB_UDP_PORT=%u leaves no room for %u slots below 65536",
                   opts->udp_port, SOFTIB_QPN_MAX_SLOTS);
        return EINVAL;
    }
    if ((ret = config_probability("LOSS", opts->loss, &params->loss)) ||
        (ret = config_probability("DUP", opts->dup, &params->dup)) ||
        (ret = config_probability("REORDER", opts->reorder, &params->reorder)) ||
        (ret = config_mtu(opts->mtu, mtu))) {
        return ret;
    }
    if ((opts->dc_max_dcr == 0) || (opts->dc_max_dcr > SOFTIB_DC_MAX_DCR)) {
        axon_error("softib: AXON_SOFTIB_DC_MAX_DCR=%u is not in 1..%u", opts->dc_max_dcr,
                   SOFTIB_DC_MAX_DCR);
        return EINVAL;
    }
    if (opts->max_inline > 4096) {
        axon_error("softib: AXON_SOFTIB_MAX_INLINE=%u is over 4096", opts->max_inline);
        return EINVAL;
    }

    if (opts->locality.count > opts->devices) {
        axon_error("softib: AXON_SOFTIB_LOCALITY lists %u localities for %u devices",
                   opts->locality.count, opts->devices);
        return EINVAL;
    }
    for (i = 0; i < opts->locality.count; i++) {
        if (strcmp(opts->locality.names[i], SOFTIB_LOCALITY_NONE) &&
            (axon_topo_locality_check(opts->locality.names[i], "AXON_SOFTIB_LOCALITY") != AXON_OK)) {
            return EINVAL;
        }
    }

    *cap_remove = 0;
    for (i = 0; i < opts->cap_mask.count; i++) {
        for (bit = 0; bit < AXON_DEV_CAP_LAST_BIT; bit++) {
            if (!strcmp(opts->cap_mask.names[i], axon_dev_cap_names[bit])) {
                break;
            }
        }
        if (bit == AXON_DEV_CAP_LAST_BIT) {
            axon_error("softib: AXON_SOFTIB_CAP_MASK names '%s', not a capability",
                       opts->cap_mask.names[i]);
            return EINVAL;
        }
        *cap_remove |= 1ull << bit;
    }
    return 0;
}

void softib_config_locality(const softib_opts_t *opts, unsigned dev_index, char *buf, size_t max)
{
    const char *at = (dev_index < opts->locality.count) ? opts->locality.names[dev_index] : "";

    snprintf(buf, max, "%s", strcmp(at, SOFTIB_LOCALITY_NONE) ? at : "");
}
