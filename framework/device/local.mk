# framework/device/: the verbs-shaped device layer; its back ends are in
# softib/ (the software device) and rdmacore/ (rdma-core: real devices).
libaxon_la_SOURCES += \
	framework/device/dev.c

noinst_HEADERS += \
	framework/device/dev.h \
	framework/device/dev_calc.h \
	framework/device/dev_backend.h \
	framework/device/dev_ibv_map.h \
	framework/device/rdmacore/dev_rdmacore.h

# rdma-core: only when configure found libibverbs (and libmlx5 for mlx5dv).
if HAVE_IBVERBS
libaxon_la_SOURCES += \
	framework/device/rdmacore/dev_rdmacore.c
libaxon_la_LIBADD += $(IBVERBS_LIBS) $(MLX5DV_LIBS)
endif

# The connection manager (rdma_cm-shaped): front end, softib's is in
# softib/; librdmacm's (rdmacore/) when configure found it.
libaxon_la_SOURCES += \
	framework/device/dev_cm.c
noinst_HEADERS += \
	framework/device/dev_cm.h \
	framework/device/dev_cm_backend.h
if HAVE_IBVERBS
if HAVE_RDMACM
libaxon_la_SOURCES += \
	framework/device/rdmacore/dev_rdmacore_cm.c
noinst_HEADERS += \
	framework/device/rdmacore/dev_rdmacore_cm.h
libaxon_la_LIBADD += $(RDMACM_LIBS)
endif
endif
