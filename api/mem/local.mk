# api/mem/: memory mapped for remote access and its packed keys.
libaxon_la_SOURCES += \
	api/mem/layout.c \
	api/mem/mem.c \
	api/mem/rkey.c \
	api/mem/rkey_format.c

noinst_HEADERS += \
	api/mem/layout.h \
	api/mem/mem.h \
	api/mem/rkey_format.h
