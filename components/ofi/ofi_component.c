/* The ofi component: its descriptor, configuration table, provider choice and resource. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ofi.h"
#include "log.h"

/*
 * Estimates for lane selection. A software provider (sockets underneath)
 * pays Axon's own tcp costs plus its emulation layers (rxm, rxd), so it is
 * priced above tcp and never beats shm or tcp; a hardware provider gets
 * the cost of a NIC Axon has no component for.
 */
#define AXON_OFI_SW_LATENCY_NS    30000.0
#define AXON_OFI_SW_OVERHEAD_NS   2000.0
#define AXON_OFI_SW_BANDWIDTH     2000.0    /* MB/s */
#define AXON_OFI_HW_LATENCY_NS    3000.0
#define AXON_OFI_HW_OVERHEAD_NS   500.0
#define AXON_OFI_HW_BANDWIDTH     10000.0   /* MB/s */

/* Provider names listed in an error line */
#define AXON_OFI_PROV_LIST_MAX 512

static const axon_config_entry_t axon_ofi_config_table[] = {
    {"PROVIDER", "auto",
     "libfabric provider ofi runs over: auto (hardware providers in libfabric's order, then "
     "tcp, net, sockets, udp), none (do not look), or a name as fi_info -l lists it "
     "(tcp, psm2, ...; shm from libfabric 1.19); never axon, Axon's own provider",
     offsetof(axon_ofi_config_t, provider), AXON_CONFIG_TYPE_STRING},

    {"SEG_SIZE", "8k",
     "Largest bcopy message, and the size of each send and receive buffer (256..1m)",
     offsetof(axon_ofi_config_t, seg_size), AXON_CONFIG_TYPE_SIZE},

    {"TX_QUEUE_LEN", "128",
     "Send buffers per iface (and get/put operations in flight); none free = the sender "
     "retries after progress",
     offsetof(axon_ofi_config_t, tx_queue_len), AXON_CONFIG_TYPE_UINT},

    {"RX_QUEUE_LEN", "128",
     "Receive buffers each iface keeps posted",
     offsetof(axon_ofi_config_t, rx_queue_len), AXON_CONFIG_TYPE_UINT},

    {"KEEPALIVE_INTERVAL", "1s",
     "How often an iface pings each worker it has endpoints to (software providers report "
     "no error for a killed peer); 0 = never",
     offsetof(axon_ofi_config_t, keepalive_interval), AXON_CONFIG_TYPE_TIME},

    {"KEEPALIVE_TIMEOUT", "30s",
     "A worker that answered no ping for this long is declared failed: operations to it "
     "fail with ENDPOINT_TIMEOUT. Workers answer from their progress, so each must progress "
     "at least this often (a rank computing longer looks dead); at least 2 intervals, "
     "0 = never",
     offsetof(axon_ofi_config_t, keepalive_timeout), AXON_CONFIG_TYPE_TIME},

    {"RMA", "n",
     "Use the provider's FI_RMA (fi_read / fi_write through memory keys) for rendezvous "
     "and for get and put, when it has it. Off by default: with providers that address "
     "by offset (tcp's mr_mode 0) a corrupted key could redirect an access within the "
     "registered region, which the default path (the target checks every access) cannot",
     offsetof(axon_ofi_config_t, rma), AXON_CONFIG_TYPE_BOOL},

    AXON_CONFIG_END
};

/*
 * Providers that emulate a fabric in software over the kernel's sockets or
 * shared memory, best first for "auto". Axon's tcp and shm reach the same
 * peers for less, so their resources are selected only when AXON_TLS names
 * ofi (AXON_CAP_EMULATED). shm reaches one host only, where Axon's shm is
 * better: "auto" leaves it out.
 */
static const struct {
    const char *name;
    int         auto_rank;    /* order for "auto"; 0 = never picked by "auto" */
} axon_ofi_software_provs[] = {
    {"tcp",      1},
    {"net",      2},
    {"sockets",  3},
    {"udp",      4},
    {"shm",      0},
    {"ofi_rxm",  0},   /* utility providers: only as layers over a core one */
    {"ofi_rxd",  0},
    {NULL,       0}
};

/* The core provider of a layered name ("tcp;ofi_rxm" -> "tcp"). */
static void axon_ofi_core_name(const char *prov_name, char *buf, size_t max)
{
    snprintf(buf, max, "%.*s", (int)strcspn(prov_name, ";"), prov_name);
}

