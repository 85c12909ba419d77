# components/softib/: the software RDMA device. It is a device-layer back end,
# not a transport, so it is linked into libaxon where every RDMA component
# finds it through framework/device.
noinst_HEADERS += \
	components/softib/softib_wire.h

# The wire: slot registry, shm rings and doorbells, UDP sockets, fault injection.
libaxon_la_SOURCES += \
	components/softib/softib_registry.c \
	components/softib/softib_wire.c \
	components/softib/softib_wire_shm.c \
	components/softib/softib_wire_udp.c \
	components/softib/softib_wire_inject.c
noinst_HEADERS += \
	components/softib/softib_registry.h \
	components/softib/softib_wire_priv.h

# The device: verbs objects (device, mr, cq, srq, qp, ah), the QP state table,
# post-time checks, and the engine by stage (pkt, req, resp, comp, progress), with
# the atomics the responder executes (amo).
libaxon_la_SOURCES += \
	components/softib/softib_config.c \
	components/softib/softib_device.c \
	components/softib/softib_mr.c \
	components/softib/softib_ah.c \
	components/softib/softib_cq.c \
	components/softib/softib_srq.c \
	components/softib/softib_qp.c \
	components/softib/softib_qp_attr.c \
	components/softib/softib_post.c \
	components/softib/softib_pkt.c \
	components/softib/softib_req.c \
	components/softib/softib_resp.c \
	components/softib/softib_comp.c \
	components/softib/softib_amo.c \
	components/softib/softib_progress.c
noinst_HEADERS += \
	components/softib/softib.h \
	components/softib/softib_amo.h \
	components/softib/softib_pkt.h

# The connection manager: IB CM messages over TCP (helper C).
libaxon_la_SOURCES += \
	components/softib/softib_cm.c \
	components/softib/softib_cm_conn.c \
	components/softib/softib_cm_progress.c
noinst_HEADERS += \
	components/softib/softib_cm.h
