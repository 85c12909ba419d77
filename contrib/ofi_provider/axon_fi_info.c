/* The provider's entry point (fi_prov_ini) and fi_getinfo: what it offers, matched to hints. */
#include <stdlib.h>
#include <string.h>
#include "axon_fi.h"

#define AXON_FI_TX_CAPS   (FI_MSG | FI_TAGGED | FI_SEND | FI_RMA | FI_ATOMIC | FI_READ | \
                           FI_WRITE)
#define AXON_FI_RX_CAPS   (FI_MSG | FI_TAGGED | FI_RECV | FI_DIRECTED_RECV | FI_SOURCE | \
                           FI_MULTI_RECV | FI_RMA | FI_ATOMIC | FI_REMOTE_READ | \
                           FI_REMOTE_WRITE | FI_RMA_EVENT)
/* Capabilities with a cost (a message per remote access): only when asked for. */
#define AXON_FI_CAPS_ASKED FI_RMA_EVENT
/* What takes the reserved tag bit 63: untagged messages, RMA events, and remote CQ data
 * of writes to an RMA target (axon_fi_caps_rma_target). */
#define AXON_FI_CAPS_TAG63 (FI_MSG | FI_RMA_EVENT)
/* mr_mode bits the provider honours when hints offer them (FI_MR_BASIC's among them). */
#define AXON_FI_MR_MODES  (FI_MR_VIRT_ADDR | FI_MR_PROV_KEY)
/* Capabilities returned even when not asked for: they cost nothing. */
#define AXON_FI_CAPS_FREE (FI_LOCAL_COMM | FI_REMOTE_COMM)
#define AXON_FI_CAPS      (AXON_FI_TX_CAPS | AXON_FI_RX_CAPS | AXON_FI_CAPS_FREE)
#define AXON_FI_MSG_ORDER FI_ORDER_SAS      /* one sender to one receiver match in order */
#define AXON_FI_TX_FLAGS  (FI_COMPLETION | FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE | \
                           FI_DELIVERY_COMPLETE | FI_INJECT)
#define AXON_FI_RX_FLAGS  (FI_COMPLETION | FI_MULTI_RECV)
/* mem_tag_format: all 64 tag bits; 63 when untagged messages take bit 63 (FI_MSG too). */
#define AXON_FI_TAG_FORMAT_64 0xaaaaaaaaaaaaaaaaull
#define AXON_FI_TAG_FORMAT_63 0x5555555555555555ull

static void axon_fi_cleanup(void)
{
}

struct fi_provider axon_fi_prov = {
    .version    = AXON_FI_PROV_VERSION,
    .fi_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION),
    .name       = AXON_FI_PROV_NAME,
    .getinfo    = axon_fi_getinfo,
    .fabric     = axon_fi_fabric_open,
    .cleanup    = axon_fi_cleanup,
};

FI_EXT_INI
{
    fi_param_define(&axon_fi_prov, "iface", FI_PARAM_STRING,
                    "IPv4 interface whose address goes into endpoint names (default: the first "
                    "one up that is not loopback)");
    fi_param_define(&axon_fi_prov, "mr_share", FI_PARAM_STRING,
                    "move registered regions' whole pages into memory processes on the host "
                    "share, so their RMA is loads and stores: auto (default: in domains whose "
                    "keys the application picks and addresses are offsets, as SHMEM libraries "
                    "register their heap and data), 1 (every region), 0 (none)");
    fi_param_define(&axon_fi_prov, "rma_event_slots", FI_PARAM_INT,
                    "FI_RMA_EVENT: regions per domain whose remote accesses are counted by "
                    "atomic adds to words at the target endpoint (default 256; beyond, and "
                    "with 0, by a message each)");
    return &axon_fi_prov;
}

