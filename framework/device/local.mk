# framework/device/: the verbs-shaped device layer and its rdma-core back end.
libaxon_la_SOURCES += \
	framework/device/dev.c

noinst_HEADERS += \
	framework/device/dev.h \
	framework/device/dev_backend.h \
	framework/device/dev_rdmacore.h

# rdma-core: only when configure found libibverbs (and libmlx5 for mlx5dv).
if HAVE_IBVERBS
libaxon_la_SOURCES += \
	framework/device/dev_rdmacore.c
libaxon_la_LIBADD += $(IBVERBS_LIBS) $(MLX5DV_LIBS)
endif
