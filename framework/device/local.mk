# framework/device/: the verbs-shaped device layer and its rdma-core back end.
noinst_HEADERS += \
	framework/device/dev.h \
	framework/device/dev_backend.h
