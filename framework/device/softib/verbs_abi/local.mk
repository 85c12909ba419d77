# framework/device/softib/verbs_abi/: libibverbs.so.1 on softib, for
# unmodified verbs programs (LD_LIBRARY_PATH=$(libdir)/axon/softib-verbs).
# Built from softib and the parts of the framework softib uses, not from
# libaxon: libaxon links the real libibverbs (its rdma-core back end), which
# this library replaces in the programs that load it. Needs libibverbs'
# headers (the ABI it implements), so only when configure found them.
if HAVE_IBVERBS
softibverbsdir = $(pkglibdir)/softib-verbs
softibverbs_LTLIBRARIES = framework/device/softib/verbs_abi/libibverbs.la
framework_device_softib_verbs_abi_libibverbs_la_SOURCES = \
	framework/device/softib/verbs_abi/vabi_device.c \
	framework/device/softib/verbs_abi/vabi_mem.c \
	framework/device/softib/verbs_abi/vabi_cq.c \
	framework/device/softib/verbs_abi/vabi_qp.c \
	framework/device/softib/verbs_abi/vabi_post.c \
	framework/device/softib/verbs_abi/vabi_wr.c \
	framework/device/softib/verbs_abi/vabi_async.c \
	framework/device/softib/verbs_abi/vabi_strings.c \
	framework/device/softib/verbs_abi/vabi_host.c \
	framework/device/softib/verbs_abi/vabi_unsupported.c \
	framework/device/softib/verbs_abi/vabi_rdmacm.c \
	$(axon_base_sources) \
	framework/device/dev.c \
	framework/device/dev_cm.c \
	$(softib_sources)
# Own flags, so its objects are its own (libaxon's are built the same way
# but are not shared between the two libraries).
framework_device_softib_verbs_abi_libibverbs_la_CPPFLAGS = $(AM_CPPFLAGS)
framework_device_softib_verbs_abi_libibverbs_la_LDFLAGS = \
	-version-number 1:14:44 -no-undefined \
	-Wl,--version-script=$(srcdir)/framework/device/softib/verbs_abi/libibverbs.map
framework_device_softib_verbs_abi_libibverbs_la_LIBADD = -lpthread
EXTRA_framework_device_softib_verbs_abi_libibverbs_la_DEPENDENCIES = \
	framework/device/softib/verbs_abi/libibverbs.map
noinst_HEADERS += framework/device/softib/verbs_abi/vabi.h framework/device/softib/verbs_abi/vabi_rdmacm.h
endif
EXTRA_DIST += framework/device/softib/verbs_abi/libibverbs.map
