/*
 * Devices and contexts: the device list (softib's devices through the
 * device layer), opening and closing, and the queries of device, port, GID
 * and P_Key.
 */
#include <endian.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config.h"
#include "list.h"
#include "log.h"
#include "vabi.h"

#undef ibv_query_port   /* verbs.h maps it to its inline wrapper; we define the entry point */

/*
 * Devices live as long as the process: ibv_free_device_list frees the array
 * only, and a device stays valid while a context of it is open (verbs'
 * rule), which a list of every device seen gives without counting.
 */
static pthread_mutex_t vabi_devices_lock = PTHREAD_MUTEX_INITIALIZER;
static vabi_device_t  *vabi_devices;

/*
 * The library's own settings, read once: libaxon's axon_init is not here to
 * read them. softib reads its AXON_SOFTIB_* itself when a device is listed
 * or opened.
 */
typedef struct {
    unsigned log_level;
} vabi_opts_t;

static const axon_config_entry_t vabi_config_table[] = {
    {"LOG_LEVEL", "warn", "Messages at this level and more severe are printed",
     offsetof(vabi_opts_t, log_level),
     AXON_CONFIG_TYPE_ENUM(axon_log_level_names, "error|warn|info|debug|trace")},
    AXON_CONFIG_END
};

static void vabi_config_read(void)
{
    vabi_opts_t opts;

    if (axon_config_parse(vabi_config_table, "", &opts, NULL, 0) == AXON_OK) {
        axon_log_set_level((axon_log_level_t)opts.log_level);
        axon_config_release(vabi_config_table, &opts);
    }   /* else the parser named the bad value, and the level stays warn */
}

static pthread_once_t vabi_config_once = PTHREAD_ONCE_INIT;

static vabi_device_t *vabi_device_get(const axon_dev_info_t *info)
{
    vabi_device_t *d;

    for (d = vabi_devices; d != NULL; d = d->next) {
        if (!strcmp(d->ibv.name, info->name)) {
            return d;
        }
    }
    d = calloc(1, sizeof(*d));
    if (d == NULL) {
        axon_error("libibverbs on softib: no memory for device %s", info->name);
        return NULL;
    }
    d->ibv.node_type      = IBV_NODE_CA;
    d->ibv.transport_type = IBV_TRANSPORT_IB;
    snprintf(d->ibv.name, sizeof(d->ibv.name), "%s", info->name);
    snprintf(d->ibv.dev_name, sizeof(d->ibv.dev_name), "%s", info->name);
    /* No kernel device, so no sysfs directory: dev_path and ibdev_path stay empty. */
    d->node_guid = info->node_guid;
    d->next      = vabi_devices;
    vabi_devices = d;
    return d;
}

struct ibv_device **ibv_get_device_list(int *num_devices)
{
    struct ibv_device **list;
    axon_dev_info_t *infos;
    int count, i, n = 0;

    pthread_once(&vabi_config_once, vabi_config_read);
    if (axon_dev_get_list(&infos, &count) != AXON_OK) {
        return vabi_fail_null(ENOMEM);
    }
    list = calloc((size_t)count + 1, sizeof(*list));
    if (list == NULL) {
        axon_dev_free_list(infos);
        return vabi_fail_null(ENOMEM);
    }
    pthread_mutex_lock(&vabi_devices_lock);
    for (i = 0; i < count; i++) {
        /* Only softib: this library is linked with no other back end. */
        vabi_device_t *d = vabi_device_get(&infos[i]);
        if (d != NULL) {
            list[n++] = &d->ibv;
        }
    }
    pthread_mutex_unlock(&vabi_devices_lock);
    axon_dev_free_list(infos);
    if (num_devices != NULL) {
        *num_devices = n;
    }
    return list;
}

void ibv_free_device_list(struct ibv_device **list)
{
    free(list);
}

const char *ibv_get_device_name(struct ibv_device *device)
{
    return device->name;
}

__be64 ibv_get_device_guid(struct ibv_device *device)
{
    return htobe64(axon_container_of(device, vabi_device_t, ibv)->node_guid);
}

int ibv_get_device_index(struct ibv_device *device)
{
    (void)device;
    return -1;   /* the kernel's index of the device: there is no kernel device */
}

static int vabi_query_port_sized(struct ibv_context *ctx, uint8_t port_num,
                                 struct ibv_port_attr *attr, size_t attr_size);
static int vabi_query_device_ex(struct ibv_context *ctx,
                                const struct ibv_query_device_ex_input *input,
                                struct ibv_device_attr_ex *attr, size_t attr_size);

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
    axon_dev_context_t *dev;
    vabi_context_t *c;
    int ret;

    pthread_once(&vabi_config_once, vabi_config_read);
    if ((ret = axon_dev_open(device->name, &dev)) != 0) {
        return vabi_fail_null(ret);
    }
    if ((c = vabi_context_new(device, dev)) == NULL) {
        axon_dev_close(dev);
        return vabi_fail_null(ENOMEM);
    }
    return &c->vctx.context;
}

