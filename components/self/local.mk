# components/self: loopback to the same worker.
pkglib_LTLIBRARIES += components/self/libaxon_self.la
components_self_libaxon_self_la_SOURCES = components/self/self_component.c
components_self_libaxon_self_la_CFLAGS  = $(AM_CFLAGS) -fvisibility=hidden
components_self_libaxon_self_la_LDFLAGS = -module -avoid-version -shared
components_self_libaxon_self_la_LIBADD  = libaxon.la
