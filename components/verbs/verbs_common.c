/*
 * Shared verbs code: resources, device open, addresses, buffer pool, QP
 * bring-up. See verbs_common.h for what each function promises.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "log.h"
#include "verbs_common.h"

/* ------------------------------------------------------------ resources */

/* Capability names for the "no srq" debug line */
static void axon_verbs_caps_missing(uint64_t missing, char *buf, size_t max)
{
    size_t len = 0;
    unsigned bit;

    buf[0] = '\0';
    for (bit = 0; (bit < AXON_DEV_CAP_LAST_BIT) && (len < max); ++bit) {
        if (missing & (1ull << bit)) {
            len += (size_t)snprintf(buf + len, max - len, "%s%s", len ? ", no " : "no ",
                                    axon_dev_cap_names[bit]);
        }
    }
}

/* Gbit/s of one lane for an IB active_speed code (ibv_port_attr), after encoding */
static double axon_verbs_lane_gbps(uint8_t speed)
{
    static const struct {
        uint8_t code;
        double  gbps;
    } speeds[] = {
        {1, 2.5 * 0.8}, {2, 5.0 * 0.8}, {4, 10.0 * 0.8},          /* SDR DDR QDR: 8b/10b */
        {8, 10.3125 * 64 / 66}, {16, 14.0625 * 64 / 66},          /* FDR10 FDR: 64b/66b */
        {32, 25.78125 * 64 / 66}, {64, 50.0 * 64 / 66}, {128, 100.0 * 64 / 66},
    };
    unsigned i;

    for (i = 0; i < sizeof(speeds) / sizeof(speeds[0]); ++i) {
        if (speeds[i].code == speed) {
            return speeds[i].gbps;
        }
    }
    return 2.5 * 0.8;
}

/* Lanes of an IB active_width code */
static unsigned axon_verbs_width_lanes(uint8_t width)
{
    switch (width) {
    case 2:  return 4;
    case 4:  return 8;
    case 8:  return 12;
    case 16: return 2;
    default: return 1;
    }
}

void axon_verbs_port_estimates(const axon_verbs_port_info_t *info, double *latency_ns,
                               double *bandwidth_MBps)
{
    double gbps;

    if (strcmp(info->backend, "softib") == 0) {
        /* an emulation over shm/udp: never preferred over shm or tcp by default */
        *latency_ns     = 25000.0;
        *bandwidth_MBps = 800.0;
        return;
    }
    gbps            = axon_verbs_lane_gbps(info->port_attr.active_speed) *
                      axon_verbs_width_lanes(info->port_attr.active_width);
    *bandwidth_MBps = gbps * 1000.0 / 8.0 * 0.95;   /* headers and acks */
    *latency_ns     = 1200.0;
}

/* Append one resource per usable port of device name. */
static axon_status_t axon_verbs_query_dev(const char *tl_name, uint64_t required_caps,
                                          axon_verbs_fill_cb_t fill, void *arg,
                                          const axon_dev_info_t *dinfo,
                                          axon_resource_t **res_p, unsigned *count_p,
                                          unsigned *max_p)
{
    axon_verbs_port_info_t info;
    axon_dev_context_t *ctx;
    axon_resource_t *res, *grown;
    char missing[128];
    uint8_t port;
    int ret;

    ret = axon_dev_open(dinfo->name, &ctx);
    if (ret != 0) {
        axon_debug("%s: %s: cannot open (%s), skipped", tl_name, dinfo->name, strerror(ret));
        return AXON_OK;
    }
    memset(&info, 0, sizeof(info));
    snprintf(info.dev_name, sizeof(info.dev_name), "%s", dinfo->name);
    info.backend = dinfo->backend;
    ret = axon_dev_query_device(ctx, &info.dev_attr);
    if (ret != 0) {
        axon_debug("%s: %s: query_device failed (%s), skipped", tl_name, dinfo->name,
                   strerror(ret));
        goto out;
    }
    for (port = 1; port <= info.dev_attr.phys_port_cnt; ++port) {
        info.port_num = port;
        if (axon_dev_query_port(ctx, port, &info.port_attr) != 0) {
            axon_debug("%s: %s:%u: query_port failed, skipped", tl_name, dinfo->name, port);
            continue;
        }
        if (info.port_attr.state != AXON_DEV_PORT_ACTIVE) {
            axon_debug("%s: %s:%u: port not active (state %d), skipped", tl_name, dinfo->name,
                       port, info.port_attr.state);
            continue;
        }
        if ((info.dev_attr.cap_flags & required_caps) != required_caps) {
            axon_verbs_caps_missing(required_caps & ~info.dev_attr.cap_flags, missing,
                                    sizeof(missing));
            axon_debug("%s:%u: %s, %s skipped", dinfo->name, port, missing, tl_name);
            continue;
        }
        if (*count_p == *max_p) {
            grown = realloc(*res_p, (size_t)(*max_p * 2 + 2) * sizeof(**res_p));
            if (grown == NULL) {
                axon_error("%s: cannot grow the resource list", tl_name);
                axon_dev_close(ctx);
                return AXON_ERR_NO_MEMORY;
            }
            *res_p = grown;
            *max_p = *max_p * 2 + 2;
        }
        res = &(*res_p)[*count_p];
        memset(res, 0, sizeof(*res));
        snprintf(res->tl_name, sizeof(res->tl_name), "%s", tl_name);
        if (snprintf(res->dev_name, sizeof(res->dev_name), "%s:%u", dinfo->name, port) >=
            (int)sizeof(res->dev_name)) {
            axon_debug("%s: device name %s:%u too long, skipped", tl_name, dinfo->name, port);
            continue;
        }
        res->dev_type = AXON_DEV_TYPE_NET;
        snprintf(res->locality, sizeof(res->locality), "%s", dinfo->locality);
        axon_verbs_port_estimates(&info, &res->latency_ns, &res->bandwidth_MBps);
        if (fill(&info, res, arg) == 0) {
            if (strcmp(info.backend, "softib") == 0) {
                res->cap_flags |= AXON_CAP_EMULATED;
            }
            ++*count_p;
        }
    }
out:
    axon_dev_close(ctx);
    return AXON_OK;
}