/* The ibv_context of an open device-layer context (also librdmacm's, vabi_rdmacm.c). */
vabi_context_t *vabi_context_new(struct ibv_device *device, axon_dev_context_t *dev)
{
    vabi_context_t *c = calloc(1, sizeof(*c));

    if (c == NULL) {
        axon_error("libibverbs on softib: no memory to open %s", device->name);
        return NULL;
    }
    c->dev                              = dev;
    c->vctx.sz                          = sizeof(c->vctx);
    c->vctx.query_port                  = vabi_query_port_sized;
    c->vctx.query_device_ex             = vabi_query_device_ex;
    c->vctx.create_qp_ex                = vabi_create_qp_ex;
    c->vctx.create_srq_ex               = vabi_create_srq_ex;
    c->vctx.create_cq_ex                = vabi_create_cq_ex;
    c->vctx.context.device              = device;
    c->vctx.context.cmd_fd              = -1;   /* no kernel command channel */
    c->vctx.context.async_fd            = c->dev->async_fd;
    c->vctx.context.num_comp_vectors    = 1;
    c->vctx.context.abi_compat          = __VERBS_ABI_IS_EXTENDED;
    c->vctx.context.ops._compat_query_device = ibv_query_device;
    c->vctx.context.ops._compat_query_port   = ibv_query_port;
    c->vctx.context.ops.poll_cq         = vabi_poll_cq;
    c->vctx.context.ops.req_notify_cq   = vabi_req_notify_cq;
    c->vctx.context.ops.post_send       = vabi_post_send;
    c->vctx.context.ops.post_recv       = vabi_post_recv;
    c->vctx.context.ops.post_srq_recv   = vabi_post_srq_recv;
    pthread_mutex_init(&c->vctx.context.mutex, NULL);
    return c;
}

int ibv_close_device(struct ibv_context *context)
{
    vabi_context_t *c = vabi_context(context);

    axon_dev_close(c->dev);
    pthread_mutex_destroy(&c->vctx.context.mutex);
    free(c);
    return 0;
}

int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *device_attr)
{
    axon_dev_attr_t attr;
    const axon_dev_attr_t *in = &attr;
    struct ibv_device_attr *out = device_attr;
    int ret;

    if ((ret = axon_dev_query_device(vabi_dev(context), &attr)) != 0) {
        return ret;
    }
    AXON_DEV_IBV_CONVERT(AXON_DEV_IBV_DEVICE_ATTR);
    out->node_guid      = htobe64(attr.node_guid);     /* network order in ibv */
    out->sys_image_guid = htobe64(attr.sys_image_guid);
    return 0;
}

/*
 * The extended attributes: softib has none of the extensions (no ODP, TSO,
 * RSS, timestamps, tag matching, device memory), so all stay 0 and
 * comp_mask says none is valid.
 */
static int vabi_query_device_ex(struct ibv_context *ctx,
                                const struct ibv_query_device_ex_input *input,
                                struct ibv_device_attr_ex *attr, size_t attr_size)
{
    struct ibv_device_attr_ex ex;
    int ret;

    if ((input != NULL) && input->comp_mask) {
        axon_error("libibverbs on softib: query_device_ex: input comp_mask 0x%x", input->comp_mask);
        return EINVAL;
    }
    if (attr_size < sizeof(ex.orig_attr)) {
        axon_error("libibverbs on softib: query_device_ex: attr_size %zu", attr_size);
        return EINVAL;
    }
    memset(&ex, 0, sizeof(ex));
    if ((ret = ibv_query_device(ctx, &ex.orig_attr)) != 0) {
        return ret;
    }
    ex.device_cap_flags_ex = ex.orig_attr.device_cap_flags;
    ex.phys_port_cnt_ex    = ex.orig_attr.phys_port_cnt;
    memcpy(attr, &ex, (attr_size < sizeof(ex)) ? attr_size : sizeof(ex));
    return 0;
}

static int vabi_query_port_sized(struct ibv_context *ctx, uint8_t port_num,
                                 struct ibv_port_attr *port_attr, size_t attr_size)
{
    axon_dev_port_attr_t attr;
    struct ibv_port_attr full;
    const axon_dev_port_attr_t *in = &attr;
    struct ibv_port_attr *out = &full;
    int ret;

