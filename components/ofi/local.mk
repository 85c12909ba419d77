# components/ofi: any fabric libfabric drives, through one of its providers.
if HAVE_LIBFABRIC
pkglib_LTLIBRARIES += components/ofi/libaxon_ofi.la
components_ofi_libaxon_ofi_la_SOURCES = \
	components/ofi/ofi_component.c \
	components/ofi/ofi_iface.c \
	components/ofi/ofi_ep.c \
	components/ofi/ofi_md.c \
	components/ofi/ofi_rma.c \
	components/ofi/ofi_lib.c \
	components/ofi/ofi_lib.h \
	components/ofi/ofi_wire.h \
	components/ofi/ofi.h
components_ofi_libaxon_ofi_la_CPPFLAGS = $(AM_CPPFLAGS) $(LIBFABRIC_CFLAGS)
components_ofi_libaxon_ofi_la_CFLAGS   = $(AM_CFLAGS) -fvisibility=hidden
components_ofi_libaxon_ofi_la_LDFLAGS  = -module -avoid-version -shared
components_ofi_libaxon_ofi_la_LIBADD   = libaxon.la -ldl -lpthread  # libfabric: dlopen'ed (ofi_lib.h)
endif
