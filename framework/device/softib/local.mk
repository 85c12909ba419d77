# framework/device/softib/: the software RDMA device, a back end of the device
# layer (as rdmacore/ is for real devices), linked into libaxon where every
# RDMA transport finds it through framework/device.
noinst_HEADERS += \
	framework/device/softib/softib_wire.h

# Its sources, also built into verbs_abi/'s libibverbs.so.1.
# The wire: slot registry, shm rings and doorbells, UDP sockets, fault injection,
# and the guard that keeps a copy from unmapped registered memory from crashing.
softib_sources = \
	framework/device/softib/softib_registry.c \
	framework/device/softib/softib_guard.c \
	framework/device/softib/softib_wire.c \
	framework/device/softib/softib_wire_shm.c \
	framework/device/softib/softib_wire_udp.c \
	framework/device/softib/softib_wire_inject.c
noinst_HEADERS += \
	framework/device/softib/softib_guard.h \
	framework/device/softib/softib_registry.h \
	framework/device/softib/softib_ring.h \
	framework/device/softib/softib_wire_priv.h

# The device: verbs objects (device, mr, cq, srq, qp, ah), the QP state table,
# post-time checks, and the engine by stage (pkt, req, resp, comp, progress), with
# the atomics the responder executes (amo) and the writes and reads a requester on
# this host places itself (direct).
softib_sources += \
	framework/device/softib/softib_config.c \
	framework/device/softib/softib_device.c \
	framework/device/softib/softib_async.c \
	framework/device/softib/softib_mr.c \
	framework/device/softib/softib_ah.c \
	framework/device/softib/softib_cq.c \
	framework/device/softib/softib_srq.c \
	framework/device/softib/softib_qp.c \
	framework/device/softib/softib_qp_attr.c \
	framework/device/softib/softib_post.c \
	framework/device/softib/softib_pkt.c \
	framework/device/softib/softib_req.c \
	framework/device/softib/softib_resp.c \
	framework/device/softib/softib_comp.c \
	framework/device/softib/softib_amo.c \
	framework/device/softib/softib_xchan.c \
	framework/device/softib/softib_dc.c \
	framework/device/softib/softib_direct.c \
	framework/device/softib/softib_umr.c \
	framework/device/softib/softib_mcast.c \
	framework/device/softib/softib_progress.c
noinst_HEADERS += \
	framework/device/softib/softib.h \
	framework/device/softib/softib_amo.h \
	framework/device/softib/softib_direct.h \
	framework/device/softib/softib_pkt.h

# The connection manager: IB CM messages over TCP (helper C).
softib_sources += \
	framework/device/softib/softib_cm.c \
	framework/device/softib/softib_cm_conn.c \
	framework/device/softib/softib_cm_mcast.c \
	framework/device/softib/softib_cm_msg.c \
	framework/device/softib/softib_cm_progress.c
noinst_HEADERS += \
	framework/device/softib/softib_cm.h

libaxon_la_SOURCES += $(softib_sources)
