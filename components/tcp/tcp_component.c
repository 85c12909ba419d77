/* The tcp component: its descriptor, configuration table and resource query. */
#define _GNU_SOURCE
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tcp.h"
#include "log.h"
#include "topo.h"

/*
 * Estimates for lane selection, not measurements: a one-way small message
 * through two kernel TCP stacks costs about 10 us on loopback and more on a
 * NIC; bandwidth is the link speed when the driver reports it.
 */
#define AXON_TCP_LATENCY_LO_NS     10000.0
#define AXON_TCP_LATENCY_NET_NS    25000.0
#define AXON_TCP_OVERHEAD_NS       500.0
#define AXON_TCP_BANDWIDTH_UNKNOWN 1250.0   /* MB/s: assume 10 Gb/s when unreported */

/* Listed interface names in an error line */
#define AXON_TCP_IF_LIST_MAX 512

static const axon_config_entry_t axon_tcp_config_table[] = {
    {"IFACES", "all",
     "Network interfaces tcp uses (all, eth0,ib0 or ^docker0); each needs an IPv4 address "
     "and to be up",
     offsetof(axon_tcp_config_t, ifaces), AXON_CONFIG_TYPE_ALLOW_LIST},

    {"SEG_SIZE", "64k",
     "Largest bcopy message, and the send buffer each endpoint holds (1k..64m)",
     offsetof(axon_tcp_config_t, seg_size), AXON_CONFIG_TYPE_SIZE},

    {"NODELAY", "y",
     "Set TCP_NODELAY: send small messages at once instead of coalescing them",
     offsetof(axon_tcp_config_t, nodelay), AXON_CONFIG_TYPE_BOOL},

    {"SNDBUF", "0",
     "Socket send buffer (SO_SNDBUF) in bytes; 0 keeps the kernel's default and autotuning "
     "(below a few segments, delayed ACKs stall the stream)",
     offsetof(axon_tcp_config_t, sndbuf), AXON_CONFIG_TYPE_SIZE},

    {"RCVBUF", "0",
     "Socket receive buffer (SO_RCVBUF) in bytes; 0 keeps the kernel's default and autotuning",
     offsetof(axon_tcp_config_t, rcvbuf), AXON_CONFIG_TYPE_SIZE},

    {"CONNECT_TIMEOUT", "10s",
     "Time an endpoint's connect() may take before its peer is reported unreachable "
     "(the peer's kernel answers it, however busy the peer is)",
     offsetof(axon_tcp_config_t, connect_timeout), AXON_CONFIG_TYPE_TIME},

    {"PORT_RANGE", "0",
     "Listening ports: 0 for any free port, <lo>-<hi> for the first free one in a range "
     "(for firewalls), or one <port>",
     offsetof(axon_tcp_config_t, port_range), AXON_CONFIG_TYPE_STRING},

    {"IO_CHUNK", "1m",
     "Bytes a bulk sendmsg or recv moves at most (64k..64m): larger calls cost fewer system "
     "calls, smaller ones let the receiver's copy overlap the sender's (over loopback, 64k "
     "was faster on some hosts, 1m on others)",
     offsetof(axon_tcp_config_t, io_chunk), AXON_CONFIG_TYPE_SIZE},

    {"KEEPALIVE", "y",
     "Probe idle connections (SO_KEEPALIVE, first probe after 5s) so a peer host that "
     "vanished is reported within seconds",
     offsetof(axon_tcp_config_t, keepalive), AXON_CONFIG_TYPE_BOOL},

    AXON_CONFIG_END
};

/* A port number of 1..65535 at *str; advances str past it. */
static int axon_tcp_read_port(const char **str, unsigned *port_p)
{
    unsigned long value = 0;
    const char   *p     = *str;

    if ((*p < '0') || (*p > '9')) {
        return -1;
    }
    for (; (*p >= '0') && (*p <= '9'); ++p) {
        value = value * 10 + (unsigned long)(*p - '0');
        if (value > 65535) {
            return -1;
        }
    }
    *str    = p;
    *port_p = (unsigned)value;
    return 0;
}

