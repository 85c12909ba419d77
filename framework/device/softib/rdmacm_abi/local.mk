# framework/device/softib/rdmacm_abi/: librdmacm.so.1 on softib's connection
# manager, next to verbs_abi's libibverbs.so.1 (one LD_LIBRARY_PATH serves
# both). It links that libibverbs and reaches its softib through the bridge
# (vabi_rdmacm.h), so the two libraries share devices, PDs, CQs and QPs.
# Needs librdmacm's headers (the ABI it implements).
if HAVE_IBVERBS
if HAVE_RDMACM
softibverbs_LTLIBRARIES += framework/device/softib/rdmacm_abi/librdmacm.la
framework_device_softib_rdmacm_abi_librdmacm_la_SOURCES = \
	framework/device/softib/rdmacm_abi/rcm_id.c \
	framework/device/softib/rdmacm_abi/rcm_conn.c \
	framework/device/softib/rdmacm_abi/rcm_addrinfo.c \
	framework/device/softib/rdmacm_abi/rcm_sync.c \
	framework/device/softib/rdmacm_abi/rcm_mcast.c \
	framework/device/softib/rdmacm_abi/rcm_unsupported.c
framework_device_softib_rdmacm_abi_librdmacm_la_CPPFLAGS = $(AM_CPPFLAGS) \
	-I$(srcdir)/framework/device/softib/verbs_abi
framework_device_softib_rdmacm_abi_librdmacm_la_LDFLAGS = \
	-version-number 1:3:44 -no-undefined \
	-Wl,--version-script=$(srcdir)/framework/device/softib/rdmacm_abi/librdmacm.map
framework_device_softib_rdmacm_abi_librdmacm_la_LIBADD = \
	framework/device/softib/verbs_abi/libibverbs.la
EXTRA_framework_device_softib_rdmacm_abi_librdmacm_la_DEPENDENCIES = \
	framework/device/softib/rdmacm_abi/librdmacm.map
noinst_HEADERS += framework/device/softib/rdmacm_abi/rcm.h
endif
endif
EXTRA_DIST += framework/device/softib/rdmacm_abi/librdmacm.map