/* Is any layer of prov_name Axon's own provider? Then using it would loop. */
static int axon_ofi_prov_is_axon(const char *prov_name)
{
    const char *p = prov_name;
    size_t      len;

    while (*p != '\0') {
        len = strcspn(p, ";");
        if ((len == 4) && !strncmp(p, "axon", 4)) {
            return 1;
        }
        p += len;
        p += (*p == ';');
    }
    return 0;
}

int axon_ofi_prov_is_software(const char *prov)
{
    unsigned i;

    for (i = 0; axon_ofi_software_provs[i].name != NULL; ++i) {
        if (!strcmp(axon_ofi_software_provs[i].name, prov)) {
            return 1;
        }
    }
    return 0;
}

/* Rank for "auto": lower is better; -1 = never chosen by auto. */
static int axon_ofi_auto_rank(const char *core)
{
    unsigned i;

    for (i = 0; axon_ofi_software_provs[i].name != NULL; ++i) {
        if (!strcmp(axon_ofi_software_provs[i].name, core)) {
            return (axon_ofi_software_provs[i].auto_rank > 0) ?
                   axon_ofi_software_provs[i].auto_rank : -1;
        }
    }
    return 0;   /* hardware: before every software provider */
}

int axon_ofi_info_is_local(const struct fi_info *info)
{
    char        core[64];
    const char *fabric = info->fabric_attr->name ? info->fabric_attr->name : "";

    axon_ofi_core_name(info->fabric_attr->prov_name, core, sizeof(core));
    return !strcmp(core, "shm") || !strncmp(fabric, "127.", 4) || !strcmp(fabric, "::1/128");
}

const struct fi_info *axon_ofi_info_pick(const struct fi_info *list)
{
    const struct fi_info *cur;

    for (cur = list; cur != NULL; cur = cur->next) {
        if (!axon_ofi_info_is_local(cur)) {
            return cur;
        }
    }
    return list;
}

axon_status_t axon_ofi_status(ssize_t ret)
{
    switch (-ret) {
    case 0:
        return AXON_OK;
    case FI_EAGAIN:
        return AXON_ERR_NO_RESOURCE;
    case FI_ENOMEM:
        return AXON_ERR_NO_MEMORY;
    case FI_ECANCELED:
        return AXON_ERR_CANCELED;
    case FI_ETIMEDOUT:
        return AXON_ERR_ENDPOINT_TIMEOUT;
    case FI_EACCES:
    case FI_EPERM:
    case FI_EKEYREJECTED:
        return AXON_ERR_REMOTE_ACCESS;
    case FI_EHOSTUNREACH:
    case FI_ENETUNREACH:
    case FI_EADDRNOTAVAIL:
        return AXON_ERR_UNREACHABLE;
    case FI_ECONNREFUSED:
    case FI_ECONNRESET:
    case FI_ECONNABORTED:
    case FI_ENOTCONN:
    case FI_ESHUTDOWN:
    case EPIPE:
    case FI_EIO:
        return AXON_ERR_CONNECTION_RESET;
    case FI_ENOSYS:
    case FI_EOPNOTSUPP:
        return AXON_ERR_UNSUPPORTED;
    default:
        return AXON_ERR_IO_ERROR;
    }
}

static struct fi_info *axon_ofi_hints(const char *prov, int want_rma)
{
    struct fi_info *hints = fi_dupinfo(NULL);  /* fi_allocinfo */

    if (hints == NULL) {
        return NULL;
    }
    hints->ep_attr->type          = FI_EP_RDM;
    hints->caps                   = FI_MSG | FI_TAGGED;
    if (want_rma) {
        hints->caps |= FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
    }
    /* What we can live with: our op contexts have room, and most MR modes. */
    hints->mode                   = FI_CONTEXT | FI_CONTEXT2;
    /* Not FI_MR_ENDPOINT, and thread safe: one domain serves every worker (ofi_md.c). */
    hints->domain_attr->mr_mode   = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY |
                                    FI_MR_ALLOCATED;
    hints->domain_attr->threading = FI_THREAD_SAFE;
    hints->domain_attr->av_type   = FI_AV_TABLE;
    /* AM_ORDERED: messages to one peer arrive in send order. */
    hints->tx_attr->msg_order     = FI_ORDER_SAS;
    hints->rx_attr->msg_order     = FI_ORDER_SAS;
    if (prov != NULL) {
        hints->fabric_attr->prov_name = strdup(prov);
        if (hints->fabric_attr->prov_name == NULL) {
            fi_freeinfo(hints);
            return NULL;
        }
    }
    return hints;
}