axon_status_t axon_verbs_query_resources(const char *tl_name, uint64_t required_caps,
                                         axon_verbs_fill_cb_t fill, void *arg,
                                         axon_resource_t **resources_p, unsigned *count_p)
{
    axon_dev_info_t *list;
    axon_resource_t *res = NULL;
    unsigned count = 0, max = 0;
    axon_status_t status;
    int ndev, i;

    status = axon_dev_get_list(&list, &ndev);
    if (status != AXON_OK) {
        axon_debug("%s: no device list (%s), no resources", tl_name, axon_status_string(status));
        *resources_p = NULL;
        *count_p     = 0;
        return AXON_OK;
    }
    for (i = 0; i < ndev; ++i) {
        status = axon_verbs_query_dev(tl_name, required_caps, fill, arg, &list[i], &res, &count,
                                      &max);
        if (status != AXON_OK) {
            free(res);
            axon_dev_free_list(list);
            return status;
        }
    }
    axon_dev_free_list(list);
    if (ndev == 0) {
        axon_debug("%s: no RDMA device", tl_name);
    }
    *resources_p = res;
    *count_p     = count;
    return AXON_OK;
}

/* ------------------------------------------------------------ device */

axon_status_t axon_verbs_dev_open(axon_verbs_dev_t *dev, const char *dev_name, int gid_index)
{
    char name[AXON_DEV_NAME_LEN];
    const char *colon;
    unsigned long port;
    char *end;
    int ret;

    memset(dev, 0, sizeof(*dev));
    colon = strrchr(dev_name, ':');
    if ((colon == NULL) || ((size_t)(colon - dev_name) >= sizeof(name))) {
        axon_error("verbs: bad device name '%s' (expected <device>:<port>)", dev_name);
        return AXON_ERR_INVALID_PARAM;
    }
    port = strtoul(colon + 1, &end, 10);
    if ((*end != '\0') || (port == 0) || (port > 255)) {
        axon_error("verbs: bad port in device name '%s'", dev_name);
        return AXON_ERR_INVALID_PARAM;
    }
    memcpy(name, dev_name, (size_t)(colon - dev_name));
    name[colon - dev_name] = '\0';
    snprintf(dev->name, sizeof(dev->name), "%s", dev_name);
    dev->port_num  = (uint8_t)port;
    dev->gid_index = gid_index;

    ret = axon_dev_open(name, &dev->ctx);
    if (ret != 0) {
        axon_error("verbs: cannot open %s: %s", name, strerror(ret));
        return AXON_ERR_NO_DEVICE;
    }
    dev->backend = (strcmp(dev->ctx->backend, "softib") == 0) ? AXON_VERBS_BACKEND_SOFTIB :
                                                                 AXON_VERBS_BACKEND_RDMACORE;
    if ((ret = axon_dev_query_device(dev->ctx, &dev->dev_attr)) != 0) {
        axon_error("verbs: %s: query_device: %s", dev->name, strerror(ret));
        goto err_close;
    }
    if ((ret = axon_dev_query_port(dev->ctx, dev->port_num, &dev->port_attr)) != 0) {
        axon_error("verbs: %s: query_port: %s", dev->name, strerror(ret));
        goto err_close;
    }
    if (dev->port_attr.state != AXON_DEV_PORT_ACTIVE) {
        axon_error("verbs: %s: port not active (state %d)", dev->name, dev->port_attr.state);
        ret = ENODEV;
        goto err_close;
    }
    if ((ret = axon_dev_query_gid(dev->ctx, dev->port_num, gid_index, &dev->gid)) != 0) {
        axon_error("verbs: %s: query_gid index %d: %s", dev->name, gid_index, strerror(ret));
        goto err_close;
    }
    if ((ret = axon_dev_alloc_pd(dev->ctx, &dev->pd)) != 0) {
        axon_error("verbs: %s: alloc_pd: %s", dev->name, strerror(ret));
        goto err_close;
    }
    return AXON_OK;

err_close:
    axon_dev_close(dev->ctx);
    dev->ctx = NULL;
    return (ret == ENOMEM) ? AXON_ERR_NO_MEMORY : AXON_ERR_NO_DEVICE;
}

