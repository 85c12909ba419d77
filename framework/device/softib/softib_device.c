/*
 * softib devices: the back-end descriptor (list, open, summary, config),
 * device and port queries, capability masking and async events.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "log.h"
#include "dev_backend.h"
#include "softib.h"
#include "softib_cm.h"

/* What softib implements; CAP_MASK removes from this. */
#define SOFTIB_CAPS (AXON_DEV_CAP_RC | AXON_DEV_CAP_UC | AXON_DEV_CAP_UD | AXON_DEV_CAP_SRQ | \
                     AXON_DEV_CAP_ATOMIC | AXON_DEV_CAP_INLINE | AXON_DEV_CAP_COMP_CHANNEL | \
                     AXON_DEV_CAP_EXT_ATOMIC | AXON_DEV_CAP_CROSS_CHANNEL | AXON_DEV_CAP_DC | \
                     AXON_DEV_CAP_UMR | AXON_DEV_CAP_MCAST)

static uint64_t softib_node_guid(uint32_t ipv4_addr, unsigned index)
{
    /* "sib" in the top bytes, then the address and the device number */
    return (0x736962ull << 40) | ((uint64_t)ntohl(ipv4_addr) << 8) | (index & 0xff);
}

/* Device number of "softibN", or -1 */
static int softib_parse_name(const char *name, unsigned devices)
{
    char *end;
    unsigned long n;

    if (strncmp(name, "softib", 6) || !name[6] || (name[6] < '0') || (name[6] > '9')) {
        return -1;
    }
    n = strtoul(name + 6, &end, 10);
    return (*end || (n >= devices)) ? -1 : (int)n;
}

static void softib_fill_attr(softib_dev_t *dev, uint32_t ipv4_addr, uint64_t cap_remove)
{
    axon_dev_attr_t *a = &dev->attr;
    uint64_t caps      = SOFTIB_CAPS & ~cap_remove;

    memset(a, 0, sizeof(*a));
    snprintf(a->fw_ver, sizeof(a->fw_ver), "axon-softib 1.0");
    a->node_guid           = softib_node_guid(ipv4_addr, dev->index);
    a->sys_image_guid      = a->node_guid;
    a->max_mr_size         = 1ull << 47;
    a->page_size_cap       = 4096;
    a->vendor_id           = 0;
    a->vendor_part_id      = 0;
    a->hw_ver              = 1;
    a->device_cap_flags    = AXON_DEV_DEVICE_SYS_IMAGE_GUID | AXON_DEV_DEVICE_RC_RNR_NAK_GEN;
    a->max_qp              = SOFTIB_QPN_MAX_INDEX;
    a->max_qp_wr           = SOFTIB_MAX_QP_WR;
    a->max_sge             = SOFTIB_MAX_SGE;
    a->max_sge_rd          = SOFTIB_MAX_SGE;
    a->max_cq              = 65536;
    a->max_cqe             = SOFTIB_MAX_CQE;
    a->max_mr              = SOFTIB_MR_TABLE_SIZE - 1;
    a->max_pd              = SOFTIB_MAX_PD;
    a->max_qp_rd_atom      = SOFTIB_MAX_RD_ATOM;
    a->max_res_rd_atom     = SOFTIB_MAX_RD_ATOM * SOFTIB_QPN_MAX_INDEX;
    a->max_qp_init_rd_atom = SOFTIB_MAX_RD_ATOM;
    a->atomic_cap          = !(caps & AXON_DEV_CAP_ATOMIC) ? AXON_DEV_ATOMIC_NONE :
                             (dev->opts.atomic_cap == SOFTIB_ATOMIC_CAP_HCA) ?
                             AXON_DEV_ATOMIC_HCA : AXON_DEV_ATOMIC_GLOB;
    a->max_ah              = SOFTIB_MAX_AH;
    if (caps & AXON_DEV_CAP_SRQ) {
        a->max_srq     = SOFTIB_QPN_MAX_INDEX;
        a->max_srq_wr  = SOFTIB_MAX_SRQ_WR;
        a->max_srq_sge = SOFTIB_MAX_SGE;
        a->device_cap_flags |= AXON_DEV_DEVICE_SRQ_RESIZE;
    }
    a->max_pkeys          = 1;
    a->local_ca_ack_delay = 15;
    a->phys_port_cnt      = 1;
    a->cap_flags          = caps;
    a->max_inline_data    = (caps & AXON_DEV_CAP_INLINE) ? dev->opts.max_inline : 0;
    if (caps & AXON_DEV_CAP_EXT_ATOMIC) {
        /* masked atomics of 4..32 bytes, fields up to 8 bytes (seed §8.7.2.1) */
        a->ext_atomic.log_atomic_arg_sizes  = SOFTIB_AMO_EXT_SIZES;
        a->ext_atomic.max_fa_bit_boundary   = 3;
        a->ext_atomic.log_max_atomic_inline = SOFTIB_AMO_LOG_INLINE;
        a->ext_atomic.log_glob_arg_sizes    = softib_amo_glob_sizes();
    }
    if (caps & AXON_DEV_CAP_CROSS_CHANNEL) {
        softib_xchan_caps(a);
    }
    if (caps & AXON_DEV_CAP_DC) {
        softib_dc_caps(a, dev->opts.dc_max_dcr);
    }
    if (caps & AXON_DEV_CAP_UMR) {
        softib_umr_caps(a);
    }
    if (caps & AXON_DEV_CAP_MCAST) {
        a->max_mcast_grp             = SOFTIB_MCAST_GROUPS;
        a->max_mcast_qp_attach       = SOFTIB_MCAST_MEMBERS;
        a->max_total_mcast_qp_attach = SOFTIB_MCAST_GROUPS * SOFTIB_MCAST_MEMBERS;
    }
}