/* Axon status -> libfabric error, as data. */
static const struct {
    axon_status_t status;
    int           err;
} axon_fi_errnos[] = {
    {AXON_ERR_NO_MESSAGE,       FI_ENOMSG},
    {AXON_ERR_NO_RESOURCE,      FI_EAGAIN},
    {AXON_ERR_IO_ERROR,         FI_EIO},
    {AXON_ERR_NO_MEMORY,        FI_ENOMEM},
    {AXON_ERR_INVALID_PARAM,    FI_EINVAL},
    {AXON_ERR_UNREACHABLE,      FI_EHOSTUNREACH},
    {AXON_ERR_INVALID_ADDR,     FI_EADDRNOTAVAIL},
    {AXON_ERR_UNSUPPORTED,      FI_ENOSYS},
    {AXON_ERR_MSG_TRUNCATED,    FI_ETRUNC},
    {AXON_ERR_NO_DEVICE,        FI_ENODEV},
    {AXON_ERR_BUSY,             FI_EBUSY},
    {AXON_ERR_CANCELED,         FI_ECANCELED},
    {AXON_ERR_CONNECTION_RESET, FI_ECONNRESET},
    {AXON_ERR_ENDPOINT_TIMEOUT, FI_ETIMEDOUT},
    {AXON_ERR_TIMED_OUT,        FI_ETIMEDOUT},
    {AXON_ERR_NOT_FOUND,        FI_ENOENT},
    {AXON_ERR_NO_ELEM,          FI_ENODATA},
    {AXON_ERR_IO_FORMAT,        FI_EINVAL},
    {AXON_ERR_REMOTE_ACCESS,    FI_EACCES},
};

int axon_fi_errno(axon_status_t status)
{
    size_t i;

    for (i = 0; i < sizeof(axon_fi_errnos) / sizeof(axon_fi_errnos[0]); ++i) {
        if (axon_fi_errnos[i].status == status) {
            return axon_fi_errnos[i].err;
        }
    }
    return FI_EOTHER;
}

/* ---------------------------------------------------------------- hints */

#define AXON_FI_REJECT(_what, _fmt, ...) \
    do { \
        AXON_FI_INFO(FI_LOG_CORE, "hints: %s " _fmt " not supported", _what, __VA_ARGS__); \
        return -FI_ENODATA; \
    } while (0)

static int axon_fi_check_tx(const struct fi_tx_attr *tx)
{
    if (tx->caps & ~AXON_FI_CAPS) {
        AXON_FI_REJECT("tx_attr->caps", "0x%llx", (unsigned long long)(tx->caps & ~AXON_FI_CAPS));
    }
    if (tx->msg_order & ~AXON_FI_MSG_ORDER) {
        AXON_FI_REJECT("tx_attr->msg_order", "0x%llx", (unsigned long long)tx->msg_order);
    }
    if (tx->comp_order & ~FI_ORDER_NONE) {
        AXON_FI_REJECT("tx_attr->comp_order", "0x%llx", (unsigned long long)tx->comp_order);
    }
    if (tx->op_flags & ~(uint64_t)(AXON_FI_TX_FLAGS | FI_FENCE)) {
        AXON_FI_REJECT("tx_attr->op_flags", "0x%llx", (unsigned long long)tx->op_flags);
    }
    if (tx->inject_size > AXON_FI_INJECT_SIZE) {
        AXON_FI_REJECT("tx_attr->inject_size", "%zu", tx->inject_size);
    }
    if (tx->iov_limit > AXON_FI_IOV_LIMIT) {
        AXON_FI_REJECT("tx_attr->iov_limit", "%zu", tx->iov_limit);
    }
    if (tx->rma_iov_limit > AXON_FI_RMA_IOV_LIMIT) {
        AXON_FI_REJECT("tx_attr->rma_iov_limit", "%zu", tx->rma_iov_limit);
    }
    return 0;
}