void axon_verbs_dev_close(axon_verbs_dev_t *dev)
{
    int ret;

    if (dev->ctx == NULL) {
        return;
    }
    if ((dev->pd != NULL) && ((ret = axon_dev_dealloc_pd(dev->pd)) != 0)) {
        axon_warn("verbs: %s: dealloc_pd: %s (objects still use it)", dev->name, strerror(ret));
    }
    axon_dev_close(dev->ctx);
    dev->ctx = NULL;
    dev->pd  = NULL;
}

axon_status_t axon_verbs_cq_create(axon_verbs_dev_t *dev, int cqe, axon_dev_cq_t **cq_p)
{
    int ret;

    if (cqe > dev->dev_attr.max_cqe) {
        cqe = dev->dev_attr.max_cqe;
    }
    ret = axon_dev_create_cq(dev->ctx, cqe, NULL, NULL, 0, cq_p);
    if (ret != 0) {
        axon_error("verbs: %s: create_cq(%d): %s", dev->name, cqe, strerror(ret));
        return (ret == ENOMEM) ? AXON_ERR_NO_MEMORY : AXON_ERR_IO_ERROR;
    }
    return AXON_OK;
}

void axon_verbs_cq_destroy(const char *owner, axon_dev_cq_t *cq)
{
    int ret;

    if ((cq != NULL) && ((ret = axon_dev_destroy_cq(cq)) != 0)) {
        axon_warn("%s: destroy_cq: %s", owner, strerror(ret));
    }
}

/* ------------------------------------------------------------ addresses */

void axon_verbs_dev_addr_pack(const axon_verbs_dev_t *dev, void *buf)
{
    axon_verbs_dev_addr_t addr;

    memcpy(addr.gid, dev->gid.raw, sizeof(addr.gid));
    addr.lid        = dev->port_attr.lid;
    addr.link_layer = dev->port_attr.link_layer;
    addr.mtu        = (uint8_t)dev->port_attr.active_mtu;
    memcpy(buf, &addr, sizeof(addr));
}

void axon_verbs_dev_addr_unpack(const void *buf, axon_verbs_dev_addr_t *addr)
{
    memcpy(addr, buf, sizeof(*addr));
}

/* An unspecified link layer is InfiniBand (libibverbs' convention). */
static uint8_t axon_verbs_link_layer(uint8_t ll)
{
    return (ll == AXON_DEV_LINK_LAYER_UNSPECIFIED) ? AXON_DEV_LINK_LAYER_INFINIBAND : ll;
}

int axon_verbs_dev_addr_reachable(const axon_verbs_dev_t *dev, const axon_verbs_dev_addr_t *addr)
{
    uint8_t ll = axon_verbs_link_layer(dev->port_attr.link_layer);

    if (ll != axon_verbs_link_layer(addr->link_layer)) {
        axon_debug("verbs: %s: peer link layer %u differs from ours (%u)", dev->name,
                   addr->link_layer, ll);
        return 0;
    }
    if ((ll == AXON_DEV_LINK_LAYER_INFINIBAND) &&
        (memcmp(addr->gid, dev->gid.raw, 8) != 0)) {
        axon_debug("verbs: %s: peer on another IB subnet", dev->name);
        return 0;
    }
    if (axon_dev_mtu_bytes((axon_dev_mtu_t)addr->mtu) == 0) {
        axon_debug("verbs: %s: peer address has bad MTU code %u", dev->name, addr->mtu);
        return 0;
    }
    return 1;
}

axon_dev_mtu_t axon_verbs_path_mtu(const axon_verbs_dev_t *dev, const axon_verbs_dev_addr_t *addr)
{
    axon_dev_mtu_t mine = dev->port_attr.active_mtu;
    axon_dev_mtu_t peer = (axon_dev_mtu_t)addr->mtu;

    if (axon_dev_mtu_bytes(peer) == 0) {
        return mine;
    }
    return (peer < mine) ? peer : mine;
}

