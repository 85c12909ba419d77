# api/: what MPI/SHMEM call; protocols are chosen here.
libaxon_la_SOURCES += \
	api/status.c \
	api/context.c \
	api/worker.c \
	api/address.c \
	api/endpoint.c \
	api/request.c \
	api/tag_match.c \
	api/tag_send.c \
	api/tag_recv.c \
	api/rndv.c \
	api/peer.c \
	api/mem.c \
	api/rkey.c \
	api/rma.c \
	api/rma_am.c \
	api/amo.c \
	api/introspect.c

noinst_HEADERS += \
	api/axon_int.h \
	api/address.h \
	api/request.h \
	api/tag_match.h \
	api/tag_proto.h \
	api/mem.h \
	api/rma.h \
	api/rma_proto.h