static int axon_fi_check_rx(const struct fi_rx_attr *rx)
{
    if (rx->caps & ~AXON_FI_CAPS) {
        AXON_FI_REJECT("rx_attr->caps", "0x%llx", (unsigned long long)(rx->caps & ~AXON_FI_CAPS));
    }
    if (rx->msg_order & ~AXON_FI_MSG_ORDER) {
        AXON_FI_REJECT("rx_attr->msg_order", "0x%llx", (unsigned long long)rx->msg_order);
    }
    if (rx->comp_order & ~FI_ORDER_NONE) {
        AXON_FI_REJECT("rx_attr->comp_order", "0x%llx", (unsigned long long)rx->comp_order);
    }
    if (rx->op_flags & ~AXON_FI_RX_FLAGS) {
        AXON_FI_REJECT("rx_attr->op_flags", "0x%llx", (unsigned long long)rx->op_flags);
    }
    if (rx->iov_limit > AXON_FI_IOV_LIMIT) {
        AXON_FI_REJECT("rx_attr->iov_limit", "%zu", rx->iov_limit);
    }
    return 0;
}

static int axon_fi_check_domain(uint32_t version, const struct fi_domain_attr *dom)
{
    if ((dom->name != NULL) && strcmp(dom->name, AXON_FI_DOMAIN_NAME)) {
        AXON_FI_REJECT("domain_attr->name", "'%s'", dom->name);
    }
    if ((dom->av_type != FI_AV_UNSPEC) && (dom->av_type != FI_AV_MAP) &&
        (dom->av_type != FI_AV_TABLE)) {
        AXON_FI_REJECT("domain_attr->av_type", "%d", (int)dom->av_type);
    }
    if (dom->cq_data_size > AXON_FI_CQ_DATA_SIZE) {
        AXON_FI_REJECT("domain_attr->cq_data_size", "%zu", dom->cq_data_size);
    }
    if (dom->caps & ~(AXON_FI_CAPS_FREE)) {
        AXON_FI_REJECT("domain_attr->caps", "0x%llx", (unsigned long long)dom->caps);
    }
    if ((dom->max_ep_stx_ctx > 0) || (dom->max_ep_srx_ctx > 0)) {
        AXON_FI_REJECT("domain_attr shared contexts", "%zu/%zu", dom->max_ep_stx_ctx,
                       dom->max_ep_srx_ctx);
    }
    if (dom->mr_key_size > AXON_FI_MR_KEY_SIZE) {
        AXON_FI_REJECT("domain_attr->mr_key_size", "%zu", dom->mr_key_size);
    }
    (void)version;  /* any mr_mode: both addressings and both key choices are served */
    return 0;
}

static int axon_fi_info_tag63(uint64_t caps)
{
    return (caps & FI_TAGGED) && ((caps & AXON_FI_CAPS_TAG63) || axon_fi_caps_rma_target(caps));
}

static int axon_fi_info_is_name(const void *addr, size_t len)
{
    return (len == sizeof(axon_fi_name_t)) &&
           (((const axon_fi_name_t *)addr)->sin_family == AF_INET);
}