int axon_ofi_getinfo(const char *prov, int want_rma, struct fi_info **info_p)
{
    struct fi_info *hints = axon_ofi_hints(prov, want_rma);
    struct fi_info *info  = NULL;
    int             ret;

    if (hints == NULL) {
        return -FI_ENOMEM;
    }
    ret = fi_getinfo(AXON_OFI_FI_VERSION, NULL, NULL, 0, hints, &info);
    fi_freeinfo(hints);
    if ((ret == 0) && (info == NULL)) {
        ret = -FI_ENODATA;
    }
    if (ret == 0) {
        *info_p = info;
    }
    return ret;
}

/* Every provider libfabric knows (whether or not it has a device here), for errors. */
static void axon_ofi_known_provs(char *buf, size_t max, int *found, const char *want)
{
    struct fi_info *list = NULL, *cur;
    char            core[64];
    size_t          len  = 0;
    int             ret;

    buf[0] = '\0';
    *found = 0;
    if (fi_getinfo(AXON_OFI_FI_VERSION, NULL, NULL, FI_PROV_ATTR_ONLY, NULL, &list) != 0) {
        return;
    }
    for (cur = list; cur != NULL; cur = cur->next) {
        axon_ofi_core_name(cur->fabric_attr->prov_name, core, sizeof(core));
        if (!strcmp(core, want)) {
            *found = 1;
        }
        if (axon_ofi_prov_is_axon(core) || (strstr(buf, core) != NULL)) {
            continue;
        }
        ret = snprintf(buf + len, max - len, "%s%s", (len > 0) ? ", " : "", core);
        if ((ret < 0) || ((size_t)ret >= max - len)) {
            break;
        }
        len += (size_t)ret;
    }
    fi_freeinfo(list);
}

/* "auto": the best provider with an RDM endpoint here, in core_buf; 0 if there is one. */
static int axon_ofi_pick_auto(char *core_buf, size_t max)
{
    struct fi_info *list, *cur;
    char            core[64];
    int             rank, best = -1;

    if (axon_ofi_getinfo(NULL, 0, &list) != 0) {
        return -1;
    }
    for (cur = list; cur != NULL; cur = cur->next) {
        if (axon_ofi_prov_is_axon(cur->fabric_attr->prov_name)) {
            axon_debug("ofi: auto skips %s: Axon's own provider", cur->fabric_attr->prov_name);
            continue;
        }
        axon_ofi_core_name(cur->fabric_attr->prov_name, core, sizeof(core));
        rank = axon_ofi_auto_rank(core);
        if ((rank >= 0) && ((best < 0) || (rank < best))) {
            best = rank;
            snprintf(core_buf, max, "%s", core);
        }
    }
    fi_freeinfo(list);
    return (best >= 0) ? 0 : -1;
}

static axon_status_t axon_ofi_config_check(const axon_ofi_config_t *config)
{
    char core[64];

    if ((config->provider == NULL) || (config->provider[0] == '\0')) {
        axon_error("AXON_OFI_PROVIDER is empty: expected auto, none or a provider name");
        return AXON_ERR_INVALID_PARAM;
    }
    axon_ofi_core_name(config->provider, core, sizeof(core));
    if (axon_ofi_prov_is_axon(config->provider)) {
        axon_error("AXON_OFI_PROVIDER=%s is invalid: axon is Axon's own libfabric provider, "
                   "ofi over it would loop back into Axon", config->provider);
        return AXON_ERR_INVALID_PARAM;
    }
    if (!axon_config_in_range("OFI_SEG_SIZE", config->seg_size, AXON_OFI_SEG_SIZE_MIN,
                              AXON_OFI_SEG_SIZE_MAX) ||
        !axon_config_in_range("OFI_TX_QUEUE_LEN", config->tx_queue_len, AXON_OFI_QUEUE_LEN_MIN,
                              AXON_OFI_QUEUE_LEN_MAX) ||
        !axon_config_in_range("OFI_RX_QUEUE_LEN", config->rx_queue_len, AXON_OFI_QUEUE_LEN_MIN,
                              AXON_OFI_QUEUE_LEN_MAX)) {
        return AXON_ERR_INVALID_PARAM;
    }
    if (config->keepalive_interval < 0) {
        axon_error("AXON_OFI_KEEPALIVE_INTERVAL=%g is invalid: must be 0 or more",
                   config->keepalive_interval);
        return AXON_ERR_INVALID_PARAM;
    }
    if ((config->keepalive_timeout < 0) ||
        ((config->keepalive_timeout > 0) &&
         (config->keepalive_timeout <
          AXON_OFI_KEEPALIVE_MIN_INTERVALS * config->keepalive_interval))) {
        axon_error("AXON_OFI_KEEPALIVE_TIMEOUT=%g is invalid: must be 0 or at least %d times "
                   "AXON_OFI_KEEPALIVE_INTERVAL (%g)", config->keepalive_timeout,
                   AXON_OFI_KEEPALIVE_MIN_INTERVALS, config->keepalive_interval);
        return AXON_ERR_INVALID_PARAM;
    }
    return AXON_OK;
}

