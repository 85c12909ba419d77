# components/verbs: the ud transport (libaxon_ud.so), with its own reliability.
# verbs_common.c (helper code shared with rc) is compiled in: each plugin is one
# self-contained dlopen'd library.
pkglib_LTLIBRARIES += components/verbs/libaxon_ud.la
components_verbs_libaxon_ud_la_SOURCES = \
	components/verbs/verbs_common.c \
	components/verbs/ud_component.c \
	components/verbs/ud_iface.c \
	components/verbs/ud_ep.c \
	components/verbs/ud_reliab.c \
	components/verbs/ud_alive.c \
	components/verbs/verbs_common.h \
	components/verbs/ud_wire.h \
	components/verbs/ud.h
components_verbs_libaxon_ud_la_CFLAGS  = $(AM_CFLAGS) -fvisibility=hidden
components_verbs_libaxon_ud_la_LDFLAGS = -module -avoid-version -shared
components_verbs_libaxon_ud_la_LIBADD  = libaxon.la
