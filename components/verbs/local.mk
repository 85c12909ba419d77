# components/verbs: the verbs family. Each source is compiled once, into one
# of two convenience libraries that the dlopen'd plugins link:
#   libverbs_common: device, queue and buffer helpers (rc, rdmacm, ud, dc);
#   librc: the rc transport whatever brings its connections up (rc, rdmacm),
#   and rc's memory domain, key checks and atomics (dc too).
# libaxon_rc.so is librc with rc's own handshake; components/rdmacm adds
# the RDMA CM as the connection manager; ud.mk builds ud, dc.mk dc.
noinst_LTLIBRARIES += components/verbs/libverbs_common.la
components_verbs_libverbs_common_la_SOURCES = \
	components/verbs/verbs_common.c \
	components/verbs/verbs_common.h
components_verbs_libverbs_common_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden

noinst_LTLIBRARIES += components/verbs/librc.la
components_verbs_librc_la_SOURCES = \
	components/verbs/rc_config.c \
	components/verbs/rc_iface.c \
	components/verbs/rc_conn.c \
	components/verbs/rc_hs.c \
	components/verbs/rc_ep.c \
	components/verbs/rc_md.c \
	components/verbs/rc_rdma.c \
	components/verbs/rc_layout.c \
	components/verbs/rc_amo.c \
	components/verbs/rc_wire.h \
	components/verbs/rc.h
components_verbs_librc_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
components_verbs_librc_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/components/verbs \
	-I$(top_srcdir)/components/umr
components_verbs_librc_la_LIBADD = components/umr/libumr.la

pkglib_LTLIBRARIES += components/verbs/libaxon_rc.la
components_verbs_libaxon_rc_la_SOURCES = components/verbs/rc_component.c
components_verbs_libaxon_rc_la_CFLAGS  = $(AM_CFLAGS) -fvisibility=hidden
components_verbs_libaxon_rc_la_LDFLAGS = -module -avoid-version -shared
components_verbs_libaxon_rc_la_LIBADD  = components/verbs/librc.la \
	components/verbs/libverbs_common.la libaxon.la
