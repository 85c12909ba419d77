/* rdmacm as rc's connection manager: addresses, connections to peers, the listening id. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "rdmacm.h"

static uint64_t axon_rdmacm_netns(void)
{
    struct stat st;

    return (stat("/proc/self/ns/net", &st) == 0) ? (uint64_t)st.st_ino : 0;
}

static int axon_rdmacm_is_loopback(uint32_t ip)
{
    return (ntohl(ip) >> 24) == IN_LOOPBACKNET;
}

/* ------------------------------------------------------------ addresses */

static axon_status_t axon_rdmacm_get_address(axon_rc_iface_t *rc_iface, void *dev_addr,
                                             void *iface_addr)
{
    axon_rdmacm_iface_t *iface = (axon_rdmacm_iface_t *)rc_iface;
    axon_rdmacm_dev_addr_t dev;
    axon_rdmacm_iface_addr_t ifa;

    dev.ip      = iface->addr.sin_addr.s_addr;
    dev.host_id = iface->host_id;
    dev.netns   = iface->netns;
    ifa.port    = iface->addr.sin_port;
    memcpy(dev_addr, &dev, sizeof(dev));
    memcpy(iface_addr, &ifa, sizeof(ifa));
    return AXON_OK;
}

/* AXON_OK if the peer at dev/ifa may be reachable (the CM decides the rest). */
static axon_status_t axon_rdmacm_check_peer(const axon_rdmacm_iface_t *iface,
                                            const axon_rdmacm_dev_addr_t *dev,
                                            const axon_rdmacm_iface_addr_t *ifa,
                                            axon_log_level_t level)
{
    char ip[INET_ADDRSTRLEN] = "?";
    int same_stack = (dev->host_id == iface->host_id) && (dev->netns == iface->netns);

    inet_ntop(AF_INET, &dev->ip, ip, sizeof(ip));
    if ((dev->ip == htonl(INADDR_ANY)) || (dev->ip == htonl(INADDR_BROADCAST)) ||
        (ifa->port == 0)) {
        axon_log(level, "%s: malformed peer address %s:%u", iface->rc.name, ip, ntohs(ifa->port));
        return AXON_ERR_INVALID_ADDR;
    }
    if (axon_rdmacm_is_loopback(dev->ip) &&
        (!axon_rdmacm_is_loopback(iface->addr.sin_addr.s_addr) || !same_stack)) {
        /* every host and network namespace has its own 127.0.0.1 */
        axon_log(level, "%s: peer address %s is the loopback of another host or namespace",
                 iface->rc.name, ip);
        return AXON_ERR_UNREACHABLE;
    }
    if ((dev->ip == iface->addr.sin_addr.s_addr) && !same_stack) {
        axon_log(level, "%s: peer address %s is our own, on another host", iface->rc.name, ip);
        return AXON_ERR_UNREACHABLE;
    }
    return AXON_OK;
}

static int axon_rdmacm_is_reachable(axon_rc_iface_t *rc_iface, const void *dev_addr,
                                    const void *iface_addr)
{
    axon_rdmacm_dev_addr_t dev;
    axon_rdmacm_iface_addr_t ifa;

    memcpy(&dev, dev_addr, sizeof(dev));
    memcpy(&ifa, iface_addr, sizeof(ifa));
    return axon_rdmacm_check_peer((axon_rdmacm_iface_t *)rc_iface, &dev, &ifa,
                                  AXON_LOG_DEBUG) == AXON_OK;
}

/* ------------------------------------------------------------ connections */

static axon_status_t axon_rdmacm_conn_get(axon_rc_iface_t *rc_iface, uint64_t peer_uuid,
                                          const void *dev_addr, const void *iface_addr,
                                          axon_rc_conn_t **conn_p)
{
    axon_rdmacm_iface_t *iface = (axon_rdmacm_iface_t *)rc_iface;
    axon_rdmacm_dev_addr_t dev;
    axon_rdmacm_iface_addr_t ifa;
    struct sockaddr_in dst;
    axon_status_t status;

    memcpy(&dev, dev_addr, sizeof(dev));
    memcpy(&ifa, iface_addr, sizeof(ifa));
    status = axon_rdmacm_check_peer(iface, &dev, &ifa, AXON_LOG_ERROR);
    if (status != AXON_OK) {
        return status;
    }
    *conn_p = axon_rc_conn_by_uuid(rc_iface, peer_uuid);
    if (*conn_p != NULL) {
        return AXON_OK;
    }
    memset(&dst, 0, sizeof(dst));
    dst.sin_family      = AF_INET;
    dst.sin_addr.s_addr = dev.ip;
    dst.sin_port        = ifa.port;
    return axon_rdmacm_cm_connect(iface, peer_uuid, &dst, conn_p);
}

/* ------------------------------------------------------------ open / close */

/* Our IPv4: AXON_RDMACM_ADDR, or the IPv4-mapped entry of the port's GID table. */
static axon_status_t axon_rdmacm_local_ip(axon_rdmacm_iface_t *iface, const char *addr)
{
    static const uint8_t v4_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    axon_verbs_dev_t *dev = &iface->rc.dev;
    axon_dev_gid_t gid;
    int i;

    if ((addr != NULL) && strcmp(addr, "auto")) {
        if (inet_pton(AF_INET, addr, &iface->addr.sin_addr) != 1) {
            axon_error("AXON_RDMACM_ADDR='%s' is not an IPv4 address or auto", addr);
            return AXON_ERR_INVALID_PARAM;
        }
        return AXON_OK;
    }
    for (i = 0; i < dev->port_attr.gid_tbl_len; ++i) {
        if ((axon_dev_query_gid(dev->ctx, dev->port_num, i, &gid) == 0) &&
            !memcmp(gid.raw, v4_prefix, sizeof(v4_prefix))) {
            memcpy(&iface->addr.sin_addr.s_addr, &gid.raw[12], 4);
            return AXON_OK;
        }
    }
    axon_error("%s: the port has no IPv4 address in its GID table: set AXON_RDMACM_ADDR to "
               "the address of its network interface", iface->rc.name);
    return AXON_ERR_NO_DEVICE;
}

