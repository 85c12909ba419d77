# api/coll/: teams and collectives, rounds of messages in their own tag space.
libaxon_la_SOURCES += \
	api/coll/coll_dt.c \
	api/coll/coll.c \
	api/coll/coll_args.c \
	api/coll/coll_select.c \
	api/coll/coll_proto.c \
	api/coll/team.c \
	api/coll/team_join.c \
	api/coll/coll_offload.c \
	api/coll/coll_barrier.c \
	api/coll/coll_bcast.c \
	api/coll/coll_reduce.c \
	api/coll/coll_ring.c \
	api/coll/coll_bruck.c \
	api/coll/coll_alltoall.c \
	api/coll/coll_linear.c

noinst_HEADERS += \
	api/coll/coll_dt.h \
	api/coll/coll.h \
	api/coll/coll_algo.h \
	api/coll/coll_knomial.h
