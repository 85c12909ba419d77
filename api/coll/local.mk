# api/coll/: collectives over teams of workers.
libaxon_la_SOURCES += \
	api/coll/coll_dt.c

noinst_HEADERS += \
	api/coll/coll_dt.h