static int axon_fi_check_hints(uint32_t version, const struct fi_info *hints)
{
    int ret;

    if (hints->caps & ~AXON_FI_CAPS) {
        AXON_FI_REJECT("caps", "0x%llx", (unsigned long long)(hints->caps & ~AXON_FI_CAPS));
    }
    if ((hints->addr_format != FI_FORMAT_UNSPEC) && (hints->addr_format != FI_SOCKADDR) &&
        (hints->addr_format != FI_SOCKADDR_IN)) {
        AXON_FI_REJECT("addr_format", "%u (names are FI_SOCKADDR_IN)", hints->addr_format);
    }
    if (((hints->src_addr != NULL) && !axon_fi_info_is_name(hints->src_addr,
                                                             hints->src_addrlen)) ||
        ((hints->dest_addr != NULL) && !axon_fi_info_is_name(hints->dest_addr,
                                                              hints->dest_addrlen))) {
        AXON_FI_REJECT("src_addr/dest_addr", "of %zu/%zu bytes (not AF_INET)",
                       hints->src_addrlen, hints->dest_addrlen);
    }
    if (axon_fi_info_tag63(hints->caps) && (hints->ep_attr != NULL) &&
        (hints->ep_attr->mem_tag_format & AXON_FI_MSG_TAG)) {
        AXON_FI_REJECT("mem_tag_format", "0x%llx with FI_MSG, FI_RMA_EVENT or FI_RMA as a "
                       "write target (bit 63 is untagged messages', RMA events' and remote "
                       "CQ data's)", (unsigned long long)hints->ep_attr->mem_tag_format);
    }
    if (hints->ep_attr != NULL) {
        const struct fi_ep_attr *ep = hints->ep_attr;
        if ((ep->type != FI_EP_UNSPEC) && (ep->type != FI_EP_RDM)) {
            AXON_FI_REJECT("ep_attr->type", "%d", (int)ep->type);
        }
        if (ep->protocol != FI_PROTO_UNSPEC) {
            AXON_FI_REJECT("ep_attr->protocol", "%u", ep->protocol);
        }
        if (ep->max_msg_size > AXON_FI_MAX_MSG_SIZE) {
            AXON_FI_REJECT("ep_attr->max_msg_size", "%zu", ep->max_msg_size);
        }
        if ((ep->tx_ctx_cnt > 1) || (ep->rx_ctx_cnt > 1)) {
            AXON_FI_REJECT("ep_attr tx/rx contexts", "%zu/%zu", ep->tx_ctx_cnt, ep->rx_ctx_cnt);
        }
    }
    if ((hints->fabric_attr != NULL) && (hints->fabric_attr->name != NULL) &&
        strcmp(hints->fabric_attr->name, AXON_FI_FABRIC_NAME)) {
        AXON_FI_REJECT("fabric_attr->name", "'%s'", hints->fabric_attr->name);
    }
    if ((hints->domain_attr != NULL) &&
        ((ret = axon_fi_check_domain(version, hints->domain_attr)) != 0)) {
        return ret;
    }
    if ((hints->tx_attr != NULL) && ((ret = axon_fi_check_tx(hints->tx_attr)) != 0)) {
        return ret;
    }
    if ((hints->rx_attr != NULL) && ((ret = axon_fi_check_rx(hints->rx_attr)) != 0)) {
        return ret;
    }
    return 0;
}

/* ---------------------------------------------------------------- answer */