static axon_status_t axon_rdmacm_listen(axon_rdmacm_iface_t *iface,
                                        const axon_rdmacm_config_t *config)
{
    int ret, flags;

    if ((ret = axon_dev_cm_create_event_channel(&iface->channel)) != 0) {
        axon_error("%s: cannot create a CM event channel: %s", iface->rc.name, strerror(ret));
        return AXON_ERR_IO_ERROR;
    }
    flags = fcntl(iface->channel->fd, F_GETFL);
    if ((flags < 0) || (fcntl(iface->channel->fd, F_SETFL, flags | O_NONBLOCK) < 0)) {
        axon_error("%s: cannot make the CM channel non-blocking: %s", iface->rc.name,
                   strerror(errno));
        return AXON_ERR_IO_ERROR;
    }
    if ((ret = axon_dev_cm_create_id(iface->channel, NULL, AXON_DEV_CM_PS_TCP,
                                     &iface->listen_id)) != 0) {
        axon_error("%s: cannot create a CM id: %s", iface->rc.name, strerror(ret));
        return AXON_ERR_IO_ERROR;
    }
    iface->addr.sin_family = AF_INET;
    iface->addr.sin_port   = htons((uint16_t)config->port);
    if ((ret = axon_dev_cm_bind_addr(iface->listen_id,
                                     (const struct sockaddr *)&iface->addr)) != 0) {
        axon_error("%s: cannot bind to %s:%u: %s", iface->rc.name, iface->addr_str,
                   config->port, strerror(ret));
        return AXON_ERR_NO_DEVICE;
    }
    if (iface->listen_id->verbs != iface->rc.dev.ctx) {
        axon_error("%s: address %s belongs to device %s, not to this one", iface->rc.name,
                   iface->addr_str, iface->listen_id->verbs ? iface->listen_id->verbs->name :
                   "(none)");
        return AXON_ERR_NO_DEVICE;
    }
    if ((ret = axon_dev_cm_listen(iface->listen_id, 0)) != 0) {
        axon_error("%s: cannot listen on %s: %s", iface->rc.name, iface->addr_str,
                   strerror(ret));
        return AXON_ERR_IO_ERROR;
    }
    iface->addr.sin_port = axon_dev_cm_src_port(iface->listen_id);
    return AXON_OK;
}

static axon_status_t axon_rdmacm_init(axon_rc_iface_t *rc_iface, const void *cm_config)
{
    axon_rdmacm_iface_t *iface         = (axon_rdmacm_iface_t *)rc_iface;
    const axon_rdmacm_config_t *config = cm_config;
    axon_status_t status;

    iface->host_id    = axon_sys_host_id();
    iface->netns      = axon_rdmacm_netns();
    iface->timeout_ms = (int)(config->resolve_timeout * 1000.0);
    if (((status = axon_rdmacm_local_ip(iface, config->addr)) != AXON_OK) ||
        (inet_ntop(AF_INET, &iface->addr.sin_addr, iface->addr_str,
                   sizeof(iface->addr_str)) == NULL) ||
        ((status = axon_rdmacm_listen(iface, config)) != AXON_OK)) {
        return (status != AXON_OK) ? status : AXON_ERR_INVALID_PARAM;
    }
    axon_debug("%s: listening on %s:%u", iface->rc.name, iface->addr_str,
               ntohs(iface->addr.sin_port));
    return AXON_OK;
}

/* After rc freed the connections (and their ids): the listening id, then the channel. */
static void axon_rdmacm_cleanup(axon_rc_iface_t *rc_iface)
{
    axon_rdmacm_iface_t *iface = (axon_rdmacm_iface_t *)rc_iface;
    int ret;

    if (iface->listen_id != NULL) {
        axon_dev_cm_destroy_id(iface->listen_id);
    }
    if ((iface->channel != NULL) &&
        ((ret = axon_dev_cm_destroy_event_channel(iface->channel)) != 0)) {
        axon_warn("rdmacm: destroy_event_channel: %s", strerror(ret));
    }
}

const axon_rc_cm_t axon_rdmacm_cm = {
    .name           = "rdmacm",
    .iface_size     = sizeof(axon_rdmacm_iface_t),
    .dev_addr_len   = sizeof(axon_rdmacm_dev_addr_t),
    .iface_addr_len = sizeof(axon_rdmacm_iface_addr_t),
    .get_address    = axon_rdmacm_get_address,
    .is_reachable   = axon_rdmacm_is_reachable,
    .dev_open       = axon_rdmacm_dev_open,
    .dev_close      = axon_rdmacm_dev_close,
    .init           = axon_rdmacm_init,
    .cleanup        = axon_rdmacm_cleanup,
    .conn_get       = axon_rdmacm_conn_get,
    .progress       = axon_rdmacm_cm_progress,
    .conn_destroy   = axon_rdmacm_conn_destroy,
};