/* Can get/put use info's RMA? Raw or long keys do not fit our packed key. */
static int axon_ofi_info_has_rma(const struct fi_info *info)
{
    return (info->caps & FI_RMA) && (info->caps & FI_READ) && (info->caps & FI_WRITE) &&
           (info->domain_attr->mr_key_size <= sizeof(uint64_t)) &&
           !(info->domain_attr->mr_mode & FI_MR_RAW);
}

static void axon_ofi_resource_init(axon_resource_t *resource, const char *core,
                                   const struct fi_info *info, const axon_ofi_config_t *config)
{
    int software = axon_ofi_prov_is_software(core);

    memset(resource, 0, sizeof(*resource));
    snprintf(resource->tl_name, sizeof(resource->tl_name), "ofi");
    snprintf(resource->dev_name, sizeof(resource->dev_name), "%.*s", AXON_DEV_NAME_MAX - 1, core);
    resource->dev_type       = axon_ofi_info_is_local(info) ? AXON_DEV_TYPE_SHM :
                                                              AXON_DEV_TYPE_NET;
    if ((info->nic != NULL) && (info->nic->bus_attr != NULL) &&
        (info->nic->bus_attr->bus_type == FI_BUS_PCI)) {
        /* Where the NIC sits, for lane choice (framework/topo/topo.h's form). */
        snprintf(resource->locality, sizeof(resource->locality), "pci:%04x:%02x:%02x.%x",
                 info->nic->bus_attr->attr.pci.domain_id, info->nic->bus_attr->attr.pci.bus_id,
                 info->nic->bus_attr->attr.pci.device_id,
                 info->nic->bus_attr->attr.pci.function_id);
    }
    resource->cap_flags      = AXON_CAP_AM_SHORT | AXON_CAP_AM_BCOPY | AXON_CAP_AM_ORDERED |
                               AXON_CAP_PEER_FAILURE | AXON_CAP_CONNECT_TO_IFACE;
    if (software) {
        resource->cap_flags |= AXON_CAP_EMULATED;
    }
    if (config->rma && axon_ofi_info_has_rma(info)) {
        resource->cap_flags |= AXON_CAP_GET | AXON_CAP_PUT | AXON_CAP_NEED_MKEY;
        resource->max_zcopy  = info->ep_attr->max_msg_size;
    }
    resource->latency_ns     = software ? AXON_OFI_SW_LATENCY_NS : AXON_OFI_HW_LATENCY_NS;
    resource->overhead_ns    = software ? AXON_OFI_SW_OVERHEAD_NS : AXON_OFI_HW_OVERHEAD_NS;
    resource->bandwidth_MBps = software ? AXON_OFI_SW_BANDWIDTH : AXON_OFI_HW_BANDWIDTH;
    resource->max_short      = config->seg_size;
    resource->max_bcopy      = config->seg_size;
    resource->ep_memory      = sizeof(axon_ofi_ep_t);
}

/*
 * libfabric's shm before 1.19 loses messages it has to hold as unexpected
 * (more in flight than receives posted: a storm of sends stops at a message
 * that never arrives; 1.19 reworked that path, ofiwg/libfabric#9143). Nothing
 * here can keep a sender from getting ahead of the receives,
 * so such a provider is refused rather than used: Axon's shm covers the host.
 */