static void axon_fi_info_fill(struct fi_info *info, uint64_t caps)
{
    info->caps        = caps;
    info->mode        = 0;
    info->addr_format = FI_SOCKADDR_IN;

    info->tx_attr->caps          = caps & AXON_FI_TX_CAPS;
    info->tx_attr->op_flags      = 0;
    info->tx_attr->msg_order     = AXON_FI_MSG_ORDER;
    info->tx_attr->comp_order    = FI_ORDER_NONE;
    info->tx_attr->inject_size   = AXON_FI_INJECT_SIZE;
    info->tx_attr->size          = AXON_FI_TX_SIZE;
    info->tx_attr->iov_limit     = AXON_FI_IOV_LIMIT;
    info->tx_attr->rma_iov_limit = (caps & FI_RMA) ? AXON_FI_RMA_IOV_LIMIT : 0;

    info->rx_attr->caps                = caps & AXON_FI_RX_CAPS;
    info->rx_attr->op_flags            = 0;
    info->rx_attr->msg_order           = AXON_FI_MSG_ORDER;
    info->rx_attr->comp_order          = FI_ORDER_NONE;
    info->rx_attr->total_buffered_recv = 0;
    info->rx_attr->size                = AXON_FI_RX_SIZE;
    info->rx_attr->iov_limit           = AXON_FI_IOV_LIMIT;

    info->ep_attr->type            = FI_EP_RDM;
    info->ep_attr->protocol        = FI_PROTO_UNSPEC;
    info->ep_attr->protocol_version = 1;
    info->ep_attr->max_msg_size    = AXON_FI_MAX_MSG_SIZE;
    info->ep_attr->msg_prefix_size = 0;
    info->ep_attr->mem_tag_format  = axon_fi_info_tag63(caps) ? AXON_FI_TAG_FORMAT_63 :
                                                                AXON_FI_TAG_FORMAT_64;
    info->ep_attr->tx_ctx_cnt      = 1;
    info->ep_attr->rx_ctx_cnt      = 1;

    info->domain_attr->threading        = FI_THREAD_DOMAIN;
    info->domain_attr->control_progress = FI_PROGRESS_MANUAL;
    info->domain_attr->data_progress    = FI_PROGRESS_MANUAL;
    info->domain_attr->resource_mgmt    = FI_RM_ENABLED;
    info->domain_attr->av_type          = FI_AV_UNSPEC;
    info->domain_attr->mr_mode          = 0;
    info->domain_attr->mr_key_size      = (caps & (FI_RMA | FI_ATOMIC)) ? AXON_FI_MR_KEY_SIZE :
                                                                           0;
    info->domain_attr->cq_data_size     = AXON_FI_CQ_DATA_SIZE;
    info->domain_attr->cq_cnt           = 256;
    info->domain_attr->ep_cnt           = AXON_FI_EP_CNT;
    info->domain_attr->tx_ctx_cnt       = AXON_FI_EP_CNT;
    info->domain_attr->rx_ctx_cnt       = AXON_FI_EP_CNT;
    info->domain_attr->max_ep_tx_ctx    = 1;
    info->domain_attr->max_ep_rx_ctx    = 1;
    info->domain_attr->mr_iov_limit     = 1;
    info->domain_attr->caps             = AXON_FI_CAPS_FREE;
    info->domain_attr->mode             = 0;
    info->domain_attr->max_err_data     = 0;
    info->domain_attr->mr_cnt           = 65536;
    info->domain_attr->cntr_cnt         = AXON_FI_CNTR_CNT;

    info->fabric_attr->prov_version = AXON_FI_PROV_VERSION;
}

/* Narrow the answer to what the hints asked for, where they may choose. */
static void axon_fi_info_apply(uint32_t version, struct fi_info *info,
                               const struct fi_info *hints)
{
    const struct fi_domain_attr *dom = hints->domain_attr;

    if (dom != NULL) {
        if (dom->threading != FI_THREAD_UNSPEC) {
            info->domain_attr->threading = dom->threading;
        }
        if (dom->data_progress == FI_PROGRESS_AUTO) {
            /* a progress thread per domain (axon_fi_progress.c) */
            info->domain_attr->data_progress = FI_PROGRESS_AUTO;
        }
        if (dom->control_progress == FI_PROGRESS_AUTO) {
            /* control operations (AV inserts, ...) finish inside the call */
            info->domain_attr->control_progress = FI_PROGRESS_AUTO;
        }
        if (dom->av_type != FI_AV_UNSPEC) {
            info->domain_attr->av_type = dom->av_type;
        }
        if (dom->resource_mgmt != FI_RM_UNSPEC) {
            info->domain_attr->resource_mgmt = dom->resource_mgmt;
        }
        /* Old API: FI_MR_BASIC / FI_MR_SCALABLE are modes, not bits; echo them. Else
         * virtual addresses and provider keys when offered (what RMA then follows). */
        if ((dom->mr_mode == FI_MR_BASIC) || (dom->mr_mode == FI_MR_SCALABLE)) {
            info->domain_attr->mr_mode = dom->mr_mode;
        } else if (FI_VERSION_LT(version, FI_VERSION(1, 5))) {
            info->domain_attr->mr_mode = FI_MR_SCALABLE;
        } else {
            info->domain_attr->mr_mode = dom->mr_mode & AXON_FI_MR_MODES;
        }
    }
    if ((hints->ep_attr != NULL) && (hints->ep_attr->mem_tag_format != 0)) {
        info->ep_attr->mem_tag_format = hints->ep_attr->mem_tag_format;
    }
    if (hints->tx_attr != NULL) {
        info->tx_attr->op_flags = hints->tx_attr->op_flags;
    }
    if (hints->rx_attr != NULL) {
        info->rx_attr->op_flags = hints->rx_attr->op_flags;
    }
}

