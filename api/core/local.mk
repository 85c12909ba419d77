# api/core/: the objects behind the public handles and the request life cycle.
libaxon_la_SOURCES += \
	api/core/context.c \
	api/core/worker.c \
	api/core/worker_wait.c \
	api/core/address.c \
	api/core/endpoint.c \
	api/core/rails.c \
	api/core/request.c \
	api/core/peer.c \
	api/core/introspect.c \
	api/core/job.c \
	api/core/version.c

noinst_HEADERS += \
	api/core/axon_int.h \
	api/core/address.h \
	api/core/rails.h \
	api/core/request.h