void axon_verbs_ah_attr_fill(const axon_verbs_dev_t *dev, const axon_verbs_dev_addr_t *addr,
                             axon_dev_ah_attr_t *ah_attr)
{
    memset(ah_attr, 0, sizeof(*ah_attr));
    ah_attr->port_num = dev->port_num;
    ah_attr->dlid     = addr->lid;
    if (axon_verbs_link_layer(addr->link_layer) == AXON_DEV_LINK_LAYER_ETHERNET) {
        /* RoCE addresses by GID: a GRH always */
        ah_attr->is_global      = 1;
        memcpy(ah_attr->grh.dgid.raw, addr->gid, sizeof(addr->gid));
        ah_attr->grh.sgid_index = (uint8_t)dev->gid_index;
        ah_attr->grh.hop_limit  = 64;
    }
}

axon_status_t axon_verbs_ah_create(axon_verbs_dev_t *dev, const axon_verbs_dev_addr_t *addr,
                                   axon_dev_ah_t **ah_p)
{
    axon_dev_ah_attr_t ah_attr;
    int ret;

    axon_verbs_ah_attr_fill(dev, addr, &ah_attr);
    ret = axon_dev_create_ah(dev->pd, &ah_attr, ah_p);
    if (ret != 0) {
        axon_error("verbs: %s: create_ah (lid %u): %s", dev->name, addr->lid, strerror(ret));
        return (ret == ENOMEM) ? AXON_ERR_NO_MEMORY : AXON_ERR_UNREACHABLE;
    }
    return AXON_OK;
}

/* ------------------------------------------------------------ buffer pool */

void axon_verbs_ah_cache_init(axon_verbs_ah_cache_t *cache, axon_verbs_dev_t *dev,
                              const char *name)
{
    memset(cache, 0, sizeof(*cache));
    cache->dev  = dev;
    cache->name = name;
}

static axon_verbs_ah_entry_t **axon_verbs_ah_bucket(axon_verbs_ah_cache_t *cache,
                                                    const axon_verbs_dev_addr_t *addr)
{
    uint64_t h = addr->lid;
    unsigned i;

    for (i = 0; i < sizeof(addr->gid); ++i) {
        h = h * 31 + addr->gid[i];
    }
    return &cache->buckets[((h * 0x9E3779B97F4A7C15ull) >> 58) & (AXON_VERBS_AH_BUCKETS - 1)];
}

axon_verbs_ah_entry_t *axon_verbs_ah_cache_get(axon_verbs_ah_cache_t *cache,
                                               const axon_verbs_dev_addr_t *addr)
{
    axon_verbs_ah_entry_t **bucket = axon_verbs_ah_bucket(cache, addr);
    axon_verbs_ah_entry_t *entry;

    for (entry = *bucket; entry != NULL; entry = entry->next) {
        if (!memcmp(entry->addr.gid, addr->gid, sizeof(addr->gid)) &&
            (entry->addr.lid == addr->lid)) {
            ++entry->refcnt;
            return entry;
        }
    }
    entry = calloc(1, sizeof(*entry));
    if (entry == NULL) {
        axon_error("%s: cannot allocate an address handle entry", cache->name);
        return NULL;
    }
    if (axon_verbs_ah_create(cache->dev, addr, &entry->ah) != AXON_OK) {
        free(entry);
        return NULL;
    }
    entry->addr   = *addr;
    entry->refcnt = 1;
    entry->next   = *bucket;
    *bucket       = entry;
    return entry;
}

static void axon_verbs_ah_entry_free(axon_verbs_ah_cache_t *cache, axon_verbs_ah_entry_t *entry)
{
    int ret = axon_dev_destroy_ah(entry->ah);

    if (ret != 0) {
        axon_warn("%s: destroy_ah: %d", cache->name, ret);
    }
    free(entry);
}

void axon_verbs_ah_cache_put(axon_verbs_ah_cache_t *cache, axon_verbs_ah_entry_t *entry)
{
    axon_verbs_ah_entry_t **pp = axon_verbs_ah_bucket(cache, &entry->addr);

    if (--entry->refcnt > 0) {
        return;
    }
    while (*pp != entry) {
        pp = &(*pp)->next;
    }
    *pp = entry->next;
    axon_verbs_ah_entry_free(cache, entry);
}

void axon_verbs_ah_cache_cleanup(axon_verbs_ah_cache_t *cache)
{
    axon_verbs_ah_entry_t *entry;
    unsigned i;

    for (i = 0; i < AXON_VERBS_AH_BUCKETS; ++i) {
        while ((entry = cache->buckets[i]) != NULL) {
            cache->buckets[i] = entry->next;
            axon_verbs_ah_entry_free(cache, entry);
        }
    }
}

