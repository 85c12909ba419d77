# framework/: services every layer and component uses. The base ones
# (status, log, config, system and process facts, CPU atomics) are what the
# device layer needs: softib's libibverbs.so.1 is built from them too.
axon_base_sources = \
	framework/status.c \
	framework/log.c \
	framework/config.c \
	framework/sys.c \
	framework/proc.c \
	framework/amo_cpu.c \
	framework/topo/topo_parse.c
libaxon_la_SOURCES += \
	$(axon_base_sources) \
	framework/loader.c \
	framework/select.c \
	framework/mpool.c \
	framework/idle.c

noinst_HEADERS += \
	framework/list.h \
	framework/log.h \
	framework/config.h \
	framework/component.h \
	framework/coll_offload.h \
	framework/loader.h \
	framework/select.h \
	framework/mpool.h \
	framework/sys.h \
	framework/idle.h \
	framework/proc.h \
	framework/amo_args.h \
	framework/amo_cpu.h \
	framework/byte_order.h

# framework/topo/: the host's topology (hwloc) for device choice and NUMA
# placement; without hwloc every device's locality is unknown.
AM_CPPFLAGS += -I$(top_srcdir)/framework/topo
noinst_HEADERS += framework/topo/topo.h framework/topo/topo_parse.h
if HAVE_HWLOC
libaxon_la_SOURCES += framework/topo/topo_hwloc.c
AM_CPPFLAGS += $(HWLOC_CFLAGS)
libaxon_la_LIBADD += $(HWLOC_LIBS)
else
libaxon_la_SOURCES += framework/topo/topo_none.c
endif

# framework/bootstrap/: a job's ranks and addresses from its launcher (PMIx).
AM_CPPFLAGS += -I$(top_srcdir)/framework/bootstrap
noinst_HEADERS += framework/bootstrap/bootstrap.h
if HAVE_PMIX
libaxon_la_SOURCES += framework/bootstrap/bootstrap_pmix.c
AM_CPPFLAGS += $(PMIX_CFLAGS)
libaxon_la_LIBADD += $(PMIX_LIBS)
else
libaxon_la_SOURCES += framework/bootstrap/bootstrap_none.c
endif
