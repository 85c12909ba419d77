# components/rdmacm: rc with the RDMA connection manager bringing its
# connections up (libaxon_rdmacm.so): the descriptor and the manager here,
# the rest is the rc library (components/verbs/local.mk).
pkglib_LTLIBRARIES += components/rdmacm/libaxon_rdmacm.la
components_rdmacm_libaxon_rdmacm_la_SOURCES = \
	components/rdmacm/rdmacm_component.c \
	components/rdmacm/rdmacm_iface.c \
	components/rdmacm/rdmacm_cm.c \
	components/rdmacm/rdmacm.h
components_rdmacm_libaxon_rdmacm_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/components/verbs
components_rdmacm_libaxon_rdmacm_la_CFLAGS  = $(AM_CFLAGS) -fvisibility=hidden
components_rdmacm_libaxon_rdmacm_la_LDFLAGS = -module -avoid-version -shared
components_rdmacm_libaxon_rdmacm_la_LIBADD  = components/verbs/librc.la \
	components/verbs/libverbs_common.la libaxon.la