axon_status_t axon_verbs_bufpool_init(axon_verbs_bufpool_t *bp, axon_verbs_dev_t *dev,
                                      const char *name, size_t elem_size, unsigned count)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void *base;
    int ret;

    memset(bp, 0, sizeof(*bp));
    bp->name      = name;
    bp->elem_size = (elem_size + 63) & ~(size_t)63;
    bp->count     = count;
    if ((count == 0) || (bp->elem_size < sizeof(void *))) {
        axon_error("verbs: %s: bad buffer pool %s (%u x %zu bytes)", dev->name, name, count,
                   elem_size);
        return AXON_ERR_INVALID_PARAM;
    }
    bp->map_len = (bp->elem_size * count + page - 1) & ~(page - 1);
    base = mmap(NULL, bp->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) {
        axon_error("verbs: %s: cannot map %zu bytes for %s: %s", dev->name, bp->map_len, name,
                   strerror(errno));
        return AXON_ERR_NO_MEMORY;
    }
    ret = axon_dev_reg_mr(dev->pd, base, bp->map_len, AXON_DEV_ACCESS_LOCAL_WRITE, &bp->mr);
    if (ret != 0) {
        axon_error("verbs: %s: reg_mr of %s (%zu bytes): %s", dev->name, name, bp->map_len,
                   strerror(ret));
        munmap(base, bp->map_len);
        return (ret == ENOMEM) ? AXON_ERR_NO_MEMORY : AXON_ERR_IO_ERROR;
    }
    bp->base     = base;
    bp->num_free = count;   /* all fresh: handed out lowest address first, for locality */
    return AXON_OK;
}

void axon_verbs_bufpool_cleanup(axon_verbs_bufpool_t *bp)
{
    int ret;

    if (bp->base == NULL) {
        return;
    }
    if (bp->num_free != bp->count) {
        axon_warn("verbs: %u of %u %s buffers still in use at cleanup", bp->count - bp->num_free,
                  bp->count, bp->name);
    }
    if ((ret = axon_dev_dereg_mr(bp->mr)) != 0) {
        axon_warn("verbs: dereg_mr of %s: %s", bp->name, strerror(ret));
    }
    munmap(bp->base, bp->map_len);
    bp->base = NULL;
}

/* ------------------------------------------------------------ QPs */

axon_status_t axon_verbs_srq_ring_init(axon_verbs_srq_ring_t *ring, axon_verbs_dev_t *dev,
                                       axon_verbs_bufpool_t *pool, unsigned len,
                                       unsigned window, uint32_t buf_len, const char *name)
{
    axon_dev_srq_init_attr_t srq_attr;
    unsigned i;
    int ret;

    memset(ring, 0, sizeof(*ring));
    ring->pool  = pool;
    ring->name  = name;
    /* buffers held back for a batch must not leave one peer's full window short */
    ring->batch = AXON_VERBS_SRQ_BATCH_MAX;
    ring->batch = (len / 16 < ring->batch) ? len / 16 : ring->batch;
    ring->batch = (len - window + 1 < ring->batch) ? len - window + 1 : ring->batch;
    ring->batch = (ring->batch == 0) ? 1 : ring->batch;
    memset(&srq_attr, 0, sizeof(srq_attr));
    srq_attr.attr.max_wr  = len;
    srq_attr.attr.max_sge = 1;
    ret = axon_dev_create_srq(dev->pd, &srq_attr, &ring->srq);
    if (ret != 0) {
        axon_error("%s: create_srq(%u): %d", name, len, ret);
        return AXON_ERR_IO_ERROR;
    }
    ring->wrs  = calloc(len, sizeof(*ring->wrs));
    ring->sges = calloc(len, sizeof(*ring->sges));
    if ((ring->wrs == NULL) || (ring->sges == NULL)) {
        axon_error("%s: cannot allocate %u receive descriptors", name, len);
        return AXON_ERR_NO_MEMORY;
    }
    for (i = 0; i < len; ++i) {
        ring->sges[i].length = buf_len;
        ring->sges[i].lkey   = axon_verbs_bufpool_lkey(pool);
        ring->wrs[i].sg_list = &ring->sges[i];
        ring->wrs[i].num_sge = 1;
    }
    /* every buffer goes to the SRQ now: the pool only owns the memory */
    for (i = 0; i < len; ++i) {
        axon_verbs_srq_ring_return(ring, axon_verbs_bufpool_get(pool));
    }
    axon_verbs_srq_ring_refill(ring);
    return (ring->refill == 0) ? AXON_OK : AXON_ERR_IO_ERROR;
}

void axon_verbs_srq_ring_refill(axon_verbs_srq_ring_t *ring)
{
    axon_dev_recv_wr_t *bad;
    int ret;

    if (ring->refill == 0) {
        return;
    }
    ring->wrs[ring->refill - 1].next = NULL;
    ret = axon_dev_post_srq_recv(ring->srq, ring->wrs, &bad);
    if (ret != 0) {
        axon_error("%s: post_srq_recv of %u buffers failed: %d", ring->name, ring->refill, ret);
        return;   /* kept for the next try */
    }
    ring->refill = 0;
}

