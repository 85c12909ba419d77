# components/xchannel: collective offload over cross-channel devices (libaxon_xchannel.so),
# on the verbs helpers of libverbs_common (components/verbs/local.mk).
pkglib_LTLIBRARIES += components/xchannel/libaxon_xchannel.la
components_xchannel_libaxon_xchannel_la_SOURCES = \
	components/xchannel/xc_component.c \
	components/xchannel/xc_team.c \
	components/xchannel/xc_coll.c \
	components/xchannel/xc_chain.c \
	components/xchannel/xc_barrier.c \
	components/xchannel/xc_bcast.c \
	components/xchannel/xc_allreduce.c \
	components/xchannel/xchannel.h
components_xchannel_libaxon_xchannel_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/components/verbs
components_xchannel_libaxon_xchannel_la_CFLAGS  = $(AM_CFLAGS) -fvisibility=hidden
components_xchannel_libaxon_xchannel_la_LDFLAGS = -module -avoid-version -shared
components_xchannel_libaxon_xchannel_la_LIBADD  = components/verbs/libverbs_common.la libaxon.la
