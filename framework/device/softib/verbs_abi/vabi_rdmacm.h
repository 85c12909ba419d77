/*
 * What librdmacm on softib (framework/device/softib/rdmacm_abi/) takes from
 * this libibverbs: the connection manager of the same softib instance, and
 * the ibv objects of its devices and QPs, so that id->verbs, the program's
 * PDs and CQs and rdma_create_qp's QPs are this library's objects. One
 * table behind one private symbol (AXON_SOFTIB_RDMACM_BRIDGE in
 * libibverbs.map): a program that also loads libaxon, which defines the
 * axon_dev_cm_* names itself, cannot mix the two instances up.
 */
#ifndef AXON_VABI_RDMACM_H
#define AXON_VABI_RDMACM_H

#include <infiniband/verbs.h>
#include "dev_cm.h"

typedef struct vabi_rdmacm_bridge {
    int  (*create_event_channel)(axon_dev_cm_channel_t **channel_p);
    int  (*destroy_event_channel)(axon_dev_cm_channel_t *channel);
    int  (*get_event)(axon_dev_cm_channel_t *channel, axon_dev_cm_event_t **event_p);
    int  (*ack_event)(axon_dev_cm_event_t *event);
    const char *(*event_str)(axon_dev_cm_event_type_t event);
    int  (*create_id)(axon_dev_cm_channel_t *channel, void *context,
                      axon_dev_cm_port_space_t ps, axon_dev_cm_id_t **id_p);
    int  (*destroy_id)(axon_dev_cm_id_t *id);
    int  (*bind_addr)(axon_dev_cm_id_t *id, const struct sockaddr *addr);
    int  (*listen)(axon_dev_cm_id_t *id, int backlog);
    int  (*resolve_addr)(axon_dev_cm_id_t *id, const struct sockaddr *src,
                         const struct sockaddr *dst, int timeout_ms);
    int  (*resolve_route)(axon_dev_cm_id_t *id, int timeout_ms);
    int  (*connect)(axon_dev_cm_id_t *id, const axon_dev_cm_conn_param_t *param);
    int  (*accept)(axon_dev_cm_id_t *id, const axon_dev_cm_conn_param_t *param);
    int  (*reject)(axon_dev_cm_id_t *id, const void *private_data, uint8_t private_data_len);
    int  (*establish)(axon_dev_cm_id_t *id);
    int  (*disconnect)(axon_dev_cm_id_t *id);
    int  (*set_option)(axon_dev_cm_id_t *id, int level, int optname, const void *optval,
                       size_t optlen);
    int  (*init_qp_attr)(axon_dev_cm_id_t *id, axon_dev_qp_attr_t *attr, int *mask_p);
    int  (*join_multicast)(axon_dev_cm_id_t *id, const struct sockaddr *addr, int send_only,
                           void *context);
    int  (*leave_multicast)(axon_dev_cm_id_t *id, const struct sockaddr *addr);
    /* The ibv_context of a device the CM bound an id to: one per device, kept
     * open for the process (the CM would close it with its last id). */
    struct ibv_context *(*context)(axon_dev_context_t *dev);
    /* The same ibv_context by device name (rdma_get_devices); errno set on NULL. */
    struct ibv_context *(*context_by_name)(const char *name);
    /* An ibv_qp made by the CM on id (errno set on NULL); ibv_destroy_qp of it
     * goes back through the CM. */
    struct ibv_qp *(*create_qp)(axon_dev_cm_id_t *id, struct ibv_pd *pd,
                                struct ibv_qp_init_attr *attr, uint32_t create_flags);
    /* The id goes away before its QP: the QP becomes a plain one. */
    void (*qp_detach)(struct ibv_qp *qp);
    /* The ibv_wr_* interface of send_ops (IBV_QP_EX_WITH_*) on a QP made by create_qp
     * (rdma_create_qp_ex): 0 or an errno, logged. */
    int  (*qp_ex_init)(struct ibv_qp *qp, uint64_t send_ops);
    /* One log line: "librdmacm on softib: <message>". */
    void (*log_error)(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
    /* What of ibv_qp_init_attr_ex's extensions softib takes: 0 or EOPNOTSUPP (logged). */
    int  (*qp_ex_check)(const struct ibv_qp_init_attr_ex *attr, const char *what);
} vabi_rdmacm_bridge_t;

const vabi_rdmacm_bridge_t *axon_softib_rdmacm_bridge(void);

#endif