void axon_verbs_srq_ring_cleanup(axon_verbs_srq_ring_t *ring)
{
    int ret;

    if ((ring->srq != NULL) && ((ret = axon_dev_destroy_srq(ring->srq)) != 0)) {
        axon_warn("%s: destroy_srq: %d", ring->name, ret);
    }
    ring->srq = NULL;
    if (ring->pool != NULL) {
        ring->pool->num_free = ring->pool->count;   /* posted buffers went with the SRQ */
    }
    free(ring->wrs);
    free(ring->sges);
    ring->wrs  = NULL;
    ring->sges = NULL;
}

axon_status_t axon_verbs_qp_create(axon_verbs_dev_t *dev, axon_verbs_qp_params_t *params,
                                   axon_dev_qp_t **qp_p, axon_dev_qp_cap_t *cap_p)
{
    axon_dev_qp_init_attr_t init;
    int ret;

    memset(&init, 0, sizeof(init));
    init.qp_context          = params->qp_context;
    init.send_cq             = params->send_cq;
    init.recv_cq             = params->recv_cq;
    init.srq                 = params->srq;
    init.qp_type             = params->type;
    init.cap.max_send_wr     = params->max_send_wr;
    init.cap.max_recv_wr     = (params->srq != NULL) ? 0 : params->max_recv_wr;
    init.cap.max_send_sge    = params->max_send_sge ? params->max_send_sge : 1;
    init.cap.max_recv_sge    = (params->srq != NULL) ? 0 : 1;
    init.cap.max_inline_data = params->max_inline;
    init.create_flags        = params->create_flags;
    init.max_inl_send_klms   = params->max_inl_klms;
    if (init.cap.max_inline_data > dev->dev_attr.max_inline_data) {
        init.cap.max_inline_data = dev->dev_attr.max_inline_data;
    }
    if (init.cap.max_send_wr > (uint32_t)dev->dev_attr.max_qp_wr) {
        init.cap.max_send_wr = (uint32_t)dev->dev_attr.max_qp_wr;
    }
    if (init.cap.max_recv_wr > (uint32_t)dev->dev_attr.max_qp_wr) {
        init.cap.max_recv_wr = (uint32_t)dev->dev_attr.max_qp_wr;
    }
    ret = axon_dev_create_qp(dev->pd, &init, qp_p);
    if (ret != 0) {
        axon_error("verbs: %s: create_qp (type %d, %u send wr, %u recv wr, inline %u): %s",
                   dev->name, params->type, init.cap.max_send_wr, init.cap.max_recv_wr,
                   init.cap.max_inline_data, strerror(ret));
        return (ret == ENOMEM) ? AXON_ERR_NO_MEMORY : AXON_ERR_IO_ERROR;
    }
    if (cap_p != NULL) {
        *cap_p = init.cap;
    }
    params->max_inl_klms = init.max_inl_send_klms;
    return AXON_OK;
}

void axon_verbs_qp_destroy(axon_dev_qp_t *qp)
{
    int ret;

    if ((qp != NULL) && ((ret = axon_dev_destroy_qp(qp)) != 0)) {
        axon_warn("verbs: destroy_qp 0x%x: %s", qp->qp_num, strerror(ret));
    }
}

/*
 * The attributes each transition takes, per back end. softib applies seed
 * §4.5 to the letter; the kernel's table rejects ACCESS_FLAGS on UD and
 * takes no PATH_MTU at UD RTR.
 */
typedef struct {
    int ud_init;
    int ud_rtr;
    int ud_rts;
    int rc_init;
    int rc_rtr;
    int rc_rts;
} axon_verbs_qp_masks_t;

