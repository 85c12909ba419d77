# components/verbs: the ud transport (libaxon_ud.so), with its own reliability,
# on the verbs helpers of libverbs_common (local.mk).
pkglib_LTLIBRARIES += components/verbs/libaxon_ud.la
components_verbs_libaxon_ud_la_SOURCES = \
	components/verbs/ud_component.c \
	components/verbs/ud_iface.c \
	components/verbs/ud_ep.c \
	components/verbs/ud_reliab.c \
	components/verbs/ud_alive.c \
	components/verbs/ud_wire.h \
	components/verbs/ud.h
components_verbs_libaxon_ud_la_CFLAGS  = $(AM_CFLAGS) -fvisibility=hidden
components_verbs_libaxon_ud_la_LDFLAGS = -module -avoid-version -shared
components_verbs_libaxon_ud_la_LIBADD  = components/verbs/libverbs_common.la libaxon.la
