# api/rma/: one-sided operations (put, get, flush, fence, atomics).
libaxon_la_SOURCES += \
	api/rma/rma.c \
	api/rma/rma_flush.c \
	api/rma/rma_am.c \
	api/rma/rma_rails.c \
	api/rma/amo.c

noinst_HEADERS += \
	api/rma/rma.h \
	api/rma/rma_proto.h