static int axon_tcp_parse_port_range(const char *str, uint16_t *lo_p, uint16_t *hi_p)
{
    unsigned lo, hi;

    if ((str == NULL) || (axon_tcp_read_port(&str, &lo) != 0)) {
        return -1;
    }
    if (*str == '\0') {
        hi = lo;    /* "0" = any port, "N" = exactly N */
    } else if ((*str != '-') || (++str, axon_tcp_read_port(&str, &hi) != 0) || (*str != '\0') ||
               (lo == 0) || (hi < lo)) {
        return -1;
    }
    *lo_p = (uint16_t)lo;
    *hi_p = (uint16_t)hi;
    return 0;
}

/* A size option's value as the user would write it ("64K", "inf"). */
static const char *axon_tcp_size_str(size_t value, char *buf, size_t max)
{
    axon_config_write_size(buf, max, &value, NULL);
    return buf;
}

/* AXON_TCP_<name>=value within [lo, hi], else logged. */
static axon_status_t axon_tcp_size_check(const char *name, size_t value, size_t lo, size_t hi)
{
    char buf[32], min[32], max[32];

    if ((value >= lo) && (value <= hi)) {
        return AXON_OK;
    }
    axon_error("AXON_TCP_%s=%s is invalid: must be between %s and %s", name,
               axon_tcp_size_str(value, buf, sizeof(buf)), axon_tcp_size_str(lo, min, sizeof(min)),
               axon_tcp_size_str(hi, max, sizeof(max)));
    return AXON_ERR_INVALID_PARAM;
}

axon_status_t axon_tcp_config_check(const axon_tcp_config_t *config, uint16_t *port_lo,
                                    uint16_t *port_hi)
{
    char buf[32];

    if (axon_tcp_size_check("SEG_SIZE", config->seg_size, AXON_TCP_SEG_SIZE_MIN,
                            AXON_TCP_SEG_SIZE_MAX) != AXON_OK) {
        return AXON_ERR_INVALID_PARAM;
    }
    if (axon_tcp_size_check("IO_CHUNK", config->io_chunk, AXON_TCP_IO_CHUNK_MIN,
                            AXON_TCP_IO_CHUNK_MAX) != AXON_OK) {
        return AXON_ERR_INVALID_PARAM;
    }
    if (config->sndbuf > INT_MAX) {
        axon_error("AXON_TCP_SNDBUF=%s is invalid: must be at most %d",
                   axon_tcp_size_str(config->sndbuf, buf, sizeof(buf)), INT_MAX);
        return AXON_ERR_INVALID_PARAM;
    }
    if (config->rcvbuf > INT_MAX) {
        axon_error("AXON_TCP_RCVBUF=%s is invalid: must be at most %d",
                   axon_tcp_size_str(config->rcvbuf, buf, sizeof(buf)), INT_MAX);
        return AXON_ERR_INVALID_PARAM;
    }
    if (!(config->connect_timeout > 0)) {
        axon_error("AXON_TCP_CONNECT_TIMEOUT=%g is invalid: must be more than 0",
                   config->connect_timeout);
        return AXON_ERR_INVALID_PARAM;
    }
    if (axon_tcp_parse_port_range(config->port_range, port_lo, port_hi) != 0) {
        axon_error("AXON_TCP_PORT_RANGE=%s is invalid: expected 0, <port> or <lo>-<hi> with "
                   "1 <= lo <= hi <= 65535", config->port_range ? config->port_range : "");
        return AXON_ERR_INVALID_PARAM;
    }
    return AXON_OK;
}

static int axon_tcp_if_exists(const struct ifaddrs *ifa_list, const char *name)
{
    const struct ifaddrs *ifa;

    for (ifa = ifa_list; ifa != NULL; ifa = ifa->ifa_next) {
        if (!strcmp(ifa->ifa_name, name)) {
            return 1;
        }
    }
    return 0;
}