#define VQ_S AXON_DEV_QP_STATE
static const axon_verbs_qp_masks_t axon_verbs_qp_masks[AXON_VERBS_BACKEND_LAST] = {
    [AXON_VERBS_BACKEND_SOFTIB] = {
        .ud_init = VQ_S | AXON_DEV_QP_PKEY_INDEX | AXON_DEV_QP_PORT | AXON_DEV_QP_QKEY |
                   AXON_DEV_QP_ACCESS_FLAGS,
        .ud_rtr  = VQ_S | AXON_DEV_QP_PATH_MTU,
        .ud_rts  = VQ_S | AXON_DEV_QP_SQ_PSN,
        .rc_init = VQ_S | AXON_DEV_QP_PKEY_INDEX | AXON_DEV_QP_PORT | AXON_DEV_QP_ACCESS_FLAGS,
        .rc_rtr  = VQ_S | AXON_DEV_QP_AV | AXON_DEV_QP_PATH_MTU | AXON_DEV_QP_DEST_QPN |
                   AXON_DEV_QP_RQ_PSN | AXON_DEV_QP_MAX_DEST_RD_ATOMIC |
                   AXON_DEV_QP_MIN_RNR_TIMER,
        .rc_rts  = VQ_S | AXON_DEV_QP_SQ_PSN | AXON_DEV_QP_TIMEOUT | AXON_DEV_QP_RETRY_CNT |
                   AXON_DEV_QP_RNR_RETRY | AXON_DEV_QP_MAX_QP_RD_ATOMIC,
    },
    [AXON_VERBS_BACKEND_RDMACORE] = {
        .ud_init = VQ_S | AXON_DEV_QP_PKEY_INDEX | AXON_DEV_QP_PORT | AXON_DEV_QP_QKEY,
        .ud_rtr  = VQ_S,
        .ud_rts  = VQ_S | AXON_DEV_QP_SQ_PSN,
        .rc_init = VQ_S | AXON_DEV_QP_PKEY_INDEX | AXON_DEV_QP_PORT | AXON_DEV_QP_ACCESS_FLAGS,
        .rc_rtr  = VQ_S | AXON_DEV_QP_AV | AXON_DEV_QP_PATH_MTU | AXON_DEV_QP_DEST_QPN |
                   AXON_DEV_QP_RQ_PSN | AXON_DEV_QP_MAX_DEST_RD_ATOMIC |
                   AXON_DEV_QP_MIN_RNR_TIMER,
        .rc_rts  = VQ_S | AXON_DEV_QP_SQ_PSN | AXON_DEV_QP_TIMEOUT | AXON_DEV_QP_RETRY_CNT |
                   AXON_DEV_QP_RNR_RETRY | AXON_DEV_QP_MAX_QP_RD_ATOMIC,
    },
};
#undef VQ_S

static axon_status_t axon_verbs_qp_modify(axon_verbs_dev_t *dev, axon_dev_qp_t *qp,
                                          axon_dev_qp_attr_t *attr, int mask, const char *what)
{
    int ret = axon_dev_modify_qp(qp, attr, mask);

    if (ret != 0) {
        axon_error("verbs: %s: QP 0x%x to %s (mask 0x%x): %s", dev->name, qp->qp_num, what, mask,
                   strerror(ret));
        return AXON_ERR_IO_ERROR;
    }
    return AXON_OK;
}

axon_status_t axon_verbs_qp_ud_up(axon_verbs_dev_t *dev, axon_dev_qp_t *qp, uint32_t qkey,
                                  uint32_t sq_psn)
{
    const axon_verbs_qp_masks_t *m = &axon_verbs_qp_masks[dev->backend];
    axon_dev_qp_attr_t attr;
    axon_status_t status;

    memset(&attr, 0, sizeof(attr));
    attr.qp_state   = AXON_DEV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num   = dev->port_num;
    attr.qkey       = qkey;
    status = axon_verbs_qp_modify(dev, qp, &attr, m->ud_init, "INIT");
    if (status != AXON_OK) {
        return status;
    }
    memset(&attr, 0, sizeof(attr));
    attr.qp_state = AXON_DEV_QPS_RTR;
    attr.path_mtu = dev->port_attr.active_mtu;
    status = axon_verbs_qp_modify(dev, qp, &attr, m->ud_rtr, "RTR");
    if (status != AXON_OK) {
        return status;
    }
    memset(&attr, 0, sizeof(attr));
    attr.qp_state = AXON_DEV_QPS_RTS;
    attr.sq_psn   = sq_psn & AXON_VERBS_PSN_MASK;
    return axon_verbs_qp_modify(dev, qp, &attr, m->ud_rts, "RTS");
}

axon_status_t axon_verbs_qp_rc_init(axon_verbs_dev_t *dev, axon_dev_qp_t *qp)
{
    axon_dev_qp_attr_t attr;

    memset(&attr, 0, sizeof(attr));
    attr.qp_state        = AXON_DEV_QPS_INIT;
    attr.pkey_index      = 0;
    attr.port_num        = dev->port_num;
    /* remote atomics: rc's ep_atomic in device atomic mode */
    attr.qp_access_flags = AXON_DEV_ACCESS_LOCAL_WRITE | AXON_DEV_ACCESS_REMOTE_WRITE |
                           AXON_DEV_ACCESS_REMOTE_READ | AXON_DEV_ACCESS_REMOTE_ATOMIC;
    return axon_verbs_qp_modify(dev, qp, &attr, axon_verbs_qp_masks[dev->backend].rc_init,
                                "INIT");
}

