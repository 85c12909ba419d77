# components/shm: processes on one host, a receive ring per worker in shared memory.
pkglib_LTLIBRARIES += components/shm/libaxon_shm.la
components_shm_libaxon_shm_la_SOURCES = \
	components/shm/shm_component.c \
	components/shm/shm_iface.c \
	components/shm/shm_cma.c \
	components/shm/shm_ep.c \
	components/shm/shm_wake.c \
	components/shm/shm_seg.c \
	components/shm/shm_calib.c \
	components/shm/shm_md.c \
	components/shm/shm_md.h \
	components/shm/shm_mem_seg.c \
	components/shm/shm_mem_seg.h \
	components/shm/shm_mem_share.c \
	components/shm/shm_mem_share.h \
	components/shm/shm_mem_table.c \
	components/shm/shm_mem_table.h \
	components/shm/shm_fifo.h \
	components/shm/shm_seg.h \
	components/shm/shm.h
components_shm_libaxon_shm_la_CFLAGS  = $(AM_CFLAGS) -fvisibility=hidden
components_shm_libaxon_shm_la_LDFLAGS = -module -avoid-version -shared
components_shm_libaxon_shm_la_LIBADD  = libaxon.la
