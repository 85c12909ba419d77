/*
 * rc_adopt.c: rc's data path on QPs the connection manager connected (the
 * rdmacm transport). See rc_adopt.c for the life of such a connection.
 */
#ifndef AXON_RC_ADOPT_H
#define AXON_RC_ADOPT_H

#include "dev_cm.h"
#include "rc.h"

/* conn->cm_flags */
#define AXON_RC_ADOPT_F_ESTABLISHED 0x01   /* the CM said ESTABLISHED: disconnect on teardown */
#define AXON_RC_ADOPT_F_LOST_RACE   0x02   /* the peer connects to us instead (simultaneous) */

/* The iface's device through the CM's shared context (ext->dev_open / dev_close). */
axon_status_t axon_rc_adopt_dev_open(axon_verbs_dev_t *dev, const char *dev_name, int gid_index);
void          axon_rc_adopt_dev_close(axon_verbs_dev_t *dev);
/* ext->conn_teardown: disconnect (if it was up), destroy the QP and the id. */
void          axon_rc_adopt_teardown(axon_rc_conn_t *conn);

/* The attributes of a QP for create_qp on a CM id: the iface's CQs and SRQ. */
void          axon_rc_adopt_qp_attr(const axon_rc_iface_t *iface, axon_dev_qp_init_attr_t *attr);
/* A connection on qp (made by cm_id), waiting for ESTABLISHED within RC_CONNECT_TIMEOUT. */
axon_status_t axon_rc_conn_adopt(axon_rc_iface_t *iface, axon_dev_qp_t *qp, uint64_t peer_uuid,
                                 void *cm_id, int active, axon_rc_conn_t **conn_p);
/* What the peer said in its private data: its receive window, keep-alive target. */
void          axon_rc_conn_adopt_peer(axon_rc_conn_t *conn, uint16_t window, uint64_t ka_addr,
                                      uint32_t ka_rkey);
/* ESTABLISHED: sends may go. */
void          axon_rc_conn_adopt_established(axon_rc_conn_t *conn);
/* A new rc ep on conn (ep_create). */
axon_status_t axon_rc_adopt_ep_new(axon_rc_iface_t *iface, axon_rc_conn_t *conn,
                                   uint64_t peer_uuid, axon_tl_ep_t **ep_p);
/* Move every ep of from to to (the connection that won a simultaneous connect). */
void          axon_rc_adopt_move_eps(axon_rc_conn_t *from, axon_rc_conn_t *to);

#endif
