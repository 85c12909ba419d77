# api/tag/: tag-matched messaging (eager, rendezvous) over the core's endpoints.
libaxon_la_SOURCES += \
	api/tag/tag_match.c \
	api/tag/tag_send.c \
	api/tag/tag_recv.c \
	api/tag/rndv.c \
	api/tag/rndv_runs.c \
	api/tag/rndv_rails.c

noinst_HEADERS += \
	api/tag/tag_match.h \
	api/tag/tag_proto.h \
	api/tag/tag_space.h
