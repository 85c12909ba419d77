# components/verbs: shared verbs code and the rc transport (libaxon_rc.so).
# verbs_common.c is compiled into both plugins (rc here, ud in ud.mk): each
# plugin is one self-contained dlopen'd library.
pkglib_LTLIBRARIES += components/verbs/libaxon_rc.la
components_verbs_libaxon_rc_la_SOURCES = \
	components/verbs/verbs_common.c \
	components/verbs/rc_component.c \
	components/verbs/rc_iface.c \
	components/verbs/rc_conn.c \
	components/verbs/rc_ep.c \
	components/verbs/rc_rdma.c \
	components/verbs/rc_amo.c \
	components/verbs/verbs_common.h \
	components/verbs/rc_wire.h \
	components/verbs/rc.h
components_verbs_libaxon_rc_la_CFLAGS  = $(AM_CFLAGS) -fvisibility=hidden
components_verbs_libaxon_rc_la_LDFLAGS = -module -avoid-version -shared
components_verbs_libaxon_rc_la_LIBADD  = libaxon.la