/* Every interface name once, comma-separated, for an error line. */
static void axon_tcp_if_names(const struct ifaddrs *ifa_list, char *buf, size_t max)
{
    const struct ifaddrs *ifa, *prev;
    size_t                len = 0;
    int                   ret;

    buf[0] = '\0';
    for (ifa = ifa_list; ifa != NULL; ifa = ifa->ifa_next) {
        for (prev = ifa_list; (prev != ifa) && strcmp(prev->ifa_name, ifa->ifa_name);
             prev = prev->ifa_next) {
        }
        if (prev != ifa) {
            continue;   /* listed already */
        }
        ret = snprintf(buf + len, max - len, "%s%s", (len > 0) ? "," : "", ifa->ifa_name);
        if ((ret < 0) || ((size_t)ret >= max - len)) {
            break;
        }
        len += (size_t)ret;
    }
}

/* Names in AXON_TCP_IFACES must exist: a typo would silently leave tcp without devices. */
static axon_status_t axon_tcp_check_if_names(const axon_tcp_config_t *config,
                                             const struct ifaddrs *ifa_list)
{
    char     names[AXON_TCP_IF_LIST_MAX];
    unsigned i;

    if (config->ifaces.mode == AXON_CONFIG_ALLOW_ALL) {
        return AXON_OK;
    }
    for (i = 0; i < config->ifaces.list.count; ++i) {
        if (!axon_tcp_if_exists(ifa_list, config->ifaces.list.names[i])) {
            axon_tcp_if_names(ifa_list, names, sizeof(names));
            axon_error("AXON_TCP_IFACES names '%s', which is not a network interface here "
                       "(interfaces: %s)", config->ifaces.list.names[i], names);
            return AXON_ERR_INVALID_PARAM;
        }
    }
    return AXON_OK;
}

/* Link speed from sysfs, in MB/s (10^6 bytes), or 0 when the driver does not say. */
static double axon_tcp_if_bandwidth(const char *name)
{
    char  path[128], base[IF_NAMESIZE + 1];
    FILE *file;
    long  mbits = -1;

    /* An alias such as eth0:1 reports through its device. */
    snprintf(base, sizeof(base), "%.*s", (int)strcspn(name, ":"), name);
    snprintf(path, sizeof(path), "/sys/class/net/%s/speed", base);
    file = fopen(path, "re");
    if (file == NULL) {
        return 0;
    }
    if (fscanf(file, "%ld", &mbits) != 1) {
        mbits = -1;
    }
    fclose(file);
    return (mbits > 0) ? (double)mbits / 8.0 : 0;
}

static void axon_tcp_resource_init(axon_resource_t *resource, const struct ifaddrs *ifa,
                                   const axon_tcp_config_t *config)
{
    int    loopback  = !!(ifa->ifa_flags & IFF_LOOPBACK);
    double bandwidth = loopback ? AXON_TCP_BANDWIDTH_LO : axon_tcp_if_bandwidth(ifa->ifa_name);
    char   sysfs[64 + IF_NAMESIZE];

    memset(resource, 0, sizeof(*resource));
    snprintf(resource->tl_name, sizeof(resource->tl_name), "tcp");
    snprintf(resource->dev_name, sizeof(resource->dev_name), "%s", ifa->ifa_name);
    resource->dev_type       = AXON_DEV_TYPE_NET;
    snprintf(sysfs, sizeof(sysfs), "/sys/class/net/%s", ifa->ifa_name);
    axon_topo_sysfs_locality(sysfs, resource->locality, sizeof(resource->locality));
    resource->cap_flags      = AXON_CAP_AM_SHORT | AXON_CAP_AM_BCOPY | AXON_CAP_AM_ZCOPY |
                               AXON_CAP_AM_ORDERED | AXON_CAP_PEER_FAILURE |
                               AXON_CAP_CONNECT_TO_IFACE;
    resource->latency_ns     = loopback ? AXON_TCP_LATENCY_LO_NS : AXON_TCP_LATENCY_NET_NS;
    resource->bandwidth_MBps = (bandwidth > 0) ? bandwidth : AXON_TCP_BANDWIDTH_UNKNOWN;
    resource->overhead_ns    = AXON_TCP_OVERHEAD_NS;
    resource->max_short      = axon_tcp_max_short(config->seg_size);
    resource->max_bcopy      = config->seg_size;
    resource->max_zcopy      = AXON_TCP_MAX_ZCOPY;
    resource->ep_memory      = axon_tcp_ep_alloc_size(config->seg_size);
}