static int axon_fi_info_set_addr(void **addr_p, size_t *len_p, const axon_fi_name_t *name)
{
    *addr_p = malloc(sizeof(*name));
    if (*addr_p == NULL) {
        return -FI_ENOMEM;
    }
    memcpy(*addr_p, name, sizeof(*name));
    *len_p = sizeof(*name);
    return 0;
}

/*
 * Addresses, as libfabric defines node/service/FI_SOURCE: with FI_SOURCE
 * they are where the endpoint will be reached (its address server listens
 * there when a port is given); without, the peer to talk to (dest_addr: the
 * endpoint served there, id 0) while src_addr comes from the hints or is
 * this host's. Either way src_addr is set.
 */
static int axon_fi_info_addrs(const char *node, const char *service, uint64_t flags,
                              const struct fi_info *hints, struct fi_info *info)
{
    axon_fi_name_t src, dest;
    int have_dest = 0, ret;

    if (flags & FI_SOURCE) {
        ret = axon_fi_name_resolve(node, service, &src);
    } else {
        if ((hints != NULL) && (hints->src_addr != NULL)) {
            memcpy(&src, hints->src_addr, sizeof(src));
            ret = 0;
        } else {
            ret = axon_fi_name_resolve(NULL, NULL, &src);
        }
        if ((ret == 0) && ((node != NULL) || (service != NULL))) {
            ret = axon_fi_name_resolve(node, service, &dest);
            have_dest = 1;
        } else if ((ret == 0) && (hints != NULL) && (hints->dest_addr != NULL)) {
            memcpy(&dest, hints->dest_addr, sizeof(dest));
            have_dest = 1;
        }
    }
    if (ret != 0) {
        return ret;
    }
    ret = axon_fi_info_set_addr(&info->src_addr, &info->src_addrlen, &src);
    if ((ret == 0) && have_dest) {
        ret = axon_fi_info_set_addr(&info->dest_addr, &info->dest_addrlen, &dest);
    }
    return ret;
}

int axon_fi_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
                    const struct fi_info *hints, struct fi_info **info_p)
{
    struct fi_info *info;
    uint64_t caps = AXON_FI_CAPS & ~(uint64_t)AXON_FI_CAPS_ASKED;
    int ret;

    if (hints != NULL) {
        ret = axon_fi_check_hints(version, hints);
        if (ret != 0) {
            return ret;
        }
        if (hints->caps != 0) {
            caps = hints->caps | AXON_FI_CAPS_FREE;
            if (caps & (FI_RMA | FI_ATOMIC)) {
                /* FI_RMA or FI_ATOMIC alone means every direction (fi_getinfo(3)). */
                if (!(caps & (FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE))) {
                    caps |= FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
                }
            }
        } else if ((hints->ep_attr != NULL) &&
                   (hints->ep_attr->mem_tag_format & AXON_FI_MSG_TAG)) {
            /* all 64 tag bits were asked for: nothing that takes bit 63 */
            caps &= ~(uint64_t)(AXON_FI_CAPS_TAG63 | FI_MULTI_RECV | FI_RMA);
        }
    }

    info = fi_allocinfo();
    if (info == NULL) {
        return -FI_ENOMEM;
    }
    axon_fi_info_fill(info, caps);
    if (hints != NULL) {
        axon_fi_info_apply(version, info, hints);
    }
    ret = axon_fi_info_addrs(node, service, flags, hints, info);
    if (ret == 0) {
        info->fabric_attr->name = strdup(AXON_FI_FABRIC_NAME);
        info->domain_attr->name = strdup(AXON_FI_DOMAIN_NAME);
        if ((info->fabric_attr->name == NULL) || (info->domain_attr->name == NULL)) {
            ret = -FI_ENOMEM;
        }
    }
    if (ret != 0) {
        fi_freeinfo(info);
        return ret;
    }
    *info_p = info;
    return 0;
}