axon_status_t axon_verbs_qp_rc_connect(axon_verbs_dev_t *dev, axon_dev_qp_t *qp,
                                       const axon_verbs_rc_peer_t *peer)
{
    const axon_verbs_qp_masks_t *m = &axon_verbs_qp_masks[dev->backend];
    axon_dev_qp_attr_t attr;
    axon_status_t status;
    uint8_t rd = peer->max_rd_atomic;

    if (rd > dev->dev_attr.max_qp_rd_atom) {
        rd = (uint8_t)dev->dev_attr.max_qp_rd_atom;
    }
    memset(&attr, 0, sizeof(attr));
    attr.qp_state           = AXON_DEV_QPS_RTR;
    attr.path_mtu           = peer->path_mtu;
    attr.dest_qp_num        = peer->qpn;
    attr.rq_psn             = peer->peer_psn & AXON_VERBS_PSN_MASK;
    attr.max_dest_rd_atomic = rd;
    attr.min_rnr_timer      = peer->min_rnr_timer;
    axon_verbs_ah_attr_fill(dev, &peer->addr, &attr.ah_attr);
    status = axon_verbs_qp_modify(dev, qp, &attr, m->rc_rtr, "RTR");
    if (status != AXON_OK) {
        return status;
    }
    memset(&attr, 0, sizeof(attr));
    attr.qp_state      = AXON_DEV_QPS_RTS;
    attr.sq_psn        = peer->local_psn & AXON_VERBS_PSN_MASK;
    attr.timeout       = peer->timeout;
    attr.retry_cnt     = peer->retry_cnt;
    attr.rnr_retry     = peer->rnr_retry;
    attr.max_rd_atomic = rd;
    return axon_verbs_qp_modify(dev, qp, &attr, m->rc_rts, "RTS");
}

axon_status_t axon_verbs_qp_dci_up(axon_verbs_dev_t *dev, axon_dev_qp_t *qp, uint64_t dc_key,
                                   uint8_t timeout, uint8_t retry_cnt, uint8_t rnr_retry,
                                   uint8_t max_rd_atomic)
{
    axon_verbs_dev_addr_t self;
    axon_dev_qp_attr_t attr;
    axon_status_t status;

    memset(&attr, 0, sizeof(attr));
    attr.qp_state   = AXON_DEV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num   = dev->port_num;
    attr.dct_key    = dc_key;
    status = axon_verbs_qp_modify(dev, qp, &attr, AXON_DEV_QP_STATE | AXON_DEV_QP_PKEY_INDEX |
                                  AXON_DEV_QP_PORT | AXON_DEV_QP_DC_KEY, "INIT");
    if (status != AXON_OK) {
        return status;
    }
    memset(&attr, 0, sizeof(attr));
    attr.qp_state = AXON_DEV_QPS_RTR;
    attr.path_mtu = dev->port_attr.active_mtu;
    axon_verbs_dev_addr_pack(dev, &self);
    axon_verbs_ah_attr_fill(dev, &self, &attr.ah_attr);
    status = axon_verbs_qp_modify(dev, qp, &attr, AXON_DEV_QP_STATE | AXON_DEV_QP_AV |
                                  AXON_DEV_QP_PATH_MTU, "RTR");
    if (status != AXON_OK) {
        return status;
    }
    if (max_rd_atomic > dev->dev_attr.dc.max_dc_req_rd_atom) {
        max_rd_atomic = (uint8_t)dev->dev_attr.dc.max_dc_req_rd_atom;
    }
    memset(&attr, 0, sizeof(attr));
    attr.qp_state      = AXON_DEV_QPS_RTS;
    attr.timeout       = timeout;
    attr.retry_cnt     = retry_cnt;
    attr.rnr_retry     = rnr_retry;
    attr.max_rd_atomic = max_rd_atomic;
    return axon_verbs_qp_modify(dev, qp, &attr, AXON_DEV_QP_STATE | AXON_DEV_QP_TIMEOUT |
                                AXON_DEV_QP_RETRY_CNT | AXON_DEV_QP_RNR_RETRY |
                                AXON_DEV_QP_MAX_QP_RD_ATOMIC, "RTS");
}

axon_status_t axon_verbs_qp_reset(axon_verbs_dev_t *dev, axon_dev_qp_t *qp)
{
    axon_dev_qp_attr_t attr;

    memset(&attr, 0, sizeof(attr));
    attr.qp_state = AXON_DEV_QPS_RESET;
    return axon_verbs_qp_modify(dev, qp, &attr, AXON_DEV_QP_STATE, "RESET");
}

axon_status_t axon_verbs_qp_to_err(axon_dev_qp_t *qp)
{
    axon_dev_qp_attr_t attr;
    int ret;

    memset(&attr, 0, sizeof(attr));
    attr.qp_state = AXON_DEV_QPS_ERR;
    ret = axon_dev_modify_qp(qp, &attr, AXON_DEV_QP_STATE);
    if (ret != 0) {
        axon_warn("verbs: QP 0x%x to ERR: %s", qp->qp_num, strerror(ret));
        return AXON_ERR_IO_ERROR;
    }
    return AXON_OK;
}

uint8_t axon_verbs_timeout_exp(double seconds)
{
    double t = 4.096e-6 * 2;   /* exponent 1 */
    uint8_t exp = 1;

    /* the largest exponent whose timeout does not exceed the request */
    while ((exp < 31) && (t * 2 <= seconds)) {
        t *= 2;
        ++exp;
    }
    return exp;
}
