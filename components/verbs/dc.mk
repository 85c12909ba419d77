# components/verbs: the dc transport (libaxon_dc.so), Dynamically Connected:
# its own DCI pool, DCT, flow control and endpoints; rc's memory domain,
# key checks and atomics come from librc, the verbs helpers from
# libverbs_common (local.mk).
pkglib_LTLIBRARIES += components/verbs/libaxon_dc.la
components_verbs_libaxon_dc_la_SOURCES = \
	components/verbs/dc_component.c \
	components/verbs/dc_config.c \
	components/verbs/dc_iface.c \
	components/verbs/dc_dci.c \
	components/verbs/dc_replay.c \
	components/verbs/dc_ep.c \
	components/verbs/dc_fc.c \
	components/verbs/dc_bye.c \
	components/verbs/dc_rdma.c \
	components/verbs/dc_wire.h \
	components/verbs/dc.h
components_verbs_libaxon_dc_la_CFLAGS  = $(AM_CFLAGS) -fvisibility=hidden
components_verbs_libaxon_dc_la_LDFLAGS = -module -avoid-version -shared
components_verbs_libaxon_dc_la_LIBADD  = components/verbs/librc.la \
	components/verbs/libverbs_common.la libaxon.la
