/*
 * The entry points softib cannot serve, each failing the way its verb
 * reports failure (an errno value, or NULL / -1 with errno) after one log
 * line naming it: memory re-registration, imports of kernel
 * objects, dma-buf regions, ECE, L2 address resolution, the kernel-ABI
 * struct converters; the 1.0 ABI (struct layouts of 2006 that no binary
 * built since uses); and the private interface of rdma-core's provider
 * libraries (IBVERBS_PRIVATE_34), which wraps kernel commands: a provider
 * library may load alongside (perftest links libmlx5 and libefa), it is
 * never asked to drive a device.
 */
#include <stdbool.h>
#include "log.h"
#include "vabi.h"

int vabi_unsupported(const char *verb)
{
    axon_warn("libibverbs on softib: %s is not supported", verb);
    errno = EOPNOTSUPP;
    return EOPNOTSUPP;
}

void *vabi_unsupported_null(const char *verb)
{
    vabi_unsupported(verb);
    return NULL;
}

/* A kernel-only entry point of some return kind: INT fails with EOPNOTSUPP, PTR with NULL. */
#define VABI_KERNEL_INT(_name) \
    int _name(void); \
    int _name(void) { return vabi_unsupported(#_name " (needs a kernel device)"); }
#define VABI_KERNEL_PTR(_name) \
    void *_name(void); \
    void *_name(void) { return vabi_unsupported_null(#_name " (needs a kernel device)"); }
#define VABI_KERNEL_VOID(_name) \
    void _name(void); \
    void _name(void) { vabi_unsupported(#_name " (needs a kernel device)"); }

/* ------------------------------------------------------------ public verbs */

int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t length,
                 int access)
{
    (void)mr; (void)flags; (void)pd; (void)addr; (void)length; (void)access;
    vabi_unsupported("ibv_rereg_mr");
    return IBV_REREG_MR_ERR_INPUT;   /* the old region stays valid */
}

struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
                                 uint64_t iova, int fd, int access)
{
    (void)pd; (void)offset; (void)length; (void)iova; (void)fd; (void)access;
    return vabi_unsupported_null("ibv_reg_dmabuf_mr");
}

int ibv_resolve_eth_l2_from_gid(struct ibv_context *context, struct ibv_ah_attr *attr,
                                uint8_t eth_mac[6], uint16_t *vid)
{
    (void)context; (void)attr; (void)eth_mac; (void)vid;
    return vabi_unsupported("ibv_resolve_eth_l2_from_gid (softib's port has no Ethernet "
                            "address)");
}

struct ibv_context *ibv_import_device(int cmd_fd)
{
    (void)cmd_fd;
    return vabi_unsupported_null("ibv_import_device (needs a kernel device)");
}

struct ibv_pd *ibv_import_pd(struct ibv_context *context, uint32_t pd_handle)
{
    (void)context; (void)pd_handle;
    return vabi_unsupported_null("ibv_import_pd (needs a kernel device)");
}

struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
    (void)pd; (void)mr_handle;
    return vabi_unsupported_null("ibv_import_mr (needs a kernel device)");
}

struct ibv_dm *ibv_import_dm(struct ibv_context *context, uint32_t dm_handle)
{
    (void)context; (void)dm_handle;
    return vabi_unsupported_null("ibv_import_dm (needs a kernel device)");
}

/* Nothing can have been imported, so there is nothing to release. */
void ibv_unimport_pd(struct ibv_pd *pd)
{
    (void)pd;
    vabi_unsupported("ibv_unimport_pd (needs a kernel device)");
}

void ibv_unimport_mr(struct ibv_mr *mr)
{
    (void)mr;
    vabi_unsupported("ibv_unimport_mr (needs a kernel device)");
}

void ibv_unimport_dm(struct ibv_dm *dm)
{
    (void)dm;
    vabi_unsupported("ibv_unimport_dm (needs a kernel device)");
}

int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
    (void)qp; (void)ece;
    return vabi_unsupported("ibv_query_ece");
}

int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
    (void)qp; (void)ece;
    return vabi_unsupported("ibv_set_ece");
}

/* No ordering guarantee is claimed beyond what verbs promises. */
int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
    (void)qp; (void)op; (void)flags;
    return 0;
}

/* Converters of the kernel's uverbs structs: there is no kernel to give them. */
VABI_KERNEL_VOID(ibv_copy_qp_attr_from_kern)
VABI_KERNEL_VOID(ibv_copy_ah_attr_from_kern)
VABI_KERNEL_VOID(ibv_copy_path_rec_from_kern)
VABI_KERNEL_VOID(ibv_copy_path_rec_to_kern)

/* ------------------------------------------------------------ the 1.0 ABI */