static int softib_get_list(axon_dev_info_t *list, int max)
{
    softib_wire_params_t params;
    softib_opts_t opts;
    uint64_t remove;
    axon_dev_mtu_t mtu;
    unsigned i, count;
    int ret;

    if ((ret = softib_config_read(&opts)) != 0) {
        return -ret;
    }
    ret = softib_config_params(&opts, 0, &params, &remove, &mtu);
    count = opts.devices;
    if (ret) {
        softib_config_release(&opts);
        return -ret;
    }
    if (count == 0) {
        axon_debug("softib: no devices (AXON_SOFTIB_DEVICES=0)");
    }
    for (i = 0; (i < count) && ((int)i < max); i++) {
        snprintf(list[i].name, sizeof(list[i].name), "softib%u", i);
        list[i].backend   = "softib";
        list[i].node_guid = softib_node_guid(params.ipv4_addr, i);
        softib_config_locality(&opts, i, list[i].locality, sizeof(list[i].locality));
    }
    softib_config_release(&opts);
    return (int)count;
}

static void softib_summary(char *buf, size_t max)
{
    softib_opts_t opts;

    if (softib_config_read(&opts)) {
        snprintf(buf, max, "bad configuration");
        return;
    }
    if (opts.devices == 0) {
        snprintf(buf, max, "no devices (AXON_SOFTIB_DEVICES=0)");
    } else {
        snprintf(buf, max, "%u device%s", opts.devices, (opts.devices == 1) ? "" : "s");
    }
    softib_config_release(&opts);
}

