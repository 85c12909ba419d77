/* rdmacm iface: open (rc's queues on the CM's device, a listening id), close, addresses, eps. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "rdmacm.h"

static void axon_rdmacm_iface_close(axon_iface_t *tl_iface);

uint64_t axon_rdmacm_netns(void)
{
    struct stat st;

    return (stat("/proc/self/ns/net", &st) == 0) ? (uint64_t)st.st_ino : 0;
}

static int axon_rdmacm_is_loopback(uint32_t ip)
{
    return (ntohl(ip) >> 24) == IN_LOOPBACKNET;
}

/* ------------------------------------------------------------ addresses */

static axon_status_t axon_rdmacm_iface_get_address(axon_iface_t *tl_iface, void *dev_addr,
                                                   void *iface_addr)
{
    axon_rdmacm_iface_t *iface = (axon_rdmacm_iface_t *)tl_iface;
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

static int axon_rdmacm_iface_is_reachable(axon_iface_t *tl_iface, const void *dev_addr,
                                          const void *iface_addr)
{
    axon_rdmacm_dev_addr_t dev;
    axon_rdmacm_iface_addr_t ifa;

    if ((dev_addr == NULL) || (iface_addr == NULL)) {
        return 0;
    }
    memcpy(&dev, dev_addr, sizeof(dev));
    memcpy(&ifa, iface_addr, sizeof(ifa));
    return axon_rdmacm_check_peer((axon_rdmacm_iface_t *)tl_iface, &dev, &ifa,
                                  AXON_LOG_DEBUG) == AXON_OK;
}

/* ------------------------------------------------------------ endpoints */

static axon_status_t axon_rdmacm_ep_create(axon_iface_t *tl_iface, uint64_t peer_uuid,
                                           const void *dev_addr, const void *iface_addr,
                                           axon_tl_ep_t **ep_p)
{
    axon_rdmacm_iface_t *iface = (axon_rdmacm_iface_t *)tl_iface;
    axon_rdmacm_dev_addr_t dev;
    axon_rdmacm_iface_addr_t ifa;
    struct sockaddr_in dst;
    axon_rc_conn_t *conn;
    axon_status_t status;

    if ((dev_addr == NULL) || (iface_addr == NULL) || (ep_p == NULL)) {
        axon_error("%s: ep_create: NULL %s", iface->rc.name,
                   (dev_addr == NULL) ? "device address" :
                   (iface_addr == NULL) ? "iface address" : "ep_p");
        return AXON_ERR_INVALID_PARAM;
    }
    memcpy(&dev, dev_addr, sizeof(dev));
    memcpy(&ifa, iface_addr, sizeof(ifa));
    status = axon_rdmacm_check_peer(iface, &dev, &ifa, AXON_LOG_ERROR);
    if (status != AXON_OK) {
        return status;
    }
    /* one connection per pair of workers: a later ep (ours or the peer's) reuses it */
    conn = axon_rc_conn_by_uuid(&iface->rc, peer_uuid);
    if (conn == NULL) {
        memset(&dst, 0, sizeof(dst));
        dst.sin_family      = AF_INET;
        dst.sin_addr.s_addr = dev.ip;
        dst.sin_port        = ifa.port;
        status = axon_rdmacm_cm_connect(iface, peer_uuid, &dst, &conn);
        if (status != AXON_OK) {
            return status;
        }
    }
    return axon_rc_adopt_ep_new(&iface->rc, conn, peer_uuid, ep_p);
}

/* ------------------------------------------------------------ progress */

static unsigned axon_rdmacm_iface_progress(axon_iface_t *tl_iface)
{
    axon_rdmacm_iface_t *iface = (axon_rdmacm_iface_t *)tl_iface;
    unsigned events = iface->rc_ops->iface_progress(tl_iface);

    /* no system call per message: the channel is read while connecting, else now and then */
    if ((iface->rc.hs_waiting > 0) || (--iface->cm_skip == 0)) {
        iface->cm_skip = AXON_RDMACM_CM_INTERVAL;
        events += axon_rdmacm_cm_progress(iface);
    }
    return events;
}

static const axon_iface_ops_t axon_rdmacm_iface_ops = {
    .iface_close        = axon_rdmacm_iface_close,
    .iface_progress     = axon_rdmacm_iface_progress,
    .dev_addr_len       = sizeof(axon_rdmacm_dev_addr_t),
    .iface_addr_len     = sizeof(axon_rdmacm_iface_addr_t),
    .iface_get_address  = axon_rdmacm_iface_get_address,
    .iface_is_reachable = axon_rdmacm_iface_is_reachable,
    .ep_create          = axon_rdmacm_ep_create,
    /* the data path is rc's */
    .ep_destroy         = axon_rc_ep_destroy,
    .ep_am_short        = axon_rc_ep_am_short,
    .ep_am_bcopy        = axon_rc_ep_am_bcopy,
    .ep_am_zcopy        = NULL,
    .ep_get_zcopy       = axon_rc_ep_get_zcopy,
    .ep_put_zcopy       = axon_rc_ep_put_zcopy,
    .ep_flush           = axon_rc_ep_flush,
    .ep_check           = axon_rc_ep_check,
    .rkey_max_len       = sizeof(axon_rc_rkey_t),
    .mem_reg            = axon_rc_mem_reg,
    .mem_dereg          = axon_rc_mem_dereg,
    .rkey_pack          = axon_rc_rkey_pack,
    .ep_atomic          = axon_rc_ep_atomic,
};

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

axon_status_t axon_rdmacm_iface_open(const axon_resource_t *resource,
                                     const axon_rdmacm_config_t *config,
                                     const axon_iface_params_t *params, axon_iface_t **iface_p)
{
    static const axon_rc_iface_ext_t ext = {
        .iface_size    = sizeof(axon_rdmacm_iface_t),
        .dev_open      = axon_rc_adopt_dev_open,
        .dev_close     = axon_rc_adopt_dev_close,
        .conn_teardown = axon_rc_adopt_teardown,
    };
    axon_rdmacm_iface_t *iface;
    axon_rc_config_t rc_config;
    axon_iface_t *tl_iface;
    axon_status_t status;

    if ((status = axon_rdmacm_rc_config(&rc_config)) != AXON_OK) {
        return status;
    }
    status = axon_rc_iface_open_ext(resource, &rc_config, params, &ext, &tl_iface);
    if (status != AXON_OK) {
        return status;
    }
    iface             = (axon_rdmacm_iface_t *)tl_iface;
    iface->rc_config  = rc_config;
    iface->rc.config  = &iface->rc_config;
    iface->rc_ops     = tl_iface->ops;
    tl_iface->ops     = &axon_rdmacm_iface_ops;
    iface->host_id    = axon_sys_host_id();
    iface->netns      = axon_rdmacm_netns();
    iface->timeout_ms = (int)(config->resolve_timeout * 1000.0);
    iface->cm_skip    = AXON_RDMACM_CM_INTERVAL;
    snprintf(iface->rc.name, sizeof(iface->rc.name), "rdmacm/%s", resource->dev_name);

    if (((status = axon_rdmacm_local_ip(iface, config->addr)) != AXON_OK) ||
        (inet_ntop(AF_INET, &iface->addr.sin_addr, iface->addr_str,
                   sizeof(iface->addr_str)) == NULL) ||
        ((status = axon_rdmacm_listen(iface, config)) != AXON_OK)) {
        axon_rdmacm_iface_close(tl_iface);
        return (status != AXON_OK) ? status : AXON_ERR_INVALID_PARAM;
    }
    axon_debug("%s: listening on %s:%u", iface->rc.name, iface->addr_str,
               ntohs(iface->addr.sin_port));
    *iface_p = tl_iface;
    return AXON_OK;
}

static void axon_rdmacm_iface_close(axon_iface_t *tl_iface)
{
    axon_rdmacm_iface_t *iface       = (axon_rdmacm_iface_t *)tl_iface;
    axon_dev_cm_channel_t *channel   = iface->channel;
    int ret;

    if (iface->listen_id != NULL) {
        axon_dev_cm_destroy_id(iface->listen_id);
    }
    /* rc's close says goodbye, frees the connections (their ids) and the iface */
    iface->rc_ops->iface_close(tl_iface);
    if ((channel != NULL) && ((ret = axon_dev_cm_destroy_event_channel(channel)) != 0)) {
        axon_warn("rdmacm: destroy_event_channel: %s", strerror(ret));
    }
}
