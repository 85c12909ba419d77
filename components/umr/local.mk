# components/umr: layouts as one device key by user-mode memory registration
# (umr.h), the service the verbs family's memory domain (rc_md.c) calls for
# AXON_MEM_MAP_LAYOUT. A convenience library that librc links, so rc,
# rdmacm and dc each carry it.
noinst_LTLIBRARIES += components/umr/libumr.la
components_umr_libumr_la_SOURCES = \
	components/umr/umr_key.c \
	components/umr/umr_cache.c \
	components/umr/umr.h
components_umr_libumr_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/components/verbs
components_umr_libumr_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