static int softib_open(const char *name, axon_dev_context_t **ctx_p)
{
    softib_wire_params_t params;
    uint64_t remove;
    softib_dev_t *dev;
    int index, ret;

    dev = calloc(1, sizeof(*dev));
    if (dev == NULL) {
        axon_error("softib: no memory for device %s", name);
        return ENOMEM;
    }
    dev->async_wfd = dev->super.async_fd = dev->wake_fd = -1;
    if ((ret = softib_config_read(&dev->opts)) != 0) {
        free(dev);
        return ret;
    }
    index = softib_parse_name(name, dev->opts.devices);
    if (index < 0) {
        axon_debug("softib: no device '%s' (AXON_SOFTIB_DEVICES=%u)", name, dev->opts.devices);
        ret = ENODEV;
        goto err_opts;
    }
    dev->index = (unsigned)index;
    if ((ret = softib_config_params(&dev->opts, dev->index, &params, &remove, &dev->mtu))) {
        goto err_opts;
    }
    dev->mrs = calloc(SOFTIB_MR_TABLE_SIZE, sizeof(*dev->mrs));
    if (dev->mrs == NULL) {
        axon_error("softib: no memory for the MR table of %s", name);
        ret = ENOMEM;
        goto err_opts;
    }
    snprintf(dev->super.name, sizeof(dev->super.name), "%s", name);
    if ((ret = softib_async_open(dev)) != 0) {
        goto err_mrs;
    }
    if ((ret = softib_wire_open(&params, &dev->wire)) != 0) {
        axon_error("softib: cannot open the wire of %s: %s", name, strerror(ret));
        goto err_async;
    }
    softib_wire_gid(dev->wire, &dev->gid);
    pthread_mutex_init(&dev->lock, NULL);
    axon_list_init(&dev->active_list);
    axon_list_init(&dev->timed_list);
    dev->timed_due = UINT64_MAX;
    axon_list_init(&dev->ack_list);
    axon_list_init(&dev->mkey_lists);
    dev->next_qp_index  = softib_wire_next_qp_index(dev->wire);
    if ((dev->next_qp_index == 0) || (dev->next_qp_index > SOFTIB_QPN_MAX_INDEX)) {
        dev->next_qp_index = 1;     /* the slot's first owner */
    }
    dev->next_mr_index  = 1;
    /* one device's keys are never another's, as on two NICs: a key that went
     * to the wrong device fails there instead of reaching some other region */
    dev->mr_gen         = (uint8_t)(dev->index * 0x35);
    dev->next_pd_handle = 1;
    dev->super.ops      = &softib_dev_ops;
    dev->super.backend  = "softib";
    snprintf(dev->super.name, sizeof(dev->super.name), "%s", name);
    softib_fill_attr(dev, params.ipv4_addr, remove);
    if (dev->opts.progress_thread && (ret = softib_thread_start(dev)) != 0) {
        goto err_wire;
    }
    axon_debug("softib: opened %s (slot %u, mtu %zu, caps 0x%llx%s)", name,
               softib_wire_slot(dev->wire), axon_dev_mtu_bytes(dev->mtu),
               (unsigned long long)dev->attr.cap_flags,
               dev->opts.progress_thread ? ", progress thread" : "");
    *ctx_p = &dev->super;
    return 0;

err_wire:
    pthread_mutex_destroy(&dev->lock);
    softib_wire_close(dev->wire);
err_async:
    softib_async_close(dev);
err_mrs:
    free(dev->mrs);
err_opts:
    softib_config_release(&dev->opts);
    free(dev);
    return ret;
}

static void softib_close(axon_dev_context_t *ctx)
{
    softib_dev_t *dev = softib_dev(ctx);

    softib_thread_stop(dev);
    if (dev->num_qps || dev->num_mrs) {
        axon_debug("softib: %s closed with %u QPs and %u MRs still open", ctx->name,
                   dev->num_qps, dev->num_mrs);
    }
    softib_mr_table_free(dev);
    softib_mkey_lists_free(dev);
    softib_mcast_close(dev);
    softib_wire_close(dev->wire);
    softib_async_close(dev);
    pthread_mutex_destroy(&dev->lock);
    softib_config_release(&dev->opts);
    free(dev);
}

static int softib_query_device(axon_dev_context_t *ctx, axon_dev_attr_t *attr)
{
    *attr = softib_dev(ctx)->attr;
    return 0;
}

static int softib_check_port(const char *what, uint8_t port_num)
{
    if (port_num != SOFTIB_PORT_NUM) {
        axon_debug("softib: %s: no port %u (softib has port 1 only)", what, port_num);
        return EINVAL;
    }
    return 0;
}