    if ((ret = axon_dev_query_port(vabi_dev(ctx), port_num, &attr)) != 0) {
        return ret;
    }
    AXON_DEV_IBV_CONVERT(AXON_DEV_IBV_PORT_ATTR);
    memcpy(port_attr, &full, (attr_size < sizeof(full)) ? attr_size : sizeof(full));
    return 0;
}

/* The old entry point: its struct ends at link_layer. */
int ibv_query_port(struct ibv_context *context, uint8_t port_num,
                   struct _compat_ibv_port_attr *port_attr)
{
    return vabi_query_port_sized(context, port_num, (struct ibv_port_attr*)(void*)port_attr,
                                 offsetof(struct ibv_port_attr, flags));
}

int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index, union ibv_gid *gid)
{
    return axon_dev_query_gid(vabi_dev(context), port_num, index, (axon_dev_gid_t*)(void*)gid) ?
           -1 : 0;
}

int ibv_query_pkey(struct ibv_context *context, uint8_t port_num, int index, __be16 *pkey)
{
    uint16_t value;

    if (axon_dev_query_pkey(vabi_dev(context), port_num, index, &value)) {
        return -1;
    }
    *pkey = htobe16(value);
    return 0;
}

int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num, __be16 pkey)
{
    struct ibv_port_attr attr;
    __be16 entry;
    int i;

    if (vabi_query_port_sized(context, port_num, &attr, sizeof(attr))) {
        return -EINVAL;
    }
    for (i = 0; i < attr.pkey_tbl_len; i++) {
        if (!ibv_query_pkey(context, port_num, i, &entry) && (entry == pkey)) {
            return i;
        }
    }
    return -ENOENT;
}

/*
 * softib's GIDs are IPv4-mapped addresses carried over IP (shm or UDP):
 * RoCE v2's addressing, which is what consumers choose GIDs by.
 */
static int vabi_gid_entry(struct ibv_context *context, uint32_t port_num, uint32_t index,
                          struct ibv_gid_entry *entry)
{
    memset(entry, 0, sizeof(*entry));
    if (axon_dev_query_gid(vabi_dev(context), (uint8_t)port_num, (int)index,
                           (axon_dev_gid_t*)(void*)&entry->gid)) {
        return ENODATA;
    }
    entry->gid_index    = index;
    entry->port_num     = port_num;
    entry->gid_type     = IBV_GID_TYPE_ROCE_V2;
    entry->ndev_ifindex = 0;   /* no network device */
    return 0;
}

int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num, uint32_t gid_index,
                      struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size)
{
    struct ibv_gid_entry e;
    int ret;

    if (flags || (entry_size < sizeof(e))) {
        axon_error("libibverbs on softib: query_gid_ex: flags 0x%x, entry_size %zu", flags,
                   entry_size);
        return EINVAL;
    }
    if ((ret = vabi_gid_entry(context, port_num, gid_index, &e)) == 0) {
        *entry = e;
    }
    return ret;
}

ssize_t _ibv_query_gid_table(struct ibv_context *context, struct ibv_gid_entry *entries,
                             size_t max_entries, uint32_t flags, size_t entry_size)
{
    struct ibv_device_attr dattr;
    struct ibv_port_attr pattr;
    size_t n = 0;
    int port, i;

    if (flags || (entry_size < sizeof(*entries))) {
        axon_error("libibverbs on softib: query_gid_table: flags 0x%x, entry_size %zu", flags,
                   entry_size);
        return -EINVAL;
    }
    if (ibv_query_device(context, &dattr)) {
        return -EIO;
    }
    for (port = 1; port <= dattr.phys_port_cnt; port++) {
        if (vabi_query_port_sized(context, (uint8_t)port, &pattr, sizeof(pattr))) {
            return -EIO;
        }
        for (i = 0; i < pattr.gid_tbl_len; i++) {
            if (n == max_entries) {
                return -EINVAL;   /* as rdma-core: the table does not fit */
            }
            if (!vabi_gid_entry(context, (uint32_t)port, (uint32_t)i,
                                (struct ibv_gid_entry*)(void*)((char*)entries + n * entry_size))) {
                n++;
            }
        }
    }
    return (ssize_t)n;
}

/* IBVERBS_PRIVATE_34, used by ibv_devinfo: the sysfs view of a GID's type. */
enum vabi_gid_type_sysfs { VABI_GID_TYPE_SYSFS_IB_ROCE_V1, VABI_GID_TYPE_SYSFS_ROCE_V2 };
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index,
                       enum vabi_gid_type_sysfs *type);
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index,
                       enum vabi_gid_type_sysfs *type)
{
    struct ibv_gid_entry e;

    if (vabi_gid_entry(context, port_num, index, &e)) {
        errno = EINVAL;
        return -1;
    }
    *type = VABI_GID_TYPE_SYSFS_ROCE_V2;
    return 0;
}