/* Does ifa start the usable entries of its interface (IPv4, up, first address)? */
static int axon_tcp_if_usable(const struct ifaddrs *ifa_list, const struct ifaddrs *ifa)
{
    const struct ifaddrs *prev;

    if ((ifa->ifa_addr == NULL) || (ifa->ifa_addr->sa_family != AF_INET) ||
        !(ifa->ifa_flags & IFF_UP)) {
        return 0;
    }
    for (prev = ifa_list; prev != ifa; prev = prev->ifa_next) {
        if ((prev->ifa_addr != NULL) && (prev->ifa_addr->sa_family == AF_INET) &&
            !strcmp(prev->ifa_name, ifa->ifa_name)) {
            return 0;   /* one resource per interface: its first address */
        }
    }
    return 1;
}

static axon_status_t axon_tcp_query(const void *config_v, axon_resource_t **resources_p,
                                    unsigned *count_p)
{
    const axon_tcp_config_t *config = config_v;
    axon_resource_t         *resources;
    struct ifaddrs          *ifa_list, *ifa;
    axon_status_t            status;
    uint16_t                 port_lo, port_hi;
    unsigned                 count = 0, max = 0;

    status = axon_tcp_config_check(config, &port_lo, &port_hi);
    if (status != AXON_OK) {
        return status;
    }
    if (getifaddrs(&ifa_list) != 0) {
        axon_error("tcp: getifaddrs() failed: %s", strerror(errno));
        return AXON_ERR_IO_ERROR;
    }
    status = axon_tcp_check_if_names(config, ifa_list);
    if (status != AXON_OK) {
        goto out;
    }

    for (ifa = ifa_list; ifa != NULL; ifa = ifa->ifa_next) {
        ++max;
    }
    resources = calloc((max > 0) ? max : 1, sizeof(*resources));
    if (resources == NULL) {
        axon_error("tcp: cannot allocate the resource list");
        status = AXON_ERR_NO_MEMORY;
        goto out;
    }
    for (ifa = ifa_list; ifa != NULL; ifa = ifa->ifa_next) {
        if (!axon_tcp_if_usable(ifa_list, ifa)) {
            continue;
        }
        if (!axon_config_allows(&config->ifaces, ifa->ifa_name)) {
            axon_debug("tcp: %s left out by AXON_TCP_IFACES", ifa->ifa_name);
            continue;
        }
        if (strlen(ifa->ifa_name) >= AXON_DEV_NAME_MAX) {
            axon_debug("tcp: interface name %s is too long, skipped", ifa->ifa_name);
            continue;
        }
        axon_tcp_resource_init(&resources[count++], ifa, config);
    }
    if (count == 0) {
        axon_debug("tcp: no usable network interface (up, with an IPv4 address)");
        free(resources);
        resources = NULL;
    }
    *resources_p = resources;
    *count_p     = count;

out:
    freeifaddrs(ifa_list);
    return status;
}

AXON_COMPONENT_EXPORT const axon_component_t AXON_COMPONENT_SYMBOL = {
    .abi_version   = AXON_COMPONENT_ABI_VERSION,
    .name          = "tcp",
    .description   = "any host: kernel TCP sockets, non-blocking, driven by epoll",
    .config_prefix = "TCP_",
    .config_table  = axon_tcp_config_table,
    .config_size   = sizeof(axon_tcp_config_t),
    .query         = axon_tcp_query,
    .iface_open    = axon_tcp_iface_open,
};