static int softib_query_port(axon_dev_context_t *ctx, uint8_t port_num,
                             axon_dev_port_attr_t *attr)
{
    softib_dev_t *dev = softib_dev(ctx);

    if (softib_check_port("query_port", port_num)) {
        return EINVAL;
    }
    memset(attr, 0, sizeof(*attr));
    attr->state          = AXON_DEV_PORT_ACTIVE;
    attr->max_mtu        = dev->mtu;
    attr->active_mtu     = dev->mtu;
    attr->gid_tbl_len    = 1;
    attr->max_msg_sz     = SOFTIB_MAX_MSG;
    attr->pkey_tbl_len   = 1;
    attr->lid            = 0;
    attr->max_vl_num     = 1;
    attr->active_width   = 1;
    attr->active_speed   = 1;
    attr->phys_state     = 5;    /* LinkUp */
    attr->link_layer     = AXON_DEV_LINK_LAYER_ETHERNET;
    pthread_mutex_lock(&dev->lock);
    attr->qkey_viol_cntr = dev->qkey_viol;
    pthread_mutex_unlock(&dev->lock);
    return 0;
}

static int softib_query_gid(axon_dev_context_t *ctx, uint8_t port_num, int index,
                            axon_dev_gid_t *gid)
{
    if (softib_check_port("query_gid", port_num)) {
        return EINVAL;
    }
    if (index != 0) {
        axon_debug("softib: query_gid: no GID index %d (only 0)", index);
        return EINVAL;
    }
    *gid = softib_dev(ctx)->gid;
    return 0;
}

static int softib_query_pkey(axon_dev_context_t *ctx, uint8_t port_num, int index,
                             uint16_t *pkey)
{
    if (softib_check_port("query_pkey", port_num)) {
        return EINVAL;
    }
    if (index != 0) {
        axon_debug("softib: query_pkey: no pkey index %d (only 0)", index);
        return EINVAL;
    }
    *pkey = SOFTIB_DEFAULT_PKEY;
    return 0;
}

static const axon_dev_backend_t softib_dev_backend = {
    .name          = "softib",
    .order         = 0,   /* always there: device 0 of a list is predictable */
    .get_list      = softib_get_list,
    .open          = softib_open,
    .summary       = softib_summary,
    .config_table  = softib_config_table,
    .config_prefix = "SOFTIB_",
    .cm            = &softib_cm_ops,
};
AXON_DEV_BACKEND_REGISTER(softib_dev_backend)

const axon_dev_ops_t softib_dev_ops = {
    .close                = softib_close,
    .query_device         = softib_query_device,
    .query_port           = softib_query_port,
    .query_gid            = softib_query_gid,
    .query_pkey           = softib_query_pkey,
    .alloc_pd             = softib_alloc_pd,
    .dealloc_pd           = softib_dealloc_pd,
    .reg_mr               = softib_reg_mr,
    .dereg_mr             = softib_dereg_mr,
    .create_comp_channel  = softib_create_comp_channel,
    .destroy_comp_channel = softib_destroy_comp_channel,
    .get_cq_event         = softib_get_cq_event,
    .ack_cq_events        = softib_ack_cq_events,
    .create_cq            = softib_create_cq,
    .create_cq_ex         = softib_create_cq_ex,
    .modify_cq            = softib_modify_cq,
    .destroy_cq           = softib_destroy_cq,
    .poll_cq              = softib_poll_cq,
    .req_notify_cq        = softib_req_notify_cq,
    .create_srq           = softib_create_srq,
    .modify_srq           = softib_modify_srq,
    .query_srq            = softib_query_srq,
    .destroy_srq          = softib_destroy_srq,
    .post_srq_recv        = softib_post_srq_recv,
    .create_qp            = softib_create_qp,
    .modify_qp            = softib_modify_qp,
    .query_qp             = softib_query_qp,
    .destroy_qp           = softib_destroy_qp,
    .post_send            = softib_post_send,
    .post_recv            = softib_post_recv,
    .post_task            = softib_post_task,
    .create_ah            = softib_create_ah,
    .destroy_ah           = softib_destroy_ah,
    .attach_mcast         = softib_attach_mcast,
    .detach_mcast         = softib_detach_mcast,
    .create_dct           = softib_create_dct,
    .destroy_dct          = softib_destroy_dct,
    .query_dct            = softib_query_dct,
    .arm_dct              = softib_arm_dct,
    .create_mr            = softib_create_mr,
    .query_mkey           = softib_query_mkey,
    .alloc_mkey_list      = softib_alloc_mkey_list,
    .dealloc_mkey_list    = softib_dealloc_mkey_list,
    .get_async_event      = softib_async_get,
    .ack_async_event      = softib_async_ack,
};
