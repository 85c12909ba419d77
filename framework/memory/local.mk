# framework/memory/: memory services for the transports: the memory
# monitor (userfaultfd) and the registration cache on top of it.
libaxon_la_SOURCES += \
	framework/memory/memmon.c \
	framework/memory/rcache.c

noinst_HEADERS += \
	framework/memory/memmon.h \
	framework/memory/rcache.h