static int axon_ofi_prov_loses_unexpected(const char *core)
{
    uint32_t version = fi_version();

    if (strcmp(core, "shm") || (version >= FI_VERSION(1, 19))) {
        return 0;
    }
    axon_error("AXON_OFI_PROVIDER=shm: libfabric %u.%u's shm provider loses messages "
               "that arrive while no receive is posted (its unexpected-message path was "
               "reworked in 1.19); use Axon's own shared memory transport (AXON_TLS=shm)",
               FI_MAJOR(version), FI_MINOR(version));
    return 1;
}

static axon_status_t axon_ofi_query(const void *config_v, axon_resource_t **resources_p,
                                    unsigned *count_p)
{
    const axon_ofi_config_t *config = config_v;
    axon_resource_t         *resource;
    struct fi_info          *info = NULL;
    axon_status_t            status;
    char                     core[64], known[AXON_OFI_PROV_LIST_MAX];
    int                      found, ret;

    *resources_p = NULL;
    *count_p     = 0;
    status = axon_ofi_config_check(config);
    if (status != AXON_OK) {
        return status;
    }
    if (!strcmp(config->provider, "none")) {
        axon_debug("ofi: AXON_OFI_PROVIDER=none, not looking for providers");
        return AXON_OK;
    }
    if (axon_ofi_lib_load() != AXON_OK) {
        return AXON_OK;  /* no libfabric on this host: ofi offers nothing (logged) */
    }

    if (!strcmp(config->provider, "auto")) {
        if (axon_ofi_pick_auto(core, sizeof(core)) != 0) {
            axon_debug("ofi: no libfabric provider with a reliable datagram endpoint "
                       "(FI_EP_RDM, FI_TAGGED, ordered sends) here");
            return AXON_OK;
        }
        axon_debug("ofi: AXON_OFI_PROVIDER=auto picked %s", core);
    } else {
        axon_ofi_core_name(config->provider, core, sizeof(core));
        axon_ofi_known_provs(known, sizeof(known), &found, core);
        if (!found) {
            axon_error("AXON_OFI_PROVIDER=%s names no libfabric provider (providers: %s)",
                       config->provider, known[0] ? known : "none");
            return AXON_ERR_INVALID_PARAM;
        }
        if (axon_ofi_prov_loses_unexpected(core)) {
            return AXON_ERR_INVALID_PARAM;   /* asked for by name: the context fails, saying why */
        }
    }

    ret = axon_ofi_getinfo(core, config->rma, &info);
    if ((ret == -FI_ENODATA) && config->rma) {
        axon_debug("ofi: %s has no FI_RMA endpoint; get and put go by active messages", core);
        ret = axon_ofi_getinfo(core, 0, &info);
    }
    if (ret != 0) {
        axon_debug("ofi: provider %s has no usable reliable datagram endpoint here: %s",
                   core, fi_strerror(-ret));
        return AXON_OK;
    }

    resource = calloc(1, sizeof(*resource));
    if (resource == NULL) {
        fi_freeinfo(info);
        axon_error("ofi: cannot allocate the resource list");
        return AXON_ERR_NO_MEMORY;
    }
    axon_ofi_resource_init(resource, core, axon_ofi_info_pick(info), config);
    fi_freeinfo(info);
    *resources_p = resource;
    *count_p     = 1;
    return AXON_OK;
}

AXON_COMPONENT_EXPORT const axon_component_t AXON_COMPONENT_SYMBOL = {
    .abi_version   = AXON_COMPONENT_ABI_VERSION,
    .name          = "ofi",
    .description   = "any fabric libfabric drives: a provider's reliable datagram endpoints",
    .config_prefix = "OFI_",
    .config_table  = axon_ofi_config_table,
    .config_size   = sizeof(axon_ofi_config_t),
    .query         = axon_ofi_query,
    .md_open       = axon_ofi_md_open,
    .iface_open    = axon_ofi_iface_open,
    .flags         = AXON_COMPONENT_FLAG_ON_REQUEST,  /* libfabric's scan costs ~0.1 s */
};

/*
 * This plugin's file name ends in "fi.so", so libfabric takes it for an
 * external provider when FI_PROVIDER_PATH names Axon's plugin directory
 * (where Axon's own provider, libaxon-fi.so, lives). Answering "no provider"
 * keeps libfabric from warning about a missing symbol.
 */
AXON_COMPONENT_EXPORT void *fi_prov_ini(void);
void *fi_prov_ini(void)
{
    return NULL;
}
