# components/rdmacm: rc's data path on QPs connected by the RDMA connection
# manager (libaxon_rdmacm.so). The rc sources are compiled in (each plugin is
# one self-contained dlopen'd library); rc_component.c only for its
# configuration table (AXON_RC_EMBEDDED leaves its descriptor out).
pkglib_LTLIBRARIES += components/rdmacm/libaxon_rdmacm.la
components_rdmacm_libaxon_rdmacm_la_SOURCES = \
	components/verbs/verbs_common.c \
	components/verbs/rc_component.c \
	components/verbs/rc_iface.c \
	components/verbs/rc_conn.c \
	components/verbs/rc_ep.c \
	components/verbs/rc_rdma.c \
	components/verbs/rc_amo.c \
	components/verbs/rc_adopt.c \
	components/verbs/rc_adopt.h \
	components/rdmacm/rdmacm_component.c \
	components/rdmacm/rdmacm_iface.c \
	components/rdmacm/rdmacm_cm.c \
	components/rdmacm/rdmacm.h
components_rdmacm_libaxon_rdmacm_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/components/verbs \
	-DAXON_RC_EMBEDDED
components_rdmacm_libaxon_rdmacm_la_CFLAGS  = $(AM_CFLAGS) -fvisibility=hidden
components_rdmacm_libaxon_rdmacm_la_LDFLAGS = -module -avoid-version -shared
components_rdmacm_libaxon_rdmacm_la_LIBADD  = libaxon.la
