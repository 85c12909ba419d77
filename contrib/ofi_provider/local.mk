# contrib/ofi_provider: the libfabric provider "axon" (libaxon-fi.so), a client of api/axon.h.
# libfabric loads it from FI_PROVIDER_PATH (or its default provider directory).
if HAVE_LIBFABRIC
pkglib_LTLIBRARIES += contrib/ofi_provider/libaxon-fi.la
contrib_ofi_provider_libaxon_fi_la_SOURCES = \
	contrib/ofi_provider/axon_fi.h \
	contrib/ofi_provider/axon_fi_info.c \
	contrib/ofi_provider/axon_fi_fabric.c \
	contrib/ofi_provider/axon_fi_domain.c \
	contrib/ofi_provider/axon_fi_name.c \
	contrib/ofi_provider/axon_fi_wire.c \
	contrib/ofi_provider/axon_fi_addr.c \
	contrib/ofi_provider/axon_fi_map.c \
	contrib/ofi_provider/axon_fi_av.c \
	contrib/ofi_provider/axon_fi_conn.c \
	contrib/ofi_provider/axon_fi_eps.c \
	contrib/ofi_provider/axon_fi_wait.c \
	contrib/ofi_provider/axon_fi_cq.c \
	contrib/ofi_provider/axon_fi_cntr.c \
	contrib/ofi_provider/axon_fi_poll.c \
	contrib/ofi_provider/axon_fi_mr.c \
	contrib/ofi_provider/axon_fi_eq.c \
	contrib/ofi_provider/axon_fi_ep.c \
	contrib/ofi_provider/axon_fi_xfer.c \
	contrib/ofi_provider/axon_fi_iov.c \
	contrib/ofi_provider/axon_fi_rkey.c \
	contrib/ofi_provider/axon_fi_rma.c \
	contrib/ofi_provider/axon_fi_event.c \
	contrib/ofi_provider/axon_fi_event_words.c \
	contrib/ofi_provider/axon_fi_ext.h \
	contrib/ofi_provider/axon_fi_progress.c \
	contrib/ofi_provider/axon_fi_mutex.c \
	contrib/ofi_provider/axon_fi_mutex.h \
	contrib/ofi_provider/axon_fi_atomic.c \
	contrib/ofi_provider/axon_fi_atomic_calc.c \
	contrib/ofi_provider/axon_fi_tagged.c \
	contrib/ofi_provider/axon_fi_msg.c \
	contrib/ofi_provider/axon_fi_mrecv.c \
	contrib/ofi_provider/axon_fi_nosys.c
# Only the installed headers (api/axon.h and the framework/axon_*.h it
# includes): the provider is a client of Axon like any MPI library.
contrib_ofi_provider_libaxon_fi_la_CPPFLAGS = -I$(top_srcdir)/api -I$(top_srcdir)/framework \
	$(LIBFABRIC_CFLAGS)
# -flto: the data path crosses files (tagged -> xfer -> cq); callgrind: 30
# fewer instructions per fi_trecv under Open MPI's osu_bw.
contrib_ofi_provider_libaxon_fi_la_CFLAGS   = $(AX_CFLAGS) -fvisibility=hidden -flto
contrib_ofi_provider_libaxon_fi_la_LDFLAGS  = -module -avoid-version -shared -flto
contrib_ofi_provider_libaxon_fi_la_LIBADD   = libaxon.la $(LIBFABRIC_LIBS) -lpthread
endif
EXTRA_DIST += contrib/ofi_provider/README.md