#define VABI_COMPAT(_ver, _name, _def) \
    __attribute__((symver(#_name "@" _ver))) _def
#define VABI_COMPAT_INT(_ver, _name) VABI_COMPAT(_ver, _name, \
    int vabi_compat_##_name(void); \
    int vabi_compat_##_name(void) { return vabi_unsupported(#_name "@" _ver); })
#define VABI_COMPAT_PTR(_ver, _name) VABI_COMPAT(_ver, _name, \
    void *vabi_compat_##_name(void); \
    void *vabi_compat_##_name(void) { return vabi_unsupported_null(#_name "@" _ver); })
#define VABI_COMPAT_VOID(_ver, _name) VABI_COMPAT(_ver, _name, \
    void vabi_compat_##_name(void); \
    void vabi_compat_##_name(void) { vabi_unsupported(#_name "@" _ver); })

VABI_COMPAT_VOID("IBVERBS_1.0", ibv_ack_async_event)
VABI_COMPAT_VOID("IBVERBS_1.0", ibv_ack_cq_events)
VABI_COMPAT_PTR("IBVERBS_1.0", ibv_alloc_pd)
VABI_COMPAT_INT("IBVERBS_1.0", ibv_attach_mcast)
VABI_COMPAT_INT("IBVERBS_1.0", ibv_close_device)
VABI_COMPAT_PTR("IBVERBS_1.0", ibv_create_ah)
VABI_COMPAT_PTR("IBVERBS_1.0", ibv_create_cq)
VABI_COMPAT_PTR("IBVERBS_1.0", ibv_create_qp)
VABI_COMPAT_PTR("IBVERBS_1.0", ibv_create_srq)
VABI_COMPAT_INT("IBVERBS_1.0", ibv_dealloc_pd)
VABI_COMPAT_INT("IBVERBS_1.0", ibv_dereg_mr)
VABI_COMPAT_INT("IBVERBS_1.0", ibv_destroy_ah)
VABI_COMPAT_INT("IBVERBS_1.0", ibv_destroy_cq)
VABI_COMPAT_INT("IBVERBS_1.0", ibv_destroy_qp)
VABI_COMPAT_INT("IBVERBS_1.0", ibv_destroy_srq)
VABI_COMPAT_INT("IBVERBS_1.0", ibv_detach_mcast)
VABI_COMPAT_VOID("IBVERBS_1.0", ibv_free_device_list)
VABI_COMPAT_INT("IBVERBS_1.0", ibv_get_async_event)
VABI_COMPAT_INT("IBVERBS_1.0", ibv_get_cq_event)
VABI_COMPAT_INT("IBVERBS_1.0", ibv_get_device_guid)
VABI_COMPAT_PTR("IBVERBS_1.0", ibv_get_device_list)
VABI_COMPAT_PTR("IBVERBS_1.0", ibv_get_device_name)
VABI_COMPAT_INT("IBVERBS_1.0", ibv_modify_qp)
VABI_COMPAT_INT("IBVERBS_1.0", ibv_modify_srq)
VABI_COMPAT_PTR("IBVERBS_1.0", ibv_open_device)
VABI_COMPAT_INT("IBVERBS_1.0", ibv_query_device)
VABI_COMPAT_INT("IBVERBS_1.0", ibv_query_gid)
VABI_COMPAT_INT("IBVERBS_1.0", ibv_query_pkey)
VABI_COMPAT_INT("IBVERBS_1.0", ibv_query_port)
VABI_COMPAT_INT("IBVERBS_1.0", ibv_query_qp)
VABI_COMPAT_INT("IBVERBS_1.0", ibv_query_srq)
VABI_COMPAT_PTR("IBVERBS_1.0", ibv_reg_mr)
VABI_COMPAT_INT("IBVERBS_1.0", ibv_resize_cq)

/* The provider registration of rdma-core before 1.1's: providers are never loaded. */
VABI_COMPAT_VOID("IBVERBS_1.1", ibv_register_driver)

/* ------------------------------------------------------------ IBVERBS_PRIVATE_34 */

/* Read by a provider when it destroys objects of a disassociated device: none here. */
bool verbs_allow_disassociate_destroy;

/*
 * A provider library registers itself from its constructor when it loads;
 * that is expected (it may be linked into the program) and harmless: it is
 * never probed, as softib's devices are the only ones.
 */
void verbs_register_driver_34(const void *ops);
void verbs_register_driver_34(const void *ops)
{
    (void)ops;
}

/* The log call of providers; none runs here, but one that did would be heard. */
void __verbs_log(void *ctx, uint32_t level, const char *fmt, ...);
void __verbs_log(void *ctx, uint32_t level, const char *fmt, ...)
{
    (void)ctx; (void)level;
    axon_warn("libibverbs on softib: a provider logged: %s", fmt);
}

VABI_KERNEL_INT(__ioctl_final_num_attrs)
VABI_KERNEL_INT(execute_ioctl)
VABI_KERNEL_PTR(_verbs_init_and_alloc_context)
VABI_KERNEL_PTR(verbs_open_device)
VABI_KERNEL_VOID(verbs_init_cq)
VABI_KERNEL_VOID(verbs_set_ops)
VABI_KERNEL_VOID(verbs_uninit_context)
VABI_KERNEL_INT(ibv_read_ibdev_sysfs_file)
VABI_KERNEL_INT(ibv_cmd_advise_mr)
VABI_KERNEL_INT(ibv_cmd_alloc_dm)
VABI_KERNEL_INT(ibv_cmd_alloc_mw)
VABI_KERNEL_INT(ibv_cmd_alloc_pd)
VABI_KERNEL_INT(ibv_cmd_attach_mcast)
VABI_KERNEL_INT(ibv_cmd_close_xrcd)
VABI_KERNEL_INT(ibv_cmd_create_ah)
VABI_KERNEL_INT(ibv_cmd_create_counters)
VABI_KERNEL_INT(ibv_cmd_create_cq)
VABI_KERNEL_INT(ibv_cmd_create_cq_ex)
VABI_KERNEL_INT(ibv_cmd_create_flow)
VABI_KERNEL_INT(ibv_cmd_create_flow_action_esp)
VABI_KERNEL_INT(ibv_cmd_create_qp)
VABI_KERNEL_INT(ibv_cmd_create_qp_ex)
VABI_KERNEL_INT(ibv_cmd_create_qp_ex2)
VABI_KERNEL_INT(ibv_cmd_create_rwq_ind_table)
VABI_KERNEL_INT(ibv_cmd_create_srq)
VABI_KERNEL_INT(ibv_cmd_create_srq_ex)
VABI_KERNEL_INT(ibv_cmd_create_wq)
VABI_KERNEL_INT(ibv_cmd_dealloc_mw)
VABI_KERNEL_INT(ibv_cmd_dealloc_pd)
VABI_KERNEL_INT(ibv_cmd_dereg_mr)
VABI_KERNEL_INT(ibv_cmd_destroy_ah)
VABI_KERNEL_INT(ibv_cmd_destroy_counters)
VABI_KERNEL_INT(ibv_cmd_destroy_cq)
VABI_KERNEL_INT(ibv_cmd_destroy_flow)
VABI_KERNEL_INT(ibv_cmd_destroy_flow_action)
VABI_KERNEL_INT(ibv_cmd_destroy_qp)
VABI_KERNEL_INT(ibv_cmd_destroy_rwq_ind_table)
VABI_KERNEL_INT(ibv_cmd_destroy_srq)
VABI_KERNEL_INT(ibv_cmd_destroy_wq)
VABI_KERNEL_INT(ibv_cmd_detach_mcast)
VABI_KERNEL_INT(ibv_cmd_free_dm)
VABI_KERNEL_INT(ibv_cmd_get_context)
VABI_KERNEL_INT(ibv_cmd_modify_cq)
VABI_KERNEL_INT(ibv_cmd_modify_flow_action_esp)
VABI_KERNEL_INT(ibv_cmd_modify_qp)
VABI_KERNEL_INT(ibv_cmd_modify_qp_ex)
VABI_KERNEL_INT(ibv_cmd_modify_srq)
VABI_KERNEL_INT(ibv_cmd_modify_wq)
VABI_KERNEL_INT(ibv_cmd_open_qp)
VABI_KERNEL_INT(ibv_cmd_open_xrcd)
VABI_KERNEL_INT(ibv_cmd_poll_cq)
VABI_KERNEL_INT(ibv_cmd_post_recv)
VABI_KERNEL_INT(ibv_cmd_post_send)
VABI_KERNEL_INT(ibv_cmd_post_srq_recv)
VABI_KERNEL_INT(ibv_cmd_query_context)
VABI_KERNEL_INT(ibv_cmd_query_device_any)
VABI_KERNEL_INT(ibv_cmd_query_mr)
VABI_KERNEL_INT(ibv_cmd_query_port)
VABI_KERNEL_INT(ibv_cmd_query_qp)
VABI_KERNEL_INT(ibv_cmd_query_srq)
VABI_KERNEL_INT(ibv_cmd_read_counters)
VABI_KERNEL_INT(ibv_cmd_reg_dm_mr)
VABI_KERNEL_INT(ibv_cmd_reg_dmabuf_mr)
VABI_KERNEL_INT(ibv_cmd_reg_mr)
VABI_KERNEL_INT(ibv_cmd_req_notify_cq)
VABI_KERNEL_INT(ibv_cmd_rereg_mr)
VABI_KERNEL_INT(ibv_cmd_resize_cq)
