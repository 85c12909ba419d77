# framework/: services every layer and component uses.
libaxon_la_SOURCES += \
	framework/status.c \
	framework/log.c \
	framework/config.c \
	framework/loader.c \
	framework/select.c \
	framework/mpool.c \
	framework/sys.c \
	framework/idle.c \
	framework/proc.c \
	framework/amo_cpu.c

noinst_HEADERS += \
	framework/list.h \
	framework/log.h \
	framework/config.h \
	framework/component.h \
	framework/loader.h \
	framework/select.h \
	framework/mpool.h \
	framework/sys.h \
	framework/idle.h \
	framework/proc.h \
	framework/amo_args.h \
	framework/amo_cpu.h
